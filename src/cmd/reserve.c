/*
 * reserve.c: SL.RESERVE and SL.SETTLE's chains of store ops (reserve.h).
 */
#include "cmd/reserve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/siphash.h"
#include "proto/reservation.h"

#define SL_MARKER_TAG "\x1freserve\x1f"
#define SL_MARKER_TAG_LEN (sizeof SL_MARKER_TAG - 1)

/* 128 unguessable bits: SipHash of a per-thread counter under the face's
 * random key, as lease ids are made. */
static void sl_reserve_random(const sl_cmd_ctx *c, uint64_t out[2])
{
    static _Thread_local uint64_t counter;
    for (int i = 0; i < 2; i++) {
        uint64_t in[3] = {(uint64_t)(uintptr_t)&counter, ++counter, (uint64_t)i};
        out[i] = sl_siphash(c->lease_key, in, sizeof in);
    }
}

/* What the reservation was made under: each item's key, algorithm and
 * unit (FNV-1a), so that a settle under other limits is refused. */
static uint64_t sl_reserve_print(const sl_check *k, const sl_take_item *items, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        uint64_t words[3] = {items[i].keylen, (uint64_t)items[i].limit->algorithm,
                             (uint64_t)k->lunit[i]};
        const unsigned char *parts[2] = {(const unsigned char *)words,
                                         (const unsigned char *)items[i].key};
        size_t lens[2] = {sizeof words, items[i].keylen};
        for (int j = 0; j < 2; j++)
            for (size_t b = 0; b < lens[j]; b++)
                h = (h ^ parts[j][b]) * 0x100000001b3ull;
    }
    return h;
}

/* The marker's key, "{BASE}\x1freserve\x1f<head>", into out (cap bytes):
 * BASE is the policy's key for `key`, so that in Redis Cluster the marker
 * shares its slot with the key's limits. Returns its length, 0 when it
 * does not fit. */
static size_t sl_marker_key(const sl_policy *p, const sl_reservation *r, char *out, size_t cap)
{
    if (cap < 2)
        return 0;
    out[0] = '{';
    long w = sl_policy_key(p, r->key, r->key_len, out + 1, cap - 1);
    if (w <= 0 || cap - 1 - (size_t)w < 1 + SL_MARKER_TAG_LEN)
        return 0;
    size_t n = (size_t)w + 1;
    out[n++] = '}';
    memcpy(out + n, SL_MARKER_TAG, SL_MARKER_TAG_LEN);
    n += SL_MARKER_TAG_LEN;
    size_t h = sl_reservation_head(r, out + n, cap - n);
    return h ? n + h : 0;
}

static sl_chain *sl_chain_new(sl_render kind, size_t room)
{
    sl_chain *ch = malloc(sizeof *ch + room);
    if (!ch)
        return NULL;
    memset(ch, 0, sizeof *ch);
    ch->kind = kind;
    return ch;
}

void sl_chain_free(sl_check *k)
{
    free(k->chain);
    k->chain = NULL;
}

const char *sl_reserve_prepare(const sl_cmd_ctx *c, sl_check *k, const sl_policy *p,
                               const char *tier, size_t tier_len, const char *key,
                               size_t key_len, int64_t cost, int64_t tokens, int64_t ttl_ms,
                               char *err, size_t cap)
{
    if (ttl_ms < 1 || ttl_ms > SL_RESERVE_TTL_MAX_MS) {
        snprintf(err, cap, "TTL must be 1 to %d ms", SL_RESERVE_TTL_MAX_MS);
        return err;
    }
    if (key_len > SL_RESERVATION_KEY_MAX || tier_len > SL_RESERVATION_NAME_MAX) {
        snprintf(err, cap, "%s", sl_strerror(SL_ERR_KEY));
        return err;
    }
    sl_reservation r = {
        .ttl_ms = ttl_ms, .cost = cost, .tokens = tokens,
        .print = sl_reserve_print(k, k->req.items, k->req.n),
        .policy = p->name, .policy_len = strlen(p->name),
        .tier = tier, .tier_len = tier ? tier_len : 0,
        .key = key, .key_len = key_len,
    };
    sl_reserve_random(c, r.random);
    size_t id_len = sl_reservation_text_len(&r);
    size_t mcap = SL_POLICY_KEYS_ROOM + SL_MARKER_TAG_LEN + 2 * SL_RESERVATION_HEAD_MAX + 2;
    sl_chain *ch = sl_chain_new(SL_RENDER_RESERVE, mcap + id_len + 1);
    if (!ch) {
        snprintf(err, cap, "%s", sl_strerror(SL_ERR_NOMEM));
        return err;
    }
    size_t mlen = sl_marker_key(p, &r, ch->room, mcap);
    if (mlen == 0 || (c->max_key_bytes && mlen > c->max_key_bytes)) {
        free(ch);
        snprintf(err, cap, "%s (with the reservation's marker)", sl_strerror(SL_ERR_KEY));
        return err;
    }
    ch->id = ch->room + mlen;
    ch->id_len = sl_reservation_encode(&r, ch->id, id_len + 1);
    int rc = sl_limit_init(&ch->marker_limit, SL_SLIDING_LOG, 1, ttl_ms * 1000000, 0);
    if (ch->id_len == 0 || rc != SL_OK) {
        snprintf(err, cap, "%s", sl_strerror(ch->id_len == 0 ? SL_ERR_KEY : rc));
        free(ch);
        return err;
    }
    ch->marker = (sl_take_item){ch->room, mlen, &ch->marker_limit, 1};
    ch->ttl_ms = ttl_ms;
    k->chain = ch;
    k->render = SL_RENDER_RESERVE;
    return NULL;
}

