/*
 * service.h: the service model of `sluice simulate --service` (service.c),
 * its plot (service_svg.c) and its command (simulate_service.c).
 *
 * The model: `capacity` servers, each serving one request at a time for a
 * service time drawn uniformly from S * [1 - spread, 1 + spread] (mean S,
 * the unloaded latency), and a FIFO queue in front of them. Requests arrive
 * as a Poisson process at the offered load (a share of capacity / S). An
 * adaptive estimator (sl_adapt_*) is the admission limit: a request is
 * admitted while fewer than sl_adapt_limit() are in flight and refused at
 * once otherwise; past `capacity` in flight the excess waits in the queue,
 * so latency rises. When a request ends the estimator gets its sample. From
 * halve_at_ns on, only capacity / 2 servers serve (the offered rate stays).
 * Everything runs on a virtual clock of integer nanoseconds from one seed:
 * the same parameters give the same figures.
 */
#ifndef SLUICE_CLI_SERVICE_H
#define SLUICE_CLI_SERVICE_H

#include <stdio.h>

#include "cli/cli.h"
#include "cli/hist.h"

#define SVC_NS_PER_SEC INT64_C(1000000000)
#define SVC_STEPS_MAX 16
#define SVC_SEGMENTS_MAX (SVC_STEPS_MAX + 1)
#define SVC_TICK_NS INT64_C(10000000) /* the traces' step: 10 ms */
#define SVC_CAPACITY_MAX 100000
#define SVC_SERVICE_MIN_NS INT64_C(1000)         /* 1 us */
#define SVC_SERVICE_MAX_NS INT64_C(10000000000)  /* 10 s */
#define SVC_SPREAD_MAX 900                       /* per mille */
#define SVC_LOAD_MIN 10                          /* per mille of capacity: 1% */
#define SVC_LOAD_MAX 100000                      /* 10000% */
#define SVC_RUN_MAX_NS (INT64_C(3600) * 1000000000) /* an hour of virtual time */
#define SVC_MAX_ARRIVALS 20000000u               /* offered requests, all steps */
#define SVC_POINTS_MAX 300

/* One step of the offered load. */
typedef struct svc_step {
    int64_t load_permille; /* of the full capacity / S */
    int64_t dur_ns;
} svc_step;

typedef struct svc_params {
    int64_t capacity;        /* servers */
    int64_t service_ns;      /* S, the mean service time */
    int64_t spread_permille; /* service times in S * (1000 +- spread) / 1000 */
    svc_step steps[SVC_STEPS_MAX];
    int nsteps;
    int64_t halve_at_ns;     /* -1: the capacity never halves */
    uint64_t seed;
} svc_params;

/* A stretch of constant load and capacity: a load step, cut in two by the
 * halving when it falls inside. Its figures are taken over [win_from, to):
 * after the estimators have had time to settle. */
typedef struct svc_segment {
    int64_t from, to, win_from; /* ns */
    int64_t load_permille;      /* of the full capacity */
    int64_t servers;
    /* Figures (svc_run): */
    int64_t limit_mean, inflight_mean; /* over the 10 ms ticks in the window */
    uint64_t offered, served, refused; /* in the window */
    int64_t goodput_permille; /* served per second over this segment's servers / S */
    int64_t p99_ns;           /* of the requests that ended in the window; 0 none */
} svc_segment;

typedef struct svc_result {
    sl_adapt_kind kind;
    sl_adapt_config cfg;
    svc_segment seg[SVC_SEGMENTS_MAX];
    int nseg;
    int64_t settled_limit; /* the mean limit of the segment that ends at the halving */
    int64_t follow_ns;     /* from the halving until the limit reads <= 2/3 of
                            * settled_limit; -1 never, or no halving */
    /* Per 10 ms tick: the limit and the requests in flight at its start, the
     * requests served and refused during it. */
    size_t ntick;
    int64_t *t_limit, *t_inflight;
    uint32_t *t_served, *t_refused;
    /* The points of the plot and the CSV: pt_ticks ticks each (at most
     * SVC_POINTS_MAX of them), and the latencies of the requests that ended
     * in each point and in each segment's window. */
    size_t pt_ticks, npts;
    cli_hist *pt_hist;
    cli_hist *seg_hist; /* [SVC_SEGMENTS_MAX] */
} svc_result;

/* The end of the run: the steps' total duration. */
int64_t svc_run_end(const svc_params *p);

/* Splits the run into segments (seg[] holds SVC_SEGMENTS_MAX); returns their count. */
int svc_segments(const svc_params *p, svc_segment *seg);

/* The offered requests the run makes, on average (for the caller's bound). */
double svc_expected_arrivals(const svc_params *p);

/* The estimator's configuration in this model (docs/cli.md): the same range
 * for all (min 4, or 1 below a capacity of 8; max 25 x capacity; initial
 * 20), AIMD's timeout 1.5 S, Vegas' smoothing 50 per mille, the anchored
 * estimator's probes every 5 s. Returns SL_OK or sl_adapt_init's error. */
int svc_config(sl_adapt_kind kind, const svc_params *p, sl_adapt_config *c);

/* Runs the model with estimator `kind`; fills *r, which the caller frees
 * with svc_result_free (also after an error). Returns 0, or -1 with errbuf. */
int svc_run(const svc_params *p, sl_adapt_kind kind, svc_result *r, char *errbuf, size_t errcap);
void svc_result_free(svc_result *r);

/* One point of the plot and the CSV. */
typedef struct svc_point {
    int64_t t_ns, span_ns;
    int64_t servers;          /* at t_ns */
    int64_t limit, inflight;  /* means over the ticks */
    uint64_t served, refused;
    int64_t goodput_permille; /* of the servers at t_ns */
    int64_t p99_ns;           /* of the requests that ended in it; 0 none */
} svc_point;

/* Fills pts[0 .. r->npts) from r. */
void svc_points(const svc_params *p, const svc_result *r, svc_point *pts);

/* The plot: per estimator, the limit, in flight, goodput and p99 over time.
 * Returns 0, or -1 (a stdio error, or no memory). Every result has the same points. */
int svc_write_svg(FILE *f, const svc_params *p, const svc_result *r, size_t nr,
                  const char *title);

#endif
