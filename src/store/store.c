/*
 * store.c: the concurrent keyed store's hot path: the hash, the locks and
 * the readers, the index, the record pages, and the operations on one key
 * (take, acquire, peek, inspect, prefetch, reset, release, refund, charge),
 * kept in one file so that the compiler inlines a take into one straight
 * path. The layout is drawn in store_layout.h and explained in
 * docs/store.md; the cold parts are in arena.c, reclaim.c, take_many.c,
 * snapshot.c and debug.c. Allocation goes through common/alloc.h.
 *
 * Order of this file: hash, locks and readers, ticks, records and pages,
 * the index, inserts, the public operations.
 *
 * Names. Functions are named by what they act on: sl_shard_* change a shard
 * whose lock the caller holds (sl_shard_insert stores a new key,
 * sl_shard_remove drops one), sl_index_*, sl_rec_*, sl_page_* and
 * sl_partial_* the index, the records and the pages, sl_reader_* a
 * thread's reader slot. A take's own functions are named by their role:
 *
 *   sl_store_take_common    the entry of sl_store_take and sl_store_acquire:
 *                           checks, hash, then one of the two paths
 *   sl_store_take_reader    the reader's path, without the shard's lock: a
 *                           key that is there, of the limit's shape
 *   sl_store_take_locked    the locked path, under the shard's lock, when
 *                           the reader's path cannot decide
 *   sl_store_take_insert    the locked path's cold half: a new key, or a
 *                           state of another shape, decided on a scratch
 *                           state and then stored (sl_shard_insert)
 *   sl_store_decide_record  the decision in a record, on the reader's path
 *   sl_store_decide_state   the decision on a state in place (algorithm or
 *                           lease), on both paths
 *   sl_store_decide_scratch the decision on a scratch state, before
 *                           anything is stored
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "algo/algo.h"
#include "algo/gcra.h"
#include "store/store_debug.h"
#include "store/store_layout.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Records the amortized reclaim looks at on each insert (nginx's limit_req
 * looks at two or three states per request for the same reason). */
#define SL_SWEEP_PER_INSERT 2u

/* ---- hash ---- */

static inline uint64_t sl_fold(uint64_t a, uint64_t b)
{
    unsigned __int128 m = (unsigned __int128)a * b;
    return (uint64_t)m ^ (uint64_t)(m >> 64);
}

static inline uint64_t sl_load64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint64_t sl_load32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Loads 0..8 bytes into a word with fixed-size loads only (a
 * variable-length memcpy would be a call): two overlapping loads cover
 * 4..8 bytes, three single bytes cover 1..3. Every byte lands somewhere,
 * so two strings of the same length n < 8 are equal iff their words are. */
static inline uint64_t sl_load_small(const unsigned char *p, size_t n)
{
    if (n >= 4)
        return sl_load32(p) | (sl_load32(p + n - 4) << 32);
    if (n == 0)
        return 0;
    return (uint64_t)p[0] | ((uint64_t)p[n / 2] << 8) | ((uint64_t)p[n - 1] << 16);
}

/*
 * The hash follows the design of wyhash (Wang Yi, github.com/wangyi-fudan/
 * wyhash, public domain under The Unlicense): its three constants are
 * wyhash's first three primes (_wyp0.._wyp2), and its fold, a
 * 64x64->128-bit multiply whose halves are xored, is wyhash's mix. The code
 * is our own, written for keys of a few tens of bytes; it does not compute
 * wyhash's values and need not (a hash is seeded per store and never
 * leaves the process).
 */
#define SL_K1 UINT64_C(0xa0761d6478bd642f)
#define SL_K2 UINT64_C(0xe7037ed1a0b428db)
#define SL_K3 UINT64_C(0x8ebc6af09c88c6e3)

/*
 * Folds 16 bytes at a time through a 64x64->128-bit multiply, whose high
 * and low halves depend on every input bit; the seed enters every round so
 * that collisions cannot be computed without it. The last 1..16 bytes are
 * read as overlapping words, and the length is mixed in, so that keys
 * whose words coincide but whose lengths differ still hash apart.
 */
inline __attribute__((always_inline)) uint64_t sl_store_hash(const void *key, size_t len,
                                                              uint64_t seed)
{
    const unsigned char *p = key;
    uint64_t h = seed ^ SL_K3;
    size_t n = len;
    while (n > 16) {
        h = sl_fold(sl_load64(p) ^ SL_K1 ^ h, sl_load64(p + 8) ^ SL_K2 ^ seed);
        p += 16;
        n -= 16;
    }
    uint64_t a, b;
    if (n > 8) {
        a = sl_load64(p);
        b = sl_load64(p + n - 8);
    } else {
        a = sl_load_small(p, n);
        b = 0;
    }
    h = sl_fold(a ^ SL_K1 ^ h, b ^ SL_K2 ^ seed ^ (uint64_t)len);
    return sl_fold(h ^ SL_K3, SL_K1 ^ seed);
}

/* Are the n bytes at a and b equal? Word compares, no call: keys are short
 * and the compare is on every take's path. */
static inline __attribute__((always_inline)) bool sl_key_equal(const unsigned char *a, const unsigned char *b, size_t n)
{
    if (n < 8)
        return sl_load_small(a, n) == sl_load_small(b, n);
    if (n <= 16) /* the first 8 bytes and the last 8, which may overlap */
        return ((sl_load64(a) ^ sl_load64(b)) | (sl_load64(a + n - 8) ^ sl_load64(b + n - 8))) == 0;
    for (size_t i = 0; i + 8 < n; i += 8)
        if (sl_load64(a + i) != sl_load64(b + i))
            return false;
    return sl_load64(a + n - 8) == sl_load64(b + n - 8);
}



/* ---- locks ---- */

static inline void sl_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* The lock was held: spin on a plain load (no line ping-pong) until it
 * looks free, then try again. */
void sl_spin_wait(sl_spin *l)
{
    do {
        unsigned spins = 0;
        while (atomic_load_explicit(&l->held, memory_order_relaxed)) {
            if (++spins < 64)
                sl_cpu_relax();
            else
                sched_yield();
        }
    } while (atomic_exchange_explicit(&l->held, 1, memory_order_seq_cst));
}

/*
 * ---- readers: takes that run without the shard's lock ----
 *
 * A take on a key that is there changes only its record. It runs without
 * the shard's lock, so that takes on different keys write no line in
 * common (a lock's line written by every take of a shard moves between
 * cores on nearly every take; see docs/store.md):
 *
 *   reader (a take)                      holder of the shard's lock
 *   announce: my slot = shard            take the spin lock (exchange)
 *   is the spin lock held?               wait while any slot = shard
 *     no:  lock the key (its home group,    epoch += 1
 *          or its record), find the
 *          record, take, unlock the key
 *     yes: leave, take the lock instead
 *   my slot = none                       change anything; release
 *
 * Both sides write, then read what the other wrote, all sequentially
 * consistent: either the reader sees the lock held, or the holder sees the
 * reader and waits for it. So nothing a reader looks at (the index, the
 * page table, a record's place and key) changes under it, and no memory
 * is freed while it may be read. Readers of one shard exclude each other
 * per key only (see sl_locks_records); the keys' lock bits are clear
 * whenever the shard lock is held, as its holder waited for the readers to
 * leave.
 *
 * Slots are process-wide, one cache line each, one per thread that has
 * taken (given back when it exits); a thread that finds none free takes
 * the lock every time.
 */
#define SL_READERS 256u

typedef struct sl_reader {
    _Alignas(64) _Atomic(sl_shard *) shard; /* the shard it reads, or NULL */
    atomic_bool taken;                       /* the slot belongs to a thread */
} sl_reader;

static sl_reader sl_readers[SL_READERS];
static atomic_uint sl_readers_used; /* slots handed out at least once: [0, used) */
static pthread_key_t sl_reader_key;
static bool sl_reader_key_ok;
static pthread_once_t sl_reader_once = PTHREAD_ONCE_INIT;
static sl_reader sl_reader_none; /* the slot of a thread that got none */
static _Thread_local sl_reader *sl_reader_mine __attribute__((tls_model("initial-exec")));

/* The record this thread's last take went to: the next take of that key
 * goes straight to it, past the index and the page table, while the
 * shard's epoch says no lock holder has come since (nothing has moved). */
typedef struct sl_last_take {
    uint64_t store; /* sl_store.id */
    const sl_shard *sh;
    uint64_t h, epoch;
    uint64_t *rec;
    uint32_t units;
} sl_last_take;
static _Thread_local sl_last_take sl_last __attribute__((tls_model("initial-exec")));
static atomic_uint_least64_t sl_store_ids;

/* At the thread's exit: the slot goes back; a take the thread's later exit
 * handlers make takes the shard's lock. */
