/*
 * gcra.c: the generic cell rate algorithm (leaky bucket as a meter).
 *
 * State: one theoretical arrival time (TAT), kept exactly as whole
 * nanoseconds plus a fraction frac/den of a nanosecond, because the emission
 * interval T = period / limit is rarely a whole number of nanoseconds
 * (1 s / 7 is not). With tau = burst * T:
 *
 *     start = max(TAT, now)
 *     admit when start + cost*T - now <= tau;  then TAT = start + cost*T
 *
 * TAT - now is the debt: how far ahead of the nominal schedule the key is.
 * remaining = burst - ceil(debt / T); reset_after = debt (until the bucket is
 * full again); a rejected take may retry after start + cost*T - tau - now.
 * This is exactly a token bucket of capacity `burst` refilled `limit` per
 * `period` (token_bucket.c is that bucket, written the obvious way; the tests
 * check that the two agree on every decision).
 */
#include "algo/gcra.h"

/* A duration (ns + frac/den) rounded up to whole nanoseconds. */
static inline int64_t sl_mixed_ceil(int64_t ns, int64_t frac)
{
    return ns + (frac > 0);
}

/* ceil(duration / T) for a duration ns + frac/den: how many whole emission
 * intervals it spans, i.e. ceil((ns*den + frac) / reduced_period),
 * saturated at INT64_MAX (a TAT read from a state past SL_TIME_MAX spans
 * more than an int64 of intervals at 1 ns). */
static int64_t sl_intervals_ceil(const sl_limit *l, int64_t ns, int64_t frac)
{
    uint64_t n;
    if (!__builtin_mul_overflow((uint64_t)ns, (uint64_t)l->den, &n) &&
        !__builtin_add_overflow(n, (uint64_t)frac, &n)) {
        uint64_t q = sl_divide_ceil(&l->by_reduced_period, n);
        return q > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)q;
    }
    sl_u128 v = (sl_u128)(uint64_t)ns * (uint64_t)l->den + (uint64_t)frac;
    sl_u128 p = (sl_u128)(uint64_t)l->reduced_period;
    return sl_sat64(v / p + (v % p != 0));
}

/* GCRA's decision in general: any cost, and an emission interval with a
 * fraction of a nanosecond. With `queue`, an admitted request is also told
 * how long to wait for its turn (the leaky bucket as a queue). Out of line:
 * the common case below then needs few registers. */
static __attribute__((noinline)) void sl_gcra_decide_general(const sl_limit *l, sl_gcra_state *s,
                                                             int64_t now, int64_t cost, bool commit,
                                                             bool queue, sl_decision *d)
{
    int64_t t = s->tat, f = s->frac;

    if (f < 0 || f >= l->den) /* a state written under another rate */
        f = 0;
    if (t > SL_TIME_MAX) { /* no charge's (a module's key can be SET to anything) */
        t = SL_TIME_MAX;
        f = 0;
    }
    if (t < now) {
        t = now;
        f = 0;
    }
    /* More debt than tau is a debt (sl_charge, or a change of limit): every
     * take is refused until time has paid it back below tau - cost * T. */
    bool in_debt =
        t - now > l->tolerance_ns || (t - now == l->tolerance_ns && f > l->tolerance_frac);

    /* debt before this take: (t - now) + f/den */
    int64_t debt_ns = t - now, debt_frac = f;
    d->limit = l->burst;

    if (cost > l->burst) {
        d->allowed = false;
        d->retry_after_ns = SL_NEVER;
    } else {
        /* inc = cost * T, which fits: cost <= burst and burst * T = tau. */
        int64_t inc_ns, inc_frac;
        if (cost == 1) {
            inc_ns = l->interval_ns;
            inc_frac = l->interval_frac;
        } else {
            /* cost * interval_frac can need 128 bits; rarely does. */
            uint64_t m, q;
            if (!__builtin_mul_overflow((uint64_t)cost, (uint64_t)l->interval_frac, &m)) {
                q = sl_divide(&l->by_den, m);
                inc_frac = (int64_t)(m - q * (uint64_t)l->den);
            } else {
                sl_u128 w = (sl_u128)(uint64_t)cost * (uint64_t)l->interval_frac;
                q = (uint64_t)(w / (uint64_t)l->den);
                inc_frac = (int64_t)(w % (uint64_t)l->den);
            }
            inc_ns = cost * l->interval_ns + (int64_t)q;
        }
        int64_t new_ns = debt_ns + inc_ns, new_frac = debt_frac + inc_frac;
        if (new_frac >= l->den) {
            new_frac -= l->den;
            new_ns++;
        }
        d->allowed = new_ns < l->tolerance_ns ||
                     (new_ns == l->tolerance_ns && new_frac <= l->tolerance_frac);
        if (d->allowed) {
            if (queue) /* the caller's turn comes at start = max(TAT, now) */
                d->delay_ns = sl_mixed_ceil(debt_ns, debt_frac);
            if (commit) {
                s->tat = now + new_ns;
                s->frac = new_frac;
            }
            debt_ns = new_ns;
            debt_frac = new_frac;
        } else {
            /* retry when the new debt would have shrunk to tau */
            int64_t r_ns = new_ns - l->tolerance_ns, r_frac = new_frac - l->tolerance_frac;
            if (r_frac < 0) {
                r_frac += l->den;
                r_ns--;
            }
            d->retry_after_ns = sl_mixed_ceil(r_ns, r_frac);
        }
    }

    d->reset_after_ns = sl_mixed_ceil(debt_ns, debt_frac);
    if (in_debt) /* refused: nothing remains */
        d->remaining = 0;
    else if (l->flags & SL_LIMIT_CELL)
        d->remaining = sl_cell_remaining(l, debt_ns);
    else
        d->remaining = l->burst - sl_intervals_ceil(l, debt_ns, debt_frac);
}

