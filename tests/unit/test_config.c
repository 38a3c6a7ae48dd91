/*
 * The config file: policies with tiers and global limits, server settings,
 * and an error naming file, line, column and reason for every mistake.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "policy/config.h"
#include "testlib.h"

static char err[512];

static sl_config *parse_ok(const char *yaml)
{
    sl_config *c = NULL;
    cr_assert_eq(sl_config_parse(yaml, strlen(yaml), "t.yaml", &c, err, sizeof err), 0, "%s", err);
    return c;
}

static const char *parse_err(const char *yaml)
{
    sl_config *c = (sl_config *)1;
    cr_assert_eq(sl_config_parse(yaml, strlen(yaml), "t.yaml", &c, err, sizeof err), -1,
                 "accepted: %s", yaml);
    cr_assert_null(c);
    return err;
}

Test(config, policies_tiers_globals_and_settings)
{
    sl_config *c = parse_ok("server:\n"
                            "  port: 7000\n"
                            "  max_memory: 64m\n"
                            "policies:\n"
                            "  api:\n"
                            "    algorithm: token_bucket\n"
                            "    limit: 100\n"
                            "    period: 1m\n"
                            "    burst: 20\n"
                            "    key: \"u:{key}\"\n"
                            "    shadow: yes\n"
                            "    tiers:\n"
                            "      free: {limit: 10, period: 60}\n"
                            "      paid: {limit: 1000, period: 1m, algorithm: gcra}\n"
                            "    global: {limit: 50000, period: 1m}\n"
                            "  login:\n"
                            "    limit: 5\n"
                            "    period: 15m\n"
                            "    algorithm: sliding_log\n");
    cr_assert_eq(c->nsettings, 2);
    cr_assert_str_eq(c->settings[1].name, "max-memory");
    cr_assert_str_eq(c->settings[1].value, "64m");
    cr_assert_eq(c->settings[1].line, 3);
    cr_assert_eq(c->npolicies, 2);
    const sl_policy *p = sl_config_policy(c, "api", 3);
    cr_assert_not_null(p);
    cr_assert_eq(p->limit.algorithm, SL_TOKEN_BUCKET);
    cr_assert_eq(p->limit.limit, 100);
    cr_assert_eq(p->limit.period_ns, 60 * NS_PER_SEC);
    cr_assert_eq(p->limit.burst, 20);
    cr_assert(p->shadow);
    cr_assert(p->has_global);
    cr_assert_eq(p->global.limit, 50000);
    cr_assert_eq(p->global.algorithm, SL_TOKEN_BUCKET, "a global inherits the algorithm");
    const sl_limit *free_tier = sl_policy_limit(p, "free", 4);
    cr_assert_eq(free_tier->limit, 10);
    cr_assert_eq(free_tier->algorithm, SL_TOKEN_BUCKET, "a tier inherits the algorithm");
    cr_assert_eq(sl_policy_limit(p, "paid", 4)->algorithm, SL_GCRA);
    cr_assert_null(sl_policy_limit(p, "gold", 4));
    cr_assert_eq(sl_policy_limit(p, NULL, 0), &p->limit);

    char key[64];
    size_t n = sl_policy_key(p, "alice", 5, key, sizeof key);
    cr_assert_eq(n, 7);
    cr_assert(memcmp(key, "u:alice", 7) == 0);
    const sl_policy *login = sl_config_policy(c, "login", 5);
    n = sl_policy_key(login, "bob", 3, key, sizeof key);
    cr_assert(n == 9 && memcmp(key, "login:bob", 9) == 0, "default template {policy}:{key}");
    cr_assert_eq(sl_policy_key(login, "bob", 3, key, 8), 0, "too small a buffer");
    n = sl_policy_global_key(p, key, sizeof key);
    cr_assert(n == 11 && memcmp(key, "\x1fglobal\x1f" "api", 11) == 0);
    cr_assert_null(sl_config_policy(c, "ap", 2));
    sl_config_free(c);

    c = parse_ok("");
    cr_assert_eq(c->npolicies, 0);
    sl_config_free(c);
    c = parse_ok("policies:\nserver:\n");
    sl_config_free(c);
}

Test(config, every_mistake_names_file_line_column_and_reason)
{
    cr_assert_str_eq(parse_err("policies:\n  api:\n    limit: abc\n    period: 1m\n"),
                     "t.yaml:3:12: policy 'api': limit must be an integer of at least 1 (got 'abc')");
    cr_assert_str_eq(parse_err("policies:\n  api:\n    limit: 5\n    period: soon\n"),
                     "t.yaml:4:13: policy 'api': period must be a positive duration: seconds, or "
                     "a number with ms, s, m, h, d, w or mo (got 'soon')");
    cr_assert_str_eq(parse_err("policies:\n  api:\n    limit: 5\n"),
                     "t.yaml:3:5: policy 'api': period is required");
    cr_assert_str_eq(parse_err("policies:\n  api:\n    limit: 5\n    period: 1m\n    colour: red\n"),
                     "t.yaml:5:5: policy 'api': unknown setting 'colour'");
    cr_assert_str_eq(parse_err("policies:\n  api: {limit: 5, period: 1m, algorithm: magic}\n"),
                     "t.yaml:2:42: policy 'api': unknown algorithm 'magic' (use gcra, "
                     "token_bucket, leaky_bucket, fixed_window, sliding_log or sliding_window)");
    cr_assert_str_eq(parse_err("policies:\n  a: {limit: 1, period: 1}\n  a: {limit: 2, period: 1}\n"),
                     "t.yaml:3:3: 'a' is given twice in one mapping (first on line 2)");
    cr_assert_str_eq(parse_err("policy:\n  a: 1\n"),
                     "t.yaml:1:1: unknown section 'policy' (use server or policies)");
    cr_assert_str_eq(parse_err("- a\n- b\n"),
                     "t.yaml:1:1: the file must be a mapping with server and policies sections");
    cr_assert_str_eq(parse_err("policies:\n  a: {limit: 1, period: 1, key: \"x\"}\n"),
                     "t.yaml:2:33: policy 'a': key must be a template of at most 128 characters "
                     "containing {key} (got 'x')");
    cr_assert_str_eq(parse_err("policies:\n  a: {limit: 1, period: 1, shadow: maybe}\n"),
                     "t.yaml:2:36: policy 'a': shadow must be true or false (got 'maybe')");
    cr_assert_str_eq(parse_err("policies:\n  a: {limit: 1, period: 1, tiers: {x: {limit: 0, period: 1}}}\n"),
                     "t.yaml:2:47: policy 'a' tier 'x': limit must be an integer of at least 1 (got '0')");
    cr_assert_str_eq(parse_err("policies:\n  a: {limit: 5, period: 100000d}\n"),
                     "t.yaml:2:25: policy 'a': period must be a positive duration: seconds, or a "
                     "number with ms, s, m, h, d, w or mo (got '100000d')");
    cr_assert_str_eq(parse_err("policies:\n  a: {limit: 1, period: 1}\npolicies:\n  b: {limit: 1, period: 1}\n"),
                     "t.yaml:3:1: 'policies' is given twice in one mapping (first on line 1)"); /* found by fuzz_config */
    cr_assert_str_eq(parse_err("server:\n  port: [1, 2]\n"),
                     "t.yaml:2:9: server: port must be a single value (got a list)");
    /* YAML itself */
    const char *e = parse_err("policies:\n  a: {limit: 1\n");
    cr_assert(strncmp(e, "t.yaml:3:1: ", 12) == 0, "%s", e);
    e = parse_err("a: [\n");
    cr_assert(strncmp(e, "t.yaml:", 7) == 0, "%s", e);
}

