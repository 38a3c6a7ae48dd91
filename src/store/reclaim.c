/*
 * reclaim.c: how a shard gives memory back, none of it on a take's path
 * (an insert calls in here, a take on a key that is there never does):
 *
 *   reclaim     states that are "never seen" again go: a few records per
 *               insert (sl_shard_sweep) and many per sl_store_sweep
 *   eviction    at the memory cap, the state that expires soonest among a
 *               sample goes (sl_evict_one), or a whole page is drained into
 *               the other pages of its size (sl_evict_page)
 *   compaction  after many keys went, sparse pages are drained and a mostly
 *               empty index shrinks (sl_shard_compact, from sl_store_sweep)
 *
 * All of it runs under the shard's lock. See docs/store.md, "Reclaim and
 * eviction".
 */
#include <string.h>

#include "store/store_layout.h"

/* Records of one page an eviction samples to find the state that expires
 * soonest (Redis samples 5 keys for its approximated LRU). */
#define SL_EVICT_SAMPLE 5u

/*
 * Reclaim and eviction walk the record pages, not the index: records of a
 * page lie side by side, so looking at eight of them costs a few cache
 * lines instead of eight misses; the index is touched only to unlink the
 * one record chosen, found again through its key's hash.
 */

/* Removes the record `ref` (page << 9 | index) and its index slot. */
static void sl_shard_remove_rec(const sl_store *s, sl_shard *sh, uint32_t ref)
{
    uint64_t *rec = sl_shard_record(sh, ref);
    uint64_t h = sl_store_hash(sl_rec_key(sh, ref, rec), sl_rec_meta_of(rec)->keylen, s->seed);
    uint32_t g = sl_home_group(h, sh->ngroups);
    for (uint32_t probes = 0; probes < sh->ngroups; probes++) {
        uint32_t *grp = sh->slots + (size_t)g * SL_GROUP_SLOTS;
        for (unsigned i = 0; i < SL_GROUP_SLOTS; i++) {
            if (grp[i] > SL_SLOT_DELETED && (grp[i] & SL_SLOT_REF_MASK) == ref) {
                sl_shard_remove(sh, (size_t)g * SL_GROUP_SLOTS + i);
                return;
            }
        }
        g = g + 1 == sh->ngroups ? 0 : g + 1;
    }
}

/* Is record idx of page pg live and not pinned? */
static inline uint64_t *sl_page_live_rec(const sl_page *pg, uint32_t idx)
{
    uint64_t *rec = pg->base + (size_t)idx * pg->units;
    uint8_t f = sl_rec_meta_of(rec)->flags;
    return (f & SL_REC_LIVE) && !(f & SL_REC_PINNED) ? rec : NULL;
}

/* Looks at up to n records from where the last sweep stopped and reclaims
 * those that are "never seen" again. Returns how many it reclaimed. */
size_t sl_shard_sweep(const sl_store *s, sl_shard *sh, int64_t now, size_t n)
{
    size_t done = 0, looked = 0, pages_seen = 0;
    uint64_t now_tick = sl_now_tick(now);
    while (looked < n && sh->count && pages_seen <= sh->pages_len) {
        if (sh->sweep_page >= sh->pages_len) {
            sh->sweep_page = 0;
            sh->sweep_rec = 0;
        }
        const sl_page *pg = &sh->pages[sh->sweep_page];
        if (!pg->base || sh->sweep_rec >= pg->bump) {
            sh->sweep_page++;
            sh->sweep_rec = 0;
            pages_seen++;
            continue;
        }
        uint32_t idx = sh->sweep_rec++;
        looked++;
        uint64_t *rec = sl_page_live_rec(pg, idx);
        if (rec && sl_tick_expired(sl_rec_expiry(rec), now_tick)) {
            sl_shard_remove_rec(s, sh, (sh->sweep_page << 9) | idx);
            sh->reclaimed++;
            done++;
        }
    }
    return done;
}

/*
 * Eviction samples records at pseudo-random places across the shard's
 * pages, not side by side: records inserted together lie together (a
 * snapshot restore inserts a block of indebted keys one after the other),
 * and a sample of neighbours drawn from such a block holds nothing but
 * debts, so one of them would be forgiven however many cheaper states the
 * rest of the shard held. Drawn at random, a sample is all debts only as often
 * as debts fill the shard.
 */

