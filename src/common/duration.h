/*
 * duration.h: the one syntax for durations in commands and config files: an
 * integer number of seconds ("60"), or an integer with a unit: "500ms",
 * "30s", "5m", "2h", "1d".
 */
#ifndef SL_COMMON_DURATION_H
#define SL_COMMON_DURATION_H

#include <stddef.h>
#include <stdint.h>

/* Parses len bytes at s into nanoseconds. Returns 0 and sets *ns, or -1 when
 * the text is not a duration, -2 when it is one but not positive or longer
 * than SL_SPAN_MAX. */
int sl_parse_duration(const char *s, size_t len, int64_t *ns);

#endif
