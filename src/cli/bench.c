/*
 * bench.c: `sluice bench`, a load generator for sluiced (RESP or HTTP) and
 * for Redis with the sluice module.
 *
 * T threads, each with its own epoll loop over its share of the C
 * connections. Every connection keeps P requests in flight (pipelining):
 * when replies come back, as many new requests go out. A request's latency
 * runs from the moment its bytes are handed to the socket to the moment its
 * reply is parsed; replies on a connection come in order, so a ring of send
 * times per connection pairs them up. Each thread records into its own
 * histogram (hist.h); the main thread prints a progress line every second
 * from the threads' atomic counters, and merges the histograms at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/hist.h"
#include "common/clock.h"
#include "proto/http.h"
#include "proto/resp.h"

static const char bench_usage[] =
    "usage: sluice bench --server HOST:PORT [options]\n"
    "\n"
    "Sends rate limiting requests to a server as fast as it answers, and prints\n"
    "the throughput and the latency percentiles (p50, p90, p99, p99.9, max).\n"
    "A progress line goes to stderr every second.\n"
    "\n"
    "  --server HOST:PORT       sluiced's RESP port (or a Redis with the sluice\n"
    "                           module), or its HTTP port with --http (required)\n"
    "  --connections C          connections (default 4, at most 1024)\n"
    "  --pipeline P             requests in flight per connection (default 1, at most 1024)\n"
    "  --threads T              event loops (default: min(C, 2))\n"
    "  --duration DURATION      how long to run (default 10s)\n"
    "  --keys K                 distinct keys bench:0 .. bench:K-1 (default 1000)\n"
    "  --prefix P               the keys' prefix instead of bench: (at most 64 bytes,\n"
    "                           letters, digits and :_-.)\n"
    "  --zipf S                 key popularity ~ 1/rank^S (e.g. 0.99); default uniform\n"
    "  --cost C                 units per request (default 1)\n"
    "  --limit N --period P     the limit asked for (default 1000 per 1s)\n"
    "  --algorithm A            SL.TAKE's algorithm (default gcra)\n"
    "  --command cl.throttle|sl.take|sl.acquire\n"
    "                           default sl.take; cl.throttle sends\n"
    "                           CL.THROTTLE key N-1 N P-in-seconds C; sl.acquire\n"
    "                           sends SL.ACQUIRE key N P-in-ms, and SL.RELEASE of\n"
    "                           each lease it gets as the connection's next request\n"
    "  --estimator E            with sl.acquire: an adaptive limit (ADAPTIVE ESTIMATOR E:\n"
    "                           aimd, vegas, gradient2 or anchored) of at most N\n"
    "  --http                   GET /v1/check over HTTP/1.1 keep-alive\n"
    "  --lua FILE               with --command cl.throttle: load FILE into Redis\n"
    "                           (SCRIPT LOAD) and send EVALSHA sha 1 key TAKE 0\n"
    "                           cell N-1 N P C 0 0 0 instead: SL.DECIDE's arguments,\n"
    "                           as src/backend/lua/sluice.lua takes them\n"
    "  --seed S                 seed of the key choice (default 1)\n"
    "\n"
    "A server that asks for a password (sluiced --requirepass, --http-token) gets\n"
    "the one in the environment variable SLUICE_PASSWORD: AUTH over RESP, a bearer\n"
    "token over HTTP. There is no flag for it, which ps would show.\n"
    "\n"
    "Exit status: 0 done, 1 when a connection failed or no request completed,\n"
    "2 for a usage error.\n"
    "\n"
    "examples:\n"
    "  sluice bench --server 127.0.0.1:7379 --connections 8 --pipeline 16 --duration 10\n"
    "  sluice bench --server 127.0.0.1:7379 --command cl.throttle --keys 100000 --zipf 0.99\n"
    "  sluice bench --server 127.0.0.1:7380 --http --connections 16\n"
    "  sluice bench --server 127.0.0.1:6379 --command cl.throttle --lua src/backend/lua/sluice.lua\n";

#define BENCH_MAX_CONNS 1024
#define BENCH_MAX_PIPELINE 1024
#define BENCH_MAX_KEYS 10000000
#define BENCH_MAX_IN (4 * 1024 * 1024) /* bytes of unparsed replies per connection */

typedef struct bench_cfg {
    const char *server;
    int conns, pipeline, threads;
    int64_t duration_ns;
    int64_t keys, cost, limit, period_ns;
    double zipf;
    const double *cdf; /* zipf: cumulative popularity of keys 0..K-1; NULL uniform */
    bool http, throttle, acquire;
    const char *estimator; /* --estimator: SL.ACQUIRE ... ADAPTIVE ESTIMATOR E */
    const char *alg;
    const char *prefix; /* keys are PREFIX0 .. PREFIX(K-1) */
    const char *lua;    /* --lua FILE: CL.THROTTLE's arguments through EVALSHA */
    char sha[41];       /* the script's SHA1, from SCRIPT LOAD */
    const char *password; /* SLUICE_PASSWORD: AUTH on each connection, or HTTP's bearer */
    uint64_t seed;
} bench_cfg;

typedef struct bench_conn {
    int fd;
    sl_buf out;   /* requests not yet written */
    size_t out_off;    /* bytes of out already written */
    char *in;          /* replies not yet parsed */
    size_t in_len, in_cap;
    int64_t *sent;     /* ring of send times, pipeline entries */
    /* sl.acquire: beside each request in flight, its key and whether it is
     * a release; and the leases held, each released as a next request. */
    struct bench_lease {
        uint32_t key;
        bool release;
        char id[24];
    } *req, *held;
    size_t held_head, held_n;
    size_t head, inflight;
    bool want_out;     /* registered for EPOLLOUT */
    bool dead;
} bench_conn;

