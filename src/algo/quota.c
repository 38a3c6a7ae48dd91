/*
 * quota.c: the sync strategy's rules (quota.h): the central's sync, the
 * node's take and lease.
 */
#include "algo/quota.h"

#include "common/arith.h"

/* The most sub-units a budget or an accrual may reach: far above any brim
 * (SL_QUOTA_UNITS_MAX * SL_QUOTA_SCALE = 2^60), far below overflow. */
#define QUOTA_SUB_MAX (INT64_C(1) << 61)
/* The deepest debt the central records; more is not remembered. */
#define QUOTA_DEBT_MAX (INT64_C(1) << 61)

int sl_quota_config_init(sl_quota_config *c, const sl_limit *l, int nodes, int64_t interval_ns)
{
    if (l->algorithm != SL_GCRA && l->algorithm != SL_TOKEN_BUCKET &&
        l->algorithm != SL_LEAKY_BUCKET)
        return SL_ERR_UNSUPPORTED;
    if (l->limit <= 0 || l->limit > SL_QUOTA_UNITS_MAX)
        return SL_ERR_LIMIT;
    if (l->burst <= 0 || l->burst > SL_QUOTA_UNITS_MAX)
        return SL_ERR_BURST;
    if (l->period_ns <= 0 || l->period_ns > SL_SPAN_MAX)
        return SL_ERR_PERIOD;
    if (nodes < 1 || nodes > SL_QUOTA_NODES_MAX || interval_ns < 1 || interval_ns > SL_SPAN_MAX)
        return SL_ERR_ARGUMENT;
    /* Both products fit: 2^44 * 2^16, and 2^61 * 3 < 2^63. */
    c->rate = l->limit * SL_QUOTA_SCALE;
    c->period_ns = l->period_ns;
    c->burst = l->burst * SL_QUOTA_SCALE;
    c->burst_units = l->burst;
    c->interval_ns = interval_ns;
    c->lease_ns = sl_min64(interval_ns * SL_QUOTA_LEASES, SL_TIME_MAX);
    c->nodes = nodes;
    return SL_OK;
}

/* Sub-units that `rate` (per period_ns) accrues over dt >= 0 ns, with the
 * remainder *frac carried in and out: floor((dt * rate + frac) / period).
 * dt < 2^62 and rate <= 2^60, so the product fits in 128 bits; the result
 * saturates at QUOTA_SUB_MAX. */
static int64_t quota_accrue(const sl_quota_config *c, int64_t rate, int64_t dt, int64_t *frac)
{
    sl_u128 p = (sl_u128)(uint64_t)dt * (uint64_t)rate + (uint64_t)*frac;
    sl_u128 q = p / (uint64_t)c->period_ns;
    *frac = (int64_t)(p % (uint64_t)c->period_ns);
    return q > (sl_u128)QUOTA_SUB_MAX ? QUOTA_SUB_MAX : (int64_t)q;
}

/* floor(a * b / d) for a, b >= 0 below 2^63 and d > 0, saturating at
 * QUOTA_SUB_MAX. */
static int64_t quota_share(int64_t a, uint64_t b, sl_u128 d)
{
    sl_u128 q = (sl_u128)(uint64_t)a * b / d;
    return q > (sl_u128)QUOTA_SUB_MAX ? QUOTA_SUB_MAX : (int64_t)q;
}

/* The static share's brim: B/N in whole units (0 when the burst is below
 * the number of nodes). A fraction of a unit could never be spent, and
 * carried across syncs by every node it would hold units of the budget that
 * no node can take. */
static int64_t quota_static_brim(const sl_quota_config *c)
{
    return c->burst_units / c->nodes * SL_QUOTA_SCALE;
}

/* Is slot j's lease alive at now? A node silent for a whole lease is not:
 * its lease has ended on its side too (sl_quota_take stops at lease_end,
 * which is synced_at + lease). */
static bool quota_live(const sl_quota_config *c, const sl_quota_slot *j, int64_t now)
{
    return j->demand > 0 && now - j->synced_at < c->lease_ns;
}

/* What slot j may still spend of its lease by `now`, at most: its hold, its
 * carry and its rate's accrual since it synced (the node's own arithmetic, from the
 * same instant, so never less than the node can have admitted). */
