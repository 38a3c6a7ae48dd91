/*
 * dlog_json.c: the decision log's line (dlog_json.h). Pure: no allocation,
 * no clock, no locale; the caller's buffer, bounded by sl_dlog_line_max.
 */
#include "proto/dlog_json.h"

#include <string.h>

/* The year 9999's last millisecond: RFC 3339 has four digits of year. */
#define SL_RFC3339_MAX_MS INT64_C(253402300799999)

/* The fixed text of a line: its field names, punctuation, the time and the
 * face, and the integers at their longest (20 bytes each), with room over. */
#define SL_DLOG_FIXED 256

size_t sl_dlog_line_max(size_t policy_len, size_t key_len, size_t refused_len)
{
    /* Each string at 6 bytes a byte plus its quotes; the key's base64 too. */
    return SL_DLOG_FIXED + (6 * policy_len + 2) + (6 * key_len + 2) +
           (4 * ((key_len + 2) / 3) + 16) + (6 * refused_len + 2);
}

/* The length of the well-formed UTF-8 sequence at s[0 .. n) (1 to 4), or
 * 0 when none begins there (RFC 3629's table of well-formed sequences). */
static size_t sl_utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range */
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0; /* no overlong form */
        else if (c == 0xED)
            hi = 0x9F; /* no surrogate */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90; /* no overlong form */
        else if (c == 0xF4)
            hi = 0x8F; /* nothing past U+10FFFF */
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return len;
}

/* The bytes a JSON string holds as they are: printable ASCII but '"' and
 * '\'. */
static const unsigned char sl_json_plain[256] = {
    [0x20 ... 0x21] = 1, /* '"' is 0x22 */
    [0x23 ... 0x5B] = 1, /* '\\' is 0x5C */
    [0x5D ... 0x7E] = 1,
};

size_t sl_json_string(char *out, const void *s, size_t len, bool *utf8)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = s;
    size_t w = 0;
    bool ok = true;
    out[w++] = '"';
    for (size_t i = 0; i < len;) {
        /* A run of plain bytes, copied at once: most keys are one. */
        size_t j = i;
        while (j < len && sl_json_plain[p[j]])
            j++;
        memcpy(out + w, p + i, j - i);
        w += j - i;
        i = j;
        if (i == len)
            break;
        unsigned char c = p[i];
        if (c < 0x80) {
            char esc = c == '"' ? '"' : c == '\\' ? '\\' : c == '\b' ? 'b' : c == '\f' ? 'f'
                     : c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : 0;
            out[w++] = '\\';
            if (esc) {
                out[w++] = esc;
            } else {
                memcpy(out + w, "u00", 3);
                out[w + 3] = hex[c >> 4];
                out[w + 4] = hex[c & 15];
                w += 5;
            }
            i++;
            continue;
        }
        size_t k = sl_utf8_seq(p + i, len - i);
        if (k == 0) {
            memcpy(out + w, "\\ufffd", 6);
            w += 6;
            ok = false;
            i++;
            continue;
        }
        memcpy(out + w, p + i, k);
        w += k;
        i += k;
    }
    out[w++] = '"';
    *utf8 = ok;
    return w;
}

size_t sl_base64(char *out, const void *s, size_t len)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = s;
    size_t w = 0, i = 0;
    for (; i + 3 <= len; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        out[w++] = abc[v >> 18];
        out[w++] = abc[v >> 12 & 63];
        out[w++] = abc[v >> 6 & 63];
        out[w++] = abc[v & 63];
    }
    if (i < len) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0);
        out[w++] = abc[v >> 18];
        out[w++] = abc[v >> 12 & 63];
        out[w++] = i + 1 < len ? abc[v >> 6 & 63] : '=';
        out[w++] = '=';
    }
    return w;
}

/* Writes n digits of v, zero-padded. */
static void sl_digits(char *out, int64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--, v /= 10)
        out[i] = (char)('0' + v % 10);
}

static int64_t sl_rfc3339_clamp(int64_t ms)
{
    return ms < 0 ? 0 : ms > SL_RFC3339_MAX_MS ? SL_RFC3339_MAX_MS : ms;
}

