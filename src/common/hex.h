/*
 * hex.h: hexadecimal digits, for the parsers that read them (RESP's inline
 * escapes, HTTP's percent-encoding, lease ids, --store URLs) and the lease
 * ids the faces write. Table lookups, no branch on the digit: a lease id's
 * digits are random, and a branch per digit mispredicts half the time.
 */
#ifndef SL_COMMON_HEX_H
#define SL_COMMON_HEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_HEX_ROW(x) x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x
static const int8_t sl_hex_values[256] = {
    SL_HEX_ROW(-1), SL_HEX_ROW(-1), SL_HEX_ROW(-1),
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, -1, -1, -1, -1, -1, -1,       /* '0' .. '9' */
    -1, 10, 11, 12, 13, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, /* 'A' .. 'F' */
    SL_HEX_ROW(-1),
    -1, 10, 11, 12, 13, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, /* 'a' .. 'f' */
    SL_HEX_ROW(-1), SL_HEX_ROW(-1), SL_HEX_ROW(-1), SL_HEX_ROW(-1), SL_HEX_ROW(-1),
    SL_HEX_ROW(-1), SL_HEX_ROW(-1), SL_HEX_ROW(-1), SL_HEX_ROW(-1),
};
#undef SL_HEX_ROW

/* 0 to 15, or -1 for a character that is no hexadecimal digit. */
static inline int sl_hex_digit(unsigned char c)
{
    return sl_hex_values[c];
}

/* The n (at most 16) hexadecimal digits at p, in either case, as *out;
 * false when one is not a digit. */
static inline bool sl_hex_u64(const char *p, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        int d = sl_hex_values[(unsigned char)p[i]];
        bad |= d;
        v = v << 4 | (uint64_t)(d & 15);
    }
    *out = v;
    return bad >= 0 && n <= 16;
}

/* v as `digits` lowercase hexadecimal digits (the low ones) at out; no NUL. */
static inline void sl_hex_put(char *out, uint64_t v, int digits)
{
    static const char hex[] = "0123456789abcdef";
    for (int i = digits - 1; i >= 0; i--) {
        out[i] = hex[v & 15];
        v >>= 4;
    }
}

#endif /* SL_COMMON_HEX_H */
