/*
 * The top keys summary (sl_topk_*, src/store/topk.c) against exact counts:
 * every key listed has count - error <= true <= count, every key not listed
 * at most floor, floor <= N / k, so every key above N / k is listed; on a
 * Zipf trace with a fixed seed, under a flood of random keys (no memory
 * taken past sl_topk_new), across window rotations on a virtual clock,
 * through merges (lossless and truncated), and for keys over the byte cap.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "testlib.h"

#define SEC INT64_C(1000000000)

/* ---- an exact model: counts per key id ---- */

/* Keys are "k<id>" (and, for long keys, that name padded): the id comes
 * back from a listed key. */
static size_t key_of(char *buf, size_t cap, long id)
{
    return (size_t)snprintf(buf, cap, "k%ld", id);
}

static long id_of(const sl_topk_entry *e)
{
    char s[SL_TOPK_KEY_MAX + 1];
    size_t n = e->len < SL_TOPK_KEY_MAX ? e->len : SL_TOPK_KEY_MAX;
    memcpy(s, e->key, n);
    s[n] = '\0';
    cr_assert_eq(s[0], 'k', "unexpected key '%s'", s);
    return strtol(s + 1, NULL, 10);
}

/* A Zipf sampler over ranks 1 .. m, the weight of rank r 1 / (r + q)
 * (Zipf's law, shifted by q to flatten its head): the CDF, searched. */
typedef struct zipf {
    double *cdf;
    long m;
} zipf;

static zipf zipf_new(long m, double q)
{
    zipf z = {malloc((size_t)m * sizeof(double)), m};
    double sum = 0;
    for (long r = 1; r <= m; r++)
        sum += 1.0 / ((double)r + q);
    double acc = 0;
    for (long r = 1; r <= m; r++) {
        acc += 1.0 / ((double)r + q) / sum;
        z.cdf[r - 1] = acc;
    }
    z.cdf[m - 1] = 1.0;
    return z;
}

