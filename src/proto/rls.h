/*
 * rls.h: the messages of Envoy's rate limit service
 * (envoy.service.ratelimit.v3, proto/envoy/service/ratelimit/v3/rls.proto)
 * and of gRPC's health check (grpc.health.v1), as plain C structs.
 *
 * A ShouldRateLimit request is a domain and a list of descriptors, each a
 * list of key/value entries:
 *
 *   RateLimitRequest
 *     domain        "edge"
 *     descriptors   [ ("remote_address","10.0.0.1") ]
 *                   [ ("user","u1"), ("path","/api") ]   limit 5/MINUTE
 *     hits_addend   0 (one hit), unless a descriptor sets its own
 *
 * The bytes come from the network, so decoding is bounded before anything
 * is allocated: the message's size, the number of descriptors, of entries
 * in each, and the length of the domain, of each key and of each value are
 * checked by a walk over the wire format first, and an error names the
 * bound broken and where ("descriptor 3, entry 2: key of 300 bytes, over
 * the bound of 255"). Only then does the code protoc-c generated unpack the
 * message. A string holding a NUL byte is refused (the key would otherwise
 * read as its prefix).
 *
 * The generated code stays behind this header: nothing above src/proto sees
 * protobuf-c's types. Allocation goes through common/alloc.h (its
 * failure hook reaches every allocation made here).
 */
#ifndef SLUICE_PROTO_RLS_H
#define SLUICE_PROTO_RLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The default bounds of a request (sl_rls_default_bounds). */
#define SL_RLS_MAX_MESSAGE (64 * 1024) /* bytes of one serialized request */
#define SL_RLS_MAX_DESCRIPTORS 64
#define SL_RLS_MAX_ENTRIES 16  /* entries of one descriptor */
#define SL_RLS_MAX_DOMAIN 255  /* bytes */
#define SL_RLS_MAX_KEY 255     /* bytes of an entry's key */
#define SL_RLS_MAX_VALUE 4096  /* bytes of an entry's value */

/* What a decoded request may hold at most. */
typedef struct sl_rls_bounds {
    size_t max_message;
    size_t max_descriptors;
    size_t max_entries;
    size_t max_domain;
    size_t max_key;
    size_t max_value;
} sl_rls_bounds;

extern const sl_rls_bounds sl_rls_default_bounds;

/* Results of sl_rls_request_decode. */
enum {
    SL_RLS_OK = 0,
    SL_RLS_EMALFORMED = -1, /* not a RateLimitRequest on the wire */
    SL_RLS_EBOUND = -2,     /* well formed, but over one of the bounds */
    SL_RLS_ENOMEM = -3,
};

/* Envoy's units, the same numbers as on the wire: envoy.type.v3.RateLimitUnit
 * (a request's limit override) and the response's
 * RateLimitResponse.RateLimit.Unit have the same values, WEEK the last. */
typedef enum sl_rls_unit {
    SL_RLS_UNIT_UNKNOWN = 0,
    SL_RLS_UNIT_SECOND = 1,
    SL_RLS_UNIT_MINUTE = 2,
    SL_RLS_UNIT_HOUR = 3,
    SL_RLS_UNIT_DAY = 4,
    SL_RLS_UNIT_MONTH = 5,
    SL_RLS_UNIT_YEAR = 6,
    SL_RLS_UNIT_WEEK = 7,
} sl_rls_unit;

/* RateLimitResponse.Code. */
typedef enum sl_rls_code {
    SL_RLS_CODE_UNKNOWN = 0,
    SL_RLS_CODE_OK = 1,
    SL_RLS_CODE_OVER_LIMIT = 2,
} sl_rls_code;

/* Bytes p[0 .. n), NUL-terminated at p[n] as well (never holding a NUL). */
typedef struct sl_rls_str {
    const char *p;
    size_t n;
} sl_rls_str;

typedef struct sl_rls_entry {
    sl_rls_str key;
    sl_rls_str value;
} sl_rls_entry;

