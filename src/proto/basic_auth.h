/*
 * basic_auth.h: HTTP Basic credentials (RFC 7617), for sluiced's live page:
 * a browser cannot send a bearer token, but asks its user for a user name
 * and password and sends them as "Basic base64(user:password)".
 */
#ifndef SL_PROTO_BASIC_AUTH_H
#define SL_PROTO_BASIC_AUTH_H

#include <stddef.h>

/* The longest credentials read, decoded ("user:password"). */
#define SL_BASIC_MAX 1024

/*
 * The password of an Authorization field value v[0 .. n): the scheme
 * "Basic" (any case), spaces, then the base64 (RFC 4648's alphabet, padded
 * or not) of "user:password", which is decoded; the password is what
 * follows the first ':'. Copies it into out (cap bytes, not NUL-terminated)
 * and returns its length, or -1 when v is not that: another scheme, bad
 * base64, no ':', credentials longer than SL_BASIC_MAX, or a password
 * longer than cap.
 */
long sl_basic_password(const char *v, size_t n, char *out, size_t cap);

#endif
