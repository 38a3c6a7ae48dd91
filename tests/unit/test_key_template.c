/*
 * test_key_template.c: key templates over a request (src/proto/key_template.c):
 * every part and its missing case, combined templates, escaped braces, the
 * address masks at their edges, path prefixes, query decoding, every parse
 * error and its message, a key that does not fit, and the canonical text
 * that describe writes back.
 *
 * Every string a request carries is copied into a heap buffer of exactly its
 * length, so that AddressSanitizer reports any read past one.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/key_template.h"

/* Exact-size heap copies, freed by drop_all() at the end of each render. */
static char *copies[64];
static size_t ncopies;

static sl_http_slice slice(const char *s)
{
    if (!s)
        return (sl_http_slice){NULL, 0};
    size_t n = strlen(s);
    char *c = malloc(n ? n : 1);
    cr_assert_not_null(c);
    memcpy(c, s, n);
    cr_assert_lt(ncopies, 64);
    copies[ncopies++] = c;
    return (sl_http_slice){c, n};
}

static void drop_all(void)
{
    for (size_t i = 0; i < ncopies; i++)
        free(copies[i]);
    ncopies = 0;
}

static sl_key_template parse(const char *s)
{
    sl_key_template t;
    char err[256] = "";
    int rc = sl_key_template_parse(s, strlen(s), &t, err, sizeof err);
    cr_assert_eq(rc, 0, "'%s': %s", s, err);
    return t;
}

/* The error of a template that must not parse. */
static const char *parse_error(const char *s)
{
    static char err[256];
    sl_key_template t;
    err[0] = '\0';
    int rc = sl_key_template_parse(s, strlen(s), &t, err, sizeof err);
    cr_assert_eq(rc, -1, "'%s' must be refused", s);
    cr_assert_neq(err[0], '\0');
    return err;
}

/* A request: the usual one, which each test changes as it needs. */
typedef struct req {
    const char *key, *policy, *method, *path, *query, *ip;
    const char *h[16]; /* name, value, name, value, ..., NULL */
} req;

static const req usual = {
    .key = "abc", .policy = "api", .method = "GET", .path = "/v1/orders/123",
    .query = "user=ann&x=%41%42", .ip = "203.0.113.77",
    .h = {"Host", "example.com", "X-Api-Key", "k-123", NULL},
};

/* Renders template s for q into a string: the key, "MISSING: part" or
 * "TOO LONG". cap 0 means the whole buffer. */
static const char *render_cap(const char *s, const req *q, size_t cap)
{
    static char answer[SL_KEY_RENDER_MAX + 32];
    sl_key_template t = parse(s);
    sl_http_header h[8];
    size_t nh = 0;
    for (; q->h[2 * nh]; nh++) {
        h[nh].name = slice(q->h[2 * nh]);
        h[nh].value = slice(q->h[2 * nh + 1]);
    }
    sl_ip a;
    if (q->ip)
        cr_assert_eq(sl_ip_parse(q->ip, strlen(q->ip), &a), 0, "'%s'", q->ip);
    sl_key_request r = {
        .key = slice(q->key), .policy = slice(q->policy), .method = slice(q->method),
        .path = slice(q->path), .query = slice(q->query), .headers = nh ? h : NULL,
        .nheaders = nh, .client = q->ip ? &a : NULL,
    };
    char *out = malloc(SL_KEY_RENDER_MAX);
    cr_assert_not_null(out);
    const char *missing = NULL;
    long n = sl_key_template_render(&t, &r, out, cap ? cap : SL_KEY_RENDER_MAX, &missing);
    if (n > 0)
        snprintf(answer, sizeof answer, "%.*s", (int)n, out);
    else if (n == 0)
        snprintf(answer, sizeof answer, "MISSING: %s", missing ? missing : "(null)");
    else
        snprintf(answer, sizeof answer, "TOO LONG");
    free(out);
    drop_all();
    return answer;
}

static const char *render(const char *s, const req *q)
{
    return render_cap(s, q, 0);
}