static void sl_reader_exit(void *p)
{
    sl_reader *r = p;
    sl_reader_mine = &sl_reader_none;
    atomic_store(&r->shard, NULL);
    atomic_store(&r->taken, false);
}

static void sl_reader_init(void)
{
    sl_reader_key_ok = pthread_key_create(&sl_reader_key, sl_reader_exit) == 0;
}

/* This thread's slot, claimed on its first take; NULL when none is free. */
static __attribute__((noinline)) sl_reader *sl_reader_claim(void)
{
    sl_reader_mine = &sl_reader_none;
    pthread_once(&sl_reader_once, sl_reader_init);
    if (!sl_reader_key_ok)
        return NULL;
    for (unsigned i = 0; i < SL_READERS; i++) {
        bool was = false;
        if (atomic_load_explicit(&sl_readers[i].taken, memory_order_relaxed) ||
            !atomic_compare_exchange_strong(&sl_readers[i].taken, &was, true))
            continue;
        if (pthread_setspecific(sl_reader_key, &sl_readers[i]) != 0) {
            atomic_store(&sl_readers[i].taken, false);
            return NULL;
        }
        unsigned used = atomic_load(&sl_readers_used);
        while (used <= i && !atomic_compare_exchange_weak(&sl_readers_used, &used, i + 1))
            ;
        sl_reader_mine = &sl_readers[i];
        return sl_reader_mine;
    }
    return NULL;
}

static inline sl_reader *sl_reader_self(void)
{
    sl_reader *r = sl_reader_mine;
    if (__builtin_expect(r != NULL, 1))
        return r == &sl_reader_none ? NULL : r;
    return sl_reader_claim();
}

/* Enters a shard as its reader: true when its lock is not held (else the
 * caller must take the lock instead). sl_reader_leave leaves, either way. */
static inline bool sl_reader_enter(sl_reader *me, sl_shard *sh)
{
    atomic_store(&me->shard, sh);
    return __builtin_expect(!atomic_load(&sh->lock.held), 1);
}

static inline void sl_reader_leave(sl_reader *me)
{
    atomic_store_explicit(&me->shard, NULL, memory_order_release);
}

