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

/* A new session (the caller frees it with sl_grpc_session_free), with its
 * SETTINGS queued to send; request_timeout_s bounds a request that never
 * ends (0: no bound but its own grpc-timeout). NULL when out of memory. */
sl_grpc_session *sl_grpc_session_new(int request_timeout_s);

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

/* Whether the session wants neither to read nor to send: time to close. */
bool sl_grpc_session_done(sl_grpc_session *g);

#endif
