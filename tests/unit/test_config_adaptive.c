/*
 * Adaptive policies in the config file: algorithm: adaptive read into an
 * sl_limiter_config, its defaults, every mistake named with file, line,
 * column and the field, and what a reload says of them.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "policy/config.h"
#include "configlib.h"
#include "testlib.h"

/* The error of a policy "b" with the given settings (one per line, each
 * indented by the caller's four blanks). */
static const char *policy_err(const char *settings)
{
    static char yaml[1024];
    snprintf(yaml, sizeof yaml, "policies:\n  b:\n    algorithm: adaptive\n%s", settings);
    return parse_err(yaml);
}

static void collect_line(void *arg, const char *line)
{
    char *buf = arg;
    strncat(buf, line, 4095 - strlen(buf));
    strncat(buf, "\n", 4095 - strlen(buf));
}

Test(config_adaptive, a_full_example_beside_a_rate_policy)
{
    sl_config *c = parse_ok("policies:\n"
                            "  api: {limit: 100, period: 1m}\n"
                            "  backend:\n"
                            "    algorithm: adaptive\n"
                            "    estimator: anchored\n"
                            "    max_limit: 200\n"
                            "    min_limit: 4\n"
                            "    initial_limit: 20\n"
                            "    ttl: 30s\n"
                            "    backoff: 90%\n"
                            "    smoothing: 50%\n"
                            "    queue: 25%\n"
                            "    short_window: 16\n"
                            "    probe_interval: 30s\n"
                            "    probe_samples: 16\n"
                            "    reserve: {critical: 20%, default: 10%}\n"
                            "    partitions:\n"
                            "      live: 90%\n"
                            "      batch: {share: 10%, lend: false}\n"
                            "    idle: 1s\n");
    cr_assert_eq(c->npolicies, 1, "the adaptive policy is not among the rate policies");
    cr_assert_not_null(sl_config_policy(c, "api", 3));
    cr_assert_null(sl_config_policy(c, "backend", 7));
    cr_assert_eq(c->nadaptive, 1);
    const sl_adaptive_policy *p = sl_config_adaptive(c, "backend", 7);
    cr_assert_not_null(p);
    cr_assert_null(sl_config_adaptive(c, "api", 3));
    const sl_adapt_config *a = &p->cfg.adapt;
    cr_assert_eq(a->kind, SL_ADAPT_ANCHORED);
    cr_assert_eq(a->max_limit, 200);
    cr_assert_eq(a->min_limit, 4);
    cr_assert_eq(a->initial_limit, 20);
    cr_assert_eq(a->backoff_permille, 900);
    cr_assert_eq(a->smoothing_permille, 500);
    cr_assert_eq(a->queue_permille, 250);
    cr_assert_eq(a->short_window, 16);
    cr_assert_eq(a->probe_interval_ns, 30 * NS_PER_SEC);
    cr_assert_eq(a->probe_samples, 16);
    cr_assert_eq(p->cfg.ttl_ns, 30 * NS_PER_SEC);
    const sl_shed_config *s = &p->cfg.shed;
    cr_assert_eq(s->classes, 3);
    cr_assert_eq(s->reserve_permille[SL_PRIO_CRITICAL], 200);
    cr_assert_eq(s->reserve_permille[SL_PRIO_DEFAULT], 100);
    cr_assert_eq(s->reserve_permille[SL_PRIO_SHEDDABLE], 0);
    cr_assert_eq(s->partitions, 2);
    cr_assert_str_eq(p->partition[0], "live");
    cr_assert_str_eq(p->partition[1], "batch");
    cr_assert_eq(s->guarantee_permille[0], 900);
    cr_assert_eq(s->guarantee_permille[1], 100);
    cr_assert(s->lends[0], "lend defaults to true");
    cr_assert_not(s->lends[1]);
    cr_assert_eq(s->idle_ns, NS_PER_SEC);
    cr_assert_eq(sl_adaptive_partition(p, "batch", 5), 1);
    cr_assert_eq(sl_adaptive_partition(p, "live", 4), 0);
    cr_assert_eq(sl_adaptive_partition(p, "liv", 3), -1);
    sl_config_free(c);
}

