/*
 * policy/key_template.c: key templates (key_template.h says what each part
 * means). The file keeps one order: messages, parsing a part, parsing a
 * template, writing a template back.
 */
#include <stdio.h>
#include <string.h>

#include "policy/key_template.h"

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

/* ---- writing a template back ---- */

/* Where a template's text is being written back. */
typedef struct sl_writer {
    char *out;
    size_t cap, n;
    bool full; /* something did not fit */
} sl_writer;

/* Writes as much of s as fits. */
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
