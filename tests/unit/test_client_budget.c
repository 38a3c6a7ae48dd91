/*
 * test_client_budget.c: sl_retry_budget on a virtual clock. The floor
 * alone, the ratio alone, the window sliding; then random traces against
 * a slow model that keeps every event and counts the window from scratch
 * at each question: every answer the same, and the bound (retries in any
 * stretch of slots - 1 slots at most ratio times the first attempts of it
 * and of the slot before, plus the floor) checked on every retry allowed.
 * Last, an outage: every first attempt fails and is retried as often as
 * the budget allows; the requests stay within (1 + ratio) x first attempts
 * plus the floor.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice_client.h"
#include "testlib.h"

#define MS INT64_C(1000000)
#define SEC INT64_C(1000000000)

static sl_retry_budget *budget(int64_t ratio_permille, int64_t floor_milli, int64_t period,
                               int slots)
{
    sl_retry_budget *b = malloc(sizeof *b);
    sl_retry_budget_config c = {ratio_permille, floor_milli, period, slots};
    cr_assert_eq(sl_retry_budget_init(b, &c), SL_OK);
    return b;
}

static void done(sl_retry_budget *b)
{
    sl_retry_budget_destroy(b);
    free(b);
}

static int retries_allowed(sl_retry_budget *b, int64_t now, int tries)
{
    int n = 0;
    for (int i = 0; i < tries; i++)
        n += sl_retry_budget_try_retry(b, now);
    return n;
}

Test(client_budget, the_floor_alone)
{
    sl_retry_budget *b = budget(100, 1000, 10 * SEC, 0); /* 10%, 1/s, 10 s, 20 slots */
    cr_assert_eq(retries_allowed(b, 1000 * SEC, 100), 10);
    cr_assert_eq(sl_retry_budget_can_retry(b, 1000 * SEC), 0);
    done(b);
    b = budget(0, 250, 10 * SEC, 0); /* a quarter a second: 2.5 in 10 s, so 2 */
    cr_assert_eq(retries_allowed(b, 0, 10), 2);
    done(b);
}

Test(client_budget, the_ratio_of_first_attempts)
{
    sl_retry_budget *b = budget(100, 0, 10 * SEC, 0);
    cr_assert_eq(sl_retry_budget_record_attempt(b, 1000 * SEC, 1000), SL_OK);
    cr_assert_eq(retries_allowed(b, 1000 * SEC, 1000), 100);
    cr_assert_eq(sl_retry_budget_can_retry(b, 1000 * SEC), 0);
    sl_retry_budget_record_attempt(b, 1000 * SEC, 10);
    cr_assert_eq(sl_retry_budget_try_retry(b, 1000 * SEC), 1);
    cr_assert_eq(sl_retry_budget_try_retry(b, 1000 * SEC), 0);
    int64_t f, r;
    cr_assert_eq(sl_retry_budget_counts(b, 1000 * SEC, &f, &r), SL_OK);
    cr_assert(f == 1010 && r == 101);
    done(b);

    /* 1 per mille: one retry per thousand first attempts, exactly */
    b = budget(1, 0, 10 * SEC, 0);
    sl_retry_budget_record_attempt(b, 0, 999);
    cr_assert_eq(sl_retry_budget_try_retry(b, 0), 0);
    sl_retry_budget_record_attempt(b, 0, 1);
    cr_assert_eq(sl_retry_budget_try_retry(b, 0), 1);
    done(b);
}

