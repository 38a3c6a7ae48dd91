/*
 * parse.h: the one decimal integer parser, for every face and file format.
 *
 * The text is a slice (pointer and length, no NUL needed) that must be the
 * integer and nothing else: no spaces, no empty string, no sign but the
 * ones the caller allows, no value out of range. Leading zeros are allowed
 * ("007" is 7), and "-0" is 0 where '-' is. The callers keep their own
 * error messages and bounds; this only says whether the text is a number.
 *
 * It is inlined: RESP's CL.THROTTLE reads four integers per command with
 * it. Up to 19 digits cannot overflow a uint64 (10^19 - 1 < 2^64), so the
 * usual case checks the range once at the end, not at every digit.
 */
#ifndef SL_COMMON_PARSE_H
#define SL_COMMON_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The signs a caller accepts in front of the digits (or'ed). */
enum {
    SL_INT_NO_SIGN = 0,
    SL_INT_MINUS = 1, /* "-5" */
    SL_INT_PLUS = 2,  /* "+5" */
    SL_INT_SIGNED = SL_INT_MINUS | SL_INT_PLUS,
};

/* The digits p[0 .. len) (len > 0) as a uint64: false for a byte that is
 * no digit, or a value above UINT64_MAX. */
static inline bool sl_parse_digits(const char *p, size_t len, uint64_t *out)
{
    uint64_t v = 0;
    if (len <= 19) {
        for (size_t i = 0; i < len; i++) {
            unsigned d = (unsigned)(unsigned char)p[i] - (unsigned)'0';
            if (d > 9)
                return false;
            v = v * 10 + d;
        }
    } else {
        /* Leading zeros can make any number of digits: check before each
         * step that v * 10 + d stays within a uint64. */
        for (size_t i = 0; i < len; i++) {
            unsigned d = (unsigned)(unsigned char)p[i] - (unsigned)'0';
            if (d > 9 || v > (UINT64_MAX - d) / 10)
                return false;
            v = v * 10 + d;
        }
    }
    *out = v;
    return true;
}

/* A whole decimal uint64 in p[0 .. len), no sign. True and *out set, or
 * false with *out untouched. */
static inline bool sl_parse_u64(const char *p, size_t len, uint64_t *out)
{
    return len > 0 && sl_parse_digits(p, len, out);
}

/* A whole decimal int64 in p[0 .. len), INT64_MIN .. INT64_MAX, with the
 * signs `signs` allows (SL_INT_*). True and *out set, or false with *out
 * untouched. */
static inline bool sl_parse_i64(const char *p, size_t len, unsigned signs, int64_t *out)
{
    size_t i = 0;
    bool neg = false;
    if (len > 0 &&
        ((p[0] == '-' && (signs & SL_INT_MINUS)) || (p[0] == '+' && (signs & SL_INT_PLUS)))) {
        neg = p[0] == '-';
        i = 1;
    }
    uint64_t v;
    if (i == len || !sl_parse_digits(p + i, len - i, &v))
        return false;
    /* A negative number's magnitude may reach 2^63, INT64_MIN's. */
    if (v > (uint64_t)INT64_MAX + neg)
        return false;
    /* 0 - v wraps modulo 2^64 to the two's complement of -v, which the
     * conversion keeps (GCC and Clang define it so). */
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

#endif /* SL_COMMON_PARSE_H */
