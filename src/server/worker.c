/*
 * worker.c: the event loops. Each worker thread runs one libuv loop that
 * watches the port's one listening socket (see sl_listeners_open), and
 * serves the connections it accepts start to finish.
 *
 * A connection reads into one buffer, parses every complete command in it,
 * runs them in order, and writes all their replies at once: a pipeline of
 * 10 000 commands costs a handful of read and write calls, not 20 000. The
 * clock is read once per such batch. While a write is in flight, new replies
 * gather in a second buffer.
 *
 * A connection is read from for as long as it is open, however many
 * replies it is owed: a client may write a whole pipeline before it reads
 * any reply (redis-py's pipeline() does), and a server that stopped reading
 * would then wait for it as it waits for the server. What bounds its
 * memory is --client-output-buffer-limit, as in Redis: a client owed more
 * than the hard limit, or more than the soft one for too long, is closed.
 *
 * At shutdown a connection is read only up to what it had been sent when
 * the shutdown began, within the grace period: a client that keeps
 * pipelining cannot keep the server from exiting.
 *
 * A worker holds a lock of its own (`running`) while it runs the commands
 * of a read; an EXEC takes every worker's (sl_workers_pause), so that its
 * queue runs while no other command runs anywhere.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/parse.h"
#include "common/siphash.h"
#include "proto/http.h"
#include "server/dlog.h"
#include "server/envoy_stats.h"
#include "server/grpc.h"
#include "server/log.h"
#include "server/server.h"
#include "server/top.h"

/* Replies gathered by one read past which they are written at once, not at
 * the end of the loop iteration: the client can take them meanwhile. */
#define SL_OUTPUT_WRITE_NOW (1u << 20)
/* An emptied output buffer larger than this is freed rather than kept for
 * the next replies: one big pipeline does not pin its memory for as long
 * as the connection lasts. */
#define SL_OUTPUT_KEEP ((size_t)1 << 20)

/* Empties a buffer whose bytes are all written. */
static void sl_output_done(sl_buf *b)
{
    if (b->cap > SL_OUTPUT_KEEP)
        sl_buf_free(b);
    else
        sl_buf_clear(b);
}

static void sl_conn_flush(sl_conn *c);

/* Slots a worker keeps for reuse. */
#define SL_SLOTS_CACHED 256

sl_slot *sl_slot_new(sl_worker *w, int proto)
{
    sl_slot *s = w->slot_cache;
    if (s) {
        w->slot_cache = s->next;
        w->slots_cached--;
    } else if ((s = malloc(sizeof *s))) {
        sl_buf_init(&s->reply, proto, w->srv->cfg.output_hard);
        sl_buf_init(&s->after, proto, w->srv->cfg.output_hard);
        sl_buf_init(&s->key, 0, 0);
    } else {
        return NULL;
    }
    s->reply.proto = s->after.proto = proto;
    s->next = NULL;
    s->w = w;
    s->done = false;
    s->rls = NULL;
    return s;
}

/* Frees a slot (its decision is in, or never will be needed): into the
 * worker's cache, its buffers emptied but kept when small. */
void sl_slot_free(sl_slot *s)
{
    sl_worker *w = s->w;
    if (w->slots_cached >= SL_SLOTS_CACHED) {
        sl_buf_free(&s->reply);
        sl_buf_free(&s->after);
        sl_buf_free(&s->key);
        free(s);
        return;
    }
    sl_buf_clear(&s->key);
    sl_output_done(&s->reply);
    sl_output_done(&s->after);
    s->next = w->slot_cache;
    w->slot_cache = s;
    w->slots_cached++;
}

/* The worker's cache of slots, at its end. */
static void sl_slot_cache_free(sl_worker *w)
{
    while (w->slot_cache) {
        sl_slot *s = w->slot_cache;
        w->slot_cache = s->next;
        sl_buf_free(&s->reply);
        sl_buf_free(&s->after);
        sl_buf_free(&s->key);
        free(s);
    }
    w->slots_cached = 0;
}

/* The connection's slots at its close: those decided are freed, those in
 * flight are left to their decision, which frees them (sl_slot_done). */
static void sl_conn_orphan_slots(sl_conn *c)
{
    for (sl_slot *s = c->slots, *next; s; s = next) {
        next = s->next;
        if (s->done)
            sl_slot_free(s);
        else
            s->conn = NULL;
    }
    c->slots = c->slots_tail = NULL;
    c->inflight = 0;
}

static void sl_conn_on_close(uv_handle_t *h)
{
    sl_conn *c = h->data;
    sl_buf_free(&c->out);
    sl_buf_free(&c->sending);
    free(c->rbuf);
    free(c->argv);
    free(c->http);
    sl_multi_reset(&c->multi);
    free(c);
}

/* Closes a connection now. Its slot under --maxclients is given back here,
 * not when libuv calls sl_conn_on_close: that is later in the loop's
 * iteration, and a client that closed and connected again at once would be
 * refused by a slot no one holds any more. */
static void sl_conn_close(sl_conn *c)
{
    if (c->closed)
        return;
    c->closed = true;
    atomic_fetch_sub(&c->w->srv->clients, 1);
    atomic_fetch_sub(&c->w->srv->clients_on[c->proto], 1);
    if (c->flush_queued) {
        sl_conn **p = &c->w->to_flush;
        while (*p != c)
            p = &(*p)->flush_next;
        *p = c->flush_next;
        c->flush_queued = false;
    }
    if (c->prev)
        c->prev->next = c->next;
    else
        c->w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    sl_conn_orphan_slots(c);
    uv_close((uv_handle_t *)&c->handle, sl_conn_on_close);
}

static void sl_conn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    sl_conn *c = h->data;
    size_t max = c->w->srv->cfg.max_request_bytes + 16384;
    if (c->rcap - c->rlen < 16384 && c->rcap < max) {
        size_t cap = c->rcap * 2 > max ? max : c->rcap * 2;
        char *p = realloc(c->rbuf, cap);
        if (p) {
            c->rbuf = p;
            c->rcap = cap;
        }
    }
    buf->base = c->rbuf + c->rlen;
    buf->len = c->rcap - c->rlen;
    if (c->drain_left > 0 && buf->len > c->drain_left) /* shutdown: no further */
        buf->len = c->drain_left;
}