void sl_shard_lock(sl_shard *sh)
{
    sl_spin_lock(&sh->lock);
    unsigned used = atomic_load(&sl_readers_used);
    for (unsigned i = 0; i < used; i++) {
        unsigned spins = 0;
        while (atomic_load(&sl_readers[i].shard) == sh) {
            if (++spins < 64)
                sl_cpu_relax();
            else
                sched_yield(); /* the reader may have been preempted */
        }
    }
    atomic_store_explicit(&sh->epoch, atomic_load_explicit(&sh->epoch, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* A group's lock: the always-zero bit 24 of its first slot (see the slot
 * layout in store_layout.h). A reader takes the lock of its key's home
 * group before it looks for the key, so that takes on one key exclude each
 * other. The group's line is the first a take needs, and was prefetched as
 * it started: the lock costs no miss of its own, and it is taken before
 * the record's address is known, so that the record's miss does not hold
 * up the next take's first loads (a locked instruction does: see
 * docs/store.md). Two keys with the same home group share the lock. */

static inline uint32_t *sl_group_lock(sl_shard *sh, uint64_t h)
{
    uint32_t *w = sh->slots + (size_t)sl_home_group(h, sh->ngroups) * SL_GROUP_SLOTS;
    uint32_t v = __atomic_load_n(w, __ATOMIC_RELAXED) & ~SL_SLOT_LOCK;
    unsigned spins = 0;
    while (!__atomic_compare_exchange_n(w, &v, v | SL_SLOT_LOCK, true, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED)) {
        v &= ~SL_SLOT_LOCK;
        if (++spins < 64)
            sl_cpu_relax();
        else
            sched_yield();
    }
    return w;
}

/* Lets the group go: its first slot has not changed meanwhile (only lock
 * holders of the shard change slots, and none is in). */
static inline void sl_group_unlock(uint32_t *w)
{
    __atomic_store_n(w, __atomic_load_n(w, __ATOMIC_RELAXED) & ~SL_SLOT_LOCK, __ATOMIC_RELEASE);
}

/*
 * In a small shard a group's line holds the slots of many keys, which
 * other threads' takes lock as well: that line would move between cores
 * as the shard lock's did. The records of a small shard stay in cache, so
 * there a reader locks the record instead, with a bit in its meta word: the
 * key's own line, which the take writes anyway. (In a large shard the
 * record is a cache miss, and a locked instruction on it would hold up the
 * next take's first loads until it arrives.) The choice follows the
 * shard's index size, which only the shard's lock holder changes: all the
 * readers of a shard lock the same way.
 */
#define SL_RECORD_LOCK_GROUPS 256u /* 8 KiB of index: some 1 800 keys a shard */

static inline bool sl_locks_records(const sl_shard *sh) { return sh->ngroups <= SL_RECORD_LOCK_GROUPS; }

/* A record's lock bit, in its meta word (flags are bits 40-47). */
#define SL_META_LOCKED ((uint64_t)SL_REC_LOCKED << 40)

/* Locks a record: sets its lock bit, waiting while another reader holds
 * it. Returns the meta word (bit clear). */
static inline uint64_t sl_rec_lock(uint64_t *rec)
{
    uint64_t m = __atomic_load_n(rec, __ATOMIC_RELAXED);
    unsigned spins = 0;
    for (;;) {
        if (!(m & SL_META_LOCKED)) {
            if (__atomic_compare_exchange_n(rec, &m, m | SL_META_LOCKED, true, __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED))
                return m;
        } else {
            if (++spins < 64)
                sl_cpu_relax();
            else
                sched_yield();
            m = __atomic_load_n(rec, __ATOMIC_RELAXED);
        }
    }
}

/* A meta word with its expiry (the low 40 bits: exp_lo, exp_hi) set. */
#define SL_META_EXPIRY ((UINT64_C(1) << 40) - 1)
static inline uint64_t sl_meta_word_expiring(uint64_t word, uint64_t tick)
{
    return (word & ~SL_META_EXPIRY) | tick;
}

/* ---- records and pages ---- */

size_t sl_shard_record_state_size(const sl_shard *sh, uint32_t slot)
{
    uint64_t *rec = sl_shard_record(sh, slot);
    return (sl_rec_units(sh, slot) - 1 - sl_key_units(sl_rec_meta_of(rec)->keylen)) * 8;
}

/*
 * Lanes. Records two threads write must not share a cache line: each take
 * writes its record, and a line that two cores write moves between their
 * caches on every take, at the cost of a miss: two threads whose keys were
 * inserted in turns, so that most lines hold records of both, scale much
 * worse than in stores of their own (bench_store's threads figures, in
 * docs/benchmarks.md). So a shard keeps a list of pages with room
 * per lane, and a thread inserts into pages of its lane: lanes are handed
 * out in turn, modulo SL_LANES, as threads first insert. Records inserted
 * by different threads, of any SL_LANES threads in a row, sit in different
 * pages. When a key's takes come from the thread that inserted it (a
 * connection's keys, a worker's tenants), no line is written by two
 * threads.
 *
 * The price is memory: a shard may hold a page with room per lane and
 * record size instead of one (16 KiB each), so up to SL_LANES - 1 pages
 * more, and compaction keeps a page per lane. At the cap, an insert takes
 * room in another lane's page before a new page is allowed to push the
 * shard over its budget, so lanes never cause an eviction.
 */
static atomic_uint sl_lanes_handed;
static _Thread_local unsigned sl_lane_mine; /* the thread's lane + 1; 0 until its first insert */

static unsigned sl_lane_self(void)
{
    if (!sl_lane_mine)
        sl_lane_mine =
            atomic_fetch_add_explicit(&sl_lanes_handed, 1, memory_order_relaxed) % SL_LANES + 1;
    return sl_lane_mine - 1;
}

void sl_page_release(sl_shard *sh, sl_page *pg)
{
    if (pg->units <= SL_SMALL_MAX_UNITS)
        sl_arena_page_free(sh->arena, pg->base);
    else
        sl_free(pg->base);
}

uint16_t sl_partial_any(const sl_shard *sh, unsigned lane, uint32_t units)
{
    for (unsigned i = 0; i < SL_LANES; i++) {
        uint16_t id = sh->partial[(lane + i) % SL_LANES][units];
        if (id != SL_PAGE_NONE)
            return id;
    }
    return SL_PAGE_NONE;
}

void sl_partial_unlink(sl_shard *sh, uint16_t id)
{
    sl_page *pg = &sh->pages[id];
    if (pg->prev != SL_PAGE_NONE)
        sh->pages[pg->prev].next = pg->next;
    else
        sh->partial[pg->lane][pg->units] = pg->next;
    if (pg->next != SL_PAGE_NONE)
        sh->pages[pg->next].prev = pg->prev;
    pg->next = pg->prev = SL_PAGE_NONE;
}

static void sl_partial_push(sl_shard *sh, uint16_t id)
{
    sl_page *pg = &sh->pages[id];
    pg->prev = SL_PAGE_NONE;
    pg->next = sh->partial[pg->lane][pg->units];
    if (pg->next != SL_PAGE_NONE)
        sh->pages[pg->next].prev = id;
    sh->partial[pg->lane][pg->units] = id;
}

/*
 * Gets a free page id, growing the page table when needed (within budget,
 * which must leave `then` bytes for the page itself). Returns SL_PAGE_NONE
 * when the budget or the id space is exhausted or malloc fails.
 */
static uint16_t sl_page_id_get(sl_shard *sh, size_t then, bool *oom)
{
    *oom = false;
    if (sh->free_pages == SL_PAGE_NONE) {
        if (sh->pages_len >= SL_MAX_PAGES)
            return SL_PAGE_NONE;
        uint32_t len = sh->pages_len ? sh->pages_len * 2 : 8;
        if (len > SL_MAX_PAGES)
            len = SL_MAX_PAGES;
        size_t extra = (size_t)(len - sh->pages_len) * sizeof(sl_page);
        if (!sl_within_budget(sh, extra + then))
            return SL_PAGE_NONE;
        sl_page *np = sl_realloc(sh->pages, (size_t)len * sizeof(sl_page));
        if (!np) {
            *oom = true;
            return SL_PAGE_NONE;
        }
        sh->pages = np;
        for (uint32_t i = len; i-- > sh->pages_len;) {
            memset(&np[i], 0, sizeof np[i]);
            np[i].next = sh->free_pages;
            sh->free_pages = (uint16_t)i;
        }
        sh->used += extra;
        sh->pages_len = len;
    }
    return sh->free_pages;
}

/*
 * A new page for records of `units` in `lane` (a page of its own for a
 * large record), within budget. Returns its id, or SL_PAGE_NONE when the
 * budget or the page ids are exhausted; *oom says malloc itself failed.
 */
static uint16_t sl_page_new(sl_shard *sh, uint32_t units, unsigned lane, bool *oom)
{
    bool small = units <= SL_SMALL_MAX_UNITS;
    size_t bytes = small ? SL_PAGE_BYTES : (size_t)units * 8;
    if (!sl_within_budget(sh, bytes))
        return SL_PAGE_NONE;
    uint16_t id = sl_page_id_get(sh, bytes, oom);
    if (id == SL_PAGE_NONE)
        return SL_PAGE_NONE;
    uint64_t *base = small ? sl_arena_get(sh->arena, 1) : sl_malloc(bytes);
    if (!base) {
        *oom = true;
        return SL_PAGE_NONE;
    }
    sl_page *pg = &sh->pages[id];
    sh->free_pages = pg->next;
    pg->base = base;
    pg->units = units;
    pg->cap = (uint16_t)(small ? SL_PAGE_UNITS / units : 1);
    pg->live = 0;
    pg->bump = 0;
    pg->free_head = 0;
    pg->next = pg->prev = SL_PAGE_NONE;
    pg->lane = (uint8_t)lane;
    sh->used += bytes;
    if (small)
        sl_partial_push(sh, id);
    return id;
}

/*
 * Allocates a record of `units` 8-byte units without evicting: from a page
 * of that size with room in `lane`, else (when `grow`) from a new page of
 * the lane within budget, else from a page with room in another lane (see
 * "lanes"). Returns true and sets *slot_ref (page << 9 | index) on
 * success; *oom says that malloc itself failed (as opposed to the budget
 * being full).
 */
bool sl_rec_alloc_noevict(sl_shard *sh, uint32_t units, unsigned lane, bool grow,
                          uint32_t *slot_ref, bool *oom)
{
    *oom = false;
    bool small = units <= SL_SMALL_MAX_UNITS;
    uint16_t id = small ? sh->partial[lane][units] : SL_PAGE_NONE;
    if (id == SL_PAGE_NONE && grow)
        id = sl_page_new(sh, units, lane, oom);
    if (id == SL_PAGE_NONE && small && (id = sl_partial_any(sh, lane, units)) != SL_PAGE_NONE)
        *oom = false;
    if (id == SL_PAGE_NONE)
        return false;
    sl_page *pg = &sh->pages[id];
    uint32_t idx;
    if (pg->free_head) {
        idx = pg->free_head - 1u;
        pg->free_head = sl_rec_meta_of(pg->base + (size_t)idx * pg->units)->keylen;
    } else {
        idx = pg->bump++;
    }
    pg->live++;
    if (small && pg->live == pg->cap)
        sl_partial_unlink(sh, id);
    *slot_ref = ((uint32_t)id << 9) | idx;
    return true;
}

/* Returns a record to its page; frees the page when it empties. */
static void sl_rec_free(sl_shard *sh, uint32_t slot_ref)
{
    uint16_t id = (uint16_t)sl_slot_page(slot_ref);
    uint32_t idx = sl_slot_index(slot_ref);
    sl_page *pg = &sh->pages[id];
    uint64_t *rec = pg->base + (size_t)idx * pg->units;
    bool small = pg->units <= SL_SMALL_MAX_UNITS;
    if (pg->live == 1) {
        /* The page empties: give its memory back, so that memory follows
         * the active keys. */
        if (small && pg->live < pg->cap)
            sl_partial_unlink(sh, id);
        sh->used -= small ? SL_PAGE_BYTES : (size_t)pg->units * 8;
        sl_page_release(sh, pg);
        memset(pg, 0, sizeof *pg);
        pg->next = sh->free_pages;
        sh->free_pages = id;
        return;
    }
    sl_rec_meta *m = sl_rec_meta_of(rec);
    m->flags = 0;
    m->keylen = pg->free_head;
    pg->free_head = (uint16_t)(idx + 1);
    if (pg->live == pg->cap)
        sl_partial_push(sh, id);
    pg->live--;
}

/* ---- the index ---- */

/* Does the record, of `units`, hold this key? */
static inline __attribute__((always_inline)) bool sl_rec_key_is(const uint64_t *rec, uint32_t units,
                                                                 const void *key, size_t keylen)
{
    return sl_rec_meta_load(rec).keylen == keylen &&
           sl_key_equal((const unsigned char *)(rec + units - sl_key_units(keylen)), key, keylen);
}

static inline __attribute__((always_inline)) bool sl_rec_matches(const sl_shard *sh, uint32_t slot, const void *key, size_t keylen)
{
    const sl_page *pg = &sh->pages[sl_slot_page(slot)];
    return sl_rec_key_is(pg->base + (size_t)sl_slot_index(slot) * pg->units, pg->units, key, keylen);
}

/* Which slots of a group carry `tag` (bit i for slot i), and, in *empty,
 * which are empty: two compares of four slots each with SSE2. */
static inline unsigned sl_group_match(const uint32_t *grp, uint32_t tag, unsigned *empty)
{
#if defined(__SSE2__)
    /* Read as words, atomically: a reader may be setting the lock bit of
     * the group's first slot meanwhile. The lock bit is not part of what
     * a slot holds. */
    typedef uint64_t __attribute__((may_alias)) sl_word;
    const sl_word *w = (const sl_word *)(const void *)grp;
    __m128i nolock = _mm_set1_epi32((int)~SL_SLOT_LOCK);
    __m128i lo = _mm_and_si128(_mm_set_epi64x((long long)__atomic_load_n(&w[1], __ATOMIC_RELAXED),
                                              (long long)__atomic_load_n(&w[0], __ATOMIC_RELAXED)),
                               nolock);
    __m128i hi = _mm_and_si128(_mm_set_epi64x((long long)__atomic_load_n(&w[3], __ATOMIC_RELAXED),
                                              (long long)__atomic_load_n(&w[2], __ATOMIC_RELAXED)),
                               nolock);
    __m128i t = _mm_set1_epi32((int)tag), z = _mm_setzero_si128();
    unsigned m = (unsigned)_mm_movemask_ps(_mm_castsi128_ps(
                     _mm_cmpeq_epi32(_mm_srli_epi32(lo, SL_SLOT_TAG_SHIFT), t))) |
                 (unsigned)_mm_movemask_ps(_mm_castsi128_ps(
                     _mm_cmpeq_epi32(_mm_srli_epi32(hi, SL_SLOT_TAG_SHIFT), t)))
                     << 4;
    *empty = (unsigned)_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(lo, z))) |
             (unsigned)_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(hi, z))) << 4;
    return m;
#else
    unsigned m = 0, e = 0;
    for (unsigned i = 0; i < SL_GROUP_SLOTS; i++) {
        uint32_t v = __atomic_load_n(&grp[i], __ATOMIC_RELAXED) & ~SL_SLOT_LOCK;
        m |= (unsigned)((v >> SL_SLOT_TAG_SHIFT) == tag) << i;
        e |= (unsigned)(v == SL_SLOT_EMPTY) << i;
    }
    *empty = e;
    return m;
