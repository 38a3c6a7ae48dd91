/*
 * A hiredis client for sluiced's integration tests (tests/integration/test_hiredis.py
 * builds and runs it). Usage: hiredis_client PORT KEYPREFIX
 *
 * Debian 12's hiredis is 0.14, which parses RESP2 only (the RESP3 types came with
 * hiredis 1.0): this client speaks RESP2, and checks that HELLO 2 answers a flat array.
 * Every reply is checked; the first mismatch prints what was expected and what came, and
 * the program exits 1. Exit 0: every check passed. Exit 2: could not connect.
 */
#include <hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

static int failures;
static const char *where;

static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "hiredis_client: %s: ", where);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    failures++;
}

static const char *type_name(int t)
{
    switch (t) {
    case REDIS_REPLY_STRING: return "string";
    case REDIS_REPLY_ARRAY: return "array";
    case REDIS_REPLY_INTEGER: return "integer";
    case REDIS_REPLY_NIL: return "nil";
    case REDIS_REPLY_STATUS: return "status";
    case REDIS_REPLY_ERROR: return "error";
    default: return "?";
    }
}

static int expect_type(const redisReply *r, int type)
{
    if (!r) {
        fail("no reply (connection error)");
        return 0;
    }
    if (r->type != type) {
        fail("expected a %s reply, got a %s%s%.*s", type_name(type), type_name(r->type),
             (r->type == REDIS_REPLY_ERROR || r->type == REDIS_REPLY_STATUS ||
              r->type == REDIS_REPLY_STRING) ? ": " : "",
             (r->type == REDIS_REPLY_ERROR || r->type == REDIS_REPLY_STATUS ||
              r->type == REDIS_REPLY_STRING) ? (int)r->len : 0, r->str ? r->str : "");
        return 0;
    }
    return 1;
}

static void expect_str(const redisReply *r, int type, const char *want)
{
    if (!expect_type(r, type))
        return;
    if (r->len != strlen(want) || memcmp(r->str, want, r->len) != 0)
        fail("expected \"%s\", got \"%.*s\"", want, (int)r->len, r->str);
}

static void expect_ints(const redisReply *r, const long long *want, size_t n)
{
    if (!expect_type(r, REDIS_REPLY_ARRAY))
        return;
    if (r->elements != n) {
        fail("expected an array of %zu, got %zu elements", n, r->elements);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER || r->element[i]->integer != want[i]) {
            fail("element %zu: expected %lld, got a %s %lld", i, want[i],
                 type_name(r->element[i]->type), r->element[i]->integer);
            return;
        }
    }
}

