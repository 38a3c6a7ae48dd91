/*
 * The redis backend from several worker threads at once, each on its own
 * loop with its own connection, while another thread reads the stats: the
 * per-worker state needs no lock, the local limiter (one sl_store) is shared,
 * and stats() sums the workers' counters. No Redis listens at the address,
 * so the local limiter decides everything (the ThreadSanitizer build runs
 * this file: label mt).
 *
 * A plain program with its own main, as test_mt_store.c is: Criterion
 * cannot start under ThreadSanitizer (Snaipe/Criterion issue 274). It exits
 * 1 when a check fails.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "mtlib.h"

#include "backend/redis.h"

#define WORKERS 4
#define TAKES 200
#define LIMIT 300

static sl_backend *backend;
static _Atomic int allowed, answered;

static atomic_bool stop;

typedef struct worker_ctx {
    uv_loop_t loop;
    int64_t now;
    sl_backend_worker *w;
    sl_limit limit;
    sl_take_item item;
    sl_backend_req reqs[TAKES];
    sl_decision d[TAKES];
    int pending;
} worker_ctx;

static void count(sl_backend_req *r)
{
    worker_ctx *c = r->owner;
    if (r->rc != SL_OK || r->by != SL_DECIDED_LOCAL)
        atomic_fetch_add(&mt_bad, 1);
    if (r->d->allowed)
        atomic_fetch_add(&allowed, 1);
    atomic_fetch_add(&answered, 1);
    c->pending--;
}

static void *run_worker(void *arg)
{
    worker_ctx *c = arg;
    const char *err = NULL;
    if (sl_limit_init(&c->limit, SL_GCRA, LIMIT, INT64_C(3600000000000), 0) != SL_OK ||
        !(c->w = backend->ops->attach(backend, &c->loop, &c->now, &err))) {
        atomic_fetch_add(&mt_bad, 1);
        return NULL;
    }
    c->item = (sl_take_item){"shared", 6, &c->limit, 1};
    for (int i = 0; i < TAKES; i++) {
        c->now = (int64_t)uv_hrtime();
        sl_backend_req *r = &c->reqs[i];
        *r = (sl_backend_req){.op = SL_OP_TAKE, .n = 1, .items = &c->item, .d = &c->d[i],
                              .done = count, .owner = c, .on_error = SL_ON_ERROR_LOCAL};
        c->pending++;
        if (sl_backend_submit(backend, c->w, r) == SL_OK)
            count(r);
        /* Let the loop turn now and then: connections fail, callbacks come. */
        if (i % 16 == 0)
            uv_run(&c->loop, UV_RUN_NOWAIT);
    }
    while (c->pending > 0)
        uv_run(&c->loop, UV_RUN_ONCE);
    backend->ops->detach(c->w);
    uv_run(&c->loop, UV_RUN_DEFAULT); /* the handles' closes */
    return NULL;
}

static void *read_stats(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        sl_backend_stats st;
        backend->ops->stats(backend, &st);
        if (st.requests > (uint64_t)WORKERS * TAKES || st.module)
            atomic_fetch_add(&mt_bad, 1);
    }
    return NULL;
}

static void workers_share_the_local_limiter_and_sum_their_stats(void)
{
    int port = mt_dead_port();
    CHECK(port > 0);
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    char err[256];
    sl_redis_config cfg = {.url = url, .on_error = SL_ON_ERROR_LOCAL};
    if (sl_backend_redis(&cfg, &backend, err, sizeof err) != SL_OK) {
        fprintf(stderr, "sl_backend_redis: %s\n", err);
        atomic_fetch_add(&mt_bad, 1);
        return;
    }

    worker_ctx *ctx = calloc(WORKERS, sizeof *ctx);
    if (!ctx)
        abort();
    pthread_t th[WORKERS], reader;
    pthread_create(&reader, NULL, read_stats, NULL);
    /* The loops are made before any thread starts and closed after every
     * one ended, as sluiced's are: a loop's epoll descriptor then never
     * reuses another's number while threads run (which ThreadSanitizer,
     * not seeing inside libuv, would take for a race). */
    for (int i = 0; i < WORKERS; i++)
        CHECK(uv_loop_init(&ctx[i].loop) == 0);
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&th[i], NULL, run_worker, &ctx[i]);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < WORKERS; i++)
        CHECK(uv_loop_close(&ctx[i].loop) == 0);
    atomic_store(&stop, true);
    pthread_join(reader, NULL);

    CHECK(atomic_load(&answered) == WORKERS * TAKES);
    /* One limiter for every worker: the limit, not the limit per worker. */
    CHECK(atomic_load(&allowed) == LIMIT);
    sl_backend_stats st;
    backend->ops->stats(backend, &st);
    /* Detached workers' counts are kept; none of them was ever connected. */
    CHECK(st.state == SL_STORE_DOWN);
    CHECK(st.connects == 0);
    /* Each worker met at least 5 failures (its breaker's threshold) before
     * deciding at once. */
    CHECK(st.errors + st.timeouts >= (uint64_t)WORKERS * 5);
    CHECK(st.breaker_opens == WORKERS);
    backend->ops->free(backend);
    free(ctx);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv; /* ctest passes Criterion's --jobs; there is nothing to choose here */
    workers_share_the_local_limiter_and_sum_their_stats();
    printf("[%s] mt_backend_redis::workers_share_the_local_limiter_and_sum_their_stats\n",
           atomic_load(&mt_bad) ? "FAIL" : "PASS");
    return atomic_load(&mt_bad) ? 1 : 0;
}