/*
 * The error replies of a run, by their text: "errors 1000" alone does not
 * say whether the server refused the arguments or was out of memory. A few
 * distinct texts are kept with their counts (a server answers few distinct
 * errors to one repeated request); errors of kinds past the room are
 * counted together. The first is kept with the time it arrived, so that
 * the run reports the earliest over all threads.
 */
#define BENCH_ERR_KINDS 8
#define BENCH_ERR_TEXT 160

typedef struct bench_errs {
    struct bench_err_kind {
        char text[BENCH_ERR_TEXT];
        uint64_t count;
    } kind[BENCH_ERR_KINDS];
    int n;
    uint64_t other;  /* errors of kinds the table had no room for */
    char first[BENCH_ERR_TEXT];
    int64_t first_at; /* 0: no error yet */
} bench_errs;

/* Counts `count` errors of the kind named by text[0 .. len), cut to fit,
 * with bytes that would garble a terminal shown as '?'. */
static void errs_add(bench_errs *e, const char *text, size_t len, uint64_t count, int64_t at)
{
    char t[BENCH_ERR_TEXT];
    size_t n = len < sizeof t - 1 ? len : sizeof t - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)text[i];
        t[i] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
    }
    t[n] = '\0';
    if (at > 0 && (e->first_at == 0 || at < e->first_at)) {
        memcpy(e->first, t, n + 1);
        e->first_at = at;
    }
    for (int i = 0; i < e->n; i++) {
        if (strcmp(e->kind[i].text, t) == 0) {
            e->kind[i].count += count;
            return;
        }
    }
    if (e->n == BENCH_ERR_KINDS) {
        e->other += count;
        return;
    }
    memcpy(e->kind[e->n].text, t, n + 1);
    e->kind[e->n++].count = count;
}

typedef struct bench_thread {
    const bench_cfg *cfg;
    bench_conn *conns;
    int nconns;
    pthread_t tid;
    sim_rng rng;
    cli_hist hist;
    _Atomic uint64_t done; /* replies, read by the progress line */
    uint64_t allowed, limited, errors, released;
    bench_errs errs;       /* the error replies, by text */
    char err[256];         /* the first connection failure */
    int64_t deadline;
} bench_thread;

