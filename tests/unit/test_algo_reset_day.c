/*
 * Windows of months that begin on a reset day (sl_limit_align_day,
 * src/algo/calendar.c): known billing cycles across month ends, February
 * and leap years, days 29 to 31 on the shorter months' last day, negative
 * and positive UTC offsets, several months at once; and random times
 * against a slow model that walks the calendar a day at a time, for the
 * fixed window and the sliding window counter, on a virtual clock. Day 1 is
 * sl_limit_align's windows exactly.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "algo/calendar.h"
#include "algo/share.h"
#include "testlib.h"

#define NS_PER_DAY (86400 * NS_PER_SEC)
#define NS_PER_HOUR (3600 * NS_PER_SEC)

/* ---- a slow model of the calendar, independent of calendar.c ---- */

static bool model_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int model_month_days(int64_t y, int m)
{
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return days[m - 1] + (m == 2 && model_leap(y));
}

/* The first day (days from 1970-01-01) of every month 1900-01 .. 2200-12,
 * and each month's length, by walking the months from 1900-01-01. */
enum { MODEL_MONTHS = 301 * 12, MODEL_1970 = 70 * 12 };
static int64_t model_first[MODEL_MONTHS + 1];
static int model_len[MODEL_MONTHS + 1];

static void model_months(void)
{
    int64_t days = -25567; /* 1900-01-01: 70 years of 365 days and 17 leap days before 1970 */
    for (int i = 0; i <= MODEL_MONTHS; i++) {
        model_first[i] = days;
        model_len[i] = model_month_days(1900 + i / 12, i % 12 + 1);
        days += model_len[i];
    }
}

/* The day the cycle of month i begins on: day `day`, or the month's last. */
static int64_t model_reset(int i, int day)
{
    return model_first[i] + (day < model_len[i] ? day : model_len[i]) - 1;
}

/* [start, end) of the n-month window holding local time t (Unix ns +
 * offset), with cycles beginning on `day`: the latest cycle start at or
 * before t whose month is a multiple of n from January 1970, by search. */
static void model_window(int64_t t, int n, int day, int64_t *start, int64_t *end)
{
    int i = 1;
    while (model_reset(i + 1, day) * NS_PER_DAY <= t)
        i++;
    while (model_reset(i, day) * NS_PER_DAY > t)
        i--;
    i -= (i - MODEL_1970 + 1000 * n) % n;
    *start = model_reset(i, day) * NS_PER_DAY;
    *end = model_reset(i + n, day) * NS_PER_DAY;
}

/* ---- helpers ---- */

/* Unix nanoseconds of a UTC date and time. */
static int64_t utc(int64_t y, int m, int d, int hh, int mm)
{
    return sl_days_from_civil(y, m, d) * NS_PER_DAY + (hh * 60 + mm) * 60 * NS_PER_SEC;
}

static sl_limit day_limit(sl_algorithm a, int64_t limit, int64_t months, int64_t day,
                          int64_t utc_offset, int64_t clock_offset)
{
    sl_limit l;
    cr_assert_eq(sl_limit_init(&l, a, limit, months * SL_MONTH_NS, 0), SL_OK);
    cr_assert_eq(sl_limit_align_day(&l, months, day, utc_offset, clock_offset), SL_OK);
    return l;
}

/* The window a fixed window limit puts `now` in, from one take on a fresh
 * state. */
static void window_of(const sl_limit *l, int64_t now, int64_t *start, int64_t *end)
{
    int64_t st[2] = {0, 0};
    sl_decision d;
    cr_assert_eq(sl_take(l, st, now, 1, &d), SL_OK);
    cr_assert(d.allowed);
    *start = st[0];
    *end = now + d.reset_after_ns;
}

#define WINDOW_IS(l, now, s0, e0)                                                              \
    do {                                                                                       \
        int64_t s_, e_;                                                                        \
        window_of(l, now, &s_, &e_);                                                           \
        cr_assert(s_ == (s0) && e_ == (e0), "at %lld: [%lld, %lld), want [%lld, %lld)",       \
                  (long long)(now), (long long)s_, (long long)e_, (long long)(s0),             \
                  (long long)(e0));                                                            \
    } while (0)

/* ---- known cycles ---- */

