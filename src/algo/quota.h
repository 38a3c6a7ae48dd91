/*
 * quota.h: one rate limit shared by a fleet of nodes that decide locally and
 * sync every interval (the `sync` strategy). Internal to libsluice; pure: no
 * clock, allocation or I/O, `now` passed in, integer nanoseconds.
 *
 * The central half holds the limit as a token bucket that may go into debt,
 * and leases its budget to the nodes, as quota servers do (Google's Doorman,
 * Envoy's rate limit quota service). Each node admits against its lease on
 * its own, with no round trip, and every interval trades what it did for a
 * new lease:
 *
 *     node i                              central (one key)
 *     ------                              -----------------
 *     take, take, refuse, take ...
 *       counts admitted c_i, asked q_i
 *     sl_quota_report_of - c_i, q_i, len ->  sl_quota_sync:
 *                                             1. charge c_i (debt allowed),
 *                                                then refill `remaining`
 *                                             2. release i's lease; a node
 *                                                silent SL_QUOTA_LEASES
 *                                                intervals loses its lease
 *                                             3. avail = remaining - what the
 *                                                other leases may still spend
 *                                                (hold + rate * elapsed)
 *                                             4. w_i = d_i / sum of d_j, d the
 *                                                demand of each live node's
 *                                                last interval, plus 1
 *     sl_quota_apply  <-- hold, rate ----     5. hold = w_i * avail in whole
 *                                                units (at least 1 when it
 *                                                asked and 1 is free; on its
 *                                                first sync of a young key
 *                                                at least B/N), rate =
 *                                                min(w_i * rate, what the
 *                                                others' rates leave)
 *     take against hold + rate * elapsed
 *
 * A node keeps up to one unit of what it has left across a sync (its
 * carry, which it reports and the central charges as it grows and gives
 * back as it shrinks): a share of the rate below one unit an interval (a
 * sparse key over many nodes) would otherwise start from nothing at every
 * sync and never add up to a take.
 *
 * While a key is younger than an interval, the central also keeps, for every
 * node that has not synced it yet, the static share that node may be
 * spending (B/N, in whole units, and r/N): the first node to sync a new key
 * does not take the whole budget from under the others.
 *
 * Why it converges to the limit: under overload every node spends its lease,
 * `remaining` hovers at 0 and each node admits its rate share; the shares are
 * capped so that they never sum above the limit's rate, and follow the last
 * interval's demand (not a slow average), so that traffic that moves is
 * followed within about two intervals. Under the limit every share exceeds
 * its demand, and everything is admitted, as one exact limiter would.
 *
 * Units. Budgets are kept in sub-units, SL_QUOTA_SCALE per unit, so that a
 * node's share of a small rate (1 a minute over 3 nodes) is not rounded to
 * nothing. A rate is `rate` sub-units per `period_ns` nanoseconds, exactly:
 * accrual carries its remainder (`frac`), so nothing is lost between syncs.
 * Every rounding is down: a rate share, an accrual, a hold (to whole
 * units: the fraction stays in `remaining`, for the next sync); the fleet
 * loses at most a sub-unit of rate per grant to it and never admits more
 * for it.
 *
 * Overflow. sl_quota_config_init refuses a limit or a burst above
 * SL_QUOTA_UNITS_MAX units, so that every budget fits in 60 bits and every
 * product below in 128; counts are saturated at SL_QUOTA_UNITS_MAX; a report
 * out of range is refused (SL_ERR_ARGUMENT) and changes nothing. A central
 * state is read into the limit's ranges before a sync (a Redis key can hold
 * any bytes; a reload can lower the limit under leases the old one gave).
 *
 * The bound. While every node syncs at least every SL_QUOTA_LEASES
 * intervals, the fleet admits in any span of length L at most
 *
 *     B + r*L + r*SL_QUOTA_LEASES*I + (N-1)/N * (B + r*I) + N
 *
 * units, N the nodes, r the rate, B the burst, I the interval (what one
 * exact limiter admits is B + r*L). The terms, in order: the refill a node's
 * lease accrues while the central's bucket is already at its brim (the
 * central charges an interval's admissions before that interval's refill,
 * so that a node spending its whole lease loses nothing to the brim, and so
 * cannot tell that refill from a share spent later); and a key a node sees
 * for the first time: until its first sync it spends the static share, B/N
 * and r/N, which the central may not hold when other nodes have spent the
 * key's budget already; and the nodes' carries, a unit each at most, which
 * the central has charged but a brim it reached since does not cut. Under
 * steady traffic none of these recurs: the total over a long run stays within
 * the rounding above of what one exact limiter admits. A node cut off from
 * the central for longer than its lease goes on at its last share of the
 * rate, w_i * r, its tokens capped at the static share's brim (B/N in whole
 * units); a key it holds no lease for gets the static share, B/N and r/N.
 * While the whole fleet is cut off the rates still sum to at most r; while
 * only some nodes are, the central hands their rates to the others once
 * their leases end, and the bound grows by each cut-off node's rate * L.
 *
 * Large costs. A take is decided on one node's lease, so a cost above what
 * a lease holds (about w_i * (B + r*I)) waits for a node whose share of the
 * demand, and so of the budget, is large enough; a cost near B fits only
 * while the other nodes ask little. One exact limiter would admit it once
 * its whole bucket refills.
 *
 * Time. The central decides on its own clock, and a node's lease starts on
 * the node's clock when the answer arrives and ends a lease after the
 * report left (sl_quota_apply): the node then spends no more than the
 * central counts it may, whatever the clocks' offset, and loses the rate's
 * accrual over half a round trip per sync (the central hands it out again
 * as budget). A node's admissions between its report and the answer count
 * in its next report.
 *
 * Algorithms: GCRA, the token bucket and the leaky bucket (the rates; the
 * leaky bucket's queue is not modelled: it admits as GCRA does). A window
 * (fixed, sliding, the log) would need the central to count per window and
 * every lease to end at the window's edge, where the budget comes back
 * whole rather than as a refill; a concurrency limit needs releases, not a
 * rate. Those are refused (SL_ERR_UNSUPPORTED) for now.
 *
 * State. sl_quota_central is a fixed-size record of int64 fields (a Redis
 * string of sizeof(sl_quota_central) bytes, or a hash of its fields); all
 * zero is a key never seen. It depends only on the reports and their times,
 * so that replaying them gives the same bytes.
 */
