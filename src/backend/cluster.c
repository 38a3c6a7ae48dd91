/*
 * cluster.c: the redis backend's transport to a Redis Cluster, over
 * hiredis's async API on the worker's libuv loop (Debian's hiredis 0.14 has
 * no cluster support of its own).
 *
 * What it keeps: the nodes it knows (the seeds, then every address the slot
 * map or a redirection named), one async connection per node it needs, and
 * the slot map (slot -> primary) as CLUSTER SLOTS last said, corrected by
 * MOVED replies in between.
 *
 * The life of a command: send() copies it and writes it to its slot's
 * primary when that connection is ready, else parks it. A parked command is
 * written as soon as its route is there (the map arrives, the connection
 * becomes ready, its TRYAGAIN delay ends), and answered with an error once
 * it has waited SL_CLUSTER_WAIT_MS. A reply ends it, except for the
 * replies that say the command did not run:
 *
 *   MOVED slot addr    the map moved on: the slot is the node's from now on,
 *                      the map is read again (once, whatever the number of
 *                      MOVED replies in flight), the command goes there
 *   ASK slot addr      a slot being migrated: ASKING then the command, to
 *                      that node, once; the map stays as it is
 *   TRYAGAIN,          retried after a short, growing delay, until its
 *   CLUSTERDOWN        deadline (then that reply is its answer)
 *
 * A command follows at most SL_CLUSTER_MAX_REDIRECTS redirections. A command
 * lost with its connection may or may not have run: its cb gets an error
 * and it is never sent again (retrying a take could take twice). A node that
 * leaves a command without a reply for SL_CLUSTER_REPLY_MS loses its
 * connection, and so everything in flight there.
 *
 * Connections: AUTH first when a password is set; a connection that fails
 * or is lost is made again after a jittered exponential backoff, and the map
 * is read again from any node that answers while a primary of the map is
 * unreachable (a failover: a replica is promoted, and the map says so once
 * the cluster agrees): after CL_REFRESH_MS, the wait doubling up to
 * CL_REFRESH_MAX_MS while the reads fail or bring nothing new, so that a
 * fleet's workers do not poll a cluster hard through a long outage. Every connection that becomes
 * ready bumps the transport's epoch.
 *
 * Time is the loop's (uv_now, milliseconds). A single timer ticks every
 * CL_TICK_MS while anything waits for time (a parked command, one in
 * flight, a connection being made, a backoff, a map to read) and stops when
 * nothing does.
 *
 * Host names are resolved by hiredis (getaddrinfo, which blocks the loop):
 * clusters name their nodes by address, and seeds should too.
 */
#include "backend/cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/async.h>
#include <hiredis/adapters/libuv.h>

#include "backend/reply.h"
#include "common/alloc.h"
#include "common/parse.h"

#define CL_SLOTS 16384
#define CL_MAX_NODES 1024      /* addresses known at once */
#define CL_HOST_MAX 255        /* a DNS name's longest text */
#define CL_TICK_MS 10
#define CL_REFRESH_MS 100      /* least time between two reads of the map */
#define CL_REFRESH_MAX_MS 1000 /* and the longest, while reads bring nothing new */
#define CL_BACKOFF_MIN_MS 20   /* a reconnection's first delay (before jitter) */
#define CL_BACKOFF_MAX_MS 2000 /* and its longest */
#define CL_RETRY_MS 10         /* TRYAGAIN's first delay, doubled up to 16 times that */
#define CL_CONNECT_MS 1000     /* connect and AUTH, when the config gives no timeout */

typedef enum cl_state {
    CL_DOWN,       /* no connection (maybe waiting for the backoff) */
    CL_CONNECTING, /* connect(2) in progress */
    CL_AUTHING,    /* connected, AUTH sent */
    CL_READY,      /* commands go here */
    CL_DRAINING,   /* no longer wanted: closing once its replies are in */
} cl_state;

typedef struct cl_cluster cl_cluster;

/* A link of a circular list whose head is a bare link. */
typedef struct cl_link {
    struct cl_link *prev, *next;
} cl_link;

typedef struct cl_node {
    cl_cluster *cl;
    char host[CL_HOST_MAX + 1];
    int port;
    bool seed;   /* given in the config: never forgotten */
    bool in_map; /* a primary of the current map */
    redisAsyncContext *ac;
    cl_state state;
    unsigned attempts;         /* connections failed in a row, for the backoff */
    uint64_t retry_at;         /* no new connection before (loop ms) */
    uint64_t connect_deadline; /* CONNECTING, AUTHING: given up at (loop ms) */
    cl_link inflight;          /* commands written here, oldest first */
    char err[160];             /* why the last connection failed or ended */
} cl_node;

typedef struct cl_cmd {
    cl_link link; /* first: in the parked list, or in its node's in-flight list */
    cl_cluster *cl;
    sl_transport_cb *cb;
    void *priv;
    int slot;           /* -1: any primary */
    int redirects;      /* MOVED and ASK followed so far */
    unsigned retries;   /* TRYAGAIN and CLUSTERDOWN so far */
    cl_node *ask;       /* ASK's node: ASKING first, there, on the next write */
    uint64_t not_before; /* a retry's delay (loop ms) */
    uint64_t deadline;   /* answered with an error when still parked then */
    uint64_t sent_at;    /* written to its node (loop ms) */
    size_t len;
    char buf[];         /* the command in RESP */
} cl_cmd;

