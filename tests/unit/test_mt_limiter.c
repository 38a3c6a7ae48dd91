/*
 * sl_limiter and sl_limiters under threads (also run under
 * ThreadSanitizer): threads that acquire and complete on one limiter, and
 * on a few keys of one table, never see more in flight than the limit they
 * were admitted under, end with nothing in flight, and the counters add
 * up; a blocking acquire is admitted when another thread completes, or
 * when a lease expires, and refused at its deadline when nothing frees.
 *
 * A plain program, not a Criterion suite: Criterion cannot start under
 * ThreadSanitizer (Snaipe/Criterion issue 274). It exits 1 when any check
 * fails.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "testlib.h"

#define NTHREADS 4
#define ROUNDS 20000
#define HOLD 3 /* leases a thread holds at most */

static atomic_int failures;

#define CHECK(cond)                                                                              \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            atomic_fetch_add(&failures, 1);                                                      \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);             \
        }                                                                                        \
    } while (0)

static sl_limiter_config config(int64_t init, int64_t lo, int64_t hi, int64_t ttl)
{
    sl_limiter_config c;
    memset(&c, 0, sizeof c);
    sl_adapt_config_default(SL_ADAPT_AIMD, &c.adapt);
    c.adapt.initial_limit = init;
    c.adapt.min_limit = lo;
    c.adapt.max_limit = hi;
    c.adapt.timeout_ns = 50 * NS_PER_MS;
    c.shed.classes = 3;
    c.shed.reserve_permille[0] = 200;
    c.shed.idle_ns = NS_PER_SEC;
    c.ttl_ns = ttl;
    return c;
}

/* A virtual clock all threads share: every read moves it 1 us on. */
static _Atomic int64_t vclock;

static int64_t vnow(void)
{
    return atomic_fetch_add(&vclock, 1000) + 1000;
}

typedef struct worker {
    sl_limiter *lim;   /* one of these two */
    sl_limiters *tab;
    int index;
    uint64_t admitted, completed;
    bool nomem_ok; /* a table too small for its keys may refuse a new one */
} worker;

static sl_limiter_config shared_cfg;

static sl_status w_acquire(worker *w, int key, int64_t now, int cls, uint64_t id,
                           sl_limiter_lease *l, sl_limiter_decision *d)
{
    if (w->lim != NULL)
        return sl_limiter_acquire(w->lim, now, cls, 0, id, l, d);
    char k[8];
    int n = snprintf(k, sizeof k, "k%d", key);
    return sl_limiters_acquire(w->tab, k, (size_t)n, &shared_cfg, now, cls, 0, id, l, d);
}

static int w_complete(worker *w, int key, int64_t now, const sl_limiter_lease *l,
                      sl_adapt_outcome o, int64_t rtt)
{
    if (w->lim != NULL)
        return sl_limiter_complete(w->lim, now, l, o, rtt);
    char k[8];
    int n = snprintf(k, sizeof k, "k%d", key);
    return sl_limiters_complete(w->tab, k, (size_t)n, now, l, o, rtt);
}

static void *hammer(void *arg)
{
    worker *w = arg;
    test_rng rng = {(uint64_t)w->index * 7919 + 1};
    sl_limiter_lease held[HOLD];
    int keys[HOLD];
    int nheld = 0;
    for (int r = 0; r < ROUNDS; r++) {
        if (nheld < HOLD && test_range(&rng, 0, 1) == 0) {
            sl_limiter_lease l;
            sl_limiter_decision d;
            int key = (int)test_range(&rng, 0, 3);
            uint64_t id = ((uint64_t)w->index << 32) | (uint64_t)(r + 1);
            sl_status st = w_acquire(w, key, vnow(), (int)test_range(&rng, 0, 2), id, &l, &d);
            CHECK(st == SL_OK || (w->nomem_ok && st == SL_ERR_NOMEM));
            if (st == SL_OK && d.admitted) {
                CHECK(d.in_flight <= d.limit);
                CHECK(l.id == id);
                held[nheld] = l;
                keys[nheld++] = key;
                w->admitted++;
            }
        } else if (nheld > 0) {
            int i = (int)test_range(&rng, 0, nheld - 1);
            sl_adapt_outcome o = (sl_adapt_outcome)test_range(&rng, 0, 2);
            int got = w_complete(w, keys[i], vnow(), &held[i], o, test_range(&rng, 0, 100000000));
            CHECK(got == 1);
            w->completed += got == 1;
            held[i] = held[--nheld];
            keys[i] = keys[nheld];
        }
    }
    while (nheld > 0) {
        nheld--;
        CHECK(w_complete(w, keys[nheld], vnow(), &held[nheld], SL_ADAPT_SUCCESS, 0) == 1);
        w->completed++;
    }
    return NULL;
}

