/*
 * client_addr.h: the address of the client behind a chain of proxies, as
 * forward-auth keys a per-IP limit by it (docs/http.md, "The client's
 * address").
 *
 * A header such as X-Forwarded-For is written by whoever sends the request:
 * its left-most entry is whatever the client chose to put there. Only the
 * entries appended by proxies the operator trusts can be believed, so the
 * client is found from the right:
 *
 *   client ---> proxy A ---> proxy B ---> sluiced
 *   X-Forwarded-For: <forged>, <client>, <A>     (peer: B)
 *
 *   1. the socket's peer (B) is the client unless the peer is trusted;
 *   2. else the header's entries are walked from right to left, trusted
 *      ones skipped (A); the first untrusted one is the client;
 *   3. when all are trusted, the left-most is.
 *
 * Anything left of the client is never read as an address: a forged entry
 * there changes nothing. An entry that is not an address stops the walk
 * with an error (the request gets 400 naming the header) rather than a
 * guess. Forwarded's "unknown" and obfuscated ("_hidden") nodes are no
 * error but no address either: the walk stops there and the last address
 * it passed (a trusted proxy's) is the client, or an error when there is
 * none.
 *
 * Addresses are kept as 16 bytes, IPv4 in its IPv4-mapped IPv6 form
 * (::ffff:a.b.c.d), so that 10.0.0.1 and ::ffff:10.0.0.1 are one address
 * and an IPv4 range is an IPv6 range of 96 + N bits; the text is
 * inet_ntop's, IPv4 (mapped or not) as a.b.c.d.
 *
 * Nothing here does I/O or allocates; every walk is bounded: at most
 * SL_CLIENT_ADDR_MAX_HOPS entries in the header and SL_TRUSTED_MAX ranges.
 */
#ifndef SLUICE_PROTO_CLIENT_ADDR_H
#define SLUICE_PROTO_CLIENT_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/http.h"

#define SL_CLIENT_ADDR_MAX_HOPS 64 /* entries of the header(s) of one request */
#define SL_TRUSTED_MAX 64          /* ranges in --trusted-proxies */
#define SL_IP_TEXT_MAX 46          /* INET6_ADDRSTRLEN, its NUL included */

/* An IPv6 address, or an IPv4 one as ::ffff:a.b.c.d. */
typedef struct sl_ip {
    uint8_t b[16];
} sl_ip;

/* A range: the addresses whose first `bits` bits (0 .. 128, counted over the
 * 16-byte form, so 96 + N for an IPv4 /N) are those of `net`. */
typedef struct sl_cidr {
    sl_ip net; /* its bits past the prefix are zero */
    uint8_t bits;
} sl_cidr;

/* The proxies whose word about the client is believed. n == 0 trusts none. */
typedef struct sl_trusted_proxies {
    size_t n;
    sl_cidr r[SL_TRUSTED_MAX];
} sl_trusted_proxies;

/* Which header says who the client is. */
typedef enum sl_client_source {
    SL_CLIENT_NONE = 0,      /* another header: its value is the key */
    SL_CLIENT_XFF,           /* X-Forwarded-For */
    SL_CLIENT_FORWARDED,     /* Forwarded (RFC 7239) */
    SL_CLIENT_REAL_IP,       /* X-Real-IP */
} sl_client_source;

/* The source a header name (NUL-terminated, any case) stands for, or
 * SL_CLIENT_NONE. */
sl_client_source sl_client_source_of(const char *header_name);

/* Reads an IPv4 or IPv6 literal, exactly s[0 .. n) (no brackets, port or
 * spaces; no zone). Returns 0, or -1 when it is none. */
int sl_ip_parse(const char *s, size_t n, sl_ip *out);

/* An address from a socket's bytes: 4 (IPv4, network order) or 16 (IPv6). */
void sl_ip_from_bytes(sl_ip *out, const uint8_t *bytes, size_t n);

/* Whether ip is an IPv4 address (mapped). */
bool sl_ip_is_v4(const sl_ip *ip);

/* Writes ip's canonical text, NUL-terminated, into out (SL_IP_TEXT_MAX
 * bytes): a.b.c.d for IPv4, mapped or not; inet_ntop's form for IPv6. */
void sl_ip_format(const sl_ip *ip, char out[SL_IP_TEXT_MAX]);

/*
 * Parses spec[0 .. n): "none" (no proxy is trusted), or ranges separated by
 * commas (spaces around them allowed), each ADDR/BITS or a bare address
 * (/32, /128): "10.0.0.0/8,192.168.0.0/16,::1/128,127.0.0.1". Bits past the
 * prefix are ignored (127.0.0.1/8 is 127.0.0.0/8). An IPv6 range holds the
 * IPv4 addresses mapped into it: ::/0 is everything, ::ffff:0:0/96 every
 * IPv4 address. Returns 0, or -1 with the entry at fault and what was wrong
 * in err (errlen bytes); *t is left unchanged on error.
 */
int sl_trusted_parse(sl_trusted_proxies *t, const char *spec, size_t n, char *err,
                     size_t errlen);

/* Whether ip lies in one of t's ranges. */
bool sl_trusted_has(const sl_trusted_proxies *t, const sl_ip *ip);

/* The answer of sl_client_addr. */
typedef struct sl_client_addr_result {
    sl_ip ip;                   /* the client */
    char text[SL_IP_TEXT_MAX];  /* its canonical text (sl_ip_format) */
    bool from_header;           /* false: the socket's peer */
    char err[192];              /* after -1: what was wrong, naming the header */
} sl_client_addr_result;

/*
 * Finds the client of a request that came from `peer` (the socket's
 * address), with the header `src` names; `name` is that header as the
 * operator wrote it, for messages and lookup. Every field of that name in
 * headers[0 .. nheaders) is read, in order, as one list (RFC 9110 section
 * 5.3), as the rules at the top of this file say:
 *
 *   X-Forwarded-For  addresses separated by commas, spaces allowed: IPv4,
 *                    IPv4:port, IPv6 with or without brackets, [IPv6]:port
 *   Forwarded        elements separated by commas, each pairs separated by
 *                    ';'; an element's for= (token or quoted string, any
 *                    case) is its node: IPv4[:port], "[IPv6][:port]" (a port
 *                    may be an obfuscated _name), or unknown / _name, which
 *                    are no address; an element without for= is none either
 *   X-Real-IP        one address (one field), as X-Forwarded-For writes one
 *
 * A trusted peer with no such header (or only empty ones) is the client.
 * Returns 0 with out->ip and out->text, or -1 with out->err: an entry that
 * is malformed, more than SL_CLIENT_ADDR_MAX_HOPS entries, several X-Real-IP
 * fields, or a Forwarded chain whose nearest untrusted node is unknown.
 */
int sl_client_addr(const sl_trusted_proxies *t, const sl_ip *peer, sl_client_source src,
                   const char *name, const sl_http_header *headers, size_t nheaders,
                   sl_client_addr_result *out);

#endif
