/*
 * test_client_limiter.c: sl_client_limiter on a virtual clock, fed by
 * sl_rl_parse from real header text. After a response exactly r remain;
 * the waits are GCRA's to the nanosecond (an interval that is not a whole
 * number of nanoseconds too); a 429's Retry-After admits nothing before
 * it; a request takes from every policy or from none; and random traces
 * agree, decision by decision and wait by wait, with a slow model that is
 * obviously right: a token bucket of capacity q refilled q per w seconds
 * in exact integers. Last, the bound on policies: the least recently
 * advertised is evicted.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice_client.h"
#include "testlib.h"

#define MS INT64_C(1000000)
#define SEC INT64_C(1000000000)
#define T0 (100 * SEC)

static sl_client_limiter *limiter(void)
{
    sl_client_limiter *l = malloc(sizeof *l);
    cr_assert_eq(sl_client_limiter_init(l), SL_OK);
    return l;
}

static void done(sl_client_limiter *l)
{
    sl_client_limiter_destroy(l);
    free(l);
}

/* What a response with these fields says (NULL: not there). */
static sl_rl_headers *said(const char *policy, const char *limit, const char *retry_after)
{
    sl_header_line h[3];
    size_t n = 0;
    if (policy)
        h[n++] = (sl_header_line){"RateLimit-Policy", 16, policy, strlen(policy)};
    if (limit)
        h[n++] = (sl_header_line){"RateLimit", 9, limit, strlen(limit)};
    if (retry_after)
        h[n++] = (sl_header_line){"Retry-After", 11, retry_after, strlen(retry_after)};
    static sl_rl_headers out;
    sl_rl_parse(h, n, 0, &out);
    return &out;
}

static void update(sl_client_limiter *l, const char *policy, const char *limit,
                   const char *retry_after, int status, int64_t now)
{
    cr_assert_eq(sl_client_limiter_update(l, said(policy, limit, retry_after), status, now),
                 SL_OK);
}

static int take_all(sl_client_limiter *l, int64_t now, int tries)
{
    int n = 0;
    for (int i = 0; i < tries; i++)
        n += sl_client_limiter_try_acquire(l, now, 1);
    return n;
}

static int64_t remaining_of(sl_client_limiter *l, int64_t now, const char *name)
{
    sl_client_policy_info info[SL_CLIENT_POLICIES_MAX];
    int n = sl_client_limiter_policies(l, now, info, SL_CLIENT_POLICIES_MAX);
    for (int i = 0; i < n; i++)
        if (strcmp(info[i].name, name) == 0)
            return info[i].remaining;
    return -1;
}

Test(client_limiter, nothing_known_admits_everything)
{
    sl_client_limiter *l = limiter();
    cr_assert_eq(sl_client_limiter_wait(l, T0, 1), 0);
    cr_assert_eq(take_all(l, T0, 1000), 1000);
    cr_assert_eq(sl_client_limiter_policies(l, T0, NULL, 0), 0);
    done(l);
}

Test(client_limiter, exactly_r_remain_then_one_interval)
{
    for (int64_t r = 0; r <= 25; r++) {
        sl_client_limiter *l = limiter();
        char lim[64];
        snprintf(lim, sizeof lim, "\"default\";r=%lld;t=1", (long long)r);
        update(l, "\"default\";q=20;w=1", lim, NULL, 200, T0);
        int64_t want = r > 20 ? 20 : r;
        cr_assert_eq(remaining_of(l, T0, "default"), want);
        cr_assert_eq(take_all(l, T0, 50), want, "r=%lld", (long long)r);
        cr_assert_eq(sl_client_limiter_wait(l, T0, 1), 50 * MS); /* T = 1 s / 20 */
        cr_assert_eq(sl_client_limiter_try_acquire(l, T0 + 50 * MS - 1, 1), 0);
        cr_assert_eq(sl_client_limiter_try_acquire(l, T0 + 50 * MS, 1), 1);
        done(l);
    }
}

