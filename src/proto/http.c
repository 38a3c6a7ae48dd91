/*
 * http.c: the HTTP/1.1 request parser and the request helpers.
 * See http.h for the contract; this file explains only the how.
 *
 * The parser is a state machine whose whole state lives in sl_http_request,
 * so a resumed call continues exactly where the last one stopped, and a head
 * that arrives in n pieces costs the same as one that arrives whole. Within a
 * state it does not step byte by byte: it scans a run of bytes that the state
 * accepts without deciding anything (a method, a target, a field name or
 * value) with one table lookup per byte, or 16 bytes at a time with SSE2, and
 * decides only at the byte that ends the run. Every error is still decided by
 * the byte at which it shows (or, for the checks that need the whole head, by
 * the final line end), which is what makes every prefix of a valid head
 * INCOMPLETE. Caps bound each scan: a scan never passes the byte where the
 * current part's cap ends, nor `len`.
 */
#include "proto/http.h"

#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>

#include "common/hex.h"
#endif

#include "common/parse.h"

/* Parser states. The request line: */
enum {
    ST_START = 0, /* before the method; empty lines are skipped */
    ST_START_CR,  /* an empty line's CR */
    ST_METHOD,
    ST_TARGET,
    ST_VERSION,   /* "HTTP/1.x", st_ver bytes matched */
    ST_RL_CR,     /* the CR ending the request line */
    /* The header fields: */
    ST_HDR_START, /* the first byte of a field line, or of the final empty line */
    ST_HDR_NAME,
    ST_HDR_VALUE,
    ST_HDR_CR,
    ST_END_CR,    /* the final empty line's CR */
};

/*
 * Byte classes, a bit each, one table for all of them:
 *   C_TCHAR  tchar (RFC 9110 section 5.6.2): methods and field names
 *   C_VCHAR  visible ASCII, 0x21-0x7E: the request-target
 *   C_FIELD  a byte a field value may hold: HTAB, SP, VCHAR, obs-text
 *            (0x80-0xFF); every other byte (CTLs, DEL) ends the value's scan
 */
enum { C_TCHAR = 1, C_VCHAR = 2, C_FIELD = 4 };

static const unsigned char byte_class[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, /* 00: HTAB */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 10 */
    4, 7, 6, 7, 7, 7, 7, 7, 6, 6, 7, 7, 6, 7, 7, 6, /* 20: SP ! " # $ % & ' ( ) * + , - . / */
    7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 6, 6, 6, 6, 6, 6, /* 30: 0-9 : ; < = > ? */
    6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, /* 40: @ A-O */
    7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 6, 6, 6, 7, 7, /* 50: P-Z [ \ ] ^ _ */
    7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, /* 60: ` a-o */
    7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 6, 7, 6, 7, 0, /* 70: p-z { | } ~ DEL */
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, /* 80-FF: obs-text */
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4,
};

static bool is_tchar(unsigned char c)
{
    return byte_class[c] & C_TCHAR;
}

/* The first offset in [pos, end) whose byte is not of class `cls`, or end.
 * Four bytes per round: field values and targets are tens of bytes long. */
static size_t scan_class(const unsigned char *b, size_t pos, size_t end, unsigned cls)
{
    while (end - pos >= 4) {
        if (!(byte_class[b[pos]] & cls))
            return pos;
        if (!(byte_class[b[pos + 1]] & cls))
            return pos + 1;
        if (!(byte_class[b[pos + 2]] & cls))
            return pos + 2;
        if (!(byte_class[b[pos + 3]] & cls))
            return pos + 3;
        pos += 4;
    }
    while (pos < end && (byte_class[b[pos]] & cls))
        pos++;
    return pos;
}

/* scan_class for C_VCHAR and C_FIELD, 16 bytes at a time where SSE2 is
 * there (every x86-64). Only whole 16-byte blocks inside [pos, end) are
 * loaded; the tail goes through the table. SSE2 compares bytes as signed:
 * 0x80-0xFF are negative. */
