/*
 * fuzz_topk.c: libFuzzer target for the top keys summary (sl_topk_*).
 *
 * Its keys are whatever clients send: any bytes, of any length, in any
 * order and at any time. Here the input is a trace of adds (keys, weights,
 * steps of a virtual clock, sometimes back) to a summary of 1 to 16
 * counters, with or without a window, checked against exact counts kept
 * on the side: no undefined behaviour (UBSan), nothing read past a key
 * (ASan, exact-size copies), and the bounds sluice.h states. CHECK()
 * aborts when one breaks:
 *   - every key listed: count - error <= true <= count, error <= floor;
 *   - every key not listed: true <= floor, and floor <= N / k;
 *   - N (stats.total) the sum of the weights in the window;
 * for the summary itself and for a merge of it into one with room for all
 * its keys. A key over SL_TOPK_KEY_MAX bytes is listed by its first bytes:
 * its lower bound is checked against the keys it may be.
 *
 * Input: byte 0 k (1 + b % 16), byte 1 the window (0: none, else b % 8
 * units of 1000 ns, 0 meaning 8); then records: a length byte L (a key of
 * L % 80 + 1 bytes follows, cut short at the input's end), a weight byte
 * (1 + b % 4) and a clock byte (b < 200: now += b, else now -= b - 200).
 * Every 16 records, and at the end, the checks run.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "sluice.h"

#define MAX_EVENTS 512

typedef struct event {
    const uint8_t *key;
    size_t len;
    uint64_t weight;
    int64_t window; /* the window it counts in (the summary's current one) */
} event;

static int64_t window_of(int64_t now, int64_t w)
{
    int64_t q = now / w;
    return now % w < 0 ? q - 1 : q;
}

/* The exact count of the len bytes at key among the events in windows
 * [lo, hi]. */
static uint64_t exact(const event *ev, size_t n, const uint8_t *key, size_t len, int64_t lo,
                      int64_t hi)
{
    uint64_t c = 0;
    for (size_t i = 0; i < n; i++)
        if (ev[i].window >= lo && ev[i].window <= hi && ev[i].len == len &&
            memcmp(ev[i].key, key, len) == 0)
            c += ev[i].weight;
    return c;
}

/* The most any one key listed as e (its first bytes and length) may count:
 * the largest exact count of the keys it may be. */
static uint64_t best_match(const event *ev, size_t n, const sl_topk_entry *e, int64_t lo,
                           int64_t hi)
{
    uint64_t best = 0;
    size_t kept = e->len < SL_TOPK_KEY_MAX ? e->len : SL_TOPK_KEY_MAX;
    for (size_t i = 0; i < n; i++)
        if (ev[i].len == e->len && memcmp(ev[i].key, e->key, kept) == 0) {
            uint64_t c = exact(ev, n, ev[i].key, ev[i].len, lo, hi);
            if (c > best)
                best = c;
        }
    return best;
}

static void check(const sl_topk *t, size_t k, const event *ev, size_t n, int64_t now,
                  int64_t lo, int64_t hi)
{
    sl_topk_stats st;
    CHECK(sl_topk_stats_get(t, now, &st) == SL_OK);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        if (ev[i].window >= lo && ev[i].window <= hi)
            total += ev[i].weight;
    CHECK(st.total == total);
    CHECK(st.floor <= total / k);
    CHECK(st.max_n <= 4 && (total == 0) == (st.max_n == 0)); /* the weights are 1 to 4 */
    sl_topk_entry out[64];
    size_t got;
    CHECK(sl_topk_list(t, now, out, 64, &got) == SL_OK);
    CHECK(got == st.keys);
    for (size_t i = 0; i < got; i++) {
        const sl_topk_entry *e = &out[i];
        CHECK(e->error <= e->count && e->error <= st.floor);
        CHECK(i == 0 || out[i - 1].count >= e->count);
        if (e->len <= SL_TOPK_KEY_MAX) {
            uint64_t tr = exact(ev, n, e->key, e->len, lo, hi);
            CHECK(e->count - e->error <= tr && tr <= e->count);
        } else {
            CHECK(e->count - e->error <= best_match(ev, n, e, lo, hi));
        }
    }
    /* A key not listed counts at most floor. */
    for (size_t i = 0; i < n; i++) {
        uint64_t tr = exact(ev, n, ev[i].key, ev[i].len, lo, hi);
        if (tr <= st.floor)
            continue;
        size_t kept = ev[i].len < SL_TOPK_KEY_MAX ? ev[i].len : SL_TOPK_KEY_MAX;
        bool listed = false;
        for (size_t j = 0; j < got && !listed; j++)
            listed = out[j].len == ev[i].len && memcmp(out[j].key, ev[i].key, kept) == 0;
        CHECK(listed);
    }
}