/* The shard's next pseudo-random number in [0, n) (0 when n is 0):
 * xorshift64, three shifts and xors, whose high 32 bits a multiply-shift
 * maps onto [0, n) without a division. Per shard, under its lock, so that
 * no thread writes another's line, and seeded from the store's seed, so
 * that a test's evictions are the same on every run. */
static uint32_t sl_evict_rand(sl_shard *sh, uint32_t n)
{
    uint64_t x = sh->evict_rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    sh->evict_rng = x;
    return (uint32_t)(((x >> 32) * n) >> 32);
}

/* Can eviction take from page id: it holds live records, of `units` when
 * units != 0, and is not `exclude`? */
static inline bool sl_victim_page_ok(const sl_shard *sh, uint32_t id, uint32_t units,
                                     uint32_t exclude)
{
    const sl_page *pg = &sh->pages[id];
    return pg->base && pg->live && (!units || pg->units == units) && id != exclude;
}

/* Random page ids tried before sl_random_victim_page walks: the page table
 * grows by doubling, so while the shard is at its cap about half its ids or
 * more are pages in use, and a miss 8 times running is rare. */
#define SL_EVICT_PAGE_TRIES 8u

/* A page eviction can take from (see sl_victim_page_ok), each as likely as
 * any other: a random page id, drawn again when it is not one. When a few
 * draws miss (few pages of that size), the first such page from a random id
 * on; taking that at once would favour the page after a run of unused ids
 * (the first, after the table's unused tail), where the oldest records lie.
 * SL_PAGE_NONE when there is none. */
static uint32_t sl_random_victim_page(sl_shard *sh, uint32_t units, uint32_t exclude)
{
    for (unsigned t = 0; t < SL_EVICT_PAGE_TRIES; t++) {
        uint32_t id = sl_evict_rand(sh, sh->pages_len);
        if (sh->pages_len && sl_victim_page_ok(sh, id, units, exclude))
            return id;
    }
    uint32_t id = sl_evict_rand(sh, sh->pages_len);
    for (uint32_t k = 0; k < sh->pages_len; k++, id = id + 1 == sh->pages_len ? 0 : id + 1)
        if (sl_victim_page_ok(sh, id, units, exclude))
            return id;
    return SL_PAGE_NONE;
}

/* The candidate an eviction has found so far. */
typedef struct sl_victim {
    uint32_t ref;     /* page << 9 | record; UINT32_MAX: none yet */
    uint64_t expiry;  /* its expiry tick */
    bool expired;     /* it has expired: a reclaim, and the search is over */
} sl_victim;

/* Weighs record idx of page id as a victim; false when it is free or
 * pinned (it does not count as a sample). */
static bool sl_victim_weigh(const sl_page *pg, uint32_t id, uint32_t idx, uint64_t now_tick,
                            sl_victim *v)
{
    uint64_t *rec = sl_page_live_rec(pg, idx);
    if (!rec)
        return false;
    uint64_t e = sl_rec_expiry(rec);
    if (sl_tick_expired(e, now_tick)) {
        v->ref = (id << 9) | idx;
        v->expired = true;
    } else if (e < v->expiry) {
        v->expiry = e;
        v->ref = (id << 9) | idx;
    }
    return true;
}

/* Draws allowed for a sample: at the cap the pages sampled are full, so
 * draws that land on free records are few; this bounds the rare case of
 * sparse pages, which falls back to a walk. */
#define SL_EVICT_DRAWS (4u * SL_EVICT_SAMPLE)

/*
 * Finds a victim among the live, unpinned records of pages of `units` (any
 * size when 0) other than `exclude`: SL_EVICT_SAMPLE of them drawn at
 * random, or, when the draws keep landing on free or pinned records, the
 * first SL_EVICT_SAMPLE found walking from a random page on.
 */
