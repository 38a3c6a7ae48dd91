/*
 * server.h: sluiced's wiring. The server owns the backend where states
 * live (src/backend: the in-memory store by default, or Redis), N worker
 * threads (one libuv loop each, all accepting from each port's one
 * listening socket), and a main loop for signals and timers. It only wires
 * the layers below it: the command table (src/cmd), the RESP and HTTP
 * codecs (src/proto), the policies (src/policy) and the backend.
 */
#ifndef SL_SERVER_H
#define SL_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "cmd/cmd.h"
#include "proto/client_addr.h"
#include "proto/resp.h"
#include "server/metrics.h"
#include "sluice.h"

typedef struct sl_server_config {
    const char *bind;        /* "127.0.0.1" */
    int port;                /* RESP; 0 = off */
    int http_port;           /* HTTP; 0 = off */
    int grpc_port;           /* gRPC (server/grpc.c); 0 = off */
    int threads;             /* workers; 0 = number of cores */
    const char *requirepass; /* NULL = no AUTH */
    const char *http_bind;   /* the HTTP port's address; NULL = bind's */
    const char *http_token;  /* HTTP's bearer token; NULL = requirepass's */
    const char *http_open;   /* comma-separated paths HTTP serves without the token, but
                                /healthz, which never needs it; NULL = none */
    int maxclients;
    size_t max_request_bytes;
    size_t max_key_bytes;
    size_t max_adaptive_keys; /* adaptive limiters at once (SL.ACQUIRE ... ADAPTIVE) */
    int idle_timeout_s;      /* 0 = never */
    int request_timeout_s;   /* from a request's first byte to its last; 0 = no deadline */
    int port_share_pct;      /* percent of maxclients one port may hold while both are on */
    size_t max_memory;       /* store cap in bytes; 0 = none */
    const char *store_url;   /* --store: memory:// or a remote store's URL */
    int on_store_error;      /* an sl_on_error: the default store-down policy */
    int store_timeout_ms;    /* a check's time budget with a remote store */
    int split;               /* --split: nodes sharing each limit, each enforcing limit / N
                                (with a remote store, its local store-down limiter) */
    const char *peers;       /* --peers: the routing fleet's nodes, or NULL */
    const char *self;        /* --self: this node among them */
    const char *snapshot;    /* file, or NULL */
    int snapshot_interval_s; /* 0 = only at shutdown; -1 = not given (60 with a snapshot) */
    const char *config_path;
    const char *envoy_config; /* --envoy-config: envoyproxy/ratelimit's directory, or NULL */
    const char *const *envoy_headers; /* --envoy-headers: 3 names, or NULL for none */
    bool allow_empty_reload; /* SIGHUP may remove every policy in force */
    int log_level;
    const char *http_auth_header; /* forward-auth: the request header holding the key */
    int http_deny_status;         /* forward-auth: the status of a denial (429, 401, 403) */
    /* forward-auth: the proxies whose X-Forwarded-For, Forwarded or
     * X-Real-IP is believed (--trusted-proxies; proto/client_addr.h) */
    sl_trusted_proxies trusted_proxies;
    /* --client-output-buffer-limit, as Redis's: the replies one client may
     * be owed (queued and not yet taken by the kernel). Past the hard limit
     * it is closed at once; past the soft one (0 = none) for longer than
     * output_soft_s seconds, likewise. */
    size_t output_hard;
    size_t output_soft;
    int output_soft_s;
    const char *decision_log;    /* --decision-log: a file, "-" for stdout, NULL: none */
    uint32_t decision_log_ppm;   /* --decision-log-sample, in parts per million */
    size_t top_keys;  /* --top-keys: counters per policy, kind and window; 0 = off */
    int top_window_s; /* --top-window: the top keys' window */
    uint64_t top_exact_rate; /* --top-exact-rate: decisions a second per thread counted
                                every one; 0 = always every one */
} sl_server_config;

struct sl_conn;

