/*
 * keys.c: the executor of sluice-redis.so. Every rate limiting command of
 * src/cmd reaches Redis keys through these seven functions.
 *
 * A key's value is a plain Redis string (docs/module.md says why):
 *
 *     byte 0    SLM_MAGIC 0xF1: no text and no integer starts so
 *     byte 1    format version (1): any other is refused, never guessed at
 *     byte 2    the algorithm (sl_algorithm)
 *     byte 3    1 for a carried state (sluice.h), else 0
 *     byte 4..  the algorithm's state, sl_state_size() bytes, as libsluice
 *               keeps it in memory (little-endian int64 words)
 *
 * and the key's expiry is the moment its state is "never seen" again
 * (sl_state_expires_at, in Unix milliseconds rounded up), so Redis drops
 * keys that no longer limit anyone by itself.
 *
 * Replication: a take is time-dependent, so it is never replicated as sent.
 * Each change of a key is replicated as its *effect*: SET key <value bytes>
 * PXAT <expiry>, or DEL key. A replica, whatever its clock, then holds the
 * primary's bytes exactly; the AOF records the same commands.
 *
 * A value that is not a sluice state gets WRONGTYPE, and nothing is written.
 */
#include <string.h>

#include "common/decimal.h"
#include "common/units.h"
#include "redis_module/module.h"

/* ---- what every write replicates ---- */

/* The PXAT keyword of every SET this module replicates, made once at load:
 * RedisModule_Replicate takes a string argument ("s") by reference, where a
 * C string ("c") would be copied into a new object on every write. */
static RedisModuleString *slm_pxat;

int slm_keys_init(RedisModuleCtx *ctx)
{
    if (!slm_pxat)
        slm_pxat = RedisModule_CreateString(ctx, "PXAT", 4);
    return slm_pxat ? REDISMODULE_OK : REDISMODULE_ERR;
}

void slm_keys_free(RedisModuleCtx *ctx)
{
    if (slm_pxat)
        RedisModule_FreeString(ctx, slm_pxat);
    slm_pxat = NULL;
}

/* ---- one state in scratch memory ---- */

/* A state copied out of its value: the value's bytes are not 8-byte aligned,
 * and a take must not touch the value before it is known to succeed. Small
 * states (every algorithm but large sliding logs and leases) stay inline. */
typedef struct slm_state {
    void *p;
    size_t size;
    int64_t small[8];
} slm_state;

static void slm_state_init(slm_state *s, size_t size)
{
    s->size = size;
    s->p = size <= sizeof s->small ? (void *)s->small : RedisModule_Alloc(size);
    memset(s->p, 0, size);
}

static void slm_state_free(slm_state *s)
{
    if (s->p && s->p != (void *)s->small)
        RedisModule_Free(s->p);
    s->p = NULL;
}

/* ---- keys ---- */

typedef struct slm_key {
    RedisModuleKey *k;        /* NULL when opened READ and absent */
    RedisModuleString *name;
    bool owned_name;          /* name was created here, free it on close */
    bool exists;              /* the key holds a value */
    bool compatible;          /* ... a sluice state of this algorithm and size */
} slm_key;

/* The key's name as a RedisModuleString: one of the command's own arguments
 * when the slice points into one (no copy), else a new string. */
static RedisModuleString *slm_key_name(slm_call *m, const void *ptr, size_t len, bool *owned)
{
    for (int i = 1; i < m->argc; i++) {
        size_t n;
        const char *p = RedisModule_StringPtrLen(m->argv[i], &n);
        if (p == ptr && n == len) {
            *owned = false;
            return m->argv[i];
        }
    }
    *owned = true;
    return RedisModule_CreateString(m->ctx, ptr, len);
}

static int slm_open(slm_call *m, const void *ptr, size_t len, int mode, slm_key *key)
{
    memset(key, 0, sizeof *key);
    if (len == 0)
        return SL_ERR_KEY; /* as sluiced: an empty key is a client's bug */
    key->name = slm_key_name(m, ptr, len, &key->owned_name);
    key->k = RedisModule_OpenKey(m->ctx, key->name, mode);
    key->exists = key->k && RedisModule_KeyType(key->k) != REDISMODULE_KEYTYPE_EMPTY;
    return SL_OK;
}

