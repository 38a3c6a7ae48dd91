/*
 * grpc.c: the gRPC face (--grpc-port): HTTP/2 without TLS (h2c, prior
 * knowledge, as Envoy's gRPC clients speak it to a cluster marked http2),
 * one nghttp2 server session per connection, on a libuv loop of its own
 * thread.
 *
 * Calls are unary: a request's HEADERS, its DATA (one length-prefixed
 * message, proto/grpc_frame.h) and the end of its stream, then the answer:
 * HEADERS (:status 200), one DATA message and the trailers (grpc-status),
 * or, for an error, one HEADERS frame that is the trailers too
 * ("Trailers-Only"). Many streams run at once on a connection; nghttp2
 * keeps the flow control windows (a stream's window is given back as its
 * bytes are read). A request's grpc-timeout is its deadline, and
 * --request-timeout bounds one without or with a later one: a request not
 * whole by then is answered DEADLINE_EXCEEDED.
 *
 * Methods:
 *   /grpc.health.v1.Health/Check    SERVING for "" and the rate limit service
 *   /envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit
 *                                   the request is decoded and checked
 *                                   (INVALID_ARGUMENT names what is wrong);
 *                                   then UNIMPLEMENTED: no Envoy rate limit
 *                                   configuration is read in this version
 * Anything else is UNIMPLEMENTED. Bytes that are not HTTP/2 close the
 * connection (after a GOAWAY when nghttp2 has one to say).
 */
#include <inttypes.h>
#include <nghttp2/nghttp2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "common/alloc.h"
#include "proto/grpc_frame.h"
#include "proto/rls.h"
#include "server/grpc.h"
#include "server/log.h"
#include "server/server.h"

#define GRPC_MAX_STREAMS 128          /* SETTINGS_MAX_CONCURRENT_STREAMS */
#define GRPC_MAX_HEADER_BYTES 16384   /* a request's header names and values */
#define GRPC_PATH_MAX 128
#define GRPC_WRITE_QUEUE_MAX (4u << 20) /* bytes owed to a client that does not read */
#define GRPC_TICK_MS 10               /* how often deadlines are looked at */

static const char path_check[] = "/grpc.health.v1.Health/Check";
static const char path_rls[] = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
static const char service_rls[] = "envoy.service.ratelimit.v3.RateLimitService";

struct gconn;

/* One request's stream. */
typedef struct gstream {
    struct gconn *conn;
    struct gstream *prev, *next; /* the connection's open streams */
    int32_t id;
    char path[GRPC_PATH_MAX + 1];
    bool post, grpc_type, too_large, answered;
    size_t header_bytes;
    int64_t deadline; /* uv_hrtime ns; 0 = none */
    bool own_deadline; /* the deadline is grpc-timeout's, not --request-timeout's */
    uint8_t *body;    /* the request's DATA, at most max_body bytes */
    size_t body_len, body_cap;
    uint8_t *out;     /* the answer's message with its prefix, sent by read_out */
    size_t out_len, out_off;
} gstream;

typedef struct gconn {
    uv_tcp_t tcp;
    struct sl_grpc *face;
    struct gconn *prev, *next;
    nghttp2_session *session;
    gstream *streams;
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
    size_t max_body;
    nghttp2_session_callbacks *callbacks;
    uint8_t rbuf[65536];
};

typedef struct gwrite {
    uv_write_t req;
    gconn *conn;
    uint8_t *data;
} gwrite;

static void conn_close(gconn *c);
static void conn_flush(gconn *c);

/* ---- streams ---- */

static void stream_free(gstream *s)
{
    gconn *c = s->conn;
    if (s->prev)
        s->prev->next = s->next;
    else
        c->streams = s->next;
    if (s->next)
        s->next->prev = s->prev;
    sl_free(s->body);
    sl_free(s->out);
    sl_free(s);
}

