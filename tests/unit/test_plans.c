/*
 * test_plans.c: the plans file (src/policy/plans.c): every rule of its
 * format (comments, blanks, the split at the last ": ", quoted keys and
 * their escapes, CRLF, the byte order mark), every error with its line and
 * column, duplicates, unknown tiers, the limits at and past their edge,
 * lookups of keys present and absent, the empty file, reading in chunks
 * (lines across a chunk's end), allocation failures, and a million keys:
 * their load time and bytes a key printed, every one of them checked.
 *
 * Every text is both parsed from memory and loaded from a file, and the two
 * must agree (the same keys, or the same message): the loader reads in
 * chunks, and must not see a file differently.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "policy/config.h"
#include "policy/plans.h"
#include "testlib.h"

static const char *const tiers3[] = {"free", "paid", "enterprise"};
static const uint64_t hkey[2] = {UINT64_C(0x0706050403020100), UINT64_C(0x0f0e0d0c0b0a0908)};
static char err[1024];

enum { FREE = 0, PAID = 1, ENTERPRISE = 2 };

/* Writes len bytes to a new temporary file; its path into path (32 bytes). */
static void write_file(char path[32], const char *text, size_t len)
{
    snprintf(path, 32, "/tmp/sl_plans_XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    for (size_t done = 0; done < len;) {
        ssize_t n = write(fd, text + done, len - done);
        cr_assert(n > 0);
        done += (size_t)n;
    }
    close(fd);
}

typedef struct same_arg {
    const sl_plans *other;
    size_t n;
} same_arg;

static int same_tier(void *arg, const void *key, size_t len, int tier)
{
    same_arg *a = arg;
    a->n++;
    return sl_plans_lookup(a->other, key, len) == tier ? 0 : 1;
}

/* Both tables hold the same keys on the same tiers. */
static void assert_same(const sl_plans *a, const sl_plans *b)
{
    cr_assert_eq(sl_plans_count(a), sl_plans_count(b));
    same_arg s = {b, 0};
    cr_assert_eq(sl_plans_each(a, same_tier, &s), 0, "a key differs");
    cr_assert_eq(s.n, sl_plans_count(a));
}

/* Parses len bytes from memory and loads them from a file under tiers;
 * both succeed or both fail with the same message. Returns the parsed
 * table (NULL on failure, with the message in err, the file's name
 * written "t.plans"). */
static sl_plans *both(const char *text, size_t len, const char *const *tiers, size_t ntiers)
{
    char path[32], err2[sizeof err];
    write_file(path, text, len);
    sl_plans *p = (sl_plans *)1, *q = (sl_plans *)1;
    int rc = sl_plans_parse(text, len, path, tiers, ntiers, hkey, &p, err, sizeof err);
    int rc2 = sl_plans_load(path, tiers, ntiers, hkey, &q, err2, sizeof err2);
    unlink(path);
    cr_assert_eq(rc, rc2, "parse %d (%s), load %d (%s)", rc, rc ? err : "", rc2, rc2 ? err2 : "");
    if (rc != 0) {
        cr_assert_null(p);
        cr_assert_null(q);
        cr_assert_str_eq(err, err2);
        size_t n = strlen(path);
        cr_assert(strncmp(err, path, n) == 0, "the message names the file: %s", err);
        char named[sizeof err];
        snprintf(named, sizeof named, "t.plans%s", err + n);
        memcpy(err, named, sizeof err);
        return NULL;
    }
    assert_same(p, q);
    assert_same(q, p);
    sl_plans_free(q);
    return p;
}

static sl_plans *ok_n(const char *text, size_t len)
{
    sl_plans *p = both(text, len, tiers3, 3);
    cr_assert_not_null(p, "refused: %s", err);
    return p;
}

static sl_plans *ok(const char *text)
{
    return ok_n(text, strlen(text));
}

static const char *fail_n(const char *text, size_t len)
{
    cr_assert_null(both(text, len, tiers3, 3), "accepted: %.*s", (int)len, text);
    return err;
}

static const char *fail(const char *text)
{
    return fail_n(text, strlen(text));
}

static int tier(const sl_plans *p, const char *key)
{
    return sl_plans_lookup(p, key, strlen(key));
}

Test(plans, keys_and_their_tiers)
{
    sl_plans *p = ok("alice: paid\nbob: free\ncarol: enterprise\n");
    cr_assert_eq(sl_plans_count(p), 3);
    cr_assert_eq(tier(p, "alice"), PAID);
    cr_assert_eq(tier(p, "bob"), FREE);
    cr_assert_eq(tier(p, "carol"), ENTERPRISE);
    /* Absent: other keys, prefixes, extensions, case, the empty key, and
     * a key longer than any the file may hold. */
    cr_assert_eq(tier(p, "dave"), -1);
    cr_assert_eq(tier(p, "alic"), -1);
    cr_assert_eq(tier(p, "alicex"), -1);
    cr_assert_eq(tier(p, "Alice"), -1);
    cr_assert_eq(tier(p, ""), -1);
    char big[SL_PLAN_KEY_MAX + 2];
    memset(big, 'a', sizeof big);
    cr_assert_eq(sl_plans_lookup(p, big, sizeof big), -1);
    cr_assert(sl_plans_bytes(p) > 0);
    sl_plans_free(p);
    /* The last line needs no '\n'. */
    p = ok("alice: paid\nbob: free");
    cr_assert_eq(tier(p, "bob"), FREE);
    sl_plans_free(p);
}