Test(client_limiter, an_interval_that_is_not_whole_nanoseconds)
{
    /* q=7 per 1 s: T = 142857142.857... ns, kept exactly by sl_limit */
    sl_client_limiter *l = limiter();
    update(l, "\"p\";q=7;w=1", "\"p\";r=0", NULL, 200, 0);
    cr_assert_eq(sl_client_limiter_wait(l, 0, 1), 142857143);
    cr_assert_eq(sl_client_limiter_try_acquire(l, 142857142, 1), 0);
    /* over exactly one second, exactly 7 come back however the time is cut */
    int n = 0;
    for (int64_t t = 0; t < SEC; t += 1000003)
        n += sl_client_limiter_try_acquire(l, t, 1);
    n += sl_client_limiter_try_acquire(l, SEC, 1);
    cr_assert_eq(n, 7);
    done(l);
}

Test(client_limiter, retry_after_blocks_on_429_and_503_only)
{
    sl_client_limiter *l = limiter();
    update(l, "\"a\";q=100;w=1", "\"a\";r=50;t=1", "2", 429, T0);
    cr_assert_eq(sl_client_limiter_wait(l, T0, 1), 2 * SEC);
    cr_assert_eq(sl_client_limiter_try_acquire(l, T0 + 2 * SEC - 1, 1), 0);
    cr_assert_eq(sl_client_limiter_try_acquire(l, T0 + 2 * SEC, 1), 1);
    /* a 200's Retry-After does not block */
    update(l, NULL, NULL, "30", 200, T0 + 2 * SEC);
    cr_assert_eq(sl_client_limiter_wait(l, T0 + 2 * SEC, 1), 0);
    /* a 503's does, and so does one whose status is not known */
    update(l, NULL, NULL, "3", 503, T0 + 3 * SEC);
    cr_assert_eq(sl_client_limiter_wait(l, T0 + 3 * SEC, 1), 3 * SEC);
    update(l, NULL, NULL, "Thu, 01 Jan 1970 00:00:09 GMT", 0, T0 + 3 * SEC); /* 9 s */
    cr_assert_eq(sl_client_limiter_wait(l, T0 + 3 * SEC, 1), 9 * SEC);
    /* a shorter block does not shorten a longer one */
    update(l, NULL, NULL, "1", 429, T0 + 3 * SEC);
    cr_assert_eq(sl_client_limiter_wait(l, T0 + 3 * SEC, 1), 9 * SEC);
    /* a RESP reply's retry_after, through sl_client_limiter_block */
    cr_assert_eq(sl_client_limiter_block(l, T0 + 3 * SEC, 20 * SEC), SL_OK);
    cr_assert_eq(sl_client_limiter_wait(l, T0 + 3 * SEC, 1), 20 * SEC);
    cr_assert_eq(sl_client_limiter_block(l, SL_TIME_MAX, INT64_MAX), SL_OK);
    cr_assert_eq(sl_client_limiter_wait(l, SL_TIME_MAX, 1), 0); /* saturated at the clock's end */
    done(l);
}

Test(client_limiter, all_or_nothing)
{
    sl_client_limiter *l = limiter();
    update(l, "\"s\";q=10;w=1, \"m\";q=100;w=60", "\"s\";r=10;t=0, \"m\";r=3;t=60", NULL, 200,
           T0);
    cr_assert_eq(take_all(l, T0, 10), 3);
    /* "m" refused the fourth: "s" gave nothing for it */
    cr_assert_eq(remaining_of(l, T0, "s"), 7);
    cr_assert_eq(remaining_of(l, T0, "m"), 0);
    cr_assert_eq(sl_client_limiter_wait(l, T0, 1), 600 * MS); /* m's T = 60 s / 100 */
    /* a cost of 2 waits for both units of "m" */
    cr_assert_eq(sl_client_limiter_wait(l, T0, 2), 1200 * MS);
    cr_assert_eq(sl_client_limiter_try_acquire(l, T0 + 1200 * MS, 2), 1);
    cr_assert_eq(remaining_of(l, T0 + 1200 * MS, "s"), 8); /* full again in 1.2 s, 2 taken */
    done(l);
}

