/*
 * client.h: what the files of src/client/ share, internal to libsluice
 * (the public API is include/sluice_client.h).
 */
#ifndef SL_CLIENT_CLIENT_H
#define SL_CLIENT_CLIENT_H

#include <stdint.h>

#include "sluice_client.h"

/* The process's default random source (an sl_rand_fn; its state unused). */
uint64_t sl_rand_default(void *unused);

/* A uniform draw in [lo, hi] (lo <= hi) from rand / state (NULL: the
 * default source), unbiased. */
int64_t sl_rand_between(sl_rand_fn rand, void *state, int64_t lo, int64_t hi);

#endif /* SL_CLIENT_CLIENT_H */
