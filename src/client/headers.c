/*
 * headers.c: what an HTTP response says about rate limits, read by the
 * rules of tests/vectors/README.md into a caller-owned sl_rl_headers
 * (sluice_client.h). The RFC 9651 List reader is sf.c; this file finds the
 * fields, keeps the members that are usable, and reads the X-RateLimit-*
 * family and Retry-After, dates included.
 *
 * Numbers are read digit by digit with their bounds checked as they grow;
 * the sums that can pass 64 bits (a Retry-After of 19 digits is more than
 * 2^63 milliseconds) are done in 128 bits and saturate.
 */
#include <string.h>

#include "client/client.h"
#include "client/sf.h"

typedef __int128 sl_i128;

/* Does the field line's name equal `lower` (lowercase ASCII), case aside? */
static bool sl_rl_name_is(const sl_header_line *h, const char *lower)
{
    size_t n = strlen(lower);
    if (h->name == NULL || h->name_len != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)h->name[i];
        if (c >= 'A' && c <= 'Z')
            c = (unsigned char)(c - 'A' + 'a');
        if (c != (unsigned char)lower[i])
            return false;
    }
    return true;
}

/* A value as a slice; an empty one when the line has none. */
static void sl_rl_value(const sl_header_line *h, const char **p, size_t *n)
{
    *p = h->value != NULL ? h->value : "";
    *n = h->value != NULL ? h->value_len : 0;
}

/* The first line of a single field, or NULL when absent. */
static const sl_header_line *sl_rl_first(const sl_header_line *lines, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (sl_rl_name_is(&lines[i], name))
            return &lines[i];
    return NULL;
}

/* Drops the spaces and tabs around p[0 .. *n). */
static const char *sl_rl_trim(const char *p, size_t *n)
{
    while (*n > 0 && (p[0] == ' ' || p[0] == '\t')) {
        p++;
        (*n)--;
    }
    while (*n > 0 && (p[*n - 1] == ' ' || p[*n - 1] == '\t'))
        (*n)--;
    return p;
}

static bool sl_rl_digit(char c) { return c >= '0' && c <= '9'; }

/* ---- the two list fields ---- */

/* Joins the lines of list field `name` with ", " into buf (SL_RL_FIELD_MAX
 * bytes). Returns 1 with *len set, 0 when the field is absent, -1 when the
 * joined value is too long. */
static int sl_rl_join(const sl_header_line *lines, size_t n, const char *name, char *buf,
                      size_t *len)
{
    size_t used = 0;
    bool found = false;
    for (size_t i = 0; i < n; i++) {
        if (!sl_rl_name_is(&lines[i], name))
            continue;
        const char *v;
        size_t vn;
        sl_rl_value(&lines[i], &v, &vn);
        size_t sep = found ? 2 : 0;
        if (vn > SL_RL_FIELD_MAX || sep + vn > SL_RL_FIELD_MAX - used) {
            /* Too long already; the rest of the lines change nothing. */
            return -1;
        }
        if (sep)
            memcpy(buf + used, ", ", 2);
        if (vn)
            memcpy(buf + used + sep, v, vn);
        used += sep + vn;
        found = true;
    }
    *len = used;
    return found ? 1 : 0;
}

/* Copies a text into a buffer of cap bytes, NUL-terminated; false when it
 * does not fit. */
static bool sl_rl_copy(char *dst, size_t cap, size_t *dst_len, const char *src, size_t n)
{
    if (n >= cap)
        return false;
    if (n)
        memcpy(dst, src, n);
    dst[n] = '\0';
    *dst_len = n;
    return true;
}

static bool sl_rl_is_name(const sl_sf_item *it)
{
    return it->type == SL_SF_STRING || it->type == SL_SF_TOKEN;
}

enum { SL_KEY_Q, SL_KEY_W, SL_KEY_QU, SL_KEY_PK, SL_KEY_R, SL_KEY_T };
static const char *const sl_rl_keys[] = {"q", "w", "qu", "pk", "r", "t"};
#define SL_RL_NKEYS (sizeof sl_rl_keys / sizeof sl_rl_keys[0])

