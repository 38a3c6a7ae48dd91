/*
 * debug.c: the hooks of store_debug.h that tests and benchmarks use to
 * look inside the store: where a record is, whether every invariant of
 * every shard holds, and a few of the layout's sizes. Those that read a
 * shard take its lock, as any operation but a take does; none is on a
 * take's path (sl_store_debug_contains, which measures that path, is in
 * store.c beside it).
 */
#include <string.h>

#include "store/store_debug.h"
#include "store/store_layout.h"

/* The hash of the key a full slot value refers to, read from its record. */
static uint64_t sl_slot_hash(const sl_store *s, const sl_shard *sh, uint32_t v)
{
    uint64_t *rec = sl_shard_record(sh, v);
    size_t keylen = sl_rec_meta_of(rec)->keylen;
    return sl_store_hash(sl_rec_key(sh, v, rec), keylen, s->seed);
}

const void *sl_store_debug_record(sl_store *s, const void *key, size_t keylen)
{
    uint64_t h = sl_store_hash(key, keylen, s->seed);
    sl_shard *sh = sl_store_shard_of(s, h);
    sl_shard_lock(sh);
    long pos = sl_index_find(sh, h, key, keylen);
    const void *rec = pos >= 0 ? sl_shard_record(sh, sh->slots[pos]) : NULL;
    sl_shard_unlock(sh);
    return rec;
}

/* Are the lists of pages with room right? Each small page with room is on
 * the list of its lane and size once, and nothing else is; 0 or the line
 * of the first broken rule. */
static int sl_shard_check_partial(const sl_shard *sh)
{
    uint32_t listed = 0, with_room = 0;
    for (unsigned lane = 0; lane < SL_LANES; lane++) {
        for (uint32_t u = 0; u <= SL_SMALL_MAX_UNITS; u++) {
            uint16_t prev = SL_PAGE_NONE;
            for (uint16_t id = sh->partial[lane][u]; id != SL_PAGE_NONE; id = sh->pages[id].next) {
                if (id >= sh->pages_len || ++listed > sh->pages_len)
                    return __LINE__;
                const sl_page *pg = &sh->pages[id];
                if (!pg->base || pg->units != u || pg->lane != lane || pg->live >= pg->cap ||
                    pg->prev != prev)
                    return __LINE__;
                prev = id;
            }
        }
    }
    for (uint32_t id = 0; id < sh->pages_len; id++) {
        const sl_page *pg = &sh->pages[id];
        with_room += pg->base && pg->units <= SL_SMALL_MAX_UNITS && pg->live < pg->cap;
    }
    return listed == with_room ? 0 : __LINE__;
}

int sl_store_debug_check(sl_store *s)
{
    for (uint32_t i = 0; i < s->nshards; i++) {
        sl_shard *sh = &s->shards[i];
        sl_shard_lock(sh);
        int bad = 0;
        size_t total = (size_t)sh->ngroups * SL_GROUP_SLOTS;
        uint32_t full = 0, tombs = 0;
        size_t bytes = sl_index_bytes(sh->ngroups, sh->slots_pages) +
                       (size_t)sh->pages_len * sizeof(sl_page);
        for (size_t pos = 0; pos < total && !bad; pos++) {
            uint32_t v = sh->slots[pos];
            if (v == SL_SLOT_DELETED)
                tombs++;
            if (v <= SL_SLOT_DELETED)
                continue;
            full++;
            uint64_t *rec = sl_shard_record(sh, v);
            sl_rec_meta *meta = sl_rec_meta_of(rec);
            if (!(meta->flags & SL_REC_LIVE) || (meta->flags & (SL_REC_PINNED | SL_REC_LOCKED)) ||
                (v & SL_SLOT_LOCK))
                bad = __LINE__;
            else if (sl_index_find(sh, sl_slot_hash(s, sh, v), sl_rec_key(sh, v, rec), meta->keylen) != (long)pos)
                bad = __LINE__;
        }
        uint32_t live = 0;
        for (uint32_t id = 0; id < sh->pages_len && !bad; id++) {
            sl_page *pg = &sh->pages[id];
            if (!pg->base)
                continue;
            live += pg->live;
            bytes += pg->units <= SL_SMALL_MAX_UNITS ? SL_PAGE_BYTES : (size_t)pg->units * 8;
            if (pg->live == 0 || pg->live > pg->cap)
                bad = __LINE__;
        }
        if (!bad && (full != sh->count || tombs != sh->tombs || live != sh->count))
            bad = __LINE__;
        if (!bad && bytes != sh->used)
            bad = __LINE__;
        if (!bad && sh->budget != SIZE_MAX && sh->used > sh->budget)
            bad = __LINE__;
        if (!bad)
            bad = sl_shard_check_partial(sh);
        sl_shard_unlock(sh);
        if (bad)
            return bad;
    }
    return 0;
}

uint64_t sl_store_debug_tick_of(int64_t expires_ns) { return sl_store_tick_of(expires_ns); }

size_t sl_store_debug_page_bytes(void) { return SL_PAGE_BYTES; }

unsigned sl_store_debug_shards(const sl_store *s) { return s->nshards; }

size_t sl_store_debug_index_pages(sl_store *s, unsigned shard)
{
    sl_shard *sh = &s->shards[shard];
    sl_shard_lock(sh);
    size_t pages = sh->slots_pages;
    sl_shard_unlock(sh);
    return pages;
}

size_t sl_store_debug_chunks(sl_store *s)
{
    sl_arena *a = &s->arena;
    sl_spin_lock(&a->lock);
    size_t n = a->nchunks;
    sl_spin_unlock(&a->lock);
    return n;
}
