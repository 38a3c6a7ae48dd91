/*
 * test_http.c: the HTTP/1.1 request parser, its helpers, and the response
 * writer (rate limit headers and JSON bodies, byte for byte).
 *
 * Every parse reads from a heap buffer of exactly the input's length, so that
 * AddressSanitizer reports any read past `len`.
 */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/http.h"

#define NS_PER_SEC INT64_C(1000000000)
#define NS_PER_MS INT64_C(1000000)
#define HDR_CAP 128

typedef struct parsed {
    int rc;
    char *buf;
    size_t len;
    sl_http_request req;
    sl_http_header headers[HDR_CAP];
} parsed;

static parsed *parse_lim(const char *s, size_t len, const sl_http_limits *lim)
{
    parsed *p = calloc(1, sizeof *p);
    cr_assert_not_null(p);
    p->buf = malloc(len ? len : 1);
    cr_assert_not_null(p->buf);
    memcpy(p->buf, s, len);
    p->len = len;
    sl_http_request_init(&p->req, p->headers, HDR_CAP);
    p->rc = sl_http_parse_request(p->buf, len, &p->req, lim);
    return p;
}

#define PARSE(lit) parse_lim(lit, sizeof(lit) - 1, NULL)

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

/* Every proper prefix of s is INCOMPLETE, from a fresh exact-size copy and
 * resumed on one buffer a byte at a time; the whole parses to `want`. */
static void assert_prefixes(const char *s, size_t len, int want)
{
    for (size_t n = 0; n < (size_t)want; n++) {
        parsed *p = parse_lim(s, n, NULL);
        cr_assert_eq(p->rc, SL_HTTP_INCOMPLETE, "prefix of %zu bytes: %d (%s)", n, p->rc,
                     p->req.errstr ? p->req.errstr : "");
        done(p);
    }
    char *buf = malloc(len);
    memcpy(buf, s, len);
    sl_http_header h[HDR_CAP];
    sl_http_request req;
    sl_http_request_init(&req, h, HDR_CAP);
    for (size_t n = 0; n <= len; n++) {
        int rc = sl_http_parse_request(buf, n, &req, NULL);
        if (n < (size_t)want) {
            cr_assert_eq(rc, SL_HTTP_INCOMPLETE, "resumed at %zu: %d", n, rc);
        } else {
            cr_assert_eq(rc, want, "resumed at %zu: %d, want %d", n, rc, want);
            break;
        }
    }
    free(buf);
}

/* ---- the request parser ---- */

Test(http_parse, simple_get)
{
    static const char r[] = "GET /v1/check?key=a&limit=10 HTTP/1.1\r\n"
                            "Host: localhost:7380\r\n"
                            "User-Agent: curl/7.88.1\r\n"
                            "Accept: */*\r\n"
                            "\r\n";
    parsed *p = PARSE(r);
    cr_assert_eq(p->rc, (int)sizeof r - 1);
    assert_slice(p->req.method, "GET");
    assert_slice(p->req.target, "/v1/check?key=a&limit=10");
    assert_slice(p->req.path, "/v1/check");
    assert_slice(p->req.query, "key=a&limit=10");
    cr_assert(p->req.has_query);
    cr_assert_eq(p->req.minor_version, 1);
    cr_assert_eq(p->req.num_headers, 3);
    assert_slice(p->req.headers[0].name, "Host");
    assert_slice(p->req.headers[0].value, "localhost:7380");
    assert_slice(p->req.headers[2].value, "*/*");
    cr_assert(p->req.keep_alive);
    cr_assert(!p->req.has_content_length);
    cr_assert_eq(p->req.content_length, 0);
    cr_assert(!p->req.body_too_large);
    const sl_http_header *h = sl_http_find_header(&p->req, "user-AGENT");
    cr_assert_not_null(h);
    assert_slice(h->value, "curl/7.88.1");
    cr_assert_null(sl_http_find_header(&p->req, "cookie"));
    done(p);
}

Test(http_parse, post_with_body_and_trimmed_values)
{
    static const char r[] = "POST /v1/check HTTP/1.1\r\nHost: x\r\n"
                            "Content-Type:application/json\r\n"
                            "X-Spaces: \t a  b \t \r\n"
                            "X-Empty:\r\n"
                            "Content-Length: 2\r\n\r\n{}";
    parsed *p = PARSE(r);
    cr_assert_eq(p->rc, (int)sizeof r - 1 - 2);
    assert_slice(p->req.path, "/v1/check");
    cr_assert(!p->req.has_query);
    cr_assert_eq(p->req.query.len, 0);
    assert_slice(p->req.headers[1].value, "application/json");
    assert_slice(p->req.headers[2].value, "a  b");
    assert_slice(p->req.headers[3].value, "");
    cr_assert(p->req.has_content_length);
    cr_assert_eq(p->req.content_length, 2);
    done(p);
}

Test(http_parse, every_prefix_incomplete)
{
    static const char *reqs[] = {
        "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET /v1/check?key=a%20b&limit=1&period=1s HTTP/1.0\r\n\r\n",
        "\r\n\nPOST /v1/check HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n"
        "Connection: keep-alive, close\r\nExpect: 100-continue\r\n\r\n",
        "GET /healthz HTTP/1.1\nHost: a\n\n",
        "OPTIONS * HTTP/1.1\r\nHost: a\r\nX: \r\n\r\n",
        "GET http://example.com:80/v1/check?key=1 HTTP/1.1\r\nHost: example.com\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++) {
        size_t len = strlen(reqs[i]);
        parsed *p = parse_lim(reqs[i], len, NULL);
        cr_assert_eq(p->rc, (int)len, "request %zu: %d (%s)", i, p->rc,
                     p->req.errstr ? p->req.errstr : "");
        done(p);
        assert_prefixes(reqs[i], len, (int)len);
    }
}

Test(http_parse, absolute_form_and_asterisk)
{
    parsed *p = PARSE("GET http://h:1/a/b?x=1 HTTP/1.1\r\nHost: h\r\n\r\n");
    cr_assert_gt(p->rc, 0);
    assert_slice(p->req.path, "/a/b");
    assert_slice(p->req.query, "x=1");
    done(p);
    p = PARSE("GET HTTPS://h HTTP/1.1\r\nHost: h\r\n\r\n");
    cr_assert_gt(p->rc, 0);
    assert_slice(p->req.path, "/");
    done(p);
    p = PARSE("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n");
    cr_assert_gt(p->rc, 0);
    assert_slice(p->req.path, "*");
    done(p);
}

