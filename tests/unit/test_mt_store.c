/*
 * The keyed store under threads (also run under ThreadSanitizer): N
 * threads on one key admit exactly what one thread admits; many keys
 * likewise; multi-limit takes crossing shards, issued from many threads in
 * any order, admit the same total as one thread and consume each limit
 * exactly as often as they were admitted (all or nothing, no deadlock);
 * leases never exceed their limit; snapshots and sweeps run beside takes;
 * takes without the shard's lock run beside inserts, resets, sweeps and
 * index growth; a key's time never goes back; records two threads
 * inserted share no cache line.
 *
 * A plain program with its own main, not a Criterion suite: Criterion cannot
 * start under ThreadSanitizer (Snaipe/Criterion issue 274, "Could not
 * initialize inheritable arena"), and `make test` runs the files named
 * test_mt_* under ThreadSanitizer. It exits 1 when any check fails.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "store/store_debug.h"
#include "testlib.h"

#define NTHREADS 4

static atomic_int check_failures;

__attribute__((format(printf, 4, 5))) static bool check_at(bool ok, const char *where, const char *expr,
                                                           const char *fmt, ...)
{
    if (ok)
        return true;
    atomic_fetch_add(&check_failures, 1);
    fprintf(stderr, "%s: check failed: %s", where, expr);
    if (fmt[1]) { /* fmt is " " followed by the caller's message, if any */
        va_list ap;
        va_start(ap, fmt);
        fputc(':', stderr);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    }
    fputc('\n', stderr);
    return false;
}

#define CHECK_STR2(x) #x
#define CHECK_STR(x) CHECK_STR2(x)
#define CHECK(cond, ...) check_at((cond), __FILE__ ":" CHECK_STR(__LINE__), #cond, " " __VA_ARGS__)
#define CHECK_EQ(a, b, ...) CHECK((a) == (b), __VA_ARGS__)
#define CHECK_LT(a, b, ...) CHECK((a) < (b), __VA_ARGS__)
#define CHECK_LEQ(a, b, ...) CHECK((a) <= (b), __VA_ARGS__)
#define CHECK_GT(a, b, ...) CHECK((a) > (b), __VA_ARGS__)

static sl_store *new_store(unsigned shards)
{
    sl_store_config c = {.shards = shards, .seed = 77};
    sl_store *s;
    CHECK_EQ(sl_store_new(&c, &s), SL_OK);
    return s;
}

typedef struct one_key_arg {
    sl_store *s;
    const sl_limit *l;
    int tries;
    int64_t admitted;
    pthread_barrier_t *start; /* all threads start at once (NULL alone) */
} one_key_arg;

static void *one_key_worker(void *p)
{
    one_key_arg *a = p;
    if (a->start)
        pthread_barrier_wait(a->start);
    /* Time does not move: the total admitted is exactly the limit's
     * capacity, whatever the interleaving. */
    for (int i = 0; i < a->tries; i++) {
        sl_decision d;
        if (sl_store_take(a->s, "hot", 3, a->l, 1000 * NS_PER_SEC, 1, &d) == SL_OK && d.allowed)
            a->admitted++;
    }
    return NULL;
}

