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
 * freed by its ops->close(), which must not be called from within a cb;
 * the loop must then run until the transport's handles have closed. The
 * process must ignore SIGPIPE (sluiced does): a write to a node that died
 * is then an error of that connection. */
sl_transport *sl_transport_cluster(uv_loop_t *loop, const sl_transport_config *cfg);

#endif /* SL_BACKEND_CLUSTER_H */