#endif
}

/* Starts loading the key's home group of the index without taking the lock,
 * so that a take's first cache miss starts as early as it can (a take whose
 * miss starts after the lock is taken does not overlap with the one before;
 * see docs/store.md). The index may be being replaced meanwhile: its place
 * is read atomically, and a prefetch of a stale place is harmless. */
static inline void sl_index_prefetch(const sl_shard *sh, uint64_t h)
{
    const uint32_t *slots = __atomic_load_n(&sh->slots, __ATOMIC_RELAXED);
    uint32_t ngroups = __atomic_load_n(&sh->ngroups, __ATOMIC_RELAXED);
    if (ngroups)
        __builtin_prefetch(slots + (size_t)sl_home_group(h, ngroups) * SL_GROUP_SLOTS);
}

/* Finds the key; returns its slot position, or -1. Always inlined in this
 * file (the other files call the out-of-line copy). */
inline __attribute__((always_inline)) long sl_index_find(const sl_shard *sh, uint64_t h,
                                                          const void *key, size_t keylen)
{
    if (!sh->ngroups)
        return -1;
    uint32_t tag = sl_tag_of(h);
    uint32_t g = sl_home_group(h, sh->ngroups);
    for (uint32_t probes = 0; probes < sh->ngroups; probes++) {
        const uint32_t *grp = sh->slots + (size_t)g * SL_GROUP_SLOTS;
        unsigned empty;
        for (unsigned m = sl_group_match(grp, tag, &empty); m; m &= m - 1) {
            unsigned i = (unsigned)__builtin_ctz(m);
            if (sl_rec_matches(sh, __atomic_load_n(&grp[i], __ATOMIC_RELAXED), key, keylen))
                return (long)g * SL_GROUP_SLOTS + i;
        }
        if (empty)
            return -1;
        g = g + 1 == sh->ngroups ? 0 : g + 1;
    }
    return -1;
}

/* Places a full slot value in the first free slot of its probe sequence;
 * the caller has made room. */
static void sl_index_place(uint32_t *slots, uint32_t ngroups, uint64_t h, uint32_t v, uint32_t *tombs)
{
    uint32_t g = sl_home_group(h, ngroups);
    for (;;) {
        uint32_t *grp = slots + (size_t)g * SL_GROUP_SLOTS;
        for (unsigned i = 0; i < SL_GROUP_SLOTS; i++) {
            if (grp[i] <= SL_SLOT_DELETED) {
                if (grp[i] == SL_SLOT_DELETED)
                    (*tombs)--;
                grp[i] = v;
                return;
            }
        }
        g = g + 1 == ngroups ? 0 : g + 1;
    }
}

/* Deletes the slot at pos (not the record). A slot may become empty again
 * only when its group already has an empty slot: then no probe ever went
 * past this group, and no key depends on it being full. */
static void sl_index_erase(sl_shard *sh, size_t pos)
{
    uint32_t *grp = sh->slots + pos / SL_GROUP_SLOTS * SL_GROUP_SLOTS;
    bool empty = false;
    for (unsigned i = 0; i < SL_GROUP_SLOTS; i++)
        empty |= grp[i] == SL_SLOT_EMPTY;
    if (empty) {
        sh->slots[pos] = SL_SLOT_EMPTY;
    } else {
        sh->slots[pos] = SL_SLOT_DELETED;
        sh->tombs++;
    }
    sh->count--;
}

/*
 * Rebuilds the index with `ngroups` groups (the same number: drops the
 * tombstones in place, without allocating) from the record pages, which
 * hold every key: walking them is sequential memory, where walking the old
 * index would jump to a random record for each key's hash.
 */
/* Index tables of at least a quarter page, and at most a chunk, take whole
 * arena pages (huge pages, as the records'); smaller ones come from malloc. */
static size_t sl_index_pages(uint32_t ngroups)
{
    size_t bytes = (size_t)ngroups * SL_GROUP_SLOTS * sizeof(uint32_t);
    if (bytes < SL_PAGE_BYTES / 4 || bytes > SL_CHUNK_BYTES)
        return 0;
    return (bytes + SL_PAGE_BYTES - 1) / SL_PAGE_BYTES;
}

static void sl_index_free(sl_shard *sh)
{
    if (sh->slots_pages)
        for (size_t i = 0; i < sh->slots_pages; i++)
            sl_arena_page_free(sh->arena, (char *)sh->slots + i * SL_PAGE_BYTES);
    else
        sl_free(sh->slots);
}

int sl_index_rebuild(const sl_store *s, sl_shard *sh, uint32_t ngroups)
{
    size_t n = (size_t)ngroups * SL_GROUP_SLOTS;
    uint32_t *slots = sh->slots;
    size_t pages = sh->slots_pages;
    if (ngroups != sh->ngroups) {
        pages = sl_index_pages(ngroups);
        slots = pages ? sl_arena_get(sh->arena, pages) : NULL;
        if (slots)
            memset(slots, 0, n * sizeof *slots);
        else if ((pages = 0, slots = sl_calloc(n, sizeof *slots)) == NULL)
            return SL_ERR_NOMEM;
    } else {
        memset(slots, 0, n * sizeof *slots);
    }
    uint32_t tombs = 0;
    for (uint32_t id = 0; id < sh->pages_len; id++) {
        const sl_page *pg = &sh->pages[id];
        for (uint32_t idx = 0; pg->base && idx < pg->bump; idx++) {
            uint64_t *rec = pg->base + (size_t)idx * pg->units;
            const sl_rec_meta *m = sl_rec_meta_of(rec);
            if (!(m->flags & SL_REC_LIVE))
                continue;
            const uint64_t *key = rec + pg->units - sl_key_units(m->keylen);
            uint64_t h = sl_store_hash(key, m->keylen, s->seed);
            uint32_t v = (sl_tag_of(h) << SL_SLOT_TAG_SHIFT) | (id << 9) | idx;
            sl_index_place(slots, ngroups, h, v, &tombs);
        }
    }
    if (slots != sh->slots) {
        sh->used -= sl_index_bytes(sh->ngroups, sh->slots_pages);
        sl_index_free(sh);
        sh->used += sl_index_bytes(ngroups, pages);
        /* Atomic: sl_index_prefetch reads them without the lock. */
        __atomic_store_n(&sh->slots, slots, __ATOMIC_RELAXED);
        sh->slots_pages = (uint32_t)pages;
        __atomic_store_n(&sh->ngroups, ngroups, __ATOMIC_RELAXED);
    }
    sh->tombs = 0;
    return SL_OK;
}

/*
 * Makes room in the index for one more key: drops tombstones, or grows by
 * half, or (at the memory cap) evicts a batch and then drops tombstones.
 */
static int sl_index_reserve(sl_store *s, sl_shard *sh, int64_t now)
{
    if (sh->count + sh->tombs < sl_index_limit(sh->ngroups))
        return SL_OK;
    if (sh->tombs && sh->tombs >= sh->count / 4)
        return sl_index_rebuild(s, sh, sh->ngroups); /* amortized: a quarter of the keys were deleted */
    uint32_t ngroups = sh->ngroups < 2 ? 2 : sh->ngroups + sh->ngroups / 2;
    if (ngroups > UINT32_MAX / (SL_GROUP_SLOTS * 8) ||
        sh->count >= SL_MAX_PAGES * (SL_PAGE_UNITS / SL_MIN_UNITS))
        return SL_ERR_NOMEM; /* cannot happen with 15-bit page ids; keeps the sums in range */
    size_t bytes = sl_index_bytes(ngroups, sl_index_pages(ngroups));
    if (!sl_within_budget(sh, bytes) && bytes <= sh->budget / 4) {
        /* At the cap, the index gets its room first (records are most of a
         * shard's bytes): free whole pages of records until the larger table
         * fits. This happens once per growth, and growth stops when the
         * number of keys stops growing, as it does at the cap. */
        while (!sl_within_budget(sh, bytes) && sl_evict_page(s, sh, now))
            ;
    }
    if (sl_within_budget(sh, bytes)) {
        int rc = sl_index_rebuild(s, sh, ngroups);
        if (rc == SL_OK || sh->budget == SIZE_MAX)
            return rc;
    }
    /* The index may not take more than a quarter of the shard (or malloc
     * failed): evict single states, then drop the tombstones they left. */
    uint32_t batch = sh->count / 8 + 1;
    for (uint32_t i = 0; i < batch; i++)
        if (!sl_evict_one(s, sh, 0, now))
            break;
    if (sh->tombs)
        sl_index_rebuild(s, sh, sh->ngroups);
    return sh->count + sh->tombs < sl_index_limit(sh->ngroups) ? SL_OK : SL_ERR_NOMEM;
}