static void one_key_admits_what_one_thread_admits(void)
{
    sl_limit lims[5];
    CHECK_EQ(sl_limit_init(&lims[0], SL_GCRA, 1000, 3600 * NS_PER_SEC, 0), SL_OK);
    CHECK_EQ(sl_limit_init(&lims[1], SL_TOKEN_BUCKET, 1000, 3600 * NS_PER_SEC, 0), SL_OK);
    CHECK_EQ(sl_limit_init(&lims[2], SL_FIXED_WINDOW, 1000, 3600 * NS_PER_SEC, 0), SL_OK);
    CHECK_EQ(sl_limit_init(&lims[3], SL_SLIDING_WINDOW, 1000, 3600 * NS_PER_SEC, 0), SL_OK);
    CHECK_EQ(sl_limit_init(&lims[4], SL_SLIDING_LOG, 1000, 3600 * NS_PER_SEC, 0), SL_OK);
    for (int li = 0; li < 10; li++) {
        /* The single-threaded answer. */
        sl_store *s = new_store(0);
        one_key_arg single = {s, &lims[li % 5], NTHREADS * 600, 0, NULL};
        one_key_worker(&single);
        sl_store_free(s);

        /* Takes on a key that is there lock its record in a small shard,
         * its home group in a large one: the second five runs fill one
         * shard with other keys first. */
        s = new_store(li < 5 ? 0 : 1);
        for (int k = 0; li >= 5 && k < 3000; k++) {
            char key[16];
            int n = snprintf(key, sizeof key, "f%d", k);
            sl_decision d;
            CHECK_EQ(sl_store_take(s, key, (size_t)n, &lims[0], NS_PER_SEC, 1, &d), SL_OK);
        }
        pthread_t t[NTHREADS];
        one_key_arg a[NTHREADS];
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, NTHREADS);
        for (int i = 0; i < NTHREADS; i++) {
            a[i] = (one_key_arg){s, &lims[li % 5], 600, 0, &start};
            pthread_create(&t[i], NULL, one_key_worker, &a[i]);
        }
        int64_t total = 0;
        for (int i = 0; i < NTHREADS; i++) {
            pthread_join(t[i], NULL);
            total += a[i].admitted;
        }
        pthread_barrier_destroy(&start);
        CHECK_EQ(single.admitted, 1000);
        CHECK_EQ(total, single.admitted, "%s: %lld admitted by %d threads",
                     sl_algorithm_name(lims[li % 5].algorithm), (long long)total, NTHREADS);
        sl_store_free(s);
    }
}

typedef struct many_keys_arg {
    sl_store *s;
    const sl_limit *l;
    int id;
    int64_t admitted;
} many_keys_arg;

enum { MANY_KEYS = 2000 };

static void *many_keys_worker(void *p)
{
    many_keys_arg *a = p;
    test_rng rng = {(uint64_t)a->id + 1};
    char key[24];
    for (int i = 0; i < 20000; i++) {
        int n = snprintf(key, sizeof key, "k%d", (int)test_range(&rng, 0, MANY_KEYS - 1));
        sl_decision d;
        if (sl_store_take(a->s, key, (size_t)n, a->l, 1000 * NS_PER_SEC, 1, &d) == SL_OK && d.allowed)
            a->admitted++;
    }
    return NULL;
}

static void many_keys_admit_exactly_their_capacity(void)
{
    /* 7 an hour (an emission interval with a fraction of a nanosecond: the
     * general path) and 7 per 7000 s (whole nanoseconds: GCRA's inline path,
     * whose index prefetch runs without the lock while other threads insert
     * keys and the index grows). */
    sl_limit lims[2];
    CHECK_EQ(sl_limit_init(&lims[0], SL_GCRA, 7, 3600 * NS_PER_SEC, 0), SL_OK);
    CHECK_EQ(sl_limit_init(&lims[1], SL_GCRA, 7, 7000 * NS_PER_SEC, 0), SL_OK);
    for (int li = 0; li < 2; li++) {
        const sl_limit *l = &lims[li];
        sl_store *s = new_store(8);
        pthread_t t[NTHREADS];
        many_keys_arg a[NTHREADS];
        for (int i = 0; i < NTHREADS; i++) {
            a[i] = (many_keys_arg){s, l, i, 0};
            pthread_create(&t[i], NULL, many_keys_worker, &a[i]);
        }
        int64_t total = 0;
        for (int i = 0; i < NTHREADS; i++) {
            pthread_join(t[i], NULL);
            total += a[i].admitted;
        }
        /* 80 000 takes on 2000 keys: every key gets its 7, no more. */
        char key[24];
        int64_t consumed = 0;
        for (int k = 0; k < MANY_KEYS; k++) {
            int n = snprintf(key, sizeof key, "k%d", k);
            sl_decision d;
            CHECK_EQ(sl_store_peek(s, key, (size_t)n, l, 1000 * NS_PER_SEC, 0, &d), SL_OK);
            consumed += 7 - d.remaining;
        }
        CHECK_EQ(total, consumed, "limit %d", li);
        CHECK_EQ(total, 7 * MANY_KEYS, "limit %d", li);
        CHECK_EQ(sl_store_debug_check(s), 0);
        sl_store_free(s);
    }
}