Test(http_parse, pipelined)
{
    static const char r[] = "POST /v1/check HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc"
                            "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"
                            "GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
    char *buf = malloc(sizeof r - 1);
    memcpy(buf, r, sizeof r - 1);
    sl_http_header h[HDR_CAP];
    sl_http_request req;
    sl_http_request_init(&req, h, HDR_CAP);
    size_t off = 0, len = sizeof r - 1;
    const char *paths[] = {"/v1/check", "/healthz", "/metrics"};
    for (int i = 0; i < 3; i++) {
        int rc = sl_http_parse_request(buf + off, len - off, &req, NULL);
        cr_assert_gt(rc, 0, "request %d: %d", i, rc);
        assert_slice(req.path, paths[i]);
        cr_assert_eq(req.keep_alive, i < 2);
        off += (size_t)rc + req.content_length;
    }
    cr_assert_eq(off, len);
    cr_assert_eq(sl_http_parse_request(buf + off, 0, &req, NULL), SL_HTTP_INCOMPLETE);
    free(buf);
}

Test(http_parse, keep_alive_rules)
{
    static const struct {
        const char *r;
        bool keep;
    } cases[] = {
        {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", true},
        {"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", false},
        {"GET / HTTP/1.1\r\nHost: a\r\nConnection: Keep-Alive, CLOSE\r\n\r\n", false},
        {"GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nConnection: close\r\n\r\n", false},
        {"GET / HTTP/1.1\r\nHost: a\r\nConnection: closed\r\n\r\n", true},
        {"GET / HTTP/1.0\r\n\r\n", false},
        {"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true},
        {"GET / HTTP/1.0\r\nConnection: keep-alive,close\r\n\r\n", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        parsed *p = parse_lim(cases[i].r, strlen(cases[i].r), NULL);
        cr_assert_gt(p->rc, 0, "case %zu", i);
        cr_assert_eq(p->req.keep_alive, cases[i].keep, "case %zu", i);
        done(p);
    }
}

Test(http_parse, expect_continue_and_body_cap)
{
    parsed *p = PARSE("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\n"
                      "Content-Length: 65536\r\n\r\n");
    cr_assert_gt(p->rc, 0);
    cr_assert(p->req.expect_continue);
    cr_assert(!p->req.body_too_large);
    done(p);
    p = PARSE("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 65537\r\n\r\n");
    cr_assert_gt(p->rc, 0);
    cr_assert(p->req.body_too_large);
    cr_assert(!p->req.expect_continue);
    done(p);
    /* Expect means nothing to HTTP/1.0. */
    p = PARSE("POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n");
    cr_assert_gt(p->rc, 0);
    cr_assert(!p->req.expect_continue);
    done(p);
    sl_http_limits lim = {.max_body = 10};
    static const char r11[] = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n";
    p = parse_lim(r11, sizeof r11 - 1, &lim);
    cr_assert_gt(p->rc, 0);
    cr_assert(p->req.body_too_large);
    done(p);
}

Test(http_parse, same_content_length_twice_is_accepted)
{
    parsed *p = PARSE("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n");
    cr_assert_gt(p->rc, 0);
    cr_assert_eq(p->req.content_length, 5);
    done(p);
}

/* One error case: input, status, message, field. */
typedef struct error_case {
    const char *in;
    int status;
    const char *errstr;
    const char *field;
} error_case;

static void check_error_cases(const error_case *cases, size_t n, const sl_http_limits *lim)
{
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(cases[i].in);
        parsed *p = parse_lim(cases[i].in, len, lim);
        cr_assert_eq(p->rc, SL_HTTP_ERROR, "case %zu (%s): rc %d", i, cases[i].errstr, p->rc);
        cr_assert_eq(p->req.status, cases[i].status, "case %zu: status %d, want %d", i,
                     p->req.status, cases[i].status);
        cr_assert_str_eq(p->req.errstr, cases[i].errstr, "case %zu", i);
        if (cases[i].field)
            cr_assert_str_eq(p->req.field, cases[i].field, "case %zu", i);
        done(p);
    }
}

Test(http_parse, errors)
{
    static const error_case cases[] = {
        {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400,
         "conflicting content-length fields", "content-length"},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
         400, "content-length with transfer-encoding", "transfer-encoding"},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
         400, "content-length with transfer-encoding", "transfer-encoding"},
        {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", 501,
         "transfer-encoding is not supported", "transfer-encoding"},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400,
         "invalid content-length", "content-length"},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1,1\r\n\r\n", 400,
         "invalid content-length", "content-length"},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: \r\n\r\n", 400, "invalid content-length",
         "content-length"},
        {"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775808\r\n\r\n", 400,
         "invalid content-length", "content-length"},
        {"GET / HTTP/2.0\r\n", 505, "http version not supported", "version"},
        {"GET / HTTP/1.2\r\n", 505, "http version not supported", "version"},
        {"GET / HTTP/1.10\r\n", 505, "http version not supported", "version"},
        {"GET / HTTP/11", 505, "http version not supported", "version"},
        {"GET / HTTQ/1.1\r\n", 400, "malformed http version", "version"},
        {"GET / HTTP/1.x\r\n", 400, "malformed http version", "version"},
        {"GET / HTTP/1.1 \r\n", 400, "malformed http version", "version"},
        {"GET /\r\n", 400, "malformed request line", "request-line"},
        {"GET  / HTTP/1.1\r\n", 400, "malformed request line", "request-line"},
        {" GET / HTTP/1.1\r\n", 400, "malformed request line", "request-line"},
        {"GE(T / HTTP/1.1\r\n", 400, "invalid method", "method"},
        {"GET /a\x7f HTTP/1.1\r\n", 400, "invalid character in request target", "target"},
        {"GET /a\xc3\xa9 HTTP/1.1\r\n", 400, "invalid character in request target", "target"},
        {"GET a/b HTTP/1.1\r\n", 400, "invalid request target", "target"},
        {"GET http:/// HTTP/1.1\r\n", 400, "invalid request target", "target"},
        {"\rGET / HTTP/1.1\r\n", 400, "cr not followed by lf", "request-line"},
        {"GET / HTTP/1.1\rX", 400, "cr not followed by lf", "request-line"},
        {"GET / HTTP/1.1\r\nHost: a\rb\r\n", 400, "cr not followed by lf", "headers"},
        {"GET / HTTP/1.1\r\nHost: a\r\n\rX", 400, "cr not followed by lf", "headers"},
        {"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", 400,
         "obsolete line folding is not allowed", "headers"},
        {"GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400, "whitespace before colon in header field",
         "headers"},
        {"GET / HTTP/1.1\r\n: a\r\n\r\n", 400, "invalid character in header field name",
         "headers"},
        {"GET / HTTP/1.1\r\nHo(st: a\r\n\r\n", 400, "invalid character in header field name",
         "headers"},
        {"GET / HTTP/1.1\r\nHost\r\n\r\n", 400, "invalid character in header field name",
         "headers"},
        {"GET / HTTP/1.1\r\nHost: a\x01\r\n\r\n", 400, "invalid character in header field value",
         "headers"},
        {"GET / HTTP/1.1\r\nHost: a\x7f\r\n\r\n", 400, "invalid character in header field value",
         "headers"},
        {"GET / HTTP/1.1\r\n\r\n", 400, "missing host field", "host"},
        {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n", 400, "more than one host field", "host"},
        {"GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n", 400, "more than one host field", "host"},
    };
    check_error_cases(cases, sizeof cases / sizeof cases[0], NULL);
}

