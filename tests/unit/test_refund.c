/*
 * sl_refund: a take given back leaves the state as if the take had been
 * refused. Each algorithm is run on a virtual clock against a twin state
 * that never took the refunded units: after the refund, every decision that
 * follows (peeks of every cost, takes applied to both, time passing, window
 * edges) must be the same on both. And a refund never gives more than a
 * state that never took could have, nor anything once the take's window has
 * passed; garbage states never crash it.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "testlib.h"

#define MIN (60 * NS_PER_SEC)
/* 2026-12-01 00:00 UTC: calendar windows have real month lengths here. */
#define T0 (INT64_C(1796083200) * NS_PER_SEC)

typedef struct rcase {
    const char *name;
    sl_algorithm algorithm;
    int64_t limit, period, burst, months;
    bool carried, cell;
} rcase;

/* Every algorithm that refunds, at whole and fractional rates, with bursts,
 * carried and not, on calendar months, and redis-cell's limits. */
static const rcase CASES[] = {
    {"gcra 10/min", SL_GCRA, 10, MIN, 0, 0, false, false},
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
    {"sliding log 5/s", SL_SLIDING_LOG, 5, NS_PER_SEC, 0, 0, false, false},
    {"sliding log 12/min carried", SL_SLIDING_LOG, 12, MIN, 0, 0, true, false},
    {"cell 4 5/60s", SL_GCRA, 4, 5, 60, 0, false, true},
};
#define NCASES (sizeof CASES / sizeof CASES[0])

static sl_limit limit_of(const rcase *c)
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

/* The window length a trace steps by: the period, or for a cell limit the
 * period its arguments name. */
static int64_t span_of(const sl_limit *l)
{
    return l->period_ns;
}

static void assert_same(const sl_decision *a, const sl_decision *b, const char *what,
                        const char *name, int step)
{
    cr_assert(a->allowed == b->allowed && a->limit == b->limit && a->remaining == b->remaining &&
                  a->reset_after_ns == b->reset_after_ns &&
                  a->retry_after_ns == b->retry_after_ns && a->delay_ns == b->delay_ns,
              "%s step %d, %s: refunded {%d %lld %lld retry %lld reset %lld delay %lld} vs never "
              "taken {%d %lld %lld retry %lld reset %lld delay %lld}",
              name, step, what, a->allowed, (long long)a->limit, (long long)a->remaining,
              (long long)a->retry_after_ns, (long long)a->reset_after_ns, (long long)a->delay_ns,
              b->allowed, (long long)b->limit, (long long)b->remaining,
              (long long)b->retry_after_ns, (long long)b->reset_after_ns, (long long)b->delay_ns);
}

/* A step of the virtual clock: often nothing, often a little, sometimes a
 * window or more, and sometimes to just before or onto the next multiple of
 * the period (a window's edge, for limits not on the calendar). */
static int64_t step_of(test_rng *r, const sl_limit *l, int64_t now)
{
    int64_t p = span_of(l);
    switch (test_range(r, 0, 7)) {
    case 0:
    case 1:
        return 0;
    case 2:
        return test_range(r, 1, 3);
    case 3:
        return test_range(r, 0, p / 8);
    case 4:
        return test_range(r, 0, p);
    case 5:
        return test_range(r, p / 2, 2 * p);
    default: {
        int64_t next = (now / p + 1) * p;
        return next - now - test_range(r, 0, 1);
    }
    }
}

static int64_t cost_of(test_rng *r, const sl_limit *l)
{
    switch (test_range(r, 0, 5)) {
    case 0:
        return test_range(r, 1, l->burst);
    case 1:
        return 2;
    default:
        return 1;
    }
}

/* Peeks at both states, every cost that matters, at now and a little later. */
static void compare_peeks(const sl_limit *l, const void *x, const void *y, test_rng *r,
                          int64_t now, const char *name, int step)
{
    int64_t costs[] = {0, 1, 2, l->burst, l->burst + 1};
    for (int k = 0; k < 3; k++) {
        int64_t t = now + (k == 0 ? 0 : step_of(r, l, now));
        for (size_t i = 0; i < sizeof costs / sizeof costs[0]; i++) {
            sl_decision a, b;
            cr_assert_eq(sl_peek(l, x, t, costs[i], &a), SL_OK);
            cr_assert_eq(sl_peek(l, y, t, costs[i], &b), SL_OK);
            assert_same(&a, &b, "peek", name, step);
        }
    }
}

