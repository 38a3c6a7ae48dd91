/*
 * sluice_resp.h: a small C client for sluiced over RESP, on hiredis.
 *
 * libsluice_client (pkg-config sluice-client). It speaks to sluiced's RESP
 * port, or to a Redis that loaded sluice-redis.so (the same commands, the
 * same replies; docs/commands.md), and answers in libsluice's own struct,
 * sl_decision, with durations back in nanoseconds.
 *
 * Two contexts, as hiredis has two:
 *
 *   sl_rc          blocking: one call per command, which sends it and waits
 *                  for its reply (hiredis's redisContext underneath)
 *   sl_rc_async    on a libuv loop: the same calls, each with a callback;
 *                  as many calls outstanding as you like, written together
 *                  and answered in order (hiredis's redisAsyncContext)
 *
 *   command                          sync              async
 *   CL.THROTTLE key b n p [q]        sl_rc_throttle    sl_rc_async_throttle
 *   SL.TAKE key limit period ...     sl_rc_take        sl_rc_async_take
 *   SL.PEEK key limit period ...     sl_rc_peek        sl_rc_async_peek
 *   SL.POLICY policy key ...         sl_rc_policy      sl_rc_async_policy
 *   SL.TAKEMANY n keys LIMIT ...     sl_rc_take_many   sl_rc_async_take_many
 *   SL.RESET key [key ...]           sl_rc_reset       sl_rc_async_reset
 *   SL.ACQUIRE key max ttl [WEIGHT]  sl_rc_acquire     sl_rc_async_acquire
 *   SL.ACQUIRE ... ADAPTIVE | POLICY sl_rc_acquire_adaptive  (and _async_)
 *   SL.RELEASE key id [...]          sl_rc_release     sl_rc_async_release
 *
 * The protocol is RESP2: a decision comes as a flat array of names and
 * values, which the client reads by name (the order and any field it does
 * not know do not matter). RESP3's maps carry the same fields, but Debian
 * 12's hiredis (0.14) reads RESP2 only, and RESP2 is every server's default.
 *
 * Errors stick to the context, as in hiredis: a call returns -1 and sets
 * `err` (an sl_rc_err) and `errstr` (NUL-terminated text that says what was
 * wrong: the server's own error reply, as "ERR unknown policy 'x'", or
 * "cannot connect to 127.0.0.1:7379: Connection refused"). The text is
 * written into the context's own array: no error path allocates. Which
 * errors end a context:
 *
 *   SL_RC_ERR_IO      the connection failed (refused, reset, closed, timed
 *                     out, bytes that are not RESP; async: a reply later
 *                     than sl_rc_async_set_timeout's limit): the context is
 *                     dead, every later call fails at once with the same
 *                     error; free it and connect again
 *   SL_RC_ERR_SERVER  the server answered an error reply (a bad argument,
 *                     NOAUTH, WRONGPASS, WRONGTYPE): the next call goes on
 *   SL_RC_ERR_REPLY   a reply of another shape than the command's (not a
 *                     sluice server?): the next call goes on
 *   SL_RC_ERR_ARGS    the call's own arguments are invalid: nothing was sent
 *   SL_RC_ERR_OOM     out of memory: nothing was sent
 *   SL_RC_ERR_CLOSED  (async) the caller freed the context before the reply
 *
 * A rejection is not an error: it is a decision with allowed false.
 *
 * Memory: sl_rc_connect and sl_rc_async_connect allocate the context; the
 * caller frees it with sl_rc_free / sl_rc_async_free, whatever happened.
 * Every other function writes into memory the caller owns (the sl_decision,
 * sl_rc_policy_info and sl_rc_lease out-parameters) and keeps no pointer to
 * its arguments after it returns: strings are copied into the request.
 * A callback's pointers (the decision, errstr, ...) are valid only during
 * the callback.
 *
 * Keys, names and lease ids are NUL-terminated strings. A context is used
 * by one thread at a time.
 */
#ifndef SLUICE_RESP_H
#define SLUICE_RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sl_rc_err {
    SL_RC_OK = 0,
    SL_RC_ERR_IO,
    SL_RC_ERR_SERVER,
    SL_RC_ERR_REPLY,
    SL_RC_ERR_ARGS,
    SL_RC_ERR_OOM,
    SL_RC_ERR_CLOSED,
} sl_rc_err;

