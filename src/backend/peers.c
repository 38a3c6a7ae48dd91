/*
 * peers.c: the membership of a routing fleet and a worker's transport to
 * its peers (peers.h). The transport keeps one transport_single per peer on
 * the worker's loop (each connects, reconnects with backoff and pipelines
 * by itself), the owner table of the peers it sees up, and a timer that
 * marks a failing peer down, and a peer that answers again up.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/peers.h"
#include "backend/redis.h"
#include "common/parse.h"

#define PR_TICK_MS 50
/* A probe unanswered this long: the connection is dropped and made again,
 * so that one lost to a silent network (no reset, a peer stopped) does not
 * wait for TCP's own timeout, many minutes. */
#define PR_PROBE_WAIT_MS 1000

/* ---- the membership ---- */

static bool pr_valid(const char *s, size_t len, char *err, size_t n)
{
    const char *colon = NULL;
    for (size_t i = 0; i < len; i++)
        if (s[i] == ':')
            colon = s + i;
    int64_t port;
    if (len == 0) {
        snprintf(err, n, "ERR invalid --peers: an entry is empty (HOST:PORT,HOST:PORT,...)");
        return false;
    }
    if (!colon || colon == s) {
        snprintf(err, n, "ERR invalid --peers: '%.*s' is not HOST:PORT", (int)(len > 64 ? 64 : len),
                 s);
        return false;
    }
    size_t plen = len - (size_t)(colon + 1 - s);
    if (!sl_parse_i64(colon + 1, plen, SL_INT_NO_SIGN, &port) || port < 1 || port > 65535) {
        snprintf(err, n, "ERR invalid --peers: the port of '%.*s' must be between 1 and 65535",
                 (int)(len > 64 ? 64 : len), s);
        return false;
    }
    if (len > 255) {
        snprintf(err, n, "ERR invalid --peers: an entry is longer than 255 bytes");
        return false;
    }
    return true;
}

sl_peers *sl_peers_new(const char *list, const char *self, char *err, size_t n)
{
    sl_peers *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, n, "ERR out of memory");
        return NULL;
    }
    p->self = SIZE_MAX;
    if (!(p->list = strdup(list ? list : ""))) {
        snprintf(err, n, "ERR out of memory");
        goto fail;
    }
    for (const char *s = list ? list : "";;) {
        size_t len = strcspn(s, ",");
        if (!pr_valid(s, len, err, n))
            goto fail;
        if (p->n == SL_PEERS_MAX) {
            snprintf(err, n, "ERR invalid --peers: at most %d peers", SL_PEERS_MAX);
            goto fail;
        }
        for (size_t i = 0; i < p->n; i++)
            if (strlen(p->names[i]) == len && memcmp(p->names[i], s, len) == 0) {
                snprintf(err, n, "ERR invalid --peers: '%.*s' is listed twice", (int)len, s);
                goto fail;
            }
        if (!(p->names[p->n] = strndup(s, len))) {
            snprintf(err, n, "ERR out of memory");
            goto fail;
        }
        if (self && strcmp(p->names[p->n], self) == 0)
            p->self = p->n;
        p->n++;
        if (!s[len])
            break;
        s += len + 1;
    }
    if (!self || p->self == SIZE_MAX) {
        snprintf(err, n, "ERR --self must be one of --peers, written the same (HOST:PORT)");
        goto fail;
    }
    if (!(p->rank = malloc((size_t)SL_OWNER_SLOTS * p->n))) {
        snprintf(err, n, "ERR out of memory");
        goto fail;
    }
    sl_owner_rank((const char *const *)p->names, p->n, p->rank);
    return p;
fail:
    sl_peers_free(p);
    return NULL;
}

void sl_peers_free(sl_peers *p)
{
    while (p) {
        sl_peers *next = atomic_load(&p->successor);
        for (size_t i = 0; i < p->n; i++)
            free(p->names[i]);
        free(p->rank);
        free(p->list);
        free(p);
        p = next;
    }
}

sl_peers *sl_peers_latest(sl_peers *p)
{
    sl_peers *s;
    while ((s = atomic_load_explicit(&p->successor, memory_order_acquire)))
        p = s;
    return p;
}

void sl_peers_replace(sl_peers *p, sl_peers *next)
{
    atomic_store_explicit(&sl_peers_latest(p)->successor, next, memory_order_release);
}

