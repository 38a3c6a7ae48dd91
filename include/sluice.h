/*
 * sluice.h: the public API of libsluice.
 *
 * A rate limiter answers one question: may this caller do this now? libsluice
 * answers it with pure functions. Each algorithm keeps a few bytes of *state*
 * per key; a take reads the state, the limit and the current time, and writes
 * the new state and a *decision*. Nothing here reads a clock, allocates, locks
 * or does I/O: the caller passes `now` and owns the memory.
 *
 * Time is an int64 count of nanoseconds on a clock the caller chooses (usually
 * CLOCK_MONOTONIC), in [0, SL_TIME_MAX]. All arithmetic is on integers, so a
 * decision is exact and the same on every machine.
 *
 * How GCRA sees time (T = period / limit, the emission interval; tau = burst * T):
 *
 *            now                         TAT                   now + tau
 *   ----------|---------------------------|-------------------------|------>
 *             |<---- debt: TAT - now ---->|                         |
 *             |<--------------------- tolerance tau --------------->|
 *
 *   A request of cost c is admitted when max(TAT, now) + c*T <= now + tau,
 *   and then TAT := max(TAT, now) + c*T. The distance from TAT to now + tau,
 *   in units of T, is the number of requests still available right now.
 *   That is exactly a token bucket of capacity `burst` that refills `limit`
 *   tokens per `period`, stored as one timestamp.
 *
 * States: a state is sl_state_size(limit) bytes, 8-byte aligned, and an
 * all-zero state means "never seen": zeroed memory is a full bucket.
 */
#ifndef SLUICE_H
#define SLUICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SLUICE_VERSION "0.1.0"

/* Marks the functions of the API. libsluice is built with hidden visibility,
 * so that libsluice.so exports these and nothing else: its internal
 * functions stay free to change without breaking a program linked to it. */
#if defined(__GNUC__) && __GNUC__ >= 4
#define SL_API __attribute__((visibility("default")))
#else
#define SL_API
#endif

/* Time limits. `now` must lie in [0, SL_TIME_MAX] (about 146 years of
 * nanoseconds); a period, and burst * period / limit, at most SL_SPAN_MAX
 * (about 73 years). These bounds make every sum of times fit in an int64. */
#define SL_TIME_MAX ((int64_t)((UINT64_C(1) << 62) - 1))
#define SL_SPAN_MAX ((int64_t)((UINT64_C(1) << 61) - 1))

/* retry_after_ns when no wait will ever do: the cost exceeds what the limit can
 * admit at once. */
#define SL_NEVER INT64_MAX

/* The largest limit of the algorithms whose state grows with the limit. */
#define SL_SLIDING_LOG_MAX 65536  /* 8 bytes per admitted unit: 512 KiB a key */
#define SL_CONCURRENCY_MAX 65536  /* 24 bytes per lease held */

/* Every result code of libsluice. Negative values are errors; sl_strerror()
 * says what was wrong. A rejection is not an error: it is a decision. */
typedef enum sl_status {
    SL_OK = 0,
    SL_ERR_LIMIT = -1,     /* limit is zero, negative, or too large for the algorithm */
    SL_ERR_PERIOD = -2,    /* period is zero, negative or longer than SL_SPAN_MAX */
    SL_ERR_BURST = -3,     /* burst is negative */
    SL_ERR_COST = -4,      /* cost is negative */
    SL_ERR_OVERFLOW = -5,  /* burst * period / limit does not fit in SL_SPAN_MAX */
    SL_ERR_TIME = -6,      /* now is negative or above SL_TIME_MAX */
    SL_ERR_ALGORITHM = -7, /* unknown algorithm */
    SL_ERR_RATE = -8,      /* the rate rounds to zero time between requests (redis-cell mode) */
    SL_ERR_NOMEM = -9,     /* out of memory, or the store's memory cap is reached */
    SL_ERR_KEY = -10,      /* key is empty or longer than the store allows */
    SL_ERR_IO = -11,       /* a file could not be read or written */
    SL_ERR_CORRUPT = -12,  /* a snapshot is truncated or fails its checksum */
    SL_ERR_VERSION = -13,  /* a snapshot was written by an unknown format version */
    SL_ERR_ARGUMENT = -14, /* any other invalid argument */
    SL_ERR_WRONGTYPE = -15, /* the key holds a state another limit's units cannot be read from */
    SL_ERR_UNAVAILABLE = -16, /* the store did not answer in time, or is down */
    SL_ERR_UNSUPPORTED = -17, /* this store cannot do that (a snapshot of Redis, say) */
} sl_status;

/* A fixed English message for a status, never NULL; static storage. */
SL_API const char *sl_strerror(int status);

/* The HTTP status that reports `status` to a client: 400 for bad input,
 * 503 for a store that cannot serve, 500 otherwise (200 for SL_OK). */
SL_API int sl_http_status(int status);

typedef enum sl_algorithm {
    SL_GCRA = 0,          /* leaky bucket as a meter: one timestamp */
    SL_TOKEN_BUCKET,      /* tokens and the time of the last refill */
    SL_LEAKY_BUCKET,      /* leaky bucket as a queue: admits with a delay */
    SL_FIXED_WINDOW,      /* a counter per aligned window */
    SL_SLIDING_LOG,       /* exact: one timestamp per admitted unit */
    SL_SLIDING_WINDOW,    /* two counters, the previous weighted by overlap */
    SL_CONCURRENCY,       /* leases with a TTL: limit = max in flight, period = TTL */
    SL_ALGORITHM_COUNT
} sl_algorithm;

/* The algorithm's name as used in requests and configs ("gcra",
 * "token_bucket", "leaky_bucket", "fixed_window", "sliding_log",
 * "sliding_window", "concurrency"); NULL for an unknown value. */
SL_API const char *sl_algorithm_name(sl_algorithm a);

/* Looks up an algorithm by its name (len bytes, not necessarily
 * NUL-terminated, ASCII case ignored). Returns SL_OK and sets *out, or
 * SL_ERR_ALGORITHM. */
SL_API sl_status sl_algorithm_parse(const char *name, size_t len, sl_algorithm *out);

/*
 * A divisor d prepared when a limit is filled, so that a take divides by d
 * with a multiply and two shifts instead of a divide instruction (slow, and
 * the next cannot start before it ends): floor(n / d) is
 * (t + ((n - t) >> shift1)) >> shift2, where t is the high 64 bits of
 * magic * n, exactly for every 64-bit n. sl_limit holds its dividers by value,
 * which is why the type is here; only libsluice reads or writes the fields.
 */
typedef struct sl_divider {
    uint64_t d, magic;
    uint8_t shift1, shift2;
} sl_divider;

/*
 * A limit: `limit` units per `period_ns`, at most `burst` at once.
 * Fill it with sl_limit_init(); the derived fields are the rate as an exact
 * fraction, computed once so that a take never divides by the period.
 */
typedef struct sl_limit {
    sl_algorithm algorithm;
    uint32_t flags;        /* SL_LIMIT_CELL: redis-cell's arithmetic, see below */
    int64_t limit;         /* units per period (for SL_CONCURRENCY: leases in flight) */
    int64_t period_ns;     /* window length or refill period (SL_CONCURRENCY: lease TTL) */
    int64_t burst;         /* bucket capacity or queue size, in units */

    /* Derived. The emission interval T = period / limit is kept exactly as
     * reduced_period / den, that is interval_ns + interval_frac / den
     * nanoseconds, and the tolerance tau = burst * T likewise. */
    int64_t reduced_period; /* period / gcd(period, limit) */
    int64_t den;            /* limit / gcd(period, limit) */
    int64_t interval_ns, interval_frac;
    int64_t tolerance_ns, tolerance_frac;
    sl_divider by_reduced_period, by_den, by_period;
    sl_divider by_cell_interval_us; /* SL_LIMIT_CELL only */
    size_t state_size;              /* what sl_state_size() answers */

    /* Where fixed and sliding windows begin (sl_limit_align); all zero
     * from sl_limit_init: windows at multiples of the period on the
     * caller's clock. */
    int64_t months;          /* > 0: windows of this many calendar months */
    int64_t reset_day;       /* months > 0: the day of the month they begin on,
                                2-31 (a shorter month's last day); 0: the 1st */
    int64_t utc_offset_ns;   /* local wall time = UTC + this */
    int64_t local_offset_ns; /* local wall time = now + this (clock + UTC offset) */
    int64_t phase_ns;        /* windows begin where now = phase (mod period) */
} sl_limit;

#define SL_LIMIT_CELL 1u
#define SL_LIMIT_CARRY 2u /* states carry the limit they were written under: sl_limit_carry */

/*
 * Fills *l for `algorithm` with `limit` units per `period_ns`, and at most
 * `burst` at once; burst 0 means "same as limit". Fixed and sliding windows
 * and the sliding log ignore burst (their limit is per window).
 * Returns SL_OK, or an SL_ERR_* naming the invalid parameter; *l is then
 * unusable. This prepares the divisions a take would otherwise do, so it
 * costs several takes: keep a limit, or cache them by their parameters.
 */
