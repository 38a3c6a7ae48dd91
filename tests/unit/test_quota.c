/*
 * The sync strategy's rules (src/algo/quota.h) on a virtual clock: a fleet
 * of nodes taking locally and syncing with one central state every
 * interval, against one exact limiter (GCRA through sl_take) on the same
 * traffic. Time moves in ticks of 1 ms; the requests of a tick arrive at its
 * start; node k syncs at k * interval / N into every interval, so that the
 * syncs are spread as a fleet's are.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <string.h>

#include "algo/quota.h"
#include "common/arith.h"
#include "testlib.h"

#define TICK NS_PER_MS
#define MAXN 4
#define MAXPH 4

/* From tick `from` on, node k is offered rate[k] requests a second (spread
 * over the ticks), and `burst[k]` requests at once in that first tick. */
typedef struct phase {
    int64_t from;
    int64_t rate[MAXN];
    int64_t burst[MAXN];
} phase;

typedef struct run {
    /* Inputs. */
    int n;
    int64_t limit, period, burst, interval, ticks;
    phase ph[MAXPH];
    int nph;
    int restart_node, restart_tick; /* -1: none; the node loses its state then */
    int silent_node, silent_tick;   /* -1: none; the node stops syncing then */
    /* Outputs. */
    int64_t *adm;        /* per tick, the fleet's admitted */
    int64_t *adm_node;   /* per tick and node */
    int64_t *exact;      /* per tick, one exact limiter's admitted */
    int64_t offered, fleet_total, exact_total;
    sl_quota_config cfg;
    sl_quota_central cen;
} run;

static void run_free(run *r)
{
    free(r->adm);
    free(r->adm_node);
    free(r->exact);
}

static void run_fleet(run *r)
{
    sl_limit lim;
    cr_assert_eq(sl_limit_init(&lim, SL_GCRA, r->limit, r->period, r->burst), SL_OK);
    cr_assert_eq(sl_quota_config_init(&r->cfg, &lim, r->n, r->interval), SL_OK);
    memset(&r->cen, 0, sizeof r->cen);
    sl_quota_node nodes[MAXN];
    memset(nodes, 0, sizeof nodes);
    void *exact_state = test_state(&lim);
    int64_t acc[MAXN] = {0};
    r->adm = calloc((size_t)r->ticks, sizeof *r->adm);
    r->adm_node = calloc((size_t)r->ticks * MAXN, sizeof *r->adm_node);
    r->exact = calloc((size_t)r->ticks, sizeof *r->exact);
    cr_assert(r->adm && r->adm_node && r->exact);
    r->offered = r->fleet_total = r->exact_total = 0;
    int64_t interval_ticks = r->interval / TICK;
    int p = 0;
    for (int64_t t = 0; t < r->ticks; t++) {
        /* Virtual time starts at 1 s: a state's 0 is "never seen". */
        int64_t now = NS_PER_SEC + t * TICK;
        if (r->restart_node >= 0 && t == r->restart_tick)
            memset(&nodes[r->restart_node], 0, sizeof nodes[0]);
        /* Syncs first: node k at its offset into the interval. */
        for (int k = 0; k < r->n; k++) {
            if (t % interval_ticks != (int64_t)k * interval_ticks / r->n || nodes[k].mode == 0)
                continue;
            if (k == r->silent_node && t >= r->silent_tick)
                continue;
            sl_quota_report rep;
            sl_quota_grant g;
            sl_quota_report_of(&r->cfg, &nodes[k], k, now, &rep);
            cr_assert_eq(sl_quota_sync(&r->cfg, &r->cen, now, &rep, &g), SL_OK);
            sl_quota_apply(&r->cfg, &nodes[k], now, now, &rep, &g);
        }
        while (p + 1 < r->nph && r->ph[p + 1].from <= t)
            p++;
        for (int k = 0; k < r->n; k++) {
            acc[k] += r->ph[p].rate[k];
            int64_t count = acc[k] / 1000;
            acc[k] %= 1000;
            if (r->ph[p].from == t)
                count += r->ph[p].burst[k];
            for (int64_t i = 0; i < count; i++) {
                r->offered++;
                if (sl_quota_take(&r->cfg, &nodes[k], now, 1)) {
                    r->adm[t]++;
                    r->adm_node[t * MAXN + k]++;
                    r->fleet_total++;
                }
                sl_decision d;
                cr_assert_eq(sl_take(&lim, exact_state, now, 1, &d), SL_OK);
                if (d.allowed) {
                    r->exact[t]++;
                    r->exact_total++;
                }
            }
        }
    }
    free(exact_state);
}

