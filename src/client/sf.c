/*
 * sf.c: RFC 9651 Lists (sf.h), written from the RFC's parsing algorithms
 * (section 4.2), with the same rules as the Python client's reader so that
 * both pass one table of cases (tests/vectors/).
 *
 * A cursor moves over the caller's buffer; every loop moves it at least one
 * byte, so a parse is linear in the value's length, and nothing recurses
 * (an inner list holds items, not lists). Errors are static texts.
 */
#include <string.h>

#include "client/sf.h"

typedef struct sl_sf_reader {
    char *s;
    size_t i, n;
    const char *why; /* the first error; NULL while all is well */
} sl_sf_reader;

static bool sl_sf_fail(sl_sf_reader *r, const char *why)
{
    if (r->why == NULL)
        r->why = why;
    return false;
}

/* The byte at the cursor, or -1 at the end. */
static int sl_sf_peek(const sl_sf_reader *r)
{
    return r->i < r->n ? (unsigned char)r->s[r->i] : -1;
}

static bool sl_sf_digit(int c) { return c >= '0' && c <= '9'; }
static bool sl_sf_lcalpha(int c) { return c >= 'a' && c <= 'z'; }
static bool sl_sf_alpha(int c) { return sl_sf_lcalpha(c) || (c >= 'A' && c <= 'Z'); }

/* RFC 9110's tchar. */
static bool sl_sf_tchar(int c)
{
    return c >= 0 && (sl_sf_alpha(c) || sl_sf_digit(c) || (c != 0 && strchr("!#$%&'*+-.^_`|~", c)));
}

static bool sl_sf_base64(int c)
{
    return sl_sf_alpha(c) || sl_sf_digit(c) || c == '+' || c == '/' || c == '=';
}

static bool sl_sf_lchex(int c) { return sl_sf_digit(c) || (c >= 'a' && c <= 'f'); }
static int sl_sf_hexval(int c) { return sl_sf_digit(c) ? c - '0' : c - 'a' + 10; }

static void sl_sf_skip_sp(sl_sf_reader *r)
{
    while (r->i < r->n && r->s[r->i] == ' ')
        r->i++;
}

static void sl_sf_skip_ows(sl_sf_reader *r)
{
    while (r->i < r->n && (r->s[r->i] == ' ' || r->s[r->i] == '\t'))
        r->i++;
}

/* sf-integer or sf-decimal: at most 15 digits, or 12 before the point, 1 to
 * 3 after it and 16 characters in all. */
static bool sl_sf_number(sl_sf_reader *r, sl_sf_item *out)
{
    size_t start = r->i;
    bool neg = false;
    if (sl_sf_peek(r) == '-') {
        neg = true;
        r->i++;
    }
    if (!sl_sf_digit(sl_sf_peek(r)))
        return sl_sf_fail(r, "a number needs a digit");
    size_t digits = r->i, dot = 0;
    bool has_dot = false;
    while (r->i < r->n) {
        int c = (unsigned char)r->s[r->i];
        if (sl_sf_digit(c)) {
            r->i++;
        } else if (c == '.' && !has_dot) {
            if (r->i - digits > 12)
                return sl_sf_fail(r, "a decimal's integer part has at most 12 digits");
            has_dot = true;
            dot = r->i;
            r->i++;
        } else {
            break;
        }
        if (!has_dot && r->i - digits > 15)
            return sl_sf_fail(r, "an integer has at most 15 digits");
        if (has_dot && r->i - digits > 16)
            return sl_sf_fail(r, "a decimal has at most 16 characters");
    }
    if (!has_dot) {
        int64_t v = 0; /* at most 15 digits: fits */
        for (size_t k = digits; k < r->i; k++)
            v = v * 10 + (r->s[k] - '0');
        out->type = SL_SF_INTEGER;
        out->integer = neg ? -v : v;
        return true;
    }
    size_t frac = r->i - dot - 1;
    if (frac < 1 || frac > 3)
        return sl_sf_fail(r, "a decimal has 1 to 3 fractional digits");
    out->type = SL_SF_DECIMAL;
    out->text = r->s + start;
    out->len = r->i - start;
    return true;
}

/* sf-string: printable ASCII between quotes, escaping only '"' and '\'.
 * Unescaped in place: the text shrinks, and the cursor is always ahead. */
