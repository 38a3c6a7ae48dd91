/*
 * grpc_frame.c: gRPC's message prefix, grpc-timeout, grpc-status names and
 * grpc-message's percent-encoding (grpc_frame.h).
 */
#include "proto/grpc_frame.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

static const char *const status_names[] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

const char *sl_grpc_status_name(int code)
{
    if (code < 0 || (size_t)code >= sizeof status_names / sizeof status_names[0])
        return NULL;
    return status_names[code];
}

void sl_grpc_prefix_write(uint8_t out[SL_GRPC_PREFIX], bool compressed, uint32_t len)
{
    out[0] = compressed ? 1 : 0;
    out[1] = (uint8_t)(len >> 24);
    out[2] = (uint8_t)(len >> 16);
    out[3] = (uint8_t)(len >> 8);
    out[4] = (uint8_t)len;
}

long sl_grpc_message_parse(const uint8_t *buf, size_t len, size_t max, sl_grpc_message *out)
{
    if (len < 1)
        return SL_GRPC_INCOMPLETE;
    if (buf[0] > 1)
        return SL_GRPC_MALFORMED;
    if (len < SL_GRPC_PREFIX)
        return SL_GRPC_INCOMPLETE;
    uint32_t n = (uint32_t)buf[1] << 24 | (uint32_t)buf[2] << 16 | (uint32_t)buf[3] << 8 | buf[4];
    if ((uint64_t)n > (uint64_t)max)
        return SL_GRPC_TOO_LARGE;
#if LONG_MAX - SL_GRPC_PREFIX < UINT32_MAX
    /* Where a long is 32 bits, it must still hold the count returned. */
    if (n > (uint32_t)(LONG_MAX - SL_GRPC_PREFIX))
        return SL_GRPC_TOO_LARGE;
#endif
    if (len - SL_GRPC_PREFIX < n)
        return SL_GRPC_INCOMPLETE;
    out->compressed = buf[0] == 1;
    out->data = buf + SL_GRPC_PREFIX;
    out->len = n;
    return (long)n + SL_GRPC_PREFIX;
}

int sl_grpc_timeout_parse(const char *s, size_t n, int64_t *ns)
{
    if (n < 2 || n > 9)
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0'); /* 8 digits: no overflow */
    }
    int64_t unit;
    switch (s[n - 1]) {
    case 'H': unit = INT64_C(3600000000000); break;
    case 'M': unit = INT64_C(60000000000); break;
    case 'S': unit = INT64_C(1000000000); break;
    case 'm': unit = INT64_C(1000000); break;
    case 'u': unit = INT64_C(1000); break;
    case 'n': unit = 1; break;
    default: return -1;
    }
    int64_t r;
    *ns = __builtin_mul_overflow(v, unit, &r) ? INT64_MAX : r;
    return 0;
}

static const char hex_digits[] = "0123456789ABCDEF";

size_t sl_grpc_message_encode(const char *msg, size_t n, char *out, size_t cap)
{
    size_t w = 0, kept = 0; /* the length, and how much of it is in out */
    bool cut = false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)msg[i];
        char enc[3];
        size_t k;
        if (c >= 0x20 && c <= 0x7E && c != '%') {
            enc[0] = (char)c;
            k = 1;
        } else {
            enc[0] = '%';
            enc[1] = hex_digits[c >> 4];
            enc[2] = hex_digits[c & 15];
            k = 3;
        }
        /* An escape is written whole or not at all, and nothing after a
         * cut: a cut message still decodes to a prefix of the message. */
        if (!cut && cap && kept + k <= cap - 1) {
            memcpy(out + kept, enc, k);
            kept += k;
        } else {
            cut = true;
        }
        w += k;
    }
    if (cap)
        out[kept] = '\0';
    return w;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

size_t sl_grpc_message_decode(const char *s, size_t n, char *out)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (s[i] == '%' && i + 2 < n && (hi = hex_value(s[i + 1])) >= 0 &&
            (lo = hex_value(s[i + 2])) >= 0) {
            out[w++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            out[w++] = s[i];
        }
    }
    out[w] = '\0';
    return w;
}

bool sl_grpc_content_type_ok(const char *s, size_t n)
{
    static const char base[] = "application/grpc";
    size_t b = sizeof base - 1;
    if (n < b || strncasecmp(s, base, b) != 0)
        return false;
    s += b;
    n -= b;
    if (n >= 6 && strncasecmp(s, "+proto", 6) == 0) {
        s += 6;
        n -= 6;
    }
    return n == 0 || s[0] == ';';
}
