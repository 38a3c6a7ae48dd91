/*
 * The decision log's parts that need no server: the ring (common/spsc.h)
 * on one thread against a queue that always tells the truth, the sampling
 * rate's parser and the sampler (common/sample.h), and the JSON line
 * (proto/dlog_json.h): its fields, its escaping of every byte, and its
 * time. The ring under two threads is test_mt_spsc.c; the whole log is
 * tests/integration/test_decision_log.py.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/sample.h"
#include "common/spsc.h"
#include "proto/dlog_json.h"

/* ---- the ring ---- */

Test(spsc, refuses_sizes_that_are_not_powers_of_two_in_range)
{
    sl_spsc r;
    cr_assert_eq(sl_spsc_init(&r, 100), -1);
    cr_assert_eq(sl_spsc_init(&r, 32), -1);
    cr_assert_eq(sl_spsc_init(&r, (size_t)1 << 31), -1);
    cr_assert_eq(sl_spsc_init(&r, 64), 0);
    cr_assert_eq(sl_spsc_max_record(&r), 24);
    cr_assert_null(sl_spsc_reserve(&r, 0), "an empty record is refused");
    cr_assert_null(sl_spsc_reserve(&r, 25), "half the ring less a header is the most");
    cr_assert_not_null(sl_spsc_reserve(&r, 24));
    sl_spsc_free(&r);
    sl_spsc_free(&r); /* twice does nothing */
}

Test(spsc, an_empty_ring_peeks_nothing)
{
    sl_spsc r;
    cr_assert_eq(sl_spsc_init(&r, 256), 0);
    size_t len = 99;
    cr_assert_null(sl_spsc_peek(&r, &len));
    cr_assert_eq(sl_spsc_used(&r), 0);
    sl_spsc_free(&r);
}

Test(spsc, a_reserved_record_is_unseen_until_committed)
{
    sl_spsc r;
    cr_assert_eq(sl_spsc_init(&r, 256), 0);
    char *p = sl_spsc_reserve(&r, 5);
    memcpy(p, "hello", 5);
    size_t len;
    cr_assert_null(sl_spsc_peek(&r, &len));
    sl_spsc_commit(&r);
    const char *q = sl_spsc_peek(&r, &len);
    cr_assert_not_null(q);
    cr_assert_eq(len, 5);
    cr_assert_eq(memcmp(q, "hello", 5), 0);
    cr_assert_eq(sl_spsc_peek(&r, &len), q, "peeking again before release: the same record");
    cr_assert_eq(sl_spsc_used(&r), 16, "a header and 5 bytes padded to 8");
    sl_spsc_release(&r);
    cr_assert_null(sl_spsc_peek(&r, &len));
    cr_assert_eq(sl_spsc_used(&r), 0);
    sl_spsc_free(&r);
}

Test(spsc, a_full_ring_refuses_until_the_consumer_releases)
{
    sl_spsc r;
    cr_assert_eq(sl_spsc_init(&r, 64), 0);
    /* Records of 8 bytes take 16: four fill the ring. */
    for (int i = 0; i < 4; i++) {
        char *p = sl_spsc_reserve(&r, 8);
        cr_assert_not_null(p, "record %d", i);
        memset(p, 'a' + i, 8);
        sl_spsc_commit(&r);
    }
    cr_assert_null(sl_spsc_reserve(&r, 1), "full: refused, nothing changed");
    cr_assert_eq(sl_spsc_used(&r), 64);
    size_t len;
    const char *q = sl_spsc_peek(&r, &len);
    cr_assert_eq(q[0], 'a');
    cr_assert_null(sl_spsc_reserve(&r, 1), "peeked is not released");
    sl_spsc_release(&r);
    char *p = sl_spsc_reserve(&r, 8);
    cr_assert_not_null(p, "the released record's room is the producer's again");
    memset(p, 'e', 8);
    sl_spsc_commit(&r);
    for (char want = 'b'; want <= 'e'; want++) {
        q = sl_spsc_peek(&r, &len);
        cr_assert_not_null(q);
        cr_assert_eq(len, 8);
        cr_assert_eq(q[0], want);
        cr_assert_eq(q[7], want);
        sl_spsc_release(&r);
    }
    cr_assert_null(sl_spsc_peek(&r, &len));
    sl_spsc_free(&r);
}

/* The slow model: a queue of records, and the bytes the ring would use. */
typedef struct model {
    unsigned char data[4096][64];
    size_t len[4096];
    size_t head, tail;
} model;