void sl_shard_remove(sl_shard *sh, size_t pos)
{
    uint32_t v = sh->slots[pos];
    sl_index_erase(sh, pos);
    sl_rec_free(sh, v & SL_SLOT_REF_MASK);
}

/*
 * Allocates a record of `units`, evicting at the cap: single states first
 * (bounded), then, if the freed records keep being of another size, one
 * whole page. Returns SL_OK with *ref set, or SL_ERR_NOMEM.
 */
static int sl_rec_alloc(sl_store *s, sl_shard *sh, uint32_t units, int64_t now, uint32_t *ref)
{
    unsigned lane = sl_lane_self();
    for (unsigned attempt = 0; attempt < 64; attempt++) {
        bool oom;
        if (sl_rec_alloc_noevict(sh, units, lane, true, ref, &oom))
            return SL_OK;
        if (oom && sh->budget == SIZE_MAX)
            return SL_ERR_NOMEM; /* malloc failed and there is no cap to evict towards */
        bool freed = attempt < 16 ? sl_evict_one(s, sh, units, now) : false;
        if (!freed && !sl_evict_page(s, sh, now))
            return SL_ERR_NOMEM;
    }
    return SL_ERR_NOMEM;
}

int sl_shard_insert(sl_store *s, sl_shard *sh, uint64_t h, const void *key, size_t keylen,
                    unsigned kind, const void *state, size_t size, uint64_t tick,
                    uint8_t extra_flags, int64_t now, uint32_t *out_ref)
{
    sl_shard_sweep(s, sh, now, SL_SWEEP_PER_INSERT);
    int rc = sl_index_reserve(s, sh, now);
    if (rc != SL_OK)
        return rc;
    uint32_t units = 1 + (uint32_t)(size / 8) + sl_key_units(keylen);
    uint32_t ref;
    rc = sl_rec_alloc(s, sh, units, now, &ref);
    if (rc != SL_OK)
        return rc;
    /* Evictions during the allocation only lower count + tombs, so the
     * room reserved above is still there. */
    uint64_t *rec = sl_shard_record(sh, ref);
    sl_rec_meta *m = sl_rec_meta_of(rec);
    m->flags = (uint8_t)(kind | SL_REC_LIVE | extra_flags);
    m->keylen = (uint16_t)keylen;
    sl_rec_set_expiry(rec, tick);
    memcpy(sl_rec_state(rec), state, size);
    uint64_t *key_words = rec + units - sl_key_units(keylen);
    key_words[sl_key_units(keylen) - 1] = 0; /* padding stays zero */
    memcpy(key_words, key, keylen);
    uint32_t v = ((uint32_t)sl_tag_of(h) << SL_SLOT_TAG_SHIFT) | ref;
    sl_index_place(sh->slots, sh->ngroups, h, v, &sh->tombs);
    sh->count++;
    if (out_ref)
        *out_ref = v;
    return SL_OK;
}

int sl_shard_put(sl_store *s, sl_shard *sh, uint64_t h, const void *key, size_t keylen,
                 unsigned kind, const void *state, size_t size, int64_t expires_ns,
                 int64_t now)
{
    long pos = sl_index_find(sh, h, key, keylen);
    if (pos >= 0)
        sl_shard_remove(sh, (size_t)pos);
    return sl_shard_insert(s, sh, h, key, keylen, kind, state, size,
                           sl_store_tick_of(expires_ns), 0, now, NULL);
}

int sl_rec_adopt(const sl_shard *sh, uint32_t v, const sl_limit *l, void *scratch, int64_t now)
{
    uint64_t *rec = sl_shard_record(sh, v);
    unsigned kind = sl_rec_meta_of(rec)->flags & SL_REC_ALGO_MASK;
    int rc = sl_state_adopt(l, scratch, (sl_algorithm)(kind & ~SL_REC_CARRIED),
                            (kind & SL_REC_CARRIED) != 0, sl_rec_state(rec),
                            sl_shard_record_state_size(sh, v), now);
    /* A state that expires by now's tick is "never seen", whatever its
     * algorithm: a reclaim might as well have dropped it already. */
    if (rc == SL_ERR_WRONGTYPE && sl_rec_expiry(rec) <= sl_store_tick_of(now)) {
        memset(scratch, 0, l->state_size);
        rc = SL_OK;
    }
    return rc;
}

/* ---- the public operations ---- */

static unsigned sl_log2_ceil(unsigned v)
{
    unsigned b = 0;
    while ((1u << b) < v)
        b++;
    return b;
}

sl_status sl_store_new(const sl_store_config *cfg, sl_store **out)
{
    sl_store_config c = {0};
    if (!out)
        return SL_ERR_ARGUMENT;
    *out = NULL;
    if (cfg)
        c = *cfg;
    if (c.max_key_len == 0)
        c.max_key_len = 512;
    if (c.max_key_len > UINT16_MAX || c.shards > 4096)
        return SL_ERR_ARGUMENT;
    if (c.max_memory && c.max_memory < 256 * 1024)
        return SL_ERR_ARGUMENT;
    unsigned bits = sl_log2_ceil(c.shards ? c.shards : 64);
    /* Under a cap, each shard needs room for its index and a few pages;
     * fewer, larger shards waste less of a small cap. */
    while (c.max_memory && bits > 0 && (c.max_memory >> bits) < 128 * 1024)
        bits--;
    uint32_t nshards = 1u << bits;

    /* Aligned as its type asks: the clock has a cache line of its own. */
    sl_store *s = sl_alloc_should_fail() ? NULL : aligned_alloc(_Alignof(sl_store), sizeof *s);
    if (!s)
        return SL_ERR_NOMEM;
    memset(s, 0, sizeof *s);
    size_t shard_bytes = (size_t)nshards * sizeof(sl_shard);
    s->shards = sl_alloc_should_fail() ? NULL : aligned_alloc(64, shard_bytes);
    if (!s->shards) {
        sl_free(s);
        return SL_ERR_NOMEM;
    }
    memset(s->shards, 0, shard_bytes);
    s->nshards = nshards;
    s->shard_shift = 63 - bits;
    s->max_key_len = c.max_key_len;
    s->max_memory = c.max_memory;
    s->seed = c.seed;
    s->id = atomic_fetch_add(&sl_store_ids, 1) + 1;
    s->fixed_bytes = sizeof *s + shard_bytes;
    size_t budget = SIZE_MAX;
    if (c.max_memory) {
        if (c.max_memory <= s->fixed_bytes) {
            sl_store_free(s);
            return SL_ERR_ARGUMENT;
        }
        budget = (c.max_memory - s->fixed_bytes) / nshards;
    }
    for (uint32_t i = 0; i < nshards; i++) {
        sl_shard *sh = &s->shards[i];
        atomic_init(&sh->lock.held, 0);
        sh->arena = &s->arena;
        sh->budget = budget;
        /* Any value but 0 seeds xorshift; the shard's index keeps shards
         * that share the store's seed apart. */
        sh->evict_rng = sl_store_hash(&i, sizeof i, s->seed) | 1;
        sh->free_pages = SL_PAGE_NONE;
        for (unsigned lane = 0; lane < SL_LANES; lane++)
            for (unsigned u = 0; u <= SL_SMALL_MAX_UNITS; u++)
                sh->partial[lane][u] = SL_PAGE_NONE;
    }
    *out = s;
    return SL_OK;
}

void sl_store_free(sl_store *s)
{
    if (!s)
        return;
    for (uint32_t i = 0; i < s->nshards; i++) {
        sl_shard *sh = &s->shards[i];
        for (uint32_t id = 0; id < sh->pages_len; id++)
            if (sh->pages[id].base && sh->pages[id].units > SL_SMALL_MAX_UNITS)
                sl_free(sh->pages[id].base);
        sl_free(sh->pages);
        if (!sh->slots_pages)
            sl_free(sh->slots);
    }
    sl_arena_free(&s->arena);
    free(s->shards);
    sl_free(s);
}

/* The largest record in units (meta, the largest state above, the longest
 * key) fits the 24 bits sl_page keeps a record's units in. */
_Static_assert(1 + (size_t)UINT16_MAX * 64 + ((size_t)UINT16_MAX + 7) / 8 < (1u << 24),
               "a record's units fit in sl_page.units");

/* What sl_check_key_limit and sl_take_check ask of a take's limit, cost
 * and time, as one test and one branch. Only a shortcut: when it fails,
 * they decide (and say which error it is). The key is checked before, as
 * hashing it reads it. */
static inline bool sl_take_args_ok(const sl_limit *l, int64_t now, int64_t cost)
{
    return ((unsigned)l->algorithm < SL_ALGORITHM_COUNT) & sl_state_size_ok(l->state_size) &
           (cost >= 0) & ((uint64_t)now <= (uint64_t)SL_TIME_MAX);
}