/* Errors show at the byte that causes them: the same error from every
 * prefix that holds that byte, INCOMPLETE from the shorter ones. */
Test(http_parse, errors_as_early_as_possible)
{
    static const char r[] = "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n";
    size_t bad = sizeof r - 2; /* the LF ending the second Content-Length */
    for (size_t n = 0; n <= sizeof r - 1; n++) {
        parsed *p = parse_lim(r, n, NULL);
        cr_assert_eq(p->rc, n > bad ? SL_HTTP_ERROR : SL_HTTP_INCOMPLETE, "prefix %zu: %d", n,
                     p->rc);
        done(p);
    }
    parsed *p = PARSE("GET / HTTP/2");
    cr_assert_eq(p->rc, SL_HTTP_ERROR);
    cr_assert_eq(p->req.status, 505);
    done(p);
    p = PARSE("GET /\x01");
    cr_assert_eq(p->rc, SL_HTTP_ERROR);
    done(p);
}

Test(http_parse, caps)
{
    sl_http_limits lim = {.max_request_line = 32, .max_header_bytes = 40, .max_headers = 2};
    /* A request line of exactly 32 bytes passes; 33 is 414 at its 33rd byte. */
    static const char ok32[] = "GET /aaaaaaaaaaaaaaaaaa HTTP/1.1\r\nHost: a\r\n\r\n";
    cr_assert_eq(strchr(ok32, '\r') - ok32, 32);
    parsed *p = parse_lim(ok32, sizeof ok32 - 1, &lim);
    cr_assert_gt(p->rc, 0, "%d %s", p->rc, p->req.errstr ? p->req.errstr : "");
    done(p);
    static const error_case cases[] = {
        {"GET /aaaaaaaaaaaaaaaaaaa HTTP/1.1\r\n", 414, "request line is too long", "request-line"},
        {"GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 414, "request line is too long",
         "request-line"},
        {"\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n", 414,
         "request line is too long", "request-line"},
        {"GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n", 431, "too many header fields",
         "headers"},
        {"GET / HTTP/1.1\r\nHost: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 431,
         "header fields are too large", "headers"},
    };
    check_error_cases(cases, sizeof cases / sizeof cases[0], &lim);
    /* Header bytes: exactly 40 pass ("Host: " + 32 + CRLF = 40, then the
     * final CRLF breaks it). */
    static const char h40[] = "GET / HTTP/1.1\r\nHost: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    p = parse_lim(h40, sizeof h40 - 1, &lim);
    cr_assert_gt(p->rc, 0, "%d %s", p->rc, p->req.errstr ? p->req.errstr : "");
    done(p);
    static const char h41[] = "GET / HTTP/1.1\r\nHost: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    p = parse_lim(h41, sizeof h41 - 1, &lim);
    cr_assert_eq(p->rc, SL_HTTP_ERROR);
    cr_assert_eq(p->req.status, 431);
    done(p);
    /* The caller's array caps the header count too. */
    sl_http_header one[1];
    sl_http_request req;
    sl_http_request_init(&req, one, 1);
    static const char two[] = "GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n\r\n";
    cr_assert_eq(sl_http_parse_request(two, sizeof two - 1, &req, NULL), SL_HTTP_ERROR);
    cr_assert_eq(req.status, 431);
}

Test(http_parse, default_caps)
{
    size_t n = SL_HTTP_DEFAULT_MAX_REQUEST_LINE + 64;
    char *big = malloc(n);
    memset(big, 'a', n);
    memcpy(big, "GET /", 5);
    parsed *p = parse_lim(big, n, NULL);
    cr_assert_eq(p->rc, SL_HTTP_ERROR);
    cr_assert_eq(p->req.status, 414);
    done(p);
    /* 65 headers: one too many. */
    char *many = malloc(65 * 8 + 64);
    size_t len = (size_t)sprintf(many, "GET / HTTP/1.1\r\n");
    for (int i = 0; i < 65; i++)
        len += (size_t)sprintf(many + len, "H%02d: x\r\n", i);
    p = parse_lim(many, len, NULL);
    cr_assert_eq(p->rc, SL_HTTP_ERROR);
    cr_assert_eq(p->req.status, 431);
    done(p);
    free(big);
    free(many);
}

Test(http_parse, resume_after_buffer_moves)
{
    static const char r[] = "GET /x HTTP/1.1\r\nHost: a\r\n\r\n";
    char *a = malloc(sizeof r), *b = malloc(sizeof r);
    memcpy(a, r, sizeof r);
    memcpy(b, r, sizeof r);
    sl_http_header h[4];
    sl_http_request req;
    sl_http_request_init(&req, h, 4);
    cr_assert_eq(sl_http_parse_request(a, 20, &req, NULL), SL_HTTP_INCOMPLETE);
    /* Another pointer: parsed from the start, slices into b. */
    cr_assert_eq(sl_http_parse_request(b, sizeof r - 1, &req, NULL), (int)sizeof r - 1);
    cr_assert(req.path.ptr == b + 4);
    cr_assert(req.headers[0].name.ptr >= b && req.headers[0].name.ptr < b + sizeof r);
    free(a);
    free(b);
}

/* ---- helpers ---- */

