/*
 * test_http_check.c: the /v1/check request decoder, from a query string and
 * from a JSON body: what it builds, and every error naming its field.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "proto/http.h"

#define NS_PER_SEC INT64_C(1000000000)
#define NS_PER_MS INT64_C(1000000)

/* The check is large: one per test, on the heap (zeroed: no make_limit), with
 * exact-size input copies. */
static sl_http_check *check_query(const char *q, int *rc)
{
    sl_http_check *c = calloc(1, sizeof *c);
    size_t n = strlen(q);
    char *copy = malloc(n ? n : 1);
    memcpy(copy, q, n);
    *rc = sl_http_check_from_query(c, copy, n);
    /* The check owns its strings: the input may go. */
    memset(copy, '#', n);
    free(copy);
    return c;
}

static sl_http_check *check_json(const char *body, int *rc)
{
    sl_http_check *c = calloc(1, sizeof *c);
    size_t n = strlen(body);
    char *copy = malloc(n ? n : 1);
    memcpy(copy, body, n);
    *rc = sl_http_check_from_json(c, copy, n);
    memset(copy, '#', n);
    free(copy);
    return c;
}

static void assert_key(const sl_http_check_item *it, const char *want)
{
    cr_assert_eq(it->keylen, strlen(want));
    cr_assert(memcmp(it->key, want, it->keylen) == 0, "key '%.*s', want '%s'", (int)it->keylen,
              it->key, want);
}

Test(http_check, query_ad_hoc)
{
    int rc;
    sl_http_check *c = check_query("key=user%3A42&limit=100&period=60", &rc);
    cr_assert_eq(rc, 0, "%s", c->errstr ? c->errstr : "");
    cr_assert_eq(c->n, 1);
    cr_assert(!c->multi);
    cr_assert_null(c->policy);
    assert_key(&c->items[0], "user:42");
    cr_assert_eq(c->items[0].cost, 1);
    cr_assert_eq(c->items[0].limit.algorithm, SL_GCRA);
    cr_assert_eq(c->items[0].limit.limit, 100);
    cr_assert_eq(c->items[0].limit.burst, 100);
    cr_assert_eq(c->items[0].limit.period_ns, 60 * NS_PER_SEC);
    free(c);

    c = check_query("algorithm=leaky_bucket&cost=0&burst=5&period=500ms&limit=10&key=a+b", &rc);
    cr_assert_eq(rc, 0, "%s", c->errstr ? c->errstr : "");
    assert_key(&c->items[0], "a b");
    cr_assert_eq(c->items[0].cost, 0);
    cr_assert_eq(c->items[0].limit.algorithm, SL_LEAKY_BUCKET);
    cr_assert_eq(c->items[0].limit.burst, 5);
    cr_assert_eq(c->items[0].limit.period_ns, 500 * NS_PER_MS);
    free(c);
}

Test(http_check, query_policy)
{
    int rc;
    sl_http_check *c = check_query("policy=api&key=k1&tier=paid&cost=3", &rc);
    cr_assert_eq(rc, 0, "%s", c->errstr ? c->errstr : "");
    cr_assert_eq(c->n, 1);
    cr_assert_eq(c->policy_len, 3);
    cr_assert(!memcmp(c->policy, "api", 3));
    cr_assert_eq(c->tier_len, 4);
    cr_assert(!memcmp(c->tier, "paid", 4));
    assert_key(&c->items[0], "k1");
    cr_assert_eq(c->items[0].cost, 3);
    free(c);
}

typedef struct err_case {
    const char *in;
    const char *errstr; /* a prefix of the message */
    const char *field;  /* NULL: none */
} err_case;

static void check_errors(const err_case *cases, size_t n, bool json)
{
    for (size_t i = 0; i < n; i++) {
        int rc;
        sl_http_check *c = json ? check_json(cases[i].in, &rc) : check_query(cases[i].in, &rc);
        cr_assert_eq(rc, -1, "case %zu (%s): accepted", i, cases[i].in);
        cr_assert_eq(c->status, 400, "case %zu", i);
        cr_assert(!strncmp(c->errstr, cases[i].errstr, strlen(cases[i].errstr)),
                  "case %zu (%s): '%s', want '%s...'", i, cases[i].in, c->errstr,
                  cases[i].errstr);
        if (cases[i].field)
            cr_assert(c->field && !strcmp(c->field, cases[i].field),
                      "case %zu (%s): field '%s', want '%s'", i, cases[i].in,
                      c->field ? c->field : "(null)", cases[i].field);
        else
            cr_assert_null(c->field, "case %zu: field '%s'", i, c->field);
        free(c);
    }
}

