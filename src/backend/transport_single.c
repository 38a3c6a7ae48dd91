/*
 * transport_single.c: the transport to one Redis server (transport.h), over
 * hiredis's asynchronous API, on one worker's libuv loop.
 *
 * A connection is made without blocking (redisAsyncConnect, then the loop
 * finishes it); AUTH and SELECT are queued before any command, so that
 * Redis runs them first. A command is queued with redisAsyncFormattedCommand,
 * which appends it to the context's output buffer and asks the loop for a
 * writable event: everything queued during one loop iteration leaves in one
 * write, which is how many clients' takes become one pipelined round trip.
 *
 * The loop watches the socket through a small adapter of its own rather than
 * <hiredis/adapters/libuv.h>: 0.14's adapter drops the events libuv reports
 * with an error status (POLLERR: a refused connect, a reset connection), so
 * hiredis would learn of neither until a timer ran out. Here an error event
 * makes hiredis read and write, which finds the socket's error itself.
 *
 * hiredis resolves a host name with a blocking getaddrinfo(); a name (not an
 * address literal) is therefore resolved first on libuv's thread pool
 * (uv_getaddrinfo), at each connection, and hiredis is given the address.
 *
 * When the connection is lost (or never made), hiredis calls every pending
 * callback with no reply, and the transport waits a random time up to a
 * doubling cap (50 ms to 2 s, "full jitter", so that a fleet does not
 * reconnect in step) before trying again. Each connection bumps the epoch.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/async.h>

#include "backend/redis.h"
#include "backend/reply.h"
#include "common/parse.h"

#define SL_BACKOFF_MIN_MS 50
#define SL_BACKOFF_MAX_MS 2000

typedef struct sl_single {
    sl_transport base;
    uv_loop_t *loop;
    redisAsyncContext *ac; /* NULL between connections */
    bool connected;        /* the TCP connection is made (AUTH may still be pending) */
    bool closing;
    unsigned attempt;      /* connections failed in a row, for the backoff */
    uint64_t rng;          /* xorshift state for the jitter */
    uv_timer_t timer;      /* the reconnect's wait, or the connect's time limit */
    uv_getaddrinfo_t gai;  /* resolving host, when it is a name */
    bool resolving;
    bool numeric;          /* host is an address literal: no resolution */
    int holds;             /* the timers and a resolution in flight: freed at zero */
    char addr[INET6_ADDRSTRLEN];
    size_t turn;           /* which of the name's addresses the next connection takes */
    /* Commands sent with no connection to queue them on: while the name is
     * being resolved (then queued on the connection), or between two
     * connections (then called back with why, from `report`). */
    struct sl_single_held *held, **held_tail;
    uv_timer_t report;
    char *host;
    int port;
    char *user, *password;
    int db;
    int connect_timeout_ms;
    char err[192]; /* why the last connection ended, for the callbacks */
} sl_single;

/* One queued command's callback: hiredis carries one pointer per command. */
typedef struct sl_single_cmd {
    sl_single *t;
    sl_transport_cb *cb;
    void *priv;
} sl_single_cmd;

/* The socket's watch: hiredis's event hooks over one uv_poll_t. */
typedef struct sl_single_poll {
    uv_poll_t handle;
    redisAsyncContext *ac; /* NULL once hiredis cleaned up */
    int events;
} sl_single_poll;

/* A command sent while the host's name is being resolved: queued on the
 * connection once there is one, in order. */
typedef struct sl_single_held {
    struct sl_single_held *next;
    sl_transport_cb *cb;
    void *priv;
    size_t len;
    char cmd[];
} sl_single_held;

static void sl_single_connect(sl_single *t);
static void sl_single_schedule(sl_single *t);

/* ---- the socket's watch (see the top of the file) ---- */

