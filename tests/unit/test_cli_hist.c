/*
 * test_cli_hist.c: the bench's log-linear histogram (src/cli/hist.c),
 * against a sorted array of the same values: every percentile it reports is
 * at or above the exact one and within the bucket's relative width.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "../../src/cli/hist.c"

static uint64_t rng_state = 12345;
static uint64_t next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

Test(cli_hist, buckets_are_contiguous_and_cover_everything)
{
    /* Every value lands in a bucket whose upper end is >= it, and the
     * previous bucket's upper end is below it. */
    uint64_t probes[] = {0, 1, 127, 128, 129, 255, 256, 1000, 123456789, UINT64_MAX / 3,
                         UINT64_MAX - 1, UINT64_MAX};
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        uint64_t v = probes[i];
        unsigned b = hist_index(v);
        cr_assert_lt(b, HIST_BUCKETS);
        cr_assert_geq(hist_upper(b), v);
        if (b > 0)
            cr_assert_lt(hist_upper(b - 1), v, "v=%llu", (unsigned long long)v);
    }
    for (unsigned b = 1; b < HIST_BUCKETS; b++)
        cr_assert_gt(hist_upper(b), hist_upper(b - 1));
    cr_assert_eq(hist_upper(HIST_BUCKETS - 1), UINT64_MAX);
    for (uint64_t v = 0; v < 5000; v++)
        cr_assert_eq(hist_index(v) <= hist_index(v + 1), 1);
}

Test(cli_hist, percentiles_match_a_sorted_array)
{
    enum { N = 100000 };
    static uint64_t v[N];
    cli_hist h, a, b;
    hist_init(&h);
    hist_init(&a);
    hist_init(&b);
    for (int i = 0; i < N; i++) {
        /* Log-uniform from 1 ns to about 1 s: latencies span decades. */
        v[i] = (next() % 1000000) * (1 + next() % 1000) + 1;
        hist_record(&h, v[i]);
        hist_record(i % 2 ? &a : &b, v[i]);
    }
    hist_merge(&a, &b);
    qsort(v, N, sizeof v[0], cmp_u64);
    unsigned ps[] = {1, 5000, 9000, 9900, 9990, 10000};
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        uint64_t rank = ((uint64_t)N * ps[k] + 9999) / 10000;
        uint64_t exact = v[rank - 1];
        uint64_t got = hist_percentile(&h, ps[k]);
        cr_assert_geq(got, exact);
        cr_assert_leq(got - exact, exact / 64 + 1, "p%u: %llu vs %llu", ps[k],
                      (unsigned long long)got, (unsigned long long)exact);
        cr_assert_eq(hist_percentile(&a, ps[k]), got);
    }
    cr_assert_eq(hist_percentile(&h, 10000), v[N - 1]);
    cr_assert_eq(h.min, v[0]);
    cr_assert_eq(h.total, (uint64_t)N);
}

Test(cli_hist, empty_and_single)
{
    cli_hist h;
    hist_init(&h);
    cr_assert_eq(hist_percentile(&h, 5000), 0);
    hist_record(&h, 777);
    cr_assert_eq(hist_percentile(&h, 1), 777);
    cr_assert_eq(hist_percentile(&h, 9999), 777);
}
