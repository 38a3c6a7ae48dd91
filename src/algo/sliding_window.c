/*
 * sliding_window.c: the sliding window counter.
 *
 * Two counters: the units admitted in the current aligned window and in the
 * previous one. The sliding window (now - period, now] holds the nanoseconds
 * now - period + 1 .. now, which overlap period - 1 - elapsed of the previous
 * window's period nanoseconds, `elapsed` being now's offset in the current
 * window. The count over it is estimated as if the previous window's units
 * were spread evenly:
 *
 *     estimate = prev * (period - 1 - elapsed) / period + cur
 *
 * and a take of `cost` is admitted when estimate + cost <= limit, compared
 * exactly as prev * (period - 1 - elapsed) + (cur + cost) * period
 * <= limit * period, without dividing.
 *
 * Error bound (docs/algorithms.md): where the previous window's units were
 * bunched late, the true count over (now - period, now] exceeds the estimate
 * by at most prev * (elapsed + 1) / period, so it never exceeds
 * limit + prev * (elapsed + 1) / period < 2 * limit; and each aligned window
 * holds at most `limit`. Where they were spread evenly, the estimate is the
 * true count.
 *
 * State: the start of the current window and both counts; 24 bytes.
 */
#include "algo/algo.h"
#include "common/arith.h"

typedef struct sl_sliding_window_state {
    int64_t start; /* ns, start of the window `cur` counts */
    int64_t cur;   /* units admitted in [start, start + period) */
    int64_t prev;  /* units admitted in [start - period, start) */
} sl_sliding_window_state;

static int sl_sw_init(sl_limit *l)
{
    l->burst = l->limit;
    return SL_OK;
}

static size_t sl_sw_state_size(const sl_limit *l)
{
    return sizeof(sl_sliding_window_state);
}

static void sl_sw_take(const sl_limit *l, void *state, int64_t now, int64_t cost, bool commit,
                       sl_decision *d)
{
    sl_sliding_window_state *s = state;
    int64_t p = l->period_ns, lim = l->limit;
    int64_t start = s->start, cur = s->cur, prev = s->prev;

    if (cur < 0 || cur > lim || prev < 0 || prev > lim || now < start) {
        cur = prev = 0; /* never seen, or not a state of this limit */
        start = (int64_t)sl_divide(&l->by_period, (uint64_t)now) * p;
    } else if (now - start >= p) {
        if (now - start < 2 * p) { /* the next window: cur becomes prev */
            start += p;
            prev = cur;
        } else {
            start = (int64_t)sl_divide(&l->by_period, (uint64_t)now) * p;
            prev = 0;
        }
        cur = 0;
    }
    if (cur == 0 && prev == 0)
        start = (int64_t)sl_divide(&l->by_period, (uint64_t)now) * p;

    int64_t overlap = p - 1 - (now - start); /* of prev's ns, still in the window */
    /* prev's weighted share, exactly: prev * overlap / p */
    sl_u128 weighted = (sl_u128)(uint64_t)prev * (uint64_t)overlap;
    sl_u128 budget = (sl_u128)(uint64_t)lim * (uint64_t)p;

    d->limit = lim;
    if (cost > lim) {
        d->retry_after_ns = SL_NEVER;
    } else if (weighted + (sl_u128)(uint64_t)(cur + cost) * (uint64_t)p <= budget) {
        d->allowed = true;
        cur += cost;
        if (commit) {
            s->start = start;
            s->cur = cur;
            s->prev = prev;
        }
    } else if (cur + cost <= lim) {
        /* Later in this window prev's share shrinks enough: at the offset e
         * where prev * (p - 1 - e) <= (lim - cur - cost) * p. prev > 0 here. */
        int64_t room = sl_muldiv_floor(lim - cur - cost, p, prev);
        d->retry_after_ns = start + (p - 1 - sl_min64(room, p - 1)) - now;
    } else {
        /* Not before the next window, where cur becomes prev (cur > 0):
         * cur * (p - 1 - e) <= (lim - cost) * p. */
        int64_t room = sl_muldiv_floor(lim - cost, p, cur);
        d->retry_after_ns = start + p + (p - 1 - sl_min64(room, p - 1)) - now;
    }
    int64_t share = weighted <= UINT64_MAX
                        ? (int64_t)sl_divide_ceil(&l->by_period, (uint64_t)weighted)
                        : (int64_t)(weighted / (uint64_t)p) + (weighted % (uint64_t)p != 0);
    d->remaining = sl_max64(lim - cur - share, 0);
    d->reset_after_ns = cur > 0 ? start + 2 * p - now : prev > 0 ? start + p - now : 0;
}

static int64_t sl_sw_expires_at(const sl_limit *l, const void *state)
{
    const sl_sliding_window_state *s = state;
    if (s->cur > 0)
        return sl_add_clamp(s->start, 2 * l->period_ns, SL_TIME_MAX);
    if (s->prev > 0)
        return sl_add_clamp(s->start, l->period_ns, SL_TIME_MAX);
    return 0;
}

static void sl_sw_rebase(void *state, size_t size, int64_t delta_ns)
{
    sl_sliding_window_state *s = state;
    if (size >= sizeof *s && (s->cur != 0 || s->prev != 0))
        s->start = sl_time_rebase(s->start, delta_ns);
}

const sl_algo_ops sl_sliding_window_ops = {
    .name = "sliding_window",
    .init = sl_sw_init,
    .state_size = sl_sw_state_size,
    .take = sl_sw_take,
    .expires_at = sl_sw_expires_at,
    .rebase = sl_sw_rebase,
};
