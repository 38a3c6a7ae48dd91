/*
 * The config file: policies with tiers and global limits, server settings,
 * and an error naming file, line, column and reason for every mistake.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#include "policy/config.h"
#include "configlib.h"
#include "testlib.h"

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
    cr_assert_eq(p->limits.l[0].limit.algorithm, SL_TOKEN_BUCKET);
    cr_assert_eq(p->limits.l[0].limit.limit, 100);
    cr_assert_eq(p->limits.l[0].limit.period_ns, 60 * NS_PER_SEC);
    cr_assert_eq(p->limits.l[0].limit.burst, 20);
    cr_assert(p->shadow);
    cr_assert_eq(p->global.n, 1);
    cr_assert_eq(p->global.l[0].limit.limit, 50000);
    cr_assert_eq(p->global.l[0].limit.algorithm, SL_TOKEN_BUCKET, "a global inherits the algorithm");
    const sl_limit *free_tier = &sl_policy_limits(p, "free", 4)->l[0].limit;
    cr_assert_eq(free_tier->limit, 10);
    cr_assert_eq(free_tier->algorithm, SL_TOKEN_BUCKET, "a tier inherits the algorithm");
    cr_assert_eq(sl_policy_limits(p, "paid", 4)->l[0].limit.algorithm, SL_GCRA);
    cr_assert_null(sl_policy_limits(p, "gold", 4));
    cr_assert_eq(sl_policy_limits(p, NULL, 0), &p->limits);

    char key[64];
    size_t n = sl_policy_key(p, "alice", 5, key, sizeof key);
    cr_assert_eq(n, 7);
    cr_assert(memcmp(key, "u:alice", 7) == 0);
    const sl_policy *login = sl_config_policy(c, "login", 5);
    n = sl_policy_key(login, "bob", 3, key, sizeof key);
    cr_assert(n == 9 && memcmp(key, "login:bob", 9) == 0, "default template {policy}:{key}");
    cr_assert_eq(sl_policy_key(login, "bob", 3, key, 8), -1, "too small a buffer");
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
                     "t.yaml:2:33: policy 'a': key 'x' writes one store key for every request: "
                     "it needs {key} or a part of the request (header.NAME, query.NAME, method, "
                     "path, ip)");
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
    char key[32];
    sl_take_item it[SL_TAKE_MANY_MAX];
    const sl_named_limit *which[SL_TAKE_MANY_MAX];
    size_t nkey = 0;
    cr_assert_eq(sl_policy_items(api, "paid", 4, "bob", 3, 2, 7, key, sizeof key, it, which, &nkey), 2);
    cr_assert(it[0].keylen == 5 && memcmp(it[0].key, "u:bob", 5) == 0);
    cr_assert_eq(it[0].limit->limit, 99);
    cr_assert_eq(it[0].cost, 2, "a limit of requests is charged the cost, not the tokens");
    cr_assert_eq(it[1].limit, &api->global.l[0].limit);
    cr_assert(it[1].keylen == 11 && memcmp(it[1].key, "\x1fglobal\x1f" "api", 11) == 0);
    cr_assert_eq(it[1].cost, 2);
    cr_assert_eq(nkey, 1);
    cr_assert_str_eq(which[1]->name, "");
    cr_assert_eq(sl_policy_items(solo, NULL, 0, "x", 1, 1, 0, key, sizeof key, it, which, &nkey), 1);
    cr_assert_eq(sl_policy_items(api, "gold", 4, "bob", 3, 1, 0, key, sizeof key, it, which, &nkey), -1);
    cr_assert_eq(sl_policy_items(api, NULL, 0, "", 0, 1, 0, key, sizeof key, it, which, &nkey), 0,
                 "an empty key");
    cr_assert_eq(sl_policy_items(api, NULL, 0, "a-key-too-long-for-32-bytes-of-room", 35, 1, 0, key,
                                 sizeof key, it, which, &nkey), 0, "a store key that does not fit");
    cr_assert_eq(sl_policy_items(api, NULL, 0, "a-key-of-thirty-bytes-exactly", 29, 1, 0, key,
                                 sizeof key, it, which, &nkey), 0, "room for the key, not the global key");
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
    cr_assert_eq(p->limits.l[0].limit.burst, 1);
    cr_assert_eq(p->limits.l[0].limit.algorithm, SL_TOKEN_BUCKET);
    cr_assert_eq(sl_config_policy(c, "b", 1)->limits.l[0].limit.algorithm, SL_GCRA);
    cr_assert_eq(sl_config_policy(c, "d", 1)->limits.l[0].limit.burst, 5, "an omitted burst is the limit");
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

static const char *const CHAT =
    "policies:\n"
    "  chat:\n"
    "    algorithm: sliding_window\n"
    "    limits:\n"
    "      - {name: rps, limit: 10, period: 1s, algorithm: gcra}\n"
    "      - {name: rpm, limit: 300, period: 1m}\n"
    "      - {name: tpm, limit: 100000, period: 1m, cost: tokens}\n"
    "    tiers:\n"
    "      paid:\n"
    "        limits:\n"
    "          - {name: rps, limit: 100, period: 1s}\n"
    "          - {name: tpm, limit: 2000000, period: 1m, cost: tokens}\n"
    "    global:\n"
    "      limits: [{name: tpm, limit: 50000000, period: 1m, cost: tokens}]\n";

Test(config, several_limits_each_with_its_own_cost)
{
    sl_config *c = parse_ok(CHAT);
    const sl_policy *p = sl_config_policy(c, "chat", 4);
    cr_assert_eq(p->limits.n, 3);
    cr_assert_str_eq(p->limits.l[0].name, "rps");
    cr_assert_eq(p->limits.l[0].limit.algorithm, SL_GCRA, "a limit's own algorithm wins");
    cr_assert_eq(p->limits.l[1].limit.algorithm, SL_SLIDING_WINDOW, "the policy's is the default");
    cr_assert_eq(p->limits.l[1].unit, SL_UNIT_REQUESTS);
    cr_assert_eq(p->limits.l[2].unit, SL_UNIT_TOKENS);
    const sl_limit_set *paid = sl_policy_limits(p, "paid", 4);
    cr_assert_eq(paid->n, 2);
    cr_assert_eq(paid->l[0].limit.algorithm, SL_GCRA, "a tier's rps inherits the policy's rps");
    cr_assert_eq(paid->l[1].limit.algorithm, SL_SLIDING_WINDOW);
    cr_assert_eq(p->global.n, 1);

    char keys[SL_POLICY_KEYS_ROOM];
    sl_take_item it[SL_TAKE_MANY_MAX];
    const sl_named_limit *which[SL_TAKE_MANY_MAX];
    size_t nkey = 0;
    cr_assert_eq(sl_policy_items(p, NULL, 0, "k1", 2, 1, 750, keys, sizeof keys, it, which, &nkey), 4);
    cr_assert_eq(nkey, 3);
    static const char *const want[] = {"{chat:k1}\x1frps", "{chat:k1}\x1frpm", "{chat:k1}\x1ftpm",
                                       "{\x1fglobal\x1f" "chat}\x1ftpm"};
    static const int64_t cost[] = {1, 1, 750, 750};
    for (int i = 0; i < 4; i++) {
        cr_assert(it[i].keylen == strlen(want[i]) && memcmp(it[i].key, want[i], it[i].keylen) == 0,
                  "item %d: %.*s", i, (int)it[i].keylen, (const char *)it[i].key);
        cr_assert_eq(it[i].cost, cost[i], "item %d", i);
        cr_assert_eq(it[i].limit, &which[i]->limit);
    }
    cr_assert_eq(sl_policy_items(p, "paid", 4, "k1", 2, 2, 5, keys, sizeof keys, it, which, &nkey), 3);
    cr_assert(it[1].keylen == 13 && memcmp(it[1].key, "{chat:k1}\x1ftpm", 13) == 0,
              "a tier's tpm is the same state as the policy's");
    cr_assert_eq(it[1].limit->limit, 2000000);
    cr_assert_eq(it[0].cost, 2);
    cr_assert_eq(it[1].cost, 5);

    char name[SL_POLICY_LIMIT_NAME_ROOM];
    sl_policy_limit_name("chat", "tpm", false, name, sizeof name);
    cr_assert_str_eq(name, "chat.tpm");
    sl_policy_limit_name("chat", "tpm", true, name, sizeof name);
    cr_assert_str_eq(name, "chat.global.tpm");
    sl_policy_limit_name("api", "", true, name, sizeof name);
    cr_assert_str_eq(name, "api.global");
    sl_policy_limit_name("api", "", false, name, sizeof name);
    cr_assert_str_eq(name, "api");
    /* cut as snprintf cuts: the length it wanted, what fits and a NUL */
    cr_assert_eq(sl_policy_limit_name("chat", "tpm", true, name, 7), 15);
    cr_assert_str_eq(name, "chat.g");
    cr_assert_eq(sl_policy_limit_name("chat", NULL, false, name, 0), 4);
    sl_config_free(c);
}

