/*
 * limiter.c: adaptive limiters (the contract is in sluice.h, above
 * sl_limiter_config): an estimator, a shedder and the leases in flight as
 * one object, and a keyed table of them.
 *
 * The core (struct sl_lcore) holds no lock; sl_limiter wraps one in a mutex
 * and a condition variable, and the table keeps one per key under its
 * shard's mutex.
 *
 * Leases live in slots, an array that grows by doubling up to max_limit.
 * The slots in use form one doubly linked list in acquire order, the free
 * ones a singly linked list through `next`. All leases of a limiter share
 * one TTL and its `now` never goes back, so acquire order is also expiry
 * order: the expired leases are a prefix of the list.
 *
 *   head -> [oldest, expires first] <-> ... <-> [newest] <- tail
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/alloc.h"
#include "common/arith.h"
#include "common/clock.h"
#include "common/siphash.h"
#include "sluice.h"

/* Slots a new limiter starts with (fewer when max_limit is lower). */
#define SL_LIM_SLOTS_START 8
/* No slot: the end of a list. */
#define SL_LIM_NONE (-1)

/* One lease, in use when id != 0 (40 bytes). */
typedef struct sl_lslot {
    uint64_t id;
    int64_t started; /* ns: the acquire's now */
    int64_t expires; /* ns: started + ttl */
    int32_t inflight_at_start; /* in flight after its admission, itself included */
    int32_t prev, next;        /* acquire order; free slots chain through next */
    uint8_t cls, part;
} sl_lslot;

/* A limiter without its lock. */
typedef struct sl_lcore {
    sl_limiter_config cfg; /* as the caller gave it (for the table's comparison) */
    sl_adapt adapt;
    sl_shed shed;
    sl_lslot *slots;
    int32_t nslots;
    int32_t head, tail; /* the leases, oldest first */
    int32_t free_head;
    int64_t last; /* the newest now seen */
    uint64_t admitted, refused, completed, dropped, expired;
    uint64_t refused_by_class[SL_SHED_CLASSES_MAX];
} sl_lcore;

struct sl_limiter {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled when slots are freed */
    sl_lcore core;
};

/* ---- the configuration ---- */

sl_status sl_limiter_config_check(const sl_limiter_config *c)
{
    if (c == NULL)
        return SL_ERR_ARGUMENT;
    sl_adapt probe;
    sl_status st = sl_adapt_init(&probe, &c->adapt);
    if (st != SL_OK)
        return st;
    st = sl_shed_config_check(&c->shed);
    if (st != SL_OK)
        return st;
    if (c->ttl_ns < 1 || c->ttl_ns > SL_SPAN_MAX)
        return SL_ERR_ARGUMENT;
    return SL_OK;
}

/* Field by field: the structs have padding, which memcmp would read. */
static bool adapt_config_equal(const sl_adapt_config *a, const sl_adapt_config *b)
{
    return a->kind == b->kind && a->initial_limit == b->initial_limit &&
           a->min_limit == b->min_limit && a->max_limit == b->max_limit &&
           a->backoff_permille == b->backoff_permille && a->timeout_ns == b->timeout_ns &&
           a->smoothing_permille == b->smoothing_permille &&
           a->probe_multiplier == b->probe_multiplier &&
           a->tolerance_permille == b->tolerance_permille && a->long_window == b->long_window &&
           a->queue_size == b->queue_size && a->queue_permille == b->queue_permille &&
           a->short_window == b->short_window && a->probe_interval_ns == b->probe_interval_ns &&
           a->probe_samples == b->probe_samples;
}

static bool shed_config_equal(const sl_shed_config *a, const sl_shed_config *b)
{
    if (a->classes != b->classes || a->partitions != b->partitions || a->idle_ns != b->idle_ns)
        return false;
    for (int i = 0; i < SL_SHED_CLASSES_MAX; i++)
        if (a->reserve_permille[i] != b->reserve_permille[i])
            return false;
    for (int i = 0; i < SL_SHED_PARTITIONS_MAX; i++)
        if (a->guarantee_permille[i] != b->guarantee_permille[i] || a->lends[i] != b->lends[i])
            return false;
    return true;
}

static bool config_equal(const sl_limiter_config *a, const sl_limiter_config *b)
{
    return a->ttl_ns == b->ttl_ns && adapt_config_equal(&a->adapt, &b->adapt) &&
           shed_config_equal(&a->shed, &b->shed);
}

/* The partitions a shedder indexes: partition 0 alone when there are none. */
static int partitions_used(const sl_shed_config *c)
{
    return c->partitions == 0 ? 1 : c->partitions;
}

/* ---- the core ---- */

