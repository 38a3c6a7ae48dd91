/*
 * html.c: bytes escaped for HTML text and attribute values (html.h).
 */
#include "proto/html.h"

#include <stdint.h>
#include <string.h>

/* The replacement character, U+FFFD, in UTF-8. */
static const char sl_html_fffd[] = "\xEF\xBF\xBD";

/*
 * The length of the well-formed UTF-8 sequence at p[0 .. n) (RFC 3629: no
 * overlong forms, no surrogates, nothing past U+10FFFF), or 0 when the
 * bytes there are not one. p[0] is at least 0x80.
 */
static size_t sl_utf8_len(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range */
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0; /* not overlong */
        else if (c == 0xED)
            hi = 0x9F; /* not a surrogate */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90; /* not overlong */
        else if (c == 0xF4)
            hi = 0x8F; /* not past U+10FFFF */
    } else {
        return 0; /* a continuation byte, or a lead byte of an overlong or too large form */
    }
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    return len;
}

int sl_html_escape(sl_buf *out, const void *s, size_t n)
{
    const unsigned char *p = s;
    size_t i = 0;
    while (i < n) {
        /* The run of bytes that go out as they are. */
        size_t run = i;
        for (;;) {
            if (run >= n)
                break;
            unsigned char c = p[run];
            if (c >= 0x80) {
                size_t len = sl_utf8_len(p + run, n - run);
                if (len == 0)
                    break;
                run += len;
                continue;
            }
            if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F || c == '&' ||
                c == '<' || c == '>' || c == '"' || c == '\'')
                break;
            run++;
        }
        if (run > i && sl_buf_add(out, p + i, run - i) != 0)
            return -1;
        i = run;
        if (i >= n)
            break;
        const char *ref;
        switch (p[i]) {
        case '&': ref = "&amp;"; break;
        case '<': ref = "&lt;"; break;
        case '>': ref = "&gt;"; break;
        case '"': ref = "&quot;"; break;
        case '\'': ref = "&#39;"; break;
        default: ref = sl_html_fffd; break; /* a control byte, or a byte of bad UTF-8 */
        }
        if (sl_buf_add(out, ref, strlen(ref)) != 0)
            return -1;
        i++;
    }
    return out->failed ? -1 : 0;
}

int sl_html_escape_str(sl_buf *out, const char *s)
{
    return sl_html_escape(out, s, strlen(s));
}
