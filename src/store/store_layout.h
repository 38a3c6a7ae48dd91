/*
 * store_layout.h: the keyed store's data structures, and the functions its
 * files share. For src/store/ only (tests and benchmarks include
 * store_debug.h); not installed.
 *
 * The files: store.c holds everything a take runs (hash, locks, readers,
 * index, record pages, the take, peek, reset and release), so that the
 * compiler inlines it into one path; arena.c the chunks record pages come
 * from; reclaim.c reclaim, eviction and compaction; take_many.c the
 * multi-key take; snapshot.c saving and loading; debug.c the hooks of
 * store_debug.h.
 *
 * One store is a fixed array of shards; a key's 64-bit hash picks its shard
 * (top bits), its group in the shard's index (middle bits) and a 7-bit tag
 * (low bits). Each shard has its own lock, index and record pages, and its
 * own share of the memory cap, so two threads on different shards never
 * touch the same cache line.
 *
 * The index: groups of 8 slots of 4 bytes (one 32-byte half cache line per
 * group), probed group after group from the key's home group.
 *
 *     slot (uint32):  31      25 24 23          9 8        0
 *                    +----------+--+-------------+----------+
 *                    |   tag    |0 |    page     |  record  |
 *                    +----------+--+-------------+----------+
 *     0 = empty, 1 = deleted (tombstone); a full slot has a tag in 1..127.
 *     Bit 24 of a group's first slot is the group's lock (SL_SLOT_LOCK), set
 *     only while a take without the shard's lock holds it.
 *
 * The records: pages of 16 KiB, each holding records of one size (in
 * 8-byte units, 4 to 256 units); a record larger than 2 KiB gets a page of
 * its own, allocated at its exact size. A record is
 *
 *     +--------------------+------------------------+---------------------+
 *     | meta (8 bytes)     | state (S bytes, 8-     | key (keylen bytes,  |
 *     | expires, flags,    | aligned, as sl_take    | padded to 8)        |
 *     | algorithm, keylen  | reads and writes it)   |                     |
 *     +--------------------+------------------------+---------------------+
 *
 * so a 16-byte key with a 16-byte GCRA state costs 40 bytes of record and
 * about 5 to 7 bytes of index (4-byte slots at a load of 0.58 to 0.875).
 *
 * Takes on keys that are there run without the shard's lock (see "readers"
 * in store.c): a thread announces the shard it reads in a line of its own,
 * and locks its key's home group with the spare bit 24 of the group's first
 * slot, or in a small shard its key's record with a bit in the record's
 * meta.
 * Whatever holds the shard's lock (an insert, a reclaim, a multi-limit take)
 * first waits for the shard's readers to leave. A take on a key that is
 * there thus writes only its record (and the store's clock when its time is
 * the newest yet), and a thread inserts into pages of its own lane, so that
 * the records of keys that different threads inserted share no cache line.
 */
#ifndef SL_STORE_LAYOUT_H
#define SL_STORE_LAYOUT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/alloc.h"
#include "sluice.h"

/* ---- sizes ---- */

#define SL_PAGE_BYTES 16384u                 /* one page of small records */
#define SL_PAGE_UNITS (SL_PAGE_BYTES / 8u)   /* 2048 units of 8 bytes */
#define SL_SMALL_MAX_UNITS 256u              /* larger records get a page of their own */
#define SL_MIN_UNITS 4u                      /* meta + 16-byte state + 1..8 key bytes */
#define SL_PAGE_NONE 0x7fffu                 /* "no page" in 15-bit page ids */
#define SL_MAX_PAGES 0x7fffu                 /* page ids 0..0x7ffe: 512 MiB of pages a shard */

#define SL_GROUP_SLOTS 8u
#define SL_SLOT_EMPTY 0u
#define SL_SLOT_DELETED 1u
#define SL_SLOT_TAG_SHIFT 25
#define SL_SLOT_REF_MASK 0x00ffffffu         /* page << 9 | record index */

/* Record flags (meta.flags): the low 4 bits hold the record's kind, the
 * algorithm and whether its state is carried (begins with the name of the
 * limit that wrote it: SL_LIMIT_CARRY). */