/* GCRA's decision, inlined into both takes below with the `queue` branch
 * folded away: the common case (gcra.h) or the general one. */
static inline __attribute__((always_inline)) void
sl_gcra_decide(const sl_limit *l, void *state, int64_t now, int64_t cost, bool commit, bool queue,
               sl_decision *d)
{
    sl_gcra_state *s = state;
    if (sl_gcra_whole(l, cost)) {
        sl_gcra_step st = commit ? sl_gcra_whole_commit(l, s, now) : sl_gcra_whole_step(l, s, now);
        sl_gcra_whole_describe(l, st, queue, d);
        return;
    }
    sl_gcra_decide_general(l, s, now, cost, commit, queue, d);
}

static void sl_gcra_take(const sl_limit *l, void *state, int64_t now, int64_t cost, bool commit,
                         sl_decision *d)
{
    sl_gcra_decide(l, state, now, cost, commit, false, d);
}

void sl_leaky_bucket_take(const sl_limit *l, void *state, int64_t now, int64_t cost, bool commit,
                          sl_decision *d)
{
    sl_gcra_decide(l, state, now, cost, commit, true, d);
}

static int sl_gcra_init(sl_limit *l)
{
    return SL_OK;
}

static size_t sl_gcra_state_size(const sl_limit *l)
{
    return sizeof(sl_gcra_state);
}

int64_t sl_gcra_expires_at(const sl_limit *l, const void *state)
{
    const sl_gcra_state *s = state;
    if (s->tat <= 0)
        return 0;
    /* A TAT beyond the clock's range is no take's (a module's key can be SET
     * to anything): its expiry is the range's end. */
    return s->tat >= SL_TIME_MAX ? SL_TIME_MAX : sl_mixed_ceil(s->tat, s->frac);
}

void sl_gcra_rebase(void *state, size_t size, int64_t delta_ns)
{
    sl_gcra_state *s = state;
    if (size >= sizeof *s && (s->tat != 0 || s->frac != 0))
        s->tat = sl_time_rebase(s->tat, delta_ns);
}

/*
 * A refund moves the TAT back by cost * T, but never before now: the debt a
 * take added has been paid off by the time passed since, as far as it has,
 * and only what is still owed comes back. Worked in units of 1/den ns, where
 * the debt and cost * T = cost * reduced_period are exact integers (below
 * 2^126). A debt beyond tau (a charge's) is given back as any other: the
 * units given back are the whole intervals the debt shrank by; when none,
 * the state stays as it was.
 */
int64_t sl_gcra_refund(const sl_limit *l, void *state, int64_t now, int64_t cost)
{
    sl_gcra_state *s = state;
    int64_t t = s->tat, f = s->frac;
    if (f < 0 || f >= l->den) /* a state written under another rate */
        f = 0;
    if (t < now || (t == now && f == 0))
        return 0; /* no debt left: the take has refilled */
    uint64_t den = (uint64_t)l->den;
    sl_u128 debt = (sl_u128)(uint64_t)(t - now) * den + (uint64_t)f;
    sl_u128 back = (sl_u128)(uint64_t)cost * (uint64_t)l->reduced_period;
    sl_u128 left = back >= debt ? 0 : debt - back;
    int64_t left_ns = (int64_t)(left / den), left_frac = (int64_t)(left % den);

    int64_t given = sl_intervals_ceil(l, t - now, f) - sl_intervals_ceil(l, left_ns, left_frac);
    if (given == 0)
        return 0; /* less than an interval: nothing a take reads changes */
    s->tat = now + (int64_t)(left / den);
    s->frac = (int64_t)(left % den);
    return given;
}

