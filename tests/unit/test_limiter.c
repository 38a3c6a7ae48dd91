/*
 * sl_limiter and sl_limiters on a virtual clock: admission up to the
 * estimator's limit, completion and its bad leases, expiry as the loss
 * signal, measured latencies, priorities, reconfiguration, bad input that
 * changes nothing, time that goes back, the keyed table (independent keys,
 * reconfiguration, eviction and its refusal, bad keys, each and info, and
 * its allocation failures), and a closed loop in which the anchored
 * estimator finds a modelled service's capacity.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "testlib.h"

#define MS NS_PER_MS
#define SEC NS_PER_SEC

/* AIMD between lo and hi starting at init, one class, a TTL of 1 s. */
static sl_limiter_config aimd(int64_t init, int64_t lo, int64_t hi)
{
    sl_limiter_config c;
    memset(&c, 0, sizeof c);
    cr_assert_eq(sl_adapt_config_default(SL_ADAPT_AIMD, &c.adapt), SL_OK);
    c.adapt.initial_limit = init;
    c.adapt.min_limit = lo;
    c.adapt.max_limit = hi;
    c.shed.classes = 1;
    c.ttl_ns = SEC;
    return c;
}

/* A fixed limit n (AIMD held at n). */
static sl_limiter_config fixed(int64_t n)
{
    return aimd(n, n, n);
}

static sl_limiter *make(const sl_limiter_config *c)
{
    sl_status err = SL_ERR_IO;
    sl_limiter *lim = sl_limiter_new(c, &err);
    cr_assert_not_null(lim);
    cr_assert_eq(err, SL_OK);
    return lim;
}

static sl_limiter_stats stats(sl_limiter *lim, int64_t now)
{
    sl_limiter_stats st;
    sl_limiter_stats_get(lim, now, &st);
    return st;
}

/* Acquires at now for class cls and asserts the decision's admission. */
static sl_limiter_lease take(sl_limiter *lim, int64_t now, int cls, uint64_t id, bool admitted)
{
    sl_limiter_lease l = {0, 0};
    sl_limiter_decision d;
    cr_assert_eq(sl_limiter_acquire(lim, now, cls, 0, id, &l, &d), SL_OK);
    cr_assert_eq(d.admitted, admitted, "id %llu at %lld: admitted %d", (unsigned long long)id,
                 (long long)now, d.admitted);
    if (admitted) {
        cr_assert_eq(l.id, id);
        cr_assert_eq(d.reason, SL_SHED_ADMITTED);
        cr_assert_eq(d.retry_after_ns, 0);
    }
    return l;
}

Test(limiter, admits_up_to_the_limit_then_refuses)
{
    sl_limiter_config c = fixed(4);
    sl_limiter *lim = make(&c);
    for (uint64_t i = 1; i <= 4; i++)
        take(lim, 0, 0, i, true);
    sl_limiter_lease l;
    sl_limiter_decision d;
    cr_assert_eq(sl_limiter_acquire(lim, 0, 0, 0, 5, &l, &d), SL_OK);
    cr_assert(!d.admitted);
    cr_assert_eq(d.reason, SL_SHED_FULL);
    cr_assert_eq(d.limit, 4);
    cr_assert_eq(d.in_flight, 4);
    cr_assert_eq(d.remaining, 0);
    /* AIMD knows no latency: the hint is the TTL. */
    cr_assert_eq(d.retry_after_ns, SEC);
    sl_limiter_stats st = stats(lim, 0);
    cr_assert_eq(st.in_flight, 4);
    cr_assert_eq(st.admitted, 4);
    cr_assert_eq(st.refused, 1);
    cr_assert_eq(st.refused_by_class[0], 1);
    cr_assert_eq(st.limit, 4);
    cr_assert_eq(st.kind, SL_ADAPT_AIMD);
    sl_limiter_free(lim);
}

Test(limiter, complete_frees_a_slot_once_and_only_for_its_lease)
{
    sl_limiter_config c = fixed(2);
    sl_limiter *lim = make(&c);
    sl_limiter_lease a = take(lim, 0, 0, 11, true);
    sl_limiter_lease b = take(lim, 0, 0, 12, true);
    cr_assert_neq(a.slot, b.slot);
    take(lim, 0, 0, 13, false);

    sl_limiter_lease wrong_id = {a.id + 100, a.slot};
    sl_limiter_lease wrong_slot = {a.id, b.slot};
    sl_limiter_lease far_slot = {a.id, 1000};
    sl_limiter_lease zero = {0, a.slot};
    cr_assert_eq(sl_limiter_complete(lim, MS, &wrong_id, SL_ADAPT_SUCCESS, MS), 0);
    cr_assert_eq(sl_limiter_complete(lim, MS, &wrong_slot, SL_ADAPT_SUCCESS, MS), 0);
    cr_assert_eq(sl_limiter_complete(lim, MS, &far_slot, SL_ADAPT_SUCCESS, MS), 0);
    cr_assert_eq(sl_limiter_complete(lim, MS, &zero, SL_ADAPT_SUCCESS, MS), 0);
    cr_assert_eq(stats(lim, MS).in_flight, 2, "bad leases free nothing");

    cr_assert_eq(sl_limiter_complete(lim, MS, &a, SL_ADAPT_SUCCESS, MS), 1);
    cr_assert_eq(sl_limiter_complete(lim, MS, &a, SL_ADAPT_SUCCESS, MS), 0, "twice");
    sl_limiter_stats st = stats(lim, MS);
    cr_assert_eq(st.in_flight, 1);
    cr_assert_eq(st.completed, 1);
    cr_assert_eq(st.dropped, 0);
    /* The freed slot admits one more, and only one. */
    take(lim, MS, 0, 14, true);
    take(lim, MS, 0, 15, false);
    /* IGNORED and DROPPED free their slots too; DROPPED is counted. */
    cr_assert_eq(sl_limiter_complete(lim, 2 * MS, &b, SL_ADAPT_IGNORED, 0), 1);
    st = stats(lim, 2 * MS);
    cr_assert_eq(st.in_flight, 1);
    cr_assert_eq(st.completed, 2);
    sl_limiter_free(lim);
}

