/*
 * grpc.c: the gRPC face (--grpc-port): HTTP/2 without TLS (h2c, prior
 * knowledge, as Envoy's gRPC clients speak it to a cluster marked http2),
 * on a libuv loop of its own thread. Each connection carries one session
 * of grpc_session.c, which reads the bytes, answers the calls and gives
 * the bytes to write; this file only moves them between the socket and the
 * session, and looks at deadlines every GRPC_TICK_MS. Bytes that are not
 * HTTP/2 close the connection (after a GOAWAY when nghttp2 has one to say).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "common/alloc.h"
#include "server/grpc.h"
#include "server/grpc_session.h"
#include "server/log.h"
#include "server/server.h"

#define GRPC_WRITE_QUEUE_MAX (4u << 20) /* bytes owed to a client that does not read */
#define GRPC_TICK_MS 10                 /* how often deadlines are looked at */

typedef struct gconn {
    uv_tcp_t tcp;
    struct sl_grpc *face;
    struct gconn *prev, *next;
    sl_grpc_session *session;
    bool closing;
    unsigned writes; /* uv_writes in flight */
} gconn;

struct sl_grpc {
    sl_server *srv;
    uv_loop_t loop;
    uv_tcp_t listener;
    uv_tcp_t spare;  /* accepts and closes a client when memory runs out */
    bool spare_busy;
    uv_async_t stop;
    uv_timer_t tick;
    pthread_t thread;
    gconn *conns;
    int nconns;
    uint8_t rbuf[65536];
};

typedef struct gwrite {
    uv_write_t req;
    gconn *conn;
    uint8_t *data;
} gwrite;

static void conn_close(gconn *c);
static void conn_flush(gconn *c);

/* ---- connections ---- */