/* The most any span of ticks [i, j] admitted beyond the rate over it,
 * r * (j - i) ticks, in units (rounded up): what the fleet took beyond a
 * token bucket's refill, which one exact limiter keeps within its burst. */
static int64_t most_beyond_rate(const run *r, const int64_t *adm)
{
    /* In units * period: count * period - limit * (t_j - t_i). */
    __int128 best = 0, best_start = 0, cum = 0;
    for (int64_t t = 0; t < r->ticks; t++) {
        __int128 start = -cum * r->period + (__int128)r->limit * t * TICK;
        if (start > best_start || t == 0)
            best_start = start;
        cum += adm[t];
        __int128 v = cum * r->period - (__int128)r->limit * t * TICK + best_start;
        if (v > best)
            best = v;
    }
    return (int64_t)((best + r->period - 1) / r->period);
}

/* The header's bound on what the fleet admits beyond B + r*L, as
 * sl_quota_excess computes it, checked against the formula in doubles. */
static int64_t stated_bound(const run *r)
{
    double ri = (double)r->limit * (double)r->interval / (double)r->period;
    double want = SL_QUOTA_LEASES * ri + (double)(r->n - 1) / r->n * ((double)r->burst + ri) + r->n;
    int64_t got = sl_quota_excess(&r->cfg);
    cr_assert(got >= want && got < want + 1, "excess %lld for %f", (long long)got, want);
    return got;
}

static run steady_run(int64_t rate_mult, const int64_t split[3])
{
    run r = {.n = 3, .limit = 1000, .period = NS_PER_SEC, .burst = 100,
             .interval = 100 * NS_PER_MS, .ticks = 60000, .nph = 1,
             .restart_node = -1, .silent_node = -1};
    for (int k = 0; k < 3; k++)
        r.ph[0].rate[k] = r.limit * rate_mult * split[k] / 100;
    return r;
}

Test(quota, steady_overload_converges_to_the_exact_limit)
{
    const int64_t split[3] = {60, 30, 10};
    run r = steady_run(10, split);
    run_fleet(&r);
    /* Within 2% of the exact limiter, and never more than it plus the bound. */
    int64_t diff = r.fleet_total - r.exact_total;
    cr_log_info("steady 10x 60/30/10: fleet %lld, exact %lld (%+.3f%%), offered %lld",
                (long long)r.fleet_total, (long long)r.exact_total,
                100.0 * (double)diff / (double)r.exact_total, (long long)r.offered);
    cr_assert_leq(diff < 0 ? -diff : diff, r.exact_total / 50);
    cr_assert_leq(r.fleet_total, r.exact_total + stated_bound(&r));
    /* And each node admits its share of the rate: 60/30/10 of the limit. */
    int64_t per[3] = {0};
    for (int64_t t = 10000; t < r.ticks; t++)
        for (int k = 0; k < 3; k++)
            per[k] += r.adm_node[t * MAXN + k];
    for (int k = 0; k < 3; k++) {
        int64_t want = r.limit * 50 * split[k] / 100;
        cr_log_info("node %d: %lld over the last 50 s (share %lld)", k, (long long)per[k],
                    (long long)want);
        cr_assert_leq(per[k] > want ? per[k] - want : want - per[k], want / 50 + 1);
    }
    run_free(&r);
}

Test(quota, every_split_converges)
{
    static const int64_t splits[][3] = {{34, 33, 33}, {98, 1, 1}, {50, 50, 0}, {100, 0, 0}};
    for (size_t s = 0; s < sizeof splits / sizeof splits[0]; s++) {
        run r = steady_run(10, splits[s]);
        r.ticks = 20000;
        run_fleet(&r);
        int64_t diff = r.fleet_total - r.exact_total;
        cr_log_info("split %lld/%lld/%lld: fleet %lld, exact %lld", (long long)splits[s][0],
                    (long long)splits[s][1], (long long)splits[s][2], (long long)r.fleet_total,
                    (long long)r.exact_total);
        cr_assert_leq(diff < 0 ? -diff : diff, r.exact_total / 50, "split %zu", s);
        run_free(&r);
    }
}

Test(quota, under_the_limit_everything_is_admitted)
{
    const int64_t split[3] = {60, 30, 10};
    run r = steady_run(1, split);
    for (int k = 0; k < 3; k++)
        r.ph[0].rate[k] = r.ph[0].rate[k] * 8 / 10; /* 80% of the limit */
    r.ticks = 20000;
    run_fleet(&r);
    cr_log_info("80%% of the limit: offered %lld, fleet %lld, exact %lld", (long long)r.offered,
                (long long)r.fleet_total, (long long)r.exact_total);
    cr_assert_eq(r.exact_total, r.offered);
    /* Once every node has synced (the first interval, while the key is
     * young, the central keeps the static shares for the nodes that have
     * not), everything offered is admitted. */
    int64_t offered = 0, admitted = 0;
    for (int64_t t = 2 * r.interval / TICK; t < r.ticks; t++) {
        offered += r.exact[t];
        admitted += r.adm[t];
    }
    cr_assert_eq(admitted, offered);
    cr_assert_geq(r.fleet_total * 100, r.offered * 99);
    run_free(&r);
}

