/*
 * sync.c: the sync strategy (--store sync+redis://, sync+redis-cluster://).
 * Every take of a rate is decided on this node, against its lease of the
 * key's budget, with no round trip; every interval, each key taken from
 * trades what this node admitted for a new lease with the central (the
 * module's SL.SYNC, or the Lua script's SYNC), through the redis backend
 * that this one wraps (SL_OP_SYNC). The rules are libsluice's
 * (src/algo/quota.h); this file keeps the node's half of each key and
 * drives the trades.
 *
 * The node's states are the process's, shared by its workers (one key's
 * traffic reaches every worker): a table of keys in SY_STRIPES stripes,
 * each under its own mutex. The worker that owns a stripe (stripe index
 * modulo the workers) sends its keys' syncs once an interval, pipelined,
 * the stripes' turns spread over the interval; at most one sync of a key
 * is out at a time, and a take made meanwhile counts in the next one.
 *
 * A key this node holds no live lease for (seen for the first time, or idle
 * past its lease) is synced before its first take: the take waits for the
 * answer, within the request's time budget, so that a node that restarts
 * starts from the fleet's state, not from a fresh burst. While the central
 * is out of reach (a sync failed and none has succeeded since), takes are
 * decided at once on the node's last share (quota.h), and counted as such.
 *
 * What the quota does not lease (windows, the log, concurrency, their
 * resets and leases) passes through to the redis backend: decided in the
 * store, as with redis://. A take of both kinds at once takes the windows
 * in the store first, then the rates here, and gives the windows back when
 * a rate refuses (sy_mix, which states the bound).
 */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <uv.h>

#include "backend/backend.h"
#include "backend/redis.h"
#include "backend/sync.h"
#include "common/arith.h"
#include "common/clock.h"
#include "common/parse.h"
#include "common/siphash.h"

#define SY_STRIPES 64        /* a power of two */
#define SY_SLOTS_MIN 64      /* a stripe's first hash table */
#define SY_POLL_MS 1         /* how often takes waiting on another worker's sync look again */
#define SY_FULL INT_MIN      /* sy_get's: the table holds max_keys keys */
#define SY_CLAIM_MS 1000     /* how often a node claims its id again */
#define SY_CLAIM_TTL_MS 5000 /* how long an id stays a node's that stopped claiming it */
#define SY_REGISTRY "{sluice:sync}:nodes" /* the fleet's registry: one hash, one slot */

/* What a limit's lease depends on: the parameters the central is sent. */
typedef struct sy_params {
    sl_algorithm algorithm;
    uint32_t flags;
    int64_t limit, period_ns, burst;
} sy_params;

/* One key's half of the quota on this node. */
typedef struct sy_entry {
    struct sy_entry *next; /* in its stripe's chain */
    uint64_t hash;
    sy_params limit;       /* the limit it is leased for */
    sl_quota_config cfg;
    sl_quota_node node;
    int64_t used_at;        /* ns: its last take, for eviction */
    int refused;            /* the central's answer to its last sync, when it was an error
                               of the key (WRONGTYPE, a limit it refuses): takes get it */
    char *why;              /* and the central's words for it (NULL: none) */
    bool out;               /* a sync is out */
    bool ready;             /* a sync has answered since the lease was last found ended */
    size_t keylen;
    char key[];
} sy_entry;

typedef struct sy_stripe {
    pthread_mutex_t lock;
    sy_entry **slots;
    size_t cap, n; /* cap a power of two */
} __attribute__((aligned(64))) sy_stripe;

typedef struct sy_backend {
    sl_backend base;
    sl_backend *inner; /* the redis backend: syncs, and what the quota does not lease */
    /* This node's id and the fleet's size: the URL's, or claimed from the
     * fleet's registry in Redis (`claims`), node -1 until one is. */
    _Atomic int node, nodes;
    bool claims;
    char token[33];    /* this process's, in the registry: 32 hex digits */
    int64_t interval_ns;
    int32_t timeout_ms;
    size_t max_keys;
    uint64_t hash_key[2];
    _Atomic int attached;      /* workers, for the stripes' owners */
    _Atomic size_t keys;
    _Atomic bool central_down; /* the last sync answered failed */
    _Atomic uint64_t syncs, sync_failures, waits, unleased;
    sy_stripe stripes[SY_STRIPES];
} sy_backend;

/* A take waiting for its keys' first syncs, with its own copies of the
 * items (submit's are read only during the call). */
typedef struct sy_wait {
    struct sy_wait *next;
    sl_backend_req *r;
    uint64_t deadline_ms;
    sl_take_item items[SL_TAKE_MANY_MAX];
    sl_limit limits[SL_TAKE_MANY_MAX];
    char keys[];
} sy_wait;

struct sl_backend_worker {
    sy_backend *b;
    sl_backend_worker *inner;
    uv_loop_t *loop;
    const int64_t *now;
    int index;
    uv_timer_t tick;  /* the interval's syncs, looked at every millisecond */
    int64_t due[SY_STRIPES]; /* ns: each stripe's next syncs; 0 before the first */
    uv_timer_t poll;  /* waiting takes, while there are any */
    sy_wait *waiting; /* in arrival order */
    size_t inflight;  /* syncs out */
    bool detaching;
    bool inner_gone;  /* the redis backend's handle is detaching: nothing more is sent there */
    int closing;      /* timers whose close has not called back yet */
    char why[256];    /* the errstr of the request being answered: a refused key's words */
    /* The registry's claim (worker 0, when the backend claims its id). */
    uv_timer_t claim_timer;
    sl_backend_req claim_req;
    sl_take_item claim_item;
    sl_claim_call claim;
    bool claim_out;
};

/* One sync out: a request of the redis backend's, and what it answers. */
typedef struct sy_sync {
    sl_backend_req req;
    sl_take_item item;
    sl_limit limit;   /* the entry's parameters, for the redis backend to send */
    sl_sync_call args; /* the report, kept to apply the answer to exactly it */
    int64_t sent_at;  /* ns: when it left */
    sy_stripe *stripe;
    sy_entry *e;
    struct sl_backend_worker *w;
} sy_sync;

/* ---- the table ---- */

static bool sy_leased(sl_algorithm a)
{
    return a == SL_GCRA || a == SL_TOKEN_BUCKET || a == SL_LEAKY_BUCKET;
}

static sy_stripe *sy_stripe_of(sy_backend *b, uint64_t h)
{
    return &b->stripes[(h >> 58) & (SY_STRIPES - 1)];
}