/* Multi-limit takes: users nested in tenants nested in one global limit
 * (a laminar family), time standing still. Whatever the order, greedy
 * all-or-nothing admission ends with a maximal set of requests, and in a
 * laminar family every maximal set has the same size: the total admitted
 * must equal the single-threaded answer. */
enum { USERS = 64, TENANTS = 8, PER_THREAD = 3000 };

typedef struct multi_arg {
    sl_store *s;
    const sl_limit *user, *tenant, *global;
    int id;
    int64_t admitted;
    atomic_llong *per_user, *per_tenant;
} multi_arg;

static void *multi_worker(void *p)
{
    multi_arg *a = p;
    test_rng rng = {(uint64_t)a->id * 7919 + 3};
    for (int i = 0; i < PER_THREAD; i++) {
        int u = (int)test_range(&rng, 0, USERS - 1), t = u % TENANTS;
        char uk[16], tk[16];
        int un = snprintf(uk, sizeof uk, "u%d", u), tn = snprintf(tk, sizeof tk, "t%d", t);
        sl_take_item it[3] = {{uk, (size_t)un, a->user, 1},
                              {tk, (size_t)tn, a->tenant, 1},
                              {"global", 6, a->global, 1}};
        /* Items in any order: the store locks shards in its own order. */
        for (int k = 2; k > 0; k--) {
            int j = (int)test_range(&rng, 0, k);
            sl_take_item tmp = it[k];
            it[k] = it[j];
            it[j] = tmp;
        }
        sl_decision out[3];
        int failed;
        CHECK_EQ(sl_store_take_many(a->s, it, 3, 1000 * NS_PER_SEC, out, &failed), SL_OK);
        if (failed < 0) {
            a->admitted++;
            atomic_fetch_add(&a->per_user[u], 1);
            atomic_fetch_add(&a->per_tenant[t], 1);
        }
    }
    return NULL;
}

static int64_t run_multi(int threads, atomic_llong *per_user, atomic_llong *per_tenant, sl_store **out)
{
    static sl_limit user, tenant, global;
    CHECK_EQ(sl_limit_init(&user, SL_GCRA, 40, 3600 * NS_PER_SEC, 0), SL_OK);
    CHECK_EQ(sl_limit_init(&tenant, SL_FIXED_WINDOW, 250, 3600 * NS_PER_SEC, 0), SL_OK);
    CHECK_EQ(sl_limit_init(&global, SL_TOKEN_BUCKET, 1500, 3600 * NS_PER_SEC, 0), SL_OK);
    sl_store *s = new_store(16);
    pthread_t t[NTHREADS];
    multi_arg a[NTHREADS];
    int64_t total = 0;
    for (int i = 0; i < NTHREADS; i++) {
        a[i] = (multi_arg){s, &user, &tenant, &global, i, 0, per_user, per_tenant};
        if (threads > 1)
            pthread_create(&t[i], NULL, multi_worker, &a[i]);
        else
            multi_worker(&a[i]); /* the same requests, one after the other */
    }
    for (int i = 0; i < NTHREADS; i++) {
        if (threads > 1)
            pthread_join(t[i], NULL);
        total += a[i].admitted;
    }
    *out = s;
    return total;
}