static uint64_t pick_key(bench_thread *t)
{
    const bench_cfg *c = t->cfg;
    if (!c->cdf)
        return sim_rng_below(&t->rng, (uint64_t)c->keys);
    /* The first key whose cumulative popularity reaches u. */
    double u = sim_rng_unit(&t->rng);
    size_t lo = 0, hi = (size_t)c->keys - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* sl.acquire's next request: the release of a lease held, else an
 * acquire of a random key. */
static void add_acquire(bench_thread *t, bench_conn *cn)
{
    const bench_cfg *c = t->cfg;
    size_t P = (size_t)c->pipeline;
    struct bench_lease *r = &cn->req[(cn->head + cn->inflight) % P];
    char key[96], n[24], ttl[24];
    if (cn->held_n > 0) {
        *r = cn->held[cn->held_head];
        cn->held_head = (cn->held_head + 1) % P;
        cn->held_n--;
        r->release = true;
        int kl = snprintf(key, sizeof key, "%s%u", c->prefix, r->key);
        sl_resp_slice av[] = {{"SL.RELEASE", 10}, {key, (size_t)kl}, {r->id, 24}};
        sl_resp_add_command(&cn->out, av, 3);
        return;
    }
    r->key = (uint32_t)pick_key(t);
    r->release = false;
    int kl = snprintf(key, sizeof key, "%s%u", c->prefix, r->key);
    snprintf(n, sizeof n, "%lld", (long long)c->limit);
    snprintf(ttl, sizeof ttl, "%lld", (long long)(c->period_ns / 1000000));
    sl_resp_slice av[] = {{"SL.ACQUIRE", 10}, {key, (size_t)kl}, {n, strlen(n)},
                          {ttl, strlen(ttl)}, {"ADAPTIVE", 8}, {"ESTIMATOR", 9},
                          {c->estimator, c->estimator ? strlen(c->estimator) : 0}};
    sl_resp_add_command(&cn->out, av, c->estimator ? 7 : 4);
}

/* sl.acquire's reply r to the request in flight at the head: a lease is
 * held until the connection's next request releases it. False for a reply
 * of another shape. */
static bool acquire_reply(bench_thread *t, bench_conn *cn, const sl_resp_value *r)
{
    size_t P = (size_t)t->cfg->pipeline;
    const struct bench_lease *q = &cn->req[cn->head];
    if (q->release) {
        if (r->type != SL_RESP_INT)
            return false;
        t->released += r->integer == 1;
        return true;
    }
    if (r->type == SL_RESP_NIL) {
        t->limited++;
        return true;
    }
    if (r->type != SL_RESP_BULK || r->len != 24 || cn->held_n == P)
        return false;
    struct bench_lease *h = &cn->held[(cn->held_head + cn->held_n++) % P];
    h->key = q->key;
    memcpy(h->id, r->str, 24);
    t->allowed++;
    return true;
}

/* Appends one request to the connection's output. */
static void add_request(bench_thread *t, bench_conn *cn)
{
    const bench_cfg *c = t->cfg;
    char key[96], a[24], b[24], p[32], cost[24];
    if (c->acquire) {
        add_acquire(t, cn);
        return;
    }
    int kl = snprintf(key, sizeof key, "%s%llu", c->prefix, (unsigned long long)pick_key(t));
    if (c->http) {
        char req[512 + CLI_PASSWORD_MAX];
        int n = snprintf(req, sizeof req,
                         "GET /v1/check?key=%s&limit=%lld&period=%lldms&cost=%lld&algorithm=%s "
                         "HTTP/1.1\r\nHost: sluice\r\n%s%s%s\r\n",
                         key, (long long)c->limit, (long long)(c->period_ns / 1000000),
                         (long long)c->cost, c->alg, c->password ? "Authorization: Bearer " : "",
                         c->password ? c->password : "", c->password ? "\r\n" : "");
        sl_buf_add(&cn->out, req, (size_t)n);
        return;
    }
    snprintf(cost, sizeof cost, "%lld", (long long)c->cost);
    if (c->throttle) {
        snprintf(a, sizeof a, "%lld", (long long)(c->limit - 1));
        snprintf(b, sizeof b, "%lld", (long long)c->limit);
        snprintf(p, sizeof p, "%lld", (long long)(c->period_ns / 1000000000));
        if (c->lua) { /* SL.DECIDE's TAKE of a cell group, as sluice.lua takes it */
            sl_resp_slice av[] = {{"EVALSHA", 7},     {c->sha, 40},   {"1", 1},
                                  {key, (size_t)kl},  {"TAKE", 4},    {"0", 1},
                                  {"cell", 4},        {a, strlen(a)}, {b, strlen(b)},
                                  {p, strlen(p)},     {cost, strlen(cost)},
                                  {"0", 1},           {"0", 1},       {"0", 1}};
            sl_resp_add_command(&cn->out, av, 14);
            return;
        }
        sl_resp_slice av[] = {{"CL.THROTTLE", 11}, {key, (size_t)kl}, {a, strlen(a)},
                              {b, strlen(b)},      {p, strlen(p)},    {cost, strlen(cost)}};
        sl_resp_add_command(&cn->out, av, 6);
    } else {
        snprintf(a, sizeof a, "%lld", (long long)c->limit);
        snprintf(p, sizeof p, "%lldms", (long long)(c->period_ns / 1000000));
        sl_resp_slice av[] = {{"SL.TAKE", 7}, {key, (size_t)kl}, {a, strlen(a)},
                              {p, strlen(p)}, {"COST", 4},       {cost, strlen(cost)},
                              {"ALGORITHM", 9}, {c->alg, strlen(c->alg)}};
        sl_resp_add_command(&cn->out, av, 8);
    }
}

static void conn_fail(bench_thread *t, bench_conn *cn, const char *what)
{
    if (t->err[0] == '\0')
        snprintf(t->err, sizeof t->err, "%s", what);
    cn->dead = true;
}

/* Writes what it can of the output; 0, or -1 when the connection failed. */
static int flush_out(bench_thread *t, bench_conn *cn, int ep)
{
    while (cn->out_off < cn->out.len) {
        ssize_t n = write(cn->fd, cn->out.data + cn->out_off, cn->out.len - cn->out_off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0) {
            conn_fail(t, cn, strerror(errno));
            return -1;
        }
        cn->out_off += (size_t)n;
    }
    if (cn->out_off == cn->out.len) {
        sl_buf_clear(&cn->out);
        cn->out_off = 0;
    }
    bool want = cn->out_off < cn->out.len;
    if (want != cn->want_out) {
        struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0u), .data.ptr = cn};
        epoll_ctl(ep, EPOLL_CTL_MOD, cn->fd, &ev);
        cn->want_out = want;
    }
    return 0;
}

/* Tops the connection up to `pipeline` requests in flight. */
static void refill(bench_thread *t, bench_conn *cn, int64_t now)
{
    int P = t->cfg->pipeline;
    if (now >= t->deadline)
        return;
    while (cn->inflight < (size_t)P) {
        add_request(t, cn);
        cn->sent[(cn->head + cn->inflight) % (size_t)P] = now;
        cn->inflight++;
    }
}

/*
 * One HTTP response at the start of buf, read by src/proto's response parser:
 * its length, head and body (> 0), 0 when incomplete, or -1 when it is
 * malformed or its body's end is not marked by a Content-Length (a pipeline
 * of keep-alive responses needs one); *why says which. *status is its
 * status, *head the length of its head (where the body starts).
 */
static long http_response(const char *buf, size_t len, int *status, long *head, const char **why)
{
    sl_http_header hdr[32];
    sl_http_response res;
    sl_http_response_init(&res, hdr, sizeof hdr / sizeof hdr[0]);
    int h = sl_http_parse_response(buf, len, &res, 0);
    if (h == SL_HTTP_INCOMPLETE)
        return 0;
    if (h == SL_HTTP_ERROR) {
        *why = res.errstr;
        return -1;
    }
    if (res.body_until_close) {
        *why = "a response without content-length";
        return -1;
    }
    *status = res.status;
    *head = h;
    if (res.body_length > len - (size_t)h)
        return 0;
    return h + (long)res.body_length;
}

