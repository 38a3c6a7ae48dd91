/*
 * rls_json.c: the proto3 JSON of Envoy's RateLimitRequest and
 * RateLimitResponse (see rls_json.h for what is read and written).
 *
 * A request is read in four steps:
 *   1. a scan of the bytes checks that they are JSON, strictly (RFC 8259),
 *      and what cJSON would let through or get wrong: nesting deeper than a
 *      request's (before cJSON recurses into it), "\u0000" (cJSON would cut
 *      the string there), bytes that are not UTF-8, lone surrogates; it
 *      notes where each number is, for cJSON keeps numbers as doubles only,
 *      and a uint64 needs all of its digits;
 *   2. cJSON builds the tree (after the scan it cannot fail but for memory);
 *   3. a walk over the tree fills the message protoc-c generated, refusing
 *      unknown fields, fields given twice and values of the wrong type, as
 *      protojson does;
 *   4. the message is packed, and sl_rls_request_decode reads it back:
 *      one path checks every bound and builds the result.
 * A response is written straight into a buffer.
 */
#include "proto/rls_json.h"

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"
#include "envoy/service/ratelimit/v3/rls.pb-c.h"
#include "proto/cjson_parse.h"

typedef Envoy__Service__Ratelimit__V3__RateLimitRequest pb_request;
typedef Envoy__Extensions__Common__Ratelimit__V3__RateLimitDescriptor pb_descriptor;
typedef Envoy__Extensions__Common__Ratelimit__V3__RateLimitDescriptor__Entry pb_entry;
typedef Envoy__Extensions__Common__Ratelimit__V3__RateLimitDescriptor__RateLimitOverride
    pb_override;
typedef Google__Protobuf__UInt64Value pb_uint64;

