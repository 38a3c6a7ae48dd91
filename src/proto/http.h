/*
 * http.h: HTTP/1.1, as sluiced speaks it (docs/http.md).
 *
 * Five pieces, none of which does I/O:
 *
 *   1. sl_http_parse_request()   a request parser: the request line and the
 *                                header fields from the start of a buffer.
 *   2. helpers                   header lookup, query-string parameters with
 *                                percent-decoding.
 *   3. sl_http_write_*()         responses into an sl_buf (common/buf.h's
 *                                growable byte buffer): a decision with the
 *                                rate limit headers and its JSON body, an
 *                                error, any other small response.
 *   4. sl_http_check_from_*()    the /v1/check request (query string or JSON
 *                                body) decoded and validated into limits.
 *   5. sl_http_parse_response()  a response parser, for a client (the CLI's
 *                                take and bench): the status line and the
 *                                header fields, and where the body ends.
 *
 * The parser follows picohttpparser's calling convention, as resp.h does: it
 * returns the length of the header block (> 0), SL_HTTP_INCOMPLETE when the
 * buffer holds only a prefix of one, or SL_HTTP_ERROR with req->status (the
 * HTTP status to answer) and req->errstr. It never reads past `len`, never
 * allocates, never writes to the buffer, and hands back strings as slices into
 * it, in a header array the caller owns. Each byte is judged as it arrives
 * and caps are checked on every byte, so a prefix of a valid request is
 * always INCOMPLETE, and anything that cannot become one is an ERROR as soon
 * as the byte that breaks it is in the buffer.
 *
 * What the parser accepts (RFC 9112), and the choices it makes:
 *
 *   request-line  method SP request-target SP "HTTP/1." ("0" | "1") CRLF
 *                 exactly one space between the parts; the method a token;
 *                 the target visible ASCII (0x21-0x7E) in origin form
 *                 ("/path?query"), absolute form ("http://host/path?query":
 *                 path and query are taken from it) or "*"; "HTTP/2.0",
 *                 "HTTP/1.2" and the like get 505. Empty lines before the
 *                 request line are skipped (RFC 9112 section 2.2).
 *   line ends     CRLF, or a bare LF (tolerated, as picohttpparser and nginx
 *                 tolerate it, so that `printf 'GET / HTTP/1.1\n...' | nc`
 *                 works). A CR not followed by LF is an error: never a line
 *                 end, never data.
 *   fields        name ":" OWS value OWS; the name a token, no space before
 *                 the colon; the value without surrounding spaces and tabs,
 *                 any byte but CTLs (HTAB allowed, obs-text allowed). A line
 *                 starting with a space or tab (obsolete line folding) is
 *                 refused with 400.
 *   Host          an HTTP/1.1 request needs exactly one; HTTP/1.0 at most
 *                 one (RFC 9112 section 3.2: 400 otherwise).
 *   framing       Content-Length: digits only, checked for overflow; repeated
 *                 fields must all carry the same value (RFC 9112 section
 *                 6.3), differing ones are 400: a proxy and sluiced must never
 *                 disagree on where a request ends (request smuggling). Any
 *                 Transfer-Encoding is refused: 501 alone, 400 together with
 *                 a Content-Length. Chunked request bodies are not needed by
 *                 any client of sluiced (curl, requests and nginx send a
 *                 Content-Length for small JSON bodies).
 *   keep-alive    RFC 9112 section 9.3: HTTP/1.1 keeps the connection unless
 *                 a Connection field lists "close"; HTTP/1.0 only when it
 *                 lists "keep-alive" (and not "close").
 *
 * The body is the caller's business: after a complete parse it follows the
 * header block and is req->content_length bytes long (0 when there is no
 * Content-Length). req->body_too_large says it is longer than the cap (answer
 * 413 and close). Pipelined requests: consume header + body bytes and call
 * again on what follows.
 */
#ifndef SLUICE_PROTO_HTTP_H
#define SLUICE_PROTO_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/resp.h"
#include "sluice.h"

#define SL_HTTP_ERROR (-1)
#define SL_HTTP_INCOMPLETE (-2)

