/*
 * test_resp.c: the RESP request parser, reply encoder and reply parser.
 *
 * Every input is copied into a heap buffer of exactly its length, so that
 * AddressSanitizer reports any read past `len`.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/resp.h"

#define ARGV_CAP 8192

/* A parse of one request from a private, exact-size copy of the input. */
typedef struct parsed {
    int rc;
    char *buf; /* the copy: argv points into it; freed by done() */
    size_t len;
    sl_resp_request req;
    sl_resp_slice argv[ARGV_CAP];
} parsed;

static parsed *parse_lim(const char *s, size_t len, const sl_resp_limits *lim)
{
    parsed *p = calloc(1, sizeof *p);
    cr_assert_not_null(p);
    p->buf = malloc(len ? len : 1);
    cr_assert_not_null(p->buf);
    memcpy(p->buf, s, len);
    p->len = len;
    sl_resp_request_init(&p->req, p->argv, ARGV_CAP);
    p->rc = sl_resp_parse(p->buf, len, &p->req, lim);
    return p;
}

static parsed *parse_n(const char *s, size_t len)
{
    return parse_lim(s, len, NULL);
}

#define PARSE(lit) parse_n(lit, sizeof(lit) - 1)

static void done(parsed *p)
{
    free(p->buf);
    free(p);
}

static void assert_arg(const parsed *p, size_t i, const char *want, size_t want_len)
{
    cr_assert_lt(i, p->req.argc, "argument %zu missing (argc %zu)", i, p->req.argc);
    cr_assert_eq(p->req.argv[i].len, want_len, "argument %zu: length %zu, want %zu", i,
                 p->req.argv[i].len, want_len);
    cr_assert(memcmp(p->req.argv[i].ptr, want, want_len) == 0, "argument %zu: wrong bytes", i);
    /* A slice into the caller's buffer, inside it. */
    cr_assert(p->req.argv[i].ptr >= p->buf && p->req.argv[i].ptr + want_len <= p->buf + p->len);
}

#define ARG(p, i, lit) assert_arg(p, i, lit, sizeof(lit) - 1)

/* Asserts that `lit` is refused with exactly `msg`. */
static void expect_error_lim(const char *s, size_t len, const sl_resp_limits *lim, const char *msg)
{
    parsed *p = parse_lim(s, len, lim);
    cr_assert_eq(p->rc, SL_RESP_ERROR, "input %.*s: rc %d, want ERROR", (int)len, s, p->rc);
    cr_assert_not_null(p->req.errstr);
    cr_assert_str_eq(p->req.errstr, msg);
    /* A refused input is left as it came. */
    cr_assert(memcmp(p->buf, s, len) == 0);
    done(p);
}

#define EXPECT_ERROR(lit, msg) expect_error_lim(lit, sizeof(lit) - 1, NULL, msg)

/* ------------------------------------------------------------------------ */
/* Requests: valid frames                                                   */
/* ------------------------------------------------------------------------ */

Test(resp_request, multibulk)
{
    parsed *p = PARSE("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n");
    cr_assert_eq(p->rc, 31);
    cr_assert_eq(p->req.argc, 3);
    cr_assert_eq(p->req.is_inline, 0);
    cr_assert_null(p->req.errstr);
    ARG(p, 0, "SET");
    ARG(p, 1, "k");
    ARG(p, 2, "value");
    done(p);
}

Test(resp_request, multibulk_takes_only_the_first_command)
{
    parsed *p = PARSE("*1\r\n$4\r\nPING\r\n*1\r\n$4\r\nPING\r\n");
    cr_assert_eq(p->rc, 14);
    cr_assert_eq(p->req.argc, 1);
    ARG(p, 0, "PING");
    done(p);
}

Test(resp_request, binary_safe_bulk)
{
    static const char in[] = "*2\r\n$3\r\nGET\r\n$7\r\na\r\n\0b\r\n\r\n";
    parsed *p = parse_n(in, sizeof in - 1);
    cr_assert_eq(p->rc, (int)(sizeof in - 1));
    ARG(p, 0, "GET");
    assert_arg(p, 1, "a\r\n\0b\r\n", 7);
    done(p);
}

Test(resp_request, empty_bulk_and_empty_multibulk)
{
    parsed *p = PARSE("*2\r\n$0\r\n\r\n$0\r\n\r\n");
    cr_assert_eq(p->rc, 16);
    cr_assert_eq(p->req.argc, 2);
    ARG(p, 0, "");
    ARG(p, 1, "");
    done(p);

    /* "*0" is an empty command: consumed, nothing to run (Redis skips it). */
    p = PARSE("*0\r\n*1\r\n$4\r\nPING\r\n");
    cr_assert_eq(p->rc, 4);
    cr_assert_eq(p->req.argc, 0);
    done(p);
}

Test(resp_request, inline_plain)
{
    parsed *p = PARSE("PING\r\n");
    cr_assert_eq(p->rc, 6);
    cr_assert_eq(p->req.argc, 1);
    cr_assert_eq(p->req.is_inline, 1);
    ARG(p, 0, "PING");
    done(p);

    /* A bare LF ends the line too, as Redis allows. */
    p = PARSE("PING\nPING\r\n");
    cr_assert_eq(p->rc, 5);
    ARG(p, 0, "PING");
    done(p);

    p = PARSE("  CL.THROTTLE \t user:1   15 30\t60 \r\n");
    cr_assert_eq(p->rc, 36);
    cr_assert_eq(p->req.argc, 5);
    ARG(p, 0, "CL.THROTTLE");
    ARG(p, 1, "user:1");
    ARG(p, 2, "15");
    ARG(p, 3, "30");
    ARG(p, 4, "60");
    done(p);
}

Test(resp_request, inline_empty_lines_are_empty_commands)
{
    parsed *p = PARSE("\r\nPING\r\n");
    cr_assert_eq(p->rc, 2);
    cr_assert_eq(p->req.argc, 0);
    done(p);
    p = PARSE("\n");
    cr_assert_eq(p->rc, 1);
    cr_assert_eq(p->req.argc, 0);
    done(p);
    p = PARSE("   \t \r\n");
    cr_assert_eq(p->rc, 7);
    cr_assert_eq(p->req.argc, 0);
    done(p);
}

