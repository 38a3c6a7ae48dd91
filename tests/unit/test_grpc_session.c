/*
 * test_grpc_session.c: the gRPC face's HTTP/2 session
 * (src/server/grpc_session.c) against nghttp2's client session, byte for
 * byte in memory, on a virtual clock: calls and their answers (headers,
 * message, trailers), errors in one HEADERS frame, deadlines that pass at
 * their nanosecond and not before, --request-timeout, bytes that are not
 * HTTP/2, GOAWAY.
 */
#include <criterion/criterion.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/grpc_frame.h"
#include "server/grpc_session.h"

#define MAX_STREAMS 16

/* What the client saw of one stream. */
typedef struct seen {
    char status[8], grpc_status[8], grpc_message[256], content_type[64];
    uint8_t data[4096];
    size_t data_len;
    bool closed;
} seen;

typedef struct client {
    nghttp2_session *session;
    seen streams[MAX_STREAMS * 2 + 2]; /* by stream id */
} client;

static void copy_value(char *dst, size_t cap, const uint8_t *v, size_t n)
{
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, v, n);
    dst[n] = '\0';
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl,
                     const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
    seen *x = &((client *)ud)->streams[f->hd.stream_id];
    if (nl == 7 && memcmp(name, ":status", 7) == 0)
        copy_value(x->status, sizeof x->status, value, vl);
    else if (nl == 11 && memcmp(name, "grpc-status", 11) == 0)
        copy_value(x->grpc_status, sizeof x->grpc_status, value, vl);
    else if (nl == 12 && memcmp(name, "grpc-message", 12) == 0)
        copy_value(x->grpc_message, sizeof x->grpc_message, value, vl);
    else if (nl == 12 && memcmp(name, "content-type", 12) == 0)
        copy_value(x->content_type, sizeof x->content_type, value, vl);
    return 0;
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *d, size_t n,
                   void *ud)
{
    seen *x = &((client *)ud)->streams[id];
    cr_assert_leq(x->data_len + n, sizeof x->data);
    memcpy(x->data + x->data_len, d, n);
    x->data_len += n;
    return 0;
}

static int on_close(nghttp2_session *s, int32_t id, uint32_t err, void *ud)
{
    ((client *)ud)->streams[id].closed = true;
    return 0;
}

static void client_init(client *c)
{
    memset(c, 0, sizeof *c);
    nghttp2_session_callbacks *cb;
    cr_assert_eq(nghttp2_session_callbacks_new(&cb), 0);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
    cr_assert_eq(nghttp2_session_client_new(&c->session, cb, c), 0);
    nghttp2_session_callbacks_del(cb);
    cr_assert_eq(nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, NULL, 0), 0);
}

/* Moves bytes both ways until neither side has any to send. */
static void pump(client *c, sl_grpc_session *g, int64_t now)
{
    for (int round = 0; round < 100; round++) {
        bool moved = false;
        const uint8_t *d;
        ssize_t n;
        while ((n = nghttp2_session_mem_send(c->session, &d)) > 0) {
            cr_assert_eq(sl_grpc_session_recv(g, d, (size_t)n, now), 0);
            moved = true;
        }
        cr_assert_geq(n, 0);
        while ((n = sl_grpc_session_send(g, &d)) > 0) {
            cr_assert_geq(nghttp2_session_mem_recv(c->session, d, (size_t)n), 0);
            moved = true;
        }
        cr_assert_geq(n, 0);
        if (!moved)
            return;
    }
    cr_assert_fail("the two sessions never settle");
}

/* The request's message, prefixed, as a data source. */
typedef struct body {
    uint8_t b[1024];
    size_t len, off;
    bool open; /* a request whose message never comes */
} body;