/* A string inside somebody else's buffer, never NUL-terminated (resp.h's). */
typedef sl_resp_slice sl_http_slice;

typedef struct sl_http_header {
    sl_http_slice name;  /* as sent (compare case-insensitively) */
    sl_http_slice value; /* without leading and trailing spaces and tabs */
} sl_http_header;

/* ------------------------------------------------------------------------ */
/* 1. Requests                                                              */
/* ------------------------------------------------------------------------ */

/* Caps for one request. A zero field means "use the default". Byte caps above
 * SL_HTTP_MAX_CAP are lowered to it, so that a header block's length always
 * fits the int the parser returns. */
typedef struct sl_http_limits {
    size_t max_request_line; /* bytes of the request line (and any empty lines
                                before it), without its line end: else 414 */
    size_t max_header_bytes; /* bytes of the header fields, line ends and the
                                final empty line included: else 431 */
    size_t max_headers;      /* header fields: else 431 */
    size_t max_body;         /* Content-Length above it sets body_too_large (413) */
} sl_http_limits;

#define SL_HTTP_DEFAULT_MAX_REQUEST_LINE (8 * 1024)
#define SL_HTTP_DEFAULT_MAX_HEADER_BYTES (16 * 1024)
#define SL_HTTP_DEFAULT_MAX_HEADERS 64
#define SL_HTTP_DEFAULT_MAX_BODY (64 * 1024)
#define SL_HTTP_MAX_CAP ((size_t)256 * 1024 * 1024)

/* Fills *lim with the defaults above. */
void sl_http_limits_default(sl_http_limits *lim);

/*
 * One parsed request head, and the small state that lets a parse resume.
 *
 * sl_http_request_init() points `headers` at a caller-owned array of
 * `headers_cap` entries; the effective header cap is the smaller of that and
 * lim->max_headers. After a call that returns n > 0 the "Out" fields describe
 * the request; every slice points into the caller's buffer and stays valid as
 * long as those bytes do.
 *
 * Resuming: after SL_HTTP_INCOMPLETE the struct remembers how far it got, so
 * that a head arriving a byte at a time costs linear time in total. The next
 * call must pass the same `buf` with the same bytes in [0, old len) and a len
 * at least as large (append only). A different `buf` pointer or a smaller len
 * restarts the parse from the start; call sl_http_request_reset() when the
 * *contents* at the same address change (a new connection reusing a buffer).
 * After a complete request or an error the next call starts afresh.
 */
typedef struct sl_http_request {
    /* In: set by sl_http_request_init(). */
    sl_http_header *headers; /* caller-owned */
    size_t headers_cap;

    /* Out, after a complete parse. */
    sl_http_slice method;  /* "GET", "POST", ...: case-sensitive, as RFC 9110 says */
    sl_http_slice target;  /* the request-target as sent */
    sl_http_slice path;    /* the target's path, still percent-encoded ("*" for OPTIONS *) */
    sl_http_slice query;   /* after the first '?', without it; len 0 when none */
    bool has_query;        /* a '?' was present (the query may still be empty) */
    int minor_version;     /* 0 or 1 */
    size_t num_headers;
    bool has_content_length;
    uint64_t content_length; /* 0 when absent */
    bool body_too_large;     /* content_length > max_body: answer 413 and close */
    bool keep_alive;         /* RFC 9112 section 9.3 */
    bool expect_continue;    /* "Expect: 100-continue" (HTTP/1.1): send
                                SL_HTTP_CONTINUE before reading the body */

    /* Out, after SL_HTTP_ERROR. */
    int status;         /* 400, 414, 431, 501 or 505 */
    const char *errstr; /* static: lowercase, no final period */
    const char *field;  /* static: the part at fault ("request-line",
                           "content-length", "host", ...), or NULL */

    /* Private: where a resumed parse picks up. */
    const char *st_base;
    size_t st_pos;        /* bytes consumed so far */
    int st_state;
    size_t st_mark;       /* start of the current token or line */
    size_t st_mark2;      /* header: the colon; request line: the first SP */
    size_t st_val_end;    /* header value: where its line end (the CR) starts */
    size_t st_line_start; /* offset where the request line begins */
    size_t st_head_start; /* offset of the first header line */
    size_t st_ver;        /* bytes of "HTTP/1.x" matched */
    int st_host;          /* Host fields seen */
    bool st_te;           /* a Transfer-Encoding field was seen */
    bool st_conn_close, st_conn_keep;
} sl_http_request;