static int fail(int rc, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Writes the message into err (when there is room) and returns rc. */
static int fail(int rc, char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Numbers                                                                  */
/* ------------------------------------------------------------------------ */

/* cJSON 1.7.15 copies a number into a buffer of 64 bytes before reading
 * it, and would misread a longer one: the scan refuses those. */
#define MAX_NUMBER_TEXT 63

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* The length of the JSON number at the start of s[0 .. n) (RFC 8259's
 * grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?), or 0 when none
 * begins there. A byte after it is the caller's to judge. */
static size_t number_len(const char *s, size_t n)
{
    size_t i = 0;
    if (i < n && s[i] == '-')
        i++;
    if (i == n || !is_digit(s[i]))
        return 0;
    if (s[i] == '0')
        i++;
    else
        while (i < n && is_digit(s[i]))
            i++;
    if (i < n && s[i] == '.') {
        i++;
        if (i == n || !is_digit(s[i]))
            return 0;
        while (i < n && is_digit(s[i]))
            i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i == n || !is_digit(s[i]))
            return 0;
        while (i < n && is_digit(s[i]))
            i++;
    }
    return i;
}

/*
 * The integer that the JSON number s[0 .. n) (the whole of it) stands for,
 * when it stands for one: "12", "12.0", "1.2e1" and "120e-1" are all 12,
 * "1.5" and "1e-1" none (protojson reads integers so). Its magnitude goes to
 * *mag (at most max), its sign to *neg (false for any zero). Returns 0, or
 * -1 when s is no number, no integer, or one whose magnitude passes max.
 */
static int number_integer(const char *s, size_t n, uint64_t max, uint64_t *mag, bool *neg)
{
    if (n == 0 || number_len(s, n) != n)
        return -1;
    size_t i = 0;
    bool minus = s[0] == '-';
    if (minus)
        i++;
    const char *intp = s + i; /* the integer part's digits, "0" left out */
    size_t nint = 0;
    if (s[i] == '0') {
        i++;
    } else {
        while (i < n && is_digit(s[i]))
            i++, nint++;
    }
    const char *frac = NULL;
    size_t nfrac = 0;
    if (i < n && s[i] == '.') {
        frac = s + ++i;
        while (i < n && is_digit(s[i]))
            i++, nfrac++;
        while (nfrac && frac[nfrac - 1] == '0')
            nfrac--; /* 1.50 is 1.5 */
    }
    int64_t exp = 0;
    if (i < n) { /* 'e' or 'E' */
        i++;
        bool eneg = s[i] == '-';
        if (s[i] == '+' || s[i] == '-')
            i++;
        for (; i < n; i++) {
            exp = exp * 10 + (s[i] - '0');
            if (exp > INT32_MAX) /* 2^31 and beyond: protojson refuses too */
                return -1;
        }
        if (eneg)
            exp = -exp;
    }
    if (nint == 0 && nfrac == 0) { /* 0, -0, 0.000, 0e7 */
        *mag = 0;
        *neg = false;
        return 0;
    }
    /* The digits of the integer: intp, then frac, then exp - nfrac zeros
     * when exp >= 0; intp less its last -exp digits (all zeros) when not. */
    size_t ndig, nzeros = 0;
    if (exp >= 0) {
        if ((int64_t)nfrac > exp)
            return -1; /* a fraction is left */
        if ((int64_t)nint + exp > 20)
            return -1; /* more digits than 2^64 has */
        nzeros = (size_t)exp - nfrac;
        ndig = nint + nfrac + nzeros;
    } else {
        if (nfrac > 0 || (int64_t)nint + exp < 0)
            return -1;
        ndig = (size_t)((int64_t)nint + exp);
        for (size_t k = ndig; k < nint; k++)
            if (intp[k] != '0')
                return -1;
    }
    uint64_t v = 0;
    for (size_t k = 0; k < ndig; k++) {
        unsigned d = k < nint ? (unsigned)(intp[k] - '0')
                     : k < nint + nfrac ? (unsigned)(frac[k - nint] - '0')
                                        : 0;
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (v > max)
        return -1;
    *mag = v;
    *neg = minus && v != 0;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The scan                                                                 */
/* ------------------------------------------------------------------------ */

/* Where a number is in the body. */
typedef struct numtok {
    size_t at, n;
} numtok;

typedef struct scan {
    const char *s;
    size_t n, i;
    numtok *nums; /* every number, in the order of the text */
    size_t n_nums, cap_nums;
    char *err;
    size_t errlen;
} scan;

#define BAD_JSON(sc) \
    fail(SL_RLS_EMALFORMED, (sc)->err, (sc)->errlen, "body is not valid JSON (at byte %zu)", (sc)->i)

static void skip_blanks(scan *sc)
{
    while (sc->i < sc->n && (sc->s[sc->i] == ' ' || sc->s[sc->i] == '\t' ||
                             sc->s[sc->i] == '\n' || sc->s[sc->i] == '\r'))
        sc->i++;
}

static int hex4(const char *p, unsigned *out)
{
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p[k];
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                            : 16;
        if (d == 16)
            return -1;
        v = v << 4 | d;
    }
    *out = v;
    return 0;
}

/* The length of the UTF-8 sequence at s[0 .. n) (1 to 4), or 0 when the
 * bytes there are none (RFC 3629: no overlong forms, no surrogates, nothing
 * past U+10FFFF). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t k;
    unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
    if (c >= 0xc2 && c <= 0xdf)
        k = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        k = 3;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        k = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
    } else
        return 0;
    if (n < k || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t j = 2; j < k; j++)
        if (s[j] < 0x80 || s[j] > 0xbf)
            return 0;
    return k;
}

/* A string, from its opening quote at s[i]. */
static int scan_string(scan *sc)
{
    sc->i++;
    while (sc->i < sc->n) {
        unsigned char c = (unsigned char)sc->s[sc->i];
        if (c == '"') {
            sc->i++;
            return SL_RLS_OK;
        }
        if (c < 0x20)
            return fail(SL_RLS_EMALFORMED, sc->err, sc->errlen,
                        "body: a control byte in a string (at byte %zu)", sc->i);
        if (c == '\\') {
            if (sc->n - sc->i < 2)
                break;
            char e = sc->s[sc->i + 1];
            if (e != 'u') {
                if (!strchr("\"\\/bfnrt", e) || e == '\0') {
                    sc->i++;
                    return BAD_JSON(sc);
                }
                sc->i += 2;
                continue;
            }
            unsigned u;
            if (sc->n - sc->i < 6 || hex4(sc->s + sc->i + 2, &u) != 0)
                return BAD_JSON(sc);
            if (u == 0)
                return fail(SL_RLS_EMALFORMED, sc->err, sc->errlen,
                            "body: a string holds \\u0000 (at byte %zu)", sc->i);
            if (u >= 0xdc00 && u <= 0xdfff)
                return fail(SL_RLS_EMALFORMED, sc->err, sc->errlen,
                            "body: a lone UTF-16 surrogate in a string (at byte %zu)", sc->i);
            if (u >= 0xd800 && u <= 0xdbff) {
                unsigned low;
                if (sc->n - sc->i < 12 || sc->s[sc->i + 6] != '\\' || sc->s[sc->i + 7] != 'u' ||
                    hex4(sc->s + sc->i + 8, &low) != 0 || low < 0xdc00 || low > 0xdfff)
                    return fail(SL_RLS_EMALFORMED, sc->err, sc->errlen,
                                "body: a lone UTF-16 surrogate in a string (at byte %zu)",
                                sc->i);
                sc->i += 6;
            }
            sc->i += 6;
            continue;
        }
        size_t k = utf8_len((const unsigned char *)sc->s + sc->i, sc->n - sc->i);
        if (k == 0)
            return fail(SL_RLS_EMALFORMED, sc->err, sc->errlen,
                        "body: a string is not UTF-8 (at byte %zu)", sc->i);
        sc->i += k;
    }
    return fail(SL_RLS_EMALFORMED, sc->err, sc->errlen,
                "body is not valid JSON: a string is not closed");
}

static int scan_number(scan *sc)
{
    size_t k = number_len(sc->s + sc->i, sc->n - sc->i);
    if (k == 0)
        return BAD_JSON(sc);
    if (k > MAX_NUMBER_TEXT)
        return fail(SL_RLS_EMALFORMED, sc->err, sc->errlen,
                    "body: a number of more than %d characters (at byte %zu)", MAX_NUMBER_TEXT,
                    sc->i);
    if (sc->n_nums == sc->cap_nums) {
        size_t cap = sc->cap_nums ? sc->cap_nums * 2 : 16;
        numtok *p = sl_realloc(sc->nums, cap * sizeof *p); /* cap <= 2 * len: no overflow */
        if (!p)
            return fail(SL_RLS_ENOMEM, sc->err, sc->errlen, "out of memory");
        sc->nums = p;
        sc->cap_nums = cap;
    }
    sc->nums[sc->n_nums++] = (numtok){.at = sc->i, .n = k};
    sc->i += k;
    return SL_RLS_OK;
}

static int scan_value(scan *sc, int depth);

/* An object or an array, from its opening bracket at s[i]. */
static int scan_container(scan *sc, int depth)
{
    bool object = sc->s[sc->i] == '{';
    char close = object ? '}' : ']';
    if (depth + 1 > SL_RLS_JSON_MAX_DEPTH)
        return fail(SL_RLS_EBOUND, sc->err, sc->errlen,
                    "body: nested deeper than %d (at byte %zu)", SL_RLS_JSON_MAX_DEPTH, sc->i);
    sc->i++;
    skip_blanks(sc);
    if (sc->i < sc->n && sc->s[sc->i] == close) {
        sc->i++;
        return SL_RLS_OK;
    }
    for (;;) {
        int rc;
        if (object) {
            skip_blanks(sc);
            if (sc->i == sc->n || sc->s[sc->i] != '"')
                return BAD_JSON(sc);
            if ((rc = scan_string(sc)) != SL_RLS_OK)
                return rc;
            skip_blanks(sc);
            if (sc->i == sc->n || sc->s[sc->i] != ':')
                return BAD_JSON(sc);
            sc->i++;
        }
        if ((rc = scan_value(sc, depth + 1)) != SL_RLS_OK)
            return rc;
        skip_blanks(sc);
        if (sc->i == sc->n)
            return BAD_JSON(sc);
        if (sc->s[sc->i] == close) {
            sc->i++;
            return SL_RLS_OK;
        }
        if (sc->s[sc->i] != ',')
            return BAD_JSON(sc);
        sc->i++;
    }
}

static int scan_literal(scan *sc, const char *word)
{
    size_t k = strlen(word);
    if (sc->n - sc->i < k || memcmp(sc->s + sc->i, word, k) != 0)
        return BAD_JSON(sc);
    sc->i += k;
    return SL_RLS_OK;
}

static int scan_value(scan *sc, int depth)
{
    skip_blanks(sc);
    if (sc->i == sc->n)
        return BAD_JSON(sc);
    switch (sc->s[sc->i]) {
    case '{':
    case '[': return scan_container(sc, depth);
    case '"': return scan_string(sc);
    case 't': return scan_literal(sc, "true");
    case 'f': return scan_literal(sc, "false");
    case 'n': return scan_literal(sc, "null");
    default: return scan_number(sc);
    }
}

/* ------------------------------------------------------------------------ */
/* The walk: JSON tree to the generated message                             */
/* ------------------------------------------------------------------------ */

/* Every block the walk allocates, freed together once the message is
 * packed. */
typedef struct walk {
    void **blocks;
    size_t n_blocks, cap_blocks;
    const char *body;
    const numtok *nums;
    size_t n_nums;
    char *err;
    size_t errlen;
} walk;

/* n zeroed elements of size bytes, kept in w; NULL when out of memory. */
static void *walk_alloc(walk *w, size_t n, size_t size)
{
    if (w->n_blocks == w->cap_blocks) {
        size_t cap = w->cap_blocks ? w->cap_blocks * 2 : 16;
        void **p = sl_realloc(w->blocks, cap * sizeof *p);
        if (!p)
            return NULL;
        w->blocks = p;
        w->cap_blocks = cap;
    }
    void *b = sl_calloc(n ? n : 1, size);
    if (b)
        w->blocks[w->n_blocks++] = b;
    return b;
}

static void walk_free(walk *w)
{
    for (size_t i = 0; i < w->n_blocks; i++)
        sl_free(w->blocks[i]);
    sl_free(w->blocks);
}

#define OOM(w) fail(SL_RLS_ENOMEM, (w)->err, (w)->errlen, "out of memory")

/* The fields of one message: its JSON name and its name in the .proto. */
typedef struct field {
    const char *json, *proto;
} field;

/* The index of the field called name in fs[0 .. n), or -1. */
static int field_index(const field *fs, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(name, fs[i].json) == 0 || strcmp(name, fs[i].proto) == 0)
            return i;
    return -1;
}

static void pathf(char *out, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A path into the body, printf'ed into out, cut short at size - 1 bytes (a
 * path in an error message only). */
static void pathf(char *out, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, size, fmt, ap);
    va_end(ap);
}