static sy_entry *sy_find(sy_stripe *s, uint64_t h, const char *key, size_t len)
{
    if (!s->slots)
        return NULL;
    for (sy_entry *e = s->slots[h & (s->cap - 1)]; e; e = e->next)
        if (e->hash == h && e->keylen == len && memcmp(e->key, key, len) == 0)
            return e;
    return NULL;
}

static bool sy_grow(sy_stripe *s)
{
    size_t cap = s->cap ? s->cap * 2 : SY_SLOTS_MIN;
    sy_entry **slots = calloc(cap, sizeof *slots);
    if (!slots)
        return false;
    for (size_t i = 0; i < s->cap; i++)
        for (sy_entry *e = s->slots[i], *next; e; e = next) {
            next = e->next;
            e->next = slots[e->hash & (cap - 1)];
            slots[e->hash & (cap - 1)] = e;
        }
    free(s->slots);
    s->slots = slots;
    s->cap = cap;
    return true;
}

static void sy_unlink(sy_backend *b, sy_stripe *s, sy_entry *e)
{
    sy_entry **p = &s->slots[e->hash & (s->cap - 1)];
    while (*p != e)
        p = &(*p)->next;
    *p = e->next;
    s->n--;
    atomic_fetch_sub_explicit(&b->keys, 1, memory_order_relaxed);
    free(e->why);
    free(e);
}

/* Sets the entry's limit (a new entry, or a reload that changed it). The
 * node's lease stays: the central reads its record into the new limit's
 * ranges at the next sync. */
static int sy_configure(const sy_backend *b, sy_entry *e, const sl_limit *l)
{
    sl_limit q = *l;
    if (q.burst <= 0)
        q.burst = q.limit;
    int nodes = atomic_load_explicit(&b->nodes, memory_order_relaxed);
    int rc = sl_quota_config_init(&e->cfg, &q, nodes, b->interval_ns);
    if (rc == SL_OK)
        e->limit = (sy_params){l->algorithm, l->flags, l->limit, l->period_ns, l->burst};
    return rc;
}

static bool sy_same_limit(const sy_params *a, const sl_limit *b)
{
    return a->algorithm == b->algorithm && a->flags == b->flags && a->limit == b->limit &&
           a->period_ns == b->period_ns && a->burst == b->burst;
}

/* The entry of `key` for limit l, made when missing (with the stripe
 * locked). NULL with *rc set: out of memory, the table full, or a limit
 * the quota cannot hold. */
static sy_entry *sy_get(sy_backend *b, sy_stripe *s, uint64_t h, const char *key, size_t len,
                        const sl_limit *l, int64_t now, int *rc)
{
    sy_entry *e = sy_find(s, h, key, len);
    if (e) {
        /* A reload changed its limit, or the fleet's size changed. */
        if ((!sy_same_limit(&e->limit, l) ||
             e->cfg.nodes != atomic_load_explicit(&b->nodes, memory_order_relaxed)) &&
            (*rc = sy_configure(b, e, l)) != SL_OK)
            return NULL;
        return e;
    }
    if (atomic_load_explicit(&b->keys, memory_order_relaxed) >= b->max_keys) {
        *rc = SY_FULL;
        return NULL;
    }
    if ((s->n + 1 > s->cap / 2 * 3 || !s->slots) && !sy_grow(s)) {
        *rc = SL_ERR_NOMEM;
        return NULL;
    }
    e = calloc(1, sizeof *e + len);
    if (!e) {
        *rc = SL_ERR_NOMEM;
        return NULL;
    }
    if ((*rc = sy_configure(b, e, l)) != SL_OK) {
        free(e);
        return NULL;
    }
    e->hash = h;
    e->keylen = len;
    memcpy(e->key, key, len);
    e->used_at = now;
    /* With the central out of reach there is nothing to wait for: the
     * static share decides until a sync answers. */
    e->ready = atomic_load_explicit(&b->central_down, memory_order_relaxed) ||
               atomic_load_explicit(&b->node, memory_order_relaxed) < 0;
    e->next = s->slots[h & (s->cap - 1)];
    s->slots[h & (s->cap - 1)] = e;
    s->n++;
    atomic_fetch_add_explicit(&b->keys, 1, memory_order_relaxed);
    return e;
}

static uint64_t sy_hash(const sy_backend *b, const void *key, size_t len)
{
    return sl_siphash(b->hash_key, key, len);
}

/* ---- syncs ---- */

static void sy_poll(uv_timer_t *t);

/* Prepares a sync of e (its stripe locked): the report is taken now and
 * kept, so that the answer is applied to exactly what was reported. NULL
 * when out of memory (the key syncs at the next interval). */
static sy_sync *sy_sync_prepare(sl_backend_worker *w, sy_stripe *s, sy_entry *e, int64_t now,
                                int64_t want)
{
    const sy_backend *b = w->b;
    int id = atomic_load_explicit(&b->node, memory_order_relaxed);
    if (id < 0 || id >= e->cfg.nodes)
        return NULL; /* no id yet (or one beyond the size it was configured for) */
    sy_sync *y = calloc(1, sizeof *y);
    if (!y)
        return NULL;
    y->args = (sl_sync_call){.nodes = e->cfg.nodes, .interval_ns = b->interval_ns};
    sl_quota_report_of(&e->cfg, &e->node, id, now, &y->args.report);
    /* A take waiting for this sync is demand the central should know of:
     * it then leases at least that unit when one is free. */
    if (want > 0 && want <= e->cfg.burst_units)
        y->args.report.asked = sl_min64(y->args.report.asked + want, SL_QUOTA_UNITS_MAX);
    y->sent_at = now;
    e->out = true;
    /* The redis backend reads the algorithm, flags, limit, period and burst. */
    y->limit.algorithm = e->limit.algorithm;
    y->limit.flags = e->limit.flags;
    y->limit.limit = e->limit.limit;
    y->limit.period_ns = e->limit.period_ns;
    y->limit.burst = e->limit.burst;
    y->item = (sl_take_item){e->key, e->keylen, &y->limit, 0};
    y->req = (sl_backend_req){.op = SL_OP_SYNC, .n = 1, .items = &y->item, .sync = &y->args,
                              .timeout_ms = b->timeout_ms, .owner = y};
    y->stripe = s;
    y->e = e;
    y->w = w;
    return y;
}