Test(client_limiter, a_cost_above_the_quota_is_never)
{
    sl_client_limiter *l = limiter();
    update(l, "\"a\";q=5;w=1", "\"a\";r=5", NULL, 200, T0);
    cr_assert_eq(sl_client_limiter_wait(l, T0, 6), SL_NEVER);
    cr_assert_eq(sl_client_limiter_try_acquire(l, T0, 6), 0);
    cr_assert_eq(sl_client_limiter_try_acquire(l, T0, 5), 1);
    cr_assert_eq(sl_client_limiter_wait(l, T0, 0), 0); /* cost 0 asks and takes nothing */
    done(l);
}

Test(client_limiter, a_quota_of_zero_waits_for_the_reset)
{
    sl_client_limiter *l = limiter();
    update(l, "\"z\";q=0;w=60", "\"z\";r=0;t=12", NULL, 200, T0);
    cr_assert_eq(sl_client_limiter_wait(l, T0, 1), 12 * SEC);
    cr_assert_eq(sl_client_limiter_try_acquire(l, T0 + 12 * SEC, 1), 1);
    /* without a reset, the window */
    update(l, "\"y\";q=0;w=30", NULL, NULL, 200, T0 + 12 * SEC);
    cr_assert_eq(sl_client_limiter_wait(l, T0 + 12 * SEC, 1), 30 * SEC);
    done(l);
}

Test(client_limiter, x_fields_alone_give_a_window)
{
    sl_client_limiter *l = limiter();
    sl_header_line h[] = {{"X-RateLimit-Remaining", 21, "3", 1},
                          {"X-RateLimit-Reset", 17, "10", 2}};
    sl_rl_headers p;
    sl_rl_parse(h, 2, 0, &p);
    cr_assert_eq(sl_client_limiter_update(l, &p, 200, T0), SL_OK);
    cr_assert_eq(take_all(l, T0, 10), 3);
    cr_assert_eq(sl_client_limiter_wait(l, T0, 1), 10 * SEC);
    cr_assert_eq(sl_client_limiter_wait(l, T0, 0), 0);
    cr_assert_eq(sl_client_limiter_try_acquire(l, T0 + 10 * SEC, 1), 1);
    cr_assert_eq(take_all(l, T0 + 10 * SEC, 100), 100, "past the reset nothing is known");
    /* then a policy limits as usual */
    update(l, "\"a\";q=1000;w=1", NULL, NULL, 200, T0 + 10 * SEC);
    cr_assert_eq(take_all(l, T0 + 10 * SEC, 10), 10);
    done(l);
}

Test(client_limiter, a_policy_keeps_its_state_until_its_terms_change)
{
    sl_client_limiter *l = limiter();
    update(l, "\"a\";q=10;w=1", NULL, NULL, 200, T0);
    cr_assert_eq(take_all(l, T0, 4), 4);
    update(l, "\"a\";q=10;w=1", NULL, NULL, 200, T0); /* same terms, no r: as it was */
    cr_assert_eq(remaining_of(l, T0, "a"), 6);
    update(l, "\"a\";q=20;w=1", NULL, NULL, 200, T0); /* new terms: full again */
    cr_assert_eq(remaining_of(l, T0, "a"), 20);
    /* a RateLimit member for an unknown policy, or one without a window, changes nothing */
    update(l, "\"b\";q=5", "\"b\";r=0, \"c\";r=0", NULL, 200, T0);
    cr_assert_eq(sl_client_limiter_policies(l, T0, NULL, 0), 1);
    cr_assert_eq(sl_client_limiter_wait(l, T0, 1), 0);
    done(l);
}

