/*
 * resp_driver.c: the RESP client (sluice_resp.h, libsluice_client) against a
 * real sluiced, driven by lines on stdin, each answer one JSON line on
 * stdout; for tests/client's pytest files.
 *
 *   resp_driver --host HOST --port PORT [--timeout-ms N]
 *
 * A line starts with the client it runs on: "s" the blocking client, "a"
 * the asynchronous one on a libuv loop. Each request gets the next id, from
 * 1, printed with its answer.
 *
 *   s connect [PASSWORD]     a blocking context (AUTH PASSWORD when given)
 *   a connect [PASSWORD]     an async one (AUTH queued first)
 *   s auth PASSWORD
 *   s|a take KEY LIMIT PERIOD_MS BURST COST ALG     (BURST 0: the limit)
 *   s|a peek KEY LIMIT PERIOD_MS BURST COST ALG
 *   s|a throttle KEY MAX_BURST COUNT PERIOD_S QUANTITY
 *   s|a policy POLICY KEY COST TOKENS [TIER]
 *   s|a takemany N (KEY LIMIT PERIOD_MS BURST COST ALG){N}
 *   s|a reset KEY [KEY...]
 *   s|a acquire KEY MAX TTL_MS WEIGHT
 *   s|a adaptive KEY MAX TTL_MS ESTIMATOR|- PRIORITY|-
 *   s|a release KEY LEASE_ID [LATENCY_US OUTCOME]
 *   a pipeline N take KEY LIMIT PERIOD_MS BURST COST ALG   N takes at once
 *   a timeout MS             sl_rc_async_set_timeout: a limit on each reply
 *   a wait                   reads no further line until every call is answered
 *   a free                   frees the async context, calls pending or not
 *   a freeincb               the next async callback frees the context (after
 *                            printing its answer; {"freed":true} follows)
 *   a timers                 the loop's active handles, the driver's own left
 *                            out: {"timers":N,"polls":M}
 *   s fd                     hands the socket over (sl_rc_free_keep_fd), PINGs
 *                            on it and closes it
 *   sleep MS
 *
 * Lines that arrive together run in one loop iteration, so that async calls
 * queued by them leave in one write: a pipeline. An async line whose call
 * could not be queued prints {"id":N,"queued":false,...}; "a pipeline"
 * prints {"queued":N} once its calls are queued. An async answer carries
 * "queued_ms" and "answered_ms", the loop's clock (uv_now) when its call was
 * queued and when its callback came. At the end of stdin the
 * driver waits for every answer, frees its contexts, lets the loop close
 * their handles, and exits 0. ASan watches it for leaks and double frees:
 * a callback called twice would free its record twice.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "sluice_resp.h"

static uv_loop_t *loop;
static uv_pipe_t in;
static uv_timer_t sleeper;
static char *pending;
static size_t pending_len;
static bool eof, sleeping, waiting, closed, free_in_cb;
static uint64_t next_id;
static const char *host = "127.0.0.1";
static int port, timeout_ms = 5000;
static sl_rc *sc;
static sl_rc_async *ac;
static size_t answered_twice; /* ids whose callback came more than once */
static unsigned char *seen;   /* by id: callbacks received */
static size_t seen_cap;

static void process(void);

/* A JSON string of text (control bytes as \u00XX). */
static void print_text(const char *text)
{
    putchar('"');
    for (const unsigned char *e = (const unsigned char *)text; e && *e; e++) {
        if (*e == '"' || *e == '\\')
            printf("\\%c", *e);
        else if (*e < 0x20)
            printf("\\u%04x", *e);
        else
            putchar(*e);
    }
    putchar('"');
}

static void print_decision(const sl_decision *d)
{
    printf("{\"allowed\":%s,\"limit\":%" PRId64 ",\"remaining\":%" PRId64
           ",\"retry_after_ns\":%" PRId64 ",\"reset_after_ns\":%" PRId64 ",\"delay_ns\":%" PRId64
           "}",
           d->allowed ? "true" : "false", d->limit, d->remaining, d->retry_after_ns,
           d->reset_after_ns, d->delay_ns);
}

