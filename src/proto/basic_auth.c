/*
 * basic_auth.c: the password of HTTP Basic credentials (basic_auth.h).
 */
#include "proto/basic_auth.h"

#include <string.h>
#include <strings.h>

/* A base64 digit's value, or -1. */
static int sl_b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

long sl_basic_password(const char *v, size_t n, char *out, size_t cap)
{
    if (n < 6 || strncasecmp(v, "basic ", 6) != 0)
        return -1;
    size_t i = 6;
    while (i < n && v[i] == ' ')
        i++;
    size_t end = n;
    while (end > i && v[end - 1] == ' ')
        end--;
    /* Padding: at most two '=', only at the end of a whole quantum. */
    size_t pad = 0;
    while (end > i && v[end - 1] == '=' && pad < 2) {
        end--;
        pad++;
    }
    size_t len = end - i;
    if (len == 0 || len % 4 == 1 || (pad && (len + pad) % 4 != 0))
        return -1;
    /* The decoded length: 3 bytes a quantum, and 1 or 2 for its last 2 or 3 digits. */
    if (len / 4 * 3 + (len % 4 ? len % 4 - 1 : 0) > SL_BASIC_MAX)
        return -1;
    unsigned char dec[SL_BASIC_MAX];
    size_t m = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t k = i; k < end; k++) {
        int d = sl_b64_value((unsigned char)v[k]);
        if (d < 0)
            return -1;
        acc = (acc << 6) | (unsigned)d;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            dec[m++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    if (acc != 0) /* the bits left over must be zero (canonical base64) */
        return -1;
    const unsigned char *colon = memchr(dec, ':', m);
    if (!colon)
        return -1;
    size_t plen = m - (size_t)(colon + 1 - dec);
    if (plen > cap)
        return -1;
    if (plen)
        memcpy(out, colon + 1, plen);
    return (long)plen;
}
