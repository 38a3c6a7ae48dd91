/*
 * sl_store_charge under threads (also run under ThreadSanitizer): N threads
 * charging and refunding one key, beside takes that the debt refuses, lose
 * no unit: with the clock still, the key's debt at the end is the sum of
 * what was charged less what was given back, to the unit.
 *
 * A plain program with its own main, as test_mt_store.c (Criterion cannot
 * start under ThreadSanitizer). It exits 1 when any check fails.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "mtlib.h"
#include "testlib.h"

#define NTHREADS 4
#define ROUNDS 2000
#define NOW (1000 * NS_PER_SEC)

typedef struct worker_arg {
    sl_store *s;
    const sl_limit *l;
    int64_t seed, owed;
    pthread_barrier_t *start;
} worker_arg;

/* Each round charges c units and then gives back g <= c of them: what a
 * thread gives back it charged before, so every refund finds its units. */
static void *worker(void *p)
{
    worker_arg *a = p;
    test_rng r = {(uint64_t)a->seed};
    pthread_barrier_wait(a->start);
    for (int i = 0; i < ROUNDS; i++) {
        sl_decision d;
        int64_t c = test_range(&r, 1, 50), g = test_range(&r, 0, c);
        CHECK(sl_store_charge(a->s, "hot", 3, a->l, NOW, c, &d) == SL_OK);
        CHECK(d.allowed);
        CHECK(sl_store_refund(a->s, "hot", 3, a->l, NOW, g) == g);
        a->owed += c - g;
        CHECK(sl_store_take(a->s, "hot", 3, a->l, NOW, 1, &d) == SL_OK);
        CHECK(!d.allowed);
    }
    return NULL;
}

int main(void)
{
    /* One unit a second, a burst of 1: the debt in seconds is the units
     * owed less the one a take may hold, read from reset_after. */
    sl_limit lims[3];
    CHECK(sl_limit_init(&lims[0], SL_GCRA, 1, NS_PER_SEC, 1) == SL_OK);
    CHECK(sl_limit_init(&lims[1], SL_TOKEN_BUCKET, 1, NS_PER_SEC, 1) == SL_OK);
    CHECK(sl_limit_init(&lims[2], SL_LEAKY_BUCKET, 1, NS_PER_SEC, 1) == SL_OK);
    for (int li = 0; li < 3; li++) {
        sl_store_config c = {.shards = 1, .seed = 3};
        sl_store *s;
        CHECK(sl_store_new(&c, &s) == SL_OK);
        /* One unit first, so that the takes beside the charges are refused
         * from the start, whatever the interleaving. */
        sl_decision d;
        CHECK(sl_store_charge(s, "hot", 3, &lims[li], NOW, 2, &d) == SL_OK);
        pthread_t t[NTHREADS];
        worker_arg a[NTHREADS];
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, NTHREADS);
        for (int i = 0; i < NTHREADS; i++) {
            a[i] = (worker_arg){s, &lims[li], 100 * li + i + 1, 0, &start};
            pthread_create(&t[i], NULL, worker, &a[i]);
        }
        int64_t owed = 2;
        for (int i = 0; i < NTHREADS; i++) {
            pthread_join(t[i], NULL);
            owed += a[i].owed;
        }
        pthread_barrier_destroy(&start);
        CHECK(sl_store_peek(s, "hot", 3, &lims[li], NOW, 0, &d) == SL_OK);
        CHECK(d.reset_after_ns == owed * NS_PER_SEC);
        if (d.reset_after_ns != owed * NS_PER_SEC)
            fprintf(stderr, "%s: %lld ns of debt, %lld units owed\n",
                    sl_algorithm_name(lims[li].algorithm), (long long)d.reset_after_ns,
                    (long long)owed);
        sl_store_free(s);
    }
    printf("[%s] mt_store_charge::charges_and_refunds_lose_no_unit\n", mt_bad ? "FAIL" : "PASS");
    return mt_bad ? 1 : 0;
}
