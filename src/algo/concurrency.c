/*
 * concurrency.c: a concurrency limit with leases.
 *
 * At most `limit` units in flight. A take of `cost` acquires a lease of that
 * weight, with an id and an expiry `period_ns` (the TTL) from now; releasing
 * the lease frees its units, and so does its expiry, so a holder that crashes
 * cannot keep a slot forever. Cost 0 peeks.
 *
 * A lease's id is the caller's (sl_lease_acquire: a server passes a random
 * 64-bit number, so that ids are unguessable and an expired lease's id never
 * comes back), or, through sl_take, the state's next number counting up from
 * 1 (which starts again when a reclaimed state does).
 *
 * State: a header, then up to `limit` leases sorted by expiry (all leases of
 * a limit share one TTL, so appending keeps the order): 24 bytes a lease.
 */
#include <string.h>

#include "algo/algo.h"
#include "common/arith.h"

typedef struct sl_lease {
    uint64_t id;
    int64_t expires; /* ns; the lease no longer counts when now >= expires */
    int64_t weight;  /* units it holds, >= 1 */
} sl_lease;

typedef struct sl_concurrency_state {
    int64_t count;     /* leases held */
    uint64_t last_id;  /* the last id handed out */
    int64_t in_flight; /* sum of the leases' weights */
    sl_lease leases[]; /* `limit` slots, oldest expiry first */
} sl_concurrency_state;

static int sl_conc_init(sl_limit *l)
{
    if (l->limit > SL_CONCURRENCY_MAX)
        return SL_ERR_LIMIT;
    l->burst = l->limit;
    return SL_OK;
}

static size_t sl_conc_state_size(const sl_limit *l)
{
    return sizeof(sl_concurrency_state) + (size_t)l->limit * sizeof(sl_lease);
}

/* Counts the leases at the front that have expired by `now`, and the units
 * they hold. Returns false when the state is not one of this limit. */
static bool sl_conc_scan(const sl_concurrency_state *s, int64_t cap, int64_t now,
                         int64_t *expired, int64_t *freed)
{
    if (s->count < 0 || s->count > cap || s->in_flight < 0 || s->in_flight > cap)
        return false;
    /* Every lease as takes write them (a state's bytes can come from
     * elsewhere: a module's key can be SET to anything): weights of 1 ..
     * cap adding up to in_flight, expiries in order. At most cap leases,
     * each of at most cap units: the sum fits. */
    int64_t sum = 0, last = 0;
    for (int64_t i = 0; i < s->count; i++) {
        const sl_lease *ls = &s->leases[i];
        if (ls->weight < 1 || ls->weight > cap || ls->expires < last || ls->expires > SL_TIME_MAX)
            return false;
        sum += ls->weight;
        last = ls->expires;
    }
    if (sum != s->in_flight)
        return false;
    int64_t n = 0, w = 0;
    while (n < s->count && s->leases[n].expires <= now)
        w += s->leases[n++].weight;
    *expired = n;
    *freed = w;
    return true;
}

/* Drops the first n leases (expired ones) holding w units. */
static void sl_conc_drop(sl_concurrency_state *s, int64_t n, int64_t w)
{
    if (n == 0)
        return;
    memmove(s->leases, s->leases + n, (size_t)(s->count - n) * sizeof(sl_lease));
    s->count -= n;
    s->in_flight -= w;
}

/* The decision of an acquire of weight `cost`; a granted lease carries
 * `want_id`, or the state's next number when want_id is 0. */
static void sl_conc_decide(const sl_limit *l, void *state, int64_t now, int64_t cost, bool commit,
                           uint64_t want_id, sl_decision *d)
{
    sl_concurrency_state *s = state;
    int64_t cap = l->limit, expired, freed;

    if (!sl_conc_scan(s, cap, now, &expired, &freed)) {
        if (!commit) { /* a peek at a foreign state: report it empty */
            d->allowed = cost <= cap;
            d->limit = d->remaining = cap;
            d->retry_after_ns = cost <= cap ? 0 : SL_NEVER;
            return;
        }
        memset(s, 0, sizeof *s);
        expired = freed = 0;
    }
    int64_t count = s->count - expired, in_flight = s->in_flight - freed;
    const sl_lease *live = s->leases + expired;
    int64_t last_expiry = count > 0 ? live[count - 1].expires : 0;

    d->limit = cap;
    if (cost > cap) {
        d->retry_after_ns = SL_NEVER;
    } else if (in_flight + cost <= cap) {
        d->allowed = true;
        if (cost > 0) {
            /* Never earlier than the last expiry: keeps the order if the
             * clock steps back. */
            last_expiry = sl_max64(sl_add_clamp(now, l->period_ns, SL_TIME_MAX), last_expiry);
            if (commit) {
                sl_conc_drop(s, expired, freed);
                sl_lease *n = &s->leases[s->count++];
                n->id = want_id ? want_id : ++s->last_id;
                n->expires = last_expiry;
                n->weight = cost;
                s->in_flight += cost;
                d->lease_id = n->id;
            }
            count++;
            in_flight += cost;
        }
    } else {
        /* Wait for the oldest leases to expire until cost fits. */
        int64_t need = in_flight + cost - cap, i = 0;
        for (; i < count && need > 0; i++)
            need -= live[i].weight;
        d->retry_after_ns = i > 0 ? live[i - 1].expires - now : l->period_ns;
    }
    if (commit && !d->allowed)
        sl_conc_drop(s, expired, freed);
    d->remaining = cap - in_flight;
    d->reset_after_ns = count == 0 ? 0 : last_expiry - now;
}

