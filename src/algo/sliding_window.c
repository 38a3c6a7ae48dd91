/*
 * sliding_window.c: the sliding window counter.
 *
 * Two counters: the units admitted in the current aligned window and in the
 * previous one (windows as algo/calendar.h places them). With `p` the length
 * of the current window and `elapsed` now's offset in it, the previous
 * window is weighted by the share of the current one still to come,
 * (p - 1 - elapsed) / p, as if its units were spread evenly:
 *
 *     estimate = prev * (p - 1 - elapsed) / p + cur
 *
 * and a take of `cost` is admitted when estimate + cost <= limit, compared
 * exactly as prev * (p - 1 - elapsed) + (cur + cost) * p <= limit * p,
 * without dividing.
 *
 * For a fixed period that weight is the overlap of the sliding window
 * (now - p, now], the nanoseconds now - p + 1 .. now, with the previous
 * window. Calendar months differ in length (28 to 31 days), so the sliding
 * window is defined by proportion instead: it begins as far into the
 * previous window, as a fraction of that window's length, as now is into
 * the current one, and the previous window counts by its overlap with it,
 * which is again the fraction (p - 1 - elapsed) / p of it. Halfway through
 * March it reaches back to halfway through February.
 *
 * Error bound (docs/algorithms.md): where the previous window's units were
 * bunched late, the true count over the sliding window exceeds the estimate
 * by at most prev * (elapsed + 1) / p, so it never exceeds
 * limit + prev * (elapsed + 1) / p < 2 * limit; and each aligned window
 * holds at most `limit`. Where they were spread evenly, the estimate is the
 * true count.
 *
 * State: the start of the current window and both counts; 24 bytes.
 *
 * A charge (sl_charge) may count past the limit, up to SL_SPAN_MAX units
 * (it saturates there). The debt then weighs as any count does: every take
 * is refused in its window, and in the next while its weighted share leaves
 * too little room; it is gone two windows on. A count above SL_SPAN_MAX, or
 * below 0, is no state of this algorithm's.
 */
#include "algo/algo.h"
#include "algo/calendar.h"
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
    int64_t lim = l->limit;
    int64_t start = s->start, cur = s->cur, prev = s->prev, end = 0;

    if (cur < 0 || cur > SL_SPAN_MAX || prev < 0 || prev > SL_SPAN_MAX || now < start ||
        start < -SL_TIME_MAX) {
        cur = prev = 0; /* never seen, or not a state of this limit (or of no take's) */
    } else if (now >= (end = sl_window_end(l, start))) {
        if (now < sl_window_end(l, end)) { /* the next window: cur becomes prev */
            start = end;
            prev = cur;
        } else {
            prev = 0;
        }
        cur = 0;
    }
    if (cur == 0 && prev == 0)
        sl_window_at(l, now, &start, &end);
    else
        end = sl_window_end(l, start);

    int64_t p = end - start;                 /* this window's length */
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
        /* Not before the next window (of length pn), where cur becomes prev
         * (cur > 0): cur * (pn - 1 - e) <= (lim - cost) * pn. */
        int64_t pn = sl_window_end(l, end) - end;
        int64_t room = sl_muldiv_floor(lim - cost, pn, cur);
        d->retry_after_ns = end + (pn - 1 - sl_min64(room, pn - 1)) - now;
    }
    int64_t share = l->months == 0 && weighted <= UINT64_MAX
                        ? (int64_t)sl_divide_ceil(&l->by_period, (uint64_t)weighted)
                        : (int64_t)(weighted / (uint64_t)p) + (weighted % (uint64_t)p != 0);
    d->remaining = sl_max64(lim - cur - share, 0);
    d->reset_after_ns = cur > 0 ? sl_window_end(l, end) - now : prev > 0 ? end - now : 0;
}

/* Units come back to the count of the window the state counts in, while
 * that count still weighs: in its window, and in the next one, where it is
 * the previous window's share. A take writes the state's window, so while
 * no take came after it the units are there; once the count weighs no more,
 * nothing is given back (there is nothing to give). */
static int64_t sl_sw_refund(const sl_limit *l, void *state, int64_t now, int64_t cost)
{
    sl_sliding_window_state *s = state;
    int64_t cur = s->cur, prev = s->prev;
    if (cur <= 0 || cur > SL_SPAN_MAX || prev < 0 || prev > SL_SPAN_MAX || now < s->start ||
        s->start < -SL_TIME_MAX || now >= sl_window_end(l, sl_window_end(l, s->start)))
        return 0;
    int64_t given = sl_min64(cost, cur);
    s->cur = cur - given;
    if (s->cur == 0 && prev == 0)
        s->start = 0; /* "never seen" again */
    return given;
}

/* Units counted in the window `now` is in, whatever the counts hold: the
 * state is moved to now's window first as a take moves it (cur becomes prev
 * in the next window, both go after that). */
static void sl_sw_charge(const sl_limit *l, void *state, int64_t now, int64_t cost)
{
    sl_sliding_window_state *s = state;
    int64_t start = s->start, cur = s->cur, prev = s->prev, end;
    if (cur < 0 || cur > SL_SPAN_MAX || prev < 0 || prev > SL_SPAN_MAX || now < start ||
        start < -SL_TIME_MAX) {
        cur = prev = 0;
    } else if (now >= (end = sl_window_end(l, start))) {
        if (now < sl_window_end(l, end)) {
            start = end;
            prev = cur;
        } else {
            prev = 0;
        }
        cur = 0;
    }
    if (cur == 0 && prev == 0)
        sl_window_at(l, now, &start, &end);
    s->start = start;
    s->prev = prev;
    s->cur = cost > SL_SPAN_MAX - cur ? SL_SPAN_MAX : cur + cost;
}

static int64_t sl_sw_expires_at(const sl_limit *l, const void *state)
{
    const sl_sliding_window_state *s = state;
    if (s->cur > 0)
        return sl_min64(sl_window_end(l, sl_window_end(l, s->start)), SL_TIME_MAX);
    if (s->prev > 0)
        return sl_min64(sl_window_end(l, s->start), SL_TIME_MAX);
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
    .refund = sl_sw_refund,
    .charge = sl_sw_charge,
};
