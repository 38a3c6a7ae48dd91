/*
 * sluice_client.h: the client's half of rate limiting, in libsluice.
 *
 * A server that limits only turns a client's retries into refusals at the
 * same rate. A client that behaves does four things, and this header gives
 * one piece for each, in plain C over caller-owned memory:
 *
 *   1. it reads what the server says about its limits: the IETF fields
 *      RateLimit-Policy and RateLimit, the X-RateLimit-* family and
 *      Retry-After (sl_rl_parse);
 *   2. it mirrors those limits in a local limiter, and waits before sending
 *      instead of being refused after (sl_client_limiter);
 *   3. when a request fails, it backs off with jitter, never sooner than the
 *      server asked, and gives up at a deadline (sl_backoff, sl_retry);
 *   4. it retries at most a share of its first attempts (sl_retry_budget),
 *      so that a fleet of clients cannot multiply the load of a service that
 *      is already refusing them.
 *
 * One request's life, with all four:
 *
 *   its first attempt   sl_retry_start(&retry, &backoff, now, NULL, NULL)
 *                       sl_retry_budget_record_attempt(&budget, now, 1)
 *   each attempt        sleep sl_client_limiter_wait(&lim, now, 1) ns, then
 *                       sl_client_limiter_try_acquire(&lim, now, 1) == 1: send
 *   each response       sl_rl_parse(lines, n, unix_ms, &h)
 *                       sl_client_limiter_update(&lim, &h, status, now)
 *   a 429, 503, failure sl_retry_next(&retry, now, sl_rl_retry_after_ns(&h), &delay) == 1
 *                       and sl_retry_budget_try_retry(&budget, now) == 1:
 *                       sleep delay ns, then the next attempt; else give up
 *
 * Conventions: as in sluice.h, time is int64 nanoseconds on a clock the
 * caller reads and passes in as `now` (CLOCK_MONOTONIC), in
 * [0, SL_TIME_MAX]; nothing here allocates or does I/O (but the default
 * random source's one getrandom(2), below); every struct is the caller's. The header parser also takes the wall clock (Unix
 * milliseconds), for the fields that give a date. Functions answer an
 * sl_status, or a count, or 1 / 0 for yes / no, with negative values for
 * errors (sl_strerror says what each means). The source is in src/client/.
 */
#ifndef SLUICE_CLIENT_H
#define SLUICE_CLIENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- random numbers (src/client/rand.c) ---- */

/*
 * Jitter needs random numbers, and a test needs the same ones every run:
 * every function that draws takes a source, a function and its state. The
 * function returns 64 uniformly random bits and may change *state.
 *
 * sl_rng is one such source, small and fast (SplitMix64: a counter moved by
 * an odd constant and mixed; not for secrets), seeded by the caller:
 *
 *     sl_rng rng;
 *     sl_rng_seed(&rng, 42);
 *     sl_backoff_delay(&b, attempt, 0, 0, sl_rng_next, &rng);
 *
 * A NULL function means the process's default source: a SplitMix64 shared
 * by every thread (each draw one atomic add), seeded once from getrandom(2),
 * so that the clients of a fleet do not all jitter alike.
 */
typedef uint64_t (*sl_rand_fn)(void *state);

typedef struct sl_rng {
    uint64_t state;
} sl_rng;

/* Seeds *r: the same seed gives the same draws. */
SL_API void sl_rng_seed(sl_rng *r, uint64_t seed);

/* The next 64 bits of the sl_rng at `rng` (an sl_rand_fn). Not thread-safe:
 * one sl_rng per thread, or the default source. */
SL_API uint64_t sl_rng_next(void *rng);

/* ---- backoff between retries (src/client/backoff.c) ---- */