static void multi_limit_takes_across_shards_match_one_thread(void)
{
    static atomic_llong pu1[USERS], pt1[TENANTS], pu[USERS], pt[TENANTS];
    sl_store *s1, *s;
    int64_t single = run_multi(1, pu1, pt1, &s1);
    int64_t total = run_multi(NTHREADS, pu, pt, &s);
    CHECK_EQ(total, single, "threads admitted %lld, one thread %lld", (long long)total,
                 (long long)single);
    CHECK_LT(single, NTHREADS * PER_THREAD, "the limits did bite");
    /* All or nothing: each limit was consumed exactly once per admitted
     * request that named it. */
    sl_limit user, tenant, global;
    CHECK_EQ(sl_limit_init(&user, SL_GCRA, 40, 3600 * NS_PER_SEC, 0), SL_OK);
    CHECK_EQ(sl_limit_init(&tenant, SL_FIXED_WINDOW, 250, 3600 * NS_PER_SEC, 0), SL_OK);
    CHECK_EQ(sl_limit_init(&global, SL_TOKEN_BUCKET, 1500, 3600 * NS_PER_SEC, 0), SL_OK);
    sl_decision d;
    char k[16];
    for (int u = 0; u < USERS; u++) {
        int n = snprintf(k, sizeof k, "u%d", u);
        CHECK_EQ(sl_store_peek(s, k, (size_t)n, &user, 1000 * NS_PER_SEC, 0, &d), SL_OK);
        CHECK_EQ(40 - d.remaining, atomic_load(&pu[u]), "user %d", u);
    }
    for (int t = 0; t < TENANTS; t++) {
        int n = snprintf(k, sizeof k, "t%d", t);
        CHECK_EQ(sl_store_peek(s, k, (size_t)n, &tenant, 1000 * NS_PER_SEC, 0, &d), SL_OK);
        CHECK_EQ(250 - d.remaining, atomic_load(&pt[t]), "tenant %d", t);
    }
    CHECK_EQ(sl_store_peek(s, "global", 6, &global, 1000 * NS_PER_SEC, 0, &d), SL_OK);
    CHECK_EQ(1500 - d.remaining, total);
    CHECK_EQ(sl_store_debug_check(s), 0);
    sl_store_free(s);
    sl_store_free(s1);
}

typedef struct lease_arg {
    sl_store *s;
    const sl_limit *l;
    atomic_int *held;
    atomic_int *max_held;
    int id;
} lease_arg;

static void *lease_worker(void *p)
{
    lease_arg *a = p;
    int64_t now = 1000 * NS_PER_SEC;
    for (int i = 0; i < 3000; i++) {
        sl_decision d;
        CHECK_EQ(sl_store_take(a->s, "pool", 4, a->l, now, 1, &d), SL_OK);
        if (!d.allowed)
            continue;
        int h = atomic_fetch_add(a->held, 1) + 1;
        int m = atomic_load(a->max_held);
        while (h > m && !atomic_compare_exchange_weak(a->max_held, &m, h))
            ;
        atomic_fetch_sub(a->held, 1);
        CHECK_EQ(sl_store_release(a->s, "pool", 4, a->l, now, d.lease_id), 1);
    }
    return NULL;
}