/* A RESP2 map: a flat array of name, value; checks the integer fields given. */
static void expect_flat_map(const redisReply *r, const char *const *names, const long long *values,
                            size_t n)
{
    if (!expect_type(r, REDIS_REPLY_ARRAY))
        return;
    if (r->elements % 2) {
        fail("a RESP2 map has an even number of elements, got %zu", r->elements);
        return;
    }
    for (size_t k = 0; k < n; k++) {
        int found = 0;
        for (size_t i = 0; i + 1 < r->elements; i += 2) {
            const redisReply *name = r->element[i], *v = r->element[i + 1];
            if (name->type != REDIS_REPLY_STRING && name->type != REDIS_REPLY_STATUS) {
                fail("field name %zu is a %s", i / 2, type_name(name->type));
                return;
            }
            if (name->len == strlen(names[k]) && memcmp(name->str, names[k], name->len) == 0) {
                found = 1;
                if (v->type != REDIS_REPLY_INTEGER || v->integer != values[k])
                    fail("field %s: expected %lld, got a %s %lld", names[k], values[k],
                         type_name(v->type), v->integer);
            }
        }
        if (!found)
            fail("field %s missing", names[k]);
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s PORT KEYPREFIX\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]);
    const char *prefix = argv[2];
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (!c || c->err) {
        fprintf(stderr, "hiredis_client: cannot connect to 127.0.0.1:%d: %s\n", port,
                c ? c->errstr : "out of memory");
        return 2;
    }
    redisSetTimeout(c, tv); /* a hung server fails the run, it does not hang it */
    redisReply *r;
    char key[512];

    where = "PING";
    r = redisCommand(c, "PING");
    expect_str(r, REDIS_REPLY_STATUS, "PONG");
    freeReplyObject(r);

    where = "HELLO 2";
    r = redisCommand(c, "HELLO 2");
    {
        static const char *const names[] = {"proto"};
        static const long long values[] = {2};
        expect_flat_map(r, names, values, 1);
    }
    freeReplyObject(r);

    where = "CL.THROTTLE (README example, then drain)";
    snprintf(key, sizeof key, "%s:cell", prefix);
    for (int i = 0; i < 16 && !failures; i++) {
        r = redisCommand(c, "CL.THROTTLE %s 15 30 60 1", key);
        const long long want[] = {0, 16, 15 - i, -1, 2 * (i + 1)};
        expect_ints(r, want, 5);
        freeReplyObject(r);
    }
    r = redisCommand(c, "CL.THROTTLE %s 15 30 60", key);
    {
        const long long want[] = {1, 16, 0, 2, 32};
        expect_ints(r, want, 5);
    }
    freeReplyObject(r);

    where = "SL.TAKE";
    snprintf(key, sizeof key, "%s:take", prefix);
    r = redisCommand(c, "SL.TAKE %s 100 60", key);
    {
        static const char *const names[] = {"allowed", "limit", "remaining", "retry_after_ms",
                                            "reset_after_ms"};
        const long long values[] = {1, 100, 99, 0, 600};
        expect_flat_map(r, names, values, 5);
        if (r && r->type == REDIS_REPLY_ARRAY && r->elements != 10)
            fail("expected 5 fields, got %zu elements", r->elements);
    }
    freeReplyObject(r);

    where = "SL.TAKE binary key (%b)";
    {
        static const char bin[] = {'b', '\r', '\n', '\0', '\xff'};
        for (int i = 0; i < 2; i++) {
            r = redisCommand(c, "SL.TAKE %s:%b 1 3600", prefix, bin, sizeof bin);
            static const char *const names[] = {"allowed"};
            const long long values[] = {i == 0 ? 1 : 0};
            expect_flat_map(r, names, values, 1);
            freeReplyObject(r);
        }
    }

    where = "SL.ACQUIRE / SL.RELEASE";
    snprintf(key, sizeof key, "%s:lease", prefix);
    r = redisCommand(c, "SL.ACQUIRE %s 1 60000", key);
    if (expect_type(r, REDIS_REPLY_STRING) && r->len == 0)
        fail("empty lease id");
    char lease[256] = "";
    if (r && r->type == REDIS_REPLY_STRING)
        snprintf(lease, sizeof lease, "%.*s", (int)r->len, r->str);
    freeReplyObject(r);
    r = redisCommand(c, "SL.ACQUIRE %s 1 60000", key);
    expect_type(r, REDIS_REPLY_NIL);
    freeReplyObject(r);
    for (int want = 1; want >= 0; want--) {
        r = redisCommand(c, "SL.RELEASE %s %s", key, lease);
        if (expect_type(r, REDIS_REPLY_INTEGER) && r->integer != want)
            fail("release: expected %d, got %lld", want, r->integer);
        freeReplyObject(r);
    }

    where = "errors";
    r = redisCommand(c, "CL.THROTTLE %s", key);
    expect_str(r, REDIS_REPLY_ERROR, "ERR wrong number of arguments for 'cl.throttle' command");
    freeReplyObject(r);
    r = redisCommand(c, "NOPE a");
    expect_str(r, REDIS_REPLY_ERROR, "ERR unknown command 'NOPE', with args beginning with: 'a' ");
    freeReplyObject(r);

    where = "pipeline of 1000 (redisAppendCommand)";
    snprintf(key, sizeof key, "%s:pipe", prefix);
    for (int i = 0; i < 1000; i++) {
        if (i % 2)
            redisAppendCommand(c, "ECHO %d", i);
        else
            redisAppendCommand(c, "CL.THROTTLE %s 999 1000 3600", key);
    }
    for (int i = 0; i < 1000 && !failures; i++) {
        if (redisGetReply(c, (void **)&r) != REDIS_OK) {
            fail("reply %d: %s", i, c->errstr);
            break;
        }
        if (i % 2) {
            char want[16];
            snprintf(want, sizeof want, "%d", i);
            expect_str(r, REDIS_REPLY_STRING, want);
        } else {
            const long long want[] = {0, 1000, 999 - i / 2, -1};
            if (expect_type(r, REDIS_REPLY_ARRAY) && r->elements == 5) {
                for (int k = 0; k < 4; k++)
                    if (r->element[k]->integer != want[k])
                        fail("reply %d element %d: expected %lld, got %lld", i, k, want[k],
                             r->element[k]->integer);
            }
        }
        freeReplyObject(r);
    }

    where = "QUIT";
    r = redisCommand(c, "QUIT");
    expect_str(r, REDIS_REPLY_STATUS, "OK");
    freeReplyObject(r);

    redisFree(c);
    if (failures) {
        fprintf(stderr, "hiredis_client: %d check(s) failed\n", failures);
        return 1;
    }
    printf("hiredis_client: all checks passed (hiredis %d.%d.%d, RESP2)\n", HIREDIS_MAJOR,
           HIREDIS_MINOR, HIREDIS_PATCH);
    return 0;
}
