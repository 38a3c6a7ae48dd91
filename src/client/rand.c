/*
 * rand.c: the random sources the backoff draws from (sluice_client.h).
 *
 * SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
 * generators", OOPSLA 2014): the state moves by an odd constant, the golden
 * ratio in 64 bits, and each state is mixed into an output by two
 * multiply-xorshift rounds. Its period is 2^64 and every output is a
 * bijection of the state, which is all jitter needs.
 *
 * Because the state only ever moves by addition, one shared state serves
 * every thread with one atomic add a draw: the process's default source.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"
#include "sluice_client.h"

#define SL_GOLDEN UINT64_C(0x9e3779b97f4a7c15)

static uint64_t sl_splitmix_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

void sl_rng_seed(sl_rng *r, uint64_t seed)
{
    r->state = seed;
}

uint64_t sl_rng_next(void *rng)
{
    sl_rng *r = rng;
    r->state += SL_GOLDEN;
    return sl_splitmix_mix(r->state);
}

static _Atomic uint64_t sl_default_state;
static pthread_once_t sl_default_once = PTHREAD_ONCE_INIT;

/* Seeds the default source from the kernel's entropy; should getrandom fail
 * (a kernel before 3.17, a seccomp filter), from the clocks and the process
 * id, which at least differ between the clients of a fleet. */
static void sl_default_seed(void)
{
    uint64_t seed;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed) {
        struct timespec a, b;
        clock_gettime(CLOCK_REALTIME, &a);
        clock_gettime(CLOCK_MONOTONIC, &b);
        seed = sl_splitmix_mix((uint64_t)a.tv_sec * 1000000000u + (uint64_t)a.tv_nsec) ^
               sl_splitmix_mix((uint64_t)b.tv_nsec + ((uint64_t)getpid() << 32));
    }
    atomic_store(&sl_default_state, seed);
}

uint64_t sl_rand_default(void *unused)
{
    (void)unused;
    pthread_once(&sl_default_once, sl_default_seed);
    return sl_splitmix_mix(atomic_fetch_add(&sl_default_state, SL_GOLDEN) + SL_GOLDEN);
}

/* Uniform in [lo, hi] (lo <= hi), without the bias of a plain modulo: a draw
 * below 2^64 mod (hi - lo + 1) is drawn again, so that every residue comes
 * from the same number of draws (fewer than one redraw in 2 on average, in
 * the worst case; almost never for the spans a backoff uses). */
int64_t sl_rand_between(sl_rand_fn rand, void *state, int64_t lo, int64_t hi)
{
    if (rand == NULL)
        rand = sl_rand_default;
    uint64_t span = (uint64_t)hi - (uint64_t)lo + 1; /* 0: the whole 2^64 */
    if (span == 0)
        return (int64_t)rand(state);
    uint64_t reject_below = (0 - span) % span;
    uint64_t x;
    do
        x = rand(state);
    while (x < reject_below);
    return (int64_t)((uint64_t)lo + x % span);
}
