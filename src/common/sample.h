/*
 * sample.h: keep a fraction of events, chosen at random, at the cost of a
 * few instructions per event and no lock: each thread keeps its own
 * sampler (a 64-bit generator's state and a threshold) and keeps an event
 * when the generator's next number is below the threshold.
 *
 * A rate is written as sluiced's --decision-log-sample takes it: a decimal
 * fraction above 0 and at most 1 ("1", "0.01", ".5", at most six decimals)
 * or a percentage ("1%", "0.5%", at most four decimals), and held exactly
 * as parts per million: 1 000 000 keeps every event, 1 keeps one in a
 * million on average.
 *
 * The generator is splitmix64 (Steele, Lea and Flood, "Fast splittable
 * pseudorandom number generators", 2014): one add and a few multiplies and
 * shifts per number; equidistributed enough over 64 bits that the count
 * kept of n events is binomial(n, rate). Seeded by the caller: a fixed
 * seed gives the same choices every run.
 */
#ifndef SL_COMMON_SAMPLE_H
#define SL_COMMON_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_SAMPLE_ALL UINT32_C(1000000) /* parts per million: every event */

typedef struct sl_sampler {
    uint64_t state;
    uint64_t below; /* keep a number below this; unused when all */
    bool all;       /* keep every event, drawing no number */
} sl_sampler;

/*
 * Parses a rate (s, len bytes, not NUL-terminated) as above into *ppm
 * (1 .. SL_SAMPLE_ALL). Returns true, or false for anything else: empty,
 * 0, above 1 (or 100%), more decimals than can be held exactly, a sign,
 * spaces, an exponent.
 */
bool sl_sample_parse(const char *s, size_t len, uint32_t *ppm);

/* Writes ppm as the shortest decimal fraction that parses back to it
 * ("0.01", "1") into out (at least 16 bytes); returns out. */
char *sl_sample_format(uint32_t ppm, char *out);

/* A sampler keeping ppm parts per million (1 .. SL_SAMPLE_ALL; more keeps
 * every event), its generator seeded with seed. */
void sl_sampler_init(sl_sampler *s, uint32_t ppm, uint64_t seed);

/* The generator's next number. */
static inline uint64_t sl_sampler_next(sl_sampler *s)
{
    uint64_t z = (s->state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* Whether to keep this event. */
static inline bool sl_sampler_keep(sl_sampler *s)
{
    return s->all || sl_sampler_next(s) < s->below;
}

#endif /* SL_COMMON_SAMPLE_H */