Test(config_adaptive, each_estimator_reads_its_own_parameters)
{
    sl_config *c = parse_ok("policies:\n"
                            "  a: {algorithm: adaptive, estimator: aimd, backoff: 80%, "
                            "timeout: 500ms}\n"
                            "  v: {algorithm: Adaptive, estimator: VEGAS, smoothing: 12.5%, "
                            "probe_multiplier: 40}\n"
                            "  g: {algorithm: adaptive, estimator: gradient2, tolerance: 150%, "
                            "long_window: 600, queue_size: 0, smoothing: 20%}\n");
    const sl_adapt_config *a = &sl_config_adaptive(c, "a", 1)->cfg.adapt;
    cr_assert_eq(a->kind, SL_ADAPT_AIMD);
    cr_assert_eq(a->backoff_permille, 800);
    cr_assert_eq(a->timeout_ns, 500 * NS_PER_MS);
    const sl_adapt_config *v = &sl_config_adaptive(c, "v", 1)->cfg.adapt;
    cr_assert_eq(v->kind, SL_ADAPT_VEGAS);
    cr_assert_eq(v->smoothing_permille, 125);
    cr_assert_eq(v->probe_multiplier, 40);
    const sl_adapt_config *g = &sl_config_adaptive(c, "g", 1)->cfg.adapt;
    cr_assert_eq(g->kind, SL_ADAPT_GRADIENT2);
    cr_assert_eq(g->tolerance_permille, 1500);
    cr_assert_eq(g->long_window, 600);
    cr_assert_eq(g->queue_size, 0);
    cr_assert_eq(g->smoothing_permille, 200);
    sl_config_free(c);
}

Test(config_adaptive, defaults_are_the_estimators_clamped_to_max_limit)
{
    sl_config *c = parse_ok("policies:\n"
                            "  plain: {algorithm: adaptive}\n"
                            "  small: {algorithm: adaptive, estimator: aimd, limit: 10}\n"
                            "  low: {algorithm: adaptive, max_limit: 3}\n"
                            "  high: {algorithm: adaptive, estimator: gradient2, min_limit: 50}\n");
    const sl_limiter_config *p = &sl_config_adaptive(c, "plain", 5)->cfg;
    sl_adapt_config def;
    sl_adapt_config_default(SL_ADAPT_ANCHORED, &def);
    cr_assert_eq(memcmp(&p->adapt, &def, sizeof def), 0, "the estimator's defaults");
    cr_assert_eq(p->ttl_ns, 30 * NS_PER_SEC);
    cr_assert_eq(p->shed.classes, 3);
    cr_assert_eq(p->shed.reserve_permille[0], 200);
    cr_assert_eq(p->shed.reserve_permille[1], 100);
    cr_assert_eq(p->shed.reserve_permille[2], 0);
    cr_assert_eq(p->shed.partitions, 0);
    cr_assert_eq(p->shed.idle_ns, NS_PER_SEC);

    /* limit: is max_limit; aimd's min and initial (20) are clamped to 10. */
    const sl_adapt_config *s = &sl_config_adaptive(c, "small", 5)->cfg.adapt;
    cr_assert_eq(s->max_limit, 10);
    cr_assert_eq(s->min_limit, 10);
    cr_assert_eq(s->initial_limit, 10);
    cr_assert_eq(s->backoff_permille, 900);
    const sl_adapt_config *l = &sl_config_adaptive(c, "low", 3)->cfg.adapt;
    cr_assert_eq(l->min_limit, 3);
    cr_assert_eq(l->initial_limit, 3);
    /* A min above the default initial limit raises it. */
    const sl_adapt_config *h = &sl_config_adaptive(c, "high", 4)->cfg.adapt;
    cr_assert_eq(h->min_limit, 50);
    cr_assert_eq(h->initial_limit, 50);
    cr_assert_eq(h->max_limit, 200);
    sl_config_free(c);

    sl_limiter_config d;
    sl_adaptive_defaults(&d, SL_ADAPT_VEGAS, 5, 7 * NS_PER_SEC);
    cr_assert_eq(d.adapt.kind, SL_ADAPT_VEGAS);
    cr_assert_eq(d.adapt.max_limit, 5);
    cr_assert_eq(d.adapt.min_limit, 1);
    cr_assert_eq(d.adapt.initial_limit, 5);
    cr_assert_eq(d.adapt.probe_multiplier, 30);
    cr_assert_eq(d.ttl_ns, 7 * NS_PER_SEC);
    cr_assert_eq(d.shed.classes, 3);
    cr_assert_eq(d.shed.idle_ns, NS_PER_SEC);
    sl_adapt scratch;
    cr_assert_eq(sl_adapt_init(&scratch, &d.adapt), SL_OK);
    cr_assert_eq(sl_shed_config_check(&d.shed), SL_OK);
}

