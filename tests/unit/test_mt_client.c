/*
 * The client's shared objects under threads (also run under
 * ThreadSanitizer): an sl_client_limiter that threads take from, update
 * and ask at once, and an sl_retry_budget they record into and retry
 * from. The limiter hands out exactly what remains, never more than its
 * policy allows over a virtual clock, and never a negative remaining; the
 * budget allows exactly its floor, and never more than its bound; the
 * default random source is drawn from by all threads.
 *
 * A plain program, not a Criterion suite: Criterion cannot start under
 * ThreadSanitizer (Snaipe/Criterion issue 274). It exits 1 when any check
 * fails.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice_client.h"
#include "testlib.h"

#define NTHREADS 8

static atomic_int failures;

#define CHECK(cond)                                                                              \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            atomic_fetch_add(&failures, 1);                                                      \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);             \
        }                                                                                        \
    } while (0)

static void run_threads(void *(*fn)(void *), void *arg)
{
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        CHECK(pthread_create(&t[i], NULL, fn, arg) == 0);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
}

static void parse(const char *policy, const char *limit, sl_rl_headers *out)
{
    sl_header_line h[2] = {{"RateLimit-Policy", 16, policy, strlen(policy)},
                           {"RateLimit", 9, limit, strlen(limit)}};
    sl_rl_parse(h, 2, 0, out);
}

/* ---- threads take exactly what remains ---- */

static sl_client_limiter lim;
static atomic_int taken;

static void *take_200(void *arg)
{
    (void)arg;
    for (int i = 0; i < 200; i++)
        if (sl_client_limiter_try_acquire(&lim, 100 * NS_PER_SEC, 1) == 1)
            atomic_fetch_add(&taken, 1);
    return NULL;
}

static void threads_take_exactly_what_remains(void)
{
    CHECK(sl_client_limiter_init(&lim) == SL_OK);
    sl_rl_headers h;
    parse("\"a\";q=1000;w=3600", "\"a\";r=500", &h);
    CHECK(sl_client_limiter_update(&lim, &h, 200, 100 * NS_PER_SEC) == SL_OK);
    atomic_store(&taken, 0);
    run_threads(take_200, NULL);
    CHECK(atomic_load(&taken) == 500);
    sl_client_limiter_destroy(&lim);
}

/* ---- takes, updates and questions at once, on a shared virtual clock ---- */

static _Atomic int64_t vclock;
static atomic_int admitted_total; /* units */
static bool with_updates;

static void *mixed(void *arg)
{
    test_rng rng = {(uint64_t)(uintptr_t)arg ^ (uint64_t)pthread_self()};
    sl_rl_headers *h = malloc(sizeof *h);
    for (int i = 0; i < 4000; i++) {
        /* every call moves the clock 1 ms: 32 s in all over 8 threads */
        int64_t now = atomic_fetch_add(&vclock, NS_PER_MS) + NS_PER_MS;
        uint64_t k = test_next(&rng) % 16;
        if (k == 0 && with_updates) {
            char lim_text[64];
            snprintf(lim_text, sizeof lim_text, "\"s\";r=%d, \"m\";r=%d",
                     (int)(test_next(&rng) % 11), (int)(test_next(&rng) % 101));
            parse("\"s\";q=10;w=1, \"m\";q=100;w=60", lim_text, h);
            CHECK(sl_client_limiter_update(&lim, h, 200, now) == SL_OK);
        } else if (k == 1) {
            sl_client_policy_info info[4];
            int n = sl_client_limiter_policies(&lim, now, info, 4);
            CHECK(n == 2);
            for (int j = 0; j < n && j < 4; j++)
                CHECK(info[j].remaining >= 0 && info[j].remaining <= info[j].quota);
        } else {
            int64_t cost = (int64_t)(test_next(&rng) % 3);
            int64_t w = sl_client_limiter_wait(&lim, now, cost);
            CHECK(w >= 0);
            int ok = sl_client_limiter_try_acquire(&lim, now, cost);
            CHECK(ok == 0 || ok == 1);
            if (ok)
                atomic_fetch_add(&admitted_total, (int)cost);
        }
    }
    free(h);
    return NULL;
}

