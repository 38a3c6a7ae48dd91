/*
 * sync.c: the blocking RESP client (sluice_resp.h), over hiredis's
 * redisContext: a call builds its command (command.c), hiredis sends it and
 * waits for the reply, and the reply is read into the caller's structs.
 *
 * A connection that fails (hiredis's context then carries an error and
 * cannot be used again: the stream may be out of step) is freed at once and
 * the context is left dead: its err and errstr stay as the failure set them,
 * and every later call fails with them without touching the network. An
 * error reply or a reply of another shape leaves the stream in step, so the
 * next call clears them and goes on.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "command.h"

static void set_err(sl_rc *c, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void set_err(sl_rc *c, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->errstr, sizeof c->errstr, fmt, ap);
    va_end(ap);
    c->err = err;
}

sl_rc *sl_rc_connect(const char *host, int port, int timeout_ms)
{
    sl_rc *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (!host || !*host || port <= 0 || port > 65535) {
        set_err(c, SL_RC_ERR_ARGS, "cannot connect: '%s:%d' is not a host and a port (1-65535)",
                host ? host : "(null)", port);
        return c;
    }
    snprintf(c->addr, sizeof c->addr, "%s:%d", host, port);
    c->timeout_ms = timeout_ms;
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    redisContext *r = timeout_ms > 0 ? redisConnectWithTimeout(host, port, tv)
                                     : redisConnect(host, port);
    if (!r) {
        set_err(c, SL_RC_ERR_OOM, "cannot connect to %s: out of memory", c->addr);
        return c;
    }
    if (r->err) {
        set_err(c, SL_RC_ERR_IO, "cannot connect to %s: %s", c->addr, r->errstr);
        redisFree(r);
        return c;
    }
    if (timeout_ms > 0 && redisSetTimeout(r, tv) != REDIS_OK) {
        set_err(c, SL_RC_ERR_IO, "cannot set a timeout on the connection to %s: %s", c->addr,
                r->errstr);
        redisFree(r);
        return c;
    }
    c->redis = r;
    return c;
}

void sl_rc_free(sl_rc *c)
{
    if (!c)
        return;
    if (c->redis)
        redisFree(c->redis);
    free(c);
}

int sl_rc_free_keep_fd(sl_rc *c)
{
    if (!c)
        return -1;
    int fd = c->redis ? redisFreeKeepFd(c->redis) : -1;
    free(c);
    return fd;
}

/*
 * Sends cmd and reads its reply into *out. Returns 0, or -1 with the error
 * set; a failed connection is freed and the context left dead.
 */
static int call(sl_rc *c, sl_rc_cmd *cmd, sl_rc_answer *out)
{
    redisContext *r = c->redis;
    errno = 0;
    redisReply *rep = redisCommandArgv(r, cmd->argc, cmd->argv, cmd->lens);
    if (!rep) {
        int e = errno;
        if (r->err == REDIS_ERR_IO && (e == EAGAIN || e == EWOULDBLOCK))
            set_err(c, SL_RC_ERR_IO, "%s: no reply to %s within %d ms", c->addr, cmd->expect.name,
                    c->timeout_ms);
        else if (r->err == REDIS_ERR_PROTOCOL)
            set_err(c, SL_RC_ERR_IO, "%s answered %s with bytes that are not RESP: %s", c->addr,
                    cmd->expect.name, r->errstr);
        else if (r->err == REDIS_ERR_OOM)
            set_err(c, SL_RC_ERR_IO, "%s: out of memory while reading the reply to %s", c->addr,
                    cmd->expect.name);
        else
            set_err(c, SL_RC_ERR_IO, "connection to %s lost: %s", c->addr,
                    r->errstr[0] ? r->errstr : "no reply");
        redisFree(r);
        c->redis = NULL;
        return -1;
    }
    int rc = sl_rc_read(&cmd->expect, rep, out, c->errstr, sizeof c->errstr);
    freeReplyObject(rep);
    if (rc != SL_RC_OK) {
        c->err = rc;
        return -1;
    }
    return 0;
}

/* The start of every call: a dead context keeps its error and refuses. */
static bool usable(sl_rc *c)
{
    if (!c->redis)
        return false;
    c->err = 0;
    c->errstr[0] = '\0';
    return true;
}

/* A command that could not be built: its error, nothing sent. */
static int args_failed(sl_rc *c)
{
    c->err = SL_RC_ERR_ARGS;
    return -1;
}

int sl_rc_auth(sl_rc *c, const char *user, const char *password)
{
    sl_rc_cmd cmd;
    sl_rc_answer a;
    if (!usable(c))
        return -1;
    if (sl_rc_cmd_auth(&cmd, user, password, c->errstr, sizeof c->errstr) != 0)
        return args_failed(c);
    return call(c, &cmd, &a);
}

