/*
 * client_addr.c: the client's address from the socket's peer, the trusted
 * proxies and X-Forwarded-For, Forwarded or X-Real-IP. See client_addr.h for
 * the rules; this file keeps them in one order: addresses, ranges, the
 * header's entries, the walk.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/parse.h"
#include "proto/client_addr.h"

/* The longest entry read as an address: "[" + 45 + "]:65535" fits, and a
 * Forwarded node with an obfuscated port of a few bytes does too. */
#define SL_NODE_MAX 96

static const uint8_t sl_v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

sl_client_source sl_client_source_of(const char *header_name)
{
    if (strcasecmp(header_name, "X-Forwarded-For") == 0)
        return SL_CLIENT_XFF;
    if (strcasecmp(header_name, "Forwarded") == 0)
        return SL_CLIENT_FORWARDED;
    if (strcasecmp(header_name, "X-Real-IP") == 0)
        return SL_CLIENT_REAL_IP;
    return SL_CLIENT_NONE;
}

/* ---- addresses ---- */

int sl_ip_parse(const char *s, size_t n, sl_ip *out)
{
    char buf[SL_IP_TEXT_MAX];
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (memchr(buf, ':', n))
        return inet_pton(AF_INET6, buf, out->b) == 1 ? 0 : -1;
    uint8_t v4[4];
    if (inet_pton(AF_INET, buf, v4) != 1)
        return -1;
    sl_ip_from_bytes(out, v4, 4);
    return 0;
}

void sl_ip_from_bytes(sl_ip *out, const uint8_t *bytes, size_t n)
{
    if (n == 4) {
        memcpy(out->b, sl_v4_prefix, 12);
        memcpy(out->b + 12, bytes, 4);
    } else {
        memcpy(out->b, bytes, 16);
    }
}

bool sl_ip_is_v4(const sl_ip *ip)
{
    return memcmp(ip->b, sl_v4_prefix, 12) == 0;
}

void sl_ip_format(const sl_ip *ip, char out[SL_IP_TEXT_MAX])
{
    const char *ok = sl_ip_is_v4(ip) ? inet_ntop(AF_INET, ip->b + 12, out, SL_IP_TEXT_MAX)
                                     : inet_ntop(AF_INET6, ip->b, out, SL_IP_TEXT_MAX);
    if (!ok) /* cannot happen with a buffer this size */
        out[0] = '\0';
}

/* ---- ranges ---- */

static bool sl_cidr_has(const sl_cidr *c, const sl_ip *ip)
{
    unsigned whole = c->bits / 8u, rest = c->bits % 8u;
    if (memcmp(c->net.b, ip->b, whole) != 0)
        return false;
    if (rest == 0)
        return true;
    uint8_t mask = (uint8_t)(0xffu << (8u - rest));
    return (c->net.b[whole] & mask) == (ip->b[whole] & mask);
}

bool sl_trusted_has(const sl_trusted_proxies *t, const sl_ip *ip)
{
    for (size_t i = 0; i < t->n; i++)
        if (sl_cidr_has(&t->r[i], ip))
            return true;
    return false;
}

static bool sl_is_ows(char ch)
{
    return ch == ' ' || ch == '\t';
}

/* s[0 .. *n) without spaces and tabs around it. */
static const char *sl_trim(const char *s, size_t *n)
{
    while (*n > 0 && sl_is_ows(s[0])) {
        s++;
        (*n)--;
    }
    while (*n > 0 && sl_is_ows(s[*n - 1]))
        (*n)--;
    return s;
}

