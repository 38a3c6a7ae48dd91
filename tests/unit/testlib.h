/*
 * testlib.h: small helpers shared by the unit tests: a seeded PRNG
 * (splitmix64, so every trace is reproducible from its seed) and a few
 * shorthands.
 */
#ifndef SL_TESTLIB_H
#define SL_TESTLIB_H

#include <stdint.h>
#include <stdlib.h>

#include "sluice.h"

#define NS_PER_SEC INT64_C(1000000000)
#define NS_PER_MS INT64_C(1000000)

typedef struct test_rng {
    uint64_t s;
} test_rng;

static inline uint64_t test_next(test_rng *r)
{
    uint64_t z = (r->s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static inline int64_t test_range(test_rng *r, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(test_next(r) % (uint64_t)(hi - lo + 1));
}

static inline int64_t test_min(int64_t a, int64_t b) { return a < b ? a : b; }

/* A zeroed state for limit l; free() it. */
static inline void *test_state(const sl_limit *l)
{
    return calloc(1, sl_state_size(l));
}

/* Criterion passes a test whose worker LeakSanitizer fails at exit (the
 * test has reported by then), so a test that must not leak asks for the
 * leak check itself, at its end, and asserts the answer (ASan builds
 * only; needs criterion.h included first). */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define test_assert_no_leak() \
    cr_assert_eq(__lsan_do_recoverable_leak_check(), 0, "LeakSanitizer found leaks (above)")
#else
#define test_assert_no_leak() ((void)0)
#endif

#endif