/* A partition, when present, must be a Byte Sequence that fits. */
static bool sl_rl_partition(const sl_sf_member *m, char *dst, size_t *len, bool *has)
{
    *has = false;
    if (!m->has[SL_KEY_PK])
        return true;
    const sl_sf_item *pk = &m->param[SL_KEY_PK];
    if (pk->type != SL_SF_BYTES || !sl_rl_copy(dst, SL_RL_PARTITION_MAX, len, pk->text, pk->len))
        return false;
    *has = true;
    return true;
}

static void sl_rl_on_policy(void *ctx, const sl_sf_member *m)
{
    sl_rl_headers *out = ctx;
    if (m->inner_list || out->policy_count == SL_RL_MEMBERS_MAX) {
        out->policies_skipped++;
        return;
    }
    sl_rl_policy p;
    memset(&p, 0, sizeof p);
    const sl_sf_item *quota;
    if (m->item.type == SL_SF_INTEGER) { /* the earlier drafts: the item is the quota */
        quota = &m->item;
    } else {
        if (!sl_rl_is_name(&m->item) ||
            !sl_rl_copy(p.name, SL_RL_NAME_MAX, &p.name_len, m->item.text, m->item.len))
            goto skip;
        p.has_name = true;
        if (!m->has[SL_KEY_Q])
            goto skip;
        quota = &m->param[SL_KEY_Q];
    }
    if (quota->type != SL_SF_INTEGER || quota->integer < 0)
        goto skip;
    p.quota = quota->integer;
    if (m->has[SL_KEY_W]) {
        const sl_sf_item *w = &m->param[SL_KEY_W];
        if (w->type != SL_SF_INTEGER || w->integer <= 0)
            goto skip;
        p.has_window = true;
        p.window_s = w->integer;
    }
    if (m->has[SL_KEY_QU]) {
        const sl_sf_item *u = &m->param[SL_KEY_QU];
        if (!sl_rl_is_name(u) || !sl_rl_copy(p.unit, SL_RL_UNIT_MAX, &p.unit_len, u->text, u->len))
            goto skip;
        p.has_unit = true;
    }
    if (!sl_rl_partition(m, p.partition, &p.partition_len, &p.has_partition))
        goto skip;
    out->policies[out->policy_count++] = p;
    return;
skip:
    out->policies_skipped++;
}

static void sl_rl_on_limit(void *ctx, const sl_sf_member *m)
{
    sl_rl_headers *out = ctx;
    if (m->inner_list || out->limit_count == SL_RL_MEMBERS_MAX) {
        out->limits_skipped++;
        return;
    }
    sl_rl_limit l;
    memset(&l, 0, sizeof l);
    const sl_sf_item *r = &m->param[SL_KEY_R];
    if (!sl_rl_is_name(&m->item) ||
        !sl_rl_copy(l.name, SL_RL_NAME_MAX, &l.name_len, m->item.text, m->item.len) ||
        !m->has[SL_KEY_R] || r->type != SL_SF_INTEGER || r->integer < 0)
        goto skip;
    l.remaining = r->integer;
    if (m->has[SL_KEY_T]) {
        const sl_sf_item *t = &m->param[SL_KEY_T];
        if (t->type != SL_SF_INTEGER || t->integer < 0)
            goto skip;
        l.has_reset = true;
        l.reset_ms = t->integer * 1000; /* at most 15 digits: fits */
    }
    if (!sl_rl_partition(m, l.partition, &l.partition_len, &l.has_partition))
        goto skip;
    out->limits[out->limit_count++] = l;
    return;
skip:
    out->limits_skipped++;
}

/* Reads RateLimit-Policy (`policies`) or RateLimit; on a value that is too long or not a
 * List, drops whatever fn kept (reset) and sets the ignored bit and the
 * error. */
static void sl_rl_list_field(const sl_header_line *lines, size_t n, bool policies,
                             sl_rl_headers *out)
{
    const char *name = policies ? "ratelimit-policy" : "ratelimit";
    sl_sf_member_fn fn = policies ? sl_rl_on_policy : sl_rl_on_limit;
    char buf[SL_RL_FIELD_MAX];
    size_t len = 0;
    int got = sl_rl_join(lines, n, name, buf, &len);
    if (got == 0)
        return;
    const char *why = got < 0 ? "longer than 4096 bytes"
                              : sl_sf_parse_list(buf, len, sl_rl_keys, SL_RL_NKEYS, fn, out);
    if (why == NULL)
        return;
    if (policies) {
        out->ignored |= SL_RL_IGNORED_POLICY;
        out->policy_error = why;
        memset(out->policies, 0, sizeof out->policies);
        out->policy_count = out->policies_skipped = 0;
    } else {
        out->ignored |= SL_RL_IGNORED_RATELIMIT;
        out->limit_error = why;
        memset(out->limits, 0, sizeof out->limits);
        out->limit_count = out->limits_skipped = 0;
    }
}

