/*
 * test_rls.c: Envoy's rate limit messages (src/proto/rls.c): a request
 * packed by the generated code decodes into the plain structs with every
 * field; each bound is refused with a message naming the field and the
 * bound, before any allocation; broken wire bytes are malformed, not a
 * crash; every allocation that fails gives "out of memory" and leaks
 * nothing; a response encodes into bytes the generated code reads back the
 * same; the health check's messages.
 *
 * Requests are built two ways: by protoc-c's generated pack (what a real
 * client sends) and byte by byte (what no honest client sends).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "envoy/service/ratelimit/v3/rls.pb-c.h"
#include "grpc/health/v1/health.pb-c.h"
#include "proto/rls.h"

typedef Envoy__Service__Ratelimit__V3__RateLimitRequest pb_request;
typedef Envoy__Extensions__Common__Ratelimit__V3__RateLimitDescriptor pb_descriptor;
typedef Envoy__Extensions__Common__Ratelimit__V3__RateLimitDescriptor__Entry pb_entry;
typedef Envoy__Extensions__Common__Ratelimit__V3__RateLimitDescriptor__RateLimitOverride
    pb_override;
typedef Envoy__Service__Ratelimit__V3__RateLimitResponse pb_response;

/* ---- bytes by hand ---- */

typedef struct bytes {
    uint8_t b[8192];
    size_t n;
} bytes;

static void put(bytes *w, const void *p, size_t n)
{
    cr_assert(w->n + n <= sizeof w->b);
    memcpy(w->b + w->n, p, n);
    w->n += n;
}

static void varint(bytes *w, uint64_t v)
{
    do {
        uint8_t c = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            c |= 0x80;
        put(w, &c, 1);
    } while (v);
}

static void tag(bytes *w, unsigned num, unsigned type)
{
    varint(w, (uint64_t)num << 3 | type);
}

/* A length-delimited field num holding p[0 .. n). */
static void field(bytes *w, unsigned num, const void *p, size_t n)
{
    tag(w, num, 2);
    varint(w, n);
    put(w, p, n);
}

static void sfield(bytes *w, unsigned num, const char *s)
{
    field(w, num, s, strlen(s));
}

/* An Entry of key and value, of klen and vlen bytes. */
static bytes entry(const char *k, size_t klen, const char *v, size_t vlen)
{
    bytes e = {.n = 0};
    field(&e, 1, k, klen);
    field(&e, 2, v, vlen);
    return e;
}

static bytes descriptor_of(const bytes *entries, size_t n)
{
    bytes d = {.n = 0};
    for (size_t i = 0; i < n; i++)
        field(&d, 1, entries[i].b, entries[i].n);
    return d;
}

static int decode(const bytes *w, const sl_rls_bounds *b, sl_rls_request *r, char *err)
{
    /* An exact-size copy, so that ASan sees a read past the end. */
    uint8_t *copy = calloc(1, w->n ? w->n : 1);
    memcpy(copy, w->b, w->n);
    int rc = sl_rls_request_decode(r, copy, w->n, b, err, 200);
    if (rc == SL_RLS_OK) {
        /* The decoded request owns its bytes: the input may go. */
        memset(copy, 0xEE, w->n);
    }
    free(copy);
    return rc;
}

/* ---- requests from the generated code ---- */

/* Packs a request of domain "edge" with two descriptors:
 *   [("remote_address","10.0.0.1")]
 *   [("user","u1"),("path","/api")]  limit 5/MINUTE  hits_addend 7
 * and request-level hits_addend 3, into w. */
