/*
 * sl_store_charge: the keyed store's charge decides as sl_charge does on a
 * state of its own (a twin state outside the store), creates a key never
 * seen, carries a state of another shape over first, is given back by
 * sl_store_refund, stores nothing for a charge of 0, and refuses what
 * cannot owe.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "testlib.h"

#define MIN (60 * NS_PER_SEC)
#define T0 (1000 * NS_PER_SEC)

static sl_store *new_store(void)
{
    sl_store_config c = {.shards = 2, .seed = 5};
    sl_store *s;
    cr_assert_eq(sl_store_new(&c, &s), SL_OK);
    return s;
}

static void assert_same(const sl_decision *a, const sl_decision *b, const char *what, int step)
{
    cr_assert(a->allowed == b->allowed && a->remaining == b->remaining &&
                  a->reset_after_ns == b->reset_after_ns && a->retry_after_ns == b->retry_after_ns,
              "%s step %d: {%d %lld reset %lld retry %lld} vs {%d %lld reset %lld retry %lld}", what,
              step, a->allowed, (long long)a->remaining, (long long)a->reset_after_ns,
              (long long)a->retry_after_ns, b->allowed, (long long)b->remaining,
              (long long)b->reset_after_ns, (long long)b->retry_after_ns);
}

/* Random takes, charges and refunds on a few keys, against one state per
 * key kept outside the store: the same answers throughout. */
Test(store_charge, decides_as_sl_charge)
{
    sl_limit lims[4];
    cr_assert_eq(sl_limit_init(&lims[0], SL_GCRA, 10, NS_PER_SEC, 0), SL_OK);
    cr_assert_eq(sl_limit_init(&lims[1], SL_TOKEN_BUCKET, 7, NS_PER_SEC, 3), SL_OK);
    cr_assert_eq(sl_limit_init(&lims[2], SL_FIXED_WINDOW, 5, NS_PER_SEC, 0), SL_OK);
    cr_assert_eq(sl_limit_init(&lims[3], SL_SLIDING_WINDOW, 5, NS_PER_SEC, 0), SL_OK);
    for (int li = 0; li < 4; li++) {
        const sl_limit *l = &lims[li];
        sl_store *s = new_store();
        test_rng r = {li + 11};
        int64_t twin[3][4];
        memset(twin, 0, sizeof twin);
        int64_t now = T0;
        for (int step = 0; step < 3000; step++) {
            int k = (int)test_range(&r, 0, 2);
            char key[8];
            int n = snprintf(key, sizeof key, "k%d", k);
            sl_decision a, b;
            int op = (int)test_range(&r, 0, 9);
            if (op < 5) {
                int64_t cost = test_range(&r, 0, 2);
                cr_assert_eq(sl_store_take(s, key, (size_t)n, l, now, cost, &a), SL_OK);
                cr_assert_eq(sl_take(l, twin[k], now, cost, &b), SL_OK);
                assert_same(&a, &b, "take", step);
            } else if (op < 8) {
                int64_t cost = test_range(&r, 0, 3 * l->burst);
                cr_assert_eq(sl_store_charge(s, key, (size_t)n, l, now, cost, &a), SL_OK);
                cr_assert_eq(sl_charge(l, twin[k], now, cost, &b), SL_OK);
                assert_same(&a, &b, "charge", step);
            } else {
                int64_t cost = test_range(&r, 0, 3 * l->burst);
                cr_assert_eq(sl_store_refund(s, key, (size_t)n, l, now, cost),
                             sl_refund(l, twin[k], now, cost), "refund step %d", step);
            }
            now += test_range(&r, 0, 3) == 0 ? test_range(&r, 0, NS_PER_SEC)
                                              : test_range(&r, 0, 20 * NS_PER_MS);
        }
        sl_store_free(s);
    }
}

