/*
 * commands.c: how sluiced runs a command. The rate limiting commands come
 * from the shared table (src/cmd); this file adds the connection commands
 * that real clients send (PING, HELLO, AUTH, CLIENT, SELECT, COMMAND, INFO,
 * QUIT, ...) and the executor that takes from the store at the batch's
 * `now`; replies go through the command layer's RESP sink into the
 * connection's buffer.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "server/server.h"

#define CONN(ctx) ((sl_conn *)(ctx)->face)

/* ---- the executor: the store, at the batch's clock ---- */

/* Store errors (out of memory at the cap) are counted for /metrics. */
static int sl_counted(sl_worker *w, int rc)
{
    if (rc == SL_ERR_NOMEM)
        sl_counter_add(&w->metrics.store_errors, 1);
    return rc;
}

static void sl_on_decided(sl_cmd_ctx *c, int policy, bool allowed, bool shadow)
{
    sl_metrics_decided(&CONN(c)->w->metrics, policy, allowed, shadow);
}

static int ex_take(void *ex, const sl_resp_slice *key, const sl_limit *l, int64_t cost,
                   sl_decision *d)
{
    sl_worker *w = ex;
    return sl_counted(w, sl_store_take(w->srv->store, key->ptr, key->len, l, w->now, cost, d));
}

static int ex_peek(void *ex, const sl_resp_slice *key, const sl_limit *l, int64_t cost,
                   sl_decision *d)
{
    sl_worker *w = ex;
    return sl_store_peek(w->srv->store, key->ptr, key->len, l, w->now, cost, d);
}

static int ex_take_many(void *ex, const sl_take_item *items, size_t n, sl_decision *out,
                        int *failed)
{
    sl_worker *w = ex;
    return sl_counted(w, sl_store_take_many(w->srv->store, items, n, w->now, out, failed));
}

static int ex_reset(void *ex, const sl_resp_slice *key)
{
    sl_worker *w = ex;
    return sl_store_reset(w->srv->store, key->ptr, key->len);
}

static int ex_acquire(void *ex, const sl_resp_slice *key, const sl_limit *l, int64_t weight,
                      uint64_t id, sl_decision *d)
{
    sl_worker *w = ex;
    return sl_counted(w, sl_store_acquire(w->srv->store, key->ptr, key->len, l, w->now, weight,
                                          id, d));
}

static int ex_release(void *ex, const sl_resp_slice *key, const sl_limit *l, uint64_t id)
{
    sl_worker *w = ex;
    return sl_store_release(w->srv->store, key->ptr, key->len, l, w->now, id);
}

const sl_exec_ops sl_worker_exec = {ex_take,  ex_peek,    ex_take_many,
                                    ex_reset, ex_acquire, ex_release};

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

/* Compares in time that depends only on the lengths, not on where the
 * bytes first differ. */
static bool sl_equal_ct(const char *a, size_t alen, const char *b, size_t blen)
{
    unsigned char diff = alen != blen;
    for (size_t i = 0; i < alen; i++)
        diff |= (unsigned char)(a[i] ^ b[i % (blen ? blen : 1)]);
    return diff == 0 && alen == blen;
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

static const sl_command sl_conn_commands[];

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

/* INFO [section ...]: server, clients, memory, stats, keyspace. */
static void sl_cmd_info(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    sl_server *srv = CONN(c)->w->srv;
    uint64_t commands = sl_metrics_sum_commands(srv);
    uint64_t allowed = sl_metrics_sum_decisions(srv, SL_OUT_ALLOWED) +
                       sl_metrics_sum_decisions(srv, SL_OUT_SHADOW);
    uint64_t rejected = sl_metrics_sum_decisions(srv, SL_OUT_REJECTED);
    sl_store_stats st;
    sl_store_get_stats(srv->store, &st);
    char text[2048];
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
                    "decisions_rejected:%llu\r\nevicted_keys:%llu\r\nreclaimed_keys:%llu\r\n",
                    (unsigned long long)atomic_load(&srv->connections_received),
                    (unsigned long long)commands,
                    (unsigned long long)atomic_load(&srv->rejected_connections),
                    (unsigned long long)allowed, (unsigned long long)rejected,
                    (unsigned long long)st.evictions, (unsigned long long)st.reclaimed);
    sl_info_section(text, sizeof text, &len, argc, argv, "keyspace", "keys:%llu\r\n",
                    (unsigned long long)st.keys);
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
    {"", 0, 0, 0, 0, 0, NULL, NULL, NULL, 0},
};

const sl_command *sl_server_command(const char *name, size_t len)
{
    const sl_command *cmd = sl_command_find(sl_rate_commands, name, len);
    return cmd ? cmd : sl_command_find(sl_conn_commands, name, len);
}

void sl_server_dispatch(sl_conn *conn, const sl_command *cmd, int argc, const sl_resp_slice *argv)
{
    sl_server *srv = conn->w->srv;
    sl_cmd_ctx ctx = {
        .reply = &sl_resp_reply_sink,
        .sink = &conn->out,
        .exec = &sl_worker_exec,
        .ex = conn->w,
        .lease_key = srv->lease_key,
        .limit_cache = &conn->w->limits,
        .config = atomic_load_explicit(&srv->config, memory_order_acquire),
        .max_key_bytes = srv->cfg.max_key_bytes,
        .face = conn,
        .decided = sl_on_decided,
    };
    sl_counter_add(&conn->w->metrics.commands, 1);
    if (!conn->authed && !(cmd && (cmd->flags & SL_CMD_NOAUTH))) {
        ctx.reply->error(ctx.sink, "NOAUTH Authentication required.");
        return;
    }
    if (!cmd)
        sl_reply_unknown_command(&ctx, argc, argv);
    else
        sl_command_call(cmd, &ctx, argc, argv);
}
