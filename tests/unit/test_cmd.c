/*
 * The command layer (src/cmd) over a real store, on a virtual clock: the
 * replies a client gets, byte for byte, and the errors it is told.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "common/siphash.h"
#include "policy/config.h"
#include "testlib.h"

typedef struct harness {
    sl_store *store;
    int64_t now;
    sl_buf out;
    sl_limit_cache cache;
    uint64_t key[2];
    sl_config *config;
    size_t max_key_bytes;
    sl_backend *be; /* the memory backend sluiced runs on, over the store */
    sl_backend_worker *bw;
} harness;


static harness H;

static void setup(void)
{
    memset(&H, 0, sizeof H);
    cr_assert_eq(sl_store_new(NULL, &H.store), SL_OK);
    const char *err;
    cr_assert_not_null(H.be = sl_backend_memory(H.store));
    cr_assert_not_null(H.bw = H.be->ops->attach(H.be, NULL, &H.now, &err));
    sl_buf_init(&H.out, 2, 0);
    H.now = 1000 * NS_PER_SEC;
    H.key[0] = 1;
    H.key[1] = 2;
}

static void teardown(void)
{
    sl_config_free(H.config);
    H.be->ops->detach(H.bw);
    H.be->ops->free(H.be);
    sl_store_free(H.store);
    sl_buf_free(&H.out);
}

/* Runs a space-separated command; returns the reply as RESP text. */
static const char *run(const char *line)
{
    static char copy[2048], reply[4096];
    sl_resp_slice argv[32];
    int argc = 0;
    snprintf(copy, sizeof copy, "%s", line);
    for (char *tok = strtok(copy, " "); tok && argc < 32; tok = strtok(NULL, " "))
        argv[argc++] = (sl_resp_slice){tok, strlen(tok)};
    sl_cmd_ctx c = {.reply = &sl_resp_reply_sink,
                    .sink = &H.out,
                    .be = H.be,
                    .bw = H.bw,
                    .lease_key = H.key,
                    .limit_cache = &H.cache,
                    .config = H.config,
                    .max_key_bytes = H.max_key_bytes};
    sl_buf_clear(&H.out);
    const sl_command *cmd = sl_command_find(sl_rate_commands, argv[0].ptr, argv[0].len);
    if (cmd)
        sl_command_call(cmd, &c, argc, argv);
    else
        sl_reply_unknown_command(&c, argc, argv);
    snprintf(reply, sizeof reply, "%.*s", (int)H.out.len, H.out.data);
    return reply;
}

#define THROTTLE(a, b, c, d, e) "*5\r\n:" #a "\r\n:" #b "\r\n:" #c "\r\n:" #d "\r\n:" #e "\r\n"

TestSuite(cmd, .init = setup, .fini = teardown);

Test(cmd, cl_throttle_answers_as_redis_cell)
{
    cr_assert_str_eq(run("CL.THROTTLE user123 15 30 60 1"), THROTTLE(0, 16, 15, -1, 2));
    /* the reference sequence, with its seconds rounding */
    cr_assert_str_eq(run("cl.throttle k 4 1 1 6"), THROTTLE(1, 5, 5, -1, 0));
    for (int i = 4; i >= 0; i--) {
        char want[64];
        snprintf(want, sizeof want, "*5\r\n:0\r\n:5\r\n:%d\r\n:-1\r\n:%d\r\n", i, 5 - i);
        cr_assert_str_eq(run("cl.throttle k 4 1 1"), want);
    }
    cr_assert_str_eq(run("cl.throttle k 4 1 1"), THROTTLE(1, 5, 0, 1, 5));
    H.now += 3100 * NS_PER_MS;
    /* debt 5 s - 3.1 s + 1 s = 2.9 s: 2 remain, reset in 2.9 s -> 3 */
    cr_assert_str_eq(run("cl.throttle k 4 1 1"), THROTTLE(0, 5, 2, -1, 3));
}