/* A pipelined batch: the commands parsed before any of them runs, so that
 * the store can prefetch all their keys first, and the arguments each may
 * have (one with more is left to the general path). */
#define SL_BATCH_COMMANDS 16
#define SL_BATCH_ARGS 16
#define SL_BATCH_KEYS 32

typedef struct sl_batch {
    size_t n;
    struct {
        size_t bytes, argc;
        const sl_command *cmd; /* sl_server_command of its name */
        sl_resp_slice argv[SL_BATCH_ARGS];
    } cmd[SL_BATCH_COMMANDS];
} sl_batch;

/*
 * Parses up to SL_BATCH_COMMANDS complete multibulk commands from `off`
 * into *b, then prefetches the store keys of the rate commands among them.
 * Stops before an inline command (parsing one unescapes it in place), an
 * incomplete or invalid one, or one with more than SL_BATCH_ARGS
 * arguments: the general path parses (and judges) those.
 */
static void sl_batch_parse(sl_conn *c, size_t off, const sl_resp_limits *lim, sl_batch *b)
{
    const void *keys[SL_BATCH_KEYS];
    size_t lens[SL_BATCH_KEYS], nkeys = 0;
    sl_resp_request req;
    sl_resp_request_init(&req, b->cmd[0].argv, SL_BATCH_ARGS);
    b->n = 0;
    while (b->n < SL_BATCH_COMMANDS && off < c->rlen && c->rbuf[off] == '*') {
        /* After a complete parse the request is back at its start: only
         * the array it fills changes. */
        sl_resp_slice *argv = req.argv = b->cmd[b->n].argv;
        int n = sl_resp_parse(c->rbuf + off, c->rlen - off, &req, lim);
        if (n <= 0)
            break;
        const sl_command *cmd = req.argc > 0 ? sl_server_command(argv[0].ptr, argv[0].len) : NULL;
        b->cmd[b->n].bytes = (size_t)n;
        b->cmd[b->n].argc = req.argc;
        b->cmd[b->n].cmd = cmd;
        b->n++;
        off += (size_t)n;
        if (cmd)
            nkeys += sl_command_store_keys(cmd, req.argc, argv, keys + nkeys, lens + nkeys,
                                           SL_BATCH_KEYS - nkeys);
    }
    const sl_backend *be = c->w->srv->backend;
    if (nkeys > 1 && be->ops->prefetch)
        be->ops->prefetch(c->w->bw, keys, lens, nkeys);
}

/* Runs every complete RESP command in the read buffer; returns the bytes
 * consumed. Whole multibulk commands go in batches (sl_batch_parse); the
 * rest, and a command that came in pieces, through the resumable parser. */
/* The parser's caps for a connection: --max-request-bytes; before AUTH, no
 * more than a login needs, as Redis allows, so that a client without the
 * password cannot make the server hold 64 KiB commands of 4096 arguments. */
static void sl_conn_limits(const sl_conn *c, const sl_server_config *cfg, sl_resp_limits *lim)
{
    sl_resp_limits_default(lim);
    lim->max_request_len = lim->max_bulk_len = lim->max_inline_len = cfg->max_request_bytes;
    if (!c->authed) {
        lim->max_args = SL_PREAUTH_MAX_ARGS;
        lim->max_bulk_len = lim->max_inline_len = lim->max_request_len = SL_PREAUTH_MAX_BULK;
    }
}

static size_t sl_conn_run_resp(sl_conn *c)
{
    const sl_server_config *cfg = &c->w->srv->cfg;
    sl_resp_limits lim;
    sl_conn_limits(c, cfg, &lim);

    size_t off = 0;
    uint64_t ran = 0;
    sl_batch batch;
    sl_cmd_ctx ctx;
    sl_conn_cmd_ctx(c, &ctx);
    while (!c->closing && off < c->rlen && !sl_conn_out(c)->failed &&
           c->inflight < SL_CONN_MAX_INFLIGHT) {
        if (c->authed && !sl_resp_request_pending(&c->req)) {
            sl_batch_parse(c, off, &lim, &batch);
            for (size_t i = 0; i < batch.n && !c->closing && !sl_conn_out(c)->failed &&
                               c->inflight < SL_CONN_MAX_INFLIGHT;
                 i++) {
                off += batch.cmd[i].bytes;
                if (batch.cmd[i].argc > 0) {
                    sl_server_dispatch(&ctx, batch.cmd[i].cmd, (int)batch.cmd[i].argc,
                                       batch.cmd[i].argv);
                    ran++;
                }
            }
            if (batch.n > 0)
                continue;
        }
        int n = sl_resp_parse(c->rbuf + off, c->rlen - off, &c->req, &lim);
        if (n == SL_RESP_INCOMPLETE)
            break;
        if (n == SL_RESP_ERROR) {
            /* As Redis: say what was wrong, then close the connection; a
             * command past the size cap says which cap. */
            if (!c->authed && c->req.too_big) /* Redis's words before AUTH */
                sl_resp_add_errorf(sl_conn_out(c), "-ERR Protocol error: unauthenticated %s length",
                                   c->req.too_big == SL_RESP_BIG_ARGS ? "multibulk" : "bulk");
            else if (c->req.too_big == SL_RESP_BIG_BYTES)
                sl_resp_add_errorf(sl_conn_out(c),
                                   "-ERR Protocol error: request larger than "
                                   "--max-request-bytes (%zu)",
                                   cfg->max_request_bytes);
            else
                sl_resp_add_errorf(sl_conn_out(c), "-ERR %s", c->req.errstr);
            sl_log(SL_LOG_INFO, "client %llu: %s; closing", (unsigned long long)c->id,
                   c->req.errstr);
            c->closing = true;
            break;
        }
        off += (size_t)n;
        if (c->req.argc > 0) {
            bool was_authed = c->authed;
            sl_server_dispatch(&ctx, sl_server_command(c->argv[0].ptr, c->argv[0].len),
                               (int)c->req.argc, c->argv);
            ran++;
            if (c->authed != was_authed) /* AUTH or HELLO ... AUTH: the full caps from now */
                sl_conn_limits(c, cfg, &lim);
        }
    }
    if (ran > 0) /* the batch's time, shared by its commands */
        sl_metrics_latency(&c->w->metrics, SL_PROTO_RESP,
                           (sl_now_mono() - c->w->now) / (int64_t)ran, ran);
    return off;
}

