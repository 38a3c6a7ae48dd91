/*
 * test_http_response.c: the HTTP/1.1 response parser (src/proto/http.h,
 * section 5), on what sluiced writes and on what it must refuse.
 *
 * Every parse reads from a heap buffer of exactly the input's length, so that
 * AddressSanitizer reports any read past `len`.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "proto/http.h"

#define HDR_CAP 32

typedef struct parsed {
    int rc;
    char *buf;
    sl_http_response res;
    sl_http_header headers[HDR_CAP];
} parsed;

static parsed *parse_cap(const char *s, size_t len, size_t hcap, size_t max_head)
{
    parsed *p = calloc(1, sizeof *p);
    cr_assert_not_null(p);
    p->buf = malloc(len ? len : 1);
    cr_assert_not_null(p->buf);
    memcpy(p->buf, s, len);
    sl_http_response_init(&p->res, p->headers, hcap);
    p->rc = sl_http_parse_response(p->buf, len, &p->res, max_head);
    return p;
}

#define PARSE(lit) parse_cap(lit, sizeof(lit) - 1, HDR_CAP, 0)

static void done(parsed *p)
{
    free(p->buf);
    free(p);
}

static void assert_slice(sl_http_slice s, const char *want)
{
    cr_assert_eq(s.len, strlen(want), "slice '%.*s', want '%s'", (int)s.len, s.ptr, want);
    cr_assert(memcmp(s.ptr, want, s.len) == 0, "slice '%.*s', want '%s'", (int)s.len, s.ptr,
              want);
}

/* Every proper prefix of s[0 .. want) is INCOMPLETE, and the whole parses to
 * want whatever follows it. */
static void assert_prefixes(const char *s, size_t len, int want)
{
    for (size_t n = 0; n < (size_t)want; n++) {
        parsed *p = parse_cap(s, n, HDR_CAP, 0);
        cr_assert_eq(p->rc, SL_HTTP_INCOMPLETE, "prefix of %zu bytes: %d (%s)", n, p->rc,
                     p->res.errstr ? p->res.errstr : "");
        done(p);
    }
    for (size_t n = (size_t)want; n <= len; n++) {
        parsed *p = parse_cap(s, n, HDR_CAP, 0);
        cr_assert_eq(p->rc, want, "%zu bytes: %d, want %d", n, p->rc, want);
        done(p);
    }
}

/* An error at the first byte that breaks the response: every prefix shorter
 * than `at` is INCOMPLETE, and every longer one (the whole included) is the
 * error, naming `field`. */
static void assert_error_at(const char *s, size_t at, const char *field)
{
    size_t len = strlen(s);
    for (size_t n = 0; n <= len; n++) {
        parsed *p = parse_cap(s, n, HDR_CAP, 0);
        if (n < at) {
            cr_assert_eq(p->rc, SL_HTTP_INCOMPLETE, "'%s' at %zu bytes: %d (%s)", s, n, p->rc,
                         p->res.errstr ? p->res.errstr : "");
        } else {
            cr_assert_eq(p->rc, SL_HTTP_ERROR, "'%s' at %zu bytes: %d", s, n, p->rc);
            cr_assert_not_null(p->res.errstr);
            cr_assert_str_eq(p->res.field, field, "'%s': field %s (%s)", s, p->res.field,
                             p->res.errstr);
        }
        done(p);
    }
}

/* ---- what sluiced writes ---- */

Test(http_response, sluiced_429_as_the_writer_writes_it)
{
    /* The server's own writer makes the response, so that the client's
     * parser reads exactly what sluiced sends. */
    sl_limit l;
    cr_assert_eq(sl_limit_init(&l, SL_GCRA, 3, 10 * INT64_C(1000000000), 0), SL_OK);
    sl_decision d = {.allowed = false,
                     .limit = 3,
                     .remaining = 0,
                     .retry_after_ns = INT64_C(3333333334),
                     .reset_after_ns = INT64_C(10000000000)};
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    cr_assert_eq(sl_http_write_check(&b, true, "default", &l, &d, false), 0);
    parsed *p = parse_cap(b.data, b.len, HDR_CAP, 0);
    cr_assert_gt(p->rc, 0, "%s", p->res.errstr);
    cr_assert_eq(p->res.status, 429);
    assert_slice(p->res.reason, "Too Many Requests");
    cr_assert_eq(p->res.minor_version, 1);
    cr_assert(p->res.keep_alive);
    cr_assert(p->res.has_content_length);
    cr_assert(!p->res.body_until_close);
    /* The head and the body it announces are the whole response. */
    cr_assert_eq((size_t)p->rc + p->res.body_length, b.len);
    cr_assert_eq(p->buf[p->rc], '{');
    const sl_http_header *h = sl_http_response_header(&p->res, "retry-after");
    cr_assert_not_null(h);
    assert_slice(h->value, "4");
    h = sl_http_response_header(&p->res, "RATELIMIT-POLICY");
    cr_assert_not_null(h);
    assert_slice(h->value, "\"default\";q=3;w=10");
    cr_assert_null(sl_http_response_header(&p->res, "transfer-encoding"));
    assert_prefixes(b.data, b.len, p->rc);
    done(p);
    sl_buf_free(&b);
}