Test(plans, empty_files_hold_no_key)
{
    static const char *const empties[] = {"", "\n", "\n\n\n", "   \t\n", "# only a comment\n",
                                          "\xef\xbb\xbf", "\r\n\r\n", "  # x: paid\n"};
    for (size_t i = 0; i < sizeof empties / sizeof empties[0]; i++) {
        sl_plans *p = ok(empties[i]);
        cr_assert_eq(sl_plans_count(p), 0, "'%s'", empties[i]);
        cr_assert_eq(tier(p, "alice"), -1);
        cr_assert_eq(tier(p, "x"), -1);
        cr_assert_eq(sl_plans_lookup(p, "", 0), -1);
        sl_plans_free(p);
    }
    /* No table at all: every key unknown, nothing held. */
    cr_assert_eq(sl_plans_lookup(NULL, "alice", 5), -1);
    cr_assert_eq(sl_plans_count(NULL), 0);
    cr_assert_eq(sl_plans_bytes(NULL), 0);
    sl_plans_free(NULL);
}

Test(plans, comments_and_blank_lines)
{
    sl_plans *p = ok("# plans for api\n"
                     "   # an indented comment\n"
                     "\t# a tabbed one\n"
                     "\n"
                     "  \t \n"
                     "alice: paid\n"
                     "#bob: free\n"
                     "a#b: free\n");
    cr_assert_eq(sl_plans_count(p), 2);
    cr_assert_eq(tier(p, "alice"), PAID);
    cr_assert_eq(tier(p, "a#b"), FREE);
    cr_assert_eq(tier(p, "#bob"), -1);
    cr_assert_eq(tier(p, "bob"), -1);
    sl_plans_free(p);
    /* No comment at a line's end: the tier is all the rest. */
    cr_assert_str_eq(fail("c: paid # note"), "t.plans:1:4: unknown tier 'paid # note' (the "
                                             "policy's tiers: free, paid, enterprise)");
}

Test(plans, the_split_is_at_the_last_colon_and_blank)
{
    sl_plans *p = ok("user:42: free\n"
                     "a: b: paid\n"
                     "abc:: enterprise\n"
                     "urn:x:y:\tpaid\n"
                     "http://h/p?q=1: free\n"
                     "  spaced key  :  paid  \n"
                     "\t tabs \t:\t enterprise \t\n");
    cr_assert_eq(sl_plans_count(p), 7);
    cr_assert_eq(tier(p, "user:42"), FREE);
    cr_assert_eq(tier(p, "a: b"), PAID);
    cr_assert_eq(tier(p, "a"), -1);
    cr_assert_eq(tier(p, "abc:"), ENTERPRISE);
    cr_assert_eq(tier(p, "urn:x:y"), PAID);
    cr_assert_eq(tier(p, "http://h/p?q=1"), FREE);
    cr_assert_eq(tier(p, "spaced key"), PAID);
    cr_assert_eq(tier(p, "tabs"), ENTERPRISE);
    sl_plans_free(p);

    static const char no_tier[] = "no tier: write KEY: TIER, with a blank after the ':' (a key "
                                  "may hold ':', the last ': ' separates)";
    char want[256];
    snprintf(want, sizeof want, "t.plans:1:1: %s", no_tier);
    cr_assert_str_eq(fail("user:42:paid"), want);
    cr_assert_str_eq(fail("alice"), want);
    snprintf(want, sizeof want, "t.plans:4:3: %s", no_tier);
    cr_assert_str_eq(fail("alice: paid\n\n# c\n  bob\n"), want);
    cr_assert_str_eq(fail("alice:"), "t.plans:1:7: no tier after the ':'");
    cr_assert_str_eq(fail("alice:   "), "t.plans:1:10: no tier after the ':'");
    cr_assert_str_eq(fail("key: paid:"), "t.plans:1:11: no tier after the ':'");
    cr_assert_str_eq(fail(": paid"), "t.plans:1:1: the key is empty: a key is 1 to 512 bytes");
    cr_assert_str_eq(fail("   : paid"), "t.plans:1:4: the key is empty: a key is 1 to 512 bytes");
}

Test(plans, quoted_keys)
{
    sl_plans *p = ok("\"  spaced  \": paid\n"
                     "\"#hash\": free\n"
                     "\"say \\\"hi\\\" \\\\o/\": enterprise\n"
                     "  \"a:b: c\"  : free\n"
                     "\"x\":\tpaid\n"
                     "\"\\\"lead\": paid\n"
                     "\"tail:\": enterprise\n"
                     "ab\"c: free\n"
                     "a\\b: paid\n");
    cr_assert_eq(sl_plans_count(p), 9);
    cr_assert_eq(tier(p, "  spaced  "), PAID);
    cr_assert_eq(tier(p, "spaced"), -1);
    cr_assert_eq(tier(p, "#hash"), FREE);
    cr_assert_eq(tier(p, "say \"hi\" \\o/"), ENTERPRISE);
    cr_assert_eq(tier(p, "a:b: c"), FREE);
    cr_assert_eq(tier(p, "x"), PAID);
    cr_assert_eq(tier(p, "\"lead"), PAID);
    cr_assert_eq(tier(p, "tail:"), ENTERPRISE);
    /* Unquoted keys are taken literally, '"' and '\' included. */
    cr_assert_eq(tier(p, "ab\"c"), FREE);
    cr_assert_eq(tier(p, "a\\b"), PAID);
    sl_plans_free(p);

    cr_assert_str_eq(fail("\"\": free"), "t.plans:1:1: the key is empty: a key is 1 to 512 bytes");
    static const char *const open[] = {"\"abc: free", "\"abc\\\": free", "\"ab\\", "\""};
    for (size_t i = 0; i < sizeof open / sizeof open[0]; i++)
        cr_assert_str_eq(fail(open[i]), "t.plans:1:1: the quoted key has no closing '\"'");
    cr_assert_str_eq(fail("\"a\\nb\": free"), "t.plans:1:3: unknown escape '\\n' in a quoted key "
                                              "(there are two: \\\" and \\\\)");
    cr_assert_str_eq(fail("\"abc\" free"),
                     "t.plans:1:7: after the quoted key, expected ': ' and the tier");
    cr_assert_str_eq(fail("\"abc\":free"),
                     "t.plans:1:6: after the quoted key, expected ': ' and the tier");
    cr_assert_str_eq(fail("\"abc\""),
                     "t.plans:1:6: after the quoted key, expected ': ' and the tier");
    cr_assert_str_eq(fail("\"abc\"x: paid"),
                     "t.plans:1:6: after the quoted key, expected ': ' and the tier");
    cr_assert_str_eq(fail("\"abc\": paid: x"), "t.plans:1:8: unknown tier 'paid: x' (the "
                                               "policy's tiers: free, paid, enterprise)");
}