/* Writes the replies, and reads no more once the connection is closing. */
static void sl_conn_flush_now(sl_conn *c)
{
    sl_conn_flush(c);
    if (!c->closed && c->reading && c->closing) {
        uv_read_stop((uv_stream_t *)&c->handle);
        c->reading = false;
    }
}

/* The bytes of replies the connection owes its client: those gathering,
 * and those of a write in flight that the kernel has not taken yet. */
static size_t sl_conn_owed(sl_conn *c)
{
    return c->out.len + uv_stream_get_write_queue_size((uv_stream_t *)&c->handle);
}

/*
 * --client-output-buffer-limit, after a read's replies are added: closes the
 * connection, with a log line that names the limit, when it owes more than
 * the hard limit, or has owed more than the soft limit for longer than its
 * seconds; returns whether it did. A buffer that could not take a reply
 * (out.failed: its cap is the hard limit, or memory ran out) closes it too.
 */
static bool sl_conn_over_limit(sl_conn *c)
{
    const sl_server_config *cfg = &c->w->srv->cfg;
    size_t owed = sl_conn_owed(c);
    if (c->out.failed || owed > cfg->output_hard) {
        sl_log(SL_LOG_WARN,
               "client %llu: %zu bytes of replies owed, over the hard limit of "
               "--client-output-buffer-limit (%zu)%s; closing",
               (unsigned long long)c->id, owed, cfg->output_hard,
               owed > cfg->output_hard ? "" : " with the next reply");
        sl_conn_close(c);
        return true;
    }
    if (cfg->output_soft == 0 || owed <= cfg->output_soft) {
        c->output_soft_since = 0;
        return false;
    }
    if (c->output_soft_since == 0) {
        c->output_soft_since = c->w->now;
        return false;
    }
    if (c->w->now - c->output_soft_since <= (int64_t)cfg->output_soft_s * 1000000000)
        return false;
    sl_log(SL_LOG_WARN,
           "client %llu: %zu bytes of replies owed, over the soft limit of "
           "--client-output-buffer-limit (%zu) for more than %d s; closing",
           (unsigned long long)c->id, owed, cfg->output_soft, cfg->output_soft_s);
    sl_conn_close(c);
    return true;
}

/* Takes a worker's `running` lock. Only an EXEC contends for it, for a
 * short while: the wait yields the CPU rather than sleep, so that the worker
 * runs again as soon as the EXEC is done. */
static void sl_lock_running(atomic_bool *running)
{
    while (atomic_exchange_explicit(running, true, memory_order_acquire))
        while (atomic_load_explicit(running, memory_order_relaxed))
            sched_yield();
}

/* Before a worker runs the commands of a read: lets pending EXECs go first
 * (they would otherwise wait for a moment between two reads of a busy
 * worker), then takes its own lock. */
void sl_worker_enter(sl_worker *w)
{
    for (;;) {
        while (atomic_load_explicit(&w->srv->pausing, memory_order_relaxed) != 0)
            sched_yield();
        if (!atomic_exchange_explicit(&w->running, true, memory_order_acquire))
            return;
        /* An EXEC on another worker holds it: wait for it to be done. */
        while (atomic_load_explicit(&w->running, memory_order_relaxed))
            sched_yield();
    }
}

/* Has the replies written at the end of the loop iteration
 * (sl_worker_flush), or at once when the connection closes or owes a lot. */
static void sl_conn_flush_later(sl_conn *c)
{
    if (c->closing || c->out.len > SL_OUTPUT_WRITE_NOW) {
        sl_conn_flush_now(c);
    } else if (c->out.len > 0 && !c->flush_queued) {
        c->flush_queued = true;
        c->flush_next = c->w->to_flush;
        c->w->to_flush = c;
    }
}

static void sl_conn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void sl_conn_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* Runs every complete request in the read buffer; its replies are written
 * at the end of the loop iteration (sl_worker_flush), or at once when the
 * connection closes or owes a lot. */
static void sl_conn_process(sl_conn *c)
{
    sl_worker_enter(c->w);
    size_t off = c->proto == SL_PROTO_HTTP ? sl_http_serve(c) : sl_conn_run_resp(c);
    sl_worker_leave(c->w);
    if (sl_conn_over_limit(c))
        return;
    if (off > 0) {
        memmove(c->rbuf, c->rbuf + off, c->rlen - off);
        c->rlen -= off;
        sl_resp_request_reset(&c->req);
    }
    /* The deadline of --request-timeout: it starts with the first byte of a
     * request and ends with the request, whatever reads come between. */
    if (c->rlen == 0)
        c->request_start = 0;
    else if (off > 0 || c->request_start == 0)
        c->request_start = sl_now_mono();
    if (c->inflight >= SL_CONN_MAX_INFLIGHT && c->reading) {
        /* Enough in flight: the rest waits in the socket (sl_conn_slots_drain
         * reads on). */
        uv_read_stop((uv_stream_t *)&c->handle);
        c->reading = false;
        c->paused = true;
    }
    sl_conn_flush_later(c);
}