Test(cmd, decisions_are_maps_with_milliseconds_rounded_up)
{
    cr_assert_str_eq(run("SL.TAKE u 3 1"),
                     "*10\r\n$7\r\nallowed\r\n:1\r\n$5\r\nlimit\r\n:3\r\n$9\r\nremaining\r\n:2\r\n"
                     "$14\r\nretry_after_ms\r\n:0\r\n$14\r\nreset_after_ms\r\n:334\r\n");
    H.out.proto = 3;
    cr_assert_str_eq(run("SL.PEEK u 3 1 COST 3"),
                     "%5\r\n$7\r\nallowed\r\n:0\r\n$5\r\nlimit\r\n:3\r\n$9\r\nremaining\r\n:2\r\n"
                     "$14\r\nretry_after_ms\r\n:334\r\n$14\r\nreset_after_ms\r\n:334\r\n");
    cr_assert(strstr(run("SL.TAKE u 3 1 COST 4"), "retry_after_ms\r\n:-1\r\n"), "never");
    cr_assert(strstr(run("SL.TAKE q 10 1s ALGORITHM leaky_bucket BURST 2"), "delay_ms\r\n:0\r\n"));
    cr_assert(strstr(run("SL.TAKE q 10 1s ALGORITHM leaky_bucket BURST 2"), "delay_ms\r\n:100\r\n"));
    cr_assert(strstr(run("SL.TAKE w 1 500ms ALGORITHM fixed_window"), "allowed\r\n:1\r\n"));
}

Test(cmd, bad_arguments_get_errors_that_name_them)
{
    cr_assert_str_eq(run("CL.THROTTLE k 1"),
                     "-ERR wrong number of arguments for 'cl.throttle' command\r\n");
    cr_assert_str_eq(run("CL.THROTTLE k x 1 1"),
                     "-ERR value is not an integer or out of range\r\n");
    cr_assert_str_eq(run("CL.THROTTLE k 1 1 1 -1"), "-ERR cost must be a non-negative integer\r\n");
    /* int64's edges: parsed exactly, one past refused as not an integer */
    const char *not_int = "-ERR value is not an integer or out of range\r\n";
    cr_assert_str_eq(run("CL.THROTTLE k 1 1 1 -9223372036854775808"),
                     "-ERR cost must be a non-negative integer\r\n");
    cr_assert_str_eq(run("CL.THROTTLE k 1 1 1 -9223372036854775809"), not_int);
    cr_assert_str_eq(run("CL.THROTTLE k 1 1 1 9223372036854775808"), not_int);
    cr_assert_str_eq(run("CL.THROTTLE k 1 1 1 99999999999999999999"), not_int);
    cr_assert_str_neq(run("CL.THROTTLE k 1 1 1 9223372036854775807"), not_int);
    cr_assert_str_eq(run("CL.THROTTLE k 1 1 1 -"), not_int);
    cr_assert_str_eq(run("CL.THROTTLE k 1 1 1 1-"), not_int);
    cr_assert_str_eq(run("CL.THROTTLE k 1 1 1 +1"), not_int);
    cr_assert_str_eq(run("SL.TAKE k 0 60"), "-ERR limit must be a positive integer of at most "
                                            "2305843009213693951 (65536 for sliding_log)\r\n");
    cr_assert_str_eq(run("SL.TAKE k 5 60x"), "-ERR period is not a duration: use seconds, or a "
                                             "number with ms, s, m, h, d, w or mo\r\n");
    cr_assert_str_eq(run("SL.TAKE k 5 -3"),
                     "-ERR period must be a positive duration of at most 73 years\r\n");
    cr_assert_str_eq(run("SL.TAKE k 5 60 BURST"), "-ERR syntax error: option 'BURST' needs a value\r\n");
    cr_assert_str_eq(run("SL.TAKE k 5 60 COLOR red"), "-ERR syntax error: unknown option 'COLOR'\r\n");
    cr_assert(strncmp(run("SL.TAKE k 5 60 ALGORITHM magic"), "-ERR unknown algorithm 'magic'", 30) == 0);
    cr_assert_str_eq(run("SL.TAKE k 5 60 COST -1"), "-ERR cost must be a non-negative integer\r\n");
    cr_assert_str_eq(run("SL.TAKEMANY 9 a b LIMIT 5 60"), "-ERR numkeys must be between 1 and 8\r\n");
    cr_assert_str_eq(run("SL.TAKEMANY 2 a b LIMIT 5 60"),
                     "-ERR syntax error: expected LIMIT for key 2 of 2\r\n");
    cr_assert_str_eq(run("NOPE a"), "-ERR unknown command 'NOPE', with args beginning with: 'a' \r\n");
    /* and nothing was stored by any of them */
    cr_assert_str_eq(run("SL.RESET k a b"), ":0\r\n");
}

