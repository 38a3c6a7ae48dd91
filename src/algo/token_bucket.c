/*
 * token_bucket.c: the token bucket, written the obvious way.
 *
 * A bucket holds at most `burst` tokens and gains `limit` tokens per `period`,
 * that is den tokens every reduced_period nanoseconds (the rate in lowest
 * terms). A take of `cost` is admitted when the bucket holds at least `cost`
 * tokens, and removes them.
 *
 * State: an anchor time A and the debt D, the tokens missing at A:
 *
 *     tokens(now) = min(burst, burst - D + floor((now - A) * den / reduced_period))
 *
 * Tokens accrue in fractions, so A only moves by whole reduced periods (each
 * credits exactly den tokens) or to `now` when the bucket is full: every
 * number stays an integer and nothing is rounded away. An all-zero state
 * (D = 0) is a full bucket.
 *
 * Takes keep D below burst + den; a charge (sl_charge) may push it further,
 * the tokens then below zero, down to the floor sl_tb_debt_max: as many
 * tokens as accrue in SL_SPAN_MAX nanoseconds, so that the time to repay
 * any debt, plus a cost, stays within SL_SPAN_MAX and every sum of times
 * fits in int64. A D beyond both is no state of this limit's, and reads full.
 */
#include "algo/algo.h"
#include "common/arith.h"

typedef struct sl_token_bucket_state {
    int64_t anchor; /* ns; tokens are counted from here */
    int64_t debt;   /* tokens missing at the anchor, in [0, burst + den), or
                       up to sl_tb_debt_max after a charge */
} sl_token_bucket_state;

static int sl_tb_init(sl_limit *l)
{
    return SL_OK;
}

static size_t sl_tb_state_size(const sl_limit *l)
{
    return sizeof(sl_token_bucket_state);
}

/* Time (ns, rounded up) until `tokens` more tokens have accrued:
 * ceil(tokens * reduced_period / den). */
static inline __attribute__((always_inline)) int64_t sl_tb_time_for(const sl_limit *l,
                                                                    int64_t tokens)
{
    uint64_t n;
    if (!__builtin_mul_overflow((uint64_t)tokens, (uint64_t)l->reduced_period, &n))
        return sl_sat64(l->den == 1 ? n : sl_divide_ceil(&l->by_den, n));
    return sl_muldiv_ceil(tokens, l->reduced_period, l->den);
}

/* Whole tokens accrued over `elapsed` ns: floor(elapsed * den / reduced_period). */
static int64_t sl_tb_accrued(const sl_limit *l, int64_t elapsed)
{
    uint64_t n;
    if (!__builtin_mul_overflow((uint64_t)elapsed, (uint64_t)l->den, &n))
        return sl_sat64(sl_divide(&l->by_reduced_period, n));
    return sl_muldiv_floor(elapsed, l->den, l->reduced_period);
}

/* The most tokens a charge can leave missing: those that accrue in
 * SL_SPAN_MAX ns, floor(SL_SPAN_MAX * den / reduced_period), at most
 * SL_SPAN_MAX, and never less than a take leaves. */
static int64_t sl_tb_debt_max(const sl_limit *l)
{
    int64_t most = sl_min64(sl_muldiv_floor(SL_SPAN_MAX, l->den, l->reduced_period), SL_SPAN_MAX);
    return sl_max64(most, l->burst + l->den);
}

/* Can `debt` be a state of this limit's? The common case costs a compare. */
static inline bool sl_tb_debt_ok(const sl_limit *l, int64_t debt)
{
    return debt >= 0 && (debt <= l->burst + l->den || debt <= sl_tb_debt_max(l));
}

/* The bucket at `now`: refills *a (the anchor) and *debt as a take reads
 * them, and returns the tokens accrued since the anchor that do not yet
 * make a whole reduced period (0 when den is 1). A state that is not one of
 * this limit starts full. */
