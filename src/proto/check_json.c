/*
 * check_json.c: the /v1/check request, from a query string or a JSON body,
 * decoded and validated into sl_http_check. See http.h for the contract.
 *
 * Both sources first fill the same `raw` description of one limit (which
 * fields were given, and their values), and one function validates it and
 * builds the sl_limit, so the two faces cannot drift apart and every error
 * names its field the same way.
 */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/duration.h"
#include "common/parse.h"
#include "proto/cjson_parse.h"
#include "proto/http.h"

#define NS_PER_S INT64_C(1000000000)

/* The fields of a check; a bit each in raw.given. */
enum {
    F_KEY = 1 << 0,
    F_LIMIT = 1 << 1,
    F_PERIOD = 1 << 2,
    F_BURST = 1 << 3,
    F_COST = 1 << 4,
    F_ALGORITHM = 1 << 5,
    F_POLICY = 1 << 6,
    F_TIER = 1 << 7,
    F_LIMITS = 1 << 8,
    F_UTC_OFFSET = 1 << 9,
    F_TOKENS = 1 << 10,
    F_TTL_MS = 1 << 11,
    F_RESET_DAY = 1 << 12,
};

/* The fields' names, in the order of their bits: field_names[i] is 1 << i's. */
static const char *const field_names[] = {
    "key",    "limit", "period", "burst",  "cost",
    "algorithm", "policy", "tier",  "limits", "utc_offset", "tokens",
    "ttl_ms", "reset_day",
};

#define NFIELDS (sizeof field_names / sizeof field_names[0])

static const char *field_name(unsigned bit)
{
    unsigned i = bit ? (unsigned)__builtin_ctz(bit) : NFIELDS;
    return i < NFIELDS ? field_names[i] : "?";
}

/* The bit of the field called s[0 .. n), or 0 for none. The length picks
 * the candidates, and a comparison of a known length compiles to a few
 * integer compares (no call). */
static unsigned field_bit(const char *s, size_t n)
{
#define IS(lit) (memcmp(s, lit, sizeof lit - 1) == 0)
    switch (n) {
    case 3: return IS("key") ? F_KEY : 0;
    case 4: return IS("cost") ? F_COST : IS("tier") ? F_TIER : 0;
    case 5: return IS("limit") ? F_LIMIT : IS("burst") ? F_BURST : 0;
    case 6:
        return IS("period")   ? F_PERIOD
               : IS("policy") ? F_POLICY
               : IS("limits") ? F_LIMITS
               : IS("tokens") ? F_TOKENS
               : IS("ttl_ms") ? F_TTL_MS
                              : 0;
    case 9: return IS("algorithm") ? F_ALGORITHM : IS("reset_day") ? F_RESET_DAY : 0;
    case 10: return IS("utc_offset") ? F_UTC_OFFSET : 0;
    default: return 0;
    }
#undef IS
}

/* One limit as given, before validation. Strings point into the check's
 * strbuf (key, policy, tier) or at static names (algorithm is parsed at
 * once). */
typedef struct raw {
    unsigned given;
    const char *key;
    size_t keylen;
    int64_t limit, period_ns, burst, cost, tokens, ttl_ms;
    int64_t months, utc_offset_ns; /* calendar months of the period; the windows' offset */
    int64_t reset_day;             /* the day of the month windows of months begin on */
    sl_algorithm algorithm;
    const char *policy, *tier;
    size_t policy_len, tier_len;
} raw;

/* Records an error: message and field are printf'ed into the check's
 * buffers (field_prefix, e.g. "limits[2].", goes before the field). */
static int check_fail(sl_http_check *c, int status, const char *prefix, const char *field,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int check_fail(sl_http_check *c, int status, const char *prefix, const char *field,
                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->errbuf, sizeof c->errbuf, fmt, ap);
    va_end(ap);
    c->errstr = c->errbuf;
    c->status = status;
    if (field) {
        snprintf(c->fieldbuf, sizeof c->fieldbuf, "%s%s", prefix ? prefix : "", field);
        c->field = c->fieldbuf;
    } else {
        c->field = NULL;
    }
    return -1;
}

