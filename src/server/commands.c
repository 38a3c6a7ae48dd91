/*
 * commands.c: how sluiced runs a command. The rate limiting commands come
 * from the shared table (src/cmd); this file adds the connection commands
 * that real clients send (PING, HELLO, AUTH, CLIENT, SELECT, COMMAND, INFO,
 * QUIT, ...), transactions (MULTI, EXEC, DISCARD) and the executor that
 * takes from the store at the batch's `now`; replies go through the command
 * layer's RESP sink into the connection's buffer.
 */
#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend/peers.h"
#include "common/clock.h"
#include "common/duration.h"
#include "common/parse.h"
#include "common/secret.h"
#include "common/units.h"
#include "policy/config.h"
#include "server/dlog.h"
#include "server/log.h"
#include "server/persist.h"
#include "server/plans_redis.h"
#include "server/server.h"
#include "server/top.h"

#define CONN(ctx) ((sl_conn *)(ctx)->face)

static void sl_call(sl_cmd_ctx *c, const sl_command *cmd, int argc, const sl_resp_slice *argv);

/* ---- the backend: decisions now, or in reply slots ---- */

/* A decision's counts, for the metrics. */
static inline __attribute__((always_inline)) void sl_count_decided(sl_worker *w,
                                                                   const sl_check *k,
                                                                   bool allowed, bool shadow)
{
    if (k->req.rc == SL_ERR_NOMEM)
        sl_counter_add(&w->metrics.store_errors, 1);
    sl_metrics_decided(&w->metrics, k->policy, allowed, shadow);
    if (shadow && k->name)
        sl_metrics_shadow_refused(k->policy, k->name);
    if (w->top) /* a shadow policy's would-be refusal counts as refused */
        sl_top_record(w->top, k, !allowed || shadow, w->now);
    if (k->req.by != SL_DECIDED_BY_STORE)
        sl_metrics_fallback(&w->metrics, k->policy, k->name, k->req.by);
}

/* A decision with the decision log on: counted, and logged when sampled.
 * Apart, so that without the log the path below stays as it was. */
static __attribute__((noinline, cold)) void sl_on_decided_logged(sl_cmd_ctx *c,
                                                                 const sl_check *k,
                                                                 bool allowed, bool shadow)
{
    sl_worker *w = CONN(c)->w;
    sl_count_decided(w, k, allowed, shadow);
    sl_dlog_check(w->dlog, w, CONN(c)->proto, k, allowed, shadow);
}

static void sl_on_decided(sl_cmd_ctx *c, const sl_check *k, bool allowed, bool shadow)
{
    sl_worker *w = CONN(c)->w;
    if (__builtin_expect(w->dlog != NULL, 0)) {
        sl_on_decided_logged(c, k, allowed, shadow);
        return;
    }
    sl_count_decided(w, k, allowed, shadow);
}

static void sl_on_adapted(sl_cmd_ctx *c, int policy, int cls, bool admitted)
{
    sl_metrics_adapted(&CONN(c)->w->metrics, policy, cls, admitted);
}

/* A slot's decision came: rendered in its place, then the connection's
 * replies that are now in order go out. */
static void sl_slot_done(sl_backend_req *r)
{
    sl_slot *s = r->owner;
    sl_conn *conn = s->conn;
    if (!conn) {
        /* Closed meanwhile: nobody to answer, but a chain (a settle) runs
         * to its end, so that what it started in the store is finished. */
        if (s->check.chain) {
            sl_server *srv = s->w->srv;
            sl_cmd_ctx ctx = {
                .reply = &sl_resp_reply_sink,
                .sink = &s->reply,
                .be = srv->backend,
                .bw = s->w->bw,
                .lease_key = srv->lease_key,
                .config = atomic_load_explicit(&srv->config, memory_order_acquire),
            };
            s->check.render = SL_RENDER_COUNT; /* into the slot's buffer, never sent */
            if (!sl_check_finish(&ctx, &s->check))
                return;
        }
        sl_slot_free(s);
        return;
    }
    sl_cmd_ctx ctx;
    sl_conn_cmd_ctx(conn, &ctx);
    ctx.sink = &s->reply;
    if (!sl_check_finish(&ctx, &s->check))
        return; /* its chain's next step is in flight */
    s->done = true;
    conn->inflight--;
    sl_conn_slots_drain(conn);
}

static sl_check *sl_conn_defer(sl_cmd_ctx *c, const sl_check *k)
{
    sl_conn *conn = CONN(c);
    sl_slot *s = sl_slot_new(conn->w, conn->out.proto);
    if (!s)
        return NULL;
    s->conn = conn;
    /* All but the room for owned limits, which sl_check_own fills. */
    memcpy(&s->check, k, offsetof(sl_check, own));
    sl_check_own(&s->check);
    /* The key is read again when the decision comes, for the log: the
     * request's bytes will have moved on by then. */
    if (conn->w->dlog && k->key) {
        sl_buf_clear(&s->key);
        s->check.key = sl_buf_add(&s->key, k->key, k->key_len) == 0 ? s->key.data : NULL;
    }
    s->check.req.done = sl_slot_done;
    s->check.req.owner = s;
    if (conn->slots_tail)
        conn->slots_tail->next = s;
    else
        conn->slots = s;
    conn->slots_tail = s;
    conn->inflight++;
    return &s->check;
}

static int64_t sl_conn_now(sl_cmd_ctx *c)
{
    return CONN(c)->w->now;
}

void sl_conn_cmd_ctx(sl_conn *conn, sl_cmd_ctx *ctx)
{
    sl_server *srv = conn->w->srv;
    *ctx = (sl_cmd_ctx){
        .reply = &sl_resp_reply_sink,
        .sink = sl_conn_out(conn),
        .be = srv->backend,
        .bw = conn->w->bw,
        .lease_key = srv->lease_key,
        .limit_cache = &conn->w->limits,
        .config = atomic_load_explicit(&srv->config, memory_order_acquire),
        .max_key_bytes = srv->cfg.max_key_bytes,
        .face = conn,
        .decided = sl_on_decided,
        .defer = sl_conn_defer,
        .render = conn->proto == SL_PROTO_HTTP ? sl_http_render : NULL,
        .limiters = srv->limiters,
        .now_mono = sl_conn_now,
        .adapted = sl_on_adapted,
    };
}