Test(resp_request, inline_quotes)
{
    parsed *p = PARSE("SET \"a b\" 'c d'\r\n");
    cr_assert_eq(p->rc, 17);
    cr_assert_eq(p->req.argc, 3);
    ARG(p, 0, "SET");
    ARG(p, 1, "a b");
    ARG(p, 2, "c d");
    done(p);

    p = PARSE("ECHO \"\\x41\\x4a\\x7e\\xff\\x00z\\x4A\\xFf\"\n");
    cr_assert_eq(p->req.argc, 2);
    assert_arg(p, 1, "AJ~\xff\0zJ\xff", 8);
    done(p);

    p = PARSE("ECHO \"\\n\\r\\t\\b\\a\\\"\\\\\\q\"\n");
    assert_arg(p, 1, "\n\r\t\b\a\"\\q", 8);
    done(p);

    /* In single quotes only \' is an escape. */
    p = PARSE("ECHO 'it\\'s \\n \"x\"'\n");
    ARG(p, 1, "it's \\n \"x\"");
    done(p);

    /* A quote may start inside a word; "" is an empty word. */
    p = PARSE("a\"b c\" \"\" ''\n");
    cr_assert_eq(p->req.argc, 3);
    ARG(p, 0, "ab c");
    ARG(p, 1, "");
    ARG(p, 2, "");
    done(p);

    /* \x needs two hex digits; otherwise it is the escaped 'x'. */
    p = PARSE("ECHO \"\\x4\" \"\\xZZ\" \"\\x\"\n");
    cr_assert_eq(p->req.argc, 4);
    ARG(p, 1, "x4");
    ARG(p, 2, "xZZ");
    ARG(p, 3, "x");
    done(p);

    /* A closing quote may be followed by any whitespace, and a CR inside a
     * line separates words. */
    p = PARSE("\"a\"\tb\rc\n");
    cr_assert_eq(p->req.argc, 3);
    ARG(p, 0, "a");
    ARG(p, 1, "b");
    ARG(p, 2, "c");
    done(p);
}

Test(resp_request, inline_unescapes_in_place_within_the_line)
{
    static const char in[] = "ECHO \"x\\x41y\"\r\nNEXT\r\n";
    parsed *p = PARSE(in);
    cr_assert_eq(p->rc, 15);
    ARG(p, 1, "xAy");
    /* The next command's bytes are untouched. */
    cr_assert(memcmp(p->buf + 15, "NEXT\r\n", 6) == 0);
    done(p);
}

/* ------------------------------------------------------------------------ */
/* Requests: errors, each with its exact message                            */
/* ------------------------------------------------------------------------ */

#define E_MBULK "Protocol error: invalid multibulk length"
#define E_BULK "Protocol error: invalid bulk length"

Test(resp_request, invalid_multibulk_length)
{
    EXPECT_ERROR("*abc\r\n", E_MBULK);
    EXPECT_ERROR("*-5\r\n", E_MBULK);
    EXPECT_ERROR("*-1\r\n", E_MBULK);
    EXPECT_ERROR("*\r\n", E_MBULK);
    EXPECT_ERROR("*01\r\n", E_MBULK);
    EXPECT_ERROR("*+1\r\n", E_MBULK);
    EXPECT_ERROR("* 1\r\n", E_MBULK);
    EXPECT_ERROR("*1 \r\n", E_MBULK);
    EXPECT_ERROR("*1\rX", E_MBULK);
    EXPECT_ERROR("*1\n", E_MBULK);
    EXPECT_ERROR("*99999999999999999999\r\n", E_MBULK);
    EXPECT_ERROR("*18446744073709551616\r\n", E_MBULK);
    EXPECT_ERROR("*4097\r\n", E_MBULK); /* the default cap is 4096 */
    /* Refused at once: no CR LF needed to know. */
    EXPECT_ERROR("*-", E_MBULK);
    EXPECT_ERROR("*4097", E_MBULK);
    EXPECT_ERROR("*99999999999999999999", E_MBULK);
}

Test(resp_request, multibulk_count_at_the_cap)
{
    sl_resp_limits lim = {.max_args = 2};
    parsed *p = parse_lim("*2\r\n$1\r\na\r\n$1\r\nb\r\n", 18, &lim);
    cr_assert_eq(p->rc, 18);
    done(p);
    expect_error_lim("*3\r\n", 4, &lim, E_MBULK);
}

Test(resp_request, argv_capacity_caps_the_count)
{
    sl_resp_slice argv[2];
    sl_resp_request req;
    sl_resp_request_init(&req, argv, 2);
    char in[] = "*3\r\n";
    cr_assert_eq(sl_resp_parse(in, 4, &req, NULL), SL_RESP_ERROR);
    cr_assert_str_eq(req.errstr, E_MBULK);
    char ok[] = "*2\r\n$1\r\na\r\n$1\r\nb\r\n";
    cr_assert_eq(sl_resp_parse(ok, sizeof ok - 1, &req, NULL), 18);
    char in2[] = "a b c\n";
    cr_assert_eq(sl_resp_parse(in2, 6, &req, NULL), SL_RESP_ERROR);
    cr_assert_str_eq(req.errstr, "Protocol error: too many arguments");
}

Test(resp_request, expected_dollar)
{
    EXPECT_ERROR("*1\r\nx", "Protocol error: expected '$', got 'x'");
    EXPECT_ERROR("*2\r\n$1\r\na\r\n:1\r\n", "Protocol error: expected '$', got ':'");
    EXPECT_ERROR("*1\r\n*1\r\n", "Protocol error: expected '$', got '*'");
    /* Bytes that would break the error line, or are not text, are shown in hex. */
    EXPECT_ERROR("*1\r\n\r\n", "Protocol error: expected '$', got '\\x0d'");
    expect_error_lim("*1\r\n\0", 5, NULL, "Protocol error: expected '$', got '\\x00'");
    EXPECT_ERROR("*1\r\n\xff", "Protocol error: expected '$', got '\\xff'");
    EXPECT_ERROR("*1\r\n'", "Protocol error: expected '$', got '\\x27'");
}

Test(resp_request, invalid_bulk_length)
{
    EXPECT_ERROR("*1\r\n$-1\r\n", E_BULK);
    EXPECT_ERROR("*1\r\n$-2\r\n", E_BULK);
    EXPECT_ERROR("*1\r\n$-", E_BULK);
    EXPECT_ERROR("*1\r\n$abc\r\n", E_BULK);
    EXPECT_ERROR("*1\r\n$\r\n", E_BULK);
    EXPECT_ERROR("*1\r\n$01\r\n", E_BULK);
    EXPECT_ERROR("*1\r\n$1\rX", E_BULK);
    EXPECT_ERROR("*1\r\n$99999999999999999999\r\n", E_BULK);
    EXPECT_ERROR("*1\r\n$65537\r\n", E_BULK); /* the default cap is 64 KiB */
}

Test(resp_request, huge_bulk_header_refused_at_once)
{
    /* 600 MB announced: refused on the header alone, with or without its CR LF. */
    EXPECT_ERROR("*1\r\n$600000000\r\n", E_BULK);
    EXPECT_ERROR("*1\r\n$600000000", E_BULK);
    EXPECT_ERROR("*1\r\n$600000", E_BULK);
    /* Even when the bulk cap allows it, the request cap refuses it at once. */
    sl_resp_limits lim = {.max_bulk_len = SIZE_MAX, .max_request_len = 1024};
    expect_error_lim("*1\r\n$600000000\r\n", 17, &lim, "Protocol error: too big request");
}