#if defined(__SSE2__)
static size_t scan_vchar(const unsigned char *b, size_t pos, size_t end)
{
    const __m128i sp = _mm_set1_epi8(0x20), del = _mm_set1_epi8(0x7f);
    while (end - pos >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(b + pos));
        /* 0x20 < v < 0x7F, signed: the negative bytes fail the first test. */
        __m128i ok = _mm_and_si128(_mm_cmpgt_epi8(v, sp), _mm_cmplt_epi8(v, del));
        unsigned stop = (unsigned)_mm_movemask_epi8(ok) ^ 0xffffu;
        if (stop)
            return pos + (size_t)__builtin_ctz(stop);
        pos += 16;
    }
    return scan_class(b, pos, end, C_VCHAR);
}

static size_t scan_field(const unsigned char *b, size_t pos, size_t end)
{
    const __m128i sp = _mm_set1_epi8(0x20), minus1 = _mm_set1_epi8(-1);
    const __m128i tab = _mm_set1_epi8(0x09), del = _mm_set1_epi8(0x7f);
    while (end - pos >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(b + pos));
        /* A CTL is 0x00-0x1F (signed: -1 < v < 0x20), HTAB excepted; and DEL. */
        __m128i ctl = _mm_and_si128(_mm_cmpgt_epi8(v, minus1), _mm_cmplt_epi8(v, sp));
        ctl = _mm_andnot_si128(_mm_cmpeq_epi8(v, tab), ctl);
        ctl = _mm_or_si128(ctl, _mm_cmpeq_epi8(v, del));
        unsigned stop = (unsigned)_mm_movemask_epi8(ctl);
        if (stop)
            return pos + (size_t)__builtin_ctz(stop);
        pos += 16;
    }
    return scan_class(b, pos, end, C_FIELD);
}
#else
static size_t scan_vchar(const unsigned char *b, size_t pos, size_t end)
{
    return scan_class(b, pos, end, C_VCHAR);
}

static size_t scan_field(const unsigned char *b, size_t pos, size_t end)
{
    return scan_class(b, pos, end, C_FIELD);
}
#endif

static unsigned char lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

/* Whether s[0 .. n) equals the lowercase literal lit[0 .. n), ignoring the
 * case of s. */
static bool ieq_lower(const char *s, const char *lit, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)s[i]) != (unsigned char)lit[i])
            return false;
    return true;
}

bool sl_http_slice_ieq(sl_http_slice s, const char *lit)
{
    size_t n = strlen(lit);
    if (s.len != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)s.ptr[i]) != lower((unsigned char)lit[i]))
            return false;
    return true;
}

void sl_http_limits_default(sl_http_limits *lim)
{
    lim->max_request_line = SL_HTTP_DEFAULT_MAX_REQUEST_LINE;
    lim->max_header_bytes = SL_HTTP_DEFAULT_MAX_HEADER_BYTES;
    lim->max_headers = SL_HTTP_DEFAULT_MAX_HEADERS;
    lim->max_body = SL_HTTP_DEFAULT_MAX_BODY;
}

void sl_http_request_init(sl_http_request *req, sl_http_header *headers, size_t headers_cap)
{
    memset(req, 0, sizeof *req);
    req->headers = headers;
    req->headers_cap = headers_cap;
}

void sl_http_request_reset(sl_http_request *req)
{
    req->st_base = NULL;
    req->st_pos = 0;
    req->st_state = ST_START;
}

/* Clears every output and the private state for a parse from byte 0. */
static void start_fresh(sl_http_request *req, const char *buf)
{
    sl_http_header *h = req->headers;
    size_t cap = req->headers_cap;
    memset(req, 0, sizeof *req);
    req->headers = h;
    req->headers_cap = cap;
    req->st_base = buf;
    req->st_state = ST_START;
}

static int fail(sl_http_request *req, int status, const char *errstr, const char *field)
{
    req->status = status;
    req->errstr = errstr;
    req->field = field;
    sl_http_request_reset(req);
    return SL_HTTP_ERROR;
}