Test(quota, moved_traffic_is_followed_within_two_intervals)
{
    run r = {.n = 3, .limit = 1000, .period = NS_PER_SEC, .burst = 100,
             .interval = 100 * NS_PER_MS, .ticks = 20000, .nph = 2,
             .restart_node = -1, .silent_node = -1};
    r.ph[0].rate[0] = 10000; /* all on node 0 */
    r.ph[1].from = 10050;    /* then all on node 2, halfway into an interval */
    r.ph[1].rate[2] = 10000;
    run_fleet(&r);
    /* Node 2's admitted in each interval after the move. */
    int64_t per_interval = r.limit * r.interval / r.period;
    int64_t got[6] = {0};
    for (int i = 0; i < 6; i++)
        for (int64_t t = r.ph[1].from + i * 100; t < r.ph[1].from + (i + 1) * 100; t++)
            got[i] += r.adm_node[t * MAXN + 2];
    cr_log_info("moved: node 2 admits %lld, %lld, %lld, %lld in the intervals after the move "
                "(the limit: %lld)",
                (long long)got[0], (long long)got[1], (long long)got[2], (long long)got[3],
                (long long)per_interval);
    /* From the third interval on (two whole intervals after the move), the
     * new node gets at least 90% of the limit. */
    for (int i = 2; i < 6; i++)
        cr_assert_geq(got[i] * 10, per_interval * 9, "interval %d after the move: %lld", i,
                      (long long)got[i]);
    cr_assert_leq(most_beyond_rate(&r, r.adm), r.burst + stated_bound(&r));
    run_free(&r);
}

Test(quota, burst_from_idle_overshoots_within_the_bound)
{
    for (int64_t burst = 10; burst <= 1000; burst *= 10) {
        run r = {.n = 3, .limit = 1000, .period = NS_PER_SEC, .burst = burst,
                 .interval = 100 * NS_PER_MS, .ticks = 8000, .nph = 3,
                 .restart_node = -1, .silent_node = -1};
        /* A trickle lets every node see the key and sync; then idle; then
         * a burst of the whole limit on every node at once. */
        for (int k = 0; k < 3; k++) {
            r.ph[0].rate[k] = 10;
            r.ph[2].burst[k] = 2 * burst + 1000;
            r.ph[2].rate[k] = 10000;
        }
        r.ph[1].from = 1000;
        r.ph[2].from = 5017;
        run_fleet(&r);
        int64_t fleet = most_beyond_rate(&r, r.adm), exact = most_beyond_rate(&r, r.exact);
        int64_t bound = stated_bound(&r);
        cr_log_info("burst from idle, B %lld: beyond the rate fleet %lld, exact %lld; "
                    "bound B + %lld", (long long)burst, (long long)fleet, (long long)exact,
                    (long long)bound);
        cr_assert_leq(exact, burst + 1);
        cr_assert_leq(fleet, burst + bound);
        run_free(&r);
    }
}

Test(quota, first_sight_after_others_spent_stays_within_the_bound)
{
    /* Node 0 spends the key's budget; nodes 1 and 2 see the key only then,
     * each from its B/N guess: the case the bound's last term is for. */
    run r = {.n = 3, .limit = 1000, .period = NS_PER_SEC, .burst = 600,
             .interval = 100 * NS_PER_MS, .ticks = 6000, .nph = 2,
             .restart_node = -1, .silent_node = -1};
    r.ph[0].rate[0] = 10000;
    r.ph[1].from = 2000;
    r.ph[1].rate[0] = 10000;
    r.ph[1].burst[1] = r.ph[1].burst[2] = 1000;
    r.ph[1].rate[1] = r.ph[1].rate[2] = 10000;
    run_fleet(&r);
    int64_t fleet = most_beyond_rate(&r, r.adm), bound = stated_bound(&r);
    cr_log_info("first sight: beyond the rate %lld, B %lld, bound B + %lld", (long long)fleet,
                (long long)r.burst, (long long)bound);
    cr_assert_gt(fleet, r.burst); /* the guess does overshoot here */
    cr_assert_leq(fleet, r.burst + bound);
    /* Over the run the overshoot is paid back. */
    cr_assert_leq(r.fleet_total, r.exact_total + bound);
    run_free(&r);
}

