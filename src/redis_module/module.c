/*
 * module.c: sluice-redis.so, the rate limiting commands as native Redis and
 * Valkey commands (docs/module.md).
 *
 * The commands are src/cmd's table, sl_rate_commands, registered one by one
 * with their names, key positions and flags: nothing about a command is
 * written here. This file adds what Redis needs around them: the API
 * functions fetched at load, the reply sink (RedisModule_ReplyWith*, which
 * answers maps to RESP3 clients and flat arrays to RESP2 ones), and the one
 * clock read per command. keys.c is the executor over Redis keys.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/clock.h"
#include "common/parse.h"
#include "policy/config.h"
#include "redis_module/module.h"

#define SLM_API_DEFINE(ret, name, params) ret(*RedisModule_##name) params;
SLM_API_LIST(SLM_API_DEFINE)
#undef SLM_API_DEFINE

int slm_init_api(RedisModuleCtx *ctx, const char *name, int version)
{
    /* Redis passes GetApi as the first word of the load context. */
    int (*get_api)(const char *name, void *out);
    void *first = ((void **)ctx)[0];
    memcpy(&get_api, &first, sizeof get_api);
#define SLM_API_FETCH(ret, fn, params)                                                            \
    if (get_api("RedisModule_" #fn, (void *)&RedisModule_##fn) != REDISMODULE_OK)                \
        return REDISMODULE_ERR;
    SLM_API_LIST(SLM_API_FETCH)
#undef SLM_API_FETCH
    if (RedisModule_IsModuleNameBusy(name))
        return REDISMODULE_ERR;
    RedisModule_SetModuleAttribs(ctx, name, version, REDISMODULE_APIVER_1);
    return REDISMODULE_OK;
}

/* ---- module state: Redis runs commands on one thread ---- */

static uint64_t slm_lease_key[2];  /* drawn at load: lease ids are unguessable */
/* Adaptive concurrency limits (SL.ACQUIRE ... ADAPTIVE): in the module's
 * memory, not in keys. Redis runs a key's commands on the one node that
 * owns it, so each key's estimate sees every release; they are not
 * replicated or persisted (a restart or failover learns them again). */
#define SLM_ADAPTIVE_KEYS 65536
static sl_limiters *slm_limiters;
static sl_limit_cache slm_limits;  /* prepared limits, as each sluiced worker keeps */
static sl_config *slm_config;      /* CONFIG path: the policies of SL.POLICY; NULL = none */

/* ---- the reply sink ---- */

#define SLM_CTX(s) (((slm_call *)(s))->ctx)

static void sk_integer(void *s, int64_t v)
{
    RedisModule_ReplyWithLongLong(SLM_CTX(s), (long long)v);
}

static void sk_bulk(void *s, const char *p, size_t len)
{
    RedisModule_ReplyWithStringBuffer(SLM_CTX(s), p, len);
}

static void sk_simple(void *s, const char *str)
{
    RedisModule_ReplyWithSimpleString(SLM_CTX(s), str);
}

static void sk_null(void *s)
{
    RedisModule_ReplyWithNull(SLM_CTX(s));
}

static void sk_array(void *s, size_t n)
{
    RedisModule_ReplyWithArray(SLM_CTX(s), (long)n);
}

static void sk_integers(void *s, const int64_t *v, size_t n)
{
    RedisModule_ReplyWithArray(SLM_CTX(s), (long)n);
    for (size_t i = 0; i < n; i++)
        RedisModule_ReplyWithLongLong(SLM_CTX(s), (long long)v[i]);
}

/* Redis 7 sends a map to RESP3 clients and an array of 2n items to RESP2
 * ones, exactly the shape cmd.h asks of map(). */
static void sk_map(void *s, size_t n)
{
    RedisModule_ReplyWithMap(SLM_CTX(s), (long)n);
}

static void sk_error(void *s, const char *msg)
{
    RedisModule_ReplyWithError(SLM_CTX(s), msg);
}

static const sl_reply_ops slm_sink = {
    .integer = sk_integer, .bulk = sk_bulk,         .simple = sk_simple, .null = sk_null,
    .array = sk_array,     .integers = sk_integers, .map = sk_map,       .error = sk_error,
};

/* ---- the clock ---- */

/*
 * Unix time in nanoseconds, read once per command. The wall clock, not a
 * monotonic one: states are stored in keys that outlive the process (RDB,
 * AOF) and move to replicas, so their times must mean the same on every
 * server and after a restart; and Redis expires keys on this same clock.
 * A clock stepped back only makes a limit stricter for a while. Since now
 * is Unix time, the limit cache's clock offset stays 0 (slm_limits is
 * zeroed): windows fall on the wall clock as sluiced's do, which aligns
 * its monotonic clock through the offset it measured at start.
 */
static int64_t slm_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    return ns < 0 ? 0 : ns > SL_TIME_MAX ? SL_TIME_MAX : ns;
}

