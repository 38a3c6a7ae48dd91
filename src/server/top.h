/*
 * top.h: sluiced's top keys (docs/observability.md): per worker, per policy
 * (and for the ad-hoc limits), the keys refused and admitted most often over
 * a recent window, in libsluice's Space-Saving summaries (sl_topk_*), read
 * by SL.TOP and GET /v1/top.
 *
 * Each worker records into its own summaries under its own lock, which no
 * other thread takes but a reader of the top keys, for as long as it merges
 * that worker's summary of one policy: the hot path shares no cache line
 * with another worker's, and its lock is an uncontended exchange. Above
 * --top-exact-rate decisions a second a worker counts 1 in S of them, each
 * S times (sl_top_adapt), so that the cost stays that of that rate.
 */
#ifndef SL_SERVER_TOP_H
#define SL_SERVER_TOP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cmd/cmd.h"
#include "common/buf.h"
#include "policy/config.h"
#include "proto/http.h"
#include "server/metrics.h"
#include "sluice.h"

/* The policies whose top keys are kept: the config's first 64, as /metrics
 * counts them, and the ad-hoc limits. */
#define SL_TOP_POLICIES SL_METRIC_POLICIES

#define SL_TOP_KEYS_MAX 1024    /* the largest --top-keys */
#define SL_TOP_RATE_SPAN 8192   /* decisions over which a worker's rate is measured */
#define SL_TOP_COUNT_DEFAULT 10 /* rows SL.TOP and /v1/top give unless told */

struct sl_server;
struct sl_conn;

/* One policy's summaries on one worker. */
typedef struct sl_top_table {
    char name[SL_POLICY_NAME_MAX + 1]; /* the policy's; "" for the ad-hoc limits */
    sl_topk *kind[2];                  /* admitted, refused */
    /* The config's own string of that name and the config's epoch when it
     * was seen: a check that names the policy by the same pointer in the
     * same epoch is the same policy, without comparing the names. */
    const char *name_ptr;
    uint64_t epoch;
} sl_top_table;

/* A worker's top keys. Its fields are top.c's; they are here so that the
 * common case of sl_top_record is inlined where decisions are counted. */
typedef struct sl_top {
    /* The worker takes it to record, a reader to merge; on a line of its
     * own (the struct is cache-line aligned), written by this worker. */
    atomic_bool lock;
    size_t k;
    int64_t window_ns;
    uint64_t seed;
    const atomic_uint_fast64_t *epoch; /* the server's config epoch */
    size_t bytes; /* held by the tables, under the lock */
    sl_top_table *table[SL_TOP_POLICIES + 1]; /* [0] ad hoc, [p + 1] the config's policy p */
    /* Sampling (the worker's alone, no lock): 1 in 2^shift counted (with
     * weight 2^shift), chosen every SL_TOP_RATE_SPAN decisions from the
     * time they took (sl_top_adapt: left counts down to it, since is when
     * the span began); the draws are the top bits of rng, a 64-bit linear
     * congruential generator's state; exact_rate is --top-exact-rate. */
    unsigned shift;
    uint32_t left;
    uint64_t rng;
    int64_t since;
    uint64_t exact_rate;
} sl_top;

/* Takes t's lock, once it is free (its holder is a reader merging, or the
 * worker recording: either lets go soon). */
void sl_top_lock_wait(sl_top *t);

static inline void sl_top_lock(sl_top *t)
{
    if (__builtin_expect(atomic_exchange_explicit(&t->lock, true, memory_order_acquire), 0))
        sl_top_lock_wait(t);
}

static inline void sl_top_unlock(sl_top *t)
{
    atomic_store_explicit(&t->lock, false, memory_order_release);
}

/* A worker's top keys: k counters per policy, kind and generation of
 * window_ns, hashed under seed (the same for every worker: their summaries
 * are merged); epoch is the server's config epoch (a reload moves it);
 * exact_rate the decisions a second counted every one (0: always);
 * draws seeds its sampling's draws. NULL when out of memory. Freed with
 * sl_top_free. */
sl_top *sl_top_new(size_t k, int64_t window_ns, uint64_t seed,
                   const atomic_uint_fast64_t *epoch, uint64_t exact_rate, uint64_t draws);
void sl_top_free(sl_top *t);

