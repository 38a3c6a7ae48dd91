/*
 * limiter.c: the client-side limiter (sluice_client.h), a local mirror of
 * the limits a server advertises.
 *
 * Every decision is sluice's own GCRA: each policy holds an sl_limit made
 * by sl_limit_init(SL_GCRA, q, w s, burst q) and a state, and sl_peek /
 * sl_take decide. What this file adds is bookkeeping: which policies are
 * known (a fixed table, the least recently advertised evicted), how a
 * server's `r` becomes a state (a full state that takes q - r at `now`, so
 * that exactly r remain, computed by sl_take itself), and the two waits
 * that are not a GCRA's: a Retry-After, and the X-RateLimit-* window.
 */
#include <string.h>

#include "client/client.h"
#include "common/arith.h"

#define SL_NS_PER_MS INT64_C(1000000)
#define SL_NS_PER_S INT64_C(1000000000)

sl_status sl_client_limiter_init(sl_client_limiter *l)
{
    if (l == NULL)
        return SL_ERR_ARGUMENT;
    memset(l, 0, sizeof *l);
    if (pthread_mutex_init(&l->lock, NULL) != 0)
        return SL_ERR_NOMEM;
    return SL_OK;
}

void sl_client_limiter_destroy(sl_client_limiter *l)
{
    if (l != NULL)
        pthread_mutex_destroy(&l->lock);
}

static bool sl_valid_time(int64_t now)
{
    return now >= 0 && now <= SL_TIME_MAX;
}

/* now + ms milliseconds, saturating at SL_TIME_MAX. */
static int64_t sl_after_ms(int64_t now, int64_t ms)
{
    if (ms <= 0)
        return now;
    int64_t ns = ms > SL_TIME_MAX / SL_NS_PER_MS ? SL_TIME_MAX : ms * SL_NS_PER_MS;
    return sl_add_clamp(now, ns, SL_TIME_MAX);
}

/* A name's length as the caller's struct says, never past its buffer. */
static size_t sl_name_len(size_t len)
{
    return len < SL_RL_NAME_MAX ? len : SL_RL_NAME_MAX - 1;
}

/* The kept policy named so (an unnamed one: at `index`), or NULL. */
static sl_client_policy *sl_find(sl_client_limiter *l, bool has_name, const char *name,
                                 size_t name_len, int index)
{
    for (int i = 0; i < SL_CLIENT_POLICIES_MAX; i++) {
        sl_client_policy *e = &l->policies[i];
        if (!e->used || e->has_name != has_name)
            continue;
        if (has_name ? (e->name_len == name_len && memcmp(e->name, name, name_len) == 0)
                     : e->index == index)
            return e;
    }
    return NULL;
}

/* A free entry, or the least recently advertised one, emptied. */
static sl_client_policy *sl_slot(sl_client_limiter *l)
{
    sl_client_policy *oldest = NULL;
    for (int i = 0; i < SL_CLIENT_POLICIES_MAX; i++) {
        sl_client_policy *e = &l->policies[i];
        if (!e->used) {
            oldest = e;
            break;
        }
        if (oldest == NULL || e->seen < oldest->seen)
            oldest = e;
    }
    memset(oldest, 0, sizeof *oldest);
    return oldest;
}

/* Starts *e as a full GCRA of q per w seconds, burst q. False when no GCRA
 * can hold it (a window beyond SL_SPAN_MAX); q 0 needs none. */
static bool sl_start(sl_client_policy *e, int64_t q, int64_t w)
{
    e->quota = q;
    e->window_s = w;
    memset(e->state, 0, sizeof e->state);
    if (q == 0)
        return true;
    if (w > SL_SPAN_MAX / SL_NS_PER_S ||
        sl_limit_init(&e->limit, SL_GCRA, q, w * SL_NS_PER_S, q) != SL_OK ||
        sl_state_size(&e->limit) > sizeof e->state)
        return false;
    return true;
}