Test(config_adaptive, priorities_by_name_or_digit)
{
    cr_assert_eq(sl_priority_parse("critical", 8), 0);
    cr_assert_eq(sl_priority_parse("DEFAULT", 7), 1);
    cr_assert_eq(sl_priority_parse("Sheddable", 9), 2);
    cr_assert_eq(sl_priority_parse("0", 1), 0);
    cr_assert_eq(sl_priority_parse("2", 1), 2);
    cr_assert_eq(sl_priority_parse("3", 1), -1);
    cr_assert_eq(sl_priority_parse("crit", 4), -1);
    cr_assert_eq(sl_priority_parse("", 0), -1);
    cr_assert_eq(sl_priority_parse("criticalx", 8), 0, "len bytes only");
}

Test(config_adaptive, percentages_take_one_decimal_and_their_range)
{
    sl_config *c = parse_ok("policies:\n"
                            "  b: {algorithm: adaptive, smoothing: 12.5%, queue: 1000%, "
                            "backoff: 99.9%}\n");
    const sl_adapt_config *a = &sl_config_adaptive(c, "b", 1)->cfg.adapt;
    cr_assert_eq(a->smoothing_permille, 125);
    cr_assert_eq(a->queue_permille, 10000);
    cr_assert_eq(a->backoff_permille, 999);
    sl_config_free(c);

    cr_assert_str_eq(policy_err("    smoothing: 12.55%\n"),
                     "t.yaml:4:16: policy 'b': smoothing must be a percentage with at most one "
                     "decimal, from 0.1% to 100% (got '12.55%')");
    cr_assert_str_eq(policy_err("    smoothing: 101%\n"),
                     "t.yaml:4:16: policy 'b': smoothing must be a percentage with at most one "
                     "decimal, from 0.1% to 100% (got '101%')");
    cr_assert_str_eq(policy_err("    backoff: 100%\n"),
                     "t.yaml:4:14: policy 'b': backoff must be a percentage with at most one "
                     "decimal, from 50% to 99.9% (got '100%')");
    cr_assert_str_eq(policy_err("    backoff: 0.9\n"),
                     "t.yaml:4:14: policy 'b': backoff must be a percentage with at most one "
                     "decimal, from 50% to 99.9% (got '0.9')");
    cr_assert(strstr(policy_err("    queue: 12.%\n"), "queue must be a percentage"), "%s", err);
    cr_assert(strstr(policy_err("    queue: .5%\n"), "queue must be a percentage"), "%s", err);
    cr_assert(strstr(policy_err("    queue: -5%\n"), "queue must be a percentage"), "%s", err);
    cr_assert(strstr(policy_err("    queue: 5 %\n"), "queue must be a percentage"), "%s", err);
    /* Past 100% where the ratio may be: tolerance from 100%. */
    cr_assert(strstr(policy_err("    estimator: gradient2\n    tolerance: 99.9%\n"),
                     "tolerance must be a percentage with at most one decimal, from 100% to "
                     "10000%"),
              "%s", err);
    cr_assert(strstr(policy_err("    queue: 1000.1%\n"), "from 0.1% to 1000%"), "%s", err);
}

