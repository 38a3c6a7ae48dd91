/*
 * test_resp_client.c: the RESP client's pure parts (src/client/redis/):
 * CL.THROTTLE's reply as a decision over the shared vectors
 * (tests/vectors/ratelimit_headers.json, section "throttle"), the replies of
 * every command read from RESP bytes by hiredis's own reader, and the
 * commands as they go on the wire. The client against a real sluiced is
 * tests/client/.
 */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "client/redis/command.h"

#define NS_PER_MS INT64_C(1000000)

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot read %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    cr_assert_not_null(s);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

/* One reply object from RESP text, by hiredis's reader: the caller frees it
 * with freeReplyObject. */
static redisReply *reply_of(const char *resp, size_t len)
{
    redisReader *rd = redisReaderCreate();
    cr_assert_not_null(rd);
    cr_assert_eq(redisReaderFeed(rd, resp, len), REDIS_OK);
    void *r = NULL;
    cr_assert_eq(redisReaderGetReply(rd, &r), REDIS_OK, "%s", rd->errstr);
    cr_assert_not_null(r, "an incomplete reply: %s", resp);
    redisReaderFree(rd);
    return r;
}

#define REPLY(lit) reply_of(lit, sizeof(lit) - 1)

/* ---- CL.THROTTLE, over the shared vectors ---- */

static void check_throttle_case(const cJSON *c)
{
    const char *name = cJSON_GetObjectItem(c, "name")->valuestring;
    const cJSON *reply = cJSON_GetObjectItem(c, "reply");
    const cJSON *expect = cJSON_GetObjectItem(c, "expect");

    /* The reply as RESP, as a server sends it, read by hiredis and then by
     * the client: the path a real reply takes. */
    char resp[512];
    int n = snprintf(resp, sizeof resp, "*%d\r\n", cJSON_GetArraySize(reply));
    bool all_ints = cJSON_GetArraySize(reply) > 0;
    long long v[8];
    size_t nv = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, reply)
    {
        if (cJSON_IsNumber(e)) {
            n += snprintf(resp + n, sizeof resp - (size_t)n, ":%lld\r\n", (long long)e->valuedouble);
            if (nv < 8)
                v[nv++] = (long long)e->valuedouble;
        } else {
            const char *s = cJSON_IsString(e) ? e->valuestring : "?";
            n += snprintf(resp + n, sizeof resp - (size_t)n, "$%zu\r\n%s\r\n", strlen(s), s);
            all_ints = false;
        }
    }
    redisReply *r = reply_of(resp, (size_t)n);
    sl_rc_expect ex = {SL_RC_THROTTLE, "CL.THROTTLE", 1};
    sl_rc_answer a;
    char err[SL_RC_ERRSTR_MAX];
    int rc = sl_rc_read(&ex, r, &a, err, sizeof err);
    freeReplyObject(r);

    /* And the pure decoder, on the integers alone. */
    sl_decision d;
    int prc = all_ints ? sl_throttle_reply_decode(v, nv, &d) : -1;

    if (cJSON_IsNull(expect)) {
        cr_assert_eq(rc, SL_RC_ERR_REPLY, "%s: read as a decision", name);
        cr_assert(strstr(err, "unexpected reply to CL.THROTTLE: ") == err, "%s: %s", name, err);
        cr_assert_eq(prc, -1, "%s: decoded", name);
        return;
    }
    cr_assert_eq(rc, SL_RC_OK, "%s: %s", name, err);
    cr_assert_eq(prc, 0, "%s", name);
    cr_assert_eq(memcmp(&d, &a.d[0], sizeof d), 0, "%s: the two paths differ", name);
    bool allowed = cJSON_IsTrue(cJSON_GetObjectItem(expect, "allowed"));
    cr_assert_eq(d.allowed, allowed, "%s", name);
    cr_assert_eq(d.limit, (int64_t)cJSON_GetObjectItem(expect, "limit")->valuedouble, "%s", name);
    cr_assert_eq(d.remaining, (int64_t)cJSON_GetObjectItem(expect, "remaining")->valuedouble, "%s",
                 name);
    cr_assert_eq(d.reset_after_ns,
                 (int64_t)cJSON_GetObjectItem(expect, "reset_ms")->valuedouble * NS_PER_MS, "%s",
                 name);
    const cJSON *retry = cJSON_GetObjectItem(expect, "retry_after_ms");
    /* null is -1 on the wire: no wait when allowed, never when refused. */
    int64_t want = cJSON_IsNull(retry) ? (allowed ? 0 : SL_NEVER)
                                       : (int64_t)retry->valuedouble * NS_PER_MS;
    cr_assert_eq(d.retry_after_ns, want, "%s", name);
    cr_assert_eq(d.delay_ns, 0);
    cr_assert_eq(d.lease_id, 0);
}

