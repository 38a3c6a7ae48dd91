/*
 * sf.h: RFC 9651 structured field Lists, as far as a client reading
 * RateLimit-Policy and RateLimit needs them; internal to libsluice.
 *
 * sl_sf_parse_list reads a whole List and hands each member to a callback
 * with its item and the parameters the caller asked for by key (the last
 * of a repeated key; other keys are checked and dropped). Every kind of
 * bare item is parsed and checked, so that a value that is not a List is
 * refused whole, as RFC 9651 fails the field; a member that is an inner
 * list is checked and handed over marked as such, without its items.
 *
 * The buffer is the caller's and is written: a String's escapes and a
 * Display String's %-escapes are undone in place. The callback runs as the
 * parse goes, before the end of the value is checked: a caller that keeps
 * anything must drop it when the parse fails.
 */
#ifndef SL_CLIENT_SF_H
#define SL_CLIENT_SF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum sl_sf_type {
    SL_SF_INTEGER,
    SL_SF_DECIMAL,
    SL_SF_STRING,
    SL_SF_TOKEN,
    SL_SF_BYTES,   /* text: the base64 between the colons, as sent */
    SL_SF_BOOLEAN, /* integer: 0 or 1 */
    SL_SF_DATE,    /* integer: Unix seconds */
    SL_SF_DISPLAY, /* text: the decoded UTF-8 */
} sl_sf_type;

typedef struct sl_sf_item {
    sl_sf_type type;
    int64_t integer; /* INTEGER, BOOLEAN, DATE */
    const char *text; /* STRING, TOKEN, BYTES, DISPLAY, DECIMAL (its text): in the buffer */
    size_t len;
} sl_sf_item;

/* The most parameter keys one parse asks for. */
#define SL_SF_KEYS_MAX 8

typedef struct sl_sf_member {
    bool inner_list;                   /* an inner list: `item` is unset */
    sl_sf_item item;
    bool has[SL_SF_KEYS_MAX];          /* by the index of the key asked for */
    sl_sf_item param[SL_SF_KEYS_MAX];
} sl_sf_member;

typedef void (*sl_sf_member_fn)(void *ctx, const sl_sf_member *m);

/*
 * Parses s[0 .. n) as a List (spaces and tabs around it dropped; an empty
 * value is an empty List), calling fn for each member in order, with the
 * parameters named by keys[0 .. nkeys) (nkeys <= SL_SF_KEYS_MAX). Returns
 * NULL when the value is a List, else a static text saying what was wrong.
 */
const char *sl_sf_parse_list(char *s, size_t n, const char *const *keys, size_t nkeys,
                             sl_sf_member_fn fn, void *ctx);

#endif /* SL_CLIENT_SF_H */