Test(store_charge, a_new_key_is_charged_and_given_back)
{
    sl_store *s = new_store();
    sl_limit l;
    sl_decision d;
    cr_assert_eq(sl_limit_init(&l, SL_GCRA, 10, NS_PER_SEC, 0), SL_OK);
    /* Nothing charged, nothing stored. */
    cr_assert_eq(sl_store_charge(s, "a", 1, &l, T0, 0, &d), SL_OK);
    cr_assert(d.allowed);
    cr_assert_eq(d.remaining, 10);
    sl_key_info info;
    cr_assert_eq(sl_store_inspect(s, "a", 1, T0, &info), 0);
    /* 15 on a key never seen: 1.5 s of debt, a take waits 0.6 s. */
    cr_assert_eq(sl_store_charge(s, "a", 1, &l, T0, 15, &d), SL_OK);
    cr_assert(d.allowed);
    cr_assert_eq(d.remaining, 0);
    cr_assert_eq(d.retry_after_ns, 600 * NS_PER_MS);
    cr_assert_eq(sl_store_inspect(s, "a", 1, T0, &info), 1);
    cr_assert_geq(info.expires_at, T0 + 1500 * NS_PER_MS);
    cr_assert_eq(sl_store_take(s, "a", 1, &l, T0 + 600 * NS_PER_MS - 1, 1, &d), SL_OK);
    cr_assert(!d.allowed);
    cr_assert_eq(sl_store_take(s, "a", 1, &l, T0 + 600 * NS_PER_MS, 1, &d), SL_OK);
    cr_assert(d.allowed);
    /* Given back: all of the 15 still owed. */
    cr_assert_eq(sl_store_refund(s, "a", 1, &l, T0 + 600 * NS_PER_MS, 15), 10);
    cr_assert_eq(sl_store_peek(s, "a", 1, &l, T0 + 600 * NS_PER_MS, 0, &d), SL_OK);
    cr_assert_eq(d.remaining, 10);
    sl_store_free(s);
}

Test(store_charge, another_shape_is_carried_over_first)
{
    sl_store *s = new_store();
    sl_limit a, b;
    sl_decision d;
    cr_assert_eq(sl_limit_init(&a, SL_TOKEN_BUCKET, 100, MIN, 0), SL_OK);
    cr_assert_eq(sl_limit_carry(&a), SL_OK);
    cr_assert_eq(sl_limit_init(&b, SL_GCRA, 10, MIN, 0), SL_OK);
    cr_assert_eq(sl_limit_carry(&b), SL_OK);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(sl_store_take(s, "k", 1, &a, T0, 1, &d), SL_OK);
    /* 4 used, then 12 more: 16 intervals of 6 s ahead, a take waits 42 s. */
    cr_assert_eq(sl_store_charge(s, "k", 1, &b, T0, 12, &d), SL_OK);
    cr_assert_eq(d.retry_after_ns, 42 * NS_PER_SEC);
    sl_key_info info;
    cr_assert_eq(sl_store_inspect(s, "k", 1, T0, &info), 1);
    cr_assert_eq(info.algorithm, SL_GCRA);
    cr_assert_eq(info.used, 16);
    sl_store_free(s);
}

Test(store_charge, refuses_what_cannot_owe_and_bad_input)
{
    sl_store *s = new_store();
    sl_limit l;
    sl_decision d;
    cr_assert_eq(sl_limit_init(&l, SL_SLIDING_LOG, 5, MIN, 0), SL_OK);
    cr_assert_eq(sl_store_charge(s, "k", 1, &l, T0, 1, &d), SL_ERR_ALGORITHM);
    cr_assert_eq(sl_limit_init(&l, SL_CONCURRENCY, 5, MIN, 0), SL_OK);
    cr_assert_eq(sl_store_charge(s, "k", 1, &l, T0, 1, &d), SL_ERR_ALGORITHM);
    cr_assert_eq(sl_limit_init(&l, SL_GCRA, 5, MIN, 0), SL_OK);
    cr_assert_eq(sl_store_charge(s, "k", 1, &l, T0, -1, &d), SL_ERR_COST);
    cr_assert_eq(sl_store_charge(s, "k", 1, &l, -1, 1, &d), SL_ERR_TIME);
    cr_assert_eq(sl_store_charge(s, "", 0, &l, T0, 1, &d), SL_ERR_KEY);
    cr_assert_eq(sl_store_charge(NULL, "k", 1, &l, T0, 1, &d), SL_ERR_ARGUMENT);
    sl_key_info info;
    cr_assert_eq(sl_store_inspect(s, "k", 1, T0, &info), 0, "nothing stored");
    sl_store_free(s);
}
