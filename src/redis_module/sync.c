/*
 * sync.c: SL.SYNC, the central half of the sync strategy (src/algo/quota.h)
 * as a command of sluice-redis.so (docs/commands.md, "SL.SYNC: the sync
 * strategy's central command"):
 *
 *     SL.SYNC key algorithm limit period_ns burst interval_ns nodes node
 *             admitted asked length_ns carry [AT unix_ns]
 *
 * Every interval, each node of a sluiced fleet reports for a key what it
 * admitted and was asked since its last sync, and gets a new lease of the
 * key's budget. The rules are sl_quota_sync's, run here on the key's record
 * at the server's clock; this file parses, reads the record, syncs, writes
 * it back and replies hold, rate and remaining.
 *
 * The record is a plain string in the module's framing (keys.c):
 *
 *     byte 0    SLM_MAGIC 0xF1
 *     byte 1    SLM_VERSION 1
 *     byte 2    SLM_SYNC_TAG 0xFE: no sl_algorithm, so that no other
 *               command reads a record as its state (keys.c refuses it)
 *     byte 3    0
 *     byte 4..  sl_quota_central, 680 bytes: its 85 int64 fields in the
 *               struct's order, little-endian, as libsluice keeps them
 *
 * A missing key is a zeroed record (never seen); any other value, a
 * module state of a limit among them, is WRONGTYPE and is left as it is.
 * The key expires when the record is as good as never seen (sync_expires_at)
 * and, as every write of the module, is replicated as its effect, SET key
 * <bytes> PXAT <ms>: a sync depends on the clock, a replica's is not the
 * primary's.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "algo/quota.h"
#include "common/arith.h"
#include "common/parse.h"
#include "redis_module/module.h"

/* The record is copied in and out whole: its layout is the struct's. */
_Static_assert(sizeof(sl_quota_central) == 85 * sizeof(int64_t),
               "sl_quota_central is 85 int64 fields without padding");

#define SYNC_VALUE_LEN (SLM_HEADER + sizeof(sl_quota_central))

/* The arguments after the algorithm, in the command's order, and the range
 * each must lie in. Two ranges depend on an argument before them: node's
 * top is nodes - 1, asked's bottom is admitted (sync_parse fills them). */
enum {
    SYNC_LIMIT,
    SYNC_PERIOD,
    SYNC_BURST,
    SYNC_INTERVAL,
    SYNC_NODES,
    SYNC_NODE,
    SYNC_ADMITTED,
    SYNC_ASKED,
    SYNC_LENGTH,
    SYNC_CARRY,
    SYNC_INTS
};

static const struct {
    const char *name;
    int64_t lo, hi;
} sync_ranges[SYNC_INTS] = {
    [SYNC_LIMIT] = {"limit", 1, SL_QUOTA_UNITS_MAX},
    [SYNC_PERIOD] = {"period_ns", 1, SL_SPAN_MAX},
    [SYNC_BURST] = {"burst", 0, SL_QUOTA_UNITS_MAX}, /* 0: the limit */
    [SYNC_INTERVAL] = {"interval_ns", 1, SL_SPAN_MAX},
    [SYNC_NODES] = {"nodes", 1, SL_QUOTA_NODES_MAX},
    [SYNC_NODE] = {"node", 0, 0},                       /* to nodes - 1 */
    [SYNC_ADMITTED] = {"admitted", 0, SL_QUOTA_UNITS_MAX},
    [SYNC_ASKED] = {"asked", 0, SL_QUOTA_UNITS_MAX},    /* from admitted */
    [SYNC_LENGTH] = {"length_ns", 0, SL_SPAN_MAX},
    [SYNC_CARRY] = {"carry", 0, SL_QUOTA_SCALE},
};

/* Argument positions: the key, the algorithm, the integers, then AT. */
#define SYNC_ARG_ALGORITHM 2
#define SYNC_ARG_INTS 3
#define SYNC_ARGC (SYNC_ARG_INTS + SYNC_INTS)

/* One parsed SL.SYNC. */
typedef struct sync_args {
    sl_algorithm algorithm;
    int64_t v[SYNC_INTS];
    int64_t now; /* AT's value, else the command's clock */
} sync_args;

static int sync_error(RedisModuleCtx *ctx, const char *msg)
{
    RedisModule_ReplyWithError(ctx, msg);
    return REDISMODULE_ERR;
}

