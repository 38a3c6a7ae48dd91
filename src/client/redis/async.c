/*
 * async.c: the asynchronous RESP client (sluice_resp.h), over hiredis's
 * redisAsyncContext on a libuv loop.
 *
 * Each call builds its command (command.c) and queues it with
 * redisAsyncCommandArgv, with a small record of its own (sl_rc_call: what
 * the reply must be, the caller's callback) as hiredis's private data. hiredis
 * appends the command to its output buffer and asks for a writable event, so
 * that what one loop iteration queues leaves in one write; replies come back
 * in order and each goes to its record. That is the pipelining.
 *
 * The loop watches the socket through an adapter of this file rather than
 * <hiredis/adapters/libuv.h>: 0.14's adapter returns without a word when
 * libuv reports a poll error (POLLERR: a refused connection, a reset one),
 * and since libuv then stops the watch, hiredis would never learn that the
 * connection is gone, and the calls pending on it would never be answered.
 * Here an error event makes hiredis read and write, which meets the socket's
 * error and ends the connection the usual way.
 *
 * Exactly one callback per queued call: hiredis calls a command's callback
 * once, with its reply, or with no reply when the context is freed (the
 * connection lost, or freed by this file): each record is freed right after
 * its callback. The context (sl_rc_async) outlives hiredis's: it keeps why
 * the connection ended, and is freed only by sl_rc_async_free, once no
 * callback is running and none is pending, so that a callback may free it.
 *
 * Time limits: one uv_timer_t per context, armed for the nearest deadline,
 * on the loop's clock (uv_now, in milliseconds): the connect's limit while
 * the connection is being made, and the oldest pending call's, which was
 * queued at queued_ms and must be answered by queued_ms + timeout_ms. RESP
 * answers in order, so the oldest call's deadline is the only one that can
 * pass first. The timer is re-armed lazily: an answer moves the oldest call
 * on to a later deadline, never an earlier one, so the timer is left as it
 * is and, should it fire early, is armed again for the deadline then
 * current. It is stopped when no call is pending (an idle context holds
 * no timer on the loop), and closed with the connection.
 *
 * Ownership of hiredis's context: while the connection lives, ac->data
 * points to our context. The moment this file learns the connection is over
 * (a reply-less callback, a failed connect or AUTH, the connect's time limit,
 * sl_rc_async_free), it drops both pointers, ac->data and the context's
 * `ac`, so that nothing later (hiredis's disconnect callback, a call made
 * from a callback) can reach a context that hiredis is freeing or one that
 * has been freed.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/async.h>
#include <uv.h>

#include "command.h"

/* A deadline that never comes, on the loop's clock. */
#define NEVER UINT64_MAX

typedef struct sl_rc_call sl_rc_call;

struct sl_rc_async {
    int err;
    char errstr[SL_RC_ERRSTR_MAX];
    uv_loop_t *loop;
    redisAsyncContext *ac; /* NULL once the connection is over */
    uv_timer_t *timer;     /* the deadlines' timer; NULL once the connection is over */
    uint64_t due;          /* the loop time the timer is armed for, NEVER when stopped */
    uint64_t connect_deadline; /* loop ms by which the connection must be made, or NEVER */
    int timeout_ms;        /* a call's limit for its reply; 0: none */
    sl_rc_call *oldest;    /* the pending calls (our AUTH included), in the order */
    sl_rc_call *newest;    /* sent, which is the order of their replies */
    bool connected;
    size_t pending;        /* the caller's calls not yet answered */
    bool auth_pending;     /* our own AUTH, queued first */
    int in_cb;             /* callbacks of ours running (nested) */
    bool freeing;          /* sl_rc_async_free was called */
    bool in_free;          /* inside sl_rc_async_free's redisAsyncFree */
    int connect_timeout_ms;
    char addr[80];
};

/* One queued call: hiredis carries one pointer per command. */
struct sl_rc_call {
    sl_rc_async *w;
    sl_rc_call *prev, *next; /* the context's pending calls, oldest first */
    uint64_t queued_ms;      /* the loop's clock when the call was queued */
    sl_rc_expect expect;
    union {
        sl_rc_decision_cb *decision;
        sl_rc_policy_cb *policy;
        sl_rc_many_cb *many;
        sl_rc_count_cb *count;
        sl_rc_lease_cb *lease;
    } cb;
    void *priv;
};

static void set_err(sl_rc_async *w, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(sl_rc_async *w, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->errstr, sizeof w->errstr, fmt, ap);
    va_end(ap);
    w->err = err;
}