static void slm_close(slm_call *m, slm_key *key)
{
    if (key->k)
        RedisModule_CloseKey(key->k);
    if (key->owned_name && key->name)
        RedisModule_FreeString(m->ctx, key->name);
    key->k = NULL;
    key->name = NULL;
}

/* ---- the errors of the module's own ---- */

/*
 * What a key can hold that libsluice has no words for: a value this module
 * did not write, or a state written by another sluice's format. The
 * functions below return these as they return an SL_ERR_* (they lie below
 * every sl_status), up to slm_submit, which answers each with its own
 * Redis error line (slm_answer).
 */
typedef enum slm_error {
    SLM_ERR_NOT_STATE = -1000,   /* Redis's WRONGTYPE: no sluice state */
    SLM_ERR_BAD_VERSION = -1001, /* a sluice state of an unknown format version */
} slm_error;

/*
 * Checks that an existing key holds a sluice state of a known version.
 * Returns SL_OK (and the value through *v, *len when wanted),
 * SLM_ERR_NOT_STATE or SLM_ERR_BAD_VERSION.
 */
static int slm_check(slm_key *key, const unsigned char **v, size_t *len)
{
    size_t n = 0;
    const unsigned char *p = NULL;
    if (RedisModule_KeyType(key->k) == REDISMODULE_KEYTYPE_STRING)
        p = (const unsigned char *)RedisModule_StringDMA(key->k, &n, REDISMODULE_READ);
    if (!p || n < SLM_HEADER || p[0] != SLM_MAGIC)
        return SLM_ERR_NOT_STATE;
    if (p[1] != SLM_VERSION)
        return SLM_ERR_BAD_VERSION;
    if (v) {
        *v = p;
        *len = n;
    }
    return SL_OK;
}

/*
 * Copies the key's state under limit *l into st: zeroed ("never seen") when
 * the key is absent; carried over by sl_state_adopt when it holds another
 * algorithm's or shape's state, as sluiced's store does (SL_ERR_WRONGTYPE
 * when it cannot be, and then nothing is written). Returns SL_OK or an
 * error.
 */
static int slm_read(slm_call *m, slm_key *key, const sl_limit *l, slm_state *st)
{
    memset(st->p, 0, st->size);
    key->compatible = false;
    if (!key->exists)
        return SL_OK;
    const unsigned char *v;
    size_t n;
    int rc = slm_check(key, &v, &n);
    if (rc != SL_OK)
        return rc;
    /* A sync record (SL.SYNC's, sync.c) is no limit's state: refused as a
     * foreign value by every op, a refund too (which answers 0 for a state
     * it cannot carry over, and would hide that the key is not a limit's). */
    if (v[2] == SLM_SYNC_TAG)
        return SLM_ERR_NOT_STATE;
    unsigned carried = (l->flags & SL_LIMIT_CARRY) ? 1 : 0;
    if (v[2] == (unsigned)l->algorithm && v[3] == carried && n - SLM_HEADER == st->size) {
        memcpy(st->p, v + SLM_HEADER, st->size);
        key->compatible = true;
        return SL_OK;
    }
    /* The value's bytes are not 8-byte aligned: adopt from a copy. */
    slm_state from;
    slm_state_init(&from, n - SLM_HEADER);
    memcpy(from.p, v + SLM_HEADER, from.size);
    rc = v[2] < SL_ALGORITHM_COUNT && v[3] <= 1
             ? sl_state_adopt(l, st->p, (sl_algorithm)v[2], v[3] == 1, from.p, from.size, m->now)
             : SL_ERR_WRONGTYPE;
    slm_state_free(&from);
    return rc;
}

/* Unix milliseconds at which a state expiring at `ns` is gone: rounded up,
 * so that Redis never drops a key while its state still limits. */
static long long slm_expiry_ms(int64_t ns)
{
    return (long long)sl_ns_ceil_ms(ns);
}

