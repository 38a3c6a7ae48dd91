/*
 * run.c: one algorithm over a traffic, in virtual time.
 *
 * The algorithm gets its own states (one per key of the traffic, zeroed:
 * "never seen") and sees the requests at their virtual times; the decisions
 * are sl_take()'s own, so what a result counts is exactly what a server
 * using that algorithm would have answered.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Writes a CSV field, quoted (RFC 4180) when it holds a comma or a quote:
 * trace keys may hold either. */
static void csv_field(FILE *f, const char *v)
{
    if (!strpbrk(v, ",\"")) {
        fputs(v, f);
        return;
    }
    fputc('"', f);
    for (; *v; v++) {
        if (*v == '"')
            fputc('"', f);
        fputc(*v, f);
    }
    fputc('"', f);
}

int sim_run_one(const sim_setup *s, sim_result *r, FILE *events, char *errbuf, size_t errcap)
{
    const traffic *tr = s->tr;
    size_t sz = r->state_bytes;
    if (tr->nkeys > SIM_MAX_STATE_BYTES / sz) {
        snprintf(errbuf, errcap, "%s: %zu keys of %zu bytes exceed the simulator's 1 GiB", r->name,
                 tr->nkeys, sz);
        return -1;
    }
    unsigned char *states = calloc(tr->nkeys, sz);
    sim_admit *adm = malloc((tr->n ? tr->n : 1) * sizeof *adm);
    bool shaper = r->alg == SL_LEAKY_BUCKET;
    if (shaper)
        r->delays = malloc((tr->n ? tr->n : 1) * sizeof *r->delays);
    if (!states || !adm || (shaper && !r->delays) || sim_result_alloc(s, r) != 0) {
        free(states);
        free(adm);
        snprintf(errbuf, errcap, "out of memory");
        return -1;
    }
    size_t nadm = 0;
    for (size_t i = 0; i < tr->n; i++) {
        const sim_event *e = &tr->ev[i];
        sl_decision d;
        int rc = sl_take(&r->lim, states + (size_t)e->key * sz, e->t_ns, e->cost, &d);
        if (rc != SL_OK) {
            snprintf(errbuf, errcap, "%s: request %zu: %s", r->name, i + 1, sl_strerror(rc));
            free(states);
            free(adm);
            return -1;
        }
        size_t b = sim_bucket_of(s, e->t_ns);
        r->b_offered[b]++;
        if (d.allowed) {
            r->admitted++;
            r->b_admitted[b]++;
            adm[nadm].t_ns = e->t_ns + d.delay_ns;
            adm[nadm].key = e->key;
            adm[nadm].cost = e->cost;
            nadm++;
            if (shaper)
                r->delays[r->ndelays++] = d.delay_ns;
        } else {
            r->rejected++;
            r->b_rejected[b]++;
        }
        if (events) {
            fprintf(events, "%s,%lld,", r->name, (long long)e->t_ns);
            csv_field(events, tr->keys[e->key]);
            fprintf(events, ",%lld,%d,%lld\n", (long long)e->cost, d.allowed ? 1 : 0,
                    (long long)d.delay_ns);
        }
    }
    free(states);
    if (shaper)
        qsort(r->delays, r->ndelays, sizeof *r->delays, cmp_i64);
    int rc = sim_finish(s, r, adm, nadm);
    free(adm);
    if (rc != 0)
        snprintf(errbuf, errcap, "out of memory");
    return rc;
}
