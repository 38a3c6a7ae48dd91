/*
 * GCRA and the token bucket: redis-cell's reference sequence, the two
 * algorithms agreeing on every decision, the token bucket against a slow
 * exact model, and the token bucket's guarantee b + r*T.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "testlib.h"

/* redis-cell's own test sequence (tests/testdata/gcra_cases.tsv). */
Test(gcra, redis_cell_reference_cases)
{
    sl_limit l;
    cr_assert_eq(sl_limit_init_cell(&l, 4, 1, 1), SL_OK);
    FILE *f = fopen(SLUICE_TESTDATA "/gcra_cases.tsv", "r");
    cr_assert_not_null(f);
    int64_t state[2] = {0, 0};
    const int64_t start = 1000 * NS_PER_SEC; /* any origin */
    char line[256];
    int rows = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#')
            continue;
        long long step, at_ms, qty, limited, remaining, reset_ms, retry_ms;
        cr_assert_eq(sscanf(line, "%lld %lld %lld %lld %lld %lld %lld", &step, &at_ms, &qty,
                            &limited, &remaining, &reset_ms, &retry_ms),
                     7);
        sl_decision d;
        cr_assert_eq(sl_take(&l, state, start + at_ms * NS_PER_MS, qty, &d), SL_OK);
        cr_expect_eq(!d.allowed, limited, "step %lld: limited", step);
        cr_expect_eq(d.limit, 5, "step %lld: limit", step);
        cr_expect_eq(d.remaining, remaining, "step %lld: remaining %lld, want %lld", step,
                     (long long)d.remaining, remaining);
        cr_expect_eq(d.reset_after_ns, reset_ms * NS_PER_MS, "step %lld: reset_after", step);
        int64_t retry = (d.allowed || d.retry_after_ns == SL_NEVER) ? -1 : d.retry_after_ns;
        cr_expect_eq(retry, retry_ms < 0 ? -1 : retry_ms * NS_PER_MS, "step %lld: retry_after",
                     step);
        rows++;
    }
    fclose(f);
    cr_assert_eq(rows, 15);
}

/* redis-cell's README: CL.THROTTLE user123 15 30 60 1 -> 0 16 15 -1 2 */
Test(gcra, redis_cell_readme_example)
{
    sl_limit l;
    cr_assert_eq(sl_limit_init_cell(&l, 15, 30, 60), SL_OK);
    int64_t state[2] = {0, 0}, out[5];
    sl_decision d;
    cr_assert_eq(sl_take(&l, state, 5 * NS_PER_SEC, 1, &d), SL_OK);
    sl_cell_reply(&d, out);
    int64_t want[5] = {0, 16, 15, -1, 2};
    cr_assert_arr_eq(out, want, sizeof want);

    /* Drain it: 15 more pass, the 17th is limited and told to retry in 2 s. */
    for (int i = 0; i < 15; i++)
        sl_take(&l, state, 5 * NS_PER_SEC, 1, &d);
    cr_assert(d.allowed);
    sl_take(&l, state, 5 * NS_PER_SEC, 1, &d);
    sl_cell_reply(&d, out);
    int64_t limited[5] = {1, 16, 0, 2, 32};
    cr_assert_arr_eq(out, limited, sizeof limited);
}

Test(gcra, cell_reply_rounds_up_on_milliseconds_only)
{
    sl_decision d = {.allowed = false, .limit = 5, .remaining = 0};
    int64_t out[5];
    d.retry_after_ns = 1 * NS_PER_SEC + 1; /* a nanosecond over: not rounded */
    d.reset_after_ns = 2 * NS_PER_SEC + NS_PER_MS;
    sl_cell_reply(&d, out);
    cr_assert_eq(out[3], 1);
    cr_assert_eq(out[4], 3);
    d.retry_after_ns = SL_NEVER;
    sl_cell_reply(&d, out);
    cr_assert_eq(out[3], -1);
}

Test(gcra, cell_rejects_bad_arguments)
{
    sl_limit l;
    cr_assert_eq(sl_limit_init_cell(&l, -1, 1, 1), SL_ERR_BURST);
    cr_assert_eq(sl_limit_init_cell(&l, 1, 0, 1), SL_ERR_LIMIT);
    cr_assert_eq(sl_limit_init_cell(&l, 1, -3, 1), SL_ERR_LIMIT);
    cr_assert_eq(sl_limit_init_cell(&l, 1, 1, 0), SL_ERR_PERIOD);
    cr_assert_eq(sl_limit_init_cell(&l, 1, 1, INT64_MAX), SL_ERR_PERIOD);
    cr_assert_eq(sl_limit_init_cell(&l, 1, 2000000, 1), SL_ERR_RATE);
    cr_assert_eq(sl_limit_init_cell(&l, INT64_MAX - 1, 1, 1), SL_ERR_BURST);
    cr_assert_eq(sl_limit_init_cell(&l, 1000000000, 1, 1000000), SL_ERR_OVERFLOW);
}

