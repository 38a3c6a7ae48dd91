/*
 * redis.c: the central store (redis.h). Each worker has its own transport
 * (one connection, or a cluster's) on its loop and sends each request as
 * one command: SL.DECIDE when the server runs sluice-redis.so, else EVALSHA
 * of the embedded Lua script, with the same arguments after the keys.
 *
 * A request's life on a worker:
 *
 *   submit --> [waiting: the server's kind is being asked] --> sent --> reply --> done()
 *                 |                                              |
 *                 +------ time budget passed: the store-down ----+--> done() (the late
 *                         policy answers, once                        reply is dropped)
 *
 * Every request not yet answered sits in a min-heap by deadline, which one
 * uv timer per worker watches; the same timer refreshes the worker's health,
 * sends the breaker's probes and drops a connection that answers nothing.
 * An answered request's memory stays until its reply (or the connection's
 * loss) comes back, so that a late reply finds it and is ignored.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algo/share.h"
#include "backend/peers.h"
#include "backend/redis.h"
#include "backend/reply.h"
#include "common/clock.h"
#include "common/decimal.h"
#include "common/hex.h"
#include "common/parse.h"

#define RD_BREAKER_FAILURES 5        /* consecutive failures that open the breaker */
#define RD_PROBE_MIN_MS 100          /* the first probe after it opens ... */
#define RD_PROBE_MAX_MS 2000         /* ... doubling to this */
#define RD_TICK_MS 100               /* the health check's period, with nothing due sooner */
#define RD_STALL_MIN_MS 1000         /* a connection silent this long (at least) is dropped */
#define RD_GROUP 8                   /* SL.DECIDE's arguments per key */
#define RD_FLAG_DAY_SHIFT 8          /* a group's flags: the reset day << this, carry in bit 0 */
#define RD_SYNC_ARGS 11              /* SL.SYNC's arguments after the key */
#define RD_MAX_ARGS (4 + SL_TAKE_MANY_MAX + SL_TAKE_MANY_MAX * RD_GROUP)
#define RD_NUM 24                    /* room for one formatted integer */
#define RD_KEY_MAX (1u << 20)        /* longest key: an op's offsets are 32-bit */
#define RD_INFLIGHT_MAX 65536        /* requests a worker waits on before deciding at once */
#define RD_OP_CACHED 64              /* ops a worker keeps for reuse */
#define RD_OP_BUF 2048               /* the buf of a reused op: arguments and the command */

typedef enum rd_mode { RD_MODE_UNKNOWN, RD_MODE_PROBING, RD_MODE_MODULE, RD_MODE_SCRIPT } rd_mode;

/* Counters a worker bumps and stats() sums from another thread. */
typedef struct rd_counters {
    _Atomic uint64_t requests, errors, timeouts, connects, disconnects, breaker_opens;
    _Atomic uint64_t rtt[SL_RTT_BUCKETS];
    _Atomic uint64_t rtt_sum_ns;
} rd_counters;

typedef struct rd_backend {
    sl_backend base;
    bool cluster;
    sl_peers *peers; /* a routing fleet (--peers): the peers transport */
    char *hosts, *user, *password;
    int db;
    sl_on_error on_error;
    int32_t timeout_ms, fleet_nodes, connect_timeout_ms;
    int64_t clock_offset_ns; /* Unix time - sl_now_mono(), for the local limiter */
    sl_store *local;         /* the local limiter's states, shared by the workers */
    pthread_mutex_t lock;    /* guards the list of workers and `retired` */
    struct sl_backend_worker *workers;
    rd_counters retired; /* what detached workers counted */
} rd_backend;

/* What a fallback needs of an item after submit(): the limit's parameters
 * (rebuilt only if the local limiter decides) and where its key is kept. */
typedef struct rd_item {
    sl_algorithm algorithm;
    uint32_t flags;
    int64_t limit, period_ns, burst, months, reset_day, utc_offset_ns, cost;
    uint32_t key_off, key_len;
} rd_item;

typedef struct rd_op {
    struct sl_backend_worker *w;
    sl_backend_req *r; /* NULL once answered: a reply then only frees the op */
    uint64_t deadline_ms;
    uint64_t seq;      /* submit order: equal deadlines are answered in it */
    uint64_t sent_ns;
    size_t heap;       /* index in the worker's heap, or SIZE_MAX */
    struct rd_op *next_wait;
    bool resent;       /* sent again after NOSCRIPT */
    char *cmd;         /* the command as sent, for a resend: in buf after the arguments, or
                          malloc'ed when it does not fit there */
    size_t cmd_len;
    size_t buf_cap, args_used; /* buf's bytes, and those the arguments take */
    int argc;
    uint32_t arg_off[RD_MAX_ARGS], arg_len[RD_MAX_ARGS]; /* in buf, SL.DECIDE's order without
                                                             its name */
    rd_item items[SL_TAKE_MANY_MAX];
    char buf[];
} rd_op;

struct sl_backend_worker {
    rd_backend *b;
    uv_loop_t *loop;
    const int64_t *now;
    sl_transport *t;
    rd_mode mode;
    uint64_t mode_epoch; /* the transport's epoch the mode was learnt at */
    bool was_ready;      /* connected at the last look */
    uint64_t seen_epoch; /* the transport's epoch at the last look */
    bool detaching;
    /* The breaker. */
    int fails;
    bool open, probing;
    uint64_t rng; /* xorshift state for the probes' jitter */
    unsigned probe_attempt;
    uint64_t probe_at_ms;
    /* Requests not answered yet, by deadline. */
    rd_op **heap;
    size_t heap_n, heap_cap;
    uint64_t seq;
    rd_op *wait_head, *wait_tail;
    size_t inflight;           /* commands in the transport awaiting a reply */
    uint64_t last_progress_ms; /* the last reply, or when inflight became non-zero */
    uint64_t longest_budget_ms; /* the longest time budget a request has had */
    uv_timer_t timer;
    _Atomic int state;
    _Atomic bool module;
    rd_counters c;
    char last_err[256];
    /* Ops of the common size, kept for the next requests: an op is larger
     * than malloc's per-thread cache serves, and a request costs one. */
    rd_op *op_cache[RD_OP_CACHED];
    size_t op_cached;
    char reply_err[256]; /* the errstr of the request being answered */
    struct sl_backend_worker *next;
};

/* ---- names ---- */

const char *sl_fallback_name(sl_fallback by)
{
    switch (by) {
    case SL_DECIDED_FAIL_OPEN: return "fail_open";
    case SL_DECIDED_FAIL_CLOSED: return "fail_closed";
    case SL_DECIDED_LOCAL: return "local";
    default: return "store";
    }
}

const char *sl_backend_redis_last_error(const sl_backend_worker *w)
{
    return w->last_err;
}

#ifndef SL_HAVE_CLUSTER
/* Until the cluster transport (cluster.c) is built in, redis-cluster://
 * cannot connect; sl_backend_redis refuses it with a message. */
sl_transport *sl_transport_cluster(uv_loop_t *loop, const sl_transport_config *cfg)
{
    (void)loop;
    (void)cfg;
    return NULL;
}
#endif

/* ---- counters ---- */

