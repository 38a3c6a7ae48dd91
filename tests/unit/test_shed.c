/*
 * sl_shed: load shedding by priority. Exact cases for each rule, its
 * bounds and bad input, then simulations on a virtual clock (fixed seeds):
 * a 300% overload with mixed priorities, the same with no critical
 * traffic, and partitions 90/10 under overload and with one idle. Each
 * simulation prints its figures.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "testlib.h"

#define MS NS_PER_MS

/* Three classes, critical reserve 20%, idle after 100 ms. */
static sl_shed_config three(int32_t critical, int32_t dflt)
{
    sl_shed_config c;
    memset(&c, 0, sizeof c);
    c.classes = 3;
    c.reserve_permille[SL_PRIO_CRITICAL] = critical;
    c.reserve_permille[SL_PRIO_DEFAULT] = dflt;
    c.idle_ns = 100 * MS;
    return c;
}

/* One class, partitions with guarantees g0 and g1, both lending. */
static sl_shed_config parts(int32_t g0, int32_t g1, bool lend0, bool lend1)
{
    sl_shed_config c;
    memset(&c, 0, sizeof c);
    c.classes = 1;
    c.partitions = 2;
    c.guarantee_permille[0] = g0;
    c.guarantee_permille[1] = g1;
    c.lends[0] = lend0;
    c.lends[1] = lend1;
    c.idle_ns = 100 * MS;
    return c;
}

/* Admits one request and returns its decision, asserting SL_OK. */
static sl_shed_decision admit(sl_shed *s, const sl_shed_config *c, int64_t limit, int64_t now,
                              int cls, int part)
{
    sl_shed_decision d;
    cr_assert_eq(sl_shed_admit(s, c, limit, now, cls, part, &d), SL_OK);
    return d;
}

/* Admits n requests that must all be admitted. */
static void admit_n(sl_shed *s, const sl_shed_config *c, int64_t limit, int64_t now, int cls,
                    int part, int n)
{
    for (int i = 0; i < n; i++) {
        sl_shed_decision d = admit(s, c, limit, now, cls, part);
        cr_assert(d.admitted, "request %d of class %d partition %d refused (reason %d)", i, cls,
                  part, (int)d.reason);
    }
}

static void assert_refused(sl_shed_decision d, sl_shed_reason why, int by)
{
    cr_assert_not(d.admitted);
    cr_assert_eq(d.reason, why, "reason %d, expected %d", (int)d.reason, (int)why);
    cr_assert_eq(d.by, by, "by %d, expected %d", d.by, by);
    cr_assert_eq(d.remaining, 0);
}

Test(shed, config_check)
{
    sl_shed_config c = three(200, 100);
    cr_assert_eq(sl_shed_config_check(&c), SL_OK);
    cr_assert_eq(sl_shed_config_check(NULL), SL_ERR_ARGUMENT);

    sl_shed_config b = c;
    b.classes = 0;
    cr_assert_eq(sl_shed_config_check(&b), SL_ERR_ARGUMENT);
    b.classes = SL_SHED_CLASSES_MAX + 1;
    cr_assert_eq(sl_shed_config_check(&b), SL_ERR_ARGUMENT);
    b.classes = SL_SHED_CLASSES_MAX;
    cr_assert_eq(sl_shed_config_check(&b), SL_OK);

    b = c;
    b.reserve_permille[0] = -1;
    cr_assert_eq(sl_shed_config_check(&b), SL_ERR_ARGUMENT);
    b.reserve_permille[0] = 1001;
    cr_assert_eq(sl_shed_config_check(&b), SL_ERR_ARGUMENT);
    b.reserve_permille[0] = 901; /* 901 + 100 > 1000 */
    cr_assert_eq(sl_shed_config_check(&b), SL_ERR_ARGUMENT);
    b.reserve_permille[0] = 900;
    cr_assert_eq(sl_shed_config_check(&b), SL_OK);
    /* Beyond `classes`, reserves are not read. */
    b.reserve_permille[5] = 5000;
    cr_assert_eq(sl_shed_config_check(&b), SL_OK);

    b = c;
    b.idle_ns = -1;
    cr_assert_eq(sl_shed_config_check(&b), SL_ERR_ARGUMENT);
    b.idle_ns = SL_SPAN_MAX + 1;
    cr_assert_eq(sl_shed_config_check(&b), SL_ERR_ARGUMENT);
    b.idle_ns = SL_SPAN_MAX;
    cr_assert_eq(sl_shed_config_check(&b), SL_OK);

    sl_shed_config p = parts(900, 100, true, true);
    cr_assert_eq(sl_shed_config_check(&p), SL_OK);
    p.guarantee_permille[1] = 101;
    cr_assert_eq(sl_shed_config_check(&p), SL_ERR_ARGUMENT);
    p.guarantee_permille[1] = -1;
    cr_assert_eq(sl_shed_config_check(&p), SL_ERR_ARGUMENT);
    p = parts(900, 100, true, true);
    p.partitions = -1;
    cr_assert_eq(sl_shed_config_check(&p), SL_ERR_ARGUMENT);
    p.partitions = SL_SHED_PARTITIONS_MAX + 1;
    cr_assert_eq(sl_shed_config_check(&p), SL_ERR_ARGUMENT);
}

