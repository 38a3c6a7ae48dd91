/*
 * reserve.h: charging after the fact (docs/commands.md, "SL.RESERVE").
 *
 * SL.RESERVE takes a request's estimated costs under a policy, all or
 * nothing as SL.POLICY takes them, and then a marker: a sliding log of 1
 * per TTL at "{KEY}\x1freserve\x1f<the id's head>". It answers an id that
 * carries everything a settle needs (proto/reservation.h), so that no
 * process keeps a table of reservations and any node of a fleet can
 * settle what another reserved.
 *
 * SL.SETTLE gives the marker back first: only the first settle within the
 * TTL gets a unit back, so a reservation is settled once, across the fleet,
 * whoever asks. Then, limit by limit, what the estimate took beyond the
 * actual amount is given back (SL_OP_REFUND) and what it took short of it
 * is charged (SL_OP_CHARGE: never refused, it may leave a debt that delays
 * the next takes). A reservation not settled within its TTL stays charged
 * at its estimate.
 *
 * Each is a chain of the store's single-item ops, which every backend
 * answers (the memory store in the call, Redis later): sl_check_finish()
 * runs the next step from the answer of the last, and renders once the
 * chain is done.
 */
#ifndef SL_CMD_RESERVE_H
#define SL_CMD_RESERVE_H

#include "cmd/cmd.h"

#define SL_RESERVE_TTL_DEFAULT_MS 600000  /* 10 minutes */
#define SL_RESERVE_TTL_MAX_MS 86400000    /* a day */

typedef struct sl_chain {
    sl_render kind;   /* SL_RENDER_RESERVE or SL_RENDER_SETTLE */
    int step;         /* the step whose answer comes next */
    size_t at;        /* SETTLE: the limit being settled */
    sl_fallback by;   /* RESERVE: what decided the estimate's take */
    int64_t ttl_ms;
    sl_take_item marker;
    sl_limit marker_limit;
    sl_decision scratch;
    /* SETTLE: the policy's items, and what each is to be adjusted by
     * (actual - estimate) and was (given back: negative; charged:
     * positive). */
    size_t n;
    sl_take_item items[SL_TAKE_MANY_MAX];
    sl_limit lim[SL_TAKE_MANY_MAX];
    int64_t delta[SL_TAKE_MANY_MAX];
    int64_t adjusted[SL_TAKE_MANY_MAX];
    bool settled;     /* SETTLE: the marker was given back: this settle is the one */
    bool reserved;    /* RESERVE: the marker was taken: the id is good */
    char error[256];  /* a step after the first failed: the whole error reply */
    char *id;         /* RESERVE: the id's text (in room) */
    size_t id_len;
    char room[];      /* the marker's key, the items' keys, the id */
} sl_chain;

/*
 * Makes k, a policy's check of the estimates (sl_check_policy(), its items
 * taken in the first step), a reservation: room for the marker and the id.
 * Returns NULL, or what is wrong (into err, cap bytes): the TTL out of
 * range, the key too long, out of memory.
 */
const char *sl_reserve_prepare(const sl_cmd_ctx *c, sl_check *k, const struct sl_policy *p,
                               const char *tier, size_t tier_len, const char *key,
                               size_t key_len, int64_t cost, int64_t tokens, int64_t ttl_ms,
                               char *err, size_t cap);

/*
 * Makes k a settle of the reservation `id` at the actual amounts (NULL:
 * the estimate). Returns 0, or 400 (the id or an amount is wrong) or 409
 * (the policy's limits are no longer those it reserved under: the
 * reservation stays charged at its estimate) with what is wrong in err.
 */
int sl_settle_prepare(const sl_cmd_ctx *c, sl_check *k, const char *id, size_t id_len,
                      const int64_t *cost, const int64_t *tokens, char *err, size_t cap);

/* Runs k's chain on from the answer to its last step: true when it is
 * done (k then renders), false when a step is in flight (its done() comes
 * later). */
bool sl_chain_next(sl_cmd_ctx *c, sl_check *k);

/* Frees k's chain (safe when it has none). */
void sl_chain_free(sl_check *k);

#endif /* SL_CMD_RESERVE_H */
