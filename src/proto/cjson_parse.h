/*
 * cjson_parse.h: cJSON's parse, one at a time in the process.
 *
 * cJSON_ParseWithLengthOpts writes a global error position on every parse
 * (cJSON.c: global_error), on success as well, so that parses from several
 * worker threads race on it. Every parse in the protocol layer goes through
 * this one function and its one lock, held for the parse alone.
 */
#ifndef SLUICE_PROTO_CJSON_PARSE_H
#define SLUICE_PROTO_CJSON_PARSE_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* cJSON_ParseWithLengthOpts(s, n, end, 0) under the lock: the tree (the
 * caller's, freed with cJSON_Delete), or NULL for bytes that are no JSON or
 * when memory ran out; *end (when end is not NULL) is where the parse
 * stopped. */
cJSON *sl_cjson_parse(const char *s, size_t n, const char **end);

#endif /* SLUICE_PROTO_CJSON_PARSE_H */