Test(limiter, slots_grow_past_the_first_array)
{
    sl_limiter_config c = fixed(100);
    sl_limiter *lim = make(&c);
    sl_limiter_lease l[100];
    for (int i = 0; i < 100; i++)
        l[i] = take(lim, i, 0, (uint64_t)i + 1, true);
    take(lim, 100, 0, 1000, false);
    for (int i = 0; i < 100; i++) {
        cr_assert_lt(l[i].slot, 100);
        cr_assert_eq(sl_limiter_complete(lim, 200, &l[i], SL_ADAPT_SUCCESS, 10), 1);
    }
    cr_assert_eq(stats(lim, 200).in_flight, 0);
    sl_limiter_free(lim);
}

Test(limiter, expiry_frees_the_slot_and_is_a_drop)
{
    sl_limiter_config c = aimd(10, 1, 10);
    sl_limiter *lim = make(&c);
    sl_limiter_lease l[10];
    for (int i = 0; i < 10; i++)
        l[i] = take(lim, 0, 0, (uint64_t)i + 1, true);
    take(lim, SEC - 1, 0, 99, false);
    sl_limiter_stats st = stats(lim, SEC - 1);
    cr_assert_eq(st.expired, 0, "a lease lives until its TTL");
    cr_assert_eq(st.in_flight, 10);

    st = stats(lim, SEC);
    cr_assert_eq(st.expired, 10);
    cr_assert_eq(st.in_flight, 0);
    cr_assert_eq(st.completed, 0);
    /* Ten drops of requests that started together: one cut, 10 * 0.9. */
    cr_assert_eq(st.limit, 9);
    cr_assert_eq(sl_limiter_complete(lim, SEC, &l[0], SL_ADAPT_SUCCESS, MS), 0,
                 "an expired lease is unknown");
    for (int i = 0; i < 9; i++)
        take(lim, SEC, 0, (uint64_t)i + 100, true);
    take(lim, SEC, 0, 200, false);
    sl_limiter_free(lim);
}

Test(limiter, expiry_is_found_oldest_first)
{
    sl_limiter_config c = fixed(3);
    sl_limiter *lim = make(&c);
    sl_limiter_lease a = take(lim, 0, 0, 1, true);
    sl_limiter_lease b = take(lim, 100 * MS, 0, 2, true);
    sl_limiter_lease x = take(lim, 200 * MS, 0, 3, true);
    cr_assert_eq(sl_limiter_complete(lim, 150 * MS, &b, SL_ADAPT_SUCCESS, 0), 1,
                 "the middle lease leaves the list");
    sl_limiter_stats st = stats(lim, SEC);
    cr_assert_eq(st.expired, 1);
    cr_assert_eq(st.in_flight, 1);
    cr_assert_eq(sl_limiter_complete(lim, SEC, &a, SL_ADAPT_SUCCESS, 0), 0);
    cr_assert_eq(sl_limiter_complete(lim, SEC + 199 * MS, &x, SL_ADAPT_SUCCESS, 0), 1);
    cr_assert_eq(stats(lim, 5 * SEC).expired, 1);
    sl_limiter_free(lim);
}

/* Vegas records the smallest latency as its no-load RTT: what the limiter
 * measured, when the completion gives none. */
static sl_limiter_config vegas(void)
{
    sl_limiter_config c;
    memset(&c, 0, sizeof c);
    cr_assert_eq(sl_adapt_config_default(SL_ADAPT_VEGAS, &c.adapt), SL_OK);
    c.adapt.initial_limit = 2;
    c.adapt.min_limit = 1;
    c.adapt.max_limit = 2;
    c.shed.classes = 1;
    c.ttl_ns = SEC;
    return c;
}

Test(limiter, latency_is_measured_when_not_given)
{
    sl_limiter_config c = vegas();
    sl_limiter *lim = make(&c);
    sl_limiter_lease l = take(lim, 5 * SEC, 0, 1, true);
    cr_assert_eq(sl_limiter_complete(lim, 5 * SEC + 7 * MS, &l, SL_ADAPT_SUCCESS, 0), 1);
    cr_assert_eq(stats(lim, 5 * SEC + 7 * MS).rtt_base_ns, 7 * MS);
    l = take(lim, 6 * SEC, 0, 2, true);
    cr_assert_eq(sl_limiter_complete(lim, 6 * SEC + 9 * MS, &l, SL_ADAPT_SUCCESS, 3 * MS), 1);
    cr_assert_eq(stats(lim, 6 * SEC + 9 * MS).rtt_base_ns, 3 * MS, "a given rtt is used");
    /* A refusal's hint is that latency. */
    take(lim, 7 * SEC, 0, 3, true);
    take(lim, 7 * SEC, 0, 4, true);
    sl_limiter_lease r;
    sl_limiter_decision d;
    cr_assert_eq(sl_limiter_acquire(lim, 7 * SEC, 0, 0, 5, &r, &d), SL_OK);
    cr_assert(!d.admitted);
    cr_assert_eq(d.retry_after_ns, 3 * MS);
    sl_limiter_free(lim);
}