/* Copies n bytes into the check's strbuf; NULL when it is full (cannot
 * happen within the caps: 8 keys and two names always fit). */
static const char *keep(sl_http_check *c, const char *s, size_t n)
{
    if (n > sizeof c->strbuf - c->st_used)
        return NULL;
    char *dst = c->strbuf + c->st_used;
    memcpy(dst, s, n);
    c->st_used += n;
    return dst;
}

static void check_begin(sl_http_check *c)
{
    c->n = 0;
    c->multi = false;
    c->policy = c->tier = NULL;
    c->policy_len = c->tier_len = 0;
    c->tokens = 0;
    c->ttl_ms = -1;
    c->status = 0;
    c->errstr = NULL;
    c->field = NULL;
    c->errbuf[0] = c->fieldbuf[0] = '\0';
    c->st_used = 0;
}

/* The longest key this check takes: the store's, within the decoder's own. */
static size_t key_max(const sl_http_check *c)
{
    return c->max_key > 0 && c->max_key < SL_HTTP_KEY_MAX ? c->max_key : SL_HTTP_KEY_MAX;
}

/* A string field's value: key (1 .. key_max(c) bytes), policy and tier
 * (1 .. SL_HTTP_NAME_MAX), algorithm (a known name, not concurrency). */
static int take_string(sl_http_check *c, raw *r, unsigned bit, const char *prefix,
                       const char *s, size_t n)
{
    const char *f = field_name(bit);
    if (bit == F_ALGORITHM) {
        if (sl_algorithm_parse(s, n, &r->algorithm) != SL_OK || r->algorithm == SL_CONCURRENCY)
            return check_fail(c, 400, prefix, f,
                              "unknown algorithm '%.*s': use gcra, token_bucket, leaky_bucket, "
                              "fixed_window, sliding_log or sliding_window",
                              (int)(n > 24 ? 24 : n), s);
        return 0;
    }
    size_t max = bit == F_KEY ? key_max(c) : SL_HTTP_NAME_MAX;
    if (n == 0)
        return check_fail(c, 400, prefix, f, "%s must not be empty", f);
    if (n > max)
        return check_fail(c, 400, prefix, f, "%s is longer than %zu bytes", f, max);
    const char *kept = keep(c, s, n);
    if (!kept)
        return check_fail(c, 400, prefix, f, "%s does not fit", f);
    if (bit == F_KEY) {
        r->key = kept;
        r->keylen = n;
    } else if (bit == F_POLICY) {
        r->policy = kept;
        r->policy_len = n;
    } else {
        r->tier = kept;
        r->tier_len = n;
    }
    return 0;
}

/* A period given as text: seconds, or the period syntax of duration.h. */
static int take_period_text(sl_http_check *c, raw *r, const char *prefix, const char *s,
                            size_t n)
{
    sl_duration_status rc = sl_parse_period(s, n, &r->period_ns, &r->months);
    if (rc == SL_DURATION_OUT_OF_RANGE)
        return check_fail(c, 400, prefix, "period",
                          "period must be a positive duration of at most 73 years");
    if (rc != SL_DURATION_OK)
        return check_fail(c, 400, prefix, "period",
                          "period is not a duration: use seconds, or a number with ms, s, m, h, "
                          "d, w or mo");
    return 0;
}

/* A UTC offset for the windows: "+05:30", "-0500", "+05" or "Z". */
static int take_utc_offset_text(sl_http_check *c, raw *r, const char *prefix, const char *s,
                                size_t n)
{
    if (sl_parse_utc_offset(s, n, &r->utc_offset_ns) != SL_DURATION_OK)
        return check_fail(c, 400, prefix, "utc_offset",
                          "utc_offset must be +HH:MM, -HH:MM, +HHMM, +HH or Z, at most 18 hours");
    return 0;
}

static int take_int(raw *r, unsigned bit, int64_t v)
{
    switch (bit) {
    case F_LIMIT: r->limit = v; break;
    case F_BURST: r->burst = v; break;
    case F_COST: r->cost = v; break;
    case F_TOKENS: r->tokens = v; break;
    case F_TTL_MS: r->ttl_ms = v; break;
    case F_RESET_DAY: r->reset_day = v; break;
    default: return -1;
    }
    return 0;
}