#define BURST_ERR                                                                             \
    "-ERR burst must be a positive integer of at most 2305843009213693951 (omit it for a burst " \
    "of the limit)\r\n"

Test(cmd, a_burst_given_is_at_least_one)
{
    /* BURST 0 used to mean "the limit": a client writing nginx's burst=0
     * (no burst) got the opposite. It is refused, in every place a limit
     * is read; omitting BURST still means the limit. */
    cr_assert_str_eq(run("SL.TAKE k 5 60 BURST 0"), BURST_ERR);
    cr_assert_str_eq(run("SL.PEEK k 5 60 BURST 0"), BURST_ERR);
    cr_assert_str_eq(run("SL.TAKE k 5 60 BURST -1"), BURST_ERR);
    cr_assert_str_eq(run("SL.TAKE k 5 60 ALGORITHM fixed_window BURST 0"), BURST_ERR);
    cr_assert_str_eq(run("SL.TAKEMANY 2 a b LIMIT 5 60 LIMIT 5 60 BURST 0"), BURST_ERR);
    cr_assert_str_eq(run("SL.TAKE k 5 60 BURST 2305843009213693952"), BURST_ERR);
    cr_assert_str_eq(run("SL.RESET k a b"), ":0\r\n", "nothing was stored");
    cr_assert(strstr(run("SL.TAKE k 5 60 BURST 1"), "limit\r\n:1\r\n$9\r\nremaining\r\n:0\r\n"));
    cr_assert(strstr(run("SL.TAKE n 5 60"), "limit\r\n:5\r\n$9\r\nremaining\r\n:4\r\n"));
}

Test(cmd, a_repeated_option_is_refused)
{
    cr_assert_str_eq(run("SL.TAKE k 5 60 BURST 3 BURST 4"),
                     "-ERR syntax error: option 'BURST' is given twice\r\n");
    cr_assert_str_eq(run("SL.TAKE k 5 60 cost 1 COST 2"),
                     "-ERR syntax error: option 'COST' is given twice\r\n");
    cr_assert_str_eq(run("SL.PEEK k 5 60 ALGORITHM gcra BURST 2 algorithm token_bucket"),
                     "-ERR syntax error: option 'ALGORITHM' is given twice\r\n");
    cr_assert_str_eq(run("SL.TAKEMANY 1 a LIMIT 5 60 COST 1 COST 1"),
                     "-ERR syntax error: option 'COST' is given twice\r\n");
    cr_assert_str_eq(run("SL.ACQUIRE a 2 1000 WEIGHT 1 weight 1"),
                     "-ERR syntax error: option 'WEIGHT' is given twice\r\n");
    /* Each LIMIT group has its own options. */
    const char *r = run("SL.TAKEMANY 2 a b LIMIT 5 60 BURST 2 COST 1 LIMIT 5 60 BURST 2 COST 1");
    cr_assert(strstr(r, "allowed\r\n:1\r\n$11\r\nrejected_by\r\n:-1\r\n"), "%s", r);
    cr_assert_str_eq(run("SL.RESET k"), ":0\r\n", "nothing was stored");
}