/* The path of a member: "prefix.name", or "name" at the top. */
static void join(char *out, size_t size, const char *prefix, const char *name)
{
    if (prefix[0])
        pathf(out, size, "%s.%.64s", prefix, name);
    else
        pathf(out, size, "%.64s", name);
}

#define PATH 160

/*
 * Checks a member of an object at path for the walk: a name among fs (the
 * index in *idx), not seen before in this object (seen, a bit per field).
 * Returns SL_RLS_OK, or an error naming it.
 */
static int member(walk *w, const char *path, const cJSON *m, const field *fs, int n,
                  unsigned *seen, int *idx)
{
    const char *name = m->string ? m->string : "";
    int i = field_index(fs, n, name);
    if (i < 0)
        return fail(SL_RLS_EMALFORMED, w->err, w->errlen, "%s%sunknown field \"%.64s\"", path,
                    path[0] ? ": " : "", name);
    if (*seen & 1u << i) {
        char p[PATH];
        join(p, sizeof p, path, fs[i].proto);
        if (strcmp(fs[i].json, fs[i].proto) == 0)
            return fail(SL_RLS_EMALFORMED, w->err, w->errlen, "%s: given twice", p);
        return fail(SL_RLS_EMALFORMED, w->err, w->errlen,
                    "%s: given twice (%s and %s name one field)", p, fs[i].json, fs[i].proto);
    }
    *seen |= 1u << i;
    *idx = i;
    return SL_RLS_OK;
}