static void rd_add(_Atomic uint64_t *c, uint64_t v)
{
    atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

static uint64_t rd_get(_Atomic uint64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

static void rd_rtt(rd_counters *c, uint64_t ns)
{
    static const uint64_t bounds_us[SL_RTT_BUCKETS - 1] = {100,   250,   500,    1000,
                                                           2500,  5000,  10000,  25000,
                                                           50000, 100000, 250000};
    size_t i = 0;
    while (i < SL_RTT_BUCKETS - 1 && ns > bounds_us[i] * 1000)
        i++;
    rd_add(&c->rtt[i], 1);
    rd_add(&c->rtt_sum_ns, ns);
}

static void rd_set_err(sl_backend_worker *w, const char *what, const char *text, size_t len)
{
    snprintf(w->last_err, sizeof w->last_err, "%s%.*s", what, (int)(len > 200 ? 200 : len),
             text ? text : "");
}

/* A command that could not be queued: the connection is being made again.
 * Why it was lost (a refused AUTH, a protocol error) says more, so it is
 * kept when the worker has it. */
static void rd_not_connected(sl_backend_worker *w)
{
    if (!w->last_err[0])
        rd_set_err(w, "not connected", NULL, 0);
}

/* ---- the heap of deadlines ---- */

/* Earlier deadline first; the earlier submitted on a tie, so that a
 * local limiter answering timed-out requests sees them in their order. */
static bool rd_before(const rd_op *a, const rd_op *b)
{
    return a->deadline_ms != b->deadline_ms ? a->deadline_ms < b->deadline_ms : a->seq < b->seq;
}

static void rd_heap_swap(sl_backend_worker *w, size_t i, size_t j)
{
    rd_op *t = w->heap[i];
    w->heap[i] = w->heap[j];
    w->heap[j] = t;
    w->heap[i]->heap = i;
    w->heap[j]->heap = j;
}

static void rd_heap_up(sl_backend_worker *w, size_t i)
{
    while (i > 0 && rd_before(w->heap[i], w->heap[(i - 1) / 2])) {
        rd_heap_swap(w, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void rd_heap_down(sl_backend_worker *w, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < w->heap_n && rd_before(w->heap[l], w->heap[m]))
            m = l;
        if (r < w->heap_n && rd_before(w->heap[r], w->heap[m]))
            m = r;
        if (m == i)
            return;
        rd_heap_swap(w, i, m);
        i = m;
    }
}

static bool rd_heap_push(sl_backend_worker *w, rd_op *op)
{
    if (w->heap_n == w->heap_cap) {
        size_t cap = w->heap_cap ? w->heap_cap * 2 : 64;
        rd_op **h = realloc(w->heap, cap * sizeof *h);
        if (!h)
            return false;
        w->heap = h;
        w->heap_cap = cap;
    }
    op->heap = w->heap_n;
    w->heap[w->heap_n++] = op;
    rd_heap_up(w, op->heap);
    return true;
}

static void rd_heap_remove(sl_backend_worker *w, rd_op *op)
{
    size_t i = op->heap;
    if (i == SIZE_MAX)
        return;
    op->heap = SIZE_MAX;
    w->heap_n--;
    if (i == w->heap_n)
        return;
    w->heap[i] = w->heap[w->heap_n];
    w->heap[i]->heap = i;
    rd_heap_down(w, i);
    rd_heap_up(w, i);
}

/* ---- store-down policies ---- */

/* Most units available at once under a limit: the burst of the algorithms
 * that have one, the per-window limit of the others. */
static int64_t rd_capacity(const rd_item *it)
{
    if (it->flags & SL_LIMIT_CELL)
        return it->burst;
    switch (it->algorithm) {
    case SL_GCRA:
    case SL_TOKEN_BUCKET:
    case SL_LEAKY_BUCKET: return it->burst > 0 ? it->burst : it->limit;
    default: return it->limit;
    }
}

/* The local limiter's limit for an item: its share of the fleet's
 * (sl_limit_share: limit / N), carry and calendar kept; the whole limit
 * when there is one node, or when the share cannot be built. */
static int rd_local_limit(const rd_backend *b, const rd_item *it, sl_limit *l)
{
    sl_limit whole;
    int rc;
    if (it->flags & SL_LIMIT_CELL) {
        rc = sl_limit_init_cell(&whole, it->burst - 1, it->limit, it->period_ns / 1000000000);
    } else {
        rc = sl_limit_init(&whole, it->algorithm, it->limit, it->period_ns, it->burst);
        if (rc == SL_OK && (it->flags & SL_LIMIT_CARRY))
            rc = sl_limit_carry(&whole);
        if (rc == SL_OK && (it->months || it->utc_offset_ns))
            rc = sl_limit_align_day(&whole, it->months, it->reset_day, it->utc_offset_ns,
                                    b->clock_offset_ns);
    }
    if (rc != SL_OK)
        return rc;
    /* Over peers, N is the membership in force (a reload changes it). */
    int64_t nodes = b->peers ? (int64_t)sl_peers_latest(b->peers)->n : b->fleet_nodes;
    if (sl_limit_share(&whole, nodes, l) != SL_OK)
        *l = whole;
    return SL_OK;
}

static sl_on_error rd_policy(const sl_backend_worker *w, const sl_backend_req *r)
{
    if (r->on_error != SL_ON_ERROR_DEFAULT)
        return r->on_error;
    return w->b->on_error != SL_ON_ERROR_DEFAULT ? w->b->on_error : SL_ON_ERROR_FAIL_OPEN;
}

static int64_t rd_now_ns(const sl_backend_worker *w)
{
    return w->now ? *w->now : sl_now_mono();
}

/* Answers *r by its store-down policy, from the op's copy of the items. */
static void rd_fallback(sl_backend_worker *w, sl_backend_req *r, const rd_op *op)
{
    const rd_backend *b = w->b;
    sl_on_error policy = rd_policy(w, r);
    r->by = policy == SL_ON_ERROR_LOCAL     ? SL_DECIDED_LOCAL
            : policy == SL_ON_ERROR_FAIL_CLOSED ? SL_DECIDED_FAIL_CLOSED
                                                : SL_DECIDED_FAIL_OPEN;
    r->rc = SL_OK;
    r->failed = -1;
    r->count = 0;
    int64_t now = rd_now_ns(w);
    if (r->op == SL_OP_SYNC || r->op == SL_OP_CLAIM) {
        /* A lease only the central can give: the sync backend decides on
         * the node's last share meanwhile. */
        r->by = SL_DECIDED_BY_STORE;
        r->rc = SL_ERR_UNAVAILABLE;
        return;
    }

    if (policy == SL_ON_ERROR_LOCAL) {
        sl_limit limits[SL_TAKE_MANY_MAX];
        sl_take_item items[SL_TAKE_MANY_MAX];
        size_t n = r->n;
        int rc = SL_OK;
        for (size_t k = 0; k < n && rc == SL_OK; k++) {
            const rd_item *it = &op->items[k];
            if (r->op != SL_OP_RESET)
                rc = rd_local_limit(b, it, &limits[k]);
            items[k] = (sl_take_item){op->buf + it->key_off, it->key_len, &limits[k], it->cost};
        }
        if (rc != SL_OK) {
            r->rc = rc;
            return;
        }
        switch (r->op) {
        case SL_OP_TAKE:
            r->rc = sl_store_take_many(b->local, items, n, now, r->d, &r->failed);
            break;
        case SL_OP_PEEK:
            for (size_t k = 0; k < n && r->rc == SL_OK; k++) {
                r->rc = sl_store_peek(b->local, items[k].key, items[k].keylen, &limits[k], now,
                                      items[k].cost, &r->d[k]);
                if (r->rc == SL_OK && !r->d[k].allowed && r->failed < 0)
                    r->failed = (int)k;
            }
            break;
        case SL_OP_ACQUIRE:
            r->rc = sl_store_acquire(b->local, items[0].key, items[0].keylen, &limits[0], now,
                                     items[0].cost, r->lease_id, &r->d[0]);
            if (r->rc == SL_OK && !r->d[0].allowed)
                r->failed = 0;
            break;
        case SL_OP_RELEASE: {
            int got = sl_store_release(b->local, items[0].key, items[0].keylen, &limits[0], now,
                                       r->lease_id);
            if (got < 0)
                r->rc = got;
            else
                r->count = got;
            break;
        }
        case SL_OP_REFUND: {
            /* The take given back was the local limiter's too. */
            int64_t got = sl_store_refund(b->local, items[0].key, items[0].keylen, &limits[0],
                                          now, items[0].cost);
            if (got < 0)
                r->rc = (int)got;
            else
                r->count = got;
            break;
        }
        case SL_OP_CHARGE:
            /* The local limiter owes it; the store's state never heard of it. */
            r->rc = sl_store_charge(b->local, items[0].key, items[0].keylen, &limits[0], now,
                                    items[0].cost, &r->d[0]);
            break;
        case SL_OP_RESET:
            /* The local limiter forgets the keys too, but the store's states
             * are still there: the reset did not happen. */
            for (size_t k = 0; k < n; k++)
                sl_store_reset(b->local, items[k].key, items[k].keylen);
            r->rc = SL_ERR_UNAVAILABLE;
            break;
        case SL_OP_SYNC: /* answered above */
        case SL_OP_CLAIM:
            break;
        }
        return;
    }

    if (r->op == SL_OP_RESET || r->op == SL_OP_RELEASE || r->op == SL_OP_REFUND ||
        r->op == SL_OP_CHARGE) {
        /* Not decisions: nothing to open or close (a charge not made is
         * said to be, rather than admitted or refused). */
        r->rc = SL_ERR_UNAVAILABLE;
        return;
    }
    bool open = policy == SL_ON_ERROR_FAIL_OPEN;
    int64_t retry = INT64_C(1000000000);
    if (w->open) {
        uint64_t nowms = uv_now(w->loop);
        retry = w->probe_at_ms > nowms ? (int64_t)(w->probe_at_ms - nowms) * 1000000 : 1000000;
    }
    for (size_t k = 0; k < r->n; k++) {
        int64_t cap = rd_capacity(&op->items[k]);
        r->d[k] = (sl_decision){
            .allowed = open,
            .limit = cap,
            .remaining = open ? cap : 0,
            .retry_after_ns = open ? 0 : retry,
            .reset_after_ns = open ? 0 : retry,
            .lease_id = open && r->op == SL_OP_ACQUIRE ? r->lease_id : 0,
        };
    }
    if (!open)
        r->failed = 0;
}

/* ---- the breaker and the worker's health ---- */

static void rd_arm(sl_backend_worker *w);

/* Updates the health that stats() reads, and counts connections made and
 * lost: a transport bumps its epoch at each connection, so a new epoch
 * since the last look means the connection seen then is gone, even if a
 * new one came up in between. */
static void rd_refresh(sl_backend_worker *w)
{
    bool ready = w->t && w->t->ops->ready(w->t);
    if (w->t && w->t->epoch != w->seen_epoch) {
        if (w->was_ready)
            rd_add(&w->c.disconnects, 1);
        w->was_ready = false;
        w->seen_epoch = w->t->epoch;
    }
    if (ready != w->was_ready) {
        rd_add(ready ? &w->c.connects : &w->c.disconnects, 1);
        w->was_ready = ready;
    }
    int state = !ready ? SL_STORE_DOWN : w->open ? SL_STORE_BREAKER_OPEN : SL_STORE_UP;
    atomic_store_explicit(&w->state, state, memory_order_relaxed);
}

/* The wait before the breaker's next probe: 100 ms doubling to 2 s, the
 * second half of each jittered, so that a fleet's workers do not all probe
 * a recovering Redis in the same instant. */
static uint64_t rd_probe_delay(sl_backend_worker *w, unsigned attempt)
{
    uint64_t d = (uint64_t)RD_PROBE_MIN_MS << (attempt > 5 ? 5 : attempt);
    if (d > RD_PROBE_MAX_MS)
        d = RD_PROBE_MAX_MS;
    w->rng ^= w->rng << 13;
    w->rng ^= w->rng >> 7;
    w->rng ^= w->rng << 17;
    return d / 2 + w->rng % (d / 2 + 1);
}

static void rd_fail(sl_backend_worker *w)
{
    /* Over peers, one peer that fails is marked down by the transport and
     * its slots go to the next; a breaker for all of them would stop
     * asking the peers that answer. */
    if (w->open || w->b->peers)
        return;
    if (++w->fails >= RD_BREAKER_FAILURES) {
        w->open = true;
        w->probe_attempt = 0;
        w->probe_at_ms = uv_now(w->loop) + rd_probe_delay(w, 0);
        rd_add(&w->c.breaker_opens, 1);
        rd_refresh(w);
    }
}

static void rd_succeed(sl_backend_worker *w)
{
    w->fails = 0;
}

static void rd_probe_cb(void *priv, redisReply *reply, const char *err)
{
    sl_backend_worker *w = priv;
    w->probing = false;
    if (w->detaching)
        return;
    if (reply && reply->type != REDIS_REPLY_ERROR) {
        w->open = false;
        w->fails = 0;
        w->probe_attempt = 0;
    } else {
        if (reply)
            rd_set_err(w, "probe: ", reply->str, reply->len);
        else if (err)
            rd_set_err(w, "probe: ", err, strlen(err));
        w->probe_at_ms = uv_now(w->loop) + rd_probe_delay(w, ++w->probe_attempt);
    }
    rd_refresh(w);
}

static void rd_probe(sl_backend_worker *w)
{
    static const char ping[] = "*1\r\n$4\r\nPING\r\n";
    w->probing = true;
    if (w->t->ops->send(w->t, -1, ping, sizeof ping - 1, rd_probe_cb, w) != 0) {
        w->probing = false;
        w->probe_at_ms = uv_now(w->loop) + rd_probe_delay(w, ++w->probe_attempt);
    }
}

/* ---- sending ---- */

static bool rd_cmd_inline(const rd_op *op)
{
    return op->cmd >= op->buf && op->cmd < op->buf + op->buf_cap;
}

static void rd_free_op(rd_op *op)
{
    sl_backend_worker *w = op->w;
    if (op->cmd && !rd_cmd_inline(op))
        free(op->cmd);
    if (op->buf_cap == RD_OP_BUF && w->op_cached < RD_OP_CACHED)
        w->op_cache[w->op_cached++] = op;
    else
        free(op);
}

/* Answers op's request by its store-down policy (a failure of the store). */
static void rd_answer_fallback(sl_backend_worker *w, rd_op *op, bool timeout)
{
    sl_backend_req *r = op->r;
    if (!r)
        return;
    op->r = NULL;
    rd_heap_remove(w, op);
    rd_add(timeout ? &w->c.timeouts : &w->c.errors, 1);
    rd_fail(w);
    rd_fallback(w, r, op);
    r->done(r);
}

/* The RESP of one argument: "$len\r\n", the bytes, "\r\n". */
static char *rd_put_bulk(char *o, const char *p, size_t len)
{
    *o++ = '$';
    char digits[20], *d = sl_dec_put(digits + sizeof digits, len);
    memcpy(o, d, (size_t)(digits + sizeof digits - d));
    o += digits + sizeof digits - d;
    *o++ = '\r';
    *o++ = '\n';
    memcpy(o, p, len);
    o += len;
    *o++ = '\r';
    *o++ = '\n';
    return o;
}

/*
 * Formats op for the server's kind into op->cmd, as RESP: SL.DECIDE and
 * its arguments, or EVALSHA, which puts the keys before the op and the
 * lease. Written here in one pass (a command holds some forty numbers, and
 * hiredis's formatter prints each length with sprintf).
 */
static bool rd_format(sl_backend_worker *w, rd_op *op)
{
    if (op->cmd && !rd_cmd_inline(op))
        free(op->cmd);
    op->cmd = NULL;
    /* CLAIM is the script's alone: sent as EVALSHA with the module too
     * (a NOSCRIPT loads the script, and the op is sent again). */
    bool module = w->mode == RD_MODE_MODULE && op->r->op != SL_OP_CLAIM;
    int nkeys = op->r->op == SL_OP_RESET ? op->argc - 3 : (int)op->r->n;
    size_t sha_len = strlen(sl_redis_script_sha);
    int argc = op->argc + (module ? 1 : 2) - (module && op->r->op == SL_OP_SYNC ? 3 : 0);
    size_t bytes = 16 + (module ? 9 + 16 : 7 + 16 + sha_len + 16);
    for (int i = 0; i < op->argc; i++)
        bytes += op->arg_len[i] + 16; /* "$" digits "\r\n" ... "\r\n" */
    char *o = op->cmd = bytes <= op->buf_cap - op->args_used ? op->buf + op->args_used
                                                              : malloc(bytes);
    if (!o)
        return false;
    *o++ = '*';
    char digits[20], *d = sl_dec_put(digits + sizeof digits, (uint64_t)argc);
    memcpy(o, d, (size_t)(digits + sizeof digits - d));
    o += digits + sizeof digits - d;
    *o++ = '\r';
    *o++ = '\n';
#define RD_ARG(i) op->buf + op->arg_off[i], op->arg_len[i]
    if (module && op->r->op == SL_OP_SYNC) {
        /* SL.SYNC key group: without the op, the lease and numkeys. */
        o = rd_put_bulk(o, "SL.SYNC", 7);
        for (int i = 3; i < op->argc; i++)
            o = rd_put_bulk(o, RD_ARG(i));
    } else if (module) {
        o = rd_put_bulk(o, "SL.DECIDE", 9);
        for (int i = 0; i < op->argc; i++)
            o = rd_put_bulk(o, RD_ARG(i));
    } else {
        o = rd_put_bulk(o, "EVALSHA", 7);
        o = rd_put_bulk(o, sl_redis_script_sha, sha_len);
        for (int i = 2; i < 3 + nkeys; i++) /* numkeys, the keys */
            o = rd_put_bulk(o, RD_ARG(i));
        for (int i = 0; i < 2; i++) /* op, lease */
            o = rd_put_bulk(o, RD_ARG(i));
        for (int i = 3 + nkeys; i < op->argc; i++)
            o = rd_put_bulk(o, RD_ARG(i));
    }
#undef RD_ARG
    op->cmd_len = (size_t)(o - op->cmd);
    return true;
}

static void rd_op_cb(void *priv, redisReply *reply, const char *err);

/* The hash slot op goes to: its first key's in a cluster (the keys of one
 * command share a slot); -1 for one server, which holds every slot. */
static int rd_slot(const sl_backend_worker *w, const rd_op *op)
{
    return w->b->cluster || w->b->peers
               ? sl_slot_of(op->buf + op->items[0].key_off, op->items[0].key_len)
               : -1;
}

/* Formats op for the mode and hands it to the transport. Returns 0, or -1
 * when it cannot even be queued (the caller answers it). */
static int rd_try_send(sl_backend_worker *w, rd_op *op)
{
    if (!rd_format(w, op))
        return -1;
    int slot = rd_slot(w, op);
    /* Counted before the send, so that nothing touches op after it: a
     * transport may answer it (and free it) before send returns. */
    if (w->inflight++ == 0)
        w->last_progress_ms = uv_now(w->loop);
    op->sent_ns = uv_hrtime();
    if (w->t->ops->send(w->t, slot, op->cmd, op->cmd_len, rd_op_cb, op) != 0) {
        w->inflight--;
        rd_not_connected(w);
        return -1;
    }
    rd_add(&w->c.requests, 1);
    return 0;
}

/* Sends op from a callback; on failure answers it by its policy. */
static void rd_send(sl_backend_worker *w, rd_op *op)
{
    if (rd_try_send(w, op) != 0) {
        rd_answer_fallback(w, op, false);
        rd_free_op(op);
    }
}

static void rd_script_load_cb(void *priv, redisReply *reply, const char *err)
{
    sl_backend_worker *w = priv;
    if (reply && reply->type == REDIS_REPLY_ERROR)
        rd_set_err(w, "SCRIPT LOAD: ", reply->str, reply->len);
    (void)err;
}

static int rd_script_load(sl_backend_worker *w, int slot)
{
    const char *argv[3] = {"SCRIPT", "LOAD", sl_redis_script};
    size_t lens[3] = {6, 4, strlen(sl_redis_script)};
    char *cmd;
    int len = redisFormatCommandArgv(&cmd, 3, argv, lens);
    if (len < 0)
        return -1;
    int rc = w->t->ops->send(w->t, slot, cmd, (size_t)len, rd_script_load_cb, w);
    redisFreeCommand(cmd);
    return rc;
}

/* Sends (or, with the kind unknown, answers) every waiting op. */
static void rd_flush_waiting(sl_backend_worker *w)
{
    rd_op *op = w->wait_head;
    w->wait_head = w->wait_tail = NULL;
    while (op) {
        rd_op *next = op->next_wait;
        op->next_wait = NULL;
        if (!op->r) {
            rd_free_op(op); /* answered while it waited */
        } else if (!w->detaching && (w->mode == RD_MODE_MODULE || w->mode == RD_MODE_SCRIPT)) {
            rd_send(w, op);
        } else {
            rd_answer_fallback(w, op, false);
            rd_free_op(op);
        }
        op = next;
    }
}

static void rd_mode_cb(void *priv, redisReply *reply, const char *err)
{
    sl_backend_worker *w = priv;
    if (w->detaching) {
        w->mode = RD_MODE_UNKNOWN;
        return;
    }
    if (!reply) {
        rd_set_err(w, "", err, err ? strlen(err) : 0);
        w->mode = RD_MODE_UNKNOWN;
    } else if (reply->type == REDIS_REPLY_ARRAY && reply->elements >= 1 &&
               reply->element[0]->type == REDIS_REPLY_ARRAY) {
        w->mode = RD_MODE_MODULE;
    } else {
        /* [nil]: no SL.DECIDE here. An error (COMMAND renamed away) is
         * taken as no module either: the script needs nothing else. */
        w->mode = RD_MODE_SCRIPT;
    }
    atomic_store_explicit(&w->module, w->mode == RD_MODE_MODULE, memory_order_relaxed);
    /* A new connection answered: counted now, even if it is lost before
     * the next health check. */
    rd_refresh(w);
    if (w->mode == RD_MODE_SCRIPT && rd_script_load(w, -1) != 0)
        w->mode = RD_MODE_UNKNOWN;
    rd_flush_waiting(w);
}

/* Asks the server whether it runs the module, once per connection. */
static bool rd_probe_mode(sl_backend_worker *w)
{
    static const char info[] = "*3\r\n$7\r\nCOMMAND\r\n$4\r\nINFO\r\n$9\r\nsl.decide\r\n";
    w->mode = RD_MODE_PROBING;
    w->mode_epoch = w->t->epoch;
    if (w->t->ops->send(w->t, -1, info, sizeof info - 1, rd_mode_cb, w) != 0) {
        w->mode = RD_MODE_UNKNOWN;
        return false;
    }
    return true;
}

/* ---- replies ---- */

static int rd_decode(sl_backend_worker *w, sl_backend_req *r, const redisReply *reply)
{
    if (reply->type == REDIS_REPLY_ERROR) {
        rd_set_err(w, "", reply->str, reply->len);
        /* The request's own copy: last_err may change before done() returns. */
        snprintf(w->reply_err, sizeof w->reply_err, "%s", w->last_err);
        r->errstr = w->reply_err;
        rd_add(&w->c.errors, 1);
        bool wrongtype = reply->len >= 9 && memcmp(reply->str, "WRONGTYPE", 9) == 0;
        r->rc = wrongtype ? SL_ERR_WRONGTYPE : SL_ERR_ARGUMENT;
        /* The store's own words: what the key holds there (a state of
         * another algorithm, or a value that is no state at all) is for it
         * to say. */
        r->errstr_is_reply = wrongtype;
        return SL_OK;
    }
    if (r->op == SL_OP_RESET || r->op == SL_OP_RELEASE || r->op == SL_OP_REFUND) {
        if (reply->type != REDIS_REPLY_INTEGER)
            return SL_ERR_UNAVAILABLE;
        r->count = reply->integer;
        r->rc = SL_OK;
        return SL_OK;
    }
    if (r->op == SL_OP_CLAIM) {
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
            reply->element[0]->type != REDIS_REPLY_INTEGER ||
            reply->element[1]->type != REDIS_REPLY_INTEGER)
            return SL_ERR_UNAVAILABLE;
        long long id = reply->element[0]->integer, nodes = reply->element[1]->integer;
        if (id < -1 || id >= SL_QUOTA_NODES_MAX || nodes < 0 || nodes > SL_QUOTA_NODES_MAX)
            return SL_ERR_UNAVAILABLE;
        r->claim->id = (int)id;
        r->claim->nodes = (int)nodes;
        r->rc = SL_OK;
        return SL_OK;
    }
    if (r->op == SL_OP_SYNC) {
        /* hold, rate, remaining: a lease the node can hold (never
         * negative, never above the burst's sub-units). */
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3)
            return SL_ERR_UNAVAILABLE;
        for (size_t i = 0; i < 3; i++)
            if (reply->element[i]->type != REDIS_REPLY_INTEGER)
                return SL_ERR_UNAVAILABLE;
        long long hold = reply->element[0]->integer, rate = reply->element[1]->integer;
        if (hold < 0 || hold > SL_QUOTA_UNITS_MAX * SL_QUOTA_SCALE || rate < 0 ||
            rate > SL_QUOTA_UNITS_MAX * SL_QUOTA_SCALE)
            return SL_ERR_UNAVAILABLE;
        r->sync->grant = (sl_quota_grant){hold, rate};
        r->sync->remaining = reply->element[2]->integer;
        r->rc = SL_OK;
        return SL_OK;
    }
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 1 + 6 * r->n)
        return SL_ERR_UNAVAILABLE;
    for (size_t i = 0; i < reply->elements; i++)
        if (reply->element[i]->type != REDIS_REPLY_INTEGER)
            return SL_ERR_UNAVAILABLE;
    long long failed = reply->element[0]->integer;
    if (failed < -1 || failed >= (long long)r->n)
        return SL_ERR_UNAVAILABLE;
    r->failed = (int)failed;
    for (size_t k = 0; k < r->n; k++) {
        redisReply *const *e = &reply->element[1 + 6 * k];
        r->d[k] = (sl_decision){
            .allowed = e[0]->integer != 0,
            .limit = e[1]->integer,
            .remaining = e[2]->integer,
            .retry_after_ns = e[3]->integer == -1 ? SL_NEVER : e[3]->integer,
            .reset_after_ns = e[4]->integer,
            .delay_ns = e[5]->integer,
            .lease_id = r->op == SL_OP_ACQUIRE && e[0]->integer ? r->lease_id : 0,
        };
    }
    r->rc = SL_OK;
    return SL_OK;
}

