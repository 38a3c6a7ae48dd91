/*
 * plans_redis.c: policies' plans from a Redis hash (plans_redis.h).
 *
 * One source per policy that names a hash: its schedule and what its reads
 * did, for the logs, INFO and /metrics. The main loop's timer picks the
 * first source that is due and hands a job (the policy's name, hash and
 * tier names, copied) to libuv's thread pool, one job at a time; the job
 * reads the hash with a blocking hiredis connection of its own (kept from
 * one read to the next) and builds the table; back on the main loop the
 * table is swapped into the policy of the config in force, if that policy
 * still names the same hash with the same tiers (a reload may have changed
 * them meanwhile: the job's table is then dropped and the hash read again).
 *
 * A table swapped out is retired as a config is: the server's epoch is
 * bumped and the workers woken; once every worker has seen that epoch, none
 * can still be reading the old table (a worker loads a policy's table once
 * per command and keeps it no longer), and it is freed.
 */
#include "server/plans_redis.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/time.h>
#include <time.h>

#include "backend/redis.h"
#include "common/clock.h"
#include "policy/config.h"
#include "policy/plans.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/server.h"

#define PR_MAX_SOURCES 256
#define PR_CONNECT_MS 2000
#define PR_REPLY_MS 5000
#define PR_MAX_REDIRECTS 5
#define PR_TICK_MS 100
#define PR_ADDR_MAX 300
#define PR_ERR_MAX 512

/* One policy's hash. Written by the main thread under pr_lock; read under
 * it by INFO and /metrics on the workers. */
typedef struct pr_source {
    char policy[SL_POLICY_NAME_MAX + 1];
    char hash[SL_PLANS_HASH_MAX + 1];
    int64_t refresh_ns;
    int64_t due;         /* monotonic ns: when it is read next */
    int64_t loaded_mono; /* when the table in force was read; 0: none read */
    int64_t read_ns;     /* how long the last read that succeeded took */
    uint64_t reads, failures;
    size_t keys, unknown;
    bool failing; /* the last read failed */
} pr_source;

/* A read, from the main loop to the thread pool and back. */
typedef struct pr_job {
    uv_work_t req;
    char policy[SL_POLICY_NAME_MAX + 1];
    char hash[SL_PLANS_HASH_MAX + 1];
    size_t ntiers;
    char tiers[SL_POLICY_MAX_TIERS][SL_POLICY_NAME_MAX + 1];
    uint64_t hash_key[2];
    /* What the read found: the table (NULL: the read failed, err says
     * why), the fields whose value names no tier (one for an example), the
     * fields too long to be a key, and how long it took. */
    sl_plans *table;
    size_t unknown, skipped;
    char example[160];
    char err[PR_ERR_MAX];
    int64_t ns;
    atomic_bool done;
} pr_job;

typedef struct pr_retired {
    sl_plans *table;
    uint64_t epoch; /* freed once every worker has seen it */
    struct pr_retired *next;
} pr_retired;

static pthread_mutex_t pr_lock = PTHREAD_MUTEX_INITIALIZER;
static pr_source pr_sources[PR_MAX_SOURCES];
static size_t pr_nsources;

static sl_server *pr_srv;
static sl_redis_target pr_target;
static bool pr_have_target;
static uv_timer_t pr_timer, pr_retire_timer;
static bool pr_timers;
static pr_job *pr_running;
static atomic_bool pr_cancel;
static pr_retired *pr_retired_list;

/* The thread pool's connection: used by one job at a time (or by the main
 * thread at start, before any job), with the address it is connected to. */
static redisContext *pr_ctx;
static char pr_addr[PR_ADDR_MAX];

/* ---- the store ---- */

/* The redis:// or redis-cluster:// URL of a store URL: sync+'s own
 * parameters dropped (user and password kept). Returns a malloc'ed copy,
 * or NULL when the store is not Redis (or out of memory). */
