/*
 * resp.h: the Redis protocol (RESP2 and RESP3), as sluice speaks it.
 *
 * Three pieces, none of which does I/O:
 *
 *   1. sl_resp_parse()        a request parser for the server: one command
 *                             from the start of a buffer, either a multibulk
 *                             array of bulk strings or an inline line.
 *   2. sl_resp_add_*()        a reply encoder into a growable buffer
 *                             (sl_buf, common/buf.h).
 *   3. sl_resp_parse_reply()  a reply parser for the CLI's client and tests.
 *
 * The parsers follow picohttpparser's calling convention: they return the
 * number of bytes the frame took (> 0), SL_RESP_INCOMPLETE when the buffer
 * holds only a prefix of a frame, or SL_RESP_ERROR when the bytes can never
 * become a valid frame. They never read past `len`, never allocate, and hand
 * back strings as slices (pointer + length) into the caller's buffer, in
 * arrays the caller owns. On error, `errstr` names what was wrong in Redis's
 * own words where Redis has them ("Protocol error: invalid bulk length"); the
 * server answers it as "-ERR <errstr>" and closes the connection, as Redis
 * does.
 *
 * Caps are checked as soon as the bytes that break them arrive: a header
 * "$600000000" is refused when its digits exceed the cap, not after 600 MB.
 * Hence a prefix of a valid frame is always INCOMPLETE, and anything that is
 * not a prefix of a valid frame is an ERROR as early as it can be told.
 *
 * The wire format, for reference (every line ends in CR LF):
 *
 *   request   *3  $3 SET  $1 k  $1 v        or the inline line   SET k v
 *   replies   +OK   -ERR msg   :42   $5 hello   $-1 (RESP2 null)   _ (RESP3 null)
 *             *2 ... (array)   %1 k v (RESP3 map)   #t (bool)   ,1.5 (double)
 */
#ifndef SLUICE_PROTO_RESP_H
#define SLUICE_PROTO_RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define SL_RESP_ERROR (-1)
#define SL_RESP_INCOMPLETE (-2)

/* A string inside somebody else's buffer: `len` bytes at `ptr`, which may
 * contain any byte, NUL and CR LF included. Never NUL-terminated. */
typedef struct sl_resp_slice {
    const char *ptr;
    size_t len;
} sl_resp_slice;

/* ------------------------------------------------------------------------ */
/* 1. Requests                                                              */
/* ------------------------------------------------------------------------ */

/* Caps for one request. A zero field means "use the default". The byte caps
 * are lowered to INT32_MAX - 2 when larger, since the parser returns an int. */
typedef struct sl_resp_limits {
    size_t max_args;        /* arguments per command (multibulk count, inline words) */
    size_t max_bulk_len;    /* bytes in one bulk string argument */
    size_t max_inline_len;  /* bytes in one inline line, without its CR LF or LF */
    size_t max_request_len; /* bytes of one whole multibulk command, headers included */
} sl_resp_limits;

#define SL_RESP_DEFAULT_MAX_ARGS 4096

/* Which cap a refused command broke (sl_resp_request.too_big). */
#define SL_RESP_BIG_BYTES 1
#define SL_RESP_BIG_ARGS 2
#define SL_RESP_DEFAULT_MAX_BULK (64 * 1024)
#define SL_RESP_DEFAULT_MAX_INLINE (64 * 1024)
#define SL_RESP_DEFAULT_MAX_REQUEST (64 * 1024)

/*
 * One parsed command, and the small state that lets a parser resume.
 *
 * Before the first call, sl_resp_request_init() points `argv` at a caller-
 * owned array of `argv_cap` slices. After a call that returns n > 0, argv[0
 * .. argc) are the command's arguments, slices into the caller's buffer (they
 * stay valid as long as those bytes do). argc == 0 means the frame was empty
 * (a blank inline line, or "*0"): Redis skips those; so should the caller,
 * after consuming the n bytes.
 *
 * Resuming: after SL_RESP_INCOMPLETE the struct remembers how far it got, so
 * that feeding a large command a few bytes at a time costs linear time, not
 * quadratic. The next call must pass the same `buf` pointer with the same
 * bytes in [0, old len) and len >= old len (append only). When the caller
 * moves the bytes (compaction, a realloc that moved them) it may either call
 * sl_resp_request_reset() or just pass the new pointer: a different `buf`
 * or a smaller `len` restarts the parse from the beginning of the command.
 * After a complete command or an error the state is back at the start, so
 * the next call may point anywhere. Reset explicitly when the *contents*
 * at the same address change (a new connection reusing the same buffer).
 */