Test(key_template, key_and_policy_as_today)
{
    cr_assert_str_eq(render("{policy}:{key}", &usual), "api:abc");
    cr_assert_str_eq(render("api:{key}", &usual), "api:abc");
    cr_assert_str_eq(render("fixed", &usual), "fixed", "text alone is one key for all");
    req q = usual;
    q.key = NULL;
    cr_assert_str_eq(render("{policy}:{key}", &q), "MISSING: key");
    q.key = "";
    cr_assert_str_eq(render("{policy}:{key}", &q), "MISSING: key", "an empty key is none");
    q = usual;
    q.policy = NULL;
    cr_assert_str_eq(render("{policy}:{key}", &q), "MISSING: policy");
}

Test(key_template, escaped_braces_write_a_hash_tag)
{
    cr_assert_str_eq(render("{{{policy}:{key}}}", &usual), "{api:abc}");
    cr_assert_str_eq(render("{{key}}", &usual), "{key}", "doubled braces are text");
    cr_assert_str_eq(render("a{{{{b}}}}c", &usual), "a{{b}}c");
    cr_assert_str_eq(render("}}{key}{{", &usual), "}abc{");
}

Test(key_template, headers)
{
    cr_assert_str_eq(render("{header.x-api-key}", &usual), "k-123");
    cr_assert_str_eq(render("{header.X-API-KEY}", &usual), "k-123", "any case");
    req q = usual;
    q.h[4] = "x-api-key"; /* a second field of that name: the first counts */
    q.h[5] = "second";
    q.h[6] = NULL;
    cr_assert_str_eq(render("{header.x-api-key}", &q), "k-123");
    q = usual;
    q.h[3] = "  \t ";
    cr_assert_str_eq(render("{header.X-Api-Key}", &q), "MISSING: header.x-api-key",
                     "only blanks is missing, named lowercase");
    q.h[3] = "";
    cr_assert_str_eq(render("{header.x-api-key}", &q), "MISSING: header.x-api-key");
    q.h[3] = " v a ";
    cr_assert_str_eq(render("{header.x-api-key}", &q), "v a", "blanks around are not the value");
    q.h[3] = "a:b\x01\x7f";
    cr_assert_str_eq(render("{header.x-api-key}", &q), "a:b\x01\x7f", "bytes as they are");
    q = usual;
    q.h[2] = NULL;
    cr_assert_str_eq(render("{header.x-api-key}", &q), "MISSING: header.x-api-key");
    q.h[0] = NULL;
    cr_assert_str_eq(render("{header.x-api-key}", &q), "MISSING: header.x-api-key",
                     "no headers at all");
}

Test(key_template, query_parameters_follow_http_c)
{
    cr_assert_str_eq(render("{query.user}", &usual), "ann");
    cr_assert_str_eq(render("{query.x}", &usual), "AB", "%41%42 is percent-decoded");
    req q = usual;
    q.query = "user=a+b%2Bc";
    cr_assert_str_eq(render("{query.user}", &q), "a b+c",
                     "'+' is a space, as sl_http_percent_decode (HTML forms) says");
    q.query = "us%65r=first&user=second";
    cr_assert_str_eq(render("{query.user}", &q), "first", "names are compared decoded; first wins");
    q.query = "user=&user=second";
    cr_assert_str_eq(render("{query.user}", &q), "MISSING: query.user", "present but empty");
    q.query = "user";
    cr_assert_str_eq(render("{query.user}", &q), "MISSING: query.user", "no '=' is empty");
    q.query = "user=%4";
    cr_assert_str_eq(render("{query.user}", &q), "MISSING: query.user", "a bad escape");
    q.query = "%zz=1&user=ok";
    cr_assert_str_eq(render("{query.user}", &q), "ok", "a name that does not decode is skipped");
    q.query = "User=ann";
    cr_assert_str_eq(render("{query.user}", &q), "MISSING: query.user", "names are exact bytes");
    q.query = "user=%00%0a";
    cr_assert_str_eq(render("x{query.user}x", &q), "x", "decoded bytes as they are (a NUL)");
    q.query = NULL;
    cr_assert_str_eq(render("{query.user}", &q), "MISSING: query.user");
}

Test(key_template, method_and_path)
{
    cr_assert_str_eq(render("{method} {path}", &usual), "GET /v1/orders/123");
    req q = usual;
    q.method = NULL;
    cr_assert_str_eq(render("{method}", &q), "MISSING: method");
    q.path = NULL;
    cr_assert_str_eq(render("{path}", &q), "MISSING: path");
    cr_assert_str_eq(render("{path/1}", &q), "MISSING: path/1");
    q.path = "/v1/%6Frders";
    cr_assert_str_eq(render("{path}", &q), "/v1/%6Frders", "as sent, not decoded");
}