Test(reset_day, a_cycle_from_the_15th_to_the_15th)
{
    sl_limit l = day_limit(SL_FIXED_WINDOW, 10, 1, 15, 0, 0);
    cr_assert_eq(l.reset_day, 15);
    WINDOW_IS(&l, utc(2024, 2, 3, 12, 0), utc(2024, 1, 15, 0, 0), utc(2024, 2, 15, 0, 0));
    WINDOW_IS(&l, utc(2024, 2, 15, 0, 0) - 1, utc(2024, 1, 15, 0, 0), utc(2024, 2, 15, 0, 0));
    WINDOW_IS(&l, utc(2024, 2, 15, 0, 0), utc(2024, 2, 15, 0, 0), utc(2024, 3, 15, 0, 0));
    WINDOW_IS(&l, utc(2024, 2, 29, 23, 59), utc(2024, 2, 15, 0, 0), utc(2024, 3, 15, 0, 0));
    /* December into January, and the year with it. */
    WINDOW_IS(&l, utc(2024, 1, 1, 0, 0), utc(2023, 12, 15, 0, 0), utc(2024, 1, 15, 0, 0));
    WINDOW_IS(&l, utc(2023, 12, 31, 23, 0), utc(2023, 12, 15, 0, 0), utc(2024, 1, 15, 0, 0));
    /* A cycle is as long as the month it begins in: January 15th to
     * February 15th is January's 31 days, February 15th to March 15th a
     * leap February's 29 (28 in 2023). */
    int64_t s, e;
    window_of(&l, utc(2024, 1, 20, 0, 0), &s, &e);
    cr_assert_eq(e - s, 31 * NS_PER_DAY);
    window_of(&l, utc(2024, 3, 1, 0, 0), &s, &e);
    cr_assert_eq(e - s, 29 * NS_PER_DAY);
    window_of(&l, utc(2023, 3, 1, 0, 0), &s, &e);
    cr_assert_eq(e - s, 28 * NS_PER_DAY);
    /* Before 1970, on a clock that began in 1960. */
    int64_t c = utc(1960, 1, 1, 0, 0);
    sl_limit old = day_limit(SL_FIXED_WINDOW, 10, 1, 15, 0, c);
    WINDOW_IS(&old, utc(1969, 12, 10, 0, 0) - c, utc(1969, 11, 15, 0, 0) - c,
              utc(1969, 12, 15, 0, 0) - c);
}

Test(reset_day, days_a_month_lacks_fall_on_its_last_day)
{
    /* 31: every month's last day but those with 31 days, theirs. */
    sl_limit l31 = day_limit(SL_FIXED_WINDOW, 10, 1, 31, 0, 0);
    WINDOW_IS(&l31, utc(2024, 2, 10, 0, 0), utc(2024, 1, 31, 0, 0), utc(2024, 2, 29, 0, 0));
    WINDOW_IS(&l31, utc(2024, 2, 29, 0, 0), utc(2024, 2, 29, 0, 0), utc(2024, 3, 31, 0, 0));
    WINDOW_IS(&l31, utc(2024, 3, 30, 23, 59), utc(2024, 2, 29, 0, 0), utc(2024, 3, 31, 0, 0));
    WINDOW_IS(&l31, utc(2024, 4, 30, 0, 0), utc(2024, 4, 30, 0, 0), utc(2024, 5, 31, 0, 0));
    WINDOW_IS(&l31, utc(2024, 4, 29, 0, 0), utc(2024, 3, 31, 0, 0), utc(2024, 4, 30, 0, 0));
    WINDOW_IS(&l31, utc(2023, 2, 28, 0, 0), utc(2023, 2, 28, 0, 0), utc(2023, 3, 31, 0, 0));
    WINDOW_IS(&l31, utc(2023, 2, 27, 0, 0), utc(2023, 1, 31, 0, 0), utc(2023, 2, 28, 0, 0));
    /* 2100 is no leap year, 2000 is one. */
    WINDOW_IS(&l31, utc(2100, 3, 1, 0, 0), utc(2100, 2, 28, 0, 0), utc(2100, 3, 31, 0, 0));
    WINDOW_IS(&l31, utc(2000, 3, 1, 0, 0), utc(2000, 2, 29, 0, 0), utc(2000, 3, 31, 0, 0));

    /* 30 and 29: February's last day, the day itself in other months. */
    sl_limit l30 = day_limit(SL_FIXED_WINDOW, 10, 1, 30, 0, 0);
    WINDOW_IS(&l30, utc(2023, 3, 5, 0, 0), utc(2023, 2, 28, 0, 0), utc(2023, 3, 30, 0, 0));
    WINDOW_IS(&l30, utc(2024, 1, 31, 0, 0), utc(2024, 1, 30, 0, 0), utc(2024, 2, 29, 0, 0));
    sl_limit l29 = day_limit(SL_FIXED_WINDOW, 10, 1, 29, 0, 0);
    WINDOW_IS(&l29, utc(2024, 2, 29, 0, 0), utc(2024, 2, 29, 0, 0), utc(2024, 3, 29, 0, 0));
    WINDOW_IS(&l29, utc(2024, 2, 28, 23, 59), utc(2024, 1, 29, 0, 0), utc(2024, 2, 29, 0, 0));
    WINDOW_IS(&l29, utc(2023, 2, 28, 0, 0), utc(2023, 2, 28, 0, 0), utc(2023, 3, 29, 0, 0));
    /* 28: every month has it. */
    sl_limit l28 = day_limit(SL_FIXED_WINDOW, 10, 1, 28, 0, 0);
    WINDOW_IS(&l28, utc(2024, 2, 29, 0, 0), utc(2024, 2, 28, 0, 0), utc(2024, 3, 28, 0, 0));
}