typedef struct sl_resp_request {
    /* In: set by sl_resp_request_init(). */
    sl_resp_slice *argv; /* caller-owned; at least max_args entries to allow max_args */
    size_t argv_cap;

    /* Out. */
    size_t argc;        /* arguments in argv after a complete parse */
    int is_inline;      /* 1 when the command came as an inline line */
    const char *errstr; /* after SL_RESP_ERROR: a static string or errbuf; else NULL */
    int too_big;        /* after SL_RESP_ERROR: the cap the command broke, not the protocol's
                           syntax: SL_RESP_BIG_BYTES (max_bulk_len, max_inline_len or
                           max_request_len) or SL_RESP_BIG_ARGS (max_args); else 0 */
    char errbuf[48];    /* room for the one message that quotes a byte */

    /* Private: where a resumed parse picks up. */
    const char *st_base; /* the buffer the state refers to */
    size_t st_pos;       /* multibulk: offset of the next header; inline: bytes scanned */
    size_t st_expect;    /* multibulk: the declared count */
    int st_kind;         /* 0 none yet, 1 multibulk, 2 inline */
} sl_resp_request;

/* Prepares *req for parsing into argv[0 .. argv_cap). Does not allocate. */
void sl_resp_request_init(sl_resp_request *req, sl_resp_slice *argv, size_t argv_cap);

/* Forgets a partly parsed command: the next call starts afresh. */
void sl_resp_request_reset(sl_resp_request *req);

/* Is a command partly parsed, waiting for more bytes to resume? */
static inline int sl_resp_request_pending(const sl_resp_request *req)
{
    return req->st_kind != 0;
}

/* Fills *lim with the defaults above. */
void sl_resp_limits_default(sl_resp_limits *lim);

/*
 * Parses one command from the start of buf[0 .. len).
 *
 * lim may be NULL for the defaults; the effective argument cap is the smaller
 * of lim->max_args and req->argv_cap.
 *
 * A buffer starting with '*' is a multibulk request ("*<n>\r\n" then n times
 * "$<len>\r\n<len bytes>\r\n"); lengths are plain decimal: no sign, no
 * leading zeros. Anything else is an inline line ending in LF (an optional
 * CR before it is dropped), split into words as Redis does: runs of spaces
 * separate words; "double quotes" allow \n \r \t \b \a \xHH and \<any char>
 * escapes; 'single quotes' allow \' only; a closing quote must be followed by
 * a space or the end of the line; a quote may start in the middle of a word
 * (a"b c" is the single word "ab c").
 *
 * The bytes are only ever written for an inline line that quotes: its words
 * are unescaped in place, inside the line being consumed (an unescaped word
 * is never longer than its quoted form). Nothing is written on an error or an
 * incomplete result, and multibulk bytes are never written. Hence buf is not
 * const; a caller that must keep the raw line copies it first.
 *
 * Returns the bytes taken (> 0), SL_RESP_INCOMPLETE, or SL_RESP_ERROR with
 * req->errstr set. The cost of a call is linear in the bytes of headers and
 * inline text it examines; bulk payloads are skipped over, not scanned.
 */
int sl_resp_parse(char *buf, size_t len, sl_resp_request *req, const sl_resp_limits *lim);

/* ------------------------------------------------------------------------ */
/* 2. Replies: the encoder                                                  */
/* ------------------------------------------------------------------------ */

/*
 * Each sl_resp_add_*() appends one item to an sl_buf (common/buf.h) and
 * returns 0, or -1 when the buffer cannot grow; the failure is sticky, so
 * that a caller can encode a whole reply and check once. The buffer's
 * `proto` (2 or 3) chooses how the items that differ between RESP2 and
 * RESP3 are written: null, map, double, boolean, verbatim text. Change it
 * at any time (HELLO 3). Bytes already in protocol form go in with
 * sl_buf_add().
 */

/* "+<s>\r\n". CR and LF in s would break the frame; they are written as spaces. */
int sl_resp_add_simple(sl_buf *b, const char *s, size_t len);
/* An error line. A message that starts with '-' is written as is (it carries its
 * own code: "-WRONGPASS ..."); any other gets the "ERR " prefix, as Redis's
 * addReplyError does. CR and LF become spaces. */
