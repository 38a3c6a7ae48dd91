/*
 * What every algorithm promises: invalid parameters get their own error,
 * peeks never write, a state past sl_state_expires_at answers like a fresh
 * one, a rebased state answers on the new clock as it did on the old, and
 * edge cases (huge costs, limits of 1, periods of 1 ns and of a year) give
 * sane answers with no undefined behaviour (the sanitizers watch).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "algo/algo.h"
#include "testlib.h"

#define YEAR (INT64_C(365) * 24 * 3600 * NS_PER_SEC)

Test(limit, names_round_trip)
{
    for (int a = 0; a < SL_ALGORITHM_COUNT; a++) {
        const char *n = sl_algorithm_name((sl_algorithm)a);
        cr_assert_not_null(n);
        sl_algorithm back;
        cr_assert_eq(sl_algorithm_parse(n, strlen(n), &back), SL_OK);
        cr_assert_eq(back, (sl_algorithm)a);
    }
    sl_algorithm x;
    cr_assert_eq(sl_algorithm_parse("gcraX", 4, &x), SL_OK, "length-delimited");
    cr_assert_eq(sl_algorithm_parse("GCRA", 4, &x), SL_OK, "ASCII case is ignored");
    cr_assert_eq(x, SL_GCRA);
    cr_assert_eq(sl_algorithm_parse("Sliding_Window", 14, &x), SL_OK);
    cr_assert_eq(x, SL_SLIDING_WINDOW);
    cr_assert_eq(sl_algorithm_parse("gcr\xc1", 4, &x), SL_ERR_ALGORITHM, "only ASCII folds");
    cr_assert_eq(sl_algorithm_parse("", 0, &x), SL_ERR_ALGORITHM);
    cr_assert_null(sl_algorithm_name(SL_ALGORITHM_COUNT));
}

Test(limit, invalid_parameters_get_distinct_errors)
{
    sl_limit l;
    for (int a = 0; a < SL_ALGORITHM_COUNT; a++) {
        cr_assert_eq(sl_limit_init(&l, (sl_algorithm)a, 0, 1, 0), SL_ERR_LIMIT);
        cr_assert_eq(sl_limit_init(&l, (sl_algorithm)a, -1, 1, 0), SL_ERR_LIMIT);
        cr_assert_eq(sl_limit_init(&l, (sl_algorithm)a, 1, 0, 0), SL_ERR_PERIOD);
        cr_assert_eq(sl_limit_init(&l, (sl_algorithm)a, 1, -5, 0), SL_ERR_PERIOD);
        cr_assert_eq(sl_limit_init(&l, (sl_algorithm)a, 1, SL_SPAN_MAX + 1, 0), SL_ERR_PERIOD);
        cr_assert_eq(sl_limit_init(&l, (sl_algorithm)a, 1, 1, -1), SL_ERR_BURST);
        cr_assert_eq(sl_limit_init(&l, (sl_algorithm)a, INT64_MAX, 1, 0), SL_ERR_LIMIT);
    }
    cr_assert_eq(sl_limit_init(&l, (sl_algorithm)99, 1, 1, 0), SL_ERR_ALGORITHM);
    /* a year per request, a million at once: 10^6 years of tolerance */
    cr_assert_eq(sl_limit_init(&l, SL_GCRA, 1, YEAR, 1000000), SL_ERR_OVERFLOW);
    cr_assert_eq(sl_limit_init(&l, SL_SLIDING_LOG, SL_SLIDING_LOG_MAX + 1, 1, 0), SL_ERR_LIMIT);
    cr_assert_eq(sl_limit_init(&l, SL_CONCURRENCY, SL_CONCURRENCY_MAX + 1, 1, 0), SL_ERR_LIMIT);

    cr_assert_eq(sl_state_size(&l), 0, "a failed init leaves no state size");
    cr_assert_eq(sl_limit_init(&l, SL_GCRA, 10, NS_PER_SEC, 0), SL_OK);
    cr_assert_eq(l.burst, 10, "burst defaults to the limit");
    cr_assert_eq(sl_state_size(&l), 16);
    int64_t st[2] = {0, 0};
    sl_decision d;
    cr_assert_eq(sl_take(&l, st, 0, -1, &d), SL_ERR_COST);
    cr_assert_eq(sl_take(&l, st, -1, 1, &d), SL_ERR_TIME);
    cr_assert_eq(sl_take(&l, st, SL_TIME_MAX + 1, 1, &d), SL_ERR_TIME);
    cr_assert_eq(st[0], 0, "an error leaves the state alone");
    cr_assert_str_eq(sl_strerror(SL_ERR_COST), "cost must be a non-negative integer");
    cr_assert_str_eq(sl_strerror(12345), "unknown error");
    cr_assert_eq(sl_http_status(SL_ERR_LIMIT), 400);
    cr_assert_eq(sl_http_status(SL_ERR_NOMEM), 503);
}