/* Splits the request-target into path and query (http.h says which forms). */
static int split_target(sl_http_request *req)
{
    const char *t = req->target.ptr;
    size_t n = req->target.len, p = 0;
    if (n == 1 && t[0] == '*') {
        req->path = req->target;
        return 0;
    }
    if (t[0] != '/') {
        /* Absolute form: a scheme, "://", an authority, then the path. */
        size_t skip;
        if (n >= 7 && ieq_lower(t, "http://", 7))
            skip = 7;
        else if (n >= 8 && ieq_lower(t, "https://", 8))
            skip = 8;
        else
            return -1;
        p = skip;
        while (p < n && t[p] != '/' && t[p] != '?')
            p++;
        if (p == skip)
            return -1; /* no authority */
    }
    const char *qmark = memchr(t + p, '?', n - p);
    size_t q = qmark ? (size_t)(qmark - t) : n;
    if (q == p) {
        /* "http://host" or "http://host?x": the path is "/" (a static string,
         * the one slice that does not point into the buffer). */
        req->path.ptr = "/";
        req->path.len = 1;
    } else {
        req->path.ptr = t + p;
        req->path.len = q - p;
    }
    if (q < n) {
        req->has_query = true;
        req->query.ptr = t + q + 1;
        req->query.len = n - q - 1;
    }
    return 0;
}

/* Content-Length: 1*DIGIT, at most INT64_MAX. */
static int parse_content_length(sl_http_slice v, uint64_t *out)
{
    int64_t x;
    if (!sl_parse_i64(v.ptr, v.len, SL_INT_NO_SIGN, &x))
        return -1;
    *out = (uint64_t)x;
    return 0;
}

/* The tokens of a Connection field: "close" and "keep-alive" matter. Sets
 * *conn_close and *conn_keep when it lists them (requests and responses alike). */
static void scan_connection(sl_http_slice v, bool *conn_close, bool *conn_keep)
{
    size_t i = 0;
    while (i < v.len) {
        while (i < v.len && (v.ptr[i] == ' ' || v.ptr[i] == '\t' || v.ptr[i] == ','))
            i++;
        size_t s = i;
        while (i < v.len && v.ptr[i] != ',')
            i++;
        size_t e = i;
        while (e > s && (v.ptr[e - 1] == ' ' || v.ptr[e - 1] == '\t'))
            e--;
        if (e - s == 5 && ieq_lower(v.ptr + s, "close", 5))
            *conn_close = true;
        else if (e - s == 10 && ieq_lower(v.ptr + s, "keep-alive", 10))
            *conn_keep = true;
    }
}

/* A complete field line, its value ending where its line end starts (vend):
 * record it and look at the fields that frame the request. The fields that
 * matter all have different lengths, so the length picks the one to compare.
 * Returns 0 or SL_HTTP_ERROR. */
static int end_header(sl_http_request *req, const char *buf, size_t vend)
{
    sl_http_header *h = &req->headers[req->num_headers++];
    h->name.ptr = buf + req->st_mark;
    h->name.len = req->st_mark2 - req->st_mark;
    size_t vs = req->st_mark2 + 1, ve = vend;
    while (vs < ve && (buf[vs] == ' ' || buf[vs] == '\t'))
        vs++;
    while (ve > vs && (buf[ve - 1] == ' ' || buf[ve - 1] == '\t'))
        ve--;
    if (vs == ve) /* an empty value: just after the colon */
        vs = ve = req->st_mark2 + 1;
    h->value.ptr = buf + vs;
    h->value.len = ve - vs;

    const char *name = h->name.ptr;
    switch (h->name.len) {
    case 4:
        if (ieq_lower(name, "host", 4) && ++req->st_host > 1)
            return fail(req, 400, "more than one host field", "host");
        break;
    case 6:
        if (ieq_lower(name, "expect", 6) && h->value.len == 12 &&
            ieq_lower(h->value.ptr, "100-continue", 12))
            req->expect_continue = true;
        break;
    case 10:
        if (ieq_lower(name, "connection", 10))
            scan_connection(h->value, &req->st_conn_close, &req->st_conn_keep);
        break;
    case 14:
        if (ieq_lower(name, "content-length", 14)) {
            uint64_t v;
            if (parse_content_length(h->value, &v) < 0)
                return fail(req, 400, "invalid content-length", "content-length");
            if (req->has_content_length && v != req->content_length)
                return fail(req, 400, "conflicting content-length fields", "content-length");
            req->has_content_length = true;
            req->content_length = v;
        }
        break;
    case 17:
        if (ieq_lower(name, "transfer-encoding", 17))
            req->st_te = true;
        break;
    default:
        break;
    }
    return 0;
}

