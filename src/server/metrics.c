/*
 * metrics.c: per-worker counters and their Prometheus text exposition
 * (version 0.0.4: "# HELP", "# TYPE", then one sample per line).
 */
#include "server/dlog.h"
#include "server/envoy_stats.h"
#include "server/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/peers.h"
#include "cmd/adaptive.h"
#include "common/clock.h"
#include "policy/config.h"
#include "server/log.h"
#include "server/persist.h"
#include "server/plans_redis.h"
#include "server/server.h"
#include "server/top.h"

const uint64_t sl_latency_bound_us[SL_LATENCY_BUCKETS] = {
    5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 100000};

void sl_metrics_decided(sl_metrics *m, int policy, bool allowed, bool shadow)
{
    int slot = policy < 0 || policy >= SL_METRIC_POLICIES ? 0 : policy + 1;
    if (policy >= SL_METRIC_POLICIES)
        return; /* beyond the counted policies: not counted per policy */
    int out = shadow ? SL_OUT_SHADOW : allowed ? SL_OUT_ALLOWED : SL_OUT_REJECTED;
    if (slot == 0)
        sl_counter_add(&m->decisions[0][out], 1);
    else /* sl_metrics_reset_policies may zero it meanwhile */
        atomic_fetch_add_explicit(&m->decisions[slot][out], 1, memory_order_relaxed);
}

void sl_metrics_adapted(sl_metrics *m, int policy, int cls, bool admitted)
{
    if (policy >= SL_METRIC_POLICIES || cls < 0 || cls >= SL_METRIC_PRIORITIES)
        return;
    int slot = policy < 0 ? 0 : policy + 1;
    atomic_fetch_add_explicit(&m->adaptive[slot][cls][admitted], 1, memory_order_relaxed);
}

/* When each policy may log its next shadow line (monotonic ns; 0: at once),
 * and how many refusals it let through since its last line. One server runs
 * per process, so the state is the process's. */
static struct {
    atomic_int_fast64_t next_ns;
    atomic_uint_fast64_t since;
} sl_shadow_log[SL_METRIC_POLICIES];

void sl_metrics_shadow_refused(int policy, const char *name)
{
    if (policy < 0 || policy >= SL_METRIC_POLICIES)
        return;
    atomic_fetch_add_explicit(&sl_shadow_log[policy].since, 1, memory_order_relaxed);
    int64_t now = sl_now_mono();
    int64_t next = atomic_load_explicit(&sl_shadow_log[policy].next_ns, memory_order_relaxed);
    if (now < next)
        return;
    /* One worker wins the right to write the line; the others count on. */
    int64_t after = now + (int64_t)SL_SHADOW_LOG_INTERVAL_S * 1000000000;
    if (!atomic_compare_exchange_strong_explicit(&sl_shadow_log[policy].next_ns, &next, after,
                                                 memory_order_relaxed, memory_order_relaxed))
        return;
    uint64_t n = atomic_exchange_explicit(&sl_shadow_log[policy].since, 0, memory_order_relaxed);
    sl_log(SL_LOG_WARN,
           "shadow policy '%s' would have refused %llu request%s (let through: dry run; "
           "at most one such line every %d s)",
           name, (unsigned long long)n, n == 1 ? "" : "s", SL_SHADOW_LOG_INTERVAL_S);
}

void sl_metrics_latency(sl_metrics *m, int proto, int64_t ns, uint64_t count)
{
    uint64_t us = ns > 0 ? (uint64_t)ns / 1000 : 0;
    int b = 0;
    while (b < SL_LATENCY_BUCKETS && us > sl_latency_bound_us[b])
        b++;
    sl_counter_add(&m->latency[proto][b], count);
    sl_counter_add(&m->latency_sum_ns[proto], (uint64_t)(ns > 0 ? ns : 0) * count);
}

static uint64_t sl_load(atomic_uint_fast64_t *a)
{
    return atomic_load_explicit(a, memory_order_relaxed);
}

uint64_t sl_metrics_sum_decisions(sl_server *srv, int outcome)
{
    uint64_t n = 0;
    for (int w = 0; w < srv->nworkers; w++)
        for (int p = 0; p <= SL_METRIC_POLICIES; p++)
            n += sl_load(&srv->workers[w].metrics.decisions[p][outcome]);
    return n;
}

uint64_t sl_metrics_sum_commands(sl_server *srv)
{
    uint64_t n = 0;
    for (int w = 0; w < srv->nworkers; w++)
        n += sl_load(&srv->workers[w].metrics.commands);
    return n;
}