Test(http_check, query_errors)
{
    static const err_case cases[] = {
        {"limit=10&period=60", "key is required", "key"},
        {"key=&limit=10&period=60", "key must not be empty", "key"},
        {"key=a&period=60", "limit is required", "limit"},
        {"key=a&limit=10", "period is required", "period"},
        {"key=a&limit=ten&period=60", "limit must be an integer", "limit"},
        {"key=a&limit=99999999999999999999&period=60", "limit must be an integer", "limit"},
        {"key=a&limit=0&period=60", "limit must be a positive integer", "limit"},
        {"key=a&limit=-3&period=60", "limit must be a positive integer", "limit"},
        {"key=a&limit=10&period=soon", "period is not a duration", "period"},
        {"key=a&limit=10&period=0", "period must be a positive duration", "period"},
        {"key=a&limit=10&period=-1s", "period must be a positive duration", "period"},
        {"key=a&limit=10&period=60&burst=-1", "burst must be a positive integer", "burst"},
        {"key=a&limit=10&period=60&burst=0",
         "burst must be a positive integer of at most 2305843009213693951 (omit it for a burst "
         "of the limit)",
         "burst"},
        {"key=a&limit=10&period=60&burst=0&algorithm=sliding_log", "burst must be a positive",
         "burst"},
        {"key=a&limit=10&period=60&burst=2&burst=2", "burst is given twice", "burst"},
        {"key=a&limit=10&period=60&burst=x", "burst must be an integer", "burst"},
        {"key=a&limit=1&period=1d&burst=1000000000000", "burst * period / limit is too large",
         "burst"},
        {"key=a&limit=10&period=60&cost=-1", "cost must be a non-negative integer", "cost"},
        {"key=a&limit=10&period=60&cost=1.5", "cost must be an integer", "cost"},
        {"key=a&limit=10&period=60&algorithm=magic", "unknown algorithm 'magic'", "algorithm"},
        {"key=a&limit=10&period=60&algorithm=concurrency", "unknown algorithm 'concurrency'",
         "algorithm"},
        {"key=a&limit=10&period=60&limit=5", "limit is given twice", "limit"},
        {"key=a&limit=10&period=60&burts=5", "unknown parameter 'burts'", "burts"},
        {"key=a&limit=10&period=60&limits=5", "unknown parameter 'limits'", "limits"},
        {"key=%zz&limit=10&period=60", "bad %-escape in key", "key"},
        {"k%zz=1", "bad %-escape in a parameter name", NULL},
        {"key=a&policy=api&limit=10", "policy cannot be combined with limit", "limit"},
        {"key=a&policy=api&algorithm=gcra", "policy cannot be combined with algorithm",
         "algorithm"},
        {"key=a&limit=10&period=60&tier=paid", "tier needs a policy", "tier"},
        {"key=a&policy=", "policy must not be empty", "policy"},
        {"key=a&policy=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
         "policy is longer than 64 bytes", "policy"},
        {"key=a&limit=100000&period=1s&algorithm=sliding_log",
         "limit must be a positive integer", "limit"},
    };
    check_errors(cases, sizeof cases / sizeof cases[0], false);
}

Test(http_check, no_query_string)
{
    /* GET /v1/check without a '?': the parser's query slice is NULL and 0. */
    sl_http_check *c = calloc(1, sizeof *c);
    cr_assert_eq(sl_http_check_from_query(c, NULL, 0), -1);
    cr_assert_str_eq(c->errstr, "key is required");
    cr_assert_eq(sl_http_check_auth(c, "api", 3, "k", 1, "X-Api-Key", NULL, 0), 0);
    free(c);
}

