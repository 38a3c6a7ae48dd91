/*
 * test_client_addr.c: the client's address behind trusted proxies
 * (src/proto/client_addr.c): addresses and their canonical text, ranges and
 * their edges, the right-most rule against forged entries, Forwarded's
 * forms and hidden nodes, malformed entries and the caps.
 *
 * Header values are copied into heap buffers of exactly their length, so
 * that AddressSanitizer reports any read past an entry.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/client_addr.h"

/* The ranges of a --trusted-proxies value, which must parse. */
static sl_trusted_proxies trusted(const char *spec)
{
    sl_trusted_proxies t;
    char err[160] = "";
    int rc = sl_trusted_parse(&t, spec, strlen(spec), err, sizeof err);
    cr_assert_eq(rc, 0, "'%s': %s", spec, err);
    return t;
}

static sl_ip ip(const char *s)
{
    sl_ip a;
    cr_assert_eq(sl_ip_parse(s, strlen(s), &a), 0, "'%s' is an address", s);
    return a;
}

/* A request's fields: name, value, name, value, ..., NULL. */
typedef struct fields {
    sl_http_header h[80];
    char *copies[80];
    size_t n;
} fields;

static void add(fields *f, const char *name, const char *value)
{
    size_t len = strlen(value);
    char *v = malloc(len ? len : 1);
    cr_assert_not_null(v);
    memcpy(v, value, len);
    f->copies[f->n] = v;
    f->h[f->n].name = (sl_http_slice){name, strlen(name)};
    f->h[f->n].value = (sl_http_slice){v, len};
    f->n++;
}

static void drop(fields *f)
{
    for (size_t i = 0; i < f->n; i++)
        free(f->copies[i]);
}

/* The client for one header value (NULL: no field), from peer, behind t;
 * "ERR: message" when it is an error. */
static const char *client(const sl_trusted_proxies *t, const char *peer, const char *name,
                          const char *value)
{
    static char answer[256];
    fields f = {0};
    if (value)
        add(&f, name, value);
    add(&f, "Host", "example.com");
    sl_ip p = ip(peer);
    sl_client_addr_result res;
    int rc = sl_client_addr(t, &p, sl_client_source_of(name), name, f.h, f.n, &res);
    drop(&f);
    if (rc != 0)
        snprintf(answer, sizeof answer, "ERR: %s", res.err);
    else
        snprintf(answer, sizeof answer, "%s", res.text);
    return answer;
}

#define XFF "X-Forwarded-For"

Test(client_addr, addresses_and_their_text)
{
    char text[SL_IP_TEXT_MAX];
    sl_ip a = ip("203.0.113.7");
    cr_assert(sl_ip_is_v4(&a));
    sl_ip_format(&a, text);
    cr_assert_str_eq(text, "203.0.113.7");
    sl_ip m = ip("::ffff:203.0.113.7"); /* mapped: the same address, written as IPv4 */
    cr_assert(memcmp(a.b, m.b, 16) == 0);
    sl_ip_format(&m, text);
    cr_assert_str_eq(text, "203.0.113.7");
    sl_ip v6 = ip("2001:DB8:0:0::1");
    cr_assert(!sl_ip_is_v4(&v6));
    sl_ip_format(&v6, text);
    cr_assert_str_eq(text, "2001:db8::1", "inet_ntop's canonical form");
    uint8_t raw[4] = {10, 1, 2, 3};
    sl_ip_from_bytes(&a, raw, 4);
    sl_ip_format(&a, text);
    cr_assert_str_eq(text, "10.1.2.3");
    sl_ip bad;
    const char *nots[] = {"", "1.2.3", "1.2.3.4.5", "256.1.1.1", "01.2.3.4", "fe80::1%eth0",
                          "[::1]", "::1:", "1.2.3.4 ", "example.com", "1:2:3:4:5:6:7:8:9"};
    for (size_t i = 0; i < sizeof nots / sizeof *nots; i++)
        cr_assert_eq(sl_ip_parse(nots[i], strlen(nots[i]), &bad), -1, "'%s'", nots[i]);
}

