/*
 * sl_charge: a take that is never refused and may leave the state in debt.
 * For every algorithm that can owe, a charge beyond the budget is admitted,
 * the takes that follow are refused exactly until time has paid the debt
 * back (to the nanosecond the charge's retry_after names), a refund right
 * after gives the charge back, a charge of 0 changes nothing, and the
 * bounds saturate without overflowing. The sliding log and the concurrency
 * limit refuse with SL_ERR_ALGORITHM.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "testlib.h"

#define MIN (60 * NS_PER_SEC)
/* 2026-12-01 00:00 UTC: aligned on seconds, minutes and months. */
#define T0 (INT64_C(1796083200) * NS_PER_SEC)

typedef struct ccase {
    const char *name;
    sl_algorithm algorithm;
    int64_t limit, period, burst, months;
    bool carried, cell;
} ccase;

/* Every algorithm that can owe, at whole and fractional rates, with bursts,
 * carried and not, on calendar months, and redis-cell's limits. */
static const ccase CASES[] = {
    {"gcra 10/s", SL_GCRA, 10, NS_PER_SEC, 0, 0, false, false},
    {"gcra 7/s burst 3", SL_GCRA, 7, NS_PER_SEC, 3, 0, false, false},
    {"gcra 3/s burst 12 carried", SL_GCRA, 3, NS_PER_SEC, 12, 0, true, false},
    {"leaky 5/s burst 4", SL_LEAKY_BUCKET, 5, NS_PER_SEC, 4, 0, false, false},
    {"leaky 7/min carried", SL_LEAKY_BUCKET, 7, MIN, 0, 0, true, false},
    {"token 10/min", SL_TOKEN_BUCKET, 10, MIN, 0, 0, false, false},
    {"token 7/s burst 3", SL_TOKEN_BUCKET, 7, NS_PER_SEC, 3, 0, false, false},
    {"token 3/s burst 9 carried", SL_TOKEN_BUCKET, 3, NS_PER_SEC, 9, 0, true, false},
    {"fixed 5/s", SL_FIXED_WINDOW, 5, NS_PER_SEC, 0, 0, false, false},
    {"fixed 12/min carried", SL_FIXED_WINDOW, 12, MIN, 0, 0, true, false},
    {"fixed 9/month", SL_FIXED_WINDOW, 9, SL_MONTH_NS, 0, 1, false, false},
    {"sliding window 5/s", SL_SLIDING_WINDOW, 5, NS_PER_SEC, 0, 0, false, false},
    {"sliding window 12/min carried", SL_SLIDING_WINDOW, 12, MIN, 0, 0, true, false},
    {"sliding window 9/month", SL_SLIDING_WINDOW, 9, SL_MONTH_NS, 0, 1, false, false},
    {"cell 4 5/60s", SL_GCRA, 4, 5, 60, 0, false, true},
};
#define NCASES (sizeof CASES / sizeof CASES[0])

static sl_limit limit_of(const ccase *c)
{
    sl_limit l;
    if (c->cell) {
        cr_assert_eq(sl_limit_init_cell(&l, c->limit, c->period, c->burst), SL_OK);
        return l;
    }
    cr_assert_eq(sl_limit_init(&l, c->algorithm, c->limit, c->period, c->burst), SL_OK);
    if (c->months)
        cr_assert_eq(sl_limit_align(&l, c->months, 0, 0), SL_OK);
    if (c->carried)
        cr_assert_eq(sl_limit_carry(&l), SL_OK);
    return l;
}

static void assert_same(const sl_decision *a, const sl_decision *b, const char *what,
                        const char *name, int step)
{
    cr_assert(a->allowed == b->allowed && a->remaining == b->remaining &&
                  a->reset_after_ns == b->reset_after_ns &&
                  a->retry_after_ns == b->retry_after_ns && a->delay_ns == b->delay_ns,
              "%s step %d, %s: {%d %lld reset %lld retry %lld delay %lld} vs {%d %lld reset %lld "
              "retry %lld delay %lld}",
              name, step, what, a->allowed, (long long)a->remaining, (long long)a->reset_after_ns,
              (long long)a->retry_after_ns, (long long)a->delay_ns, b->allowed,
              (long long)b->remaining, (long long)b->reset_after_ns, (long long)b->retry_after_ns,
              (long long)b->delay_ns);
}