/* A zeroed scratch state: the stack buffer when it fits, else the heap. */
static void *sl_scratch_get(unsigned char *stack, size_t size)
{
    if (size <= SL_SCRATCH_BYTES) {
        memset(stack, 0, size);
        return stack;
    }
    return sl_calloc(1, size);
}

static void sl_scratch_put(unsigned char *stack, void *p)
{
    if (p != stack)
        sl_free(p);
}

/* ---- the take path (see the names at the top of this file) ---- */

/* The decision on a scratch state: a take (lease_id 0), or a lease acquire
 * with the caller's id. */
static int sl_store_decide_scratch(const sl_limit *l, void *state, int64_t now, int64_t cost,
                                   uint64_t lease_id, sl_decision *d)
{
    return lease_id ? sl_lease_acquire(l, state, now, cost, lease_id, d)
                    : sl_take(l, state, now, cost, d);
}

/* The decision on a state in place, in the general case: the algorithm
 * through its table, or a lease acquire when lease_id is not 0; *exp gets
 * the state's expiry afterwards. */
static inline int sl_store_decide_state(const sl_limit *l, void *state, int64_t now, int64_t cost,
                                        uint64_t lease_id, sl_decision *d, int64_t *exp)
{
    if (!lease_id)
        return sl_take_expiring(l, state, now, cost, d, exp);
    int rc = sl_lease_acquire(l, state, now, cost, lease_id, d);
    *exp = rc == SL_OK ? sl_state_expires_at(l, state) : 0;
    return rc;
}

/* The insert path, the locked path's cold half: the key is new (pos < 0),
 * or its state has another shape, which is carried over (sl_state_adopt)
 * or refused. Decides on a scratch state first, so that an invalid or
 * empty-handed take stores nothing and the old state is only replaced when
 * the take is valid; then inserts the key (sl_shard_insert). Called with
 * the shard locked; unlocks it. */
static __attribute__((noinline)) int sl_store_take_insert(sl_store *s, sl_shard *sh, uint64_t h,
                                                          long pos, const void *key,
                                                          size_t keylen, const sl_limit *l,
                                                          int64_t now, int64_t cost,
                                                          uint64_t lease_id, sl_decision *d)
{
    unsigned char stack[SL_SCRATCH_BYTES] __attribute__((aligned(8)));
    void *scratch = sl_scratch_get(stack, l->state_size);
    if (!scratch) {
        sl_shard_unlock(sh);
        return SL_ERR_NOMEM;
    }
    int rc = pos >= 0 ? sl_rec_adopt(sh, sh->slots[pos], l, scratch, now) : SL_OK;
    if (rc == SL_OK)
        rc = sl_store_decide_scratch(l, scratch, now, cost, lease_id, d);
    else
        memset(d, 0, sizeof *d);
    /* A refused take, or a peek, leaves a state of another shape as it
     * was: carried over, it might have lost what the new limit cannot hold
     * at once. */
    if (rc == SL_OK && (pos < 0 || (d->allowed && cost > 0))) {
        if (pos >= 0) {
            sl_shard_remove(sh, (size_t)pos);
            sh->reinits++;
        }
        int64_t exp = sl_state_expires_at(l, scratch);
        if (exp > now)
            rc = sl_shard_insert(s, sh, h, key, keylen, sl_rec_kind_of(l), scratch, l->state_size,
                                 sl_store_tick_of(exp), 0, now, NULL);
    }
    sl_shard_unlock(sh);
    sl_scratch_put(stack, scratch);
    return rc;
}

/* What the reader's path answers when the take needs the shard's lock
 * (the key is new, or its state has another shape): no take or acquire
 * returns it (they return SL_OK or an SL_ERR_*, none of them positive). */
#define SL_TAKE_NEEDS_LOCK 0x4c4f434b

/* The record of the key, for a reader of the shard: the one the thread's
 * last take went to when that is still good, else the index's; NULL when
 * the key is not there. */
static inline __attribute__((always_inline)) uint64_t *
sl_reader_find(const sl_store *s, sl_shard *sh, uint64_t h, const void *key, size_t keylen,
               uint32_t *units)
{
    sl_last_take *last = &sl_last;
    uint64_t epoch = atomic_load_explicit(&sh->epoch, memory_order_relaxed);
    if (last->h == h && last->sh == sh && last->epoch == epoch && last->store == s->id &&
        sl_rec_key_is(last->rec, last->units, key, keylen)) {
        *units = last->units;
        return last->rec;
    }
    long pos = sl_index_find(sh, h, key, keylen);
    if (pos < 0)
        return NULL;
    uint32_t v = __atomic_load_n(&sh->slots[pos], __ATOMIC_RELAXED);
    const sl_page *pg = &sh->pages[sl_slot_page(v)];
    uint64_t *rec = pg->base + (size_t)sl_slot_index(v) * pg->units;
    *last = (sl_last_take){s->id, sh, h, epoch, rec, pg->units};
    *units = pg->units;
    return rec;
}

/* The decision in a record, by a reader that holds its lock (its group's
 * or its own), with `word` the record's meta word: the state changes, and
 * *word gets the new expiry. GCRA's common case runs inline (see gcra.h)
 * and sets *st for the caller to describe once the lock is let go. Returns
 * SL_TAKE_NEEDS_LOCK, changing nothing, when the record holds a state of
 * another shape. */
static inline __attribute__((always_inline)) int
sl_store_decide_record(uint64_t *rec, uint32_t units, uint64_t *word, const sl_limit *l,
                       int64_t now, int64_t cost, uint64_t lease_id, sl_decision *d,
                       sl_gcra_step *st, bool *gcra)
{
    sl_rec_meta m;
    memcpy(&m, word, sizeof m);
    unsigned kind = sl_rec_kind_of(l);
    if (!sl_rec_shape_fits(&m, units, kind, l->state_size))
        return SL_TAKE_NEEDS_LOCK;
    if (!lease_id && kind == SL_GCRA && sl_gcra_whole(l, cost)) {
        *gcra = true;
        *st = sl_gcra_whole_commit(l, (sl_gcra_state *)sl_rec_state(rec), now);
        if (st->expires_at)
            *word = sl_meta_word_expiring(*word, sl_store_tick_of(st->expires_at));
        return SL_OK;
    }
    int64_t exp;
    int rc = sl_store_decide_state(l, sl_rec_state(rec), now, cost, lease_id, d, &exp);
    if (rc == SL_OK && cost > 0)
        *word = sl_meta_word_expiring(*word, sl_store_tick_of(exp));
    return rc;
}

/* The reader's path: a take without the shard's lock, by a reader of the
 * shard (see "readers"). Locks the key's home group or, in a small shard,
 * its record (see sl_locks_records), and decides in the record. Only the
 * lock, the state and the record's meta word are written, and the decision
 * is described after the lock is let go. A reader reads and writes a meta
 * word whole and atomically, as another may be setting its lock bit.
 * Returns SL_TAKE_NEEDS_LOCK, changing nothing, when the key is not there
 * or its state has another shape. */
static inline __attribute__((always_inline)) int
sl_store_take_reader(sl_store *s, sl_shard *sh, uint64_t h, const void *key, size_t keylen,
                     const sl_limit *l, int64_t now, int64_t cost, uint64_t lease_id,
                     sl_decision *d)
{
    if (!sh->ngroups)
        return SL_TAKE_NEEDS_LOCK;
    uint32_t units;
    uint64_t *rec, word;
    sl_gcra_step st;
    bool gcra = false;
    int rc;
    if (__builtin_expect(!sl_locks_records(sh), 1)) {
        uint32_t *lock = sl_group_lock(sh, h);
        /* The time, before the record is touched: raising the clock is a
         * locked instruction, which would wait for the record's miss and
         * hold up the next take's loads behind it. */
        now = sl_store_now(s, now);
        rec = sl_reader_find(s, sh, h, key, keylen, &units);
        if (!rec) {
            sl_group_unlock(lock);
            return SL_TAKE_NEEDS_LOCK;
        }
        word = __atomic_load_n(rec, __ATOMIC_RELAXED);
        rc = sl_store_decide_record(rec, units, &word, l, now, cost, lease_id, d, &st, &gcra);
        /* Written back even when unchanged: a branch on it would wait for
         * the record's miss, and uniform takes measured slower with it. */
        __atomic_store_n(rec, word, __ATOMIC_RELAXED);
        sl_group_unlock(lock);
    } else {
        rec = sl_reader_find(s, sh, h, key, keylen, &units);
        if (!rec)
            return SL_TAKE_NEEDS_LOCK;
        word = sl_rec_lock(rec);
        now = sl_store_now(s, now);
        rc = sl_store_decide_record(rec, units, &word, l, now, cost, lease_id, d, &st, &gcra);
        __atomic_store_n(rec, word & ~SL_META_LOCKED, __ATOMIC_RELEASE);
    }
    if (gcra) {
        memset(d, 0, sizeof *d);
        sl_gcra_whole_describe(l, st, false, d);
    }
    return rc;
}