Test(spsc, random_records_come_out_in_order_and_whole, .timeout = 30)
{
    /* Random lengths, random interleaving of writes and reads over many
     * wraps, against a queue: every record committed comes out once, in
     * order, byte for byte; a refusal happens only when the ring cannot
     * hold the record (its bytes in use plus the record's span, and the
     * pad when it would cross the end). */
    static model m;
    sl_spsc r;
    cr_assert_eq(sl_spsc_init(&r, 512), 0);
    uint64_t rng = 42;
    uint64_t pos = 0; /* the model's count of bytes ever written, as the ring's head */
    uint64_t tailpos = 0;
    size_t spans[4096];
    size_t refused = 0, passed = 0;
    for (int step = 0; step < 200000; step++) {
        rng = rng * 6364136223846793005u + 1442695040888963407u;
        unsigned x = (unsigned)(rng >> 33);
        if (x % 3 != 0) {
            size_t len = 1 + (x >> 2) % 60;
            size_t span = (8 + len + 7) / 8 * 8;
            size_t at = (size_t)(pos % 512);
            size_t pad = at + span > 512 ? 512 - at : 0;
            bool fits = pos + pad + span - tailpos <= 512;
            unsigned char *p = sl_spsc_reserve(&r, len);
            cr_assert_eq(p != NULL, fits, "step %d: the ring %s a record of %zu bytes", step,
                         p ? "took" : "refused", len);
            if (!p) {
                refused++;
                continue;
            }
            size_t slot = m.head % 4096;
            for (size_t i = 0; i < len; i++)
                m.data[slot][i] = p[i] = (unsigned char)(x + i * 7);
            m.len[slot] = len;
            spans[slot] = pad + span;
            m.head++;
            pos += pad + span;
            sl_spsc_commit(&r);
        } else {
            size_t len;
            const unsigned char *q = sl_spsc_peek(&r, &len);
            cr_assert_eq(q != NULL, m.tail < m.head);
            if (!q)
                continue;
            size_t slot = m.tail % 4096;
            cr_assert_eq(len, m.len[slot]);
            cr_assert_eq(memcmp(q, m.data[slot], len), 0, "step %d: the bytes as written", step);
            sl_spsc_release(&r);
            tailpos += spans[slot];
            m.tail++;
            passed++;
        }
    }
    cr_assert_gt(refused, 100, "the test filled the ring (%zu refusals)", refused);
    cr_assert_gt(passed, 10000);
    sl_spsc_free(&r);
}

/* ---- the sampling rate ---- */

static uint32_t parse_ok(const char *s)
{
    uint32_t ppm = 0;
    cr_assert(sl_sample_parse(s, strlen(s), &ppm), "'%s' parses", s);
    return ppm;
}

Test(sample, rates_parse_exactly_as_parts_per_million)
{
    cr_assert_eq(parse_ok("1"), 1000000);
    cr_assert_eq(parse_ok("1.0"), 1000000);
    cr_assert_eq(parse_ok("0.01"), 10000);
    cr_assert_eq(parse_ok(".5"), 500000);
    cr_assert_eq(parse_ok("0.000001"), 1);
    cr_assert_eq(parse_ok("0.0100000000"), 10000, "zeros past the sixth place are exact");
    cr_assert_eq(parse_ok("1%"), 10000);
    cr_assert_eq(parse_ok("100%"), 1000000);
    cr_assert_eq(parse_ok("0.5%"), 5000);
    cr_assert_eq(parse_ok("0.0001%"), 1);
    cr_assert_eq(parse_ok("0012.5%"), 125000);
}

Test(sample, rates_that_are_not_held_exactly_or_out_of_range_are_refused)
{
    const char *bad[] = {"",      "0",       "0.0",  "0%",        "1.000001", "101%", "2",
                         "-0.5",  "+0.5",    "1e-2", "0.0000001", "0.00001%", " 0.1", "0.1 ",
                         "1.",    ".",       "%",    "0,5",       "50 %",     "0x1",  "1/100",
                         "999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        uint32_t ppm = 7;
        cr_assert_not(sl_sample_parse(bad[i], strlen(bad[i]), &ppm), "'%s' is refused", bad[i]);
        cr_assert_eq(ppm, 7, "'%s' left the output alone", bad[i]);
    }
}

Test(sample, a_rate_formats_back_to_itself)
{
    char buf[16];
    uint32_t rates[] = {1, 10, 10000, 123456, 500000, 999999, 1000000};
    for (size_t i = 0; i < sizeof rates / sizeof *rates; i++) {
        sl_sample_format(rates[i], buf);
        cr_assert_eq(parse_ok(buf), rates[i], "%u -> '%s'", rates[i], buf);
    }
    cr_assert_str_eq(sl_sample_format(10000, buf), "0.01");
    cr_assert_str_eq(sl_sample_format(1000000, buf), "1");
}