/* ---- connection commands ---- */

static void sl_reply_ok(sl_cmd_ctx *c)
{
    c->reply->simple(c->sink, "OK");
}

static void sl_cmd_ping(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    if (argc > 2)
        sl_reply_errorf(c, "wrong number of arguments for 'ping' command");
    else if (argc == 2)
        c->reply->bulk(c->sink, argv[1].ptr, argv[1].len);
    else
        c->reply->simple(c->sink, "PONG");
}

static void sl_cmd_echo(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    c->reply->bulk(c->sink, argv[1].ptr, argv[1].len);
}

static void sl_cmd_quit(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    sl_reply_ok(c);
    CONN(c)->closing = true;
}

static void sl_cmd_select(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    if (argv[1].len == 1 && argv[1].ptr[0] == '0')
        sl_reply_ok(c);
    else
        sl_reply_errorf(c, "DB index is out of range");
}

/* Checks a password; replies the error itself when it is wrong. */
static bool sl_auth_check(sl_cmd_ctx *c, const sl_resp_slice *user, const sl_resp_slice *pass)
{
    const char *want = CONN(c)->w->srv->cfg.requirepass;
    if (!want) {
        /* As Redis 7: with no password set, the default user takes any
         * password when named (clients configured with credentials still get
         * in); the one-argument form is an error that says why. */
        if (user && sl_arg_is(user, "default"))
            return true;
        if (user) {
            c->reply->error(c->sink, "WRONGPASS invalid username-password pair or user is "
                                     "disabled.");
            return false;
        }
        sl_reply_errorf(c, "AUTH <password> called without any password configured for the "
                           "default user. Are you sure your configuration is correct?");
        return false;
    }
    bool ok = sl_equal_ct(pass->ptr, pass->len, want, strlen(want));
    if (user && !sl_arg_is(user, "default"))
        ok = false;
    if (!ok) {
        c->reply->error(c->sink, "WRONGPASS invalid username-password pair or user is disabled.");
        return false;
    }
    CONN(c)->authed = true;
    return true;
}

static void sl_cmd_auth(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    if (argc > 3) {
        sl_reply_errorf(c, "syntax error");
        return;
    }
    if (sl_auth_check(c, argc == 3 ? &argv[1] : NULL, &argv[argc - 1]))
        sl_reply_ok(c);
}

static void sl_set_name(sl_conn *conn, const sl_resp_slice *name)
{
    size_t n = name->len < sizeof conn->name - 1 ? name->len : sizeof conn->name - 1;
    memcpy(conn->name, name->ptr, n);
    conn->name[n] = '\0';
}

/* HELLO [protover [AUTH username password] [SETNAME clientname]] */
static void sl_cmd_hello(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    sl_conn *conn = CONN(c);
    int64_t proto = conn->out.proto;
    int i = 1;
    if (argc >= 2) {
        if (!sl_arg_int(c, &argv[1], &proto))
            return;
        if (proto != 2 && proto != 3) {
            c->reply->error(c->sink, "NOPROTO unsupported protocol version");
            return;
        }
        i = 2;
    }
    for (; i < argc; i++) {
        if (sl_arg_is(&argv[i], "AUTH") && i + 2 < argc) {
            if (!sl_auth_check(c, &argv[i + 1], &argv[i + 2]))
                return;
            i += 2;
        } else if (sl_arg_is(&argv[i], "SETNAME") && i + 1 < argc) {
            sl_set_name(conn, &argv[++i]);
        } else {
            sl_reply_errorf(c, "Syntax error in HELLO option '%.*s'",
                            (int)(argv[i].len > 32 ? 32 : argv[i].len), argv[i].ptr);
            return;
        }
    }
    if (!conn->authed) {
        c->reply->error(c->sink, "NOAUTH HELLO must be called with the client already "
                                 "authenticated, otherwise the HELLO <proto> AUTH <user> <pass> "
                                 "option can be used to authenticate the client and select the "
                                 "RESP protocol version at the same time");
        return;
    }
    conn->out.proto = (int)proto;
    conn->sending.proto = (int)proto;
    c->reply->map(c->sink, 7);
    c->reply->bulk(c->sink, "server", 6);
    c->reply->bulk(c->sink, "sluice", 6);
    c->reply->bulk(c->sink, "version", 7);
    c->reply->bulk(c->sink, SLUICE_VERSION, strlen(SLUICE_VERSION));
    c->reply->bulk(c->sink, "proto", 5);
    c->reply->integer(c->sink, proto);
    c->reply->bulk(c->sink, "id", 2);
    c->reply->integer(c->sink, (int64_t)conn->id);
    c->reply->bulk(c->sink, "mode", 4);
    c->reply->bulk(c->sink, "standalone", 10);
    c->reply->bulk(c->sink, "role", 4);
    c->reply->bulk(c->sink, "master", 6);
    c->reply->bulk(c->sink, "modules", 7);
    c->reply->array(c->sink, 0);
}

static void sl_cmd_client(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    sl_conn *conn = CONN(c);
    if (sl_arg_is(&argv[1], "SETNAME") && argc == 3) {
        sl_set_name(conn, &argv[2]);
        sl_reply_ok(c);
    } else if (sl_arg_is(&argv[1], "SETINFO") && argc == 4) {
        sl_reply_ok(c);
    } else if (sl_arg_is(&argv[1], "GETNAME") && argc == 2) {
        if (conn->name[0])
            c->reply->bulk(c->sink, conn->name, strlen(conn->name));
        else
            c->reply->null(c->sink);
    } else if (sl_arg_is(&argv[1], "ID") && argc == 2) {
        c->reply->integer(c->sink, (int64_t)conn->id);
    } else {
        sl_reply_errorf(c, "unknown subcommand or wrong number of arguments for '%.*s'. Try "
                           "CLIENT HELP.",
                        (int)(argv[1].len > 32 ? 32 : argv[1].len), argv[1].ptr);
    }
}

