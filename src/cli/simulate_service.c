/*
 * simulate_service.c: `sluice simulate --service`, the adaptive
 * concurrency estimators as the admission limit of a modelled service
 * (service.h), side by side on the same load and seed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/service.h"

static const char service_usage[] =
    "usage: sluice simulate --service [options]\n"
    "\n"
    "Runs the adaptive concurrency estimators as the admission limit of a\n"
    "modelled service in virtual time: --capacity servers, each serving one\n"
    "request at a time for about --service-time, a queue in front of them,\n"
    "Poisson arrivals at a stepped offered load, and the capacity halving\n"
    "mid-run. Deterministic: the same flags and --seed give the same output.\n"
    "\n"
    "  --capacity C           servers, 2..100000 (default 40)\n"
    "  --service-time D       the mean service time, the unloaded latency,\n"
    "                         1us..10s (default 10ms)\n"
    "  --spread P%            service times uniform in S x (1 +- P), 0..90% (default 20%)\n"
    "  --estimators a,b,...   default: aimd,vegas,gradient2,anchored\n"
    "  --load L%:D,...        offered load steps, a share of capacity / service time\n"
    "                         (1%..10000%) for a duration; at most 16 steps, an hour\n"
    "                         in all (default 50%:5s,100%:5s,300%:20s)\n"
    "  --halve-at D|never     from then on, half the servers serve (default: at\n"
    "                         two thirds of the run)\n"
    "  --seed S               seed of the arrivals and service times (default 1)\n"
    "  --svg FILE             write a plot: per estimator, the limit, in flight,\n"
    "                         goodput and p99 over time\n"
    "  --csv FILE             write one row per point of the plot per estimator\n"
    "\n"
    "The table, per estimator and segment (a load step, cut at the halving),\n"
    "over the segment after its first 2 s (2/5 of a shorter one): the mean\n"
    "limit and in flight, goodput (served over the segment's capacity),\n"
    "p99 latency over the service time, the share of arrivals refused; then\n"
    "the time from the halving until the limit falls to 2/3 of its value\n"
    "before it.\n"
    "\n"
    "examples:\n"
    "  sluice simulate --service\n"
    "  sluice simulate --service --capacity 100 --service-time 20ms --load 120%:40s --halve-at never\n"
    "  sluice simulate --service --estimators anchored,gradient2 --seed 7 --svg service.svg\n";

static const sl_adapt_kind default_kinds[] = {SL_ADAPT_AIMD, SL_ADAPT_VEGAS, SL_ADAPT_GRADIENT2,
                                              SL_ADAPT_ANCHORED};

/*
 * Parses a percentage, "N" or "N%", with at most one decimal ("12.5%"),
 * into per mille. Returns 0, or -1 (not a percentage).
 */
static int parse_percent(const char *s, size_t len, int64_t *permille)
{
    int64_t v = 0;
    size_t i = 0;
    bool any = false;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        if (v > INT64_C(1000000000))
            return -1;
        v = v * 10 + (s[i] - '0');
        any = true;
    }
    v *= 10;
    if (i < len && s[i] == '.') {
        i++;
        if (i >= len || s[i] < '0' || s[i] > '9')
            return -1;
        v += s[i++] - '0';
    }
    if (i < len && s[i] == '%')
        i++;
    if (!any || i != len)
        return -1;
    *permille = v;
    return 0;
}

