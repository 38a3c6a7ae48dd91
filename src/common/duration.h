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

/* What the parsers below answer: the text's fault, so that a caller can say
 * which rule it broke. */
typedef enum sl_duration_status {
    SL_DURATION_OK = 0,
    SL_DURATION_MALFORMED = -1,    /* not of the syntax (months where a duration is asked) */
    SL_DURATION_OUT_OF_RANGE = -2, /* of the syntax, but zero, negative or too long */
} sl_duration_status;

/* Parses len bytes at s into nanoseconds. Returns SL_DURATION_OK and sets
 * *ns, SL_DURATION_MALFORMED when the text is not a duration (months are
 * not durations), SL_DURATION_OUT_OF_RANGE when it is one but not positive
 * or longer than SL_SPAN_MAX. */
sl_duration_status sl_parse_duration(const char *s, size_t len, int64_t *ns);

/* As sl_parse_duration, and also "Nmo", N calendar months: then *months is
 * N and *ns is N mean months (N * SL_MONTH_NS); else *months is 0. */
sl_duration_status sl_parse_period(const char *s, size_t len, int64_t *ns, int64_t *months);

/* Parses a UTC offset: a sign and hours, optionally minutes ("+05:30",
 * "+0530", "-05"), at most 18:00; or "Z" for 0. Returns SL_DURATION_OK and
 * sets *ns, SL_DURATION_MALFORMED (minutes of 60 or more among it), or
 * SL_DURATION_OUT_OF_RANGE beyond 18:00. */
sl_duration_status sl_parse_utc_offset(const char *s, size_t len, int64_t *ns);

/* Writes a UTC offset as "+HH:MM" (or "-HH:MM"; "+00:00" for 0), whole
 * minutes, into out; the inverse of sl_parse_utc_offset for what it takes. */
void sl_utc_offset_text(int64_t ns, char out[8]);

#endif
