/*
 * fuzz_carry.c: libFuzzer target for the carrying of a key's state to
 * another limit (sl_state_adopt, the in-place carry inside sl_take; see
 * "Carried states" in sluice.h).
 *
 * The state bytes come from outside: a snapshot (checksummed, but written by
 * whoever could write the file) or, in the module, any Redis client that SETs
 * a key to a value with the module's header. So the input is a state of any
 * algorithm and size, carried or not, with any name in it, and a limit to
 * carry it to; adopting it must either refuse (SL_ERR_WRONGTYPE) or give a
 * state on which takes and peeks behave: no undefined behaviour (UBSan),
 * nothing read or written past the state (ASan, exact-size copies), and
 * decisions within the limit's own bounds. CHECK() aborts when one breaks.
 * A refund (sl_refund) on such a state must behave too: 0 .. cost units
 * given back, or SL_ERR_ALGORITHM for a concurrency limit, and a state that
 * still decides within bounds.
 *
 * Input: byte 0 the old algorithm, byte 1 its flags (bit 0: carried), byte 2
 * the new limit's algorithm, byte 3 flags (bit 0: carried), bytes 4..11 the
 * new limit, 12..19 its period, 20..27 its burst, 28..35 now; the rest is the
 * old state (its size rounded down to whole words).
 */
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "sluice.h"

static int64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return (int64_t)v;
}

/* The decision invariants any state must give. */
static void check_decision(const sl_limit *l, const sl_decision *d)
{
    CHECK(d->remaining >= 0 || l->algorithm == SL_CONCURRENCY);
    CHECK(d->remaining <= d->limit);
    CHECK(d->reset_after_ns >= 0);
    CHECK(d->retry_after_ns >= 0);
    if (d->allowed)
        CHECK(d->retry_after_ns == 0);
}

/* A refund of `cost` on any state: 0 .. cost given back (or the errors its
 * inputs call for), and a state that decides within bounds afterwards. */
static void check_refund(const sl_limit *l, void *state, int64_t now, int64_t cost)
{
    int64_t given = sl_refund(l, state, now, cost);
    if (l->algorithm == SL_CONCURRENCY)
        CHECK(given == SL_ERR_ALGORITHM || given == SL_ERR_COST || given == SL_ERR_TIME);
    else if (cost < 0)
        CHECK(given == SL_ERR_COST);
    else if (now < 0 || now > SL_TIME_MAX)
        CHECK(given == SL_ERR_TIME);
    else
        CHECK(given >= 0 && given <= cost);
    sl_decision d;
    if (sl_peek(l, state, now, 1, &d) == SL_OK)
        check_decision(l, &d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 36)
        return 0;
    sl_algorithm old_algo = (sl_algorithm)(data[0] % SL_ALGORITHM_COUNT);
    bool old_carried = data[1] & 1;
    sl_algorithm algo = (sl_algorithm)(data[2] % SL_ALGORITHM_COUNT);
    bool carried = data[3] & 1;
    /* Small limits and periods mostly (so that the takes below mean
     * something), any value sometimes (the checks must refuse them). */
    int64_t limit = get64(data + 4), period = get64(data + 12), burst = get64(data + 20);
    int64_t now = get64(data + 28);
    if (!(data[1] & 2)) {
        limit = 1 + (int64_t)((uint64_t)limit % 5000);
        period = 1 + (int64_t)((uint64_t)period % (INT64_C(3600) * 1000000000));
        burst = (int64_t)((uint64_t)burst % 5000);
        now = (int64_t)((uint64_t)now % (INT64_C(1) << 61));
    }
    sl_limit l;
    if (sl_limit_init(&l, algo, limit, period, burst) != SL_OK)
        return 0;
    if (carried && sl_limit_carry(&l) != SL_OK)
        return 0;

    size_t old_size = (size - 36) / 8 * 8;
    uint8_t *old = (uint8_t *)copy_of(data + 36, old_size);
    size_t n = sl_state_size(&l);
    void *out = malloc(n);
    CHECK(out);
    int rc = sl_state_adopt(&l, out, old_algo, old_carried, old, old_size, now);
    CHECK(rc == SL_OK || rc == SL_ERR_WRONGTYPE || rc == SL_ERR_TIME);
    if (rc == SL_OK) {
        sl_decision d;
        for (int i = 0; i < 4; i++) {
            CHECK(sl_peek(&l, out, now, i, &d) == SL_OK);
            check_decision(&l, &d);
            CHECK(sl_take(&l, out, now, 1, &d) == SL_OK);
            check_decision(&l, &d);
        }
        check_refund(&l, out, now, burst);
    }
    /* The same bytes taken in place, when they have the limit's size: the
     * in-place carry of a state that names another limit. */
    if (old_size == n) {
        sl_decision d;
        void *in_place = copy_of(data + 36, n);
        if (sl_take(&l, in_place, now, 1, &d) == SL_OK)
            check_decision(&l, &d);
        if (sl_peek(&l, in_place, now, 2, &d) == SL_OK)
            check_decision(&l, &d);
        check_refund(&l, in_place, now, limit);
        sl_state_expires_at(&l, in_place);
        free(in_place);
    }
    free(out);
    free(old);
    return 0;
}