/* Moved on by each sl_metrics_reset_policies. */
static atomic_uint_fast64_t sl_policy_generation;

uint64_t sl_metrics_policy_generation(void)
{
    return atomic_load_explicit(&sl_policy_generation, memory_order_relaxed);
}

void sl_metrics_reset_policies(sl_server *srv)
{
    atomic_fetch_add_explicit(&sl_policy_generation, 1, memory_order_relaxed);
    for (int p = 0; p < SL_METRIC_POLICIES; p++) {
        atomic_store_explicit(&sl_shadow_log[p].next_ns, 0, memory_order_relaxed);
        atomic_store_explicit(&sl_shadow_log[p].since, 0, memory_order_relaxed);
    }
    for (int w = 0; w < srv->nworkers; w++)
        for (int p = 1; p <= SL_METRIC_POLICIES; p++)
            for (int o = 0; o < SL_OUTCOMES; o++)
                atomic_store_explicit(&srv->workers[w].metrics.decisions[p][o], 0,
                                      memory_order_relaxed);
    for (int w = 0; w < srv->nworkers; w++)
        for (int p = 1; p <= SL_METRIC_POLICIES; p++)
            for (int k = 0; k < SL_METRIC_PRIORITIES; k++)
                for (int a = 0; a < 2; a++)
                    atomic_store_explicit(&srv->workers[w].metrics.adaptive[p][k][a], 0,
                                          memory_order_relaxed);
}

void sl_metrics_fallback(sl_metrics *m, int policy, const char *name, int by)
{
    size_t p = policy < 0 || policy >= SL_METRIC_POLICIES ? 0 : (size_t)policy + 1;
    if (by > 0 && by < 4)
        atomic_fetch_add_explicit(&m->fallback[p][by], 1, memory_order_relaxed);
}

void sl_metrics_sum_fallbacks(sl_server *srv, uint64_t out[4])
{
    for (int b = 0; b < 4; b++)
        out[b] = 0;
    for (int w = 0; w < srv->nworkers; w++)
        for (int p = 0; p <= SL_METRIC_POLICIES; p++)
            for (int b = 1; b < 4; b++)
                out[b] += sl_load(&srv->workers[w].metrics.fallback[p][b]);
}

/* How many policies have counters of their own (the config's first
 * SL_METRIC_POLICIES), and the label of counter slot p: "" for 0, the ad-hoc
 * limits, else policy p - 1's name, escaped. */
static size_t sl_policy_slots(const sl_config *cfg)
{
    size_t n = cfg ? cfg->npolicies : 0;
    return n > SL_METRIC_POLICIES ? SL_METRIC_POLICIES : n;
}

size_t sl_metrics_policy_slots(const sl_config *cfg)
{
    return sl_policy_slots(cfg);
}

void sl_metrics_sum(sl_server *srv, const sl_config *cfg, sl_metrics_sums *out)
{
    memset(out, 0, sizeof *out);
    out->policies = sl_policy_slots(cfg);
    for (int w = 0; w < srv->nworkers; w++) {
        sl_metrics *m = &srv->workers[w].metrics;
        for (size_t p = 0; p <= out->policies; p++) {
            for (int o = 0; o < SL_OUTCOMES; o++)
                out->decisions[p][o] += sl_load(&m->decisions[p][o]);
            for (int b = 1; b < 4; b++)
                out->fallback[p][b] += sl_load(&m->fallback[p][b]);
        }
        for (int pr = 0; pr < SL_PROTOS; pr++) {
            for (int b = 0; b <= SL_LATENCY_BUCKETS; b++)
                out->latency[pr][b] += sl_load(&m->latency[pr][b]);
            out->latency_sum_ns[pr] += sl_load(&m->latency_sum_ns[pr]);
        }
        for (int p = 0; p <= SL_METRIC_POLICIES; p++)
            for (int k = 0; k < SL_METRIC_PRIORITIES; k++)
                for (int a = 0; a < 2; a++)
                    out->adaptive[p][a] += sl_load(&m->adaptive[p][k][a]);
        out->commands += sl_load(&m->commands);
        out->store_errors += sl_load(&m->store_errors);
    }
}

static void sl_policy_label(const sl_config *cfg, size_t p, char *label, size_t cap)
{
    label[0] = '\0';
    if (p > 0)
        sl_label(label, cap, cfg->policies[p - 1].name);
}

