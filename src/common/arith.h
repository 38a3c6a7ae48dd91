/*
 * arith.h: exact integer arithmetic for times and rates.
 *
 * Products of two int64 values can need 126 bits; these helpers take the
 * 64-bit path when the product fits (the common case, one multiply and one
 * divide) and fall back to unsigned __int128 otherwise. Every operand here is
 * non-negative: callers validate that first.
 */
#ifndef SL_COMMON_ARITH_H
#define SL_COMMON_ARITH_H

#include <stdint.h>

#include "sluice.h"

typedef unsigned __int128 sl_u128;

static inline int64_t sl_min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t sl_max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Saturates a 128-bit quotient into [0, INT64_MAX]. */
static inline int64_t sl_sat64(sl_u128 v)
{
    return v > (sl_u128)INT64_MAX ? INT64_MAX : (int64_t)v;
}

/* floor(a * b / c) for a, b >= 0 and c > 0, saturating at INT64_MAX. */
static inline int64_t sl_muldiv_floor(int64_t a, int64_t b, int64_t c)
{
    int64_t p;
    if (!__builtin_mul_overflow(a, b, &p))
        return p / c;
    return sl_sat64((sl_u128)(uint64_t)a * (uint64_t)b / (uint64_t)c);
}

/* ceil(a * b / c) for a, b >= 0 and c > 0, saturating at INT64_MAX. */
static inline int64_t sl_muldiv_ceil(int64_t a, int64_t b, int64_t c)
{
    int64_t p;
    if (!__builtin_mul_overflow(a, b, &p))
        return p / c + (p % c != 0);
    sl_u128 q = (sl_u128)(uint64_t)a * (uint64_t)b;
    return sl_sat64(q / (uint64_t)c + (q % (uint64_t)c != 0));
}

/* a + b saturating into [0, max], for a in [0, max] and any b. */
static inline int64_t sl_add_clamp(int64_t a, int64_t b, int64_t max)
{
    int64_t s;
    if (__builtin_add_overflow(a, b, &s))
        return b > 0 ? max : 0;
    return s < 0 ? 0 : s > max ? max : s;
}

/*
 * Division by an invariant divisor through one multiplication (Granlund and
 * Montgomery, "Division by invariant integers using multiplication", 1994,
 * section 4): for a divisor d fixed at configuration time, floor(n / d) for
 * every 64-bit n, exactly, at the cost of a multiply instead of a divide
 * (a 64-bit divide is the slowest integer instruction, and cannot overlap
 * with the next).
 */
/* sl_divider (in sluice.h): d, magic = floor(2^64 * (2^l - d) / d) + 1 with
 * l = ceil(log2 d), shift1 = min(l, 1), shift2 = max(l - 1, 0). */
static inline void sl_divider_init(sl_divider *v, uint64_t d)
{
    unsigned l = d <= 1 ? 0 : 64 - (unsigned)__builtin_clzll(d - 1);
    sl_u128 num = (((sl_u128)1 << l) - d) << 64;
    v->d = d;
    v->magic = (uint64_t)(num / d) + 1;
    v->shift1 = l < 1 ? (uint8_t)l : 1;
    v->shift2 = l > 1 ? (uint8_t)(l - 1) : 0;
}

/* floor(n / v->d). */
static inline uint64_t sl_divide(const sl_divider *v, uint64_t n)
{
    uint64_t t = (uint64_t)(((sl_u128)v->magic * n) >> 64);
    return (t + ((n - t) >> v->shift1)) >> v->shift2;
}

/* ceil(n / v->d). */
static inline uint64_t sl_divide_ceil(const sl_divider *v, uint64_t n)
{
    uint64_t q = sl_divide(v, n);
    return q + (q * v->d != n);
}

/* Greatest common divisor of two positive numbers (binary: no divisions). */
static inline int64_t sl_gcd(int64_t a, int64_t b)
{
    uint64_t u = (uint64_t)a, v = (uint64_t)b;
    int shift = __builtin_ctzll(u | v);
    u >>= __builtin_ctzll(u);
    do {
        v >>= __builtin_ctzll(v);
        if (u > v) {
            uint64_t t = u;
            u = v;
            v = t;
        }
        v -= u;
    } while (v != 0);
    return (int64_t)(u << shift);
}

#endif /* SL_COMMON_ARITH_H */
