/*
 * fuzz_acquire_json.c: libFuzzer target for the bodies of /v1/acquire and
 * /v1/release (src/proto/acquire_json.c), run on through the command layer
 * (src/cmd/adaptive.c) as the HTTP face runs them.
 *
 * The input is read as an acquire and as a release body. CHECK() aborts
 * when a guarantee breaks: a refusal says why; a body read has its key, its
 * strings exactly their length and within bounds, and a policy never beside
 * an ad-hoc limit. An ad-hoc acquire whose values are in range is run on a
 * real table of limiters, released again with the body's latency and
 * outcome on a virtual clock (1 ms on per input, none between an acquire
 * and its release: the lease is held), and must leave nothing in flight.
 *
 * Build and run: make fuzz (FUZZ_SECONDS=N to change the time per target).
 */
#include <stdint.h>
#include <string.h>

#include "cmd/adaptive.h"
#include "fuzz.h"
#include "proto/acquire_json.h"

static sl_limiters *table;
static const uint64_t lease_key[2] = {0x0123456789abcdefULL, 0xfedcba9876543210ULL};
static int64_t now = INT64_C(1000000000);

static int64_t virtual_now(sl_cmd_ctx *c)
{
    (void)c;
    return now;
}

static void check_str(const char *p, size_t n)
{
    if (!p)
        return;
    CHECK(n >= 1 && n <= SL_ACQUIRE_STRING_MAX && strlen(p) == n);
}

static void check_body(const sl_acquire_body *b)
{
    CHECK(b->key);
    check_str(b->key, b->key_len);
    check_str(b->policy, b->policy_len);
    check_str(b->partition, b->partition_len);
    check_str(b->lease, b->lease_len);
    check_str(b->estimator, b->estimator_len);
    check_str(b->priority, b->priority_len);
    check_str(b->outcome, b->outcome_len);
    CHECK(b->priority_num >= -1 && b->priority_num <= 2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!table) {
        table = sl_limiters_new(64, 256);
        CHECK(table);
    }
    char *body = copy_of(data, size);
    now += 1000000;
    sl_cmd_ctx c = {.lease_key = lease_key, .limiters = table, .now_mono = virtual_now,
                    .max_key_bytes = 200};
    for (int release = 0; release < 2; release++) {
        sl_acquire_body b;
        const char *err, *field;
        int rc = sl_acquire_body_parse(body, size, release, &b, &err, &field);
        if (rc != 0) {
            CHECK(err && *err);
            sl_acquire_body_free(&b);
            continue;
        }
        CHECK(!err);
        check_body(&b);
        if (!release) {
            CHECK(!b.policy || (b.max_in_flight < 0 && b.ttl_ms < 0 && !b.estimator));
            CHECK(b.policy || (b.max_in_flight >= 1 && b.ttl_ms >= 1));
        }
        sl_limiter_config cfg;
        char msg[200], lease[SL_LEASE_TEXT + 1];
        if (!release && !b.policy && b.max_in_flight <= 64 &&
            sl_adaptive_adhoc(&cfg, b.estimator, b.estimator_len, b.max_in_flight, b.ttl_ms,
                              b.min_limit, b.initial_limit, msg, sizeof msg)) {
            CHECK(sl_limiter_config_check(&cfg) == SL_OK);
            sl_limiter_decision d;
            int cls = b.priority_num >= 0 ? (int)b.priority_num : SL_PRIO_DEFAULT;
            rc = sl_adaptive_acquire(&c, b.key, b.key_len, NULL, -1, &cfg, cls, 0, &d, lease);
            CHECK(rc == SL_OK || rc == SL_ERR_KEY || rc == SL_ERR_NOMEM);
            if (rc == SL_OK && d.admitted) {
                int held;
                CHECK(strlen(lease) == SL_LEASE_TEXT);
                CHECK(sl_adaptive_release(&c, b.key, b.key_len, NULL, 0, lease, SL_LEASE_TEXT,
                                          SL_ADAPT_SUCCESS, 0, &held) == SL_OK);
                CHECK(held == 1);
                sl_limiter_stats st;
                int found;
                CHECK(sl_adaptive_stats(&c, b.key, b.key_len, NULL, 0, &st, &found) == SL_OK);
                CHECK(found && st.in_flight == 0);
            }
        } else if (release) {
            int outcome = b.outcome ? sl_outcome_parse(b.outcome, b.outcome_len) : 0;
            int held = -1;
            if (outcome >= 0) {
                rc = sl_adaptive_release(&c, b.key, b.key_len, b.policy, b.policy_len, b.lease,
                                         b.lease_len, (sl_adapt_outcome)outcome, b.latency_ns,
                                         &held);
                CHECK(rc == SL_OK ? held == 0 || held == 1 : rc == SL_ERR_KEY);
            }
        }
        sl_acquire_body_free(&b);
    }
    free(body);
    return 0;
}