size_t sl_peers_down_count(const sl_peers *p)
{
    size_t down = 0;
    for (size_t i = 0; i < p->n; i++)
        down += atomic_load_explicit(&p->down[i], memory_order_relaxed) > 0;
    return down;
}

uint64_t sl_peers_up_mask(const sl_peers *p)
{
    uint64_t up = 0;
    for (size_t i = 0; i < p->n; i++)
        if (atomic_load_explicit(&p->down[i], memory_order_relaxed) == 0)
            up |= UINT64_C(1) << i;
    return up;
}

bool sl_peers_owns(const sl_peers *p, int slot)
{
    const uint8_t *r = p->rank + (size_t)slot * p->n;
    for (size_t k = 0; k < p->n; k++) {
        if (r[k] == p->self)
            return true;
        if (atomic_load_explicit(&p->down[r[k]], memory_order_relaxed) == 0)
            return false;
    }
    return false;
}

/* ---- the transport ---- */

typedef struct pr_peer {
    sl_transport *t;
    bool up;          /* owns its slots in this worker's table */
    bool failing;     /* failed since its last good answer */
    bool probing;
    uint64_t fail_since_ms, probe_at_ms, probe_sent_ms, waiting_since_ms;
    size_t inflight;  /* commands sent to it and not answered */
    uint64_t epoch;   /* t->epoch as last added into the transport's */
} pr_peer;

typedef struct pr_transport {
    sl_transport base;
    uv_loop_t *loop;
    sl_peers *m;
    uint64_t up;         /* bit i: peer i is up on this worker */
    uint64_t generation; /* the membership's, when the table was made */
    bool closing;
    bool quiet; /* the old list's connections closing: their failures say nothing */
    char *password;
    int connect_timeout_ms;
    uv_timer_t timer;
    uint8_t table[SL_OWNER_SLOTS];
    pr_peer p[SL_PEERS_MAX];
} pr_transport;

/* A command in flight to a peer (cb NULL: the health probe). */
typedef struct pr_cmd {
    pr_transport *t;
    size_t peer;
    sl_transport_cb *cb;
    void *priv;
} pr_cmd;

/* The transport's epoch moves whenever one of its connections is new, so
 * that the backend asks again what answers it. */
static void pr_sync_epoch(pr_transport *t)
{
    for (size_t i = 0; i < t->m->n; i++) {
        uint64_t e = t->p[i].t->epoch;
        if (e != t->p[i].epoch) {
            t->base.epoch += e - t->p[i].epoch;
            t->p[i].epoch = e;
        }
    }
}

/* The owner table of the peers the node sees up, made again when that
 * changed (on any worker). */
static void pr_refresh_table(pr_transport *t)
{
    uint64_t g = atomic_load_explicit(&t->m->generation, memory_order_acquire);
    if (g == t->generation)
        return;
    t->generation = g;
    sl_owner_table(t->m->rank, t->m->n, sl_peers_up_mask(t->m), t->table);
}

/* This worker's view of peer i, and through it the node's: the first
 * worker to see a peer down takes it down for all, the last to see it up
 * again brings it back. */
static void pr_set_up(pr_transport *t, size_t i, bool up)
{
    pr_peer *p = &t->p[i];
    if (p->up == up)
        return;
    p->up = up;
    sl_peers *m = t->m;
    bool changed;
    if (up) {
        t->up |= UINT64_C(1) << i;
        changed = atomic_fetch_sub_explicit(&m->down[i], 1, memory_order_acq_rel) == 1;
    } else {
        t->up &= ~(UINT64_C(1) << i);
        changed = atomic_fetch_add_explicit(&m->down[i], 1, memory_order_acq_rel) == 0;
    }
    if (!changed)
        return;
    atomic_fetch_add_explicit(&m->generation, 1, memory_order_acq_rel);
    if (m->note)
        m->note(m->names[i], up);
    pr_refresh_table(t);
}

static void pr_ok(pr_transport *t, size_t i)
{
    t->p[i].failing = false;
    pr_set_up(t, i, true);
}

static void pr_fail(pr_transport *t, size_t i, uint64_t since)
{
    pr_peer *p = &t->p[i];
    if (!p->failing) {
        p->failing = true;
        p->fail_since_ms = since;
    }
}

/* A sluiced answers COMMAND INFO sl.decide with the command's entry: a Redis
 * without the command answers [nil], anything else is not a peer. */
static bool pr_is_sluiced(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
           r->element[0]->type == REDIS_REPLY_ARRAY;
}

