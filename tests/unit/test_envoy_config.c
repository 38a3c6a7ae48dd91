/*
 * test_envoy_config.c: envoyproxy/ratelimit's configuration
 * (src/policy/envoy.c): the README's examples with the answers it
 * documents for their requests, the matching order (key_value, then
 * wildcards in file order, then key), the depth rule, replaces, unlimited,
 * shadow_mode, the metric and store keys, sluice's extensions (algorithm,
 * burst, rate_limits), a directory of files, and every error message with
 * its file, line and column.
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "policy/envoy.h"

static char err[1024];

/* A config of the one file `text`, named "t.yaml"; the test fails when it
 * is refused. */
static sl_envoy_config *load(const char *text)
{
    sl_envoy_config *c = sl_envoy_new();
    cr_assert_not_null(c);
    int rc = sl_envoy_add(c, text, strlen(text), "t.yaml", err, sizeof err);
    cr_assert_eq(rc, 0, "refused: %s", err);
    return c;
}

/* The file is refused with exactly `want`. */
static void refused(const char *text, const char *want)
{
    sl_envoy_config *c = sl_envoy_new();
    cr_assert_not_null(c);
    err[0] = '\0';
    int rc = sl_envoy_add(c, text, strlen(text), "t.yaml", err, sizeof err);
    cr_assert_eq(rc, -1, "accepted, wanted: %s", want);
    cr_assert_str_eq(err, want);
    cr_assert_eq(c->ndomains, 0);
    sl_envoy_free(c);
}

/* A descriptor of up to 8 entries, from key, value pairs ending in NULL. */
typedef struct desc {
    sl_envoy_entry e[8];
    sl_envoy_descriptor d;
} desc;

static desc make(const char *k, ...)
{
    desc x = {0};
    va_list ap;
    va_start(ap, k);
    for (; k; k = va_arg(ap, const char *)) {
        const char *v = va_arg(ap, const char *);
        x.e[x.d.n++] = (sl_envoy_entry){k, strlen(k), v, strlen(v)};
    }
    va_end(ap);
    x.d.entries = x.e;
    return x;
}

/* The rule that descriptor x matches in `domain`, NULL when none. */
static const sl_envoy_rule *rule_of(const sl_envoy_config *c, const char *domain, desc *x,
                                    sl_envoy_match *m)
{
    x->d.entries = x->e;
    int rc = sl_envoy_match_request(c, domain, strlen(domain), &x->d, 1, m);
    cr_assert_eq(rc, 0);
    return m->rule;
}

static const sl_envoy_rule *find(const sl_envoy_config *c, const char *domain, desc x)
{
    sl_envoy_match m;
    return rule_of(c, domain, &x, &m);
}

/* requests_per_unit and unit of a rule's first limit, e.g. "500/second". */
static const char *rate(const sl_envoy_rule *r)
{
    static char buf[64];
    if (!r)
        return "none";
    if (r->unlimited)
        return "unlimited";
    snprintf(buf, sizeof buf, "%u/%s", r->limits[0].requests_per_unit,
             sl_envoy_unit_name(r->limits[0].unit));
    return buf;
}

static const char *metric(const sl_envoy_config *c, const char *domain, desc x)
{
    static char buf[256];
    sl_envoy_match m;
    cr_assert_not_null(rule_of(c, domain, &x, &m));
    size_t n = sl_envoy_metric_key(domain, strlen(domain), &x.d, &m, buf, sizeof buf - 1);
    cr_assert_lt(n, sizeof buf);
    buf[n] = '\0';
    return buf;
}

static size_t store_key(const sl_envoy_config *c, const char *domain, desc x, size_t index,
                        char *out, size_t cap)
{
    sl_envoy_match m;
    cr_assert_not_null(rule_of(c, domain, &x, &m));
    return sl_envoy_store_key(domain, strlen(domain), &x.d, &m, index, out, cap);
}

/* ---- the README's examples ---- */

Test(envoy_readme, example1_two_values_of_one_key)
{
    sl_envoy_config *c = load("domain: mongo_cps\n"
                              "descriptors:\n"
                              "  - key: database\n"
                              "    value: users\n"
                              "    rate_limit:\n"
                              "      unit: second\n"
                              "      requests_per_unit: 500\n"
                              "\n"
                              "  - key: database\n"
                              "    value: default\n"
                              "    rate_limit:\n"
                              "      unit: second\n"
                              "      requests_per_unit: 500\n");
    cr_assert_str_eq(rate(find(c, "mongo_cps", make("database", "users", NULL))), "500/second");
    cr_assert_str_eq(rate(find(c, "mongo_cps", make("database", "default", NULL))),
                     "500/second");
    cr_assert_str_eq(rate(find(c, "mongo_cps", make("database", "orders", NULL))), "none");
    const sl_envoy_rule *r = find(c, "mongo_cps", make("database", "users", NULL));
    cr_assert_str_eq(r->full_key, "mongo_cps.database_users");
    cr_assert_eq(r->limits[0].limit.algorithm, SL_FIXED_WINDOW);
    cr_assert_eq(r->limits[0].limit.limit, 500);
    cr_assert_eq(r->limits[0].limit.period_ns, INT64_C(1000000000));
    cr_assert_eq(r->line, 5);
    cr_assert_str_eq(r->file, "t.yaml");
    sl_envoy_match m;
    desc x = make("database", "users", NULL);
    cr_assert_eq(sl_envoy_match_request(c, "mongo", 5, &x.d, 1, &m), SL_ENVOY_DOMAIN_UNKNOWN);
    cr_assert_null(m.rule);
    sl_envoy_free(c);
}

static const char example2[] = "domain: messaging\n"
                               "descriptors:\n"
                               "  # Only allow 5 marketing messages a day\n"
                               "  - key: message_type\n"
                               "    value: marketing\n"
                               "    descriptors:\n"
                               "      - key: to_number\n"
                               "        rate_limit:\n"
                               "          unit: day\n"
                               "          requests_per_unit: 5\n"
                               "\n"
                               "  # Only allow 100 messages a day to any unique phone number\n"
                               "  - key: to_number\n"
                               "    rate_limit:\n"
                               "      unit: day\n"
                               "      requests_per_unit: 100\n";