/*
 * Validates one limit and appends it as c->items[c->n]. Policy checks keep
 * only key and cost. Every message names its field.
 */
static int finish_item(sl_http_check *c, raw *r, const char *prefix, bool allow_policy)
{
    if (r->given & F_POLICY) {
        static const unsigned clash[] = {F_LIMIT, F_PERIOD, F_BURST, F_ALGORITHM, F_UTC_OFFSET,
                                         F_RESET_DAY};
        for (size_t i = 0; i < sizeof clash / sizeof clash[0]; i++)
            if (r->given & clash[i])
                return check_fail(c, 400, prefix, field_name(clash[i]),
                                  "policy cannot be combined with %s: the policy sets it",
                                  field_name(clash[i]));
    } else if (r->given & (F_TIER | F_TOKENS | F_TTL_MS)) {
        const char *f = r->given & F_TIER ? "tier" : r->given & F_TOKENS ? "tokens" : "ttl_ms";
        return check_fail(c, 400, prefix, f, "%s needs a policy", f);
    }
    if (!(r->given & F_KEY))
        return check_fail(c, 400, prefix, "key", "key is required");
    if (r->cost < 0)
        return check_fail(c, 400, prefix, "cost", "%s", sl_strerror(SL_ERR_COST));
    if (r->tokens < 0)
        return check_fail(c, 400, prefix, "tokens", "tokens must be a non-negative integer");
    /* The library reads burst 0 as "the limit"; a client that writes 0
     * means no burst (nginx's burst=0). A given burst must be at least 1,
     * as in every face; omitting it asks for the limit. */
    if ((r->given & F_BURST) && r->burst < 1)
        return check_fail(c, 400, prefix, "burst", "%s", sl_strerror(SL_ERR_BURST));

    sl_http_check_item *it = &c->items[c->n];
    memset(it, 0, sizeof *it);
    it->key = r->key;
    it->keylen = r->keylen;
    it->cost = r->cost;
    if (r->given & F_POLICY) {
        if (!allow_policy)
            return check_fail(c, 400, prefix, "policy", "policy is not allowed here");
        c->policy = r->policy;
        c->policy_len = r->policy_len;
        c->tier = r->tier;
        c->tier_len = r->tier_len;
        c->tokens = r->tokens;
        c->ttl_ms = r->given & F_TTL_MS ? r->ttl_ms : -1;
        c->n++;
        return 0;
    }
    if (!(r->given & F_LIMIT))
        return check_fail(c, 400, prefix, "limit", "limit is required (or give a policy)");
    if (!(r->given & F_PERIOD))
        return check_fail(c, 400, prefix, "period", "period is required");
    if (r->given & F_RESET_DAY) {
        if (r->reset_day < 1 || r->reset_day > SL_RESET_DAY_MAX)
            return check_fail(c, 400, prefix, "reset_day",
                              "reset_day must be a day of the month, 1 to %d", SL_RESET_DAY_MAX);
        if (r->months == 0)
            return check_fail(c, 400, prefix, "reset_day",
                              "reset_day is the day of the month windows of months begin on: "
                              "give a period of months such as 1mo");
        if (r->algorithm != SL_FIXED_WINDOW && r->algorithm != SL_SLIDING_WINDOW)
            return check_fail(c, 400, prefix, "reset_day",
                              "reset_day needs algorithm fixed_window or sliding_window: %s "
                              "meters a rate and has no windows to reset",
                              sl_algorithm_name(r->algorithm));
    }
    int rc;
    if (c->make_limit) {
        rc = c->make_limit(c->make_limit_ctx, &it->limit, r->algorithm, r->limit, r->period_ns,
                           r->burst, r->months, r->reset_day, r->utc_offset_ns);
    } else {
        rc = sl_limit_init(&it->limit, r->algorithm, r->limit, r->period_ns, r->burst);
        if (rc == SL_OK)
            rc = sl_limit_align_day(&it->limit, r->months, r->reset_day, r->utc_offset_ns, 0);
    }
    if (rc == SL_ERR_PERIOD && r->months > 0 && r->algorithm == SL_SLIDING_LOG)
        return check_fail(c, 400, prefix, "period",
                          "sliding_log cannot count calendar months: give its period in days or "
                          "weeks, or use fixed_window or sliding_window");
    if (rc != SL_OK) {
        const char *f = rc == SL_ERR_LIMIT    ? "limit"
                        : rc == SL_ERR_PERIOD ? "period"
                        : rc == SL_ERR_BURST || rc == SL_ERR_OVERFLOW ? "burst"
                        : rc == SL_ERR_ALGORITHM ? "algorithm"
                                                 : NULL;
        return check_fail(c, 400, prefix, f, "%s", sl_strerror(rc));
    }
    c->n++;
    return 0;
}