static void takes_updates_and_questions_at_once(void)
{
    CHECK(sl_client_limiter_init(&lim) == SL_OK);
    sl_rl_headers h;
    parse("\"s\";q=10;w=1, \"m\";q=100;w=60", "\"s\";r=10, \"m\";r=100", &h);
    atomic_store(&vclock, 0);
    CHECK(sl_client_limiter_update(&lim, &h, 200, 0) == SL_OK);
    atomic_store(&admitted_total, 0);
    with_updates = true;
    run_threads(mixed, &lim);
    /* Updates set the local state to what a "server" said, so no bound holds
     * across them: here threads must keep every answer in range. */
    CHECK(atomic_load(&admitted_total) > 0);

    /* Without updates, GCRA's bound: over the 32 s of the clock, "m" (100
     * per 60 s, burst 100) admits at most 100 + 32 * 100 / 60 units, and
     * threads with more demand than that get near it. */
    CHECK(sl_client_limiter_update(&lim, &h, 200, atomic_load(&vclock)) == SL_OK);
    atomic_store(&vclock, atomic_load(&vclock) + 60 * NS_PER_SEC); /* both full again */
    int64_t start = atomic_load(&vclock);
    atomic_store(&admitted_total, 0);
    with_updates = false;
    run_threads(mixed, &lim);
    int64_t span = atomic_load(&vclock) - start;
    int64_t bound = 100 + span * 100 / (60 * NS_PER_SEC);
    printf("mt_client: %d units admitted in %.3f s of 100 per 60 s (bound %lld)\n",
           atomic_load(&admitted_total), span / 1e9, (long long)bound);
    CHECK(atomic_load(&admitted_total) <= bound);
    CHECK(atomic_load(&admitted_total) >= 100);
    sl_client_limiter_destroy(&lim);
}

/* ---- one retry budget ---- */

static sl_retry_budget budget;
static atomic_int retries, firsts;

static void *retry_100(void *arg)
{
    (void)arg;
    for (int i = 0; i < 100; i++)
        if (sl_retry_budget_try_retry(&budget, 5 * NS_PER_SEC) == 1)
            atomic_fetch_add(&retries, 1);
    return NULL;
}

static void *record_and_retry(void *arg)
{
    test_rng rng = {(uint64_t)(uintptr_t)arg ^ (uint64_t)pthread_self()};
    for (int i = 0; i < 2000; i++) {
        int64_t now = 5 * NS_PER_SEC + (int64_t)(test_next(&rng) % (5 * NS_PER_SEC));
        if (test_next(&rng) % 2) {
            CHECK(sl_retry_budget_record_attempt(&budget, now, 1) == SL_OK);
            atomic_fetch_add(&firsts, 1);
        } else if (sl_retry_budget_try_retry(&budget, now) == 1) {
            atomic_fetch_add(&retries, 1);
        }
    }
    return NULL;
}

static void threads_share_one_budget(void)
{
    sl_retry_budget_config c = {0, 1000, 60 * NS_PER_SEC, 0}; /* no ratio, 1/s: 60 */
    CHECK(sl_retry_budget_init(&budget, &c) == SL_OK);
    atomic_store(&retries, 0);
    run_threads(retry_100, NULL);
    CHECK(atomic_load(&retries) == 60);
    sl_retry_budget_destroy(&budget);

    /* 10% + 1/s over a 60 s window, everything within 5 s of it */
    sl_retry_budget_config d = {100, 1000, 60 * NS_PER_SEC, 0};
    CHECK(sl_retry_budget_init(&budget, &d) == SL_OK);
    atomic_store(&retries, 0);
    atomic_store(&firsts, 0);
    run_threads(record_and_retry, &budget);
    int64_t f, r;
    CHECK(sl_retry_budget_counts(&budget, 10 * NS_PER_SEC, &f, &r) == SL_OK);
    CHECK(f == atomic_load(&firsts) && r == atomic_load(&retries));
    CHECK(r * 10 <= f + 600); /* r <= f / 10 + 60 */
    sl_retry_budget_destroy(&budget);
}

/* ---- the default random source ---- */

static void *draw(void *arg)
{
    const sl_backoff *b = arg;
    for (int i = 0; i < 10000; i++) {
        int64_t d = sl_backoff_delay(b, i % 10, 0, 0, NULL, NULL);
        CHECK(d >= 0 && d <= NS_PER_SEC);
    }
    return NULL;
}

static void the_default_source_under_threads(void)
{
    sl_backoff b;
    CHECK(sl_backoff_init(&b, NS_PER_MS, NS_PER_SEC, SL_BACKOFF_NO_DEADLINE, false) == SL_OK);
    run_threads(draw, &b);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv; /* ctest passes Criterion's --jobs; nothing to choose here */
    static const struct {
        const char *name;
        void (*run)(void);
    } tests[] = {
        {"threads_take_exactly_what_remains", threads_take_exactly_what_remains},
        {"takes_updates_and_questions_at_once", takes_updates_and_questions_at_once},
        {"threads_share_one_budget", threads_share_one_budget},
        {"the_default_source_under_threads", the_default_source_under_threads},
    };
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        int before = atomic_load(&failures);
        tests[i].run();
        printf("[%s] mt_client::%s\n", atomic_load(&failures) == before ? "PASS" : "FAIL",
               tests[i].name);
    }
    return atomic_load(&failures) ? 1 : 0;
}