#define SL_RC_ERRSTR_MAX 256 /* bytes of errstr, its NUL included */
#define SL_RC_NAME_MAX 128   /* bytes of a limit's name in a policy's answer */
#define SL_RC_LEASE_MAX 64   /* bytes of a lease id (sluiced's are 24 hex digits) */
#define SL_RC_RESET_MAX 256  /* keys of one SL.RESET */

/* ------------------------------------------------------------------------ */
/* What the calls take and give                                             */
/* ------------------------------------------------------------------------ */

/*
 * An ad-hoc limit, as SL.TAKE, SL.PEEK and SL.TAKEMANY send it. A zeroed
 * struct with limit and period_ms set is a GCRA limit with the server's
 * defaults for everything else.
 */
typedef struct sl_rc_limit {
    int64_t limit;          /* units per period, at least 1 */
    int64_t period_ms;      /* the period in milliseconds (sent as "<n>ms") */
    int64_t months;         /* instead of period_ms when > 0: calendar months
                               (sent as "<n>mo", docs/commands.md) */
    int64_t burst;          /* the most at once; 0 omits BURST (the limit) */
    sl_algorithm algorithm; /* SL_GCRA (0) omits ALGORITHM; never SL_CONCURRENCY */
    const char *utc_offset; /* UTCOFFSET ("+05:30", "Z"), or NULL for none */
    int reset_day;          /* RESETDAY 1 .. 31, or 0 for none */
} sl_rc_limit;

/* One limit of SL.TAKEMANY: its key, its limit, its cost (0 peeks). */
typedef struct sl_rc_item {
    const char *key;
    sl_rc_limit limit;
    int64_t cost;
} sl_rc_item;

/* What SL.POLICY answers beside its decision. */
typedef struct sl_rc_policy_info {
    int rejected_by;                 /* -1 admitted, else the first limit that refused */
    bool global;                     /* scope: the numbers are a global limit's */
    char binding[SL_RC_NAME_MAX];    /* the limit whose numbers the decision shows */
    bool shadow;                     /* a dry-run policy: the decision says go */
    bool would_allow;                /* shadow: the real answer */
    int64_t would_retry_after_ns;    /* shadow: the real wait (SL_NEVER never) */
} sl_rc_policy_info;

/* A lease of SL.ACQUIRE: granted with its id, or refused (a null reply). */
typedef struct sl_rc_lease {
    bool granted;
    char id[SL_RC_LEASE_MAX + 1]; /* NUL-terminated; "" when refused */
} sl_rc_lease;

/*
 * An adaptive lease (SL.ACQUIRE ... ADAPTIVE, or SL.ACQUIRE key POLICY
 * name; docs/concurrency.md). With `policy` the config file says the rest;
 * without it, max_in_flight and ttl_ms are required and the estimator's
 * options are sent when set.
 */
typedef struct sl_rc_adaptive {
    const char *policy;      /* an adaptive policy of the config, or NULL */
    const char *partition;   /* with policy: its partition, or NULL */
    int64_t max_in_flight;   /* without policy: the most the estimate may reach */
    int64_t ttl_ms;          /* without policy: the lease's TTL */
    const char *estimator;   /* aimd, vegas, gradient2, anchored; NULL: the server's */
    int64_t min_limit;       /* MIN; 0 omits it */
    int64_t initial_limit;   /* INITIAL; 0 omits it */
    const char *priority;    /* critical, default, sheddable; NULL omits it */
} sl_rc_adaptive;

/*
 * How an adaptive lease ended, for SL.RELEASE (NULL for a fixed lease).
 */
typedef struct sl_rc_outcome {
    const char *policy;   /* the POLICY the lease was acquired under, or NULL */
    int64_t latency_us;   /* LATENCY in microseconds; < 0 omits it (sluiced
                             measures from the acquire) */
    const char *outcome;  /* success, dropped, ignored; NULL omits it (success) */
} sl_rc_outcome;

