/*
 * leaky_bucket.c: the leaky bucket as a queue (a shaper).
 *
 * Requests join a queue that drains one unit every T = period / limit. A
 * request is admitted when the queue, with it, holds at most `burst` units'
 * worth of work, and is told how long to wait for its turn: the admitted
 * stream leaves spaced by T. That conformance test is GCRA's (the meter and
 * the queue are the two readings of one leaky bucket), so the state and the
 * decision are GCRA's; the queue only adds d->delay_ns.
 */
#include "algo/algo.h"

static int sl_leaky_init(sl_limit *l)
{
    return SL_OK;
}

static size_t sl_leaky_state_size(const sl_limit *l)
{
    return sl_gcra_ops.state_size(l);
}

const sl_algo_ops sl_leaky_bucket_ops = {
    .name = "leaky_bucket",
    .init = sl_leaky_init,
    .state_size = sl_leaky_state_size,
    .take = sl_leaky_bucket_take,
    .expires_at = sl_gcra_expires_at,
    .rebase = sl_gcra_rebase,
    .refund = sl_gcra_refund, /* the queue's level goes back by cost */
    .charge = sl_gcra_charge, /* the queue's level goes up by cost, past its brim */
};
