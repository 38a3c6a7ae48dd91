/*
 * Carried states (sluice.h): a key moved to another limit keeps the units it
 * has used, in units, across rates and algorithms; a state of one algorithm
 * is never silently read as a fresh state of another; the store and its
 * snapshots keep carried states as they are.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"

#define MIN (60 * NS_PER_SEC)
#define T0 (INT64_C(1000) * NS_PER_SEC)

static sl_limit carried(sl_algorithm a, int64_t limit, int64_t period, int64_t burst)
{
    sl_limit l;
    cr_assert_eq(sl_limit_init(&l, a, limit, period, burst), SL_OK);
    cr_assert_eq(sl_limit_carry(&l), SL_OK);
    return l;
}

/* Takes n units one at a time, all admitted. */
static void take_n(const sl_limit *l, void *state, int64_t now, int64_t n)
{
    sl_decision d;
    for (int64_t i = 0; i < n; i++) {
        cr_assert_eq(sl_take(l, state, now, 1, &d), SL_OK);
        cr_assert(d.allowed, "take %lld of %lld", (long long)i, (long long)n);
    }
}

static int64_t remaining(const sl_limit *l, const void *state, int64_t now)
{
    sl_decision d;
    cr_assert_eq(sl_peek(l, state, now, 0, &d), SL_OK);
    return d.remaining;
}

Test(carry, upgrade_keeps_units_not_time)
{
    sl_limit free_tier = carried(SL_GCRA, 100, MIN, 0), paid = carried(SL_GCRA, 10000, MIN, 0);
    int64_t st[6] = {0};
    cr_assert_eq(sl_state_size(&free_tier), 32);
    take_n(&free_tier, st, T0, 100);
    cr_assert_eq(remaining(&free_tier, st, T0), 0);
    /* Without carrying, 60 s of debt at 6 ms a request would leave 0. */
    cr_assert_eq(remaining(&paid, st, T0), 9900);
    sl_decision d;
    cr_assert_eq(sl_take(&paid, st, T0, 1, &d), SL_OK);
    cr_assert(d.allowed);
    cr_assert_eq(d.remaining, 9899);
}

Test(carry, downgrade_has_nothing_left_and_refills_at_the_new_rate)
{
    sl_limit free_tier = carried(SL_GCRA, 100, MIN, 0), paid = carried(SL_GCRA, 10000, MIN, 0);
    int64_t st[6] = {0};
    take_n(&paid, st, T0, 5000);
    cr_assert_eq(remaining(&free_tier, st, T0), 0);
    int64_t copy[6];
    memcpy(copy, st, sizeof st);
    sl_decision d;
    cr_assert_eq(sl_take(&free_tier, st, T0, 1, &d), SL_OK);
    cr_assert(!d.allowed);
    cr_assert_eq(memcmp(copy, st, sizeof st), 0, "a refused take changes nothing");
    /* 30 s of debt at 6 ms a unit: at most 99 used, so one more fits 100,
     * once it is down to 594 ms, 29.406 s from now; the refusal says so. */
    cr_assert_eq(d.retry_after_ns, 29406 * NS_PER_MS);
    cr_assert_eq(sl_take(&free_tier, st, T0 + 29405 * NS_PER_MS, 1, &d), SL_OK);
    cr_assert(!d.allowed);
    cr_assert_eq(sl_take(&free_tier, st, T0 + 29406 * NS_PER_MS, 1, &d), SL_OK);
    cr_assert(d.allowed);
    cr_assert_eq(d.remaining, 0);
    /* and back on the paid tier: the 100 used at the free tier's rate */
    cr_assert_eq(remaining(&paid, st, T0 + 29406 * NS_PER_MS), 9900);
}

