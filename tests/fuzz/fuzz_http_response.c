/*
 * fuzz_http_response.c: libFuzzer target for the HTTP response parser
 * (src/proto/http.h, section 5), as the CLI's take and bench read sluiced's
 * answers.
 *
 * The first input byte picks the caps: bits 0-2 a header cap of 0 to 7
 * fields (7 meaning 64), bit 3 a head cap of 48 + (bits 4-7) * 16 bytes
 * instead of the default. The rest is a stream of responses, parsed one
 * after another as bench parses a pipeline: head, then body_length bytes of
 * body, until the stream ends, a response ends at close, or an error.
 *
 * For each parse, CHECK() aborts when a guarantee of http.h breaks:
 *   - the answer is a head length within the buffer and the cap,
 *     INCOMPLETE, or ERROR with errstr and field set;
 *   - after a head: slices inside the buffer, field names non-empty, values
 *     trimmed, the status 100-999, the framing as section 5 states it;
 *   - every shorter prefix of a head is INCOMPLETE, and the head parses the
 *     same with the rest of the stream cut off at any point after it;
 *   - a prefix that is an ERROR stays one with more bytes after it;
 *   - a slow model (model_parse: the head split into lines first, each line
 *     checked against the grammar alone) agrees, on any buffer that holds a
 *     whole head within the cap, on whether it is valid, its length, status,
 *     fields and framing.
 *
 * Build and run: make fuzz (FUZZ_SECONDS=N to change the time per target).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proto/http.h"

#define HDR_MAX 64

static bool inside(sl_http_slice s, const char *base, size_t n)
{
    return s.len == 0 || (s.ptr >= base && s.ptr + s.len <= base + n);
}

static int parse(const char *b, size_t n, sl_http_response *res, sl_http_header *h,
                 size_t hcap, size_t max_head)
{
    sl_http_response_init(res, h, hcap);
    return sl_http_parse_response(b, n, res, max_head);
}

/* ---- the slow model ---- */

typedef struct model {
    int status;
    int minor;
    size_t reason_off, reason_len;
    size_t nh;
    size_t name_off[HDR_MAX + 1], name_len[HDR_MAX + 1];
    size_t value_off[HDR_MAX + 1], value_len[HDR_MAX + 1];
    bool has_cl;
    uint64_t cl;
    bool keep_alive;
} model;

static bool m_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* A byte a field value (or a reason) may hold: HTAB, SP, VCHAR, obs-text. */
static bool m_field(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static bool m_ieq(const unsigned char *s, size_t n, const char *lit)
{
    if (n != strlen(lit))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = s[i] >= 'A' && s[i] <= 'Z' ? (unsigned char)(s[i] + 32) : s[i];
        if (c != (unsigned char)lit[i])
            return false;
    }
    return true;
}

/* The head of b[0 .. n): 0 when no whole head lies within the first `cap`
 * bytes (the model has nothing to say), -1 when it is invalid, else its
 * length with *m filled. Lines end at LF; a CR right before the LF belongs to
 * the line end, any other CR makes the line invalid. */
