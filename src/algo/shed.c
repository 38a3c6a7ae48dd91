/*
 * shed.c: load shedding by priority, with reserves per class and
 * guarantees per partition (the rules are in sluice.h, above
 * sl_shed_config).
 *
 * Every decision reduces to one number, the *ceiling* a request of class k
 * in partition p may fill the limit up to:
 *
 *   ceiling = limit - (unused reserves held by classes more important than k)
 *             - (unused guarantees held by other partitions, when p is at or
 *               above its own guarantee)
 *
 * and the request is admitted while in_flight < ceiling. Both sums are at
 * most the limit (shares add up to at most 1000 permille, each rounded
 * down), so nothing here can overflow.
 */
#include <string.h>

#include "common/arith.h"
#include "sluice.h"

#define SL_PERMILLE 1000

sl_status sl_shed_config_check(const sl_shed_config *c)
{
    if (c == NULL || c->classes < 1 || c->classes > SL_SHED_CLASSES_MAX ||
        c->partitions < 0 || c->partitions > SL_SHED_PARTITIONS_MAX || c->idle_ns < 0 ||
        c->idle_ns > SL_SPAN_MAX)
        return SL_ERR_ARGUMENT;
    int32_t sum = 0;
    for (int k = 0; k < c->classes; k++) {
        if (c->reserve_permille[k] < 0 || c->reserve_permille[k] > SL_PERMILLE)
            return SL_ERR_ARGUMENT;
        sum += c->reserve_permille[k]; /* at most 8 * 1000 */
    }
    if (sum > SL_PERMILLE)
        return SL_ERR_ARGUMENT;
    sum = 0;
    for (int p = 0; p < c->partitions; p++) {
        if (c->guarantee_permille[p] < 0 || c->guarantee_permille[p] > SL_PERMILLE)
            return SL_ERR_ARGUMENT;
        sum += c->guarantee_permille[p];
    }
    if (sum > SL_PERMILLE)
        return SL_ERR_ARGUMENT;
    return SL_OK;
}

/* permille of limit, rounded down; limit >= 0 and permille in [0, 1000]. */
static int64_t sl_shed_share(int64_t limit, int32_t permille)
{
    return sl_muldiv_floor(limit, permille, SL_PERMILLE);
}

/* Whether a class or partition that last asked at `asked` (when `seen`)
 * still holds its unused share at `now`. A clock that stepped back (asked
 * after now) counts as a recent request: holding is the safe side. */
static bool sl_shed_holds(const sl_shed_config *c, bool seen, int64_t asked, int64_t now)
{
    if (c->idle_ns == 0)
        return true;
    return seen && now - asked < c->idle_ns;
}

/* The unused part of a share of `share` units with `used` in flight. */
static int64_t sl_shed_unused(int64_t share, int64_t used)
{
    return used < share ? share - used : 0;
}

/* What holds back a request of class cls in partition part: the class
 * rule's ceiling (the limit less the unused reserves that more important
 * classes hold), and what the other partitions hold of their guarantees,
 * which a partition at or above its own may not borrow. */
typedef struct sl_shed_room {
    int64_t ceiling;    /* in [0, limit] */
    int64_t held;       /* other partitions' unused guarantees held, in [0, limit] */
    int64_t guaranteed; /* slots left in the partition's own guarantee */
    int by_class, by_partition; /* the first class / partition holding, or -1 */
} sl_shed_room;