static void pack_sample(bytes *w)
{
    pb_entry e1 = ENVOY__EXTENSIONS__COMMON__RATELIMIT__V3__RATE_LIMIT_DESCRIPTOR__ENTRY__INIT;
    e1.key = "remote_address";
    e1.value = "10.0.0.1";
    pb_entry e2 = ENVOY__EXTENSIONS__COMMON__RATELIMIT__V3__RATE_LIMIT_DESCRIPTOR__ENTRY__INIT;
    e2.key = "user";
    e2.value = "u1";
    pb_entry e3 = ENVOY__EXTENSIONS__COMMON__RATELIMIT__V3__RATE_LIMIT_DESCRIPTOR__ENTRY__INIT;
    e3.key = "path";
    e3.value = "/api";
    pb_entry *d1e[] = {&e1}, *d2e[] = {&e2, &e3};
    pb_override ov =
        ENVOY__EXTENSIONS__COMMON__RATELIMIT__V3__RATE_LIMIT_DESCRIPTOR__RATE_LIMIT_OVERRIDE__INIT;
    ov.requests_per_unit = 5;
    ov.unit = ENVOY__TYPE__V3__RATE_LIMIT_UNIT__MINUTE;
    Google__Protobuf__UInt64Value hits = GOOGLE__PROTOBUF__UINT64_VALUE__INIT;
    hits.value = 7;
    pb_descriptor d1 = ENVOY__EXTENSIONS__COMMON__RATELIMIT__V3__RATE_LIMIT_DESCRIPTOR__INIT;
    d1.n_entries = 1;
    d1.entries = d1e;
    pb_descriptor d2 = ENVOY__EXTENSIONS__COMMON__RATELIMIT__V3__RATE_LIMIT_DESCRIPTOR__INIT;
    d2.n_entries = 2;
    d2.entries = d2e;
    d2.limit = &ov;
    d2.hits_addend = &hits;
    pb_descriptor *ds[] = {&d1, &d2};
    pb_request m = ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_REQUEST__INIT;
    m.domain = "edge";
    m.n_descriptors = 2;
    m.descriptors = ds;
    m.hits_addend = 3;
    size_t n = envoy__service__ratelimit__v3__rate_limit_request__get_packed_size(&m);
    cr_assert(n <= sizeof w->b);
    w->n = envoy__service__ratelimit__v3__rate_limit_request__pack(&m, w->b);
}

static bool str_is(sl_rls_str s, const char *want)
{
    return s.n == strlen(want) && memcmp(s.p, want, s.n) == 0 && s.p[s.n] == '\0';
}

Test(rls, decodes_every_field_of_a_packed_request)
{
    bytes w;
    pack_sample(&w);
    sl_rls_request r;
    char err[200] = "";
    cr_assert_eq(decode(&w, NULL, &r, err), SL_RLS_OK, "%s", err);
    cr_assert(str_is(r.domain, "edge"));
    cr_assert_eq(r.hits_addend, 3);
    cr_assert_eq(r.n_descriptors, 2);
    const sl_rls_descriptor *d = r.descriptors;
    cr_assert_eq(d[0].n_entries, 1);
    cr_assert(str_is(d[0].entries[0].key, "remote_address"));
    cr_assert(str_is(d[0].entries[0].value, "10.0.0.1"));
    cr_assert(!d[0].has_limit && !d[0].has_hits_addend);
    cr_assert_eq(d[1].n_entries, 2);
    cr_assert(str_is(d[1].entries[0].key, "user"));
    cr_assert(str_is(d[1].entries[0].value, "u1"));
    cr_assert(str_is(d[1].entries[1].key, "path"));
    cr_assert(str_is(d[1].entries[1].value, "/api"));
    cr_assert(d[1].has_limit);
    cr_assert_eq(d[1].limit_requests_per_unit, 5);
    cr_assert_eq(d[1].limit_unit, SL_RLS_UNIT_MINUTE);
    cr_assert(d[1].has_hits_addend);
    cr_assert_eq(d[1].hits_addend, 7);
    sl_rls_request_free(&r);
    cr_assert_null(r.owner_);
    sl_rls_request_free(&r); /* a zeroed request frees as a no-op */
}