int sl_settle_prepare(const sl_cmd_ctx *c, sl_check *k, const char *id, size_t id_len,
                      const int64_t *cost, const int64_t *tokens, char *err, size_t cap)
{
    sl_reservation r;
    char *buf = malloc(id_len / 2 + 1);
    if (!buf) {
        snprintf(err, cap, "%s", sl_strerror(SL_ERR_NOMEM));
        return 503;
    }
    const char *why = sl_reservation_decode(id, id_len, &r, buf, id_len / 2 + 1);
    int status = 0;
    const sl_policy *p = NULL;
    sl_take_item est[SL_TAKE_MANY_MAX], act[SL_TAKE_MANY_MAX];
    const sl_named_limit *which[SL_TAKE_MANY_MAX];
    char *keys = malloc(2 * SL_POLICY_KEYS_ROOM);
    int n = 0;
    size_t nkey = 0;
    int64_t act_cost = cost ? *cost : 0, act_tokens = tokens ? *tokens : 0;
    if (!keys) {
        snprintf(err, cap, "%s", sl_strerror(SL_ERR_NOMEM));
        status = 503;
    } else if (why) {
        snprintf(err, cap, "not a reservation id: %s", why);
        status = 400;
    } else if ((cost && *cost < 0) || (tokens && *tokens < 0)) {
        snprintf(err, cap, "%s must be a non-negative integer",
                 cost && *cost < 0 ? "cost" : "tokens");
        status = 400;
    } else if (!(p = sl_config_policy(c->config, r.policy, r.policy_len))) {
        snprintf(err, cap, "policy '%.*s' is no longer in the config: the reservation stays "
                 "charged at its estimate", (int)(r.policy_len > 64 ? 64 : r.policy_len),
                 r.policy);
        status = 409;
    } else {
        if (!cost)
            act_cost = r.cost;
        if (!tokens)
            act_tokens = r.tokens;
        n = sl_check_policy(k, c->config, p, r.tier_len ? r.tier : NULL, r.tier_len, r.key,
                            r.key_len, r.cost, r.tokens, keys, SL_POLICY_KEYS_ROOM, est);
        if (n > 0)
            n = sl_policy_items(p, r.tier_len ? r.tier : NULL, r.tier_len, r.key, r.key_len,
                                act_cost, act_tokens, keys + SL_POLICY_KEYS_ROOM,
                                SL_POLICY_KEYS_ROOM, act, which, &nkey);
        if (n <= 0 || sl_reserve_print(k, est, (size_t)n) != r.print) {
            snprintf(err, cap, "policy '%s' has changed since the reservation (its limits are "
                     "not those it reserved under): the reservation stays charged at its "
                     "estimate", p->name);
            status = 409;
        }
    }
    bool leased = c->be && c->be->rates_leased;
    for (int i = 0; status == 0 && i < n; i++) {
        sl_algorithm a = est[i].limit->algorithm;
        bool rate = a == SL_GCRA || a == SL_TOKEN_BUCKET || a == SL_LEAKY_BUCKET;
        if (act[i].cost <= est[i].cost || (a != SL_SLIDING_LOG && !(rate && leased)))
            continue;
        /* Refused before the marker is given back: the reservation stays
         * open, to be settled at or below its estimate. */
        char name[SL_POLICY_LIMIT_NAME_ROOM];
        sl_policy_limit_name(k->name, k->lname[i], (size_t)i >= k->nkey, name, sizeof name);
        if (a == SL_SLIDING_LOG)
            snprintf(err, cap, "limit '%s' is a sliding_log, which cannot owe: settle it at or "
                     "below its estimate", name);
        else
            snprintf(err, cap, "limit '%s' is a rate leased by sync, which no node can owe "
                     "exactly: settle it at or below its estimate", name);
        status = 400;
    }
    size_t room = 0;
    for (int i = 0; status == 0 && i < n; i++)
        room += est[i].keylen;
    size_t mcap = SL_POLICY_KEYS_ROOM + SL_MARKER_TAG_LEN + 2 * SL_RESERVATION_HEAD_MAX + 2;
    sl_chain *ch = status == 0 ? sl_chain_new(SL_RENDER_SETTLE, mcap + room) : NULL;
    if (status == 0 && !ch) {
        snprintf(err, cap, "%s", sl_strerror(SL_ERR_NOMEM));
        status = 503;
    }
    size_t mlen = ch ? sl_marker_key(p, &r, ch->room, mcap) : 0;
    if (ch && mlen == 0) {
        snprintf(err, cap, "%s (with the reservation's marker)", sl_strerror(SL_ERR_KEY));
        status = 400;
    }
    if (status == 0 && sl_limit_init(&ch->marker_limit, SL_SLIDING_LOG, 1,
                                     r.ttl_ms > INT64_MAX / 1000000 ? INT64_MAX : r.ttl_ms * 1000000,
                                     0) != SL_OK) {
        snprintf(err, cap, "not a reservation id: its TTL is out of range");
        status = 400;
    }
    if (status != 0) {
        free(ch);
        free(keys);
        free(buf);
        return status;
    }
    ch->marker = (sl_take_item){ch->room, mlen, &ch->marker_limit, 1};
    ch->ttl_ms = r.ttl_ms;
    ch->n = (size_t)n;
    char *at = ch->room + mlen;
    for (int i = 0; i < n; i++) {
        memcpy(at, est[i].key, est[i].keylen);
        ch->lim[i] = *est[i].limit;
        ch->items[i] = (sl_take_item){at, est[i].keylen, &ch->lim[i], 0};
        ch->delta[i] = act[i].cost - est[i].cost;
        at += est[i].keylen;
    }
    free(keys);
    free(buf);
    k->chain = ch;
    k->render = SL_RENDER_SETTLE;
    k->counted = false;
    k->req.op = SL_OP_REFUND;
    k->req.n = 1;
    k->req.items = &ch->marker;
    k->req.d = k->d;
    return 0;
}