/* nghttp2's data source for an answer's message: s->out, then the trailers. */
static ssize_t read_out(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length,
                        uint32_t *flags, nghttp2_data_source *source, void *user_data)
{
    gstream *s = source->ptr;
    size_t n = s->out_len - s->out_off;
    if (n > length)
        n = length;
    memcpy(buf, s->out + s->out_off, n);
    s->out_off += n;
    if (s->out_off == s->out_len) {
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        nghttp2_nv trailers[] = {
            {(uint8_t *)"grpc-status", (uint8_t *)"0", 11, 1, NGHTTP2_NV_FLAG_NONE},
        };
        if (nghttp2_submit_trailer(session, id, trailers, 1) != 0)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return (ssize_t)n;
}

#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE}

/* Answers s with a message (out: SL_GRPC_PREFIX bytes of headroom, then
 * the message; s takes it) and grpc-status 0. */
static void answer_ok(gstream *s, uint8_t *out, size_t len)
{
    sl_grpc_prefix_write(out, false, (uint32_t)(len - SL_GRPC_PREFIX));
    s->out = out;
    s->out_len = len;
    s->out_off = 0;
    s->answered = true;
    nghttp2_nv hdrs[] = {NV(":status", "200"), NV("content-type", "application/grpc"),
                         NV("grpc-accept-encoding", "identity")};
    nghttp2_data_provider prd = {.source.ptr = s, .read_callback = read_out};
    if (nghttp2_submit_response(s->conn->session, s->id, hdrs, 3, &prd) != 0)
        nghttp2_submit_rst_stream(s->conn->session, NGHTTP2_FLAG_NONE, s->id,
                                  NGHTTP2_INTERNAL_ERROR);
}

/* Answers s with an error status and message, in one HEADERS frame. */
static void answer_status(gstream *s, sl_grpc_status status, const char *message)
{
    char code[8], msg[512];
    snprintf(code, sizeof code, "%d", (int)status);
    sl_grpc_message_encode(message, strlen(message), msg, sizeof msg);
    s->answered = true;
    nghttp2_nv hdrs[] = {NV(":status", "200"), NV("content-type", "application/grpc"),
                         NV("grpc-status", code), NV("grpc-message", msg)};
    if (nghttp2_submit_response(s->conn->session, s->id, hdrs, 4, NULL) != 0)
        nghttp2_submit_rst_stream(s->conn->session, NGHTTP2_FLAG_NONE, s->id,
                                  NGHTTP2_INTERNAL_ERROR);
}

/* An answer that is only an HTTP status (not gRPC at all). */
static void answer_http(gstream *s, const char *status)
{
    s->answered = true;
    nghttp2_nv hdrs[] = {NV(":status", status)};
    if (nghttp2_submit_response(s->conn->session, s->id, hdrs, 1, NULL) != 0)
        nghttp2_submit_rst_stream(s->conn->session, NGHTTP2_FLAG_NONE, s->id,
                                  NGHTTP2_INTERNAL_ERROR);
}

static void call_health(gstream *s, const uint8_t *msg, size_t len)
{
    char service[SL_HEALTH_MAX_SERVICE + 1];
    int rc = sl_health_request_decode(msg, len, service);
    if (rc != SL_RLS_OK) {
        answer_status(s, SL_GRPC_INVALID_ARGUMENT, "not a HealthCheckRequest");
        return;
    }
    if (service[0] && strcmp(service, service_rls) != 0) {
        char m[SL_HEALTH_MAX_SERVICE + 40];
        snprintf(m, sizeof m, "unknown service '%s'", service);
        answer_status(s, SL_GRPC_NOT_FOUND, m);
        return;
    }
    size_t n;
    uint8_t *out = sl_health_response_encode(SL_HEALTH_SERVING, SL_GRPC_PREFIX, &n);
    if (!out) {
        answer_status(s, SL_GRPC_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    answer_ok(s, out, n);
}

static void call_rls(gstream *s, const uint8_t *msg, size_t len)
{
    sl_rls_request r;
    char err[256];
    int rc = sl_rls_request_decode(&r, msg, len, NULL, err, sizeof err);
    if (rc == SL_RLS_ENOMEM) {
        answer_status(s, SL_GRPC_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    if (rc != SL_RLS_OK) {
        answer_status(s, SL_GRPC_INVALID_ARGUMENT, err);
        return;
    }
    sl_rls_request_free(&r);
    answer_status(s, SL_GRPC_UNIMPLEMENTED,
                  "ShouldRateLimit is not served by this version of sluiced: it reads no "
                  "Envoy rate limit configuration yet (--envoy-config)");
}

/* The request on s is whole: answer it. */
static void call(gstream *s)
{
    if (s->answered)
        return;
    if (!s->post) {
        answer_http(s, "405");
        return;
    }
    if (!s->grpc_type) {
        answer_http(s, "415");
        return;
    }
    if (s->too_large) {
        char m[96];
        snprintf(m, sizeof m, "the request is larger than %zu bytes",
                 s->conn->face->max_body - SL_GRPC_PREFIX);
        answer_status(s, SL_GRPC_RESOURCE_EXHAUSTED, m);
        return;
    }
    bool health = strcmp(s->path, path_check) == 0, rls = strcmp(s->path, path_rls) == 0;
    if (!health && !rls) {
        char m[GRPC_PATH_MAX + 32];
        snprintf(m, sizeof m, "unknown method %s", s->path);
        answer_status(s, SL_GRPC_UNIMPLEMENTED, m);
        return;
    }
    sl_grpc_message m;
    long n = sl_grpc_message_parse(s->body, s->body_len, s->conn->face->max_body, &m);
    if (n < 0 || (size_t)n != s->body_len) {
        answer_status(s, SL_GRPC_INVALID_ARGUMENT,
                      n == SL_GRPC_INCOMPLETE ? "the request's message is cut short"
                      : n < 0                 ? "the request is not a gRPC message"
                                              : "a unary call takes one message, not more");
        return;
    }
    if (m.compressed) {
        answer_status(s, SL_GRPC_UNIMPLEMENTED, "compressed messages are not accepted "
                                                "(grpc-accept-encoding: identity)");
        return;
    }
    if (health)
        call_health(s, m.data, m.len);
    else
        call_rls(s, m.data, m.len);
}

/* ---- nghttp2's callbacks ---- */

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    gconn *c = ud;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    gstream *s = sl_calloc(1, sizeof *s);
    if (!s)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets this stream only */
    s->conn = c;
    s->id = frame->hd.stream_id;
    /* --request-timeout bounds a request that never ends, as on the other
     * ports; a sooner grpc-timeout replaces it (on_header). */
    int rt = c->face->srv->cfg.request_timeout_s;
    if (rt > 0)
        s->deadline = (int64_t)uv_hrtime() + (int64_t)rt * 1000000000;
    s->next = c->streams;
    if (c->streams)
        c->streams->prev = s;
    c->streams = s;
    nghttp2_session_set_stream_user_data(session, s->id, s);
    return 0;
}

static bool is(const uint8_t *p, size_t n, const char *lit)
{
    return n == strlen(lit) && memcmp(p, lit, n) == 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *ud)
{
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0; /* trailers of a request carry nothing we read */
    gstream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!s)
        return 0;
    s->header_bytes += namelen + valuelen;
    if (s->header_bytes > GRPC_MAX_HEADER_BYTES)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    if (is(name, namelen, ":method")) {
        s->post = is(value, valuelen, "POST");
    } else if (is(name, namelen, ":path")) {
        size_t n = valuelen < GRPC_PATH_MAX ? valuelen : GRPC_PATH_MAX;
        memcpy(s->path, value, n);
        s->path[n] = '\0';
    } else if (is(name, namelen, "content-type")) {
        s->grpc_type = sl_grpc_content_type_ok((const char *)value, valuelen);
    } else if (is(name, namelen, "grpc-timeout")) {
        int64_t ns;
        /* A value that is no timeout is ignored, as gRPC's servers do. */
        if (sl_grpc_timeout_parse((const char *)value, valuelen, &ns) == 0) {
            int64_t now = (int64_t)uv_hrtime();
            int64_t d = ns > INT64_MAX - now ? INT64_MAX : now + (ns ? ns : 1);
            if (!s->deadline || d < s->deadline) {
                s->deadline = d;
                s->own_deadline = true;
            }
        }
    }
    return 0;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t id,
                         const uint8_t *data, size_t len, void *ud)
{
    gstream *s = nghttp2_session_get_stream_user_data(session, id);
    if (!s || s->too_large || s->answered)
        return 0;
    size_t max = ((gconn *)ud)->face->max_body;
    if (len > max - s->body_len) {
        s->too_large = true; /* answered RESOURCE_EXHAUSTED at the stream's end */
        sl_free(s->body);
        s->body = NULL;
        s->body_len = s->body_cap = 0;
        return 0;
    }
    if (s->body_len + len > s->body_cap) {
        size_t cap = s->body_cap ? s->body_cap : 256;
        while (cap < s->body_len + len)
            cap *= 2;
        if (cap > max)
            cap = max;
        uint8_t *b = sl_realloc(s->body, cap);
        if (!b)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        s->body = b;
        s->body_cap = cap;
    }
    memcpy(s->body + s->body_len, data, len);
    s->body_len += len;
    return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
        !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    gstream *s = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (s)
        call(s);
    return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t id, uint32_t error_code, void *ud)
{
    gstream *s = nghttp2_session_get_stream_user_data(session, id);
    if (s) {
        nghttp2_session_set_stream_user_data(session, id, NULL);
        stream_free(s);
    }
    return 0;
}

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
        ssize_t n = nghttp2_session_mem_send(c->session, &data);
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
    if (!nghttp2_session_want_read(c->session) && !nghttp2_session_want_write(c->session) &&
        c->writes == 0)
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
    ssize_t rv = nghttp2_session_mem_recv(c->session, (const uint8_t *)buf->base, (size_t)nread);
    if (rv < 0) {
        sl_log(SL_LOG_DEBUG, "gRPC: closing a connection: %s", nghttp2_strerror((int)rv));
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
    if (c->session)
        nghttp2_session_del(c->session); /* calls no stream close callbacks */
    while (c->streams)
        stream_free(c->streams);
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
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, GRPC_MAX_STREAMS},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, GRPC_MAX_HEADER_BYTES},
    };
    if (nghttp2_session_server_new(&c->session, g->callbacks, c) != 0 ||
        nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, iv, 2) != 0 ||
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
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
        bool any = false;
        for (gstream *s = c->streams; s; s = s->next) {
            if (s->answered || !s->deadline || now < s->deadline)
                continue;
            sl_log(SL_LOG_DEBUG, "gRPC: stream %" PRId32 ": %s passed before the request "
                                 "was whole: DEADLINE_EXCEEDED",
                   s->id, s->own_deadline ? "its deadline" : "--request-timeout");
            answer_status(s, SL_GRPC_DEADLINE_EXCEEDED,
                          s->own_deadline ? "the deadline passed before the request was whole"
                                          : "the request was not whole within --request-timeout");
            any = true;
        }
        if (any)
            conn_flush(c);
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
        nghttp2_session_terminate_session(c->session, NGHTTP2_NO_ERROR);
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
    g->max_body = SL_RLS_MAX_MESSAGE + SL_GRPC_PREFIX;
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
    if (rc == 0 && nghttp2_session_callbacks_new(&g->callbacks) != 0)
        rc = UV_ENOMEM;
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "cannot listen on %s (gRPC): %s", addr,
               rc == UV_EADDRINUSE ? "Address already in use" : uv_strerror(rc));
        uv_close((uv_handle_t *)&g->listener, NULL);
        uv_run(&g->loop, UV_RUN_DEFAULT);
        uv_loop_close(&g->loop);
        sl_free(g);
        return -1;
    }
    nghttp2_session_callbacks *cb = g->callbacks;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
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
    nghttp2_session_callbacks_del(g->callbacks);
    sl_free(g);
    srv->grpc = NULL;
}
