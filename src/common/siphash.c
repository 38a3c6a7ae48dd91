/*
 * siphash.c: SipHash-2-4, written from the paper's specification: the state
 * is four 64-bit words initialised from the key and the constant
 * "somepseudorandomlygeneratedbytes"; each 8-byte little-endian message word
 * m is absorbed as v3 ^= m, two SipRounds, v0 ^= m; the last word holds the
 * remaining bytes and the length mod 256 in its top byte; finalisation is
 * v2 ^= 0xff and four SipRounds; the result is v0 ^ v1 ^ v2 ^ v3.
 */
#include "common/siphash.h"

#include <string.h>

static inline uint64_t sl_rotl(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

static inline uint64_t sl_load_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

#define SL_SIPROUND                                                                               \
    do {                                                                                          \
        v0 += v1;                                                                                 \
        v1 = sl_rotl(v1, 13);                                                                     \
        v1 ^= v0;                                                                                 \
        v0 = sl_rotl(v0, 32);                                                                     \
        v2 += v3;                                                                                 \
        v3 = sl_rotl(v3, 16);                                                                     \
        v3 ^= v2;                                                                                 \
        v0 += v3;                                                                                 \
        v3 = sl_rotl(v3, 21);                                                                     \
        v3 ^= v0;                                                                                 \
        v2 += v1;                                                                                 \
        v1 = sl_rotl(v1, 17);                                                                     \
        v1 ^= v2;                                                                                 \
        v2 = sl_rotl(v2, 32);                                                                     \
    } while (0)

uint64_t sl_siphash(const uint64_t key[2], const void *p, size_t len)
{
    const unsigned char *in = p;
    uint64_t v0 = key[0] ^ UINT64_C(0x736f6d6570736575);
    uint64_t v1 = key[1] ^ UINT64_C(0x646f72616e646f6d);
    uint64_t v2 = key[0] ^ UINT64_C(0x6c7967656e657261);
    uint64_t v3 = key[1] ^ UINT64_C(0x7465646279746573);

    size_t whole = len - len % 8;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t m = sl_load_le64(in + i);
        v3 ^= m;
        SL_SIPROUND;
        SL_SIPROUND;
        v0 ^= m;
    }
    unsigned char last[8] = {0};
    memcpy(last, in + whole, len % 8);
    uint64_t m = sl_load_le64(last) | ((uint64_t)(len & 0xff) << 56);
    v3 ^= m;
    SL_SIPROUND;
    SL_SIPROUND;
    v0 ^= m;

    v2 ^= 0xff;
    SL_SIPROUND;
    SL_SIPROUND;
    SL_SIPROUND;
    SL_SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}