/*
 * How long to sleep before retry number n (0 for the first retry):
 *
 *   full jitter (the default): uniform in [0, min(cap, base * 2^n)]
 *
 *       cap  |                 ______________________
 *            |             ___/   each draw anywhere
 *            |         ___/       below the line
 *       base |  ______/
 *            +---+---+---+---+---+---+---> n
 *
 *   decorrelated jitter: uniform in [base, 3 * previous sleep], at most
 *   cap; the first previous sleep is base. Each sleep grows from the last,
 *   with no attempt count.
 *
 * Either way the sleep is then raised to what the server asked (a
 * Retry-After, or CL.THROTTLE's retry_after), which may exceed the cap:
 * the server knows better. Draws are integer nanoseconds, each value of the
 * interval (both ends included) equally likely.
 *
 * An sl_backoff is the policy, never changed once filled: one may serve
 * every thread. An sl_retry is one request's retries (its first attempt's
 * time, its count, its previous sleep): one per request, used by one
 * thread at a time. Its deadline is measured from the first attempt: a
 * sleep that would end past it is not taken, and the request gives up.
 */
#define SL_BACKOFF_NO_DEADLINE INT64_C(-1)

typedef struct sl_backoff {
    int64_t base_ns;     /* > 0: the first ceiling (full), the least sleep (decorrelated) */
    int64_t cap_ns;      /* >= base_ns, <= SL_SPAN_MAX: the most a draw gives */
    int64_t deadline_ns; /* >= 0, from the first attempt; SL_BACKOFF_NO_DEADLINE: none */
    bool decorrelated;   /* decorrelated jitter, else full jitter */
} sl_backoff;

/* Fills *b. Returns SL_OK, or SL_ERR_ARGUMENT (and *b zeroed) for a base
 * not above 0, a cap below the base or above SL_SPAN_MAX, or a deadline
 * below 0 that is not SL_BACKOFF_NO_DEADLINE. */
SL_API sl_status sl_backoff_init(sl_backoff *b, int64_t base_ns, int64_t cap_ns,
                                 int64_t deadline_ns, bool decorrelated);

/*
 * One draw: the sleep in ns before retry number `attempt` (>= 0; any
 * value, 2^n saturates at the cap), at least `retry_after_ns` (<= 0: the
 * server said nothing). `previous_ns` is the sleep before this one, for
 * decorrelated jitter (<= 0: none yet, base is used). `rand` and its
 * `rand_state` are the random source (NULL: the default). Answers a value
 * in [0, max(cap, retry_after_ns)], or SL_ERR_ARGUMENT for a negative
 * attempt or a *b that sl_backoff_init did not fill.
 */
SL_API int64_t sl_backoff_delay(const sl_backoff *b, int64_t attempt, int64_t previous_ns,
                                int64_t retry_after_ns, sl_rand_fn rand, void *rand_state);

typedef struct sl_retry {
    const sl_backoff *backoff; /* the caller's, outliving the retries */
    int64_t start;             /* ns: the first attempt */
    int64_t attempt;           /* retries granted so far */
    int64_t previous_ns;       /* the last sleep granted; 0 none */
    sl_rand_fn rand;           /* NULL: the default source */
    void *rand_state;
} sl_retry;

/* Starts the retries of a request whose first attempt is at `now`, under
 * *b, drawing from rand / rand_state (NULL: the default source). Returns
 * SL_OK, SL_ERR_ARGUMENT for a NULL pointer, SL_ERR_TIME. */
SL_API sl_status sl_retry_start(sl_retry *r, const sl_backoff *b, int64_t now, sl_rand_fn rand,
                                void *rand_state);

/*
 * The next retry, asked at `now` after a failed attempt whose answer said
 * to wait retry_after_ns (<= 0: it said nothing). Returns 1 and sets
 * *delay_ns to the sleep (sl_backoff_delay's draw for this attempt), or 0
 * when that sleep would end past the deadline: give up (nothing counted;
 * *delay_ns is the sleep that did not fit). SL_ERR_TIME for a `now` out of
 * range, SL_ERR_ARGUMENT for a NULL pointer.
 */
SL_API int sl_retry_next(sl_retry *r, int64_t now, int64_t retry_after_ns, int64_t *delay_ns);

/* ---- the retry budget (src/client/budget.c) ---- */

