/*
 * memory.c: the embedded backend, the store (src/store) at the worker's
 * clock. Every request is answered in the call.
 */
#include <stdlib.h>

#include "backend/backend.h"

typedef struct sl_memory {
    sl_backend base;
} sl_memory;

struct sl_backend_worker {
    sl_store *store;
    const int64_t *now;
};

static sl_backend_worker *mem_attach(sl_backend *b, struct uv_loop_s *loop, const int64_t *now,
                                     const char **err)
{
    sl_backend_worker *w = malloc(sizeof *w);
    if (!w) {
        *err = "out of memory";
        return NULL;
    }
    w->store = b->store;
    w->now = now;
    return w;
}

static void mem_detach(sl_backend_worker *w)
{
    free(w);
}

static int mem_submit(sl_backend_worker *w, sl_backend_req *r)
{
    const sl_take_item *it = r->items;
    int64_t now = *w->now;
    int rc = SL_OK;
    r->by = SL_DECIDED_BY_STORE;
    if (__builtin_expect(r->op == SL_OP_TAKE && r->n == 1, 1)) { /* the common case, first */
        r->rc = sl_store_take(w->store, it->key, it->keylen, it->limit, now, it->cost, r->d);
        r->failed = r->rc == SL_OK && !r->d->allowed ? 0 : -1;
        return SL_OK;
    }
    r->failed = -1;
    switch (r->op) {
    case SL_OP_TAKE:
        if (r->n == 1) {
            rc = sl_store_take(w->store, it->key, it->keylen, it->limit, now, it->cost, r->d);
            if (rc == SL_OK && !r->d->allowed)
                r->failed = 0;
        } else {
            rc = sl_store_take_many(w->store, it, r->n, now, r->d, &r->failed);
        }
        break;
    case SL_OP_PEEK:
        for (size_t i = 0; i < r->n && rc == SL_OK; i++) {
            rc = sl_store_peek(w->store, it[i].key, it[i].keylen, it[i].limit, now, it[i].cost,
                               &r->d[i]);
            if (rc == SL_OK && !r->d[i].allowed && r->failed < 0)
                r->failed = (int)i;
        }
        break;
    case SL_OP_RESET:
        r->count = 0;
        for (size_t i = 0; i < r->n; i++) {
            int held = sl_store_reset(w->store, it[i].key, it[i].keylen);
            if (held < 0) {
                rc = held;
                break;
            }
            r->count += held;
        }
        break;
    case SL_OP_ACQUIRE:
        rc = sl_store_acquire(w->store, it->key, it->keylen, it->limit, now, it->cost, r->lease_id,
                              r->d);
        if (rc == SL_OK && !r->d->allowed)
            r->failed = 0;
        break;
    case SL_OP_RELEASE:
        rc = sl_store_release(w->store, it->key, it->keylen, it->limit, now, r->lease_id);
        if (rc >= 0) {
            r->count = rc;
            rc = SL_OK;
        }
        break;
    case SL_OP_REFUND: {
        int64_t given = sl_store_refund(w->store, it->key, it->keylen, it->limit, now, it->cost);
        if (given >= 0) {
            r->count = given;
            rc = SL_OK;
        } else {
            rc = (int)given;
        }
        break;
    }
    case SL_OP_CHARGE: /* never refused: failed stays -1 */
        rc = r->n == 1 ? sl_store_charge(w->store, it->key, it->keylen, it->limit, now, it->cost,
                                         r->d)
                       : SL_ERR_ARGUMENT;
        if (rc == SL_ERR_ALGORITHM && it->limit->algorithm == SL_SLIDING_LOG) {
            r->errstr = SL_CHARGE_LOG_ERR;
            r->errstr_is_reply = true;
        }
        break;
    default:
        rc = SL_ERR_ARGUMENT;
    }
    r->rc = rc;
    return SL_OK;
}

static void mem_prefetch(sl_backend_worker *w, const void *const *keys, const size_t *lens,
                         size_t n)
{
    sl_store_prefetch(w->store, keys, lens, n);
}

static int mem_inspect(sl_backend_worker *w, const void *key, size_t len, sl_backend_key_info *info)
{
    return sl_store_inspect(w->store, key, len, *w->now, info);
}

static void mem_free(sl_backend *b)
{
    free(b);
}

static const sl_backend_ops sl_memory_ops = {
    .name = "memory",
    .attach = mem_attach,
    .detach = mem_detach,
    .submit = mem_submit,
    .prefetch = mem_prefetch,
    .inspect = mem_inspect,
    .free = mem_free,
};

sl_backend *sl_backend_memory(sl_store *store)
{
    sl_memory *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->base.ops = &sl_memory_ops;
    m->base.store = store;
    return &m->base;
}
