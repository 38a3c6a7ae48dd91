/*
 * algo.c: the generic entry points of libsluice's algorithms.
 *
 * sl_limit_init turns "limit per period, burst" into an exact fraction once,
 * so that a take never divides by the period; sl_take and its siblings check
 * their inputs once and dispatch through the table below.
 */
#include <string.h>

#include "algo/algo.h"
#include "common/arith.h"

const sl_algo_ops *const sl_algos[SL_ALGORITHM_COUNT] = {
    [SL_GCRA] = &sl_gcra_ops,
    [SL_TOKEN_BUCKET] = &sl_token_bucket_ops,
    [SL_LEAKY_BUCKET] = &sl_leaky_bucket_ops,
    [SL_FIXED_WINDOW] = &sl_fixed_window_ops,
    [SL_SLIDING_LOG] = &sl_sliding_log_ops,
    [SL_SLIDING_WINDOW] = &sl_sliding_window_ops,
    [SL_CONCURRENCY] = &sl_concurrency_ops,
};

const char *sl_algorithm_name(sl_algorithm a)
{
    const sl_algo_ops *ops = sl_algo_get(a);
    return ops ? ops->name : NULL;
}

static char sl_ascii_lower(char ch)
{
    return ch >= 'A' && ch <= 'Z' ? (char)(ch + ('a' - 'A')) : ch;
}

/* Names are matched ignoring ASCII case, as Redis matches its keywords:
 * "GCRA" and "Token_Bucket" are what people type, and no two algorithms'
 * names differ only in case. The folding is by hand, not tolower(), so that
 * the locale cannot change what a name means. */
sl_status sl_algorithm_parse(const char *name, size_t len, sl_algorithm *out)
{
    for (int a = 0; a < SL_ALGORITHM_COUNT; a++) {
        const char *n = sl_algos[a]->name;
        if (strlen(n) != len)
            continue;
        size_t i = 0;
        while (i < len && sl_ascii_lower(name[i]) == n[i])
            i++;
        if (i == len) {
            *out = (sl_algorithm)a;
            return SL_OK;
        }
    }
    return SL_ERR_ALGORITHM;
}

int64_t sl_time_rebase(int64_t t, int64_t delta_ns)
{
    return sl_add_clamp(sl_max64(t, 0), delta_ns, SL_TIME_MAX);
}

/*
 * The rate limit/period as an exact fraction: T = period / limit is kept as
 * reduced_period / den (the fraction in lowest terms), i.e. interval_ns whole
 * nanoseconds plus interval_frac / den; the tolerance tau = burst * T the same
 * way. Limits and bursts are capped at SL_SPAN_MAX so that sums of them fit.
 */
sl_status sl_limit_init(sl_limit *l, sl_algorithm algorithm, int64_t limit, int64_t period_ns,
                        int64_t burst)
{
    const sl_algo_ops *ops = sl_algo_get(algorithm);
    memset(l, 0, sizeof *l);
    if (ops == NULL)
        return SL_ERR_ALGORITHM;
    if (limit <= 0 || limit > SL_SPAN_MAX)
        return SL_ERR_LIMIT;
    if (period_ns <= 0 || period_ns > SL_SPAN_MAX)
        return SL_ERR_PERIOD;
    if (burst < 0 || burst > SL_SPAN_MAX)
        return SL_ERR_BURST;
    if (burst == 0)
        burst = limit;

    int64_t g = sl_gcd(period_ns, limit);
    l->algorithm = algorithm;
    l->limit = limit;
    l->period_ns = period_ns;
    l->burst = burst;
    l->reduced_period = period_ns / g;
    l->den = limit / g;
    l->interval_ns = l->reduced_period / l->den;
    l->interval_frac = l->reduced_period % l->den;

    /* tau = burst * reduced_period / den, as whole ns and a remainder. */
    sl_u128 tau = (sl_u128)(uint64_t)burst * (uint64_t)l->reduced_period;
    sl_u128 tau_ns = tau / (uint64_t)l->den;
    if (tau_ns > (sl_u128)SL_SPAN_MAX)
        return SL_ERR_OVERFLOW;
    l->tolerance_ns = (int64_t)tau_ns;
    l->tolerance_frac = (int64_t)(tau % (uint64_t)l->den);
    sl_divider_init(&l->by_reduced_period, (uint64_t)l->reduced_period);
    sl_divider_init(&l->by_den, (uint64_t)l->den);
    sl_divider_init(&l->by_period, (uint64_t)period_ns);
    int rc = ops->init(l);
    if (rc != SL_OK)
        return rc;
    l->state_size = ops->state_size(l);
    return SL_OK;
}