Test(http_helpers, percent_decode)
{
    char out[16];
    cr_assert_eq(sl_http_percent_decode("a%20b+c%2Bd", 11, out, sizeof out), 7);
    cr_assert(memcmp(out, "a b c+d", 7) == 0);
    cr_assert_eq(sl_http_percent_decode("%41%4a%4A", 9, out, sizeof out), 3);
    cr_assert(memcmp(out, "AJJ", 3) == 0);
    cr_assert_eq(sl_http_percent_decode("%00", 3, out, sizeof out), 1);
    cr_assert_eq(out[0], '\0');
    cr_assert_eq(sl_http_percent_decode("%", 1, out, sizeof out), SL_HTTP_BAD_ESCAPE);
    cr_assert_eq(sl_http_percent_decode("%4", 2, out, sizeof out), SL_HTTP_BAD_ESCAPE);
    cr_assert_eq(sl_http_percent_decode("%4g", 3, out, sizeof out), SL_HTTP_BAD_ESCAPE);
    cr_assert_eq(sl_http_percent_decode("abc", 3, out, 2), SL_HTTP_TOO_LONG);
    cr_assert_eq(sl_http_percent_decode("ab", 2, out, 2), 2);
    cr_assert_eq(sl_http_percent_decode("", 0, out, 0), 0);
}

Test(http_helpers, path_decode_and_list_first)
{
    char out[16];
    cr_assert_eq(sl_http_path_decode("a+b%2Fc", 7, out, sizeof out), 5);
    cr_assert(memcmp(out, "a+b/c", 5) == 0);
    cr_assert_eq(sl_http_path_decode("%2", 2, out, sizeof out), SL_HTTP_BAD_ESCAPE);
    sl_http_slice v = {" 203.0.113.7 , 10.0.0.1", 23};
    sl_http_slice f = sl_http_list_first(v);
    cr_assert_eq(f.len, 11);
    cr_assert(memcmp(f.ptr, "203.0.113.7", 11) == 0);
    f = sl_http_list_first((sl_http_slice){"solo", 4});
    cr_assert_eq(f.len, 4);
    f = sl_http_list_first((sl_http_slice){", x", 3});
    cr_assert_eq(f.len, 0);
    f = sl_http_list_first((sl_http_slice){"", 0});
    cr_assert_eq(f.len, 0);
}

Test(http_helpers, query_param)
{
    static const char q[] = "&key=user%3A42&limit=10&&flag&period=1m&a%62c=x+y&key=second";
    char out[32];
    cr_assert_eq(sl_http_query_param(q, sizeof q - 1, "key", out, sizeof out), 7);
    cr_assert(memcmp(out, "user:42", 7) == 0);
    cr_assert_eq(sl_http_query_param(q, sizeof q - 1, "flag", out, sizeof out), 0);
    cr_assert_eq(sl_http_query_param(q, sizeof q - 1, "abc", out, sizeof out), 3);
    cr_assert(memcmp(out, "x y", 3) == 0);
    cr_assert_eq(sl_http_query_param(q, sizeof q - 1, "missing", out, sizeof out),
                 SL_HTTP_NO_PARAM);
    cr_assert_eq(sl_http_query_param(q, sizeof q - 1, "key", out, 3), SL_HTTP_TOO_LONG);
    cr_assert_eq(sl_http_query_param("a=%zz", 5, "a", out, sizeof out), SL_HTTP_BAD_ESCAPE);
    cr_assert_eq(sl_http_query_param("b%=1&a=2", 8, "a", out, sizeof out), SL_HTTP_BAD_ESCAPE);
    cr_assert_eq(sl_http_query_param("", 0, "a", out, sizeof out), SL_HTTP_NO_PARAM);
    /* A value too long, and a name too long to be the one asked for. */
    cr_assert_eq(sl_http_query_param("a=%41%41%41", 11, "a", out, 2), SL_HTTP_TOO_LONG);
    char longname[SL_HTTP_NAME_MAX + 8];
    memset(longname, 'a', SL_HTTP_NAME_MAX + 1);
    memcpy(longname + SL_HTTP_NAME_MAX + 1, "=1&a=2", 6);
    cr_assert_eq(sl_http_query_param(longname, SL_HTTP_NAME_MAX + 7, "a", out, sizeof out), 1);
    cr_assert_eq(out[0], '2');
    /* Each answer has one meaning in every decoder: the sibling decoders
     * answer the same name for the same fault. */
    cr_assert_eq(sl_http_query_param("a=%4", 4, "a", out, sizeof out),
                 sl_http_percent_decode("%4", 2, out, sizeof out));
    cr_assert_eq(sl_http_query_param("a=xyz", 5, "a", out, 2),
                 sl_http_percent_decode("xyz", 3, out, 2));

    size_t pos = 0;
    sl_http_slice k, v;
    int n = 0;
    while (sl_http_query_next(q, sizeof q - 1, &pos, &k, &v))
        n++;
    cr_assert_eq(n, 6);
}

/* ---- responses ---- */

static char *written(sl_buf *b)
{
    char *s = malloc(b->len + 1);
    memcpy(s, b->data, b->len);
    s[b->len] = '\0';
    return s;
}

/* The expected response: head lines (without Content-Length, which is
 * computed from the body) and body. */
static void assert_response(sl_buf *b, const char *status_line, const char *conn,
                            const char *rest_of_head, const char *body)
{
    char want[4096];
    snprintf(want, sizeof want,
             "%s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
             "Connection: %s\r\n%s\r\n%s",
             status_line, strlen(body), conn, rest_of_head, body);
    char *got = written(b);
    cr_assert_str_eq(got, want);
    free(got);
}

static sl_limit limit_of(sl_algorithm a, int64_t limit, int64_t period_ns, int64_t burst)
{
    sl_limit l;
    cr_assert_eq(sl_limit_init(&l, a, limit, period_ns, burst), SL_OK);
    return l;
}

Test(http_write, allowed)
{
    sl_limit l = limit_of(SL_GCRA, 10, 60 * NS_PER_SEC, 0);
    sl_decision d = {.allowed = true, .limit = 10, .remaining = 9,
                     .reset_after_ns = 6 * NS_PER_SEC};
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    cr_assert_eq(sl_http_write_check(&b, true, "api", &l, &d, false), 0);
    assert_response(&b, "HTTP/1.1 200 OK", "keep-alive",
                    "X-RateLimit-Limit: 10\r\nX-RateLimit-Remaining: 9\r\n"
                    "X-RateLimit-Reset: 6\r\n"
                    "RateLimit-Policy: \"api\";q=10;w=60\r\n"
                    "RateLimit: \"api\";r=9;t=6\r\n",
                    "{\"allowed\":true,\"limit\":10,\"remaining\":9,\"retry_after_ms\":0,"
                    "\"reset_after_ms\":6000}");
    sl_buf_free(&b);
}