static void sl_conc_take(const sl_limit *l, void *state, int64_t now, int64_t cost, bool commit,
                         sl_decision *d)
{
    sl_conc_decide(l, state, now, cost, commit, 0, d);
}

sl_status sl_lease_acquire(const sl_limit *l, void *state, int64_t now, int64_t weight,
                           uint64_t lease_id, sl_decision *d)
{
    memset(d, 0, sizeof *d);
    if (l->algorithm != SL_CONCURRENCY)
        return SL_ERR_ALGORITHM;
    if (weight < 0)
        return SL_ERR_COST;
    if (now < 0 || now > SL_TIME_MAX)
        return SL_ERR_TIME;
    if (lease_id == 0)
        return SL_ERR_ARGUMENT;
    sl_concurrency_state *s = state;
    int64_t expired, freed;
    if (weight > 0 && sl_conc_scan(s, l->limit, now, &expired, &freed))
        for (int64_t i = expired; i < s->count; i++)
            if (s->leases[i].id == lease_id)
                return SL_ERR_ARGUMENT; /* ids must tell a key's leases apart */
    sl_conc_decide(l, state, now, weight, weight > 0, lease_id, d);
    return SL_OK;
}

int sl_lease_release(const sl_limit *l, void *state, int64_t now, uint64_t lease_id)
{
    if (l->algorithm != SL_CONCURRENCY)
        return SL_ERR_ALGORITHM;
    if (now < 0 || now > SL_TIME_MAX)
        return SL_ERR_TIME;
    sl_concurrency_state *s = state;
    int64_t expired, freed;
    if (!sl_conc_scan(s, l->limit, now, &expired, &freed))
        return 0;
    sl_conc_drop(s, expired, freed);
    for (int64_t i = 0; i < s->count; i++) {
        if (s->leases[i].id == lease_id) {
            s->in_flight -= s->leases[i].weight;
            memmove(&s->leases[i], &s->leases[i + 1],
                    (size_t)(s->count - i - 1) * sizeof(sl_lease));
            s->count--;
            return 1;
        }
    }
    return 0;
}

static int64_t sl_conc_expires_at(const sl_limit *l, const void *state)
{
    const sl_concurrency_state *s = state;
    if (s->count <= 0 || s->count > l->limit)
        return 0;
    int64_t t = s->leases[s->count - 1].expires;
    return t < 0 ? 0 : t > SL_TIME_MAX ? SL_TIME_MAX : t;
}

static void sl_conc_rebase(void *state, size_t size, int64_t delta_ns)
{
    sl_concurrency_state *s = state;
    if (size < sizeof *s)
        return;
    int64_t cap = (int64_t)((size - sizeof *s) / sizeof(sl_lease));
    if (s->count <= 0 || s->count > cap)
        return;
    for (int64_t i = 0; i < s->count; i++)
        s->leases[i].expires = sl_time_rebase(s->leases[i].expires, delta_ns);
}

/* Another limit's leases: those still live at `now`, when they fit this
 * limit's slots and units; SL_ERR_WRONGTYPE when they do not (the holders
 * keep them until they release or expire: dropping one would admit more
 * than either limit allows). */
static int sl_conc_resize(const void *old, size_t old_size, void *out, size_t out_size,
                          int64_t now)
{
    const sl_concurrency_state *o = old;
    sl_concurrency_state *n = out;
    memset(out, 0, out_size);
    if (old_size < sizeof *o || out_size < sizeof *n)
        return SL_ERR_WRONGTYPE;
    int64_t ocap = (int64_t)((old_size - sizeof *o) / sizeof(sl_lease));
    int64_t ncap = (int64_t)((out_size - sizeof *n) / sizeof(sl_lease));
    int64_t expired, freed;
    if (!sl_conc_scan(o, ocap, now, &expired, &freed))
        return SL_OK; /* never seen */
    int64_t count = o->count - expired, in_flight = o->in_flight - freed;
    if (count > ncap || in_flight > ncap)
        return SL_ERR_WRONGTYPE;
    memcpy(n->leases, o->leases + expired, (size_t)count * sizeof(sl_lease));
    n->count = count;
    n->in_flight = in_flight;
    n->last_id = o->last_id;
    return SL_OK;
}

const sl_algo_ops sl_concurrency_ops = {
    .name = "concurrency",
    .init = sl_conc_init,
    .state_size = sl_conc_state_size,
    .take = sl_conc_take,
    .expires_at = sl_conc_expires_at,
    .rebase = sl_conc_rebase,
    .resize = sl_conc_resize,
};