/* An answer from a node that is not a sluiced: a command it does not know. */
static bool pr_is_foreign(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && r->len >= 19 &&
           memcmp(r->str, "ERR unknown command", 19) == 0;
}

static void pr_cmd_cb(void *priv, redisReply *reply, const char *err)
{
    pr_cmd *c = priv;
    pr_transport *t = c->t;
    pr_peer *p = &t->p[c->peer];
    if (!t->closing && !t->quiet) {
        uint64_t now = uv_now(t->loop);
        if (c->cb) {
            p->inflight--;
            p->waiting_since_ms = now;
            if (reply && !pr_is_foreign(reply))
                pr_ok(t, c->peer);
            else
                pr_fail(t, c->peer, now);
        } else {
            p->probing = false;
            if (pr_is_sluiced(reply))
                pr_ok(t, c->peer);
            else
                pr_fail(t, c->peer, now);
        }
        pr_sync_epoch(t);
    }
    if (c->cb)
        c->cb(c->priv, reply, err);
    free(c);
}

static void pr_probe(pr_transport *t, size_t i, uint64_t now)
{
    static const char info[] = "*3\r\n$7\r\nCOMMAND\r\n$4\r\nINFO\r\n$9\r\nsl.decide\r\n";
    pr_peer *p = &t->p[i];
    p->probe_at_ms = now + SL_PEERS_PROBE_MS;
    p->probe_sent_ms = now;
    pr_cmd *c = malloc(sizeof *c);
    if (!c)
        return;
    *c = (pr_cmd){t, i, NULL, NULL};
    if (p->t->ops->send(p->t, -1, info, sizeof info - 1, pr_cmd_cb, c) != 0) {
        free(c);
        return;
    }
    p->probing = true;
}

static void pr_close_peers(pr_transport *t)
{
    for (size_t i = 0; i < t->m->n; i++) {
        /* This worker's view leaves with it. */
        if (!t->p[i].up && atomic_fetch_sub_explicit(&t->m->down[i], 1, memory_order_acq_rel) == 1)
            atomic_fetch_add_explicit(&t->m->generation, 1, memory_order_acq_rel);
        t->p[i].t->ops->close(t->p[i].t);
    }
}

/* One connection per peer of m, each up until it fails; false (none made)
 * when out of memory. */
static bool pr_open_peers(pr_transport *t, sl_peers *m, pr_peer *p, const char *password,
                          int connect_timeout_ms)
{
    for (size_t i = 0; i < m->n; i++) {
        sl_transport_config tc = {m->names[i], NULL, password, 0, connect_timeout_ms};
        p[i] = (pr_peer){.t = sl_transport_single(t->loop, &tc), .up = true};
        if (!p[i].t) {
            while (i-- > 0)
                p[i].t->ops->close(p[i].t);
            return false;
        }
        p[i].epoch = p[i].t->epoch;
    }
    return true;
}

/* A reload replaced the membership: the old list's connections close (what
 * they carried is answered as lost, by its store-down policy) and the new
 * list's open. */
static void pr_take_membership(pr_transport *t, sl_peers *next)
{
    pr_peer fresh[SL_PEERS_MAX];
    if (!pr_open_peers(t, next, fresh, t->password, t->connect_timeout_ms))
        return; /* out of memory: the next tick tries again */
    t->quiet = true;
    pr_close_peers(t);
    t->quiet = false;
    t->m = next;
    memcpy(t->p, fresh, next->n * sizeof fresh[0]);
    t->up = next->n == 64 ? UINT64_MAX : (UINT64_C(1) << next->n) - 1;
    t->generation = atomic_load_explicit(&next->generation, memory_order_acquire) - 1;
    pr_refresh_table(t);
    t->base.epoch++; /* new connections: the backend asks again what answers */
}

/* Drops peer i's connection for a new one: what it carried is answered as
 * lost (its callbacks run now, the probe's among them). */
static void pr_reconnect(pr_transport *t, size_t i)
{
    pr_peer *p = &t->p[i];
    sl_transport_config tc = {t->m->names[i], NULL, t->password, 0, t->connect_timeout_ms};
    sl_transport *fresh = sl_transport_single(t->loop, &tc);
    if (!fresh)
        return; /* out of memory: tried again at the next tick */
    sl_transport *old = p->t;
    p->t = fresh;
    p->epoch = fresh->epoch;
    old->ops->close(old);
    p->probing = false;
    p->inflight = 0;
    t->base.epoch++;
}