static long zipf_draw(const zipf *z, test_rng *rng)
{
    double u = (double)(test_next(rng) >> 11) / 9007199254740992.0;
    long lo = 0, hi = z->m - 1;
    while (lo < hi) {
        long mid = (lo + hi) / 2;
        if (z->cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* A square root by Newton's method (the tests link no libm). */
static double sqrt_approx(double x)
{
    if (x <= 0)
        return 0;
    double r = x > 1 ? x : 1;
    for (int i = 0; i < 100; i++)
        r = 0.5 * (r + x / r);
    return r;
}

static sl_topk *topk(size_t k, int64_t window_ns, uint64_t seed)
{
    sl_topk_config cfg = {.k = k, .window_ns = window_ns, .seed = seed};
    sl_topk *t = NULL;
    cr_assert_eq(sl_topk_new(&cfg, &t), SL_OK);
    return t;
}

static void add_id(sl_topk *t, long id, uint64_t n, int64_t now)
{
    char k[32];
    cr_assert_eq(sl_topk_add(t, k, key_of(k, sizeof k, id), n, now), SL_OK);
}

/* What a check of a listing against exact counts found. */
typedef struct verdict {
    uint64_t n, floor, max_error, max_over;
    size_t listed, heavy, heavy_listed;
} verdict;

/*
 * Lists t at now and checks it against exact[0 .. nids): the bounds of
 * every listed key, "not listed => true <= floor", floor <= bound (N / k
 * for a summary of adds; pass UINT64_MAX to skip), and the totals.
 */
static verdict check_against(const sl_topk *t, int64_t now, const uint64_t *exact, long nids,
                             uint64_t bound)
{
    sl_topk_stats st;
    cr_assert_eq(sl_topk_stats_get(t, now, &st), SL_OK);
    size_t cap = st.keys + 1;
    sl_topk_entry *out = malloc(cap * sizeof *out);
    size_t n = 0;
    cr_assert_eq(sl_topk_list(t, now, out, cap, &n), SL_OK);
    cr_assert_eq(n, st.keys, "listed %zu, stats say %zu", n, st.keys);
    verdict v = {.floor = st.floor, .listed = n};
    uint64_t sum = 0;
    for (long i = 0; i < nids; i++)
        sum += exact[i];
    cr_assert_eq(st.total, sum, "N is %llu, the trace added %llu", (unsigned long long)st.total,
                 (unsigned long long)sum);
    v.n = sum;
    cr_assert_leq(st.floor, bound, "floor %llu above the bound %llu",
                  (unsigned long long)st.floor, (unsigned long long)bound);
    char *seen = calloc((size_t)nids, 1);
    for (size_t i = 0; i < n; i++) {
        long id = id_of(&out[i]);
        cr_assert(id >= 0 && id < nids);
        cr_assert_not(seen[id], "key %ld listed twice", id);
        seen[id] = 1;
        uint64_t tr = exact[id];
        cr_assert_leq(out[i].error, out[i].count);
        cr_assert_leq(out[i].count - out[i].error, tr, "k%ld: count %llu - error %llu > true %llu",
                      id, (unsigned long long)out[i].count, (unsigned long long)out[i].error,
                      (unsigned long long)tr);
        cr_assert_geq(out[i].count, tr, "k%ld: count %llu < true %llu", id,
                      (unsigned long long)out[i].count, (unsigned long long)tr);
        cr_assert_leq(out[i].error, st.floor);
        if (out[i].error > v.max_error)
            v.max_error = out[i].error;
        if (out[i].count - tr > v.max_over)
            v.max_over = out[i].count - tr;
        if (i > 0)
            cr_assert_geq(out[i - 1].count, out[i].count, "not sorted at %zu", i);
    }
    for (long id = 0; id < nids; id++) {
        if (!seen[id])
            cr_assert_leq(exact[id], st.floor, "k%ld (true %llu) is not listed, floor %llu", id,
                          (unsigned long long)exact[id], (unsigned long long)st.floor);
        if (bound != UINT64_MAX && exact[id] > bound) {
            v.heavy++;
            cr_assert(seen[id], "k%ld counts %llu > N/k = %llu and is not listed", id,
                      (unsigned long long)exact[id], (unsigned long long)bound);
            v.heavy_listed++;
        }
    }
    free(seen);
    free(out);
    return v;
}

/* ---- the bounds on a Zipf trace ---- */

Test(topk, zipf_trace_within_the_bounds)
{
    const long m = 10000;
    const size_t k = 200;
    const long n = 500000;
    zipf z = zipf_new(m, 0);
    test_rng rng = {20240601};
    uint64_t *exact = calloc((size_t)m, sizeof *exact);
    sl_topk *t = topk(k, 0, 42);
    for (long i = 0; i < n; i++) {
        long id = zipf_draw(&z, &rng);
        exact[id]++;
        add_id(t, id, 1, 0);
    }
    verdict v = check_against(t, 0, exact, m, (uint64_t)n / k);
    cr_assert_gt(v.heavy, 10, "the trace should have heavy keys");
    /* The true top ten, in order, are the summary's top ten. */
    sl_topk_entry top[10];
    size_t got;
    cr_assert_eq(sl_topk_list(t, 0, top, 10, &got), SL_OK);
    cr_assert_eq(got, 10);
    for (int i = 0; i < 10; i++)
        cr_assert_eq(id_of(&top[i]), i, "rank %d is k%ld, not k%d", i + 1, id_of(&top[i]), i);
    printf("topk zipf(s=1, %ld keys), N=%llu, k=%zu: N/k=%llu, floor %llu, %zu keys above N/k "
           "all listed, largest error %llu, largest overcount %llu; top key k0 true %llu "
           "counted %llu (error %llu)\n",
           m, (unsigned long long)v.n, k, (unsigned long long)(v.n / k),
           (unsigned long long)v.floor, v.heavy, (unsigned long long)v.max_error,
           (unsigned long long)v.max_over, (unsigned long long)exact[0],
           (unsigned long long)top[0].count, (unsigned long long)top[0].error);
    sl_topk_free(t);
    free(exact);
    free(z.cdf);
}

/* Fewer keys than counters: nothing is forgotten, every count is exact. */
Test(topk, exact_while_the_keys_fit)
{
    sl_topk *t = topk(16, 0, 7);
    uint64_t exact[16] = {0};
    test_rng rng = {5};
    for (int i = 0; i < 5000; i++) {
        long id = test_range(&rng, 0, 15);
        uint64_t w = (uint64_t)test_range(&rng, 1, 3);
        exact[id] += w;
        add_id(t, id, w, 0);
    }
    sl_topk_entry out[16];
    size_t n;
    cr_assert_eq(sl_topk_list(t, 0, out, 16, &n), SL_OK);
    cr_assert_eq(n, 16);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(out[i].error, 0);
        cr_assert_eq(out[i].count, exact[id_of(&out[i])]);
    }
    sl_topk_free(t);
}

/* Equal counts list by their key's bytes: the same trace lists the same. */
Test(topk, ties_by_key_bytes)
{
    sl_topk *t = topk(8, 0, 1);
    const char *keys[] = {"delta", "alpha", "charlie", "bravo"};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(sl_topk_add(t, keys[i], strlen(keys[i]), 2, 0), SL_OK);
    cr_assert_eq(sl_topk_add(t, "echo", 4, 3, 0), SL_OK);
    sl_topk_entry out[8];
    size_t n;
    cr_assert_eq(sl_topk_list(t, 0, out, 8, &n), SL_OK);
    cr_assert_eq(n, 5);
    const char *want[] = {"echo", "alpha", "bravo", "charlie", "delta"};
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(out[i].len, strlen(want[i]));
        cr_assert_eq(memcmp(out[i].key, want[i], out[i].len), 0, "position %d", i);
    }
    sl_topk_free(t);
}

/* ---- memory under a flood ---- */

/*
 * A million random keys of 1 to 200 random bytes, with five heavy keys
 * among them at 2% of the adds each (above N/k for k = 64): memory is what
 * sl_topk_new took (no add allocates: an allocation failure armed before
 * the flood is still pending after it), at most k keys are held, and the
 * heavy keys are listed within the bounds.
 */
Test(topk, flood_of_random_keys_stays_bounded)
{
    const size_t k = 64;
    sl_topk *t = topk(k, 0, 99);
    size_t bytes = sl_topk_bytes(k, 0);
    test_rng rng = {777};
    uint64_t heavy[5] = {0};
    const long n = 1000000;
    unsigned char key[200];
    sl_alloc_fail_nth(1);
    for (long i = 0; i < n; i++) {
        if (test_range(&rng, 0, 99) < 10) {
            long h = test_range(&rng, 0, 4);
            heavy[h]++;
            add_id(t, h, 1, 0);
            continue;
        }
        size_t len = (size_t)test_range(&rng, 1, 200);
        for (size_t j = 0; j < len; j++)
            key[j] = (unsigned char)test_next(&rng);
        key[0] = 'x'; /* never a "k<id>" */
        cr_assert_eq(sl_topk_add(t, key, len, 1, 0), SL_OK);
    }
    void *p = sl_malloc(1);
    cr_assert_null(p, "an add allocated memory (the armed failure was consumed)");
    sl_alloc_fail_nth(0);
    sl_topk_stats st;
    cr_assert_eq(sl_topk_stats_get(t, 0, &st), SL_OK);
    cr_assert_eq(st.bytes, bytes);
    cr_assert_eq(st.keys, k);
    cr_assert_eq(st.total, (uint64_t)n);
    cr_assert_leq(st.floor, (uint64_t)n / k);
    sl_topk_entry out[64];
    size_t got;
    cr_assert_eq(sl_topk_list(t, 0, out, 64, &got), SL_OK);
    size_t found = 0;
    for (size_t i = 0; i < got; i++) {
        if (out[i].key[0] != 'k')
            continue;
        long h = id_of(&out[i]);
        cr_assert(h >= 0 && h < 5);
        cr_assert_leq(out[i].count - out[i].error, heavy[h]);
        cr_assert_geq(out[i].count, heavy[h]);
        found++;
    }
    cr_assert_eq(found, 5, "every heavy key (true > N/k = %llu) is listed",
                 (unsigned long long)(n / (long)k));
    printf("topk flood: %ld adds of random keys, k=%zu: %zu bytes before and after, floor %llu "
           "(N/k %llu), the 5 heavy keys listed\n",
           n, k, bytes, (unsigned long long)st.floor, (unsigned long long)(n / (long)k));
    sl_topk_free(t);
}

/* ---- the window ---- */

static void expect(const sl_topk *t, int64_t now, const char *const *keys,
                   const uint64_t *counts, size_t n)
{
    sl_topk_entry out[16];
    size_t got;
    cr_assert_eq(sl_topk_list(t, now, out, 16, &got), SL_OK);
    cr_assert_eq(got, n, "at %lld s: %zu keys listed, expected %zu", (long long)(now / SEC), got,
                 n);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(out[i].len, strlen(keys[i]));
        cr_assert_eq(memcmp(out[i].key, keys[i], out[i].len), 0, "at %lld s, position %zu",
                     (long long)(now / SEC), i);
        cr_assert_eq(out[i].count, counts[i], "at %lld s, %s", (long long)(now / SEC), keys[i]);
    }
}