Test(config, several_limits_are_checked_whole)
{
    cr_assert_str_eq(parse_err("policies:\n  a:\n    limits: [{name: x, limit: 1, period: 1},"
                               " {name: x, limit: 2, period: 1}]\n"),
                     "t.yaml:3:53: policy 'a': limit 'x' is given twice");
    cr_assert_str_eq(parse_err("policies:\n  a:\n    limits: [{limit: 1, period: 1}]\n"),
                     "t.yaml:3:14: policy 'a': each of limits needs a name");
    cr_assert_str_eq(parse_err("policies:\n  a:\n    limits: [{name: \"a.b\", limit: 1, period: 1}]\n"),
                     "t.yaml:3:21: policy 'a': a limit's name must be 1 to 32 letters, digits, '_' "
                     "or '-' (got 'a.b')");
    cr_assert_str_eq(parse_err("policies:\n  a:\n    limits: []\n"),
                     "t.yaml:3:13: policy 'a': limits must be a list of 1 to 8 limits, each with a "
                     "name");
    cr_assert_str_eq(parse_err("policies:\n  a:\n    limit: 5\n    limits: [{name: x, limit: 1, "
                               "period: 1}]\n"),
                     "t.yaml:3:5: policy 'a': 'limit' belongs to each of limits, not beside them");
    cr_assert_str_eq(parse_err("policies:\n  a:\n    limits: [{name: x, limit: 1, period: 1, "
                               "cost: bytes}]\n"),
                     "t.yaml:3:51: policy 'a' limit 'x': cost must be requests (a request's COST, 1 "
                     "unless it says) or tokens (its TOKENS, 0 unless it says) (got 'bytes')");
    cr_assert_str_eq(parse_err("policies:\n  a:\n    limits: [{name: x, limit: 1, period: 1}]\n"
                               "    tiers: {paid: {limit: 5, period: 1}}\n"),
                     "t.yaml:3:5: policy 'a' tier 'paid': the policy's limits are a list (limits:), "
                     "so every tier must give a list of limits too");
    cr_assert_str_eq(parse_err("policies:\n  a:\n    limit: 1\n    period: 1\n"
                               "    tiers: {paid: {limits: [{name: x, limit: 5, period: 1}]}}\n"),
                     "t.yaml:3:5: policy 'a' tier 'paid': the policy is one limit (limit: and "
                     "period:), so every tier must give one limit too");
    const char *e = parse_err("policies:\n  a:\n    limits: [{name: a, limit: 1, period: 1}, "
                              "{name: b, limit: 1, period: 1}]\n"
                              "    global: {limits: [{name: a, limit: 1, period: 1}, {name: b, "
                              "limit: 1, period: 1}, {name: c, limit: 1, period: 1}, {name: d, "
                              "limit: 1, period: 1}, {name: e, limit: 1, period: 1}, {name: f, "
                              "limit: 1, period: 1}, {name: g, limit: 1, period: 1}]}\n");
    cr_assert_str_eq(e, "t.yaml:3:5: policy 'a': 2 limits and 7 global ones make 9, more than the 8 "
                        "one request is taken from together");
    /* a single limit may be charged in tokens too */
    sl_config *c = parse_ok("policies:\n  tpm: {limit: 1000, period: 1m, cost: tokens}\n");
    cr_assert_eq(sl_config_policy(c, "tpm", 3)->limits.l[0].unit, SL_UNIT_TOKENS);
    sl_config_free(c);
}

