/*
 * buf.c: the growable output buffer's allocation (see buf.h).
 */
#include "common/buf.h"

#include <stdint.h>

#include "common/alloc.h"

void sl_buf_init(sl_buf *b, int proto, size_t max)
{
    b->data = NULL;
    b->len = b->cap = 0;
    b->max = max ? max : SL_BUF_DEFAULT_MAX;
    b->proto = proto;
    b->failed = 0;
}

void sl_buf_clear(sl_buf *b)
{
    b->len = 0;
    b->failed = 0;
}

void sl_buf_free(sl_buf *b)
{
    sl_free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = 0;
}

char *sl_buf_reserve_slow(sl_buf *b, size_t need)
{
    if (b->failed)
        return NULL;
    if (need > b->max || b->len > b->max - need) {
        b->failed = 1;
        return NULL;
    }
    size_t want = b->len + need;
    if (want > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < want)
            cap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
        if (cap > b->max)
            cap = b->max;
        char *p = sl_realloc(b->data, cap);
        if (!p) {
            b->failed = 1;
            return NULL;
        }
        b->data = p;
        b->cap = cap;
    }
    return b->data + b->len;
}
