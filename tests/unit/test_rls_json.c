/*
 * test_rls_json.c: the proto3 JSON of Envoy's rate limit messages
 * (src/proto/rls_json.c): a request in JSON decodes to exactly what its
 * protobuf bytes decode to, under either name style and every integer form
 * protojson takes; each refusal names the field where it is; the bounds are
 * those of sl_rls_request_decode, and the body has its own; failed
 * allocations are "out of memory"; a response is written as
 * protojson.Marshal writes it, compared as text.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "envoy/service/ratelimit/v3/rls.pb-c.h"
#include "proto/rls.h"
#include "proto/rls_json.h"

typedef Envoy__Service__Ratelimit__V3__RateLimitRequest pb_request;
typedef Envoy__Extensions__Common__Ratelimit__V3__RateLimitDescriptor pb_descriptor;
typedef Envoy__Extensions__Common__Ratelimit__V3__RateLimitDescriptor__Entry pb_entry;
typedef Envoy__Extensions__Common__Ratelimit__V3__RateLimitDescriptor__RateLimitOverride
    pb_override;

static int from_json(sl_rls_request *r, const char *body, const sl_rls_bounds *b, char *err,
                     size_t errlen)
{
    return sl_rls_request_from_json(r, body, strlen(body), b, err, errlen);
}

/* body must decode; the caller frees *r. */
static void decode_ok(sl_rls_request *r, const char *body)
{
    char err[256] = "";
    int rc = from_json(r, body, NULL, err, sizeof err);
    cr_assert_eq(rc, SL_RLS_OK, "%s: rc %d, %s", body, rc, err);
}

/* body must be refused with rc and exactly msg. */
static void refused(const char *body, int rc, const char *msg)
{
    sl_rls_request r;
    char err[256] = "";
    int got = from_json(&r, body, NULL, err, sizeof err);
    cr_assert_eq(got, rc, "%s: rc %d (%s), expected %d", body, got, err, rc);
    cr_assert_str_eq(err, msg, "%s", body);
    cr_assert_null(r.owner_);
    cr_assert_eq(r.n_descriptors, 0);
}

static bool same_str(sl_rls_str s, const char *t)
{
    return s.n == strlen(t) && memcmp(s.p, t, s.n) == 0;
}

static void assert_same(const sl_rls_request *a, const sl_rls_request *b)
{
    cr_assert_eq(a->domain.n, b->domain.n);
    cr_assert(memcmp(a->domain.p, b->domain.p, a->domain.n) == 0);
    cr_assert_eq(a->hits_addend, b->hits_addend);
    cr_assert_eq(a->n_descriptors, b->n_descriptors);
    for (size_t i = 0; i < a->n_descriptors; i++) {
        const sl_rls_descriptor *x = &a->descriptors[i], *y = &b->descriptors[i];
        cr_assert_eq(x->n_entries, y->n_entries);
        cr_assert_eq(x->has_limit, y->has_limit);
        cr_assert_eq(x->limit_requests_per_unit, y->limit_requests_per_unit);
        cr_assert_eq(x->limit_unit, y->limit_unit);
        cr_assert_eq(x->has_hits_addend, y->has_hits_addend);
        cr_assert_eq(x->hits_addend, y->hits_addend);
        for (size_t j = 0; j < x->n_entries; j++) {
            cr_assert_eq(x->entries[j].key.n, y->entries[j].key.n);
            cr_assert(memcmp(x->entries[j].key.p, y->entries[j].key.p, x->entries[j].key.n) == 0);
            cr_assert_eq(x->entries[j].value.n, y->entries[j].value.n);
            cr_assert(memcmp(x->entries[j].value.p, y->entries[j].value.p,
                             x->entries[j].value.n) == 0);
        }
    }
}

/* The sample request, packed by the generated code: domain "edge";
 * [("remote_address","10.0.0.1")]; [("user","u1"),("path","/api")] with
 * limit 5/MINUTE and hits_addend 3; request hits_addend 2. */