static void sl_poll_cb(uv_poll_t *h, int status, int events)
{
    sl_single_poll *p = h->data;
    /* libuv stops the handle and reports status < 0 on POLLERR: hiredis
     * then reads (or writes) and meets the socket's error. */
    int ev = status < 0 ? p->events : events;
    if (p->ac && (ev & UV_READABLE))
        redisAsyncHandleRead(p->ac);
    if (p->ac && (ev & UV_WRITABLE))
        redisAsyncHandleWrite(p->ac);
}

static void sl_poll_update(sl_single_poll *p)
{
    if (p->events)
        uv_poll_start(&p->handle, p->events, sl_poll_cb);
    else
        uv_poll_stop(&p->handle);
}

static void sl_poll_add_read(void *priv)
{
    sl_single_poll *p = priv;
    p->events |= UV_READABLE;
    sl_poll_update(p);
}

static void sl_poll_del_read(void *priv)
{
    sl_single_poll *p = priv;
    p->events &= ~UV_READABLE;
    sl_poll_update(p);
}

static void sl_poll_add_write(void *priv)
{
    sl_single_poll *p = priv;
    p->events |= UV_WRITABLE;
    sl_poll_update(p);
}

static void sl_poll_del_write(void *priv)
{
    sl_single_poll *p = priv;
    p->events &= ~UV_WRITABLE;
    sl_poll_update(p);
}

static void sl_poll_closed(uv_handle_t *h)
{
    free(h->data);
}

/* hiredis is freeing the context: the handle goes on the next loop turn. */
static void sl_poll_cleanup(void *priv)
{
    sl_single_poll *p = priv;
    p->ac = NULL;
    uv_close((uv_handle_t *)&p->handle, sl_poll_closed);
}

static int sl_poll_attach(redisAsyncContext *ac, uv_loop_t *loop)
{
    sl_single_poll *p = calloc(1, sizeof *p);
    if (!p)
        return REDIS_ERR;
    if (uv_poll_init(loop, &p->handle, ac->c.fd) != 0) {
        free(p);
        return REDIS_ERR;
    }
    p->handle.data = p;
    p->ac = ac;
    ac->ev.data = p;
    ac->ev.addRead = sl_poll_add_read;
    ac->ev.delRead = sl_poll_del_read;
    ac->ev.addWrite = sl_poll_add_write;
    ac->ev.delWrite = sl_poll_del_write;
    ac->ev.cleanup = sl_poll_cleanup;
    return REDIS_OK;
}

static uint64_t sl_single_random(sl_single *t)
{
    uint64_t x = t->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return t->rng = x;
}

static void sl_single_set_err(sl_single *t, const char *what, const redisAsyncContext *ac)
{
    if (ac && ac->errstr && ac->errstr[0])
        snprintf(t->err, sizeof t->err, "%s: %s", what, ac->errstr);
    else
        snprintf(t->err, sizeof t->err, "%s", what);
}

static void sl_single_retry_cb(uv_timer_t *timer)
{
    sl_single *t = timer->data;
    if (t->ac) {
        /* The connect's time limit: give up on this attempt. Freeing the
         * context calls the queued callbacks with no reply; no disconnect
         * callback comes for a connection never made, so retry from here. */
        redisAsyncContext *ac = t->ac;
        snprintf(t->err, sizeof t->err, "connect to %s:%d timed out", t->host, t->port);
        t->ac = NULL;
        redisAsyncFree(ac);
        sl_single_schedule(t);
        return;
    }
    sl_single_connect(t);
}

/* Waits before the next connection: a random time in [0, cap], the cap
 * doubling from 50 ms with each failure up to 2 s. */
static void sl_single_schedule(sl_single *t)
{
    if (t->closing)
        return;
    unsigned a = t->attempt < 6 ? t->attempt : 6;
    uint64_t cap = (uint64_t)SL_BACKOFF_MIN_MS << a;
    if (cap > SL_BACKOFF_MAX_MS)
        cap = SL_BACKOFF_MAX_MS;
    t->attempt++;
    uv_timer_start(&t->timer, sl_single_retry_cb, sl_single_random(t) % (cap + 1), 0);
}