Test(config, a_reload_matches_limits_by_name)
{
    sl_config *old = parse_ok(CHAT);
    sl_config *next = parse_ok("policies:\n"
                               "  chat:\n"
                               "    algorithm: sliding_window\n"
                               "    limits:\n"
                               "      - {name: tpm, limit: 200000, period: 1m, cost: tokens}\n"
                               "      - {name: rps, limit: 10, period: 1s, algorithm: gcra}\n"
                               "      - {name: rpd, limit: 5000, period: 1d}\n"
                               "    tiers:\n"
                               "      paid:\n"
                               "        limits: [{name: rps, limit: 100, period: 1s},\n"
                               "                 {name: tpm, limit: 2000000, period: 1m}]\n");
    char said[2048] = "";
    sl_config_describe_reload(old, next, collect_line, said);
    cr_assert(strstr(said, "policy 'chat' limit 'tpm': sliding_window 100000 per 60s, burst 100000 "
                           "-> sliding_window 200000 per 60s, burst 200000: each key keeps the "
                           "units it has used (rounded up)\n"), "%s", said);
    cr_assert(strstr(said, "policy 'chat' limit 'rpm' removed: no longer checked"), "%s", said);
    cr_assert(strstr(said, "policy 'chat' limit 'rpd' added: every key starts it with a full "
                           "budget\n"), "%s", said);
    cr_assert(strstr(said, "policy 'chat' tier 'paid' limit 'tpm': now charged in requests"), "%s",
              said);
    cr_assert(strstr(said, "policy 'chat': global limit removed\n"), "%s", said);
    cr_assert_null(strstr(said, "'rps'"), "rps is unchanged: %s", said);
    sl_config_free(next);

    next = parse_ok("policies:\n  chat: {limit: 10, period: 1s}\n");
    said[0] = 0;
    sl_config_describe_reload(old, next, collect_line, said);
    cr_assert(strstr(said, "policy 'chat': a list of named limits -> one limit: the store keys "
                           "change, so every key STARTS AGAIN with a full budget\n"), "%s", said);
    sl_config_free(next);
    sl_config_free(old);
}