Test(config_adaptive, limits_are_checked_against_each_other)
{
    cr_assert_str_eq(policy_err("    max_limit: 200\n    min_limit: 300\n"),
                     "t.yaml:5:16: policy 'b': min_limit 300 is above max_limit 200");
    cr_assert_str_eq(policy_err("    min_limit: 2000\n"),
                     "t.yaml:4:16: policy 'b': min_limit 2000 is above max_limit 1000 (the "
                     "estimator's default)");
    cr_assert_str_eq(policy_err("    limit: 10\n    initial_limit: 11\n"),
                     "t.yaml:5:20: policy 'b': initial_limit 11 is above max_limit 10");
    cr_assert_str_eq(policy_err("    min_limit: 8\n    initial_limit: 5\n"),
                     "t.yaml:5:20: policy 'b': initial_limit 5 is below min_limit 8");
    cr_assert_str_eq(policy_err("    max_limit: 0\n"),
                     "t.yaml:4:16: policy 'b': max_limit must be an integer from 1 to 16777216 "
                     "(got '0')");
    cr_assert_str_eq(policy_err("    max_limit: 16777217\n"),
                     "t.yaml:4:16: policy 'b': max_limit must be an integer from 1 to 16777216 "
                     "(got '16777217')");
    cr_assert_str_eq(policy_err("    limit: 10\n    max_limit: 10\n"),
                     "t.yaml:4:12: policy 'b': limit is another spelling of max_limit: give one "
                     "of them");
    cr_assert(strstr(policy_err("    min_limit: many\n"), "min_limit must be an integer"), "%s",
              err);
}

Test(config_adaptive, a_parameter_of_another_estimator_names_those_that_read_it)
{
    cr_assert_str_eq(policy_err("    timeout: 5s\n"),
                     "t.yaml:4:5: policy 'b': timeout is read only by aimd, not by anchored (the "
                     "estimator)");
    cr_assert_str_eq(policy_err("    estimator: vegas\n    backoff: 90%\n"),
                     "t.yaml:5:5: policy 'b': backoff is read only by aimd and anchored, not by "
                     "vegas (the estimator)");
    cr_assert_str_eq(policy_err("    estimator: aimd\n    smoothing: 50%\n"),
                     "t.yaml:5:5: policy 'b': smoothing is read only by vegas, gradient2 and "
                     "anchored, not by aimd (the estimator)");
    /* The estimator written after the parameter decides the same. */
    cr_assert(strstr(policy_err("    queue: 25%\n    estimator: gradient2\n"),
                     "queue is read only by anchored, not by gradient2"),
              "%s", err);
    cr_assert(strstr(policy_err("    probe_multiplier: 3\n"), "read only by vegas"), "%s", err);
    cr_assert(strstr(policy_err("    tolerance: 150%\n"), "read only by gradient2"), "%s", err);
    cr_assert(strstr(policy_err("    long_window: 600\n"), "read only by gradient2"), "%s", err);
    cr_assert(strstr(policy_err("    queue_size: 4\n"), "read only by gradient2"), "%s", err);
    cr_assert(strstr(policy_err("    estimator: aimd\n    short_window: 4\n"),
                     "read only by anchored"),
              "%s", err);
    cr_assert(strstr(policy_err("    estimator: aimd\n    probe_interval: 4s\n"),
                     "read only by anchored"),
              "%s", err);
    cr_assert(strstr(policy_err("    estimator: aimd\n    probe_samples: 4\n"),
                     "read only by anchored"),
              "%s", err);
    cr_assert_str_eq(policy_err("    estimator: bbr\n"),
                     "t.yaml:4:16: policy 'b': unknown estimator 'bbr' (use aimd, vegas, "
                     "gradient2 or anchored)");
}