/* One range, ADDR[/BITS], into *out. */
static int sl_cidr_parse(const char *s, size_t n, sl_cidr *out, char *err, size_t errlen)
{
    const char *slash = memchr(s, '/', n);
    size_t alen = slash ? (size_t)(slash - s) : n;
    if (sl_ip_parse(s, alen, &out->net) != 0) {
        snprintf(err, errlen, "'%.*s' is not an IPv4 or IPv6 address", (int)alen, s);
        return -1;
    }
    bool v4 = memchr(s, ':', alen) == NULL; /* written as IPv4: bits count from 96 */
    unsigned max = v4 ? 32 : 128;
    uint64_t bits = max;
    if (slash) {
        size_t blen = n - alen - 1;
        if (blen == 0 || blen > 3 || !sl_parse_digits(slash + 1, blen, &bits) || bits > max) {
            snprintf(err, errlen, "'%.*s': the prefix length of an %s range is 0 to %u",
                     (int)n, s, v4 ? "IPv4" : "IPv6", max);
            return -1;
        }
    }
    out->bits = (uint8_t)(v4 ? 96 + bits : bits);
    for (unsigned i = out->bits; i < 128; i++) /* the bits past the prefix are ignored */
        out->net.b[i / 8] &= (uint8_t) ~(0x80u >> (i % 8));
    return 0;
}

int sl_trusted_parse(sl_trusted_proxies *t, const char *spec, size_t n, char *err,
                     size_t errlen)
{
    sl_trusted_proxies next = {0};
    size_t len = n;
    const char *s = sl_trim(spec, &len);
    if (len == 4 && strncasecmp(s, "none", 4) == 0) {
        *t = next;
        return 0;
    }
    const char *end = s + len;
    for (const char *p = s; p <= end;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t elen = (size_t)((comma ? comma : end) - p);
        const char *e = sl_trim(p, &elen);
        if (elen == 0) {
            snprintf(err, errlen, "an empty entry (ranges are separated by single commas, or "
                                  "the list is 'none')");
            return -1;
        }
        if (next.n == SL_TRUSTED_MAX) {
            snprintf(err, errlen, "more than %d ranges", SL_TRUSTED_MAX);
            return -1;
        }
        if (sl_cidr_parse(e, elen, &next.r[next.n], err, errlen) != 0)
            return -1;
        next.n++;
        if (!comma)
            break;
        p = comma + 1;
    }
    *t = next;
    return 0;
}

/* ---- the header's entries ---- */

/* What one entry is. */
enum {
    SL_NODE_ADDR,      /* an address */
    SL_NODE_HIDDEN,    /* Forwarded's unknown or _obfuscated node, or no for= */
    SL_NODE_MALFORMED, /* none of these: an error */
};

static bool sl_is_obfchar(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '.' || ch == '_' || ch == '-';
}

/* An obfuscated identifier (RFC 7239 section 6.3): '_' then ALPHA, DIGIT,
 * '.', '_' or '-'. */
static bool sl_is_obfuscated(const char *s, size_t n)
{
    if (n < 2 || s[0] != '_')
        return false;
    for (size_t i = 1; i < n; i++)
        if (!sl_is_obfchar(s[i]))
            return false;
    return true;
}

/* A port: 1 to 5 digits up to 65535, or (Forwarded) an obfuscated one. */
static bool sl_is_port(const char *s, size_t n, bool forwarded)
{
    uint64_t v;
    if (forwarded && sl_is_obfuscated(s, n))
        return true;
    return n >= 1 && n <= 5 && sl_parse_digits(s, n, &v) && v <= 65535;
}

/*
 * One node: "a.b.c.d", "a.b.c.d:port", "v6", "[v6]", "[v6]:port"; with
 * `forwarded`, also "unknown" and "_name" (SL_NODE_HIDDEN).
 */