/*
 * The trace: takes A on both states; then a take B on x alone, given back
 * with sl_refund at once or after a while (with no take between); from then
 * on x must decide as y does, on peeks and on takes applied to both.
 * Returns how many refunds gave back less than their cost (the take had
 * refilled in part, or its window had passed).
 */
static int refund_trace(const rcase *c, uint64_t seed)
{
    sl_limit l = limit_of(c);
    test_rng r = {seed};
    void *x = test_state(&l), *y = test_state(&l);
    int64_t now = T0 + test_range(&r, 0, span_of(&l));
    int refunds = 0, partial = 0;
    for (int step = 0; step < 400; step++) {
        for (int64_t a = test_range(&r, 0, 3); a > 0; a--) {
            now += step_of(&r, &l, now);
            int64_t cost = cost_of(&r, &l);
            sl_decision dx, dy;
            cr_assert_eq(sl_take(&l, x, now, cost, &dx), SL_OK);
            cr_assert_eq(sl_take(&l, y, now, cost, &dy), SL_OK);
            assert_same(&dx, &dy, "take", c->name, step);
        }
        now += step_of(&r, &l, now);
        int64_t cost = cost_of(&r, &l);
        sl_decision d;
        cr_assert_eq(sl_take(&l, x, now, cost, &d), SL_OK);
        int64_t later = test_range(&r, 0, 2) == 0 ? 0 : step_of(&r, &l, now);
        int64_t given = sl_refund(&l, x, now + later, cost);
        cr_assert(given >= 0 && given <= cost, "%s step %d: refund of %lld gave %lld", c->name,
                  step, (long long)cost, (long long)given);
        if (d.allowed && later == 0)
            cr_assert_eq(given, cost, "%s step %d: an immediate refund gives all back", c->name,
                         step);
        if (!d.allowed) /* x took nothing: a refund of a refused take is out of contract */
            memcpy(x, y, sl_state_size(&l));
        refunds += d.allowed;
        partial += d.allowed && given < cost;
        now += later;
        compare_peeks(&l, x, y, &r, now, c->name, step);
    }
    cr_assert_gt(refunds, 50, "%s: the trace refunded %d takes", c->name, refunds);
    free(x);
    free(y);
    return partial;
}

Test(refund, equals_never_taking_on_every_algorithm)
{
    for (size_t i = 0; i < NCASES; i++) {
        int partial = 0;
        for (uint64_t seed = 1; seed <= 6; seed++)
            partial += refund_trace(&CASES[i], seed * 7919 + i);
        cr_assert_gt(partial, 5, "%s: %d refunds gave back less than their cost", CASES[i].name,
                     partial);
    }
}

/* A refund after its units have refilled, or their window has passed, gives
 * back nothing and says so. */
Test(refund, nothing_once_the_take_has_refilled_or_its_window_passed)
{
    for (size_t i = 0; i < NCASES; i++) {
        sl_limit l = limit_of(&CASES[i]);
        void *st = test_state(&l);
        int64_t p = span_of(&l);
        /* A take on the last nanosecond of a window (of the fixed ones) */
        int64_t t = (T0 / p + 5) * p - 1;
        if (l.months)
            t = INT64_C(1798761600) * NS_PER_SEC - 1; /* 2026-12-31 23:59:59.999999999 UTC */
        sl_decision d;
        cr_assert_eq(sl_take(&l, st, t, 1, &d), SL_OK);
        cr_assert(d.allowed);
        void *copy = test_state(&l);
        memcpy(copy, st, sl_state_size(&l));
        int64_t later;
        switch (l.algorithm) {
        case SL_FIXED_WINDOW:
            later = 1; /* the window's edge */
            break;
        case SL_SLIDING_WINDOW:
            /* past the next window, where its count weighed as the previous */
            later = (l.months ? 31 * 86400 * NS_PER_SEC : p) + 1;
            break;
        case SL_SLIDING_LOG:
            later = l.period_ns;
            break;
        default:
            later = l.tolerance_ns + 1; /* a burst's time: full again */
        }
        int64_t given = sl_refund(&l, st, t + later, 1);
        cr_assert_eq(given, 0, "%s: %lld given back after %lld ns", CASES[i].name,
                     (long long)given, (long long)later);
        /* and the state decides as before it */
        sl_decision a, b;
        cr_assert_eq(sl_peek(&l, st, t + later, 1, &a), SL_OK);
        cr_assert_eq(sl_peek(&l, copy, t + later, 1, &b), SL_OK);
        assert_same(&a, &b, "after a late refund", CASES[i].name, 0);
        free(copy);
        free(st);
    }
}