static void sy_sync_done(sl_backend_req *r)
{
    sy_sync *y = r->owner;
    sl_backend_worker *w = y->w;
    sy_backend *b = w->b;
    sy_entry *e = y->e;
    bool ok = r->rc == SL_OK;
    pthread_mutex_lock(&y->stripe->lock);
    if (ok) {
        sl_quota_apply(&e->cfg, &e->node, sl_now_mono(), y->sent_at, &y->args.report,
                       &y->args.grant);
        e->refused = SL_OK;
    } else if (r->rc != SL_ERR_UNAVAILABLE) {
        /* The central refused the key itself (it holds something else, or
         * a limit it cannot take): its takes are answered so, in its
         * words. */
        e->refused = r->rc;
        free(e->why);
        e->why = r->errstr ? strdup(r->errstr) : NULL;
    }
    /* Counts a failed sync reported are still the node's: the next
     * interval reports them again (sl_quota_due). */
    e->ready = true;
    e->out = false;
    pthread_mutex_unlock(&y->stripe->lock);
    if (r->rc == SL_ERR_UNAVAILABLE) {
        atomic_fetch_add_explicit(&b->sync_failures, 1, memory_order_relaxed);
        atomic_store_explicit(&b->central_down, true, memory_order_relaxed);
    } else {
        atomic_fetch_add_explicit(&b->syncs, 1, memory_order_relaxed);
        atomic_store_explicit(&b->central_down, false, memory_order_relaxed);
    }
    w->inflight--;
    free(y);
    /* The waiting takes are looked at once the loop has run every callback
     * of this turn (many syncs answer in one read), not once per answer. */
    if (!w->detaching && w->waiting)
        uv_timer_start(&w->poll, sy_poll, 0, SY_POLL_MS);
}

/* Hands prepared syncs to the redis backend (no stripe locked: an answer
 * in the call locks it). */
static void sy_sync_send(sl_backend_worker *w, sy_sync *const *ys, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        sy_sync *y = ys[i];
        w->inflight++;
        y->req.done = sy_sync_done;
        if (w->b->inner->ops->submit(w->inner, &y->req) != SL_PENDING)
            sy_sync_done(&y->req);
    }
}

/* ---- decisions ---- */

/* Answers r with sy_get's refusal: SY_FULL is the table at max_keys,
 * told as such (an out-of-memory error with its words). */
static void sy_refuse(sl_backend_worker *w, sl_backend_req *r, int rc)
{
    r->failed = -1;
    if (rc == SY_FULL) {
        snprintf(w->why, sizeof w->why,
                 "this node holds a lease of max_keys (%zu) keys already: a new key is refused "
                 "until idle ones are forgotten (raise max_keys in the --store URL)",
                 w->b->max_keys);
        r->errstr = w->why;
        rc = SL_ERR_NOMEM;
    }
    r->rc = rc;
}

/* The decision of a take of `cost` on e at now, admitted or not. */
static void sy_fill(const sy_entry *e, int64_t now, int64_t cost, bool ok, sl_decision *d)
{
    const sl_quota_config *c = &e->cfg;
    int64_t cap = c->burst_units;
    int64_t tokens = sl_quota_node_tokens(c, &e->node, now);
    int64_t left = sl_min64(tokens / SL_QUOTA_SCALE, cap);
    int64_t retry = 0;
    if (!ok && (cost > cap || cost < 0)) {
        retry = SL_NEVER;
    } else if (!ok) {
        /* At this node's rate when its lease lasts that long; else at the
         * next sync, which brings a new lease. */
        int64_t deficit = cost * SL_QUOTA_SCALE - tokens;
        retry = c->interval_ns;
        if (e->node.rate > 0) {
            int64_t t = sl_muldiv_ceil(deficit, c->period_ns, e->node.rate);
            if (e->node.mode != 2 || t <= e->node.lease_end - now)
                retry = sl_min64(t, SL_SPAN_MAX);
        }
    }
    /* Until what this node sees used comes back at the fleet's rate. */
    int64_t reset = sl_min64(sl_muldiv_ceil(cap - left, c->period_ns, c->rate / SL_QUOTA_SCALE),
                             SL_SPAN_MAX);
    *d = (sl_decision){
        .allowed = ok,
        .limit = cap,
        .remaining = left,
        .retry_after_ns = retry,
        .reset_after_ns = reset,
    };
}

/* Would a take of `cost` on e be admitted at now (nothing taken)? */
static bool sy_admits(const sy_entry *e, int64_t now, int64_t cost)
{
    return cost <= e->cfg.burst_units && cost >= 0 &&
           sl_quota_node_tokens(&e->cfg, &e->node, now) >= cost * SL_QUOTA_SCALE;
}

/*
 * Decides r's items (every one leased) at now, or starts the syncs it must
 * wait for. Returns SL_OK when r is answered, SL_PENDING when it waits:
 * some key holds no live lease and the central is thought reachable (with
 * `force`, it never waits: the budget ran out). Takes are made in order
 * and the earlier given back when a later one refuses, so that none is
 * consumed unless all are.
 */