/* Parses every complete reply in the input; -1 on a protocol failure. */
static int take_replies(bench_thread *t, bench_conn *cn, int64_t now)
{
    const bench_cfg *c = t->cfg;
    size_t off = 0;
    sl_resp_value nodes[32];
    sl_resp_reply rep = {.nodes = nodes, .nodes_cap = 32};
    while (off < cn->in_len) {
        long n;
        const char *why = NULL;
        if (c->http) {
            int status = 0;
            long head = 0;
            n = http_response(cn->in + off, cn->in_len - off, &status, &head, &why);
            if (n > 0) {
                if (status == 200) {
                    t->allowed++;
                } else if (status == 429) {
                    t->limited++;
                } else {
                    /* "HTTP 400 {"error":...}": the status and the body that says why. */
                    char text[BENCH_ERR_TEXT];
                    int w = snprintf(text, sizeof text, "HTTP %d %.*s", status, (int)(n - head),
                                     cn->in + off + head);
                    size_t tl = w < 0 ? 0 : (size_t)w < sizeof text ? (size_t)w : sizeof text - 1;
                    while (tl > 0 && strchr("\r\n ", text[tl - 1]))
                        tl--;
                    t->errors++;
                    errs_add(&t->errs, text, tl, 1, now);
                }
            }
        } else {
            n = sl_resp_parse_reply(cn->in + off, cn->in_len - off, &rep, NULL);
            if (n == SL_RESP_INCOMPLETE)
                n = 0;
            if (n > 0) {
                const sl_resp_value *r = &nodes[0];
                static const char odd[] = "a reply that is neither a decision nor an error";
                if (r->type == SL_RESP_ERR || r->type == SL_RESP_BLOBERR) {
                    t->errors++;
                    errs_add(&t->errs, r->str, r->len, 1, now);
                } else if (c->acquire) {
                    if (!acquire_reply(t, cn, r)) {
                        t->errors++;
                        errs_add(&t->errs, odd, sizeof odd - 1, 1, now);
                    }
                } else if (c->lua) {
                    /* SL.DECIDE's answer: failed, then the key's allowed. */
                    if (r->type == SL_RESP_ARRAY && rep.count >= 3 && nodes[2].type == SL_RESP_INT) {
                        (*(nodes[2].integer ? &t->allowed : &t->limited))++;
                    } else {
                        t->errors++;
                        errs_add(&t->errs, odd, sizeof odd - 1, 1, now);
                    }
                } else if (c->throttle) {
                    if (r->type == SL_RESP_ARRAY && rep.count >= 2 && nodes[1].type == SL_RESP_INT) {
                        (*(nodes[1].integer == 0 ? &t->allowed : &t->limited))++;
                    } else {
                        t->errors++;
                        errs_add(&t->errs, odd, sizeof odd - 1, 1, now);
                    }
                } else {
                    /* A decision: "allowed" is the first field. */
                    if (rep.count >= 3 && nodes[2].type == SL_RESP_INT) {
                        (*(nodes[2].integer ? &t->allowed : &t->limited))++;
                    } else {
                        t->errors++;
                        errs_add(&t->errs, odd, sizeof odd - 1, 1, now);
                    }
                }
            }
        }
        if (n < 0) {
            char what[128];
            snprintf(what, sizeof what, "%s%s%s",
                     c->http ? "malformed HTTP response" : "malformed RESP reply", why ? ": " : "",
                     why ? why : "");
            conn_fail(t, cn, what);
            return -1;
        }
        if (n == 0)
            break;
        off += (size_t)n;
        if (cn->inflight == 0) {
            conn_fail(t, cn, "a reply nobody asked for");
            return -1;
        }
        int64_t sent = cn->sent[cn->head];
        cn->head = (cn->head + 1) % (size_t)c->pipeline;
        cn->inflight--;
        hist_record(&t->hist, (uint64_t)(now - sent));
        atomic_fetch_add_explicit(&t->done, 1, memory_order_relaxed);
    }
    memmove(cn->in, cn->in + off, cn->in_len - off);
    cn->in_len -= off;
    return 0;
}

static void *bench_loop(void *arg)
{
    bench_thread *t = arg;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) {
        snprintf(t->err, sizeof t->err, "epoll: %s", strerror(errno));
        return NULL;
    }
    int live = 0;
    int64_t now = sl_now_mono();
    for (int i = 0; i < t->nconns; i++) {
        bench_conn *cn = &t->conns[i];
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = cn};
        epoll_ctl(ep, EPOLL_CTL_ADD, cn->fd, &ev);
        refill(t, cn, now);
        if (flush_out(t, cn, ep) == 0)
            live++;
    }
    struct epoll_event evs[64];
    /* At the deadline the loop stops: replies still in flight are not
     * counted, and closing the connections discards them. */
    while (live > 0) {
        int64_t left = t->deadline - sl_now_mono();
        if (left <= 0)
            break;
        int n = epoll_wait(ep, evs, 64, (int)(left / 1000000 < 100 ? left / 1000000 + 1 : 100));
        if (n < 0 && errno != EINTR) {
            snprintf(t->err, sizeof t->err, "epoll_wait: %s", strerror(errno));
            break;
        }
        now = sl_now_mono();
        for (int k = 0; k < n && now < t->deadline; k++) {
            bench_conn *cn = evs[k].data.ptr;
            if (cn->dead)
                continue;
            if (evs[k].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
                if (cn->in_cap - cn->in_len < 16 * 1024) {
                    size_t nc = cn->in_cap * 2;
                    char *ni = nc <= BENCH_MAX_IN ? realloc(cn->in, nc) : NULL;
                    if (!ni) {
                        conn_fail(t, cn, "a reply too large");
                    } else {
                        cn->in = ni;
                        cn->in_cap = nc;
                    }
                }
                if (!cn->dead) {
                    ssize_t r = read(cn->fd, cn->in + cn->in_len, cn->in_cap - cn->in_len);
                    if (r == 0)
                        conn_fail(t, cn, "the server closed a connection");
                    else if (r < 0 && errno != EAGAIN && errno != EINTR)
                        conn_fail(t, cn, strerror(errno));
                    else if (r > 0) {
                        cn->in_len += (size_t)r;
                        take_replies(t, cn, now);
                    }
                }
            }
            if (!cn->dead) {
                refill(t, cn, now);
                flush_out(t, cn, ep);
            }
            if (cn->dead) {
                epoll_ctl(ep, EPOLL_CTL_DEL, cn->fd, NULL);
                live--;
            }
        }
    }
    close(ep);
    return NULL;
}