/* ---- transactions: MULTI, EXEC, DISCARD ---- */

void sl_multi_reset(sl_multi *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->queue[i]);
    free(m->queue);
    *m = (sl_multi){0};
}

/* Refuses the transaction, once the error of the command being queued is
 * replied: EXEC will answer EXECABORT. Its queue is dropped at once (EXEC
 * will run none of it), so that a refused transaction holds no memory while
 * the client goes on queueing. */
static void sl_multi_abort(sl_multi *m)
{
    sl_multi_reset(m);
    m->active = m->dirty = true;
}

/* Copies a command into the connection's queue and answers QUEUED, or
 * refuses it past the queue's bounds. */
static void sl_multi_queue(sl_cmd_ctx *c, const sl_command *cmd, int argc,
                           const sl_resp_slice *argv)
{
    sl_multi *m = &CONN(c)->multi;
    if (m->dirty) { /* EXEC will abort: nothing queued is ever run */
        c->reply->simple(c->sink, "QUEUED");
        return;
    }
    if (m->n >= SL_MULTI_MAX_COMMANDS) {
        sl_reply_errorf(c, "MULTI queue is full: at most %d commands per transaction",
                        SL_MULTI_MAX_COMMANDS);
        sl_multi_abort(m);
        return;
    }
    /* argc is at most the parser's argument cap and each length at most
     * its request cap, so the sum cannot wrap; it is bounded before any
     * allocation. */
    size_t bytes = sizeof(sl_queued) + sizeof(sl_queued *) + (size_t)argc * sizeof(sl_resp_slice);
    for (int i = 0; i < argc; i++)
        bytes += argv[i].len;
    if (bytes > SL_MULTI_MAX_BYTES - m->bytes) {
        sl_reply_errorf(c, "MULTI queue is full: at most %zu bytes per transaction",
                        SL_MULTI_MAX_BYTES);
        sl_multi_abort(m);
        return;
    }
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 8;
        sl_queued **q = realloc(m->queue, cap * sizeof *q);
        if (!q) {
            sl_reply_errorf(c, "out of memory queueing the command");
            sl_multi_abort(m);
            return;
        }
        m->queue = q;
        m->cap = cap;
    }
    sl_queued *q = malloc(bytes - sizeof(sl_queued *));
    if (!q) {
        sl_reply_errorf(c, "out of memory queueing the command");
        sl_multi_abort(m);
        return;
    }
    q->cmd = cmd;
    q->argc = argc;
    char *p = (char *)&q->argv[argc];
    for (int i = 0; i < argc; i++) {
        if (argv[i].len)
            memcpy(p, argv[i].ptr, argv[i].len);
        q->argv[i].ptr = p;
        q->argv[i].len = argv[i].len;
        p += argv[i].len;
    }
    m->queue[m->n++] = q;
    m->bytes += bytes;
    c->reply->simple(c->sink, "QUEUED");
}

static void sl_cmd_multi(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    sl_multi *m = &CONN(c)->multi;
    if (m->active) {
        sl_reply_errorf(c, "MULTI calls can not be nested");
        return;
    }
    m->active = true;
    sl_reply_ok(c);
}

/*
 * Runs the queue as one: every other worker is paused first, so that no
 * command of another connection runs between two of these, on any key. The
 * reply is an array of the commands' replies, errors included, as Redis's.
 * All run at the batch's `now`, as one command would.
 */
static void sl_cmd_exec(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    sl_conn *conn = CONN(c);
    if (!conn->multi.active) {
        sl_reply_errorf(c, "EXEC without MULTI");
        return;
    }
    if (conn->multi.dirty) {
        sl_multi_reset(&conn->multi);
        c->reply->error(c->sink, "EXECABORT Transaction discarded because of previous errors.");
        return;
    }
    /* Out of MULTI while the queue runs: its commands run, not queue. */
    sl_multi m = conn->multi;
    conn->multi = (sl_multi){0};
    c->reply->array(c->sink, m.n);
    if (m.n > 0) {
        sl_workers_pause(conn->w);
        for (size_t i = 0; i < m.n; i++) {
            c->sink = sl_conn_out(conn); /* past the replies in flight */
            sl_call(c, m.queue[i]->cmd, m.queue[i]->argc, m.queue[i]->argv);
        }
        sl_workers_resume(conn->w);
    }
    sl_multi_reset(&m);
}

static void sl_cmd_discard(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    sl_conn *conn = CONN(c);
    if (!conn->multi.active) {
        sl_reply_errorf(c, "DISCARD without MULTI");
        return;
    }
    sl_multi_reset(&conn->multi);
    sl_reply_ok(c);
}

/* WATCH promises optimistic locking (EXEC fails when a watched key changed),
 * which sluiced does not keep: accepting it would be a promise broken. EXEC
 * is atomic without it. Inside MULTI, Redis's own answer. */
static void sl_cmd_watch(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    if (CONN(c)->multi.active)
        sl_reply_errorf(c, "WATCH inside MULTI is not allowed");
    else
        sl_reply_errorf(c, "WATCH is not supported: sluiced keeps no watched keys (MULTI ... "
                           "EXEC runs atomically without it)");
}

/* No key is ever watched, so there is none to forget: OK is the truth. */
static void sl_cmd_unwatch(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    sl_reply_ok(c);
}

/* EXEC with arguments: as Redis, in MULTI or not, the transaction (if any)
 * ends, and the error says so. */
static void sl_exec_refused(sl_cmd_ctx *c)
{
    sl_multi_reset(&CONN(c)->multi);
    c->reply->error(c->sink, "EXECABORT Transaction discarded because of: wrong number of "
                             "arguments for 'exec' command");
}

/* The commands that run at once inside MULTI instead of being queued, as
 * in Redis. */