Test(envoy_readme, example2_nested_and_several_descriptors)
{
    sl_envoy_config *c = load(example2);
    desc a = make("message_type", "marketing", "to_number", "2061111111", NULL);
    desc b = make("message_type", "marketing", "to_number", "2062222222", NULL);
    desc t = make("to_number", "2061111111", NULL);
    cr_assert_str_eq(rate(find(c, "messaging", a)), "5/day");
    cr_assert_str_eq(rate(find(c, "messaging", b)), "5/day");
    cr_assert_str_eq(rate(find(c, "messaging", t)), "100/day");
    cr_assert_eq(find(c, "messaging", t)->limits[0].limit.period_ns, INT64_C(86400000000000));
    /* The placeholder level alone has no limit. */
    cr_assert_str_eq(rate(find(c, "messaging", make("message_type", "marketing", NULL))), "none");
    /* Each number its own state: the keys differ by the value. */
    char ka[128], kb[128];
    size_t na = store_key(c, "messaging", a, 0, ka, sizeof ka);
    size_t nb = store_key(c, "messaging", b, 0, kb, sizeof kb);
    cr_assert_eq(na, nb);
    cr_assert_neq(memcmp(ka, kb, na), 0);
    /* Both descriptors of the README's request, each its own rule. */
    sl_envoy_descriptor two[2] = {a.d, t.d};
    two[0].entries = a.e;
    two[1].entries = t.e;
    sl_envoy_match m[2];
    cr_assert_eq(sl_envoy_match_request(c, "messaging", 9, two, 2, m), 0);
    cr_assert_str_eq(rate(m[0].rule), "5/day");
    cr_assert_str_eq(rate(m[1].rule), "100/day");
    cr_assert(!m[0].replaced && !m[1].replaced);
    sl_envoy_free(c);
}

Test(envoy_readme, example3_key_value_before_key)
{
    sl_envoy_config *c = load("domain: edge_proxy_per_ip\n"
                              "descriptors:\n"
                              "  - key: remote_address\n"
                              "    rate_limit:\n"
                              "      unit: second\n"
                              "      requests_per_unit: 10\n"
                              "\n"
                              "  # Black list IP\n"
                              "  - key: remote_address\n"
                              "    value: 50.0.0.5\n"
                              "    rate_limit:\n"
                              "      unit: second\n"
                              "      requests_per_unit: 0\n");
    cr_assert_str_eq(rate(find(c, "edge_proxy_per_ip", make("remote_address", "50.0.0.1", NULL))),
                     "10/second");
    const sl_envoy_rule *r = find(c, "edge_proxy_per_ip", make("remote_address", "50.0.0.5", NULL));
    cr_assert_str_eq(rate(r), "0/second"); /* every request over the limit */
    cr_assert_str_eq(r->full_key, "edge_proxy_per_ip.remote_address_50.0.0.5");
    sl_envoy_free(c);
}

Test(envoy_readme, example4_depth_must_match)
{
    sl_envoy_config *c = load("domain: example4\n"
                              "descriptors:\n"
                              "  - key: key\n"
                              "    value: value\n"
                              "    rate_limit:\n"
                              "      requests_per_unit: 300\n"
                              "      unit: second\n");
    desc two = make("key", "value", "subkey", "subvalue", NULL);
    cr_assert_str_eq(rate(find(c, "example4", two)), "none");
    cr_assert_str_eq(rate(find(c, "example4", make("key", "value", NULL))), "300/second");
    sl_envoy_free(c);
    c = load("domain: example4\n"
             "descriptors:\n"
             "  - key: key\n"
             "    value: value\n"
             "    descriptors:\n"
             "      - key: subkey\n"
             "        rate_limit:\n"
             "          requests_per_unit: 300\n"
             "          unit: second\n");
    cr_assert_str_eq(rate(find(c, "example4", two)), "300/second");
    cr_assert_str_eq(rate(find(c, "example4", make("key", "value", NULL))), "none");
    /* Longer than the tree: no rule, however the first levels match. */
    cr_assert_str_eq(
        rate(find(c, "example4", make("key", "value", "subkey", "x", "more", "y", NULL))), "none");
    sl_envoy_free(c);
}

Test(envoy_readme, example5_unlimited)
{
    sl_envoy_config *c = load("domain: internal\n"
                              "descriptors:\n"
                              "  - key: ldap\n"
                              "    rate_limit:\n"
                              "      unlimited: true\n"
                              "\n"
                              "  - key: azure\n"
                              "    rate_limit:\n"
                              "      unit: minute\n"
                              "      requests_per_unit: 100\n");
    const sl_envoy_rule *r = find(c, "internal", make("ldap", "x", NULL));
    cr_assert_str_eq(rate(r), "unlimited");
    cr_assert_eq(r->nlimits, 0);
    cr_assert_str_eq(rate(find(c, "internal", make("azure", "x", NULL))), "100/minute");
    sl_envoy_free(c);
}

Test(envoy_readme, example6_shadow_mode)
{
    sl_envoy_config *c = load("domain: example6\n"
                              "descriptors:\n"
                              "  - key: service\n"
                              "    descriptors:\n"
                              "      - key: user\n"
                              "        value: user-a\n"
                              "        rate_limit:\n"
                              "          requests_per_unit: 10\n"
                              "          unit: second\n"
                              "        shadow_mode: true\n"
                              "      - key: user\n"
                              "        value: user-b\n"
                              "        rate_limit:\n"
                              "          requests_per_unit: 20\n"
                              "          unit: second\n");
    const sl_envoy_rule *a =
        find(c, "example6", make("service", "auth-service", "user", "user-a", NULL));
    const sl_envoy_rule *b =
        find(c, "example6", make("service", "auth-service", "user", "user-b", NULL));
    cr_assert_str_eq(rate(a), "10/second");
    cr_assert(a->shadow_mode);
    cr_assert_str_eq(rate(b), "20/second");
    cr_assert(!b->shadow_mode);
    cr_assert_str_eq(rate(find(c, "example6", make("service", "auth-service", "user", "user-c",
                                                   NULL))),
                     "none");
    sl_envoy_free(c);
}

static const char example7[] = "domain: example7\n"
                               "descriptors:\n"
                               "  - key: key_1\n"
                               "    value: value_1\n"
                               "    descriptors:\n"
                               "      - key: user\n"
                               "        value: bkthomps\n"
                               "        rate_limit:\n"
                               "          name: specific_limit\n"
                               "          requests_per_unit: 5\n"
                               "          unit: second\n"
                               "  - key: key_2\n"
                               "    value: value_2\n"
                               "    descriptors:\n"
                               "      - key: user\n"
                               "        value: bkthomps\n"
                               "        rate_limit:\n"
                               "          replaces:\n"
                               "            - name: specific_limit\n"
                               "          requests_per_unit: 10\n"
                               "          unit: second\n";