Test(cmd, algorithm_names_ignore_case)
{
    cr_assert(strstr(run("SL.TAKE k 5 60 ALGORITHM GCRA"), "allowed\r\n:1\r\n"));
    /* the same state as gcra's: a second take sees the first */
    cr_assert(strstr(run("SL.TAKE k 5 60 ALGORITHM gcra"), "remaining\r\n:3\r\n"));
    cr_assert(strstr(run("SL.TAKE t 5 60 ALGORITHM Token_Bucket"), "remaining\r\n:4\r\n"));
    cr_assert(strstr(run("SL.TAKE t 5 60 ALGORITHM token_bucket"), "remaining\r\n:3\r\n"));
    cr_assert(strncmp(run("SL.TAKE k 5 60 ALGORITHM CONCURRENCY"), "-ERR unknown algorithm", 22) == 0);
    sl_algorithm a;
    cr_assert_eq(sl_algorithm_parse("SLIDING_LOG", 11, &a), SL_OK);
    cr_assert_eq(a, SL_SLIDING_LOG);
    cr_assert_eq(sl_algorithm_parse("gcra\0", 5, &a), SL_ERR_ALGORITHM);
    cr_assert_eq(sl_algorithm_parse("gcr", 3, &a), SL_ERR_ALGORITHM);
}

Test(cmd, cl_throttle_refuses_zero_rates_in_redis_cells_words)
{
    const char *zero = "-Cell error: Zero rates are not supported\r\n";
    cr_assert_str_eq(run("CL.THROTTLE k 1 0 60"), zero);
    cr_assert_str_eq(run("CL.THROTTLE k 1 5 0"), zero);
    cr_assert_str_eq(run("CL.THROTTLE k 0 0 0 0"), zero);
    /* more than one per nanosecond: redis-cell's interval truncates to 0 */
    cr_assert_str_eq(run("CL.THROTTLE k 1 1000000001 1"), zero);
    cr_assert_str_eq(run("CL.THROTTLE k 1 2000000 1"),
                     "-ERR rate is too high: less than one microsecond per request\r\n");
    cr_assert_str_eq(run("CL.THROTTLE k -1 1 60"),
                     "-ERR max_burst must be an integer between 0 and 2305843009213693950\r\n");
    cr_assert_str_eq(run("CL.THROTTLE k 0 1 60"), THROTTLE(0, 1, 0, -1, 60));
}

Test(cmd, acquire_tells_never_fits_from_full)
{
    cr_assert_str_eq(run("SL.ACQUIRE db 2 1000 WEIGHT 3"), "-ERR weight 3 exceeds max_in_flight 2\r\n");
    cr_assert(strncmp(run("SL.ACQUIRE db 2 1000 WEIGHT 2"), "$24\r\n", 5) == 0);
    cr_assert_str_eq(run("SL.ACQUIRE db 2 1000"), "$-1\r\n", "full: a null, as before");
    cr_assert_str_eq(run("SL.ACQUIRE db 2 1000 WEIGHT 3"), "-ERR weight 3 exceeds max_in_flight 2\r\n");
    const char *ttl = "-ERR ttl_ms must be a positive number of milliseconds of at most "
                      "2305843009213\r\n";
    cr_assert_str_eq(run("SL.ACQUIRE db 2 2305843009214"), ttl);
    cr_assert_str_eq(run("SL.ACQUIRE db 2 0"), ttl);
    cr_assert(strncmp(run("SL.ACQUIRE other 2 2305843009213"), "$24\r\n", 5) == 0, "the most");
}