/* The start of an answer: id, client, op, and the error when there is one. */
static void print_head(uint64_t id, char client, const char *op, int err, const char *errstr)
{
    printf("{\"id\":%" PRIu64 ",\"client\":\"%c\",\"op\":\"%s\",\"err\":%d", id, client, op, err);
    if (err) {
        printf(",\"errstr\":");
        print_text(errstr);
    }
}

static void end_answer(void)
{
    printf("}\n");
    fflush(stdout);
}

static void bad_line(const char *why)
{
    printf("{\"id\":%" PRIu64 ",\"error\":", ++next_id);
    print_text(why);
    printf("}\n");
    fflush(stdout);
}

static bool parse_int(const char *s, int64_t *out)
{
    char *end;
    if (!s)
        return false;
    long long v = strtoll(s, &end, 10);
    if (*end || end == s)
        return false;
    *out = v;
    return true;
}

static bool parse_limit(char **tok, sl_rc_limit *l, int64_t *cost)
{
    int64_t limit, period, burst;
    sl_algorithm a;
    if (!parse_int(tok[0], &limit) || !parse_int(tok[1], &period) || !parse_int(tok[2], &burst) ||
        !parse_int(tok[3], cost) || !tok[4] ||
        sl_algorithm_parse(tok[4], strlen(tok[4]), &a) != SL_OK)
        return false;
    *l = (sl_rc_limit){.limit = limit, .period_ms = period, .burst = burst, .algorithm = a};
    return true;
}

/* ---- the async callbacks: each call's id rides in priv ---- */

typedef struct call {
    uint64_t id;
    const char *op;
    uint64_t queued_ms; /* uv_now once the call was queued */
} call;

static call *new_call(const char *op)
{
    call *c = malloc(sizeof *c);
    if (!c)
        abort();
    c->id = ++next_id;
    c->op = op;
    c->queued_ms = 0;
    return c;
}

/* The start of an async answer: its head, and when it was queued and
 * answered on the loop's clock. */
static void async_head(const call *c, int err, const char *errstr)
{
    print_head(c->id, 'a', c->op, err, errstr);
    printf(",\"queued_ms\":%" PRIu64 ",\"answered_ms\":%" PRIu64, c->queued_ms, uv_now(loop));
}

/* Counts the callback of id; an id called back twice is remembered. */
static void mark(uint64_t id)
{
    if (id >= seen_cap) {
        size_t cap = seen_cap ? seen_cap : 1024;
        while (cap <= id)
            cap *= 2;
        seen = realloc(seen, cap);
        memset(seen + seen_cap, 0, cap - seen_cap);
        seen_cap = cap;
    }
    if (seen[id]++)
        answered_twice++;
}

/* After each async callback: "a freeincb" frees the context from within
 * it (the calls still pending are called back once it returns), and a
 * "wait" ends when nothing is pending. */
static void after_async(sl_rc_async *a)
{
    if (free_in_cb && a == ac) {
        free_in_cb = false;
        ac = NULL;
        sl_rc_async_free(a);
        printf("{\"freed\":true}\n");
        fflush(stdout);
    }
    if (waiting && (!ac || sl_rc_async_pending(ac) == 0)) {
        waiting = false;
        process();
    }
}

static void on_decision(sl_rc_async *a, int err, const char *errstr, const sl_decision *d,
                        void *priv)
{
    call *c = priv;
    mark(c->id);
    async_head(c, err, errstr);
    if (!err) {
        printf(",\"d\":");
        print_decision(d);
    }
    end_answer();
    free(c);
    after_async(a);
}

static void print_info(const sl_rc_policy_info *i)
{
    printf(",\"info\":{\"rejected_by\":%d,\"global\":%s,\"binding\":", i->rejected_by,
           i->global ? "true" : "false");
    print_text(i->binding);
    printf(",\"shadow\":%s}", i->shadow ? "true" : "false");
}