static void run_workers(sl_limiter *lim, sl_limiters *tab, worker *w)
{
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (worker){lim, tab, i, 0, 0, false};
        pthread_create(&th[i], NULL, hammer, &w[i]);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
}

static void one_limiter_under_threads(void)
{
    /* A TTL far beyond the run: nothing expires, every completion holds. */
    sl_limiter_config c = config(6, 2, 8, INT64_C(1) << 50);
    sl_limiter *lim = sl_limiter_new(&c, NULL);
    CHECK(lim != NULL);
    worker w[NTHREADS];
    run_workers(lim, NULL, w);
    uint64_t admitted = 0, completed = 0;
    for (int i = 0; i < NTHREADS; i++) {
        admitted += w[i].admitted;
        completed += w[i].completed;
    }
    sl_limiter_stats st;
    sl_limiter_stats_get(lim, vnow(), &st);
    CHECK(st.in_flight == 0);
    CHECK(st.admitted == admitted);
    CHECK(st.completed == completed);
    CHECK(admitted == completed);
    CHECK(st.expired == 0);
    CHECK(st.admitted > 0); /* refusals depend on how the threads overlap */
    uint64_t by_class = 0;
    for (int k = 0; k < SL_SHED_CLASSES_MAX; k++)
        by_class += st.refused_by_class[k];
    CHECK(by_class == st.refused);
    printf("one limiter: %llu admitted, %llu refused, limit %lld\n",
           (unsigned long long)st.admitted, (unsigned long long)st.refused, (long long)st.limit);
    sl_limiter_free(lim);
}

typedef struct key_sum {
    int keys;
    int64_t in_flight;
    uint64_t admitted, completed, expired;
} key_sum;

static void sum_key(void *arg, const void *key, size_t keylen, const sl_limiter_stats *st)
{
    (void)key;
    (void)keylen;
    key_sum *s = arg;
    s->keys++;
    s->in_flight += st->in_flight;
    s->admitted += st->admitted;
    s->completed += st->completed;
    s->expired += st->expired;
}

static void one_table_under_threads(void)
{
    shared_cfg = config(4, 2, 6, INT64_C(1) << 50);
    sl_limiters *t = sl_limiters_new(64, 16);
    CHECK(t != NULL);
    worker w[NTHREADS];
    run_workers(NULL, t, w);
    uint64_t admitted = 0, completed = 0;
    for (int i = 0; i < NTHREADS; i++) {
        admitted += w[i].admitted;
        completed += w[i].completed;
    }
    key_sum s = {0, 0, 0, 0, 0};
    sl_limiters_each(t, vnow(), sum_key, &s);
    CHECK(s.keys == 4);
    CHECK(s.in_flight == 0);
    CHECK(s.admitted == admitted);
    CHECK(s.completed == completed);
    CHECK(s.expired == 0);
    sl_limiters_info info;
    sl_limiters_info_get(t, &info);
    CHECK(info.keys == 4);
    CHECK(info.evicted == 0);
    printf("one table: %llu admitted over %d keys\n", (unsigned long long)admitted, s.keys);
    sl_limiters_free(t);
}

/* A table smaller than the keys the threads use: evictions beside
 * acquires, no key over the cap, nothing left in flight. */