/* ---- the socket's watch: hiredis's event hooks over one uv_poll_t ---- */

typedef struct sl_rc_watch {
    uv_poll_t handle;
    redisAsyncContext *ac; /* NULL once hiredis cleaned up */
    int events;
} sl_rc_watch;

static void watch_cb(uv_poll_t *h, int status, int events)
{
    sl_rc_watch *p = h->data;
    /* On an error libuv stops the watch and reports no events: act on the
     * ones asked for, and hiredis meets the socket's error itself. */
    int ev = status < 0 ? p->events : events;
    if (p->ac && (ev & UV_READABLE))
        redisAsyncHandleRead(p->ac);
    if (p->ac && (ev & UV_WRITABLE))
        redisAsyncHandleWrite(p->ac);
}

static void watch_update(sl_rc_watch *p)
{
    if (p->events)
        uv_poll_start(&p->handle, p->events, watch_cb);
    else
        uv_poll_stop(&p->handle);
}

static void watch_add_read(void *priv)
{
    sl_rc_watch *p = priv;
    p->events |= UV_READABLE;
    watch_update(p);
}

static void watch_del_read(void *priv)
{
    sl_rc_watch *p = priv;
    p->events &= ~UV_READABLE;
    watch_update(p);
}

static void watch_add_write(void *priv)
{
    sl_rc_watch *p = priv;
    p->events |= UV_WRITABLE;
    watch_update(p);
}

static void watch_del_write(void *priv)
{
    sl_rc_watch *p = priv;
    p->events &= ~UV_WRITABLE;
    watch_update(p);
}

static void watch_closed(uv_handle_t *h)
{
    free(h->data);
}

/* hiredis is freeing its context: the handle is closed, and freed once
 * libuv has let go of it. */
static void watch_cleanup(void *priv)
{
    sl_rc_watch *p = priv;
    p->ac = NULL;
    uv_close((uv_handle_t *)&p->handle, watch_closed);
}

static int watch_attach(redisAsyncContext *ac, uv_loop_t *loop)
{
    sl_rc_watch *p = calloc(1, sizeof *p);
    if (!p)
        return -1;
    if (uv_poll_init(loop, &p->handle, ac->c.fd) != 0) {
        free(p);
        return -1;
    }
    p->handle.data = p;
    p->ac = ac;
    ac->ev.data = p;
    ac->ev.addRead = watch_add_read;
    ac->ev.delRead = watch_del_read;
    ac->ev.addWrite = watch_add_write;
    ac->ev.delWrite = watch_del_write;
    ac->ev.cleanup = watch_cleanup;
    return 0;
}

/* ---- the context's life ---- */

static void timer_closed(uv_handle_t *h)
{
    free(h);
}

static void drop_timer(sl_rc_async *w)
{
    if (w->timer) {
        uv_timer_stop(w->timer);
        uv_close((uv_handle_t *)w->timer, timer_closed);
        w->timer = NULL;
    }
    w->due = NEVER;
}

/* The loop's clock, read afresh: a call queued long after the loop last
 * looked at the clock (from outside the loop, or late in a slow callback)
 * would otherwise start its time limit in the past. */
static uint64_t clock_now(sl_rc_async *w)
{
    uv_update_time(w->loop);
    return uv_now(w->loop);
}

/* start + ms on the loop's clock: NEVER when ms is 0 (no limit), or when
 * the sum would not fit (a limit of ~24 days from a clock that large is
 * as good as none). */
static uint64_t deadline_after(uint64_t start, int ms)
{
    if (ms <= 0 || start > NEVER - 1 - (uint64_t)ms)
        return NEVER;
    return start + (uint64_t)ms;
}

/* The nearest deadline: the connect's while the connection is being made,
 * or the oldest pending call's, whichever comes first; NEVER for none. */
static uint64_t next_deadline(const sl_rc_async *w)
{
    uint64_t d = w->connected ? NEVER : w->connect_deadline;
    if (w->oldest) {
        uint64_t r = deadline_after(w->oldest->queued_ms, w->timeout_ms);
        if (r < d)
            d = r;
    }
    return d;
}

static void on_deadline(uv_timer_t *t);

/* Arms the timer for the nearest deadline, or stops it when there is none
 * (so that it does not keep the loop running); nothing when it is armed
 * for that deadline already, or the connection is over. */