/*
 * An integer of at most max, signed or not, given as a JSON number or as a
 * string holding one. Returns 0, or -1 when the item is neither or out of
 * range.
 */
static int walk_integer(const walk *w, const cJSON *item, bool is_signed, uint64_t max,
                        uint64_t *mag, bool *neg)
{
    const char *s;
    size_t n;
    if (cJSON_IsNumber(item)) {
        /* The scan's note of where the number is (see number_ordinals). */
        if (item->valueint < 0 || (size_t)item->valueint >= w->n_nums)
            return -1;
        const numtok *t = &w->nums[item->valueint];
        s = w->body + t->at;
        n = t->n;
    } else if (cJSON_IsString(item)) {
        s = item->valuestring;
        n = strlen(s);
    } else {
        return -1;
    }
    if (number_integer(s, n, max, mag, neg) != 0)
        return -1;
    if (*neg && !is_signed)
        return -1;
    return 0;
}

static int walk_uint32(walk *w, const cJSON *item, const char *path, uint32_t *out)
{
    uint64_t v;
    bool neg;
    if (walk_integer(w, item, false, UINT32_MAX, &v, &neg) != 0)
        return fail(SL_RLS_EMALFORMED, w->err, w->errlen,
                    "%s: not an unsigned 32-bit integer (a number or a string of one)", path);
    *out = (uint32_t)v;
    return SL_RLS_OK;
}

static int walk_uint64(walk *w, const cJSON *item, const char *path, uint64_t *out)
{
    bool neg;
    if (walk_integer(w, item, false, UINT64_MAX, out, &neg) != 0)
        return fail(SL_RLS_EMALFORMED, w->err, w->errlen,
                    "%s: not an unsigned 64-bit integer (a number or a string of one)", path);
    return SL_RLS_OK;
}

static const char *const unit_names[] = {"UNKNOWN", "SECOND", "MINUTE", "HOUR",
                                         "DAY",     "MONTH",  "YEAR",   "WEEK"};

/* An envoy.type.v3.RateLimitUnit: a name, or a number (any int32, as
 * protojson takes it: sl_rls_request_decode then says which it knows). */