size_t sl_rfc3339_ms(char *out, int64_t ms)
{
    ms = sl_rfc3339_clamp(ms);
    int64_t days = ms / 86400000, in_day = ms % 86400000;
    /* The civil date of a day count since 1970-01-01, in eras of 400
     * years (146 097 days) that begin on a 1 March, so that the leap day
     * is the last day of a year. */
    int64_t z = days + 719468;
    int64_t era = z / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t day = doy - (153 * mp + 2) / 5 + 1;
    int64_t month = mp < 10 ? mp + 3 : mp - 9;
    int64_t year = yoe + era * 400 + (month <= 2);
    sl_digits(out, year, 4);
    out[4] = '-';
    sl_digits(out + 5, month, 2);
    out[7] = '-';
    sl_digits(out + 8, day, 2);
    out[10] = 'T';
    sl_digits(out + 11, in_day / 3600000, 2);
    out[13] = ':';
    sl_digits(out + 14, in_day / 60000 % 60, 2);
    out[16] = ':';
    sl_digits(out + 17, in_day / 1000 % 60, 2);
    out[19] = '.';
    sl_digits(out + 20, in_day % 1000, 3);
    out[23] = 'Z';
    return 24;
}

/* Writes v in decimal; returns the bytes written (at most 20). */
static size_t sl_int(char *out, int64_t v)
{
    char tmp[20];
    size_t n = 0, w = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        out[w++] = '-';
    while (n)
        out[w++] = tmp[--n];
    return w;
}

/* Appends a literal. */
#define PUT(lit)                                                                                 \
    do {                                                                                         \
        memcpy(out + w, lit, sizeof lit - 1);                                                    \
        w += sizeof lit - 1;                                                                     \
    } while (0)

/* A string that may be null. */
static size_t sl_json_nullable(char *out, const char *s, size_t len)
{
    bool utf8;
    if (!s) {
        memcpy(out, "null", 4);
        return 4;
    }
    return sl_json_string(out, s, len, &utf8);
}

size_t sl_dlog_format(char *out, size_t cap, const sl_dlog_line *l, sl_dlog_clock *clock)
{
    size_t face_len = l->face ? strlen(l->face) : 0;
    if (!l->face || face_len > 8 ||
        cap < sl_dlog_line_max(l->policy ? l->policy_len : 0, l->key_len,
                               l->refused_by ? l->refused_len : 0))
        return 0;
    size_t w = 0;
    bool utf8;
    PUT("{\"time\":\"");
    if (clock) {
        int64_t ms = sl_rfc3339_clamp(l->time_ms);
        if (clock->sec_plus_1 != ms / 1000 + 1) {
            char text[24];
            sl_rfc3339_ms(text, ms);
            memcpy(clock->text, text, sizeof clock->text);
            clock->sec_plus_1 = ms / 1000 + 1;
        }
        memcpy(out + w, clock->text, sizeof clock->text);
        sl_digits(out + w + 20, ms % 1000, 3);
        out[w + 23] = 'Z';
        w += 24;
    } else {
        w += sl_rfc3339_ms(out + w, l->time_ms);
    }
    PUT("\",\"face\":\"");
    memcpy(out + w, l->face, face_len);
    w += face_len;
    PUT("\",\"policy\":");
    w += sl_json_nullable(out + w, l->policy, l->policy_len);
    PUT(",\"key\":");
    w += sl_json_string(out + w, l->key, l->key_len, &utf8);
    if (!utf8) {
        PUT(",\"key_base64\":\"");
        w += sl_base64(out + w, l->key, l->key_len);
        out[w++] = '"';
    }
    PUT(",\"cost\":");
    w += sl_int(out + w, l->cost);
    if (l->allowed)
        PUT(",\"allowed\":true");
    else
        PUT(",\"allowed\":false");
    if (l->shadow)
        PUT(",\"shadow\":true");
    else
        PUT(",\"shadow\":false");
    PUT(",\"remaining\":");
    w += sl_int(out + w, l->remaining);
    PUT(",\"retry_after_ms\":");
    w += sl_int(out + w, l->retry_after_ms);
    PUT(",\"refused_by\":");
    w += sl_json_nullable(out + w, l->refused_by, l->refused_len);
    PUT("}\n");
    return w;
}