static void raw_init(raw *r)
{
    memset(r, 0, sizeof *r);
    r->cost = 1;
    r->algorithm = SL_GCRA;
}

/* ------------------------------------------------------------------------ */
/* The query string                                                         */
/* ------------------------------------------------------------------------ */

/* A query string's name or value, decoded: the slice itself when it holds
 * nothing to decode (no '%', no '+': the usual case; `plain` says the whole
 * query holds none), else decoded into buf[0 .. cap). Returns what
 * sl_http_percent_decode would, with *out the decoded bytes. */
static inline long query_text(sl_http_slice s, bool plain, char *buf, size_t cap,
                               const char **out)
{
    if (plain || (!memchr(s.ptr, '%', s.len) && !memchr(s.ptr, '+', s.len))) {
        *out = s.ptr;
        return s.len > cap ? SL_HTTP_TOO_LONG : (long)s.len;
    }
    *out = buf;
    return sl_http_percent_decode(s.ptr, s.len, buf, cap);
}

/* The parameters of a query string into r; `allowed` is the mask of the
 * fields this endpoint takes (any other is an unknown parameter). */
static int take_query(sl_http_check *c, raw *r_, const char *query, size_t len,
                      unsigned allowed)
{
    raw r = *r_;
    size_t pos = 0;
    sl_http_slice k, v;
    char namebuf[16], valbuf[SL_HTTP_KEY_MAX];
    /* (A request without a query string passes NULL and 0.) */
    bool plain = len == 0 || (!memchr(query, '%', len) && !memchr(query, '+', len));
    while (sl_http_query_next(query, len, &pos, &k, &v)) {
        const char *name;
        long kl = query_text(k, plain, namebuf, sizeof namebuf, &name);
        if (kl == SL_HTTP_BAD_ESCAPE)
            return check_fail(c, 400, NULL, NULL, "bad %%-escape in a parameter name");
        unsigned bit = kl >= 0 ? field_bit(name, (size_t)kl) : 0;
        if (!(bit & allowed)) {
            /* Quote the raw name, cut: it is client input. */
            char shown[25];
            size_t n = k.len < 24 ? k.len : 24;
            memcpy(shown, k.ptr, n);
            shown[n] = '\0';
            return check_fail(c, 400, NULL, shown, "unknown parameter '%s'", shown);
        }
        const char *f = field_name(bit);
        if (r.given & bit)
            return check_fail(c, 400, NULL, f, "%s is given twice", f);
        r.given |= bit;
        const char *val;
        long vl = query_text(v, plain, valbuf, sizeof valbuf, &val);
        if (vl == SL_HTTP_BAD_ESCAPE)
            return check_fail(c, 400, NULL, f, "bad %%-escape in %s", f);
        if (vl == SL_HTTP_TOO_LONG && (bit == F_LIMIT || bit == F_BURST || bit == F_COST ||
                                       bit == F_TOKENS || bit == F_TTL_MS || bit == F_RESET_DAY))
            return check_fail(c, 400, NULL, f, "%s must be an integer", f);
        if (vl == SL_HTTP_TOO_LONG && bit == F_PERIOD)
            return take_period_text(c, &r, NULL, "", 0); /* "not a duration" */
        if (vl == SL_HTTP_TOO_LONG)
            return check_fail(c, 400, NULL, f, "%s is longer than %zu bytes", f,
                              bit == F_KEY ? key_max(c) : (size_t)SL_HTTP_NAME_MAX);
        size_t n = (size_t)vl;
        int rc;
        switch (bit) {
        case F_LIMIT:
        case F_BURST:
        case F_COST:
        case F_TOKENS:
        case F_TTL_MS:
        case F_RESET_DAY: {
            int64_t x;
            if (!sl_parse_i64(val, n, SL_INT_MINUS, &x))
                return check_fail(c, 400, NULL, f, "%s must be an integer", f);
            rc = take_int(&r, bit, x);
            break;
        }
        case F_PERIOD:
            rc = take_period_text(c, &r, NULL, val, n);
            break;
        case F_UTC_OFFSET:
            rc = take_utc_offset_text(c, &r, NULL, val, n);
            break;
        default:
            rc = take_string(c, &r, bit, NULL, val, n);
            break;
        }
        if (rc < 0)
            return -1;
    }
    *r_ = r;
    return 0;
}