Test(client_limiter, unnamed_policies_by_their_place)
{
    sl_client_limiter *l = limiter();
    update(l, "10;w=1, 100;w=60", NULL, NULL, 200, T0);
    sl_client_policy_info info[4];
    cr_assert_eq(sl_client_limiter_policies(l, T0, info, 4), 2);
    cr_assert(!info[0].has_name && info[0].quota == 10 && info[1].quota == 100);
    cr_assert_eq(take_all(l, T0, 20), 10);
    cr_assert_eq(sl_client_limiter_policies(l, T0, info, 4), 2);
    cr_assert(info[0].remaining == 0 && info[1].remaining == 90);
    done(l);
}

Test(client_limiter, windows_too_long_for_a_gcra_are_not_mirrored)
{
    sl_client_limiter *l = limiter();
    update(l, "\"forever\";q=1;w=3000000000, \"ok\";q=1;w=2305843009", NULL, NULL, 200, T0);
    sl_client_policy_info info[4];
    cr_assert_eq(sl_client_limiter_policies(l, T0, info, 4), 1);
    cr_assert_str_eq(info[0].name, "ok");
    done(l);
}

Test(client_limiter, the_least_recently_advertised_policy_goes_first)
{
    sl_client_limiter *l = limiter();
    char v[64];
    int64_t t = T0;
    for (int i = 0; i < SL_CLIENT_POLICIES_MAX + 10; i++) {
        snprintf(v, sizeof v, "\"p%d\";q=%d;w=1", i, i + 1);
        update(l, v, NULL, NULL, 200, t);
        if (i == 20) /* p0 advertised again: now among the newest */
            update(l, "\"p0\";q=1;w=1", NULL, NULL, 200, t);
        cr_assert_leq(sl_client_limiter_policies(l, t, NULL, 0), SL_CLIENT_POLICIES_MAX);
    }
    sl_client_policy_info *info = calloc(SL_CLIENT_POLICIES_MAX, sizeof *info);
    cr_assert_eq(sl_client_limiter_policies(l, t, info, SL_CLIENT_POLICIES_MAX),
                 SL_CLIENT_POLICIES_MAX);
    /* p1 .. p10 went (p0 had been advertised again), oldest first */
    cr_assert_str_eq(info[0].name, "p11");
    cr_assert_str_eq(info[9].name, "p20");
    cr_assert_str_eq(info[10].name, "p0");
    cr_assert_str_eq(info[SL_CLIENT_POLICIES_MAX - 1].name, "p73");
    for (int i = 0; i < SL_CLIENT_POLICIES_MAX; i++)
        cr_assert(strcmp(info[i].name, "p5") != 0);
    /* an evicted policy is not enforced: p1 (q=2) is gone, p11 (q=12) stays */
    cr_assert_eq(take_all(l, t, 5), 1); /* p0: q=1 */
    free(info);
    done(l);
}

Test(client_limiter, bad_input)
{
    sl_client_limiter *l = limiter();
    cr_assert_eq(sl_client_limiter_wait(l, T0, -1), SL_ERR_COST);
    cr_assert_eq(sl_client_limiter_wait(l, -1, 1), SL_ERR_TIME);
    cr_assert_eq(sl_client_limiter_try_acquire(l, SL_TIME_MAX + 1, 1), SL_ERR_TIME);
    cr_assert_eq(sl_client_limiter_try_acquire(l, T0, -1), SL_ERR_COST);
    cr_assert_eq(sl_client_limiter_update(l, NULL, 200, T0), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_client_limiter_update(l, said(NULL, NULL, NULL), 200, -1), SL_ERR_TIME);
    cr_assert_eq(sl_client_limiter_block(l, T0, -1), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_client_limiter_policies(l, T0, NULL, 3), SL_ERR_ARGUMENT);
    cr_assert_eq(sl_client_limiter_init(NULL), SL_ERR_ARGUMENT);
    /* a caller's struct with out-of-range fields is read within its bounds */
    sl_rl_headers *h = calloc(1, sizeof *h);
    h->policy_count = 1000;
    h->limit_count = 1000;
    h->policies[0] = (sl_rl_policy){.has_name = true, .name_len = 5000, .quota = 3,
                                    .has_window = true, .window_s = 1};
    memset(h->policies[0].name, 'x', SL_RL_NAME_MAX);
    h->limits[0] = (sl_rl_limit){.name_len = 5000, .remaining = -4};
    memset(h->limits[0].name, 'x', SL_RL_NAME_MAX);
    cr_assert_eq(sl_client_limiter_update(l, h, 200, T0), SL_OK);
    sl_client_policy_info info;
    cr_assert_eq(sl_client_limiter_policies(l, T0, &info, 1), 1);
    cr_assert_eq(strlen(info.name), SL_RL_NAME_MAX - 1);
    cr_assert_eq(info.remaining, 0, "r below 0 reads as 0");
    free(h);
    done(l);
}

