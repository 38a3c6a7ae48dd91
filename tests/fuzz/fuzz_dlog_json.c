/*
 * fuzz_dlog_json.c: libFuzzer target for the decision log's line
 * (src/proto/dlog_json.c), whose key, policy and limit name are whatever
 * bytes a client sent.
 *
 * The input is cut into a line's fields:
 *   byte 0        bit 0 policy given, bit 1 refused_by given, bit 2
 *                 allowed, bit 3 shadow, bits 4-5 the face
 *   bytes 1-8     the time (ms), any int64
 *   bytes 9-16    the cost, and the same bytes reversed the remaining
 *   byte 17, 18   the policy's and refused_by's lengths (mod 64)
 *   the rest      the policy's bytes, refused_by's, then the key's
 * (a shorter input leaves the fields past its end empty or zero).
 *
 * CHECK() aborts when a guarantee of dlog_json.h breaks: the line fits
 * sl_dlog_line_max, is the same through the clock cache (kept from one
 * input to the next), is one line ending in '\n', is valid UTF-8 (checked by
 * a decoder written here) and valid JSON (cJSON reads it) with exactly its
 * fields in order; each string decodes (by a JSON string reader written
 * here) back to its bytes when they are UTF-8; and the key's bytes always
 * come back exactly: from "key" when the line has no "key_base64", else
 * from "key_base64", which is there exactly when the key is not UTF-8.
 *
 * Build and run: make fuzz (FUZZ_SECONDS=N to change the time per target).
 */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "proto/dlog_json.h"

/* Whether s[0 .. n) is UTF-8, decoding each code point: none overlong, no
 * surrogate, none past U+10FFFF. */
static bool utf8_ok(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (k == 0 || i + k > n)
            return false;
        uint32_t cp = k == 1 ? c : k == 2 ? c & 0x1F : k == 3 ? c & 0x0F : c & 0x07;
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return false;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < least[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += k;
    }
    return true;
}

/* Reads the JSON string at *p (its opening quote) into out (at most cap
 * bytes of UTF-8); moves *p past its closing quote. Returns the bytes, or
 * -1 when it is not a string this reader takes (a surrogate escape, which
 * the line never writes, included). */
static long json_read_string(const char **p, const char *end, unsigned char *out, size_t cap)
{
    const char *s = *p;
    size_t w = 0;
    if (s >= end || *s++ != '"')
        return -1;
    while (s < end && *s != '"') {
        uint32_t cp;
        if (*s != '\\') {
            if (w >= cap)
                return -1;
            out[w++] = (unsigned char)*s++;
            continue;
        }
        if (++s >= end)
            return -1;
        char e = *s++;
        if (e == 'u') {
            if (end - s < 4)
                return -1;
            cp = 0;
            for (int i = 0; i < 4; i++) {
                char h = s[i];
                int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                      : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (v < 0)
                    return -1;
                cp = cp << 4 | (uint32_t)v;
            }
            s += 4;
            if (cp >= 0xD800 && cp <= 0xDFFF)
                return -1;
        } else {
            cp = e == '"' ? '"' : e == '\\' ? '\\' : e == '/' ? '/' : e == 'b' ? '\b'
               : e == 'f' ? '\f' : e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : 0xFFFFFFFF;
            if (cp == 0xFFFFFFFF)
                return -1;
        }
        if (w + 3 >= cap)
            return -1;
        if (cp < 0x80) {
            out[w++] = (unsigned char)cp;
        } else if (cp < 0x800) {
            out[w++] = (unsigned char)(0xC0 | cp >> 6);
            out[w++] = (unsigned char)(0x80 | (cp & 0x3F));
        } else {
            out[w++] = (unsigned char)(0xE0 | cp >> 12);
            out[w++] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
            out[w++] = (unsigned char)(0x80 | (cp & 0x3F));
        }
    }
    if (s >= end)
        return -1;
    *p = s + 1;
    return (long)w;
}

/* The JSON string that follows `"name":` in the line; -1 when none. */
static long field_string(const char *line, size_t n, const char *name, unsigned char *out,
                         size_t cap)
{
    char pat[32];
    snprintf(pat, sizeof pat, ",\"%s\":", name);
    const char *end = line + n, *at = NULL;
    size_t pl = strlen(pat);
    /* The first match outside any string: the line's fields are in a
     * fixed order and the earlier strings are escaped, so the first
     * occurrence of `,"name":` after the time is the field. */
    for (const char *s = line; s + pl <= end; s++)
        if (memcmp(s, pat, pl) == 0) {
            at = s + pl;
            break;
        }
    if (!at || at >= end || *at != '"')
        return -1;
    return json_read_string(&at, end, out, cap);
}

static size_t base64_decode(const char *s, size_t n, unsigned char *out)
{
    size_t w = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n && s[i] != '='; i++) {
        const char *abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        const char *c = strchr(abc, s[i]);
        CHECK(c && s[i]);
        acc = acc << 6 | (uint32_t)(c - abc);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[w++] = (unsigned char)(acc >> bits);
        }
    }
    return w;
}

static uint64_t take_u64(const uint8_t *data, size_t size, size_t at)
{
    uint64_t v = 0;
    for (size_t i = 0; i < 8; i++)
        v = v << 8 | (at + i < size ? data[at + i] : 0);
    return v;
}

