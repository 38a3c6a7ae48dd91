/*
 * fuzz_http.c: libFuzzer target for the HTTP request parser and the
 * response writer (src/proto/http.c, headers.c).
 *
 * The first input byte picks what to fuzz, the rest is the material:
 *   byte % 2 == 0  the request parser on raw bytes (a pipeline), with the
 *                  default caps or, when bit 7 is set, tiny ones: a one-shot
 *                  parse is compared with one resumed as the bytes arrive a
 *                  byte at a time, a valid head's every shorter prefix must be
 *                  INCOMPLETE, slices must lie inside the buffer, and the
 *                  one-shot answer must be a slow model's (model_parse: the
 *                  rules a byte at a time); then the query helpers run on
 *                  each parsed query
 *   byte % 2 == 1  the response writer on decisions built from the bytes: the
 *                  head must be clean lines and Content-Length the body's
 *                  length, the body one object of plain ASCII (fuzz_check_json
 *                  reads bodies back with cJSON)
 * CHECK() aborts when a guarantee of http.h breaks.
 *
 * Build and run: make fuzz (FUZZ_SECONDS=N to change the time per target).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/parse.h"
#include "fuzz.h"
#include "proto/http.h"

#define HDR_CAP 64

static sl_http_header hdr_a[HDR_CAP], hdr_b[HDR_CAP];

static bool inside(sl_http_slice s, const char *base, size_t n)
{
    return s.len == 0 || (s.ptr >= base && s.ptr + s.len <= base + n);
}

static void check_request(const sl_http_request *r, const char *base, size_t n)
{
    CHECK(inside(r->method, base, n) && r->method.len > 0);
    CHECK(inside(r->target, base, n) && r->target.len > 0);
    CHECK(inside(r->query, base, n));
    CHECK(inside(r->path, base, n) || (r->path.len == 1 && r->path.ptr[0] == '/'));
    CHECK(r->minor_version == 0 || r->minor_version == 1);
    CHECK(r->num_headers <= HDR_CAP);
    for (size_t i = 0; i < r->num_headers; i++) {
        CHECK(inside(r->headers[i].name, base, n) && r->headers[i].name.len > 0);
        CHECK(inside(r->headers[i].value, base, n));
        const sl_http_slice v = r->headers[i].value;
        if (v.len) /* trimmed */
            CHECK(v.ptr[0] != ' ' && v.ptr[0] != '\t' && v.ptr[v.len - 1] != ' ' &&
                  v.ptr[v.len - 1] != '\t');
    }
}

/* The same bytes, and at the same offset unless it is the static "/". */
static bool same_slice(sl_http_slice a, const char *abase, sl_http_slice b, const char *bbase,
                       size_t n)
{
    if (a.len != b.len)
        return false;
    if (a.len == 0)
        return true;
    bool a_in = inside(a, abase, n), b_in = inside(b, bbase, n);
    if (a_in != b_in || (a_in && a.ptr - abase != b.ptr - bbase))
        return false;
    return !memcmp(a.ptr, b.ptr, a.len);
}

/* The query helpers on a parsed query: never past its end, results bounded. */
static void fuzz_query(sl_http_slice q)
{
    size_t pos = 0, prev = 0;
    sl_http_slice k, v;
    char out[64];
    int pairs = 0;
    while (sl_http_query_next(q.ptr, q.len, &pos, &k, &v)) {
        CHECK(pos > prev && pos <= q.len);
        prev = pos;
        CHECK(inside(k, q.ptr, q.len) && inside(v, q.ptr, q.len));
        long r = sl_http_percent_decode(v.ptr, v.len, out, sizeof out);
        CHECK(r >= -2 && r <= (long)sizeof out && (r < 0 || (size_t)r <= v.len));
        if (++pairs > 1000)
            break;
    }
    static const char *names[] = {"key", "limit", "period", "burst", "cost", "algorithm"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        long r = sl_http_query_param(q.ptr, q.len, names[i], out, sizeof out);
        CHECK(r >= -3 && r <= (long)sizeof out);
    }
    int64_t x;
    (void)sl_parse_i64(q.ptr, q.len, SL_INT_MINUS, &x);
}

/* ------------------------------------------------------------------------ */
/* A slow model of the request parser                                       */
/* ------------------------------------------------------------------------ */

/*
 * The rules of http.h applied a byte at a time to the whole input, written
 * for clarity rather than speed, with no state to resume: the parser scans
 * runs of bytes at once and keeps its state between calls, and must still
 * answer exactly what this model answers, on every input.
 */