struct cl_cluster {
    sl_transport t; /* first: what the backend sees */
    uv_loop_t *loop;
    uv_timer_t tick;
    char *user, *password;
    int connect_timeout_ms;

    cl_node **nodes;
    size_t n_nodes;
    cl_node *owner[CL_SLOTS]; /* the slot map; NULL: no primary known */
    size_t covered;           /* slots with an owner */
    bool have_map;

    bool refresh_wanted;  /* read the map again as soon as CL_REFRESH_MS allow */
    cl_node *refreshing;  /* where CLUSTER SLOTS is in flight, NULL when nowhere */
    uintptr_t refresh_seq; /* the read in flight: an older one's reply is ignored */
    uint64_t refresh_deadline; /* given up, and asked elsewhere, at (loop ms) */
    uint64_t refresh_at;  /* no read of the map before (loop ms) */
    unsigned refresh_idle; /* reads in a row that failed or changed nothing */
    size_t refresh_next;  /* where the next read looks first, round robin */
    char map_err[448];    /* why the last read of the map failed */

    cl_link parked; /* commands waiting for a route or a retry */
    size_t n_parked;

    bool closing;
    uint64_t rng;
    char err[1024]; /* the text handed to a cb as err, valid during the cb */
};

static const sl_transport_ops cl_ops;

/* ---- small helpers ---- */

static uint64_t cl_now(const cl_cluster *cl)
{
    return uv_now(cl->loop);
}

static void cl_list_init(cl_link *head)
{
    head->prev = head->next = head;
}

static void cl_list_append(cl_link *head, cl_link *l)
{
    l->prev = head->prev;
    l->next = head;
    head->prev->next = l;
    head->prev = l;
}

static void cl_list_remove(cl_link *l)
{
    l->prev->next = l->next;
    l->next->prev = l->prev;
    l->prev = l->next = NULL;
}

/* xorshift64*: jitter only, nothing that needs to be unpredictable. */
static uint64_t cl_random(cl_cluster *cl)
{
    cl->rng ^= cl->rng >> 12;
    cl->rng ^= cl->rng << 25;
    cl->rng ^= cl->rng >> 27;
    return cl->rng * UINT64_C(2685821657736338717);
}

static void cl_on_tick(uv_timer_t *h);

/* Starts the tick when something waits for time; the tick stops itself. */
static void cl_wake(cl_cluster *cl)
{
    if (!cl->closing && !uv_is_active((uv_handle_t *)&cl->tick))
        uv_timer_start(&cl->tick, cl_on_tick, CL_TICK_MS, CL_TICK_MS);
}

/* A host as a node may be named: a name or an address literal (IPv6's colons
 * included), nothing that could smuggle a second argument or a path. */
static bool cl_host_ok(const char *h, size_t len)
{
    if (len == 0 || len > CL_HOST_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = h[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '-' || c == '_' || c == ':'))
            return false;
    }
    return true;
}

/* "host:port" (the last colon splits, for IPv6): true with *hlen and *port
 * set when both parts are valid; an empty host too when empty_host. */
static bool cl_parse_addr(const char *s, size_t len, bool empty_host, size_t *hlen, int *port)
{
    size_t colon = len;
    while (colon > 0 && s[colon - 1] != ':')
        colon--;
    if (colon == 0 || colon == len || len - colon > 5)
        return false;
    int64_t p;
    if (!sl_parse_i64(s + colon, len - colon, SL_INT_NO_SIGN, &p) || p < 1 || p > 65535 ||
        !(cl_host_ok(s, colon - 1) || (empty_host && colon == 1)))
        return false;
    *hlen = colon - 1;
    *port = (int)p;
    return true;
}

/* The node at host:port, made (not connected) when new. NULL when the
 * address is invalid or CL_MAX_NODES are known. The node is the cluster's. */
static cl_node *cl_node_get(cl_cluster *cl, const char *host, size_t hlen, int port)
{
    if (!cl_host_ok(host, hlen) || port < 1 || port > 65535)
        return NULL;
    for (size_t i = 0; i < cl->n_nodes; i++) {
        cl_node *n = cl->nodes[i];
        if (n->port == port && strlen(n->host) == hlen && memcmp(n->host, host, hlen) == 0)
            return n;
    }
    if (cl->n_nodes == CL_MAX_NODES)
        return NULL;
    cl_node *n = sl_calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->cl = cl;
    memcpy(n->host, host, hlen);
    n->host[hlen] = '\0';
    n->port = port;
    n->state = CL_DOWN;
    cl_list_init(&n->inflight);
    cl->nodes[cl->n_nodes++] = n;
    return n;
}

/* Hands a command its answer, once, and frees it. */
static void cl_answer(cl_cmd *c, redisReply *reply, const char *err)
{
    sl_transport_cb *cb = c->cb;
    void *priv = c->priv;
    sl_free(c);
    cb(priv, reply, err);
}