static char *pr_redis_url(const char *url)
{
    if (!url)
        return NULL;
    bool sync = strncmp(url, "sync+", 5) == 0;
    if (sync)
        url += 5;
    if (strncmp(url, "redis://", 8) != 0 && strncmp(url, "redis-cluster://", 16) != 0)
        return NULL;
    char *out = malloc(strlen(url) + 1);
    if (!out)
        return NULL;
    const char *q = strchr(url, '?');
    size_t head = q ? (size_t)(q - url) : strlen(url);
    memcpy(out, url, head);
    char *o = out + head, sep = '?';
    while (q && *q) {
        q++;
        size_t plen = strcspn(q, "&");
        bool keep = !sync || (plen >= 5 && memcmp(q, "user=", 5) == 0) ||
                    (plen >= 9 && memcmp(q, "password=", 9) == 0);
        if (keep && plen > 0) {
            *o++ = sep;
            memcpy(o, q, plen);
            o += plen;
            sep = '&';
        }
        q += plen;
    }
    *o = '\0';
    return out;
}

static bool pr_store_is_redis(const sl_server *srv)
{
    char *url = srv->peers ? NULL : pr_redis_url(srv->cfg.store_url);
    if (!url)
        return false;
    memset(url, 0, strlen(url));
    free(url);
    return true;
}

bool sl_plans_redis_allowed(const sl_server *srv, const sl_config *c, char *err, size_t n)
{
    for (size_t i = 0; c && i < c->npolicies; i++)
        if (c->policies[i].plans_redis && !pr_store_is_redis(srv)) {
            snprintf(err, n, "policy '%s': plans: redis:%.64s reads a hash of the Redis store: "
                             "it needs --store redis://, redis-cluster:// or sync+redis:// "
                             "(the store is %s)",
                     c->policies[i].name, c->policies[i].plans_redis,
                     srv->peers ? "a routing fleet's memory stores" : "memory://");
            return false;
        }
    return true;
}

/* ---- reading a hash (on the thread pool, or at start) ---- */

static void pr_disconnect(void)
{
    redisFree(pr_ctx);
    pr_ctx = NULL;
}

/* Connects to addr ("host:port", an IPv6 host without brackets), with
 * AUTH and SELECT as the store's URL says. Returns 0, or -1 with err. */
static int pr_connect(const char *addr, char *err, size_t n)
{
    pr_disconnect();
    const char *colon = strrchr(addr, ':');
    char host[PR_ADDR_MAX];
    if (!colon || (size_t)(colon - addr) >= sizeof host) {
        snprintf(err, n, "bad address '%.64s'", addr);
        return -1;
    }
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    int port = atoi(colon + 1);
    struct timeval ct = {PR_CONNECT_MS / 1000, (PR_CONNECT_MS % 1000) * 1000};
    redisContext *c = redisConnectWithTimeout(host, port, ct);
    if (!c || c->err) {
        snprintf(err, n, "cannot connect to %s: %s", addr, c ? c->errstr : "out of memory");
        redisFree(c);
        return -1;
    }
    struct timeval rt = {PR_REPLY_MS / 1000, (PR_REPLY_MS % 1000) * 1000};
    redisSetTimeout(c, rt);
    redisReply *r = NULL;
    if (pr_target.password) {
        r = pr_target.user ? redisCommand(c, "AUTH %s %s", pr_target.user, pr_target.password)
                           : redisCommand(c, "AUTH %s", pr_target.password);
        if (!r || r->type == REDIS_REPLY_ERROR) {
            snprintf(err, n, "AUTH at %s: %s", addr, r ? r->str : c->errstr);
            freeReplyObject(r);
            redisFree(c);
            return -1;
        }
        freeReplyObject(r);
    }
    if (!pr_target.cluster && pr_target.db != 0) {
        r = redisCommand(c, "SELECT %d", pr_target.db);
        if (!r || r->type == REDIS_REPLY_ERROR) {
            snprintf(err, n, "SELECT %d at %s: %s", pr_target.db, addr, r ? r->str : c->errstr);
            freeReplyObject(r);
            redisFree(c);
            return -1;
        }
        freeReplyObject(r);
    }
    pr_ctx = c;
    snprintf(pr_addr, sizeof pr_addr, "%s", addr);
    return 0;
}

/* Connects to the store: the node of the last read when there was one,
 * else each seed in turn. */
