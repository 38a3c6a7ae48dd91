/*
 * sim_result.c: a simulation's results, kept apart from the runs so that
 * the run of one algorithm (run.c) and the CLI's fleet model (cli/fleet.c)
 * both build on them without one calling into the other: the time
 * buckets of the plot and the CSV, and the figures taken from the
 * admitted requests once a run ends.
 */
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

size_t sim_bucket_of(const sim_setup *s, int64_t t_ns)
{
    size_t b = (size_t)(t_ns / s->bucket_ns);
    return b < s->nbuckets ? b : s->nbuckets - 1;
}

int sim_result_alloc(const sim_setup *s, sim_result *r)
{
    r->b_offered = calloc(s->nbuckets, sizeof *r->b_offered);
    r->b_admitted = calloc(s->nbuckets, sizeof *r->b_admitted);
    r->b_rejected = calloc(s->nbuckets, sizeof *r->b_rejected);
    r->b_window = calloc(s->nbuckets, sizeof *r->b_window);
    return r->b_offered && r->b_admitted && r->b_rejected && r->b_window ? 0 : -1;
}

void sim_result_free(sim_result *r)
{
    free(r->delays);
    free(r->b_offered);
    free(r->b_admitted);
    free(r->b_rejected);
    free(r->b_window);
    memset(r, 0, sizeof *r);
}

static int cmp_admit_key_time(const void *a, const void *b)
{
    const sim_admit *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return (x->t_ns > y->t_ns) - (x->t_ns < y->t_ns);
}

static int cmp_admit_time(const void *a, const void *b)
{
    const sim_admit *x = a, *y = b;
    return (x->t_ns > y->t_ns) - (x->t_ns < y->t_ns);
}

int sim_finish(const sim_setup *s, sim_result *r, sim_admit *adm, size_t nadm)
{
    const int64_t P = s->period_ns;
    /* The most in any window [t, t + P) of one key: such a window holding
     * the most can always start at an admitted time, so two pointers over
     * each key's sorted times find it exactly. */
    qsort(adm, nadm, sizeof *adm, cmp_admit_key_time);
    int64_t best = 0, sum = 0;
    size_t j = 0;
    for (size_t i = 0; i < nadm; i++) {
        if (j < i) {
            j = i;
            sum = 0;
        }
        if (i > 0 && adm[i].key != adm[i - 1].key) {
            j = i;
            sum = 0;
        }
        while (j < nadm && adm[j].key == adm[i].key && adm[j].t_ns - adm[i].t_ns < P)
            sum += adm[j++].cost;
        if (sum > best)
            best = sum;
        sum -= adm[i].cost;
    }
    r->max_in_period = best;

    /* The plot's line: units admitted (all keys) in [end - P, end) at each
     * bucket's end. */
    qsort(adm, nadm, sizeof *adm, cmp_admit_time);
    size_t lo = 0, hi = 0;
    int64_t win = 0;
    for (size_t b = 0; b < s->nbuckets; b++) {
        int64_t end = (int64_t)(b + 1) * s->bucket_ns;
        while (hi < nadm && adm[hi].t_ns < end)
            win += adm[hi++].cost;
        while (lo < hi && adm[lo].t_ns < end - P)
            win -= adm[lo++].cost;
        r->b_window[b] = win;
    }
    return 0;
}
