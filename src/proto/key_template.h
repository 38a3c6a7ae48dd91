/*
 * proto/key_template.h: renders a policy's key template (policy/key_template.h
 * says what each part means) from what one request carries. Nothing here
 * allocates or does I/O; every loop is bounded by the template's and the
 * request's lengths.
 */
#ifndef SLUICE_PROTO_KEY_TEMPLATE_H
#define SLUICE_PROTO_KEY_TEMPLATE_H

#include <stddef.h>

#include "policy/key_template.h"
#include "proto/client_addr.h"
#include "proto/http.h"

/* What one request carries. Every field is optional: a slice with len 0 (or
 * a NULL pointer) is absent, as is a NULL client. Nothing is kept after a
 * render. */
typedef struct sl_key_request {
    sl_http_slice key;              /* the key the request names */
    sl_http_slice policy;           /* the policy's name */
    sl_http_slice method;
    sl_http_slice path;             /* without the query (sl_http_request.path) */
    sl_http_slice query;            /* without the '?' (sl_http_request.query) */
    const sl_http_header *headers;  /* nheaders fields, in the order sent */
    size_t nheaders;
    const sl_ip *client;            /* the client's address (client_addr.h) */
} sl_key_request;

/*
 * Writes t's key for request r into out[0 .. cap) (cap above
 * SL_KEY_RENDER_MAX is lowered to it; the caller passes the store's key
 * limit). Returns the key's length (> 0; out is not NUL-terminated), 0 when
 * a part is missing, or -1 when the key does not fit in cap. A missing part
 * wins over a key too long, so that a request without the part is always
 * told so. After 0, *missing (when missing is not NULL) points at the first
 * missing part's canonical name, NUL-terminated, inside t ("key",
 * "header.x-api-key", "query.user", "ip/24"): valid as long as t is. A
 * fallback to another template is the caller's: it renders the next one.
 */
long sl_key_template_render(const sl_key_template *t, const sl_key_request *r, char *out,
                            size_t cap, const char **missing);

#endif