static int64_t slm_now_mono(sl_cmd_ctx *c)
{
    (void)c;
    return sl_now_mono();
}

/* ---- running a command ---- */

/* The most arguments converted to slices on the stack; more are allocated. */
#define SLM_STACK_ARGS 32

/*
 * A policy's plans from a Redis hash (plans: redis:NAME), read here in the
 * module's own keyspace: HGET NAME key, the value a tier's name. Returns the
 * tier's index, -1 when the hash, the field or the tier is not there (the
 * default tier), -2 when NAME holds another type. The module runs outside a
 * cluster only (CONFIG is refused in one), so the hash is on this node.
 */
static int slm_plan_tier(sl_cmd_ctx *c, const sl_policy *p, const char *key, size_t len)
{
    slm_call *m = c->face;
    RedisModuleString *name = RedisModule_CreateString(m->ctx, p->plans_redis,
                                                       strlen(p->plans_redis));
    RedisModuleKey *h = RedisModule_OpenKey(m->ctx, name, REDISMODULE_READ);
    int tier = -1;
    if (h && RedisModule_KeyType(h) != REDISMODULE_KEYTYPE_EMPTY) {
        if (RedisModule_KeyType(h) != REDISMODULE_KEYTYPE_HASH) {
            tier = -2;
        } else {
            RedisModuleString *field = RedisModule_CreateString(m->ctx, key, len);
            RedisModuleString *value = NULL;
            RedisModule_HashGet(h, REDISMODULE_HASH_NONE, field, &value, NULL);
            if (value) {
                size_t vlen;
                const char *v = RedisModule_StringPtrLen(value, &vlen);
                for (size_t t = 0; t < p->ntiers && tier < 0; t++)
                    if (strlen(p->tiers[t].name) == vlen && memcmp(p->tiers[t].name, v, vlen) == 0)
                        tier = (int)t;
                RedisModule_FreeString(m->ctx, value);
            }
            RedisModule_FreeString(m->ctx, field);
        }
    }
    if (h)
        RedisModule_CloseKey(h);
    RedisModule_FreeString(m->ctx, name);
    return tier;
}

static void slm_run(const sl_command *cmd, RedisModuleCtx *ctx, RedisModuleString **argv,
                    int argc)
{
    sl_resp_slice stack[SLM_STACK_ARGS];
    sl_resp_slice *slices = argc <= SLM_STACK_ARGS
                                ? stack
                                : RedisModule_Alloc(sizeof *slices * (size_t)argc);
    for (int i = 0; i < argc; i++) {
        size_t len;
        slices[i].ptr = RedisModule_StringPtrLen(argv[i], &len);
        slices[i].len = len;
    }
    slm_call m = {.ctx = ctx, .argv = argv, .argc = argc, .now = slm_now()};
    sl_cmd_ctx c = {
        .reply = &slm_sink,
        .sink = &m,
        .be = &slm_backend,
        .bw = (sl_backend_worker *)&m,
        .lease_key = slm_lease_key,
        .limit_cache = &slm_limits,
        .config = slm_config, /* NULL without CONFIG: SL.POLICY answers unknown policy */
        .face = &m,
        .plan_tier = slm_plan_tier,
        .limiters = slm_limiters,
        .now_mono = slm_now_mono,
    };
    sl_command_call(cmd, &c, argc, slices);
    if (slices != stack)
        RedisModule_Free(slices);
}

/* A whole decimal, for numkeys (the command itself replies to bad ones). */
static bool slm_parse_count(RedisModuleString *s, int64_t *out)
{
    size_t len;
    const char *p = RedisModule_StringPtrLen(s, &len);
    return sl_parse_i64(p, len, SL_INT_NO_SIGN, out);
}