/* Parses the flags into *c; returns 0, 1 for --help, or CLI_EXIT_USAGE. */
enum {
    B_SERVER, B_CONNS, B_PIPE, B_THREADS, B_DUR, B_KEYS, B_ZIPF, B_COST, B_LIMIT, B_PERIOD,
    B_ALG, B_CMD, B_HTTP, B_SEED, B_PREFIX, B_LUA, B_EST, B_COUNT
};

static int bench_flags(int argc, char **argv, bench_cfg *c)
{
    cli_flag fl[B_COUNT] = {
        [B_SERVER] = {"--server", true, NULL, false},     [B_CONNS] = {"--connections", true, NULL, false},
        [B_PIPE] = {"--pipeline", true, NULL, false},     [B_THREADS] = {"--threads", true, NULL, false},
        [B_DUR] = {"--duration", true, NULL, false},      [B_KEYS] = {"--keys", true, NULL, false},
        [B_ZIPF] = {"--zipf", true, NULL, false},         [B_COST] = {"--cost", true, NULL, false},
        [B_LIMIT] = {"--limit", true, NULL, false},       [B_PERIOD] = {"--period", true, NULL, false},
        [B_ALG] = {"--algorithm", true, NULL, false},     [B_CMD] = {"--command", true, NULL, false},
        [B_HTTP] = {"--http", false, NULL, false},        [B_SEED] = {"--seed", true, NULL, false},
        [B_PREFIX] = {"--prefix", true, NULL, false},     [B_LUA] = {"--lua", true, NULL, false},
        [B_EST] = {"--estimator", true, NULL, false},
    };
    size_t npos;
    int pr = cli_parse_flags("bench", argc, argv, fl, B_COUNT, NULL, 0, &npos);
    if (pr == 1)
        return 1;
    if (pr < 0)
        return CLI_EXIT_USAGE;
    int64_t v;
    const char *why;
    memset(c, 0, sizeof *c);
    c->conns = 4;
    c->pipeline = 1;
    c->duration_ns = 10 * 1000000000LL;
    c->keys = 1000;
    c->cost = 1;
    c->limit = 1000;
    c->period_ns = 1000000000;
    c->alg = "gcra";
    c->prefix = "bench:";
    c->seed = 1;
    if (!fl[B_SERVER].seen) {
        cli_usage_error("bench", "--server HOST:PORT is required");
        return CLI_EXIT_USAGE;
    }
    c->server = fl[B_SERVER].value;
#define INT_FLAG(F, lo, hi, dst)                                                              \
    do {                                                                                      \
        if (fl[F].seen) {                                                                     \
            if (cli_parse_int(fl[F].value, lo, hi, &v) != 0) {                                \
                cli_usage_error("bench", "%s: '%s' is not an integer in %lld..%lld", fl[F].name, \
                                fl[F].value, (long long)(lo), (long long)(hi));               \
                return CLI_EXIT_USAGE;                                                        \
            }                                                                                 \
            dst = v;                                                                          \
        }                                                                                     \
    } while (0)
    INT_FLAG(B_CONNS, 1, BENCH_MAX_CONNS, c->conns);
    INT_FLAG(B_PIPE, 1, BENCH_MAX_PIPELINE, c->pipeline);
    c->threads = c->conns < 2 ? c->conns : 2;
    INT_FLAG(B_THREADS, 1, 64, c->threads);
    INT_FLAG(B_KEYS, 1, BENCH_MAX_KEYS, c->keys);
    INT_FLAG(B_COST, 0, INT32_MAX, c->cost);
    INT_FLAG(B_LIMIT, 1, SL_SPAN_MAX, c->limit);
    INT_FLAG(B_SEED, 0, INT64_MAX, c->seed);
#undef INT_FLAG
    if (c->threads > c->conns)
        c->threads = c->conns;
    if (fl[B_DUR].seen) {
        if (cli_parse_duration(fl[B_DUR].value, strlen(fl[B_DUR].value), 1000000000, &v, &why) != 0 ||
            v <= 0 || v > 86400LL * 1000000000) {
            cli_usage_error("bench", "--duration: '%s' %s", fl[B_DUR].value,
                            v <= 0 ? "must be more than 0" : "must be at most a day");
            return CLI_EXIT_USAGE;
        }
        c->duration_ns = v;
    }
    if (fl[B_PERIOD].seen) {
        if (cli_parse_duration(fl[B_PERIOD].value, strlen(fl[B_PERIOD].value), 1000000000, &v,
                               &why) != 0 || v <= 0 || v % 1000000 != 0 || v > SL_SPAN_MAX) {
            cli_usage_error("bench", "--period: '%s' must be a positive whole number of milliseconds",
                            fl[B_PERIOD].value);
            return CLI_EXIT_USAGE;
        }
        c->period_ns = v;
    }
    if (fl[B_ZIPF].seen) {
        char *end;
        errno = 0;
        c->zipf = strtod(fl[B_ZIPF].value, &end);
        if (end == fl[B_ZIPF].value || *end || errno || !(c->zipf > 0 && c->zipf <= 10)) {
            cli_usage_error("bench", "--zipf: '%s' is not an exponent in (0, 10]", fl[B_ZIPF].value);
            return CLI_EXIT_USAGE;
        }
    }
    if (fl[B_CMD].seen) {
        if (strcmp(fl[B_CMD].value, "cl.throttle") == 0)
            c->throttle = true;
        else if (strcmp(fl[B_CMD].value, "sl.acquire") == 0)
            c->acquire = true;
        else if (strcmp(fl[B_CMD].value, "sl.take") != 0) {
            cli_usage_error("bench", "--command: '%s' is not cl.throttle, sl.take or sl.acquire",
                            fl[B_CMD].value);
            return CLI_EXIT_USAGE;
        }
    }
    if (fl[B_EST].seen) {
        static const char *const est[] = {"aimd", "vegas", "gradient2", "anchored"};
        for (size_t i = 0; i < sizeof est / sizeof est[0]; i++)
            if (strcmp(fl[B_EST].value, est[i]) == 0)
                c->estimator = est[i];
        if (!c->acquire || !c->estimator) {
            cli_usage_error("bench", "--estimator: one of aimd, vegas, gradient2 and anchored, "
                                     "with --command sl.acquire");
            return CLI_EXIT_USAGE;
        }
    }
    if (fl[B_PREFIX].seen) {
        /* Plain characters only: the prefix goes into HTTP queries unencoded. */
        const char *q = fl[B_PREFIX].value;
        size_t n = strlen(q);
        bool ok = n <= 64;
        for (size_t i = 0; i < n && ok; i++)
            ok = (q[i] >= 'a' && q[i] <= 'z') || (q[i] >= 'A' && q[i] <= 'Z') ||
                 (q[i] >= '0' && q[i] <= '9') || strchr(":_-.", q[i]) != NULL;
        if (!ok) {
            cli_usage_error("bench", "--prefix: at most 64 letters, digits and :_-.");
            return CLI_EXIT_USAGE;
        }
        c->prefix = q;
    }
    c->http = fl[B_HTTP].seen;
    if (c->http && (c->throttle || c->acquire)) {
        cli_usage_error("bench", "--command %s is a RESP command: not with --http",
                        c->throttle ? "cl.throttle" : "sl.acquire");
        return CLI_EXIT_USAGE;
    }
    if (fl[B_LUA].seen) {
        if (!c->throttle || c->http) {
            cli_usage_error("bench", "--lua: the script is called with a cell limit's arguments: "
                                     "use it with --command cl.throttle (RESP)");
            return CLI_EXIT_USAGE;
        }
        c->lua = fl[B_LUA].value;
    }
    if (c->throttle && c->period_ns % 1000000000 != 0) {
        cli_usage_error("bench", "--period: CL.THROTTLE takes whole seconds");
        return CLI_EXIT_USAGE;
    }
    if (fl[B_ALG].seen) {
        sl_algorithm a;
        if (sl_algorithm_parse(fl[B_ALG].value, strlen(fl[B_ALG].value), &a) != SL_OK ||
            a == SL_CONCURRENCY) {
            cli_usage_error("bench", "--algorithm: '%s' is not a rate limiting algorithm",
                            fl[B_ALG].value);
            return CLI_EXIT_USAGE;
        }
        if (c->throttle) {
            cli_usage_error("bench", "--algorithm: CL.THROTTLE is always gcra");
            return CLI_EXIT_USAGE;
        }
        c->alg = sl_algorithm_name(a);
    }
    char pwerr[128] = "";
    c->password = cli_password(pwerr, sizeof pwerr);
    if (pwerr[0]) {
        cli_usage_error("bench", "%s", pwerr);
        return CLI_EXIT_USAGE;
    }
    return 0;
}