Test(client_budget, the_window_slides)
{
    sl_retry_budget *b = budget(500, 0, 10 * SEC, 10); /* slots of 1 s */
    int64_t t = 1000 * SEC;
    sl_retry_budget_record_attempt(b, t, 100);
    cr_assert_eq(retries_allowed(b, t, 100), 50);
    cr_assert_eq(sl_retry_budget_can_retry(b, t + 5 * SEC), 0);
    int64_t f, r;
    sl_retry_budget_counts(b, t + 9 * SEC + 999 * MS, &f, &r);
    cr_assert(f == 100 && r == 50, "still in the window 9.999 s on");
    sl_retry_budget_counts(b, t + 10 * SEC, &f, &r);
    cr_assert(f == 0 && r == 0, "the first slot has slid out");
    cr_assert_eq(sl_retry_budget_can_retry(b, t + 10 * SEC), 0);
    sl_retry_budget_record_attempt(b, t + 10 * SEC, 4);
    cr_assert_eq(retries_allowed(b, t + 10 * SEC, 10), 2);
    /* a jump of many periods clears everything */
    sl_retry_budget_counts(b, t + 1000 * SEC, &f, &r);
    cr_assert(f == 0 && r == 0);
    /* a `now` from before the newest slot counts in the newest */
    sl_retry_budget_record_attempt(b, t + 1000 * SEC, 2);
    sl_retry_budget_record_attempt(b, t, 2);
    sl_retry_budget_counts(b, t + 1000 * SEC, &f, &r);
    cr_assert_eq(f, 4);
    done(b);
}

/* ---- the slow model ---- */

typedef struct {
    int64_t t;
    int retry; /* 0: a first attempt, 1: a retry allowed */
} event;

/* Counts the events in [from, to] among ev[0 .. n) (sorted by time). */
static void count(const event *ev, int n, int64_t from, int64_t to, int64_t *f, int64_t *r)
{
    *f = *r = 0;
    for (int i = n - 1; i >= 0 && ev[i].t >= from; i--) {
        if (ev[i].t > to)
            continue;
        if (ev[i].retry)
            (*r)++;
        else
            (*f)++;
    }
}

Test(client_budget, random_traces_against_a_slow_model)
{
    struct {
        int64_t ratio, floor_milli, period;
        int slots;
        int64_t mean_gap; /* ns between events */
    } cfgs[] = {
        {200, 2000, 10 * SEC, 20, 5 * MS}, {100, 1000, 10 * SEC, 20, 20 * MS},
        {0, 500, 3 * SEC, 7, MS},          {1000, 0, 60 * SEC, 64, 50 * MS},
        {37, 3, 999999937, 13, 300000},    {5000, 1, 1000, 1, 1},
    };
    enum { N = 6000 };
    event *ev = malloc(N * sizeof *ev);
    test_rng seed = {11};
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
        sl_retry_budget *b = budget(cfgs[c].ratio, cfgs[c].floor_milli, cfgs[c].period,
                                    cfgs[c].slots);
        int64_t width = cfgs[c].period / cfgs[c].slots;
        int64_t t = 77 * SEC, firsts = 0, retries = 0;
        int n = 0, asked = 0;
        while (n < N) {
            t += (int64_t)(test_next(&seed) % (uint64_t)(2 * cfgs[c].mean_gap + 1));
            if (test_next(&seed) % 2) {
                int64_t k = 1 + (int64_t)(test_next(&seed) % 3);
                cr_assert_eq(sl_retry_budget_record_attempt(b, t, k), SL_OK);
                for (int64_t j = 0; j < k && n < N; j++)
                    ev[n++] = (event){t, 0};
                firsts += k;
                continue;
            }
            /* the model: the window is the slot of t and the slots - 1 before */
            int64_t from = (t / width - cfgs[c].slots + 1) * width, f, r;
            count(ev, n, from, t, &f, &r);
            __int128 want = ((__int128)r + 1) * 1000000000000LL;
            __int128 have = (__int128)cfgs[c].ratio * f * 1000000000LL +
                            (__int128)cfgs[c].floor_milli * cfgs[c].period;
            int model = want <= have;
            cr_assert_eq(sl_retry_budget_can_retry(b, t), model, "config %zu event %d", c, n);
            int got = sl_retry_budget_try_retry(b, t);
            cr_assert_eq(got, model, "config %zu event %d: budget %d, model %d", c, n, got, model);
            asked++;
            if (!got)
                continue;
            ev[n++] = (event){t, 1};
            retries++;
            /* the bound, over the stretch of slots - 1 slots ending now */
            int64_t sf, sr, pf, pr;
            count(ev, n, t - (cfgs[c].slots - 1) * width, t, &sf, &sr);
            count(ev, n, t - cfgs[c].slots * width, t, &pf, &pr);
            __int128 lhs = (__int128)sr * 1000000000000LL;
            __int128 rhs = (__int128)cfgs[c].ratio * pf * 1000000000LL +
                           (__int128)cfgs[c].floor_milli * cfgs[c].period;
            cr_assert(lhs <= rhs, "config %zu: %lld retries in the stretch", c, (long long)sr);
        }
        printf("budget %lld/1000 + %lld/1000 a second over %.3f s in %d slots: %lld first "
               "attempts, %lld retries of %d asked\n",
               (long long)cfgs[c].ratio, (long long)cfgs[c].floor_milli,
               cfgs[c].period / 1e9, cfgs[c].slots, (long long)firsts, (long long)retries,
               asked);
        done(b);
    }
    free(ev);
}

