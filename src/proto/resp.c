/*
 * resp.c: the RESP request parser, reply encoder and reply parser.
 * See resp.h for the contract; this file explains only the how.
 */
#include "proto/resp.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hex.h"
#include "common/decimal.h"
#include "common/parse.h"

/* The parsers' own results while a frame is being walked. */
enum { R_OK = 0, R_MORE = SL_RESP_INCOMPLETE, R_ERR = SL_RESP_ERROR };

/* Messages. Redis's own wording where Redis has one (networking.c). */
static const char E_MBULK_LEN[] = "Protocol error: invalid multibulk length";
static const char E_BULK_LEN[] = "Protocol error: invalid bulk length";
static const char E_BIG_INLINE[] = "Protocol error: too big inline request";
static const char E_QUOTES[] = "Protocol error: unbalanced quotes in request";
static const char E_BULK_CRLF[] = "Protocol error: bulk string not terminated by CRLF";
static const char E_BIG_REQUEST[] = "Protocol error: too big request";
static const char E_TOO_MANY_ARGS[] = "Protocol error: too many arguments";
/* The reply parser's. */
static const char E_LINE_CRLF[] = "Protocol error: line not terminated by CRLF";
static const char E_BIG_LINE[] = "Protocol error: too big line";
static const char E_INTEGER[] = "Protocol error: invalid integer";
static const char E_DOUBLE[] = "Protocol error: invalid double";
static const char E_BOOL[] = "Protocol error: invalid boolean";
static const char E_NULL[] = "Protocol error: invalid null";
static const char E_AGG_LEN[] = "Protocol error: invalid aggregate length";
static const char E_DEPTH[] = "Protocol error: reply nested too deep";
static const char E_ELEMENTS[] = "Protocol error: reply has too many elements";
static const char E_VERBATIM[] = "Protocol error: invalid verbatim string";

/* Writes "<prefix>'<c>'" into errbuf, the byte shown as itself when printable
 * ASCII and as \xHH otherwise, so that the error line stays one clean line of
 * text (Redis prints the byte raw, CR and LF turned into spaces). Returns
 * errbuf. */
static const char *quote_byte(char *errbuf, size_t size, const char *prefix, unsigned char c)
{
    if (c >= 0x20 && c < 0x7f && c != '\'' && c != '\\')
        snprintf(errbuf, size, "%s'%c'", prefix, c);
    else
        snprintf(errbuf, size, "%s'\\x%02x'", prefix, c);
    return errbuf;
}

/*
 * Reads a length header's digits at p[0 .. avail): canonical decimal (no
 * sign, no leading zero except "0" itself), at most `cap`, then CR LF.
 * On R_OK, *out is the value and *used the bytes taken, CR LF included.
 * Any byte that cannot continue a valid header is R_ERR at once, and so is
 * a value that already exceeds cap, since more digits only make it larger:
 * "$600000000" fails as soon as its digits pass the cap.
 */
static inline __attribute__((always_inline)) int parse_length(const char *p, size_t avail,
                                                               uint64_t cap, uint64_t *out,
                                                               size_t *used)
{
    /* v * 10 + d > cap exactly when v > cap / 10, or v == cap / 10 and
     * d > cap % 10: checked before the arithmetic, which cannot overflow. */
    /* The common case first: one or two digits (no leading zero) and CR LF. */
    if (avail >= 4 && p[0] > '0' && p[0] <= '9') {
        uint64_t v = (uint64_t)(p[0] - '0');
        size_t n = 1;
        if (p[1] >= '0' && p[1] <= '9')
            v = v * 10 + (uint64_t)(p[n++] - '0');
        if (p[n] == '\r' && p[n + 1] == '\n') {
            if (v > cap)
                return R_ERR;
            *out = v;
            *used = n + 2;
            return R_OK;
        }
    }
    const uint64_t cap_div = cap / 10, cap_mod = cap % 10;
    uint64_t v = 0;
    size_t i = 0;
    for (;; i++) {
        if (i == avail)
            return R_MORE;
        unsigned char c = (unsigned char)p[i];
        if (c >= '0' && c <= '9') {
            if (i == 1 && p[0] == '0')
                return R_ERR; /* leading zero */
            unsigned d = c - '0';
            if (v > cap_div || (v == cap_div && d > cap_mod))
                return R_ERR;
            v = v * 10 + d;
            continue;
        }
        if (c != '\r' || i == 0)
            return R_ERR;
        if (i + 1 == avail)
            return R_MORE;
        if (p[i + 1] != '\n')
            return R_ERR;
        *out = v;
        *used = i + 2;
        return R_OK;
    }
}

