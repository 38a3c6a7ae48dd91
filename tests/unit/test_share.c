/*
 * sl_limit_share: n nodes each enforcing the share of a limit admit no more
 * than one node enforcing the whole, and (for rates) as much over time.
 * Each case floods n shares and one whole limit on a virtual clock with the
 * same offered load and compares what they admitted.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "algo/share.h"
#include "testlib.h"

#define MIN (60 * NS_PER_SEC)

typedef struct scase {
    const char *name;
    sl_algorithm algorithm;
    int64_t limit, period, burst;
    bool cell; /* CL.THROTTLE: burst is max_burst, period whole seconds */
} scase;

static const scase CASES[] = {
    {"gcra 100/min burst 30", SL_GCRA, 100, MIN, 30, false},
    {"gcra 99/s", SL_GCRA, 99, NS_PER_SEC, 0, false},
    {"gcra 7/s burst 2", SL_GCRA, 7, NS_PER_SEC, 2, false},
    {"token 50/s burst 10", SL_TOKEN_BUCKET, 50, NS_PER_SEC, 10, false},
    {"leaky 20/s burst 5", SL_LEAKY_BUCKET, 20, NS_PER_SEC, 5, false},
    {"fixed 100/s", SL_FIXED_WINDOW, 100, NS_PER_SEC, 0, false},
    {"fixed 10/s", SL_FIXED_WINDOW, 10, NS_PER_SEC, 0, false},
    {"sliding window 60/s", SL_SLIDING_WINDOW, 60, NS_PER_SEC, 0, false},
    {"sliding log 30/s", SL_SLIDING_LOG, 30, NS_PER_SEC, 0, false},
    {"cell 15 30 60", SL_GCRA, 30, 60, 15, true},
    {"cell 29 90 1", SL_GCRA, 90, 1, 29, true},
};

static void whole_of(const scase *c, sl_limit *l)
{
    int rc = c->cell ? sl_limit_init_cell(l, c->burst, c->limit, c->period)
                     : sl_limit_init(l, c->algorithm, c->limit, c->period, c->burst);
    cr_assert_eq(rc, SL_OK, "%s", c->name);
}

static bool is_rate(const scase *c)
{
    return c->cell || c->algorithm == SL_GCRA || c->algorithm == SL_TOKEN_BUCKET ||
           c->algorithm == SL_LEAKY_BUCKET;
}

/* Offers `step`-spaced takes of 1 to each of `nodes` states of *l for
 * `horizon`; returns the total admitted. (A leaky bucket's admission with a
 * delay counts as admitted: it is a place in the queue.) */
static int64_t flood(const sl_limit *l, int64_t nodes, int64_t step, int64_t horizon)
{
    void *states[8];
    cr_assert_leq(nodes, 8);
    for (int64_t i = 0; i < nodes; i++)
        states[i] = test_state(l);
    int64_t admitted = 0;
    for (int64_t t = NS_PER_SEC; t < NS_PER_SEC + horizon; t += step) {
        for (int64_t i = 0; i < nodes; i++) {
            sl_decision d;
            cr_assert_eq(sl_take(l, states[i], t, 1, &d), SL_OK);
            admitted += d.allowed;
        }
    }
    for (int64_t i = 0; i < nodes; i++)
        free(states[i]);
    return admitted;
}

Test(share, n_shares_admit_what_the_whole_admits)
{
    for (size_t k = 0; k < sizeof CASES / sizeof *CASES; k++) {
        const scase *c = &CASES[k];
        sl_limit whole;
        whole_of(c, &whole);
        int64_t period = c->cell ? c->period * NS_PER_SEC : c->period;
        int64_t horizon = 20 * period;
        /* Every node alone offers 64 times the whole rate, in arrivals fine enough
         * that a share's burst of 1 loses little to where they fall. */
        int64_t step = period / (64 * c->limit);
        for (int64_t n = 2; n <= 5; n++) {
            sl_limit share;
            cr_assert_eq(sl_limit_share(&whole, n, &share), SL_OK, "%s over %lld", c->name,
                         (long long)n);
            int64_t one = flood(&whole, 1, step, horizon);
            int64_t fleet = flood(&share, n, step, horizon);
            int64_t burst = c->cell ? c->burst + 1 : whole.burst;
            if (is_rate(c)) {
                /* The rate is exact; the bursts are rounded down, at least 1, and a
                 * take or two per node rides on where the horizon cuts a period. */
                int64_t burst_shares = n * (burst / n > 0 ? burst / n : 1);
                cr_assert_leq(fleet, one + (burst_shares > burst ? burst_shares - burst : 0) + n,
                              "%s over %lld: %lld admitted, one limiter %lld", c->name,
                              (long long)n, (long long)fleet, (long long)one);
                cr_assert_geq(fleet, one - (burst - burst_shares) - 2 * n - one / 64,
                              "%s over %lld: %lld admitted, one limiter %lld", c->name,
                              (long long)n, (long long)fleet, (long long)one);
            } else {
                /* Each window's limit is rounded down (at least 1 a node). */
                int64_t per_node = c->limit / n > 0 ? c->limit / n : 1;
                cr_assert_leq(fleet, one * per_node * n / c->limit + n,
                              "%s over %lld: %lld admitted, one limiter %lld", c->name,
                              (long long)n, (long long)fleet, (long long)one);
                if (per_node * n <= c->limit)
                    cr_assert_leq(fleet, one + n, "%s over %lld", c->name, (long long)n);
            }
        }
    }
}