/* A charge of several bursts, at a random moment after some takes: it is
 * admitted, says remaining 0, and every take of one is refused until the
 * nanosecond its retry_after names, when one is admitted. */
Test(charge, refuses_until_the_debt_is_paid_to_the_nanosecond)
{
    for (size_t i = 0; i < NCASES; i++) {
        const ccase *c = &CASES[i];
        test_rng r = {i + 1};
        for (int trial = 0; trial < 20; trial++) {
            sl_limit l = limit_of(c);
            void *st = test_state(&l);
            int64_t now = T0 + test_range(&r, 0, 3 * l.period_ns / 2);
            sl_decision d;
            for (int k = (int)test_range(&r, 0, 3); k > 0; k--)
                cr_assert_eq(sl_take(&l, st, now, 1, &d), SL_OK);
            int64_t burst = c->cell ? c->limit + 1 : l.burst;
            int64_t cost = burst * test_range(&r, 1, 4) + test_range(&r, 0, burst);
            cr_assert_eq(sl_charge(&l, st, now, cost, &d), SL_OK);
            cr_assert(d.allowed, "%s: a charge is never refused", c->name);
            cr_assert_eq(d.remaining, 0, "%s: in debt, nothing remains", c->name);
            cr_assert_gt(d.retry_after_ns, 0, "%s: the next take waits", c->name);
            cr_assert_geq(d.reset_after_ns, d.retry_after_ns, "%s", c->name);
            int64_t at = now + d.retry_after_ns;
            /* Refused all along the way, peeks and takes alike. */
            for (int k = 0; k < 8; k++) {
                int64_t t = now + (at - 1 - now) * k / 7;
                sl_decision p;
                cr_assert_eq(sl_take(&l, st, t, 1, &p), SL_OK);
                cr_assert(!p.allowed, "%s: a take %lld ns before the debt is paid", c->name,
                          (long long)(at - t));
                cr_assert_eq(p.retry_after_ns, at - t, "%s: retry_after %lld at %lld", c->name,
                             (long long)p.retry_after_ns, (long long)(t - now));
                cr_assert_eq(p.remaining, 0, "%s", c->name);
            }
            cr_assert_eq(sl_take(&l, st, at, 1, &d), SL_OK);
            cr_assert(d.allowed, "%s: the take once the debt is paid", c->name);
            free(st);
        }
    }
}

/* A refund right after a charge gives the charge back: the state then
 * decides as one that was never charged, on every cost and later on. */
Test(charge, a_refund_gives_it_back)
{
    for (size_t i = 0; i < NCASES; i++) {
        const ccase *c = &CASES[i];
        test_rng r = {100 + i};
        for (int trial = 0; trial < 20; trial++) {
            sl_limit l = limit_of(c);
            void *x = test_state(&l), *y = test_state(&l);
            int64_t now = T0 + test_range(&r, 0, l.period_ns);
            sl_decision a, b;
            for (int k = (int)test_range(&r, 0, 3); k > 0; k--) {
                cr_assert_eq(sl_take(&l, x, now, 1, &a), SL_OK);
                cr_assert_eq(sl_take(&l, y, now, 1, &b), SL_OK);
            }
            int64_t cost = test_range(&r, 1, 5 * l.burst);
            cr_assert_eq(sl_charge(&l, x, now, cost, &a), SL_OK);
            cr_assert_eq(sl_refund(&l, x, now, cost), cost, "%s: all of %lld back", c->name,
                         (long long)cost);
            for (int step = 0; step < 30; step++) {
                for (int64_t k = 0; k <= l.burst + 1; k++) {
                    cr_assert_eq(sl_peek(&l, x, now, k, &a), SL_OK);
                    cr_assert_eq(sl_peek(&l, y, now, k, &b), SL_OK);
                    assert_same(&a, &b, "peek", c->name, step);
                }
                int64_t cost1 = test_range(&r, 1, 2);
                cr_assert_eq(sl_take(&l, x, now, cost1, &a), SL_OK);
                cr_assert_eq(sl_take(&l, y, now, cost1, &b), SL_OK);
                assert_same(&a, &b, "take", c->name, step);
                now += test_range(&r, 0, l.period_ns / 4 + 1);
            }
            free(x);
            free(y);
        }
    }
}

