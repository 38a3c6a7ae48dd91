/*
 * decimal.h: unsigned integers written in decimal, straight into place, for
 * the protocol writers (RESP replies, HTTP headers and bodies). No libc
 * call, no locale: a reply holds several numbers, and snprintf once cost
 * most of a response's time.
 */
#ifndef SL_COMMON_DECIMAL_H
#define SL_COMMON_DECIMAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* "00" to "99": two digits per division (201: the literal's NUL too). */
static const char sl_digit_pairs[201] = "00010203040506070809"
                                        "10111213141516171819"
                                        "20212223242526272829"
                                        "30313233343536373839"
                                        "40414243444546474849"
                                        "50515253545556575859"
                                        "60616263646566676869"
                                        "70717273747576777879"
                                        "80818283848586878889"
                                        "90919293949596979899";

/* How many decimal digits u has (1 for 0). log10(2) is about 1233 / 4096,
 * so bits * 1233 >> 12 is the digit count of 2^bits less one, which one
 * comparison with a power of ten corrects. */
static inline size_t sl_dec_len(uint64_t u)
{
    static const uint64_t pow10[20] = {
        UINT64_C(1),
        UINT64_C(10),
        UINT64_C(100),
        UINT64_C(1000),
        UINT64_C(10000),
        UINT64_C(100000),
        UINT64_C(1000000),
        UINT64_C(10000000),
        UINT64_C(100000000),
        UINT64_C(1000000000),
        UINT64_C(10000000000),
        UINT64_C(100000000000),
        UINT64_C(1000000000000),
        UINT64_C(10000000000000),
        UINT64_C(100000000000000),
        UINT64_C(1000000000000000),
        UINT64_C(10000000000000000),
        UINT64_C(100000000000000000),
        UINT64_C(1000000000000000000),
        UINT64_C(10000000000000000000),
    };
    unsigned bits = 64 - (unsigned)__builtin_clzll(u | 1);
    unsigned guess = bits * 1233 >> 12;
    size_t n = guess + (u >= pow10[guess]);
    return n + (n == 0);
}

/* Writes the digits of u so that the last one is just before `end`;
 * returns where the first one is. */
static inline char *sl_dec_put(char *end, uint64_t u)
{
    while (u > UINT32_MAX) {
        unsigned r = (unsigned)(u % 100);
        u /= 100;
        end -= 2;
        memcpy(end, sl_digit_pairs + 2 * r, 2);
    }
    uint32_t v = (uint32_t)u; /* 32-bit divisions are cheaper */
    while (v >= 100) {
        uint32_t q = v / 100;
        end -= 2;
        memcpy(end, sl_digit_pairs + 2 * (v - q * 100), 2);
        v = q;
    }
    if (v >= 10) {
        end -= 2;
        memcpy(end, sl_digit_pairs + 2 * v, 2);
    } else {
        *--end = (char)('0' + v);
    }
    return end;
}

#endif /* SL_COMMON_DECIMAL_H */
