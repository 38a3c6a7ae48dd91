/*
 * traffic.c: the traffic generators (the CLI's trace file reader, cli/trace.c,
 * fills a traffic through traffic_push).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/rng.h"
#include "sim/traffic.h"

static const char *const kind_names[] = {"steady", "bursty", "poisson", "boundary", "ramp", "file"};

traffic_kind traffic_kind_parse(const char *name)
{
    for (int k = TRAFFIC_STEADY; k < TRAFFIC_FILE; k++)
        if (strcmp(name, kind_names[k]) == 0)
            return (traffic_kind)k;
    return TRAFFIC_FILE;
}

const char *traffic_kind_name(traffic_kind k)
{
    return kind_names[k];
}

void traffic_free(traffic *t)
{
    free(t->ev);
    for (size_t i = 0; i < t->nkeys; i++)
        free(t->keys[i]);
    free(t->keys);
    memset(t, 0, sizeof *t);
}

int traffic_push(traffic *t, int64_t t_ns, uint32_t key, int64_t cost, char *errbuf,
                 size_t errcap)
{
    if (t->max_events > 0 && t->n >= t->max_events) {
        snprintf(errbuf, errcap, "the traffic has more than %zu requests", t->max_events);
        return -1;
    }
    if (t->n == t->cap) {
        if (t->cap >= TRAFFIC_MAX_EVENTS) {
            snprintf(errbuf, errcap,
                     "the traffic has more than %u requests: lower --rate, --duration or --limit",
                     TRAFFIC_MAX_EVENTS);
            return -1;
        }
        size_t nc = t->cap ? t->cap * 2 : 4096;
        if (nc > TRAFFIC_MAX_EVENTS)
            nc = TRAFFIC_MAX_EVENTS;
        sim_event *ne = realloc(t->ev, nc * sizeof *ne);
        if (!ne) {
            snprintf(errbuf, errcap, "out of memory for %zu requests", nc);
            return -1;
        }
        t->ev = ne;
        t->cap = nc;
    }
    t->ev[t->n].t_ns = t_ns;
    t->ev[t->n].key = key;
    t->ev[t->n].cost = cost;
    t->n++;
    return 0;
}

/* The generated kinds use one key, "default". */
static int one_key(traffic *t, char *errbuf, size_t errcap)
{
    t->keys = malloc(sizeof *t->keys);
    if (t->keys)
        t->keys[0] = strdup("default");
    if (!t->keys || !t->keys[0]) {
        snprintf(errbuf, errcap, "out of memory");
        return -1;
    }
    t->nkeys = t->keys_cap = 1;
    return 0;
}

/* ---- generators ---- */

int traffic_build(traffic *t, const traffic_params *p, char *errbuf, size_t errcap)
{
    if (p->kind == TRAFFIC_FILE) {
        snprintf(errbuf, errcap, "a trace file is not generated: read it (cli/trace.h)");
        return -1;
    }
    if (one_key(t, errbuf, errcap) != 0)
        return -1;
    const int64_t D = p->duration_ns;
    const double gap = 1e9 / p->rate; /* ns between requests at the rate */
    t->end_ns = D;
    switch (p->kind) {
    case TRAFFIC_STEADY:
        for (uint64_t i = 0;; i++) {
            double x = (double)i * gap;
            if (x >= (double)D)
                break;
            if (traffic_push(t, (int64_t)x, 0, 1, errbuf, errcap) != 0)
                return -1;
        }
        break;
    case TRAFFIC_BURSTY: {
        /* Every period: on for the first fifth at 5x the rate, then silent,
         * so that the average is the rate. */
        int64_t on = p->period_ns / 5;
        for (int64_t c = 0; c < D; c += p->period_ns) {
            for (uint64_t j = 0;; j++) {
                double x = (double)j * gap / 5;
                if (x >= (double)on || (double)c + x >= (double)D)
                    break;
                if (traffic_push(t, c + (int64_t)x, 0, 1, errbuf, errcap) != 0)
                    return -1;
            }
            if (c > SL_TIME_MAX - p->period_ns)
                break;
        }
        break;
    }
    case TRAFFIC_POISSON: {
        sim_rng r;
        sim_rng_seed(&r, p->seed);
        double x = 0;
        for (;;) {
            x += -log(sim_rng_unit(&r)) * gap;
            if (x >= (double)D)
                break;
            if (traffic_push(t, (int64_t)x, 0, 1, errbuf, errcap) != 0)
                return -1;
        }
        break;
    }
    case TRAFFIC_BOUNDARY: {
        /* At every other boundary k*period (k = 1, 3, 5, ...): `limit`
         * requests spread evenly over the twentieth of a period just before
         * it, and `limit` more over the twentieth just after. A fixed window
         * sees each half in a different window and admits both. */
        int64_t w = p->period_ns / 20;
        if (w < 1)
            w = 1;
        for (int64_t k = 1;; k += 2) {
            if (k > (SL_TIME_MAX - w) / p->period_ns)
                break;
            int64_t B = k * p->period_ns;
            if (B + w > D)
                break;
            for (int half = 0; half < 2; half++) {
                int64_t start = half ? B : B - w;
                for (int64_t j = 0; j < p->limit; j++) {
                    int64_t off = (int64_t)((__int128)j * w / p->limit);
                    if (traffic_push(t, start + off, 0, 1, errbuf, errcap) != 0)
                        return -1;
                }
            }
        }
        break;
    }
    case TRAFFIC_RAMP: {
        /* The rate rises linearly from 0 to 2x the rate over the duration:
         * r(t) = 2R t / D, so N(t) = R t^2 / D and the i-th request comes at
         * t = sqrt(i D / R); R*D requests in all, as many as steady. */
        double Ds = (double)D / 1e9;
        for (uint64_t i = 0;; i++) {
            double x = sqrt((double)i * Ds / p->rate) * 1e9;
            if (x >= (double)D)
                break;
            if (traffic_push(t, (int64_t)x, 0, 1, errbuf, errcap) != 0)
                return -1;
        }
        break;
    }
    case TRAFFIC_FILE:
        break;
    }
    return 0;
}

double traffic_expected(const traffic_params *p)
{
    if (p->kind == TRAFFIC_BOUNDARY) {
        /* Exact: 2 x limit at every odd boundary k x period with room for
         * the twentieth after it (traffic_build's loop). */
        int64_t w = p->period_ns / 20 > 0 ? p->period_ns / 20 : 1;
        if (p->period_ns <= 0 || p->duration_ns < w)
            return 0;
        int64_t kmax = (p->duration_ns - w) / p->period_ns;
        return (double)((kmax + 1) / 2) * 2.0 * (double)p->limit;
    }
    if (p->kind == TRAFFIC_BURSTY) {
        /* Each period's first fifth at 5x the rate, the last period's cut
         * at the duration: a whole burst in every period begun. */
        double g = 1e9 / p->rate / 5, on = (double)(p->period_ns / 5);
        if (p->period_ns <= 0)
            return 0;
        int64_t full = p->duration_ns / p->period_ns, rem = p->duration_ns % p->period_ns;
        double part = rem > 0 ? ceil(fmin(on, (double)rem) / g) : 0;
        return (double)full * ceil(on / g) + part;
    }
    if (p->kind == TRAFFIC_FILE)
        return 0;
    return p->rate * ((double)p->duration_ns / 1e9);
}