/* A string field decodes back to its bytes when they are UTF-8 (without
 * NUL: the reader's output is compared whole, so a NUL is fine too). */
static void check_string_field(const char *line, size_t n, const char *name, const void *bytes,
                               size_t len, unsigned char *buf, size_t cap)
{
    long got = field_string(line, n, name, buf, cap);
    CHECK(got >= 0);
    CHECK(utf8_ok(buf, (size_t)got));
    if (utf8_ok(bytes, len))
        CHECK((size_t)got == len && memcmp(buf, bytes, len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const faces[4] = {"resp", "http", "grpc", "x"};
    uint8_t flags = size > 0 ? data[0] : 0;
    size_t plen = size > 17 ? data[17] % 64 : 0, rlen = size > 18 ? data[18] % 64 : 0;
    size_t at = size > 19 ? 19 : size;
    plen = plen < size - at ? plen : size - at;
    char *policy = copy_of(data + at, plen);
    at += plen;
    rlen = rlen < size - at ? rlen : size - at;
    char *refused = copy_of(data + at, rlen);
    at += rlen;
    size_t klen = size - at;
    char *key = copy_of(data + at, klen);
    uint64_t cost = take_u64(data, size, 9);
    sl_dlog_line l = {
        .time_ms = (int64_t)take_u64(data, size, 1),
        .face = faces[flags >> 4 & 3],
        .policy = flags & 1 ? policy : NULL,
        .policy_len = plen,
        .key = key,
        .key_len = klen,
        .cost = (int64_t)cost,
        .allowed = flags & 4,
        .shadow = flags & 8,
        .remaining = (int64_t)__builtin_bswap64(cost),
        .retry_after_ms = (int64_t)(cost ^ 0x5555),
        .refused_by = flags & 2 ? refused : NULL,
        .refused_len = rlen,
    };
    size_t cap = sl_dlog_line_max(l.policy ? plen : 0, klen, l.refused_by ? rlen : 0);
    char *out = malloc(cap + 1);
    CHECK(out);
    CHECK(sl_dlog_format(out, cap - 1, &l, NULL) == 0); /* one byte short: refused */
    size_t n = sl_dlog_format(out, cap, &l, NULL);
    CHECK(n > 0 && n <= cap);
    /* Through the clock cache (kept from input to input): the same line. */
    static sl_dlog_clock clock;
    char *again = malloc(cap);
    CHECK(again);
    CHECK(sl_dlog_format(again, cap, &l, &clock) == n && memcmp(again, out, n) == 0);
    free(again);
    CHECK(out[n - 1] == '\n');
    CHECK(memchr(out, '\n', n - 1) == NULL);
    CHECK(utf8_ok((const unsigned char *)out, n));
    out[n] = '\0';

    cJSON *j = cJSON_ParseWithLength(out, n);
    CHECK(j && cJSON_IsObject(j));
    static const char *const order[] = {"time",   "face",      "policy",         "key",
                                        "key_base64", "cost",   "allowed",        "shadow",
                                        "remaining",  "retry_after_ms", "refused_by"};
    bool key_utf8 = utf8_ok((const unsigned char *)key, klen);
    size_t k = 0;
    for (cJSON *f = j->child; f; f = f->next, k++) {
        if (k == 4 && key_utf8)
            k++; /* no key_base64 */
        CHECK(k < sizeof order / sizeof *order);
        CHECK(strcmp(f->string, order[k]) == 0);
    }
    CHECK(k == sizeof order / sizeof *order);
    CHECK(cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(j, "allowed")));
    CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "allowed")) == l.allowed);
    CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "shadow")) == l.shadow);
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(j, "policy")) == !l.policy);
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(j, "refused_by")) == !l.refused_by);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "time");
    CHECK(cJSON_IsString(t) && strlen(t->valuestring) == 24);
    /* The integers as written: exact, in the line's text. */
    char num[64];
    snprintf(num, sizeof num, ",\"cost\":%lld,", (long long)l.cost);
    CHECK(strstr(out, num));
    snprintf(num, sizeof num, ",\"remaining\":%lld,", (long long)l.remaining);
    CHECK(strstr(out, num));

    size_t bcap = 6 * klen + 6 * plen + 6 * rlen + 16;
    unsigned char *buf = malloc(bcap);
    CHECK(buf);
    check_string_field(out, n, "key", key, klen, buf, bcap);
    if (l.policy)
        check_string_field(out, n, "policy", policy, plen, buf, bcap);
    if (l.refused_by)
        check_string_field(out, n, "refused_by", refused, rlen, buf, bcap);
    const cJSON *b64 = cJSON_GetObjectItemCaseSensitive(j, "key_base64");
    CHECK(!b64 == key_utf8);
    if (b64) {
        CHECK(cJSON_IsString(b64));
        size_t got = base64_decode(b64->valuestring, strlen(b64->valuestring), buf);
        CHECK(got == klen && memcmp(buf, key, klen) == 0);
    }
    free(buf);
    cJSON_Delete(j);
    free(out);
    free(key);
    free(refused);
    free(policy);
    return 0;
}