SL_API sl_status sl_limit_init(sl_limit *l, sl_algorithm algorithm, int64_t limit,
                               int64_t period_ns, int64_t burst);

/*
 * Fills *l with redis-cell's CL.THROTTLE arithmetic: GCRA with
 * burst = max_burst + 1, T = period / count truncated to a whole nanosecond
 * as redis-cell truncates it, and `remaining` computed from microseconds as
 * redis-cell computes it. Returns SL_ERR_* for negative or zero arguments, and
 * SL_ERR_RATE when T truncates to less than one microsecond.
 */
SL_API sl_status sl_limit_init_cell(sl_limit *l, int64_t max_burst, int64_t count,
                                    int64_t period_s);

/*
 * Carried states: one key, several limits.
 *
 * A state is read under the limit a take brings. For a request's own
 * (ad-hoc) limit that is redis-cell's rule: the state holds a time (a TAT, a
 * window's start), and another limit reads the same time with its own rate.
 * A debt of 60 s at 100 a minute is still 60 s at 10 000 a minute: a key
 * upgraded from 100 to 10 000 a minute would have nothing left.
 *
 * A limit marked with sl_limit_carry() (sluiced marks every policy's, so that
 * tiers and reloads keep what each key has used) makes its states begin with
 * SL_CARRY_BYTES naming the limit that wrote them:
 *
 *     +------------------+--------------------+---------------------------+
 *     | limit (int64)    | period_ns (int64)  | the algorithm's state     |
 *     +------------------+--------------------+---------------------------+
 *
 * A take under a carried limit that finds another limit named there first
 * carries the state over *in units*: it reads how many units the state has
 * used at `now` under the limit that wrote it (rounded up to a whole unit),
 * and starts the new limit's state with that many used at `now`. So after 100
 * requests at 100 a minute, 10 000 a minute has 9 900 left; after 5 000 at
 * 10 000 a minute, 100 a minute has none left, and refills as 100 a minute
 * does. Units carry across algorithms too (a sliding log's own timestamps
 * carry to a sliding log), except to or from a concurrency limit, whose
 * leases are not units over time: sl_limit_carry refuses it.
 * The burst is not named: a change of burst alone carries units as they are.
 */
#define SL_CARRY_BYTES 16

/* Marks *l (from sl_limit_init) as carried: sl_state_size grows by
 * SL_CARRY_BYTES. Returns SL_OK, or SL_ERR_ALGORITHM for a concurrency limit
 * or one from sl_limit_init_cell (whose states redis-cell's users share). */
SL_API sl_status sl_limit_carry(sl_limit *l);

/*
 * Writes into `to_state` (sl_state_size(to) bytes) the state under *to that
 * has used, at `now`, the units `from_state` has used under *from (each
 * limit carried or not; a carried *to_state names *to). Leaves *from_state
 * unchanged. Returns SL_OK, SL_ERR_WRONGTYPE when units cannot be carried
 * (to or from a concurrency limit, or leases that no longer fit), or
 * SL_ERR_TIME.
 */
SL_API sl_status sl_state_convert(const sl_limit *from, const void *from_state, const sl_limit *to,
                                  void *to_state, int64_t now);

/*
 * What a store does when a key's state was written under another algorithm
 * or state size than *l has: `old` (old_size bytes) of old_algorithm,
 * carried or not. A carried old state converts (sl_state_convert from the
 * limit it names); an uncarried one of the same algorithm is read under *l
 * (a sliding log keeps its newest timestamps, a concurrency limit its leases
 * while they fit); an uncarried one of another algorithm converts under a
 * carried *l as if it had *l's limit and period (states of policies from
 * before they named their limit); anything else is SL_ERR_WRONGTYPE, so
 * that a request cannot get a fresh budget by naming another algorithm.
 * Writes sl_state_size(l) bytes into out on SL_OK.
 */
SL_API sl_status sl_state_adopt(const sl_limit *l, void *out, sl_algorithm old_algorithm,
                                bool old_carried, const void *old, size_t old_size, int64_t now);

/* ---- windows on the wall clock and the calendar ---- */

/* A mean Gregorian month (365.2425 days / 12): what a period of months is
 * for the algorithms that meter a rate rather than count in windows. */
#define SL_MONTH_NS INT64_C(2629746000000000)
/* The most months in a window: its mean length stays within SL_SPAN_MAX. */
#define SL_MONTHS_MAX 876
/* The widest UTC offset: +-18:00. */
#define SL_UTC_OFFSET_MAX (INT64_C(18) * 3600 * 1000000000)
/* The latest reset day of a month (sl_limit_align_day). */
#define SL_RESET_DAY_MAX 31

/*
 * Puts the windows of a fixed or sliding window limit on the wall clock:
 * the local wall time of `now` is now + clock_offset_ns + utc_offset_ns,
 * where clock_offset_ns is (Unix time - now) for the caller's clock (0
 * when `now` is Unix time; sluiced measures CLOCK_REALTIME -
 * CLOCK_MONOTONIC once at start) and utc_offset_ns the local time's offset
 * from UTC (-05:00 is -18 000 s).
 *
 * With months 0, windows of the limit's period begin where the local time,
 * counted from Monday 1970-01-05 00:00, is a multiple of the period: a
 * period dividing a day begins at local midnight (a day at midnight, an
 * hour on the hour), a week (7 days) on Monday 00:00. With months n > 0,
 * windows are n calendar months (28 to 31 days each), beginning at local
 * midnight on the first of a month, every n months from January 1970
 * (3 months: quarters; 12: years); the period given to sl_limit_init is
 * then only the nominal length (n * SL_MONTH_NS). sl_limit_align_day
 * begins them on another day of the month.
 *
 * Other algorithms keep no windows and ignore this (months then count as
 * the nominal period), except the sliding log, which keeps the trailing
 * period and refuses months. Call after sl_limit_init; call again with
 * l->months and l->utc_offset_ns to move a limit to another clock (one with
 * a reset day: sl_limit_align_day, which keeps it). Returns SL_OK, or
 * SL_ERR_PERIOD for months out of [0, SL_MONTHS_MAX] or months on a
 * sliding log, SL_ERR_ARGUMENT for an offset out of range or a limit
 * sl_limit_init did not fill; *l is then unchanged.
 */
SL_API sl_status sl_limit_align(sl_limit *l, int64_t months, int64_t utc_offset_ns,
                                int64_t clock_offset_ns);

/*
 * sl_limit_align, with windows of months that begin on `reset_day` of a
 * month rather than on the first: a billing cycle that resets on the 15th
 * at local midnight. reset_day is 1 to SL_RESET_DAY_MAX, or 0 for the
 * first (sl_limit_align's, and l->reset_day's for both 0 and 1). A day that
 * a month does not have is that month's last: with reset day 31, windows
 * begin on January 31st, February 28th (29th in a leap year), March 31st,
 * April 30th...; each window ends where the next begins, so none is lost
 * or counted twice. With n months, windows begin on the reset day of every
 * n-th month from January 1970, as with the first:
 *
 *     reset_day 15, 1 month, UTC:
 *       ... Jan 15 00:00 | Feb 15 00:00 | Mar 15 00:00 ...
 *           [ 31 days    )[ 28 or 29    )[ 31 days ...
 *     a take on Feb 3 counts in [Jan 15, Feb 15).
 *
 * Returns sl_limit_align's errors, and SL_ERR_ARGUMENT for a reset_day
 * outside [0, SL_RESET_DAY_MAX], SL_ERR_PERIOD for a reset_day above 1 with
 * months 0 (a period that is not months has no day of the month); *l is
 * then unchanged. Call again with l->months, l->reset_day and
 * l->utc_offset_ns to move a limit to another clock.
 */
SL_API sl_status sl_limit_align_day(sl_limit *l, int64_t months, int64_t reset_day,
                                    int64_t utc_offset_ns, int64_t clock_offset_ns);

/* Bytes of state one key needs under *l (8-byte aligned; zero = never seen);
 * 0 for a limit that sl_limit_init did not fill. */
SL_API size_t sl_state_size(const sl_limit *l);

/*
 * What a client must be told. Durations are nanoseconds from `now`.
 */
typedef struct sl_decision {
    bool allowed;
    int64_t limit;          /* most units available at once (burst, or the window's limit) */
    int64_t remaining;      /* units still available right after this decision */
    int64_t reset_after_ns; /* until the state is back to "never seen" */
    int64_t retry_after_ns; /* 0 when allowed; else until this cost would be
                               admitted; SL_NEVER when it never can */
    int64_t delay_ns;       /* SL_LEAKY_BUCKET: how long an admitted caller must
                               wait before going ahead; 0 otherwise */
    uint64_t lease_id;      /* SL_CONCURRENCY: the lease granted; 0 otherwise */
} sl_decision;

/*
 * Takes `cost` units at time `now`: decides, and when admitted updates
 * *state. Cost 0 peeks (nothing is consumed). Returns SL_OK with *d filled, or
 * SL_ERR_COST / SL_ERR_TIME for invalid input, leaving *state untouched.
 */
SL_API sl_status sl_take(const sl_limit *l, void *state, int64_t now, int64_t cost, sl_decision *d);