Test(config, a_plans_file_gives_each_key_its_tier)
{
    char dir[] = "/tmp/sluice-plans-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[128], cfgpath[128];
    snprintf(path, sizeof path, "%s/plans.txt", dir);
    snprintf(cfgpath, sizeof cfgpath, "%s/sluice.yaml", dir);
    FILE *f = fopen(path, "w");
    fputs("# who pays\nalice: paid\nuser:42: gold\n", f);
    fclose(f);
    static const char yaml[] = "policies:\n"
                               "  api:\n"
                               "    limit: 10\n"
                               "    period: 1m\n"
                               "    plans: plans.txt\n"
                               "    tiers:\n"
                               "      paid: {limit: 100, period: 1m}\n"
                               "      gold: {limit: 1000, period: 1m}\n";
    f = fopen(cfgpath, "w");
    fputs(yaml, f);
    fclose(f);
    sl_config *c = NULL;
    cr_assert_eq(sl_config_load(cfgpath, &c, err, sizeof err), 0, "%s", err);
    const sl_policy *p = sl_config_policy(c, "api", 3);
    cr_assert_str_eq(p->plans_path, path, "relative to the config file");
    char keys[SL_POLICY_KEYS_ROOM];
    sl_take_item it[SL_TAKE_MANY_MAX];
    const sl_named_limit *which[SL_TAKE_MANY_MAX];
    size_t nkey;
    cr_assert_eq(sl_policy_items(p, NULL, 0, "alice", 5, 1, 0, keys, sizeof keys, it, which, &nkey), 1);
    cr_assert_eq(it[0].limit->limit, 100);
    cr_assert_eq(sl_policy_items(p, NULL, 0, "user:42", 7, 1, 0, keys, sizeof keys, it, which, &nkey), 1);
    cr_assert_eq(it[0].limit->limit, 1000);
    cr_assert_eq(sl_policy_items(p, NULL, 0, "bob", 3, 1, 0, keys, sizeof keys, it, which, &nkey), 1);
    cr_assert_eq(it[0].limit->limit, 10, "a key the file does not name: the default");
    cr_assert_eq(sl_policy_items(p, "gold", 4, "bob", 3, 1, 0, keys, sizeof keys, it, which, &nkey), -2,
                 "a request does not choose its own plan");
    sl_config_free(c);

    f = fopen(path, "w");
    fputs("alice: platinum\n", f);
    fclose(f);
    cr_assert_eq(sl_config_load(cfgpath, &c, err, sizeof err), -1);
    cr_assert(strstr(err, "sluice.yaml:5:12: policy 'api': plans: ") && strstr(err, "plans.txt:1:") &&
              strstr(err, "platinum"), "%s", err);
    cr_assert_str_eq(parse_err("policies:\n  a: {limit: 1, period: 1, plans: p.txt}\n"),
                     "t.yaml:2:35: policy 'a': plans needs tiers to choose from");
    const char *e = parse_err("policies:\n  a: {limit: 1, period: 1, plans: /nonexistent/p.txt, "
                              "tiers: {x: {limit: 2, period: 1}}}\n");
    cr_assert(strstr(e, "t.yaml:2:35: policy 'a': plans: /nonexistent/p.txt: No such file"), "%s", e);
    remove(path);
    remove(cfgpath);
    rmdir(dir);
}