static void cl_park(cl_cluster *cl, cl_cmd *c)
{
    cl_list_append(&cl->parked, &c->link);
    cl->n_parked++;
    cl_wake(cl);
}

static void cl_unpark(cl_cluster *cl, cl_cmd *c)
{
    cl_list_remove(&c->link);
    cl->n_parked--;
}

/* ---- connections ---- */

/* The next connection to n waits for a delay drawn from [d/2, d], d doubling
 * with each failure in a row up to CL_BACKOFF_MAX_MS: nodes that come back
 * are not hit by every worker at the same instant. */
static void cl_backoff(cl_node *n)
{
    cl_cluster *cl = n->cl;
    unsigned shift = n->attempts < 7 ? n->attempts : 7;
    uint64_t d = (uint64_t)CL_BACKOFF_MIN_MS << shift;
    if (d > CL_BACKOFF_MAX_MS)
        d = CL_BACKOFF_MAX_MS;
    n->retry_at = cl_now(cl) + d / 2 + cl_random(cl) % (d / 2 + 1);
    n->attempts++;
}

/* The connection's end as the cluster sees it: the node is down, a backoff
 * before the next connection, the map read again if it was a primary. */
static void cl_node_lost(cl_node *n, const char *why)
{
    cl_cluster *cl = n->cl;
    n->ac = NULL;
    n->state = CL_DOWN;
    snprintf(n->err, sizeof n->err, "%s", why && *why ? why : "connection closed");
    cl_backoff(n);
    if (n->in_map)
        cl->refresh_wanted = true;
    cl_wake(cl);
}

/* Ends n's connection now: what is in flight there is answered with an error
 * (by hiredis's callbacks with no reply). */
static void cl_node_drop(cl_node *n, const char *why)
{
    redisAsyncContext *ac = n->ac;
    if (!ac)
        return;
    cl_node_lost(n, why);
    redisAsyncFree(ac);
}

static void cl_flush(cl_cluster *cl);
static void cl_refresh(cl_cluster *cl);

static void cl_node_ready(cl_node *n)
{
    cl_cluster *cl = n->cl;
    n->state = CL_READY;
    n->attempts = 0;
    n->err[0] = '\0';
    cl->t.epoch++;
    if (!cl->refreshing && (!cl->have_map || cl->refresh_wanted) && cl_now(cl) >= cl->refresh_at)
        cl_refresh(cl);
    cl_flush(cl);
}

static void cl_on_auth(redisAsyncContext *ac, void *r, void *priv)
{
    cl_node *n = priv;
    redisReply *reply = r;
    /* No reply: the connection ended, and its own callback says so. */
    if (n->ac != ac || !reply || n->cl->closing)
        return;
    if (reply->type == REDIS_REPLY_ERROR) {
        char why[sizeof n->err];
        snprintf(why, sizeof why, "AUTH: %s", reply->str);
        cl_node_drop(n, why);
        return;
    }
    cl_node_ready(n);
}

static void cl_on_connect(const redisAsyncContext *ac, int status)
{
    cl_node *n = ac->data;
    if (n->ac != ac)
        return;
    if (status != REDIS_OK) {
        /* hiredis frees the context after this callback. */
        cl_node_lost(n, ac->errstr);
        return;
    }
    if (n->cl->password)
        n->state = CL_AUTHING;
    else
        cl_node_ready(n);
}

static void cl_on_disconnect(const redisAsyncContext *ac, int status)
{
    cl_node *n = ac->data;
    if (n->ac != ac)
        return;
    bool drained = n->state == CL_DRAINING && status == REDIS_OK;
    cl_node_lost(n, status == REDIS_OK ? "connection closed" : ac->errstr);
    if (drained) {
        /* A connection closed on purpose: not a failure of the node. */
        n->attempts = 0;
        n->retry_at = 0;
    }
}

/* Starts a connection to n (AUTH queued behind it when a password is set). */
static void cl_connect(cl_node *n)
{
    cl_cluster *cl = n->cl;
    if (cl->closing)
        return;
    redisAsyncContext *ac = redisAsyncConnect(n->host, n->port);
    if (!ac) {
        cl_node_lost(n, "out of memory");
        return;
    }
    if (ac->err) {
        char why[sizeof n->err];
        snprintf(why, sizeof why, "%s", ac->errstr);
        redisAsyncFree(ac);
        cl_node_lost(n, why);
        return;
    }
    ac->data = n;
    sl_reply_pool_install(&ac->c);
    if (redisLibuvAttach(ac, cl->loop) != REDIS_OK) {
        redisAsyncFree(ac);
        cl_node_lost(n, "cannot watch the connection on the loop");
        return;
    }
    redisAsyncSetConnectCallback(ac, cl_on_connect);
    redisAsyncSetDisconnectCallback(ac, cl_on_disconnect);
    n->ac = ac;
    n->state = CL_CONNECTING;
    n->connect_deadline = cl_now(cl) + (uint64_t)cl->connect_timeout_ms;
    if (cl->password) {
        const char *argv[3] = {"AUTH", cl->user, cl->password};
        size_t lens[3] = {4, cl->user ? strlen(cl->user) : 0, strlen(cl->password)};
        int argc = 3;
        if (!cl->user) {
            argv[1] = cl->password;
            lens[1] = lens[2];
            argc = 2;
        }
        if (redisAsyncCommandArgv(ac, cl_on_auth, n, argc, argv, lens) != REDIS_OK) {
            cl_node_drop(n, "out of memory");
            return;
        }
    }
    cl_wake(cl);
}

