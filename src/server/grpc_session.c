/*
 * grpc_session.c: a gRPC connection's HTTP/2 session over nghttp2, without
 * its socket (grpc_session.h): the streams, their requests and the calls.
 *
 * Calls are unary: a request's HEADERS, its DATA (one length-prefixed
 * message, proto/grpc_frame.h) and the end of its stream, then the answer:
 * HEADERS (:status 200), one DATA message and the trailers (grpc-status),
 * or, for an error, one HEADERS frame that is the trailers too
 * ("Trailers-Only"). Many streams run at once; nghttp2 keeps the flow
 * control windows (a stream's window is given back as its bytes are read).
 * A request's grpc-timeout is its deadline, and the request timeout bounds
 * one without or with a later one: a request not whole by then is answered
 * DEADLINE_EXCEEDED.
 *
 * Methods:
 *   /grpc.health.v1.Health/Check    SERVING for "" (the server); for the rate
 *                                   limit service, what the service says
 *   /envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit
 *                                   the service's (grpc_session.h), which
 *                                   answers now or later; a call still
 *                                   unanswered at its deadline is answered
 *                                   DEADLINE_EXCEEDED and cancelled
 * Anything else is UNIMPLEMENTED.
 */
#include "server/grpc_session.h"

#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/secret.h"
#include "proto/grpc_frame.h"
#include "proto/rls.h"

#define GRPC_PATH_MAX 128
#define GRPC_MAX_BODY ((size_t)SL_RLS_MAX_MESSAGE + SL_GRPC_PREFIX) /* a request's DATA */

static const char path_check[] = "/grpc.health.v1.Health/Check";
static const char path_rls[] = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
static const char service_rls[] = "envoy.service.ratelimit.v3.RateLimitService";

/* One request's stream: the call a service sees. */
typedef struct sl_grpc_call gstream;
struct sl_grpc_call {
    struct sl_grpc_session *sess;
    gstream *prev, *next; /* the session's open streams */
    int32_t id;
    char path[GRPC_PATH_MAX + 1];
    bool post, grpc_type, too_large, answered;
    bool authed; /* its authorization header bears the session's token */
    size_t header_bytes;
    int64_t deadline; /* monotonic ns, as `now`; 0 = none */
    bool own_deadline; /* the deadline is grpc-timeout's, not --request-timeout's */
    uint8_t *body;    /* the request's DATA, at most GRPC_MAX_BODY bytes */
    size_t body_len, body_cap;
    uint8_t *out;     /* the answer's message with its prefix, sent by read_out */
    size_t out_len, out_off;
    bool with_service; /* handed to the service and not yet answered */
    void *data;        /* the service's */
};

struct sl_grpc_session {
    nghttp2_session *session;
    gstream *streams;
    int request_timeout_s;
    int64_t now; /* of the call under way */
    const sl_grpc_service *svc;
    void *svc_arg;
    const char *token; /* what ShouldRateLimit's "authorization: Bearer" must be; NULL: none */
    bool in_io; /* in recv or tick: the owner sends what they queue */
};

/* ---- streams ---- */

