/*
 * SL_OP_REFUND through the memory backend, and SL.DECIDE REFUND through the
 * command layer over it: a take given back leaves the key as if it had been
 * refused, the reply is the units given back, and bad requests are refused
 * with errors that say why.
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

TestSuite(memory_refund, .init = setup, .fini = teardown);
TestSuite(decide_refund, .init = setup, .fini = teardown);

/* One request of op on one key, answered in the call. */
static sl_backend_req submit(sl_op op, const char *key, const sl_limit *l, int64_t cost,
                             sl_decision *d)
{
    sl_take_item it = {key, strlen(key), l, cost};
    sl_backend_req r = {.op = op, .n = 1, .items = &it, .d = d};
    cr_assert_eq(sl_backend_submit(be, bw, &r), SL_OK, "the memory backend answers in the call");
    return r;
}

Test(memory_refund, gives_a_take_back)
{
    sl_limit l;
    sl_decision d;
    cr_assert_eq(sl_limit_init(&l, SL_TOKEN_BUCKET, 5, 60 * NS_PER_SEC, 0), SL_OK);
    sl_backend_req r = submit(SL_OP_TAKE, "a", &l, 3, &d);
    cr_assert(r.rc == SL_OK && r.failed == -1 && d.remaining == 2);
    r = submit(SL_OP_REFUND, "a", &l, 2, &d);
    cr_assert_eq(r.rc, SL_OK);
    cr_assert_eq(r.count, 2);
    r = submit(SL_OP_PEEK, "a", &l, 0, &d);
    cr_assert_eq(d.remaining, 4, "as if only 1 had been taken");
    r = submit(SL_OP_REFUND, "a", &l, 9, &d);
    cr_assert_eq(r.count, 1, "never more than was taken");
    r = submit(SL_OP_REFUND, "absent", &l, 1, &d);
    cr_assert(r.rc == SL_OK && r.count == 0);
    /* A concurrency limit has leases, released, not refunded. */
    sl_limit c;
    cr_assert_eq(sl_limit_init(&c, SL_CONCURRENCY, 2, 60 * NS_PER_SEC, 0), SL_OK);
    r = submit(SL_OP_REFUND, "c", &c, 1, &d);
    cr_assert_eq(r.rc, SL_ERR_ALGORITHM);
    r = submit(SL_OP_REFUND, "a", &l, -1, &d);
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

#define GCRA_10_MIN(cost) "gcra 10 60000000000 0 " #cost " 0 0 0"

Test(decide_refund, answers_the_units_given_back)
{
    cr_assert_str_eq(run("SL.DECIDE TAKE 0 1 k " GCRA_10_MIN(4)),
                     "*7\r\n:-1\r\n:1\r\n:10\r\n:6\r\n:0\r\n:24000000000\r\n:0\r\n");
    cr_assert_str_eq(run("SL.DECIDE REFUND 0 1 k " GCRA_10_MIN(3)), ":3\r\n");
    cr_assert_str_eq(run("SL.DECIDE PEEK 0 1 k " GCRA_10_MIN(0)),
                     "*7\r\n:-1\r\n:1\r\n:10\r\n:9\r\n:0\r\n:6000000000\r\n:0\r\n");
    /* 3 s later half an interval has refilled: the one unit left still counts */
    now += 3 * NS_PER_SEC;
    cr_assert_str_eq(run("SL.DECIDE refund 0 1 k " GCRA_10_MIN(5)), ":1\r\n");
    cr_assert_str_eq(run("SL.DECIDE REFUND 0 1 k " GCRA_10_MIN(5)), ":0\r\n");
    /* another algorithm's state, and a carried limit on an ad-hoc state: nothing */
    cr_assert_str_eq(run("SL.DECIDE TAKE 0 1 k " GCRA_10_MIN(4)),
                     "*7\r\n:-1\r\n:1\r\n:10\r\n:6\r\n:0\r\n:24000000000\r\n:0\r\n");
    cr_assert_str_eq(run("SL.DECIDE REFUND 0 1 k token_bucket 10 60000000000 0 4 0 0 0"),
                     ":0\r\n");
    cr_assert_str_eq(run("SL.DECIDE REFUND 0 1 k gcra 10 60000000000 0 4 0 0 1"), ":0\r\n");
    cr_assert_str_eq(run("SL.DECIDE REFUND 0 1 k " GCRA_10_MIN(4)), ":4\r\n");
}

Test(decide_refund, refuses_what_it_cannot_give_back)
{
    cr_assert_str_eq(run("SL.DECIDE REFUND 0 2 a b " GCRA_10_MIN(1) " " GCRA_10_MIN(1)),
                     "-ERR numkeys must be between 1 and 1\r\n");
    cr_assert_str_eq(run("SL.DECIDE REFUND 0 1 a"),
                     "-ERR wrong number of arguments for 'sl.decide' command\r\n");
    cr_assert_str_eq(run("SL.DECIDE REFUND 0 1 a concurrency 3 60000000000 0 1 0 0 0"),
                     "-ERR syntax error: ACQUIRE and RELEASE take a concurrency limit, the other "
                     "ops any other\r\n");
    cr_assert_str_eq(run("SL.DECIDE REFUND 00000000000000ab 1 a " GCRA_10_MIN(1)),
                     "-ERR syntax error: the lease is 16 hex digits for ACQUIRE and RELEASE, "
                     "else 0\r\n");
    cr_assert_str_eq(run("SL.DECIDE REFUND 0 1 a " GCRA_10_MIN(-1)),
                     "-ERR cost must be a non-negative integer\r\n");
    cr_assert_str_eq(run("SL.DECIDE GIVEBACK 0 1 a " GCRA_10_MIN(1)),
                     "-ERR syntax error: SL.DECIDE's op is TAKE, PEEK, RESET, ACQUIRE, RELEASE, "
                     "REFUND or CHARGE\r\n");
}
