/*
 * grpc_frame.h: the parts of gRPC over HTTP/2 that are bytes and text, not
 * sessions: the length-prefixed message, the grpc-timeout header, the
 * grpc-status and grpc-message trailers, the content type.
 *
 * A gRPC message on an HTTP/2 stream is a 5-byte prefix and the message:
 *
 *   +------------+---------------------------+----------------------+
 *   | compressed |  length (4 bytes, big-    |  message (length     |
 *   |  0 or 1    |  endian, unsigned)        |  bytes, protobuf)    |
 *   +------------+---------------------------+----------------------+
 *
 * and the call's outcome comes in the trailers, after the last message:
 * `grpc-status: 0` (OK) or another code of the table below, and for an
 * error `grpc-message: TEXT` with TEXT percent-encoded (every byte outside
 * printable ASCII, and '%' itself, as %XX). A client's deadline arrives as
 * `grpc-timeout: 1-8 digits and a unit` (H, M, S, m, u, n).
 *
 * Everything here is pure: no I/O, no allocation, every length checked.
 */
#ifndef SLUICE_PROTO_GRPC_FRAME_H
#define SLUICE_PROTO_GRPC_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_GRPC_PREFIX 5 /* bytes before each message */

/* gRPC's status codes (grpc-status), as the protocol numbers them. */
typedef enum sl_grpc_status {
    SL_GRPC_OK = 0,
    SL_GRPC_CANCELLED = 1,
    SL_GRPC_UNKNOWN = 2,
    SL_GRPC_INVALID_ARGUMENT = 3,
    SL_GRPC_DEADLINE_EXCEEDED = 4,
    SL_GRPC_NOT_FOUND = 5,
    SL_GRPC_ALREADY_EXISTS = 6,
    SL_GRPC_PERMISSION_DENIED = 7,
    SL_GRPC_RESOURCE_EXHAUSTED = 8,
    SL_GRPC_FAILED_PRECONDITION = 9,
    SL_GRPC_ABORTED = 10,
    SL_GRPC_OUT_OF_RANGE = 11,
    SL_GRPC_UNIMPLEMENTED = 12,
    SL_GRPC_INTERNAL = 13,
    SL_GRPC_UNAVAILABLE = 14,
    SL_GRPC_DATA_LOSS = 15,
    SL_GRPC_UNAUTHENTICATED = 16,
} sl_grpc_status;

/* The code's name ("UNIMPLEMENTED"), or NULL for a number that is none. */
const char *sl_grpc_status_name(int code);

/* Writes the prefix of a message of len bytes into out[0 .. 5). */
void sl_grpc_prefix_write(uint8_t out[SL_GRPC_PREFIX], bool compressed, uint32_t len);

/* A message found by sl_grpc_message_parse: a slice of the caller's buffer. */
typedef struct sl_grpc_message {
    bool compressed;
    const uint8_t *data;
    size_t len;
} sl_grpc_message;

/* Results of sl_grpc_message_parse besides a byte count. */
enum {
    SL_GRPC_MALFORMED = -1,  /* the flag byte is neither 0 nor 1 */
    SL_GRPC_INCOMPLETE = -2, /* more bytes are needed */
    SL_GRPC_TOO_LARGE = -3,  /* the prefix announces more than max bytes */
};

/*
 * Reads one length-prefixed message from buf[0 .. len). Returns the bytes
 * it takes (prefix and message, > 0) with *out pointing into buf, or
 * SL_GRPC_INCOMPLETE, SL_GRPC_MALFORMED or SL_GRPC_TOO_LARGE (known from
 * the prefix alone: the message need not have arrived). *out is set only on
 * success.
 */
long sl_grpc_message_parse(const uint8_t *buf, size_t len, size_t max, sl_grpc_message *out);

/*
 * Reads a grpc-timeout value s[0 .. n): 1 to 8 digits, then one unit, H
 * (hours), M (minutes), S (seconds), m (milliseconds), u (microseconds) or
 * n (nanoseconds), nothing else. Sets *ns to the timeout in nanoseconds;
 * one too long for an int64 (99999999H is 11 400 years) is INT64_MAX, no
 * deadline in practice. Returns 0, or -1 when s is no such value (*ns
 * unchanged).
 */
int sl_grpc_timeout_parse(const char *s, size_t n, int64_t *ns);

/*
 * Percent-encodes msg[0 .. n) as grpc-message wants it: bytes 0x20 .. 0x7E
 * but '%' as they are, every other byte as %XX (hex, uppercase). Writes at
 * most cap - 1 characters and a NUL into out (when cap > 0), never half an
 * escape, and returns the length the whole encoding has (as snprintf does: a
 * result >= cap means it was cut). The encoding is at most 3 * n characters.
 */
size_t sl_grpc_message_encode(const char *msg, size_t n, char *out, size_t cap);

/*
 * Decodes a grpc-message value s[0 .. n) into out (at least n + 1 bytes):
 * each %XX to its byte, anything else (a '%' not followed by two hex
 * digits included) as it is, as the protocol asks of a receiver. Returns
 * the decoded length; out is NUL-terminated.
 */
size_t sl_grpc_message_decode(const char *s, size_t n, char *out);

/* Whether a content-type value s[0 .. n) names gRPC with protobuf:
 * "application/grpc", "application/grpc+proto", either followed by
 * ";parameters" (any case for the type). */
bool sl_grpc_content_type_ok(const char *s, size_t n);

#endif /* SLUICE_PROTO_GRPC_FRAME_H */