Test(rls, an_empty_message_is_an_empty_request)
{
    bytes w = {.n = 0};
    sl_rls_request r;
    char err[200];
    cr_assert_eq(decode(&w, NULL, &r, err), SL_RLS_OK);
    cr_assert_eq(r.domain.n, 0);
    cr_assert_eq(r.n_descriptors, 0);
    cr_assert_eq(r.hits_addend, 0);
    sl_rls_request_free(&r);
}

Test(rls, hits_addend_zero_in_the_wrapper_is_still_set)
{
    /* A UInt64Value of 0 is present (an empty wrapper message). */
    bytes e = entry("k", 1, "v", 1), d = descriptor_of(&e, 1), w = {.n = 0};
    field(&d, 3, "", 0);
    field(&w, 2, d.b, d.n);
    sl_rls_request r;
    char err[200];
    cr_assert_eq(decode(&w, NULL, &r, err), SL_RLS_OK, "%s", err);
    cr_assert(r.descriptors[0].has_hits_addend);
    cr_assert_eq(r.descriptors[0].hits_addend, 0);
    sl_rls_request_free(&r);
}

Test(rls, unknown_fields_are_skipped)
{
    bytes e = entry("k", 1, "v", 1), w = {.n = 0};
    field(&e, 9, "xyz", 3);                 /* unknown in an entry */
    bytes d = descriptor_of(&e, 1);
    tag(&d, 12, 0);                         /* unknown varint in a descriptor */
    varint(&d, 123456789);
    tag(&w, 40, 5);                         /* unknown fixed32 in the request */
    put(&w, "abcd", 4);
    field(&w, 2, d.b, d.n);
    tag(&w, 41, 1);                         /* unknown fixed64 */
    put(&w, "abcdefgh", 8);
    sfield(&w, 1, "dom");
    sl_rls_request r;
    char err[200];
    cr_assert_eq(decode(&w, NULL, &r, err), SL_RLS_OK, "%s", err);
    cr_assert(str_is(r.domain, "dom"));
    cr_assert(str_is(r.descriptors[0].entries[0].key, "k"));
    sl_rls_request_free(&r);
}

/* ---- bounds ---- */

static const sl_rls_bounds small = {
    .max_message = 4096,
    .max_descriptors = 2,
    .max_entries = 3,
    .max_domain = 8,
    .max_key = 10,
    .max_value = 20,
};

static void expect(const bytes *w, int rc_want, const char *err_want)
{
    sl_rls_request r;
    char err[200] = "";
    int rc = decode(w, &small, &r, err);
    cr_assert_eq(rc, rc_want, "rc %d, err '%s'", rc, err);
    cr_assert_str_eq(err, err_want);
    cr_assert_null(r.owner_);
    cr_assert_eq(r.n_descriptors, 0);
}

Test(rls, bounds_at_the_edge_pass)
{
    char k[10], v[20];
    memset(k, 'k', sizeof k);
    memset(v, 'v', sizeof v);
    bytes es[3] = {entry(k, 10, v, 20), entry(k, 10, v, 20), entry(k, 10, v, 20)};
    bytes d = descriptor_of(es, 3), w = {.n = 0};
    sfield(&w, 1, "12345678");
    field(&w, 2, d.b, d.n);
    field(&w, 2, d.b, d.n);
    sl_rls_request r;
    char err[200] = "";
    cr_assert_eq(decode(&w, &small, &r, err), SL_RLS_OK, "%s", err);
    cr_assert_eq(r.n_descriptors, 2);
    cr_assert_eq(r.descriptors[1].n_entries, 3);
    cr_assert_eq(r.descriptors[1].entries[2].value.n, 20);
    sl_rls_request_free(&r);
}

Test(rls, too_many_descriptors)
{
    bytes e = entry("k", 1, "v", 1), d = descriptor_of(&e, 1), w = {.n = 0};
    for (int i = 0; i < 3; i++)
        field(&w, 2, d.b, d.n);
    expect(&w, SL_RLS_EBOUND, "descriptors: more than the bound of 2");
}

