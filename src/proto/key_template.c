/*
 * key_template.c: key templates over a request (key_template.h says what each
 * part means). The file keeps one order: messages, parsing a part, parsing a
 * template, rendering, writing a template back.
 */
#include <stdio.h>
#include <string.h>

#include "common/hex.h"
#include "proto/key_template.h"

#define SL_KEY_PARTS_HINT                                                              \
    "use key, policy, header.NAME, query.NAME, method, path, path/N, ip, ip/N, "       \
    "ip6/M or ip/N,ip6/M"

/* ---- messages ---- */

/* Writes s[0 .. n) into out (cap bytes, NUL-terminated) with every byte
 * outside 0x20-0x7E as \xNN, and at most 60 bytes of it, so that an error can
 * quote a part of any template. */
static void sl_quote(char *out, size_t cap, const char *s, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n && w + 8 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i == 60) {
            w += (size_t)snprintf(out + w, cap - w, "...");
            break;
        }
        if (c >= 0x20 && c < 0x7f)
            out[w++] = (char)c;
        else
            w += (size_t)snprintf(out + w, cap - w, "\\x%02x", c);
    }
    out[w] = '\0';
}

/* ---- one part ---- */

/* The state of one parse: the template and where its stored text ends. */
typedef struct sl_parse {
    sl_key_template *t;
    size_t used; /* bytes of t->text in use */
    char *err;
    size_t errlen;
    const char *part; /* the part at fault, braces included, for messages */
    size_t partlen;
    size_t col;       /* its column, from 1 */
} sl_parse;

static int sl_fail(sl_parse *p, const char *what)
{
    char q[256];
    sl_quote(q, sizeof q, p->part, p->partlen);
    snprintf(p->err, p->errlen, "'%s' at column %zu: %s", q, p->col, what);
    return -1;
}

/* Whether c is an RFC 9110 tchar, the bytes of a header field name. */
static bool sl_is_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return true;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Whether c may be in a query parameter's name as a template writes it:
 * visible ASCII but the bytes that delimit or encode a query. */
static bool sl_is_query_name_byte(unsigned char c)
{
    return c > 0x20 && c < 0x7f && c != '&' && c != '=' && c != '#' && c != '%' && c != '+';
}

/* Reads the decimal s[0 .. n) into *v when it is at most max. Returns 0 or
 * -1 (no digits, a byte that is none, or more than max). */
static int sl_small_number(const char *s, size_t n, unsigned max, unsigned *v)
{
    unsigned x = 0;
    if (n == 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        x = x * 10u + (unsigned)(s[i] - '0');
        if (x > max)
            return -1;
    }
    *v = x;
    return 0;
}

/* Whether name[0 .. n) begins with the NUL-terminated prefix. */
static bool sl_starts(const char *name, size_t n, const char *prefix)
{
    size_t k = strlen(prefix);
    return n >= k && memcmp(name, prefix, k) == 0;
}

static bool sl_is(const char *name, size_t n, const char *word)
{
    return strlen(word) == n && memcmp(name, word, n) == 0;
}

/* Writes the canonical name of part *k (its kind and numbers set; for a
 * header or query, NAME is name[0 .. k->len)) into the template's text,
 * NUL-terminated, and points k->off at it. */