Test(config_adaptive, parameters_out_of_range_name_the_range)
{
    cr_assert(strstr(policy_err("    short_window: 0\n"),
                     "short_window must be an integer from 1 to 1000000 (got '0')"),
              "%s", err);
    cr_assert(strstr(policy_err("    estimator: gradient2\n    long_window: 9\n"),
                     "long_window must be an integer from 10 to 1000000 (got '9')"),
              "%s", err);
    cr_assert(strstr(policy_err("    estimator: vegas\n    probe_multiplier: 0\n"),
                     "probe_multiplier must be an integer from 1 to"),
              "%s", err);
    cr_assert(strstr(policy_err("    probe_samples: 1000001\n"),
                     "probe_samples must be an integer from 1 to 1000000"),
              "%s", err);
    cr_assert_str_eq(policy_err("    estimator: aimd\n    timeout: 0s\n"),
                     "t.yaml:5:14: policy 'b': timeout must be a positive duration: seconds, or "
                     "a number with ms, s, m, h, d or w (got '0s')");
    cr_assert(strstr(policy_err("    probe_interval: soon\n"),
                     "probe_interval must be a positive duration"),
              "%s", err);
    cr_assert_str_eq(policy_err("    ttl: 0\n"),
                     "t.yaml:4:10: policy 'b': ttl must be a positive duration: seconds, or a "
                     "number with ms, s, m, h, d or w (got '0')");
    cr_assert(strstr(policy_err("    ttl: 1mo\n"), "ttl must be a positive duration"), "%s", err);
    cr_assert_str_eq(policy_err("    idle: -1s\n"),
                     "t.yaml:4:11: policy 'b': idle must be a duration: seconds, or a number "
                     "with ms, s, m, h, d or w (0: never) (got '-1s')");

    sl_config *c = parse_ok("policies:\n  b: {algorithm: adaptive, idle: 0, ttl: 2m}\n"
                            "  c: {algorithm: adaptive, idle: 0ms}\n");
    cr_assert_eq(sl_config_adaptive(c, "b", 1)->cfg.shed.idle_ns, 0, "0: never lends");
    cr_assert_eq(sl_config_adaptive(c, "b", 1)->cfg.ttl_ns, 120 * NS_PER_SEC);
    cr_assert_eq(sl_config_adaptive(c, "c", 1)->cfg.shed.idle_ns, 0);
    sl_config_free(c);
}

Test(config_adaptive, reserves_by_priority_add_up_to_at_most_all)
{
    sl_config *c = parse_ok("policies:\n"
                            "  b: {algorithm: adaptive, reserve: {CRITICAL: 50%, 2: 5%}}\n");
    const sl_shed_config *s = &sl_config_adaptive(c, "b", 1)->cfg.shed;
    cr_assert_eq(s->reserve_permille[0], 500);
    cr_assert_eq(s->reserve_permille[1], 100, "a class not named keeps its default");
    cr_assert_eq(s->reserve_permille[2], 50);
    sl_config_free(c);

    cr_assert_str_eq(policy_err("    reserve: {critical: 95%}\n"),
                     "t.yaml:4:14: policy 'b': reserve: the reserves add up to 105% (critical "
                     "95%, default 10%, sheddable 0%), more than 100%");
    cr_assert_str_eq(policy_err("    reserve: {urgent: 5%}\n"),
                     "t.yaml:4:15: policy 'b': reserve: unknown priority 'urgent' (use critical, "
                     "default or sheddable)");
    cr_assert_str_eq(policy_err("    reserve: {critical: 5%, 0: 5%}\n"),
                     "t.yaml:4:29: policy 'b': reserve: priority '0' is given twice");
    cr_assert_str_eq(policy_err("    reserve: {default: 101%}\n"),
                     "t.yaml:4:24: policy 'b': reserve 'default' must be a percentage with at "
                     "most one decimal, from 0% to 100% (got '101%')");
    cr_assert(strstr(policy_err("    reserve: 20%\n"), "reserve must be a mapping of priorities"),
              "%s", err);
}

