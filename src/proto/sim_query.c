/*
 * sim_query.c: GET /v1/simulate's query string (sim_query.h).
 */
#include "proto/sim_query.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/duration.h"
#include "common/parse.h"
#include "proto/http.h"

enum { P_ALGORITHM, P_LIMIT, P_PERIOD, P_BURST, P_TRAFFIC, P_RATE, P_DURATION, P_SEED, P_COUNT };

static const char *const sl_sim_params[P_COUNT] = {
    "algorithm", "limit", "period", "burst", "traffic", "rate", "duration", "seed"};

/* The longest value any parameter may have: the longest algorithm name,
 * and room for a number or a duration. */
#define SL_SIM_VALUE_MAX 32

static int sl_sim_fail(char *err, size_t errcap, const char **field, const char *f,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int sl_sim_fail(char *err, size_t errcap, const char **field, const char *f,
                       const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errcap, fmt, ap);
    va_end(ap);
    *field = f;
    return -1;
}

/* A positive decimal: digits with at most one '.' among them, at most
 * 1e9. Returns whether s[0 .. n) is one, and its value. */
static bool sl_sim_rate(const char *s, size_t n, double *out)
{
    char buf[SL_SIM_VALUE_MAX + 1];
    size_t digits = 0, dots = 0;
    if (n == 0 || n > SL_SIM_VALUE_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '.')
            dots++;
        else if (s[i] >= '0' && s[i] <= '9')
            digits++;
        else
            return false;
    }
    if (digits == 0 || dots > 1)
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    double v = strtod(buf, NULL);
    if (!(v > 0) || v > 1e9 || !isfinite(v))
        return false;
    *out = v;
    return true;
}