static void sl_adaptive_sum(void *arg, const void *key, size_t keylen,
                            const sl_limiter_stats *st)
{
    sl_adaptive_sums *s = arg;
    size_t plen = sl_adaptive_key_policy(key, keylen), slot = 0;
    for (size_t p = 0; plen && p < s->slots; p++)
        if (strlen(s->cfg->adaptive[p].name) == plen &&
            memcmp(s->cfg->adaptive[p].name, key, plen) == 0)
            slot = p + 1;
    s->keys[slot]++;
    s->limit[slot] += st->limit;
    s->in_flight[slot] += st->in_flight;
}

void sl_metrics_adaptive_sum(sl_server *srv, const sl_config *cfg, sl_adaptive_sums *s)
{
    memset(s, 0, sizeof *s);
    s->cfg = cfg;
    s->slots = cfg ? (cfg->nadaptive > SL_METRIC_POLICIES ? SL_METRIC_POLICIES : cfg->nadaptive)
                   : 0;
    sl_limiters_each(srv->limiters, sl_now_mono(), sl_adaptive_sum, s);
}

static void sl_metrics_render_adaptive(sl_server *srv, const sl_config *cfg, sl_buf *out)
{
    static const char *const prio[SL_METRIC_PRIORITIES] = {"critical", "default", "sheddable"};
    sl_adaptive_sums *s = calloc(1, sizeof *s);
    if (!s) {
        out->failed = true;
        return;
    }
    sl_metrics_adaptive_sum(srv, cfg, s);
    sl_out(out, "# HELP sluice_adaptive_requests_total Adaptive concurrency decisions, by policy "
                "(\"\" for ad-hoc limits), priority and result.\n"
                "# TYPE sluice_adaptive_requests_total counter\n");
    for (size_t p = 0; p <= s->slots; p++) {
        char label[2 * SL_POLICY_NAME_MAX + 1] = "";
        if (p > 0)
            sl_label(label, sizeof label, cfg->adaptive[p - 1].name);
        for (int k = 0; k < SL_METRIC_PRIORITIES; k++)
            for (int a = 1; a >= 0; a--) {
                uint64_t n = 0;
                for (int w = 0; w < srv->nworkers; w++)
                    n += sl_load(&srv->workers[w].metrics.adaptive[p][k][a]);
                sl_out(out, "sluice_adaptive_requests_total{policy=\"%s\",priority=\"%s\","
                            "result=\"%s\"} %llu\n",
                       label, prio[k], a ? "admitted" : "shed", (unsigned long long)n);
            }
    }
    static const char *const gauge[3][2] = {
        {"sluice_adaptive_keys", "Keys with an adaptive concurrency limit."},
        {"sluice_adaptive_limit", "The adaptive limits' current estimates, summed over keys."},
        {"sluice_adaptive_in_flight", "Leases held under adaptive limits."}};
    for (int g = 0; g < 3; g++) {
        sl_out(out, "# HELP %s %s\n# TYPE %s gauge\n", gauge[g][0], gauge[g][1], gauge[g][0]);
        for (size_t p = 0; p <= s->slots; p++) {
            char label[2 * SL_POLICY_NAME_MAX + 1] = "";
            if (p > 0)
                sl_label(label, sizeof label, cfg->adaptive[p - 1].name);
            long long v = g == 0 ? (long long)s->keys[p] : g == 1 ? s->limit[p] : s->in_flight[p];
            sl_out(out, "%s{policy=\"%s\"} %lld\n", gauge[g][0], label, v);
        }
    }
    sl_limiters_info info;
    sl_limiters_info_get(srv->limiters, &info);
    sl_out(out, "# HELP sluice_adaptive_evictions_total Adaptive limits evicted at "
                "--max-adaptive-keys (idle ones: they start again from the initial limit).\n"
                "# TYPE sluice_adaptive_evictions_total counter\n"
                "sluice_adaptive_evictions_total %llu\n",
           (unsigned long long)info.evicted);
    free(s);
}

/* The store's health (a remote store): its state, its round trips, and the
 * decisions its store-down policies took. */