static bool sl_runs_in_multi(const sl_command *cmd)
{
    return cmd->fn == sl_cmd_exec || cmd->fn == sl_cmd_discard || cmd->fn == sl_cmd_multi ||
           cmd->fn == sl_cmd_watch || cmd->fn == sl_cmd_quit;
}

/* A command that arrives inside MULTI: checked, then queued or refused (an
 * unknown name, a wrong number of arguments), or run at once. */
static void sl_multi_dispatch(sl_cmd_ctx *c, const sl_command *cmd, int argc,
                              const sl_resp_slice *argv)
{
    sl_multi *m = &CONN(c)->multi;
    if (!cmd) {
        sl_reply_unknown_command(c, argc, argv);
        sl_multi_abort(m);
    } else if (!sl_command_arity_ok(cmd, argc)) {
        if (cmd->fn == sl_cmd_exec) {
            sl_exec_refused(c);
            return;
        }
        sl_command_call(cmd, c, argc, argv); /* replies the arity error */
        sl_multi_abort(m);
    } else if (sl_runs_in_multi(cmd)) {
        cmd->fn(c, argc, argv);
    } else {
        sl_multi_queue(c, cmd, argc, argv);
    }
}

static const sl_command sl_conn_commands[];

/* ---- a routing fleet's SL.DECIDE ---- */

#define SL_DISAGREEMENT_LOG_NS (INT64_C(60) * 1000000000)

/* Counts (and logs, once a minute) a SL.DECIDE whose keys this node does
 * not own by its own view: the peer that sent it routes by another list. */
static void sl_decide_check_owner(sl_conn *conn, int argc, const sl_resp_slice *argv)
{
    sl_peers *p = sl_peers_latest(conn->w->srv->peers);
    int64_t n;
    if (argc < 5 || !sl_parse_i64(argv[3].ptr, argv[3].len, SL_INT_NO_SIGN, &n) || n < 1 ||
        n > argc - 4)
        return; /* malformed: SL.DECIDE itself says so */
    for (int64_t k = 0; k < n; k++) {
        const sl_resp_slice *key = &argv[4 + k];
        if (sl_peers_owns(p, sl_slot_of(key->ptr, key->len)))
            continue;
        /* Counted with the first membership, so that a reload keeps the count. */
        sl_peers *first = conn->w->srv->peers;
        atomic_fetch_add_explicit(&first->disagreements, 1, memory_order_relaxed);
        int64_t now = conn->w->now, last = atomic_load(&first->disagreement_logged_ns);
        if ((last == 0 || now - last >= SL_DISAGREEMENT_LOG_NS) &&
            atomic_compare_exchange_strong(&first->disagreement_logged_ns, &last, now))
            sl_log(SL_LOG_WARN, "a peer sent SL.DECIDE for key '%.*s', which this node does not "
                                "own: the nodes' --peers lists disagree (peer_disagreements in "
                                "INFO counts them; logged once a minute)",
                   (int)(key->len > 64 ? 64 : key->len), key->ptr);
        return;
    }
}

/* Runs a command. With --peers, SL.DECIDE is the backend protocol's command,
 * sent by a peer to the owner of its keys: it is decided on this node's own
 * states (the memory backend), never routed again. */
static void sl_call(sl_cmd_ctx *c, const sl_command *cmd, int argc, const sl_resp_slice *argv)
{
    sl_conn *conn = CONN(c);
    sl_server *srv = conn->w->srv;
    if (__builtin_expect(srv->peers == NULL, 1) || strcmp(cmd->name, "sl.decide") != 0) {
        sl_command_call(cmd, c, argc, argv);
        return;
    }
    sl_decide_check_owner(conn, argc, argv);
    const sl_backend *be = c->be;
    sl_backend_worker *bw = c->bw;
    sl_backend_route_local(be, bw, &c->be, &c->bw);
    sl_command_call(cmd, c, argc, argv);
    c->be = be;
    c->bw = bw;
}

static size_t sl_command_count(const sl_command *t)
{
    size_t n = 0;
    while (t[n].name[0])
        n++;
    return n;
}

/* One entry of COMMAND's reply, as Redis 7 gives it (10 fields). */
static void sl_reply_command_info(sl_cmd_ctx *c, const sl_command *cmd)
{
    const sl_reply_ops *r = c->reply;
    r->array(c->sink, 10);
    r->bulk(c->sink, cmd->name, strlen(cmd->name));
    r->integer(c->sink, cmd->arity);
    size_t nflags = !!(cmd->flags & SL_CMD_WRITE) + !!(cmd->flags & SL_CMD_READONLY) +
                    !!(cmd->flags & SL_CMD_FAST) + !!(cmd->flags & SL_CMD_NOAUTH) +
                    (cmd->numkeys_at > 0);
    r->array(c->sink, nflags);
    if (cmd->flags & SL_CMD_WRITE)
        r->simple(c->sink, "write");
    if (cmd->flags & SL_CMD_READONLY)
        r->simple(c->sink, "readonly");
    if (cmd->flags & SL_CMD_FAST)
        r->simple(c->sink, "fast");
    if (cmd->flags & SL_CMD_NOAUTH)
        r->simple(c->sink, "no-auth");
    if (cmd->numkeys_at > 0)
        r->simple(c->sink, "movablekeys");
    r->integer(c->sink, cmd->first_key);
    r->integer(c->sink, cmd->last_key);
    r->integer(c->sink, cmd->key_step);
    r->array(c->sink, 0); /* ACL categories */
    r->array(c->sink, 0); /* tips */
    r->array(c->sink, 0); /* key specs */
    r->array(c->sink, 0); /* subcommands */
}

static void sl_reply_command_doc(sl_cmd_ctx *c, const sl_command *cmd)
{
    const sl_reply_ops *r = c->reply;
    r->bulk(c->sink, cmd->name, strlen(cmd->name));
    r->map(c->sink, 3);
    r->bulk(c->sink, "summary", 7);
    r->bulk(c->sink, cmd->summary, strlen(cmd->summary));
    r->bulk(c->sink, "since", 5);
    r->bulk(c->sink, "0.1.0", 5);
    r->bulk(c->sink, "group", 5);
    r->bulk(c->sink, cmd->flags & SL_CMD_LOADING ? "connection" : "generic",
            cmd->flags & SL_CMD_LOADING ? 10 : 7);
}

