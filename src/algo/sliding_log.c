/*
 * sliding_log.c: the sliding log, exact.
 *
 * Keeps the time of every unit admitted in the last `period`, oldest first,
 * in a ring of `limit` slots. A unit admitted at t counts while
 * now < t + period; a take of `cost` is admitted when the units still counted
 * plus `cost` are at most `limit`. So no interval [s, s + period) ever holds
 * more than `limit` admitted units: exact, at 8 bytes per unit of the limit
 * (capped at SL_SLIDING_LOG_MAX).
 *
 * A take of cost c writes c slots (cost is bounded by the limit, or it is
 * rejected at once).
 *
 * State: count, head, then the ring of `limit` int64 timestamps.
 */
#include <string.h>

#include "algo/algo.h"
#include "common/arith.h"

typedef struct sl_sliding_log_state {
    int64_t count;  /* timestamps held */
    int64_t head;   /* index of the oldest */
    int64_t ring[]; /* `limit` slots, ns, non-decreasing from head */
} sl_sliding_log_state;

static int sl_log_init(sl_limit *l)
{
    if (l->limit > SL_SLIDING_LOG_MAX)
        return SL_ERR_LIMIT;
    l->burst = l->limit;
    return SL_OK;
}

static size_t sl_log_state_size(const sl_limit *l)
{
    return sizeof(sl_sliding_log_state) + (size_t)l->limit * sizeof(int64_t);
}

/* Slot i of the ring, within [0, SL_TIME_MAX]: a take only writes times
 * there, but a state's bytes can come from elsewhere (a module's key can be
 * SET to anything), and every sum below must fit. */
static inline int64_t sl_log_at(const sl_sliding_log_state *s, int64_t i)
{
    int64_t t = s->ring[i];
    return t < 0 ? 0 : t > SL_TIME_MAX ? SL_TIME_MAX : t;
}

static void sl_log_take(const sl_limit *l, void *state, int64_t now, int64_t cost, bool commit,
                        sl_decision *d)
{
    sl_sliding_log_state *s = state;
    int64_t cap = l->limit, p = l->period_ns;
    int64_t count = s->count, head = s->head;

    if (count < 0 || count > cap || head < 0 || head >= cap)
        count = head = 0; /* never seen, or not a state of this limit */
    while (count > 0 && sl_log_at(s, head) <= now - p) { /* drop what has left the window */
        head = head + 1 == cap ? 0 : head + 1;
        count--;
    }

    /* The newest timestamp; a new one is never older (the ring stays sorted
     * even if the clock steps back). */
    int64_t newest = count > 0 ? sl_log_at(s, (head + count - 1) % cap) : 0;
    int64_t stamp = count > 0 ? sl_max64(now, newest) : now;

    d->limit = cap;
    if (cost > cap) {
        d->retry_after_ns = SL_NEVER;
    } else if (count + cost <= cap) {
        d->allowed = true;
        if (cost > 0) {
            if (commit)
                for (int64_t i = 0; i < cost; i++)
                    s->ring[(head + count + i) % cap] = stamp;
            newest = stamp;
            count += cost;
        }
    } else {
        /* The (count + cost - cap)-th oldest must leave first. */
        int64_t oldest = sl_log_at(s, (head + count + cost - cap - 1) % cap);
        d->retry_after_ns = sl_max64(oldest + p - now, 0); /* 0 only for a ring out of order */
    }
    if (commit) {
        s->count = count;
        s->head = head;
    }
    d->remaining = cap - count;
    d->reset_after_ns = count == 0 ? 0 : sl_max64(newest + p - now, 0);
}

/* The newest timestamps go: a take writes its `cost` stamps after every
 * other (never older than the newest), so while no take came after it they
 * are its own. Those the period has left behind are dropped first, as a
 * take drops them: a take whose stamps have left gets nothing back. */
static int64_t sl_log_refund(const sl_limit *l, void *state, int64_t now, int64_t cost)
{
    sl_sliding_log_state *s = state;
    int64_t cap = l->limit, p = l->period_ns;
    int64_t count = s->count, head = s->head;
    if (count <= 0 || count > cap || head < 0 || head >= cap)
        return 0; /* never seen, or not a state of this limit */
    while (count > 0 && sl_log_at(s, head) <= now - p) {
        head = head + 1 == cap ? 0 : head + 1;
        count--;
    }
    int64_t given = sl_min64(cost, count);
    if (given == 0)
        return 0; /* every stamp has left: the state is as good as "never seen" */
    count -= given;
    s->count = count;
    s->head = count == 0 ? 0 : head;
    return given;
}

static int64_t sl_log_expires_at(const sl_limit *l, const void *state)
{
    const sl_sliding_log_state *s = state;
    int64_t cap = l->limit;
    if (s->count <= 0 || s->count > cap || s->head < 0 || s->head >= cap)
        return 0;
    return sl_add_clamp(sl_log_at(s, (s->head + s->count - 1) % cap), l->period_ns, SL_TIME_MAX);
}

static void sl_log_rebase(void *state, size_t size, int64_t delta_ns)
{
    sl_sliding_log_state *s = state;
    if (size < sizeof *s)
        return;
    int64_t cap = (int64_t)((size - sizeof *s) / sizeof(int64_t));
    if (s->count <= 0 || s->count > cap || s->head < 0 || s->head >= cap)
        return;
    for (int64_t i = 0; i < s->count; i++) {
        int64_t *t = &s->ring[(s->head + i) % cap];
        *t = sl_time_rebase(*t, delta_ns);
    }
}

/* Another limit's log: its newest timestamps, as many as this ring holds
 * (the take drops those its own period has left behind). */
static int sl_log_resize(const void *old, size_t old_size, void *out, size_t out_size, int64_t now)
{
    const sl_sliding_log_state *o = old;
    sl_sliding_log_state *n = out;
    memset(out, 0, out_size);
    if (old_size < sizeof *o || out_size <= sizeof *n)
        return SL_ERR_WRONGTYPE;
    int64_t ocap = (int64_t)((old_size - sizeof *o) / sizeof(int64_t));
    int64_t ncap = (int64_t)((out_size - sizeof *n) / sizeof(int64_t));
    if (o->count <= 0 || o->count > ocap || o->head < 0 || o->head >= ocap)
        return SL_OK; /* never seen */
    int64_t keep = sl_min64(o->count, ncap);
    for (int64_t i = 0; i < keep; i++)
        n->ring[i] = o->ring[(o->head + o->count - keep + i) % ocap];
    n->count = keep;
    return SL_OK;
}

const sl_algo_ops sl_sliding_log_ops = {
    .name = "sliding_log",
    .init = sl_log_init,
    .state_size = sl_log_state_size,
    .take = sl_log_take,
    .expires_at = sl_log_expires_at,
    .rebase = sl_log_rebase,
    .resize = sl_log_resize,
    .refund = sl_log_refund,
};
