/*
 * service.c: the service model behind `sluice simulate --service` (see
 * service.h): C servers, a queue, Poisson arrivals and an adaptive
 * estimator as the admission limit, on a virtual clock.
 *
 * The event loop takes, at each step, the earliest of three things: the
 * next arrival, the next end of service (a binary heap of the busy
 * servers) and the next 10 ms tick of the traces. Floating point appears
 * only in drawing the exponential gaps between arrivals; every time is an
 * integer number of nanoseconds.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/service.h"

#define SETTLE_MAX_NS (2 * SVC_NS_PER_SEC)

int64_t svc_run_end(const svc_params *p)
{
    int64_t end = 0;
    for (int i = 0; i < p->nsteps; i++)
        end += p->steps[i].dur_ns; /* the caller keeps the total <= SVC_RUN_MAX_NS */
    return end;
}

double svc_expected_arrivals(const svc_params *p)
{
    double n = 0;
    for (int i = 0; i < p->nsteps; i++)
        n += (double)p->steps[i].load_permille / 1000.0 * (double)p->capacity *
             (double)p->steps[i].dur_ns / (double)p->service_ns;
    return n;
}

int svc_segments(const svc_params *p, svc_segment *seg)
{
    int n = 0;
    int64_t t = 0, half = p->halve_at_ns;
    for (int i = 0; i < p->nsteps; i++) {
        int64_t from = t, to = t + p->steps[i].dur_ns;
        t = to;
        int64_t cuts[2] = {to, to};
        if (half > from && half < to)
            cuts[0] = half;
        for (int k = 0; k < 2; k++) {
            if (cuts[k] <= from)
                continue;
            svc_segment *s = &seg[n++];
            memset(s, 0, sizeof *s);
            s->from = from;
            s->to = cuts[k];
            s->load_permille = p->steps[i].load_permille;
            s->servers = half >= 0 && from >= half ? p->capacity / 2 : p->capacity;
            /* Figures after 2 s, or after 2/5 of a shorter segment. */
            int64_t settle = (s->to - s->from) * 2 / 5;
            s->win_from = s->from + (settle < SETTLE_MAX_NS ? settle : SETTLE_MAX_NS);
            from = cuts[k];
        }
    }
    return n;
}

int svc_config(sl_adapt_kind kind, const svc_params *p, sl_adapt_config *c)
{
    int rc = sl_adapt_config_default(kind, c);
    if (rc != SL_OK)
        return rc;
    c->min_limit = p->capacity >= 8 ? 4 : 1;
    c->max_limit = p->capacity * 25 > 20 ? p->capacity * 25 : 20;
    if (c->max_limit > SL_ADAPT_LIMIT_MAX)
        c->max_limit = SL_ADAPT_LIMIT_MAX;
    c->initial_limit = 20;
    if (kind == SL_ADAPT_VEGAS)
        c->smoothing_permille = 50; /* at its default, 1000, it swings widely */
    if (kind == SL_ADAPT_AIMD)
        c->timeout_ns = p->service_ns * 15 / 10; /* its loss signal: 1.5 x S */
    if (kind == SL_ADAPT_ANCHORED)
        c->probe_interval_ns = 5 * SVC_NS_PER_SEC; /* probes under load, within a run */
    sl_adapt a;
    return sl_adapt_init(&a, c);
}

void svc_result_free(svc_result *r)
{
    free(r->t_limit);
    free(r->t_inflight);
    free(r->t_served);
    free(r->t_refused);
    free(r->pt_hist);
    free(r->seg_hist);
    memset(r, 0, sizeof *r);
}

typedef struct svc_req {
    int64_t arrive;
    int64_t inflight; /* at its admission, itself included */
    int64_t finish;
} svc_req;

/* The busy servers: a binary min-heap on finish. */
static void heap_push(svc_req *h, int64_t *n, svc_req v)
{
    int64_t i = (*n)++;
    while (i > 0) {
        int64_t up = (i - 1) / 2;
        if (h[up].finish <= v.finish)
            break;
        h[i] = h[up];
        i = up;
    }
    h[i] = v;
}

static svc_req heap_pop(svc_req *h, int64_t *n)
{
    svc_req top = h[0], last = h[--*n];
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1].finish < h[c].finish)
            c++;
        if (last.finish <= h[c].finish)
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0)
        h[i] = last;
    return top;
}