void sl_conn_slots_drain(sl_conn *c)
{
    while (c->slots && c->slots->done) {
        sl_slot *s = c->slots;
        sl_buf_add(&c->out, s->reply.data, s->reply.len);
        sl_buf_add(&c->out, s->after.data, s->after.len);
        if (s->reply.failed || s->after.failed)
            c->out.failed = 1;
        c->slots = s->next;
        if (!c->slots)
            c->slots_tail = NULL;
        sl_slot_free(s);
    }
    if (c->closed)
        return;
    if (c->paused && c->inflight <= SL_CONN_MAX_INFLIGHT / 2 && !c->closing) {
        c->paused = false;
        c->reading = uv_read_start((uv_stream_t *)&c->handle, sl_conn_alloc, sl_conn_read) == 0;
        if (c->rlen > 0) { /* what was read before the pause */
            c->w->now = sl_now_mono();
            sl_conn_process(c);
            return;
        }
    }
    if (sl_conn_over_limit(c))
        return;
    sl_conn_flush_later(c);
}

/* The worker's check phase, after the iteration's reads: their replies. */
static void sl_worker_flush(uv_check_t *h)
{
    sl_worker *w = h->data;
    while (w->to_flush) {
        sl_conn *c = w->to_flush;
        w->to_flush = c->flush_next;
        c->flush_queued = false;
        sl_conn_flush_now(c);
    }
}

static void sl_conn_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    sl_conn *c = s->data;
    if (nread < 0) {
        if (nread != UV_EOF)
            sl_log(SL_LOG_DEBUG, "client %llu: read: %s", (unsigned long long)c->id,
                   uv_strerror((int)nread));
        sl_conn_close(c);
        return;
    }
    if (nread == 0)
        return;
    c->rlen += (size_t)nread;
    c->w->now = sl_now_mono();
    c->last_active = c->w->now;
    if (c->drain_left == 0) {
        sl_conn_process(c);
        return;
    }
    /* Shutdown: once what the client had sent before it is read, the
     * connection reads no more and closes after those replies. */
    c->drain_left -= (size_t)nread;
    if (c->drain_left == 0) {
        uv_read_stop((uv_stream_t *)&c->handle);
        c->reading = false;
    }
    sl_conn_process(c);
    if (!c->reading && !c->closed) {
        c->closing = true;
        sl_conn_flush(c);
    }
}

static void sl_conn_written(uv_write_t *req, int status)
{
    sl_conn *c = req->data;
    c->writing = false;
    sl_output_done(&c->sending);
    if (c->closed)
        return;
    if (status < 0) {
        sl_conn_close(c);
        return;
    }
    sl_conn_flush(c);
    const sl_server_config *cfg = &c->w->srv->cfg;
    if (c->output_soft_since != 0 && !c->closed && sl_conn_owed(c) <= cfg->output_soft)
        c->output_soft_since = 0; /* the client took its replies: the soft limit's clock restarts */
}

/* Closes a connection whose replies are all written. Bytes the client sent
 * that were never read (the rest of a refused request, say) are read and
 * dropped first, up to 1 MiB: closing a socket with unread input makes the
 * kernel send a reset, which can destroy the reply before the client reads
 * it. */
static void sl_conn_close_gently(sl_conn *c)
{
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&c->handle, &fd) == 0) {
        char sink[16384];
        for (int i = 0; i < 64 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++)
            ;
        shutdown(fd, SHUT_WR);
    }
    sl_conn_close(c);
}

/* Writes what has gathered in c->out: first directly, and what the socket
 * does not take at once through a uv_write, from the second buffer. */
static void sl_conn_flush(sl_conn *c)
{
    if (c->closed || c->writing)
        return;
    /* A closing connection closes once its replies are written, those in
     * flight included. */
    if (c->out.len == 0) {
        if (c->closing && !c->slots)
            sl_conn_close_gently(c);
        return;
    }
    uv_buf_t b = uv_buf_init(c->out.data, (unsigned)c->out.len);
    int n = uv_try_write((uv_stream_t *)&c->handle, &b, 1);
    if (n == (int)c->out.len) {
        sl_output_done(&c->out);
        if (c->closing && !c->slots)
            sl_conn_close_gently(c);
        return;
    }
    if (n < 0 && n != UV_EAGAIN) {
        sl_conn_close(c);
        return;
    }
    size_t done = n > 0 ? (size_t)n : 0;
    sl_buf t = c->sending; /* empty: swap the buffers */
    c->sending = c->out;
    c->out = t;
    b = uv_buf_init(c->sending.data + done, (unsigned)(c->sending.len - done));
    c->wreq.data = c;
    if (uv_write(&c->wreq, (uv_stream_t *)&c->handle, &b, 1, sl_conn_written) != 0) {
        sl_conn_close(c);
        return;
    }
    c->writing = true;
}

/* Logs an accept error or a refusal at most once a second per worker, with
 * how many were left out since the last line: a flood of clients at the
 * cap must not flood the log too. */
static void sl_accept_log(sl_worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sl_accept_log(sl_worker *w, const char *fmt, ...)
{
    int64_t now = sl_now_mono();
    if (now < w->accept_log_next) {
        w->accept_log_skipped++;
        return;
    }
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (w->accept_log_skipped > 0)
        sl_log(SL_LOG_WARN, "%s (and %llu more accept errors or refusals in the last second)",
               msg, (unsigned long long)w->accept_log_skipped);
    else
        sl_log(SL_LOG_WARN, "%s", msg);
    w->accept_log_next = now + INT64_C(1000000000);
    w->accept_log_skipped = 0;
}

/* Answers a client with an error in its protocol's form (RESP "-ERR
 * message", or an HTTP status with {"error": message}) and closes the
 * connection once the answer is written. */
static void sl_conn_refuse(sl_conn *c, int http_status, const char *msg)
{
    if (c->proto == SL_PROTO_HTTP)
        sl_http_write_error(sl_conn_out(c), http_status, false, msg, NULL);
    else
        sl_resp_add_errorf(sl_conn_out(c), "-ERR %s", msg);
    c->closing = true;
    sl_conn_flush_now(c);
}

static const char *const sl_proto_names[SL_PROTOS] = {"RESP", "HTTP", "gRPC"};

/* Reads the socket's peer address into c->peer; false when it cannot be. */
static bool sl_conn_read_peer(sl_conn *c)
{
    struct sockaddr_storage ss;
    int len = (int)sizeof ss;
    if (uv_tcp_getpeername(&c->handle, (struct sockaddr *)&ss, &len) != 0)
        return false;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        sl_ip_from_bytes(&c->peer, (const uint8_t *)&a->sin_addr, 4);
        return true;
    }
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        sl_ip_from_bytes(&c->peer, a->sin6_addr.s6_addr, 16);
        return true;
    }
    return false;
}