Test(plans, crlf_lines)
{
    sl_plans *p = ok("alice: paid\r\nbob: free\r\n\r\n# c\r\n\"q \": enterprise\r\ncarol: free\r");
    cr_assert_eq(sl_plans_count(p), 4);
    cr_assert_eq(tier(p, "alice"), PAID);
    cr_assert_eq(tier(p, "bob"), FREE);
    cr_assert_eq(tier(p, "q "), ENTERPRISE);
    cr_assert_eq(tier(p, "carol"), FREE);
    sl_plans_free(p);
    /* Only the '\r' before a line's end is dropped. */
    cr_assert_str_eq(fail("a\rb: paid\r\n"),
                     "t.plans:1:2: a control byte (0x0d): a plans file is text, and keys that "
                     "hold control bytes cannot be written in it");
    cr_assert_str_eq(fail("x: free\r\nalice: paid\r\r\n"),
                     "t.plans:2:12: a control byte (0x0d): a plans file is text, and keys that "
                     "hold control bytes cannot be written in it");
}

Test(plans, byte_order_mark)
{
    sl_plans *p = ok("\xef\xbb\xbf" "alice: paid\n");
    cr_assert_eq(tier(p, "alice"), PAID);
    cr_assert_eq(tier(p, "\xef\xbb\xbf" "alice"), -1);
    sl_plans_free(p);
    p = ok("\xef\xbb\xbf" "a: free\r\n");
    cr_assert_eq(tier(p, "a"), FREE);
    sl_plans_free(p);
    /* Anywhere but at the start, and cut short, they are a key's bytes. */
    p = ok("alice: paid\n\xef\xbb\xbf" "bob: free\n");
    cr_assert_eq(tier(p, "\xef\xbb\xbf" "bob"), FREE);
    cr_assert_eq(tier(p, "bob"), -1);
    sl_plans_free(p);
    p = ok("\xef\xbb" "a: free\n");
    cr_assert_eq(tier(p, "\xef\xbb" "a"), FREE);
    sl_plans_free(p);
    /* Columns are counted after it. */
    cr_assert_str_eq(fail("\xef\xbb\xbf: paid"),
                     "t.plans:1:1: the key is empty: a key is 1 to 512 bytes");
    cr_assert_str_eq(fail("\xef\xbb\xbf" "alice: gold"), "t.plans:1:8: unknown tier 'gold' (the "
                                                        "policy's tiers: free, paid, enterprise)");
}

Test(plans, control_bytes_are_refused_and_tabs_are_blanks)
{
    cr_assert_str_eq(fail_n("a\0b: paid", 9),
                     "t.plans:1:2: a control byte (0x00): a plans file is text, and keys that "
                     "hold control bytes cannot be written in it");
    cr_assert_str_eq(fail("ok: free\na\x01: paid"),
                     "t.plans:2:2: a control byte (0x01): a plans file is text, and keys that "
                     "hold control bytes cannot be written in it");
    cr_assert_str_eq(fail("alice: pa\x7fid"),
                     "t.plans:1:10: a control byte (0x7f): a plans file is text, and keys that "
                     "hold control bytes cannot be written in it");
    cr_assert_str_eq(fail("# \x1b[0m\n"),
                     "t.plans:1:3: a control byte (0x1b): a plans file is text, and keys that "
                     "hold control bytes cannot be written in it");
    sl_plans *p = ok("a\tb: paid\n\"\tq\t\": free\n");
    cr_assert_eq(tier(p, "a\tb"), PAID);
    cr_assert_eq(tier(p, "\tq\t"), FREE);
    sl_plans_free(p);
}

/* n copies of c, NUL-terminated, in a static buffer of at least n + 1. */
static char *repeat(char *buf, char c, size_t n)
{
    memset(buf, c, n);
    buf[n] = '\0';
    return buf;
}

