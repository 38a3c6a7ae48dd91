/*
 * decidelib.h: what the tests of the backend's single-key ops (REFUND,
 * CHARGE) share: a memory backend over a fresh store for each test
 * (decide_setup / decide_teardown, for a TestSuite's .init and .fini), one
 * request submitted to it (decide_submit), and one command line run through
 * the command layer over it (decide_run). Static: each test program includes
 * it once.
 */
#ifndef SL_TESTS_DECIDELIB_H
#define SL_TESTS_DECIDELIB_H

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

static void decide_setup(void)
{
    const char *err;
    cr_assert_eq(sl_store_new(NULL, &store), SL_OK);
    cr_assert_not_null(be = sl_backend_memory(store));
    cr_assert_not_null(bw = be->ops->attach(be, NULL, &now, &err));
    sl_buf_init(&out, 2, 0);
    memset(&cache, 0, sizeof cache);
    now = 1000 * NS_PER_SEC;
}

static void decide_teardown(void)
{
    be->ops->detach(bw);
    be->ops->free(be);
    sl_store_free(store);
    sl_buf_free(&out);
}

/* One request of op on one key, answered in the call. */
static sl_backend_req decide_submit(sl_op op, const char *key, const sl_limit *l, int64_t cost,
                             sl_decision *d)
{
    sl_take_item it = {key, strlen(key), l, cost};
    sl_backend_req r = {.op = op, .n = 1, .items = &it, .d = d};
    cr_assert_eq(sl_backend_submit(be, bw, &r), SL_OK, "the memory backend answers in the call");
    return r;
}

/* Runs a space-separated command; returns the reply as RESP text. */
static const char *decide_run(const char *line)
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

#endif