Test(limiter, a_slow_measured_success_is_a_drop_for_aimd)
{
    sl_limiter_config c = aimd(10, 1, 10);
    c.adapt.timeout_ns = 100 * MS;
    sl_limiter *lim = make(&c);
    sl_limiter_lease l = take(lim, 0, 0, 1, true);
    cr_assert_eq(sl_limiter_complete(lim, 200 * MS, &l, SL_ADAPT_SUCCESS, 10 * MS), 1);
    cr_assert_eq(stats(lim, 200 * MS).limit, 10, "10 ms given: fast");
    l = take(lim, SEC, 0, 2, true);
    cr_assert_eq(sl_limiter_complete(lim, SEC + 200 * MS, &l, SL_ADAPT_SUCCESS, 0), 1);
    cr_assert_eq(stats(lim, SEC + 200 * MS).limit, 9, "200 ms measured: slower than 100");
    sl_limiter_free(lim);
}

/* Three classes on a fixed limit of 10: critical reserves 2 slots,
 * default 1; idle after a second. */
static sl_limiter_config three_classes(void)
{
    sl_limiter_config c = fixed(10);
    c.shed.classes = 3;
    c.shed.reserve_permille[SL_PRIO_CRITICAL] = 200;
    c.shed.reserve_permille[SL_PRIO_DEFAULT] = 100;
    c.shed.idle_ns = SEC;
    return c;
}

Test(limiter, sheddable_is_refused_first_and_critical_keeps_its_reserve)
{
    sl_limiter_config c = three_classes();
    sl_limiter *lim = make(&c);
    uint64_t id = 1;
    take(lim, 0, SL_PRIO_CRITICAL, id++, true); /* critical holds: 1 of its 2 unused */
    take(lim, 0, SL_PRIO_DEFAULT, id++, true);  /* default holds its 1: used */
    int shed = 0;
    for (;;) {
        sl_limiter_lease l;
        sl_limiter_decision d;
        cr_assert_eq(sl_limiter_acquire(lim, MS, SL_PRIO_SHEDDABLE, 0, id++, &l, &d), SL_OK);
        if (!d.admitted) {
            cr_assert_eq(d.reason, SL_SHED_RESERVED);
            cr_assert_eq(d.by, SL_PRIO_CRITICAL);
            break;
        }
        shed++;
    }
    /* 10 less critical's unused slot: 9 in flight, 7 of them sheddable. */
    cr_assert_eq(shed, 7);
    take(lim, MS, SL_PRIO_DEFAULT, id++, false);
    take(lim, MS, SL_PRIO_CRITICAL, id++, true);
    sl_limiter_lease l;
    sl_limiter_decision d;
    cr_assert_eq(sl_limiter_acquire(lim, MS, SL_PRIO_CRITICAL, 0, id++, &l, &d), SL_OK);
    cr_assert(!d.admitted);
    cr_assert_eq(d.reason, SL_SHED_FULL);
    sl_limiter_stats st = stats(lim, MS);
    cr_assert_eq(st.class_in_flight[SL_PRIO_CRITICAL], 2);
    cr_assert_eq(st.class_in_flight[SL_PRIO_DEFAULT], 1);
    cr_assert_eq(st.class_in_flight[SL_PRIO_SHEDDABLE], 7);
    cr_assert_eq(st.refused_by_class[SL_PRIO_SHEDDABLE], 1);
    cr_assert_eq(st.refused_by_class[SL_PRIO_DEFAULT], 1);
    cr_assert_eq(st.refused_by_class[SL_PRIO_CRITICAL], 1);
    cr_assert_eq(st.classes, 3);
    sl_limiter_free(lim);
}

Test(limiter, configure_keeps_the_leases_and_clamps_the_limit)
{
    sl_limiter_config c = aimd(10, 1, 10);
    sl_limiter *lim = make(&c);
    sl_limiter_lease l[6];
    for (int i = 0; i < 6; i++)
        l[i] = take(lim, 0, 0, (uint64_t)i + 1, true);
    sl_limiter_config low = aimd(2, 1, 4);
    cr_assert_eq(sl_limiter_configure(lim, &low, MS), SL_OK);
    sl_limiter_stats st = stats(lim, MS);
    cr_assert_eq(st.limit, 4, "10 clamped to the new max, not the new initial 2");
    cr_assert_eq(st.in_flight, 6);
    cr_assert_eq(st.max_limit, 4);
    take(lim, MS, 0, 100, false);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(sl_limiter_complete(lim, 2 * MS, &l[i], SL_ADAPT_IGNORED, 0), 1);
    take(lim, 2 * MS, 0, 101, true);

    sl_limiter_config high = aimd(8, 8, 20);
    cr_assert_eq(sl_limiter_configure(lim, &high, 3 * MS), SL_OK);
    st = stats(lim, 3 * MS);
    cr_assert_eq(st.limit, 8, "4 clamped up to the new min");
    cr_assert_eq(st.in_flight, 4);
    cr_assert_eq(st.admitted, 7, "counters carry over");
    for (int i = 3; i < 6; i++)
        cr_assert_eq(sl_limiter_complete(lim, 4 * MS, &l[i], SL_ADAPT_IGNORED, 0), 1);
    sl_limiter_free(lim);
}