/* The final empty line: the checks that need the whole head. */
static int end_head(sl_http_request *req, size_t n, const sl_http_limits *l)
{
    if (req->st_te) {
        if (req->has_content_length)
            return fail(req, 400, "content-length with transfer-encoding", "transfer-encoding");
        return fail(req, 501, "transfer-encoding is not supported", "transfer-encoding");
    }
    if (req->minor_version == 1 && req->st_host == 0)
        return fail(req, 400, "missing host field", "host");
    if (req->minor_version == 1)
        req->keep_alive = !req->st_conn_close;
    else
        req->keep_alive = req->st_conn_keep && !req->st_conn_close;
    if (req->minor_version == 0)
        req->expect_continue = false;
    req->body_too_large = req->content_length > l->max_body;
    sl_http_request_reset(req);
    return (int)n;
}

static size_t cap_of(size_t v, size_t dflt)
{
    if (v == 0)
        v = dflt;
    return v > SL_HTTP_MAX_CAP ? SL_HTTP_MAX_CAP : v;
}

/* One byte of the version, "HTTP/1.x" and what follows it, at st_ver bytes
 * matched. Returns the next state, or SL_HTTP_ERROR (after fail()). */
static int version_byte(sl_http_request *req, unsigned char c, size_t pos)
{
    size_t i = req->st_ver++;
    bool digit = c >= '0' && c <= '9';
    if (i < 5) {
        if (c != (unsigned char)"HTTP/"[i])
            return fail(req, 400, "malformed http version", "version");
    } else if (i == 5 || i == 7) {
        /* major must be 1; minor 0 or 1 */
        if (!digit)
            return fail(req, 400, "malformed http version", "version");
        if (i == 5 ? c != '1' : c > '1')
            return fail(req, 505, "http version not supported", "version");
        if (i == 7)
            req->minor_version = c - '0';
    } else if (i == 6) {
        if (digit)
            return fail(req, 505, "http version not supported", "version");
        if (c != '.')
            return fail(req, 400, "malformed http version", "version");
    } else {
        if (digit)
            return fail(req, 505, "http version not supported", "version");
        if (c == '\r')
            return ST_RL_CR;
        if (c == '\n') {
            req->st_head_start = pos + 1;
            return ST_HDR_START;
        }
        return fail(req, 400, "malformed http version", "version");
    }
    return ST_VERSION;
}