Test(http_check, forward_auth)
{
    sl_http_check *c = calloc(1, sizeof *c);
    cr_assert_eq(sl_http_check_auth(c, "api", 3, "abc123", 6, "X-Api-Key", "tier=paid&cost=2", 16),
                 0, "%s", c->errstr);
    cr_assert_eq(c->policy_len, 3);
    cr_assert(!memcmp(c->policy, "api", 3));
    cr_assert_eq(c->tier_len, 4);
    assert_key(&c->items[0], "abc123");
    cr_assert_eq(c->items[0].cost, 2);

    cr_assert_eq(sl_http_check_auth(c, "api", 3, "k", 1, "X-Api-Key", "", 0), 0);
    cr_assert_null(c->tier);
    cr_assert_eq(c->items[0].cost, 1);

    cr_assert_eq(sl_http_check_auth(c, "api", 3, "", 0, "X-Api-Key", "", 0), -1);
    cr_assert_eq(c->status, 401);
    cr_assert_str_eq(c->errstr, "missing X-Api-Key header");
    cr_assert_str_eq(c->field, "X-Api-Key");

    cr_assert_eq(sl_http_check_auth(c, "api", 3, "k", 1, "X-Api-Key", "limit=5", 7), -1);
    cr_assert_eq(c->status, 400);
    cr_assert_str_eq(c->field, "limit");
    cr_assert_str_eq(c->errstr, "unknown parameter 'limit'");

    cr_assert_eq(sl_http_check_auth(c, "", 0, "k", 1, "X-Api-Key", "", 0), -1);
    cr_assert_str_eq(c->field, "policy");

    cr_assert_eq(sl_http_check_auth(c, "api", 3, "k", 1, "X-Api-Key", "cost=-1", 7), -1);
    cr_assert_str_eq(c->field, "cost");

    char *big = malloc(SL_HTTP_KEY_MAX + 1);
    memset(big, 'k', SL_HTTP_KEY_MAX + 1);
    cr_assert_eq(sl_http_check_auth(c, "api", 3, big, SL_HTTP_KEY_MAX + 1, "Authorization", "", 0),
                 -1);
    cr_assert_eq(c->status, 400);
    cr_assert_str_eq(c->field, "Authorization");
    free(big);
    free(c);
}

Test(http_check, query_key_too_long)
{
    size_t n = SL_HTTP_KEY_MAX + 1;
    char *q = malloc(n + 32);
    strcpy(q, "limit=1&period=1&key=");
    size_t off = strlen(q);
    memset(q + off, 'k', n);
    q[off + n] = '\0';
    int rc;
    sl_http_check *c = check_query(q, &rc);
    cr_assert_eq(rc, -1);
    cr_assert_str_eq(c->field, "key");
    cr_assert_str_eq(c->errstr, "key is longer than 1024 bytes");
    free(c);
    q[off + n - 1] = '\0'; /* exactly the cap */
    c = check_query(q, &rc);
    cr_assert_eq(rc, 0, "%s", c->errstr);
    cr_assert_eq(c->items[0].keylen, SL_HTTP_KEY_MAX);
    free(c);
    /* A number longer than the decode buffer is still "not an integer". */
    strcpy(q, "key=a&period=1&limit=");
    off = strlen(q);
    memset(q + off, '1', n);
    q[off + n] = '\0';
    c = check_query(q, &rc);
    cr_assert_eq(rc, -1);
    cr_assert_str_eq(c->errstr, "limit must be an integer");
    cr_assert_str_eq(c->field, "limit");
    free(c);
    strcpy(q, "key=a&limit=1&period=");
    memset(q + off, '1', n);
    q[off + n] = '\0';
    c = check_query(q, &rc);
    cr_assert_eq(rc, -1);
    cr_assert_str_eq(c->field, "period");
    free(c);
    free(q);
}

Test(http_check, json_ad_hoc_and_policy)
{
    int rc;
    sl_http_check *c = check_json(
        " {\"key\":\"u\\\"1\",\"limit\":5,\"period\":\"2m\",\"burst\":2,\"cost\":2,"
        "\"algorithm\":\"token_bucket\"}\n",
        &rc);
    cr_assert_eq(rc, 0, "%s", c->errstr ? c->errstr : "");
    assert_key(&c->items[0], "u\"1");
    cr_assert_eq(c->items[0].limit.algorithm, SL_TOKEN_BUCKET);
    cr_assert_eq(c->items[0].limit.period_ns, 120 * NS_PER_SEC);
    cr_assert_eq(c->items[0].limit.burst, 2);
    cr_assert_eq(c->items[0].cost, 2);
    free(c);

    c = check_json("{\"key\":\"k\",\"limit\":5,\"period\":30}", &rc);
    cr_assert_eq(rc, 0, "%s", c->errstr ? c->errstr : "");
    cr_assert_eq(c->items[0].limit.period_ns, 30 * NS_PER_SEC);
    free(c);

    c = check_json("{\"policy\":\"api\",\"tier\":\"free\",\"key\":\"k\"}", &rc);
    cr_assert_eq(rc, 0, "%s", c->errstr ? c->errstr : "");
    cr_assert_eq(c->policy_len, 3);
    cr_assert_eq(c->tier_len, 4);
    cr_assert_eq(c->items[0].cost, 1);
    free(c);
}