static void on_write(uv_write_t *req, int status)
{
    gwrite *w = (gwrite *)req;
    gconn *c = w->conn;
    sl_free(w->data);
    sl_free(w);
    c->writes--;
    if (status < 0) {
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
            sl_log(SL_LOG_INFO, "gRPC: closing a client that does not read its answers");
            conn_close(c);
            return;
        }
    }
    if (sl_grpc_session_done(c->session) && c->writes == 0)
        conn_close(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    gconn *c = h->data;
    *buf = uv_buf_init((char *)c->face->rbuf, sizeof c->face->rbuf);
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
    if (sl_grpc_session_recv(c->session, (const uint8_t *)buf->base, (size_t)nread,
                             (int64_t)uv_hrtime()) != 0) {
        sl_log(SL_LOG_DEBUG, "gRPC: closing a connection: its bytes are not HTTP/2");
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
    struct sl_grpc *g = c->face;
    sl_grpc_session_free(c->session);
    if (c->prev)
        c->prev->next = c->next;
    else
        g->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    g->nconns--;
    sl_free(c);
}

static void conn_close(gconn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

static void on_spare_closed(uv_handle_t *h)
{
    ((struct sl_grpc *)h->data)->spare_busy = false;
}

static void on_connection(uv_stream_t *listener, int status)
{
    struct sl_grpc *g = listener->data;
    if (status < 0)
        return;
    gconn *c = sl_calloc(1, sizeof *c);
    if (!c) {
        /* Out of memory: the connection is accepted into the spare handle
         * and closed, so that libuv goes on accepting the next ones. */
        if (!g->spare_busy && uv_tcp_init(&g->loop, &g->spare) == 0) {
            g->spare_busy = true;
            g->spare.data = g;
            uv_accept(listener, (uv_stream_t *)&g->spare);
            uv_close((uv_handle_t *)&g->spare, on_spare_closed);
        }
        sl_log(SL_LOG_WARN, "gRPC: a client refused: out of memory");
        return;
    }
    c->face = g;
    uv_tcp_init(&g->loop, &c->tcp);
    c->tcp.data = c;
    c->next = g->conns;
    if (g->conns)
        g->conns->prev = c;
    g->conns = c;
    g->nconns++;
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
        conn_close(c);
        return;
    }
    if (g->nconns > g->srv->cfg.maxclients) {
        sl_log(SL_LOG_INFO, "gRPC: client refused: max number of clients reached (--maxclients %d)",
               g->srv->cfg.maxclients);
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    c->session = sl_grpc_session_new(g->srv->cfg.request_timeout_s);
    if (!c->session || uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
        conn_close(c);
        return;
    }
    conn_flush(c);
}

/* Answers DEADLINE_EXCEEDED to every request whose deadline has passed
 * before it was whole. */
static void on_tick(uv_timer_t *t)
{
    struct sl_grpc *g = t->data;
    int64_t now = (int64_t)uv_hrtime();
    for (gconn *c = g->conns; c; c = c->next) {
        if (c->closing)
            continue;
        int n = sl_grpc_session_tick(c->session, now);
        if (n > 0) {
            sl_log(SL_LOG_DEBUG, "gRPC: %d request(s) answered DEADLINE_EXCEEDED: not whole by "
                                 "their deadline",
                   n);
            conn_flush(c);
        }
    }
}

static void on_any_closed(uv_handle_t *h)
{
}

static void on_stop(uv_async_t *a)
{
    struct sl_grpc *g = a->data;
    uv_close((uv_handle_t *)&g->listener, on_any_closed);
    uv_close((uv_handle_t *)&g->tick, on_any_closed);
    uv_close((uv_handle_t *)&g->stop, on_any_closed);
    for (gconn *c = g->conns; c; c = c->next) {
        if (c->closing)
            continue;
        sl_grpc_session_goaway(c->session);
        /* The GOAWAY goes out with the answers already owed (libuv writes
         * what the socket takes at once), then the connection closes, even
         * with a request still open on it: shutdown waits for no client. */
        conn_flush(c);
        conn_close(c);
    }
}

static void *grpc_thread(void *arg)
{
    struct sl_grpc *g = arg;
    uv_run(&g->loop, UV_RUN_DEFAULT);
    return NULL;
}

int sl_grpc_start(sl_server *srv)
{
    if (srv->cfg.grpc_port == 0)
        return 0;
    struct sl_grpc *g = sl_calloc(1, sizeof *g);
    if (!g) {
        sl_log(SL_LOG_ERROR, "gRPC: out of memory");
        return -1;
    }
    g->srv = srv;
    char addr[SL_LOG_ADDR_MAX];
    sl_log_addr(addr, srv->cfg.bind, srv->cfg.grpc_port);
    struct sockaddr_storage sa;
    int rc = uv_ip4_addr(srv->cfg.bind, srv->cfg.grpc_port, (struct sockaddr_in *)&sa);
    if (rc != 0)
        rc = uv_ip6_addr(srv->cfg.bind, srv->cfg.grpc_port, (struct sockaddr_in6 *)&sa);
    if (rc == 0)
        rc = uv_loop_init(&g->loop);
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "cannot listen on %s (gRPC): %s", addr, uv_strerror(rc));
        sl_free(g);
        return -1;
    }
    uv_tcp_init(&g->loop, &g->listener);
    g->listener.data = g;
    rc = uv_tcp_bind(&g->listener, (const struct sockaddr *)&sa, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&g->listener, 511, on_connection);
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "cannot listen on %s (gRPC): %s", addr,
               rc == UV_EADDRINUSE ? "Address already in use" : uv_strerror(rc));
        uv_close((uv_handle_t *)&g->listener, NULL);
        uv_run(&g->loop, UV_RUN_DEFAULT);
        uv_loop_close(&g->loop);
        sl_free(g);
        return -1;
    }
    uv_async_init(&g->loop, &g->stop, on_stop);
    g->stop.data = g;
    uv_timer_init(&g->loop, &g->tick);
    g->tick.data = g;
    uv_timer_start(&g->tick, on_tick, GRPC_TICK_MS, GRPC_TICK_MS);
    if (pthread_create(&g->thread, NULL, grpc_thread, g) != 0) {
        sl_log(SL_LOG_ERROR, "gRPC: cannot start its thread");
        return -1; /* the process exits */
    }
    srv->grpc = g;
    sl_log(SL_LOG_INFO, "gRPC on %s (h2c): Health/Check; ShouldRateLimit answers UNIMPLEMENTED "
                        "in this version",
           addr);
    return 0;
}

void sl_grpc_stop(sl_server *srv)
{
    struct sl_grpc *g = srv->grpc;
    if (!g)
        return;
    uv_async_send(&g->stop);
    pthread_join(g->thread, NULL);
    uv_loop_close(&g->loop);
    sl_free(g);
    srv->grpc = NULL;
}