static void rearm(sl_rc_async *w)
{
    if (!w->timer)
        return;
    uint64_t d = next_deadline(w);
    if (d == w->due)
        return;
    w->due = d;
    if (d == NEVER) {
        uv_timer_stop(w->timer);
        return;
    }
    uint64_t now = uv_now(w->loop);
    uv_timer_start(w->timer, on_deadline, d > now ? d - now : 0, 0);
}

/* Appends a call to the pending ones; the first one pending arms the
 * timer (later ones have later deadlines). */
static void link_call(sl_rc_async *w, sl_rc_call *call)
{
    call->w = w;
    call->queued_ms = clock_now(w);
    call->next = NULL;
    call->prev = w->newest;
    if (w->newest)
        w->newest->next = call;
    else
        w->oldest = call;
    w->newest = call;
    if (w->oldest == call)
        rearm(w);
}

/* Takes an answered call off the pending ones. The timer is left armed
 * for the deadline of the call answered, which is no later than the next
 * one's, unless none is pending any more. */
static void unlink_call(sl_rc_async *w, sl_rc_call *call)
{
    if (call->prev)
        call->prev->next = call->next;
    else
        w->oldest = call->next;
    if (call->next)
        call->next->prev = call->prev;
    else
        w->newest = call->prev;
    call->prev = call->next = NULL;
    if (!w->oldest)
        rearm(w);
}

/* Frees the context when it was asked to be freed and nothing of it is in
 * use any more: no callback running, none pending. */
static void maybe_release(sl_rc_async *w)
{
    if (w->freeing && !w->in_free && w->in_cb == 0 && w->pending == 0 && !w->auth_pending)
        free(w);
}

/* The connection is over: forget hiredis's context (which hiredis frees),
 * keeping the first reason given. */
static void let_go(sl_rc_async *w, redisAsyncContext *ac)
{
    if (ac)
        ac->data = NULL;
    if (w->ac == ac)
        w->ac = NULL;
    w->connected = false;
    drop_timer(w);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    sl_rc_async *w = ac->data;
    if (!w)
        return;
    if (status != REDIS_OK) {
        /* hiredis frees the context after this, answering each pending
         * call with no reply: they read this error. */
        if (!w->err)
            set_err(w, SL_RC_ERR_IO, "cannot connect to %s: %s", w->addr,
                    ac->c.errstr[0] ? ac->c.errstr : "failed");
        let_go(w, (redisAsyncContext *)ac);
        return;
    }
    w->connected = true;
    rearm(w); /* the connect's limit is over */
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    sl_rc_async *w = ac->data;
    if (!w)
        return;
    if (!w->err) {
        if (status != REDIS_OK && ac->c.errstr[0])
            set_err(w, SL_RC_ERR_IO, "connection to %s lost: %s", w->addr, ac->c.errstr);
        else
            set_err(w, SL_RC_ERR_IO, "connection to %s closed", w->addr);
    }
    let_go(w, (redisAsyncContext *)ac);
}

/*
 * The timer: a deadline may have passed. The connection not made in time,
 * or the oldest call not answered in time, ends the connection: every
 * pending call is answered with the error, the later ones too, since their
 * replies would come after the late one. Otherwise (the call the timer was
 * armed for has been answered) it is armed again. w may be freed by a
 * callback from within redisAsyncFree: nothing touches it after that.
 */
static void on_deadline(uv_timer_t *t)
{
    sl_rc_async *w = t->data;
    redisAsyncContext *ac = w->ac;
    w->due = NEVER;
    if (!ac)
        return;
    uint64_t now = uv_now(w->loop);
    if (!w->connected && w->connect_deadline <= now) {
        set_err(w, SL_RC_ERR_IO, "cannot connect to %s: no connection within %d ms", w->addr,
                w->connect_timeout_ms);
    } else if (w->oldest && deadline_after(w->oldest->queued_ms, w->timeout_ms) <= now) {
        set_err(w, SL_RC_ERR_IO, "%s: no reply to %s within %d ms%s", w->addr,
                w->oldest->expect.name, w->timeout_ms,
                w->connected ? "" : " (the connection not yet made)");
    } else {
        rearm(w);
        return;
    }
    let_go(w, ac);
    /* Every pending call is answered with the error above, now. */
    redisAsyncFree(ac);
}

/* Calls the caller's callback of `call` with an answer, or with an error
 * (err not 0: the other arguments are empty). */