static int sl_store_name(sl_parse *p, sl_key_part *k, const char *name)
{
    char buf[SL_KEY_TEMPLATE_MAX + 16];
    int w;
    switch (k->kind) {
    case SL_KEY_PART_KEY: w = snprintf(buf, sizeof buf, "key"); break;
    case SL_KEY_PART_POLICY: w = snprintf(buf, sizeof buf, "policy"); break;
    case SL_KEY_PART_METHOD: w = snprintf(buf, sizeof buf, "method"); break;
    case SL_KEY_PART_PATH:
        w = k->segments ? snprintf(buf, sizeof buf, "path/%u", k->segments)
                        : snprintf(buf, sizeof buf, "path");
        break;
    case SL_KEY_PART_HEADER:
        w = snprintf(buf, sizeof buf, "header.%.*s", (int)k->len, name);
        for (int i = 7; i < w; i++)
            if (buf[i] >= 'A' && buf[i] <= 'Z')
                buf[i] = (char)(buf[i] - 'A' + 'a');
        break;
    case SL_KEY_PART_QUERY: w = snprintf(buf, sizeof buf, "query.%.*s", (int)k->len, name); break;
    default: /* SL_KEY_PART_IP: the shortest form that says the same */
        if (k->v4_bits == 32 && k->v6_bits == 64)
            w = snprintf(buf, sizeof buf, "ip");
        else if (k->v6_bits == 64)
            w = snprintf(buf, sizeof buf, "ip/%u", k->v4_bits);
        else if (k->v4_bits == 32)
            w = snprintf(buf, sizeof buf, "ip6/%u", k->v6_bits);
        else
            w = snprintf(buf, sizeof buf, "ip/%u,ip6/%u", k->v4_bits, k->v6_bits);
        break;
    }
    /* The name is never longer than the part it was parsed from, braces
     * excluded, so the text always has room; this only guards the claim. */
    if (w < 0 || (size_t)w + 1 > sizeof p->t->text - p->used)
        return sl_fail(p, "the template's names do not fit (internal limit)");
    k->off = (uint16_t)p->used;
    memcpy(p->t->text + p->used, buf, (size_t)w + 1);
    p->used += (size_t)w + 1;
    return 0;
}

/* One item of an ip part: "ip/N" or "ip6/M", into *k. */
static int sl_ip_item(sl_parse *p, const char *s, size_t n, sl_key_part *k, bool *seen4,
                      bool *seen6)
{
    unsigned v;
    if (sl_starts(s, n, "ip/")) {
        if (*seen4)
            return sl_fail(p, "ip/N is given twice");
        if (sl_small_number(s + 3, n - 3, 32, &v) != 0)
            return sl_fail(p, "an IPv4 prefix ip/N has N from 0 to 32");
        k->v4_bits = (uint8_t)v;
        *seen4 = true;
        return 0;
    }
    if (sl_starts(s, n, "ip6/")) {
        if (*seen6)
            return sl_fail(p, "ip6/M is given twice");
        if (sl_small_number(s + 4, n - 4, 128, &v) != 0)
            return sl_fail(p, "an IPv6 prefix ip6/M has M from 0 to 128");
        k->v6_bits = (uint8_t)v;
        *seen6 = true;
        return 0;
    }
    return sl_fail(p, "an address part is ip, ip/N (N 0 to 32), ip6/M (M 0 to 128) or "
                      "ip/N,ip6/M");
}

