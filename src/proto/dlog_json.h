/*
 * dlog_json.h: one line of sluiced's decision log (server/dlog.h), a JSON
 * object on one line, its fields always in this order:
 *
 *   {"time":"2026-11-29T22:10:03.123Z","face":"resp","policy":"chat",
 *    "key":"chat:alice","cost":1,"allowed":false,"shadow":false,
 *    "remaining":0,"retry_after_ms":1500,"refused_by":"chat.tpm"}
 *
 * (one line in the file; broken here to fit). time is RFC 3339 in UTC
 * with milliseconds; policy and refused_by are null when there is none.
 *
 * Strings are JSON strings of the bytes given: '"' and '\' escaped, the
 * control bytes 0x00 to 0x1F and 0x7F written as \b \f \n \r \t or \u00XX,
 * every well-formed UTF-8 sequence kept as it is (RFC 3629: no overlong
 * forms, no surrogates, nothing past U+10FFFF), and every other byte
 * written as \ufffd, the replacement character. A key with such a byte
 * cannot be told from its JSON string, so its line also carries
 * "key_base64" (right after "key"): the key's exact bytes, in base64 with
 * padding (RFC 4648). A line is therefore always valid JSON and valid
 * UTF-8, and the key always decodes back to its exact bytes: from "key"
 * when there is no "key_base64", else from "key_base64".
 */
#ifndef SLUICE_PROTO_DLOG_JSON_H
#define SLUICE_PROTO_DLOG_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sl_dlog_line {
    int64_t time_ms;    /* Unix time, in ms; clamped to years 1970 .. 9999 */
    const char *face;   /* "resp", "http" or "grpc": written as it is (no escaping) */
    const char *policy; /* policy_len bytes; NULL: null */
    size_t policy_len;
    const void *key;    /* key_len bytes, any */
    size_t key_len;
    int64_t cost;
    bool allowed;       /* what the caller was told */
    bool shadow;        /* a dry-run policy would have refused (allowed all the same) */
    int64_t remaining;
    int64_t retry_after_ms; /* 0 when admitted; -1: never */
    const char *refused_by; /* refused_len bytes; NULL: null */
    size_t refused_len;
} sl_dlog_line;

/* The most bytes sl_dlog_format writes for a line whose strings are this
 * long (the face at most 8 bytes), its newline included. */
size_t sl_dlog_line_max(size_t policy_len, size_t key_len, size_t refused_len);

/* The text of the second the last line fell in, which the next lines of
 * that second reuse: a date costs a few hundred instructions to write, a
 * copy of it a few. All zero before the first line. */
typedef struct sl_dlog_clock {
    int64_t sec_plus_1;  /* the second cached, plus 1; 0: none */
    char text[20];       /* its "YYYY-MM-DDTHH:MM:SS." */
} sl_dlog_clock;

/*
 * Writes l as one line, its '\n' included, into out (cap bytes; no NUL is
 * written), the time through clock (NULL: none; the line is the same).
 * Returns the line's length, or 0 (out's contents undefined) when cap is
 * less than sl_dlog_line_max for l's strings or l->face is NULL or longer
 * than 8 bytes.
 */
size_t sl_dlog_format(char *out, size_t cap, const sl_dlog_line *l, sl_dlog_clock *clock);

/*
 * Writes s[0 .. len) as a JSON string, its quotes included, into out (at
 * least 6 * len + 2 bytes) as the header says. Returns the bytes written;
 * *utf8 says whether s was well-formed UTF-8 (false: some byte was written
 * as \ufffd).
 */
size_t sl_json_string(char *out, const void *s, size_t len, bool *utf8);

/* Writes s[0 .. len) in base64 with padding into out (4 * ((len + 2) / 3)
 * bytes, no NUL); returns the bytes written. */
size_t sl_base64(char *out, const void *s, size_t len);

/* Writes Unix time ms as "YYYY-MM-DDTHH:MM:SS.mmmZ" (24 bytes, no NUL)
 * into out, ms clamped to years 1970 .. 9999; returns 24. */
size_t sl_rfc3339_ms(char *out, int64_t ms);

#endif /* SLUICE_PROTO_DLOG_JSON_H */
