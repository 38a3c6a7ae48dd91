/*
 * fleet.c: `sluice simulate --nodes N --strategy S`, one limit enforced by a
 * fleet of N nodes, each request landing on the next node in turn (a
 * round-robin load balancer), under four strategies:
 *
 *   central  one shared state per key (a central store): exact, one round
 *            trip per request
 *   split    each node enforces its share of the limit on its own, as
 *            sluiced --split N does (sl_limit_share): no coordination;
 *            exact only while the balancer is fair
 *   sync     each node decides on its own copy of the state; every
 *            --sync-interval the copies are merged: every take the nodes
 *            admitted since the last merge is replayed, in time order, on the
 *            shared state, and every node starts the next interval from the
 *            merged state. A take the shared state cannot absorb yet (the
 *            nodes together admitted more than the limit allowed: that is the
 *            overshoot) stays owed, and is charged at the following merges,
 *            before anything else fits; while anything is owed, every node
 *            refuses (the merged count says the fleet is over its limit). As
 *            with a backend that pushes counts, the fleet pays its overshoot
 *            back: on average it keeps the rate, and it overshoots in bursts
 *            of up to N times what was left at a merge
 *   route    each key is owned by one node (a hash of the key): exact per
 *            key, as central, without a shared store
 *
 * The overshoot shows in the table's max_in_period: the most any one key got
 * through in one period, against the limit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int sim_fleet_run(const sim_setup *s, sl_algorithm alg, int nodes, const char *strategy,
                  int64_t sync_ns, sim_result *r, char *errbuf, size_t errcap)
{
    const traffic *tr = s->tr;
    bool split = strcmp(strategy, "split") == 0;
    bool sync = strcmp(strategy, "sync") == 0;
    bool route = strcmp(strategy, "route") == 0;
    sl_limit lim;
    snprintf(r->name, sizeof r->name, "%s", strategy);
    r->alg = alg;
    /* split: each node's share is what sluiced --split enforces (sl_limit_share). */
    int lrc = sl_limit_init(&lim, alg, s->limit, s->period_ns, s->burst);
    if (lrc == SL_OK && split)
        lrc = sl_limit_share(&lim, nodes, &lim);
    if (lrc != SL_OK) {
        snprintf(errbuf, errcap, "%s: limit %lld over %d nodes: %s", strategy,
                 (long long)s->limit, nodes, sl_strerror(lrc));
        return -1;
    }
    r->lim = lim;
    size_t sz = sl_state_size(&lim);
    r->state_bytes = sz;
    /* Every node's limit, and so its states' size, is the same. */
    int copies = strcmp(strategy, "central") == 0 ? 1 : nodes;
    if (tr->nkeys > FLEET_MAX_STATE_BYTES / sz / (size_t)(copies + 1)) {
        snprintf(errbuf, errcap, "%s: %zu keys on %d nodes exceed the simulator's 1 GiB", strategy,
                 tr->nkeys, nodes);
        return -1;
    }
    size_t per_node = tr->nkeys * sz;
    unsigned char *states = calloc((size_t)copies, per_node);
    unsigned char *merged = sync ? calloc(1, per_node) : NULL;
    sim_admit *adm = malloc((tr->n ? tr->n : 1) * sizeof *adm);
    sim_admit *pending = sync ? malloc((tr->n ? tr->n : 1) * sizeof *pending) : NULL;
    sim_admit *owed = sync ? malloc((tr->n ? tr->n : 1) * sizeof *owed) : NULL;
    if (!states || (sync && (!merged || !pending || !owed)) || !adm || sim_result_alloc(s, r) != 0) {
        snprintf(errbuf, errcap, "out of memory");
        free(states);
        free(merged);
        free(adm);
        free(pending);
        free(owed);
        return -1;
    }
    size_t nadm = 0, npend = 0, nowed = 0;
    int64_t next_sync = sync_ns;
    for (size_t i = 0; i < tr->n; i++) {
        const sim_event *e = &tr->ev[i];
        int node = (int)(i % (size_t)nodes);
        if (route)
            node = (int)(hash_key(tr->keys[e->key]) % (uint64_t)nodes);
        if (sync) {
            while (e->t_ns >= next_sync) {
                /* The merge: replay the interval's takes on the shared state
                 * at their own times, then what is owed, at the merge's time
                 * (so that time never goes backwards for a state); what still
                 * does not fit stays owed. Then hand every node a copy. */
                size_t still = 0;
                for (size_t k = 0; k < npend + nowed; k++) {
                    bool late = k >= npend;
                    sim_admit *a = late ? &owed[k - npend] : &pending[k];
                    sl_decision d;
                    sl_take(&lim, merged + (size_t)a->key * sz, late ? next_sync : a->t_ns,
                            a->cost, &d);
                    /* A cost that can never fit cannot be owed (no node admits one). */
                    if (!d.allowed && d.retry_after_ns != SL_NEVER)
                        pending[still++] = *a; /* compacted in place: still <= k */
                }
                memcpy(owed, pending, still * sizeof *owed);
                nowed = still;
                npend = 0;
                for (int n = 0; n < nodes; n++)
                    memcpy(states + (size_t)n * per_node, merged, per_node);
                next_sync = next_sync > SL_TIME_MAX - sync_ns ? SL_TIME_MAX : next_sync + sync_ns;
            }
        }
        int ln = copies == 1 ? 0 : node;
        const sl_limit *l = &lim;
        sl_decision d;
        /* A cost of 0 peeks: it consumes nothing, so a node in debt may peek. */
        int rc = sl_peek(l, states + (size_t)ln * per_node + (size_t)e->key * sz, e->t_ns, 0, &d);
        if (!(sync && nowed > 0 && e->cost > 0))
            rc = sl_take(l, states + (size_t)ln * per_node + (size_t)e->key * sz, e->t_ns, e->cost,
                         &d);
        else
            d.allowed = false;
        if (rc != SL_OK) {
            snprintf(errbuf, errcap, "%s: request %zu: %s", strategy, i + 1, sl_strerror(rc));
            free(states);
            free(merged);
            free(adm);
            free(pending);
            free(owed);
                return -1;
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
            if (sync)
                pending[npend++] = (sim_admit){e->t_ns, e->key, e->cost};
        } else {
            r->rejected++;
            r->b_rejected[b]++;
        }
    }
    int rc = sim_finish(s, r, adm, nadm);
    free(states);
    free(merged);
    free(adm);
    free(pending);
    free(owed);
    return rc;
}