Test(plans, key_tier_and_line_limits)
{
    static char key[SL_PLAN_KEY_MAX + 2], line[3 * SL_PLANS_LINE_MAX];
    /* A key of 512 bytes, unquoted and quoted (each byte escaped). */
    repeat(key, 'k', SL_PLAN_KEY_MAX);
    snprintf(line, sizeof line, "%s: paid\n", key);
    sl_plans *p = ok(line);
    cr_assert_eq(tier(p, key), PAID);
    sl_plans_free(p);
    repeat(key, 'k', SL_PLAN_KEY_MAX + 1);
    snprintf(line, sizeof line, "ok: free\n  %s: paid\n", key);
    cr_assert_str_eq(fail(line), "t.plans:2:3: the key is 513 bytes long: a key is 1 to 512 bytes");

    size_t n = 0;
    line[n++] = '"';
    for (int i = 0; i < SL_PLAN_KEY_MAX; i++)
        line[n++] = '\\', line[n++] = '\\';
    memcpy(line + n, "\": free\n", 9);
    p = ok(line);
    repeat(key, '\\', SL_PLAN_KEY_MAX);
    cr_assert_eq(tier(p, key), FREE);
    sl_plans_free(p);
    memcpy(line + n, "\\\\\": free\n", 11);
    cr_assert_str_eq(fail(line), "t.plans:1:1: the key is 513 bytes long: a key is 1 to 512 bytes");

    /* Tier names of 64 bytes; 65 is refused before it is looked for. */
    static char t64[SL_PLAN_TIER_MAX + 2];
    repeat(t64, 't', SL_PLAN_TIER_MAX);
    const char *const long_tiers[] = {"free", t64};
    snprintf(line, sizeof line, "a: %s\n", t64);
    p = both(line, strlen(line), long_tiers, 2);
    cr_assert_not_null(p, "%s", err);
    cr_assert_eq(tier(p, "a"), 1);
    sl_plans_free(p);
    snprintf(line, sizeof line, "a: %st\n", t64);
    cr_assert_null(both(line, strlen(line), long_tiers, 2));
    cr_assert_str_eq(err, "t.plans:1:4: the tier name is 65 bytes long: a tier name is 1 to 64 "
                          "bytes");

    /* A line of 4096 bytes, its line end not counted; 4097 refused, and so
     * is a line longer than the loader's chunk. */
    size_t pad = SL_PLANS_LINE_MAX - SL_PLAN_KEY_MAX - strlen(": paid");
    repeat(key, 'k', SL_PLAN_KEY_MAX);
    snprintf(line, sizeof line, "%s%*s: paid\r\nb: free", key, (int)pad, "");
    cr_assert_eq(strchr(line, '\r') - line, SL_PLANS_LINE_MAX);
    p = ok(line);
    cr_assert_eq(tier(p, key), PAID);
    cr_assert_eq(tier(p, "b"), FREE);
    sl_plans_free(p);
    snprintf(line, sizeof line, "a: free\n%s%*s: paid\n", key, (int)pad + 1, "");
    cr_assert_str_eq(fail(line), "t.plans:2:4097: the line is longer than 4096 bytes, the most a "
                                 "line may be");
    size_t big = (3u << 20) / 2;
    char *huge = malloc(big);
    cr_assert_not_null(huge);
    memset(huge, 'x', big);
    memcpy(huge + big - 6, ": paid", 6);
    cr_assert_str_eq(fail_n(huge, big), "t.plans:1:4097: the line is longer than 4096 bytes, the "
                                        "most a line may be");
    free(huge);
}

Test(plans, unknown_tiers_name_the_known_ones)
{
    cr_assert_str_eq(fail("alice: gold"), "t.plans:1:8: unknown tier 'gold' (the policy's tiers: "
                                          "free, paid, enterprise)");
    cr_assert_str_eq(fail("alice: free\nbob:   Paid  \n"),
                     "t.plans:2:8: unknown tier 'Paid' (the policy's tiers: free, paid, "
                     "enterprise)");
    cr_assert_null(both("alice: paid", 11, NULL, 0));
    cr_assert_str_eq(err, "t.plans:1:8: unknown tier 'paid' (the policy has no tiers)");
    sl_plans *p = both("# nothing\n", 10, NULL, 0);
    cr_assert_not_null(p, "%s", err);
    cr_assert_eq(sl_plans_count(p), 0);
    sl_plans_free(p);
    /* A tier's number is its place in the caller's list. */
    const char *const two[] = {"paid", "free"};
    p = both("alice: paid\nbob: free\n", 22, two, 2);
    cr_assert_not_null(p, "%s", err);
    cr_assert_eq(tier(p, "alice"), 0);
    cr_assert_eq(tier(p, "bob"), 1);
    sl_plans_free(p);
    /* A message cut to the caller's buffer stays a string. */
    sl_plans *q = (sl_plans *)1;
    char small[24];
    cr_assert_eq(sl_plans_parse("alice: gold", 11, "t.plans", tiers3, 3, hkey, &q, small,
                                sizeof small),
                 -1);
    cr_assert_null(q);
    cr_assert_str_eq(small, "t.plans:1:8: unknown ti");
}

Test(plans, the_callers_tiers_are_checked)
{
    static const char *many[SL_PLANS_MAX_TIERS + 1];
    for (size_t i = 0; i <= SL_PLANS_MAX_TIERS; i++)
        many[i] = "t";
    cr_assert_null(both("", 0, many, SL_PLANS_MAX_TIERS + 1));
    cr_assert_str_eq(err, "t.plans: at most 255 tiers (got 256)");
    sl_plans *p = both("a: t\n", 5, many, SL_PLANS_MAX_TIERS);
    cr_assert_not_null(p, "%s", err);
    sl_plans_free(p);
    const char *const bad[] = {"free", ""};
    cr_assert_null(both("", 0, bad, 2));
    cr_assert_str_eq(err, "t.plans: tier 1's name must be 1 to 64 bytes");
}

