/*
 * rng.h: the simulator's pseudo-random numbers (xoshiro256**, seeded by
 * splitmix64): the same seed gives the same stream on every machine, so that
 * a simulation is reproduced byte for byte. Shared by the traffic
 * generators, the CLI's service model and its benchmark's key choice.
 */
#ifndef SLUICE_SIM_RNG_H
#define SLUICE_SIM_RNG_H

#include <stdint.h>

typedef struct sim_rng {
    uint64_t s[4];
} sim_rng;

/* Seeds the generator from one 64-bit seed: the same seed, the same stream. */
void sim_rng_seed(sim_rng *r, uint64_t seed);
/* The next 64 random bits. */
uint64_t sim_rng_next(sim_rng *r);
/* A double uniform in (0, 1]: never 0, so that log() of it is finite. */
double sim_rng_unit(sim_rng *r);
/* An integer uniform in [0, n), n > 0, without modulo bias. */
uint64_t sim_rng_below(sim_rng *r, uint64_t n);

#endif
