/*
 * test_duration.c: the one syntax of durations, periods and UTC offsets
 * (src/common/duration.h), at the edges of each rule, and which fault each
 * refusal names.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "common/duration.h"
#include "sluice.h"

#define NS_PER_SEC INT64_C(1000000000)

static sl_duration_status duration(const char *s, int64_t *ns)
{
    return sl_parse_duration(s, strlen(s), ns);
}

static sl_duration_status period(const char *s, int64_t *ns, int64_t *months)
{
    return sl_parse_period(s, strlen(s), ns, months);
}

static sl_duration_status offset(const char *s, int64_t *ns)
{
    return sl_parse_utc_offset(s, strlen(s), ns);
}

Test(duration, units)
{
    static const struct {
        const char *text;
        int64_t ns;
    } ok[] = {
        {"60", 60 * NS_PER_SEC},          {"500ms", 500 * INT64_C(1000000)},
        {"30s", 30 * NS_PER_SEC},         {"5m", 300 * NS_PER_SEC},
        {"2h", 7200 * NS_PER_SEC},        {"1d", 86400 * NS_PER_SEC},
        {"1w", 604800 * NS_PER_SEC},      {"5M", 300 * NS_PER_SEC}, /* ASCII case ignored */
        {"007s", 7 * NS_PER_SEC},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int64_t ns = -1;
        cr_assert_eq(duration(ok[i].text, &ns), SL_DURATION_OK, "%s", ok[i].text);
        cr_assert_eq(ns, ok[i].ns, "%s", ok[i].text);
    }
}

Test(duration, malformed_is_not_out_of_range)
{
    static const char *bad[] = {"", "s", "-", "ms", "10x", "1.5s", "1 s", "s10", "1mo", "1sm"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ns = 42;
        cr_assert_eq(duration(bad[i], &ns), SL_DURATION_MALFORMED, "'%s'", bad[i]);
        cr_assert_eq(ns, 42, "'%s' wrote *ns", bad[i]);
    }
}

Test(duration, range)
{
    int64_t ns;
    static const char *out[] = {"0", "0s", "-5", "-1ms", "99999999999999999999999",
                                "2305843010", "2305843009214ms"};
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
        cr_assert_eq(duration(out[i], &ns), SL_DURATION_OUT_OF_RANGE, "'%s'", out[i]);
    /* The longest of each unit that fits in SL_SPAN_MAX. */
    cr_assert_eq(duration("2305843009", &ns), SL_DURATION_OK);
    cr_assert_eq(ns, INT64_C(2305843009) * NS_PER_SEC);
    cr_assert_eq(duration("2305843009213ms", &ns), SL_DURATION_OK);
    cr_assert(ns <= SL_SPAN_MAX);
}

Test(duration, months_only_in_periods)
{
    int64_t ns, months = -1;
    cr_assert_eq(period("3mo", &ns, &months), SL_DURATION_OK);
    cr_assert_eq(months, 3);
    cr_assert_eq(ns, 3 * SL_MONTH_NS);
    cr_assert_eq(period("1MO", &ns, &months), SL_DURATION_OK);
    cr_assert_eq(months, 1);
    cr_assert_eq(period("90s", &ns, &months), SL_DURATION_OK);
    cr_assert_eq(months, 0);
    cr_assert_eq(ns, 90 * NS_PER_SEC);
    cr_assert_eq(period("876mo", &ns, &months), SL_DURATION_OK); /* SL_MONTHS_MAX */
    cr_assert_eq(period("877mo", &ns, &months), SL_DURATION_OUT_OF_RANGE);
    cr_assert_eq(period("0mo", &ns, &months), SL_DURATION_OUT_OF_RANGE);
    cr_assert_eq(period("mo", &ns, &months), SL_DURATION_MALFORMED);
    cr_assert_eq(period("1mon", &ns, &months), SL_DURATION_MALFORMED);
}

Test(duration, utc_offsets)
{
    static const struct {
        const char *text;
        int64_t s;
    } ok[] = {
        {"Z", 0},          {"z", 0},           {"+05:30", 19800}, {"+0530", 19800},
        {"-05", -18000},   {"-0500", -18000},  {"+00", 0},        {"+18:00", 64800},
        {"-18", -64800},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int64_t ns = 1;
        cr_assert_eq(offset(ok[i].text, &ns), SL_DURATION_OK, "%s", ok[i].text);
        cr_assert_eq(ns, ok[i].s * NS_PER_SEC, "%s", ok[i].text);
    }
    static const char *bad[] = {"", "+", "+5", "05:00", "+05:3", "+05:60", "+0560",
                                "+05:30:00", "+053", "+05-30", "ZZ", "+0530x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ns = 1;
        cr_assert_eq(offset(bad[i], &ns), SL_DURATION_MALFORMED, "'%s'", bad[i]);
        cr_assert_eq(ns, 1, "'%s' wrote *ns", bad[i]);
    }
    int64_t ns;
    cr_assert_eq(offset("+18:01", &ns), SL_DURATION_OUT_OF_RANGE);
    cr_assert_eq(offset("-19", &ns), SL_DURATION_OUT_OF_RANGE);
    cr_assert_eq(offset("+9959", &ns), SL_DURATION_OUT_OF_RANGE);
}

Test(duration, utc_offset_text_is_the_parsers_inverse)
{
    static const char *texts[] = {"+00:00", "+05:30", "-08:00", "+18:00", "-18:00", "+00:45"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        int64_t ns;
        cr_assert_eq(offset(texts[i], &ns), SL_DURATION_OK, "%s", texts[i]);
        char out[8];
        sl_utc_offset_text(ns, out);
        cr_assert_str_eq(out, texts[i]);
    }
    char out[8];
    sl_utc_offset_text(-(30 * 60 + 59) * NS_PER_SEC, out); /* whole minutes, toward zero */
    cr_assert_str_eq(out, "-00:30");
}