Test(rls, too_many_entries)
{
    bytes es[4] = {entry("a", 1, "1", 1), entry("b", 1, "2", 1), entry("c", 1, "3", 1),
                   entry("d", 1, "4", 1)};
    bytes ok = descriptor_of(es, 1), d = descriptor_of(es, 4), w = {.n = 0};
    field(&w, 2, ok.b, ok.n);
    field(&w, 2, d.b, d.n);
    expect(&w, SL_RLS_EBOUND, "descriptors[1].entries: more than the bound of 3");
}

Test(rls, key_value_and_domain_lengths)
{
    char big[64];
    memset(big, 'x', sizeof big);
    bytes es[2] = {entry("a", 1, "1", 1), entry(big, 11, "2", 1)};
    bytes d = descriptor_of(es, 2), w = {.n = 0};
    field(&w, 2, d.b, d.n);
    expect(&w, SL_RLS_EBOUND, "descriptors[0].entries[1].key: 11 bytes, over the bound of 10");

    es[1] = entry("b", 1, big, 21);
    d = descriptor_of(es, 2);
    w.n = 0;
    field(&w, 2, d.b, d.n);
    expect(&w, SL_RLS_EBOUND, "descriptors[0].entries[1].value: 21 bytes, over the bound of 20");

    w.n = 0;
    field(&w, 1, big, 9);
    expect(&w, SL_RLS_EBOUND, "domain: 9 bytes, over the bound of 8");
}

Test(rls, the_message_size)
{
    bytes w = {.n = 0};
    uint8_t pad[4097] = {0};
    field(&w, 99, pad, 4094); /* an unknown field: only the size is wrong */
    char want[80];
    snprintf(want, sizeof want, "request: %zu bytes, over the bound of 4096", w.n);
    expect(&w, SL_RLS_EBOUND, want);
}

Test(rls, a_nul_in_a_string)
{
    bytes e = entry("ab\0c", 4, "v", 1), d = descriptor_of(&e, 1), w = {.n = 0};
    field(&w, 2, d.b, d.n);
    expect(&w, SL_RLS_EBOUND, "descriptors[0].entries[0].key: holds a NUL byte");
    w.n = 0;
    field(&w, 1, "d\0", 2);
    expect(&w, SL_RLS_EBOUND, "domain: holds a NUL byte");
}

/* ---- malformed ---- */

Test(rls, broken_wire_bytes)
{
    bytes w = {.n = 0};
    /* a length past the end */
    tag(&w, 1, 2);
    varint(&w, 50);
    put(&w, "abc", 3);
    expect(&w, SL_RLS_EMALFORMED, "request: not a RateLimitRequest on the wire");

    /* a domain sent as a varint */
    w.n = 0;
    tag(&w, 1, 0);
    varint(&w, 5);
    expect(&w, SL_RLS_EMALFORMED, "domain: not a RateLimitRequest on the wire");

    /* a group (wire type 3) */
    w.n = 0;
    tag(&w, 7, 3);
    expect(&w, SL_RLS_EMALFORMED, "request: not a RateLimitRequest on the wire");

    /* a varint of 11 bytes */
    w.n = 0;
    tag(&w, 3, 0);
    put(&w, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11);
    expect(&w, SL_RLS_EMALFORMED, "request: not a RateLimitRequest on the wire");

    /* field number 0 */
    w.n = 0;
    put(&w, "\x00\x01", 2);
    expect(&w, SL_RLS_EMALFORMED, "request: not a RateLimitRequest on the wire");

    /* an entry cut inside */
    bytes e = {.n = 0};
    tag(&e, 1, 2);
    varint(&e, 9);
    bytes d = {.n = 0};
    field(&d, 1, e.b, e.n);
    w.n = 0;
    field(&w, 2, d.b, d.n);
    expect(&w, SL_RLS_EMALFORMED, "descriptors[0].entries[0]: not a RateLimitRequest on the wire");
}

