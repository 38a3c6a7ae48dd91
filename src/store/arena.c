/*
 * arena.c: where the shards' pages of SL_PAGE_BYTES come from (see
 * sl_arena in store_layout.h): 2 MiB chunks mapped for transparent huge
 * pages, handed out page by page under the arena's lock, once per page and
 * never per take; pages given back wait on a free list for the next shard
 * that needs one.
 */
#define _GNU_SOURCE
#include <sys/mman.h>
#include <stdlib.h>

#include "store/store_layout.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define SL_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define SL_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define SL_POISON(p, n) ((void)(p), (void)(n))
#define SL_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* A new chunk, 2 MiB aligned (so that it can be one huge page): map twice
 * the size, keep the aligned middle. */
static char *sl_chunk_map(void)
{
    char *p = mmap(NULL, 2 * SL_CHUNK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    char *a = (char *)(((uintptr_t)p + SL_CHUNK_BYTES - 1) & ~(uintptr_t)(SL_CHUNK_BYTES - 1));
    if (a > p)
        munmap(p, (size_t)(a - p));
    munmap(a + SL_CHUNK_BYTES, (size_t)(p + 2 * SL_CHUNK_BYTES - (a + SL_CHUNK_BYTES)));
    (void)madvise(a, SL_CHUNK_BYTES, MADV_HUGEPAGE); /* a hint: without it, 4 KiB pages */
    SL_POISON(a, SL_CHUNK_BYTES);
    return a;
}

static void sl_arena_push(sl_arena *a, void *p)
{
    *(void **)p = a->free;
    a->free = p;
    SL_POISON((char *)p + sizeof(void *), SL_PAGE_BYTES - sizeof(void *));
}

/* Starts a new chunk; what the newest one had not handed out goes to the
 * free list. With the arena's lock held. False when memory is short. */
static bool sl_arena_grow(sl_arena *a)
{
    if (a->nchunks == a->chunks_cap) {
        size_t cap = a->chunks_cap ? a->chunks_cap * 2 : 16;
        void **n = realloc(a->chunks, cap * sizeof *n);
        if (!n)
            return false;
        a->chunks = n;
        a->chunks_cap = cap;
    }
    char *c = sl_chunk_map();
    if (!c)
        return false;
    for (; a->bump < a->end; a->bump += SL_PAGE_BYTES) {
        SL_UNPOISON(a->bump, sizeof(void *));
        sl_arena_push(a, a->bump);
    }
    a->chunks[a->nchunks++] = c;
    a->bump = c;
    a->end = c + SL_CHUNK_BYTES;
    return true;
}

/* `pages` contiguous pages (not zeroed): one page from the free list when
 * there is one, else from the newest chunk or a new one; NULL when memory is
 * short or more than a chunk is asked for. Runs of several pages (an index
 * table) are given back page by page and serve as record pages afterwards. */
void *sl_arena_get(sl_arena *a, size_t pages)
{
    size_t bytes = pages * SL_PAGE_BYTES;
    if (sl_alloc_should_fail() || pages == 0 || pages > SL_CHUNK_BYTES / SL_PAGE_BYTES)
        return NULL;
    sl_spin_lock(&a->lock);
    void *p = NULL;
    if (pages == 1 && a->free) {
        p = a->free;
        SL_UNPOISON(p, SL_PAGE_BYTES);
        a->free = *(void **)p;
    } else if ((size_t)(a->end - a->bump) >= bytes || sl_arena_grow(a)) {
        p = a->bump;
        a->bump += bytes;
        SL_UNPOISON(p, bytes);
    }
    sl_spin_unlock(&a->lock);
    return p;
}

void sl_arena_page_free(sl_arena *a, void *p)
{
    sl_spin_lock(&a->lock);
    sl_arena_push(a, p);
    sl_spin_unlock(&a->lock);
}

void sl_arena_free(sl_arena *a)
{
    for (size_t i = 0; i < a->nchunks; i++) {
        SL_UNPOISON(a->chunks[i], SL_CHUNK_BYTES);
        munmap(a->chunks[i], SL_CHUNK_BYTES);
    }
    free(a->chunks);
    a->chunks = NULL;
    a->nchunks = a->chunks_cap = 0;
}