/* Connects n if it has no connection and its backoff is over. */
static void cl_want(cl_node *n)
{
    if (n->state == CL_DOWN && !n->ac && cl_now(n->cl) >= n->retry_at)
        cl_connect(n);
}

/* ---- the slot map ---- */

static void cl_on_slots(redisAsyncContext *ac, void *r, void *priv);

/* Reads the map from a ready node, the nodes taken in turn; when none is
 * ready, connects the next one that may be (the seeds first, in order, at
 * the start), one at a time. */
static void cl_refresh(cl_cluster *cl)
{
    if (cl->refreshing || cl->closing || cl->n_nodes == 0)
        return;
    for (size_t k = 0; k < cl->n_nodes; k++) {
        cl_node *n = cl->nodes[(cl->refresh_next + k) % cl->n_nodes];
        if (n->state != CL_READY)
            continue;
        uintptr_t seq = cl->refresh_seq + 1;
        if (redisAsyncCommand(n->ac, cl_on_slots, (void *)seq, "CLUSTER SLOTS") != REDIS_OK)
            continue;
        cl->refresh_seq = seq;
        cl->refresh_next = (cl->refresh_next + k + 1) % cl->n_nodes;
        cl->refreshing = n;
        cl->refresh_wanted = false;
        /* The next read waits [d/2, d]: d is CL_REFRESH_MS, doubled for each
         * read in a row that brought nothing new, up to CL_REFRESH_MAX_MS. */
        unsigned shift = cl->refresh_idle < 4 ? cl->refresh_idle : 4;
        uint64_t d = (uint64_t)CL_REFRESH_MS << shift;
        if (d > CL_REFRESH_MAX_MS)
            d = CL_REFRESH_MAX_MS;
        cl->refresh_at = cl_now(cl) + (shift ? d / 2 + cl_random(cl) % (d / 2 + 1) : d);
        cl->refresh_deadline = cl_now(cl) + (uint64_t)cl->connect_timeout_ms;
        return;
    }
    for (size_t k = 0; k < cl->n_nodes; k++)
        if (cl->nodes[k]->state == CL_CONNECTING || cl->nodes[k]->state == CL_AUTHING)
            return; /* its readiness reads the map */
    for (size_t k = 0; k < cl->n_nodes; k++) {
        cl_node *n = cl->nodes[(cl->refresh_next + k) % cl->n_nodes];
        if (n->state == CL_DOWN && cl_now(cl) >= n->retry_at) {
            cl->refresh_next = (cl->refresh_next + k) % cl->n_nodes;
            cl_connect(n);
            return;
        }
    }
}

/* An integer element of a CLUSTER SLOTS reply, within [lo, hi]. */
static bool cl_int_in(const redisReply *r, long long lo, long long hi, long long *v)
{
    if (r->type != REDIS_REPLY_INTEGER || r->integer < lo || r->integer > hi)
        return false;
    *v = r->integer;
    return true;
}

int sl_cluster_parse_slots(const redisReply *r, sl_cluster_range *out, const char **err)
{
    if (r->type != REDIS_REPLY_ARRAY) {
        /* An error reply's text says it best, unless it says nothing. */
        *err = r->type == REDIS_REPLY_ERROR && r->str[0] ? r->str : "CLUSTER SLOTS: not an array";
        return -1;
    }
    if (r->elements > CL_SLOTS) {
        *err = "CLUSTER SLOTS: more ranges than slots";
        return -1;
    }
    uint64_t seen[CL_SLOTS / 64] = {0};
    int n = 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        long long lo, hi, port;
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            !cl_int_in(e->element[0], 0, CL_SLOTS - 1, &lo) ||
            !cl_int_in(e->element[1], lo, CL_SLOTS - 1, &hi)) {
            *err = "CLUSTER SLOTS: a range is not [start, end, primary, ...]";
            return -1;
        }
        const redisReply *p = e->element[2];
        if (p->type != REDIS_REPLY_ARRAY || p->elements < 2 ||
            (p->element[0]->type != REDIS_REPLY_STRING && p->element[0]->type != REDIS_REPLY_NIL) ||
            !cl_int_in(p->element[1], 0, 65535, &port)) {
            *err = "CLUSTER SLOTS: a primary is not [host, port, ...]";
            return -1;
        }
        for (long long s = lo; s <= hi; s++) {
            if (seen[s / 64] & (UINT64_C(1) << (s % 64))) {
                *err = "CLUSTER SLOTS: ranges overlap";
                return -1;
            }
            seen[s / 64] |= UINT64_C(1) << (s % 64);
        }
        /* A primary whose address the cluster does not know ("?": no host name
         * announced; port 0): its slots stay without an owner until a later
         * read. A null (cluster-preferred-endpoint-type unknown-endpoint) or
         * empty host is the answering node's. */
        const redisReply *h = p->element[0];
        if (port == 0 || (h->type == REDIS_REPLY_STRING && h->len == 1 && h->str[0] == '?'))
            continue;
        if (h->type == REDIS_REPLY_NIL) {
            out[n++] = (sl_cluster_range){(int)lo, (int)hi, NULL, 0, (int)port};
            continue;
        }
        if (h->len > 0 && !cl_host_ok(h->str, h->len)) {
            *err = "CLUSTER SLOTS: a primary's host is not a host name or address";
            return -1;
        }
        out[n++] = (sl_cluster_range){(int)lo, (int)hi, h->len ? h->str : NULL, h->len,
                                      (int)port};
    }
    return n;
}