/*
 * CL.THROTTLE's five integers [limited, limit, remaining, retry_after,
 * reset_after] (seconds) as a decision: allowed = !limited, the seconds as
 * nanoseconds, retry_after_ns 0 when allowed and SL_NEVER for a refusal
 * whose retry_after is -1 (a quantity above the burst). Pure: no I/O.
 * Returns 0 with *out filled, or -1 when v[0 .. n) is not such a reply:
 * n is not 5, limited is not 0 or 1, a count is negative, retry_after is
 * below -1, or a number of seconds does not fit in int64 nanoseconds.
 */
SL_API int sl_throttle_reply_decode(const long long v[], size_t n, sl_decision *out);

/* ------------------------------------------------------------------------ */
/* The blocking client                                                      */
/* ------------------------------------------------------------------------ */

/*
 * A connection. `err` and `errstr` are the last call's error (0 and "" after
 * a call that succeeded); the rest is the library's.
 */
typedef struct sl_rc {
    int err;                        /* an sl_rc_err */
    char errstr[SL_RC_ERRSTR_MAX];
    struct redisContext *redis;     /* private: NULL once the connection failed */
    char addr[80];                  /* private: "host:port", for messages */
    int timeout_ms;                 /* private */
} sl_rc;

/*
 * Connects to host:port (a name or an address; hiredis resolves it), giving
 * up after timeout_ms (0: no limit); every reply is then awaited at most
 * timeout_ms too. Returns a context the caller frees with sl_rc_free, with
 * err set when the connection failed (every call then fails with it), or
 * NULL when out of memory.
 */
SL_API sl_rc *sl_rc_connect(const char *host, int port, int timeout_ms);

/* Closes the connection and frees the context (NULL is fine). */
SL_API void sl_rc_free(sl_rc *c);

/*
 * Hands the connected socket over: frees the context without closing its
 * file descriptor, and returns that descriptor (-1, and the context freed,
 * when it was dead). For a caller that authenticated with this client and
 * then drives the socket itself (sluice bench). Call it between calls only:
 * no reply may be pending.
 */
SL_API int sl_rc_free_keep_fd(sl_rc *c);

/* AUTH password (or AUTH user password when user is not NULL): 0, or -1
 * with SL_RC_ERR_SERVER and the server's WRONGPASS text. */
SL_API int sl_rc_auth(sl_rc *c, const char *user, const char *password);

/* CL.THROTTLE key max_burst count_per_period period_s quantity (quantity 0
 * peeks): the reply through sl_throttle_reply_decode. 0 or -1. */
SL_API int sl_rc_throttle(sl_rc *c, const char *key, int64_t max_burst, int64_t count_per_period,
                          int64_t period_s, int64_t quantity, sl_decision *out);

/* SL.TAKE key ... COST cost: 0 with *out the decision, or -1. */
SL_API int sl_rc_take(sl_rc *c, const char *key, const sl_rc_limit *l, int64_t cost,
                      sl_decision *out);

/* SL.PEEK: what SL.TAKE would answer, consuming nothing. 0 or -1. */
SL_API int sl_rc_peek(sl_rc *c, const char *key, const sl_rc_limit *l, int64_t cost,
                      sl_decision *out);

/*
 * SL.POLICY policy key COST cost [TOKENS tokens] [TIER tier]: TOKENS is sent
 * when tokens > 0, TIER when tier is not NULL. *out is the binding limit's
 * decision; *info (may be NULL) which limit that is and whether the policy
 * is a dry run. 0 or -1.
 */
SL_API int sl_rc_policy(sl_rc *c, const char *policy, const char *key, int64_t cost,
                        int64_t tokens, const char *tier, sl_decision *out,
                        sl_rc_policy_info *info);

/*
 * SL.TAKEMANY over items[0 .. n), n from 1 to SL_TAKE_MANY_MAX (8), all or
 * nothing: out[0 .. n) the decision of each, *rejected_by (may be NULL) -1
 * when all admitted, else the first that refused. 0 or -1.
 */
SL_API int sl_rc_take_many(sl_rc *c, const sl_rc_item *items, size_t n, sl_decision *out,
                           int *rejected_by);

/* SL.RESET keys[0 .. n), n from 1 to SL_RC_RESET_MAX: the number of keys
 * that held a state (>= 0), or -1. */
