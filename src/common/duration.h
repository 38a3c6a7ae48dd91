/*
 * duration.h: the one syntax for durations in commands and config files: an
 * integer number of seconds ("60"), or an integer with a unit: "500ms",
 * "30s", "5m", "2h", "1d", "1w" (7 days). A period may also be calendar
 * months, "1mo" ("m" is minutes; "mo" is never confused with it). And the
 * one syntax for UTC offsets: "+05:30", "-0500", "+05", "Z".
 */
#ifndef SL_COMMON_DURATION_H
#define SL_COMMON_DURATION_H

#include <stddef.h>
#include <stdint.h>

/* Parses len bytes at s into nanoseconds. Returns 0 and sets *ns, or -1 when
 * the text is not a duration, -2 when it is one but not positive or longer
 * than SL_SPAN_MAX. Months are not durations (-1). */
int sl_parse_duration(const char *s, size_t len, int64_t *ns);

/* As sl_parse_duration, and also "Nmo", N calendar months: then *months is
 * N and *ns is N mean months (N * SL_MONTH_NS); else *months is 0. */
int sl_parse_period(const char *s, size_t len, int64_t *ns, int64_t *months);

/* Parses a UTC offset: a sign and hours, optionally minutes ("+05:30",
 * "+0530", "-05"), at most 18:00; or "Z" for 0. Returns 0 and sets *ns,
 * or -1. */
int sl_parse_utc_offset(const char *s, size_t len, int64_t *ns);

#endif