Test(resp_client, throttle_vectors)
{
    char *text = slurp(SLUICE_VECTORS "/ratelimit_headers.json");
    cJSON *root = cJSON_Parse(text);
    cr_assert_not_null(root);
    const cJSON *cases = cJSON_GetObjectItem(root, "throttle");
    cr_assert(cJSON_IsArray(cases));
    int n = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases)
    {
        check_throttle_case(c);
        n++;
    }
    cr_assert_geq(n, 6);
    cJSON_Delete(root);
    free(text);
}

Test(resp_client, throttle_decode_refuses_what_cannot_be_one)
{
    sl_decision d;
    static const long long over[5] = {1, 2, 0, 9223372037LL, 0}; /* s * 1e9 > INT64_MAX */
    cr_assert_eq(sl_throttle_reply_decode(over, 5, &d), -1);
    static const long long reset_over[5] = {0, 2, 1, -1, 9223372037LL};
    cr_assert_eq(sl_throttle_reply_decode(reset_over, 5, &d), -1);
    static const long long at_top[5] = {1, 2, 0, 9223372036LL, 9223372036LL};
    cr_assert_eq(sl_throttle_reply_decode(at_top, 5, &d), 0);
    cr_assert_eq(d.retry_after_ns, INT64_C(9223372036000000000));
    static const long long neg_retry[5] = {1, 2, 0, -2, 0};
    cr_assert_eq(sl_throttle_reply_decode(neg_retry, 5, &d), -1);
    static const long long neg_left[5] = {0, 2, -1, -1, 0};
    cr_assert_eq(sl_throttle_reply_decode(neg_left, 5, &d), -1);
    cr_assert_eq(sl_throttle_reply_decode(NULL, 5, &d), -1);
    cr_assert_eq(sl_throttle_reply_decode(at_top, 4, &d), -1);
}

/* ---- the other replies ---- */

Test(resp_client, decision_read_by_name_in_any_order)
{
    redisReply *r = REPLY("*14\r\n$14\r\nreset_after_ms\r\n:10000\r\n$7\r\nfuture!\r\n$2\r\nok\r\n"
                          "$9\r\nremaining\r\n:0\r\n$5\r\nlimit\r\n:3\r\n$8\r\ndelay_ms\r\n:250\r\n"
                          "$14\r\nretry_after_ms\r\n:3334\r\n$7\r\nallowed\r\n:0\r\n");
    sl_rc_expect ex = {SL_RC_DECISION, "SL.TAKE", 1};
    sl_rc_answer a;
    char err[SL_RC_ERRSTR_MAX];
    cr_assert_eq(sl_rc_read(&ex, r, &a, err, sizeof err), SL_RC_OK, "%s", err);
    cr_assert(!a.d[0].allowed);
    cr_assert_eq(a.d[0].limit, 3);
    cr_assert_eq(a.d[0].remaining, 0);
    cr_assert_eq(a.d[0].retry_after_ns, 3334 * NS_PER_MS);
    cr_assert_eq(a.d[0].reset_after_ns, 10000 * NS_PER_MS);
    cr_assert_eq(a.d[0].delay_ns, 250 * NS_PER_MS);
    freeReplyObject(r);

    /* -1 is never; a decision without a field it needs is refused, naming it. */
    r = REPLY("*8\r\n$7\r\nallowed\r\n:0\r\n$5\r\nlimit\r\n:3\r\n$14\r\nretry_after_ms\r\n:-1\r\n"
              "$14\r\nreset_after_ms\r\n:0\r\n");
    cr_assert_eq(sl_rc_read(&ex, r, &a, err, sizeof err), SL_RC_ERR_REPLY);
    cr_assert_str_eq(err, "unexpected reply to SL.TAKE: a decision without remaining");
    freeReplyObject(r);
    r = REPLY("*10\r\n$7\r\nallowed\r\n:0\r\n$5\r\nlimit\r\n:3\r\n$14\r\nretry_after_ms\r\n:-1\r\n"
              "$14\r\nreset_after_ms\r\n:0\r\n$9\r\nremaining\r\n:0\r\n");
    cr_assert_eq(sl_rc_read(&ex, r, &a, err, sizeof err), SL_RC_OK, "%s", err);
    cr_assert_eq(a.d[0].retry_after_ns, SL_NEVER);
    freeReplyObject(r);
    r = REPLY("*10\r\n$7\r\nallowed\r\n:2\r\n$5\r\nlimit\r\n:3\r\n$14\r\nretry_after_ms\r\n:-1\r\n"
              "$14\r\nreset_after_ms\r\n:0\r\n$9\r\nremaining\r\n:0\r\n");
    cr_assert_eq(sl_rc_read(&ex, r, &a, err, sizeof err), SL_RC_ERR_REPLY);
    cr_assert_str_eq(err, "unexpected reply to SL.TAKE: allowed is out of range (2)");
    freeReplyObject(r);
    r = REPLY(":1\r\n");
    cr_assert_eq(sl_rc_read(&ex, r, &a, err, sizeof err), SL_RC_ERR_REPLY);
    cr_assert_str_eq(err, "unexpected reply to SL.TAKE: an integer where a decision (pairs of "
                          "names and values) goes");
    freeReplyObject(r);
}