/* A charge of nothing changes no byte, and says what a peek says. */
Test(charge, of_zero_changes_nothing)
{
    for (size_t i = 0; i < NCASES; i++) {
        const ccase *c = &CASES[i];
        sl_limit l = limit_of(c);
        size_t n = sl_state_size(&l);
        unsigned char *st = test_state(&l), *copy = malloc(n);
        sl_decision d, p;
        for (int k = 0; k < 3; k++) {
            memcpy(copy, st, n);
            cr_assert_eq(sl_charge(&l, st, T0 + k, 0, &d), SL_OK);
            cr_assert_eq(memcmp(st, copy, n), 0, "%s: a charge of 0 wrote", c->name);
            cr_assert_eq(sl_peek(&l, st, T0 + k, 0, &p), SL_OK);
            cr_assert(d.allowed);
            cr_assert_eq(d.remaining, p.remaining, "%s", c->name);
            cr_assert_eq(d.reset_after_ns, p.reset_after_ns, "%s", c->name);
            cr_assert_eq(d.retry_after_ns, 0, "%s: the next take is admitted", c->name);
            cr_assert_eq(d.delay_ns, 0, "%s: a charge waits for nothing", c->name);
            cr_assert_eq(sl_take(&l, st, T0 + k, 1, &p), SL_OK);
        }
        free(st);
        free(copy);
    }
}

/* A charge within the budget is a take: the same state and answer. */
Test(charge, within_the_budget_is_a_take)
{
    for (size_t i = 0; i < NCASES; i++) {
        const ccase *c = &CASES[i];
        test_rng r = {200 + i};
        sl_limit l = limit_of(c);
        size_t n = sl_state_size(&l);
        unsigned char *x = test_state(&l), *y = test_state(&l);
        int64_t now = T0;
        for (int step = 0; step < 100; step++) {
            sl_decision a, b, p;
            int64_t cost = test_range(&r, 1, 2);
            cr_assert_eq(sl_take(&l, y, now, cost, &b), SL_OK);
            if (b.allowed) {
                cr_assert_eq(sl_charge(&l, x, now, cost, &a), SL_OK);
                cr_assert_eq(memcmp(x, y, n), 0, "%s step %d: the states differ", c->name, step);
                cr_assert_eq(a.reset_after_ns, b.reset_after_ns, "%s", c->name);
                cr_assert_eq(sl_peek(&l, y, now, 0, &p), SL_OK);
                cr_assert_eq(a.remaining, p.remaining, "%s", c->name);
            } else {
                memcpy(x, y, n);
            }
            now += test_range(&r, 0, l.period_ns / 8 + 1);
        }
        free(x);
        free(y);
    }
}