Test(reset_day, at_the_utc_offset)
{
    /* -05:00: the 15th begins at 05:00 UTC; 03:00 UTC is the 14th there. */
    sl_limit ny = day_limit(SL_FIXED_WINDOW, 10, 1, 15, -5 * NS_PER_HOUR, 0);
    WINDOW_IS(&ny, utc(2024, 3, 15, 3, 0), utc(2024, 2, 15, 5, 0), utc(2024, 3, 15, 5, 0));
    WINDOW_IS(&ny, utc(2024, 3, 15, 5, 0), utc(2024, 3, 15, 5, 0), utc(2024, 4, 15, 5, 0));
    /* +09:00: the 15th begins at 15:00 UTC on the 14th. */
    sl_limit tokyo = day_limit(SL_FIXED_WINDOW, 10, 1, 15, 9 * NS_PER_HOUR, 0);
    WINDOW_IS(&tokyo, utc(2024, 3, 14, 14, 59), utc(2024, 2, 14, 15, 0), utc(2024, 3, 14, 15, 0));
    WINDOW_IS(&tokyo, utc(2024, 3, 14, 15, 0), utc(2024, 3, 14, 15, 0), utc(2024, 4, 14, 15, 0));
    /* +05:30 on the last day of a leap February: 18:30 UTC on the 28th. */
    sl_limit delhi = day_limit(SL_FIXED_WINDOW, 10, 1, 31, 330 * 60 * NS_PER_SEC, 0);
    WINDOW_IS(&delhi, utc(2024, 2, 28, 18, 30), utc(2024, 2, 28, 18, 30),
              utc(2024, 3, 30, 18, 30));
    WINDOW_IS(&delhi, utc(2024, 2, 28, 18, 29), utc(2024, 1, 30, 18, 30),
              utc(2024, 2, 28, 18, 30));
}

Test(reset_day, several_months_begin_on_the_day_of_every_nth)
{
    /* Quarters from the 10th: January, April, July, October. */
    sl_limit q = day_limit(SL_FIXED_WINDOW, 10, 3, 10, 0, 0);
    WINDOW_IS(&q, utc(2024, 1, 5, 0, 0), utc(2023, 10, 10, 0, 0), utc(2024, 1, 10, 0, 0));
    WINDOW_IS(&q, utc(2024, 1, 10, 0, 0), utc(2024, 1, 10, 0, 0), utc(2024, 4, 10, 0, 0));
    WINDOW_IS(&q, utc(2024, 4, 9, 23, 59), utc(2024, 1, 10, 0, 0), utc(2024, 4, 10, 0, 0));
    /* A year from January 31st; two months from the 30th, through February. */
    sl_limit y = day_limit(SL_FIXED_WINDOW, 10, 12, 31, 0, 0);
    WINDOW_IS(&y, utc(2024, 1, 30, 0, 0), utc(2023, 1, 31, 0, 0), utc(2024, 1, 31, 0, 0));
    sl_limit two = day_limit(SL_FIXED_WINDOW, 10, 2, 30, 0, 0);
    WINDOW_IS(&two, utc(2023, 3, 29, 0, 0), utc(2023, 1, 30, 0, 0), utc(2023, 3, 30, 0, 0));
}