typedef struct model {
    int rc;
    int status;
    const char *errstr, *field;
    size_t method_at, method_len, target_at, target_len;
    int minor;
    size_t nh;
    size_t name_at[HDR_CAP], name_len[HDR_CAP], value_at[HDR_CAP], value_len[HDR_CAP];
    uint64_t content_length;
    bool keep_alive, expect_continue, body_too_large;
} model;

static int m_fail(model *m, int status, const char *errstr, const char *field)
{
    m->rc = SL_HTTP_ERROR;
    m->status = status;
    m->errstr = errstr;
    m->field = field;
    return SL_HTTP_ERROR;
}

static bool m_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static size_t m_cap(size_t v, size_t dflt)
{
    v = v ? v : dflt;
    return v > SL_HTTP_MAX_CAP ? SL_HTTP_MAX_CAP : v;
}

/* Whether a target is one of the three forms http.h accepts. */
static bool m_target_ok(const unsigned char *t, size_t n)
{
    if (t[0] == '/' || (n == 1 && t[0] == '*'))
        return true;
    size_t skip = 0;
    if (n >= 7 && sl_http_slice_ieq((sl_http_slice){(const char *)t, 7}, "http://"))
        skip = 7;
    else if (n >= 8 && sl_http_slice_ieq((sl_http_slice){(const char *)t, 8}, "https://"))
        skip = 8;
    return skip && skip < n && t[skip] != '/' && t[skip] != '?';
}