static void sl_shed_measure(const sl_shed *s, const sl_shed_config *c, int64_t limit,
                            int64_t now, int cls, int part, sl_shed_room *r)
{
    int64_t held = 0;
    r->by_class = r->by_partition = -1;
    for (int j = 0; j < cls; j++) {
        if (!sl_shed_holds(c, s->class_seen >> j & 1u, s->class_asked[j], now))
            continue;
        int64_t u = sl_shed_unused(sl_shed_share(limit, c->reserve_permille[j]),
                                   s->class_in_flight[j]);
        if (u > 0 && r->by_class < 0)
            r->by_class = j;
        held += u;
    }
    r->ceiling = limit - held;
    r->held = 0;
    if (c->partitions == 0) {
        r->guaranteed = limit; /* no partition rule */
        return;
    }
    r->guaranteed = sl_shed_unused(sl_shed_share(limit, c->guarantee_permille[part]),
                                   s->partition_in_flight[part]);
    for (int q = 0; q < c->partitions; q++) {
        if (q == part)
            continue;
        bool lends = c->lends[q] && c->idle_ns > 0;
        if (lends && !sl_shed_holds(c, s->partition_seen >> q & 1u, s->partition_asked[q], now))
            continue;
        int64_t u = sl_shed_unused(sl_shed_share(limit, c->guarantee_permille[q]),
                                   s->partition_in_flight[q]);
        if (u > 0 && r->by_partition < 0)
            r->by_partition = q;
        r->held += u;
    }
}

/* How many requests of the class and partition r describes would be
 * admitted one after another from `in_flight`: those within the
 * partition's guarantee up to the class ceiling, or, if more, all up to
 * the ceiling less what the other partitions hold. Admitting them changes
 * neither: a class's own requests hold back only less important ones. */
static int64_t sl_shed_remaining(const sl_shed_room *r, int64_t in_flight)
{
    int64_t room = r->ceiling - in_flight;
    if (room <= 0)
        return 0;
    int64_t within = sl_min64(r->guaranteed, room);
    int64_t borrowing = room - r->held; /* room > 0, held in [0, limit]: fits */
    return sl_max64(within, sl_max64(borrowing, 0));
}

sl_status sl_shed_admit(sl_shed *s, const sl_shed_config *c, int64_t limit, int64_t now,
                        int cls, int part, sl_shed_decision *d)
{
    if (d == NULL)
        return SL_ERR_ARGUMENT;
    memset(d, 0, sizeof *d);
    d->by = -1;
    if (s == NULL || sl_shed_config_check(c) != SL_OK || cls < 0 || cls >= c->classes ||
        part < 0 || part >= (c->partitions == 0 ? 1 : c->partitions))
        return SL_ERR_ARGUMENT;
    if (limit < 0)
        return SL_ERR_LIMIT;
    if (now < 0 || now > SL_TIME_MAX)
        return SL_ERR_TIME;
    if (s->in_flight < 0)
        return SL_ERR_ARGUMENT; /* not a state sl_shed_admit wrote */

    /* The request's own class and partition never hold anything back
     * from it, so when they are marked does not change this decision. */
    s->class_asked[cls] = now;
    s->class_seen |= 1u << cls;
    s->partition_asked[part] = now;
    s->partition_seen |= 1u << part;

    sl_shed_room r;
    sl_shed_measure(s, c, limit, now, cls, part, &r);
    d->limit = limit;
    if (sl_shed_remaining(&r, s->in_flight) > 0) {
        /* in_flight < ceiling <= limit: the counts cannot overflow. */
        s->in_flight++;
        s->class_in_flight[cls]++;
        s->partition_in_flight[part]++;
        if (r.guaranteed > 0 && c->partitions > 0)
            r.guaranteed--;
        d->admitted = true;
        d->reason = SL_SHED_ADMITTED;
    } else if (s->in_flight >= limit) {
        d->reason = SL_SHED_FULL;
    } else if (s->in_flight >= r.ceiling) {
        d->reason = SL_SHED_RESERVED;
        d->by = r.by_class;
    } else {
        d->reason = SL_SHED_PARTITION;
        d->by = r.by_partition;
    }
    d->in_flight = s->in_flight;
    d->remaining = sl_shed_remaining(&r, s->in_flight);
    return SL_OK;
}

sl_status sl_shed_done(sl_shed *s, int cls, int part)
{
    if (s == NULL || cls < 0 || cls >= SL_SHED_CLASSES_MAX || part < 0 ||
        part >= SL_SHED_PARTITIONS_MAX || s->in_flight <= 0 || s->class_in_flight[cls] <= 0 ||
        s->partition_in_flight[part] <= 0)
        return SL_ERR_ARGUMENT;
    s->in_flight--;
    s->class_in_flight[cls]--;
    s->partition_in_flight[part]--;
    return SL_OK;
}