typedef struct sl_rls_descriptor {
    const sl_rls_entry *entries;
    size_t n_entries;
    bool has_limit;               /* the caller's limit override */
    uint32_t limit_requests_per_unit;
    sl_rls_unit limit_unit;
    bool has_hits_addend;         /* the descriptor's own hits_addend */
    uint64_t hits_addend;
} sl_rls_descriptor;

/* A decoded request. Everything it points to is owned by it until
 * sl_rls_request_free. */
typedef struct sl_rls_request {
    sl_rls_str domain;
    const sl_rls_descriptor *descriptors;
    size_t n_descriptors;
    uint32_t hits_addend; /* 0 when absent (Envoy's "one hit") */
    void *owner_;         /* the unpacked message and the arrays above */
} sl_rls_request;

/*
 * Decodes a serialized RateLimitRequest buf[0 .. len) under bounds (NULL:
 * sl_rls_default_bounds) into *out. Returns SL_RLS_OK, or an SL_RLS_E* code
 * with a message in err (errlen bytes, NUL-terminated; err may be NULL when
 * errlen is 0) and *out zeroed, so that sl_rls_request_free(out) is always
 * safe. An empty list of descriptors decodes: whether it is an error is the
 * caller's to say.
 */
int sl_rls_request_decode(sl_rls_request *out, const uint8_t *buf, size_t len,
                          const sl_rls_bounds *bounds, char *err, size_t errlen);

/* Frees what a decoded request owns and zeroes it; a zeroed request is a
 * no-op. */
void sl_rls_request_free(sl_rls_request *r);

/* A header for Envoy to add (HeaderValue): NUL-terminated strings. */
typedef struct sl_rls_header {
    const char *key;
    const char *value;
} sl_rls_header;

/* One DescriptorStatus, for the request's descriptor at the same index. */
typedef struct sl_rls_status {
    sl_rls_code code;
    bool has_limit;               /* current_limit is sent only when set */
    uint32_t requests_per_unit;
    sl_rls_unit unit;
    const char *limit_name;       /* NULL or "" for none */
    uint32_t limit_remaining;
    bool has_reset;               /* duration_until_reset is sent only when set */
    int64_t reset_after_ns;       /* >= 0 */
} sl_rls_status;

typedef struct sl_rls_response {
    sl_rls_code overall_code;
    const sl_rls_status *statuses;
    size_t n_statuses;
    const sl_rls_header *response_headers;
    size_t n_response_headers;
    const sl_rls_header *request_headers;
    size_t n_request_headers;
    const uint8_t *raw_body; /* NULL for none */
    size_t raw_body_len;
} sl_rls_response;

/*
 * Serializes r as a RateLimitResponse into a new buffer (the caller frees it
 * with sl_free) that begins with `headroom` bytes left for the caller (the
 * gRPC frame's prefix goes there), followed by the message; *len is set to
 * headroom plus the message's length. Returns NULL when out of memory, or
 * when the sizes do not fit in a size_t.
 */
uint8_t *sl_rls_response_encode(const sl_rls_response *r, size_t headroom, size_t *len);

/* grpc.health.v1.HealthCheckResponse.ServingStatus. */
typedef enum sl_health_status {
    SL_HEALTH_UNKNOWN = 0,
    SL_HEALTH_SERVING = 1,
    SL_HEALTH_NOT_SERVING = 2,
    SL_HEALTH_SERVICE_UNKNOWN = 3,
} sl_health_status;

#define SL_HEALTH_MAX_SERVICE 255 /* bytes of a service's name */

/*
 * Decodes a serialized HealthCheckRequest buf[0 .. len): its service's name,
 * NUL-terminated, into service (SL_HEALTH_MAX_SERVICE + 1 bytes; "" for the
 * whole server). Returns SL_RLS_OK, SL_RLS_EMALFORMED or SL_RLS_EBOUND (a
 * name too long, or holding a NUL). Allocates nothing.
 */
int sl_health_request_decode(const uint8_t *buf, size_t len, char *service);

/* Serializes a HealthCheckResponse of status, with headroom as in
 * sl_rls_response_encode (the caller frees it with sl_free); NULL when out
 * of memory. */
uint8_t *sl_health_response_encode(sl_health_status status, size_t headroom, size_t *len);

#endif /* SLUICE_PROTO_RLS_H */