static inline __attribute__((always_inline)) int64_t sl_tb_refill(const sl_limit *l, int64_t now,
                                                                  int64_t *anchor, int64_t *debt_io)
{
    int64_t a = *anchor, debt = *debt_io;

    /* Not a state of this limit (or bytes no take wrote: a module's key can
     * be SET to anything): start full. */
    if (!sl_tb_debt_ok(l, debt) || a < 0 || a > SL_TIME_MAX) {
        debt = 0;
        a = now;
    }
    /* Refill. If the clock stepped back before the anchor, nothing accrues
     * until it catches up; the anchor never moves back. */
    int64_t elapsed = now > a ? now - a : 0;

    int64_t accrued;
    if (__builtin_expect(l->den == 1, 1)) {
        /* The common case, a token every T whole nanoseconds: tokens accrue
         * by whole periods, so one division refills, nothing is left over,
         * and the times below are products (sl_tb_time_for). */
        int64_t q = debt == 0 ? 0 : (int64_t)sl_divide(&l->by_reduced_period, (uint64_t)elapsed);
        if (q >= debt) {
            a = now;
            debt = 0;
        } else {
            a += q * l->reduced_period;
            debt -= q;
        }
        accrued = 0;
    } else {
        accrued = debt == 0 ? 0 : sl_tb_accrued(l, elapsed);
        if (accrued >= debt) {
            a = now; /* full: the fraction of a token beyond the brim is lost */
            debt = 0;
            accrued = 0;
        } else if (elapsed >= l->reduced_period) {
            /* each whole reduced period credits den tokens */
            int64_t periods = (int64_t)sl_divide(&l->by_reduced_period, (uint64_t)elapsed);
            a += periods * l->reduced_period;
            debt -= periods * l->den;
            accrued -= periods * l->den;
        }
    }
    *anchor = a;
    *debt_io = debt;
    return accrued;
}

static void sl_tb_take(const sl_limit *l, void *state, int64_t now, int64_t cost, bool commit,
                       sl_decision *d)
{
    sl_token_bucket_state *s = state;
    int64_t a = s->anchor, debt = s->debt;
    int64_t cap = l->burst;
    int64_t accrued = sl_tb_refill(l, now, &a, &debt);
    /* Negative after the clock stepped back past a take, and in debt. */
    int64_t tokens = sl_max64(cap - debt + accrued, 0);

    d->limit = cap;
    if (cost > cap) {
        d->allowed = false;
        d->retry_after_ns = SL_NEVER;
    } else if (tokens >= cost) {
        d->allowed = true;
        debt += cost;
        tokens -= cost;
        if (commit) {
            s->anchor = a;
            s->debt = debt;
        }
    } else {
        d->allowed = false;
        d->retry_after_ns = a + sl_tb_time_for(l, debt + cost - cap) - now;
    }
    d->remaining = tokens;
    d->reset_after_ns = debt == 0 ? 0 : a + sl_tb_time_for(l, debt) - now;
}

/* Tokens come back into the bucket, up to its brim: the debt shrinks by
 * cost, but not below what has accrued since the anchor (a full bucket is
 * anchored at now, as a take leaves it). */
static int64_t sl_tb_refund(const sl_limit *l, void *state, int64_t now, int64_t cost)
{
    sl_token_bucket_state *s = state;
    int64_t a = s->anchor, debt = s->debt;
    int64_t accrued = sl_tb_refill(l, now, &a, &debt);
    int64_t missing = debt - accrued; /* tokens below the brim; > 0 unless full */
    if (missing <= 0)
        return 0;
    int64_t given = sl_min64(cost, missing);
    if (given == missing) {
        a = now;
        debt = 0;
    } else {
        debt -= given;
    }
    s->anchor = a;
    s->debt = debt;
    return given;
}

/* Tokens leave the bucket whatever it holds: the debt grows by cost, from
 * the bucket refilled to now, up to sl_tb_debt_max (a charge beyond it owes
 * only that much: the floor saturates). */
static void sl_tb_charge(const sl_limit *l, void *state, int64_t now, int64_t cost)
{
    sl_token_bucket_state *s = state;
    int64_t a = s->anchor, debt = s->debt;
    sl_tb_refill(l, now, &a, &debt);
    int64_t most = sl_tb_debt_max(l);
    s->anchor = a;
    s->debt = cost > most - debt ? sl_max64(most, debt) : debt + cost;
}

static int64_t sl_tb_expires_at(const sl_limit *l, const void *state)
{
    const sl_token_bucket_state *s = state;
    if (s->debt <= 0 || !sl_tb_debt_ok(l, s->debt) || s->anchor < 0 || s->anchor > SL_TIME_MAX)
        return 0;
    return sl_add_clamp(s->anchor, sl_tb_time_for(l, s->debt), SL_TIME_MAX);
}

static void sl_tb_rebase(void *state, size_t size, int64_t delta_ns)
{
    sl_token_bucket_state *s = state;
    if (size >= sizeof *s && s->debt != 0)
        s->anchor = sl_time_rebase(s->anchor, delta_ns);
}

const sl_algo_ops sl_token_bucket_ops = {
    .name = "token_bucket",
    .init = sl_tb_init,
    .state_size = sl_tb_state_size,
    .take = sl_tb_take,
    .expires_at = sl_tb_expires_at,
    .rebase = sl_tb_rebase,
    .refund = sl_tb_refund,
    .charge = sl_tb_charge,
};
