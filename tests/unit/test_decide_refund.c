/*
 * SL_OP_REFUND through the memory backend, and SL.DECIDE REFUND through the
 * command layer over it: a take given back leaves the key as if it had been
 * refused, the reply is the units given back, and bad requests are refused
 * with errors that say why.
 */
#include "decidelib.h"

TestSuite(memory_refund, .init = decide_setup, .fini = decide_teardown);
TestSuite(decide_refund, .init = decide_setup, .fini = decide_teardown);

Test(memory_refund, gives_a_take_back)
{
    sl_limit l;
    sl_decision d;
    cr_assert_eq(sl_limit_init(&l, SL_TOKEN_BUCKET, 5, 60 * NS_PER_SEC, 0), SL_OK);
    sl_backend_req r = decide_submit(SL_OP_TAKE, "a", &l, 3, &d);
    cr_assert(r.rc == SL_OK && r.failed == -1 && d.remaining == 2);
    r = decide_submit(SL_OP_REFUND, "a", &l, 2, &d);
    cr_assert_eq(r.rc, SL_OK);
    cr_assert_eq(r.count, 2);
    r = decide_submit(SL_OP_PEEK, "a", &l, 0, &d);
    cr_assert_eq(d.remaining, 4, "as if only 1 had been taken");
    r = decide_submit(SL_OP_REFUND, "a", &l, 9, &d);
    cr_assert_eq(r.count, 1, "never more than was taken");
    r = decide_submit(SL_OP_REFUND, "absent", &l, 1, &d);
    cr_assert(r.rc == SL_OK && r.count == 0);
    /* A concurrency limit has leases, released, not refunded. */
    sl_limit c;
    cr_assert_eq(sl_limit_init(&c, SL_CONCURRENCY, 2, 60 * NS_PER_SEC, 0), SL_OK);
    r = decide_submit(SL_OP_REFUND, "c", &c, 1, &d);
    cr_assert_eq(r.rc, SL_ERR_ALGORITHM);
    r = decide_submit(SL_OP_REFUND, "a", &l, -1, &d);
    cr_assert_eq(r.rc, SL_ERR_COST);
}

#define GCRA_10_MIN(cost) "gcra 10 60000000000 0 " #cost " 0 0 0"

Test(decide_refund, answers_the_units_given_back)
{
    cr_assert_str_eq(decide_run("SL.DECIDE TAKE 0 1 k " GCRA_10_MIN(4)),
                     "*7\r\n:-1\r\n:1\r\n:10\r\n:6\r\n:0\r\n:24000000000\r\n:0\r\n");
    cr_assert_str_eq(decide_run("SL.DECIDE REFUND 0 1 k " GCRA_10_MIN(3)), ":3\r\n");
    cr_assert_str_eq(decide_run("SL.DECIDE PEEK 0 1 k " GCRA_10_MIN(0)),
                     "*7\r\n:-1\r\n:1\r\n:10\r\n:9\r\n:0\r\n:6000000000\r\n:0\r\n");
    /* 3 s later half an interval has refilled: the one unit left still counts */
    now += 3 * NS_PER_SEC;
    cr_assert_str_eq(decide_run("SL.DECIDE refund 0 1 k " GCRA_10_MIN(5)), ":1\r\n");
    cr_assert_str_eq(decide_run("SL.DECIDE REFUND 0 1 k " GCRA_10_MIN(5)), ":0\r\n");
    /* another algorithm's state, and a carried limit on an ad-hoc state: nothing */
    cr_assert_str_eq(decide_run("SL.DECIDE TAKE 0 1 k " GCRA_10_MIN(4)),
                     "*7\r\n:-1\r\n:1\r\n:10\r\n:6\r\n:0\r\n:24000000000\r\n:0\r\n");
    cr_assert_str_eq(decide_run("SL.DECIDE REFUND 0 1 k token_bucket 10 60000000000 0 4 0 0 0"),
                     ":0\r\n");
    cr_assert_str_eq(decide_run("SL.DECIDE REFUND 0 1 k gcra 10 60000000000 0 4 0 0 1"), ":0\r\n");
    cr_assert_str_eq(decide_run("SL.DECIDE REFUND 0 1 k " GCRA_10_MIN(4)), ":4\r\n");
}

Test(decide_refund, refuses_what_it_cannot_give_back)
{
    cr_assert_str_eq(decide_run("SL.DECIDE REFUND 0 2 a b " GCRA_10_MIN(1) " " GCRA_10_MIN(1)),
                     "-ERR numkeys must be between 1 and 1\r\n");
    cr_assert_str_eq(decide_run("SL.DECIDE REFUND 0 1 a"),
                     "-ERR wrong number of arguments for 'sl.decide' command\r\n");
    cr_assert_str_eq(decide_run("SL.DECIDE REFUND 0 1 a concurrency 3 60000000000 0 1 0 0 0"),
                     "-ERR syntax error: ACQUIRE and RELEASE take a concurrency limit, the other "
                     "ops any other\r\n");
    cr_assert_str_eq(decide_run("SL.DECIDE REFUND 00000000000000ab 1 a " GCRA_10_MIN(1)),
                     "-ERR syntax error: the lease is 16 hex digits for ACQUIRE and RELEASE, "
                     "else 0\r\n");
    cr_assert_str_eq(decide_run("SL.DECIDE REFUND 0 1 a " GCRA_10_MIN(-1)),
                     "-ERR cost must be a non-negative integer\r\n");
    cr_assert_str_eq(decide_run("SL.DECIDE GIVEBACK 0 1 a " GCRA_10_MIN(1)),
                     "-ERR syntax error: SL.DECIDE's op is TAKE, PEEK, RESET, ACQUIRE, RELEASE, "
                     "REFUND or CHARGE\r\n");
}