static int pr_connect_any(char *err, size_t n)
{
    if (pr_ctx)
        return 0;
    if (pr_addr[0] && pr_connect(pr_addr, err, n) == 0)
        return 0;
    for (const char *h = pr_target.hosts; h && *h;) {
        size_t len = strcspn(h, ",");
        char addr[PR_ADDR_MAX];
        snprintf(addr, sizeof addr, "%.*s", (int)(len < sizeof addr ? len : sizeof addr - 1), h);
        if (pr_connect(addr, err, n) == 0)
            return 0;
        h += len + (h[len] == ',');
    }
    return -1;
}

/* A cluster's redirection ("MOVED 3999 host:port", "ASK ..."): the
 * address into addr; false when the error is not one. *ask tells which. */
static bool pr_redirect(const redisReply *r, char *addr, size_t cap, bool *ask)
{
    bool moved = strncmp(r->str, "MOVED ", 6) == 0;
    *ask = strncmp(r->str, "ASK ", 4) == 0;
    if (!moved && !*ask)
        return false;
    const char *to = strrchr(r->str, ' ');
    if (!to || !strchr(to, ':'))
        return false;
    to++;
    if (to[0] == ':') { /* the host of the node that answered */
        const char *colon = strrchr(pr_addr, ':');
        int hlen = colon ? (int)(colon - pr_addr) : 0;
        snprintf(addr, cap, "%.*s%s", hlen, pr_addr, to);
    } else {
        snprintf(addr, cap, "%s", to);
    }
    return true;
}

/* The index of the tier named by len bytes at s, or -1. */
static int pr_tier(const pr_job *j, const char *s, size_t len)
{
    for (size_t t = 0; t < j->ntiers; t++)
        if (strlen(j->tiers[t]) == len && memcmp(j->tiers[t], s, len) == 0)
            return (int)t;
    return -1;
}

/* Reads one page's fields into b. Returns 0, or -1 with j->err. */
static int pr_page(pr_job *j, sl_plans_build *b, const redisReply *items)
{
    for (size_t i = 0; i + 1 < items->elements; i += 2) {
        const redisReply *f = items->element[i], *v = items->element[i + 1];
        if (f->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING) {
            snprintf(j->err, sizeof j->err, "HSCAN answered a field that is not a string");
            return -1;
        }
        if (f->len == 0 || f->len > SL_PLAN_KEY_MAX) {
            j->skipped++;
            continue;
        }
        int t = pr_tier(j, v->str, v->len);
        if (t < 0) {
            if (j->unknown++ == 0)
                snprintf(j->example, sizeof j->example, "'%.*s' -> '%.*s'",
                         (int)(f->len > 64 ? 64 : f->len), f->str,
                         (int)(v->len > 64 ? 64 : v->len), v->str);
            continue;
        }
        if (sl_plans_build_set(b, f->str, f->len, (unsigned)t) != 0) {
            snprintf(j->err, sizeof j->err, "%s", sl_plans_build_error(b));
            return -1;
        }
    }
    return 0;
}

/* Reads the job's hash whole into j->table, with HSCAN (1000 fields a
 * page); in a cluster from the node that owns its slot. A redirection
 * starts the scan again at the node it names (a cursor is one node's). */