/* As sl_take, but never writes *state: what would a take of `cost` answer? */
SL_API sl_status sl_peek(const sl_limit *l, const void *state, int64_t now, int64_t cost,
                         sl_decision *d);

/*
 * Gives back a take: undoes, as far as *state still can at `now`, a take of
 * `cost` units that *l admitted on this state at a time <= now. A request
 * checked against several limits whose states cannot be taken from at once
 * (keys in different Redis Cluster slots) is taken from them in order, and
 * when a later one refuses, the earlier ones are given back this way, so
 * that the request consumes from none.
 *
 * When no other take of the state came between the take and its refund (a
 * backend refunds at once), the state then admits exactly what it would
 * have admitted had that take been refused, in every decision that
 * follows: a refund never gives a budget the client did not have. Per
 * algorithm:
 *
 *   gcra, leaky_bucket  TAT -= cost * T, never below now (the queue's level
 *                       goes back by cost); what has refilled since the
 *                       take is not given again
 *   token_bucket        tokens += cost, at most burst
 *   fixed_window        the window's count -= cost, only while `now` is
 *                       still in the window the state counts in; once that
 *                       window has ended, nothing (its count limits no more)
 *   sliding_window      the same, while the count still weighs: in its
 *                       window, and in the next as the previous window's
 *   sliding_log         the `cost` newest timestamps still in the log go
 *   concurrency         SL_ERR_ALGORITHM: a lease is released, not refunded
 *                       (sl_lease_release)
 *
 * A carried limit (sl_limit_carry) gives back only to a state that names
 * it: a state written under another limit, or never written, gets nothing.
 *
 * The state does not say when its units were taken, so when other takes
 * came between, it may afterwards admit up to `cost` units more than it
 * would have without the refunded take (the time that refilled its units
 * while others waited, a window that turned), never more than that.
 *
 * Returns the units given back, 0 .. cost (0 when the take has refilled or
 * its window has passed; for the metering algorithms, the whole units the
 * state's debt shrank by), or SL_ERR_COST / SL_ERR_TIME for invalid input
 * and SL_ERR_ALGORITHM for a concurrency limit. *state changes only when
 * units are given back (an answer above 0). Cost 0 gives back nothing.
 */
SL_API int64_t sl_refund(const sl_limit *l, void *state, int64_t now, int64_t cost);

/*
 * Charges a take after the fact: takes `cost` units at `now` whatever
 * *state holds, never refused, so that what the budget lacked is owed. An
 * LLM call's tokens are known only when it ends: the request was admitted
 * on an estimate, and the actual amount beyond it is charged this way. A
 * debt delays the next takes (each is refused until time has paid the debt
 * back) and never undoes one already admitted. sl_refund gives a charge
 * back as it gives a take back. Per algorithm, what a debt is and its bound:
 *
 *   gcra, leaky_bucket  TAT = max(TAT, now) + cost * T; in debt while the
 *                       TAT is past now + tau, and a take of c is admitted
 *                       again once TAT + c * T - now <= tau (so no debt is
 *                       capped at tau, whoever left it: a TAT written under
 *                       a limit of a longer tau is read as a debt too). The
 *                       TAT saturates at SL_TIME_MAX (a charge beyond owes
 *                       only that much). CL.THROTTLE's cell limits alike.
 *   token_bucket        tokens -= cost, below zero, down to the floor of
 *                       minus the tokens that accrue in SL_SPAN_MAX ns (at
 *                       most SL_SPAN_MAX tokens; it saturates there)
 *   fixed_window        the window's count += cost, past the limit, at most
 *                       SL_SPAN_MAX; the debt ends with its window
 *   sliding_window      the same; in the next window the count weighs as
 *                       the previous window's, as any count does, so the
 *                       debt is gone two windows on
 *   sliding_log         SL_ERR_ALGORITHM: the log holds at most `limit`
 *                       timestamps, so it cannot owe
 *   concurrency         SL_ERR_ALGORITHM: a lease is acquired, not charged
 *
 * A carried limit (sl_limit_carry) carries the state over first, as a take
 * does. States not in debt decide exactly as they always have. In debt, a
 * take of 1 or more is refused by every algorithm; a take of 0 (a peek) is
 * refused too, except by the token bucket, which has no token to take and
 * admits it, remaining 0.
 *
 * Fills *d with what the state then says: allowed always true (a charge is
 * never refused), remaining 0 while in debt, reset_after until the state
 * is "never seen" again, retry_after until the next take of one unit is
 * admitted (0 when it would be now). Returns SL_OK, or SL_ERR_COST /
 * SL_ERR_TIME for invalid input and SL_ERR_ALGORITHM as above, with *state
 * untouched. Cost 0 changes nothing and fills *d.
 */
SL_API sl_status sl_charge(const sl_limit *l, void *state, int64_t now, int64_t cost,
                           sl_decision *d);

/*
 * The time from which *state is equivalent to "never seen" (a full bucket, a
 * past window, no lease held) if nothing else is taken; 0 when it already is.
 * A store reclaims the state then; Redis expires the key then.
 */
SL_API int64_t sl_state_expires_at(const sl_limit *l, const void *state);

/*
 * Moves every timestamp in a state of `size` bytes (as sl_state_size gave)
 * by delta_ns: a snapshot taken on one monotonic clock is restored on another
 * by rebasing each state by (new clock - old clock). Times saturate at 0 and
 * SL_TIME_MAX. Needs only the algorithm and the size, not the whole limit.
 */
SL_API void sl_state_rebase(sl_algorithm algorithm, void *state, size_t size, int64_t delta_ns);

/*
 * Acquires a lease of `weight` units on an SL_CONCURRENCY state, as sl_take
 * does, but the lease carries the caller's `lease_id` (non-zero) instead of
 * the state's next number. A server passes a random 64-bit number: the id is
 * then unguessable, and an expired lease's id never comes back, even after
 * the state was reclaimed. Weight 0 peeks. Returns SL_OK with *d filled (and
 * d->lease_id = lease_id when granted), SL_ERR_ARGUMENT for id 0 or an id
 * that a live lease of the state already has, SL_ERR_COST, SL_ERR_TIME, or
 * SL_ERR_ALGORITHM for a limit of another algorithm.
 */
SL_API sl_status sl_lease_acquire(const sl_limit *l, void *state, int64_t now, int64_t weight,
                                  uint64_t lease_id, sl_decision *d);

/*
 * Releases lease `lease_id` of an SL_CONCURRENCY state at time `now`.
 * Returns 1 when it was held, 0 when it is unknown or has expired, or an
 * SL_ERR_* for invalid input.
 */
SL_API int sl_lease_release(const sl_limit *l, void *state, int64_t now, uint64_t lease_id);

/*
 * The 5 integers of redis-cell's CL.THROTTLE reply, from a decision made under
 * a limit from sl_limit_init_cell(): limited (0/1), limit, remaining,
 * retry_after and reset_after in whole seconds, rounded up when the
 * millisecond part is not zero; retry_after is -1 when allowed or never.
 */
SL_API void sl_cell_reply(const sl_decision *d, int64_t out[5]);

/* ---- adaptive concurrency limits (src/algo/adaptive.c) ---- */