SL_API int64_t sl_rc_reset(sl_rc *c, const char *const *keys, size_t n);

/* SL.ACQUIRE key max_in_flight ttl_ms [WEIGHT weight] (weight 0 omits it):
 * 0 with *out the lease or the refusal, or -1. */
SL_API int sl_rc_acquire(sl_rc *c, const char *key, int64_t max_in_flight, int64_t ttl_ms,
                         int64_t weight, sl_rc_lease *out);

/* SL.ACQUIRE's adaptive forms (sl_rc_adaptive above): 0 or -1. */
SL_API int sl_rc_acquire_adaptive(sl_rc *c, const char *key, const sl_rc_adaptive *a,
                                  sl_rc_lease *out);

/* SL.RELEASE key lease_id [POLICY p] [LATENCY ms] [OUTCOME o] (o NULL for a
 * fixed lease): 1 released, 0 unknown or expired, or -1. */
SL_API int sl_rc_release(sl_rc *c, const char *key, const char *lease_id, const sl_rc_outcome *o);

/* ------------------------------------------------------------------------ */
/* The asynchronous client, on libuv                                        */
/* ------------------------------------------------------------------------ */

/*
 * A connection driven by a libuv loop (uv_loop_t is struct uv_loop_s: this
 * header does not include <uv.h>). Calls queue their command at once, on
 * the connection or, while it is being made, in hiredis's buffer; all that
 * one loop iteration queued leaves in one write, and replies come back in
 * order, each to its call's callback.
 *
 * Each call returns 0 when its command is queued: its callback is then
 * called exactly once, from the loop, with the answer or with an error
 * (the connection lost, a reply later than sl_rc_async_set_timeout's
 * limit, the context freed). It returns -1, with err and errstr set, when
 * nothing was queued (invalid arguments, the connection already lost, out
 * of memory): the callback is then never called.
 *
 * A NULL callback drops the answer (the call is still counted pending).
 * In a callback, err is 0 (the answer is in the other arguments) or an
 * sl_rc_err, with errstr saying what was wrong; the pointers it is given
 * are valid during the callback only. A callback may queue more calls,
 * and may free the context (the calls still pending are then called back
 * with SL_RC_ERR_CLOSED once it returns).
 */
struct uv_loop_s;
typedef struct sl_rc_async sl_rc_async;

typedef void(sl_rc_decision_cb)(sl_rc_async *ac, int err, const char *errstr,
                               const sl_decision *d, void *priv);
typedef void(sl_rc_policy_cb)(sl_rc_async *ac, int err, const char *errstr, const sl_decision *d,
                             const sl_rc_policy_info *info, void *priv);
typedef void(sl_rc_many_cb)(sl_rc_async *ac, int err, const char *errstr, const sl_decision *d,
                           size_t n, int rejected_by, void *priv);
/* SL.RESET's count of keys, or SL.RELEASE's 1 or 0. */
typedef void(sl_rc_count_cb)(sl_rc_async *ac, int err, const char *errstr, int64_t count,
                            void *priv);
typedef void(sl_rc_lease_cb)(sl_rc_async *ac, int err, const char *errstr,
                            const sl_rc_lease *lease, void *priv);

/*
 * Starts connecting to host:port on `loop` (host an address or a name,
 * which hiredis resolves with a blocking getaddrinfo); AUTH password (user
 * may be NULL) goes first when password is not NULL. A connection not made
 * within connect_timeout_ms (0: no limit) is given up; replies have no
 * limit until sl_rc_async_set_timeout sets one. Calls may be made at
 * once. Returns a context the caller frees with sl_rc_async_free (whatever
 * happens to the connection), with err set when it could not even start,
 * or NULL when out of memory.
 */
SL_API sl_rc_async *sl_rc_async_connect(struct uv_loop_s *loop, const char *host, int port,
                                        const char *user, const char *password,
                                        int connect_timeout_ms);

/*
 * Closes the connection at once and frees the context: each call still
 * pending is called back with SL_RC_ERR_CLOSED, from within this function
 * (or, when called from a callback, once that callback returns). The
 * socket's handle is closed on the loop's next iteration.
 */