/* ------------------------------------------------------------------------ */
/* Requests                                                                 */
/* ------------------------------------------------------------------------ */

enum { KIND_NONE = 0, KIND_MULTIBULK = 1, KIND_INLINE = 2 };

void sl_resp_request_init(sl_resp_request *req, sl_resp_slice *argv, size_t argv_cap)
{
    memset(req, 0, sizeof *req);
    req->argv = argv;
    req->argv_cap = argv_cap;
}

void sl_resp_request_reset(sl_resp_request *req)
{
    req->st_base = NULL;
    req->st_pos = 0;
    req->st_expect = 0;
    req->st_kind = KIND_NONE;
}

void sl_resp_limits_default(sl_resp_limits *lim)
{
    lim->max_args = SL_RESP_DEFAULT_MAX_ARGS;
    lim->max_bulk_len = SL_RESP_DEFAULT_MAX_BULK;
    lim->max_inline_len = SL_RESP_DEFAULT_MAX_INLINE;
    lim->max_request_len = SL_RESP_DEFAULT_MAX_REQUEST;
}

/* The caps in force: lim's, with zero fields taken from the defaults. */
static sl_resp_limits effective_limits(const sl_resp_limits *lim, const sl_resp_request *req)
{
    sl_resp_limits l;
    sl_resp_limits_default(&l);
    if (lim) {
        if (lim->max_args)
            l.max_args = lim->max_args;
        if (lim->max_bulk_len)
            l.max_bulk_len = lim->max_bulk_len;
        if (lim->max_inline_len)
            l.max_inline_len = lim->max_inline_len;
        if (lim->max_request_len)
            l.max_request_len = lim->max_request_len;
    }
    if (l.max_args > req->argv_cap)
        l.max_args = req->argv_cap;
    return l;
}

static int request_error(sl_resp_request *req, const char *msg)
{
    req->errstr = msg;
    req->too_big = msg == E_BIG_REQUEST || msg == E_BIG_INLINE ? SL_RESP_BIG_BYTES
                   : msg == E_TOO_MANY_ARGS                    ? SL_RESP_BIG_ARGS
                                                               : 0;
    req->argc = 0;
    sl_resp_request_reset(req);
    return SL_RESP_ERROR;
}

/* A length (of a bulk, or a multibulk count) that parse_length refused:
 * past the cap (digits, with no leading zero, up to the CR or the end of
 * what has come) rather than malformed? */
static bool length_too_big(const char *p, size_t avail)
{
    if (avail == 0 || p[0] < '1' || p[0] > '9')
        return false;
    for (size_t i = 1; i < avail && p[i] != '\r'; i++)
        if (p[i] < '0' || p[i] > '9')
            return false;
    return true;
}

/* Ends a complete command of `n` bytes: the next call starts afresh. */
static int request_done(sl_resp_request *req, size_t n)
{
    sl_resp_request_reset(req);
    return (int)n;
}

/*
 * The multibulk body, resumable: st_pos is the offset of the next argument's
 * "$" (or 0 before the count line is read), req->argc the arguments already
 * in argv. Bulk payloads are jumped over, never scanned, so a resumed call
 * costs only the headers it has not yet seen.
 */
static int parse_multibulk(const char *buf, size_t len, sl_resp_request *req,
                           const sl_resp_limits *l)
{
    size_t pos = req->st_pos;
    if (pos == 0) {
        uint64_t count;
        size_t used;
        int rc = parse_length(buf + 1, len - 1, l->max_args, &count, &used);
        if (rc == R_ERR) { /* past the cap and malformed read the same, as in Redis */
            bool big = length_too_big(buf + 1, len - 1);
            request_error(req, E_MBULK_LEN);
            req->too_big = big ? SL_RESP_BIG_ARGS : 0;
            return SL_RESP_ERROR;
        }
        if (rc == R_MORE)
            return SL_RESP_INCOMPLETE;
        pos = 1 + used;
        if (count == 0) /* "*0": an empty command, which Redis skips */
            return request_done(req, pos);
        req->st_expect = (size_t)count;
        req->argc = 0;
    }

    while (req->argc < req->st_expect) {
        req->st_pos = pos;
        if (pos == len)
            return SL_RESP_INCOMPLETE;
        if (buf[pos] != '$')
            return request_error(req, quote_byte(req->errbuf, sizeof req->errbuf,
                                                 "Protocol error: expected '$', got ",
                                                 (unsigned char)buf[pos]));
        uint64_t blen;
        size_t used;
        int rc = parse_length(buf + pos + 1, len - pos - 1, l->max_bulk_len, &blen, &used);
        if (rc == R_ERR) {
            bool big = length_too_big(buf + pos + 1, len - pos - 1);
            request_error(req, E_BULK_LEN);
            req->too_big = big ? SL_RESP_BIG_BYTES : 0;
            return SL_RESP_ERROR;
        }
        if (rc == R_MORE) {
            /* The digits seen so far are below the cap; the request cap can
             * still be checked when they are all there. */
            return SL_RESP_INCOMPLETE;
        }
        size_t data = pos + 1 + used;
        /* data <= len and blen <= max_bulk_len <= SIZE_MAX: check the sum
         * against the request cap by subtraction, which cannot wrap. */
        if (data > l->max_request_len || blen > l->max_request_len - data ||
            2 > l->max_request_len - data - blen)
            return request_error(req, E_BIG_REQUEST);
        size_t end = data + (size_t)blen; /* <= max_request_len, no overflow */
        /* Check the terminator bytes as soon as they are here. */
        if (len > end && buf[end] != '\r')
            return request_error(req, E_BULK_CRLF);
        if (len > end + 1 && buf[end + 1] != '\n')
            return request_error(req, E_BULK_CRLF);
        if (len < end + 2)
            return SL_RESP_INCOMPLETE;
        req->argv[req->argc].ptr = buf + data;
        req->argv[req->argc].len = (size_t)blen;
        req->argc++;
        pos = end + 2;
    }
    return request_done(req, pos);
}