static int model_parse(const unsigned char *b, size_t n, const sl_http_limits *lim, model *m)
{
    memset(m, 0, sizeof *m);
    size_t rl = m_cap(lim ? lim->max_request_line : 0, SL_HTTP_DEFAULT_MAX_REQUEST_LINE);
    size_t hb = m_cap(lim ? lim->max_header_bytes : 0, SL_HTTP_DEFAULT_MAX_HEADER_BYTES);
    size_t maxh = lim && lim->max_headers ? lim->max_headers : SL_HTTP_DEFAULT_MAX_HEADERS;
    uint64_t maxb = lim && lim->max_body ? lim->max_body : SL_HTTP_DEFAULT_MAX_BODY;
    if (maxh > HDR_CAP)
        maxh = HDR_CAP;
    size_t i = 0;

/* The next byte of the request line: INCOMPLETE when it has not come, 414
 * past the cap (the line end after the version excepted: line_end_ok). */
#define RL_BYTE(line_end_ok)                                                          \
    do {                                                                              \
        if (i == n)                                                                   \
            return m->rc = SL_HTTP_INCOMPLETE;                                        \
        if (i >= rl && !((line_end_ok) && (b[i] == '\r' || b[i] == '\n')))          \
            return m_fail(m, 414, "request line is too long", "request-line");       \
    } while (0)

    /* Empty lines, then the method. */
    for (;;) {
        RL_BYTE(false);
        if (b[i] == '\n') {
            i++;
        } else if (b[i] == '\r') {
            i++;
            RL_BYTE(false);
            if (b[i] != '\n')
                return m_fail(m, 400, "cr not followed by lf", "request-line");
            i++;
        } else {
            break;
        }
    }
    if (!m_tchar(b[i]))
        return m_fail(m, 400, "malformed request line", "request-line");
    m->method_at = i;
    for (i++;; i++) {
        RL_BYTE(false);
        if (b[i] == ' ')
            break;
        if (!m_tchar(b[i]))
            return m_fail(m, 400, "invalid method", "method");
    }
    m->method_len = i - m->method_at;
    m->target_at = ++i;
    for (;; i++) {
        RL_BYTE(false);
        unsigned char c = b[i];
        if (c == ' ')
            break;
        if (c == '\r' || c == '\n')
            return m_fail(m, 400, "malformed request line", "request-line");
        if (c < 0x21 || c > 0x7e)
            return m_fail(m, 400, "invalid character in request target", "target");
    }
    m->target_len = i - m->target_at;
    if (m->target_len == 0)
        return m_fail(m, 400, "malformed request line", "request-line");
    if (!m_target_ok(b + m->target_at, m->target_len))
        return m_fail(m, 400, "invalid request target", "target");
    i++;
    /* "HTTP/1.0" or "HTTP/1.1", then the line end. */
    for (size_t k = 0;; k++, i++) {
        RL_BYTE(true);
        unsigned char c = b[i];
        bool digit = c >= '0' && c <= '9';
        if (k < 5 && c != (unsigned char)"HTTP/"[k])
            return m_fail(m, 400, "malformed http version", "version");
        if ((k == 5 || k == 7) && !digit)
            return m_fail(m, 400, "malformed http version", "version");
        if ((k == 5 && c != '1') || (k == 7 && c > '1'))
            return m_fail(m, 505, "http version not supported", "version");
        if ((k == 6 || k >= 8) && digit)
            return m_fail(m, 505, "http version not supported", "version");
        if (k == 6 && c != '.')
            return m_fail(m, 400, "malformed http version", "version");
        if (k == 7)
            m->minor = c - '0';
        if (k >= 8) {
            if (c == '\n')
                break;
            if (c != '\r')
                return m_fail(m, 400, "malformed http version", "version");
            i++;
            RL_BYTE(true);
            if (b[i] != '\n')
                return m_fail(m, 400, "cr not followed by lf", "request-line");
            break;
        }
    }
#undef RL_BYTE
    i++;

/* The next byte of the header fields: INCOMPLETE, or 431 past the cap. */
    size_t hs = i;
#define HDR_BYTE()                                                                    \
    do {                                                                              \
        if (i == n)                                                                   \
            return m->rc = SL_HTTP_INCOMPLETE;                                        \
        if (i - hs >= hb)                                                             \
            return m_fail(m, 431, "header fields are too large", "headers");          \
    } while (0)

    bool has_cl = false, te = false, conn_close = false, conn_keep = false;
    int hosts = 0;
    for (;;) {
        HDR_BYTE();
        unsigned char c = b[i];
        if (c == '\r') {
            i++;
            HDR_BYTE();
            if (b[i] != '\n')
                return m_fail(m, 400, "cr not followed by lf", "headers");
            break;
        }
        if (c == '\n')
            break;
        if (c == ' ' || c == '\t')
            return m_fail(m, 400, "obsolete line folding is not allowed", "headers");
        if (!m_tchar(c))
            return m_fail(m, 400, "invalid character in header field name", "headers");
        if (m->nh >= maxh)
            return m_fail(m, 431, "too many header fields", "headers");
        size_t name_at = i;
        for (i++;; i++) {
            HDR_BYTE();
            c = b[i];
            if (c == ':')
                break;
            if (c == ' ' || c == '\t')
                return m_fail(m, 400, "whitespace before colon in header field", "headers");
            if (!m_tchar(c))
                return m_fail(m, 400, "invalid character in header field name", "headers");
        }
        size_t colon = i, first = 0, last = 0; /* first non-space byte, one past the last */
        for (i++;; i++) {
            HDR_BYTE();
            c = b[i];
            if (c == '\r') {
                i++;
                HDR_BYTE();
                if (b[i] != '\n')
                    return m_fail(m, 400, "cr not followed by lf", "headers");
                break;
            }
            if (c == '\n')
                break;
            if (c == ' ' || c == '\t')
                continue;
            if (c < 0x20 || c == 0x7f)
                return m_fail(m, 400, "invalid character in header field value", "headers");
            if (!first)
                first = i;
            last = i + 1;
        }
        i++;
        size_t h = m->nh++;
        m->name_at[h] = name_at;
        m->name_len[h] = colon - name_at;
        m->value_at[h] = first ? first : colon + 1;
        m->value_len[h] = first ? last - first : 0;
        sl_http_slice name = {(const char *)b + name_at, colon - name_at};
        sl_http_slice v = {(const char *)b + m->value_at[h], m->value_len[h]};
        if (sl_http_slice_ieq(name, "content-length")) {
            uint64_t x = 0;
            bool ok = v.len > 0;
            for (size_t k = 0; ok && k < v.len; k++) {
                unsigned d = (unsigned char)v.ptr[k] - '0';
                ok = d <= 9 && x <= ((uint64_t)INT64_MAX - d) / 10;
                x = x * 10 + d;
            }
            if (!ok)
                return m_fail(m, 400, "invalid content-length", "content-length");
            if (has_cl && x != m->content_length)
                return m_fail(m, 400, "conflicting content-length fields", "content-length");
            has_cl = true;
            m->content_length = x;
        } else if (sl_http_slice_ieq(name, "transfer-encoding")) {
            te = true;
        } else if (sl_http_slice_ieq(name, "host")) {
            if (++hosts > 1)
                return m_fail(m, 400, "more than one host field", "host");
        } else if (sl_http_slice_ieq(name, "connection")) {
            for (size_t k = 0; k < v.len;) {
                size_t e = k;
                while (e < v.len && v.ptr[e] != ',')
                    e++;
                sl_http_slice tok = {v.ptr + k, e - k};
                while (tok.len && (tok.ptr[0] == ' ' || tok.ptr[0] == '\t')) {
                    tok.ptr++;
                    tok.len--;
                }
                while (tok.len && (tok.ptr[tok.len - 1] == ' ' || tok.ptr[tok.len - 1] == '\t'))
                    tok.len--;
                conn_close |= sl_http_slice_ieq(tok, "close");
                conn_keep |= sl_http_slice_ieq(tok, "keep-alive");
                k = e + 1;
            }
        } else if (sl_http_slice_ieq(name, "expect")) {
            m->expect_continue |= sl_http_slice_ieq(v, "100-continue");
        }
    }
#undef HDR_BYTE
    if (te && has_cl)
        return m_fail(m, 400, "content-length with transfer-encoding", "transfer-encoding");
    if (te)
        return m_fail(m, 501, "transfer-encoding is not supported", "transfer-encoding");
    if (m->minor == 1 && hosts == 0)
        return m_fail(m, 400, "missing host field", "host");
    m->keep_alive = m->minor == 1 ? !conn_close : conn_keep && !conn_close;
    if (m->minor == 0)
        m->expect_continue = false;
    m->body_too_large = m->content_length > maxb;
    return m->rc = (int)(i + 1);
}