/* Starts *c under *cfg (checked by the caller). SL_OK or SL_ERR_NOMEM. */
static sl_status core_init(sl_lcore *c, const sl_limiter_config *cfg)
{
    memset(c, 0, sizeof *c);
    c->cfg = *cfg;
    if (sl_adapt_init(&c->adapt, &cfg->adapt) != SL_OK)
        return SL_ERR_ARGUMENT;
    int64_t n = sl_min64(SL_LIM_SLOTS_START, cfg->adapt.max_limit);
    c->slots = sl_calloc((size_t)n, sizeof *c->slots);
    if (c->slots == NULL)
        return SL_ERR_NOMEM;
    c->nslots = (int32_t)n;
    for (int32_t i = 0; i < c->nslots; i++)
        c->slots[i].next = i + 1 < c->nslots ? i + 1 : SL_LIM_NONE;
    c->free_head = 0;
    c->head = c->tail = SL_LIM_NONE;
    return SL_OK;
}

static void core_destroy(sl_lcore *c)
{
    sl_free(c->slots);
    c->slots = NULL;
}

static size_t core_bytes(const sl_lcore *c)
{
    return (size_t)c->nslots * sizeof *c->slots;
}

/* Doubles the slots (at most to max_limit, at least one more); the new
 * ones go on the free list. false when memory ran out (nothing changed). */
static bool core_grow(sl_lcore *c)
{
    int64_t n = sl_min64((int64_t)c->nslots * 2, c->cfg.adapt.max_limit);
    if (n <= c->nslots)
        n = (int64_t)c->nslots + 1; /* after a configure lowered max_limit below the leases */
    if (n > SL_ADAPT_LIMIT_MAX)
        return false;
    sl_lslot *s = sl_realloc(c->slots, (size_t)n * sizeof *s);
    if (s == NULL)
        return false;
    memset(s + c->nslots, 0, (size_t)(n - c->nslots) * sizeof *s);
    for (int32_t i = c->nslots; i < (int32_t)n; i++)
        s[i].next = i + 1 < (int32_t)n ? i + 1 : c->free_head;
    c->free_head = c->nslots;
    c->slots = s;
    c->nslots = (int32_t)n;
    return true;
}

/* Unlinks slot i from the leases and puts it on the free list. */
static void core_release(sl_lcore *c, int32_t i)
{
    sl_lslot *s = &c->slots[i];
    if (s->prev != SL_LIM_NONE)
        c->slots[s->prev].next = s->next;
    else
        c->head = s->next;
    if (s->next != SL_LIM_NONE)
        c->slots[s->next].prev = s->prev;
    else
        c->tail = s->prev;
    s->id = 0;
    s->prev = SL_LIM_NONE;
    s->next = c->free_head;
    c->free_head = i;
}

/* Moves the limiter's time to `now` (never back) and expires the leases
 * whose TTL has run out: each is a DROPPED sample that took the TTL,
 * sampled at its expiry (so that the estimator sees when it started).
 * Returns how many expired. */
static int64_t core_advance(sl_lcore *c, int64_t now)
{
    if (now > c->last)
        c->last = now;
    int64_t n = 0;
    while (c->head != SL_LIM_NONE && c->slots[c->head].expires <= c->last) {
        int32_t i = c->head;
        sl_lslot s = c->slots[i];
        core_release(c, i);
        sl_shed_done(&c->shed, s.cls, s.part);
        sl_adapt_sample(&c->adapt, s.expires, c->cfg.ttl_ns, s.inflight_at_start,
                        SL_ADAPT_DROPPED);
        c->expired++;
        n++;
    }
    return n;
}

static int64_t core_retry_after(const sl_lcore *c)
{
    if (c->adapt.rtt_short > 0)
        return c->adapt.rtt_short;
    if (c->adapt.rtt_base > 0)
        return c->adapt.rtt_base;
    return c->cfg.ttl_ns;
}

/* acquire on the core, its arguments checked. `count_refusal` false: a
 * refusal is not counted (a waiting acquire that will try again). Sets
 * *freed to the leases that expired. */