Test(config, files_too_big_or_missing_are_refused)
{
    sl_config *c;
    cr_assert_eq(sl_config_load("/nonexistent/sluice.yaml", &c, err, sizeof err), -1);
    cr_assert_str_eq(err, "/nonexistent/sluice.yaml: No such file or directory");
    static char big[SL_CONFIG_MAX_BYTES + 2];
    memset(big, '#', sizeof big - 1);
    cr_assert_eq(sl_config_parse(big, sizeof big - 1, "big.yaml", &c, err, sizeof err), -1);
    cr_assert_str_eq(err, "big.yaml: the file is larger than 1048576 bytes");
}

Test(config, a_policy_request_becomes_its_takes)
{
    sl_config *c = parse_ok("policies:\n"
                            "  api:\n"
                            "    limit: 10\n"
                            "    period: 1m\n"
                            "    key: \"u:{key}\"\n"
                            "    tiers: {paid: {limit: 99, period: 1m}}\n"
                            "    global: {limit: 500, period: 1m}\n"
                            "  solo: {limit: 1, period: 1s}\n");
    const sl_policy *api = sl_config_policy(c, "api", 3), *solo = sl_config_policy(c, "solo", 4);
    char key[16], gkey[SL_POLICY_NAME_MAX + 16];
    sl_take_item it[2];
    cr_assert_eq(sl_policy_items(api, "paid", 4, "bob", 3, 2, key, sizeof key, gkey, sizeof gkey, it), 2);
    cr_assert(it[0].keylen == 5 && memcmp(it[0].key, "u:bob", 5) == 0);
    cr_assert_eq(it[0].limit->limit, 99);
    cr_assert_eq(it[0].cost, 2);
    cr_assert_eq(it[1].limit, &api->global);
    cr_assert_eq(it[1].cost, 2);
    cr_assert_eq(sl_policy_items(solo, NULL, 0, "x", 1, 1, key, sizeof key, gkey, sizeof gkey, it), 1);
    cr_assert_eq(sl_policy_items(api, "gold", 4, "bob", 3, 1, key, sizeof key, gkey, sizeof gkey, it), -1);
    cr_assert_eq(sl_policy_items(api, NULL, 0, "", 0, 1, key, sizeof key, gkey, sizeof gkey, it), 0,
                 "an empty key");
    cr_assert_eq(sl_policy_items(api, NULL, 0, "a-key-too-long-for-16", 21, 1, key, sizeof key, gkey,
                                 sizeof gkey, it), 0, "a store key that does not fit");
    sl_config_free(c);
}

