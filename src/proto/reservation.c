/*
 * reservation.c: a reservation's id, written and read (reservation.h).
 */
#include "proto/reservation.h"

#include <string.h>

/* Hex digits written one byte at a time into a bounded buffer. */
typedef struct sl_hexw {
    char *out;
    size_t cap, n;
    bool full;
} sl_hexw;

static void sl_hexw_bytes(sl_hexw *w, const void *p, size_t len)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *b = p;
    if (w->full || len > (w->cap - w->n) / 2) {
        w->full = true;
        return;
    }
    for (size_t i = 0; i < len; i++) {
        w->out[w->n++] = digits[b[i] >> 4];
        w->out[w->n++] = digits[b[i] & 15];
    }
}

static void sl_hexw_u64(sl_hexw *w, uint64_t v)
{
    unsigned char b[8];
    for (int i = 7; i >= 0; i--, v >>= 8)
        b[i] = (unsigned char)v;
    sl_hexw_bytes(w, b, 8);
}

static bool sl_reservation_ok(const sl_reservation *r)
{
    return r->ttl_ms >= 1 && r->cost >= 0 && r->tokens >= 0 && r->policy_len >= 1 &&
           r->policy_len <= SL_RESERVATION_NAME_MAX && r->tier_len <= SL_RESERVATION_NAME_MAX &&
           r->key_len >= 1 && r->key_len <= SL_RESERVATION_KEY_MAX;
}

static void sl_reservation_write_head(sl_hexw *w, const sl_reservation *r)
{
    unsigned char v = SL_RESERVATION_VERSION;
    sl_hexw_bytes(w, &v, 1);
    sl_hexw_u64(w, r->random[0]);
    sl_hexw_u64(w, r->random[1]);
    sl_hexw_u64(w, (uint64_t)r->ttl_ms);
    sl_hexw_u64(w, (uint64_t)r->cost);
    sl_hexw_u64(w, (uint64_t)r->tokens);
    sl_hexw_u64(w, r->print);
    unsigned char len = (unsigned char)r->policy_len;
    sl_hexw_bytes(w, &len, 1);
    sl_hexw_bytes(w, r->policy, r->policy_len);
    len = (unsigned char)r->tier_len;
    sl_hexw_bytes(w, &len, 1);
    sl_hexw_bytes(w, r->tier, r->tier_len);
}

size_t sl_reservation_text_len(const sl_reservation *r)
{
    return 2 * (SL_RESERVATION_FIXED + 1 + r->policy_len + 1 + r->tier_len + 2 + r->key_len);
}

size_t sl_reservation_encode(const sl_reservation *r, char *out, size_t cap)
{
    if (!sl_reservation_ok(r))
        return 0;
    sl_hexw w = {out, cap, 0, false};
    sl_reservation_write_head(&w, r);
    unsigned char klen[2] = {(unsigned char)(r->key_len >> 8), (unsigned char)r->key_len};
    sl_hexw_bytes(&w, klen, 2);
    sl_hexw_bytes(&w, r->key, r->key_len);
    if (w.full)
        return 0;
    if (w.n < cap)
        out[w.n] = '\0';
    return w.n;
}

size_t sl_reservation_head(const sl_reservation *r, char *out, size_t cap)
{
    if (!sl_reservation_ok(r))
        return 0;
    sl_hexw w = {out, cap, 0, false};
    sl_reservation_write_head(&w, r);
    return w.full ? 0 : w.n;
}

static int sl_hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static uint64_t sl_get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

const char *sl_reservation_decode(const char *text, size_t len, sl_reservation *r, char *buf,
                                  size_t cap)
{
    if (len == 0)
        return "empty";
    if (len > SL_RESERVATION_TEXT_MAX)
        return "longer than any reservation id";
    if (len % 2)
        return "an odd number of hex digits";
    size_t n = len / 2;
    if (n > cap)
        return "longer than any reservation id";
    unsigned char *b = (unsigned char *)buf;
    for (size_t i = 0; i < n; i++) {
        int hi = sl_hex_value(text[2 * i]), lo = sl_hex_value(text[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return "not hexadecimal";
        b[i] = (unsigned char)(hi << 4 | lo);
    }
    if (n < SL_RESERVATION_FIXED + 1 + 1 + 2)
        return "too short";
    if (b[0] != SL_RESERVATION_VERSION)
        return "of an unknown version";
    uint64_t ttl = sl_get_u64(b + 17), cost = sl_get_u64(b + 25), tokens = sl_get_u64(b + 33);
    if (ttl == 0 || ttl > INT64_MAX || cost > INT64_MAX || tokens > INT64_MAX)
        return "holds an out-of-range number";
    *r = (sl_reservation){
        .random = {sl_get_u64(b + 1), sl_get_u64(b + 9)},
        .ttl_ms = (int64_t)ttl,
        .cost = (int64_t)cost,
        .tokens = (int64_t)tokens,
        .print = sl_get_u64(b + 41),
    };
    size_t at = SL_RESERVATION_FIXED;
    r->policy_len = b[at++];
    if (r->policy_len == 0 || r->policy_len > n - at)
        return "truncated (the policy)";
    r->policy = buf + at;
    at += r->policy_len;
    if (at >= n)
        return "truncated (the tier)";
    r->tier_len = b[at++];
    if (r->tier_len > n - at)
        return "truncated (the tier)";
    r->tier = buf + at;
    at += r->tier_len;
    if (n - at < 2)
        return "truncated (the key)";
    r->key_len = (size_t)b[at] << 8 | b[at + 1];
    at += 2;
    if (r->key_len == 0 || r->key_len != n - at)
        return "of a key length that does not match its text";
    r->key = buf + at;
    return NULL;
}