/* Builds the map a CLUSTER SLOTS reply describes into fresh[] (NULL for a
 * slot with no primary). from: the node that answered, whose address stands
 * for an empty host. Returns NULL, or what is wrong with the reply. */
static const char *cl_read_slots(cl_cluster *cl, const redisReply *r, const cl_node *from,
                                 cl_node **fresh)
{
    const char *err = NULL;
    sl_cluster_range *ranges = NULL;
    if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 && r->elements <= CL_SLOTS) {
        ranges = sl_malloc(r->elements * sizeof *ranges);
        if (!ranges)
            return "out of memory";
    }
    int n = sl_cluster_parse_slots(r, ranges, &err);
    for (int i = 0; i < n && !err; i++) {
        const sl_cluster_range *g = &ranges[i];
        cl_node *node = g->host ? cl_node_get(cl, g->host, g->hlen, g->port)
                                : cl_node_get(cl, from->host, strlen(from->host), g->port);
        if (!node)
            err = "CLUSTER SLOTS: more nodes than a transport keeps, or out of memory";
        for (int s = g->lo; s <= g->hi && node; s++)
            fresh[s] = node;
    }
    sl_free(ranges);
    return err;
}

/* Forgets the nodes that are neither seeds nor primaries, have no
 * connection, and no parked command asks for. */
static void cl_prune(cl_cluster *cl)
{
    size_t kept = 0;
    for (size_t i = 0; i < cl->n_nodes; i++) {
        cl_node *n = cl->nodes[i];
        bool keep = n->seed || n->in_map || n->ac;
        for (cl_link *l = cl->parked.next; !keep && l != &cl->parked; l = l->next)
            keep = ((cl_cmd *)l)->ask == n;
        if (keep)
            cl->nodes[kept++] = n;
        else
            sl_free(n);
    }
    cl->n_nodes = kept;
    if (cl->refresh_next >= kept)
        cl->refresh_next = 0;
}

static void cl_on_slots(redisAsyncContext *ac, void *r, void *priv)
{
    cl_node *from = ac->data;
    cl_cluster *cl = from->cl;
    /* A read given up on (or the transport closing): its answer comes too late. */
    if (cl->closing || !cl->refreshing || (uintptr_t)priv != cl->refresh_seq)
        return;
    cl->refreshing = NULL;
    const char *bad = r ? NULL : "CLUSTER SLOTS: the connection was lost";
    cl_node **fresh = NULL;
    if (!bad) {
        fresh = sl_calloc(CL_SLOTS, sizeof *fresh);
        bad = fresh ? cl_read_slots(cl, r, from, fresh) : "out of memory";
    }
    if (bad) {
        snprintf(cl->map_err, sizeof cl->map_err, "%s:%d: %s", from->host, from->port, bad);
        sl_free(fresh);
        cl->refresh_idle += cl->refresh_idle < 16;
        cl->refresh_wanted = true;
        cl_wake(cl);
        return;
    }
    bool changed = !cl->have_map;
    for (size_t s = 0; s < CL_SLOTS && !changed; s++)
        changed = cl->owner[s] != fresh[s];
    cl->refresh_idle = changed ? 0 : cl->refresh_idle + (cl->refresh_idle < 16);
    for (size_t i = 0; i < cl->n_nodes; i++)
        cl->nodes[i]->in_map = false;
    cl->covered = 0;
    for (size_t s = 0; s < CL_SLOTS; s++) {
        cl->owner[s] = fresh[s];
        if (fresh[s]) {
            fresh[s]->in_map = true;
            cl->covered++;
        }
    }
    sl_free(fresh);
    cl->have_map = true;
    cl->map_err[0] = '\0';
    /* A connection to a node that is no longer a primary closes once its
     * replies are in (they may be MOVED, and are followed then). */
    for (size_t i = 0; i < cl->n_nodes; i++) {
        cl_node *n = cl->nodes[i];
        if (n->in_map || !n->ac)
            continue;
        if (n->state == CL_READY) {
            n->state = CL_DRAINING;
            redisAsyncDisconnect(n->ac);
        } else if (n->state != CL_DRAINING) {
            cl_node_drop(n, "no longer a primary");
        }
    }
    cl_prune(cl);
    for (size_t i = 0; i < cl->n_nodes; i++)
        if (cl->nodes[i]->in_map)
            cl_want(cl->nodes[i]);
    cl_flush(cl);
    cl_wake(cl);
}

/* ---- commands ---- */

static void cl_on_reply(redisAsyncContext *ac, void *r, void *priv);