static bool rd_is_noscript(const redisReply *reply)
{
    return reply && reply->type == REDIS_REPLY_ERROR && reply->len >= 8 &&
           memcmp(reply->str, "NOSCRIPT", 8) == 0;
}

static bool rd_prefix(const redisReply *reply, const char *p)
{
    size_t n = strlen(p);
    return reply->len >= n && memcmp(reply->str, p, n) == 0;
}

/*
 * Whether an error reply is the store's answer to this request (bad
 * arguments: "ERR ...", a key of another type: "WRONGTYPE ..."), which the
 * request is answered with, or says the store cannot serve now (LOADING,
 * BUSY, READONLY after a failover, OOM, MASTERDOWN, CLUSTERDOWN, NOSCRIPT
 * after a failed load, an unknown command once the module is gone...),
 * which its store-down policy answers and the breaker counts.
 */
static bool rd_is_answer(const redisReply *reply)
{
    if (rd_prefix(reply, "WRONGTYPE"))
        return true;
    return rd_prefix(reply, "ERR ") && !rd_prefix(reply, "ERR unknown command");
}

static void rd_op_cb(void *priv, redisReply *reply, const char *err)
{
    rd_op *op = priv;
    sl_backend_worker *w = op->w;
    w->inflight--;
    w->last_progress_ms = uv_now(w->loop);
    if (reply && op->r)
        rd_rtt(&w->c, uv_hrtime() - op->sent_ns);

    if (rd_is_noscript(reply) && op->r && !op->resent && !w->detaching) {
        /* The script cache was flushed (SCRIPT FLUSH, a restart that
         * kept the connection's epoch): load it again and resend, in
         * order, on the same connection. */
        op->resent = true;
        int slot = rd_slot(w, op);
        w->inflight++;
        if (rd_script_load(w, slot) == 0 &&
            w->t->ops->send(w->t, slot, op->cmd, op->cmd_len, rd_op_cb, op) == 0)
            return;
        w->inflight--;
    }
    sl_backend_req *r = op->r;
    if (!r) {
        rd_free_op(op); /* answered by its policy already: the late reply is dropped */
        return;
    }
    if (!reply) {
        rd_set_err(w, "", err, err ? strlen(err) : 0);
        rd_answer_fallback(w, op, false);
        rd_free_op(op);
        rd_refresh(w);
        return;
    }
    if (reply->type == REDIS_REPLY_ERROR && !rd_is_answer(reply)) {
        rd_set_err(w, "", reply->str, reply->len);
        if (rd_prefix(reply, "ERR unknown command"))
            w->mode = RD_MODE_UNKNOWN; /* ask again what the server runs */
        rd_answer_fallback(w, op, false);
        rd_free_op(op);
        return;
    }
    if (rd_decode(w, r, reply) != SL_OK) {
        rd_set_err(w, r->op == SL_OP_SYNC    ? "unexpected reply to SL.SYNC / EVALSHA"
                      : r->op == SL_OP_CLAIM ? "unexpected reply to the script's CLAIM"
                                             : "unexpected reply to SL.DECIDE / EVALSHA",
                   NULL, 0);
        rd_answer_fallback(w, op, false);
        rd_free_op(op);
        return;
    }
    rd_succeed(w);
    op->r = NULL;
    rd_heap_remove(w, op);
    r->by = SL_DECIDED_BY_STORE;
    rd_free_op(op);
    r->done(r);
}