int sl_http_parse_request(const char *buf, size_t len, sl_http_request *req,
                          const sl_http_limits *lim)
{
    sl_http_limits l;
    sl_http_limits_default(&l);
    if (lim) {
        l.max_request_line = cap_of(lim->max_request_line, l.max_request_line);
        l.max_header_bytes = cap_of(lim->max_header_bytes, l.max_header_bytes);
        l.max_headers = lim->max_headers ? lim->max_headers : l.max_headers;
        l.max_body = lim->max_body ? lim->max_body : l.max_body;
    }
    size_t max_headers = l.max_headers < req->headers_cap ? l.max_headers : req->headers_cap;

    /* A moved or shrunk buffer cannot continue the remembered parse. */
    if (req->st_base != buf || req->st_pos > len || req->st_pos == 0)
        start_fresh(req, buf);

    const unsigned char *b = (const unsigned char *)buf;
    int st = req->st_state;
    size_t pos = req->st_pos;
    while (pos < len) {
        /* end: where this part's cap stops the scans. The request line's
         * cap counts every byte before its line end, empty lines before it
         * included (they end in LF, hence the exception only for the line
         * end after the version); the header fields' counts from their
         * first byte. */
        size_t end;
        if (st < ST_HDR_START) {
            end = len < l.max_request_line ? len : l.max_request_line;
            if (pos >= end) {
                bool line_end = (st == ST_VERSION || st == ST_RL_CR) &&
                                (b[pos] == '\r' || b[pos] == '\n');
                if (!line_end)
                    return fail(req, 414, "request line is too long", "request-line");
                end = pos + 1;
            }
        } else {
            size_t cap = req->st_head_start + l.max_header_bytes;
            end = len < cap ? len : cap;
            if (pos >= end)
                return fail(req, 431, "header fields are too large", "headers");
        }

        unsigned char c = b[pos];
        size_t p;
        switch (st) {
        case ST_START:
            if (c == '\r') {
                st = ST_START_CR;
            } else if (c == '\n') {
                /* an empty line before the request: skipped */
            } else if (is_tchar(c)) {
                req->st_mark = pos++;
                st = ST_METHOD;
                goto method;
            } else {
                return fail(req, 400, "malformed request line", "request-line");
            }
            pos++;
            break;
        case ST_START_CR:
            if (c != '\n')
                return fail(req, 400, "cr not followed by lf", "request-line");
            st = ST_START;
            pos++;
            break;
        case ST_METHOD:
        method:
            p = scan_class(b, pos, end, C_TCHAR);
            if (p == end) {
                pos = p;
                break;
            }
            if (b[p] != ' ')
                return fail(req, 400, "invalid method", "method");
            req->method.ptr = buf + req->st_mark;
            req->method.len = p - req->st_mark;
            req->st_mark2 = p + 1;
            st = ST_TARGET;
            pos = p + 1;
            /* A scan from `end` stops at once, so the next state may start
             * with nothing left. */
            /* fall through */
        case ST_TARGET:
            p = scan_vchar(b, pos, end);
            if (p == end) {
                pos = p;
                break;
            }
            c = b[p];
            if (c == '\r' || c == '\n')
                return fail(req, 400, "malformed request line", "request-line");
            if (c != ' ')
                return fail(req, 400, "invalid character in request target", "target");
            if (p == req->st_mark2)
                return fail(req, 400, "malformed request line", "request-line");
            req->target.ptr = buf + req->st_mark2;
            req->target.len = p - req->st_mark2;
            if (split_target(req) < 0)
                return fail(req, 400, "invalid request target", "target");
            req->st_ver = 0;
            st = ST_VERSION;
            pos = p + 1;
            break;
        case ST_VERSION:
            /* The usual "HTTP/1.1" or "HTTP/1.0" at once, when it is all
             * there; else a byte at a time. */
            if (req->st_ver == 0 && end - pos >= 8 && memcmp(b + pos, "HTTP/1.", 7) == 0 &&
                (b[pos + 7] == '0' || b[pos + 7] == '1')) {
                req->minor_version = b[pos + 7] - '0';
                req->st_ver = 8;
                pos += 8;
                /* And its line end when it is there (no cap counts it). */
                if (len - pos >= 2 && b[pos] == '\r' && b[pos + 1] == '\n') {
                    req->st_head_start = pos + 2;
                    st = ST_HDR_START;
                    pos += 2;
                } else if (pos < len && b[pos] == '\n') {
                    req->st_head_start = pos + 1;
                    st = ST_HDR_START;
                    pos++;
                }
                break;
            }
            st = version_byte(req, c, pos);
            if (st == SL_HTTP_ERROR)
                return SL_HTTP_ERROR;
            pos++;
            break;
        case ST_RL_CR:
            if (c != '\n')
                return fail(req, 400, "cr not followed by lf", "request-line");
            req->st_head_start = pos + 1;
            st = ST_HDR_START;
            pos++;
            break;
        case ST_HDR_START:
        hdr_start:
            c = b[pos];
            if (c == '\r') {
                if (end - pos >= 2) { /* the final CRLF, both bytes at hand */
                    if (b[pos + 1] != '\n')
                        return fail(req, 400, "cr not followed by lf", "headers");
                    return end_head(req, pos + 2, &l);
                }
                st = ST_END_CR;
            } else if (c == '\n') {
                return end_head(req, pos + 1, &l);
            } else if (c == ' ' || c == '\t') {
                return fail(req, 400, "obsolete line folding is not allowed", "headers");
            } else if (is_tchar(c)) {
                if (req->num_headers >= max_headers)
                    return fail(req, 431, "too many header fields", "headers");
                req->st_mark = pos++;
                st = ST_HDR_NAME;
                goto name;
            } else {
                return fail(req, 400, "invalid character in header field name", "headers");
            }
            pos++;
            break;
        case ST_HDR_NAME:
        name:
            p = scan_class(b, pos, end, C_TCHAR);
            if (p == end) {
                pos = p;
                break;
            }
            c = b[p];
            if (c == ' ' || c == '\t')
                return fail(req, 400, "whitespace before colon in header field", "headers");
            if (c != ':')
                return fail(req, 400, "invalid character in header field name", "headers");
            req->st_mark2 = p;
            st = ST_HDR_VALUE;
            pos = p + 1;
            /* fall through */
        case ST_HDR_VALUE:
            p = scan_field(b, pos, end);
            if (p == end) {
                pos = p;
                break;
            }
            c = b[p];
            if (c == '\n') {
                if (end_header(req, buf, p) < 0)
                    return SL_HTTP_ERROR;
                st = ST_HDR_START;
                pos = p + 1;
                break;
            }
            if (c != '\r')
                return fail(req, 400, "invalid character in header field value", "headers");
            req->st_val_end = p;
            if (p + 1 < end) { /* the usual CRLF, both bytes at hand */
                if (b[p + 1] != '\n')
                    return fail(req, 400, "cr not followed by lf", "headers");
                if (end_header(req, buf, p) < 0)
                    return SL_HTTP_ERROR;
                st = ST_HDR_START;
                pos = p + 2;
                if (pos < end) /* the next line, under the same cap */
                    goto hdr_start;
                break;
            }
            st = ST_HDR_CR;
            pos = p + 1;
            break;
        case ST_HDR_CR:
            if (c != '\n')
                return fail(req, 400, "cr not followed by lf", "headers");
            if (end_header(req, buf, req->st_val_end) < 0)
                return SL_HTTP_ERROR;
            st = ST_HDR_START;
            pos++;
            break;
        case ST_END_CR:
            if (c != '\n')
                return fail(req, 400, "cr not followed by lf", "headers");
            return end_head(req, pos + 1, &l);
        }
    }
    req->st_state = st;
    req->st_pos = pos;
    return SL_HTTP_INCOMPLETE;
}