/* A test hook: SLUICED_DEBUG_ACCEPT_FAIL=N makes the first N accepts of the
 * process fail as out of memory (tests/integration/test_connection.py). */
static atomic_long sl_accept_fails;

bool sl_worker_accept_fails(void)
{
    return atomic_load_explicit(&sl_accept_fails, memory_order_relaxed) > 0 &&
           atomic_fetch_sub(&sl_accept_fails, 1) > 0;
}

void sl_worker_accept_later(sl_worker *w, int proto)
{
    w->accept_retry |= 1u << proto;
    sl_accept_log(w, "accept on the %s port: out of memory; the client waits, and this worker "
                     "tries again each second", sl_proto_names[proto]);
}

static void sl_accept(uv_stream_t *listener, int status, int proto)
{
    sl_worker *w = listener->data;
    sl_server *srv = w->srv;
    if (status < 0) {
        /* EMFILE: libuv closes the pending clients unanswered (with the
         * descriptor it keeps for that), which sl_clients_fit is there to
         * prevent; the operator must hear of it. */
        sl_accept_log(w, "accept on the %s port: %s%s", sl_proto_names[proto],
                      uv_strerror(status),
                      status == UV_EMFILE || status == UV_ENFILE
                          ? "; a client was closed unanswered (raise ulimit -n or lower "
                            "--maxclients)"
                          : "");
        return;
    }
    if (sl_worker_accept_fails()) {
        sl_worker_accept_later(w, proto);
        return;
    }
    sl_conn *c = calloc(1, sizeof *c);
    size_t nargs = SL_RESP_DEFAULT_MAX_ARGS;
    if (c)
        c->argv = malloc(nargs * sizeof *c->argv);
    if (c)
        c->rbuf = malloc(c->rcap = 16384);
    if (!c || !c->argv || !c->rbuf || uv_tcp_init(&w->loop, &c->handle) != 0) {
        sl_worker_accept_later(w, proto);
        if (c) {
            free(c->argv);
            free(c->rbuf);
        }
        free(c);
        return;
    }
    c->handle.data = c;
    c->w = w;
    c->proto = proto;
    if (uv_accept(listener, (uv_stream_t *)&c->handle) != 0) {
        c->closed = true; /* never counted: sl_conn_close must not give a slot back */
        uv_close((uv_handle_t *)&c->handle, sl_conn_on_close);
        return;
    }
    int clients = atomic_fetch_add(&srv->clients, 1) + 1;
    int on_port = atomic_fetch_add(&srv->clients_on[proto], 1) + 1;
    c->id = atomic_fetch_add(&srv->next_client_id, 1) + 1;
    /* HTTP has no AUTH command: it is served only on its own port, which
     * the operator binds where it belongs. */
    c->authed = srv->cfg.requirepass == NULL || proto == SL_PROTO_HTTP;
    c->last_active = sl_now_mono();
    sl_resp_request_init(&c->req, c->argv, nargs);
    sl_buf_init(&c->out, 2, srv->cfg.output_hard);
    sl_buf_init(&c->sending, 2, srv->cfg.output_hard);
    c->next = w->conns;
    if (w->conns)
        w->conns->prev = c;
    w->conns = c;
    atomic_fetch_add(&srv->connections_received, 1);

    if (clients > srv->cfg.maxclients) {
        atomic_fetch_add(&srv->rejected_connections, 1);
        sl_accept_log(w, "client %llu refused: max number of clients reached (--maxclients %d)",
                      (unsigned long long)c->id, srv->cfg.maxclients);
        sl_conn_refuse(c, 503, "max number of clients reached");
        return;
    }
    if (on_port > srv->port_maxclients) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "max number of clients reached on the %s port (%d: "
                 "--maxclients-port-share %d of --maxclients %d)",
                 sl_proto_names[proto], srv->port_maxclients, srv->cfg.port_share_pct,
                 srv->cfg.maxclients);
        atomic_fetch_add(&srv->rejected_connections, 1);
        sl_accept_log(w, "client %llu refused: %s", (unsigned long long)c->id, msg);
        sl_conn_refuse(c, 503, msg);
        return;
    }
    /* HTTP: the peer's address, once, for forward-auth's client address
     * (proto/client_addr.h). A socket whose peer cannot be read is gone
     * already (ENOTCONN): it is closed unread. */
    if (proto == SL_PROTO_HTTP && !sl_conn_read_peer(c)) {
        sl_conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->handle, 1);
    c->reading = uv_read_start((uv_stream_t *)&c->handle, sl_conn_alloc, sl_conn_read) == 0;
    if (!c->reading)
        sl_conn_close(c);
}

/* How long a shutdown waits for clients to take the replies they are owed. */
#define SL_SHUTDOWN_GRACE_NS INT64_C(5000000000)

static void sl_worker_finish(sl_worker *w, int64_t now);

static void sl_on_resp_connection(uv_stream_t *listener, int status)
{
    sl_accept(listener, status, SL_PROTO_RESP);
}

static void sl_on_http_connection(uv_stream_t *listener, int status)
{
    sl_accept(listener, status, SL_PROTO_HTTP);
}

/* Closes connections idle for longer than --idle-timeout, and those whose
 * request is not complete within --request-timeout of its first byte;
 * during shutdown, finishes it. */
static void sl_worker_stop(sl_worker *w);

/* A request past its deadline: the client is told so where the protocol
 * can say it (an HTTP 408, a RESP error), and the connection is closed, so
 * that a client that trickles a request cannot hold a slot for ever. */