Test(share, a_rate_is_divided_exactly)
{
    sl_limit whole, share;
    cr_assert_eq(sl_limit_init(&whole, SL_GCRA, 100, MIN, 30), SL_OK);
    /* 100 does not divide by 3: 100 per 3 minutes, a burst of 10. */
    cr_assert_eq(sl_limit_share(&whole, 3, &share), SL_OK);
    cr_assert_eq(share.limit, 100);
    cr_assert_eq(share.period_ns, 3 * MIN);
    cr_assert_eq(share.burst, 10);
    /* It does by 4: 25 a minute. */
    cr_assert_eq(sl_limit_share(&whole, 4, &share), SL_OK);
    cr_assert_eq(share.limit, 25);
    cr_assert_eq(share.period_ns, MIN);
    cr_assert_eq(share.burst, 7);
    /* A burst below the nodes: one each. */
    cr_assert_eq(sl_limit_share(&whole, 50, &share), SL_OK);
    cr_assert_eq(share.limit, 2);
    cr_assert_eq(share.burst, 1);
    /* A period that cannot be multiplied: the limit rounded down instead. */
    cr_assert_eq(sl_limit_init(&whole, SL_TOKEN_BUCKET, 7, SL_SPAN_MAX / 2, 0), SL_OK);
    cr_assert_eq(sl_limit_share(&whole, 3, &share), SL_OK);
    cr_assert_eq(share.limit, 2);
    cr_assert_eq(share.period_ns, SL_SPAN_MAX / 2);
}

Test(share, cell_limits_stay_cell_limits)
{
    sl_limit whole, share;
    cr_assert_eq(sl_limit_init_cell(&whole, 15, 30, 60), SL_OK);
    cr_assert_eq(sl_limit_share(&whole, 3, &share), SL_OK);
    cr_assert(share.flags & SL_LIMIT_CELL);
    cr_assert_eq(share.limit, 10);
    cr_assert_eq(share.period_ns, 60 * NS_PER_SEC);
    cr_assert_eq(share.burst, 5); /* 16 / 3: CL.THROTTLE max_burst 4 */
    cr_assert_eq(sl_limit_share(&whole, 7, &share), SL_OK);
    cr_assert_eq(share.limit, 30);
    cr_assert_eq(share.period_ns, 420 * NS_PER_SEC);
    cr_assert_eq(share.burst, 2);
}

Test(share, windows_keep_their_window_carry_and_calendar)
{
    sl_limit whole, share;
    cr_assert_eq(sl_limit_init(&whole, SL_FIXED_WINDOW, 10, 30 * 24 * 3600 * NS_PER_SEC, 0),
                 SL_OK);
    cr_assert_eq(sl_limit_carry(&whole), SL_OK);
    cr_assert_eq(sl_limit_align(&whole, 1, -5 * 3600 * NS_PER_SEC, 123456789), SL_OK);
    cr_assert_eq(sl_limit_share(&whole, 3, &share), SL_OK);
    cr_assert_eq(share.limit, 3);
    cr_assert_eq(share.period_ns, whole.period_ns);
    cr_assert(share.flags & SL_LIMIT_CARRY);
    cr_assert_eq(share.months, 1);
    cr_assert_eq(share.utc_offset_ns, whole.utc_offset_ns);
    cr_assert_eq(share.local_offset_ns, whole.local_offset_ns);
    cr_assert_eq(share.phase_ns, whole.phase_ns);
    cr_assert_eq(sl_state_size(&share), sl_state_size(&whole));
    /* A concurrency limit: leases divided, their TTL kept. */
    cr_assert_eq(sl_limit_init(&whole, SL_CONCURRENCY, 8, MIN, 0), SL_OK);
    cr_assert_eq(sl_limit_share(&whole, 3, &share), SL_OK);
    cr_assert_eq(share.limit, 2);
    cr_assert_eq(share.period_ns, MIN);
}

Test(share, nodes_out_of_range_and_one_node)
{
    sl_limit whole, share;
    cr_assert_eq(sl_limit_init(&whole, SL_GCRA, 10, NS_PER_SEC, 0), SL_OK);
    cr_assert_eq(sl_limit_share(&whole, 0, &share), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_limit_share(&whole, -3, &share), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_limit_share(&whole, SL_SHARE_NODES_MAX + 1, &share), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_limit_share(&whole, 1, &share), SL_OK);
    cr_assert_eq(memcmp(&whole, &share, sizeof whole), 0);
    cr_assert_eq(sl_limit_share(&whole, SL_SHARE_NODES_MAX, &share), SL_OK);
    cr_assert_eq(share.burst, 1);
}