static void leases_never_exceed_the_limit(void)
{
    sl_limit l;
    CHECK_EQ(sl_limit_init(&l, SL_CONCURRENCY, 3, 3600 * NS_PER_SEC, 0), SL_OK);
    sl_store *s = new_store(0);
    atomic_int held = 0, max_held = 0;
    pthread_t t[NTHREADS];
    lease_arg a[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        a[i] = (lease_arg){s, &l, &held, &max_held, i};
        pthread_create(&t[i], NULL, lease_worker, &a[i]);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    CHECK_LEQ(atomic_load(&max_held), 3);
    CHECK_GT(atomic_load(&max_held), 0);
    sl_store_free(s);
}

/* Takes with a moving clock, sweeps, stats and snapshots all at once: no
 * data race (ThreadSanitizer), invariants hold, the snapshot loads. */
typedef struct mixed_arg {
    sl_store *s;
    const sl_limit *l;
    int id;
    atomic_int *stop;
} mixed_arg;

static void *mixed_worker(void *p)
{
    mixed_arg *a = p;
    test_rng rng = {(uint64_t)a->id + 100};
    char key[24];
    int64_t now = NS_PER_SEC;
    for (int i = 0; i < 30000; i++) {
        now += test_range(&rng, 0, 20000);
        int n = snprintf(key, sizeof key, "m%d", (int)test_range(&rng, 0, 5000));
        sl_decision d;
        switch (test_range(&rng, 0, 9)) {
        case 0: sl_store_reset(a->s, key, (size_t)n); break;
        case 1: sl_store_peek(a->s, key, (size_t)n, a->l, now, 1, &d); break;
        default: CHECK_EQ(sl_store_take(a->s, key, (size_t)n, a->l, now, 1, &d), SL_OK);
        }
    }
    return NULL;
}

static void snapshots_sweeps_and_takes_together(void)
{
    sl_limit l;
    CHECK_EQ(sl_limit_init(&l, SL_GCRA, 10, 100 * NS_PER_MS, 0), SL_OK);
    sl_store *s = new_store(4);
    pthread_t t[NTHREADS];
    mixed_arg a[NTHREADS];
    atomic_int stop = 0;
    for (int i = 0; i < NTHREADS; i++) {
        a[i] = (mixed_arg){s, &l, i, &stop};
        pthread_create(&t[i], NULL, mixed_worker, &a[i]);
    }
    char path[] = "/tmp/sl_mt_snap_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(sl_store_snapshot_save(s, path, NS_PER_SEC, 0), SL_OK);
        sl_store_sweep(s, NS_PER_SEC + 300 * NS_PER_MS, 256);
        sl_store_stats st;
        sl_store_get_stats(s, &st);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    CHECK_EQ(sl_store_debug_check(s), 0);
    sl_store *b = new_store(0);
    CHECK_EQ(sl_store_snapshot_load(b, path, NS_PER_SEC, 0, NULL), SL_OK);
    unlink(path);
    sl_store_free(b);
    sl_store_free(s);
}

/* Takes on keys that are there run without the shard's lock; everything
 * else takes it and waits for them. Here readers take from resident keys
 * while one thread inserts, resets, sweeps (which frees pages and moves
 * records to compact them) and grows the index on the same shards: every
 * resident key still admits exactly its capacity, and ThreadSanitizer sees
 * no race. */
enum { RESIDENT = 300, RESIDENT_BURST = 40 };

typedef struct resident_arg {
    sl_store *s;
    const sl_limit *l;
    int id;
    int64_t admitted;
    atomic_int *stop;
} resident_arg;

static void *resident_reader(void *p)
{
    resident_arg *a = p;
    test_rng rng = {(uint64_t)a->id + 500};
    char key[24];
    while (!atomic_load(a->stop)) {
        int n = snprintf(key, sizeof key, "r%d", (int)test_range(&rng, 0, RESIDENT - 1));
        const void *keys[1] = {key};
        size_t lens[1] = {(size_t)n};
        sl_store_prefetch(a->s, keys, lens, 1); /* reads the shard as a take does */
        /* Three in a row, so that the thread's last take's record is used,
         * and must not be once the record has moved. The time stands still
         * for the resident keys: nothing refills. */
        for (int i = 0; i < 3; i++) {
            sl_decision d;
            if (CHECK_EQ(sl_store_take(a->s, key, (size_t)n, a->l, 1000 * NS_PER_SEC, 1, &d), SL_OK) &&
                d.allowed)
                a->admitted++;
        }
    }
    return NULL;
}

static void *resident_churner(void *p)
{
    resident_arg *a = p;
    sl_limit brief;
    CHECK_EQ(sl_limit_init(&brief, SL_TOKEN_BUCKET, 5, 10 * NS_PER_MS, 0), SL_OK);
    char key[24];
    for (int round = 0; round < 6; round++) {
        /* Many new keys: inserts, index growth, new pages. */
        for (int i = 0; i < 4000; i++) {
            int n = snprintf(key, sizeof key, "c%d.%d", round, i);
            sl_decision d;
            CHECK_EQ(sl_store_take(a->s, key, (size_t)n, &brief, 1000 * NS_PER_SEC, 1, &d), SL_OK);
        }
        /* Most of them go: records freed, pages emptied and compacted. */
        for (int i = 0; i < 4000; i++)
            if (i % 8) {
                int n = snprintf(key, sizeof key, "c%d.%d", round, i);
                sl_store_reset(a->s, key, (size_t)n);
            }
        sl_store_sweep(a->s, 1000 * NS_PER_SEC, 1u << 20);
    }
    atomic_store(a->stop, 1);
    return NULL;
}

static void readers_beside_lock_holders_in(unsigned shards)
{
    sl_limit l;
    CHECK_EQ(sl_limit_init(&l, SL_GCRA, RESIDENT_BURST, 3600 * NS_PER_SEC, 0), SL_OK);
    sl_store *s = new_store(shards);
    char key[24];
    for (int k = 0; k < RESIDENT; k++) { /* the resident keys, each with one take gone */
        int n = snprintf(key, sizeof key, "r%d", k);
        sl_decision d;
        CHECK_EQ(sl_store_take(s, key, (size_t)n, &l, 1000 * NS_PER_SEC, 1, &d), SL_OK);
    }
    atomic_int stop = 0;
    pthread_t t[NTHREADS];
    resident_arg a[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        a[i] = (resident_arg){s, &l, i, 0, &stop};
        pthread_create(&t[i], NULL, i == 0 ? resident_churner : resident_reader, &a[i]);
    }
    int64_t total = 0;
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(t[i], NULL);
        total += a[i].admitted;
    }
    /* Drain what is left, then count: every resident key gave exactly its burst. */
    for (int k = 0; k < RESIDENT; k++) {
        int n = snprintf(key, sizeof key, "r%d", k);
        sl_decision d;
        do {
            CHECK_EQ(sl_store_take(s, key, (size_t)n, &l, 1000 * NS_PER_SEC, 1, &d), SL_OK);
            total += d.allowed;
        } while (d.allowed);
    }
    CHECK_EQ(total, (int64_t)RESIDENT * (RESIDENT_BURST - 1), "%u shards: %lld admitted", shards,
             (long long)total);
    CHECK_EQ(sl_store_debug_check(s), 0);
    sl_store_free(s);
}