#ifndef SL_ALGO_QUOTA_H
#define SL_ALGO_QUOTA_H

#include <stdbool.h>
#include <stdint.h>

#include "sluice.h"

/* The most nodes the central keeps a slot for (node ids 0 .. this - 1). */
#define SL_QUOTA_NODES_MAX 16
/* Sub-units per unit. */
#define SL_QUOTA_SCALE (INT64_C(1) << 16)
/* The most units a limit, a burst, a cost or a count may be. */
#define SL_QUOTA_UNITS_MAX (INT64_C(1) << 44)
/* Intervals a lease lives without a sync. */
#define SL_QUOTA_LEASES 3

/* The limit as the quota sees it: derived once, by sl_quota_config_init. */
typedef struct sl_quota_config {
    int64_t rate;        /* sub-units per period_ns: limit * SL_QUOTA_SCALE */
    int64_t period_ns;   /* > 0 */
    int64_t burst;       /* sub-units: the bucket's brim */
    int64_t burst_units; /* units: the largest cost that can ever be admitted */
    int64_t interval_ns; /* between a node's syncs, > 0 */
    int64_t lease_ns;    /* SL_QUOTA_LEASES * interval_ns, at most SL_TIME_MAX */
    int nodes;           /* N, in [1, SL_QUOTA_NODES_MAX] */
} sl_quota_config;

/*
 * Fills *c for limit *l shared by `nodes` nodes syncing every interval_ns.
 * Returns SL_OK; SL_ERR_UNSUPPORTED for an algorithm that is not a rate;
 * SL_ERR_LIMIT or SL_ERR_BURST for a limit or burst above
 * SL_QUOTA_UNITS_MAX; SL_ERR_ARGUMENT for nodes outside
 * [1, SL_QUOTA_NODES_MAX] or interval_ns outside [1, SL_SPAN_MAX].
 */
int sl_quota_config_init(sl_quota_config *c, const sl_limit *l, int nodes, int64_t interval_ns);

/* The central's view of one node. demand 0: never synced. */
typedef struct sl_quota_slot {
    int64_t synced_at; /* ns: its last sync, where its lease starts */
    int64_t demand;    /* units asked per interval over its last interval, plus 1 */
    int64_t hold;      /* sub-units of budget leased at synced_at */
    int64_t rate;      /* sub-units per period_ns leased at synced_at */
    int64_t carry;     /* sub-units the node carries across syncs, as last charged */
} sl_quota_slot;

/* The central state of one key. All zero: never seen (a full bucket). */
typedef struct sl_quota_central {
    int64_t seen;      /* 1 once a sync has run */
    int64_t first;     /* ns: the key's first sync */
    int64_t remaining; /* sub-units at `anchor`, at most the burst; < 0 is debt */
    int64_t anchor;    /* ns: the refill is counted from here */
    int64_t frac;      /* the refill's remainder, in sub-units * ns / period_ns, [0, period_ns) */
    sl_quota_slot node[SL_QUOTA_NODES_MAX];
} sl_quota_central;

/* What a node sends for a key (sl_quota_report fills it). */
typedef struct sl_quota_report {
    int node;          /* its id, in [0, nodes) */
    int64_t admitted;  /* units admitted since its last sync, c_i */
    int64_t asked;     /* units asked, admitted or refused, q_i >= c_i */
    int64_t length_ns; /* the span they were counted over, >= 0 */
    int64_t carry;     /* sub-units it keeps into its next lease, [0, SL_QUOTA_SCALE] */
} sl_quota_report;