Test(limiter, configure_moves_leases_of_lost_classes_to_the_last)
{
    sl_limiter_config c = three_classes();
    c.shed.partitions = 3;
    c.shed.guarantee_permille[0] = 300;
    sl_limiter *lim = make(&c);
    sl_limiter_lease l[3];
    sl_limiter_decision d;
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(sl_limiter_acquire(lim, 0, 2, 2, (uint64_t)i + 1, &l[i], &d), SL_OK);
        cr_assert(d.admitted);
    }
    sl_limiter_config two = three_classes();
    two.shed.classes = 2;
    two.shed.reserve_permille[1] = 0;
    cr_assert_eq(sl_limiter_configure(lim, &two, MS), SL_OK);
    sl_limiter_stats st = stats(lim, MS);
    cr_assert_eq(st.class_in_flight[1], 3);
    cr_assert_eq(st.class_in_flight[2], 0);
    cr_assert_eq(st.partition_in_flight[0], 3, "no partitions: all in partition 0");
    cr_assert_eq(st.partition_in_flight[2], 0);
    cr_assert_eq(st.in_flight, 3);
    cr_assert_eq(st.classes, 2);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(sl_limiter_complete(lim, 2 * MS, &l[i], SL_ADAPT_SUCCESS, MS), 1);
    st = stats(lim, 2 * MS);
    cr_assert_eq(st.in_flight, 0);
    cr_assert_eq(st.class_in_flight[1], 0);
    cr_assert_eq(sl_limiter_acquire(lim, 2 * MS, 2, 0, 9, &l[0], &d), SL_ERR_ARGUMENT,
                 "class 2 is gone");
    sl_limiter_free(lim);
}

Test(limiter, configure_with_the_same_config_keeps_the_estimate)
{
    sl_limiter_config c = vegas();
    sl_limiter *lim = make(&c);
    sl_limiter_lease l = take(lim, 0, 0, 1, true);
    cr_assert_eq(sl_limiter_complete(lim, 5 * MS, &l, SL_ADAPT_SUCCESS, 0), 1);
    cr_assert_eq(stats(lim, 5 * MS).rtt_base_ns, 5 * MS);
    sl_limiter_config same = vegas();
    cr_assert_eq(sl_limiter_configure(lim, &same, 6 * MS), SL_OK);
    cr_assert_eq(stats(lim, 6 * MS).rtt_base_ns, 5 * MS, "nothing restarted");
    sl_limiter_config other = vegas();
    other.adapt.probe_multiplier = 31;
    cr_assert_eq(sl_limiter_configure(lim, &other, 7 * MS), SL_OK);
    cr_assert_eq(stats(lim, 7 * MS).rtt_base_ns, 0, "the estimator restarted");
    sl_limiter_free(lim);
}

Test(limiter, bad_input_is_an_error_and_changes_nothing)
{
    sl_limiter_config c = three_classes();
    c.shed.reserve_permille[SL_PRIO_DEFAULT] = 0;
    sl_limiter *lim = make(&c);
    take(lim, 0, 0, 1, true);
    take(lim, 0, 1, 2, true);
    sl_limiter_lease l;
    sl_limiter_decision d;
    /* All later than the leases' TTL: an acquire that went on to expire
     * them would show in the stats below, read at 0. */
    int64_t late = 2 * SEC;
    cr_assert_eq(sl_limiter_acquire(lim, late, 0, 0, 0, &l, &d), SL_ERR_ARGUMENT, "id 0");
    cr_assert(!d.admitted);
    cr_assert_eq(sl_limiter_acquire(lim, late, 3, 0, 3, &l, &d), SL_ERR_ARGUMENT, "class 3");
    cr_assert_eq(sl_limiter_acquire(lim, late, -1, 0, 3, &l, &d), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_limiter_acquire(lim, late, 0, 1, 3, &l, &d), SL_ERR_ARGUMENT, "partition");
    cr_assert_eq(sl_limiter_acquire(lim, late, 0, 0, 3, NULL, &d), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_limiter_acquire(lim, late, 0, 0, 3, &l, NULL), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_limiter_acquire(lim, -1, 0, 0, 3, &l, &d), SL_ERR_TIME);
    cr_assert_eq(sl_limiter_acquire(lim, SL_TIME_MAX + 1, 0, 0, 3, &l, &d), SL_ERR_TIME);
    sl_limiter_lease any = {1, 0};
    cr_assert_eq(sl_limiter_complete(lim, late, &any, (sl_adapt_outcome)7, 0), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_limiter_complete(lim, late, &any, SL_ADAPT_SUCCESS, SL_SPAN_MAX + 1),
                 SL_ERR_ARGUMENT);
    cr_assert_eq(sl_limiter_complete(lim, late, NULL, SL_ADAPT_SUCCESS, 0), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_limiter_complete(lim, -5, &any, SL_ADAPT_SUCCESS, 0), SL_ERR_TIME);

    sl_limiter_config bad = c;
    bad.ttl_ns = 0;
    cr_assert_eq(sl_limiter_configure(lim, &bad, late), SL_ERR_ARGUMENT);
    bad = c;
    bad.adapt.min_limit = 30; /* above max */
    cr_assert_eq(sl_limiter_configure(lim, &bad, late), SL_ERR_LIMIT);
    bad = c;
    bad.shed.reserve_permille[1] = 900; /* 200 + 900 > 1000 */
    cr_assert_eq(sl_limiter_configure(lim, &bad, late), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_limiter_configure(lim, NULL, late), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_limiter_configure(lim, &c, -1), SL_ERR_TIME);

    sl_limiter_stats st = stats(lim, 0);
    cr_assert_eq(st.in_flight, 2);
    cr_assert_eq(st.expired, 0);
    cr_assert_eq(st.admitted, 2);
    cr_assert_eq(st.refused, 0);
    cr_assert_eq(st.completed, 0);
    cr_assert_eq(st.classes, 3);
    cr_assert_eq(st.limit, 10);
    sl_limiter_free(lim);
}

