/*
 * share.c: one node's share of a limit (share.h).
 */
#include "algo/share.h"

static int64_t sl_share_floor(int64_t v, int64_t nodes)
{
    int64_t s = v / nodes;
    return s > 0 ? s : 1;
}

/* A rate of `limit` per `period` divided by `nodes`: *limit, *period as
 * they are to be. The division is exact but for a period too long to be
 * multiplied, where the limit is rounded down instead. */
static void sl_share_rate(int64_t nodes, int64_t period_max, int64_t *limit, int64_t *period)
{
    int64_t longer;
    if (*limit % nodes == 0)
        *limit /= nodes;
    else if (!__builtin_mul_overflow(*period, nodes, &longer) && longer <= period_max)
        *period = longer;
    else
        *limit = sl_share_floor(*limit, nodes);
}

int sl_limit_share(const sl_limit *whole_in, int64_t nodes, sl_limit *share)
{
    if (nodes < 1 || nodes > SL_SHARE_NODES_MAX)
        return SL_ERR_ARGUMENT;
    /* A copy, so that share may be whole_in. */
    const sl_limit w = *whole_in, *whole = &w;
    if (nodes == 1) {
        *share = w;
        return SL_OK;
    }
    int64_t limit = whole->limit, period = whole->period_ns, burst = whole->burst;
    int rc;
    if (whole->flags & SL_LIMIT_CELL) {
        /* CL.THROTTLE's period is whole seconds. */
        int64_t period_s = period / 1000000000;
        sl_share_rate(nodes, SL_SPAN_MAX / 1000000000, &limit, &period_s);
        return sl_limit_init_cell(share, sl_share_floor(burst, nodes) - 1, limit, period_s);
    }
    switch (whole->algorithm) {
    case SL_GCRA:
    case SL_TOKEN_BUCKET:
    case SL_LEAKY_BUCKET:
        sl_share_rate(nodes, SL_SPAN_MAX, &limit, &period);
        burst = sl_share_floor(burst, nodes);
        break;
    default:
        limit = sl_share_floor(limit, nodes);
        burst = 0;
        break;
    }
    rc = sl_limit_init(share, whole->algorithm, limit, period, burst);
    if (rc == SL_OK && (whole->flags & SL_LIMIT_CARRY))
        rc = sl_limit_carry(share);
    if (rc == SL_OK && (whole->months || whole->utc_offset_ns || whole->local_offset_ns))
        rc = sl_limit_align_day(share, whole->months, whole->reset_day, whole->utc_offset_ns,
                                whole->local_offset_ns - whole->utc_offset_ns);
    return rc;
}
