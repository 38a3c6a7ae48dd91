/*
 * The leaky bucket as a queue (spacing and queue bound) and the concurrency
 * limit with leases (never more in flight, expiry, release).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "testlib.h"

Test(leaky_bucket, delays_a_burst_into_a_stream_spaced_by_T)
{
    sl_limit l;
    cr_assert_eq(sl_limit_init(&l, SL_LEAKY_BUCKET, 10, NS_PER_SEC, 5), SL_OK); /* T = 100 ms */
    int64_t st[2] = {0, 0};
    sl_decision d;
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(sl_take(&l, st, NS_PER_SEC, 1, &d), SL_OK);
        cr_assert(d.allowed);
        cr_assert_eq(d.delay_ns, i * 100 * NS_PER_MS);
    }
    sl_take(&l, st, NS_PER_SEC, 1, &d);
    cr_assert(!d.allowed, "the queue holds 5");
    cr_assert_eq(d.retry_after_ns, 100 * NS_PER_MS);
    cr_assert_eq(d.delay_ns, 0);
}

/*
 * Random arrivals: the admitted stream's start times (now + delay) are spaced
 * by T (up to the 1 ns of rounding up when T is fractional), and at no
 * admission are more than `burst` admitted requests still waiting to start.
 */
Test(leaky_bucket, output_spacing_and_queue_bound)
{
    test_rng r = {21};
    enum { N = 2000 };
    static int64_t start[N];
    for (int trial = 0; trial < 40; trial++) {
        sl_limit l;
        int64_t limit = test_range(&r, 1, 30), burst = test_range(&r, 1, 10);
        int64_t period = test_range(&r, 1, 10000) * 1000 + test_range(&r, 0, 3);
        cr_assert_eq(sl_limit_init(&l, SL_LEAKY_BUCKET, limit, period, burst), SL_OK);
        int64_t st[2] = {0, 0}, now = 0;
        int n = 0;
        for (int i = 0; i < N; i++) {
            now += test_range(&r, 0, l.interval_ns);
            sl_decision d;
            sl_take(&l, st, now, 1, &d);
            if (!d.allowed)
                continue;
            start[n++] = now + d.delay_ns;
            int waiting = 0;
            for (int k = 0; k < n; k++)
                waiting += start[k] > now;
            cr_assert_leq(waiting, burst, "trial %d", trial);
        }
        /* Starts are TATs rounded up to whole ns: consecutive ones at least
         * floor(T) apart (exactly T when T is whole), and k apart at least
         * k*T - 1 ns: (start[i] - start[i-k]) * den > k * reduced_period - den. */
        for (int i = 1; i < n; i++) {
            cr_assert_geq(start[i] - start[i - 1], l.interval_ns);
            for (int k = 2; k <= 10 && k <= i; k++) {
                __int128 span = (__int128)(start[i] - start[i - k]) * l.den;
                cr_assert(span > (__int128)k * l.reduced_period - l.den, "trial %d", trial);
            }
        }
    }
}

Test(concurrency, never_more_in_flight_than_the_limit)
{
    test_rng r = {13};
    enum { N = 3000 };
    for (int trial = 0; trial < 30; trial++) {
        sl_limit l;
        int64_t max = test_range(&r, 1, 16), ttl = test_range(&r, 1, 1000) * 1000;
        cr_assert_eq(sl_limit_init(&l, SL_CONCURRENCY, max, ttl, 0), SL_OK);
        void *st = test_state(&l);
        /* the model: each lease held, with its expiry and weight */
        static uint64_t ids[N];
        static int64_t exp_at[N], weight[N];
        static bool held[N];
        int n = 0;
        int64_t now = 0;
        for (int i = 0; i < N; i++) {
            now += test_range(&r, 0, ttl / 4);
            int64_t in_flight = 0;
            for (int k = 0; k < n; k++)
                if (held[k] && exp_at[k] <= now)
                    held[k] = false;
            for (int k = 0; k < n; k++)
                in_flight += held[k] ? weight[k] : 0;
            if (n > 0 && test_range(&r, 0, 2) == 0) { /* release a random one */
                int k = (int)test_range(&r, 0, n - 1);
                int rc = sl_lease_release(&l, st, now, ids[k]);
                cr_assert_eq(rc, held[k] ? 1 : 0, "trial %d step %d", trial, i);
                held[k] = false;
                cr_assert_eq(sl_lease_release(&l, st, now, ids[k]), 0, "released twice");
                continue;
            }
            int64_t c = test_range(&r, 1, 3);
            sl_decision d;
            sl_take(&l, st, now, c, &d);
            cr_assert_eq(d.allowed, in_flight + c <= max, "trial %d step %d", trial, i);
            if (d.allowed) {
                cr_assert_neq(d.lease_id, 0);
                ids[n] = d.lease_id;
                exp_at[n] = now + ttl;
                weight[n] = c;
                held[n++] = true;
                cr_assert_eq(d.remaining, max - in_flight - c);
            } else if (c <= max) {
                sl_decision later;
                sl_peek(&l, st, now + d.retry_after_ns, c, &later);
                cr_assert(later.allowed);
            }
            if (n == N)
                break;
        }
        free(st);
    }
}

