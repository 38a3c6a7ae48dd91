/*
 * rls.c: Envoy's RateLimitRequest/RateLimitResponse and gRPC's health check
 * messages, between the wire and the plain structs of rls.h.
 *
 * Decoding is two passes. The first walks the wire format itself (tags,
 * varints, length-delimited fields), only as deep as the strings and lists
 * that the bounds name, and refuses what is over a bound before anything is
 * allocated; the second is protoc-c's generated unpack, which builds the
 * message and checks what the walk skipped (the override, the wrappers).
 * Encoding fills the generated structs and packs them.
 */
#include "proto/rls.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "envoy/service/ratelimit/v3/rls.pb-c.h"
#include "grpc/health/v1/health.pb-c.h"

typedef Envoy__Service__Ratelimit__V3__RateLimitRequest pb_request;
typedef Envoy__Service__Ratelimit__V3__RateLimitResponse pb_response;
typedef Envoy__Service__Ratelimit__V3__RateLimitResponse__DescriptorStatus pb_status;
typedef Envoy__Service__Ratelimit__V3__RateLimitResponse__RateLimit pb_limit;
typedef Envoy__Extensions__Common__Ratelimit__V3__RateLimitDescriptor pb_descriptor;
typedef Envoy__Config__Core__V3__HeaderValue pb_header;
typedef Google__Protobuf__Duration pb_duration;

const sl_rls_bounds sl_rls_default_bounds = {
    .max_message = SL_RLS_MAX_MESSAGE,
    .max_descriptors = SL_RLS_MAX_DESCRIPTORS,
    .max_entries = SL_RLS_MAX_ENTRIES,
    .max_domain = SL_RLS_MAX_DOMAIN,
    .max_key = SL_RLS_MAX_KEY,
    .max_value = SL_RLS_MAX_VALUE,
};

/* protobuf-c's allocations, through common/alloc.h and its failure hook.
 * allocator_data, when set, is a bool set to true by a failed allocation:
 * an unpack that fails tells out of memory from bad bytes by it. */
static void *pb_alloc(void *data, size_t n)
{
    void *p = sl_malloc(n);
    if (!p && data)
        *(bool *)data = true;
    return p;
}

static void pb_free(void *data, void *p)
{
    (void)data;
    sl_free(p);
}

static ProtobufCAllocator pb_allocator = {.alloc = pb_alloc, .free = pb_free, .allocator_data = NULL};

