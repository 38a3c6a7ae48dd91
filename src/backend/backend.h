/*
 * backend.h: where states live, behind one interface (DESIGN.md, layer 4).
 *
 * A face hands a backend a request (an op on one or more keys, each with
 * its limit and cost) and the backend answers it either in the call (the
 * memory store) or later, on the loop of the thread that submitted it (a
 * round trip to Redis). Replies keep request order above this layer: a
 * backend only promises to call done() exactly once for a request it did
 * not answer in the call.
 *
 * Items (keys and limits) are read only during submit(): a backend that
 * answers later has already sent or copied what it needs, so the caller's
 * keys may point into a read buffer that moves on. The answer fields and
 * the request itself must stay valid until done().
 *
 * Each worker attaches once, with its loop, and submits through its own
 * handle, on its own thread: a backend keeps per-worker state (a
 * connection) without locks.
 */
#ifndef SL_BACKEND_H
#define SL_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "algo/quota.h"    /* the sync strategy's report and grant (SL_OP_SYNC) */
#include "policy/config.h" /* sl_on_error: a policy's store-down mode */
#include "sluice.h"

struct uv_loop_s; /* libuv's uv_loop_t */

/* submit()'s answer when done() will be called later. */
#define SL_PENDING 1

typedef enum sl_op {
    SL_OP_TAKE,    /* n items, all or nothing: none is consumed when one refuses */
    SL_OP_PEEK,    /* n items, each on its own; nothing is consumed */
    SL_OP_RESET,   /* n keys (limits ignored): forgets them */
    SL_OP_ACQUIRE, /* one item, cost = weight: a lease of id lease_id */
    SL_OP_RELEASE, /* one item: gives lease lease_id back */
    SL_OP_REFUND,  /* one item: gives a take of its cost back (sl_refund), so that takes
                      made key by key (across Redis Cluster slots) stay all or nothing */
    SL_OP_CHARGE,  /* one item: takes its cost, never refused, and may leave the key in
                      debt (sl_charge): a take charged after the fact; its decision in d.
                      A sliding log cannot owe: rc SL_ERR_ALGORITHM, errstr the reply
                      SL_CHARGE_LOG_ERR (not "unknown algorithm") */
    SL_OP_SYNC,    /* one item (its key and limit): the sync strategy's trade of a node's
                      report for a lease (sync.c), with r->sync; no store-down policy */
    SL_OP_CLAIM,   /* one item (the fleet's registry key, no limit): a sync node's id, with
                      r->claim; no store-down policy */
} sl_op;

/* The whole error reply to SL_OP_CHARGE on a sliding log, the same from every store. */
#define SL_CHARGE_LOG_ERR                                                                      \
    "ERR CHARGE: a sliding_log cannot owe (it holds at most limit timestamps)"

/* SL_OP_CLAIM's arguments and answer: the script's CLAIM (docs/commands.md). */
typedef struct sl_claim_call {
    const char *token; /* this node's, 1 to 64 bytes, no spaces */
    int64_t ttl_ms;    /* how long the id stays this node's unless claimed again */
    int id;            /* the answer: this node's id, -1 when every id is taken */
    int nodes;         /* the answer: 1 + the highest id live */
} sl_claim_call;

/* SL_OP_SYNC's arguments and answer: the central's SL.SYNC (docs/commands.md). */
typedef struct sl_sync_call {
    int nodes;              /* the fleet's size, as the node sees it */
    int64_t interval_ns;    /* between a node's syncs */
    sl_quota_report report; /* the node's */
    sl_quota_grant grant;   /* the answer: the node's new lease */
    int64_t remaining;      /* the answer: the central's budget after the sync, in sub-units */
} sl_sync_call;

/* What decided, when not the store: a store-down policy (--on-store-error). */
typedef enum sl_fallback {
    SL_DECIDED_BY_STORE = 0,
    SL_DECIDED_FAIL_OPEN,
    SL_DECIDED_FAIL_CLOSED,
    SL_DECIDED_LOCAL,
} sl_fallback;

typedef struct sl_backend_req {
    sl_op op;
    size_t n;                  /* items: 1 .. SL_TAKE_MANY_MAX (RESET: any) */
    const sl_take_item *items; /* read only during submit */
    uint64_t lease_id;         /* ACQUIRE: the id to grant; RELEASE: the id to give back */
    sl_on_error on_error;      /* the policy's store-down mode; DEFAULT: the backend's */
    int32_t timeout_ms;        /* the policy's time budget; 0: the backend's */

    /* The answer. */
    int rc;             /* SL_OK, or an SL_ERR_* for the whole request */
    const char *errstr; /* a remote store's own words for rc, or NULL; valid until done()
                           returns (the backend's storage) */
    bool errstr_is_reply; /* errstr is the whole error reply, sent as it is (the module's
                             words for a key of its Redis, WRONGTYPE); else the reply
                             quotes errstr after "ERR store: " */
    int failed;         /* TAKE, PEEK: the first item refused, -1 when none */
    int64_t count;      /* RESET: keys that were held; RELEASE: 1 released, 0 not;
                           REFUND: the units given back */
    sl_decision *d;     /* n decisions (TAKE, PEEK, ACQUIRE, CHARGE): the caller's room */
    sl_sync_call *sync; /* SYNC: the report in, the grant out */
    sl_claim_call *claim; /* CLAIM: the token in, the id out */
    sl_fallback by;     /* SL_DECIDED_BY_STORE unless a store-down policy decided */

    /* Called once, on the submitting worker's loop, for a request that
     * submit() answered SL_PENDING. */
    void (*done)(struct sl_backend_req *r);
    void *owner;
} sl_backend_req;

