/*
 * dlog.c: the decision log (dlog.h): the workers' halves, which sample and
 * copy decisions into their rings, and the writer thread, which formats
 * and writes them.
 */
#define _GNU_SOURCE
#include "server/dlog.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "common/clock.h"
#include "common/sample.h"
#include "common/spsc.h"
#include "common/units.h"
#include "policy/config.h"
#include "proto/dlog_json.h"
#include "proto/http.h"
#include "server/log.h"
#include "server/server.h"

/* A decision in a ring: this header, then the policy's, the refusing
 * limit's and the key's bytes. */
typedef struct dlog_rec {
    int64_t time_ms, cost, remaining, retry_after_ms;
    uint32_t key_len;
    uint16_t policy_len, refused_len;
    uint8_t face;  /* SL_PROTO_* */
    uint8_t flags; /* REC_* */
} dlog_rec;

enum { REC_ALLOWED = 1, REC_SHADOW = 2, REC_POLICY = 4, REC_REFUSED = 8 };

static const char *const dlog_face[SL_PROTOS] = {"resp", "http", "grpc"};

struct sl_dlog {
    char *path;
    bool is_stdout;
    int fd;                /* the writer's */
    _Atomic int next_fd;   /* SIGHUP's newly opened file, until the writer takes it; -1 none */
    int nworkers;
    sl_dlog_worker **workers;
    size_t max_key;
    pthread_t thread;
    bool started;
    pthread_mutex_t mu;   /* guards stop, done, and the writer's sleep */
    pthread_cond_t wake;  /* the writer: stop, or a reopen */
    pthread_cond_t ended; /* the main thread: the writer is done */
    bool stop, done;
    _Atomic int64_t stop_deadline; /* monotonic ns; 0 until stop */
    /* The writer's batch of formatted lines. */
    char *batch;
    size_t batch_cap, batch_len;
    uint64_t batch_lines;
    bool torn; /* a failed write cut a line: the next write ends it first */
    sl_dlog_clock clock; /* the current second's text */
    int64_t error_log_next;
    uint64_t error_dropped; /* since the last line that said so */
    /* For /metrics: written only by the writer. */
    atomic_uint_fast64_t written, write_dropped, write_errors;
};

/* ---- the workers' half ---- */

/* Copies one decision into the worker's ring, or counts it dropped. */
static void dlog_put(sl_dlog_worker *dw, const sl_dlog_line *l, int face)
{
    size_t plen = l->policy ? l->policy_len : 0, rlen = l->refused_by ? l->refused_len : 0;
    if (plen > UINT16_MAX)
        plen = UINT16_MAX;
    if (rlen > UINT16_MAX)
        rlen = UINT16_MAX;
    size_t len = sizeof(dlog_rec) + plen + rlen + l->key_len;
    unsigned char *p = l->key_len <= UINT32_MAX ? sl_spsc_reserve(&dw->ring, len) : NULL;
    if (!p) {
        sl_counter_add(&dw->dropped, 1);
        return;
    }
    dlog_rec h = {
        .time_ms = l->time_ms,
        .cost = l->cost,
        .remaining = l->remaining,
        .retry_after_ms = l->retry_after_ms,
        .key_len = (uint32_t)l->key_len,
        .policy_len = (uint16_t)plen,
        .refused_len = (uint16_t)rlen,
        .face = (uint8_t)face,
        .flags = (uint8_t)((l->allowed ? REC_ALLOWED : 0) | (l->shadow ? REC_SHADOW : 0) |
                           (l->policy ? REC_POLICY : 0) | (l->refused_by ? REC_REFUSED : 0)),
    };
    memcpy(p, &h, sizeof h);
    p += sizeof h;
    if (plen)
        memcpy(p, l->policy, plen);
    if (rlen)
        memcpy(p + plen, l->refused_by, rlen);
    if (l->key_len)
        memcpy(p + plen + rlen, l->key, l->key_len);
    sl_spsc_commit(&dw->ring);
}

/* The Unix time of a decision w made at its clock's reading (w->now, read
 * once per batch of commands), in ms. */
static int64_t dlog_time_ms(const sl_worker *w)
{
    int64_t t;
    if (__builtin_add_overflow(w->now, w->srv->clock_offset_ns, &t) || t < 0)
        return 0;
    return t / 1000000;
}

