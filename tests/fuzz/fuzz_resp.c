/*
 * fuzz_resp.c: libFuzzer target for src/proto/resp.c.
 *
 * The first input byte picks what to fuzz, the rest is the material:
 *   byte % 4 == 0  the request parser on raw bytes (a pipeline), with the
 *                  defaults or, when bit 7 is set, tiny caps; bit 6 makes the
 *                  resumed parse see its buffer shrink now and then
 *   byte % 4 == 1  the reply parser on raw bytes, then re-encodes what it read
 *   byte % 4 == 2  argv built from the bytes, encoded as a multibulk request
 *                  and as a fully quoted inline line, parsed back, compared
 *   byte % 4 == 3  a reply tree built from the bytes, encoded (RESP2 or 3),
 *                  parsed back and compared node by node
 * Besides the sanitizers' checks, CHECK() aborts when a guarantee of resp.h
 * breaks: bytes taken within the buffer, slices inside it, prefixes of a
 * valid frame INCOMPLETE, a resumed parse equal to a fresh one, round trips
 * exact.
 *
 * Build and run: make fuzz (FUZZ_SECONDS=N to change the time per target).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proto/resp.h"

#define ARGV_CAP 4096

static sl_resp_slice argv_a[ARGV_CAP], argv_b[ARGV_CAP];

static void check_error_text(const char *e)
{
    CHECK(e && *e);
    CHECK(!strchr(e, '\r') && !strchr(e, '\n'));
    CHECK(!strncmp(e, "Protocol error: ", 16));
}

/* Mode 0: the request parser. */
static void fuzz_requests(const uint8_t *in, size_t n, int tiny, int shrink)
{
    sl_resp_limits small = {.max_args = 4, .max_bulk_len = 16, .max_inline_len = 32,
                            .max_request_len = 64};
    const sl_resp_limits *lim = tiny ? &small : NULL;

    /* The first command three ways: fresh on all the bytes, and resumed as
     * the bytes arrive one at a time; plus fresh on a prefix. */
    char *whole = copy_of(in, n);
    sl_resp_request a;
    sl_resp_request_init(&a, argv_a, ARGV_CAP);
    int ra = sl_resp_parse(whole, n, &a, lim);
    CHECK(ra == SL_RESP_ERROR || ra == SL_RESP_INCOMPLETE || (ra > 0 && (size_t)ra <= n));

    char *grow = copy_of(in, n);
    sl_resp_request b;
    sl_resp_request_init(&b, argv_b, ARGV_CAP);
    int rb = SL_RESP_INCOMPLETE;
    size_t k = 0;
    for (; k <= n; k++) {
        rb = sl_resp_parse(grow, k, &b, lim);
        if (rb != SL_RESP_INCOMPLETE)
            break;
        /* A caller that shrinks the buffer now and then (against the rules)
         * restarts the command: still INCOMPLETE, still no read past len. */
        if (shrink && k % 3 == 1)
            CHECK(sl_resp_parse(grow, k / 2, &b, lim) == SL_RESP_INCOMPLETE);
    }
    /* Both stop at the same place with the same answer: a valid frame of ra
     * bytes is INCOMPLETE for every shorter length. */
    CHECK(rb == ra);
    if (ra > 0) {
        CHECK(k == (size_t)ra);
        CHECK(a.argc == b.argc && a.is_inline == b.is_inline);
        for (size_t i = 0; i < a.argc; i++) {
            CHECK(a.argv[i].ptr >= whole && a.argv[i].ptr + a.argv[i].len <= whole + ra);
            CHECK(b.argv[i].ptr >= grow && b.argv[i].ptr + b.argv[i].len <= grow + ra);
            CHECK(a.argv[i].len == b.argv[i].len);
            CHECK(!memcmp(a.argv[i].ptr, b.argv[i].ptr, a.argv[i].len));
        }
        /* And a fresh look at one byte less agrees. */
        char *prefix = copy_of(in, (size_t)ra - 1);
        sl_resp_request c;
        sl_resp_request_init(&c, argv_b, ARGV_CAP);
        CHECK(sl_resp_parse(prefix, (size_t)ra - 1, &c, lim) == SL_RESP_INCOMPLETE);
        free(prefix);
    } else if (ra == SL_RESP_ERROR) {
        check_error_text(a.errstr);
        check_error_text(b.errstr);
        CHECK(!strcmp(a.errstr, b.errstr));
        /* A refused input is left as it came. */
        CHECK(!memcmp(whole, in, n));
    }
    free(grow);

    /* Then the rest of the pipeline, as a server would consume it. */
    size_t off = ra > 0 ? (size_t)ra : n;
    while (off < n) {
        int r = sl_resp_parse(whole + off, n - off, &a, lim);
        if (r <= 0)
            break;
        CHECK((size_t)r <= n - off);
        for (size_t i = 0; i < a.argc; i++)
            CHECK(a.argv[i].ptr >= whole + off && a.argv[i].ptr + a.argv[i].len <= whole + off + r);
        off += (size_t)r;
    }
    free(whole);
}

