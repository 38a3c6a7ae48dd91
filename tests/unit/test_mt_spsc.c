/*
 * The decision log's ring (common/spsc.h) between two threads, as the log
 * uses it: a producer that never waits (a record that does not fit is
 * dropped and counted) and a consumer that reads on as records come. Also
 * run under ThreadSanitizer (label mt), which sees any byte read before it
 * was published or written while still being read.
 *
 * Every record carries its sequence number and bytes derived from it, so
 * the consumer can tell a record torn, repeated, reordered or lost: what
 * it reads must be exactly the records the producer committed, in order,
 * and committed plus dropped must be every record the producer made.
 *
 * A plain program, not a Criterion suite: Criterion cannot start under
 * ThreadSanitizer (Snaipe/Criterion issue 274). It exits 1 when any check
 * fails.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/spsc.h"

static atomic_int failures;

#define CHECK(cond)                                                                              \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            atomic_fetch_add(&failures, 1);                                                      \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);             \
        }                                                                                        \
    } while (0)

typedef struct run {
    sl_spsc ring;
    uint64_t records;      /* the producer makes this many */
    bool retry;            /* a refused record is tried again (else dropped) */
    _Atomic bool produced; /* the producer is done */
    uint64_t committed, dropped; /* the producer's counts */
    uint64_t read;               /* the consumer's */
    uint64_t max_len;
    unsigned pace;               /* the producer's work between records, in spins */
} run;

/* The length and the bytes of record seq: the sequence number first, then
 * a pattern of it. */
static size_t rec_len(uint64_t seq, uint64_t max)
{
    uint64_t x = seq * UINT64_C(0x9E3779B97F4A7C15);
    return 8 + (size_t)((x >> 40) % (max - 8 + 1));
}

static unsigned char rec_byte(uint64_t seq, size_t i)
{
    return (unsigned char)(seq * 31 + i * 17 + (seq >> 8));
}

static void *producer(void *arg)
{
    run *r = arg;
    for (uint64_t seq = 0; seq < r->records; seq++) {
        size_t len = rec_len(seq, r->max_len);
        unsigned char *p;
        while (!(p = sl_spsc_reserve(&r->ring, len)) && r->retry)
            sched_yield();
        if (!p) {
            r->dropped++;
            continue;
        }
        memcpy(p, &seq, 8);
        for (size_t i = 8; i < len; i++)
            p[i] = rec_byte(seq, i);
        sl_spsc_commit(&r->ring);
        r->committed++;
        /* The work a worker does between decisions: the consumer keeps up
         * with some of the records and not with others. */
        for (volatile unsigned spin = 0; spin < r->pace; spin++)
            ;
    }
    atomic_store(&r->produced, true);
    return NULL;
}

static void *consumer(void *arg)
{
    run *r = arg;
    uint64_t last = UINT64_MAX; /* none yet */
    for (;;) {
        bool done = atomic_load(&r->produced);
        size_t len;
        const unsigned char *p;
        bool any = false;
        while ((p = sl_spsc_peek(&r->ring, &len))) {
            any = true;
            uint64_t seq;
            CHECK(len >= 8);
            memcpy(&seq, p, 8);
            CHECK(last == UINT64_MAX || seq > last);        /* in order, never twice */
            CHECK(!r->retry || seq == (last == UINT64_MAX ? 0 : last + 1)); /* none lost */
            CHECK(len == rec_len(seq, r->max_len));
            bool whole = true;
            for (size_t i = 8; i < len; i++)
                whole &= p[i] == rec_byte(seq, i);
            CHECK(whole);
            last = seq;
            r->read++;
            sl_spsc_release(&r->ring);
        }
        if (done && !any)
            break;
        if (!any)
            sched_yield();
    }
    return NULL;
}

static void one_run(const char *name, size_t cap, uint64_t records, uint64_t max_len,
                    bool retry, unsigned pace)
{
    run *r = calloc(1, sizeof *r);
    CHECK(r && sl_spsc_init(&r->ring, cap) == 0);
    r->records = records;
    r->retry = retry;
    r->max_len = max_len;
    r->pace = pace;
    atomic_init(&r->produced, false);
    pthread_t tp, tc;
    CHECK(pthread_create(&tc, NULL, consumer, r) == 0);
    CHECK(pthread_create(&tp, NULL, producer, r) == 0);
    pthread_join(tp, NULL);
    pthread_join(tc, NULL);
    CHECK(r->committed + r->dropped == records);
    CHECK(r->read == r->committed);
    CHECK(!retry || r->dropped == 0);
    CHECK(sl_spsc_used(&r->ring) == 0);
    printf("%s: %llu records, %llu read, %llu dropped\n", name, (unsigned long long)records,
           (unsigned long long)r->read, (unsigned long long)r->dropped);
    sl_spsc_free(&r->ring);
    free(r);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv; /* ctest passes Criterion's --jobs; there is nothing to choose here */
    /* A small ring wraps and fills constantly; records up to its most. */
    one_run("every_record_passes_in_order_when_the_producer_retries", 256, 200000, 120, true, 0);
    one_run("dropped_records_are_only_ever_the_refused_ones", 256, 200000, 120, false, 3000);
    one_run("a_roomy_ring_with_short_records", 1 << 16, 300000, 40, false, 500);
    int bad = atomic_load(&failures);
    if (bad)
        fprintf(stderr, "test_mt_spsc: %d checks failed\n", bad);
    return bad ? 1 : 0;
}