static int sy_decide(sl_backend_worker *w, sl_backend_req *r, int64_t now, bool force)
{
    sy_backend *b = w->b;
    sy_sync *ys[SL_TAKE_MANY_MAX] = {NULL};
    size_t nys = 0;
    bool wait = false;
    uint64_t hs[SL_TAKE_MANY_MAX];
    /* With no id yet there is no one to trade as: as if the central were
     * out of reach. */
    bool down = atomic_load_explicit(&b->central_down, memory_order_relaxed) ||
                atomic_load_explicit(&b->node, memory_order_relaxed) < 0;

    /* First: every key has a live lease, or a sync on the way. */
    for (size_t i = 0; i < r->n; i++) {
        const sl_take_item *it = &r->items[i];
        hs[i] = sy_hash(b, it->key, it->keylen);
        sy_stripe *s = sy_stripe_of(b, hs[i]);
        int rc = SL_OK;
        pthread_mutex_lock(&s->lock);
        sy_entry *e = sy_get(b, s, hs[i], it->key, it->keylen, it->limit, now, &rc);
        if (e && e->ready && !down && sl_quota_unleased(&e->node, now))
            e->ready = false; /* idle past its lease, or the central back: its state first */
        if (e && !e->ready && !force) {
            wait = true;
            if (!e->out && (ys[nys] = sy_sync_prepare(w, s, e, now, it->cost)))
                nys++;
        }
        pthread_mutex_unlock(&s->lock);
        if (rc != SL_OK) {
            sy_sync_send(w, ys, nys);
            sy_refuse(w, r, rc);
            return SL_OK;
        }
    }
    sy_sync_send(w, ys, nys);
    if (wait)
        return SL_PENDING;

    /* Then the takes. */
    bool take = r->op == SL_OP_TAKE;
    r->rc = SL_OK;
    r->failed = -1;
    size_t k = 0;
    for (; k < r->n; k++) {
        const sl_take_item *it = &r->items[k];
        sy_stripe *s = sy_stripe_of(b, hs[k]);
        pthread_mutex_lock(&s->lock);
        int rc = SL_OK;
        sy_entry *e = sy_get(b, s, hs[k], it->key, it->keylen, it->limit, now, &rc);
        if (e && e->refused != SL_OK) {
            rc = e->refused;
            if (e->why) {
                snprintf(w->why, sizeof w->why, "%s", e->why);
                r->errstr = w->why;
                r->errstr_is_reply = rc == SL_ERR_WRONGTYPE;
            }
        }
        if (rc != SL_OK) {
            pthread_mutex_unlock(&s->lock);
            sy_refuse(w, r, rc);
            break;
        }
        if (sl_quota_unleased(&e->node, now))
            atomic_fetch_add_explicit(&b->unleased, 1, memory_order_relaxed);
        bool ok;
        if (take) {
            ok = sl_quota_take(&e->cfg, &e->node, now, it->cost);
            e->used_at = now;
        } else {
            ok = sy_admits(e, now, it->cost);
        }
        sy_fill(e, now, it->cost, ok, &r->d[k]);
        pthread_mutex_unlock(&s->lock);
        if (!ok && r->failed < 0) {
            r->failed = (int)k;
            if (take)
                break;
        }
    }
    if (take && (r->failed >= 0 || r->rc != SL_OK)) {
        /* Give back what was taken before the refusal. */
        for (size_t j = 0; j < k; j++) {
            const sl_take_item *it = &r->items[j];
            sy_stripe *s = sy_stripe_of(b, hs[j]);
            pthread_mutex_lock(&s->lock);
            sy_entry *e = sy_find(s, hs[j], it->key, it->keylen);
            if (e) {
                sl_quota_give_back(&e->node, it->cost);
                sy_fill(e, now, it->cost, true, &r->d[j]);
            }
            pthread_mutex_unlock(&s->lock);
        }
        /* And the items after it say what each would answer now, a peek of
         * its cost alone, as a store's take of many does. */
        for (size_t j = k + 1; r->rc == SL_OK && j < r->n; j++) {
            const sl_take_item *it = &r->items[j];
            sy_stripe *s = sy_stripe_of(b, hs[j]);
            pthread_mutex_lock(&s->lock);
            const sy_entry *e = sy_find(s, hs[j], it->key, it->keylen);
            if (e)
                sy_fill(e, now, it->cost, sy_admits(e, now, it->cost), &r->d[j]);
            else
                r->d[j] = (sl_decision){.allowed = false, .retry_after_ns = b->interval_ns};
            pthread_mutex_unlock(&s->lock);
        }
    }
    return SL_OK;
}

/* Copies r's items for the wait (NULL when out of memory). */
static sy_wait *sy_wait_new(sl_backend_worker *w, sl_backend_req *r)
{
    size_t bytes = 0;
    for (size_t i = 0; i < r->n; i++)
        bytes += r->items[i].keylen;
    sy_wait *q = malloc(sizeof *q + bytes);
    if (!q)
        return NULL;
    char *k = q->keys;
    for (size_t i = 0; i < r->n; i++) {
        q->limits[i] = *r->items[i].limit;
        memcpy(k, r->items[i].key, r->items[i].keylen);
        q->items[i] = (sl_take_item){k, r->items[i].keylen, &q->limits[i], r->items[i].cost};
        k += r->items[i].keylen;
    }
    int32_t budget = r->timeout_ms > 0 ? r->timeout_ms : w->b->timeout_ms;
    q->deadline_ms = uv_now(w->loop) + (uint64_t)budget;
    q->r = r;
    q->next = NULL;
    return q;
}

/* Decides the waiting takes that can be (all of their keys answered, or
 * their budget spent), in order: a take that still waits does not hold
 * back the ones behind it, which are of other keys or would wait as long. */
static void sy_run_waiting(sl_backend_worker *w)
{
    uint64_t nowms = uv_now(w->loop);
    int64_t now = sl_now_mono();
    sy_wait **p = &w->waiting;
    while (*p) {
        sy_wait *q = *p;
        bool expired = nowms >= q->deadline_ms;
        sl_backend_req *r = q->r;
        const sl_take_item *mine = r->items;
        r->items = q->items;
        int rc = sy_decide(w, r, now, expired);
        r->items = mine;
        if (rc == SL_PENDING) {
            p = &q->next;
            continue;
        }
        *p = q->next;
        free(q);
        r->by = SL_DECIDED_BY_STORE;
        r->done(r);
    }
    if (!w->waiting)
        uv_timer_stop(&w->poll);
}

/* A sync answered on this worker, or may have on another: look again. */
static void sy_poll(uv_timer_t *t)
{
    sy_run_waiting(t->data);
}

/* ---- the interval ---- */

/* Syncs the keys of stripe si whose sync is due (sl_quota_due: taken
 * from since their last sync, or that sync reported a demand to give
 * back), and forgets those idle past their lease (nothing counted is lost:
 * a key whose sync is not due holds no count). In batches, the stripe
 * unlocked between them so that takes go on. */
static void sy_sync_stripe(sl_backend_worker *w, int si, int64_t now)
{
    sy_backend *b = w->b;
    enum { BATCH = 256 };
    sy_sync *ys[BATCH];
    sy_stripe *s = &b->stripes[si];
    size_t slot = 0;
    for (;;) {
        size_t n = 0;
        pthread_mutex_lock(&s->lock);
        for (; slot < s->cap && n < BATCH; slot++) {
            for (sy_entry *e = s->slots[slot], *next; e; e = next) {
                next = e->next;
                if (e->out)
                    continue;
                if (sl_quota_due(&e->node)) {
                    if ((ys[n] = sy_sync_prepare(w, s, e, now, 0)))
                        n++;
                } else if (now - e->used_at > e->cfg.lease_ns + e->cfg.interval_ns) {
                    sy_unlink(b, s, e);
                }
            }
        }
        bool more = slot < s->cap;
        pthread_mutex_unlock(&s->lock);
        sy_sync_send(w, ys, n);
        if (!more)
            break;
    }
}

/* Every millisecond: the stripes of this worker (stripe index modulo the
 * workers) whose time has come, each once an interval, their times spread
 * over the interval by index, so that a worker's syncs go out a few at a
 * time rather than all at once, and no take waits behind all of them. */