#define SL_REC_ALGO_MASK 0x0fu
#define SL_REC_CARRIED 0x08u
#define SL_REC_LIVE 0x10u                    /* the record holds a key (else: free) */
#define SL_REC_PINNED 0x20u                  /* a multi-take holds it: never evict */
#define SL_REC_LOCKED 0x40u                  /* a take without the shard's lock holds it (store.c) */

/* Expiry is kept in ticks of 2^20 ns (about 1.05 ms), rounded up, in 40
 * bits: enough for 36 years of a monotonic clock. */
#define SL_TICK_SHIFT 20
#define SL_TICK_NEVER ((UINT64_C(1) << 40) - 1) /* saturated: never reclaimed, only evicted */

/* The record kind a limit's states have: its algorithm, and SL_REC_CARRIED
 * when the limit is carried (SL_LIMIT_CARRY << 2, without a branch). */
_Static_assert(SL_LIMIT_CARRY << 2 == SL_REC_CARRIED, "a carried limit's kind is one shift away");
static inline unsigned sl_rec_kind_of(const sl_limit *l)
{
    return (unsigned)l->algorithm | ((l->flags & SL_LIMIT_CARRY) << 2);
}

/* The 8-byte header of every record. */
typedef struct sl_rec_meta {
    uint32_t exp_lo;  /* low 32 bits of the expiry tick */
    uint8_t exp_hi;   /* high 8 bits of the expiry tick */
    uint8_t flags;    /* algorithm | SL_REC_LIVE | SL_REC_PINNED | SL_REC_LOCKED */
    uint16_t keylen;  /* key bytes; in a free record: next free index + 1 */
} sl_rec_meta;
_Static_assert(sizeof(sl_rec_meta) == 8 && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "a record's meta is one word: the expiry in its low 40 bits, then flags, keylen");

/* A shard's small records are allocated from pages of the inserting
 * thread's lane (handed out in turn as threads first insert), so that
 * records that different threads inserted, and most often take, do not
 * share cache lines: a line two cores both write goes back and forth
 * between them on every take (see "lanes" in store.c). */
#define SL_LANES 4u

/* One page of records, or one large record (cap == 1). 24 bytes: every
 * take on a key not its thread's last reads an entry. */
typedef struct sl_page {
    uint64_t *base;    /* the records; NULL when the page id is free */
    uint32_t units : 24; /* size of each record in 8-byte units (fits: see sl_state_size_ok) */
    uint32_t lane : 8;   /* the lane whose partial list it is on (small pages) */
    uint16_t cap;      /* records the page holds */
    uint16_t live;     /* records in use */
    uint16_t bump;     /* records handed out at least once (never-used tail starts here) */
    uint16_t free_head; /* first free record + 1, 0 = none (below bump) */
    uint16_t next;     /* partial list of its size, or free page ids list */
    uint16_t prev;     /* partial list of its size */
} sl_page;
_Static_assert(sizeof(sl_page) == 24, "a page table entry is 24 bytes");

/* A spinlock: a take holds it for a few loads and stores, far less than a
 * futex round trip; waiters yield after a while so that a preempted holder
 * on an oversubscribed machine gets the CPU back. */
typedef struct sl_spin {
    atomic_int held;
} sl_spin;

/* Where the shards' record pages of SL_PAGE_BYTES come from: chunks of 2 MiB
 * mapped for transparent huge pages, so that the records of millions of keys
 * sit in few TLB entries (a miss on one costs a page walk, which a virtual
 * machine makes two-dimensional). Pages a shard gives back are kept on a
 * free list for the next; chunks are unmapped when the store is freed. */
typedef struct sl_arena {
    sl_spin lock;         /* taken once per page, not per take */
    void *free;           /* freed pages, linked through their first word */
    char *bump, *end;     /* what the newest chunk has not handed out */
    void **chunks;        /* every chunk, to unmap */
    size_t nchunks, chunks_cap;
} sl_arena;

