/*
 * Windows on the wall clock and the calendar (src/algo/calendar.c): the
 * civil-date arithmetic against known dates and against a slow model that
 * walks the calendar a day at a time; fixed and sliding windows of days,
 * weeks and calendar months at UTC offsets, on a virtual clock, against a
 * slow model of where windows begin; and the same windows whatever the
 * caller's clock, once its offset from Unix time is given.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "algo/calendar.h"
#include "testlib.h"

#define NS_PER_DAY (86400 * NS_PER_SEC)
#define NS_PER_HOUR (3600 * NS_PER_SEC)

static bool model_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int model_month_days(int64_t y, int m)
{
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return days[m - 1] + (m == 2 && model_leap(y));
}

Test(calendar, known_dates)
{
    static const struct {
        int64_t y;
        int m, d;
        int64_t days;
    } cases[] = {
        {1970, 1, 1, 0},        {1969, 12, 31, -1},     {2000, 3, 1, 11017},
        {2024, 2, 29, 19782},   {2024, 3, 1, 19783},    {2023, 12, 31, 19722},
        {2024, 1, 1, 19723},    {2100, 2, 28, 47540},   {2100, 3, 1, 47541},
        {1600, 2, 29, -135081}, {1, 1, 1, -719162},     {9999, 12, 31, 2932896},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_eq(sl_days_from_civil(cases[i].y, cases[i].m, cases[i].d), cases[i].days,
                     "%lld-%d-%d", (long long)cases[i].y, cases[i].m, cases[i].d);
        int64_t y;
        int m, d;
        sl_civil_from_days(cases[i].days, &y, &m, &d);
        cr_assert(y == cases[i].y && m == cases[i].m && d == cases[i].d, "day %lld",
                  (long long)cases[i].days);
    }
}

/* Every day of three 400-year eras on each side of 1970, walked one at a
 * time: both conversions agree with the walk. */
Test(calendar, matches_a_day_by_day_walk)
{
    for (int dir = -1; dir <= 1; dir += 2) {
        int64_t y = 1970;
        int m = 1, d = 1;
        for (int64_t days = 0; days * dir <= 3 * 146097; days += dir) {
            cr_assert_eq(sl_days_from_civil(y, m, d), days);
            int64_t cy;
            int cm, cd;
            sl_civil_from_days(days, &cy, &cm, &cd);
            cr_assert(cy == y && cm == m && cd == d, "day %lld", (long long)days);
            if (dir > 0 && ++d > model_month_days(y, m)) {
                d = 1;
                if (++m > 12) {
                    m = 1;
                    y++;
                }
            } else if (dir < 0 && --d < 1) {
                if (--m < 1) {
                    m = 12;
                    y--;
                }
                d = model_month_days(y, m);
            }
        }
    }
}

/* Unix nanoseconds of a UTC date and time. */
static int64_t utc(int64_t y, int m, int d, int hh, int mm)
{
    return sl_days_from_civil(y, m, d) * NS_PER_DAY + (hh * 60 + mm) * 60 * NS_PER_SEC;
}

/* A window limit of `period` (months > 0: of calendar months), aligned at
 * utc_offset on a clock that reads Unix time minus clock_offset. */
static sl_limit window_limit(sl_algorithm a, int64_t limit, int64_t period, int64_t months,
                             int64_t utc_offset, int64_t clock_offset)
{
    sl_limit l;
    cr_assert_eq(sl_limit_init(&l, a, limit, months ? months * SL_MONTH_NS : period, 0), SL_OK);
    cr_assert_eq(sl_limit_align(&l, months, utc_offset, clock_offset), SL_OK);
    return l;
}

/* The window a fixed window limit puts `now` in, from one take. */
static void window_of(const sl_limit *l, int64_t now, int64_t *start, int64_t *end)
{
    int64_t st[2] = {0, 0};
    sl_decision d;
    cr_assert_eq(sl_take(l, st, now, 1, &d), SL_OK);
    cr_assert(d.allowed);
    *start = st[0];
    *end = now + d.reset_after_ns;
}

