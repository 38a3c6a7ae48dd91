/*
 * algo.h: the table of algorithms, internal to libsluice.
 *
 * Each algorithm lives in one file of src/algo/ and fills one entry of
 * sl_algos[]. Every function here is pure: no clock, allocation, lock or I/O.
 * The generic entry points in algo.c validate the inputs once (cost >= 0,
 * 0 <= now <= SL_TIME_MAX), so an algorithm's take cannot fail.
 */
#ifndef SL_ALGO_H
#define SL_ALGO_H

#include <stdbool.h>
#include <stddef.h>

#include "sluice.h"

typedef struct sl_algo_ops {
    const char *name;
    /* Checks and derives what the common part of sl_limit_init has not:
     * returns SL_OK or an SL_ERR_*. */
    int (*init)(sl_limit *l);
    size_t (*state_size)(const sl_limit *l);
    /* Decides a take of `cost` at `now`; writes *state only when `commit`
     * (a peek passes false, and then *state is never written). */
    void (*take)(const sl_limit *l, void *state, int64_t now, int64_t cost, bool commit,
                 sl_decision *d);
    int64_t (*expires_at)(const sl_limit *l, const void *state);
    void (*rebase)(void *state, size_t size, int64_t delta_ns);
    /* Only for the algorithms whose state size follows the limit (the
     * sliding log, the concurrency limit): writes into `out` (out_size
     * bytes, a state of this algorithm under another limit) what `old`
     * (old_size bytes) holds at `now`, timestamps as they are. Returns SL_OK,
     * or SL_ERR_WRONGTYPE when it does not fit. */
    int (*resize)(const void *old, size_t old_size, void *out, size_t out_size, int64_t now);
    /* Gives back `cost` (> 0) units of a take at `now` (sl_refund's
     * contract, on the algorithm's state: no limit's name in front); the
     * inputs are checked. Returns the units given back, 0 .. cost. NULL for
     * an algorithm that cannot refund (the concurrency limit). */
    int64_t (*refund)(const sl_limit *l, void *state, int64_t now, int64_t cost);
    /* Takes `cost` (> 0) units at `now` whatever the state holds (sl_charge's
     * contract, on the algorithm's state: no limit's name in front), so that
     * what the budget lacked is owed; the inputs are checked. Saturates at
     * the algorithm's bound on a debt (sluice.h). NULL for an algorithm
     * that cannot owe (the sliding log, the concurrency limit). */
    void (*charge)(const sl_limit *l, void *state, int64_t now, int64_t cost);
} sl_algo_ops;

extern const sl_algo_ops sl_gcra_ops;
extern const sl_algo_ops sl_token_bucket_ops;
extern const sl_algo_ops sl_leaky_bucket_ops;
extern const sl_algo_ops sl_fixed_window_ops;
extern const sl_algo_ops sl_sliding_log_ops;
extern const sl_algo_ops sl_sliding_window_ops;
extern const sl_algo_ops sl_concurrency_ops;

/* The leaky bucket's take is GCRA's decision (the same conformance test: a
 * queue only adds the wait, in d->delay_ns), so it lives in gcra.c. */
void sl_leaky_bucket_take(const sl_limit *l, void *state, int64_t now, int64_t cost, bool commit,
                          sl_decision *d);
int64_t sl_gcra_expires_at(const sl_limit *l, const void *state);
void sl_gcra_rebase(void *state, size_t size, int64_t delta_ns);
int64_t sl_gcra_refund(const sl_limit *l, void *state, int64_t now, int64_t cost);
void sl_gcra_charge(const sl_limit *l, void *state, int64_t now, int64_t cost);

/* What sl_take checks of its inputs: SL_OK, or the error it would return. */
int sl_take_check(const sl_limit *l, int64_t now, int64_t cost);

/* sl_take, then sl_state_expires_at of the state it left, with one check of
 * the inputs and one lookup of the algorithm: the keyed store's path for
 * what is not GCRA's common case (that one is inline: algo/gcra.h).
 * *expires_at is set only when SL_OK is returned. */
int sl_take_expiring(const sl_limit *l, void *state, int64_t now, int64_t cost, sl_decision *d,
                     int64_t *expires_at);

/* The table, indexed by sl_algorithm (algo.c). */
extern const sl_algo_ops *const sl_algos[SL_ALGORITHM_COUNT];

/* The algorithm's entry in the table; NULL for an unknown value. Inline:
 * a call here would make every take save its arguments around it. */
static inline const sl_algo_ops *sl_algo_get(sl_algorithm a)
{
    return (unsigned)a < SL_ALGORITHM_COUNT ? sl_algos[a] : NULL;
}

/* A take under a carried limit (SL_LIMIT_CARRY), which has passed
 * sl_take_check: the algorithm's state inside *state to decide on (naming
 * *l in *state first, when `commit` and it named none). When *state names
 * another limit, it is carried over into `scratch` (SL_CARRY_SCRATCH
 * bytes), which is returned, and *kept_expiry gets the expiry of *state as
 * it is: the caller writes the scratch back with sl_carry_commit only when
 * the take admits, so that a refused take leaves the state as it was; and
 * *from the limit *state names (state_size 0 when none can be made of it).
 * (src/algo/carry.c) */
#define SL_CARRY_SCRATCH 64
void *sl_carry_enter(const sl_limit *l, void *state, int64_t now, bool commit, void *scratch,
                     int64_t *kept_expiry, sl_limit *from);
void sl_carry_commit(const sl_limit *l, void *state, const void *scratch);

/* The limit a carried state (size bytes, of `algorithm`) names, and the
 * units it has used under that limit at `now` (0, 0 and 0 for a state never
 * written). Returns SL_OK, or SL_ERR_WRONGTYPE when it names no valid
 * limit. Reads *state only. */
int sl_carry_describe(sl_algorithm algorithm, const void *state, size_t size, int64_t now,
                      int64_t *limit, int64_t *period_ns, int64_t *used);

/* Moves one timestamp by delta, saturating into [0, SL_TIME_MAX]. */
int64_t sl_time_rebase(int64_t t, int64_t delta_ns);

#endif /* SL_ALGO_H */