Test(envoy_readme, example7_replaces)
{
    sl_envoy_config *c = load(example7);
    desc one = make("key_1", "value_1", "user", "bkthomps", NULL);
    desc two = make("key_2", "value_2", "user", "bkthomps", NULL);
    cr_assert_str_eq(rate(find(c, "example7", one)), "5/second");
    cr_assert_str_eq(rate(find(c, "example7", two)), "10/second");
    const sl_envoy_rule *r2 = find(c, "example7", two);
    cr_assert_eq(r2->nreplaces, 1);
    cr_assert_str_eq(r2->replaces[0], "specific_limit");
    /* Both in one request: the 5/s rule is replaced, the 10/s one applies. */
    sl_envoy_descriptor both[2] = {one.d, two.d};
    both[0].entries = one.e;
    both[1].entries = two.e;
    sl_envoy_match m[2];
    cr_assert_eq(sl_envoy_match_request(c, "example7", 8, both, 2, m), 0);
    cr_assert_str_eq(rate(m[0].rule), "5/second");
    cr_assert(m[0].replaced);
    cr_assert_str_eq(rate(m[1].rule), "10/second");
    cr_assert(!m[1].replaced);
    /* The order of the descriptors does not matter. */
    both[0] = two.d;
    both[0].entries = two.e;
    both[1] = one.d;
    both[1].entries = one.e;
    cr_assert_eq(sl_envoy_match_request(c, "example7", 8, both, 2, m), 0);
    cr_assert(!m[0].replaced);
    cr_assert(m[1].replaced);
    sl_envoy_free(c);
}

Test(envoy_readme, example8_detailed_metric)
{
    sl_envoy_config *c = load("domain: example8\n"
                              "descriptors:\n"
                              "  - key: key1\n"
                              "    detailed_metric: true\n"
                              "    rate_limit:\n"
                              "      unit: minute\n"
                              "      requests_per_unit: 10\n"
                              "  - key: key1\n"
                              "    value: value1\n"
                              "    rate_limit:\n"
                              "      unit: minute\n"
                              "      requests_per_unit: 20\n");
    cr_assert_str_eq(rate(find(c, "example8", make("key1", "unspecified_value", NULL))),
                     "10/minute");
    cr_assert_str_eq(rate(find(c, "example8", make("key1", "value1", NULL))), "20/minute");
    cr_assert_str_eq(metric(c, "example8", make("key1", "unspecified_value", NULL)),
                     "example8.key1_unspecified_value");
    cr_assert_str_eq(metric(c, "example8", make("key1", "unspecified_value2", NULL)),
                     "example8.key1_unspecified_value2");
    cr_assert_str_eq(metric(c, "example8", make("key1", "value1", NULL)), "example8.key1_value1");
    sl_envoy_free(c);
}

Test(envoy_readme, example9_wildcards)
{
    sl_envoy_config *c = load("domain: example9\n"
                              "descriptors:\n"
                              "  - key: key1\n"
                              "    value: value*\n"
                              "    rate_limit: {unit: minute, requests_per_unit: 20}\n"
                              "  - key: path\n"
                              "    value: /api/*/action\n"
                              "    rate_limit: {unit: minute, requests_per_unit: 21}\n"
                              "  - key: route\n"
                              "    value: /api/*/resource/*/action\n"
                              "    rate_limit: {unit: minute, requests_per_unit: 22}\n");
    const char *yes1[] = {"value1", "value2", "valueXYZ", "value"};
    for (size_t i = 0; i < 4; i++)
        cr_assert_str_eq(rate(find(c, "example9", make("key1", yes1[i], NULL))), "20/minute",
                         "%s", yes1[i]);
    cr_assert_str_eq(rate(find(c, "example9", make("key1", "valu", NULL))), "none");
    cr_assert_str_eq(rate(find(c, "example9", make("key1", "xvalue1", NULL))), "none");
    cr_assert_str_eq(rate(find(c, "example9", make("path", "/api/123/action", NULL))),
                     "21/minute");
    cr_assert_str_eq(rate(find(c, "example9", make("path", "/api/user-id/action", NULL))),
                     "21/minute");
    cr_assert_str_eq(rate(find(c, "example9", make("path", "/api/123/other", NULL))), "none");
    cr_assert_str_eq(rate(find(c, "example9", make("path", "/api/action", NULL))), "none");
    cr_assert_str_eq(
        rate(find(c, "example9", make("route", "/api/v1/resource/123/action", NULL))),
        "22/minute");
    cr_assert_str_eq(
        rate(find(c, "example9", make("route", "/api/v2/resource/456/action", NULL))),
        "22/minute");
    cr_assert_str_eq(rate(find(c, "example9", make("route", "/api/v1/123/action", NULL))),
                     "none");
    /* A wildcard's metric key keeps its pattern. */
    cr_assert_str_eq(metric(c, "example9", make("key1", "value7", NULL)),
                     "example9.key1_value*");
    sl_envoy_free(c);
}

Test(envoy_readme, example10_value_to_metric)
{
    sl_envoy_config *c = load("domain: example10\n"
                              "descriptors:\n"
                              "  - key: route\n"
                              "    value_to_metric: true\n"
                              "    descriptors:\n"
                              "      - key: http_method\n"
                              "        value_to_metric: true\n"
                              "        descriptors:\n"
                              "          - key: subject_id\n"
                              "            rate_limit:\n"
                              "              unit: minute\n"
                              "              requests_per_unit: 60\n");
    cr_assert_str_eq(
        metric(c, "example10", make("route", "api", "http_method", "GET", "subject_id", "123", NULL)),
        "example10.route_api.http_method_GET.subject_id");
    cr_assert_str_eq(metric(c, "example10",
                            make("route", "web", "http_method", "POST", "subject_id", "456", NULL)),
                     "example10.route_web.http_method_POST.subject_id");
    cr_assert_str_eq(find(c, "example10", make("route", "web", "http_method", "POST", "subject_id",
                                               "456", NULL))
                         ->full_key,
                     "example10.route.http_method.subject_id");
    sl_envoy_free(c);
    c = load("domain: example10_wildcard\n"
             "descriptors:\n"
             "  - key: user\n"
             "    value_to_metric: true\n"
             "    descriptors:\n"
             "      - key: action\n"
             "        value: read*\n"
             "        value_to_metric: true\n"
             "        descriptors:\n"
             "          - key: resource\n"
             "            rate_limit:\n"
             "              unit: minute\n"
             "              requests_per_unit: 100\n");
    cr_assert_str_eq(metric(c, "example10_wildcard",
                            make("user", "alice", "action", "readfile", "resource", "documents",
                                 NULL)),
                     "example10_wildcard.user_alice.action_readfile.resource");
    sl_envoy_free(c);
}