Test(calendar, days_and_weeks_begin_at_local_midnight_and_monday)
{
    int64_t s, e;
    sl_limit day = window_limit(SL_FIXED_WINDOW, 10, NS_PER_DAY, 0, 0, 0);
    window_of(&day, utc(2024, 5, 15, 13, 7), &s, &e);
    cr_assert(s == utc(2024, 5, 15, 0, 0) && e == utc(2024, 5, 16, 0, 0));

    /* -05:00: the local day begins at 05:00 UTC; 03:00 UTC is yesterday. */
    sl_limit ny = window_limit(SL_FIXED_WINDOW, 10, NS_PER_DAY, 0, -5 * NS_PER_HOUR, 0);
    window_of(&ny, utc(2024, 5, 15, 3, 0), &s, &e);
    cr_assert(s == utc(2024, 5, 14, 5, 0) && e == utc(2024, 5, 15, 5, 0));

    /* +05:30: hours begin at half past the UTC hour. */
    sl_limit hour = window_limit(SL_FIXED_WINDOW, 10, NS_PER_HOUR, 0, 330 * 60 * NS_PER_SEC, 0);
    window_of(&hour, utc(2024, 5, 15, 13, 7), &s, &e);
    cr_assert(s == utc(2024, 5, 15, 12, 30) && e == utc(2024, 5, 15, 13, 30));

    /* A week begins on Monday: Wednesday 2024-05-15 is in the week of the 13th. */
    sl_limit week = window_limit(SL_FIXED_WINDOW, 10, 7 * NS_PER_DAY, 0, 0, 0);
    window_of(&week, utc(2024, 5, 15, 13, 7), &s, &e);
    cr_assert(s == utc(2024, 5, 13, 0, 0) && e == utc(2024, 5, 20, 0, 0));
    window_of(&week, utc(2024, 5, 19, 23, 59), &s, &e); /* Sunday night */
    cr_assert(s == utc(2024, 5, 13, 0, 0));
    window_of(&week, utc(2024, 5, 20, 0, 0), &s, &e);
    cr_assert(s == utc(2024, 5, 20, 0, 0));
    /* and at +14:00 on the local Monday, Sunday 10:00 UTC */
    sl_limit kiribati = window_limit(SL_FIXED_WINDOW, 10, 7 * NS_PER_DAY, 0, 14 * NS_PER_HOUR, 0);
    window_of(&kiribati, utc(2024, 5, 19, 10, 0), &s, &e);
    cr_assert(s == utc(2024, 5, 19, 10, 0) && e == utc(2024, 5, 26, 10, 0));
}

Test(calendar, months_are_calendar_months)
{
    int64_t s, e;
    sl_limit mo = window_limit(SL_FIXED_WINDOW, 10, 0, 1, 0, 0);
    window_of(&mo, utc(2024, 2, 10, 12, 0), &s, &e); /* a leap February: 29 days */
    cr_assert(s == utc(2024, 2, 1, 0, 0) && e == utc(2024, 3, 1, 0, 0));
    cr_assert_eq(e - s, 29 * NS_PER_DAY);
    window_of(&mo, utc(2023, 2, 28, 23, 59), &s, &e); /* not a leap year */
    cr_assert_eq(e - s, 28 * NS_PER_DAY);
    window_of(&mo, utc(2100, 2, 1, 0, 0), &s, &e); /* nor is 2100 */
    cr_assert_eq(e - s, 28 * NS_PER_DAY);
    window_of(&mo, utc(2000, 2, 1, 0, 0), &s, &e); /* but 2000 is */
    cr_assert_eq(e - s, 29 * NS_PER_DAY);
    window_of(&mo, utc(2023, 12, 31, 23, 59) + 59 * NS_PER_SEC, &s, &e); /* December to January */
    cr_assert(s == utc(2023, 12, 1, 0, 0) && e == utc(2024, 1, 1, 0, 0));
    window_of(&mo, utc(2024, 1, 1, 0, 0), &s, &e);
    cr_assert(s == utc(2024, 1, 1, 0, 0) && e == utc(2024, 2, 1, 0, 0));

    /* -05:00: 03:00 UTC on March 1st is still February, locally. */
    sl_limit ny = window_limit(SL_FIXED_WINDOW, 10, 0, 1, -5 * NS_PER_HOUR, 0);
    window_of(&ny, utc(2024, 3, 1, 3, 0), &s, &e);
    cr_assert(s == utc(2024, 2, 1, 5, 0) && e == utc(2024, 3, 1, 5, 0));

    /* Quarters and years. */
    sl_limit q = window_limit(SL_FIXED_WINDOW, 10, 0, 3, 0, 0);
    window_of(&q, utc(2024, 5, 15, 0, 0), &s, &e);
    cr_assert(s == utc(2024, 4, 1, 0, 0) && e == utc(2024, 7, 1, 0, 0));
    sl_limit year = window_limit(SL_FIXED_WINDOW, 10, 0, 12, 0, 0);
    window_of(&year, utc(2024, 12, 31, 23, 0), &s, &e);
    cr_assert(s == utc(2024, 1, 1, 0, 0) && e == utc(2025, 1, 1, 0, 0));
    /* and before 1970, on a clock that began in 1960 */
    int64_t c = utc(1960, 1, 1, 0, 0);
    sl_limit old = window_limit(SL_FIXED_WINDOW, 10, 0, 1, 0, c);
    window_of(&old, utc(1969, 12, 15, 0, 0) - c, &s, &e);
    cr_assert(s + c == utc(1969, 12, 1, 0, 0) && e + c == utc(1970, 1, 1, 0, 0));
}