/* The locked path: the take under the shard's lock, when the reader's path
 * could not decide (the thread has no reader slot, the lock was held, the
 * key is new or of another shape). A key whose state is there is decided
 * in place; any other goes to the insert path. */
static inline __attribute__((always_inline)) int
sl_store_take_locked(sl_store *s, sl_shard *sh, uint64_t h, const void *key, size_t keylen,
                     const sl_limit *l, size_t size, int64_t now, int64_t cost,
                     uint64_t lease_id, sl_decision *d)
{
    sl_shard_lock(sh);
    now = sl_store_now(s, now);
    long pos = sl_index_find(sh, h, key, keylen);
    if (pos < 0 || !sl_rec_compatible(sh, sh->slots[pos], l, size))
        return sl_store_take_insert(s, sh, h, pos, key, keylen, l, now, cost, lease_id, d);
    uint64_t *rec = sl_shard_record(sh, sh->slots[pos]);
    int64_t exp;
    int rc = sl_store_decide_state(l, sl_rec_state(rec), now, cost, lease_id, d, &exp);
    if (rc == SL_OK && cost > 0)
        sl_rec_set_expiry(rec, sl_store_tick_of(exp));
    sl_shard_unlock(sh);
    return rc;
}

/* The entry of sl_store_take and sl_store_acquire: take `cost` from the
 * key's state, or acquire a lease of that weight carrying lease_id when it
 * is not 0. Checks the arguments, hashes the key and starts its index
 * group's load, then tries the reader's path, and the locked path when
 * that cannot decide. */
static inline __attribute__((always_inline)) int
sl_store_take_common(sl_store *s, const void *key, size_t keylen, const sl_limit *l, int64_t now,
                     int64_t cost, uint64_t lease_id, sl_decision *d)
{
    size_t size;
    if (!s || !d)
        return SL_ERR_ARGUMENT;
    int rc;
    if (__builtin_expect(!l || !key || keylen - 1 >= s->max_key_len, 0))
        return sl_check_key_limit(s, key, keylen, l, &size);
    /* The key's index group starts on its way first; the other checks
     * overlap with it. */
    uint64_t h = sl_store_hash(key, keylen, s->seed);
    sl_shard *sh = sl_store_shard_of(s, h);
    sl_index_prefetch(sh, h);
    if (__builtin_expect(!sl_take_args_ok(l, now, cost), 0)) {
        if ((rc = sl_check_key_limit(s, key, keylen, l, &size)) != SL_OK)
            return rc;
        if ((rc = sl_take_check(l, now, cost)) != SL_OK) {
            memset(d, 0, sizeof *d);
            return rc;
        }
    }
    size = l->state_size; /* read before the lock, which the compiler may not move it past */

    sl_reader *me = sl_reader_self();
    if (__builtin_expect(me != NULL, 1)) {
        rc = sl_reader_enter(me, sh)
                 ? sl_store_take_reader(s, sh, h, key, keylen, l, now, cost, lease_id, d)
                 : SL_TAKE_NEEDS_LOCK;
        sl_reader_leave(me);
        if (rc != SL_TAKE_NEEDS_LOCK)
            return rc;
    }
    return sl_store_take_locked(s, sh, h, key, keylen, l, size, now, cost, lease_id, d);
}

sl_status sl_store_take(sl_store *s, const void *key, size_t keylen, const sl_limit *l, int64_t now,
                        int64_t cost, sl_decision *d)
{
    return sl_store_take_common(s, key, keylen, l, now, cost, 0, d);
}

sl_status sl_store_acquire(sl_store *s, const void *key, size_t keylen, const sl_limit *l,
                           int64_t now, int64_t weight, uint64_t lease_id, sl_decision *d)
{
    if (!lease_id)
        return SL_ERR_ARGUMENT;
    if (l && l->algorithm != SL_CONCURRENCY)
        return SL_ERR_ALGORITHM;
    return sl_store_take_common(s, key, keylen, l, now, weight, lease_id, d);
}

sl_status sl_store_peek(sl_store *s, const void *key, size_t keylen, const sl_limit *l, int64_t now,
                        int64_t cost, sl_decision *d)
{
    size_t size;
    if (!s || !d)
        return SL_ERR_ARGUMENT;
    int rc = sl_check_key_limit(s, key, keylen, l, &size);
    if (rc != SL_OK)
        return rc;
    uint64_t h = sl_store_hash(key, keylen, s->seed);
    sl_shard *sh = sl_store_shard_of(s, h);
    unsigned char stack[SL_SCRATCH_BYTES] __attribute__((aligned(8)));
    void *zero = NULL;

    sl_shard_lock(sh);
    long pos = sl_index_find(sh, h, key, keylen);
    if (pos >= 0 && sl_rec_compatible(sh, sh->slots[pos], l, size)) {
        rc = sl_peek(l, sl_rec_state(sl_shard_record(sh, sh->slots[pos])), now, cost, d);
        sl_shard_unlock(sh);
        return rc;
    }
    /* Absent (the answer for "never seen"), or of another shape: what a
     * take would carry it over to. */
    zero = sl_scratch_get(stack, size);
    if (!zero) {
        sl_shard_unlock(sh);
        return SL_ERR_NOMEM;
    }
    rc = pos >= 0 ? sl_rec_adopt(sh, sh->slots[pos], l, zero, now) : SL_OK;
    sl_shard_unlock(sh);
    if (rc == SL_OK)
        rc = sl_peek(l, zero, now, cost, d);
    else
        memset(d, 0, sizeof *d);
    sl_scratch_put(stack, zero);
    return rc;
}

int sl_store_inspect(sl_store *s, const void *key, size_t keylen, int64_t now, sl_key_info *info)
{
    if (!s || !info)
        return SL_ERR_ARGUMENT;
    if (!key || keylen == 0 || keylen > s->max_key_len)
        return SL_ERR_KEY;
    memset(info, 0, sizeof *info);
    uint64_t h = sl_store_hash(key, keylen, s->seed);
    sl_shard *sh = sl_store_shard_of(s, h);
    sl_shard_lock(sh);
    long pos = sl_index_find(sh, h, key, keylen);
    if (pos < 0) {
        sl_shard_unlock(sh);
        return 0;
    }
    uint32_t v = sh->slots[pos];
    uint64_t *rec = sl_shard_record(sh, v);
    unsigned kind = sl_rec_meta_of(rec)->flags & SL_REC_ALGO_MASK;
    uint64_t tick = sl_rec_expiry(rec);
    info->algorithm = (sl_algorithm)(kind & ~SL_REC_CARRIED);
    info->carried = (kind & SL_REC_CARRIED) != 0;
    info->state_bytes = sl_shard_record_state_size(sh, v);
    info->expires_at = tick >= SL_TICK_NEVER ? SL_TIME_MAX : (int64_t)(tick << SL_TICK_SHIFT);
    if (info->carried)
        sl_carry_describe(info->algorithm, sl_rec_state(rec), info->state_bytes, now, &info->limit,
                          &info->period_ns, &info->used);
    sl_shard_unlock(sh);
    return 1;
}

/* Keys one sl_store_prefetch pass handles: enough to cover the misses of
 * a pipelined batch, few enough that the first lines are still there when
 * their takes run. */
#define SL_PREFETCH_BATCH 32

void sl_store_prefetch(sl_store *s, const void *const *keys, const size_t *lens, size_t n)
{
    uint64_t hs[SL_PREFETCH_BATCH];
    if (!s || !keys || !lens)
        return;
    sl_reader *me = sl_reader_self(); /* without one, the index groups only */
    for (size_t base = 0; base < n; base += SL_PREFETCH_BATCH) {
        size_t m = n - base < SL_PREFETCH_BATCH ? n - base : SL_PREFETCH_BATCH;
        uint32_t valid = 0; /* bit i: key i is a valid key, hs[i] its hash */
        /* The index groups, without waiting for the lines. */
        for (size_t i = 0; i < m; i++) {
            const void *key = keys[base + i];
            size_t len = lens[base + i];
            if (!key || len == 0 || len > s->max_key_len)
                continue;
            valid |= UINT32_C(1) << i;
            hs[i] = sl_store_hash(key, len, s->seed);
            sl_index_prefetch(sl_store_shard_of(s, hs[i]), hs[i]);
        }
        /* The records the home groups point at, tag matches only: by now
         * the first groups have arrived and the others are on their way. */
        for (size_t i = 0; i < m; i++) {
            if (!(valid >> i & 1))
                continue;
            sl_shard *sh = sl_store_shard_of(s, hs[i]);
            if (me && sl_reader_enter(me, sh) && sh->ngroups) {
                const uint32_t *grp =
                    sh->slots + (size_t)sl_home_group(hs[i], sh->ngroups) * SL_GROUP_SLOTS;
                unsigned empty;
                for (unsigned mt = sl_group_match(grp, sl_tag_of(hs[i]), &empty); mt;
                     mt &= mt - 1) {
                    uint32_t v = __atomic_load_n(&grp[__builtin_ctz(mt)], __ATOMIC_RELAXED);
                    const uint64_t *rec = sl_shard_record(sh, v);
                    /* Both ends: a record may straddle two cache lines. */
                    __builtin_prefetch(rec, 1);
                    __builtin_prefetch(rec + sl_rec_units(sh, v) - 1, 1);
                }
            }
            if (me)
                sl_reader_leave(me);
        }
    }
}

