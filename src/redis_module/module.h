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

#endif /* SLM_MODULE_H */