/* Encodes a parsed reply tree back into RESP3; returns the index after the
 * subtree at nodes[i]. */
static size_t encode_tree(sl_buf *b, const sl_resp_value *nodes, size_t count, size_t i)
{
    CHECK(i < count);
    const sl_resp_value *v = &nodes[i];
    char pre[2] = {(char)v->type, 0};
    switch (v->type) {
    case SL_RESP_STATUS: case SL_RESP_ERR: case SL_RESP_BIGNUM: case SL_RESP_DOUBLE:
        sl_buf_add(b, pre, 1);
        sl_buf_add(b, v->str, v->len);
        sl_buf_add(b, "\r\n", 2);
        return i + 1;
    case SL_RESP_BULK: case SL_RESP_VERBATIM: case SL_RESP_BLOBERR: {
        char hdr[32];
        int h = snprintf(hdr, sizeof hdr, "%c%zu\r\n", (char)v->type, v->len);
        sl_buf_add(b, hdr, (size_t)h);
        sl_buf_add(b, v->str, v->len);
        sl_buf_add(b, "\r\n", 2);
        return i + 1;
    }
    case SL_RESP_INT: sl_resp_add_int(b, v->integer); return i + 1;
    case SL_RESP_NIL: sl_resp_add_null(b); return i + 1;
    case SL_RESP_BOOL: sl_resp_add_bool(b, (int)v->integer); return i + 1;
    case SL_RESP_ARRAY: case SL_RESP_SET: case SL_RESP_MAP: {
        char hdr[32];
        int h = snprintf(hdr, sizeof hdr, "%c%zu\r\n", (char)v->type, v->count);
        sl_buf_add(b, hdr, (size_t)h);
        size_t children = v->type == SL_RESP_MAP ? v->count * 2 : v->count;
        size_t j = i + 1;
        for (size_t c = 0; c < children; c++)
            j = encode_tree(b, nodes, count, j);
        return j;
    }
    }
    CHECK(0);
    return 0;
}

static sl_resp_value nodes_a[512], nodes_b[512];

static void same_nodes(const sl_resp_value *x, const sl_resp_value *y, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        CHECK(x[i].type == y[i].type);
        CHECK(x[i].len == y[i].len);
        if (x[i].len)
            CHECK(!memcmp(x[i].str, y[i].str, x[i].len));
        CHECK(x[i].integer == y[i].integer);
        CHECK(x[i].count == y[i].count);
        CHECK((isnan(x[i].dbl) && isnan(y[i].dbl)) || x[i].dbl == y[i].dbl);
    }
}

/* Mode 1: the reply parser on raw bytes. */
static void fuzz_replies(const uint8_t *in, size_t n, int tiny)
{
    sl_resp_reply_limits small = {.max_depth = 3, .max_bulk_len = 16, .max_line_len = 16};
    const sl_resp_reply_limits *lim = tiny ? &small : NULL;
    char *buf = copy_of(in, n);
    sl_resp_reply rep = {.nodes = nodes_a, .nodes_cap = tiny ? 8 : 512};
    int r = sl_resp_parse_reply(buf, n, &rep, lim);
    CHECK(r == SL_RESP_ERROR || r == SL_RESP_INCOMPLETE || (r > 0 && (size_t)r <= n));
    if (r == SL_RESP_ERROR)
        check_error_text(rep.errstr);
    if (r > 0) {
        CHECK(rep.count >= 1 && rep.count <= rep.nodes_cap);
        for (size_t i = 0; i < rep.count; i++)
            if (nodes_a[i].len)
                CHECK(nodes_a[i].str >= buf && nodes_a[i].str + nodes_a[i].len <= buf + r);
        /* One byte less is a prefix. */
        sl_resp_reply pre = {.nodes = nodes_b, .nodes_cap = rep.nodes_cap};
        CHECK(sl_resp_parse_reply(buf, (size_t)r - 1, &pre, lim) == SL_RESP_INCOMPLETE);

        /* The tree is well formed (its pre-order walk uses every node) and
         * re-encodes into bytes that parse to the same tree, except for the
         * RESP2 nulls, which come back as RESP3's. */
        sl_buf out;
        sl_buf_init(&out, 3, 0);
        CHECK(encode_tree(&out, nodes_a, rep.count, 0) == rep.count);
        CHECK(!out.failed);
        sl_resp_reply again = {.nodes = nodes_b, .nodes_cap = rep.nodes_cap};
        int r2 = sl_resp_parse_reply(out.data, out.len, &again, lim);
        CHECK(r2 == (int)out.len);
        CHECK(again.count == rep.count);
        same_nodes(nodes_a, nodes_b, rep.count);
        sl_buf_free(&out);
    }
    free(buf);
}

