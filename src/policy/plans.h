/*
 * plans.h: a policy's plans file, which says which tier each key is on, and
 * the read-only table it loads into.
 *
 *   # plans for the api policy          a comment: '#' first on the line
 *   alice: paid                         KEY: TIER
 *   user:42: free                       the key is user:42 (see "The split")
 *   "  spaced  ": paid                  a quoted key keeps its blanks
 *   "#hash": free                       ... and may begin with '#' or '"'
 *   "say \"hi\" \\o/": paid             \" and \\ are the only escapes
 *
 * The format, exactly:
 *
 * - Lines end at '\n'; a '\r' just before it (or at the end of the file) is
 *   dropped, so CRLF files load as they are. A UTF-8 byte order mark
 *   (EF BB BF) at the very start of the file is skipped.
 * - A line is at most SL_PLANS_LINE_MAX bytes, its line end not counted.
 *   No byte of it may be a control byte (0x00-0x1f but the tab, and 0x7f):
 *   a plans file is text, and a key with control bytes cannot be written in
 *   it.
 * - Blanks are spaces and tabs. A line of blanks only is ignored, and so is
 *   a line whose first byte after its blanks is '#' (a comment). A '#'
 *   anywhere else is an ordinary byte: there are no comments at a line's
 *   end ("alice: paid # note" names the tier "paid # note", which is refused
 *   as unknown).
 * - The split: a line is cut at its LAST ':' that is followed by a blank or
 *   by the end of the line. What is before it is the key, what is after it
 *   the tier, each with the blanks around it trimmed. So a key may hold ':'
 *   anywhere, even ": " ("a: b: paid" is the key "a: b"), and "user:42:paid"
 *   (no blank after any ':') is refused for want of a separator. A tier
 *   cannot hold ": " nor end with ':', and a tier name the policy has that
 *   does cannot be named here.
 * - A quoted key: when the first byte after the line's blanks is '"', the
 *   key runs to the next '"' that is not escaped, and is taken between the
 *   quotes as it is (blanks, '#' and ':' included) but for the two escapes
 *   \" and \\; any other '\' is refused. After the closing quote come
 *   optional blanks, then the ':' (followed by a blank or the line's end),
 *   then the tier, trimmed. An unquoted key is taken literally, '"' and '\'
 *   included: only its first byte decides whether it is quoted.
 * - A key is 1 to SL_PLAN_KEY_MAX bytes (as looked up: after unquoting),
 *   a tier name 1 to SL_PLAN_TIER_MAX bytes and one of the tiers the
 *   caller names (exact bytes, case matters). A key given twice is refused,
 *   naming both lines, even with the same tier: a file that says a key's
 *   tier twice was most often merged wrongly, and keeping either would be a
 *   silent guess. At most SL_PLANS_MAX_KEYS keys; a file larger than
 *   SL_PLANS_MAX_BYTES is refused before it is read.
 *
 * A file is loaded whole or not at all: the first mistake, in file order,
 * refuses it, with "NAME:LINE:COLUMN: what was wrong" (1-based; columns
 * count bytes from the line's start, the byte order mark not counted), or
 * "NAME: what" for the file as a whole (its size, reading it, memory).
 *
 * The table. Built once by a load; from then on it is read-only, and any
 * number of threads may look keys up in it at once without a lock. A
 * reload (SIGHUP) loads a new table from the file while the old one keeps
 * answering; the caller then swaps its pointer and frees the old table once
 * no thread can still be reading it, as it does for its config. A refused
 * file changes nothing: the caller keeps the table it had.
 *
 * Its layout, for keys of 20 to 40 bytes about 33 to 53 bytes a key in all:
 *
 *   arena:  [pad][len lo][len hi][key bytes ...][len lo][len hi][key ...]
 *           one block of length-prefixed keys (2 + length bytes each); a
 *           record's offset is at least 1, so that 0 marks an empty slot
 *   slots:  uint64 each, ceil(count / 0.7) of them (load factor <= 0.7),
 *           open addressing with linear probing:
 *             bits  0..31  the key's offset in the arena (0: empty)
 *             bits 32..39  its tier (an index into the caller's list)
 *             bits 40..63  24 bits of the key's hash, so that a probe
 *                          reads the arena only when these match (about
 *                          once in 16 million for a key that is not there)
 *
 * The hash is SipHash-2-4 under a 128-bit key the caller draws at random,
 * so that neither a hostile file nor the keys of hostile requests can be
 * chosen to collide (which would make every lookup walk the whole table).
 * A slot's index is the hash's top 32 bits scaled to the table's size.
 */