/*
 * Retries at most ratio of the first attempts made over a sliding period,
 * plus a floor of min_per_second retries a second (so that a client that
 * sends little may still retry): gRPC's retry throttling and Finagle's
 * budgets have this shape. When a service refuses everything, its clients'
 * retries add at most that share to its load instead of multiplying it.
 *
 * The counts live in `slots` slots of period / slots each, a ring: the
 * window is the current slot and the slots - 1 before it. A retry is
 * allowed when, counting it, the retries in the window are at most
 *
 *     ratio_permille / 1000 * (first attempts in the window)
 *       + min_per_second_milli / 1000 * period_ns / 10^9
 *
 * compared exactly, on integers. So over any stretch of time no longer
 * than (slots - 1) slots, the retries allowed are at most ratio times the
 * first attempts of that stretch and of the one slot before it, plus the
 * floor. A `now` older than the newest slot counts in the newest.
 *
 * Thread-safe: a mutex inside, held for a few dozen additions a call (a
 * budget belongs to a client, and its threads share it). Memory: the
 * struct, the caller's; sl_retry_budget_destroy when done.
 */
#define SL_RETRY_BUDGET_SLOTS_MAX 64

typedef struct sl_retry_budget_config {
    int64_t ratio_permille;       /* retries per 1000 first attempts, [0, 10^6]: 100 is 10% */
    int64_t min_per_second_milli; /* thousandths of a retry a second, [0, 10^9]: 1000 is 1/s */
    int64_t period_ns;            /* the window, [slots, SL_SPAN_MAX] */
    int slots;                    /* [1, SL_RETRY_BUDGET_SLOTS_MAX]; 0: 20 */
} sl_retry_budget_config;

typedef struct sl_retry_budget {
    pthread_mutex_t lock;
    sl_retry_budget_config cfg;
    int64_t width_ns; /* a slot: period_ns / slots, rounded down */
    int64_t newest;   /* now / width_ns of the newest slot; -1 before the first call */
    int64_t first[SL_RETRY_BUDGET_SLOTS_MAX]; /* first attempts per slot */
    int64_t retry[SL_RETRY_BUDGET_SLOTS_MAX]; /* retries allowed per slot */
} sl_retry_budget;

/* Starts an empty budget under *cfg (copied). Returns SL_OK, SL_ERR_ARGUMENT
 * for a NULL pointer or a field out of its range, SL_ERR_NOMEM when the
 * mutex cannot be made. */
SL_API sl_status sl_retry_budget_init(sl_retry_budget *b, const sl_retry_budget_config *cfg);

/* Destroys the mutex. No thread may be using the budget. */
SL_API void sl_retry_budget_destroy(sl_retry_budget *b);

/* Counts n (>= 0) first attempts (not retries) at `now`. Returns SL_OK,
 * SL_ERR_TIME, SL_ERR_ARGUMENT for a negative n. A slot's count saturates. */
SL_API sl_status sl_retry_budget_record_attempt(sl_retry_budget *b, int64_t now, int64_t n);

/* 1, and the retry counted, when the budget allows one more at `now`; 0 when
 * not (nothing counted); SL_ERR_TIME. */
SL_API int sl_retry_budget_try_retry(sl_retry_budget *b, int64_t now);

/* 1 when a retry would be allowed at `now`, 0 when not; counts nothing.
 * SL_ERR_TIME. */
SL_API int sl_retry_budget_can_retry(sl_retry_budget *b, int64_t now);

/* The first attempts and the retries in the window at `now` (either pointer
 * may be NULL). Returns SL_OK or SL_ERR_TIME (then both are 0). */
SL_API sl_status sl_retry_budget_counts(sl_retry_budget *b, int64_t now, int64_t *firsts,
                                        int64_t *retries);

/* ---- what servers say: rate limit fields (src/client/headers.c, sf.c) ---- */