Test(client_budget, an_outage_stays_within_the_budget)
{
    /* Every request fails for 9.5 s (shorter than the window less a slot):
     * each first attempt is retried until the budget says no. */
    sl_retry_budget *b = budget(100, 200, 20 * SEC, 20); /* 10% + 0.2/s (4 in 20 s) */
    test_rng seed = {23};
    int64_t t = 5 * SEC, end = t + 9500 * MS, firsts = 0, requests = 0;
    while (t < end) {
        t += (int64_t)(test_next(&seed) % (2 * MS));
        sl_retry_budget_record_attempt(b, t, 1);
        firsts++;
        requests++;
        while (sl_retry_budget_try_retry(b, t) == 1)
            requests++;
    }
    double bound = 1.1 * (double)firsts + 4;
    printf("outage: %lld requests for %lld first attempts (bound %.1f)\n", (long long)requests,
           (long long)firsts, bound);
    cr_assert((double)requests <= bound);
    cr_assert((double)requests >= 1.1 * (double)firsts - 1, "the budget is spent, not hoarded");
    done(b);
}

Test(client_budget, counts_saturate_and_bad_input)
{
    sl_retry_budget *b = budget(1000000, 0, 10 * SEC, 0);
    for (int i = 0; i < 70; i++)
        cr_assert_eq(sl_retry_budget_record_attempt(b, i * SEC, INT64_MAX), SL_OK);
    int64_t f, r;
    sl_retry_budget_counts(b, 70 * SEC, &f, &r);
    cr_assert(f > 0 && r == 0);
    cr_assert_eq(sl_retry_budget_try_retry(b, 70 * SEC), 1);
    cr_assert_eq(sl_retry_budget_record_attempt(b, 0, -1), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_retry_budget_record_attempt(b, -1, 1), SL_ERR_TIME);
    cr_assert_eq(sl_retry_budget_try_retry(b, SL_TIME_MAX + 1), SL_ERR_TIME);
    cr_assert_eq(sl_retry_budget_can_retry(b, -5), SL_ERR_TIME);
    cr_assert_eq(sl_retry_budget_counts(b, -1, &f, &r), SL_ERR_TIME);
    cr_assert(f == 0 && r == 0);
    done(b);

    sl_retry_budget x;
    sl_retry_budget_config bad[] = {
        {-1, 0, SEC, 1},    {1000001, 0, SEC, 1}, {0, -1, SEC, 1},
        {0, 1000000001, SEC, 1}, {0, 0, 0, 1},    {0, 0, 5, 10},
        {0, 0, SL_SPAN_MAX + 1, 1}, {0, 0, SEC, 65}, {0, 0, SEC, -1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(sl_retry_budget_init(&x, &bad[i]), SL_ERR_ARGUMENT, "config %zu", i);
    cr_assert_eq(sl_retry_budget_init(&x, NULL), SL_ERR_ARGUMENT);
}