Test(resp_request, length_overflow)
{
    /* Caps at the very top of size_t: the digits overflow before the cap. */
    sl_resp_limits lim = {.max_args = SIZE_MAX, .max_bulk_len = SIZE_MAX,
                          .max_request_len = SIZE_MAX};
    expect_error_lim("*1\r\n$18446744073709551616\r\n", 27, &lim, E_BULK);
    expect_error_lim("*1\r\n$99999999999999999999\r\n", 27, &lim, E_BULK);
    expect_error_lim("*1\r\n$18446744073709551615\r\n", 27, &lim,
                     "Protocol error: too big request");
    /* The count is capped by argv's capacity whatever max_args says. */
    expect_error_lim("*18446744073709551615\r\n", 23, &lim, E_MBULK);
}

Test(resp_request, bulk_not_terminated)
{
    EXPECT_ERROR("*1\r\n$1\r\nab\r\n", "Protocol error: bulk string not terminated by CRLF");
    EXPECT_ERROR("*1\r\n$1\r\na\rX", "Protocol error: bulk string not terminated by CRLF");
    /* Refused as soon as the wrong byte arrives, not when the rest does. */
    EXPECT_ERROR("*2\r\n$1\r\nab", "Protocol error: bulk string not terminated by CRLF");
}

Test(resp_request, request_cap)
{
    sl_resp_limits lim = {.max_request_len = 20};
    expect_error_lim("*1\r\n$10\r\n0123456789\r\n", 21, &lim, "Protocol error: too big request");
    /* 20 bytes exactly: accepted. */
    parsed *p = parse_lim("*2\r\n$1\r\na\r\n$3\r\nbcd\r\n", 20, &lim);
    cr_assert_eq(p->rc, 20);
    done(p);
    /* Refused on the second header: its bulk would end past the cap. */
    expect_error_lim("*2\r\n$1\r\na\r\n$4\r\n", 15, &lim, "Protocol error: too big request");
}

Test(resp_request, bulk_at_the_cap)
{
    sl_resp_limits lim = {.max_bulk_len = 5};
    parsed *p = parse_lim("*1\r\n$5\r\nhello\r\n", 15, &lim);
    cr_assert_eq(p->rc, 15);
    ARG(p, 0, "hello");
    done(p);
    expect_error_lim("*1\r\n$6\r\n", 8, &lim, E_BULK);
    expect_error_lim("*1\r\n$10", 7, &lim, E_BULK);
}

Test(resp_request, unbalanced_quotes)
{
    const char *msg = "Protocol error: unbalanced quotes in request";
    EXPECT_ERROR("SET \"a b\r\n", msg);
    EXPECT_ERROR("SET 'a b\r\n", msg);
    EXPECT_ERROR("SET \"a\"b\r\n", msg);   /* a closing quote must end the word */
    EXPECT_ERROR("SET 'a'b\r\n", msg);
    EXPECT_ERROR("SET \"ab\\\"\r\n", msg); /* the last quote is escaped */
    EXPECT_ERROR("SET \"ab\\\r\n", msg);   /* a backslash at the end */
    EXPECT_ERROR("SET 'ab\\'\n", msg);
    /* Nothing is unescaped when a later word is refused. */
    EXPECT_ERROR("SET \"\\x41\\x42\" \"oops\n", msg);
}

Test(resp_request, too_big_inline)
{
    const char *msg = "Protocol error: too big inline request";
    size_t cap = SL_RESP_DEFAULT_MAX_INLINE;
    char *s = malloc(cap + 3);
    cr_assert_not_null(s);
    memset(s, 'a', cap + 3);

    /* No LF within cap + 2 bytes: refused without waiting for more. */
    expect_error_lim(s, cap + 2, NULL, msg);
    /* Shorter, without a LF yet: wait. */
    parsed *p = parse_n(s, cap + 1);
    cr_assert_eq(p->rc, SL_RESP_INCOMPLETE);
    done(p);
    /* A line of exactly cap bytes, with CR LF or LF: accepted. */
    s[cap] = '\r';
    s[cap + 1] = '\n';
    p = parse_n(s, cap + 2);
    cr_assert_eq(p->rc, (int)cap + 2);
    cr_assert_eq(p->req.argc, 1);
    cr_assert_eq(p->req.argv[0].len, cap);
    done(p);
    s[cap] = '\n';
    p = parse_n(s, cap + 1);
    cr_assert_eq(p->rc, (int)cap + 1);
    done(p);
    /* cap + 1 bytes before the LF: refused. */
    s[cap] = 'a';
    s[cap + 1] = '\n';
    expect_error_lim(s, cap + 2, NULL, msg);
    s[cap + 1] = 'a';
    s[cap + 2] = '\n';
    expect_error_lim(s, cap + 3, NULL, msg);
    free(s);

    sl_resp_limits lim = {.max_inline_len = 4};
    expect_error_lim("PINGX\n", 6, &lim, msg);
    expect_error_lim("PINGXX", 6, &lim, msg);
    p = parse_lim("PING\r\n", 6, &lim);
    cr_assert_eq(p->rc, 6);
    done(p);
}

Test(resp_request, too_many_inline_words)
{
    sl_resp_limits lim = {.max_args = 3};
    expect_error_lim("a b c d\n", 8, &lim, "Protocol error: too many arguments");
    parsed *p = parse_lim("a b c \n", 7, &lim);
    cr_assert_eq(p->rc, 7);
    cr_assert_eq(p->req.argc, 3);
    done(p);
}

/* ------------------------------------------------------------------------ */
/* Requests: partial input and resuming                                     */
/* ------------------------------------------------------------------------ */

static const char *const valid_frames[] = {
    "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n",
    "*1\r\n$4\r\nPING\r\n",
    "*2\r\n$0\r\n\r\n$10\r\n0123456789\r\n",
    "*0\r\n",
    "*12\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n4\r\n$1\r\n5\r\n$1\r\n6\r\n"
    "$1\r\n7\r\n$1\r\n8\r\n$1\r\n9\r\n$2\r\n10\r\n$2\r\n11\r\n$2\r\n12\r\n",
    "PING\r\n",
    "PING\n",
    "\r\n",
    "\n",
    "SET \"a \\x41 b\" 'c\\'d' e\r\n",
    "CL.THROTTLE user:1 15 30 60 1\r\n",
};