Test(http_write, denied_429)
{
    sl_limit l = limit_of(SL_TOKEN_BUCKET, 100, 60 * NS_PER_SEC, 20);
    sl_decision d = {.allowed = false, .limit = 20, .remaining = 0,
                     .reset_after_ns = 12 * NS_PER_SEC - 1, .retry_after_ns = 600 * NS_PER_MS - 5};
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    cr_assert_eq(sl_http_write_check(&b, false, NULL, &l, &d, false), 0);
    assert_response(&b, "HTTP/1.1 429 Too Many Requests", "close",
                    "X-RateLimit-Limit: 20\r\nX-RateLimit-Remaining: 0\r\n"
                    "X-RateLimit-Reset: 12\r\nRetry-After: 1\r\n"
                    "RateLimit-Policy: \"default\";q=100;w=60\r\n"
                    "RateLimit: \"default\";r=0;t=12\r\n",
                    "{\"allowed\":false,\"limit\":20,\"remaining\":0,\"retry_after_ms\":600,"
                    "\"reset_after_ms\":12000}");
    sl_buf_free(&b);
}

Test(http_write, never)
{
    sl_limit l = limit_of(SL_GCRA, 5, NS_PER_SEC, 0);
    sl_decision d = {.allowed = false, .limit = 5, .remaining = 5, .reset_after_ns = 0,
                     .retry_after_ns = SL_NEVER};
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    cr_assert_eq(sl_http_write_check(&b, true, "p", &l, &d, false), 0);
    /* No Retry-After: waiting will never help. */
    assert_response(&b, "HTTP/1.1 429 Too Many Requests", "keep-alive",
                    "X-RateLimit-Limit: 5\r\nX-RateLimit-Remaining: 5\r\n"
                    "X-RateLimit-Reset: 0\r\n"
                    "RateLimit-Policy: \"p\";q=5;w=1\r\n"
                    "RateLimit: \"p\";r=5;t=0\r\n",
                    "{\"allowed\":false,\"limit\":5,\"remaining\":5,\"retry_after_ms\":-1,"
                    "\"reset_after_ms\":0}");
    sl_buf_free(&b);
}

Test(http_write, leaky_bucket_delay)
{
    sl_limit l = limit_of(SL_LEAKY_BUCKET, 10, NS_PER_SEC, 5);
    sl_decision d = {.allowed = true, .limit = 5, .remaining = 3,
                     .reset_after_ns = 200 * NS_PER_MS, .delay_ns = 100 * NS_PER_MS + 1};
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    cr_assert_eq(sl_http_write_check(&b, true, "q", &l, &d, false), 0);
    assert_response(&b, "HTTP/1.1 200 OK", "keep-alive",
                    "X-RateLimit-Limit: 5\r\nX-RateLimit-Remaining: 3\r\n"
                    "X-RateLimit-Reset: 1\r\n"
                    "RateLimit-Policy: \"q\";q=10;w=1\r\n"
                    "RateLimit: \"q\";r=3;t=1\r\n",
                    "{\"allowed\":true,\"limit\":5,\"remaining\":3,\"retry_after_ms\":0,"
                    "\"reset_after_ms\":200,\"delay_ms\":101}");
    sl_buf_free(&b);
}

Test(http_write, shadow)
{
    sl_limit l = limit_of(SL_FIXED_WINDOW, 3, 10 * NS_PER_SEC, 0);
    sl_decision d = {.allowed = false, .limit = 3, .remaining = 0,
                     .reset_after_ns = 4 * NS_PER_SEC, .retry_after_ns = 4 * NS_PER_SEC};
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    cr_assert_eq(sl_http_write_check(&b, true, "dry", &l, &d, true), 0);
    /* Invisible to the client: no rate limit field that could slow it down;
     * the body keeps the real answer for the operator. */
    assert_response(&b, "HTTP/1.1 200 OK", "keep-alive", "",
                    "{\"allowed\":true,\"limit\":3,\"remaining\":0,\"retry_after_ms\":0,"
                    "\"reset_after_ms\":4000,\"shadow\":true,\"would_allow\":false,"
                    "\"would_retry_after_ms\":4000}");
    sl_buf_free(&b);

    /* The same when it would have admitted, and for a policy's scoped answer
     * with a global limit: rejected_by says go, no wait, no delay. */
    sl_limit q = limit_of(SL_LEAKY_BUCKET, 10, NS_PER_SEC, 5);
    sl_decision dk = {.allowed = false, .limit = 5, .remaining = 0, .reset_after_ns = NS_PER_SEC,
                      .retry_after_ns = 300 * NS_PER_MS, .delay_ns = 0};
    sl_decision dg = {.allowed = true, .limit = 5, .remaining = 2, .reset_after_ns = NS_PER_SEC,
                      .delay_ns = 200 * NS_PER_MS};
    sl_http_limit_report items[2] = {{"dry", &q, &dk}, {"dry.global", &q, &dg}};
    sl_http_decision_opts o = {.keep_alive = true, .shadow = true, .scoped = true, .nkey = 1,
                               .rejected_by = 0};
    sl_buf_init(&b, 2, 0);
    cr_assert_eq(sl_http_write_decision(&b, &o, items, 2), 0);
    assert_response(&b, "HTTP/1.1 200 OK", "keep-alive", "",
                    "{\"allowed\":true,\"rejected_by\":-1,\"scope\":\"key\",\"binding\":\"dry\",\"limit\":5,"
                    "\"remaining\":0,\"retry_after_ms\":0,\"reset_after_ms\":1000,"
                    "\"delay_ms\":0,\"shadow\":true,\"would_allow\":false,"
                    "\"would_retry_after_ms\":300}");
    sl_buf_free(&b);
}