Test(client_addr, ranges_and_their_edges)
{
    sl_trusted_proxies t = trusted("10.0.0.0/8, 192.168.0.0/16,::1/128,127.0.0.1");
    cr_assert_eq(t.n, 4);
    sl_ip in = ip("10.0.0.0"), top = ip("10.255.255.255"), out = ip("11.0.0.0"), lo = ip("127.0.0.1"), lo2 = ip("127.0.0.2");
    cr_assert(sl_trusted_has(&t, &in) && sl_trusted_has(&t, &top));
    cr_assert(!sl_trusted_has(&t, &out));
    cr_assert(sl_trusted_has(&t, &lo));
    cr_assert(!sl_trusted_has(&t, &lo2), "a bare IPv4 address is a /32");
    sl_ip v6lo = ip("::1"), v6two = ip("::2"), mapped = ip("::ffff:10.1.1.1");
    cr_assert(sl_trusted_has(&t, &v6lo));
    cr_assert(!sl_trusted_has(&t, &v6two), "a bare IPv6 address is a /128");
    cr_assert(sl_trusted_has(&t, &mapped), "a mapped address is its IPv4 one");

    /* /0 */
    sl_trusted_proxies all4 = trusted("0.0.0.0/0"), all = trusted("::/0");
    sl_ip any4 = ip("198.51.100.1"), any6 = ip("2001:db8::5");
    cr_assert(sl_trusted_has(&all4, &any4));
    cr_assert(!sl_trusted_has(&all4, &any6), "0.0.0.0/0 is every IPv4 address, no IPv6 one");
    cr_assert(sl_trusted_has(&all, &any4) && sl_trusted_has(&all, &any6), "::/0 is all");
    /* /32 and /128 exactly; odd prefixes split a byte */
    sl_trusted_proxies one = trusted("198.51.100.1/32,2001:db8::5/128,172.16.0.0/12");
    cr_assert(sl_trusted_has(&one, &any4) && sl_trusted_has(&one, &any6));
    sl_ip next4 = ip("198.51.100.2"), next6 = ip("2001:db8::4");
    cr_assert(!sl_trusted_has(&one, &next4) && !sl_trusted_has(&one, &next6));
    sl_ip a = ip("172.31.255.255"), b = ip("172.32.0.0"), c = ip("172.15.255.255");
    cr_assert(sl_trusted_has(&one, &a) && !sl_trusted_has(&one, &b) && !sl_trusted_has(&one, &c));
    /* bits past the prefix are ignored */
    sl_trusted_proxies host_bits = trusted("127.0.0.1/8");
    cr_assert(sl_trusted_has(&host_bits, &lo2));
    /* none */
    sl_trusted_proxies none = trusted(" none ");
    cr_assert_eq(none.n, 0);
    cr_assert(!sl_trusted_has(&none, &lo));
}