static void pr_read(pr_job *j)
{
    int64_t start = sl_now_mono();
    sl_plans_build *b = NULL;
    char cursor[32] = "0";
    bool asking = false;
    int redirects = 0;
    size_t hlen = strlen(j->hash);
    for (;;) {
        if (!b) {
            if (!(b = sl_plans_build_new(j->hash_key))) {
                snprintf(j->err, sizeof j->err, "out of memory");
                break;
            }
            snprintf(cursor, sizeof cursor, "0");
            j->unknown = j->skipped = 0;
        }
        if (atomic_load(&pr_cancel)) {
            snprintf(j->err, sizeof j->err, "shutting down");
            break;
        }
        if (pr_connect_any(j->err, sizeof j->err) != 0)
            break;
        if (asking) {
            redisReply *a = redisCommand(pr_ctx, "ASKING");
            freeReplyObject(a);
        }
        redisReply *r = redisCommand(pr_ctx, "HSCAN %b %s COUNT 1000", j->hash, hlen, cursor);
        if (!r) {
            snprintf(j->err, sizeof j->err, "HSCAN at %s: %s", pr_addr, pr_ctx->errstr);
            pr_disconnect();
            break;
        }
        char to[PR_ADDR_MAX];
        bool ask;
        if (r->type == REDIS_REPLY_ERROR && pr_redirect(r, to, sizeof to, &ask)) {
            freeReplyObject(r);
            if (++redirects > PR_MAX_REDIRECTS) {
                snprintf(j->err, sizeof j->err, "more than %d redirections", PR_MAX_REDIRECTS);
                break;
            }
            if (pr_connect(to, j->err, sizeof j->err) != 0)
                break;
            asking = ask;
            sl_plans_build_abort(b);
            b = NULL;
            continue;
        }
        if (r->type == REDIS_REPLY_ERROR) {
            snprintf(j->err, sizeof j->err, "HSCAN at %s: %s", pr_addr, r->str);
            freeReplyObject(r);
            break;
        }
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_STRING || r->element[0]->len >= sizeof cursor ||
            r->element[1]->type != REDIS_REPLY_ARRAY) {
            snprintf(j->err, sizeof j->err, "HSCAN at %s: not a cursor and an array", pr_addr);
            freeReplyObject(r);
            break;
        }
        int rc = pr_page(j, b, r->element[1]);
        memcpy(cursor, r->element[0]->str, r->element[0]->len);
        cursor[r->element[0]->len] = '\0';
        freeReplyObject(r);
        if (rc != 0)
            break;
        if (strcmp(cursor, "0") == 0) {
            j->table = sl_plans_build_finish(b);
            b = NULL;
            if (!j->table)
                snprintf(j->err, sizeof j->err, "out of memory");
            break;
        }
    }
    sl_plans_build_abort(b);
    j->ns = sl_now_mono() - start;
}

static void pr_work(uv_work_t *req)
{
    pr_job *j = req->data;
    pr_read(j);
    atomic_store(&j->done, true);
}

/* ---- the main loop's side ---- */

static pr_source *pr_find_source(const char *policy, const char *hash)
{
    for (size_t i = 0; i < pr_nsources; i++)
        if (strcmp(pr_sources[i].policy, policy) == 0 && strcmp(pr_sources[i].hash, hash) == 0)
            return &pr_sources[i];
    return NULL;
}

/* Whether p still names the job's hash with the job's tiers, in order. */
static bool pr_job_fits(const pr_job *j, const sl_policy *p)
{
    if (!p || !p->plans_redis || strcmp(p->plans_redis, j->hash) != 0 || p->ntiers != j->ntiers)
        return false;
    for (size_t t = 0; t < p->ntiers; t++)
        if (strcmp(p->tiers[t].name, j->tiers[t]) != 0)
            return false;
    return true;
}

static void pr_on_retire_timer(uv_timer_t *t)
{
    sl_server *srv = t->data;
    for (pr_retired **at = &pr_retired_list; *at;) {
        pr_retired *r = *at;
        bool seen = true;
        for (int i = 0; i < srv->nworkers; i++)
            seen &= atomic_load(&srv->workers[i].seen_epoch) >= r->epoch;
        if (seen) {
            *at = r->next;
            sl_plans_free(r->table);
            free(r);
        } else {
            at = &r->next;
        }
    }
    if (!pr_retired_list)
        uv_timer_stop(t);
}

/* Frees a table no worker may hold any more once every worker has moved
 * past the epoch this bumps. */
static void pr_retire(sl_server *srv, sl_plans *old)
{
    if (!old)
        return;
    pr_retired *r = malloc(sizeof *r);
    if (!r) {
        /* Leaked rather than freed under a reader. */
        sl_log(SL_LOG_ERROR, "plans: out of memory retiring a table (%zu bytes kept)",
               sl_plans_bytes(old));
        return;
    }
    *r = (pr_retired){old, atomic_fetch_add(&srv->epoch, 1) + 1, pr_retired_list};
    pr_retired_list = r;
    sl_workers_wake(srv);
    if (pr_timers)
        uv_timer_start(&pr_retire_timer, pr_on_retire_timer, 10, 10);
}

/* Puts a job's result in force (or counts its failure), on the main
 * thread. */
