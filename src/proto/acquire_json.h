/*
 * acquire_json.h: the JSON bodies of HTTP's /v1/acquire and /v1/release
 * (docs/concurrency.md), decoded into plain fields; the server runs them.
 *
 *   POST /v1/acquire {"key": K, "max_in_flight": N, "ttl_ms": T,
 *                     ["estimator": E], ["min_limit": n], ["initial_limit": n],
 *                     ["priority": P]}
 *   POST /v1/acquire {"key": K, "policy": NAME, ["priority": P], ["partition": NAME]}
 *   POST /v1/release {"key": K, "lease": ID, ["policy": NAME],
 *                     ["latency_ms": MS], ["outcome": "success"|"dropped"|"ignored"]}
 *
 * Bounded: the body's size is the HTTP parser's; strings are at most
 * SL_ACQUIRE_STRING_MAX bytes. Every error names its field.
 */
#ifndef SL_PROTO_ACQUIRE_JSON_H
#define SL_PROTO_ACQUIRE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_ACQUIRE_STRING_MAX 65535

typedef struct sl_acquire_body {
    const char *key, *policy, *partition, *lease, *estimator; /* NULL when absent */
    size_t key_len, policy_len, partition_len, lease_len, estimator_len;
    int64_t max_in_flight, ttl_ms, min_limit, initial_limit; /* -1 when absent */
    const char *priority;   /* a name, or NULL */
    size_t priority_len;
    int64_t priority_num;   /* priority given as a number; -1 otherwise */
    int64_t latency_ns;     /* 0 when absent */
    const char *outcome;    /* NULL when absent */
    size_t outcome_len;
    void *tree;             /* what the strings point into: sl_acquire_body_free */
} sl_acquire_body;

/*
 * Decodes body[0 .. len) for /v1/acquire (release false) or /v1/release
 * (true). Returns 0, or -1 with *err a message and *field the field at
 * fault (NULL for the body as a whole); either way free with
 * sl_acquire_body_free. Checks shapes and what needs no config: key
 * required, policy or max_in_flight and ttl_ms (not both), integers within
 * [1, 2^53], latency_ms positive and at most a day's worth of ms ... the
 * server checks the values against its limits.
 */
int sl_acquire_body_parse(const char *body, size_t len, bool release, sl_acquire_body *b,
                          const char **err, const char **field);

void sl_acquire_body_free(sl_acquire_body *b);

#endif /* SL_PROTO_ACQUIRE_JSON_H */
