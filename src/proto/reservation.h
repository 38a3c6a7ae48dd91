/*
 * reservation.h: the id SL.RESERVE answers and SL.SETTLE reads back
 * (docs/commands.md, "SL.RESERVE").
 *
 * A reservation is kept by no process: its id carries all that settling
 * needs (the policy, the tier, the key, the estimates), and a marker in the
 * store (cmd/reserve.c) says whether it is still open. The id is hex of
 *
 *   version (1)  random (16)  ttl_ms (8)  cost (8)  tokens (8)  print (8)
 *   policy length (1) policy  tier length (1) tier  key length (2) key
 *
 * integers big-endian. The marker's key is made of every field before the
 * key (sl_reservation_head), so that an id with any of them changed names
 * no marker, and settles nothing: an id cannot be forged into a larger
 * refund than the estimate it was issued with.
 *
 * Nothing here allocates; every length is checked against the text's.
 */
#ifndef SLUICE_PROTO_RESERVATION_H
#define SLUICE_PROTO_RESERVATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_RESERVATION_VERSION 1
#define SL_RESERVATION_FIXED 49      /* bytes before the policy's name length */
#define SL_RESERVATION_NAME_MAX 255  /* a policy's or a tier's name, at most */
#define SL_RESERVATION_KEY_MAX 65535 /* a key, at most */
/* The longest id's text, and its head's (the fields before the key). */
#define SL_RESERVATION_HEAD_MAX (SL_RESERVATION_FIXED + 2 * (1 + SL_RESERVATION_NAME_MAX))
#define SL_RESERVATION_TEXT_MAX (2 * (SL_RESERVATION_HEAD_MAX + 2 + SL_RESERVATION_KEY_MAX))

typedef struct sl_reservation {
    uint64_t random[2]; /* unguessable: who does not hold the id cannot settle it */
    int64_t ttl_ms;     /* 1 .. ; how long it may be settled */
    int64_t cost;       /* the estimates it took, >= 0 */
    int64_t tokens;
    uint64_t print;     /* the policy's items as they were (their keys and algorithms) */
    const char *policy; /* not NUL-terminated */
    size_t policy_len;  /* 1 .. SL_RESERVATION_NAME_MAX */
    const char *tier;   /* the tier named, or none (tier_len 0) */
    size_t tier_len;
    const char *key;
    size_t key_len;     /* 1 .. SL_RESERVATION_KEY_MAX */
} sl_reservation;

/* The text length of r's id (2 bytes a byte). */
size_t sl_reservation_text_len(const sl_reservation *r);

/* Writes r's id into out (cap bytes, NUL-terminated when room is left);
 * returns its length, or 0 when r is out of range or out is too small. */
size_t sl_reservation_encode(const sl_reservation *r, char *out, size_t cap);

/*
 * Reads an id: fills *r with its fields, whose strings point into buf (cap
 * bytes, at least half the text's length), where the text is decoded.
 * Returns NULL, or what is wrong with the text ("not hexadecimal", ...).
 */
const char *sl_reservation_decode(const char *text, size_t len, sl_reservation *r, char *buf,
                                  size_t cap);

/* The marker's name: hex of the id's fields before the key, into out;
 * returns its length, or 0 when out is too small. */
size_t sl_reservation_head(const sl_reservation *r, char *out, size_t cap);

#endif /* SLUICE_PROTO_RESERVATION_H */
