/*
 * clock.h: the two clocks sluice reads, in integer nanoseconds.
 *
 * The algorithms never read a clock: their callers read one of these once
 * per request (or per batch of requests) and pass the time down, as Redis
 * takes one time snapshot per command.
 */
#ifndef SL_COMMON_CLOCK_H
#define SL_COMMON_CLOCK_H

#include <stdint.h>

/*
 * The monotonic clock: CLOCK_MONOTONIC, moved 2^55 ns (about 417 days)
 * ahead. It never steps, so a store run on it never sees time go back. A
 * snapshot restored after a reboot rebases its times onto this clock; the
 * offset keeps times from before the boot positive, so that a window that
 * ended before the reboot is still seen to have ended (times clamp at 0).
 * Every reader of sluiced's store, and the CLI, use this one clock.
 */
int64_t sl_now_mono(void);

/* Unix time (CLOCK_REALTIME): what a snapshot records, and what puts a
 * limit's windows on the calendar. It may step; never measure with it. */
int64_t sl_now_wall(void);

#endif /* SL_COMMON_CLOCK_H */
