/*
 * ShouldRateLimit over the backend layer (src/cmd/rls.c), on the memory
 * store and a virtual clock: what each descriptor's status says, when a
 * window ends and a bucket refills, to the nanosecond.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "cmd/rls.h"
#include "testlib.h"

static struct {
    sl_store *store;
    sl_backend *be;
    sl_backend_worker *bw;
    int64_t now;
    sl_envoy_config *envoy;
    int decided, over, near, shadow;
    int64_t hits;
} H;

static void setup(void)
{
    memset(&H, 0, sizeof H);
    const char *err;
    cr_assert_eq(sl_store_new(NULL, &H.store), SL_OK);
    cr_assert_not_null(H.be = sl_backend_memory(H.store));
    cr_assert_not_null(H.bw = H.be->ops->attach(H.be, NULL, &H.now, &err));
    /* A minute's window of the virtual clock (Unix time, offset 0) begins
     * at 1 000 020 s: 40 s into one. */
    H.now = 1000020 * NS_PER_SEC + 40 * NS_PER_SEC;
    cr_assert_not_null(H.envoy = sl_envoy_new());
    static const char yaml[] =
        "domain: edge\n"
        "descriptors:\n"
        "  - key: ip\n"
        "    rate_limit: {unit: minute, requests_per_unit: 3, name: per-ip}\n"
        "  - key: user\n"
        "    rate_limit: {unit: second, requests_per_unit: 2, algorithm: token_bucket, burst: 4}\n"
        "  - key: shadow\n"
        "    shadow_mode: true\n"
        "    rate_limit: {unit: hour, requests_per_unit: 1}\n"
        "  - key: zero\n"
        "    rate_limit: {unit: hour, requests_per_unit: 0}\n";
    char msg[256];
    cr_assert_eq(sl_envoy_add(H.envoy, yaml, strlen(yaml), "edge.yaml", msg, sizeof msg), 0,
                 "%s", msg);
    sl_envoy_align(H.envoy, 0);
}

static void teardown(void)
{
    sl_envoy_free(H.envoy);
    H.be->ops->detach(H.bw);
    H.be->ops->free(H.be);
    sl_store_free(H.store);
}

TestSuite(rls_cmd, .init = setup, .fini = teardown);

static void count(void *arg, const char *key, size_t len, int64_t hits, bool over, bool near,
                  bool shadow)
{
    H.decided++;
    H.over += over;
    H.near += near;
    H.shadow += shadow;
    H.hits += hits;
}

static void never_done(sl_rls_call *call, void *arg)
{
    cr_assert_fail("the memory store answers in the call");
}

/* One request of one descriptor (key, value), its hits given or not
 * (hits < 0); the answer in *resp, its call to free. */
static sl_rls_call *ask(const char *key, const char *value, int64_t hits, sl_rls_response *resp)
{
    static sl_rls_entry e;
    static sl_rls_descriptor d;
    e = (sl_rls_entry){{key, strlen(key)}, {value, strlen(value)}};
    d = (sl_rls_descriptor){.entries = &e, .n_entries = 1};
    if (hits >= 0) {
        d.has_hits_addend = true;
        d.hits_addend = (uint64_t)hits;
    }
    sl_rls_request r = {.domain = {"edge", 4}, .descriptors = &d, .n_descriptors = 1};
    static const char *const names[3] = {"L", "R", "S"};
    sl_rls_ctx c = {.be = H.be, .bw = H.bw, .envoy = H.envoy, .now = H.now,
                    .header_names = names, .decided = count};
    sl_rls_call *call;
    char err[128];
    cr_assert_eq(sl_rls_start(&c, &r, never_done, NULL, &call, err, sizeof err), SL_OK, "%s",
                 err);
    char msg[128];
    cr_assert_eq(sl_rls_result(call, resp, msg, sizeof msg), SL_OK, "%s", msg);
    cr_assert_eq(resp->n_statuses, 1);
    return call;
}

