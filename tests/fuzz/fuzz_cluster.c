/*
 * fuzz_cluster.c: libFuzzer target for what the cluster transport reads
 * from a Redis Cluster's nodes (src/backend/cluster.c): CLUSTER SLOTS
 * replies (sl_cluster_parse_slots) and the targets of MOVED and ASK
 * (sl_cluster_parse_redirect). A node is not trusted to be one: whatever
 * it sends must be refused or read into ranges and addresses that keep
 * their promises (slots within 0..16383, forwards, disjoint; hosts inside
 * the reply, of valid length; ports 1..65535). CHECK() aborts otherwise.
 *
 * Input: byte 0 even: the rest is RESP, read by hiredis's reader into a
 * reply, then parsed as CLUSTER SLOTS; odd: the rest is a redirection's
 * text after its word ("3999 127.0.0.1:6381").
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "backend/cluster.h"
#include "fuzz.h"

static void check_slots(const redisReply *r)
{
    size_t cap = r->type == REDIS_REPLY_ARRAY ? r->elements : 0;
    sl_cluster_range *out = malloc((cap ? cap : 1) * sizeof *out);
    CHECK(out);
    const char *err = NULL;
    int n = sl_cluster_parse_slots(r, out, &err);
    if (n < 0) {
        CHECK(err && *err);
        free(out);
        return;
    }
    CHECK((size_t)n <= cap);
    static uint8_t seen[16384];
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < n; i++) {
        const sl_cluster_range *g = &out[i];
        CHECK(g->lo >= 0 && g->lo <= g->hi && g->hi < 16384);
        CHECK(g->port >= 1 && g->port <= 65535);
        CHECK(g->host ? g->hlen >= 1 && g->hlen <= 255 : g->hlen == 0);
        for (int s = g->lo; s <= g->hi; s++) {
            CHECK(!seen[s]);
            seen[s] = 1;
        }
    }
    free(out);
}

/* Whether an array header in p claims more than 65536 elements. hiredis
 * 0.14's reader allocates room for every element the header announces
 * before any arrives (hiredis 1.x bounds this); such inputs only measure
 * that allocation, so they are skipped. Any '*' counts, even inside a bulk
 * string: skipping a few inputs too many costs nothing. */
static bool huge_array(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '*')
            continue;
        uint64_t v = 0;
        for (size_t j = i + 1; j < n && p[j] >= '0' && p[j] <= '9' && v <= 65536; j++)
            v = v * 10 + (uint64_t)(p[j] - '0');
        if (v > 65536)
            return true;
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || (data[0] % 2 == 0 && huge_array(data + 1, size - 1)))
        return 0;
    char *text = copy_of(data + 1, size - 1);
    if (data[0] % 2 == 0) {
        redisReader *rd = redisReaderCreate();
        CHECK(rd);
        void *r = NULL;
        if (redisReaderFeed(rd, text, size - 1) == REDIS_OK &&
            redisReaderGetReply(rd, &r) == REDIS_OK && r)
            check_slots(r);
        if (r)
            freeReplyObject(r);
        redisReaderFree(rd);
    } else {
        int slot = -1, port = 0;
        size_t hlen = 0;
        if (sl_cluster_parse_redirect(text, size - 1, &slot, &hlen, &port)) {
            CHECK(slot >= 0 && slot < 16384);
            CHECK(port >= 1 && port <= 65535);
            CHECK(hlen <= 255 && hlen < size - 1);
            const char *blank = memchr(text, ' ', size - 1);
            CHECK(blank && (size_t)(blank - text) + 1 + hlen < size - 1);
        }
    }
    free(text);
    return 0;
}