Test(resp_client, error_replies_are_the_servers_words)
{
    redisReply *r = REPLY("-WRONGTYPE key holds a state of another algorithm\r\n");
    sl_rc_expect ex = {SL_RC_DECISION, "SL.TAKE", 1};
    sl_rc_answer a;
    char err[SL_RC_ERRSTR_MAX];
    cr_assert_eq(sl_rc_read(&ex, r, &a, err, sizeof err), SL_RC_ERR_SERVER);
    cr_assert_str_eq(err, "WRONGTYPE key holds a state of another algorithm");
    freeReplyObject(r);
    /* Cut to fit, never past the buffer. */
    char small[8];
    r = REPLY("-ERR a long message\r\n");
    cr_assert_eq(sl_rc_read(&ex, r, &a, small, sizeof small), SL_RC_ERR_SERVER);
    cr_assert_str_eq(small, "ERR a l");
    freeReplyObject(r);
}

Test(resp_client, policy_take_many_count_and_lease)
{
    sl_rc_answer a;
    char err[SL_RC_ERRSTR_MAX];
    redisReply *r = REPLY("*16\r\n$7\r\nallowed\r\n:0\r\n$11\r\nrejected_by\r\n:1\r\n"
                          "$5\r\nscope\r\n$6\r\nglobal\r\n$7\r\nbinding\r\n$10\r\napi.global\r\n"
                          "$5\r\nlimit\r\n:50000\r\n$9\r\nremaining\r\n:0\r\n"
                          "$14\r\nretry_after_ms\r\n:2\r\n$14\r\nreset_after_ms\r\n:60000\r\n");
    sl_rc_expect pol = {SL_RC_POLICY, "SL.POLICY", 1};
    cr_assert_eq(sl_rc_read(&pol, r, &a, err, sizeof err), SL_RC_OK, "%s", err);
    cr_assert_eq(a.info.rejected_by, 1);
    cr_assert(a.info.global);
    cr_assert_str_eq(a.info.binding, "api.global");
    cr_assert(!a.info.shadow);
    cr_assert_eq(a.d[0].limit, 50000);
    cr_assert_eq(a.d[0].retry_after_ns, 2 * NS_PER_MS);
    freeReplyObject(r);

    static const char dec[] = "*10\r\n$7\r\nallowed\r\n:%d\r\n$5\r\nlimit\r\n:%d\r\n"
                              "$9\r\nremaining\r\n:%d\r\n$14\r\nretry_after_ms\r\n:%d\r\n"
                              "$14\r\nreset_after_ms\r\n:%d\r\n";
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "*6\r\n$7\r\nallowed\r\n:0\r\n$11\r\nrejected_by\r\n:1\r\n"
                                      "$7\r\nresults\r\n*2\r\n");
    n += snprintf(buf + n, sizeof buf - (size_t)n, dec, 1, 10, 8, 0, 11986);
    n += snprintf(buf + n, sizeof buf - (size_t)n, dec, 0, 1, 1, -1, 0);
    r = reply_of(buf, (size_t)n);
    sl_rc_expect many = {SL_RC_MANY, "SL.TAKEMANY", 2};
    cr_assert_eq(sl_rc_read(&many, r, &a, err, sizeof err), SL_RC_OK, "%s", err);
    cr_assert_eq(a.n, 2);
    cr_assert_eq(a.rejected_by, 1);
    cr_assert(a.d[0].allowed && a.d[0].remaining == 8);
    cr_assert(!a.d[1].allowed && a.d[1].retry_after_ns == SL_NEVER);
    /* Another count of results than was asked for is not this command's. */
    many.n = 3;
    cr_assert_eq(sl_rc_read(&many, r, &a, err, sizeof err), SL_RC_ERR_REPLY);
    freeReplyObject(r);

    sl_rc_expect cnt = {SL_RC_COUNT, "SL.RESET", 1}, rel = {SL_RC_RELEASE, "SL.RELEASE", 1};
    r = REPLY(":2\r\n");
    cr_assert_eq(sl_rc_read(&cnt, r, &a, err, sizeof err), SL_RC_OK);
    cr_assert_eq(a.count, 2);
    cr_assert_eq(sl_rc_read(&rel, r, &a, err, sizeof err), SL_RC_ERR_REPLY);
    freeReplyObject(r);

    sl_rc_expect lease = {SL_RC_LEASE, "SL.ACQUIRE", 1};
    r = REPLY("$24\r\n13e8d66a4397ef9d0000000a\r\n");
    cr_assert_eq(sl_rc_read(&lease, r, &a, err, sizeof err), SL_RC_OK);
    cr_assert(a.lease.granted);
    cr_assert_str_eq(a.lease.id, "13e8d66a4397ef9d0000000a");
    freeReplyObject(r);
    r = REPLY("$-1\r\n");
    cr_assert_eq(sl_rc_read(&lease, r, &a, err, sizeof err), SL_RC_OK);
    cr_assert(!a.lease.granted);
    cr_assert_str_eq(a.lease.id, "");
    freeReplyObject(r);
    r = REPLY("$3\r\na\0b\r\n");
    cr_assert_eq(sl_rc_read(&lease, r, &a, err, sizeof err), SL_RC_ERR_REPLY);
    freeReplyObject(r);
}

