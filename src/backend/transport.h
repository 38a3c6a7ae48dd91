/*
 * transport.h: how the redis backend reaches Redis: one server
 * (transport_single.c) or a Redis Cluster's primaries by hash slot
 * (cluster.c). A transport lives on one worker's loop and is used by that
 * thread only.
 *
 * send() takes a whole command already in RESP (redisFormatCommandArgv's
 * output) and calls cb exactly once: with the reply, or with reply NULL and
 * err saying why (not connected, connection lost, the transport closing).
 * The reply is freed by the transport after cb returns. A cluster follows
 * MOVED and ASK itself; any other error reply reaches cb as a reply.
 */
#ifndef SL_TRANSPORT_H
#define SL_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>
#include <uv.h>

typedef void sl_transport_cb(void *priv, redisReply *reply, const char *err);

typedef struct sl_transport sl_transport;

typedef struct sl_transport_ops {
    /* slot: the hash slot of the command's keys (sl_slot_of), or -1 for
     * any node. Returns 0, or -1 when it cannot even queue the command (cb
     * is then not called). */
    int (*send)(sl_transport *t, int slot, const char *cmd, size_t len, sl_transport_cb *cb,
                void *priv);
    /* Connected (a cluster: to every primary of the slot map). */
    bool (*ready)(sl_transport *t);
    /* Every pending cb is called with an error, then the transport is freed. */
    void (*close)(sl_transport *t);
} sl_transport_ops;

struct sl_transport {
    const sl_transport_ops *ops;
    /* Bumped at every (re)connection of any of its connections, so that the
     * backend learns again what the server runs (the module or not). */
    uint64_t epoch;
};

/* Where to connect and as whom. */
typedef struct sl_transport_config {
    const char *hosts;    /* "host:port" (cluster: comma-separated seeds) */
    const char *user;     /* NULL: AUTH with the password alone */
    const char *password; /* NULL: no AUTH */
    int db;               /* SELECT (single only) */
    int connect_timeout_ms;
} sl_transport_config;

/* Redis Cluster's hash slot of a key (CRC16 of the key, or of its hash tag). */
int sl_slot_of(const char *key, size_t len);

#endif /* SL_TRANSPORT_H */