static void sy_tick(uv_timer_t *t)
{
    sl_backend_worker *w = t->data;
    sy_backend *b = w->b;
    int workers = atomic_load_explicit(&b->attached, memory_order_relaxed);
    if (workers < 1)
        workers = 1;
    int64_t now = sl_now_mono();
    for (int si = 0; si < SY_STRIPES; si++) {
        if (si % workers != w->index % workers)
            continue;
        if (w->due[si] == 0)
            w->due[si] = now + b->interval_ns / SY_STRIPES * si;
        if (now < w->due[si])
            continue;
        sy_sync_stripe(w, si, now);
        w->due[si] += b->interval_ns;
        if (w->due[si] <= now) /* the loop was held up: from now on */
            w->due[si] = now + b->interval_ns;
    }
}

/* ---- the fleet's registry ---- */

/* Without node= and nodes= in the URL, worker 0 claims this node's id in
 * the fleet's registry (a hash in Redis, the script's CLAIM) at start and
 * every SY_CLAIM_MS, for SY_CLAIM_TTL_MS: an id whose node stopped
 * claiming it is free again after that, and the fleet's size is 1 + the
 * highest id held. Until the first claim is answered the node decides as
 * with the central out of reach, at the static share of 16 nodes. */
static void sy_claim_done(sl_backend_req *r)
{
    sl_backend_worker *w = r->owner;
    sy_backend *b = w->b;
    w->claim_out = false;
    if (r->rc != SL_OK)
        return; /* kept as it was: the next claim asks again */
    int id = w->claim.id;
    int nodes = w->claim.nodes > id ? w->claim.nodes : id + 1;
    if (nodes < 1)
        nodes = SL_QUOTA_NODES_MAX; /* every id taken, this node without one */
    atomic_store_explicit(&b->nodes, nodes, memory_order_relaxed);
    atomic_store_explicit(&b->node, id, memory_order_relaxed);
}

static void sy_claim(uv_timer_t *t)
{
    sl_backend_worker *w = t->data;
    if (w->claim_out || w->detaching)
        return;
    w->claim = (sl_claim_call){.token = w->b->token, .ttl_ms = SY_CLAIM_TTL_MS};
    w->claim_item = (sl_take_item){SY_REGISTRY, sizeof SY_REGISTRY - 1, NULL, 0};
    w->claim_req = (sl_backend_req){.op = SL_OP_CLAIM, .n = 1, .items = &w->claim_item,
                                    .claim = &w->claim, .timeout_ms = w->b->timeout_ms,
                                    .done = sy_claim_done, .owner = w};
    w->claim_out = true;
    if (w->b->inner->ops->submit(w->inner, &w->claim_req) != SL_PENDING)
        sy_claim_done(&w->claim_req);
}

/* ---- the backend's ops ---- */

static sl_backend_worker *sy_attach(sl_backend *base, uv_loop_t *loop, const int64_t *now,
                                    const char **err)
{
    sy_backend *b = (sy_backend *)base;
    sl_backend_worker *w = calloc(1, sizeof *w);
    if (!w) {
        *err = "out of memory";
        return NULL;
    }
    w->b = b;
    w->loop = loop;
    w->now = now;
    if (!(w->inner = b->inner->ops->attach(b->inner, loop, now, err))) {
        free(w);
        return NULL;
    }
    w->index = atomic_fetch_add(&b->attached, 1);
    uv_timer_init(loop, &w->tick);
    uv_timer_init(loop, &w->poll);
    uv_timer_init(loop, &w->claim_timer);
    w->tick.data = w->poll.data = w->claim_timer.data = w;
    uv_timer_start(&w->tick, sy_tick, 1, 1);
    if (b->claims && w->index == 0)
        uv_timer_start(&w->claim_timer, sy_claim, 0, SY_CLAIM_MS);
    return w;
}

static void sy_timer_closed(uv_handle_t *h)
{
    sl_backend_worker *w = h->data;
    if (--w->closing == 0)
        free(w);
}

static void sy_detach(sl_backend_worker *w)
{
    w->detaching = true;
    /* Every take waiting is answered now, on what the node holds. */
    while (w->waiting) {
        sy_wait *q = w->waiting;
        w->waiting = q->next;
        sl_backend_req *r = q->r;
        const sl_take_item *mine = r->items;
        r->items = q->items;
        sy_decide(w, r, sl_now_mono(), true);
        r->items = mine;
        free(q);
        r->done(r);
    }
    /* Syncs out are answered by the redis backend's detach, and so are the
     * windows of takes of both kinds (sy_mix), whose rates are then
     * decided at once. */
    w->inner_gone = true;
    w->b->inner->ops->detach(w->inner);
    atomic_fetch_sub(&w->b->attached, 1);
    w->closing = 3;
    uv_close((uv_handle_t *)&w->tick, sy_timer_closed);
    uv_close((uv_handle_t *)&w->poll, sy_timer_closed);
    uv_close((uv_handle_t *)&w->claim_timer, sy_timer_closed);
}

/* What the quota leases: 1 for takes and peeks whose every item is a rate,
 * 0 for those with none (and every other op), -1 for both kinds (sy_mix). */
static int sy_kind(const sl_backend_req *r)
{
    if ((r->op != SL_OP_TAKE && r->op != SL_OP_PEEK) || !r->items || r->n == 0)
        return 0;
    size_t leased = 0;
    for (size_t i = 0; i < r->n; i++)
        if (r->items[i].limit && sy_leased(r->items[i].limit->algorithm))
            leased++;
    return leased == 0 ? 0 : leased == r->n ? 1 : -1;
}

/* Forgets this node's half of the keys (their central records go with
 * the reset in the store). A key with a sync out keeps its entry, zeroed. */
static void sy_forget(sy_backend *b, const sl_backend_req *r)
{
    for (size_t i = 0; i < r->n; i++) {
        const sl_take_item *it = &r->items[i];
        if (!it->key)
            continue;
        uint64_t h = sy_hash(b, it->key, it->keylen);
        sy_stripe *s = sy_stripe_of(b, h);
        pthread_mutex_lock(&s->lock);
        sy_entry *e = sy_find(s, h, it->key, it->keylen);
        if (e && !e->out) {
            sy_unlink(b, s, e);
        } else if (e) {
            memset(&e->node, 0, sizeof e->node);
            e->ready = false;
        }
        pthread_mutex_unlock(&s->lock);
    }
}

/* A refund of a take this node made and has not reported yet is given back
 * here; one already reported is the central's, and not given back (0). */
