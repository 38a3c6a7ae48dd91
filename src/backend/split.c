/*
 * split.c: the fixed split (sluiced --split N). Each of N nodes enforces
 * its share of every limit (sl_limit_share: limit / N) on a backend of its
 * own, with no coordination: this backend hands the one it wraps the
 * share of each item's limit in place of the limit.
 *
 * Building a share costs several takes (sl_limit_init's divisions), so
 * each worker keeps the shares it built in a small direct-mapped cache,
 * found by the whole limit's parameters (a limit's address can be reused
 * by another limit once a reload or the limit cache frees it).
 *
 * It wraps the memory backend: a remote store enforces the whole limit for
 * the fleet, and --split only sizes its local store-down limiter.
 */
#include <stdlib.h>
#include <string.h>

#include "algo/share.h"
#include "backend/backend.h"

#define SPLIT_CACHE 256 /* a power of two */

typedef struct split_entry {
    bool used;
    /* The whole limit's parameters: what sl_limit_share reads. */
    sl_algorithm algorithm;
    uint32_t flags;
    int64_t limit, period_ns, burst, months, reset_day, utc_offset_ns, local_offset_ns;
    int rc;         /* sl_limit_share's answer for them */
    sl_limit share; /* valid when rc is SL_OK */
} split_entry;

typedef struct sl_split {
    sl_backend base;
    sl_backend *inner;
    int64_t nodes;
} sl_split;

struct sl_backend_worker {
    const sl_split *b;
    sl_backend_worker *inner;
    split_entry cache[SPLIT_CACHE];
};

static bool split_same(const split_entry *e, const sl_limit *l)
{
    return e->used && e->algorithm == l->algorithm && e->flags == l->flags &&
           e->limit == l->limit && e->period_ns == l->period_ns && e->burst == l->burst &&
           e->months == l->months && e->reset_day == l->reset_day &&
           e->utc_offset_ns == l->utc_offset_ns &&
           e->local_offset_ns == l->local_offset_ns;
}

static size_t split_slot(const sl_limit *l)
{
    uint64_t h = (uint64_t)l->limit * UINT64_C(0x9E3779B97F4A7C15);
    h ^= (uint64_t)l->period_ns + (h << 6) + (h >> 2);
    h ^= (uint64_t)l->burst * UINT64_C(0xBF58476D1CE4E5B9) + (uint64_t)l->algorithm + l->flags;
    h ^= (uint64_t)l->months + ((uint64_t)l->reset_day << 10) + (uint64_t)l->local_offset_ns;
    return (size_t)((h ^ (h >> 29)) & (SPLIT_CACHE - 1));
}

/* The share of *l, from the cache or built into it. */
static const split_entry *split_share(sl_backend_worker *w, const sl_limit *l)
{
    split_entry *e = &w->cache[split_slot(l)];
    if (split_same(e, l))
        return e;
    *e = (split_entry){.used = true,
                       .algorithm = l->algorithm,
                       .flags = l->flags,
                       .limit = l->limit,
                       .period_ns = l->period_ns,
                       .burst = l->burst,
                       .months = l->months,
                       .reset_day = l->reset_day,
                       .utc_offset_ns = l->utc_offset_ns,
                       .local_offset_ns = l->local_offset_ns};
    e->rc = sl_limit_share(l, w->b->nodes, &e->share);
    return e;
}

static sl_backend_worker *split_attach(sl_backend *base, struct uv_loop_s *loop,
                                       const int64_t *now, const char **err)
{
    sl_split *b = (sl_split *)base;
    sl_backend_worker *w = calloc(1, sizeof *w);
    if (!w) {
        *err = "out of memory";
        return NULL;
    }
    w->b = b;
    w->inner = b->inner->ops->attach(b->inner, loop, now, err);
    if (!w->inner) {
        free(w);
        return NULL;
    }
    return w;
}

static void split_detach(sl_backend_worker *w)
{
    w->b->inner->ops->detach(w->inner);
    free(w);
}

static int split_submit(sl_backend_worker *w, sl_backend_req *r)
{
    const sl_backend *inner = w->b->inner;
    if (r->op == SL_OP_RESET) /* keys only */
        return inner->ops->submit(w->inner, r);
    if (r->n == 0 || r->n > SL_TAKE_MANY_MAX) {
        r->rc = SL_ERR_ARGUMENT;
        r->failed = -1;
        return SL_OK;
    }
    /* Two items of one request may want the same cache slot: the second
     * would overwrite the share the first points to, so each item's share
     * is copied out when there are several. */
    sl_take_item items[SL_TAKE_MANY_MAX];
    sl_limit shares[SL_TAKE_MANY_MAX];
    for (size_t i = 0; i < r->n; i++) {
        const split_entry *e = split_share(w, r->items[i].limit);
        if (e->rc != SL_OK) {
            r->rc = e->rc;
            r->failed = -1;
            return SL_OK;
        }
        items[i] = r->items[i];
        if (r->n == 1) {
            items[i].limit = &e->share;
        } else {
            shares[i] = e->share;
            items[i].limit = &shares[i];
        }
    }
    const sl_take_item *whole = r->items;
    r->items = items;
    int rc = inner->ops->submit(w->inner, r);
    r->items = whole;
    return rc;
}

static void split_prefetch(sl_backend_worker *w, const void *const *keys, const size_t *lens,
                           size_t n)
{
    if (w->b->inner->ops->prefetch)
        w->b->inner->ops->prefetch(w->inner, keys, lens, n);
}

static int split_inspect(sl_backend_worker *w, const void *key, size_t len,
                         sl_backend_key_info *info)
{
    if (!w->b->inner->ops->inspect)
        return SL_ERR_UNSUPPORTED;
    return w->b->inner->ops->inspect(w->inner, key, len, info);
}

static void split_free(sl_backend *base)
{
    sl_split *b = (sl_split *)base;
    b->inner->ops->free(b->inner);
    free(b);
}

static const sl_backend_ops sl_split_ops = {
    .name = "split",
    .attach = split_attach,
    .detach = split_detach,
    .submit = split_submit,
    .prefetch = split_prefetch,
    .inspect = split_inspect,
    .free = split_free,
};

sl_backend *sl_backend_split(sl_backend *inner, int64_t nodes)
{
    if (nodes < 1 || nodes > SL_SHARE_NODES_MAX)
        return NULL;
    sl_split *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->base.ops = &sl_split_ops;
    b->base.store = inner->store;
    b->base.defers = inner->defers;
    b->inner = inner;
    b->nodes = nodes;
    return &b->base;
}
