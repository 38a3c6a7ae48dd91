/*
 * hist.c: the log-linear histogram (see hist.h).
 *
 * Layout: a value v whose highest set bit is m keeps its top HIST_SUB_BITS
 * bits. Below 2^SUB (m < SUB) the bucket is v itself. Above, with
 * shift = m - SUB + 1, top = v >> shift lies in [2^(SUB-1), 2^SUB), and the
 * bucket is shift * 2^(SUB-1) + top: each octave adds 2^(SUB-1) buckets,
 * contiguous with the previous one.
 */
#include <string.h>

#include "cli/hist.h"

#define HALF (1u << (HIST_SUB_BITS - 1))

void hist_init(cli_hist *h)
{
    memset(h, 0, sizeof *h);
    h->min = UINT64_MAX;
}

unsigned hist_index(uint64_t v)
{
    if (v < (UINT64_C(1) << HIST_SUB_BITS))
        return (unsigned)v;
    unsigned m = 63u - (unsigned)__builtin_clzll(v);
    unsigned shift = m - HIST_SUB_BITS + 1;
    return shift * HALF + (unsigned)(v >> shift);
}

uint64_t hist_upper(unsigned i)
{
    if (i < (1u << HIST_SUB_BITS))
        return i;
    unsigned shift = i / HALF - 1;
    uint64_t top = i - shift * HALF;
    /* For the very last bucket (top + 1) << shift is 2^64, which wraps to 0
     * in unsigned arithmetic: minus 1 gives UINT64_MAX, as it should. */
    return ((top + 1) << shift) - 1;
}

void hist_record(cli_hist *h, uint64_t v)
{
    h->count[hist_index(v)]++;
    h->total++;
    if (v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
}

void hist_merge(cli_hist *dst, const cli_hist *src)
{
    for (unsigned i = 0; i < HIST_BUCKETS; i++)
        dst->count[i] += src->count[i];
    dst->total += src->total;
    if (src->min < dst->min)
        dst->min = src->min;
    if (src->max > dst->max)
        dst->max = src->max;
}

uint64_t hist_percentile(const cli_hist *h, unsigned permyriad)
{
    if (h->total == 0)
        return 0;
    if (permyriad >= 10000)
        return h->max;
    /* Nearest rank: the ceil(p * total)-th smallest sample, at least the first. */
    uint64_t rank = (uint64_t)(((unsigned __int128)h->total * permyriad + 9999) / 10000);
    if (rank == 0)
        rank = 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        seen += h->count[i];
        if (seen >= rank) {
            uint64_t u = hist_upper(i);
            return u < h->max ? u : h->max;
        }
    }
    return h->max;
}