Test(cmd, key_errors_name_the_longest_key)
{
    char line[1200];
    H.max_key_bytes = 512; /* the store's default */
    snprintf(line, sizeof line, "SL.TAKE %0513d 5 60", 0);
    cr_assert_str_eq(run(line), "-ERR key is empty or too long (at most 512 bytes)\r\n");
    snprintf(line, sizeof line, "SL.TAKEMANY 2 a %0513d LIMIT 5 60 LIMIT 5 60", 0);
    cr_assert_str_eq(run(line), "-ERR key is empty or too long (at most 512 bytes)\r\n");
    snprintf(line, sizeof line, "SL.TAKE %0512d 5 60", 0);
    cr_assert(strstr(run(line), "allowed\r\n:1\r\n"));
    H.max_key_bytes = 0; /* a face without a limit of its own (the module) */
    snprintf(line, sizeof line, "SL.TAKE %0513d 5 60", 0);
    cr_assert_str_eq(run(line), "-ERR key is empty or too long\r\n");
}

Test(cmd, takemany_is_all_or_nothing)
{
    run("SL.TAKE g 2 1h");
    run("SL.TAKE g 2 1h"); /* g is drained */
    const char *r = run("SL.TAKEMANY 2 u g LIMIT 5 1h LIMIT 2 1h");
    const char *head = "*6\r\n$7\r\nallowed\r\n:0\r\n$11\r\nrejected_by\r\n:1\r\n";
    cr_assert(strncmp(r, head, strlen(head)) == 0, "%s", r);
    cr_assert(strstr(run("SL.PEEK u 5 1h COST 0"), "remaining\r\n:5\r\n"), "u was not consumed");
    r = run("SL.TAKEMANY 2 u v LIMIT 5 1h LIMIT 2 1h COST 2");
    cr_assert(strstr(r, "allowed\r\n:1\r\n$11\r\nrejected_by\r\n:-1\r\n"), "%s", r);
    cr_assert(strstr(run("SL.PEEK v 2 1h COST 0"), "remaining\r\n:0\r\n"));
    cr_assert_str_eq(run("SL.RESET u v g zz"), ":3\r\n");
}

Test(cmd, takemany_answers_a_repeated_key_as_it_adds_up_when_rejected)
{
    /* Alone, each take of 2 fits in 3; the two together do not. The item
     * that rejects says so (it used to answer what it would alone:
     * allowed), the first says what it leaves for the second. */
    const char *r = run("SL.TAKEMANY 2 r r LIMIT 3 1h COST 2 LIMIT 3 1h COST 2");
    const char *want = "*6\r\n$7\r\nallowed\r\n:0\r\n$11\r\nrejected_by\r\n:1\r\n"
                       "$7\r\nresults\r\n*2\r\n"
                       "*10\r\n$7\r\nallowed\r\n:1\r\n$5\r\nlimit\r\n:3\r\n$9\r\nremaining\r\n:1\r\n"
                       "$14\r\nretry_after_ms\r\n:0\r\n$14\r\nreset_after_ms\r\n:2400000\r\n"
                       "*10\r\n$7\r\nallowed\r\n:0\r\n$5\r\nlimit\r\n:3\r\n$9\r\nremaining\r\n:1\r\n"
                       "$14\r\nretry_after_ms\r\n:1200000\r\n$14\r\nreset_after_ms\r\n:2400000\r\n";
    cr_assert_str_eq(r, want);
    cr_assert(strstr(run("SL.PEEK r 3 1h COST 0"), "remaining\r\n:3\r\n"), "nothing consumed");
}