Test(topk, two_generations_on_a_virtual_clock)
{
    sl_topk *t = topk(8, 10 * SEC, 3);
    /* Window 0 is [0, 10 s), window 1 [10, 20 s), ... */
    cr_assert_eq(sl_topk_add(t, "a", 1, 5, 1 * SEC), SL_OK);
    expect(t, 9 * SEC, (const char *[]){"a"}, (uint64_t[]){5}, 1);
    cr_assert_eq(sl_topk_add(t, "b", 1, 3, 12 * SEC), SL_OK);
    cr_assert_eq(sl_topk_add(t, "a", 1, 1, 12 * SEC), SL_OK);
    /* At 12 s: windows 0 and 1 together. */
    expect(t, 12 * SEC, (const char *[]){"a", "b"}, (uint64_t[]){6, 3}, 2);
    /* At 25 s, nothing added in window 2: window 1 is the previous one. */
    expect(t, 25 * SEC, (const char *[]){"b", "a"}, (uint64_t[]){3, 1}, 2);
    sl_topk_stats st;
    cr_assert_eq(sl_topk_stats_get(t, 25 * SEC, &st), SL_OK);
    cr_assert_eq(st.total, 4);
    /* An add in window 2: window 0 is dropped. */
    cr_assert_eq(sl_topk_add(t, "c", 1, 7, 25 * SEC), SL_OK);
    expect(t, 25 * SEC, (const char *[]){"c", "b", "a"}, (uint64_t[]){7, 3, 1}, 3);
    /* A late add (its now in window 1) counts in the current window. */
    cr_assert_eq(sl_topk_add(t, "b", 1, 1, 19 * SEC), SL_OK);
    expect(t, 29 * SEC, (const char *[]){"c", "b", "a"}, (uint64_t[]){7, 4, 1}, 3);
    /* At 45 s (window 4) window 2 is two back: nothing. */
    expect(t, 45 * SEC, NULL, NULL, 0);
    cr_assert_eq(sl_topk_stats_get(t, 45 * SEC, &st), SL_OK);
    cr_assert_eq(st.total, 0);
    /* An add there starts afresh: window 3 (empty) is the previous one. */
    cr_assert_eq(sl_topk_add(t, "d", 1, 2, 45 * SEC), SL_OK);
    expect(t, 45 * SEC, (const char *[]){"d"}, (uint64_t[]){2}, 1);
    expect(t, 55 * SEC, (const char *[]){"d"}, (uint64_t[]){2}, 1);
    sl_topk_clear(t);
    expect(t, 55 * SEC, NULL, NULL, 0);
    sl_topk_free(t);
}