/* The bounds of one transaction's queue (MULTI ... EXEC): a client cannot
 * grow the server's memory without limit by queueing. A command past either
 * is refused, and the transaction with it (EXEC answers EXECABORT). The
 * bytes count what the queue holds: each command's arguments, plus 16 bytes
 * per argument and 24 per command for their bookkeeping. */
#define SL_MULTI_MAX_COMMANDS 1024
#define SL_MULTI_MAX_BYTES ((size_t)1 << 20)

/* A command queued between MULTI and EXEC, in one allocation: its
 * arguments are copied, since the read buffer they came in moves on. */
typedef struct sl_queued {
    const sl_command *cmd;
    int argc;
    sl_resp_slice argv[]; /* argc slices into the bytes that follow them */
} sl_queued;

/* A connection's transaction. All zero outside MULTI. */
typedef struct sl_multi {
    bool active; /* between MULTI and EXEC or DISCARD */
    bool dirty;  /* a command was refused while queueing: EXEC answers EXECABORT */
    sl_queued **queue; /* malloc'ed, as is each command; freed by sl_multi_reset */
    size_t n, cap;
    size_t bytes; /* held by the queue, against SL_MULTI_MAX_BYTES */
} sl_multi;

/* commands.c: frees a transaction's queue and leaves it all zero (out of
 * MULTI). */
void sl_multi_reset(sl_multi *m);

typedef struct sl_worker {
    int id;
    struct sl_server *srv;
    uv_loop_t loop;
    uv_tcp_t listener[SL_PROTOS]; /* RESP, HTTP and gRPC, each on its own port */
    bool listening[SL_PROTOS];
    uv_async_t wakeup; /* the main thread asks for shutdown through it */
    uv_timer_t tick;   /* idle timeouts and request deadlines */
    /* After the reads of a loop iteration have all run, writes the replies
     * they made, as Redis does before it sleeps: the client gets them
     * together, and sends its next requests together. */
    uv_check_t flusher;
    struct sl_conn *to_flush; /* connections with replies to write, by flush_next */
    pthread_t thread;
    struct sl_conn *conns; /* doubly linked, for idle timeouts and shutdown */
    struct sl_grpc_conn *gconns; /* the gRPC face's (grpc.c), likewise */
    uv_timer_t grpc_tick;        /* their deadlines, while there are any */
    struct sl_envoy_stats *envoy_stats; /* ShouldRateLimit's counts (envoy_stats.h) */
    struct sl_dlog_worker *dlog; /* the decision log's half (dlog.h); NULL: no log */
    struct sl_top *top; /* its top keys (top.h); NULL when --top-keys is 0 */
    sl_limit_cache limits;
    sl_backend_worker *bw; /* the backend's handle for this thread */
    struct sl_slot *slot_cache; /* freed reply slots, kept for reuse (a slot is a few KiB) */
    unsigned slots_cached;
    struct sl_http_check *check; /* HTTP: one decoded check at a time (about 9 KiB) */
    int64_t now; /* monotonic ns, read once per batch of commands */
    int64_t stop_deadline; /* shutdown: when the last connections are closed anyway */
    /* Accept errors and refusals are logged at most once a second per
     * worker (a flood of them would flood the log): the next time one may
     * be, and how many were left out since the last. */
    int64_t accept_log_next;
    uint64_t accept_log_skipped;
    /* Bit p: a client waits on listener p, not accepted for want of
     * memory. libuv polls that listener no more until it is accepted, so
     * the tick tries again (sl_worker_accept_later). */
    unsigned accept_retry;
    /* Counters for INFO and /metrics, per worker so that threads never
     * share a cache line on the hot path; readers sum them. */
    _Alignas(64) sl_metrics metrics;
    /* The config epoch this worker has seen: once every worker has seen the
     * current one, no worker holds a pointer to an older config. */
    atomic_uint_fast64_t seen_epoch;
    /* Set while the worker runs the commands of a read (either face), so
     * that an EXEC, which takes every worker's (sl_workers_pause), runs with
     * no other command running anywhere. A lock of one atomic exchange, on
     * a line of its own that this thread keeps: uncontended but for an EXEC,
     * it costs an exchange and a store per read, not per command. */
    _Alignas(64) atomic_bool running;
} sl_worker;