/* isspace() in the C locale, without the locale. */
static int is_space(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/*
 * Splits an inline line s[0 .. n) into words, with Redis's rules (see
 * resp.h). With argv == NULL it only checks the line and counts its words,
 * writing nothing; with argv it unescapes each word in place, starting at
 * the word's first byte (each input byte yields at most one output byte, so
 * the write position never passes the read position), and records it.
 * Returns the number of words, -1 for unbalanced quotes, or -2 when there
 * are more than `cap` words.
 */
static long split_inline(char *s, size_t n, sl_resp_slice *argv, size_t cap)
{
    size_t p = 0, argc = 0;
    for (;;) {
        while (p < n && is_space((unsigned char)s[p]))
            p++;
        if (p == n)
            return (long)argc;
        if (argc == cap)
            return -2;
        size_t start = p, w = p;
        int inq = 0, insq = 0;
        for (;;) {
            unsigned char c = p < n ? (unsigned char)s[p] : 0;
            if (inq) {
                if (p == n)
                    return -1;
                if (c == '\\' && p + 3 < n && s[p + 1] == 'x' &&
                    sl_hex_digit((unsigned char)s[p + 2]) >= 0 &&
                    sl_hex_digit((unsigned char)s[p + 3]) >= 0) {
                    c = (unsigned char)(sl_hex_digit((unsigned char)s[p + 2]) * 16 +
                                        sl_hex_digit((unsigned char)s[p + 3]));
                    p += 4;
                } else if (c == '\\' && p + 1 < n) {
                    switch (s[p + 1]) {
                    case 'n': c = '\n'; break;
                    case 'r': c = '\r'; break;
                    case 't': c = '\t'; break;
                    case 'b': c = '\b'; break;
                    case 'a': c = '\a'; break;
                    default: c = (unsigned char)s[p + 1]; break;
                    }
                    p += 2;
                } else if (c == '"') {
                    /* A closing quote must end the word. */
                    if (p + 1 < n && !is_space((unsigned char)s[p + 1]))
                        return -1;
                    p++;
                    break;
                } else {
                    p++;
                }
                if (argv)
                    s[w] = (char)c;
                w++;
            } else if (insq) {
                if (p == n)
                    return -1;
                if (c == '\\' && p + 1 < n && s[p + 1] == '\'') {
                    c = '\'';
                    p += 2;
                } else if (c == '\'') {
                    if (p + 1 < n && !is_space((unsigned char)s[p + 1]))
                        return -1;
                    p++;
                    break;
                } else {
                    p++;
                }
                if (argv)
                    s[w] = (char)c;
                w++;
            } else {
                if (p == n || c == ' ' || c == '\n' || c == '\r' || c == '\t')
                    break;
                p++;
                if (c == '"') {
                    inq = 1;
                } else if (c == '\'') {
                    insq = 1;
                } else {
                    if (argv)
                        s[w] = (char)c;
                    w++;
                }
            }
        }
        if (argv) {
            argv[argc].ptr = s + start;
            argv[argc].len = w - start;
        }
        argc++;
    }
}

/*
 * An inline line, resumable: st_pos counts the bytes already searched for
 * the LF. The search stops at max_inline_len + 2 bytes (the longest line
 * plus CR LF), so a client that never sends a LF is refused once it has
 * sent that many bytes.
 */
static int parse_inline(char *buf, size_t len, sl_resp_request *req, const sl_resp_limits *l)
{
    size_t window = l->max_inline_len > SIZE_MAX - 2 ? SIZE_MAX : l->max_inline_len + 2;
    size_t limit = len < window ? len : window;
    size_t from = req->st_pos;
    const char *nl = from < limit ? memchr(buf + from, '\n', limit - from) : NULL;
    if (!nl) {
        if (len >= window)
            return request_error(req, E_BIG_INLINE);
        req->st_pos = limit;
        return SL_RESP_INCOMPLETE;
    }
    size_t lf = (size_t)(nl - buf), end = lf;
    if (end > 0 && buf[end - 1] == '\r')
        end--;
    if (end > l->max_inline_len)
        return request_error(req, E_BIG_INLINE);

    /* First check and count without writing, so that a refused line is left
     * as it came; then unescape in place. */
    long argc = split_inline(buf, end, NULL, l->max_args);
    if (argc == -1)
        return request_error(req, E_QUOTES);
    if (argc == -2)
        return request_error(req, E_TOO_MANY_ARGS);
    split_inline(buf, end, req->argv, l->max_args);
    req->argc = (size_t)argc;
    req->is_inline = 1;
    return request_done(req, lf + 1);
}

/*
 * The common case in one pass: a whole multibulk command whose count and
 * lengths have at most 9 digits. Returns its length, or 0 when anything is
 * otherwise (incomplete, malformed, past a cap, a long header), and the
 * general parser then answers as it always does. Writes only argv, so a 0
 * leaves nothing behind.
 */
#define FAST_NONE SIZE_MAX

/* The value of a header's digits at p, 1 to 9 of them, canonical, followed
 * by CR LF, with *used the bytes up to the LF; FAST_NONE otherwise. The
 * caller has made sure that p[0 .. avail) is readable and avail >= 3, the
 * least a header's value takes. One and two digits, the usual lengths, are
 * read without a loop. */
static inline size_t fast_length(const unsigned char *p, size_t avail, size_t *used)
{
    unsigned d0 = p[0] - (unsigned)'0';
    if (d0 <= 9 && p[1] == '\r') {
        *used = 3;
        return p[2] == '\n' ? d0 : FAST_NONE;
    }
    if (d0 == 0 || d0 > 9 || avail < 4)
        return FAST_NONE;
    unsigned d1 = p[1] - (unsigned)'0';
    if (d1 <= 9 && p[2] == '\r') {
        *used = 4;
        return p[3] == '\n' ? d0 * 10 + d1 : FAST_NONE;
    }
    size_t v = d0, i = 1;
    for (; i < avail && i < 9; i++) {
        unsigned d = p[i] - (unsigned)'0';
        if (d > 9)
            break;
        v = v * 10 + d;
    }
    if (avail - i < 2 || p[i] != '\r' || p[i + 1] != '\n')
        return FAST_NONE;
    *used = i + 2;
    return v;
}

static size_t parse_multibulk_fast(const char *buf, size_t len, sl_resp_request *req,
                                   const sl_resp_limits *l)
{
    /* Every byte of the command must be in the buffer and within the cap. */
    const unsigned char *b = (const unsigned char *)buf;
    size_t max = len < l->max_request_len ? len : l->max_request_len, used;
    if (max < 4)
        return 0;
    size_t count = fast_length(b + 1, max - 1, &used);
    if (count == FAST_NONE || count == 0 || count > l->max_args)
        return 0;
    size_t pos = 1 + used;
    for (size_t i = 0; i < count; i++) {
        /* "$0" CR LF CR LF, six bytes, is the shortest argument. */
        if (max - pos < 6 || b[pos] != '$')
            return 0;
        size_t blen = fast_length(b + pos + 1, max - pos - 1, &used);
        size_t data = pos + 1 + used; /* <= max */
        if (blen == FAST_NONE || blen > l->max_bulk_len || max - data < blen + 2)
            return 0;
        size_t end = data + blen;
        if (b[end] != '\r' || b[end + 1] != '\n')
            return 0;
        req->argv[i].ptr = buf + data;
        req->argv[i].len = blen;
        pos = end + 2;
    }
    req->argc = count;
    return pos;
}

int sl_resp_parse(char *buf, size_t len, sl_resp_request *req, const sl_resp_limits *lim)
{
    sl_resp_limits l = effective_limits(lim, req);
    req->errstr = NULL;
    /* A frame's length is returned as an int: keep every cap below INT_MAX. */
    if (l.max_request_len > INT32_MAX - 2)
        l.max_request_len = INT32_MAX - 2;
    if (l.max_inline_len > INT32_MAX - 2)
        l.max_inline_len = INT32_MAX - 2;
    if (req->st_kind == KIND_NONE && len > 0 && buf[0] == '*') {
        size_t n = parse_multibulk_fast(buf, len, req, &l);
        if (n > 0) { /* n <= max_request_len, an int */
            req->is_inline = 0;
            return (int)n;
        }
    }
    /* A moved or shrunk buffer cannot continue the remembered command. */
    if (req->st_kind != KIND_NONE && (req->st_base != buf || req->st_pos > len || len == 0))
        sl_resp_request_reset(req);
    if (req->st_kind == KIND_NONE) {
        req->argc = 0;
        req->is_inline = 0;
        if (len == 0)
            return SL_RESP_INCOMPLETE;
        req->st_base = buf;
        req->st_pos = 0;
        req->st_kind = buf[0] == '*' ? KIND_MULTIBULK : KIND_INLINE;
    }
    if (req->st_kind == KIND_MULTIBULK)
        return parse_multibulk(buf, len, req, &l);
    return parse_inline(buf, len, req, &l);
}

/* ------------------------------------------------------------------------ */
/* Replies: the encoder                                                     */
/* ------------------------------------------------------------------------ */

static int add_header_size(sl_buf *b, char type, size_t n)
{
    size_t len = 3 + sl_dec_len((uint64_t)n);
    char *w = sl_buf_reserve(b, len);
    if (!w)
        return -1;
    w[0] = type;
    sl_dec_put(w + len - 2, (uint64_t)n);
    w[len - 2] = '\r';
    w[len - 1] = '\n';
    b->len += len;
    return 0;
}

/* The magnitude of v, without negating INT64_MIN. */
static inline uint64_t i64_mag(int64_t v)
{
    return v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v;
}

/* The most bytes ":<v>\r\n" takes: a sign, 19 digits, CR LF. */
#define INT_LINE_MAX 23

/* The length of ":<v>\r\n". */
static size_t int_line_len(int64_t v)
{
    return 3 + (v < 0) + sl_dec_len(i64_mag(v));
}

/* Room for `most` bytes when the buffer has it already, else for exactly
 * `exact()` bytes (growing it, or failing at its cap only when the exact
 * size would not fit). */
#define RESERVE_UPTO(b, most, exact)                                                          \
    (!(b)->failed && (most) <= (b)->cap - (b)->len ? (b)->data + (b)->len : sl_buf_reserve((b), (exact)))

/* Writes ":<v>\r\n" at w (room for INT_LINE_MAX bytes); returns its length.
 * The digits go straight into place; values below 10 000, the usual ones
 * (a count, seconds), two at a time without counting them first. This is
 * the CL.THROTTLE reply's inner loop. */
static inline size_t put_int_line(char *w, int64_t v)
{
    uint64_t m = i64_mag(v);
    size_t n = 0;
    w[n++] = ':';
    if (v < 0)
        w[n++] = '-';
    if (m < 10) {
        w[n++] = (char)('0' + m);
    } else if (m < 100) {
        memcpy(w + n, sl_digit_pairs + m * 2, 2);
        n += 2;
    } else if (m < 10000) {
        uint32_t hi = (uint32_t)m / 100, lo = (uint32_t)m % 100;
        if (hi < 10) {
            w[n++] = (char)('0' + hi);
        } else {
            memcpy(w + n, sl_digit_pairs + hi * 2, 2);
            n += 2;
        }
        memcpy(w + n, sl_digit_pairs + lo * 2, 2);
        n += 2;
    } else {
        n += sl_dec_len(m);
        sl_dec_put(w + n, m);
    }
    w[n++] = '\r';
    w[n++] = '\n';
    return n;
}

/* Appends `type`, s with CR and LF turned into spaces, CR LF. */
static int add_line(sl_buf *b, const char *prefix, size_t plen, const char *s, size_t len)
{
    if (len > SIZE_MAX - plen - 2)
        return sl_buf_fail(b);
    char *w = sl_buf_reserve(b, plen + len + 2);
    if (!w)
        return -1;
    memcpy(w, prefix, plen);
    for (size_t i = 0; i < len; i++)
        w[plen + i] = (s[i] == '\r' || s[i] == '\n') ? ' ' : s[i];
    w[plen + len] = '\r';
    w[plen + len + 1] = '\n';
    b->len += plen + len + 2;
    return 0;
}

int sl_resp_add_simple(sl_buf *b, const char *s, size_t len)
{
    return add_line(b, "+", 1, s, len);
}

int sl_resp_add_error(sl_buf *b, const char *msg, size_t len)
{
    if (len > 0 && msg[0] == '-')
        return add_line(b, "", 0, msg, len);
    return add_line(b, "-ERR ", 5, msg, len);
}

int sl_resp_add_errorf(sl_buf *b, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof msg)
        n = sizeof msg - 1;
    return sl_resp_add_error(b, msg, (size_t)n);
}