Test(shed, bad_input_changes_nothing)
{
    sl_shed_config c = three(200, 0);
    sl_shed s, before;
    memset(&s, 0, sizeof s);
    admit_n(&s, &c, 10, 5, SL_PRIO_DEFAULT, 0, 3);
    before = s;
    sl_shed_decision d;

    cr_assert_eq(sl_shed_admit(&s, &c, 10, 5, 1, 0, NULL), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_shed_admit(NULL, &c, 10, 5, 1, 0, &d), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_shed_admit(&s, NULL, 10, 5, 1, 0, &d), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_shed_admit(&s, &c, 10, 5, 3, 0, &d), SL_ERR_ARGUMENT); /* 3 classes */
    cr_assert_eq(sl_shed_admit(&s, &c, 10, 5, -1, 0, &d), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_shed_admit(&s, &c, 10, 5, 1, 1, &d), SL_ERR_ARGUMENT); /* no partitions */
    cr_assert_eq(sl_shed_admit(&s, &c, 10, 5, 1, -1, &d), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_shed_admit(&s, &c, -1, 5, 1, 0, &d), SL_ERR_LIMIT);
    cr_assert_eq(sl_shed_admit(&s, &c, 10, -1, 1, 0, &d), SL_ERR_TIME);
    cr_assert_eq(sl_shed_admit(&s, &c, 10, SL_TIME_MAX + 1, 1, 0, &d), SL_ERR_TIME);
    sl_shed_config bad = c;
    bad.reserve_permille[0] = 2000;
    cr_assert_eq(sl_shed_admit(&s, &bad, 10, 5, 1, 0, &d), SL_ERR_ARGUMENT);
    cr_assert_not(d.admitted);
    cr_assert_eq(d.in_flight, 0);
    cr_assert_eq(memcmp(&s, &before, sizeof s), 0, "an error changed the state");

    sl_shed_config p = parts(500, 500, true, true);
    cr_assert_eq(sl_shed_admit(&s, &p, 10, 5, 0, 2, &d), SL_ERR_ARGUMENT);
    cr_assert_eq(memcmp(&s, &before, sizeof s), 0);

    /* done: nothing of that class or partition in flight, out of range. */
    cr_assert_eq(sl_shed_done(&s, SL_PRIO_CRITICAL, 0), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_shed_done(&s, SL_PRIO_DEFAULT, 1), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_shed_done(&s, -1, 0), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_shed_done(&s, SL_SHED_CLASSES_MAX, 0), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_shed_done(&s, 1, SL_SHED_PARTITIONS_MAX), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_shed_done(NULL, 1, 0), SL_ERR_ARGUMENT);
    cr_assert_eq(memcmp(&s, &before, sizeof s), 0);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(sl_shed_done(&s, SL_PRIO_DEFAULT, 0), SL_OK);
    cr_assert_eq(sl_shed_done(&s, SL_PRIO_DEFAULT, 0), SL_ERR_ARGUMENT, "a double done");
    cr_assert_eq(s.in_flight, 0);
}

Test(shed, the_limit_and_done)
{
    sl_shed_config c = three(0, 0);
    sl_shed s;
    memset(&s, 0, sizeof s);
    for (int i = 0; i < 3; i++) {
        sl_shed_decision d = admit(&s, &c, 3, 0, SL_PRIO_DEFAULT, 0);
        cr_assert(d.admitted);
        cr_assert_eq(d.in_flight, i + 1);
        cr_assert_eq(d.remaining, 2 - i);
        cr_assert_eq(d.limit, 3);
    }
    assert_refused(admit(&s, &c, 3, 0, SL_PRIO_CRITICAL, 0), SL_SHED_FULL, -1);
    cr_assert_eq(s.in_flight, 3, "a refusal is not counted");
    cr_assert_eq(sl_shed_done(&s, SL_PRIO_DEFAULT, 0), SL_OK);
    cr_assert(admit(&s, &c, 3, 0, SL_PRIO_SHEDDABLE, 0).admitted);

    /* Limit 0 refuses everything, critical too. */
    memset(&s, 0, sizeof s);
    assert_refused(admit(&s, &c, 0, 0, SL_PRIO_CRITICAL, 0), SL_SHED_FULL, -1);
}

Test(shed, a_falling_limit_refuses_until_in_flight_drains)
{
    sl_shed_config c = three(0, 0);
    sl_shed s;
    memset(&s, 0, sizeof s);
    admit_n(&s, &c, 10, 0, SL_PRIO_DEFAULT, 0, 10);
    /* An estimator lowered the limit to 5: 10 still in flight. */
    assert_refused(admit(&s, &c, 5, 1, SL_PRIO_CRITICAL, 0), SL_SHED_FULL, -1);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(sl_shed_done(&s, SL_PRIO_DEFAULT, 0), SL_OK);
    assert_refused(admit(&s, &c, 5, 2, SL_PRIO_DEFAULT, 0), SL_SHED_FULL, -1);
    cr_assert_eq(sl_shed_done(&s, SL_PRIO_DEFAULT, 0), SL_OK);
    sl_shed_decision d = admit(&s, &c, 5, 3, SL_PRIO_DEFAULT, 0);
    cr_assert(d.admitted);
    cr_assert_eq(d.remaining, 0);
}

/* Critical asked recently: its reserve is held. Others fill the rest;
 * critical still has its reserve, and more while there is room. */