static sl_status core_acquire(sl_lcore *c, int64_t now, int cls, int part, uint64_t id,
                              bool count_refusal, sl_limiter_lease *lease,
                              sl_limiter_decision *d, int64_t *freed)
{
    *freed = core_advance(c, now);
    now = c->last;
    int64_t limit = sl_adapt_limit(&c->adapt);
    sl_shed_decision sd;
    sl_status st = sl_shed_admit(&c->shed, &c->cfg.shed, limit, now, cls, part, &sd);
    if (st != SL_OK)
        return st;
    if (sd.admitted && c->free_head == SL_LIM_NONE && !core_grow(c)) {
        sl_shed_done(&c->shed, cls, part);
        memset(d, 0, sizeof *d);
        d->by = -1;
        d->limit = limit;
        d->in_flight = c->shed.in_flight;
        return SL_ERR_NOMEM;
    }
    d->admitted = sd.admitted;
    d->reason = sd.reason;
    d->by = sd.by;
    d->limit = limit;
    d->in_flight = sd.in_flight;
    d->remaining = sd.remaining;
    d->retry_after_ns = 0;
    if (!sd.admitted) {
        d->retry_after_ns = core_retry_after(c);
        if (count_refusal) {
            c->refused++;
            c->refused_by_class[cls]++;
        }
        return SL_OK;
    }
    int32_t i = c->free_head;
    sl_lslot *s = &c->slots[i];
    c->free_head = s->next;
    s->id = id;
    s->started = now;
    s->expires = now + c->cfg.ttl_ns; /* below 2^62 + 2^61: fits */
    s->inflight_at_start = (int32_t)sl_min64(sd.in_flight, INT32_MAX);
    s->cls = (uint8_t)cls;
    s->part = (uint8_t)part;
    s->next = SL_LIM_NONE;
    s->prev = c->tail;
    if (c->tail != SL_LIM_NONE)
        c->slots[c->tail].next = i;
    else
        c->head = i;
    c->tail = i;
    c->admitted++;
    lease->id = id;
    lease->slot = (uint32_t)i;
    return SL_OK;
}

/* SL_ERR_ARGUMENT unless the pointers are set, the id non-zero and the
 * class and partition within *shed's. */
static sl_status check_acquire_args(const sl_shed_config *shed, int cls, int part, uint64_t id,
                                    const sl_limiter_lease *lease, const sl_limiter_decision *d)
{
    if (lease == NULL || d == NULL || id == 0 || cls < 0 || cls >= shed->classes || part < 0 ||
        part >= partitions_used(shed))
        return SL_ERR_ARGUMENT;
    return SL_OK;
}

static bool time_ok(int64_t now)
{
    return now >= 0 && now <= SL_TIME_MAX;
}

static bool outcome_ok(sl_adapt_outcome outcome)
{
    return outcome == SL_ADAPT_SUCCESS || outcome == SL_ADAPT_DROPPED ||
           outcome == SL_ADAPT_IGNORED;
}

/* complete on the core, its arguments checked: 1 held, 0 unknown. */
static int core_complete(sl_lcore *c, int64_t now, const sl_limiter_lease *lease,
                         sl_adapt_outcome outcome, int64_t rtt_ns)
{
    core_advance(c, now);
    now = c->last;
    if (lease->id == 0 || lease->slot >= (uint32_t)c->nslots)
        return 0;
    int32_t i = (int32_t)lease->slot;
    sl_lslot s = c->slots[i];
    if (s.id != lease->id)
        return 0;
    core_release(c, i);
    sl_shed_done(&c->shed, s.cls, s.part);
    /* A live lease has not reached its expiry: now - started < ttl. */
    int64_t rtt = rtt_ns > 0 ? rtt_ns : sl_max64(1, now - s.started);
    sl_adapt_sample(&c->adapt, now, rtt, s.inflight_at_start, outcome);
    c->completed++;
    if (outcome == SL_ADAPT_DROPPED)
        c->dropped++;
    return 1;
}

/* configure on the core, *cfg checked and different. */
static sl_status core_configure(sl_lcore *c, const sl_limiter_config *cfg, int64_t now)
{
    core_advance(c, now);
    sl_adapt_config ac = cfg->adapt;
    int64_t cur = sl_adapt_limit(&c->adapt);
    ac.initial_limit = sl_max64(ac.min_limit, sl_min64(cur, ac.max_limit));
    sl_adapt a;
    sl_status st = sl_adapt_init(&a, &ac);
    if (st != SL_OK)
        return st;
    /* The shedder again, from the leases; what each class and partition
     * last asked carries over where its index still exists. */
    int ncls = cfg->shed.classes, npart = partitions_used(&cfg->shed);
    sl_shed sh;
    memset(&sh, 0, sizeof sh);
    for (int k = 0; k < ncls; k++) {
        sh.class_asked[k] = c->shed.class_asked[k];
        sh.class_seen |= c->shed.class_seen & (1u << k);
    }
    for (int p = 0; p < npart; p++) {
        sh.partition_asked[p] = c->shed.partition_asked[p];
        sh.partition_seen |= c->shed.partition_seen & (1u << p);
    }
    for (int32_t i = c->head; i != SL_LIM_NONE; i = c->slots[i].next) {
        sl_lslot *s = &c->slots[i];
        if (s->cls >= ncls)
            s->cls = (uint8_t)(ncls - 1);
        if (s->part >= npart)
            s->part = (uint8_t)(npart - 1);
        sh.in_flight++;
        sh.class_in_flight[s->cls]++;
        sh.partition_in_flight[s->part]++;
    }
    c->adapt = a;
    c->shed = sh;
    c->cfg = *cfg;
    return SL_OK;
}