/* A refund never gives more than a state that never took has: refunding far
 * more than was taken leaves a full budget, never one beyond it. */
Test(refund, never_beyond_a_state_that_never_took)
{
    for (size_t i = 0; i < NCASES; i++) {
        sl_limit l = limit_of(&CASES[i]);
        test_rng r = {i + 1};
        void *st = test_state(&l), *fresh = test_state(&l);
        int64_t now = T0;
        for (int k = 0; k < 200; k++) {
            now += step_of(&r, &l, now);
            sl_decision d, f;
            cr_assert_eq(sl_take(&l, st, now, cost_of(&r, &l), &d), SL_OK);
            int64_t want = test_range(&r, 0, 3) == 0 ? INT64_MAX : cost_of(&r, &l) * 3;
            int64_t given = sl_refund(&l, st, now, want);
            cr_assert(given >= 0 && given <= want);
            cr_assert_eq(sl_peek(&l, st, now, 0, &d), SL_OK);
            cr_assert_eq(sl_peek(&l, fresh, now, 0, &f), SL_OK);
            cr_assert_leq(d.remaining, f.remaining, "%s: %lld remaining, a fresh state %lld",
                          CASES[i].name, (long long)d.remaining, (long long)f.remaining);
            /* Everything given back: as fresh (but for the sliding window's
             * previous window, which a refund does not touch). */
            if (want == INT64_MAX && l.algorithm != SL_SLIDING_WINDOW)
                assert_same(&d, &f, "all given back", CASES[i].name, k);
        }
        free(st);
        free(fresh);
    }
}

/* With another take between a take and its refund, the state may admit up
 * to the refund's cost more than it would have without the take (sluice.h),
 * and never more: compared on the remaining of every later peek. */
Test(refund, takes_between_leave_at_most_cost_more)
{
    for (size_t i = 0; i < NCASES; i++) {
        const rcase *c = &CASES[i];
        sl_limit l = limit_of(c);
        for (uint64_t seed = 1; seed <= 4; seed++) {
            test_rng r = {seed * 31 + i};
            void *x = test_state(&l), *y = test_state(&l);
            int64_t now = T0;
            for (int k = 0; k < 150; k++) {
                memcpy(x, y, sl_state_size(&l));
                now += step_of(&r, &l, now);
                int64_t cost = cost_of(&r, &l);
                sl_decision d;
                cr_assert_eq(sl_take(&l, x, now, cost, &d), SL_OK);
                if (!d.allowed)
                    continue;
                now += step_of(&r, &l, now);
                int64_t other = cost_of(&r, &l);
                sl_decision dx, dy;
                cr_assert_eq(sl_take(&l, x, now, other, &dx), SL_OK);
                cr_assert_eq(sl_take(&l, y, now, other, &dy), SL_OK);
                if (dx.allowed != dy.allowed) /* x refused what y admits: roll y back */
                    continue;
                now += step_of(&r, &l, now);
                cr_assert_geq(sl_refund(&l, x, now, cost), 0);
                for (int j = 0; j < 4; j++) {
                    int64_t t = now + (j == 0 ? 0 : step_of(&r, &l, now));
                    cr_assert_eq(sl_peek(&l, x, t, 0, &dx), SL_OK);
                    cr_assert_eq(sl_peek(&l, y, t, 0, &dy), SL_OK);
                    cr_assert_leq(dx.remaining, dy.remaining + cost,
                                  "%s: %lld remaining after the refund, %lld without the take "
                                  "(cost %lld)",
                                  c->name, (long long)dx.remaining, (long long)dy.remaining,
                                  (long long)cost);
                }
            }
            free(x);
            free(y);
        }
    }
}