/* Parses --load into p->steps. Reports a usage error and returns -1 on bad input. */
static int parse_load(const char *list, svc_params *p)
{
    const char *s = list;
    int64_t total = 0;
    p->nsteps = 0;
    for (;;) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        const char *colon = memchr(s, ':', len);
        if (!colon) {
            cli_usage_error("simulate", "--load: '%.*s' is not LOAD%%:DURATION (e.g. 300%%:10s)",
                            (int)len, s);
            return -1;
        }
        if (p->nsteps == SVC_STEPS_MAX) {
            cli_usage_error("simulate", "--load: more than %d steps", SVC_STEPS_MAX);
            return -1;
        }
        svc_step *st = &p->steps[p->nsteps];
        if (parse_percent(s, (size_t)(colon - s), &st->load_permille) != 0 ||
            st->load_permille < SVC_LOAD_MIN || st->load_permille > SVC_LOAD_MAX) {
            cli_usage_error("simulate", "--load: '%.*s' is not a load in 1%%..10000%%",
                            (int)(colon - s), s);
            return -1;
        }
        const char *why;
        size_t dlen = len - (size_t)(colon + 1 - s);
        if (cli_parse_duration(colon + 1, dlen, SVC_NS_PER_SEC, &st->dur_ns, &why) != 0) {
            cli_usage_error("simulate", "--load: '%.*s' %s", (int)dlen, colon + 1, why);
            return -1;
        }
        if (st->dur_ns < SVC_TICK_NS || st->dur_ns % SVC_TICK_NS != 0) {
            cli_usage_error("simulate",
                            "--load: a step's duration '%.*s' is not a whole number of 10ms",
                            (int)dlen, colon + 1);
            return -1;
        }
        total += st->dur_ns;
        if (total > SVC_RUN_MAX_NS) {
            cli_usage_error("simulate", "--load: the steps last more than 1h");
            return -1;
        }
        p->nsteps++;
        if (!comma)
            break;
        s = comma + 1;
    }
    return 0;
}

/* Parses --estimators; returns the count, or -1 after a usage error. */
static int parse_estimators(const char *list, sl_adapt_kind *kinds)
{
    int n = 0;
    const char *s = list;
    for (;;) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        int found = -1;
        for (int k = 0; k < SL_ADAPT_KIND_COUNT; k++) {
            const char *name = sl_adapt_kind_name((sl_adapt_kind)k);
            if (strlen(name) == len && memcmp(name, s, len) == 0)
                found = k;
        }
        if (found < 0) {
            cli_usage_error("simulate",
                            "--estimators: '%.*s' is not aimd, vegas, gradient2 or anchored",
                            (int)len, s);
            return -1;
        }
        for (int i = 0; i < n; i++)
            if (kinds[i] == (sl_adapt_kind)found) {
                cli_usage_error("simulate", "--estimators: '%.*s' is named twice", (int)len, s);
                return -1;
            }
        kinds[n++] = (sl_adapt_kind)found;
        if (!comma)
            break;
        s = comma + 1;
    }
    return n;
}

static FILE *open_out(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        cli_error("simulate", "cannot write %s: %s", path, strerror(errno));
    return f;
}

static int close_out(FILE *f, const char *path, int wrote)
{
    int bad = ferror(f) || wrote != 0;
    if (fclose(f) != 0 || bad) {
        cli_error("simulate", "error writing %s: %s", path, errno ? strerror(errno) : "out of memory");
        return -1;
    }
    return 0;
}

/* "12.5%" from per mille. */
static const char *fmt_pct(int64_t permille, char *buf, size_t cap)
{
    snprintf(buf, cap, "%lld.%lld%%", (long long)(permille / 10), (long long)(permille % 10));
    return buf;
}

/* A load: "300%", or "12.5%" when it has a tenth. */
static const char *fmt_load(int64_t permille, char *buf, size_t cap)
{
    if (permille % 10 == 0)
        snprintf(buf, cap, "%lld%%", (long long)(permille / 10));
    else
        fmt_pct(permille, buf, cap);
    return buf;
}

/* "1.25" from a ratio a / b, two decimals, rounded down. */
static const char *fmt_ratio(int64_t a, int64_t b, char *buf, size_t cap)
{
    int64_t h = (int64_t)((__int128)a * 100 / b);
    snprintf(buf, cap, "%lld.%02lld", (long long)(h / 100), (long long)(h % 100));
    return buf;
}

/* "5s", "2.5s", "250ms": a time for the table. */
static const char *fmt_time(int64_t ns, char *buf, size_t cap)
{
    int64_t ms = ns / 1000000;
    if (ms % 1000 == 0)
        snprintf(buf, cap, "%llds", (long long)(ms / 1000));
    else
        snprintf(buf, cap, "%lld.%03llds", (long long)(ms / 1000), (long long)(ms % 1000));
    return buf;
}