static void core_stats(sl_lcore *c, int64_t now, sl_limiter_stats *st)
{
    if (time_ok(now))
        core_advance(c, now);
    memset(st, 0, sizeof *st);
    st->kind = c->cfg.adapt.kind;
    st->limit = sl_adapt_limit(&c->adapt);
    st->min_limit = c->cfg.adapt.min_limit;
    st->max_limit = c->cfg.adapt.max_limit;
    st->in_flight = c->shed.in_flight;
    memcpy(st->class_in_flight, c->shed.class_in_flight, sizeof st->class_in_flight);
    memcpy(st->partition_in_flight, c->shed.partition_in_flight,
           sizeof st->partition_in_flight);
    st->rtt_base_ns = c->adapt.rtt_base;
    st->rtt_short_ns = c->adapt.rtt_short;
    st->probing = c->cfg.adapt.kind == SL_ADAPT_ANCHORED && c->adapt.probe_saved != 0;
    st->classes = c->cfg.shed.classes;
    st->partitions = c->cfg.shed.partitions;
    st->admitted = c->admitted;
    st->refused = c->refused;
    st->completed = c->completed;
    st->dropped = c->dropped;
    st->expired = c->expired;
    memcpy(st->refused_by_class, c->refused_by_class, sizeof st->refused_by_class);
}

/* ---- sl_limiter: the core under a lock ---- */

sl_limiter *sl_limiter_new(const sl_limiter_config *cfg, sl_status *err)
{
    sl_status st = sl_limiter_config_check(cfg);
    sl_limiter *lim = NULL;
    if (st == SL_OK) {
        lim = sl_malloc(sizeof *lim);
        st = lim == NULL ? SL_ERR_NOMEM : core_init(&lim->core, cfg);
    }
    if (st == SL_OK) {
        pthread_condattr_t ca;
        bool ok = pthread_condattr_init(&ca) == 0;
        if (ok) {
            ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
                 pthread_cond_init(&lim->cv, &ca) == 0;
            pthread_condattr_destroy(&ca);
        }
        if (ok && pthread_mutex_init(&lim->mu, NULL) != 0) {
            pthread_cond_destroy(&lim->cv);
            ok = false;
        }
        if (!ok) {
            core_destroy(&lim->core);
            st = SL_ERR_NOMEM;
        }
    }
    if (st != SL_OK) {
        sl_free(lim);
        lim = NULL;
    }
    if (err != NULL)
        *err = st;
    return lim;
}

void sl_limiter_free(sl_limiter *lim)
{
    if (lim == NULL)
        return;
    pthread_cond_destroy(&lim->cv);
    pthread_mutex_destroy(&lim->mu);
    core_destroy(&lim->core);
    sl_free(lim);
}

sl_status sl_limiter_configure(sl_limiter *lim, const sl_limiter_config *cfg, int64_t now)
{
    if (lim == NULL)
        return SL_ERR_ARGUMENT;
    sl_status st = sl_limiter_config_check(cfg);
    if (st != SL_OK)
        return st;
    if (!time_ok(now))
        return SL_ERR_TIME;
    pthread_mutex_lock(&lim->mu);
    if (!config_equal(&lim->core.cfg, cfg))
        st = core_configure(&lim->core, cfg, now);
    /* A higher limit, or expiries, may let a waiter in. */
    pthread_cond_broadcast(&lim->cv);
    pthread_mutex_unlock(&lim->mu);
    return st;
}

sl_status sl_limiter_acquire(sl_limiter *lim, int64_t now, int cls, int part, uint64_t id,
                             sl_limiter_lease *lease, sl_limiter_decision *d)
{
    if (d != NULL) {
        memset(d, 0, sizeof *d);
        d->by = -1;
    }
    if (lim == NULL)
        return SL_ERR_ARGUMENT;
    pthread_mutex_lock(&lim->mu);
    sl_status st = check_acquire_args(&lim->core.cfg.shed, cls, part, id, lease, d);
    if (st == SL_OK && !time_ok(now))
        st = SL_ERR_TIME;
    int64_t freed = 0;
    if (st == SL_OK)
        st = core_acquire(&lim->core, now, cls, part, id, true, lease, d, &freed);
    if (freed > 0)
        pthread_cond_broadcast(&lim->cv);
    pthread_mutex_unlock(&lim->mu);
    return st;
}

