/*
 * budget.c: the retry budget (sluice_client.h): first attempts and retries
 * counted in a ring of slots, a retry allowed while the window's retries,
 * counting it, stay within ratio * first attempts + floor.
 *
 * The comparison is exact. Both sides are multiplied by 1000 * 10^9 (the
 * ratio is per mille, the floor thousandths of a retry a second times the
 * period in ns):
 *
 *   (retries + 1) * 10^12 <= ratio_permille * firsts * 10^9
 *                              + min_per_second_milli * period_ns
 *
 * in unsigned 128 bits. A slot's count saturates at INT64_MAX / 64, so that
 * the window's sums fit in an int64 and the products above in 128 bits
 * (10^6 * 2^63 * 10^9 < 2^113).
 */
#include <string.h>

#include "client/client.h"
#include "common/arith.h"

#define SL_BUDGET_DEFAULT_SLOTS 20
#define SL_BUDGET_COUNT_MAX (INT64_MAX / SL_RETRY_BUDGET_SLOTS_MAX)

sl_status sl_retry_budget_init(sl_retry_budget *b, const sl_retry_budget_config *cfg)
{
    if (b == NULL || cfg == NULL)
        return SL_ERR_ARGUMENT;
    sl_retry_budget_config c = *cfg;
    if (c.slots == 0)
        c.slots = SL_BUDGET_DEFAULT_SLOTS;
    if (c.ratio_permille < 0 || c.ratio_permille > 1000000 || c.min_per_second_milli < 0 ||
        c.min_per_second_milli > 1000000000 || c.slots < 1 ||
        c.slots > SL_RETRY_BUDGET_SLOTS_MAX || c.period_ns < c.slots || c.period_ns > SL_SPAN_MAX)
        return SL_ERR_ARGUMENT;
    memset(b, 0, sizeof *b);
    if (pthread_mutex_init(&b->lock, NULL) != 0)
        return SL_ERR_NOMEM;
    b->cfg = c;
    b->width_ns = c.period_ns / c.slots;
    b->newest = -1;
    return SL_OK;
}

void sl_retry_budget_destroy(sl_retry_budget *b)
{
    if (b != NULL)
        pthread_mutex_destroy(&b->lock);
}

/* Moves the ring to `now` (under the lock): the slots that have slid out of
 * the window since the newest are cleared. Returns the index of the slot
 * `now` counts in. */
static int sl_budget_advance(sl_retry_budget *b, int64_t now)
{
    int64_t s = now / b->width_ns, n = b->cfg.slots;
    if (b->newest < 0) {
        b->newest = s;
    } else if (s > b->newest) {
        int64_t last = s - b->newest > n ? b->newest + n : s;
        for (int64_t k = b->newest + 1; k <= last; k++) {
            b->first[k % n] = 0;
            b->retry[k % n] = 0;
        }
        b->newest = s;
    }
    return (int)(b->newest % n);
}

static void sl_budget_sums(const sl_retry_budget *b, int64_t *firsts, int64_t *retries)
{
    int64_t f = 0, r = 0;
    for (int i = 0; i < b->cfg.slots; i++) {
        f += b->first[i];
        r += b->retry[i];
    }
    *firsts = f;
    *retries = r;
}

/* Would one more retry fit (under the lock, after sl_budget_advance)? */
static bool sl_budget_allows(const sl_retry_budget *b)
{
    int64_t f, r;
    sl_budget_sums(b, &f, &r);
    sl_u128 want = ((sl_u128)(uint64_t)r + 1) * UINT64_C(1000000000000);
    sl_u128 have = (sl_u128)(uint64_t)b->cfg.ratio_permille * (uint64_t)f * UINT64_C(1000000000) +
                   (sl_u128)(uint64_t)b->cfg.min_per_second_milli * (uint64_t)b->cfg.period_ns;
    return want <= have;
}

static int64_t sl_budget_add(int64_t count, int64_t n)
{
    return n > SL_BUDGET_COUNT_MAX - count ? SL_BUDGET_COUNT_MAX : count + n;
}

sl_status sl_retry_budget_record_attempt(sl_retry_budget *b, int64_t now, int64_t n)
{
    if (b == NULL || n < 0)
        return SL_ERR_ARGUMENT;
    if (now < 0 || now > SL_TIME_MAX)
        return SL_ERR_TIME;
    pthread_mutex_lock(&b->lock);
    int i = sl_budget_advance(b, now);
    b->first[i] = sl_budget_add(b->first[i], n);
    pthread_mutex_unlock(&b->lock);
    return SL_OK;
}

int sl_retry_budget_try_retry(sl_retry_budget *b, int64_t now)
{
    if (b == NULL)
        return SL_ERR_ARGUMENT;
    if (now < 0 || now > SL_TIME_MAX)
        return SL_ERR_TIME;
    pthread_mutex_lock(&b->lock);
    int i = sl_budget_advance(b, now);
    bool ok = sl_budget_allows(b);
    if (ok)
        b->retry[i] = sl_budget_add(b->retry[i], 1);
    pthread_mutex_unlock(&b->lock);
    return ok;
}

int sl_retry_budget_can_retry(sl_retry_budget *b, int64_t now)
{
    if (b == NULL)
        return SL_ERR_ARGUMENT;
    if (now < 0 || now > SL_TIME_MAX)
        return SL_ERR_TIME;
    pthread_mutex_lock(&b->lock);
    sl_budget_advance(b, now);
    bool ok = sl_budget_allows(b);
    pthread_mutex_unlock(&b->lock);
    return ok;
}

sl_status sl_retry_budget_counts(sl_retry_budget *b, int64_t now, int64_t *firsts,
                                 int64_t *retries)
{
    int64_t f = 0, r = 0;
    sl_status rc = SL_OK;
    if (b == NULL)
        rc = SL_ERR_ARGUMENT;
    else if (now < 0 || now > SL_TIME_MAX)
        rc = SL_ERR_TIME;
    else {
        pthread_mutex_lock(&b->lock);
        sl_budget_advance(b, now);
        sl_budget_sums(b, &f, &r);
        pthread_mutex_unlock(&b->lock);
    }
    if (firsts)
        *firsts = f;
    if (retries)
        *retries = r;
    return rc;
}