/* The whole error reply of a step after the first. */
static void sl_chain_fail(sl_check *k, const char *what)
{
    sl_chain *ch = k->chain;
    const char *why = k->req.errstr ? k->req.errstr : sl_strerror(k->req.rc);
    if (strncmp(why, "ERR ", 4) == 0)
        why += 4;
    snprintf(ch->error, sizeof ch->error, "ERR %s: %s", what, why);
}

/* Sets up the next step of a reservation; false when it is done. */
static bool sl_reserve_step(sl_check *k)
{
    sl_chain *ch = k->chain;
    if (ch->step == 0) { /* the estimate's take answered */
        if (k->req.rc != SL_OK || k->req.failed >= 0)
            return false; /* refused (or failed): rendered as SL.POLICY's answer */
        ch->by = k->req.by;
        ch->step = 1;
        k->req.op = SL_OP_TAKE;
        k->req.n = 1;
        k->req.items = &ch->marker;
        k->req.d = &ch->scratch;
        return true;
    }
    if (k->req.rc != SL_OK)
        sl_chain_fail(k, "RESERVE: the estimate is taken, but its reservation is not (it stays "
                         "charged)");
    else if (!ch->scratch.allowed)
        snprintf(ch->error, sizeof ch->error,
                 "ERR RESERVE: the estimate is taken, but its reservation's marker is held "
                 "already (it stays charged)");
    else
        ch->reserved = true;
    k->req.rc = SL_OK;
    k->req.op = SL_OP_TAKE;
    k->req.n = k->n;
    k->req.d = k->d;
    k->req.failed = -1;
    k->req.by = ch->by;
    return false;
}

/* Sets up the next step of a settle; false when it is done. */
static bool sl_settle_step(sl_check *k)
{
    sl_chain *ch = k->chain;
    if (k->req.rc != SL_OK) {
        if (ch->step == 0)
            sl_chain_fail(k, "SETTLE: the reservation may or may not have been settled");
        else
            snprintf(ch->error, sizeof ch->error,
                     "ERR SETTLE: %zu of the policy's %zu limits were settled before the store "
                     "failed (%s); the others stay at the estimate", ch->at, ch->n,
                     k->req.errstr ? k->req.errstr : sl_strerror(k->req.rc));
        k->req.rc = SL_OK;
        return false;
    }
    if (ch->step == 0) {
        ch->settled = k->req.count > 0;
        if (!ch->settled)
            return false; /* expired, or settled already */
        ch->at = 0;
    } else { /* limit ch->at answered */
        ch->adjusted[ch->at] = ch->delta[ch->at] < 0 ? -k->req.count : ch->delta[ch->at];
        ch->at++;
    }
    while (ch->at < ch->n && ch->delta[ch->at] == 0)
        ch->at++;
    if (ch->at == ch->n)
        return false;
    int64_t delta = ch->delta[ch->at];
    ch->step = 1;
    ch->items[ch->at].cost = delta < 0 ? -delta : delta;
    k->req.op = delta < 0 ? SL_OP_REFUND : SL_OP_CHARGE;
    k->req.n = 1;
    k->req.items = &ch->items[ch->at];
    k->req.d = &k->d[ch->at];
    k->req.count = 0;
    return true;
}

bool sl_chain_next(sl_cmd_ctx *c, sl_check *k)
{
    for (;;) {
        bool more = k->chain->kind == SL_RENDER_RESERVE ? sl_reserve_step(k) : sl_settle_step(k);
        if (!more)
            return true;
        k->req.errstr = NULL;
        k->req.errstr_is_reply = false;
        if (sl_backend_submit(c->be, c->bw, &k->req) == SL_PENDING)
            return false;
    }
}
