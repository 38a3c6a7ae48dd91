/*
 * The output buffer (common/buf.h) on its own: how it grows, where it
 * stops, and that a failure sticks until clear(). The RESP encoders over it
 * are tested in test_resp.c, its allocation failures in test_alloc_fail.c.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "common/alloc.h"
#include "common/buf.h"

Test(buf, nothing_is_allocated_before_the_first_write)
{
    sl_buf b;
    sl_buf_init(&b, 3, 0);
    cr_assert_null(b.data);
    cr_assert_eq(b.len, 0);
    cr_assert_eq(b.cap, 0);
    cr_assert_eq(b.max, SL_BUF_DEFAULT_MAX);
    cr_assert_eq(b.proto, 3, "the encoders' tag is kept as given");
    cr_assert_eq(b.failed, 0);
    sl_buf_free(&b);
}

Test(buf, grows_by_doubling_from_256_bytes)
{
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    char chunk[100];
    memset(chunk, 'x', sizeof chunk);
    cr_assert_eq(sl_buf_add(&b, chunk, 1), 0);
    cr_assert_eq(b.cap, 256);
    size_t caps[] = {256, 512, 1024, 2048};
    for (size_t i = 0, want = 0; i < 20; i++) {
        cr_assert_eq(sl_buf_add(&b, chunk, sizeof chunk), 0);
        size_t len = 1 + (i + 1) * sizeof chunk;
        while (caps[want] < len)
            want++;
        cr_assert_eq(b.len, len);
        cr_assert_eq(b.cap, caps[want], "len %zu: cap %zu", len, b.cap);
    }
    cr_assert_eq(b.data[0], 'x');
    cr_assert_eq(b.data[b.len - 1], 'x');
    sl_buf_free(&b);
    cr_assert_null(b.data);
    cr_assert_eq(b.len + b.cap, 0);
}

Test(buf, a_reservation_within_the_allocation_does_not_move_it)
{
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    char *w = sl_buf_reserve(&b, 10);
    cr_assert_not_null(w);
    cr_assert_eq(b.cap, 256);
    memcpy(w, "0123456789", 10);
    b.len += 10;
    char *w2 = sl_buf_reserve(&b, 246);
    cr_assert_eq(w2, b.data + 10, "the rest of the 256 bytes, in place");
    cr_assert_eq(b.cap, 256);
    cr_assert_neq(sl_buf_reserve(&b, 247), NULL);
    cr_assert_eq(b.cap, 512, "one byte more: the next doubling");
    cr_assert_eq(memcmp(b.data, "0123456789", 10), 0);
    sl_buf_free(&b);
}

Test(buf, stops_at_max_and_the_failure_sticks_until_clear)
{
    sl_buf b;
    sl_buf_init(&b, 2, 300);
    char chunk[200];
    memset(chunk, 'y', sizeof chunk);
    cr_assert_eq(sl_buf_add(&b, chunk, 200), 0);
    cr_assert_eq(sl_buf_add(&b, chunk, 100), 0, "exactly max fits");
    cr_assert_eq(b.cap, 300, "the doubling is clamped to max");
    cr_assert_eq(sl_buf_add(&b, chunk, 1), -1, "one byte past max");
    cr_assert_eq(b.failed, 1);
    cr_assert_eq(b.len, 300, "what was written stays");
    cr_assert_eq(sl_buf_add(&b, "", 0), -1, "every later write fails, even an empty one");
    cr_assert_null(sl_buf_reserve(&b, 0));
    sl_buf_clear(&b);
    cr_assert_eq(b.failed, 0);
    cr_assert_eq(b.len, 0);
    cr_assert_eq(b.cap, 300, "clear keeps the allocation");
    cr_assert_eq(sl_buf_add(&b, chunk, 10), 0);
    /* A size that overflows is a failure too, not a wrap. */
    cr_assert_null(sl_buf_reserve(&b, SIZE_MAX));
    cr_assert_eq(b.failed, 1);
    sl_buf_clear(&b);
    cr_assert_eq(sl_buf_fail(&b), -1);
    cr_assert_eq(b.failed, 1);
    sl_buf_free(&b);
    cr_assert_eq(b.failed, 0, "free leaves a buffer that may be reused");
}

Test(buf, a_failed_growth_keeps_the_bytes)
{
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    char chunk[256];
    memset(chunk, 'z', sizeof chunk);
    cr_assert_eq(sl_buf_add(&b, chunk, sizeof chunk), 0);
    char *before = b.data;
    sl_alloc_fail_nth(1);
    cr_assert_eq(sl_buf_add(&b, chunk, 1), -1);
    sl_alloc_fail_nth(0);
    cr_assert_eq(b.failed, 1);
    cr_assert_eq(b.data, before, "realloc failed: the old block stays");
    cr_assert_eq(b.len, sizeof chunk);
    cr_assert_eq(b.cap, sizeof chunk);
    cr_assert_eq(b.data[255], 'z');
    sl_buf_free(&b);
}