typedef struct sl_backend sl_backend;

/* A remote store's health, for INFO and /metrics. */
typedef enum sl_store_state {
    SL_STORE_UP = 0,       /* answering */
    SL_STORE_DOWN,         /* not connected: reconnecting with backoff */
    SL_STORE_BREAKER_OPEN, /* failing: not asked (store-down policies decide) but by probes */
} sl_store_state;

/* Round trips <= 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250 ms, and longer. */
#define SL_RTT_BUCKETS 12
typedef struct sl_backend_stats {
    sl_store_state state; /* the worst of the workers' */
    uint64_t requests;    /* sent to the store */
    uint64_t errors;      /* answered with an error, or lost with the connection */
    uint64_t timeouts;    /* not answered within the time budget */
    uint64_t connects, disconnects, breaker_opens;
    uint64_t rtt[SL_RTT_BUCKETS]; /* round trips by the buckets above */
    uint64_t rtt_sum_ns;
    bool module;          /* the store runs sluice-redis.so (else the Lua script) */
    /* The sync strategy (sync.c); all zero for the other backends. */
    bool sync;
    bool sync_central_down; /* the last sync failed: takes are decided on the last share */
    int sync_node, sync_nodes;
    int64_t sync_interval_ns;
    uint64_t sync_keys;     /* keys this node holds a share of */
    uint64_t syncs;         /* syncs the central answered */
    uint64_t sync_failures; /* syncs it did not (out of reach, too slow) */
    uint64_t sync_waits;    /* takes that waited for their key's first sync */
    uint64_t sync_unleased; /* takes decided without a live lease: the central out of reach */
} sl_backend_stats;
typedef struct sl_backend_worker sl_backend_worker; /* a backend's per-thread handle */

/* What a backend says of a key (SL.INSPECT, GET /v1/keys/{key}). */
typedef sl_key_info sl_backend_key_info;

typedef struct sl_backend_ops {
    const char *name; /* "memory", "redis", "redis-cluster" */
    /* Before a worker's loop runs (on any thread, the loop not yet
     * running): its handle, or NULL with
     * *err set (a static message). `now` is the worker's clock, read once
     * per batch (the memory store decides at it; remote stores use their
     * own clock). */
    sl_backend_worker *(*attach)(sl_backend *b, struct uv_loop_s *loop, const int64_t *now,
                                 const char **err);
    /* On the same thread, when the worker stops: every request in flight
     * is answered (done() with SL_ERR_UNAVAILABLE or a fallback) first. */
    void (*detach)(sl_backend_worker *w);
    /* SL_OK (answered), SL_PENDING (done() later). */
    int (*submit)(sl_backend_worker *w, sl_backend_req *r);
    /* Optional (NULL): starts loading the keys a batch will take from. */
    void (*prefetch)(sl_backend_worker *w, const void *const *keys, const size_t *lens, size_t n);
    /* Optional (NULL: SL_ERR_UNSUPPORTED): what the store holds for a key,
     * in the call. */
    int (*inspect)(sl_backend_worker *w, const void *key, size_t len, sl_backend_key_info *info);
        /* Optional (NULL): the store's health, summed over the workers. */
    void (*stats)(sl_backend *b, struct sl_backend_stats *out);
    /* Frees the backend, after every worker detached. */
    void (*free)(sl_backend *b);
} sl_backend_ops;

struct sl_backend {
    const sl_backend_ops *ops;
    sl_store *store; /* the memory backend's store (snapshots, stats, sweeps); NULL for others */
    bool defers;     /* submit() may answer SL_PENDING */
    bool rates_leased; /* rate limits are leased out ahead (sync): SL_OP_CHARGE of one is
                          refused, so a caller can refuse a settle before it starts */
};

/* memory.c: the embedded store. The store stays the caller's. */
sl_backend *sl_backend_memory(sl_store *store);

/* split.c: each of `nodes` nodes enforces its share of every limit
 * (sl_limit_share) on `inner`, which the split backend then owns (frees).
 * NULL when out of memory or nodes is outside [1, SL_SHARE_NODES_MAX]. */
sl_backend *sl_backend_split(sl_backend *inner, int64_t nodes);

static inline int sl_backend_submit(const sl_backend *b, sl_backend_worker *w, sl_backend_req *r)
{
    return b->ops->submit(w, r);
}

#endif /* SL_BACKEND_H */