/* ------------------------------------------------------------------------ */
/* Responses (http.h, section 5)                                            */
/* ------------------------------------------------------------------------ */

void sl_http_response_init(sl_http_response *res, sl_http_header *headers, size_t headers_cap)
{
    memset(res, 0, sizeof *res);
    res->headers = headers;
    res->headers_cap = headers_cap;
}

static int res_fail(sl_http_response *res, const char *errstr, const char *field)
{
    res->errstr = errstr;
    res->field = field;
    return SL_HTTP_ERROR;
}

/* What running out of bytes at `end` means: end is the head's cap (the
 * buffer holds at least that much), so the head is too large; or more may
 * come. */
static int res_out_of_bytes(sl_http_response *res, size_t end, size_t cap)
{
    if (end == cap)
        return res_fail(res, "response head is too large", "headers");
    return SL_HTTP_INCOMPLETE;
}

/* The line end at b[p], a CR LF or a bare LF: its length (1 or 2), 0 when
 * the CR is the last byte at hand, or -1 for a CR not followed by LF or any
 * other byte. */
static int line_end_at(const unsigned char *b, size_t p, size_t end)
{
    if (b[p] == '\n')
        return 1;
    if (b[p] != '\r')
        return -1;
    if (p + 1 == end)
        return 0;
    return b[p + 1] == '\n' ? 2 : -1;
}

/* The status line, from the start of b: the offset of the first header
 * line, 0 when more bytes are needed, or -1 after res_fail(). Byte by
 * byte where the line is fixed, so that each error shows at its byte. */
static long parse_status_line(sl_http_response *res, const unsigned char *b, size_t end)
{
    static const char version[] = "HTTP/1.";
    size_t pos = 0;
    for (; pos < 7; pos++) {
        if (pos == end)
            return 0;
        if (b[pos] != (unsigned char)version[pos]) {
            /* "HTTP/2" and the like: a version, but not one this speaks. */
            if (pos == 5 && b[pos] >= '0' && b[pos] <= '9')
                return res_fail(res, "http version not supported", "version");
            return res_fail(res, "malformed status line", "status-line");
        }
    }
    if (pos == end)
        return 0;
    if (b[pos] != '0' && b[pos] != '1')
        return res_fail(res, b[pos] >= '0' && b[pos] <= '9' ? "http version not supported"
                                                            : "malformed status line",
                        b[pos] >= '0' && b[pos] <= '9' ? "version" : "status-line");
    res->minor_version = b[pos++] - '0';
    if (pos == end)
        return 0;
    if (b[pos++] != ' ')
        return res_fail(res, "malformed status line", "status-line");
    int status = 0;
    for (int i = 0; i < 3; i++, pos++) {
        if (pos == end)
            return 0;
        if (b[pos] < '0' || b[pos] > '9' || (i == 0 && b[pos] == '0'))
            return res_fail(res, "invalid status code", "status");
        status = status * 10 + (b[pos] - '0');
    }
    res->status = status;
    if (pos == end)
        return 0;
    size_t reason = pos;
    if (b[pos] == ' ') {
        reason = ++pos;
        pos = scan_field(b, pos, end);
        if (pos == end)
            return 0;
    }
    int le = line_end_at(b, pos, end);
    if (le == 0)
        return 0;
    if (le < 0)
        return res_fail(res, b[pos] == '\r' ? "cr not followed by lf" : "malformed status line",
                        "status-line");
    res->reason.ptr = (const char *)b + reason;
    res->reason.len = pos - reason;
    return (long)(pos + (size_t)le);
}