Test(http_check, json_multi)
{
    int rc;
    sl_http_check *c = check_json(
        "{\"limits\":[{\"key\":\"user:1\",\"limit\":100,\"period\":60},"
        "{\"key\":\"global\",\"limit\":50000,\"period\":\"1m\",\"algorithm\":\"sliding_window\","
        "\"cost\":1}]}",
        &rc);
    cr_assert_eq(rc, 0, "%s", c->errstr ? c->errstr : "");
    cr_assert(c->multi);
    cr_assert_eq(c->n, 2);
    assert_key(&c->items[0], "user:1");
    assert_key(&c->items[1], "global");
    cr_assert_eq(c->items[1].limit.algorithm, SL_SLIDING_WINDOW);
    cr_assert_eq(c->items[1].limit.limit, 50000);
    free(c);

    /* Eight entries with keys at the cap fit. */
    size_t cap = 8 * (SL_HTTP_KEY_MAX + 64) + 64;
    char *body = malloc(cap), *key = malloc(SL_HTTP_KEY_MAX + 1);
    memset(key, 'k', SL_HTTP_KEY_MAX);
    key[SL_HTTP_KEY_MAX] = '\0';
    size_t n = (size_t)sprintf(body, "{\"limits\":[");
    for (int i = 0; i < 8; i++)
        n += (size_t)sprintf(body + n, "%s{\"key\":\"%s\",\"limit\":1,\"period\":1}", i ? "," : "",
                             key);
    sprintf(body + n, "]}");
    c = check_json(body, &rc);
    cr_assert_eq(rc, 0, "%s", c->errstr ? c->errstr : "");
    cr_assert_eq(c->n, 8);
    cr_assert_eq(c->items[7].keylen, SL_HTTP_KEY_MAX);
    free(c);
    free(body);
    free(key);
}

