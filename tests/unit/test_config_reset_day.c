/*
 * reset_day in the config file: a policy's windows of months that begin on
 * a day of the month (sl_limit_align_day), inherited as utc_offset is,
 * refused with the limit's name and the range where it means nothing, kept
 * when sluiced moves the limits to its clock, and a change of it said
 * loudly on reload.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "algo/calendar.h"
#include "policy/config.h"
#include "configlib.h"
#include "testlib.h"

#define NS_PER_DAY (86400 * NS_PER_SEC)

static int64_t utc(int64_t y, int m, int d)
{
    return sl_days_from_civil(y, m, d) * NS_PER_DAY;
}

static const char *const BILLING = "policies:\n"
                                   "  bill:\n"
                                   "    algorithm: fixed_window\n"
                                   "    limit: 1000\n"
                                   "    period: 1mo\n"
                                   "    reset_day: 15\n"
                                   "    utc_offset: -05:00\n"
                                   "    tiers:\n"
                                   "      paid: {limit: 100000, period: 1mo}\n"
                                   "      daily: {limit: 50, period: 1d}\n"
                                   "      first: {limit: 10, period: 1mo, reset_day: 1}\n";

Test(config_reset_day, a_policy_resets_on_its_day_and_its_tiers_inherit_it)
{
    sl_config *c = parse_ok(BILLING);
    const sl_policy *p = sl_config_policy(c, "bill", 4);
    const sl_limit *l = &p->limits.l[0].limit;
    cr_assert_eq(l->months, 1);
    cr_assert_eq(l->reset_day, 15);
    int64_t s, e, five = 5 * 3600 * NS_PER_SEC;
    sl_window_at(l, utc(2024, 3, 10), &s, &e);
    cr_assert(s == utc(2024, 2, 15) + five && e == utc(2024, 3, 15) + five);
    /* A tier of months inherits the day, a tier of days has none, and a
     * tier may give its own. */
    cr_assert_eq(sl_policy_limits(p, "paid", 4)->l[0].limit.reset_day, 15);
    cr_assert_eq(sl_policy_limits(p, "daily", 5)->l[0].limit.reset_day, 0);
    cr_assert_eq(sl_policy_limits(p, "first", 5)->l[0].limit.reset_day, 0);
    /* sluiced's clock (Unix time - 1 000 s here): the same windows. */
    sl_config_align(c, 1000 * NS_PER_SEC);
    cr_assert_eq(l->reset_day, 15);
    sl_window_at(l, utc(2024, 3, 10) - 1000 * NS_PER_SEC, &s, &e);
    cr_assert_eq(s + 1000 * NS_PER_SEC, utc(2024, 2, 15) + five);
    sl_config_free(c);
}

Test(config_reset_day, named_limits_take_it_in_each_or_beside_them)
{
    sl_config *c = parse_ok("policies:\n"
                            "  api:\n"
                            "    algorithm: sliding_window\n"
                            "    reset_day: 31\n"
                            "    limits:\n"
                            "      - {name: monthly, limit: 1000, period: 1mo}\n"
                            "      - {name: quarterly, limit: 2500, period: 3mo, reset_day: 10}\n"
                            "      - {name: rps, limit: 10, period: 1s, algorithm: gcra}\n"
                            "    tiers:\n"
                            "      paid:\n"
                            "        limits: [{name: monthly, limit: 5000, period: 1mo},\n"
                            "                 {name: quarterly, limit: 9000, period: 3mo}]\n");
    const sl_policy *p = sl_config_policy(c, "api", 3);
    cr_assert_eq(p->limits.l[0].limit.reset_day, 31);
    cr_assert_eq(p->limits.l[1].limit.reset_day, 10);
    cr_assert_eq(p->limits.l[2].limit.reset_day, 0); /* a rate: nothing to reset */
    const sl_limit_set *paid = sl_policy_limits(p, "paid", 4);
    cr_assert_eq(paid->l[0].limit.reset_day, 31);
    cr_assert_eq(paid->l[1].limit.reset_day, 10, "the policy's limit of the same name");
    int64_t s, e;
    sl_window_at(&p->limits.l[0].limit, utc(2023, 3, 5), &s, &e);
    cr_assert(s == utc(2023, 2, 28) && e == utc(2023, 3, 31));
    sl_config_free(c);
}

