/*
 * html.h: text written into HTML (sluiced's live page, GET /ui): any bytes
 * (a key, a policy name) as HTML text or as a quoted attribute value, so
 * that nothing a client chose can become markup.
 */
#ifndef SL_PROTO_HTML_H
#define SL_PROTO_HTML_H

#include <stddef.h>

#include "common/buf.h"

/*
 * Appends s[0 .. n), arbitrary bytes, to out as UTF-8 that is safe as HTML
 * text and inside a double- or single-quoted attribute value: '&', '<',
 * '>', '"' and '\'' become character references (&amp; &lt; &gt; &quot;
 * &#39;); a byte sequence that is not UTF-8 (a stray or truncated byte, an
 * overlong form, a surrogate, past U+10FFFF), a NUL, DEL and the other C0
 * control characters but tab, line feed and carriage return each become
 * U+FFFD (one per byte of a bad sequence). Everything else is copied. Returns 0, or -1
 * when the buffer failed (out->failed).
 */
int sl_html_escape(sl_buf *out, const void *s, size_t n);

/* As sl_html_escape, for a NUL-terminated string. */
int sl_html_escape_str(sl_buf *out, const char *s);

#endif