/* ---- numbers ---- */

/*
 * An integer that fits 64 bits: an optional '-' and at most 20 digits.
 * With `leading`, the digits at the start (after the sign) whatever follows
 * them. False when there is none or it does not fit.
 */
static bool sl_rl_int64(const char *p, size_t n, bool leading, int64_t *out)
{
    p = sl_rl_trim(p, &n);
    bool neg = n > 0 && p[0] == '-';
    if (neg) {
        p++;
        n--;
    }
    size_t digits = 0;
    while (digits < n && sl_rl_digit(p[digits]))
        digits++;
    if (digits == 0 || (!leading && digits != n) || digits > 20)
        return false;
    unsigned __int128 v = 0;
    for (size_t i = 0; i < digits; i++)
        v = v * 10 + (unsigned)(p[i] - '0'); /* 20 digits: below 2^67 */
    if (v > (unsigned __int128)INT64_MAX + (neg ? 1 : 0))
        return false;
    *out = neg ? (int64_t)(0 - (uint64_t)v) : (int64_t)v;
    return true;
}

/*
 * A number >= 0 with an optional fraction ("12", "1.2345"), in thousandths
 * of it (milliseconds of seconds), a fraction of a thousandth rounded up.
 * Its integer part has at most 19 digits and fits 64 bits; the fraction any
 * number of digits. False when it is not such a number.
 */
static bool sl_rl_thousandths(const char *p, size_t n, sl_i128 *out)
{
    p = sl_rl_trim(p, &n);
    size_t whole = 0;
    while (whole < n && sl_rl_digit(p[whole]))
        whole++;
    if (whole == 0 || whole > 19)
        return false;
    sl_i128 w = 0;
    for (size_t i = 0; i < whole; i++)
        w = w * 10 + (p[i] - '0');
    if (w > INT64_MAX)
        return false;
    sl_i128 ms = w * 1000;
    if (whole < n) {
        if (p[whole] != '.')
            return false;
        const char *f = p + whole + 1;
        size_t fn = n - whole - 1;
        if (fn == 0)
            return false;
        bool below = false; /* a non-zero digit past the third */
        for (size_t i = 0; i < fn; i++) {
            if (!sl_rl_digit(f[i]))
                return false;
            if (i < 3)
                ms += (f[i] - '0') * (i == 0 ? 100 : i == 1 ? 10 : 1);
            else if (f[i] != '0')
                below = true;
        }
        ms += below;
    }
    *out = ms;
    return true;
}