/* A take after the window holds its count until the reset day; the state
 * expires there, and the next take begins a new count. */
Test(reset_day, the_count_resets_on_the_day)
{
    sl_limit l = day_limit(SL_FIXED_WINDOW, 3, 1, 15, 0, 0);
    int64_t st[2] = {0, 0};
    sl_decision d;
    int64_t t = utc(2024, 2, 20, 0, 0);
    cr_assert_eq(sl_take(&l, st, t, 3, &d), SL_OK);
    cr_assert(d.allowed && d.remaining == 0);
    cr_assert_eq(d.reset_after_ns, utc(2024, 3, 15, 0, 0) - t);
    cr_assert_eq(sl_state_expires_at(&l, st), utc(2024, 3, 15, 0, 0));
    cr_assert_eq(sl_take(&l, st, utc(2024, 3, 14, 23, 59), 1, &d), SL_OK);
    cr_assert(!d.allowed);
    cr_assert_eq(d.retry_after_ns, 60 * NS_PER_SEC);
    cr_assert_eq(sl_take(&l, st, utc(2024, 3, 15, 0, 0), 1, &d), SL_OK);
    cr_assert(d.allowed && d.remaining == 2);
}

/* ---- day 1 is the first, as sl_limit_align has it ---- */

Test(reset_day, day_one_and_zero_are_the_first)
{
    test_rng r = {3};
    for (int i = 0; i < 3000; i++) {
        int64_t months = test_range(&r, 1, 24);
        int64_t off = test_range(&r, -18 * 4, 18 * 4) * 15 * 60 * NS_PER_SEC;
        int64_t clock = test_range(&r, 0, 1) ? test_range(&r, 0, INT64_C(1) << 60) : 0;
        int64_t now = test_range(&r, 0, INT64_C(1) << 61);
        sl_limit plain, one, zero;
        cr_assert_eq(sl_limit_init(&plain, SL_FIXED_WINDOW, 5, months * SL_MONTH_NS, 0), SL_OK);
        one = zero = plain;
        cr_assert_eq(sl_limit_align(&plain, months, off, clock), SL_OK);
        cr_assert_eq(sl_limit_align_day(&one, months, 1, off, clock), SL_OK);
        cr_assert_eq(sl_limit_align_day(&zero, months, 0, off, clock), SL_OK);
        cr_assert(memcmp(&plain, &one, sizeof plain) == 0 &&
                  memcmp(&plain, &zero, sizeof plain) == 0, "the same limit, byte for byte");
        int64_t s1, e1, s2, e2;
        sl_window_at(&plain, now, &s1, &e1);
        sl_window_at(&one, now, &s2, &e2);
        cr_assert(s1 == s2 && e1 == e2);
    }
}

/* ---- against the model ---- */

Test(reset_day, windows_match_the_model)
{
    model_months();
    test_rng r = {2024};
    static const int ns[] = {1, 1, 1, 2, 3, 6, 12, 7};
    for (int i = 0; i < 30000; i++) {
        int n = ns[test_range(&r, 0, 7)];
        int day = (int)test_range(&r, 1, 31);
        int64_t utc_off = test_range(&r, -18 * 60, 18 * 60) * 60 * NS_PER_SEC;
        int64_t clock_off = test_range(&r, 0, 3) ? test_range(&r, 0, INT64_C(1) << 61) : 0;
        int64_t wall = test_range(&r, utc(1920, 1, 1, 0, 0), utc(2180, 1, 1, 0, 0));
        if (test_range(&r, 0, 2) == 0) { /* on or next to a cycle's boundary */
            int mi = (int)test_range(&r, 20 * 12, 279 * 12);
            wall = model_reset(mi, day) * NS_PER_DAY - utc_off + test_range(&r, -1, 1);
        }
        int64_t now = wall - clock_off;
        if (now < 0 || now > SL_TIME_MAX)
            continue; /* not a time sl_take takes */
        sl_limit l = day_limit(SL_FIXED_WINDOW, 5, n, day, utc_off, clock_off);
        int64_t s, e, ms, me;
        window_of(&l, now, &s, &e);
        model_window(wall + utc_off, n, day, &ms, &me);
        cr_assert(s == ms - utc_off - clock_off && e == me - utc_off - clock_off,
                  "step %d: %d months from day %d at %lld", i, n, day, (long long)wall);
        /* and a state that began there ends where the window does */
        cr_assert_eq(sl_window_end(&l, s), e);
    }
}