static int walk_unit(walk *w, const cJSON *item, const char *path, int *out)
{
    if (cJSON_IsString(item)) {
        for (size_t i = 0; i < sizeof unit_names / sizeof unit_names[0]; i++)
            if (strcmp(item->valuestring, unit_names[i]) == 0) {
                *out = (int)i;
                return SL_RLS_OK;
            }
        return fail(SL_RLS_EMALFORMED, w->err, w->errlen,
                    "%s: \"%.32s\" is no RateLimitUnit (UNKNOWN, SECOND, MINUTE, HOUR, DAY, "
                    "MONTH, YEAR or WEEK)",
                    path, item->valuestring);
    }
    uint64_t mag;
    bool neg;
    if (!cJSON_IsNumber(item) || walk_integer(w, item, true, (uint64_t)INT32_MAX + 1, &mag,
                                              &neg) != 0 ||
        (!neg && mag > INT32_MAX))
        return fail(SL_RLS_EMALFORMED, w->err, w->errlen,
                    "%s: not a RateLimitUnit (its name, or its number)", path);
    *out = neg ? (int)-(int64_t)mag : (int)mag;
    return SL_RLS_OK;
}

static int walk_string(walk *w, const cJSON *item, const char *path, char **out)
{
    if (!cJSON_IsString(item))
        return fail(SL_RLS_EMALFORMED, w->err, w->errlen, "%s: not a string", path);
    *out = item->valuestring;
    return SL_RLS_OK;
}

static int not_object(walk *w, const char *path)
{
    return fail(SL_RLS_EMALFORMED, w->err, w->errlen, "%s: not an object", path);
}

static int not_array(walk *w, const char *path)
{
    return fail(SL_RLS_EMALFORMED, w->err, w->errlen, "%s: not an array", path);
}

static const field entry_fields[] = {{"key", "key"}, {"value", "value"}};

static int walk_entry(walk *w, const cJSON *obj, const char *path, pb_entry *e)
{
    envoy__extensions__common__ratelimit__v3__rate_limit_descriptor__entry__init(e);
    if (!cJSON_IsObject(obj))
        return not_object(w, path);
    unsigned seen = 0;
    for (const cJSON *m = obj->child; m; m = m->next) {
        int i, rc;
        if ((rc = member(w, path, m, entry_fields, 2, &seen, &i)) != SL_RLS_OK)
            return rc;
        if (cJSON_IsNull(m))
            continue;
        char p[PATH];
        join(p, sizeof p, path, entry_fields[i].json);
        if ((rc = walk_string(w, m, p, i == 0 ? &e->key : &e->value)) != SL_RLS_OK)
            return rc;
    }
    return SL_RLS_OK;
}

static const field override_fields[] = {{"requestsPerUnit", "requests_per_unit"},
                                        {"unit", "unit"}};

static int walk_override(walk *w, const cJSON *obj, const char *path, pb_override *o)
{
    envoy__extensions__common__ratelimit__v3__rate_limit_descriptor__rate_limit_override__init(o);
    if (!cJSON_IsObject(obj))
        return not_object(w, path);
    unsigned seen = 0;
    for (const cJSON *m = obj->child; m; m = m->next) {
        int i, rc;
        if ((rc = member(w, path, m, override_fields, 2, &seen, &i)) != SL_RLS_OK)
            return rc;
        if (cJSON_IsNull(m))
            continue;
        char p[PATH];
        join(p, sizeof p, path, m->string);
        if (i == 0) {
            rc = walk_uint32(w, m, p, &o->requests_per_unit);
        } else {
            int unit = 0;
            rc = walk_unit(w, m, p, &unit);
            o->unit = (Envoy__Type__V3__RateLimitUnit)unit;
        }
        if (rc != SL_RLS_OK)
            return rc;
    }
    return SL_RLS_OK;
}

static const field descriptor_fields[] = {
    {"entries", "entries"}, {"limit", "limit"}, {"hitsAddend", "hits_addend"}};