static void pr_apply(sl_server *srv, pr_job *j)
{
    int64_t now = sl_now_mono();
    sl_config *cfg = atomic_load(&srv->config);
    sl_policy *p = (sl_policy *)sl_config_policy(cfg, j->policy, strlen(j->policy));
    pthread_mutex_lock(&pr_lock);
    pr_source *s = pr_find_source(j->policy, j->hash);
    if (!s || !pr_job_fits(j, p)) {
        /* A reload changed the policy while it was read: read it again. */
        pthread_mutex_unlock(&pr_lock);
        sl_plans_free(j->table);
        if (s)
            s->due = now;
        return;
    }
    s->due = now + s->refresh_ns;
    if (!j->table) {
        s->failures++;
        s->failing = true;
        size_t keys = s->keys;
        int64_t age = s->loaded_mono ? (now - s->loaded_mono) / 1000000000 : -1;
        pthread_mutex_unlock(&pr_lock);
        if (age >= 0)
            sl_log(SL_LOG_ERROR, "policy '%s': plans from Redis hash '%s' not read again (%s): "
                                 "keeping the table read %lld s ago (%zu keys)",
                   j->policy, j->hash, j->err, (long long)age, keys);
        else
            sl_log(SL_LOG_ERROR, "policy '%s': plans from Redis hash '%s' NOT LOADED (%s): EVERY "
                                 "KEY IS ON THE DEFAULT TIER until a read succeeds (tried again "
                                 "every %lld ms)",
                   j->policy, j->hash, j->err, (long long)(s->refresh_ns / 1000000));
        return;
    }
    bool first = s->loaded_mono == 0, recovered = s->failing;
    size_t before = s->keys, keys = sl_plans_count(j->table);
    s->loaded_mono = now;
    s->read_ns = j->ns;
    s->reads++;
    s->keys = keys;
    s->unknown = j->unknown;
    s->failing = false;
    pthread_mutex_unlock(&pr_lock);
    pr_retire(srv, atomic_exchange_explicit(&p->plans, j->table, memory_order_acq_rel));
    j->table = NULL;
    if (first || recovered || keys != before)
        sl_log(SL_LOG_INFO, "policy '%s': plans from Redis hash '%s': %zu keys (%zu bytes), read "
                            "in %lld ms%s",
               j->policy, j->hash, keys, sl_plans_bytes(atomic_load(&p->plans)),
               (long long)(j->ns / 1000000), recovered ? " (read again after failures)" : "");
    if (j->unknown)
        sl_log(SL_LOG_WARN, "policy '%s': plans from Redis hash '%s': %zu fields name no tier of "
                            "the policy (e.g. %s): those keys are on the default tier",
               j->policy, j->hash, j->unknown, j->example);
    if (j->skipped)
        sl_log(SL_LOG_WARN, "policy '%s': plans from Redis hash '%s': %zu fields are empty or "
                            "longer than %d bytes, so no key: ignored",
               j->policy, j->hash, j->skipped, SL_PLAN_KEY_MAX);
}

/* A job for source s under policy p, or NULL when out of memory. */
static pr_job *pr_job_new(const pr_source *s, const sl_policy *p)
{
    pr_job *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    snprintf(j->policy, sizeof j->policy, "%s", s->policy);
    snprintf(j->hash, sizeof j->hash, "%s", s->hash);
    j->ntiers = p->ntiers;
    for (size_t t = 0; t < p->ntiers; t++)
        snprintf(j->tiers[t], sizeof j->tiers[t], "%s", p->tiers[t].name);
    if (getrandom(j->hash_key, sizeof j->hash_key, 0) != (ssize_t)sizeof j->hash_key) {
        uint64_t x = (uint64_t)sl_now_wall() ^ (uint64_t)(uintptr_t)j;
        j->hash_key[0] = x * 0x9e3779b97f4a7c15u;
        j->hash_key[1] = ~x * 0xc2b2ae3d27d4eb4fu;
    }
    j->req.data = j;
    return j;
}

static void pr_after_work(uv_work_t *req, int status)
{
    pr_job *j = req->data;
    pr_running = NULL;
    if (status == 0)
        pr_apply(pr_srv, j);
    sl_plans_free(j->table);
    free(j);
}