/* The sliding window counter over cycles from a reset day against a slow
 * model: windows from model_window, the estimate by the formula. */
Test(reset_day, sliding_cycles_match_the_model)
{
    model_months();
    test_rng r = {515};
    for (int trial = 0; trial < 40; trial++) {
        int n = (int)test_range(&r, 1, 3);
        int day = (int)test_range(&r, 2, 31);
        int64_t lim = test_range(&r, 1, 50);
        int64_t utc_off = test_range(&r, -12, 14) * NS_PER_HOUR;
        sl_limit l = day_limit(SL_SLIDING_WINDOW, lim, n, day, utc_off, 0);
        int64_t st[3] = {0};
        int64_t wstart = INT64_MIN, cur = 0, prev = 0; /* the model's state, local times */
        int64_t t = utc(2020 + test_range(&r, 0, 50), 1, 1, 0, 0);
        for (int i = 0; i < 1500; i++) {
            t += test_range(&r, 0, 3) ? test_range(&r, 0, 2 * NS_PER_DAY)
                                      : test_range(&r, 0, 70 * NS_PER_DAY);
            int64_t c = test_range(&r, 1, 4);
            int64_t ms, me, ps, pe;
            model_window(t + utc_off, n, day, &ms, &me);
            if (ms != wstart) {
                model_window(ms - 1, n, day, &ps, &pe);
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
        }
    }
}

/* ---- what align refuses, and what carries the day ---- */

Test(reset_day, align_refuses_what_it_cannot_do)
{
    sl_limit l;
    cr_assert_eq(sl_limit_init(&l, SL_FIXED_WINDOW, 10, SL_MONTH_NS, 0), SL_OK);
    cr_assert_eq(sl_limit_align_day(&l, 1, 32, 0, 0), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_limit_align_day(&l, 1, -1, 0, 0), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_limit_align_day(&l, 0, 15, 0, 0), SL_ERR_PERIOD); /* no months */
    cr_assert_eq(l.months, 0, "unchanged on error");
    cr_assert_eq(l.reset_day, 0, "unchanged on error");
    cr_assert_eq(sl_limit_align_day(&l, 0, 1, 0, 0), SL_OK); /* the first: nothing to say */
    cr_assert_eq(sl_limit_align_day(&l, 1, 31, 0, 0), SL_OK);
    cr_assert_eq(l.reset_day, 31);
    cr_assert_eq(sl_limit_align(&l, 1, 0, 0), SL_OK); /* sl_limit_align: the first again */
    cr_assert_eq(l.reset_day, 0);
    cr_assert_eq(sl_limit_init(&l, SL_SLIDING_LOG, 10, SL_MONTH_NS, 0), SL_OK);
    cr_assert_eq(sl_limit_align_day(&l, 1, 15, 0, 0), SL_ERR_PERIOD);
    /* GCRA meters a rate: the day, like the months, changes nothing there. */
    cr_assert_eq(sl_limit_init(&l, SL_GCRA, 10, SL_MONTH_NS, 0), SL_OK);
    cr_assert_eq(sl_limit_align_day(&l, 1, 15, 0, 0), SL_OK);
    sl_decision d;
    void *st = test_state(&l);
    cr_assert_eq(sl_take(&l, st, SL_MONTH_NS, 1, &d), SL_OK);
    cr_assert_eq(d.reset_after_ns, SL_MONTH_NS / 10);
    free(st);
}

Test(reset_day, a_share_keeps_the_day)
{
    sl_limit whole, share;
    cr_assert_eq(sl_limit_init(&whole, SL_FIXED_WINDOW, 90, SL_MONTH_NS, 0), SL_OK);
    cr_assert_eq(sl_limit_carry(&whole), SL_OK);
    cr_assert_eq(sl_limit_align_day(&whole, 1, 15, -5 * NS_PER_HOUR, 123456789), SL_OK);
    cr_assert_eq(sl_limit_share(&whole, 3, &share), SL_OK);
    cr_assert_eq(share.limit, 30);
    cr_assert_eq(share.reset_day, 15);
    int64_t s1, e1, s2, e2, now = utc(2024, 2, 3, 0, 0) - 123456789;
    sl_window_at(&whole, now, &s1, &e1);
    sl_window_at(&share, now, &s2, &e2);
    cr_assert(s1 == s2 && e1 == e2);
    cr_assert_eq(s1 + 123456789, utc(2024, 1, 15, 5, 0));
}

/* The far ends of the clock with the latest day: no overflow (UBSan
 * watches) and windows that still hold now. */
Test(reset_day, extreme_times_stay_in_range)
{
    int64_t offs[] = {-SL_TIME_MAX, 0, SL_TIME_MAX};
    int64_t nows[] = {0, 1, SL_TIME_MAX / 2, SL_TIME_MAX};
    int64_t utcs[] = {-SL_UTC_OFFSET_MAX, SL_UTC_OFFSET_MAX};
    for (int a = 0; a < 2; a++)
        for (int m = 1; m <= SL_MONTHS_MAX; m += SL_MONTHS_MAX / 2)
            for (size_t o = 0; o < 3; o++)
                for (size_t u = 0; u < 2; u++)
                    for (size_t k = 0; k < 4; k++) {
                        sl_limit l = day_limit(a ? SL_SLIDING_WINDOW : SL_FIXED_WINDOW, 3, m,
                                               31, utcs[u], offs[o]);
                        int64_t st[3] = {0};
                        sl_decision d;
                        for (int i = 0; i < 5; i++) {
                            cr_assert_eq(sl_take(&l, st, nows[k], 1, &d), SL_OK);
                            cr_assert_geq(d.reset_after_ns, 0);
                            cr_assert_geq(d.retry_after_ns, 0);
                        }
                        cr_assert_geq(sl_state_expires_at(&l, st), nows[k]);
                        int64_t s, e;
                        sl_window_at(&l, nows[k], &s, &e);
                        cr_assert(s <= nows[k] && nows[k] < e);
                    }
}

/* A limit whose day moves (a reload): a state keeps its window until the
 * first new boundary after it began, as the reload's log line says. */
Test(reset_day, a_moved_day_ends_a_window_at_the_first_new_boundary)
{
    sl_limit from1 = day_limit(SL_FIXED_WINDOW, 3, 1, 1, 0, 0);
    sl_limit to15 = day_limit(SL_FIXED_WINDOW, 3, 1, 15, 0, 0);
    int64_t st[2] = {0, 0};
    sl_decision d;
    cr_assert_eq(sl_take(&from1, st, utc(2024, 3, 3, 0, 0), 3, &d), SL_OK);
    cr_assert(d.allowed); /* all of [Mar 1, Apr 1) */
    int64_t kept[2] = {st[0], st[1]};
    cr_assert_eq(sl_peek(&to15, kept, utc(2024, 3, 10, 0, 0), 1, &d), SL_OK);
    cr_assert(!d.allowed, "before the first 15th after March 1st: still counted");
    cr_assert_eq(d.retry_after_ns, utc(2024, 3, 15, 0, 0) - utc(2024, 3, 10, 0, 0));
    cr_assert_eq(sl_peek(&to15, kept, utc(2024, 3, 20, 0, 0), 1, &d), SL_OK);
    cr_assert(d.allowed && d.remaining == 2, "after it: a full budget at once");

    /* The sliding window's count weighs as the previous window's until the
     * second new boundary, and is gone after it. */
    sl_limit sfrom1 = day_limit(SL_SLIDING_WINDOW, 3, 1, 1, 0, 0);
    sl_limit sto15 = day_limit(SL_SLIDING_WINDOW, 3, 1, 15, 0, 0);
    int64_t ss[3] = {0, 0, 0};
    cr_assert_eq(sl_take(&sfrom1, ss, utc(2024, 3, 3, 0, 0), 3, &d), SL_OK);
    cr_assert(d.allowed);
    cr_assert_eq(sl_peek(&sto15, ss, utc(2024, 3, 20, 0, 0), 1, &d), SL_OK);
    cr_assert(!d.allowed, "March 20th: the count weighs as [Feb 15, Mar 15)'s");
    cr_assert_eq(sl_peek(&sto15, ss, utc(2024, 4, 20, 0, 0), 1, &d), SL_OK);
    cr_assert(d.allowed && d.remaining == 2, "April 20th: gone");
}