static int sy_refund(sl_backend_worker *w, sl_backend_req *r)
{
    const sl_take_item *it = &r->items[0];
    uint64_t h = sy_hash(w->b, it->key, it->keylen);
    sy_stripe *s = sy_stripe_of(w->b, h);
    pthread_mutex_lock(&s->lock);
    sy_entry *e = sy_find(s, h, it->key, it->keylen);
    r->count = 0;
    if (e && it->cost > 0 && it->cost <= e->node.admitted) {
        sl_quota_give_back(&e->node, it->cost);
        r->count = it->cost;
    }
    pthread_mutex_unlock(&s->lock);
    r->rc = SL_OK;
    r->by = SL_DECIDED_BY_STORE;
    return SL_OK;
}

/* Decides r, a take or peek of rates alone, at now: in the call when every
 * key holds a live lease (or the central is out of reach), else after the
 * keys' first trades (SL_PENDING, done() later). A stopping worker decides
 * at once on what it holds. */
static int sy_rates_submit(sl_backend_worker *w, sl_backend_req *r, int64_t now)
{
    if (w->detaching)
        return sy_decide(w, r, now, true);
    /* Twice: a sync the redis backend answered in the call (the central
     * known to be down) leaves nothing to wait for. */
    if (sy_decide(w, r, now, false) == SL_OK || sy_decide(w, r, now, false) == SL_OK)
        return SL_OK;
    atomic_fetch_add_explicit(&w->b->waits, 1, memory_order_relaxed);
    sy_wait *q = sy_wait_new(w, r);
    if (!q)
        return sy_decide(w, r, now, true);
    sy_wait **p = &w->waiting;
    while (*p)
        p = &(*p)->next;
    *p = q;
    if (!uv_is_active((uv_handle_t *)&w->poll))
        uv_timer_start(&w->poll, sy_poll, SY_POLL_MS, SY_POLL_MS);
    return SL_PENDING;
}

/* ---- takes of rates and windows at once ---- */

/*
 * A take of both kinds (requests a minute beside a monthly quota), all or
 * nothing as any take of several limits:
 *
 *   1. the windows (what the quota does not lease) are decided in the
 *      central, as one take of theirs through the redis backend, which
 *      answers later;
 *   2. when they admit, the rates are decided on this node's leases, as a
 *      take of rates alone is (waiting for a key's first trade, if need be);
 *      when they refuse, the rates are peeked, never taken;
 *   3. when a rate refuses (or fails), each window item is given back with
 *      SL_OP_REFUND, as the redis backend gives back the keys of a take
 *      made slot by slot, and the answer is the rate's refusal.
 *
 * A peek of both kinds peeks each part, and gives nothing back. The
 * decisions are the request's, in its order; `failed` is the first item
 * refused. Each part has the request's time budget.
 *
 * The bound: while a give-back is on its way, a concurrent take may find
 * the window's units gone (stricter for that moment, never looser). A
 * give-back the central does not take (it went out of reach between the
 * two steps, the give-back timed out, the node ran out of memory, or the
 * worker was stopping) leaves the units taken: the window counts a request
 * that was refused, its cost at most, until the window ends. Nothing is
 * admitted beyond a limit, but for what --on-store-error answers for the
 * windows while the store is down (fail_open admits them uncounted).
 */
typedef struct sy_mix {
    sl_backend_worker *w;
    sl_backend_req *parent;
    sl_backend_req win, rate; /* the two parts */
    size_t nw, nr;
    uint8_t win_at[SL_TAKE_MANY_MAX]; /* each part's items' places in the request */
    uint8_t rate_at[SL_TAKE_MANY_MAX];
    sl_take_item win_items[SL_TAKE_MANY_MAX], rate_items[SL_TAKE_MANY_MAX];
    sl_limit limits[SL_TAKE_MANY_MAX]; /* in the request's order */
    sl_decision win_d[SL_TAKE_MANY_MAX], rate_d[SL_TAKE_MANY_MAX];
    char keys[]; /* the items' keys, copied: the caller's are gone after submit */
} sy_mix;

/* A give-back in flight: its own copy of what it gives back. */
typedef struct sy_giveback {
    sl_backend_req req;
    sl_take_item item;
    sl_limit limit;
    sl_decision d;
    char key[];
} sy_giveback;

static void sy_giveback_done(sl_backend_req *r)
{
    free(r->owner);
}

/* Gives a window's take of it back in the central, on the request's
 * store-down policy and budget. Not answered to anyone: one that fails
 * leaves the units taken (sy_mix's bound). */
static void sy_give_back(sl_backend_worker *w, const sl_backend_req *p, const sl_take_item *it)
{
    if (w->inner_gone || it->cost <= 0)
        return;
    sy_giveback *g = malloc(sizeof *g + it->keylen);
    if (!g)
        return;
    memcpy(g->key, it->key, it->keylen);
    g->limit = *it->limit;
    g->item = (sl_take_item){g->key, it->keylen, &g->limit, it->cost};
    g->req = (sl_backend_req){
        .op = SL_OP_REFUND,
        .n = 1,
        .items = &g->item,
        .on_error = p->on_error,
        .timeout_ms = p->timeout_ms,
        .d = &g->d,
        .done = sy_giveback_done,
        .owner = g,
    };
    if (w->b->inner->ops->submit(w->inner, &g->req) != SL_PENDING)
        sy_giveback_done(&g->req);
}

/* Both parts are in: the answer, in the request's order. Frees m. */
static void sy_mix_finish(sy_mix *m)
{
    sl_backend_req *p = m->parent, *win = &m->win, *rate = &m->rate;
    bool taken = p->op == SL_OP_TAKE && win->failed < 0;
    if (rate->rc != SL_OK) {
        p->rc = rate->rc;
        p->errstr = rate->errstr; /* the worker's words (w->why), valid until done() */
        p->errstr_is_reply = rate->errstr_is_reply;
    }
    if (taken && (rate->rc != SL_OK || rate->failed >= 0))
        for (size_t i = 0; i < m->nw; i++) {
            sy_give_back(m->w, p, &m->win_items[i]);
            /* What the window answers once it has its units back. */
            sl_decision *d = &m->win_d[i];
            if (d->remaining >= 0 && d->remaining <= d->limit)
                d->remaining = sl_add_clamp(d->remaining, m->win_items[i].cost, d->limit);
        }
    for (size_t i = 0; i < m->nw; i++)
        p->d[m->win_at[i]] = m->win_d[i];
    for (size_t i = 0; i < m->nr; i++)
        p->d[m->rate_at[i]] = m->rate_d[i];
    p->failed = -1;
    if (p->rc == SL_OK && (win->failed >= 0 || rate->failed >= 0)) {
        /* The first refused; the part's own index when no decision says so. */
        p->failed = win->failed >= 0 ? m->win_at[win->failed] : m->rate_at[rate->failed];
        for (size_t k = 0; k < p->n; k++)
            if (!p->d[k].allowed) {
                p->failed = (int)k;
                break;
            }
    }
    free(m);
}