/* A cursor over the fuzz input, handing out bytes (zeros once it is used up). */
typedef struct cursor {
    const uint8_t *p;
    size_t n;
} cursor;

static uint8_t next_byte(cursor *c)
{
    if (!c->n)
        return 0;
    c->n--;
    return *c->p++;
}

/* Mode 2: argv -> multibulk and inline -> request parser. */
static void fuzz_command_roundtrip(const uint8_t *in, size_t n)
{
    cursor c = {in, n};
    size_t argc = 1 + next_byte(&c) % 32;
    sl_resp_slice argv[32];
    for (size_t i = 0; i < argc; i++) {
        size_t len = next_byte(&c) % 64;
        if (len > c.n)
            len = c.n;
        argv[i].ptr = (const char *)c.p;
        argv[i].len = len;
        c.p += len;
        c.n -= len;
    }

    sl_buf b;
    sl_buf_init(&b, 2, 0);
    CHECK(sl_resp_add_command(&b, argv, argc) == 0);
    sl_resp_request req;
    sl_resp_request_init(&req, argv_a, ARGV_CAP);
    char *mb = copy_of((const uint8_t *)b.data, b.len);
    CHECK(sl_resp_parse(mb, b.len, &req, NULL) == (int)b.len);
    CHECK(req.argc == argc && !req.is_inline);
    for (size_t i = 0; i < argc; i++)
        CHECK(req.argv[i].len == argv[i].len && !memcmp(req.argv[i].ptr, argv[i].ptr, argv[i].len));
    free(mb);

    /* The same words as an inline line: every byte as \xHH in double quotes,
     * or, for plain printable bytes, as themselves in single quotes. */
    sl_buf_clear(&b);
    for (size_t i = 0; i < argc; i++) {
        int hex = i % 2 == 0;
        sl_buf_add(&b, i ? " " : "", i ? 1 : 0);
        sl_buf_add(&b, hex ? "\"" : "'", 1);
        for (size_t j = 0; j < argv[i].len; j++) {
            unsigned char ch = (unsigned char)argv[i].ptr[j];
            char tmp[8];
            int tl;
            if (hex)
                tl = snprintf(tmp, sizeof tmp, "\\x%02x", ch);
            else if (ch == '\'')
                tl = snprintf(tmp, sizeof tmp, "\\'");
            else if (ch == '\n' || (ch == '\\' && j + 1 == argv[i].len))
                tl = -1; /* a LF, or a backslash before the closing quote */
            else
                tl = snprintf(tmp, sizeof tmp, "%c", ch);
            if (tl < 0) { /* this word cannot be written in single quotes: skip the mode */
                sl_buf_free(&b);
                return;
            }
            sl_buf_add(&b, tmp, (size_t)tl);
        }
        sl_buf_add(&b, hex ? "\"" : "'", 1);
    }
    sl_buf_add(&b, "\r\n", 2);
    CHECK(!b.failed);
    char *line = copy_of((const uint8_t *)b.data, b.len);
    sl_resp_request_init(&req, argv_a, ARGV_CAP);
    CHECK(sl_resp_parse(line, b.len, &req, NULL) == (int)b.len);
    CHECK(req.argc == argc && req.is_inline);
    for (size_t i = 0; i < argc; i++)
        CHECK(req.argv[i].len == argv[i].len && !memcmp(req.argv[i].ptr, argv[i].ptr, argv[i].len));
    free(line);
    sl_buf_free(&b);
}

/* Mode 3: a reply tree -> encoder -> reply parser. `want` collects the nodes
 * the parser must produce. */
typedef struct tree_gen {
    cursor c;
    sl_buf *b;
    sl_resp_value want[512];
    size_t n;
} tree_gen;

