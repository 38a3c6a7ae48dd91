/*
 * fuzz_reservation.c: libFuzzer target for reservation ids
 * (src/proto/reservation.c).
 *
 * The input is an id's text, decoded from an exact-size copy into a buffer
 * of exactly half its length. CHECK() aborts when a guarantee of
 * reservation.h breaks: a refusal says what is wrong; an id that decodes
 * has its fields in range and inside the buffer, encodes back to the same
 * text (in lower case), and its head is a prefix of that text.
 *
 * Build and run: make fuzz (FUZZ_SECONDS=N to change the time per target).
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proto/reservation.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = copy_of(data, size);
    size_t cap = size / 2;
    char *buf = malloc(cap ? cap : 1);
    CHECK(buf);
    sl_reservation r;
    const char *why = sl_reservation_decode(text, size, &r, buf, cap);
    if (why) {
        CHECK(*why);
    } else {
        CHECK(r.ttl_ms >= 1 && r.cost >= 0 && r.tokens >= 0);
        CHECK(r.policy_len >= 1 && r.policy_len <= SL_RESERVATION_NAME_MAX);
        CHECK(r.tier_len <= SL_RESERVATION_NAME_MAX);
        CHECK(r.key_len >= 1 && r.key_len <= SL_RESERVATION_KEY_MAX);
        CHECK(r.key >= buf && r.key + r.key_len == buf + cap);
        size_t len = sl_reservation_text_len(&r);
        CHECK(len == size);
        char *back = malloc(len + 1);
        CHECK(back);
        CHECK(sl_reservation_encode(&r, back, len + 1) == len);
        CHECK(back[len] == '\0');
        for (size_t i = 0; i < len; i++)
            CHECK(back[i] == tolower((unsigned char)text[i]));
        CHECK(sl_reservation_encode(&r, back, len - 1) == 0);
        size_t h = sl_reservation_head(&r, back, len);
        CHECK(h > 0 && h < len);
        for (size_t i = 0; i < h; i++)
            CHECK(back[i] == tolower((unsigned char)text[i]));
        free(back);
    }
    free(buf);
    free(text);
    return 0;
}
