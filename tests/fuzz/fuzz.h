/*
 * fuzz.h: what the libFuzzer targets share: the entry point's prototype, a
 * CHECK that aborts (libFuzzer then keeps the input), and exact-size copies
 * of the input so that AddressSanitizer sees any read past its end.
 */
#ifndef SL_TESTS_FUZZ_H
#define SL_TESTS_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                  \
        }                                                                             \
    } while (0)

/* An exact-size heap copy of p[0 .. n) (one byte for n == 0). */
static inline char *copy_of(const uint8_t *p, size_t n)
{
    char *c = malloc(n ? n : 1);
    CHECK(c);
    if (n)
        memcpy(c, p, n);
    return c;
}

#endif /* SL_TESTS_FUZZ_H */
