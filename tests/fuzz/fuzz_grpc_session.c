/*
 * fuzz_grpc_session.c: libFuzzer target for the gRPC face's HTTP/2 session
 * (src/server/grpc_session.c): what a client sends on a connection.
 *
 * The first input byte sets how the rest is cut into reads (1 to 256 bytes
 * each, as a socket may hand them over); the seeds in
 * tests/fuzz/corpus/grpc_session are real clients' bytes (python3-h2):
 * a health check, a ShouldRateLimit, a request left open. Between reads
 * the session's output is drained and its deadlines looked at on a virtual
 * clock that moves 100 ms per read, so that deadlines pass. After bytes
 * that are not HTTP/2 nothing more is fed, as the server would close; a
 * GOAWAY then ends the session. ShouldRateLimit is served as sluiced
 * serves it (cmd/rls.h over the memory store, an Envoy configuration of a
 * few rules), so that the whole call runs: decoding, matching, the takes,
 * the answer. An odd first byte sets a token, which the calls must then
 * bear. CHECK() aborts when the session breaks its contract: send gives
 * bytes or none, never an error before a GOAWAY is drained; ASan sees
 * every leak and overrun.
 *
 * Build and run: make fuzz (FUZZ_SECONDS=N to change the time per target).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/rls.h"
#include "fuzz.h"
#include "proto/grpc_frame.h"
#include "server/grpc_session.h"

static struct {
    sl_store *store;
    sl_backend *be;
    sl_backend_worker *bw;
    sl_envoy_config *envoy;
    int64_t now;
} F;

static void init_once(void)
{
    if (F.be)
        return;
    /* A cap, so that the keys of millions of inputs are evicted, not kept. */
    sl_store_config cfg = {.max_memory = 8u << 20};
    const char *err;
    CHECK(sl_store_new(&cfg, &F.store) == SL_OK);
    CHECK((F.be = sl_backend_memory(F.store)) != NULL);
    CHECK((F.bw = F.be->ops->attach(F.be, NULL, &F.now, &err)) != NULL);
    static const char yaml[] =
        "domain: edge\n"
        "descriptors:\n"
        "  - key: remote_address\n"
        "    rate_limit: {unit: second, requests_per_unit: 2, name: ip}\n"
        "  - key: k\n"
        "    value: v*\n"
        "    share_threshold: true\n"
        "    detailed_metric: true\n"
        "    rate_limit: {unit: minute, requests_per_unit: 3, algorithm: token_bucket, burst: 5}\n"
        "    rate_limits: [{unit: hour, requests_per_unit: 0}]\n"
        "    descriptors:\n"
        "      - key: user\n"
        "        shadow_mode: true\n"
        "        rate_limit: {unit: day, requests_per_unit: 1, replaces: [{name: ip}]}\n"
        "  - key: free\n"
        "    rate_limit: {unlimited: true}\n";
    char msg[256];
    CHECK((F.envoy = sl_envoy_new()) != NULL);
    CHECK(sl_envoy_add(F.envoy, yaml, sizeof yaml - 1, "edge.yaml", msg, sizeof msg) == 0);
}

static void never_later(sl_rls_call *call, void *arg)
{
    CHECK(!"the memory store answers in the call");
}

static void stats(void *arg, const char *key, size_t len, int64_t hits, bool over, bool near,
                  bool shadow)
{
    CHECK(len <= SL_RLS_METRIC_KEY_MAX && hits >= 0);
}

static void svc_rate_limit(void *arg, sl_grpc_call *call, const uint8_t *msg, size_t len)
{
    sl_rls_request r;
    char err[256];
    if (sl_rls_request_decode(&r, msg, len, NULL, err, sizeof err) != SL_RLS_OK) {
        sl_grpc_answer_status(call, SL_GRPC_INVALID_ARGUMENT, err);
        return;
    }
    static const char *const names[3] = {"RateLimit-Limit", "RateLimit-Remaining",
                                         "RateLimit-Reset"};
    sl_rls_ctx c = {.be = F.be, .bw = F.bw, .envoy = F.envoy, .now = F.now, .max_key_bytes = 512,
                    .header_names = names, .decided = stats};
    sl_rls_call *rc;
    int st = sl_rls_start(&c, &r, never_later, NULL, &rc, err, sizeof err);
    if (st < 0) {
        sl_rls_request_free(&r);
        sl_grpc_answer_status(call, SL_GRPC_INVALID_ARGUMENT, err);
        return;
    }
    CHECK(st == SL_OK);
    sl_rls_response resp;
    CHECK(sl_rls_result(rc, &resp, NULL, 0) == SL_OK);
    CHECK(resp.n_statuses == r.n_descriptors || r.n_descriptors == 0);
    size_t n;
    uint8_t *out = sl_rls_response_encode(&resp, SL_GRPC_PREFIX, &n);
    sl_rls_free(rc);
    if (out)
        sl_grpc_answer(call, out, n);
    else
        sl_grpc_answer_status(call, SL_GRPC_RESOURCE_EXHAUSTED, "out of memory");
}

static void svc_cancel(void *arg, sl_grpc_call *call, void *data)
{
    CHECK(!"a call answered in the call is never cancelled");
}

static bool svc_serving(void *arg)
{
    return true;
}

static void svc_wake(void *arg)
{
    CHECK(!"answers come in recv, never later");
}

static const sl_grpc_service service = {svc_rate_limit, svc_cancel, svc_serving, svc_wake};

static size_t drain(sl_grpc_session *g)
{
    size_t total = 0;
    for (int i = 0; i < 10000; i++) {
        const uint8_t *data;
        ssize_t n = sl_grpc_session_send(g, &data);
        CHECK(n >= 0);
        if (n == 0)
            return total;
        CHECK(data != NULL);
        total += (size_t)n;
    }
    CHECK(!"the session never stops sending");
    return total;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t chunk = (size_t)data[0] + 1;
    uint8_t *copy = (uint8_t *)copy_of(data + 1, size - 1);
    size_t n = size - 1;
    init_once();
    sl_grpc_session *g = sl_grpc_session_new(1, &service, NULL, data[0] & 1 ? "pw" : NULL);
    CHECK(g);
    drain(g);
    int64_t now = 1000000000;
    for (size_t off = 0; off < n; off += chunk) {
        size_t k = n - off < chunk ? n - off : chunk;
        /* An exact-size copy of each read, so that ASan sees a read past it. */
        uint8_t *read = (uint8_t *)copy_of(copy + off, k);
        int rc = sl_grpc_session_recv(g, read, k, now);
        free(read);
        drain(g);
        if (rc != 0)
            break;
        now += 100000000;
        F.now += 100000000; /* the store's clock moves on across inputs */
        sl_grpc_session_tick(g, now);
        drain(g);
    }
    sl_grpc_session_tick(g, now + 3600000000000);
    drain(g);
    sl_grpc_session_goaway(g);
    drain(g);
    sl_grpc_session_free(g);
    free(copy);
    return 0;
}