Test(http_check, json_errors)
{
    static const err_case cases[] = {
        {"", "body is empty", NULL},
        {"[1]", "body must be a JSON object", NULL},
        {"\"key\"", "body must be a JSON object", NULL},
        {"{\"key\":", "body is not valid JSON", NULL},
        {"{\"key\":\"a\",}", "body is not valid JSON", NULL},
        {"{\"key\":\"a\",\"limit\":1,\"period\":1} x", "body is not valid JSON: bytes after", NULL},
        {"{\"key\":\"a\\u0000b\",\"limit\":1,\"period\":1}", "strings must not contain", NULL},
        {"{\"key\":\"a\tb\",\"limit\":1,\"period\":1}", "control byte in a string", NULL},
        {"{\"limits\":[{\"key\":{\"x\":[1]}}]}", "body is nested too deeply", NULL},
        {"{\"limit\":1,\"period\":1}", "key is required", "key"},
        {"{\"key\":5,\"limit\":1,\"period\":1}", "key must be a string", "key"},
        {"{\"key\":\"\",\"limit\":1,\"period\":1}", "key must not be empty", "key"},
        {"{\"key\":\"a\",\"key\":\"b\",\"limit\":1,\"period\":1}", "key is given twice", "key"},
        {"{\"key\":\"a\",\"limit\":\"10\",\"period\":1}", "limit must be an integer", "limit"},
        {"{\"key\":\"a\",\"limit\":1.5,\"period\":1}", "limit must be an integer", "limit"},
        {"{\"key\":\"a\",\"limit\":1e300,\"period\":1}", "limit must be an integer", "limit"},
        {"{\"key\":\"a\",\"limit\":null,\"period\":1}", "limit must be an integer", "limit"},
        {"{\"key\":\"a\",\"limit\":0,\"period\":1}", "limit must be a positive integer", "limit"},
        {"{\"key\":\"a\",\"limit\":1}", "period is required", "period"},
        {"{\"key\":\"a\",\"limit\":1,\"period\":0}", "period must be a positive duration",
         "period"},
        {"{\"key\":\"a\",\"limit\":1,\"period\":0.5}", "period must be an integer of seconds",
         "period"},
        {"{\"key\":\"a\",\"limit\":1,\"period\":true}", "period must be an integer of seconds",
         "period"},
        {"{\"key\":\"a\",\"limit\":1,\"period\":\"1 minute\"}", "period is not a duration",
         "period"},
        {"{\"key\":\"a\",\"limit\":1,\"period\":9999999999999}",
         "period must be a positive duration", "period"},
        {"{\"key\":\"a\",\"limit\":1,\"period\":1,\"burst\":-2}", "burst must be a positive",
         "burst"},
        {"{\"key\":\"a\",\"limit\":1,\"period\":1,\"cost\":-1}", "cost must be a non-negative",
         "cost"},
        {"{\"key\":\"a\",\"limit\":1,\"period\":1,\"algorithm\":\"GCRAX\"}",
         "unknown algorithm 'GCRAX'", "algorithm"},
        {"{\"key\":\"a\",\"limit\":012,\"period\":1}",
         "limit must not have leading zeros (at byte 19)", "limit"},
        {"{\"key\":\"a\", \"limit\" : 1, \"period\": -05}", "period must not have leading zeros",
         "period"},
        {"{\"key\":\"a\",\"limit\":1,\"period\":1,\"cost\":00}", "cost must not have leading zeros",
         "cost"},
        {"{\"limits\":[{\"key\":\"a\",\"limit\":007,\"period\":1}]}",
         "limit must not have leading zeros", "limits[0].limit"},
        {"{\"limits\":[{\"key\":\"a\",\"limit\":7,\"period\":1}, {\"key\":\"b\",\"limit\":1,"
         "\"period\":1,\"cost\":01}]}",
         "cost must not have leading zeros", "limits[1].cost"},
        {"{\"limit\":[1,2,01]}", "limit must not have leading zeros", "limit"},
        {"{\"key\":\"a\",\"limit\":1,\"period\":1,\"burst\":0}",
         "burst must be a positive integer of at most 2305843009213693951 (omit it for a burst "
         "of the limit)",
         "burst"},
        {"{\"limits\":[{\"key\":\"a\",\"limit\":1,\"period\":1,\"burst\":0}]}",
         "burst must be a positive integer", "limits[0].burst"},
        {"{\"key\":\"a\",\"limit\":1,\"period\":1,\"algorithm\":7}", "algorithm must be a string",
         "algorithm"},
        {"{\"key\":\"a\",\"limit\":1,\"period\":1,\"colour\":\"red\"}", "unknown field 'colour'",
         "colour"},
        {"{\"key\":\"a\",\"policy\":\"p\",\"period\":1}", "policy cannot be combined with period",
         "period"},
        {"{\"key\":\"a\",\"policy\":\"p\",\"burst\":1}", "policy cannot be combined with burst",
         "burst"},
        {"{\"key\":\"a\",\"tier\":\"t\",\"limit\":1,\"period\":1}", "tier needs a policy", "tier"},
        {"{\"key\":\"a\",\"policy\":5}", "policy must be a string", "policy"},
        {"{\"policy\":\"p\"}", "key is required", "key"},
        {"{\"limits\":{}}", "limits must be an array", "limits"},
        {"{\"limits\":[]}", "limits must not be empty", "limits"},
        {"{\"limits\":[{},{},{},{},{},{},{},{},{}]}", "limits has 9 entries: at most 8", "limits"},
        {"{\"limits\":[{\"key\":\"a\",\"limit\":1,\"period\":1}],\"key\":\"b\"}",
         "limits cannot be combined with key", "key"},
        {"{\"cost\":1,\"limits\":[{\"key\":\"a\",\"limit\":1,\"period\":1}]}",
         "limits cannot be combined with cost", "cost"},
        {"{\"limits\":[{\"key\":\"a\",\"limit\":1,\"period\":1},7]}", "limits[1] must be an object",
         "limits[1]"},
        {"{\"limits\":[{\"key\":\"a\",\"limit\":1,\"period\":1},{\"key\":\"b\",\"limit\":1}]}",
         "period is required", "limits[1].period"},
        {"{\"limits\":[{\"key\":\"a\",\"limit\":1,\"period\":1,\"policy\":\"p\"}]}",
         "unknown field 'policy'", "limits[0].policy"},
        {"{\"limits\":[{\"limit\":1,\"period\":1}]}", "key is required", "limits[0].key"},
        {"{\"limits\":[{\"key\":\"a\",\"limit\":1,\"period\":1,\"algorithm\":\"x\"}]}",
         "unknown algorithm 'x'", "limits[0].algorithm"},
    };
    check_errors(cases, sizeof cases / sizeof cases[0], true);
}

