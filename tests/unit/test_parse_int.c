/*
 * The one integer parser (common/parse.h) and the round-up helpers
 * (common/units.h), at their edges, and the parser against a slow model
 * on random strings.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "common/parse.h"
#include "common/units.h"
#include "testlib.h"

/* sl_parse_i64 on a C string. */
static bool p64(const char *s, unsigned signs, int64_t *v)
{
    return sl_parse_i64(s, strlen(s), signs, v);
}

Test(parse_int, int64_range)
{
    int64_t v;
    cr_assert(p64("9223372036854775807", SL_INT_SIGNED, &v));
    cr_assert_eq(v, INT64_MAX);
    cr_assert(p64("-9223372036854775808", SL_INT_SIGNED, &v));
    cr_assert_eq(v, INT64_MIN);
    cr_assert(p64("+9223372036854775807", SL_INT_SIGNED, &v));
    cr_assert_eq(v, INT64_MAX);
    /* One beyond, either way. */
    cr_assert_not(p64("9223372036854775808", SL_INT_SIGNED, &v));
    cr_assert_not(p64("-9223372036854775809", SL_INT_SIGNED, &v));
    cr_assert_not(p64("+9223372036854775808", SL_INT_SIGNED, &v));
    /* 20 digits and more: beyond int64 and uint64 alike. */
    cr_assert_not(p64("18446744073709551615", SL_INT_SIGNED, &v));
    cr_assert_not(p64("18446744073709551616", SL_INT_SIGNED, &v));
    cr_assert_not(p64("99999999999999999999999", SL_INT_SIGNED, &v));
    cr_assert_not(p64("-99999999999999999999999", SL_INT_SIGNED, &v));
}

Test(parse_int, signs_only_where_allowed)
{
    int64_t v = 42;
    cr_assert(p64("-0", SL_INT_MINUS, &v));
    cr_assert_eq(v, 0);
    cr_assert(p64("-7", SL_INT_MINUS, &v));
    cr_assert_eq(v, -7);
    cr_assert_not(p64("+1", SL_INT_MINUS, &v));
    cr_assert(p64("+1", SL_INT_SIGNED, &v));
    cr_assert_eq(v, 1);
    cr_assert(p64("+1", SL_INT_PLUS, &v));
    cr_assert_not(p64("-1", SL_INT_PLUS, &v));
    cr_assert_not(p64("-1", SL_INT_NO_SIGN, &v));
    cr_assert_not(p64("+1", SL_INT_NO_SIGN, &v));
    cr_assert_not(p64("-0", SL_INT_NO_SIGN, &v));
    /* A sign alone, or two, is no number. */
    cr_assert_not(p64("-", SL_INT_SIGNED, &v));
    cr_assert_not(p64("+", SL_INT_SIGNED, &v));
    cr_assert_not(p64("--1", SL_INT_SIGNED, &v));
    cr_assert_not(p64("+-1", SL_INT_SIGNED, &v));
    /* A failure leaves *out as it was. */
    v = 42;
    cr_assert_not(p64("x", SL_INT_SIGNED, &v));
    cr_assert_eq(v, 42);
}

Test(parse_int, strict_text)
{
    int64_t v;
    cr_assert_not(sl_parse_i64("", 0, SL_INT_SIGNED, &v));
    cr_assert_not(sl_parse_i64(NULL, 0, SL_INT_SIGNED, &v));
    cr_assert_not(p64(" 1", SL_INT_SIGNED, &v));
    cr_assert_not(p64("1 ", SL_INT_SIGNED, &v));
    cr_assert_not(p64("- 1", SL_INT_SIGNED, &v));
    cr_assert_not(p64("1\t", SL_INT_SIGNED, &v));
    cr_assert_not(p64("1x", SL_INT_SIGNED, &v));
    cr_assert_not(p64("0x10", SL_INT_SIGNED, &v));
    cr_assert_not(p64("1.0", SL_INT_SIGNED, &v));
    cr_assert_not(p64("1e3", SL_INT_SIGNED, &v));
    /* The length is the slice's, not the string's: a NUL inside is a byte
     * like any other, and bytes past len are not read. */
    cr_assert_not(sl_parse_i64("1\0" "2", 3, SL_INT_SIGNED, &v));
    cr_assert(sl_parse_i64("12345", 2, SL_INT_SIGNED, &v));
    cr_assert_eq(v, 12);
}

Test(parse_int, leading_zeros)
{
    int64_t v;
    cr_assert(p64("0012", SL_INT_NO_SIGN, &v));
    cr_assert_eq(v, 12);
    cr_assert(p64("0", SL_INT_NO_SIGN, &v));
    cr_assert_eq(v, 0);
    /* Any number of them: 25 digits that are 1 in value. */
    cr_assert(p64("0000000000000000000000001", SL_INT_NO_SIGN, &v));
    cr_assert_eq(v, 1);
    cr_assert(p64("-00000000009223372036854775808", SL_INT_MINUS, &v));
    cr_assert_eq(v, INT64_MIN);
    cr_assert_not(p64("00000000009223372036854775808", SL_INT_NO_SIGN, &v));
}