Test(rls_cmd, a_fixed_window_counts_down_and_ends_on_the_minute)
{
    sl_rls_response resp;
    for (uint32_t i = 0; i < 3; i++) {
        sl_rls_call *call = ask("ip", "10.0.0.1", -1, &resp);
        const sl_rls_status *s = &resp.statuses[0];
        cr_assert_eq(resp.overall_code, SL_RLS_CODE_OK);
        cr_assert_eq(s->code, SL_RLS_CODE_OK);
        cr_assert(s->has_limit);
        cr_assert_eq(s->requests_per_unit, 3);
        cr_assert_eq(s->unit, SL_RLS_UNIT_MINUTE);
        cr_assert_str_eq(s->limit_name, "per-ip");
        cr_assert_eq(s->limit_remaining, 2 - i);
        cr_assert_eq(s->reset_after_ns, 20 * NS_PER_SEC);
        cr_assert_eq(resp.n_response_headers, 3);
        cr_assert_str_eq(resp.response_headers[1].value, i == 0 ? "2" : i == 1 ? "1" : "0");
        cr_assert_str_eq(resp.response_headers[2].value, "20");
        sl_rls_free(call);
    }
    sl_rls_call *call = ask("ip", "10.0.0.1", -1, &resp);
    cr_assert_eq(resp.overall_code, SL_RLS_CODE_OVER_LIMIT);
    cr_assert_eq(resp.statuses[0].limit_remaining, 0);
    sl_rls_free(call);
    /* a key over on its first call (its hits past the limit) holds nothing, and its
     * window still ends on the minute */
    call = ask("ip", "10.0.0.3", 4, &resp);
    cr_assert_eq(resp.overall_code, SL_RLS_CODE_OVER_LIMIT);
    cr_assert_eq(resp.statuses[0].reset_after_ns, 20 * NS_PER_SEC);
    sl_rls_free(call);
    /* another value has its own counter */
    call = ask("ip", "10.0.0.2", -1, &resp);
    cr_assert_eq(resp.statuses[0].limit_remaining, 2);
    sl_rls_free(call);
    /* one nanosecond before the minute ends, still over; at it, a new window */
    H.now += 20 * NS_PER_SEC - 1;
    call = ask("ip", "10.0.0.1", -1, &resp);
    cr_assert_eq(resp.overall_code, SL_RLS_CODE_OVER_LIMIT);
    cr_assert_eq(resp.statuses[0].reset_after_ns, 1);
    sl_rls_free(call);
    H.now += 1;
    call = ask("ip", "10.0.0.1", -1, &resp);
    cr_assert_eq(resp.overall_code, SL_RLS_CODE_OK);
    cr_assert_eq(resp.statuses[0].limit_remaining, 2);
    sl_rls_free(call);
    /* 4 + 1 + 2 + 1 decided, 3 over, the third of a window near its limit */
    cr_assert_eq(H.decided, 8);
    cr_assert_eq(H.over, 3);
    cr_assert_eq(H.near, 1);
}

Test(rls_cmd, a_token_bucket_refills_at_its_rate)
{
    sl_rls_response resp;
    /* a burst of 4 taken at once (hits 4), then refilled at 2 a second */
    sl_rls_call *call = ask("user", "u", 4, &resp);
    cr_assert_eq(resp.overall_code, SL_RLS_CODE_OK);
    cr_assert_eq(resp.statuses[0].limit_remaining, 0);
    sl_rls_free(call);
    call = ask("user", "u", -1, &resp);
    cr_assert_eq(resp.overall_code, SL_RLS_CODE_OVER_LIMIT);
    sl_rls_free(call);
    H.now += NS_PER_SEC / 2 - 1;
    call = ask("user", "u", -1, &resp);
    cr_assert_eq(resp.overall_code, SL_RLS_CODE_OVER_LIMIT);
    sl_rls_free(call);
    H.now += 1;
    call = ask("user", "u", -1, &resp);
    cr_assert_eq(resp.overall_code, SL_RLS_CODE_OK);
    sl_rls_free(call);
    /* hits 0 asks without counting */
    call = ask("user", "u", 0, &resp);
    cr_assert_eq(resp.overall_code, SL_RLS_CODE_OK);
    cr_assert_eq(resp.statuses[0].limit_remaining, 0);
    sl_rls_free(call);
    cr_assert_eq(H.hits, 4 + 1 + 1 + 1 + 0);
}

