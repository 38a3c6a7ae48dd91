/*
 * headers.c: HTTP responses: a decision with its rate limit headers and JSON
 * body, an error, and any other small response. See http.h for the contract.
 *
 * Everything is appended to the caller's sl_buf (common/buf.h), which owns the
 * bytes; a body is first composed in a bounded local array so that its
 * Content-Length is known before the head is written.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/decimal.h"
#include "common/units.h"
#include "proto/http.h"

/* The largest RFC 8941 Integer: 15 decimal digits. */
#define SF_INT_MAX INT64_C(999999999999999)
#define NS_PER_S INT64_C(1000000000)
#define NS_PER_MS INT64_C(1000000)

const char *sl_http_reason(int status)
{
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large"; /* RFC 9110's name for it */
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

static int64_t sf_clamp(int64_t v)
{
    return v < 0 ? 0 : v > SF_INT_MAX ? SF_INT_MAX : v;
}

/* A bounded text under construction: `over` is set instead of writing past
 * the end, and the caller checks it once. What fits of the write that
 * overflows is still written (up to cap), so that an error message can be
 * cut at a word rather than lost (sl_http_write_error). */
typedef struct text {
    char *p;
    size_t len, cap;
    bool over;
} text;

static inline void t_mem(text *t, const char *s, size_t n)
{
    if (t->over)
        return;
    if (n > t->cap - t->len) {
        memcpy(t->p + t->len, s, t->cap - t->len);
        t->len = t->cap;
        t->over = true;
        return;
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
}

/* A string literal, its length known at compile time (no strlen): most of a
 * response is literals, and with a constant length the copy is a few moves. */
#define T_LIT(t, lit) t_mem((t), "" lit, sizeof(lit) - 1)

static void t_str(text *t, const char *s)
{
    t_mem(t, s, strlen(s));
}

/* Decimal digits, counted first and then written backwards straight into
 * the text (common/decimal.h). */
static void t_u64(text *t, uint64_t u)
{
    size_t n = sl_dec_len(u);
    if (t->over || n > t->cap - t->len) {
        t->over = true;
        return;
    }
    sl_dec_put(t->p + t->len + n, u);
    t->len += n;
}

static void t_i64(text *t, int64_t v)
{
    if (v < 0) {
        T_LIT(t, "-");
        t_u64(t, 0 - (uint64_t)v);
    } else {
        t_u64(t, (uint64_t)v);
    }
}

static void t_bool(text *t, bool v)
{
    if (v)
        T_LIT(t, "true");
    else
        T_LIT(t, "false");
}

/* RFC 8941 sf-string: DQUOTE, '"' and '\' escaped with '\', DQUOTE. Only
 * 0x20-0x7E may appear: other bytes are written as '?'. Runs of bytes that
 * need nothing are copied whole. */
static void t_sf_string(text *t, const char *s)
{
    T_LIT(t, "\"");
    for (;;) {
        size_t n = 0;
        while (s[n] >= 0x20 && s[n] <= 0x7e && s[n] != '"' && s[n] != '\\')
            n++;
        t_mem(t, s, n);
        s += n;
        unsigned char c = (unsigned char)*s;
        if (c == '\0')
            break;
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            t_mem(t, esc, 2);
        } else {
            T_LIT(t, "?");
        }
        s++;
    }
    T_LIT(t, "\"");
}

/* A JSON string's contents: '"' and '\' escaped, control bytes and bytes
 * outside ASCII as \u00XX (so that the body is valid JSON whatever bytes a
 * message quotes). */
static void t_json_escaped(text *t, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    for (;;) {
        size_t n = 0;
        while (s[n] >= 0x20 && s[n] < 0x7f && s[n] != '"' && s[n] != '\\')
            n++;
        t_mem(t, s, n);
        s += n;
        unsigned char c = (unsigned char)*s;
        if (c == '\0')
            break;
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            t_mem(t, esc, 2);
        } else {
            char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            t_mem(t, esc, 6);
        }
        s++;
    }
}

/* RateLimit-Policy's q and w for a limit: w is the period in whole seconds,
 * rounded up; when the period is not whole seconds, q is the limit scaled to
 * w (rounded down, so that a client pacing itself by q never exceeds it). */
static void policy_q_w(const sl_limit *l, int64_t *q, int64_t *w)
{
    *w = sl_ns_ceil_s(l->period_ns);
    if (*w < 1)
        *w = 1;
    if (l->period_ns % NS_PER_S == 0) {
        *q = sf_clamp(l->limit);
        return;
    }
    __int128 scaled = (__int128)l->limit * *w * NS_PER_S / (l->period_ns > 0 ? l->period_ns : 1);
    *q = scaled > SF_INT_MAX ? SF_INT_MAX : sf_clamp((int64_t)scaled);
    *w = sf_clamp(*w);
}

