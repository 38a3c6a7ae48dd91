/*
 * adaptive.h: adaptive concurrency limits for the command faces (RESP's
 * SL.ACQUIRE ... ADAPTIVE / POLICY, SL.RELEASE ... LATENCY, SL.LIMIT, and
 * HTTP's /v1/acquire, /v1/release, /v1/limit).
 *
 * An adaptive limit lives in the face's process (sl_cmd_ctx.limiters): its
 * estimate follows the latency this node's callers report, whatever store
 * the rate limits use. A key's limiter is "\x1fKEY" for an ad-hoc limit
 * and "POLICY\x1fKEY" under an adaptive policy (whose name has no 0x1f),
 * so that the two never share one, whatever bytes KEY holds.
 *
 * Lease ids are 24 hex digits, as the fixed leases': 16 of a random id, then
 * 8 of the slot with the top bit set (a fixed lease's last 8 are its
 * max_in_flight, at most 65536), so that SL.RELEASE tells the two apart.
 */
#ifndef SL_CMD_ADAPTIVE_H
#define SL_CMD_ADAPTIVE_H

#include "cmd/cmd.h"

#define SL_LEASE_TEXT 24
#define SL_LEASE_ADAPTIVE_BIT UINT32_C(0x80000000)

/* The largest max_in_flight an ad-hoc adaptive limit may ask for. */
#define SL_ADAPTIVE_ADHOC_MAX SL_CONCURRENCY_MAX

/* A lease id's text: *id and *tail (the last 8 digits). False when it is
 * not 24 hex digits or the id is 0. */
bool sl_lease_text_parse(const char *p, size_t n, uint64_t *id, uint32_t *tail);

/* A new lease id (SipHash of a per-thread counter under c->lease_key). */
uint64_t sl_lease_new_id(const sl_cmd_ctx *c);

/* The outcome a release names: "success", "dropped" or "ignored" (ASCII
 * case ignored). Returns it, or -1. */
int sl_outcome_parse(const char *s, size_t len);

/*
 * The three steps for both faces. policy is NULL for an ad-hoc limit under
 * *cfg; else cfg is ignored and the policy's is used (pindex: its index in
 * the config, for the metrics). Each returns SL_OK or an SL_ERR_* (SL_ERR_KEY
 * for a key too long, SL_ERR_NOMEM, SL_ERR_ARGUMENT for a class or partition
 * out of range) after which nothing changed.
 */
int sl_adaptive_acquire(sl_cmd_ctx *c, const char *key, size_t keylen,
                        const struct sl_adaptive_policy *policy, int pindex,
                        const sl_limiter_config *cfg, int cls, int part, sl_limiter_decision *d,
                        char lease[SL_LEASE_TEXT + 1]);

/* Releases lease `text` (len bytes) of key (under the policy called
 * pname, pname_len bytes; NULL: ad hoc). *held is 1 when it was held, 0
 * when unknown or expired. */
int sl_adaptive_release(sl_cmd_ctx *c, const char *key, size_t keylen, const char *pname,
                        size_t pname_len, const char *text, size_t len, sl_adapt_outcome outcome,
                        int64_t rtt_ns, int *held);

/* What key's limiter holds: *found 0 when there is none. */
int sl_adaptive_stats(sl_cmd_ctx *c, const char *key, size_t keylen, const char *pname,
                      size_t pname_len, sl_limiter_stats *st, int *found);

/* The limiter key of key under policy pname (NULL: ad hoc) into out (cap
 * bytes); its length, or 0 when it does not fit. */
size_t sl_adaptive_key(const char *pname, size_t pname_len, const char *key, size_t keylen,
                       char *out, size_t cap);

/* The policy a limiter key is under (the prefix before the first 0x1f),
 * for the metrics: its length, 0 for an ad-hoc key. */
size_t sl_adaptive_key_policy(const void *key, size_t keylen);

/* After a reload: every key of each adaptive policy of `next` takes the
 * policy's limit now (each keeps its estimate, clamped, and its leases).
 * Returns how many keys changed. */
int64_t sl_adaptive_reconfigure(sl_limiters *t, const sl_config *next, int64_t now);

/* An estimator by name (aimd, vegas, gradient2, anchored; ASCII case
 * ignored): its sl_adapt_kind, or -1. */
int sl_estimator_parse(const char *s, size_t len);

/* An ad-hoc adaptive limit's config (sl_adaptive_defaults, then the
 * caller's): estimator est (NULL: anchored), max_in_flight, ttl_ms, and
 * min and initial limits (-1: the estimator's, clamped). False with the
 * error in err when one is out of range. */
bool sl_adaptive_adhoc(sl_limiter_config *cfg, const char *est, size_t est_len, int64_t max,
                       int64_t ttl_ms, int64_t min, int64_t initial, char *err, size_t errlen);

/* RESP: SL.ACQUIRE's adaptive forms, SL.RELEASE of an adaptive lease (or
 * with options), SL.LIMIT. */
void sl_cmd_acquire_adaptive(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv);
void sl_cmd_release_adaptive(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv);
void sl_cmd_limit(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv);

#endif /* SL_CMD_ADAPTIVE_H */
