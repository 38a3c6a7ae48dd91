/*
 * calendar.h: where the windows of a fixed or sliding window limit begin and
 * end, and the civil-date arithmetic behind calendar months. Internal to
 * libsluice; pure integer arithmetic, no clock, no time zone database.
 *
 * A limit aligned with sl_limit_align() sees `now` through its offset: the
 * local wall time of `now` is now + l->local_offset_ns (Unix nanoseconds
 * shifted by the UTC offset). Windows of a fixed period p begin where
 * that local time, counted from Monday 1970-01-05 00:00, is a multiple of p;
 * a period that divides a day thus begins at local midnight, and a week on
 * a Monday. Windows of n calendar months begin on the first day of a month
 * at local midnight, every n months counted from January 1970; with a
 * reset day (sl_limit_align_day), on that day of the month instead, or on
 * the month's last day when it is shorter.
 */
#ifndef SL_ALGO_CALENDAR_H
#define SL_ALGO_CALENDAR_H

#include <stdint.h>

#include "common/arith.h"
#include "sluice.h"

#define SL_NS_PER_DAY INT64_C(86400000000000)

/* The days from 1970-01-01 to year y, month m (1-12), day d (1-31) of the
 * proleptic Gregorian calendar; negative before 1970. For |y| below 2^40. */
int64_t sl_days_from_civil(int64_t y, int m, int d);

/* The inverse: the date of `days` after 1970-01-01. */
void sl_civil_from_days(int64_t days, int64_t *y, int *m, int *d);

/* The window of a calendar-month limit that holds `now`: [*start, *end),
 * its months beginning on l->reset_day. */
void sl_month_window_at(const sl_limit *l, int64_t now, int64_t *start, int64_t *end);

/* The window of l that holds `now`: [*start, *end), start <= now < end.
 * start may lie before 0 (a window that began before the clock's zero);
 * end is at most INT64_MAX. */
static inline void sl_window_at(const sl_limit *l, int64_t now, int64_t *start, int64_t *end)
{
    if (l->months > 0) {
        sl_month_window_at(l, now, start, end);
        return;
    }
    int64_t p = l->period_ns, x = now - l->phase_ns;
    *start = x >= 0 ? l->phase_ns + (int64_t)sl_divide(&l->by_period, (uint64_t)x) * p
                    : l->phase_ns - p; /* -p < x < 0: the window before the phase */
    *end = *start + p;
}

/* The end of the window that begins at `start` (a state's window; a state
 * rebased from another clock may begin off the grid, and then keeps its
 * own length for a fixed period, or ends at the next month boundary). */
static inline int64_t sl_window_end(const sl_limit *l, int64_t start)
{
    if (l->months > 0) {
        int64_t s, e;
        sl_month_window_at(l, start, &s, &e);
        return e;
    }
    int64_t e;
    return __builtin_add_overflow(start, l->period_ns, &e) ? INT64_MAX : e;
}

#endif /* SL_ALGO_CALENDAR_H */