/* Exactly r remain at `now`: a full state that takes q - r, by sl_take. */
static void sl_set_remaining(sl_client_policy *e, int64_t now, int64_t r)
{
    if (e->quota == 0)
        return;
    r = r < 0 ? 0 : r > e->quota ? e->quota : r;
    memset(e->state, 0, sizeof e->state);
    if (r < e->quota) {
        sl_decision d;
        sl_take(&e->limit, e->state, now, e->quota - r, &d); /* cost <= burst: admitted */
    }
}

/* The reset of the last RateLimit member named as policy *p says, else its
 * window, in ms. */
static int64_t sl_reset_of(const sl_rl_headers *h, const sl_rl_policy *p)
{
    int64_t ms = p->window_s > INT64_MAX / 1000 ? INT64_MAX : p->window_s * 1000;
    if (!p->has_name)
        return ms;
    size_t n = sl_name_len(p->name_len);
    for (size_t i = 0; i < h->limit_count && i < SL_RL_MEMBERS_MAX; i++) {
        const sl_rl_limit *lm = &h->limits[i];
        if (lm->has_reset && sl_name_len(lm->name_len) == n && memcmp(lm->name, p->name, n) == 0)
            ms = lm->reset_ms;
    }
    return ms;
}

sl_status sl_client_limiter_update(sl_client_limiter *l, const sl_rl_headers *h, int status,
                                   int64_t now)
{
    if (l == NULL || h == NULL)
        return SL_ERR_ARGUMENT;
    if (!sl_valid_time(now))
        return SL_ERR_TIME;
    size_t np = h->policy_count < SL_RL_MEMBERS_MAX ? h->policy_count : SL_RL_MEMBERS_MAX;
    size_t nl = h->limit_count < SL_RL_MEMBERS_MAX ? h->limit_count : SL_RL_MEMBERS_MAX;

    pthread_mutex_lock(&l->lock);
    for (size_t i = 0; i < np; i++) {
        const sl_rl_policy *p = &h->policies[i];
        if (!p->has_window || p->window_s <= 0 || p->quota < 0)
            continue;
        size_t n = sl_name_len(p->name_len);
        sl_client_policy *e = sl_find(l, p->has_name, p->name, n, (int)i);
        if (e == NULL || e->quota != p->quota || e->window_s != p->window_s) {
            if (e == NULL) {
                e = sl_slot(l);
                e->has_name = p->has_name;
                e->index = (int)i;
                memcpy(e->name, p->name, n);
                e->name[n] = '\0';
                e->name_len = n;
            }
            if (!sl_start(e, p->quota, p->window_s)) {
                memset(e, 0, sizeof *e); /* cannot be mirrored: forgotten */
                continue;
            }
            e->used = true;
        }
        e->seen = ++l->updates;
    }
    for (size_t i = 0; i < nl; i++) {
        const sl_rl_limit *lm = &h->limits[i];
        sl_client_policy *e = sl_find(l, true, lm->name, sl_name_len(lm->name_len), -1);
        if (e != NULL)
            sl_set_remaining(e, now, lm->remaining);
    }
    if (h->policy_count == 0 && h->has_x_remaining && h->has_x_reset) {
        l->has_window = true;
        l->window_left = h->x_remaining < 0 ? 0 : h->x_remaining;
        l->window_reset = sl_after_ms(now, h->x_reset_ms);
    }
    if (h->has_retry_after && (status == 0 || status == 429 || status == 503))
        l->blocked_until = sl_max64(l->blocked_until, sl_after_ms(now, h->retry_after_ms));
    for (size_t i = 0; i < np; i++) {
        const sl_rl_policy *p = &h->policies[i];
        if (p->quota == 0 && p->has_window && p->window_s > 0) /* nothing until its reset */
            l->blocked_until = sl_max64(l->blocked_until, sl_after_ms(now, sl_reset_of(h, p)));
    }
    pthread_mutex_unlock(&l->lock);
    return SL_OK;
}

sl_status sl_client_limiter_block(sl_client_limiter *l, int64_t now, int64_t wait_ns)
{
    if (l == NULL || wait_ns < 0)
        return SL_ERR_ARGUMENT;
    if (!sl_valid_time(now))
        return SL_ERR_TIME;
    pthread_mutex_lock(&l->lock);
    l->blocked_until = sl_max64(l->blocked_until, sl_add_clamp(now, wait_ns, SL_TIME_MAX));
    pthread_mutex_unlock(&l->lock);
    return SL_OK;
}