static void on_policy(sl_rc_async *a, int err, const char *errstr, const sl_decision *d,
                      const sl_rc_policy_info *info, void *priv)
{
    call *c = priv;
    mark(c->id);
    async_head(c, err, errstr);
    if (!err) {
        printf(",\"d\":");
        print_decision(d);
        print_info(info);
    }
    end_answer();
    free(c);
    after_async(a);
}

static void print_many(const sl_decision *d, size_t n, int rejected_by)
{
    printf(",\"rejected_by\":%d,\"d\":[", rejected_by);
    for (size_t i = 0; i < n; i++) {
        if (i)
            putchar(',');
        print_decision(&d[i]);
    }
    putchar(']');
}

static void on_many(sl_rc_async *a, int err, const char *errstr, const sl_decision *d, size_t n,
                    int rejected_by, void *priv)
{
    call *c = priv;
    mark(c->id);
    async_head(c, err, errstr);
    if (!err)
        print_many(d, n, rejected_by);
    end_answer();
    free(c);
    after_async(a);
}

static void on_count(sl_rc_async *a, int err, const char *errstr, int64_t count, void *priv)
{
    call *c = priv;
    mark(c->id);
    async_head(c, err, errstr);
    if (!err)
        printf(",\"count\":%" PRId64, count);
    end_answer();
    free(c);
    after_async(a);
}

static void print_lease(const sl_rc_lease *l)
{
    printf(",\"granted\":%s,\"lease\":", l->granted ? "true" : "false");
    print_text(l->id);
}

static void on_lease(sl_rc_async *a, int err, const char *errstr, const sl_rc_lease *lease,
                     void *priv)
{
    call *c = priv;
    mark(c->id);
    async_head(c, err, errstr);
    if (!err)
        print_lease(lease);
    end_answer();
    free(c);
    after_async(a);
}

/* An async call that was not queued: its callback will never come. */
static void not_queued(call *c)
{
    printf("{\"id\":%" PRIu64 ",\"client\":\"a\",\"op\":\"%s\",\"queued\":false,\"err\":%d,"
           "\"errstr\":",
           c->id, c->op, sl_rc_async_err(ac));
    print_text(sl_rc_async_errstr(ac));
    end_answer();
    free(c);
}

/* After an async call: rc 0 (queued) stamps the call with the loop's clock
 * as the client saw it, else says it was not queued. */
static void submitted(call *c, int rc)
{
    if (rc)
        not_queued(c);
    else
        c->queued_ms = uv_now(loop);
}

/* Counts the loop's active handles that are not the driver's own. */
static void count_handle(uv_handle_t *h, void *arg)
{
    size_t *n = arg;
    if (h == (uv_handle_t *)&sleeper || h == (uv_handle_t *)&in || !uv_is_active(h))
        return;
    if (uv_handle_get_type(h) == UV_TIMER)
        n[0]++;
    else if (uv_handle_get_type(h) == UV_POLL)
        n[1]++;
}

/* ---- a line ---- */