int sl_resp_add_int(sl_buf *b, int64_t v)
{
    char *w = RESERVE_UPTO(b, INT_LINE_MAX, int_line_len(v));
    if (!w)
        return -1;
    b->len += put_int_line(w, v);
    return 0;
}

int sl_resp_add_bulk(sl_buf *b, const void *p, size_t len)
{
    /* "$<len>\r\n<bytes>\r\n" in one reservation: replies are mostly
     * short bulk strings (a map's field names). */
    size_t head = 3 + sl_dec_len((uint64_t)len);
    if (len > SIZE_MAX - 2 - head)
        return sl_buf_fail(b);
    char *w = sl_buf_reserve(b, head + len + 2);
    if (!w)
        return -1;
    w[0] = '$';
    sl_dec_put(w + head - 2, (uint64_t)len);
    w[head - 2] = '\r';
    w[head - 1] = '\n';
    if (len)
        memcpy(w + head, p, len);
    w[head + len] = '\r';
    w[head + len + 1] = '\n';
    b->len += head + len + 2;
    return 0;
}

int sl_resp_add_null(sl_buf *b)
{
    if (b->proto >= 3)
        return sl_buf_add(b, "_\r\n", 3);
    return sl_buf_add(b, "$-1\r\n", 5);
}

int sl_resp_add_array(sl_buf *b, size_t n)
{
    return add_header_size(b, '*', n);
}