/*
 * Stores st as the key's state under *l, and replicates the effect. A state
 * that is "never seen" at `now` deletes the key instead (or writes nothing
 * when there is none). `old` is the state read before, to skip writing
 * bytes that did not change (a rejection, a peek).
 */
static void slm_write(slm_call *m, slm_key *key, const sl_limit *l, const slm_state *st,
                      const slm_state *old)
{
    /* Same bytes, same expiry: nothing happened. Checked first, because a
     * carried state that still names another limit (a refusal, a peek
     * under a policy's new tier) expires as that limit says, not as l
     * would read it: l could call it "never seen" and drop units in use. */
    if (key->compatible && old && memcmp(old->p, st->p, st->size) == 0)
        return;
    int64_t expires = sl_state_expires_at(l, st->p);
    if (expires <= m->now) {
        if (key->compatible && key->exists) {
            RedisModule_DeleteKey(key->k);
            RedisModule_Replicate(m->ctx, "DEL", "s", key->name);
            key->exists = key->compatible = false;
        }
        return; /* an incompatible old state stays until a take replaces it */
    }
    size_t vlen = SLM_HEADER + st->size;
    if (!key->compatible)
        RedisModule_StringTruncate(key->k, vlen); /* creates or resizes the string */
    size_t n;
    unsigned char *v = (unsigned char *)RedisModule_StringDMA(key->k, &n, REDISMODULE_WRITE);
    if (!v || n != vlen)
        return; /* cannot happen for a string key opened for writing */
    v[0] = SLM_MAGIC;
    v[1] = SLM_VERSION;
    v[2] = (unsigned char)l->algorithm;
    v[3] = (l->flags & SL_LIMIT_CARRY) ? 1 : 0; /* the limit's name leads the state */
    memcpy(v + SLM_HEADER, st->p, st->size);
    long long at = slm_expiry_ms(expires);
    RedisModule_SetAbsExpire(key->k, at);
    /* The key name and PXAT go by reference ("s"); the expiry goes as its
     * digits ("b", one object) rather than as a number ("l", which Redis
     * turns into an object and a separate string). The bytes replicated are
     * the same either way. */
    char digits[20];
    char *first = sl_dec_put(digits + sizeof digits, (uint64_t)at);
    RedisModule_Replicate(m->ctx, "SET", "sbsb", key->name, (const char *)v, vlen, slm_pxat,
                          first, (size_t)(digits + sizeof digits - first));
    key->exists = key->compatible = true;
}

int slm_put_value(slm_call *m, RedisModuleKey *k, RedisModuleString *name, const void *v,
                  size_t len, int64_t expires_ns)
{
    if (RedisModule_StringTruncate(k, len) != REDISMODULE_OK)
        return REDISMODULE_ERR;
    size_t n;
    char *p = RedisModule_StringDMA(k, &n, REDISMODULE_WRITE);
    if (!p || n != len)
        return REDISMODULE_ERR;
    memcpy(p, v, len);
    long long at = slm_expiry_ms(expires_ns);
    RedisModule_SetAbsExpire(k, at);
    char digits[20];
    char *first = sl_dec_put(digits + sizeof digits, (uint64_t)at);
    RedisModule_Replicate(m->ctx, "SET", "sbsb", name, (const char *)v, len, slm_pxat, first,
                          (size_t)(digits + sizeof digits - first));
    return REDISMODULE_OK;
}

/* ---- the executor ---- */

/* Takes (or with `lease_id`, acquires; or with `charge`, charges after the
 * fact: sl_charge) on one key: read, decide, write. */