/* ---- the commands ---- */

/* The command's words joined by spaces. */
static const char *words(const sl_rc_cmd *c, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (int i = 0; i < c->argc; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%.*s", i ? " " : "", (int)c->lens[i],
                              c->argv[i]);
    return out;
}

Test(resp_client, commands_as_sent)
{
    sl_rc_cmd c;
    char err[SL_RC_ERRSTR_MAX], w[1024];
    sl_rc_limit l = {.limit = 100, .period_ms = 60000};
    cr_assert_eq(sl_rc_cmd_take(&c, false, "user:42", &l, 1, err, sizeof err), 0);
    cr_assert_str_eq(words(&c, w, sizeof w), "SL.TAKE user:42 100 60000ms COST 1");
    l = (sl_rc_limit){.limit = 5000, .months = 1, .burst = 10, .algorithm = SL_FIXED_WINDOW,
                      .utc_offset = "-05:00", .reset_day = 15};
    cr_assert_eq(sl_rc_cmd_take(&c, true, "acct:9", &l, 0, err, sizeof err), 0);
    cr_assert_str_eq(words(&c, w, sizeof w), "SL.PEEK acct:9 5000 1mo BURST 10 COST 0 ALGORITHM "
                                             "fixed_window UTCOFFSET -05:00 RESETDAY 15");
    cr_assert_eq(sl_rc_cmd_throttle(&c, "user123", 15, 30, 60, 1, err, sizeof err), 0);
    cr_assert_str_eq(words(&c, w, sizeof w), "CL.THROTTLE user123 15 30 60 1");
    cr_assert_eq(sl_rc_cmd_policy(&c, "chat", "key:7f3a", 1, 1200, "paid", err, sizeof err), 0);
    cr_assert_str_eq(words(&c, w, sizeof w), "SL.POLICY chat key:7f3a COST 1 TOKENS 1200 TIER paid");
    sl_rc_item items[2] = {{"user:42", {.limit = 100, .period_ms = 60000}, 1},
                           {"global", {.limit = 50000, .period_ms = 60000}, 1}};
    cr_assert_eq(sl_rc_cmd_take_many(&c, items, 2, err, sizeof err), 0);
    cr_assert_str_eq(words(&c, w, sizeof w), "SL.TAKEMANY 2 user:42 global LIMIT 100 60000ms COST 1 "
                                             "LIMIT 50000 60000ms COST 1");
    cr_assert_eq(c.expect.n, 2);
    cr_assert_eq(sl_rc_cmd_acquire(&c, "db", 10, 30000, 2, err, sizeof err), 0);
    cr_assert_str_eq(words(&c, w, sizeof w), "SL.ACQUIRE db 10 30000 WEIGHT 2");
    sl_rc_adaptive ad = {.max_in_flight = 64, .ttl_ms = 5000, .estimator = "vegas", .min_limit = 2,
                         .priority = "sheddable"};
    cr_assert_eq(sl_rc_cmd_acquire_adaptive(&c, "api", &ad, err, sizeof err), 0);
    cr_assert_str_eq(words(&c, w, sizeof w),
                     "SL.ACQUIRE api 64 5000 ADAPTIVE ESTIMATOR vegas MIN 2 PRIORITY sheddable");
    ad = (sl_rc_adaptive){.policy = "backend", .partition = "batch"};
    cr_assert_eq(sl_rc_cmd_acquire_adaptive(&c, "api", &ad, err, sizeof err), 0);
    cr_assert_str_eq(words(&c, w, sizeof w), "SL.ACQUIRE api POLICY backend PARTITION batch");
    sl_rc_outcome o = {.latency_us = 12500, .outcome = "dropped"};
    cr_assert_eq(sl_rc_cmd_release(&c, "api", "abc", &o, err, sizeof err), 0);
    cr_assert_str_eq(words(&c, w, sizeof w), "SL.RELEASE api abc LATENCY 12.500000 OUTCOME dropped");
    const char *keys[] = {"a", "b"};
    cr_assert_eq(sl_rc_cmd_reset(&c, keys, 2, err, sizeof err), 0);
    cr_assert_str_eq(words(&c, w, sizeof w), "SL.RESET a b");
}