/* The first days of months 1900-01 .. 2200-12, walked a day at a time:
 * the model of where month windows begin. */
enum { MODEL_MONTHS = 301 * 12 };
static int64_t model_first[MODEL_MONTHS + 1];

static void model_months(void)
{
    int64_t days = -25567; /* 1900-01-01, from the walk in matches_a_day_by_day_walk */
    cr_assert_eq(sl_days_from_civil(1900, 1, 1), days);
    for (int i = 0; i <= MODEL_MONTHS; i++) {
        model_first[i] = days;
        days += model_month_days(1900 + i / 12, i % 12 + 1);
    }
}

/* [start, end) of the n-month window holding local time t (Unix ns + offset),
 * by search. */
static void model_window(int64_t t, int n, int64_t *start, int64_t *end)
{
    int i = 0;
    while ((model_first[i + 1]) * NS_PER_DAY <= t)
        i++;
    int first = i - ((i + 70 * 12) % n); /* months counted from 1970-01 (index 840) */
    *start = model_first[first] * NS_PER_DAY;
    *end = model_first[first + n] * NS_PER_DAY;
}

Test(calendar, month_windows_match_the_model)
{
    model_months();
    test_rng r = {42};
    static const int ns[] = {1, 2, 3, 6, 12, 7};
    for (int i = 0; i < 20000; i++) {
        int n = ns[test_range(&r, 0, 5)];
        int64_t utc_off = test_range(&r, -18 * 60, 18 * 60) * 60 * NS_PER_SEC;
        int64_t clock_off = test_range(&r, 0, 3) ? test_range(&r, 0, INT64_C(1) << 61) : 0;
        int64_t wall = test_range(&r, utc(1920, 1, 1, 0, 0), utc(2180, 1, 1, 0, 0));
        if (test_range(&r, 0, 3) == 0) /* on or next to a boundary */
            wall = utc(1920 + test_range(&r, 0, 259), (int)test_range(&r, 1, 12), 1, 0, 0) -
                   utc_off + test_range(&r, -1, 1);
        int64_t now = wall - clock_off;
        if (now < 0 || now > SL_TIME_MAX)
            continue; /* not a time sl_take takes */
        sl_limit l = window_limit(SL_FIXED_WINDOW, 5, 0, n, utc_off, clock_off);
        int64_t s, e, ms, me;
        window_of(&l, now, &s, &e);
        model_window(wall + utc_off, n, &ms, &me);
        cr_assert(s == ms - utc_off - clock_off && e == me - utc_off - clock_off,
                  "step %d: %d months at %lld", i, n, (long long)wall);
    }
}

/* A clock that is not Unix time gives the same windows once its offset is
 * given: sluiced's monotonic clock, rebased or not. */