/* The exponential gap before the next arrival at load_permille. */
static int64_t next_gap(sim_rng *rng, const svc_params *p, int64_t load_permille)
{
    double mean = (double)p->service_ns * 1000.0 / ((double)load_permille * (double)p->capacity);
    return (int64_t)llround(-log(sim_rng_unit(rng)) * mean);
}

int svc_run(const svc_params *p, sl_adapt_kind kind, svc_result *r, char *errbuf, size_t errcap)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->follow_ns = -1;
    int rc = svc_config(kind, p, &r->cfg);
    sl_adapt a;
    if (rc != SL_OK || sl_adapt_init(&a, &r->cfg) != SL_OK) {
        snprintf(errbuf, errcap, "%s: %s", sl_adapt_kind_name(kind), sl_strerror(rc));
        return -1;
    }
    r->nseg = svc_segments(p, r->seg);
    int64_t end = svc_run_end(p);
    r->ntick = (size_t)((end + SVC_TICK_NS - 1) / SVC_TICK_NS);
    r->t_limit = calloc(r->ntick, sizeof *r->t_limit);
    r->t_inflight = calloc(r->ntick, sizeof *r->t_inflight);
    r->t_served = calloc(r->ntick, sizeof *r->t_served);
    r->t_refused = calloc(r->ntick, sizeof *r->t_refused);
    r->pt_ticks = (r->ntick + SVC_POINTS_MAX - 1) / SVC_POINTS_MAX;
    r->npts = (r->ntick + r->pt_ticks - 1) / r->pt_ticks;
    r->pt_hist = malloc(r->npts * sizeof *r->pt_hist);
    r->seg_hist = malloc(SVC_SEGMENTS_MAX * sizeof *r->seg_hist);
    /* In flight never exceeds the limit, so neither the queue nor the
     * servers hold more than max_limit. */
    size_t qcap = (size_t)r->cfg.max_limit + 1;
    svc_req *q = malloc(qcap * sizeof *q);
    svc_req *busy = malloc((size_t)p->capacity * sizeof *busy);
    if (!r->t_limit || !r->t_inflight || !r->t_served || !r->t_refused || !r->pt_hist ||
        !r->seg_hist || !q || !busy) {
        free(q);
        free(busy);
        snprintf(errbuf, errcap, "out of memory");
        return -1;
    }

    for (size_t i = 0; i < r->npts; i++)
        hist_init(&r->pt_hist[i]);
    for (int i = 0; i < SVC_SEGMENTS_MAX; i++)
        hist_init(&r->seg_hist[i]);
    sim_rng rng;
    sim_rng_seed(&rng, p->seed);
    int64_t nbusy = 0, inflight = 0;
    size_t qh = 0, qn = 0;
    int si = 0; /* the segment of now */
    int64_t next_arrival = next_gap(&rng, p, r->seg[0].load_permille), next_tick = 0;
    int64_t lo_svc = p->service_ns * (1000 - p->spread_permille) / 1000;
    int64_t hi_svc = p->service_ns * (1000 + p->spread_permille) / 1000;
    int status = 0;
    for (;;) {
        int64_t t_fin = nbusy > 0 ? busy[0].finish : INT64_MAX;
        int64_t t = next_arrival < t_fin ? next_arrival : t_fin;
        if (next_tick <= t)
            t = next_tick;
        if (t >= end)
            break;
        while (t >= r->seg[si].to)
            si++;
        svc_segment *sg = &r->seg[si];
        bool in_win = t >= sg->win_from;
        size_t tick = (size_t)(t / SVC_TICK_NS);

        if (t == next_tick) {
            r->t_limit[tick] = sl_adapt_limit(&a);
            r->t_inflight[tick] = inflight;
            next_tick += SVC_TICK_NS;
        } else if (t == t_fin) {
            svc_req d = heap_pop(busy, &nbusy);
            inflight--;
            int64_t rtt = t - d.arrive;
            if (rtt < 1)
                rtt = 1;
            if (sl_adapt_sample(&a, t, rtt, d.inflight, SL_ADAPT_SUCCESS) != SL_OK) {
                snprintf(errbuf, errcap, "%s: a sample failed at %lld ns",
                         sl_adapt_kind_name(kind), (long long)t);
                status = -1;
                break;
            }
            r->t_served[tick]++;
            hist_record(&r->pt_hist[tick / r->pt_ticks], (uint64_t)rtt);
            if (in_win) {
                sg->served++;
                hist_record(&r->seg_hist[si], (uint64_t)rtt);
            }
        } else {
            if (in_win)
                sg->offered++;
            if (inflight < sl_adapt_limit(&a)) {
                inflight++;
                q[(qh + qn++) % qcap] = (svc_req){.arrive = t, .inflight = inflight};
            } else {
                r->t_refused[tick]++;
                if (in_win)
                    sg->refused++;
            }
            next_arrival = t + next_gap(&rng, p, sg->load_permille);
        }
        /* Free servers take from the queue; after the halving, the
         * servers past the new count finish their request and stop. */
        while (qn > 0 && nbusy < sg->servers) {
            svc_req d = q[qh];
            qh = (qh + 1) % qcap;
            qn--;
            d.finish = t + lo_svc + (int64_t)sim_rng_below(&rng, (uint64_t)(hi_svc - lo_svc + 1));
            heap_push(busy, &nbusy, d);
        }
    }
    free(q);
    free(busy);
    if (status != 0)
        return status;

    /* The figures of each segment over its window. */
    for (int i = 0; i < r->nseg; i++) {
        svc_segment *sg = &r->seg[i];
        int64_t sum_l = 0, sum_f = 0, n = 0;
        for (size_t k = (size_t)((sg->win_from + SVC_TICK_NS - 1) / SVC_TICK_NS);
             k < r->ntick && (int64_t)k * SVC_TICK_NS < sg->to; k++) {
            sum_l += r->t_limit[k];
            sum_f += r->t_inflight[k];
            n++;
        }
        sg->limit_mean = n ? sum_l / n : 0;
        sg->inflight_mean = n ? sum_f / n : 0;
        int64_t span = sg->to - sg->win_from;
        /* served / (span * servers / S), per mille; span * servers fits:
         * both are bounded (an hour, SVC_CAPACITY_MAX). */
        sg->goodput_permille =
            span > 0 ? (int64_t)((__int128)sg->served * 1000 * p->service_ns /
                                 ((__int128)span * sg->servers))
                     : 0;
        sg->p99_ns = (int64_t)hist_percentile(&r->seg_hist[i], 9900);
    }
    /* Following the halving: the limit settled before it, and the time
     * until the trace first reads 2/3 of that (a third above half). */
    if (p->halve_at_ns >= 0) {
        for (int i = 0; i < r->nseg; i++)
            if (r->seg[i].to == p->halve_at_ns)
                r->settled_limit = r->seg[i].limit_mean;
        int64_t at = r->settled_limit * 2 / 3;
        for (size_t k = (size_t)((p->halve_at_ns + SVC_TICK_NS - 1) / SVC_TICK_NS); k < r->ntick;
             k++)
            if (r->t_limit[k] <= at) {
                r->follow_ns = (int64_t)k * SVC_TICK_NS - p->halve_at_ns;
                break;
            }
    }
    return 0;
}

