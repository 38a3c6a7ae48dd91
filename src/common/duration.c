/*
 * duration.c: "60", "500ms", "30s", "5m", "2h", "1d" into nanoseconds, with
 * overflow checked before the multiplication.
 */
#include "common/duration.h"

#include <strings.h>

#include "sluice.h"

int sl_parse_duration(const char *s, size_t len, int64_t *ns)
{
    static const struct {
        const char *unit;
        size_t len;
        int64_t ns;
    } units[] = {{"ms", 2, INT64_C(1000000)},     {"s", 1, INT64_C(1000000000)},
                 {"m", 1, INT64_C(60000000000)},  {"h", 1, INT64_C(3600000000000)},
                 {"d", 1, INT64_C(86400000000000)}, {"", 0, INT64_C(1000000000)}};
    size_t i = 0;
    bool neg = len > 0 && s[0] == '-';
    i = neg;
    uint64_t v = 0;
    size_t digits_start = i;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        if (v > (UINT64_MAX - 9) / 10)
            return -2; /* far too large; keep scanning nothing more */
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (i == digits_start)
        return -1;
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        if (len - i != units[u].len || strncasecmp(s + i, units[u].unit, units[u].len) != 0)
            continue;
        if (neg || v == 0 || v > (uint64_t)SL_SPAN_MAX / (uint64_t)units[u].ns)
            return -2;
        *ns = (int64_t)v * units[u].ns;
        return 0;
    }
    return -1;
}