Test(sample, keeps_every_event_at_one)
{
    sl_sampler s;
    sl_sampler_init(&s, SL_SAMPLE_ALL, 1);
    for (int i = 0; i < 100000; i++)
        cr_assert(sl_sampler_keep(&s));
}

/* The count kept of n events at rate p is binomial: within 6 standard
 * deviations of n p (a failure chance below 1e-8 for a fair generator).
 * The seeds are fixed: the same counts every run. */
Test(sample, keeps_a_binomial_count_at_each_rate)
{
    const uint32_t rates[] = {1000, 10000, 100000, 500000, 990000};
    const uint64_t seeds[] = {1, 2, 0xdeadbeef};
    const int n = 1000000;
    for (size_t i = 0; i < sizeof rates / sizeof *rates; i++)
        for (size_t j = 0; j < sizeof seeds / sizeof *seeds; j++) {
            sl_sampler s;
            sl_sampler_init(&s, rates[i], seeds[j]);
            long kept = 0;
            for (int e = 0; e < n; e++)
                kept += sl_sampler_keep(&s);
            double p = rates[i] / 1e6, mean = n * p, var = n * p * (1 - p);
            double off = (double)kept - mean;
            cr_assert(off * off <= 36 * var,
                      "rate %u seed %llu: kept %ld of %d, expected %.0f, variance %.0f",
                      rates[i], (unsigned long long)seeds[j], kept, n, mean, var);
        }
}

Test(sample, the_same_seed_makes_the_same_choices)
{
    sl_sampler a, b, c;
    sl_sampler_init(&a, 300000, 77);
    sl_sampler_init(&b, 300000, 77);
    sl_sampler_init(&c, 300000, 78);
    int differ = 0;
    for (int i = 0; i < 1000; i++) {
        bool x = sl_sampler_keep(&a), y = sl_sampler_keep(&b), z = sl_sampler_keep(&c);
        cr_assert_eq(x, y);
        differ += x != z;
    }
    cr_assert_gt(differ, 100, "another seed, other choices");
}

/* ---- the line ---- */

static size_t format(char *out, size_t cap, const sl_dlog_line *l)
{
    size_t n = sl_dlog_format(out, cap, l, NULL);
    cr_assert_gt(n, 0);
    out[n] = '\0';
    return n;
}

Test(dlog_line, every_field_in_order)
{
    char out[1024];
    sl_dlog_line l = {
        .time_ms = INT64_C(1796126403123),
        .face = "resp",
        .policy = "chat",
        .policy_len = 4,
        .key = "chat:alice",
        .key_len = 10,
        .cost = 3,
        .allowed = false,
        .shadow = false,
        .remaining = 0,
        .retry_after_ms = 1500,
        .refused_by = "chat.tpm",
        .refused_len = 8,
    };
    format(out, sizeof out, &l);
    cr_assert_str_eq(out, "{\"time\":\"2026-12-01T12:00:03.123Z\",\"face\":\"resp\","
                          "\"policy\":\"chat\",\"key\":\"chat:alice\",\"cost\":3,"
                          "\"allowed\":false,\"shadow\":false,\"remaining\":0,"
                          "\"retry_after_ms\":1500,\"refused_by\":\"chat.tpm\"}\n");
    l = (sl_dlog_line){.time_ms = 0, .face = "http", .key = "k", .key_len = 1, .cost = -5,
                       .allowed = true, .shadow = true, .remaining = INT64_MIN,
                       .retry_after_ms = -1};
    format(out, sizeof out, &l);
    cr_assert_str_eq(out, "{\"time\":\"1970-01-01T00:00:00.000Z\",\"face\":\"http\","
                          "\"policy\":null,\"key\":\"k\",\"cost\":-5,\"allowed\":true,"
                          "\"shadow\":true,\"remaining\":-9223372036854775808,"
                          "\"retry_after_ms\":-1,\"refused_by\":null}\n");
}

Test(dlog_line, a_buffer_below_the_bound_is_refused)
{
    char out[1024];
    sl_dlog_line l = {.face = "grpc", .key = "abc", .key_len = 3};
    size_t max = sl_dlog_line_max(0, 3, 0);
    cr_assert_leq(max, sizeof out);
    cr_assert_eq(sl_dlog_format(out, max - 1, &l, NULL), 0);
    cr_assert_gt(sl_dlog_format(out, max, &l, NULL), 0);
    l.face = NULL;
    cr_assert_eq(sl_dlog_format(out, sizeof out, &l, NULL), 0);
    l.face = "toolongface";
    cr_assert_eq(sl_dlog_format(out, sizeof out, &l, NULL), 0);
}