Test(shed, critical_keeps_its_reserve)
{
    sl_shed_config c = three(200, 0); /* limit 10: 2 slots */
    sl_shed s;
    memset(&s, 0, sizeof s);
    int64_t t = 1000;
    cr_assert(admit(&s, &c, 10, t, SL_PRIO_CRITICAL, 0).admitted);
    cr_assert_eq(sl_shed_done(&s, SL_PRIO_CRITICAL, 0), SL_OK);

    for (int i = 0; i < 8; i++) {
        sl_shed_decision d = admit(&s, &c, 10, t, i % 2 ? SL_PRIO_DEFAULT : SL_PRIO_SHEDDABLE, 0);
        cr_assert(d.admitted);
        cr_assert_eq(d.remaining, 7 - i, "the reserve is not the others' to count");
    }
    assert_refused(admit(&s, &c, 10, t, SL_PRIO_DEFAULT, 0), SL_SHED_RESERVED, SL_PRIO_CRITICAL);
    assert_refused(admit(&s, &c, 10, t, SL_PRIO_SHEDDABLE, 0), SL_SHED_RESERVED,
                   SL_PRIO_CRITICAL);
    sl_shed_decision d = admit(&s, &c, 10, t, SL_PRIO_CRITICAL, 0);
    cr_assert(d.admitted);
    cr_assert_eq(d.remaining, 1);
    cr_assert(admit(&s, &c, 10, t, SL_PRIO_CRITICAL, 0).admitted);
    assert_refused(admit(&s, &c, 10, t, SL_PRIO_CRITICAL, 0), SL_SHED_FULL, -1);

    /* Critical beyond its reserve, while there is room. */
    memset(&s, 0, sizeof s);
    admit_n(&s, &c, 10, t, SL_PRIO_CRITICAL, 0, 6);
    /* Critical uses more than its reserve: nothing is held back. */
    d = admit(&s, &c, 10, t, SL_PRIO_SHEDDABLE, 0);
    cr_assert(d.admitted);
    cr_assert_eq(d.remaining, 3);
}

/* What critical uses of its reserve is not held back twice. */
Test(shed, only_the_unused_reserve_is_held)
{
    sl_shed_config c = three(300, 0); /* limit 10: 3 slots */
    sl_shed s;
    memset(&s, 0, sizeof s);
    admit_n(&s, &c, 10, 0, SL_PRIO_CRITICAL, 0, 1);
    /* 1 in flight, 2 of the reserve unused: others may reach 8 in all. */
    admit_n(&s, &c, 10, 0, SL_PRIO_DEFAULT, 0, 7);
    assert_refused(admit(&s, &c, 10, 0, SL_PRIO_DEFAULT, 0), SL_SHED_RESERVED, 0);
    cr_assert_eq(s.in_flight, 8);
}

/* Sheddable work is refused first: each class sees less than the one
 * above it. Reserves critical 20%, default 30% of 10: 2 and 3 slots. */
Test(shed, sheddable_is_refused_first)
{
    sl_shed_config c = three(200, 300);
    sl_shed s;
    memset(&s, 0, sizeof s);
    /* Every class asked just now. */
    admit_n(&s, &c, 10, 0, SL_PRIO_CRITICAL, 0, 1);
    admit_n(&s, &c, 10, 0, SL_PRIO_DEFAULT, 0, 1);
    cr_assert_eq(sl_shed_done(&s, SL_PRIO_CRITICAL, 0), SL_OK);
    cr_assert_eq(sl_shed_done(&s, SL_PRIO_DEFAULT, 0), SL_OK);

    admit_n(&s, &c, 10, 1, SL_PRIO_SHEDDABLE, 0, 5);
    assert_refused(admit(&s, &c, 10, 1, SL_PRIO_SHEDDABLE, 0), SL_SHED_RESERVED, 0);
    admit_n(&s, &c, 10, 1, SL_PRIO_DEFAULT, 0, 3);
    assert_refused(admit(&s, &c, 10, 1, SL_PRIO_DEFAULT, 0), SL_SHED_RESERVED, 0);
    /* Default's reserve is full: sheddable is refused by critical's. */
    assert_refused(admit(&s, &c, 10, 1, SL_PRIO_SHEDDABLE, 0), SL_SHED_RESERVED, 0);
    admit_n(&s, &c, 10, 1, SL_PRIO_CRITICAL, 0, 2);
    assert_refused(admit(&s, &c, 10, 1, SL_PRIO_CRITICAL, 0), SL_SHED_FULL, -1);

    /* Critical full, default's reserve unused: sheddable names default. */
    memset(&s, 0, sizeof s);
    admit_n(&s, &c, 10, 2, SL_PRIO_CRITICAL, 0, 2);
    admit(&s, &c, 10, 2, SL_PRIO_DEFAULT, 0);
    cr_assert_eq(sl_shed_done(&s, SL_PRIO_DEFAULT, 0), SL_OK);
    admit_n(&s, &c, 10, 2, SL_PRIO_SHEDDABLE, 0, 5);
    assert_refused(admit(&s, &c, 10, 2, SL_PRIO_SHEDDABLE, 0), SL_SHED_RESERVED,
                   SL_PRIO_DEFAULT);
}

/* No critical traffic: its reserve is lent. When critical comes back it
 * is refused while the limit is full, and the slots others free go to it. */