static void sy_mix_rates_done(sl_backend_req *part)
{
    sy_mix *m = part->owner;
    sl_backend_req *p = m->parent;
    sy_mix_finish(m);
    p->done(p);
}

/* The windows' answer is in (at now): an error ends the request, else the
 * rates are decided (taken when the windows were, else peeked). SL_OK when
 * r is answered (m freed), SL_PENDING when the rates wait. */
static int sy_mix_windows_in(sy_mix *m, int64_t now)
{
    sl_backend_req *p = m->parent, *win = &m->win;
    sl_backend_worker *w = m->w;
    if (win->by != SL_DECIDED_BY_STORE)
        p->by = win->by;
    if (win->rc != SL_OK) {
        p->rc = win->rc;
        p->failed = -1;
        if (win->errstr) {
            /* The part's words live until its done() returns: copied. */
            snprintf(w->why, sizeof w->why, "%s", win->errstr);
            p->errstr = w->why;
            p->errstr_is_reply = win->errstr_is_reply;
        }
        free(m);
        return SL_OK;
    }
    bool take = p->op == SL_OP_TAKE && win->failed < 0;
    m->rate = (sl_backend_req){
        .op = take ? SL_OP_TAKE : SL_OP_PEEK,
        .n = m->nr,
        .items = m->rate_items,
        .on_error = p->on_error,
        .timeout_ms = p->timeout_ms,
        .d = m->rate_d,
        .done = sy_mix_rates_done,
        .owner = m,
    };
    if (sy_rates_submit(w, &m->rate, now) == SL_PENDING)
        return SL_PENDING;
    sy_mix_finish(m);
    return SL_OK;
}

static void sy_mix_windows_done(sl_backend_req *part)
{
    sy_mix *m = part->owner;
    sl_backend_req *p = m->parent;
    if (sy_mix_windows_in(m, sl_now_mono()) != SL_PENDING)
        p->done(p);
}

/* Starts r, a take or peek of both kinds (sy_kind -1), its items checked. */
static int sy_mix_submit(sl_backend_worker *w, sl_backend_req *r)
{
    size_t bytes = 0;
    for (size_t i = 0; i < r->n; i++)
        bytes += r->items[i].keylen;
    sy_mix *m = calloc(1, sizeof *m + bytes);
    if (!m) {
        r->rc = SL_ERR_NOMEM;
        r->failed = -1;
        return SL_OK;
    }
    m->w = w;
    m->parent = r;
    m->nw = m->nr = 0;
    char *k = m->keys;
    for (size_t i = 0; i < r->n; i++) {
        const sl_take_item *it = &r->items[i];
        m->limits[i] = *it->limit;
        memcpy(k, it->key, it->keylen);
        sl_take_item copy = {k, it->keylen, &m->limits[i], it->cost};
        k += it->keylen;
        if (sy_leased(it->limit->algorithm)) {
            m->rate_at[m->nr] = (uint8_t)i;
            m->rate_items[m->nr++] = copy;
        } else {
            m->win_at[m->nw] = (uint8_t)i;
            m->win_items[m->nw++] = copy;
        }
    }
    r->rc = SL_OK;
    r->failed = -1;
    m->win = (sl_backend_req){
        .op = r->op,
        .n = m->nw,
        .items = m->win_items,
        .on_error = r->on_error,
        .timeout_ms = r->timeout_ms,
        .d = m->win_d,
        .done = sy_mix_windows_done,
        .owner = m,
    };
    if (w->b->inner->ops->submit(w->inner, &m->win) == SL_PENDING)
        return SL_PENDING;
    return sy_mix_windows_in(m, *w->now);
}

static int sy_submit(sl_backend_worker *w, sl_backend_req *r)
{
    r->errstr = NULL;
    r->errstr_is_reply = false;
    r->by = SL_DECIDED_BY_STORE;
    int kind = sy_kind(r);
    if (r->op == SL_OP_REFUND && r->n == 1 && r->items && r->items[0].limit &&
        sy_leased(r->items[0].limit->algorithm))
        return sy_refund(w, r);
    /* A rate limit's debt would be the central's, which leases its budget
     * out ahead: a node cannot owe it exactly, so a charge is refused
     * rather than half made. A window's passes to the central as it is. */
    if (r->op == SL_OP_CHARGE && r->n == 1 && r->items && r->items[0].limit &&
        sy_leased(r->items[0].limit->algorithm)) {
        r->rc = SL_ERR_UNSUPPORTED;
        r->failed = -1;
        r->errstr = "a charge of a rate limit leased by sync (its budget is leased out "
                    "ahead, so no node can owe it exactly)";
        return SL_OK;
    }
    if (kind == 0) {
        if (r->op == SL_OP_RESET && r->items)
            sy_forget(w->b, r);
        return w->b->inner->ops->submit(w->inner, r);
    }
    if (r->n > SL_TAKE_MANY_MAX || !r->d) {
        r->rc = SL_ERR_ARGUMENT;
        r->failed = -1;
        return SL_OK;
    }
    for (size_t i = 0; i < r->n; i++) {
        if (!r->items[i].limit) {
            r->rc = SL_ERR_ARGUMENT;
            r->failed = -1;
            return SL_OK;
        }
        if (!r->items[i].key || r->items[i].keylen == 0) {
            r->rc = SL_ERR_KEY;
            r->failed = -1;
            return SL_OK;
        }
    }
    if (kind < 0)
        return sy_mix_submit(w, r);
    return sy_rates_submit(w, r, *w->now);
}

static void sy_stats(sl_backend *base, sl_backend_stats *out)
{
    sy_backend *b = (sy_backend *)base;
    if (b->inner->ops->stats)
        b->inner->ops->stats(b->inner, out);
    out->sync = true;
    out->sync_node = atomic_load_explicit(&b->node, memory_order_relaxed);
    out->sync_nodes = atomic_load_explicit(&b->nodes, memory_order_relaxed);
    out->sync_interval_ns = b->interval_ns;
    out->sync_central_down = atomic_load_explicit(&b->central_down, memory_order_relaxed);
    out->sync_keys = atomic_load_explicit(&b->keys, memory_order_relaxed);
    out->syncs = atomic_load_explicit(&b->syncs, memory_order_relaxed);
    out->sync_failures = atomic_load_explicit(&b->sync_failures, memory_order_relaxed);
    out->sync_waits = atomic_load_explicit(&b->waits, memory_order_relaxed);
    out->sync_unleased = atomic_load_explicit(&b->unleased, memory_order_relaxed);
}

