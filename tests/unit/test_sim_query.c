/*
 * GET /v1/simulate's query (proto/sim_query.h): the defaults, the errors
 * (each naming its parameter), and the bounds on the work, which rest on
 * traffic_expected (sim/traffic.h): checked here against the requests
 * traffic_build makes.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "proto/sim_query.h"
#include "sim/traffic.h"

static sl_sim_request req;
static char err[256];
static const char *field;

static int parse(const char *q)
{
    err[0] = '\0';
    return sl_sim_request_parse(q, q ? strlen(q) : 0, &req, err, sizeof err, &field);
}

#define NS 1000000000LL

Test(sim_query, the_defaults)
{
    cr_assert_eq(parse("limit=10&period=1s"), 0, "%s", err);
    cr_assert_eq(req.algorithm, SL_GCRA);
    cr_assert_eq(req.limit, 10);
    cr_assert_eq(req.period_ns, NS);
    cr_assert_eq(req.burst, 10, "the burst is the limit");
    cr_assert_eq(req.traffic.kind, TRAFFIC_STEADY);
    cr_assert_eq(req.traffic.rate, 20.0, "twice the limit");
    cr_assert_eq(req.traffic.duration_ns, 10 * NS, "ten periods");
    cr_assert_eq(req.traffic.seed, 1);
    cr_assert_eq(req.expected, 200.0);
    cr_assert_str_eq(req.period_text, "1s");
    /* ten periods of a day are more than the server's span: a day */
    cr_assert_eq(parse("limit=1&period=1d"), 0, "%s", err);
    cr_assert_eq(req.traffic.duration_ns, SL_SIM_MAX_SPAN_NS);
}

Test(sim_query, every_parameter)
{
    cr_assert_eq(parse("algorithm=sliding_window&limit=7&period=2m&burst=3&traffic=poisson&"
                       "rate=0.25&duration=1h&seed=99"), 0, "%s", err);
    cr_assert_eq(req.algorithm, SL_SLIDING_WINDOW);
    cr_assert_eq(req.burst, 3);
    cr_assert_eq(req.period_ns, 120 * NS);
    cr_assert_eq(req.traffic.kind, TRAFFIC_POISSON);
    cr_assert_eq(req.traffic.rate, 0.25);
    cr_assert_eq(req.traffic.duration_ns, 3600 * NS);
    cr_assert_eq(req.traffic.seed, 99);
    cr_assert_eq(req.expected, 900.0);
    /* percent-encoded, blank fields of a form, in any order */
    cr_assert_eq(parse("burst=&period=1%73&rate=&limit=%35&seed=&duration="), 0, "%s", err);
    cr_assert_eq(req.limit, 5);
    cr_assert_eq(req.period_ns, NS);
    cr_assert_eq(req.burst, 5);
}