void svc_points(const svc_params *p, const svc_result *r, svc_point *pts)
{
    size_t ticks = r->pt_ticks;
    for (size_t i = 0; i < r->npts; i++) {
        svc_point *pt = &pts[i];
        memset(pt, 0, sizeof *pt);
        size_t k0 = i * ticks, k1 = k0 + ticks < r->ntick ? k0 + ticks : r->ntick;
        pt->t_ns = (int64_t)k0 * SVC_TICK_NS;
        pt->span_ns = (int64_t)(k1 - k0) * SVC_TICK_NS;
        pt->servers = p->halve_at_ns >= 0 && pt->t_ns >= p->halve_at_ns ? p->capacity / 2
                                                                        : p->capacity;
        int64_t sl = 0, sf = 0;
        for (size_t k = k0; k < k1; k++) {
            sl += r->t_limit[k];
            sf += r->t_inflight[k];
            pt->served += r->t_served[k];
            pt->refused += r->t_refused[k];
        }
        if (k1 > k0) {
            pt->limit = sl / (int64_t)(k1 - k0);
            pt->inflight = sf / (int64_t)(k1 - k0);
            pt->goodput_permille = (int64_t)((__int128)pt->served * 1000 * p->service_ns /
                                             ((__int128)pt->span_ns * pt->servers));
        }
        pt->p99_ns = (int64_t)hist_percentile(&r->pt_hist[i], 9900);
    }
}