/* ---- against a slow model ---- */

Test(client_limiter, random_traces_against_a_token_bucket)
{
    /* The model: tokens kept as tokens * D, D = w * 10^9 (so a refill of dt
     * ns adds dt * q exactly), capacity q * D. Its wait for a cost c is the
     * time until tokens reach c, rounded up to the nanosecond. */
    static const int64_t qw[][2] = {{20, 1}, {7, 3}, {100, 60}, {3, 1}, {1000, 1}, {1, 86400}};
    test_rng seed = {23};
    int64_t checked = 0, admitted = 0;
    for (size_t c = 0; c < sizeof qw / sizeof qw[0]; c++) {
        int64_t q = qw[c][0], w = qw[c][1], D = w * SEC;
        char pol[64], lim[64];
        snprintf(pol, sizeof pol, "\"p\";q=%lld;w=%lld", (long long)q, (long long)w);
        snprintf(lim, sizeof lim, "\"p\";r=%lld", (long long)q);
        sl_client_limiter *l = limiter();
        int64_t t = 10 * SEC;
        update(l, pol, lim, NULL, 200, t);
        __int128 tokens = (__int128)q * D, last = t;
        for (int i = 0; i < 3000; i++) {
            uint64_t k = test_next(&seed) % 4;
            t += k == 0 ? 0 : k == 1 ? 1 : k == 2 ? 999 : (int64_t)(test_next(&seed) % (2 * D / q + 1));
            tokens += (__int128)(t - last) * q;
            if (tokens > (__int128)q * D)
                tokens = (__int128)q * D;
            last = t;
            if (test_next(&seed) % 20 == 0) { /* a response: exactly r remain */
                int64_t r = (int64_t)(test_next(&seed) % (uint64_t)(q + 1));
                snprintf(lim, sizeof lim, "\"p\";r=%lld", (long long)r);
                update(l, pol, lim, NULL, 200, t);
                tokens = (__int128)r * D;
                continue;
            }
            static const int costs[] = {1, 1, 1, 2, 0};
            int64_t cost = test_next(&seed) % 6 == 5 ? q : costs[test_next(&seed) % 5];
            __int128 need = (__int128)cost * D - tokens;
            int64_t want = cost > q ? SL_NEVER : need <= 0 ? 0 : (int64_t)((need + q - 1) / q);
            int64_t got = sl_client_limiter_wait(l, t, cost);
            cr_assert_eq(got, want, "q=%lld w=%lld t=%lld cost=%lld: wait %lld, model %lld",
                         (long long)q, (long long)w, (long long)t, (long long)cost,
                         (long long)got, (long long)want);
            int ok = sl_client_limiter_try_acquire(l, t, cost);
            cr_assert_eq(ok, cost <= q && tokens >= (__int128)cost * D);
            if (ok)
                tokens -= (__int128)cost * D;
            checked++;
            admitted += ok;
            int64_t rem = remaining_of(l, t, "p");
            cr_assert(rem >= 0 && rem <= q && (__int128)rem * D <= tokens &&
                          tokens < (__int128)(rem + 1) * D,
                      "remaining %lld", (long long)rem);
        }
        done(l);
    }
    printf("client limiter: %lld decisions and waits equal to the model's, %lld admitted\n",
           (long long)checked, (long long)admitted);
}