/* The windows the summary answers for at now, cur the current one: itself
 * and the one before while now is in it (or before it), itself alone in
 * the next window, none later ([lo, hi] empty: lo > hi). */
static void windows_at(int64_t now, int64_t w, int64_t cur, int64_t *lo, int64_t *hi)
{
    int64_t at = window_of(now, w);
    *lo = cur - 1;
    *hi = cur;
    if (at == cur + 1)
        *lo = cur;
    else if (at > cur + 1)
        *lo = 1, *hi = 0;
}

/* The summary, and a merge of it into one with room for every key of its
 * two generations, against the events. */
static void check_all(const sl_topk *t, size_t k, int64_t w, const event *ev, size_t n,
                      int64_t now, int64_t cur)
{
    int64_t lo = 0, hi = 0;
    if (w)
        windows_at(now, w, cur, &lo, &hi);
    check(t, k, ev, n, now, lo, hi);
    sl_topk_config cfg = {.k = 2 * k, .window_ns = 0, .seed = 0x5eed};
    sl_topk *acc;
    CHECK(sl_topk_new(&cfg, &acc) == SL_OK);
    CHECK(sl_topk_merge(acc, t, now) == SL_OK);
    check(acc, k, ev, n, now, lo, hi);
    sl_topk_free(acc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t k = 1 + data[0] % 16;
    int64_t w = data[1] == 0 ? 0 : (int64_t)(data[1] % 8 ? data[1] % 8 : 8) * 1000;
    sl_topk_config cfg = {.k = k, .window_ns = w, .seed = 0x5eed};
    sl_topk *t;
    CHECK(sl_topk_new(&cfg, &t) == SL_OK);
    uint8_t *copy = (uint8_t *)copy_of(data, size);
    event *ev = malloc(MAX_EVENTS * sizeof *ev);
    CHECK(ev);
    size_t n = 0, pos = 2;
    int64_t now = 0, cur = 0; /* cur: the summary's current window */
    while (pos < size && n < MAX_EVENTS) {
        size_t len = copy[pos++] % 80 + 1;
        if (len > size - pos)
            len = size - pos;
        if (len == 0)
            break;
        const uint8_t *kp = copy + pos;
        pos += len;
        uint64_t weight = pos < size ? 1 + copy[pos++] % 4 : 1;
        int64_t step = pos < size ? copy[pos++] : 0;
        now += step < 200 ? step : -(step - 200);
        /* The key in a block of its own size: a read past it is caught. */
        uint8_t *key = (uint8_t *)copy_of(kp, len);
        CHECK(sl_topk_add(t, key, len, weight, now) == SL_OK);
        free(key);
        int64_t win = w ? window_of(now, w) : 0;
        if (win > cur)
            cur = win;
        ev[n++] = (event){kp, len, weight, cur};
        if (n % 16 == 0 || pos >= size || n == MAX_EVENTS)
            check_all(t, k, w, ev, n, now, cur);
    }
    free(ev);
    sl_topk_free(t);
    free(copy);
    return 0;
}
