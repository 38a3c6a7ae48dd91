/*
 * units.h: a span of nanoseconds in the coarser units that replies and
 * headers carry (retry_after_ms, Retry-After's seconds, Redis's PEXPIREAT).
 *
 * Always rounded up: a client that waits the rounded time is never early,
 * and a key never expires while its state still limits. The division
 * leaves room for the one added unit, so no input overflows: INT64_MAX ns
 * is 9223372036854 ms and a part, which rounds up to 9223372036855.
 */
#ifndef SL_COMMON_UNITS_H
#define SL_COMMON_UNITS_H

#include <stdint.h>

/* Whole milliseconds in ns, rounded up; 0 for ns <= 0. */
static inline int64_t sl_ns_ceil_ms(int64_t ns)
{
    return ns <= 0 ? 0 : ns / 1000000 + (ns % 1000000 != 0);
}

/* Whole seconds in ns, rounded up: 1 ns -> 1, 1 s -> 1, 1 s + 1 ns -> 2;
 * 0 for ns <= 0. */
static inline int64_t sl_ns_ceil_s(int64_t ns)
{
    return ns <= 0 ? 0 : ns / 1000000000 + (ns % 1000000000 != 0);
}

#endif /* SL_COMMON_UNITS_H */