static int sl_node_parse(const char *s, size_t n, bool forwarded, sl_ip *out)
{
    if (forwarded) {
        /* nodename [":" node-port]: unknown and _name may carry a port too */
        const char *colon = memchr(s, ':', n);
        size_t name = colon ? (size_t)(colon - s) : n;
        if ((name == 7 && strncasecmp(s, "unknown", 7) == 0) || sl_is_obfuscated(s, name))
            return !colon || sl_is_port(colon + 1, n - name - 1, true) ? SL_NODE_HIDDEN
                                                                        : SL_NODE_MALFORMED;
    }
    if (n > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (!close)
            return SL_NODE_MALFORMED;
        size_t alen = (size_t)(close - s - 1), after = n - alen - 2;
        if (!memchr(s + 1, ':', alen) || sl_ip_parse(s + 1, alen, out) != 0)
            return SL_NODE_MALFORMED;
        if (after == 0)
            return SL_NODE_ADDR;
        return close[1] == ':' && sl_is_port(close + 2, after - 1, forwarded) ? SL_NODE_ADDR
                                                                             : SL_NODE_MALFORMED;
    }
    const char *colon = memchr(s, ':', n);
    if (colon && memchr(colon + 1, ':', n - (size_t)(colon - s) - 1)) /* bare IPv6 */
        return sl_ip_parse(s, n, out) == 0 ? SL_NODE_ADDR : SL_NODE_MALFORMED;
    size_t alen = colon ? (size_t)(colon - s) : n;
    if (sl_ip_parse(s, alen, out) != 0)
        return SL_NODE_MALFORMED;
    if (colon && !sl_is_port(colon + 1, n - alen - 1, forwarded))
        return SL_NODE_MALFORMED;
    return SL_NODE_ADDR;
}