static void print_result(FILE *f, const svc_params *p, const svc_result *r)
{
    const sl_adapt_config *c = &r->cfg;
    fprintf(f, "estimator %s (min %lld, max %lld, initial %lld)\n", sl_adapt_kind_name(r->kind),
            (long long)c->min_limit, (long long)c->max_limit, (long long)c->initial_limit);
    fprintf(f, "  %-13s %7s %8s %6s %9s %8s %6s %8s\n", "segment", "load", "servers", "limit",
            "in_flight", "goodput", "p99/S", "refused");
    for (int i = 0; i < r->nseg; i++) {
        const svc_segment *s = &r->seg[i];
        char a[32], b[32], seg[72], load[32], good[32], p99[32], ref[32];
        snprintf(seg, sizeof seg, "%s-%s", fmt_time(s->from, a, sizeof a),
                 fmt_time(s->to, b, sizeof b));
        int64_t refused = s->offered ? (int64_t)(s->refused * 1000 / s->offered) : 0;
        fprintf(f, "  %-13s %7s %8lld %6lld %9lld %8s %6s %8s\n", seg,
                fmt_load(s->load_permille, load, sizeof load),
                (long long)s->servers, (long long)s->limit_mean, (long long)s->inflight_mean,
                fmt_pct(s->goodput_permille, good, sizeof good),
                s->p99_ns ? fmt_ratio(s->p99_ns, p->service_ns, p99, sizeof p99) : "-",
                fmt_pct(refused, ref, sizeof ref));
    }
    if (p->halve_at_ns >= 0) {
        if (r->follow_ns >= 0)
            fprintf(f, "  halving followed in %lld ms (the limit at 2/3 of %lld)\n",
                    (long long)(r->follow_ns / 1000000), (long long)r->settled_limit);
        else
            fprintf(f, "  halving not followed (the limit never at 2/3 of %lld)\n",
                    (long long)r->settled_limit);
    }
}

static void write_csv(FILE *f, const svc_params *p, const svc_result *r, size_t nr,
                      const svc_point *pts, size_t npts)
{
    (void)p;
    fprintf(f, "estimator,t_ns,servers,limit,in_flight,served,refused,goodput_permille,p99_ns\n");
    for (size_t i = 0; i < nr; i++)
        for (size_t k = 0; k < npts; k++) {
            const svc_point *q = &pts[i * npts + k];
            fprintf(f, "%s,%lld,%lld,%lld,%lld,%llu,%llu,%lld,%lld\n",
                    sl_adapt_kind_name(r[i].kind), (long long)q->t_ns, (long long)q->servers,
                    (long long)q->limit, (long long)q->inflight, (unsigned long long)q->served,
                    (unsigned long long)q->refused, (long long)q->goodput_permille,
                    (long long)q->p99_ns);
        }
}

enum {
    S_SERVICE,
    S_CAPACITY,
    S_TIME,
    S_SPREAD,
    S_ESTIMATORS,
    S_LOAD,
    S_HALVE,
    S_SEED,
    S_SVG,
    S_CSV,
    S_COUNT
};