Test(envoy_readme, example11_share_threshold)
{
    sl_envoy_config *c = load("domain: example11\n"
                              "descriptors:\n"
                              "  - key: files\n"
                              "    value: files/*\n"
                              "    share_threshold: true\n"
                              "    rate_limit:\n"
                              "      unit: hour\n"
                              "      requests_per_unit: 10\n"
                              "  - key: files_no_share\n"
                              "    value: files_no_share/*\n"
                              "    share_threshold: false\n"
                              "    rate_limit:\n"
                              "      unit: hour\n"
                              "      requests_per_unit: 10\n");
    char a[128], b[128];
    size_t na = store_key(c, "example11", make("files", "files/a.pdf", NULL), 0, a, sizeof a);
    size_t nb = store_key(c, "example11", make("files", "files/b.csv", NULL), 0, b, sizeof b);
    cr_assert_eq(na, nb);
    cr_assert_eq(memcmp(a, b, na), 0, "files/* shares one state");
    cr_assert_eq(na, strlen("\x1f" "envoy\x1f" "example11\x1f" "files\x1f" "files/*"));
    cr_assert_eq(memcmp(a, "\x1f" "envoy\x1f" "example11\x1f" "files\x1f" "files/*", na), 0);
    na = store_key(c, "example11", make("files_no_share", "files_no_share/a.pdf", NULL), 0, a,
                   sizeof a);
    nb = store_key(c, "example11", make("files_no_share", "files_no_share/b.csv", NULL), 0, b,
                   sizeof b);
    cr_assert_eq(na, nb);
    cr_assert_neq(memcmp(a, b, na), 0, "files_no_share/* keeps a state per value");
    sl_envoy_free(c);
    c = load("domain: example11_metrics\n"
             "descriptors:\n"
             "  - key: route\n"
             "    value: api/*\n"
             "    share_threshold: true\n"
             "    value_to_metric: true\n"
             "    descriptors:\n"
             "      - key: method\n"
             "        rate_limit:\n"
             "          unit: minute\n"
             "          requests_per_unit: 60\n");
    /* As the reference's code (and its tests) name it: the pattern, star
     * included. */
    cr_assert_str_eq(metric(c, "example11_metrics", make("route", "api/v1", "method", "GET", NULL)),
                     "example11_metrics.route_api/*.method");
    sl_envoy_free(c);
}

/* ---- the matching order and the depth rule ---- */

Test(envoy_match, value_then_wildcard_in_file_order_then_key)
{
    sl_envoy_config *c = load("domain: d\n"
                              "descriptors:\n"
                              "  - {key: k, rate_limit: {unit: second, requests_per_unit: 1}}\n"
                              "  - {key: k, value: 'ab*', rate_limit: {unit: second, requests_per_unit: 2}}\n"
                              "  - {key: k, value: 'a*', rate_limit: {unit: second, requests_per_unit: 3}}\n"
                              "  - {key: k, value: abc, rate_limit: {unit: second, requests_per_unit: 4}}\n");
    cr_assert_str_eq(rate(find(c, "d", make("k", "abc", NULL))), "4/second");
    cr_assert_str_eq(rate(find(c, "d", make("k", "abd", NULL))), "2/second");
    cr_assert_str_eq(rate(find(c, "d", make("k", "ax", NULL))), "3/second");
    cr_assert_str_eq(rate(find(c, "d", make("k", "b", NULL))), "1/second");
    cr_assert_str_eq(rate(find(c, "d", make("k", "", NULL))), "1/second");
    cr_assert_str_eq(rate(find(c, "d", make("other", "abc", NULL))), "none");
    sl_envoy_match m;
    desc x = make("k", "abd", NULL);
    rule_of(c, "d", &x, &m);
    cr_assert_eq(m.how[0], SL_ENVOY_BY_WILDCARD);
    x = make("k", "b", NULL);
    rule_of(c, "d", &x, &m);
    cr_assert_eq(m.how[0], SL_ENVOY_BY_KEY);
    sl_envoy_free(c);
}

Test(envoy_match, a_rule_with_children_and_the_walk_past_a_leaf)
{
    sl_envoy_config *c = load("domain: d\n"
                              "descriptors:\n"
                              "  - key: a\n"
                              "    rate_limit: {unit: minute, requests_per_unit: 1}\n"
                              "    descriptors:\n"
                              "      - key: b\n"
                              "        value: x\n"
                              "        rate_limit: {unit: minute, requests_per_unit: 2}\n"
                              "        descriptors:\n"
                              "          - key: c\n"
                              "            rate_limit: {unit: minute, requests_per_unit: 3}\n");
    cr_assert_str_eq(rate(find(c, "d", make("a", "1", NULL))), "1/minute");
    cr_assert_str_eq(rate(find(c, "d", make("a", "1", "b", "x", NULL))), "2/minute");
    cr_assert_str_eq(rate(find(c, "d", make("a", "1", "b", "x", "c", "z", NULL))), "3/minute");
    cr_assert_str_eq(rate(find(c, "d", make("a", "1", "b", "y", NULL))), "none");
    cr_assert_str_eq(rate(find(c, "d", make("a", "1", "b", "x", "c", "z", "d", "w", NULL))),
                     "none");
    cr_assert_str_eq(rate(find(c, "d", make("b", "x", NULL))), "none");
    /* No entries: nothing. */
    desc none = make(NULL);
    cr_assert_str_eq(rate(find(c, "d", none)), "none");
    sl_envoy_free(c);
}

Test(envoy_match, the_reference_joins_key_and_value_with_an_underscore)
{
    /* "a_b" as a key alone is the same level as key a, value b: the
     * reference looks both up as "a_b", and so refuses both in one list. */
    sl_envoy_config *c = load("domain: d\n"
                              "descriptors:\n"
                              "  - {key: a_b, rate_limit: {unit: second, requests_per_unit: 7}}\n");
    cr_assert_str_eq(rate(find(c, "d", make("a", "b", NULL))), "7/second");
    sl_envoy_free(c);
    refused("domain: d\n"
            "descriptors:\n"
            "  - {key: a_b}\n"
            "  - {key: a, value: b}\n",
            "t.yaml:4:6: duplicate descriptor composite key 'd.a_b'");
}

