/*
 * test_grpc_frame.c: gRPC's message prefix, grpc-timeout, grpc-status names,
 * grpc-message's percent-encoding and the content type
 * (src/proto/grpc_frame.c).
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "proto/grpc_frame.h"

Test(grpc_frame, a_prefix_and_its_message_read_back)
{
    uint8_t buf[64];
    sl_grpc_prefix_write(buf, false, 3);
    memcpy(buf + 5, "abc", 3);
    cr_assert(memcmp(buf, "\0\0\0\0\3", 5) == 0);
    sl_grpc_message m;
    cr_assert_eq(sl_grpc_message_parse(buf, 8, 100, &m), 8);
    cr_assert(!m.compressed);
    cr_assert_eq(m.len, 3);
    cr_assert_eq(m.data, buf + 5);
    /* a second message after the first: only the first is taken */
    sl_grpc_prefix_write(buf + 8, true, 0);
    cr_assert_eq(sl_grpc_message_parse(buf, 13, 100, &m), 8);
    cr_assert_eq(sl_grpc_message_parse(buf + 8, 5, 100, &m), 5);
    cr_assert(m.compressed);
    cr_assert_eq(m.len, 0);
}

Test(grpc_frame, the_length_is_big_endian)
{
    uint8_t p[5];
    sl_grpc_prefix_write(p, false, 0x01020304u);
    cr_assert(memcmp(p, "\x00\x01\x02\x03\x04", 5) == 0);
    sl_grpc_message m;
    cr_assert_eq(sl_grpc_message_parse(p, 5, 0x01020304u, &m), SL_GRPC_INCOMPLETE);
    cr_assert_eq(sl_grpc_message_parse(p, 5, 0x01020303u, &m), SL_GRPC_TOO_LARGE);
    sl_grpc_prefix_write(p, false, UINT32_MAX);
    cr_assert_eq(sl_grpc_message_parse(p, 5, SIZE_MAX, &m), sizeof(long) > 4 ? SL_GRPC_INCOMPLETE
                                                                             : SL_GRPC_TOO_LARGE);
}

Test(grpc_frame, every_cut_is_incomplete)
{
    uint8_t buf[12];
    sl_grpc_prefix_write(buf, false, 7);
    memcpy(buf + 5, "1234567", 7);
    sl_grpc_message m = {.len = 99};
    for (size_t n = 0; n < 12; n++)
        cr_assert_eq(sl_grpc_message_parse(buf, n, 100, &m), SL_GRPC_INCOMPLETE, "cut at %zu", n);
    cr_assert_eq(m.len, 99); /* untouched until a message is whole */
    cr_assert_eq(sl_grpc_message_parse(buf, 12, 100, &m), 12);
}

Test(grpc_frame, a_bad_flag_and_a_too_large_length)
{
    uint8_t p[5] = {2, 0, 0, 0, 1};
    sl_grpc_message m;
    cr_assert_eq(sl_grpc_message_parse(p, 1, 100, &m), SL_GRPC_MALFORMED);
    cr_assert_eq(sl_grpc_message_parse(p, 5, 100, &m), SL_GRPC_MALFORMED);
    sl_grpc_prefix_write(p, false, 101);
    /* known from the prefix alone */
    cr_assert_eq(sl_grpc_message_parse(p, 5, 100, &m), SL_GRPC_TOO_LARGE);
}

static int64_t timeout_of(const char *s)
{
    int64_t ns = -7;
    cr_assert_eq(sl_grpc_timeout_parse(s, strlen(s), &ns), 0, "'%s' parses", s);
    return ns;
}

Test(grpc_frame, grpc_timeout_in_every_unit)
{
    cr_assert_eq(timeout_of("1H"), INT64_C(3600000000000));
    cr_assert_eq(timeout_of("2M"), INT64_C(120000000000));
    cr_assert_eq(timeout_of("3S"), INT64_C(3000000000));
    cr_assert_eq(timeout_of("250m"), INT64_C(250000000));
    cr_assert_eq(timeout_of("15u"), INT64_C(15000));
    cr_assert_eq(timeout_of("99999999n"), INT64_C(99999999));
    cr_assert_eq(timeout_of("0m"), 0);
    cr_assert_eq(timeout_of("00000001S"), INT64_C(1000000000));
    /* 99999999 minutes fit (190 years); 99999999 hours do not, and saturate */
    cr_assert_eq(timeout_of("99999999M"), INT64_C(99999999) * 60000000000);
    cr_assert_eq(timeout_of("99999999H"), INT64_MAX);
}