/*
 * Reads the --lua script (at most 1 MiB) and loads it with SCRIPT LOAD on
 * fd (non-blocking: waits with poll), keeping the SHA1 Redis answers.
 * Returns 0, or -1 after reporting why.
 */
static int load_script(bench_cfg *c, int fd)
{
    FILE *f = fopen(c->lua, "rb");
    if (!f) {
        cli_error("bench", "cannot read %s: %s", c->lua, strerror(errno));
        return -1;
    }
    char *src = malloc((size_t)1 << 20);
    size_t n = src ? fread(src, 1, (size_t)1 << 20, f) : 0;
    bool too_long = src && n == (size_t)1 << 20 && fgetc(f) != EOF;
    fclose(f);
    if (!src || too_long || n == 0) {
        cli_error("bench", "%s: %s", c->lua, !src ? "out of memory" : too_long ? "longer than 1 MiB" : "empty");
        free(src);
        return -1;
    }
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    sl_resp_slice av[] = {{"SCRIPT", 6}, {"LOAD", 4}, {src, n}};
    sl_resp_add_command(&b, av, 3);
    free(src);
    int rc = -1;
    char in[512];
    size_t have = 0;
    sl_resp_value nodes[4];
    sl_resp_reply rep = {.nodes = nodes, .nodes_cap = 4};
    struct pollfd pf = {.fd = fd, .events = POLLOUT};
    size_t off = 0;
    int64_t deadline = sl_now_mono() + 5000000000LL;
    while (sl_now_mono() < deadline) {
        pf.events = off < b.len ? POLLOUT : POLLIN;
        if (poll(&pf, 1, 100) <= 0)
            continue;
        if (off < b.len) {
            ssize_t w = write(fd, b.data + off, b.len - off);
            if (w > 0)
                off += (size_t)w;
            else if (w < 0 && errno != EAGAIN && errno != EINTR)
                break;
            continue;
        }
        ssize_t r = read(fd, in + have, sizeof in - have);
        if (r <= 0) {
            if (r < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            break;
        }
        have += (size_t)r;
        int p = sl_resp_parse_reply(in, have, &rep, NULL);
        if (p == SL_RESP_INCOMPLETE && have < sizeof in)
            continue;
        if (p > 0 && nodes[0].type == SL_RESP_BULK && nodes[0].len == 40) {
            memcpy(c->sha, nodes[0].str, 40);
            c->sha[40] = '\0';
            rc = 0;
        } else if (p > 0 && nodes[0].type == SL_RESP_ERR) {
            cli_error("bench", "SCRIPT LOAD %s: %.*s", c->lua, (int)nodes[0].len, nodes[0].str);
            rc = -2;
        }
        break;
    }
    sl_buf_free(&b);
    if (rc == -1)
        cli_error("bench", "SCRIPT LOAD %s: no valid answer from %s", c->lua, c->server);
    return rc == 0 ? 0 : -1;
}

static double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

int cmd_bench(int argc, char **argv)
{
    bench_cfg cfg;
    int fr = bench_flags(argc, argv, &cfg);
    if (fr == 1) {
        fputs(bench_usage, stdout);
        return CLI_EXIT_OK;
    }
    if (fr != 0)
        return fr;

    double *cdf = NULL;
    if (cfg.zipf > 0) {
        cdf = malloc((size_t)cfg.keys * sizeof *cdf);
        if (!cdf) {
            cli_error("bench", "out of memory for %lld keys", (long long)cfg.keys);
            return CLI_EXIT_FAIL;
        }
        double sum = 0;
        for (int64_t i = 0; i < cfg.keys; i++)
            sum += 1.0 / pow((double)(i + 1), cfg.zipf);
        double acc = 0;
        for (int64_t i = 0; i < cfg.keys; i++) {
            acc += 1.0 / pow((double)(i + 1), cfg.zipf) / sum;
            cdf[i] = acc;
        }
        cdf[cfg.keys - 1] = 1.0; /* rounding must not leave a gap at the top */
        cfg.cdf = cdf;
    }

    int status = CLI_EXIT_OK;
    bench_conn *conns = calloc((size_t)cfg.conns, sizeof *conns);
    bench_thread *th = calloc((size_t)cfg.threads, sizeof *th);
    if (!conns || !th) {
        cli_error("bench", "out of memory");
        free(conns);
        free(th);
        free(cdf);
        return CLI_EXIT_FAIL;
    }
    int opened = 0;
    for (int i = 0; i < cfg.conns; i++) {
        char err[256];
        bench_conn *cn = &conns[i];
        cn->fd = cli_connect(cfg.server, 5000, err, sizeof err);
        if (cn->fd < 0) {
            cli_error("bench", "%s", err);
            status = CLI_EXIT_FAIL;
            goto out;
        }
        opened++;
        if (cfg.password && !cfg.http && cli_auth(cn->fd, cfg.password, err, sizeof err) != 0) {
            cli_error("bench", "%s: %s", cfg.server, err);
            status = CLI_EXIT_FAIL;
            goto out;
        }
        fcntl(cn->fd, F_SETFL, fcntl(cn->fd, F_GETFL) | O_NONBLOCK);
        sl_buf_init(&cn->out, 2, 0);
        cn->in_cap = 64 * 1024;
        cn->in = malloc(cn->in_cap);
        cn->sent = malloc((size_t)cfg.pipeline * sizeof *cn->sent);
        cn->req = malloc((size_t)cfg.pipeline * sizeof *cn->req);
        cn->held = malloc((size_t)cfg.pipeline * sizeof *cn->held);
        if (!cn->in || !cn->sent || !cn->req || !cn->held) {
            cli_error("bench", "out of memory");
            status = CLI_EXIT_FAIL;
            goto out;
        }
    }

    if (cfg.lua && load_script(&cfg, conns[0].fd) != 0) {
        status = CLI_EXIT_FAIL;
        goto out;
    }

    int64_t start = sl_now_mono();
    for (int k = 0; k < cfg.threads; k++) {
        bench_thread *t = &th[k];
        t->cfg = &cfg;
        /* Connections k, k + T, k + 2T, ... as one contiguous run. */
        int per = cfg.conns / cfg.threads, extra = cfg.conns % cfg.threads;
        int first = k * per + (k < extra ? k : extra);
        t->conns = &conns[first];
        t->nconns = per + (k < extra ? 1 : 0);
        sim_rng_seed(&t->rng, cfg.seed * 0x9E3779B97F4A7C15ull + (uint64_t)k);
        hist_init(&t->hist);
        t->deadline = start + cfg.duration_ns;
        if (pthread_create(&t->tid, NULL, bench_loop, t) != 0) {
            cli_error("bench", "cannot start a thread");
            for (int j = 0; j < k; j++)
                pthread_join(th[j].tid, NULL);
            status = CLI_EXIT_FAIL;
            goto out;
        }
    }

    fprintf(stderr, "sluice bench: %s, %s, %d connections x pipeline %d, %d threads, %lld keys%s\n",
            cfg.server, cfg.http ? "GET /v1/check" : cfg.lua ? "EVALSHA" : cfg.throttle ? "CL.THROTTLE" : "SL.TAKE",
            cfg.conns, cfg.pipeline, cfg.threads, (long long)cfg.keys,
            cfg.cdf ? " (zipf)" : " (uniform)");
    bool tty = isatty(2);
    uint64_t last = 0;
    for (int64_t tick = 1;; tick++) {
        int64_t wake = start + tick * 1000000000;
        if (wake > start + cfg.duration_ns)
            wake = start + cfg.duration_ns;
        int64_t wait = wake - sl_now_mono();
        if (wait > 0) {
            struct timespec ts = {wait / 1000000000, wait % 1000000000};
            nanosleep(&ts, NULL);
        }
        uint64_t sum = 0;
        for (int k = 0; k < cfg.threads; k++)
            sum += atomic_load_explicit(&th[k].done, memory_order_relaxed);
        double el = (double)(sl_now_mono() - start) / 1e9;
        fprintf(stderr, "%s[%5.1fs] %llu requests, %.0f req/s now, %.0f req/s overall%s", tty ? "\r" : "",
                el, (unsigned long long)sum, (double)(sum - last), el > 0 ? (double)sum / el : 0.0,
                tty ? "   " : "\n");
        last = sum;
        if (wake >= start + cfg.duration_ns)
            break;
    }
    if (tty)
        fputc('\n', stderr);
    for (int k = 0; k < cfg.threads; k++)
        pthread_join(th[k].tid, NULL);

    cli_hist all;
    hist_init(&all);
    uint64_t allowed = 0, limited = 0, errors = 0, released = 0;
    const char *fail = NULL;
    bench_errs *errs = calloc(1, sizeof *errs);
    for (int k = 0; k < cfg.threads; k++) {
        hist_merge(&all, &th[k].hist);
        allowed += th[k].allowed;
        limited += th[k].limited;
        released += th[k].released;
        errors += th[k].errors;
        if (th[k].err[0] && !fail)
            fail = th[k].err;
        const bench_errs *e = &th[k].errs;
        for (int i = 0; errs && i < e->n; i++)
            errs_add(errs, e->kind[i].text, strlen(e->kind[i].text), e->kind[i].count, 0);
        if (errs && e->first_at && (!errs->first_at || e->first_at < errs->first_at)) {
            memcpy(errs->first, e->first, sizeof errs->first);
            errs->first_at = e->first_at;
        }
        if (errs)
            errs->other += e->other;
    }
    double secs = (double)cfg.duration_ns / 1e9;
    printf("server           %s\n", cfg.server);
    printf("command          %s\n", cfg.http       ? "GET /v1/check"
                                     : cfg.lua      ? "EVALSHA"
                                     : cfg.throttle ? "CL.THROTTLE"
                                     : cfg.acquire  ? (cfg.estimator ? "SL.ACQUIRE ADAPTIVE, SL.RELEASE"
                                                                     : "SL.ACQUIRE, SL.RELEASE")
                                                    : "SL.TAKE");
    printf("connections      %d\n", cfg.conns);
    printf("pipeline         %d\n", cfg.pipeline);
    printf("duration_s       %.3f\n", secs);
    printf("requests         %llu\n", (unsigned long long)all.total);
    printf("allowed          %llu\n", (unsigned long long)allowed);
    printf("limited          %llu\n", (unsigned long long)limited);
    if (cfg.acquire)
        printf("released         %llu\n", (unsigned long long)released);
    printf("errors           %llu\n", (unsigned long long)errors);
    if (errs && errs->first_at)
        printf("first_error      %s\n", errs->first);
    printf("throughput_rps   %.0f\n", (double)all.total / secs);
    printf("latency_p50_ms   %.3f\n", ms(hist_percentile(&all, 5000)));
    printf("latency_p90_ms   %.3f\n", ms(hist_percentile(&all, 9000)));
    printf("latency_p99_ms   %.3f\n", ms(hist_percentile(&all, 9900)));
    printf("latency_p999_ms  %.3f\n", ms(hist_percentile(&all, 9990)));
    printf("latency_max_ms   %.3f\n", ms(hist_percentile(&all, 10000)));
    /* What the errors were, on stderr beside the progress lines: a count
     * and the text of each distinct one, most frequent first. */
    if (errs && errors > 0) {
        fprintf(stderr, "sluice bench: %llu error replies, %d distinct%s:\n",
                (unsigned long long)errors, errs->n, errs->other ? " and more" : "");
        for (int i = 0; i < errs->n; i++) {
            int top = i;
            for (int j = i + 1; j < errs->n; j++)
                if (errs->kind[j].count > errs->kind[top].count)
                    top = j;
            struct bench_err_kind tmp = errs->kind[i];
            errs->kind[i] = errs->kind[top];
            errs->kind[top] = tmp;
            fprintf(stderr, "  %10llu  %s\n", (unsigned long long)errs->kind[i].count,
                    errs->kind[i].text);
        }
        if (errs->other)
            fprintf(stderr, "  %10llu  (errors of other kinds)\n", (unsigned long long)errs->other);
    }
    free(errs);
    if (fail) {
        cli_error("bench", "%s: %s", cfg.server, fail);
        status = CLI_EXIT_FAIL;
    } else if (all.total == 0) {
        cli_error("bench", "%s: no request completed", cfg.server);
        status = CLI_EXIT_FAIL;
    }
out:
    for (int i = 0; i < opened; i++) {
        close(conns[i].fd);
        sl_buf_free(&conns[i].out);
        free(conns[i].in);
        free(conns[i].sent);
        free(conns[i].req);
        free(conns[i].held);
    }
    free(conns);
    free(th);
    free(cdf);
    return status;
}