/* Waits on lim->cv until the monotonic time `until` (sl_now_mono's clock),
 * measured from `now` on that clock; lim->mu held. */
static void wait_until(sl_limiter *lim, int64_t now, int64_t until)
{
    int64_t rest = until - now;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = (int64_t)ts.tv_nsec + rest % 1000000000;
    int64_t sec = (int64_t)ts.tv_sec + rest / 1000000000 + ns / 1000000000;
    ts.tv_sec = (time_t)sec;
    ts.tv_nsec = (long)(ns % 1000000000);
    pthread_cond_timedwait(&lim->cv, &lim->mu, &ts);
}

sl_status sl_limiter_acquire_wait(sl_limiter *lim, int64_t timeout_ns, int cls, int part,
                                  uint64_t id, sl_limiter_lease *lease, sl_limiter_decision *d,
                                  int64_t *now_out)
{
    if (d != NULL) {
        memset(d, 0, sizeof *d);
        d->by = -1;
    }
    if (lim == NULL)
        return SL_ERR_ARGUMENT;
    pthread_mutex_lock(&lim->mu);
    sl_status st = check_acquire_args(&lim->core.cfg.shed, cls, part, id, lease, d);
    int64_t now = sl_now_mono();
    int64_t deadline = sl_add_clamp(now, sl_max64(timeout_ns, 0), SL_TIME_MAX);
    while (st == SL_OK) {
        now = sl_now_mono();
        int64_t freed = 0;
        bool last_try = now >= deadline;
        st = core_acquire(&lim->core, now, cls, part, id, last_try, lease, d, &freed);
        if (freed > 0)
            pthread_cond_broadcast(&lim->cv);
        if (st != SL_OK || d->admitted || last_try)
            break;
        int64_t until = deadline;
        if (lim->core.head != SL_LIM_NONE)
            until = sl_min64(until, lim->core.slots[lim->core.head].expires);
        if (until > now)
            wait_until(lim, now, until);
    }
    pthread_mutex_unlock(&lim->mu);
    if (now_out != NULL)
        *now_out = now;
    return st;
}

int sl_limiter_complete(sl_limiter *lim, int64_t now, const sl_limiter_lease *lease,
                        sl_adapt_outcome outcome, int64_t rtt_ns)
{
    if (lim == NULL || lease == NULL || !outcome_ok(outcome) || rtt_ns > SL_SPAN_MAX)
        return SL_ERR_ARGUMENT;
    if (!time_ok(now))
        return SL_ERR_TIME;
    pthread_mutex_lock(&lim->mu);
    uint64_t before = lim->core.expired;
    int held = core_complete(&lim->core, now, lease, outcome, rtt_ns);
    if (held || lim->core.expired != before)
        pthread_cond_broadcast(&lim->cv);
    pthread_mutex_unlock(&lim->mu);
    return held;
}

void sl_limiter_stats_get(sl_limiter *lim, int64_t now, sl_limiter_stats *st)
{
    if (st == NULL)
        return;
    if (lim == NULL) {
        memset(st, 0, sizeof *st);
        return;
    }
    pthread_mutex_lock(&lim->mu);
    uint64_t before = lim->core.expired;
    core_stats(&lim->core, now, st);
    if (lim->core.expired != before)
        pthread_cond_broadcast(&lim->cv);
    pthread_mutex_unlock(&lim->mu);
}

/* ---- sl_limiters: the keyed table ---- */

#define SL_LIMS_SHARDS 16
/* Entries looked at from the LRU tail for one without leases. */
#define SL_LIMS_EVICT_SCAN 8
#define SL_LIMS_BUCKETS_START 16

typedef struct sl_lentry {
    struct sl_lentry *hnext;           /* the bucket's chain */
    struct sl_lentry *lru_prev, *lru_next; /* most recent first */
    uint64_t hash;
    sl_lcore core;
    size_t keylen;
    unsigned char key[];
} sl_lentry;

typedef struct sl_lshard {
    pthread_mutex_t mu;
    sl_lentry **buckets;
    size_t nbuckets; /* a power of two */
    size_t count;
    sl_lentry *lru_head, *lru_tail;
    size_t bytes; /* entries, their slots and the buckets */
} sl_lshard;

struct sl_limiters {
    size_t max_keys, max_key_len;
    uint64_t hash_key[2];
    _Atomic size_t keys;       /* across the shards, at most max_keys */
    _Atomic uint64_t evicted;
    sl_lshard shards[SL_LIMS_SHARDS];
};