int sl_http_check_from_query(sl_http_check *c, const char *query, size_t len)
{
    check_begin(c);
    raw r;
    raw_init(&r);
    unsigned all = F_KEY | F_LIMIT | F_PERIOD | F_BURST | F_COST | F_ALGORITHM | F_POLICY | F_TIER |
                   F_UTC_OFFSET | F_TOKENS | F_TTL_MS | F_RESET_DAY;
    if (take_query(c, &r, query, len, all) < 0)
        return -1;
    return finish_item(c, &r, NULL, true);
}

int sl_http_check_auth(sl_http_check *c, const char *policy, size_t policy_len,
                       const char *key, size_t keylen, const char *key_field,
                       const char *query, size_t qlen)
{
    check_begin(c);
    raw r;
    raw_init(&r);
    if (take_query(c, &r, query, qlen, F_COST | F_TOKENS | F_TIER) < 0)
        return -1;
    if (keylen == 0)
        return check_fail(c, 401, NULL, key_field, "missing %s header", key_field);
    if (keylen > key_max(c))
        return check_fail(c, 400, NULL, key_field, "%s is longer than %zu bytes", key_field,
                          key_max(c));
    if (take_string(c, &r, F_POLICY, NULL, policy, policy_len) < 0 ||
        take_string(c, &r, F_KEY, NULL, key, keylen) < 0)
        return -1;
    r.given |= F_POLICY | F_KEY;
    return finish_item(c, &r, NULL, true);
}

/* ------------------------------------------------------------------------ */
/* The JSON body                                                            */
/* ------------------------------------------------------------------------ */

/*
 * Checks what cJSON would not: the nesting depth (before cJSON recurses into
 * it), "\u0000" in a string (cJSON would cut the string there, silently
 * changing a key), and numbers with leading zeros (JSON forbids them, and
 * cJSON would read 012 as 12, where other parsers read octal 10 or refuse
 * it). Brackets inside strings do not count. A number's error names the
 * member it is the value of: the last string before a colon.
 */