/*
 * Commands whose keys are counted by an argument (SL.TAKEMANY numkeys
 * key...): Redis's first/last/step triple cannot describe them, so they
 * tell Redis their keys through the getkeys API, which Redis Cluster uses to
 * route them and to refuse keys of several slots (CROSSSLOT). Returns the
 * position of numkeys, or 0 for a command whose table triple is exact.
 */
static int slm_numkeys_at(const sl_command *cmd)
{
    return cmd->numkeys_at;
}

static void slm_key_positions(const sl_command *cmd, RedisModuleCtx *ctx,
                              RedisModuleString **argv, int argc)
{
    int at = slm_numkeys_at(cmd);
    int64_t n;
    if (at <= 0 || at >= argc || !slm_parse_count(argv[at], &n))
        return;
    for (int64_t i = 0; i < n && at + 1 + i < argc; i++)
        RedisModule_KeyAtPos(ctx, (int)(at + 1 + i));
}

/*
 * One Redis callback per entry of the table (Redis does not tell a callback
 * which command it was registered as, and a renamed command's argv[0] is not
 * its name): slm_cmd_<i> runs sl_rate_commands[i].
 */
#define SLM_MAX_COMMANDS 16

#define SLM_CALLBACK(i)                                                                           \
    static int slm_cmd_##i(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)              \
    {                                                                                             \
        if (RedisModule_IsKeysPositionRequest(ctx))                                               \
            slm_key_positions(&sl_rate_commands[i], ctx, argv, argc);                             \
        else                                                                                      \
            slm_run(&sl_rate_commands[i], ctx, argv, argc);                                       \
        return REDISMODULE_OK;                                                                    \
    }
SLM_CALLBACK(0)
SLM_CALLBACK(1)
SLM_CALLBACK(2)
SLM_CALLBACK(3)
SLM_CALLBACK(4)
SLM_CALLBACK(5)
SLM_CALLBACK(6)
SLM_CALLBACK(7)
SLM_CALLBACK(8)
SLM_CALLBACK(9)
SLM_CALLBACK(10)
SLM_CALLBACK(11)
SLM_CALLBACK(12)
SLM_CALLBACK(13)
SLM_CALLBACK(14)
SLM_CALLBACK(15)

static const RedisModuleCmdFunc slm_callbacks[SLM_MAX_COMMANDS] = {
    slm_cmd_0, slm_cmd_1, slm_cmd_2,  slm_cmd_3,  slm_cmd_4,  slm_cmd_5,  slm_cmd_6,  slm_cmd_7,
    slm_cmd_8, slm_cmd_9, slm_cmd_10, slm_cmd_11, slm_cmd_12, slm_cmd_13, slm_cmd_14, slm_cmd_15,
};

/* SL.SYNC (sync.c), the sync strategy's central command: sluiced's nodes
 * send it and sluiced does not serve it, so it is the module's own, not an
 * entry of the shared table. It reads the clock once, as every command. */
static int slm_cmd_sync(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    slm_call m = {.ctx = ctx, .argv = argv, .argc = argc, .now = slm_now()};
    slm_sync(&m);
    return REDISMODULE_OK;
}

/* SL.TOP is sluiced's (its top keys are counted where sluiced decides):
 * the module answers that, rather than Redis's "unknown command", so that a
 * client pointed at the module learns why. Redis's own view of its hot keys
 * is redis-cli --hotkeys. */
static int slm_cmd_top(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    RedisModule_ReplyWithError(ctx, "ERR SL.TOP is sluiced's: the module keeps no top keys "
                                    "(docs/module.md; redis-cli --hotkeys for Redis's own)");
    return REDISMODULE_OK;
}

/* ---- loading ---- */

/*
 * Module arguments: nothing, or CONFIG <path> (the YAML file of
 * docs/configuration.md: SL.POLICY's policies, loaded once; a new file needs
 * MODULE UNLOAD and MODULE LOAD). Anything else refuses the load, so that a
 * typo is not silently ignored. Returns REDISMODULE_OK or logs why not.
 */