/* In 16 shards the index stays small and readers lock records; in one
 * shard the churn grows it past SL_RECORD_LOCK_GROUPS and back, and readers
 * lock groups (the way changes under the shard's lock). */
static void readers_beside_lock_holders(void)
{
    readers_beside_lock_holders_in(16);
    readers_beside_lock_holders_in(1);
}

/* A key's state never sees time go back: the key's first take is at the
 * newest time, then threads take it at older times (workers read the clock
 * once per batch, so a take can arrive with a time older than the take
 * before it). Each is decided at the newest time the store has seen, so the
 * admitted takes see every remaining from burst-1 down to 0 once, as one
 * thread at one time would; decided at their own older times, each would
 * owe a little more and one remaining would be skipped. */
enum { CLOCK_BURST = 20000 };

typedef struct clock_arg {
    sl_store *s;
    const sl_limit *l;
    int64_t now;
    atomic_int *seen; /* CLOCK_BURST counters, one per remaining */
    pthread_barrier_t *start;
} clock_arg;

static void *clock_worker(void *p)
{
    clock_arg *a = p;
    pthread_barrier_wait(a->start);
    for (int i = 0; i < CLOCK_BURST / NTHREADS; i++) {
        sl_decision d;
        if (sl_store_take(a->s, "k", 1, a->l, a->now, 1, &d) != SL_OK) {
            CHECK(false, "a take failed");
            break;
        }
        if (d.allowed && CHECK(d.remaining >= 0 && d.remaining < CLOCK_BURST))
            atomic_fetch_add(&a->seen[d.remaining], 1);
    }
    return NULL;
}