int sl_resp_add_map(sl_buf *b, size_t n)
{
    if (b->proto >= 3)
        return add_header_size(b, '%', n);
    if (n > SIZE_MAX / 2)
        return sl_buf_fail(b);
    return add_header_size(b, '*', n * 2);
}

int sl_resp_add_double(sl_buf *b, double v)
{
    char tmp[40];
    int n;
    if (isnan(v))
        n = snprintf(tmp, sizeof tmp, "nan");
    else if (isinf(v))
        n = snprintf(tmp, sizeof tmp, v > 0 ? "inf" : "-inf");
    else {
        /* The shortest form that reads back as the same double. */
        int prec = 15;
        do
            n = snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        while (prec++ < 17 && strtod(tmp, NULL) != v);
    }
    if (b->proto >= 3)
        return add_line(b, ",", 1, tmp, (size_t)n);
    return sl_resp_add_bulk(b, tmp, (size_t)n);
}

int sl_resp_add_verbatim(sl_buf *b, const char fmt[3], const void *p, size_t len)
{
    if (b->proto < 3)
        return sl_resp_add_bulk(b, p, len);
    if (len > SIZE_MAX - 6)
        return sl_buf_fail(b);
    if (add_header_size(b, '=', len + 4) < 0)
        return -1;
    char *w = sl_buf_reserve(b, len + 6);
    if (!w)
        return -1;
    memcpy(w, fmt, 3);
    w[3] = ':';
    if (len)
        memcpy(w + 4, p, len);
    w[len + 4] = '\r';
    w[len + 5] = '\n';
    b->len += len + 6;
    return 0;
}