static sl_victim sl_victim_find(sl_shard *sh, uint32_t units, uint32_t exclude, uint64_t now_tick)
{
    sl_victim v = {.ref = UINT32_MAX, .expiry = UINT64_MAX, .expired = false};
    uint32_t seen = 0;
    for (uint32_t draw = 0; draw < SL_EVICT_DRAWS && seen < SL_EVICT_SAMPLE;) {
        /* The places first, each record's line prefetched, then the
         * records: their cache misses overlap instead of queueing one
         * behind the other. */
        uint32_t ids[SL_EVICT_SAMPLE], idxs[SL_EVICT_SAMPLE], n = 0;
        for (; n < SL_EVICT_SAMPLE - seen; n++, draw++) {
            uint32_t id = sl_random_victim_page(sh, units, exclude);
            if (id == SL_PAGE_NONE)
                return v;
            const sl_page *pg = &sh->pages[id];
            ids[n] = id;
            idxs[n] = sl_evict_rand(sh, pg->bump);
            __builtin_prefetch(pg->base + (size_t)idxs[n] * pg->units);
        }
        for (uint32_t k = 0; k < n; k++) {
            seen += sl_victim_weigh(&sh->pages[ids[k]], ids[k], idxs[k], now_tick, &v);
            if (v.expired)
                return v;
        }
    }
    if (seen)
        return v;
    uint32_t id = sl_random_victim_page(sh, units, exclude);
    for (uint32_t k = 0; id != SL_PAGE_NONE && k < sh->pages_len && seen < SL_EVICT_SAMPLE;
         k++, id = id + 1 == sh->pages_len ? 0 : id + 1) {
        const sl_page *pg = &sh->pages[id];
        if (!sl_victim_page_ok(sh, id, units, exclude))
            continue;
        for (uint32_t idx = 0; idx < pg->bump && seen < SL_EVICT_SAMPLE; idx++) {
            seen += sl_victim_weigh(pg, id, idx, now_tick, &v);
            if (v.expired)
                return v;
        }
    }
    return v;
}

/*
 * Evicts one state: among SL_EVICT_SAMPLE records drawn from the pages of
 * want_units when there are such pages (so that the freed record is one
 * the caller can use; only those with only_want), else from any page, an
 * expired one if any (a reclaim, not an eviction), else the one that
 * expires soonest: the one whose loss forgives the least. Returns false
 * when nothing could be evicted (no records, or all pinned).
 */
static bool sl_evict_from(sl_store *s, sl_shard *sh, uint32_t want_units, uint32_t exclude,
                          bool only_want, int64_t now)
{
    uint64_t now_tick = sl_now_tick(now);
    for (int pass = 0; pass < (only_want ? 1 : 2); pass++) {
        uint32_t units = pass == 0 ? want_units : 0;
        if (pass == 0 && !units)
            continue;
        sl_victim v = sl_victim_find(sh, units, exclude, now_tick);
        if (v.ref == UINT32_MAX)
            continue;
        sl_shard_remove_rec(s, sh, v.ref);
        if (v.expired)
            sh->reclaimed++;
        else
            sh->evictions++;
        return true;
    }
    return false;
}

bool sl_evict_one(sl_store *s, sl_shard *sh, uint32_t want_units, int64_t now)
{
    return sl_evict_from(s, sh, want_units, SL_PAGE_NONE, false, now);
}

/* Points the index slot of record `from` at record `to` instead. */
static void sl_index_repoint(const sl_store *s, sl_shard *sh, uint32_t from, uint32_t to)
{
    uint64_t *rec = sl_shard_record(sh, to); /* already a copy of `from` */
    uint64_t h = sl_store_hash(sl_rec_key(sh, to, rec), sl_rec_meta_of(rec)->keylen, s->seed);
    uint32_t g = sl_home_group(h, sh->ngroups);
    for (uint32_t probes = 0; probes < sh->ngroups; probes++) {
        uint32_t *grp = sh->slots + (size_t)g * SL_GROUP_SLOTS;
        for (unsigned i = 0; i < SL_GROUP_SLOTS; i++) {
            if (grp[i] > SL_SLOT_DELETED && (grp[i] & SL_SLOT_REF_MASK) == from) {
                grp[i] = (grp[i] & ~SL_SLOT_REF_MASK) | to;
                return;
            }
        }
        g = g + 1 == sh->ngroups ? 0 : g + 1;
    }
}