Test(limiter, a_bad_config_makes_no_limiter)
{
    sl_limiter_config c = fixed(4);
    sl_status err = SL_OK;
    c.ttl_ns = SL_SPAN_MAX + 1;
    cr_assert_null(sl_limiter_new(&c, &err));
    cr_assert_eq(err, SL_ERR_ARGUMENT);
    c = fixed(4);
    c.adapt.kind = SL_ADAPT_KIND_COUNT;
    cr_assert_null(sl_limiter_new(&c, &err));
    cr_assert_eq(err, SL_ERR_ALGORITHM);
    c = fixed(4);
    c.shed.classes = 0;
    cr_assert_null(sl_limiter_new(&c, &err));
    cr_assert_eq(err, SL_ERR_ARGUMENT);
    cr_assert_null(sl_limiter_new(NULL, NULL));
    cr_assert_eq(sl_limiter_config_check(NULL), SL_ERR_ARGUMENT);
    c = fixed(4);
    cr_assert_eq(sl_limiter_config_check(&c), SL_OK);
}

Test(limiter, time_that_goes_back_counts_as_the_newest)
{
    sl_limiter_config c = vegas();
    sl_limiter *lim = make(&c);
    take(lim, 10 * SEC, 0, 1, true);
    sl_limiter_lease l = take(lim, 5 * SEC, 0, 2, true); /* started at 10 s */
    sl_limiter_stats st = stats(lim, 11 * SEC - 1);
    cr_assert_eq(st.expired, 0, "the lease acquired 'at 5 s' lives until 11 s");
    cr_assert_eq(st.in_flight, 2);
    /* Completed 'at 1 s': at 11 s - 1 ns, the newest seen. */
    cr_assert_eq(sl_limiter_complete(lim, SEC, &l, SL_ADAPT_SUCCESS, 0), 1);
    cr_assert_eq(stats(lim, 0).rtt_base_ns, SEC - 1);
    cr_assert_eq(stats(lim, 11 * SEC).expired, 1);
    sl_limiter_free(lim);
}

Test(limiter, allocation_failures_refuse_and_change_nothing)
{
    sl_limiter_config c = fixed(20);
    sl_status err = SL_OK;
    sl_alloc_fail_nth(1);
    cr_assert_null(sl_limiter_new(&c, &err));
    sl_alloc_fail_nth(0);
    cr_assert_eq(err, SL_ERR_NOMEM);
    sl_alloc_fail_nth(2);
    cr_assert_null(sl_limiter_new(&c, &err), "the slots' allocation");
    sl_alloc_fail_nth(0);
    cr_assert_eq(err, SL_ERR_NOMEM);

    sl_limiter *lim = make(&c);
    for (uint64_t i = 1; i <= 8; i++)
        take(lim, 0, 0, i, true);
    /* The ninth needs the slots to grow. */
    sl_limiter_lease l = {0, 0};
    sl_limiter_decision d;
    sl_alloc_fail_nth(1);
    cr_assert_eq(sl_limiter_acquire(lim, 0, 0, 0, 9, &l, &d), SL_ERR_NOMEM);
    sl_alloc_fail_nth(0);
    cr_assert(!d.admitted);
    sl_limiter_stats st = stats(lim, 0);
    cr_assert_eq(st.in_flight, 8);
    cr_assert_eq(st.class_in_flight[0], 8);
    cr_assert_eq(st.admitted, 8);
    take(lim, 0, 0, 9, true);
    sl_limiter_free(lim);
    test_assert_no_leak();
}

/* ---- the keyed table ---- */

static sl_status tacquire(sl_limiters *t, const char *key, const sl_limiter_config *c,
                          int64_t now, uint64_t id, sl_limiter_lease *l, sl_limiter_decision *d)
{
    return sl_limiters_acquire(t, key, strlen(key), c, now, 0, 0, id, l, d);
}