/* The retry_after_ms a body shows for a decision. */
static int64_t retry_ms(const sl_decision *d, bool shown_allowed)
{
    if (shown_allowed)
        return 0;
    if (d->retry_after_ns == SL_NEVER)
        return -1;
    return sl_ns_ceil_ms(d->retry_after_ns);
}

/* The fields of one decision, without braces. A shadow answer (dry run)
 * shows no wait: neither retry_after_ms (shown_allowed) nor delay_ms. */
static void t_decision_fields(text *t, const sl_http_limit_report *it, bool shown_allowed,
                              bool shadow)
{
    const sl_decision *d = it->decision;
    T_LIT(t, "\"limit\":");
    t_i64(t, d->limit);
    T_LIT(t, ",\"remaining\":");
    t_i64(t, d->remaining);
    T_LIT(t, ",\"retry_after_ms\":");
    t_i64(t, retry_ms(d, shown_allowed));
    T_LIT(t, ",\"reset_after_ms\":");
    t_i64(t, sl_ns_ceil_ms(d->reset_after_ns));
    if (it->limit->algorithm == SL_LEAKY_BUCKET) {
        T_LIT(t, ",\"delay_ms\":");
        t_i64(t, shadow ? 0 : sl_ns_ceil_ms(d->delay_ns));
    }
}

/* Status line, Content-Type (ctype_len bytes; none when ctype is NULL),
 * Content-Length, Connection. The two statuses of a decision are literals. */
static void t_head_start(text *t, int status, const char *ctype, size_t ctype_len,
                         size_t body_len, bool keep_alive)
{
    if (status == 200) {
        T_LIT(t, "HTTP/1.1 200 OK");
    } else if (status == 429) {
        T_LIT(t, "HTTP/1.1 429 Too Many Requests");
    } else {
        T_LIT(t, "HTTP/1.1 ");
        t_i64(t, status);
        T_LIT(t, " ");
        t_str(t, sl_http_reason(status));
    }
    if (ctype) {
        T_LIT(t, "\r\nContent-Type: ");
        t_mem(t, ctype, ctype_len);
    }
    T_LIT(t, "\r\nContent-Length: ");
    t_u64(t, body_len);
    if (keep_alive)
        T_LIT(t, "\r\nConnection: keep-alive\r\n");
    else
        T_LIT(t, "\r\nConnection: close\r\n");
}

/* A name in RateLimit and RateLimit-Policy: an sf-string. An ad-hoc limit
 * (NULL) is "default" alone, and "limitI" as item I of several: the draft's
 * lists identify each item by its name, so two items must never share one. */
static void t_name(text *t, const char *name, size_t i, size_t n)
{
    if (name) {
        t_sf_string(t, name);
    } else if (n == 1) {
        T_LIT(t, "\"default\"");
    } else {
        T_LIT(t, "\"limit");
        t_u64(t, i);
        T_LIT(t, "\"");
    }
}

/* A wait for ordering: SL_NEVER above every finite one. */
static int64_t wait_rank(const sl_decision *d)
{
    return d->retry_after_ns == SL_NEVER ? INT64_MAX : d->retry_after_ns;
}

/* Does item i admit fewer more requests than item b: remaining_i / cost_i
 * < remaining_b / cost_b, exactly (no division), with a cost of 0 after
 * every other? */
static bool fewer_left(const sl_decision *const *d, const int64_t *cost, size_t i, size_t b)
{
    __int128 ri = d[i]->remaining < 0 ? 0 : d[i]->remaining;
    __int128 rb = d[b]->remaining < 0 ? 0 : d[b]->remaining;
    int64_t ci = cost ? cost[i] : 1, cb = cost ? cost[b] : 1;
    if (ci <= 0 || cb <= 0)
        return ci <= 0 && cb <= 0 ? ri < rb : ci > 0;
    return ri * cb < rb * ci;
}

size_t sl_http_binding(const sl_decision *const *d, const int64_t *cost, size_t n,
                       int rejected_by)
{
    size_t b = 0;
    if (rejected_by >= 0 && (size_t)rejected_by < n) {
        b = (size_t)rejected_by;
        for (size_t i = b + 1; i < n; i++)
            if (!d[i]->allowed && wait_rank(d[i]) > wait_rank(d[b]))
                b = i;
    } else {
        for (size_t i = 1; i < n; i++)
            if (fewer_left(d, cost, i, b))
                b = i;
    }
    return b;
}

