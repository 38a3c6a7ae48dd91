/*
 * test_reservation.c: reservation ids (src/proto/reservation.c): a round
 * trip of every field at its bounds, the head the marker is named by, and
 * every refusal of a malformed id, by its words.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/reservation.h"

static sl_reservation sample(void)
{
    return (sl_reservation){
        .random = {0x0123456789abcdefull, 0xfedcba9876543210ull},
        .ttl_ms = 600000, .cost = 3, .tokens = 1000, .print = 42,
        .policy = "chat", .policy_len = 4, .tier = "paid", .tier_len = 4,
        .key = "alice", .key_len = 5,
    };
}

static const char *decode(const char *text, sl_reservation *r, char *buf, size_t cap)
{
    return sl_reservation_decode(text, strlen(text), r, buf, cap);
}

Test(reservation, round_trip)
{
    sl_reservation r = sample(), back;
    char text[512], buf[256];
    size_t n = sl_reservation_encode(&r, text, sizeof text);
    cr_assert_eq(n, sl_reservation_text_len(&r));
    cr_assert_eq(n, 2 * (SL_RESERVATION_FIXED + 1 + 4 + 1 + 4 + 2 + 5));
    cr_assert_eq(strlen(text), n);
    cr_assert_null(decode(text, &back, buf, sizeof buf));
    cr_assert_eq(back.random[0], r.random[0]);
    cr_assert_eq(back.random[1], r.random[1]);
    cr_assert_eq(back.ttl_ms, 600000);
    cr_assert_eq(back.cost, 3);
    cr_assert_eq(back.tokens, 1000);
    cr_assert_eq(back.print, 42);
    cr_assert_eq(back.policy_len, 4);
    cr_assert_eq(memcmp(back.policy, "chat", 4), 0);
    cr_assert_eq(memcmp(back.tier, "paid", 4), 0);
    cr_assert_eq(back.key_len, 5);
    cr_assert_eq(memcmp(back.key, "alice", 5), 0);
}

Test(reservation, no_tier_and_the_largest_numbers)
{
    sl_reservation r = sample(), back;
    r.tier = NULL;
    r.tier_len = 0;
    r.cost = r.tokens = r.ttl_ms = INT64_MAX;
    char text[512], buf[256];
    cr_assert_gt(sl_reservation_encode(&r, text, sizeof text), 0);
    cr_assert_null(decode(text, &back, buf, sizeof buf));
    cr_assert_eq(back.tier_len, 0);
    cr_assert_eq(back.cost, INT64_MAX);
    cr_assert_eq(back.ttl_ms, INT64_MAX);
}

Test(reservation, the_head_is_every_field_before_the_key)
{
    sl_reservation r = sample();
    char text[512], head[512];
    size_t n = sl_reservation_encode(&r, text, sizeof text);
    size_t h = sl_reservation_head(&r, head, sizeof head);
    cr_assert_eq(h, n - 2 * (2 + 5));
    cr_assert_eq(memcmp(head, text, h), 0);
    /* any estimate changed names another marker */
    r.tokens++;
    char other[512];
    cr_assert_eq(sl_reservation_head(&r, other, sizeof other), h);
    cr_assert_neq(memcmp(head, other, h), 0);
}

Test(reservation, out_of_range_fields_or_room_encode_nothing)
{
    char text[512];
    sl_reservation r = sample();
    cr_assert_eq(sl_reservation_encode(&r, text, sl_reservation_text_len(&r) - 1), 0);
    cr_assert_gt(sl_reservation_encode(&r, text, sl_reservation_text_len(&r)), 0);
    r.ttl_ms = 0;
    cr_assert_eq(sl_reservation_encode(&r, text, sizeof text), 0);
    r = sample();
    r.cost = -1;
    cr_assert_eq(sl_reservation_encode(&r, text, sizeof text), 0);
    r = sample();
    r.key_len = 0;
    cr_assert_eq(sl_reservation_encode(&r, text, sizeof text), 0);
    r = sample();
    r.policy_len = 0;
    cr_assert_eq(sl_reservation_head(&r, text, sizeof text), 0);
}

Test(reservation, malformed_ids_are_refused_by_what_is_wrong)
{
    sl_reservation r = sample(), back;
    char text[512], buf[256];
    size_t n = sl_reservation_encode(&r, text, sizeof text);
    struct {
        const char *text, *why;
    } bad[] = {
        {"", "empty"},
        {"abc", "an odd number of hex digits"},
        {"zz", "not hexadecimal"},
        {"01", "too short"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *why = decode(bad[i].text, &back, buf, sizeof buf);
        cr_assert_not_null(why, "%s", bad[i].text);
        cr_assert_str_eq(why, bad[i].why, "%s", bad[i].text);
    }
    char t[512];
    memcpy(t, text, n + 1);
    t[1] = '2'; /* version 2 */
    cr_assert_str_eq(decode(t, &back, buf, sizeof buf), "of an unknown version");
    memcpy(t, text, n + 1);
    memcpy(t + 34, "0000000000000000", 16); /* ttl 0 */
    cr_assert_str_eq(decode(t, &back, buf, sizeof buf), "holds an out-of-range number");
    memcpy(t, text, n + 1);
    memcpy(t + 50, "8000000000000000", 16); /* cost past INT64_MAX */
    cr_assert_str_eq(decode(t, &back, buf, sizeof buf), "holds an out-of-range number");
    memcpy(t, text, n + 1);
    t[n - 2] = '\0'; /* a byte of the key short */
    cr_assert_str_eq(decode(t, &back, buf, sizeof buf),
                     "of a key length that does not match its text");
    memcpy(t, text, n + 1);
    memcpy(t + 2 * SL_RESERVATION_FIXED, "ff", 2); /* a policy longer than the id */
    cr_assert_str_eq(decode(t, &back, buf, sizeof buf), "truncated (the policy)");
    cr_assert_str_eq(sl_reservation_decode(text, n, &back, buf, n / 2 - 1),
                     "longer than any reservation id");
    /* upper-case digits are read as hex too */
    memcpy(t, text, n + 1);
    for (size_t i = 0; i < n; i++)
        if (t[i] >= 'a' && t[i] <= 'f')
            t[i] = (char)(t[i] - 'a' + 'A');
    cr_assert_null(decode(t, &back, buf, sizeof buf));
    cr_assert_eq(back.tokens, 1000);
}
