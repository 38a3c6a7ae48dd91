/*
 * route.c: a routing fleet's backend (peers.h): the route of each request,
 * over a local backend and a remote one.
 */
#include <stdlib.h>

#include "backend/backend.h"
#include "backend/peers.h"

typedef struct rt_backend {
    sl_backend base;
    sl_backend *local, *remote;
    sl_peers *peers; /* the first membership: the one in force is its latest */
} rt_backend;

struct sl_backend_worker {
    rt_backend *b;
    sl_backend_worker *local, *remote;
};

static sl_backend_worker *rt_attach(sl_backend *base, uv_loop_t *loop, const int64_t *now,
                                    const char **err)
{
    rt_backend *b = (rt_backend *)base;
    sl_backend_worker *w = calloc(1, sizeof *w);
    if (!w) {
        *err = "out of memory";
        return NULL;
    }
    w->b = b;
    if (!(w->local = b->local->ops->attach(b->local, loop, now, err))) {
        free(w);
        return NULL;
    }
    if (!(w->remote = b->remote->ops->attach(b->remote, loop, now, err))) {
        b->local->ops->detach(w->local);
        free(w);
        return NULL;
    }
    return w;
}

static void rt_detach(sl_backend_worker *w)
{
    w->b->remote->ops->detach(w->remote);
    w->b->local->ops->detach(w->local);
    free(w);
}

/* Does this node own every key of r? Then no peer need be asked, this node
 * itself not over loopback either. */
static bool rt_local(const sl_peers *p, const sl_backend_req *r)
{
    if (r->n == 0 || !r->items)
        return false;
    for (size_t k = 0; k < r->n; k++)
        if (!r->items[k].key || !sl_peers_owns(p, sl_slot_of(r->items[k].key, r->items[k].keylen)))
            return false;
    return true;
}

static int rt_submit(sl_backend_worker *w, sl_backend_req *r)
{
    if (rt_local(sl_peers_latest(w->b->peers), r)) {
        r->errstr = NULL; /* the memory backend has no words of a remote store's */
        return w->b->local->ops->submit(w->local, r);
    }
    return w->b->remote->ops->submit(w->remote, r);
}

/* What this node holds of a key: its own states (the owner's, when this
 * node owns the key). */
static int rt_inspect(sl_backend_worker *w, const void *key, size_t len, sl_backend_key_info *info)
{
    const sl_backend *l = w->b->local;
    return l->ops->inspect ? l->ops->inspect(w->local, key, len, info) : SL_ERR_UNSUPPORTED;
}

static void rt_stats(sl_backend *base, sl_backend_stats *out)
{
    rt_backend *b = (rt_backend *)base;
    if (b->remote->ops->stats)
        b->remote->ops->stats(b->remote, out);
}

static void rt_free(sl_backend *base)
{
    rt_backend *b = (rt_backend *)base;
    b->remote->ops->free(b->remote);
    b->local->ops->free(b->local);
    free(b);
}

static const sl_backend_ops rt_ops = {
    .name = "peers",
    .attach = rt_attach,
    .detach = rt_detach,
    .submit = rt_submit,
    .inspect = rt_inspect,
    .stats = rt_stats,
    .free = rt_free,
};

sl_backend *sl_backend_route(sl_backend *local, sl_backend *remote, sl_peers *peers)
{
    rt_backend *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->base.ops = &rt_ops;
    b->base.store = local->store;
    b->base.defers = true;
    b->local = local;
    b->remote = remote;
    b->peers = peers;
    return &b->base;
}

void sl_backend_route_local(const sl_backend *route, sl_backend_worker *w, const sl_backend **local,
                            sl_backend_worker **lw)
{
    *local = ((const rt_backend *)route)->local;
    *lw = w->local;
}