Test(config_reset_day, refused_where_it_means_nothing_naming_the_limit)
{
    cr_assert_str_eq(parse_err("policies:\n  bill:\n    algorithm: fixed_window\n"
                               "    limit: 5\n    period: 1mo\n    reset_day: 32\n"),
                     "t.yaml:6:16: policy 'bill': reset_day must be a day of the month, 1 to 31 "
                     "(29 to 31: a shorter month's last day) (got '32')");
    cr_assert_str_eq(parse_err("policies:\n  bill: {algorithm: fixed_window, limit: 5, "
                               "period: 1mo, reset_day: 0}\n"),
                     "t.yaml:2:69: policy 'bill': reset_day must be a day of the month, 1 to 31 "
                     "(29 to 31: a shorter month's last day) (got '0')");
    cr_assert_str_eq(parse_err("policies:\n  bill: {algorithm: fixed_window, limit: 5, "
                               "period: 1mo, reset_day: mid}\n"),
                     "t.yaml:2:69: policy 'bill': reset_day must be a day of the month, 1 to 31 "
                     "(29 to 31: a shorter month's last day) (got 'mid')");
    cr_assert_str_eq(parse_err("policies:\n  bill: {algorithm: fixed_window, limit: 5, "
                               "period: 30d, reset_day: 15}\n"),
                     "t.yaml:2:69: policy 'bill': reset_day is the day of the month windows of "
                     "months begin on (1 to 31): give a period of months such as 1mo, or leave "
                     "reset_day out");
    cr_assert_str_eq(parse_err("policies:\n  bill: {limit: 5, period: 1mo, reset_day: 15}\n"),
                     "t.yaml:2:44: policy 'bill': reset_day needs fixed_window or "
                     "sliding_window: gcra meters a rate and has no windows to reset");
    cr_assert_str_eq(parse_err("policies:\n  api:\n    algorithm: fixed_window\n    limits:\n"
                               "      - {name: daily, limit: 5, period: 1d, reset_day: 2}\n"),
                     "t.yaml:5:56: policy 'api' limit 'daily': reset_day is the day of the month "
                     "windows of months begin on (1 to 31): give a period of months such as 1mo, "
                     "or leave reset_day out");
    cr_assert_str_eq(parse_err("policies:\n  api:\n    algorithm: fixed_window\n"
                               "    limit: 5\n    period: 1mo\n"
                               "    tiers: {paid: {limit: 9, period: 1w, reset_day: 3}}\n"),
                     "t.yaml:6:53: policy 'api' tier 'paid': reset_day is the day of the month "
                     "windows of months begin on (1 to 31): give a period of months such as 1mo, "
                     "or leave reset_day out");
    cr_assert_str_eq(parse_err("policies:\n  api:\n    reset_day: 40\n    limits:\n"
                               "      - {name: m, limit: 5, period: 1mo}\n"),
                     "t.yaml:3:16: policy 'api': reset_day must be a day of the month, 1 to 31 "
                     "(29 to 31: a shorter month's last day) (got '40')");
}

static void collect_line(void *arg, const char *line)
{
    char *buf = arg;
    strncat(buf, line, 2047 - strlen(buf));
    strncat(buf, "\n", 2047 - strlen(buf));
}

/* text with its first `from` replaced by `to`; free() it. */
static char *replaced(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    cr_assert_not_null(at, "%s", from);
    size_t head = (size_t)(at - text), n = strlen(text) - strlen(from) + strlen(to);
    char *out = malloc(n + 1);
    memcpy(out, text, head);
    strcpy(out + head, to);
    strcat(out, at + strlen(from));
    return out;
}

/* What a reload from BILLING to `text` logs, into said (2048 bytes). */
static void reload_says(const char *text, char *said)
{
    sl_config *old = parse_ok(BILLING), *next = parse_ok(text);
    said[0] = 0;
    sl_config_describe_reload(old, next, collect_line, said);
    sl_config_free(next);
    sl_config_free(old);
}

