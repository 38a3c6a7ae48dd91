/*
 * fixed_window.c: a counter per window of `period`, aligned as the limit
 * says (algo/calendar.h): at multiples of the period on the caller's clock,
 * or, after sl_limit_align, on the wall clock at a UTC offset, weeks from
 * Monday, or calendar months.
 *
 * At most `limit` units are admitted per window, but a caller can spend the
 * whole limit just before a boundary and again just after it: up to 2 * limit
 * in a span of barely more than an instant. Cheap and predictable; pick it
 * when quotas reset on the clock ("1000 a day") rather than to smooth load.
 *
 * State: the start of the window the count belongs to, and the count. A
 * window lasts while start <= now < end, end being sl_window_end(start); a
 * rebased state keeps its own window until it ends, then windows are
 * aligned again.
 *
 * A charge (sl_charge) may count past the limit, up to SL_SPAN_MAX units
 * (it saturates there): every take is then refused until the window ends,
 * and the debt ends with it (a window's count never weighs in the next).
 * A count above SL_SPAN_MAX, or below 0, is no state of this algorithm's.
 */
#include "algo/algo.h"
#include "algo/calendar.h"
#include "common/arith.h"

typedef struct sl_fixed_window_state {
    int64_t start; /* ns */
    int64_t count; /* units admitted in [start, start + period); 0 = never seen;
                      above the limit after a charge, at most SL_SPAN_MAX */
} sl_fixed_window_state;

static int sl_fw_init(sl_limit *l)
{
    l->burst = l->limit;
    return SL_OK;
}

static size_t sl_fw_state_size(const sl_limit *l)
{
    return sizeof(sl_fixed_window_state);
}

static void sl_fw_take(const sl_limit *l, void *state, int64_t now, int64_t cost, bool commit,
                       sl_decision *d)
{
    sl_fixed_window_state *s = state;
    int64_t start = s->start, count = s->count, end = 0;

    /* A start before -SL_TIME_MAX is no take's (a module's key can be SET to
     * anything), and the calendar's arithmetic would overflow on it. */
    if (count <= 0 || count > SL_SPAN_MAX || now < start || start < -SL_TIME_MAX ||
        now >= (end = sl_window_end(l, start))) {
        sl_window_at(l, now, &start, &end);
        count = 0;
    }

    d->limit = l->limit;
    if (cost > l->limit) {
        d->retry_after_ns = SL_NEVER;
    } else if (count + cost <= l->limit) {
        d->allowed = true;
        count += cost;
        if (commit) {
            s->start = start;
            s->count = count;
        }
    } else {
        d->retry_after_ns = end - now;
    }
    d->remaining = sl_max64(l->limit - count, 0);
    d->reset_after_ns = count == 0 ? 0 : end - now;
}

/* Units come back to the window that counted them, while it lasts: once
 * `now` has left it, the count no longer limits anyone, and a later
 * window's count holds none of those units. */
static int64_t sl_fw_refund(const sl_limit *l, void *state, int64_t now, int64_t cost)
{
    sl_fixed_window_state *s = state;
    int64_t count = s->count;
    if (count <= 0 || count > SL_SPAN_MAX || now < s->start || s->start < -SL_TIME_MAX ||
        now >= sl_window_end(l, s->start))
        return 0;
    int64_t given = sl_min64(cost, count);
    s->count = count - given;
    if (s->count == 0)
        s->start = 0; /* "never seen" again */
    return given;
}

/* Units counted in the window `now` is in, whatever the count holds: a new
 * window starts at 0 as a take starts it. */
static void sl_fw_charge(const sl_limit *l, void *state, int64_t now, int64_t cost)
{
    sl_fixed_window_state *s = state;
    int64_t start = s->start, count = s->count, end;
    if (count <= 0 || count > SL_SPAN_MAX || now < start || start < -SL_TIME_MAX ||
        now >= sl_window_end(l, start)) {
        sl_window_at(l, now, &start, &end);
        count = 0;
    }
    s->start = start;
    s->count = cost > SL_SPAN_MAX - count ? SL_SPAN_MAX : count + cost;
}

static int64_t sl_fw_expires_at(const sl_limit *l, const void *state)
{
    const sl_fixed_window_state *s = state;
    return s->count <= 0 ? 0 : sl_min64(sl_window_end(l, s->start), SL_TIME_MAX);
}

static void sl_fw_rebase(void *state, size_t size, int64_t delta_ns)
{
    sl_fixed_window_state *s = state;
    if (size >= sizeof *s && s->count != 0)
        s->start = sl_time_rebase(s->start, delta_ns);
}

const sl_algo_ops sl_fixed_window_ops = {
    .name = "fixed_window",
    .init = sl_fw_init,
    .state_size = sl_fw_state_size,
    .take = sl_fw_take,
    .expires_at = sl_fw_expires_at,
    .rebase = sl_fw_rebase,
    .refund = sl_fw_refund,
    .charge = sl_fw_charge,
};