/*
 * sl_rl_parse reads a response's field lines, the caller's slices (as
 * picohttpparser hands them out), and fills a caller-owned sl_rl_headers:
 *
 *   RateLimit-Policy: "burst";q=10;w=1, "daily";q=1000;w=86400
 *   RateLimit: "burst";r=0;t=6, "daily";r=990;t=864
 *   X-RateLimit-Limit: 10            (or the earlier drafts' RateLimit-Limit)
 *   X-RateLimit-Remaining: 0
 *   X-RateLimit-Reset: 6             (seconds, or an epoch in s or ms)
 *   Retry-After: 6                   (seconds, or an HTTP-date)
 *
 * The rules are the ones every sluice client follows, stated in
 * tests/vectors/README.md and checked on its table of cases. In short:
 * names are case-insensitive; the lines of RateLimit-Policy and of
 * RateLimit join with ", " into one value, of a single field the first
 * line counts; a value above SL_RL_FIELD_MAX bytes is ignored whole. The
 * two IETF fields are RFC 9651 Lists, parsed here (strings, tokens,
 * integers, decimals, byte sequences, booleans, dates, display strings,
 * parameters; inner lists are skipped): a value that is not a List is
 * ignored whole, as RFC 9651 says. Of their members the first
 * SL_RL_MEMBERS_MAX that are usable are kept; a member is skipped when a
 * parameter it needs is missing or of the wrong type (`q`, `r`: Integers
 * >= 0; `w` > 0 and `t` >= 0 when present; `qu` a String or Token; `pk` a
 * Byte Sequence) or when a text it carries does not fit its buffer below.
 * Parameters come in any order, unknown ones are ignored, of a repeated
 * one the last counts. The call never fails: what cannot be read is left
 * out, and `ignored` and the *_error texts say what and why.
 *
 * Texts are copied, unescaped and NUL-terminated, into fixed buffers of
 * the struct (a String's escapes undone; a Byte Sequence's base64 text as
 * sent). Durations are milliseconds, as the fields give them at best: the
 * vectors' exact answers, a fraction of a millisecond rounded up.
 *
 * Bounded: one pass over each value, a copy of at most SL_RL_FIELD_MAX
 * bytes on the stack, no recursion, no allocation. Thread-safe (no state).
 */
#define SL_RL_MEMBERS_MAX 16      /* members kept of each field */
#define SL_RL_FIELD_MAX 4096      /* bytes of a value (a list field's, joined) */
#define SL_RL_NAME_MAX 64         /* a name's buffer: at most 63 bytes and a NUL */
#define SL_RL_UNIT_MAX 32         /* a `qu`'s buffer: at most 31 bytes and a NUL */
#define SL_RL_PARTITION_MAX 128   /* a `pk`'s base64 text: at most 127 bytes and a NUL */

/* A field line: the caller's bytes, not NUL-terminated, read and never kept
 * (the layout of picohttpparser's struct phr_header). */
typedef struct sl_header_line {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
} sl_header_line;

/* One member of RateLimit-Policy: `quota` units per `window_s` seconds. */
typedef struct sl_rl_policy {
    bool has_name;                 /* false: the earlier drafts' integer item (the quota) */
    char name[SL_RL_NAME_MAX];     /* "" without a name */
    size_t name_len;
    int64_t quota;                 /* q, >= 0 */
    bool has_window;
    int64_t window_s;              /* w, > 0, when has_window */
    bool has_unit;
    char unit[SL_RL_UNIT_MAX];     /* qu ("requests", "content-bytes", ...) */
    size_t unit_len;
    bool has_partition;
    char partition[SL_RL_PARTITION_MAX]; /* pk's base64 text */
    size_t partition_len;
} sl_rl_policy;

/* One member of RateLimit: `remaining` units now, all back in `reset_ms`. */
typedef struct sl_rl_limit {
    char name[SL_RL_NAME_MAX];     /* the policy it reports on */
    size_t name_len;
    int64_t remaining;             /* r, >= 0 */
    bool has_reset;
    int64_t reset_ms;              /* t * 1000, >= 0, when has_reset */
    bool has_partition;
    char partition[SL_RL_PARTITION_MAX];
    size_t partition_len;
} sl_rl_limit;

/* Bits of sl_rl_headers.ignored: a field that was there and was left out
 * whole (an X- field: its value is then absent). */
enum {
    SL_RL_IGNORED_POLICY = 1 << 0,      /* RateLimit-Policy: not a List, or too long */
    SL_RL_IGNORED_RATELIMIT = 1 << 1,   /* RateLimit: likewise */
    SL_RL_IGNORED_X_LIMIT = 1 << 2,     /* not an integer that fits 64 bits */
    SL_RL_IGNORED_X_REMAINING = 1 << 3, /* likewise */
    SL_RL_IGNORED_X_RESET = 1 << 4,     /* not a number >= 0 */
    SL_RL_IGNORED_RETRY_AFTER = 1 << 5, /* neither seconds nor an HTTP-date */
};