Test(http_write, binding_limit_is_the_longest_wait)
{
    /* Both refuse: the first refused (rejected_by 0), but the second's wait
     * is the longer, and the request passes only when both admit. */
    sl_limit a = limit_of(SL_GCRA, 10, 60 * NS_PER_SEC, 0);
    sl_limit g = limit_of(SL_GCRA, 100, 60 * NS_PER_SEC, 0);
    sl_decision dk = {.allowed = false, .limit = 10, .remaining = 0,
                      .reset_after_ns = 6 * NS_PER_SEC, .retry_after_ns = 2 * NS_PER_SEC};
    sl_decision dg = {.allowed = false, .limit = 100, .remaining = 0,
                      .reset_after_ns = 40 * NS_PER_SEC, .retry_after_ns = 9 * NS_PER_SEC};
    sl_http_limit_report items[2] = {{"api", &a, &dk}, {"api.global", &g, &dg}};
    sl_http_decision_opts o = {.keep_alive = true, .scoped = true, .nkey = 1, .rejected_by = 0};
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    cr_assert_eq(sl_http_write_decision(&b, &o, items, 2), 0);
    assert_response(&b, "HTTP/1.1 429 Too Many Requests", "keep-alive",
                    "X-RateLimit-Limit: 100\r\nX-RateLimit-Remaining: 0\r\n"
                    "X-RateLimit-Reset: 40\r\nRetry-After: 9\r\n"
                    "RateLimit-Policy: \"api\";q=10;w=60, \"api.global\";q=100;w=60\r\n"
                    "RateLimit: \"api\";r=0;t=6, \"api.global\";r=0;t=40\r\n",
                    "{\"allowed\":false,\"rejected_by\":0,\"scope\":\"global\",\"binding\":\"api.global\",\"limit\":100,"
                    "\"remaining\":0,\"retry_after_ms\":9000,\"reset_after_ms\":40000}");
    sl_buf_free(&b);

    /* A wait of never is the longest of all. */
    dk.retry_after_ns = SL_NEVER;
    const sl_decision *ds[2] = {&dk, &dg};
    cr_assert_eq(sl_http_binding(ds, NULL, 2, 0), 0);
    /* An admitted one is never the binding one of a refusal. */
    dk.retry_after_ns = 30 * NS_PER_SEC;
    dk.allowed = true;
    cr_assert_eq(sl_http_binding(ds, NULL, 2, 1), 1);
    /* Admitted: the least remaining, here the global one. */
    dk.remaining = 7;
    dg.allowed = true;
    dg.remaining = 3;
    cr_assert_eq(sl_http_binding(ds, NULL, 2, -1), 1);
    /* Of different units, the one that admits the fewest more requests like
     * this one: 7 requests left at 1 a request against 3000 tokens left at
     * 1000 a request binds the tokens; at 100 a request, the requests. */
    dg.remaining = 3000;
    int64_t costs[2] = {1, 1000};
    cr_assert_eq(sl_http_binding(ds, costs, 2, -1), 1);
    costs[1] = 100;
    cr_assert_eq(sl_http_binding(ds, costs, 2, -1), 0);
    /* A limit the request took nothing from binds only when all are such. */
    costs[0] = 0;
    cr_assert_eq(sl_http_binding(ds, costs, 2, -1), 1);
    costs[1] = 0;
    cr_assert_eq(sl_http_binding(ds, costs, 2, -1), 0);
    /* A debt (remaining below 0) is no room at all. */
    costs[0] = costs[1] = 1;
    dk.remaining = -5;
    cr_assert_eq(sl_http_binding(ds, costs, 2, -1), 0);
    /* A scoped answer names how many items are the key's: at least one, at
     * most all. */
    o.nkey = 0;
    cr_assert_eq(sl_http_write_decision(&b, &o, items, 2), -1);
    o.nkey = 3;
    cr_assert_eq(sl_http_write_decision(&b, &o, items, 2), -1);
}

Test(http_write, forward_auth_status_and_head)
{
    sl_limit l = limit_of(SL_GCRA, 1, NS_PER_SEC, 0);
    sl_decision d = {.allowed = false, .limit = 1, .remaining = 0,
                     .reset_after_ns = NS_PER_SEC, .retry_after_ns = NS_PER_SEC};
    sl_http_decision_opts o = {.status = 403, .keep_alive = true, .head = true,
                               .rejected_by = -1};
    sl_http_limit_report it = {"auth", &l, &d};
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    cr_assert_eq(sl_http_write_decision(&b, &o, &it, 1), 0);
    char *got = written(&b);
    cr_assert(!strncmp(got, "HTTP/1.1 403 Forbidden\r\n", 24), "%s", got);
    cr_assert_not_null(strstr(got, "\r\nRetry-After: 1\r\n"));
    /* HEAD: the head ends the response; Content-Length is the body's. */
    size_t len = strlen(got);
    cr_assert(!strcmp(got + len - 4, "\r\n\r\n"));
    cr_assert_not_null(strstr(got, "Content-Length: 85\r\n"), "%s", got);
    free(got);
    sl_buf_free(&b);
}

Test(http_write, multi)
{
    sl_limit a = limit_of(SL_GCRA, 10, 60 * NS_PER_SEC, 0);
    sl_limit g = limit_of(SL_SLIDING_WINDOW, 1000, 60 * NS_PER_SEC, 0);
    sl_decision da = {.allowed = true, .limit = 10, .remaining = 9, .reset_after_ns = 6 * NS_PER_SEC};
    sl_decision dg = {.allowed = false, .limit = 1000, .remaining = 0,
                      .reset_after_ns = 30 * NS_PER_SEC, .retry_after_ns = 2500 * NS_PER_MS};
    sl_http_limit_report items[2] = {{"user", &a, &da}, {"glo\"bal\\", &g, &dg}};
    sl_http_decision_opts o = {.keep_alive = true, .multi = true, .rejected_by = 1};
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    cr_assert_eq(sl_http_write_decision(&b, &o, items, 2), 0);
    assert_response(
        &b, "HTTP/1.1 429 Too Many Requests", "keep-alive",
        "X-RateLimit-Limit: 1000\r\nX-RateLimit-Remaining: 0\r\n"
        "X-RateLimit-Reset: 30\r\nRetry-After: 3\r\n"
        "RateLimit-Policy: \"user\";q=10;w=60, \"glo\\\"bal\\\\\";q=1000;w=60\r\n"
        "RateLimit: \"user\";r=9;t=6, \"glo\\\"bal\\\\\";r=0;t=30\r\n",
        "{\"allowed\":false,\"rejected_by\":1,\"limit\":1000,\"remaining\":0,"
        "\"retry_after_ms\":2500,\"reset_after_ms\":30000,\"results\":["
        "{\"allowed\":true,\"limit\":10,\"remaining\":9,\"retry_after_ms\":0,"
        "\"reset_after_ms\":6000},"
        "{\"allowed\":false,\"limit\":1000,\"remaining\":0,\"retry_after_ms\":2500,"
        "\"reset_after_ms\":30000}]}");
    sl_buf_free(&b);

    /* Admitted: the primary is the least remaining. */
    da.remaining = 2;
    dg.allowed = true;
    dg.remaining = 7;
    dg.retry_after_ns = 0;
    o.rejected_by = -1;
    sl_buf_init(&b, 2, 0);
    cr_assert_eq(sl_http_write_decision(&b, &o, items, 2), 0);
    char *got = written(&b);
    cr_assert(!strncmp(got, "HTTP/1.1 200 OK\r\n", 17));
    cr_assert_not_null(strstr(got, "X-RateLimit-Limit: 10\r\nX-RateLimit-Remaining: 2\r\n"));
    cr_assert_null(strstr(got, "Retry-After"));
    free(got);
    sl_buf_free(&b);

    /* Invalid arguments. */
    o.rejected_by = 2;
    cr_assert_eq(sl_http_write_decision(&b, &o, items, 2), -1);
    cr_assert_eq(sl_http_write_decision(&b, &o, items, 0), -1);
    cr_assert_eq(sl_http_write_decision(&b, &o, items, 9), -1);
}