Test(concurrency, expiry_frees_slots_and_unknown_leases_are_refused)
{
    sl_limit l;
    cr_assert_eq(sl_limit_init(&l, SL_CONCURRENCY, 2, 5 * NS_PER_SEC, 0), SL_OK);
    void *st = test_state(&l);
    sl_decision d;
    sl_take(&l, st, 0, 1, &d);
    uint64_t a = d.lease_id;
    sl_take(&l, st, NS_PER_SEC, 1, &d);
    uint64_t b = d.lease_id;
    cr_assert_neq(a, b);
    sl_take(&l, st, 2 * NS_PER_SEC, 1, &d);
    cr_assert(!d.allowed);
    cr_assert_eq(d.retry_after_ns, 3 * NS_PER_SEC, "the first lease expires at 5 s");
    cr_assert_eq(sl_lease_release(&l, st, 2 * NS_PER_SEC, 12345), 0);
    cr_assert_eq(sl_lease_release(&l, st, 5 * NS_PER_SEC, a), 0, "expired");
    sl_take(&l, st, 5 * NS_PER_SEC, 1, &d);
    cr_assert(d.allowed, "the expired lease's slot is free");
    cr_assert_eq(sl_lease_release(&l, st, 5 * NS_PER_SEC, b), 1);
    cr_assert_eq(sl_state_expires_at(&l, st), 10 * NS_PER_SEC);
    sl_limit g;
    sl_limit_init(&g, SL_GCRA, 1, 1, 0);
    cr_assert_eq(sl_lease_release(&g, st, 0, 1), SL_ERR_ALGORITHM);
    free(st);
}

Test(concurrency, leases_carry_the_callers_ids)
{
    sl_limit l;
    cr_assert_eq(sl_limit_init(&l, SL_CONCURRENCY, 3, 5 * NS_PER_SEC, 0), SL_OK);
    void *st = test_state(&l);
    sl_decision d;
    cr_assert_eq(sl_lease_acquire(&l, st, 0, 1, UINT64_C(0xdeadbeefcafe), &d), SL_OK);
    cr_assert(d.allowed);
    cr_assert_eq(d.lease_id, UINT64_C(0xdeadbeefcafe));
    cr_assert_eq(sl_lease_acquire(&l, st, 0, 1, UINT64_C(0xdeadbeefcafe), &d), SL_ERR_ARGUMENT,
                 "two live leases of one key cannot share an id");
    cr_assert_eq(sl_lease_acquire(&l, st, 0, 1, 0, &d), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_lease_acquire(&l, st, 0, -1, 7, &d), SL_ERR_COST);
    cr_assert_eq(sl_lease_acquire(&l, st, 0, 0, 7, &d), SL_OK, "weight 0 peeks");
    cr_assert_eq(d.remaining, 2);
    cr_assert_eq(sl_lease_acquire(&l, st, 0, 2, 7, &d), SL_OK);
    cr_assert_eq(sl_lease_acquire(&l, st, 0, 1, 8, &d), SL_OK);
    cr_assert(!d.allowed, "3 in flight");
    cr_assert_eq(sl_lease_release(&l, st, 0, 8), 0);
    cr_assert_eq(sl_lease_release(&l, st, 0, 7), 1);
    cr_assert_eq(sl_lease_release(&l, st, 0, UINT64_C(0xdeadbeefcafe)), 1);
    /* an expired id may be given again: it is then a new lease */
    cr_assert_eq(sl_lease_acquire(&l, st, 10 * NS_PER_SEC, 1, 7, &d), SL_OK);
    cr_assert(d.allowed);
    sl_limit g;
    sl_limit_init(&g, SL_GCRA, 1, 1, 0);
    cr_assert_eq(sl_lease_acquire(&g, st, 0, 1, 9, &d), SL_ERR_ALGORITHM);
    free(st);
}