static int walk_descriptor(walk *w, const cJSON *obj, const char *path, pb_descriptor *d)
{
    envoy__extensions__common__ratelimit__v3__rate_limit_descriptor__init(d);
    if (!cJSON_IsObject(obj))
        return not_object(w, path);
    unsigned seen = 0;
    for (const cJSON *m = obj->child; m; m = m->next) {
        int i, rc;
        if ((rc = member(w, path, m, descriptor_fields, 3, &seen, &i)) != SL_RLS_OK)
            return rc;
        if (cJSON_IsNull(m))
            continue;
        char p[PATH];
        join(p, sizeof p, path, m->string);
        if (i == 0) {
            if (!cJSON_IsArray(m))
                return not_array(w, p);
            size_t n = (size_t)cJSON_GetArraySize(m);
            pb_entry *es = walk_alloc(w, n, sizeof *es);
            pb_entry **ep = walk_alloc(w, n, sizeof *ep);
            if (!es || !ep)
                return OOM(w);
            size_t k = 0;
            for (const cJSON *e = m->child; e; e = e->next, k++) {
                char q[PATH];
                pathf(q, sizeof q, "%s[%zu]", p, k);
                if ((rc = walk_entry(w, e, q, &es[k])) != SL_RLS_OK)
                    return rc;
                ep[k] = &es[k];
            }
            d->entries = ep;
            d->n_entries = k;
        } else if (i == 1) {
            pb_override *o = walk_alloc(w, 1, sizeof *o);
            if (!o)
                return OOM(w);
            if ((rc = walk_override(w, m, p, o)) != SL_RLS_OK)
                return rc;
            d->limit = o;
        } else {
            /* A google.protobuf.UInt64Value: in JSON, the integer itself. */
            pb_uint64 *h = walk_alloc(w, 1, sizeof *h);
            if (!h)
                return OOM(w);
            google__protobuf__uint64_value__init(h);
            if ((rc = walk_uint64(w, m, p, &h->value)) != SL_RLS_OK)
                return rc;
            d->hits_addend = h;
        }
    }
    return SL_RLS_OK;
}

static const field request_fields[] = {
    {"domain", "domain"}, {"descriptors", "descriptors"}, {"hitsAddend", "hits_addend"}};

static int walk_request(walk *w, const cJSON *root, pb_request *r)
{
    if (!cJSON_IsObject(root))
        return fail(SL_RLS_EMALFORMED, w->err, w->errlen,
                    "body: not a JSON object (a RateLimitRequest)");
    unsigned seen = 0;
    for (const cJSON *m = root->child; m; m = m->next) {
        int i, rc;
        if ((rc = member(w, "", m, request_fields, 3, &seen, &i)) != SL_RLS_OK)
            return rc;
        if (cJSON_IsNull(m))
            continue;
        const char *p = m->string;
        if (i == 0) {
            rc = walk_string(w, m, p, &r->domain);
        } else if (i == 1) {
            if (!cJSON_IsArray(m))
                return not_array(w, p);
            size_t n = (size_t)cJSON_GetArraySize(m);
            pb_descriptor *ds = walk_alloc(w, n, sizeof *ds);
            pb_descriptor **dp = walk_alloc(w, n, sizeof *dp);
            if (!ds || !dp)
                return OOM(w);
            size_t k = 0;
            for (const cJSON *d = m->child; d; d = d->next, k++) {
                char q[PATH];
                pathf(q, sizeof q, "%.64s[%zu]", p, k);
                if ((rc = walk_descriptor(w, d, q, &ds[k])) != SL_RLS_OK)
                    return rc;
                dp[k] = &ds[k];
            }
            r->descriptors = dp;
            r->n_descriptors = k;
        } else {
            rc = walk_uint32(w, m, p, &r->hits_addend);
        }
        if (rc != SL_RLS_OK)
            return rc;
    }
    return SL_RLS_OK;
}

/*
 * Numbers the tree's numbers in the order of the text (a depth-first walk
 * meets them so), into their valueint, which the walk does not otherwise
 * read: the k-th number of the tree is the scan's nums[k]. Returns how many
 * there are.
 */
static size_t number_ordinals(cJSON *item, size_t k)
{
    for (; item; item = item->next) {
        if (cJSON_IsNumber(item))
            item->valueint = (int)k++; /* k < n_nums <= INT_MAX: checked first */
        else if (item->child)
            k = number_ordinals(item->child, k);
    }
    return k;
}