size_t sl_state_size(const sl_limit *l) { return l->state_size; }

static inline int sl_check_input(const sl_limit *l, int64_t now, int64_t cost)
{
    if (sl_algo_get(l->algorithm) == NULL)
        return SL_ERR_ALGORITHM;
    if (cost < 0)
        return SL_ERR_COST;
    if (now < 0 || now > SL_TIME_MAX)
        return SL_ERR_TIME;
    return SL_OK;
}

int sl_take_check(const sl_limit *l, int64_t now, int64_t cost)
{
    return sl_check_input(l, now, cost);
}

/* A decision under a carried limit (see sl_carry_enter), out of line: the
 * common case stays a call through the table. *expires_at may be NULL.
 * A state that names another limit changes only when the take admits; a
 * refusal then says when the state as it is will have shed enough units
 * under the limit that wrote it. */
static __attribute__((noinline)) void sl_take_carried(const sl_limit *l, void *state, int64_t now,
                                                      int64_t cost, bool commit, sl_decision *d,
                                                      int64_t *expires_at)
{
    unsigned char scratch[SL_CARRY_SCRATCH] __attribute__((aligned(8)));
    const sl_algo_ops *ops = sl_algos[l->algorithm];
    int64_t kept = 0;
    sl_limit from;
    void *in = sl_carry_enter(l, state, now, commit, scratch, &kept, &from);
    ops->take(l, in, now, cost, commit, d);
    int64_t exp = in == (void *)scratch ? kept : ops->expires_at(l, in);
    if (in == (void *)scratch && d->allowed) {
        if (commit) {
            sl_carry_commit(l, state, scratch);
            exp = ops->expires_at(l, scratch);
        }
    } else if (in == (void *)scratch && from.state_size && d->retry_after_ns != SL_NEVER) {
        /* Admitted once the old state has used at most burst - cost units:
         * then it has room for a take of (what it admits at once) - that. */
        const void *old = (const unsigned char *)state + SL_CARRY_BYTES;
        sl_decision f;
        memset(&f, 0, sizeof f);
        ops->take(&from, (void *)old, now, 0, false, &f);
        int64_t need = f.limit - (l->burst - cost);
        memset(&f, 0, sizeof f);
        ops->take(&from, (void *)old, now, sl_max64(need, 0), false, &f);
        if (f.retry_after_ns > d->retry_after_ns)
            d->retry_after_ns = f.retry_after_ns;
        d->reset_after_ns = kept > now ? kept - now : 0;
    }
    if (expires_at)
        *expires_at = exp;
}

sl_status sl_take(const sl_limit *l, void *state, int64_t now, int64_t cost, sl_decision *d)
{
    memset(d, 0, sizeof *d);
    int rc = sl_check_input(l, now, cost);
    if (rc != SL_OK)
        return rc;
    if (__builtin_expect(l->flags & SL_LIMIT_CARRY, 0))
        sl_take_carried(l, state, now, cost, cost > 0, d, NULL);
    else
        sl_algos[l->algorithm]->take(l, state, now, cost, cost > 0, d);
    return SL_OK;
}

sl_status sl_peek(const sl_limit *l, const void *state, int64_t now, int64_t cost, sl_decision *d)
{
    memset(d, 0, sizeof *d);
    int rc = sl_check_input(l, now, cost);
    if (rc != SL_OK)
        return rc;
    /* With commit false the algorithm only reads *state (and a carried
     * state that names another limit is carried over into scratch). */
    if (__builtin_expect(l->flags & SL_LIMIT_CARRY, 0))
        sl_take_carried(l, (void *)state, now, cost, false, d, NULL);
    else
        sl_algos[l->algorithm]->take(l, (void *)state, now, cost, false, d);
    return SL_OK;
}

/* A carried state gets back only what a take under the limit it names took:
 * a state named by another limit has not taken these units under this one
 * (whatever it reads as, carried over), and one never written holds none. */