static void deliver(const sl_rc_call *call, int err, const char *errstr, const sl_rc_answer *a)
{
    sl_rc_async *w = call->w;
    void *priv = call->priv;
    switch (call->expect.kind) {
    case SL_RC_AUTH:
        break;
    case SL_RC_THROTTLE:
    case SL_RC_DECISION:
        if (call->cb.decision)
            call->cb.decision(w, err, errstr, err ? NULL : &a->d[0], priv);
        break;
    case SL_RC_POLICY:
        if (call->cb.policy)
            call->cb.policy(w, err, errstr, err ? NULL : &a->d[0], err ? NULL : &a->info, priv);
        break;
    case SL_RC_MANY:
        if (call->cb.many)
            call->cb.many(w, err, errstr, err ? NULL : a->d, err ? 0 : a->n,
                          err ? -1 : a->rejected_by, priv);
        break;
    case SL_RC_COUNT:
    case SL_RC_RELEASE:
        if (call->cb.count)
            call->cb.count(w, err, errstr, err ? -1 : a->count, priv);
        break;
    case SL_RC_LEASE:
        if (call->cb.lease)
            call->cb.lease(w, err, errstr, err ? NULL : &a->lease, priv);
        break;
    }
}

/* hiredis's callback for every call: the reply, or NULL when its context is
 * being freed. */
static void on_reply(redisAsyncContext *ac, void *reply, void *privdata)
{
    sl_rc_call *call = privdata;
    sl_rc_async *w = call->w;
    sl_rc_answer a;
    char errbuf[SL_RC_ERRSTR_MAX];
    int err = 0;
    const char *errstr = NULL;
    unlink_call(w, call);
    if (!reply) {
        if (w->freeing) {
            err = SL_RC_ERR_CLOSED;
            errstr = "the context was freed before the reply came";
        } else {
            if (!w->err) {
                if (ac->c.err == REDIS_ERR_PROTOCOL)
                    set_err(w, SL_RC_ERR_IO, "%s answered with bytes that are not RESP: %s",
                            w->addr, ac->c.errstr);
                else if (ac->c.err && ac->c.errstr[0])
                    set_err(w, SL_RC_ERR_IO, "connection to %s lost: %s", w->addr, ac->c.errstr);
                else
                    set_err(w, SL_RC_ERR_IO, "connection to %s lost", w->addr);
            }
            let_go(w, ac);
            err = w->err;
            errstr = w->errstr;
        }
    } else {
        err = sl_rc_read(&call->expect, reply, &a, errbuf, sizeof errbuf);
        errstr = err ? errbuf : NULL;
    }

    if (call->expect.kind == SL_RC_AUTH) {
        w->auth_pending = false;
        if (reply && err && !w->freeing && w->ac == ac) {
            /* Every command after a refused AUTH would be refused too:
             * end the connection, and answer them with why. hiredis frees
             * the context once this callback returns. */
            set_err(w, err, "AUTH refused: %s", errbuf);
            let_go(w, ac);
            redisAsyncFree(ac);
        }
    } else {
        w->pending--;
    }
    w->in_cb++;
    deliver(call, err, errstr, &a);
    w->in_cb--;
    free(call);
    maybe_release(w);
}

sl_rc_async *sl_rc_async_connect(struct uv_loop_s *loop, const char *host, int port,
                                 const char *user, const char *password, int connect_timeout_ms)
{
    sl_rc_async *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->loop = loop;
    w->connect_timeout_ms = connect_timeout_ms;
    w->due = NEVER;
    w->connect_deadline = NEVER;
    if (!loop || !host || !*host || port <= 0 || port > 65535) {
        set_err(w, SL_RC_ERR_ARGS, "cannot connect: %s", !loop ? "no loop given"
                                                     : "not a host and a port (1-65535)");
        return w;
    }
    snprintf(w->addr, sizeof w->addr, "%s:%d", host, port);
    sl_rc_cmd auth;
    if (password && sl_rc_cmd_auth(&auth, user, password, w->errstr, sizeof w->errstr) != 0) {
        w->err = SL_RC_ERR_ARGS;
        return w;
    }
    redisAsyncContext *ac = redisAsyncConnect(host, port);
    if (!ac) {
        set_err(w, SL_RC_ERR_OOM, "cannot connect to %s: out of memory", w->addr);
        return w;
    }
    if (ac->err) {
        set_err(w, SL_RC_ERR_IO, "cannot connect to %s: %s", w->addr, ac->errstr);
        redisAsyncFree(ac);
        return w;
    }
    if (watch_attach(ac, loop) != 0) {
        set_err(w, SL_RC_ERR_OOM, "cannot connect to %s: cannot watch the socket", w->addr);
        redisAsyncFree(ac);
        return w;
    }
    w->timer = malloc(sizeof *w->timer);
    if (!w->timer || uv_timer_init(loop, w->timer) != 0) {
        free(w->timer);
        w->timer = NULL;
        set_err(w, SL_RC_ERR_OOM, "cannot connect to %s: cannot make its timer", w->addr);
        redisAsyncFree(ac);
        return w;
    }
    w->timer->data = w;
    w->connect_deadline = deadline_after(clock_now(w), connect_timeout_ms);
    ac->data = w;
    w->ac = ac;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    if (password) {
        sl_rc_call *call = calloc(1, sizeof *call);
        if (!call || redisAsyncCommandArgv(ac, on_reply, call, auth.argc, auth.argv, auth.lens) !=
                         REDIS_OK) {
            free(call);
            set_err(w, SL_RC_ERR_OOM, "cannot queue AUTH to %s: out of memory", w->addr);
            let_go(w, ac);
            redisAsyncFree(ac);
            return w;
        }
        call->expect = auth.expect;
        link_call(w, call);
        w->auth_pending = true;
    }
    rearm(w);
    return w;
}

