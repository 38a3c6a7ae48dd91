/*
 * consumer.c: a program outside the project, built against an installed
 * libsluice with nothing but `pkg-config --cflags --libs sluice`. It prints
 * one line per decision, which test_install.py checks: a GCRA limit of 2
 * taken three times at once (the third is refused), then the same through
 * the keyed store.
 */
#include <sluice.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    sl_limit l;
    if (sl_limit_init(&l, SL_GCRA, 2, 1000000000LL, 2) != SL_OK)
        return 1;
    int64_t state[4] = {0};
    if (sl_state_size(&l) > sizeof state)
        return 1;
    sl_store *store;
    if (sl_store_new(NULL, &store) != SL_OK)
        return 1;
    for (int i = 0; i < 3; i++) {
        sl_decision d, ds;
        if (sl_take(&l, state, 1000, 1, &d) != SL_OK ||
            sl_store_take(store, "k", strlen("k"), &l, 1000, 1, &ds) != SL_OK)
            return 1;
        printf("take %d: allowed=%d remaining=%lld store_allowed=%d\n", i, d.allowed,
               (long long)d.remaining, ds.allowed);
    }
    sl_store_free(store);
    printf("sluice %s\n", SLUICE_VERSION);
    return 0;
}