/*
 * A random trace in time: keys drawn from a Zipf law whose ranks shift
 * every window, random steps of the clock. At random moments the listing
 * is checked against the exact counts of the current and previous
 * windows, with N / k as the floor's bound.
 */
Test(topk, window_against_exact_counts)
{
    const long m = 2000, windows = 40;
    const size_t k = 50;
    const int64_t w = 5 * SEC;
    zipf z = zipf_new(m, 0);
    test_rng rng = {31337};
    uint64_t *per = calloc((size_t)(m * (windows + 2)), sizeof *per); /* [window][id] */
    uint64_t *exact = malloc((size_t)m * sizeof *exact);
    sl_topk *t = topk(k, w, 11);
    int64_t now = 0;
    int checks = 0;
    while (now < windows * w) {
        int64_t win = now / w;
        long id = (zipf_draw(&z, &rng) + win * 37) % m;
        per[win * m + id]++;
        add_id(t, id, 1, now);
        now += test_range(&rng, 0, 2 * NS_PER_MS);
        if (test_range(&rng, 0, 20000) == 0 || now >= windows * w) {
            int64_t at = now + (test_range(&rng, 0, 3) == 0 ? w : 0); /* sometimes a window on */
            int64_t cw = at / w;
            for (long i = 0; i < m; i++)
                exact[i] = (cw <= windows + 1 ? per[cw * m + i] : 0) +
                           (cw >= 1 && cw - 1 <= windows + 1 ? per[(cw - 1) * m + i] : 0);
            uint64_t sum = 0;
            for (long i = 0; i < m; i++)
                sum += exact[i];
            check_against(t, at, exact, m, sum / k);
            checks++;
        }
    }
    cr_assert_gt(checks, 5);
    printf("topk window: %d checks over %ld windows of 5 s, k=%zu\n", checks, windows, k);
    sl_topk_free(t);
    free(per);
    free(exact);
    free(z.cdf);
}

