/*
 * fuzz_rls.c: libFuzzer target for Envoy's rate limit messages
 * (src/proto/rls.c) and the health check's request.
 *
 * The input is a serialized RateLimitRequest (the seeds in
 * tests/fuzz/corpus/rls are real ones, made with protoc-c --encode). It is
 * decoded under the default bounds and under small ones. CHECK() aborts when
 * a guarantee of rls.h breaks: a refusal zeroes the request and says why;
 * a decoded request is within its bounds, its strings are exactly their
 * length with no NUL inside; packed again by the generated code it decodes
 * to the same request; a response with a status per descriptor reads back
 * through the generated code with as many statuses.
 *
 * Build and run: make fuzz (FUZZ_SECONDS=N to change the time per target).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "envoy/service/ratelimit/v3/rls.pb-c.h"
#include "fuzz.h"
#include "fuzz_rls.h"
#include "proto/rls.h"

typedef Envoy__Service__Ratelimit__V3__RateLimitRequest pb_request;
typedef Envoy__Extensions__Common__Ratelimit__V3__RateLimitDescriptor pb_descriptor;
typedef Envoy__Extensions__Common__Ratelimit__V3__RateLimitDescriptor__Entry pb_entry;

/* Packs r again with the generated code; the caller frees the result. */
static uint8_t *repack(const sl_rls_request *r, size_t *len)
{
    size_t ne = 0;
    for (size_t i = 0; i < r->n_descriptors; i++)
        ne += r->descriptors[i].n_entries;
    pb_descriptor *ds = calloc(r->n_descriptors + 1, sizeof *ds);
    pb_descriptor **dp = calloc(r->n_descriptors + 1, sizeof *dp);
    pb_entry *es = calloc(ne + 1, sizeof *es);
    pb_entry **ep = calloc(ne + 1, sizeof *ep);
    Envoy__Extensions__Common__Ratelimit__V3__RateLimitDescriptor__RateLimitOverride *ov =
        calloc(r->n_descriptors + 1, sizeof *ov);
    Google__Protobuf__UInt64Value *hv = calloc(r->n_descriptors + 1, sizeof *hv);
    CHECK(ds && dp && es && ep && ov && hv);
    size_t k = 0;
    for (size_t i = 0; i < r->n_descriptors; i++) {
        const sl_rls_descriptor *d = &r->descriptors[i];
        envoy__extensions__common__ratelimit__v3__rate_limit_descriptor__init(&ds[i]);
        ds[i].n_entries = d->n_entries;
        ds[i].entries = &ep[k];
        for (size_t j = 0; j < d->n_entries; j++, k++) {
            envoy__extensions__common__ratelimit__v3__rate_limit_descriptor__entry__init(&es[k]);
            es[k].key = (char *)d->entries[j].key.p;
            es[k].value = (char *)d->entries[j].value.p;
            ep[k] = &es[k];
        }
        if (d->has_limit) {
            envoy__extensions__common__ratelimit__v3__rate_limit_descriptor__rate_limit_override__init(
                &ov[i]);
            ov[i].requests_per_unit = d->limit_requests_per_unit;
            ov[i].unit = (Envoy__Type__V3__RateLimitUnit)d->limit_unit;
            ds[i].limit = &ov[i];
        }
        if (d->has_hits_addend) {
            google__protobuf__uint64_value__init(&hv[i]);
            hv[i].value = d->hits_addend;
            ds[i].hits_addend = &hv[i];
        }
        dp[i] = &ds[i];
    }
    pb_request m = ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_REQUEST__INIT;
    m.domain = (char *)r->domain.p;
    m.n_descriptors = r->n_descriptors;
    m.descriptors = dp;
    m.hits_addend = r->hits_addend;
    *len = envoy__service__ratelimit__v3__rate_limit_request__get_packed_size(&m);
    uint8_t *out = malloc(*len + 1);
    CHECK(out);
    CHECK(envoy__service__ratelimit__v3__rate_limit_request__pack(&m, out) == *len);
    free(ds);
    free(dp);
    free(es);
    free(ep);
    free(ov);
    free(hv);
    return out;
}

static void one(const uint8_t *data, size_t size, const sl_rls_bounds *b)
{
    sl_rls_request r;
    char err[200];
    int rc = sl_rls_request_decode(&r, data, size, b, err, sizeof err);
    if (rc != SL_RLS_OK) {
        CHECK(rc == SL_RLS_EMALFORMED || rc == SL_RLS_EBOUND);
        CHECK(r.owner_ == NULL && r.n_descriptors == 0 && err[0] != '\0');
        return;
    }
    const sl_rls_bounds *bb = b ? b : &sl_rls_default_bounds;
    check_request(&r, bb);

    size_t len;
    uint8_t *again = repack(&r, &len);
    sl_rls_request r2;
    CHECK(sl_rls_request_decode(&r2, again, len, NULL, err, sizeof err) == SL_RLS_OK);
    check_same(&r, &r2);
    sl_rls_request_free(&r2);
    free(again);

    sl_rls_status *st = calloc(r.n_descriptors + 1, sizeof *st);
    CHECK(st);
    for (size_t i = 0; i < r.n_descriptors; i++) {
        st[i].code = i % 2 ? SL_RLS_CODE_OVER_LIMIT : SL_RLS_CODE_OK;
        st[i].has_limit = r.descriptors[i].has_limit;
        st[i].requests_per_unit = r.descriptors[i].limit_requests_per_unit;
        st[i].unit = r.descriptors[i].limit_unit;
        st[i].limit_name = r.descriptors[i].n_entries ? r.descriptors[i].entries[0].value.p : NULL;
        st[i].has_reset = true;
        st[i].reset_after_ns = (int64_t)(r.descriptors[i].hits_addend % 4000000000000ull);
    }
    sl_rls_response resp = {.overall_code = SL_RLS_CODE_OK, .statuses = st,
                            .n_statuses = r.n_descriptors};
    uint8_t *enc = sl_rls_response_encode(&resp, 5, &len);
    CHECK(enc && len >= 5);
    Envoy__Service__Ratelimit__V3__RateLimitResponse *m =
        envoy__service__ratelimit__v3__rate_limit_response__unpack(NULL, len - 5, enc + 5);
    CHECK(m && m->n_statuses == r.n_descriptors);
    envoy__service__ratelimit__v3__rate_limit_response__free_unpacked(m, NULL);
    sl_free(enc);
    free(st);
    sl_rls_request_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = (uint8_t *)copy_of(data, size);
    one(copy, size, NULL);
    one(copy, size, &small);
    char service[SL_HEALTH_MAX_SERVICE + 1];
    int rc = sl_health_request_decode(copy, size, service);
    CHECK(rc == SL_RLS_OK || rc == SL_RLS_EMALFORMED || rc == SL_RLS_EBOUND);
    if (rc == SL_RLS_OK)
        CHECK(strlen(service) <= SL_HEALTH_MAX_SERVICE);
    free(copy);
    return 0;
}