int cmd_simulate_service(int argc, char **argv)
{
    cli_flag fl[S_COUNT] = {
        [S_SERVICE] = {"--service", false, NULL, false},
        [S_CAPACITY] = {"--capacity", true, NULL, false},
        [S_TIME] = {"--service-time", true, NULL, false},
        [S_SPREAD] = {"--spread", true, NULL, false},
        [S_ESTIMATORS] = {"--estimators", true, NULL, false},
        [S_LOAD] = {"--load", true, NULL, false},
        [S_HALVE] = {"--halve-at", true, NULL, false},
        [S_SEED] = {"--seed", true, NULL, false},
        [S_SVG] = {"--svg", true, NULL, false},
        [S_CSV] = {"--csv", true, NULL, false},
    };
    size_t npos;
    int pr = cli_parse_flags("simulate", argc, argv, fl, S_COUNT, NULL, 0, &npos);
    if (pr == 1) {
        fputs(service_usage, stdout);
        return CLI_EXIT_OK;
    }
    if (pr < 0)
        return CLI_EXIT_USAGE;

    svc_params p = {.capacity = 40, .service_ns = 10 * 1000000, .spread_permille = 200,
                    .seed = 1};
    if (fl[S_CAPACITY].seen &&
        cli_parse_int(fl[S_CAPACITY].value, 2, SVC_CAPACITY_MAX, &p.capacity) != 0) {
        cli_usage_error("simulate", "--capacity: '%s' is not an integer in 2..%d",
                        fl[S_CAPACITY].value, SVC_CAPACITY_MAX);
        return CLI_EXIT_USAGE;
    }
    if (fl[S_TIME].seen) {
        const char *why;
        const char *v = fl[S_TIME].value;
        if (cli_parse_duration(v, strlen(v), SVC_NS_PER_SEC, &p.service_ns, &why) != 0) {
            cli_usage_error("simulate", "--service-time: '%s' %s", v, why);
            return CLI_EXIT_USAGE;
        }
        if (p.service_ns < SVC_SERVICE_MIN_NS || p.service_ns > SVC_SERVICE_MAX_NS) {
            cli_usage_error("simulate", "--service-time: '%s' is not in 1us..10s", v);
            return CLI_EXIT_USAGE;
        }
    }
    if (fl[S_SPREAD].seen) {
        const char *v = fl[S_SPREAD].value;
        if (parse_percent(v, strlen(v), &p.spread_permille) != 0 ||
            p.spread_permille > SVC_SPREAD_MAX) {
            cli_usage_error("simulate", "--spread: '%s' is not a percentage in 0..90%%", v);
            return CLI_EXIT_USAGE;
        }
    }
    sl_adapt_kind kinds[SL_ADAPT_KIND_COUNT];
    int nk = (int)(sizeof default_kinds / sizeof default_kinds[0]);
    memcpy(kinds, default_kinds, sizeof default_kinds);
    if (fl[S_ESTIMATORS].seen && (nk = parse_estimators(fl[S_ESTIMATORS].value, kinds)) < 0)
        return CLI_EXIT_USAGE;
    if (fl[S_LOAD].seen) {
        if (parse_load(fl[S_LOAD].value, &p) != 0)
            return CLI_EXIT_USAGE;
    } else {
        p.steps[0] = (svc_step){500, 5 * SVC_NS_PER_SEC};
        p.steps[1] = (svc_step){1000, 5 * SVC_NS_PER_SEC};
        p.steps[2] = (svc_step){3000, 20 * SVC_NS_PER_SEC};
        p.nsteps = 3;
    }
    int64_t end = svc_run_end(&p);
    /* Two thirds of the run, on a tick. */
    p.halve_at_ns = end * 2 / 3 / SVC_TICK_NS * SVC_TICK_NS;
    if (fl[S_HALVE].seen) {
        const char *v = fl[S_HALVE].value, *why;
        if (strcmp(v, "never") == 0) {
            p.halve_at_ns = -1;
        } else if (cli_parse_duration(v, strlen(v), SVC_NS_PER_SEC, &p.halve_at_ns, &why) != 0) {
            cli_usage_error("simulate", "--halve-at: '%s' %s", v, why);
            return CLI_EXIT_USAGE;
        } else if (p.halve_at_ns <= 0 || p.halve_at_ns >= end) {
            char b[32];
            cli_usage_error("simulate", "--halve-at: '%s' is not within the run (0, %s)", v,
                            fmt_time(end, b, sizeof b));
            return CLI_EXIT_USAGE;
        } else if (p.halve_at_ns % SVC_TICK_NS != 0) {
            cli_usage_error("simulate", "--halve-at: '%s' is not a whole number of 10ms", v);
            return CLI_EXIT_USAGE;
        }
    }
    if (p.halve_at_ns == 0)
        p.halve_at_ns = -1; /* a run of one tick: nothing to halve */
    if (fl[S_SEED].seen) {
        int64_t seed;
        if (cli_parse_int(fl[S_SEED].value, 0, INT64_MAX, &seed) != 0) {
            cli_usage_error("simulate", "--seed: '%s' is not a non-negative integer",
                            fl[S_SEED].value);
            return CLI_EXIT_USAGE;
        }
        p.seed = (uint64_t)seed;
    }
    double arrivals = svc_expected_arrivals(&p);
    if (arrivals > (double)SVC_MAX_ARRIVALS) {
        cli_usage_error("simulate",
                        "--load x --capacity / --service-time offers about %.0f requests, more "
                        "than %u: fewer or shorter steps, a lower capacity or a longer service "
                        "time",
                        arrivals, SVC_MAX_ARRIVALS);
        return CLI_EXIT_USAGE;
    }

    char errbuf[256];
    svc_result res[SL_ADAPT_KIND_COUNT];
    memset(res, 0, sizeof res);
    int status = CLI_EXIT_OK;
    svc_point *pts = NULL;
    for (int i = 0; i < nk; i++)
        if (svc_run(&p, kinds[i], &res[i], errbuf, sizeof errbuf) != 0) {
            cli_error("simulate", "%s", errbuf);
            status = CLI_EXIT_FAIL;
            goto out;
        }

    char title[512], a[32], b[32];
    int off = snprintf(title, sizeof title, "capacity %lld, service time %s ms +-%lld%%, load ",
                       (long long)p.capacity, cli_fmt_ms(p.service_ns, a, sizeof a),
                       (long long)(p.spread_permille / 10));
    for (int i = 0; i < p.nsteps && off > 0 && (size_t)off < sizeof title; i++)
        off += snprintf(title + off, sizeof title - (size_t)off, "%s%s:%s", i ? "," : "",
                        fmt_load(p.steps[i].load_permille, a, sizeof a),
                        fmt_time(p.steps[i].dur_ns, b, sizeof b));
    if (off > 0 && (size_t)off < sizeof title) {
        if (p.halve_at_ns >= 0)
            snprintf(title + off, sizeof title - (size_t)off, ", halved at %s, seed %llu",
                     fmt_time(p.halve_at_ns, a, sizeof a), (unsigned long long)p.seed);
        else
            snprintf(title + off, sizeof title - (size_t)off, ", seed %llu",
                     (unsigned long long)p.seed);
    }
    printf("sluice simulate --service: %s\n", title);
    for (int i = 0; i < nk; i++) {
        printf("\n");
        print_result(stdout, &p, &res[i]);
    }

    if (fl[S_SVG].seen || fl[S_CSV].seen) {
        size_t npts = res[0].npts;
        pts = calloc((size_t)nk * npts, sizeof *pts);
        if (!pts) {
            cli_error("simulate", "out of memory");
            status = CLI_EXIT_FAIL;
            goto out;
        }
        for (int i = 0; i < nk; i++)
            svc_points(&p, &res[i], pts + (size_t)i * npts);
        if (fl[S_CSV].seen) {
            FILE *f = open_out(fl[S_CSV].value);
            if (!f || (write_csv(f, &p, res, (size_t)nk, pts, npts),
                       close_out(f, fl[S_CSV].value, 0)) != 0) {
                status = CLI_EXIT_FAIL;
                goto out;
            }
        }
        if (fl[S_SVG].seen) {
            FILE *f = open_out(fl[S_SVG].value);
            if (!f) {
                status = CLI_EXIT_FAIL;
                goto out;
            }
            int wrote = svc_write_svg(f, &p, res, (size_t)nk, title);
            if (close_out(f, fl[S_SVG].value, wrote) != 0) {
                status = CLI_EXIT_FAIL;
                goto out;
            }
        }
    }
out:
    free(pts);
    for (int i = 0; i < nk; i++)
        svc_result_free(&res[i]);
    return status;
}