/*
 * Sampling, as sluiced does above --top-exact-rate: each event added with
 * probability 1/S and n = S. The weighted count W of a key is within its
 * summary's bounds exactly, and W estimates the true count t with variance
 * at most t (S - 1): every listed key is within 5 standard deviations of
 * its count's bounds, and no more than 1% of them past 3 (the 99.7% that
 * sluice.h states); max_n says S.
 */
Test(topk, sampled_adds_estimate_within_their_variance)
{
    const long m = 5000, n = 2000000;
    const size_t k = 100;
    const uint64_t S = 16;
    zipf z = zipf_new(m, 0);
    test_rng rng = {4242};
    uint64_t *exact = calloc((size_t)m, sizeof *exact);
    sl_topk *t = topk(k, 0, 9);
    for (long i = 0; i < n; i++) {
        long id = zipf_draw(&z, &rng);
        exact[id]++;
        if (test_next(&rng) % S == 0)
            add_id(t, id, S, 0);
    }
    sl_topk_stats st;
    cr_assert_eq(sl_topk_stats_get(t, 0, &st), SL_OK);
    cr_assert_eq(st.max_n, S);
    cr_assert_eq(st.total % S, 0);
    sl_topk_entry out[100];
    size_t got, past3 = 0;
    cr_assert_eq(sl_topk_list(t, 0, out, k, &got), SL_OK);
    for (size_t i = 0; i < got; i++) {
        uint64_t tr = exact[id_of(&out[i])];
        double sigma = sqrt_approx((double)tr * (double)(S - 1));
        double lo = (double)out[i].count - (double)out[i].error, hi = (double)out[i].count;
        double off = tr < lo ? lo - (double)tr : tr > hi ? (double)tr - hi : 0;
        cr_assert_leq(off, 5 * sigma, "k%ld: true %llu, count %llu error %llu, sigma %.0f",
                      id_of(&out[i]), (unsigned long long)tr, (unsigned long long)out[i].count,
                      (unsigned long long)out[i].error, sigma);
        past3 += off > 3 * sigma;
    }
    cr_assert_leq(past3, got / 100, "%zu of %zu keys past 3 standard deviations", past3, got);
    /* The heaviest keys are still the first. */
    for (int i = 0; i < 5; i++)
        cr_assert_eq(id_of(&out[i]), i, "rank %d is k%ld", i + 1, id_of(&out[i]));
    printf("topk sampled 1 in %llu: N=%ld, %zu keys listed, %zu past 3 sigma; top key true %llu "
           "counted %llu\n",
           (unsigned long long)S, n, got, past3, (unsigned long long)exact[0],
           (unsigned long long)out[0].count);
    sl_topk_free(t);
    free(exact);
    free(z.cdf);
}

/* ---- merging ---- */

/* Four "threads", each with its own summary of k counters and its own
 * trace (the same heavy keys, shifted tails), merged. */