static uint8_t *pack_sample(size_t *len)
{
    pb_entry e[3];
    pb_entry *ep[3] = {&e[0], &e[1], &e[2]};
    for (int i = 0; i < 3; i++)
        envoy__extensions__common__ratelimit__v3__rate_limit_descriptor__entry__init(&e[i]);
    e[0].key = "remote_address";
    e[0].value = "10.0.0.1";
    e[1].key = "user";
    e[1].value = "u1";
    e[2].key = "path";
    e[2].value = "/api";
    pb_override ov;
    envoy__extensions__common__ratelimit__v3__rate_limit_descriptor__rate_limit_override__init(&ov);
    ov.requests_per_unit = 5;
    ov.unit = ENVOY__TYPE__V3__RATE_LIMIT_UNIT__MINUTE;
    Google__Protobuf__UInt64Value h;
    google__protobuf__uint64_value__init(&h);
    h.value = 3;
    pb_descriptor d[2];
    pb_descriptor *dp[2] = {&d[0], &d[1]};
    envoy__extensions__common__ratelimit__v3__rate_limit_descriptor__init(&d[0]);
    envoy__extensions__common__ratelimit__v3__rate_limit_descriptor__init(&d[1]);
    d[0].n_entries = 1;
    d[0].entries = ep;
    d[1].n_entries = 2;
    d[1].entries = ep + 1;
    d[1].limit = &ov;
    d[1].hits_addend = &h;
    pb_request m = ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_REQUEST__INIT;
    m.domain = "edge";
    m.n_descriptors = 2;
    m.descriptors = dp;
    m.hits_addend = 2;
    *len = envoy__service__ratelimit__v3__rate_limit_request__get_packed_size(&m);
    uint8_t *buf = malloc(*len);
    cr_assert(buf);
    envoy__service__ratelimit__v3__rate_limit_request__pack(&m, buf);
    return buf;
}

static const char camel[] =
    "{\"domain\": \"edge\", \"descriptors\": ["
    "{\"entries\": [{\"key\": \"remote_address\", \"value\": \"10.0.0.1\"}]},"
    "{\"entries\": [{\"key\": \"user\", \"value\": \"u1\"}, {\"key\": \"path\", \"value\": "
    "\"/api\"}],"
    " \"limit\": {\"requestsPerUnit\": 5, \"unit\": \"MINUTE\"}, \"hitsAddend\": 3}],"
    " \"hitsAddend\": 2}";

static const char snake[] =
    "{\"hits_addend\":\"2\",\"descriptors\":["
    "{\"entries\":[{\"value\":\"10.0.0.1\",\"key\":\"remote_address\"}],\"limit\":null},"
    "{\"hits_addend\":\"3\",\"limit\":{\"unit\":2,\"requests_per_unit\":\"5\"},"
    "\"entries\":[{\"key\":\"user\",\"value\":\"u1\"},{\"key\":\"path\",\"value\":\"/api\"}]}],"
    "\"domain\":\"edge\"}";

Test(rls_json, a_request_decodes_as_its_protobuf_bytes_do)
{
    size_t len;
    uint8_t *wire = pack_sample(&len);
    sl_rls_request want, got;
    char err[256];
    cr_assert_eq(sl_rls_request_decode(&want, wire, len, NULL, err, sizeof err), SL_RLS_OK);
    decode_ok(&got, camel);
    assert_same(&got, &want);
    cr_assert(same_str(got.domain, "edge"));
    cr_assert(got.descriptors[1].has_limit && got.descriptors[1].limit_unit == SL_RLS_UNIT_MINUTE);
    cr_assert(got.descriptors[1].has_hits_addend && got.descriptors[1].hits_addend == 3);
    cr_assert_not(got.descriptors[0].has_limit);
    cr_assert_not(got.descriptors[0].has_hits_addend);
    sl_rls_request_free(&got);
    decode_ok(&got, snake);
    assert_same(&got, &want);
    sl_rls_request_free(&got);
    sl_rls_request_free(&want);
    free(wire);
}