static bool sl_sf_string(sl_sf_reader *r, sl_sf_item *out)
{
    r->i++; /* '"' */
    char *w = r->s + r->i;
    out->type = SL_SF_STRING;
    out->text = w;
    while (r->i < r->n) {
        int c = (unsigned char)r->s[r->i++];
        if (c == '\\') {
            if (r->i >= r->n || (r->s[r->i] != '"' && r->s[r->i] != '\\'))
                return sl_sf_fail(r, "a string escapes only '\"' and '\\'");
            *w++ = r->s[r->i++];
        } else if (c == '"') {
            out->len = (size_t)(w - out->text);
            return true;
        } else if (c >= 0x20 && c <= 0x7e) {
            *w++ = (char)c;
        } else {
            return sl_sf_fail(r, "a string holds printable ASCII only");
        }
    }
    return sl_sf_fail(r, "an unterminated string");
}

static bool sl_sf_token(sl_sf_reader *r, sl_sf_item *out)
{
    size_t start = r->i++;
    while (r->i < r->n) {
        int c = (unsigned char)r->s[r->i];
        if (!sl_sf_tchar(c) && c != ':' && c != '/')
            break;
        r->i++;
    }
    out->type = SL_SF_TOKEN;
    out->text = r->s + start;
    out->len = r->i - start;
    return true;
}

static bool sl_sf_bytes(sl_sf_reader *r, sl_sf_item *out)
{
    size_t start = ++r->i; /* after ':' */
    while (r->i < r->n && sl_sf_base64((unsigned char)r->s[r->i]))
        r->i++;
    if (sl_sf_peek(r) != ':')
        return sl_sf_fail(r, "a byte sequence is base64 between ':'");
    out->type = SL_SF_BYTES;
    out->text = r->s + start;
    out->len = r->i - start;
    r->i++;
    return true;
}

static bool sl_sf_boolean(sl_sf_reader *r, sl_sf_item *out)
{
    r->i++; /* '?' */
    int c = sl_sf_peek(r);
    if (c != '0' && c != '1')
        return sl_sf_fail(r, "a boolean is ?0 or ?1");
    r->i++;
    out->type = SL_SF_BOOLEAN;
    out->integer = c == '1';
    return true;
}

/* Whether p[0 .. n) is well-formed UTF-8: no overlong form, no surrogate,
 * nothing above U+10FFFF (RFC 3629). */
static bool sl_sf_utf8(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        size_t more;
        unsigned lo = 0x80, hi = 0xbf; /* the range of the second byte */
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            more = 1;
        } else if (c >= 0xe0 && c <= 0xef) {
            more = 2;
            if (c == 0xe0)
                lo = 0xa0;
            else if (c == 0xed)
                hi = 0x9f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            more = 3;
            if (c == 0xf0)
                lo = 0x90;
            else if (c == 0xf4)
                hi = 0x8f;
        } else {
            return false;
        }
        if (n - i <= more)
            return false;
        if (p[i + 1] < lo || p[i + 1] > hi)
            return false;
        for (size_t k = 2; k <= more; k++)
            if (p[i + k] < 0x80 || p[i + k] > 0xbf)
                return false;
        i += more + 1;
    }
    return true;
}

/* sf-displaystring: %"...", printable ASCII and %-escapes of lowercase hex,
 * decoding to UTF-8. Decoded in place. */
static bool sl_sf_display(sl_sf_reader *r, sl_sf_item *out)
{
    r->i++; /* '%' */
    if (sl_sf_peek(r) != '"')
        return sl_sf_fail(r, "a display string begins with %\"");
    r->i++;
    char *w = r->s + r->i;
    out->type = SL_SF_DISPLAY;
    out->text = w;
    while (r->i < r->n) {
        int c = (unsigned char)r->s[r->i++];
        if (c == '%') {
            if (r->n - r->i < 2 || !sl_sf_lchex((unsigned char)r->s[r->i]) ||
                !sl_sf_lchex((unsigned char)r->s[r->i + 1]))
                return sl_sf_fail(r, "a display string's %-escape is two lowercase hex digits");
            *w++ = (char)(sl_sf_hexval((unsigned char)r->s[r->i]) * 16 +
                          sl_sf_hexval((unsigned char)r->s[r->i + 1]));
            r->i += 2;
        } else if (c == '"') {
            out->len = (size_t)(w - out->text);
            if (!sl_sf_utf8((const unsigned char *)out->text, out->len))
                return sl_sf_fail(r, "a display string is UTF-8");
            return true;
        } else if (c >= 0x20 && c <= 0x7e) {
            *w++ = (char)c;
        } else {
            return sl_sf_fail(r, "a display string holds printable ASCII only");
        }
    }
    return sl_sf_fail(r, "an unterminated display string");
}