#ifndef SL_POLICY_PLANS_H
#define SL_POLICY_PLANS_H

#include <stddef.h>
#include <stdint.h>

#define SL_PLAN_KEY_MAX 512                 /* bytes of a key */
#define SL_PLAN_TIER_MAX 64                 /* bytes of a tier name (SL_POLICY_NAME_MAX) */
#define SL_PLANS_MAX_TIERS 255              /* names the caller may pass */
#define SL_PLANS_MAX_KEYS (1u << 24)        /* 16 777 216 */
#define SL_PLANS_MAX_BYTES (UINT64_C(1) << 30) /* 1 GiB: a larger file is refused */
#define SL_PLANS_LINE_MAX 4096              /* bytes of a line, its end not counted */

typedef struct sl_plans sl_plans;

/*
 * Loads the plans file at `path`. tiers[0 .. ntiers) are the tier names the
 * file may use (NUL-terminated, at most SL_PLANS_MAX_TIERS of them; ntiers 0
 * allows no key at all); a key's tier is reported as its index in that list.
 * hash_key is the table's SipHash key: draw it at random for each table.
 *
 * The file is read in chunks of 1 MiB, so that the file and the table are
 * never in memory at once: a load holds the table being built, the buffer,
 * and until the end a 4-byte line number per slot (for the message about a
 * key given twice), freed when the table is made to its final size.
 *
 * On success returns 0 and *out is a table the caller frees with
 * sl_plans_free(). On failure returns -1, *out is NULL, and err (errlen
 * bytes) holds the message (see the top of this file).
 */
int sl_plans_load(const char *path, const char *const *tiers, size_t ntiers,
                  const uint64_t hash_key[2], sl_plans **out, char *err, size_t errlen);

/* As sl_plans_load, from len bytes in memory; `name` stands for the path in
 * messages. The text is only read, and need not end with '\n' or a NUL. */
int sl_plans_parse(const char *text, size_t len, const char *name, const char *const *tiers,
                   size_t ntiers, const uint64_t hash_key[2], sl_plans **out, char *err,
                   size_t errlen);

/* The tier of the key (len bytes): its index in the list the table was
 * loaded with, or -1 when the file does not name it (the caller then gives
 * the policy's default). p may be NULL: no file, every key unknown. */
int sl_plans_lookup(const sl_plans *p, const void *key, size_t len);

/* How many keys the table holds (0 for NULL). */
size_t sl_plans_count(const sl_plans *p);

/* The bytes the table holds allocated: the arena, the slots and the
 * table's header (0 for NULL). */
size_t sl_plans_bytes(const sl_plans *p);

/*
 * Calls fn(arg, key, len, tier) for every key of the table, in no
 * particular order; stops at the first call that returns nonzero and
 * returns that value, else 0. The key points into the table.
 */
int sl_plans_each(const sl_plans *p, int (*fn)(void *arg, const void *key, size_t len, int tier),
                  void *arg);

/*
 * Building a table key by key, for a source that is not a file: a Redis
 * hash (src/server/plans_redis.c), whose fields are the keys. Any bytes
 * make a key here (1 to SL_PLAN_KEY_MAX of them), control bytes included,
 * and a key set twice keeps the tier it was set to last: a scan of a hash
 * may return a field more than once.
 *
 * sl_plans_build_new returns a builder (NULL when out of memory) that
 * sl_plans_build_finish or sl_plans_build_abort frees.
 */
typedef struct sl_plans_build sl_plans_build;
sl_plans_build *sl_plans_build_new(const uint64_t hash_key[2]);

/* Sets the tier (an index into the caller's tier list, below
 * SL_PLANS_MAX_TIERS) of the key (len bytes). Returns 0; or -1 when the key
 * is empty or longer than SL_PLAN_KEY_MAX, the table holds
 * SL_PLANS_MAX_KEYS keys already, or memory runs out, with the reason in
 * sl_plans_build_error() (the builder stays usable). */
int sl_plans_build_set(sl_plans_build *b, const void *key, size_t len, unsigned tier);

/* Why the last sl_plans_build_set failed; the builder's own storage. */
const char *sl_plans_build_error(const sl_plans_build *b);

/* Ends the build: returns the table (freed with sl_plans_free), or NULL
 * when memory ran out; frees the builder either way. */
sl_plans *sl_plans_build_finish(sl_plans_build *b);

/* Drops a build and what it held; NULL is allowed. */
void sl_plans_build_abort(sl_plans_build *b);

/* Frees a table from a load; NULL is allowed. */
void sl_plans_free(sl_plans *p);

#endif