static char *json_of(const void *s, size_t len, bool *utf8)
{
    char *out = malloc(6 * len + 3);
    size_t n = sl_json_string(out, s, len, utf8);
    cr_assert_leq(n, 6 * len + 2);
    out[n] = '\0';
    return out;
}

Test(dlog_line, escapes_quotes_backslashes_and_control_bytes)
{
    bool utf8;
    char *j = json_of("a\"b\\c", 5, &utf8);
    cr_assert_str_eq(j, "\"a\\\"b\\\\c\"");
    cr_assert(utf8);
    free(j);
    j = json_of("\b\f\n\r\t\x01\x1f\x7f/", 9, &utf8);
    cr_assert_str_eq(j, "\"\\b\\f\\n\\r\\t\\u0001\\u001f\\u007f/\"");
    free(j);
    j = json_of("a\0b", 3, &utf8);
    cr_assert_str_eq(j, "\"a\\u0000b\"", "a NUL is a byte like any other");
    cr_assert(utf8);
    free(j);
}

Test(dlog_line, keeps_utf8_and_replaces_what_is_not)
{
    bool utf8;
    /* é, €, U+10FFFF, and a 4-byte emoji: kept as they are. */
    const char ok[] = "\xc3\xa9\xe2\x82\xac\xf4\x8f\xbf\xbf\xf0\x9f\x98\x80";
    char *j = json_of(ok, sizeof ok - 1, &utf8);
    cr_assert(utf8);
    cr_assert_eq(strlen(j), sizeof ok - 1 + 2);
    cr_assert_eq(memcmp(j + 1, ok, sizeof ok - 1), 0);
    free(j);
    /* Each byte of an ill-formed sequence is one U+FFFD: a lone
     * continuation, overlong forms, a surrogate, past U+10FFFF, a sequence
     * cut short, 0xFE and 0xFF. */
    const struct {
        const char *in;
        size_t len;
        const char *out;
    } bad[] = {
        {"\x80", 1, "\"\\ufffd\""},
        {"\xc0\xaf", 2, "\"\\ufffd\\ufffd\""},
        {"\xe0\x80\xaf", 3, "\"\\ufffd\\ufffd\\ufffd\""},
        {"\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\""},
        {"\xf4\x90\x80\x80", 4, "\"\\ufffd\\ufffd\\ufffd\\ufffd\""},
        {"\xe2\x82", 2, "\"\\ufffd\\ufffd\""},
        {"a\xfe\xffz", 4, "\"a\\ufffd\\ufffdz\""},
        {"\xe2\x82\xe2\x82\xac", 5, "\"\\ufffd\\ufffd\xe2\x82\xac\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        j = json_of(bad[i].in, bad[i].len, &utf8);
        cr_assert_not(utf8, "case %zu", i);
        cr_assert_str_eq(j, bad[i].out, "case %zu", i);
        free(j);
    }
}

Test(dlog_line, a_key_that_is_not_utf8_carries_its_bytes_in_base64)
{
    char out[1024];
    const char key[] = "k\x01\xff\xc3\xa9";
    sl_dlog_line l = {.face = "resp", .key = key, .key_len = 5, .allowed = true};
    format(out, sizeof out, &l);
    cr_assert_not_null(strstr(out, ",\"key\":\"k\\u0001\\ufffd\xc3\xa9\","
                                   "\"key_base64\":\"awH/w6k=\",\"cost\""),
                       "%s", out);
    l.key = "k\x01";
    l.key_len = 2;
    format(out, sizeof out, &l);
    cr_assert_null(strstr(out, "key_base64"), "a UTF-8 key is its JSON string alone");
}

Test(dlog_line, base64_of_every_length_and_byte)
{
    char out[64];
    cr_assert_eq(sl_base64(out, "", 0), 0);
    struct {
        const char *in, *out;
    } v[] = {{"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foob", "Zm9vYg=="},
             {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"}, {"\xff\xfe\xfd", "//79"}};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        size_t n = sl_base64(out, v[i].in, strlen(v[i].in));
        out[n] = '\0';
        cr_assert_str_eq(out, v[i].out); /* RFC 4648's test vectors, and the top of the alphabet */
    }
}

Test(dlog_line, time_is_rfc3339_utc_with_milliseconds)
{
    char out[32];
    struct {
        int64_t ms;
        const char *text;
    } v[] = {
        {0, "1970-01-01T00:00:00.000Z"},
        {951782400000 - 1, "2000-02-28T23:59:59.999Z"},
        {951782400000, "2000-02-29T00:00:00.000Z"},   /* a leap day of a 400th year */
        {951868800000, "2000-03-01T00:00:00.000Z"},
        {4107542400000, "2100-03-01T00:00:00.000Z"},  /* 2100 is no leap year */
        {1709164800001, "2024-02-29T00:00:00.001Z"},
        {1735689599999, "2024-12-31T23:59:59.999Z"},
        {-5, "1970-01-01T00:00:00.000Z"},              /* clamped */
        {INT64_MAX, "9999-12-31T23:59:59.999Z"},       /* clamped */
    };
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        cr_assert_eq(sl_rfc3339_ms(out, v[i].ms), 24);
        out[24] = '\0';
        cr_assert_str_eq(out, v[i].text, "%lld", (long long)v[i].ms);
    }
    /* Against the C library's calendar, a day at a time over 400 years. */
    for (int64_t day = 0; day < 146097; day += 1) {
        int64_t ms = day * 86400000 + 45296789; /* 12:34:56.789 */
        time_t t = (time_t)(ms / 1000);
        struct tm tm;
        gmtime_r(&t, &tm);
        char want[32];
        strftime(want, sizeof want, "%Y-%m-%dT%H:%M:%S", &tm);
        strcat(want, ".789Z");
        sl_rfc3339_ms(out, ms);
        out[24] = '\0';
        cr_assert_str_eq(out, want);
    }
}

Test(dlog_line, the_clock_cache_writes_the_same_lines)
{
    /* Times that stay in a second, cross one, go back, cross a day and a
     * year, and are clamped: each line as it is without the cache. */
    const int64_t ms[] = {0,          999,        1000,       1000,          999,
                          86399999,   86400000,   1735689599999, 1735689600000, 1735689600001,
                          -7,         INT64_MAX,  INT64_MAX - 1, 1796126403123, 1796126403999};
    sl_dlog_clock clock = {0};
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) {
        sl_dlog_line l = {.time_ms = ms[i], .face = "resp", .key = "k", .key_len = 1};
        char a[512], b[512];
        size_t na = sl_dlog_format(a, sizeof a, &l, NULL);
        size_t nb = sl_dlog_format(b, sizeof b, &l, &clock);
        cr_assert_gt(na, 0);
        cr_assert_eq(na, nb);
        cr_assert_eq(memcmp(a, b, na), 0, "%lld: %.*s vs %.*s", (long long)ms[i], (int)na, a,
                     (int)nb, b);
    }
}

