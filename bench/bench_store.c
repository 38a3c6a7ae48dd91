/*
 * bench_store: the keyed store's speed and memory.
 *
 *   hot      one key, GCRA, one thread: ns per take
 *   uniform  N keys of 16 bytes, uniformly random: ns per take, and per bare
 *            lookup in the same table (hash, entering the shard as a take
 *            does, probe, compare): the ratio
 *   zipf     the same with a Zipf(0.99) key distribution
 *   threads  distinct keys (100 000, then 1 000 each, each set inserted by
 *            its own thread), 1 thread then 2 threads, thread i on CPU i:
 *            the speedup (median of 15 paired rounds), and the same with a
 *            store per thread
 *   memory   bytes per key after inserting N keys (the store's own count,
 *            and the process's resident memory growth)
 *   flood    distinct keys against a small cap: inserts per second with
 *            eviction
 *   floor    a dependent random load in a buffer the size of the table: what
 *            one cache miss costs on this machine, to read the others by
 *
 * Usage: bench_store [--keys N] [--ops N]   (defaults 1000000 and 2000000, under
 * a minute; the figures in docs/benchmarks.md are at these defaults)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/store_debug.h"

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* CPU time of the process: on a shared machine, wall time also counts
 * the time other processes had the CPU; single-threaded phases report
 * both. */