/* ---- the timer ---- */

/* How long a connection with commands out may answer nothing before it is
 * dropped: ten default budgets, at least a second, and at least the
 * longest budget a request has had (a policy that waits 5 s is not cut at
 * 1 s by the watchdog). */
static uint64_t rd_stall_ms(const sl_backend_worker *w)
{
    uint64_t s = (uint64_t)w->b->timeout_ms * 10;
    if (s < RD_STALL_MIN_MS)
        s = RD_STALL_MIN_MS;
    return s < w->longest_budget_ms ? w->longest_budget_ms : s;
}

static void rd_reconnect(sl_backend_worker *w);

static void rd_tick(uv_timer_t *timer)
{
    sl_backend_worker *w = timer->data;
    uint64_t now = uv_now(w->loop);
    while (w->heap_n > 0 && w->heap[0]->deadline_ms <= now) {
        rd_op *op = w->heap[0];
        rd_set_err(w, "timed out", NULL, 0);
        /* The op stays (waiting or in the transport): its reply finds
         * op->r NULL and is dropped. */
        rd_answer_fallback(w, op, true);
    }
    if (w->inflight > 0 && now - w->last_progress_ms >= rd_stall_ms(w)) {
        rd_set_err(w, "no reply for too long: reconnecting", NULL, 0);
        rd_reconnect(w);
    }
    if (w->open && !w->probing && now >= w->probe_at_ms)
        rd_probe(w);
    rd_refresh(w);
    rd_arm(w);
}

