/*
 * rng.c: xoshiro256** (Blackman and Vigna), seeded by splitmix64.
 */
#include "sim/rng.h"

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

void sim_rng_seed(sim_rng *r, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t sim_rng_next(sim_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double sim_rng_unit(sim_rng *r)
{
    /* 53 random bits, shifted by one so that 0 is excluded and 1 included. */
    return (double)((sim_rng_next(r) >> 11) + 1) * (1.0 / 9007199254740992.0);
}

uint64_t sim_rng_below(sim_rng *r, uint64_t n)
{
    /* Rejection: draw again when the value falls in the incomplete last
     * run of n, so that every residue is equally likely. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t v;
    do
        v = sim_rng_next(r);
    while (v >= limit);
    return v % n;
}