static int prescan(sl_http_check *c, const char *s, size_t n)
{
    int depth = 0;
    bool in_str = false;
    char prev = 0;                  /* the last byte outside strings, blanks aside */
    size_t str_at = 0, str_end = 0; /* the last string's bytes, quotes excluded */
    size_t key_at = 0, key_len = 0;
    bool have_key = false;
    /* Inside the top object's "limits" array (its depth, 0 outside it), the
     * entry a number is in, so that its error names it as the decoder's do:
     * "limits[1].limit". */
    int limits_depth = 0, entry = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!in_str && (ch == '-' || (ch >= '0' && ch <= '9')) &&
            (prev == 0 || prev == ':' || prev == '[' || prev == ',')) {
            size_t d = i + (ch == '-');
            if (d + 1 < n && s[d] == '0' && s[d + 1] >= '0' && s[d + 1] <= '9') {
                char name[25];
                size_t len = key_len < 24 ? key_len : 24;
                memcpy(name, s + key_at, len);
                name[len] = '\0';
                char prefix[24] = "";
                if (limits_depth && depth > limits_depth)
                    snprintf(prefix, sizeof prefix, "limits[%d].", entry);
                if (!have_key)
                    return check_fail(c, 400, NULL, NULL,
                                      "numbers must not have leading zeros (at byte %zu)", i);
                return check_fail(c, 400, prefix, name,
                                  "%s must not have leading zeros (at byte %zu)", name, i);
            }
        }
        if (!in_str && ch != ' ' && ch != '\t' && ch != '\r' && ch != '\n') {
            if (ch == ':' && prev == '"') {
                key_at = str_at;
                key_len = str_end - str_at;
                have_key = true;
            }
            prev = ch;
        }
        if (in_str) {
            if (ch == '\\') {
                if (n - i >= 6 && !memcmp(s + i + 1, "u0000", 5))
                    return check_fail(c, 400, NULL, NULL, "strings must not contain \\u0000");
                i++; /* the escaped byte cannot end the string */
            } else if (ch == '"') {
                in_str = false;
                str_end = i;
            } else if ((unsigned char)ch < 0x20) {
                /* JSON forbids raw control bytes in strings; a NUL would cut one. */
                return check_fail(c, 400, NULL, NULL, "control byte in a string (at byte %zu)",
                                  i);
            }
        } else if (ch == '"') {
            in_str = true;
            str_at = i + 1;
        } else if (ch == '{' || ch == '[') {
            if (++depth > SL_HTTP_JSON_MAX_DEPTH)
                return check_fail(c, 400, NULL, NULL, "body is nested too deeply");
            if (ch == '[' && depth == 2 && have_key && key_len == 6 &&
                memcmp(s + key_at, "limits", 6) == 0) {
                limits_depth = depth;
                entry = 0;
            }
        } else if (ch == ',' && depth == limits_depth) {
            entry++;
        } else if (ch == '}' || ch == ']') {
            if (depth == limits_depth)
                limits_depth = 0;
            depth--;
        }
    }
    return 0;
}

/* A JSON number that is an integer a double holds exactly (|v| <= 2^53). */
static int json_int(const cJSON *item, int64_t *out)
{
    if (!cJSON_IsNumber(item))
        return -1;
    double v = item->valuedouble;
    /* The range check comes first: converting a double outside int64 is
     * undefined. Within it, the conversion truncates, so a fraction shows. */
    if (!(v >= -9007199254740992.0 && v <= 9007199254740992.0) || v != (double)(int64_t)v)
        return -1;
    *out = (int64_t)v;
    return 0;
}

/* The fields of one JSON object into r. top: the request object (policy,
 * tier and limits allowed there). */
static int take_object(sl_http_check *c, raw *r, const cJSON *obj, const char *prefix,
                       bool top)
{
    for (const cJSON *m = obj->child; m; m = m->next) {
        const char *mname = m->string ? m->string : "";
        unsigned bit = field_bit(mname, strlen(mname));
        if (bit == 0 ||
            (!top && (bit == F_POLICY || bit == F_TIER || bit == F_LIMITS || bit == F_TOKENS ||
                      bit == F_TTL_MS))) {
            char shown[25];
            snprintf(shown, sizeof shown, "%s", mname);
            return check_fail(c, 400, prefix, shown, "unknown field '%s'", shown);
        }
        const char *f = field_name(bit);
        if (r->given & bit)
            return check_fail(c, 400, prefix, f, "%s is given twice", f);
        r->given |= bit;
        int rc = 0;
        switch (bit) {
        case F_LIMITS:
            break; /* the caller's */
        case F_LIMIT:
        case F_BURST:
        case F_COST:
        case F_TOKENS:
        case F_TTL_MS:
        case F_RESET_DAY: {
            int64_t x;
            if (json_int(m, &x) < 0)
                return check_fail(c, 400, prefix, f, "%s must be an integer", f);
            rc = take_int(r, bit, x);
            break;
        }
        case F_PERIOD:
            if (cJSON_IsString(m)) {
                rc = take_period_text(c, r, prefix, m->valuestring, strlen(m->valuestring));
            } else {
                int64_t x;
                if (json_int(m, &x) < 0)
                    return check_fail(c, 400, prefix, f,
                                      "period must be an integer of seconds or a duration "
                                      "string such as \"500ms\"");
                if (x < 1 || x > SL_SPAN_MAX / NS_PER_S)
                    return check_fail(c, 400, prefix, f,
                                      "period must be a positive duration of at most 73 years");
                r->period_ns = x * NS_PER_S;
            }
            break;
        case F_UTC_OFFSET:
            if (!cJSON_IsString(m))
                return check_fail(c, 400, prefix, f, "utc_offset must be a string such as "
                                                     "\"-05:00\"");
            rc = take_utc_offset_text(c, r, prefix, m->valuestring, strlen(m->valuestring));
            break;
        default:
            if (!cJSON_IsString(m))
                return check_fail(c, 400, prefix, f, "%s must be a string", f);
            rc = take_string(c, r, bit, prefix, m->valuestring, strlen(m->valuestring));
            break;
        }
        if (rc < 0)
            return -1;
    }
    return 0;
}