static void time_never_goes_back_on_a_key(void)
{
    sl_limit l; /* one an hour: the burst is all there is */
    CHECK_EQ(sl_limit_init(&l, SL_GCRA, CLOCK_BURST, 3600 * NS_PER_SEC * CLOCK_BURST, 0), SL_OK);
    sl_store *s = new_store(0);
    static atomic_int seen[CLOCK_BURST];
    for (int i = 0; i < CLOCK_BURST; i++)
        atomic_store(&seen[i], 0);
    const int64_t newest = 1000 * NS_PER_SEC;
    sl_decision d;
    CHECK_EQ(sl_store_take(s, "k", 1, &l, newest, 1, &d), SL_OK);
    CHECK(d.allowed && d.remaining == CLOCK_BURST - 1);
    atomic_store(&seen[CLOCK_BURST - 1], 1);
    pthread_t t[NTHREADS];
    clock_arg a[NTHREADS];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, NTHREADS);
    for (int i = 0; i < NTHREADS; i++) {
        a[i] = (clock_arg){s, &l, newest - (i + 1) * NS_PER_MS, seen, &start};
        pthread_create(&t[i], NULL, clock_worker, &a[i]);
    }
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start);
    int wrong = 0, first = -1;
    for (int r = 0; r < CLOCK_BURST; r++)
        if (atomic_load(&seen[r]) != 1 && wrong++ == 0)
            first = r;
    CHECK_EQ(wrong, 0, "%d remaining values not seen exactly once, the first %d (seen %d times)",
             wrong, first, first >= 0 ? atomic_load(&seen[first]) : 0);
    sl_store_free(s);
}

/* More threads at once than there are reader slots (256): those without a
 * slot take the shard's lock every time, beside the others' lock-free
 * takes; slots of exited threads are handed out again. One key, exactly
 * its capacity admitted. */
enum { CROWD = 300, CROWD_TAKES = 20 };

typedef struct crowd_arg {
    sl_store *s;
    const sl_limit *l;
    atomic_llong *admitted;
    pthread_barrier_t *start;
} crowd_arg;

static void *crowd_worker(void *p)
{
    crowd_arg *a = p;
    pthread_barrier_wait(a->start);
    for (int i = 0; i < CROWD_TAKES; i++) {
        sl_decision d;
        if (CHECK_EQ(sl_store_take(a->s, "crowd", 5, a->l, 1000 * NS_PER_SEC, 1, &d), SL_OK) &&
            d.allowed)
            atomic_fetch_add(a->admitted, 1);
    }
    return NULL;
}

static void more_threads_than_reader_slots(void)
{
    sl_limit l;
    CHECK_EQ(sl_limit_init(&l, SL_GCRA, 2500, 3600 * NS_PER_SEC, 0), SL_OK);
    sl_store *s = new_store(0);
    for (int round = 0; round < 2; round++) { /* the second round reuses the slots */
        static pthread_t t[CROWD];
        atomic_llong admitted = 0;
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, CROWD);
        crowd_arg a = {s, &l, &admitted, &start};
        int started = 0;
        for (int i = 0; i < CROWD; i++)
            if (CHECK_EQ(pthread_create(&t[i], NULL, crowd_worker, &a), 0))
                started++;
        if (started < CROWD) /* cannot happen but on a starved machine: do not hang */
            return;
        for (int i = 0; i < CROWD; i++)
            pthread_join(t[i], NULL);
        pthread_barrier_destroy(&start);
        CHECK_EQ(atomic_load(&admitted), round == 0 ? 2500 : 0, "round %d", round);
    }
    CHECK_EQ(sl_store_debug_check(s), 0);
    sl_store_free(s);
}

/* Lanes: two threads insert their keys at once, so that without lanes
 * their records would alternate in the shards' pages. No cache line may
 * hold records of both (each take writes its record: such a line would
 * move between the cores on every take), before a sweep's compaction and
 * after it. */
enum { LANE_KEYS = 3000 };

typedef struct lane_arg {
    sl_store *s;
    const sl_limit *l;
    int id;
    pthread_barrier_t *start;
} lane_arg;

static void lane_key(int id, int i, unsigned char key[16])
{
    uint64_t hi = 0x6c616e65u + (uint64_t)id, lo = (uint64_t)i;
    memcpy(key, &hi, 8);
    memcpy(key + 8, &lo, 8);
}