Test(shed, an_idle_reserve_is_lent_and_taken_back)
{
    sl_shed_config c = three(200, 0);
    sl_shed s;
    memset(&s, 0, sizeof s);
    /* Critical never asked. */
    admit_n(&s, &c, 10, 0, SL_PRIO_SHEDDABLE, 0, 10);
    sl_shed_decision d = admit(&s, &c, 10, MS, SL_PRIO_CRITICAL, 0);
    assert_refused(d, SL_SHED_FULL, -1);
    cr_assert_eq(sl_shed_done(&s, SL_PRIO_SHEDDABLE, 0), SL_OK);
    assert_refused(admit(&s, &c, 10, 2 * MS, SL_PRIO_DEFAULT, 0), SL_SHED_RESERVED, 0);
    cr_assert(admit(&s, &c, 10, 3 * MS, SL_PRIO_CRITICAL, 0).admitted);
    cr_assert_eq(sl_shed_done(&s, SL_PRIO_SHEDDABLE, 0), SL_OK);
    cr_assert_eq(sl_shed_done(&s, SL_PRIO_SHEDDABLE, 0), SL_OK);
    /* 8 in flight, one critical: one slot of its reserve unused and held. */
    cr_assert(admit(&s, &c, 10, 4 * MS, SL_PRIO_DEFAULT, 0).admitted);
    assert_refused(admit(&s, &c, 10, 4 * MS, SL_PRIO_DEFAULT, 0), SL_SHED_RESERVED, 0);

    /* Critical last asked at 3 ms; idle from 103 ms: lent again. */
    assert_refused(admit(&s, &c, 10, 103 * MS - 1, SL_PRIO_DEFAULT, 0), SL_SHED_RESERVED, 0);
    cr_assert(admit(&s, &c, 10, 103 * MS, SL_PRIO_DEFAULT, 0).admitted);
    cr_assert_eq(s.in_flight, 10);
}

/* idle_ns 0: strict reserves, never lent, even to a class never seen. */
Test(shed, idle_zero_never_lends)
{
    sl_shed_config c = three(200, 0);
    c.idle_ns = 0;
    sl_shed s;
    memset(&s, 0, sizeof s);
    admit_n(&s, &c, 10, SL_TIME_MAX, SL_PRIO_DEFAULT, 0, 8);
    assert_refused(admit(&s, &c, 10, SL_TIME_MAX, SL_PRIO_DEFAULT, 0), SL_SHED_RESERVED, 0);
}

/* A clock that stepped back counts as a recent request. */
Test(shed, a_clock_stepping_back_holds)
{
    sl_shed_config c = three(200, 0);
    sl_shed s;
    memset(&s, 0, sizeof s);
    admit(&s, &c, 10, 500 * MS, SL_PRIO_CRITICAL, 0);
    cr_assert_eq(sl_shed_done(&s, SL_PRIO_CRITICAL, 0), SL_OK);
    admit_n(&s, &c, 10, 0, SL_PRIO_DEFAULT, 0, 8);
    assert_refused(admit(&s, &c, 10, 0, SL_PRIO_DEFAULT, 0), SL_SHED_RESERVED, 0);
}

/* Shares round down: 20% of 4 is 0 slots, of 5 one. */
Test(shed, shares_round_down)
{
    sl_shed_config c = three(200, 0);
    c.idle_ns = 0;
    sl_shed s;
    memset(&s, 0, sizeof s);
    admit_n(&s, &c, 4, 0, SL_PRIO_DEFAULT, 0, 4);
    memset(&s, 0, sizeof s);
    admit_n(&s, &c, 5, 0, SL_PRIO_DEFAULT, 0, 4);
    assert_refused(admit(&s, &c, 5, 0, SL_PRIO_DEFAULT, 0), SL_SHED_RESERVED, 0);
}

/* The largest limit: the shares' products need 128 bits, and fit. */
Test(shed, huge_limit)
{
    sl_shed_config c = three(200, 0);
    c.idle_ns = 0;
    sl_shed s;
    memset(&s, 0, sizeof s);
    sl_shed_decision d = admit(&s, &c, INT64_MAX, 0, SL_PRIO_DEFAULT, 0);
    cr_assert(d.admitted);
    int64_t reserve = (int64_t)((unsigned __int128)INT64_MAX * 200 / 1000);
    cr_assert_eq(d.remaining, INT64_MAX - reserve - 1);
    d = admit(&s, &c, INT64_MAX, 0, SL_PRIO_CRITICAL, 0);
    cr_assert_eq(d.remaining, INT64_MAX - 2);
    /* All but one in flight. */
    s.in_flight = INT64_MAX - 1;
    s.class_in_flight[SL_PRIO_CRITICAL] = INT64_MAX - 2;
    d = admit(&s, &c, INT64_MAX, 0, SL_PRIO_CRITICAL, 0);
    cr_assert(d.admitted);
    cr_assert_eq(d.in_flight, INT64_MAX);
    assert_refused(admit(&s, &c, INT64_MAX, 0, SL_PRIO_CRITICAL, 0), SL_SHED_FULL, -1);
}