static void sl_conn_request_expired(sl_conn *c)
{
    const sl_server_config *cfg = &c->w->srv->cfg;
    char msg[96];
    snprintf(msg, sizeof msg, "request not complete within --request-timeout (%d s)",
             cfg->request_timeout_s);
    sl_log(SL_LOG_INFO, "client %llu (%s): %s; closing", (unsigned long long)c->id,
           sl_proto_names[c->proto], msg);
    sl_conn_refuse(c, 408, msg);
}

static const uv_connection_cb sl_on_accept[SL_PROTOS] = {
    sl_on_resp_connection, sl_on_http_connection, sl_grpc_on_connection};

static void sl_worker_tick(uv_timer_t *t)
{
    sl_worker *w = t->data;
    int64_t now = sl_now_mono();
    unsigned retry = w->accept_retry;
    w->accept_retry = 0;
    for (int p = 0; p < SL_PROTOS; p++)
        if ((retry & (1u << p)) && w->listening[p] && !atomic_load(&w->srv->stopping))
            sl_on_accept[p]((uv_stream_t *)&w->listener[p], 0);
    if (atomic_load(&w->srv->stopping)) {
        /* The tick may see the flag before the wake-up runs: either way
         * shutdown starts once, listeners first (else the loop would keep
         * them open and never end). */
        if (w->stop_deadline == 0)
            sl_worker_stop(w);
        else
            sl_worker_finish(w, now);
        return;
    }
    int64_t idle = (int64_t)w->srv->cfg.idle_timeout_s * 1000000000;
    int64_t request = (int64_t)w->srv->cfg.request_timeout_s * 1000000000;
    if (idle <= 0 && request <= 0)
        return;
    for (sl_conn *c = w->conns, *next; c; c = next) {
        next = c->next;
        if (c->writing || c->closing)
            continue;
        if (idle > 0 && now - c->last_active > idle) {
            sl_log(SL_LOG_DEBUG, "client %llu: idle; closing", (unsigned long long)c->id);
            sl_conn_close(c);
        } else if (request > 0 && c->reading && c->request_start != 0 &&
                   now - c->request_start > request) {
            /* Not while reads are paused: what waits then is the server's
             * to run, not the client's to send. */
            sl_conn_request_expired(c);
        }
    }
}

/* At shutdown: the commands a client sent before it are in flight too, and
 * are served; those it sends after it are not. Returns how many bytes the
 * socket had received and not yet given to a read (0 when it cannot say). */
static size_t sl_conn_received(sl_conn *c)
{
    uv_os_fd_t fd;
    int n = 0;
    if (uv_fileno((uv_handle_t *)&c->handle, &fd) != 0 || ioctl(fd, FIONREAD, &n) != 0 || n < 0)
        return 0;
    return (size_t)n;
}

/* The end of a shutdown: once every connection has closed, or the grace
 * period is over (a client that does not read its replies cannot hold the
 * server), close what is left and the loop's own handles, so uv_run returns. */
static void sl_worker_finish(sl_worker *w, int64_t now)
{
    if ((w->conns || w->gconns) && now < w->stop_deadline)
        return;
    if (w->srv->cfg.grpc_port > 0)
        sl_grpc_worker_close(w);
    for (sl_conn *c = w->conns, *next; c; c = next) {
        next = c->next;
        sl_log(SL_LOG_WARN, "client %llu: still owed replies at shutdown; closing",
               (unsigned long long)c->id);
        sl_conn_close(c);
    }
    if (!uv_is_closing((uv_handle_t *)&w->tick)) {
        /* Decisions still in flight are answered (their connections are
         * gone), and the backend's handles closed with the loop's. */
        if (w->bw)
            w->srv->backend->ops->detach(w->bw);
        w->bw = NULL;
        uv_timer_stop(&w->tick);
        uv_close((uv_handle_t *)&w->tick, NULL);
        uv_close((uv_handle_t *)&w->wakeup, NULL);
        uv_close((uv_handle_t *)&w->flusher, NULL);
    }
}

/* Shutdown, on the worker's own thread: stop accepting, let every
 * connection finish the replies it owes, close the rest. */
static void sl_worker_stop(sl_worker *w)
{
    for (int p = 0; p < SL_PROTOS; p++) {
        if (w->listening[p]) {
            uv_close((uv_handle_t *)&w->listener[p], NULL);
            w->listening[p] = false;
        }
    }
    if (uv_is_closing((uv_handle_t *)&w->tick))
        return; /* a second wake-up during shutdown */
    sl_grpc_worker_stop(w);
    for (sl_conn *c = w->conns, *next; c; c = next) {
        next = c->next;
        if (c->reading && !c->closing) {
            /* It keeps reading, through the loop so that its replies are
             * written meanwhile, up to these bytes (sl_conn_read closes it
             * after them); the grace period bounds the rest. */
            c->drain_left = sl_conn_received(c);
            if (c->drain_left > 0)
                continue;
        }
        if (c->reading) {
            uv_read_stop((uv_stream_t *)&c->handle);
            c->reading = false;
        }
        if (!c->closed) {
            c->closing = true;
            sl_conn_flush(c);
        }
    }
    int64_t now = sl_now_mono();
    w->stop_deadline = now + SL_SHUTDOWN_GRACE_NS;
    sl_worker_finish(w, now);
    if (!uv_is_closing((uv_handle_t *)&w->tick))
        uv_timer_start(&w->tick, sl_worker_tick, 20, 20);
}

static void sl_worker_wakeup(uv_async_t *a)
{
    sl_worker *w = a->data;
    /* Between callbacks no command is running: this worker holds no config
     * pointer now, so it has moved to the current epoch. */
    atomic_store(&w->seen_epoch, atomic_load(&w->srv->epoch));
    if (atomic_load(&w->srv->stopping) && w->stop_deadline == 0) /* once (the tick may have) */
        sl_worker_stop(w);
}

static void *sl_worker_run(void *arg)
{
    sl_worker *w = arg;
    uv_run(&w->loop, UV_RUN_DEFAULT);
    sl_slot_cache_free(w);
    return NULL;
}

/* A listening socket on bind:port, or -1 (errno set). SO_REUSEADDR lets a
 * restart bind while connections of the previous run are in TIME_WAIT; on
 * Linux it never lets two sockets listen on one port. */
