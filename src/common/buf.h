/*
 * buf.h: a growable output buffer. Every face writes its replies into one:
 * RESP's encoders (proto/resp.h), HTTP's responses (proto/http.h), the
 * /metrics text, and the CLI's requests.
 *
 * The caller owns the struct and, through it, the bytes: sl_buf_free()
 * releases them. sl_buf_clear() empties it for reuse while keeping the
 * allocation.
 *
 * Every write appends and returns 0, or -1 when the buffer cannot grow
 * (out of memory, or the write would take it beyond `max`). A failure is
 * sticky, as in hiredis: `failed` is set, the buffer keeps the bytes
 * written before the failure, and every later write is a no-op that
 * returns -1, so that a caller can write a whole reply and check once. A
 * reply cut short is not valid protocol: a server that sees `failed` must
 * drop the connection (or clear() and send an error instead).
 */
#ifndef SL_COMMON_BUF_H
#define SL_COMMON_BUF_H

#include <stddef.h>
#include <string.h>

typedef struct sl_buf {
    char *data; /* malloc'ed by the writes, freed by sl_buf_free() */
    size_t len; /* bytes written */
    size_t cap; /* bytes allocated; never more than max */
    size_t max; /* the most `len` may grow to */
    /* The version of the protocol the encoders writing here speak (RESP's
     * 2 or 3, which HELLO changes at any time); the buffer never reads it. */
    int proto;
    int failed; /* sticky: a write could not grow the buffer */
} sl_buf;

#define SL_BUF_DEFAULT_MAX ((size_t)64 * 1024 * 1024)

/* An empty buffer for protocol version `proto`, growing to at most `max`
 * bytes (0 for SL_BUF_DEFAULT_MAX). Allocates nothing until the first write. */
void sl_buf_init(sl_buf *b, int proto, size_t max);
/* Empties the buffer and clears `failed`, keeping the allocation. */
void sl_buf_clear(sl_buf *b);
/* Frees the bytes; the struct is left empty and may be reused. */
void sl_buf_free(sl_buf *b);

/* The slow half of sl_buf_reserve: grows the buffer by doubling, from 256
 * bytes, clamped to max; NULL (and `failed` set) when len + need would pass
 * max or the allocation fails. */
char *sl_buf_reserve_slow(sl_buf *b, size_t need);

/*
 * Room for `need` more bytes at the end: where they go, or NULL once the
 * buffer has failed. The caller writes at most `need` bytes there and then
 * adds what it wrote to `len`. Inlined: an encoder's usual write fits in
 * what is allocated already, and costs one comparison.
 */
static inline char *sl_buf_reserve(sl_buf *b, size_t need)
{
    /* cap <= max always, so a fit in cap is within the cap. */
    if (__builtin_expect(!b->failed && need <= b->cap - b->len, 1))
        return b->data + b->len;
    return sl_buf_reserve_slow(b, need);
}

/* Appends n bytes as they are. */
static inline int sl_buf_add(sl_buf *b, const void *p, size_t n)
{
    char *w = sl_buf_reserve(b, n);
    if (!w)
        return -1;
    if (n)
        memcpy(w, p, n);
    b->len += n;
    return 0;
}

/* Marks the buffer failed (a write whose size overflows) and returns -1. */
static inline int sl_buf_fail(sl_buf *b)
{
    b->failed = 1;
    return -1;
}

#endif /* SL_COMMON_BUF_H */