Test(http_response, fields_trimmed_and_sliced)
{
    static const char r[] = "HTTP/1.0 200 OK fine\r\n"
                            "X-Spaces: \t a  b \t \r\n"
                            "X-Empty:\r\n"
                            "Connection: Keep-Alive\r\n"
                            "Content-Length: 2\r\n\r\n{}";
    parsed *p = PARSE(r);
    cr_assert_eq(p->rc, (int)sizeof r - 1 - 2);
    cr_assert_eq(p->res.minor_version, 0);
    cr_assert_eq(p->res.status, 200);
    assert_slice(p->res.reason, "OK fine");
    cr_assert_eq(p->res.num_headers, 4);
    assert_slice(p->res.headers[0].name, "X-Spaces");
    assert_slice(p->res.headers[0].value, "a  b");
    assert_slice(p->res.headers[1].value, "");
    cr_assert(p->res.keep_alive); /* HTTP/1.0 asked for it */
    cr_assert_eq(p->res.body_length, 2);
    done(p);
}

Test(http_response, every_prefix_incomplete)
{
    static const char *const rs[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 204 No Content\r\n\r\n",
        "HTTP/1.1 200\r\nContent-Length: 3\r\n\r\nabc",
        "HTTP/1.1 404 \r\nContent-Length: 3\r\n\r\n",
        "HTTP/1.0 503 Service Unavailable\nX: y\n\n",
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof rs / sizeof rs[0]; i++) {
        const char *s = rs[i];
        const char *end = strstr(s, "\r\n\r\n");
        const char *lf = strstr(s, "\n\n");
        size_t head = end ? (size_t)(end - s) + 4 : (size_t)(lf - s) + 2;
        assert_prefixes(s, strlen(s), (int)head);
    }
}

/* ---- framing ---- */

Test(http_response, bodies_by_status_and_content_length)
{
    parsed *p = PARSE("HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n");
    cr_assert_gt(p->rc, 0);
    cr_assert_eq(p->res.body_length, 0); /* 204 has no body whatever it says */
    cr_assert_eq(p->res.content_length, 10);
    cr_assert(!p->res.body_until_close);
    done(p);
    p = PARSE("HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n");
    cr_assert_eq(p->res.body_length, 0);
    done(p);
    p = PARSE("HTTP/1.1 101 Switching Protocols\r\n\r\n");
    cr_assert_eq(p->res.status, 101);
    cr_assert(!p->res.body_until_close);
    done(p);
    p = PARSE("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end");
    cr_assert_gt(p->rc, 0);
    cr_assert(p->res.body_until_close);
    cr_assert(!p->res.keep_alive);
    done(p);
    /* Equal repeated lengths are one length. */
    p = PARSE("HTTP/1.1 200 OK\r\nContent-Length: 5\r\ncontent-length: 005\r\n\r\n");
    cr_assert_gt(p->rc, 0);
    cr_assert_eq(p->res.body_length, 5);
    done(p);
    /* The largest length there is, read exactly. */
    p = PARSE("HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775807\r\n\r\n");
    cr_assert_gt(p->rc, 0);
    cr_assert_eq(p->res.content_length, UINT64_C(9223372036854775807));
    done(p);
}

Test(http_response, content_length_read_strictly)
{
    static const char *const bad[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\n", /* INT64_MAX + 1 */
        "HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551616\r\n\r\n", /* 2^64: no wrap */
        "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        parsed *p = parse_cap(bad[i], strlen(bad[i]), HDR_CAP, 0);
        cr_assert_eq(p->rc, SL_HTTP_ERROR, "'%s': %d", bad[i], p->rc);
        cr_assert_str_eq(p->res.field, "content-length");
        done(p);
    }
}

Test(http_response, transfer_encoding_refused)
{
    static const char *const bad[] = {
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
        "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        parsed *p = parse_cap(bad[i], strlen(bad[i]), HDR_CAP, 0);
        cr_assert_eq(p->rc, SL_HTTP_ERROR);
        cr_assert_str_eq(p->res.field, "transfer-encoding");
        cr_assert_str_eq(p->res.errstr, "transfer-encoding is not supported");
        done(p);
    }
}