Test(rls_cmd, shadow_mode_is_ok_and_counted_and_zero_is_always_over)
{
    sl_rls_response resp;
    sl_rls_call *call = ask("shadow", "s", -1, &resp);
    cr_assert_eq(resp.overall_code, SL_RLS_CODE_OK);
    sl_rls_free(call);
    call = ask("shadow", "s", -1, &resp);
    cr_assert_eq(resp.overall_code, SL_RLS_CODE_OK); /* over, and let through */
    cr_assert_eq(resp.statuses[0].limit_remaining, 0);
    sl_rls_free(call);
    cr_assert_eq(H.shadow, 1);
    cr_assert_eq(H.over, 1);
    call = ask("zero", "z", -1, &resp);
    cr_assert_eq(resp.overall_code, SL_RLS_CODE_OVER_LIMIT);
    cr_assert_eq(resp.statuses[0].requests_per_unit, 0);
    cr_assert_eq(resp.statuses[0].unit, SL_RLS_UNIT_HOUR);
    /* the hour's window still ends where the reference says */
    int64_t hour = 3600 * NS_PER_SEC;
    cr_assert(resp.statuses[0].has_reset);
    cr_assert_eq(resp.statuses[0].reset_after_ns, hour - H.now % hour);
    sl_rls_free(call);
    /* no rule: OK, no limit, no headers */
    call = ask("nothing", "n", -1, &resp);
    cr_assert_eq(resp.overall_code, SL_RLS_CODE_OK);
    cr_assert(!resp.statuses[0].has_limit);
    cr_assert_eq(resp.n_response_headers, 0);
    sl_rls_free(call);
}

Test(rls_cmd, an_empty_request_is_refused_and_stays_the_callers)
{
    sl_rls_request r = {.domain = {"edge", 4}};
    sl_rls_ctx c = {.be = H.be, .bw = H.bw, .envoy = H.envoy, .now = H.now};
    sl_rls_call *call;
    char err[128];
    cr_assert_eq(sl_rls_start(&c, &r, never_done, NULL, &call, err, sizeof err),
                 SL_ERR_ARGUMENT);
    cr_assert_str_eq(err, "rate limit descriptor list must not be empty");
    cr_assert_null(call);
    cr_assert_eq(r.domain.n, 4);
}

Test(rls_cmd, a_limit_override_of_a_week_has_its_own_counter)
{
    sl_rls_entry e = {{"ip", 2}, {"10.0.0.9", 8}};
    sl_rls_descriptor d = {.entries = &e, .n_entries = 1, .has_limit = true,
                           .limit_requests_per_unit = 1, .limit_unit = SL_RLS_UNIT_WEEK};
    sl_rls_ctx c = {.be = H.be, .bw = H.bw, .envoy = H.envoy, .now = H.now};
    char err[128];
    for (int i = 0; i < 2; i++) {
        sl_rls_request r = {.domain = {"edge", 4}, .descriptors = &d, .n_descriptors = 1};
        sl_rls_call *call;
        cr_assert_eq(sl_rls_start(&c, &r, never_done, NULL, &call, err, sizeof err), SL_OK,
                     "%s", err);
        sl_rls_response resp;
        cr_assert_eq(sl_rls_result(call, &resp, err, sizeof err), SL_OK);
        cr_assert_eq(resp.statuses[0].unit, SL_RLS_UNIT_WEEK);
        cr_assert_eq(resp.statuses[0].requests_per_unit, 1);
        cr_assert_str_eq(resp.statuses[0].limit_name, "");
        /* a week's windows begin on Thursdays, at multiples of 7 days since the epoch */
        int64_t week = 7 * 86400 * NS_PER_SEC;
        cr_assert_eq(resp.statuses[0].reset_after_ns, week - H.now % week);
        cr_assert_eq(resp.overall_code, i == 0 ? SL_RLS_CODE_OK : SL_RLS_CODE_OVER_LIMIT);
        sl_rls_free(call);
    }
    /* the rule's own counter (3 a minute) is untouched */
    sl_rls_response resp;
    sl_rls_call *call = ask("ip", "10.0.0.9", -1, &resp);
    cr_assert_eq(resp.statuses[0].limit_remaining, 2);
    sl_rls_free(call);
}
