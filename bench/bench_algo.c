/*
 * bench_algo: nanoseconds per decision for each algorithm on a hot state
 * (one key, in cache): the cost of the pure core, with nothing around it.
 *
 *   build/bench/bench_algo [iterations [name]]   (default 20 000 000, every case)
 *
 * With a name, only the cases whose label starts with it run (for
 * `valgrind --tool=callgrind`, which counts instructions exactly).
 *
 * Each run takes at twice the limit's rate, so about half the decisions
 * admit and half reject, with `now` advancing as it would in a server. The
 * figure is the thread's CPU time over the loop divided by the iterations;
 * pin it (taskset -c 1) and compare runs, not single numbers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice.h"

/* The thread's CPU time: on a shared machine, wall time would also count the
 * time other processes had the core. */
static int64_t clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef struct bench_case {
    const char *label;
    sl_algorithm algorithm;
    int64_t limit, period_ns, burst, cost;
} bench_case;

static const bench_case cases[] = {
    {"gcra 1000/s", SL_GCRA, 1000, 1000000000, 0, 1},
    {"gcra 7/s (fractional T)", SL_GCRA, 7, 1000000000, 0, 1},
    {"gcra 7/s cost 3", SL_GCRA, 7, 1000000000, 30, 3},
    {"token_bucket 1000/s", SL_TOKEN_BUCKET, 1000, 1000000000, 0, 1},
    {"token_bucket 7/s", SL_TOKEN_BUCKET, 7, 1000000000, 0, 1},
    {"leaky_bucket 1000/s", SL_LEAKY_BUCKET, 1000, 1000000000, 0, 1},
    {"fixed_window 1000/s", SL_FIXED_WINDOW, 1000, 1000000000, 0, 1},
    {"sliding_window 1000/s", SL_SLIDING_WINDOW, 1000, 1000000000, 0, 1},
    {"sliding_log 1000/s", SL_SLIDING_LOG, 1000, 1000000000, 0, 1},
    {"concurrency 100 (take+release)", SL_CONCURRENCY, 100, 1000000000, 0, 1},
};

int main(int argc, char **argv)
{
    long iterations = argc > 1 ? atol(argv[1]) : 20000000;
    const char *only = argc > 2 ? argv[2] : NULL;
    if (iterations <= 0 || argc > 3) {
        fprintf(stderr, "usage: bench_algo [iterations > 0 [case name prefix]]\n");
        return 2;
    }
    printf("%-32s %10s %10s %8s\n", "algorithm", "ns/op", "Mops/s", "admit%");
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const bench_case *bc = &cases[c];
        if (only && strncmp(bc->label, only, strlen(only)) != 0)
            continue;
        sl_limit l;
        if (sl_limit_init(&l, bc->algorithm, bc->limit, bc->period_ns, bc->burst) != SL_OK) {
            fprintf(stderr, "%s: bad limit\n", bc->label);
            return 1;
        }
        void *state = aligned_alloc(64, (sl_state_size(&l) + 63) / 64 * 64);
        memset(state, 0, sl_state_size(&l));
        /* two takes per emission interval: half admitted */
        int64_t step = bc->period_ns / bc->limit / 2 * bc->cost;
        int64_t now = 1000000000;
        long admitted = 0;
        sl_decision d;
        int64_t t0 = clock_ns();
        for (long i = 0; i < iterations; i++) {
            now += step;
            sl_take(&l, state, now, bc->cost, &d);
            admitted += d.allowed;
            if (bc->algorithm == SL_CONCURRENCY && d.allowed)
                sl_lease_release(&l, state, now, d.lease_id);
        }
        int64_t t1 = clock_ns();
        double ns = (double)(t1 - t0) / (double)iterations;
        printf("%-32s %10.2f %10.1f %7.1f%%\n", bc->label, ns, 1000.0 / ns,
               100.0 * (double)admitted / (double)iterations);
        free(state);
    }
    return 0;
}
