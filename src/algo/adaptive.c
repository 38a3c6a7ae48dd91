/*
 * adaptive.c: adaptive concurrency limit estimators (AIMD, Vegas, Gradient2
 * and sluice's anchored gradient), as sluice.h describes them.
 *
 * Pure: no clock, allocation, lock or I/O; `now` and every sample come from
 * the caller. The limit is kept in 1/SL_ADAPT_ONE units, so that the small
 * steps of a large limit (AIMD's 1/limit, a smoothed gradient) are not lost
 * to rounding; times are nanoseconds; ratios per mille.
 *
 * Magnitudes, which bound every product below: a limit is at most
 * SL_ADAPT_LIMIT_MAX * SL_ADAPT_ONE = 2^40; a latency at most SL_SPAN_MAX
 * (2^61 - 1); a ratio at most 100000 per mille. A product of a limit and a
 * ratio fits in 64 bits; a product with a latency goes through 128 bits.
 */
#include <string.h>

#include "common/arith.h"
#include "sluice.h"

#define ONE SL_ADAPT_ONE

/* Samples over which Gradient2's long RTT is a plain average before it
 * becomes an exponential one. */
#define GRADIENT2_WARMUP 10
/* A probe that has seen this many samples per one it wanted ends. */
#define PROBE_PATIENCE 16

static const char *const sl_adapt_names[SL_ADAPT_KIND_COUNT] = {
    [SL_ADAPT_AIMD] = "aimd",
    [SL_ADAPT_VEGAS] = "vegas",
    [SL_ADAPT_GRADIENT2] = "gradient2",
    [SL_ADAPT_ANCHORED] = "anchored",
};

const char *sl_adapt_kind_name(sl_adapt_kind kind)
{
    if ((unsigned)kind >= SL_ADAPT_KIND_COUNT)
        return NULL;
    return sl_adapt_names[kind];
}

sl_status sl_adapt_config_default(sl_adapt_kind kind, sl_adapt_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    if ((unsigned)kind >= SL_ADAPT_KIND_COUNT)
        return SL_ERR_ALGORITHM;
    cfg->kind = kind;
    switch (kind) {
    case SL_ADAPT_AIMD:
        cfg->initial_limit = 20;
        cfg->min_limit = 20;
        cfg->max_limit = 200;
        cfg->backoff_permille = 900;
        cfg->timeout_ns = INT64_C(5000000000);
        break;
    case SL_ADAPT_VEGAS:
        cfg->initial_limit = 20;
        cfg->min_limit = 1;
        cfg->max_limit = 1000;
        cfg->smoothing_permille = 1000;
        cfg->probe_multiplier = 30;
        break;
    case SL_ADAPT_GRADIENT2:
        cfg->initial_limit = 20;
        cfg->min_limit = 20;
        cfg->max_limit = 200;
        cfg->smoothing_permille = 200;
        cfg->long_window = 600;
        cfg->tolerance_permille = 1500;
        cfg->queue_size = 4;
        break;
    case SL_ADAPT_ANCHORED:
    default:
        cfg->initial_limit = 20;
        cfg->min_limit = 4;
        cfg->max_limit = 1000;
        cfg->backoff_permille = 900;
        cfg->smoothing_permille = 500;
        cfg->queue_permille = 250;
        cfg->short_window = 16;
        cfg->probe_interval_ns = INT64_C(30000000000);
        cfg->probe_samples = 16;
        break;
    }
    return SL_OK;
}

static bool in_range(int64_t v, int64_t lo, int64_t hi)
{
    return v >= lo && v <= hi;
}

sl_status sl_adapt_init(sl_adapt *a, const sl_adapt_config *cfg)
{
    if ((unsigned)cfg->kind >= SL_ADAPT_KIND_COUNT)
        return SL_ERR_ALGORITHM;
    if (!in_range(cfg->min_limit, 1, SL_ADAPT_LIMIT_MAX) ||
        !in_range(cfg->max_limit, cfg->min_limit, SL_ADAPT_LIMIT_MAX) ||
        !in_range(cfg->initial_limit, cfg->min_limit, cfg->max_limit))
        return SL_ERR_LIMIT;
    bool ok = true;
    switch (cfg->kind) {
    case SL_ADAPT_AIMD:
        ok = in_range(cfg->backoff_permille, 500, 999) && in_range(cfg->timeout_ns, 1, SL_SPAN_MAX);
        break;
    case SL_ADAPT_VEGAS:
        ok = in_range(cfg->smoothing_permille, 1, 1000) &&
             in_range(cfg->probe_multiplier, 1, SL_ADAPT_LIMIT_MAX);
        break;
    case SL_ADAPT_GRADIENT2:
        ok = in_range(cfg->smoothing_permille, 1, 1000) &&
             in_range(cfg->long_window, GRADIENT2_WARMUP, 1000000) &&
             in_range(cfg->tolerance_permille, 1000, 100000) &&
             in_range(cfg->queue_size, 0, SL_ADAPT_LIMIT_MAX);
        break;
    case SL_ADAPT_ANCHORED:
    default:
        ok = in_range(cfg->backoff_permille, 500, 999) &&
             in_range(cfg->smoothing_permille, 1, 1000) &&
             in_range(cfg->queue_permille, 1, 10000) && in_range(cfg->short_window, 1, 1000000) &&
             in_range(cfg->probe_interval_ns, 1, SL_SPAN_MAX) &&
             in_range(cfg->probe_samples, 1, 1000000);
        break;
    }
    if (!ok)
        return SL_ERR_ARGUMENT;
    memset(a, 0, sizeof *a);
    a->cfg = *cfg;
    a->limit = cfg->initial_limit * ONE;
    a->cut_at = -1;
    a->probe_next = 0; /* the anchored estimator probes on its first sample */
    return SL_OK;
}

