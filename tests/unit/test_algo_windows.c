/*
 * Fixed window, sliding log and sliding window counter: the boundary burst of
 * the fixed window (2L, never more), the log's exactness (never more than L in
 * any window, equal to a slow model), and the sliding window counter's error
 * bound against the true count.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "testlib.h"

enum { TRACE = 3000 };

/* Admits a random trace; fills at[] and cost[] with what was admitted. */
static int run_trace(const sl_limit *l, void *st, test_rng *r, int64_t span, int64_t *at,
                     int64_t *cost, int n_max)
{
    int n = 0;
    int64_t now = test_range(r, 0, l->period_ns * 3);
    for (int i = 0; i < n_max; i++) {
        now += test_range(r, 0, 3) == 0 ? 0 : test_range(r, 0, span);
        int64_t c = test_range(r, 0, 6) == 0 ? test_range(r, 2, 4) : 1;
        sl_decision d;
        cr_assert_eq(sl_take(l, st, now, c, &d), SL_OK);
        if (d.allowed) {
            at[n] = now;
            cost[n++] = c;
        }
    }
    return n;
}

/* The most units admitted in any half-open interval [s, s + w). */
static int64_t max_in_any_window(const int64_t *at, const int64_t *cost, int n, int64_t w)
{
    int64_t best = 0, sum = 0;
    for (int i = 0, j = 0; j < n; j++) {
        sum += cost[j];
        while (at[j] - at[i] >= w)
            sum -= cost[i++];
        if (sum > best)
            best = sum;
    }
    return best;
}

Test(fixed_window, lets_2L_through_around_a_boundary)
{
    sl_limit l;
    cr_assert_eq(sl_limit_init(&l, SL_FIXED_WINDOW, 100, 60 * NS_PER_SEC, 0), SL_OK);
    int64_t st[2] = {0, 0};
    int64_t boundary = 600 * NS_PER_SEC;
    int admitted = 0;
    sl_decision d;
    for (int i = 0; i < 150; i++) { /* a millisecond before the boundary */
        sl_take(&l, st, boundary - NS_PER_MS, 1, &d);
        admitted += d.allowed;
    }
    cr_assert_eq(d.retry_after_ns, NS_PER_MS);
    for (int i = 0; i < 150; i++) { /* and right on it */
        sl_take(&l, st, boundary, 1, &d);
        admitted += d.allowed;
    }
    cr_assert_eq(admitted, 200, "2L pass within 1 ms");
    cr_assert_eq(d.reset_after_ns, 60 * NS_PER_SEC);
}

Test(fixed_window, never_more_than_2L_in_any_window)
{
    test_rng r = {3};
    static int64_t at[TRACE], cost[TRACE];
    for (int trial = 0; trial < 30; trial++) {
        sl_limit l;
        cr_assert_eq(sl_limit_init(&l, SL_FIXED_WINDOW, test_range(&r, 1, 40),
                                   test_range(&r, 1, 1000) * 1000, 0),
                     SL_OK);
        int64_t st[2] = {0, 0};
        int n = run_trace(&l, st, &r, l.period_ns / 8 + 1, at, cost, TRACE);
        cr_assert_leq(max_in_any_window(at, cost, n, l.period_ns), 2 * l.limit);
        /* and at most L in every aligned window */
        for (int i = 0, j = 0; i < n; i = j) {
            int64_t w = at[i] / l.period_ns, sum = 0;
            for (j = i; j < n && at[j] / l.period_ns == w; j++)
                sum += cost[j];
            cr_assert_leq(sum, l.limit);
        }
    }
}

/* The slow model of the log: every admitted time in an array. */
static bool model_log_take(int64_t *log, int *n, const sl_limit *l, int64_t now, int64_t c)
{
    int64_t in_window = 0;
    for (int i = 0; i < *n; i++)
        in_window += log[i] > now - l->period_ns;
    if (c > l->limit || in_window + c > l->limit)
        return false;
    for (int64_t i = 0; i < c; i++)
        log[(*n)++] = now;
    return true;
}

Test(sliding_log, is_exact_never_more_than_L_in_any_window)
{
    test_rng r = {11};
    static int64_t at[TRACE], cost[TRACE], model[TRACE * 4];
    for (int trial = 0; trial < 30; trial++) {
        sl_limit l;
        cr_assert_eq(sl_limit_init(&l, SL_SLIDING_LOG, test_range(&r, 1, 40),
                                   test_range(&r, 1, 1000) * 1000, 0),
                     SL_OK);
        void *st = test_state(&l);
        int n = run_trace(&l, st, &r, l.period_ns / 8 + 1, at, cost, TRACE);
        cr_assert_leq(max_in_any_window(at, cost, n, l.period_ns), l.limit);
        free(st);

        /* Decision by decision, against the slow model. */
        st = test_state(&l);
        int mn = 0;
        int64_t now = 0;
        for (int i = 0; i < 1000; i++) {
            now += test_range(&r, 0, l.period_ns / 5);
            int64_t c = test_range(&r, 1, 3);
            sl_decision d;
            sl_take(&l, st, now, c, &d);
            cr_assert_eq(d.allowed, model_log_take(model, &mn, &l, now, c), "trial %d step %d",
                         trial, i);
            if (!d.allowed && c <= l.limit) { /* retry_after is the first moment it fits */
                sl_decision later;
                sl_peek(&l, st, now + d.retry_after_ns, c, &later);
                cr_assert(later.allowed);
                sl_peek(&l, st, now + d.retry_after_ns - 1, c, &later);
                cr_assert(!later.allowed);
            }
        }
        free(st);
    }
}