static int64_t quota_entitled(const sl_quota_config *c, const sl_quota_slot *j, int64_t now)
{
    int64_t frac = 0;
    int64_t dt = now > j->synced_at ? now - j->synced_at : 0;
    int64_t acc = quota_accrue(c, j->rate, dt, &frac);
    return sl_min64(j->hold + j->carry + acc, QUOTA_SUB_MAX);
}

static int64_t quota_clamp(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* Brings every field of *s into the range the rules keep it in. A state
 * the rules wrote is unchanged; one written under another limit (a config
 * reload that lowered the burst or the rate) or bytes no sync wrote (a
 * Redis key can be SET to anything) are read as the nearest state this
 * limit allows, so that the arithmetic below never overflows. */
static void quota_central_clamp(const sl_quota_config *c, sl_quota_central *s)
{
    if (s->seen != 0 && s->seen != 1)
        s->seen = 1;
    s->remaining = quota_clamp(s->remaining, -QUOTA_DEBT_MAX, c->burst);
    s->anchor = quota_clamp(s->anchor, 0, SL_TIME_MAX);
    s->first = quota_clamp(s->first, 0, SL_TIME_MAX);
    s->frac = quota_clamp(s->frac, 0, c->period_ns - 1);
    for (int j = 0; j < SL_QUOTA_NODES_MAX; j++) {
        sl_quota_slot *o = &s->node[j];
        o->synced_at = quota_clamp(o->synced_at, 0, SL_TIME_MAX);
        o->demand = quota_clamp(o->demand, 0, SL_QUOTA_UNITS_MAX + 1);
        o->hold = quota_clamp(o->hold, 0, c->burst);
        o->rate = quota_clamp(o->rate, 0, c->rate);
        o->carry = quota_clamp(o->carry, 0, SL_QUOTA_SCALE);
    }
}

int sl_quota_sync(const sl_quota_config *c, sl_quota_central *s, int64_t now,
                  const sl_quota_report *r, sl_quota_grant *g)
{
    if (now < 0 || now > SL_TIME_MAX)
        return SL_ERR_TIME;
    if (r->node < 0 || r->node >= c->nodes || r->admitted < 0 || r->asked < r->admitted ||
        r->asked > SL_QUOTA_UNITS_MAX || r->length_ns < 0 || r->carry < 0 ||
        r->carry > SL_QUOTA_SCALE)
        return SL_ERR_ARGUMENT;
    quota_central_clamp(c, s);

    /* 1. Charge what the node admitted, then refill to now; debt is kept
     * (down to QUOTA_DEBT_MAX), so that an overshoot is paid back. The
     * charge comes first because the node admitted it during the interval
     * the refill covers: charged after a refill capped at the brim, a node
     * that spends its whole lease would lose a share of every refill. (The
     * price: a refill the brim would have cut while the budget sat full
     * before a burst is counted; that is the r*I per lease in the bound.) */
    if (!s->seen) {
        s->seen = 1;
        s->remaining = c->burst;
        s->anchor = now;
        s->frac = 0;
        s->first = now;
    }
    /* What the node carries into its next lease is charged as it grows,
     * and given back as it shrinks (a node that restarted carries
     * nothing): the central then counts every sub-unit once. */
    sl_quota_slot *me = &s->node[r->node];
    int64_t charge = r->admitted * SL_QUOTA_SCALE + (r->carry - me->carry);
    s->remaining = quota_clamp(s->remaining - charge, -QUOTA_DEBT_MAX, c->burst);
    me->carry = r->carry;
    if (now > s->anchor) {
        int64_t add = quota_accrue(c, c->rate, now - s->anchor, &s->frac);
        s->anchor = now;
        if (add >= c->burst - s->remaining) {
            s->remaining = c->burst;
            s->frac = 0; /* the part beyond the brim is lost, as in a token bucket */
        } else {
            s->remaining += add;
        }
    }

    /* 2. Release the node's old lease (what it did not spend is back: only
     * what it admitted was charged), and record its demand: units asked per
     * interval, plus 1 so that a node that asked nothing keeps a sliver of
     * the budget and all-idle nodes share it evenly. */
    int64_t per = r->asked;
    if (r->length_ns > 0)
        per = quota_share(r->asked, (uint64_t)c->interval_ns, (sl_u128)(uint64_t)r->length_ns);
    /* Was the static share being kept for this node (a young key it had
     * not synced yet, step 3)? Then its first lease holds at least that. */
    bool reserved = me->demand == 0 && r->node < c->nodes && now - s->first < c->interval_ns;
    me->synced_at = now;
    me->demand = sl_min64(per, SL_QUOTA_UNITS_MAX) + 1;
    me->hold = 0;
    me->rate = 0;

    /* 3. What the other live leases may still spend, their rates, and the
     * fleet's demand. Slots whose lease ran out are cleared. */
    __int128 others = 0;
    __int128 others_rate = 0; /* up to 16 rates of at most 2^60 each */
    sl_u128 demand = 0;
    for (int j = 0; j < SL_QUOTA_NODES_MAX; j++) {
        sl_quota_slot *o = &s->node[j];
        if (j == r->node)
            continue;
        if (o->demand == 0) {
            if (j >= c->nodes)
                continue;
            /* A node that has not synced yet may be spending its static
             * share (B/N and r/N since the key's first sync): while the key
             * is younger than an interval, that is kept for it. A node that
             * saw the key before its first sync syncs within an interval;
             * one that sees it later is the bound's last term. */
            int64_t age = now > s->first ? now - s->first : 0;
            if (age < c->interval_ns) {
                int64_t frac = 0;
                others += quota_static_brim(c) + quota_accrue(c, c->rate / c->nodes, age, &frac);
                others_rate += c->rate / c->nodes;
            }
            continue;
        }
        if (!quota_live(c, o, now)) {
            /* Its carry stays charged: the node may still spend it, from
             * its static share. */
            o->hold = 0;
            o->rate = 0;
            o->demand = 0;
            continue;
        }
        others += quota_entitled(c, o, now);
        others_rate += o->rate;
        demand += (uint64_t)o->demand;
    }
    demand += (uint64_t)me->demand;

    /* 4 and 5. The node's weight is its share of the demand; its hold is
     * that share of what the other leases leave of the budget (a share of
     * the whole budget would let the busy nodes' holds, reserved first,
     * starve a quiet node of any); its rate that share of the limit's,
     * never more than the others' rates leave, so that the live rates
     * never sum above the limit's. */
    __int128 avail = (__int128)s->remaining - others;
    int64_t hold = 0;
    if (avail > 0) {
        /* avail <= remaining <= the burst < 2^61. */
        hold = quota_share((int64_t)avail, (uint64_t)me->demand, demand);
        /* Holds are whole units: fractions held by every node could add
         * up to units that no node can spend (a burst of 1 over 3 nodes,
         * a third each). What is left over stays in `remaining` for the
         * next sync. A node that asked gets at least one unit when that
         * much is free, so that a burst smaller than the fleet still admits
         * someone. */
        if (r->asked > 0 && hold < SL_QUOTA_SCALE)
            hold = SL_QUOTA_SCALE;
        /* On a young key, a node's first sync gets the static share kept
         * for it: a burst from idle over every node is then spread over
         * the nodes' first leases whole, not as shares of shares. */
        if (reserved && hold < quota_static_brim(c))
            hold = quota_static_brim(c);
        if ((__int128)hold > avail)
            hold = (int64_t)avail;
        hold -= hold % SL_QUOTA_SCALE;
    }
    int64_t rate = quota_share(c->rate, (uint64_t)me->demand, demand);
    __int128 free_rate = (__int128)c->rate - others_rate;
    if ((__int128)rate > free_rate)
        rate = free_rate > 0 ? (int64_t)free_rate : 0;
    me->hold = hold;
    me->rate = rate;
    g->hold = hold;
    g->rate = rate;
    return SL_OK;
}

/* Brings the node's tokens to `now`: accrual at its rate up to its lease's
 * end, capped at the static share's brim; when the lease has run out, the
 * static share (B/N, r/N) resumes from its end. */
static void quota_node_advance(const sl_quota_config *c, sl_quota_node *n, int64_t now)
{
    if (n->mode == 0) {
        /* A key this node has not seen: its guess before the first sync. */
        n->mode = 1;
        n->cap = quota_static_brim(c);
        n->tokens = n->cap;
        n->rate = c->rate / c->nodes;
        n->anchor = now;
        n->frac = 0;
        n->lease_end = SL_TIME_MAX;
        n->since = now;
    }
    for (;;) {
        int64_t end = now < n->lease_end ? now : n->lease_end;
        if (end > n->anchor) {
            int64_t add = quota_accrue(c, n->rate, end - n->anchor, &n->frac);
            n->tokens = sl_min64(n->tokens + add, QUOTA_SUB_MAX);
            n->anchor = end;
        }
        if (n->mode == 1 && n->tokens >= n->cap) {
            n->tokens = n->cap;
            n->frac = 0;
        }
        if (n->mode != 2 || now < n->lease_end)
            return;
        /* The lease ran out without a sync (the central is out of reach):
         * the node goes on at its last share of the rate, keeping what is
         * left of the lease up to the static share's brim. */
        n->mode = 1;
        n->cap = quota_static_brim(c);
        n->tokens = sl_min64(n->tokens, n->cap);
        n->anchor = n->lease_end;
        n->frac = 0;
        n->lease_end = SL_TIME_MAX;
    }
}

bool sl_quota_take(const sl_quota_config *c, sl_quota_node *n, int64_t now, int64_t cost)
{
    quota_node_advance(c, n, now);
    if (cost == 0)
        return true;
    if (cost < 0 || cost > c->burst_units)
        return false; /* never fits: not a demand the budget could serve */
    n->asked = sl_min64(n->asked + cost, SL_QUOTA_UNITS_MAX);
    int64_t need = cost * SL_QUOTA_SCALE; /* <= 2^60 */
    if (n->tokens < need)
        return false;
    n->tokens -= need;
    n->admitted = sl_min64(n->admitted + cost, SL_QUOTA_UNITS_MAX);
    return true;
}

void sl_quota_report_of(const sl_quota_config *c, const sl_quota_node *n, int id, int64_t now,
                        sl_quota_report *r)
{
    r->node = id;
    r->admitted = n->admitted;
    r->asked = n->asked;
    r->length_ns = n->mode != 0 && now > n->since ? now - n->since : 0;
    /* Up to one unit of what it has left: a rate share below a unit per
     * interval would otherwise start again from nothing at every sync, and
     * never add up to a take (a sparse key over many nodes). */
    r->carry = n->mode == 0 ? 0 : sl_min64(sl_quota_node_tokens(c, n, now), SL_QUOTA_SCALE);
}

void sl_quota_apply(const sl_quota_config *c, sl_quota_node *n, int64_t now, int64_t sent,
                    const sl_quota_report *r, const sl_quota_grant *g)
{
    n->mode = 2;
    n->tokens = g->hold + r->carry;
    n->rate = g->rate;
    n->anchor = now;
    n->frac = 0;
    n->cap = 0;
    /* The central counts the lease from its sync, which came after `sent`
     * and before `now`: it starts here at the latest and ends a lease
     * after the earliest, so that the node never spends what the central
     * does not count. */
    n->lease_end = sl_add_clamp(sent < now ? sent : now, c->lease_ns, SL_TIME_MAX);
    n->admitted = sl_max64(n->admitted - r->admitted, 0);
    n->asked = sl_max64(n->asked - r->asked, 0);
    n->reported = r->asked;
    n->since = now;
}

bool sl_quota_due(const sl_quota_node *n)
{
    return n->mode != 0 && (n->asked > 0 || n->admitted > 0 || n->reported > 0);
}

bool sl_quota_unleased(const sl_quota_node *n, int64_t now)
{
    return n->mode != 2 || now >= n->lease_end;
}

void sl_quota_give_back(sl_quota_node *n, int64_t cost)
{
    if (cost <= 0 || cost > n->admitted)
        return;
    n->tokens = sl_min64(n->tokens + cost * SL_QUOTA_SCALE, QUOTA_SUB_MAX);
    n->admitted -= cost;
}

int64_t sl_quota_node_tokens(const sl_quota_config *c, const sl_quota_node *n, int64_t now)
{
    sl_quota_node copy = *n;
    quota_node_advance(c, &copy, now);
    return copy.tokens;
}

int64_t sl_quota_excess(const sl_quota_config *c)
{
    /* 3*r*I + (N-1)/N * (B + r*I) + N, r = limit / period, over the common
     * denominator N * period: every product fits in 128 bits (limit *
     * interval < 2^105, times 3N < 2^6). */
    sl_u128 n = (uint64_t)c->nodes, p = (uint64_t)c->period_ns;
    sl_u128 ri = (sl_u128)(uint64_t)(c->rate / SL_QUOTA_SCALE) * (uint64_t)c->interval_ns;
    sl_u128 num = SL_QUOTA_LEASES * ri * n + (n - 1) * ((sl_u128)(uint64_t)c->burst_units * p + ri) +
                  n * n * p;
    sl_u128 den = n * p;
    return sl_sat64(num / den + (num % den != 0));
}