static bool sl_is_tchar(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

/*
 * One Forwarded element ("for=...;proto=https;by=..."): its for= node,
 * unquoted, into node[SL_NODE_MAX] (*nodelen); *has_for false when it has
 * none. Returns 0, or -1 when the element is not pairs of token=value.
 */
static int sl_forwarded_for(const char *s, size_t n, char *node, size_t *nodelen, bool *has_for)
{
    *has_for = false;
    size_t i = 0;
    while (i <= n) {
        /* One pair, up to ';' or the end; [pair] may be empty. */
        while (i < n && sl_is_ows(s[i]))
            i++;
        if (i == n)
            break;
        if (s[i] == ';') {
            i++;
            continue;
        }
        size_t name = i;
        while (i < n && sl_is_tchar(s[i]))
            i++;
        size_t name_len = i - name;
        if (name_len == 0 || i == n || s[i] != '=')
            return -1;
        i++;
        bool is_for = name_len == 3 && strncasecmp(s + name, "for", 3) == 0;
        if (is_for && *has_for)
            return -1; /* two for= in one element: which is the hop? */
        char buf[SL_NODE_MAX];
        size_t blen = 0;
        if (i < n && s[i] == '"') {
            /* quoted-string, with quoted-pair escapes */
            i++;
            for (;;) {
                if (i == n)
                    return -1;
                char ch = s[i++];
                if (ch == '"')
                    break;
                if (ch == '\\') {
                    if (i == n)
                        return -1;
                    ch = s[i++];
                }
                if (blen == sizeof buf)
                    return -1;
                buf[blen++] = ch;
            }
        } else {
            /* A token; ':' and '[' ']' too, as some proxies leave IPv6
             * unquoted, which is no harm since ';' and ',' still end it. */
            while (i < n && (sl_is_tchar(s[i]) || s[i] == ':' || s[i] == '[' || s[i] == ']')) {
                if (blen == sizeof buf)
                    return -1;
                buf[blen++] = s[i++];
            }
            if (blen == 0)
                return -1;
        }
        while (i < n && sl_is_ows(s[i]))
            i++;
        if (i < n && s[i] != ';')
            return -1;
        i++;
        if (is_for) {
            *has_for = true;
            memcpy(node, buf, blen);
            *nodelen = blen;
        }
    }
    return 0;
}

/* The entries of every field called `name`, in order, as slices: commas
 * inside a quoted string (Forwarded) do not split. Returns the count,
 * -1 past SL_CLIENT_ADDR_MAX_HOPS, -2 for an unterminated quoted string,
 * -3 for several X-Real-IP fields. */
static int sl_entries(sl_client_source src, const char *name, const sl_http_header *headers,
                      size_t nheaders, sl_http_slice *e)
{
    int n = 0, fields = 0;
    for (size_t h = 0; h < nheaders; h++) {
        if (!sl_http_slice_ieq(headers[h].name, name))
            continue;
        const char *v = headers[h].value.ptr;
        size_t len = headers[h].value.len;
        if (len == 0)
            continue; /* an empty field lists nothing */
        if (src == SL_CLIENT_REAL_IP) {
            if (++fields > 1)
                return -3;
            e[n++] = headers[h].value;
            continue;
        }
        size_t start = 0;
        bool quoted = false;
        for (size_t i = 0; i <= len; i++) {
            if (i < len && quoted) {
                if (v[i] == '\\' && i + 1 < len)
                    i++;
                else if (v[i] == '"')
                    quoted = false;
                continue;
            }
            if (i < len && v[i] == '"' && src == SL_CLIENT_FORWARDED) {
                quoted = true;
                continue;
            }
            if (i < len && v[i] != ',')
                continue;
            if (n == SL_CLIENT_ADDR_MAX_HOPS)
                return -1;
            e[n++] = (sl_http_slice){v + start, i - start};
            start = i + 1;
        }
        if (quoted)
            return -2;
    }
    return n;
}

/* ---- the walk ---- */

static int sl_found(sl_client_addr_result *out, const sl_ip *ip, bool from_header)
{
    out->ip = *ip;
    out->from_header = from_header;
    sl_ip_format(ip, out->text);
    out->err[0] = '\0';
    return 0;
}

int sl_client_addr(const sl_trusted_proxies *t, const sl_ip *peer, sl_client_source src,
                   const char *name, const sl_http_header *headers, size_t nheaders,
                   sl_client_addr_result *out)
{
    if (src == SL_CLIENT_NONE || !sl_trusted_has(t, peer))
        return sl_found(out, peer, false);
    sl_http_slice e[SL_CLIENT_ADDR_MAX_HOPS];
    int n = sl_entries(src, name, headers, nheaders, e);
    if (n == -1) {
        snprintf(out->err, sizeof out->err, "%s lists more than %d addresses", name,
                 SL_CLIENT_ADDR_MAX_HOPS);
        return -1;
    }
    if (n == -2) {
        snprintf(out->err, sizeof out->err, "%s has a quoted string without its closing quote",
                 name);
        return -1;
    }
    if (n == -3) {
        snprintf(out->err, sizeof out->err, "%s is given more than once", name);
        return -1;
    }
    if (n == 0)
        return sl_found(out, peer, false);
    sl_ip last;
    bool have_last = false;
    for (int i = n - 1; i >= 0; i--) {
        size_t len = e[i].len;
        const char *s = sl_trim(e[i].ptr, &len);
        char node[SL_NODE_MAX];
        size_t nodelen = 0;
        int kind;
        sl_ip ip;
        if (src == SL_CLIENT_FORWARDED) {
            bool has_for;
            if (sl_forwarded_for(s, len, node, &nodelen, &has_for) != 0)
                kind = SL_NODE_MALFORMED;
            else if (!has_for)
                kind = SL_NODE_HIDDEN;
            else
                kind = sl_node_parse(node, nodelen, true, &ip);
        } else {
            kind = len > SL_NODE_MAX ? SL_NODE_MALFORMED : sl_node_parse(s, len, false, &ip);
        }
        if (kind == SL_NODE_MALFORMED) {
            snprintf(out->err, sizeof out->err,
                     "%s: entry %d of %d ('%.*s') is not %s", name, i + 1, n,
                     (int)(len > 48 ? 48 : len), s,
                     src == SL_CLIENT_FORWARDED ? "an element with a valid for= node"
                                                : "an IP address");
            return -1;
        }
        if (kind == SL_NODE_HIDDEN) {
            if (have_last)
                return sl_found(out, &last, true);
            snprintf(out->err, sizeof out->err,
                     "%s: the nearest node (entry %d of %d) is unknown or obfuscated: no "
                     "address to key by", name, i + 1, n);
            return -1;
        }
        if (src == SL_CLIENT_REAL_IP || !sl_trusted_has(t, &ip))
            return sl_found(out, &ip, true);
        last = ip;
        have_last = true;
    }
    return sl_found(out, &last, true); /* all trusted: the left-most */
}