static void sl_metrics_render_store(sl_server *srv, const sl_config *cfg, sl_buf *out)
{
    static const char *const mode[4] = {"", "fail_open", "fail_closed", "local"};
    static const double rtt_le_ms[SL_RTT_BUCKETS - 1] = {0.1, 0.25, 0.5, 1,  2.5, 5,
                                                          10,  25,   50,  100, 250};
    sl_backend_stats bs = {0};
    srv->backend->ops->stats(srv->backend, &bs);
    sl_out(out, "# HELP sluice_store_up Whether the store answers (0: down or breaker open).\n"
                "# TYPE sluice_store_up gauge\nsluice_store_up{store=\"%s\"} %d\n",
           srv->backend->ops->name, bs.state == SL_STORE_UP);
    sl_out(out, "# HELP sluice_store_breaker_open Whether the circuit breaker is open (the "
                "store is not asked).\n# TYPE sluice_store_breaker_open gauge\n"
                "sluice_store_breaker_open %d\n", bs.state == SL_STORE_BREAKER_OPEN);
    sl_out(out, "# HELP sluice_store_requests_total Requests sent to the store, by outcome.\n"
                "# TYPE sluice_store_requests_total counter\n"
                "sluice_store_requests_total{outcome=\"sent\"} %llu\n"
                "sluice_store_requests_total{outcome=\"error\"} %llu\n"
                "sluice_store_requests_total{outcome=\"timeout\"} %llu\n",
           (unsigned long long)bs.requests, (unsigned long long)bs.errors,
           (unsigned long long)bs.timeouts);
    sl_out(out, "# HELP sluice_store_connects_total Connections made to the store.\n"
                "# TYPE sluice_store_connects_total counter\nsluice_store_connects_total %llu\n"
                "# HELP sluice_store_breaker_opens_total Times the circuit breaker opened.\n"
                "# TYPE sluice_store_breaker_opens_total counter\n"
                "sluice_store_breaker_opens_total %llu\n",
           (unsigned long long)bs.connects, (unsigned long long)bs.breaker_opens);
    sl_out(out, "# HELP sluice_store_rtt_seconds Round trips to the store.\n"
                "# TYPE sluice_store_rtt_seconds histogram\n");
    uint64_t cum = 0;
    for (int b = 0; b < SL_RTT_BUCKETS; b++) {
        cum += bs.rtt[b];
        if (b < SL_RTT_BUCKETS - 1)
            sl_out(out, "sluice_store_rtt_seconds_bucket{le=\"%g\"} %llu\n", rtt_le_ms[b] / 1e3,
                   (unsigned long long)cum);
        else
            sl_out(out, "sluice_store_rtt_seconds_bucket{le=\"+Inf\"} %llu\n",
                   (unsigned long long)cum);
    }
    sl_out(out, "sluice_store_rtt_seconds_sum %.9f\nsluice_store_rtt_seconds_count %llu\n",
           (double)bs.rtt_sum_ns / 1e9, (unsigned long long)cum);
    if (bs.sync) {
        sl_out(out, "# HELP sluice_sync_central_up Whether the last sync with the central store "
                    "was answered (0: takes are decided on this node's last share).\n"
                    "# TYPE sluice_sync_central_up gauge\nsluice_sync_central_up %d\n"
                    "# HELP sluice_sync_keys Keys this node holds a share of.\n"
                    "# TYPE sluice_sync_keys gauge\nsluice_sync_keys %llu\n",
               !bs.sync_central_down, (unsigned long long)bs.sync_keys);
        sl_out(out, "# HELP sluice_syncs_total Syncs with the central store, by outcome.\n"
                    "# TYPE sluice_syncs_total counter\n"
                    "sluice_syncs_total{outcome=\"answered\"} %llu\n"
                    "sluice_syncs_total{outcome=\"failed\"} %llu\n",
               (unsigned long long)bs.syncs, (unsigned long long)bs.sync_failures);
        sl_out(out, "# HELP sluice_sync_waits_total Takes that waited for their key's first "
                    "sync.\n# TYPE sluice_sync_waits_total counter\nsluice_sync_waits_total %llu\n"
                    "# HELP sluice_sync_unleased_takes_total Takes decided without a live lease "
                    "(the central out of reach): on the last share.\n"
                    "# TYPE sluice_sync_unleased_takes_total counter\n"
                    "sluice_sync_unleased_takes_total %llu\n",
               (unsigned long long)bs.sync_waits, (unsigned long long)bs.sync_unleased);
    }
    sl_out(out, "# HELP sluice_store_fallback_decisions_total Decisions taken by a store-down "
                "policy, by policy and mode.\n"
                "# TYPE sluice_store_fallback_decisions_total counter\n");
    for (size_t p = 0; p <= sl_policy_slots(cfg); p++) {
        char label[2 * SL_POLICY_NAME_MAX + 1];
        sl_policy_label(cfg, p, label, sizeof label);
        for (int b = 1; b < 4; b++) {
            uint64_t n = 0;
            for (int w = 0; w < srv->nworkers; w++)
                n += sl_load(&srv->workers[w].metrics.fallback[p][b]);
            sl_out(out, "sluice_store_fallback_decisions_total{policy=\"%s\",mode=\"%s\"} %llu\n",
                   label, mode[b], (unsigned long long)n);
        }
    }
}