/* The store key a policy's key template made of a key before templates were
 * parsed: {key} and {policy} replaced, every other byte as it is. The model
 * the parsed templates must agree with, so that states written before are
 * found after an upgrade. */
static size_t old_policy_key(const char *tmpl, const char *policy, const char *key, char *out)
{
    size_t n = 0;
    for (const char *t = tmpl; *t;) {
        if (strncmp(t, "{key}", 5) == 0) {
            memcpy(out + n, key, strlen(key));
            n += strlen(key);
            t += 5;
        } else if (strncmp(t, "{policy}", 8) == 0) {
            memcpy(out + n, policy, strlen(policy));
            n += strlen(policy);
            t += 8;
        } else {
            out[n++] = *t++;
        }
    }
    return n;
}

Test(config, templates_of_key_and_policy_write_the_keys_they_always_wrote)
{
    static const char *const templates[] = {
        "{policy}:{key}", "api:{key}", "{key}", "x{key}y{policy}z", "{key}:{key}",
        "v2/{policy}/{key}/", "a b\\t{key}", "{policy}{key}{policy}", "k=={key}!",
    };
    static const char *const keys[] = {"alice", "user:42", "a b", "{x}", "%41", "\xc3\xa9"};
    for (size_t i = 0; i < sizeof templates / sizeof templates[0]; i++) {
        char yaml[256];
        snprintf(yaml, sizeof yaml, "policies:\n  api:\n    limit: 1\n    period: 1\n    key: '%s'\n",
                 templates[i]);
        sl_config *c = parse_ok(yaml);
        const sl_policy *p = &c->policies[0];
        cr_assert_not(p->keyed_by_request, "%s", templates[i]);
        cr_assert_str_eq(p->key, templates[i], "shown as written");
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            char want[256], got[256];
            size_t wn = old_policy_key(templates[i], "api", keys[k], want);
            long gn = sl_policy_key(p, keys[k], strlen(keys[k]), got, sizeof got);
            cr_assert(gn == (long)wn && memcmp(got, want, wn) == 0, "%s with %s: %.*s", templates[i],
                      keys[k], (int)(gn > 0 ? gn : 0), got);
        }
        sl_config_free(c);
    }
}

