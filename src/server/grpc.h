/*
 * grpc.h: the gRPC face of sluiced (--grpc-port; src/server/grpc.c): h2c
 * on --bind's address, served by the workers as the other faces are.
 */
#ifndef SL_SERVER_GRPC_H
#define SL_SERVER_GRPC_H

#include <uv.h>

#include "cmd/rls.h"

struct sl_worker;

/* What ShouldRateLimit's faces (gRPC, HTTP's POST /json) answer without an
 * Envoy configuration. */
#define SL_RLS_NO_CONFIG                                                                       \
    "no Envoy rate limit configuration: sluiced serves ShouldRateLimit with --envoy-config DIR"

/* The worker's context for a call (cmd/rls.h), with the Envoy configuration
 * in force, which the worker must not keep past its callback (the epoch,
 * server.h); false when there is none. */
bool sl_rls_ctx_of(struct sl_worker *w, sl_rls_ctx *ctx);

/* The worker's gRPC timer, before its loop runs (when --grpc-port is on). */
void sl_grpc_worker_init(struct sl_worker *w);

/* The gRPC listener's connection callback (listener->data: the worker). */
void sl_grpc_on_connection(uv_stream_t *listener, int status);

/* Shutdown: says GOAWAY to every connection of the worker; each closes once
 * its open calls are answered. */
void sl_grpc_worker_stop(struct sl_worker *w);

/* The end of a shutdown: closes the worker's connections left, and its
 * timer. */
void sl_grpc_worker_close(struct sl_worker *w);

#endif