Test(sim_query, errors_name_their_parameter)
{
    struct {
        const char *q, *field, *words;
    } bad[] = {
        {NULL, "limit", "limit is required"},
        {"", "limit", "limit is required"},
        {"limit=5", "period", "period is required"},
        {"limit=5&period=1s&limit=6", "limit", "limit is given twice"},
        {"limit=-5&period=1s", "limit", "positive integer"},
        {"limit=%2B5&period=1s", "limit", "positive integer"},
        {"limit=99999999999999999999&period=1s", "limit", "positive integer"},
        {"limit=5&period=1mo", "period", "not a duration"},
        {"limit=5&period=%zz", "period", "bad %-escape"},
        {"limit=5&period=1s&burst=x", "burst", "positive integer"},
        {"limit=5&period=1s&algorithm=nope", "algorithm", "must be gcra"},
        {"limit=5&period=1s&algorithm=concurrency", "algorithm", "must be gcra"},
        {"limit=5&period=1s&traffic=file", "traffic", "must be steady"},
        {"limit=5&period=1s&rate=0", "rate", "positive decimal"},
        {"limit=5&period=1s&rate=1.2.3", "rate", "positive decimal"},
        {"limit=5&period=1s&rate=.", "rate", "positive decimal"},
        {"limit=5&period=1s&rate=inf", "rate", "positive decimal"},
        {"limit=5&period=1s&duration=0", "duration", "at most 1d"},
        {"limit=5&period=1s&duration=1w", "duration", "at most 1d"},
        {"limit=5&period=1s&duration=soon", "duration", "not a duration"},
        {"limit=5&period=1s&seed=-1", "seed", "non-negative integer"},
        {"limit=600000000&period=1s", "limit", "twice the limit is more than"},
        {"limit=5&period=1s&nope=1", NULL, "unknown parameter 'nope'"},
        {"limit=5&period=1s&%zz=1", NULL, "unknown parameter '%zz'"},
        {"limit=5&period=1s&period=2s", "period", "given twice"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(parse(bad[i].q), -1, "%s", bad[i].q);
        cr_assert_not_null(strstr(err, bad[i].words), "%s: %s", bad[i].q, err);
        if (bad[i].field)
            cr_assert(field && strcmp(field, bad[i].field) == 0, "%s: %s", bad[i].q,
                      field ? field : "(none)");
        else
            cr_assert_null(field, "%s", bad[i].q);
    }
}

Test(sim_query, the_bound_on_requests)
{
    /* 100 000 exactly is served, one more is not */
    cr_assert_eq(parse("limit=10&period=1s&rate=100&duration=1000s"), 0, "%s", err);
    cr_assert_eq(req.expected, 100000.0);
    cr_assert_eq(parse("limit=10&period=1s&rate=100.001&duration=1000s"), -1);
    cr_assert_str_eq(field, "duration");
    cr_assert_eq(parse("limit=60000&period=1s"), -1, "the default rate: twice the limit");
    cr_assert_str_eq(field, "rate");
    cr_assert_not_null(strstr(err, "at most 100000"), "%s", err);
    /* boundary traffic is counted by the limit */
    cr_assert_eq(parse("limit=5000&period=1s&traffic=boundary&duration=40s"), -1);
    cr_assert_not_null(strstr(err, "lower the limit or the duration"), "%s", err);
    cr_assert_eq(parse("limit=5000&period=1s&traffic=boundary&duration=20s"), 0, "%s", err);
    cr_assert_eq(req.expected, 100000.0);
}

/* traffic_expected is what the bound trusts: exact for boundary, the
 * expectation for the others (exact to one for the evenly spaced ones). */
Test(sim_query, the_expected_requests_are_those_built)
{
    int64_t limits[] = {1, 3, 10, 77};
    int64_t periods[] = {NS / 1000, NS / 7, NS, 60 * NS};
    int kinds[] = {TRAFFIC_STEADY, TRAFFIC_BURSTY, TRAFFIC_POISSON, TRAFFIC_BOUNDARY,
                   TRAFFIC_RAMP};
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 4; b++)
            for (int64_t dmul = 1; dmul <= 13; dmul += 4)
                for (size_t k = 0; k < 5; k++) {
                    traffic_params p = {.kind = kinds[k], .limit = limits[a],
                                        .period_ns = periods[b],
                                        .duration_ns = periods[b] * dmul + periods[b] / 3,
                                        .rate = 2.0 * (double)limits[a] * 1e9 / (double)periods[b],
                                        .seed = 5};
                    traffic t;
                    memset(&t, 0, sizeof t);
                    char e[200];
                    cr_assert_eq(traffic_build(&t, &p, e, sizeof e), 0, "%s", e);
                    double want = traffic_expected(&p), got = (double)t.n;
                    if (p.kind == TRAFFIC_BOUNDARY)
                        cr_assert_eq(got, want, "boundary %lld %lld x%lld: %g built, %g expected", (long long)p.limit,
                                     (long long)p.period_ns, (long long)dmul, got, want);
                    else if (p.kind == TRAFFIC_POISSON)
                        cr_assert_leq(fabs(got - want), 6 * sqrt(want) + 6, "poisson");
                    else
                        cr_assert_leq(fabs(got - want), 1.0 + want * 1e-9 + (p.kind ==
                                      TRAFFIC_BURSTY ? (double)dmul + 1 : 0),
                                      "kind %d: %g built, %g expected", kinds[k], got, want);
                    traffic_free(&t);
                }
}

Test(sim_query, max_events_bounds_the_build)
{
    traffic_params p = {.kind = TRAFFIC_STEADY, .limit = 10, .period_ns = NS,
                        .duration_ns = 100 * NS, .rate = 20, .seed = 1};
    traffic t;
    memset(&t, 0, sizeof t);
    t.max_events = 100;
    char e[200];
    cr_assert_eq(traffic_build(&t, &p, e, sizeof e), -1);
    cr_assert_str_eq(e, "the traffic has more than 100 requests");
    cr_assert_eq(t.n, 100);
    traffic_free(&t);
}