Test(refund, exact_numbers)
{
    sl_limit l;
    sl_decision d;
    /* GCRA, 10 a minute (T = 6 s): three taken, then time passes. */
    cr_assert_eq(sl_limit_init(&l, SL_GCRA, 10, MIN, 0), SL_OK);
    int64_t g[2] = {0, 0};
    cr_assert_eq(sl_take(&l, g, T0, 3, &d), SL_OK);
    cr_assert_eq(d.remaining, 7);
    /* 9 s later 1.5 intervals have refilled: 1.5 are owed, 2 whole units */
    cr_assert_eq(sl_refund(&l, g, T0 + 9 * NS_PER_SEC, 3), 2);
    cr_assert_eq(sl_peek(&l, g, T0 + 9 * NS_PER_SEC, 0, &d), SL_OK);
    cr_assert_eq(d.remaining, 10);
    cr_assert_eq(g[0], T0 + 9 * NS_PER_SEC, "the TAT never goes before now");
    cr_assert_eq(sl_refund(&l, g, T0 + 9 * NS_PER_SEC, 3), 0);

    /* Token bucket, 5 at once: four taken, one refilled, three given back of
     * the four asked. */
    cr_assert_eq(sl_limit_init(&l, SL_TOKEN_BUCKET, 5, 5 * NS_PER_SEC, 0), SL_OK);
    int64_t tb[2] = {0, 0};
    cr_assert_eq(sl_take(&l, tb, T0, 4, &d), SL_OK);
    cr_assert_eq(sl_refund(&l, tb, T0 + NS_PER_SEC, 4), 3);
    cr_assert_eq(sl_peek(&l, tb, T0 + NS_PER_SEC, 0, &d), SL_OK);
    cr_assert_eq(d.remaining, 5);

    /* Fixed window: the count goes back, in its window only. */
    cr_assert_eq(sl_limit_init(&l, SL_FIXED_WINDOW, 5, NS_PER_SEC, 0), SL_OK);
    int64_t fw[2] = {0, 0};
    cr_assert_eq(sl_take(&l, fw, T0, 3, &d), SL_OK);
    cr_assert_eq(sl_refund(&l, fw, T0 + NS_PER_SEC / 2, 2), 2);
    cr_assert_eq(sl_peek(&l, fw, T0 + NS_PER_SEC / 2, 0, &d), SL_OK);
    cr_assert_eq(d.remaining, 4);
    cr_assert_eq(sl_refund(&l, fw, T0 + NS_PER_SEC, 1), 0, "the next window");

    /* Sliding log: the newest stamps go, the older stay. */
    cr_assert_eq(sl_limit_init(&l, SL_SLIDING_LOG, 3, NS_PER_SEC, 0), SL_OK);
    void *log = test_state(&l);
    cr_assert_eq(sl_take(&l, log, T0, 1, &d), SL_OK);
    cr_assert_eq(sl_take(&l, log, T0 + 100, 2, &d), SL_OK);
    cr_assert_eq(sl_refund(&l, log, T0 + 200, 5), 3);
    cr_assert_eq(sl_take(&l, log, T0 + 300, 1, &d), SL_OK);
    cr_assert_eq(sl_refund(&l, log, T0 + 400, 1), 1);
    cr_assert_eq(sl_peek(&l, log, T0 + 400, 0, &d), SL_OK);
    cr_assert_eq(d.remaining, 3);
    cr_assert_eq(d.reset_after_ns, 0);
    free(log);
}