typedef struct sl_shard {
    /* Taken by whatever changes the shard's index, pages or records other
     * than by a take on a key that is there; such takes read it and, while it
     * is held, take it too. Written by those only: in steady state its line
     * stays in every core's cache. */
    _Alignas(64) sl_spin lock;
    /* Counts the lock's holders (each adds one once the readers have left):
     * a thread's record of its last take here is good while it is
     * unchanged. */
    _Atomic uint64_t epoch;
    _Alignas(64) uint32_t ngroups; /* index size in groups of 8 slots (0 before first use) */
    uint32_t count;      /* keys held */
    uint32_t tombs;      /* deleted slots */
    uint32_t sweep_page; /* where the amortized reclaim looks next: page id... */
    uint32_t sweep_rec;  /* ...and record in it */
    uint64_t evict_rng;  /* where eviction samples: xorshift64 state, never 0 */
    uint32_t *slots;     /* ngroups * 8 slots */
    sl_page *pages;      /* page table, pages_len entries */
    sl_arena *arena;     /* the store's, for pages of SL_PAGE_BYTES */
    uint32_t slots_pages; /* the index's arena pages; 0 when it came from malloc */
    uint32_t pages_len;  /* entries allocated in the page table */
    uint16_t free_pages; /* list of unused page ids (SL_PAGE_NONE = empty) */
    uint16_t partial[SL_LANES][SL_SMALL_MAX_UNITS + 1]; /* per lane and record size: pages with room */
    size_t used;         /* bytes this shard holds: index + page table + pages */
    size_t budget;       /* bytes this shard may hold (SIZE_MAX without a cap) */
    uint64_t evictions;  /* live states dropped at the cap */
    uint64_t reclaimed;  /* states dropped because they had become "never seen" */
    uint64_t reinits;    /* states reset because a key changed algorithm or size */
} sl_shard;

struct sl_store {
    /* The latest `now` a take has used. Threads read the clock once per
     * batch, so a take can arrive with a `now` a little older than the one
     * before it on the same key; it is decided at this time instead, so that
     * a key's state never sees time go back (remaining then counts down one
     * by one). Raised by the first take of each newer batch, read by the
     * rest: one line for the store, rarely written. */
    _Alignas(64) _Atomic int64_t clock;
    _Alignas(64) sl_shard *shards;
    uint32_t nshards;
    unsigned shard_shift; /* 63 - log2(nshards): the shard is (h >> 1) >> shard_shift */
    size_t max_key_len;
    size_t max_memory;    /* 0: no cap */
    size_t fixed_bytes;   /* the store and its shard array */
    uint64_t seed;
    uint64_t id;          /* unique in the process: no two stores, even over time, share it */
    sl_arena arena;
};

/*
 * ---- what the store's files share ----
 *
 * The functions below are declared hidden: the store's files call them,
 * nothing outside libsluice may, and a hidden function called in the file
 * that defines it may be inlined there (a default-visibility one in
 * position-independent code may not, as it could be interposed).
 */
#pragma GCC visibility push(hidden)

/* A state this size or smaller is computed in a stack buffer before the key
 * is stored, so that a take that does not change anything stores nothing. */
#define SL_SCRATCH_BYTES 512u

/* The arena's chunks (arena.c): 2 MiB, one huge page each. */
#define SL_CHUNK_BYTES ((size_t)2 << 20)

/* A group's lock: the always-zero bit 24 of its first slot (see the slot
 * layout above, and "readers" in store.c). */
#define SL_SLOT_LOCK (UINT32_C(1) << 24)

/* The key hash (store.c): seeded, 64 bits, fast on short keys. Inlined in
 * store.c; the other files call its out-of-line copy. */
uint64_t sl_store_hash(const void *key, size_t len, uint64_t seed);

/* The shard of a key's hash: its top bits (none of them for one shard,
 * without a shift of 64). */
static inline sl_shard *sl_store_shard_of(const sl_store *s, uint64_t h)
{
    return &s->shards[(h >> 1) >> s->shard_shift];
}

/* The key's 7-bit tag in its slot (never 0, which marks an empty slot). */
static inline uint32_t sl_tag_of(uint64_t h)
{
    uint32_t t = (uint32_t)(h & 0x7f);
    return t ? t : 1;
}