void sl_rc_async_free(sl_rc_async *w)
{
    if (!w || w->freeing)
        return;
    w->freeing = true;
    drop_timer(w);
    redisAsyncContext *ac = w->ac;
    if (ac) {
        let_go(w, ac);
        /* Answers every pending call with SL_RC_ERR_CLOSED: now, or, from
         * inside one of hiredis's callbacks, once it returns. */
        w->in_free = true;
        redisAsyncFree(ac);
        w->in_free = false;
    }
    maybe_release(w);
}

int sl_rc_async_err(const sl_rc_async *w)
{
    return w->err;
}

const char *sl_rc_async_errstr(const sl_rc_async *w)
{
    return w->errstr;
}

size_t sl_rc_async_pending(const sl_rc_async *w)
{
    return w->pending;
}

/* Queues a built command with its callback (one of the union's, as `kind`
 * says). Returns 0, or -1 with the error set and the callback never to be
 * called. */
static int submit(sl_rc_async *w, sl_rc_cmd *cmd, sl_rc_call proto)
{
    if (!w->ac || w->freeing) {
        if (!w->err)
            set_err(w, SL_RC_ERR_CLOSED, "the connection to %s is closed", w->addr);
        return -1;
    }
    sl_rc_call *call = malloc(sizeof *call);
    if (!call) {
        set_err(w, SL_RC_ERR_OOM, "%s: out of memory", cmd->expect.name);
        return -1;
    }
    *call = proto;
    call->w = w;
    call->expect = cmd->expect;
    if (redisAsyncCommandArgv(w->ac, on_reply, call, cmd->argc, cmd->argv, cmd->lens) !=
        REDIS_OK) {
        free(call);
        set_err(w, SL_RC_ERR_OOM, "%s: cannot queue the command", cmd->expect.name);
        return -1;
    }
    link_call(w, call);
    w->pending++;
    return 0;
}

/* The start of every call: a connection still open clears the last call's
 * error; one that is over keeps why. */
static bool usable(sl_rc_async *w)
{
    if (!w->ac || w->freeing)
        return false;
    w->err = 0;
    w->errstr[0] = '\0';
    return true;
}

static int refused(sl_rc_async *w)
{
    if (!w->err)
        set_err(w, SL_RC_ERR_CLOSED, "the connection to %s is closed", w->addr);
    return -1;
}

int sl_rc_async_set_timeout(sl_rc_async *w, int timeout_ms)
{
    if (!usable(w))
        return refused(w);
    if (timeout_ms < 0) {
        set_err(w, SL_RC_ERR_ARGS, "the reply timeout must be 0 (none) or more ms, not %d",
                timeout_ms);
        return -1;
    }
    w->timeout_ms = timeout_ms;
    rearm(w);
    return 0;
}

int sl_rc_async_throttle(sl_rc_async *w, const char *key, int64_t max_burst,
                         int64_t count_per_period, int64_t period_s, int64_t quantity,
                         sl_rc_decision_cb *cb, void *priv)
{
    sl_rc_cmd cmd;
    if (!usable(w))
        return refused(w);
    if (sl_rc_cmd_throttle(&cmd, key, max_burst, count_per_period, period_s, quantity, w->errstr,
                           sizeof w->errstr) != 0) {
        w->err = SL_RC_ERR_ARGS;
        return -1;
    }
    return submit(w, &cmd, (sl_rc_call){.cb.decision = cb, .priv = priv});
}