/* The rate limit fields of a decision's head, each line ending in CRLF:
 * X-RateLimit-*, Retry-After (denials only), RateLimit-Policy and RateLimit
 * (one item per limit). pd is the primary item's decision. */
static void t_rate_fields(text *h, const sl_http_limit_report *items, size_t n,
                          const sl_decision *pd, bool shown)
{
    T_LIT(h, "X-RateLimit-Limit: ");
    t_i64(h, pd->limit);
    T_LIT(h, "\r\nX-RateLimit-Remaining: ");
    t_i64(h, pd->remaining < 0 ? 0 : pd->remaining);
    T_LIT(h, "\r\nX-RateLimit-Reset: ");
    t_i64(h, sl_ns_ceil_s(pd->reset_after_ns));
    T_LIT(h, "\r\n");
    if (!shown && pd->retry_after_ns != SL_NEVER) {
        /* delay-seconds, never 0 for a denial: a client told "0" would retry
         * at once and be denied again. */
        int64_t s = sl_ns_ceil_s(pd->retry_after_ns);
        T_LIT(h, "Retry-After: ");
        t_i64(h, s < 1 ? 1 : s);
        T_LIT(h, "\r\n");
    }
    T_LIT(h, "RateLimit-Policy: ");
    for (size_t i = 0; i < n; i++) {
        int64_t q, w;
        policy_q_w(items[i].limit, &q, &w);
        if (i)
            T_LIT(h, ", ");
        t_name(h, items[i].name, i, n);
        T_LIT(h, ";q=");
        t_i64(h, q);
        T_LIT(h, ";w=");
        t_i64(h, w);
    }
    T_LIT(h, "\r\nRateLimit: ");
    for (size_t i = 0; i < n; i++) {
        const sl_decision *d = items[i].decision;
        if (i)
            T_LIT(h, ", ");
        t_name(h, items[i].name, i, n);
        T_LIT(h, ";r=");
        t_i64(h, sf_clamp(d->remaining));
        T_LIT(h, ";t=");
        t_i64(h, sf_clamp(sl_ns_ceil_s(d->reset_after_ns)));
    }
    T_LIT(h, "\r\n");
}

/* Room for one decision response: the head holds at most 8 names of at most
 * SL_HTTP_REPORT_NAME_MAX bytes, twice that escaped, in each of two fields
 * (longer names are refused); the body at most 9 decisions of about 200
 * bytes. */
#define HEAD_ROOM 8192
#define BODY_ROOM (4096 + SL_HTTP_BODY_EXTRA_MAX)
#define JSON_TYPE "application/json"