Test(rls, a_broken_override_is_caught_by_the_unpack)
{
    /* The walk skips the override (field 2 of a descriptor); its bytes are
     * a length past their end, which the generated unpack refuses. */
    bytes ov = {.n = 0};
    tag(&ov, 1, 2);
    varint(&ov, 40);
    bytes e = entry("k", 1, "v", 1), d = descriptor_of(&e, 1), w = {.n = 0};
    field(&d, 2, ov.b, ov.n);
    field(&w, 2, d.b, d.n);
    sl_rls_request r;
    char err[200] = "";
    cr_assert_eq(decode(&w, NULL, &r, err), SL_RLS_EMALFORMED);
    cr_assert(strstr(err, "limit override") != NULL, "%s", err);
    cr_assert_null(r.owner_);
}

Test(rls, an_override_unit_out_of_range)
{
    bytes ov = {.n = 0};
    tag(&ov, 1, 0);
    varint(&ov, 10);
    tag(&ov, 2, 0);
    varint(&ov, 9);
    bytes e = entry("k", 1, "v", 1), d = descriptor_of(&e, 1), w = {.n = 0};
    field(&d, 2, ov.b, ov.n);
    field(&w, 2, d.b, d.n);
    expect(&w, SL_RLS_EMALFORMED, "descriptors[0].limit.unit: 9 is no RateLimitUnit");
}