static void sy_free(sl_backend *base)
{
    sy_backend *b = (sy_backend *)base;
    for (int i = 0; i < SY_STRIPES; i++) {
        sy_stripe *s = &b->stripes[i];
        for (size_t j = 0; j < s->cap; j++)
            for (sy_entry *e = s->slots[j], *next; e; e = next) {
                next = e->next;
                free(e->why);
                free(e);
            }
        free(s->slots);
        pthread_mutex_destroy(&s->lock);
    }
    b->inner->ops->free(b->inner);
    free(b);
}

static const sl_backend_ops sy_ops = {
    .name = "sync",
    .attach = sy_attach,
    .detach = sy_detach,
    .submit = sy_submit,
    .stats = sy_stats,
    .free = sy_free,
};

/* ---- the URL ---- */

/* Reads sync's own parameters out of the query of url (after "sync+"),
 * writing the URL without them into inner (n bytes, as long as url). */
static int sy_parse(sy_backend *b, const char *url, char *inner, char *err, size_t n)
{
    enum { P_INTERVAL, P_NODE, P_NODES, P_KEYS, P_COUNT };
    static const struct {
        const char *name;
        int64_t lo, hi;
    } params[P_COUNT] = {
        [P_INTERVAL] = {"interval_ms", 1, SL_SYNC_INTERVAL_MS_MAX},
        [P_NODE] = {"node", 0, SL_QUOTA_NODES_MAX - 1},
        [P_NODES] = {"nodes", 1, SL_QUOTA_NODES_MAX},
        [P_KEYS] = {"max_keys", 1, SL_SYNC_MAX_KEYS_MAX},
    };
    int64_t val[P_COUNT] = {[P_INTERVAL] = SL_SYNC_INTERVAL_MS_DEFAULT,
                            [P_KEYS] = SL_SYNC_MAX_KEYS_DEFAULT};
    bool seen[P_COUNT] = {false};
    const char *q = strchr(url, '?');
    size_t head = q ? (size_t)(q - url) : strlen(url);
    memcpy(inner, url, head);
    char *o = inner + head;
    char sep = '?';
    while (q && *q) {
        q++; /* '?' or '&' */
        size_t plen = strcspn(q, "&");
        const char *eq = memchr(q, '=', plen);
        size_t klen = eq ? (size_t)(eq - q) : plen;
        int i = 0;
        while (i < P_COUNT &&
               !(strlen(params[i].name) == klen && memcmp(params[i].name, q, klen) == 0))
            i++;
        if (i == P_COUNT) {
            /* Not sync's: the redis backend's (password, user), kept. */
            *o++ = sep;
            memcpy(o, q, plen);
            o += plen;
            sep = '&';
        } else if (!eq || !sl_parse_i64(eq + 1, plen - klen - 1, SL_INT_NO_SIGN, &val[i]) ||
                   val[i] < params[i].lo || val[i] > params[i].hi) {
            snprintf(err, n, "ERR invalid --store URL: %s must be an integer from %lld to %lld",
                     params[i].name, (long long)params[i].lo, (long long)params[i].hi);
            return SL_ERR_ARGUMENT;
        } else {
            seen[i] = true;
        }
        q += plen;
    }
    *o = '\0';
    if (seen[P_NODE] != seen[P_NODES]) {
        snprintf(err, n, "ERR invalid --store URL: give both node=I and nodes=N (I from 0 to "
                         "N - 1, N at most %d), or neither (the node claims its id in Redis)",
                 SL_QUOTA_NODES_MAX);
        return SL_ERR_ARGUMENT;
    }
    b->claims = !seen[P_NODE];
    if (b->claims) {
        /* The size is 16 until the first claim says better: the static
         * share is then the smallest, never more than the fleet's. */
        val[P_NODE] = -1;
        val[P_NODES] = SL_QUOTA_NODES_MAX;
    } else if (val[P_NODE] >= val[P_NODES]) {
        snprintf(err, n, "ERR invalid --store URL: node must be below nodes (%lld): ids run "
                         "from 0 to %lld",
                 (long long)val[P_NODES], (long long)val[P_NODES] - 1);
        return SL_ERR_ARGUMENT;
    }
    b->node = (int)val[P_NODE];
    b->nodes = (int)val[P_NODES];
    b->interval_ns = val[P_INTERVAL] * 1000000;
    b->max_keys = (size_t)val[P_KEYS];
    return SL_OK;
}

int sl_backend_sync(const sl_redis_config *cfg, sl_backend **out, char *err, size_t n)
{
    *out = NULL;
    if (!cfg->url || strncmp(cfg->url, "sync+", 5) != 0) {
        snprintf(err, n, "ERR invalid --store URL: sync's scheme is sync+redis:// or "
                         "sync+redis-cluster://");
        return SL_ERR_ARGUMENT;
    }
    sy_backend *b = calloc(1, sizeof *b);
    size_t cap = strlen(cfg->url) + 1;
    char *inner = calloc(1, cap);
    if (!b || !inner) {
        free(b);
        free(inner);
        snprintf(err, n, "ERR out of memory");
        return SL_ERR_NOMEM;
    }
    int rc = sy_parse(b, cfg->url + 5, inner, err, n);
    if (rc == SL_OK) {
        sl_redis_config rc2 = *cfg;
        rc2.url = inner;
        rc = sl_backend_redis(&rc2, &b->inner, err, n);
    }
    /* The inner URL may hold a password: gone before anything else. */
    memset(inner, 0, cap);
    free(inner);
    if (rc != SL_OK) {
        free(b);
        return rc;
    }
    for (int i = 0; i < SY_STRIPES; i++)
        pthread_mutex_init(&b->stripes[i].lock, NULL);
    b->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : SL_REDIS_TIMEOUT_MS_DEFAULT;
    uint8_t rnd[16];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        uint64_t t = (uint64_t)sl_now_mono() ^ (uint64_t)getpid() << 32;
        memcpy(rnd, &t, sizeof t);
        memcpy(rnd + 8, &b, sizeof b < 8 ? sizeof b : 8);
    }
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(b->token + 2 * i, 3, "%02x", rnd[i]);
    b->hash_key[0] = (uint64_t)sl_now_mono() * UINT64_C(0x9E3779B97F4A7C15);
    b->hash_key[1] = (uint64_t)(uintptr_t)b ^ UINT64_C(0xD1B54A32D192ED03);
    b->base.ops = &sy_ops;
    b->base.store = NULL;
    b->base.defers = true;
    b->base.rates_leased = true;
    *out = &b->base;
    return SL_OK;
}