void sl_out(sl_buf *out, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0)
        sl_buf_add(out, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

void sl_label(char *dst, size_t cap, const char *name)
{
    size_t j = 0;
    for (size_t i = 0; name[i] && j + 2 < cap; i++) {
        char ch = name[i];
        if (ch == '\\' || ch == '"' || ch == '\n') {
            dst[j++] = '\\';
            ch = ch == '\n' ? 'n' : ch;
        }
        dst[j++] = ch;
    }
    dst[j] = '\0';
}

/* A routing fleet's peers: which this node sees up, and the SL.DECIDEs
 * that came for keys it does not own (the nodes' lists disagree). */
static void sl_metrics_render_peers(sl_peers *first, sl_buf *out)
{
    const sl_peers *p = sl_peers_latest(first);
    sl_out(out, "# HELP sluice_peer_up Whether this node routes to the peer (0: marked down, "
                "its keys at their next owner).\n# TYPE sluice_peer_up gauge\n");
    for (size_t i = 0; i < p->n; i++)
        sl_out(out, "sluice_peer_up{peer=\"%s\"} %d\n", p->names[i],
               atomic_load_explicit(&p->down[i], memory_order_relaxed) == 0);
    sl_out(out, "# HELP sluice_peer_disagreements_total SL.DECIDEs from peers for keys this node "
                "does not own: the nodes' --peers lists disagree.\n"
                "# TYPE sluice_peer_disagreements_total counter\n"
                "sluice_peer_disagreements_total %llu\n",
           (unsigned long long)atomic_load_explicit(&first->disagreements, memory_order_relaxed));
}

void sl_metrics_render(sl_server *srv, sl_buf *out)
{
    static const char *const outcome[SL_OUTCOMES] = {"allowed", "rejected", "shadow_rejected"};
    static const char *const proto[SL_PROTOS] = {"resp", "http", "grpc"};
    const sl_config *cfg = atomic_load(&srv->config);

    sl_out(out, "# HELP sluice_decisions_total Rate limit decisions, by policy and outcome "
                "(policy=\"\" for ad-hoc limits; shadow_rejected: let through by a shadow "
                "policy that would have refused).\n# TYPE sluice_decisions_total counter\n");
    for (size_t p = 0; p <= sl_policy_slots(cfg); p++) {
        char label[2 * SL_POLICY_NAME_MAX + 1];
        sl_policy_label(cfg, p, label, sizeof label);
        for (int o = 0; o < SL_OUTCOMES; o++) {
            uint64_t n = 0;
            for (int w = 0; w < srv->nworkers; w++)
                n += sl_load(&srv->workers[w].metrics.decisions[p][o]);
            sl_out(out, "sluice_decisions_total{policy=\"%s\",outcome=\"%s\"} %llu\n", label,
                   outcome[o], (unsigned long long)n);
        }
    }

    sl_out(out, "# HELP sluice_request_duration_seconds Time to serve a request (RESP: a "
                "pipelined batch's time shared by its commands).\n"
                "# TYPE sluice_request_duration_seconds histogram\n");
    for (int pr = 0; pr < SL_PROTOS; pr++) {
        uint64_t cum = 0, sum_ns = 0;
        for (int w = 0; w < srv->nworkers; w++)
            sum_ns += sl_load(&srv->workers[w].metrics.latency_sum_ns[pr]);
        for (int b = 0; b <= SL_LATENCY_BUCKETS; b++) {
            for (int w = 0; w < srv->nworkers; w++)
                cum += sl_load(&srv->workers[w].metrics.latency[pr][b]);
            if (b < SL_LATENCY_BUCKETS)
                sl_out(out, "sluice_request_duration_seconds_bucket{proto=\"%s\",le=\"%g\"} %llu\n",
                       proto[pr], (double)sl_latency_bound_us[b] / 1e6, (unsigned long long)cum);
            else
                sl_out(out, "sluice_request_duration_seconds_bucket{proto=\"%s\",le=\"+Inf\"} %llu\n",
                       proto[pr], (unsigned long long)cum);
        }
        sl_out(out, "sluice_request_duration_seconds_sum{proto=\"%s\"} %.9f\n", proto[pr],
               (double)sum_ns / 1e9);
        sl_out(out, "sluice_request_duration_seconds_count{proto=\"%s\"} %llu\n", proto[pr],
               (unsigned long long)cum);
    }

    if (srv->limiters)
        sl_metrics_render_adaptive(srv, cfg, out);

    sl_store_stats st = {0};
    if (srv->store)
        sl_store_get_stats(srv->store, &st);
    if (srv->backend && srv->backend->ops->stats)
        sl_metrics_render_store(srv, cfg, out);
    if (srv->peers)
        sl_metrics_render_peers(srv->peers, out);
    sl_plans_redis_metrics(out);
    if (srv->cfg.top_keys > 0)
        sl_top_metrics(srv, out);
    uint64_t store_errors = 0;
    for (int w = 0; w < srv->nworkers; w++)
        store_errors += sl_load(&srv->workers[w].metrics.store_errors);
    sl_out(out, "# HELP sluice_keys Keys held by the store.\n# TYPE sluice_keys gauge\n"
                "sluice_keys %llu\n", (unsigned long long)st.keys);
    sl_out(out, "# HELP sluice_store_bytes Bytes the store has allocated, all overhead "
                "included.\n# TYPE sluice_store_bytes gauge\nsluice_store_bytes %llu\n",
           (unsigned long long)st.bytes_used);
    sl_out(out, "# HELP sluice_store_max_bytes The store's memory cap (0: none).\n"
                "# TYPE sluice_store_max_bytes gauge\nsluice_store_max_bytes %llu\n",
           (unsigned long long)st.max_memory);
    sl_out(out, "# HELP sluice_evictions_total States evicted at the memory cap.\n"
                "# TYPE sluice_evictions_total counter\nsluice_evictions_total %llu\n",
           (unsigned long long)st.evictions);
    sl_out(out, "# HELP sluice_reclaimed_total States dropped once back to never seen.\n"
                "# TYPE sluice_reclaimed_total counter\nsluice_reclaimed_total %llu\n",
           (unsigned long long)st.reclaimed);
    sl_out(out, "# HELP sluice_store_errors_total Takes the store could not serve (out of "
                "memory).\n# TYPE sluice_store_errors_total counter\n"
                "sluice_store_errors_total %llu\n", (unsigned long long)store_errors);
    sl_out(out, "# HELP sluice_connections Open client connections.\n"
                "# TYPE sluice_connections gauge\nsluice_connections %d\n",
           atomic_load(&srv->clients));
    sl_out(out, "# HELP sluice_connections_total Connections accepted.\n"
                "# TYPE sluice_connections_total counter\nsluice_connections_total %llu\n",
           (unsigned long long)atomic_load(&srv->connections_received));
    sl_snapshot_status snap;
    sl_snapshot_last(&snap);
    sl_out(out, "# HELP sluice_snapshot_last_attempt_timestamp_seconds When the last snapshot "
                "write began, periodic, SAVE or shutdown (0: none yet).\n"
                "# TYPE sluice_snapshot_last_attempt_timestamp_seconds gauge\n"
                "sluice_snapshot_last_attempt_timestamp_seconds %.3f\n",
           (double)snap.attempt_wall_ns / 1e9);
    sl_out(out, "# HELP sluice_snapshot_last_success_timestamp_seconds When the last snapshot "
                "write that succeeded began (0: none yet).\n"
                "# TYPE sluice_snapshot_last_success_timestamp_seconds gauge\n"
                "sluice_snapshot_last_success_timestamp_seconds %.3f\n",
           (double)snap.success_wall_ns / 1e9);
    sl_out(out, "# HELP sluice_snapshot_last_duration_seconds How long the last snapshot write "
                "took, success or not.\n# TYPE sluice_snapshot_last_duration_seconds gauge\n"
                "sluice_snapshot_last_duration_seconds %.6f\n",
           (double)snap.duration_ns / 1e9);
    sl_out(out, "# HELP sluice_snapshot_last_ok Whether the last snapshot write succeeded (1 "
                "before any).\n# TYPE sluice_snapshot_last_ok gauge\nsluice_snapshot_last_ok %d\n",
           snap.ok ? 1 : 0);
    sl_out(out, "# HELP sluice_commands_total Commands and requests served.\n"
                "# TYPE sluice_commands_total counter\nsluice_commands_total %llu\n",
           (unsigned long long)sl_metrics_sum_commands(srv));
    sl_dlog_metrics(srv->dlog, out);
    sl_envoy_stats_render(srv, out);
}