int sl_sim_request_parse(const char *q, size_t qlen, sl_sim_request *out, char *err,
                         size_t errcap, const char **field)
{
    char val[P_COUNT][SL_SIM_VALUE_MAX + 1];
    size_t len[P_COUNT];
    bool given[P_COUNT] = {false};
    size_t pos = 0;
    sl_http_slice k, v;
    memset(out, 0, sizeof *out);
    *field = NULL;
    while (q && sl_http_query_next(q, qlen, &pos, &k, &v)) {
        char name[16];
        long nl = sl_http_percent_decode(k.ptr, k.len, name, sizeof name - 1);
        int p = -1;
        for (int i = 0; nl > 0 && i < P_COUNT; i++)
            if (strlen(sl_sim_params[i]) == (size_t)nl && memcmp(sl_sim_params[i], name, (size_t)nl) == 0)
                p = i;
        if (p < 0) {
            /* Quote the raw name, cut: it is client input. */
            char shown[25];
            size_t n = k.len < 24 ? k.len : 24;
            memcpy(shown, k.ptr, n);
            shown[n] = '\0';
            return sl_sim_fail(err, errcap, field, NULL,
                               "unknown parameter '%s' (a simulation takes algorithm, limit, "
                               "period, burst, traffic, rate, duration and seed)",
                               shown);
        }
        const char *f = sl_sim_params[p];
        long vl = sl_http_percent_decode(v.ptr, v.len, val[p], SL_SIM_VALUE_MAX);
        if (vl == SL_HTTP_BAD_ESCAPE)
            return sl_sim_fail(err, errcap, field, f, "bad %%-escape in %s", f);
        if (vl == SL_HTTP_TOO_LONG)
            return sl_sim_fail(err, errcap, field, f, "%s is longer than %d bytes", f,
                               SL_SIM_VALUE_MAX);
        if (vl == 0)
            continue; /* a blank form field: not given */
        if (given[p])
            return sl_sim_fail(err, errcap, field, f, "%s is given twice", f);
        given[p] = true;
        len[p] = (size_t)vl;
        val[p][vl] = '\0';
    }

    /* The limit. */
    out->algorithm = SL_GCRA;
    if (given[P_ALGORITHM] &&
        (sl_algorithm_parse(val[P_ALGORITHM], len[P_ALGORITHM], &out->algorithm) != SL_OK ||
         out->algorithm == SL_CONCURRENCY))
        return sl_sim_fail(err, errcap, field, "algorithm",
                           "algorithm must be gcra, token_bucket, leaky_bucket, fixed_window, "
                           "sliding_log or sliding_window");
    if (!given[P_LIMIT] || !given[P_PERIOD])
        return sl_sim_fail(err, errcap, field, given[P_LIMIT] ? "period" : "limit", "%s is required",
                           given[P_LIMIT] ? "period" : "limit");
    if (!sl_parse_i64(val[P_LIMIT], len[P_LIMIT], SL_INT_NO_SIGN, &out->limit) || out->limit < 1)
        return sl_sim_fail(err, errcap, field, "limit", "limit must be a positive integer");
    sl_duration_status ds = sl_parse_duration(val[P_PERIOD], len[P_PERIOD], &out->period_ns);
    if (ds != SL_DURATION_OK)
        return sl_sim_fail(err, errcap, field, "period",
                           ds == SL_DURATION_OUT_OF_RANGE
                               ? "period must be a positive duration of at most 73 years"
                               : "period is not a duration: use seconds, or a number with ms, s, "
                                 "m, h, d or w");
    snprintf(out->period_text, sizeof out->period_text, "%s", val[P_PERIOD]);
    out->burst = out->limit;
    if (given[P_BURST] &&
        (!sl_parse_i64(val[P_BURST], len[P_BURST], SL_INT_NO_SIGN, &out->burst) || out->burst < 1))
        return sl_sim_fail(err, errcap, field, "burst", "burst must be a positive integer");
    int rc = sl_limit_init(&out->lim, out->algorithm, out->limit, out->period_ns,
                           given[P_BURST] ? out->burst : 0);
    if (rc != SL_OK)
        return sl_sim_fail(err, errcap, field, rc == SL_ERR_BURST ? "burst" : "limit",
                           "%s with limit %lld per %s%s: %s", sl_algorithm_name(out->algorithm),
                           (long long)out->limit, out->period_text,
                           given[P_BURST] ? " and a burst" : "", sl_strerror(rc));

    /* The traffic. */
    traffic_params *tp = &out->traffic;
    tp->kind = TRAFFIC_STEADY;
    if (given[P_TRAFFIC] && (tp->kind = traffic_kind_parse(val[P_TRAFFIC])) == TRAFFIC_FILE)
        return sl_sim_fail(err, errcap, field, "traffic",
                           "traffic must be steady, bursty, poisson, boundary or ramp");
    tp->limit = out->limit;
    tp->period_ns = out->period_ns;
    /* Twice the limit by default: enough offered that every algorithm
     * refuses some. */
    tp->rate = 2.0 * (double)out->limit * 1e9 / (double)out->period_ns;
    if (given[P_RATE] && !sl_sim_rate(val[P_RATE], len[P_RATE], &tp->rate))
        return sl_sim_fail(err, errcap, field, "rate",
                           "rate must be a positive decimal number of requests per second, at "
                           "most 1000000000");
    if (tp->rate > 1e9)
        return sl_sim_fail(err, errcap, field, "limit",
                           "twice the limit is more than 1000000000 requests per second: give "
                           "a lower rate");
    tp->duration_ns = out->period_ns > SL_SIM_MAX_SPAN_NS / 10 ? SL_SIM_MAX_SPAN_NS
                                                               : out->period_ns * 10;
    if (given[P_DURATION]) {
        ds = sl_parse_duration(val[P_DURATION], len[P_DURATION], &tp->duration_ns);
        if (ds != SL_DURATION_OK && ds != SL_DURATION_OUT_OF_RANGE)
            return sl_sim_fail(err, errcap, field, "duration",
                               "duration is not a duration: use seconds, or a number with ms, "
                               "s, m, h, d or w");
        if (ds == SL_DURATION_OUT_OF_RANGE || tp->duration_ns > SL_SIM_MAX_SPAN_NS)
            return sl_sim_fail(err, errcap, field, "duration",
                               "duration must be positive and at most 1d (86400 s): the "
                               "server simulates at most a day");
    }
    int64_t seed = 1;
    if (given[P_SEED] && !sl_parse_i64(val[P_SEED], len[P_SEED], SL_INT_NO_SIGN, &seed))
        return sl_sim_fail(err, errcap, field, "seed", "seed must be a non-negative integer");
    tp->seed = (uint64_t)seed;
    out->expected = traffic_expected(tp);
    if (out->expected > (double)SL_SIM_MAX_REQUESTS) {
        bool boundary = tp->kind == TRAFFIC_BOUNDARY;
        return sl_sim_fail(err, errcap, field, given[P_DURATION] || boundary ? "duration" : "rate",
                           "the traffic would hold about %.0f requests: the server simulates at "
                           "most %d (lower the %s or the duration)",
                           out->expected, SL_SIM_MAX_REQUESTS, boundary ? "limit" : "rate");
    }
    return 0;
}