/* Partitions 90/10 of 10: 9 and 1 slots, both asked recently. */
Test(shed, partitions_keep_their_guarantees)
{
    sl_shed_config c = parts(900, 100, true, true);
    sl_shed s;
    memset(&s, 0, sizeof s);
    admit(&s, &c, 10, 0, 0, 1);
    cr_assert_eq(sl_shed_done(&s, 0, 1), SL_OK);

    admit_n(&s, &c, 10, 0, 0, 0, 9);
    assert_refused(admit(&s, &c, 10, 0, 0, 0), SL_SHED_PARTITION, 1);
    cr_assert(admit(&s, &c, 10, 0, 0, 1).admitted);
    assert_refused(admit(&s, &c, 10, 0, 0, 1), SL_SHED_FULL, -1);

    /* Batch alone, live held: batch has its one slot, then borrows
     * nothing of live's nine. */
    memset(&s, 0, sizeof s);
    admit(&s, &c, 10, 0, 0, 0);
    cr_assert_eq(sl_shed_done(&s, 0, 0), SL_OK);
    sl_shed_decision d = admit(&s, &c, 10, 0, 0, 1);
    cr_assert(d.admitted);
    cr_assert_eq(d.remaining, 0);
    assert_refused(admit(&s, &c, 10, 0, 0, 1), SL_SHED_PARTITION, 0);
    /* Live under its guarantee is admitted while the total has room. */
    admit_n(&s, &c, 10, 0, 0, 0, 9);
}

/* A partition that lends lends when idle; one that does not never does. */
Test(shed, partitions_borrow_what_is_idle)
{
    sl_shed_config c = parts(900, 100, true, true);
    sl_shed s;
    memset(&s, 0, sizeof s);
    /* Live never asked: batch borrows all of it. */
    admit_n(&s, &c, 10, 0, 0, 1, 10);
    /* Live comes back: the total is full. */
    assert_refused(admit(&s, &c, 10, MS, 0, 0), SL_SHED_FULL, -1);
    cr_assert_eq(sl_shed_done(&s, 0, 1), SL_OK);
    /* Batch above its guarantee: refused, live holds its nine. */
    assert_refused(admit(&s, &c, 10, 2 * MS, 0, 1), SL_SHED_PARTITION, 0);
    cr_assert(admit(&s, &c, 10, 2 * MS, 0, 0).admitted);

    /* Batch borrowed live's share; live idle again after 100 ms. */
    cr_assert_eq(sl_shed_done(&s, 0, 1), SL_OK);
    assert_refused(admit(&s, &c, 10, 102 * MS - 1, 0, 1), SL_SHED_PARTITION, 0);
    cr_assert(admit(&s, &c, 10, 102 * MS, 0, 1).admitted);

    /* Batch under its guarantee is never refused while there is room. */
    memset(&s, 0, sizeof s);
    admit_n(&s, &c, 10, 0, 0, 0, 10); /* batch never asked: lent */
    assert_refused(admit(&s, &c, 10, 0, 0, 1), SL_SHED_FULL, -1);
    cr_assert_eq(sl_shed_done(&s, 0, 0), SL_OK);
    assert_refused(admit(&s, &c, 10, 0, 0, 0), SL_SHED_PARTITION, 1);
    cr_assert(admit(&s, &c, 10, 0, 0, 1).admitted);

    /* A batch partition that does not lend: live stops at 9, never used. */
    c = parts(900, 100, true, false);
    memset(&s, 0, sizeof s);
    admit_n(&s, &c, 10, 0, 0, 0, 9);
    assert_refused(admit(&s, &c, 10, SL_TIME_MAX, 0, 0), SL_SHED_PARTITION, 1);
}

/* Classes and partitions together: both rules apply. */
Test(shed, classes_within_partitions)
{
    sl_shed_config c = parts(500, 500, false, false);
    c.classes = 3;
    c.reserve_permille[SL_PRIO_CRITICAL] = 200;
    sl_shed s;
    memset(&s, 0, sizeof s);
    admit(&s, &c, 10, 0, SL_PRIO_CRITICAL, 1);
    cr_assert_eq(sl_shed_done(&s, SL_PRIO_CRITICAL, 1), SL_OK);
    /* Partition 0, default: its guarantee is 5, then partition 1 holds 5. */
    admit_n(&s, &c, 10, 0, SL_PRIO_DEFAULT, 0, 5);
    assert_refused(admit(&s, &c, 10, 0, SL_PRIO_DEFAULT, 0), SL_SHED_PARTITION, 1);
    /* Partition 1, default: 3 of its 5, then critical's reserve. */
    admit_n(&s, &c, 10, 0, SL_PRIO_DEFAULT, 1, 3);
    assert_refused(admit(&s, &c, 10, 0, SL_PRIO_DEFAULT, 1), SL_SHED_RESERVED, 0);
    admit_n(&s, &c, 10, 0, SL_PRIO_CRITICAL, 1, 2);
    assert_refused(admit(&s, &c, 10, 0, SL_PRIO_CRITICAL, 0), SL_SHED_FULL, -1);
}

/* The slow model: whether a request of class k in partition p may start,
 * straight from the rules' words. */
