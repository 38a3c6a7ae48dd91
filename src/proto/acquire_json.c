/*
 * acquire_json.c: /v1/acquire's and /v1/release's bodies (acquire_json.h).
 */
#include "proto/acquire_json.h"

#include <string.h>

#include "proto/cjson_parse.h"
#include "sluice.h"

/* JSON numbers are doubles: integers are exact up to 2^53. */
#define SL_JSON_INT_MAX 9007199254740992.0

static bool sl_json_int(const cJSON *m, int64_t *out)
{
    if (!cJSON_IsNumber(m))
        return false;
    double v = m->valuedouble;
    if (!(v >= 1 && v <= SL_JSON_INT_MAX) || v != (double)(int64_t)v)
        return false;
    *out = (int64_t)v;
    return true;
}

static bool sl_json_str(const cJSON *m, const char **p, size_t *n)
{
    if (!cJSON_IsString(m) || !m->valuestring)
        return false;
    size_t len = strlen(m->valuestring);
    if (len == 0 || len > SL_ACQUIRE_STRING_MAX)
        return false;
    *p = m->valuestring;
    *n = len;
    return true;
}

int sl_acquire_body_parse(const char *body, size_t len, bool release, sl_acquire_body *b,
                          const char **err, const char **field)
{
    memset(b, 0, sizeof *b);
    b->max_in_flight = b->ttl_ms = b->min_limit = b->initial_limit = b->priority_num = -1;
    *err = NULL;
    *field = NULL;
    cJSON *root = len > 0 ? sl_cjson_parse(body, len, NULL) : NULL;
    b->tree = root;
    if (!cJSON_IsObject(root)) {
        *err = release ? "the body must be a JSON object: {\"key\": K, \"lease\": ID, ...}"
                       : "the body must be a JSON object: {\"key\": K, \"policy\": NAME} or "
                         "{\"key\": K, \"max_in_flight\": N, \"ttl_ms\": T}";
        return -1;
    }
    /* Each field's rule; the release's fields, the acquire's, or both. */
    for (const cJSON *m = root->child; m; m = m->next) {
        const char *f = m->string ? m->string : "";
        *field = f;
        if (strcmp(f, "key") == 0) {
            if (!sl_json_str(m, &b->key, &b->key_len))
                return *err = "key must be a non-empty string", -1;
        } else if (strcmp(f, "policy") == 0) {
            if (!sl_json_str(m, &b->policy, &b->policy_len))
                return *err = "policy must be a non-empty string", -1;
        } else if (!release && strcmp(f, "partition") == 0) {
            if (!sl_json_str(m, &b->partition, &b->partition_len))
                return *err = "partition must be a non-empty string", -1;
        } else if (!release && strcmp(f, "estimator") == 0) {
            if (!sl_json_str(m, &b->estimator, &b->estimator_len))
                return *err = "estimator must be aimd, vegas, gradient2 or anchored", -1;
        } else if (!release && strcmp(f, "priority") == 0) {
            if (cJSON_IsNumber(m)) {
                double v = m->valuedouble;
                if (!(v >= 0 && v <= 2) || v != (double)(int64_t)v)
                    return *err = "priority must be critical, default or sheddable (or 0, 1, 2)",
                           -1;
                b->priority_num = (int64_t)v;
            } else if (!sl_json_str(m, &b->priority, &b->priority_len)) {
                return *err = "priority must be critical, default or sheddable (or 0, 1, 2)", -1;
            }
        } else if (!release && (strcmp(f, "max_in_flight") == 0 || strcmp(f, "ttl_ms") == 0 ||
                                strcmp(f, "min_limit") == 0 ||
                                strcmp(f, "initial_limit") == 0)) {
            static const char *const msg[] = {
                "max_in_flight must be a positive integer", "ttl_ms must be a positive integer",
                "min_limit must be a positive integer", "initial_limit must be a positive integer"};
            int i = strcmp(f, "max_in_flight") == 0 ? 0
                    : strcmp(f, "ttl_ms") == 0      ? 1
                    : strcmp(f, "min_limit") == 0   ? 2
                                                    : 3;
            int64_t *to[] = {&b->max_in_flight, &b->ttl_ms, &b->min_limit, &b->initial_limit};
            if (!sl_json_int(m, to[i]))
                return *err = msg[i], -1;
        } else if (release && strcmp(f, "lease") == 0) {
            if (!sl_json_str(m, &b->lease, &b->lease_len))
                return *err = "lease must be a string, as /v1/acquire gave it", -1;
        } else if (release && strcmp(f, "latency_ms") == 0) {
            double v = cJSON_IsNumber(m) ? m->valuedouble : -1;
            if (!(v > 0 && v <= (double)(SL_SPAN_MAX / 1000000)))
                return *err = "latency_ms must be a positive number of milliseconds", -1;
            int64_t ns = (int64_t)(v * 1e6 + 0.5);
            b->latency_ns = ns < 1 ? 1 : ns;
        } else if (release && strcmp(f, "outcome") == 0) {
            if (!sl_json_str(m, &b->outcome, &b->outcome_len))
                return *err = "outcome must be success, dropped or ignored", -1;
        } else {
            return *err = release ? "unknown field: a release takes key, lease, policy, "
                                    "latency_ms and outcome"
                                  : "unknown field: an acquire takes key, policy, partition, "
                                    "priority, or max_in_flight, ttl_ms, estimator, min_limit "
                                    "and initial_limit",
                   -1;
        }
    }
    *field = "key";
    if (!b->key)
        return *err = "key is required", -1;
    if (release) {
        *field = "lease";
        return b->lease ? 0 : (*err = "lease is required", -1);
    }
    bool adhoc = b->max_in_flight >= 0 || b->ttl_ms >= 0 || b->estimator || b->min_limit >= 0 ||
                 b->initial_limit >= 0;
    *field = "policy";
    if (b->policy && adhoc)
        return *err = "a policy's limit is its own: no max_in_flight, ttl_ms, estimator, "
                      "min_limit or initial_limit beside policy",
               -1;
    if (!b->policy && b->partition)
        return *field = "partition", *err = "partition needs a policy", -1;
    if (!b->policy && (b->max_in_flight < 0 || b->ttl_ms < 0)) {
        *field = b->max_in_flight < 0 ? "max_in_flight" : "ttl_ms";
        return *err = "policy, or max_in_flight and ttl_ms, are required", -1;
    }
    *field = NULL;
    return 0;
}

void sl_acquire_body_free(sl_acquire_body *b)
{
    cJSON_Delete(b->tree);
    b->tree = NULL;
}