/* The node a command goes to now, or NULL when there is none yet. */
static cl_node *cl_route(cl_cluster *cl, const cl_cmd *c)
{
    if (c->ask)
        return c->ask;
    if (c->slot >= 0)
        return cl->have_map ? cl->owner[c->slot] : NULL;
    cl_node *any = NULL;
    for (size_t i = 0; i < cl->n_nodes; i++) {
        cl_node *n = cl->nodes[i];
        if (n->in_map && (!any || (n->state == CL_READY && any->state != CL_READY)))
            any = n;
    }
    return any;
}

/* Writes c to its node when that node is ready: true when written (hiredis
 * then calls cl_on_reply once), false when c must wait. Never calls a cb. */
static bool cl_dispatch(cl_cluster *cl, cl_cmd *c)
{
    cl_node *n = cl_route(cl, c);
    if (!n) {
        /* Without a map, its read is under way already. */
        if (cl->have_map)
            cl->refresh_wanted = true;
        return false;
    }
    if (n->state != CL_READY) {
        cl_want(n);
        return false;
    }
    if (c->ask && redisAsyncCommand(n->ac, NULL, NULL, "ASKING") != REDIS_OK)
        return false;
    if (redisAsyncFormattedCommand(n->ac, cl_on_reply, c, c->buf, c->len) != REDIS_OK)
        return false;
    c->sent_at = cl_now(cl);
    cl_list_append(&n->inflight, &c->link);
    cl_wake(cl);
    return true;
}

/* Writes every parked command whose route is there and whose delay is over. */
static void cl_flush(cl_cluster *cl)
{
    uint64_t now = cl_now(cl);
    cl_link *l = cl->parked.next;
    while (l != &cl->parked) {
        cl_link *next = l->next;
        cl_cmd *c = (cl_cmd *)l;
        /* Unparked before the write (which puts it in its node's list), and
         * parked again at its place when it still waits, so that this walk
         * ends. */
        if (now >= c->not_before) {
            cl_unpark(cl, c);
            if (!cl_dispatch(cl, c)) {
                cl_list_append(next, l); /* before next: where it was */
                cl->n_parked++;
            }
        }
        l = next;
    }
}

/* Why a command could not be routed before its deadline, into cl->err. */
static const char *cl_why_unrouted(cl_cluster *cl, const cl_cmd *c)
{
    const cl_node *n = cl_route(cl, c);
    if (n) {
        snprintf(cl->err, sizeof cl->err, "no connection to %s:%d within %d ms (%s)", n->host,
                 n->port, SL_CLUSTER_WAIT_MS, n->err[0] ? n->err : "connecting");
        return cl->err;
    }
    if (cl->have_map) {
        snprintf(cl->err, sizeof cl->err, "slot %d not served by any node within %d ms",
                 c->slot, SL_CLUSTER_WAIT_MS);
        return cl->err;
    }
    const char *why = cl->map_err[0] ? cl->map_err : NULL;
    char seed[CL_HOST_MAX + sizeof ((cl_node *)0)->err + 16];
    /* Else why the seeds did not answer: the first one's reason stands for all. */
    for (size_t i = 0; i < cl->n_nodes && !why; i++) {
        n = cl->nodes[i];
        if (n->err[0]) {
            snprintf(seed, sizeof seed, "%s:%d: %s", n->host, n->port, n->err);
            why = seed;
        }
    }
    snprintf(cl->err, sizeof cl->err, "no slot map from the cluster within %d ms (%s)",
             SL_CLUSTER_WAIT_MS, why ? why : "no node answered");
    return cl->err;
}

bool sl_cluster_parse_redirect(const char *s, size_t len, int *slot, size_t *hlen, int *port)
{
    const char *sp = memchr(s, ' ', len < 6 ? len : 6);
    size_t i = sp ? (size_t)(sp - s) : 0;
    int64_t v;
    if (!sp || !sl_parse_i64(s, i, SL_INT_NO_SIGN, &v) || v >= CL_SLOTS)
        return false;
    i++;
    if (!cl_parse_addr(s + i, len - i, true, hlen, port))
        return false;
    *slot = (int)v;
    return true;
}

/* "MOVED 3999 127.0.0.1:6381" or "ASK ...", from node `from`: true with the
 * slot and the node named (an empty host, "MOVED 3999 :6381", is from's). */
static bool cl_redirect_target(cl_cluster *cl, const redisReply *r, size_t skip,
                               const cl_node *from, int *slot, cl_node **to)
{
    size_t hlen;
    int port;
    if (!sl_cluster_parse_redirect(r->str + skip, r->len - skip, slot, &hlen, &port))
        return false;
    /* The host starts after the slot and its blank. */
    const char *host = (const char *)memchr(r->str + skip, ' ', r->len - skip) + 1;
    if (hlen == 0) {
        host = from->host;
        hlen = strlen(from->host);
    }
    *to = cl_node_get(cl, host, hlen, port);
    return *to != NULL;
}

static bool cl_prefix(const redisReply *r, const char *pre)
{
    size_t n = strlen(pre);
    return r->len >= n && memcmp(r->str, pre, n) == 0;
}