Test(envoy_match, replaces_by_unlimited_and_unnamed)
{
    sl_envoy_config *c = load("domain: d\n"
                              "descriptors:\n"
                              "  - {key: a, rate_limit: {name: la, unit: second, requests_per_unit: 1}}\n"
                              "  - {key: b, rate_limit: {unlimited: true, replaces: [{name: la}]}}\n"
                              "  - {key: c, rate_limit: {name: lc, unit: second, requests_per_unit: 1,\n"
                              "                          replaces: [{name: la}, {name: lc2}]}}\n");
    desc a = make("a", "1", NULL), b = make("b", "1", NULL), cc = make("c", "1", NULL);
    sl_envoy_descriptor ds[3] = {a.d, b.d, cc.d};
    ds[0].entries = a.e;
    ds[1].entries = b.e;
    ds[2].entries = cc.e;
    sl_envoy_match m[3];
    /* An unlimited rule's replaces count too. */
    cr_assert_eq(sl_envoy_match_request(c, "d", 1, ds, 2, m), 0);
    cr_assert(m[0].replaced);
    cr_assert(!m[1].replaced);
    /* Alone, a is not replaced. */
    cr_assert_eq(sl_envoy_match_request(c, "d", 1, ds, 1, m), 0);
    cr_assert(!m[0].replaced);
    cr_assert_eq(sl_envoy_match_request(c, "d", 1, &ds[0], 3, m), 0);
    cr_assert(m[0].replaced && !m[1].replaced && !m[2].replaced);
    sl_envoy_free(c);
}

/* ---- values as yaml.v2 reads them ---- */

Test(envoy_values, units_numbers_and_booleans)
{
    static const char *const units[] = {"second", "MINUTE", "Hour", "day", "week", "month",
                                        "year"};
    static const int64_t secs[] = {1, 60, 3600, 86400, 604800, 2592000, 31536000};
    for (size_t i = 0; i < 7; i++) {
        char text[256];
        snprintf(text, sizeof text,
                 "domain: d\ndescriptors:\n  - key: k\n    value: 123\n    shadow_mode: yes\n"
                 "    rate_limit: {unit: %s, requests_per_unit: 4294967295}\n",
                 units[i]);
        sl_envoy_config *c = load(text);
        const sl_envoy_rule *r = find(c, "d", make("k", "123", NULL));
        cr_assert_not_null(r, "%s", units[i]);
        cr_assert_eq(r->limits[0].limit.period_ns, secs[i] * INT64_C(1000000000));
        cr_assert_eq(r->limits[0].requests_per_unit, UINT32_MAX);
        cr_assert(r->shadow_mode);
        sl_envoy_free(c);
    }
    cr_assert_eq(sl_envoy_unit_parse("unknown", 7), SL_ENVOY_UNKNOWN);
    cr_assert_eq(sl_envoy_unit_parse("WEEK", 4), SL_ENVOY_WEEK);
    cr_assert_eq(sl_envoy_unit_seconds(SL_ENVOY_YEAR), 31536000);
    /* Metadata is anything; a null descriptors list is none. */
    sl_envoy_config *c = load("domain: d\n"
                              "descriptors:\n"
                              "  - key: k\n"
                              "    metadata: {anything: [1, {x: y}], foo: bar}\n"
                              "    descriptors:\n"
                              "    rate_limit: {unit: second, requests_per_unit: 3}\n");
    cr_assert_str_eq(rate(find(c, "d", make("k", "v", NULL))), "3/second");
    sl_envoy_free(c);
}

/* ---- sluice's extensions ---- */

Test(envoy_ext, algorithm_burst_and_several_limits)
{
    sl_envoy_config *c = load("domain: d\n"
                              "descriptors:\n"
                              "  - key: user\n"
                              "    rate_limit:\n"
                              "      unit: second\n"
                              "      requests_per_unit: 10\n"
                              "      algorithm: token_bucket\n"
                              "      burst: 50\n"
                              "    rate_limits:\n"
                              "      - {unit: hour, requests_per_unit: 1000}\n"
                              "      - {unit: day, requests_per_unit: 5000, algorithm: sliding_window}\n");
    const sl_envoy_rule *r = find(c, "d", make("user", "u1", NULL));
    cr_assert_eq(r->nlimits, 3);
    cr_assert_eq(r->limits[0].limit.algorithm, SL_TOKEN_BUCKET);
    cr_assert_eq(r->limits[0].limit.burst, 50);
    cr_assert_eq(r->limits[1].limit.algorithm, SL_FIXED_WINDOW);
    cr_assert_eq(r->limits[1].limit.limit, 1000);
    cr_assert_eq(r->limits[1].limit.period_ns, INT64_C(3600000000000));
    cr_assert_eq(r->limits[2].limit.algorithm, SL_SLIDING_WINDOW);
    /* Carried, each: a reload that changes a limit or its algorithm carries
     * the units a key has used over, instead of finding a state of another
     * shape that the store refuses. */
    for (size_t i = 0; i < r->nlimits; i++)
        cr_assert(r->limits[i].limit.flags & SL_LIMIT_CARRY, "limit %zu", i);
    sl_envoy_limit own;
    cr_assert_eq(sl_envoy_limit_init(&own, SL_ENVOY_MINUTE, 5, SL_FIXED_WINDOW, 0), SL_OK);
    cr_assert(own.limit.flags & SL_LIMIT_CARRY);
    /* One key per limit. */
    char k0[64], k1[64], k2[64];
    size_t n0 = store_key(c, "d", make("user", "u1", NULL), 0, k0, sizeof k0);
    size_t n1 = store_key(c, "d", make("user", "u1", NULL), 1, k1, sizeof k1);
    size_t n2 = store_key(c, "d", make("user", "u1", NULL), 2, k2, sizeof k2);
    cr_assert_eq(n0, strlen("\x1f" "envoy\x1f" "d\x1fuser\x1fu1"));
    cr_assert_eq(memcmp(k0, "\x1f" "envoy\x1f" "d\x1fuser\x1fu1", n0), 0);
    cr_assert_eq(n1, n0 + 3);
    cr_assert_eq(memcmp(k1 + n0, "\x1f#1", 3), 0);
    cr_assert_eq(n2, n0 + 3);
    cr_assert_eq(memcmp(k2 + n0, "\x1f#2", 3), 0);
    sl_envoy_free(c);
}