/* Every proper prefix of a valid frame is INCOMPLETE; the whole frame parses
 * to the same command whether it came at once, grew in place (the resumed
 * path), or was copied to a new buffer half-way. */
Test(resp_request, every_prefix_is_incomplete)
{
    for (size_t f = 0; f < sizeof valid_frames / sizeof *valid_frames; f++) {
        const char *frame = valid_frames[f];
        size_t n = strlen(frame);
        for (size_t k = 0; k < n; k++) {
            parsed *p = parse_n(frame, k);
            cr_assert_eq(p->rc, SL_RESP_INCOMPLETE, "frame %zu, prefix %zu: rc %d (%s)", f, k,
                         p->rc, p->req.errstr ? p->req.errstr : "");
            done(p);
        }
        parsed *whole = parse_n(frame, n);
        cr_assert_eq(whole->rc, (int)n, "frame %zu: rc %d", f, whole->rc);

        /* Grown one byte at a time in one buffer, with one request state. */
        char *buf = malloc(n);
        memcpy(buf, frame, n);
        sl_resp_slice argv[64];
        sl_resp_request req;
        sl_resp_request_init(&req, argv, 64);
        for (size_t k = 0; k < n; k++)
            cr_assert_eq(sl_resp_parse(buf, k, &req, NULL), SL_RESP_INCOMPLETE,
                         "frame %zu, resumed prefix %zu", f, k);
        cr_assert_eq(sl_resp_parse(buf, n, &req, NULL), (int)n);
        cr_assert_eq(req.argc, whole->req.argc);
        for (size_t i = 0; i < req.argc; i++) {
            cr_assert_eq(argv[i].len, whole->req.argv[i].len);
            cr_assert(memcmp(argv[i].ptr, whole->req.argv[i].ptr, argv[i].len) == 0);
            cr_assert(argv[i].ptr >= buf && argv[i].ptr + argv[i].len <= buf + n);
        }

        /* Half in one buffer, then all of it in another: the state notices
         * the move and starts over, so no slice points into the old one. */
        char *moved = malloc(n);
        memcpy(moved, frame, n);
        memcpy(buf, frame, n);
        sl_resp_request_init(&req, argv, 64);
        cr_assert_eq(sl_resp_parse(buf, n / 2, &req, NULL), SL_RESP_INCOMPLETE);
        cr_assert_eq(sl_resp_parse(moved, n, &req, NULL), (int)n);
        for (size_t i = 0; i < req.argc; i++)
            cr_assert(argv[i].ptr >= moved && argv[i].ptr + argv[i].len <= moved + n);
        free(moved);
        free(buf);
        done(whole);
    }
}

Test(resp_request, reset_forgets_the_state)
{
    sl_resp_slice argv[4];
    sl_resp_request req;
    sl_resp_request_init(&req, argv, 4);
    char buf[32] = "*2\r\n$1\r\na\r\n";
    cr_assert_eq(sl_resp_parse(buf, 11, &req, NULL), SL_RESP_INCOMPLETE);
    /* New contents at the same address: without a reset the state would
     * believe one argument is already parsed. */
    memcpy(buf, "*1\r\n$4\r\nPING\r\n", 14);
    sl_resp_request_reset(&req);
    cr_assert_eq(sl_resp_parse(buf, 14, &req, NULL), 14);
    cr_assert_eq(req.argc, 1);
    cr_assert_eq(argv[0].len, 4);
    cr_assert(memcmp(argv[0].ptr, "PING", 4) == 0);
}

/* A caller that breaks the append-only rule (the buffer shrank) gets a
 * fresh parse, never a read past len. */
Test(resp_request, shrunk_buffer_restarts)
{
    sl_resp_slice argv[4];
    sl_resp_request req;
    sl_resp_request_init(&req, argv, 4);
    char *buf = malloc(14);
    memcpy(buf, "*1\r\n$4\r\nPING\r\n", 14);
    cr_assert_eq(sl_resp_parse(buf, 1, &req, NULL), SL_RESP_INCOMPLETE);
    cr_assert_eq(sl_resp_parse(buf, 0, &req, NULL), SL_RESP_INCOMPLETE);
    cr_assert_eq(sl_resp_parse(buf, 10, &req, NULL), SL_RESP_INCOMPLETE);
    cr_assert_eq(sl_resp_parse(buf, 5, &req, NULL), SL_RESP_INCOMPLETE);
    cr_assert_eq(sl_resp_parse(buf, 14, &req, NULL), 14);
    cr_assert_eq(req.argc, 1);
    memcpy(buf, "PING\r\n", 6);
    cr_assert_eq(sl_resp_parse(buf, 3, &req, NULL), SL_RESP_INCOMPLETE);
    cr_assert_eq(sl_resp_parse(buf, 1, &req, NULL), SL_RESP_INCOMPLETE);
    cr_assert_eq(sl_resp_parse(buf, 6, &req, NULL), 6);
    free(buf);
}

/* Builds a pipeline of `count` commands, alternating multibulk (through the
 * encoder) and inline, each carrying its index. */
static sl_buf build_pipeline(size_t count)
{
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    for (size_t i = 0; i < count; i++) {
        char num[32];
        int nl = snprintf(num, sizeof num, "%zu", i);
        if (i % 3 == 2) {
            char line[64];
            int ll = snprintf(line, sizeof line, "INCR \"k\\x3a%zu\"\r\n", i);
            sl_buf_add(&b, line, (size_t)ll);
        } else {
            sl_resp_slice argv[3] = {{"INCR", 4}, {"k:", 2}, {num, (size_t)nl}};
            /* Binary bytes inside an argument, to keep the pipeline honest. */
            sl_resp_slice bin[3] = {{"INCR", 4}, {"\r\n\0", 3}, {num, (size_t)nl}};
            sl_resp_add_command(&b, i % 3 ? bin : argv, 3);
        }
    }
    cr_assert_eq(b.failed, 0);
    return b;
}

static void check_pipeline_command(const sl_resp_request *req, size_t i)
{
    char num[32];
    int nl = snprintf(num, sizeof num, "%zu", i);
    if (i % 3 == 2) {
        char word[40];
        int wl = snprintf(word, sizeof word, "k:%zu", i);
        cr_assert_eq(req->argc, 2, "command %zu", i);
        cr_assert_eq(req->argv[1].len, (size_t)wl);
        cr_assert(memcmp(req->argv[1].ptr, word, (size_t)wl) == 0, "command %zu", i);
        return;
    }
    cr_assert_eq(req->argc, 3, "command %zu", i);
    cr_assert_eq(req->argv[0].len, 4);
    cr_assert(memcmp(req->argv[0].ptr, "INCR", 4) == 0);
    cr_assert_eq(req->argv[2].len, (size_t)nl, "command %zu", i);
    cr_assert(memcmp(req->argv[2].ptr, num, (size_t)nl) == 0, "command %zu", i);
}