Test(http_write, policy_with_global_limit)
{
    /* Two items without multi: both in the RateLimit fields, one decision in the body. */
    sl_limit a = limit_of(SL_GCRA, 10, 60 * NS_PER_SEC, 0);
    sl_limit g = limit_of(SL_GCRA, 100, 60 * NS_PER_SEC, 0);
    sl_decision da = {.allowed = true, .limit = 10, .remaining = 4, .reset_after_ns = 36 * NS_PER_SEC};
    sl_decision dg = {.allowed = true, .limit = 100, .remaining = 50,
                      .reset_after_ns = 30 * NS_PER_SEC};
    sl_http_limit_report items[2] = {{"api", &a, &da}, {"api.global", &g, &dg}};
    sl_http_decision_opts o = {.keep_alive = true, .rejected_by = -1};
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    cr_assert_eq(sl_http_write_decision(&b, &o, items, 2), 0);
    assert_response(&b, "HTTP/1.1 200 OK", "keep-alive",
                    "X-RateLimit-Limit: 10\r\nX-RateLimit-Remaining: 4\r\n"
                    "X-RateLimit-Reset: 36\r\n"
                    "RateLimit-Policy: \"api\";q=10;w=60, \"api.global\";q=100;w=60\r\n"
                    "RateLimit: \"api\";r=4;t=36, \"api.global\";r=50;t=30\r\n",
                    "{\"allowed\":true,\"limit\":10,\"remaining\":4,\"retry_after_ms\":0,"
                    "\"reset_after_ms\":36000}");
    sl_buf_free(&b);

    /* The global limit nearly spent binds: the headers and a scoped body
     * show it, and say so. */
    dg.remaining = 1;
    o.scoped = true;
    o.nkey = 1;
    sl_buf_init(&b, 2, 0);
    cr_assert_eq(sl_http_write_decision(&b, &o, items, 2), 0);
    assert_response(&b, "HTTP/1.1 200 OK", "keep-alive",
                    "X-RateLimit-Limit: 100\r\nX-RateLimit-Remaining: 1\r\n"
                    "X-RateLimit-Reset: 30\r\n"
                    "RateLimit-Policy: \"api\";q=10;w=60, \"api.global\";q=100;w=60\r\n"
                    "RateLimit: \"api\";r=4;t=36, \"api.global\";r=1;t=30\r\n",
                    "{\"allowed\":true,\"rejected_by\":-1,\"scope\":\"global\",\"binding\":\"api.global\",\"limit\":100,"
                    "\"remaining\":1,\"retry_after_ms\":0,\"reset_after_ms\":30000}");
    sl_buf_free(&b);
}

Test(http_write, unnamed_items_of_a_list_get_their_own_names)
{
    sl_limit l = limit_of(SL_GCRA, 10, 60 * NS_PER_SEC, 0);
    sl_decision d = {.allowed = true, .limit = 10, .remaining = 5, .reset_after_ns = NS_PER_SEC};
    sl_http_limit_report items[3] = {{NULL, &l, &d}, {NULL, &l, &d}, {"named", &l, &d}};
    sl_http_decision_opts o = {.keep_alive = true, .multi = true, .rejected_by = -1};
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    cr_assert_eq(sl_http_write_decision(&b, &o, items, 3), 0);
    char *got = written(&b);
    cr_assert_not_null(strstr(got, "\r\nRateLimit-Policy: \"limit0\";q=10;w=60, "
                                   "\"limit1\";q=10;w=60, \"named\";q=10;w=60\r\n"), "%s", got);
    cr_assert_not_null(strstr(got, "\r\nRateLimit: \"limit0\";r=5;t=1, \"limit1\";r=5;t=1, "
                                   "\"named\";r=5;t=1\r\n"), "%s", got);
    free(got);
    sl_buf_free(&b);
    /* Alone, an unnamed item is "default". */
    sl_buf_init(&b, 2, 0);
    o.multi = false;
    cr_assert_eq(sl_http_write_decision(&b, &o, items, 1), 0);
    got = written(&b);
    cr_assert_not_null(strstr(got, "\r\nRateLimit: \"default\";r=5;t=1\r\n"), "%s", got);
    free(got);
    sl_buf_free(&b);
}

Test(http_write, retry_after_rounding)
{
    static const struct {
        int64_t ns;
        const char *want;
    } cases[] = {
        {1, "Retry-After: 1\r\n"},
        {NS_PER_SEC, "Retry-After: 1\r\n"},
        {NS_PER_SEC + 1, "Retry-After: 2\r\n"},
        {0, "Retry-After: 1\r\n"}, /* a denial never says 0 */
        {59 * NS_PER_SEC + 999999999, "Retry-After: 60\r\n"},
    };
    sl_limit l = limit_of(SL_GCRA, 1, NS_PER_SEC, 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sl_decision d = {.allowed = false, .limit = 1, .remaining = 0,
                         .reset_after_ns = NS_PER_SEC, .retry_after_ns = cases[i].ns};
        sl_buf b;
        sl_buf_init(&b, 2, 0);
        cr_assert_eq(sl_http_write_check(&b, true, "x", &l, &d, false), 0);
        char *got = written(&b);
        cr_assert_not_null(strstr(got, cases[i].want), "case %zu:\n%s", i, got);
        free(got);
        sl_buf_free(&b);
    }
}