/* "HTTP/1.1 100 Continue\r\n\r\n": the interim answer to Expect: 100-continue. */
#define SL_HTTP_CONTINUE "HTTP/1.1 100 Continue\r\n\r\n"

/* Prepares *req for parsing into headers[0 .. headers_cap). Does not allocate. */
void sl_http_request_init(sl_http_request *req, sl_http_header *headers, size_t headers_cap);

/* Forgets a partly parsed request: the next call starts afresh. */
void sl_http_request_reset(sl_http_request *req);

/*
 * Parses one request head from the start of buf[0 .. len); lim may be NULL
 * for the defaults. Returns the bytes of the request line and header fields,
 * final empty line included (> 0), SL_HTTP_INCOMPLETE, or SL_HTTP_ERROR with
 * req->status, req->errstr and req->field set. After an error the connection
 * cannot be trusted to be in sync: answer the error and close it.
 */
int sl_http_parse_request(const char *buf, size_t len, sl_http_request *req,
                          const sl_http_limits *lim);

/* ------------------------------------------------------------------------ */
/* 2. Helpers                                                               */
/* ------------------------------------------------------------------------ */

/* The first header field called `name` (NUL-terminated, compared without
 * regard to ASCII case), or NULL. Points into req->headers. */
const sl_http_header *sl_http_find_header(const sl_http_request *req, const char *name);

/* Whether slice s equals the NUL-terminated string `lit`, ignoring ASCII case. */
bool sl_http_slice_ieq(sl_http_slice s, const char *lit);

/*
 * Iterates over the "name=value" pairs of a query string (separated by '&';
 * empty pairs are skipped). *pos starts at 0. Returns 1 with the raw, still
 * encoded name and value (value len 0 when there is no '='), or 0 at the end.
 */
int sl_http_query_next(const char *q, size_t qlen, size_t *pos, sl_http_slice *name,
                       sl_http_slice *value);

/*
 * What the three decoders below answer instead of a decoded length: a
 * negative long, each value with one meaning whichever decoder answers it.
 */
typedef enum sl_http_decode_error {
    SL_HTTP_BAD_ESCAPE = -1, /* a '%' not followed by two hex digits */
    SL_HTTP_TOO_LONG = -2,   /* the decoded bytes do not fit in the caller's cap */
    SL_HTTP_NO_PARAM = -3,   /* sl_http_query_param: no parameter of that name */
} sl_http_decode_error;

/*
 * Percent-decodes s[0 .. n) into out[0 .. cap): "%XX" becomes the byte XX and
 * '+' a space (application/x-www-form-urlencoded). Returns the decoded length,
 * SL_HTTP_BAD_ESCAPE, or SL_HTTP_TOO_LONG. Never writes past out + cap; does
 * not NUL-terminate.
 */
long sl_http_percent_decode(const char *s, size_t n, char *out, size_t cap);

/* As sl_http_percent_decode, for a path segment: '+' stays a '+' (only
 * query strings use it for a space). For /v1/auth/{policy}. */
long sl_http_path_decode(const char *s, size_t n, char *out, size_t cap);

/* The first element of a comma-separated field value, without surrounding
 * spaces and tabs: "203.0.113.7, 10.0.0.1" -> "203.0.113.7" (X-Forwarded-For's
 * client address). A slice of v; empty when v starts with a comma. */
sl_http_slice sl_http_list_first(sl_http_slice v);

/*
 * Looks up parameter `name` (NUL-terminated, compared with the decoded name)
 * in a query string, and decodes its value into out[0 .. cap). Returns the
 * value's decoded length (>= 0) for the first match, SL_HTTP_NO_PARAM when
 * there is none, SL_HTTP_BAD_ESCAPE for a bad %XX escape (in the value, or in
 * a name before the match), SL_HTTP_TOO_LONG when the value does not fit.
 */