int sl_resp_add_bool(sl_buf *b, int v)
{
    if (b->proto >= 3)
        return sl_buf_add(b, v ? "#t\r\n" : "#f\r\n", 4);
    return sl_buf_add(b, v ? ":1\r\n" : ":0\r\n", 4);
}

/* The exact length of an array of integers whose header takes `head`. */
static size_t int_array_len(size_t head, const int64_t *v, size_t n)
{
    size_t len = head;
    for (size_t i = 0; i < n; i++)
        len += int_line_len(v[i]);
    return len;
}

int sl_resp_add_int_array(sl_buf *b, const int64_t *v, size_t n)
{
    /* The hot reply of sluiced (CL.THROTTLE's five): one reservation for
     * the longest the items can be, then the digits written in place. */
    size_t head = n < 10 ? 4 : 3 + sl_dec_len(n);
    if (n > (SIZE_MAX - head) / INT_LINE_MAX)
        return sl_buf_fail(b);
    char *w = RESERVE_UPTO(b, head + n * INT_LINE_MAX, int_array_len(head, v, n));
    if (!w)
        return -1;
    w[0] = '*';
    if (n < 10)
        w[1] = (char)('0' + n);
    else
        sl_dec_put(w + head - 2, n);
    w[head - 2] = '\r';
    w[head - 1] = '\n';
    size_t len = head;
    for (size_t i = 0; i < n; i++)
        len += put_int_line(w + len, v[i]);
    b->len += len;
    return 0;
}