Test(calendar, same_windows_on_any_clock)
{
    test_rng r = {7};
    for (int i = 0; i < 5000; i++) {
        int64_t period = test_range(&r, 0, 2) == 0 ? 7 * NS_PER_DAY
                         : test_range(&r, 0, 1)    ? NS_PER_DAY
                                                   : test_range(&r, 1, 100000) * NS_PER_MS;
        int64_t months = test_range(&r, 0, 3) == 0 ? test_range(&r, 1, 12) : 0;
        int64_t utc_off = test_range(&r, -12 * 4, 14 * 4) * 15 * 60 * NS_PER_SEC;
        int64_t wall = test_range(&r, utc(2000, 1, 1, 0, 0), utc(2100, 1, 1, 0, 0));
        int64_t clock_off = wall - test_range(&r, 0, INT64_C(1) << 56);
        sl_algorithm a = test_range(&r, 0, 1) ? SL_FIXED_WINDOW : SL_SLIDING_WINDOW;
        sl_limit on_wall = window_limit(a, 3, period, months, utc_off, 0);
        sl_limit mono = window_limit(a, 3, period, months, utc_off, clock_off);
        int64_t sw[3] = {0}, sm[3] = {0};
        sl_decision dw, dm;
        for (int k = 0; k < 5; k++) {
            int64_t t = wall + k * test_range(&r, 0, period / 2);
            cr_assert_eq(sl_take(&on_wall, sw, t, 1, &dw), SL_OK);
            cr_assert_eq(sl_take(&mono, sm, t - clock_off, 1, &dm), SL_OK);
            cr_assert(dw.allowed == dm.allowed && dw.remaining == dm.remaining &&
                      dw.reset_after_ns == dm.reset_after_ns &&
                      dw.retry_after_ns == dm.retry_after_ns);
            cr_assert_eq(sw[0], sm[0] + clock_off);
        }
    }
}

Test(calendar, the_previous_month_weighs_by_the_share_still_to_come)
{
    /* 100 a month; all 100 spent in February 2024 (29 days). */
    sl_limit l = window_limit(SL_SLIDING_WINDOW, 100, 0, 1, 0, 0);
    int64_t st[3] = {0};
    sl_decision d;
    cr_assert_eq(sl_take(&l, st, utc(2024, 2, 10, 0, 0), 100, &d), SL_OK);
    cr_assert(d.allowed);
    /* Halfway through March (31 days): 15.5 days in, prev weighs
     * 100 * (31d - 1 - 15.5d) / 31d, so 50 fit and a 51st does not:
     * 100 * (15.5d + 1 ns) / 31d is 50 and a hair. */
    int64_t now = utc(2024, 3, 16, 12, 0);
    cr_assert_eq(sl_peek(&l, st, now, 50, &d), SL_OK);
    cr_assert(d.allowed);
    cr_assert_eq(d.remaining, 0); /* prev's share, a hair under 50, counts as 50 */
    cr_assert_eq(sl_peek(&l, st, now, 51, &d), SL_OK);
    cr_assert(!d.allowed);
    /* 51 fit once 100 * (31d - 1 - e) <= 49 * 31d, e the time into March. */
    int64_t e = 31 * NS_PER_DAY - 1 - 49 * 31 * NS_PER_DAY / 100;
    cr_assert_eq(d.retry_after_ns, utc(2024, 3, 1, 0, 0) + e - now);
    cr_assert_eq(sl_peek(&l, st, now + d.retry_after_ns, 51, &d), SL_OK);
    cr_assert(d.allowed);
    cr_assert_eq(sl_peek(&l, st, now + 0, 100, &d), SL_OK);
    cr_assert(!d.allowed);
    /* February counts until March ends; April sees nothing of it. */
    cr_assert_eq(d.reset_after_ns, utc(2024, 4, 1, 0, 0) - now);
    cr_assert_eq(sl_peek(&l, st, utc(2024, 3, 31, 23, 59), 99, &d), SL_OK);
    cr_assert(d.allowed);
    cr_assert_eq(sl_peek(&l, st, utc(2024, 4, 1, 0, 0), 100, &d), SL_OK);
    cr_assert(d.allowed && d.remaining == 0);
}

/* The sliding window counter over months against a slow model: windows
 * from model_window, the estimate by the formula, compared exactly. */
