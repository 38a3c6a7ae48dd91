/*
 * siphash.h: SipHash-2-4 (Aumasson and Bernstein, 2012), a keyed hash that
 * is a pseudorandom function: without the 128-bit key, its outputs cannot be
 * predicted or forged. sluice uses it where a value handed to clients must
 * be unguessable (lease ids), not for hash tables.
 */
#ifndef SL_COMMON_SIPHASH_H
#define SL_COMMON_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* SipHash-2-4 of len bytes at p under key[0..1] (k0, k1). */
uint64_t sl_siphash(const uint64_t key[2], const void *p, size_t len);

#endif