/* The parser's answer on the whole input is the model's. */
static void check_model(const uint8_t *in, size_t n, const sl_http_limits *lim, int ra,
                        const sl_http_request *a, const char *base)
{
    model m;
    int rm = model_parse(in, n, lim, &m);
    if (rm != ra)
        fprintf(stderr, "parser %d (%s), model %d (%s)\n", ra, ra == SL_HTTP_ERROR ? a->errstr : "",
                rm, rm == SL_HTTP_ERROR ? m.errstr : "");
    CHECK(rm == ra);
    if (ra == SL_HTTP_ERROR) {
        CHECK(a->status == m.status && !strcmp(a->errstr, m.errstr));
        CHECK((!a->field && !m.field) || (a->field && m.field && !strcmp(a->field, m.field)));
        return;
    }
    if (ra < 0)
        return;
    CHECK(a->method.ptr == base + m.method_at && a->method.len == m.method_len);
    CHECK(a->target.ptr == base + m.target_at && a->target.len == m.target_len);
    CHECK(a->minor_version == m.minor && a->num_headers == m.nh);
    for (size_t i = 0; i < m.nh; i++) {
        CHECK(a->headers[i].name.ptr == base + m.name_at[i]);
        CHECK(a->headers[i].name.len == m.name_len[i]);
        CHECK(a->headers[i].value.ptr == base + m.value_at[i]);
        CHECK(a->headers[i].value.len == m.value_len[i]);
    }
    CHECK(a->content_length == m.content_length && a->keep_alive == m.keep_alive);
    CHECK(a->expect_continue == m.expect_continue && a->body_too_large == m.body_too_large);
    /* Path and query: the target split at its first '?' (after the authority
     * for the absolute form). */
    sl_http_slice t = a->target;
    const char *q = memchr(t.ptr, '?', t.len);
    CHECK(a->has_query == (q != NULL));
    if (q)
        CHECK(a->query.ptr == q + 1 && a->query.len == (size_t)(t.ptr + t.len - q - 1));
    if (t.ptr[0] == '/' || (t.len == 1 && t.ptr[0] == '*'))
        CHECK(a->path.ptr == t.ptr && a->path.len == (size_t)((q ? q : t.ptr + t.len) - t.ptr));
}

