/*
 * hist.h: a log-linear latency histogram in the manner of HdrHistogram:
 * exact below 128 ns, then 64 buckets per power of two, so that any
 * recorded value is reported within 1/64 (1.6 %) of itself, from
 * nanoseconds to centuries, in 30 KiB. Recording is an increment; two
 * histograms merge by adding their counts (one per bench thread, merged at
 * the end).
 */
#ifndef SLUICE_CLI_HIST_H
#define SLUICE_CLI_HIST_H

#include <stdint.h>

#define HIST_SUB_BITS 7 /* values below 2^7 are exact; above, 2^6 buckets per octave */
#define HIST_BUCKETS ((64 - HIST_SUB_BITS + 1) * (1 << (HIST_SUB_BITS - 1)) + (1 << (HIST_SUB_BITS - 1)))

typedef struct cli_hist {
    uint64_t count[HIST_BUCKETS];
    uint64_t total;
    uint64_t min, max; /* exact */
} cli_hist;

void hist_init(cli_hist *h);
/* The bucket of value v. */
unsigned hist_index(uint64_t v);
/* The largest value that falls in bucket i. */
uint64_t hist_upper(unsigned i);
void hist_record(cli_hist *h, uint64_t v);
/* Adds src's counts into dst. */
void hist_merge(cli_hist *dst, const cli_hist *src);
/*
 * The value at percentile permyriad/10000 (5000 = p50, 9990 = p99.9,
 * 10000 = max): the upper end of the bucket holding the nearest-rank
 * sample, never above the largest value recorded. 0 when empty.
 */
uint64_t hist_percentile(const cli_hist *h, unsigned permyriad);

#endif
