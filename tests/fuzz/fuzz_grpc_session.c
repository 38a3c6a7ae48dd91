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
 * GOAWAY then ends the session. CHECK() aborts when the session breaks its
 * contract: send gives bytes or none, never an error before a GOAWAY is
 * drained; ASan sees every leak and overrun.
 *
 * Build and run: make fuzz (FUZZ_SECONDS=N to change the time per target).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "server/grpc_session.h"

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
    sl_grpc_session *g = sl_grpc_session_new(1, NULL, NULL, NULL);
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