static void gen_node(tree_gen *g, int depth)
{
    if (g->n == 512)
        return;
    sl_resp_value *w = &g->want[g->n++];
    memset(w, 0, sizeof *w);
    int v3 = g->b->proto == 3;
    uint8_t op = next_byte(&g->c);
    switch (op % 10) {
    case 0: {
        int64_t x = 0;
        for (int i = 0; i < 8; i++)
            x = (int64_t)((uint64_t)x << 8 | next_byte(&g->c));
        sl_resp_add_int(g->b, x);
        w->type = SL_RESP_INT;
        w->integer = x;
        break;
    }
    case 1: case 2: case 6: {
        size_t len = next_byte(&g->c) % 48;
        if (len > g->c.n)
            len = g->c.n;
        const char *s = (const char *)g->c.p;
        g->c.p += len;
        g->c.n -= len;
        if (op % 10 == 1) {
            sl_resp_add_bulk(g->b, s, len);
            w->type = SL_RESP_BULK;
        } else if (op % 10 == 6) {
            sl_resp_add_verbatim(g->b, "txt", s, len);
            /* RESP3: the parser hands back the "txt:" prefix too. */
            w->type = v3 ? SL_RESP_VERBATIM : SL_RESP_BULK;
        } else {
            /* CR and LF are written as spaces; the parser reads the line. */
            sl_resp_add_simple(g->b, s, len);
            w->type = SL_RESP_STATUS;
        }
        w->str = s;
        w->len = len;
        break;
    }
    case 3:
        sl_resp_add_null(g->b);
        w->type = SL_RESP_NIL;
        break;
    case 4:
        sl_resp_add_bool(g->b, op & 16);
        w->type = v3 ? SL_RESP_BOOL : SL_RESP_INT;
        w->integer = (op & 16) != 0;
        break;
    case 5: {
        uint64_t bits = 0;
        for (int i = 0; i < 8; i++)
            bits = bits << 8 | next_byte(&g->c);
        double d;
        memcpy(&d, &bits, sizeof d);
        sl_resp_add_double(g->b, d);
        w->type = v3 ? SL_RESP_DOUBLE : SL_RESP_BULK;
        w->dbl = d; /* checked below by value, not by text */
        break;
    }
    default: {
        size_t count = depth >= 6 ? 0 : next_byte(&g->c) % 5;
        int map = op % 10 == 9;
        if (map)
            sl_resp_add_map(g->b, count);
        else
            sl_resp_add_array(g->b, count);
        w->type = map && v3 ? SL_RESP_MAP : SL_RESP_ARRAY;
        w->count = map && !v3 ? count * 2 : count;
        for (size_t i = 0; i < (map ? 2 * count : count); i++)
            gen_node(g, depth + 1);
        break;
    }
    }
}

static void fuzz_reply_roundtrip(const uint8_t *in, size_t n, int proto)
{
    static tree_gen g;
    sl_buf b;
    sl_buf_init(&b, proto, 0);
    memset(&g, 0, sizeof g);
    g.c = (cursor){in, n};
    g.b = &b;
    gen_node(&g, 0);
    if (g.n == 512) { /* cut short: the encoded tree is incomplete */
        sl_buf_free(&b);
        return;
    }
    CHECK(!b.failed);
    char *enc = copy_of((const uint8_t *)b.data, b.len);
    sl_resp_reply rep = {.nodes = nodes_a, .nodes_cap = 512};
    int r = sl_resp_parse_reply(enc, b.len, &rep, NULL);
    CHECK(r == (int)b.len);
    CHECK(rep.count == g.n);
    for (size_t i = 0; i < g.n; i++) {
        const sl_resp_value *got = &nodes_a[i], *want = &g.want[i];
        CHECK(got->type == want->type);
        switch (want->type) {
        case SL_RESP_INT: case SL_RESP_BOOL:
            CHECK(got->integer == want->integer);
            break;
        case SL_RESP_BULK:
            if (want->str) {
                CHECK(got->len == want->len && !memcmp(got->str, want->str, want->len));
            } else { /* a RESP2 double: its text reads back as the same value */
                char tmp[64];
                CHECK(got->len < sizeof tmp);
                memcpy(tmp, got->str, got->len);
                tmp[got->len] = 0;
                double d = strtod(tmp, NULL);
                CHECK((isnan(d) && isnan(want->dbl)) || d == want->dbl);
            }
            break;
        case SL_RESP_VERBATIM:
            CHECK(got->len == want->len + 4 && !memcmp(got->str, "txt:", 4));
            CHECK(!memcmp(got->str + 4, want->str, want->len));
            break;
        case SL_RESP_STATUS:
            CHECK(got->len == want->len);
            for (size_t j = 0; j < want->len; j++) {
                char ch = want->str[j] == '\r' || want->str[j] == '\n' ? ' ' : want->str[j];
                CHECK(got->str[j] == ch);
            }
            break;
        case SL_RESP_DOUBLE:
            CHECK((isnan(got->dbl) && isnan(want->dbl)) || got->dbl == want->dbl);
            break;
        case SL_RESP_ARRAY: case SL_RESP_MAP:
            CHECK(got->count == want->count);
            break;
        default:
            break;
        }
    }
    free(enc);
    sl_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    uint8_t mode = data[0];
    switch (mode % 4) {
    case 0: fuzz_requests(data + 1, size - 1, mode & 0x80, mode & 0x40); break;
    case 1: fuzz_replies(data + 1, size - 1, mode & 0x80); break;
    case 2: fuzz_command_roundtrip(data + 1, size - 1); break;
    case 3: fuzz_reply_roundtrip(data + 1, size - 1, mode & 0x80 ? 3 : 2); break;
    }
    return 0;
}