Test(cmd, leases_are_unguessable_and_released_once)
{
    const char *r = run("SL.ACQUIRE db 2 1000");
    cr_assert(strncmp(r, "$24\r\n", 5) == 0, "%s", r);
    char lease[25], second[25];
    memcpy(lease, r + 5, 24);
    lease[24] = 0;
    cr_assert(strcmp(lease + 16, "00000002") == 0, "the shape travels in the id: %s", lease);
    r = run("SL.ACQUIRE db 2 1000");
    memcpy(second, r + 5, 24);
    second[24] = 0;
    cr_assert(strcmp(lease, second) != 0);
    cr_assert(strncmp(lease, "0000000000000001", 16) != 0, "ids are not counters: %s", lease);
    cr_assert_str_eq(run("SL.ACQUIRE db 2 1000"), "$-1\r\n", "full");

    char cmdline[128], forged[25];
    /* the same lease on another key, and a lease with one digit changed */
    snprintf(cmdline, sizeof cmdline, "SL.RELEASE other %s", lease);
    cr_assert_str_eq(run(cmdline), ":0\r\n");
    memcpy(forged, lease, 25);
    forged[15] = forged[15] == '1' ? '2' : '1';
    snprintf(cmdline, sizeof cmdline, "SL.RELEASE db %s", forged);
    cr_assert_str_eq(run(cmdline), ":0\r\n");
    cr_assert_str_eq(run("SL.RELEASE db 0000000000000000000000002"), ":0\r\n", "25 digits");
    cr_assert_str_eq(run("SL.RELEASE db zz"), ":0\r\n");
    snprintf(cmdline, sizeof cmdline, "SL.RELEASE db %s", lease);
    cr_assert_str_eq(run(cmdline), ":1\r\n");
    cr_assert_str_eq(run(cmdline), ":0\r\n", "released twice");
    cr_assert(strncmp(run("SL.ACQUIRE db 2 1000"), "$24\r\n", 5) == 0, "a slot is free again");

    /* Every lease expires, the state is reclaimed; a new lease never takes
     * an old one's id, so an old holder cannot release it. */
    H.now += NS_PER_SEC;
    r = run("SL.ACQUIRE db 2 1000 WEIGHT 2");
    cr_assert(strncmp(r, "$24\r\n", 5) == 0);
    cr_assert(strncmp(r + 5, lease, 16) != 0 && strncmp(r + 5, second, 16) != 0);
    snprintf(cmdline, sizeof cmdline, "SL.RELEASE db %s", second);
    cr_assert_str_eq(run(cmdline), ":0\r\n", "an expired lease stays expired");
    cr_assert_str_eq(run("SL.ACQUIRE db 0 1000"), "-ERR max_in_flight must be between 1 and 65536\r\n");
}

Test(cmd, policies_with_tiers_a_global_limit_and_shadow_mode)
{
    static const char yaml[] = "policies:\n"
                               "  api:\n"
                               "    limit: 2\n"
                               "    period: 1h\n"
                               "    tiers:\n"
                               "      paid: {limit: 3, period: 1h}\n"
                               "    global: {limit: 4, period: 1h}\n"
                               "  dry:\n"
                               "    limit: 1\n"
                               "    period: 1h\n"
                               "    shadow: true\n";
    char err[256];
    cr_assert_eq(sl_config_parse(yaml, sizeof yaml - 1, "t.yaml", &H.config, err, sizeof err), 0,
                 "%s", err);
    cr_assert(strstr(run("SL.POLICY api alice"),
                     "allowed\r\n:1\r\n$11\r\nrejected_by\r\n:-1\r\n$5\r\nscope\r\n$3\r\nkey\r\n"
                     "$7\r\nbinding\r\n$3\r\napi\r\n$5\r\nlimit\r\n:2\r\n"));
    cr_assert(strstr(run("SL.POLICY api alice"), "allowed\r\n:1\r\n"));
    cr_assert(strstr(run("SL.POLICY api alice"), "allowed\r\n:0\r\n"), "alice's own limit");
    /* bob's own limit (3) has 2 left, the global one (4) only 1: the
     * global one binds, and the reply shows it */
    cr_assert(strstr(run("SL.POLICY api bob TIER paid"),
                     "scope\r\n$6\r\nglobal\r\n$7\r\nbinding\r\n$10\r\napi.global\r\n"
                     "$5\r\nlimit\r\n:4\r\n$9\r\nremaining\r\n:1\r\n"));
    /* 3 of the global 4 are spent: bob's second passes, his third is refused
     * by the global limit, and the reply says so (limit 4) */
    cr_assert(strstr(run("SL.POLICY api bob TIER paid"), "allowed\r\n:1\r\n"));
    const char *r = run("SL.POLICY api bob TIER paid");
    cr_assert(strstr(r, "allowed\r\n:0\r\n$11\r\nrejected_by\r\n:1\r\n$5\r\nscope\r\n"
                        "$6\r\nglobal\r\n$7\r\nbinding\r\n$10\r\napi.global\r\n$5\r\nlimit\r\n:4\r\n"),
              "%s", r);
    cr_assert(strstr(run("SL.PEEK api:bob 3 1h COST 0"), "remaining\r\n:1\r\n"),
              "the refused take consumed nothing from bob");

    cr_assert(strstr(run("SL.POLICY dry x"), "shadow\r\n:1\r\n$11\r\nwould_allow\r\n:1\r\n"));
    r = run("SL.POLICY dry x");
    const char *head = "*22\r\n$7\r\nallowed\r\n:1\r\n";
    cr_assert(strncmp(r, head, strlen(head)) == 0, "%s", r);
    cr_assert(strstr(r, "retry_after_ms\r\n:0\r\n"), "shadow: allowed, so no retry");
    cr_assert(strstr(r, "would_allow\r\n:0\r\n"), "%s", r);

    cr_assert_str_eq(run("SL.POLICY nope x"), "-ERR unknown policy 'nope'\r\n");
    cr_assert_str_eq(run("SL.POLICY api x TIER gold"), "-ERR unknown tier 'gold' for policy 'api'\r\n");
    cr_assert_str_eq(run("SL.POLICY api x COST -2"), "-ERR cost must be a non-negative integer\r\n");
}

