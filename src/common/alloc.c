/*
 * alloc.c: allocation with a hook that makes the nth allocation fail (see
 * alloc.h).
 */
#include "common/alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Allocations left before the one that fails; 0 or less: none fails. */
static atomic_long sl_fail_countdown;

void sl_alloc_fail_nth(long n) { atomic_store(&sl_fail_countdown, n > 0 ? n : 0); }

bool sl_alloc_should_fail(void)
{
    /* The load first: with the hook off (always, outside tests) no thread
     * writes the counter's line. */
    if (atomic_load_explicit(&sl_fail_countdown, memory_order_relaxed) <= 0)
        return false;
    return atomic_fetch_sub(&sl_fail_countdown, 1) == 1;
}

void *sl_malloc(size_t n) { return sl_alloc_should_fail() ? NULL : malloc(n); }

void *sl_calloc(size_t n, size_t size) { return sl_alloc_should_fail() ? NULL : calloc(n, size); }

void *sl_realloc(void *p, size_t n) { return sl_alloc_should_fail() ? NULL : realloc(p, n); }

char *sl_strdup(const char *s)
{
    size_t len = strlen(s) + 1;
    char *d = sl_malloc(len);
    if (d)
        memcpy(d, s, len);
    return d;
}

void sl_free(void *p) { free(p); }