Test(http_check, json_numbers_zeros_and_case_that_are_fine)
{
    int rc;
    /* 0 itself, zeros after the first digit or in an exponent or a
     * fraction, and digits inside strings are all fine. */
    sl_http_check *c = check_json("{\"key\":\"012\",\"limit\":100,\"period\":1.0e01,"
                                  "\"cost\":0,\"burst\":10,\"algorithm\":\"Token_Bucket\"}",
                                  &rc);
    cr_assert_eq(rc, 0, "%s", c->errstr ? c->errstr : "");
    assert_key(&c->items[0], "012");
    cr_assert_eq(c->items[0].limit.limit, 100);
    cr_assert_eq(c->items[0].limit.period_ns, 10 * NS_PER_SEC);
    cr_assert_eq(c->items[0].limit.burst, 10);
    cr_assert_eq(c->items[0].limit.algorithm, SL_TOKEN_BUCKET);
    cr_assert_eq(c->items[0].cost, 0);
    free(c);
    c = check_query("key=a&limit=5&period=1&algorithm=GCRA", &rc);
    cr_assert_eq(rc, 0, "%s", c->errstr ? c->errstr : "");
    cr_assert_eq(c->items[0].limit.algorithm, SL_GCRA);
    free(c);
}

Test(http_check, keys_longer_than_the_stores_are_refused_naming_it)
{
    sl_http_check *c = calloc(1, sizeof *c);
    c->max_key = 8;
    cr_assert_eq(sl_http_check_from_query(c, "key=123456789&limit=1&period=1", 30), -1);
    cr_assert_str_eq(c->errstr, "key is longer than 8 bytes");
    cr_assert_str_eq(c->field, "key");
    static const char body[] = "{\"key\":\"123456789\",\"limit\":1,\"period\":1}";
    cr_assert_eq(sl_http_check_from_json(c, body, sizeof body - 1), -1);
    cr_assert_str_eq(c->errstr, "key is longer than 8 bytes");
    cr_assert_eq(sl_http_check_from_query(c, "key=12345678&limit=1&period=1", 29), 0, "%s",
                 c->errstr);
    cr_assert_eq(sl_http_check_auth(c, "api", 3, "123456789", 9, "X-Api-Key", "", 0), -1);
    cr_assert_str_eq(c->errstr, "X-Api-Key is longer than 8 bytes");
    free(c);
}

Test(http_check, json_too_large_is_413)
{
    size_t n = SL_HTTP_MAX_JSON + 1;
    char *body = malloc(n + 1);
    memset(body, ' ', n);
    body[0] = '{';
    body[n - 1] = '}';
    body[n] = '\0';
    int rc;
    sl_http_check *c = check_json(body, &rc);
    cr_assert_eq(rc, -1);
    cr_assert_eq(c->status, 413);
    free(c);
    free(body);
}

Test(http_check, json_deep_nesting_refused_before_cjson)
{
    /* 100 000 brackets would make cJSON recurse; the prescan refuses at depth 4. */
    size_t n = 60000;
    char *body = malloc(n + 1);
    memset(body, '[', n);
    body[n] = '\0';
    int rc;
    sl_http_check *c = check_json(body, &rc);
    cr_assert_eq(rc, -1);
    cr_assert_str_eq(c->errstr, "body is nested too deeply");
    free(c);
    free(body);
}

/* A server's make_limit is asked for every ad-hoc limit with the parameters
 * sl_limit_init would get, never for a policy, and its errors name the fields
 * as sl_limit_init's do. */
static int hook_calls;

