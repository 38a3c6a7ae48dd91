/*
 * clock.c: the monotonic and the wall clock (see clock.h).
 */
#include "common/clock.h"

#include <time.h>

/* See sl_now_mono in clock.h for why the monotonic clock is moved ahead. */
#define SL_CLOCK_OFFSET (INT64_C(1) << 55)

int64_t sl_now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return SL_CLOCK_OFFSET + (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t sl_now_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t sl_clock_offset(void)
{
    int64_t before = sl_now_mono(), wall = sl_now_wall(), after = sl_now_mono();
    return wall - (before + (after - before) / 2);
}