Test(client_addr, bad_ranges_say_what_is_wrong)
{
    const char *bad[][2] = {
        {"", "empty entry"},
        {"10.0.0.0/8,,::1", "empty entry"},
        {"10.0.0.0/8,", "empty entry"},
        {"10.0.0.0/33", "0 to 32"},
        {"::/129", "0 to 128"},
        {"10.0.0.0/", "0 to 32"},
        {"10.0.0.0/-1", "0 to 32"},
        {"10.0.0/8", "'10.0.0' is not an IPv4 or IPv6 address"},
        {"localhost", "not an IPv4 or IPv6 address"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sl_trusted_proxies t = {.n = 99};
        char err[160] = "";
        cr_assert_eq(sl_trusted_parse(&t, bad[i][0], strlen(bad[i][0]), err, sizeof err), -1,
                     "'%s'", bad[i][0]);
        cr_assert(strstr(err, bad[i][1]), "'%s': %s", bad[i][0], err);
        cr_assert_eq(t.n, 99, "left unchanged");
    }
    char many[2048] = "";
    for (int i = 0; i < 65; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "%s10.0.%d.0/24",
                 i ? "," : "", i);
    sl_trusted_proxies t;
    char err[160] = "";
    cr_assert_eq(sl_trusted_parse(&t, many, strlen(many), err, sizeof err), -1);
    cr_assert(strstr(err, "more than 64 ranges"), "%s", err);
    many[strlen(many) - strlen(",10.0.64.0/24")] = '\0';
    cr_assert_eq(sl_trusted_parse(&t, many, strlen(many), err, sizeof err), 0, "64 fit: %s", err);
    cr_assert_eq(t.n, 64);
}

Test(client_addr, the_peer_is_the_client_unless_trusted)
{
    sl_trusted_proxies lo = trusted("127.0.0.0/8,::1"), none = trusted("none");
    /* an untrusted peer: every header is ignored, even a malformed one */
    cr_assert_str_eq(client(&lo, "198.51.100.9", XFF, "1.2.3.4"), "198.51.100.9");
    cr_assert_str_eq(client(&lo, "198.51.100.9", XFF, "garbage"), "198.51.100.9");
    cr_assert_str_eq(client(&none, "127.0.0.1", XFF, "1.2.3.4"), "127.0.0.1");
    cr_assert_str_eq(client(&none, "127.0.0.1", "Forwarded", "for=1.2.3.4"), "127.0.0.1");
    cr_assert_str_eq(client(&none, "127.0.0.1", "X-Real-IP", "1.2.3.4"), "127.0.0.1");
    cr_assert_str_eq(client(&lo, "::ffff:198.51.100.9", XFF, "1.2.3.4"), "198.51.100.9");
    /* a trusted peer without the header, or with an empty one, is the client */
    cr_assert_str_eq(client(&lo, "127.0.0.1", XFF, NULL), "127.0.0.1");
    cr_assert_str_eq(client(&lo, "::1", XFF, ""), "::1");
    cr_assert_str_eq(client(&lo, "127.0.0.1", "X-Real-IP", NULL), "127.0.0.1");
}

Test(client_addr, the_right_most_untrusted_address)
{
    sl_trusted_proxies t = trusted("127.0.0.0/8,::1,10.0.0.0/8");
    /* a forged left-most entry changes nothing */
    cr_assert_str_eq(client(&t, "127.0.0.1", XFF, "203.0.113.7"), "203.0.113.7");
    cr_assert_str_eq(client(&t, "127.0.0.1", XFF, "6.6.6.6, 203.0.113.7"), "203.0.113.7");
    cr_assert_str_eq(client(&t, "127.0.0.1", XFF, "6.6.6.6,203.0.113.7, 10.1.1.1"),
                     "203.0.113.7", "trusted proxies are skipped");
    cr_assert_str_eq(client(&t, "127.0.0.1", XFF, "garbage, 203.0.113.7, 10.1.1.1"),
                     "203.0.113.7", "nothing left of the client is read");
    cr_assert_str_eq(client(&t, "127.0.0.1", XFF, "10.0.0.5, 10.1.1.1"), "10.0.0.5",
                     "all trusted: the left-most");
    cr_assert_str_eq(client(&t, "127.0.0.1", XFF, "127.0.0.1"), "127.0.0.1");
    /* forms: ports, brackets, IPv6, mapped, blanks */
    cr_assert_str_eq(client(&t, "127.0.0.1", XFF, "203.0.113.7:4711"), "203.0.113.7");
    cr_assert_str_eq(client(&t, "127.0.0.1", XFF, "2001:db8::1"), "2001:db8::1");
    cr_assert_str_eq(client(&t, "127.0.0.1", XFF, "[2001:DB8::1]"), "2001:db8::1");
    cr_assert_str_eq(client(&t, "127.0.0.1", XFF, "[2001:db8::1]:443 ,\t::1"), "2001:db8::1");
    cr_assert_str_eq(client(&t, "::1", XFF, "::ffff:203.0.113.7"), "203.0.113.7");
    cr_assert_str_eq(client(&t, "127.0.0.1", XFF, "::ffff:10.0.0.1, 10.0.0.2"), "10.0.0.1");
}

Test(client_addr, several_fields_are_one_list)
{
    sl_trusted_proxies t = trusted("127.0.0.0/8,10.0.0.0/8");
    fields f = {0};
    add(&f, "x-forwarded-for", "6.6.6.6, 203.0.113.7");
    add(&f, "Host", "h");
    add(&f, "X-FORWARDED-FOR", "10.0.0.1");
    sl_ip p = ip("127.0.0.1");
    sl_client_addr_result res;
    cr_assert_eq(sl_client_addr(&t, &p, SL_CLIENT_XFF, XFF, f.h, f.n, &res), 0, "%s", res.err);
    cr_assert_str_eq(res.text, "203.0.113.7");
    cr_assert(res.from_header);
    drop(&f);
    fields g = {0};
    add(&g, "Forwarded", "for=6.6.6.6");
    add(&g, "Forwarded", "for=198.51.100.1, for=10.9.9.9");
    cr_assert_eq(sl_client_addr(&t, &p, SL_CLIENT_FORWARDED, "Forwarded", g.h, g.n, &res), 0);
    cr_assert_str_eq(res.text, "198.51.100.1");
    drop(&g);
    fields r = {0};
    add(&r, "X-Real-IP", "1.1.1.1");
    add(&r, "X-Real-IP", "2.2.2.2");
    cr_assert_eq(sl_client_addr(&t, &p, SL_CLIENT_REAL_IP, "X-Real-IP", r.h, r.n, &res), -1);
    cr_assert(strstr(res.err, "X-Real-IP is given more than once"), "%s", res.err);
    drop(&r);
}

Test(client_addr, forwarded_forms)
{
    sl_trusted_proxies t = trusted("127.0.0.0/8,::1,10.0.0.0/8");
    const char *F = "Forwarded";
    cr_assert_str_eq(client(&t, "127.0.0.1", F, "for=203.0.113.7"), "203.0.113.7");
    cr_assert_str_eq(client(&t, "127.0.0.1", F, "For=\"203.0.113.7:4711\""), "203.0.113.7");
    cr_assert_str_eq(client(&t, "127.0.0.1", F, "for=\"[2001:db8::1]:4711\""), "2001:db8::1");
    cr_assert_str_eq(client(&t, "127.0.0.1", F, "for=\"[2001:db8::1]\";proto=https"),
                     "2001:db8::1");
    cr_assert_str_eq(client(&t, "127.0.0.1", F, "proto=https; for=203.0.113.7 ;by=10.0.0.1"),
                     "203.0.113.7");
    cr_assert_str_eq(client(&t, "127.0.0.1", F, "for=\"203.0.113.7:_port\""), "203.0.113.7",
                     "an obfuscated port");
    cr_assert_str_eq(client(&t, "127.0.0.1", F, "for=\"\\203.0.113.7\""), "203.0.113.7",
                     "a quoted-pair");
    cr_assert_str_eq(client(&t, "127.0.0.1", F, "for=6.6.6.6, for=203.0.113.7, for=10.0.0.1"),
                     "203.0.113.7", "a forged left-most element changes nothing");
    cr_assert_str_eq(client(&t, "127.0.0.1", F, "for=\"a,b\";by=x, for=203.0.113.7"),
                     "203.0.113.7", "a comma inside quotes splits nothing");
}

Test(client_addr, forwarded_hidden_nodes)
{
    sl_trusted_proxies t = trusted("127.0.0.0/8,10.0.0.0/8");
    const char *F = "Forwarded";
    /* the walk stops at unknown or _hidden: the last address right of it */
    cr_assert_str_eq(client(&t, "127.0.0.1", F, "for=203.0.113.7, for=unknown, for=10.0.0.1"),
                     "10.0.0.1");
    cr_assert_str_eq(client(&t, "127.0.0.1", F, "for=_hidden, for=10.0.0.2"), "10.0.0.2");
    cr_assert_str_eq(client(&t, "127.0.0.1", F, "for=\"_hidden:_port\", for=10.0.0.4"),
                     "10.0.0.4", "an obfuscated node with a port");
    cr_assert_str_eq(client(&t, "127.0.0.1", F, "for=\"unknown:80\", for=10.0.0.5"), "10.0.0.5");
    cr_assert(strstr(client(&t, "127.0.0.1", F, "for=\"unknown:x\""), "ERR: Forwarded: entry 1"));
    cr_assert_str_eq(client(&t, "127.0.0.1", F, "proto=http, for=10.0.0.3"), "10.0.0.3",
                     "an element without for= is no address either");
    /* and with none right of it, there is nothing to key by */
    cr_assert(strstr(client(&t, "127.0.0.1", F, "for=UNKNOWN"), "ERR: Forwarded: the nearest "
                                                                 "node (entry 1 of 1) is unknown"));
    cr_assert(strstr(client(&t, "127.0.0.1", F, "for=1.2.3.4, for=\"_x.y\""), "ERR: Forwarded"));
    /* but an untrusted node right of one is the client */
    cr_assert_str_eq(client(&t, "127.0.0.1", F, "for=unknown, for=198.51.100.1"),
                     "198.51.100.1");
}

Test(client_addr, malformed_entries_are_errors)
{
    sl_trusted_proxies t = trusted("127.0.0.0/8,10.0.0.0/8");
    const char *xff[] = {"garbage", "203.0.113.7,", "10.0.0.1, ,10.0.0.2", "1.2.3.4:", "1.2.3.4:99999",
                         "1.2.3.4:80:80", "[1.2.3.4]", "[2001:db8::1", "[2001:db8::1]x",
                         "unknown", "_hidden", "203.0.113.7 10.0.0.1", "1.2.3.4, 10.0.0.1 x"};
    for (size_t i = 0; i < sizeof xff / sizeof *xff; i++) {
        const char *a = client(&t, "127.0.0.1", XFF, xff[i]);
        cr_assert(strncmp(a, "ERR: X-Forwarded-For: entry ", 28) == 0, "'%s': %s", xff[i], a);
        cr_assert(strstr(a, "is not an IP address"), "'%s': %s", xff[i], a);
    }
    const char *fwd[] = {"for", "for=", "for=\"1.2.3.4", "for=1.2.3.4;for=5.6.7.8",
                         "for=\"2001:db8::1]\"", "for=1.2.3.4 x", "=1.2.3.4", "for=\"1.2.3.4\"x",
                         "for=_"};
    for (size_t i = 0; i < sizeof fwd / sizeof *fwd; i++) {
        const char *a = client(&t, "127.0.0.1", "Forwarded", fwd[i]);
        cr_assert(strncmp(a, "ERR: Forwarded", 14) == 0, "'%s': %s", fwd[i], a);
    }
    cr_assert(strstr(client(&t, "127.0.0.1", "Forwarded", "for=\"1.2.3.4"),
                     "without its closing quote"));
    cr_assert(strstr(client(&t, "127.0.0.1", "X-Real-IP", "1.2.3.4, 5.6.7.8"),
                     "ERR: X-Real-IP: entry 1 of 1"));
    cr_assert_str_eq(client(&t, "127.0.0.1", "X-Real-IP", "[2001:db8::7]:80"), "2001:db8::7");
    cr_assert_str_eq(client(&t, "127.0.0.1", "X-Real-IP", "10.0.0.1"), "10.0.0.1",
                     "X-Real-IP names the client itself, trusted or not");
}

Test(client_addr, too_many_entries)
{
    sl_trusted_proxies t = trusted("127.0.0.0/8");
    char list[1024] = "";
    for (int i = 0; i < 64; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s10.0.0.%d", i ? "," : "",
                 i);
    cr_assert_str_eq(client(&t, "127.0.0.1", XFF, list), "10.0.0.63", "64 fit");
    strcat(list, ",10.0.1.1");
    cr_assert_str_eq(client(&t, "127.0.0.1", XFF, list),
                     "ERR: X-Forwarded-For lists more than 64 addresses");
    /* the count covers every field of the name together */
    fields f = {0};
    for (int i = 0; i < 65; i++)
        add(&f, XFF, "203.0.113.1");
    sl_ip p = ip("127.0.0.1");
    sl_client_addr_result res;
    cr_assert_eq(sl_client_addr(&t, &p, SL_CLIENT_XFF, XFF, f.h, f.n, &res), -1);
    cr_assert(strstr(res.err, "more than 64"), "%s", res.err);
    drop(&f);
}

Test(client_addr, sources)
{
    cr_assert_eq(sl_client_source_of("x-forwarded-for"), SL_CLIENT_XFF);
    cr_assert_eq(sl_client_source_of("FORWARDED"), SL_CLIENT_FORWARDED);
    cr_assert_eq(sl_client_source_of("X-Real-Ip"), SL_CLIENT_REAL_IP);
    cr_assert_eq(sl_client_source_of("X-Api-Key"), SL_CLIENT_NONE);
    sl_trusted_proxies t = trusted("::/0");
    cr_assert_str_eq(client(&t, "127.0.0.1", "X-Api-Key", "1.2.3.4"), "127.0.0.1",
                     "another header says nothing of the client's address");
}