static int slm_take_one(slm_call *m, const sl_resp_slice *k, const sl_limit *l, int64_t cost,
                        uint64_t lease_id, bool charge, sl_decision *d)
{
    slm_key key;
    int rc = slm_open(m, k->ptr, k->len, REDISMODULE_READ | REDISMODULE_WRITE, &key);
    if (rc != SL_OK)
        return rc;
    slm_state st, old;
    size_t size = sl_state_size(l);
    slm_state_init(&st, size);
    slm_state_init(&old, size);
    rc = slm_read(m, &key, l, &st);
    if (rc == SL_OK) {
        memcpy(old.p, st.p, size);
        rc = charge     ? sl_charge(l, st.p, m->now, cost, d)
             : lease_id ? sl_lease_acquire(l, st.p, m->now, cost, lease_id, d)
                        : sl_take(l, st.p, m->now, cost, d);
    }
    /* A refused take, or one of cost 0, leaves a state of another shape as
     * it was, as the store does: carried over, it might have lost what the
     * new limit cannot hold at once. A charge is never refused: one of more
     * than 0 replaces it as an admitted take does. */
    if (rc == SL_OK && (key.compatible || !key.exists || (d->allowed && cost > 0)))
        slm_write(m, &key, l, &st, &old);
    slm_state_free(&st);
    slm_state_free(&old);
    slm_close(m, &key);
    return rc;
}

static int slm_ex_take(void *ex, const sl_resp_slice *key, const sl_limit *l, int64_t cost,
                       sl_decision *d)
{
    return slm_take_one(ex, key, l, cost, 0, false, d);
}

static int slm_ex_acquire(void *ex, const sl_resp_slice *key, const sl_limit *l, int64_t weight,
                          uint64_t lease_id, sl_decision *d)
{
    return slm_take_one(ex, key, l, weight, lease_id, false, d);
}


/* A peek opens the key for reading only and never writes. */
static int slm_ex_peek(void *ex, const sl_resp_slice *k, const sl_limit *l, int64_t cost,
                       sl_decision *d)
{
    slm_call *m = ex;
    slm_key key;
    int rc = slm_open(m, k->ptr, k->len, REDISMODULE_READ, &key);
    if (rc != SL_OK)
        return rc;
    slm_state st;
    slm_state_init(&st, sl_state_size(l));
    rc = slm_read(m, &key, l, &st);
    if (rc == SL_OK)
        rc = sl_peek(l, st.p, m->now, cost, d);
    slm_state_free(&st);
    slm_close(m, &key);
    return rc;
}

/*
 * All or nothing over up to SL_TAKE_MANY_MAX keys, as sl_store_take_many:
 * every item decides in order on scratch copies (a repeated key shares its
 * copy, so its takes add up), past a rejection too; when all admit, each key
 * is written once; when one rejects, nothing is written, and out[i] is what
 * item i answers after the items before it. Redis runs one command at a
 * time, so reading all keys, deciding and writing is atomic without locks.
 */
static int slm_ex_take_many(void *ex, const sl_take_item *items, size_t n, sl_decision *out,
                            int *failed)
{
    slm_call *m = ex;
    slm_key keys[SL_TAKE_MANY_MAX];
    slm_state cur[SL_TAKE_MANY_MAX], old[SL_TAKE_MANY_MAX];
    int rep[SL_TAKE_MANY_MAX];
    size_t opened = 0;
    int rc = SL_OK;
    *failed = -1;
    if (n == 0 || n > SL_TAKE_MANY_MAX)
        return SL_ERR_ARGUMENT;
    for (size_t i = 0; i < n && rc == SL_OK; i++) {
        rep[i] = (int)i;
        for (size_t j = 0; j < i; j++) {
            if (rep[j] == (int)j && items[j].keylen == items[i].keylen &&
                memcmp(items[j].key, items[i].key, items[i].keylen) == 0) {
                if (items[j].limit->algorithm != items[i].limit->algorithm ||
                    sl_state_size(items[j].limit) != sl_state_size(items[i].limit))
                    rc = SL_ERR_ARGUMENT; /* one key under two shapes */
                rep[i] = (int)j;
                break;
            }
        }
        cur[i].p = old[i].p = NULL;
        if (rc != SL_OK || rep[i] != (int)i)
            continue;
        rc = slm_open(m, items[i].key, items[i].keylen, REDISMODULE_READ | REDISMODULE_WRITE,
                      &keys[i]);
        if (rc != SL_OK)
            break;
        opened = i + 1;
        size_t size = sl_state_size(items[i].limit);
        slm_state_init(&cur[i], size);
        slm_state_init(&old[i], size);
        rc = slm_read(m, &keys[i], items[i].limit, &cur[i]);
        if (rc == SL_OK)
            memcpy(old[i].p, cur[i].p, size);
    }
    for (size_t i = 0; i < n && rc == SL_OK; i++) {
        rc = sl_take(items[i].limit, cur[rep[i]].p, m->now, items[i].cost, &out[i]);
        if (rc == SL_OK && !out[i].allowed && *failed < 0)
            *failed = (int)i;
    }
    if (rc == SL_OK && *failed < 0) {
        for (size_t i = 0; i < n; i++) {
            if (rep[i] != (int)i)
                continue;
            /* A repeated key's state is as the last of its items left it:
             * it expires as that item's limit says. */
            size_t last = i;
            for (size_t j = i + 1; j < n; j++)
                if (rep[j] == (int)i)
                    last = j;
            slm_write(m, &keys[i], items[last].limit, &cur[i], &old[i]);
        }
    }
    for (size_t i = 0; i < opened; i++) {
        if (rep[i] != (int)i)
            continue;
        slm_state_free(&cur[i]);
        slm_state_free(&old[i]);
        slm_close(m, &keys[i]);
    }
    return rc;
}