/* SipHash-2-4's reference vector: key 00..0f, message 00..0e. */
Test(siphash, reference_vector)
{
    uint64_t key[2] = {UINT64_C(0x0706050403020100), UINT64_C(0x0f0e0d0c0b0a0908)};
    unsigned char msg[15];
    for (int i = 0; i < 15; i++)
        msg[i] = (unsigned char)i;
    cr_assert_eq(sl_siphash(key, msg, 15), UINT64_C(0xa129ca6149be45e5));
    cr_assert_eq(sl_siphash(key, msg, 0), UINT64_C(0x726fdb47dd0e0e31));
}

/* Names match whole and case-insensitively (ASCII), and nothing else does:
 * not a prefix, not a longer name, not one with a NUL inside. */
Test(cmd, command_names_match_exactly_in_any_case)
{
    const sl_command *t = sl_command_find(sl_rate_commands, "cl.throttle", 11);
    cr_assert_not_null(t);
    cr_assert_eq(sl_command_find(sl_rate_commands, "CL.THROTTLE", 11), t);
    cr_assert_eq(sl_command_find(sl_rate_commands, "Cl.ThRoTtLe", 11), t);
    cr_assert_null(sl_command_find(sl_rate_commands, "cl.throttl", 10));
    cr_assert_null(sl_command_find(sl_rate_commands, "cl.throttlee", 12));
    cr_assert_null(sl_command_find(sl_rate_commands, "cl.throttle\0", 12));
    cr_assert_null(sl_command_find(sl_rate_commands, "cl.thr\0ttle", 11));
    cr_assert_null(sl_command_find(sl_rate_commands, "", 0));
    cr_assert_null(sl_command_find(sl_rate_commands, "cl.throttle", 0));
    cr_assert_null(sl_command_find(sl_rate_commands, "cl\xabthrottle", 11));
    cr_assert_str_eq(sl_command_find(sl_rate_commands, "SL.TAKEMANY", 11)->name, "sl.takemany");
    cr_assert_str_eq(sl_command_find(sl_rate_commands, "sl.take", 7)->name, "sl.take");
}

/* The lookup folds case a word at a time: every byte value, at a position
 * in each word, matches exactly when it is the name's letter in either case. */