Test(rls_json, absent_and_null_fields_are_defaults)
{
    sl_rls_request r;
    decode_ok(&r, "{}");
    cr_assert(same_str(r.domain, ""));
    cr_assert_eq(r.n_descriptors, 0);
    cr_assert_eq(r.hits_addend, 0);
    sl_rls_request_free(&r);

    decode_ok(&r, " {\"domain\":null,\"descriptors\":null,\"hitsAddend\":null} \n");
    cr_assert_eq(r.n_descriptors, 0);
    sl_rls_request_free(&r);

    decode_ok(&r, "{\"descriptors\":[{},{\"entries\":[{}],\"hitsAddend\":null,"
                  "\"limit\":{}}]}");
    cr_assert_eq(r.n_descriptors, 2);
    cr_assert_eq(r.descriptors[0].n_entries, 0);
    cr_assert_eq(r.descriptors[1].n_entries, 1);
    cr_assert(same_str(r.descriptors[1].entries[0].key, ""));
    cr_assert_not(r.descriptors[1].has_hits_addend);
    /* An empty override is still an override, of 0 UNKNOWN. */
    cr_assert(r.descriptors[1].has_limit);
    cr_assert_eq(r.descriptors[1].limit_unit, SL_RLS_UNIT_UNKNOWN);
    sl_rls_request_free(&r);

    /* A hits_addend of 0 is set: the wrapper is there. */
    decode_ok(&r, "{\"descriptors\":[{\"hitsAddend\":0}]}");
    cr_assert(r.descriptors[0].has_hits_addend);
    cr_assert_eq(r.descriptors[0].hits_addend, 0);
    sl_rls_request_free(&r);
}

/* The request's hits_addend read from text. */
static uint32_t top_hits(const char *value)
{
    char body[128];
    snprintf(body, sizeof body, "{\"hitsAddend\":%s}", value);
    sl_rls_request r;
    decode_ok(&r, body);
    uint32_t v = r.hits_addend;
    sl_rls_request_free(&r);
    return v;
}

static uint64_t descriptor_hits(const char *value)
{
    char body[160];
    snprintf(body, sizeof body, "{\"descriptors\":[{\"hitsAddend\":%s}]}", value);
    sl_rls_request r;
    decode_ok(&r, body);
    uint64_t v = r.descriptors[0].hits_addend;
    sl_rls_request_free(&r);
    return v;
}

Test(rls_json, integers_in_every_form_protojson_takes)
{
    cr_assert_eq(top_hits("7"), 7);
    cr_assert_eq(top_hits("\"7\""), 7);
    cr_assert_eq(top_hits("7.0"), 7);
    cr_assert_eq(top_hits("0.7e1"), 7);
    cr_assert_eq(top_hits("700e-2"), 7);
    cr_assert_eq(top_hits("\"7E0\""), 7);
    cr_assert_eq(top_hits("-0"), 0);
    cr_assert_eq(top_hits("4294967295"), 4294967295u);
    cr_assert_eq(descriptor_hits("18446744073709551615"), UINT64_MAX);
    cr_assert_eq(descriptor_hits("\"18446744073709551615\""), UINT64_MAX);
    cr_assert_eq(descriptor_hits("9007199254740993"), 9007199254740993ull); /* not a double */
    cr_assert_eq(descriptor_hits("1.8446744073709551615e19"), UINT64_MAX);
}