/* Wakes at the first deadline, or the breaker's probe, or the next health
 * check, whichever comes first. */
static void rd_arm(sl_backend_worker *w)
{
    if (w->detaching)
        return;
    uint64_t now = uv_now(w->loop);
    uint64_t at = now + RD_TICK_MS;
    if (w->heap_n > 0 && w->heap[0]->deadline_ms < at)
        at = w->heap[0]->deadline_ms;
    if (w->open && !w->probing && w->probe_at_ms < at)
        at = w->probe_at_ms;
    uv_timer_start(&w->timer, rd_tick, at > now ? at - now : 0, 0);
}

static sl_transport *rd_transport_new(sl_backend_worker *w)
{
    const rd_backend *b = w->b;
    if (b->peers)
        return sl_transport_peers(w->loop, b->peers, b->password, b->connect_timeout_ms);
    sl_transport_config tc = {b->hosts, b->user, b->password, b->db, b->connect_timeout_ms};
    return b->cluster ? sl_transport_cluster(w->loop, &tc) : sl_transport_single(w->loop, &tc);
}

/* Drops a connection that answers nothing: every command in it is answered
 * by its policy (the transport calls back with an error), then a new one
 * is made, whose server's kind is asked again. */
static void rd_reconnect(sl_backend_worker *w)
{
    sl_transport *old = w->t;
    sl_transport *t = rd_transport_new(w);
    if (!t)
        return; /* out of memory: keep the old one */
    w->t = t;
    w->mode = RD_MODE_UNKNOWN;
    w->probing = false;
    w->seen_epoch = 0;
    old->ops->close(old);
    w->inflight = 0;
}

/* ---- the backend's ops ---- */