long sl_http_query_param(const char *q, size_t qlen, const char *name, char *out, size_t cap);

/* ------------------------------------------------------------------------ */
/* 3. Responses                                                             */
/* ------------------------------------------------------------------------ */

/* "OK", "Too Many Requests", ...; "Unknown" for a status it does not know. */
const char *sl_http_reason(int status);

/* The longest name a report may carry: a policy name with room for a suffix
 * such as ".global". */
#define SL_HTTP_REPORT_NAME_MAX 128

/* One limit's part in a decision response. Nothing is kept after the call. */
typedef struct sl_http_limit_report {
    const char *name;            /* the policy name in RateLimit and RateLimit-Policy
                                    (NUL-terminated, at most SL_HTTP_REPORT_NAME_MAX
                                    bytes; NULL: "default") */
    const sl_limit *limit;       /* q and w; a leaky_bucket adds delay_ms */
    const sl_decision *decision; /* what the store answered */
} sl_http_limit_report;

typedef struct sl_http_decision_opts {
    int status;      /* 0: 200 when allowed, 429 when not; else this status
                        (forward-auth: 401 or 403 for a denial, as nginx's
                        auth_request accepts only 2xx, 401 and 403) */
    bool keep_alive; /* "Connection: keep-alive", else "Connection: close" */
    bool shadow;     /* a dry-run policy, invisible to the client: 200 whatever
                        the decision and no rate limit field at all (no
                        X-RateLimit-*, Retry-After, RateLimit or
                        RateLimit-Policy), so that a client that paces itself
                        by them is not slowed by a policy not yet in force. The
                        body says "allowed":true with "shadow":true and the
                        real answer in "would_allow" and "would_retry_after_ms" */
    bool head;       /* a HEAD request: the same head, no body bytes */
    bool multi;      /* a multi-limit check: the body adds rejected_by and results.
                        Without it, several items (a policy and its global limit)
                        are listed in the RateLimit fields only */
    bool scoped;     /* a policy's answer (items: the key's limits, then the
                        policy's global ones): the body adds rejected_by,
                        "scope", "key" or "global", and "binding", the name of
                        the limit whose numbers it shows */
    size_t nkey;     /* scoped: how many items are the key's (at least 1) */
    int rejected_by; /* with several items, multi or scoped: the index of the
                        first item that rejected, -1 when all admitted */
    const char *extra; /* members appended to the body's object as they are
                          (",\"reservation\":...": /v1/reserve's), or NULL */
    size_t extra_len;  /* at most SL_HTTP_BODY_EXTRA_MAX */
    const int64_t *costs; /* what the request took from each item (sl_http_binding), or
                             NULL: the same from each */
} sl_http_decision_opts;

#define SL_HTTP_BODY_EXTRA_MAX 4096

/*
 * Which of n decisions taken together binds the caller: the one whose
 * numbers a client must be told. When some refused (rejected_by >= 0, the
 * first that did), the refusing one with the longest wait (a wait of
 * SL_NEVER is the longest), since the request passes only once all admit;
 * the first of equals. When all admitted, the one that admits the fewest
 * more requests like this one: the least remaining / cost, where cost[i]
 * is what the request took from item i (NULL: the same from each, so the
 * least remaining). A limit in requests with 299 left and one in tokens
 * with 500 left, for a request of 1 request and 1000 tokens: the tokens
 * bind. An item the request took nothing from binds only when all are
 * such (then the least remaining). SL.POLICY uses it too, so that RESP and
 * HTTP name the same limit.
 */
size_t sl_http_binding(const sl_decision *const *d, const int64_t *cost, size_t n,
                       int rejected_by);