/*
 * Frees page `id` without forgiving its states blindly: each of its
 * records moves into a hole in another page of its size, and the holes
 * are made by the usual eviction (sampled, soonest expiry first) in those
 * other pages. So a whole page comes free while every state dropped was
 * chosen by its expiry. Returns false, changing nothing but evictions,
 * when the page holds a pinned record or is the only one of its size.
 * Without may_evict (compaction), the caller has checked that the other
 * pages of the size have room for every record.
 */
static bool sl_drain_page(sl_store *s, sl_shard *sh, uint32_t id, bool may_evict, int64_t now)
{
    sl_page *pg = &sh->pages[id];
    uint32_t units = pg->units;
    if (units > SL_SMALL_MAX_UNITS)
        return false;
    for (uint32_t idx = 0; idx < pg->bump; idx++) {
        uint8_t f = sl_rec_meta_of(pg->base + (size_t)idx * units)->flags;
        if ((f & SL_REC_LIVE) && (f & SL_REC_PINNED))
            return false;
    }
    /* Out of the partial list: nothing may be allocated here meanwhile. */
    if (pg->live < pg->cap)
        sl_partial_unlink(sh, id);
    pg->cap = 0; /* marks the page as draining for sl_rec_free */
    for (uint32_t idx = 0; idx < pg->bump && pg->live; idx++) {
        uint64_t *rec = pg->base + (size_t)idx * units;
        if (!(sl_rec_meta_of(rec)->flags & SL_REC_LIVE))
            continue;
        uint32_t to;
        bool oom;
        if (sl_partial_any(sh, pg->lane, units) == SL_PAGE_NONE &&
            (!may_evict || !sl_evict_from(s, sh, units, id, true, now))) {
            /* The only page of its size: its states go. */
            sl_shard_remove_rec(s, sh, (id << 9) | idx);
            sh->evictions++;
            continue;
        }
        if (!sl_rec_alloc_noevict(sh, units, pg->lane, false, &to, &oom)) {
            sl_shard_remove_rec(s, sh, (id << 9) | idx);
            sh->evictions++;
            continue;
        }
        memcpy(sl_shard_record(sh, to), rec, (size_t)units * 8);
        sl_index_repoint(s, sh, (id << 9) | idx, to);
        sl_rec_meta_of(rec)->flags = 0;
        pg->live--;
    }
    if (sh->pages[id].base) {
        /* Empty now (its last record left by a move, not a free). */
        sh->used -= SL_PAGE_BYTES;
        sl_page_release(sh, pg);
        memset(pg, 0, sizeof *pg);
        pg->next = sh->free_pages;
        sh->free_pages = (uint16_t)id;
    }
    return true;
}

/*
 * Frees one whole page: used when evicting single states keeps freeing
 * records of the wrong size, or when the index must grow at the cap. The
 * page is taken from the record size that holds the most pages (where a
 * flood of keys lives, not a lone state of a rare size), and among those,
 * the one with the fewest live records (the fewest moves); it is drained
 * (see above), or, failing that, all its unpinned states are evicted.
 * Returns false when no memory came free.
 */
bool sl_evict_page(sl_store *s, sl_shard *sh, int64_t now)
{
    uint32_t pages_of[SL_SMALL_MAX_UNITS + 1] = {0}; /* [0]: pages of one large record */
    uint32_t top = 0;
    for (uint32_t id = 0; id < sh->pages_len; id++) {
        const sl_page *pg = &sh->pages[id];
        if (!pg->base || !pg->live)
            continue;
        uint32_t c = pg->units <= SL_SMALL_MAX_UNITS ? pg->units : 0;
        if (++pages_of[c] > pages_of[top])
            top = c;
    }
    uint32_t best = SL_PAGE_NONE, best_live = UINT32_MAX;
    for (uint32_t id = 0; id < sh->pages_len; id++) {
        const sl_page *pg = &sh->pages[id];
        uint32_t c = pg->units <= SL_SMALL_MAX_UNITS ? pg->units : 0;
        if (pg->base && pg->live && c == top && pg->live < best_live) {
            best_live = pg->live;
            best = id;
        }
    }
    if (best == SL_PAGE_NONE)
        return false;
    size_t before = sh->used;
    if (sl_drain_page(s, sh, best, true, now))
        return sh->used < before;
    uint32_t bump = sh->pages[best].bump;
    for (uint32_t idx = 0; idx < bump && sh->pages[best].base; idx++) {
        if (!sl_page_live_rec(&sh->pages[best], idx))
            continue;
        sl_shard_remove_rec(s, sh, (best << 9) | idx);
        sh->evictions++;
    }
    return sh->used < before;
}