Test(carry, a_round_trip_through_another_algorithm_gives_no_fresh_budget)
{
    sl_limit free_tier = carried(SL_SLIDING_WINDOW, 100, MIN, 0);
    sl_limit deflt = carried(SL_GCRA, 1000, MIN, 0);
    unsigned char a[64] = {0}, b[64] = {0};
    take_n(&free_tier, a, T0, 100);
    /* free -> default: the store adopts the state of another algorithm */
    cr_assert_eq(sl_state_adopt(&deflt, b, SL_SLIDING_WINDOW, true, a, sl_state_size(&free_tier),
                                T0),
                 SL_OK);
    cr_assert_eq(remaining(&deflt, b, T0), 900);
    /* default -> free again */
    memset(a, 0xee, sizeof a);
    cr_assert_eq(sl_state_adopt(&free_tier, a, SL_GCRA, true, b, sl_state_size(&deflt), T0), SL_OK);
    cr_assert_eq(remaining(&free_tier, a, T0), 0);
    sl_decision d;
    cr_assert_eq(sl_take(&free_tier, a, T0, 1, &d), SL_OK);
    cr_assert(!d.allowed);
}

/* Every pair of algorithms that can carry: k units used under the first are
 * k units used under the second (capped at what it admits at once), at
 * random limits, periods and times (a slow model: remaining = burst - k). */
Test(carry, units_carry_between_every_pair_of_algorithms)
{
    static const sl_algorithm algos[] = {SL_GCRA, SL_TOKEN_BUCKET, SL_LEAKY_BUCKET,
                                         SL_FIXED_WINDOW, SL_SLIDING_LOG, SL_SLIDING_WINDOW};
    test_rng rng = {42};
    for (int round = 0; round < 400; round++) {
        sl_algorithm fa = algos[test_range(&rng, 0, 5)], ta = algos[test_range(&rng, 0, 5)];
        int64_t fl = test_range(&rng, 1, 200), tl = test_range(&rng, 1, 200);
        int64_t fp = test_range(&rng, 1, 3600) * NS_PER_SEC, tp = test_range(&rng, 1, 3600) * NS_PER_SEC;
        sl_limit from = carried(fa, fl, fp, 0), to = carried(ta, tl, tp, 0);
        int64_t now = T0 + test_range(&rng, 0, 1000) * NS_PER_MS;
        int64_t k = test_range(&rng, 0, fl);
        void *fs = test_state(&from), *ts = test_state(&to);
        take_n(&from, fs, now, k);
        cr_assert_eq(sl_state_convert(&from, fs, &to, ts, now), SL_OK);
        int64_t want = to.burst - test_min(k, to.burst);
        cr_assert_eq(remaining(&to, ts, now), want, "%s %lld/%llds -> %s %lld/%llds, %lld used",
                     sl_algorithm_name(fa), (long long)fl, (long long)(fp / NS_PER_SEC),
                     sl_algorithm_name(ta), (long long)tl, (long long)(tp / NS_PER_SEC),
                     (long long)k);
        /* The same through a take that finds the other limit's name in
         * place, when the state sizes match (the same algorithm). */
        if (fa == ta && sl_state_size(&from) == sl_state_size(&to) && fa != SL_SLIDING_LOG) {
            sl_decision d;
            cr_assert_eq(sl_take(&to, fs, now, 0, &d), SL_OK);
            cr_assert_eq(d.remaining, want);
        }
        free(fs);
        free(ts);
    }
}

Test(carry, a_peek_under_another_limit_changes_nothing)
{
    sl_limit a = carried(SL_TOKEN_BUCKET, 10, MIN, 0), b = carried(SL_TOKEN_BUCKET, 100, MIN, 0);
    int64_t st[4] = {0}, copy[4];
    take_n(&a, st, T0, 4);
    memcpy(copy, st, sizeof st);
    cr_assert_eq(remaining(&b, st, T0), 96);
    cr_assert_eq(memcmp(copy, st, sizeof st), 0);
    /* a take of 0 is a peek too */
    sl_decision d;
    cr_assert_eq(sl_take(&b, st, T0, 0, &d), SL_OK);
    cr_assert_eq(memcmp(copy, st, sizeof st), 0);
    /* a take converts in place and names the new limit */
    cr_assert_eq(sl_take(&b, st, T0, 1, &d), SL_OK);
    cr_assert_eq(d.remaining, 95);
    cr_assert_eq(st[0], 100);
    cr_assert_eq(st[1], MIN);
    cr_assert_eq(remaining(&a, st, T0), 5, "and back: 5 used of 10");
}

