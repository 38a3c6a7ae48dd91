/*
 * fuzz_rls_json.c: libFuzzer target for the proto3 JSON of Envoy's rate
 * limit messages (src/proto/rls_json.c).
 *
 * The input is a body for POST /json (the seeds in
 * tests/fuzz/corpus/rls_json are requests in both name styles). It is read
 * under the default bounds and under small ones. CHECK() aborts when a
 * guarantee of rls_json.h breaks: a refusal zeroes the request and says
 * why; a request read is within its bounds, its strings exactly their
 * length with no NUL inside; written again as JSON (by cJSON, in the other
 * name style, integers as strings) it reads back the same; a response with
 * a status per descriptor, named by the descriptors' values, is JSON that
 * cJSON reads, with as many statuses.
 *
 * Build and run: make fuzz (FUZZ_SECONDS=N to change the time per target).
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "fuzz.h"
#include "fuzz_rls.h"
#include "proto/rls.h"
#include "proto/rls_json.h"

static cJSON *string_of(sl_rls_str s)
{
    cJSON *x = cJSON_CreateString(s.p);
    CHECK(x);
    return x;
}

static cJSON *integer_text(unsigned long long v)
{
    char t[24];
    snprintf(t, sizeof t, "%llu", v);
    cJSON *x = cJSON_CreateString(t);
    CHECK(x);
    return x;
}

/* r as JSON, in snake_case, integers as strings; the caller frees it. */
static char *write_again(const sl_rls_request *r)
{
    cJSON *root = cJSON_CreateObject(), *ds = cJSON_CreateArray();
    CHECK(root && ds);
    cJSON_AddItemToObject(root, "domain", string_of(r->domain));
    cJSON_AddItemToObject(root, "hits_addend", integer_text(r->hits_addend));
    for (size_t i = 0; i < r->n_descriptors; i++) {
        const sl_rls_descriptor *d = &r->descriptors[i];
        cJSON *o = cJSON_CreateObject(), *es = cJSON_CreateArray();
        CHECK(o && es);
        for (size_t j = 0; j < d->n_entries; j++) {
            cJSON *e = cJSON_CreateObject();
            CHECK(e);
            cJSON_AddItemToObject(e, "key", string_of(d->entries[j].key));
            cJSON_AddItemToObject(e, "value", string_of(d->entries[j].value));
            cJSON_AddItemToArray(es, e);
        }
        cJSON_AddItemToObject(o, "entries", es);
        if (d->has_limit) {
            cJSON *l = cJSON_CreateObject();
            CHECK(l);
            cJSON_AddItemToObject(l, "requests_per_unit", integer_text(d->limit_requests_per_unit));
            cJSON_AddNumberToObject(l, "unit", (double)d->limit_unit);
            cJSON_AddItemToObject(o, "limit", l);
        }
        if (d->has_hits_addend)
            cJSON_AddItemToObject(o, "hits_addend", integer_text(d->hits_addend));
        cJSON_AddItemToArray(ds, o);
    }
    cJSON_AddItemToObject(root, "descriptors", ds);
    char *text = cJSON_PrintUnformatted(root);
    CHECK(text);
    cJSON_Delete(root);
    return text;
}

static void one(const char *data, size_t size, const sl_rls_bounds *b)
{
    sl_rls_request r;
    char err[256];
    int rc = sl_rls_request_from_json(&r, data, size, b, err, sizeof err);
    if (rc != SL_RLS_OK) {
        CHECK(rc == SL_RLS_EMALFORMED || rc == SL_RLS_EBOUND);
        CHECK(r.owner_ == NULL && r.n_descriptors == 0 && err[0] != '\0');
        return;
    }
    const sl_rls_bounds *bb = b ? b : &sl_rls_default_bounds;
    check_request(&r, bb);

    char *again = write_again(&r);
    sl_rls_request r2;
    rc = sl_rls_request_from_json(&r2, again, strlen(again), NULL, err, sizeof err);
    if (rc != SL_RLS_OK)
        fprintf(stderr, "%s: %s\n", again, err);
    CHECK(rc == SL_RLS_OK);
    check_same(&r, &r2);
    sl_rls_request_free(&r2);
    free(again);

    sl_rls_status *st = calloc(r.n_descriptors + 1, sizeof *st);
    sl_rls_header *hs = calloc(r.n_descriptors + 1, sizeof *hs);
    CHECK(st && hs);
    for (size_t i = 0; i < r.n_descriptors; i++) {
        const sl_rls_descriptor *d = &r.descriptors[i];
        st[i].code = i % 2 ? SL_RLS_CODE_OVER_LIMIT : SL_RLS_CODE_OK;
        st[i].has_limit = d->has_limit;
        st[i].requests_per_unit = d->limit_requests_per_unit;
        st[i].unit = d->limit_unit;
        st[i].limit_name = d->n_entries ? d->entries[0].value.p : NULL;
        st[i].limit_remaining = (uint32_t)d->hits_addend;
        st[i].has_reset = true;
        st[i].reset_after_ns = (int64_t)(d->hits_addend >> 1);
        hs[i].key = d->n_entries ? d->entries[0].key.p : r.domain.p;
        hs[i].value = r.domain.p;
    }
    sl_rls_response resp = {.overall_code = SL_RLS_CODE_OK,
                            .statuses = st,
                            .n_statuses = r.n_descriptors,
                            .response_headers = hs,
                            .n_response_headers = r.n_descriptors,
                            .raw_body = (const uint8_t *)r.domain.p,
                            .raw_body_len = r.domain.n};
    size_t len;
    char *json = sl_rls_response_to_json(&resp, &len);
    CHECK(json && strlen(json) == len);
    cJSON *tree = cJSON_ParseWithLength(json, len);
    CHECK(tree);
    const cJSON *sts = cJSON_GetObjectItemCaseSensitive(tree, "statuses");
    CHECK(r.n_descriptors == 0 ? sts == NULL
                               : (size_t)cJSON_GetArraySize(sts) == r.n_descriptors);
    cJSON_Delete(tree);
    sl_free(json);
    free(st);
    free(hs);
    sl_rls_request_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = copy_of(data, size);
    one(copy, size, NULL);
    one(copy, size, &small);
    free(copy);
    return 0;
}
