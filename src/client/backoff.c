/*
 * backoff.c: sleeps between retries, with jitter, never sooner than the
 * server asked, given up at a deadline (sluice_client.h says what each
 * draw is).
 *
 * Everything is integer nanoseconds. The ceiling base * 2^n saturates at
 * the cap before it can overflow, and 3 * previous at INT64_MAX, so that
 * any attempt count and any previous sleep (a server's Retry-After can be
 * large) give a draw in range.
 */
#include <string.h>

#include "client/client.h"

sl_status sl_backoff_init(sl_backoff *b, int64_t base_ns, int64_t cap_ns, int64_t deadline_ns,
                          bool decorrelated)
{
    if (b == NULL)
        return SL_ERR_ARGUMENT;
    memset(b, 0, sizeof *b);
    if (base_ns <= 0 || cap_ns < base_ns || cap_ns > SL_SPAN_MAX ||
        (deadline_ns < 0 && deadline_ns != SL_BACKOFF_NO_DEADLINE))
        return SL_ERR_ARGUMENT;
    b->base_ns = base_ns;
    b->cap_ns = cap_ns;
    b->deadline_ns = deadline_ns;
    b->decorrelated = decorrelated;
    return SL_OK;
}

static bool sl_backoff_valid(const sl_backoff *b)
{
    return b != NULL && b->base_ns > 0 && b->cap_ns >= b->base_ns && b->cap_ns <= SL_SPAN_MAX &&
           (b->deadline_ns >= 0 || b->deadline_ns == SL_BACKOFF_NO_DEADLINE);
}

/* min(cap, base * 2^attempt), without overflow: base << n stays within the
 * cap exactly when base <= cap >> n. */
static int64_t sl_backoff_ceiling(const sl_backoff *b, int64_t attempt)
{
    if (attempt >= 62 || b->base_ns > (b->cap_ns >> attempt))
        return b->cap_ns;
    return b->base_ns << attempt;
}

int64_t sl_backoff_delay(const sl_backoff *b, int64_t attempt, int64_t previous_ns,
                         int64_t retry_after_ns, sl_rand_fn rand, void *rand_state)
{
    if (!sl_backoff_valid(b) || attempt < 0)
        return SL_ERR_ARGUMENT;
    int64_t d;
    if (b->decorrelated) {
        int64_t prev = previous_ns > b->base_ns ? previous_ns : b->base_ns;
        int64_t hi = prev > INT64_MAX / 3 ? INT64_MAX : 3 * prev;
        d = sl_rand_between(rand, rand_state, b->base_ns, hi);
        if (d > b->cap_ns)
            d = b->cap_ns;
    } else {
        d = sl_rand_between(rand, rand_state, 0, sl_backoff_ceiling(b, attempt));
    }
    return retry_after_ns > d ? retry_after_ns : d;
}

sl_status sl_retry_start(sl_retry *r, const sl_backoff *b, int64_t now, sl_rand_fn rand,
                         void *rand_state)
{
    if (r == NULL || !sl_backoff_valid(b))
        return SL_ERR_ARGUMENT;
    if (now < 0 || now > SL_TIME_MAX)
        return SL_ERR_TIME;
    r->backoff = b;
    r->start = now;
    r->attempt = 0;
    r->previous_ns = 0;
    r->rand = rand;
    r->rand_state = rand_state;
    return SL_OK;
}

int sl_retry_next(sl_retry *r, int64_t now, int64_t retry_after_ns, int64_t *delay_ns)
{
    if (r == NULL || delay_ns == NULL || !sl_backoff_valid(r->backoff))
        return SL_ERR_ARGUMENT;
    if (now < 0 || now > SL_TIME_MAX)
        return SL_ERR_TIME;
    const sl_backoff *b = r->backoff;
    int64_t d = sl_backoff_delay(b, r->attempt, r->previous_ns, retry_after_ns, r->rand,
                                 r->rand_state);
    *delay_ns = d;
    if (b->deadline_ns != SL_BACKOFF_NO_DEADLINE) {
        /* now + d > start + deadline, in 128 bits: d may be near INT64_MAX. */
        __int128 end = (__int128)now + d, limit = (__int128)r->start + b->deadline_ns;
        if (end > limit)
            return 0;
    }
    r->attempt++; /* at most one a call: never near overflow */
    r->previous_ns = d;
    return 1;
}