static void pr_tick(uv_timer_t *timer)
{
    pr_transport *t = timer->data;
    sl_peers *latest = sl_peers_latest(t->m);
    if (latest != t->m)
        pr_take_membership(t, latest);
    uint64_t now = uv_now(t->loop);
    pr_sync_epoch(t);
    for (size_t i = 0; i < t->m->n; i++) {
        pr_peer *p = &t->p[i];
        if (!p->t->ops->ready(p->t))
            pr_fail(t, i, now);
        /* Commands out and no answer for the whole wait: a peer that hangs. */
        if (p->inflight > 0 && now - p->waiting_since_ms >= SL_PEERS_DOWN_MS)
            pr_fail(t, i, p->waiting_since_ms);
        if (p->up && p->failing && now - p->fail_since_ms >= SL_PEERS_DOWN_MS)
            pr_set_up(t, i, false);
        if (p->probing && now - p->probe_sent_ms >= PR_PROBE_WAIT_MS)
            pr_reconnect(t, i);
        if (p->failing && !p->probing && now >= p->probe_at_ms)
            pr_probe(t, i, now);
    }
}

/* Where a command of `slot` goes: its owner, or (slot -1) this node, or
 * the first peer up. SL_OWNER_NONE when every peer is down. */
static size_t pr_route(pr_transport *t, int slot)
{
    pr_refresh_table(t);
    if (slot >= 0 && slot < SL_OWNER_SLOTS)
        return t->table[slot];
    uint64_t up = sl_peers_up_mask(t->m);
    if (up & (UINT64_C(1) << t->m->self))
        return t->m->self;
    for (size_t i = 0; i < t->m->n; i++)
        if (up & (UINT64_C(1) << i))
            return i;
    return SL_OWNER_NONE;
}

static int pr_send(sl_transport *base, int slot, const char *cmd, size_t len, sl_transport_cb *cb,
                   void *priv)
{
    pr_transport *t = (pr_transport *)base;
    size_t i = pr_route(t, slot);
    if (t->closing || i == SL_OWNER_NONE)
        return -1;
    pr_peer *p = &t->p[i];
    pr_cmd *c = malloc(sizeof *c);
    if (!c)
        return -1;
    *c = (pr_cmd){t, i, cb, priv};
    if (p->t->ops->send(p->t, -1, cmd, len, pr_cmd_cb, c) != 0) {
        free(c);
        return -1;
    }
    if (p->inflight++ == 0)
        p->waiting_since_ms = uv_now(t->loop);
    return 0;
}

/* Every peer that owns slots is connected. */
static bool pr_ready(sl_transport *base)
{
    pr_transport *t = (pr_transport *)base;
    if (!t->up)
        return false;
    for (size_t i = 0; i < t->m->n; i++)
        if (t->p[i].up && !t->p[i].t->ops->ready(t->p[i].t))
            return false;
    return true;
}

static void pr_closed(uv_handle_t *h)
{
    pr_transport *t = h->data;
    free(t->password);
    free(t);
}

static void pr_close(sl_transport *base)
{
    pr_transport *t = (pr_transport *)base;
    if (t->closing)
        return;
    t->closing = true;
    uv_timer_stop(&t->timer);
    pr_close_peers(t);
    uv_close((uv_handle_t *)&t->timer, pr_closed);
}

static const sl_transport_ops pr_ops = {
    .send = pr_send,
    .ready = pr_ready,
    .close = pr_close,
};

sl_transport *sl_transport_peers(uv_loop_t *loop, sl_peers *peers, const char *password,
                                 int connect_timeout_ms)
{
    pr_transport *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->base.ops = &pr_ops;
    t->loop = loop;
    t->m = peers = sl_peers_latest(peers);
    t->connect_timeout_ms = connect_timeout_ms;
    if ((password && !(t->password = strdup(password))) ||
        /* Each up until it fails: a fleet starting together routes as it
         * will once every peer is reached, rather than to whoever came first. */
        !pr_open_peers(t, peers, t->p, password, connect_timeout_ms)) {
        free(t->password);
        free(t);
        return NULL;
    }
    t->up = peers->n == 64 ? UINT64_MAX : (UINT64_C(1) << peers->n) - 1;
    t->base.epoch = 1;
    t->generation = atomic_load_explicit(&peers->generation, memory_order_acquire) - 1;
    pr_refresh_table(t);
    uv_timer_init(loop, &t->timer);
    t->timer.data = t;
    uv_timer_start(&t->timer, pr_tick, PR_TICK_MS, PR_TICK_MS);
    return &t->base;
}