Test(plans, a_key_given_twice_names_both_lines)
{
    cr_assert_str_eq(fail("alice: paid\nbob: free\nalice: paid\n"),
                     "t.plans:3:1: key 'alice' is given twice (first on line 1)");
    cr_assert_str_eq(fail("alice: paid\n\n  alice  : free\n"),
                     "t.plans:3:3: key 'alice' is given twice (first on line 1)");
    cr_assert_str_eq(fail("# c\nalice: paid\n\"alice\": free\n"),
                     "t.plans:3:1: key 'alice' is given twice (first on line 2)");
    static char key[101], text[256];
    repeat(key, 'k', 100);
    snprintf(text, sizeof text, "%s: free\n%s: free\n", key, key);
    char want[256];
    snprintf(want, sizeof want, "t.plans:2:1: key '%.64s...' is given twice (first on line 1)", key);
    cr_assert_str_eq(fail(text), want);
    /* After the table has grown many times, the line is still known. */
    size_t cap = 2000 * 16 + 32, len = 0;
    char *big = malloc(cap);
    cr_assert_not_null(big);
    for (int i = 0; i < 2000; i++)
        len += (size_t)snprintf(big + len, cap - len, "k%d: %s\n", i, tiers3[i % 3]);
    len += (size_t)snprintf(big + len, cap - len, "k1234: paid\n");
    cr_assert_str_eq(fail_n(big, len), "t.plans:2001:1: key 'k1234' is given twice (first on line "
                                       "1235)");
    free(big);
}

