/*
 * ui.h: sluiced's live page (docs/observability.md, "The live page"):
 *
 *   GET /ui            one self-contained page (src/server/ui/page.html,
 *                      embedded at build time): the numbers as plain HTML
 *                      tables rendered here, which its script then updates
 *                      every second from /v1/stats; charts of the last minute,
 *                      the top keys (/v1/top) and "try a limit"
 *   GET /v1/stats      the numbers as JSON (ui_stats.c), the same as /metrics
 *                      shows at the same moment, and the decisions of each
 *                      of the last 60 seconds
 *   GET /v1/simulate   "try a limit": the simulator (src/sim/) run on the
 *                      libuv threadpool, answered with its SVG plot
 *
 * All three sit behind the HTTP token like every other path; a browser,
 * which cannot send a bearer token, may send it as the password of HTTP
 * Basic on these (and /v1/top): GET only, none of them changes anything.
 */
#ifndef SL_SERVER_UI_H
#define SL_SERVER_UI_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "backend/backend.h"
#include "common/buf.h"
#include "proto/http.h"
#include "server/metrics.h"
#include "server/server.h"

/* The seconds of decisions /v1/stats keeps: a page opened during an
 * incident shows the minute before it. */
#define SL_UI_SECONDS 60

/*
 * Everything the page and /v1/stats show, read at one time on the thread
 * that answers (a worker, holding the config in force for the request):
 * policy names point into that config.
 */
typedef struct sl_ui_snapshot {
    const struct sl_config *cfg;
    sl_metrics_sums m;
    /* Decisions in each of the last seconds, oldest first, per counter slot
     * (as m.decisions) and outcome: per_second[p][o][0 .. seconds[p]). A
     * policy's history starts again when a reload renumbers the policies. */
    uint32_t per_second[SL_METRIC_POLICIES + 1][SL_OUTCOMES][SL_UI_SECONDS];
    int seconds[SL_METRIC_POLICIES + 1];
    sl_store_stats store;
    bool local_store; /* the memory store's numbers (else all 0, as in /metrics) */
    const char *backend;  /* "memory", "redis", ... */
    bool remote;          /* a store with health of its own (bs below) */
    sl_backend_stats bs;
    bool adaptive; /* adaptive limits to show: a policy, or an ad-hoc one used (a below) */
    sl_adaptive_sums a;
    size_t peers, peers_down; /* --peers: the fleet, and how many this node sees down */
    int connections;
    uint64_t connections_total;
    int64_t uptime_ns;
    int64_t unix_ms;
} sl_ui_snapshot;

/* The latency percentiles shown, in permille: p50, p90, p99, p99.9. */
#define SL_UI_QUANTILES 4
extern const unsigned sl_ui_quantile_permille[SL_UI_QUANTILES];

/*
 * The upper bound in microseconds of the latency bucket that holds the
 * permille-th request of proto's histogram (nearest rank: the request at
 * rank ceil(count x permille / 1000)): a percentile never understated.
 * Returns 0 when no request was served, -1 when the bucket is the last one
 * (+Inf: longer than the last finite bound).
 */
int64_t sl_ui_quantile_us(const sl_ui_snapshot *s, int proto, unsigned permille);

/* ui_stats.c: starts the sampler of the decision counters on the main
 * loop (once a second, into the ring /v1/stats reads). */
void sl_ui_stats_start(sl_server *srv, uv_loop_t *loop);

/* ui_stats.c: reads everything into *s (the caller's; about 100 KiB, so
 * best not on a small stack) at the worker's clock. */
void sl_ui_snapshot_take(sl_server *srv, const struct sl_config *cfg, sl_ui_snapshot *s);

/* ui_stats.c: /v1/stats's body, NUL-terminated, malloc'ed by cJSON (the
 * caller frees it with cJSON_free); NULL when out of memory. */
char *sl_ui_stats_json(const sl_ui_snapshot *s);

/* ui.c: whether a request may authenticate with HTTP Basic (the token as
 * its password): GET or HEAD of /ui, /v1/stats, /v1/simulate, /v1/top and
 * /favicon.ico. */
bool sl_ui_basic_allowed(const sl_http_request *r);

/* ui.c: serves the request when its path is /ui, /v1/stats, /v1/simulate
 * or /favicon.ico (the page's icon), and returns true; false for any other
 * path. */
bool sl_ui_route(sl_conn *c, const sl_http_request *r, bool keep, bool head);

#endif