void sl_dlog_record(sl_worker *w, int face, const sl_check *k, bool allowed, bool shadow)
{
    sl_dlog_worker *dw = w->dlog;
    if (!k->key || k->n == 0)
        return;
    size_t n = k->n;
    bool refused = k->req.failed >= 0;
    /* The limit whose numbers the reply shows: of those that refused, the
     * one that waits longest; else the one with the fewest left. */
    size_t b = 0;
    if (n > 1) {
        const sl_decision *dp[SL_TAKE_MANY_MAX];
        for (size_t i = 0; i < n; i++)
            dp[i] = &k->d[i];
        b = sl_http_binding(dp, k->cost, n, k->req.failed);
    }
    const sl_decision *d = &k->d[b];
    char name[SL_POLICY_LIMIT_NAME_ROOM];
    int nl = 0;
    if (refused && k->name) /* a policy's limits are named as replies name them */
        nl = sl_policy_limit_name(k->name, k->lname[b], b >= k->nkey, name, sizeof name);
    else if (refused) /* ad hoc: as HTTP's RateLimit-Policy names them */
        nl = n == 1 ? snprintf(name, sizeof name, "default")
                    : snprintf(name, sizeof name, "limit%zu", b);
    sl_dlog_line l = {
        .time_ms = dlog_time_ms(w),
        .policy = k->name,
        .policy_len = k->name ? strlen(k->name) : 0,
        .key = k->key,
        .key_len = k->key_len,
        .cost = k->cost[b],
        .allowed = allowed,
        .shadow = shadow,
        .remaining = d->remaining,
        .retry_after_ms = !refused                      ? 0
                          : d->retry_after_ns == SL_NEVER ? -1
                                                         : sl_ns_ceil_ms(d->retry_after_ns),
        .refused_by = refused ? name : NULL,
        .refused_len = nl > 0 && (size_t)nl < sizeof name ? (size_t)nl : 0,
    };
    dlog_put(dw, &l, face);
}

static void dlog_rls(sl_worker *w, int face, const sl_rls_decision *e)
{
    sl_dlog_worker *dw = w->dlog;
    if (!sl_sampler_keep(&dw->sampler))
        return;
    char name[32];
    int nl = 0;
    if (e->over)
        nl = e->n == 1 ? snprintf(name, sizeof name, "default")
                       : snprintf(name, sizeof name, "limit%zu", e->binding);
    sl_dlog_line l = {
        .time_ms = dlog_time_ms(w),
        .policy = e->rule,
        .policy_len = e->rule_len,
        .key = e->key,
        .key_len = e->key_len,
        .cost = e->hits,
        .allowed = !e->over || e->shadow,
        .shadow = e->shadow,
        .remaining = e->remaining,
        .retry_after_ms = !e->over                      ? 0
                          : e->retry_after_ns == SL_NEVER ? -1
                                                         : sl_ns_ceil_ms(e->retry_after_ns),
        .refused_by = e->over ? name : NULL,
        .refused_len = nl > 0 && (size_t)nl < sizeof name ? (size_t)nl : 0,
    };
    dlog_put(dw, &l, face);
}

void sl_dlog_rls_grpc(void *arg, const sl_rls_decision *e)
{
    dlog_rls(arg, SL_PROTO_GRPC, e);
}

void sl_dlog_rls_http(void *arg, const sl_rls_decision *e)
{
    dlog_rls(arg, SL_PROTO_HTTP, e);
}

/* ---- the writer ---- */

static int dlog_open_fd(const char *path)
{
    /* O_NONBLOCK: a FIFO without a reader is refused (ENXIO) rather than
     * blocking the open, and a full pipe answers EAGAIN, which the writer
     * waits out in poll(2), where it can see a shutdown. A regular file
     * ignores it. */
    return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0640);
}

/* Why an open failed, in words that say what to do. */
static const char *dlog_open_error(int e)
{
    return e == ENXIO ? "a FIFO that no process has open for reading" : strerror(e);
}