Test(resp_client, bad_arguments_are_refused_before_sending)
{
    sl_rc_cmd c;
    char err[SL_RC_ERRSTR_MAX];
    sl_rc_limit l = {.limit = 1, .period_ms = 1000, .algorithm = SL_CONCURRENCY};
    cr_assert_eq(sl_rc_cmd_take(&c, false, "k", &l, 1, err, sizeof err), -1);
    cr_assert_str_eq(err, "SL.TAKE: the algorithm is not a rate limit (6)");
    cr_assert_eq(sl_rc_cmd_take(&c, false, "", &l, 1, err, sizeof err), -1);
    cr_assert_str_eq(err, "SL.TAKE: the key is empty");
    cr_assert_eq(sl_rc_cmd_take_many(&c, NULL, 0, err, sizeof err), -1);
    sl_rc_item many[SL_TAKE_MANY_MAX + 1];
    memset(many, 0, sizeof many);
    cr_assert_eq(sl_rc_cmd_take_many(&c, many, SL_TAKE_MANY_MAX + 1, err, sizeof err), -1);
    cr_assert_str_eq(err, "SL.TAKEMANY: 1 to 8 limits (got 9)");
    const char *keys[SL_RC_RESET_MAX + 1];
    for (size_t i = 0; i <= SL_RC_RESET_MAX; i++)
        keys[i] = "k";
    cr_assert_eq(sl_rc_cmd_reset(&c, keys, SL_RC_RESET_MAX, err, sizeof err), 0);
    cr_assert_eq(c.argc, SL_RC_RESET_MAX + 1);
    cr_assert_eq(sl_rc_cmd_reset(&c, keys, SL_RC_RESET_MAX + 1, err, sizeof err), -1);
    sl_rc_adaptive ad = {.partition = "p"};
    cr_assert_eq(sl_rc_cmd_acquire_adaptive(&c, "k", &ad, err, sizeof err), -1);
    cr_assert_str_eq(err, "SL.ACQUIRE: a partition belongs to a policy");
}

/* The largest command fits: eight limits with every option. */
Test(resp_client, take_many_with_every_option_fits)
{
    sl_rc_cmd c;
    char err[SL_RC_ERRSTR_MAX];
    sl_rc_item items[SL_TAKE_MANY_MAX];
    for (size_t i = 0; i < SL_TAKE_MANY_MAX; i++)
        items[i] = (sl_rc_item){"k",
                                {.limit = INT64_MAX, .months = INT64_MAX, .burst = INT64_MIN,
                                 .algorithm = SL_SLIDING_WINDOW, .utc_offset = "+05:30",
                                 .reset_day = 31},
                                INT64_MIN};
    cr_assert_eq(sl_rc_cmd_take_many(&c, items, SL_TAKE_MANY_MAX, err, sizeof err), 0);
    cr_assert_eq(c.argc, 2 + 8 + 8 * 13);
    cr_assert_leq(c.argc, SL_RC_ARGV_MAX);
    cr_assert_leq(c.nnums, SL_RC_NUMS_MAX);
    cr_assert_str_eq(c.argv[c.argc - 1], "31");
    cr_assert_str_eq(c.argv[12], "9223372036854775807mo");
}