/*
 * Appends a whole response for n (1 .. SL_TAKE_MANY_MAX) limits decided
 * together. The primary item, whose numbers fill X-RateLimit-*, Retry-After
 * and the body's top-level fields, is the binding one (sl_http_binding).
 * An item without a name is "default" when it is alone, else "limitI" for
 * the item at index I, so that every item of a list has its own name.
 *
 *   HTTP/1.1 429 Too Many Requests
 *   Content-Type: application/json
 *   Content-Length: 86
 *   Connection: keep-alive
 *   X-RateLimit-Limit: 10                  (the primary's limit: the burst)
 *   X-RateLimit-Remaining: 0
 *   X-RateLimit-Reset: 6                   (seconds until full, rounded up)
 *   Retry-After: 6                         (denials only, seconds rounded up,
 *                                           at least 1; absent when never)
 *   RateLimit-Policy: "api";q=10;w=60      (one item per limit)
 *   RateLimit: "api";r=0;t=6
 *
 *   {"allowed":false,"limit":10,"remaining":0,"retry_after_ms":5999,"reset_after_ms":5999}
 *
 * q and w are the limit and its period in seconds; a period that is not a
 * whole number of seconds is rounded up to w and q scaled to match (10 per
 * 500ms is q=20;w=1). Integers are clamped to 0 .. 999999999999999, the range
 * of an RFC 8941 Integer. Names become sf-strings: '"' and '\' escaped, bytes
 * outside 0x20-0x7E written as '?'. Returns 0, or -1 when the buffer failed
 * (out->failed set; see common/buf.h) or an argument is invalid.
 */
int sl_http_write_decision(sl_buf *out, const sl_http_decision_opts *o,
                           const sl_http_limit_report *items, size_t n);

/* The common case: one limit, 200 or 429, not a HEAD. */
int sl_http_write_check(sl_buf *out, bool keep_alive, const char *name, const sl_limit *l,
                        const sl_decision *d, bool shadow);

/*
 * Appends an error response: `status` with {"error":"<message>","field":"<field>"}
 * ("field" omitted when field is NULL). Both strings are JSON-escaped, so they
 * may quote client input. Returns 0 or -1 (out->failed).
 */
int sl_http_write_error(sl_buf *out, int status, bool keep_alive, const char *message,
                        const char *field);

/*
 * Appends any other response: status line, Content-Type (omitted when NULL),
 * Content-Length, Connection, then `extra` verbatim (whole header lines, each
 * ending in CRLF, e.g. "Allow: GET, POST\r\n"; may be NULL), then the body
 * (omitted when head is true; Content-Length still says its length).
 */
int sl_http_write_response(sl_buf *out, int status, bool keep_alive,
                           const char *content_type, const char *extra, const void *body,
                           size_t body_len, bool head);

/* ------------------------------------------------------------------------ */
/* 4. The check request                                                     */
/* ------------------------------------------------------------------------ */

#define SL_HTTP_CHECK_MAX_LIMITS SL_TAKE_MANY_MAX /* 8 */
#define SL_HTTP_KEY_MAX 1024          /* bytes in one key (the store may allow fewer) */
#define SL_HTTP_NAME_MAX 64           /* bytes in a policy or tier name (SL_POLICY_NAME_MAX) */
#define SL_HTTP_MAX_JSON (64 * 1024)  /* bytes of a JSON body */
#define SL_HTTP_JSON_MAX_DEPTH 3      /* object > "limits" array > limit object */

typedef struct sl_http_check_item {
    const char *key; /* keylen bytes in the check's strbuf; not NUL-terminated */
    size_t keylen;
    sl_limit limit;  /* from sl_limit_init or make_limit (never SL_CONCURRENCY) */
    int64_t cost;    /* >= 0; 0 peeks */
} sl_http_check_item;

/*
 * Prepares *out exactly as sl_limit_init(out, algorithm, limit, period_ns,
 * burst) then sl_limit_align_day(out, months, reset_day, utc_offset_ns, the
 * server's clock offset) would, with the same result; ctx is the check's make_limit_ctx.
 * sl_limit_init costs several takes, so a server passes one that keeps
 * prepared limits (sluiced: the worker's cache, sl_limit_cached, which its
 * RESP commands share). Without one, limits are aligned for a clock that
 * is Unix time.
 */
typedef int (*sl_http_limit_fn)(void *ctx, sl_limit *out, sl_algorithm algorithm, int64_t limit,
                                int64_t period_ns, int64_t burst, int64_t months,
                                int64_t reset_day, int64_t utc_offset_ns);