sl_dlog *sl_dlog_open(const char *path, uint32_t ppm, int nworkers, uint64_t seed,
                      size_t max_key, char *err, size_t errlen)
{
    sl_dlog *d = calloc(1, sizeof *d);
    if (!d || !(d->path = strdup(path)) ||
        !(d->workers = calloc((size_t)nworkers, sizeof *d->workers))) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    d->fd = -1;
    atomic_init(&d->next_fd, -1);
    d->nworkers = nworkers;
    d->max_key = max_key;
    /* Both waits are on the monotonic clock: a wall clock set back does
     * not stretch them. */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->wake, &ca);
    pthread_cond_init(&d->ended, &ca);
    pthread_condattr_destroy(&ca);
    /* Room for two of the longest lines, and many short ones. */
    size_t line = sl_dlog_line_max(UINT16_MAX, max_key, UINT16_MAX);
    d->batch_cap = 2 * line > ((size_t)256 << 10) ? 2 * line : (size_t)256 << 10;
    if (!(d->batch = malloc(d->batch_cap))) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    for (int i = 0; i < nworkers; i++) {
        size_t bytes = (sizeof(sl_dlog_worker) + 63) / 64 * 64;
        sl_dlog_worker *dw = aligned_alloc(64, bytes);
        if (!dw) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
        memset(dw, 0, sizeof *dw);
        d->workers[i] = dw;
        if (sl_spsc_init(&dw->ring, SL_DLOG_RING_BYTES) != 0) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
        /* Each worker its own sequence: the seed, moved along by the
         * worker's index through one round of the generator. */
        sl_sampler mix;
        sl_sampler_init(&mix, SL_SAMPLE_ALL, seed + (uint64_t)i);
        sl_sampler_init(&dw->sampler, ppm, sl_sampler_next(&mix));
    }
    if (strcmp(path, "-") == 0) {
        d->is_stdout = true;
        d->fd = STDOUT_FILENO;
    } else if ((d->fd = dlog_open_fd(path)) < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, dlog_open_error(errno));
        goto fail;
    }
    return d;
fail:
    if (d) {
        for (int i = 0; d->workers && i < nworkers; i++)
            if (d->workers[i]) {
                sl_spsc_free(&d->workers[i]->ring);
                free(d->workers[i]);
            }
        free(d->workers);
        free(d->batch);
        free(d->path);
        free(d);
    }
    return NULL;
}

sl_dlog_worker *sl_dlog_worker_of(sl_dlog *d, int i)
{
    return d && i >= 0 && i < d->nworkers ? d->workers[i] : NULL;
}

/* Whether the writer must give up what it has not written: stopping, and
 * past the deadline. */
static bool dlog_give_up(sl_dlog *d)
{
    int64_t deadline = atomic_load(&d->stop_deadline);
    return deadline != 0 && sl_now_mono() >= deadline;
}

/* Takes the file SIGHUP opened, if any, closing the one it replaces. */
static void dlog_take_next_fd(sl_dlog *d)
{
    int fd = atomic_exchange(&d->next_fd, -1);
    if (fd < 0)
        return;
    if (d->fd >= 0 && !d->is_stdout)
        close(d->fd);
    d->fd = fd;
}

/* A failed write, logged at most once per SL_DLOG_ERROR_LOG_S. */
static void dlog_write_failed(sl_dlog *d, int e, uint64_t lost)
{
    atomic_fetch_add_explicit(&d->write_errors, 1, memory_order_relaxed);
    d->error_dropped += lost;
    int64_t now = sl_now_mono();
    if (now < d->error_log_next)
        return;
    d->error_log_next = now + (int64_t)SL_DLOG_ERROR_LOG_S * 1000000000;
    sl_log(SL_LOG_ERROR, "decision log %s: write failed: %s; %llu line%s dropped (at most one "
                         "such message every %d s)",
           d->is_stdout ? "(standard output)" : d->path, strerror(e),
           (unsigned long long)d->error_dropped, d->error_dropped == 1 ? "" : "s",
           SL_DLOG_ERROR_LOG_S);
    d->error_dropped = 0;
}

/* Writes buf[0 .. len) whole; returns the bytes written, less than len
 * when a write failed (*e its errno) or the writer gave up (*e 0). A file
 * that is full for now (a pipe) is waited for. */
static size_t dlog_write_all(sl_dlog *d, const char *buf, size_t len, int *e)
{
    size_t done = 0;
    *e = 0;
    while (done < len) {
        ssize_t n = write(d->fd, buf + done, len - done);
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (dlog_give_up(d))
                return done;
            struct pollfd p = {.fd = d->fd, .events = POLLOUT};
            poll(&p, 1, 100);
            continue;
        }
        *e = n < 0 ? errno : EIO;
        return done;
    }
    return done;
}

/* Writes the batch, and counts its lines written or dropped. */
static void dlog_flush(sl_dlog *d)
{
    if (d->batch_len == 0)
        return;
    dlog_take_next_fd(d);
    int e = 0;
    if (d->torn) {
        if (dlog_write_all(d, "\n", 1, &e) == 1)
            d->torn = false;
    }
    size_t done = d->torn ? 0 : dlog_write_all(d, d->batch, d->batch_len, &e);
    uint64_t ok = d->batch_lines;
    if (done < d->batch_len) {
        ok = 0;
        for (size_t i = 0; i < done; i++)
            ok += d->batch[i] == '\n';
        if (done > 0 && d->batch[done - 1] != '\n')
            d->torn = true;
        uint64_t lost = d->batch_lines - ok;
        atomic_fetch_add_explicit(&d->write_dropped, lost, memory_order_relaxed);
        if (e != 0)
            dlog_write_failed(d, e, lost);
    }
    atomic_fetch_add_explicit(&d->written, ok, memory_order_relaxed);
    d->batch_len = 0;
    d->batch_lines = 0;
}