static void sl_single_reply_cb(redisAsyncContext *ac, void *reply, void *privdata)
{
    sl_single_cmd *c = privdata;
    sl_single *t = c->t;
    const char *err = NULL;
    if (!reply) {
        if (ac->err)
            sl_single_set_err(t, "connection lost", ac);
        else if (!t->err[0])
            snprintf(t->err, sizeof t->err, "%s", t->closing ? "transport closing" : "connection lost");
        err = t->err;
    }
    c->cb(c->priv, reply, err);
    free(c);
}

/* AUTH's and SELECT's answer: an error there means every command after it
 * would be refused or go to the wrong database, so the connection is dropped
 * (and retried with backoff, in case the password is being rotated). */
static void sl_single_setup_cb(redisAsyncContext *ac, void *reply, void *privdata)
{
    sl_single *t = ac->data;
    redisReply *r = reply;
    if (r && r->type == REDIS_REPLY_ERROR && t && !t->closing) {
        snprintf(t->err, sizeof t->err, "%s refused: %.*s", (const char *)privdata,
                 (int)(r->len > 120 ? 120 : r->len), r->str);
        /* Freed once this callback returns: the commands queued after it
         * are answered as lost, not as NOAUTH errors. */
        redisAsyncFree(ac);
    }
}

static void sl_single_connect_cb(const redisAsyncContext *ac, int status)
{
    sl_single *t = ac->data;
    if (!t)
        return;
    if (status != REDIS_OK) {
        /* hiredis frees the context after this returns. */
        sl_single_set_err(t, "connect failed", ac);
        t->ac = NULL;
        t->connected = false;
        uv_timer_stop(&t->timer);
        sl_single_schedule(t);
        return;
    }
    uv_timer_stop(&t->timer);
    t->connected = true;
    t->attempt = 0;
    t->err[0] = '\0';
}

static void sl_single_disconnect_cb(const redisAsyncContext *ac, int status)
{
    sl_single *t = ac->data;
    if (!t)
        return;
    if (status != REDIS_OK)
        sl_single_set_err(t, "connection lost", ac);
    else if (!t->err[0])
        snprintf(t->err, sizeof t->err, "connection closed");
    t->ac = NULL;
    t->connected = false;
    sl_single_schedule(t);
}

static void sl_single_connect_to(sl_single *t, const char *addr)
{
    redisAsyncContext *ac = redisAsyncConnect(addr, t->port);
    if (!ac) {
        snprintf(t->err, sizeof t->err, "connect to %s:%d: out of memory", t->host, t->port);
        sl_single_schedule(t);
        return;
    }
    if (ac->err) {
        snprintf(t->err, sizeof t->err, "connect to %s:%d: %s", t->host, t->port, ac->errstr);
        redisAsyncFree(ac);
        sl_single_schedule(t);
        return;
    }
    ac->data = t;
    sl_reply_pool_install(&ac->c);
    if (sl_poll_attach(ac, t->loop) != REDIS_OK) {
        snprintf(t->err, sizeof t->err, "connect to %s:%d: cannot watch the socket", t->host,
                 t->port);
        ac->data = NULL;
        redisAsyncFree(ac);
        sl_single_schedule(t);
        return;
    }
    redisAsyncSetConnectCallback(ac, sl_single_connect_cb);
    redisAsyncSetDisconnectCallback(ac, sl_single_disconnect_cb);
    t->ac = ac;
    t->base.epoch++;
    /* Queued before any command, so that Redis runs them first. */
    if (t->password) {
        const char *argv[3] = {"AUTH", t->user ? t->user : t->password, t->password};
        size_t lens[3] = {4, strlen(argv[1]), strlen(t->password)};
        redisAsyncCommandArgv(ac, sl_single_setup_cb, "AUTH", t->user ? 3 : 2, argv, lens);
    }
    if (t->db != 0)
        redisAsyncCommand(ac, sl_single_setup_cb, "SELECT", "SELECT %d", t->db);
    if (t->connect_timeout_ms > 0)
        uv_timer_start(&t->timer, sl_single_retry_cb, (uint64_t)t->connect_timeout_ms, 0);
}

