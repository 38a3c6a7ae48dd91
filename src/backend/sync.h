/*
 * sync.h: the sync strategy's backend (--store sync+redis://HOST:PORT,
 * sync+redis-cluster://...): each take of a rate decided on this node
 * against its lease of the key's budget, the leases traded with a central
 * Redis every interval (sync.c; the rules are src/algo/quota.h's).
 *
 * The URL is a redis:// or redis-cluster:// URL (redis.h) after "sync+",
 * with sync's own parameters in its query beside the redis backend's:
 *
 *     node=I          this node's id in the fleet, 0 .. N - 1, and
 *     nodes=N         the fleet's size, 1 .. SL_QUOTA_NODES_MAX, both or neither:
 *                     without them the node claims an id in the fleet's registry
 *                     in Redis (sync.c), and learns the size there
 *     interval_ms=M   between a key's syncs; default SL_SYNC_INTERVAL_MS_DEFAULT
 *     max_keys=K      the keys this node holds a share of at most; default
 *                     SL_SYNC_MAX_KEYS_DEFAULT (a new key beyond is refused)
 */
#ifndef SL_BACKEND_SYNC_H
#define SL_BACKEND_SYNC_H

#include <stddef.h>

#include "backend/backend.h"
#include "backend/redis.h"

#define SL_SYNC_INTERVAL_MS_DEFAULT 100
#define SL_SYNC_INTERVAL_MS_MAX 60000
#define SL_SYNC_MAX_KEYS_DEFAULT 1000000
#define SL_SYNC_MAX_KEYS_MAX 100000000

/*
 * Builds the sync backend from *cfg (its url is sync+...; the rest of cfg
 * is the redis backend's, which this one wraps and owns). Returns SL_OK
 * with *out set, or SL_ERR_ARGUMENT / SL_ERR_NOMEM with a message naming
 * what is wrong in err (n bytes).
 */
int sl_backend_sync(const sl_redis_config *cfg, sl_backend **out, char *err, size_t n);

#endif /* SL_BACKEND_SYNC_H */