Test(key_template, path_prefixes)
{
    static const struct {
        const char *path;
        const char *tmpl;
        const char *want;
    } cases[] = {
        {"/v1/orders/123", "{path/1}", "/v1"},
        {"/v1/orders/123", "{path/2}", "/v1/orders"},
        {"/v1/orders/123", "{path/3}", "/v1/orders/123"},
        {"/v1/orders/123", "{path/16}", "/v1/orders/123"},
        {"/v1/orders/", "{path/2}", "/v1/orders"},
        {"/v1/orders/", "{path/3}", "/v1/orders", },
        {"/v1//orders//123", "{path/2}", "/v1/orders"},
        {"//v1", "{path/1}", "/v1"},
        {"/", "{path/1}", "/"},
        {"//", "{path/2}", "/"},
        {"/v1", "{path/03}", "/v1"},
        {"*", "{path/1}", "/*"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        req q = usual;
        q.path = cases[i].path;
        cr_assert_str_eq(render(cases[i].tmpl, &q), cases[i].want, "%s of '%s'", cases[i].tmpl,
                         cases[i].path);
    }
}

/* The {ip...} of one address. */
static const char *ip_of(const char *tmpl, const char *addr)
{
    req q = usual;
    q.ip = addr;
    return render(tmpl, &q);
}

Test(key_template, ipv4_masks)
{
    cr_assert_str_eq(ip_of("{ip}", "203.0.113.77"), "203.0.113.77");
    cr_assert_str_eq(ip_of("{ip/32}", "203.0.113.77"), "203.0.113.77");
    cr_assert_str_eq(ip_of("{ip/31}", "203.0.113.77"), "203.0.113.76/31");
    cr_assert_str_eq(ip_of("{ip/24}", "203.0.113.77"), "203.0.113.0/24");
    cr_assert_str_eq(ip_of("{ip/8}", "203.0.113.77"), "203.0.0.0/8");
    cr_assert_str_eq(ip_of("{ip/0}", "203.0.113.77"), "0.0.0.0/0");
    cr_assert_str_eq(ip_of("{ip6/48}", "203.0.113.77"), "203.0.113.77", "ip6/M keeps IPv4 whole");
    cr_assert_str_eq(ip_of("{ip/24}", "::ffff:203.0.113.77"), "203.0.113.0/24",
                     "a mapped address is IPv4");
    cr_assert_str_eq(ip_of("{ip6/0}", "::ffff:203.0.113.77"), "203.0.113.77");
}

Test(key_template, ipv6_masks)
{
    const char *a = "2001:db8:1:2:3:4:5:6";
    cr_assert_str_eq(ip_of("{ip}", a), "2001:db8:1:2::/64", "an IPv6 client is its /64");
    cr_assert_str_eq(ip_of("{ip/24}", a), "2001:db8:1:2::/64", "ip/N leaves IPv6 at /64");
    cr_assert_str_eq(ip_of("{ip6/128}", a), "2001:db8:1:2:3:4:5:6");
    cr_assert_str_eq(ip_of("{ip6/127}", "2001:db8::7"), "2001:db8::6/127");
    cr_assert_str_eq(ip_of("{ip6/64}", a), "2001:db8:1:2::/64");
    cr_assert_str_eq(ip_of("{ip6/48}", a), "2001:db8:1::/48");
    cr_assert_str_eq(ip_of("{ip6/0}", a), "::/0");
    cr_assert_str_eq(ip_of("{ip/24,ip6/48}", a), "2001:db8:1::/48");
    cr_assert_str_eq(ip_of("{ip6/48,ip/24}", "203.0.113.77"), "203.0.113.0/24");
    cr_assert_str_eq(ip_of("{ip}", NULL), "MISSING: ip");
    cr_assert_str_eq(ip_of("{ip/24,ip6/48}", NULL), "MISSING: ip/24,ip6/48");
}

Test(key_template, combined)
{
    cr_assert_str_eq(render("{header.x-api-key}:{method}", &usual), "k-123:GET");
    cr_assert_str_eq(render("{{{policy}}}:{ip/24}:{path/1}:{query.user}", &usual),
                     "{api}:203.0.113.0/24:/v1:ann");
    req q = usual;
    q.h[3] = "";
    cr_assert_str_eq(render("{policy}:{query.nope}:{header.x-api-key}", &q),
                     "MISSING: query.nope", "the first missing part is named");
}

Test(key_template, flags_tell_who_can_render)
{
    sl_key_template t = parse("{policy}:{key}");
    cr_assert(!sl_key_template_reads_request(&t));
    cr_assert(sl_key_template_uses_key(&t));
    t = parse("{header.x}");
    cr_assert(sl_key_template_reads_request(&t));
    cr_assert(!sl_key_template_uses_key(&t));
    cr_assert_eq(t.uses, SL_KEY_USES(SL_KEY_PART_HEADER));
    const char *reading[] = {"{query.a}", "{method}", "{path}", "{path/2}", "{ip}", "{ip6/48}"};
    for (size_t i = 0; i < sizeof reading / sizeof *reading; i++) {
        t = parse(reading[i]);
        cr_assert(sl_key_template_reads_request(&t), "%s", reading[i]);
    }
    t = parse("x{key}{ip}");
    cr_assert_eq(t.uses, SL_KEY_USES(SL_KEY_PART_TEXT) | SL_KEY_USES(SL_KEY_PART_KEY) |
                             SL_KEY_USES(SL_KEY_PART_IP));
}

Test(key_template, parse_errors_say_what_and_where)
{
    static const struct {
        const char *tmpl;
        const char *err;
    } cases[] = {
        {"", "the key template is empty: write at least {key}"},
        {"a:{hedaer.x}", "unknown part '{hedaer.x}' at column 3: use key, policy, header.NAME, "
                         "query.NAME, method, path, path/N, ip, ip/N, ip6/M or ip/N,ip6/M"},
        {"{KEY}", "unknown part '{KEY}' at column 1: use key"},
        {"ab{}", "'{}' at column 3: an empty part"},
        {"{key", "the '{' at column 1 is never closed: write {{ for a brace in the key"},
        {"a}", "a '}' at column 2 closes no part: write }} for a brace in the key"},
        {"{key}}", "a '}' at column 6 closes no part"},
        {"{a{key}}", "a '{' at column 3 inside the part opened at column 1"},
        {"{header.}", "'{header.}' at column 1: header.NAME needs a header name"},
        {"{header.x y}", "'{header.x y}' at column 1: the header name has ' ', which is not a "
                         "token character"},
        {"{header.x\x01}", "the header name has '\\x01'"},
        {"{query.}", "'{query.}' at column 1: query.NAME needs a parameter name"},
        {"{query.a=b}", "a parameter name has '='"},
        {"{query.a%41}", "a parameter name has '%'"},
        {"{path/0}", "'{path/0}' at column 1: path/N takes N from 1 to 16 segments"},
        {"{path/17}", "path/N takes N from 1 to 16 segments"},
        {"{path/}", "path/N takes N from 1 to 16 segments"},
        {"{path/x}", "path/N takes N from 1 to 16 segments"},
        {"{path/99999999999999999999}", "path/N takes N from 1 to 16 segments"},
        {"{ip/33}", "'{ip/33}' at column 1: an IPv4 prefix ip/N has N from 0 to 32"},
        {"{ip/-1}", "an IPv4 prefix ip/N has N from 0 to 32"},
        {"{ip6/129}", "an IPv6 prefix ip6/M has M from 0 to 128"},
        {"{ip/8,ip/16}", "ip/N is given twice"},
        {"{ip6/8,ip6/16}", "ip6/M is given twice"},
        {"{ip/8,}", "an address part is ip, ip/N (N 0 to 32), ip6/M (M 0 to 128) or ip/N,ip6/M"},
        {"{ip/8,ip6/64,ip/3}", "an IPv6 prefix ip6/M has M from 0 to 128"},
        {"{ip6}", "unknown part '{ip6}'"},
        {"{ip4/8}", "unknown part '{ip4/8}'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *err = parse_error(cases[i].tmpl);
        cr_assert(strstr(err, cases[i].err) != NULL, "'%s': got '%s', want '...%s...'",
                  cases[i].tmpl, err, cases[i].err);
    }
}

Test(key_template, the_limits_are_named)
{
    char s[SL_KEY_TEMPLATE_MAX + 2];
    memset(s, 'a', sizeof s - 1);
    s[sizeof s - 1] = '\0';
    cr_assert_str_eq(parse_error(s), "the key template is 257 bytes long: at most 256");
    s[SL_KEY_TEMPLATE_MAX] = '\0';
    parse(s); /* 256 bytes is allowed */

    /* 16 parts are allowed; the 17th is named with its column. */
    char many[128] = "";
    for (int i = 0; i < 8; i++)
        strcat(many, "{key}:");
    sl_key_template t = parse(many);
    cr_assert_eq(t.nparts, 16);
    strcat(many, "{key}");
    cr_assert_str_eq(parse_error(many), "too many parts at column 49: at most 16 (each {...} "
                                        "and each run of text between them is one)");
    /* Escaped braces do not end a run of text. */
    t = parse("a{{b}}c{key}");
    cr_assert_eq(t.nparts, 2);
}

Test(key_template, a_key_that_does_not_fit)
{
    cr_assert_str_eq(render_cap("{policy}:{key}", &usual, 7), "api:abc", "exactly the cap");
    cr_assert_str_eq(render_cap("{policy}:{key}", &usual, 6), "TOO LONG");
    cr_assert_str_eq(render_cap("{query.x}", &usual, 1), "TOO LONG", "a decoded value too");
    cr_assert_str_eq(render_cap("{ip/24}", &usual, 5), "TOO LONG");
    cr_assert_str_eq(render_cap("{path/2}", &usual, 5), "TOO LONG");
    req q = usual;
    q.key = NULL;
    cr_assert_str_eq(render_cap("{policy}:{policy}:{key}", &q, 2), "MISSING: key",
                     "a missing part wins over a key too long");
    /* The cap is lowered to SL_KEY_RENDER_MAX. */
    char big[SL_KEY_RENDER_MAX + 2];
    memset(big, 'k', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    q = usual;
    q.key = big;
    sl_key_template t = parse("{key}");
    sl_key_request r = {.key = {big, strlen(big)}};
    char *out = malloc(SL_KEY_RENDER_MAX + 8);
    cr_assert_eq(sl_key_template_render(&t, &r, out, SL_KEY_RENDER_MAX + 8, NULL), -1);
    r.key.len = SL_KEY_RENDER_MAX;
    cr_assert_eq(sl_key_template_render(&t, &r, out, SL_KEY_RENDER_MAX + 8, NULL),
                 SL_KEY_RENDER_MAX);
    free(out);
}

Test(key_template, describe_writes_the_canonical_form)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"{{{policy}:{key}}}", "{{{policy}:{key}}}"},
        {"{header.X-Api-Key}:{method}", "{header.x-api-key}:{method}"},
        {"{ip/32}", "{ip}"},
        {"{ip6/64}", "{ip}"},
        {"{ip/32,ip6/64}", "{ip}"},
        {"{ip6/048,ip/024}", "{ip/24,ip6/48}"},
        {"{ip/24,ip6/64}", "{ip/24}"},
        {"{ip/32,ip6/48}", "{ip6/48}"},
        {"{path/02}{path}{query.User}", "{path/2}{path}{query.User}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        sl_key_template t = parse(cases[i].in);
        char buf[SL_KEY_TEMPLATE_MAX + 1];
        long n = sl_key_template_describe(&t, buf, sizeof buf);
        cr_assert_str_eq(buf, cases[i].out);
        cr_assert_eq(n, (long)strlen(cases[i].out));
        sl_key_template again = parse(buf);
        char buf2[SL_KEY_TEMPLATE_MAX + 1];
        sl_key_template_describe(&again, buf2, sizeof buf2);
        cr_assert_str_eq(buf2, buf, "the canonical form is a fixed point");
    }
    sl_key_template t = parse("{policy}:{key}");
    char small[5];
    cr_assert_eq(sl_key_template_describe(&t, small, sizeof small), -1);
    cr_assert_str_eq(small, "{pol", "as much as fits, NUL-terminated");
}
