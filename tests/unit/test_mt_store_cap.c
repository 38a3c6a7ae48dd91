/*
 * The memory cap under a flood of distinct keys (the attacker who rotates
 * keys): two threads take from 10 million never-repeated keys against a
 * store capped at 8 MiB. The bytes used never pass the cap (checked all
 * along), every key is either held or counted as evicted, and the store's
 * invariants hold at the end. SL_TEST_CAP_KEYS overrides the key count.
 * `make test` runs the full 10 million under AddressSanitizer (about a
 * minute on a 2-core machine) and 2 million under ThreadSanitizer, which
 * is several times slower and looks for races, not for the cap.
 *
 * A plain program, like test_mt_store.c: Criterion cannot start under
 * ThreadSanitizer. Exits 1 when a check fails.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_debug.h"

#define CAP (8u << 20)
#define THREADS 2

static atomic_int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            atomic_fetch_add(&failures, 1);                                                        \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);              \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

typedef struct flood_arg {
    sl_store *s;
    const sl_limit *l;
    int id;
    long keys;
    long admitted;
} flood_arg;

static void *flood(void *p)
{
    flood_arg *a = p;
    unsigned char key[16];
    for (long i = 0; i < a->keys; i++) {
        /* 16-byte keys, distinct across threads: thread id, counter. */
        uint64_t hi = (uint64_t)a->id, lo = (uint64_t)i;
        memcpy(key, &hi, 8);
        memcpy(key + 8, &lo, 8);
        sl_decision d;
        int rc = sl_store_take(a->s, key, sizeof key, a->l, INT64_C(1000000000) + i, 1, &d);
        if (rc != SL_OK || !d.allowed) {
            CHECK(0, "take %ld: rc %d allowed %d", i, rc, d.allowed);
            return NULL;
        }
        a->admitted++;
        if (i % 250000 == 0) {
            sl_store_stats st;
            sl_store_get_stats(a->s, &st);
            CHECK(st.bytes_used <= CAP, "after %ld keys: %llu bytes used", i,
                  (unsigned long long)st.bytes_used);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    long total = 10 * 1000 * 1000;
#ifdef __SANITIZE_THREAD__
    total = 2 * 1000 * 1000;
#endif
    const char *env = getenv("SL_TEST_CAP_KEYS");
    if (env && atol(env) > 0)
        total = atol(env);
    sl_limit l;
    /* An hour-long period: nothing expires, only eviction makes room. */
    if (sl_limit_init(&l, SL_GCRA, 100, INT64_C(3600000000000), 0) != SL_OK)
        return 1;
    sl_store_config c = {.max_memory = CAP, .seed = 1};
    sl_store *s;
    if (sl_store_new(&c, &s) != SL_OK)
        return 1;
    pthread_t t[THREADS];
    flood_arg a[THREADS];
    for (int i = 0; i < THREADS; i++) {
        a[i] = (flood_arg){s, &l, i, total / THREADS, 0};
        pthread_create(&t[i], NULL, flood, &a[i]);
    }
    long admitted = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        admitted += a[i].admitted;
    }
    sl_store_stats st;
    sl_store_get_stats(s, &st);
    CHECK(admitted == total / THREADS * THREADS, "admitted %ld", admitted);
    CHECK(st.bytes_used <= CAP, "%llu bytes used", (unsigned long long)st.bytes_used);
    CHECK(st.bytes_used > CAP / 2, "the cap is used: %llu bytes", (unsigned long long)st.bytes_used);
    CHECK(st.evictions > 0, "evictions are counted");
    CHECK(st.keys + st.evictions + st.reclaimed == (uint64_t)admitted,
          "every key held or evicted: %llu + %llu + %llu", (unsigned long long)st.keys,
          (unsigned long long)st.evictions, (unsigned long long)st.reclaimed);
    CHECK(sl_store_debug_check(s) == 0, "invariants");
    printf("[%s] mt_store_cap: %ld keys, cap %u bytes: %llu used, %llu held, %llu evicted\n",
           atomic_load(&failures) ? "FAIL" : "PASS", admitted, CAP,
           (unsigned long long)st.bytes_used, (unsigned long long)st.keys,
           (unsigned long long)st.evictions);
    sl_store_free(s);
    return atomic_load(&failures) ? 1 : 0;
}