int sl_resp_add_command(sl_buf *b, const sl_resp_slice *argv, size_t argc)
{
    sl_resp_add_array(b, argc);
    for (size_t i = 0; i < argc; i++)
        sl_resp_add_bulk(b, argv[i].ptr, argv[i].len);
    return b->failed ? -1 : 0;
}

/* ------------------------------------------------------------------------ */
/* Replies: the parser                                                      */
/* ------------------------------------------------------------------------ */

#define REPLY_DEFAULT_MAX_BULK ((size_t)512 * 1024 * 1024)
#define REPLY_DEFAULT_MAX_LINE ((size_t)64 * 1024)

/* Finds the CR LF ending the line at buf[pos ..): R_OK with *end the offset
 * of the CR, R_MORE, or R_ERR (*msg set) for a CR not followed by LF or a
 * line longer than max. A line cannot hold a CR. */
static int find_line(const char *buf, size_t len, size_t pos, size_t max, size_t *end,
                     const char **msg)
{
    size_t avail = len - pos;
    size_t scan = avail < max + 1 ? avail : max + 1;
    const char *cr = memchr(buf + pos, '\r', scan);
    if (!cr) {
        if (avail > max) {
            *msg = E_BIG_LINE;
            return R_ERR;
        }
        return R_MORE;
    }
    size_t at = (size_t)(cr - buf);
    if (at + 1 == len)
        return R_MORE;
    if (buf[at + 1] != '\n') {
        *msg = E_LINE_CRLF;
        return R_ERR;
    }
    *end = at;
    return R_OK;
}

static int parse_double_text(const char *s, size_t n, double *out)
{
    char tmp[64];
    if (n == 0 || n >= sizeof tmp)
        return -1;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    if (!strcmp(tmp, "inf") || !strcmp(tmp, "+inf")) {
        *out = INFINITY;
        return 0;
    }
    if (!strcmp(tmp, "-inf")) {
        *out = -INFINITY;
        return 0;
    }
    if (!strcmp(tmp, "nan") || !strcmp(tmp, "-nan")) {
        *out = NAN;
        return 0;
    }
    /* strtod would also take hex, "infinity" and leading spaces: allow only
     * the characters of a decimal float. */
    for (size_t i = 0; i < n; i++)
        if (!strchr("0123456789+-.eE", tmp[i]))
            return -1;
    char *endp;
    *out = strtod(tmp, &endp);
    return endp == tmp + n ? 0 : -1;
}

static int reply_error(sl_resp_reply *rep, const char *msg)
{
    rep->errstr = msg;
    rep->count = 0;
    return SL_RESP_ERROR;
}

