/*
 * test_client_backoff.c: sl_backoff and sl_retry over many draws from
 * fixed seeds: every draw within its bounds, the spread that of a uniform
 * draw (mean and tenths, figures printed), Retry-After always respected
 * (above the cap too), the deadline never passed, the same seed giving the
 * same sleeps, and the unbiased draw on a source whose values are chosen.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "sluice_client.h"

#define MS INT64_C(1000000)
#define SEC INT64_C(1000000000)
#define DRAWS 20000

Test(client_backoff, full_jitter_bounds_mean_and_spread)
{
    sl_backoff b;
    cr_assert_eq(sl_backoff_init(&b, 100 * MS, 3 * SEC, SL_BACKOFF_NO_DEADLINE, false), SL_OK);
    sl_rng rng;
    sl_rng_seed(&rng, 1);
    for (int attempt = 0; attempt < 8; attempt++) {
        int64_t ceiling = 100 * MS << attempt;
        if (ceiling > 3 * SEC)
            ceiling = 3 * SEC;
        double sum = 0;
        int64_t lo = INT64_MAX, hi = -1;
        int tenths[10] = {0};
        for (int i = 0; i < DRAWS; i++) {
            int64_t d = sl_backoff_delay(&b, attempt, 0, 0, sl_rng_next, &rng);
            cr_assert(d >= 0 && d <= ceiling, "attempt %d: %lld outside [0, %lld]", attempt,
                      (long long)d, (long long)ceiling);
            sum += (double)d;
            lo = d < lo ? d : lo;
            hi = d > hi ? d : hi;
            int t = (int)((double)d / (double)ceiling * 10);
            tenths[t > 9 ? 9 : t]++;
        }
        double mean = sum / DRAWS;
        printf("full jitter attempt %d: ceiling %.3f s, mean %.4f s, min %.4f s, max %.4f s\n",
               attempt, ceiling / 1e9, mean / 1e9, lo / 1e9, hi / 1e9);
        /* uniform on [0, c]: mean c/2, standard error c/sqrt(12 n), 0.2% of c */
        cr_expect(mean > 0.49 * ceiling && mean < 0.51 * ceiling, "attempt %d: mean %.0f",
                  attempt, mean);
        for (int t = 0; t < 10; t++)
            cr_expect(tenths[t] > DRAWS / 10 * 0.9 && tenths[t] < DRAWS / 10 * 1.1,
                      "attempt %d: tenth %d holds %d draws", attempt, t, tenths[t]);
    }
}

Test(client_backoff, decorrelated_bounds_and_climb)
{
    sl_backoff b;
    cr_assert_eq(sl_backoff_init(&b, 50 * MS, 2 * SEC, SL_BACKOFF_NO_DEADLINE, true), SL_OK);
    sl_rng rng;
    sl_rng_seed(&rng, 2);
    int64_t prev = 0, hi = 0;
    double sum = 0;
    for (int i = 0; i < DRAWS; i++) {
        int64_t d = sl_backoff_delay(&b, 0, prev, 0, sl_rng_next, &rng);
        int64_t p = prev > 50 * MS ? prev : 50 * MS;
        int64_t top = 3 * p < 2 * SEC ? 3 * p : 2 * SEC;
        cr_assert(d >= 50 * MS && d <= top, "draw %d: %lld outside [base, %lld]", i,
                  (long long)d, (long long)top);
        sum += (double)d;
        hi = d > hi ? d : hi;
        prev = d;
    }
    printf("decorrelated: mean %.4f s, max %.4f s (cap 2 s)\n", sum / DRAWS / 1e9, hi / 1e9);
    cr_assert(hi > 3 * SEC / 2, "it climbs towards the cap: max %lld", (long long)hi);
    cr_assert(hi == 2 * SEC, "the cap is reached and held: max %lld", (long long)hi);
}

