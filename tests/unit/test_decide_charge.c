/*
 * SL_OP_CHARGE through the memory backend, and SL.DECIDE CHARGE through the
 * command layer over it: a charge is never refused, leaves the key in debt
 * so that the takes after it are refused, is given back by a refund, and
 * bad requests (several keys, a sliding log, a lease) are refused with
 * errors that say why.
 */
#include "decidelib.h"

TestSuite(memory_charge, .init = decide_setup, .fini = decide_teardown);
TestSuite(decide_charge, .init = decide_setup, .fini = decide_teardown);

Test(memory_charge, takes_what_the_budget_lacks)
{
    sl_limit l;
    sl_decision d;
    cr_assert_eq(sl_limit_init(&l, SL_TOKEN_BUCKET, 5, 5 * NS_PER_SEC, 0), SL_OK);
    sl_backend_req r = decide_submit(SL_OP_CHARGE, "a", &l, 8, &d);
    cr_assert_eq(r.rc, SL_OK);
    cr_assert_eq(r.failed, -1, "a charge is never refused");
    cr_assert(d.allowed);
    cr_assert_eq(d.remaining, 0);
    cr_assert_eq(d.retry_after_ns, 4 * NS_PER_SEC, "3 tokens owed, and one to take");
    r = decide_submit(SL_OP_TAKE, "a", &l, 1, &d);
    cr_assert_eq(r.failed, 0);
    now += 4 * NS_PER_SEC - 1;
    r = decide_submit(SL_OP_TAKE, "a", &l, 1, &d);
    cr_assert_eq(r.failed, 0);
    now += 1;
    r = decide_submit(SL_OP_TAKE, "a", &l, 1, &d);
    cr_assert_eq(r.failed, -1, "the debt is paid");
    /* A refund gives a charge back. */
    r = decide_submit(SL_OP_CHARGE, "b", &l, 7, &d);
    r = decide_submit(SL_OP_REFUND, "b", &l, 7, &d);
    cr_assert_eq(r.count, 7);
    r = decide_submit(SL_OP_PEEK, "b", &l, 0, &d);
    cr_assert_eq(d.remaining, 5);
    /* What cannot owe. */
    sl_limit log;
    cr_assert_eq(sl_limit_init(&log, SL_SLIDING_LOG, 5, 60 * NS_PER_SEC, 0), SL_OK);
    r = decide_submit(SL_OP_CHARGE, "c", &log, 1, &d);
    cr_assert_eq(r.rc, SL_ERR_ALGORITHM);
    cr_assert_str_eq(r.errstr, SL_CHARGE_LOG_ERR);
    r = decide_submit(SL_OP_CHARGE, "a", &l, -1, &d);
    cr_assert_eq(r.rc, SL_ERR_COST);
}

#define GCRA_10_S(cost) "gcra 10 1000000000 0 " #cost " 0 0 0"

Test(decide_charge, answers_a_decision_never_refused)
{
    /* 15 of 10 a second: admitted, nothing remains, 1.5 s until all is paid. */
    cr_assert_str_eq(decide_run("SL.DECIDE CHARGE 0 1 k " GCRA_10_S(15)),
                     "*7\r\n:-1\r\n:1\r\n:10\r\n:0\r\n:0\r\n:1500000000\r\n:0\r\n");
    cr_assert_str_eq(decide_run("SL.DECIDE TAKE 0 1 k " GCRA_10_S(1)),
                     "*7\r\n:0\r\n:0\r\n:10\r\n:0\r\n:600000000\r\n:1500000000\r\n:0\r\n");
    cr_assert_str_eq(decide_run("SL.DECIDE REFUND 0 1 k " GCRA_10_S(15)), ":15\r\n");
    cr_assert_str_eq(decide_run("SL.DECIDE charge 0 1 k " GCRA_10_S(0)),
                     "*7\r\n:-1\r\n:1\r\n:10\r\n:10\r\n:0\r\n:0\r\n:0\r\n");
}

Test(decide_charge, refuses_what_cannot_owe)
{
    cr_assert_str_eq(decide_run("SL.DECIDE CHARGE 0 2 a b " GCRA_10_S(1) " " GCRA_10_S(1)),
                     "-ERR numkeys must be between 1 and 1\r\n");
    cr_assert_str_eq(decide_run("SL.DECIDE CHARGE 0 1 a sliding_log 3 60000000000 0 1 0 0 0"),
                     "-" SL_CHARGE_LOG_ERR "\r\n");
    cr_assert_str_eq(decide_run("SL.DECIDE CHARGE 0 1 a concurrency 3 60000000000 0 1 0 0 0"),
                     "-ERR syntax error: ACQUIRE and RELEASE take a concurrency limit, the other "
                     "ops any other\r\n");
    cr_assert_str_eq(decide_run("SL.DECIDE CHARGE 0 1 a " GCRA_10_S(-1)),
                     "-ERR cost must be a non-negative integer\r\n");
}