Test(rls_json, integers_that_are_not_refused)
{
    const char *msg = "hitsAddend: not an unsigned 32-bit integer (a number or a string of one)";
    refused("{\"hitsAddend\":4294967296}", SL_RLS_EMALFORMED, msg);
    refused("{\"hitsAddend\":-1}", SL_RLS_EMALFORMED, msg);
    refused("{\"hitsAddend\":1.5}", SL_RLS_EMALFORMED, msg);
    refused("{\"hitsAddend\":1e-1}", SL_RLS_EMALFORMED, msg);
    refused("{\"hitsAddend\":\" 1\"}", SL_RLS_EMALFORMED, msg);
    refused("{\"hitsAddend\":\"0x10\"}", SL_RLS_EMALFORMED, msg);
    refused("{\"hitsAddend\":\"\"}", SL_RLS_EMALFORMED, msg);
    refused("{\"hitsAddend\":true}", SL_RLS_EMALFORMED, msg);
    refused("{\"hitsAddend\":[1]}", SL_RLS_EMALFORMED, msg);
    refused("{\"hits_addend\":1e2147483648}", SL_RLS_EMALFORMED,
            "hits_addend: not an unsigned 32-bit integer (a number or a string of one)");
    refused("{\"descriptors\":[{},{\"hitsAddend\":18446744073709551616}]}", SL_RLS_EMALFORMED,
            "descriptors[1].hitsAddend: not an unsigned 64-bit integer (a number or a string "
            "of one)");
    refused("{\"descriptors\":[{\"hitsAddend\":{\"value\":1}}]}", SL_RLS_EMALFORMED,
            "descriptors[0].hitsAddend: not an unsigned 64-bit integer (a number or a string "
            "of one)");
    refused("{\"descriptors\":[{\"limit\":{\"requests_per_unit\":\"-5\"}}]}", SL_RLS_EMALFORMED,
            "descriptors[0].limit.requests_per_unit: not an unsigned 32-bit integer (a number "
            "or a string of one)");
}

Test(rls_json, units_by_name_or_number)
{
    static const char *const names[] = {"UNKNOWN", "SECOND", "MINUTE", "HOUR",
                                        "DAY",     "MONTH",  "YEAR"};
    for (int u = 0; u <= 6; u++) {
        char body[160];
        sl_rls_request r;
        snprintf(body, sizeof body, "{\"descriptors\":[{\"limit\":{\"unit\":\"%s\"}}]}", names[u]);
        decode_ok(&r, body);
        cr_assert_eq((int)r.descriptors[0].limit_unit, u);
        sl_rls_request_free(&r);
        snprintf(body, sizeof body, "{\"descriptors\":[{\"limit\":{\"unit\":%d}}]}", u);
        decode_ok(&r, body);
        cr_assert_eq((int)r.descriptors[0].limit_unit, u);
        sl_rls_request_free(&r);
    }
    refused("{\"descriptors\":[{\"limit\":{\"unit\":\"minute\"}}]}", SL_RLS_EMALFORMED,
            "descriptors[0].limit.unit: \"minute\" is no RateLimitUnit (UNKNOWN, SECOND, "
            "MINUTE, HOUR, DAY, MONTH, YEAR or WEEK)");
    refused("{\"descriptors\":[{\"limit\":{\"unit\":\"2\"}}]}", SL_RLS_EMALFORMED,
            "descriptors[0].limit.unit: \"2\" is no RateLimitUnit (UNKNOWN, SECOND, "
            "MINUTE, HOUR, DAY, MONTH, YEAR or WEEK)");
    refused("{\"descriptors\":[{\"limit\":{\"unit\":2.5}}]}", SL_RLS_EMALFORMED,
            "descriptors[0].limit.unit: not a RateLimitUnit (its name, or its number)");
    refused("{\"descriptors\":[{\"limit\":{\"unit\":2147483648}}]}", SL_RLS_EMALFORMED,
            "descriptors[0].limit.unit: not a RateLimitUnit (its name, or its number)");
    /* An int32 that names no unit is read, as protojson reads it, and then
     * refused where the bytes would be. */
    refused("{\"descriptors\":[{\"limit\":{\"unit\":9}}]}", SL_RLS_EMALFORMED,
            "descriptors[0].limit.unit: 9 is no RateLimitUnit");
    refused("{\"descriptors\":[{\"limit\":{\"unit\":-2147483648}}]}", SL_RLS_EMALFORMED,
            "descriptors[0].limit.unit: -2147483648 is no RateLimitUnit");
}

