/*
 * sim_query.h: the query string of GET /v1/simulate, sluiced's "try a
 * limit" (docs/http.md): which limit to simulate over which traffic, decoded
 * and bounded before any work is done, so that the server never runs a
 * simulation larger than SL_SIM_MAX_REQUESTS requests or longer than
 * SL_SIM_MAX_SPAN_NS of virtual time.
 *
 *   algorithm=A   gcra (default), token_bucket, leaky_bucket, fixed_window,
 *                 sliding_log, sliding_window
 *   limit=N       units per period (required)
 *   period=P      seconds or a duration: 500ms, 1s, 1m, 1h, 1d (required)
 *   burst=B       how many at once (default: the limit)
 *   traffic=K     steady (default), bursty, poisson, boundary, ramp
 *   rate=R        offered requests per second, a decimal (default: 2x the limit)
 *   duration=D    virtual time simulated (default: 10 periods, at most the span cap)
 *   seed=S        poisson's seed (default 1)
 *
 * A parameter with an empty value is one not given (an HTML form sends its
 * blank fields so); an unknown parameter, or one given twice, is an error.
 */
#ifndef SL_PROTO_SIM_QUERY_H
#define SL_PROTO_SIM_QUERY_H

#include <stddef.h>
#include <stdint.h>

#include "sim/traffic.h"
#include "sluice.h"

/* The most requests one simulation on the server holds, and the longest
 * virtual time it spans (one day). */
#define SL_SIM_MAX_REQUESTS 100000
#define SL_SIM_MAX_SPAN_NS (86400LL * 1000000000LL)
/* The time buckets of the plot. */
#define SL_SIM_BUCKETS 100

typedef struct sl_sim_request {
    sl_algorithm algorithm;
    sl_limit lim;        /* sl_limit_init's, checked */
    int64_t limit, period_ns, burst; /* burst: the limit when not given */
    traffic_params traffic; /* kind, limit, period, duration, rate, seed */
    double expected;     /* requests the traffic holds (traffic_expected) */
    char period_text[40]; /* the period as given (a valid duration), for the plot's title */
} sl_sim_request;

/*
 * Decodes a query string (qlen bytes at q, still percent-encoded; NULL when
 * there is none) into *out. Returns 0, or -1 with a message in err (errcap
 * bytes: lowercase, naming the rule and, for a bound, the bound) and *field
 * set to the parameter at fault (a static string; NULL when none is).
 */
int sl_sim_request_parse(const char *q, size_t qlen, sl_sim_request *out, char *err,
                         size_t errcap, const char **field);

#endif