Test(resp_request, pipeline_of_10000)
{
    sl_buf b = build_pipeline(10000);
    sl_resp_slice argv[8];
    sl_resp_request req;
    sl_resp_request_init(&req, argv, 8);
    size_t off = 0, cmds = 0;
    while (off < b.len) {
        int rc = sl_resp_parse(b.data + off, b.len - off, &req, NULL);
        cr_assert_gt(rc, 0, "command %zu: rc %d (%s)", cmds, rc, req.errstr ? req.errstr : "");
        check_pipeline_command(&req, cmds);
        off += (size_t)rc;
        cmds++;
    }
    cr_assert_eq(cmds, 10000);
    cr_assert_eq(sl_resp_parse(b.data + off, 0, &req, NULL), SL_RESP_INCOMPLETE);
    sl_buf_free(&b);
}

/* The same pipeline arriving 7 bytes per read into a buffer that a server
 * would keep: append, parse what is complete, compact the rest to the front. */
Test(resp_request, pipeline_in_small_reads)
{
    sl_buf b = build_pipeline(10000);
    size_t cap = 4096, have = 0, fed = 0, cmds = 0;
    char *conn = malloc(cap);
    sl_resp_slice argv[8];
    sl_resp_request req;
    sl_resp_request_init(&req, argv, 8);
    while (fed < b.len) {
        size_t chunk = b.len - fed < 7 ? b.len - fed : 7;
        cr_assert_leq(have + chunk, cap);
        memcpy(conn + have, b.data + fed, chunk);
        have += chunk;
        fed += chunk;
        size_t off = 0;
        for (;;) {
            int rc = sl_resp_parse(conn + off, have - off, &req, NULL);
            if (rc == SL_RESP_INCOMPLETE)
                break;
            cr_assert_gt(rc, 0, "command %zu: %s", cmds, req.errstr ? req.errstr : "");
            check_pipeline_command(&req, cmds);
            off += (size_t)rc;
            cmds++;
        }
        if (off) {
            memmove(conn, conn + off, have - off);
            have -= off;
        }
    }
    cr_assert_eq(cmds, 10000);
    cr_assert_eq(have, 0);
    free(conn);
    sl_buf_free(&b);
}

/* ------------------------------------------------------------------------ */
/* The encoder                                                              */
/* ------------------------------------------------------------------------ */

static void assert_buf(const sl_buf *b, const char *want, size_t want_len)
{
    cr_assert_eq(b->failed, 0);
    cr_assert_eq(b->len, want_len, "got %zu bytes \"%.*s\", want \"%.*s\"", b->len, (int)b->len,
                 b->data, (int)want_len, want);
    cr_assert(memcmp(b->data, want, want_len) == 0, "got \"%.*s\", want \"%.*s\"", (int)b->len,
              b->data, (int)want_len, want);
}

#define BUF_IS(b, lit) assert_buf(b, lit, sizeof(lit) - 1)

Test(resp_encode, scalars)
{
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    sl_resp_add_simple(&b, "OK", 2);
    sl_resp_add_int(&b, 0);
    sl_resp_add_int(&b, -42);
    sl_resp_add_int(&b, INT64_MAX);
    sl_resp_add_int(&b, INT64_MIN);
    sl_resp_add_bulk(&b, "a\r\n\0b", 5);
    sl_resp_add_bulk(&b, NULL, 0);
    BUF_IS(&b, "+OK\r\n:0\r\n:-42\r\n:9223372036854775807\r\n:-9223372036854775808\r\n"
               "$5\r\na\r\n\0b\r\n$0\r\n\r\n");
    sl_buf_free(&b);
    cr_assert_null(b.data);
}

Test(resp_encode, errors)
{
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    const char *m = "Protocol error: invalid bulk length";
    sl_resp_add_error(&b, m, strlen(m));
    sl_resp_add_error(&b, "-WRONGPASS invalid password", 27);
    sl_resp_add_error(&b, "bad\r\nline", 9); /* would break the frame */
    sl_resp_add_errorf(&b, "unknown command '%s', with args beginning with: ", "FOO");
    BUF_IS(&b, "-ERR Protocol error: invalid bulk length\r\n-WRONGPASS invalid password\r\n"
               "-ERR bad  line\r\n-ERR unknown command 'FOO', with args beginning with: \r\n");
    sl_buf_clear(&b);
    sl_resp_add_simple(&b, "a\nb", 3);
    BUF_IS(&b, "+a b\r\n");
    /* A formatted message is cut at 511 bytes, and the line still ends. */
    sl_buf_clear(&b);
    char longarg[2000];
    memset(longarg, 'x', sizeof longarg - 1);
    longarg[sizeof longarg - 1] = '\0';
    sl_resp_add_errorf(&b, "%s", longarg);
    cr_assert_eq(b.len, 5 + 511 + 2);
    cr_assert(memcmp(b.data + b.len - 3, "x\r\n", 3) == 0);
    sl_buf_free(&b);
}

Test(resp_encode, version_dependent)
{
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    sl_resp_add_null(&b);
    sl_resp_add_map(&b, 2);
    sl_resp_add_bool(&b, 1);
    sl_resp_add_bool(&b, 0);
    sl_resp_add_double(&b, 1.5);
    BUF_IS(&b, "$-1\r\n*4\r\n:1\r\n:0\r\n$3\r\n1.5\r\n");

    sl_buf_clear(&b);
    b.proto = 3; /* HELLO 3 */
    sl_resp_add_null(&b);
    sl_resp_add_map(&b, 2);
    sl_resp_add_bool(&b, 1);
    sl_resp_add_bool(&b, 0);
    sl_resp_add_double(&b, 1.5);
    sl_resp_add_double(&b, 0.1);
    sl_resp_add_double(&b, -INFINITY);
    sl_resp_add_double(&b, INFINITY);
    sl_resp_add_double(&b, NAN);
    sl_resp_add_double(&b, 1e300);
    sl_resp_add_array(&b, 0);
    sl_resp_add_verbatim(&b, "txt", "a\r\nb", 4);
    BUF_IS(&b, "_\r\n%2\r\n#t\r\n#f\r\n,1.5\r\n,0.1\r\n,-inf\r\n,inf\r\n,nan\r\n,1e+300\r\n*0\r\n"
               "=8\r\ntxt:a\r\nb\r\n");
    /* RESP2 reads the text as a bulk string. */
    sl_buf_clear(&b);
    b.proto = 2;
    sl_resp_add_verbatim(&b, "txt", "a\r\nb", 4);
    BUF_IS(&b, "$4\r\na\r\nb\r\n");
    sl_buf_free(&b);
}