/* Random limits, including rates that are no whole number of ns apart. */
static void random_limit(test_rng *r, sl_algorithm a, sl_limit *l)
{
    static const int64_t periods[] = {1, 7, 1000, NS_PER_MS, NS_PER_SEC, 60 * NS_PER_SEC,
                                      3 * NS_PER_SEC + 1};
    for (;;) {
        int64_t limit = test_range(r, 1, 50);
        if (test_range(r, 0, 4) == 0)
            limit = test_range(r, 1, 1000000);
        int64_t period = periods[test_range(r, 0, 6)];
        int64_t burst = test_range(r, 0, 3) == 0 ? 0 : test_range(r, 1, 60);
        if (sl_limit_init(l, a, limit, period, burst) == SL_OK)
            return;
    }
}

/* A step of time scaled to the limit's emission interval. */
static int64_t random_step(test_rng *r, const sl_limit *l)
{
    int64_t t = l->interval_ns + 1;
    switch (test_range(r, 0, 5)) {
    case 0: return 0;
    case 1: return test_range(r, 0, 3);
    case 2: return test_range(r, 0, t);
    case 3: return test_range(r, 0, 3 * t);
    case 4: return test_range(r, 0, l->tolerance_ns + t);
    default: return test_range(r, 0, t / 3 + 1);
    }
}

/* A take of one under a CL.THROTTLE limit goes the whole-nanosecond path,
 * any other cost the general one: both give redis-cell's remaining and the
 * same reset. Checked by peeking (cost 0, the general path) right after
 * each take, when the state is the one the take saw or left. */
Test(gcra, cell_takes_of_one_agree_with_the_general_path)
{
    test_rng r = {7};
    for (int trial = 0; trial < 300; trial++) {
        sl_limit l;
        int64_t burst = test_range(&r, 0, 60), count = test_range(&r, 1, 1000);
        int64_t period = test_range(&r, 1, 3600);
        if (sl_limit_init_cell(&l, burst, count, period) != SL_OK)
            continue;
        int64_t st[2] = {0, 0};
        int64_t now = test_range(&r, 0, NS_PER_SEC);
        for (int i = 0; i < 200; i++) {
            now += random_step(&r, &l);
            sl_decision take, peek;
            cr_assert_eq(sl_take(&l, st, now, 1, &take), SL_OK);
            cr_assert_eq(sl_peek(&l, st, now, 0, &peek), SL_OK);
            cr_assert_eq(take.remaining, peek.remaining, "trial %d step %d", trial, i);
            cr_assert_eq(take.reset_after_ns, peek.reset_after_ns, "trial %d step %d", trial, i);
            cr_assert_geq(take.remaining, 0);
            cr_assert_leq(take.remaining, l.burst);
        }
    }
    /* Where redis-cell's remaining (in whole microseconds) differs from
     * the exact one: 7 per second, T = 142 857 142 ns; after two takes,
     * a third T - 1 ns later leaves a debt of 2T + 1, and redis-cell says
     * (7T - 2T - 1) / 1000 / 142 857 = 5 where the exact count is 4. */
    sl_limit l;
    cr_assert_eq(sl_limit_init_cell(&l, 6, 7, 1), SL_OK);
    int64_t st[2] = {0, 0}, t0 = NS_PER_SEC, T = NS_PER_SEC / 7;
    sl_decision d;
    sl_take(&l, st, t0, 1, &d);
    sl_take(&l, st, t0, 1, &d);
    cr_assert_eq(sl_take(&l, st, t0 + T - 1, 1, &d), SL_OK);
    cr_assert(d.allowed);
    cr_assert_eq(d.remaining, 5);
}

Test(gcra, agrees_with_token_bucket_on_every_decision)
{
    test_rng r = {42};
    for (int trial = 0; trial < 400; trial++) {
        sl_limit g, tb;
        random_limit(&r, SL_GCRA, &g);
        cr_assert_eq(sl_limit_init(&tb, SL_TOKEN_BUCKET, g.limit, g.period_ns, g.burst), SL_OK);
        int64_t gs[2] = {0, 0}, ts[2] = {0, 0};
        int64_t now = test_range(&r, 0, NS_PER_SEC);
        for (int i = 0; i < 400; i++) {
            now += random_step(&r, &g);
            int64_t cost = test_range(&r, 0, 5) == 0 ? test_range(&r, 0, g.burst + 2) : 1;
            sl_decision dg, dt;
            cr_assert_eq(sl_take(&g, gs, now, cost, &dg), SL_OK);
            cr_assert_eq(sl_take(&tb, ts, now, cost, &dt), SL_OK);
            cr_assert_eq(dg.allowed, dt.allowed, "trial %d step %d (limit %lld/%lld burst %lld)",
                         trial, i, (long long)g.limit, (long long)g.period_ns,
                         (long long)g.burst);
            cr_assert_eq(dg.remaining, dt.remaining, "trial %d step %d remaining", trial, i);
            cr_assert_eq(dg.reset_after_ns, dt.reset_after_ns, "trial %d step %d reset", trial, i);
            cr_assert_eq(dg.retry_after_ns, dt.retry_after_ns, "trial %d step %d retry", trial, i);
            cr_assert_eq(dg.limit, dt.limit);
            cr_assert_eq(sl_state_expires_at(&g, gs), sl_state_expires_at(&tb, ts));
        }
    }
}