Test(quota, a_silent_node_gives_its_lease_back_after_three_intervals)
{
    sl_limit lim;
    sl_quota_config c;
    cr_assert_eq(sl_limit_init(&lim, SL_GCRA, 1000, NS_PER_SEC, 500), SL_OK);
    cr_assert_eq(sl_quota_config_init(&c, &lim, 2, 100 * NS_PER_MS), SL_OK);
    sl_quota_central s;
    memset(&s, 0, sizeof s);
    sl_quota_grant g;
    int64_t t0 = NS_PER_SEC + c.interval_ns;
    /* Node 0 asks a lot and, once the key is older than an interval (node 1
     * has not seen it: nothing is kept for it), gets the whole brim as its
     * hold. */
    sl_quota_report busy = {0, 0, 100000, 100 * NS_PER_MS, 0};
    cr_assert_eq(sl_quota_sync(&c, &s, NS_PER_SEC, &busy, &g), SL_OK);
    cr_assert_eq(sl_quota_sync(&c, &s, t0, &busy, &g), SL_OK);
    cr_assert_eq(g.hold, c.burst);
    /* Node 1, asking as much, gets nothing of the brim while node 0's lease
     * lives (and only what the rate leaves: nothing). */
    sl_quota_report other = {1, 0, 100000, 100 * NS_PER_MS, 0};
    for (int i = 1; i < SL_QUOTA_LEASES; i++) {
        cr_assert_eq(sl_quota_sync(&c, &s, t0 + i * c.interval_ns, &other, &g), SL_OK);
        cr_assert_eq(g.hold, 0, "interval %d: %lld", i, (long long)g.hold);
        cr_assert_eq(g.rate, 0);
    }
    /* Node 0 stays silent: after three intervals its lease is back. */
    cr_assert_eq(sl_quota_sync(&c, &s, t0 + SL_QUOTA_LEASES * c.interval_ns, &other, &g), SL_OK);
    cr_assert_eq(g.hold, c.burst);
    cr_assert_eq(g.rate, c.rate);
    cr_assert_eq(s.node[0].hold, 0);
    cr_assert_eq(s.node[0].demand, 0);

    /* On its side, node 0's lease stops at the same instant: tokens do not
     * accrue past it, and what is left shrinks to the static share. */
    sl_quota_node n;
    memset(&n, 0, sizeof n);
    sl_quota_report r0 = {0, 0, 0, 0, 0};
    sl_quota_grant lease = {0, c.rate};
    sl_quota_apply(&c, &n, t0, t0, &r0, &lease);
    int64_t at_end = sl_quota_node_tokens(&c, &n, t0 + c.lease_ns - 1);
    cr_assert_leq(sl_quota_node_tokens(&c, &n, t0 + 100 * c.lease_ns), c.burst / 2);
    cr_assert_gt(at_end, c.burst / 2);
}

Test(quota, a_restarted_node_starts_from_the_central_not_a_fresh_burst)
{
    const int64_t split[3] = {60, 30, 10};
    run r = steady_run(10, split);
    r.ticks = 20000;
    r.restart_node = 0;
    r.restart_tick = 10000;
    run_fleet(&r);
    /* Its B/N guess is all it gets before its first sync: the fleet stays
     * within the bound, and over the run within what one exact limiter
     * admits plus that guess. */
    int64_t beyond = most_beyond_rate(&r, r.adm);
    cr_log_info("restart: beyond the rate %lld (B %lld); fleet %lld, exact %lld",
                (long long)beyond, (long long)r.burst, (long long)r.fleet_total,
                (long long)r.exact_total);
    cr_assert_leq(beyond, r.burst + stated_bound(&r));
    cr_assert_leq(r.fleet_total, r.exact_total + r.burst / 3 + stated_bound(&r));
    /* Its first grant after the restart comes out of the central's budget,
     * which the overload keeps near 0: no fresh burst. */
    int64_t after = 0;
    for (int64_t t = 10000; t < 10000 + 200; t++)
        after += r.adm_node[t * MAXN + 0];
    cr_assert_leq(after, r.burst / 3 + 2 * r.limit * 200 / 1000 * 6 / 10 + 1);
    run_free(&r);
}