/* One limit per algorithm for the generic properties. */
static void limits_for(test_rng *r, sl_limit out[SL_ALGORITHM_COUNT])
{
    int64_t limit = test_range(r, 1, 12), period = test_range(r, 1, 5000) * 1000 + test_range(r, 0, 9);
    int64_t burst = test_range(r, 0, 15);
    for (int a = 0; a < SL_ALGORITHM_COUNT; a++)
        cr_assert_eq(sl_limit_init(&out[a], (sl_algorithm)a, limit, period, burst), SL_OK);
}

Test(algorithms, peek_never_writes_and_take_with_cost_zero_consumes_nothing)
{
    test_rng r = {1};
    for (int trial = 0; trial < 50; trial++) {
        sl_limit ls[SL_ALGORITHM_COUNT];
        limits_for(&r, ls);
        for (int a = 0; a < SL_ALGORITHM_COUNT; a++) {
            const sl_limit *l = &ls[a];
            size_t size = sl_state_size(l);
            void *st = test_state(l), *copy = malloc(size);
            int64_t now = 0;
            for (int i = 0; i < 300; i++) {
                now += test_range(&r, 0, l->period_ns / 4);
                int64_t c = test_range(&r, 0, 3);
                sl_decision p, t;
                memcpy(copy, st, size);
                cr_assert_eq(sl_peek(l, st, now, c, &p), SL_OK);
                cr_assert(memcmp(copy, st, size) == 0, "%s: peek wrote", sl_algorithm_name(a));
                cr_assert_eq(sl_take(l, st, now, c, &t), SL_OK);
                cr_assert_eq(p.allowed, t.allowed, "%s: peek and take disagree",
                             sl_algorithm_name(a));
                cr_assert_eq(p.remaining, t.remaining);
                cr_assert_eq(p.retry_after_ns, t.retry_after_ns);
                if (c == 0) {
                    sl_decision again;
                    sl_peek(l, st, now, 0, &again);
                    cr_assert_eq(again.remaining, t.remaining);
                }
                cr_assert_geq(t.remaining, 0);
                cr_assert_leq(t.remaining, t.limit);
                cr_assert_geq(t.reset_after_ns, 0);
                cr_assert(t.allowed ? t.retry_after_ns == 0 : t.retry_after_ns > 0);
            }
            free(st);
            free(copy);
        }
    }
}

Test(algorithms, a_state_past_its_expiry_answers_like_a_fresh_one)
{
    test_rng r = {2};
    for (int trial = 0; trial < 50; trial++) {
        sl_limit ls[SL_ALGORITHM_COUNT];
        limits_for(&r, ls);
        for (int a = 0; a < SL_ALGORITHM_COUNT; a++) {
            const sl_limit *l = &ls[a];
            void *st = test_state(l), *fresh = test_state(l);
            int64_t now = test_range(&r, 0, 10 * l->period_ns);
            for (int i = 0; i < 50; i++) {
                now += test_range(&r, 0, l->period_ns / 8);
                sl_decision d;
                sl_take(l, st, now, test_range(&r, 1, 2), &d);
                int64_t exp = sl_state_expires_at(l, st);
                /* From max(exp, now) on (exp <= now: already), it is fresh. */
                int64_t at = exp > now ? exp : now;
                sl_decision at_exp, new_key, before;
                sl_peek(l, st, at, 0, &at_exp);
                sl_peek(l, fresh, at, 0, &new_key);
                cr_assert_eq(at_exp.remaining, new_key.remaining, "%s trial %d",
                             sl_algorithm_name(a), trial);
                cr_assert_eq(at_exp.reset_after_ns, 0, "%s: exp %lld now %lld reset %lld",
                             sl_algorithm_name(a), (long long)exp, (long long)now,
                             (long long)at_exp.reset_after_ns);
                if (exp > now) {
                    /* and not a nanosecond earlier */
                    sl_peek(l, st, exp - 1, 0, &before);
                    cr_assert_gt(before.reset_after_ns, 0, "%s: expires_at is late",
                                 sl_algorithm_name(a));
                    cr_assert_eq(d.reset_after_ns, exp - now, "%s", sl_algorithm_name(a));
                }
            }
            free(st);
            free(fresh);
        }
    }
}