/* The part between the braces, name[0 .. n), into *k. */
static int sl_parse_part(sl_parse *p, const char *name, size_t n, sl_key_part *k)
{
    memset(k, 0, sizeof *k);
    k->v4_bits = 32;
    k->v6_bits = 64;
    const char *arg = name;
    if (n == 0)
        return sl_fail(p, "an empty part: " SL_KEY_PARTS_HINT " (write {{ and }} for braces)");
    if (sl_is(name, n, "key")) {
        k->kind = SL_KEY_PART_KEY;
    } else if (sl_is(name, n, "policy")) {
        k->kind = SL_KEY_PART_POLICY;
    } else if (sl_is(name, n, "method")) {
        k->kind = SL_KEY_PART_METHOD;
    } else if (sl_is(name, n, "path")) {
        k->kind = SL_KEY_PART_PATH;
    } else if (sl_starts(name, n, "path/")) {
        unsigned v;
        k->kind = SL_KEY_PART_PATH;
        if (sl_small_number(name + 5, n - 5, SL_KEY_PATH_MAX_SEGMENTS, &v) != 0 || v == 0)
            return sl_fail(p, "path/N takes N from 1 to 16 segments");
        k->segments = (uint8_t)v;
    } else if (sl_starts(name, n, "header.")) {
        k->kind = SL_KEY_PART_HEADER;
        arg = name + 7;
        k->len = (uint16_t)(n - 7);
        if (k->len == 0)
            return sl_fail(p, "header.NAME needs a header name");
        for (size_t i = 0; i < k->len; i++)
            if (!sl_is_tchar((unsigned char)arg[i])) {
                char msg[128], q[16];
                sl_quote(q, sizeof q, arg + i, 1);
                snprintf(msg, sizeof msg,
                         "the header name has '%s', which is not a token character "
                         "(RFC 9110: letters, digits and !#$%%&'*+-.^_`|~)",
                         q);
                return sl_fail(p, msg);
            }
    } else if (sl_starts(name, n, "query.")) {
        k->kind = SL_KEY_PART_QUERY;
        arg = name + 6;
        k->len = (uint16_t)(n - 6);
        if (k->len == 0)
            return sl_fail(p, "query.NAME needs a parameter name");
        for (size_t i = 0; i < k->len; i++)
            if (!sl_is_query_name_byte((unsigned char)arg[i])) {
                char msg[128], q[16];
                sl_quote(q, sizeof q, arg + i, 1);
                snprintf(msg, sizeof msg,
                         "a parameter name has '%s': it is written decoded, of visible "
                         "characters but & = # %% +",
                         q);
                return sl_fail(p, msg);
            }
    } else if (sl_is(name, n, "ip") || sl_starts(name, n, "ip/") || sl_starts(name, n, "ip6/")) {
        k->kind = SL_KEY_PART_IP;
        if (n > 2) {
            bool seen4 = false, seen6 = false;
            const char *comma = memchr(name, ',', n);
            size_t first = comma ? (size_t)(comma - name) : n;
            if (sl_ip_item(p, name, first, k, &seen4, &seen6) != 0)
                return -1;
            if (comma && sl_ip_item(p, comma + 1, n - first - 1, k, &seen4, &seen6) != 0)
                return -1;
        }
    } else {
        char q[256];
        sl_quote(q, sizeof q, p->part, p->partlen);
        snprintf(p->err, p->errlen, "unknown part '%s' at column %zu: " SL_KEY_PARTS_HINT, q,
                 p->col);
        return -1;
    }
    if (k->kind == SL_KEY_PART_HEADER || k->kind == SL_KEY_PART_QUERY)
        return sl_store_name(p, k, arg);
    return sl_store_name(p, k, name);
}

/* ---- a template ---- */

/* Opens a new part in t, or says that there are too many. */
static sl_key_part *sl_new_part(sl_parse *p, size_t col)
{
    if (p->t->nparts == SL_KEY_TEMPLATE_MAX_PARTS) {
        snprintf(p->err, p->errlen,
                 "too many parts at column %zu: at most %d (each {...} and each run of "
                 "text between them is one)",
                 col, SL_KEY_TEMPLATE_MAX_PARTS);
        return NULL;
    }
    return &p->t->parts[p->t->nparts++];
}

int sl_key_template_parse(const char *s, size_t n, sl_key_template *out, char *err,
                          size_t errlen)
{
    sl_parse p = {.t = out, .err = err, .errlen = errlen};
    if (errlen)
        err[0] = '\0';
    memset(out, 0, sizeof *out);
    if (n == 0) {
        snprintf(err, errlen, "the key template is empty: write at least {key}");
        return -1;
    }
    if (n > SL_KEY_TEMPLATE_MAX) {
        snprintf(err, errlen, "the key template is %zu bytes long: at most %d", n,
                 SL_KEY_TEMPLATE_MAX);
        return -1;
    }
    sl_key_part *text = NULL; /* the run of text being read, if any */
    size_t i = 0;
    while (i < n) {
        char c = s[i];
        bool pair = i + 1 < n && s[i + 1] == c;
        if ((c == '{' && pair) || (c == '}' && pair) || (c != '{' && c != '}')) {
            if (!text) {
                if (!(text = sl_new_part(&p, i + 1)))
                    return -1;
                text->kind = SL_KEY_PART_TEXT;
                text->off = (uint16_t)p.used;
                out->uses |= SL_KEY_USES(SL_KEY_PART_TEXT);
            }
            /* Unescaped text is never longer than its source. */
            out->text[p.used++] = c;
            text->len++;
            i += c == '{' || c == '}' ? 2 : 1;
            continue;
        }
        if (c == '}') {
            snprintf(err, errlen,
                     "a '}' at column %zu closes no part: write }} for a brace in the key",
                     i + 1);
            return -1;
        }
        size_t j = i + 1;
        while (j < n && s[j] != '}' && s[j] != '{')
            j++;
        if (j == n) {
            snprintf(err, errlen,
                     "the '{' at column %zu is never closed: write {{ for a brace in the key",
                     i + 1);
            return -1;
        }
        if (s[j] == '{') {
            snprintf(err, errlen,
                     "a '{' at column %zu inside the part opened at column %zu: a part "
                     "holds no braces",
                     j + 1, i + 1);
            return -1;
        }
        p.part = s + i;
        p.partlen = j + 1 - i;
        p.col = i + 1;
        sl_key_part *k = sl_new_part(&p, i + 1);
        if (!k || sl_parse_part(&p, s + i + 1, j - i - 1, k) != 0)
            return -1;
        out->uses |= SL_KEY_USES(k->kind);
        text = NULL;
        i = j + 1;
    }
    return 0;
}