static void stream_free(gstream *s)
{
    sl_grpc_session *g = s->sess;
    if (s->with_service) {
        s->with_service = false;
        g->svc->cancel(g->svc_arg, s, s->data);
    }
    if (s->prev)
        s->prev->next = s->next;
    else
        g->streams = s->next;
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
/* An answer from the service, outside recv and tick: the owner must send it. */
static void answered_by_service(gstream *s)
{
    if (!s->with_service)
        return;
    s->with_service = false;
    if (!s->sess->in_io)
        s->sess->svc->wake(s->sess->svc_arg);
}

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
    if (nghttp2_submit_response(s->sess->session, s->id, hdrs, 3, &prd) != 0)
        nghttp2_submit_rst_stream(s->sess->session, NGHTTP2_FLAG_NONE, s->id,
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
    if (nghttp2_submit_response(s->sess->session, s->id, hdrs, 4, NULL) != 0)
        nghttp2_submit_rst_stream(s->sess->session, NGHTTP2_FLAG_NONE, s->id,
                                  NGHTTP2_INTERNAL_ERROR);
}

/* An answer that is only an HTTP status (not gRPC at all). */
static void answer_http(gstream *s, const char *status)
{
    s->answered = true;
    nghttp2_nv hdrs[] = {NV(":status", status)};
    if (nghttp2_submit_response(s->sess->session, s->id, hdrs, 1, NULL) != 0)
        nghttp2_submit_rst_stream(s->sess->session, NGHTTP2_FLAG_NONE, s->id,
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
    /* The rate limit service is SERVING once it has a configuration to
     * serve: a health checker must not route Envoy's checks here before. */
    sl_grpc_session *g = s->sess;
    bool serving = !service[0] || (g->svc && g->svc->serving(g->svc_arg));
    size_t n;
    uint8_t *out = sl_health_response_encode(serving ? SL_HEALTH_SERVING : SL_HEALTH_NOT_SERVING,
                                             SL_GRPC_PREFIX, &n);
    if (!out) {
        answer_status(s, SL_GRPC_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    answer_ok(s, out, n);
}

static void call_rls(gstream *s, const uint8_t *msg, size_t len)
{
    sl_grpc_session *g = s->sess;
    if (!g->svc) {
        answer_status(s, SL_GRPC_UNAVAILABLE, "no rate limit service on this session");
        return;
    }
    if (g->token && !s->authed) {
        answer_status(s, SL_GRPC_UNAUTHENTICATED,
                      "authentication required: send authorization: Bearer <token> "
                      "(--http-token, or --requirepass)");
        return;
    }
    s->with_service = true;
    g->svc->rate_limit(g->svc_arg, s, msg, len);
}

void sl_grpc_answer(sl_grpc_call *s, uint8_t *out, size_t len)
{
    answer_ok(s, out, len);
    answered_by_service(s);
}

void sl_grpc_answer_status(sl_grpc_call *s, int status, const char *message)
{
    answer_status(s, (sl_grpc_status)status, message);
    answered_by_service(s);
}

void sl_grpc_call_set_data(sl_grpc_call *s, void *data)
{
    s->data = data;
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
                 GRPC_MAX_BODY - SL_GRPC_PREFIX);
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
    long n = sl_grpc_message_parse(s->body, s->body_len, GRPC_MAX_BODY, &m);
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
    sl_grpc_session *g = ud;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    gstream *s = sl_calloc(1, sizeof *s);
    if (!s)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets this stream only */
    s->sess = g;
    s->id = frame->hd.stream_id;
    /* --request-timeout bounds a request that never ends, as on the other
     * ports; a sooner grpc-timeout replaces it (on_header). */
    if (g->request_timeout_s > 0)
        s->deadline = g->now + (int64_t)g->request_timeout_s * 1000000000;
    s->next = g->streams;
    if (g->streams)
        g->streams->prev = s;
    g->streams = s;
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
    if (s->header_bytes > SL_GRPC_MAX_HEADER_BYTES)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    if (is(name, namelen, ":method")) {
        s->post = is(value, valuelen, "POST");
    } else if (is(name, namelen, ":path")) {
        size_t n = valuelen < GRPC_PATH_MAX ? valuelen : GRPC_PATH_MAX;
        memcpy(s->path, value, n);
        s->path[n] = '\0';
    } else if (is(name, namelen, "authorization")) {
        const char *token = ((sl_grpc_session *)ud)->token;
        s->authed = token && valuelen > 7 && memcmp(value, "Bearer ", 7) == 0 &&
                    sl_equal_ct((const char *)value + 7, valuelen - 7, token, strlen(token));
    } else if (is(name, namelen, "content-type")) {
        s->grpc_type = sl_grpc_content_type_ok((const char *)value, valuelen);
    } else if (is(name, namelen, "grpc-timeout")) {
        int64_t ns;
        /* A value that is no timeout is ignored, as gRPC's servers do. */
        if (sl_grpc_timeout_parse((const char *)value, valuelen, &ns) == 0) {
            int64_t now = ((sl_grpc_session *)ud)->now;
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
    size_t max = GRPC_MAX_BODY;
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


/* ---- the session ---- */

static nghttp2_session_callbacks *callbacks_new(void)
{
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb) != 0)
        return NULL;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    return cb;
}

sl_grpc_session *sl_grpc_session_new(int request_timeout_s, const sl_grpc_service *svc,
                                     void *arg, const char *token)
{
    sl_grpc_session *g = sl_calloc(1, sizeof *g);
    nghttp2_session_callbacks *cb = callbacks_new();
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, SL_GRPC_MAX_STREAMS},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, SL_GRPC_MAX_HEADER_BYTES},
    };
    if (!g || !cb || nghttp2_session_server_new(&g->session, cb, g) != 0 ||
        nghttp2_submit_settings(g->session, NGHTTP2_FLAG_NONE, iv, 2) != 0) {
        if (cb)
            nghttp2_session_callbacks_del(cb);
        sl_grpc_session_free(g);
        return NULL;
    }
    nghttp2_session_callbacks_del(cb); /* the session keeps its own copy */
    g->request_timeout_s = request_timeout_s;
    g->svc = svc;
    g->svc_arg = arg;
    g->token = token;
    return g;
}

void sl_grpc_session_free(sl_grpc_session *g)
{
    if (!g)
        return;
    if (g->session)
        nghttp2_session_del(g->session); /* calls no stream close callbacks */
    while (g->streams)
        stream_free(g->streams);
    sl_free(g);
}

int sl_grpc_session_recv(sl_grpc_session *g, const uint8_t *p, size_t n, int64_t now)
{
    g->now = now;
    g->in_io = true;
    ssize_t rc = nghttp2_session_mem_recv(g->session, p, n);
    g->in_io = false;
    return rc < 0 ? -1 : 0;
}

ssize_t sl_grpc_session_send(sl_grpc_session *g, const uint8_t **data)
{
    ssize_t n = nghttp2_session_mem_send(g->session, data);
    return n < 0 ? -1 : n;
}

int sl_grpc_session_tick(sl_grpc_session *g, int64_t now)
{
    int answered = 0;
    g->in_io = true;
    for (gstream *s = g->streams; s; s = s->next) {
        if (s->answered || !s->deadline || now < s->deadline)
            continue;
        const char *why = s->own_deadline
                              ? "the deadline passed before the request was whole"
                              : "the request was not whole within --request-timeout";
        if (s->with_service) {
            /* The store has not answered by the call's deadline: the
             * client hears so now, and the service's answer is dropped. */
            s->with_service = false;
            s->sess->svc->cancel(s->sess->svc_arg, s, s->data);
            why = "the deadline passed before the store answered";
        }
        answer_status(s, SL_GRPC_DEADLINE_EXCEEDED, why);
        answered++;
    }
    g->in_io = false;
    return answered;
}

void sl_grpc_session_refuse(sl_grpc_session *g, const char *why)
{
    nghttp2_submit_goaway(g->session, NGHTTP2_FLAG_NONE, 0, NGHTTP2_REFUSED_STREAM,
                          (const uint8_t *)why, strlen(why));
}

bool sl_grpc_session_busy(const sl_grpc_session *g)
{
    return g->streams != NULL;
}

void sl_grpc_session_goaway(sl_grpc_session *g)
{
    nghttp2_session_terminate_session(g->session, NGHTTP2_NO_ERROR);
}

bool sl_grpc_session_done(sl_grpc_session *g)
{
    return !nghttp2_session_want_read(g->session) && !nghttp2_session_want_write(g->session);
}