/*
 * A decoded check. The struct owns every string it points at (they live in
 * strbuf), so it is self-contained: the request bytes and any JSON tree may be
 * freed once decoding returns. Large (about 10 KiB): keep one per worker,
 * zeroed at first (calloc) or with make_limit set.
 *
 * Three shapes:
 *   ad hoc   n == 1, items[0]: key, limit, period, [burst, cost, algorithm]
 *   policy   policy != NULL, n == 1, items[0].key and .cost set, items[0].limit
 *            unset, tokens set: the server resolves the policy (and tier) from
 *            its config
 *   multi    multi == true, n in 1 .. 8 ad-hoc items, all or nothing
 */
typedef struct sl_http_check {
    /* In, optional: how limits are prepared. NULL (as calloc leaves it)
     * means sl_limit_init. Decoding reads them and never changes them. */
    sl_http_limit_fn make_limit;
    void *make_limit_ctx;
    /* In, optional: the longest key the store takes (sluiced's
     * --max-key-bytes), so that a longer one is refused naming it; 0 (or
     * more than SL_HTTP_KEY_MAX) means SL_HTTP_KEY_MAX. */
    size_t max_key;

    size_t n;
    sl_http_check_item items[SL_HTTP_CHECK_MAX_LIMITS];
    bool multi;
    const char *policy; /* policy_len bytes in strbuf, or NULL */
    size_t policy_len;
    const char *tier;   /* tier_len bytes in strbuf, or NULL */
    size_t tier_len;
    int64_t tokens;     /* a policy check's tokens (>= 0; 0 when not given) */
    int64_t ttl_ms;     /* a policy check's ttl_ms (a reservation's, /v1/reserve); -1 when
                           not given */

    /* After an error. */
    int status;              /* 400; 413 for a body over SL_HTTP_MAX_JSON; 401
                                for forward-auth without its key */
    const char *errstr;      /* points into errbuf */
    const char *field;       /* points into fieldbuf; NULL when no one field is at fault */
    char errbuf[160];
    char fieldbuf[32];

    /* Private. */
    size_t st_used;
    char strbuf[SL_HTTP_CHECK_MAX_LIMITS * SL_HTTP_KEY_MAX + 2 * SL_HTTP_NAME_MAX];
} sl_http_check;

/*
 * Decodes "key=K&limit=N&period=P[&burst=B][&cost=C][&algorithm=A]" or
 * "key=K&policy=NAME[&tier=T][&cost=C][&tokens=N]" (percent-encoded, '+' a
 * space).
 * Unknown and repeated parameters are errors. Returns 0, or -1 with
 * c->status, c->errstr and c->field set.
 */
int sl_http_check_from_query(sl_http_check *c, const char *query, size_t len);

/*
 * The check of forward-auth, /v1/auth/{policy} (any method): a policy check for
 * `policy` (from the path, already decoded: sl_http_path_decode) and `key`
 * (the key header's value; keylen 0 when the header is missing), with "cost",
 * "tokens" and "tier" from the query string (any other parameter is an error; the
 * server passes none for Envoy's /v1/auth/{policy}/{path}, whose query is
 * the client's).
 * key_field names the header in messages ("X-Api-Key"). Returns 0, or -1 with
 * c->status 401 for a missing key (field key_field), else 400.
 */
int sl_http_check_auth(sl_http_check *c, const char *policy, size_t policy_len,
                       const char *key, size_t keylen, const char *key_field,
                       const char *query, size_t qlen);

/*
 * Decodes a JSON body: an object with the same fields as the query string
 * (numbers as JSON integers; period an integer of seconds or a duration
 * string such as "500ms"), or {"limits": [ {key, limit, period, burst, cost,
 * algorithm}, ... ]} with 1 to 8 entries. Parses with cJSON (which allocates
 * and frees its tree within the call). Returns 0, or -1 with c->status,
 * c->errstr and c->field set ("limits[2].period" for a field of an entry).
 */
int sl_http_check_from_json(sl_http_check *c, const char *body, size_t len);

/* ------------------------------------------------------------------------ */
/* 5. Responses, read by a client                                           */
/* ------------------------------------------------------------------------ */