static void *lane_worker(void *p)
{
    lane_arg *a = p;
    pthread_barrier_wait(a->start);
    for (int i = 0; i < LANE_KEYS; i++) {
        unsigned char key[16];
        sl_decision d;
        lane_key(a->id, i, key);
        CHECK_EQ(sl_store_take(a->s, key, sizeof key, a->l, 1000 * NS_PER_SEC, 1, &d), SL_OK);
    }
    return NULL;
}

/* Cache lines holding records of both threads' keys. */
static long lines_shared(sl_store *s, const sl_limit *l)
{
    enum { TABLE = 1 << 16 };
    static uintptr_t line[TABLE];
    static unsigned char owners[TABLE];
    memset(line, 0, sizeof line);
    memset(owners, 0, sizeof owners);
    size_t bytes = 8 + l->state_size + 16; /* meta, state, 16-byte key */
    long shared = 0;
    for (int id = 0; id < 2; id++) {
        for (int i = 0; i < LANE_KEYS; i++) {
            unsigned char key[16];
            lane_key(id, i, key);
            const char *rec = sl_store_debug_record(s, key, sizeof key);
            if (!CHECK(rec != NULL, "thread %d key %d", id, i))
                return -1;
            for (uintptr_t ln = (uintptr_t)rec / 64; ln <= ((uintptr_t)rec + bytes - 1) / 64; ln++) {
                size_t j = (size_t)(ln * 0x9E3779B97F4A7C15u >> 48);
                while (line[j] && line[j] != ln)
                    j = (j + 1) % TABLE;
                line[j] = ln;
                if (owners[j] && !(owners[j] & (1u << id)))
                    shared++;
                owners[j] |= (unsigned char)(1u << id);
            }
        }
    }
    return shared;
}

static void lanes_keep_two_threads_records_apart(void)
{
    sl_limit l;
    /* Nothing expires in the test's time: every key stays. */
    CHECK_EQ(sl_limit_init(&l, SL_GCRA, 10, 3600 * NS_PER_SEC, 0), SL_OK);
    sl_store *s = new_store(0);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 2);
    pthread_t t[2];
    lane_arg a[2] = {{s, &l, 0, &start}, {s, &l, 1, &start}};
    for (int i = 0; i < 2; i++)
        CHECK_EQ(pthread_create(&t[i], NULL, lane_worker, &a[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start);
    CHECK_EQ(lines_shared(s, &l), 0, "after the inserts");
    sl_store_sweep(s, 1000 * NS_PER_SEC, SIZE_MAX);
    CHECK_EQ(lines_shared(s, &l), 0, "after a sweep");
    CHECK_EQ(sl_store_debug_check(s), 0);
    sl_store_free(s);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv; /* ctest passes Criterion's --jobs; there is nothing to choose here */
    static const struct {
        const char *name;
        void (*run)(void);
    } tests[] = {
        {"one_key_admits_what_one_thread_admits", one_key_admits_what_one_thread_admits},
        {"many_keys_admit_exactly_their_capacity", many_keys_admit_exactly_their_capacity},
        {"multi_limit_takes_across_shards_match_one_thread", multi_limit_takes_across_shards_match_one_thread},
        {"leases_never_exceed_the_limit", leases_never_exceed_the_limit},
        {"snapshots_sweeps_and_takes_together", snapshots_sweeps_and_takes_together},
        {"readers_beside_lock_holders", readers_beside_lock_holders},
        {"time_never_goes_back_on_a_key", time_never_goes_back_on_a_key},
        {"more_threads_than_reader_slots", more_threads_than_reader_slots},
        {"lanes_keep_two_threads_records_apart", lanes_keep_two_threads_records_apart},
    };
    for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        int before = atomic_load(&check_failures);
        tests[i].run();
        printf("[%s] mt_store::%s\n", atomic_load(&check_failures) == before ? "PASS" : "FAIL",
               tests[i].name);
    }
    return atomic_load(&check_failures) ? 1 : 0;
}