static void rd_fmt_int(rd_op *op, size_t *used, int64_t v)
{
    char digits[21], *end = digits + sizeof digits;
    char *d = sl_dec_put(end, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
    if (v < 0)
        *--d = '-';
    size_t len = (size_t)(end - d);
    memcpy(op->buf + *used, d, len);
    op->arg_off[op->argc] = (uint32_t)*used;
    op->arg_len[op->argc++] = (uint32_t)len;
    *used += len;
}

static void rd_put(rd_op *op, size_t *used, const void *p, size_t len)
{
    memcpy(op->buf + *used, p, len);
    op->arg_off[op->argc] = (uint32_t)*used;
    op->arg_len[op->argc++] = (uint32_t)len;
    *used += len;
}

/* Copies r's items into a new op as SL.DECIDE's arguments (without the
 * command's name). NULL when out of memory. */
static rd_op *rd_op_new(sl_backend_worker *w, sl_backend_req *r)
{
    static const char *const ops[] = {"TAKE",   "PEEK",   "RESET", "ACQUIRE", "RELEASE",
                                      "REFUND", "CHARGE", "SYNC",  "CLAIM"};
    size_t bytes = 3 * RD_NUM + 16;
    for (size_t k = 0; k < r->n; k++)
        bytes += r->items[k].keylen + RD_SYNC_ARGS * RD_NUM + 16;
    rd_op *op;
    if (bytes <= RD_OP_BUF / 2 && w->op_cached > 0) {
        op = w->op_cache[--w->op_cached];
    } else {
        size_t cap = bytes <= RD_OP_BUF / 2 ? RD_OP_BUF : bytes;
        op = malloc(sizeof *op + cap);
        if (!op)
            return NULL;
        op->buf_cap = cap;
    }
    op->w = w;
    op->r = r;
    op->heap = SIZE_MAX;
    op->next_wait = NULL;
    op->resent = false;
    op->cmd = NULL;
    op->argc = 0;
    size_t used = 0;
    rd_put(op, &used, ops[r->op], strlen(ops[r->op]));
    if (r->op == SL_OP_ACQUIRE || r->op == SL_OP_RELEASE) {
        char hex[16];
        sl_hex_put(hex, r->lease_id, 16);
        rd_put(op, &used, hex, 16);
    } else {
        rd_put(op, &used, "0", 1);
    }
    rd_fmt_int(op, &used, (int64_t)r->n);
    for (size_t k = 0; k < r->n; k++) {
        const sl_take_item *in = &r->items[k];
        rd_item *it = &op->items[k];
        rd_put(op, &used, in->key, in->keylen);
        it->key_off = (uint32_t)op->arg_off[op->argc - 1];
        it->key_len = (uint32_t)in->keylen;
        const sl_limit *l = in->limit;
        if (r->op == SL_OP_RESET || !l) {
            *it = (rd_item){.key_off = it->key_off, .key_len = it->key_len};
            continue;
        }
        it->algorithm = l->algorithm;
        it->flags = l->flags;
        it->limit = l->limit;
        it->period_ns = l->period_ns;
        it->burst = l->burst;
        it->months = l->months;
        it->reset_day = l->reset_day;
        it->utc_offset_ns = l->utc_offset_ns;
        it->cost = r->op == SL_OP_RELEASE ? 0 : in->cost;
    }
    if (r->op == SL_OP_RESET) {
        op->args_used = used;
        return op;
    }
    if (r->op == SL_OP_CLAIM) {
        rd_put(op, &used, r->claim->token, strlen(r->claim->token));
        rd_fmt_int(op, &used, r->claim->ttl_ms);
        op->args_used = used;
        return op;
    }
    if (r->op == SL_OP_SYNC) {
        /* algorithm limit period_ns burst interval_ns nodes node admitted asked length_ns
         * carry (RD_SYNC_ARGS). */
        const rd_item *it = &op->items[0];
        const sl_sync_call *y = r->sync;
        const char *name = sl_algorithm_name(it->algorithm);
        rd_put(op, &used, name, strlen(name));
        const int64_t v[] = {it->limit,           it->period_ns,        it->burst,
                             y->interval_ns,      y->nodes,             y->report.node,
                             y->report.admitted,  y->report.asked,      y->report.length_ns,
                             y->report.carry};
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
            rd_fmt_int(op, &used, v[i]);
        op->args_used = used;
        return op;
    }
    for (size_t k = 0; k < r->n; k++) {
        const rd_item *it = &op->items[k];
        if (it->flags & SL_LIMIT_CELL) {
            /* sl_limit_init_cell keeps CL.THROTTLE's arguments exactly:
             * limit = count, burst = max_burst + 1, period = seconds * 1e9. */
            rd_put(op, &used, "cell", 4);
            rd_fmt_int(op, &used, it->burst - 1);
            rd_fmt_int(op, &used, it->limit);
            rd_fmt_int(op, &used, it->period_ns / 1000000000);
        } else {
            const char *name = sl_algorithm_name(it->algorithm);
            rd_put(op, &used, name, strlen(name));
            rd_fmt_int(op, &used, it->limit);
            rd_fmt_int(op, &used, it->period_ns);
            rd_fmt_int(op, &used, it->algorithm == SL_CONCURRENCY ? 0 : it->burst);
        }
        rd_fmt_int(op, &used, it->cost);
        bool cell = it->flags & SL_LIMIT_CELL;
        rd_fmt_int(op, &used, cell ? 0 : it->months);
        rd_fmt_int(op, &used, cell ? 0 : it->utc_offset_ns);
        rd_fmt_int(op, &used,
                   ((it->flags & SL_LIMIT_CARRY) ? 1 : 0) |
                       (cell ? 0 : it->reset_day << RD_FLAG_DAY_SHIFT));
    }
    op->args_used = used;
    return op;
}

static bool rd_valid(const sl_backend_req *r)
{
    if (r->n < 1 || r->n > SL_TAKE_MANY_MAX || !r->items)
        return false;
    if ((r->op == SL_OP_ACQUIRE || r->op == SL_OP_RELEASE) && (r->n != 1 || r->lease_id == 0))
        return false;
    if ((r->op == SL_OP_REFUND || r->op == SL_OP_CHARGE) && r->n != 1)
        return false;
    if (r->op == SL_OP_SYNC && (r->n != 1 || !r->sync || !r->items[0].limit))
        return false;
    if (r->op == SL_OP_CLAIM &&
        (r->n != 1 || !r->claim || !r->claim->token || strlen(r->claim->token) > 64))
        return false;
    if (r->op != SL_OP_RESET && r->op != SL_OP_SYNC && r->op != SL_OP_CLAIM) {
        if (!r->d)
            return false;
        for (size_t k = 0; k < r->n; k++)
            if (!r->items[k].limit)
                return false;
    }
    for (size_t k = 0; k < r->n; k++)
        if (!r->items[k].key || r->items[k].keylen == 0 || r->items[k].keylen > RD_KEY_MAX)
            return false;
    return r->op <= SL_OP_CLAIM;
}

/* Answers r by its policy inside submit (a store that cannot even be
 * asked); returns submit's SL_OK. */
static int rd_fail_now(sl_backend_worker *w, sl_backend_req *r, rd_op *op)
{
    op->r = NULL;
    rd_heap_remove(w, op);
    rd_add(&w->c.errors, 1);
    rd_fail(w);
    rd_fallback(w, r, op);
    rd_free_op(op);
    rd_arm(w);
    return SL_OK;
}

static int rd_submit(sl_backend_worker *w, sl_backend_req *r);

/*
 * A request that one SL.DECIDE cannot carry, sent as parts that are each a
 * request of their own (their own budget and store-down answer): a RESET of
 * more keys than SL.DECIDE takes, and in a cluster a RESET or a PEEK of keys
 * in several hash slots (one key a part). The parts go out together; the
 * caller's request is answered when the last is: counts summed, decisions
 * in place, the first error kept.
 */
typedef struct rd_fan {
    sl_backend_req *parent;
    size_t left; /* parts not answered yet */
    bool submitting;
    sl_backend_req parts[];
} rd_fan;

/* The end of a fanned-out request: its failed index, from the decisions. */
static void rd_fan_finish(sl_backend_req *p)
{
    if (p->op != SL_OP_PEEK || p->rc != SL_OK)
        return;
    for (size_t k = 0; k < p->n && p->failed < 0; k++)
        if (!p->d[k].allowed)
            p->failed = (int)k;
}

static void rd_fan_part_done(sl_backend_req *part)
{
    rd_fan *f = part->owner;
    sl_backend_req *p = f->parent;
    if (part->rc != SL_OK && p->rc == SL_OK)
        p->rc = part->rc; /* its words (errstr) do not outlive the part's done() */
    if (part->by != SL_DECIDED_BY_STORE)
        p->by = part->by;
    p->count += part->count;
    if (--f->left > 0 || f->submitting)
        return;
    free(f);
    rd_fan_finish(p);
    p->done(p);
}

static int rd_fan_out(sl_backend_worker *w, sl_backend_req *r, size_t per_part)
{
    size_t parts = (r->n + per_part - 1) / per_part;
    rd_fan *f = calloc(1, sizeof *f + parts * sizeof f->parts[0]);
    if (!f) {
        r->rc = SL_ERR_NOMEM;
        return SL_OK;
    }
    f->parent = r;
    f->left = parts;
    f->submitting = true;
    r->rc = SL_OK;
    for (size_t i = 0; i < parts; i++) {
        sl_backend_req *q = &f->parts[i];
        size_t first = i * per_part;
        *q = (sl_backend_req){
            .op = r->op,
            .n = r->n - first < per_part ? r->n - first : per_part,
            .items = r->items + first,
            .on_error = r->on_error,
            .timeout_ms = r->timeout_ms,
            .d = r->d ? r->d + first : NULL,
            .done = rd_fan_part_done,
            .owner = f,
        };
        if (rd_submit(w, q) != SL_PENDING)
            rd_fan_part_done(q); /* answered in the call: counted now */
    }
    f->submitting = false;
    if (f->left > 0)
        return SL_PENDING;
    free(f);
    rd_fan_finish(r);
    return SL_OK;
}

/*
 * All or nothing over keys of several hash slots, which no one command can
 * take (CROSSSLOT): the keys are taken in order, one command each; when one
 * refuses, those before it are given back (SL.DECIDE REFUND) and those after
 * it peeked, so that the answer reads as one take of them all would. Until
 * the give-backs land, a concurrent request may find an earlier key's units
 * taken (docs/deployment.md): stricter for that moment, never looser. A
 * give-back that the store cannot take leaves the units taken.
 */
typedef struct rd_split {
    sl_backend_worker *w;
    sl_backend_req *parent;
    size_t n, at, taken; /* items; the one being asked; those taken so far */
    sl_backend_req part;
    sl_take_item items[SL_TAKE_MANY_MAX];
    sl_limit limits[SL_TAKE_MANY_MAX];
    char keys[]; /* the items' keys, copied: the caller's are gone after submit */
} rd_split;

/* A give-back in flight: its own copy of what it gives back. */
typedef struct rd_giveback {
    sl_backend_req req;
    sl_take_item item;
    sl_limit limit;
    sl_decision d;
    char key[];
} rd_giveback;

static void rd_giveback_done(sl_backend_req *r)
{
    free(r->owner);
}

static void rd_give_back(sl_backend_worker *w, const rd_split *s, size_t k)
{
    const sl_take_item *it = &s->items[k];
    rd_giveback *g = malloc(sizeof *g + it->keylen);
    if (!g)
        return; /* out of memory: the units stay taken (stricter, never looser) */
    memcpy(g->key, it->key, it->keylen);
    g->limit = s->limits[k];
    g->item = (sl_take_item){g->key, it->keylen, &g->limit, it->cost};
    g->req = (sl_backend_req){
        .op = SL_OP_REFUND,
        .n = 1,
        .items = &g->item,
        .on_error = s->parent->on_error,
        .timeout_ms = s->parent->timeout_ms,
        .d = &g->d,
        .done = rd_giveback_done,
        .owner = g,
    };
    if (rd_submit(w, &g->req) != SL_PENDING)
        rd_giveback_done(&g->req);
}

static void rd_split_done(sl_backend_req *part);

/* The answer of the part for item s->at. */
static void rd_split_answer(rd_split *s)
{
    sl_backend_req *p = s->parent, *part = &s->part;
    if (part->by != SL_DECIDED_BY_STORE)
        p->by = part->by;
    if (part->rc != SL_OK)
        p->rc = part->rc;
    else if (part->op == SL_OP_TAKE && p->d[s->at].allowed)
        s->taken++;
    else if (part->op == SL_OP_TAKE)
        p->failed = (int)s->at;
    s->at++;
}

/* Sends the parts from s->at on: a take while every key so far admitted,
 * a peek after one refused. SL_PENDING when one is in flight, SL_OK when
 * all are answered (or one failed). */
static int rd_split_send(rd_split *s)
{
    sl_backend_req *p = s->parent;
    while (s->at < s->n && p->rc == SL_OK) {
        s->part = (sl_backend_req){
            .op = p->failed >= 0 ? SL_OP_PEEK : SL_OP_TAKE,
            .n = 1,
            .items = &s->items[s->at],
            .on_error = p->on_error,
            .timeout_ms = p->timeout_ms,
            .d = &p->d[s->at],
            .done = rd_split_done,
            .owner = s,
        };
        if (rd_submit(s->w, &s->part) == SL_PENDING)
            return SL_PENDING;
        rd_split_answer(s);
    }
    return SL_OK;
}

/* Every part is in: a refused (or failed) whole gives back what its first
 * keys took. */
static void rd_split_finish(rd_split *s)
{
    sl_backend_req *p = s->parent;
    if (p->failed >= 0 || p->rc != SL_OK)
        for (size_t k = 0; k < s->taken; k++)
            rd_give_back(s->w, s, k);
    free(s);
}

static void rd_split_done(sl_backend_req *part)
{
    rd_split *s = part->owner;
    rd_split_answer(s);
    if (rd_split_send(s) == SL_PENDING)
        return;
    sl_backend_req *p = s->parent;
    rd_split_finish(s);
    p->done(p);
}

static int rd_take_split(sl_backend_worker *w, sl_backend_req *r)
{
    size_t keys = 0;
    for (size_t k = 0; k < r->n; k++)
        keys += r->items[k].keylen;
    rd_split *s = malloc(sizeof *s + keys);
    if (!s) {
        r->rc = SL_ERR_NOMEM;
        return SL_OK;
    }
    s->w = w;
    s->parent = r;
    s->n = r->n;
    s->at = s->taken = 0;
    char *kp = s->keys;
    for (size_t k = 0; k < r->n; k++) {
        memcpy(kp, r->items[k].key, r->items[k].keylen);
        s->limits[k] = *r->items[k].limit;
        s->items[k] = (sl_take_item){kp, r->items[k].keylen, &s->limits[k], r->items[k].cost};
        kp += r->items[k].keylen;
    }
    r->rc = SL_OK;
    r->failed = -1;
    if (rd_split_send(s) == SL_PENDING)
        return SL_PENDING;
    rd_split_finish(s);
    return SL_OK;
}

/* Do a request's keys share one hash slot (always, on one server)? */
static bool rd_one_slot(const sl_backend_worker *w, const sl_backend_req *r)
{
    if ((!w->b->cluster && !w->b->peers) || r->n < 2)
        return true;
    int first = sl_slot_of(r->items[0].key, r->items[0].keylen);
    for (size_t k = 1; k < r->n; k++)
        if (sl_slot_of(r->items[k].key, r->items[k].keylen) != first)
            return false;
    return true;
}

static int rd_submit(sl_backend_worker *w, sl_backend_req *r)
{
    r->errstr = NULL;
    r->by = SL_DECIDED_BY_STORE;
    r->failed = -1;
    r->count = 0;
    if (r->op == SL_OP_RESET && r->n > SL_TAKE_MANY_MAX && r->items)
        return rd_fan_out(w, r, rd_one_slot(w, r) ? SL_TAKE_MANY_MAX : 1);
    if (!rd_valid(r)) {
        r->rc = SL_ERR_ARGUMENT;
        return SL_OK;
    }
    if (!rd_one_slot(w, r)) /* a cluster: the keys live on several primaries */
        return r->op == SL_OP_TAKE ? rd_take_split(w, r) : rd_fan_out(w, r, 1);
    rd_op *op = rd_op_new(w, r);
    if (!op) {
        r->rc = SL_ERR_NOMEM;
        return SL_OK;
    }
    if (w->open || w->detaching || w->heap_n >= RD_INFLIGHT_MAX) {
        /* The breaker is open (or so many wait on a slow store that more
         * would only hold memory): decide now, with no round trip. */
        op->r = NULL;
        rd_fallback(w, r, op);
        rd_free_op(op);
        return SL_OK;
    }
    int32_t budget = r->timeout_ms > 0 ? r->timeout_ms : w->b->timeout_ms;
    op->deadline_ms = uv_now(w->loop) + (uint64_t)budget;
    if ((uint64_t)budget > w->longest_budget_ms)
        w->longest_budget_ms = (uint64_t)budget;
    op->seq = w->seq++;
    if (!rd_heap_push(w, op)) {
        rd_free_op(op);
        r->rc = SL_ERR_NOMEM;
        return SL_OK;
    }
    bool earliest = op->heap == 0; /* read now: op may be answered once it is sent */
    /* A failure from here is answered in the call: done() must not run
     * inside submit. */
    bool known = w->mode_epoch == w->t->epoch &&
                 (w->mode == RD_MODE_MODULE || w->mode == RD_MODE_SCRIPT);
    bool asking = w->mode == RD_MODE_PROBING && w->mode_epoch == w->t->epoch;
    if (!known && !asking && !rd_probe_mode(w)) {
        rd_not_connected(w);
        return rd_fail_now(w, r, op);
    }
    if (w->mode == RD_MODE_PROBING) {
        if (w->wait_tail)
            w->wait_tail->next_wait = op;
        else
            w->wait_head = op;
        w->wait_tail = op;
    } else if (rd_try_send(w, op) != 0) {
        return rd_fail_now(w, r, op);
    }
    if (earliest)
        rd_arm(w);
    return SL_PENDING;
}

static void rd_timer_closed(uv_handle_t *h)
{
    sl_backend_worker *w = h->data;
    while (w->op_cached > 0)
        free(w->op_cache[--w->op_cached]);
    free(w);
    sl_reply_pool_drain(); /* this thread's transports are closed */
}

static void rd_merge(rd_counters *to, rd_counters *from)
{
    rd_add(&to->requests, rd_get(&from->requests));
    rd_add(&to->errors, rd_get(&from->errors));
    rd_add(&to->timeouts, rd_get(&from->timeouts));
    rd_add(&to->connects, rd_get(&from->connects));
    rd_add(&to->disconnects, rd_get(&from->disconnects));
    rd_add(&to->breaker_opens, rd_get(&from->breaker_opens));
    for (int i = 0; i < SL_RTT_BUCKETS; i++)
        rd_add(&to->rtt[i], rd_get(&from->rtt[i]));
    rd_add(&to->rtt_sum_ns, rd_get(&from->rtt_sum_ns));
}

static sl_backend_worker *rd_attach(sl_backend *base, uv_loop_t *loop, const int64_t *now,
                                    const char **err)
{
    rd_backend *b = (rd_backend *)base;
    sl_backend_worker *w = calloc(1, sizeof *w);
    if (!w) {
        *err = "out of memory";
        return NULL;
    }
    w->b = b;
    w->loop = loop;
    w->now = now;
    w->mode = RD_MODE_UNKNOWN;
    w->rng = (uv_hrtime() ^ (uint64_t)(uintptr_t)w) | 1;
    if (uv_timer_init(loop, &w->timer) != 0) {
        free(w);
        *err = "cannot create the store's timer";
        return NULL;
    }
    w->timer.data = w;
    w->t = rd_transport_new(w);
    if (!w->t) {
        uv_close((uv_handle_t *)&w->timer, rd_timer_closed);
        *err = b->cluster ? "the Redis Cluster transport is not built in this version"
                          : "out of memory";
        return NULL;
    }
    w->mode_epoch = w->t->epoch;
    pthread_mutex_lock(&b->lock);
    w->next = b->workers;
    b->workers = w;
    pthread_mutex_unlock(&b->lock);
    rd_refresh(w);
    rd_arm(w);
    return w;
}

static void rd_detach(sl_backend_worker *w)
{
    rd_backend *b = w->b;
    w->detaching = true;
    uv_timer_stop(&w->timer);
    /* Commands in the transport come back with an error (and are answered
     * by their policy); the ops still waiting for the server's kind next. */
    w->t->ops->close(w->t);
    w->t = NULL;
    rd_flush_waiting(w);
    while (w->heap_n > 0)
        rd_answer_fallback(w, w->heap[0], false);
    free(w->heap);
    w->heap = NULL;
    pthread_mutex_lock(&b->lock);
    for (sl_backend_worker **p = &b->workers; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            break;
        }
    rd_merge(&b->retired, &w->c);
    pthread_mutex_unlock(&b->lock);
    uv_close((uv_handle_t *)&w->timer, rd_timer_closed);
}

static void rd_stats(sl_backend *base, sl_backend_stats *out)
{
    rd_backend *b = (rd_backend *)base;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&b->lock);
    rd_counters sum;
    memset(&sum, 0, sizeof sum);
    rd_merge(&sum, &b->retired);
    int state = b->workers ? SL_STORE_UP : SL_STORE_DOWN;
    for (sl_backend_worker *w = b->workers; w; w = w->next) {
        rd_merge(&sum, &w->c);
        int s = atomic_load_explicit(&w->state, memory_order_relaxed);
        /* The worst: down, then breaker open, then up. */
        if (s == SL_STORE_DOWN || (s == SL_STORE_BREAKER_OPEN && state == SL_STORE_UP))
            state = s;
        if (atomic_load_explicit(&w->module, memory_order_relaxed))
            out->module = true;
    }
    pthread_mutex_unlock(&b->lock);
    out->state = (sl_store_state)state;
    out->requests = rd_get(&sum.requests);
    out->errors = rd_get(&sum.errors);
    out->timeouts = rd_get(&sum.timeouts);
    out->connects = rd_get(&sum.connects);
    out->disconnects = rd_get(&sum.disconnects);
    out->breaker_opens = rd_get(&sum.breaker_opens);
    for (int i = 0; i < SL_RTT_BUCKETS; i++)
        out->rtt[i] = rd_get(&sum.rtt[i]);
    out->rtt_sum_ns = rd_get(&sum.rtt_sum_ns);
}

