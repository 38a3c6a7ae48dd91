/*
 * share.h: one node's share of a limit that n nodes enforce apart, with no
 * coordination (sluiced --split N, and the local limiter a fleet falls back
 * on when its store is down). Internal to libsluice; pure.
 */
#ifndef SL_SHARE_H
#define SL_SHARE_H

#include <stdint.h>

#include "sluice.h"

/* The most nodes a limit is shared between. */
#define SL_SHARE_NODES_MAX 1000000

/*
 * Fills *share with what one of `nodes` nodes enforces so that all of them
 * together admit no more than *whole would alone:
 *
 * - a rate (GCRA, CL.THROTTLE's, the token and leaky buckets) is divided
 *   exactly: limit / nodes per period when nodes divides the limit, else the
 *   limit per nodes periods (100 a minute over 3 nodes: 100 per 3 minutes
 *   each). The burst is divided and rounded down.
 * - a window's limit (fixed and sliding windows, the sliding log) and a
 *   concurrency limit are divided and rounded down; the window is kept.
 *
 * What is rounded down is at least 1, so that a node can admit at all: a
 * burst or a window's limit below `nodes` lets each node take one, `nodes`
 * at once across the fleet, more than *whole would. Carry and calendar
 * alignment are kept. nodes 1 copies *whole. Returns SL_OK, SL_ERR_ARGUMENT
 * for nodes outside [1, SL_SHARE_NODES_MAX], or the error building the share
 * met (never for a *whole that sl_limit_init or sl_limit_init_cell filled).
 * share may be whole.
 */
int sl_limit_share(const sl_limit *whole, int64_t nodes, sl_limit *share);

#endif /* SL_SHARE_H */