/*
 * A charge moves the TAT to max(TAT, now) + cost * T whatever that makes of
 * the debt, in units of 1/den ns (t * den + f + cost * reduced_period stays
 * below 2^125). The TAT saturates at SL_TIME_MAX: a charge that would carry
 * it further owes only up to there (146 years of the clock), so that every
 * sum a take makes of the debt and a cost stays within int64.
 */
void sl_gcra_charge(const sl_limit *l, void *state, int64_t now, int64_t cost)
{
    sl_gcra_state *s = state;
    int64_t t = s->tat, f = s->frac;
    if (f < 0 || f >= l->den) /* a state written under another rate */
        f = 0;
    if (t > SL_TIME_MAX) {
        t = SL_TIME_MAX;
        f = 0;
    }
    if (t < now) {
        t = now;
        f = 0;
    }
    uint64_t den = (uint64_t)l->den;
    sl_u128 v = (sl_u128)(uint64_t)t * den + (uint64_t)f +
                (sl_u128)(uint64_t)cost * (uint64_t)l->reduced_period;
    if (v >= (sl_u128)(uint64_t)SL_TIME_MAX * den) {
        s->tat = SL_TIME_MAX;
        s->frac = 0;
    } else {
        s->tat = (int64_t)(v / den);
        s->frac = (int64_t)(v % den);
    }
}

const sl_algo_ops sl_gcra_ops = {
    .name = "gcra",
    .init = sl_gcra_init,
    .state_size = sl_gcra_state_size,
    .take = sl_gcra_take,
    .expires_at = sl_gcra_expires_at,
    .rebase = sl_gcra_rebase,
    .refund = sl_gcra_refund,
    .charge = sl_gcra_charge,
};

/*
 * redis-cell's CL.THROTTLE key max_burst count period [quantity]:
 * limit = max_burst + 1, T = period / count computed as redis-cell computes it
 * (nanoseconds through a double, truncated), tau = T * (max_burst + 1).
 */
sl_status sl_limit_init_cell(sl_limit *l, int64_t max_burst, int64_t count, int64_t period_s)
{
    int64_t period_ns, burst, tau;
    if (max_burst < 0 || max_burst >= SL_SPAN_MAX)
        return SL_ERR_BURST;
    if (count <= 0 || count > SL_SPAN_MAX)
        return SL_ERR_LIMIT;
    if (period_s <= 0 || __builtin_mul_overflow(period_s, INT64_C(1000000000), &period_ns) ||
        period_ns > SL_SPAN_MAX)
        return SL_ERR_PERIOD;
    int rc = sl_limit_init(l, SL_GCRA, count, period_ns, 1);
    if (rc != SL_OK)
        return rc;

    int64_t t = (int64_t)((double)period_ns / (double)count);
    if (t < 1000)
        return SL_ERR_RATE;
    burst = max_burst + 1;
    if (__builtin_mul_overflow(t, burst, &tau) || tau > SL_SPAN_MAX)
        return SL_ERR_OVERFLOW;
    l->flags = SL_LIMIT_CELL;
    l->burst = burst;
    l->reduced_period = t;
    l->den = 1;
    l->interval_ns = t;
    l->interval_frac = 0;
    l->tolerance_ns = tau;
    l->tolerance_frac = 0;
    sl_divider_init(&l->by_reduced_period, (uint64_t)t);
    sl_divider_init(&l->by_den, 1);
    sl_divider_init(&l->by_cell_interval_us, (uint64_t)(t / 1000));
    return SL_OK;
}

/* Whole seconds, plus one when the millisecond part is not zero, as
 * redis-cell rounds its reply. */
static int64_t sl_cell_seconds(int64_t ns)
{
    int64_t s = ns / 1000000000;
    return s + ((ns % 1000000000) / 1000000 > 0);
}

void sl_cell_reply(const sl_decision *d, int64_t out[5])
{
    out[0] = d->allowed ? 0 : 1;
    out[1] = d->limit;
    out[2] = d->remaining;
    out[3] = (d->allowed || d->retry_after_ns == SL_NEVER) ? -1 : sl_cell_seconds(d->retry_after_ns);
    out[4] = sl_cell_seconds(d->reset_after_ns);
}