Test(refund, refuses_bad_input_and_leases)
{
    sl_limit l;
    sl_decision d;
    cr_assert_eq(sl_limit_init(&l, SL_GCRA, 10, MIN, 0), SL_OK);
    int64_t g[2] = {0, 0};
    cr_assert_eq(sl_take(&l, g, T0, 1, &d), SL_OK);
    int64_t copy[2] = {g[0], g[1]};
    cr_assert_eq(sl_refund(&l, g, T0, -1), SL_ERR_COST);
    cr_assert_eq(sl_refund(&l, g, -1, 1), SL_ERR_TIME);
    cr_assert_eq(sl_refund(&l, g, SL_TIME_MAX + 1, 1), SL_ERR_TIME);
    cr_assert_eq(sl_refund(&l, g, T0, 0), 0);
    cr_assert_eq(memcmp(g, copy, sizeof g), 0, "nothing changes on an error");
    /* A lease is released, not refunded. */
    cr_assert_eq(sl_limit_init(&l, SL_CONCURRENCY, 3, MIN, 0), SL_OK);
    void *c = test_state(&l);
    cr_assert_eq(sl_take(&l, c, T0, 1, &d), SL_OK);
    cr_assert_eq(sl_refund(&l, c, T0, 1), SL_ERR_ALGORITHM);
    cr_assert_eq(sl_peek(&l, c, T0, 0, &d), SL_OK);
    cr_assert_eq(d.remaining, 2);
    free(c);
}

/* A carried limit gives back only to a state that names it. */
Test(refund, carried_only_to_its_own_name)
{
    sl_limit a, b;
    sl_decision d;
    cr_assert_eq(sl_limit_init(&a, SL_GCRA, 100, MIN, 0), SL_OK);
    cr_assert_eq(sl_limit_carry(&a), SL_OK);
    cr_assert_eq(sl_limit_init(&b, SL_GCRA, 10000, MIN, 0), SL_OK);
    cr_assert_eq(sl_limit_carry(&b), SL_OK);
    int64_t st[4] = {0};
    cr_assert_eq(sl_refund(&a, st, T0, 1), 0, "never written");
    for (int i = 0; i < 10; i++)
        cr_assert_eq(sl_take(&a, st, T0, 1, &d), SL_OK);
    int64_t copy[4];
    memcpy(copy, st, sizeof st);
    cr_assert_eq(sl_refund(&b, st, T0, 5), 0, "named by another limit");
    cr_assert_eq(memcmp(st, copy, sizeof st), 0);
    cr_assert_eq(sl_refund(&a, st, T0, 5), 5);
    cr_assert_eq(sl_peek(&a, st, T0, 0, &d), SL_OK);
    cr_assert_eq(d.remaining, 95);
}

/* Bytes no take wrote (a module's key can be SET to anything): a refund
 * never crashes or overflows (the sanitizers watch), gives 0 .. cost back,
 * and leaves a state that takes and peeks still decide on within bounds. */
Test(refund, garbage_states_never_crash)
{
    test_rng r = {42};
    int64_t words[8 + 64];
    for (int i = 0; i < 20000; i++) {
        const rcase *c = &CASES[test_range(&r, 0, NCASES - 1)];
        sl_limit l = limit_of(c);
        size_t n = sl_state_size(&l);
        cr_assert_leq(n, sizeof words);
        for (size_t w = 0; w < n / 8; w++) {
            switch (test_range(&r, 0, 3)) {
            case 0:
                words[w] = (int64_t)test_next(&r);
                break;
            case 1:
                words[w] = test_range(&r, -3, 3);
                break;
            case 2:
                words[w] = T0 + test_range(&r, -MIN, MIN);
                break;
            default:
                words[w] = test_range(&r, 0, 1) ? INT64_MAX : INT64_MIN;
            }
        }
        if (c->carried && test_range(&r, 0, 1)) { /* its own name, so that the state is read */
            words[0] = l.limit;
            words[1] = l.period_ns;
        }
        int64_t now = test_range(&r, 0, 3) == 0 ? (int64_t)(test_next(&r) >> 2) : T0;
        int64_t cost = test_range(&r, 0, 3) == 0 ? (int64_t)(test_next(&r) >> 1)
                                                 : test_range(&r, 0, 20);
        int64_t before[8 + 64];
        memcpy(before, words, n);
        int64_t given = sl_refund(&l, words, now, cost);
        cr_assert(given >= 0 && given <= cost, "%s: %lld of %lld", c->name, (long long)given,
                  (long long)cost);
        if (given == 0)
            cr_assert_eq(memcmp(before, words, n), 0, "%s: nothing given, yet changed", c->name);
        sl_decision d;
        cr_assert_eq(sl_peek(&l, words, now, 1, &d), SL_OK);
        cr_assert(d.remaining >= 0 && d.remaining <= d.limit);
        cr_assert_eq(sl_take(&l, words, now, 1, &d), SL_OK);
        sl_state_expires_at(&l, words);
    }
}

