/*
 * fuzz_client_headers.c: libFuzzer target for the client's header parser
 * (sl_rl_parse, src/client/headers.c and sf.c) and the client-side limiter
 * it feeds (src/client/limiter.c).
 *
 * The first input byte picks what to do with the rest:
 *   bits 0-1   the response's status: unknown (0), 200, 429 or 503
 *   bit 2      raw: the rest is one value, given to RateLimit-Policy and
 *              RateLimit both (the RFC 9651 reader at full depth); else
 *              the rest's lines (split at '\n') are field lines, each
 *              "name:value" (a line without ':' is a name with no value)
 *   bits 3-7   the cost asked of the limiter (0 .. 31)
 * Names and values are exact-size heap copies. CHECK() aborts when a
 * guarantee of sluice_client.h breaks: at most 16 members of each field,
 * every number in its range (no negative remaining, quota, reset or wait),
 * texts NUL-terminated at their length and within their buffers, a field
 * ignored whole keeping nothing and saying why, the same answer twice;
 * and the limiter: a wait of 0 is admitted at once, a finite wait w is
 * refused before it and admitted at now + w, every remaining in [0, q].
 *
 * Build and run: make fuzz (FUZZ_SECONDS=N to change the time per target).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fuzz.h"
#include "sluice_client.h"

#define MAX_LINES 64
#define NOW_MS INT64_C(1796126400000)
#define T0 (INT64_C(1000) * 1000000000)

static void check_text(const char *s, size_t len, size_t cap)
{
    CHECK(len < cap);
    CHECK(s[len] == '\0' && strlen(s) == len);
}

static void check_parsed(const sl_rl_headers *h)
{
    CHECK(h->policy_count <= SL_RL_MEMBERS_MAX && h->limit_count <= SL_RL_MEMBERS_MAX);
    for (size_t i = 0; i < h->policy_count; i++) {
        const sl_rl_policy *p = &h->policies[i];
        CHECK(p->quota >= 0);
        CHECK(!p->has_window || p->window_s > 0);
        check_text(p->name, p->name_len, SL_RL_NAME_MAX);
        CHECK(p->has_name || p->name_len == 0);
        check_text(p->unit, p->unit_len, SL_RL_UNIT_MAX);
        check_text(p->partition, p->partition_len, SL_RL_PARTITION_MAX);
    }
    for (size_t i = 0; i < h->limit_count; i++) {
        const sl_rl_limit *l = &h->limits[i];
        CHECK(l->remaining >= 0);
        CHECK(!l->has_reset || (l->reset_ms >= 0 && l->reset_ms % 1000 == 0));
        check_text(l->name, l->name_len, SL_RL_NAME_MAX);
        check_text(l->partition, l->partition_len, SL_RL_PARTITION_MAX);
    }
    if (h->ignored & SL_RL_IGNORED_POLICY)
        CHECK(h->policy_count == 0 && h->policies_skipped == 0 && h->policy_error != NULL);
    else
        CHECK(h->policy_error == NULL);
    if (h->ignored & SL_RL_IGNORED_RATELIMIT)
        CHECK(h->limit_count == 0 && h->limits_skipped == 0 && h->limit_error != NULL);
    else
        CHECK(h->limit_error == NULL);
    CHECK(h->has_x || !(h->has_x_limit || h->has_x_remaining || h->has_x_reset));
    CHECK(!h->has_x_remaining || h->x_remaining >= 0);
    CHECK(!h->has_x_reset || h->x_reset_ms >= 0);
    CHECK(!h->has_retry_after || h->retry_after_ms >= 0);
    CHECK(!(h->has_retry_after && (h->ignored & SL_RL_IGNORED_RETRY_AFTER)));
}

static bool same(const sl_rl_headers *a, const sl_rl_headers *b)
{
    if (a->policy_count != b->policy_count || a->limit_count != b->limit_count ||
        a->ignored != b->ignored || a->has_retry_after != b->has_retry_after ||
        a->retry_after_ms != b->retry_after_ms || a->x_limit != b->x_limit ||
        a->x_remaining != b->x_remaining || a->x_reset_ms != b->x_reset_ms)
        return false;
    for (size_t i = 0; i < a->policy_count; i++)
        if (a->policies[i].quota != b->policies[i].quota ||
            strcmp(a->policies[i].name, b->policies[i].name) != 0)
            return false;
    for (size_t i = 0; i < a->limit_count; i++)
        if (a->limits[i].remaining != b->limits[i].remaining ||
            strcmp(a->limits[i].name, b->limits[i].name) != 0)
            return false;
    return true;
}

static void check_limiter(sl_client_limiter *lim, const sl_rl_headers *h, int status, int64_t cost)
{
    CHECK(sl_client_limiter_update(lim, h, status, T0) == SL_OK);
    CHECK(sl_client_limiter_update(lim, h, status, T0 + 1000) == SL_OK); /* kept states */
    int64_t now = T0 + 1000;
    sl_client_policy_info info[SL_CLIENT_POLICIES_MAX];
    int n = sl_client_limiter_policies(lim, now, info, SL_CLIENT_POLICIES_MAX);
    CHECK(n >= 0 && n <= SL_CLIENT_POLICIES_MAX);
    for (int i = 0; i < n; i++)
        CHECK(info[i].remaining >= 0 && info[i].remaining <= info[i].quota);
    int64_t costs[] = {0, 1, cost};
    for (size_t k = 0; k < sizeof costs / sizeof costs[0]; k++) {
        int64_t c = costs[k];
        int64_t w = sl_client_limiter_wait(lim, now, c);
        CHECK(w >= 0);
        if (w == 0) {
            CHECK(sl_client_limiter_try_acquire(lim, now, c) == 1);
        } else if (w == SL_NEVER) {
            CHECK(sl_client_limiter_try_acquire(lim, now, c) == 0);
        } else {
            CHECK(sl_client_limiter_try_acquire(lim, now, c) == 0);
            if (w - 1 > 0)
                CHECK(sl_client_limiter_try_acquire(lim, now + w - 1, c) == 0);
            if (w <= SL_TIME_MAX - now) {
                CHECK(sl_client_limiter_try_acquire(lim, now + w, c) == 1);
                now += w;
            }
        }
    }
    n = sl_client_limiter_policies(lim, now, info, SL_CLIENT_POLICIES_MAX);
    for (int i = 0; i < n; i++)
        CHECK(info[i].remaining >= 0 && info[i].remaining <= info[i].quota);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    static const int statuses[] = {0, 200, 429, 503};
    int status = statuses[data[0] & 3];
    bool raw = data[0] & 4;
    int64_t cost = data[0] >> 3;
    data++;
    size--;

    sl_header_line lines[MAX_LINES];
    char *copies[2 * MAX_LINES];
    size_t n = 0, ncopies = 0;
    if (raw) {
        copies[ncopies++] = copy_of(data, size);
        lines[n++] = (sl_header_line){"RateLimit-Policy", 16, copies[0], size};
        lines[n++] = (sl_header_line){"RateLimit", 9, copies[0], size};
    } else {
        size_t i = 0;
        while (i < size && n < MAX_LINES) {
            const uint8_t *nl = memchr(data + i, '\n', size - i);
            size_t end = nl ? (size_t)(nl - data) : size;
            const uint8_t *colon = memchr(data + i, ':', end - i);
            size_t name_end = colon ? (size_t)(colon - data) : end;
            char *name = copy_of(data + i, name_end - i);
            size_t vstart = colon ? name_end + 1 : end;
            char *value = copy_of(data + vstart, end - vstart);
            copies[ncopies++] = name;
            copies[ncopies++] = value;
            lines[n++] = (sl_header_line){name, name_end - i, colon ? value : NULL,
                                          end - vstart};
            i = end + 1;
        }
    }

    sl_rl_headers *h = malloc(sizeof *h), *again = malloc(sizeof *again);
    CHECK(h && again);
    sl_rl_parse(lines, n, NOW_MS, h);
    check_parsed(h);
    sl_rl_parse(lines, n, NOW_MS, again);
    CHECK(same(h, again));

    /* Retry-After alone reads as the parser read it. */
    for (size_t i = 0; i < n; i++) {
        if (lines[i].name_len != 11 || strncasecmp(lines[i].name, "retry-after", 11) != 0)
            continue;
        int64_t ms = -1;
        int ok = lines[i].value_len <= SL_RL_FIELD_MAX &&
                 sl_rl_parse_retry_after(lines[i].value, lines[i].value_len, NOW_MS, &ms) == 1;
        CHECK(ok == h->has_retry_after);
        CHECK(!ok || ms == h->retry_after_ms);
        break;
    }

    sl_client_limiter *lim = malloc(sizeof *lim);
    CHECK(lim && sl_client_limiter_init(lim) == SL_OK);
    check_limiter(lim, h, status, cost);
    sl_client_limiter_destroy(lim);

    free(lim);
    free(h);
    free(again);
    for (size_t i = 0; i < ncopies; i++)
        free(copies[i]);
    return 0;
}