static bool model_admits(const sl_shed *s, const sl_shed_config *c, int64_t limit, int64_t now,
                         int k, int p)
{
    if (s->in_flight + 1 > limit)
        return false;
    int64_t keep = 0; /* what more important classes hold and do not use */
    for (int j = 0; j < k; j++) {
        bool idle = c->idle_ns > 0 && (!(s->class_seen & (1u << j)) ||
                                       now - s->class_asked[j] >= c->idle_ns);
        int64_t r = limit * c->reserve_permille[j] / 1000;
        if (!idle && s->class_in_flight[j] < r)
            keep += r - s->class_in_flight[j];
    }
    if (s->in_flight + 1 + keep > limit)
        return false;
    if (c->partitions == 0 ||
        s->partition_in_flight[p] + 1 <= limit * c->guarantee_permille[p] / 1000)
        return true;
    for (int q = 0; q < c->partitions; q++) {
        bool idle = c->lends[q] && c->idle_ns > 0 &&
                    (!(s->partition_seen & (1u << q)) ||
                     now - s->partition_asked[q] >= c->idle_ns);
        int64_t g = limit * c->guarantee_permille[q] / 1000;
        if (q != p && !idle && s->partition_in_flight[q] < g)
            keep += g - s->partition_in_flight[q];
    }
    return s->in_flight + 1 + keep <= limit;
}

/* Random traces (fixed seeds) of admits and dones, random time steps and
 * a limit that moves, against the model; `remaining` against admitting
 * that many more on a copy. */
Test(shed, random_traces_match_the_model)
{
    test_rng rng = {2022};
    for (int trace = 0; trace < 300; trace++) {
        sl_shed_config c;
        memset(&c, 0, sizeof c);
        c.classes = (int)test_range(&rng, 1, 4);
        int32_t left = 1000;
        for (int k = 0; k < c.classes; k++) {
            c.reserve_permille[k] = (int32_t)test_range(&rng, 0, left / 2);
            left -= c.reserve_permille[k];
        }
        c.partitions = (int)test_range(&rng, 0, 3);
        left = 1000;
        for (int p = 0; p < c.partitions; p++) {
            c.guarantee_permille[p] = (int32_t)test_range(&rng, 0, left);
            left -= c.guarantee_permille[p];
            c.lends[p] = test_range(&rng, 0, 1);
        }
        c.idle_ns = test_range(&rng, 0, 3) * 10 * MS;
        cr_assert_eq(sl_shed_config_check(&c), SL_OK);
        int nparts = c.partitions == 0 ? 1 : c.partitions;

        sl_shed s;
        memset(&s, 0, sizeof s);
        int64_t now = test_range(&rng, 0, SL_TIME_MAX / 2), limit = test_range(&rng, 0, 30);
        for (int op = 0; op < 400; op++) {
            now += test_range(&rng, 0, 15 * MS);
            if (test_range(&rng, 0, 19) == 0)
                limit = test_range(&rng, 0, 30);
            int k = (int)test_range(&rng, 0, c.classes - 1);
            int p = (int)test_range(&rng, 0, nparts - 1);
            if (test_range(&rng, 0, 2) == 0) {
                bool held = s.class_in_flight[k] > 0 && s.partition_in_flight[p] > 0;
                cr_assert_eq(sl_shed_done(&s, k, p), held ? SL_OK : SL_ERR_ARGUMENT);
                continue;
            }
            sl_shed model = s;
            model.class_asked[k] = now;
            model.class_seen |= 1u << k;
            model.partition_asked[p] = now;
            model.partition_seen |= 1u << p;
            bool want = model_admits(&model, &c, limit, now, k, p);
            sl_shed_decision d = admit(&s, &c, limit, now, k, p);
            cr_assert_eq(d.admitted, want, "trace %d op %d: class %d partition %d limit %lld",
                         trace, op, k, p, (long long)limit);
            cr_assert_leq(s.in_flight, limit > d.in_flight ? limit : d.in_flight);
            cr_assert_eq(d.in_flight, s.in_flight);
            if (!d.admitted) {
                cr_assert_eq(d.reason == SL_SHED_FULL, s.in_flight >= limit);
                if (d.reason == SL_SHED_RESERVED)
                    cr_assert(d.by >= 0 && d.by < k, "by %d for class %d", d.by, k);
                else if (d.reason == SL_SHED_PARTITION)
                    cr_assert(d.by >= 0 && d.by < c.partitions && d.by != p);
                else
                    cr_assert_eq(d.by, -1);
            }
            sl_shed copy = s;
            int64_t more = 0;
            while (admit(&copy, &c, limit, now, k, p).admitted)
                more++;
            cr_assert_eq(d.remaining, more, "trace %d op %d: remaining %lld, %lld admitted",
                         trace, op, (long long)d.remaining, (long long)more);
        }
    }
}

/* ---- simulation on a virtual clock ---- */

#define SIM_LIMIT 100
#define SIM_SERVICE (10 * MS) /* mean; uniform in [5, 15] ms */
#define SIM_HORIZON (20 * NS_PER_SEC)
#define SIM_WARMUP NS_PER_SEC

typedef struct sim_req {
    int64_t end;
    int cls, part;
} sim_req;

typedef struct sim_result {
    /* Time-averaged in flight, in thousandths of a request. */
    int64_t class_avg_milli[SL_SHED_CLASSES_MAX];
    int64_t part_avg_milli[SL_SHED_PARTITIONS_MAX];
    int64_t total_avg_milli;
    int64_t offered[SL_SHED_CLASSES_MAX], admitted[SL_SHED_CLASSES_MAX];
    int64_t max_in_flight;
    /* Refusals the rules forbid: a critical request under its held
     * reserve, or a partition's under its guarantee, while in flight was
     * below the ceiling of its class (single class: below the limit). */
    int64_t broken;
} sim_result;