/* ---- the store (sl_store_refund) ---- */

static sl_store *new_store(void)
{
    sl_store *s = NULL;
    cr_assert_eq(sl_store_new(NULL, &s), SL_OK);
    return s;
}

/* The same trace through two stores, the refunded take in one only: every
 * later decision of the key agrees. */
Test(store_refund, equals_never_taking_in_the_store)
{
    for (size_t i = 0; i < NCASES; i++) {
        const rcase *c = &CASES[i];
        sl_limit l = limit_of(c);
        sl_store *x = new_store(), *y = new_store();
        test_rng r = {i + 100};
        int64_t now = T0;
        int refunded = 0;
        for (int step = 0; step < 200; step++) {
            now += step_of(&r, &l, now);
            int64_t cost = cost_of(&r, &l);
            sl_decision dx, dy;
            cr_assert_eq(sl_store_take(x, "k", 1, &l, now, cost, &dx), SL_OK);
            cr_assert_eq(sl_store_take(y, "k", 1, &l, now, cost, &dy), SL_OK);
            assert_same(&dx, &dy, "store take", c->name, step);
            cost = cost_of(&r, &l);
            cr_assert_eq(sl_store_take(x, "k", 1, &l, now, cost, &dx), SL_OK);
            int64_t later = test_range(&r, 0, 1) ? 0 : step_of(&r, &l, now);
            int64_t given = sl_store_refund(x, "k", 1, &l, now + later, cost);
            cr_assert(given >= 0 && given <= cost);
            if (dx.allowed && later == 0)
                cr_assert_eq(given, cost, "%s step %d", c->name, step);
            now += later; /* the store's clock has moved on to the refund's */
            if (!dx.allowed) { /* nothing taken: make x what y is */
                cr_assert_geq(sl_store_reset(x, "k", 1), 0);
                cr_assert_geq(sl_store_reset(y, "k", 1), 0);
                continue;
            }
            refunded++;
            for (int64_t pc = 0; pc <= 2; pc++) {
                cr_assert_eq(sl_store_peek(x, "k", 1, &l, now, pc, &dx), SL_OK);
                cr_assert_eq(sl_store_peek(y, "k", 1, &l, now, pc, &dy), SL_OK);
                assert_same(&dx, &dy, "store peek", c->name, step);
            }
        }
        cr_assert_gt(refunded, 20, "%s", c->name);
        sl_store_free(x);
        sl_store_free(y);
    }
}

Test(store_refund, a_state_given_all_back_is_reclaimed)
{
    /* The store's clock is a monotonic one: its expiries are kept for times
     * well below Unix time's nanoseconds. */
    const int64_t t0 = 1000 * NS_PER_SEC;
    sl_store *s = new_store();
    sl_limit l;
    sl_decision d;
    sl_key_info info;
    sl_store_stats st;
    cr_assert_eq(sl_limit_init(&l, SL_GCRA, 10, MIN, 0), SL_OK);
    cr_assert_eq(sl_store_take(s, "k", 1, &l, t0, 3, &d), SL_OK);
    cr_assert_eq(sl_store_refund(s, "k", 1, &l, t0, 2), 2);
    cr_assert_eq(sl_store_inspect(s, "k", 1, t0, &info), 1);
    cr_assert_eq(info.expires_at / NS_PER_SEC, (t0 + 6 * NS_PER_SEC) / NS_PER_SEC,
                 "the expiry follows the state back");
    cr_assert_eq(sl_store_refund(s, "k", 1, &l, t0, 5), 1);
    cr_assert_eq(sl_store_inspect(s, "k", 1, t0, &info), 0, "never seen again: reclaimed");
    sl_store_get_stats(s, &st);
    cr_assert_eq(st.keys, 0);
    cr_assert_eq(st.reclaimed, 1);
    /* an absent key gets nothing, and is not stored */
    cr_assert_eq(sl_store_refund(s, "absent", 6, &l, t0, 1), 0);
    cr_assert_eq(sl_store_inspect(s, "absent", 6, t0, &info), 0);
    sl_store_free(s);
}

