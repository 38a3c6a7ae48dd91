/*
 * carry.c: one key under several limits (see "Carried states" in sluice.h).
 *
 * A state carries over to another limit in units: the units it has used at
 * `now` under the limit that wrote it, read from a peek (what the limit
 * admits at once, less what remains), become a take of that many units at
 * `now` on a fresh state of the new limit. The algorithms themselves thus
 * say what "used" and "start with this many used" mean, and a window's new
 * state is aligned the way the algorithm aligns it. Only the sliding log
 * (timestamps) and the concurrency limit (leases) carry what they hold as it
 * is, to a state of their own algorithm.
 */
#include <string.h>

#include "algo/algo.h"
#include "common/arith.h"

/* The limit a carried state names: its algorithm, limit and period, with
 * the largest burst they allow, so that the debt a peek reads is never
 * capped by a burst the state does not name (the units used do not depend
 * on it). */
static int sl_carry_limit(sl_algorithm algorithm, int64_t limit, int64_t period, sl_limit *out)
{
    int rc = sl_limit_init(out, algorithm, limit, period, limit);
    if (rc != SL_OK)
        return rc;
    /* burst * reduced_period / den must stay within SL_SPAN_MAX. */
    sl_u128 most = (sl_u128)(uint64_t)SL_SPAN_MAX * (uint64_t)out->den /
                   (uint64_t)out->reduced_period;
    int64_t burst = most > (sl_u128)SL_SPAN_MAX ? SL_SPAN_MAX : (int64_t)most;
    if (burst <= limit)
        return SL_OK;
    return sl_limit_init(out, algorithm, limit, period, burst);
}

/* The inner state's size under l: sl_state_size less the limit's name. */
static size_t sl_inner_size(const sl_limit *l)
{
    return l->state_size - ((l->flags & SL_LIMIT_CARRY) ? SL_CARRY_BYTES : 0);
}

/* Converts the algorithm's state `fs` under *from into `ts` under *to
 * (inner states: neither begins with a limit's name). */
static int sl_inner_convert(const sl_limit *from, const void *fs, size_t fs_size,
                            const sl_limit *to, void *ts, int64_t now)
{
    const sl_algo_ops *fo = sl_algo_get(from->algorithm), *tops = sl_algo_get(to->algorithm);
    size_t ts_size = sl_inner_size(to);
    if (from->algorithm == to->algorithm && tops->resize)
        return tops->resize(fs, fs_size, ts, ts_size, now);
    if (from->algorithm == SL_CONCURRENCY || to->algorithm == SL_CONCURRENCY)
        return SL_ERR_WRONGTYPE;

    sl_decision d;
    memset(&d, 0, sizeof d);
    fo->take(from, (void *)fs, now, 0, false, &d);
    int64_t used = d.limit - d.remaining;
    memset(ts, 0, ts_size);
    if (used > 0) {
        memset(&d, 0, sizeof d);
        tops->take(to, ts, now, sl_min64(used, to->burst), true, &d);
    }
    return SL_OK;
}

static void sl_carry_name(const sl_limit *l, void *state)
{
    int64_t tag[2] = {l->limit, l->period_ns};
    memcpy(state, tag, sizeof tag);
}

sl_status sl_limit_carry(sl_limit *l)
{
    if (!l || !sl_algo_get(l->algorithm) || l->state_size == 0)
        return SL_ERR_ARGUMENT;
    if (l->algorithm == SL_CONCURRENCY || (l->flags & SL_LIMIT_CELL))
        return SL_ERR_ALGORITHM;
    if (!(l->flags & SL_LIMIT_CARRY)) {
        l->flags |= SL_LIMIT_CARRY;
        l->state_size += SL_CARRY_BYTES;
    }
    return SL_OK;
}

void *sl_carry_enter(const sl_limit *l, void *state, int64_t now, bool commit, void *scratch,
                     int64_t *kept_expiry, sl_limit *from)
{
    int64_t tag[2];
    memcpy(tag, state, sizeof tag);
    unsigned char *inner = (unsigned char *)state + SL_CARRY_BYTES;
    if (tag[0] == l->limit && tag[1] == l->period_ns)
        return inner;
    /* No name: never written (an all-zero state). A sliding log of the same
     * size has the same limit, so only its period differs: its timestamps
     * carry as they are. */
    if ((tag[0] == 0 && tag[1] == 0) || sl_algo_get(l->algorithm)->resize) {
        if (commit)
            sl_carry_name(l, state);
        return inner;
    }
    size_t n = sl_inner_size(l);
    *kept_expiry = 0;
    if (n <= SL_CARRY_SCRATCH && sl_carry_limit(l->algorithm, tag[0], tag[1], from) == SL_OK &&
        sl_inner_size(from) == n && sl_inner_convert(from, inner, n, l, scratch, now) == SL_OK) {
        *kept_expiry = sl_algo_get(l->algorithm)->expires_at(from, inner);
    } else {
        memset(scratch, 0, n < SL_CARRY_SCRATCH ? n : SL_CARRY_SCRATCH); /* a name no limit has */
        from->state_size = 0;
    }
    return scratch;
}

