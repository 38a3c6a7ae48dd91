/*
 * gcra.h: GCRA's state and its common case, inline; internal to libsluice.
 *
 * The common case is a take of one at a rate a whole number of nanoseconds
 * apart (CL.THROTTLE's always is). gcra.c decides it with these functions,
 * and so does the keyed store, inline and in two halves: the state's change
 * under its lock (sl_gcra_whole_commit), the decision after it
 * (sl_gcra_whole_describe). On a key space larger than the caches a take
 * waits for its record to come from memory, and the processor overlaps
 * that wait with the next take's only when little work follows it; a call
 * through the algorithm table and a full decision under the lock were
 * measured to be too much (docs/store.md).
 */
#ifndef SL_ALGO_GCRA_H
#define SL_ALGO_GCRA_H

#include "algo/algo.h"
#include "common/arith.h"

typedef struct sl_gcra_state {
    int64_t tat;  /* whole nanoseconds of the TAT; 0 with frac 0 = never seen */
    int64_t frac; /* the TAT's fraction of a nanosecond, in 1/den units, [0, den) */
} sl_gcra_state;

/* redis-cell's remaining: (tau - debt) / T, both truncated to microseconds,
 * divided and truncated (T is whole nanoseconds in this mode, den = 1;
 * debt <= tau, so nothing here is negative: a debt beyond tau remains 0,
 * which callers say themselves). */
static inline int64_t sl_cell_remaining(const sl_limit *l, int64_t debt_ns)
{
    uint64_t next_us = (uint64_t)(l->tolerance_ns - debt_ns) / 1000;
    return (int64_t)sl_divide(&l->by_cell_interval_us, next_us);
}

/* Is this take GCRA's common case? */
static inline bool sl_gcra_whole(const sl_limit *l, int64_t cost)
{
    return __builtin_expect(l->den == 1 && cost == 1, 1);
}

/* A take in the common case: the key's debt (how far its TAT is ahead of
 * now) before it and after it, and the expiry of the state it leaves, 0 when
 * it changed nothing. Admitted when after <= tau. */
typedef struct sl_gcra_step {
    int64_t debt, after, expires_at;
} sl_gcra_step;

/* The step, without changing the state. (With den 1 every fraction is 0; a
 * state written under another rate is read with its fraction dropped; more
 * debt than tau is a debt (sl_charge) and refuses, as in
 * sl_gcra_decide_general; a TAT past SL_TIME_MAX reads as SL_TIME_MAX, so
 * that debt + T fits.) */
static inline sl_gcra_step sl_gcra_whole_step(const sl_limit *l, const sl_gcra_state *s,
                                              int64_t now)
{
    int64_t t = sl_min64(s->tat, SL_TIME_MAX);
    int64_t debt = t > now ? t - now : 0;
    return (sl_gcra_step){debt, debt + l->interval_ns, 0};
}

/* The step, applied to the state when admitted. */
static inline sl_gcra_step sl_gcra_whole_commit(const sl_limit *l, sl_gcra_state *s, int64_t now)
{
    sl_gcra_step st = sl_gcra_whole_step(l, s, now);
    if (st.after <= l->tolerance_ns) {
        s->tat = now + st.after;
        s->frac = 0;
        st.expires_at = s->tat;
    }
    return st;
}

/* The decision of a step, into a zeroed *d. With `queue` (the leaky bucket
 * as a queue), an admitted take also waits out the debt it found. */
static inline void sl_gcra_whole_describe(const sl_limit *l, sl_gcra_step st, bool queue,
                                          sl_decision *d)
{
    bool allowed = st.after <= l->tolerance_ns;
    int64_t debt = allowed ? st.after : st.debt;
    d->allowed = allowed;
    d->limit = l->burst;
    if (allowed) {
        if (queue)
            d->delay_ns = st.debt;
    } else {
        d->retry_after_ns = st.after - l->tolerance_ns;
    }
    d->reset_after_ns = debt;
    if (__builtin_expect(debt > l->tolerance_ns, 0)) /* in debt: refused, nothing remains */
        d->remaining = 0;
    else
        d->remaining = l->flags & SL_LIMIT_CELL
                           ? sl_cell_remaining(l, debt)
                           : l->burst - (int64_t)sl_divide_ceil(&l->by_reduced_period,
                                                                (uint64_t)debt);
}

#endif /* SL_ALGO_GCRA_H */