Test(cmd, command_lookup_folds_only_ascii_letters)
{
    const sl_command *t = sl_command_find(sl_rate_commands, "cl.throttle", 11);
    size_t at[] = {0, 7, 8, 10};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        for (int b = 0; b < 256; b++) {
            char name[12] = "cl.throttle";
            char want = name[at[i]];
            name[at[i]] = (char)b;
            bool same = b == want || (want >= 'a' && want <= 'z' && b == want - 32);
            cr_assert_eq(sl_command_find(sl_rate_commands, name, 11) == t, same,
                         "byte 0x%02x at %zu", b, at[i]);
        }
    }
}

/* Every name fits the table's padded field, lowercase and NUL-terminated. */
Test(cmd, command_names_fit_their_field)
{
    size_t n = 0;
    for (const sl_command *cmd = sl_rate_commands; cmd->name[0]; cmd++, n++) {
        size_t len = strnlen(cmd->name, SL_CMD_NAME_MAX);
        cr_assert_lt(len, SL_CMD_NAME_MAX, "%.16s", cmd->name);
        for (size_t i = 0; i < len; i++)
            cr_assert(!(cmd->name[i] >= 'A' && cmd->name[i] <= 'Z'), "%s", cmd->name);
        cr_assert_eq(sl_command_find(sl_rate_commands, cmd->name, len), cmd, "%s", cmd->name);
    }
    cr_assert_gt(n, 5);
}

/* The keys sluiced prefetches for a pipelined batch: the store keys of the
 * key spec (or numkeys) of commands marked SL_CMD_STOREKEYS, nothing for the
 * others, and never more than there are arguments or room. */
static size_t keys_of(const char *name, const char *const *args, size_t argc, const void **keys,
                      size_t *lens, size_t cap)
{
    sl_resp_slice argv[16];
    cr_assert_leq(argc, 16);
    for (size_t i = 0; i < argc; i++)
        argv[i] = (sl_resp_slice){args[i], strlen(args[i])};
    const sl_command *cmd = sl_command_find(sl_rate_commands, name, strlen(name));
    cr_assert_not_null(cmd, "%s", name);
    return sl_command_store_keys(cmd, argc, argv, keys, lens, cap);
}

Test(cmd, store_keys_follow_the_key_spec)
{
    const void *k[8];
    size_t l[8];
    const char *throttle[] = {"CL.THROTTLE", "user:1", "15", "30", "60"};
    cr_assert_eq(keys_of("cl.throttle", throttle, 5, k, l, 8), 1);
    cr_assert(l[0] == 6 && memcmp(k[0], "user:1", 6) == 0);
    const char *many[] = {"SL.TAKEMANY", "2", "a", "bb", "LIMIT", "1", "60", "LIMIT", "2", "60"};
    cr_assert_eq(keys_of("sl.takemany", many, 10, k, l, 8), 2);
    cr_assert(l[0] == 1 && l[1] == 2 && memcmp(k[1], "bb", 2) == 0);
    const char *too_many[] = {"SL.TAKEMANY", "9", "a", "b"}; /* numkeys past the arguments */
    cr_assert_eq(keys_of("sl.takemany", too_many, 4, k, l, 8), 2);
    const char *bad[] = {"SL.TAKEMANY", "x", "a"};
    cr_assert_eq(keys_of("sl.takemany", bad, 3, k, l, 8), 0);
    const char *reset[] = {"SL.RESET", "a", "b", "c"};
    cr_assert_eq(keys_of("sl.reset", reset, 4, k, l, 8), 3);
    cr_assert_eq(keys_of("sl.reset", reset, 4, k, l, 2), 2, "no more than the room");
    /* SL.POLICY's store key is built from the policy, not given: none. */
    const char *policy[] = {"SL.POLICY", "api", "user:1"};
    cr_assert_eq(keys_of("sl.policy", policy, 3, k, l, 8), 0);
}