Test(limiters, two_keys_are_independent)
{
    sl_limiters *t = sl_limiters_new(100, 64);
    cr_assert_not_null(t);
    sl_limiter_config c = fixed(2);
    sl_limiter_lease l, la;
    sl_limiter_decision d;
    cr_assert_eq(tacquire(t, "a", &c, 0, 1, &la, &d), SL_OK);
    cr_assert(d.admitted);
    cr_assert_eq(tacquire(t, "a", &c, 0, 2, &l, &d), SL_OK);
    cr_assert(d.admitted);
    cr_assert_eq(tacquire(t, "a", &c, 0, 3, &l, &d), SL_OK);
    cr_assert(!d.admitted, "a is full");
    cr_assert_eq(tacquire(t, "b", &c, 0, 4, &l, &d), SL_OK);
    cr_assert(d.admitted, "b is not");
    cr_assert_eq(d.in_flight, 1);
    cr_assert_eq(sl_limiters_complete(t, "b", 1, MS, &la, SL_ADAPT_SUCCESS, 0), 0,
                 "a's lease on b");
    cr_assert_eq(sl_limiters_complete(t, "zz", 2, MS, &la, SL_ADAPT_SUCCESS, 0), 0,
                 "an unknown key");
    cr_assert_eq(sl_limiters_complete(t, "a", 1, MS, &la, SL_ADAPT_SUCCESS, 0), 1);
    sl_limiter_stats st;
    cr_assert_eq(sl_limiters_stats(t, "a", 1, MS, &st), 1);
    cr_assert_eq(st.in_flight, 1);
    cr_assert_eq(st.refused, 1);
    cr_assert_eq(sl_limiters_stats(t, "b", 1, MS, &st), 1);
    cr_assert_eq(st.in_flight, 1);
    cr_assert_eq(st.refused, 0);
    cr_assert_eq(sl_limiters_stats(t, "c", 1, MS, &st), 0);
    cr_assert_eq(st.admitted, 0, "zeroed");
    sl_limiters_free(t);
}

Test(limiters, another_config_reconfigures_the_key)
{
    sl_limiters *t = sl_limiters_new(100, 64);
    sl_limiter_config two = fixed(2), three = fixed(3);
    sl_limiter_lease l;
    sl_limiter_decision d;
    for (uint64_t i = 1; i <= 2; i++)
        cr_assert_eq(tacquire(t, "k", &two, 0, i, &l, &d), SL_OK);
    cr_assert_eq(tacquire(t, "k", &two, 0, 3, &l, &d), SL_OK);
    cr_assert(!d.admitted);
    cr_assert_eq(tacquire(t, "k", &three, 0, 4, &l, &d), SL_OK);
    cr_assert(d.admitted, "the limit is 3 now, with the two leases kept");
    cr_assert_eq(d.in_flight, 3);
    cr_assert_eq(d.limit, 3);
    sl_limiter_config bad = fixed(3);
    bad.ttl_ns = -1;
    cr_assert_eq(tacquire(t, "k", &bad, 0, 5, &l, &d), SL_ERR_ARGUMENT);
    cr_assert_eq(tacquire(t, "new", &bad, 0, 5, &l, &d), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_limiters_acquire(t, "new", 3, &two, 0, 5, 0, 6, &l, &d), SL_ERR_ARGUMENT,
                 "class out of range");
    sl_limiters_info info;
    sl_limiters_info_get(t, &info);
    cr_assert_eq(info.keys, 1, "bad input made no key");
    sl_limiter_stats st;
    cr_assert_eq(sl_limiters_stats(t, "k", 1, 0, &st), 1);
    cr_assert_eq(st.max_limit, 3);
    sl_limiters_free(t);
}

Test(limiters, configure_reaches_every_key_of_a_prefix_at_once)
{
    sl_limiters *t = sl_limiters_new(100, 64);
    sl_limiter_config two = fixed(2), five = fixed(5);
    sl_limiter_lease l;
    sl_limiter_decision d;
    cr_assert_eq(tacquire(t, "p\x1f" "a", &two, 0, 1, &l, &d), SL_OK);
    cr_assert_eq(tacquire(t, "p\x1f" "b", &two, 0, 2, &l, &d), SL_OK);
    cr_assert_eq(tacquire(t, "q\x1f" "a", &two, 0, 3, &l, &d), SL_OK);
    cr_assert_eq(tacquire(t, "p", &two, 0, 4, &l, &d), SL_OK);
    cr_assert_eq(sl_limiters_configure(t, "p\x1f", 2, &five, MS), 2);
    sl_limiter_stats st;
    const char *keys[] = {"p\x1f" "a", "p\x1f" "b", "q\x1f" "a", "p"};
    const int64_t max[] = {5, 5, 2, 2};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(sl_limiters_stats(t, keys[i], strlen(keys[i]), MS, &st), 1);
        cr_assert_eq(st.max_limit, max[i], "key %d", i);
        cr_assert_eq(st.in_flight, 1, "key %d keeps its lease", i);
    }
    cr_assert_eq(sl_limiters_configure(t, "p\x1f", 2, &five, MS), 0, "already so");
    sl_limiter_config bad = fixed(3);
    bad.ttl_ns = -1;
    cr_assert_eq(sl_limiters_configure(t, "", 0, &bad, MS), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_limiters_stats(t, "p", 1, MS, &st), 1);
    cr_assert_eq(st.max_limit, 2, "a refused config changes nothing");
    cr_assert_eq(sl_limiters_configure(t, "", 0, &five, MS), 2, "every other key");
    cr_assert_eq(sl_limiters_configure(NULL, "", 0, &five, MS), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_limiters_configure(t, NULL, 1, &five, MS), SL_ERR_ARGUMENT);
    sl_limiters_free(t);
}