Test(http_response, keep_alive_by_version_and_connection)
{
    static const struct {
        const char *r;
        bool keep;
    } cases[] = {
        {"HTTP/1.1 200 OK\r\n\r\n", true},
        {"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", false},
        {"HTTP/1.1 200 OK\r\nConnection: Upgrade, CLOSE\r\n\r\n", false},
        {"HTTP/1.0 200 OK\r\n\r\n", false},
        {"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n", true},
        {"HTTP/1.0 200 OK\r\nConnection: keep-alive, close\r\n\r\n", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        parsed *p = parse_cap(cases[i].r, strlen(cases[i].r), HDR_CAP, 0);
        cr_assert_gt(p->rc, 0);
        cr_assert_eq(p->res.keep_alive, cases[i].keep, "'%s'", cases[i].r);
        done(p);
    }
}

Test(http_response, pipelined_responses_one_after_another)
{
    static const char two[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
                              "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 3\r\n\r\nabc";
    parsed *p = PARSE(two);
    cr_assert_gt(p->rc, 0);
    size_t next = (size_t)p->rc + p->res.body_length;
    cr_assert_eq(p->res.status, 200);
    sl_http_response r2;
    sl_http_header h2[4];
    sl_http_response_init(&r2, h2, 4);
    int rc = sl_http_parse_response(p->buf + next, sizeof two - 1 - next, &r2, 0);
    cr_assert_gt(rc, 0);
    cr_assert_eq(r2.status, 429);
    cr_assert_eq(next + (size_t)rc + r2.body_length, sizeof two - 1);
    done(p);
}

/* ---- errors, each at the byte that makes it one ---- */

Test(http_response, malformed_status_lines)
{
    assert_error_at("HTTX/1.1 200 OK\r\n\r\n", 4, "status-line");
    assert_error_at("HTTP/2.0 200 OK\r\n\r\n", 6, "version");
    assert_error_at("HTTP/1.2 200 OK\r\n\r\n", 8, "version");
    assert_error_at("HTTP/1.x 200 OK\r\n\r\n", 8, "status-line");
    assert_error_at("HTTP/1.1  200 OK\r\n\r\n", 10, "status");
    assert_error_at("HTTP/1.1 099 OK\r\n\r\n", 10, "status");
    assert_error_at("HTTP/1.1 2x0 OK\r\n\r\n", 11, "status");
    assert_error_at("HTTP/1.1 2000 OK\r\n\r\n", 13, "status-line");
    assert_error_at("HTTP/1.1 200 O\x01K\r\n\r\n", 15, "status-line");
    assert_error_at("HTTP/1.1 200 OK\rX\r\n\r\n", 17, "status-line");
    assert_error_at("\r\nHTTP/1.1 200 OK\r\n\r\n", 1, "status-line");
}

Test(http_response, malformed_fields)
{
    assert_error_at("HTTP/1.1 200 OK\r\n X: y\r\n\r\n", 18, "headers");
    assert_error_at("HTTP/1.1 200 OK\r\nX : y\r\n\r\n", 19, "headers");
    assert_error_at("HTTP/1.1 200 OK\r\nX(: y\r\n\r\n", 19, "headers");
    assert_error_at("HTTP/1.1 200 OK\r\n:y\r\n\r\n", 18, "headers");
    assert_error_at("HTTP/1.1 200 OK\r\nX: a\x7f\r\n\r\n", 22, "headers");
    assert_error_at("HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n", 23, "headers");
    assert_error_at("HTTP/1.1 200 OK\r\nX: a\r\n\rb", 25, "headers");
    assert_error_at("HTTP/1.1 200 OK\r\nNo colon here\r\n\r\n", 20, "headers");
}

Test(http_response, caps_on_head_bytes_and_field_count)
{
    static const char r[] = "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    size_t head = sizeof r - 1;
    /* Exactly the cap fits; a byte less is too large, as soon as the cap's
     * worth of bytes is in the buffer without the head's end. */
    parsed *p = parse_cap(r, head, HDR_CAP, head);
    cr_assert_eq(p->rc, (int)head);
    done(p);
    for (size_t n = 0; n <= head; n++) {
        p = parse_cap(r, n, HDR_CAP, head - 1);
        cr_assert_eq(p->rc, n < head - 1 ? SL_HTTP_INCOMPLETE : SL_HTTP_ERROR, "%zu: %d", n,
                     p->rc);
        if (p->rc == SL_HTTP_ERROR)
            cr_assert_str_eq(p->res.errstr, "response head is too large");
        done(p);
    }
    p = parse_cap(r, head, 3, 0);
    cr_assert_eq(p->rc, (int)head);
    cr_assert_eq(p->res.num_headers, 3);
    done(p);
    p = parse_cap(r, head, 2, 0);
    cr_assert_eq(p->rc, SL_HTTP_ERROR);
    cr_assert_str_eq(p->res.errstr, "too many header fields");
    done(p);
}

Test(http_response, a_parse_starts_afresh)
{
    /* The struct keeps nothing between calls: an error, then a good parse. */
    sl_http_header h[4];
    sl_http_response res;
    sl_http_response_init(&res, h, 4);
    static const char bad[] = "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n";
    static const char good[] = "HTTP/1.1 201 Created\r\n\r\n";
    cr_assert_eq(sl_http_parse_response(bad, sizeof bad - 1, &res, 0), SL_HTTP_ERROR);
    cr_assert_eq(sl_http_parse_response(good, sizeof good - 1, &res, 0), (int)sizeof good - 1);
    cr_assert_eq(res.status, 201);
    cr_assert_null(res.errstr);
    cr_assert(!res.has_content_length);
}