static void run_sync(char **tok, int nt)
{
    const char *op = tok[1];
    if (strcmp(op, "connect") == 0) {
        sl_rc_free(sc);
        sc = sl_rc_connect(host, port, timeout_ms);
        if (!sc)
            abort();
        if (!sc->err && nt > 2)
            sl_rc_auth(sc, NULL, tok[2]);
        print_head(++next_id, 's', op, sc->err, sc->errstr);
        return end_answer();
    }
    if (!sc)
        return bad_line("no blocking context: s connect first");
    if (strcmp(op, "fd") == 0) {
        /* The socket is still the connection: a PING on it is answered
         * (without AUTH again, where the server asks for a password). */
        int fd = sl_rc_free_keep_fd(sc);
        sc = NULL;
        print_head(++next_id, 's', op, 0, NULL);
        printf(",\"fd\":%d", fd);
        if (fd >= 0) {
            char rep[64] = "";
            ssize_t r = -1;
            if (write(fd, "*1\r\n$4\r\nPING\r\n", 14) == 14)
                r = read(fd, rep, sizeof rep - 1);
            rep[r > 0 ? r : 0] = '\0';
            printf(",\"ping\":");
            print_text(rep);
            close(fd);
        }
        return end_answer();
    }
    uint64_t id = ++next_id;
    int rc = -1;
    sl_decision d[SL_TAKE_MANY_MAX];
    sl_rc_policy_info info;
    sl_rc_lease lease;
    int64_t count = 0;
    int rejected_by = -1;
    size_t n = 1;
    enum { K_NONE, K_DECISION, K_POLICY, K_MANY, K_COUNT, K_LEASE } kind = K_NONE;
    if (strcmp(op, "auth") == 0 && nt == 3) {
        rc = sl_rc_auth(sc, NULL, tok[2]);
    } else if ((strcmp(op, "take") == 0 || strcmp(op, "peek") == 0) && nt == 8) {
        sl_rc_limit l;
        int64_t cost;
        if (!parse_limit(tok + 3, &l, &cost))
            return bad_line("take KEY LIMIT PERIOD_MS BURST COST ALG");
        rc = op[0] == 't' ? sl_rc_take(sc, tok[2], &l, cost, d) : sl_rc_peek(sc, tok[2], &l, cost, d);
        kind = K_DECISION;
    } else if (strcmp(op, "throttle") == 0 && nt == 7) {
        int64_t v[4];
        for (int i = 0; i < 4; i++)
            if (!parse_int(tok[3 + i], &v[i]))
                return bad_line("throttle KEY MAX_BURST COUNT PERIOD_S QUANTITY");
        rc = sl_rc_throttle(sc, tok[2], v[0], v[1], v[2], v[3], d);
        kind = K_DECISION;
    } else if (strcmp(op, "policy") == 0 && (nt == 6 || nt == 7)) {
        int64_t cost, tokens;
        if (!parse_int(tok[4], &cost) || !parse_int(tok[5], &tokens))
            return bad_line("policy POLICY KEY COST TOKENS [TIER]");
        rc = sl_rc_policy(sc, tok[2], tok[3], cost, tokens, nt == 7 ? tok[6] : NULL, d, &info);
        kind = K_POLICY;
    } else if (strcmp(op, "takemany") == 0 && nt >= 3) {
        int64_t k;
        sl_rc_item items[SL_TAKE_MANY_MAX];
        if (!parse_int(tok[2], &k) || k < 1 || k > SL_TAKE_MANY_MAX || nt != 3 + 6 * k)
            return bad_line("takemany N (KEY LIMIT PERIOD_MS BURST COST ALG){N}");
        for (int64_t i = 0; i < k; i++) {
            items[i].key = tok[3 + 6 * i];
            if (!parse_limit(tok + 4 + 6 * i, &items[i].limit, &items[i].cost))
                return bad_line("takemany: a bad limit");
        }
        n = (size_t)k;
        rc = sl_rc_take_many(sc, items, n, d, &rejected_by);
        kind = K_MANY;
    } else if (strcmp(op, "reset") == 0 && nt >= 3) {
        count = sl_rc_reset(sc, (const char *const *)tok + 2, (size_t)nt - 2);
        rc = count < 0 ? -1 : 0;
        kind = K_COUNT;
    } else if (strcmp(op, "acquire") == 0 && nt == 6) {
        int64_t max, ttl, weight;
        if (!parse_int(tok[3], &max) || !parse_int(tok[4], &ttl) || !parse_int(tok[5], &weight))
            return bad_line("acquire KEY MAX TTL_MS WEIGHT");
        rc = sl_rc_acquire(sc, tok[2], max, ttl, weight, &lease);
        kind = K_LEASE;
    } else if (strcmp(op, "adaptive") == 0 && nt == 7) {
        sl_rc_adaptive a = {0};
        if (!parse_int(tok[3], &a.max_in_flight) || !parse_int(tok[4], &a.ttl_ms))
            return bad_line("adaptive KEY MAX TTL_MS ESTIMATOR|- PRIORITY|-");
        a.estimator = strcmp(tok[5], "-") ? tok[5] : NULL;
        a.priority = strcmp(tok[6], "-") ? tok[6] : NULL;
        rc = sl_rc_acquire_adaptive(sc, tok[2], &a, &lease);
        kind = K_LEASE;
    } else if (strcmp(op, "release") == 0 && (nt == 4 || nt == 6)) {
        sl_rc_outcome o = {.latency_us = -1};
        if (nt == 6 && !parse_int(tok[4], &o.latency_us))
            return bad_line("release KEY LEASE_ID [LATENCY_US OUTCOME]");
        if (nt == 6)
            o.outcome = tok[5];
        int r = sl_rc_release(sc, tok[2], tok[3], nt == 6 ? &o : NULL);
        rc = r < 0 ? -1 : 0;
        count = r;
        kind = K_COUNT;
    } else {
        next_id--;
        return bad_line("unknown blocking line");
    }
    print_head(id, 's', op, rc ? sc->err : 0, sc->errstr);
    if (rc == 0) {
        if (kind == K_DECISION || kind == K_POLICY) {
            printf(",\"d\":");
            print_decision(&d[0]);
            if (kind == K_POLICY)
                print_info(&info);
        } else if (kind == K_MANY) {
            print_many(d, n, rejected_by);
        } else if (kind == K_COUNT) {
            printf(",\"count\":%" PRId64, count);
        } else if (kind == K_LEASE) {
            print_lease(&lease);
        }
    }
    end_answer();
}