Test(rls_json, fields_of_the_wrong_type_are_named)
{
    refused("{\"descriptors\":[{\"entries\":[{\"key\":\"a\",\"value\":\"b\"}]},"
            "{\"entries\":[{\"key\":\"k\",\"value\":5}]}]}",
            SL_RLS_EMALFORMED, "descriptors[1].entries[0].value: not a string");
    refused("{\"domain\":5}", SL_RLS_EMALFORMED, "domain: not a string");
    refused("{\"domain\":[]}", SL_RLS_EMALFORMED, "domain: not a string");
    refused("{\"descriptors\":{}}", SL_RLS_EMALFORMED, "descriptors: not an array");
    refused("{\"descriptors\":[null]}", SL_RLS_EMALFORMED, "descriptors[0]: not an object");
    refused("{\"descriptors\":[{\"entries\":{}}]}", SL_RLS_EMALFORMED,
            "descriptors[0].entries: not an array");
    refused("{\"descriptors\":[{\"entries\":[\"k\"]}]}", SL_RLS_EMALFORMED,
            "descriptors[0].entries[0]: not an object");
    refused("{\"descriptors\":[{\"limit\":5}]}", SL_RLS_EMALFORMED,
            "descriptors[0].limit: not an object");
    refused("[]", SL_RLS_EMALFORMED, "body: not a JSON object (a RateLimitRequest)");
    refused("\"edge\"", SL_RLS_EMALFORMED, "body: not a JSON object (a RateLimitRequest)");
}

Test(rls_json, unknown_and_repeated_fields_are_refused)
{
    refused("{\"domain\":\"d\",\"Domain\":\"e\"}", SL_RLS_EMALFORMED, "unknown field \"Domain\"");
    refused("{\"descriptors\":[{\"entries\":[{\"key\":\"a\",\"raw_value\":\"b\"}]}]}",
            SL_RLS_EMALFORMED, "descriptors[0].entries[0]: unknown field \"raw_value\"");
    refused("{\"descriptors\":[{\"limit\":{\"requestsPerUnit\":1,\"per\":2}}]}",
            SL_RLS_EMALFORMED, "descriptors[0].limit: unknown field \"per\"");
    refused("{\"hitsAddend\":1,\"hits_addend\":2}", SL_RLS_EMALFORMED,
            "hits_addend: given twice (hitsAddend and hits_addend name one field)");
    refused("{\"domain\":\"a\",\"domain\":\"b\"}", SL_RLS_EMALFORMED, "domain: given twice");
    /* Even a null counts as the field once. */
    refused("{\"descriptors\":[{\"hitsAddend\":null,\"hits_addend\":1}]}", SL_RLS_EMALFORMED,
            "descriptors[0].hits_addend: given twice (hitsAddend and hits_addend name one "
            "field)");
}