int sl_rc_throttle(sl_rc *c, const char *key, int64_t max_burst, int64_t count_per_period,
                   int64_t period_s, int64_t quantity, sl_decision *out)
{
    sl_rc_cmd cmd;
    sl_rc_answer a;
    if (!usable(c))
        return -1;
    if (sl_rc_cmd_throttle(&cmd, key, max_burst, count_per_period, period_s, quantity, c->errstr,
                           sizeof c->errstr) != 0)
        return args_failed(c);
    if (call(c, &cmd, &a) != 0)
        return -1;
    *out = a.d[0];
    return 0;
}

static int take_or_peek(sl_rc *c, bool peek, const char *key, const sl_rc_limit *l, int64_t cost,
                        sl_decision *out)
{
    sl_rc_cmd cmd;
    sl_rc_answer a;
    if (!usable(c))
        return -1;
    if (sl_rc_cmd_take(&cmd, peek, key, l, cost, c->errstr, sizeof c->errstr) != 0)
        return args_failed(c);
    if (call(c, &cmd, &a) != 0)
        return -1;
    *out = a.d[0];
    return 0;
}

int sl_rc_take(sl_rc *c, const char *key, const sl_rc_limit *l, int64_t cost, sl_decision *out)
{
    return take_or_peek(c, false, key, l, cost, out);
}

int sl_rc_peek(sl_rc *c, const char *key, const sl_rc_limit *l, int64_t cost, sl_decision *out)
{
    return take_or_peek(c, true, key, l, cost, out);
}

int sl_rc_policy(sl_rc *c, const char *policy, const char *key, int64_t cost, int64_t tokens,
                 const char *tier, sl_decision *out, sl_rc_policy_info *info)
{
    sl_rc_cmd cmd;
    sl_rc_answer a;
    if (!usable(c))
        return -1;
    if (sl_rc_cmd_policy(&cmd, policy, key, cost, tokens, tier, c->errstr, sizeof c->errstr) != 0)
        return args_failed(c);
    if (call(c, &cmd, &a) != 0)
        return -1;
    *out = a.d[0];
    if (info)
        *info = a.info;
    return 0;
}

int sl_rc_take_many(sl_rc *c, const sl_rc_item *items, size_t n, sl_decision *out,
                    int *rejected_by)
{
    sl_rc_cmd cmd;
    sl_rc_answer a;
    if (!usable(c))
        return -1;
    if (sl_rc_cmd_take_many(&cmd, items, n, c->errstr, sizeof c->errstr) != 0)
        return args_failed(c);
    if (call(c, &cmd, &a) != 0)
        return -1;
    memcpy(out, a.d, n * sizeof *out);
    if (rejected_by)
        *rejected_by = a.rejected_by;
    return 0;
}

int64_t sl_rc_reset(sl_rc *c, const char *const *keys, size_t n)
{
    sl_rc_cmd cmd;
    sl_rc_answer a;
    if (!usable(c))
        return -1;
    if (sl_rc_cmd_reset(&cmd, keys, n, c->errstr, sizeof c->errstr) != 0)
        return args_failed(c);
    if (call(c, &cmd, &a) != 0)
        return -1;
    return a.count;
}

int sl_rc_acquire(sl_rc *c, const char *key, int64_t max_in_flight, int64_t ttl_ms,
                  int64_t weight, sl_rc_lease *out)
{
    sl_rc_cmd cmd;
    sl_rc_answer a;
    if (!usable(c))
        return -1;
    if (sl_rc_cmd_acquire(&cmd, key, max_in_flight, ttl_ms, weight, c->errstr,
                          sizeof c->errstr) != 0)
        return args_failed(c);
    if (call(c, &cmd, &a) != 0)
        return -1;
    *out = a.lease;
    return 0;
}

int sl_rc_acquire_adaptive(sl_rc *c, const char *key, const sl_rc_adaptive *ad, sl_rc_lease *out)
{
    sl_rc_cmd cmd;
    sl_rc_answer a;
    if (!usable(c))
        return -1;
    if (sl_rc_cmd_acquire_adaptive(&cmd, key, ad, c->errstr, sizeof c->errstr) != 0)
        return args_failed(c);
    if (call(c, &cmd, &a) != 0)
        return -1;
    *out = a.lease;
    return 0;
}

int sl_rc_release(sl_rc *c, const char *key, const char *lease_id, const sl_rc_outcome *o)
{
    sl_rc_cmd cmd;
    sl_rc_answer a;
    if (!usable(c))
        return -1;
    if (sl_rc_cmd_release(&cmd, key, lease_id, o, c->errstr, sizeof c->errstr) != 0)
        return args_failed(c);
    if (call(c, &cmd, &a) != 0)
        return -1;
    return (int)a.count;
}