int64_t sl_refund(const sl_limit *l, void *state, int64_t now, int64_t cost)
{
    int rc = sl_check_input(l, now, cost);
    if (rc != SL_OK)
        return rc;
    const sl_algo_ops *ops = sl_algos[l->algorithm];
    if (!ops->refund)
        return SL_ERR_ALGORITHM;
    if (cost == 0)
        return 0;
    if (l->flags & SL_LIMIT_CARRY) {
        int64_t tag[2];
        memcpy(tag, state, sizeof tag);
        if (tag[0] != l->limit || tag[1] != l->period_ns)
            return 0;
        state = (unsigned char *)state + SL_CARRY_BYTES;
    }
    return ops->refund(l, state, now, cost);
}

/* What a charged state says: remaining and reset_after as a peek of
 * nothing reads them (remaining 0 in debt), retry_after as a peek of one
 * unit does (0 when the next request of one is admitted). Never refused. */
static void sl_charge_describe(const sl_limit *l, const sl_algo_ops *ops, void *inner,
                               int64_t now, sl_decision *d)
{
    sl_decision next;
    memset(&next, 0, sizeof next);
    ops->take(l, inner, now, 0, false, d);
    ops->take(l, inner, now, 1, false, &next);
    d->allowed = true;
    d->retry_after_ns = next.allowed ? 0 : next.retry_after_ns;
    d->delay_ns = 0;
}

/* A carried limit carries the state over first, as a take does: a state
 * named by another limit is converted into units of this one (committed,
 * since a charge always changes the state), then charged. */
sl_status sl_charge(const sl_limit *l, void *state, int64_t now, int64_t cost, sl_decision *d)
{
    memset(d, 0, sizeof *d);
    int rc = sl_check_input(l, now, cost);
    if (rc != SL_OK)
        return rc;
    const sl_algo_ops *ops = sl_algos[l->algorithm];
    if (!ops->charge)
        return SL_ERR_ALGORITHM;
    void *inner = state;
    if (l->flags & SL_LIMIT_CARRY) {
        unsigned char scratch[SL_CARRY_SCRATCH] __attribute__((aligned(8)));
        int64_t kept = 0;
        sl_limit from;
        if (cost == 0) {
            /* Nothing is owed: the state is read as a peek reads it. */
            sl_peek(l, state, now, 0, d);
            sl_decision next;
            sl_peek(l, state, now, 1, &next);
            d->allowed = true;
            d->retry_after_ns = next.allowed ? 0 : next.retry_after_ns;
            d->delay_ns = 0;
            return SL_OK;
        }
        inner = sl_carry_enter(l, state, now, true, scratch, &kept, &from);
        if (inner == (void *)scratch) {
            ops->charge(l, scratch, now, cost);
            sl_carry_commit(l, state, scratch);
            inner = (unsigned char *)state + SL_CARRY_BYTES;
        } else {
            ops->charge(l, inner, now, cost);
        }
    } else if (cost > 0) {
        ops->charge(l, inner, now, cost);
    }
    sl_charge_describe(l, ops, inner, now, d);
    return SL_OK;
}

int sl_take_expiring(const sl_limit *l, void *state, int64_t now, int64_t cost, sl_decision *d,
                     int64_t *expires_at)
{
    memset(d, 0, sizeof *d);
    int rc = sl_check_input(l, now, cost);
    if (rc != SL_OK)
        return rc;
    const sl_algo_ops *ops = sl_algos[l->algorithm];
    if (__builtin_expect(l->flags & SL_LIMIT_CARRY, 0)) {
        sl_take_carried(l, state, now, cost, cost > 0, d, expires_at);
        return SL_OK;
    }
    ops->take(l, state, now, cost, cost > 0, d);
    *expires_at = ops->expires_at(l, state);
    return SL_OK;
}

int64_t sl_state_expires_at(const sl_limit *l, const void *state)
{
    const sl_algo_ops *ops = sl_algo_get(l->algorithm);
    if (ops && (l->flags & SL_LIMIT_CARRY))
        state = (const unsigned char *)state + SL_CARRY_BYTES;
    return ops ? ops->expires_at(l, state) : 0;
}

void sl_state_rebase(sl_algorithm algorithm, void *state, size_t size, int64_t delta_ns)
{
    const sl_algo_ops *ops = sl_algo_get(algorithm);
    if (ops != NULL && delta_ns != 0)
        ops->rebase(state, size, delta_ns);
}