Test(charge, exact_numbers)
{
    sl_limit l;
    sl_decision d;

    /* GCRA, 10 a second (T = 100 ms, tau = 1 s): 15 charged at once leave
     * the TAT 1.5 s ahead; a take of one waits until TAT + T - tau. */
    cr_assert_eq(sl_limit_init(&l, SL_GCRA, 10, NS_PER_SEC, 0), SL_OK);
    int64_t g[2] = {0, 0};
    cr_assert_eq(sl_charge(&l, g, T0, 15, &d), SL_OK);
    cr_assert_eq(g[0], T0 + 1500 * NS_PER_MS);
    cr_assert(d.allowed);
    cr_assert_eq(d.remaining, 0);
    cr_assert_eq(d.reset_after_ns, 1500 * NS_PER_MS);
    cr_assert_eq(d.retry_after_ns, 600 * NS_PER_MS);
    cr_assert_eq(sl_take(&l, g, T0 + 600 * NS_PER_MS - 1, 1, &d), SL_OK);
    cr_assert(!d.allowed);
    cr_assert_eq(d.retry_after_ns, 1);
    cr_assert_eq(sl_take(&l, g, T0 + 600 * NS_PER_MS, 1, &d), SL_OK);
    cr_assert(d.allowed);
    cr_assert_eq(d.remaining, 0);
    /* A take of 5 waits for five intervals more of it to be paid. */
    cr_assert_eq(sl_peek(&l, g, T0 + 600 * NS_PER_MS, 5, &d), SL_OK);
    cr_assert_eq(d.retry_after_ns, 500 * NS_PER_MS);

    /* GCRA at 7 a second: T = 1/7 s, kept exactly. */
    cr_assert_eq(sl_limit_init(&l, SL_GCRA, 7, NS_PER_SEC, 0), SL_OK);
    int64_t f[2] = {0, 0};
    cr_assert_eq(sl_charge(&l, f, T0, 10, &d), SL_OK);
    cr_assert_eq(f[0], T0 + 10 * NS_PER_SEC / 7);
    cr_assert_eq(f[1], 10 * NS_PER_SEC % 7);
    /* Admitted again once TAT + T - tau <= now: 4/7 s, rounded up. */
    cr_assert_eq(d.retry_after_ns, (4 * NS_PER_SEC + 6) / 7);

    /* Token bucket, 5 a second: 12 charged leave -7 tokens; one is back
     * every 200 ms, so a take of one waits 8 tokens, 1.6 s. */
    cr_assert_eq(sl_limit_init(&l, SL_TOKEN_BUCKET, 5, NS_PER_SEC, 0), SL_OK);
    int64_t tb[2] = {0, 0};
    cr_assert_eq(sl_charge(&l, tb, T0, 12, &d), SL_OK);
    cr_assert_eq(tb[1], 12);
    cr_assert_eq(d.remaining, 0);
    cr_assert_eq(d.retry_after_ns, 1600 * NS_PER_MS);
    cr_assert_eq(d.reset_after_ns, 2400 * NS_PER_MS);
    cr_assert_eq(sl_take(&l, tb, T0 + 1600 * NS_PER_MS - 1, 1, &d), SL_OK);
    cr_assert(!d.allowed);
    cr_assert_eq(sl_take(&l, tb, T0 + 1600 * NS_PER_MS, 1, &d), SL_OK);
    cr_assert(d.allowed);
    cr_assert_eq(d.remaining, 0);

    /* Fixed window, 5 a second: 8 counted, refused until the window ends,
     * and the next window owes nothing. */
    cr_assert_eq(sl_limit_init(&l, SL_FIXED_WINDOW, 5, NS_PER_SEC, 0), SL_OK);
    int64_t fw[2] = {0, 0};
    cr_assert_eq(sl_charge(&l, fw, T0 + 300 * NS_PER_MS, 8, &d), SL_OK);
    cr_assert_eq(fw[1], 8);
    cr_assert_eq(d.retry_after_ns, 700 * NS_PER_MS);
    cr_assert_eq(d.reset_after_ns, 700 * NS_PER_MS);
    cr_assert_eq(sl_take(&l, fw, T0 + NS_PER_SEC - 1, 1, &d), SL_OK);
    cr_assert(!d.allowed);
    cr_assert_eq(sl_take(&l, fw, T0 + NS_PER_SEC, 5, &d), SL_OK);
    cr_assert(d.allowed, "a debt does not outlive its window");

    /* Sliding window, 10 a second: 25 counted in a window weigh into the
     * next: a take of one is admitted once 25 * (p - 1 - e) <= 9 * p,
     * e = p - 1 - floor(9 p / 25) = 639999999 ns into it. */
    cr_assert_eq(sl_limit_init(&l, SL_SLIDING_WINDOW, 10, NS_PER_SEC, 0), SL_OK);
    int64_t sw[3] = {0, 0, 0};
    cr_assert_eq(sl_charge(&l, sw, T0, 25, &d), SL_OK);
    int64_t at = T0 + NS_PER_SEC + 639999999;
    cr_assert_eq(d.retry_after_ns, at - T0);
    cr_assert_eq(d.reset_after_ns, 2 * NS_PER_SEC);
    cr_assert_eq(sl_take(&l, sw, at - 1, 1, &d), SL_OK);
    cr_assert(!d.allowed);
    cr_assert_eq(sl_take(&l, sw, at, 1, &d), SL_OK);
    cr_assert(d.allowed);

    /* CL.THROTTLE's limits: 4 bursts of 5 per minute (T = 12 s, tau = 60 s). */
    cr_assert_eq(sl_limit_init_cell(&l, 4, 5, 60), SL_OK);
    int64_t cell[2] = {0, 0};
    cr_assert_eq(sl_charge(&l, cell, T0, 8, &d), SL_OK);
    cr_assert_eq(cell[0], T0 + 96 * NS_PER_SEC);
    cr_assert_eq(d.retry_after_ns, 48 * NS_PER_SEC);
    int64_t out[5];
    cr_assert_eq(sl_take(&l, cell, T0 + 10 * NS_PER_SEC, 1, &d), SL_OK);
    sl_cell_reply(&d, out);
    int64_t limited[5] = {1, 5, 0, 38, 86};
    cr_assert_arr_eq(out, limited, sizeof limited);
}

