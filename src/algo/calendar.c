/*
 * calendar.c: civil dates and calendar-month windows (see calendar.h), and
 * sl_limit_align(_day), which puts a limit's windows on the wall clock.
 *
 * The civil-date arithmetic counts in eras of 400 Gregorian years (146 097
 * days, exactly), and within an era in years that begin on March 1st: the
 * leap day then falls at the end of a year, so the day of the year maps to a
 * month through one linear formula, and leap years are only the era's
 * arithmetic (a year of 365 days, one more every 4 years, one fewer every
 * 100). Everything is integer division rounded down, so dates before 1970
 * come out as exactly as the ones after.
 */
#include "algo/calendar.h"

#include "algo/algo.h"

/* floor(a / b) and its non-negative remainder, for b > 0. */
static inline int64_t sl_floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return q - (a % b < 0);
}

static inline int64_t sl_floor_mod(int64_t a, int64_t b)
{
    int64_t r = a % b;
    return r < 0 ? r + b : r;
}

/* From 0000-03-01, the first day of an era, to 1970-01-01. */
#define SL_DAYS_TO_1970 INT64_C(719468)
#define SL_DAYS_PER_ERA INT64_C(146097)

/* The days before the first day of month mp of a year that begins in March
 * (mp 0 = March .. 11 = February): the months of 31, 30, 31, 30, 31 days
 * repeat from March and again from August, 153 days every 5 months, which
 * this line through the points rounds down to exactly. */
static inline int64_t sl_days_before_month(int64_t mp)
{
    return (153 * mp + 2) / 5;
}

int64_t sl_days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2; /* January and February belong to the year before */
    int64_t era = sl_floor_div(y, 400);
    int64_t yoe = y - era * 400;                     /* [0, 399] */
    int64_t mp = m > 2 ? m - 3 : m + 9;              /* [0, 11] */
    int64_t doy = sl_days_before_month(mp) + d - 1;  /* [0, 365] */
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy; /* [0, 146096] */
    return era * SL_DAYS_PER_ERA + doe - SL_DAYS_TO_1970;
}

void sl_civil_from_days(int64_t days, int64_t *y, int *m, int *d)
{
    int64_t z = days + SL_DAYS_TO_1970;
    int64_t era = sl_floor_div(z, SL_DAYS_PER_ERA);
    int64_t doe = z - era * SL_DAYS_PER_ERA; /* [0, 146096] */
    /* The year of the era: the day count with the leap days taken out
     * (one every 1 460 days, given back every 36 524, taken again on the
     * era's last day) divides by 365 exactly into years. */
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100); /* [0, 365] */
    int64_t mp = (5 * doy + 2) / 153;                      /* inverse of sl_days_before_month */
    *d = (int)(doy - sl_days_before_month(mp) + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

/* The first day (days from 1970-01-01) of month index mi, counted from
 * January 1970 = 0. */
static int64_t sl_month_first_day(int64_t mi)
{
    int64_t years = sl_floor_div(mi, 12);
    return sl_days_from_civil(1970 + years, (int)(mi - years * 12) + 1, 1);
}

/* The day a window of month index mi begins on: day `reset_day` of that
 * month (0 or 1: the first), or the month's last day when it has fewer
 * days, as a billing cycle anchored on the 31st resets on February 28th. */
static int64_t sl_month_reset_day(int64_t mi, int64_t reset_day)
{
    int64_t first = sl_month_first_day(mi);
    if (reset_day <= 1)
        return first;
    int64_t last = sl_month_first_day(mi + 1) - 1;
    return first + reset_day - 1 < last ? first + reset_day - 1 : last;
}

void sl_month_window_at(const sl_limit *l, int64_t now, int64_t *start, int64_t *end)
{
    /* The local day and time of day of now + offset, without forming the
     * sum (it could overflow): each part is split into days first. */
    int64_t off = l->local_offset_ns;
    int64_t days = sl_floor_div(now, SL_NS_PER_DAY) + sl_floor_div(off, SL_NS_PER_DAY);
    int64_t tod = sl_floor_mod(now, SL_NS_PER_DAY) + sl_floor_mod(off, SL_NS_PER_DAY);
    if (tod >= SL_NS_PER_DAY) {
        tod -= SL_NS_PER_DAY;
        days++;
    }
    int64_t y;
    int m, d;
    sl_civil_from_days(days, &y, &m, &d);
    int64_t mi = (y - 1970) * 12 + (m - 1);
    /* Before this month's reset day, the cycle that holds now began in the
     * month before. */
    if (l->reset_day > 1 && days < sl_month_reset_day(mi, l->reset_day))
        mi--;
    int64_t first = sl_floor_div(mi, l->months) * l->months;
    int64_t ds = sl_month_reset_day(first, l->reset_day);
    int64_t de = sl_month_reset_day(first + l->months, l->reset_day);
    /* At most SL_MONTHS_MAX + 1 months of days: these products fit. */
    *start = now - ((days - ds) * SL_NS_PER_DAY + tod);
    if (__builtin_add_overflow(*start, (de - ds) * SL_NS_PER_DAY, end))
        *end = INT64_MAX;
}

sl_status sl_limit_align_day(sl_limit *l, int64_t months, int64_t reset_day,
                             int64_t utc_offset_ns, int64_t clock_offset_ns)
{
    if (l->state_size == 0)
        return SL_ERR_ARGUMENT; /* not filled by sl_limit_init */
    if (months < 0 || months > SL_MONTHS_MAX)
        return SL_ERR_PERIOD;
    if (utc_offset_ns < -SL_UTC_OFFSET_MAX || utc_offset_ns > SL_UTC_OFFSET_MAX ||
        clock_offset_ns < -SL_TIME_MAX || clock_offset_ns > SL_TIME_MAX ||
        reset_day < 0 || reset_day > SL_RESET_DAY_MAX)
        return SL_ERR_ARGUMENT;
    if (reset_day > 1 && months == 0)
        return SL_ERR_PERIOD; /* a day of the month, for a period that has none */
    if (months > 0 && l->algorithm == SL_SLIDING_LOG)
        return SL_ERR_PERIOD; /* a log keeps the trailing period, which has no calendar */
    l->months = months; /* only the windows' sl_window_at reads it, and reset_day */
    l->reset_day = reset_day > 1 ? reset_day : 0;
    l->utc_offset_ns = utc_offset_ns;
    l->local_offset_ns = clock_offset_ns + utc_offset_ns;
    /* Boundaries where now + offset - 4 days (Monday 1970-01-05) is a
     * multiple of the period: now = 4 days - offset, modulo the period. */
    l->phase_ns = sl_floor_mod(4 * SL_NS_PER_DAY - l->local_offset_ns, l->period_ns);
    return SL_OK;
}

sl_status sl_limit_align(sl_limit *l, int64_t months, int64_t utc_offset_ns,
                         int64_t clock_offset_ns)
{
    return sl_limit_align_day(l, months, 0, utc_offset_ns, clock_offset_ns);
}