static int64_t sl_rl_clamp(sl_i128 v)
{
    return v < 0 ? 0 : v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

/* X-RateLimit-Reset: seconds from now, or a Unix epoch in seconds
 * (>= 10^9) or in milliseconds (>= 10^12); milliseconds from now, a past
 * time 0. */
static bool sl_rl_reset_ms(const char *p, size_t n, int64_t now_ms, int64_t *out)
{
    sl_i128 th;
    if (!sl_rl_thousandths(p, n, &th))
        return false;
    const sl_i128 e12 = 1000000000000, e15 = e12 * 1000;
    if (th >= e15) /* milliseconds since the epoch, in thousandths of one */
        *out = sl_rl_clamp((th + 999) / 1000 - now_ms);
    else if (th >= e12) /* seconds since the epoch, in milliseconds */
        *out = sl_rl_clamp(th - now_ms);
    else
        *out = (int64_t)th;
    return true;
}

/* ---- HTTP-dates (RFC 9110 section 5.6.7) ---- */

static const char *const sl_rl_wkday[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
static const char *const sl_rl_weekday[] = {"Monday", "Tuesday",  "Wednesday", "Thursday",
                                            "Friday", "Saturday", "Sunday"};
static const char *const sl_rl_month[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* A cursor over a date; each match moves it past what it matched. */
typedef struct sl_rl_cursor {
    const char *p;
    size_t n;
} sl_rl_cursor;

static bool sl_rl_lit(sl_rl_cursor *c, const char *s)
{
    size_t k = strlen(s);
    if (c->n < k || memcmp(c->p, s, k) != 0)
        return false;
    c->p += k;
    c->n -= k;
    return true;
}

/* Exactly `k` digits. */
static bool sl_rl_digits(sl_rl_cursor *c, size_t k, int *out)
{
    if (c->n < k)
        return false;
    int v = 0;
    for (size_t i = 0; i < k; i++) {
        if (!sl_rl_digit(c->p[i]))
            return false;
        v = v * 10 + (c->p[i] - '0');
    }
    c->p += k;
    c->n -= k;
    *out = v;
    return true;
}

/* One of names[0 .. count), whole; its index, or -1. */
static int sl_rl_one_of(sl_rl_cursor *c, const char *const *names, int count)
{
    for (int i = 0; i < count; i++) {
        sl_rl_cursor t = *c;
        if (sl_rl_lit(&t, names[i])) {
            *c = t;
            return i;
        }
    }
    return -1;
}

static bool sl_rl_clock(sl_rl_cursor *c, int *h, int *mi, int *s)
{
    return sl_rl_digits(c, 2, h) && sl_rl_lit(c, ":") && sl_rl_digits(c, 2, mi) &&
           sl_rl_lit(c, ":") && sl_rl_digits(c, 2, s);
}

/* Days since 1970-01-01 of a proleptic Gregorian date, on integers (the
 * civil-from-days algorithm run backwards: years begin in March, so that
 * the leap day is the last of a year). */
static int64_t sl_rl_days(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int sl_rl_month_days(int y, int m)
{
    if (m == 2)
        return ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0) ? 29 : 28;
    return (m == 4 || m == 6 || m == 9 || m == 11) ? 30 : 31;
}

/* An HTTP-date in any of the three forms, as Unix milliseconds. The weekday
 * must be a weekday's name; it is not checked against the date. */
static bool sl_rl_http_date(const char *p, size_t n, int64_t *out)
{
    int y = 0, mon = -1, d = 0, h = 0, mi = 0, s = 0;
    sl_rl_cursor c = {p, n};
    bool ok = false;
    /* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
    if (sl_rl_one_of(&c, sl_rl_wkday, 7) >= 0 && sl_rl_lit(&c, ", ") && sl_rl_digits(&c, 2, &d) &&
        sl_rl_lit(&c, " ") && (mon = sl_rl_one_of(&c, sl_rl_month, 12)) >= 0 &&
        sl_rl_lit(&c, " ") && sl_rl_digits(&c, 4, &y) && sl_rl_lit(&c, " ") &&
        sl_rl_clock(&c, &h, &mi, &s) && sl_rl_lit(&c, " GMT") && c.n == 0)
        ok = true;
    if (!ok) { /* RFC 850: Sunday, 06-Nov-94 08:49:37 GMT */
        c = (sl_rl_cursor){p, n};
        if (sl_rl_one_of(&c, sl_rl_weekday, 7) >= 0 && sl_rl_lit(&c, ", ") &&
            sl_rl_digits(&c, 2, &d) && sl_rl_lit(&c, "-") &&
            (mon = sl_rl_one_of(&c, sl_rl_month, 12)) >= 0 && sl_rl_lit(&c, "-") &&
            sl_rl_digits(&c, 2, &y) && sl_rl_lit(&c, " ") && sl_rl_clock(&c, &h, &mi, &s) &&
            sl_rl_lit(&c, " GMT") && c.n == 0) {
            y += y < 70 ? 2000 : 1900;
            ok = true;
        }
    }
    if (!ok) { /* asctime: Sun Nov  6 08:49:37 1994 */
        c = (sl_rl_cursor){p, n};
        if (sl_rl_one_of(&c, sl_rl_wkday, 7) >= 0 && sl_rl_lit(&c, " ") &&
            (mon = sl_rl_one_of(&c, sl_rl_month, 12)) >= 0 && sl_rl_lit(&c, " ")) {
            /* The day is " D" or "DD". */
            sl_rl_cursor one = c;
            bool day = false;
            if (sl_rl_lit(&one, " ") && sl_rl_digits(&one, 1, &d)) {
                c = one;
                day = true;
            } else {
                day = sl_rl_digits(&c, 2, &d);
            }
            if (day && sl_rl_lit(&c, " ") && sl_rl_clock(&c, &h, &mi, &s) && sl_rl_lit(&c, " ") &&
                sl_rl_digits(&c, 4, &y) && c.n == 0)
                ok = true;
        }
    }
    if (!ok || d < 1 || d > sl_rl_month_days(y, mon + 1) || h > 23 || mi > 59 || s > 60)
        return false;
    int64_t days = sl_rl_days(y, mon + 1, d);
    *out = ((days * 24 + h) * 60 + mi) * 60000 + (int64_t)s * 1000;
    return true;
}

int sl_rl_parse_retry_after(const char *value, size_t len, int64_t now_unix_ms, int64_t *ms)
{
    if (value == NULL)
        return 0;
    const char *p = sl_rl_trim(value, &len);
    if (len > 0 && sl_rl_digit(p[0])) {
        sl_i128 th;
        if (!sl_rl_thousandths(p, len, &th))
            return 0;
        *ms = sl_rl_clamp(th);
        return 1;
    }
    int64_t at;
    if (!sl_rl_http_date(p, len, &at))
        return 0;
    *ms = sl_rl_clamp((sl_i128)at - now_unix_ms);
    return 1;
}

/* ---- the X- family ---- */

/* One family (prefix "x-ratelimit-" or "ratelimit-"): false when none of
 * its three fields is there. */
static bool sl_rl_x_family(const sl_header_line *lines, size_t n, const char *prefix,
                           int64_t now_ms, sl_rl_headers *out)
{
    char name[32];
    const sl_header_line *f[3];
    static const char *const suffix[] = {"limit", "remaining", "reset"};
    bool any = false;
    for (int i = 0; i < 3; i++) {
        strcpy(name, prefix);
        strcat(name, suffix[i]);
        f[i] = sl_rl_first(lines, n, name);
        any |= f[i] != NULL;
    }
    if (!any)
        return false;
    out->has_x = true;
    const char *v;
    size_t vn;
    if (f[0]) {
        sl_rl_value(f[0], &v, &vn);
        out->has_x_limit = vn <= SL_RL_FIELD_MAX && sl_rl_int64(v, vn, true, &out->x_limit);
        if (!out->has_x_limit)
            out->ignored |= SL_RL_IGNORED_X_LIMIT;
    }
    if (f[1]) {
        sl_rl_value(f[1], &v, &vn);
        out->has_x_remaining =
            vn <= SL_RL_FIELD_MAX && sl_rl_int64(v, vn, false, &out->x_remaining);
        if (!out->has_x_remaining)
            out->ignored |= SL_RL_IGNORED_X_REMAINING;
        else if (out->x_remaining < 0)
            out->x_remaining = 0;
    }
    if (f[2]) {
        sl_rl_value(f[2], &v, &vn);
        out->has_x_reset = vn <= SL_RL_FIELD_MAX && sl_rl_reset_ms(v, vn, now_ms, &out->x_reset_ms);
        if (!out->has_x_reset)
            out->ignored |= SL_RL_IGNORED_X_RESET;
    }
    return true;
}

void sl_rl_parse(const sl_header_line *lines, size_t n, int64_t now_unix_ms, sl_rl_headers *out)
{
    memset(out, 0, sizeof *out);
    if (lines == NULL)
        n = 0;
    sl_rl_list_field(lines, n, true, out);
    sl_rl_list_field(lines, n, false, out);
    if (!sl_rl_x_family(lines, n, "x-ratelimit-", now_unix_ms, out))
        sl_rl_x_family(lines, n, "ratelimit-", now_unix_ms, out);
    const sl_header_line *ra = sl_rl_first(lines, n, "retry-after");
    if (ra != NULL) {
        const char *v;
        size_t vn;
        sl_rl_value(ra, &v, &vn);
        out->has_retry_after = vn <= SL_RL_FIELD_MAX &&
                               sl_rl_parse_retry_after(v, vn, now_unix_ms, &out->retry_after_ms) == 1;
        if (!out->has_retry_after)
            out->ignored |= SL_RL_IGNORED_RETRY_AFTER;
    }
}

int64_t sl_rl_retry_after_ns(const sl_rl_headers *h)
{
    if (h == NULL || !h->has_retry_after || h->retry_after_ms <= 0)
        return 0;
    if (h->retry_after_ms > SL_TIME_MAX / 1000000)
        return SL_TIME_MAX;
    return h->retry_after_ms * 1000000;
}