static void a_small_table_evicts_under_threads(void)
{
    shared_cfg = config(4, 2, 6, INT64_C(1) << 50);
    sl_limiters *t = sl_limiters_new(2, 16);
    CHECK(t != NULL);
    pthread_t th[NTHREADS];
    worker w[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        w[i] = (worker){NULL, t, i, 0, 0, true};
        pthread_create(&th[i], NULL, hammer, &w[i]);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(th[i], NULL);
    /* With 4 keys and room for 2, acquires may be refused (every limiter
     * holding leases) and completions may find their key evicted only
     * when it had nothing in flight: a held lease keeps its key. */
    sl_limiters_info info;
    sl_limiters_info_get(t, &info);
    CHECK(info.keys <= 2);
    key_sum s = {0, 0, 0, 0, 0};
    sl_limiters_each(t, vnow(), sum_key, &s);
    CHECK(s.in_flight == 0);
    printf("small table: %llu evictions\n", (unsigned long long)info.evicted);
    sl_limiters_free(t);
}

typedef struct waiter {
    sl_limiter *lim;
    int64_t timeout;
    sl_status st;
    sl_limiter_decision d;
    sl_limiter_lease lease;
    int64_t now;
} waiter;

static void *wait_thread(void *arg)
{
    waiter *w = arg;
    w->st = sl_limiter_acquire_wait(w->lim, w->timeout, 0, 0, 77, &w->lease, &w->d, &w->now);
    return NULL;
}

static void a_waiter_is_admitted_when_another_completes(void)
{
    sl_limiter_config c = config(1, 1, 1, 60 * NS_PER_SEC);
    sl_limiter *lim = sl_limiter_new(&c, NULL);
    sl_limiter_lease l;
    sl_limiter_decision d;
    CHECK(sl_limiter_acquire(lim, sl_now_mono(), 0, 0, 1, &l, &d) == SL_OK && d.admitted);
    waiter w = {lim, 30 * NS_PER_SEC, SL_ERR_IO, {0}, {0, 0}, 0};
    pthread_t th;
    pthread_create(&th, NULL, wait_thread, &w);
    usleep(50 * 1000); /* most likely waiting by now; admitted either way */
    CHECK(sl_limiter_complete(lim, sl_now_mono(), &l, SL_ADAPT_SUCCESS, 0) == 1);
    pthread_join(th, NULL);
    CHECK(w.st == SL_OK);
    CHECK(w.d.admitted);
    CHECK(w.lease.id == 77);
    sl_limiter_stats st;
    sl_limiter_stats_get(lim, sl_now_mono(), &st);
    CHECK(st.in_flight == 1);
    CHECK(st.refused == 0); /* the tries while it waited are not refusals */
    CHECK(sl_limiter_complete(lim, sl_now_mono(), &w.lease, SL_ADAPT_SUCCESS, 0) == 1);
    sl_limiter_free(lim);
}

static void a_waiter_is_admitted_when_a_lease_expires(void)
{
    sl_limiter_config c = config(1, 1, 1, 30 * NS_PER_MS);
    sl_limiter *lim = sl_limiter_new(&c, NULL);
    sl_limiter_lease l;
    sl_limiter_decision d;
    CHECK(sl_limiter_acquire(lim, sl_now_mono(), 0, 0, 1, &l, &d) == SL_OK && d.admitted);
    waiter w = {lim, 30 * NS_PER_SEC, SL_ERR_IO, {0}, {0, 0}, 0};
    wait_thread(&w); /* nobody completes: the waiter wakes at the expiry */
    CHECK(w.st == SL_OK);
    CHECK(w.d.admitted);
    sl_limiter_stats st;
    sl_limiter_stats_get(lim, w.now, &st);
    CHECK(st.expired == 1);
    sl_limiter_free(lim);
}

static void a_wait_is_refused_at_its_deadline(void)
{
    sl_limiter_config c = config(1, 1, 1, 60 * NS_PER_SEC);
    sl_limiter *lim = sl_limiter_new(&c, NULL);
    sl_limiter_lease l;
    sl_limiter_decision d;
    CHECK(sl_limiter_acquire(lim, sl_now_mono(), 0, 0, 1, &l, &d) == SL_OK && d.admitted);
    int64_t timeout = 20 * NS_PER_MS;
    int64_t before = sl_now_mono();
    waiter w = {lim, timeout, SL_ERR_IO, {0}, {0, 0}, 0};
    pthread_t th;
    pthread_create(&th, NULL, wait_thread, &w);
    pthread_join(th, NULL);
    CHECK(w.st == SL_OK);
    CHECK(!w.d.admitted);
    CHECK(w.d.reason == SL_SHED_FULL);
    CHECK(w.d.retry_after_ns > 0);
    CHECK(w.now >= before + timeout);
    sl_limiter_stats st;
    sl_limiter_stats_get(lim, w.now, &st);
    CHECK(st.refused == 1); /* one refusal, at the deadline */
    CHECK(st.in_flight == 1);
    /* Bad arguments return at once. */
    CHECK(sl_limiter_acquire_wait(lim, timeout, 0, 0, 0, &l, &d, NULL) == SL_ERR_ARGUMENT);
    CHECK(sl_limiter_acquire_wait(lim, timeout, 5, 0, 2, &l, &d, NULL) == SL_ERR_ARGUMENT);
    sl_limiter_free(lim);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv; /* ctest passes Criterion's --jobs; nothing to choose here */
    static const struct {
        const char *name;
        void (*run)(void);
    } tests[] = {
        {"one_limiter_under_threads", one_limiter_under_threads},
        {"one_table_under_threads", one_table_under_threads},
        {"a_small_table_evicts_under_threads", a_small_table_evicts_under_threads},
        {"a_waiter_is_admitted_when_another_completes", a_waiter_is_admitted_when_another_completes},
        {"a_waiter_is_admitted_when_a_lease_expires", a_waiter_is_admitted_when_a_lease_expires},
        {"a_wait_is_refused_at_its_deadline", a_wait_is_refused_at_its_deadline},
    };
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        int before = atomic_load(&failures);
        tests[i].run();
        printf("[%s] mt_limiter::%s\n", atomic_load(&failures) == before ? "PASS" : "FAIL",
               tests[i].name);
    }
    return atomic_load(&failures) ? 1 : 0;
}