Test(envoy_ext, store_key_escapes_and_reports_its_length)
{
    sl_envoy_config *c = load("domain: d\ndescriptors:\n  - {key: k, rate_limit: {unit: second, "
                              "requests_per_unit: 1}}\n");
    desc x = make("k", "a\x1f" "b\x1b", NULL);
    char k[64];
    size_t n = store_key(c, "d", x, 0, k, sizeof k);
    const char want[] = "\x1f" "envoy\x1f" "d\x1fk\x1f" "a\x1b" "2b\x1b" "1";
    cr_assert_eq(n, sizeof want - 1);
    cr_assert_eq(memcmp(k, want, n), 0);
    /* Too small a buffer: the length all the same, nothing past cap. */
    char small[8] = {0};
    small[5] = 'Z';
    cr_assert_eq(store_key(c, "d", x, 0, small, 5), n);
    cr_assert_eq(small[5], 'Z');
    sl_envoy_free(c);
}

/* ---- errors: the reference's, with file, line and column ---- */

Test(envoy_errors, the_references_rules)
{
    refused("", "t.yaml: config file cannot have empty domain");
    refused("domain: ''\n", "t.yaml:1:1: config file cannot have empty domain");
    refused("domain: d\ndescriptors:\n  - value: v\n",
            "t.yaml:3:5: descriptor has empty key");
    refused("domain: d\ndescriptors:\n  - key: ''\n", "t.yaml:3:5: descriptor has empty key");
    refused("domain: d\n"
            "descriptors:\n"
            "  - key: key1\n"
            "    value: value1\n"
            "  - key: key1\n"
            "    value: value1\n",
            "t.yaml:5:5: duplicate descriptor composite key 'd.key1_value1'");
    refused("domain: d\n"
            "descriptors:\n"
            "  - key: a\n"
            "    descriptors:\n"
            "      - {key: b}\n"
            "      - {key: b}\n",
            "t.yaml:6:10: duplicate descriptor composite key 'd.a.b'");
    refused("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: foo\n"
            "      requests_per_unit: 5\n",
            "t.yaml:5:13: invalid rate limit unit 'foo'");
    refused("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      requests_per_unit: 5\n",
            "t.yaml:5:7: invalid rate limit unit ''");
    refused("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: unknown\n",
            "t.yaml:5:13: invalid rate limit unit 'unknown'");
    refused("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unlimited: true\n"
            "      unit: second\n",
            "t.yaml:6:7: should not specify rate limit unit when unlimited");
    refused("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      name: n\n"
            "      unit: second\n      replaces:\n        - name: n\n",
            "t.yaml:8:11: replaces should not contain name of same descriptor");
    refused("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"
            "      replaces:\n        - name: ''\n",
            "t.yaml:7:11: should not have an empty replaces entry");
    refused("domain: d\ndescriptors:\n  - key: k\n    share_threshold: true\n",
            "t.yaml:4:5: share_threshold can only be used with wildcard values (containing "
            "'*'), but found key 'k'");
    refused("domain: d\ndescriptors:\n  - key: k\n    ratelimit:\n      unit: second\n",
            "t.yaml:4:5: config error, unknown key 'ratelimit'");
    refused("domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      requestsperunit: 5\n",
            "t.yaml:5:7: config error, unknown key 'requestsperunit'");
    refused("domain: d\ndescriptors:\n  - key: k\n    \"key\\0x\": x\n",
            "t.yaml:4:5: config error, unknown key 'key\\0...' (it holds a NUL byte)");
    refused("domain: \"a\\0b\"\n", "t.yaml:1:9: domain must not hold a NUL byte");
    refused("domain: d\ndescriptors:\n  - key: k\n    0.25: x\n",
            "t.yaml:4:5: config error, key is not of type string: '0.25'");
    refused("domain: d\ndescriptors:\n  - a\n",
            "t.yaml:3:5: config error, yaml file contains list of type other than map: 'a'");
    refused("domain: d\ndescriptors: [\n",
            "t.yaml:3:1: error loading config file: did not find expected node content while "
            "parsing a flow node");
}

Test(envoy_errors, types_and_sluices_own)
{
    refused("- domain: d\n",
            "t.yaml:1:1: error loading config file: the file must be a mapping (domain, "
            "descriptors), not a list");
    refused("domain: d\ndescriptors: {key: k}\n",
            "t.yaml:2:14: descriptors must be a list (got a mapping)");
    refused("domain: [a]\n", "t.yaml:1:10: config error, yaml file contains list of type other "
                              "than map: 'a'");
    refused("domain: {key: b}\n", "t.yaml:1:9: domain must be a string (got a mapping)");
    refused("domain: d\ndescriptors:\n  - key: k\n    shadow_mode: 'true'\n",
            "t.yaml:4:18: shadow_mode must be true or false (got 'true')");
    refused("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
            "requests_per_unit: -1}\n",
            "t.yaml:4:51: requests_per_unit must be a whole number from 0 to 4294967295 (got "
            "'-1')");
    refused("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
            "requests_per_unit: 4294967296}\n",
            "t.yaml:4:51: requests_per_unit must be a whole number from 0 to 4294967295 (got "
            "'4294967296')");
    refused("domain: d\ndescriptors:\n  - key: k\n    key: j\n",
            "t.yaml:4:5: config error, key 'key' is given twice (first on line 3)");
    refused("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
            "requests_per_unit: 1, algorithm: concurrency}\n",
            "t.yaml:4:65: unknown algorithm 'concurrency' (use fixed_window, sliding_window, "
            "sliding_log, gcra, token_bucket or leaky_bucket)");
    refused("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
            "requests_per_unit: 1, burst: 5}\n",
            "t.yaml:4:61: burst applies to gcra, token_bucket and leaky_bucket, not "
            "fixed_window (its limit is per window)");
    refused("domain: d\ndescriptors:\n  - key: k\n    rate_limits: [{unit: second}]\n",
            "t.yaml:4:5: rate_limits needs a rate_limit beside it (the first limit, the one "
            "Envoy is told of)");
    refused("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second}\n"
            "    rate_limits: [{unit: hour, name: x}]\n",
            "t.yaml:5:32: name belongs in rate_limit, not in rate_limits");
    refused("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, "
            "algorithm: gcra}\n",
            "t.yaml:4:35: algorithm has no meaning when unlimited");
    refused("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true}\n"
            "    rate_limits: [{unit: hour}]\n",
            "t.yaml:5:18: rate_limits has no meaning beside an unlimited rate_limit");
    refused("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, "
            "requests_per_unit: 1, algorithm: gcra}\n"
            "    rate_limits: [{unit: hour}, {unit: hour}, {unit: hour}, {unit: hour},\n"
            "                  {unit: hour}, {unit: hour}, {unit: hour}, {unit: hour}]\n",
            "t.yaml:6:61: a descriptor has at most 8 limits (rate_limit and rate_limits "
            "together)");
    refused("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: year, "
            "requests_per_unit: 65537, algorithm: sliding_log}\n",
            "t.yaml:4:49: 65537 per year cannot be a sliding_log limit: limit must be a positive "
            "integer of at most 2305843009213693951 (65536 for sliding_log)");
    /* Too deep. */
    char deep[8192] = "domain: d\ndescriptors:\n";
    size_t len = strlen(deep);
    for (int i = 0; i < SL_ENVOY_MAX_DEPTH + 1; i++)
        len += (size_t)snprintf(deep + len, sizeof deep - len, "%*s- key: k%d\n%*s  descriptors:\n",
                                2 * i, "", i, 2 * i, "");
    snprintf(deep + len, sizeof deep - len, "%*s- key: last\n", 2 * (SL_ENVOY_MAX_DEPTH + 1), "");
    sl_envoy_config *c = sl_envoy_new();
    cr_assert_eq(sl_envoy_add(c, deep, strlen(deep), "t.yaml", err, sizeof err), -1);
    cr_assert(strstr(err, "descriptors nest deeper than 32 levels"), "%s", err);
    sl_envoy_free(c);
}