/* Starts the read of the first source that is due, if none is running. */
static void pr_on_tick(uv_timer_t *t)
{
    if (pr_running || atomic_load(&pr_cancel))
        return;
    int64_t now = sl_now_mono();
    sl_config *cfg = atomic_load(&pr_srv->config);
    pthread_mutex_lock(&pr_lock);
    for (size_t i = 0; i < pr_nsources; i++) {
        pr_source *s = &pr_sources[i];
        if (s->due > now)
            continue;
        const sl_policy *p = sl_config_policy(cfg, s->policy, strlen(s->policy));
        pr_job *j = p ? pr_job_new(s, p) : NULL;
        s->due = now + s->refresh_ns; /* again then, if this one cannot start */
        if (!j)
            continue;
        if (uv_queue_work(t->loop, &j->req, pr_work, pr_after_work) != 0) {
            free(j);
            continue;
        }
        pr_running = j;
        break;
    }
    pthread_mutex_unlock(&pr_lock);
}

/* The sources of cfg's hash policies, keeping what the old ones of the
 * same policy and hash knew; a new one is due at once. */
static void pr_set_sources(const sl_config *cfg)
{
    static pr_source next[PR_MAX_SOURCES];
    size_t n = 0;
    int64_t now = sl_now_mono();
    pthread_mutex_lock(&pr_lock);
    for (size_t i = 0; cfg && i < cfg->npolicies; i++) {
        const sl_policy *p = &cfg->policies[i];
        if (!p->plans_redis)
            continue;
        if (n == PR_MAX_SOURCES) {
            sl_log(SL_LOG_ERROR, "policy '%s': plans from Redis: more than %d policies read a "
                                 "hash; this one is on its default tier",
                   p->name, PR_MAX_SOURCES);
            continue;
        }
        const pr_source *old = pr_find_source(p->name, p->plans_redis);
        pr_source *s = &next[n++];
        if (old) {
            *s = *old;
            if (s->refresh_ns != p->plans_refresh_ns && s->due > now + p->plans_refresh_ns)
                s->due = now + p->plans_refresh_ns;
        } else {
            *s = (pr_source){.due = now};
            snprintf(s->policy, sizeof s->policy, "%s", p->name);
            snprintf(s->hash, sizeof s->hash, "%s", p->plans_redis);
        }
        s->refresh_ns = p->plans_refresh_ns;
    }
    memcpy(pr_sources, next, n * sizeof *next);
    pr_nsources = n;
    pthread_mutex_unlock(&pr_lock);
}

void sl_plans_redis_start(sl_server *srv, uv_loop_t *loop)
{
    pr_srv = srv;
    char *url = srv->peers ? NULL : pr_redis_url(srv->cfg.store_url);
    if (url) {
        char err[256];
        pr_have_target = sl_redis_target_parse(url, &pr_target, err, sizeof err) == SL_OK;
        if (!pr_have_target) {
            sl_redis_target_free(&pr_target);
            sl_log(SL_LOG_ERROR, "plans from Redis hashes: the store's URL: %s: EVERY KEY IS ON "
                                 "ITS POLICY'S DEFAULT TIER",
                   err + (strncmp(err, "ERR ", 4) == 0 ? 4 : 0));
        }
        memset(url, 0, strlen(url));
        free(url);
    }
    if (!pr_have_target)
        return;
    uv_timer_init(loop, &pr_timer);
    uv_timer_init(loop, &pr_retire_timer);
    pr_timer.data = pr_retire_timer.data = srv;
    pr_timers = true;
    sl_config *cfg = atomic_load(&srv->config);
    pr_set_sources(cfg);
    /* Every hash now, before a client is answered. */
    for (size_t i = 0; i < pr_nsources; i++) {
        const sl_policy *p = sl_config_policy(cfg, pr_sources[i].policy,
                                              strlen(pr_sources[i].policy));
        pr_job *j = p ? pr_job_new(&pr_sources[i], p) : NULL;
        if (!j)
            continue;
        pr_read(j);
        pr_apply(srv, j);
        sl_plans_free(j->table);
        free(j);
    }
    uv_timer_start(&pr_timer, pr_on_tick, PR_TICK_MS, PR_TICK_MS);
}