int64_t sl_adapt_limit(const sl_adapt *a)
{
    int64_t u = a->limit / ONE;
    return u < 1 ? 1 : u;
}

static int64_t clamp_limit(const sl_adapt *a, int64_t l)
{
    int64_t lo = a->cfg.min_limit * ONE, hi = a->cfg.max_limit * ONE;
    return l < lo ? lo : l > hi ? hi : l;
}

/* Whether a request that started with `inflight` in flight used at least
 * half the limit (in whole units): below that the service was not the
 * bottleneck, and its latency says nothing about a larger limit. */
static bool busy(const sl_adapt *a, int64_t inflight)
{
    if (inflight > SL_ADAPT_LIMIT_MAX)
        return true;
    return inflight * 2 >= sl_adapt_limit(a);
}

/* floor(a * b / (c * d)) for a, b >= 0 and c, d > 0, each below 2^63,
 * with a * b and c * d below 2^126; saturates at INT64_MAX. */
static int64_t muldiv2(int64_t a, int64_t b, int64_t c, int64_t d)
{
    sl_u128 n = (sl_u128)(uint64_t)a * (uint64_t)b;
    sl_u128 m = (sl_u128)(uint64_t)c * (uint64_t)d;
    return sl_sat64(n / m);
}

/* Cuts the limit by the backoff for a drop of a request that started at
 * now - rtt, unless it started before the last cut: that request was sent
 * under the old limit, and its drop is the same congestion seen again. */
static void cut_once(sl_adapt *a, int64_t now, int64_t rtt)
{
    if (a->cut_at >= 0 && now - rtt < a->cut_at)
        return;
    a->limit = clamp_limit(a, a->limit / 1000 * a->cfg.backoff_permille +
                                  a->limit % 1000 * a->cfg.backoff_permille / 1000);
    a->cut_at = now;
}

static void aimd_sample(sl_adapt *a, int64_t now, int64_t rtt, int64_t inflight,
                        sl_adapt_outcome outcome)
{
    if (outcome == SL_ADAPT_DROPPED || rtt > a->cfg.timeout_ns)
        cut_once(a, now, rtt);
    else if (busy(a, inflight))
        a->limit = clamp_limit(a, a->limit + ONE * ONE / a->limit);
}

/* floor(log10(units)), at least 1. */
static int64_t log10_units(int64_t limit)
{
    int64_t u = limit / ONE, r = 0;
    while (u >= 10) {
        u /= 10;
        r++;
    }
    return r < 1 ? 1 : r;
}

static void vegas_sample(sl_adapt *a, int64_t rtt, int64_t inflight, sl_adapt_outcome outcome)
{
    a->samples++;
    if (a->samples >= a->cfg.probe_multiplier * sl_adapt_limit(a)) {
        a->samples = 0;
        a->rtt_base = rtt;
        return;
    }
    if (a->rtt_base == 0 || rtt < a->rtt_base) {
        a->rtt_base = rtt;
        return;
    }
    int64_t l = a->limit, lg = log10_units(l), next;
    if (outcome == SL_ADAPT_DROPPED) {
        next = l - lg * ONE;
    } else if (!busy(a, inflight)) {
        return;
    } else {
        /* The requests beyond what the no-load RTT carries: whole units,
         * rounded up. */
        int64_t q = sl_muldiv_ceil(l, rtt - a->rtt_base, rtt);
        q = q / ONE + (q % ONE != 0);
        if (q <= lg)
            next = l + 6 * lg * ONE;
        else if (q < 3 * lg)
            next = l + lg * ONE;
        else if (q > 6 * lg)
            next = l - lg * ONE;
        else
            return;
    }
    next = next < ONE ? ONE : next > a->cfg.max_limit * ONE ? a->cfg.max_limit * ONE : next;
    int64_t s = a->cfg.smoothing_permille;
    a->limit = clamp_limit(a, (l * (1000 - s) + next * s) / 1000);
}