static void merge_case(size_t into_k, bool windowed)
{
    const long m = 5000;
    const size_t k = 40;
    const int64_t w = 10 * SEC;
    zipf z = zipf_new(m, 2);
    uint64_t *exact = calloc((size_t)m, sizeof *exact);
    sl_topk *part[4];
    uint64_t floors = 0;
    int64_t now = windowed ? 13 * SEC : 0; /* window 1: windows 0 and 1 count */
    for (int p = 0; p < 4; p++) {
        test_rng rng = {1000 + (uint64_t)p};
        part[p] = topk(k, windowed ? w : 0, 5);
        for (long i = 0; i < 60000; i++) {
            long id = zipf_draw(&z, &rng);
            if (id > 30)
                id = (id + p * 1200) % m; /* a tail of its own */
            int64_t at = windowed ? (i < 30000 ? 5 * SEC : 12 * SEC) : 0;
            exact[id]++;
            add_id(part[p], id, 1, at);
        }
        sl_topk_stats st;
        cr_assert_eq(sl_topk_stats_get(part[p], now, &st), SL_OK);
        floors += st.floor;
    }
    sl_topk *acc = topk(into_k, 0, 5);
    for (int p = 0; p < 4; p++)
        cr_assert_eq(sl_topk_merge(acc, part[p], now), SL_OK);
    sl_topk_stats st;
    cr_assert_eq(sl_topk_stats_get(acc, now, &st), SL_OK);
    bool lossless = into_k >= 4 * k * (windowed ? 2 : 1);
    if (lossless)
        cr_assert_eq(st.floor, floors, "a lossless merge adds the floors");
    verdict v = check_against(acc, now, exact, m, lossless ? st.total / k : UINT64_MAX);
    printf("topk merge of 4 summaries of k=%zu%s into k=%zu: N=%llu, floor %llu (N/k %llu), "
           "%zu keys listed, largest error %llu, largest overcount %llu\n",
           k, windowed ? " (two generations each)" : "", into_k, (unsigned long long)v.n,
           (unsigned long long)v.floor, (unsigned long long)(v.n / k), v.listed,
           (unsigned long long)v.max_error, (unsigned long long)v.max_over);
    for (int p = 0; p < 4; p++)
        sl_topk_free(part[p]);
    sl_topk_free(acc);
    free(exact);
    free(z.cdf);
}

Test(topk, merge_lossless_keeps_the_bounds)
{
    merge_case(4 * 40, false);
}

Test(topk, merge_of_windowed_summaries)
{
    merge_case(4 * 40 * 2, true);
}

Test(topk, merge_truncated_keeps_the_inequalities)
{
    merge_case(40, false);
}

Test(topk, merge_refuses_what_it_cannot_do)
{
    sl_topk *a = topk(4, 0, 1), *b = topk(4, 0, 2), *w = topk(4, SEC, 1);
    cr_assert_eq(sl_topk_merge(a, b, 0), SL_ERR_ARGUMENT); /* another seed */
    cr_assert_eq(sl_topk_merge(w, a, 0), SL_ERR_ARGUMENT); /* into has a window */
    cr_assert_eq(sl_topk_merge(a, a, 0), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_topk_merge(a, w, 0), SL_OK);
    cr_assert_eq(sl_topk_merge(NULL, a, 0), SL_ERR_ARGUMENT);
    sl_topk_free(a);
    sl_topk_free(b);
    sl_topk_free(w);
}

/* ---- keys over the byte cap ---- */

Test(topk, long_keys_stay_apart)
{
    sl_topk *t = topk(8, 0, 17);
    unsigned char a[300], b[300];
    memset(a, 'L', sizeof a);
    memcpy(b, a, sizeof b);
    b[200] = 'M'; /* the same first 64 bytes, the same length */
    cr_assert_eq(sl_topk_add(t, a, sizeof a, 5, 0), SL_OK);
    cr_assert_eq(sl_topk_add(t, b, sizeof b, 3, 0), SL_OK);
    cr_assert_eq(sl_topk_add(t, a, 100, 2, 0), SL_OK); /* a shorter one */
    cr_assert_eq(sl_topk_add(t, a, sizeof a, 1, 0), SL_OK);
    sl_topk_entry out[8];
    size_t n;
    cr_assert_eq(sl_topk_list(t, 0, out, 8, &n), SL_OK);
    cr_assert_eq(n, 3);
    cr_assert_eq(out[0].count, 6);
    cr_assert_eq(out[0].len, 300);
    cr_assert_eq(out[1].count, 3);
    cr_assert_eq(out[1].len, 300);
    cr_assert_eq(out[2].count, 2);
    cr_assert_eq(out[2].len, 100);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(memcmp(out[i].key, a, SL_TOPK_KEY_MAX), 0);
    /* Merged elsewhere, a long key is still itself: adding it there again
     * finds its counter. */
    sl_topk *acc = topk(16, 0, 17);
    cr_assert_eq(sl_topk_merge(acc, t, 0), SL_OK);
    cr_assert_eq(sl_topk_add(acc, b, sizeof b, 10, 0), SL_OK);
    cr_assert_eq(sl_topk_list(acc, 0, out, 8, &n), SL_OK);
    cr_assert_eq(n, 3);
    cr_assert_eq(out[0].count, 13);
    cr_assert_eq(out[0].len, 300);
    sl_topk_free(acc);
    sl_topk_free(t);
}