/*
 * SL.RESET deletes a key only when it holds a sluice state. Before the
 * first key is deleted, every key of the command is checked, so that a
 * WRONGTYPE among them deletes none.
 */
/* Every key of a reset is a sluice state or absent: checked before any is
 * deleted, so that a reset that refuses one deletes none. */
static int slm_reset_check(slm_call *m, const sl_take_item *items, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        slm_key key;
        int rc = slm_open(m, items[i].key, items[i].keylen, REDISMODULE_READ, &key);
        if (rc == SL_OK && key.exists)
            rc = slm_check(&key, NULL, NULL);
        slm_close(m, &key);
        if (rc != SL_OK)
            return rc;
    }
    return SL_OK;
}

static int slm_ex_reset(void *ex, const sl_resp_slice *k)
{
    slm_call *m = ex;
    slm_key key;
    int rc;
    rc = slm_open(m, k->ptr, k->len, REDISMODULE_READ | REDISMODULE_WRITE, &key);
    if (rc != SL_OK)
        return rc;
    int held = 0;
    if (key.exists) {
        rc = slm_check(&key, NULL, NULL);
        if (rc == SL_OK) {
            RedisModule_DeleteKey(key.k);
            RedisModule_Replicate(m->ctx, "DEL", "s", key.name);
            held = 1;
        }
    }
    slm_close(m, &key);
    return rc == SL_OK ? held : rc;
}

/*
 * A change in place to a state of the limit's own shape: the lease lease_id
 * released, or (lease_id 0) a take of `cost` given back. An absent key, or
 * one of another shape, has nothing to give (0): a take would carry such a
 * state over, a release or a refund does not. A refund answers 0 for a
 * state that could not be carried over either (SL_ERR_WRONGTYPE), a release
 * the error; a value that is no sluice state is an error for both. The
 * change is replicated as every change is, as its effect (SET or DEL).
 * Returns the leases released or the units given back, or an error.
 */
static int64_t slm_in_place(slm_call *m, const sl_resp_slice *k, const sl_limit *l,
                            uint64_t lease_id, int64_t cost)
{
    slm_key key;
    int64_t rc = slm_open(m, k->ptr, k->len, REDISMODULE_READ | REDISMODULE_WRITE, &key);
    if (rc != SL_OK)
        return rc;
    slm_state st, old;
    size_t size = sl_state_size(l);
    slm_state_init(&st, size);
    slm_state_init(&old, size);
    rc = slm_read(m, &key, l, &st);
    if ((rc == SL_ERR_WRONGTYPE && lease_id == 0) || (rc == SL_OK && !key.compatible)) {
        rc = 0;
    } else if (rc == SL_OK) {
        memcpy(old.p, st.p, size);
        rc = lease_id ? sl_lease_release(l, st.p, m->now, lease_id)
                      : sl_refund(l, st.p, m->now, cost);
        if (rc > 0 || (lease_id && rc == 0))
            slm_write(m, &key, l, &st, &old);
    }
    slm_state_free(&st);
    slm_state_free(&old);
    slm_close(m, &key);
    return rc;
}