/* The home group: multiply-shift maps 32 hash bits onto [0, ngroups), so
 * the index can grow by 1.5x instead of doubling. */
static inline uint32_t sl_home_group(uint64_t h, uint32_t ngroups)
{
    return (uint32_t)(((h >> 7) & 0xffffffffu) * (uint64_t)ngroups >> 32);
}

/* ---- locks (store.c) ---- */

/* The lock: one atomic exchange when it is free, sl_spin_wait otherwise.
 * Sequentially consistent, as a shard's readers and its lock's holder each
 * write one thing and then read what the other wrote (see store.c). */
void sl_spin_wait(sl_spin *l);
static inline void sl_spin_lock(sl_spin *l)
{
    if (__builtin_expect(atomic_exchange_explicit(&l->held, 1, memory_order_seq_cst), 0))
        sl_spin_wait(l);
}
static inline void sl_spin_unlock(sl_spin *l)
{
    atomic_store_explicit(&l->held, 0, memory_order_release);
}

/* A shard's lock, for anything but a take on a key that is there: the spin
 * lock, then a wait until the takes running without it have left the
 * shard. */
void sl_shard_lock(sl_shard *sh);
static inline void sl_shard_unlock(sl_shard *sh) { sl_spin_unlock(&sh->lock); }

/* ---- slots, records, ticks ---- */

static inline uint32_t sl_slot_page(uint32_t slot) { return (slot >> 9) & 0x7fffu; }
static inline uint32_t sl_slot_index(uint32_t slot) { return slot & 0x1ffu; }

/* Pointer to the record a full slot value (or a page << 9 | index
 * reference) refers to. */
static inline uint64_t *sl_shard_record(const sl_shard *sh, uint32_t slot)
{
    const sl_page *pg = &sh->pages[sl_slot_page(slot)];
    return pg->base + (size_t)sl_slot_index(slot) * pg->units;
}
/* Record accessors. */
static inline sl_rec_meta *sl_rec_meta_of(uint64_t *rec) { return (sl_rec_meta *)(void *)rec; }
/* A record's meta, read as one word, as takes without the shard's lock
 * read and write it (store.c, "readers"). */
static inline sl_rec_meta sl_rec_meta_load(const uint64_t *rec)
{
    uint64_t w = __atomic_load_n(rec, __ATOMIC_RELAXED);
    sl_rec_meta m;
    memcpy(&m, &w, sizeof m);
    return m;
}
static inline uint64_t sl_rec_expiry(const uint64_t *rec)
{
    const sl_rec_meta *m = (const sl_rec_meta *)(const void *)rec;
    return (uint64_t)m->exp_lo | ((uint64_t)m->exp_hi << 32);
}
static inline void sl_rec_set_expiry(uint64_t *rec, uint64_t tick)
{
    sl_rec_meta *m = sl_rec_meta_of(rec);
    m->exp_lo = (uint32_t)tick;
    m->exp_hi = (uint8_t)(tick >> 32);
}
static inline uint32_t sl_key_units(size_t keylen) { return (uint32_t)((keylen + 7) / 8); }
static inline uint64_t *sl_rec_state(uint64_t *rec) { return rec + 1; }
static inline size_t sl_rec_units(const sl_shard *sh, uint32_t slot)
{
    return sh->pages[sl_slot_page(slot)].units;
}
/* The key bytes of the record `slot` refers to: the record's last units. */
static inline unsigned char *sl_rec_key(const sl_shard *sh, uint32_t slot, uint64_t *rec)
{
    size_t key_units = sl_key_units(sl_rec_meta_of(rec)->keylen);
    return (unsigned char *)(rec + sl_rec_units(sh, slot) - key_units);
}
/* The state's size in bytes, from the record's size and key length. */
size_t sl_shard_record_state_size(const sl_shard *sh, uint32_t slot);

/* Does a record of `units` with this metadata hold a state of this kind
 * (sl_rec_kind_of) and size? */
static inline bool sl_rec_shape_fits(const sl_rec_meta *m, uint32_t units, unsigned kind,
                                     size_t size)
{
    return (m->flags & SL_REC_ALGO_MASK) == kind &&
           ((size_t)units - 1 - sl_key_units(m->keylen)) * 8 == size;
}