/* The bounds: a TAT saturates at SL_TIME_MAX, a token bucket's debt at the
 * tokens that accrue in SL_SPAN_MAX ns, a window's count at SL_SPAN_MAX;
 * every answer after stays in range (the ASan build checks for overflow
 * with UBSan). */
Test(charge, saturates_at_the_bounds)
{
    sl_limit l;
    sl_decision d;
    cr_assert_eq(sl_limit_init(&l, SL_GCRA, 7, NS_PER_SEC, 0), SL_OK);
    int64_t g[2] = {0, 0};
    cr_assert_eq(sl_charge(&l, g, T0, INT64_MAX, &d), SL_OK);
    cr_assert_eq(g[0], SL_TIME_MAX);
    cr_assert_eq(g[1], 0);
    cr_assert_eq(sl_charge(&l, g, SL_TIME_MAX, INT64_MAX, &d), SL_OK);
    cr_assert_eq(g[0], SL_TIME_MAX);
    cr_assert_eq(sl_take(&l, g, T0, 7, &d), SL_OK);
    cr_assert(!d.allowed);
    cr_assert_eq(d.remaining, 0);
    cr_assert_eq(d.reset_after_ns, SL_TIME_MAX - T0);
    cr_assert_eq(d.retry_after_ns, SL_TIME_MAX - T0);
    cr_assert_eq(sl_state_expires_at(&l, g), SL_TIME_MAX);
    /* A TAT past SL_TIME_MAX, which no charge writes, reads as SL_TIME_MAX. */
    g[0] = INT64_MAX;
    cr_assert_eq(sl_take(&l, g, 0, 1, &d), SL_OK);
    cr_assert(!d.allowed);
    cr_assert_eq(d.reset_after_ns, SL_TIME_MAX);
    cr_assert_eq(sl_limit_init(&l, SL_GCRA, 1, 1, 0), SL_OK); /* the whole path */
    cr_assert_eq(sl_take(&l, g, 0, 1, &d), SL_OK);
    cr_assert(!d.allowed);
    cr_assert_eq(d.retry_after_ns, SL_TIME_MAX);

    /* Token bucket, 1 a nanosecond: at most SL_SPAN_MAX tokens owed. */
    cr_assert_eq(sl_limit_init(&l, SL_TOKEN_BUCKET, 1, 1, 0), SL_OK);
    int64_t tb[2] = {0, 0};
    cr_assert_eq(sl_charge(&l, tb, T0, INT64_MAX, &d), SL_OK);
    cr_assert_eq(tb[1], SL_SPAN_MAX);
    cr_assert_eq(d.retry_after_ns, SL_SPAN_MAX);
    cr_assert_eq(sl_charge(&l, tb, T0, INT64_MAX, &d), SL_OK);
    cr_assert_eq(tb[1], SL_SPAN_MAX);
    /* A slow bucket (1 a day) owes at most what accrues in SL_SPAN_MAX ns. */
    int64_t day = 86400 * NS_PER_SEC;
    cr_assert_eq(sl_limit_init(&l, SL_TOKEN_BUCKET, 1, day, 0), SL_OK);
    int64_t slow[2] = {0, 0};
    cr_assert_eq(sl_charge(&l, slow, T0, INT64_MAX, &d), SL_OK);
    cr_assert_eq(slow[1], SL_SPAN_MAX / day);
    cr_assert_eq(d.retry_after_ns, SL_SPAN_MAX / day * day);
    cr_assert_leq(sl_state_expires_at(&l, slow), T0 + SL_SPAN_MAX);
    cr_assert_gt(sl_state_expires_at(&l, slow), T0);
    /* One token more than the floor is no state of this limit's: full. */
    slow[1] = SL_SPAN_MAX / day + 1;
    cr_assert_eq(sl_peek(&l, slow, T0, 0, &d), SL_OK);
    cr_assert_eq(d.remaining, 1);

    /* Windows: the count saturates at SL_SPAN_MAX. */
    cr_assert_eq(sl_limit_init(&l, SL_FIXED_WINDOW, SL_SPAN_MAX, NS_PER_SEC, 0), SL_OK);
    int64_t fw[2] = {0, 0};
    cr_assert_eq(sl_charge(&l, fw, T0, INT64_MAX, &d), SL_OK);
    cr_assert_eq(fw[1], SL_SPAN_MAX);
    cr_assert_eq(sl_take(&l, fw, T0, SL_SPAN_MAX, &d), SL_OK);
    cr_assert(!d.allowed);
    cr_assert_eq(sl_limit_init(&l, SL_SLIDING_WINDOW, SL_SPAN_MAX, SL_SPAN_MAX, 0), SL_OK);
    int64_t sw[3] = {0, 0, 0};
    cr_assert_eq(sl_charge(&l, sw, T0, INT64_MAX, &d), SL_OK);
    cr_assert_eq(sw[1], SL_SPAN_MAX);
    cr_assert_eq(sl_charge(&l, sw, T0, 5, &d), SL_OK);
    cr_assert_eq(sw[1], SL_SPAN_MAX);
    cr_assert_eq(sl_take(&l, sw, T0 + SL_SPAN_MAX, SL_SPAN_MAX, &d), SL_OK);
    cr_assert(!d.allowed, "the debt weighs into the next window");
    /* A count above SL_SPAN_MAX is no state of this algorithm's. */
    cr_assert_eq(sl_limit_init(&l, SL_FIXED_WINDOW, 5, NS_PER_SEC, 0), SL_OK);
    int64_t bad[2] = {T0, SL_SPAN_MAX + 1};
    cr_assert_eq(sl_peek(&l, bad, T0, 0, &d), SL_OK);
    cr_assert_eq(d.remaining, 5);
}