/* What a response said. 8.5 KiB: keep one per connection, or on the heap. */
typedef struct sl_rl_headers {
    size_t policy_count;
    sl_rl_policy policies[SL_RL_MEMBERS_MAX];
    size_t limit_count;
    sl_rl_limit limits[SL_RL_MEMBERS_MAX];
    size_t policies_skipped; /* members of RateLimit-Policy read and not kept */
    size_t limits_skipped;   /* likewise of RateLimit */

    /* X-RateLimit-Limit, -Remaining, -Reset; when none of the three is
     * there, the earlier drafts' RateLimit-Limit, -Remaining, -Reset. */
    bool has_x;             /* one of a family was there */
    bool has_x_limit;
    int64_t x_limit;        /* the value's leading integer ("100, 100;w=60": 100) */
    bool has_x_remaining;
    int64_t x_remaining;    /* a negative one reads as 0 */
    bool has_x_reset;
    int64_t x_reset_ms;     /* from now, >= 0: seconds, or an epoch in s (>= 10^9) or ms (>= 10^12) */

    bool has_retry_after;
    int64_t retry_after_ms; /* from now, >= 0: delay-seconds, or an HTTP-date; saturates */

    uint32_t ignored;          /* SL_RL_IGNORED_* */
    const char *policy_error;  /* why RateLimit-Policy was ignored (static text); NULL */
    const char *limit_error;   /* why RateLimit was ignored; NULL */
} sl_rl_headers;

/*
 * Reads the rate limit fields of `lines[0 .. n)` (NULL with n 0: none) into
 * *out (every field of it written). `now_unix_ms` is the wall clock when
 * the response came, in Unix milliseconds, for the values that are dates
 * (an epoch X-RateLimit-Reset, an HTTP-date Retry-After); a date in the
 * past reads as 0. Never fails.
 */
SL_API void sl_rl_parse(const sl_header_line *lines, size_t n, int64_t now_unix_ms,
                        sl_rl_headers *out);

/*
 * One Retry-After value (len bytes): 1 and *ms set to the wait from now in
 * milliseconds (delay-seconds, a fraction rounded up to the millisecond,
 * saturating at INT64_MAX; or an HTTP-date in any of RFC 9110's three forms,
 * against now_unix_ms, 0 when past), or 0 when it is neither.
 */
SL_API int sl_rl_parse_retry_after(const char *value, size_t len, int64_t now_unix_ms,
                                   int64_t *ms);

/* The wait *h's Retry-After asks for, in ns (saturating at SL_TIME_MAX), or
 * 0 when it said none: what sl_retry_next and sl_backoff_delay take. */
SL_API int64_t sl_rl_retry_after_ns(const sl_rl_headers *h);

/* ---- the client-side limiter (src/client/limiter.c) ---- */

/*
 * A local mirror of the limits a server advertises, so that a client waits
 * before sending rather than being refused after.
 *
 * Each RateLimit-Policy member with a window (q per w seconds) gets a GCRA
 * of its own: an sl_limit from sl_limit_init(SL_GCRA, q, w * 10^9, q), so a
 * burst of q, and sl_take / sl_peek decide; no arithmetic of its own. A
 * response's RateLimit member for that policy (r remaining) sets its state
 * so that exactly r remain: a full state that took q - r at `now`, that is
 * TAT = now + (q - r) * T. From there the mirror refills as the server's
 * bucket does.
 *
 *   after "q=10;w=1" and "r=3":   now                TAT = now + 7T
 *                                  |<--- 7 taken --->|<-- 3 left -->|
 *                                                           now + tau (10T)
 *
 * A request of cost c is admitted only when every policy admits it, and
 * then it takes from all of them (all or nothing). A policy whose q is 0
 * admits nothing until its reset (its RateLimit member's t, else w). A
 * 429 or 503 whose Retry-After says to wait admits nothing before then
 * (sl_client_limiter_block does the same for a CL.THROTTLE reply's
 * retry_after). A response with no RateLimit-Policy but X-RateLimit-
 * Remaining and -Reset gives a window: that many until the reset, then
 * nothing known (admit).
 *
 * At most SL_CLIENT_POLICIES_MAX policies are kept, by name (an unnamed one
 * by its place in the field); past that, the least recently advertised
 * goes. A policy advertised again with the same q and w keeps its state,
 * with others it starts again full. A window too long for a GCRA (w above
 * SL_SPAN_MAX ns, 73 years) is not mirrored.
 *
 * Thread-safe: one mutex around every call (a client's threads share the
 * limiter). Memory: the struct, the caller's (22 KiB: on the heap, or
 * static); sl_client_limiter_destroy when done.
 */