/*
 * The sliding window counter's bound: whenever it admits at `now`, the true
 * count over (now - W, now] is at most L + prev * (elapsed + 1) / W, where prev is
 * what it admitted in the previous aligned window and elapsed is how far now
 * is into the current one. Hence always below 2L; and each aligned window
 * holds at most L.
 */
Test(sliding_window, stays_within_its_error_bound_of_the_true_count)
{
    test_rng r = {5};
    static int64_t at[TRACE], cost[TRACE];
    for (int trial = 0; trial < 40; trial++) {
        sl_limit l;
        int64_t w = test_range(&r, 1, 1000) * 1000 + test_range(&r, 0, 1);
        cr_assert_eq(sl_limit_init(&l, SL_SLIDING_WINDOW, test_range(&r, 1, 40), w, 0), SL_OK);
        int64_t st[3] = {0, 0, 0};
        int n = 0;
        int64_t now = test_range(&r, 0, 3 * w);
        for (int i = 0; i < TRACE; i++) {
            now += test_range(&r, 0, 3) == 0 ? 0 : test_range(&r, 0, w / 6 + 1);
            int64_t c = test_range(&r, 1, 2);
            sl_decision d;
            sl_take(&l, st, now, c, &d);
            if (!d.allowed)
                continue;
            at[n] = now;
            cost[n++] = c;
            int64_t win = now / w, elapsed = now % w, prev = 0, count = 0;
            for (int k = 0; k < n; k++) {
                if (at[k] / w == win - 1)
                    prev += cost[k];
                if (at[k] > now - w)
                    count += cost[k];
            }
            /* count <= L + prev * (elapsed + 1) / W, compared without dividing */
            cr_assert((__int128)count * w <= (__int128)l.limit * w + (__int128)prev * (elapsed + 1),
                      "trial %d: %lld in the window, prev %lld, elapsed %lld/%lld", trial,
                      (long long)count, (long long)prev, (long long)elapsed, (long long)w);
            cr_assert_lt(count, 2 * l.limit);
        }
        for (int i = 0, j = 0; i < n; i = j) {
            int64_t win = at[i] / w, sum = 0;
            for (j = i; j < n && at[j] / w == win; j++)
                sum += cost[j];
            cr_assert_leq(sum, l.limit);
        }
    }
}

Test(sliding_window, holds_the_boundary_attacker_that_fixed_window_lets_through)
{
    sl_limit l;
    cr_assert_eq(sl_limit_init(&l, SL_SLIDING_WINDOW, 100, 60 * NS_PER_SEC, 0), SL_OK);
    int64_t st[3] = {0, 0, 0};
    int64_t boundary = 600 * NS_PER_SEC;
    int admitted = 0;
    sl_decision d;
    for (int i = 0; i < 150; i++) {
        sl_take(&l, st, boundary - NS_PER_MS, 1, &d);
        admitted += d.allowed;
    }
    cr_assert_eq(admitted, 100);
    for (int i = 0; i < 150; i++) {
        sl_take(&l, st, boundary + NS_PER_MS, 1, &d);
        admitted += d.allowed;
    }
    /* 1 ms into the window, the previous 100 weigh 99.998: nothing more fits. */
    cr_assert_eq(admitted, 100);
    /* retry_after: when prev's share has shrunk by one unit, 0.6 s in
     * (less the nanosecond that is the window's own). */
    cr_assert_eq(d.retry_after_ns, 600 * NS_PER_MS - NS_PER_MS - 1);
    sl_peek(&l, st, boundary + d.retry_after_ns + NS_PER_MS, 1, &d);
    cr_assert(d.allowed);
}

Test(sliding_window, retry_after_is_the_first_moment_it_fits)
{
    test_rng r = {8};
    for (int trial = 0; trial < 200; trial++) {
        sl_limit l;
        int64_t w = test_range(&r, 1, 100) * 1000 + test_range(&r, 0, 7);
        cr_assert_eq(sl_limit_init(&l, SL_SLIDING_WINDOW, test_range(&r, 1, 20), w, 0), SL_OK);
        int64_t st[3] = {0, 0, 0}, now = test_range(&r, 0, 5 * w);
        for (int i = 0; i < 200; i++) {
            now += test_range(&r, 0, w / 4);
            int64_t c = test_range(&r, 1, 3);
            sl_decision d, later;
            sl_take(&l, st, now, c, &d);
            if (d.allowed || c > l.limit)
                continue;
            sl_peek(&l, st, now + d.retry_after_ns, c, &later);
            cr_assert(later.allowed, "trial %d step %d", trial, i);
            sl_peek(&l, st, now + d.retry_after_ns - 1, c, &later);
            cr_assert(!later.allowed, "trial %d step %d: fits earlier", trial, i);
        }
    }
}
