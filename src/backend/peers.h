/*
 * peers.h: a fleet of sluiced that routes each key to its owner (--peers,
 * --self). The membership (sl_peers) is shared by the process: the list,
 * this node's place in it, the ranking of the peers for every hash slot
 * (owner.h), and what the workers see of each peer's health. Each worker
 * reaches the peers through its own transport (sl_transport_peers): one
 * connection per peer on its loop, each command sent to the owner of its
 * slot among the peers that are up.
 *
 * A peer whose commands fail (no connection, a lost one, no reply, a reply
 * that is not sluiced's) for SL_PEERS_DOWN_MS in a row on a worker is
 * marked down for the node: its slots go to their next-ranked peer, which
 * holds no state for them and starts them fresh. The peer is asked (COMMAND INFO
 * sl.decide) every SL_PEERS_PROBE_MS meanwhile; when it answers as a
 * sluiced does, it is up again and its slots come back.
 *
 * A reload (SIGHUP) replaces the membership (sl_peers_replace): the old one
 * stays readable, pointing to its successor, so that no reader needs a lock.
 */
#ifndef SL_BACKEND_PEERS_H
#define SL_BACKEND_PEERS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/owner.h"
#include "backend/transport.h"

#define SL_PEERS_DOWN_MS 250
#define SL_PEERS_PROBE_MS 100

typedef struct sl_peers {
    size_t n;                   /* peers, 1 .. SL_PEERS_MAX */
    size_t self;                /* this node's index */
    char *names[SL_PEERS_MAX];  /* "host:port" as given */
    uint8_t *rank;              /* sl_owner_rank's, SL_OWNER_SLOTS * n bytes */
    /* How many workers see each peer down (0: up for all). A peer that one
     * worker sees down is down for the whole node, so that every worker
     * routes a key to the same owner; `generation` moves with each change. */
    _Atomic int down[SL_PEERS_MAX];
    _Atomic uint64_t generation;
    /* SL.DECIDEs that arrived for a slot this node does not own by its
     * view: the peers' lists disagree (or their views of who is down).
     * Counted in the first membership, so that a reload keeps the count. */
    _Atomic uint64_t disagreements;
    _Atomic int64_t disagreement_logged_ns; /* the last such log line (one a minute) */
    /* Optional (the server's log): called on a worker's thread when the
     * first worker sees a peer down, and when the last sees it up again. */
    void (*note)(const char *peer, bool up);
    /* The membership that replaced this one (a reload), or NULL: holders of
     * this one follow it (sl_peers_latest). A replaced membership stays
     * until sl_peers_free of the first, at exit. */
    _Atomic(struct sl_peers *) successor;
    char *list; /* --peers as given */
} sl_peers;

/*
 * Builds the membership from --peers ("host:port,host:port,...") and
 * --self (one of them, exactly as written there). Returns the membership
 * (freed with sl_peers_free), or NULL with a message in err (n bytes)
 * naming the rule broken: an empty or malformed entry, a port out of
 * 1..65535, a peer listed twice, more than SL_PEERS_MAX, a self that is
 * not in the list, or out of memory.
 */
sl_peers *sl_peers_new(const char *list, const char *self, char *err, size_t n);

/* Frees p and every membership that replaced it. */
void sl_peers_free(sl_peers *p);

/* The membership in force: p, or the last of those that replaced it. */
sl_peers *sl_peers_latest(sl_peers *p);

/* Puts `next` in force after the membership in force (which p is or was),
 * for every worker: their transports take it at their next tick (within
 * 50 ms), closing the connections of the old list and opening the new
 * one's; the peers' health starts afresh (every peer up). next must keep
 * this node as its self; it is freed with p. */
void sl_peers_replace(sl_peers *p, sl_peers *next);

/* Peers that at least one worker sees down. */
size_t sl_peers_down_count(const sl_peers *p);

/* Bit i set: no worker sees peer i down. */
uint64_t sl_peers_up_mask(const sl_peers *p);

/* Does this node own the slot, by its view: is it the best-ranked of the
 * peers that no worker sees down? (A slot whose better-ranked peers are
 * down is this node's while they are.) */
bool sl_peers_owns(const sl_peers *p, int slot);

/*
 * The transport of one worker to the peers (transport.h's interface): a
 * command goes to the owner of `slot` (slot -1: this node itself, or the
 * first peer up). `password` is the peers' --requirepass (NULL: none).
 * NULL when out of memory. The membership must outlive the transport.
 */
sl_transport *sl_transport_peers(uv_loop_t *loop, sl_peers *peers, const char *password,
                                 int connect_timeout_ms);

#endif /* SL_BACKEND_PEERS_H */

/*
 * route.c: the backend of a routing fleet's node, over two it owns: `local`
 * (the memory backend: this node's own states) and `remote` (the redis
 * backend over the peers transport). A request whose keys this node owns
 * all (sl_peers_owns) is decided on local, in the call; any other goes
 * through remote, to the owners (this node's own keys among them over
 * loopback). A peer's SL.DECIDE is decided on local always (the server's
 * dispatch, sl_backend_route_local). Its store is local's (snapshots,
 * sweeps, SL.INSPECT). NULL when out of memory (neither is freed then).
 */
struct sl_backend;
struct sl_backend_worker;
struct sl_backend *sl_backend_route(struct sl_backend *local, struct sl_backend *remote,
                                    sl_peers *peers);

/* The local backend of a route backend and its handle for worker w (w is
 * the route backend's handle). */
void sl_backend_route_local(const struct sl_backend *route, struct sl_backend_worker *w,
                            const struct sl_backend **local, struct sl_backend_worker **lw);