static int sl_listen_socket(const char *bind_addr, int port)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV};
    struct addrinfo *res;
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    int rc = getaddrinfo(bind_addr, portstr, &hints, &res);
    if (rc != 0) {
        errno = EINVAL;
        return -1;
    }
    int fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 511) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        freeaddrinfo(res);
        errno = e;
        return -1;
    }
    freeaddrinfo(res);
    return fd;
}

/*
 * One listening socket per port, shared by every worker's loop, rather than
 * one socket per worker with SO_REUSEPORT. SO_REUSEPORT lets any process of
 * the same user bind the same port too, without an error: a second sluiced
 * would start "fine" and the kernel would split the clients between two
 * stores, each limit then N times looser. A check first (a plain bind of a
 * probe, closed before the SO_REUSEPORT sockets bind) leaves a window in
 * which two servers starting together both pass it. A plain bind is the
 * check itself, done by the kernel atomically: the second server gets
 * EADDRINUSE, as redis-server does. The cost: the kernel no longer hashes
 * connections across the workers; each loop watches the shared socket and
 * whichever is free accepts (nginx's model without reuseport), which for
 * clients that keep their connections open changes little.
 */
int sl_listeners_open(sl_server *srv)
{
    const int ports[SL_PROTOS] = {srv->cfg.port, srv->cfg.http_port, srv->cfg.grpc_port};
    for (int p = 0; p < SL_PROTOS; p++) {
        srv->listen_fd[p] = -1;
        if (ports[p] <= 0)
            continue;
        const char *bind = p == SL_PROTO_HTTP ? sl_http_bind(&srv->cfg) : srv->cfg.bind;
        srv->listen_fd[p] = sl_listen_socket(bind, ports[p]);
        if (srv->listen_fd[p] < 0) {
            char addr[SL_LOG_ADDR_MAX];
            sl_log(SL_LOG_ERROR, "cannot listen on %s (%s): %s",
                   sl_log_addr(addr, bind, ports[p]), sl_proto_names[p], strerror(errno));
            sl_listeners_close(srv);
            return -1;
        }
    }
    return 0;
}

void sl_listeners_close(sl_server *srv)
{
    for (int p = 0; p < SL_PROTOS; p++) {
        if (srv->listen_fd[p] >= 0)
            close(srv->listen_fd[p]);
        srv->listen_fd[p] = -1;
    }
}

/* The descriptors sluiced keeps for itself beside its clients': stdio, the
 * main loop's (its signal pipe and timers), a snapshot being written, a
 * config file being read, with room to spare as Redis keeps 32; and per
 * worker its event loop, its wake-up, its copies of the listening sockets
 * and the one libuv holds back for an accept that finds no descriptor. */
#define SL_FD_RESERVE 32
#define SL_FD_PER_WORKER 7

/*
 * Fits --maxclients to the open file limit, as Redis does: the soft limit
 * is raised towards what the clients need (up to the hard limit), and if
 * that is still too few, maxclients is lowered to what fits, with a log
 * line that says so. Without it, a client past the limit finds no
 * descriptor and libuv closes it unanswered. Then sets each port's share.
 * Returns 0, or -1 (logged) when not even one client fits.
 */
static int sl_clients_fit(sl_server *srv)
{
    struct rlimit rl;
    rlim_t reserve = SL_FD_RESERVE + (rlim_t)SL_FD_PER_WORKER * (rlim_t)srv->nworkers;
    rlim_t want = (rlim_t)srv->cfg.maxclients + reserve;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < want) {
        rlim_t was = rl.rlim_cur;
        struct rlimit raised = {.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want
                                                ? want
                                                : rl.rlim_max,
                                .rlim_max = rl.rlim_max};
        if (raised.rlim_cur > was && setrlimit(RLIMIT_NOFILE, &raised) == 0) {
            rl.rlim_cur = raised.rlim_cur;
            sl_log(SL_LOG_INFO, "open file limit raised from %llu to %llu for --maxclients %d",
                   (unsigned long long)was, (unsigned long long)rl.rlim_cur,
                   srv->cfg.maxclients);
        }
        if (rl.rlim_cur < want) {
            if (rl.rlim_cur <= reserve) {
                sl_log(SL_LOG_ERROR,
                       "cannot serve a client: the open file limit (ulimit -n) is %llu, and "
                       "sluiced keeps %llu descriptors for itself with %d threads",
                       (unsigned long long)rl.rlim_cur, (unsigned long long)reserve,
                       srv->nworkers);
                return -1;
            }
            int fit = (int)(rl.rlim_cur - reserve);
            sl_log(SL_LOG_WARN,
                   "--maxclients %d lowered to %d: the open file limit (ulimit -n) is %llu, of "
                   "which sluiced keeps %llu for itself with %d threads",
                   srv->cfg.maxclients, fit, (unsigned long long)rl.rlim_cur,
                   (unsigned long long)reserve, srv->nworkers);
            srv->cfg.maxclients = fit;
        }
    }
    srv->port_maxclients = srv->cfg.maxclients;
    if ((srv->cfg.port > 0) + (srv->cfg.http_port > 0) + (srv->cfg.grpc_port > 0) >= 2) {
        /* At most 1000000 * 100: no overflow. At least one, so that a small
         * --maxclients still serves both faces. */
        int share = (int)((long long)srv->cfg.maxclients * srv->cfg.port_share_pct / 100);
        srv->port_maxclients = share > 0 ? share : 1;
    }
    return 0;
}