Test(config, single_braces_are_refused_with_the_spelling_that_writes_the_old_keys)
{
    cr_assert_str_eq(
        parse_err("policies:\n  api:\n    limit: 1\n    period: 1\n    key: \"{api}:{key}\"\n"),
        "t.yaml:5:10: policy 'api': key: unknown part '{api}' at column 1: use key, policy, "
        "header.NAME, query.NAME, method, path, path/N, ip, ip/N, ip6/M or ip/N,ip6/M; a brace of "
        "the key's text is written twice: \"{{api}}:{key}\" writes the keys this template wrote "
        "before");
    cr_assert(strstr(parse_err("policies:\n  api:\n    limit: 1\n    period: 1\n"
                               "    key: \"{key}}\"\n"),
                     "\"{key}}}\" writes the keys this template wrote before"),
              "%s", err);
    /* "{{key}}" was the key in braces: now it would be the text {key} */
    cr_assert_str_eq(
        parse_err("policies:\n  api:\n    limit: 1\n    period: 1\n    key: \"{{key}}\"\n"),
        "t.yaml:5:10: policy 'api': key writes the text {key}, not the key: {{ and }} write one "
        "brace each; for the key in braces (a Redis Cluster hash tag), as sluice wrote it before, "
        "write \"{{{key}}}\"");
    cr_assert(strstr(parse_err("policies:\n  api:\n    limit: 1\n    period: 1\n"
                               "    key: \"{{policy}}:{key}\"\n"),
                     "write \"{{{policy}}}:{key}\""),
              "%s", err);
    /* a mistake the old reading refused too gets the parser's words alone */
    cr_assert_str_eq(
        parse_err("policies:\n  api:\n    limit: 1\n    period: 1\n    key: \"{ip/33}\"\n"),
        "t.yaml:5:10: policy 'api': key: '{ip/33}' at column 1: an IPv4 prefix ip/N has N from 0 "
        "to 32");
    cr_assert(strstr(parse_err("policies:\n  api:\n    limit: 1\n    period: 1\n"
                               "    key_fallback: \"{policy}:{\"\n"),
                     "policy 'api': key_fallback: the '{' at column 10 is never closed"),
              "%s", err);
    cr_assert(strstr(parse_err("policies:\n  api:\n    limit: 1\n    period: 1\n    key: [a]\n"),
                     "key must be a key template such as"), "%s", err);
    /* doubled braces are one brace: the hash tag of the parser's spelling */
    sl_config *c = parse_ok("policies:\n  api:\n    limit: 1\n    period: 1\n"
                            "    key: \"{{{policy}:{key}}}\"\n");
    char got[64];
    long n = sl_policy_key(&c->policies[0], "bob", 3, got, sizeof got);
    cr_assert(n == 9 && memcmp(got, "{api:bob}", 9) == 0, "%.*s", (int)n, got);
    sl_config_free(c);
}