static void sl_cmd_command(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    const sl_command *tables[2] = {sl_rate_commands, sl_conn_commands};
    size_t total = sl_command_count(sl_rate_commands) + sl_command_count(sl_conn_commands);
    if (argc == 1) {
        c->reply->array(c->sink, total);
        for (int t = 0; t < 2; t++)
            for (const sl_command *cmd = tables[t]; cmd->name[0]; cmd++)
                sl_reply_command_info(c, cmd);
    } else if (sl_arg_is(&argv[1], "COUNT") && argc == 2) {
        c->reply->integer(c->sink, (int64_t)total);
    } else if (sl_arg_is(&argv[1], "DOCS")) {
        if (argc == 2) {
            c->reply->map(c->sink, total);
            for (int t = 0; t < 2; t++)
                for (const sl_command *cmd = tables[t]; cmd->name[0]; cmd++)
                    sl_reply_command_doc(c, cmd);
            return;
        }
        const sl_command *found[64];
        size_t n = 0;
        for (int i = 2; i < argc && n < 64; i++) {
            const sl_command *cmd = sl_server_command(argv[i].ptr, argv[i].len);
            if (cmd)
                found[n++] = cmd;
        }
        c->reply->map(c->sink, n);
        for (size_t i = 0; i < n; i++)
            sl_reply_command_doc(c, found[i]);
    } else if (sl_arg_is(&argv[1], "INFO")) {
        c->reply->array(c->sink, (size_t)(argc - 2));
        for (int i = 2; i < argc; i++) {
            const sl_command *cmd = sl_server_command(argv[i].ptr, argv[i].len);
            if (cmd)
                sl_reply_command_info(c, cmd);
            else
                c->reply->null(c->sink);
        }
    } else {
        sl_reply_errorf(c, "unknown subcommand '%.*s'. Try COMMAND HELP.",
                        (int)(argv[1].len > 32 ? 32 : argv[1].len), argv[1].ptr);
    }
}