Test(plans, files_too_large_missing_or_unreadable)
{
    /* The length is refused before a byte is read (the buffer is smaller
     * than the length claimed, and is not touched). */
    static const char one[1] = {'a'};
    sl_plans *p = (sl_plans *)1;
    cr_assert_eq(sl_plans_parse(one, (size_t)SL_PLANS_MAX_BYTES + 1, "t.plans", tiers3, 3, hkey,
                                &p, err, sizeof err),
                 -1);
    cr_assert_null(p);
    cr_assert_str_eq(err, "t.plans: the file is larger than 1 GiB (1073741824 bytes), the most a "
                          "plans file may be");
    /* Sparse files: one byte over is refused by its size; exactly 1 GiB is
     * read (and refused for what it holds: NUL bytes, no line end). */
    char path[32], want[256];
    write_file(path, "", 0);
    cr_assert_eq(truncate(path, (off_t)SL_PLANS_MAX_BYTES + 1), 0);
    cr_assert_eq(sl_plans_load(path, tiers3, 3, hkey, &p, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s: the file is larger than 1 GiB (1073741824 bytes), the most "
                                "a plans file may be", path);
    cr_assert_str_eq(err, want);
    cr_assert_eq(truncate(path, (off_t)SL_PLANS_MAX_BYTES), 0);
    cr_assert_eq(sl_plans_load(path, tiers3, 3, hkey, &p, err, sizeof err), -1);
    snprintf(want, sizeof want, "%s:1:4097: the line is longer than 4096 bytes, the most a line "
                                "may be", path);
    cr_assert_str_eq(err, want);
    unlink(path);

    cr_assert_eq(sl_plans_load("/nonexistent/plans", tiers3, 3, hkey, &p, err, sizeof err), -1);
    cr_assert_null(p);
    cr_assert_str_eq(err, "/nonexistent/plans: No such file or directory");
    cr_assert_eq(sl_plans_load("/tmp", tiers3, 3, hkey, &p, err, sizeof err), -1);
    cr_assert_null(p);
    cr_assert_str_eq(err, "/tmp: not a regular file");
    /* A FIFO is refused at once, not waited on for a writer. */
    char fifo[] = "/tmp/sluice-plans-fifo-XXXXXX";
    int tmpfd = mkstemp(fifo);
    cr_assert(tmpfd >= 0);
    close(tmpfd);
    unlink(fifo);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    sl_plans *fp = NULL;
    cr_assert_eq(sl_plans_load(fifo, tiers3, 3, hkey, &fp, err, sizeof err), -1);
    cr_assert(strstr(err, ": not a regular file") != NULL, "%s", err);
    unlink(fifo);
}

/* sl_plans_load's read buffer (SL_PLANS_CHUNK in plans.c). */
#define CHUNK ((size_t)1 << 20)

/* Appends comment lines to buf (of len bytes) until it is exactly `to`
 * bytes long (to >= *len + 2). */
static void pad_to(char *buf, size_t *len, size_t to)
{
    while (*len < to) {
        size_t n = to - *len;
        if (n > 4000)
            n = n - 4000 >= 2 ? 4000 : n - 2;
        buf[*len] = '#';
        memset(buf + *len + 1, '-', n - 2);
        buf[*len + n - 1] = '\n';
        *len += n;
    }
}

Test(plans, lines_across_the_loaders_chunks)
{
    size_t cap = 4 * CHUNK, len = 0;
    char *text = malloc(cap);
    cr_assert_not_null(text);
    /* A CRLF line whose '\r' ends the first chunk. */
    static const char crlf[] = "\"cr lf\": enterprise\r\n";
    pad_to(text, &len, CHUNK - (sizeof crlf - 2));
    memcpy(text + len, crlf, sizeof crlf - 1);
    len += sizeof crlf - 1;
    cr_assert_eq(text[CHUNK - 1], '\r');
    /* Keys, then a line of the most bytes across the second read's end
     * (about 2 MiB less what the first carried). */
    for (int i = 0; len < 2 * CHUNK - 3000; i++)
        len += (size_t)snprintf(text + len, cap - len, "key:%d: %s\n", i, tiers3[i % 3]);
    static char key[SL_PLAN_KEY_MAX + 1];
    repeat(key, 'L', SL_PLAN_KEY_MAX);
    len += (size_t)snprintf(text + len, cap - len, "%s%*s: paid\n", key,
                            (int)(SL_PLANS_LINE_MAX - SL_PLAN_KEY_MAX - 6), "");
    len += (size_t)snprintf(text + len, cap - len, "last: free");
    sl_plans *p = ok_n(text, len);
    cr_assert_eq(tier(p, "cr lf"), ENTERPRISE);
    cr_assert_eq(tier(p, "key:0"), FREE);
    cr_assert_eq(tier(p, "key:1"), PAID);
    cr_assert_eq(tier(p, key), PAID);
    cr_assert_eq(tier(p, "last"), FREE);
    size_t keys = sl_plans_count(p);
    sl_plans_free(p);
    cr_assert(keys > 50000, "%zu keys", keys);

    /* A line one byte too long across the first chunk's end, then one at
     * the end of a file longer than a chunk: the same message either way. */
    len = 0;
    pad_to(text, &len, CHUNK - 2000);
    memset(text + len, 'x', SL_PLANS_LINE_MAX + 1);
    len += SL_PLANS_LINE_MAX + 1;
    char want[128];
    size_t lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    snprintf(want, sizeof want, "t.plans:%zu:4097: the line is longer than 4096 bytes, the most "
                                "a line may be", lines + 1);
    text[len++] = '\n';
    cr_assert_str_eq(fail_n(text, len), want);
    cr_assert_str_eq(fail_n(text, len - 1), want);
    free(text);
}

static int count_and_stop(void *arg, const void *key, size_t len, int t)
{
    int *n = arg;
    cr_assert(len > 0 && t >= 0 && t < 3);
    return ++*n == 2 ? 7 : 0;
}

Test(plans, each_key_once_and_other_hash_keys)
{
    static const char text[] = "a: free\nb: paid\nc: enterprise\nd: free\n";
    sl_plans *p = ok(text);
    int n = 0;
    cr_assert_eq(sl_plans_each(p, count_and_stop, &n), 7);
    cr_assert_eq(n, 2);
    /* Another hash key places the keys elsewhere, and finds the same. */
    const uint64_t other[2] = {1, 2};
    sl_plans *q = NULL;
    cr_assert_eq(sl_plans_parse(text, sizeof text - 1, "t", tiers3, 3, other, &q, err, sizeof err),
                 0, "%s", err);
    assert_same(p, q);
    assert_same(q, p);
    cr_assert_eq(sl_plans_each(NULL, count_and_stop, &n), 0);
    sl_plans_free(q);
    sl_plans_free(p);
}

Test(plans, allocation_failures_are_answered_and_leak_nothing)
{
    /* Enough keys for the table to grow several times. */
    char text[8192];
    size_t len = 0;
    for (int i = 0; i < 300; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "user:%d: %s\r\n", i, tiers3[i % 3]);
    sl_plans *ref = ok_n(text, len);
    char path[32];
    write_file(path, text, len);
    int failures = 0;
    for (long nth = 1; nth <= 200; nth++) {
        for (int load = 0; load < 2; load++) {
            sl_plans *p = (sl_plans *)1;
            sl_alloc_fail_nth(nth);
            int rc = load ? sl_plans_load(path, tiers3, 3, hkey, &p, err, sizeof err)
                          : sl_plans_parse(text, len, "t.plans", tiers3, 3, hkey, &p, err,
                                           sizeof err);
            sl_alloc_fail_nth(0);
            if (rc == 0) {
                /* The failing allocation was not reached, or was the
                 * final trim, which is only an economy. */
                assert_same(p, ref);
                sl_plans_free(p);
            } else {
                cr_assert_null(p);
                cr_assert(strstr(err, ": out of memory"), "nth %ld: %s", nth, err);
                failures++;
            }
        }
    }
    cr_assert(failures > 10, "%d failures", failures);
    unlink(path);
    sl_plans_free(ref);
    test_assert_no_leak();
}

/* The million keys' generator: key i's bytes (24) and tier, from the seed. */
static void million_key(test_rng *r, uint32_t i, char key[32], int *t)
{
    uint64_t v = test_next(r);
    snprintf(key, 32, "k:%05x:%016llx", (unsigned)i, (unsigned long long)v);
    *t = (int)(v >> 61) % 3;
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

Test(plans_million, a_million_keys_load_and_are_all_found)
{
    enum { N = 1000000, ABSENT = 10000 };
    char path[] = "/tmp/sl_plans_million_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    cr_assert_not_null(f);
    test_rng r = {42};
    char key[32];
    int t;
    for (uint32_t i = 0; i < N; i++) {
        million_key(&r, i, key, &t);
        fprintf(f, "%s: %s\n", key, tiers3[t]);
    }
    cr_assert_eq(fclose(f), 0);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);

    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    sl_plans *p = NULL;
    int rc = sl_plans_load(path, tiers3, 3, hkey, &p, err, sizeof err);
    double took = seconds_since(&t0);
    unlink(path);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert_eq(sl_plans_count(p), N);
    double per_key = (double)sl_plans_bytes(p) / N;
    fprintf(stderr, "plans: %d keys of 24 bytes (a file of %lld bytes) loaded in %.3f s; the "
                    "table holds %zu bytes, %.1f bytes a key\n",
            N, (long long)st.st_size, took, sl_plans_bytes(p), per_key);
    cr_assert(per_key < 64, "%.1f bytes a key", per_key);

    clock_gettime(CLOCK_MONOTONIC, &t0);
    r = (test_rng){42};
    for (uint32_t i = 0; i < N; i++) {
        million_key(&r, i, key, &t);
        int got = sl_plans_lookup(p, key, 24);
        if (got != t)
            cr_assert_eq(got, t, "key %s", key);
        /* Its prefixes are not keys. */
        if (i % 100 == 0)
            cr_assert_eq(sl_plans_lookup(p, key, 23), -1);
    }
    double look = seconds_since(&t0);
    /* Absent keys: numbers past the file's, and present numbers with other
     * random parts. */
    for (uint32_t i = 0; i < ABSENT; i++) {
        million_key(&r, N + i, key, &t);
        cr_assert_eq(sl_plans_lookup(p, key, 24), -1, "key %s", key);
        million_key(&r, i * 97, key, &t);
        cr_assert_eq(sl_plans_lookup(p, key, 24), -1, "key %s", key);
    }
    fprintf(stderr, "plans: %d lookups of present keys in %.3f s\n", N, look);
    sl_plans_free(p);
}

/* The most keys, and one more: 16 777 217 lines of 10 bytes or so. It
 * takes some 10 s and 850 MB in the release build (three times as long
 * under the sanitizers), so it runs only when asked:
 * SLUICE_PLANS_MAX_KEYS=1 build/tests/test_plans (its suite is plans_max). */
Test(plans_max, the_most_keys_and_one_more)
{
    if (!getenv("SLUICE_PLANS_MAX_KEYS"))
        cr_skip_test("set SLUICE_PLANS_MAX_KEYS=1 to run it");
    const char *const one[] = {"a"};
    size_t n = SL_PLANS_MAX_KEYS, cap = (n + 1) * 12, len = 0;
    char *text = malloc(cap);
    cr_assert_not_null(text);
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, cap - len, "%zx: a\n", i);
    sl_plans *p = NULL;
    cr_assert_eq(sl_plans_parse(text, len, "t.plans", one, 1, hkey, &p, err, sizeof err), 0, "%s",
                 err);
    cr_assert_eq(sl_plans_count(p), n);
    cr_assert_eq(sl_plans_lookup(p, "ffffff", 6), 0);
    fprintf(stderr, "plans: %zu keys, %.1f bytes a key\n", n, (double)sl_plans_bytes(p) / n);
    sl_plans_free(p);
    len += (size_t)snprintf(text + len, cap - len, "last: a\n");
    cr_assert_eq(sl_plans_parse(text, len, "t.plans", one, 1, hkey, &p, err, sizeof err), -1);
    cr_assert_str_eq(err, "t.plans:16777217:1: more than 16777216 keys, the most a plans file "
                          "may hold");
    free(text);
}