/* Does the stored record fit this limit (same kind, same state size)? */
static inline bool sl_rec_compatible(const sl_shard *sh, uint32_t v, const sl_limit *l, size_t size)
{
    const sl_page *pg = &sh->pages[sl_slot_page(v)];
    const sl_rec_meta *m = sl_rec_meta_of(pg->base + (size_t)sl_slot_index(v) * pg->units);
    return sl_rec_shape_fits(m, pg->units, sl_rec_kind_of(l), size);
}

/* Converts expires_at nanoseconds to a tick (rounded up, saturating). */
static inline uint64_t sl_store_tick_of(int64_t expires_ns)
{
    if (expires_ns <= 0)
        return 0;
    uint64_t t = ((uint64_t)expires_ns + ((UINT64_C(1) << SL_TICK_SHIFT) - 1)) >> SL_TICK_SHIFT;
    return t >= SL_TICK_NEVER ? SL_TICK_NEVER : t;
}

/* The tick that has fully passed at `now`: a record whose tick is at most
 * this is equivalent to "never seen". */
static inline uint64_t sl_now_tick(int64_t now) { return now <= 0 ? 0 : (uint64_t)now >> SL_TICK_SHIFT; }

static inline bool sl_tick_expired(uint64_t tick, uint64_t now_tick)
{
    return tick != SL_TICK_NEVER && tick <= now_tick;
}

/* Could the shard take `extra` bytes more without passing its budget? */
static inline bool sl_within_budget(const sl_shard *sh, size_t extra)
{
    return extra <= sh->budget && sh->used <= sh->budget - extra;
}

/* ---- checks and time, for every operation ---- */

/* Is sz a state size a limit can have (8-aligned, under the largest
 * record)? */
static inline bool sl_state_size_ok(size_t sz)
{
    return sz - 1 < (size_t)UINT16_MAX * 8 * 64 && sz % 8 == 0;
}

/* Validates a key and a limit; sets *size to the state size. */
static inline int sl_check_key_limit(const sl_store *s, const void *key, size_t keylen,
                                     const sl_limit *l, size_t *size)
{
    if (!l)
        return SL_ERR_ARGUMENT;
    if (!key || keylen == 0 || keylen > s->max_key_len)
        return SL_ERR_KEY;
    if ((unsigned)l->algorithm >= SL_ALGORITHM_COUNT)
        return SL_ERR_ALGORITHM;
    size_t sz = l->state_size;
    if (!sl_state_size_ok(sz))
        return SL_ERR_LIMIT;
    *size = sz;
    return SL_OK;
}

/* The time an operation is decided at: `now`, or the latest time a take
 * has used when `now` is older (see sl_store.clock). Called with the key
 * locked (its group, its record or its shard): the take before on that key
 * raised the clock before it let go, so this one reads that time or a
 * later one. */
static inline int64_t sl_store_now(sl_store *s, int64_t now)
{
    if (now < 0 || now > SL_TIME_MAX)
        return now; /* invalid: the algorithm says so */
    int64_t c = atomic_load_explicit(&s->clock, memory_order_relaxed);
    while (now > c)
        if (atomic_compare_exchange_weak_explicit(&s->clock, &c, now, memory_order_relaxed,
                                                  memory_order_relaxed))
            return now;
    return c;
}

/* ---- the arena (arena.c) ---- */

/* `pages` contiguous pages of SL_PAGE_BYTES (not zeroed), at most a
 * chunk's worth; NULL when memory is short. Runs of several pages (an
 * index table) are given back page by page. */
void *sl_arena_get(sl_arena *a, size_t pages);
/* Gives one page back to the arena's free list. */
void sl_arena_page_free(sl_arena *a, void *p);
/* Unmaps every chunk; the arena's pages must not be used afterwards. */
void sl_arena_free(sl_arena *a);

/* ---- pages and the index (store.c) ---- */

/* Gives a page's memory back: to the arena when it is one of its pages (a
 * small record page), else to malloc. */
void sl_page_release(sl_shard *sh, sl_page *pg);
/* A page of `units` with room, of any lane (`lane`'s own first), or
 * SL_PAGE_NONE. */
