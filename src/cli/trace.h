/*
 * trace.h: the CLI's trace files, read into a traffic of the simulator's
 * (sim/traffic.h): one request a line, "TIME [KEY [COST]]" (docs/cli.md).
 */
#ifndef SLUICE_CLI_TRACE_H
#define SLUICE_CLI_TRACE_H

#include <stdint.h>
#include <stdio.h>

#include "cli/cli.h"
#include "sim/traffic.h"

/* Trace files: the longest line, key, and the most distinct keys. */
#define TRAFFIC_MAX_LINE 4096
#define TRAFFIC_MAX_KEY 512
#define TRAFFIC_MAX_KEYS 100000u

/*
 * Reads the trace file at path into *t (zeroed by the caller); duration_ns
 * > 0 cuts requests at or after it. Returns 0, or -1 with a message in
 * errbuf: "trace.txt:12: time goes backwards (...)", too many events, out
 * of memory, a file that cannot be opened. On error *t may hold a part:
 * free it.
 */
int traffic_read_file(traffic *t, const char *path, int64_t duration_ns, char *errbuf,
                      size_t errcap);

/*
 * Reads a trace from f into *t (zeroed by the caller); `name` names it in
 * errors ("name:LINE: ..."). duration_ns > 0 cuts requests at or after it.
 * Returns 0, or -1 with a message in errbuf; f stays open.
 */
int traffic_read_stream(traffic *t, FILE *f, const char *name, int64_t duration_ns, char *errbuf,
                        size_t errcap);

#endif