Test(algorithms, a_rebased_state_answers_on_the_new_clock_as_on_the_old)
{
    test_rng r = {3};
    for (int trial = 0; trial < 30; trial++) {
        sl_limit ls[SL_ALGORITHM_COUNT];
        limits_for(&r, ls);
        for (int a = 0; a < SL_ALGORITHM_COUNT; a++) {
            const sl_limit *l = &ls[a];
            size_t size = sl_state_size(l);
            void *old = test_state(l), *moved = malloc(size);
            /* The new clock runs delta ahead; a multiple of the period keeps
             * the windowed algorithms' alignment, so answers match exactly. */
            int64_t delta = (test_range(&r, 0, 1) ? 1 : -1) * test_range(&r, 0, 50) * l->period_ns;
            int64_t now = 100 * l->period_ns;
            for (int i = 0; i < 30; i++) {
                now += test_range(&r, 0, l->period_ns / 4);
                sl_decision d;
                sl_take(l, old, now, 1, &d);
            }
            memcpy(moved, old, size);
            sl_state_rebase((sl_algorithm)a, moved, size, delta);
            for (int i = 0; i < 100; i++) {
                now += test_range(&r, 0, l->period_ns / 4);
                int64_t c = test_range(&r, 1, 2);
                sl_decision d1, d2;
                sl_take(l, old, now, c, &d1);
                sl_take(l, moved, now + delta, c, &d2);
                cr_assert_eq(d1.allowed, d2.allowed, "%s trial %d step %d",
                             sl_algorithm_name(a), trial, i);
                cr_assert_eq(d1.remaining, d2.remaining);
                cr_assert_eq(d1.reset_after_ns, d2.reset_after_ns);
                cr_assert_eq(d1.retry_after_ns, d2.retry_after_ns);
            }
            free(old);
            free(moved);
        }
    }
}

Test(algorithms, edge_cases_give_sane_answers)
{
    static const int64_t periods[] = {1, 2, 1000, NS_PER_SEC, YEAR, SL_SPAN_MAX};
    static const int64_t limits[] = {1, 2, 3, 1000, SL_SLIDING_LOG_MAX};
    static const int64_t costs[] = {0, 1, 2, 999, INT64_MAX};
    test_rng r = {4};
    for (int a = 0; a < SL_ALGORITHM_COUNT; a++)
        for (size_t pi = 0; pi < sizeof periods / sizeof *periods; pi++)
            for (size_t li = 0; li < sizeof limits / sizeof *limits; li++) {
                sl_limit l;
                int rc = sl_limit_init(&l, (sl_algorithm)a, limits[li], periods[pi], 0);
                if (rc != SL_OK) {
                    cr_assert_eq(rc, SL_ERR_OVERFLOW);
                    continue;
                }
                void *st = test_state(&l);
                int64_t times[] = {0, 1, periods[pi], SL_TIME_MAX - 1, SL_TIME_MAX};
                for (int i = 0; i < 60; i++) {
                    int64_t now = i < 5 ? times[i] : test_range(&r, 0, SL_TIME_MAX);
                    if (i >= 5 && i % 2)
                        now = times[4] - test_range(&r, 0, test_min(3 * periods[pi], times[4]));
                    int64_t c = costs[test_range(&r, 0, 4)];
                    sl_decision d;
                    cr_assert_eq(sl_take(&l, st, now, c, &d), SL_OK);
                    cr_assert(d.remaining >= 0 && d.remaining <= d.limit && d.reset_after_ns >= 0,
                              "%s limit %lld period %lld: now %lld cost %lld: remaining %lld",
                              sl_algorithm_name(a), (long long)l.limit, (long long)l.period_ns,
                              (long long)now, (long long)c, (long long)d.remaining);
                    if (c > d.limit) {
                        cr_assert(!d.allowed);
                        cr_assert_eq(d.retry_after_ns, SL_NEVER, "huge costs never pass");
                    }
                }
                free(st);
            }
}