int sl_http_write_decision(sl_buf *out, const sl_http_decision_opts *o,
                           const sl_http_limit_report *items, size_t n)
{
    if (!out || !o || !items || n == 0 || n > SL_TAKE_MANY_MAX)
        return -1;
    bool single = n == 1 && !o->multi;
    if ((!single || o->scoped) && (o->rejected_by < -1 || o->rejected_by >= (int)n))
        return -1;
    if (o->scoped && (o->multi || o->nkey < 1 || o->nkey > n))
        return -1;
    if (o->extra_len > SL_HTTP_BODY_EXTRA_MAX || (o->extra_len && !o->extra))
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!items[i].limit || !items[i].decision ||
            (items[i].name && strlen(items[i].name) > SL_HTTP_REPORT_NAME_MAX))
            return -1;

    /* The primary item: the one that binds. */
    size_t primary = 0;
    bool real_allowed;
    if (single) {
        real_allowed = items[0].decision->allowed;
    } else {
        const sl_decision *ds[SL_TAKE_MANY_MAX];
        for (size_t i = 0; i < n; i++)
            ds[i] = items[i].decision;
        real_allowed = o->rejected_by < 0;
        primary = sl_http_binding(ds, o->costs, n, o->rejected_by);
    }
    const sl_http_limit_report *p = &items[primary];
    const sl_decision *pd = p->decision;
    bool shown = o->shadow || real_allowed;
    int status = o->status ? o->status : shown ? 200 : 429;
    if (status < 100 || status > 999)
        return -1;

    /* The body. */
    char bodybuf[BODY_ROOM];
    text body = {bodybuf, 0, sizeof bodybuf, false};
    T_LIT(&body, "{\"allowed\":");
    t_bool(&body, shown);
    if (o->multi || o->scoped) {
        /* A shadow answer says go in every field a client acts on. */
        T_LIT(&body, ",\"rejected_by\":");
        t_i64(&body, o->shadow ? -1 : o->rejected_by);
    }
    if (o->scoped) {
        if (primary < o->nkey)
            T_LIT(&body, ",\"scope\":\"key\"");
        else
            T_LIT(&body, ",\"scope\":\"global\"");
        T_LIT(&body, ",\"binding\":\"");
        t_json_escaped(&body, p->name ? p->name : "default");
        T_LIT(&body, "\"");
    }
    T_LIT(&body, ",");
    t_decision_fields(&body, p, shown, o->shadow);
    if (o->shadow) {
        T_LIT(&body, ",\"shadow\":true,\"would_allow\":");
        t_bool(&body, real_allowed);
        T_LIT(&body, ",\"would_retry_after_ms\":");
        t_i64(&body, retry_ms(pd, real_allowed));
    }
    if (o->multi) {
        T_LIT(&body, ",\"results\":[");
        for (size_t i = 0; i < n; i++) {
            if (i)
                T_LIT(&body, ",");
            T_LIT(&body, "{\"allowed\":");
            t_bool(&body, items[i].decision->allowed);
            T_LIT(&body, ",");
            t_decision_fields(&body, &items[i], items[i].decision->allowed, false);
            T_LIT(&body, "}");
        }
        T_LIT(&body, "]");
    }
    if (o->extra_len)
        t_mem(&body, o->extra, o->extra_len);
    T_LIT(&body, "}");

    /* The head. */
    char headbuf[HEAD_ROOM + BODY_ROOM];
    text h = {headbuf, 0, sizeof headbuf, false};
    t_head_start(&h, status, JSON_TYPE, sizeof JSON_TYPE - 1, body.len, o->keep_alive);
    /* A dry run tells the client nothing about its rate: no field at all. */
    if (!o->shadow)
        t_rate_fields(&h, items, n, pd, shown);
    T_LIT(&h, "\r\n");
    if (!o->head)
        t_mem(&h, body.p, body.len); /* one append for the whole response */

    if (h.over || body.over) { /* cannot happen with the bounds above */
        out->failed = 1;
        return -1;
    }
    return sl_buf_add(out, h.p, h.len) < 0 ? -1 : 0;
}

int sl_http_write_check(sl_buf *out, bool keep_alive, const char *name, const sl_limit *l,
                        const sl_decision *d, bool shadow)
{
    sl_http_decision_opts o = {.status = 0, .keep_alive = keep_alive, .shadow = shadow,
                               .rejected_by = -1};
    sl_http_limit_report it = {name, l, d};
    return sl_http_write_decision(out, &o, &it, 1);
}

int sl_http_write_response(sl_buf *out, int status, bool keep_alive,
                           const char *content_type, const char *extra, const void *body,
                           size_t body_len, bool head)
{
    if (status < 100 || status > 999 || (body_len && !body))
        return -1;
    char headbuf[1024];
    text h = {headbuf, 0, sizeof headbuf, false};
    t_head_start(&h, status, content_type, content_type ? strlen(content_type) : 0, body_len,
                 keep_alive);
    if (h.over) {
        out->failed = 1;
        return -1;
    }
    if (sl_buf_add(out, h.p, h.len) < 0)
        return -1;
    if (extra && sl_buf_add(out, extra, strlen(extra)) < 0)
        return -1;
    if (sl_buf_add(out, "\r\n", 2) < 0)
        return -1;
    if (!head && body_len && sl_buf_add(out, body, body_len) < 0)
        return -1;
    return 0;
}

int sl_http_write_error(sl_buf *out, int status, bool keep_alive, const char *message,
                        const char *field)
{
    /* Messages are short (an errbuf of http.h, a fixed string); a longer
     * one is cut rather than refused, so that an error always goes out. */
    char buf[1024];
    text b = {buf, 0, sizeof buf - 32, false};
    T_LIT(&b, "{\"error\":\"");
    t_json_escaped(&b, message ? message : "");
    if (field) {
        T_LIT(&b, "\",\"field\":\"");
        t_json_escaped(&b, field);
    }
    if (b.over) {
        /* Cut back to a whole escape and close the JSON. */
        b.over = false;
        b.cap = sizeof buf;
        b.len = sizeof buf - 48;
        while (b.len > 10 && buf[b.len - 1] != ' ')
            b.len--;
        /* b.len is now just after a space (never inside an escape) or
         * just after {"error":" */
        T_LIT(&b, "...");
    }
    T_LIT(&b, "\"}");
    return sl_http_write_response(out, status, keep_alive, "application/json", NULL, b.p, b.len,
                                  false);
}
