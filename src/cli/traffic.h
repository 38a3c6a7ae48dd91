/*
 * traffic.h: the requests a simulation replays, in virtual time.
 *
 * A traffic is a list of events sorted by time: at t_ns, key number `key`
 * asks for `cost` units. The generators below are deterministic: the same
 * parameters and seed give the same events, byte for byte. Only the
 * generators use floating point (to space arrivals); the algorithms see
 * integer nanoseconds.
 */
#ifndef SLUICE_CLI_TRAFFIC_H
#define SLUICE_CLI_TRAFFIC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/cli.h"

typedef struct sim_event {
    int64_t t_ns;  /* virtual time, >= 0 */
    uint32_t key;  /* index into traffic.keys */
    int64_t cost;  /* >= 0 */
} sim_event;

typedef enum traffic_kind {
    TRAFFIC_STEADY,   /* evenly spaced at the rate */
    TRAFFIC_BURSTY,   /* on/off: the first fifth of every period at 5x the rate */
    TRAFFIC_POISSON,  /* exponential gaps of mean 1/rate */
    TRAFFIC_BOUNDARY, /* the whole limit just before a window boundary, again just after */
    TRAFFIC_RAMP,     /* the rate rises linearly from 0 to 2x the rate */
    TRAFFIC_FILE,     /* a trace file */
} traffic_kind;

/* The most events a simulation holds (about 400 MB for all algorithms
 * together at the cap): a bound on memory, not on patience. */
#define TRAFFIC_MAX_EVENTS 10000000u
/* Trace files: the longest line, key, and the most distinct keys. */
#define TRAFFIC_MAX_LINE 4096
#define TRAFFIC_MAX_KEY 512
#define TRAFFIC_MAX_KEYS 100000u

typedef struct traffic {
    sim_event *ev;   /* malloc'ed; traffic_free() */
    size_t n, cap;
    char **keys;     /* NUL-terminated names, malloc'ed */
    size_t nkeys, keys_cap;
    int64_t end_ns;  /* the simulated span: [0, end_ns) */
} traffic;

typedef struct traffic_params {
    traffic_kind kind;
    const char *file; /* TRAFFIC_FILE */
    int64_t limit, period_ns, duration_ns;
    double rate;      /* requests per second */
    uint64_t seed;
} traffic_params;

/* Parses a traffic name ("steady", ...); anything else is a file name.
 * Returns the kind. */
traffic_kind traffic_kind_parse(const char *name);
const char *traffic_kind_name(traffic_kind k);

/*
 * Builds the events for *p into *t (zeroed by the caller). Returns 0, or -1
 * with a message in errbuf: "trace.txt:12: time goes backwards (...)", too
 * many events, out of memory. On error *t may hold a part: free it.
 */
int traffic_build(traffic *t, const traffic_params *p, char *errbuf, size_t errcap);

/*
 * Reads a trace (docs/cli.md: "TIME [KEY [COST]]" a line) from f into *t
 * (zeroed by the caller); `name` names it in errors ("name:LINE: ...").
 * duration_ns > 0 cuts requests at or after it. Returns 0, or -1 with a
 * message in errbuf; f stays open.
 */
int traffic_read_stream(traffic *t, FILE *f, const char *name, int64_t duration_ns, char *errbuf,
                        size_t errcap);

void traffic_free(traffic *t);

#endif