static long model_parse(const unsigned char *b, size_t n, size_t cap, size_t hcap, model *m)
{
    memset(m, 0, sizeof *m);
    size_t lim = n < cap ? n : cap;
    /* The lines, up to the first empty one. */
    size_t starts[HDR_MAX + 3], ends[HDR_MAX + 3], nl = 0, pos = 0, head = 0;
    bool too_many = false;
    for (;;) {
        const unsigned char *lf = memchr(b + pos, '\n', lim - pos);
        if (!lf)
            return 0;
        size_t e = (size_t)(lf - b);
        size_t ce = e > pos && b[e - 1] == '\r' ? e - 1 : e;
        if (nl > 0 && ce == pos) {
            head = e + 1;
            break;
        }
        if (nl < HDR_MAX + 3) {
            starts[nl] = pos;
            ends[nl] = ce;
            nl++;
        } else {
            too_many = true;
        }
        pos = e + 1;
    }
    for (size_t i = 0; i < nl; i++)
        for (size_t k = starts[i]; k < ends[i]; k++)
            if (b[k] == '\r')
                return -1;

    /* The status line. */
    const unsigned char *s = b + starts[0];
    size_t sl = ends[0] - starts[0];
    if (sl < 12 || memcmp(s, "HTTP/1.", 7) != 0 || (s[7] != '0' && s[7] != '1') || s[8] != ' ')
        return -1;
    for (int i = 9; i < 12; i++)
        if (s[i] < '0' || s[i] > '9')
            return -1;
    if (s[9] == '0')
        return -1;
    if (sl > 12 && s[12] != ' ')
        return -1;
    for (size_t i = 13; i < sl; i++)
        if (!m_field(s[i]))
            return -1;
    m->minor = s[7] - '0';
    m->status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
    m->reason_off = starts[0] + (sl > 12 ? 13 : 12);
    m->reason_len = sl > 12 ? sl - 13 : 0;

    /* The fields. */
    if (too_many || nl - 1 > hcap)
        return -1;
    bool te = false, close = false, keep = false;
    for (size_t i = 1; i < nl; i++) {
        const unsigned char *l = b + starts[i];
        size_t ll = ends[i] - starts[i];
        size_t c = 0;
        while (c < ll && m_tchar(l[c]))
            c++;
        if (c == 0 || c == ll || l[c] != ':')
            return -1;
        for (size_t k = c + 1; k < ll; k++)
            if (!m_field(l[k]))
                return -1;
        size_t vs = c + 1, ve = ll;
        while (vs < ve && (l[vs] == ' ' || l[vs] == '\t'))
            vs++;
        while (ve > vs && (l[ve - 1] == ' ' || l[ve - 1] == '\t'))
            ve--;
        size_t k = m->nh++;
        m->name_off[k] = starts[i];
        m->name_len[k] = c;
        m->value_off[k] = starts[i] + vs;
        m->value_len[k] = ve - vs;
        const unsigned char *v = l + vs;
        size_t vl = ve - vs;
        if (m_ieq(l, c, "content-length")) {
            /* Digits only, at most INT64_MAX, the long way round. */
            if (vl == 0)
                return -1;
            uint64_t x = 0;
            for (size_t d = 0; d < vl; d++) {
                if (v[d] < '0' || v[d] > '9')
                    return -1;
                if (x > (UINT64_C(9223372036854775807) - (uint64_t)(v[d] - '0')) / 10)
                    return -1;
                x = x * 10 + (uint64_t)(v[d] - '0');
            }
            if (m->has_cl && m->cl != x)
                return -1;
            m->has_cl = true;
            m->cl = x;
        } else if (m_ieq(l, c, "transfer-encoding")) {
            te = true;
        } else if (m_ieq(l, c, "connection")) {
            /* Comma-separated tokens, spaces around them. */
            size_t a = 0;
            while (a <= vl) {
                size_t z = a;
                while (z < vl && v[z] != ',')
                    z++;
                size_t t0 = a, t1 = z;
                while (t0 < t1 && (v[t0] == ' ' || v[t0] == '\t'))
                    t0++;
                while (t1 > t0 && (v[t1 - 1] == ' ' || v[t1 - 1] == '\t'))
                    t1--;
                if (m_ieq(v + t0, t1 - t0, "close"))
                    close = true;
                if (m_ieq(v + t0, t1 - t0, "keep-alive"))
                    keep = true;
                a = z + 1;
            }
        }
    }
    if (te)
        return -1;
    m->keep_alive = m->minor == 1 ? !close : keep && !close;
    return (long)head;
}

/* ---- the checks ---- */

static void check_head(const sl_http_response *r, int rc, const char *b, size_t n, size_t cap)
{
    CHECK(rc > 0 && (size_t)rc <= n && (size_t)rc <= cap);
    CHECK(r->status >= 100 && r->status <= 999);
    CHECK(r->minor_version == 0 || r->minor_version == 1);
    CHECK(inside(r->reason, b, (size_t)rc));
    CHECK(r->num_headers <= r->headers_cap);
    for (size_t i = 0; i < r->num_headers; i++) {
        const sl_http_header *h = &r->headers[i];
        CHECK(h->name.len > 0 && inside(h->name, b, (size_t)rc));
        CHECK(inside(h->value, b, (size_t)rc));
        if (h->value.len)
            CHECK(h->value.ptr[0] != ' ' && h->value.ptr[0] != '\t' &&
                  h->value.ptr[h->value.len - 1] != ' ' && h->value.ptr[h->value.len - 1] != '\t');
    }
    bool bodiless = r->status < 200 || r->status == 204 || r->status == 304;
    CHECK(!r->has_content_length ? r->content_length == 0
                                 : r->content_length <= UINT64_C(9223372036854775807));
    if (bodiless)
        CHECK(r->body_length == 0 && !r->body_until_close);
    else
        CHECK(r->body_until_close == !r->has_content_length &&
              r->body_length == (r->has_content_length ? r->content_length : 0));
    CHECK(r->errstr == NULL);
}