static void rd_free(sl_backend *base)
{
    rd_backend *b = (rd_backend *)base;
    if (!b)
        return;
    if (b->local)
        sl_store_free(b->local);
    pthread_mutex_destroy(&b->lock);
    free(b->hosts);
    free(b->user);
    free(b->password);
    free(b);
}

static const sl_backend_ops rd_ops = {
    .name = "redis",
    .attach = rd_attach,
    .detach = rd_detach,
    .submit = rd_submit,
    .stats = rd_stats,
    .free = rd_free,
};

static const sl_backend_ops rd_peers_ops = {
    .name = "peers",
    .attach = rd_attach,
    .detach = rd_detach,
    .submit = rd_submit,
    .stats = rd_stats,
    .free = rd_free,
};

static const sl_backend_ops rd_cluster_ops = {
    .name = "redis-cluster",
    .attach = rd_attach,
    .detach = rd_detach,
    .submit = rd_submit,
    .stats = rd_stats,
    .free = rd_free,
};

/* ---- the URL ---- */

/* A percent-decoded copy of [p, p + len) (the caller frees), or NULL for a
 * bad escape (*bad set) or out of memory. */
static char *rd_unescape(const char *p, size_t len, bool *bad)
{
    char *out = malloc(len + 1), *o = out;
    if (!out)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        if (p[i] == '%') {
            int hi = i + 2 < len ? sl_hex_digit((unsigned char)p[i + 1]) : -1;
            int lo = i + 2 < len ? sl_hex_digit((unsigned char)p[i + 2]) : -1;
            if (hi < 0 || lo < 0 || (hi << 4 | lo) == 0) {
                *bad = true;
                free(out);
                return NULL;
            }
            *o++ = (char)(hi << 4 | lo);
            i += 2;
        } else {
            *o++ = p[i];
        }
    }
    *o = '\0';
    return out;
}

static bool rd_port_ok(const char *p, size_t len)
{
    int64_t v;
    return sl_parse_i64(p, len, SL_INT_NO_SIGN, &v) && v >= 1 && v <= 65535;
}

/* Checks one "host:port" of a URL and appends it, without an IPv6
 * literal's brackets, to hosts (room for the whole URL). */