Test(config, a_template_that_reads_the_request_takes_the_store_key_in_full)
{
    sl_config *c = parse_ok("policies:\n"
                            "  api:\n    limit: 1\n    period: 1\n"
                            "    key: \"{policy}:{header.X-Api-Key}:{method}\"\n"
                            "  ip:\n    limit: 1\n    period: 1\n"
                            "    key: \"u:{header.x-user}\"\n    key_fallback: \"{ip/24}/ip\"\n"
                            "  anon:\n    limit: 1\n    period: 1\n"
                            "    key: \"{policy}:{key}\"\n    key_fallback: \"{policy}:anonymous\"\n"
                            "  plain:\n    limit: 1\n    period: 1\n");
    const sl_policy *api = &c->policies[0], *ip = &c->policies[1], *anon = &c->policies[2],
                    *plain = &c->policies[3];
    cr_assert(api->keyed_by_request && ip->keyed_by_request && anon->keyed_by_request);
    cr_assert_not(plain->keyed_by_request);
    cr_assert_eq(api->ntemplates, 1);
    cr_assert_eq(ip->ntemplates, 2);
    cr_assert_str_eq(ip->key_fallback, "{ip/24}/ip");
    cr_assert_str_eq(api->key, "{policy}:{header.X-Api-Key}:{method}", "as written");
    char out[64];
    long n = sl_policy_key(api, "api:abc:GET", 11, out, sizeof out);
    cr_assert(n == 11 && memcmp(out, "api:abc:GET", 11) == 0);
    /* it must be a key the template writes: its fixed text at both ends, a
     * byte at least for each part that varies */
    cr_assert_eq(sl_policy_key(api, "abc:GET", 7, out, sizeof out), -2);
    cr_assert_eq(sl_policy_key(api, "api:", 4, out, sizeof out), -2);
    cr_assert_eq(sl_policy_key(api, "api:a", 5, out, sizeof out), -2, "two parts vary");
    cr_assert_eq(sl_policy_key(api, "api:ab", 6, out, sizeof out), 6, "the ':' between them "
                                                                        "is not looked for");
    cr_assert_eq(sl_policy_key(api, "api:abc:GET", 11, out, 4), -1);
    cr_assert_eq(sl_policy_key(api, "", 0, out, sizeof out), 0);
    /* either template of a policy with a fallback */
    cr_assert_eq(sl_policy_key(ip, "u:bob", 5, out, sizeof out), 5);
    cr_assert_eq(sl_policy_key(ip, "203.0.113.0/24/ip", 17, out, sizeof out), 17);
    cr_assert_eq(sl_policy_key(ip, "/ip", 3, out, sizeof out), -2);
    cr_assert_eq(sl_policy_key(ip, "x:bob", 5, out, sizeof out), -2);
    /* a fallback without a varying part writes one key */
    cr_assert_eq(sl_policy_key(anon, "anon:anonymous", 14, out, sizeof out), 14);
    cr_assert_eq(sl_policy_key(anon, "anon:alice", 10, out, sizeof out), 10);
    cr_assert_eq(sl_policy_key(anon, "alice", 5, out, sizeof out), -2);

    sl_take_item it[SL_TAKE_MANY_MAX];
    const sl_named_limit *which[SL_TAKE_MANY_MAX];
    size_t nkey = 0;
    char keys[SL_POLICY_KEYS_ROOM];
    cr_assert_eq(sl_policy_items(api, NULL, 0, "bob", 3, 1, 0, keys, sizeof keys, it, which, &nkey),
                 -3);
    cr_assert_eq(sl_policy_items(api, NULL, 0, "api:bob:PUT", 11, 1, 0, keys, sizeof keys, it, which,
                                 &nkey), 1);
    cr_assert(it[0].keylen == 11 && memcmp(it[0].key, "api:bob:PUT", 11) == 0);
    char hint[512];
    sl_policy_key_hint(ip, hint, sizeof hint);
    cr_assert_str_eq(hint, "policy 'ip' keys by the request: name the store key in full, as "
                           "forward-auth writes it: u:<header.x-user> or <ip/24>/ip");
    sl_policy_key_hint(ip, hint, 40);
    cr_assert_eq(strlen(hint), 39, "cut to fit");
    sl_config_free(c);

    /* a fallback may write one key for all; the key's own template may not */
    c = parse_ok("policies:\n  a:\n    limit: 1\n    period: 1\n    key: \"{path}\"\n");
    sl_config_free(c);
    cr_assert(strstr(parse_err("policies:\n  a:\n    limit: 1\n    period: 1\n"
                               "    key: \"{policy}:all\"\n"),
                     "writes one store key for every request"), "%s", err);
}

static void collect(void *arg, const char *line)
{
    strncat((char *)arg, line, 4095 - strlen((char *)arg));
    strncat((char *)arg, "\n", 4095 - strlen((char *)arg));
}

Test(config, a_reload_says_when_the_templates_change_and_only_then)
{
    sl_config *a = parse_ok("policies:\n  api:\n    limit: 1\n    period: 1\n"
                            "    key: \"{header.X-Api-Key}\"\n");
    sl_config *b = parse_ok("policies:\n  api:\n    limit: 1\n    period: 1\n"
                            "    key: \"{header.x-api-key}\"\n");
    sl_config *f = parse_ok("policies:\n  api:\n    limit: 1\n    period: 1\n"
                            "    key: \"{header.x-api-key}\"\n    key_fallback: \"{ip}\"\n");
    sl_config *o = parse_ok("policies:\n  api:\n    limit: 1\n    period: 1\n");
    char said[4096] = "";
    sl_config_describe_reload(a, b, collect, said);
    cr_assert_str_eq(said, "", "the same template in another case of the header's name");
    sl_config_describe_reload(b, f, collect, said);
    cr_assert(strstr(said, "policy 'api': key template '{header.x-api-key}' -> "
                           "'{header.x-api-key}' (fallback '{ip}'): keys are looked up under the "
                           "new template, so every key STARTS AGAIN"), "%s", said);
    said[0] = '\0';
    sl_config_describe_reload(o, b, collect, said);
    cr_assert(strstr(said, "SL.POLICY and /v1/check now name the store key in full"), "%s", said);
    sl_config_free(a);
    sl_config_free(b);
    sl_config_free(f);
    sl_config_free(o);
}