Test(algorithms, a_limit_of_one_per_nanosecond_and_one_per_year)
{
    for (int a = 0; a < SL_ALGORITHM_COUNT; a++) {
        if (a == SL_CONCURRENCY)
            continue;
        sl_limit ns, yr;
        cr_assert_eq(sl_limit_init(&ns, (sl_algorithm)a, 1, 1, 0), SL_OK);
        cr_assert_eq(sl_limit_init(&yr, (sl_algorithm)a, 1, YEAR, 0), SL_OK);
        void *s1 = test_state(&ns), *s2 = test_state(&yr);
        sl_decision d;
        int passed = 0;
        for (int64_t t = 10; t < 20; t++) { /* one per ns: all ten pass */
            sl_take(&ns, s1, t, 1, &d);
            passed += d.allowed;
        }
        cr_assert_eq(passed, 10, "%s", sl_algorithm_name(a));
        sl_take(&ns, s1, 19, 1, &d);
        cr_assert(!d.allowed);
        cr_assert_eq(d.retry_after_ns, 1);

        int64_t t0 = YEAR * 3; /* aligned, so the windows start here too */
        sl_take(&yr, s2, t0, 1, &d);
        cr_assert(d.allowed);
        sl_take(&yr, s2, t0 + YEAR - 1, 1, &d);
        cr_assert(!d.allowed, "%s", sl_algorithm_name(a));
        /* The sliding window counter weighs the previous year's request as
         * if spread over it, so it waits longer; the others are exact. */
        if (a != SL_SLIDING_WINDOW)
            cr_assert_eq(d.retry_after_ns, 1, "%s", sl_algorithm_name(a));
        int64_t retry = d.retry_after_ns;
        sl_take(&yr, s2, t0 + YEAR - 1 + retry, 1, &d);
        cr_assert(d.allowed, "%s", sl_algorithm_name(a));
        free(s1);
        free(s2);
    }
}

/* The store's hot path takes and reads the expiry in one call: it must
 * answer exactly as sl_take followed by sl_state_expires_at. */
Test(algorithms, take_expiring_is_take_then_expires_at)
{
    test_rng r = {7};
    for (int trial = 0; trial < 30; trial++) {
        sl_limit ls[SL_ALGORITHM_COUNT];
        limits_for(&r, ls);
        for (int a = 0; a < SL_ALGORITHM_COUNT; a++) {
            const sl_limit *l = &ls[a];
            size_t size = sl_state_size(l);
            void *one = test_state(l), *two = test_state(l);
            int64_t now = 0;
            for (int i = 0; i < 200; i++) {
                now += test_range(&r, 0, l->period_ns / 3);
                int64_t c = test_range(&r, 0, 3), exp = -1;
                sl_decision d1, d2;
                cr_assert_eq(sl_take(l, one, now, c, &d1), SL_OK);
                cr_assert_eq(sl_take_expiring(l, two, now, c, &d2, &exp), SL_OK);
                cr_assert(memcmp(&d1, &d2, sizeof d1) == 0, "%s: decisions differ",
                          sl_algorithm_name(a));
                cr_assert(memcmp(one, two, size) == 0, "%s: states differ", sl_algorithm_name(a));
                cr_assert_eq(exp, sl_state_expires_at(l, one));
            }
            int64_t exp = 12345;
            sl_decision d;
            cr_assert_eq(sl_take_expiring(l, two, -1, 1, &d, &exp), SL_ERR_TIME);
            cr_assert_eq(exp, 12345, "an error leaves *expires_at alone");
            free(one);
            free(two);
        }
    }
}