static void run_async(char **tok, int nt)
{
    const char *op = tok[1];
    if (strcmp(op, "connect") == 0) {
        sl_rc_async_free(ac);
        ac = sl_rc_async_connect(loop, host, port, NULL, nt > 2 ? tok[2] : NULL, timeout_ms);
        if (!ac)
            abort();
        print_head(++next_id, 'a', op, sl_rc_async_err(ac), sl_rc_async_errstr(ac));
        return end_answer();
    }
    if (!ac)
        return bad_line("no async context: a connect first");
    if (strcmp(op, "wait") == 0) {
        waiting = sl_rc_async_pending(ac) > 0;
        return;
    }
    if (strcmp(op, "timers") == 0) {
        size_t n[2] = {0, 0};
        uv_walk(loop, count_handle, n);
        printf("{\"timers\":%zu,\"polls\":%zu}\n", n[0], n[1]);
        fflush(stdout);
        return;
    }
    if (strcmp(op, "freeincb") == 0) {
        free_in_cb = true;
        return;
    }
    if (strcmp(op, "timeout") == 0 && nt == 3) {
        int64_t ms;
        if (!parse_int(tok[2], &ms) || ms < INT32_MIN || ms > INT32_MAX)
            return bad_line("timeout MS");
        int rc = sl_rc_async_set_timeout(ac, (int)ms);
        print_head(++next_id, 'a', op, rc ? sl_rc_async_err(ac) : 0, sl_rc_async_errstr(ac));
        return end_answer();
    }
    if (strcmp(op, "free") == 0) {
        sl_rc_async *a = ac;
        ac = NULL;
        sl_rc_async_free(a);
        printf("{\"freed\":true}\n");
        fflush(stdout);
        return;
    }
    int rc;
    if (strcmp(op, "pipeline") == 0 && nt == 10 && strcmp(tok[3], "take") == 0) {
        int64_t n, cost;
        sl_rc_limit l;
        if (!parse_int(tok[2], &n) || n < 1 || !parse_limit(tok + 5, &l, &cost))
            return bad_line("pipeline N take KEY LIMIT PERIOD_MS BURST COST ALG");
        int64_t queued = 0;
        for (int64_t i = 0; i < n; i++) {
            call *c = new_call("take");
            int r = sl_rc_async_take(ac, tok[4], &l, cost, on_decision, c);
            submitted(c, r);
            queued += r == 0;
        }
        printf("{\"queued\":%" PRId64 "}\n", queued);
        fflush(stdout);
        return;
    }
    if ((strcmp(op, "take") == 0 || strcmp(op, "peek") == 0) && nt == 8) {
        sl_rc_limit l;
        int64_t cost;
        if (!parse_limit(tok + 3, &l, &cost))
            return bad_line("take KEY LIMIT PERIOD_MS BURST COST ALG");
        call *c = new_call(op[0] == 't' ? "take" : "peek");
        rc = op[0] == 't' ? sl_rc_async_take(ac, tok[2], &l, cost, on_decision, c)
                          : sl_rc_async_peek(ac, tok[2], &l, cost, on_decision, c);
        submitted(c, rc);
    } else if (strcmp(op, "throttle") == 0 && nt == 7) {
        int64_t v[4];
        for (int i = 0; i < 4; i++)
            if (!parse_int(tok[3 + i], &v[i]))
                return bad_line("throttle KEY MAX_BURST COUNT PERIOD_S QUANTITY");
        call *c = new_call("throttle");
        submitted(c, sl_rc_async_throttle(ac, tok[2], v[0], v[1], v[2], v[3], on_decision, c));
    } else if (strcmp(op, "policy") == 0 && (nt == 6 || nt == 7)) {
        int64_t cost, tokens;
        if (!parse_int(tok[4], &cost) || !parse_int(tok[5], &tokens))
            return bad_line("policy POLICY KEY COST TOKENS [TIER]");
        call *c = new_call("policy");
        submitted(c, sl_rc_async_policy(ac, tok[2], tok[3], cost, tokens,
                                        nt == 7 ? tok[6] : NULL, on_policy, c));
    } else if (strcmp(op, "takemany") == 0 && nt >= 3) {
        int64_t k;
        sl_rc_item items[SL_TAKE_MANY_MAX];
        if (!parse_int(tok[2], &k) || k < 1 || k > SL_TAKE_MANY_MAX || nt != 3 + 6 * k)
            return bad_line("takemany N (KEY LIMIT PERIOD_MS BURST COST ALG){N}");
        for (int64_t i = 0; i < k; i++) {
            items[i].key = tok[3 + 6 * i];
            if (!parse_limit(tok + 4 + 6 * i, &items[i].limit, &items[i].cost))
                return bad_line("takemany: a bad limit");
        }
        call *c = new_call("takemany");
        submitted(c, sl_rc_async_take_many(ac, items, (size_t)k, on_many, c));
    } else if (strcmp(op, "reset") == 0 && nt >= 3) {
        call *c = new_call("reset");
        submitted(c, sl_rc_async_reset(ac, (const char *const *)tok + 2, (size_t)nt - 2,
                                       on_count, c));
    } else if (strcmp(op, "acquire") == 0 && nt == 6) {
        int64_t max, ttl, weight;
        if (!parse_int(tok[3], &max) || !parse_int(tok[4], &ttl) || !parse_int(tok[5], &weight))
            return bad_line("acquire KEY MAX TTL_MS WEIGHT");
        call *c = new_call("acquire");
        submitted(c, sl_rc_async_acquire(ac, tok[2], max, ttl, weight, on_lease, c));
    } else if (strcmp(op, "adaptive") == 0 && nt == 7) {
        sl_rc_adaptive a = {0};
        if (!parse_int(tok[3], &a.max_in_flight) || !parse_int(tok[4], &a.ttl_ms))
            return bad_line("adaptive KEY MAX TTL_MS ESTIMATOR|- PRIORITY|-");
        a.estimator = strcmp(tok[5], "-") ? tok[5] : NULL;
        a.priority = strcmp(tok[6], "-") ? tok[6] : NULL;
        call *c = new_call("adaptive");
        submitted(c, sl_rc_async_acquire_adaptive(ac, tok[2], &a, on_lease, c));
    } else if (strcmp(op, "release") == 0 && (nt == 4 || nt == 6)) {
        sl_rc_outcome o = {.latency_us = -1};
        if (nt == 6 && !parse_int(tok[4], &o.latency_us))
            return bad_line("release KEY LEASE_ID [LATENCY_US OUTCOME]");
        if (nt == 6)
            o.outcome = tok[5];
        call *c = new_call("release");
        submitted(c, sl_rc_async_release(ac, tok[2], tok[3], nt == 6 ? &o : NULL, on_count, c));
    } else {
        bad_line("unknown async line");
    }
}