static int decode_tree(sl_http_check *c, const cJSON *root)
{
    if (!cJSON_IsObject(root))
        return check_fail(c, 400, NULL, NULL, "body must be a JSON object");
    raw top;
    raw_init(&top);
    if (take_object(c, &top, root, NULL, true) < 0)
        return -1;
    if (!(top.given & F_LIMITS))
        return finish_item(c, &top, NULL, true);

    unsigned others = top.given & ~(unsigned)F_LIMITS;
    if (others) {
        unsigned bit = others & -others; /* the lowest: a stable choice */
        return check_fail(c, 400, NULL, field_name(bit),
                          "limits cannot be combined with %s: give it in each entry",
                          field_name(bit));
    }
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "limits");
    if (!cJSON_IsArray(arr))
        return check_fail(c, 400, NULL, "limits", "limits must be an array of objects");
    int count = cJSON_GetArraySize(arr);
    if (count == 0)
        return check_fail(c, 400, NULL, "limits", "limits must not be empty");
    if (count > SL_HTTP_CHECK_MAX_LIMITS)
        return check_fail(c, 400, NULL, "limits", "limits has %d entries: at most %d", count,
                          SL_HTTP_CHECK_MAX_LIMITS);
    c->multi = true;
    int i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
        char prefix[24];
        snprintf(prefix, sizeof prefix, "limits[%d].", i);
        if (!cJSON_IsObject(e)) {
            snprintf(prefix, sizeof prefix, "limits[%d]", i);
            return check_fail(c, 400, NULL, prefix, "%s must be an object", prefix);
        }
        raw r;
        raw_init(&r);
        if (take_object(c, &r, e, prefix, false) < 0 || finish_item(c, &r, prefix, false) < 0)
            return -1;
    }
    return 0;
}

int sl_http_check_from_json(sl_http_check *c, const char *body, size_t len)
{
    check_begin(c);
    if (len > SL_HTTP_MAX_JSON)
        return check_fail(c, 413, NULL, NULL, "body is larger than %d bytes", SL_HTTP_MAX_JSON);
    if (prescan(c, body, len) < 0)
        return -1;
    const char *end = NULL;
    cJSON *root = NULL;
    if (len) {
        /* One parse at a time: cJSON writes a global error position on
         * every parse (proto/cjson_parse.h). */
        root = sl_cjson_parse(body, len, &end);
    }
    if (!root) {
        if (len == 0)
            return check_fail(c, 400, NULL, NULL, "body is empty: send a JSON object");
        size_t at = end && end >= body && end <= body + len ? (size_t)(end - body) : 0;
        return check_fail(c, 400, NULL, NULL, "body is not valid JSON (at byte %zu)", at);
    }
    /* cJSON stops after the value: anything but whitespace after it is an error. */
    size_t at = end ? (size_t)(end - body) : len;
    while (at < len && (body[at] == ' ' || body[at] == '\t' || body[at] == '\r' ||
                        body[at] == '\n'))
        at++;
    int rc = at < len ? check_fail(c, 400, NULL, NULL,
                                   "body is not valid JSON: bytes after the value (at byte %zu)",
                                   at)
                      : decode_tree(c, root);
    cJSON_Delete(root);
    return rc;
}