static ssize_t read_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    body *b = src->ptr;
    if (b->open)
        return NGHTTP2_ERR_DEFERRED;
    size_t n = b->len - b->off < length ? b->len - b->off : length;
    memcpy(buf, b->b + b->off, n);
    b->off += n;
    if (b->off == b->len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

#define NV(n, v) {(uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE}

/* Opens a stream on path; with msg (len bytes), sends it and ends the
 * stream, else leaves the request open (its DATA deferred for ever).
 * timeout: grpc-timeout or NULL. */
static int32_t call(client *c, const char *path, const char *timeout, body *b,
                    const void *msg, size_t len)
{
    nghttp2_nv nv[7] = {NV(":method", "POST"), NV(":scheme", "http"), NV(":path", path),
                        NV(":authority", "sluiced"), NV("content-type", "application/grpc"),
                        NV("te", "trailers")};
    size_t n = 6;
    if (timeout)
        nv[n++] = (nghttp2_nv)NV("grpc-timeout", timeout);
    nghttp2_data_provider prd = {.source.ptr = b, .read_callback = read_body};
    b->open = msg == NULL;
    if (msg) {
        cr_assert_leq(len + SL_GRPC_PREFIX, sizeof b->b);
        sl_grpc_prefix_write(b->b, false, (uint32_t)len);
        memcpy(b->b + SL_GRPC_PREFIX, msg, len);
        b->len = len + SL_GRPC_PREFIX;
        b->off = 0;
    }
    int32_t id = nghttp2_submit_request(c->session, NULL, nv, n, &prd, NULL);
    cr_assert_gt(id, 0);
    return id;
}

static const char health[] = "/grpc.health.v1.Health/Check";
static const char rls[] = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
static const int64_t T = 5000000000; /* the virtual clock's start */

Test(grpc_session, a_health_check_is_headers_message_and_trailers)
{
    client c;
    client_init(&c);
    sl_grpc_session *g = sl_grpc_session_new(10, NULL, NULL, NULL);
    cr_assert_not_null(g);
    body b;
    int32_t id = call(&c, health, NULL, &b, "", 0);
    pump(&c, g, T);
    seen *x = &c.streams[id];
    cr_assert(x->closed);
    cr_assert_str_eq(x->status, "200");
    cr_assert_str_eq(x->content_type, "application/grpc");
    cr_assert_str_eq(x->grpc_status, "0");
    /* one message: HealthCheckResponse{status: SERVING} is 08 01 */
    cr_assert_eq(x->data_len, 7);
    cr_assert(memcmp(x->data, "\x00\x00\x00\x00\x02\x08\x01", 7) == 0);
    sl_grpc_session_free(g);
    nghttp2_session_del(c.session);
}

/* A service that answers a 2-byte request at once (INVALID_ARGUMENT) and
 * keeps any other for later, as the store's answers come. */
typedef struct test_svc {
    sl_grpc_call *held;
    int calls, wakes, cancels;
    void *cancelled_data;
} test_svc;

static void svc_rate_limit(void *arg, sl_grpc_call *call, const uint8_t *msg, size_t len)
{
    test_svc *t = arg;
    t->calls++;
    if (len == 2) {
        sl_grpc_answer_status(call, SL_GRPC_INVALID_ARGUMENT, "two bytes");
        return;
    }
    t->held = call;
    sl_grpc_call_set_data(call, t);
}

static void svc_cancel(void *arg, sl_grpc_call *call, void *data)
{
    test_svc *t = arg;
    t->cancels++;
    t->cancelled_data = data;
    if (t->held == call)
        t->held = NULL;
}

static bool svc_serving(void *arg)
{
    return true;
}

static void svc_wake(void *arg)
{
    ((test_svc *)arg)->wakes++;
}

static const sl_grpc_service test_service = {svc_rate_limit, svc_cancel, svc_serving, svc_wake};

Test(grpc_session, should_rate_limit_goes_to_the_service_now_or_later)
{
    client c;
    client_init(&c);
    test_svc t = {0};
    sl_grpc_session *g = sl_grpc_session_new(10, &test_service, &t, NULL);
    body b1, b2, b3;
    /* domain "edge", one descriptor ("k", "v") */
    static const uint8_t req[] = {0x0a, 4, 'e', 'd', 'g', 'e', 0x12, 8, 0x0a, 6,
                                  0x0a, 1, 'k', 0x12, 1, 'v'};
    int32_t later = call(&c, rls, "5S", &b1, req, sizeof req);
    int32_t now = call(&c, rls, NULL, &b2, "\x0a\x50", 2);
    int32_t unknown = call(&c, "/a.B/C", NULL, &b3, "", 0);
    pump(&c, g, T);
    cr_assert_eq(t.calls, 2);
    /* answered in the call: no wake-up, the owner sends after recv */
    cr_assert_eq(t.wakes, 0);
    cr_assert_str_eq(c.streams[now].grpc_status, "3");
    cr_assert_str_eq(c.streams[now].grpc_message, "two bytes");
    cr_assert_str_eq(c.streams[unknown].grpc_status, "12");
    cr_assert_str_eq(c.streams[unknown].grpc_message, "unknown method /a.B/C");
    cr_assert_str_eq(c.streams[later].grpc_status, "");
    /* the answer comes later: the owner is woken to send it */
    cr_assert(t.held != NULL);
    size_t n = SL_GRPC_PREFIX + 2;
    uint8_t *out = malloc(n);
    out[SL_GRPC_PREFIX] = 0x08, out[SL_GRPC_PREFIX + 1] = 0x01; /* overall_code OK */
    sl_grpc_answer(t.held, out, n);
    cr_assert_eq(t.wakes, 1);
    pump(&c, g, T);
    cr_assert_str_eq(c.streams[later].grpc_status, "0");
    cr_assert_eq(c.streams[later].data_len, n);
    cr_assert_eq(t.cancels, 0);
    /* a call still held when the session ends is cancelled, with its data */
    body b4;
    call(&c, rls, NULL, &b4, req, sizeof req);
    pump(&c, g, T);
    cr_assert(t.held != NULL);
    sl_grpc_session_free(g);
    cr_assert_eq(t.cancels, 1);
    cr_assert_eq(t.cancelled_data, &t);
    nghttp2_session_del(c.session);
}

Test(grpc_session, without_a_service_should_rate_limit_is_unavailable)
{
    client c;
    client_init(&c);
    sl_grpc_session *g = sl_grpc_session_new(10, NULL, NULL, NULL);
    body b1;
    int32_t id = call(&c, rls, NULL, &b1, "", 0);
    pump(&c, g, T);
    cr_assert_str_eq(c.streams[id].grpc_status, "14");
    sl_grpc_session_free(g);
    nghttp2_session_del(c.session);
}

Test(grpc_session, a_deadline_passes_at_its_nanosecond_and_not_before)
{
    client c;
    client_init(&c);
    sl_grpc_session *g = sl_grpc_session_new(0, NULL, NULL, NULL);
    body b;
    int32_t id = call(&c, rls, "200m", &b, NULL, 0);
    pump(&c, g, T);
    cr_assert(!c.streams[id].closed);
    cr_assert_eq(sl_grpc_session_tick(g, T + 199999999), 0);
    pump(&c, g, T + 199999999);
    cr_assert_str_eq(c.streams[id].grpc_status, "");
    cr_assert_eq(sl_grpc_session_tick(g, T + 200000000), 1);
    pump(&c, g, T + 200000000);
    cr_assert_str_eq(c.streams[id].grpc_status, "4");
    cr_assert_str_eq(c.streams[id].grpc_message,
                     "the deadline passed before the request was whole");
    cr_assert_eq(sl_grpc_session_tick(g, T + 900000000), 0); /* answered once */
    sl_grpc_session_free(g); /* the stream still open: freed with the session */
    nghttp2_session_del(c.session);
}

Test(grpc_session, request_timeout_bounds_a_request_without_its_own)
{
    client c;
    client_init(&c);
    sl_grpc_session *g = sl_grpc_session_new(2, NULL, NULL, NULL);
    body b1, b2;
    int32_t plain = call(&c, rls, NULL, &b1, NULL, 0);
    int32_t later = call(&c, rls, "1H", &b2, NULL, 0); /* later than 2 s: the 2 s win */
    pump(&c, g, T);
    cr_assert_eq(sl_grpc_session_tick(g, T + 1999999999), 0);
    cr_assert_eq(sl_grpc_session_tick(g, T + 2000000000), 2);
    pump(&c, g, T + 2000000000);
    cr_assert_str_eq(c.streams[plain].grpc_status, "4");
    cr_assert_str_eq(c.streams[plain].grpc_message,
                     "the request was not whole within --request-timeout");
    cr_assert_str_eq(c.streams[later].grpc_message,
                     "the request was not whole within --request-timeout");
    sl_grpc_session_free(g);
    nghttp2_session_del(c.session);
}

Test(grpc_session, bytes_that_are_not_http2)
{
    /* Not even the preface: refused, and the caller closes. */
    sl_grpc_session *g = sl_grpc_session_new(10, NULL, NULL, NULL);
    const char *h1 = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    cr_assert_eq(sl_grpc_session_recv(g, (const uint8_t *)h1, strlen(h1), T), -1);
    const uint8_t *d;
    while (sl_grpc_session_send(g, &d) > 0)
        ;
    sl_grpc_session_free(g);

    /* The preface, then a SETTINGS frame of 5 bytes (a multiple of 6 or an
     * error): a GOAWAY (frame type 7) says so, and the session is done. */
    g = sl_grpc_session_new(10, NULL, NULL, NULL);
    static const uint8_t bad[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
                                 "\x00\x00\x05\x04\x00\x00\x00\x00\x00"
                                 "\x00\x03\x00\x00\x00";
    int rc = sl_grpc_session_recv(g, bad, sizeof bad - 1, T);
    bool goaway = false;
    ssize_t n;
    while ((n = sl_grpc_session_send(g, &d)) > 0) {
        /* walk the frames of this chunk */
        for (ssize_t off = 0; off + 9 <= n;) {
            size_t len = (size_t)d[off] << 16 | (size_t)d[off + 1] << 8 | d[off + 2];
            goaway |= d[off + 3] == 7;
            off += 9 + (ssize_t)len;
        }
    }
    cr_assert_geq(n, 0);
    cr_assert(goaway, "rc %d", rc);
    cr_assert(sl_grpc_session_done(g));
    sl_grpc_session_free(g);
}

Test(grpc_session, goaway_ends_the_session_once_streams_end)
{
    client c;
    client_init(&c);
    sl_grpc_session *g = sl_grpc_session_new(0, NULL, NULL, NULL);
    body b;
    call(&c, health, NULL, &b, "", 0);
    pump(&c, g, T);
    cr_assert(!sl_grpc_session_done(g));
    sl_grpc_session_goaway(g);
    pump(&c, g, T);
    cr_assert(sl_grpc_session_done(g));
    sl_grpc_session_free(g);
    nghttp2_session_del(c.session);
}