/* sl_plans_each's callback: one key of the old table into the new, by its
 * tier's name. */
typedef struct pr_carry {
    sl_plans_build *b;
    int map[SL_POLICY_MAX_TIERS]; /* old tier index -> new, -1: gone */
    bool failed;
} pr_carry;

static int pr_carry_key(void *arg, const void *key, size_t len, int tier)
{
    pr_carry *c = arg;
    if (tier < 0 || tier >= SL_POLICY_MAX_TIERS || c->map[tier] < 0)
        return 0;
    if (sl_plans_build_set(c->b, key, len, (unsigned)c->map[tier]) != 0) {
        c->failed = true;
        return 1;
    }
    return 0;
}

void sl_plans_redis_reload(sl_server *srv, sl_config *next)
{
    if (!pr_have_target)
        return;
    const sl_config *cur = atomic_load(&srv->config);
    for (size_t i = 0; next && i < next->npolicies; i++) {
        sl_policy *np = &next->policies[i];
        if (!np->plans_redis)
            continue;
        const sl_policy *op = sl_config_policy(cur, np->name, strlen(np->name));
        const sl_plans *old =
            op && op->plans_redis && strcmp(op->plans_redis, np->plans_redis) == 0
                ? atomic_load(&op->plans)
                : NULL;
        if (!old)
            continue;
        uint64_t key[2];
        if (getrandom(key, sizeof key, 0) != (ssize_t)sizeof key)
            continue; /* read afresh instead */
        pr_carry c = {.b = sl_plans_build_new(key)};
        for (size_t t = 0; t < op->ntiers; t++) {
            c.map[t] = -1;
            for (size_t u = 0; u < np->ntiers; u++)
                if (strcmp(op->tiers[t].name, np->tiers[u].name) == 0)
                    c.map[t] = (int)u;
        }
        if (!c.b)
            continue;
        sl_plans_each(old, pr_carry_key, &c);
        if (c.failed) {
            sl_plans_build_abort(c.b);
            continue;
        }
        atomic_store(&np->plans, sl_plans_build_finish(c.b));
    }
    pr_set_sources(next);
    /* A source whose tiers changed is read again at once (its carried
     * table dropped the keys of the tiers that went). */
    pthread_mutex_lock(&pr_lock);
    for (size_t i = 0; i < pr_nsources; i++) {
        const sl_policy *op = sl_config_policy(cur, pr_sources[i].policy,
                                               strlen(pr_sources[i].policy));
        const sl_policy *np = sl_config_policy(next, pr_sources[i].policy,
                                               strlen(pr_sources[i].policy));
        bool same = op && np && op->ntiers == np->ntiers;
        for (size_t t = 0; same && t < op->ntiers; t++)
            same = strcmp(op->tiers[t].name, np->tiers[t].name) == 0;
        if (!same)
            pr_sources[i].due = sl_now_mono();
    }
    pthread_mutex_unlock(&pr_lock);
}

void sl_plans_redis_stop(sl_server *srv)
{
    (void)srv;
    atomic_store(&pr_cancel, true);
    if (pr_timers) {
        uv_timer_stop(&pr_timer);
        uv_timer_stop(&pr_retire_timer);
    }
    if (pr_running) {
        if (uv_cancel((uv_req_t *)&pr_running->req) != 0) {
            /* Under way: it ends at its next page, or its reply's timeout. */
            while (!atomic_load(&pr_running->done))
                nanosleep(&(struct timespec){0, 1000000}, NULL);
        }
        sl_plans_free(pr_running->table);
        free(pr_running);
        pr_running = NULL;
    }
    while (pr_retired_list) {
        pr_retired *r = pr_retired_list;
        pr_retired_list = r->next;
        sl_plans_free(r->table);
        free(r);
    }
    pr_disconnect();
    sl_redis_target_free(&pr_target);
    pr_have_target = false;
}

/* ---- INFO and /metrics ---- */