/*
 * Puts a result of the functions above into r->rc. The module's own errors
 * become the SL_ERR_* of their kind, and their Redis error line goes in
 * r->errstr as the whole reply, which src/cmd sends as it is.
 */
static void slm_answer(sl_backend_req *r, int rc)
{
    r->errstr = NULL;
    r->errstr_is_reply = false;
    switch (rc) {
    case SLM_ERR_NOT_STATE:
        r->rc = SL_ERR_ARGUMENT;
        r->errstr = SLM_WRONGTYPE;
        r->errstr_is_reply = true;
        break;
    case SLM_ERR_BAD_VERSION:
        r->rc = SL_ERR_VERSION;
        r->errstr = "ERR the key holds a sluice state of an unknown format version";
        r->errstr_is_reply = true;
        break;
    default:
        r->rc = rc;
    }
}

/* The backend interface (src/backend/backend.h) over the functions above:
 * every request is answered in the call, at the command's clock. The
 * worker handle is the command's slm_call. */
static int slm_submit(sl_backend_worker *w, sl_backend_req *r)
{
    slm_call *m = (slm_call *)w;
    const sl_take_item *it = r->items;
    sl_resp_slice key = {it->key, it->keylen};
    int rc = SL_OK;
    r->failed = -1;
    r->by = SL_DECIDED_BY_STORE;
    switch (r->op) {
    case SL_OP_TAKE:
        if (r->n == 1) {
            rc = slm_ex_take(m, &key, it->limit, it->cost, r->d);
            if (rc == SL_OK && !r->d->allowed)
                r->failed = 0;
        } else {
            rc = slm_ex_take_many(m, it, r->n, r->d, &r->failed);
        }
        break;
    case SL_OP_PEEK:
        for (size_t i = 0; i < r->n && rc == SL_OK; i++) {
            sl_resp_slice k = {it[i].key, it[i].keylen};
            rc = slm_ex_peek(m, &k, it[i].limit, it[i].cost, &r->d[i]);
            if (rc == SL_OK && !r->d[i].allowed && r->failed < 0)
                r->failed = (int)i;
        }
        break;
    case SL_OP_RESET:
        r->count = 0;
        rc = slm_reset_check(m, it, r->n);
        for (size_t i = 0; i < r->n && rc == SL_OK; i++) {
            sl_resp_slice k = {it[i].key, it[i].keylen};
            int held = slm_ex_reset(m, &k);
            if (held < 0)
                rc = held;
            else
                r->count += held;
        }
        break;
    case SL_OP_ACQUIRE:
        rc = slm_ex_acquire(m, &key, it->limit, it->cost, r->lease_id, r->d);
        if (rc == SL_OK && !r->d->allowed)
            r->failed = 0;
        break;
    case SL_OP_RELEASE:
        rc = (int)slm_in_place(m, &key, it->limit, r->lease_id, 0);
        if (rc >= 0) {
            r->count = rc;
            rc = SL_OK;
        }
        break;
    case SL_OP_REFUND: {
        int64_t given = slm_in_place(m, &key, it->limit, 0, it->cost);
        if (given >= 0)
            r->count = given;
        rc = given >= 0 ? SL_OK : (int)given;
        break;
    }
    case SL_OP_CHARGE: /* never refused: failed stays -1 */
        rc = r->n == 1 ? slm_take_one(m, &key, it->limit, it->cost, 0, true, r->d)
                       : SL_ERR_ARGUMENT;
        break;
    default:
        rc = SL_ERR_ARGUMENT;
    }
    slm_answer(r, rc);
    if (r->op == SL_OP_CHARGE && rc == SL_ERR_ALGORITHM) { /* a sliding log cannot owe */
        r->errstr = SL_CHARGE_LOG_ERR;
        r->errstr_is_reply = true;
    }
    return SL_OK;
}

static const sl_backend_ops slm_backend_ops = {.name = "redis-module", .submit = slm_submit};
const sl_backend slm_backend = {.ops = &slm_backend_ops};
