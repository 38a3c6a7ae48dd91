/*
 * rls.h: Envoy's ShouldRateLimit (envoy.service.ratelimit.v3) over the
 * backend layer, once for every face that answers it: gRPC (server/grpc.c)
 * and HTTP's POST /json. docs/envoy.md describes it for users.
 *
 * A request's descriptors are matched against the Envoy configuration
 * (policy/envoy.h), and each one that a limited rule matches is a take of
 * its hits from that rule's limits (all of them, all or nothing, when the
 * rule has several), submitted to the backend on its own: descriptors are
 * decided independently, as envoyproxy/ratelimit decides them, so that one
 * descriptor over its limit does not keep another's hit from counting.
 *
 * Each descriptor's status, in request order:
 *
 *   no rule (or an unknown domain, or replaced)  OK, no current_limit, remaining 0
 *   unlimited                                    OK, no current_limit, remaining 2^32-1
 *   within its limits                            OK, current_limit, remaining, reset
 *   over one                                     OVER_LIMIT (OK in shadow mode), remaining 0
 *   requests_per_unit 0                          OVER_LIMIT, current_limit, remaining 0, reset
 *
 * where reset, for a fixed window (the reference's), is the time left in
 * the current window, whatever the key holds, as the reference answers it;
 * for another algorithm, the time until the key's state is full again.
 *
 * where the limit reported of a rule with several is the one that refused,
 * else the one with the least remaining. overall_code is OVER_LIMIT when
 * any status is. requests_per_unit 0 refuses every request without asking
 * the store. A descriptor's limit override (its `limit`) replaces the
 * rule's limits with one fixed window of that many requests per unit, for
 * any descriptor of a known domain, matched or not.
 *
 * The hits of a descriptor: its own hits_addend when the request gives one
 * (0 asks without counting), else the request's (0 meaning 1).
 *
 * A call reads the configuration only in sl_rls_start: what its answer
 * needs is copied, so that a reload may free the configuration while the
 * store's answers are in flight.
 */
#ifndef SL_CMD_RLS_H
#define SL_CMD_RLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "policy/envoy.h"
#include "proto/rls.h"

/* One descriptor's decision, for a face's decision log (sl_rls_ctx.logged):
 * the pointers are the call's, valid during the callback only. */
typedef struct sl_rls_decision {
    const char *key;      /* the store key of its first limit (sl_envoy_store_key) */
    size_t key_len;
    const char *rule;     /* its rule's stats key (as `decided` gets it); NULL for a limit
                             override that no rule matched */
    size_t rule_len;
    int64_t hits;
    bool over;            /* over a limit (shadow: let through all the same) */
    bool shadow;          /* over, in shadow mode */
    size_t n;             /* the rule's limits */
    size_t binding;       /* the limit reported: the one that refused, else the least
                             remaining */
    int64_t remaining;    /* that limit's, 0 for a limit of 0 requests */
    int64_t retry_after_ns; /* that limit's wait when over (SL_NEVER: a limit of 0), else 0 */
} sl_rls_decision;

typedef struct sl_rls_ctx {
    const sl_backend *be;
    sl_backend_worker *bw;
    const sl_envoy_config *envoy; /* NULL: none loaded (every domain unknown) */
    int64_t clock_offset_ns;      /* a limit override's windows on the wall clock */
    int64_t now;                  /* the backend worker's clock: where a window ends */
    size_t max_key_bytes;         /* the longest store key; 0: no bound */
    /* The names of the headers the answer asks Envoy to add (the limit,
     * what remains, the seconds to its reset), of the descriptor nearest
     * its limit (the last one over it, else the least remaining), as the
     * reference's LIMIT_RESPONSE_HEADERS_ENABLED adds them; NULL: none. */
    const char *const *header_names;
    /* Called once per descriptor decided by a rule (not for no rule,
     * unlimited or replaced), for the face's metrics: the rule's stats key
     * (sl_envoy_metric_key, key[0 .. len)), its hits, whether it was over
     * the limit, near it (past 80% of it, within), and in shadow mode. May
     * be NULL. */
    void (*decided)(void *arg, const char *key, size_t len, int64_t hits, bool over, bool near,
                    bool shadow);
    void *decided_arg;
    /* Called once per descriptor decided by a rule or a limit override
     * (the store's answer, or a limit of 0), for the face's decision log.
     * NULL: none, and the call keeps no store keys for it. */
    void (*logged)(void *arg, const sl_rls_decision *d);
    void *logged_arg;
} sl_rls_ctx;

typedef struct sl_rls_call sl_rls_call;

/* done(call, arg): every descriptor of the call is decided. */
typedef void (*sl_rls_done_fn)(sl_rls_call *call, void *arg);

/* The most bytes of the stats keys one call keeps for `decided`. */
#define SL_RLS_METRIC_KEY_MAX 512

/*
 * Starts ShouldRateLimit for *r, which the call takes (*r is zeroed).
 * Returns SL_OK when every descriptor was decided in the call (read the
 * answer with sl_rls_result, then sl_rls_free), SL_PENDING when done()
 * will be called later on the backend worker's loop, or an error with no
 * call, *r still the caller's: SL_ERR_ARGUMENT with the reason in err (an
 * empty domain or list of descriptors, a limit override that is no limit,
 * a store key over max_key_bytes: the caller answers INVALID_ARGUMENT),
 * SL_ERR_NOMEM. Nothing is taken from the store when it fails.
 */
int sl_rls_start(const sl_rls_ctx *c, sl_rls_request *r, sl_rls_done_fn done, void *arg,
                 sl_rls_call **out, char *err, size_t errlen);

/*
 * The answer of a decided call: fills *resp (pointing into the call, valid
 * until sl_rls_free) and returns SL_OK; or returns the store's error for a
 * descriptor that it could not decide (SL_ERR_UNAVAILABLE, ...), when no
 * store-down policy answered for it, with "store: " and its words in err.
 */
int sl_rls_result(sl_rls_call *call, sl_rls_response *resp, char *err, size_t errlen);

void sl_rls_free(sl_rls_call *call);

/* The caller will not read the answer of a call still pending: done() is
 * not called, and the call frees itself once the store has answered. */
void sl_rls_cancel(sl_rls_call *call);

#endif