static void cl_on_reply(redisAsyncContext *ac, void *r, void *priv)
{
    cl_cmd *c = priv;
    cl_cluster *cl = c->cl;
    cl_node *from = ac->data;
    redisReply *reply = r;
    cl_list_remove(&c->link);
    c->ask = NULL;
    if (!reply) {
        if (cl->closing) {
            cl_answer(c, NULL, "transport closing");
        } else {
            /* hiredis's error when it ended the connection, else ours. */
            snprintf(cl->err, sizeof cl->err, "connection to %s:%d lost (%s)", from->host,
                     from->port, ac->err ? ac->errstr : from->err[0] ? from->err : "closed");
            cl_answer(c, NULL, cl->err);
        }
        return;
    }
    if (reply->type == REDIS_REPLY_ERROR && !cl->closing) {
        bool moved = cl_prefix(reply, "MOVED "), ask = cl_prefix(reply, "ASK ");
        if (moved || ask) {
            int slot;
            cl_node *to;
            if (!cl_redirect_target(cl, reply, moved ? 6 : 4, from, &slot, &to)) {
                cl_answer(c, reply, NULL);
                return;
            }
            if (++c->redirects > SL_CLUSTER_MAX_REDIRECTS) {
                snprintf(cl->err, sizeof cl->err, "too many cluster redirections (more than %d), "
                         "the last: %.*s", SL_CLUSTER_MAX_REDIRECTS,
                         (int)(reply->len > 200 ? 200 : reply->len), reply->str);
                cl_answer(c, NULL, cl->err);
                return;
            }
            if (moved && cl->owner[slot] != to) {
                if (!cl->owner[slot])
                    cl->covered++;
                cl->owner[slot] = to;
                to->in_map = true;
                cl->refresh_wanted = true;
                cl_wake(cl);
            }
            if (ask)
                c->ask = to;
            if (!cl_dispatch(cl, c))
                cl_park(cl, c);
            return;
        }
        bool down = cl_prefix(reply, "CLUSTERDOWN");
        if (down || cl_prefix(reply, "TRYAGAIN")) {
            unsigned shift = c->retries < 4 ? c->retries : 4;
            uint64_t at = cl_now(cl) + ((uint64_t)CL_RETRY_MS << shift);
            if (at > c->deadline) {
                cl_answer(c, reply, NULL);
                return;
            }
            c->retries++;
            c->not_before = at;
            if (down)
                cl->refresh_wanted = true;
            cl_park(cl, c);
            return;
        }
    }
    cl_answer(c, reply, NULL);
}

static void cl_on_tick(uv_timer_t *h)
{
    cl_cluster *cl = h->data;
    uint64_t now = cl_now(cl);
    bool waiting = false;
    for (size_t i = 0; i < cl->n_nodes; i++) {
        cl_node *n = cl->nodes[i];
        if ((n->state == CL_CONNECTING || n->state == CL_AUTHING) && now >= n->connect_deadline)
            cl_node_drop(n, n->state == CL_CONNECTING ? "connect timed out" : "AUTH timed out");
        cl_link *oldest = n->inflight.next;
        if (n->ac && oldest != &n->inflight &&
            now - ((cl_cmd *)oldest)->sent_at >= SL_CLUSTER_REPLY_MS) {
            char why[64];
            snprintf(why, sizeof why, "no reply within %d ms", SL_CLUSTER_REPLY_MS);
            cl_node_drop(n, why);
        }
        if (n->in_map)
            cl_want(n);
        /* In flight: its reply is watched for. */
        if (n->state == CL_CONNECTING || n->state == CL_AUTHING || (n->in_map && !n->ac) ||
            (n->ac && n->inflight.next != &n->inflight))
            waiting = true;
    }
    if (cl->closing)
        return; /* a cb answered above closed the transport */
    if (cl->refreshing && now >= cl->refresh_deadline) {
        /* The map is asked of the next node when one takes longer than a
         * connection may. A node outside the map (a seed) that does not
         * answer is of no use, and its connection ends; a primary's serves
         * its commands, which have their own bound (SL_CLUSTER_REPLY_MS). */
        cl_node *n = cl->refreshing;
        cl->refreshing = NULL;
        cl->refresh_seq++;
        cl->refresh_wanted = true;
        snprintf(cl->map_err, sizeof cl->map_err, "%s:%d: CLUSTER SLOTS: no answer within %d ms",
                 n->host, n->port, cl->connect_timeout_ms);
        if (!n->in_map)
            cl_node_drop(n, "CLUSTER SLOTS: no answer in time");
    }
    if (!cl->refreshing && now >= cl->refresh_at &&
        (cl->refresh_wanted || !cl->have_map || waiting))
        cl_refresh(cl);
    cl_flush(cl);
    /* Commands out of time: answered last, since a cb may send again. */
    cl_link *l = cl->parked.next;
    while (l != &cl->parked) {
        cl_link *next = l->next;
        cl_cmd *c = (cl_cmd *)l;
        if (now >= c->deadline) {
            cl_unpark(cl, c);
            const char *why = cl_why_unrouted(cl, c);
            cl_answer(c, NULL, why);
            if (cl->closing)
                return;
        }
        l = next;
    }
    if (!waiting && !cl->refresh_wanted && !cl->refreshing && cl->have_map && cl->n_parked == 0)
        uv_timer_stop(&cl->tick);
}