int sl_rls_request_from_json(sl_rls_request *out, const char *body, size_t len,
                             const sl_rls_bounds *bounds, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const sl_rls_bounds *b = bounds ? bounds : &sl_rls_default_bounds;
    if (err && errlen)
        err[0] = '\0';
    size_t max_body;
    if (__builtin_mul_overflow(b->max_message, (size_t)SL_RLS_JSON_BODY_FACTOR, &max_body))
        max_body = SIZE_MAX;
    if (len > max_body)
        return fail(SL_RLS_EBOUND, err, errlen,
                    "body: %zu bytes, over the bound of %zu (%d times the bound of %zu on "
                    "the message)",
                    len, max_body, SL_RLS_JSON_BODY_FACTOR, b->max_message);

    scan sc = {.s = body, .n = len, .err = err, .errlen = errlen};
    skip_blanks(&sc);
    if (sc.i == len)
        return fail(SL_RLS_EMALFORMED, err, errlen,
                    "body is empty: send a RateLimitRequest as JSON");
    int rc = scan_value(&sc, 0);
    if (rc == SL_RLS_OK) {
        skip_blanks(&sc);
        if (sc.i < len)
            rc = fail(SL_RLS_EMALFORMED, err, errlen,
                      "body is not valid JSON: bytes after the value (at byte %zu)", sc.i);
        else if (sc.n_nums > (size_t)INT_MAX)
            rc = fail(SL_RLS_EBOUND, err, errlen, "body: more than %d numbers", INT_MAX);
    }
    if (rc != SL_RLS_OK) {
        sl_free(sc.nums);
        return rc;
    }

    cJSON *root = sl_cjson_parse(body, len, NULL);
    if (!root) {
        /* The scan passed what cJSON reads: what is left is memory. */
        sl_free(sc.nums);
        return fail(SL_RLS_ENOMEM, err, errlen, "out of memory");
    }
    walk w = {.body = body, .nums = sc.nums, .n_nums = sc.n_nums, .err = err, .errlen = errlen};
    pb_request m = ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_REQUEST__INIT;
    if (number_ordinals(root, 0) != sc.n_nums)
        rc = fail(SL_RLS_EMALFORMED, err, errlen, "body is not valid JSON");
    else
        rc = walk_request(&w, root, &m);
    uint8_t *wire = NULL;
    size_t n = 0;
    if (rc == SL_RLS_OK) {
        n = envoy__service__ratelimit__v3__rate_limit_request__get_packed_size(&m);
        wire = sl_malloc(n ? n : 1);
        if (!wire)
            rc = fail(SL_RLS_ENOMEM, err, errlen, "out of memory");
        else if (envoy__service__ratelimit__v3__rate_limit_request__pack(&m, wire) != n)
            rc = fail(SL_RLS_EMALFORMED, err, errlen, "request: could not be packed");
    }
    walk_free(&w);
    cJSON_Delete(root);
    sl_free(sc.nums);
    if (rc == SL_RLS_OK)
        rc = sl_rls_request_decode(out, wire, n, b, err, errlen);
    sl_free(wire);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The response                                                             */
/* ------------------------------------------------------------------------ */

static void put(sl_buf *b, const char *s)
{
    sl_buf_add(b, s, strlen(s));
}

static void put_u64(sl_buf *b, uint64_t v)
{
    char t[24];
    int n = snprintf(t, sizeof t, "%llu", (unsigned long long)v);
    sl_buf_add(b, t, (size_t)n);
}

/* A JSON string of s, escaped as protojson escapes it (", \, and the
 * control bytes; \b \f \n \r \t by name, others as \u00xx), each byte that
 * is not UTF-8 written as U+FFFD. */
static void put_string(sl_buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    sl_buf_add(b, "\"", 1);
    size_t n = strlen(s), i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default: break;
        }
        if (esc) {
            put(b, esc);
            i++;
        } else if (c < 0x20) {
            char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            sl_buf_add(b, u, sizeof u);
            i++;
        } else {
            size_t k = utf8_len((const unsigned char *)s + i, n - i);
            if (k == 0) {
                sl_buf_add(b, "\xef\xbf\xbd", 3);
                i++;
            } else {
                sl_buf_add(b, s + i, k);
                i += k;
            }
        }
    }
    sl_buf_add(b, "\"", 1);
}

/* An enum's value: its name when names[v] has one, else its number. */
static void put_enum(sl_buf *b, int v, const char *const *names, int n)
{
    if (v >= 0 && v < n && names[v]) {
        put_string(b, names[v]);
    } else {
        char t[16];
        int k = snprintf(t, sizeof t, "%d", v);
        sl_buf_add(b, t, (size_t)k);
    }
}

static const char *const code_names[] = {"UNKNOWN", "OK", "OVER_LIMIT"};
/* RateLimitResponse.RateLimit.Unit, by number (WEEK is 7). */
static const char *const response_unit_names[] = {"UNKNOWN", "SECOND", "MINUTE", "HOUR",
                                                  "DAY",     "MONTH",  "YEAR",   "WEEK"};

/* Writes "name": before a member, with a comma unless it is the first. */
static void put_name(sl_buf *b, bool *first, const char *name)
{
    if (!*first)
        sl_buf_add(b, ",", 1);
    *first = false;
    sl_buf_add(b, "\"", 1);
    put(b, name);
    sl_buf_add(b, "\":", 2);
}

/* A google.protobuf.Duration of ns >= 0: seconds, with 0, 3, 6 or 9
 * decimals, and "s". */
