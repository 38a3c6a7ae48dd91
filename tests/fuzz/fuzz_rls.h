/*
 * fuzz_rls.h: what the fuzz targets of a RateLimitRequest's decoders
 * (fuzz_rls.c: the wire; fuzz_rls_json.c: proto3 JSON) check of what they
 * decode, and the small bounds they also decode under.
 */
#ifndef SL_FUZZ_RLS_H
#define SL_FUZZ_RLS_H

#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "proto/rls.h"

static const sl_rls_bounds small = {
    .max_message = 512,
    .max_descriptors = 3,
    .max_entries = 2,
    .max_domain = 8,
    .max_key = 8,
    .max_value = 16,
};

static void check_str(sl_rls_str s, size_t max)
{
    CHECK(s.p != NULL && s.n <= max);
    CHECK(strlen(s.p) == s.n); /* NUL-terminated, and no NUL inside */
}

static bool same_str(sl_rls_str a, sl_rls_str b)
{
    return a.n == b.n && memcmp(a.p, b.p, a.n) == 0;
}

static void check_request(const sl_rls_request *r, const sl_rls_bounds *b)
{
    check_str(r->domain, b->max_domain);
    CHECK(r->n_descriptors <= b->max_descriptors);
    for (size_t i = 0; i < r->n_descriptors; i++) {
        const sl_rls_descriptor *d = &r->descriptors[i];
        CHECK(d->n_entries <= b->max_entries);
        CHECK(d->limit_unit <= SL_RLS_UNIT_WEEK);
        for (size_t j = 0; j < d->n_entries; j++) {
            check_str(d->entries[j].key, b->max_key);
            check_str(d->entries[j].value, b->max_value);
        }
    }
}

static void check_same(const sl_rls_request *a, const sl_rls_request *b)
{
    CHECK(same_str(a->domain, b->domain) && a->hits_addend == b->hits_addend);
    CHECK(a->n_descriptors == b->n_descriptors);
    for (size_t i = 0; i < a->n_descriptors; i++) {
        const sl_rls_descriptor *x = &a->descriptors[i], *y = &b->descriptors[i];
        CHECK(x->n_entries == y->n_entries && x->has_limit == y->has_limit);
        CHECK(x->has_hits_addend == y->has_hits_addend && x->hits_addend == y->hits_addend);
        CHECK(x->limit_requests_per_unit == y->limit_requests_per_unit);
        CHECK(x->limit_unit == y->limit_unit);
        for (size_t j = 0; j < x->n_entries; j++) {
            CHECK(same_str(x->entries[j].key, y->entries[j].key));
            CHECK(same_str(x->entries[j].value, y->entries[j].value));
        }
    }
}

#endif