static int counting_limit(void *ctx, sl_limit *out, sl_algorithm algorithm, int64_t limit,
                          int64_t period_ns, int64_t burst, int64_t months, int64_t reset_day,
                          int64_t utc_offset_ns)
{
    cr_assert_eq(ctx, &hook_calls);
    hook_calls++;
    return sl_limit_init(out, algorithm, limit, period_ns, burst);
}

static int decode_query(sl_http_check *c, const char *q)
{
    return sl_http_check_from_query(c, q, strlen(q));
}

Test(http_check, make_limit_hook)
{
    sl_http_check *c = calloc(1, sizeof *c);
    c->make_limit = counting_limit;
    c->make_limit_ctx = &hook_calls;
    hook_calls = 0;
    cr_assert_eq(decode_query(c, "key=a&limit=10&period=500ms&burst=3&algorithm=token_bucket"), 0);
    cr_assert_eq(hook_calls, 1);
    cr_assert_eq(c->items[0].limit.algorithm, SL_TOKEN_BUCKET);
    cr_assert_eq(c->items[0].limit.limit, 10);
    cr_assert_eq(c->items[0].limit.period_ns, 500 * NS_PER_MS);
    cr_assert_eq(c->items[0].limit.burst, 3);

    const char *body = "{\"limits\":[{\"key\":\"a\",\"limit\":1,\"period\":1},"
                       "{\"key\":\"b\",\"limit\":2,\"period\":\"2m\"}]}";
    cr_assert_eq(sl_http_check_from_json(c, body, strlen(body)), 0, "%s", c->errstr);
    cr_assert_eq(hook_calls, 3);
    cr_assert_eq(c->items[1].limit.period_ns, 120 * NS_PER_SEC);

    cr_assert_eq(decode_query(c, "key=a&policy=api"), 0);
    cr_assert_eq(hook_calls, 3);

    cr_assert_eq(decode_query(c, "key=a&limit=0&period=1"), -1);
    cr_assert_eq(hook_calls, 4);
    cr_assert_str_eq(c->field, "limit");
    cr_assert_str_eq(c->errstr, sl_strerror(SL_ERR_LIMIT));
    free(c);
}

/* Through sluiced's cache (sl_limit_cached, shared with RESP): a limit
 * served from the cache is the one sl_limit_init builds, for limits that
 * share slots and for a failed one between them. */
static int cached_limit(void *ctx, sl_limit *out, sl_algorithm algorithm, int64_t limit,
                        int64_t period_ns, int64_t burst, int64_t months, int64_t reset_day,
                        int64_t utc_offset_ns)
{
    const sl_limit *l;
    int rc = sl_limit_cached(ctx, algorithm, limit, period_ns, burst, months, reset_day,
                             utc_offset_ns, &l);
    if (rc == SL_OK)
        *out = *l;
    return rc;
}

Test(http_check, limits_through_the_cache)
{
    sl_limit_cache *cache = calloc(1, sizeof *cache);
    sl_http_check *c = calloc(1, sizeof *c);
    c->make_limit = cached_limit;
    c->make_limit_ctx = cache;
    static const char *algos[] = {"gcra", "token_bucket", "leaky_bucket", "sliding_window"};
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 200; i++) {
            char q[128];
            const char *algo = algos[i % 4];
            int64_t limit = 1 + i % 37, period_ms = 1 + i % 53 * 250, burst = 1 + i % 5;
            snprintf(q, sizeof q, "key=k&limit=%lld&period=%lldms&burst=%lld&algorithm=%s",
                     (long long)limit, (long long)period_ms, (long long)burst, algo);
            cr_assert_eq(decode_query(c, q), 0, "%s: %s", q, c->errstr);
            sl_limit want;
            cr_assert_eq(sl_limit_init(&want, c->items[0].limit.algorithm, limit,
                                       period_ms * NS_PER_MS, burst), SL_OK);
            const sl_limit *got = &c->items[0].limit;
            cr_assert(got->algorithm == want.algorithm && got->limit == want.limit &&
                          got->period_ns == want.period_ns && got->burst == want.burst &&
                          got->interval_ns == want.interval_ns &&
                          got->interval_frac == want.interval_frac &&
                          got->tolerance_ns == want.tolerance_ns &&
                          got->tolerance_frac == want.tolerance_frac,
                      "%s", q);
            /* A refused limit in between is not cached as valid. */
            cr_assert_eq(decode_query(c, "key=k&limit=1&period=1d&burst=1000000000000"), -1);
            cr_assert_str_eq(c->field, "burst");
        }
    }
    free(c);
    free(cache);
}

