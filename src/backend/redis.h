/*
 * redis.h: the central store (--store redis://, redis-cluster://): every
 * state in one Redis (or one Redis Cluster), so that a fleet of sluiced
 * enforces one limit. Decisions are made in Redis, on Redis's clock, by the
 * module's SL.DECIDE when sluice-redis.so is loaded there, else by one Lua
 * script (src/backend/lua/sluice.lua) taking the same arguments
 * (src/cmd/cmd.c's sl_cmd_decide has the grammar and the reply).
 *
 * When Redis cannot answer within a request's time budget, a store-down
 * policy decides instead (fail_open, fail_closed, or a local limiter); a
 * circuit breaker per worker stops asking a store that keeps failing.
 * docs/configuration.md describes the choices as a user makes them.
 */
#ifndef SL_BACKEND_REDIS_H
#define SL_BACKEND_REDIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/transport.h"

typedef struct sl_redis_config {
    const char *url;      /* redis://[user:password@]host:port[/db][?password=P&user=U],
                             or redis-cluster://host:port[,host:port...] */
    sl_on_error on_error; /* the default store-down policy; DEFAULT: fail_open */
    int32_t timeout_ms;   /* the default time budget; 0: 50 */
    int32_t fleet_nodes;  /* sluiced nodes sharing the store: local enforces limit / N */
    size_t local_memory;  /* the local limiter's memory cap in bytes; 0: 16 MiB */
    int32_t connect_timeout_ms; /* 0: 1000 */
    /* A routing fleet (--peers): the url is not read; each request goes to
     * the owner of its keys among these sluiced (peers.h), AUTH'd with
     * peer_password (their shared --requirepass) when not NULL. */
    struct sl_peers *peers;
    const char *peer_password;
} sl_redis_config;

#define SL_REDIS_TIMEOUT_MS_DEFAULT 50
#define SL_REDIS_TIMEOUT_MS_MAX 60000
#define SL_REDIS_LOCAL_MEMORY_DEFAULT ((size_t)16 << 20)

/*
 * Builds the redis backend from *cfg (the URL is parsed and copied; cfg may
 * go after the call). Nothing connects yet: each worker's attach() opens its
 * own connection on its loop. Returns SL_OK with *out set (freed with
 * (*out)->ops->free), or SL_ERR_ARGUMENT / SL_ERR_NOMEM with a message naming
 * what is wrong written into err (n bytes).
 */
int sl_backend_redis(const sl_redis_config *cfg, sl_backend **out, char *err, size_t n);

/* Where a redis:// or redis-cluster:// URL points, as the backend reads it
 * (for another client of the same store: the server's plans loader). */
typedef struct sl_redis_target {
    bool cluster;
    char *hosts;    /* "host:port" (cluster: comma-separated seeds), IPv6 without brackets */
    char *user;     /* NULL: none */
    char *password; /* NULL: none */
    int db;
} sl_redis_target;

/* Parses url into *out (all zero first). Returns SL_OK, or SL_ERR_ARGUMENT
 * / SL_ERR_NOMEM with err (n bytes) saying what is wrong ("ERR ..."). The
 * strings are malloc'ed: sl_redis_target_free releases them (also after a
 * failure). */
int sl_redis_target_parse(const char *url, sl_redis_target *out, char *err, size_t n);
void sl_redis_target_free(sl_redis_target *t);

/* What decided a request, for logs: "store", "fail_open", "fail_closed", "local". */
const char *sl_fallback_name(sl_fallback by);

/*
 * The text of the last error a worker saw: an error reply of Redis (which a
 * request answers as SL_ERR_ARGUMENT or SL_ERR_WRONGTYPE), or why its
 * connection was lost. Empty when none. Valid until the worker's next
 * callback; the worker's own storage.
 */
const char *sl_backend_redis_last_error(const sl_backend_worker *w);

/* The transports (transport.h): each returns a transport that is already
 * connecting on `loop` and reconnects by itself, or NULL for a config it
 * cannot use (a host without a port) or out of memory. */
sl_transport *sl_transport_single(uv_loop_t *loop, const sl_transport_config *cfg);
sl_transport *sl_transport_cluster(uv_loop_t *loop, const sl_transport_config *cfg);

/* The Lua script, embedded at build time from src/backend/lua/sluice.lua
 * (a generated C file), and its SHA1 as EVALSHA names it. */
extern const char sl_redis_script[];
extern const char sl_redis_script_sha[];

#endif /* SL_BACKEND_REDIS_H */
