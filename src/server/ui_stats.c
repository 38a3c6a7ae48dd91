/*
 * ui_stats.c: the numbers of the live page (ui.h): read at one time from
 * the same counters /metrics reads, and the decisions of each of the last
 * SL_UI_SECONDS seconds, which a sampler on the main loop keeps.
 *
 * The sampler reads every worker's decision counters once a second into a
 * ring of SL_UI_SECONDS + 1 readings: two readings a second apart give that
 * second's decisions. It costs the main thread a sum of a few thousand
 * counters a second and the ring about 100 KiB, and nothing on a worker's
 * hot path. One server runs per process, so the ring is the process's.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "backend/peers.h"
#include "common/clock.h"
#include "policy/config.h"
#include "server/ui.h"

const unsigned sl_ui_quantile_permille[SL_UI_QUANTILES] = {500, 900, 990, 999};

/* The readings: each the decision counters summed over the workers, with
 * the generation of the per-policy counters they were read in. */
typedef struct sl_ui_reading {
    uint64_t n[SL_METRIC_POLICIES + 1][SL_OUTCOMES];
    uint64_t generation;
} sl_ui_reading;

static struct {
    pthread_mutex_t lock;
    sl_ui_reading r[SL_UI_SECONDS + 1];
    size_t next;  /* where the next reading goes */
    size_t count; /* readings held, up to SL_UI_SECONDS + 1 */
} sl_ui_ring = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uv_timer_t sl_ui_timer;

/* Once a second, on the main loop: a reading into the ring. */
static void sl_ui_sample(uv_timer_t *t)
{
    sl_server *srv = t->data;
    /* Read outside the lock: the sum takes longer than the copy. */
    static sl_ui_reading now;
    now.generation = sl_metrics_policy_generation();
    memset(now.n, 0, sizeof now.n);
    for (int w = 0; w < srv->nworkers; w++)
        for (int p = 0; p <= SL_METRIC_POLICIES; p++)
            for (int o = 0; o < SL_OUTCOMES; o++)
                now.n[p][o] += atomic_load_explicit(&srv->workers[w].metrics.decisions[p][o],
                                                    memory_order_relaxed);
    pthread_mutex_lock(&sl_ui_ring.lock);
    sl_ui_ring.r[sl_ui_ring.next] = now;
    sl_ui_ring.next = (sl_ui_ring.next + 1) % (SL_UI_SECONDS + 1);
    if (sl_ui_ring.count < SL_UI_SECONDS + 1)
        sl_ui_ring.count++;
    pthread_mutex_unlock(&sl_ui_ring.lock);
}

void sl_ui_stats_start(sl_server *srv, uv_loop_t *loop)
{
    uv_timer_init(loop, &sl_ui_timer);
    sl_ui_timer.data = srv;
    sl_ui_sample(&sl_ui_timer); /* the first reading at start: the first second counts */
    uv_timer_start(&sl_ui_timer, sl_ui_sample, 1000, 1000);
}

/* The ring's seconds into s: for slot 0 (ad hoc, never zeroed) every pair
 * of readings; for a policy's slot only the pairs read in the generation of
 * the newest reading (a reload renumbers the policies). */
static void sl_ui_per_second(sl_ui_snapshot *s)
{
    pthread_mutex_lock(&sl_ui_ring.lock);
    size_t count = sl_ui_ring.count;
    size_t first = (sl_ui_ring.next + SL_UI_SECONDS + 1 - count) % (SL_UI_SECONDS + 1);
    uint64_t gen = count ? sl_ui_ring.r[(sl_ui_ring.next + SL_UI_SECONDS) % (SL_UI_SECONDS + 1)]
                               .generation
                         : 0;
    for (size_t p = 0; p <= SL_METRIC_POLICIES; p++)
        s->seconds[p] = 0;
    for (size_t i = 1; i < count; i++) {
        const sl_ui_reading *a = &sl_ui_ring.r[(first + i - 1) % (SL_UI_SECONDS + 1)];
        const sl_ui_reading *b = &sl_ui_ring.r[(first + i) % (SL_UI_SECONDS + 1)];
        for (size_t p = 0; p <= SL_METRIC_POLICIES; p++) {
            if (p > 0 && (a->generation != gen || b->generation != gen))
                continue;
            int k = s->seconds[p]++;
            for (int o = 0; o < SL_OUTCOMES; o++) {
                /* A counter that went down was zeroed between the readings
                 * (a reload racing the sampler): that second is unknown, 0. */
                uint64_t d = b->n[p][o] >= a->n[p][o] ? b->n[p][o] - a->n[p][o] : 0;
                s->per_second[p][o][k] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
            }
        }
    }
    pthread_mutex_unlock(&sl_ui_ring.lock);
}