/* Records compaction may move per shard and call: bounded work under the
 * lock, so that no take waits long behind it. */
#define SL_COMPACT_MOVES 1024u
/* Pages it may free per shard and call (each costs a scan of the page
 * table). */
#define SL_COMPACT_PAGES 16u

/* The sparsest page of some lane and record size whose live records all
 * fit in the free records of the lane's other pages of that size and which
 * is at most half full; SL_PAGE_NONE when there is none. Lanes are not
 * merged: that would put records of two threads on shared lines again. */
static uint32_t sl_compact_candidate(const sl_shard *sh)
{
    uint32_t free_of[SL_LANES][SL_SMALL_MAX_UNITS + 1], sparsest[SL_LANES][SL_SMALL_MAX_UNITS + 1];
    memset(free_of, 0, sizeof free_of);
    for (unsigned lane = 0; lane < SL_LANES; lane++)
        for (uint32_t u = 0; u <= SL_SMALL_MAX_UNITS; u++)
            sparsest[lane][u] = SL_PAGE_NONE;
    for (uint32_t id = 0; id < sh->pages_len; id++) {
        const sl_page *pg = &sh->pages[id];
        if (!pg->base || pg->units > SL_SMALL_MAX_UNITS)
            continue;
        uint32_t *best = &sparsest[pg->lane][pg->units];
        free_of[pg->lane][pg->units] += (uint32_t)(pg->cap - pg->live);
        if (*best == SL_PAGE_NONE || pg->live < sh->pages[*best].live)
            *best = id;
    }
    for (unsigned lane = 0; lane < SL_LANES; lane++) {
        for (uint32_t u = SL_MIN_UNITS; u <= SL_SMALL_MAX_UNITS; u++) {
            uint32_t id = sparsest[lane][u];
            if (id == SL_PAGE_NONE)
                continue;
            const sl_page *pg = &sh->pages[id];
            if (pg->live <= pg->cap / 2 &&
                free_of[lane][u] - (uint32_t)(pg->cap - pg->live) >= pg->live)
                return id;
        }
    }
    return SL_PAGE_NONE;
}

/*
 * Gives memory back after many keys went: moves the records of sparse
 * pages into the free records of other pages of their size (only when
 * those have room for all of them, so that nothing is evicted) and frees
 * them, up to SL_COMPACT_MOVES records or SL_COMPACT_PAGES pages; and rebuilds an index that is
 * mostly empty at half its size.
 */
void sl_shard_compact(sl_store *s, sl_shard *sh, int64_t now)
{
    uint32_t moved = 0;
    for (unsigned pages = 0; pages < SL_COMPACT_PAGES && moved < SL_COMPACT_MOVES; pages++) {
        uint32_t id = sl_compact_candidate(sh);
        if (id == SL_PAGE_NONE)
            break;
        moved += sh->pages[id].live;
        if (!sl_drain_page(s, sh, id, false, now))
            break;
    }
    /* An index at most an eighth full shrinks by half (it is rebuilt from
     * the pages, and calloc failing just leaves it as it was). */
    if (sh->ngroups > 2 && (uint64_t)sh->count * 8 < sl_index_limit(sh->ngroups)) {
        uint32_t ngroups = sh->ngroups / 2;
        if (sh->count < sl_index_limit(ngroups) / 2)
            sl_index_rebuild(s, sh, ngroups);
    }
}

size_t sl_store_sweep(sl_store *s, int64_t now, size_t max_records)
{
    size_t done = 0;
    if (!s)
        return 0;
    for (uint32_t i = 0; i < s->nshards; i++) {
        sl_shard *sh = &s->shards[i];
        sl_shard_lock(sh);
        done += sl_shard_sweep(s, sh, now, max_records);
        sl_shard_compact(s, sh, now);
        sl_shard_unlock(sh);
    }
    return done;
}