int sl_http_parse_response(const char *buf, size_t len, sl_http_response *res, size_t max_head)
{
    sl_http_header *headers = res->headers;
    size_t headers_cap = res->headers_cap;
    sl_http_response_init(res, headers, headers_cap);
    size_t cap = cap_of(max_head, SL_HTTP_DEFAULT_MAX_RESPONSE_HEAD);
    size_t end = len < cap ? len : cap;
    const unsigned char *b = (const unsigned char *)buf;

    long sl = parse_status_line(res, b, end);
    if (sl < 0)
        return SL_HTTP_ERROR;
    if (sl == 0)
        return res_out_of_bytes(res, end, cap);

    bool te = false, conn_close = false, conn_keep = false;
    size_t pos = (size_t)sl;
    for (;;) {
        if (pos == end)
            return res_out_of_bytes(res, end, cap);
        unsigned char c = b[pos];
        if (c == '\r' || c == '\n') {
            int le = line_end_at(b, pos, end);
            if (le == 0)
                return res_out_of_bytes(res, end, cap);
            if (le < 0)
                return res_fail(res, "cr not followed by lf", "headers");
            pos += (size_t)le;
            break;
        }
        if (c == ' ' || c == '\t')
            return res_fail(res, "obsolete line folding is not allowed", "headers");
        if (!is_tchar(c))
            return res_fail(res, "invalid character in header field name", "headers");
        if (res->num_headers == headers_cap)
            return res_fail(res, "too many header fields", "headers");
        size_t name = pos;
        size_t colon = scan_class(b, pos, end, C_TCHAR);
        if (colon == end)
            return res_out_of_bytes(res, end, cap);
        if (b[colon] == ' ' || b[colon] == '\t')
            return res_fail(res, "whitespace before colon in header field", "headers");
        if (b[colon] != ':')
            return res_fail(res, "invalid character in header field name", "headers");
        size_t vend = scan_field(b, colon + 1, end);
        if (vend == end)
            return res_out_of_bytes(res, end, cap);
        int le = line_end_at(b, vend, end);
        if (le == 0)
            return res_out_of_bytes(res, end, cap);
        if (le < 0)
            return res_fail(res, b[vend] == '\r' ? "cr not followed by lf"
                                                 : "invalid character in header field value",
                            "headers");
        size_t vs = colon + 1, ve = vend;
        while (vs < ve && (b[vs] == ' ' || b[vs] == '\t'))
            vs++;
        while (ve > vs && (b[ve - 1] == ' ' || b[ve - 1] == '\t'))
            ve--;
        sl_http_header *h = &headers[res->num_headers++];
        h->name.ptr = buf + name;
        h->name.len = colon - name;
        h->value.ptr = buf + vs;
        h->value.len = ve - vs;
        pos = vend + (size_t)le;

        /* The fields that frame the response, told apart by their length. */
        if (h->name.len == 14 && ieq_lower(h->name.ptr, "content-length", 14)) {
            uint64_t v;
            if (parse_content_length(h->value, &v) < 0)
                return res_fail(res, "invalid content-length", "content-length");
            if (res->has_content_length && v != res->content_length)
                return res_fail(res, "conflicting content-length fields", "content-length");
            res->has_content_length = true;
            res->content_length = v;
        } else if (h->name.len == 17 && ieq_lower(h->name.ptr, "transfer-encoding", 17)) {
            te = true;
        } else if (h->name.len == 10 && ieq_lower(h->name.ptr, "connection", 10)) {
            scan_connection(h->value, &conn_close, &conn_keep);
        }
    }

    if (te)
        return res_fail(res, "transfer-encoding is not supported", "transfer-encoding");
    res->keep_alive = res->minor_version == 1 ? !conn_close : conn_keep && !conn_close;
    if (res->status < 200 || res->status == 204 || res->status == 304)
        res->body_length = 0;
    else if (res->has_content_length)
        res->body_length = res->content_length;
    else
        res->body_until_close = true;
    return (int)pos;
}