static bool rd_host(const char *p, size_t len, char *hosts, char *err, size_t n)
{
    const char *host = p, *port;
    size_t hlen;
    if (len > 0 && p[0] == '[') {
        const char *close = memchr(p, ']', len);
        if (!close || close + 1 == p + len || close[1] != ':') {
            snprintf(err, n, "ERR invalid --store URL: an IPv6 host is [address]:port");
            return false;
        }
        host = p + 1;
        hlen = (size_t)(close - host);
        port = close + 2;
    } else {
        const char *colon = memchr(p, ':', len);
        if (!colon) {
            snprintf(err, n, "ERR invalid --store URL: host '%.*s' has no port (host:port)",
                     (int)(len > 64 ? 64 : len), p);
            return false;
        }
        hlen = (size_t)(colon - p);
        port = colon + 1;
    }
    size_t plen = (size_t)(p + len - port);
    if (hlen == 0) {
        snprintf(err, n, "ERR invalid --store URL: a host is empty");
        return false;
    }
    if (!rd_port_ok(port, plen)) {
        snprintf(err, n, "ERR invalid --store URL: port '%.*s' is not a number between 1 and 65535",
                 (int)(plen > 16 ? 16 : plen), port);
        return false;
    }
    if (hosts[0])
        strcat(hosts, ",");
    strncat(hosts, host, hlen);
    strcat(hosts, ":");
    strncat(hosts, port, plen);
    return true;
}

static int rd_parse_url(rd_backend *b, const char *url, char *err, size_t n)
{
    const char *p;
    if (strncmp(url, "redis://", 8) == 0) {
        p = url + 8;
    } else if (strncmp(url, "redis-cluster://", 16) == 0) {
        p = url + 16;
        b->cluster = true;
    } else {
        snprintf(err, n, "ERR invalid --store URL: the scheme is redis:// or redis-cluster://");
        return SL_ERR_ARGUMENT;
    }
    size_t len = strcspn(p, "/?");
    const char *rest = p + len;
    /* userinfo@ (the last '@' of the authority: a password may hold '@'
     * only escaped, but be lenient). */
    const char *at = NULL;
    for (const char *q = p; q < rest; q++)
        if (*q == '@')
            at = q;
    bool bad = false;
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        if (!colon) {
            snprintf(err, n, "ERR invalid --store URL: the user has no password "
                             "(redis://user:password@host:port)");
            return SL_ERR_ARGUMENT;
        }
        if (colon > p && !(b->user = rd_unescape(p, (size_t)(colon - p), &bad)))
            goto fail;
        if (!(b->password = rd_unescape(colon + 1, (size_t)(at - colon - 1), &bad)))
            goto fail;
        len -= (size_t)(at + 1 - p);
        p = at + 1;
    }
    b->hosts = calloc(1, len + 2);
    if (!b->hosts)
        goto fail;
    if (len == 0) {
        snprintf(err, n, "ERR invalid --store URL: no host:port");
        return SL_ERR_ARGUMENT;
    }
    for (const char *h = p; h < p + len;) {
        const char *comma = memchr(h, ',', (size_t)(p + len - h));
        const char *end = comma ? comma : p + len;
        if (!b->cluster && comma) {
            snprintf(err, n, "ERR invalid --store URL: redis:// takes one host:port "
                             "(redis-cluster:// takes several)");
            return SL_ERR_ARGUMENT;
        }
        if (!rd_host(h, (size_t)(end - h), b->hosts, err, n))
            return SL_ERR_ARGUMENT;
        h = comma ? comma + 1 : end;
        if (comma && h == p + len) {
            snprintf(err, n, "ERR invalid --store URL: a host is empty");
            return SL_ERR_ARGUMENT;
        }
    }
    if (*rest == '/') {
        const char *db = rest + 1;
        size_t dlen = strcspn(db, "?");
        rest = db + dlen;
        if (dlen > 0) {
            int64_t v;
            if (!sl_parse_i64(db, dlen, SL_INT_NO_SIGN, &v) || v > 999999999) {
                snprintf(err, n, "ERR invalid --store URL: the database '%.*s' is not a number",
                         (int)(dlen > 16 ? 16 : dlen), db);
                return SL_ERR_ARGUMENT;
            }
            if (b->cluster && v != 0) {
                snprintf(err, n, "ERR invalid --store URL: a Redis Cluster has only database 0");
                return SL_ERR_ARGUMENT;
            }
            b->db = (int)v;
        }
    }
    if (*rest == '?') {
        const char *q = rest + 1;
        while (*q) {
            size_t plen = strcspn(q, "&");
            const char *eq = memchr(q, '=', plen);
            size_t klen = eq ? (size_t)(eq - q) : plen;
            char **slot = NULL;
            if (eq && klen == 8 && memcmp(q, "password", 8) == 0)
                slot = &b->password;
            else if (eq && klen == 4 && memcmp(q, "user", 4) == 0)
                slot = &b->user;
            if (!slot) {
                snprintf(err, n, "ERR invalid --store URL: unknown parameter '%.*s' (password "
                                 "or user)",
                         (int)(klen > 32 ? 32 : klen), q);
                return SL_ERR_ARGUMENT;
            }
            free(*slot);
            if (!(*slot = rd_unescape(eq + 1, plen - klen - 1, &bad)))
                goto fail;
            q += plen;
            if (*q == '&')
                q++;
        }
    }
    if (b->user && !b->password) {
        snprintf(err, n, "ERR invalid --store URL: the user has no password");
        return SL_ERR_ARGUMENT;
    }
    return SL_OK;
fail:
    if (bad) {
        snprintf(err, n, "ERR invalid --store URL: a bad %%-escape in the user or password");
        return SL_ERR_ARGUMENT;
    }
    snprintf(err, n, "ERR out of memory");
    return SL_ERR_NOMEM;
}

int sl_redis_target_parse(const char *url, sl_redis_target *out, char *err, size_t n)
{
    rd_backend b = {0};
    int rc = rd_parse_url(&b, url, err, n);
    *out = (sl_redis_target){.cluster = b.cluster, .hosts = b.hosts, .user = b.user,
                             .password = b.password, .db = b.db};
    return rc;
}

void sl_redis_target_free(sl_redis_target *t)
{
    free(t->hosts);
    free(t->user);
    if (t->password) {
        memset(t->password, 0, strlen(t->password));
        free(t->password);
    }
    *t = (sl_redis_target){0};
}

int sl_backend_redis(const sl_redis_config *cfg, sl_backend **out, char *err, size_t n)
{
    *out = NULL;
    if (!cfg || (!cfg->url && !cfg->peers)) {
        snprintf(err, n, "ERR no --store URL");
        return SL_ERR_ARGUMENT;
    }
    if (cfg->timeout_ms < 0 || cfg->timeout_ms > SL_REDIS_TIMEOUT_MS_MAX) {
        snprintf(err, n, "ERR the store's timeout must be between 1 and %d ms",
                 SL_REDIS_TIMEOUT_MS_MAX);
        return SL_ERR_ARGUMENT;
    }
    if (cfg->fleet_nodes < 0 || cfg->fleet_nodes > 1000000) {
        snprintf(err, n, "ERR the fleet's node count must be between 1 and 1000000");
        return SL_ERR_ARGUMENT;
    }
    if (cfg->on_error > SL_ON_ERROR_LOCAL) {
        snprintf(err, n, "ERR unknown store-down policy (fail_open, fail_closed or local)");
        return SL_ERR_ARGUMENT;
    }
    rd_backend *b = calloc(1, sizeof *b);
    if (!b) {
        snprintf(err, n, "ERR out of memory");
        return SL_ERR_NOMEM;
    }
    pthread_mutex_init(&b->lock, NULL);
    int rc = SL_OK;
    if (cfg->peers) {
        b->peers = cfg->peers;
        if (cfg->peer_password && !(b->password = strdup(cfg->peer_password))) {
            snprintf(err, n, "ERR out of memory");
            rc = SL_ERR_NOMEM;
        }
    } else {
        rc = rd_parse_url(b, cfg->url, err, n);
    }
    if (rc != SL_OK) {
        rd_free(&b->base);
        return rc;
    }
#ifndef SL_HAVE_CLUSTER
    if (b->cluster) {
        snprintf(err, n, "ERR redis-cluster:// is not built in this version");
        rd_free(&b->base);
        return SL_ERR_ARGUMENT;
    }
#endif
    b->base.ops = b->peers ? &rd_peers_ops : b->cluster ? &rd_cluster_ops : &rd_ops;
    b->base.defers = true;
    b->on_error = cfg->on_error;
    b->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : SL_REDIS_TIMEOUT_MS_DEFAULT;
    b->fleet_nodes = cfg->fleet_nodes > 0 ? cfg->fleet_nodes : 1;
    b->connect_timeout_ms = cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : 1000;
    b->clock_offset_ns = sl_clock_offset();
    uint64_t seed = uv_hrtime() ^ (uint64_t)(uintptr_t)b;
    sl_store_config sc = {
        .max_memory = cfg->local_memory ? cfg->local_memory : SL_REDIS_LOCAL_MEMORY_DEFAULT,
        .seed = seed,
    };
    rc = sl_store_new(&sc, &b->local);
    if (rc != SL_OK) {
        snprintf(err, n, "ERR the local limiter's memory must be at least 256k");
        rd_free(&b->base);
        return rc;
    }
    *out = &b->base;
    return SL_OK;
}