Test(store_refund, another_shape_gets_nothing)
{
    sl_store *s = new_store();
    sl_limit gcra, tb, log5, log6;
    sl_decision d;
    cr_assert_eq(sl_limit_init(&gcra, SL_GCRA, 10, MIN, 0), SL_OK);
    cr_assert_eq(sl_limit_init(&tb, SL_TOKEN_BUCKET, 10, MIN, 0), SL_OK);
    cr_assert_eq(sl_limit_init(&log5, SL_SLIDING_LOG, 5, MIN, 0), SL_OK);
    cr_assert_eq(sl_limit_init(&log6, SL_SLIDING_LOG, 6, MIN, 0), SL_OK);
    cr_assert_eq(sl_store_take(s, "g", 1, &gcra, T0, 4, &d), SL_OK);
    cr_assert_eq(sl_store_refund(s, "g", 1, &tb, T0, 4), 0);
    cr_assert_eq(sl_store_peek(s, "g", 1, &gcra, T0, 0, &d), SL_OK);
    cr_assert_eq(d.remaining, 6);
    cr_assert_eq(sl_store_take(s, "l", 1, &log5, T0, 4, &d), SL_OK);
    cr_assert_eq(sl_store_refund(s, "l", 1, &log6, T0, 4), 0, "another size");
    cr_assert_eq(sl_store_peek(s, "l", 1, &log5, T0, 0, &d), SL_OK);
    cr_assert_eq(d.remaining, 1);
    sl_store_free(s);
}

Test(store_refund, refuses_bad_input)
{
    sl_store *s = new_store();
    sl_limit l, c;
    sl_decision d;
    cr_assert_eq(sl_limit_init(&l, SL_GCRA, 10, MIN, 0), SL_OK);
    cr_assert_eq(sl_limit_init(&c, SL_CONCURRENCY, 3, MIN, 0), SL_OK);
    cr_assert_eq(sl_store_take(s, "k", 1, &l, T0, 3, &d), SL_OK);
    cr_assert_eq(sl_store_refund(s, "", 0, &l, T0, 1), SL_ERR_KEY);
    cr_assert_eq(sl_store_refund(s, "k", 1, &l, T0, -1), SL_ERR_COST);
    cr_assert_eq(sl_store_refund(s, "k", 1, &l, -1, 1), SL_ERR_TIME);
    cr_assert_eq(sl_store_refund(s, "k", 1, NULL, T0, 1), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_store_refund(NULL, "k", 1, &l, T0, 1), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_store_acquire(s, "c", 1, &c, T0, 1, 77, &d), SL_OK);
    cr_assert_eq(sl_store_refund(s, "c", 1, &c, T0, 1), SL_ERR_ALGORITHM);
    cr_assert_eq(sl_store_peek(s, "k", 1, &l, T0, 0, &d), SL_OK);
    cr_assert_eq(d.remaining, 7, "nothing changed");
    cr_assert_eq(sl_store_peek(s, "c", 1, &c, T0, 0, &d), SL_OK);
    cr_assert_eq(d.remaining, 2);
    /* a `now` older than the store's newest is decided at the newest: a
     * refund cannot move the key's time back */
    cr_assert_eq(sl_store_take(s, "k", 1, &l, T0 + 6 * NS_PER_SEC, 1, &d), SL_OK);
    cr_assert_eq(sl_store_refund(s, "k", 1, &l, T0, 10), 3);
    cr_assert_eq(sl_store_peek(s, "k", 1, &l, T0 + 6 * NS_PER_SEC, 0, &d), SL_OK);
    cr_assert_eq(d.remaining, 10);
    sl_store_free(s);
}