/* Appends one INFO section when the request wants it. */
static void sl_info_section(char *text, size_t cap, size_t *len, int argc,
                            const sl_resp_slice *argv, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
static void sl_info_section(char *text, size_t cap, size_t *len, int argc,
                            const sl_resp_slice *argv, const char *name, const char *fmt, ...)
{
    bool wanted = argc < 2;
    for (int i = 1; i < argc; i++)
        wanted |= sl_arg_is(&argv[i], name) || sl_arg_is(&argv[i], "all") ||
                  sl_arg_is(&argv[i], "everything") || sl_arg_is(&argv[i], "default");
    if (!wanted || *len >= cap)
        return;
    int n = snprintf(text + *len, cap - *len, "%s# %c%s\r\n", *len ? "\r\n" : "",
                     name[0] - 'a' + 'A', name + 1);
    if (n > 0)
        *len += (size_t)n;
    if (*len >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    n = vsnprintf(text + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n > 0)
        *len += (size_t)n;
}

/* INFO [section ...]: server, clients, memory, stats, persistence, keyspace. */
/* ---- for operators: SL.INSPECT, SL.POLICIES, SAVE ---- */

static void sl_kv_bulk(sl_cmd_ctx *c, const char *k, const char *v)
{
    c->reply->bulk(c->sink, k, strlen(k));
    c->reply->bulk(c->sink, v, strlen(v));
}

static void sl_kv_integer(sl_cmd_ctx *c, const char *k, int64_t v)
{
    c->reply->bulk(c->sink, k, strlen(k));
    c->reply->integer(c->sink, v);
}

/* SL.INSPECT key: what the store holds for the key, without changing it: a
 * null when nothing; else its algorithm, its size, when it is "never seen"
 * again and, for a policy's state (which names its limit), that limit and
 * the units used under it. */
static void sl_cmd_inspect(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    sl_worker *w = CONN(c)->w;
    const sl_backend *be = w->srv->backend;
    sl_key_info info;
    int rc = be->ops->inspect ? be->ops->inspect(w->bw, argv[1].ptr, argv[1].len, &info)
                              : SL_ERR_UNSUPPORTED;
    if (rc < 0) {
        sl_reply_errorf(c, "%s", sl_strerror(rc));
        return;
    }
    if (rc == 0) {
        c->reply->null(c->sink);
        return;
    }
    c->reply->map(c->sink, info.carried ? 7 : 4);
    sl_kv_bulk(c, "algorithm", sl_algorithm_name(info.algorithm));
    sl_kv_integer(c, "bytes", (int64_t)info.state_bytes);
    sl_kv_integer(c, "reset_after_ms",
                  info.expires_at >= SL_TIME_MAX ? -1 : sl_ns_ceil_ms(info.expires_at - w->now));
    sl_kv_integer(c, "carried", info.carried);
    if (info.carried) {
        sl_kv_integer(c, "limit", info.limit);
        sl_kv_integer(c, "period_ms", sl_ns_ceil_ms(info.period_ns));
        sl_kv_integer(c, "used", info.used);
    }
}

/* A set of a policy's limits: a list of maps, each named as replies and the
 * IETF fields name it (sl_policy_limit_name). */
static void sl_reply_limits(sl_cmd_ctx *c, const sl_policy *p, const sl_limit_set *set,
                            bool global)
{
    c->reply->array(c->sink, set->n);
    for (size_t i = 0; i < set->n; i++) {
        const sl_limit *l = &set->l[i].limit;
        char name[SL_POLICY_LIMIT_NAME_ROOM];
        sl_policy_limit_name(p->name, set->l[i].name, global, name, sizeof name);
        bool windows = l->algorithm == SL_FIXED_WINDOW || l->algorithm == SL_SLIDING_WINDOW;
        c->reply->map(c->sink, 6 + (windows ? 1u : 0u) + (l->months > 0 ? 2u : 0u));
        sl_kv_bulk(c, "name", name);
        sl_kv_bulk(c, "algorithm", sl_algorithm_name(l->algorithm));
        sl_kv_integer(c, "limit", l->limit);
        sl_kv_integer(c, "period_ms", sl_ns_ceil_ms(l->period_ns));
        sl_kv_integer(c, "burst", l->burst);
        sl_kv_bulk(c, "cost", set->l[i].unit == SL_UNIT_TOKENS ? "tokens" : "requests");
        if (windows) { /* where its windows begin: local midnight at this offset */
            char off[8];
            sl_utc_offset_text(l->utc_offset_ns, off);
            sl_kv_bulk(c, "utc_offset", off);
        }
        if (l->months > 0) {
            sl_kv_integer(c, "months", l->months);
            sl_kv_integer(c, "reset_day", l->reset_day > 0 ? l->reset_day : 1);
        }
    }
}

/* SL.POLICIES: the policies in force, each a map of its limits, key
 * template, shadow flag, tiers and global limits. */
static void sl_count_param(void *arg, const char *name, const char *text)
{
    (void)name;
    (void)text;
    ++*(size_t *)arg;
}

static void sl_kv_param(void *arg, const char *name, const char *text)
{
    sl_kv_bulk(arg, name, text);
}

/* An adaptive policy, as SL.POLICIES lists it after the rate policies. */
static void sl_reply_adaptive_policy(sl_cmd_ctx *c, const sl_adaptive_policy *p)
{
    static const char *const prio[] = {"critical", "default", "sheddable"};
    const sl_adapt_config *a = &p->cfg.adapt;
    const sl_shed_config *sh = &p->cfg.shed;
    char t[32];
    c->reply->map(c->sink, 11);
    sl_kv_bulk(c, "name", p->name);
    sl_kv_bulk(c, "algorithm", "adaptive");
    sl_kv_bulk(c, "estimator", sl_adapt_kind_name(a->kind));
    sl_kv_integer(c, "min_limit", a->min_limit);
    sl_kv_integer(c, "max_limit", a->max_limit);
    sl_kv_integer(c, "initial_limit", a->initial_limit);
    sl_kv_integer(c, "ttl_ms", sl_ns_ceil_ms(p->cfg.ttl_ns));
    size_t nparams = 0;
    c->reply->bulk(c->sink, "parameters", 10);
    sl_adaptive_params(p, sl_count_param, &nparams);
    c->reply->map(c->sink, nparams);
    sl_adaptive_params(p, sl_kv_param, c);
    c->reply->bulk(c->sink, "reserve", 7);
    c->reply->map(c->sink, 3);
    for (int k = 0; k < 3; k++)
        sl_kv_bulk(c, prio[k], sl_permille_text(sh->reserve_permille[k], t));
    c->reply->bulk(c->sink, "partitions", 10);
    c->reply->array(c->sink, (size_t)sh->partitions);
    for (int i = 0; i < sh->partitions; i++) {
        c->reply->map(c->sink, 3);
        sl_kv_bulk(c, "name", p->partition[i]);
        sl_kv_bulk(c, "share", sl_permille_text(sh->guarantee_permille[i], t));
        sl_kv_integer(c, "lend", sh->lends[i]);
    }
    sl_kv_integer(c, "idle_ms", sl_ns_ceil_ms(sh->idle_ns));
}

static void sl_cmd_policies(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    const sl_config *cfg = c->config;
    size_t n = cfg ? cfg->npolicies : 0;
    c->reply->array(c->sink, n + (cfg ? cfg->nadaptive : 0));
    for (size_t i = 0; i < n; i++) {
        const sl_policy *p = &cfg->policies[i];
        c->reply->map(c->sink, p->ntemplates == 2 ? 7 : 6);
        sl_kv_bulk(c, "name", p->name);
        c->reply->bulk(c->sink, "limits", 6);
        sl_reply_limits(c, p, &p->limits, false);
        sl_kv_bulk(c, "key", p->key);
        if (p->ntemplates == 2)
            sl_kv_bulk(c, "key_fallback", p->key_fallback);
        sl_kv_integer(c, "shadow", p->shadow);
        c->reply->bulk(c->sink, "tiers", 5);
        c->reply->map(c->sink, p->ntiers);
        for (size_t t = 0; t < p->ntiers; t++) {
            c->reply->bulk(c->sink, p->tiers[t].name, strlen(p->tiers[t].name));
            sl_reply_limits(c, p, &p->tiers[t].limits, false);
        }
        c->reply->bulk(c->sink, "global", 6);
        sl_reply_limits(c, p, &p->global, true);
    }
    for (size_t i = 0; cfg && i < cfg->nadaptive; i++)
        sl_reply_adaptive_policy(c, &cfg->adaptive[i]);
}

/* SAVE: writes the snapshot (--snapshot) now, as Redis's SAVE does; the
 * worker that runs it waits for the write (takes on other workers go on). */
static void sl_cmd_save(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    sl_server *srv = CONN(c)->w->srv;
    if (!srv->cfg.snapshot) {
        sl_reply_errorf(c, "no snapshot file: start sluiced with --snapshot FILE");
        return;
    }
    int rc = sl_snapshot_write(srv, "SAVE");
    if (rc != SL_OK) {
        sl_reply_errorf(c, "snapshot %s: %s", srv->cfg.snapshot,
                        rc == SL_ERR_IO ? strerror(errno) : sl_strerror(rc));
        return;
    }
    c->reply->simple(c->sink, "OK");
}

static void sl_cmd_info(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    sl_server *srv = CONN(c)->w->srv;
    uint64_t commands = sl_metrics_sum_commands(srv);
    /* A shadow policy's would-be refusals are counted apart: they were let
     * through, but counting them as allowed would hide what the dry run is
     * for. */
    uint64_t allowed = sl_metrics_sum_decisions(srv, SL_OUT_ALLOWED);
    uint64_t rejected = sl_metrics_sum_decisions(srv, SL_OUT_REJECTED);
    uint64_t shadow_rejected = sl_metrics_sum_decisions(srv, SL_OUT_SHADOW);
    sl_store_stats st = {0};
    if (srv->store)
        sl_store_get_stats(srv->store, &st);
    sl_backend_stats bs = {0};
    if (srv->backend->ops->stats)
        srv->backend->ops->stats(srv->backend, &bs);
    static const char *const states[] = {"up", "down", "breaker_open"};
    char text[6144];
    size_t len = 0;
    int64_t up = (sl_now_mono() - srv->started_mono) / 1000000000;
    sl_info_section(text, sizeof text, &len, argc, argv, "server",
                    "sluice_version:%s\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\n"
                    "tcp_port:%d\r\nuptime_in_seconds:%lld\r\nio_threads_active:%d\r\n",
                    SLUICE_VERSION, srv->cfg.port, (long long)up, srv->nworkers);
    sl_info_section(text, sizeof text, &len, argc, argv, "clients",
                    "connected_clients:%d\r\nmaxclients:%d\r\n", atomic_load(&srv->clients),
                    srv->cfg.maxclients);
    sl_info_section(text, sizeof text, &len, argc, argv, "memory",
                    "used_memory:%llu\r\nmaxmemory:%llu\r\n", (unsigned long long)st.bytes_used,
                    (unsigned long long)st.max_memory);
    sl_info_section(text, sizeof text, &len, argc, argv, "stats",
                    "total_connections_received:%llu\r\ntotal_commands_processed:%llu\r\n"
                    "rejected_connections:%llu\r\ndecisions_allowed:%llu\r\n"
                    "decisions_rejected:%llu\r\ndecisions_shadow_rejected:%llu\r\n"
                    "evicted_keys:%llu\r\nreclaimed_keys:%llu\r\n",
                    (unsigned long long)atomic_load(&srv->connections_received),
                    (unsigned long long)commands,
                    (unsigned long long)atomic_load(&srv->rejected_connections),
                    (unsigned long long)allowed, (unsigned long long)rejected,
                    (unsigned long long)shadow_rejected,
                    (unsigned long long)st.evictions, (unsigned long long)st.reclaimed);
    /* Redis's names where they mean the same (rdb_last_save_time is the last
     * write that succeeded, rdb_last_bgsave_status the last one's outcome,
     * "ok" before any), so that tools that watch Redis's read them. */
    sl_snapshot_status snap;
    sl_snapshot_last(&snap);
    sl_info_section(text, sizeof text, &len, argc, argv, "persistence",
                    "loading:0\r\nrdb_snapshot_enabled:%d\r\nrdb_last_save_time:%lld\r\n"
                    "rdb_last_bgsave_status:%s\r\nrdb_last_save_attempt_time:%lld\r\n"
                    "rdb_last_save_duration_ms:%lld\r\nrdb_saves:%llu\r\n"
                    "rdb_save_failures:%llu\r\n",
                    srv->cfg.snapshot != NULL, (long long)(snap.success_wall_ns / 1000000000),
                    snap.ok ? "ok" : "err", (long long)(snap.attempt_wall_ns / 1000000000),
                    (long long)sl_ns_ceil_ms(snap.duration_ns), (unsigned long long)snap.saves,
                    (unsigned long long)snap.failures);
    sl_info_section(text, sizeof text, &len, argc, argv, "keyspace", "keys:%llu\r\n",
                    (unsigned long long)st.keys);
    if (srv->backend->ops->stats) {
        uint64_t fallbacks[4];
        sl_metrics_sum_fallbacks(srv, fallbacks);
        sl_info_section(text, sizeof text, &len, argc, argv, "store",
                        "store:%s\r\nstore_state:%s\r\nstore_engine:%s\r\n"
                        "store_requests:%llu\r\nstore_errors:%llu\r\nstore_timeouts:%llu\r\n"
                        "store_connects:%llu\r\nstore_disconnects:%llu\r\n"
                        "store_breaker_opens:%llu\r\nstore_rtt_avg_us:%llu\r\n"
                        "decisions_fail_open:%llu\r\ndecisions_fail_closed:%llu\r\n"
                        "decisions_local:%llu\r\n",
                        srv->backend->ops->name, states[bs.state],
                        bs.module ? "module" : "lua", (unsigned long long)bs.requests,
                        (unsigned long long)bs.errors, (unsigned long long)bs.timeouts,
                        (unsigned long long)bs.connects, (unsigned long long)bs.disconnects,
                        (unsigned long long)bs.breaker_opens,
                        (unsigned long long)(bs.requests ? bs.rtt_sum_ns / 1000 / bs.requests : 0),
                        (unsigned long long)fallbacks[SL_DECIDED_FAIL_OPEN],
                        (unsigned long long)fallbacks[SL_DECIDED_FAIL_CLOSED],
                        (unsigned long long)fallbacks[SL_DECIDED_LOCAL]);
    }
    if (bs.sync)
        sl_info_section(text, sizeof text, &len, argc, argv, "sync",
                        "sync_node:%d\r\nsync_nodes:%d\r\nsync_interval_ms:%lld\r\n"
                        "sync_central:%s\r\nsync_keys:%llu\r\nsyncs:%llu\r\n"
                        "sync_failures:%llu\r\nsync_waits:%llu\r\nsync_unleased_takes:%llu\r\n",
                        bs.sync_node, bs.sync_nodes, (long long)(bs.sync_interval_ns / 1000000),
                        bs.sync_central_down ? "down" : "up", (unsigned long long)bs.sync_keys,
                        (unsigned long long)bs.syncs, (unsigned long long)bs.sync_failures,
                        (unsigned long long)bs.sync_waits, (unsigned long long)bs.sync_unleased);
    if (srv->peers) {
        /* The counter lives with the first membership: a reload keeps it. */
        const sl_peers *p = sl_peers_latest(srv->peers);
        sl_info_section(text, sizeof text, &len, argc, argv, "peers",
                        "peers:%zu\r\npeers_down:%zu\r\npeer_self:%s\r\n"
                        "peer_disagreements:%llu\r\n",
                        p->n, sl_peers_down_count(p), p->names[p->self],
                        (unsigned long long)atomic_load(&srv->peers->disagreements));
    }
    char plans[2048];
    if (sl_plans_redis_info(plans, sizeof plans) > 0)
        sl_info_section(text, sizeof text, &len, argc, argv, "plans", "%s", plans);
    c->reply->bulk(c->sink, text, len < sizeof text ? len : sizeof text - 1);
}

static const sl_command sl_conn_commands[] = {
    {"ping", -1, SL_CMD_FAST | SL_CMD_LOADING, 0, 0, 0, sl_cmd_ping, "Answers PONG", "[message]", 0},
    {"echo", 2, SL_CMD_FAST | SL_CMD_LOADING, 0, 0, 0, sl_cmd_echo, "Answers the message",
     "message", 0},
    {"quit", -1, SL_CMD_FAST | SL_CMD_NOAUTH | SL_CMD_LOADING, 0, 0, 0, sl_cmd_quit,
     "Closes the connection", "", 0},
    {"select", 2, SL_CMD_FAST | SL_CMD_LOADING, 0, 0, 0, sl_cmd_select,
     "Selects database 0, the only one", "index", 0},
    {"auth", -2, SL_CMD_FAST | SL_CMD_NOAUTH | SL_CMD_LOADING, 0, 0, 0, sl_cmd_auth,
     "Authenticates the connection", "[username] password", 0},
    {"hello", -1, SL_CMD_FAST | SL_CMD_NOAUTH | SL_CMD_LOADING, 0, 0, 0, sl_cmd_hello,
     "Handshakes: protocol version, AUTH, SETNAME",
     "[protover [AUTH username password] [SETNAME clientname]]", 0},
    {"client", -2, SL_CMD_LOADING, 0, 0, 0, sl_cmd_client,
     "SETNAME, SETINFO, GETNAME and ID", "subcommand [arguments]", 0},
    {"command", -1, SL_CMD_LOADING, 0, 0, 0, sl_cmd_command,
     "Describes the commands: COMMAND, COUNT, DOCS, INFO", "[subcommand]", 0},
    {"info", -1, SL_CMD_LOADING, 0, 0, 0, sl_cmd_info, "Reports the server's state",
     "[section]", 0},
    {"multi", 1, SL_CMD_FAST | SL_CMD_LOADING, 0, 0, 0, sl_cmd_multi,
     "Starts a transaction: the commands that follow are queued", "", 0},
    {"exec", 1, SL_CMD_LOADING, 0, 0, 0, sl_cmd_exec,
     "Runs the queued commands atomically; answers their replies", "", 0},
    {"discard", 1, SL_CMD_FAST | SL_CMD_LOADING, 0, 0, 0, sl_cmd_discard,
     "Drops the queued commands", "", 0},
    {"watch", -2, SL_CMD_FAST | SL_CMD_LOADING, 0, 0, 0, sl_cmd_watch,
     "Not supported: answers an error (EXEC is atomic without it)", "key [key ...]", 0},
    {"unwatch", 1, SL_CMD_FAST | SL_CMD_LOADING, 0, 0, 0, sl_cmd_unwatch,
     "Answers OK: no key is ever watched", "", 0},
    {"sl.inspect", 2, SL_CMD_READONLY | SL_CMD_FAST, 1, 1, 1, sl_cmd_inspect,
     "Describes what the store holds for a key, without changing it", "key", 0},
    {"sl.policies", 1, SL_CMD_READONLY | SL_CMD_LOADING, 0, 0, 0, sl_cmd_policies,
     "Lists the policies in force", "", 0},
    {"save", 1, SL_CMD_LOADING, 0, 0, 0, sl_cmd_save, "Writes the snapshot file now", "", 0},
    {"sl.top", -1, SL_CMD_READONLY | SL_CMD_LOADING, 0, 0, 0, sl_cmd_top,
     "Lists the keys refused (or admitted) most often over the recent window",
     "[POLICY name] [COUNT n] [REFUSED|ADMITTED]", 0},
    {"", 0, 0, 0, 0, 0, NULL, NULL, NULL, 0},
};

const sl_command *sl_server_command(const char *name, size_t len)
{
    const sl_command *cmd = sl_command_find(sl_rate_commands, name, len);
    return cmd ? cmd : sl_command_find(sl_conn_commands, name, len);
}

/* What sl_server_dispatch does but for the common case (a known command out
 * of MULTI), out of its way. */
__attribute__((noinline)) static void sl_dispatch_rare(sl_cmd_ctx *c, const sl_command *cmd,
                                                       int argc, const sl_resp_slice *argv)
{
    if (CONN(c)->multi.active)
        sl_multi_dispatch(c, cmd, argc, argv);
    else if (!cmd)
        sl_reply_unknown_command(c, argc, argv);
    else if (cmd->fn == sl_cmd_exec && !sl_command_arity_ok(cmd, argc))
        sl_exec_refused(c);
    else
        sl_call(c, cmd, argc, argv);
}

void sl_server_dispatch(sl_cmd_ctx *c, const sl_command *cmd, int argc, const sl_resp_slice *argv)
{
    sl_conn *conn = CONN(c);
    c->sink = sl_conn_out(conn); /* past the replies in flight */
    sl_counter_add(&conn->w->metrics.commands, 1);
    if (!conn->authed && !(cmd && (cmd->flags & SL_CMD_NOAUTH))) {
        c->reply->error(c->sink, "NOAUTH Authentication required.");
        return;
    }
    if (__builtin_expect(conn->multi.active || !cmd || cmd->fn == sl_cmd_exec, 0))
        sl_dispatch_rare(c, cmd, argc, argv);
    else
        sl_call(c, cmd, argc, argv);
}