/* ---- limits and errors ---- */

Test(topk, arguments_and_saturation)
{
    sl_topk *t = NULL;
    sl_topk_config bad = {.k = 0};
    cr_assert_eq(sl_topk_new(&bad, &t), SL_ERR_ARGUMENT);
    bad.k = SL_TOPK_K_MAX + 1;
    cr_assert_eq(sl_topk_new(&bad, &t), SL_ERR_ARGUMENT);
    bad = (sl_topk_config){.k = 4, .window_ns = -1};
    cr_assert_eq(sl_topk_new(&bad, &t), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_topk_bytes(0, 0), 0);
    cr_assert_gt(sl_topk_bytes(4, SEC), sl_topk_bytes(4, 0));
    t = topk(4, 0, 1);
    cr_assert_eq(sl_topk_add(t, "", 0, 1, 0), SL_ERR_KEY);
    cr_assert_eq(sl_topk_add(t, NULL, 3, 1, 0), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_topk_add(t, "x", 1, 0, 0), SL_OK); /* nothing */
    cr_assert_eq(sl_topk_add(t, "x", 1, UINT64_MAX - 1, 0), SL_OK);
    cr_assert_eq(sl_topk_add(t, "x", 1, 5, 0), SL_OK);
    sl_topk_entry e;
    size_t n;
    cr_assert_eq(sl_topk_list(t, 0, &e, 1, &n), SL_OK);
    cr_assert_eq(n, 1);
    cr_assert_eq(e.count, UINT64_MAX);
    sl_topk_stats st;
    cr_assert_eq(sl_topk_stats_get(t, 0, &st), SL_OK);
    cr_assert_eq(st.total, UINT64_MAX);
    cr_assert_eq(sl_topk_list(t, 0, NULL, 0, &n), SL_OK);
    cr_assert_eq(n, 0);
    sl_topk_free(t);
    sl_topk_free(NULL);
}

/* Every allocation the summary makes fails in turn: an error, no crash,
 * no leak. */
Test(topk, out_of_memory_is_an_answer)
{
    sl_topk_config cfg = {.k = 8, .window_ns = SEC, .seed = 1};
    sl_topk *t = NULL;
    sl_alloc_fail_nth(1);
    cr_assert_eq(sl_topk_new(&cfg, &t), SL_ERR_NOMEM);
    sl_alloc_fail_nth(0);
    t = topk(8, SEC, 1);
    for (long i = 0; i < 20; i++)
        add_id(t, i, (uint64_t)i + 1, 0);
    for (long i = 0; i < 20; i++)
        add_id(t, i, 1, SEC); /* both generations hold keys: a listing merges them */
    sl_topk_entry out[32];
    size_t n;
    int failures = 0;
    for (long nth = 1; nth <= 5; nth++) {
        sl_alloc_fail_nth(nth);
        sl_status rc = sl_topk_list(t, SEC, out, 32, &n);
        sl_alloc_fail_nth(0);
        if (rc == SL_ERR_NOMEM)
            failures++;
        else
            cr_assert_eq(rc, SL_OK);
    }
    cr_assert_geq(failures, 2, "the listing's two allocations fail in turn");
    /* A truncated merge spills: its spill's allocation fails. */
    sl_topk *small = topk(2, 0, 1);
    sl_alloc_fail_nth(1);
    cr_assert_eq(sl_topk_merge(small, t, SEC), SL_ERR_NOMEM);
    sl_alloc_fail_nth(0);
    sl_topk_free(small);
    sl_topk_free(t);
    test_assert_no_leak();
}
