/*
 * sim.h: the simulator, sluice's algorithms over a traffic in virtual time
 * (sim/traffic.h): the run of one algorithm (run.c), its results
 * (sim_result.c) and their plot (svg.c). Shared by the CLI (`sluice
 * simulate`, which adds the fleet model and the trace files) and sluiced's
 * live page (its "try a limit" panel, GET /v1/simulate). Nothing here reads
 * a clock or writes a file it did not get: the same setup gives the same
 * bytes.
 */
#ifndef SLUICE_SIM_SIM_H
#define SLUICE_SIM_SIM_H

#include <stdio.h>

#include "sim/traffic.h"
#include "sluice.h"

/* One admitted request as the limited resource sees it: for the shaper
 * (leaky_bucket) at the time it may go ahead (arrival + delay). */
typedef struct sim_admit {
    int64_t t_ns;
    uint32_t key;
    int64_t cost;
} sim_admit;

typedef struct sim_result {
    char name[48];          /* "gcra", or "fleet:sync" for a fleet strategy */
    sl_algorithm alg;
    sl_limit lim;
    size_t state_bytes;     /* sl_state_size(&lim) */
    uint64_t admitted, rejected;   /* requests */
    int64_t max_in_period;  /* units, the most in any [s, s + period) of one key */
    int64_t *delays;        /* leaky_bucket: the delay of every admitted request */
    size_t ndelays;
    /* Per time bucket of the plot and the CSV. */
    uint64_t *b_offered, *b_admitted, *b_rejected;
    int64_t *b_window;      /* units admitted in [end - period, end) of the bucket, all keys */
} sim_result;

typedef struct sim_setup {
    const traffic *tr;
    int64_t limit, period_ns, burst;
    size_t nbuckets;
    int64_t bucket_ns;
    const char *title;      /* for the plot: the traffic and parameters */
} sim_setup;

/* Most state a run may allocate for all keys of one algorithm. */
#define SIM_MAX_STATE_BYTES ((size_t)1 << 30)

/*
 * Runs one algorithm over the setup's traffic: r->alg, r->lim, r->name and
 * r->state_bytes set by the caller, the rest filled here (its buffers freed
 * by sim_result_free). Each key starts from "never seen", and every decision
 * is sl_take()'s own. When events is not NULL, one CSV row per request is
 * written to it ("name,t_ns,key,cost,allowed,delay_ns"). Returns 0, or -1
 * with a message in errbuf (out of memory, too many keys' states, an
 * algorithm's error).
 */
int sim_run_one(const sim_setup *s, sim_result *r, FILE *events, char *errbuf, size_t errcap);

/*
 * Finishes a result from the admitted requests (which it sorts): the most
 * in any period per key, the per-bucket sliding counts. Returns 0 or -1 (no
 * memory).
 */
int sim_finish(const sim_setup *s, sim_result *r, sim_admit *adm, size_t nadm);

/* Allocates the bucket arrays of r; 0 or -1. */
int sim_result_alloc(const sim_setup *s, sim_result *r);
void sim_result_free(sim_result *r);

/* The bucket of time t. */
size_t sim_bucket_of(const sim_setup *s, int64_t t_ns);

/* The plots' drawing (svg.c), shared with the service model's plot
 * (service_svg.c): the panels are SIM_SVG_W wide, their strips start at
 * SIM_SVG_LEFT and end SIM_SVG_RIGHT from the right edge. */
#define SIM_SVG_W 960.0
#define SIM_SVG_LEFT 78.0
#define SIM_SVG_RIGHT 24.0
/* Writes s with the five XML special characters escaped (control bytes as '?'). */
void sim_svg_text(FILE *f, const char *s);
/* An SVG's opening, the same for every plot: the document's size (width
 * x height), the shared styles and `styles` (CSS rules), the title "what:
 * title", a white background, and the title's text at x = left. */
void sim_svg_begin(FILE *f, double width, double height, double left, const char *what,
                   const char *title, const char *styles);
/* A "nice" tick step (1, 2 or 5 times a power of ten) for about n ticks up to max. */
double sim_svg_step(double max, int n);
/* The gridlines and labels of a strip of height h from y0, for values 0 .. max,
 * and the strip's label rotated at the left. */
void sim_svg_y_axis(FILE *f, double y0, double h, double max, const char *label);

/* Writes the plot; 0, or -1 with errno set by stdio. */
int sim_write_svg(FILE *f, const sim_setup *s, const sim_result *r, size_t nr);

#endif