int sl_workers_start(sl_server *srv)
{
    if (sl_clients_fit(srv) != 0)
        return -1;
    const char *fails = getenv("SLUICED_DEBUG_ACCEPT_FAIL");
    int64_t nfail;
    if (fails && sl_parse_i64(fails, strlen(fails), SL_INT_NO_SIGN, &nfail) && nfail <= 1000)
        atomic_store(&sl_accept_fails, (long)nfail);
    /* sl_worker is cache-line aligned (its counters): calloc would not do. */
    size_t bytes = (size_t)srv->nworkers * sizeof *srv->workers;
    srv->workers = aligned_alloc(_Alignof(sl_worker), (bytes + 63) / 64 * 64);
    if (!srv->workers)
        return -1;
    memset(srv->workers, 0, bytes);
    for (int i = 0; i < srv->nworkers; i++) {
        sl_worker *w = &srv->workers[i];
        w->id = i;
        w->srv = srv;
        w->limits.clock_offset_ns = srv->clock_offset_ns; /* windows on the wall clock */
        uv_loop_init(&w->loop);
        uv_async_init(&w->loop, &w->wakeup, sl_worker_wakeup);
        w->wakeup.data = w;
        uv_timer_init(&w->loop, &w->tick);
        w->tick.data = w;
        uv_timer_start(&w->tick, sl_worker_tick, 1000, 1000);
        const char *err = NULL;
        w->bw = srv->backend->ops->attach(srv->backend, &w->loop, &w->now, &err);
        if (!w->bw) {
            sl_log(SL_LOG_ERROR, "cannot start worker %d on the %s store: %s", i,
                   srv->backend->ops->name, err ? err : "unknown error");
            return -1;
        }
        uv_check_init(&w->loop, &w->flusher);
        w->flusher.data = w;
        uv_check_start(&w->flusher, sl_worker_flush);
        uv_unref((uv_handle_t *)&w->flusher); /* keeps no loop alive */
        if (srv->cfg.grpc_port > 0)
            sl_grpc_worker_init(w);
        /* ShouldRateLimit's counts (gRPC and POST /json); without its table
         * (out of memory) a worker counts nothing. */
        if (srv->cfg.envoy_config)
            w->envoy_stats = sl_envoy_stats_new();
        w->dlog = sl_dlog_worker_of(srv->dlog, i);
        /* The top keys: one seed for every worker, since a reader merges
         * their summaries; drawn from the lease key, which is random. */
        if (srv->cfg.top_keys > 0 &&
            !(w->top = sl_top_new(srv->cfg.top_keys, (int64_t)srv->cfg.top_window_s * 1000000000,
                                  sl_siphash(srv->lease_key, "top keys", 8), &srv->epoch,
                                  srv->cfg.top_exact_rate,
                                  sl_siphash(srv->lease_key, &w->id, sizeof w->id)))) {
            sl_log(SL_LOG_ERROR, "cannot start worker %d: out of memory for its top keys", i);
            return -1;
        }
        for (int p = 0; p < SL_PROTOS; p++) {
            if (srv->listen_fd[p] < 0)
                continue;
            /* Each loop closes its own descriptor of the shared socket. */
            int fd = fcntl(srv->listen_fd[p], F_DUPFD_CLOEXEC, 0);
            if (fd < 0) {
                sl_log(SL_LOG_ERROR, "cannot share the listening socket: %s", strerror(errno));
                return -1;
            }
            uv_tcp_init(&w->loop, &w->listener[p]);
            w->listener[p].data = w;
            int rc = uv_tcp_open(&w->listener[p], fd);
            if (rc == 0)
                rc = uv_listen((uv_stream_t *)&w->listener[p], 511, sl_on_accept[p]);
            if (rc != 0) {
                sl_log(SL_LOG_ERROR, "cannot listen: %s", uv_strerror(rc));
                return -1;
            }
            w->listening[p] = true;
        }
    }
    /* The workers hold their own descriptors now. */
    sl_listeners_close(srv);
    for (int i = 0; i < srv->nworkers; i++) {
        if (pthread_create(&srv->workers[i].thread, NULL, sl_worker_run, &srv->workers[i]) != 0) {
            sl_log(SL_LOG_ERROR, "cannot start worker thread %d", i);
            return -1;
        }
    }
    return 0;
}

/* Every worker's `running`, taken in the order of the workers: two EXECs on
 * two workers take them in the same order, so neither waits for a lock the
 * other holds while holding one it wants. A worker that is not in an EXEC
 * holds only its own and waits for nothing while it does; so self lets its
 * own go first, and takes it again in its turn. */
void sl_workers_pause(sl_worker *self)
{
    sl_server *srv = self->srv;
    atomic_fetch_add(&srv->pausing, 1);
    atomic_store_explicit(&self->running, false, memory_order_release);
    for (int i = 0; i < srv->nworkers; i++)
        sl_lock_running(&srv->workers[i].running);
}

/* Lets the other workers run again; self keeps its own `running`, as it
 * held it before the pause. */
void sl_workers_resume(sl_worker *self)
{
    sl_server *srv = self->srv;
    for (int i = srv->nworkers - 1; i >= 0; i--)
        if (&srv->workers[i] != self)
            atomic_store_explicit(&srv->workers[i].running, false, memory_order_release);
    atomic_fetch_sub(&srv->pausing, 1);
}

void sl_workers_wake(sl_server *srv)
{
    for (int i = 0; i < srv->nworkers; i++)
        uv_async_send(&srv->workers[i].wakeup);
}

void sl_workers_stop(sl_server *srv)
{
    atomic_store(&srv->stopping, true);
    /* A test hook: SLUICED_DEBUG_STOP_DELAY_MS holds the wake-up back, so
     * that the workers' ticks see the flag first (tests/integration/
     * test_shutdown.py); shutdown must begin the same way from either. */
    const char *delay = getenv("SLUICED_DEBUG_STOP_DELAY_MS");
    if (delay) {
        int64_t ms;
        if (sl_parse_i64(delay, strlen(delay), SL_INT_NO_SIGN, &ms) && ms > 0 && ms <= 10000)
            usleep((useconds_t)ms * 1000);
    }
    sl_workers_wake(srv);
    for (int i = 0; i < srv->nworkers; i++) {
        pthread_join(srv->workers[i].thread, NULL);
        uv_loop_close(&srv->workers[i].loop);
        free(srv->workers[i].check);
        sl_envoy_stats_free(srv->workers[i].envoy_stats);
        sl_top_free(srv->workers[i].top);
    }
    free(srv->workers);
    srv->workers = NULL;
}