Test(limiters, a_new_key_at_the_cap_evicts_an_idle_one_or_is_refused)
{
    sl_limiters *t = sl_limiters_new(2, 64);
    sl_limiter_config c = fixed(2);
    sl_limiter_lease la, lb, lc;
    sl_limiter_decision d;
    cr_assert_eq(tacquire(t, "a", &c, 0, 1, &la, &d), SL_OK);
    cr_assert_eq(tacquire(t, "b", &c, 0, 2, &lb, &d), SL_OK);
    cr_assert_eq(sl_limiters_complete(t, "a", 1, MS, &la, SL_ADAPT_SUCCESS, 0), 1);
    cr_assert_eq(tacquire(t, "c", &c, 2 * MS, 3, &lc, &d), SL_OK);
    cr_assert(d.admitted);
    sl_limiters_info info;
    sl_limiters_info_get(t, &info);
    cr_assert_eq(info.keys, 2);
    cr_assert_eq(info.max_keys, 2);
    cr_assert_eq(info.evicted, 1);
    sl_limiter_stats st;
    cr_assert_eq(sl_limiters_stats(t, "a", 1, 2 * MS, &st), 0, "a, idle, was evicted");
    cr_assert_eq(sl_limiters_stats(t, "b", 1, 2 * MS, &st), 1, "b holds a lease");

    /* b and c both hold leases: no room. */
    sl_limiter_lease l;
    cr_assert_eq(tacquire(t, "d", &c, 3 * MS, 4, &l, &d), SL_ERR_NOMEM);
    cr_assert(!d.admitted);
    sl_limiters_info_get(t, &info);
    cr_assert_eq(info.keys, 2);
    cr_assert_eq(info.evicted, 1);
    /* Once b's lease expires, b is idle and d takes its place. */
    cr_assert_eq(tacquire(t, "d", &c, SEC, 5, &l, &d), SL_OK);
    cr_assert(d.admitted);
    cr_assert_eq(sl_limiters_stats(t, "b", 1, SEC, &st), 0);
    sl_limiters_free(t);
}

Test(limiters, bad_keys)
{
    sl_limiters *t = sl_limiters_new(10, 4);
    sl_limiter_config c = fixed(2);
    sl_limiter_lease l = {1, 0};
    sl_limiter_decision d;
    sl_limiter_stats st;
    cr_assert_eq(sl_limiters_acquire(t, "", 0, &c, 0, 0, 0, 1, &l, &d), SL_ERR_KEY);
    cr_assert_eq(sl_limiters_acquire(t, "abcde", 5, &c, 0, 0, 0, 1, &l, &d), SL_ERR_KEY);
    cr_assert_eq(sl_limiters_acquire(t, "abcd", 4, &c, 0, 0, 0, 1, &l, &d), SL_OK);
    cr_assert_eq(sl_limiters_complete(t, "abcde", 5, 0, &l, SL_ADAPT_SUCCESS, 0), SL_ERR_KEY);
    cr_assert_eq(sl_limiters_complete(t, "", 0, 0, &l, SL_ADAPT_SUCCESS, 0), SL_ERR_KEY);
    cr_assert_eq(sl_limiters_stats(t, "abcde", 5, 0, &st), SL_ERR_KEY);
    cr_assert_eq(sl_limiters_stats(t, NULL, 0, 0, &st), SL_ERR_KEY);
    cr_assert_null(sl_limiters_new(0, 4));
    cr_assert_null(sl_limiters_new(4, 0));
    sl_limiters_free(t);
}

typedef struct seen {
    int calls;
    int64_t in_flight;
    bool saw_a, saw_bb;
} seen;

static void count_key(void *arg, const void *key, size_t keylen, const sl_limiter_stats *st)
{
    seen *s = arg;
    s->calls++;
    s->in_flight += st->in_flight;
    if (keylen == 1 && memcmp(key, "a", 1) == 0)
        s->saw_a = true;
    if (keylen == 2 && memcmp(key, "bb", 2) == 0)
        s->saw_bb = true;
}

Test(limiters, each_and_info)
{
    sl_limiters *t = sl_limiters_new(100, 64);
    sl_limiters_info empty;
    sl_limiters_info_get(t, &empty);
    cr_assert_eq(empty.keys, 0);
    cr_assert_gt(empty.bytes, 0);
    sl_limiter_config c = fixed(5);
    sl_limiter_lease l;
    sl_limiter_decision d;
    cr_assert_eq(tacquire(t, "a", &c, 0, 1, &l, &d), SL_OK);
    cr_assert_eq(tacquire(t, "bb", &c, 0, 2, &l, &d), SL_OK);
    cr_assert_eq(tacquire(t, "bb", &c, 0, 3, &l, &d), SL_OK);
    seen s = {0, 0, false, false};
    sl_limiters_each(t, MS, count_key, &s);
    cr_assert_eq(s.calls, 2);
    cr_assert_eq(s.in_flight, 3);
    cr_assert(s.saw_a && s.saw_bb);
    sl_limiters_info info;
    sl_limiters_info_get(t, &info);
    cr_assert_eq(info.keys, 2);
    cr_assert_eq(info.evicted, 0);
    /* Two limiters with 5 slots of 40 bytes each at least. */
    cr_assert_geq(info.bytes, empty.bytes + 2 * 5 * 40);
    /* Past the TTL each sees the leases expire. */
    s = (seen){0, 0, false, false};
    sl_limiters_each(t, 2 * SEC, count_key, &s);
    cr_assert_eq(s.calls, 2);
    cr_assert_eq(s.in_flight, 0);
    sl_limiters_free(t);
}

