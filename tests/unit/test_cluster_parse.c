/*
 * What a Redis Cluster's nodes say, as the cluster transport reads it
 * (src/backend/cluster.c): CLUSTER SLOTS replies and MOVED/ASK targets,
 * well formed and not. The replies are real hiredis replies, read by
 * hiredis's own reader from RESP bytes, so that every shape a node (or
 * something that is not one) could send can be written down.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cluster.h"

/* The reply in resp (freed by the caller with freeReplyObject). */
static redisReply *reply_of(const char *resp)
{
    redisReader *rd = redisReaderCreate();
    cr_assert(rd);
    cr_assert_eq(redisReaderFeed(rd, resp, strlen(resp)), REDIS_OK);
    void *r = NULL;
    cr_assert_eq(redisReaderGetReply(rd, &r), REDIS_OK);
    cr_assert(r, "incomplete RESP in the test: %s", resp);
    redisReaderFree(rd);
    return r;
}

static int parse(const char *resp, sl_cluster_range *out, const char **err)
{
    redisReply *r = reply_of(resp);
    *err = NULL;
    static char keep[256];
    int n = sl_cluster_parse_slots(r, out, err);
    if (*err) { /* the text may point into the reply, which goes now */
        snprintf(keep, sizeof keep, "%s", *err);
        *err = keep;
    }
    freeReplyObject(r);
    return n;
}


Test(cluster_parse, three_primaries_with_replicas)
{
    const char *resp = "*3\r\n"
                       "*4\r\n:0\r\n:5460\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n"
                       "*3\r\n$9\r\n127.0.0.1\r\n:7003\r\n$2\r\nid\r\n"
                       "*3\r\n:5461\r\n:10922\r\n*2\r\n$9\r\n127.0.0.1\r\n:7001\r\n"
                       "*3\r\n:10923\r\n:16383\r\n*2\r\n$3\r\n::1\r\n:7002\r\n";
    sl_cluster_range out[3];
    const char *err;
    redisReply *r = reply_of(resp);
    cr_assert_eq(sl_cluster_parse_slots(r, out, &err), 3);
    cr_assert_eq(out[0].lo, 0);
    cr_assert_eq(out[0].hi, 5460);
    cr_assert_eq(out[0].port, 7000);
    cr_assert_eq(out[0].hlen, 9);
    cr_assert(memcmp(out[0].host, "127.0.0.1", 9) == 0);
    cr_assert_eq(out[1].lo, 5461);
    cr_assert_eq(out[1].port, 7001);
    cr_assert_eq(out[2].hi, 16383);
    cr_assert_eq(out[2].hlen, 3);
    cr_assert(memcmp(out[2].host, "::1", 3) == 0);
    freeReplyObject(r);
}

Test(cluster_parse, unknown_and_empty_endpoints)
{
    sl_cluster_range out[4];
    const char *err;
    /* "?" and port 0: no owner; a null and "": the answering node. */
    int n = parse("*4\r\n"
                  "*3\r\n:0\r\n:9\r\n*2\r\n$1\r\n?\r\n:7000\r\n"
                  "*3\r\n:10\r\n:19\r\n*2\r\n$-1\r\n:7004\r\n"
                  "*3\r\n:20\r\n:29\r\n*2\r\n$9\r\n127.0.0.1\r\n:0\r\n"
                  "*3\r\n:30\r\n:39\r\n*2\r\n$0\r\n\r\n:7005\r\n",
                  out, &err);
    cr_assert_eq(n, 2, "%s", err ? err : "");
    cr_assert_eq(out[0].lo, 10);
    cr_assert_null(out[0].host);
    cr_assert_eq(out[0].port, 7004);
    cr_assert_eq(out[1].lo, 30);
    cr_assert_null(out[1].host);
    cr_assert_eq(out[1].port, 7005);
    /* No ranges at all: a cluster with no slots assigned yet. */
    cr_assert_eq(parse("*0\r\n", out, &err), 0);
}