/* Every SL_TOP_RATE_SPAN decisions (now: the last one's time): the
 * sampling of the next span from the rate of this one: every decision while
 * they came at most exact_rate a second (or exact_rate is 0), else 1 in S,
 * S the smallest power of two that brings the rate to exact_rate or under.
 * A burst is sampled within a span of its start, and a rate that falls
 * lets the next span count every decision again. */
void sl_top_adapt(sl_top *t, int64_t now);

/* sl_top_record past its common case (under t's lock, which it lets go):
 * the policy's table made, or found by its name. */
void sl_top_record_slow(sl_top *t, unsigned i, const sl_check *k, bool refused, int64_t now);

/* Counts one decision of k (its policy and key) at now, refused (a shadow
 * policy's would-be refusal too) or admitted: every one, or while the
 * worker decides more than --top-exact-rate a second, 1 in 2^shift at
 * random, with that weight. On the worker's thread. */
static inline void sl_top_record(sl_top *t, const sl_check *k, bool refused, int64_t now)
{
    /* policy -1 (ad hoc) is table 0; a key_len is set with its key. */
    unsigned i = (unsigned)(k->policy + 1);
    if (i > SL_TOP_POLICIES || k->given_key_len == 0)
        return;
    if (__builtin_expect(--t->left == 0, 0))
        sl_top_adapt(t, now);
    if (t->shift) {
        t->rng = t->rng * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
        if (t->rng >> (64 - t->shift)) /* shift is 1 .. 20 */
            return;
    }
    sl_top_lock(t);
    sl_top_table *tb = t->table[i];
    /* The common case: the ad-hoc limits' table, or the policy's seen by
     * its config string in this epoch. */
    if (__builtin_expect(!tb || (i > 0 && (tb->name_ptr != k->name ||
                                           tb->epoch != atomic_load_explicit(
                                                            t->epoch, memory_order_relaxed))),
                         0)) {
        sl_top_record_slow(t, i, k, refused, now);
        return;
    }
    sl_topk_add(tb->kind[refused], k->given_key, k->given_key_len, UINT64_C(1) << t->shift, now);
    sl_top_unlock(t);
}

/* A row of an answer. */
typedef struct sl_top_row {
    const struct sl_policy *policy; /* NULL for the ad-hoc limits */
    sl_topk_entry e;
    uint64_t sample; /* 1 in how many decisions (at most) were counted: 1 exact */
    bool has_remaining;
    int64_t remaining;
} sl_top_row;

enum { SL_TOP_ADMITTED = 0, SL_TOP_REFUSED = 1 }; /* the kinds: a summary's index */

/* What a reader asks. */
typedef struct sl_top_query {
    int slot;    /* -1: every policy and the ad-hoc limits; else a table index */
    int kind;    /* SL_TOP_ADMITTED or SL_TOP_REFUSED */
    size_t count;
} sl_top_query;

/* The rows an answer gives unless asked for a count: SL_TOP_COUNT_DEFAULT,
 * or --top-keys when fewer. */
#define SL_TOP_COUNT(srv) ((srv)->cfg.top_keys < SL_TOP_COUNT_DEFAULT ? (srv)->cfg.top_keys \
                                                                      : SL_TOP_COUNT_DEFAULT)

/*
 * Answers q at now: the rows, largest counts first, into a new array the
 * caller frees with sl_free (*rows; *n of them). c is the reader's context
 * (its worker's backend, for the peeks of each key's remaining budget).
 * The top keys must be on (--top-keys > 0). Returns SL_OK or SL_ERR_NOMEM.
 */
sl_status sl_top_answer(sl_cmd_ctx *c, struct sl_server *srv, const sl_top_query *q, int64_t now,
                        sl_top_row **rows, size_t *n);

/* SL.TOP [POLICY name] [COUNT n] [REFUSED|ADMITTED] (commands.c's table). */
void sl_cmd_top(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv);

/* GET /v1/top?policy=NAME&count=N&kind=refused|admitted: writes the
 * response into the connection's output. */
void sl_http_top(struct sl_conn *conn, const sl_http_request *r, bool keep, bool head);

/* The /metrics lines of the top keys: the bytes their summaries hold. */
void sl_top_metrics(struct sl_server *srv, sl_buf *out);

#endif