static void fuzz_parser(const uint8_t *in, size_t n, bool tiny)
{
    sl_http_limits small = {.max_request_line = 24, .max_header_bytes = 48, .max_headers = 3,
                            .max_body = 8};
    const sl_http_limits *lim = tiny ? &small : NULL;

    char *whole = copy_of(in, n);
    sl_http_request a;
    sl_http_request_init(&a, hdr_a, HDR_CAP);
    int ra = sl_http_parse_request(whole, n, &a, lim);
    CHECK(ra == SL_HTTP_ERROR || ra == SL_HTTP_INCOMPLETE || (ra > 0 && (size_t)ra <= n));
    check_model(in, n, lim, ra, &a, whole);

    /* Resumed, a byte at a time, on one buffer. */
    char *grow = copy_of(in, n);
    sl_http_request b;
    sl_http_request_init(&b, hdr_b, HDR_CAP);
    int rb = SL_HTTP_INCOMPLETE;
    size_t k = 0;
    for (; k <= n; k++) {
        rb = sl_http_parse_request(grow, k, &b, lim);
        if (rb != SL_HTTP_INCOMPLETE)
            break;
    }
    CHECK(rb == ra);
    if (ra > 0) {
        CHECK(k == (size_t)ra);
        check_request(&a, whole, (size_t)ra);
        check_request(&b, grow, (size_t)ra);
        CHECK(a.num_headers == b.num_headers && a.minor_version == b.minor_version);
        CHECK(a.keep_alive == b.keep_alive && a.content_length == b.content_length);
        CHECK(a.body_too_large == b.body_too_large && a.expect_continue == b.expect_continue);
        CHECK(same_slice(a.method, whole, b.method, grow, (size_t)ra));
        CHECK(same_slice(a.target, whole, b.target, grow, (size_t)ra));
        CHECK(same_slice(a.path, whole, b.path, grow, (size_t)ra));
        CHECK(same_slice(a.query, whole, b.query, grow, (size_t)ra));
        for (size_t i = 0; i < a.num_headers; i++) {
            CHECK(same_slice(a.headers[i].name, whole, b.headers[i].name, grow, (size_t)ra));
            CHECK(same_slice(a.headers[i].value, whole, b.headers[i].value, grow, (size_t)ra));
        }
        /* A fresh look at one byte less: INCOMPLETE. */
        char *prefix = copy_of(in, (size_t)ra - 1);
        sl_http_request c;
        sl_http_request_init(&c, hdr_b, HDR_CAP);
        CHECK(sl_http_parse_request(prefix, (size_t)ra - 1, &c, lim) == SL_HTTP_INCOMPLETE);
        free(prefix);
        fuzz_query(a.query);
        char pbuf[32];
        long pl = sl_http_path_decode(a.path.ptr, a.path.len, pbuf, sizeof pbuf);
        CHECK(pl >= -2 && pl <= (long)sizeof pbuf);
        for (size_t i = 0; i < a.num_headers; i++) {
            sl_http_slice f = sl_http_list_first(a.headers[i].value);
            CHECK(f.len == 0 || inside(f, a.headers[i].value.ptr, a.headers[i].value.len));
            CHECK(!memchr(f.ptr, ',', f.len));
        }
        /* sl_http_find_header agrees with a scan. */
        for (size_t i = 0; i < a.num_headers && i < 4; i++) {
            char name[64];
            size_t nl = a.headers[i].name.len < 63 ? a.headers[i].name.len : 63;
            memcpy(name, a.headers[i].name.ptr, nl);
            name[nl] = '\0';
            const sl_http_header *h = sl_http_find_header(&a, name);
            CHECK(h != NULL || nl < a.headers[i].name.len || memchr(name, 0, nl));
        }
    } else if (ra == SL_HTTP_ERROR) {
        CHECK(a.errstr && *a.errstr && !strchr(a.errstr, '\n'));
        CHECK(b.errstr && !strcmp(a.errstr, b.errstr) && a.status == b.status);
        CHECK(a.status == 400 || a.status == 414 || a.status == 431 || a.status == 501 ||
              a.status == 505);
        CHECK(k <= n);
    }
    free(grow);

    /* The rest of the pipeline, as a server consumes it (bodies skipped). */
    size_t off = ra > 0 ? (size_t)ra + (a.content_length < n ? (size_t)a.content_length : n) : n;
    for (int i = 0; off < n && i < 64; i++) {
        int r = sl_http_parse_request(whole + off, n - off, &a, lim);
        if (r <= 0)
            break;
        CHECK((size_t)r <= n - off);
        check_request(&a, whole + off, (size_t)r);
        off += (size_t)r;
        if (a.content_length > n - off)
            break;
        off += (size_t)a.content_length;
    }
    free(whole);
}

/* Reads an int64 from the input, or 0 when it runs out. */
static int64_t take_i64(const uint8_t **p, size_t *n)
{
    uint64_t v = 0;
    for (int i = 0; i < 8 && *n; i++, (*p)++, (*n)--)
        v = v << 8 | **p;
    return (int64_t)v;
}

