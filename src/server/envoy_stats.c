/*
 * envoy_stats.c: ShouldRateLimit's counts per stats key (envoy_stats.h):
 * per worker, an open-addressing table of keys with their five counters.
 */
#include "server/envoy_stats.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/siphash.h"
#include "server/metrics.h"
#include "server/server.h"

enum { ST_HITS, ST_OVER, ST_NEAR, ST_WITHIN, ST_SHADOW, ST_N };

#define SLOTS (SL_ENVOY_STATS_KEYS * 2) /* a power of two, at most half full */
#define OTHER "_other"

typedef struct entry {
    char *key; /* NUL-terminated; NULL: a free slot */
    size_t len;
    uint64_t c[ST_N];
} entry;

struct sl_envoy_stats {
    pthread_mutex_t lock;
    size_t n;
    entry slot[SLOTS];
};

sl_envoy_stats *sl_envoy_stats_new(void)
{
    sl_envoy_stats *t = sl_calloc(1, sizeof *t);
    if (t)
        pthread_mutex_init(&t->lock, NULL);
    return t;
}

void sl_envoy_stats_free(sl_envoy_stats *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < SLOTS; i++)
        sl_free(t->slot[i].key);
    pthread_mutex_destroy(&t->lock);
    sl_free(t);
}

static uint64_t hash(const char *key, size_t len)
{
    static const uint64_t k[2] = {0x736c756963652d65, 0x6e766f792d737473};
    return sl_siphash(k, key, len);
}

/* The entry of key, made when there is room; NULL when there is none. */
static entry *find(sl_envoy_stats *t, const char *key, size_t len)
{
    size_t i = (size_t)hash(key, len) & (SLOTS - 1);
    for (;; i = (i + 1) & (SLOTS - 1)) {
        entry *e = &t->slot[i];
        if (!e->key)
            break;
        if (e->len == len && memcmp(e->key, key, len) == 0)
            return e;
    }
    /* One slot is kept for "_other", the key of everything past the cap. */
    bool other = len == sizeof OTHER - 1 && memcmp(key, OTHER, len) == 0;
    if (t->n + (other ? 0 : 1) >= SL_ENVOY_STATS_KEYS)
        return NULL;
    char *copy = sl_malloc(len + 1);
    if (!copy)
        return NULL;
    memcpy(copy, key, len);
    copy[len] = '\0';
    t->slot[i].key = copy;
    t->slot[i].len = len;
    t->n++;
    return &t->slot[i];
}

void sl_envoy_stats_count(void *arg, const char *key, size_t len, int64_t hits, bool over,
                          bool near, bool shadow)
{
    sl_envoy_stats *t = arg;
    if (!t)
        return;
    uint64_t h = hits > 0 ? (uint64_t)hits : 0;
    pthread_mutex_lock(&t->lock);
    entry *e = find(t, key, len);
    if (!e)
        e = find(t, OTHER, sizeof OTHER - 1);
    if (e) {
        e->c[ST_HITS] += h;
        e->c[over ? ST_OVER : ST_WITHIN] += h;
        if (near)
            e->c[ST_NEAR] += h;
        if (shadow)
            e->c[ST_SHADOW] += h;
    }
    pthread_mutex_unlock(&t->lock);
}

static int by_key(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    return strcmp(x->key, y->key);
}

void sl_envoy_stats_render(sl_server *srv, sl_buf *out)
{
    static const char *const name[ST_N] = {"hits", "over_limit", "near_limit", "within_limit",
                                           "shadow_mode"};
    static const char *const help[ST_N] = {
        "Hits ShouldRateLimit counted, by stats key (envoyproxy/ratelimit's total_hits)",
        "Hits over the limit (shadow mode's included)",
        "Hits within the limit past 80% of it",
        "Hits within the limit",
        "Hits over a limit in shadow mode, let through",
    };
    size_t cap = 0;
    for (int w = 0; w < srv->nworkers; w++)
        if (srv->workers[w].envoy_stats)
            cap += SL_ENVOY_STATS_KEYS;
    if (cap == 0)
        return;
    entry *all = sl_malloc(cap * sizeof *all);
    if (!all)
        return;
    size_t n = 0;
    for (int w = 0; w < srv->nworkers; w++) {
        sl_envoy_stats *t = srv->workers[w].envoy_stats;
        if (!t)
            continue;
        pthread_mutex_lock(&t->lock);
        for (size_t i = 0; i < SLOTS; i++) {
            if (!t->slot[i].key)
                continue;
            all[n] = t->slot[i];
            all[n].key = sl_strdup(t->slot[i].key);
            if (all[n].key)
                n++;
        }
        pthread_mutex_unlock(&t->lock);
    }
    qsort(all, n, sizeof *all, by_key);
    /* The same key of several workers: summed into its first. */
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && strcmp(all[m - 1].key, all[i].key) == 0) {
            for (int k = 0; k < ST_N; k++)
                all[m - 1].c[k] += all[i].c[k];
            sl_free(all[i].key);
            continue;
        }
        all[m++] = all[i];
    }
    char label[2 * 512 + 1];
    for (int k = 0; k < ST_N; k++) {
        sl_out(out, "# HELP sluice_envoy_%s_total %s.\n# TYPE sluice_envoy_%s_total counter\n",
               name[k], help[k], name[k]);
        for (size_t i = 0; i < m; i++) {
            /* A key is up to 512 bytes: the line is longer than sl_out's. */
            sl_label(label, sizeof label, all[i].key);
            sl_out(out, "sluice_envoy_%s_total{key=\"", name[k]);
            sl_buf_add(out, label, strlen(label));
            sl_out(out, "\"} %llu\n", (unsigned long long)all[i].c[k]);
        }
    }
    for (size_t i = 0; i < m; i++)
        sl_free(all[i].key);
    sl_free(all);
}