SL_API void sl_rc_async_free(sl_rc_async *ac);

/*
 * A limit on how long a call may wait for its reply: timeout_ms
 * milliseconds from when it was queued (0: none, the default). A server
 * that accepts and then falls silent (stopped, or cut off by a network
 * that drops packets) would otherwise leave every call pending for ever.
 *
 * Replies come in order, so a late reply makes every later one late too:
 * when the oldest pending call has waited timeout_ms without its reply,
 * the connection is given up, as one the server closed would be. Every
 * pending call, the later ones included (which may have waited less), is
 * called back with SL_RC_ERR_IO and the text "HOST:PORT: no reply to
 * SL.TAKE within 250 ms" (the oldest call's command and the limit passed;
 * " (the connection not yet made)" follows when it was not), the context's
 * err and errstr say the same, and later calls fail at once with it. Free
 * the context and connect again. A call failed so may still have been
 * carried out: its command was sent, and a server that wakes up may yet
 * read it (a take counted, a lease granted that will expire by its TTL).
 * A call queued while the connection is being made counts from when it
 * was queued: the limit may end the connection before connect_timeout_ms
 * does.
 *
 * Time is the loop's clock (uv_now), read afresh (uv_update_time) when a
 * call is queued, so that the limit never starts in the past; the limit
 * is passed when the loop's clock has moved timeout_ms from there. One
 * uv_timer on the loop serves the context, armed for the oldest pending
 * call's deadline and stopped when no call is pending: it never keeps the
 * loop running on its own. A new limit applies at once to the calls
 * already pending, counted from when each was queued.
 *
 * Returns 0, or -1 with err SL_RC_ERR_ARGS when timeout_ms is negative
 * (the limit unchanged), or with the error that ended the connection
 * when it is over (as a call would).
 */
SL_API int sl_rc_async_set_timeout(sl_rc_async *ac, int timeout_ms);

/* The error that ended the connection, or of the last call that could not
 * be queued: an sl_rc_err, and its text ("" when none). */
SL_API int sl_rc_async_err(const sl_rc_async *ac);
SL_API const char *sl_rc_async_errstr(const sl_rc_async *ac);

/* Calls not yet answered. */
SL_API size_t sl_rc_async_pending(const sl_rc_async *ac);

/* The calls, as their blocking forms above, answering through a callback. */
SL_API int sl_rc_async_throttle(sl_rc_async *ac, const char *key, int64_t max_burst,
                                int64_t count_per_period, int64_t period_s, int64_t quantity,
                                sl_rc_decision_cb *cb, void *priv);
SL_API int sl_rc_async_take(sl_rc_async *ac, const char *key, const sl_rc_limit *l, int64_t cost,
                            sl_rc_decision_cb *cb, void *priv);
SL_API int sl_rc_async_peek(sl_rc_async *ac, const char *key, const sl_rc_limit *l, int64_t cost,
                            sl_rc_decision_cb *cb, void *priv);
SL_API int sl_rc_async_policy(sl_rc_async *ac, const char *policy, const char *key, int64_t cost,
                              int64_t tokens, const char *tier, sl_rc_policy_cb *cb, void *priv);
SL_API int sl_rc_async_take_many(sl_rc_async *ac, const sl_rc_item *items, size_t n,
                                 sl_rc_many_cb *cb, void *priv);
SL_API int sl_rc_async_reset(sl_rc_async *ac, const char *const *keys, size_t n,
                             sl_rc_count_cb *cb, void *priv);
SL_API int sl_rc_async_acquire(sl_rc_async *ac, const char *key, int64_t max_in_flight,
                               int64_t ttl_ms, int64_t weight, sl_rc_lease_cb *cb, void *priv);
SL_API int sl_rc_async_acquire_adaptive(sl_rc_async *ac, const char *key, const sl_rc_adaptive *a,
                                        sl_rc_lease_cb *cb, void *priv);
SL_API int sl_rc_async_release(sl_rc_async *ac, const char *key, const char *lease_id,
                               const sl_rc_outcome *o, sl_rc_count_cb *cb, void *priv);

#ifdef __cplusplus
}
#endif

#endif
