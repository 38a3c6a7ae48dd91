/*
 * secret.h: comparing a secret a client sent (a password, a bearer token)
 * with the one configured, in time that depends only on the lengths, not on
 * where the bytes first differ: a client cannot find the secret byte by
 * byte by timing the answers. Used by sluiced's AUTH and its HTTP face.
 */
#ifndef SL_COMMON_SECRET_H
#define SL_COMMON_SECRET_H

#include <stdbool.h>
#include <stddef.h>

static inline bool sl_equal_ct(const char *a, size_t alen, const char *b, size_t blen)
{
    unsigned char diff = alen != blen;
    for (size_t i = 0; i < alen; i++)
        diff |= (unsigned char)(a[i] ^ b[i % (blen ? blen : 1)]);
    return diff == 0 && alen == blen;
}

#endif