/* A window's UTC offset and calendar months, in the query and the body, and
 * through the cache: limits that differ only in their offset or their months
 * are two limits, aligned on the cache's clock. */
Test(http_check, utc_offset_and_months)
{
    sl_limit_cache *cache = calloc(1, sizeof *cache);
    cache->clock_offset_ns = 1000 * NS_PER_SEC;
    sl_http_check *c = calloc(1, sizeof *c);
    c->make_limit = cached_limit;
    c->make_limit_ctx = cache;
    cr_assert_eq(decode_query(c, "key=k&limit=5&period=1d&algorithm=fixed_window"), 0);
    cr_assert_eq(c->items[0].limit.utc_offset_ns, 0);
    cr_assert_eq(c->items[0].limit.local_offset_ns, 1000 * NS_PER_SEC);
    cr_assert_eq(decode_query(c, "key=k&limit=5&period=1d&algorithm=fixed_window"
                                 "&utc_offset=-05:00"), 0, "%s", c->errstr);
    cr_assert_eq(c->items[0].limit.utc_offset_ns, -5 * 3600 * NS_PER_SEC);
    cr_assert_eq(c->items[0].limit.local_offset_ns, (1000 - 5 * 3600) * NS_PER_SEC);
    cr_assert_eq(decode_query(c, "key=k&limit=5&period=1d&algorithm=fixed_window"
                                 "&utc_offset=%2B0530"), 0, "%s", c->errstr);
    cr_assert_eq(c->items[0].limit.utc_offset_ns, 330 * 60 * NS_PER_SEC);
    cr_assert_eq(decode_query(c, "key=k&limit=5&period=1d&algorithm=fixed_window"), 0);
    cr_assert_eq(c->items[0].limit.utc_offset_ns, 0);

    const char *body = "{\"key\":\"a\",\"limit\":3,\"period\":\"3mo\","
                       "\"algorithm\":\"sliding_window\",\"utc_offset\":\"+14:00\"}";
    cr_assert_eq(sl_http_check_from_json(c, body, strlen(body)), 0, "%s", c->errstr);
    cr_assert_eq(c->items[0].limit.months, 3);
    cr_assert_eq(c->items[0].limit.period_ns, 3 * SL_MONTH_NS);
    cr_assert_eq(c->items[0].limit.utc_offset_ns, 14 * 3600 * NS_PER_SEC);
    cr_assert_eq(decode_query(c, "key=k&limit=5&period=1w&algorithm=fixed_window"), 0);
    cr_assert_eq(c->items[0].limit.months, 0);
    cr_assert_eq(c->items[0].limit.period_ns, 7 * 86400 * NS_PER_SEC);

    static const struct {
        const char *q, *err, *field;
    } bad[] = {
        {"key=k&limit=5&period=1d&utc_offset=05:00", "utc_offset must be", "utc_offset"},
        {"key=k&limit=5&period=1d&utc_offset=%2B19:00", "utc_offset must be", "utc_offset"},
        {"key=k&limit=5&period=1d&utc_offset=-05:60", "utc_offset must be", "utc_offset"},
        {"key=k&limit=5&period=1mo&algorithm=sliding_log", "sliding_log cannot count calendar",
         "period"},
        {"key=k&policy=api&utc_offset=Z", "policy cannot be combined with utc_offset",
         "utc_offset"},
        {"key=k&limit=5&period=1month", "period is not a duration", "period"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(decode_query(c, bad[i].q), -1, "%s", bad[i].q);
        cr_assert(strstr(c->errstr, bad[i].err), "%s: %s", bad[i].q, c->errstr);
        cr_assert_str_eq(c->field, bad[i].field, "%s", bad[i].q);
    }
    const char *num = "{\"key\":\"a\",\"limit\":3,\"period\":60,\"utc_offset\":5}";
    cr_assert_eq(sl_http_check_from_json(c, num, strlen(num)), -1);
    cr_assert_str_eq(c->field, "utc_offset");
    free(c);
    free(cache);
}
