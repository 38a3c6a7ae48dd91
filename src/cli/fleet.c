/*
 * fleet.c: `sluice simulate --nodes N --strategy S`, one limit enforced by a
 * fleet of N nodes, each request landing on a node as a load balancer sends
 * it (round-robin, or weighted by --node-weights, and moved over by
 * --shift-at), under four strategies:
 *
 *   central  one shared state per key (a central store): exact, one round
 *            trip per request
 *   split    each node enforces its share of the limit on its own, as
 *            sluiced --split N does (sl_limit_share): no coordination;
 *            exact only while the balancer is fair
 *   sync     each node decides on its own, against a lease of the key's
 *            budget, and every --sync-interval trades what it admitted and
 *            what it was asked for a new lease that follows its share of the
 *            traffic: libsluice's rules (src/algo/quota.h), node k syncing at
 *            k / N into every interval. Under steady traffic the fleet admits
 *            the limit whatever the split; its overshoot is bounded (quota.h)
 *   route    each key is owned by one node (a hash of the key): exact per
 *            key, as central, without a shared store
 *
 * The overshoot shows in the table's max_in_period: the most any one key got
 * through in one period, against the limit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/quota.h"
#include "algo/share.h"
#include "cli/sim.h"

/* The most state bytes a fleet may allocate (all nodes, all keys). */
#define FLEET_MAX_STATE_BYTES ((size_t)1 << 30)

static uint64_t hash_key(const char *s)
{
    uint64_t h = UINT64_C(1469598103934665603);
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= UINT64_C(1099511628211);
    }
    return h;
}

/* The balancer: a smooth weighted round-robin (each pick adds every
 * node's weight to its credit and takes the total off the richest), which
 * spreads each node's share evenly in time; equal weights make it a plain
 * round-robin. */
typedef struct balancer {
    int nodes;
    const int64_t *weights;
    int64_t total;
    int64_t credit[SIM_FLEET_NODES_MAX];
    size_t turn;
} balancer;

static void balancer_init(balancer *b, const sim_fleet *f)
{
    memset(b, 0, sizeof *b);
    b->nodes = f->nodes;
    b->weights = f->weights;
    for (int k = 0; f->weights && k < f->nodes; k++)
        b->total += f->weights[k];
}

static int balancer_pick(balancer *b)
{
    if (!b->weights)
        return (int)(b->turn++ % (size_t)b->nodes);
    int best = 0;
    for (int k = 0; k < b->nodes; k++) {
        b->credit[k] += b->weights[k];
        if (b->credit[k] > b->credit[best])
            best = k;
    }
    b->credit[best] -= b->total;
    return best;
}

/* The sync strategy's states: per key, the central's, and each node's. */
typedef struct fleet_sync {
    sl_quota_config cfg;
    sl_quota_central *central; /* [key] */
    sl_quota_node *local;      /* [node * nkeys + key] */
    size_t nkeys;
    int64_t next[SL_QUOTA_NODES_MAX]; /* each node's next sync */
} fleet_sync;

/* One sync of node k's state n for `key` at now; `want` units a take
 * waiting for it asks on top of the counts. */
static int fleet_sync_one(fleet_sync *fs, int k, size_t key, sl_quota_node *n, int64_t now,
                          int64_t want, char *errbuf, size_t errcap)
{
    sl_quota_report rep;
    sl_quota_grant g;
    sl_quota_report_of(&fs->cfg, n, k, now, &rep);
    if (want > 0 && want <= fs->cfg.burst_units)
        rep.asked = rep.asked + want < SL_QUOTA_UNITS_MAX ? rep.asked + want : SL_QUOTA_UNITS_MAX;
    int rc = sl_quota_sync(&fs->cfg, &fs->central[key], now, &rep, &g);
    if (rc != SL_OK) {
        snprintf(errbuf, errcap, "sync: node %d at %lld ns: %s", k, (long long)now,
                 sl_strerror(rc));
        return -1;
    }
    sl_quota_apply(&fs->cfg, n, now, now, &rep, &g);
    return 0;
}

/* Runs every node's syncs due at or before `until`, in time order: each
 * node trades, for every key whose sync is due (sl_quota_due), its counts
 * for a new lease, as sluiced does: an idle key's lease runs out, and its
 * next take syncs it first. */
static int fleet_sync_until(fleet_sync *fs, int nodes, int64_t until, char *errbuf,
                            size_t errcap)
{
    for (;;) {
        int k = 0;
        for (int j = 1; j < nodes; j++)
            if (fs->next[j] < fs->next[k])
                k = j;
        int64_t now = fs->next[k];
        if (now > until)
            return 0;
        for (size_t key = 0; key < fs->nkeys; key++) {
            sl_quota_node *n = &fs->local[(size_t)k * fs->nkeys + key];
            if (!sl_quota_due(n))
                continue;
            if (fleet_sync_one(fs, k, key, n, now, 0, errbuf, errcap) != 0)
                return -1;
        }
        fs->next[k] = now > SL_TIME_MAX - fs->cfg.interval_ns ? INT64_MAX
                                                               : now + fs->cfg.interval_ns;
    }
}