/* ---- the interface ---- */

static int cl_send(sl_transport *t, int slot, const char *cmd, size_t len, sl_transport_cb *cb,
                   void *priv)
{
    cl_cluster *cl = (cl_cluster *)t;
    if (cl->closing || slot < -1 || slot >= CL_SLOTS || !cmd || len == 0 || !cb ||
        len > SIZE_MAX - sizeof(cl_cmd))
        return -1;
    cl_cmd *c = sl_malloc(sizeof *c + len);
    if (!c)
        return -1;
    memset(c, 0, sizeof *c);
    c->cl = cl;
    c->cb = cb;
    c->priv = priv;
    c->slot = slot;
    c->deadline = cl_now(cl) + SL_CLUSTER_WAIT_MS;
    c->len = len;
    memcpy(c->buf, cmd, len);
    if (!cl_dispatch(cl, c)) {
        if (cl->n_parked >= SL_CLUSTER_MAX_WAITING) {
            sl_free(c);
            return -1;
        }
        cl_park(cl, c);
    }
    return 0;
}

static bool cl_ready(sl_transport *t)
{
    cl_cluster *cl = (cl_cluster *)t;
    if (!cl->have_map || cl->covered != CL_SLOTS)
        return false;
    for (size_t i = 0; i < cl->n_nodes; i++)
        if (cl->nodes[i]->in_map && cl->nodes[i]->state != CL_READY)
            return false;
    return true;
}

static void cl_free_secret(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        sl_free(s);
    }
}

static void cl_on_closed(uv_handle_t *h)
{
    cl_cluster *cl = h->data;
    for (size_t i = 0; i < cl->n_nodes; i++)
        sl_free(cl->nodes[i]);
    sl_free(cl->nodes);
    sl_free(cl->user);
    cl_free_secret(cl->password);
    sl_free(cl);
}

static void cl_close(sl_transport *t)
{
    cl_cluster *cl = (cl_cluster *)t;
    if (cl->closing)
        return;
    cl->closing = true;
    while (cl->parked.next != &cl->parked) {
        cl_cmd *c = (cl_cmd *)cl->parked.next;
        cl_unpark(cl, c);
        cl_answer(c, NULL, "transport closing");
    }
    /* Freeing a context answers what is in flight there (cl_on_reply, no
     * reply, closing); its disconnect callback finds the node let go. */
    for (size_t i = 0; i < cl->n_nodes; i++) {
        cl_node *n = cl->nodes[i];
        redisAsyncContext *ac = n->ac;
        n->ac = NULL;
        n->state = CL_DOWN;
        if (ac)
            redisAsyncFree(ac);
    }
    uv_timer_stop(&cl->tick);
    uv_close((uv_handle_t *)&cl->tick, cl_on_closed);
}

static const sl_transport_ops cl_ops = {
    .send = cl_send,
    .ready = cl_ready,
    .close = cl_close,
};

/* Adds each seed of "host:port,host:port" as a node; false when one is
 * malformed or there is none. */
static bool cl_add_seeds(cl_cluster *cl, const char *hosts)
{
    const char *p = hosts;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        size_t hlen;
        int port;
        if (!cl_parse_addr(p, len, false, &hlen, &port))
            return false;
        cl_node *n = cl_node_get(cl, p, hlen, port);
        if (!n)
            return false;
        n->seed = true;
        p += len;
        if (*p == ',' && !*++p)
            return false; /* a trailing comma: an empty seed */
    }
    return cl->n_nodes > 0;
}

sl_transport *sl_transport_cluster(uv_loop_t *loop, const sl_transport_config *cfg)
{
    if (!loop || !cfg || !cfg->hosts)
        return NULL;
    cl_cluster *cl = sl_calloc(1, sizeof *cl);
    if (!cl)
        return NULL;
    cl->t.ops = &cl_ops;
    cl->loop = loop;
    cl_list_init(&cl->parked);
    cl->connect_timeout_ms = cfg->connect_timeout_ms > 0 ? cfg->connect_timeout_ms : CL_CONNECT_MS;
    cl->rng = uv_hrtime() ^ (uint64_t)(uintptr_t)cl;
    if (cl->rng == 0)
        cl->rng = 1;
    cl->nodes = sl_calloc(CL_MAX_NODES, sizeof *cl->nodes);
    bool ok = cl->nodes != NULL;
    if (ok && cfg->password) {
        cl->password = sl_strdup(cfg->password);
        ok = cl->password != NULL;
        if (ok && cfg->user) {
            cl->user = sl_strdup(cfg->user);
            ok = cl->user != NULL;
        }
    }
    if (!ok || !cl_add_seeds(cl, cfg->hosts) || uv_timer_init(loop, &cl->tick) != 0) {
        for (size_t i = 0; i < cl->n_nodes; i++)
            sl_free(cl->nodes[i]);
        sl_free(cl->nodes);
        sl_free(cl->user);
        cl_free_secret(cl->password);
        sl_free(cl);
        return NULL;
    }
    cl->tick.data = cl;
    cl_refresh(cl);
    cl_wake(cl);
    return &cl->t;
}