Test(config, integers_are_whole_decimal_text)
{
    /* common/parse.h's rules: no spaces around the digits (strtoll skipped
     * leading ones), no overflow, a sign allowed. */
    cr_assert_str_eq(parse_err("policies:\n  api: {limit: \" 5\", period: 1m}\n"),
                     "t.yaml:2:16: policy 'api': limit must be an integer of at least 1 (got ' 5')");
    cr_assert_str_eq(parse_err("policies:\n  api: {limit: \"5 \", period: 1m}\n"),
                     "t.yaml:2:16: policy 'api': limit must be an integer of at least 1 (got '5 ')");
    cr_assert_str_eq(parse_err("policies:\n  api: {limit: 9223372036854775808, period: 1m}\n"),
                     "t.yaml:2:16: policy 'api': limit must be an integer of at least 1 "
                     "(got '9223372036854775808')");
    sl_config *c = parse_ok("policies:\n  api: {limit: +5, period: 1m, burst: 007}\n");
    cr_assert_eq(c->npolicies, 1);
    sl_config_free(c);
}

Test(config, a_burst_of_zero_is_refused_and_algorithm_names_ignore_case)
{
    /* burst 0 used to mean "the limit": the opposite of nginx's burst=0. */
    cr_assert_str_eq(parse_err("policies:\n  api: {limit: 5, period: 1m, burst: 0}\n"),
                     "t.yaml:2:38: policy 'api': burst must be an integer of at least 1 (got '0')");
    cr_assert_str_eq(
        parse_err("policies:\n  a: {limit: 5, period: 1m, tiers: {x: {limit: 9, period: 1, burst: 0}}}\n"),
        "t.yaml:2:69: policy 'a' tier 'x': burst must be an integer of at least 1 (got '0')");
    cr_assert_str_eq(parse_err("policies:\n  a: {limit: 5, period: 1m, global: {limit: 9, period: 1, "
                               "burst: 0}}\n"),
                     "t.yaml:2:66: policy 'a' global: burst must be an integer of at least 1 (got '0')");
    sl_config *c = parse_ok("policies:\n"
                            "  a: {limit: 5, period: 1m, burst: 1, algorithm: Token_Bucket}\n"
                            "  b: {limit: 5, period: 1m, algorithm: GCRA}\n"
                            "  d: {limit: 5, period: 1m}\n");
    const sl_policy *p = sl_config_policy(c, "a", 1);
    cr_assert_eq(p->limit.burst, 1);
    cr_assert_eq(p->limit.algorithm, SL_TOKEN_BUCKET);
    cr_assert_eq(sl_config_policy(c, "b", 1)->limit.algorithm, SL_GCRA);
    cr_assert_eq(sl_config_policy(c, "d", 1)->limit.burst, 5, "an omitted burst is the limit");
    sl_config_free(c);
}