/* The central's answer: a lease. */
typedef struct sl_quota_grant {
    int64_t hold; /* sub-units the node may spend at once */
    int64_t rate; /* sub-units per period_ns it gains on top, until the lease ends */
} sl_quota_grant;

/*
 * The central's step for one report at `now`: charges what the node
 * admitted, releases its old lease, and fills *g with its new one (the rules
 * at the top). Returns SL_OK; SL_ERR_TIME for a `now` outside
 * [0, SL_TIME_MAX]; SL_ERR_ARGUMENT for a report out of range (node id,
 * negative counts or length, admitted above asked, counts above
 * SL_QUOTA_UNITS_MAX, a carry outside [0, SL_QUOTA_SCALE]), and then *s is
 * unchanged. A `now` before the state's
 * last sync refills nothing (time never goes back for a state).
 */
int sl_quota_sync(const sl_quota_config *c, sl_quota_central *s, int64_t now,
                  const sl_quota_report *r, sl_quota_grant *g);

/* A node's local state for one key. All zero: never seen. */
typedef struct sl_quota_node {
    int64_t mode;      /* 0 never seen; 1 the static share (no lease); 2 leased */
    int64_t tokens;    /* sub-units at `anchor` */
    int64_t anchor;    /* ns: accrual is counted from here */
    int64_t frac;      /* the accrual's remainder, [0, period_ns) */
    int64_t rate;      /* sub-units per period_ns */
    int64_t cap;       /* sub-units: the static share's brim (a lease has none) */
    int64_t lease_end; /* ns: accrual stops here, and the static share resumes */
    int64_t since;     /* ns: where the counts below began */
    int64_t admitted;  /* units admitted since the last applied sync */
    int64_t asked;     /* units asked since then */
    int64_t reported;  /* units asked that the last applied sync reported */
} sl_quota_node;

/*
 * Decides a take of `cost` units at `now` on the node's own state: admitted
 * when its lease (or, before its first sync and after a lease that ran out,
 * its static share) holds cost units. A cost above the burst can never fit,
 * and a negative one is no take: both are refused without being counted; a
 * cost of 0 is admitted and counts nothing. Returns true when admitted. `now`
 * must lie in [0, SL_TIME_MAX] (the caller's to check, as sl_take_check
 * does).
 */
bool sl_quota_take(const sl_quota_config *c, sl_quota_node *n, int64_t now, int64_t cost);

/* The report node `id` sends at `now`. Changes nothing: the counts are
 * taken off only when its answer is applied, so a sync that fails loses
 * nothing. */
void sl_quota_report_of(const sl_quota_config *c, const sl_quota_node *n, int id, int64_t now,
                        sl_quota_report *r);

/* Applies the central's answer *g to report *r, sent at `sent` and answered
 * at `now` (the central's sync lies between): the node's lease restarts
 * from `now`, ends a lease after `sent`, and the reported counts are taken
 * off its own. A simulator without latency passes the same time twice. */
void sl_quota_apply(const sl_quota_config *c, sl_quota_node *n, int64_t now, int64_t sent,
                    const sl_quota_report *r, const sl_quota_grant *g);

/* Whether the node holds no live lease at `now`: a key it has not synced,
 * whose lease ran out, or that it decides on the static or last share. Such
 * a key is synced before its take (sluiced waits for the answer, the
 * simulator syncs it at once), so that a node that restarts, or a key that
 * was idle, starts from the central's state, not a fresh share. */
bool sl_quota_unleased(const sl_quota_node *n, int64_t now);

/* Whether the node's next interval should sync the key: it was asked for
 * units since its last sync, or that sync reported demand, which a sync
 * reporting none must give back (the central would otherwise keep leasing
 * it a share of the rate that it no longer uses, for the lease's length,
 * and traffic that moved to another node would wait for it). */
bool sl_quota_due(const sl_quota_node *n);

/* Gives back a take of `cost` that sl_quota_take admitted at the same
 * `now` (a multi-limit take refused by a later limit): its tokens and its
 * count, not its demand. A cost above what is counted as admitted is
 * ignored. */
void sl_quota_give_back(sl_quota_node *n, int64_t cost);

/* The bound's excess in units, rounded up: what the fleet may admit in a
 * span beyond B + r*L (the bound above), saturated at INT64_MAX. */
int64_t sl_quota_excess(const sl_quota_config *c);

/* The sub-units the node may spend at `now` (its tokens after accrual),
 * without changing it: for tests and the simulator's plot. */
int64_t sl_quota_node_tokens(const sl_quota_config *c, const sl_quota_node *n, int64_t now);

#endif /* SL_ALGO_QUOTA_H */
