/*
 * server.h: sluiced's wiring. The server owns the store, N worker threads
 * (one libuv loop each, all accepting from the port's one listening
 * socket), and a main loop for signals and timers. It only wires the
 * layers below it: the command table (src/cmd), the RESP codec (src/proto)
 * and the store (src/store).
 */
#ifndef SL_SERVER_H
#define SL_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "cmd/cmd.h"
#include "proto/resp.h"
#include "server/metrics.h"
#include "sluice.h"

typedef struct sl_server_config {
    const char *bind;        /* "127.0.0.1" */
    int port;                /* RESP; 0 = off */
    int http_port;           /* HTTP; 0 = off */
    int threads;             /* workers; 0 = number of cores */
    const char *requirepass; /* NULL = no AUTH */
    int maxclients;
    size_t max_request_bytes;
    size_t max_key_bytes;
    int idle_timeout_s;      /* 0 = never */
    size_t max_memory;       /* store cap in bytes; 0 = none */
    const char *snapshot;    /* file, or NULL */
    int snapshot_interval_s; /* 0 = only at shutdown; -1 = not given (60 with a snapshot) */
    const char *config_path;
    int log_level;
    const char *http_auth_header; /* forward-auth: the request header holding the key */
    int http_deny_status;         /* forward-auth: the status of a denial (429, 401, 403) */
} sl_server_config;

struct sl_conn;

typedef struct sl_worker {
    int id;
    struct sl_server *srv;
    uv_loop_t loop;
    uv_tcp_t listener[SL_PROTOS]; /* RESP and HTTP, each on its own port */
    bool listening[SL_PROTOS];
    uv_async_t wakeup; /* the main thread asks for shutdown through it */
    uv_timer_t tick;   /* idle timeouts */
    /* After the reads of a loop iteration have all run, writes the replies
     * they made, as Redis does before it sleeps: the client gets them
     * together, and sends its next requests together. */
    uv_check_t flusher;
    struct sl_conn *to_flush; /* connections with replies to write, by flush_next */
    pthread_t thread;
    struct sl_conn *conns; /* doubly linked, for idle timeouts and shutdown */
    sl_limit_cache limits;
    struct sl_http_check *check; /* HTTP: one decoded check at a time (about 9 KiB) */
    int64_t now; /* monotonic ns, read once per batch of commands */
    int64_t stop_deadline; /* shutdown: when the last connections are closed anyway */
    /* Counters for INFO and /metrics, per worker so that threads never
     * share a cache line on the hot path; readers sum them. */
    _Alignas(64) sl_metrics metrics;
    /* The config epoch this worker has seen: once every worker has seen the
     * current one, no worker holds a pointer to an older config. */
    atomic_uint_fast64_t seen_epoch;
} sl_worker;

typedef struct sl_server {
    sl_server_config cfg;
    sl_store *store;
    sl_worker *workers;
    int nworkers;
    int listen_fd[SL_PROTOS]; /* from sl_listeners_open until the workers share them */
    uint64_t lease_key[2];
    _Atomic bool stopping;
    atomic_int clients;
    atomic_uint_fast64_t next_client_id;
    /* counters for INFO (the per-command ones are in the workers) */
    atomic_uint_fast64_t connections_received, rejected_connections;
    int64_t started_mono;
    /* The policies: replaced whole on SIGHUP. Workers load the pointer once
     * per command and keep it no longer; the old config is freed once every
     * worker has acknowledged the new epoch. */
    _Atomic(struct sl_config *) config;
    struct sl_config *retired;
    atomic_uint_fast64_t epoch;
} sl_server;

/* Tells every worker to look at the server's state again (a new config
 * epoch, or shutdown). */
void sl_workers_wake(sl_server *srv);

/* Monotonic nanoseconds (CLOCK_MONOTONIC). */
int64_t sl_now_mono(void);

/* worker.c: binds and listens on cfg.port and cfg.http_port (those not 0),
 * one socket each, into srv->listen_fd; returns 0, or -1 with the error
 * logged ("cannot listen on 127.0.0.1:7379 (RESP): Address already in use")
 * and nothing left open. */
int sl_listeners_open(sl_server *srv);
/* Closes the sockets of sl_listeners_open that are still open. */
void sl_listeners_close(sl_server *srv);
/* worker.c: starts the workers' threads, each accepting on the sockets of
 * sl_listeners_open; returns 0 or -1 with the error logged. */
int sl_workers_start(sl_server *srv);
/* Asks every worker to stop accepting, finish what is in flight and exit;
 * waits for them. */
void sl_workers_stop(sl_server *srv);

/* commands.c: the store at the worker's clock, for both faces (ex: the
 * sl_worker); store errors are counted for /metrics here. */
extern const sl_exec_ops sl_worker_exec;

/* commands.c: the command sluiced runs for a name (a rate command or a
 * connection command), or NULL. */
const sl_command *sl_server_command(const char *name, size_t len);

/* commands.c: runs one parsed command of a connection: cmd is
 * sl_server_command(argv[0]), NULL for a name sluiced does not know. */
void sl_server_dispatch(struct sl_conn *conn, const sl_command *cmd, int argc,
                        const sl_resp_slice *argv);

/* http.c: serves every complete HTTP request in the connection's read
 * buffer, and returns the bytes it consumed (the rest is a partial request).
 * Sets conn->closing when the connection must close after its replies. */
size_t sl_http_serve(struct sl_conn *conn);

/* The parts of a connection the commands need. */
typedef struct sl_conn {
    uv_tcp_t handle;
    sl_worker *w;
    struct sl_conn *prev, *next;
    uint64_t id;
    char *rbuf;
    size_t rlen, rcap;
    sl_resp_request req;
    sl_resp_slice *argv;
    sl_resp_buf out;     /* replies accumulating */
    sl_resp_buf sending; /* replies being written */
    uv_write_t wreq;
    bool writing;
    bool closing;   /* close once the replies are out */
    bool closed;    /* uv_close called */
    bool reading;
    bool authed;
    bool flush_queued; /* on w->to_flush */
    struct sl_conn *flush_next;
    int proto; /* SL_PROTO_RESP or SL_PROTO_HTTP */
    struct sl_http_conn *http; /* HTTP: the parser's state, allocated on first use */
    char name[64];
    int64_t last_active;
} sl_conn;

#endif
