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

/* Greatest common divisor of two positive numbers. */
static inline int64_t sl_gcd(int64_t a, int64_t b)
{
    while (b != 0) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

#endif /* SL_COMMON_ARITH_H */