static void on_wake(uv_timer_t *t)
{
    (void)t;
    process();
}

static void run_line(char *line)
{
    char *tok[300];
    int nt = 0;
    for (char *p = strtok(line, " \t\r"); p && nt < 299; p = strtok(NULL, " \t\r"))
        tok[nt++] = p;
    tok[nt] = NULL;
    if (nt == 0)
        return;
    if (strcmp(tok[0], "sleep") == 0) {
        int64_t ms;
        if (!parse_int(tok[1], &ms) || ms < 0)
            return bad_line("sleep MS");
        sleeping = true;
        uv_timer_start(&sleeper, on_wake, (uint64_t)ms, 0);
        return;
    }
    if (nt < 2 || (strcmp(tok[0], "s") != 0 && strcmp(tok[0], "a") != 0))
        return bad_line("a line starts with s or a, then the op");
    if (tok[0][0] == 's')
        run_sync(tok, nt);
    else
        run_async(tok, nt);
}

/* The end: frees the contexts (a last callback may come from the async
 * free) and closes the driver's own handles, so that uv_run returns. */
static void finish(void)
{
    if (closed)
        return;
    closed = true;
    sl_rc_free(sc);
    sc = NULL;
    sl_rc_async *a = ac;
    ac = NULL;
    sl_rc_async_free(a);
    printf("{\"done\":true,\"answered_twice\":%zu}\n", answered_twice);
    fflush(stdout);
    uv_close((uv_handle_t *)&in, NULL);
    uv_close((uv_handle_t *)&sleeper, NULL);
}