static int fail(int rc, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Writes the message into err (when there is room) and returns rc. */
static int fail(int rc, char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* ---- the walk over the wire format ---- */

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* Bytes not yet read, p[0 .. end). */
typedef struct wire {
    const uint8_t *p;
    const uint8_t *end;
} wire;

/* Reads a varint of at most 10 bytes (64 bits). Returns 0, or -1 when it is
 * cut short or longer than 64 bits. */
static int read_varint(wire *w, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned i = 0; i < 10; i++) {
        if (w->p == w->end)
            return -1;
        uint8_t b = *w->p++;
        if (i == 9 && b > 1)
            return -1; /* a 10th byte holds bit 63 only */
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* Reads one field's tag and value: its number, its wire type and, for a
 * length-delimited one, its bytes in *body. Returns 0, or -1 when the bytes
 * are no field (a bad tag, a cut value, a group or an unknown wire type:
 * proto3 has no groups). */
static int read_field(wire *w, uint32_t *num, unsigned *type, wire *body)
{
    uint64_t tag, v;
    if (read_varint(w, &tag) != 0)
        return -1;
    uint64_t n = tag >> 3;
    if (n == 0 || n > 536870911u) /* 2^29 - 1, the largest field number */
        return -1;
    *num = (uint32_t)n;
    *type = (unsigned)(tag & 7);
    switch (*type) {
    case WT_VARINT:
        return read_varint(w, &v);
    case WT_I64:
    case WT_I32: {
        size_t k = *type == WT_I64 ? 8 : 4;
        if ((size_t)(w->end - w->p) < k)
            return -1;
        w->p += k;
        return 0;
    }
    case WT_LEN:
        if (read_varint(w, &v) != 0 || v > (uint64_t)(w->end - w->p))
            return -1;
        body->p = w->p;
        body->end = w->p + v;
        w->p += v;
        return 0;
    default:
        return -1;
    }
}

/* A string field's bytes: at most max bytes, no NUL. what names the field
 * in the error. */
static int check_string(const wire *s, size_t max, const char *what, char *err, size_t errlen)
{
    size_t n = (size_t)(s->end - s->p);
    if (n > max)
        return fail(SL_RLS_EBOUND, err, errlen, "%s: %zu bytes, over the bound of %zu", what, n,
                    max);
    if (n && memchr(s->p, '\0', n))
        return fail(SL_RLS_EBOUND, err, errlen, "%s: holds a NUL byte", what);
    return SL_RLS_OK;
}

#define MALFORMED(err, errlen, what) \
    fail(SL_RLS_EMALFORMED, err, errlen, "%s: not a RateLimitRequest on the wire", what)

/* descriptors[d].entries[e]: key (1) and value (2). */
static int walk_entry(wire w, const sl_rls_bounds *b, size_t d, size_t e, char *err,
                      size_t errlen)
{
    char what[80];
    while (w.p < w.end) {
        uint32_t num;
        unsigned type;
        wire body;
        if (read_field(&w, &num, &type, &body) != 0) {
            snprintf(what, sizeof what, "descriptors[%zu].entries[%zu]", d, e);
            return MALFORMED(err, errlen, what);
        }
        if (num != 1 && num != 2)
            continue;
        /* The field's name is written only for an error: this runs for
         * every entry of every request. */
        int rc = type != WT_LEN ? SL_RLS_EMALFORMED
                                : check_string(&body, num == 1 ? b->max_key : b->max_value,
                                               "", NULL, 0);
        if (rc != SL_RLS_OK) {
            snprintf(what, sizeof what, "descriptors[%zu].entries[%zu].%s", d, e,
                     num == 1 ? "key" : "value");
            if (type != WT_LEN)
                return MALFORMED(err, errlen, what);
            return check_string(&body, num == 1 ? b->max_key : b->max_value, what, err, errlen);
        }
    }
    return SL_RLS_OK;
}

/* descriptors[d]: its entries (1); the override and the wrapper are left to
 * the unpack. */
static int walk_descriptor(wire w, const sl_rls_bounds *b, size_t d, char *err, size_t errlen)
{
    size_t entries = 0;
    char what[64];
    while (w.p < w.end) {
        uint32_t num;
        unsigned type;
        wire body;
        if (read_field(&w, &num, &type, &body) != 0) {
            snprintf(what, sizeof what, "descriptors[%zu]", d);
            return MALFORMED(err, errlen, what);
        }
        if (num != 1)
            continue;
        if (type != WT_LEN) {
            snprintf(what, sizeof what, "descriptors[%zu].entries", d);
            return MALFORMED(err, errlen, what);
        }
        if (entries == b->max_entries)
            return fail(SL_RLS_EBOUND, err, errlen,
                        "descriptors[%zu].entries: more than the bound of %zu", d,
                        b->max_entries);
        int rc = walk_entry(body, b, d, entries, err, errlen);
        if (rc != SL_RLS_OK)
            return rc;
        entries++;
    }
    return SL_RLS_OK;
}

/* The request: domain (1), descriptors (2), hits_addend (3). */
static int walk_request(wire w, const sl_rls_bounds *b, char *err, size_t errlen)
{
    size_t descriptors = 0;
    while (w.p < w.end) {
        uint32_t num;
        unsigned type;
        wire body;
        if (read_field(&w, &num, &type, &body) != 0)
            return MALFORMED(err, errlen, "request");
        if (num == 1) {
            if (type != WT_LEN)
                return MALFORMED(err, errlen, "domain");
            int rc = check_string(&body, b->max_domain, "domain", err, errlen);
            if (rc != SL_RLS_OK)
                return rc;
        } else if (num == 2) {
            if (type != WT_LEN)
                return MALFORMED(err, errlen, "descriptors");
            if (descriptors == b->max_descriptors)
                return fail(SL_RLS_EBOUND, err, errlen,
                            "descriptors: more than the bound of %zu", b->max_descriptors);
            int rc = walk_descriptor(body, b, descriptors, err, errlen);
            if (rc != SL_RLS_OK)
                return rc;
            descriptors++;
        } else if (num == 3 && type != WT_VARINT) {
            return MALFORMED(err, errlen, "hits_addend");
        }
    }
    return SL_RLS_OK;
}

/* ---- the request ---- */

/* What a decoded request owns. */
typedef struct owner {
    pb_request *msg;
    sl_rls_descriptor *descriptors;
    sl_rls_entry *entries;
} owner;

static void owner_free(owner *o)
{
    if (!o)
        return;
    if (o->msg)
        envoy__service__ratelimit__v3__rate_limit_request__free_unpacked(o->msg, &pb_allocator);
    sl_free(o->descriptors);
    sl_free(o->entries);
    sl_free(o);
}

static sl_rls_str str_of(const char *s)
{
    return (sl_rls_str){.p = s ? s : "", .n = s ? strlen(s) : 0};
}

int sl_rls_request_decode(sl_rls_request *out, const uint8_t *buf, size_t len,
                          const sl_rls_bounds *bounds, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const sl_rls_bounds *b = bounds ? bounds : &sl_rls_default_bounds;
    if (err && errlen)
        err[0] = '\0';
    if (len > b->max_message)
        return fail(SL_RLS_EBOUND, err, errlen, "request: %zu bytes, over the bound of %zu", len,
                    b->max_message);
    wire w = {.p = buf, .end = buf + len};
    int rc = walk_request(w, b, err, errlen);
    if (rc != SL_RLS_OK)
        return rc;

    owner *o = sl_calloc(1, sizeof *o);
    if (!o)
        return fail(SL_RLS_ENOMEM, err, errlen, "out of memory");
    bool oom = false;
    ProtobufCAllocator a = {.alloc = pb_alloc, .free = pb_free, .allocator_data = &oom};
    o->msg = envoy__service__ratelimit__v3__rate_limit_request__unpack(&a, len, buf);
    if (!o->msg) {
        /* The walk passed the parts it reads: a broken part is one it
         * skips (the override, the wrapper), unless memory ran out. */
        owner_free(o);
        if (oom)
            return fail(SL_RLS_ENOMEM, err, errlen, "out of memory");
        return fail(SL_RLS_EMALFORMED, err, errlen,
                    "request: not a RateLimitRequest on the wire (a limit override or a "
                    "hits_addend is broken)");
    }
    pb_request *m = o->msg;
    size_t total = 0;
    for (size_t i = 0; i < m->n_descriptors; i++)
        total += m->descriptors[i]->n_entries; /* bounded by the walk: no overflow */
    o->descriptors = sl_calloc(m->n_descriptors ? m->n_descriptors : 1, sizeof *o->descriptors);
    o->entries = sl_calloc(total ? total : 1, sizeof *o->entries);
    if (!o->descriptors || !o->entries) {
        owner_free(o);
        return fail(SL_RLS_ENOMEM, err, errlen, "out of memory");
    }
    size_t e = 0;
    for (size_t i = 0; i < m->n_descriptors; i++) {
        const pb_descriptor *pd = m->descriptors[i];
        sl_rls_descriptor *d = &o->descriptors[i];
        d->entries = &o->entries[e];
        d->n_entries = pd->n_entries;
        for (size_t j = 0; j < pd->n_entries; j++, e++) {
            o->entries[e].key = str_of(pd->entries[j]->key);
            o->entries[e].value = str_of(pd->entries[j]->value);
        }
        if (pd->limit) {
            int unit = (int)pd->limit->unit;
            if (unit < SL_RLS_UNIT_UNKNOWN || unit > SL_RLS_UNIT_WEEK) {
                owner_free(o);
                return fail(SL_RLS_EMALFORMED, err, errlen,
                            "descriptors[%zu].limit.unit: %d is no RateLimitUnit", i, unit);
            }
            d->has_limit = true;
            d->limit_requests_per_unit = pd->limit->requests_per_unit;
            d->limit_unit = (sl_rls_unit)unit;
        }
        if (pd->hits_addend) {
            d->has_hits_addend = true;
            d->hits_addend = pd->hits_addend->value;
        }
    }
    out->domain = str_of(m->domain);
    out->descriptors = o->descriptors;
    out->n_descriptors = m->n_descriptors;
    out->hits_addend = m->hits_addend;
    out->owner_ = o;
    return SL_RLS_OK;
}

void sl_rls_request_free(sl_rls_request *r)
{
    if (!r)
        return;
    owner_free(r->owner_);
    memset(r, 0, sizeof *r);
}

/* ---- the response ---- */

/* A buffer of headroom + the packed message m, or NULL. */
static uint8_t *pack_with_headroom(const ProtobufCMessage *m, size_t headroom, size_t *len)
{
    size_t n = protobuf_c_message_get_packed_size(m), total;
    if (__builtin_add_overflow(n, headroom, &total))
        return NULL;
    uint8_t *buf = sl_malloc(total ? total : 1);
    if (!buf)
        return NULL;
    size_t packed = protobuf_c_message_pack(m, buf + headroom);
    if (packed != n) {
        sl_free(buf);
        return NULL;
    }
    *len = total;
    return buf;
}

static char *nonnull(const char *s)
{
    return s ? (char *)s : (char *)protobuf_c_empty_string;
}

/* headers[0 .. n) as HeaderValues in structs and pointers (pointers[i] =
 * &structs[i]). */
static void fill_headers(const sl_rls_header *h, size_t n, pb_header *structs,
                         pb_header **pointers)
{
    for (size_t i = 0; i < n; i++) {
        pb_header x = ENVOY__CONFIG__CORE__V3__HEADER_VALUE__INIT;
        x.key = nonnull(h[i].key);
        x.value = nonnull(h[i].value);
        structs[i] = x;
        pointers[i] = &structs[i];
    }
}

uint8_t *sl_rls_response_encode(const sl_rls_response *r, size_t headroom, size_t *len)
{
    size_t ns = r->n_statuses, nh = r->n_response_headers + r->n_request_headers;
    if (nh < r->n_response_headers)
        return NULL;
    /* The parts, in one allocation: the structs (8-byte aligned each), then
     * the arrays of pointers to them. */
    size_t per_status = sizeof(pb_status) + sizeof(pb_limit) + sizeof(pb_duration) +
                        sizeof(pb_status *),
           per_header = sizeof(pb_header) + sizeof(pb_header *), bytes;
    if (ns > SIZE_MAX / per_status || nh > SIZE_MAX / per_header ||
        __builtin_add_overflow(ns * per_status, nh * per_header, &bytes))
        return NULL;
    char *room = sl_malloc(bytes ? bytes : 1);
    if (!room)
        return NULL;
    pb_status *st = (pb_status *)room;
    pb_limit *lim = (pb_limit *)(st + ns);
    pb_duration *dur = (pb_duration *)(lim + ns);
    pb_header *hs = (pb_header *)(dur + ns);
    pb_status **stp = (pb_status **)(hs + nh);
    pb_header **hsp = (pb_header **)(stp + ns);
    uint8_t *out = NULL;

    for (size_t i = 0; i < ns; i++) {
        const sl_rls_status *s = &r->statuses[i];
        pb_status x = ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__DESCRIPTOR_STATUS__INIT;
        x.code = (Envoy__Service__Ratelimit__V3__RateLimitResponse__Code)s->code;
        x.limit_remaining = s->limit_remaining;
        if (s->has_limit) {
            pb_limit l = ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__RATE_LIMIT__INIT;
            l.requests_per_unit = s->requests_per_unit;
            l.unit = (Envoy__Service__Ratelimit__V3__RateLimitResponse__RateLimit__Unit)s->unit;
            l.name = nonnull(s->limit_name);
            lim[i] = l;
            x.current_limit = &lim[i];
        }
        if (s->has_reset) {
            pb_duration d = GOOGLE__PROTOBUF__DURATION__INIT;
            int64_t ns_ = s->reset_after_ns < 0 ? 0 : s->reset_after_ns;
            d.seconds = ns_ / 1000000000;
            d.nanos = (int32_t)(ns_ % 1000000000);
            dur[i] = d;
            x.duration_until_reset = &dur[i];
        }
        st[i] = x;
        stp[i] = &st[i];
    }
    fill_headers(r->response_headers, r->n_response_headers, hs, hsp);
    fill_headers(r->request_headers, r->n_request_headers, hs + r->n_response_headers,
                 hsp + r->n_response_headers);

    pb_response m = ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__INIT;
    m.overall_code = (Envoy__Service__Ratelimit__V3__RateLimitResponse__Code)r->overall_code;
    m.n_statuses = ns;
    m.statuses = stp;
    m.n_response_headers_to_add = r->n_response_headers;
    m.response_headers_to_add = hsp;
    m.n_request_headers_to_add = r->n_request_headers;
    m.request_headers_to_add = hsp + r->n_response_headers;
    if (r->raw_body && r->raw_body_len) {
        m.raw_body.data = (uint8_t *)r->raw_body;
        m.raw_body.len = r->raw_body_len;
    }
    out = pack_with_headroom(&m.base, headroom, len);
    sl_free(room);
    return out;
}

/* ---- the health check ---- */

int sl_health_request_decode(const uint8_t *buf, size_t len, char *service)
{
    service[0] = '\0';
    wire w = {.p = buf, .end = buf + len};
    while (w.p < w.end) {
        uint32_t num;
        unsigned type;
        wire body;
        if (read_field(&w, &num, &type, &body) != 0)
            return SL_RLS_EMALFORMED;
        if (num != 1)
            continue;
        if (type != WT_LEN)
            return SL_RLS_EMALFORMED;
        if (check_string(&body, SL_HEALTH_MAX_SERVICE, "service", NULL, 0) != SL_RLS_OK)
            return SL_RLS_EBOUND;
        /* proto3: the last occurrence of a field is its value. */
        size_t n = (size_t)(body.end - body.p);
        memcpy(service, body.p, n);
        service[n] = '\0';
    }
    return SL_RLS_OK;
}

uint8_t *sl_health_response_encode(sl_health_status status, size_t headroom, size_t *len)
{
    Grpc__Health__V1__HealthCheckResponse m = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    m.status = (Grpc__Health__V1__HealthCheckResponse__ServingStatus)status;
    return pack_with_headroom(&m.base, headroom, len);
}