Test(carry, a_change_of_burst_alone_keeps_the_state)
{
    sl_limit a = carried(SL_GCRA, 100, MIN, 10), b = carried(SL_GCRA, 100, MIN, 50);
    int64_t st[4] = {0};
    take_n(&a, st, T0, 10);
    cr_assert_eq(remaining(&b, st, T0), 40);
}

Test(carry, what_cannot_be_carried_is_refused)
{
    sl_limit l;
    cr_assert_eq(sl_limit_init(&l, SL_CONCURRENCY, 10, MIN, 0), SL_OK);
    cr_assert_eq(sl_limit_carry(&l), SL_ERR_ALGORITHM);
    cr_assert_eq(sl_limit_init_cell(&l, 15, 30, 60), SL_OK);
    cr_assert_eq(sl_limit_carry(&l), SL_ERR_ALGORITHM);
    cr_assert_eq(sl_state_size(&l), 16, "a refused limit is unchanged");

    /* An uncarried state of another algorithm: a request naming another
     * algorithm gets no fresh budget. */
    sl_limit g, tb;
    cr_assert_eq(sl_limit_init(&g, SL_GCRA, 10, MIN, 0), SL_OK);
    cr_assert_eq(sl_limit_init(&tb, SL_TOKEN_BUCKET, 10, MIN, 0), SL_OK);
    int64_t st[2] = {0}, out[2];
    take_n(&g, st, T0, 3);
    cr_assert_eq(sl_state_adopt(&tb, out, SL_GCRA, false, st, sizeof st, T0), SL_ERR_WRONGTYPE);
    /* the same algorithm, uncarried: read under the new limit */
    cr_assert_eq(sl_state_adopt(&g, out, SL_GCRA, false, st, sizeof st, T0), SL_OK);
    cr_assert_eq(memcmp(out, st, sizeof st), 0);
}

Test(carry, a_policy_reads_an_uncarried_state_of_another_algorithm_under_its_own_rate)
{
    /* a state from before policies named their limit: a fixed window with 30 used */
    sl_limit fw, policy = carried(SL_SLIDING_WINDOW, 100, MIN, 0), adhoc;
    cr_assert_eq(sl_limit_init(&fw, SL_FIXED_WINDOW, 100, MIN, 0), SL_OK);
    cr_assert_eq(sl_limit_init(&adhoc, SL_SLIDING_WINDOW, 100, MIN, 0), SL_OK);
    int64_t st[2] = {0}, out[5], plain[3];
    take_n(&fw, st, T0, 30);
    cr_assert_eq(sl_state_adopt(&policy, out, SL_FIXED_WINDOW, false, st, sizeof st, T0), SL_OK);
    cr_assert_eq(remaining(&policy, out, T0), 70);
    cr_assert_eq(sl_state_adopt(&adhoc, plain, SL_FIXED_WINDOW, false, st, sizeof st, T0),
                 SL_ERR_WRONGTYPE, "an ad-hoc limit still refuses");
    /* an old sliding log: its size says its limit */
    sl_limit log;
    cr_assert_eq(sl_limit_init(&log, SL_SLIDING_LOG, 8, MIN, 0), SL_OK);
    void *ls = test_state(&log);
    take_n(&log, ls, T0, 5);
    cr_assert_eq(sl_state_adopt(&policy, out, SL_SLIDING_LOG, false, ls, sl_state_size(&log), T0),
                 SL_OK);
    cr_assert_eq(remaining(&policy, out, T0), 95);
    free(ls);
}

