/*
 * HTTP Basic credentials (proto/basic_auth.h), which the live page's
 * browser sends: the password after the first colon, strict base64, and
 * random credentials through an encoder written here.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "proto/basic_auth.h"

static char pw[SL_BASIC_MAX + 1];

static long password(const char *v)
{
    long n = sl_basic_password(v, strlen(v), pw, SL_BASIC_MAX);
    if (n >= 0)
        pw[n] = '\0';
    return n;
}

Test(basic_auth, the_password_after_the_first_colon)
{
    cr_assert_eq(password("Basic dXNlcjpwYXNz"), 4); /* user:pass */
    cr_assert_str_eq(pw, "pass");
    cr_assert_eq(password("basic   dXNlcjpwYXNz  "), 4, "any case, spaces around");
    cr_assert_eq(password("BASIC dXNlcjo="), 0, "user: (an empty password)");
    cr_assert_eq(password("Basic OnA6cQ=="), 3); /* :p:q */
    cr_assert_str_eq(pw, "p:q");
    cr_assert_eq(password("Basic YTpi"), 1); /* a:b, unpadded and padded alike */
    cr_assert_eq(password("Basic YTpiYw"), 2); /* a:bc without its "==" */
    cr_assert_eq(password("Basic YTpiYw=="), 2);
}

Test(basic_auth, anything_else_is_not_credentials)
{
    const char *bad[] = {
        "Bearer dXNlcjpwYXNz", "Basic", "Basic ", "Basic    ", "Basicd XNlcjpwYXNz",
        "Basic dXNlcg==",        /* "user": no colon */
        "Basic dXNlcjpwYXNz=",   /* padding that does not end a quantum */
        "Basic YTpiYw=",         /* likewise */
        "Basic YTpiYw===",       /* three = */
        "Basic YTpiY",           /* a length of 1 mod 4 */
        "Basic YR==",            /* bits left over that are not 0 */
        "Basic dXNl cjpwYXNz",   /* a space inside */
        "Basic dXNlcjpwYXNz!",   /* not base64 */
        "Basic dXNlcjpw=YXNz",   /* padding inside */
        "Basic dXNlcjpwYXNz\t",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert_eq(password(bad[i]), -1, "%s", bad[i]);
}

static void b64(const unsigned char *s, size_t n, char *out)
{
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) |
                     (i + 2 < n ? s[i + 2] : 0);
        out[o++] = A[v >> 18 & 63];
        out[o++] = A[v >> 12 & 63];
        out[o++] = i + 1 < n ? A[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? A[v & 63] : '=';
    }
    out[o] = '\0';
}

Test(basic_auth, random_credentials_give_their_password_back)
{
    unsigned long long x = 7;
    unsigned char cred[SL_BASIC_MAX + 8];
    char value[2 * SL_BASIC_MAX + 16] = "Basic ";
    for (int round = 0; round < 5000; round++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        size_t ulen = (x >> 20) % 12, plen = (x >> 40) % 40;
        if (round % 100 == 0)
            plen = SL_BASIC_MAX - ulen - 1; /* the longest taken */
        for (size_t i = 0; i < ulen; i++)
            cred[i] = (unsigned char)('a' + (x >> (i % 50)) % 26);
        cred[ulen] = ':';
        for (size_t i = 0; i < plen; i++) {
            x = x * 6364136223846793005ULL + 1;
            cred[ulen + 1 + i] = (unsigned char)(x >> 33);
        }
        b64(cred, ulen + 1 + plen, value + 6);
        long n = sl_basic_password(value, strlen(value), pw, SL_BASIC_MAX);
        cr_assert_eq(n, (long)plen, "round %d", round);
        cr_assert_eq(memcmp(pw, cred + ulen + 1, plen), 0, "round %d", round);
        /* a password longer than the caller's room is refused */
        if (plen > 0)
            cr_assert_eq(sl_basic_password(value, strlen(value), pw, plen - 1), -1);
    }
    /* one byte past the longest: refused */
    memset(cred, 'p', SL_BASIC_MAX + 3);
    cred[0] = ':';
    b64(cred, SL_BASIC_MAX + 3, value + 6);
    cr_assert_eq(sl_basic_password(value, strlen(value), pw, SL_BASIC_MAX), -1);
}