Test(envoy_errors, aliases_cannot_blow_up)
{
    /* Each level names the one before eight times: 8^8 mappings. */
    sl_envoy_config *c = sl_envoy_new();
    const char *bomb = "domain: d\n"
                       "metadata: [&a {key: x}, &b {descriptors: [*a, *a, *a, *a, *a, *a, *a, *a]},\n"
                       "  &c {descriptors: [*b, *b, *b, *b, *b, *b, *b, *b]},\n"
                       "  &d {descriptors: [*c, *c, *c, *c, *c, *c, *c, *c]},\n"
                       "  &e {descriptors: [*d, *d, *d, *d, *d, *d, *d, *d]},\n"
                       "  &f {descriptors: [*e, *e, *e, *e, *e, *e, *e, *e]},\n"
                       "  &g {descriptors: [*f, *f, *f, *f, *f, *f, *f, *f]},\n"
                       "  &h {descriptors: [*g, *g, *g, *g, *g, *g, *g, *g]}]\n"
                       "descriptors: [{key: top, descriptors: [*h, *h, *h, *h, *h, *h, *h, *h]}]\n";
    cr_assert_eq(sl_envoy_add(c, bomb, strlen(bomb), "t.yaml", err, sizeof err), -1);
    cr_assert(strstr(err, "t.yaml:") == err);
    cr_assert(strstr(err, "aliases counted"), "%s", err);
    sl_envoy_free(c);
}

/* ---- a directory ---- */