/* ---- building key by key (a Redis hash's fields) ---- */

/* A slow model of a build: the last tier set for each of n keys "k<i>",
 * -1 for a key never set. */
Test(plans_build, agrees_with_a_model_under_random_sets)
{
    enum { N = 3000, SETS = 20000 };
    static int model[N];
    for (int i = 0; i < N; i++)
        model[i] = -1;
    uint64_t rng = 42;
    sl_plans_build *b = sl_plans_build_new(hkey);
    cr_assert_not_null(b);
    for (int s = 0; s < SETS; s++) {
        rng = rng * 6364136223846793005u + 1442695040888963407u;
        int i = (int)((rng >> 33) % N), t = (int)((rng >> 20) % 3);
        char key[16];
        int len = snprintf(key, sizeof key, "k%d", i);
        cr_assert_eq(sl_plans_build_set(b, key, (size_t)len, (unsigned)t), 0, "%s",
                     sl_plans_build_error(b));
        model[i] = t;
    }
    sl_plans *p = sl_plans_build_finish(b);
    cr_assert_not_null(p);
    size_t set = 0;
    for (int i = 0; i < N; i++) {
        char key[16];
        int len = snprintf(key, sizeof key, "k%d", i);
        cr_assert_eq(sl_plans_lookup(p, key, (size_t)len), model[i], "key %s", key);
        set += model[i] >= 0;
    }
    cr_assert_eq(sl_plans_count(p), set, "a key set twice is one key");
    sl_plans_free(p);
}

Test(plans_build, any_bytes_make_a_key_and_bad_lengths_are_refused)
{
    sl_plans_build *b = sl_plans_build_new(hkey);
    cr_assert_not_null(b);
    cr_assert_eq(sl_plans_build_set(b, "a\0b\n\x01", 5, PAID), 0);
    cr_assert_eq(sl_plans_build_set(b, "", 0, PAID), -1);
    cr_assert_str_eq(sl_plans_build_error(b), "plans: a key is 1 to 512 bytes (got 0)");
    char big[SL_PLAN_KEY_MAX + 1];
    memset(big, 'x', sizeof big);
    cr_assert_eq(sl_plans_build_set(b, big, sizeof big, FREE), -1);
    cr_assert_eq(sl_plans_build_set(b, big, SL_PLAN_KEY_MAX, FREE), 0, "the most is a key");
    cr_assert_eq(sl_plans_build_set(b, "t", 1, SL_PLANS_MAX_TIERS), -1);
    sl_plans *p = sl_plans_build_finish(b);
    cr_assert_eq(sl_plans_count(p), 2);
    cr_assert_eq(sl_plans_lookup(p, "a\0b\n\x01", 5), PAID);
    cr_assert_eq(sl_plans_lookup(p, "a", 1), -1);
    cr_assert_eq(sl_plans_lookup(p, big, SL_PLAN_KEY_MAX), FREE);
    sl_plans_free(p);
    /* none set: an empty table, every key unknown */
    p = sl_plans_build_finish(sl_plans_build_new(hkey));
    cr_assert_not_null(p);
    cr_assert_eq(sl_plans_count(p), 0);
    cr_assert_eq(sl_plans_lookup(p, "a", 1), -1);
    sl_plans_free(p);
    sl_plans_build_abort(NULL);
}