Test(limiters, many_keys_grow_the_buckets)
{
    sl_limiters *t = sl_limiters_new(5000, 64);
    sl_limiter_config c = fixed(1);
    sl_limiter_lease l;
    sl_limiter_decision d;
    char key[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        cr_assert_eq(tacquire(t, key, &c, 0, (uint64_t)i + 1, &l, &d), SL_OK);
        cr_assert(d.admitted);
    }
    for (int i = 0; i < 5000; i++) {
        snprintf(key, sizeof key, "key-%d", i);
        sl_limiter_lease li = {(uint64_t)i + 1, 0};
        cr_assert_eq(sl_limiters_complete(t, key, strlen(key), MS, &li, SL_ADAPT_SUCCESS, 0), 1,
                     "%s", key);
    }
    sl_limiters_info info;
    sl_limiters_info_get(t, &info);
    cr_assert_eq(info.keys, 5000);
    cr_assert_eq(tacquire(t, "one more", &c, 2 * MS, 9, &l, &d), SL_OK);
    sl_limiters_info_get(t, &info);
    cr_assert_eq(info.keys, 5000);
    cr_assert_eq(info.evicted, 1);
    sl_limiters_free(t);
}

Test(limiters, allocation_failures_refuse_and_leak_nothing)
{
    sl_limiters *t = sl_limiters_new(10, 64);
    sl_limiter_config c = fixed(2);
    sl_limiter_lease l;
    sl_limiter_decision d;
    for (long nth = 1; nth <= 2; nth++) {
        sl_alloc_fail_nth(nth);
        cr_assert_eq(tacquire(t, "k", &c, 0, 1, &l, &d), SL_ERR_NOMEM, "allocation %ld", nth);
        sl_alloc_fail_nth(0);
        sl_limiters_info info;
        sl_limiters_info_get(t, &info);
        cr_assert_eq(info.keys, 0);
    }
    cr_assert_eq(tacquire(t, "k", &c, 0, 1, &l, &d), SL_OK);
    cr_assert(d.admitted);
    sl_limiters_free(t);
    for (long nth = 1; nth <= 40; nth++) {
        sl_alloc_fail_nth(nth);
        sl_limiters *u = sl_limiters_new(10, 64);
        sl_alloc_fail_nth(0);
        sl_limiters_free(u);
    }
    test_assert_no_leak();
}

/* ---- a closed loop on a modelled service ---- */

#define SIM_C 20                  /* the service's capacity */
#define SIM_BASE (10 * MS)        /* its latency up to C in flight */
#define SIM_CLIENTS 60            /* each sends again as soon as it can */
#define SIM_TICK (250 * 1000)     /* 250 us */
#define SIM_END (120 * SEC)
#define SIM_FROM (60 * SEC)       /* the limit averaged from here */

/* Latency of a request that starts with n in flight: the base up to C,
 * then a queue: n / C times the base. */
static int64_t sim_latency(int64_t n)
{
    return n <= SIM_C ? SIM_BASE : SIM_BASE * n / SIM_C;
}

Test(limiter, anchored_finds_the_capacity_of_a_modelled_service)
{
    sl_limiter_config c;
    memset(&c, 0, sizeof c);
    cr_assert_eq(sl_adapt_config_default(SL_ADAPT_ANCHORED, &c.adapt), SL_OK);
    c.shed.classes = 1;
    c.ttl_ns = 2 * SEC;
    sl_limiter *lim = make(&c);
    struct {
        bool busy;
        int64_t wake; /* ends (busy) or sends again (idle) */
        sl_limiter_lease lease;
    } cl[SIM_CLIENTS];
    memset(cl, 0, sizeof cl);
    uint64_t id = 1;
    int64_t sum = 0, n = 0, lo = INT64_MAX, hi = 0;
    for (int64_t now = 0; now < SIM_END; now += SIM_TICK) {
        for (int i = 0; i < SIM_CLIENTS; i++) {
            if (cl[i].busy && cl[i].wake <= now) {
                cr_assert_eq(sl_limiter_complete(lim, now, &cl[i].lease, SL_ADAPT_SUCCESS, 0),
                             1);
                cl[i].busy = false;
            }
        }
        for (int i = 0; i < SIM_CLIENTS; i++) {
            if (cl[i].busy || cl[i].wake > now)
                continue;
            sl_limiter_decision d;
            cr_assert_eq(sl_limiter_acquire(lim, now, 0, 0, id++, &cl[i].lease, &d), SL_OK);
            if (d.admitted) {
                cl[i].busy = true;
                cl[i].wake = now + sim_latency(d.in_flight);
            } else {
                cl[i].wake = now + d.retry_after_ns;
            }
        }
        if (now >= SIM_FROM) {
            sl_limiter_stats st = stats(lim, now);
            sum += st.limit;
            n++;
            lo = st.limit < lo ? st.limit : lo;
            hi = st.limit > hi ? st.limit : hi;
        }
    }
    sl_limiter_stats st = stats(lim, SIM_END);
    int64_t mean = sum / n;
    printf("anchored on capacity %d: limit %lld (%lld .. %lld) over the last %lld s; "
           "baseline %lld us, short %lld us; %llu admitted, %llu refused, %llu expired\n",
           SIM_C, (long long)mean, (long long)lo, (long long)hi,
           (long long)((SIM_END - SIM_FROM) / SEC), (long long)(st.rtt_base_ns / 1000),
           (long long)(st.rtt_short_ns / 1000), (unsigned long long)st.admitted,
           (unsigned long long)st.refused, (unsigned long long)st.expired);
    cr_assert_geq(mean * 10, SIM_C * 7, "limit %lld below 0.7 C", (long long)mean);
    cr_assert_leq(mean * 10, SIM_C * 16, "limit %lld above 1.6 C", (long long)mean);
    cr_assert_eq(st.expired, 0);
    sl_limiter_free(lim);
}