Test(quota, costs_above_the_burst_never_fit_and_are_not_counted)
{
    sl_limit lim;
    sl_quota_config c;
    cr_assert_eq(sl_limit_init(&lim, SL_TOKEN_BUCKET, 10, NS_PER_SEC, 10), SL_OK);
    cr_assert_eq(sl_quota_config_init(&c, &lim, 1, 100 * NS_PER_MS), SL_OK);
    sl_quota_node n;
    memset(&n, 0, sizeof n);
    cr_assert_not(sl_quota_take(&c, &n, NS_PER_SEC, 11));
    cr_assert_not(sl_quota_take(&c, &n, NS_PER_SEC, INT64_MAX));
    cr_assert_not(sl_quota_take(&c, &n, NS_PER_SEC, -1));
    cr_assert_eq(n.asked, 0);
    cr_assert(sl_quota_take(&c, &n, NS_PER_SEC, 0));
    cr_assert(sl_quota_take(&c, &n, NS_PER_SEC, 10));
    cr_assert_not(sl_quota_take(&c, &n, NS_PER_SEC, 1));
    cr_assert_eq(n.admitted, 10);
    cr_assert_eq(n.asked, 11);
    /* A large cost over a long idle time: the static share's brim holds. */
    cr_assert(sl_quota_take(&c, &n, 1000 * NS_PER_SEC, 10));
    cr_assert_not(sl_quota_take(&c, &n, 1000 * NS_PER_SEC, 1));
}

Test(quota, configs_out_of_range_are_refused)
{
    sl_limit lim;
    sl_quota_config c;
    cr_assert_eq(sl_limit_init(&lim, SL_SLIDING_LOG, 10, NS_PER_SEC, 0), SL_OK);
    cr_assert_eq(sl_quota_config_init(&c, &lim, 2, NS_PER_SEC), SL_ERR_UNSUPPORTED);
    cr_assert_eq(sl_limit_init(&lim, SL_GCRA, SL_QUOTA_UNITS_MAX + 1, SL_SPAN_MAX, 1), SL_OK);
    cr_assert_eq(sl_quota_config_init(&c, &lim, 2, NS_PER_SEC), SL_ERR_LIMIT);
    cr_assert_eq(sl_limit_init(&lim, SL_GCRA, SL_QUOTA_UNITS_MAX, NS_PER_SEC,
                               SL_QUOTA_UNITS_MAX + 1), SL_OK);
    cr_assert_eq(sl_quota_config_init(&c, &lim, 2, NS_PER_SEC), SL_ERR_BURST);
    cr_assert_eq(sl_limit_init(&lim, SL_GCRA, 10, NS_PER_SEC, 10), SL_OK);
    cr_assert_eq(sl_quota_config_init(&c, &lim, 0, NS_PER_SEC), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_quota_config_init(&c, &lim, SL_QUOTA_NODES_MAX + 1, NS_PER_SEC),
                 SL_ERR_ARGUMENT);
    cr_assert_eq(sl_quota_config_init(&c, &lim, 2, 0), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_quota_config_init(&c, &lim, 2, SL_SPAN_MAX), SL_OK);
}

