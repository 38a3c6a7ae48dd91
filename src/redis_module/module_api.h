/*
 * module_api.h: the part of the Redis module API that sluice-redis.so uses,
 * declared from the documented API reference (Debian ships no redismodule.h,
 * and sluice copies no other project's source).
 *
 * The ABI of a Redis module is a set of *names*: at load, Redis passes the
 * module a context whose first word is a lookup function, GetApi, and the
 * module asks it for each function it needs by its documented name
 * ("RedisModule_OpenKey", ...). The signatures and constants below are that
 * contract; the tests check every one of them against the real server.
 *
 * SLM_API_LIST is the single list of those functions: it declares the
 * function pointers here, defines them once in module.c, and fetches them at
 * load in slm_init_api(), so a function is named in one place only.
 */
#ifndef SLM_MODULE_API_H
#define SLM_MODULE_API_H

#include <stddef.h>
#include <stdint.h>

/* Opaque types: the module only ever holds pointers to them. */
typedef struct RedisModuleCtx RedisModuleCtx;
typedef struct RedisModuleKey RedisModuleKey;
typedef struct RedisModuleString RedisModuleString;

/* A command's implementation: argv[0] is the command name as sent. */
typedef int (*RedisModuleCmdFunc)(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

/* Return codes of most API functions and of the callbacks. */
#define REDISMODULE_OK 0
#define REDISMODULE_ERR 1

/* The only API version there is. */
#define REDISMODULE_APIVER_1 1

/* OpenKey modes. A key opened READ only is NULL when it does not exist. */
#define REDISMODULE_READ (1 << 0)
#define REDISMODULE_WRITE (1 << 1)

/* KeyType results (only the ones sluice tells apart). */
#define REDISMODULE_KEYTYPE_EMPTY 0
#define REDISMODULE_KEYTYPE_STRING 1
#define REDISMODULE_KEYTYPE_HASH 3

/* HashGet flags: the fields are RedisModuleStrings. */
#define REDISMODULE_HASH_NONE 0

/* GetContextFlags bits (only the one sluice reads). */
#define REDISMODULE_CTX_FLAGS_CLUSTER (1 << 5)

/*
 * X(return type, name without the RedisModule_ prefix, parameter list).
 * Variadic parameter lists work: the parentheses keep their commas together.
 */
#define SLM_API_LIST(X)                                                                           \
    X(void, SetModuleAttribs, (RedisModuleCtx * ctx, const char *name, int ver, int apiver))      \
    X(int, IsModuleNameBusy, (const char *name))                                                  \
    X(int, CreateCommand,                                                                         \
      (RedisModuleCtx * ctx, const char *name, RedisModuleCmdFunc fn, const char *strflags,      \
       int firstkey, int lastkey, int keystep))                                                   \
    X(int, IsKeysPositionRequest, (RedisModuleCtx * ctx))                                         \
    X(void, KeyAtPos, (RedisModuleCtx * ctx, int pos))                                            \
    X(const char *, StringPtrLen, (const RedisModuleString *str, size_t *len))                    \
    X(RedisModuleString *, CreateString, (RedisModuleCtx * ctx, const char *ptr, size_t len))     \
    X(void, FreeString, (RedisModuleCtx * ctx, RedisModuleString * str))                          \
    X(RedisModuleKey *, OpenKey, (RedisModuleCtx * ctx, RedisModuleString * name, int mode))      \
    X(void, CloseKey, (RedisModuleKey * key))                                                     \
    X(int, KeyType, (RedisModuleKey * key))                                                       \
    X(int, HashGet, (RedisModuleKey * key, int flags, ...))                                       \
    X(char *, StringDMA, (RedisModuleKey * key, size_t *len, int mode))                           \
    X(int, StringTruncate, (RedisModuleKey * key, size_t newlen))                                 \
    X(int, DeleteKey, (RedisModuleKey * key))                                                     \
    X(int, SetAbsExpire, (RedisModuleKey * key, long long unix_ms))                               \
    X(int, Replicate, (RedisModuleCtx * ctx, const char *cmdname, const char *fmt, ...))          \
    X(int, ReplyWithLongLong, (RedisModuleCtx * ctx, long long v))                                \
    X(int, ReplyWithStringBuffer, (RedisModuleCtx * ctx, const char *buf, size_t len))            \
    X(int, ReplyWithSimpleString, (RedisModuleCtx * ctx, const char *msg))                        \
    X(int, ReplyWithError, (RedisModuleCtx * ctx, const char *err))                               \
    X(int, ReplyWithNull, (RedisModuleCtx * ctx))                                                 \
    X(int, ReplyWithArray, (RedisModuleCtx * ctx, long len))                                      \
    X(int, ReplyWithMap, (RedisModuleCtx * ctx, long len))                                        \
    X(void *, Alloc, (size_t bytes))                                                              \
    X(void, Free, (void *ptr))                                                                    \
    X(void, GetRandomBytes, (unsigned char *dst, size_t len))                                     \
    X(int, GetContextFlags, (RedisModuleCtx * ctx))                                               \
    X(void, Log, (RedisModuleCtx * ctx, const char *level, const char *fmt, ...))

/* The function pointers, filled by slm_init_api (defined in module.c). */
#define SLM_API_DECLARE(ret, name, params) extern ret(*RedisModule_##name) params;
SLM_API_LIST(SLM_API_DECLARE)
#undef SLM_API_DECLARE

/*
 * Fetches every function of SLM_API_LIST from the server and registers the
 * module under `name`. Returns REDISMODULE_OK, or REDISMODULE_ERR when the
 * server lacks a function (an older Redis) or the name is taken.
 */
int slm_init_api(RedisModuleCtx *ctx, const char *name, int version);

/* The entry points Redis looks up after dlopen (the only exported symbols):
 * OnLoad registers the commands, OnUnload (MODULE UNLOAD) frees what OnLoad
 * allocated. */
__attribute__((visibility("default"))) int RedisModule_OnLoad(RedisModuleCtx *ctx,
                                                           RedisModuleString **argv, int argc);
__attribute__((visibility("default"))) int RedisModule_OnUnload(RedisModuleCtx *ctx);

#endif /* SLM_MODULE_API_H */