Test(client_backoff, retry_after_is_always_respected)
{
    sl_rng pick, rng;
    sl_rng_seed(&pick, 3);
    sl_rng_seed(&rng, 4);
    for (int decorrelated = 0; decorrelated <= 1; decorrelated++) {
        sl_backoff b;
        cr_assert_eq(sl_backoff_init(&b, 10 * MS, 500 * MS, SL_BACKOFF_NO_DEADLINE, decorrelated),
                     SL_OK);
        int64_t prev = 0, above_cap = 0;
        for (int i = 0; i < DRAWS; i++) {
            static const int64_t fixed[] = {0, 1, MS, 300 * MS, SEC, 7500 * MS, INT64_MAX};
            uint64_t k = sl_rng_next(&pick) % 8;
            int64_t ra = k < 7 ? fixed[k] : (int64_t)(sl_rng_next(&pick) % (10 * SEC));
            int64_t d = sl_backoff_delay(&b, i % 70, prev, ra, sl_rng_next, &rng);
            cr_assert(d >= ra, "%lld before the server's %lld", (long long)d, (long long)ra);
            cr_assert(d <= (ra > 500 * MS ? ra : 500 * MS));
            above_cap += d > 500 * MS;
            prev = d;
        }
        cr_assert(above_cap > 0, "a Retry-After above the cap is slept in full");
    }
}

Test(client_backoff, any_attempt_count_stays_in_range)
{
    sl_backoff b;
    cr_assert_eq(sl_backoff_init(&b, 100 * MS, SEC, SL_BACKOFF_NO_DEADLINE, false), SL_OK);
    sl_rng rng;
    sl_rng_seed(&rng, 5);
    int64_t attempts[] = {61, 62, 63, 64, 1000000, INT64_MAX};
    for (size_t i = 0; i < sizeof attempts / sizeof attempts[0]; i++) {
        int64_t d = sl_backoff_delay(&b, attempts[i], 0, 0, sl_rng_next, &rng);
        cr_assert(d >= 0 && d <= SEC);
    }
    /* a base that doubles past 2^62 ns saturates at the cap */
    cr_assert_eq(sl_backoff_init(&b, SL_SPAN_MAX / 2, SL_SPAN_MAX, SL_BACKOFF_NO_DEADLINE, false),
                 SL_OK);
    for (int a = 0; a < 70; a++)
        cr_assert(sl_backoff_delay(&b, a, 0, 0, sl_rng_next, &rng) <= SL_SPAN_MAX);
    /* decorrelated, after a previous sleep of INT64_MAX (a server's) */
    cr_assert_eq(sl_backoff_init(&b, MS, SEC, SL_BACKOFF_NO_DEADLINE, true), SL_OK);
    int64_t d = sl_backoff_delay(&b, 0, INT64_MAX, 0, sl_rng_next, &rng);
    cr_assert(d >= MS && d <= SEC);
}