static void sl_single_release(sl_single *t);
static int sl_single_send(sl_transport *base, int slot, const char *cmd, size_t len,
                          sl_transport_cb *cb, void *priv);

/* Hands the held commands to the connection, or (with none) calls each
 * back saying why there is none. */
static void sl_single_flush_held(sl_single *t)
{
    sl_single_held *h = t->held;
    t->held = NULL;
    t->held_tail = &t->held;
    char why[sizeof t->err + 24];
    if (t->closing || !t->err[0])
        snprintf(why, sizeof why, "%s", t->closing ? "transport closing" : "not connected");
    else
        snprintf(why, sizeof why, "not connected (%s)", t->err);
    while (h) {
        sl_single_held *next = h->next;
        if (!t->ac || sl_single_send(&t->base, -1, h->cmd, h->len, h->cb, h->priv) != 0)
            h->cb(h->priv, NULL, why);
        free(h);
        h = next;
    }
}

/* The turn after a send with no connection: its callback says why (the
 * transport interface calls back, never inside send). */
static void sl_single_report_cb(uv_timer_t *timer)
{
    sl_single *t = timer->data;
    if (!t->resolving)
        sl_single_flush_held(t);
}

static void sl_single_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    sl_single *t = req->data;
    t->resolving = false;
    if (t->closing) {
        if (res)
            uv_freeaddrinfo(res);
        sl_single_flush_held(t);
        sl_single_release(t);
        return;
    }
    t->holds--;
    /* A name with several addresses: each connection takes the next one,
     * so that an address that refuses is not the only one ever tried. */
    size_t count = 0;
    for (const struct addrinfo *ai = status == 0 ? res : NULL; ai; ai = ai->ai_next)
        count += ai->ai_family == AF_INET || ai->ai_family == AF_INET6;
    const struct addrinfo *pick = NULL;
    size_t want = count ? t->turn++ % count : 0;
    for (const struct addrinfo *ai = status == 0 ? res : NULL; ai && !pick; ai = ai->ai_next)
        if ((ai->ai_family == AF_INET || ai->ai_family == AF_INET6) && want-- == 0)
            pick = ai;
    const void *a = NULL;
    if (pick && pick->ai_family == AF_INET)
        a = &((const struct sockaddr_in *)(const void *)pick->ai_addr)->sin_addr;
    else if (pick)
        a = &((const struct sockaddr_in6 *)(const void *)pick->ai_addr)->sin6_addr;
    if (!a || !inet_ntop(pick->ai_family, a, t->addr, sizeof t->addr)) {
        snprintf(t->err, sizeof t->err, "cannot resolve %s: %s", t->host,
                 status ? uv_strerror(status) : "no address");
        if (res)
            uv_freeaddrinfo(res);
        sl_single_flush_held(t);
        sl_single_schedule(t);
        return;
    }
    uv_freeaddrinfo(res);
    sl_single_connect_to(t, t->addr);
    sl_single_flush_held(t);
}