Test(parse_int, uint64_range)
{
    uint64_t u;
    cr_assert(sl_parse_u64("18446744073709551615", 20, &u));
    cr_assert_eq(u, UINT64_MAX);
    cr_assert_not(sl_parse_u64("18446744073709551616", 20, &u));
    cr_assert_not(sl_parse_u64("99999999999999999999", 20, &u));
    cr_assert(sl_parse_u64("000018446744073709551615", 24, &u));
    cr_assert_eq(u, UINT64_MAX);
    cr_assert(sl_parse_u64("0", 1, &u));
    cr_assert_eq(u, 0);
    cr_assert_not(sl_parse_u64("", 0, &u));
    cr_assert_not(sl_parse_u64("-1", 2, &u));
    cr_assert_not(sl_parse_u64("+1", 2, &u));
    cr_assert_not(sl_parse_u64("1 ", 2, &u));
}

/*
 * The slow model: the whole text in 128 bits, which no 40-byte string can
 * overflow, then the range. Returns true and *v, or false.
 */
static bool model_i64(const char *s, size_t n, unsigned signs, int64_t *v)
{
    size_t i = 0;
    bool neg = false;
    if (n > 0 && s[0] == '-' && (signs & SL_INT_MINUS))
        neg = true, i = 1;
    else if (n > 0 && s[0] == '+' && (signs & SL_INT_PLUS))
        i = 1;
    if (i == n)
        return false;
    __int128 x = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        x = x * 10 + (s[i] - '0');
        if (x > (__int128)1 << 64)
            x = (__int128)1 << 64; /* already out of range; keep it so */
    }
    if (neg)
        x = -x;
    if (x < INT64_MIN || x > INT64_MAX)
        return false;
    *v = (int64_t)x;
    return true;
}

Test(parse_int, against_a_model)
{
    static const char alphabet[] = "0123456789999900-+ x";
    test_rng rng = {.s = 18};
    char s[40];
    for (int iter = 0; iter < 200000; iter++) {
        size_t n = (size_t)test_range(&rng, 0, 28);
        for (size_t i = 0; i < n; i++) {
            /* Mostly digits, now and then a sign, a space or a letter. */
            uint64_t r = test_next(&rng) % 100;
            s[i] = r < 90 ? (char)('0' + r % 10) : alphabet[r % (sizeof alphabet - 1)];
        }
        unsigned signs = (unsigned)test_range(&rng, 0, 3);
        int64_t got = 0, want = 0;
        bool ok = sl_parse_i64(s, n, signs, &got), ok_model = model_i64(s, n, signs, &want);
        cr_assert_eq(ok, ok_model, "'%.*s' signs %u: %d, the model %d", (int)n, s, signs, ok,
                     ok_model);
        if (ok)
            cr_assert_eq(got, want, "'%.*s'", (int)n, s);
    }
}

Test(units, ceil_ms)
{
    cr_assert_eq(sl_ns_ceil_ms(0), 0);
    cr_assert_eq(sl_ns_ceil_ms(-1), 0);
    cr_assert_eq(sl_ns_ceil_ms(INT64_MIN), 0);
    cr_assert_eq(sl_ns_ceil_ms(1), 1);
    cr_assert_eq(sl_ns_ceil_ms(NS_PER_MS - 1), 1);
    cr_assert_eq(sl_ns_ceil_ms(NS_PER_MS), 1);
    cr_assert_eq(sl_ns_ceil_ms(NS_PER_MS + 1), 2);
    cr_assert_eq(sl_ns_ceil_ms(5 * NS_PER_MS), 5);
    cr_assert_eq(sl_ns_ceil_ms(NS_PER_SEC), 1000);
    /* INT64_MAX ns = 9223372036854 ms and 775807 ns: rounds up, no overflow. */
    cr_assert_eq(sl_ns_ceil_ms(INT64_MAX), INT64_C(9223372036855));
    cr_assert_eq(sl_ns_ceil_ms(INT64_MAX / NS_PER_MS * NS_PER_MS), INT64_MAX / NS_PER_MS);
}

Test(units, ceil_s)
{
    cr_assert_eq(sl_ns_ceil_s(0), 0);
    cr_assert_eq(sl_ns_ceil_s(-5), 0);
    cr_assert_eq(sl_ns_ceil_s(INT64_MIN), 0);
    cr_assert_eq(sl_ns_ceil_s(1), 1);
    cr_assert_eq(sl_ns_ceil_s(NS_PER_SEC - 1), 1);
    cr_assert_eq(sl_ns_ceil_s(NS_PER_SEC), 1);
    cr_assert_eq(sl_ns_ceil_s(NS_PER_SEC + 1), 2);
    cr_assert_eq(sl_ns_ceil_s(60 * NS_PER_SEC), 60);
    cr_assert_eq(sl_ns_ceil_s(INT64_MAX), INT64_MAX / NS_PER_SEC + 1);
    cr_assert_eq(sl_ns_ceil_s(INT64_MAX / NS_PER_SEC * NS_PER_SEC), INT64_MAX / NS_PER_SEC);
}