Test(client_backoff, the_deadline_is_never_passed)
{
    sl_backoff b;
    cr_assert_eq(sl_backoff_init(&b, 500 * MS, 500 * MS, 2 * SEC, false), SL_OK);
    sl_rng rng;
    sl_rng_seed(&rng, 6);
    int64_t worst = 0, attempts_sum = 0;
    for (int run = 0; run < 1000; run++) {
        int64_t now = 1000 * SEC + run;
        sl_retry r;
        cr_assert_eq(sl_retry_start(&r, &b, now, sl_rng_next, &rng), SL_OK);
        int64_t d, start = now;
        int rc;
        while ((rc = sl_retry_next(&r, now, 0, &d)) == 1) {
            now += d;
            cr_assert(now <= start + 2 * SEC, "slept past the deadline");
        }
        cr_assert_eq(rc, 0);
        cr_assert(now + d > start + 2 * SEC, "gave up on a sleep that would have fit");
        cr_assert(r.attempt >= 4, "full jitter of at most 0.5 s: at least four fit in 2 s");
        worst = now - start > worst ? now - start : worst;
        attempts_sum += r.attempt;
    }
    printf("deadline 2 s: at most %.4f s slept, %.2f retries a request on average\n",
           worst / 1e9, attempts_sum / 1000.0);

    /* a Retry-After past the deadline gives up at once; one within is slept */
    sl_retry r;
    int64_t d;
    cr_assert_eq(sl_retry_start(&r, &b, 0, sl_rng_next, &rng), SL_OK);
    cr_assert_eq(sl_retry_next(&r, 0, 2500 * MS, &d), 0);
    cr_assert_eq(r.attempt, 0);
    cr_assert_eq(sl_retry_next(&r, 0, 1500 * MS, &d), 1);
    cr_assert_eq(d, 1500 * MS);
    cr_assert_eq(sl_retry_next(&r, 1500 * MS, 0, &d), 1);
    cr_assert(d <= 500 * MS);
    /* exactly at the deadline still fits */
    cr_assert_eq(sl_retry_next(&r, 1500 * MS, 500 * MS, &d), 1);
    cr_assert_eq(sl_retry_next(&r, 1500 * MS, 500 * MS + 1, &d), 0);
    /* a Retry-After of INT64_MAX does not overflow the deadline's sum */
    cr_assert_eq(sl_retry_next(&r, SL_TIME_MAX, INT64_MAX, &d), 0);

    /* no deadline: never gives up */
    sl_backoff forever;
    cr_assert_eq(sl_backoff_init(&forever, MS, MS, SL_BACKOFF_NO_DEADLINE, false), SL_OK);
    cr_assert_eq(sl_retry_start(&r, &forever, 0, sl_rng_next, &rng), SL_OK);
    cr_assert_eq(sl_retry_next(&r, SL_TIME_MAX, INT64_MAX, &d), 1);
    cr_assert_eq(d, INT64_MAX);
}

Test(client_backoff, decorrelated_schedule_feeds_each_sleep_to_the_next)
{
    sl_backoff b;
    cr_assert_eq(sl_backoff_init(&b, 10 * MS, 10 * SEC, SL_BACKOFF_NO_DEADLINE, true), SL_OK);
    sl_rng rng;
    sl_rng_seed(&rng, 7);
    sl_retry r;
    cr_assert_eq(sl_retry_start(&r, &b, 0, sl_rng_next, &rng), SL_OK);
    int64_t prev = 10 * MS, d;
    for (int i = 0; i < 200; i++) {
        int64_t ra = i == 10 ? 4 * SEC : 0; /* a server's wait raises the next ceiling */
        cr_assert_eq(sl_retry_next(&r, 0, ra, &d), 1);
        cr_assert(d >= 10 * MS && d >= ra);
        int64_t top = 3 * prev < 10 * SEC ? 3 * prev : 10 * SEC;
        cr_assert(d <= (ra > top ? ra : top));
        prev = d > 10 * MS ? d : 10 * MS;
    }
}

Test(client_backoff, same_seed_same_sleeps)
{
    sl_backoff b;
    cr_assert_eq(sl_backoff_init(&b, MS, SEC, SL_BACKOFF_NO_DEADLINE, false), SL_OK);
    sl_rng x, y, z;
    sl_rng_seed(&x, 9);
    sl_rng_seed(&y, 9);
    sl_rng_seed(&z, 10);
    int differ = 0;
    for (int i = 0; i < 20; i++) {
        int64_t a = sl_backoff_delay(&b, i, 0, 0, sl_rng_next, &x);
        cr_assert_eq(a, sl_backoff_delay(&b, i, 0, 0, sl_rng_next, &y));
        differ += a != sl_backoff_delay(&b, i, 0, 0, sl_rng_next, &z);
    }
    cr_assert(differ > 15, "another seed, other sleeps (%d of 20 differ)", differ);
}

/* A source that hands out chosen values, to see the draw's rejection. */
typedef struct {
    const uint64_t *v;
    int next;
} script;

static uint64_t scripted(void *st)
{
    script *s = st;
    return s->v[s->next++];
}

