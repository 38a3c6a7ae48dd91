/*
 * envoy_stats.h: ShouldRateLimit's counts per stats key, as envoyproxy/
 * ratelimit keeps them (total_hits, over_limit, near_limit, within_limit,
 * shadow_mode, in hits), for /metrics (src/server/envoy_stats.c).
 *
 * Each worker counts into a table of its own, under a lock of its own that
 * only a scrape contends for. A table holds at most SL_ENVOY_STATS_KEYS
 * keys (detailed_metric puts the request's values in them, so a client
 * could otherwise grow it without bound): the hits of a key past that are
 * counted under the key "_other".
 */
#ifndef SL_SERVER_ENVOY_STATS_H
#define SL_SERVER_ENVOY_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define SL_ENVOY_STATS_KEYS 4096

typedef struct sl_envoy_stats sl_envoy_stats;
struct sl_server;

sl_envoy_stats *sl_envoy_stats_new(void); /* NULL when out of memory */
void sl_envoy_stats_free(sl_envoy_stats *t);

/* cmd/rls.h's decided(): arg is the worker's table. */
void sl_envoy_stats_count(void *arg, const char *key, size_t len, int64_t hits, bool over,
                          bool near, bool shadow);

/* The counters of every worker, summed by key, in key order. */
void sl_envoy_stats_render(struct sl_server *srv, sl_buf *out);

#endif
