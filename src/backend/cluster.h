/*
 * cluster.h: the transport to a Redis Cluster (cluster.c): one connection
 * per primary of the cluster's slot map, each command sent to the primary
 * of its slot, MOVED and ASK followed, TRYAGAIN and CLUSTERDOWN retried for
 * a while, and the map read again when it has moved on or a primary is lost.
 */
#ifndef SL_BACKEND_CLUSTER_H
#define SL_BACKEND_CLUSTER_H

#include "backend/transport.h"

/* The most redirections (MOVED, ASK) one command follows before its cb
 * gets an error. */
#define SL_CLUSTER_MAX_REDIRECTS 5

/* How long, in milliseconds, a command may wait for a route (the slot map,
 * a connection to its primary, the end of a TRYAGAIN) before its cb gets an
 * error. A backend's time budget usually ends first; this bound only keeps a
 * command from waiting forever. */
#define SL_CLUSTER_WAIT_MS 2000

/* How long, in milliseconds, a command written to a node may wait for its
 * reply: then that connection ends, every command in flight on it gets an
 * error (each may have run), and a new one is made. */
#define SL_CLUSTER_REPLY_MS 2000

/* The most commands waiting for a route at once: send() refuses more. */
#define SL_CLUSTER_MAX_WAITING 65536

/* A transport on `loop` that reaches the cluster through the seeds in
 * cfg->hosts ("host:port,host:port", tried in order). The configuration is
 * copied. It starts connecting at once; commands sent before the slot map is
 * known wait for it. Returns NULL when cfg is malformed (no seed, a seed
 * that is not host:port) or memory runs out. The transport is the caller's,
 * freed by its ops->close() (which may be called from within a cb: what is
 * still pending is answered then or, for a connection whose reply is being
 * handed over, as soon as that cb returns); the loop must then run until
 * the transport's handles have closed. The
 * process must ignore SIGPIPE (sluiced does): a write to a node that died
 * is then an error of that connection. */
sl_transport *sl_transport_cluster(uv_loop_t *loop, const sl_transport_config *cfg);

/* The parsers of what nodes say, pure (for cluster.c and its tests). */

/* One range of a CLUSTER SLOTS reply: slots lo..hi, served by host:port. */
typedef struct sl_cluster_range {
    int lo, hi;
    const char *host; /* into the reply, not terminated; NULL: the answering node's */
    size_t hlen;
    int port;
} sl_cluster_range;

/* Reads a CLUSTER SLOTS reply into out[] (room for r->elements ranges): the
 * ranges whose primary has a known address ("?" or port 0 are unknown:
 * their slots have no owner; a null or empty host is the answering node's). Returns their count, or -1 with *err
 * saying what is wrong: an error reply (its text), not an array, more
 * ranges than slots, a range or a primary malformed, slots out of 0..16383
 * or backwards, ranges that overlap, a host that is not a name or address. */
int sl_cluster_parse_slots(const redisReply *r, sl_cluster_range *out, const char **err);

/* The slot and address after a redirection's word ("3999 127.0.0.1:6381"
 * of "MOVED 3999 127.0.0.1:6381"): true with *slot, *port and the host's
 * length (the host starts after the first blank; 0: the host is the one
 * that sent the redirection, as in "3999 :6381"), false when malformed. */
bool sl_cluster_parse_redirect(const char *s, size_t len, int *slot, size_t *hlen, int *port);

#endif /* SL_BACKEND_CLUSTER_H */