const sl_http_header *sl_http_response_header(const sl_http_response *res, const char *name)
{
    for (size_t i = 0; i < res->num_headers; i++)
        if (sl_http_slice_ieq(res->headers[i].name, name))
            return &res->headers[i];
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */
/* ------------------------------------------------------------------------ */

const sl_http_header *sl_http_find_header(const sl_http_request *req, const char *name)
{
    for (size_t i = 0; i < req->num_headers; i++)
        if (sl_http_slice_ieq(req->headers[i].name, name))
            return &req->headers[i];
    return NULL;
}

int sl_http_query_next(const char *q, size_t qlen, size_t *pos, sl_http_slice *name,
                       sl_http_slice *value)
{
    size_t p = *pos;
    while (p < qlen && q[p] == '&')
        p++;
    if (p >= qlen) {
        *pos = qlen;
        return 0;
    }
    size_t s = p;
    const char *amp = memchr(q + s, '&', qlen - s);
    p = amp ? (size_t)(amp - q) : qlen;
    const char *eq = memchr(q + s, '=', p - s);
    name->ptr = q + s;
    if (eq) {
        name->len = (size_t)(eq - (q + s));
        value->ptr = eq + 1;
        value->len = (size_t)(q + p - eq - 1);
    } else {
        name->len = p - s;
        value->ptr = q + p;
        value->len = 0;
    }
    *pos = p;
    return 1;
}


/* Both decoders: plus_is_space for query strings. */
static long decode(const char *s, size_t n, char *out, size_t cap, bool plus_is_space)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '%') {
            if (n - i < 3) /* fewer than two bytes follow */
                return SL_HTTP_BAD_ESCAPE;
            int hi = sl_hex_digit((unsigned char)s[i + 1]), lo = sl_hex_digit((unsigned char)s[i + 2]);
            if (hi < 0 || lo < 0)
                return SL_HTTP_BAD_ESCAPE;
            c = (unsigned char)(hi * 16 + lo);
            i += 2;
        } else if (c == '+' && plus_is_space) {
            c = ' ';
        }
        if (w == cap)
            return SL_HTTP_TOO_LONG;
        out[w++] = (char)c;
    }
    return (long)w;
}

long sl_http_percent_decode(const char *s, size_t n, char *out, size_t cap)
{
    return decode(s, n, out, cap, true);
}

long sl_http_path_decode(const char *s, size_t n, char *out, size_t cap)
{
    return decode(s, n, out, cap, false);
}

sl_http_slice sl_http_list_first(sl_http_slice v)
{
    size_t s = 0, e;
    while (s < v.len && (v.ptr[s] == ' ' || v.ptr[s] == '\t'))
        s++;
    e = s;
    while (e < v.len && v.ptr[e] != ',')
        e++;
    while (e > s && (v.ptr[e - 1] == ' ' || v.ptr[e - 1] == '\t'))
        e--;
    return (sl_http_slice){v.ptr + s, e - s};
}

long sl_http_query_param(const char *q, size_t qlen, const char *name, char *out, size_t cap)
{
    size_t want = strlen(name), pos = 0;
    sl_http_slice k, v;
    char tmp[SL_HTTP_NAME_MAX];
    while (sl_http_query_next(q, qlen, &pos, &k, &v)) {
        long kl = sl_http_percent_decode(k.ptr, k.len, tmp, sizeof tmp);
        if (kl == SL_HTTP_BAD_ESCAPE)
            return SL_HTTP_BAD_ESCAPE;
        /* A name too long for tmp is longer than any name asked for. */
        if (kl < 0 || (size_t)kl != want || memcmp(tmp, name, want) != 0)
            continue;
        return sl_http_percent_decode(v.ptr, v.len, out, cap);
    }
    return SL_HTTP_NO_PARAM;
}