Test(rls_json, bytes_that_are_not_json_are_refused_where_they_break)
{
    refused("", SL_RLS_EMALFORMED, "body is empty: send a RateLimitRequest as JSON");
    refused(" \r\n", SL_RLS_EMALFORMED, "body is empty: send a RateLimitRequest as JSON");
    refused("}", SL_RLS_EMALFORMED, "body is not valid JSON (at byte 0)");
    refused("{\"domain\":\"a\",}", SL_RLS_EMALFORMED, "body is not valid JSON (at byte 14)");
    refused("{\"hitsAddend\":01}", SL_RLS_EMALFORMED, "body is not valid JSON (at byte 15)");
    refused("{\"hitsAddend\":+1}", SL_RLS_EMALFORMED, "body is not valid JSON (at byte 14)");
    refused("{\"hitsAddend\":1.}", SL_RLS_EMALFORMED, "body is not valid JSON (at byte 14)");
    refused("{} {}", SL_RLS_EMALFORMED,
            "body is not valid JSON: bytes after the value (at byte 3)");
    refused("{\"domain\":\"a", SL_RLS_EMALFORMED,
            "body is not valid JSON: a string is not closed");
    refused("{\"domain\":\"a\\u0000b\"}", SL_RLS_EMALFORMED,
            "body: a string holds \\u0000 (at byte 12)");
    refused("{\"domain\":\"a\tb\"}", SL_RLS_EMALFORMED,
            "body: a control byte in a string (at byte 12)");
    refused("{\"domain\":\"a\xff\"}", SL_RLS_EMALFORMED,
            "body: a string is not UTF-8 (at byte 12)");
    refused("{\"domain\":\"\xc0\xaf\"}", SL_RLS_EMALFORMED,
            "body: a string is not UTF-8 (at byte 11)");
    refused("{\"domain\":\"\\ud800x\"}", SL_RLS_EMALFORMED,
            "body: a lone UTF-16 surrogate in a string (at byte 11)");
    refused("{\"domain\":\"\\udc00\"}", SL_RLS_EMALFORMED,
            "body: a lone UTF-16 surrogate in a string (at byte 11)");
    refused("{\"domain\":\"\\x\"}", SL_RLS_EMALFORMED, "body is not valid JSON (at byte 12)");
    refused("{\"domain\":nul}", SL_RLS_EMALFORMED, "body is not valid JSON (at byte 10)");

    char deep[64] = "";
    for (int i = 0; i < 17; i++)
        strcat(deep, "[");
    refused(deep, SL_RLS_EBOUND, "body: nested deeper than 16 (at byte 16)");

    char digits[128];
    memset(digits, '1', 64);
    digits[64] = '\0';
    char body[160];
    snprintf(body, sizeof body, "{\"hitsAddend\":%s}", digits);
    refused(body, SL_RLS_EMALFORMED, "body: a number of more than 63 characters (at byte 14)");
}

Test(rls_json, escapes_and_utf8_are_read)
{
    sl_rls_request r;
    decode_ok(&r, "{\"domain\":\"\\u00e9\\\"\\\\\\/\\n\\ud83d\\ude00\xc3\xa9\"}");
    cr_assert(same_str(r.domain, "\xc3\xa9\"\\/\n\xf0\x9f\x98\x80\xc3\xa9"));
    sl_rls_request_free(&r);
}

Test(rls_json, the_bounds_are_the_decoders)
{
    sl_rls_bounds b = sl_rls_default_bounds;
    b.max_descriptors = 2;
    b.max_entries = 1;
    b.max_value = 4;
    b.max_domain = 3;
    sl_rls_request r;
    char err[256];
    cr_assert_eq(from_json(&r, "{\"descriptors\":[{},{},{}]}", &b, err, sizeof err),
                 SL_RLS_EBOUND);
    cr_assert_str_eq(err, "descriptors: more than the bound of 2");
    cr_assert_eq(from_json(&r, "{\"descriptors\":[{\"entries\":[{},{}]}]}", &b, err, sizeof err),
                 SL_RLS_EBOUND);
    cr_assert_str_eq(err, "descriptors[0].entries: more than the bound of 1");
    cr_assert_eq(from_json(&r, "{\"descriptors\":[{},{\"entries\":[{\"value\":\"12345\"}]}]}",
                           &b, err, sizeof err),
                 SL_RLS_EBOUND);
    cr_assert_str_eq(err, "descriptors[1].entries[0].value: 5 bytes, over the bound of 4");
    cr_assert_eq(from_json(&r, "{\"domain\":\"edge\"}", &b, err, sizeof err), SL_RLS_EBOUND);
    cr_assert_str_eq(err, "domain: 4 bytes, over the bound of 3");
    cr_assert_null(r.owner_);

    /* The body: at most 4 times the message's bound, said before parsing. */
    b = sl_rls_default_bounds;
    b.max_message = 10;
    char padded[64];
    snprintf(padded, sizeof padded, "%-40s", "{\"domain\":\"a\"}");
    cr_assert_eq(strlen(padded), 40);
    cr_assert_eq(from_json(&r, padded, &b, err, sizeof err), SL_RLS_OK);
    sl_rls_request_free(&r);
    strcat(padded, " ");
    cr_assert_eq(from_json(&r, padded, &b, err, sizeof err), SL_RLS_EBOUND);
    cr_assert_str_eq(err, "body: 41 bytes, over the bound of 40 (4 times the bound of 10 on the "
                          "message)");
    /* Within the body's bound, the message's own. */
    cr_assert_eq(from_json(&r, "{\"domain\":\"abcdefghijk\"}", &b, err, sizeof err),
                 SL_RLS_EBOUND);
    cr_assert_str_eq(err, "request: 13 bytes, over the bound of 10");
}