Test(http_write, sub_second_period_and_names)
{
    /* 10 per 500ms: q=20 per w=1; 3 per 1.5s: w=2, q=4. */
    sl_limit l = limit_of(SL_GCRA, 10, 500 * NS_PER_MS, 0);
    sl_decision d = {.allowed = true, .limit = 10, .remaining = 9,
                     .reset_after_ns = 50 * NS_PER_MS};
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    cr_assert_eq(sl_http_write_check(&b, true, "a\x01" "b", &l, &d, false), 0);
    char *got = written(&b);
    cr_assert_not_null(strstr(got, "RateLimit-Policy: \"a?b\";q=20;w=1\r\n"), "%s", got);
    free(got);
    sl_buf_clear(&b);
    l = limit_of(SL_GCRA, 3, 1500 * NS_PER_MS, 0);
    cr_assert_eq(sl_http_write_check(&b, true, "x", &l, &d, false), 0);
    got = written(&b);
    cr_assert_not_null(strstr(got, "RateLimit-Policy: \"x\";q=4;w=2\r\n"), "%s", got);
    free(got);
    sl_buf_clear(&b);
    /* Huge numbers are clamped to an RFC 8941 Integer. */
    l = limit_of(SL_FIXED_WINDOW, INT64_C(10000000000000000), NS_PER_SEC, 0);
    d.remaining = INT64_C(10000000000000000);
    cr_assert_eq(sl_http_write_check(&b, true, "x", &l, &d, false), 0);
    got = written(&b);
    cr_assert_not_null(strstr(got, "q=999999999999999;w=1\r\n"), "%s", got);
    cr_assert_not_null(strstr(got, "r=999999999999999;"), "%s", got);
    free(got);
    sl_buf_clear(&b);
    /* A name longer than SL_HTTP_REPORT_NAME_MAX is refused. */
    char longname[SL_HTTP_REPORT_NAME_MAX + 2];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    cr_assert_eq(sl_http_write_check(&b, true, longname, &l, &d, false), -1);
    /* The worst head: 8 items, names at the cap made only of bytes to escape. */
    longname[SL_HTTP_REPORT_NAME_MAX] = '\0';
    memset(longname, '"', SL_HTTP_REPORT_NAME_MAX);
    sl_http_limit_report items[8];
    for (int i = 0; i < 8; i++)
        items[i] = (sl_http_limit_report){longname, &l, &d};
    sl_http_decision_opts o = {.keep_alive = true, .multi = true, .rejected_by = 7};
    cr_assert_eq(sl_http_write_decision(&b, &o, items, 8), 0);
    cr_assert(!b.failed);
    sl_buf_free(&b);
}

Test(http_write, error_response)
{
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    cr_assert_eq(sl_http_write_error(&b, 400, false, "unknown parameter 'a\"b\\\n'", "a\"b"), 0);
    char *got = written(&b);
    static const char body[] = "{\"error\":\"unknown parameter 'a\\\"b\\\\\\u000a'\","
                               "\"field\":\"a\\\"b\"}";
    char want[512];
    snprintf(want, sizeof want,
             "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
             sizeof body - 1, body);
    cr_assert_str_eq(got, want);
    free(got);
    sl_buf_clear(&b);
    cr_assert_eq(sl_http_write_error(&b, 431, true, "too many header fields", NULL), 0);
    got = written(&b);
    cr_assert(strstr(got, "431 Request Header Fields Too Large\r\n"));
    cr_assert(strstr(got, "\r\n\r\n{\"error\":\"too many header fields\"}"));
    free(got);
    sl_buf_clear(&b);
    /* A very long message is cut, and the body is still JSON. */
    char msg[3000];
    memset(msg, 'x', sizeof msg - 1);
    msg[sizeof msg - 1] = '\0';
    memcpy(msg + 500, " ", 1);
    cr_assert_eq(sl_http_write_error(&b, 400, true, msg, "f"), 0);
    got = written(&b);
    char *body2 = strstr(got, "\r\n\r\n") + 4;
    cr_assert(!strncmp(body2, "{\"error\":\"", 10));
    cr_assert(!strcmp(got + strlen(got) - 5, "...\"}"), "%s", got + strlen(got) - 20);
    free(got);
    /* Cut wherever the escapes and spaces fall near the cap: the body stays
     * valid JSON (never half an escape), the message a prefix of words. */
    for (size_t at = 900; at < 1040; at += 3) {
        sl_buf_clear(&b);
        for (size_t i = 0; i < sizeof msg - 1; i++)
            msg[i] = i % 7 == 0 ? ' ' : i >= at && i % 5 == 0 ? '\x01' : i % 11 == 0 ? '"' : 'y';
        cr_assert_eq(sl_http_write_error(&b, 400, true, msg, NULL), 0);
        got = written(&b);
        body2 = strstr(got, "\r\n\r\n") + 4;
        cJSON *j = cJSON_Parse(body2);
        cr_assert_not_null(j, "cut at %zu: %s", at, body2 + strlen(body2) - 40);
        const char *e = cJSON_GetStringValue(cJSON_GetObjectItem(j, "error"));
        cr_assert_not_null(e);
        size_t el = strlen(e);
        cr_assert(el > 3 && !strcmp(e + el - 3, "...") && !strncmp(e, msg, el - 3), "cut at %zu", at);
        cJSON_Delete(j);
        free(got);
    }
    sl_buf_free(&b);
}

Test(http_write, reasons_and_generic)
{
    static const int codes[] = {200, 400, 401, 403, 404, 405, 413, 414, 429, 431, 500, 501, 503, 505};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        cr_assert_str_neq(sl_http_reason(codes[i]), "Unknown", "%d", codes[i]);
    cr_assert_str_eq(sl_http_reason(429), "Too Many Requests");
    cr_assert_str_eq(sl_http_reason(299), "Unknown");
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    cr_assert_eq(sl_http_write_response(&b, 405, true, "application/json", "Allow: GET, POST\r\n",
                                        "{}", 2, false), 0);
    char *got = written(&b);
    cr_assert_str_eq(got, "HTTP/1.1 405 Method Not Allowed\r\nContent-Type: application/json\r\n"
                          "Content-Length: 2\r\nConnection: keep-alive\r\nAllow: GET, POST\r\n"
                          "\r\n{}");
    free(got);
    sl_buf_clear(&b);
    cr_assert_eq(sl_http_write_response(&b, 200, true, NULL, NULL, "ok\n", 3, true), 0);
    got = written(&b);
    cr_assert_str_eq(got, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\n");
    free(got);
    cr_assert_eq(sl_http_write_response(&b, 99, true, NULL, NULL, NULL, 0, false), -1);
    sl_buf_free(&b);
}

Test(http_write, buffer_cap_fails_sticky)
{
    sl_limit l = limit_of(SL_GCRA, 10, 60 * NS_PER_SEC, 0);
    sl_decision d = {.allowed = true, .limit = 10, .remaining = 9};
    sl_buf b;
    sl_buf_init(&b, 2, 64);
    cr_assert_eq(sl_http_write_check(&b, true, "api", &l, &d, false), -1);
    cr_assert(b.failed);
    sl_buf_free(&b);
}