/*
 * An adaptive concurrency limit finds, from measured latency, how many
 * requests a service can take at once. The caller keeps its own count of
 * requests in flight and admits one only while that count is below
 * sl_adapt_limit(); when a request ends it feeds a sample: its latency, the
 * count in flight when it started (itself included) and its outcome. The
 * estimator moves the limit. Everything is on integers (the limit in
 * 1/SL_ADAPT_ONE units, times in ns, ratios in per mille); `now` is the
 * caller's, as for the rate limits.
 *
 *   latency |                           .
 *           |                        .     past capacity: in flight above
 *           |                     .        C only waits in a queue
 *   no-load |___________________.
 *           +-------------------|-------------------> in flight
 *                               C (the true capacity)
 *
 * The estimators (the defaults are those of sl_adapt_config_default):
 *
 *   SL_ADAPT_AIMD: loss-based, for a client that sees only failures. A
 *   success whose request started with at least half the limit in flight
 *   adds 1/limit (one unit per limit's worth of successes, about one a round
 *   trip); a drop, or a success slower than timeout_ns, multiplies the
 *   limit by backoff_permille / 1000, at most once a round trip (a drop of
 *   a request that started before the last cut says nothing new; Netflix's
 *   AIMDLimit adds 1 a success and cuts on every drop). Defaults:
 *   initial 20, min 20, max 200, backoff 900, timeout 5 s. Its limit settles
 *   where latency reaches the timeout, so that timeout sets its queue.
 *
 *   SL_ADAPT_VEGAS: TCP Vegas' queue estimate. The no-load RTT is the
 *   smallest latency seen; queue = limit * (1 - no_load / latency), rounded
 *   up. Past half the limit in flight: queue <= log10(limit) adds
 *   6 * log10(limit); queue < 3 * log10(limit) adds log10(limit); queue >
 *   6 * log10(limit) takes log10(limit) off; a drop takes log10(limit) off
 *   (log10 in whole units, at least 1). The new limit is blended with the
 *   old by smoothing_permille. Every probe_multiplier * limit samples the
 *   no-load RTT restarts from the sample at hand (a sample that restarts or
 *   lowers it moves nothing else). Defaults: initial 20, min
 *   1, max 1000, smoothing 1000, probe_multiplier 30. Under a queue that
 *   never empties, each restart raises the no-load RTT to a queued latency.
 *
 *   SL_ADAPT_GRADIENT2: Netflix's Gradient2, the long-term RTT (an
 *   exponential average over long_window samples, a plain average over the
 *   first ten) against the sample's. gradient = tolerance * long / short,
 *   clamped to [0.5, 1]; new = limit * gradient + queue_size, blended by
 *   smoothing_permille; past half the limit in flight only. The long RTT is
 *   cut by 5% whenever it is more than twice the sample's. Drops count as
 *   successes. Defaults: initial 20, min 20, max 200, smoothing 200,
 *   long_window 600, tolerance 1500, queue_size 4. Its weakness: the long
 *   RTT follows the queued latency, and while the sample's latency stays
 *   within `tolerance` of it the gradient is 1 and the limit gains
 *   queue_size * smoothing every sample; under a modest, lasting overload
 *   the limit climbs to max_limit and the queue with it.
 *
 *   SL_ADAPT_ANCHORED (sluice's own): the gradient against a baseline that
 *   queueing cannot move. The baseline is the no-load RTT measured in a
 *   probe: the limit is held at min_limit until probe_samples requests that
 *   started with at most min_limit in flight have ended, and the baseline
 *   is their mean latency (a probe gives up after 16 * probe_samples
 *   samples: with none that qualified the baseline stays as it was, or is
 *   the short-term average when there was none yet; no sample moves the
 *   limit while it lasts). The first sample starts a probe, and one follows every
 *   probe_interval_ns; between probes the baseline can only fall (to the
 *   short-term average, when that is lower). The allowed queueing delay is
 *   relative to the baseline: the target latency is
 *   baseline * (1000 + queue_permille) / 1000, and the limit moves toward
 *   limit * target / short (short: the average latency over the last
 *   short_window samples; the ratio clamped to at least 1/2), by
 *   smoothing_permille of the distance per limit's worth of samples, so
 *   about that much a round trip whatever the limit. It grows only past
 *   half the limit in flight; a drop multiplies it by backoff_permille /
 *   1000 at most once a round trip. With no additive term and a baseline
 *   that a lasting queue cannot raise, the limit settles where the queue
 *   holds queue_permille of the no-load latency: near
 *   C * (1000 + queue_permille) / 1000. min_limit must lie below the
 *   capacity for a probe to see an empty queue; a probe costs the
 *   throughput above min_limit for a few round trips. Defaults: initial 20,
 *   min 4, max 1000, queue 250, smoothing 500, short_window 16, probe every
 *   30 s over 16 samples, backoff 900.
 *
 * A limit's whole units are at least 1 and at most SL_ADAPT_LIMIT_MAX. An
 * sl_adapt holds no lock: one caller at a time.
 */

/* Fixed point: a limit of 1 is SL_ADAPT_ONE. */
#define SL_ADAPT_ONE (INT64_C(1) << 16)
/* The largest min, max or initial limit, in units. */
#define SL_ADAPT_LIMIT_MAX (INT64_C(1) << 24)

typedef enum sl_adapt_kind {
    SL_ADAPT_AIMD = 0,
    SL_ADAPT_VEGAS,
    SL_ADAPT_GRADIENT2,
    SL_ADAPT_ANCHORED,
    SL_ADAPT_KIND_COUNT
} sl_adapt_kind;

/* How a request ended, as a sample tells it. */
typedef enum sl_adapt_outcome {
    SL_ADAPT_SUCCESS = 0, /* served: its latency is a measurement */
    SL_ADAPT_DROPPED,     /* refused or timed out for load (a 503, a shed): the loss signal */
    SL_ADAPT_IGNORED,     /* says nothing about load (cancelled, a bad request): changes nothing */
} sl_adapt_outcome;

/* An estimator's parameters. Each field names the kinds that read it; the
 * others ignore it. Ratios are per mille. */
typedef struct sl_adapt_config {
    sl_adapt_kind kind;
    int64_t initial_limit; /* units, in [min_limit, max_limit] */
    int64_t min_limit;     /* units, >= 1; ANCHORED: also the probe's limit */
    int64_t max_limit;     /* units, <= SL_ADAPT_LIMIT_MAX */
    int64_t backoff_permille;   /* AIMD, ANCHORED: the cut on a drop, [500, 999] */
    int64_t timeout_ns;         /* AIMD: a slower success counts as a drop, > 0 */
    int64_t smoothing_permille; /* VEGAS, GRADIENT2 (per sample), ANCHORED (per round trip): [1, 1000] */
    int64_t probe_multiplier;   /* VEGAS: the no-load RTT restarts every this * limit samples, >= 1 */
    int64_t tolerance_permille; /* GRADIENT2: [1000, 100000] */
    int64_t long_window;        /* GRADIENT2: samples, [10, 1000000] */
    int64_t queue_size;         /* GRADIENT2: units added every sample, [0, SL_ADAPT_LIMIT_MAX] */
    int64_t queue_permille;     /* ANCHORED: the queueing delay allowed, of the no-load RTT, [1, 10000] */
    int64_t short_window;       /* ANCHORED: samples, [1, 1000000] */
    int64_t probe_interval_ns;  /* ANCHORED: between probes, [1, SL_SPAN_MAX] */
    int64_t probe_samples;      /* ANCHORED: samples a probe averages, [1, 1000000] */
} sl_adapt_config;

/* The state of one estimator: its configuration and a few numbers. A plain
 * struct the caller owns; sl_adapt_init fills it. */
typedef struct sl_adapt {
    sl_adapt_config cfg;
    int64_t limit;     /* 1/SL_ADAPT_ONE units, in [min, max] * SL_ADAPT_ONE */
    int64_t samples;   /* counted as each kind needs (warm-up, probe spacing) */
    int64_t rtt_base;  /* ns: VEGAS no-load, GRADIENT2 long-term, ANCHORED baseline; 0 unknown */
    int64_t rtt_short; /* ns: ANCHORED's short-term average; 0 none yet */
    int64_t cut_at;    /* ns: AIMD and ANCHORED: the last cut; -1 none */
    int64_t probe_next;  /* ns: ANCHORED: when the next probe starts */
    int64_t probe_saved; /* ANCHORED: the limit to restore after a probe; 0 not probing */
    int64_t probe_got;   /* ANCHORED: samples counted in the probe */
    int64_t probe_sum;   /* ns: ANCHORED: their latencies' sum */
} sl_adapt;

/* Fills *cfg with the defaults of `kind` (above). Returns SL_OK, or
 * SL_ERR_ALGORITHM for an unknown kind (and *cfg is then zeroed). */
SL_API sl_status sl_adapt_config_default(sl_adapt_kind kind, sl_adapt_config *cfg);

/* Checks *cfg and starts *a at the initial limit. Returns SL_OK,
 * SL_ERR_ALGORITHM for an unknown kind, SL_ERR_LIMIT for limits out of
 * order or range, SL_ERR_ARGUMENT for a parameter out of its range; *a is
 * left untouched on error. */
SL_API sl_status sl_adapt_init(sl_adapt *a, const sl_adapt_config *cfg);

/*
 * Feeds one sample at `now`: a request that took rtt_ns, started with
 * `inflight` requests in flight (itself included), and ended with
 * `outcome`. Returns SL_OK; SL_ERR_TIME for a `now` outside
 * [0, SL_TIME_MAX], SL_ERR_ARGUMENT for an rtt_ns outside [1, SL_SPAN_MAX],
 * an inflight below 1 or an unknown outcome, and then *a is unchanged.
 * Samples need not arrive in order of `now`.
 */
SL_API sl_status sl_adapt_sample(sl_adapt *a, int64_t now, int64_t rtt_ns, int64_t inflight,
                                 sl_adapt_outcome outcome);

/* The limit now, in whole units (rounded down, at least 1). */
SL_API int64_t sl_adapt_limit(const sl_adapt *a);

/* The estimator's name ("aimd", "vegas", "gradient2", "anchored"); NULL for
 * an unknown kind. */
SL_API const char *sl_adapt_kind_name(sl_adapt_kind kind);

/* ---- the keyed store (src/store/) ---- */

/*
 * A store maps keys (byte strings) to algorithm states, for many threads at
 * once. The store keeps only states: the limit comes with every call, so
 * ad-hoc limits (CL.THROTTLE, HTTP ?limit=) need no registration. A take
 * on one key is linearizable: all takes on a key happen one after the other,
 * and a take never sees the key's time go back (a `now` older than the
 * newest the store has used is decided at that newest). Takes on keys that
 * are there take no shared lock, in up to 256 threads at once (more take
 * the shard's lock).
 *
 * Memory: every byte the store allocates is counted against max_memory.
 * States that have become equivalent to "never seen" (a refilled bucket, a
 * past window) are reclaimed as the store goes. At the cap, the state that
 * expires soonest among a small sample is evicted: an eviction makes that
 * key's state "never seen", so it can only ever make a limit *more lenient*
 * for that key, never stricter. Evictions are counted.
 *
 * One state per key: a key used with another algorithm or state size (a
 * sliding log or concurrency limit whose `limit` changed) is carried over by
 * sl_state_adopt, and a take on a key that cannot be is SL_ERR_WRONGTYPE
 * (nothing changes: SL.RESET-like sl_store_reset clears it).
 *
 * Time: `now` is the caller's clock (CLOCK_MONOTONIC nanoseconds, read once
 * per batch); the store never reads a clock. See docs/store.md.
 */
