/*
 * SL_OP_CHARGE through the memory backend, and SL.DECIDE CHARGE through the
 * command layer over it: a charge is never refused, leaves the key in debt
 * so that the takes after it are refused, is given back by a refund, and
 * bad requests (several keys, a sliding log, a lease) are refused with
 * errors that say why.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "cmd/cmd.h"
#include "testlib.h"

static sl_store *store;
static sl_backend *be;
static sl_backend_worker *bw;
static int64_t now;
static sl_buf out;
static sl_limit_cache cache;
static uint64_t lease_key[2] = {1, 2};

static void setup(void)
{
    const char *err;
    cr_assert_eq(sl_store_new(NULL, &store), SL_OK);
    cr_assert_not_null(be = sl_backend_memory(store));
    cr_assert_not_null(bw = be->ops->attach(be, NULL, &now, &err));
    sl_buf_init(&out, 2, 0);
    memset(&cache, 0, sizeof cache);
    now = 1000 * NS_PER_SEC;
}

static void teardown(void)
{
    be->ops->detach(bw);
    be->ops->free(be);
    sl_store_free(store);
    sl_buf_free(&out);
}

TestSuite(memory_charge, .init = setup, .fini = teardown);
TestSuite(decide_charge, .init = setup, .fini = teardown);

/* One request of op on one key, answered in the call. */
static sl_backend_req submit(sl_op op, const char *key, const sl_limit *l, int64_t cost,
                             sl_decision *d)
{
    sl_take_item it = {key, strlen(key), l, cost};
    sl_backend_req r = {.op = op, .n = 1, .items = &it, .d = d};
    cr_assert_eq(sl_backend_submit(be, bw, &r), SL_OK, "the memory backend answers in the call");
    return r;
}

Test(memory_charge, takes_what_the_budget_lacks)
{
    sl_limit l;
    sl_decision d;
    cr_assert_eq(sl_limit_init(&l, SL_TOKEN_BUCKET, 5, 5 * NS_PER_SEC, 0), SL_OK);
    sl_backend_req r = submit(SL_OP_CHARGE, "a", &l, 8, &d);
    cr_assert_eq(r.rc, SL_OK);
    cr_assert_eq(r.failed, -1, "a charge is never refused");
    cr_assert(d.allowed);
    cr_assert_eq(d.remaining, 0);
    cr_assert_eq(d.retry_after_ns, 4 * NS_PER_SEC, "3 tokens owed, and one to take");
    r = submit(SL_OP_TAKE, "a", &l, 1, &d);
    cr_assert_eq(r.failed, 0);
    now += 4 * NS_PER_SEC - 1;
    r = submit(SL_OP_TAKE, "a", &l, 1, &d);
    cr_assert_eq(r.failed, 0);
    now += 1;
    r = submit(SL_OP_TAKE, "a", &l, 1, &d);
    cr_assert_eq(r.failed, -1, "the debt is paid");
    /* A refund gives a charge back. */
    r = submit(SL_OP_CHARGE, "b", &l, 7, &d);
    r = submit(SL_OP_REFUND, "b", &l, 7, &d);
    cr_assert_eq(r.count, 7);
    r = submit(SL_OP_PEEK, "b", &l, 0, &d);
    cr_assert_eq(d.remaining, 5);
    /* What cannot owe. */
    sl_limit log;
    cr_assert_eq(sl_limit_init(&log, SL_SLIDING_LOG, 5, 60 * NS_PER_SEC, 0), SL_OK);
    r = submit(SL_OP_CHARGE, "c", &log, 1, &d);
    cr_assert_eq(r.rc, SL_ERR_ALGORITHM);
    cr_assert_str_eq(r.errstr, SL_CHARGE_LOG_ERR);
    r = submit(SL_OP_CHARGE, "a", &l, -1, &d);
    cr_assert_eq(r.rc, SL_ERR_COST);
}

/* Runs a space-separated command; returns the reply as RESP text. */
static const char *run(const char *line)
{
    static char copy[2048], reply[4096];
    sl_resp_slice argv[40];
    int argc = 0;
    snprintf(copy, sizeof copy, "%s", line);
    for (char *tok = strtok(copy, " "); tok && argc < 40; tok = strtok(NULL, " "))
        argv[argc++] = (sl_resp_slice){tok, strlen(tok)};
    sl_cmd_ctx c = {.reply = &sl_resp_reply_sink,
                    .sink = &out,
                    .be = be,
                    .bw = bw,
                    .lease_key = lease_key,
                    .limit_cache = &cache};
    sl_buf_clear(&out);
    const sl_command *cmd = sl_command_find(sl_rate_commands, argv[0].ptr, argv[0].len);
    cr_assert_not_null(cmd);
    sl_command_call(cmd, &c, argc, argv);
    snprintf(reply, sizeof reply, "%.*s", (int)out.len, out.data);
    return reply;
}

#define GCRA_10_S(cost) "gcra 10 1000000000 0 " #cost " 0 0 0"

Test(decide_charge, answers_a_decision_never_refused)
{
    /* 15 of 10 a second: admitted, nothing remains, 1.5 s until all is paid. */
    cr_assert_str_eq(run("SL.DECIDE CHARGE 0 1 k " GCRA_10_S(15)),
                     "*7\r\n:-1\r\n:1\r\n:10\r\n:0\r\n:0\r\n:1500000000\r\n:0\r\n");
    cr_assert_str_eq(run("SL.DECIDE TAKE 0 1 k " GCRA_10_S(1)),
                     "*7\r\n:0\r\n:0\r\n:10\r\n:0\r\n:600000000\r\n:1500000000\r\n:0\r\n");
    cr_assert_str_eq(run("SL.DECIDE REFUND 0 1 k " GCRA_10_S(15)), ":15\r\n");
    cr_assert_str_eq(run("SL.DECIDE charge 0 1 k " GCRA_10_S(0)),
                     "*7\r\n:-1\r\n:1\r\n:10\r\n:10\r\n:0\r\n:0\r\n:0\r\n");
}

Test(decide_charge, refuses_what_cannot_owe)
{
    cr_assert_str_eq(run("SL.DECIDE CHARGE 0 2 a b " GCRA_10_S(1) " " GCRA_10_S(1)),
                     "-ERR numkeys must be between 1 and 1\r\n");
    cr_assert_str_eq(run("SL.DECIDE CHARGE 0 1 a sliding_log 3 60000000000 0 1 0 0 0"),
                     "-" SL_CHARGE_LOG_ERR "\r\n");
    cr_assert_str_eq(run("SL.DECIDE CHARGE 0 1 a concurrency 3 60000000000 0 1 0 0 0"),
                     "-ERR syntax error: ACQUIRE and RELEASE take a concurrency limit, the other "
                     "ops any other\r\n");
    cr_assert_str_eq(run("SL.DECIDE CHARGE 0 1 a " GCRA_10_S(-1)),
                     "-ERR cost must be a non-negative integer\r\n");
}
