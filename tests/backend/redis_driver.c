/*
 * redis_driver.c: a backend (backend.h) on a uv loop, driven by lines on
 * stdin, answering each request as one JSON line on stdout; for
 * tests/backend's pytest files.
 *
 *   redis_driver --store URL [--on-error P] [--timeout-ms N] [--fleet-nodes N]
 *                [--local-memory BYTES]
 *
 * Lines (each request gets the next id, from 1, printed with its answer):
 *   take KEY ALGO LIMIT PERIOD_MS BURST COST [OPT...]
 *   peek KEY ALGO LIMIT PERIOD_MS BURST COST [OPT...]
 *   takemany N (KEY ALGO LIMIT PERIOD_MS BURST COST){N} [OPT...]
 *   cell KEY MAX_BURST COUNT PERIOD_S COST [OPT...]     (CL.THROTTLE's limit)
 *   acquire KEY MAX_IN_FLIGHT TTL_MS WEIGHT LEASE_HEX [OPT...]
 *   release KEY MAX_IN_FLIGHT TTL_MS LEASE_HEX [OPT...]
 *   reset KEY [KEY...] [OPT...]                    (up to 64 keys)
 *   stats        the backend's stats and the worker's last error
 *   sleep MS     reads no further line for MS milliseconds (the loop runs)
 *   wait         reads no further line until every request is answered
 *   quit         detaches now, with requests in flight (each is answered by
 *                detach), and exits at once
 * OPT: on_error=fail_open|fail_closed|local, timeout=MS, carry (a carried limit).
 *
 * Lines that arrive together are submitted in the same loop iteration
 * without waiting for each other's answers: that is how a test makes
 * pipelined and out-of-order completions. At the end of stdin the driver
 * waits for every answer, detaches, and exits 0; a bad line prints
 * {"id":N,"error":"..."} and the driver goes on.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "backend/redis.h"
#include "common/clock.h"
#include "policy/config.h"

#define RESET_MAX 64 /* keys of one reset line: more than one SL.DECIDE takes */

typedef struct job {
    sl_backend_req req;
    sl_take_item items[RESET_MAX];
    sl_limit limits[SL_TAKE_MANY_MAX];
    sl_decision d[SL_TAKE_MANY_MAX];
    char *keys[RESET_MAX];
    uint64_t id;
    const char *op;
} job;

static uv_loop_t *loop;
static sl_backend *backend;
static sl_backend_worker *worker;
static int64_t now_ns;
static uv_pipe_t in;
static uv_timer_t sleeper;
static char *pending; /* stdin bytes not yet processed */
static size_t pending_len;
static bool eof, sleeping, waiting;
static size_t inflight;
static uint64_t next_id;

static void process(void);

static void on_wake(uv_timer_t *t)
{
    (void)t;
    process();
}

/* A JSON string of text (control bytes dropped: the tests look for words). */
static void print_text(const char *text)
{
    putchar('"');
    for (const char *e = text; *e; e++)
        if (*e == '"' || *e == '\\')
            printf("\\%c", *e);
        else if ((unsigned char)*e >= 0x20)
            putchar(*e);
    putchar('"');
}

static void print_answer(job *j)
{
    sl_backend_req *r = &j->req;
    printf("{\"id\":%" PRIu64 ",\"op\":\"%s\",\"rc\":%d,\"by\":\"%s\",\"failed\":%d,"
           "\"count\":%" PRId64,
           j->id, j->op, r->rc, sl_fallback_name(r->by), r->failed, r->count);
    if (r->rc != SL_OK)
        printf(",\"error\":\"%s\"", sl_strerror(r->rc));
    if (r->errstr) {
        printf(",\"errstr\":");
        print_text(r->errstr);
    }
    if (r->rc == SL_OK && r->op != SL_OP_RESET && r->op != SL_OP_RELEASE) {
        printf(",\"d\":[");
        for (size_t k = 0; k < r->n; k++) {
            const sl_decision *d = &r->d[k];
            printf("%s{\"allowed\":%s,\"limit\":%" PRId64 ",\"remaining\":%" PRId64
                   ",\"retry_after_ns\":%" PRId64 ",\"reset_after_ns\":%" PRId64
                   ",\"delay_ns\":%" PRId64 ",\"lease\":\"%016" PRIx64 "\"}",
                   k ? "," : "", d->allowed ? "true" : "false", d->limit, d->remaining,
                   d->retry_after_ns, d->reset_after_ns, d->delay_ns, d->lease_id);
        }
        printf("]");
    }
    printf("}\n");
    fflush(stdout);
    for (size_t k = 0; k < RESET_MAX; k++)
        free(j->keys[k]);
    free(j);
}