sl_limiters *sl_limiters_new(size_t max_keys, size_t max_key_len)
{
    if (max_keys == 0 || max_key_len == 0)
        return NULL;
    sl_limiters *t = sl_calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->max_keys = max_keys;
    t->max_key_len = max_key_len;
    if (getrandom(t->hash_key, sizeof t->hash_key, 0) != (ssize_t)sizeof t->hash_key) {
        /* No entropy: a table still works, with a hash that can be aimed at. */
        t->hash_key[0] = (uint64_t)sl_now_mono();
        t->hash_key[1] = (uint64_t)(uintptr_t)t;
    }
    int i = 0;
    for (; i < SL_LIMS_SHARDS; i++) {
        sl_lshard *sh = &t->shards[i];
        sh->buckets = sl_calloc(SL_LIMS_BUCKETS_START, sizeof *sh->buckets);
        if (sh->buckets == NULL || pthread_mutex_init(&sh->mu, NULL) != 0) {
            sl_free(sh->buckets);
            break;
        }
        sh->nbuckets = SL_LIMS_BUCKETS_START;
        sh->bytes = SL_LIMS_BUCKETS_START * sizeof *sh->buckets;
    }
    if (i < SL_LIMS_SHARDS) {
        while (i-- > 0) {
            pthread_mutex_destroy(&t->shards[i].mu);
            sl_free(t->shards[i].buckets);
        }
        sl_free(t);
        return NULL;
    }
    return t;
}

static void entry_free(sl_lentry *e)
{
    core_destroy(&e->core);
    sl_free(e);
}

static size_t entry_bytes(const sl_lentry *e)
{
    return sizeof *e + e->keylen + core_bytes(&e->core);
}

void sl_limiters_free(sl_limiters *t)
{
    if (t == NULL)
        return;
    for (int i = 0; i < SL_LIMS_SHARDS; i++) {
        sl_lshard *sh = &t->shards[i];
        for (sl_lentry *e = sh->lru_head, *next; e != NULL; e = next) {
            next = e->lru_next;
            entry_free(e);
        }
        sl_free(sh->buckets);
        pthread_mutex_destroy(&sh->mu);
    }
    sl_free(t);
}

/* The key's hash and shard; SL_ERR_KEY for a bad key. */
static sl_status key_hash(const sl_limiters *t, const void *key, size_t keylen, uint64_t *h)
{
    if (key == NULL || keylen == 0 || keylen > t->max_key_len)
        return SL_ERR_KEY;
    *h = sl_siphash(t->hash_key, key, keylen);
    return SL_OK;
}

/* The shard from the hash's top bits, the bucket from its low ones. */
static sl_lshard *shard_of(sl_limiters *t, uint64_t h)
{
    return &t->shards[h >> 60];
}

static sl_lentry **bucket_of(sl_lshard *sh, uint64_t h)
{
    return &sh->buckets[h & (sh->nbuckets - 1)];
}

static sl_lentry *shard_find(sl_lshard *sh, uint64_t h, const void *key, size_t keylen)
{
    for (sl_lentry *e = *bucket_of(sh, h); e != NULL; e = e->hnext)
        if (e->hash == h && e->keylen == keylen && memcmp(e->key, key, keylen) == 0)
            return e;
    return NULL;
}

static void lru_unlink(sl_lshard *sh, sl_lentry *e)
{
    if (e->lru_prev != NULL)
        e->lru_prev->lru_next = e->lru_next;
    else
        sh->lru_head = e->lru_next;
    if (e->lru_next != NULL)
        e->lru_next->lru_prev = e->lru_prev;
    else
        sh->lru_tail = e->lru_prev;
    e->lru_prev = e->lru_next = NULL;
}

static void lru_push_front(sl_lshard *sh, sl_lentry *e)
{
    e->lru_prev = NULL;
    e->lru_next = sh->lru_head;
    if (sh->lru_head != NULL)
        sh->lru_head->lru_prev = e;
    else
        sh->lru_tail = e;
    sh->lru_head = e;
}

static void lru_touch(sl_lshard *sh, sl_lentry *e)
{
    if (sh->lru_head != e) {
        lru_unlink(sh, e);
        lru_push_front(sh, e);
    }
}

/* Takes e out of its shard and frees it. */
static void shard_remove(sl_lshard *sh, sl_lentry *e)
{
    sl_lentry **pp = bucket_of(sh, e->hash);
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    lru_unlink(sh, e);
    sh->count--;
    sh->bytes -= entry_bytes(e);
    entry_free(e);
}

/* Doubles the buckets when the chains average more than one entry; a
 * failed allocation leaves them as they were (longer chains, still right). */