static bool sl_sf_bare_item(sl_sf_reader *r, sl_sf_item *out)
{
    int c = sl_sf_peek(r);
    memset(out, 0, sizeof *out);
    if (c < 0)
        return sl_sf_fail(r, "an item is missing");
    if (c == '-' || sl_sf_digit(c))
        return sl_sf_number(r, out);
    if (c == '"')
        return sl_sf_string(r, out);
    if (sl_sf_alpha(c) || c == '*')
        return sl_sf_token(r, out);
    if (c == ':')
        return sl_sf_bytes(r, out);
    if (c == '?')
        return sl_sf_boolean(r, out);
    if (c == '@') {
        r->i++;
        if (!sl_sf_number(r, out))
            return false;
        if (out->type != SL_SF_INTEGER)
            return sl_sf_fail(r, "a date must be an integer");
        out->type = SL_SF_DATE;
        return true;
    }
    if (c == '%')
        return sl_sf_display(r, out);
    return sl_sf_fail(r, "no item begins with this character");
}

/* Parameters: ;key[=value]..., a key alone being true. The values of the
 * keys asked for go into *m (the last of a repeated key); `m` NULL drops
 * them all (an inner list's items). */
static bool sl_sf_params(sl_sf_reader *r, const char *const *keys, size_t nkeys, sl_sf_member *m)
{
    while (sl_sf_peek(r) == ';') {
        r->i++;
        sl_sf_skip_sp(r);
        int c = sl_sf_peek(r);
        if (!sl_sf_lcalpha(c) && c != '*')
            return sl_sf_fail(r, "a key must begin with a lowercase letter or '*'");
        size_t start = r->i++;
        while (r->i < r->n) {
            c = (unsigned char)r->s[r->i];
            if (!sl_sf_lcalpha(c) && !sl_sf_digit(c) && c != '_' && c != '-' && c != '.' &&
                c != '*')
                break;
            r->i++;
        }
        size_t klen = r->i - start;
        sl_sf_item v = {.type = SL_SF_BOOLEAN, .integer = 1};
        if (sl_sf_peek(r) == '=') {
            r->i++;
            if (!sl_sf_bare_item(r, &v))
                return false;
        }
        if (m == NULL)
            continue;
        for (size_t k = 0; k < nkeys; k++) {
            if (strlen(keys[k]) == klen && memcmp(keys[k], r->s + start, klen) == 0) {
                m->has[k] = true;
                m->param[k] = v;
            }
        }
    }
    return true;
}

/* An inner list: ( item item ... );params, checked and dropped. */
static bool sl_sf_inner_list(sl_sf_reader *r)
{
    r->i++; /* '(' */
    while (r->i < r->n) {
        sl_sf_skip_sp(r);
        if (sl_sf_peek(r) == ')') {
            r->i++;
            return sl_sf_params(r, NULL, 0, NULL);
        }
        sl_sf_item item;
        if (!sl_sf_bare_item(r, &item) || !sl_sf_params(r, NULL, 0, NULL))
            return false;
        int c = sl_sf_peek(r);
        if (c != ' ' && c != ')')
            return sl_sf_fail(r, "an inner list's item must be followed by ' ' or ')'");
    }
    return sl_sf_fail(r, "an unterminated inner list");
}

const char *sl_sf_parse_list(char *s, size_t n, const char *const *keys, size_t nkeys,
                             sl_sf_member_fn fn, void *ctx)
{
    if (nkeys > SL_SF_KEYS_MAX)
        return "too many keys asked for";
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    sl_sf_reader r = {.s = s, .i = 0, .n = n, .why = NULL};
    sl_sf_skip_ows(&r);
    while (r.i < r.n) {
        sl_sf_member m;
        memset(&m, 0, sizeof m);
        if (sl_sf_peek(&r) == '(') {
            if (!sl_sf_inner_list(&r))
                return r.why;
            m.inner_list = true;
        } else if (!sl_sf_bare_item(&r, &m.item) || !sl_sf_params(&r, keys, nkeys, &m)) {
            return r.why;
        }
        fn(ctx, &m);
        sl_sf_skip_ows(&r);
        if (r.i >= r.n)
            return NULL;
        if (r.s[r.i] != ',')
            return "expected ',' between members";
        r.i++;
        sl_sf_skip_ows(&r);
        if (r.i >= r.n)
            return "a trailing ','";
    }
    return NULL;
}