Test(config_reset_day, a_reload_that_moves_the_day_says_so_loudly)
{
    char said[2048];
    char *text = replaced(BILLING, "reset_day: 15", "reset_day: 20");
    reload_says(text, said);
    free(text);
    cr_assert(strstr(said, "policy 'bill': fixed_window 1000 per 1mo, burst 1000, reset_day 15, "
                           "utc_offset -05:00 -> fixed_window 1000 per 1mo, burst 1000, "
                           "reset_day 20, utc_offset -05:00: every other key keeps the units it "
                           "has used (rounded up)\n"), "%s", said);
    cr_assert(strstr(said, "policy 'bill': reset_day 15 -> 20: windows of months now begin on "
                           "day 20; a key keeps its count only until the first new reset day "
                           "after its window began, so a key whose window began before the "
                           "latest one STARTS AGAIN with a full budget now\n"), "%s", said);
    /* the tier that inherits it moves too; the one with its own does not */
    cr_assert(strstr(said, "policy 'bill' tier 'paid': reset_day 15 -> 20:"), "%s", said);
    cr_assert_null(strstr(said, "tier 'first'"), "%s", said);
    cr_assert_null(strstr(said, "tier 'daily'"), "%s", said);

    /* back to the first */
    text = replaced(BILLING, "reset_day: 15", "reset_day: 1");
    reload_says(text, said);
    free(text);
    cr_assert(strstr(said, "policy 'bill': reset_day 15 -> 1: windows of months now begin on "
                           "day 1;"), "%s", said);

    /* months to days: the limit's change says it all, no windows of months
     * are left to move; the tier of months that inherited the day loses it */
    text = replaced(BILLING, "    period: 1mo\n    reset_day: 15\n", "    period: 1d\n");
    reload_says(text, said);
    free(text);
    cr_assert(strstr(said, "policy 'bill': fixed_window 1000 per 1mo, burst 1000, reset_day 15, "
                           "utc_offset -05:00 -> fixed_window 1000 per 86400s, burst 1000, "
                           "utc_offset -05:00"), "%s", said);
    cr_assert_null(strstr(said, "policy 'bill': reset_day"), "%s", said);
    cr_assert(strstr(said, "policy 'bill' tier 'paid': reset_day 15 -> 1:"), "%s", said);

    /* a sliding window's count weighs one window more before it is gone */
    text = replaced(BILLING, "    algorithm: fixed_window\n", "    algorithm: sliding_window\n");
    char *moved = replaced(text, "reset_day: 15", "reset_day: 3");
    sl_config *old = parse_ok(text), *next = parse_ok(moved);
    said[0] = 0;
    sl_config_describe_reload(old, next, collect_line, said);
    cr_assert(strstr(said, "policy 'bill': reset_day 15 -> 3: windows of months now begin on day "
                           "3; a key's count is its current window's only until the first new "
                           "reset day after that window began, and its previous window's until "
                           "the next one: a key whose window began before the latest new reset "
                           "day has it weigh as the previous window's, and one whose window "
                           "began before the reset day before that STARTS AGAIN with a full "
                           "budget now\n"), "%s", said);
    sl_config_free(next);
    sl_config_free(old);
    free(moved);
    free(text);

    /* the same day: nothing to say */
    reload_says(BILLING, said);
    cr_assert_str_eq(said, "");
}

Test(config_reset_day, a_reload_that_moves_the_offset_says_so_loudly)
{
    char said[2048];
    char *text = replaced(BILLING, "-05:00", "+01:00");
    reload_says(text, said);
    free(text);
    cr_assert(strstr(said, "policy 'bill': windows at UTC-05:00 of months -> UTC+01:00 of months: "
                           "a key keeps its count only until the first new window boundary after "
                           "its window began, so a key whose window began before the latest one "
                           "STARTS AGAIN with a full budget now\n"), "%s", said);
    cr_assert(strstr(said, "every other key keeps the units it has used"), "%s", said);
}