/* ---- rendering ---- */

/* Where a key is being written. Past the first piece that does not fit,
 * nothing more is written, but the parts are still looked up: a missing one
 * must be told. */
typedef struct sl_writer {
    char *out;
    size_t cap, n;
    bool full;
} sl_writer;

static void sl_put(sl_writer *w, const char *s, size_t len)
{
    if (w->full || len > w->cap - w->n) {
        w->full = true;
        return;
    }
    if (len)
        memcpy(w->out + w->n, s, len);
    w->n += len;
}

static bool sl_present(sl_http_slice s)
{
    return s.ptr != NULL && s.len > 0;
}

/* The first field called name (lowercase, NUL-terminated), without the
 * blanks around it; false when there is none or it is only blanks. */
static bool sl_header_value(const sl_key_request *r, const char *name, sl_http_slice *v)
{
    for (size_t i = 0; r->headers && i < r->nheaders; i++) {
        if (!sl_http_slice_ieq(r->headers[i].name, name))
            continue;
        const char *s = r->headers[i].value.ptr;
        size_t n = s ? r->headers[i].value.len : 0;
        while (n > 0 && (s[0] == ' ' || s[0] == '\t')) {
            s++;
            n--;
        }
        while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
            n--;
        *v = (sl_http_slice){s, n};
        return n > 0;
    }
    return false;
}

/* Whether every '%' of s[0 .. n) starts an escape, as sl_http_percent_decode
 * wants. */
static bool sl_escapes_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] == '%') {
            if (n - i < 3 || sl_hex_digit((unsigned char)s[i + 1]) < 0 ||
                sl_hex_digit((unsigned char)s[i + 2]) < 0)
                return false;
            i += 2;
        }
    return true;
}

/* {query.NAME}: the first parameter whose decoded name is NAME. Returns
 * false when it is missing. */
static bool sl_put_query(sl_writer *w, const sl_key_request *r, const char *name, size_t len)
{
    if (!sl_present(r->query))
        return false;
    size_t pos = 0;
    sl_http_slice k, v;
    char dec[SL_KEY_TEMPLATE_MAX];
    while (sl_http_query_next(r->query.ptr, r->query.len, &pos, &k, &v)) {
        /* A name that does not decode, or is longer than any template's, is
         * not NAME. */
        long kl = sl_http_percent_decode(k.ptr, k.len, dec, sizeof dec);
        if (kl < 0 || (size_t)kl != len || memcmp(dec, name, len) != 0)
            continue;
        if (v.len == 0 || !sl_escapes_ok(v.ptr, v.len))
            return false;
        if (!w->full) {
            long vl = sl_http_percent_decode(v.ptr, v.len, w->out + w->n, w->cap - w->n);
            if (vl < 0)
                w->full = true;
            else
                w->n += (size_t)vl;
        }
        return true;
    }
    return false;
}

/* {path/N}: the first N non-empty segments, each after one '/'. */
static void sl_put_segments(sl_writer *w, sl_http_slice path, unsigned segments)
{
    size_t i = 0;
    unsigned done = 0;
    while (i < path.len && done < segments) {
        while (i < path.len && path.ptr[i] == '/')
            i++;
        size_t start = i;
        while (i < path.len && path.ptr[i] != '/')
            i++;
        if (i > start) {
            sl_put(w, "/", 1);
            sl_put(w, path.ptr + start, i - start);
            done++;
        }
    }
    if (done == 0)
        sl_put(w, "/", 1);
}

