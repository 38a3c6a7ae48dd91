/*
 * fuzz_grpc_frame.c: libFuzzer target for gRPC's framing and header values
 * (src/proto/grpc_frame.c).
 *
 * The first input byte picks what to fuzz, the rest is the material:
 *   0  messages, read one after another from the material as a stream of
 *      length-prefixed frames (the bound: the second byte times 16)
 *   1  a grpc-timeout value
 *   2  a grpc-message: encoded, then decoded back
 *   3  a grpc-message value as received: decoded
 *   4  a content-type value
 * CHECK() aborts when a guarantee of grpc_frame.h breaks: a message lies
 * within its input and under its bound, and its prefix written again is the
 * input's; a timeout is a count of nanoseconds >= 0 whose value text reads
 * back; an encoding is printable ASCII without a bare '%', at most 3 bytes
 * a byte, cut at no escape, and decodes to the message; a decoding is no
 * longer than its input.
 *
 * Build and run: make fuzz (FUZZ_SECONDS=N to change the time per target).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proto/grpc_frame.h"

static void messages(const uint8_t *p, size_t n)
{
    if (n == 0)
        return;
    size_t max = (size_t)p[0] * 16;
    p++;
    n--;
    while (n > 0) {
        sl_grpc_message m;
        long rc = sl_grpc_message_parse(p, n, max, &m);
        if (rc < 0) {
            CHECK(rc == SL_GRPC_MALFORMED || rc == SL_GRPC_INCOMPLETE || rc == SL_GRPC_TOO_LARGE);
            return;
        }
        CHECK((size_t)rc <= n && (size_t)rc == m.len + SL_GRPC_PREFIX && m.len <= max);
        CHECK(m.data == p + SL_GRPC_PREFIX);
        uint8_t pre[SL_GRPC_PREFIX];
        sl_grpc_prefix_write(pre, m.compressed, (uint32_t)m.len);
        CHECK(memcmp(pre, p, SL_GRPC_PREFIX) == 0);
        p += rc;
        n -= (size_t)rc;
    }
}

static void timeout(const char *s, size_t n)
{
    int64_t ns = -1;
    if (sl_grpc_timeout_parse(s, n, &ns) != 0) {
        CHECK(ns == -1);
        return;
    }
    CHECK(ns >= 0 && n >= 2 && n <= 9);
    /* The same digits in nanoseconds read back as the value's count of units. */
    char again[16];
    int k = snprintf(again, sizeof again, "%.*sn", (int)(n - 1), s);
    int64_t units = -1;
    CHECK(sl_grpc_timeout_parse(again, (size_t)k, &units) == 0);
    CHECK(units <= ns || ns == INT64_MAX);
}

static void encode(const char *s, size_t n)
{
    size_t cap = 3 * n + 1;
    char *enc = malloc(cap), *dec = malloc(cap);
    CHECK(enc && dec);
    size_t len = sl_grpc_message_encode(s, n, enc, cap);
    CHECK(len < cap && len <= 3 * n && strlen(enc) == len);
    for (size_t i = 0; i < len; i++) {
        CHECK(enc[i] >= 0x20 && enc[i] <= 0x7e);
        if (enc[i] == '%')
            CHECK(i + 2 < len);
    }
    CHECK(sl_grpc_message_decode(enc, len, dec) == n && memcmp(dec, s, n) == 0);
    /* Cut short, it is a prefix of the whole, and cut at no escape. */
    if (len > 0) {
        size_t small = len / 2 + 1;
        char *cut = malloc(small);
        CHECK(cut);
        CHECK(sl_grpc_message_encode(s, n, cut, small) == len);
        size_t c = strlen(cut);
        CHECK(c < small && memcmp(cut, enc, c) == 0);
        for (size_t i = 0; i < c; i++)
            if (cut[i] == '%')
                CHECK(i + 2 < c);
        free(cut);
    }
    free(enc);
    free(dec);
}

static void decode(const char *s, size_t n)
{
    char *dec = malloc(n + 1);
    CHECK(dec);
    CHECK(sl_grpc_message_decode(s, n, dec) <= n);
    free(dec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    unsigned pick = data[0] % 5;
    size_t n = size - 1;
    char *s = copy_of(data + 1, n);
    switch (pick) {
    case 0: messages((const uint8_t *)s, n); break;
    case 1: timeout(s, n); break;
    case 2: encode(s, n); break;
    case 3: decode(s, n); break;
    case 4: (void)sl_grpc_content_type_ok(s, n); break;
    }
    free(s);
    return 0;
}