/* Every allocation of a build failing in turn: a failed set says so and
 * leaves the builder usable; the table then holds what was set. */
Test(plans_build, an_allocation_failure_is_an_answer)
{
    int failures = 0;
    for (long nth = 1; nth <= 40; nth++) {
        sl_alloc_fail_nth(nth);
        sl_plans_build *b = sl_plans_build_new(hkey);
        int ok = 0;
        for (int i = 0; b && i < 200; i++) {
            char key[16];
            int len = snprintf(key, sizeof key, "k%d", i);
            if (sl_plans_build_set(b, key, (size_t)len, (unsigned)(i % 3)) == 0)
                ok++;
            else
                cr_assert_str_eq(sl_plans_build_error(b), "plans: out of memory");
        }
        sl_plans *p = b ? sl_plans_build_finish(b) : NULL;
        sl_alloc_fail_nth(0);
        if (!b || ok < 200)
            failures++;
        if (p) {
            int found = 0;
            for (int i = 0; i < 200; i++) {
                char key[16];
                int len = snprintf(key, sizeof key, "k%d", i);
                int t = sl_plans_lookup(p, key, (size_t)len);
                cr_assert(t == -1 || t == i % 3);
                found += t >= 0;
            }
            cr_assert_eq((size_t)found, sl_plans_count(p));
            sl_plans_free(p);
        }
        if (nth == 2) {
            /* and an abort frees what a build holds */
            sl_plans_build *a = sl_plans_build_new(hkey);
            cr_assert_eq(sl_plans_build_set(a, "x", 1, 0), 0);
            sl_plans_build_abort(a);
        }
    }
    cr_assert_gt(failures, 0, "the hook made no allocation fail");
}

/* ---- plans: redis:HASH in a config ---- */

static sl_config *config_of(const char *plans, int *rc)
{
    char text[512];
    snprintf(text, sizeof text,
             "policies:\n  api:\n    limit: 2\n    period: 1h\n    plans: %s\n"
             "    tiers:\n      free: {limit: 5, period: 1h}\n", plans);
    sl_config *c = NULL;
    *rc = sl_config_parse(text, strlen(text), "c.yaml", &c, err, sizeof err);
    return c;
}

Test(plans_config, a_redis_hash_is_named_not_read)
{
    int rc;
    sl_config *c = config_of("redis:plans:{api}", &rc);
    cr_assert_eq(rc, 0, "%s", err);
    const sl_policy *p = &c->policies[0];
    cr_assert_str_eq(p->plans_redis, "plans:{api}");
    cr_assert_eq(p->plans_refresh_ns, SL_PLANS_REFRESH_DEFAULT_NS);
    cr_assert_null(atomic_load(&p->plans), "the server reads it");
    cr_assert_null(p->plans_path);
    /* no table yet: every key on the default tier, and no tier may be named */
    char keys[SL_POLICY_KEYS_ROOM];
    sl_take_item items[SL_TAKE_MANY_MAX];
    const sl_named_limit *which[SL_TAKE_MANY_MAX];
    size_t nkey;
    cr_assert_eq(sl_policy_items(p, NULL, 0, "k", 1, 1, 0, keys, sizeof keys, items, which,
                                 &nkey), 1);
    cr_assert_eq(items[0].limit, &p->limits.l[0].limit);
    cr_assert_eq(sl_policy_items(p, "free", 4, "k", 1, 1, 0, keys, sizeof keys, items, which,
                                 &nkey), -2);
    sl_config_free(c);

    c = config_of("{redis: h, refresh: 250ms}", &rc);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert_str_eq(c->policies[0].plans_redis, "h");
    cr_assert_eq(c->policies[0].plans_refresh_ns, 250000000);
    sl_config_free(c);
}

Test(plans_config, a_bad_hash_setting_is_refused_with_its_place)
{
    static const struct {
        const char *plans, *msg;
    } bad[] = {
        {"\"redis:\"", "c.yaml:5:12: policy 'api': plans: the Redis hash's name must be 1 to 512 "
                       "bytes (plans: redis:NAME)"},
        {"{redis: h, refresh: 50ms}", "c.yaml:5:32: policy 'api': plans: refresh must be a "
                                      "duration from 100ms to 1d (got '50ms')"},
        {"{redis: h, refresh: 2d}", "c.yaml:5:32: policy 'api': plans: refresh must be a "
                                    "duration from 100ms to 1d (got '2d')"},
        {"{refresh: 1s}", "c.yaml:5:12: policy 'api': plans: a mapping names the Redis hash "
                          "(redis: NAME)"},
        {"{redis: h, every: 1s}", "c.yaml:5:23: policy 'api': plans: unknown setting 'every' "
                                  "(redis, refresh)"},
        {"{redis: [a]}", "c.yaml:5:20: policy 'api': plans: redis must be the name of a hash "
                         "(got a list)"},
        {"[a]", "c.yaml:5:12: policy 'api': plans must be the path of a plans file, or "
                "redis:HASH (got a list)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc;
        sl_config *c = config_of(bad[i].plans, &rc);
        cr_assert_eq(rc, -1, "%s", bad[i].plans);
        cr_assert_null(c);
        cr_assert_str_eq(err, bad[i].msg, "%s", bad[i].plans);
    }
}
