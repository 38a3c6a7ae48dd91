/*
 * The HTML escaper of the live page (proto/html.h): the cases that matter
 * (a script in a key, quotes in an attribute, bad UTF-8, control bytes),
 * and random bytes against a slow model that decodes UTF-8 code point by
 * code point, with a fixed seed.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "common/buf.h"
#include "proto/html.h"

static char out_text[65536];

/* The escaper's output for n bytes at s, NUL-terminated in out_text. */
static const char *esc(const void *s, size_t n)
{
    sl_buf b;
    sl_buf_init(&b, 0, 0);
    cr_assert_eq(sl_html_escape(&b, s, n), 0);
    cr_assert_lt(b.len, sizeof out_text);
    memcpy(out_text, b.data ? b.data : "", b.len);
    out_text[b.len] = '\0';
    sl_buf_free(&b);
    return out_text;
}

#define FFFD "\xEF\xBF\xBD"

Test(html, a_script_is_text)
{
    cr_assert_str_eq(esc("<script>alert(1)</script>", 25),
                     "&lt;script&gt;alert(1)&lt;/script&gt;");
    cr_assert_str_eq(esc("a\"b'c&d", 7), "a&quot;b&#39;c&amp;d");
    cr_assert_str_eq(esc("&amp;", 5), "&amp;amp;", "an entity in the input stays text");
    cr_assert_str_eq(esc("", 0), "");
}

Test(html, utf8_is_kept_and_bad_bytes_are_replaced_one_each)
{
    cr_assert_str_eq(esc("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", 14),
                     "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
    cr_assert_str_eq(esc("\xC0\xAF", 2), FFFD FFFD, "an overlong '/'");
    cr_assert_str_eq(esc("\xE0\x80\xAF", 3), FFFD FFFD FFFD, "an overlong three-byte form");
    cr_assert_str_eq(esc("\xED\xA0\x80", 3), FFFD FFFD FFFD, "a surrogate");
    cr_assert_str_eq(esc("\xF4\x90\x80\x80", 4), FFFD FFFD FFFD FFFD, "past U+10FFFF");
    cr_assert_str_eq(esc("\xF5\x80\x80\x80", 4), FFFD FFFD FFFD FFFD);
    cr_assert_str_eq(esc("a\xE2\x82", 3), "a" FFFD FFFD, "cut at the end");
    cr_assert_str_eq(esc("\xE2\x82<", 3), FFFD FFFD "&lt;", "cut by a special");
    cr_assert_str_eq(esc("\x80x", 2), FFFD "x", "a stray continuation byte");
    cr_assert_str_eq(esc("\xFF", 1), FFFD);
}

Test(html, control_bytes_but_tab_and_line_ends_are_replaced)
{
    cr_assert_str_eq(esc("a\0b", 3), "a" FFFD "b");
    cr_assert_str_eq(esc("\t\n\r", 3), "\t\n\r");
    cr_assert_str_eq(esc("\x01\x1F\x7F", 3), FFFD FFFD FFFD);
}

Test(html, a_full_buffer_is_an_error)
{
    sl_buf b;
    sl_buf_init(&b, 0, 8);
    cr_assert_eq(sl_html_escape(&b, "<<<<", 4), -1);
    cr_assert(b.failed);
    sl_buf_free(&b);
}

/* ---- the slow model ---- */

/* The code point of the UTF-8 sequence at p (n bytes left) and its length,
 * by decoding first and judging the value after: 0 when it is none. */
static size_t model_decode(const unsigned char *p, size_t n, uint32_t *cp)
{
    size_t len;
    uint32_t v, min;
    if (p[0] < 0x80)
        return *cp = p[0], 1;
    if ((p[0] & 0xE0) == 0xC0)
        len = 2, v = p[0] & 0x1F, min = 0x80;
    else if ((p[0] & 0xF0) == 0xE0)
        len = 3, v = p[0] & 0x0F, min = 0x800;
    else if ((p[0] & 0xF8) == 0xF0)
        len = 4, v = p[0] & 0x07, min = 0x10000;
    else
        return 0;
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        v = v << 6 | (p[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return len;
}

/* What the escaper must write for s, by the model, into m. */
static size_t model(const unsigned char *s, size_t n, char *m)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len = model_decode(s + i, n - i, &cp);
        const char *rep = NULL;
        if (len == 0 || (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || cp == 0x7F) {
            rep = FFFD;
            len = 1;
        } else if (cp == '<') {
            rep = "&lt;";
        } else if (cp == '>') {
            rep = "&gt;";
        } else if (cp == '&') {
            rep = "&amp;";
        } else if (cp == '"') {
            rep = "&quot;";
        } else if (cp == '\'') {
            rep = "&#39;";
        }
        if (rep) {
            memcpy(m + o, rep, strlen(rep));
            o += strlen(rep);
        } else {
            memcpy(m + o, s + i, len);
            o += len;
        }
        i += len;
    }
    return o;
}

static uint64_t rng_state = 42;
static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

Test(html, random_bytes_agree_with_the_model)
{
    /* Bytes drawn mostly from the interesting ones: lead and continuation
     * bytes of every length, the specials, controls, plain letters. */
    static const unsigned char pool[] = {'a', 'Z', '<', '>', '&', '"', '\'', 0, '\t', '\n',
                                         0x1F, 0x7F, 0x80, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2,
                                         0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF};
    unsigned char in[64];
    char want[64 * 6 + 1];
    for (int round = 0; round < 20000; round++) {
        size_t n = rng() % sizeof in;
        for (size_t i = 0; i < n; i++)
            in[i] = rng() % 3 ? pool[rng() % sizeof pool] : (unsigned char)rng();
        size_t wn = model(in, n, want);
        want[wn] = '\0';
        const char *got = esc(in, n);
        cr_assert_eq(strlen(got), wn, "round %d", round);
        cr_assert_eq(memcmp(got, want, wn), 0, "round %d", round);
    }
}
