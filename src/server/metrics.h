/*
 * metrics.h: sluiced's counters, kept per worker thread (no cache line is
 * shared on the hot path) and summed when INFO or GET /metrics asks.
 */
#ifndef SL_SERVER_METRICS_H
#define SL_SERVER_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/buf.h"

/* Decisions are counted per policy for the config's first 64 policies;
 * slot 0 holds the ad-hoc limits (CL.THROTTLE, SL.TAKE, /v1/check with a
 * limit). Counters of a policy start again from 0 when the config is
 * reloaded (Prometheus reads that as a counter reset). */
#define SL_METRIC_POLICIES 64

enum { SL_OUT_ALLOWED, SL_OUT_REJECTED, SL_OUT_SHADOW, SL_OUTCOMES };
enum { SL_PROTO_RESP, SL_PROTO_HTTP, SL_PROTO_GRPC, SL_PROTOS };

#define SL_METRIC_PRIORITIES 3

/* Upper bounds of the latency buckets, in microseconds; the last bucket is +Inf. */
#define SL_LATENCY_BUCKETS 12

typedef struct sl_metrics {
    atomic_uint_fast64_t commands;
    atomic_uint_fast64_t decisions[SL_METRIC_POLICIES + 1][SL_OUTCOMES];
    atomic_uint_fast64_t store_errors;
    /* Decisions a store-down policy took (by sl_fallback: 1 fail_open, 2
     * fail_closed, 3 local), per policy as decisions are. */
    atomic_uint_fast64_t fallback[SL_METRIC_POLICIES + 1][4];
    atomic_uint_fast64_t latency[SL_PROTOS][SL_LATENCY_BUCKETS + 1];
    atomic_uint_fast64_t latency_sum_ns[SL_PROTOS];
    /* Adaptive concurrency decisions, per adaptive policy as decisions
     * are (slot 0 ad hoc), by priority (critical, default, sheddable) and
     * whether admitted (1) or shed (0). */
    atomic_uint_fast64_t adaptive[SL_METRIC_POLICIES + 1][SL_METRIC_PRIORITIES][2];
} sl_metrics;

/* Adds n to a counter that only its worker writes (all but the per-policy
 * decisions, which a reload zeroes from the main thread): a relaxed load
 * and store, which readers on other threads see whole, without the cost of
 * a locked add on every command. */
static inline void sl_counter_add(atomic_uint_fast64_t *a, uint64_t n)
{
    atomic_store_explicit(a, atomic_load_explicit(a, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

/* policy: -1 for an ad-hoc limit, else the config's index. */
void sl_metrics_decided(sl_metrics *m, int policy, bool allowed, bool shadow);

/* An adaptive concurrency decision: policy is the config's adaptive
 * policy's index, -1 ad hoc; cls its priority. */
void sl_metrics_adapted(sl_metrics *m, int policy, int cls, bool admitted);

/* A decision a store-down policy took (by: an sl_fallback); name is the
 * policy's, NULL for an ad-hoc limit. */
void sl_metrics_fallback(sl_metrics *m, int policy, const char *name, int by);

/*
 * A shadow policy let through a request it would have refused: logs it,
 * rate-limited to one line per policy every SL_SHADOW_LOG_INTERVAL_S
 * seconds (a dry run that refuses thousands of requests a second must not
 * flood the log); the line says how many such requests the policy saw since
 * its previous line. policy is the config's index, name its name. Safe from
 * any worker.
 */
#define SL_SHADOW_LOG_INTERVAL_S 10
void sl_metrics_shadow_refused(int policy, const char *name);

/* One request served in `ns` nanoseconds (for RESP: a batch's time shared
 * evenly by its commands, observed `count` times). */
void sl_metrics_latency(sl_metrics *m, int proto, int64_t ns, uint64_t count);

struct sl_server;

/* Sums every worker's counters of a kind. */
uint64_t sl_metrics_sum_decisions(struct sl_server *srv, int outcome);
uint64_t sl_metrics_sum_commands(struct sl_server *srv);
/* Every worker's store-down decisions by sl_fallback, all policies. */
void sl_metrics_sum_fallbacks(struct sl_server *srv, uint64_t out[4]);

/* Zeroes the per-policy counters (after a reload: new indexes), and moves
 * the generation below on. */
void sl_metrics_reset_policies(struct sl_server *srv);

/* How many times the per-policy counters were zeroed: a reader that keeps
 * readings (the live page's last minute, ui_stats.c) compares them only
 * within one generation. */
uint64_t sl_metrics_policy_generation(void);

/* The upper bounds of the latency buckets, in microseconds (the last
 * bucket, SL_LATENCY_BUCKETS, is +Inf). */
extern const uint64_t sl_latency_bound_us[SL_LATENCY_BUCKETS];

struct sl_config;

/* How many policies have counters of their own in cfg (its first
 * SL_METRIC_POLICIES; slot 0 is the ad-hoc limits', slot p policy p - 1's). */
size_t sl_metrics_policy_slots(const struct sl_config *cfg);

/* Every worker's counters, summed at one time, as /metrics shows them: for
 * GET /v1/stats (ui_stats.c). */
typedef struct sl_metrics_sums {
    size_t policies; /* sl_metrics_policy_slots of the config summed for */
    uint64_t decisions[SL_METRIC_POLICIES + 1][SL_OUTCOMES];
    uint64_t fallback[SL_METRIC_POLICIES + 1][4]; /* by sl_fallback: 1 .. 3 */
    uint64_t latency[SL_PROTOS][SL_LATENCY_BUCKETS + 1];
    uint64_t latency_sum_ns[SL_PROTOS];
    /* Adaptive decisions per adaptive policy slot, all priorities: shed
     * (0) and admitted (1). */
    uint64_t adaptive[SL_METRIC_POLICIES + 1][2];
    uint64_t commands, store_errors;
} sl_metrics_sums;
void sl_metrics_sum(struct sl_server *srv, const struct sl_config *cfg, sl_metrics_sums *out);

/* The adaptive limits' gauges, summed per adaptive policy slot (0: ad hoc,
 * and the keys of a policy no longer in the config), and their decisions. */
typedef struct sl_adaptive_sums {
    const struct sl_config *cfg;
    size_t slots;
    uint64_t keys[SL_METRIC_POLICIES + 1];
    int64_t limit[SL_METRIC_POLICIES + 1], in_flight[SL_METRIC_POLICIES + 1];
} sl_adaptive_sums;
/* Fills *s (srv->limiters must not be NULL). */
void sl_metrics_adaptive_sum(struct sl_server *srv, const struct sl_config *cfg,
                             sl_adaptive_sums *s);

/* Writes the Prometheus text exposition of every metric into out. */
void sl_metrics_render(struct sl_server *srv, sl_buf *out);

/* What the /metrics writers share: printf output (a line of a few hundred
 * bytes) appended to out, and a name as a Prometheus label value (\, " and
 * newline escaped) into dst (cap bytes). */
void sl_out(sl_buf *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sl_label(char *dst, size_t cap, const char *name);

#endif