static int async_take(sl_rc_async *w, bool peek, const char *key, const sl_rc_limit *l,
                      int64_t cost, sl_rc_decision_cb *cb, void *priv)
{
    sl_rc_cmd cmd;
    if (!usable(w))
        return refused(w);
    if (sl_rc_cmd_take(&cmd, peek, key, l, cost, w->errstr, sizeof w->errstr) != 0) {
        w->err = SL_RC_ERR_ARGS;
        return -1;
    }
    return submit(w, &cmd, (sl_rc_call){.cb.decision = cb, .priv = priv});
}

int sl_rc_async_take(sl_rc_async *w, const char *key, const sl_rc_limit *l, int64_t cost,
                     sl_rc_decision_cb *cb, void *priv)
{
    return async_take(w, false, key, l, cost, cb, priv);
}

int sl_rc_async_peek(sl_rc_async *w, const char *key, const sl_rc_limit *l, int64_t cost,
                     sl_rc_decision_cb *cb, void *priv)
{
    return async_take(w, true, key, l, cost, cb, priv);
}

int sl_rc_async_policy(sl_rc_async *w, const char *policy, const char *key, int64_t cost,
                       int64_t tokens, const char *tier, sl_rc_policy_cb *cb, void *priv)
{
    sl_rc_cmd cmd;
    if (!usable(w))
        return refused(w);
    if (sl_rc_cmd_policy(&cmd, policy, key, cost, tokens, tier, w->errstr, sizeof w->errstr) !=
        0) {
        w->err = SL_RC_ERR_ARGS;
        return -1;
    }
    return submit(w, &cmd, (sl_rc_call){.cb.policy = cb, .priv = priv});
}

int sl_rc_async_take_many(sl_rc_async *w, const sl_rc_item *items, size_t n, sl_rc_many_cb *cb,
                          void *priv)
{
    sl_rc_cmd cmd;
    if (!usable(w))
        return refused(w);
    if (sl_rc_cmd_take_many(&cmd, items, n, w->errstr, sizeof w->errstr) != 0) {
        w->err = SL_RC_ERR_ARGS;
        return -1;
    }
    return submit(w, &cmd, (sl_rc_call){.cb.many = cb, .priv = priv});
}

int sl_rc_async_reset(sl_rc_async *w, const char *const *keys, size_t n, sl_rc_count_cb *cb,
                      void *priv)
{
    sl_rc_cmd cmd;
    if (!usable(w))
        return refused(w);
    if (sl_rc_cmd_reset(&cmd, keys, n, w->errstr, sizeof w->errstr) != 0) {
        w->err = SL_RC_ERR_ARGS;
        return -1;
    }
    return submit(w, &cmd, (sl_rc_call){.cb.count = cb, .priv = priv});
}

int sl_rc_async_acquire(sl_rc_async *w, const char *key, int64_t max_in_flight, int64_t ttl_ms,
                        int64_t weight, sl_rc_lease_cb *cb, void *priv)
{
    sl_rc_cmd cmd;
    if (!usable(w))
        return refused(w);
    if (sl_rc_cmd_acquire(&cmd, key, max_in_flight, ttl_ms, weight, w->errstr,
                          sizeof w->errstr) != 0) {
        w->err = SL_RC_ERR_ARGS;
        return -1;
    }
    return submit(w, &cmd, (sl_rc_call){.cb.lease = cb, .priv = priv});
}

int sl_rc_async_acquire_adaptive(sl_rc_async *w, const char *key, const sl_rc_adaptive *a,
                                 sl_rc_lease_cb *cb, void *priv)
{
    sl_rc_cmd cmd;
    if (!usable(w))
        return refused(w);
    if (sl_rc_cmd_acquire_adaptive(&cmd, key, a, w->errstr, sizeof w->errstr) != 0) {
        w->err = SL_RC_ERR_ARGS;
        return -1;
    }
    return submit(w, &cmd, (sl_rc_call){.cb.lease = cb, .priv = priv});
}

int sl_rc_async_release(sl_rc_async *w, const char *key, const char *lease_id,
                        const sl_rc_outcome *o, sl_rc_count_cb *cb, void *priv)
{
    sl_rc_cmd cmd;
    if (!usable(w))
        return refused(w);
    if (sl_rc_cmd_release(&cmd, key, lease_id, o, w->errstr, sizeof w->errstr) != 0) {
        w->err = SL_RC_ERR_ARGS;
        return -1;
    }
    return submit(w, &cmd, (sl_rc_call){.cb.count = cb, .priv = priv});
}