typedef struct sl_store sl_store;

typedef struct sl_store_config {
    size_t max_memory;  /* hard cap in bytes, all overhead included; 0 = no cap.
                           A cap below 256 KiB is refused (SL_ERR_ARGUMENT). */
    size_t max_key_len; /* longest key in bytes; 0 = 512; at most 65535 */
    unsigned shards;    /* independent parts, each with its own lock for
                           inserts and reclaim; 0 = 64 (fewer under a small cap:
                           each shard gets at least 128 KiB); rounded up to a
                           power of two, at most 4096 */
    uint64_t seed;      /* hash seed: pass random bytes so that clients cannot
                           choose keys that collide; any value works */
} sl_store_config;

/* The most (key, limit) items sl_store_take_many checks at once. */
#define SL_TAKE_MANY_MAX 8

/* One item of a multi-limit take. The key and the limit stay the caller's. */
typedef struct sl_take_item {
    const void *key;      /* keylen bytes, not necessarily NUL-terminated */
    size_t keylen;        /* 1 .. max_key_len */
    const sl_limit *limit; /* from sl_limit_init / sl_limit_init_cell */
    int64_t cost;         /* units to take, >= 0 (0 peeks) */
} sl_take_item;

typedef struct sl_store_stats {
    uint64_t keys;        /* states held */
    uint64_t bytes_used;  /* bytes allocated by the store, all overhead included */
    uint64_t max_memory;  /* the cap (0 = none) */
    uint64_t evictions;   /* live states dropped at the cap */
    uint64_t reclaimed;   /* states dropped because they had become "never seen" */
    uint64_t reinits;     /* states carried over to another algorithm or state size */
} sl_store_stats;

/*
 * Creates a store; cfg may be NULL for the defaults (no cap). On SL_OK,
 * *out is a new store the caller frees with sl_store_free(). Returns
 * SL_ERR_ARGUMENT for an invalid config, SL_ERR_NOMEM when the allocation
 * fails.
 */
SL_API sl_status sl_store_new(const sl_store_config *cfg, sl_store **out);

/* Frees the store and every state in it; NULL is allowed. No other thread
 * may be using the store. */
SL_API void sl_store_free(sl_store *s);

/*
 * Takes `cost` units from `key` under limit *l at time `now`, and fills *d.
 * A key not seen before starts from "never seen"; cost 0 peeks.
 * Returns SL_OK (a rejection is SL_OK with d->allowed false), SL_ERR_KEY for
 * an empty or too long key, SL_ERR_COST / SL_ERR_TIME as sl_take does,
 * SL_ERR_NOMEM when a new key cannot be stored because nothing can be
 * evicted (nothing is consumed then), SL_ERR_ARGUMENT for a NULL pointer.
 */
SL_API sl_status sl_store_take(sl_store *s, const void *key, size_t keylen, const sl_limit *l,
                               int64_t now, int64_t cost, sl_decision *d);

/*
 * Acquires a lease of `weight` units on the SL_CONCURRENCY state of `key`
 * under *l, with the caller's `lease_id` (see sl_lease_acquire: a server
 * passes a random non-zero 64-bit number, so that ids are unguessable and
 * never come back, even after the state was reclaimed). Otherwise as
 * sl_store_take: d->allowed says whether it was granted, and then
 * d->lease_id is lease_id; weight 0 peeks. Returns SL_OK, SL_ERR_ARGUMENT
 * for id 0 or an id a live lease of the key already has, SL_ERR_ALGORITHM
 * for a limit of another algorithm, or an error as sl_store_take.
 * sl_store_take on a concurrency limit also acquires, with ids counted per
 * state (1, 2, ...).
 */
SL_API sl_status sl_store_acquire(sl_store *s, const void *key, size_t keylen, const sl_limit *l,
                                  int64_t now, int64_t weight, uint64_t lease_id, sl_decision *d);

/*
 * Answers what a take of `cost` would answer, without consuming anything or
 * storing the key. Same results as sl_store_take, never SL_ERR_NOMEM.
 */
SL_API sl_status sl_store_peek(sl_store *s, const void *key, size_t keylen, const sl_limit *l,
                               int64_t now, int64_t cost, sl_decision *d);

/*
 * Takes from n (1 .. SL_TAKE_MANY_MAX) limits at once, all or nothing: when
 * every item is admitted, all are consumed and *failed_index is -1; when
 * any rejects, nothing is consumed, *failed_index is the first item that
 * rejects, and out[i] says what item i would answer now after the items
 * before it (for distinct keys: a peek of its cost alone). An item may
 * repeat a key with the same algorithm and state size: its takes then add
 * up, in the answers of a rejected request too. out has n entries, the
 * caller's.
 * Returns SL_OK (whether admitted or not), or an error as sl_store_take
 * (SL_ERR_ARGUMENT also for n out of range, or one key under two
 * algorithms); on an error nothing is consumed.
 */
SL_API sl_status sl_store_take_many(sl_store *s, const sl_take_item *items, size_t n, int64_t now,
                                    sl_decision *out, int *failed_index);

/*
 * Starts loading into the CPU cache what takes on keys[0 .. n) (of lens[i]
 * bytes each) will read, and returns without waiting for it: first every
 * key's index entry, then every record found there. Changes nothing; a key
 * that is invalid or absent costs a little and is otherwise ignored. A server
 * with several commands in hand (a pipelined batch) calls it before running
 * them, so that their cache misses overlap instead of adding up.
 */
SL_API void sl_store_prefetch(sl_store *s, const void *const *keys, const size_t *lens, size_t n);

/*
 * Forgets `key`: its next take starts from "never seen".
 * Returns 1 when the key was held, 0 when not, SL_ERR_KEY for a bad key.
 */
SL_API int sl_store_reset(sl_store *s, const void *key, size_t keylen);

/*
 * Releases lease `lease_id` of the SL_CONCURRENCY state of `key` under *l.
 * Returns 1 when the lease was held, 0 when the key, the lease or a state of
 * that shape is unknown or the lease has expired, or SL_ERR_*.
 */
SL_API int sl_store_release(sl_store *s, const void *key, size_t keylen, const sl_limit *l,
                            int64_t now, uint64_t lease_id);

/*
 * Gives back a take of `cost` units from `key` under *l (sl_refund: as if
 * the take had been refused). A key that is not held, or holds a state of
 * another algorithm or size than *l's, gets nothing back; a state that is
 * "never seen" afterwards is reclaimed. Returns the units given back
 * (0 .. cost), SL_ERR_KEY for a bad key, SL_ERR_COST / SL_ERR_TIME as
 * sl_take, SL_ERR_ALGORITHM for a concurrency limit (leases are released:
 * sl_store_release), SL_ERR_ARGUMENT for a NULL pointer.
 */
SL_API int64_t sl_store_refund(sl_store *s, const void *key, size_t keylen, const sl_limit *l,
                               int64_t now, int64_t cost);

/*
 * Charges `cost` units to `key` under *l after the fact (sl_charge: never
 * refused, may leave the state in debt), under the same lock as a take. A
 * key never seen is created (a charge on it is a charge), as is one whose
 * state has another shape, carried over first as a take carries it. Fills
 * *d as sl_charge does. Returns SL_OK, SL_ERR_KEY / SL_ERR_COST /
 * SL_ERR_TIME as sl_store_take does, SL_ERR_ALGORITHM for a sliding log or
 * a concurrency limit (they cannot owe), SL_ERR_WRONGTYPE for a state that
 * cannot be carried over, SL_ERR_NOMEM when a new key does not fit under
 * the memory cap (nothing is then charged). Cost 0 stores nothing.
 */
SL_API sl_status sl_store_charge(sl_store *s, const void *key, size_t keylen, const sl_limit *l,
                                 int64_t now, int64_t cost, sl_decision *d);

/*
 * Reclaims states that are "never seen" again at `now`, looking at up to
 * max_records stored states in each shard, from where the last sweep
 * stopped (SIZE_MAX: all of them).
 * Takes already reclaim a little as they go; a server may also call this
 * from a timer so that memory follows the active keys when traffic stops:
 * it also moves the states of sparse pages together (evicting nothing) and
 * frees the pages, and shrinks a mostly empty index, a bounded amount each
 * call. Returns the number of states reclaimed.
 */
SL_API size_t sl_store_sweep(sl_store *s, int64_t now, size_t max_records);

