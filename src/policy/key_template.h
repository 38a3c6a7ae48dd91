/*
 * policy/key_template.h: a policy's key template over what a request carries
 * (docs/configuration.md, "Key templates"), parsed once at config time and
 * rendered into a store key per request.
 *
 *   "{{{policy}:{header.x-api-key}:{method}}}"
 *    |  |       | |                | |      |
 *    {  policy  : header.x-api-key : method }     seven parts
 *
 *   rendered for policy api, X-Api-Key: abc, GET:   {api:abc:GET}
 *
 * The parts:
 *
 *   text              any bytes but '{' and '}'; "{{" and "}}" write one brace
 *                     (so that a Redis Cluster hash tag can be written)
 *   {key}             the key the request names (the caller supplies it)
 *   {policy}          the policy's name
 *   {header.NAME}     the first header field called NAME (any case), without
 *                     the spaces and tabs around it; empty or only blanks is
 *                     missing (a later field of that name is not read)
 *   {query.NAME}      the first parameter of the query string whose decoded
 *                     name is NAME (exact bytes), its value percent-decoded as
 *                     proto/http.h's sl_http_percent_decode does ('+' is a
 *                     space, as in HTML forms); empty, or a value with a bad
 *                     %XX escape, is missing
 *   {method}          the method, as sent
 *   {path}            the path without its query, as sent (not decoded)
 *   {path/N}          its first N (1 .. 16) segments: "/v1/orders/123" with
 *                     N = 2 is "/v1/orders". Empty segments ("//", a trailing
 *                     slash) do not count and are not written, so that
 *                     "/v1//orders/" is "/v1/orders" too; a path with fewer
 *                     segments is all of them; one with none is "/"
 *   {ip}              the client's address: IPv4 as a.b.c.d, IPv6 masked to
 *                     its /64 ("2001:db8:1:2::/64"): a client owns a /64 and
 *                     rotates through it at will
 *   {ip/N}            IPv4 masked to /N (0 .. 32), "203.0.113.0/24" (/32: the
 *                     address alone); IPv6 still its /64
 *   {ip6/M}           IPv6 masked to /M (0 .. 128; /128: the address alone);
 *                     IPv4 whole
 *   {ip/N,ip6/M}      both (either order). IPv4-mapped IPv6 is IPv4.
 *
 * Values are copied as they are, with no escaping: a header or query value
 * may hold ':' or any other byte the template also uses, and a decoded query
 * value may hold any byte at all (%00, %0A): store keys are bytes, and
 * nothing downstream reads them as text. Whoever needs keys that cannot
 * collide across parts writes the request parts it trusts to be clean.
 *
 * Parsing and writing back live here, beside the policies that keep a
 * parsed template; rendering a request's key is proto/key_template.h's,
 * which knows what an HTTP request carries. Nothing here allocates or does
 * I/O; a template is a fixed-size value and every loop is bounded by the
 * template's length.
 */
#ifndef SLUICE_POLICY_KEY_TEMPLATE_H
#define SLUICE_POLICY_KEY_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>


#define SL_KEY_TEMPLATE_MAX 256      /* bytes of template text */
#define SL_KEY_TEMPLATE_MAX_PARTS 16 /* parts: each run of text and each {...} */
#define SL_KEY_RENDER_MAX 4096       /* bytes of a rendered key (cap is lowered to it) */
#define SL_KEY_PATH_MAX_SEGMENTS 16  /* N of {path/N} */

/* What a part is. The order is the order of the bits in `uses`. */
typedef enum sl_key_part_kind {
    SL_KEY_PART_TEXT = 0,
    SL_KEY_PART_KEY,
    SL_KEY_PART_POLICY,
    SL_KEY_PART_HEADER,
    SL_KEY_PART_QUERY,
    SL_KEY_PART_METHOD,
    SL_KEY_PART_PATH,
    SL_KEY_PART_IP,
} sl_key_part_kind;

#define SL_KEY_USES(kind) (1u << (kind))
/* The parts only an HTTP request carries: a template that uses none of them
 * can be rendered by every face (RESP, the module, the CLI). */
#define SL_KEY_USES_REQUEST                                                            \
    (SL_KEY_USES(SL_KEY_PART_HEADER) | SL_KEY_USES(SL_KEY_PART_QUERY) |                \
     SL_KEY_USES(SL_KEY_PART_METHOD) | SL_KEY_USES(SL_KEY_PART_PATH) |                 \
     SL_KEY_USES(SL_KEY_PART_IP))

typedef struct sl_key_part {
    uint8_t kind;     /* sl_key_part_kind */
    uint8_t segments; /* path: 0 for the whole path, else N of {path/N} */
    uint8_t v4_bits;  /* ip: 0 .. 32 (32 when not given) */
    uint8_t v6_bits;  /* ip: 0 .. 128 (64 when not given) */
    uint16_t off;     /* text: its bytes (braces unescaped) at text[off .. off + len);
                         others: their canonical name ("header.x-api-key",
                         "ip/24"), NUL-terminated, at text[off] */
    uint16_t len;     /* text: its length; header, query: the length of NAME,
                         which starts after the "header." or "query." */
} sl_key_part;

/* A parsed template. A plain value: copy it, keep it in a policy. */
typedef struct sl_key_template {
    size_t nparts;
    unsigned uses; /* SL_KEY_USES(kind) of each kind of part it has */
    sl_key_part parts[SL_KEY_TEMPLATE_MAX_PARTS];
    char text[SL_KEY_TEMPLATE_MAX + 1];
} sl_key_template;

/*
 * Parses the template s[0 .. n) into *out. Returns 0, or -1 with what was
 * wrong, where (the column, from 1, of the part at fault) and the limit it
 * broke in err (errlen bytes, lowercase, no final period), e.g.
 * "unknown part '{hedaer.x}' at column 3: use key, policy, ...". *out is
 * unspecified after an error.
 */
int sl_key_template_parse(const char *s, size_t n, sl_key_template *out, char *err,
                          size_t errlen);

/* Whether t reads the request (a header, the query, method, path or address),
 * which only an HTTP face can render. */
static inline bool sl_key_template_reads_request(const sl_key_template *t)
{
    return (t->uses & SL_KEY_USES_REQUEST) != 0;
}

/* Whether t uses {key}: without it, a request need not name a key. */
static inline bool sl_key_template_uses_key(const sl_key_template *t)
{
    return (t->uses & SL_KEY_USES(SL_KEY_PART_KEY)) != 0;
}

/*
 * Writes t back as canonical template text, NUL-terminated, into buf[0 ..
 * cap): braces of text doubled, header names lowercase, numbers without
 * leading zeros, an ip part in its shortest form ("{ip/32,ip6/64}" is
 * "{ip}", "{ip6/48,ip/24}" is "{ip/24,ip6/48}"). It is never longer than the
 * text t was parsed from, so SL_KEY_TEMPLATE_MAX + 1 bytes always suffice,
 * and parsing it gives t back. Text may hold any byte, a NUL too: use the
 * length returned, not strlen. Returns its length, or -1 when cap is too
 * small (buf then holds as much as fits, NUL-terminated, when cap > 0).
 */
long sl_key_template_describe(const sl_key_template *t, char *buf, size_t cap);

#endif