Test(carry, a_resized_sliding_log_keeps_its_newest_timestamps)
{
    sl_limit ten, twenty, five;
    cr_assert_eq(sl_limit_init(&ten, SL_SLIDING_LOG, 10, MIN, 0), SL_OK);
    cr_assert_eq(sl_limit_init(&twenty, SL_SLIDING_LOG, 20, MIN, 0), SL_OK);
    cr_assert_eq(sl_limit_init(&five, SL_SLIDING_LOG, 5, MIN, 0), SL_OK);
    void *a = test_state(&ten), *b = test_state(&twenty), *c = test_state(&five);
    for (int i = 0; i < 10; i++)
        take_n(&ten, a, T0 + i * NS_PER_SEC, 1);
    cr_assert_eq(sl_state_adopt(&twenty, b, SL_SLIDING_LOG, false, a, sl_state_size(&ten), T0),
                 SL_OK);
    cr_assert_eq(remaining(&twenty, b, T0 + 10 * NS_PER_SEC), 10);
    /* the oldest leaves the window at its own time, a minute after it came */
    cr_assert_eq(remaining(&twenty, b, T0 + MIN), 11);
    cr_assert_eq(sl_state_adopt(&five, c, SL_SLIDING_LOG, false, a, sl_state_size(&ten), T0),
                 SL_OK);
    cr_assert_eq(remaining(&five, c, T0 + 10 * NS_PER_SEC), 0);
    sl_decision d;
    cr_assert_eq(sl_take(&five, c, T0 + MIN + 5 * NS_PER_SEC - 1, 1, &d), SL_OK);
    cr_assert(!d.allowed, "the 5 newest, from T0+5s..9s, are still in the window");
    cr_assert_eq(sl_take(&five, c, T0 + MIN + 5 * NS_PER_SEC, 1, &d), SL_OK);
    cr_assert(d.allowed);
    free(a);
    free(b);
    free(c);
}

Test(carry, resized_leases_are_kept_while_they_fit)
{
    sl_limit four, two, eight;
    cr_assert_eq(sl_limit_init(&four, SL_CONCURRENCY, 4, MIN, 0), SL_OK);
    cr_assert_eq(sl_limit_init(&two, SL_CONCURRENCY, 2, MIN, 0), SL_OK);
    cr_assert_eq(sl_limit_init(&eight, SL_CONCURRENCY, 8, MIN, 0), SL_OK);
    void *a = test_state(&four), *b = test_state(&eight), *c = test_state(&two);
    sl_decision d;
    cr_assert_eq(sl_lease_acquire(&four, a, T0, 1, 77, &d), SL_OK);
    cr_assert_eq(sl_lease_acquire(&four, a, T0, 2, 78, &d), SL_OK);
    cr_assert_eq(sl_state_adopt(&eight, b, SL_CONCURRENCY, false, a, sl_state_size(&four), T0),
                 SL_OK);
    cr_assert_eq(remaining(&eight, b, T0), 5);
    cr_assert_eq(sl_lease_release(&eight, b, T0, 78), 1, "a lease taken under 4 is released under 8");
    cr_assert_eq(sl_state_adopt(&two, c, SL_CONCURRENCY, false, a, sl_state_size(&four), T0),
                 SL_ERR_WRONGTYPE, "3 units in flight do not fit 2");
    /* once they have expired, nothing is in flight */
    cr_assert_eq(sl_state_adopt(&two, c, SL_CONCURRENCY, false, a, sl_state_size(&four), T0 + MIN),
                 SL_OK);
    cr_assert_eq(remaining(&two, c, T0 + MIN), 2);
    free(a);
    free(b);
    free(c);
}

/* The store: a key taken under one tier's limit, then another's, of another
 * algorithm and state size, keeps its units; an ad-hoc limit of another
 * algorithm is refused and changes nothing; a snapshot keeps carried states. */