static void put_duration(sl_buf *b, int64_t ns)
{
    char t[40];
    long long secs = (long long)(ns / 1000000000), frac = (long long)(ns % 1000000000);
    int n;
    if (frac == 0)
        n = snprintf(t, sizeof t, "\"%llds\"", secs);
    else if (frac % 1000000 == 0)
        n = snprintf(t, sizeof t, "\"%lld.%03llds\"", secs, frac / 1000000);
    else if (frac % 1000 == 0)
        n = snprintf(t, sizeof t, "\"%lld.%06llds\"", secs, frac / 1000);
    else
        n = snprintf(t, sizeof t, "\"%lld.%09llds\"", secs, frac);
    sl_buf_add(b, t, (size_t)n);
}

static void put_status(sl_buf *b, const sl_rls_status *s)
{
    bool first = true;
    sl_buf_add(b, "{", 1);
    if (s->code != SL_RLS_CODE_UNKNOWN) {
        put_name(b, &first, "code");
        put_enum(b, (int)s->code, code_names, 3);
    }
    if (s->has_limit) {
        /* RateLimit declares name (3) before requests_per_unit (1) and unit
         * (2): protojson writes fields in the order they are declared. */
        bool lfirst = true;
        put_name(b, &first, "currentLimit");
        sl_buf_add(b, "{", 1);
        if (s->limit_name && s->limit_name[0]) {
            put_name(b, &lfirst, "name");
            put_string(b, s->limit_name);
        }
        if (s->requests_per_unit) {
            put_name(b, &lfirst, "requestsPerUnit");
            put_u64(b, s->requests_per_unit);
        }
        if (s->unit != SL_RLS_UNIT_UNKNOWN) {
            put_name(b, &lfirst, "unit");
            put_enum(b, (int)s->unit, response_unit_names, 8);
        }
        sl_buf_add(b, "}", 1);
    }
    if (s->limit_remaining) {
        put_name(b, &first, "limitRemaining");
        put_u64(b, s->limit_remaining);
    }
    if (s->has_reset) {
        put_name(b, &first, "durationUntilReset");
        put_duration(b, s->reset_after_ns < 0 ? 0 : s->reset_after_ns);
    }
    sl_buf_add(b, "}", 1);
}

static void put_headers(sl_buf *b, bool *first, const char *name, const sl_rls_header *h,
                        size_t n)
{
    if (n == 0)
        return;
    put_name(b, first, name);
    sl_buf_add(b, "[", 1);
    for (size_t i = 0; i < n; i++) {
        bool hfirst = true;
        sl_buf_add(b, i ? ",{" : "{", i ? 2 : 1);
        if (h[i].key && h[i].key[0]) {
            put_name(b, &hfirst, "key");
            put_string(b, h[i].key);
        }
        if (h[i].value && h[i].value[0]) {
            put_name(b, &hfirst, "value");
            put_string(b, h[i].value);
        }
        sl_buf_add(b, "}", 1);
    }
    sl_buf_add(b, "]", 1);
}

/* bytes in standard base64, padded. */
static void put_base64(sl_buf *b, const uint8_t *p, size_t n)
{
    static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    sl_buf_add(b, "\"", 1);
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        char q[4] = {al[v >> 18 & 63], al[v >> 12 & 63], i + 1 < n ? al[v >> 6 & 63] : '=',
                     i + 2 < n ? al[v & 63] : '='};
        sl_buf_add(b, q, 4);
    }
    sl_buf_add(b, "\"", 1);
}

char *sl_rls_response_to_json(const sl_rls_response *r, size_t *len)
{
    sl_buf b;
    sl_buf_init(&b, 0, 0);
    bool first = true;
    sl_buf_add(&b, "{", 1);
    if (r->overall_code != SL_RLS_CODE_UNKNOWN) {
        put_name(&b, &first, "overallCode");
        put_enum(&b, (int)r->overall_code, code_names, 3);
    }
    if (r->n_statuses) {
        put_name(&b, &first, "statuses");
        sl_buf_add(&b, "[", 1);
        for (size_t i = 0; i < r->n_statuses; i++) {
            if (i)
                sl_buf_add(&b, ",", 1);
            put_status(&b, &r->statuses[i]);
        }
        sl_buf_add(&b, "]", 1);
    }
    put_headers(&b, &first, "responseHeadersToAdd", r->response_headers,
                r->n_response_headers);
    put_headers(&b, &first, "requestHeadersToAdd", r->request_headers, r->n_request_headers);
    if (r->raw_body && r->raw_body_len) {
        put_name(&b, &first, "rawBody");
        put_base64(&b, r->raw_body, r->raw_body_len);
    }
    sl_buf_add(&b, "}", 2); /* and the NUL */
    if (b.failed) {
        sl_buf_free(&b);
        return NULL;
    }
    *len = b.len - 1;
    return b.data;
}
