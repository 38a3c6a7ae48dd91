/*
 * proto/key_template.c: a key template's store key for one request
 * (policy/key_template.h says what each part means, proto/key_template.h how
 * a request is given).
 */
#include <stdio.h>
#include <string.h>

#include "common/hex.h"
#include "proto/key_template.h"

/* ---- rendering ---- */

/* Where a key is being written. Past the first piece that does not fit,
 * nothing more is written, but the parts are still looked up: a missing one
 * must be told. */
typedef struct sl_writer {
    char *out;
    size_t cap, n;
    bool full;
} sl_writer;

static void sl_put(sl_writer *w, const char *s, size_t len)
{
    if (w->full || len > w->cap - w->n) {
        w->full = true;
        return;
    }
    if (len)
        memcpy(w->out + w->n, s, len);
    w->n += len;
}

static bool sl_present(sl_http_slice s)
{
    return s.ptr != NULL && s.len > 0;
}

/* The first field called name (lowercase, NUL-terminated), without the
 * blanks around it; false when there is none or it is only blanks. */
static bool sl_header_value(const sl_key_request *r, const char *name, sl_http_slice *v)
{
    for (size_t i = 0; r->headers && i < r->nheaders; i++) {
        if (!sl_http_slice_ieq(r->headers[i].name, name))
            continue;
        const char *s = r->headers[i].value.ptr;
        size_t n = s ? r->headers[i].value.len : 0;
        while (n > 0 && (s[0] == ' ' || s[0] == '\t')) {
            s++;
            n--;
        }
        while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
            n--;
        *v = (sl_http_slice){s, n};
        return n > 0;
    }
    return false;
}

/* Whether every '%' of s[0 .. n) starts an escape, as sl_http_percent_decode
 * wants. */
static bool sl_escapes_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] == '%') {
            if (n - i < 3 || sl_hex_digit((unsigned char)s[i + 1]) < 0 ||
                sl_hex_digit((unsigned char)s[i + 2]) < 0)
                return false;
            i += 2;
        }
    return true;
}

/* {query.NAME}: the first parameter whose decoded name is NAME. Returns
 * false when it is missing. */
static bool sl_put_query(sl_writer *w, const sl_key_request *r, const char *name, size_t len)
{
    if (!sl_present(r->query))
        return false;
    size_t pos = 0;
    sl_http_slice k, v;
    char dec[SL_KEY_TEMPLATE_MAX];
    while (sl_http_query_next(r->query.ptr, r->query.len, &pos, &k, &v)) {
        /* A name that does not decode, or is longer than any template's, is
         * not NAME. */
        long kl = sl_http_percent_decode(k.ptr, k.len, dec, sizeof dec);
        if (kl < 0 || (size_t)kl != len || memcmp(dec, name, len) != 0)
            continue;
        if (v.len == 0 || !sl_escapes_ok(v.ptr, v.len))
            return false;
        if (!w->full) {
            long vl = sl_http_percent_decode(v.ptr, v.len, w->out + w->n, w->cap - w->n);
            if (vl < 0)
                w->full = true;
            else
                w->n += (size_t)vl;
        }
        return true;
    }
    return false;
}

/* {path/N}: the first N non-empty segments, each after one '/'. */
static void sl_put_segments(sl_writer *w, sl_http_slice path, unsigned segments)
{
    size_t i = 0;
    unsigned done = 0;
    while (i < path.len && done < segments) {
        while (i < path.len && path.ptr[i] == '/')
            i++;
        size_t start = i;
        while (i < path.len && path.ptr[i] != '/')
            i++;
        if (i > start) {
            sl_put(w, "/", 1);
            sl_put(w, path.ptr + start, i - start);
            done++;
        }
    }
    if (done == 0)
        sl_put(w, "/", 1);
}

/* Clears the bits of ip past the first `bits` (of 128). */
static void sl_mask(sl_ip *ip, unsigned bits)
{
    for (unsigned b = 0; b < 16; b++) {
        if (bits >= 8u * (b + 1))
            continue;
        unsigned keep = bits > 8u * b ? bits - 8u * b : 0;
        ip->b[b] &= (uint8_t)(0xffu << (8u - keep));
    }
}

/* {ip...}: the client's address, masked, with "/N" unless it is whole. */
static void sl_put_ip(sl_writer *w, const sl_ip *client, const sl_key_part *k)
{
    sl_ip a = *client;
    bool v4 = sl_ip_is_v4(&a);
    unsigned bits = v4 ? k->v4_bits : k->v6_bits, whole = v4 ? 32u : 128u;
    sl_mask(&a, v4 ? 96u + bits : bits);
    char text[SL_IP_TEXT_MAX + 8];
    sl_ip_format(&a, text);
    size_t len = strlen(text);
    if (bits != whole)
        len += (size_t)snprintf(text + len, sizeof text - len, "/%u", bits);
    sl_put(w, text, len);
}

long sl_key_template_render(const sl_key_template *t, const sl_key_request *r, char *out,
                            size_t cap, const char **missing)
{
    sl_writer w = {.out = out, .cap = cap < SL_KEY_RENDER_MAX ? cap : SL_KEY_RENDER_MAX};
    for (size_t i = 0; i < t->nparts; i++) {
        const sl_key_part *k = &t->parts[i];
        const char *name = t->text + k->off;
        sl_http_slice v = {NULL, 0}; /* the bytes to write, for a part that is a slice */
        bool ok;                      /* whether the part is present */
        switch (k->kind) {
        case SL_KEY_PART_TEXT: sl_put(&w, name, k->len); continue;
        case SL_KEY_PART_KEY: ok = sl_present(v = r->key); break;
        case SL_KEY_PART_POLICY: ok = sl_present(v = r->policy); break;
        case SL_KEY_PART_METHOD: ok = sl_present(v = r->method); break;
        case SL_KEY_PART_HEADER: ok = sl_header_value(r, name + 7, &v); break;
        case SL_KEY_PART_QUERY: ok = sl_put_query(&w, r, name + 6, k->len); break;
        case SL_KEY_PART_PATH:
            ok = sl_present(r->path);
            if (ok && k->segments)
                sl_put_segments(&w, r->path, k->segments);
            else
                v = r->path;
            break;
        default: /* SL_KEY_PART_IP */
            ok = r->client != NULL;
            if (ok)
                sl_put_ip(&w, r->client, k);
            break;
        }
        if (!ok) {
            if (missing)
                *missing = name;
            return 0;
        }
        if (v.len)
            sl_put(&w, v.ptr, v.len);
    }
    return w.full ? -1 : (long)w.n;
}