Test(rls_json, every_failed_allocation_is_out_of_memory)
{
    int failures = 0;
    for (long n = 1;; n++) {
        sl_rls_request r;
        char err[256] = "";
        sl_alloc_fail_nth(n);
        int rc = from_json(&r, camel, NULL, err, sizeof err);
        sl_alloc_fail_nth(0);
        if (rc == SL_RLS_OK) {
            cr_assert_eq(r.n_descriptors, 2);
            sl_rls_request_free(&r);
            break;
        }
        cr_assert_eq(rc, SL_RLS_ENOMEM, "allocation %ld: rc %d, %s", n, rc, err);
        cr_assert_str_eq(err, "out of memory");
        cr_assert_null(r.owner_);
        failures++;
        cr_assert_lt(n, 1000);
    }
    cr_assert_gt(failures, 8);
}

/* ---- the response ---- */

static void response_is(const sl_rls_response *r, const char *want)
{
    size_t len = 0;
    char *got = sl_rls_response_to_json(r, &len);
    cr_assert_not_null(got);
    cr_assert_eq(len, strlen(got));
    cr_assert_str_eq(got, want);
    sl_free(got);
}

Test(rls_json, a_response_without_anything_set)
{
    sl_rls_response r = {0};
    response_is(&r, "{}");
    r.overall_code = SL_RLS_CODE_OK;
    response_is(&r, "{\"overallCode\":\"OK\"}");
    r.overall_code = SL_RLS_CODE_OVER_LIMIT;
    response_is(&r, "{\"overallCode\":\"OVER_LIMIT\"}");
    sl_rls_status st[2] = {{0}, {.code = SL_RLS_CODE_OK}};
    r.statuses = st;
    r.n_statuses = 2;
    response_is(&r, "{\"overallCode\":\"OVER_LIMIT\",\"statuses\":[{},{\"code\":\"OK\"}]}");
}