uint16_t sl_partial_any(const sl_shard *sh, unsigned lane, uint32_t units);
/* Takes a page off its lane's list of pages with room. */
void sl_partial_unlink(sl_shard *sh, uint16_t id);
/* A record of `units` without evicting (see store.c); false when there is
 * no room within budget, *oom when malloc itself failed. */
bool sl_rec_alloc_noevict(sl_shard *sh, uint32_t units, unsigned lane, bool grow,
                          uint32_t *slot_ref, bool *oom);

/* Finds the key in the shard's index; returns its slot position, or -1.
 * Inlined in store.c; the other files call its out-of-line copy. */
long sl_index_find(const sl_shard *sh, uint64_t h, const void *key, size_t keylen);
/* Rebuilds the index with `ngroups` groups from the record pages.
 * SL_OK, or SL_ERR_NOMEM with the index as it was. */
int sl_index_rebuild(const sl_store *s, sl_shard *sh, uint32_t ngroups);
/* Most slots a table of ngroups may have in use (full or deleted): 7/8. */
static inline uint32_t sl_index_limit(uint32_t ngroups) { return ngroups * 7; }
/* The bytes an index of ngroups takes (what the shard counts for it): its
 * arena pages, or its malloc'd slots when `pages` is 0. */
static inline size_t sl_index_bytes(uint32_t ngroups, size_t pages)
{
    return pages ? pages * SL_PAGE_BYTES : (size_t)ngroups * SL_GROUP_SLOTS * sizeof(uint32_t);
}

/* ---- keys in a locked shard (store.c) ---- */

/*
 * Stores a new key (absent from the index) with a copy of `state` (size
 * bytes) of record kind `kind`, expiring at `tick`, with `extra_flags`
 * (SL_REC_PINNED) in its meta; the caller holds the shard's lock. Returns
 * SL_OK and the slot value via *out_ref (when not NULL), or SL_ERR_NOMEM
 * with nothing changed but evictions.
 */
int sl_shard_insert(sl_store *s, sl_shard *sh, uint64_t h, const void *key, size_t keylen,
                    unsigned kind, const void *state, size_t size, uint64_t tick,
                    uint8_t extra_flags, int64_t now, uint32_t *out_ref);

/*
 * Inserts or replaces `key` with a copy of `state` (size bytes) of record
 * kind `kind` (an algorithm, with SL_REC_CARRIED for a carried state),
 * expiring at expires_ns; the caller holds the shard's lock. Used by the
 * snapshot loader. Returns SL_OK or SL_ERR_NOMEM.
 */
int sl_shard_put(sl_store *s, sl_shard *sh, uint64_t h, const void *key, size_t keylen,
                 unsigned kind, const void *state, size_t size, int64_t expires_ns,
                 int64_t now);

/* Removes the key at slot position pos: index slot and record. */
void sl_shard_remove(sl_shard *sh, size_t pos);

/* The state a take under *l starts from when the key's record (slot value
 * v) holds another kind or size: sl_state_adopt into scratch. */
int sl_rec_adopt(const sl_shard *sh, uint32_t v, const sl_limit *l, void *scratch, int64_t now);

/* ---- reclaim, eviction, compaction (reclaim.c) ---- */

/* Looks at up to n records from where the last sweep stopped and reclaims
 * those that are "never seen" again. Returns how many it reclaimed. */
size_t sl_shard_sweep(const sl_store *s, sl_shard *sh, int64_t now, size_t n);
/* Evicts one state, preferably from pages of want_units (0: any); false
 * when nothing could be evicted. */
bool sl_evict_one(sl_store *s, sl_shard *sh, uint32_t want_units, int64_t now);
/* Frees one whole page of records; false when no memory came free. */
bool sl_evict_page(sl_store *s, sl_shard *sh, int64_t now);
/* Gives memory back after many keys went: drains sparse pages, shrinks a
 * mostly empty index. Bounded work. */
void sl_shard_compact(sl_store *s, sl_shard *sh, int64_t now);

#pragma GCC visibility pop

#endif /* SL_STORE_LAYOUT_H */
