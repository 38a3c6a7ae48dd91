/*
 * sim.h: the simulation's results (sim_result.c), shared by the runner
 * (simulate.c), the plot (svg.c) and the fleet model (fleet.c).
 */
#ifndef SLUICE_CLI_SIM_H
#define SLUICE_CLI_SIM_H

#include <stdio.h>

#include "cli/cli.h"
#include "cli/traffic.h"

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

/* The most nodes a fleet may have (--nodes), and the most the sync
 * strategy's central table holds (SL_QUOTA_NODES_MAX). */
#define SIM_FLEET_NODES_MAX 1024

/* How a fleet shares the traffic and the limit. */
typedef struct sim_fleet {
    int nodes;
    const char *strategy;  /* central, sync, split, route */
    int64_t sync_ns;       /* sync: the interval between a node's syncs */
    /* The share of the requests each node gets (a smooth weighted
     * round-robin; every weight 1 when weights is NULL); route ignores it:
     * a key's owner takes all its requests. */
    const int64_t *weights;
    /* From this time on, node k's requests go to node k + 1 (mod nodes):
     * traffic that moves. 0: never. */
    int64_t shift_at_ns;
} sim_fleet;

/*
 * The fleet: runs `alg` over the traffic as f->nodes nodes sharing the limit
 * by f->strategy, the requests spread over the nodes by f->weights. Fills
 * *r (name "STRATEGY"). Returns 0, or -1 with errbuf.
 */
int sim_fleet_run(const sim_setup *s, sl_algorithm alg, const sim_fleet *f, sim_result *r,
                  char *errbuf, size_t errcap);

#endif
