/*
 * Eviction at the memory cap forgives debt evenly: the keys that owe the
 * most (whose states expire last) keep their states, whether they were
 * inserted as one block (as a snapshot restore inserts them) or interleaved
 * with the keys that come and go. On a virtual clock that never moves, so
 * that no state expires and every state dropped is an eviction.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "store/store_debug.h"
#include "testlib.h"

#define CAP ((size_t)2 << 20) /* about 60 000 keys of 32-byte records */
#define SHARDS 2u
#define NOW (1000 * NS_PER_SEC)
#define WALL (1700000000 * NS_PER_SEC) /* the wall clock at NOW, for snapshots */

/* How the indebted keys get into the store. */
enum { INTERLEAVED, BLOCK, RESTORED };

/* Keys of 8 bytes, so that every record has the same size (32 bytes) and
 * shares pages with every other. */
static size_t key_of(char *buf, char kind, int i)
{
    return (size_t)snprintf(buf, 16, "%c%07d", kind, i);
}

typedef struct evict_run {
    int indebted;  /* keys that owe 8 of their 10 units */
    int lost;      /* of those, how many the store no longer holds */
    uint64_t evictions;
    uint64_t held; /* keys held at the end */
} evict_run;

/*
 * Fills a capped store with keys that took 1 unit of 10 (they expire within
 * 6 s) and a tenth as many indebted keys that took 8 (expire in 48 s): four
 * times as many passing keys as the cap holds, so that the store evicts
 * about three times its size. The indebted keys are inserted first, one
 * after the other (BLOCK), or restored first from a snapshot of a store
 * that held only them (RESTORED), or make one in every ten inserts
 * (INTERLEAVED).
 */
static evict_run run(int how, uint64_t seed)
{
    sl_store_config c = {.max_memory = CAP, .shards = SHARDS, .seed = seed};
    sl_store *s = NULL;
    cr_assert_eq(sl_store_new(&c, &s), SL_OK);
    sl_limit l;
    cr_assert_eq(sl_limit_init(&l, SL_GCRA, 10, 60 * NS_PER_SEC, 10), SL_OK);
    /* How many keys the cap holds, measured: insert passing keys until the
     * first eviction, on a store of its own. */
    evict_run r = {0};
    char key[16];
    sl_decision d;
    int fill = 0;
    {
        sl_store *probe = NULL;
        cr_assert_eq(sl_store_new(&c, &probe), SL_OK);
        sl_store_stats st = {0};
        while (st.evictions == 0) {
            size_t n = key_of(key, 'p', fill++);
            cr_assert_eq(sl_store_take(probe, key, n, &l, NOW, 1, &d), SL_OK);
            sl_store_get_stats(probe, &st);
        }
        sl_store_free(probe);
    }
    r.indebted = fill / 10;
    int passing = 0, indebted = 0;
    if (how == BLOCK) {
        for (; indebted < r.indebted; indebted++) {
            size_t n = key_of(key, 'd', indebted);
            cr_assert_eq(sl_store_take(s, key, n, &l, NOW, 8, &d), SL_OK);
        }
    } else if (how == RESTORED) {
        sl_store *from = NULL;
        sl_store_config fc = {.shards = SHARDS, .seed = seed};
        cr_assert_eq(sl_store_new(&fc, &from), SL_OK);
        for (int i = 0; i < r.indebted; i++) {
            size_t n = key_of(key, 'd', i);
            cr_assert_eq(sl_store_take(from, key, n, &l, NOW, 8, &d), SL_OK);
        }
        char path[] = "/tmp/sl_evict_snap_XXXXXX";
        int fd = mkstemp(path);
        cr_assert(fd >= 0);
        close(fd);
        cr_assert_eq(sl_store_snapshot_save(from, path, NOW, WALL), SL_OK);
        sl_store_free(from);
        size_t loaded = 0;
        cr_assert_eq(sl_store_snapshot_load(s, path, NOW, WALL, &loaded), SL_OK);
        unlink(path);
        cr_assert_eq(loaded, (size_t)r.indebted);
        indebted = r.indebted;
    }
    for (int i = 0; passing < 4 * fill; i++) {
        size_t n;
        if (how == INTERLEAVED && indebted < r.indebted && i % 10 == 0) {
            n = key_of(key, 'd', indebted++);
            cr_assert_eq(sl_store_take(s, key, n, &l, NOW, 8, &d), SL_OK);
        } else {
            n = key_of(key, 'o', passing++);
            cr_assert_eq(sl_store_take(s, key, n, &l, NOW, 1, &d), SL_OK);
        }
        cr_assert(d.allowed);
    }
    cr_assert_eq(indebted, r.indebted);
    for (int i = 0; i < r.indebted; i++) {
        size_t n = key_of(key, 'd', i);
        r.lost += !sl_store_debug_contains(s, key, n);
    }
    cr_assert_eq(sl_store_debug_check(s), 0);
    sl_store_stats st;
    sl_store_get_stats(s, &st);
    r.evictions = st.evictions;
    r.held = st.keys;
    cr_assert_eq(st.reclaimed, 0, "the clock does not move: nothing expires");
    sl_store_free(s);
    return r;
}

/*
 * The ideal, for a sample of 5 records drawn at random from the shard: an
 * indebted state goes only when all 5 drawn are indebted, with probability
 * about 0.1^5 = 1e-5 per eviction (a tenth of the keys are indebted, and
 * stay so, since they are the ones kept). Over the 150 000 evictions here
 * (three times the 50 000 keys the cap holds), that is 1.5 of the 5 000
 * indebted keys lost on average, and 25 (0.5%) or more has a probability
 * below 1e-15 (Poisson). Sampling neighbouring records
 * instead loses every indebted state whose neighbours are all indebted: a
 * block of them lost several percent, interleaved ones none.
 */
Test(store_evict, block_inserted_debts_kept_as_often_as_interleaved)
{
    for (uint64_t seed = 1; seed <= 3; seed++) {
        evict_run b = run(BLOCK, seed), m = run(INTERLEAVED, seed);
        double fb = (double)b.lost / b.indebted, fm = (double)m.lost / m.indebted;
        cr_log_info("seed %llu: block %d of %d lost (%.3f%%), interleaved %d of %d (%.3f%%); "
                    "%llu and %llu evictions",
                    (unsigned long long)seed, b.lost, b.indebted, 100 * fb, m.lost, m.indebted,
                    100 * fm, (unsigned long long)b.evictions, (unsigned long long)m.evictions);
        /* The store did evict, several times its size. */
        cr_assert_gt(b.evictions, 2 * b.held, "seed %llu", (unsigned long long)seed);
        cr_assert_gt(m.evictions, 2 * m.held, "seed %llu", (unsigned long long)seed);
        cr_expect_leq(fb, 0.005, "block-inserted: %d of %d indebted keys lost their debt",
                      b.lost, b.indebted);
        cr_expect_leq(fm, 0.005, "interleaved: %d of %d indebted keys lost their debt", m.lost,
                      m.indebted);
    }
}

/* The same bound for debts a snapshot restore brought back: the loader
 * inserts them one after the other, as a block. */
Test(store_evict, restored_debts_kept_through_a_flood)
{
    evict_run r = run(RESTORED, 7);
    cr_log_info("restored: %d of %d lost; %llu evictions", r.lost, r.indebted,
                (unsigned long long)r.evictions);
    cr_assert_gt(r.evictions, 2 * r.held);
    cr_expect_leq((double)r.lost / r.indebted, 0.005,
                  "restored: %d of %d indebted keys lost their debt", r.lost, r.indebted);
}