size_t sl_plans_redis_info(char *buf, size_t cap)
{
    size_t len = 0;
    int64_t now = sl_now_mono();
    pthread_mutex_lock(&pr_lock);
    if (pr_nsources == 0) {
        pthread_mutex_unlock(&pr_lock);
        return 0;
    }
    uint64_t failures = 0;
    int64_t oldest = 0;
    bool unloaded = false;
    for (size_t i = 0; i < pr_nsources; i++) {
        failures += pr_sources[i].failures;
        if (!pr_sources[i].loaded_mono)
            unloaded = true;
        else if (now - pr_sources[i].loaded_mono > oldest)
            oldest = now - pr_sources[i].loaded_mono;
    }
    int n = snprintf(buf, cap, "plans_policies:%zu\r\nplans_refresh_failures:%llu\r\n"
                               "plans_age_seconds:%lld\r\n",
                     pr_nsources, (unsigned long long)failures,
                     unloaded ? -1LL : (long long)(oldest / 1000000000));
    if (n > 0)
        len = (size_t)n < cap ? (size_t)n : cap;
    for (size_t i = 0; i < pr_nsources && len < cap; i++) {
        const pr_source *s = &pr_sources[i];
        n = snprintf(buf + len, cap - len,
                     "plans_%s:hash=%s,loaded=%d,keys=%zu,age_seconds=%lld,reads=%llu,"
                     "refresh_failures=%llu,unknown_tier_fields=%zu,last_read_ms=%lld,state=%s\r\n",
                     s->policy, s->hash, s->loaded_mono != 0, s->keys,
                     s->loaded_mono ? (long long)((now - s->loaded_mono) / 1000000000) : -1LL,
                     (unsigned long long)s->reads, (unsigned long long)s->failures, s->unknown,
                     (long long)(s->read_ns / 1000000), s->failing ? "failing" : "ok");
        if (n > 0)
            len += (size_t)n < cap - len ? (size_t)n : cap - len;
    }
    pthread_mutex_unlock(&pr_lock);
    return len;
}

void sl_plans_redis_metrics(sl_buf *out)
{
    static const struct {
        const char *name, *type, *help;
    } m[] = {
        {"sluice_plans_loaded", "gauge",
         "Whether a table of the policy's Redis hash plans is in force (0: every key on the "
         "default tier)."},
        {"sluice_plans_keys", "gauge", "Keys in the table in force."},
        {"sluice_plans_age_seconds", "gauge",
         "Seconds since the table in force was read (-1: none read)."},
        {"sluice_plans_reads_total", "counter", "Reads of the hash that succeeded."},
        {"sluice_plans_refresh_failures_total", "counter",
         "Reads of the hash that failed (the table in force was kept)."},
        {"sluice_plans_unknown_tier_fields", "gauge",
         "Fields of the last read whose value names no tier of the policy."},
        {"sluice_plans_read_seconds", "gauge", "How long the last read that succeeded took."},
    };
    int64_t now = sl_now_mono();
    pthread_mutex_lock(&pr_lock);
    for (size_t k = 0; pr_nsources && k < sizeof m / sizeof m[0]; k++) {
        sl_out(out, "# HELP %s %s\n# TYPE %s %s\n", m[k].name, m[k].help, m[k].name, m[k].type);
        for (size_t i = 0; i < pr_nsources; i++) {
            const pr_source *s = &pr_sources[i];
            char policy[2 * SL_POLICY_NAME_MAX + 1], hash[2 * 128 + 1], trimmed[129];
            sl_label(policy, sizeof policy, s->policy);
            snprintf(trimmed, sizeof trimmed, "%.128s", s->hash);
            sl_label(hash, sizeof hash, trimmed);
            double v = 0;
            switch (k) {
            case 0: v = s->loaded_mono != 0; break;
            case 1: v = (double)s->keys; break;
            case 2: v = s->loaded_mono ? (double)(now - s->loaded_mono) / 1e9 : -1; break;
            case 3: v = (double)s->reads; break;
            case 4: v = (double)s->failures; break;
            case 5: v = (double)s->unknown; break;
            default: v = (double)s->read_ns / 1e9; break;
            }
            sl_out(out, "%s{policy=\"%s\",hash=\"%s\"} %.17g\n", m[k].name, policy, hash, v);
        }
    }
    pthread_mutex_unlock(&pr_lock);
}