/*
 * Offers `load_pct`% of the limit's capacity for SIM_HORIZON: arrivals
 * spaced uniformly in [0, 2m] (m = mean service / offered concurrency),
 * each of class k with weight class_w[k] and partition p with part_w[p]
 * (out of 100). A refused request is dropped. Averages count after
 * SIM_WARMUP.
 */
static sim_result simulate(const sl_shed_config *c, int load_pct, const int *class_w,
                           const int *part_w, uint64_t seed)
{
    sl_shed s;
    memset(&s, 0, sizeof s);
    sim_result r;
    memset(&r, 0, sizeof r);
    static sim_req fl[SIM_LIMIT];
    int n = 0;
    test_rng rng = {seed};
    int64_t gap = SIM_SERVICE * 100 / ((int64_t)load_pct * SIM_LIMIT);
    int64_t last = 0, total_area = 0;
    int64_t class_area[SL_SHED_CLASSES_MAX] = {0}, part_area[SL_SHED_PARTITIONS_MAX] = {0};
    int nparts = c->partitions == 0 ? 1 : c->partitions;
    int64_t reserve0 = SIM_LIMIT * c->reserve_permille[0] / 1000;

    /* Integrates in-flight counts up to t (from the warmup on). */
#define SIM_ADVANCE(t)                                                                        \
    do {                                                                                      \
        int64_t from_ = last < SIM_WARMUP ? SIM_WARMUP : last;                                \
        if ((t) > from_) {                                                                    \
            for (int k_ = 0; k_ < c->classes; k_++)                                           \
                class_area[k_] += s.class_in_flight[k_] * ((t) - from_);                      \
            for (int p_ = 0; p_ < nparts; p_++)                                               \
                part_area[p_] += s.partition_in_flight[p_] * ((t) - from_);                   \
            total_area += s.in_flight * ((t) - from_);                                        \
        }                                                                                     \
        last = (t);                                                                           \
    } while (0)

    for (int64_t t = test_range(&rng, 0, 2 * gap); t < SIM_HORIZON;
         t += test_range(&rng, 0, 2 * gap)) {
        /* Requests that ended by t, in the order they ended. */
        for (;;) {
            int first = -1;
            for (int i = 0; i < n; i++)
                if (fl[i].end <= t && (first < 0 || fl[i].end < fl[first].end))
                    first = i;
            if (first < 0)
                break;
            SIM_ADVANCE(fl[first].end);
            cr_assert_eq(sl_shed_done(&s, fl[first].cls, fl[first].part), SL_OK);
            fl[first] = fl[--n];
        }
        SIM_ADVANCE(t);

        int w = (int)test_range(&rng, 0, 99), cls = 0, part = 0;
        while (w >= class_w[cls])
            w -= class_w[cls++];
        w = (int)test_range(&rng, 0, 99);
        if (part_w != NULL)
            while (w >= part_w[part])
                w -= part_w[part++];

        bool must = false;
        if (s.in_flight < SIM_LIMIT) {
            if (cls == 0 && s.class_in_flight[0] < reserve0)
                must = true; /* the reserve always has room for critical */
            if (c->classes == 1 && c->partitions > 0 &&
                s.partition_in_flight[part] <
                    SIM_LIMIT * c->guarantee_permille[part] / 1000)
                must = true; /* a partition under its guarantee */
        }
        sl_shed_decision d;
        cr_assert_eq(sl_shed_admit(&s, c, SIM_LIMIT, t, cls, part, &d), SL_OK);
        r.offered[cls]++;
        if (must && !d.admitted)
            r.broken++;
        if (d.admitted) {
            r.admitted[cls]++;
            cr_assert_lt(n, SIM_LIMIT, "more in flight than the limit");
            fl[n++] = (sim_req){t + test_range(&rng, SIM_SERVICE / 2, SIM_SERVICE * 3 / 2), cls,
                                part};
        }
        if (s.in_flight > r.max_in_flight)
            r.max_in_flight = s.in_flight;
    }
    SIM_ADVANCE(SIM_HORIZON);
#undef SIM_ADVANCE
    int64_t span = SIM_HORIZON - SIM_WARMUP;
    for (int k = 0; k < c->classes; k++)
        r.class_avg_milli[k] = class_area[k] / (span / 1000);
    for (int p = 0; p < nparts; p++)
        r.part_avg_milli[p] = part_area[p] / (span / 1000);
    r.total_avg_milli = total_area / (span / 1000);
    return r;
}

static void print_classes(const char *name, const sl_shed_config *c, const sim_result *r)
{
    printf("shed sim %s: limit %d, avg in flight %lld.%03lld, max %lld\n", name, SIM_LIMIT,
           (long long)(r->total_avg_milli / 1000), (long long)(r->total_avg_milli % 1000),
           (long long)r->max_in_flight);
    for (int k = 0; k < c->classes; k++)
        printf("  class %d reserve %d permille: offered %lld admitted %lld (%lld%%), avg in "
               "flight %lld.%03lld\n",
               k, c->reserve_permille[k], (long long)r->offered[k], (long long)r->admitted[k],
               (long long)(r->offered[k] ? r->admitted[k] * 100 / r->offered[k] : 0),
               (long long)(r->class_avg_milli[k] / 1000),
               (long long)(r->class_avg_milli[k] % 1000));
    fflush(stdout);
}