static bool same_slice(sl_http_slice a, sl_http_slice b)
{
    return a.len == b.len && (a.len == 0 || a.ptr == b.ptr);
}

static void check_against_model(const sl_http_response *r, int rc, const unsigned char *b,
                                size_t n, size_t cap, size_t hcap)
{
    model m;
    long mh = model_parse(b, n, cap, hcap, &m);
    if (mh == 0)
        return;
    if (mh < 0) {
        CHECK(rc == SL_HTTP_ERROR);
        return;
    }
    CHECK(rc == (int)mh);
    CHECK(r->status == m.status && r->minor_version == m.minor);
    CHECK(r->reason.len == m.reason_len);
    CHECK(m.reason_len == 0 || r->reason.ptr == (const char *)b + m.reason_off);
    CHECK(r->num_headers == m.nh);
    for (size_t i = 0; i < m.nh; i++) {
        CHECK(r->headers[i].name.ptr == (const char *)b + m.name_off[i] &&
              r->headers[i].name.len == m.name_len[i]);
        CHECK(r->headers[i].value.len == m.value_len[i]);
        CHECK(m.value_len[i] == 0 || r->headers[i].value.ptr == (const char *)b + m.value_off[i]);
    }
    CHECK(r->has_content_length == m.has_cl && r->content_length == m.cl);
    CHECK(r->keep_alive == m.keep_alive);
}

static sl_http_header h_a[HDR_MAX], h_b[HDR_MAX];

/* One response at the start of b[0 .. n); returns what the parse returned. */
static int fuzz_one(const char *b, size_t n, size_t hcap, size_t max_head, sl_http_response *out)
{
    size_t cap = max_head ? max_head : SL_HTTP_DEFAULT_MAX_RESPONSE_HEAD;
    int rc = parse(b, n, out, h_a, hcap, max_head);
    CHECK(rc > 0 || rc == SL_HTTP_INCOMPLETE || rc == SL_HTTP_ERROR);
    check_against_model(out, rc, (const unsigned char *)b, n, cap, hcap);
    sl_http_response r2;
    if (rc > 0) {
        check_head(out, rc, b, n, cap);
        /* Every shorter prefix, and every cut of the stream after the head. */
        for (size_t k = 0; k < (size_t)rc; k++) {
            char *c = copy_of((const uint8_t *)b, k);
            CHECK(parse(c, k, &r2, h_b, hcap, max_head) == SL_HTTP_INCOMPLETE);
            free(c);
        }
        size_t step = (n - (size_t)rc) / 8 + 1;
        for (size_t k = (size_t)rc; k <= n; k += step) {
            CHECK(parse(b, k, &r2, h_b, hcap, max_head) == rc);
            CHECK(r2.status == out->status && r2.num_headers == out->num_headers &&
                  r2.body_length == out->body_length && r2.keep_alive == out->keep_alive &&
                  same_slice(r2.reason, out->reason));
        }
    } else if (rc == SL_HTTP_ERROR) {
        CHECK(out->errstr != NULL && out->errstr[0] != '\0' && out->field != NULL);
        /* An error stays one whatever follows. */
        char *c = malloc(n + 4);
        CHECK(c);
        memcpy(c, b, n);
        memcpy(c + n, "\r\n\r\n", 4);
        CHECK(parse(c, n + 4, &r2, h_b, hcap, max_head) == SL_HTTP_ERROR);
        free(c);
    } else {
        CHECK(n < cap);
    }
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t hsel = data[0] & 7;
    size_t hcap = hsel == 7 ? HDR_MAX : hsel;
    size_t max_head = (data[0] & 8) ? 48 + (size_t)(data[0] >> 4) * 16 : 0;
    char *buf = copy_of(data + 1, size - 1);
    size_t n = size - 1, off = 0;
    for (int i = 0; i < 16 && off < n; i++) {
        sl_http_response res;
        int rc = fuzz_one(buf + off, n - off, hcap, max_head, &res);
        if (rc <= 0 || res.body_until_close || res.body_length > n - off - (size_t)rc)
            break;
        off += (size_t)rc + (size_t)res.body_length;
    }
    free(buf);
    return 0;
}
