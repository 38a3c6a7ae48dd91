/*
 * grpc.c: the gRPC face (--grpc-port): HTTP/2 without TLS (h2c, prior
 * knowledge, as Envoy's gRPC clients speak it to a cluster marked http2),
 * on the workers' loops as the other faces are: every worker accepts from
 * the port's one listening socket, and a connection lives on the worker
 * that accepted it, with that worker's handle on the backend.
 *
 * Each connection carries one session of grpc_session.c, which reads the
 * bytes, answers the calls and gives the bytes to write; this file moves
 * them between the socket and the session, serves ShouldRateLimit
 * (cmd/rls.h) with the Envoy configuration in force, and looks at
 * deadlines every GRPC_TICK_MS while the worker has connections. Bytes
 * that are not HTTP/2 close the connection (after a GOAWAY when nghttp2
 * has one to say).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "cmd/rls.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "proto/grpc_frame.h"
#include "server/grpc.h"
#include "server/dlog.h"
#include "server/envoy_stats.h"
#include "server/grpc_session.h"
#include "server/log.h"
#include "server/server.h"

#define GRPC_WRITE_QUEUE_MAX (4u << 20) /* bytes owed to a client that does not read */
#define GRPC_TICK_MS 10                 /* how often deadlines are looked at */

typedef struct sl_grpc_conn {
    uv_tcp_t tcp;
    sl_worker *w;
    struct sl_grpc_conn *prev, *next;
    sl_grpc_session *session;
    uint64_t id;
    bool closing;
    bool counted;      /* holds a client slot (srv->clients) */
    bool close_after;  /* refused: closes once its GOAWAY is written */
    unsigned writes;   /* uv_writes in flight */
    int64_t last_active;
} gconn;

typedef struct gwrite {
    uv_write_t req;
    gconn *conn;
    uint8_t *data;
} gwrite;

static void conn_close(gconn *c);
static void conn_flush(gconn *c);

/* ---- ShouldRateLimit ---- */

bool sl_rls_ctx_of(sl_worker *w, sl_rls_ctx *ctx)
{
    sl_server *srv = w->srv;
    *ctx = (sl_rls_ctx){
        .be = srv->backend,
        .bw = w->bw,
        .envoy = atomic_load(&srv->envoy),
        .clock_offset_ns = srv->clock_offset_ns,
        .now = w->now,
        .max_key_bytes = srv->cfg.max_key_bytes,
        .header_names = srv->cfg.envoy_headers,
        .decided = sl_envoy_stats_count,
        .decided_arg = w->envoy_stats,
        .logged = w->dlog ? sl_dlog_rls_grpc : NULL,
        .logged_arg = w,
    };
    return ctx->envoy != NULL;
}