static void put(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

Test(envoy_dir, every_yaml_file_once_per_domain)
{
    char dir[] = "/tmp/sl_envoy_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    put(dir, "b.yaml", example2);
    put(dir, "a.yaml", example7);
    put(dir, "notes.txt", "not yaml at all: [");
    put(dir, ".hidden.yaml", "not yaml at all: [");
    sl_envoy_config *c;
    cr_assert_eq(sl_envoy_load_dir(dir, &c, err, sizeof err), 0, "%s", err);
    cr_assert_eq(c->ndomains, 2);
    const sl_envoy_domain *d = sl_envoy_domain_find(c, "messaging", 9);
    cr_assert_not_null(d);
    char want[600];
    snprintf(want, sizeof want, "%s/b.yaml", dir);
    cr_assert_str_eq(d->file, want);
    cr_assert_str_eq(rate(find(c, "example7", make("key_2", "value_2", "user", "bkthomps", NULL))),
                     "10/second");
    sl_envoy_free(c);
    /* The same domain twice: the second file (in name order) is refused. */
    put(dir, "c.yaml", "domain: messaging\n");
    cr_assert_eq(sl_envoy_load_dir(dir, &c, err, sizeof err), -1);
    cr_assert_null(c);
    snprintf(want, sizeof want, "%s/c.yaml:1:9: duplicate domain 'messaging' in config file", dir);
    cr_assert_str_eq(err, want);
    /* An error names its file. */
    put(dir, "c.yaml", "domain: other\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight}\n");
    cr_assert_eq(sl_envoy_load_dir(dir, &c, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s/c.yaml:4:24: invalid rate limit unit 'fortnight'", dir);
    cr_assert_str_eq(err, want);
    const char *names[] = {"a.yaml", "b.yaml", "c.yaml", "notes.txt", ".hidden.yaml"};
    for (size_t i = 0; i < 5; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
    cr_assert_eq(sl_envoy_load_dir(dir, &c, err, sizeof err), -1);
    cr_assert(strstr(err, "No such file"), "%s", err);
}

/* ---- the reference's own wildcard cases ---- */

Test(envoy_match, the_references_wildcard_cases)
{
    sl_envoy_config *c = load("domain: test-domain\n"
                              "descriptors:\n"
                              "  - {key: wild, value: foo*, rate_limit: {unit: minute, requests_per_unit: 20}}\n"
                              "  - {key: noWild, value: foo, rate_limit: {unit: minute, requests_per_unit: 20}}\n"
                              "  - {key: noVal, rate_limit: {unit: minute, requests_per_unit: 20}}\n"
                              "  - {key: midWild, value: bar*b, rate_limit: {unit: minute, requests_per_unit: 20}}\n"
                              "  - {key: multiWild, value: foo*bar*baz,\n"
                              "     rate_limit: {unit: minute, requests_per_unit: 10}}\n"
                              "  - key: nestedWild\n"
                              "    value: val1\n"
                              "    descriptors:\n"
                              "      - {key: wild, value: goo*, rate_limit: {unit: minute, requests_per_unit: 20}}\n");
    const char *D = "test-domain";
    cr_assert_eq(find(c, D, make("noVal", "foo1", NULL)), find(c, D, make("noVal", "foo2", NULL)));
    cr_assert_str_eq(metric(c, D, make("noVal", "foo1", NULL)), "test-domain.noVal");
    cr_assert_eq(find(c, D, make("wild", "foo1", NULL)), find(c, D, make("wild", "foo2", NULL)));
    cr_assert_str_eq(metric(c, D, make("wild", "foo2", NULL)), "test-domain.wild_foo*");
    cr_assert_str_eq(metric(c, D, make("nestedWild", "val1", "wild", "goo2", NULL)),
                     "test-domain.nestedWild_val1.wild_goo*");
    cr_assert_null(find(c, D, make("wild", "bar", NULL)));
    cr_assert_null(find(c, D, make("noWild", "foo1", NULL)));
    const sl_envoy_rule *mid = find(c, D, make("midWild", "barab", NULL));
    cr_assert_not_null(mid);
    cr_assert_eq(find(c, D, make("midWild", "bar123b", NULL)), mid);
    cr_assert_eq(find(c, D, make("midWild", "barb", NULL)), mid);
    cr_assert_str_eq(metric(c, D, make("midWild", "barb", NULL)), "test-domain.midWild_bar*b");
    cr_assert_null(find(c, D, make("midWild", "bara", NULL)));
    cr_assert_null(find(c, D, make("midWild", "xbarb", NULL)));
    const sl_envoy_rule *multi = find(c, D, make("multiWild", "foo123bar456baz", NULL));
    cr_assert_not_null(multi);
    cr_assert_eq(find(c, D, make("multiWild", "foobarbaz", NULL)), multi);
    cr_assert_null(find(c, D, make("multiWild", "foobaz", NULL)));
    cr_assert_str_eq(metric(c, D, make("multiWild", "foobarbaz", NULL)),
                     "test-domain.multiWild_foo*bar*baz");
    /* An entry longer than the matcher's stack buffer. */
    char big[3 * SL_ENVOY_SCRATCH];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    memcpy(big, "foo", 3);
    cr_assert_eq(find(c, D, make("wild", big, NULL)), find(c, D, make("wild", "foo", NULL)));
    sl_envoy_free(c);
}

/* ---- out of memory ---- */

Test(envoy_errors, every_allocation_failure_is_an_answer)
{
    bool loaded = false;
    for (long n = 1; n < 10000 && !loaded; n++) {
        sl_envoy_config *c = sl_envoy_new();
        cr_assert_not_null(c);
        sl_alloc_fail_nth(n);
        int rc = sl_envoy_add(c, example7, strlen(example7), "t.yaml", err, sizeof err);
        sl_alloc_fail_nth(0);
        if (rc == 0) {
            loaded = true;
            cr_assert_str_eq(rate(find(c, "example7", make("key_2", "value_2", "user", "bkthomps",
                                                           NULL))),
                             "10/second");
        } else {
            cr_assert_str_eq(err, "t.yaml: out of memory", "allocation %ld", n);
            cr_assert_eq(c->ndomains, 0);
        }
        sl_envoy_free(c);
    }
    cr_assert(loaded);
}

Test(envoy_match, a_value_without_a_rule_lets_it_through)
{
    /* The reference's "whitelist": the exact match wins and has no rule,
     * so the key's default does not apply either. */
    sl_envoy_config *c = load("domain: d\n"
                              "descriptors:\n"
                              "  - key: key2\n"
                              "    rate_limit: {unit: minute, requests_per_unit: 20}\n"
                              "  - key: key2\n"
                              "    value: value2\n"
                              "    rate_limit: {unit: minute, requests_per_unit: 30}\n"
                              "  - key: key2\n"
                              "    value: value3\n");
    cr_assert_str_eq(rate(find(c, "d", make("key2", "value1", NULL))), "20/minute");
    cr_assert_str_eq(rate(find(c, "d", make("key2", "value2", NULL))), "30/minute");
    cr_assert_str_eq(rate(find(c, "d", make("key2", "value3", NULL))), "none");
    sl_envoy_free(c);
}

Test(envoy_values, a_limit_override)
{
    sl_envoy_limit l;
    cr_assert_eq(sl_envoy_limit_init(&l, SL_ENVOY_MINUTE, 42, SL_FIXED_WINDOW, 0), SL_OK);
    cr_assert_eq(l.limit.algorithm, SL_FIXED_WINDOW);
    cr_assert_eq(l.limit.limit, 42);
    cr_assert_eq(l.limit.period_ns, INT64_C(60000000000));
    cr_assert_eq(sl_envoy_limit_init(&l, SL_ENVOY_UNKNOWN, 42, SL_FIXED_WINDOW, 0), SL_ERR_PERIOD);
    cr_assert_eq(sl_envoy_limit_init(&l, SL_ENVOY_DAY, 0, SL_FIXED_WINDOW, 0), SL_OK);
    cr_assert_eq(l.requests_per_unit, 0);
    cr_assert_eq(sl_envoy_limit_init(&l, SL_ENVOY_SECOND, 5, SL_GCRA, 9), SL_OK);
    cr_assert_eq(l.limit.burst, 9);
}

/* Windows fall where the reference has them, at multiples of the unit since
 * the Unix epoch, whatever the clock's offset from Unix time: a week from
 * Thursday, a month every 30 days, a minute on the minute. */
Test(envoy_align, windows_at_multiples_of_the_unit_since_the_epoch)
{
    static const sl_envoy_unit units[] = {SL_ENVOY_SECOND, SL_ENVOY_MINUTE, SL_ENVOY_HOUR,
                                          SL_ENVOY_DAY,    SL_ENVOY_WEEK,   SL_ENVOY_MONTH,
                                          SL_ENVOY_YEAR};
    /* Unix time 2026-12-02 04:00:07.5 UTC, a Wednesday; a clock that reads
     * it minus an offset of about 56 years and a fraction. */
    const int64_t unix_now = INT64_C(1796097607500000000);
    const int64_t offset = INT64_C(1796000000123456789);
    const int64_t now = unix_now - offset;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        sl_envoy_limit l;
        cr_assert_eq(sl_envoy_limit_init(&l, units[i], 10, SL_FIXED_WINDOW, 0), SL_OK);
        cr_assert_eq(sl_envoy_limit_align(&l, offset), SL_OK);
        uint64_t state[8] = {0};
        cr_assert_leq(sl_state_size(&l.limit), sizeof state);
        sl_decision d;
        cr_assert_eq(sl_take(&l.limit, state, now, 1, &d), SL_OK);
        int64_t unit = sl_envoy_unit_seconds(units[i]) * INT64_C(1000000000);
        int64_t into = unix_now % unit;
        cr_assert_eq(d.reset_after_ns, unit - into, "%s: %lld, not %lld",
                     sl_envoy_unit_name(units[i]), (long long)d.reset_after_ns,
                     (long long)(unit - into));
    }
}