static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double loadavg(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

static long rss_bytes(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * sysconf(_SC_PAGESIZE);
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Key i: 16 bytes, like an API key id or an IPv6 address. */
static inline void key_of(uint64_t i, unsigned char key[16])
{
    uint64_t a = i * UINT64_C(0x9E3779B97F4A7C15), b = i ^ UINT64_C(0x5bd1e9955bd1e995);
    memcpy(key, &a, 8);
    memcpy(key + 8, &b, 8);
}

static sl_store *new_store(size_t cap)
{
    sl_store_config c = {.max_memory = cap, .seed = 12345};
    sl_store *s;
    if (sl_store_new(&c, &s) != SL_OK) {
        fprintf(stderr, "sl_store_new failed\n");
        exit(1);
    }
    return s;
}

static sl_limit gcra;
static volatile uint64_t sink;

/* One key, over and over: the fastest of five runs of `ops` takes (as the
 * access figures keep the faster of their runs: on a shared machine the
 * slow ones measure the neighbours). */
static void bench_hot(long ops)
{
    sl_store *s = new_store(0);
    unsigned char key[16];
    key_of(1, key);
    sl_decision d;
    int64_t t = 1000000000;
    uint64_t allowed = 0;
    int64_t best = INT64_MAX, best_wall = INT64_MAX, best_algo = INT64_MAX;
    int64_t st[2] = {0, 0};
    for (int rep = 0; rep < 5; rep++) {
        int64_t t0 = now_ns(), c0 = cpu_ns();
        for (long i = 0; i < ops; i++) {
            sl_store_take(s, key, 16, &gcra, t, 1, &d);
            t += 1000;
            allowed += d.allowed;
        }
        int64_t dt = now_ns() - t0, dc = cpu_ns() - c0;
        /* The algorithm alone, on a private state: the store's overhead is
         * the difference. */
        int64_t c1 = cpu_ns();
        for (long i = 0; i < ops; i++) {
            sl_take(&gcra, st, t, 1, &d);
            t += 1000;
            allowed += d.allowed + (sl_state_expires_at(&gcra, st) > 0);
        }
        int64_t da = cpu_ns() - c1;
        if (dc < best)
            best = dc, best_wall = dt;
        if (da < best_algo)
            best_algo = da;
    }
    sink += allowed;
    printf("hot      1 key, GCRA, 1 thread: %6.1f ns/take CPU (%.1f wall); sl_take + "
           "sl_state_expires_at alone %.1f ns CPU (fastest of 5 runs)\n",
           (double)best / (double)ops, (double)best_wall / (double)ops,
           (double)best_algo / (double)ops);
    sl_store_free(s);
}

/* x^-theta for x >= 1, without libm (the benchmarks link libsluice only):
 * ln by atanh series on the mantissa, exp by halving and a Taylor series. */
static double pow_neg(double x, double theta)
{
    int e = 0;
    while (x >= 2.0) {
        x /= 2.0;
        e++;
    }
    double y = (x - 1.0) / (x + 1.0), y2 = y * y, term = y, ln = 0;
    for (int k = 1; k < 40; k += 2) {
        ln += term / k;
        term *= y2;
    }
    double z = -theta * (2.0 * ln + e * 0.69314718055994530942);
    int halvings = 0;
    while (z < -0.5) {
        z /= 2.0;
        halvings++;
    }
    double r = 1.0, t = 1.0;
    for (int k = 1; k < 20; k++) {
        t *= z / k;
        r += t;
    }
    while (halvings--)
        r *= r;
    return r;
}

/* Zipf(theta) over [0, n): inverse CDF by binary search over a table. */
static uint32_t *zipf_indices(long n, long ops, double theta, uint64_t seed)
{
    double *cdf = malloc((size_t)n * sizeof *cdf);
    uint32_t *out = malloc((size_t)ops * sizeof *out);
    double sum = 0;
    for (long i = 0; i < n; i++) {
        sum += pow_neg((double)(i + 1), theta);
        cdf[i] = sum;
    }
    for (long i = 0; i < ops; i++) {
        double u = (double)(rng_next(&seed) >> 11) / 9007199254740992.0 * sum;
        long lo = 0, hi = n - 1;
        while (lo < hi) {
            long mid = (lo + hi) / 2;
            if (cdf[mid] < u)
                lo = mid + 1;
            else
                hi = mid;
        }
        /* Scatter the popular ranks over the key space. */
        out[i] = (uint32_t)(((uint64_t)lo * UINT64_C(2654435761)) % (uint64_t)n);
    }
    free(cdf);
    return out;
}

static uint32_t *uniform_indices(long n, long ops, uint64_t seed)
{
    uint32_t *out = malloc((size_t)ops * sizeof *out);
    for (long i = 0; i < ops; i++)
        out[i] = (uint32_t)(rng_next(&seed) % (uint64_t)n);
    return out;
}

/* Bare lookups and takes over the same key sequence, twice each,
 * interleaved, keeping the faster run of each: on a shared machine this
 * takes the noise out of the ratio better than one long run. */
/* Takes (or, with t NULL, bare lookups) in batches of BATCH keys, each
 * batch prefetched first (sl_store_prefetch), as sluiced runs a pipelined
 * read. */
#define BATCH 16
static void run_batched(sl_store *s, const uint32_t *idx, long ops, int64_t *t, uint64_t *found)
{
    unsigned char keys[BATCH][16];
    const void *kp[BATCH];
    size_t lens[BATCH];
    sl_decision d;
    for (long i = 0; i < ops; i += BATCH) {
        long n = ops - i < BATCH ? ops - i : BATCH;
        for (long j = 0; j < n; j++) {
            key_of(idx[i + j], keys[j]);
            kp[j] = keys[j];
            lens[j] = 16;
        }
        sl_store_prefetch(s, kp, lens, (size_t)n);
        for (long j = 0; j < n; j++) {
            if (t) {
                sl_store_take(s, keys[j], 16, &gcra, (*t)++, 1, &d);
                *found += d.allowed;
            } else {
                *found += sl_store_debug_contains(s, keys[j], 16);
            }
        }
    }
}

static void run_access(sl_store *s, const char *name, const uint32_t *idx, long ops)
{
    unsigned char key[16];
    sl_decision d;
    uint64_t found = 0;
    int64_t lookup = INT64_MAX, take = INT64_MAX, batched = INT64_MAX, t = 2000000000;
    int64_t lookup_batched = INT64_MAX;
    for (int rep = 0; rep < 2; rep++) {
        int64_t c0 = cpu_ns();
        for (long i = 0; i < ops; i++) {
            key_of(idx[i], key);
            found += sl_store_debug_contains(s, key, 16);
        }
        int64_t c1 = cpu_ns();
        for (long i = 0; i < ops; i++) {
            key_of(idx[i], key);
            sl_store_take(s, key, 16, &gcra, t++, 1, &d);
            found += d.allowed;
        }
        int64_t c2 = cpu_ns();
        run_batched(s, idx, ops, &t, &found);
        int64_t c3 = cpu_ns();
        run_batched(s, idx, ops, NULL, &found);
        int64_t c4 = cpu_ns();
        if (c1 - c0 < lookup)
            lookup = c1 - c0;
        if (c2 - c1 < take)
            take = c2 - c1;
        if (c3 - c2 < batched)
            batched = c3 - c2;
        if (c4 - c3 < lookup_batched)
            lookup_batched = c4 - c3;
    }
    sink += found;
    printf("%-8s take %6.1f ns CPU, bare lookup %6.1f ns CPU: ratio %.2f; in prefetched batches "
           "of %d, take %6.1f ns, bare lookup %6.1f ns: ratio %.2f\n",
           name, (double)take / (double)ops, (double)lookup / (double)ops,
           (double)take / (double)lookup, BATCH, (double)batched / (double)ops,
           (double)lookup_batched / (double)ops, (double)batched / (double)lookup_batched);
}

typedef struct thread_arg {
    sl_store *s;
    uint64_t base;
    long keys, ops;
    int64_t ns; /* wall */
} thread_arg;

static void *thread_run(void *p)
{
    thread_arg *a = p;
    unsigned char key[16];
    sl_decision d;
    uint64_t seed = a->base, ok = 0;
    int64_t t0 = now_ns();
    for (long i = 0; i < a->ops; i++) {
        key_of(a->base + rng_next(&seed) % (uint64_t)a->keys, key);
        sl_store_take(a->s, key, 16, &gcra, 3000000000 + i, 1, &d);
        ok += d.allowed;
    }
    a->ns = now_ns() - t0;
    sink += ok;
    return NULL;
}

/* Wall time of one round: thread_run on each of a[0 .. n) at once. */
static int64_t run_threads(thread_arg *a, int n)
{
    pthread_t t[2];
    int64_t t0 = now_ns();
    for (int i = 0; i < n; i++) {
        /* Thread i on CPU i, where there is one: the scheduler moving
         * threads is noise the store has no part in. */
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        cpu_set_t cpus;
        CPU_ZERO(&cpus);
        CPU_SET(i, &cpus);
        if (i < CPU_SETSIZE && sysconf(_SC_NPROCESSORS_ONLN) > i)
            pthread_attr_setaffinity_np(&attr, sizeof cpus, &cpus);
        /* A CPU outside this process's allowed set fails the create: then
         * unpinned. */
        if (pthread_create(&t[i], &attr, thread_run, &a[i]) != 0 &&
            pthread_create(&t[i], NULL, thread_run, &a[i]) != 0) {
            fprintf(stderr, "bench_store: cannot start a thread\n");
            exit(1);
        }
        pthread_attr_destroy(&attr);
    }
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    return now_ns() - t0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Two threads on distinct keys against one: rounds of one thread then two,
 * each round's speedup from its own pair (a shared machine's speed drifts
 * from one second to the next: a pair shares its second), and the median
 * and quartiles of the rounds. The same with a store per thread, which
 * shares nothing, gives the machine's own scaling to read the shared
 * store's by. */
#define THREAD_ROUNDS 15
static void bench_threads(long per, long ops)
{
    sl_store *shared = new_store(0), *own[2] = {new_store(0), new_store(0)};
    double r[2][THREAD_ROUNDS];
    ops = ops / 4 > 1000 ? ops / 4 : 1000;
    for (int mode = 0; mode < 2; mode++) {
        thread_arg a[2] = {{mode ? own[0] : shared, 0, per, ops, 0},
                           {mode ? own[1] : shared, 1u << 30, per, ops, 0}};
        /* Each thread's keys are first taken, so inserted, by that thread,
         * both at once: as a server's workers meet their clients' keys. */
        run_threads(a, 2);
        for (int rep = 0; rep < THREAD_ROUNDS; rep++) {
            double one = (double)run_threads(a, 1);
            double two = (double)run_threads(a, 2);
            r[mode][rep] = 2.0 * one / two;
        }
        qsort(r[mode], THREAD_ROUNDS, sizeof r[mode][0], cmp_double);
    }
    printf("threads  %ld keys each, 2 threads / 1 thread over %d paired rounds: median %.2fx "
           "(quartiles %.2f-%.2f); with a store per thread (nothing shared) %.2fx (%.2f-%.2f)\n",
           per, THREAD_ROUNDS, r[0][THREAD_ROUNDS / 2], r[0][THREAD_ROUNDS / 4],
           r[0][3 * THREAD_ROUNDS / 4], r[1][THREAD_ROUNDS / 2], r[1][THREAD_ROUNDS / 4],
           r[1][3 * THREAD_ROUNDS / 4]);
    sl_store_free(shared);
    sl_store_free(own[0]);
    sl_store_free(own[1]);
}

static void bench_flood(long keys)
{
    const size_t cap = 8u << 20;
    sl_limit l;
    sl_limit_init(&l, SL_GCRA, 100, INT64_C(3600000000000), 0);
    sl_store *s = new_store(cap);
    unsigned char key[16];
    sl_decision d;
    int64_t c0 = cpu_ns();
    for (long i = 0; i < keys; i++) {
        key_of((uint64_t)i + (UINT64_C(1) << 40), key);
        sl_store_take(s, key, 16, &l, 1000000000 + i, 1, &d);
    }
    int64_t dt = cpu_ns() - c0;
    sl_store_stats st;
    sl_store_get_stats(s, &st);
    printf("flood    %ld new keys, cap 8 MiB: %6.1f ns/insert CPU, %llu held, %llu evicted, %llu bytes\n",
           keys, (double)dt / (double)keys, (unsigned long long)st.keys,
           (unsigned long long)st.evictions, (unsigned long long)st.bytes_used);
    sl_store_free(s);
}

/* One dependent random load in `bytes` of memory: a pointer chase over a
 * random cycle, one cache line per step. */
static double chase_ns(size_t bytes)
{
    size_t n = bytes / 64;
    uint64_t *a = malloc(n * 64);
    uint32_t *perm = malloc(n * sizeof *perm);
    uint64_t seed = 9;
    for (size_t i = 0; i < n; i++)
        perm[i] = (uint32_t)i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = rng_next(&seed) % (i + 1);
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        a[(size_t)perm[i] * 8] = (uint64_t)perm[(i + 1) % n] * 8;
    uint64_t p = 0;
    const long steps = 2000000;
    int64_t t0 = now_ns();
    for (long i = 0; i < steps; i++)
        p = a[p];
    double ns = (double)(now_ns() - t0) / (double)steps;
    sink += p;
    free(a);
    free(perm);
    return ns;
}

int main(int argc, char **argv)
{
    long keys = 1000000, ops = 2000000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--keys") && i + 1 < argc)
            keys = atol(argv[++i]);
        else if (!strcmp(argv[i], "--ops") && i + 1 < argc)
            ops = atol(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--keys N] [--ops N]\n", argv[0]);
            return 2;
        }
    }
    if (keys < 1 || ops < 1 || keys > UINT32_MAX)
        return 2;
    /* A generous limit: the benchmark measures the store, and an admitted
     * take writes the state (the more expensive path). */
    sl_limit_init(&gcra, SL_GCRA, 1000000, 1000000000, 0);
    printf("bench_store: %ld keys, %ld ops, load average %.2f on %ld CPUs\n", keys, ops, loadavg(),
           sysconf(_SC_NPROCESSORS_ONLN));
    bench_hot(ops * 5);

    long rss0 = rss_bytes();
    sl_store *s = new_store(0);
    unsigned char key[16];
    sl_decision d;
    int64_t c0 = cpu_ns();
    for (long i = 0; i < keys; i++) {
        key_of((uint64_t)i, key);
        sl_store_take(s, key, 16, &gcra, 1000000000, 1, &d);
    }
    int64_t fill = cpu_ns() - c0;
    sl_store_stats st;
    sl_store_get_stats(s, &st);
    long rss1 = rss_bytes();
    printf("memory   %llu keys (16-byte keys, GCRA): %.1f bytes/key accounted, %.1f bytes/key "
           "resident; insert %.1f ns/key CPU\n",
           (unsigned long long)st.keys, (double)st.bytes_used / (double)st.keys,
           (double)(rss1 - rss0) / (double)st.keys, (double)fill / (double)keys);

    printf("floor    one dependent random load in %.0f MiB: %.1f ns\n",
           (double)st.bytes_used / 1048576.0, chase_ns(st.bytes_used));
    uint32_t *u = uniform_indices(keys, ops, 1);
    run_access(s, "uniform", u, ops);
    free(u);
    uint32_t *z = zipf_indices(keys, ops, 0.99, 2);
    run_access(s, "zipf", z, ops);
    free(z);
    sl_store_free(s);

    /* Distinct keys per thread, working sets that fit in cache, so that the
     * figures show locking and sharing, not DRAM bandwidth: 100 000 keys
     * each (most of L3), and 1 000 each (L1 and L2, where a line that both
     * threads write costs the most). */
    bench_threads(keys < 100000 ? keys : 100000, ops);
    bench_threads(keys < 1000 ? keys : 1000, ops);
    bench_flood(keys);
    return (int)(sink & 0);
}