Test(charge, refuses_bad_input_logs_and_leases)
{
    sl_limit l;
    sl_decision d;
    cr_assert_eq(sl_limit_init(&l, SL_GCRA, 10, MIN, 0), SL_OK);
    int64_t g[2] = {0, 0};
    cr_assert_eq(sl_take(&l, g, T0, 1, &d), SL_OK);
    int64_t copy[2] = {g[0], g[1]};
    cr_assert_eq(sl_charge(&l, g, T0, -1, &d), SL_ERR_COST);
    cr_assert_eq(sl_charge(&l, g, -1, 1, &d), SL_ERR_TIME);
    cr_assert_eq(sl_charge(&l, g, SL_TIME_MAX + 1, 1, &d), SL_ERR_TIME);
    cr_assert_eq(memcmp(g, copy, sizeof g), 0, "nothing changes on an error");

    /* A log holds at most `limit` timestamps: it cannot owe. */
    cr_assert_eq(sl_limit_init(&l, SL_SLIDING_LOG, 3, MIN, 0), SL_OK);
    void *log = test_state(&l);
    cr_assert_eq(sl_charge(&l, log, T0, 1, &d), SL_ERR_ALGORITHM);
    cr_assert_eq(sl_charge(&l, log, T0, 0, &d), SL_ERR_ALGORITHM);
    cr_assert_eq(sl_peek(&l, log, T0, 0, &d), SL_OK);
    cr_assert_eq(d.remaining, 3);
    free(log);
    /* A lease is acquired, not charged. */
    cr_assert_eq(sl_limit_init(&l, SL_CONCURRENCY, 3, MIN, 0), SL_OK);
    void *c = test_state(&l);
    cr_assert_eq(sl_charge(&l, c, T0, 1, &d), SL_ERR_ALGORITHM);
    free(c);
}