static void gradient2_sample(sl_adapt *a, int64_t rtt, int64_t inflight)
{
    int64_t n = a->samples, w = a->cfg.long_window;
    if (n < GRADIENT2_WARMUP) {
        /* The plain average of the first samples: base + (rtt - base)/(n+1). */
        a->rtt_base += (rtt - a->rtt_base) / (n + 1);
        a->samples = n + 1;
    } else {
        /* An exponential average with factor 2 / (window + 1). */
        a->rtt_base += (rtt - a->rtt_base) * 2 / (w + 1);
    }
    if (a->rtt_base < 1)
        a->rtt_base = 1;
    int64_t lng = a->rtt_base;
    if (lng / 2 > rtt)
        a->rtt_base = lng / 100 * 95 + lng % 100 * 95 / 100;
    if (!busy(a, inflight))
        return;
    int64_t g = muldiv2(lng, a->cfg.tolerance_permille * ONE, rtt, 1000);
    g = g < ONE / 2 ? ONE / 2 : g > ONE ? ONE : g;
    int64_t l = a->limit;
    int64_t next = l / ONE * g + l % ONE * g / ONE + a->cfg.queue_size * ONE;
    int64_t s = a->cfg.smoothing_permille;
    a->limit = clamp_limit(a, (l * (1000 - s) + next * s) / 1000);
}

static void probe_start(sl_adapt *a)
{
    a->probe_saved = a->limit;
    a->limit = a->cfg.min_limit * ONE;
    a->probe_got = 0;
    a->probe_sum = 0;
    a->samples = 0;
}

static void probe_end(sl_adapt *a, int64_t now)
{
    if (a->probe_got > 0)
        a->rtt_base = a->probe_sum;
    else if (a->rtt_base == 0)
        a->rtt_base = a->rtt_short; /* nothing qualified: the best guess at hand */
    a->rtt_short = a->rtt_base;
    a->limit = a->probe_saved;
    a->probe_saved = 0;
    /* With no baseline yet (every sample was a drop), the next sample
     * probes again. */
    a->probe_next = a->rtt_base == 0 ? now : sl_add_clamp(now, a->cfg.probe_interval_ns, SL_TIME_MAX);
}

static void anchored_sample(sl_adapt *a, int64_t now, int64_t rtt, int64_t inflight,
                            sl_adapt_outcome outcome)
{
    const sl_adapt_config *c = &a->cfg;
    if (a->probe_saved == 0 && now >= a->probe_next)
        probe_start(a);
    if (a->probe_saved != 0) {
        a->samples++;
        if (outcome == SL_ADAPT_SUCCESS) {
            if (a->rtt_short == 0)
                a->rtt_short = rtt;
            else
                a->rtt_short += (rtt - a->rtt_short) / c->short_window;
            if (inflight <= c->min_limit) {
                /* probe_sum keeps the running mean, which cannot overflow. */
                a->probe_got++;
                a->probe_sum += (rtt - a->probe_sum) / a->probe_got;
            }
        }
        if (a->probe_got >= c->probe_samples || a->samples >= PROBE_PATIENCE * c->probe_samples)
            probe_end(a, now);
        return;
    }
    if (outcome == SL_ADAPT_DROPPED) {
        /* A shed answers fast: its latency measures nothing. */
        cut_once(a, now, rtt);
        return;
    }
    a->rtt_short += (rtt - a->rtt_short) / c->short_window;
    if (a->rtt_short < 1)
        a->rtt_short = 1;
    if (a->rtt_short < a->rtt_base)
        a->rtt_base = a->rtt_short;
    int64_t target = sl_muldiv_floor(a->rtt_base, 1000 + c->queue_permille, 1000);
    int64_t gmax = ONE * (1000 + c->queue_permille) / 1000;
    int64_t g = muldiv2(target, ONE, a->rtt_short, 1);
    g = g < ONE / 2 ? ONE / 2 : g > gmax ? gmax : g;
    if (g > ONE && !busy(a, inflight))
        return;
    int64_t l = a->limit;
    int64_t next = l / ONE * g + l % ONE * g / ONE;
    /* A step of smoothing of the distance per limit's worth of samples. */
    int64_t step = (next - l) * c->smoothing_permille / 1000 / sl_adapt_limit(a);
    a->limit = clamp_limit(a, l + step);
}

sl_status sl_adapt_sample(sl_adapt *a, int64_t now, int64_t rtt_ns, int64_t inflight,
                          sl_adapt_outcome outcome)
{
    if (now < 0 || now > SL_TIME_MAX)
        return SL_ERR_TIME;
    if (rtt_ns < 1 || rtt_ns > SL_SPAN_MAX || inflight < 1 || (unsigned)outcome > SL_ADAPT_IGNORED)
        return SL_ERR_ARGUMENT;
    if (outcome == SL_ADAPT_IGNORED)
        return SL_OK;
    switch (a->cfg.kind) {
    case SL_ADAPT_AIMD:
        aimd_sample(a, now, rtt_ns, inflight, outcome);
        break;
    case SL_ADAPT_VEGAS:
        vegas_sample(a, rtt_ns, inflight, outcome);
        break;
    case SL_ADAPT_GRADIENT2:
        gradient2_sample(a, rtt_ns, inflight);
        break;
    case SL_ADAPT_ANCHORED:
        anchored_sample(a, now, rtt_ns, inflight, outcome);
        break;
    default:
        return SL_ERR_ALGORITHM;
    }
    return SL_OK;
}
