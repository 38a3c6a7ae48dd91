/*
 * rls_json.h: Envoy's rate limit messages in the proto3 JSON mapping, as
 * envoyproxy/ratelimit's `POST /json` takes and answers them (its handler
 * uses Go's protojson.Unmarshal and protojson.Marshal with their default
 * options).
 *
 * A request:
 *
 *   {"domain": "edge",
 *    "descriptors": [
 *      {"entries": [{"key": "remote_address", "value": "10.0.0.1"}]},
 *      {"entries": [{"key": "user", "value": "u1"}],
 *       "limit": {"requestsPerUnit": 5, "unit": "MINUTE"},
 *       "hitsAddend": "3"}],
 *    "hitsAddend": 1}
 *
 * What is read as protojson reads it: each field by its lowerCamelCase name
 * or by its name in the .proto (`hitsAddend` or `hits_addend`, not both);
 * an integer as a JSON number or a string holding one, in any form that is
 * an integer (`5`, `"5"`, `5.0`, `5e0`); an enum by its name or its number;
 * the descriptor's hits_addend (a google.protobuf.UInt64Value) as a bare
 * integer; null as the field's absence. An unknown field, a field given
 * twice, a value of the wrong type and an unknown enum name are refused, as
 * protojson refuses them, by an error that names the field where it is:
 * `descriptors[1].entries[0].value: not a string`.
 *
 * The response is written as protojson.Marshal writes it: lowerCamelCase
 * names, fields in the order the .proto declares them, fields at their
 * default value (0, "", an empty list, an unset message) left out, enums
 * by name, durations as seconds with 0, 3, 6 or 9 decimals ("3.500s"), bytes
 * in base64, on one line with no spaces:
 *
 *   {"overallCode":"OVER_LIMIT","statuses":[{"code":"OVER_LIMIT",
 *    "currentLimit":{"name":"per_user","requestsPerUnit":5,"unit":"MINUTE"},
 *    "durationUntilReset":"42s"}],
 *    "responseHeadersToAdd":[{"key":"x-ratelimit-limit","value":"5"}]}
 *
 * The HTTP status that goes with it is the caller's: the reference answers
 * 200 for OK, 429 for OVER_LIMIT and 500 for UNKNOWN.
 */
#ifndef SLUICE_PROTO_RLS_JSON_H
#define SLUICE_PROTO_RLS_JSON_H

#include <stddef.h>

#include "proto/rls.h"

/* A body may hold at most this many times bounds->max_message bytes: JSON
 * spells a message out at length, but a body over it cannot be a request
 * within the bounds that is merely written generously. */
#define SL_RLS_JSON_BODY_FACTOR 4

/* The deepest nesting of arrays and objects in a body (a request needs 5). */
#define SL_RLS_JSON_MAX_DEPTH 16

/*
 * Reads body[0 .. len), the proto3 JSON of a RateLimitRequest, into *out
 * under bounds (NULL: sl_rls_default_bounds). The result is exactly what
 * sl_rls_request_decode makes of the same request on the wire (it is
 * packed and decoded by it, so that every bound is checked in one place and
 * named the same), and is freed by sl_rls_request_free.
 *
 * Returns SL_RLS_OK, or with a message in err (errlen bytes, NUL-terminated;
 * err may be NULL when errlen is 0) and *out zeroed:
 *   SL_RLS_EMALFORMED  no JSON, or no RateLimitRequest in JSON (the message
 *                      names the field, or the byte where the JSON broke);
 *                      a string holding \u0000 or bytes that are not UTF-8
 *                      is refused here too
 *   SL_RLS_EBOUND      a body over SL_RLS_JSON_BODY_FACTOR times the
 *                      message's bound, nesting over SL_RLS_JSON_MAX_DEPTH,
 *                      or a request over one of the bounds
 *   SL_RLS_ENOMEM      out of memory
 * Safe to call from several threads at once.
 */
int sl_rls_request_from_json(sl_rls_request *out, const char *body, size_t len,
                             const sl_rls_bounds *bounds, char *err, size_t errlen);

/*
 * Writes r as the proto3 JSON of a RateLimitResponse into a new buffer (the
 * caller frees it with sl_free), NUL-terminated, its length without the NUL
 * in *len. Bytes of a string that are not UTF-8 are written as U+FFFD (where
 * protojson would refuse to write the message at all). Returns NULL when out
 * of memory.
 */
char *sl_rls_response_to_json(const sl_rls_response *r, size_t *len);

#endif /* SLUICE_PROTO_RLS_JSON_H */
