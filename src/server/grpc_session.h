/*
 * grpc_session.h: one gRPC connection's HTTP/2 session, without its socket
 * (src/server/grpc_session.c): bytes from the client in, bytes for the
 * client out, the calls answered in between. grpc.c puts it on a libuv
 * connection; tests/fuzz/fuzz_grpc_session.c feeds it bytes directly.
 *
 * Time comes in as `now` (monotonic nanoseconds) on every call that may
 * need it, as everywhere in sluice: the session reads no clock.
 */
#ifndef SL_SERVER_GRPC_SESSION_H
#define SL_SERVER_GRPC_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SL_GRPC_MAX_STREAMS 128         /* SETTINGS_MAX_CONCURRENT_STREAMS */
#define SL_GRPC_MAX_HEADER_BYTES 16384  /* a request's header names and values */

typedef struct sl_grpc_session sl_grpc_session;

/* A call the session hands to its service: one request's stream. */
typedef struct sl_grpc_call sl_grpc_call;

/*
 * What serves the methods that are not the session's own (all but
 * Health/Check). Each is called with the service's arg.
 */
typedef struct sl_grpc_service {
    /* ShouldRateLimit's request, msg[0 .. len) (valid during the call).
     * The service answers it once, now or later, with sl_grpc_answer or
     * sl_grpc_answer_status; until then it may keep data with the call
     * (sl_grpc_call_set_data). */
    void (*rate_limit)(void *arg, sl_grpc_call *call, const uint8_t *msg, size_t len);
    /* The call's stream is gone before its answer (the client reset it, or
     * the connection closed): the service must not answer it. */
    void (*cancel)(void *arg, sl_grpc_call *call, void *data);
    /* Whether the rate limit service is SERVING (Health/Check). */
    bool (*serving)(void *arg);
    /* An answer was queued outside sl_grpc_session_recv and _tick: the
     * owner has bytes to send (sl_grpc_session_send). */
    void (*wake)(void *arg);
} sl_grpc_service;

/* A new session (the caller frees it with sl_grpc_session_free), with its
 * SETTINGS queued to send; request_timeout_s bounds a request that never
 * ends (0: no bound but its own grpc-timeout). svc (NULL: ShouldRateLimit
 * answers UNAVAILABLE) serves the calls, with arg. With a token (NULL:
 * none), a ShouldRateLimit whose "authorization" header is not "Bearer
 * TOKEN" is answered UNAUTHENTICATED: it would change state (a health
 * check needs none). The token must outlive the session. NULL when out of
 * memory. */
sl_grpc_session *sl_grpc_session_new(int request_timeout_s, const sl_grpc_service *svc,
                                     void *arg, const char *token);

/* Answers a call with a message: out holds SL_GRPC_PREFIX bytes of room,
 * then the message (len counts both); the session takes out. */
void sl_grpc_answer(sl_grpc_call *call, uint8_t *out, size_t len);
/* Answers a call with an error status (sl_grpc_status) and message. */
void sl_grpc_answer_status(sl_grpc_call *call, int status, const char *message);
void sl_grpc_call_set_data(sl_grpc_call *call, void *data);

void sl_grpc_session_free(sl_grpc_session *g);

/* Reads the client's bytes p[0 .. n), answering every call they complete.
 * Returns 0, or -1 when they are not HTTP/2 (the connection must close,
 * after sending what sl_grpc_session_send still gives: a GOAWAY). */
int sl_grpc_session_recv(sl_grpc_session *g, const uint8_t *p, size_t n, int64_t now);

/* The next bytes to send, in *data (valid until the next call on g): their
 * length, 0 when there are none, or -1 on an error (close the connection). */
ssize_t sl_grpc_session_send(sl_grpc_session *g, const uint8_t **data);

/* Answers DEADLINE_EXCEEDED to the requests not whole by their deadline;
 * returns how many (their answers are then for sl_grpc_session_send). */
int sl_grpc_session_tick(sl_grpc_session *g, int64_t now);

/* Queues a GOAWAY: no new streams; the session is done once it is sent and
 * the open streams end. */
void sl_grpc_session_goaway(sl_grpc_session *g);

/* Queues a GOAWAY that refuses the connection, with why as its debug data
 * (what gRPC clients show): close once it is sent. */
void sl_grpc_session_refuse(sl_grpc_session *g, const char *why);

/* Whether a stream is open (a call under way or being answered). */
bool sl_grpc_session_busy(const sl_grpc_session *g);

/* Whether the session wants neither to read nor to send: time to close. */
bool sl_grpc_session_done(sl_grpc_session *g);

#endif
