/*
 * The sync backend from several worker threads at once, on one key: the
 * node's half of each key is the process's, shared by the workers under the
 * stripes' locks, so that the node admits its share once, not once per
 * worker. No Redis listens at the address: every sync fails in the call, the
 * central is seen down, and the node decides on its static share (one node:
 * the whole limit). Another thread reads the stats meanwhile. Then again
 * with takes of a window beside the rate (sync.c's sy_mix): the window goes
 * to the store, which is down and fails open, the rate is decided on the
 * stripes, and each refusal gives the window back (to the store, which
 * cannot take it) from whichever worker decided it. The ThreadSanitizer
 * build runs this file (label mt).
 *
 * A plain program with its own main, as test_mt_backend_redis.c is. It exits
 * 1 when a check fails.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "mtlib.h"

#include "backend/sync.h"
#include "common/clock.h"

#define WORKERS 4
#define TAKES 400
#define LIMIT 300

static sl_backend *backend;
static _Atomic int allowed, answered;

static atomic_bool stop;

typedef struct worker_ctx {
    uv_loop_t loop;
    int64_t now;
    sl_backend_worker *w;
    bool mixed;       /* a window (item 0) beside the rate (item 1) */
    sl_limit limit, window;
    sl_take_item items[2];
    sl_backend_req reqs[TAKES];
    sl_decision d[TAKES][2];
    int pending;
} worker_ctx;

static void count(sl_backend_req *r)
{
    worker_ctx *c = r->owner;
    CHECK(r->rc == SL_OK);
    if (r->rc == SL_OK && r->failed < 0)
        atomic_fetch_add(&allowed, 1);
    if (c->mixed && r->rc == SL_OK) {
        /* The store is down: the window fails open, and only the rate refuses. */
        CHECK(r->by == SL_DECIDED_FAIL_OPEN);
        CHECK(r->d[0].allowed);
        CHECK(r->failed < 0 ? r->d[1].allowed : r->failed == 1 && !r->d[1].allowed);
    }
    atomic_fetch_add(&answered, 1);
    c->pending--;
}

static void *run_worker(void *arg)
{
    worker_ctx *c = arg;
    const char *err = NULL;
    if (sl_limit_init(&c->limit, SL_GCRA, LIMIT, INT64_C(3600000000000), 0) != SL_OK ||
        sl_limit_init(&c->window, SL_FIXED_WINDOW, 1000, INT64_C(3600000000000), 0) !=
            SL_OK ||
        !(c->w = backend->ops->attach(backend, &c->loop, &c->now, &err))) {
        atomic_fetch_add(&mt_bad, 1);
        return NULL;
    }
    c->items[0] = (sl_take_item){"quota", 5, &c->window, 1};
    c->items[1] = (sl_take_item){"shared", 6, &c->limit, 1};
    for (int i = 0; i < TAKES; i++) {
        c->now = sl_now_mono();
        sl_backend_req *r = &c->reqs[i];
        *r = (sl_backend_req){.op = SL_OP_TAKE,
                              .n = c->mixed ? 2 : 1,
                              .items = c->mixed ? c->items : &c->items[1],
                              .on_error = SL_ON_ERROR_FAIL_OPEN,
                              .d = c->d[i],
                              .done = count,
                              .owner = c};
        c->pending++;
        if (sl_backend_submit(backend, c->w, r) == SL_OK)
            count(r);
        if (i % 16 == 0)
            uv_run(&c->loop, UV_RUN_NOWAIT);
    }
    while (c->pending > 0)
        uv_run(&c->loop, UV_RUN_ONCE);
    backend->ops->detach(c->w);
    uv_run(&c->loop, UV_RUN_DEFAULT);
    return NULL;
}

static void *read_stats(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        sl_backend_stats st;
        memset(&st, 0, sizeof st);
        backend->ops->stats(backend, &st);
        if (!st.sync || st.sync_keys > 1 || st.syncs > 0)
            atomic_fetch_add(&mt_bad, 1);
    }
    return NULL;
}

static void workers_share_the_node_half_of_a_key(bool mixed)
{
    atomic_store(&allowed, 0);
    atomic_store(&answered, 0);
    atomic_store(&stop, false);
    int port = mt_dead_port();
    CHECK(port > 0);
    char url[128];
    snprintf(url, sizeof url, "sync+redis://127.0.0.1:%d?node=0&nodes=1&interval_ms=10", port);
    char err[256];
    sl_redis_config cfg = {.url = url};
    if (sl_backend_sync(&cfg, &backend, err, sizeof err) != SL_OK) {
        fprintf(stderr, "sl_backend_sync: %s\n", err);
        atomic_fetch_add(&mt_bad, 1);
        return;
    }
    worker_ctx *ctx = calloc(WORKERS, sizeof *ctx);
    if (!ctx)
        abort();
    pthread_t th[WORKERS], reader;
    pthread_create(&reader, NULL, read_stats, NULL);
    for (int i = 0; i < WORKERS; i++) {
        CHECK(uv_loop_init(&ctx[i].loop) == 0);
        ctx[i].mixed = mixed;
    }
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&th[i], NULL, run_worker, &ctx[i]);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < WORKERS; i++)
        CHECK(uv_loop_close(&ctx[i].loop) == 0);
    atomic_store(&stop, true);
    pthread_join(reader, NULL);

    CHECK(atomic_load(&answered) == WORKERS * TAKES);
    /* One share for the node, whatever worker a take came to: the burst
     * (and what 300 an hour refills over the run, well below a unit). */
    CHECK(atomic_load(&allowed) == LIMIT);
    sl_backend_stats st;
    memset(&st, 0, sizeof st);
    backend->ops->stats(backend, &st);
    CHECK(st.sync && st.sync_central_down);
    CHECK(st.sync_failures >= 1);
    CHECK(st.sync_unleased == (uint64_t)WORKERS * TAKES);
    backend->ops->free(backend);
    free(ctx);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    workers_share_the_node_half_of_a_key(false);
    int bad = atomic_load(&mt_bad);
    printf("[%s] mt_sync::workers_share_the_node_half_of_a_key\n", bad ? "FAIL" : "PASS");
    workers_share_the_node_half_of_a_key(true);
    printf("[%s] mt_sync::workers_share_it_beside_a_window\n",
           atomic_load(&mt_bad) > bad ? "FAIL" : "PASS");
    return atomic_load(&mt_bad) ? 1 : 0;
}
