/*
 * fuzz_ui.c: libFuzzer target for what the live page reads from clients and
 * writes into its HTML (src/proto/html.c, basic_auth.c, sim_query.c).
 *
 * The first input byte picks the part, the rest is its input (an exact-size
 * copy):
 *   0  sl_html_escape: the output is UTF-8 (every sequence well formed), and
 *      holds no '<', '>', '&' but as the start of one of the five
 *      references, no quote, and no control byte but tab, LF and CR
 *   1  sl_basic_password as an Authorization field's value: a password no
 *      longer than the room given, or -1
 *   2  sl_sim_request_parse as GET /v1/simulate's query: either an error
 *      with a message, or a request within the server's bounds
 * CHECK() aborts when one of these breaks.
 *
 * Build and run: make fuzz (FUZZ_SECONDS=N to change the time per target).
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "common/buf.h"
#include "fuzz.h"
#include "proto/basic_auth.h"
#include "proto/html.h"
#include "proto/sim_query.h"

/* The length of the well-formed UTF-8 sequence at p, or 0. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    uint32_t v, min;
    size_t len;
    if (p[0] < 0x80)
        return 1;
    if ((p[0] & 0xE0) == 0xC0)
        len = 2, v = p[0] & 0x1Fu, min = 0x80;
    else if ((p[0] & 0xF0) == 0xE0)
        len = 3, v = p[0] & 0x0Fu, min = 0x800;
    else if ((p[0] & 0xF8) == 0xF0)
        len = 4, v = p[0] & 0x07u, min = 0x10000;
    else
        return 0;
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        v = v << 6 | (p[i] & 0x3Fu);
    }
    return v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) ? 0 : len;
}

static void fuzz_html(const char *s, size_t n)
{
    static const char *const refs[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&#39;"};
    sl_buf b;
    sl_buf_init(&b, 0, 0);
    CHECK(sl_html_escape(&b, s, n) == 0);
    const unsigned char *o = (const unsigned char *)b.data;
    for (size_t i = 0; i < b.len;) {
        size_t len = utf8_len(o + i, b.len - i);
        CHECK(len > 0);
        unsigned char c = o[i];
        CHECK(c != '<' && c != '>' && c != '"' && c != '\'');
        CHECK(c >= 0x20 || c == '\t' || c == '\n' || c == '\r');
        CHECK(c != 0x7F);
        if (c == '&') {
            bool ref = false;
            for (size_t r = 0; r < 5; r++)
                ref |= b.len - i >= strlen(refs[r]) &&
                       memcmp(o + i, refs[r], strlen(refs[r])) == 0;
            CHECK(ref);
        }
        i += len;
    }
    /* Every input byte gives at least one output byte. */
    CHECK(b.len >= n);
    sl_buf_free(&b);
}

static void fuzz_basic(const char *s, size_t n)
{
    char pw[64];
    long r = sl_basic_password(s, n, pw, sizeof pw);
    CHECK(r >= -1 && r <= (long)sizeof pw);
}

static void fuzz_sim(const char *s, size_t n)
{
    sl_sim_request q;
    char err[256];
    const char *field = (const char *)1;
    err[0] = '\0';
    if (sl_sim_request_parse(s, n, &q, err, sizeof err, &field) != 0) {
        CHECK(err[0] != '\0');
        CHECK(field == NULL || strlen(field) < 16);
        return;
    }
    CHECK(field == NULL);
    CHECK(q.limit >= 1 && q.burst >= 1 && q.period_ns > 0);
    CHECK(q.traffic.kind != TRAFFIC_FILE);
    CHECK(q.traffic.duration_ns > 0 && q.traffic.duration_ns <= SL_SIM_MAX_SPAN_NS);
    CHECK(q.traffic.rate > 0 && q.traffic.rate <= 1e9);
    CHECK(q.expected >= 0 && q.expected <= SL_SIM_MAX_REQUESTS);
    CHECK(q.lim.algorithm == q.algorithm);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    char *in = copy_of(data + 1, size - 1);
    switch (data[0] % 3) {
    case 0: fuzz_html(in, size - 1); break;
    case 1: fuzz_basic(in, size - 1); break;
    default: fuzz_sim(in, size - 1); break;
    }
    free(in);
    return 0;
}