static void fuzz_writer(const uint8_t *in, size_t n)
{
    sl_limit limits[SL_TAKE_MANY_MAX];
    sl_decision ds[SL_TAKE_MANY_MAX];
    sl_http_limit_report items[SL_TAKE_MANY_MAX];
    char names[SL_TAKE_MANY_MAX][12];
    size_t count = n ? (size_t)(in[0] % SL_TAKE_MANY_MAX) + 1 : 1;
    uint8_t flags = n > 1 ? in[1] : 0;
    if (n > 2) {
        in += 2;
        n -= 2;
    } else {
        n = 0;
    }
    for (size_t i = 0; i < count; i++) {
        int64_t lim = take_i64(&in, &n), per = take_i64(&in, &n);
        sl_algorithm alg = (sl_algorithm)((uint64_t)lim % 6);
        lim = (int64_t)((uint64_t)lim % 1000000) + 1;
        per = (int64_t)((uint64_t)per % (uint64_t)SL_SPAN_MAX) + 1;
        if (sl_limit_init(&limits[i], alg, lim, per, 0) != SL_OK)
            CHECK(sl_limit_init(&limits[i], SL_GCRA, 1, 1000000000, 0) == SL_OK);
        ds[i].allowed = take_i64(&in, &n) & 1;
        ds[i].limit = take_i64(&in, &n);
        ds[i].remaining = take_i64(&in, &n);
        ds[i].reset_after_ns = take_i64(&in, &n);
        ds[i].retry_after_ns = take_i64(&in, &n);
        if (ds[i].retry_after_ns < 0)
            ds[i].retry_after_ns = SL_NEVER;
        ds[i].delay_ns = take_i64(&in, &n);
        ds[i].lease_id = 0;
        for (size_t j = 0; j < sizeof names[i] - 1; j++) {
            /* Any byte but NUL: quotes, backslashes and controls included. */
            names[i][j] = n ? (char)(*in | 1) : 'x';
            if (n) {
                in++;
                n--;
            }
        }
        names[i][sizeof names[i] - 1] = '\0';
        items[i].name = (flags & 0x10) ? NULL : names[i];
        items[i].limit = &limits[i];
        items[i].decision = &ds[i];
    }
    sl_http_decision_opts o = {
        .status = (flags & 3) == 0 ? 0 : (flags & 3) == 1 ? 403 : 401,
        .keep_alive = flags & 4,
        .shadow = flags & 8,
        .head = false,
        .multi = flags & 0x20,
        .rejected_by = (flags & 0x40) ? (int)(count - 1) : -1,
    };
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    int rc = sl_http_write_decision(&b, &o, items, count);
    CHECK(rc == 0);
    CHECK(!b.failed);
    /* The head: clean CRLF lines; Content-Length says the body's length. */
    char *end = NULL;
    for (size_t i = 0; i + 3 < b.len; i++)
        if (!memcmp(b.data + i, "\r\n\r\n", 4)) {
            end = b.data + i + 4;
            break;
        }
    CHECK(end);
    size_t head = (size_t)(end - b.data);
    for (size_t i = 0; i < head; i++) {
        unsigned char c = (unsigned char)b.data[i];
        CHECK((c >= 0x20 && c < 0x7f) || (c == '\r' && b.data[i + 1] == '\n') ||
              (c == '\n' && i > 0 && b.data[i - 1] == '\r'));
    }
    /* The buffer is not NUL-terminated: search the head only. */
    size_t clen = 0;
    bool found = false;
    for (size_t i = 0; i + 18 <= head && !found; i++)
        if (!memcmp(b.data + i, "\r\nContent-Length: ", 18)) {
            found = true;
            for (size_t j = i + 18; j < head && b.data[j] >= '0' && b.data[j] <= '9'; j++)
                clen = clen * 10 + (size_t)(b.data[j] - '0');
        }
    CHECK(found);
    CHECK(clen == b.len - head);
    size_t blen = b.len - head;
    CHECK(blen > 12 && end[0] == '{' && end[blen - 1] == '}');
    CHECK(!memcmp(end, "{\"allowed\":true,", 16) || !memcmp(end, "{\"allowed\":false,", 17));
    for (size_t i = 0; i < blen; i++)
        CHECK(end[i] > 0x20 && end[i] < 0x7f); /* numbers and names only: no spaces */
    sl_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    uint8_t mode = data[0];
    if (mode % 2 == 0)
        fuzz_parser(data + 1, size - 1, mode & 0x80);
    else
        fuzz_writer(data + 1, size - 1);
    return 0;
}