#define SL_CLIENT_POLICIES_MAX 64

typedef struct sl_client_policy {
    bool used;
    bool has_name;                 /* false: unnamed, by its place `index` */
    int index;
    char name[SL_RL_NAME_MAX];
    size_t name_len;
    int64_t quota, window_s;
    uint64_t seen;                 /* when last advertised (the limiter's count) */
    sl_limit limit;                /* SL_GCRA, q per w s, burst q; unused when quota 0 */
    int64_t state[2];              /* its GCRA state */
} sl_client_policy;

typedef struct sl_client_limiter {
    pthread_mutex_t lock;
    sl_client_policy policies[SL_CLIENT_POLICIES_MAX];
    uint64_t updates;        /* responses taken in: the clock of `seen` */
    bool has_window;         /* X-RateLimit-* only: */
    int64_t window_left;     /* units left until window_reset */
    int64_t window_reset;    /* ns */
    int64_t blocked_until;   /* ns: nothing admitted before */
} sl_client_limiter;

/* What sl_client_limiter_policies lists. */
typedef struct sl_client_policy_info {
    bool has_name;
    char name[SL_RL_NAME_MAX];
    int64_t quota, window_s;
    int64_t remaining; /* units a request could take now, as the mirror sees it */
} sl_client_policy_info;

/* Starts a limiter that knows nothing (admits everything). Returns SL_OK,
 * SL_ERR_ARGUMENT for NULL, SL_ERR_NOMEM when the mutex cannot be made. */
SL_API sl_status sl_client_limiter_init(sl_client_limiter *l);

/* Destroys the mutex. No thread may be using the limiter. */
SL_API void sl_client_limiter_destroy(sl_client_limiter *l);

/*
 * Takes in what a response said (*h, from sl_rl_parse) when it came, at
 * `now`. `status` is its HTTP status: its Retry-After blocks on a 429 or a
 * 503, or when the status is not known (0); not on another status. Returns
 * SL_OK, SL_ERR_TIME, SL_ERR_ARGUMENT for a NULL pointer.
 */
SL_API sl_status sl_client_limiter_update(sl_client_limiter *l, const sl_rl_headers *h,
                                          int status, int64_t now);

/* Admits nothing for wait_ns (>= 0) from `now` (a RESP reply's
 * retry_after); a block already longer stays. SL_OK, SL_ERR_TIME,
 * SL_ERR_ARGUMENT. */
SL_API sl_status sl_client_limiter_block(sl_client_limiter *l, int64_t now, int64_t wait_ns);

/* Nanoseconds from `now` until a request of `cost` (>= 0) would be admitted:
 * 0 now, SL_NEVER when never (it exceeds a policy's quota). SL_ERR_COST,
 * SL_ERR_TIME, SL_ERR_ARGUMENT. Takes nothing. */
SL_API int64_t sl_client_limiter_wait(sl_client_limiter *l, int64_t now, int64_t cost);

/* 1 when every local limit admits `cost` at `now`, and then it is taken
 * from all of them; 0 when one refuses, and nothing is taken. SL_ERR_COST,
 * SL_ERR_TIME, SL_ERR_ARGUMENT. */
SL_API int sl_client_limiter_try_acquire(sl_client_limiter *l, int64_t now, int64_t cost);

/* Lists up to `cap` of the policies kept, oldest advertised first, with
 * what remains of each at `now`, into out[]; returns how many there are
 * (which may exceed cap), or SL_ERR_TIME, SL_ERR_ARGUMENT. */
SL_API int sl_client_limiter_policies(sl_client_limiter *l, int64_t now,
                                      sl_client_policy_info *out, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* SLUICE_CLIENT_H */