Test(rls, every_failed_allocation_is_out_of_memory)
{
    bytes w;
    pack_sample(&w);
    int failures = 0;
    for (long n = 1;; n++) {
        sl_rls_request r;
        char err[200] = "";
        sl_alloc_fail_nth(n);
        int rc = sl_rls_request_decode(&r, w.b, w.n, NULL, err, sizeof err);
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
    cr_assert_gt(failures, 3); /* the owner, the unpack's parts, the arrays */
}

/* ---- the response ---- */

Test(rls, a_response_reads_back_through_the_generated_code)
{
    sl_rls_status st[2] = {
        {.code = SL_RLS_CODE_OK,
         .has_limit = true,
         .requests_per_unit = 100,
         .unit = SL_RLS_UNIT_MINUTE,
         .limit_name = "per_ip",
         .limit_remaining = 42,
         .has_reset = true,
         .reset_after_ns = 12500000000},
        {.code = SL_RLS_CODE_OVER_LIMIT, .has_limit = true, .requests_per_unit = 7,
         .unit = SL_RLS_UNIT_WEEK, .limit_remaining = 0},
    };
    sl_rls_header rh[2] = {{"X-RateLimit-Limit", "100"}, {"RateLimit", "\"per_ip\";r=42;t=13"}};
    sl_rls_header qh[1] = {{"x-sluice", "1"}};
    sl_rls_response r = {.overall_code = SL_RLS_CODE_OVER_LIMIT,
                         .statuses = st,
                         .n_statuses = 2,
                         .response_headers = rh,
                         .n_response_headers = 2,
                         .request_headers = qh,
                         .n_request_headers = 1,
                         .raw_body = (const uint8_t *)"slow down",
                         .raw_body_len = 9};
    size_t len = 0;
    uint8_t *buf = sl_rls_response_encode(&r, 5, &len);
    cr_assert_not_null(buf);
    cr_assert_gt(len, 5);
    pb_response *m =
        envoy__service__ratelimit__v3__rate_limit_response__unpack(NULL, len - 5, buf + 5);
    cr_assert_not_null(m);
    cr_assert_eq(m->overall_code, ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__CODE__OVER_LIMIT);
    cr_assert_eq(m->n_statuses, 2);
    cr_assert_eq(m->statuses[0]->code, ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__CODE__OK);
    cr_assert_not_null(m->statuses[0]->current_limit);
    cr_assert_eq(m->statuses[0]->current_limit->requests_per_unit, 100);
    cr_assert_eq(m->statuses[0]->current_limit->unit, 2);
    cr_assert_str_eq(m->statuses[0]->current_limit->name, "per_ip");
    cr_assert_eq(m->statuses[0]->limit_remaining, 42);
    cr_assert_not_null(m->statuses[0]->duration_until_reset);
    cr_assert_eq(m->statuses[0]->duration_until_reset->seconds, 12);
    cr_assert_eq(m->statuses[0]->duration_until_reset->nanos, 500000000);
    cr_assert_not_null(m->statuses[1]->current_limit);
    cr_assert_eq(m->statuses[1]->current_limit->unit,
                 ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__RATE_LIMIT__UNIT__WEEK);
    cr_assert_eq(m->statuses[1]->current_limit->unit, 7);
    cr_assert_str_eq(m->statuses[1]->current_limit->name, "");
    cr_assert_null(m->statuses[1]->duration_until_reset);
    cr_assert_eq(m->n_response_headers_to_add, 2);
    cr_assert_str_eq(m->response_headers_to_add[1]->key, "RateLimit");
    cr_assert_str_eq(m->response_headers_to_add[1]->value, "\"per_ip\";r=42;t=13");
    cr_assert_eq(m->n_request_headers_to_add, 1);
    cr_assert_str_eq(m->request_headers_to_add[0]->key, "x-sluice");
    cr_assert_eq(m->raw_body.len, 9);
    cr_assert(memcmp(m->raw_body.data, "slow down", 9) == 0);
    envoy__service__ratelimit__v3__rate_limit_response__free_unpacked(m, NULL);
    sl_free(buf);
}

Test(rls, an_empty_response_is_headroom_only)
{
    sl_rls_response r = {.overall_code = SL_RLS_CODE_UNKNOWN};
    size_t len = 99;
    uint8_t *buf = sl_rls_response_encode(&r, 5, &len);
    cr_assert_not_null(buf);
    cr_assert_eq(len, 5); /* proto3 sends no field at its default */
    sl_free(buf);
}

Test(rls, a_failed_allocation_in_the_encoder_is_null)
{
    sl_rls_status st = {.code = SL_RLS_CODE_OK, .has_limit = true, .limit_name = "n"};
    sl_rls_response r = {.overall_code = SL_RLS_CODE_OK, .statuses = &st, .n_statuses = 1};
    for (long n = 1;; n++) {
        size_t len;
        sl_alloc_fail_nth(n);
        uint8_t *buf = sl_rls_response_encode(&r, 5, &len);
        sl_alloc_fail_nth(0);
        if (buf) {
            sl_free(buf);
            cr_assert_gt(n, 1);
            break;
        }
        cr_assert_lt(n, 100);
    }
}

/* ---- the health check ---- */

Test(rls, health_request_and_response)
{
    char service[SL_HEALTH_MAX_SERVICE + 1];
    bytes w = {.n = 0};
    cr_assert_eq(sl_health_request_decode(w.b, 0, service), SL_RLS_OK);
    cr_assert_str_eq(service, "");
    sfield(&w, 1, "envoy.service.ratelimit.v3.RateLimitService");
    cr_assert_eq(sl_health_request_decode(w.b, w.n, service), SL_RLS_OK);
    cr_assert_str_eq(service, "envoy.service.ratelimit.v3.RateLimitService");

    char big[SL_HEALTH_MAX_SERVICE + 1];
    memset(big, 's', sizeof big);
    w.n = 0;
    field(&w, 1, big, sizeof big);
    cr_assert_eq(sl_health_request_decode(w.b, w.n, service), SL_RLS_EBOUND);
    w.n = 0;
    tag(&w, 1, 2);
    varint(&w, 3);
    cr_assert_eq(sl_health_request_decode(w.b, w.n, service), SL_RLS_EMALFORMED);

    size_t len;
    uint8_t *buf = sl_health_response_encode(SL_HEALTH_SERVING, 5, &len);
    cr_assert_not_null(buf);
    Grpc__Health__V1__HealthCheckResponse *m =
        grpc__health__v1__health_check_response__unpack(NULL, len - 5, buf + 5);
    cr_assert_not_null(m);
    cr_assert_eq(m->status, GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING);
    grpc__health__v1__health_check_response__free_unpacked(m, NULL);
    sl_free(buf);
}