Test(config_adaptive, partitions_share_at_most_all_in_the_order_written)
{
    sl_config *c = parse_ok("policies:\n"
                            "  b:\n"
                            "    algorithm: adaptive\n"
                            "    partitions: {z: 10%, a: {share: 0%}, m-1: {lend: no, share: "
                            "12.5%}}\n");
    const sl_adaptive_policy *p = sl_config_adaptive(c, "b", 1);
    cr_assert_eq(p->cfg.shed.partitions, 3);
    cr_assert_str_eq(p->partition[0], "z");
    cr_assert_str_eq(p->partition[1], "a");
    cr_assert_str_eq(p->partition[2], "m-1");
    cr_assert_eq(p->cfg.shed.guarantee_permille[2], 125);
    cr_assert(p->cfg.shed.lends[1]);
    cr_assert_not(p->cfg.shed.lends[2]);
    cr_assert_eq(sl_adaptive_partition(p, "m-1", 3), 2);
    sl_config_free(c);

    cr_assert_str_eq(policy_err("    partitions: {live: 90%, batch: 20%}\n"),
                     "t.yaml:4:17: policy 'b': the partitions' shares add up to 110%, more than "
                     "100%");
    cr_assert_str_eq(policy_err("    partitions: {live: 101%}\n"),
                     "t.yaml:4:24: policy 'b' partition 'live': share must be a percentage with "
                     "at most one decimal, from 0% to 100% (got '101%')");
    cr_assert_str_eq(policy_err("    partitions: {batch: {lend: false}}\n"),
                     "t.yaml:4:25: policy 'b' partition 'batch': share is required (a "
                     "percentage of the limit)");
    cr_assert_str_eq(policy_err("    partitions: {batch: {share: 1%, weight: 2}}\n"),
                     "t.yaml:4:37: policy 'b' partition 'batch': unknown setting 'weight' (share, "
                     "lend)");
    cr_assert(strstr(policy_err("    partitions: {batch: {share: 1%, lend: maybe}}\n"),
                     "partition 'batch': lend must be true or false"),
              "%s", err);
    cr_assert(strstr(policy_err("    partitions: {a b: 1%}\n"),
                     "a partition's name must be 1 to 32 letters"),
              "%s", err);
    cr_assert_str_eq(policy_err("    partitions: {a: 1%, b: 1%, c: 1%, d: 1%, e: 1%, f: 1%, g: "
                                "1%, h: 1%, i: 1%}\n"),
                     "t.yaml:4:17: policy 'b': at most 8 partitions (got 9)");
    cr_assert(strstr(policy_err("    partitions: [live]\n"), "partitions must be a mapping"),
              "%s", err);
}

Test(config_adaptive, rate_settings_are_refused_on_an_adaptive_policy)
{
    static const char *const rate[] = {
        "tiers: {free: {limit: 1, period: 1}}", "global: {limit: 1, period: 1}", "plans: p.txt",
        "key: \"x:{key}\"", "key_fallback: \"{ip}\"", "shadow: true", "on_store_error: local",
        "store_timeout_ms: 20", "limits: []", "period: 1m", "burst: 5", "cost: tokens"};
    for (size_t i = 0; i < sizeof rate / sizeof rate[0]; i++) {
        char settings[128], want[160];
        snprintf(settings, sizeof settings, "    %s\n", rate[i]);
        size_t n = strcspn(rate[i], ":");
        snprintf(want, sizeof want,
                 "t.yaml:4:5: policy 'b': '%.*s' is a rate policy's setting: an adaptive policy "
                 "limits the requests in flight, acquired and released, and has none",
                 (int)n, rate[i]);
        cr_assert_str_eq(policy_err(settings), want);
    }
    cr_assert_str_eq(policy_err("    colour: red\n"),
                     "t.yaml:4:5: policy 'b': unknown setting 'colour'");
    /* adaptive is a policy's algorithm, not a limit's. */
    cr_assert_str_eq(parse_err("policies:\n  api:\n    limit: 5\n    period: 1m\n"
                               "    tiers: {x: {limit: 1, period: 1, algorithm: adaptive}}\n"),
                     "t.yaml:5:49: policy 'api' tier 'x': adaptive is a whole policy's algorithm "
                     "(algorithm: adaptive beside its settings), not a limit's");
}