void sl_carry_commit(const sl_limit *l, void *state, const void *scratch)
{
    memcpy((unsigned char *)state + SL_CARRY_BYTES, scratch, sl_inner_size(l));
    sl_carry_name(l, state);
}

sl_status sl_state_convert(const sl_limit *from, const void *from_state, const sl_limit *to,
                           void *to_state, int64_t now)
{
    if (!from || !to || !sl_algo_get(from->algorithm) || !sl_algo_get(to->algorithm))
        return SL_ERR_ARGUMENT;
    if (now < 0 || now > SL_TIME_MAX)
        return SL_ERR_TIME;
    const unsigned char *fs = from_state;
    unsigned char *ts = to_state;
    if (from->flags & SL_LIMIT_CARRY)
        fs += SL_CARRY_BYTES;
    if (to->flags & SL_LIMIT_CARRY) {
        sl_carry_name(to, ts);
        ts += SL_CARRY_BYTES;
    }
    return sl_inner_convert(from, fs, sl_inner_size(from), to, ts, now);
}

sl_status sl_state_adopt(const sl_limit *l, void *out, sl_algorithm old_algorithm, bool old_carried,
                         const void *old, size_t old_size, int64_t now)
{
    const sl_algo_ops *ops = l ? sl_algo_get(l->algorithm) : NULL;
    if (!ops || !sl_algo_get(old_algorithm) || !old || !out)
        return SL_ERR_ARGUMENT;
    if (now < 0 || now > SL_TIME_MAX)
        return SL_ERR_TIME;
    unsigned char *ts = out;
    size_t ts_size = sl_inner_size(l);
    if (l->flags & SL_LIMIT_CARRY) {
        sl_carry_name(l, ts);
        ts += SL_CARRY_BYTES;
    }

    if (old_carried) {
        int64_t tag[2] = {0, 0};
        if (old_size < SL_CARRY_BYTES)
            return SL_ERR_WRONGTYPE;
        memcpy(tag, old, sizeof tag);
        const unsigned char *fs = (const unsigned char *)old + SL_CARRY_BYTES;
        if (tag[0] == 0 && tag[1] == 0) { /* never written */
            memset(ts, 0, ts_size);
            return SL_OK;
        }
        sl_limit from;
        if (sl_carry_limit(old_algorithm, tag[0], tag[1], &from) != SL_OK ||
            sl_inner_size(&from) != old_size - SL_CARRY_BYTES)
            return SL_ERR_WRONGTYPE;
        return sl_inner_convert(&from, fs, old_size - SL_CARRY_BYTES, l, ts, now);
    }

    /* Not carried: the state is read under this limit, as redis-cell reads a
     * key under whatever limit a request brings, and only in its own
     * algorithm. A carried limit (a policy's) reads one of another algorithm
     * as if that algorithm had this limit and period, which is what its
     * states were written under before they named their limit (a snapshot
     * of an earlier version, an ad-hoc take on a policy's key): units carry
     * over rather than a refusal that would never end. */
    if (old_algorithm != l->algorithm && (l->flags & SL_LIMIT_CARRY)) {
        int64_t limit = l->limit;
        if (old_algorithm == SL_SLIDING_LOG) /* its size says its limit */
            limit = old_size > 16 ? (int64_t)((old_size - 16) / sizeof(int64_t)) : 0;
        sl_limit from;
        if (limit <= 0 || sl_carry_limit(old_algorithm, limit, l->period_ns, &from) != SL_OK ||
            sl_inner_size(&from) != old_size)
            return SL_ERR_WRONGTYPE;
        return sl_inner_convert(&from, old, old_size, l, ts, now);
    }
    if (old_algorithm != l->algorithm)
        return SL_ERR_WRONGTYPE;
    if (ops->resize)
        return ops->resize(old, old_size, ts, ts_size, now);
    if (old_size != ts_size)
        return SL_ERR_WRONGTYPE;
    memcpy(ts, old, ts_size);
    return SL_OK;
}

int sl_carry_describe(sl_algorithm algorithm, const void *state, size_t size, int64_t now,
                      int64_t *limit, int64_t *period_ns, int64_t *used)
{
    int64_t tag[2];
    if (size < SL_CARRY_BYTES || !sl_algo_get(algorithm))
        return SL_ERR_WRONGTYPE;
    memcpy(tag, state, sizeof tag);
    *limit = tag[0];
    *period_ns = tag[1];
    *used = 0;
    if (tag[0] == 0 && tag[1] == 0)
        return SL_OK; /* never written */
    sl_limit from;
    if (sl_carry_limit(algorithm, tag[0], tag[1], &from) != SL_OK ||
        sl_inner_size(&from) != size - SL_CARRY_BYTES)
        return SL_ERR_WRONGTYPE;
    sl_decision d;
    memset(&d, 0, sizeof d);
    sl_algo_get(algorithm)->take(&from, (unsigned char *)state + SL_CARRY_BYTES, now, 0, false, &d);
    *used = d.limit - d.remaining;
    return SL_OK;
}