Test(cluster_parse, malformed_replies)
{
    static const struct {
        const char *resp, *err;
    } cases[] = {
        {"-ERR This instance has cluster support disabled\r\n",
         "ERR This instance has cluster support disabled"},
        {"+OK\r\n", "CLUSTER SLOTS: not an array"},
        {"-\r\n", "CLUSTER SLOTS: not an array"},
        {"*1\r\n:5\r\n", "CLUSTER SLOTS: a range is not [start, end, primary, ...]"},
        {"*1\r\n*2\r\n:0\r\n:5\r\n", "CLUSTER SLOTS: a range is not [start, end, primary, ...]"},
        {"*1\r\n*3\r\n:5\r\n:4\r\n*2\r\n$1\r\na\r\n:1\r\n",
         "CLUSTER SLOTS: a range is not [start, end, primary, ...]"},
        {"*1\r\n*3\r\n:-1\r\n:4\r\n*2\r\n$1\r\na\r\n:1\r\n",
         "CLUSTER SLOTS: a range is not [start, end, primary, ...]"},
        {"*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\na\r\n:1\r\n",
         "CLUSTER SLOTS: a range is not [start, end, primary, ...]"},
        {"*1\r\n*3\r\n$1\r\n0\r\n:5\r\n*2\r\n$1\r\na\r\n:1\r\n",
         "CLUSTER SLOTS: a range is not [start, end, primary, ...]"},
        {"*1\r\n*3\r\n:0\r\n:5\r\n$1\r\na\r\n", "CLUSTER SLOTS: a primary is not [host, port, ...]"},
        {"*1\r\n*3\r\n:0\r\n:5\r\n*1\r\n$1\r\na\r\n",
         "CLUSTER SLOTS: a primary is not [host, port, ...]"},
        {"*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n:1\r\n:1\r\n",
         "CLUSTER SLOTS: a primary is not [host, port, ...]"},
        {"*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$1\r\na\r\n:65536\r\n",
         "CLUSTER SLOTS: a primary is not [host, port, ...]"},
        {"*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$1\r\na\r\n$4\r\n7000\r\n",
         "CLUSTER SLOTS: a primary is not [host, port, ...]"},
        {"*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$3\r\na b\r\n:1\r\n",
         "CLUSTER SLOTS: a primary's host is not a host name or address"},
        {"*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$3\r\na/b\r\n:1\r\n",
         "CLUSTER SLOTS: a primary's host is not a host name or address"},
        {"*2\r\n*3\r\n:0\r\n:5\r\n*2\r\n$1\r\na\r\n:1\r\n*3\r\n:5\r\n:9\r\n*2\r\n$1\r\nb\r\n:1\r\n",
         "CLUSTER SLOTS: ranges overlap"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sl_cluster_range out[2];
        const char *err;
        cr_assert_eq(parse(cases[i].resp, out, &err), -1, "case %zu", i);
        cr_assert_str_eq(err, cases[i].err, "case %zu", i);
    }
}

Test(cluster_parse, a_host_of_256_bytes_is_refused)
{
    char resp[512];
    char host[257];
    memset(host, 'a', 256);
    host[256] = '\0';
    snprintf(resp, sizeof resp, "*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$256\r\n%s\r\n:1\r\n", host);
    sl_cluster_range out[1];
    const char *err;
    cr_assert_eq(parse(resp, out, &err), -1);
    host[255] = '\0';
    snprintf(resp, sizeof resp, "*1\r\n*3\r\n:0\r\n:5\r\n*2\r\n$255\r\n%s\r\n:1\r\n", host);
    cr_assert_eq(parse(resp, out, &err), 1);
}

Test(cluster_parse, more_ranges_than_slots)
{
    /* 16385 one-slot ranges cannot be: refused before any is read. */
    size_t n = 16385, cap = 16 + n * 64;
    char *resp = malloc(cap);
    cr_assert(resp);
    size_t at = (size_t)snprintf(resp, cap, "*%zu\r\n", n);
    for (size_t i = 0; i < n; i++)
        at += (size_t)snprintf(resp + at, cap - at, "*3\r\n:%zu\r\n:%zu\r\n*2\r\n$1\r\na\r\n:1\r\n",
                               i % 16384, i % 16384);
    const char *err;
    cr_assert_eq(parse(resp, NULL, &err), -1);
    cr_assert_str_eq(err, "CLUSTER SLOTS: more ranges than slots");
    free(resp);
}

static bool redirect(const char *s, int *slot, size_t *hlen, int *port)
{
    return sl_cluster_parse_redirect(s, strlen(s), slot, hlen, port);
}

Test(cluster_parse, redirections)
{
    int slot, port;
    size_t hlen;
    cr_assert(redirect("3999 127.0.0.1:6381", &slot, &hlen, &port));
    cr_assert_eq(slot, 3999);
    cr_assert_eq(hlen, 9);
    cr_assert_eq(port, 6381);
    cr_assert(redirect("0 ::1:7000", &slot, &hlen, &port));
    cr_assert_eq(hlen, 3);
    cr_assert_eq(port, 7000);
    cr_assert(redirect("16383 node-1.example:65535", &slot, &hlen, &port));
    cr_assert_eq(slot, 16383);
    /* cluster-preferred-endpoint-type unknown-endpoint: the sender's host. */
    cr_assert(redirect("12 :6380", &slot, &hlen, &port));
    cr_assert_eq(hlen, 0);
    cr_assert_eq(port, 6380);
    static const char *const bad[] = {
        "",           "3999",          "3999 ",        " 127.0.0.1:1",   "16384 a:1",
        "99999 a:1",  "123456 a:1",    "-1 a:1",       "3999 127.0.0.1", "3999 a:0",
        "3999 a:65536", "3999 ::",     "3999 a:",      "3999 a b:1",     "3999 a/b:1",
        "3999 a:12x", "3999 a:123456", "x 127.0.0.1:1",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        cr_assert_not(redirect(bad[i], &slot, &hlen, &port), "'%s'", bad[i]);
}