Test(config_adaptive, a_name_is_one_policy_of_either_kind)
{
    cr_assert_str_eq(parse_err("policies:\n"
                               "  backend: {limit: 5, period: 1m}\n"
                               "  backend: {algorithm: adaptive}\n"),
                     "t.yaml:3:3: 'backend' is given twice in one mapping (first on line 2)");
    /* The whole file is refused: the good policy before the bad one too. */
    cr_assert(strstr(parse_err("policies:\n"
                               "  api: {limit: 5, period: 1m}\n"
                               "  ok: {algorithm: adaptive}\n"
                               "  bad: {algorithm: adaptive, max_limit: -1}\n"),
                     "t.yaml:4:41: policy 'bad': max_limit must be an integer"),
              "%s", err);
}

Test(config_adaptive, a_reload_says_what_changed_for_adaptive_policies)
{
    sl_config *old = parse_ok("policies:\n"
                              "  same: {algorithm: adaptive}\n"
                              "  moved: {algorithm: adaptive, max_limit: 200, backoff: 90%,\n"
                              "          partitions: {live: 90%, batch: 10%}}\n"
                              "  gone: {algorithm: adaptive}\n"
                              "  swap: {algorithm: adaptive, estimator: aimd}\n");
    sl_config *next = parse_ok("policies:\n"
                               "  same: {algorithm: adaptive}\n"
                               "  moved: {algorithm: adaptive, max_limit: 100, backoff: 80%,\n"
                               "          ttl: 10s, reserve: {critical: 30%},\n"
                               "          partitions: {live: 90%, batch: {share: 10%, lend: "
                               "no}}, idle: 0}\n"
                               "  swap: {algorithm: adaptive, estimator: vegas}\n"
                               "  fresh: {algorithm: adaptive, max_limit: 50}\n");
    char said[4096] = "";
    sl_config_describe_reload(old, next, collect_line, said);
    cr_assert(strstr(said, "policy 'moved': adaptive limit changed (max_limit 200 -> 100, "
                           "backoff 90% -> 80%, ttl 30s -> 10s, reserve critical 20% -> 30%, "
                           "partitions live 90%, batch 10% -> live 90%, batch 10% (not lent), "
                           "idle 1s -> 0): each key keeps its estimate, clamped to [min, max], "
                           "and its leases\n"),
              "%s", said);
    cr_assert(strstr(said, "policy 'swap': adaptive limit changed (estimator aimd -> vegas, "
                           "min_limit 20 -> 1, max_limit 200 -> 1000): each key keeps"),
              "%s", said);
    cr_assert(strstr(said, "policy 'gone' removed: adaptive limit (anchored): requests naming it "
                           "are refused\n"),
              "%s", said);
    cr_assert(strstr(said, "policy 'fresh' added: adaptive limit (anchored, 4 to 50, ttl 30s): "
                           "each key starts at 20\n"),
              "%s", said);
    cr_assert_null(strstr(said, "'same'"), "%s", said);

    /* Nothing said for an unchanged file. */
    said[0] = '\0';
    sl_config_describe_reload(next, next, collect_line, said);
    cr_assert_str_eq(said, "");
    sl_config_free(next);
    sl_config_free(old);

    /* A rate policy that becomes adaptive: the one removed, the other added. */
    old = parse_ok("policies:\n  x: {limit: 5, period: 1m}\n");
    next = parse_ok("policies:\n  x: {algorithm: adaptive}\n");
    said[0] = '\0';
    sl_config_describe_reload(old, next, collect_line, said);
    cr_assert(strstr(said, "policy 'x' removed: its keys' states stay"), "%s", said);
    cr_assert(strstr(said, "policy 'x' added: adaptive limit"), "%s", said);
    sl_config_free(next);
    sl_config_free(old);
}