/* Formats one record of a ring into the batch, writing the batch first
 * when the line might not fit. */
static void dlog_add(sl_dlog *d, const unsigned char *p, size_t len)
{
    dlog_rec h;
    if (len < sizeof h)
        return;
    memcpy(&h, p, sizeof h);
    const char *s = (const char *)p + sizeof h;
    sl_dlog_line l = {
        .time_ms = h.time_ms,
        .face = h.face < SL_PROTOS ? dlog_face[h.face] : "?",
        .policy = h.flags & REC_POLICY ? s : NULL,
        .policy_len = h.policy_len,
        .key = s + h.policy_len + h.refused_len,
        .key_len = h.key_len,
        .cost = h.cost,
        .allowed = h.flags & REC_ALLOWED,
        .shadow = h.flags & REC_SHADOW,
        .remaining = h.remaining,
        .retry_after_ms = h.retry_after_ms,
        .refused_by = h.flags & REC_REFUSED ? s + h.policy_len : NULL,
        .refused_len = h.refused_len,
    };
    size_t max = sl_dlog_line_max(h.policy_len, h.key_len, h.refused_len);
    if (max > d->batch_cap - d->batch_len)
        dlog_flush(d);
    size_t n = max <= d->batch_cap - d->batch_len
                   ? sl_dlog_format(d->batch + d->batch_len, d->batch_cap - d->batch_len, &l,
                                    &d->clock)
                   : 0;
    if (n == 0) { /* longer than any key the server takes: cannot be */
        atomic_fetch_add_explicit(&d->write_dropped, 1, memory_order_relaxed);
        return;
    }
    d->batch_len += n;
    d->batch_lines++;
}

/* The most records one pass takes from a ring before it goes on to the
 * next: a worker that keeps its ring busy cannot keep the writer from the
 * others'. */
#define DLOG_PASS_RECORDS 4096

/* Moves what the rings hold into the file, at most DLOG_PASS_RECORDS of
 * each; returns the lines taken (0: every ring was empty). */
static uint64_t dlog_drain(sl_dlog *d)
{
    uint64_t n = 0;
    for (int i = 0; i < d->nworkers; i++) {
        sl_spsc *r = &d->workers[i]->ring;
        const void *p;
        size_t len;
        for (int k = 0; k < DLOG_PASS_RECORDS && (p = sl_spsc_peek(r, &len)); k++) {
            dlog_add(d, p, len);
            sl_spsc_release(r);
            n++;
        }
    }
    dlog_flush(d);
    return n;
}

static void *dlog_run(void *arg)
{
    sl_dlog *d = arg;
    for (;;) {
        pthread_mutex_lock(&d->mu);
        bool stop = d->stop;
        pthread_mutex_unlock(&d->mu);
        dlog_take_next_fd(d);
        uint64_t n = dlog_drain(d);
        /* Every record made before the stop was asked for has been seen:
         * the workers had stopped. */
        if (stop && (n == 0 || dlog_give_up(d)))
            break;
        if (n > 0)
            continue;
        /* Nothing to write: a short sleep (a worker never signals, so as
         * not to take a lock), cut short by a stop or a reopen. */
        pthread_mutex_lock(&d->mu);
        if (!d->stop && atomic_load(&d->next_fd) < 0) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_nsec += 10 * 1000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&d->wake, &d->mu, &ts);
        }
        pthread_mutex_unlock(&d->mu);
    }
    pthread_mutex_lock(&d->mu);
    d->done = true;
    pthread_cond_signal(&d->ended);
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

int sl_dlog_start(sl_dlog *d)
{
    if (pthread_create(&d->thread, NULL, dlog_run, d) != 0) {
        sl_log(SL_LOG_ERROR, "cannot start the decision log's writer thread");
        return -1;
    }
    d->started = true;
    return 0;
}