int sl_resp_add_error(sl_buf *b, const char *msg, size_t len);
/* As sl_resp_add_error, with a printf format; the message is cut at 512 bytes. */
int sl_resp_add_errorf(sl_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* ":<v>\r\n". */
int sl_resp_add_int(sl_buf *b, int64_t v);
/* "$<len>\r\n<bytes>\r\n": binary safe. */
int sl_resp_add_bulk(sl_buf *b, const void *p, size_t len);
/* A null: "$-1\r\n" in RESP2, "_\r\n" in RESP3. */
int sl_resp_add_null(sl_buf *b);
/* "*<n>\r\n": the caller then adds n items. */
int sl_resp_add_array(sl_buf *b, size_t n);
/* RESP3 "%<n>\r\n"; RESP2 "*<2n>\r\n". The caller then adds n key, value pairs. */
int sl_resp_add_map(sl_buf *b, size_t n);
/* RESP3 ",<v>\r\n" ("inf", "-inf", "nan" included); RESP2 a bulk string of the
 * same text, as Redis answers doubles to RESP2 clients. */
int sl_resp_add_double(sl_buf *b, double v);
/* RESP3 "#t" / "#f"; RESP2 ":1" / ":0". */
int sl_resp_add_bool(sl_buf *b, int v);
/* Text for a human (INFO, CLIENT INFO): RESP3 a verbatim string "=<n>\r\n<fmt>:<text>"
 * with a 3-letter format ("txt", "mkd"); RESP2 a plain bulk string of the text. */
int sl_resp_add_verbatim(sl_buf *b, const char fmt[3], const void *p, size_t len);
/* An array of n integers, the same in RESP2 and RESP3: CL.THROTTLE's
 * reply (limited 0/1, limit, remaining, retry_after, reset_after). */
int sl_resp_add_int_array(sl_buf *b, const int64_t *v, size_t n);
/* A request as clients send it: an array of argc bulk strings (for the CLI's
 * client and for tests). */
int sl_resp_add_command(sl_buf *b, const sl_resp_slice *argv, size_t argc);

/* ------------------------------------------------------------------------ */
/* 3. Replies: the parser                                                   */
/* ------------------------------------------------------------------------ */

/* Reply types, by their RESP type byte. */
typedef enum sl_resp_type {
    SL_RESP_STATUS = '+',  /* simple string */
    SL_RESP_ERR = '-',     /* simple error */
    SL_RESP_INT = ':',
    SL_RESP_BULK = '$',
    SL_RESP_ARRAY = '*',
    SL_RESP_NIL = '_',     /* RESP3 null, and RESP2's "$-1" and "*-1" */
    SL_RESP_MAP = '%',
    SL_RESP_SET = '~',
    SL_RESP_BOOL = '#',
    SL_RESP_DOUBLE = ',',
    SL_RESP_BIGNUM = '(',  /* text in str; not converted */
    SL_RESP_VERBATIM = '=', /* str holds "txt:..." as sent */
    SL_RESP_BLOBERR = '!',
} sl_resp_type;

/*
 * One node of a parsed reply. A reply is a tree, stored flat in pre-order:
 * an aggregate node is followed by its children, each followed by its own.
 * For a map, `count` is the number of pairs and 2 * count nodes follow
 * (key, value, key, value, ...).
 */
typedef struct sl_resp_value {
    sl_resp_type type;
    const char *str; /* STATUS, ERR, BULK, BIGNUM, VERBATIM, BLOBERR, DOUBLE (its text): a slice */
    size_t len;
    int64_t integer; /* INT; BOOL (0 or 1) */
    double dbl;      /* DOUBLE */
    size_t count;    /* ARRAY, SET: elements; MAP: pairs */
} sl_resp_value;

/* The deepest nesting the reply parser will follow (the root is depth 0).
 * Its stack is a fixed array of this size, as hiredis's was. */
#define SL_RESP_MAX_DEPTH 16

typedef struct sl_resp_reply_limits {
    size_t max_depth;    /* at most SL_RESP_MAX_DEPTH; 0: SL_RESP_MAX_DEPTH */
    size_t max_bulk_len; /* 0: 512 MiB, Redis's own cap */
    size_t max_line_len; /* simple strings, errors, numbers; 0: 64 KiB */
} sl_resp_reply_limits;

typedef struct sl_resp_reply {
    /* In: a caller-owned array of nodes. A reply with more nodes is an error. */
    sl_resp_value *nodes;
    size_t nodes_cap;
    /* Out: nodes used after a complete parse; nodes[0] is the root. */
    size_t count;
    const char *errstr; /* after SL_RESP_ERROR: a static string or errbuf */
    char errbuf[48];
} sl_resp_reply;

/*
 * Parses one reply from the start of buf[0 .. len) into rep->nodes. Same
 * convention as sl_resp_parse(): bytes taken, SL_RESP_INCOMPLETE, or
 * SL_RESP_ERROR with rep->errstr. Stateless: after INCOMPLETE, call again
 * from the start with more bytes (a client reads replies in large chunks; the
 * cost of a call is linear in the reply's headers and simple lines). RESP3
 * push ('>') and attribute ('|') frames are refused as errors. lim may be NULL.
 */
int sl_resp_parse_reply(const char *buf, size_t len, sl_resp_reply *rep,
                        const sl_resp_reply_limits *lim);

#endif