Test(resp_encode, throttle_and_command)
{
    sl_buf b;
    sl_buf_init(&b, 3, 0);
    int64_t v[5] = {0, 16, 15, -1, 2};
    cr_assert_eq(sl_resp_add_int_array(&b, v, 5), 0);
    sl_resp_slice argv[2] = {{"GET", 3}, {"k", 1}};
    cr_assert_eq(sl_resp_add_command(&b, argv, 2), 0);
    BUF_IS(&b, "*5\r\n:0\r\n:16\r\n:15\r\n:-1\r\n:2\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    sl_buf_clear(&b);
    int64_t x[5] = {1, INT64_MAX, 0, INT64_MIN, -10};
    cr_assert_eq(sl_resp_add_int_array(&b, x, 5), 0);
    BUF_IS(&b, "*5\r\n:1\r\n:9223372036854775807\r\n:0\r\n:-9223372036854775808\r\n:-10\r\n");
    sl_buf_clear(&b);
    cr_assert_eq(sl_resp_add_int_array(&b, x, 0), 0);
    BUF_IS(&b, "*0\r\n");
    /* ten or more: the count takes two digits */
    sl_buf_clear(&b);
    int64_t many[12] = {0, 1, 9, 10, 99, 100, 999, 1000, 9999, 10000, -9999, -10000};
    cr_assert_eq(sl_resp_add_int_array(&b, many, 12), 0);
    BUF_IS(&b, "*12\r\n:0\r\n:1\r\n:9\r\n:10\r\n:99\r\n:100\r\n:999\r\n:1000\r\n:9999\r\n"
               ":10000\r\n:-9999\r\n:-10000\r\n");
    sl_buf_free(&b);
}

/* Every power of ten, one either side and its negative, as printf writes
 * them: the digit counting and the two-at-a-time writing at each edge. */
Test(resp_encode, integers_at_every_digit_boundary)
{
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    int64_t p = 1;
    for (int k = 0; k < 19; k++, p = k < 19 ? p * 10 : p) {
        int64_t vals[6] = {p - 1, p, p + 1, -(p - 1), -p, -(p + 1)};
        for (int i = 0; i < 6; i++) {
            char want[32];
            int n = snprintf(want, sizeof want, ":%lld\r\n", (long long)vals[i]);
            sl_buf_clear(&b);
            cr_assert_eq(sl_resp_add_int(&b, vals[i]), 0);
            cr_assert_eq(b.len, (size_t)n, "%lld", (long long)vals[i]);
            cr_assert(memcmp(b.data, want, (size_t)n) == 0, "%lld", (long long)vals[i]);
            sl_buf_clear(&b);
            cr_assert_eq(sl_resp_add_array(&b, (size_t)(p - 1 + i % 3)), 0);
            n = snprintf(want, sizeof want, "*%lld\r\n", (long long)(p - 1 + i % 3));
            cr_assert(b.len == (size_t)n && memcmp(b.data, want, (size_t)n) == 0);
        }
    }
    sl_buf_free(&b);
}

Test(resp_encode, growth_and_cap)
{
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    /* Many small items through several reallocations. */
    for (int i = 0; i < 100000; i++)
        cr_assert_eq(sl_resp_add_int(&b, i), 0);
    cr_assert_geq(b.cap, b.len);
    size_t off = 0;
    for (int i = 0; i < 100000; i++) {
        char want[16];
        int n = snprintf(want, sizeof want, ":%d\r\n", i);
        cr_assert(memcmp(b.data + off, want, (size_t)n) == 0);
        off += (size_t)n;
    }
    cr_assert_eq(off, b.len);
    sl_buf_free(&b);

    /* A cap: the write that would pass it fails, and so does every later one. */
    sl_buf_init(&b, 2, 16);
    cr_assert_eq(sl_resp_add_int(&b, 1000000), 0);          /* 10 bytes */
    cr_assert_eq(sl_resp_add_int(&b, -10), 0);              /* 6 more: 16 exactly */
    BUF_IS(&b, ":1000000\r\n:-10\r\n");
    int64_t v[5] = {0, 0, 0, 0, 0};
    cr_assert_eq(sl_resp_add_int_array(&b, v, 5), -1);
    cr_assert_eq(b.len, 16); /* nothing of it written */
    sl_buf_clear(&b);
    cr_assert_eq(sl_resp_add_simple(&b, "OK", 2), 0);       /* 5 bytes */
    cr_assert_eq(sl_resp_add_bulk(&b, "0123456", 7), -1);   /* 4 + 9 > 11 left */
    cr_assert_eq(b.failed, 1);
    cr_assert_eq(sl_resp_add_int(&b, 1), -1);               /* would fit, but sticky */
    cr_assert_leq(b.cap, 16);
    cr_assert_leq(b.len, 16);
    cr_assert(memcmp(b.data, "+OK\r\n", 5) == 0);
    sl_buf_clear(&b);
    cr_assert_eq(b.failed, 0);
    cr_assert_eq(sl_resp_add_simple(&b, "0123456789abc", 13), 0); /* 16 bytes exactly */
    cr_assert_eq(b.len, 16);
    cr_assert_eq(sl_buf_add(&b, "x", 1), -1);
    /* A length whose sum with the header would overflow. */
    sl_buf_clear(&b);
    cr_assert_eq(sl_resp_add_bulk(&b, "", SIZE_MAX), -1);
    sl_buf_clear(&b);
    cr_assert_eq(sl_resp_add_error(&b, "x", SIZE_MAX - 1), -1);
    sl_buf_free(&b);
}

/* ------------------------------------------------------------------------ */
/* The reply parser                                                         */
/* ------------------------------------------------------------------------ */

typedef struct reply_run {
    int rc;
    char *buf;
    sl_resp_reply rep;
    sl_resp_value nodes[64];
} reply_run;

static reply_run *reply_lim(const char *s, size_t len, size_t cap, const sl_resp_reply_limits *lim)
{
    reply_run *r = calloc(1, sizeof *r);
    r->buf = malloc(len ? len : 1);
    memcpy(r->buf, s, len);
    r->rep.nodes = r->nodes;
    r->rep.nodes_cap = cap;
    r->rc = sl_resp_parse_reply(r->buf, len, &r->rep, lim);
    return r;
}

#define REPLY(lit) reply_lim(lit, sizeof(lit) - 1, 64, NULL)

static void reply_done(reply_run *r)
{
    free(r->buf);
    free(r);
}

static void expect_reply_error(const char *s, size_t len, size_t cap, const char *msg)
{
    reply_run *r = reply_lim(s, len, cap, NULL);
    cr_assert_eq(r->rc, SL_RESP_ERROR, "input %.*s: rc %d", (int)len, s, r->rc);
    cr_assert_str_eq(r->rep.errstr, msg);
    reply_done(r);
}

#define REPLY_ERROR(lit, msg) expect_reply_error(lit, sizeof(lit) - 1, 64, msg)

static void node_str(const sl_resp_value *v, sl_resp_type t, const char *s)
{
    cr_assert_eq(v->type, t, "type %c, want %c", v->type, t);
    cr_assert_eq(v->len, strlen(s));
    cr_assert(memcmp(v->str, s, v->len) == 0);
}

Test(resp_reply, scalars)
{
    reply_run *r = REPLY("+OK\r\n");
    cr_assert_eq(r->rc, 5);
    cr_assert_eq(r->rep.count, 1);
    node_str(&r->nodes[0], SL_RESP_STATUS, "OK");
    reply_done(r);

    r = REPLY("-ERR nope\r\n");
    node_str(&r->nodes[0], SL_RESP_ERR, "ERR nope");
    reply_done(r);

    r = REPLY(":-9223372036854775808\r\n");
    cr_assert_eq(r->nodes[0].type, SL_RESP_INT);
    cr_assert_eq(r->nodes[0].integer, INT64_MIN);
    reply_done(r);

    r = REPLY("$7\r\na\r\n\0b\r\n\r\n");
    cr_assert_eq(r->rc, 13);
    cr_assert_eq(r->nodes[0].type, SL_RESP_BULK);
    cr_assert_eq(r->nodes[0].len, 7);
    cr_assert(memcmp(r->nodes[0].str, "a\r\n\0b\r\n", 7) == 0);
    reply_done(r);

    const char *nulls[] = {"$-1\r\n", "*-1\r\n", "_\r\n"};
    for (int i = 0; i < 3; i++) {
        r = reply_lim(nulls[i], strlen(nulls[i]), 64, NULL);
        cr_assert_eq(r->rc, (int)strlen(nulls[i]));
        cr_assert_eq(r->nodes[0].type, SL_RESP_NIL);
        reply_done(r);
    }

    r = REPLY("#t\r\n");
    cr_assert_eq(r->nodes[0].type, SL_RESP_BOOL);
    cr_assert_eq(r->nodes[0].integer, 1);
    reply_done(r);

    r = REPLY(",-1.25e2\r\n");
    cr_assert_eq(r->nodes[0].type, SL_RESP_DOUBLE);
    cr_assert(r->nodes[0].dbl == -125.0);
    reply_done(r);
    r = REPLY(",-inf\r\n");
    cr_assert(isinf(r->nodes[0].dbl) && r->nodes[0].dbl < 0);
    reply_done(r);
    r = REPLY(",inf\r\n");
    cr_assert(isinf(r->nodes[0].dbl) && r->nodes[0].dbl > 0);
    reply_done(r);
    r = REPLY(",nan\r\n");
    cr_assert(isnan(r->nodes[0].dbl));
    node_str(&r->nodes[0], SL_RESP_DOUBLE, "nan");
    reply_done(r);

    r = REPLY("(3492890328409238509324850943850943825024385\r\n");
    node_str(&r->nodes[0], SL_RESP_BIGNUM, "3492890328409238509324850943850943825024385");
    reply_done(r);

    r = REPLY("=15\r\ntxt:Some string\r\n");
    node_str(&r->nodes[0], SL_RESP_VERBATIM, "txt:Some string");
    reply_done(r);

    r = REPLY("!21\r\nSYNTAX invalid syntax\r\n");
    node_str(&r->nodes[0], SL_RESP_BLOBERR, "SYNTAX invalid syntax");
    reply_done(r);
}

Test(resp_reply, aggregates)
{
    reply_run *r = REPLY("*3\r\n:1\r\n*2\r\n+a\r\n$1\r\nb\r\n%1\r\n+k\r\n~0\r\n+tail\r\n");
    cr_assert_eq(r->rc, 35);
    cr_assert_eq(r->rep.count, 8);
    cr_assert_eq(r->nodes[0].type, SL_RESP_ARRAY);
    cr_assert_eq(r->nodes[0].count, 3);
    cr_assert_eq(r->nodes[1].integer, 1);
    cr_assert_eq(r->nodes[2].type, SL_RESP_ARRAY);
    node_str(&r->nodes[3], SL_RESP_STATUS, "a");
    node_str(&r->nodes[4], SL_RESP_BULK, "b");
    cr_assert_eq(r->nodes[5].type, SL_RESP_MAP);
    cr_assert_eq(r->nodes[5].count, 1);
    node_str(&r->nodes[6], SL_RESP_STATUS, "k");
    cr_assert_eq(r->nodes[7].type, SL_RESP_SET);
    cr_assert_eq(r->nodes[7].count, 0);
    reply_done(r);

    /* The throttle reply, read back. */
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    int64_t v[5] = {1, 16, 0, 3, 60};
    sl_resp_add_int_array(&b, v, 5);
    r = reply_lim(b.data, b.len, 64, NULL);
    cr_assert_eq(r->rc, (int)b.len);
    cr_assert_eq(r->rep.count, 6);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(r->nodes[1 + i].integer, v[i]);
    reply_done(r);
    sl_buf_free(&b);
}

Test(resp_reply, errors)
{
    REPLY_ERROR("?\r\n", "Protocol error: invalid type '?'");
    REPLY_ERROR(">2\r\n+a\r\n+b\r\n", "Protocol error: unsupported type '>'");
    REPLY_ERROR("|1\r\n+a\r\n+b\r\n", "Protocol error: unsupported type '|'");
    REPLY_ERROR(":abc\r\n", "Protocol error: invalid integer");
    REPLY_ERROR(":\r\n", "Protocol error: invalid integer");
    REPLY_ERROR(":9223372036854775808\r\n", "Protocol error: invalid integer");
    REPLY_ERROR(":99999999999999999999\r\n", "Protocol error: invalid integer");
    REPLY_ERROR("(12a\r\n", "Protocol error: invalid integer");
    REPLY_ERROR("(-\r\n", "Protocol error: invalid integer");
    REPLY_ERROR("(\r\n", "Protocol error: invalid integer");
    REPLY_ERROR("$1\r\na\rX", "Protocol error: bulk string not terminated by CRLF");
    REPLY_ERROR("$3\r\nabcd", "Protocol error: bulk string not terminated by CRLF");
    REPLY_ERROR("$-2\r\n", "Protocol error: invalid bulk length");
    REPLY_ERROR("$abc\r\n", "Protocol error: invalid bulk length");
    REPLY_ERROR("$99999999999999999999\r\n", "Protocol error: invalid bulk length");
    REPLY_ERROR("$600000000\r\n", "Protocol error: invalid bulk length"); /* > 512 MiB */
    REPLY_ERROR("=-1\r\n", "Protocol error: invalid bulk length");
    REPLY_ERROR("=3\r\ntxt\r\n", "Protocol error: invalid verbatim string");
    REPLY_ERROR("$1\r\nab\r\n", "Protocol error: bulk string not terminated by CRLF");
    REPLY_ERROR("*-2\r\n", "Protocol error: invalid aggregate length");
    REPLY_ERROR("%-1\r\n", "Protocol error: invalid aggregate length");
    REPLY_ERROR("*x\r\n", "Protocol error: invalid aggregate length");
    REPLY_ERROR("#x\r\n", "Protocol error: invalid boolean");
    REPLY_ERROR("_x\r\n", "Protocol error: invalid null");
    REPLY_ERROR(",abc\r\n", "Protocol error: invalid double");
    REPLY_ERROR(",0x10\r\n", "Protocol error: invalid double");
    REPLY_ERROR("+OK\rX", "Protocol error: line not terminated by CRLF");
    REPLY_ERROR("*1\r\n\xff", "Protocol error: invalid type '\\xff'");
}

Test(resp_reply, caps)
{
    /* More elements declared than nodes: refused on the header. */
    expect_reply_error("*1000\r\n", 7, 10, "Protocol error: reply has too many elements");
    expect_reply_error("%5\r\n", 4, 10, "Protocol error: reply has too many elements");
    /* 4 pairs need 9 nodes: refused with 8, accepted with 9. */
    expect_reply_error("%4\r\n", 4, 8, "Protocol error: reply has too many elements");
    reply_run *m = reply_lim("%4\r\n:1\r\n:2\r\n:3\r\n:4\r\n:5\r\n:6\r\n:7\r\n:8\r\n", 36, 9, NULL);
    cr_assert_eq(m->rc, 36);
    cr_assert_eq(m->rep.count, 9);
    reply_done(m);
    expect_reply_error("*2\r\n*2\r\n:1\r\n:2\r\n*1\r\n", 20, 5,
                       "Protocol error: reply has too many elements");
    reply_run *r = reply_lim("*2\r\n*2\r\n:1\r\n:2\r\n:3\r\n", 20, 5, NULL);
    cr_assert_eq(r->rc, 20); /* exactly 5 nodes */
    reply_done(r);
    expect_reply_error("+OK\r\n", 5, 0, "Protocol error: reply has too many elements");

    /* Nesting: 16 levels below the root are allowed, the 17th is not. */
    char deep[256] = "";
    for (int i = 0; i < 16; i++)
        strcat(deep, "*1\r\n");
    strcat(deep, ":1\r\n");
    r = reply_lim(deep, strlen(deep), 64, NULL);
    cr_assert_eq(r->rc, (int)strlen(deep));
    cr_assert_eq(r->rep.count, 17);
    reply_done(r);
    memmove(deep + 4, deep, strlen(deep) + 1);
    memcpy(deep, "*1\r\n", 4);
    expect_reply_error(deep, strlen(deep), 64, "Protocol error: reply nested too deep");
    sl_resp_reply_limits lim = {.max_depth = 2};
    r = reply_lim("*1\r\n*1\r\n*1\r\n:1\r\n", 16, 64, &lim);
    cr_assert_eq(r->rc, SL_RESP_ERROR);
    reply_done(r);

    /* Line and bulk caps. */
    sl_resp_reply_limits small = {.max_line_len = 4, .max_bulk_len = 3};
    r = reply_lim("+OKOK\r\n", 7, 64, &small); /* 4 bytes: fits */
    cr_assert_eq(r->rc, 7);
    reply_done(r);
    r = reply_lim("+OKOKO\r\n", 8, 64, &small);
    cr_assert_eq(r->rc, SL_RESP_ERROR);
    cr_assert_str_eq(r->rep.errstr, "Protocol error: too big line");
    reply_done(r);
    r = reply_lim("+OKOKOK", 7, 64, &small); /* no CR yet, already too long */
    cr_assert_eq(r->rc, SL_RESP_ERROR);
    reply_done(r);
    r = reply_lim("$4\r\n", 4, 64, &small);
    cr_assert_eq(r->rc, SL_RESP_ERROR);
    reply_done(r);
}

static const char *const valid_replies[] = {
    "+OK\r\n", "-ERR x\r\n", ":12\r\n", "$3\r\nabc\r\n", "$0\r\n\r\n", "$-1\r\n", "*-1\r\n",
    "_\r\n", "#f\r\n", ",1.5\r\n", "*2\r\n:1\r\n*1\r\n$1\r\nx\r\n", "%1\r\n+a\r\n:1\r\n",
    "*5\r\n:0\r\n:16\r\n:15\r\n:-1\r\n:2\r\n", "*0\r\n", "~1\r\n#t\r\n",
};

Test(resp_reply, every_prefix_is_incomplete)
{
    for (size_t f = 0; f < sizeof valid_replies / sizeof *valid_replies; f++) {
        const char *s = valid_replies[f];
        size_t n = strlen(s);
        for (size_t k = 0; k < n; k++) {
            reply_run *r = reply_lim(s, k, 64, NULL);
            cr_assert_eq(r->rc, SL_RESP_INCOMPLETE, "reply %zu, prefix %zu: rc %d", f, k, r->rc);
            reply_done(r);
        }
        reply_run *r = reply_lim(s, n, 64, NULL);
        cr_assert_eq(r->rc, (int)n, "reply %zu: rc %d (%s)", f, r->rc,
                     r->rep.errstr ? r->rep.errstr : "");
        reply_done(r);
    }
}

/* Requests encoded as clients send them parse back to the same arguments. */
Test(resp_roundtrip, command_through_request_parser)
{
    srand(12345);
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    for (int iter = 0; iter < 2000; iter++) {
        char bytes[8][32];
        sl_resp_slice argv[8];
        size_t argc = 1 + (size_t)rand() % 8;
        for (size_t i = 0; i < argc; i++) {
            size_t len = (size_t)rand() % 32;
            for (size_t j = 0; j < len; j++)
                bytes[i][j] = (char)(rand() & 0xff);
            argv[i].ptr = bytes[i];
            argv[i].len = len;
        }
        sl_buf_clear(&b);
        cr_assert_eq(sl_resp_add_command(&b, argv, argc), 0);
        sl_resp_slice out[8];
        sl_resp_request req;
        sl_resp_request_init(&req, out, 8);
        cr_assert_eq(sl_resp_parse(b.data, b.len, &req, NULL), (int)b.len);
        cr_assert_eq(req.argc, argc);
        for (size_t i = 0; i < argc; i++) {
            cr_assert_eq(out[i].len, argv[i].len);
            cr_assert(memcmp(out[i].ptr, argv[i].ptr, argv[i].len) == 0);
        }
    }
    sl_buf_free(&b);
}
