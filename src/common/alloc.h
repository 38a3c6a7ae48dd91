/*
 * alloc.h: the allocator every layer that allocates goes through (the
 * store, the config loader, the protocol buffers), with one hook for tests:
 * make the nth allocation from now on fail, so that each failure path can be
 * walked in turn and shown to answer "out of memory" without a crash or a
 * leak (rax's rax-oom-test does the same for its tree).
 *
 * Outside tests the hook costs one relaxed load of a counter that is 0.
 * What these functions return is the caller's, freed with sl_free (the C
 * library's free would do as well: they are malloc's blocks).
 */
#ifndef SL_COMMON_ALLOC_H
#define SL_COMMON_ALLOC_H

#include <stdbool.h>
#include <stddef.h>

/* Makes the nth allocation made through this file from now on fail (1 =
 * the next one), once; 0 (or a negative n) turns the hook off. The count is
 * process-wide and shared by every thread. */
void sl_alloc_fail_nth(long n);

/* Consumes one allocation from the hook's count: true when this is the one
 * that must fail. For allocations that do not come from malloc (the store's
 * page arena, aligned_alloc), so that they fail under the hook too. */
bool sl_alloc_should_fail(void);

/* malloc, calloc, realloc and strdup, failing (NULL; realloc leaves the old
 * block as it was) when the hook says so. sl_free is free. */
void *sl_malloc(size_t n);
void *sl_calloc(size_t n, size_t size);
void *sl_realloc(void *p, size_t n);
char *sl_strdup(const char *s);
void sl_free(void *p);

#endif