/* Reads argument s as a decimal integer in [lo, hi]: true and *out set, or
 * false with the error naming it and its range replied. */
static bool sync_int(RedisModuleCtx *ctx, RedisModuleString *s, const char *name, int64_t lo,
                     int64_t hi, int64_t *out)
{
    size_t len;
    const char *p = RedisModule_StringPtrLen(s, &len);
    int64_t v;
    if (sl_parse_i64(p, len, SL_INT_MINUS, &v) && v >= lo && v <= hi) {
        *out = v;
        return true;
    }
    char msg[128];
    snprintf(msg, sizeof msg, "ERR %s must be an integer from %lld to %lld", name, (long long)lo,
             (long long)hi);
    sync_error(ctx, msg);
    return false;
}

/*
 * Parses the arguments in their order, so that the first bad one is the one
 * named. Returns REDISMODULE_OK, or REDISMODULE_ERR with the error replied.
 */
static int sync_parse(slm_call *m, sync_args *a)
{
    RedisModuleString **argv = m->argv;
    if (m->argc < SYNC_ARGC)
        return sync_error(m->ctx, "ERR wrong number of arguments for 'sl.sync' command");
    size_t len;
    const char *name = RedisModule_StringPtrLen(argv[SYNC_ARG_ALGORITHM], &len);
    if (sl_algorithm_parse(name, len, &a->algorithm) != SL_OK)
        return sync_error(m->ctx, "ERR unknown algorithm");
    if (a->algorithm != SL_GCRA && a->algorithm != SL_TOKEN_BUCKET &&
        a->algorithm != SL_LEAKY_BUCKET)
        return sync_error(m->ctx, "ERR sync leases rates only: gcra, token_bucket or leaky_bucket");
    for (int i = 0; i < SYNC_INTS; i++) {
        int64_t lo = sync_ranges[i].lo, hi = sync_ranges[i].hi;
        if (i == SYNC_NODE)
            hi = a->v[SYNC_NODES] - 1;
        else if (i == SYNC_ASKED)
            lo = a->v[SYNC_ADMITTED];
        if (!sync_int(m->ctx, argv[SYNC_ARG_INTS + i], sync_ranges[i].name, lo, hi, &a->v[i]))
            return REDISMODULE_ERR;
    }
    a->now = m->now;
    if (m->argc == SYNC_ARGC)
        return REDISMODULE_OK;
    const char *kw = RedisModule_StringPtrLen(argv[SYNC_ARGC], &len);
    if (m->argc != SYNC_ARGC + 2 || len != 2 || strncasecmp(kw, "AT", 2) != 0)
        return sync_error(m->ctx, "ERR syntax error");
    return sync_int(m->ctx, argv[SYNC_ARGC + 1], "AT", 0, SL_TIME_MAX, &a->now) ? REDISMODULE_OK
                                                                                : REDISMODULE_ERR;
}

/*
 * The moment record *s is as good as never seen: every lease it gave has
 * ended (synced_at + lease_ns of each slot with a demand), and its budget
 * is back at the brim, at the first nanosecond from `anchor` whose refill,
 * counted with the remainder `frac` already accrued, covers what is
 * missing: ceil((missing * period_ns - frac) / rate), as sl_quota_sync's
 * refill would reach it. Saturated at SL_TIME_MAX. *s is a state that
 * sl_quota_sync wrote under *c, so every field lies in its range.
 */
static int64_t sync_expires_at(const sl_quota_config *c, const sl_quota_central *s)
{
    int64_t at = 0;
    for (int j = 0; j < SL_QUOTA_NODES_MAX; j++) {
        const sl_quota_slot *o = &s->node[j];
        if (o->demand > 0)
            at = sl_max64(at, sl_add_clamp(o->synced_at, c->lease_ns, SL_TIME_MAX));
    }
    if (s->remaining < c->burst) {
        /* missing <= 2^60 + 2^61 (the burst and the deepest debt), times
         * period_ns < 2^61: the product fits in 128 bits; frac < period_ns
         * <= missing * period_ns. */
        sl_u128 missing = (uint64_t)(c->burst - s->remaining);
        sl_u128 num = missing * (uint64_t)c->period_ns - (uint64_t)s->frac;
        sl_u128 dt = num / (uint64_t)c->rate + (num % (uint64_t)c->rate != 0);
        int64_t full = dt > (sl_u128)SL_TIME_MAX ? SL_TIME_MAX
                                                 : sl_add_clamp(s->anchor, (int64_t)dt,
                                                                SL_TIME_MAX);
        at = sl_max64(at, full);
    }
    return at;
}

