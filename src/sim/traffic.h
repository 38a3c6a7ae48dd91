/*
 * traffic.h: the requests a simulation replays, in virtual time.
 *
 * A traffic is a list of events sorted by time: at t_ns, key number `key`
 * asks for `cost` units. The generators below are deterministic: the same
 * parameters and seed give the same events, byte for byte. Only the
 * generators use floating point (to space arrivals); the algorithms see
 * integer nanoseconds. The CLI also reads traffic from a trace file
 * (cli/trace.h), filling a traffic with traffic_push.
 */
#ifndef SLUICE_SIM_TRAFFIC_H
#define SLUICE_SIM_TRAFFIC_H

#include <stddef.h>
#include <stdint.h>

#include "sluice.h"

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
    TRAFFIC_FILE,     /* a trace file (read by the CLI, not generated) */
} traffic_kind;

/* The most events a simulation holds (about 400 MB for all algorithms
 * together at the cap): a bound on memory, not on patience. */
#define TRAFFIC_MAX_EVENTS 10000000u

typedef struct traffic {
    sim_event *ev;   /* malloc'ed; traffic_free() */
    size_t n, cap;
    /* The most events this traffic may hold, when lower than
     * TRAFFIC_MAX_EVENTS (0: that cap): set before building, by a caller
     * that bounds its work more tightly (the server's simulations). */
    size_t max_events;
    char **keys;     /* NUL-terminated names, malloc'ed */
    size_t nkeys, keys_cap;
    int64_t end_ns;  /* the simulated span: [0, end_ns) */
} traffic;

typedef struct traffic_params {
    traffic_kind kind; /* a generated kind: not TRAFFIC_FILE */
    int64_t limit, period_ns, duration_ns;
    double rate;      /* requests per second */
    uint64_t seed;
} traffic_params;

/* Parses a traffic name ("steady", ...); anything else is TRAFFIC_FILE (the
 * CLI takes it for a file name). Returns the kind. */
traffic_kind traffic_kind_parse(const char *name);
const char *traffic_kind_name(traffic_kind k);

/*
 * Builds the events for *p, a generated kind, into *t (zeroed by the
 * caller, but for max_events). Returns 0, or -1 with a message in errbuf:
 * too many events, out of memory. On error *t may hold a part: free it.
 */
int traffic_build(traffic *t, const traffic_params *p, char *errbuf, size_t errcap);

/* How many requests traffic_build makes for *p, for bounding work before it
 * is done: exact for boundary; for steady, bursty and ramp within one a
 * burst (rounding); for poisson its expectation, rate x duration, which its
 * count varies about by the square root. */
double traffic_expected(const traffic_params *p);

/* Appends one event at the end of *t (times must not go backwards; the
 * caller keeps them sorted); -1 with errbuf when the cap (max_events, else
 * TRAFFIC_MAX_EVENTS) is reached or memory runs out. */
int traffic_push(traffic *t, int64_t t_ns, uint32_t key, int64_t cost, char *errbuf,
                 size_t errcap);

void traffic_free(traffic *t);

#endif
