/*
 * plans_redis.h: the plans of policies that name a Redis hash
 * (plans: redis:NAME), read from the central store (--store redis://,
 * redis-cluster://, sync+redis://...) into the same table a plans file
 * loads into (src/policy/plans.h).
 *
 * The hash is read with HSCAN ... COUNT 1000, so that a hash of a million
 * fields never holds Redis for long; in a cluster, from the primary that
 * owns its slot (MOVED and ASK are followed). Field = key, value = tier
 * name; a value that names no tier of the policy, or a field of more than
 * SL_PLAN_KEY_MAX bytes, is counted and logged once per read, and its key
 * gets the default tier.
 *
 * At start every hash is read before the ports serve; a hash that cannot be
 * read is logged loudly and its policy starts with every key on the default
 * tier (a rate limiter that refuses to start because of its plans would
 * take the service down with it). Then each is read again every refresh
 * interval on libuv's thread pool, one read at a time, and its new table
 * swapped in atomically: workers keep reading the old one until they have
 * all moved to the next config epoch, and only then is it freed. A read
 * that fails keeps the table in force and is counted (INFO's plans
 * section, /metrics' sluice_plans_*).
 *
 * All of these run on the main thread, but the INFO and metrics writers,
 * which any worker may call.
 */
#ifndef SL_SERVER_PLANS_REDIS_H
#define SL_SERVER_PLANS_REDIS_H

#include <stdbool.h>
#include <stddef.h>

#include <uv.h>

#include "common/buf.h"

struct sl_server;
struct sl_config;

/* Whether a config's hash plans can be read with the server's store:
 * true, or false with err (n bytes) naming the first policy that names a
 * hash while the store is not Redis. */
bool sl_plans_redis_allowed(const struct sl_server *srv, const struct sl_config *c, char *err,
                            size_t n);

/* Reads every hash of the config in force now (blocking: before the
 * workers serve), and starts the refresh timer on loop. */
void sl_plans_redis_start(struct sl_server *srv, uv_loop_t *loop);

/* Before a reload puts `next` in force: gives each of next's hash policies
 * the table its namesake in the config in force has (same hash; tiers
 * matched by name), so that no key drops to the default tier while the
 * hash is read again, and schedules the reads of what is new. */
void sl_plans_redis_reload(struct sl_server *srv, struct sl_config *next);

/* At shutdown: stops the timer, waits for a read under way and frees the
 * tables retired meanwhile. */
void sl_plans_redis_stop(struct sl_server *srv);

/* INFO's plans section's lines ("plans_policies:1\r\n..."): the bytes
 * written into buf (cap bytes, cut to fit), 0 when no policy has hash
 * plans. */
size_t sl_plans_redis_info(char *buf, size_t cap);

/* The sluice_plans_* metrics, in Prometheus text. */
void sl_plans_redis_metrics(sl_buf *out);

#endif