/* What the store holds for one key, for operators (sluiced's SL.INSPECT). */
typedef struct sl_key_info {
    sl_algorithm algorithm;
    bool carried;        /* the state names its limit (SL_LIMIT_CARRY): then limit,
                            period_ns and used say what it names and has used */
    size_t state_bytes;  /* sl_state_size of the limit that wrote it */
    int64_t expires_at;  /* when it is "never seen" again, on the store's clock,
                            rounded up to about a millisecond; SL_TIME_MAX: far away */
    int64_t limit, period_ns, used;
} sl_key_info;

/*
 * Describes the state of `key` at `now` without changing it. Returns 1 and
 * fills *info when the key is held, 0 when it is not, SL_ERR_KEY for a bad
 * key, SL_ERR_ARGUMENT for a NULL pointer.
 */
SL_API int sl_store_inspect(sl_store *s, const void *key, size_t keylen, int64_t now,
                            sl_key_info *info);

/* Fills *st with the store's counters (each shard is read under its lock). */
SL_API void sl_store_get_stats(sl_store *s, sl_store_stats *st);

/*
 * Writes every live state to `path`, atomically: a temporary file beside
 * it, fsync, rename, fsync of the directory. now_mono is `now` on the
 * store's clock and now_wall the wall clock (CLOCK_REALTIME nanoseconds),
 * read together; both are written so that a restore can tell how much time
 * passed. Takes may run meanwhile (each shard is copied under its lock).
 * Returns SL_OK, SL_ERR_IO (errno tells why; the old file is untouched), or
 * SL_ERR_NOMEM.
 */
SL_API sl_status sl_store_snapshot_save(sl_store *s, const char *path, int64_t now_mono,
                                        int64_t now_wall);

/*
 * Removes the temporary files that saves to `path` interrupted by a crash
 * left behind: in path's directory, the regular files (not symbolic links)
 * owned by this process's effective user whose name is exactly path's file
 * name, ".tmp" and six letters or digits, the name sl_store_snapshot_save
 * gives its temporary file. Nothing else is touched. Call it while no save
 * to `path` is under way (at start, before the first). *removed and *bytes
 * (either may be NULL) get how many files went and their size; a file that
 * cannot be removed is skipped. Returns SL_OK, SL_ERR_ARGUMENT for a NULL or
 * empty path or one with no file name ("dir/"), or SL_ERR_IO when the
 * directory cannot be read (errno tells why).
 */
SL_API sl_status sl_store_snapshot_clean(const char *path, size_t *removed, uint64_t *bytes);

/*
 * Loads a snapshot written by sl_store_snapshot_save into s. Every
 * timestamp moves by (now_mono - snapshot's mono) - (now_wall - snapshot's
 * wall): the wall clock measures how long the process was down, so
 * buckets refill and windows pass during the downtime; a wall clock that
 * went backwards counts as no time passed (stricter, never more lenient).
 * States that have expired meanwhile are skipped; a key already in s is
 * replaced. The whole file is verified before anything is loaded:
 * SL_ERR_CORRUPT for a truncated file, a bad checksum or a malformed
 * record, SL_ERR_VERSION for an unknown format version or byte order,
 * SL_ERR_KEY for a key longer than this store allows, SL_ERR_IO when it
 * cannot be read; then nothing is loaded. SL_ERR_NOMEM when the cap is
 * reached and nothing can be evicted (what was loaded stays).
 * *loaded (may be NULL) gets the number of states stored.
 */
SL_API sl_status sl_store_snapshot_load(sl_store *s, const char *path, int64_t now_mono,
                                        int64_t now_wall, size_t *loaded);

/*
 * Load shedding by priority (src/algo/shed.c).
 *
 * A shedder sits in front of a concurrency limit (a fixed one, or the
 * current value of an adaptive estimator: the limit is an argument of every
 * call) and decides which requests get the in-flight slots when there are
 * not enough for all. Each request carries a *class*, 0 .. classes-1, lower
 * is more important (SL_PRIO_*: critical, default, sheddable), and
 * optionally a *partition* (a tenant, a kind of traffic: live, batch).
 *
 * Shares are permille of the limit, rounded down: a class's *reserve* is
 * capacity that less important classes may not take from it; a partition's
 * *guarantee* is capacity that other partitions may not take from it.
 *
 *   limit = 100, critical reserve 200 (20 slots):
 *
 *   0                                       80                 100
 *   |-------- anyone (sheddable too) --------|-- critical only --|
 *                                            |<- the reserve, ->|
 *                                               while critical
 *                                               runs none of it
 *
 * The rules, for a request of class k in partition p (each request is one
 * unit; in_flight counts all admitted and not yet done):
 *
 * 1. Never more than `limit` in flight.
 * 2. Class rule: admitted only while in_flight < limit minus, for each
 *    class j more important than k whose reserve is *held*, the part of j's
 *    reserve that j is not using (reserve_j - in_flight_j, when positive).
 *    Critical work (class 0) sees the whole limit, so it can always use its
 *    reserve even when the others filled the rest; sheddable work sees the
 *    least, so it is refused first.
 * 3. Partition rule (when there are partitions): a partition below its
 *    guarantee sees the whole limit (rule 2 still applies); at or above its
 *    guarantee it may borrow only what is left after the unused guarantees
 *    of the other partitions that are held.
 *
 * Held or lent: a class or partition that has asked (admitted or refused)
 * within the last idle_ns holds its unused share; one that has not (or has
 * never asked) lends it, so that with no critical traffic the others may
 * use the whole limit: nothing idles. When critical work comes back, it
 * holds its reserve again from its first request: others are refused while
 * it is taken, so the slots they borrowed return to critical as they end.
 * A partition lends only when its `lends` flag says so; idle_ns 0 lends
 * nothing (strict shares).
 *
 * State: caller-owned, all zero when empty; no clock is read, no memory
 * allocated, no lock taken: a caller shared between threads serializes the
 * calls of one sl_shed.
 */
#define SL_SHED_CLASSES_MAX 8
#define SL_SHED_PARTITIONS_MAX 8

/* The usual three classes. */
enum {
    SL_PRIO_CRITICAL = 0,  /* user-facing work that must not fail */
    SL_PRIO_DEFAULT = 1,   /* everything else */
    SL_PRIO_SHEDDABLE = 2, /* retries, prefetches, batch: refused first */
};

typedef struct sl_shed_config {
    int classes; /* 1 .. SL_SHED_CLASSES_MAX */
    /* Each class's reserve, permille of the limit (critical 200: 20%);
     * 0 .. 1000, adding up to at most 1000. The least important class's
     * reserve holds nothing back (no class is below it). */
    int32_t reserve_permille[SL_SHED_CLASSES_MAX];
    int partitions; /* 0 (none: pass partition 0) .. SL_SHED_PARTITIONS_MAX */
    /* Each partition's guarantee, permille of the limit (live 900, batch
     * 100); 0 .. 1000, adding up to at most 1000. */
    int32_t guarantee_permille[SL_SHED_PARTITIONS_MAX];
    /* Whether an idle partition's unused guarantee may be borrowed. */
    bool lends[SL_SHED_PARTITIONS_MAX];
    /* ns without a request after which a class or partition is idle and
     * lends its unused share; 0 never lends. At most SL_SPAN_MAX. */
    int64_t idle_ns;
} sl_shed_config;

/* The state of one shedder: what is in flight, and when each class and
 * partition last asked. Zero it to start; read it, do not write it. */
typedef struct sl_shed {
    int64_t in_flight;
    int64_t class_in_flight[SL_SHED_CLASSES_MAX];
    int64_t partition_in_flight[SL_SHED_PARTITIONS_MAX];
    int64_t class_asked[SL_SHED_CLASSES_MAX]; /* ns; meaningful when its bit of class_seen is set */
    int64_t partition_asked[SL_SHED_PARTITIONS_MAX];
    uint32_t class_seen, partition_seen; /* bit i: class (partition) i has asked */
} sl_shed;

/* Why a request was refused. */
typedef enum sl_shed_reason {
    SL_SHED_ADMITTED = 0,
    SL_SHED_FULL,      /* `limit` are in flight (or more, after the limit fell) */
    SL_SHED_RESERVED,  /* the rest is reserved for more important classes */
    SL_SHED_PARTITION, /* the rest is guaranteed to other partitions */
} sl_shed_reason;

typedef struct sl_shed_decision {
    bool admitted;
    sl_shed_reason reason;
    int by;            /* SL_SHED_RESERVED: the most important class whose unused
                        * reserve is held; SL_SHED_PARTITION: the first such
                        * partition; -1 otherwise */
    int64_t limit;     /* the limit the decision was made against */
    int64_t in_flight; /* all in flight after the decision */
    int64_t remaining; /* how many more of this class and partition would be
                        * admitted now, one after another */
} sl_shed_decision;

/* SL_OK when *c is a valid configuration (see its fields), else
 * SL_ERR_ARGUMENT (a NULL c too). */
SL_API sl_status sl_shed_config_check(const sl_shed_config *c);

/*
 * Decides whether one request of class `cls` in partition `part` may start
 * at time `now` (ns, used only to tell idle classes and partitions), under
 * a limit of `limit` in flight (>= 0; 0 refuses everything). Admitted:
 * counts it in flight (call sl_shed_done when it ends). Either way records
 * that the class and the partition asked, and fills *d. Returns SL_OK (a
 * refusal is a decision: d->admitted false and d->reason), SL_ERR_LIMIT for
 * a negative limit, SL_ERR_TIME for now outside [0, SL_TIME_MAX], or
 * SL_ERR_ARGUMENT for a NULL pointer, an invalid *c, or a class or
 * partition out of range; on error *s is unchanged and *d zeroed.
 */