/* A carried limit carries the state over first, as a take does: units used
 * under the limit the state names become units of this one, then the
 * charge is added. */
Test(charge, carried_over_first)
{
    sl_limit a, b;
    sl_decision d;
    cr_assert_eq(sl_limit_init(&a, SL_GCRA, 100, MIN, 0), SL_OK);
    cr_assert_eq(sl_limit_carry(&a), SL_OK);
    cr_assert_eq(sl_limit_init(&b, SL_GCRA, 10, MIN, 0), SL_OK);
    cr_assert_eq(sl_limit_carry(&b), SL_OK);
    int64_t st[4] = {0};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(sl_take(&a, st, T0, 1, &d), SL_OK);
    /* 4 used under a, then 12 charged under b (T = 6 s, tau = 60 s): the
     * TAT is 16 intervals ahead, 96 s, a take waits 96 + 6 - 60 s. */
    cr_assert_eq(sl_charge(&b, st, T0, 12, &d), SL_OK);
    cr_assert_eq(st[0], 10);
    cr_assert_eq(st[1], MIN);
    cr_assert_eq(st[2], T0 + 96 * NS_PER_SEC);
    cr_assert_eq(d.retry_after_ns, 42 * NS_PER_SEC);
    cr_assert_eq(sl_take(&b, st, T0 + 42 * NS_PER_SEC - 1, 1, &d), SL_OK);
    cr_assert(!d.allowed);
    cr_assert_eq(sl_take(&b, st, T0 + 42 * NS_PER_SEC, 1, &d), SL_OK);
    cr_assert(d.allowed);
    /* A charge on a state never written names the limit. */
    int64_t fresh[4] = {0};
    cr_assert_eq(sl_charge(&b, fresh, T0, 1, &d), SL_OK);
    cr_assert_eq(fresh[0], 10);
    cr_assert_eq(fresh[2], T0 + 6 * NS_PER_SEC);
    /* A refund under the limit gives the charge back. */
    cr_assert_eq(sl_refund(&b, fresh, T0, 1), 1);
    cr_assert_eq(sl_peek(&b, fresh, T0, 0, &d), SL_OK);
    cr_assert_eq(d.remaining, 10);
}

/*
 * The slow model of a bucket that can owe: level = tokens * reduced_period
 * in 128 bits, refilled den per ns up to the brim, and below zero after a
 * charge. GCRA and the token bucket are both this bucket, debts included:
 * on random traces of takes, charges and refunds they agree with each
 * other on every answer, and with the model on every admission.
 */
typedef struct model_bucket {
    __int128 level;
    int64_t last;
} model_bucket;

static void model_refill(const sl_limit *l, model_bucket *m, int64_t now)
{
    __int128 cap = (__int128)l->burst * l->reduced_period;
    if (now > m->last) {
        m->level += (__int128)(now - m->last) * l->den;
        if (m->level > cap)
            m->level = cap;
        m->last = now;
    }
}