static int slm_parse_args(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    for (int i = 0; i < argc; i += 2) {
        size_t len, vlen;
        const char *opt = RedisModule_StringPtrLen(argv[i], &len);
        if (len != 6 || strncasecmp(opt, "CONFIG", 6) != 0 || i + 1 >= argc) {
            RedisModule_Log(ctx, "warning", "sluice: unknown module arguments: use CONFIG <path> "
                                            "or nothing");
            return REDISMODULE_ERR;
        }
        /* A policy's keys come from its template and its global limit, not from
         * the command's arguments: Redis Cluster could not route them. */
        if (RedisModule_GetContextFlags(ctx) & REDISMODULE_CTX_FLAGS_CLUSTER) {
            RedisModule_Log(ctx, "warning", "sluice: CONFIG (SL.POLICY) is not supported in Redis "
                                            "Cluster: a policy's keys are not the command's keys");
            return REDISMODULE_ERR;
        }
        const char *val = RedisModule_StringPtrLen(argv[i + 1], &vlen);
        char path[4096], err[512];
        if (vlen == 0 || vlen >= sizeof path) {
            RedisModule_Log(ctx, "warning", "sluice: CONFIG needs a path");
            return REDISMODULE_ERR;
        }
        memcpy(path, val, vlen);
        path[vlen] = '\0';
        sl_config *cfg;
        if (sl_config_load(path, &cfg, err, sizeof err) != 0) {
            RedisModule_Log(ctx, "warning", "sluice: %s", err);
            return REDISMODULE_ERR;
        }
        sl_config_free(slm_config);
        slm_config = cfg;
    }
    return REDISMODULE_OK;
}

int RedisModule_OnUnload(RedisModuleCtx *ctx)
{
    sl_config_free(slm_config);
    slm_config = NULL;
    sl_limiters_free(slm_limiters);
    slm_limiters = NULL;
    slm_keys_free(ctx);
    return REDISMODULE_OK;
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (slm_init_api(ctx, "sluice", 1) != REDISMODULE_OK)
        return REDISMODULE_ERR;
    if (slm_parse_args(ctx, argv, argc) != REDISMODULE_OK) {
        sl_config_free(slm_config);
        slm_config = NULL;
        return REDISMODULE_ERR;
    }
    RedisModule_GetRandomBytes((unsigned char *)slm_lease_key, sizeof slm_lease_key);
    slm_limiters = sl_limiters_new(SLM_ADAPTIVE_KEYS, 65535 + SL_POLICY_NAME_MAX + 1);
    if (!slm_limiters) {
        sl_config_free(slm_config);
        slm_config = NULL;
        return REDISMODULE_ERR;
    }
    if (slm_keys_init(ctx) != REDISMODULE_OK) {
        sl_config_free(slm_config);
        slm_config = NULL;
        return REDISMODULE_ERR;
    }
    int i = 0;
    for (const sl_command *cmd = sl_rate_commands; cmd->name[0]; cmd++, i++) {
        if (i >= SLM_MAX_COMMANDS) {
            RedisModule_Log(ctx, "warning", "sluice: more commands than SLM_MAX_COMMANDS");
            return REDISMODULE_ERR;
        }
        const char *flags = (cmd->flags & SL_CMD_WRITE) ? "write deny-oom fast" : "readonly fast";
        int first = cmd->first_key, last = cmd->last_key, step = cmd->key_step;
        char movable[64];
        if (slm_numkeys_at(cmd) > 0) {
            snprintf(movable, sizeof movable, "%s getkeys-api", flags);
            flags = movable;
            first = last = step = 0;
        }
        if (RedisModule_CreateCommand(ctx, cmd->name, slm_callbacks[i], flags, first, last,
                                      step) != REDISMODULE_OK) {
            RedisModule_Log(ctx, "warning", "sluice: cannot register %s", cmd->name);
            return REDISMODULE_ERR;
        }
    }
    /* Its one key is argument 1: Redis Cluster routes it by that key. */
    if (RedisModule_CreateCommand(ctx, "sl.sync", slm_cmd_sync, "write deny-oom fast", 1, 1, 1) !=
        REDISMODULE_OK) {
        RedisModule_Log(ctx, "warning", "sluice: cannot register sl.sync");
        return REDISMODULE_ERR;
    }
    if (RedisModule_CreateCommand(ctx, "sl.top", slm_cmd_top, "readonly fast", 0, 0, 0) !=
        REDISMODULE_OK) {
        RedisModule_Log(ctx, "warning", "sluice: cannot register sl.top");
        return REDISMODULE_ERR;
    }
    return REDISMODULE_OK;
}