/*
 * The slow model: a token bucket with exactly fractional tokens, kept as
 * level = tokens * reduced_period in 128 bits, refilled den per ns.
 */
typedef struct model_bucket {
    __int128 level;
    int64_t last;
} model_bucket;

static bool model_take(const sl_limit *l, model_bucket *m, int64_t now, int64_t cost)
{
    __int128 cap = (__int128)l->burst * l->reduced_period;
    if (now > m->last) {
        m->level += (__int128)(now - m->last) * l->den;
        if (m->level > cap)
            m->level = cap;
        m->last = now;
    }
    __int128 need = (__int128)cost * l->reduced_period;
    if (m->level >= need && cost <= l->burst) {
        m->level -= need;
        return true;
    }
    return false;
}

Test(token_bucket, matches_the_exact_model)
{
    test_rng r = {7};
    for (int trial = 0; trial < 300; trial++) {
        sl_limit l;
        random_limit(&r, SL_TOKEN_BUCKET, &l);
        model_bucket m = {(__int128)l.burst * l.reduced_period, 0};
        int64_t st[2] = {0, 0};
        int64_t now = 0;
        for (int i = 0; i < 500; i++) {
            now += random_step(&r, &l);
            int64_t cost = test_range(&r, 1, 3);
            sl_decision d;
            sl_take(&l, st, now, cost, &d);
            cr_assert_eq(d.allowed, model_take(&l, &m, now, cost), "trial %d step %d", trial, i);
            cr_assert_eq(d.remaining, (int64_t)(m.level / l.reduced_period));
        }
    }
}

/* Over any interval [t_i, t_j], at most burst + limit * (t_j - t_i) / period. */
Test(token_bucket, never_admits_more_than_burst_plus_rate_times_interval)
{
    test_rng r = {99};
    enum { N = 1500 };
    static int64_t at[N], cost[N];
    for (int trial = 0; trial < 40; trial++) {
        sl_limit l;
        random_limit(&r, trial % 2 ? SL_TOKEN_BUCKET : SL_GCRA, &l);
        int64_t st[2] = {0, 0}, now = 0;
        int n = 0;
        for (int i = 0; i < N; i++) {
            now += random_step(&r, &l) / 2;
            int64_t c = test_range(&r, 1, 2);
            sl_decision d;
            sl_take(&l, st, now, c, &d);
            if (d.allowed) {
                at[n] = now;
                cost[n++] = c;
            }
        }
        cr_assert_gt(n, 0);
        for (int i = 0; i < n; i++) {
            __int128 sum = 0;
            for (int j = i; j < n; j++) {
                sum += cost[j];
                __int128 bound = (__int128)l.burst * l.period_ns + (__int128)l.limit * (at[j] - at[i]);
                cr_assert(sum * l.period_ns <= bound, "trial %d: %lld admitted in [%lld, %lld]",
                          trial, (long long)sum, (long long)at[i], (long long)at[j]);
            }
        }
    }
}

Test(token_bucket, idle_client_gets_its_full_burst_back)
{
    for (int a = 0; a < 2; a++) {
        sl_limit l;
        sl_algorithm alg = a ? SL_TOKEN_BUCKET : SL_GCRA;
        cr_assert_eq(sl_limit_init(&l, alg, 7, NS_PER_SEC, 20), SL_OK); /* T = 1/7 s */
        int64_t st[2] = {0, 0}, now = 5 * NS_PER_SEC;
        sl_decision d;
        int admitted = 0;
        while (sl_take(&l, st, now, 1, &d) == SL_OK && d.allowed)
            admitted++;
        cr_assert_eq(admitted, 20);
        int64_t reset = d.reset_after_ns;
        cr_assert_eq(reset, (20 * NS_PER_SEC + 6) / 7); /* 20 T, rounded up */
        cr_assert_eq(sl_state_expires_at(&l, st), now + reset);

        /* One nanosecond early, the bucket is one token short. */
        sl_peek(&l, st, now + reset - 1, 0, &d);
        cr_assert_eq(d.remaining, 19);
        now += reset;
        admitted = 0;
        while (sl_take(&l, st, now, 1, &d) == SL_OK && d.allowed)
            admitted++;
        cr_assert_eq(admitted, 20, "%s", sl_algorithm_name(alg));
    }
}

Test(token_bucket, retry_after_is_exact)
{
    sl_limit l;
    cr_assert_eq(sl_limit_init(&l, SL_TOKEN_BUCKET, 3, NS_PER_SEC, 3), SL_OK);
    int64_t st[2] = {0, 0};
    sl_decision d;
    for (int i = 0; i < 3; i++)
        sl_take(&l, st, 0, 1, &d);
    sl_take(&l, st, 0, 2, &d);
    cr_assert(!d.allowed);
    cr_assert_eq(d.retry_after_ns, 666666667); /* 2 tokens at 1/3 s each, rounded up */
    sl_take(&l, st, 666666666, 2, &d);
    cr_assert(!d.allowed);
    sl_take(&l, st, 666666667, 2, &d);
    cr_assert(d.allowed);
}