static void sl_single_connect(sl_single *t)
{
    if (t->closing || t->ac || t->resolving)
        return;
    if (t->numeric) {
        sl_single_connect_to(t, t->host);
        return;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    t->gai.data = t;
    if (uv_getaddrinfo(t->loop, &t->gai, sl_single_resolved, t->host, NULL, &hints) != 0) {
        snprintf(t->err, sizeof t->err, "cannot resolve %s", t->host);
        sl_single_schedule(t);
        return;
    }
    t->resolving = true;
    t->holds++;
}

static int sl_single_send(sl_transport *base, int slot, const char *cmd, size_t len,
                          sl_transport_cb *cb, void *priv)
{
    sl_single *t = (sl_single *)base;
    (void)slot;
    /* A connection being made accepts commands (they leave once it is
     * made); without one, a command is held: queued on the connection once
     * the name is resolved, or called back with why on the next turn. */
    if (t->closing)
        return -1;
    if (!t->ac) {
        sl_single_held *h = malloc(sizeof *h + len);
        if (!h)
            return -1;
        h->next = NULL;
        h->cb = cb;
        h->priv = priv;
        h->len = len;
        memcpy(h->cmd, cmd, len);
        *t->held_tail = h;
        t->held_tail = &h->next;
        if (!t->resolving)
            uv_timer_start(&t->report, sl_single_report_cb, 0, 0);
        return 0;
    }
    sl_single_cmd *c = malloc(sizeof *c);
    if (!c)
        return -1;
    *c = (sl_single_cmd){t, cb, priv};
    if (redisAsyncFormattedCommand(t->ac, sl_single_reply_cb, c, cmd, len) != REDIS_OK) {
        free(c);
        return -1;
    }
    return 0;
}

static bool sl_single_ready(sl_transport *base)
{
    const sl_single *t = (const sl_single *)base;
    return t->connected && t->ac;
}

static void sl_single_release(sl_single *t)
{
    if (--t->holds > 0)
        return;
    free(t->host);
    free(t->user);
    free(t->password);
    free(t);
}

static void sl_single_free_cb(uv_handle_t *h)
{
    sl_single_release(h->data);
}

static void sl_single_close(sl_transport *base)
{
    sl_single *t = (sl_single *)base;
    if (t->closing)
        return;
    t->closing = true;
    snprintf(t->err, sizeof t->err, "transport closing");
    uv_timer_stop(&t->timer);
    uv_timer_stop(&t->report);
    if (t->resolving)
        uv_cancel((uv_req_t *)&t->gai); /* its callback still comes, and lets go */
    sl_single_flush_held(t); /* with an error: closing refuses them */
    if (t->ac) {
        redisAsyncContext *ac = t->ac;
        t->ac = NULL;
        /* The pending callbacks run now, with no reply; the disconnect
         * callback must not reconnect. */
        redisAsyncFree(ac);
    }
    uv_close((uv_handle_t *)&t->timer, sl_single_free_cb);
    uv_close((uv_handle_t *)&t->report, sl_single_free_cb);
}

static const sl_transport_ops sl_single_ops = {
    .send = sl_single_send,
    .ready = sl_single_ready,
    .close = sl_single_close,
};

static char *sl_single_dup(const char *s)
{
    return s ? strdup(s) : NULL;
}

sl_transport *sl_transport_single(uv_loop_t *loop, const sl_transport_config *cfg)
{
    const char *colon = cfg->hosts ? strrchr(cfg->hosts, ':') : NULL;
    if (!colon || colon == cfg->hosts)
        return NULL;
    int64_t port;
    if (!sl_parse_i64(colon + 1, strlen(colon + 1), SL_INT_NO_SIGN, &port) || port < 1 ||
        port > 65535)
        return NULL;
    sl_single *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->base.ops = &sl_single_ops;
    t->loop = loop;
    t->port = (int)port;
    t->db = cfg->db;
    t->connect_timeout_ms = cfg->connect_timeout_ms;
    t->host = strndup(cfg->hosts, (size_t)(colon - cfg->hosts));
    t->user = sl_single_dup(cfg->user);
    t->password = sl_single_dup(cfg->password);
    t->rng = (uv_hrtime() ^ (uintptr_t)t) | 1;
    if (!t->host || (cfg->user && !t->user) || (cfg->password && !t->password)) {
        free(t->host);
        free(t->user);
        free(t->password);
        free(t);
        return NULL;
    }
    /* libuv's timer init only fills fields: it cannot fail. */
    uv_timer_init(loop, &t->timer);
    uv_timer_init(loop, &t->report);
    t->timer.data = t;
    t->report.data = t;
    t->holds = 2;
    t->held_tail = &t->held;
    unsigned char probe[sizeof(struct in6_addr)];
    t->numeric = inet_pton(AF_INET, t->host, probe) == 1 || inet_pton(AF_INET6, t->host, probe) == 1;
    sl_single_connect(t);
    return &t->base;
}
