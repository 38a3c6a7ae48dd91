/*
 * module.h: what the two halves of sluice-redis.so share. module.c loads the
 * module, registers the command table and replies; keys.c is the executor
 * that keeps each key's state in a Redis string value.
 */
#ifndef SLM_MODULE_H
#define SLM_MODULE_H

#include <stdbool.h>
#include <stdint.h>

#include "cmd/cmd.h"
#include "redis_module/module_api.h"

/*
 * One command call: the executor's context (sl_cmd_ctx.ex) and the reply
 * sink's (sl_cmd_ctx.sink). Lives on the stack of the command callback.
 */
typedef struct slm_call {
    RedisModuleCtx *ctx;
    RedisModuleString **argv; /* the command's arguments, to open keys by them */
    int argc;
    int64_t now;              /* Unix time in ns, read once per command */
} slm_call;

/* The backend over Redis keys (keys.c): its worker handle is the
 * command's slm_call. */
extern const sl_backend slm_backend;

/* What the executor keeps from load to unload (the strings its replicated
 * effects share): slm_keys_init returns REDISMODULE_OK, or REDISMODULE_ERR
 * when it cannot be made; slm_keys_free releases it. */
int slm_keys_init(RedisModuleCtx *ctx);
void slm_keys_free(RedisModuleCtx *ctx);

/* The value layout (docs/module.md): a 4-byte header, then the state. */
#define SLM_MAGIC 0xF1u   /* not ASCII: no text or integer value starts so */
#define SLM_VERSION 1u    /* refuse any other: written by another sluice */
#define SLM_HEADER 4u     /* magic, version, algorithm, reserved (0) */

/* Byte 2 of a sync record (SL.SYNC's value, sync.c) in place of the
 * algorithm: no sl_algorithm comes near it, so no other command reads a
 * sync record as a state of its own, and SL.SYNC reads nothing else. */
#define SLM_SYNC_TAG 0xFEu

/* The reply to a key that holds something a command cannot read (another
 * type, a string of the application's, another command's state). */
#define SLM_WRONGTYPE "WRONGTYPE Operation against a key holding the wrong kind of value"

/* SL.SYNC key algorithm limit ... (sync.c), run on the command's call m:
 * parses, syncs the key's record at m->now (or at AT) and replies. */
void slm_sync(slm_call *m);

/*
 * Stores the `len` bytes at v (a whole value, header included) as the value
 * of key k, opened for writing under `name`, expiring at expires_ns (Unix
 * ns, rounded up to a millisecond), and replicates the effect as every
 * write of keys.c does: SET name <bytes> PXAT <ms>. An expiry in the past
 * is written all the same (Redis then drops the key). The caller has
 * checked that k is empty or a string. Returns REDISMODULE_OK, or
 * REDISMODULE_ERR when the value cannot be written (nothing replicated).
 */
int slm_put_value(slm_call *m, RedisModuleKey *k, RedisModuleString *name, const void *v,
                  size_t len, int64_t expires_ns);

#endif /* SLM_MODULE_H */