int sl_store_reset(sl_store *s, const void *key, size_t keylen)
{
    if (!s)
        return SL_ERR_ARGUMENT;
    if (!key || keylen == 0 || keylen > s->max_key_len)
        return SL_ERR_KEY;
    uint64_t h = sl_store_hash(key, keylen, s->seed);
    sl_shard *sh = sl_store_shard_of(s, h);
    sl_shard_lock(sh);
    long pos = sl_index_find(sh, h, key, keylen);
    if (pos >= 0)
        sl_shard_remove(sh, (size_t)pos);
    sl_shard_unlock(sh);
    return pos >= 0;
}

/* After a change in place under the shard's lock (a lease released, a take
 * given back): a state "never seen" again goes, else its expiry follows. */
static void sl_rec_settle(sl_shard *sh, size_t pos, uint64_t *rec, const sl_limit *l,
                          int64_t now)
{
    int64_t exp = sl_state_expires_at(l, sl_rec_state(rec));
    if (exp <= now) {
        sl_shard_remove(sh, pos);
        sh->reclaimed++;
    } else {
        sl_rec_set_expiry(rec, sl_store_tick_of(exp));
    }
}

int sl_store_release(sl_store *s, const void *key, size_t keylen, const sl_limit *l, int64_t now,
                     uint64_t lease_id)
{
    size_t size;
    if (!s)
        return SL_ERR_ARGUMENT;
    int rc = sl_check_key_limit(s, key, keylen, l, &size);
    if (rc != SL_OK)
        return rc;
    if (l->algorithm != SL_CONCURRENCY)
        return SL_ERR_ALGORITHM;
    uint64_t h = sl_store_hash(key, keylen, s->seed);
    sl_shard *sh = sl_store_shard_of(s, h);
    sl_shard_lock(sh);
    now = sl_store_now(s, now);
    long pos = sl_index_find(sh, h, key, keylen);
    rc = 0;
    if (pos >= 0 && sl_rec_compatible(sh, sh->slots[pos], l, size)) {
        uint64_t *rec = sl_shard_record(sh, sh->slots[pos]);
        rc = sl_lease_release(l, sl_rec_state(rec), now, lease_id);
        if (rc == 1)
            sl_rec_settle(sh, (size_t)pos, rec, l, now);
    }
    sl_shard_unlock(sh);
    return rc;
}

/* A refund changes a record in place, under the shard's lock (which keeps
 * the readers out), and only a record of this limit's shape: a state of
 * another shape was not written by a take under this limit, and carrying it
 * over (as a take would) is no refund. */
int64_t sl_store_refund(sl_store *s, const void *key, size_t keylen, const sl_limit *l,
                        int64_t now, int64_t cost)
{
    size_t size;
    if (!s)
        return SL_ERR_ARGUMENT;
    int rc = sl_check_key_limit(s, key, keylen, l, &size);
    if (rc != SL_OK)
        return rc;
    if ((rc = sl_take_check(l, now, cost)) != SL_OK)
        return rc;
    if (l->algorithm == SL_CONCURRENCY)
        return SL_ERR_ALGORITHM;
    uint64_t h = sl_store_hash(key, keylen, s->seed);
    sl_shard *sh = sl_store_shard_of(s, h);
    sl_shard_lock(sh);
    now = sl_store_now(s, now);
    long pos = sl_index_find(sh, h, key, keylen);
    int64_t given = 0;
    if (pos >= 0 && sl_rec_compatible(sh, sh->slots[pos], l, size)) {
        uint64_t *rec = sl_shard_record(sh, sh->slots[pos]);
        given = sl_refund(l, sl_rec_state(rec), now, cost);
        if (given > 0)
            sl_rec_settle(sh, (size_t)pos, rec, l, now);
    }
    sl_shard_unlock(sh);
    return given;
}

/* A charge changes a record in place under the shard's lock, as a refund
 * does (the lock keeps the readers out), and is never refused: a key never
 * seen, or of another shape, is charged on a scratch state (carried over
 * first, as a take carries it) and then inserted, as the insert path of a
 * take that admits. */
sl_status sl_store_charge(sl_store *s, const void *key, size_t keylen, const sl_limit *l,
                          int64_t now, int64_t cost, sl_decision *d)
{
    size_t size;
    if (!s || !d)
        return SL_ERR_ARGUMENT;
    memset(d, 0, sizeof *d);
    int rc = sl_check_key_limit(s, key, keylen, l, &size);
    if (rc != SL_OK)
        return rc;
    if ((rc = sl_take_check(l, now, cost)) != SL_OK)
        return rc;
    if (!sl_algo_get(l->algorithm)->charge)
        return SL_ERR_ALGORITHM;
    uint64_t h = sl_store_hash(key, keylen, s->seed);
    sl_shard *sh = sl_store_shard_of(s, h);
    sl_shard_lock(sh);
    now = sl_store_now(s, now);
    long pos = sl_index_find(sh, h, key, keylen);
    if (pos >= 0 && sl_rec_compatible(sh, sh->slots[pos], l, size)) {
        uint64_t *rec = sl_shard_record(sh, sh->slots[pos]);
        rc = sl_charge(l, sl_rec_state(rec), now, cost, d);
        if (rc == SL_OK && cost > 0)
            sl_rec_settle(sh, (size_t)pos, rec, l, now);
        sl_shard_unlock(sh);
        return rc;
    }
    unsigned char stack[SL_SCRATCH_BYTES] __attribute__((aligned(8)));
    void *scratch = sl_scratch_get(stack, size);
    if (!scratch) {
        sl_shard_unlock(sh);
        return SL_ERR_NOMEM;
    }
    rc = pos >= 0 ? sl_rec_adopt(sh, sh->slots[pos], l, scratch, now) : SL_OK;
    if (rc == SL_OK)
        rc = sl_charge(l, scratch, now, cost, d);
    /* A charge of nothing stores nothing, and leaves a state of another
     * shape as it was (as a peek does). */
    if (rc == SL_OK && cost > 0) {
        if (pos >= 0) {
            sl_shard_remove(sh, (size_t)pos);
            sh->reinits++;
        }
        int64_t exp = sl_state_expires_at(l, scratch);
        if (exp > now)
            rc = sl_shard_insert(s, sh, h, key, keylen, sl_rec_kind_of(l), scratch, size,
                                 sl_store_tick_of(exp), 0, now, NULL);
    }
    sl_shard_unlock(sh);
    sl_scratch_put(stack, scratch);
    if (rc != SL_OK)
        memset(d, 0, sizeof *d);
    return rc;
}

void sl_store_get_stats(sl_store *s, sl_store_stats *st)
{
    memset(st, 0, sizeof *st);
    if (!s)
        return;
    st->bytes_used = s->fixed_bytes;
    st->max_memory = s->max_memory;
    for (uint32_t i = 0; i < s->nshards; i++) {
        sl_shard *sh = &s->shards[i];
        sl_shard_lock(sh);
        st->keys += sh->count;
        st->bytes_used += sh->used;
        st->evictions += sh->evictions;
        st->reclaimed += sh->reclaimed;
        st->reinits += sh->reinits;
        sl_shard_unlock(sh);
    }
}

/* ---- the bare lookup of store_debug.h, beside the take it measures ---- */

bool sl_store_debug_contains(sl_store *s, const void *key, size_t keylen)
{
    uint64_t h = sl_store_hash(key, keylen, s->seed);
    sl_shard *sh = sl_store_shard_of(s, h);
    sl_index_prefetch(sh, h); /* as a take does, and entering the shard as it does */
    sl_reader *me = sl_reader_self();
    if (me && sl_reader_enter(me, sh)) {
        bool found = sl_index_find(sh, h, key, keylen) >= 0;
        sl_reader_leave(me);
        return found;
    }
    if (me)
        sl_reader_leave(me);
    sl_shard_lock(sh);
    bool found = sl_index_find(sh, h, key, keylen) >= 0;
    sl_shard_unlock(sh);
    return found;
}