Test(client_backoff, draws_are_unbiased)
{
    /* ceiling 2 ns: the span has 3 values, 2^64 mod 3 = 1, so a raw 0 is
     * drawn again (it would favour 0) and 2^64 - 1 = 3k + 0 maps to 0 */
    sl_backoff b;
    cr_assert_eq(sl_backoff_init(&b, 2, 2, SL_BACKOFF_NO_DEADLINE, false), SL_OK);
    static const uint64_t v[] = {0, 5, UINT64_MAX, 1, 0, 0, 7};
    script s = {v, 0};
    cr_assert_eq(sl_backoff_delay(&b, 0, 0, 0, scripted, &s), 2); /* 0 rejected, 5 % 3 */
    cr_assert_eq(s.next, 2);
    cr_assert_eq(sl_backoff_delay(&b, 0, 0, 0, scripted, &s), 0); /* (2^64 - 1) % 3 */
    cr_assert_eq(sl_backoff_delay(&b, 0, 0, 0, scripted, &s), 1);
    cr_assert_eq(sl_backoff_delay(&b, 0, 0, 0, scripted, &s), 1); /* 0, 0 rejected; 7 % 3 */
    cr_assert_eq(s.next, 7);

    /* the smallest span, [0, 1]: each half of the draws */
    cr_assert_eq(sl_backoff_init(&b, 1, 1, SL_BACKOFF_NO_DEADLINE, false), SL_OK);
    sl_rng rng;
    sl_rng_seed(&rng, 11);
    int ones = 0;
    for (int i = 0; i < DRAWS; i++)
        ones += (int)sl_backoff_delay(&b, 0, 0, 0, sl_rng_next, &rng);
    cr_assert(ones > DRAWS * 0.48 && ones < DRAWS * 0.52, "%d ones", ones);
}

Test(client_backoff, the_default_source)
{
    sl_backoff b;
    cr_assert_eq(sl_backoff_init(&b, SEC, SEC, SL_BACKOFF_NO_DEADLINE, false), SL_OK);
    int64_t first = sl_backoff_delay(&b, 0, 0, 0, NULL, NULL);
    int same = 0;
    for (int i = 0; i < 100; i++) {
        int64_t d = sl_backoff_delay(&b, 0, 0, 0, NULL, NULL);
        cr_assert(d >= 0 && d <= SEC);
        same += d == first;
    }
    cr_assert(same < 100, "the default source draws");
    sl_retry r;
    int64_t d;
    cr_assert_eq(sl_retry_start(&r, &b, 0, NULL, NULL), SL_OK);
    cr_assert_eq(sl_retry_next(&r, 0, 0, &d), 1);
    cr_assert(d >= 0 && d <= SEC);
}

Test(client_backoff, bad_parameters)
{
    sl_backoff b;
    cr_assert_eq(sl_backoff_init(&b, 0, SEC, 0, false), SL_ERR_ARGUMENT);
    cr_assert_eq(b.base_ns, 0);
    cr_assert_eq(sl_backoff_init(&b, SEC, SEC - 1, 0, false), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_backoff_init(&b, SEC, SL_SPAN_MAX + 1, 0, false), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_backoff_init(&b, SEC, SEC, -2, false), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_backoff_init(NULL, SEC, SEC, 0, false), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_backoff_init(&b, SEC, SEC, 0, false), SL_OK);
    cr_assert_eq(sl_backoff_delay(&b, -1, 0, 0, NULL, NULL), SL_ERR_ARGUMENT);
    sl_backoff zero;
    memset(&zero, 0, sizeof zero);
    cr_assert_eq(sl_backoff_delay(&zero, 0, 0, 0, NULL, NULL), SL_ERR_ARGUMENT);
    sl_retry r;
    int64_t d;
    cr_assert_eq(sl_retry_start(&r, &b, -1, NULL, NULL), SL_ERR_TIME);
    cr_assert_eq(sl_retry_start(&r, &zero, 0, NULL, NULL), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_retry_start(&r, &b, 0, NULL, NULL), SL_OK);
    cr_assert_eq(sl_retry_next(&r, SL_TIME_MAX + 1, 0, &d), SL_ERR_TIME);
    cr_assert_eq(sl_retry_next(&r, 0, 0, NULL), SL_ERR_ARGUMENT);
}