Test(charge, gcra_and_the_token_bucket_owe_alike)
{
    static const int64_t periods[] = {7, 1000, NS_PER_MS, NS_PER_SEC, 60 * NS_PER_SEC,
                                      3 * NS_PER_SEC + 1};
    test_rng r = {99};
    for (int trial = 0; trial < 300; trial++) {
        sl_limit g, tb;
        int64_t limit = test_range(&r, 1, 50);
        int64_t burst = test_range(&r, 0, 3) ? 0 : test_range(&r, 1, 20);
        int64_t period = periods[test_range(&r, 0, 5)];
        if (sl_limit_init(&g, SL_GCRA, limit, period, burst) != SL_OK)
            continue;
        cr_assert_eq(sl_limit_init(&tb, SL_TOKEN_BUCKET, limit, period, burst), SL_OK);
        int64_t gs[2] = {0, 0}, ts[2] = {0, 0};
        int64_t now = test_range(&r, 0, NS_PER_SEC);
        model_bucket m = {(__int128)g.burst * g.reduced_period, now};
        int64_t step = g.interval_ns + 1;
        for (int i = 0; i < 300; i++) {
            now += test_range(&r, 0, 2) == 0 ? test_range(&r, 0, 4 * step)
                                              : test_range(&r, 0, step);
            model_refill(&g, &m, now);
            int op = (int)test_range(&r, 0, 9);
            sl_decision dg, dt;
            if (op < 6) {
                /* (A take of 0 in debt: GCRA refuses it, the bucket, with no
                 * token to take, admits it; sluice.h.) */
                int64_t cost = test_range(&r, 0, 3) == 0 ? test_range(&r, 1, g.burst + 1) : 1;
                cr_assert_eq(sl_take(&g, gs, now, cost, &dg), SL_OK);
                cr_assert_eq(sl_take(&tb, ts, now, cost, &dt), SL_OK);
                __int128 need = (__int128)cost * g.reduced_period;
                bool want = cost <= g.burst && m.level >= need;
                if (want)
                    m.level -= need;
                cr_assert_eq(dg.allowed, want, "trial %d step %d: the model %s a take of %lld",
                             trial, i, want ? "admits" : "refuses", (long long)cost);
            } else if (op < 9) {
                int64_t cost = test_range(&r, 0, 3 * g.burst);
                cr_assert_eq(sl_charge(&g, gs, now, cost, &dg), SL_OK);
                cr_assert_eq(sl_charge(&tb, ts, now, cost, &dt), SL_OK);
                m.level -= (__int128)cost * g.reduced_period;
            } else {
                int64_t cost = test_range(&r, 1, 2 * g.burst);
                int64_t a = sl_refund(&g, gs, now, cost), b = sl_refund(&tb, ts, now, cost);
                cr_assert_eq(a, b, "trial %d step %d: refunds of %lld gave %lld and %lld", trial,
                             i, (long long)cost, (long long)a, (long long)b);
                /* The bucket's refund puts whole tokens back, up to the brim. */
                __int128 cap = (__int128)g.burst * g.reduced_period;
                m.level += (__int128)b * g.reduced_period;
                if (m.level > cap)
                    m.level = cap;
                continue;
            }
            cr_assert(dg.allowed == dt.allowed && dg.remaining == dt.remaining &&
                          dg.reset_after_ns == dt.reset_after_ns &&
                          dg.retry_after_ns == dt.retry_after_ns,
                      "trial %d step %d op %d (limit %lld/%lld burst %lld): gcra {%d %lld "
                      "reset %lld retry %lld} token bucket {%d %lld reset %lld retry %lld}",
                      trial, i, op, (long long)g.limit, (long long)g.period_ns,
                      (long long)g.burst, dg.allowed, (long long)dg.remaining,
                      (long long)dg.reset_after_ns, (long long)dg.retry_after_ns, dt.allowed,
                      (long long)dt.remaining, (long long)dt.reset_after_ns,
                      (long long)dt.retry_after_ns);
            /* (A state "never seen" at now may say so as 0 or as now.) */
            int64_t eg = sl_state_expires_at(&g, gs), et = sl_state_expires_at(&tb, ts);
            cr_assert(eg == et || (eg <= now && et <= now),
                      "trial %d step %d op %d: expiries %lld and %lld at %lld", trial, i, op,
                      (long long)eg, (long long)et, (long long)now);
        }
    }
}