void sl_ui_snapshot_take(sl_server *srv, const sl_config *cfg, sl_ui_snapshot *s)
{
    memset(s, 0, sizeof *s);
    s->cfg = cfg;
    s->unix_ms = sl_now_wall() / 1000000;
    s->uptime_ns = sl_now_mono() - srv->started_mono;
    sl_metrics_sum(srv, cfg, &s->m);
    sl_ui_per_second(s);
    if (srv->store) {
        sl_store_get_stats(srv->store, &s->store);
        s->local_store = true;
    }
    s->backend = srv->backend->ops->name;
    if (srv->backend->ops->stats) {
        srv->backend->ops->stats(srv->backend, &s->bs);
        s->remote = true;
    }
    if (srv->limiters) {
        /* Shown once there is an adaptive policy, or an ad-hoc limit used. */
        sl_metrics_adaptive_sum(srv, cfg, &s->a);
        s->adaptive = s->a.slots > 0 || s->a.keys[0] > 0 ||
                      s->m.adaptive[0][0] + s->m.adaptive[0][1] > 0;
    }
    if (srv->peers) {
        const sl_peers *p = sl_peers_latest(srv->peers);
        s->peers = p->n;
        s->peers_down = sl_peers_down_count(p);
    }
    s->connections = atomic_load(&srv->clients);
    s->connections_total = atomic_load(&srv->connections_received);
}

int64_t sl_ui_quantile_us(const sl_ui_snapshot *s, int proto, unsigned permille)
{
    uint64_t count = 0;
    for (int b = 0; b <= SL_LATENCY_BUCKETS; b++)
        count += s->m.latency[proto][b];
    if (count == 0)
        return 0;
    /* ceil(count x permille / 1000), at least 1: in 128 bits, no overflow. */
    uint64_t rank = (uint64_t)(((unsigned __int128)count * permille + 999) / 1000);
    if (rank < 1)
        rank = 1;
    uint64_t cum = 0;
    for (int b = 0; b < SL_LATENCY_BUCKETS; b++) {
        cum += s->m.latency[proto][b];
        if (cum >= rank)
            return (int64_t)sl_latency_bound_us[b];
    }
    return -1;
}

/* A policy's name for counter slot p, NULL for slot 0 (ad hoc). */
static const char *sl_ui_policy_name(const sl_ui_snapshot *s, size_t p)
{
    return p == 0 ? NULL : s->cfg->policies[p - 1].name;
}

static void sl_ui_json_name(cJSON *o, const char *key, const char *name)
{
    if (name)
        cJSON_AddStringToObject(o, key, name);
    else
        cJSON_AddNullToObject(o, key);
}

static cJSON *sl_ui_json_series(const uint32_t *v, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    return a;
}

static const char *const sl_ui_outcome[SL_OUTCOMES] = {"allowed", "refused", "shadow_refused"};
static const char *const sl_ui_mode[4] = {"", "fail_open", "fail_closed", "local"};
static const char *const sl_ui_proto[SL_PROTOS] = {"resp", "http", "grpc"};

/* "decisions": one object per counter slot, as /metrics's
 * sluice_decisions_total and sluice_store_fallback_decisions_total. */
static void sl_ui_json_decisions(cJSON *root, const sl_ui_snapshot *s)
{
    cJSON *list = cJSON_AddArrayToObject(root, "decisions");
    for (size_t p = 0; list && p <= s->m.policies; p++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(list, o);
        sl_ui_json_name(o, "policy", sl_ui_policy_name(s, p));
        if (p > 0)
            cJSON_AddBoolToObject(o, "shadow", s->cfg->policies[p - 1].shadow);
        for (int k = 0; k < SL_OUTCOMES; k++)
            cJSON_AddNumberToObject(o, sl_ui_outcome[k], (double)s->m.decisions[p][k]);
        cJSON *f = cJSON_AddObjectToObject(o, "fallback");
        for (int b = 1; f && b < 4; b++)
            cJSON_AddNumberToObject(f, sl_ui_mode[b], (double)s->m.fallback[p][b]);
        cJSON *ps = cJSON_AddObjectToObject(o, "per_second");
        for (int k = 0; ps && k < SL_OUTCOMES; k++)
            cJSON_AddItemToObject(ps, sl_ui_outcome[k],
                                  sl_ui_json_series(s->per_second[p][k], s->seconds[p]));
    }
}

static void sl_ui_json_latency(cJSON *root, const sl_ui_snapshot *s)
{
    static const char *const qname[SL_UI_QUANTILES] = {"p50_us", "p90_us", "p99_us", "p999_us"};
    cJSON *list = cJSON_AddArrayToObject(root, "latency");
    for (int pr = 0; list && pr < SL_PROTOS; pr++) {
        uint64_t count = 0;
        for (int b = 0; b <= SL_LATENCY_BUCKETS; b++)
            count += s->m.latency[pr][b];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(list, o);
        cJSON_AddStringToObject(o, "proto", sl_ui_proto[pr]);
        cJSON_AddNumberToObject(o, "count", (double)count);
        cJSON_AddNumberToObject(o, "sum_s", (double)s->m.latency_sum_ns[pr] / 1e9);
        for (int q = 0; q < SL_UI_QUANTILES; q++) {
            int64_t us = sl_ui_quantile_us(s, pr, sl_ui_quantile_permille[q]);
            if (us > 0)
                cJSON_AddNumberToObject(o, qname[q], (double)us);
            else
                cJSON_AddNullToObject(o, qname[q]);
        }
    }
    cJSON *b = cJSON_AddArrayToObject(root, "latency_buckets_us");
    for (int i = 0; b && i < SL_LATENCY_BUCKETS; i++)
        cJSON_AddItemToArray(b, cJSON_CreateNumber((double)sl_latency_bound_us[i]));
}

