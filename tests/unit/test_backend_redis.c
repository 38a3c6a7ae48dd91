/*
 * The redis backend's pure parts: Redis Cluster's hash slots (CRC16 with
 * hash tags, against the values the Cluster specification and CLUSTER
 * KEYSLOT give), the --store URL's errors, the names of what decided.
 * The backend against a real Redis is tests/backend's.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "backend/redis.h"

static int slot(const char *k)
{
    return sl_slot_of(k, strlen(k));
}

Test(slot, specification_values)
{
    /* The specification's CRC16 check value: 0x31C3 for "123456789". */
    cr_assert_eq(slot("123456789"), 0x31C3);
    /* CLUSTER KEYSLOT's documented answers. */
    cr_assert_eq(slot("somekey"), 11058);
    cr_assert_eq(slot("foo{hash_tag}"), 2515);
    cr_assert_eq(slot("bar{hash_tag}"), 2515);
}

Test(slot, hash_tags)
{
    cr_assert_eq(slot("{user1000}.following"), slot("{user1000}.followers"));
    cr_assert_eq(slot("{user1000}.following"), slot("user1000"));
    /* The first '{' and the first '}' after it; an empty tag hashes the whole key. */
    cr_assert_eq(slot("foo{}{bar}"), slot("foo{}{bar}"));
    cr_assert_neq(slot("foo{}{bar}"), slot("bar"));
    cr_assert_eq(slot("foo{{bar}}zap"), slot("{bar"));
    cr_assert_eq(slot("foo{bar}{zap}"), slot("bar"));
    cr_assert_eq(slot("no{close"), sl_slot_of("no{close", 8));
    /* Bytes, not strings: a NUL inside a key counts. */
    cr_assert_neq(sl_slot_of("a\0b", 3), sl_slot_of("a", 1));
    for (int i = 0; i < 1000; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        int s = slot(k);
        cr_assert(s >= 0 && s < 16384);
    }
}

static char err[256];

static const char *refused(const char *url)
{
    sl_redis_config cfg = {.url = url};
    sl_backend *b = (sl_backend *)1;
    cr_assert_eq(sl_backend_redis(&cfg, &b, err, sizeof err), SL_ERR_ARGUMENT, "accepted: %s", url);
    cr_assert_null(b);
    return err;
}

static void accepted(const char *url)
{
    sl_redis_config cfg = {.url = url};
    sl_backend *b = NULL;
    cr_assert_eq(sl_backend_redis(&cfg, &b, err, sizeof err), SL_OK, "%s: %s", url, err);
    cr_assert(b->defers);
    cr_assert_str_eq(b->ops->name, "redis");
    b->ops->free(b);
}

Test(url, accepted)
{
    accepted("redis://127.0.0.1:6379");
    accepted("redis://localhost:1/15");
    accepted("redis://:pass@127.0.0.1:6379");
    accepted("redis://user:p%40ss@127.0.0.1:6379/2");
    accepted("redis://127.0.0.1:6379?password=x&user=y");
    accepted("redis://[::1]:6379/0");
}

Test(url, refused_with_what_is_wrong)
{
    cr_assert(strstr(refused("memcached://h:1"), "scheme is redis:// or redis-cluster://"));
    cr_assert(strstr(refused("redis://h"), "host 'h' has no port"));
    cr_assert(strstr(refused("redis://h:0"), "port '0' is not a number between 1 and 65535"));
    cr_assert(strstr(refused("redis://h:65536"), "port '65536'"));
    cr_assert(strstr(refused("redis://h:12ab"), "port '12ab'"));
    cr_assert(strstr(refused("redis://:1"), "a host is empty"));
    cr_assert(strstr(refused("redis://"), "no host:port"));
    cr_assert(strstr(refused("redis://h:1/x"), "database 'x' is not a number"));
    cr_assert(strstr(refused("redis://h:1/99999999999"), "database"));
    cr_assert(strstr(refused("redis://u@h:1"), "the user has no password"));
    cr_assert(strstr(refused("redis://h:1?user=u"), "the user has no password"));
    cr_assert(strstr(refused("redis://h:1?db=2"), "unknown parameter 'db'"));
    cr_assert(strstr(refused("redis://h:1?password"), "unknown parameter 'password'"));
    cr_assert(strstr(refused("redis://:p%4@h:1"), "bad %-escape"));
    cr_assert(strstr(refused("redis://:p%00@h:1"), "bad %-escape"));
    cr_assert(strstr(refused("redis://a:1,b:2"), "redis:// takes one host:port"));
    cr_assert(strstr(refused("redis://[::1:6379"), "IPv6"));
    /* The password is never echoed. */
    cr_assert_null(strstr(refused("redis://u:topsecret@h:99999"), "topsecret"));
}

Test(url, config_ranges)
{
    sl_backend *b = NULL;
    sl_redis_config cfg = {.url = "redis://h:1", .timeout_ms = -1};
    cr_assert_eq(sl_backend_redis(&cfg, &b, err, sizeof err), SL_ERR_ARGUMENT);
    cr_assert(strstr(err, "timeout"));
    cfg = (sl_redis_config){.url = "redis://h:1", .local_memory = 1000};
    cr_assert_eq(sl_backend_redis(&cfg, &b, err, sizeof err), SL_ERR_ARGUMENT);
    cr_assert(strstr(err, "at least 256k"), "%s", err);
    cfg = (sl_redis_config){.url = NULL};
    cr_assert_eq(sl_backend_redis(&cfg, &b, err, sizeof err), SL_ERR_ARGUMENT);
}

Test(fallback, names)
{
    cr_assert_str_eq(sl_fallback_name(SL_DECIDED_FAIL_CLOSED), "fail_closed");
    cr_assert_str_eq(sl_fallback_name(SL_DECIDED_LOCAL), "local");
    cr_assert_str_eq(sl_fallback_name(SL_DECIDED_BY_STORE), "store");
}
