/*
 * fuzz_client_addr.c: libFuzzer target for the client's address behind
 * trusted proxies (src/proto/client_addr.c).
 *
 * The first input byte picks what to fuzz, the rest is the material:
 *   bits 0-1   the header: X-Forwarded-For, Forwarded, X-Real-IP, or (3) a
 *              --trusted-proxies list parsed on its own
 *   bit 2      the peer: 127.0.0.1 (trusted) or 198.51.100.1 (not)
 *   bit 3      the trusted ranges: loopback and 10.0.0.0/8, or ::/0 (all)
 * The material's lines (split at '\n') are the header's fields, each in an
 * exact-size copy. CHECK() aborts when a guarantee of client_addr.h breaks:
 * an answer is an address whose text reads back as it, an untrusted peer is
 * always the client, an error names the header, a parsed list of ranges
 * holds at most SL_TRUSTED_MAX and reads back the same from their text.
 *
 * Build and run: make fuzz (FUZZ_SECONDS=N to change the time per target).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proto/client_addr.h"

#define MAX_FIELDS 80

static void fuzz_ranges(const char *s, size_t n)
{
    sl_trusted_proxies t = {.n = 1000}, again;
    char err[160];
    if (sl_trusted_parse(&t, s, n, err, sizeof err) != 0) {
        CHECK(t.n == 1000 && err[0] != '\0'); /* left unchanged, and said why */
        return;
    }
    CHECK(t.n <= SL_TRUSTED_MAX);
    /* Every range written back as text parses to itself. */
    char text[SL_TRUSTED_MAX * (SL_IP_TEXT_MAX + 5) + 8] = "none";
    size_t len = t.n ? 0 : 4;
    for (size_t i = 0; i < t.n; i++) {
        char a[SL_IP_TEXT_MAX];
        CHECK(t.r[i].bits <= 128);
        sl_ip_format(&t.r[i].net, a);
        /* A mapped net has a prefix of 96 bits or more: shorter ones clear
         * its ffff. It is written as IPv4, its bits counted from 96. */
        bool v4 = sl_ip_is_v4(&t.r[i].net);
        CHECK(!v4 || t.r[i].bits >= 96);
        len += (size_t)snprintf(text + len, sizeof text - len, "%s%s/%u", i ? "," : "", a,
                                v4 ? t.r[i].bits - 96u : t.r[i].bits);
    }
    CHECK(sl_trusted_parse(&again, text, len, err, sizeof err) == 0);
    CHECK(again.n == t.n);
    for (size_t i = 0; i < t.n; i++)
        CHECK(again.r[i].bits == t.r[i].bits && memcmp(again.r[i].net.b, t.r[i].net.b, 16) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    unsigned pick = data[0];
    const char *rest = (const char *)data + 1;
    size_t n = size - 1;
    if ((pick & 3) == 3) {
        char *s = copy_of((const uint8_t *)rest, n);
        fuzz_ranges(s, n);
        free(s);
        return 0;
    }
    static const char *const names[] = {"X-Forwarded-For", "Forwarded", "X-Real-IP"};
    const char *name = names[pick & 3];
    sl_trusted_proxies t;
    char err[160];
    const char *spec = pick & 8 ? "::/0" : "127.0.0.0/8,::1,10.0.0.0/8";
    CHECK(sl_trusted_parse(&t, spec, strlen(spec), err, sizeof err) == 0);
    sl_ip peer;
    const char *ptext = pick & 4 ? "198.51.100.1" : "127.0.0.1";
    CHECK(sl_ip_parse(ptext, strlen(ptext), &peer) == 0);

    sl_http_header h[MAX_FIELDS];
    char *copies[MAX_FIELDS];
    size_t nh = 0, start = 0;
    for (size_t i = 0; i <= n && nh < MAX_FIELDS; i++) {
        if (i < n && rest[i] != '\n')
            continue;
        copies[nh] = copy_of((const uint8_t *)rest + start, i - start);
        /* every other field is another header, which must not count */
        bool other = nh % 5 == 4;
        h[nh].name = other ? (sl_http_slice){"Host", 4} : (sl_http_slice){name, strlen(name)};
        h[nh].value = (sl_http_slice){copies[nh], i - start};
        nh++;
        start = i + 1;
    }
    sl_client_addr_result res;
    int rc = sl_client_addr(&t, &peer, sl_client_source_of(name), name, h, nh, &res);
    if (rc == 0) {
        sl_ip back;
        CHECK(sl_ip_parse(res.text, strlen(res.text), &back) == 0);
        CHECK(memcmp(back.b, res.ip.b, 16) == 0);
        if (!sl_trusted_has(&t, &peer))
            CHECK(!res.from_header && memcmp(res.ip.b, peer.b, 16) == 0);
    } else {
        CHECK(rc == -1 && sl_trusted_has(&t, &peer));
        CHECK(strncmp(res.err, name, strlen(name)) == 0);
    }
    for (size_t i = 0; i < nh; i++)
        free(copies[i]);
    return 0;
}