/* Runs buffered lines until one pauses (sleep, wait) or none is complete. */
static void process(void)
{
    sleeping = false;
    while (!sleeping && !waiting && !closed) {
        char *nl = memchr(pending, '\n', pending_len);
        if (!nl)
            break;
        *nl = '\0';
        size_t used = (size_t)(nl + 1 - pending);
        char *line = strdup(pending);
        memmove(pending, nl + 1, pending_len - used);
        pending_len -= used;
        run_line(line);
        free(line);
    }
    if (eof && !sleeping && !waiting && !closed && !memchr(pending, '\n', pending_len)) {
        if (ac && sl_rc_async_pending(ac) > 0)
            waiting = true; /* after_async comes back here */
        else
            finish();
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    buf->base = malloc(suggested);
    buf->len = suggested;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    if (n > 0) {
        pending = realloc(pending, pending_len + (size_t)n + 1);
        memcpy(pending + pending_len, buf->base, (size_t)n);
        pending_len += (size_t)n;
    } else if (n < 0) {
        eof = true;
        uv_read_stop(s);
    }
    free(buf->base);
    if (!sleeping && !waiting)
        process();
}

int main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *f = argv[i], *v = argv[i + 1];
        if (strcmp(f, "--host") == 0)
            host = v;
        else if (strcmp(f, "--port") == 0)
            port = atoi(v);
        else if (strcmp(f, "--timeout-ms") == 0)
            timeout_ms = atoi(v);
        else {
            fprintf(stderr, "resp_driver: unknown flag %s\n", f);
            return 2;
        }
    }
    if (port <= 0) {
        fprintf(stderr, "resp_driver: --port PORT\n");
        return 2;
    }
    loop = uv_default_loop();
    uv_timer_init(loop, &sleeper);
    uv_pipe_init(loop, &in, 0);
    if (uv_pipe_open(&in, 0) != 0) {
        fprintf(stderr, "resp_driver: stdin is not a pipe\n");
        return 2;
    }
    pending = malloc(1);
    uv_read_start((uv_stream_t *)&in, on_alloc, on_read);
    uv_run(loop, UV_RUN_DEFAULT);
    int rc = uv_loop_close(loop);
    if (rc != 0)
        fprintf(stderr, "resp_driver: the loop still holds handles: %s\n", uv_strerror(rc));
    free(pending);
    free(seen);
    return rc == 0 && answered_twice == 0 ? 0 : 1;
}