typedef struct sl_server {
    sl_server_config cfg;
    sl_store *store;      /* the memory backend's, else NULL */
    sl_backend *backend;  /* where states live: every take goes through it */
    sl_limiters *limiters; /* the node's adaptive concurrency limits (cmd/adaptive.h) */
    struct sl_peers *peers; /* --peers: the routing fleet's membership, else NULL */
    struct sl_dlog *dlog;   /* --decision-log (dlog.h), else NULL */
    sl_worker *workers;
    int nworkers;
    int listen_fd[SL_PROTOS]; /* from sl_listeners_open until the workers share them */
    uint64_t lease_key[2];
    _Atomic bool stopping;
    /* Open connections, in all and per face: a connection's slot is given
     * back when it is closed (sl_conn_close), not when libuv is done with it. */
    atomic_int clients;
    atomic_int clients_on[SL_PROTOS];
    /* The most connections one face may hold: cfg.port_share_pct of
     * cfg.maxclients while both faces listen, so that one cannot lock the
     * other out; all of it when only one does. Set by sl_workers_start. */
    int port_maxclients;
    atomic_uint_fast64_t next_client_id;
    /* counters for INFO (the per-command ones are in the workers) */
    atomic_uint_fast64_t connections_received, rejected_connections;
    int64_t started_mono;
    /* Unix time minus the store's clock (sl_now_mono), measured once at
     * start: the offset every limit's windows are aligned with, so that
     * they fall on the wall clock (sl_limit_align). See sl_clock_offset
     * in common/clock.h. */
    int64_t clock_offset_ns;
    /* The policies: replaced whole on SIGHUP. Workers load the pointer once
     * per command and keep it no longer; the old config is freed once every
     * worker has acknowledged the new epoch. */
    _Atomic(struct sl_config *) config;
    struct sl_config *retired;
    /* The Envoy rate limit configuration (--envoy-config), replaced whole
     * on a reload as config is, under the same epoch; NULL when none. */
    _Atomic(struct sl_envoy_config *) envoy;
    struct sl_envoy_config *envoy_retired;
    atomic_uint_fast64_t epoch;
    /* EXECs waiting for or holding every worker (sl_workers_pause): while
     * it is not zero, a worker waits before its next read's commands, so
     * that workers that keep reading cannot starve an EXEC. Written only by
     * EXECs: workers read it from their own cache. */
    _Alignas(64) atomic_int pausing;
} sl_server;

/* Tells every worker to look at the server's state again (a new config
 * epoch, or shutdown). */
void sl_workers_wake(sl_server *srv);

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

/* worker.c: before a worker runs the commands of a read (any face): lets
 * pending EXECs go first, then takes its own `running`; and after. */
/* A client waits on listener `proto` for want of memory to accept it:
 * logged (at most once a second), and tried again at the worker's next
 * tick. */
void sl_worker_accept_later(sl_worker *w, int proto);

/* The test hook SLUICED_DEBUG_ACCEPT_FAIL: true when this accept is to
 * fail as out of memory. */
bool sl_worker_accept_fails(void);

void sl_worker_enter(sl_worker *w);
static inline void sl_worker_leave(sl_worker *w)
{
    atomic_store_explicit(&w->running, false, memory_order_release);
}

/* worker.c: called by `self` while it runs commands (it holds its own
 * `running`): returns once no other worker is running any, and none starts
 * until sl_workers_resume(self). For EXEC, whose commands must not
 * interleave with any other connection's on any thread. The others finish
 * the read they are serving first: an EXEC waits at most that long. */
void sl_workers_pause(sl_worker *self);
void sl_workers_resume(sl_worker *self);

/* commands.c: the context a connection's commands run in (either face):
 * the backend, the caches, the metrics, deferral into reply slots. */
void sl_conn_cmd_ctx(struct sl_conn *conn, sl_cmd_ctx *ctx);

/* commands.c: the command sluiced runs for a name (a rate command or a
 * connection command), or NULL. */
const sl_command *sl_server_command(const char *name, size_t len);

