/*
 * spsc.c: the single-producer, single-consumer ring of records (spsc.h).
 */
#include "common/spsc.h"

#include <string.h>

#include "common/alloc.h"

/* A header's length field for the pad that fills the end of the bytes. */
#define SL_SPSC_WRAP UINT64_MAX

static inline size_t sl_spsc_span(size_t len)
{
    return (SL_SPSC_HEADER + len + SL_SPSC_HEADER - 1) & ~(SL_SPSC_HEADER - 1);
}

int sl_spsc_init(sl_spsc *r, size_t cap)
{
    memset(r, 0, sizeof *r);
    if (cap < SL_SPSC_MIN || cap > SL_SPSC_MAX || (cap & (cap - 1)) != 0)
        return -1;
    r->bytes = sl_malloc(cap);
    if (!r->bytes)
        return -1;
    r->cap = cap;
    atomic_init(&r->head, 0);
    atomic_init(&r->tail, 0);
    return 0;
}

void sl_spsc_free(sl_spsc *r)
{
    sl_free(r->bytes);
    r->bytes = NULL;
    r->cap = 0;
}

void *sl_spsc_reserve(sl_spsc *r, size_t len)
{
    if (len == 0 || len > sl_spsc_max_record(r))
        return NULL;
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    size_t pos = (size_t)(head & (r->cap - 1));
    size_t span = sl_spsc_span(len);
    /* The end of the bytes is too short for the record: a pad fills it. */
    size_t pad = pos + span > r->cap ? r->cap - pos : 0;
    uint64_t need = pad + span;
    if (head + need - r->tail_seen > r->cap) {
        r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (head + need - r->tail_seen > r->cap)
            return NULL;
    }
    if (pad) {
        uint64_t wrap = SL_SPSC_WRAP;
        memcpy(r->bytes + pos, &wrap, sizeof wrap);
        pos = 0;
    }
    uint64_t n = len;
    memcpy(r->bytes + pos, &n, sizeof n);
    r->reserved_end = head + need;
    return r->bytes + pos + SL_SPSC_HEADER;
}

void sl_spsc_commit(sl_spsc *r)
{
    if (r->reserved_end == 0)
        return;
    atomic_store_explicit(&r->head, r->reserved_end, memory_order_release);
    r->reserved_end = 0;
}

const void *sl_spsc_peek(sl_spsc *r, size_t *len)
{
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    for (;;) {
        if (tail == r->head_seen) {
            r->head_seen = atomic_load_explicit(&r->head, memory_order_acquire);
            if (tail == r->head_seen)
                return NULL;
        }
        size_t pos = (size_t)(tail & (r->cap - 1));
        uint64_t n;
        memcpy(&n, r->bytes + pos, sizeof n);
        if (n != SL_SPSC_WRAP) {
            *len = (size_t)n;
            r->peeked_end = tail + sl_spsc_span((size_t)n);
            return r->bytes + pos + SL_SPSC_HEADER;
        }
        /* The pad: the record is at 0. The producer wrote both before it
         * published head past them, so no further load is needed. */
        tail += r->cap - pos;
    }
}

void sl_spsc_release(sl_spsc *r)
{
    if (r->peeked_end == 0)
        return;
    atomic_store_explicit(&r->tail, r->peeked_end, memory_order_release);
    r->peeked_end = 0;
}

size_t sl_spsc_used(sl_spsc *r)
{
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
    uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
    return head >= tail ? (size_t)(head - tail) : 0;
}
