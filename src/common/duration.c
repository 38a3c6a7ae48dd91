/*
 * duration.c: "60", "500ms", "30s", "5m", "2h", "1d", "1w" and "1mo" into
 * nanoseconds, with overflow checked before the multiplication; and UTC
 * offsets.
 */
#include "common/duration.h"

#include <stdio.h>
#include <strings.h>

#include "sluice.h"

/* What both period syntaxes share; months_ok lets "mo" through. */
static sl_duration_status sl_parse_units(const char *s, size_t len, int64_t *ns, int64_t *months,
                                         bool months_ok)
{
    static const struct {
        const char *unit;
        size_t len;
        int64_t ns;
    } units[] = {{"ms", 2, INT64_C(1000000)},          {"s", 1, INT64_C(1000000000)},
                 {"m", 1, INT64_C(60000000000)},       {"h", 1, INT64_C(3600000000000)},
                 {"d", 1, INT64_C(86400000000000)},    {"w", 1, INT64_C(604800000000000)},
                 {"mo", 2, SL_MONTH_NS},               {"", 0, INT64_C(1000000000)}};
    size_t i = 0;
    bool neg = len > 0 && s[0] == '-';
    i = neg;
    uint64_t v = 0;
    size_t digits_start = i;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        if (v > (UINT64_MAX - 9) / 10)
            return SL_DURATION_OUT_OF_RANGE; /* far too large; scan no further */
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (i == digits_start)
        return SL_DURATION_MALFORMED;
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        if (len - i != units[u].len || strncasecmp(s + i, units[u].unit, units[u].len) != 0)
            continue;
        bool month = units[u].ns == SL_MONTH_NS;
        if (month && !months_ok)
            return SL_DURATION_MALFORMED;
        if (neg || v == 0 || v > (uint64_t)SL_SPAN_MAX / (uint64_t)units[u].ns)
            return SL_DURATION_OUT_OF_RANGE;
        *ns = (int64_t)v * units[u].ns;
        if (months)
            *months = month ? (int64_t)v : 0;
        return SL_DURATION_OK;
    }
    return SL_DURATION_MALFORMED;
}

sl_duration_status sl_parse_duration(const char *s, size_t len, int64_t *ns)
{
    return sl_parse_units(s, len, ns, NULL, false);
}

sl_duration_status sl_parse_period(const char *s, size_t len, int64_t *ns, int64_t *months)
{
    return sl_parse_units(s, len, ns, months, true);
}

sl_duration_status sl_parse_utc_offset(const char *s, size_t len, int64_t *ns)
{
    if (len == 1 && (s[0] == 'Z' || s[0] == 'z')) {
        *ns = 0;
        return SL_DURATION_OK;
    }
    if (len < 3 || (s[0] != '+' && s[0] != '-'))
        return SL_DURATION_MALFORMED;
    int digits[4], n = 0;
    for (size_t i = 1; i < len; i++) {
        if (i == 3 && s[i] == ':' && len == 6)
            continue; /* "+05:30", the colon only between hours and minutes */
        if (s[i] < '0' || s[i] > '9' || n == 4)
            return SL_DURATION_MALFORMED;
        digits[n++] = s[i] - '0';
    }
    if (n != 2 && n != 4)
        return SL_DURATION_MALFORMED;
    int64_t hours = digits[0] * 10 + digits[1], minutes = n == 4 ? digits[2] * 10 + digits[3] : 0;
    int64_t v = (hours * 60 + minutes) * 60 * INT64_C(1000000000);
    if (minutes >= 60)
        return SL_DURATION_MALFORMED;
    if (v > SL_UTC_OFFSET_MAX)
        return SL_DURATION_OUT_OF_RANGE;
    *ns = s[0] == '-' ? -v : v;
    return SL_DURATION_OK;
}

void sl_utc_offset_text(int64_t ns, char out[8])
{
    int64_t minutes = (ns < 0 ? -ns : ns) / (60 * (int64_t)1000000000);
    if (minutes > 99 * 60 + 59)
        minutes = 99 * 60 + 59;
    snprintf(out, 8, "%c%02d:%02d", ns < 0 ? '-' : '+', (int)(minutes / 60), (int)(minutes % 60));
}