Test(dlog_line, the_worst_key_fits_the_bound_and_parses_back)
{
    /* Every byte value, twice over, in a key: the line is JSON that cJSON
     * reads, and its key_base64 gives the key back. */
    unsigned char key[512];
    for (size_t i = 0; i < sizeof key; i++)
        key[i] = (unsigned char)(i * 131 + 7);
    size_t cap = sl_dlog_line_max(5, sizeof key, 9);
    char *out = malloc(cap + 1);
    sl_dlog_line l = {.face = "grpc", .policy = "p\"\\\n\x01", .policy_len = 5, .key = key,
                      .key_len = sizeof key, .refused_by = "\xff\xfe" "abc\x02\x03\x04\x05",
                      .refused_len = 9};
    size_t n = sl_dlog_format(out, cap, &l, NULL);
    cr_assert_gt(n, 0);
    cr_assert_eq(out[n - 1], '\n');
    cr_assert_null(memchr(out, '\n', n - 1), "one line");
    out[n] = '\0';
    cJSON *j = cJSON_Parse(out);
    cr_assert_not_null(j, "%s", out);
    cJSON *b64 = cJSON_GetObjectItemCaseSensitive(j, "key_base64");
    cr_assert(cJSON_IsString(b64));
    char want[1024];
    size_t wn = sl_base64(want, key, sizeof key);
    want[wn] = '\0';
    cr_assert_str_eq(b64->valuestring, want);
    cr_assert_str_eq(cJSON_GetObjectItemCaseSensitive(j, "face")->valuestring, "grpc");
    cr_assert_str_eq(cJSON_GetObjectItemCaseSensitive(j, "policy")->valuestring, "p\"\\\n\x01");
    cJSON_Delete(j);
    free(out);
}