void sl_dlog_reopen(sl_dlog *d)
{
    if (!d || d->is_stdout)
        return;
    int fd = dlog_open_fd(d->path);
    if (fd < 0) {
        sl_log(SL_LOG_ERROR, "SIGHUP: decision log %s: cannot reopen: %s; still writing to the "
                             "file open before",
               d->path, dlog_open_error(errno));
        return;
    }
    int old = atomic_exchange(&d->next_fd, fd);
    if (old >= 0) /* two SIGHUPs before the writer took the first */
        close(old);
    pthread_mutex_lock(&d->mu);
    pthread_cond_signal(&d->wake);
    pthread_mutex_unlock(&d->mu);
    sl_log(SL_LOG_INFO, "SIGHUP: decision log %s reopened", d->path);
}

/* What the rings still hold, in lines. */
static uint64_t dlog_pending(sl_dlog *d)
{
    uint64_t n = 0;
    for (int i = 0; i < d->nworkers; i++) {
        sl_spsc *r = &d->workers[i]->ring;
        const void *p;
        size_t len;
        while ((p = sl_spsc_peek(r, &len))) {
            sl_spsc_release(r);
            n++;
        }
    }
    return n;
}

void sl_dlog_stop(sl_dlog *d)
{
    if (!d)
        return;
    if (d->started) {
        uint64_t lost_before = atomic_load(&d->write_dropped);
        int64_t deadline = sl_now_mono() + (int64_t)SL_DLOG_STOP_MS * 1000000;
        atomic_store(&d->stop_deadline, deadline);
        pthread_mutex_lock(&d->mu);
        d->stop = true;
        pthread_cond_signal(&d->wake);
        /* The writer gives up at the deadline unless it is stuck in a
         * write(2) that blocks (standard output on a blocking pipe): a
         * second past it, it is left behind. */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += SL_DLOG_STOP_MS / 1000 + 1;
        while (!d->done && pthread_cond_timedwait(&d->ended, &d->mu, &ts) != ETIMEDOUT)
            ;
        bool done = d->done;
        pthread_mutex_unlock(&d->mu);
        if (!done) {
            sl_log(SL_LOG_WARN, "decision log: the writer is blocked in a write; exiting without "
                                "the lines it has not written");
            return; /* the thread still reads d: it is left, as the process ends */
        }
        pthread_join(d->thread, NULL);
        /* Given up on at the deadline, and still in the rings. */
        uint64_t left = atomic_load(&d->write_dropped) - lost_before + dlog_pending(d);
        if (left > 0)
            sl_log(SL_LOG_WARN, "decision log: %llu line%s not written at shutdown (the file "
                                "took no more within %d ms)",
                   (unsigned long long)left, left == 1 ? "" : "s", SL_DLOG_STOP_MS);
    }
    int next = atomic_exchange(&d->next_fd, -1);
    if (next >= 0)
        close(next);
    if (d->fd >= 0 && !d->is_stdout)
        close(d->fd);
    for (int i = 0; i < d->nworkers; i++) {
        sl_spsc_free(&d->workers[i]->ring);
        free(d->workers[i]);
    }
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->wake);
    pthread_cond_destroy(&d->ended);
    free(d->workers);
    free(d->batch);
    free(d->path);
    free(d);
}

void sl_dlog_metrics(sl_dlog *d, sl_buf *out)
{
    uint64_t written = 0, full = 0, failed = 0, errors = 0;
    if (d) {
        written = atomic_load_explicit(&d->written, memory_order_relaxed);
        failed = atomic_load_explicit(&d->write_dropped, memory_order_relaxed);
        errors = atomic_load_explicit(&d->write_errors, memory_order_relaxed);
        for (int i = 0; i < d->nworkers; i++)
            full += atomic_load_explicit(&d->workers[i]->dropped, memory_order_relaxed);
    }
    sl_out(out, "# HELP sluice_decision_log_written_total Lines written to the decision log.\n"
                "# TYPE sluice_decision_log_written_total counter\n"
                "sluice_decision_log_written_total %llu\n",
           (unsigned long long)written);
    sl_out(out, "# HELP sluice_decision_log_dropped_total Sampled decisions not written to the "
                "decision log: the writer was behind (full) or a write failed (error).\n"
                "# TYPE sluice_decision_log_dropped_total counter\n"
                "sluice_decision_log_dropped_total{reason=\"full\"} %llu\n"
                "sluice_decision_log_dropped_total{reason=\"error\"} %llu\n",
           (unsigned long long)full, (unsigned long long)failed);
    sl_out(out, "# HELP sluice_decision_log_write_errors_total Writes to the decision log that "
                "failed (a full disk, a closed pipe).\n"
                "# TYPE sluice_decision_log_write_errors_total counter\n"
                "sluice_decision_log_write_errors_total %llu\n",
           (unsigned long long)errors);
}