static void shard_maybe_grow(sl_lshard *sh)
{
    if (sh->count <= sh->nbuckets)
        return;
    size_t n = sh->nbuckets * 2;
    sl_lentry **b = sl_calloc(n, sizeof *b);
    if (b == NULL)
        return;
    for (size_t i = 0; i < sh->nbuckets; i++) {
        for (sl_lentry *e = sh->buckets[i], *next; e != NULL; e = next) {
            next = e->hnext;
            e->hnext = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    }
    sl_free(sh->buckets);
    sh->bytes += (n - sh->nbuckets) * sizeof *b;
    sh->buckets = b;
    sh->nbuckets = n;
}

/* Evicts one limiter with nothing in flight from the last few of sh's LRU
 * list, at `now`'s expiries; sh->mu held. true when one was evicted. */
static bool shard_evict_one(sl_lshard *sh, int64_t now)
{
    sl_lentry *e = sh->lru_tail;
    for (int n = 0; e != NULL && n < SL_LIMS_EVICT_SCAN; n++, e = e->lru_prev) {
        core_advance(&e->core, now);
        if (e->core.shed.in_flight == 0) {
            shard_remove(sh, e);
            return true;
        }
    }
    return false;
}

/* Makes room for one more key: under the cap, counts it; at the cap,
 * evicts an idle limiter, from `own` (locked) first, then from any other
 * shard whose lock is free (trylock: two threads evicting from each
 * other's shards cannot deadlock). false when every limiter looked at
 * holds leases. */
static bool table_reserve(sl_limiters *t, sl_lshard *own, int64_t now)
{
    size_t k = atomic_load(&t->keys);
    while (k < t->max_keys)
        if (atomic_compare_exchange_weak(&t->keys, &k, k + 1))
            return true;
    /* An eviction hands its place in the count to the new key. */
    if (shard_evict_one(own, now)) {
        atomic_fetch_add(&t->evicted, 1);
        return true;
    }
    for (int i = 0; i < SL_LIMS_SHARDS; i++) {
        sl_lshard *sh = &t->shards[i];
        if (sh == own || pthread_mutex_trylock(&sh->mu) != 0)
            continue;
        bool ok = shard_evict_one(sh, now);
        pthread_mutex_unlock(&sh->mu);
        if (ok) {
            atomic_fetch_add(&t->evicted, 1);
            return true;
        }
    }
    return false;
}

/* A new limiter for key under *cfg (checked) in sh, locked. */
static sl_status shard_insert(sl_limiters *t, sl_lshard *sh, uint64_t h, const void *key,
                              size_t keylen, const sl_limiter_config *cfg, int64_t now,
                              sl_lentry **out)
{
    sl_lentry *e = sl_malloc(sizeof *e + keylen);
    if (e == NULL)
        return SL_ERR_NOMEM;
    sl_status st = core_init(&e->core, cfg);
    if (st != SL_OK) {
        sl_free(e);
        return st;
    }
    if (!table_reserve(t, sh, now)) {
        entry_free(e);
        return SL_ERR_NOMEM;
    }
    e->hash = h;
    e->keylen = keylen;
    memcpy(e->key, key, keylen);
    sl_lentry **b = bucket_of(sh, h);
    e->hnext = *b;
    *b = e;
    lru_push_front(sh, e);
    sh->count++;
    sh->bytes += entry_bytes(e);
    shard_maybe_grow(sh);
    *out = e;
    return SL_OK;
}

sl_status sl_limiters_acquire(sl_limiters *t, const void *key, size_t keylen,
                              const sl_limiter_config *cfg, int64_t now, int cls, int part,
                              uint64_t id, sl_limiter_lease *lease, sl_limiter_decision *d)
{
    if (d != NULL) {
        memset(d, 0, sizeof *d);
        d->by = -1;
    }
    if (t == NULL || lease == NULL || d == NULL || id == 0)
        return SL_ERR_ARGUMENT;
    uint64_t h;
    sl_status st = key_hash(t, key, keylen, &h);
    if (st != SL_OK)
        return st;
    if (cfg == NULL)
        return SL_ERR_ARGUMENT;
    if (!time_ok(now))
        return SL_ERR_TIME;
    sl_lshard *sh = shard_of(t, h);
    pthread_mutex_lock(&sh->mu);
    sl_lentry *e = shard_find(sh, h, key, keylen);
    bool same = e != NULL && config_equal(&e->core.cfg, cfg);
    /* Everything is checked before the table or the limiter changes. */
    if (!same)
        st = sl_limiter_config_check(cfg);
    if (st == SL_OK)
        st = check_acquire_args(&cfg->shed, cls, part, id, lease, d);
    if (st == SL_OK && e == NULL)
        st = shard_insert(t, sh, h, key, keylen, cfg, now, &e);
    else if (st == SL_OK && !same)
        st = core_configure(&e->core, cfg, now);
    if (st == SL_OK) {
        int64_t freed;
        size_t before = core_bytes(&e->core);
        st = core_acquire(&e->core, now, cls, part, id, true, lease, d, &freed);
        sh->bytes += core_bytes(&e->core) - before;
    }
    if (e != NULL)
        lru_touch(sh, e);
    pthread_mutex_unlock(&sh->mu);
    return st;
}

int sl_limiters_complete(sl_limiters *t, const void *key, size_t keylen, int64_t now,
                         const sl_limiter_lease *lease, sl_adapt_outcome outcome, int64_t rtt_ns)
{
    if (t == NULL)
        return SL_ERR_ARGUMENT;
    uint64_t h;
    sl_status st = key_hash(t, key, keylen, &h);
    if (st != SL_OK)
        return st;
    if (lease == NULL || !outcome_ok(outcome) || rtt_ns > SL_SPAN_MAX)
        return SL_ERR_ARGUMENT;
    if (!time_ok(now))
        return SL_ERR_TIME;
    sl_lshard *sh = shard_of(t, h);
    pthread_mutex_lock(&sh->mu);
    sl_lentry *e = shard_find(sh, h, key, keylen);
    int held = 0;
    if (e != NULL) {
        held = core_complete(&e->core, now, lease, outcome, rtt_ns);
        lru_touch(sh, e);
    }
    pthread_mutex_unlock(&sh->mu);
    return held;
}

int sl_limiters_stats(sl_limiters *t, const void *key, size_t keylen, int64_t now,
                      sl_limiter_stats *st)
{
    if (st != NULL)
        memset(st, 0, sizeof *st);
    if (t == NULL || st == NULL)
        return SL_ERR_ARGUMENT;
    uint64_t h;
    sl_status rc = key_hash(t, key, keylen, &h);
    if (rc != SL_OK)
        return rc;
    sl_lshard *sh = shard_of(t, h);
    pthread_mutex_lock(&sh->mu);
    sl_lentry *e = shard_find(sh, h, key, keylen);
    if (e != NULL)
        core_stats(&e->core, now, st);
    pthread_mutex_unlock(&sh->mu);
    return e != NULL;
}

int64_t sl_limiters_configure(sl_limiters *t, const void *prefix, size_t prefix_len,
                              const sl_limiter_config *cfg, int64_t now)
{
    if (t == NULL || cfg == NULL || (prefix == NULL && prefix_len > 0))
        return SL_ERR_ARGUMENT;
    if (!time_ok(now))
        return SL_ERR_TIME;
    sl_status st = sl_limiter_config_check(cfg);
    if (st != SL_OK)
        return st;
    int64_t changed = 0;
    for (int i = 0; i < SL_LIMS_SHARDS; i++) {
        sl_lshard *sh = &t->shards[i];
        pthread_mutex_lock(&sh->mu);
        for (sl_lentry *e = sh->lru_head; e != NULL; e = e->lru_next) {
            if (e->keylen < prefix_len || memcmp(e->key, prefix, prefix_len) != 0 ||
                config_equal(&e->core.cfg, cfg))
                continue;
            size_t before = core_bytes(&e->core);
            if (core_configure(&e->core, cfg, now) == SL_OK)
                changed++;
            sh->bytes += core_bytes(&e->core) - before;
        }
        pthread_mutex_unlock(&sh->mu);
    }
    return changed;
}

void sl_limiters_each(sl_limiters *t, int64_t now,
                      void (*fn)(void *arg, const void *key, size_t keylen,
                                 const sl_limiter_stats *st),
                      void *arg)
{
    if (t == NULL || fn == NULL)
        return;
    for (int i = 0; i < SL_LIMS_SHARDS; i++) {
        sl_lshard *sh = &t->shards[i];
        pthread_mutex_lock(&sh->mu);
        for (sl_lentry *e = sh->lru_head; e != NULL; e = e->lru_next) {
            sl_limiter_stats st;
            core_stats(&e->core, now, &st);
            fn(arg, e->key, e->keylen, &st);
        }
        pthread_mutex_unlock(&sh->mu);
    }
}

void sl_limiters_info_get(sl_limiters *t, sl_limiters_info *info)
{
    if (info == NULL)
        return;
    memset(info, 0, sizeof *info);
    if (t == NULL)
        return;
    info->max_keys = t->max_keys;
    info->bytes = sizeof *t;
    for (int i = 0; i < SL_LIMS_SHARDS; i++) {
        sl_lshard *sh = &t->shards[i];
        pthread_mutex_lock(&sh->mu);
        info->keys += sh->count;
        info->bytes += sh->bytes;
        pthread_mutex_unlock(&sh->mu);
    }
    info->evicted = atomic_load(&t->evicted);
}
