/*
 * store_debug.h: hooks into the keyed store for its tests and benchmarks
 * (tests/unit, bench/), defined in store.c and debug.c. Not installed, and
 * not an API: what the store's layout is stays in store_layout.h, which
 * only src/store/ includes.
 *
 * Every allocation the store makes goes through common/alloc.h, so that
 * sl_alloc_fail_nth makes the nth of them fail.
 */
#ifndef SL_STORE_DEBUG_H
#define SL_STORE_DEBUG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/alloc.h"
#include "sluice.h"

/* Is the key present? A bare lookup (hash, the index group's prefetch as a
 * take starts it, entering the shard as a take does, probe, compare), so
 * that a benchmark can measure the table alone. */
bool sl_store_debug_contains(sl_store *s, const void *key, size_t keylen);

/* Where the key's record is (NULL when the key is absent), for tests of
 * the records' layout; the address is good until the shard next changes. */
const void *sl_store_debug_record(sl_store *s, const void *key, size_t keylen);

/* Checks the shard invariants (counts, byte counts, page lists, every key
 * findable); returns 0 when they hold, or a line number in debug.c of the
 * first broken one. */
int sl_store_debug_check(sl_store *s);

/* The tick (of 2^20 ns, rounded up) a state expiring at expires_ns keeps
 * in its record: a state whose tick has passed is "never seen", as a test's
 * model must know. */
uint64_t sl_store_debug_tick_of(int64_t expires_ns);

/* The bytes of one record page: what a shard's memory grows by when a
 * record needs a new page. */
size_t sl_store_debug_page_bytes(void);

/* The store's shards (a power of two, chosen by sl_store_new). */
unsigned sl_store_debug_shards(const sl_store *s);

/* The arena pages the index of shard `shard` (below sl_store_debug_shards)
 * takes; 0 when its index came from malloc, as a small one does. */
size_t sl_store_debug_index_pages(sl_store *s, unsigned shard);

/* The 2 MiB chunks the store's arena has mapped so far. */
size_t sl_store_debug_chunks(sl_store *s);

#endif /* SL_STORE_DEBUG_H */