/* Clears the bits of ip past the first `bits` (of 128). */
static void sl_mask(sl_ip *ip, unsigned bits)
{
    for (unsigned b = 0; b < 16; b++) {
        if (bits >= 8u * (b + 1))
            continue;
        unsigned keep = bits > 8u * b ? bits - 8u * b : 0;
        ip->b[b] &= (uint8_t)(0xffu << (8u - keep));
    }
}

/* {ip...}: the client's address, masked, with "/N" unless it is whole. */
static void sl_put_ip(sl_writer *w, const sl_ip *client, const sl_key_part *k)
{
    sl_ip a = *client;
    bool v4 = sl_ip_is_v4(&a);
    unsigned bits = v4 ? k->v4_bits : k->v6_bits, whole = v4 ? 32u : 128u;
    sl_mask(&a, v4 ? 96u + bits : bits);
    char text[SL_IP_TEXT_MAX + 8];
    sl_ip_format(&a, text);
    size_t len = strlen(text);
    if (bits != whole)
        len += (size_t)snprintf(text + len, sizeof text - len, "/%u", bits);
    sl_put(w, text, len);
}

long sl_key_template_render(const sl_key_template *t, const sl_key_request *r, char *out,
                            size_t cap, const char **missing)
{
    sl_writer w = {.out = out, .cap = cap < SL_KEY_RENDER_MAX ? cap : SL_KEY_RENDER_MAX};
    for (size_t i = 0; i < t->nparts; i++) {
        const sl_key_part *k = &t->parts[i];
        const char *name = t->text + k->off;
        sl_http_slice v = {NULL, 0}; /* the bytes to write, for a part that is a slice */
        bool ok;                      /* whether the part is present */
        switch (k->kind) {
        case SL_KEY_PART_TEXT: sl_put(&w, name, k->len); continue;
        case SL_KEY_PART_KEY: ok = sl_present(v = r->key); break;
        case SL_KEY_PART_POLICY: ok = sl_present(v = r->policy); break;
        case SL_KEY_PART_METHOD: ok = sl_present(v = r->method); break;
        case SL_KEY_PART_HEADER: ok = sl_header_value(r, name + 7, &v); break;
        case SL_KEY_PART_QUERY: ok = sl_put_query(&w, r, name + 6, k->len); break;
        case SL_KEY_PART_PATH:
            ok = sl_present(r->path);
            if (ok && k->segments)
                sl_put_segments(&w, r->path, k->segments);
            else
                v = r->path;
            break;
        default: /* SL_KEY_PART_IP */
            ok = r->client != NULL;
            if (ok)
                sl_put_ip(&w, r->client, k);
            break;
        }
        if (!ok) {
            if (missing)
                *missing = name;
            return 0;
        }
        if (v.len)
            sl_put(&w, v.ptr, v.len);
    }
    return w.full ? -1 : (long)w.n;
}

/* ---- writing a template back ---- */

/* As sl_put, but writing as much of s as fits. */
static void sl_put_some(sl_writer *w, const char *s, size_t len)
{
    size_t room = w->cap - w->n, k = len < room ? len : room;
    if (k) {
        memcpy(w->out + w->n, s, k);
        w->n += k;
    }
    if (k < len)
        w->full = true;
}

long sl_key_template_describe(const sl_key_template *t, char *buf, size_t cap)
{
    sl_writer w = {.out = buf, .cap = cap ? cap - 1 : 0};
    for (size_t i = 0; i < t->nparts; i++) {
        const sl_key_part *k = &t->parts[i];
        const char *s = t->text + k->off;
        if (k->kind != SL_KEY_PART_TEXT) {
            sl_put_some(&w, "{", 1);
            sl_put_some(&w, s, strlen(s));
            sl_put_some(&w, "}", 1);
            continue;
        }
        for (size_t j = 0; j < k->len; j++) {
            sl_put_some(&w, s + j, 1);
            if (s[j] == '{' || s[j] == '}')
                sl_put_some(&w, s + j, 1);
        }
    }
    if (cap)
        buf[w.n] = '\0';
    return w.full ? -1 : (long)w.n;
}