/*
 * The response parser has the request parser's calling convention and its
 * rules for field lines (a token name, no space before the colon, a value
 * of field bytes with its surrounding spaces and tabs dropped, CRLF or a
 * bare LF, no obsolete line folding). Unlike it, it keeps no state between
 * calls: a client reads responses of a few hundred bytes, mostly whole, and
 * a head that arrives in pieces is parsed again from its start, which the
 * head cap bounds. What it accepts, and the choices it makes:
 *
 *   status-line  "HTTP/1." ("0" | "1") SP 3DIGIT [SP reason] line-end: the
 *                status 100 to 999, the reason any field bytes (it may be
 *                empty, and so may the space before it, as some servers
 *                write "HTTP/1.1 200" alone); "HTTP/2.0" and the like are
 *                an error, with field "version".
 *   framing      (RFC 9112 section 6.3) a 1xx, 204 or 304 response has no
 *                body whatever its fields say; else Content-Length says how
 *                long the body is: digits only, at most INT64_MAX (a longer
 *                or signed number is an error, never wrapped), repeated
 *                fields all equal; without one, the body runs until the
 *                server closes the connection (body_until_close). Any
 *                Transfer-Encoding is refused: sluiced always sends a
 *                Content-Length, and a client that guessed at chunk sizes
 *                could be led to read one response's body as the next
 *                response (the mirror of request smuggling).
 *   keep-alive   as for requests: HTTP/1.1 unless Connection lists "close",
 *                HTTP/1.0 only when it lists "keep-alive" (and not "close").
 *   caps         the head (status line to the final empty line, inclusive)
 *                at most max_head bytes, and at most headers_cap fields:
 *                beyond either it is an error as soon as the byte that
 *                breaks the cap is in the buffer.
 *
 * A prefix of a valid head is always SL_HTTP_INCOMPLETE, and anything that
 * cannot become one is SL_HTTP_ERROR as soon as the byte that breaks it is
 * in the buffer. It never reads past `len`, never allocates, never writes to
 * the buffer.
 */

#define SL_HTTP_DEFAULT_MAX_RESPONSE_HEAD (64 * 1024)

typedef struct sl_http_response {
    /* In: set by sl_http_response_init(). */
    sl_http_header *headers; /* caller-owned */
    size_t headers_cap;

    /* Out, after a complete parse: slices into the caller's buffer. */
    int minor_version;       /* 0 or 1 */
    int status;              /* 100 .. 999 */
    sl_http_slice reason;    /* may be empty */
    size_t num_headers;
    bool has_content_length;
    uint64_t content_length; /* as sent; 0 when absent */
    uint64_t body_length;    /* the bytes of body after the head (0 for 1xx, 204,
                                304), unless body_until_close */
    bool body_until_close;   /* no Content-Length: the body is what comes until
                                the server closes the connection */
    bool keep_alive;

    /* Out, after SL_HTTP_ERROR. */
    const char *errstr;      /* static: lowercase, no final period */
    const char *field;       /* static: the part at fault ("status-line",
                                "content-length", ...), or NULL */
} sl_http_response;

/* Prepares *res for parsing into headers[0 .. headers_cap). Does not allocate. */
void sl_http_response_init(sl_http_response *res, sl_http_header *headers, size_t headers_cap);

/*
 * Parses one response head from the start of buf[0 .. len), of at most
 * max_head bytes (0: SL_HTTP_DEFAULT_MAX_RESPONSE_HEAD; at most
 * SL_HTTP_MAX_CAP). Returns the bytes of the head, final empty line
 * included (> 0): the body follows; SL_HTTP_INCOMPLETE; or SL_HTTP_ERROR
 * with res->errstr and res->field set. Each call starts afresh. After an
 * error the connection is out of step: close it.
 */
int sl_http_parse_response(const char *buf, size_t len, sl_http_response *res, size_t max_head);

/* The first header field of a parsed response called `name` (compared
 * without regard to ASCII case), or NULL. Points into res->headers. */
const sl_http_header *sl_http_response_header(const sl_http_response *res, const char *name);

#endif