Test(quota, bad_reports_are_refused_and_change_nothing)
{
    sl_limit lim;
    sl_quota_config c;
    cr_assert_eq(sl_limit_init(&lim, SL_GCRA, 10, NS_PER_SEC, 10), SL_OK);
    cr_assert_eq(sl_quota_config_init(&c, &lim, 2, NS_PER_SEC), SL_OK);
    sl_quota_central s, before;
    memset(&s, 0, sizeof s);
    sl_quota_grant g;
    sl_quota_report ok = {0, 3, 5, NS_PER_SEC, 0};
    cr_assert_eq(sl_quota_sync(&c, &s, NS_PER_SEC, &ok, &g), SL_OK);
    memcpy(&before, &s, sizeof s);
    const sl_quota_report bad[] = {
        {2, 0, 0, 0, 0},  {-1, 0, 0, 0, 0}, {0, -1, 0, 0, 0}, {0, 5, 4, 0, 0},
        {0, 0, SL_QUOTA_UNITS_MAX + 1, 0, 0}, {0, 0, 0, -1, 0}, {0, 0, 0, 0, -1},
        {0, 0, 0, 0, SL_QUOTA_SCALE + 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(sl_quota_sync(&c, &s, 2 * NS_PER_SEC, &bad[i], &g), SL_ERR_ARGUMENT,
                     "report %zu", i);
        cr_assert_eq(memcmp(&s, &before, sizeof s), 0, "report %zu", i);
    }
    cr_assert_eq(sl_quota_sync(&c, &s, -1, &ok, &g), SL_ERR_TIME);
    cr_assert_eq(sl_quota_sync(&c, &s, SL_TIME_MAX + 1, &ok, &g), SL_ERR_TIME);
    cr_assert_eq(memcmp(&s, &before, sizeof s), 0);
}

Test(quota, the_same_reports_give_the_same_bytes)
{
    const int64_t split[3] = {60, 30, 10};
    run a = steady_run(3, split), b = steady_run(3, split);
    a.ticks = b.ticks = 3000;
    run_fleet(&a);
    run_fleet(&b);
    cr_assert_eq(memcmp(&a.cen, &b.cen, sizeof a.cen), 0);
    cr_assert_eq(a.fleet_total, b.fleet_total);
    run_free(&a);
    run_free(&b);
}

/* A few syncs and takes of a fleet at the extremes of time and rate; the
 * sanitizers check that no arithmetic overflows, the asserts that the
 * leases stay within the brim and the rate. */
static void extreme(int64_t limit, int64_t period, int64_t burst, int64_t interval, int64_t t0,
                    int64_t step)
{
    sl_limit lim;
    sl_quota_config c;
    cr_assert_eq(sl_limit_init(&lim, SL_GCRA, limit, period, burst), SL_OK);
    cr_assert_eq(sl_quota_config_init(&c, &lim, 3, interval), SL_OK);
    sl_quota_central s;
    memset(&s, 0, sizeof s);
    sl_quota_node n[3];
    memset(n, 0, sizeof n);
    int64_t admitted = 0;
    for (int i = 0; i < 40; i++) {
        int64_t now = t0;
        for (int j = 0; j < i; j++)
            now = sl_add_clamp(now, step, SL_TIME_MAX);
        for (int k = 0; k < 3; k++) {
            for (int j = 0; j < 3; j++)
                admitted += sl_quota_take(&c, &n[k], now, j == 2 ? SL_QUOTA_UNITS_MAX : 1);
            sl_quota_report r;
            sl_quota_grant g;
            sl_quota_report_of(&c, &n[k], k, now, &r);
            cr_assert_eq(sl_quota_sync(&c, &s, now, &r, &g), SL_OK);
            cr_assert_geq(g.hold, 0);
            cr_assert_leq(g.hold, c.burst);
            cr_assert_geq(g.rate, 0);
            cr_assert_leq(g.rate, c.rate);
            cr_assert_leq(s.remaining, c.burst);
            sl_quota_apply(&c, &n[k], now, now, &r, &g);
        }
        int64_t rates = 0;
        for (int k = 0; k < 3; k++)
            rates += s.node[k].rate;
        cr_assert_leq(rates, c.rate);
    }
    cr_assert_gt(admitted, 0);
}

Test(quota, huge_and_tiny_rates_do_not_overflow)
{
    /* The largest limit and burst, every nanosecond, at the end of time. */
    extreme(SL_QUOTA_UNITS_MAX, 1, SL_QUOTA_UNITS_MAX, 1, SL_TIME_MAX - 20, 1);
    extreme(SL_QUOTA_UNITS_MAX, 1, SL_QUOTA_UNITS_MAX, SL_SPAN_MAX, 1, SL_SPAN_MAX);
    /* One a span, synced every nanosecond or every span. */
    extreme(1, SL_SPAN_MAX, 1, 1, 1, 1);
    extreme(1, SL_SPAN_MAX, 1, SL_SPAN_MAX, 1, SL_SPAN_MAX / 7);
    extreme(3, SL_SPAN_MAX, 3, 100 * NS_PER_MS, SL_TIME_MAX / 2, NS_PER_SEC);
    /* The largest limit and burst over the longest period. */
    extreme(SL_QUOTA_UNITS_MAX, SL_SPAN_MAX / 2, SL_QUOTA_UNITS_MAX, NS_PER_SEC, 1,
            SL_SPAN_MAX / 3);
}

Test(quota, any_bytes_as_a_central_state_are_read_safely)
{
    /* A central state will live in a Redis key, which can be SET to
     * anything: every sync on random bytes stays within the limit's ranges
     * (the sanitizers check the arithmetic). */
    sl_limit lim;
    sl_quota_config c;
    cr_assert_eq(sl_limit_init(&lim, SL_GCRA, 1000, NS_PER_SEC, 100), SL_OK);
    cr_assert_eq(sl_quota_config_init(&c, &lim, SL_QUOTA_NODES_MAX, 100 * NS_PER_MS), SL_OK);
    test_rng rng = {7};
    for (int i = 0; i < 2000; i++) {
        sl_quota_central s;
        uint64_t *w = (uint64_t *)&s;
        for (size_t k = 0; k < sizeof s / sizeof *w; k++)
            w[k] = test_next(&rng) >> (test_next(&rng) % 64);
        sl_quota_report r = {(int)test_range(&rng, 0, SL_QUOTA_NODES_MAX - 1), 0,
                             test_range(&rng, 0, 1000), test_range(&rng, 0, NS_PER_SEC),
                             test_range(&rng, 0, SL_QUOTA_SCALE)};
        r.admitted = test_range(&rng, 0, r.asked);
        sl_quota_grant g;
        int64_t now = test_range(&rng, 0, SL_TIME_MAX);
        cr_assert_eq(sl_quota_sync(&c, &s, now, &r, &g), SL_OK);
        cr_assert(g.hold >= 0 && g.hold <= c.burst, "hold %lld", (long long)g.hold);
        cr_assert(g.rate >= 0 && g.rate <= c.rate, "rate %lld", (long long)g.rate);
        cr_assert_leq(s.remaining, c.burst);
        /* And the next sync reads what this one wrote unchanged. */
        sl_quota_central again = s;
        cr_assert_eq(sl_quota_sync(&c, &again, now, &r, &g), SL_OK);
    }
}

Test(quota, a_lower_limit_reads_the_old_state_within_its_own)
{
    /* A reload that lowers the limit: leases and budget granted under the
     * old one are cut to the new brim and rate. */
    sl_limit big, small;
    sl_quota_config cb, cs;
    cr_assert_eq(sl_limit_init(&big, SL_GCRA, 10000, NS_PER_SEC, 10000), SL_OK);
    cr_assert_eq(sl_limit_init(&small, SL_GCRA, 10, NS_PER_SEC, 10), SL_OK);
    cr_assert_eq(sl_quota_config_init(&cb, &big, 2, 100 * NS_PER_MS), SL_OK);
    cr_assert_eq(sl_quota_config_init(&cs, &small, 2, 100 * NS_PER_MS), SL_OK);
    sl_quota_central s;
    memset(&s, 0, sizeof s);
    sl_quota_grant g;
    sl_quota_report r = {0, 0, 100, 100 * NS_PER_MS, 0};
    cr_assert_eq(sl_quota_sync(&cb, &s, NS_PER_SEC, &r, &g), SL_OK);
    cr_assert_gt(g.hold, cs.burst);
    r.node = 1;
    cr_assert_eq(sl_quota_sync(&cs, &s, NS_PER_SEC + NS_PER_MS, &r, &g), SL_OK);
    cr_assert_leq(g.hold, cs.burst);
    cr_assert_leq(g.rate, cs.rate);
    cr_assert_leq(s.node[0].hold, cs.burst);
    cr_assert_leq(s.node[0].rate, cs.rate);
}

Test(quota, a_sparse_key_over_many_nodes_is_admitted)
{
    /* One request a second over 16 nodes in turn, under 10 a second with
     * a burst of 10: each node's share of the burst and of the rate is
     * below one unit an interval, and one exact limiter admits everything.
     * What a node carries across syncs (up to a unit) adds up to a take. */
    sl_limit lim;
    sl_quota_config c;
    cr_assert_eq(sl_limit_init(&lim, SL_GCRA, 10, NS_PER_SEC, 10), SL_OK);
    cr_assert_eq(sl_quota_config_init(&c, &lim, SL_QUOTA_NODES_MAX, 10 * NS_PER_MS), SL_OK);
    sl_quota_central s;
    memset(&s, 0, sizeof s);
    sl_quota_node n[SL_QUOTA_NODES_MAX];
    memset(n, 0, sizeof n);
    int64_t admitted = 0, offered = 0;
    for (int64_t t = NS_PER_SEC; t < 200 * NS_PER_SEC; t += 10 * NS_PER_MS) {
        for (int k = 0; k < SL_QUOTA_NODES_MAX; k++) {
            if (n[k].mode == 0)
                continue;
            sl_quota_report r;
            sl_quota_grant g;
            sl_quota_report_of(&c, &n[k], k, t, &r);
            cr_assert_eq(sl_quota_sync(&c, &s, t, &r, &g), SL_OK);
            sl_quota_apply(&c, &n[k], t, t, &r, &g);
        }
        if (t % NS_PER_SEC == 0 && t > NS_PER_SEC) {
            int k = (int)(offered % SL_QUOTA_NODES_MAX);
            offered++;
            admitted += sl_quota_take(&c, &n[k], t + NS_PER_MS, 1);
        }
        if (t == NS_PER_SEC)
            for (int k = 0; k < SL_QUOTA_NODES_MAX; k++)
                sl_quota_take(&c, &n[k], t, 0); /* every node sees the key */
    }
    cr_log_info("sparse: %lld of %lld admitted", (long long)admitted, (long long)offered);
    /* The first round, before any node has carried a unit, may refuse. */
    cr_assert_geq(admitted, offered - SL_QUOTA_NODES_MAX);
}

Test(quota, a_lease_lives_from_the_answer_to_a_lease_after_the_report)
{
    sl_limit lim;
    sl_quota_config c;
    cr_assert_eq(sl_limit_init(&lim, SL_GCRA, 100, NS_PER_SEC, 100), SL_OK);
    cr_assert_eq(sl_quota_config_init(&c, &lim, 3, 100 * NS_PER_MS), SL_OK);
    sl_quota_node n;
    memset(&n, 0, sizeof n);
    cr_assert(sl_quota_unleased(&n, 0));
    cr_assert_not(sl_quota_due(&n), "a key never seen has nothing to report");
    sl_quota_report r = {0, 0, 3, 0, 0};
    sl_quota_grant g = {10 * SL_QUOTA_SCALE, 50 * SL_QUOTA_SCALE};
    const int64_t sent = NS_PER_SEC, now = sent + 2 * NS_PER_MS; /* a 2 ms round trip */
    sl_quota_apply(&c, &n, now, sent, &r, &g);
    /* Its tokens start at the answer (nothing accrued over the round trip)
     * and the lease ends a lease after the report left. */
    cr_assert_eq(sl_quota_node_tokens(&c, &n, now), g.hold);
    cr_assert_eq(n.lease_end, sent + c.lease_ns);
    cr_assert_not(sl_quota_unleased(&n, sent + c.lease_ns - 1));
    cr_assert(sl_quota_unleased(&n, sent + c.lease_ns));
    /* The sync reported demand: the next one is due, to give it back. */
    cr_assert(sl_quota_due(&n));
    sl_quota_report zero;
    sl_quota_report_of(&c, &n, 0, now + c.interval_ns, &zero);
    cr_assert_eq(zero.asked, 0);
    sl_quota_apply(&c, &n, now + c.interval_ns, now + c.interval_ns, &zero, &g);
    cr_assert_not(sl_quota_due(&n), "no demand reported and none since: nothing to trade");
    cr_assert(sl_quota_take(&c, &n, now + c.interval_ns, 1));
    cr_assert(sl_quota_due(&n));
}

Test(quota, a_take_given_back_restores_its_tokens_and_count)
{
    sl_limit lim;
    sl_quota_config c;
    cr_assert_eq(sl_limit_init(&lim, SL_GCRA, 10, NS_PER_SEC, 10), SL_OK);
    cr_assert_eq(sl_quota_config_init(&c, &lim, 1, 100 * NS_PER_MS), SL_OK);
    sl_quota_node n;
    memset(&n, 0, sizeof n);
    cr_assert(sl_quota_take(&c, &n, 0, 4));
    int64_t before = sl_quota_node_tokens(&c, &n, 0);
    sl_quota_give_back(&n, 4);
    cr_assert_eq(sl_quota_node_tokens(&c, &n, 0), before + 4 * SL_QUOTA_SCALE);
    cr_assert_eq(n.admitted, 0);
    cr_assert_eq(n.asked, 4, "the demand stays: it was asked");
    /* More than was admitted is no take of this node's: ignored. */
    sl_quota_give_back(&n, 1);
    cr_assert_eq(sl_quota_node_tokens(&c, &n, 0), before + 4 * SL_QUOTA_SCALE);
}

Test(quota, a_cut_off_node_goes_on_at_its_last_share)
{
    sl_limit lim;
    sl_quota_config c;
    cr_assert_eq(sl_limit_init(&lim, SL_GCRA, 100, NS_PER_SEC, 90), SL_OK);
    cr_assert_eq(sl_quota_config_init(&c, &lim, 3, 100 * NS_PER_MS), SL_OK);
    sl_quota_node n;
    memset(&n, 0, sizeof n);
    sl_quota_report r = {0, 0, 0, 0, 0};
    /* Its last lease: 60% of the rate, nothing held. */
    sl_quota_grant g = {0, 60 * SL_QUOTA_SCALE};
    sl_quota_apply(&c, &n, 0, 0, &r, &g);
    /* Ten seconds with no sync: after the lease it goes on at 60 a second,
     * spending as it goes, never holding more than the static brim (30). */
    int64_t admitted = 0;
    for (int64_t t = 0; t < 10 * NS_PER_SEC; t += NS_PER_MS)
        admitted += sl_quota_take(&c, &n, t, 1);
    cr_assert_geq(admitted, 599);
    cr_assert_leq(admitted, 601);
    cr_assert_leq(sl_quota_node_tokens(&c, &n, 100 * NS_PER_SEC), 30 * SL_QUOTA_SCALE);
}