static void answer_result(sl_grpc_call *call, sl_rls_call *rc)
{
    sl_rls_response resp;
    char msg[300];
    if (sl_rls_result(rc, &resp, msg, sizeof msg) != SL_OK) {
        sl_grpc_answer_status(call, SL_GRPC_UNAVAILABLE, msg);
        return;
    }
    size_t n;
    uint8_t *out = sl_rls_response_encode(&resp, SL_GRPC_PREFIX, &n);
    if (!out) {
        sl_grpc_answer_status(call, SL_GRPC_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    sl_grpc_answer(call, out, n);
}

static void on_rls_done(sl_rls_call *rc, void *arg)
{
    answer_result(arg, rc);
    sl_rls_free(rc);
}

static void rate_limit(sl_worker *w, sl_grpc_call *call, const uint8_t *msg, size_t len);

/* A call, counted and timed as HTTP's requests are: the time to serve it
 * here (a store that answers later adds its round trip outside it). */
static void svc_rate_limit(void *arg, sl_grpc_call *call, const uint8_t *msg, size_t len)
{
    sl_worker *w = ((gconn *)arg)->w;
    int64_t started = sl_now_mono();
    sl_counter_add(&w->metrics.commands, 1);
    rate_limit(w, call, msg, len);
    sl_metrics_latency(&w->metrics, SL_PROTO_GRPC, sl_now_mono() - started, 1);
}

static void rate_limit(sl_worker *w, sl_grpc_call *call, const uint8_t *msg, size_t len)
{
    sl_rls_request r;
    char err[256];
    int st = sl_rls_request_decode(&r, msg, len, NULL, err, sizeof err);
    if (st != SL_RLS_OK) {
        sl_grpc_answer_status(call, st == SL_RLS_ENOMEM ? SL_GRPC_RESOURCE_EXHAUSTED
                                                        : SL_GRPC_INVALID_ARGUMENT,
                              st == SL_RLS_ENOMEM ? "out of memory" : err);
        return;
    }
    sl_rls_ctx ctx;
    if (!sl_rls_ctx_of(w, &ctx)) {
        sl_rls_request_free(&r);
        sl_grpc_answer_status(call, SL_GRPC_UNAVAILABLE, SL_RLS_NO_CONFIG);
        return;
    }
    sl_rls_call *rc;
    st = sl_rls_start(&ctx, &r, on_rls_done, call, &rc, err, sizeof err);
    if (st < 0) {
        sl_rls_request_free(&r);
        sl_grpc_answer_status(call, st == SL_ERR_NOMEM ? SL_GRPC_RESOURCE_EXHAUSTED
                                                       : SL_GRPC_INVALID_ARGUMENT,
                              err);
    } else if (st == SL_OK) {
        on_rls_done(rc, call);
    } else {
        sl_grpc_call_set_data(call, rc);
    }
}

static void svc_cancel(void *arg, sl_grpc_call *call, void *data)
{
    if (data)
        sl_rls_cancel(data);
}

static bool svc_serving(void *arg)
{
    gconn *c = arg;
    return atomic_load(&c->w->srv->envoy) != NULL;
}

static void svc_wake(void *arg)
{
    conn_flush(arg);
}

static const sl_grpc_service service = {
    .rate_limit = svc_rate_limit,
    .cancel = svc_cancel,
    .serving = svc_serving,
    .wake = svc_wake,
};

/* ---- connections ---- */

static void on_write(uv_write_t *req, int status)
{
    gwrite *w = (gwrite *)req;
    gconn *c = w->conn;
    sl_free(w->data);
    sl_free(w);
    c->writes--;
    if (status < 0 || (c->close_after && c->writes == 0)) {
        conn_close(c);
        return;
    }
    conn_flush(c);
}

/* Writes what nghttp2 has to send; closes the connection when the session
 * is done both ways, or when the client owes too much unread. */
static void conn_flush(gconn *c)
{
    if (c->closing)
        return;
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        const uint8_t *data;
        ssize_t n = sl_grpc_session_send(c->session, &data);
        if (n < 0) {
            sl_free(buf);
            conn_close(c);
            return;
        }
        if (n == 0)
            break;
        if (len + (size_t)n > cap) {
            size_t ncap = cap ? cap : 4096;
            while (ncap < len + (size_t)n)
                ncap *= 2;
            uint8_t *b = sl_realloc(buf, ncap);
            if (!b) {
                sl_free(buf);
                conn_close(c);
                return;
            }
            buf = b;
            cap = ncap;
        }
        memcpy(buf + len, data, (size_t)n);
        len += (size_t)n;
    }
    if (len) {
        gwrite *w = sl_malloc(sizeof *w);
        if (!w) {
            sl_free(buf);
            conn_close(c);
            return;
        }
        w->conn = c;
        w->data = buf;
        uv_buf_t b = uv_buf_init((char *)buf, (unsigned)len);
        if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_write) != 0) {
            sl_free(buf);
            sl_free(w);
            conn_close(c);
            return;
        }
        c->writes++;
        if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > GRPC_WRITE_QUEUE_MAX) {
            sl_log(SL_LOG_INFO, "gRPC client %llu: closing: it does not read its answers",
                   (unsigned long long)c->id);
            conn_close(c);
            return;
        }
    }
    if ((sl_grpc_session_done(c->session) || c->close_after) && c->writes == 0)
        conn_close(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    gconn *c = h->data;
    /* One read buffer per worker: the session consumes a read whole. */
    static _Thread_local uint8_t rbuf[65536];
    (void)c;
    *buf = uv_buf_init((char *)rbuf, sizeof rbuf);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    gconn *c = stream->data;
    if (nread == 0 || c->closing)
        return;
    if (nread < 0) {
        conn_close(c);
        return;
    }
    sl_worker *w = c->w;
    w->now = sl_now_mono();
    c->last_active = w->now;
    sl_worker_enter(w);
    int rc = sl_grpc_session_recv(c->session, (const uint8_t *)buf->base, (size_t)nread, w->now);
    sl_worker_leave(w);
    if (rc != 0) {
        sl_log(SL_LOG_DEBUG, "gRPC client %llu: closing: its bytes are not HTTP/2",
               (unsigned long long)c->id);
        /* Say GOAWAY when nghttp2 has one queued, then close. */
        conn_flush(c);
        conn_close(c);
        return;
    }
    conn_flush(c);
}

static void on_conn_closed(uv_handle_t *h)
{
    gconn *c = h->data;
    sl_worker *w = c->w;
    /* Calls still waiting for the store are cancelled: their answers,
     * when they come, free themselves. */
    sl_grpc_session_free(c->session);
    if (c->prev)
        c->prev->next = c->next;
    else
        w->gconns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    sl_free(c);
    if (!w->gconns && !uv_is_closing((uv_handle_t *)&w->grpc_tick))
        uv_timer_stop(&w->grpc_tick);
}