static void on_done(sl_backend_req *r)
{
    job *j = r->owner;
    inflight--;
    print_answer(j);
    if (waiting && inflight == 0) {
        waiting = false;
        process();
    }
}

static void bad_line(const char *why)
{
    printf("{\"id\":%" PRIu64 ",\"error\":\"%s\"}\n", ++next_id, why);
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

/* One "KEY ALGO LIMIT PERIOD_MS BURST COST" group into item k. */
static bool parse_group(job *j, size_t k, char **tok, bool carry)
{
    int64_t limit, period_ms, burst, cost;
    sl_algorithm a;
    if (sl_algorithm_parse(tok[1], strlen(tok[1]), &a) != SL_OK || !parse_int(tok[2], &limit) ||
        !parse_int(tok[3], &period_ms) || !parse_int(tok[4], &burst) || !parse_int(tok[5], &cost))
        return false;
    if (sl_limit_init(&j->limits[k], a, limit, period_ms * 1000000, burst) != SL_OK)
        return false;
    if (carry && sl_limit_carry(&j->limits[k]) != SL_OK)
        return false;
    j->keys[k] = strdup(tok[0]);
    j->items[k] = (sl_take_item){j->keys[k], strlen(tok[0]), &j->limits[k], cost};
    return true;
}

static void run_line(char *line)
{
    char *tok[128];
    int nt = 0;
    for (char *p = strtok(line, " \t\r"); p && nt < 127; p = strtok(NULL, " \t\r"))
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
    if (strcmp(tok[0], "quit") == 0) {
        eof = true;
        uv_read_stop((uv_stream_t *)&in);
        backend->ops->detach(worker);
        worker = NULL;
        if (inflight != 0) {
            printf("{\"error\":\"%zu requests not answered by detach\"}\n", inflight);
            fflush(stdout);
        }
        uv_close((uv_handle_t *)&in, NULL);
        uv_close((uv_handle_t *)&sleeper, NULL);
        sleeping = true; /* no further line */
        return;
    }
    if (strcmp(tok[0], "wait") == 0) {
        waiting = inflight > 0;
        return;
    }
    if (strcmp(tok[0], "stats") == 0) {
        sl_backend_stats st;
        backend->ops->stats(backend, &st);
        static const char *const states[] = {"up", "down", "breaker_open"};
        printf("{\"stats\":{\"state\":\"%s\",\"requests\":%" PRIu64 ",\"errors\":%" PRIu64
               ",\"timeouts\":%" PRIu64 ",\"connects\":%" PRIu64 ",\"disconnects\":%" PRIu64
               ",\"breaker_opens\":%" PRIu64 ",\"module\":%s,\"rtt\":[",
               states[st.state], st.requests, st.errors, st.timeouts, st.connects,
               st.disconnects, st.breaker_opens, st.module ? "true" : "false");
        for (int i = 0; i < SL_RTT_BUCKETS; i++)
            printf("%s%" PRIu64, i ? "," : "", st.rtt[i]);
        printf("]},\"last_error\":");
        print_text(sl_backend_redis_last_error(worker));
        printf("}\n");
        fflush(stdout);
        return;
    }

    /* Options at the end of the line. */
    sl_on_error on_error = SL_ON_ERROR_DEFAULT;
    int64_t timeout = 0;
    bool carry = false;
    while (nt > 1) {
        char *t = tok[nt - 1];
        if (strncmp(t, "on_error=", 9) == 0) {
            if (sl_on_error_parse(t + 9, strlen(t + 9), &on_error) != SL_OK)
                return bad_line("unknown on_error");
        } else if (strncmp(t, "timeout=", 8) == 0) {
            if (!parse_int(t + 8, &timeout))
                return bad_line("timeout=MS");
        } else if (strcmp(t, "carry") == 0) {
            carry = true;
        } else {
            break;
        }
        tok[--nt] = NULL;
    }

    job *j = calloc(1, sizeof *j);
    if (!j)
        abort();
    sl_backend_req *r = &j->req;
    r->on_error = on_error;
    r->timeout_ms = (int32_t)timeout;
    r->d = j->d;
    r->items = j->items;
    r->done = on_done;
    r->owner = j;
    bool ok = false;
    j->op = tok[0];
    if ((strcmp(tok[0], "take") == 0 || strcmp(tok[0], "peek") == 0) && nt == 7) {
        r->op = tok[0][0] == 't' ? SL_OP_TAKE : SL_OP_PEEK;
        j->op = r->op == SL_OP_TAKE ? "take" : "peek";
        r->n = 1;
        ok = parse_group(j, 0, tok + 1, carry);
    } else if (strcmp(tok[0], "takemany") == 0 && nt >= 2) {
        int64_t n;
        j->op = "takemany";
        r->op = SL_OP_TAKE;
        ok = parse_int(tok[1], &n) && n >= 1 && n <= SL_TAKE_MANY_MAX && nt == 2 + 6 * n;
        r->n = ok ? (size_t)n : 0;
        for (size_t k = 0; ok && k < r->n; k++)
            ok = parse_group(j, k, tok + 2 + 6 * k, carry);
    } else if (strcmp(tok[0], "cell") == 0 && nt == 6) {
        int64_t mb, count, period, cost;
        j->op = "cell";
        r->op = SL_OP_TAKE;
        r->n = 1;
        ok = parse_int(tok[2], &mb) && parse_int(tok[3], &count) && parse_int(tok[4], &period) &&
             parse_int(tok[5], &cost) &&
             sl_limit_init_cell(&j->limits[0], mb, count, period) == SL_OK;
        if (ok) {
            j->keys[0] = strdup(tok[1]);
            j->items[0] = (sl_take_item){j->keys[0], strlen(tok[1]), &j->limits[0], cost};
        }
    } else if ((strcmp(tok[0], "acquire") == 0 && nt == 6) ||
               (strcmp(tok[0], "release") == 0 && nt == 5)) {
        int64_t max, ttl, weight = 0;
        bool acq = tok[0][0] == 'a';
        j->op = acq ? "acquire" : "release";
        r->op = acq ? SL_OP_ACQUIRE : SL_OP_RELEASE;
        r->n = 1;
        char *end;
        const char *hex = tok[acq ? 5 : 4];
        r->lease_id = strtoull(hex, &end, 16);
        ok = !*end && parse_int(tok[2], &max) && parse_int(tok[3], &ttl) &&
             (!acq || parse_int(tok[4], &weight)) &&
             sl_limit_init(&j->limits[0], SL_CONCURRENCY, max, ttl * 1000000, 0) == SL_OK;
        if (ok) {
            j->keys[0] = strdup(tok[1]);
            j->items[0] = (sl_take_item){j->keys[0], strlen(tok[1]), &j->limits[0], weight};
        }
    } else if (strcmp(tok[0], "reset") == 0 && nt >= 2 && nt <= 1 + RESET_MAX) {
        j->op = "reset";
        r->op = SL_OP_RESET;
        r->n = (size_t)nt - 1;
        for (size_t k = 0; k < r->n; k++) {
            j->keys[k] = strdup(tok[1 + k]);
            j->items[k] = (sl_take_item){j->keys[k], strlen(tok[1 + k]), NULL, 0};
        }
        ok = true;
    }
    if (!ok) {
        for (size_t k = 0; k < RESET_MAX; k++)
            free(j->keys[k]);
        free(j);
        return bad_line("bad request line");
    }
    j->id = ++next_id;
    int rc = sl_backend_submit(backend, worker, r);
    if (rc == SL_PENDING) {
        inflight++;
        return;
    }
    print_answer(j);
}

static void finish(void)
{
    if (inflight > 0)
        return; /* on_done comes back here through process() */
    worker ? backend->ops->detach(worker) : (void)0;
    worker = NULL;
    uv_close((uv_handle_t *)&in, NULL);
    uv_close((uv_handle_t *)&sleeper, NULL);
}

/* Runs buffered lines until one pauses (sleep, wait) or none is complete. */
static void process(void)
{
    sleeping = false;
    now_ns = sl_now_mono(); /* the clock sluiced passes its backend */
    while (!sleeping && !waiting) {
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
    if (eof && !sleeping && !waiting && !memchr(pending, '\n', pending_len)) {
        if (inflight == 0 && worker)
            finish();
        else if (worker)
            waiting = true;
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
    sl_redis_config cfg = {0};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *f = argv[i], *v = argv[i + 1];
        if (strcmp(f, "--store") == 0)
            cfg.url = v;
        else if (strcmp(f, "--on-error") == 0) {
            if (sl_on_error_parse(v, strlen(v), &cfg.on_error) != SL_OK) {
                fprintf(stderr, "redis_driver: unknown --on-error %s\n", v);
                return 2;
            }
        } else if (strcmp(f, "--timeout-ms") == 0)
            cfg.timeout_ms = atoi(v);
        else if (strcmp(f, "--fleet-nodes") == 0)
            cfg.fleet_nodes = atoi(v);
        else if (strcmp(f, "--local-memory") == 0)
            cfg.local_memory = strtoull(v, NULL, 10);
        else {
            fprintf(stderr, "redis_driver: unknown flag %s\n", f);
            return 2;
        }
    }
    if (!cfg.url) {
        fprintf(stderr, "redis_driver: --store URL\n");
        return 2;
    }
    sl_store *mem = NULL;
    if (strncmp(cfg.url, "memory://", 9) == 0) {
#ifdef SL_HAVE_MEMORY_BACKEND
        sl_store_config sc = {0};
        if (sl_store_new(&sc, &mem) != SL_OK)
            return 1;
        backend = sl_backend_memory(mem);
#else
        fprintf(stderr, "redis_driver: memory:// needs src/backend/memory.c\n");
        return 2;
#endif
    } else {
        char err[256];
        if (sl_backend_redis(&cfg, &backend, err, sizeof err) != SL_OK) {
            fprintf(stderr, "redis_driver: %s\n", err);
            return 2;
        }
    }
    loop = uv_default_loop();
    const char *err = NULL;
    worker = backend->ops->attach(backend, loop, &now_ns, &err);
    if (!worker) {
        fprintf(stderr, "redis_driver: attach: %s\n", err);
        return 1;
    }
    uv_timer_init(loop, &sleeper);
    uv_pipe_init(loop, &in, 0);
    if (uv_pipe_open(&in, 0) != 0) {
        fprintf(stderr, "redis_driver: stdin is not a pipe\n");
        return 2;
    }
    pending = malloc(1);
    uv_read_start((uv_stream_t *)&in, on_alloc, on_read);
    uv_run(loop, UV_RUN_DEFAULT);
    /* process() pauses with `waiting` at the end: done() calls it again,
     * and finish() then detaches. */
    uv_loop_close(loop);
    backend->ops->free(backend);
    if (mem)
        sl_store_free(mem);
    free(pending);
    return 0;
}