Test(calendar, sliding_months_match_the_model)
{
    model_months();
    test_rng r = {99};
    for (int trial = 0; trial < 40; trial++) {
        int n = (int)test_range(&r, 1, 3);
        int64_t lim = test_range(&r, 1, 50);
        int64_t utc_off = test_range(&r, -12, 14) * NS_PER_HOUR;
        sl_limit l = window_limit(SL_SLIDING_WINDOW, lim, 0, n, utc_off, 0);
        int64_t st[3] = {0};
        int64_t wstart = INT64_MIN, cur = 0, prev = 0; /* the model's state, local times */
        int64_t t = utc(2020 + test_range(&r, 0, 50), 1, 1, 0, 0);
        for (int i = 0; i < 1500; i++) {
            t += test_range(&r, 0, 3) ? test_range(&r, 0, 2 * NS_PER_DAY)
                                      : test_range(&r, 0, 70 * NS_PER_DAY);
            int64_t c = test_range(&r, 1, 4);
            int64_t ms, me, ps, pe;
            model_window(t + utc_off, n, &ms, &me);
            if (ms != wstart) {
                model_window(ms - 1, n, &ps, &pe);
                prev = ps == wstart ? cur : 0;
                cur = 0;
                wstart = ms;
            }
            int64_t p = me - ms, el = t + utc_off - ms;
            sl_u128 lhs = (sl_u128)prev * (uint64_t)(p - 1 - el) + (sl_u128)(cur + c) * p;
            bool model = c <= lim && lhs <= (sl_u128)lim * (uint64_t)p;
            sl_decision d;
            cr_assert_eq(sl_take(&l, st, t, c, &d), SL_OK);
            cr_assert_eq(d.allowed, model, "trial %d step %d", trial, i);
            if (model)
                cur += c;
            if (!d.allowed && c <= lim) { /* retry_after is the first moment it fits */
                sl_decision later;
                sl_peek(&l, st, t + d.retry_after_ns, c, &later);
                cr_assert(later.allowed);
                sl_peek(&l, st, t + d.retry_after_ns - 1, c, &later);
                cr_assert(!later.allowed);
            }
        }
    }
}

Test(calendar, align_refuses_what_it_cannot_do)
{
    sl_limit l;
    cr_assert_eq(sl_limit_init(&l, SL_SLIDING_LOG, 10, SL_MONTH_NS, 0), SL_OK);
    cr_assert_eq(sl_limit_align(&l, 1, 0, 0), SL_ERR_PERIOD); /* a log has no calendar */
    cr_assert_eq(sl_limit_align(&l, 0, 0, 0), SL_OK);
    cr_assert_eq(sl_limit_init(&l, SL_FIXED_WINDOW, 10, SL_MONTH_NS, 0), SL_OK);
    cr_assert_eq(sl_limit_align(&l, SL_MONTHS_MAX + 1, 0, 0), SL_ERR_PERIOD);
    cr_assert_eq(sl_limit_align(&l, -1, 0, 0), SL_ERR_PERIOD);
    cr_assert_eq(sl_limit_align(&l, 1, SL_UTC_OFFSET_MAX + 1, 0), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_limit_align(&l, 1, 0, SL_TIME_MAX + 1), SL_ERR_ARGUMENT);
    cr_assert_eq(l.months, 0, "unchanged on error");
    /* GCRA meters a rate: a month is its mean length, and no calendar. */
    cr_assert_eq(sl_limit_init(&l, SL_GCRA, 10, SL_MONTH_NS, 0), SL_OK);
    cr_assert_eq(sl_limit_align(&l, 1, 0, 0), SL_OK);
    sl_decision d;
    void *st = test_state(&l);
    cr_assert_eq(sl_take(&l, st, SL_MONTH_NS, 1, &d), SL_OK);
    cr_assert_eq(d.reset_after_ns, SL_MONTH_NS / 10);
    free(st);
    sl_limit blank;
    memset(&blank, 0, sizeof blank);
    cr_assert_eq(sl_limit_align(&blank, 0, 0, 0), SL_ERR_ARGUMENT);
}

/* The far ends of the clock: no overflow (UBSan watches) and windows that
 * still hold now. */
Test(calendar, extreme_times_stay_in_range)
{
    int64_t offs[] = {-SL_TIME_MAX, 0, SL_TIME_MAX};
    int64_t nows[] = {0, 1, SL_TIME_MAX / 2, SL_TIME_MAX};
    for (int a = 0; a < 2; a++)
        for (int m = 0; m <= SL_MONTHS_MAX; m += SL_MONTHS_MAX / 2)
            for (size_t o = 0; o < 3; o++)
                for (size_t k = 0; k < 4; k++) {
                    sl_limit l = window_limit(a ? SL_SLIDING_WINDOW : SL_FIXED_WINDOW, 3,
                                              SL_SPAN_MAX, m, SL_UTC_OFFSET_MAX, offs[o]);
                    int64_t st[3] = {0};
                    sl_decision d;
                    for (int i = 0; i < 5; i++) {
                        cr_assert_eq(sl_take(&l, st, nows[k], 1, &d), SL_OK);
                        cr_assert_geq(d.reset_after_ns, 0);
                        cr_assert_geq(d.retry_after_ns, 0);
                    }
                    cr_assert_geq(sl_state_expires_at(&l, st), nows[k]);
                }
}