/* commands.c: runs one parsed command of a connection in c, its context
 * (sl_conn_cmd_ctx, made once per read: the config it holds is the one in
 * force for the whole read): cmd is sl_server_command(argv[0]), NULL for a
 * name sluiced does not know. */
void sl_server_dispatch(sl_cmd_ctx *c, const sl_command *cmd, int argc,
                        const sl_resp_slice *argv);

/* http.c: an HTTP check's response from its decision (sl_cmd_ctx.render). */
void sl_http_render(sl_cmd_ctx *c, sl_check *k);

/* http.c: serves every complete HTTP request in the connection's read
 * buffer, and returns the bytes it consumed (the rest is a partial request).
 * Sets conn->closing when the connection must close after its replies. */
size_t sl_http_serve(struct sl_conn *conn);

/*
 * A reply whose decision is in flight (a backend that answers later), in
 * the order of the connection's requests: the replies of the requests that
 * follow it gather in `after` until it is decided, so that a pipeline
 * answers in order whatever order its decisions come in. A slot whose
 * connection closed (conn NULL) is freed when its decision comes.
 */
typedef struct sl_slot {
    struct sl_slot *next;
    struct sl_conn *conn;
    struct sl_worker *w;
    bool done;
    sl_buf reply; /* its own reply, once decided */
    sl_buf after; /* the replies after it, up to the next slot */
    sl_buf key;   /* the check's key, copied for the decision log (check.key points here) */
    struct sl_rls_call *rls; /* HTTP's POST /json: its call, else NULL (check unused) */
    bool rls_keep;
    sl_check check;
} sl_slot;

/* The most replies a connection may have in flight: past it the server
 * reads no more from it until half of them are answered. */
#define SL_CONN_MAX_INFLIGHT 1024

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
    sl_buf out;     /* replies accumulating */
    sl_buf sending; /* replies being written */
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
    sl_ip peer; /* HTTP: the socket's peer, read once at accept (forward-auth's client) */
    char name[64];
    int64_t last_active;
    int64_t output_soft_since; /* when its replies owed passed the soft limit; 0 = they are under */
    size_t drain_left; /* shutdown: bytes received before it and not yet read; 0 otherwise */
    /* When the first byte of the request not yet complete came (the server's
     * clock), for --request-timeout; 0 while no request is unfinished.
     * Reads do not move it: only a request's end does. */
    int64_t request_start;
    sl_multi multi; /* RESP: MULTI's queue */
    sl_slot *slots, *slots_tail; /* replies in flight, oldest first */
    size_t inflight;             /* slots not yet decided */
    bool paused;                 /* reads stopped at SL_CONN_MAX_INFLIGHT */
} sl_conn;

/* Where a connection's next reply goes: after its last reply in flight. */
static inline sl_buf *sl_conn_out(sl_conn *c)
{
    return c->slots_tail ? &c->slots_tail->after : &c->out;
}

/* worker.c: a reply slot for a connection of w, from w's cache or newly
 * allocated, its buffers empty; NULL when out of memory. And its end. */
sl_slot *sl_slot_new(struct sl_worker *w, int proto);
void sl_slot_free(sl_slot *s);

/* worker.c: a slot of c was decided: moves the replies that are now in
 * order to the connection's output, and has them written. */
void sl_conn_slots_drain(sl_conn *c);

/* What a command may hold before AUTH, as Redis limits an unauthenticated
 * client (10 arguments, 16 KiB bulks): enough for HELLO 3 AUTH user pass. */
#define SL_PREAUTH_MAX_ARGS 10
#define SL_PREAUTH_MAX_BULK 16384

/* The address the HTTP port listens on: --http-bind, else --bind. */
static inline const char *sl_http_bind(const sl_server_config *cfg)
{
    return cfg->http_bind ? cfg->http_bind : cfg->bind;
}

/* The token HTTP requests must bear: --http-token, else --requirepass;
 * NULL when HTTP asks for none. */
static inline const char *sl_http_token(const sl_server_config *cfg)
{
    return cfg->http_token ? cfg->http_token : cfg->requirepass;
}

#endif