Test(carry, the_store_carries_policy_states_and_refuses_ad_hoc_ones)
{
    sl_store *s;
    cr_assert_eq(sl_store_new(NULL, &s), SL_OK);
    sl_limit free_tier = carried(SL_SLIDING_LOG, 100, MIN, 0);
    sl_limit paid = carried(SL_GCRA, 10000, MIN, 0);
    sl_decision d;
    for (int i = 0; i < 100; i++)
        cr_assert_eq(sl_store_take(s, "u1", 2, &free_tier, T0, 1, &d), SL_OK);
    cr_assert(!d.allowed || d.remaining == 0);
    cr_assert_eq(sl_store_peek(s, "u1", 2, &paid, T0, 0, &d), SL_OK);
    cr_assert_eq(d.remaining, 9900);
    cr_assert_eq(sl_store_take(s, "u1", 2, &paid, T0, 1, &d), SL_OK);
    cr_assert(d.allowed);
    cr_assert_eq(d.remaining, 9899);
    cr_assert_eq(sl_store_take(s, "u1", 2, &free_tier, T0, 1, &d), SL_OK);
    cr_assert(!d.allowed, "back on the free tier: 101 used of 100");

    /* all or nothing over a state of another shape */
    sl_take_item items[1] = {{"u1", 2, &paid, 1}};
    int failed;
    cr_assert_eq(sl_store_take_many(s, items, 1, T0, &d, &failed), SL_OK);
    cr_assert_eq(failed, -1);
    cr_assert_eq(d.remaining, 9898);

    /* snapshot and restore: still 102 used */
    char path[] = "/tmp/sluice-carry-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert_eq(sl_store_snapshot_save(s, path, T0, 5 * T0), SL_OK);
    sl_store *r;
    cr_assert_eq(sl_store_new(NULL, &r), SL_OK);
    size_t loaded = 0;
    cr_assert_eq(sl_store_snapshot_load(r, path, 2 * T0, 5 * T0, &loaded), SL_OK);
    cr_assert_eq(loaded, 1);
    cr_assert_eq(sl_store_peek(r, "u1", 2, &paid, 2 * T0, 0, &d), SL_OK);
    cr_assert_eq(d.remaining, 9898, "got %lld", (long long)d.remaining);
    unlink(path);
    sl_store_free(r);

    /* ad hoc: one state per key */
    sl_limit g, w;
    cr_assert_eq(sl_limit_init(&g, SL_GCRA, 10, MIN, 0), SL_OK);
    cr_assert_eq(sl_limit_init(&w, SL_FIXED_WINDOW, 10, MIN, 0), SL_OK);
    for (int i = 0; i < 10; i++)
        cr_assert_eq(sl_store_take(s, "adhoc", 5, &g, T0, 1, &d), SL_OK);
    cr_assert_eq(sl_store_take(s, "adhoc", 5, &w, T0, 1, &d), SL_ERR_WRONGTYPE);
    cr_assert_eq(sl_store_peek(s, "adhoc", 5, &w, T0, 0, &d), SL_ERR_WRONGTYPE);
    cr_assert_eq(sl_store_peek(s, "adhoc", 5, &g, T0, 0, &d), SL_OK);
    cr_assert_eq(d.remaining, 0, "the refused takes left the state as it was");
    /* a policy's limit of another algorithm reads it at its own rate: 60 s of
     * GCRA debt at 100 a minute is 100 used of the log's 100 */
    cr_assert_eq(sl_store_take(s, "adhoc", 5, &free_tier, T0, 1, &d), SL_OK);
    cr_assert(!d.allowed);
    cr_assert_eq(sl_store_take(s, "adhoc", 5, &free_tier, T0 + MIN / 2, 1, &d), SL_OK);
    cr_assert(d.allowed, "half the debt later, half the log");
    cr_assert_eq(d.remaining, 49);
    cr_assert_eq(sl_store_reset(s, "adhoc", 5), 1);
    cr_assert_eq(sl_store_take(s, "adhoc", 5, &w, T0, 1, &d), SL_OK);
    cr_assert(d.allowed);
    sl_store_free(s);
}