static void conn_close(gconn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    if (c->counted) {
        atomic_fetch_sub(&c->w->srv->clients, 1);
        atomic_fetch_sub(&c->w->srv->clients_on[SL_PROTO_GRPC], 1);
        c->counted = false;
    }
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

/* Says why in a GOAWAY (gRPC clients show its debug data), then closes. */
static void conn_refuse(gconn *c, const char *why)
{
    atomic_fetch_add(&c->w->srv->rejected_connections, 1);
    sl_log(SL_LOG_INFO, "gRPC client %llu refused: %s", (unsigned long long)c->id, why);
    sl_grpc_session_refuse(c->session, why);
    c->close_after = true;
    conn_flush(c);
}

static void on_tick(uv_timer_t *t)
{
    sl_worker *w = t->data;
    int64_t now = sl_now_mono();
    int64_t idle = (int64_t)w->srv->cfg.idle_timeout_s * 1000000000;
    for (gconn *c = w->gconns, *next; c; c = next) {
        next = c->next;
        if (c->closing)
            continue;
        int n = sl_grpc_session_tick(c->session, now);
        if (n > 0) {
            sl_log(SL_LOG_DEBUG, "gRPC client %llu: %d call(s) answered DEADLINE_EXCEEDED",
                   (unsigned long long)c->id, n);
            conn_flush(c);
        } else if (idle > 0 && now - c->last_active > idle && !sl_grpc_session_busy(c->session) &&
                   c->writes == 0) {
            sl_log(SL_LOG_DEBUG, "gRPC client %llu: idle; closing", (unsigned long long)c->id);
            sl_grpc_session_goaway(c->session);
            c->close_after = true;
            conn_flush(c);
        }
    }
}

void sl_grpc_on_connection(uv_stream_t *listener, int status)
{
    sl_worker *w = listener->data;
    sl_server *srv = w->srv;
    if (status < 0) {
        sl_log(SL_LOG_WARN, "accept on the gRPC port: %s", uv_strerror(status));
        return;
    }
    gconn *c = sl_worker_accept_fails() ? NULL : sl_calloc(1, sizeof *c);
    if (!c || uv_tcp_init(&w->loop, &c->tcp) != 0) {
        /* As the other faces do: libuv keeps the connection unaccepted,
         * and the worker's tick tries again. */
        sl_worker_accept_later(w, SL_PROTO_GRPC);
        sl_free(c);
        return;
    }
    c->w = w;
    c->tcp.data = c;
    c->next = w->gconns;
    if (w->gconns)
        w->gconns->prev = c;
    w->gconns = c;
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
        conn_close(c);
        return;
    }
    c->id = atomic_fetch_add(&srv->next_client_id, 1) + 1;
    c->last_active = sl_now_mono();
    atomic_fetch_add(&srv->connections_received, 1);
    int clients = atomic_fetch_add(&srv->clients, 1) + 1;
    int on_port = atomic_fetch_add(&srv->clients_on[SL_PROTO_GRPC], 1) + 1;
    c->counted = true;
    uv_tcp_nodelay(&c->tcp, 1);
    /* The HTTP port's token: both faces answer ShouldRateLimit. */
    c->session =
        sl_grpc_session_new(srv->cfg.request_timeout_s, &service, c, sl_http_token(&srv->cfg));
    if (!c->session) {
        conn_close(c);
        return;
    }
    if (!uv_is_active((uv_handle_t *)&w->grpc_tick))
        uv_timer_start(&w->grpc_tick, on_tick, GRPC_TICK_MS, GRPC_TICK_MS);
    if (clients > srv->cfg.maxclients) {
        char why[96];
        snprintf(why, sizeof why, "max number of clients reached (--maxclients %d)",
                 srv->cfg.maxclients);
        conn_refuse(c, why);
        return;
    }
    if (on_port > srv->port_maxclients) {
        char why[160];
        snprintf(why, sizeof why,
                 "max number of clients reached on the gRPC port (%d: --maxclients-port-share "
                 "%d of --maxclients %d)",
                 srv->port_maxclients, srv->cfg.port_share_pct, srv->cfg.maxclients);
        conn_refuse(c, why);
        return;
    }
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
        conn_close(c);
        return;
    }
    conn_flush(c);
}

void sl_grpc_worker_init(sl_worker *w)
{
    uv_timer_init(&w->loop, &w->grpc_tick);
    w->grpc_tick.data = w;
}

void sl_grpc_worker_stop(sl_worker *w)
{
    for (gconn *c = w->gconns, *next; c; c = next) {
        next = c->next;
        if (c->closing)
            continue;
        /* No new calls; the open ones are answered, then it closes
         * (conn_flush, once the session is done), within the grace. */
        sl_grpc_session_goaway(c->session);
        conn_flush(c);
    }
}

void sl_grpc_worker_close(sl_worker *w)
{
    for (gconn *c = w->gconns, *next; c; c = next) {
        next = c->next;
        if (!c->closing)
            sl_log(SL_LOG_WARN, "gRPC client %llu: still owed answers at shutdown; closing",
                   (unsigned long long)c->id);
        conn_close(c);
    }
    if (!uv_is_closing((uv_handle_t *)&w->grpc_tick)) {
        uv_timer_stop(&w->grpc_tick);
        uv_close((uv_handle_t *)&w->grpc_tick, NULL);
    }
}