static void print_parts(const char *name, const sl_shed_config *c, const sim_result *r)
{
    printf("shed sim %s: limit %d, avg in flight %lld.%03lld, max %lld\n", name, SIM_LIMIT,
           (long long)(r->total_avg_milli / 1000), (long long)(r->total_avg_milli % 1000),
           (long long)r->max_in_flight);
    for (int p = 0; p < c->partitions; p++)
        printf("  partition %d guarantee %d permille%s: avg in flight %lld.%03lld\n", p,
               c->guarantee_permille[p], c->lends[p] ? " (lends)" : "",
               (long long)(r->part_avg_milli[p] / 1000),
               (long long)(r->part_avg_milli[p] % 1000));
    fflush(stdout);
}

/* 300% overload, 20% of requests critical, 40% default, 40% sheddable;
 * reserves critical 20%, default 50%. Critical keeps at least its 20% of
 * the capacity and is never refused while under its reserve; default its
 * share less what critical took beyond its own; sheddable, whose ceiling
 * is the lowest, gets the fewest of what it asks. */
Test(shed_sim, overload_with_mixed_priorities)
{
    sl_shed_config c = three(200, 500);
    const int mix[3] = {20, 40, 40};
    sim_result r = simulate(&c, 300, mix, NULL, 22);
    print_classes("300% mixed", &c, &r);
    cr_assert_eq(r.broken, 0, "critical refused under its reserve %lld times",
                 (long long)r.broken);
    cr_assert_geq(r.class_avg_milli[0], 20 * 1000, "critical kept less than its reserve");
    cr_assert_geq(r.class_avg_milli[1], 45 * 1000, "default lost its reserve to sheddable");
    cr_assert_leq(r.max_in_flight, SIM_LIMIT);
    cr_assert_geq(r.total_avg_milli, 95 * 1000, "capacity idled under overload");
    /* Admitted fractions: sheddable's is the lowest. */
    cr_assert_gt(r.admitted[0] * r.offered[2], r.admitted[2] * r.offered[0]);
    cr_assert_gt(r.admitted[1] * r.offered[2], r.admitted[2] * r.offered[1]);

    /* The same traffic with no reserves: critical's share falls to about
     * its share of the requests. */
    sl_shed_config flat = three(0, 0);
    sim_result f = simulate(&flat, 300, mix, NULL, 22);
    print_classes("300% mixed, no reserves", &flat, &f);
    cr_assert_gt(r.class_avg_milli[0], f.class_avg_milli[0]);
}

/* No critical traffic: its reserve is lent, the others use the whole
 * limit; with strict reserves (idle_ns 0) they stop at 80. */
Test(shed_sim, no_critical_traffic_lends_the_reserve)
{
    sl_shed_config c = three(200, 0);
    const int mix[3] = {0, 50, 50};
    sim_result r = simulate(&c, 300, mix, NULL, 7);
    print_classes("300% without critical", &c, &r);
    cr_assert_eq(r.max_in_flight, SIM_LIMIT);
    cr_assert_geq(r.total_avg_milli, 95 * 1000, "the reserve idled");

    c.idle_ns = 0;
    sim_result strict = simulate(&c, 300, mix, NULL, 7);
    print_classes("300% without critical, strict", &c, &strict);
    cr_assert_eq(strict.max_in_flight, SIM_LIMIT - 20);
}

/* Partitions live 90% and batch 10%, each offered 150% of the limit:
 * each keeps its guarantee (all but the moments a freed slot waits for
 * the next arrival); when one is idle the other borrows its share. */
Test(shed_sim, partitions_90_10)
{
    sl_shed_config c = parts(900, 100, true, true);
    const int one[1] = {100};
    const int half[2] = {50, 50};
    sim_result r = simulate(&c, 300, one, half, 90);
    print_parts("300% live/batch 50/50", &c, &r);
    cr_assert_eq(r.broken, 0, "a partition under its guarantee was refused %lld times",
                 (long long)r.broken);
    cr_assert_geq(r.part_avg_milli[0], 90 * 970, "live kept less than its guarantee");
    cr_assert_geq(r.part_avg_milli[1], 10 * 970, "batch kept less than its guarantee");
    cr_assert_leq(r.max_in_flight, SIM_LIMIT);

    const int live_only[2] = {100, 0};
    sim_result l = simulate(&c, 300, one, live_only, 91);
    print_parts("300% live only", &c, &l);
    cr_assert_geq(l.part_avg_milli[0], 95 * 1000, "live did not borrow batch's share");

    const int batch_only[2] = {0, 100};
    sim_result b = simulate(&c, 300, one, batch_only, 92);
    print_parts("300% batch only", &c, &b);
    cr_assert_geq(b.part_avg_milli[1], 95 * 1000, "batch did not borrow live's share");

    /* Batch that does not lend: live stays within its 90. */
    c.lends[1] = false;
    sim_result k = simulate(&c, 300, one, live_only, 91);
    print_parts("300% live only, batch keeps its share", &c, &k);
    cr_assert_eq(k.max_in_flight, 90);
}