/* Under the lock: ns until every local limit admits `cost`; SL_NEVER. */
static int64_t sl_wait_locked(sl_client_limiter *l, int64_t now, int64_t cost)
{
    int64_t w = l->blocked_until > now ? l->blocked_until - now : 0;
    for (int i = 0; i < SL_CLIENT_POLICIES_MAX; i++) {
        sl_client_policy *e = &l->policies[i];
        if (!e->used || e->quota == 0) /* a quota of 0 is blocked until its reset */
            continue;
        sl_decision d;
        sl_peek(&e->limit, e->state, now, cost, &d);
        if (!d.allowed) {
            if (d.retry_after_ns == SL_NEVER)
                return SL_NEVER;
            w = sl_max64(w, d.retry_after_ns);
        }
    }
    if (l->has_window && now < l->window_reset && cost > l->window_left)
        w = sl_max64(w, l->window_reset - now);
    return w;
}

/* SL_OK, or the error a wait or a take of `cost` at `now` is refused with. */
static int sl_wait_args(const sl_client_limiter *l, int64_t now, int64_t cost)
{
    if (l == NULL)
        return SL_ERR_ARGUMENT;
    if (cost < 0)
        return SL_ERR_COST;
    if (!sl_valid_time(now))
        return SL_ERR_TIME;
    return SL_OK;
}

int64_t sl_client_limiter_wait(sl_client_limiter *l, int64_t now, int64_t cost)
{
    int bad = sl_wait_args(l, now, cost);
    if (bad != SL_OK)
        return bad;
    pthread_mutex_lock(&l->lock);
    int64_t w = sl_wait_locked(l, now, cost);
    pthread_mutex_unlock(&l->lock);
    return w;
}

int sl_client_limiter_try_acquire(sl_client_limiter *l, int64_t now, int64_t cost)
{
    int bad = sl_wait_args(l, now, cost);
    if (bad != SL_OK)
        return bad;
    pthread_mutex_lock(&l->lock);
    bool ok = sl_wait_locked(l, now, cost) == 0;
    if (ok) {
        for (int i = 0; i < SL_CLIENT_POLICIES_MAX; i++) {
            sl_client_policy *e = &l->policies[i];
            if (e->used && e->quota > 0) {
                sl_decision d;
                sl_take(&e->limit, e->state, now, cost, &d); /* admitted: peeked above */
            }
        }
        if (l->has_window && now < l->window_reset)
            l->window_left -= cost; /* cost <= window_left: checked above */
    }
    pthread_mutex_unlock(&l->lock);
    return ok;
}

int sl_client_limiter_policies(sl_client_limiter *l, int64_t now, sl_client_policy_info *out,
                               size_t cap)
{
    if (l == NULL || (out == NULL && cap > 0))
        return SL_ERR_ARGUMENT;
    if (!sl_valid_time(now))
        return SL_ERR_TIME;
    pthread_mutex_lock(&l->lock);
    /* The kept entries, oldest advertised first (insertion sort of <= 64). */
    int order[SL_CLIENT_POLICIES_MAX], n = 0;
    for (int i = 0; i < SL_CLIENT_POLICIES_MAX; i++) {
        if (!l->policies[i].used)
            continue;
        int k = n++;
        while (k > 0 && l->policies[order[k - 1]].seen > l->policies[i].seen) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = i;
    }
    for (int k = 0; k < n && (size_t)k < cap; k++) {
        sl_client_policy *e = &l->policies[order[k]];
        sl_client_policy_info *o = &out[k];
        memset(o, 0, sizeof *o);
        o->has_name = e->has_name;
        memcpy(o->name, e->name, e->name_len + 1);
        o->quota = e->quota;
        o->window_s = e->window_s;
        if (e->quota > 0) {
            sl_decision d;
            sl_peek(&e->limit, e->state, now, 0, &d);
            o->remaining = d.remaining;
        }
    }
    pthread_mutex_unlock(&l->lock);
    return n;
}