Test(config, a_key_given_twice_is_refused_in_every_mapping)
{
    cr_assert_str_eq(parse_err("policies:\n  api:\n    limit: 10\n    period: 1m\n    burst: 3\n"
                               "    burst: 4\n"),
                     "t.yaml:6:5: 'burst' is given twice in one mapping (first on line 5)");
    cr_assert_str_eq(parse_err("policies:\n  api: {limit: 1, period: 1s}\n  api: {limit: 2, period: 1s}\n"),
                     "t.yaml:3:3: 'api' is given twice in one mapping (first on line 2)");
    cr_assert_str_eq(parse_err("server:\n  port: 1\n  port: 2\n"),
                     "t.yaml:3:3: 'port' is given twice in one mapping (first on line 2)");
    cr_assert_str_eq(parse_err("policies:\n  api:\n    limit: 10\n    period: 1m\n    tiers:\n"
                               "      free: {limit: 1, period: 1s, limit: 2}\n"),
                     "t.yaml:6:36: 'limit' is given twice in one mapping (first on line 6)");
    /* the same name in two mappings is fine */
    sl_config *c = parse_ok("policies:\n  a: {limit: 1, period: 1s}\n  b: {limit: 1, period: 1s}\n");
    cr_assert_eq(c->npolicies, 2);
    sl_config_free(c);
}

static void collect_line(void *arg, const char *line)
{
    char *buf = arg;
    strncat(buf, line, 2047 - strlen(buf));
    strncat(buf, "\n", 2047 - strlen(buf));
}

Test(config, store_error_policy_and_time_budget_per_policy)
{
    sl_config *c = parse_ok("policies:\n"
                            "  api:\n"
                            "    limit: 10\n"
                            "    period: 1m\n"
                            "    on_store_error: local\n"
                            "    store_timeout_ms: 20\n"
                            "  login: {limit: 5, period: 1m, on_store_error: fail_closed}\n"
                            "  plain: {limit: 5, period: 1m}\n");
    const sl_policy *api = sl_config_policy(c, "api", 3);
    const sl_policy *login = sl_config_policy(c, "login", 5);
    const sl_policy *plain = sl_config_policy(c, "plain", 5);
    cr_assert_eq(api->on_store_error, SL_ON_ERROR_LOCAL);
    cr_assert_eq(api->store_timeout_ms, 20);
    cr_assert_eq(login->on_store_error, SL_ON_ERROR_FAIL_CLOSED);
    cr_assert_eq(login->store_timeout_ms, 0);
    /* Unset: the flags' (--on-store-error, --store-timeout-ms) decide. */
    cr_assert_eq(plain->on_store_error, SL_ON_ERROR_DEFAULT);
    cr_assert_eq(plain->store_timeout_ms, 0);

    sl_config *next = parse_ok("policies:\n"
                               "  api: {limit: 10, period: 1m, on_store_error: fail_open}\n"
                               "  login: {limit: 5, period: 1m, on_store_error: fail_closed}\n"
                               "  plain: {limit: 5, period: 1m, store_timeout_ms: 100}\n");
    char said[2048] = "";
    sl_config_describe_reload(c, next, collect_line, said);
    cr_assert(strstr(said, "policy 'api': on_store_error local -> fail_open\n"), "%s", said);
    cr_assert(strstr(said, "policy 'api': store_timeout_ms 20 -> 0 (the flag's)\n"), "%s", said);
    cr_assert(strstr(said, "policy 'plain': store_timeout_ms 0 -> 100\n"), "%s", said);
    cr_assert_null(strstr(said, "'login'"), "%s", said);
    sl_config_free(next);
    sl_config_free(c);
}