SL_API sl_status sl_shed_admit(sl_shed *s, const sl_shed_config *c, int64_t limit, int64_t now,
                               int cls, int part, sl_shed_decision *d);

/*
 * Ends a request that sl_shed_admit admitted with class `cls` in partition
 * `part`. Returns SL_OK, or SL_ERR_ARGUMENT (and changes nothing) for a
 * NULL s, an index out of range, or a class or partition with nothing in
 * flight.
 */
SL_API sl_status sl_shed_done(sl_shed *s, int cls, int part);

/*
 * Adaptive limiters (src/store/limiter.c): an estimator (sl_adapt), a
 * shedder (sl_shed) and the leases in flight, as one thread-safe object, and
 * a keyed table of them.
 *
 * acquire admits a request or refuses it: admitted while the shedder lets
 * its class and partition have one of the estimator's sl_adapt_limit()
 * slots. An admitted request holds a lease until it is completed with its
 * outcome and latency (rtt_ns <= 0: the limiter measures it, from the
 * acquire's `now` to the completion's), which is the estimator's sample
 * (with the count in flight when it started, itself included). A lease not
 * completed within ttl_ns of its acquire expires: its slot is freed and it
 * is the estimator's sample of a DROPPED request that took ttl_ns (a
 * request that outlived its deadline is the loss signal; a holder that
 * crashed looks the same). Expiries are found at the next call on the
 * limiter, in acquire order (one TTL for all: the oldest expire first).
 *
 * Lease ids are the caller's (non-zero; a server passes random ones, so
 * that they cannot be guessed); the limiter adds the slot the lease is in,
 * and a completion must name both. `now` never goes back for a limiter: an
 * older one counts as the newest seen.
 *
 * Memory: the config, the estimator and shedder, and 40 bytes a slot;
 * slots grow (doubling) with the most in flight at once, up to max_limit.
 */
typedef struct sl_limiter_config {
    sl_adapt_config adapt;
    sl_shed_config shed; /* classes >= 1 (1: no priorities) */
    int64_t ttl_ns;      /* [1, SL_SPAN_MAX] */
} sl_limiter_config;

/* SL_OK when *c is valid (sl_adapt_init's and sl_shed_config_check's
 * rules, and the TTL's); else the error naming what is not. */
SL_API sl_status sl_limiter_config_check(const sl_limiter_config *c);

/* A lease as acquire hands it out. */
typedef struct sl_limiter_lease {
    uint64_t id;   /* the caller's */
    uint32_t slot; /* the limiter's: < SL_ADAPT_LIMIT_MAX */
} sl_limiter_lease;

typedef struct sl_limiter_decision {
    bool admitted;
    sl_shed_reason reason; /* why refused; SL_SHED_ADMITTED when admitted */
    int by;                /* sl_shed_decision's */
    int64_t limit;         /* the estimator's limit, whole units */
    int64_t in_flight;     /* after the decision */
    int64_t remaining;     /* more of this class and partition admitted now */
    /* Refused: a hint for when to try again, the recent mean latency (the
     * estimator's short-term or no-load one, else the TTL); 0 admitted. */
    int64_t retry_after_ns;
} sl_limiter_decision;

typedef struct sl_limiter_stats {
    sl_adapt_kind kind;
    int64_t limit; /* whole units */
    int64_t min_limit, max_limit;
    int64_t in_flight;
    int64_t class_in_flight[SL_SHED_CLASSES_MAX];
    int64_t partition_in_flight[SL_SHED_PARTITIONS_MAX];
    int64_t rtt_base_ns;  /* the estimator's no-load (or long-term) latency; 0 unknown */
    int64_t rtt_short_ns; /* ANCHORED's short-term average; 0 none */
    bool probing;         /* ANCHORED: a probe holds the limit at min_limit */
    int classes, partitions;
    /* Counted since the limiter was made: completed counts every
     * completion (dropped: those with outcome DROPPED), expired the leases
     * that outlived the TTL, so admitted = completed + expired + in_flight;
     * refused counts the refusals returned (acquire_wait's tries before its
     * deadline are not). */
    uint64_t admitted, refused, completed, dropped, expired;
    uint64_t refused_by_class[SL_SHED_CLASSES_MAX];
} sl_limiter_stats;

typedef struct sl_limiter sl_limiter;

/* A limiter under *cfg (copied). NULL with *err set (may be NULL) to
 * sl_limiter_config_check's error, or SL_ERR_NOMEM. */
SL_API sl_limiter *sl_limiter_new(const sl_limiter_config *cfg, sl_status *err);
SL_API void sl_limiter_free(sl_limiter *lim);

/* Changes the config, keeping what the limiter has learned and holds: the
 * estimator restarts under the new parameters from the current limit
 * (clamped to the new [min, max]); leases stay, a class or partition out of
 * the new range counting as the last one. Returns SL_OK or the config's
 * error (then nothing changes), SL_ERR_NOMEM. */
SL_API sl_status sl_limiter_configure(sl_limiter *lim, const sl_limiter_config *cfg, int64_t now);

/* Asks for one slot at `now` for class `cls` (0 .. classes-1) in partition
 * `part` (0 when there are none), under lease id `id`. Returns SL_OK (a
 * refusal too: d->admitted false), SL_ERR_TIME, SL_ERR_ARGUMENT (id 0, a
 * class or partition out of range, a NULL pointer), SL_ERR_NOMEM (slots
 * could not grow: refused, nothing changed). *lease is set when admitted. */
SL_API sl_status sl_limiter_acquire(sl_limiter *lim, int64_t now, int cls, int part, uint64_t id,
                                    sl_limiter_lease *lease, sl_limiter_decision *d);

/* acquire that waits, up to timeout_ns on the monotonic clock (sl_now_mono's
 * CLOCK_MONOTONIC), for a slot: woken by completions and expiries. Reads the
 * clock itself; *now_out (may be NULL) gets the time of the decision. The
 * same returns as sl_limiter_acquire; refused only at the deadline. */
SL_API sl_status sl_limiter_acquire_wait(sl_limiter *lim, int64_t timeout_ns, int cls, int part,
                                         uint64_t id, sl_limiter_lease *lease,
                                         sl_limiter_decision *d, int64_t *now_out);

/* Completes *lease at `now` with `outcome` and its latency (rtt_ns <= 0:
 * measured from the acquire). Returns 1 when the lease was held, 0 when it
 * is unknown or has expired (nothing changes), SL_ERR_TIME,
 * SL_ERR_ARGUMENT (an unknown outcome, rtt_ns above SL_SPAN_MAX). */
SL_API int sl_limiter_complete(sl_limiter *lim, int64_t now, const sl_limiter_lease *lease,
                               sl_adapt_outcome outcome, int64_t rtt_ns);

/* What the limiter holds at `now` (expiries found first). */
SL_API void sl_limiter_stats_get(sl_limiter *lim, int64_t now, sl_limiter_stats *st);

/*
 * A keyed table of limiters, for many threads: one per key, made by the
 * first acquire with the config it brings, reconfigured
 * (sl_limiter_configure) by an acquire that brings another. At most
 * max_keys of them: a new key at the cap evicts the least recently used
 * limiter with nothing in flight (its estimate is lost: the key starts
 * again from the initial limit), or is refused with SL_ERR_NOMEM when every
 * one holds leases. Keys are 1 .. max_key_len bytes (SL_ERR_KEY). Each call
 * holds one of 16 locks (by the key's hash) for its duration: O(1) but for
 * a reconfiguration. The cap is the table's, not a lock's: a new key at it
 * evicts from its own lock's keys first, then from any other lock's it can
 * take without waiting.
 */
typedef struct sl_limiters sl_limiters;

typedef struct sl_limiters_info {
    size_t keys, max_keys;
    uint64_t evicted;
    size_t bytes; /* what the limiters and the table hold */
} sl_limiters_info;

SL_API sl_limiters *sl_limiters_new(size_t max_keys, size_t max_key_len);
SL_API void sl_limiters_free(sl_limiters *t);

/* sl_limiter_acquire on key's limiter under *cfg (made or reconfigured
 * first). Also SL_ERR_KEY, SL_ERR_NOMEM, *cfg's error. */
SL_API sl_status sl_limiters_acquire(sl_limiters *t, const void *key, size_t keylen,
                                     const sl_limiter_config *cfg, int64_t now, int cls, int part,
                                     uint64_t id, sl_limiter_lease *lease, sl_limiter_decision *d);

/* sl_limiter_complete on key's limiter; 0 for an unknown key. */
SL_API int sl_limiters_complete(sl_limiters *t, const void *key, size_t keylen, int64_t now,
                                const sl_limiter_lease *lease, sl_adapt_outcome outcome,
                                int64_t rtt_ns);

/* sl_limiter_stats_get on key's limiter: 1, or 0 for an unknown key (and
 * *st zeroed); SL_ERR_KEY. */