Test(rls_json, a_response_with_limits_resets_and_headers)
{
    sl_rls_status st[3] = {
        {.code = SL_RLS_CODE_OK, .has_limit = true, .requests_per_unit = 5,
         .unit = SL_RLS_UNIT_MINUTE, .limit_name = "per_user", .limit_remaining = 4,
         .has_reset = true, .reset_after_ns = 3500000000},
        {.code = SL_RLS_CODE_OVER_LIMIT, .has_limit = true, .requests_per_unit = 4294967295u,
         .unit = SL_RLS_UNIT_WEEK, .has_reset = true, .reset_after_ns = 0},
        {.code = SL_RLS_CODE_OK, .has_limit = true, .limit_name = "", .has_reset = true,
         .reset_after_ns = 42000001},
    };
    sl_rls_header rh[2] = {{"x-ratelimit-limit", "5"}, {"x-quote", "a\"b\\c\n\x01\x7f"}};
    sl_rls_header qh[1] = {{"x-empty", ""}};
    static const uint8_t raw[] = {'h', 'i', '!', '?'};
    sl_rls_response r = {.overall_code = SL_RLS_CODE_OVER_LIMIT,
                         .statuses = st,
                         .n_statuses = 3,
                         .response_headers = rh,
                         .n_response_headers = 2,
                         .request_headers = qh,
                         .n_request_headers = 1,
                         .raw_body = raw,
                         .raw_body_len = sizeof raw};
    response_is(&r,
                "{\"overallCode\":\"OVER_LIMIT\",\"statuses\":["
                "{\"code\":\"OK\",\"currentLimit\":{\"name\":\"per_user\",\"requestsPerUnit\":5,"
                "\"unit\":\"MINUTE\"},\"limitRemaining\":4,\"durationUntilReset\":\"3.500s\"},"
                "{\"code\":\"OVER_LIMIT\",\"currentLimit\":{\"requestsPerUnit\":4294967295,"
                "\"unit\":\"WEEK\"},\"durationUntilReset\":\"0s\"},"
                "{\"code\":\"OK\",\"currentLimit\":{},\"durationUntilReset\":\"0.042000001s\"}],"
                "\"responseHeadersToAdd\":[{\"key\":\"x-ratelimit-limit\",\"value\":\"5\"},"
                "{\"key\":\"x-quote\",\"value\":\"a\\\"b\\\\c\\n\\u0001\x7f\"}],"
                "\"requestHeadersToAdd\":[{\"key\":\"x-empty\"}],"
                "\"rawBody\":\"aGkhPw==\"}");
}

Test(rls_json, durations_take_0_3_6_or_9_decimals)
{
    static const struct {
        int64_t ns;
        const char *text;
    } cases[] = {
        {0, "0s"},
        {1000000000, "1s"},
        {1500000000, "1.500s"},
        {1000001000, "1.000001s"},
        {1000000001, "1.000000001s"},
        {-5, "0s"}, /* a negative reset is none */
        {INT64_MAX, "9223372036.854775807s"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sl_rls_status st = {.has_reset = true, .reset_after_ns = cases[i].ns};
        sl_rls_response r = {.statuses = &st, .n_statuses = 1};
        char want[96];
        snprintf(want, sizeof want, "{\"statuses\":[{\"durationUntilReset\":\"%s\"}]}",
                 cases[i].text);
        response_is(&r, want);
    }
}

Test(rls_json, unknown_enums_are_numbers_and_bad_utf8_is_replaced)
{
    sl_rls_status st = {.code = (sl_rls_code)7, .has_limit = true, .unit = (sl_rls_unit)9,
                        .limit_name = "a\xff" "b\xe2\x82"};
    sl_rls_response r = {.overall_code = (sl_rls_code)3, .statuses = &st, .n_statuses = 1};
    response_is(&r, "{\"overallCode\":3,\"statuses\":[{\"code\":7,\"currentLimit\":{\"name\":"
                    "\"a\xef\xbf\xbd" "b\xef\xbf\xbd\xef\xbf\xbd\",\"unit\":9}}]}");
}

Test(rls_json, base64_of_every_length_and_no_text_when_memory_fails)
{
    /* A response written under a failing allocation is NULL, never a cut
     * text. */
    static const uint8_t raw[] = {0xfb, 0xff, 0x00};
    const char *want[] = {"{\"rawBody\":\"+w==\"}", "{\"rawBody\":\"+/8=\"}",
                          "{\"rawBody\":\"+/8A\"}"};
    for (size_t n = 1; n <= 3; n++) {
        sl_rls_response r = {.raw_body = raw, .raw_body_len = n};
        response_is(&r, want[n - 1]);
    }
    sl_rls_response r = {.overall_code = SL_RLS_CODE_OK};
    sl_alloc_fail_nth(1);
    size_t len;
    char *s = sl_rls_response_to_json(&r, &len);
    sl_alloc_fail_nth(0);
    cr_assert_null(s);
}