static void sl_ui_json_backend(cJSON *root, const sl_ui_snapshot *s)
{
    cJSON *o = cJSON_AddObjectToObject(root, "backend");
    if (!o)
        return;
    cJSON_AddStringToObject(o, "store", s->backend);
    cJSON_AddBoolToObject(o, "remote", s->remote);
    const char *state = !s->remote ? "up"
                        : s->bs.state == SL_STORE_UP ? "up"
                        : s->bs.state == SL_STORE_BREAKER_OPEN ? "breaker_open"
                                                               : "down";
    cJSON_AddStringToObject(o, "state", state);
    cJSON_AddBoolToObject(o, "up", !s->remote || s->bs.state == SL_STORE_UP);
    cJSON_AddBoolToObject(o, "breaker_open", s->remote && s->bs.state == SL_STORE_BREAKER_OPEN);
    if (s->remote) {
        cJSON_AddNumberToObject(o, "requests", (double)s->bs.requests);
        cJSON_AddNumberToObject(o, "errors", (double)s->bs.errors);
        cJSON_AddNumberToObject(o, "timeouts", (double)s->bs.timeouts);
        cJSON_AddNumberToObject(o, "breaker_opens", (double)s->bs.breaker_opens);
        if (s->bs.sync) {
            cJSON_AddBoolToObject(o, "sync_central_up", !s->bs.sync_central_down);
            cJSON_AddNumberToObject(o, "sync_keys", (double)s->bs.sync_keys);
        }
    }
    cJSON *f = cJSON_AddObjectToObject(o, "fallback");
    for (int b = 1; f && b < 4; b++) {
        uint64_t n = 0;
        for (size_t p = 0; p <= s->m.policies; p++)
            n += s->m.fallback[p][b];
        cJSON_AddNumberToObject(f, sl_ui_mode[b], (double)n);
    }
    if (s->peers) {
        cJSON_AddNumberToObject(o, "peers", (double)s->peers);
        cJSON_AddNumberToObject(o, "peers_down", (double)s->peers_down);
    }
}

static void sl_ui_json_adaptive(cJSON *root, const sl_ui_snapshot *s)
{
    if (!s->adaptive)
        return;
    cJSON *list = cJSON_AddArrayToObject(root, "adaptive");
    for (size_t p = 0; list && p <= s->a.slots; p++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(list, o);
        sl_ui_json_name(o, "policy", p == 0 ? NULL : s->cfg->adaptive[p - 1].name);
        cJSON_AddNumberToObject(o, "keys", (double)s->a.keys[p]);
        cJSON_AddNumberToObject(o, "limit", (double)s->a.limit[p]);
        cJSON_AddNumberToObject(o, "in_flight", (double)s->a.in_flight[p]);
        cJSON_AddNumberToObject(o, "admitted", (double)s->m.adaptive[p][1]);
        cJSON_AddNumberToObject(o, "shed", (double)s->m.adaptive[p][0]);
    }
}

char *sl_ui_stats_json(const sl_ui_snapshot *s)
{
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return NULL;
    cJSON_AddStringToObject(root, "version", SLUICE_VERSION);
    cJSON_AddNumberToObject(root, "unix_ms", (double)s->unix_ms);
    cJSON_AddNumberToObject(root, "uptime_s", (double)(s->uptime_ns / 1000000000));
    cJSON_AddNumberToObject(root, "interval_ms", 1000);
    sl_ui_json_decisions(root, s);
    cJSON *st = cJSON_AddObjectToObject(root, "store");
    if (st) {
        cJSON_AddBoolToObject(st, "local", s->local_store);
        cJSON_AddNumberToObject(st, "keys", (double)s->store.keys);
        cJSON_AddNumberToObject(st, "bytes", (double)s->store.bytes_used);
        cJSON_AddNumberToObject(st, "max_bytes", (double)s->store.max_memory);
        cJSON_AddNumberToObject(st, "evictions", (double)s->store.evictions);
        cJSON_AddNumberToObject(st, "reclaimed", (double)s->store.reclaimed);
        cJSON_AddNumberToObject(st, "errors", (double)s->m.store_errors);
    }
    sl_ui_json_latency(root, s);
    sl_ui_json_backend(root, s);
    sl_ui_json_adaptive(root, s);
    cJSON_AddNumberToObject(root, "connections", (double)s->connections);
    cJSON_AddNumberToObject(root, "connections_total", (double)s->connections_total);
    cJSON_AddNumberToObject(root, "commands", (double)s->m.commands);
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}