Test(config, store_error_fields_are_validated)
{
    cr_assert_str_eq(parse_err("policies:\n  a: {limit: 1, period: 1, on_store_error: fail}\n"),
                     "t.yaml:2:44: policy 'a': on_store_error must be fail_open, fail_closed or "
                     "local (got 'fail')");
    cr_assert_str_eq(parse_err("policies:\n  a: {limit: 1, period: 1, on_store_error: [local]}\n"),
                     "t.yaml:2:44: policy 'a': on_store_error must be fail_open, fail_closed or "
                     "local (got a list)");
    cr_assert_str_eq(parse_err("policies:\n  a: {limit: 1, period: 1, store_timeout_ms: 0}\n"),
                     "t.yaml:2:46: policy 'a': store_timeout_ms must be an integer of at least 1 "
                     "(got '0')");
    cr_assert_str_eq(parse_err("policies:\n  a: {limit: 1, period: 1, store_timeout_ms: 60001}\n"),
                     "t.yaml:2:46: policy 'a': store_timeout_ms must be at most 60000 (got "
                     "'60001')");
    cr_assert_str_eq(parse_err("policies:\n  a: {limit: 1, period: 1, store_timeout_ms: 5s}\n"),
                     "t.yaml:2:46: policy 'a': store_timeout_ms must be an integer of at least 1 "
                     "(got '5s')");
    cr_assert_str_eq(parse_err("policies:\n  a:\n    limit: 1\n    period: 1\n"
                               "    on_store_error: local\n    on_store_error: fail_open\n"),
                     "t.yaml:6:5: 'on_store_error' is given twice in one mapping (first on line 5)");
    /* Only a policy has them, not a tier. */
    cr_assert_str_eq(parse_err("policies:\n  a: {limit: 1, period: 1, tiers: {t: {limit: 1, "
                               "period: 1, on_store_error: local}}}\n"),
                     "t.yaml:2:61: policy 'a' tier 't': unknown setting 'on_store_error'");
}

Test(config, store_error_names)
{
    sl_on_error e;
    cr_assert_eq(sl_on_error_parse("fail_open", 9, &e), SL_OK);
    cr_assert_eq(e, SL_ON_ERROR_FAIL_OPEN);
    cr_assert_eq(sl_on_error_parse("fail_closed", 11, &e), SL_OK);
    cr_assert_eq(e, SL_ON_ERROR_FAIL_CLOSED);
    cr_assert_eq(sl_on_error_parse("local", 5, &e), SL_OK);
    cr_assert_eq(e, SL_ON_ERROR_LOCAL);
    cr_assert_eq(sl_on_error_parse("Local", 5, &e), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_on_error_parse("fail_opened", 11, &e), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_on_error_parse("fail", 4, &e), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_on_error_parse("", 0, &e), SL_ERR_ARGUMENT);
    cr_assert_str_eq(sl_on_error_name(SL_ON_ERROR_LOCAL), "local");
    cr_assert_str_eq(sl_on_error_name(SL_ON_ERROR_DEFAULT), "default");
}