int sl_resp_parse_reply(const char *buf, size_t len, sl_resp_reply *rep,
                        const sl_resp_reply_limits *lim)
{
    size_t max_depth = SL_RESP_MAX_DEPTH, max_bulk = REPLY_DEFAULT_MAX_BULK,
           max_line = REPLY_DEFAULT_MAX_LINE;
    if (lim) {
        if (lim->max_depth && lim->max_depth < SL_RESP_MAX_DEPTH)
            max_depth = lim->max_depth;
        if (lim->max_bulk_len)
            max_bulk = lim->max_bulk_len;
        if (lim->max_line_len)
            max_line = lim->max_line_len;
    }
    /* The frame's length is returned as an int. */
    if (max_bulk > INT32_MAX - 2)
        max_bulk = INT32_MAX - 2;
    if (max_line > INT32_MAX - 2)
        max_line = INT32_MAX - 2;
    rep->errstr = NULL;
    rep->count = 0;

    /* stack[d] counts the children still due at depth d + 1; `pending` is
     * their sum, so that count + pending never passes nodes_cap: a reply
     * declaring more elements than fit is refused at its header. */
    size_t stack[SL_RESP_MAX_DEPTH];
    size_t depth = 0, pending = 0, n = 0, pos = 0;

    for (;;) {
        if (pos >= len)
            return SL_RESP_INCOMPLETE;
        if (pos > (size_t)INT32_MAX)
            return reply_error(rep, E_ELEMENTS);
        if (n == rep->nodes_cap)
            return reply_error(rep, E_ELEMENTS);
        sl_resp_value *v = &rep->nodes[n];
        memset(v, 0, sizeof *v);
        unsigned char t = (unsigned char)buf[pos];
        size_t end, children = 0;
        const char *msg = NULL;
        int rc;

        switch (t) {
        case '+': case '-': case ':': case '_': case '#': case ',': case '(':
        case '$': case '*': case '%': case '~': case '=': case '!':
            rc = find_line(buf, len, pos + 1, max_line, &end, &msg);
            if (rc == R_MORE)
                return SL_RESP_INCOMPLETE;
            if (rc == R_ERR)
                return reply_error(rep, msg);
            break;
        case '>': case '|':
            return reply_error(rep, quote_byte(rep->errbuf, sizeof rep->errbuf,
                                               "Protocol error: unsupported type ", t));
        default:
            return reply_error(rep, quote_byte(rep->errbuf, sizeof rep->errbuf,
                                               "Protocol error: invalid type ", t));
        }
        const char *line = buf + pos + 1;
        size_t line_len = end - pos - 1;
        size_t next = end + 2;

        switch (t) {
        case '+': case '-': case '(':
            v->type = (sl_resp_type)t;
            v->str = line;
            v->len = line_len;
            if (t == '(' && !sl_parse_i64(line, line_len, SL_INT_SIGNED, &v->integer)) {
                /* A big number need not fit in int64; keep only its text. */
                size_t i = line_len > 0 && (line[0] == '-' || line[0] == '+');
                if (i == line_len)
                    return reply_error(rep, E_INTEGER);
                for (; i < line_len; i++)
                    if (line[i] < '0' || line[i] > '9')
                        return reply_error(rep, E_INTEGER);
                v->integer = 0;
            }
            break;
        case ':':
            v->type = SL_RESP_INT;
            if (!sl_parse_i64(line, line_len, SL_INT_SIGNED, &v->integer))
                return reply_error(rep, E_INTEGER);
            break;
        case '_':
            v->type = SL_RESP_NIL;
            if (line_len != 0)
                return reply_error(rep, E_NULL);
            break;
        case '#':
            v->type = SL_RESP_BOOL;
            if (line_len != 1 || (line[0] != 't' && line[0] != 'f'))
                return reply_error(rep, E_BOOL);
            v->integer = line[0] == 't';
            break;
        case ',':
            v->type = SL_RESP_DOUBLE;
            v->str = line;
            v->len = line_len;
            if (parse_double_text(line, line_len, &v->dbl) < 0)
                return reply_error(rep, E_DOUBLE);
            break;
        case '$': case '=': case '!': {
            int64_t blen;
            if (!sl_parse_i64(line, line_len, SL_INT_MINUS, &blen) ||
                (blen < 0 && !(t == '$' && blen == -1)) || (blen >= 0 && (uint64_t)blen > max_bulk))
                return reply_error(rep, E_BULK_LEN);
            if (blen == -1) { /* RESP2's null bulk string */
                v->type = SL_RESP_NIL;
                break;
            }
            v->type = (sl_resp_type)t;
            size_t data = next, stop = data + (size_t)blen; /* blen <= INT32_MAX */
            if (len > stop && buf[stop] != '\r')
                return reply_error(rep, E_BULK_CRLF);
            if (len > stop + 1 && buf[stop + 1] != '\n')
                return reply_error(rep, E_BULK_CRLF);
            if (len < stop + 2)
                return SL_RESP_INCOMPLETE;
            if (t == '=' && (blen < 4 || buf[data + 3] != ':'))
                return reply_error(rep, E_VERBATIM);
            v->str = buf + data;
            v->len = (size_t)blen;
            next = stop + 2;
            break;
        }
        case '*': case '%': case '~': {
            int64_t cnt;
            if (!sl_parse_i64(line, line_len, SL_INT_MINUS, &cnt) ||
                (cnt < 0 && !(t == '*' && cnt == -1)))
                return reply_error(rep, E_AGG_LEN);
            if (cnt == -1) { /* RESP2's null array */
                v->type = SL_RESP_NIL;
                break;
            }
            v->type = (sl_resp_type)t;
            v->count = (size_t)cnt;
            /* Nodes still free once this one and every child already
             * declared (this node excluded, when it is one) are counted. */
            size_t room = rep->nodes_cap - n - 1 - (pending - (depth > 0));
            if ((uint64_t)cnt > room || (t == '%' && (size_t)cnt > room / 2))
                return reply_error(rep, E_ELEMENTS);
            children = t == '%' ? (size_t)cnt * 2 : (size_t)cnt;
            break;
        }
        }

        n++;
        pos = next;
        if (depth > 0)
            pending--; /* this node was one of them */
        if (children > 0) {
            if (depth == max_depth)
                return reply_error(rep, E_DEPTH);
            stack[depth++] = children;
            pending += children;
            continue;
        }
        /* A complete node: it closes every aggregate whose last child it was. */
        while (depth > 0 && --stack[depth - 1] == 0)
            depth--;
        if (depth == 0) {
            if (pos > (size_t)INT32_MAX)
                return reply_error(rep, E_ELEMENTS);
            rep->count = n;
            return (int)pos;
        }
    }
}