/*
 * Reads the key's record into *s: zeroed when the key is empty. Returns
 * REDISMODULE_OK, or REDISMODULE_ERR with WRONGTYPE replied for any value
 * that is not a sync record of this module's (another length or tag, a
 * module state of a limit, a client's string, another type).
 */
static int sync_read(slm_call *m, RedisModuleKey *k, sl_quota_central *s)
{
    memset(s, 0, sizeof *s);
    int type = RedisModule_KeyType(k);
    if (type == REDISMODULE_KEYTYPE_EMPTY)
        return REDISMODULE_OK;
    size_t n = 0;
    const unsigned char *v = NULL;
    if (type == REDISMODULE_KEYTYPE_STRING)
        v = (const unsigned char *)RedisModule_StringDMA(k, &n, REDISMODULE_READ);
    if (!v || n != SYNC_VALUE_LEN || v[0] != SLM_MAGIC || v[1] != SLM_VERSION ||
        v[2] != SLM_SYNC_TAG || v[3] != 0)
        return sync_error(m->ctx, SLM_WRONGTYPE);
    /* The value's bytes are not 8-byte aligned: copy, never cast. */
    memcpy(s, v + SLM_HEADER, sizeof *s);
    return REDISMODULE_OK;
}

void slm_sync(slm_call *m)
{
    sync_args a;
    if (sync_parse(m, &a) != REDISMODULE_OK)
        return;
    /* The ranges above are the ones sl_quota_config_init and sl_quota_sync
     * check, so neither refuses; should one, the record is not written. */
    sl_limit l;
    memset(&l, 0, sizeof l);
    l.algorithm = a.algorithm;
    l.limit = a.v[SYNC_LIMIT];
    l.period_ns = a.v[SYNC_PERIOD];
    l.burst = a.v[SYNC_BURST] ? a.v[SYNC_BURST] : a.v[SYNC_LIMIT];
    sl_quota_config cfg;
    if (sl_quota_config_init(&cfg, &l, (int)a.v[SYNC_NODES], a.v[SYNC_INTERVAL]) != SL_OK) {
        sync_error(m->ctx, "ERR sync: invalid argument");
        return;
    }
    sl_quota_report rep = {
        .node = (int)a.v[SYNC_NODE],
        .admitted = a.v[SYNC_ADMITTED],
        .asked = a.v[SYNC_ASKED],
        .length_ns = a.v[SYNC_LENGTH],
        .carry = a.v[SYNC_CARRY],
    };

    RedisModuleString *name = m->argv[1];
    RedisModuleKey *k = RedisModule_OpenKey(m->ctx, name, REDISMODULE_READ | REDISMODULE_WRITE);
    sl_quota_central st;
    sl_quota_grant g;
    if (sync_read(m, k, &st) != REDISMODULE_OK) {
        RedisModule_CloseKey(k);
        return;
    }
    if (sl_quota_sync(&cfg, &st, a.now, &rep, &g) != SL_OK) {
        RedisModule_CloseKey(k);
        sync_error(m->ctx, "ERR sync: invalid argument");
        return;
    }
    unsigned char value[SYNC_VALUE_LEN];
    value[0] = SLM_MAGIC;
    value[1] = SLM_VERSION;
    value[2] = SLM_SYNC_TAG;
    value[3] = 0;
    memcpy(value + SLM_HEADER, &st, sizeof st);
    int rc = slm_put_value(m, k, name, value, sizeof value, sync_expires_at(&cfg, &st));
    RedisModule_CloseKey(k);
    if (rc != REDISMODULE_OK) {
        sync_error(m->ctx, "ERR sync: the key could not be written");
        return;
    }
    RedisModule_ReplyWithArray(m->ctx, 3);
    RedisModule_ReplyWithLongLong(m->ctx, (long long)g.hold);
    RedisModule_ReplyWithLongLong(m->ctx, (long long)g.rate);
    RedisModule_ReplyWithLongLong(m->ctx, (long long)st.remaining);
}