SL_API int sl_limiters_stats(sl_limiters *t, const void *key, size_t keylen, int64_t now,
                             sl_limiter_stats *st);

/* Reconfigures under *cfg (as an acquire under it would) every key that
 * begins with the prefix_len bytes at prefix, so that a changed policy
 * shows in every key's limit at once rather than at each key's next
 * acquire. Returns how many keys changed, or *cfg's error (nothing changed). */
SL_API int64_t sl_limiters_configure(sl_limiters *t, const void *prefix, size_t prefix_len,
                                     const sl_limiter_config *cfg, int64_t now);

/* Calls fn once per key, in no order, under that key's lock (fn must not
 * call into t): for metrics. */
SL_API void sl_limiters_each(sl_limiters *t, int64_t now,
                             void (*fn)(void *arg, const void *key, size_t keylen,
                                        const sl_limiter_stats *st),
                             void *arg);

SL_API void sl_limiters_info_get(sl_limiters *t, sl_limiters_info *info);

/*
 * The top keys: a heavy-hitters summary of bounded size (src/store/topk.c).
 *
 * Which keys are refused (or admitted) most often? Counting every key
 * exactly takes memory that grows with the keys, which a flood of random
 * keys makes unbounded. A summary keeps k counters, whatever comes, and
 * says how wrong each one can be.
 *
 * The algorithm is Space-Saving (Metwally, Agrawal and El Abbadi, 2005):
 *
 *   a key it holds          its counter += n
 *   a key it does not hold  it takes the counter of the smallest count m
 *                           (the key there is forgotten): count = m + n,
 *                           error = m, since the newcomer may have been seen
 *                           up to m times while it was not held
 *
 *   counters, smallest first (the summary keeps them in this order):
 *
 *     pos   0      1      2            k-1
 *         +------+------+------+ ... +------+
 *   count |  3   |  3   |  4   |     |  97  |    a unit add moves a counter
 *   key   | u:81 | u:12 | u:40 |     | u:7  |    past those of its old count
 *         +------+------+------+ ... +------+    (one swap); a new key takes
 *           ^ the next newcomer takes this one   position 0
 *
 * Why Space-Saving rather than a count-min sketch with a heap: with the
 * same memory it gives deterministic bounds instead of probabilistic ones,
 * it never confuses two short keys (each counter holds its key, not a
 * hash), its memory is exactly k counters, and a unit add is one hash
 * lookup, a binary search over the counts and a swap.
 *
 * The bounds. After N units added (the sum of the n's) to a summary of k
 * counters, every key listed has
 *
 *     count - error  <=  true count  <=  count
 *
 * and every key not listed has a true count of at most `floor` (the count
 * of the last counter taken from another key; 0 until the k counters are
 * full), where every error <= floor <= N / k. So every key with a true
 * count above N / k is listed, with its count within N / k of the truth.
 *
 * Merging. sl_topk_merge adds what one summary holds into another: a key
 * missing from one side is counted there as that side's floor (its true
 * count there is at most that), count and error alike, and the floors add
 * up. With room in the target for every key of both (a target of k at
 * least their keys together, as a server merging its threads' summaries
 * sizes it), the merge loses nothing and the bounds above hold for the
 * union: N the sum of the N's, floor the sum of the floors, at most N / k
 * when every summary merged has k counters. A target without that room
 * keeps the largest counts and raises its floor to the largest it drops:
 * the two inequalities and "a key not listed has at most floor" still
 * hold, but floor may then exceed N / k.
 *
 * Sampling. A caller that adds each event with probability 1/S and n = S
 * (S may change from one add to the next) gets for each key a weighted
 * count W of expectation its true count t and variance at most t (S - 1),
 * S the largest n (sl_topk_stats.max_n). The bounds above hold for W, N
 * being the weights added: so t is within count - error - 3 sqrt(t (S - 1))
 * and count + 3 sqrt(t (S - 1)) with probability about 99.7%.
 *
 * Keys are byte strings of any length. A summary keeps the first
 * SL_TOPK_KEY_MAX bytes of each; a longer key is told apart from another by
 * its length, those bytes and a seeded 64-bit hash of all of it (two keys
 * that agree on all three, which a caller who does not know the seed
 * cannot arrange, would share a counter), and is listed with its length
 * and its first SL_TOPK_KEY_MAX bytes.
 *
 * The recent window. With window_ns > 0 a summary keeps two generations,
 * each one window of the caller's clock, aligned on multiples of window_ns
 * (generation g counts the adds with now in [g * window_ns, (g + 1) *
 * window_ns)): the current one, and the one before it. At `now` the
 * summary answers for both together, that is for the adds since the start
 * of the previous window: the last window_ns to 2 * window_ns of time. An
 * add in a later window starts a new generation (the older one is
 * dropped); an add with a `now` before the current generation's window
 * counts in the current one. Each generation has its k counters, so the
 * bounds hold with N the adds of both and k counters, merged as above.
 * With window_ns 0 there is one generation, from sl_topk_new or the last
 * sl_topk_clear, and `now` is ignored.
 *
 * Memory: sl_topk_bytes(k, window_ns), fixed at sl_topk_new, about 140
 * bytes per counter and generation. Listing a windowed summary allocates
 * one of twice its size for as long as the call. No clock is read and no
 * lock taken: a summary shared by threads is the caller's to serialize.
 */
#define SL_TOPK_KEY_MAX 64          /* bytes of a key a summary keeps */
#define SL_TOPK_K_MAX (1u << 20)    /* the most counters of one summary */

typedef struct sl_topk sl_topk;

typedef struct sl_topk_config {
    size_t k;          /* counters, 1 .. SL_TOPK_K_MAX */
    int64_t window_ns; /* 0: one generation; else the window, 1 .. SL_SPAN_MAX */
    uint64_t seed;     /* the hash's: pass random bytes, so that clients cannot choose keys
                          that collide; summaries merged together need the same seed */
} sl_topk_config;

/* One key as a summary lists it. */
typedef struct sl_topk_entry {
    uint64_t count; /* at least the key's true count */
    uint64_t error; /* count - error is at most its true count */
    size_t len;     /* the key's length; more than SL_TOPK_KEY_MAX: only the first
                       SL_TOPK_KEY_MAX bytes are in key */
    unsigned char key[SL_TOPK_KEY_MAX];
} sl_topk_entry;

typedef struct sl_topk_stats {
    uint64_t total; /* N: the units added over the window (both generations) */
    uint64_t floor; /* every key not listed has a true count of at most floor */
    uint64_t max_n; /* the largest n of one add over the window (0: none): a caller that
                       counts 1 in S events with n = S reads back how coarse the counts are */
    size_t keys;    /* keys held (listed) */
    size_t k;       /* counters per generation */
    size_t bytes;   /* the memory the summary holds (sl_topk_bytes) */
} sl_topk_stats;

/* The bytes a summary of k counters (with window_ns, which only says
 * whether there are two generations) holds; 0 for a k out of range. */
SL_API size_t sl_topk_bytes(size_t k, int64_t window_ns);

/*
 * Makes an empty summary. On SL_OK, *out is the caller's, freed with
 * sl_topk_free. SL_ERR_ARGUMENT for a k or window out of range or a NULL
 * pointer, SL_ERR_NOMEM.
 */
SL_API sl_status sl_topk_new(const sl_topk_config *cfg, sl_topk **out);

/* Frees a summary; NULL is allowed. */
SL_API void sl_topk_free(sl_topk *t);

/* Forgets every key: the summary is as new (its generations too). */
SL_API void sl_topk_clear(sl_topk *t);

/*
 * Counts n units (n >= 1; 0 does nothing) of the key's len bytes at `now`.
 * Counts saturate at UINT64_MAX. Returns SL_OK, SL_ERR_KEY for an empty key
 * (len 0), SL_ERR_ARGUMENT for a NULL pointer.
 */
SL_API sl_status sl_topk_add(sl_topk *t, const void *key, size_t len, uint64_t n, int64_t now);

/*
 * Adds what `from` holds at `now` (its window's generations, merged) into
 * `into`, a summary without a window (window_ns 0) and with from's seed;
 * from is left as it was. Returns SL_OK, SL_ERR_ARGUMENT (a window on into,
 * another seed, into == from, a NULL pointer), SL_ERR_NOMEM (into may then
 * hold part of from: clear it).
 */
SL_API sl_status sl_topk_merge(sl_topk *into, const sl_topk *from, int64_t now);

/*
 * Lists the keys the summary holds at `now`, the largest counts first (equal
 * counts by their key's bytes, then length), up to cap of them, into out[]
 * (the caller's); *n gets how many. Returns SL_OK, SL_ERR_ARGUMENT,
 * SL_ERR_NOMEM.
 */
SL_API sl_status sl_topk_list(const sl_topk *t, int64_t now, sl_topk_entry *out, size_t cap,
                              size_t *n);

/* The summary's N, floor, keys and size at `now`; SL_ERR_ARGUMENT for a
 * NULL pointer. */
SL_API sl_status sl_topk_stats_get(const sl_topk *t, int64_t now, sl_topk_stats *st);

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_H */