Test(grpc_frame, grpc_timeout_refusals)
{
    const char *bad[] = {"", "S", "1", "10", "123456789S", "1s", "1h", "-1S", "1 S", " 1S",
                         "1S ", "1.5S", "1K", "+1S", "1SS"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ns = 42;
        cr_assert_eq(sl_grpc_timeout_parse(bad[i], strlen(bad[i]), &ns), -1, "'%s'", bad[i]);
        cr_assert_eq(ns, 42);
    }
}

Test(grpc_frame, status_names)
{
    cr_assert_str_eq(sl_grpc_status_name(SL_GRPC_OK), "OK");
    cr_assert_str_eq(sl_grpc_status_name(SL_GRPC_UNIMPLEMENTED), "UNIMPLEMENTED");
    cr_assert_str_eq(sl_grpc_status_name(12), "UNIMPLEMENTED");
    cr_assert_str_eq(sl_grpc_status_name(4), "DEADLINE_EXCEEDED");
    cr_assert_str_eq(sl_grpc_status_name(16), "UNAUTHENTICATED");
    cr_assert_null(sl_grpc_status_name(17));
    cr_assert_null(sl_grpc_status_name(-1));
}

Test(grpc_frame, grpc_message_percent_encoding)
{
    char out[64];
    const char *msg = "100% sure: caf\xc3\xa9\n";
    size_t n = sl_grpc_message_encode(msg, strlen(msg), out, sizeof out);
    cr_assert_str_eq(out, "100%25 sure: caf%C3%A9%0A");
    cr_assert_eq(n, strlen(out));
    /* printable ASCII stays, including space and '~' */
    n = sl_grpc_message_encode(" ~a", 3, out, sizeof out);
    cr_assert_str_eq(out, " ~a");
    n = sl_grpc_message_encode("\x7f\x1f", 2, out, sizeof out);
    cr_assert_str_eq(out, "%7F%1F");
    /* cut: the whole length is still returned, no escape is halved */
    n = sl_grpc_message_encode("\n\n\n", 3, out, 5);
    cr_assert_eq(n, 9);
    cr_assert_str_eq(out, "%0A");
    n = sl_grpc_message_encode("ab\ncd", 5, out, 5);
    cr_assert_eq(n, 7);
    cr_assert_str_eq(out, "ab"); /* nothing after the cut either */
    n = sl_grpc_message_encode("abc", 3, NULL, 0);
    cr_assert_eq(n, 3);
}

Test(grpc_frame, grpc_message_decodes_back_and_forgives)
{
    char enc[256], dec[256];
    char all[128];
    for (int i = 0; i < 127; i++)
        all[i] = (char)(i + 1);
    size_t n = sl_grpc_message_encode(all, 127, enc, sizeof enc);
    cr_assert_lt(n, sizeof enc);
    cr_assert_eq(sl_grpc_message_decode(enc, n, dec), 127);
    cr_assert(memcmp(dec, all, 127) == 0);
    /* lowercase hex decodes; broken escapes pass as they are */
    cr_assert_eq(sl_grpc_message_decode("%c3%A9", 6, dec), 2);
    cr_assert(memcmp(dec, "\xc3\xa9", 2) == 0);
    const char *odd = "50% off %zz %4";
    cr_assert_eq(sl_grpc_message_decode(odd, strlen(odd), dec), strlen(odd));
    cr_assert_str_eq(dec, odd);
}

Test(grpc_frame, content_types)
{
    const char *ok[] = {"application/grpc", "application/grpc+proto", "application/grpc;x=1",
                        "Application/GRPC+Proto; charset=utf-8"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        cr_assert(sl_grpc_content_type_ok(ok[i], strlen(ok[i])), "'%s'", ok[i]);
    const char *bad[] = {"", "application/json", "application/grpc+json", "application/grpcx",
                         "application/grp", "application/grpc+protobuf"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert(!sl_grpc_content_type_ok(bad[i], strlen(bad[i])), "'%s'", bad[i]);
}
