/*
 * top.h: sluiced's top keys (docs/observability.md): per worker, per policy
 * (and for the ad-hoc limits), the keys refused and admitted most often over
 * a recent window, in libsluice's Space-Saving summaries (sl_topk_*), read
 * by SL.TOP and GET /v1/top.
 *
 * Each worker records into its own summaries under its own lock, which no
 * other thread takes but a reader of the top keys, for as long as it merges
 * that worker's summary of one policy: the hot path shares no cache line
 * with another worker's, and its lock is an uncontended exchange.
 */
#ifndef SL_SERVER_TOP_H
#define SL_SERVER_TOP_H

#include <stdbool.h>
#include <stdint.h>

#include "cmd/cmd.h"
#include "common/buf.h"
#include "proto/http.h"
#include "server/metrics.h"

/* The policies whose top keys are kept: the config's first 64, as /metrics
 * counts them, and the ad-hoc limits. */
#define SL_TOP_POLICIES SL_METRIC_POLICIES

#define SL_TOP_KEYS_MAX 1024    /* the largest --top-keys */
#define SL_TOP_COUNT_DEFAULT 10 /* rows SL.TOP and /v1/top give unless told */

typedef struct sl_top sl_top;
struct sl_server;
struct sl_conn;

/* A worker's top keys: k counters per policy, kind and generation of
 * window_ns, hashed under seed (the same for every worker: their summaries
 * are merged). NULL when out of memory. Freed with sl_top_free. */
sl_top *sl_top_new(size_t k, int64_t window_ns, uint64_t seed);
void sl_top_free(sl_top *t);

/* Counts one decision of k (its policy and key) at now, refused (a shadow
 * policy's would-be refusal too) or admitted. On the worker's thread. */
void sl_top_record(sl_top *t, const sl_check *k, bool refused, int64_t now);

/* SL.TOP [POLICY name] [COUNT n] [REFUSED|ADMITTED] (commands.c's table). */
void sl_cmd_top(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv);

/* GET /v1/top?policy=NAME&count=N&kind=refused|admitted: writes the
 * response into the connection's output. */
void sl_http_top(struct sl_conn *conn, const sl_http_request *r, bool keep, bool head);

/* The /metrics lines of the top keys: the bytes their summaries hold. */
void sl_top_metrics(struct sl_server *srv, sl_buf *out);

#endif