int sim_fleet_run(const sim_setup *s, sl_algorithm alg, const sim_fleet *f, sim_result *r,
                  char *errbuf, size_t errcap)
{
    const traffic *tr = s->tr;
    const char *strategy = f->strategy;
    int nodes = f->nodes;
    bool split = strcmp(strategy, "split") == 0;
    bool sync = strcmp(strategy, "sync") == 0;
    bool route = strcmp(strategy, "route") == 0;
    sl_limit lim;
    fleet_sync fs;
    memset(&fs, 0, sizeof fs);
    snprintf(r->name, sizeof r->name, "%s", strategy);
    r->alg = alg;
    /* split: each node's share is what sluiced --split enforces (sl_limit_share). */
    int lrc = sl_limit_init(&lim, alg, s->limit, s->period_ns, s->burst);
    if (lrc == SL_OK && split)
        lrc = sl_limit_share(&lim, nodes, &lim);
    if (lrc == SL_OK && sync)
        lrc = sl_quota_config_init(&fs.cfg, &lim, nodes, f->sync_ns);
    if (lrc != SL_OK) {
        snprintf(errbuf, errcap, "%s: limit %lld over %d nodes: %s", strategy,
                 (long long)s->limit, nodes, sl_strerror(lrc));
        return -1;
    }
    r->lim = lim;
    /* sync keeps the quota's states in place of the algorithm's: the
     * central's per key, and each node's. */
    size_t sz = sync ? sizeof(sl_quota_node) : sl_state_size(&lim);
    r->state_bytes = sync ? sizeof(sl_quota_central) : sz;
    /* Every node's limit, and so its states' size, is the same. */
    int copies = strcmp(strategy, "central") == 0 ? 1 : nodes;
    size_t per_key = sz * (size_t)(copies + 1) + (sync ? sizeof(sl_quota_central) : 0);
    if (tr->nkeys > FLEET_MAX_STATE_BYTES / per_key) {
        snprintf(errbuf, errcap, "%s: %zu keys on %d nodes exceed the simulator's 1 GiB", strategy,
                 tr->nkeys, nodes);
        return -1;
    }
    size_t per_node = tr->nkeys * sz;
    unsigned char *states = calloc((size_t)copies, per_node ? per_node : 1);
    sim_admit *adm = malloc((tr->n ? tr->n : 1) * sizeof *adm);
    balancer *bal = malloc(sizeof *bal);
    if (sync) {
        fs.central = calloc(tr->nkeys ? tr->nkeys : 1, sizeof *fs.central);
        fs.local = (sl_quota_node *)states;
        fs.nkeys = tr->nkeys;
        /* Node k syncs k / N into every interval, as a fleet's syncs
         * spread when each node keeps its own timer. */
        for (int k = 0; k < nodes; k++)
            fs.next[k] = f->sync_ns / nodes * k;
    }
    if (!states || !adm || !bal || (sync && !fs.central) || sim_result_alloc(s, r) != 0) {
        snprintf(errbuf, errcap, "out of memory");
        free(states);
        free(adm);
        free(bal);
        free(fs.central);
        return -1;
    }
    balancer_init(bal, f);
    size_t nadm = 0;
    int rc = 0;
    for (size_t i = 0; i < tr->n; i++) {
        const sim_event *e = &tr->ev[i];
        int node = balancer_pick(bal);
        if (f->shift_at_ns > 0 && e->t_ns >= f->shift_at_ns)
            node = (node + 1) % nodes;
        if (route)
            node = (int)(hash_key(tr->keys[e->key]) % (uint64_t)nodes);
        int ln = copies == 1 ? 0 : node;
        unsigned char *state = states + (size_t)ln * per_node + (size_t)e->key * sz;
        sl_decision d;
        memset(&d, 0, sizeof d);
        if (sync) {
            if ((rc = fleet_sync_until(&fs, nodes, e->t_ns, errbuf, errcap)) != 0)
                break;
            sl_quota_node *n = (sl_quota_node *)state;
            if (sl_quota_unleased(n, e->t_ns) &&
                (rc = fleet_sync_one(&fs, node, e->key, n, e->t_ns, e->cost, errbuf, errcap)) != 0)
                break;
            d.allowed = sl_quota_take(&fs.cfg, n, e->t_ns, e->cost);
        } else if ((rc = sl_take(&lim, state, e->t_ns, e->cost, &d)) != SL_OK) {
            snprintf(errbuf, errcap, "%s: request %zu: %s", strategy, i + 1, sl_strerror(rc));
            break;
        }
        size_t b = sim_bucket_of(s, e->t_ns);
        r->b_offered[b]++;
        if (d.allowed) {
            r->admitted++;
            r->b_admitted[b]++;
            adm[nadm].t_ns = e->t_ns + d.delay_ns;
            adm[nadm].key = e->key;
            adm[nadm].cost = e->cost;
            nadm++;
        } else {
            r->rejected++;
            r->b_rejected[b]++;
        }
    }
    if (rc == 0 && (rc = sim_finish(s, r, adm, nadm)) != 0)
        snprintf(errbuf, errcap, "out of memory");
    free(states);
    free(adm);
    free(bal);
    free(fs.central);
    return rc == 0 ? 0 : -1;
}
