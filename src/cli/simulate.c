/*
 * simulate.c: `sluice simulate`, every algorithm over the same traffic in
 * virtual time.
 *
 * Each algorithm gets its own states (one per key of the traffic, zeroed:
 * "never seen") and sees the same requests at the same virtual times; the
 * decisions are sl_take()'s own, so what the table shows is exactly what a
 * server using that algorithm would have answered. Nothing here reads a
 * clock: the same flags and seed print the same bytes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/quota.h"
#include "cli/sim.h"
#include "cli/trace.h"

static const char simulate_usage[] =
    "usage: sluice simulate --limit N --period DURATION [options]\n"
    "\n"
    "Runs the rate limiting algorithms over the same traffic in virtual time and\n"
    "compares what each lets through. Deterministic: the same flags and --seed\n"
    "give the same output.\n"
    "\n"
    "  --limit N              requests per period (required)\n"
    "  --period DURATION      seconds, or with a unit: 500ms, 1s, 1m, 1h (required)\n"
    "  --burst B              bucket size for gcra, token_bucket, leaky_bucket\n"
    "                         (default: the limit)\n"
    "  --algorithms a,b,...   default: gcra,token_bucket,leaky_bucket,fixed_window,\n"
    "                         sliding_log,sliding_window (concurrency is not a rate:\n"
    "                         it is not simulated)\n"
    "  --traffic KIND|FILE    steady (default), bursty, poisson, boundary, ramp, or a\n"
    "                         trace file (see docs/cli.md: TIME [KEY [COST]] a line)\n"
    "  --duration DURATION    simulated time (default: 10 periods)\n"
    "  --rate R               offered requests per second (default: 2x the limit)\n"
    "  --seed S               seed of the poisson traffic (default 1)\n"
    "  --buckets N            time buckets of the plot and the CSV (default 100)\n"
    "  --svg FILE             write a plot: admitted and rejected over time, per algorithm\n"
    "  --csv FILE             write one row per time bucket per algorithm\n"
    "  --events FILE          write one row per request per algorithm (the decisions)\n"
    "  --nodes N --strategy central|sync|split|route [--sync-interval DURATION]\n"
    "                         simulate a fleet of N nodes sharing the limit (one\n"
    "                         algorithm, default gcra; --strategy all compares them)\n"
    "  --node-weights W,W,... the share of the requests each node gets (default:\n"
    "                         round-robin, all equal)\n"
    "  --shift-at DURATION    from then on, node k's requests go to node k+1\n"
    "  --service              the adaptive concurrency estimators on a modelled\n"
    "                         service instead (sluice simulate --service --help)\n"
    "\n"
    "Table columns: admitted and rejected requests; max_in_period, the most units\n"
    "admitted for one key in any window of one period (exact, over the admitted\n"
    "times; for leaky_bucket the times the requests may go ahead); ratio, that\n"
    "over the limit; state_bytes per key; leaky_bucket's added delay p50/p99.\n"
    "\n"
    "examples:\n"
    "  sluice simulate --limit 100 --period 1s --traffic boundary\n"
    "  sluice simulate --limit 10 --period 1s --traffic poisson --rate 15 --seed 7 --svg out.svg\n"
    "  sluice simulate --limit 5 --period 1m --traffic trace.txt --algorithms gcra,sliding_log\n"
    "  sluice simulate --limit 100 --period 1s --nodes 4 --strategy all --traffic poisson\n";

/* The algorithms simulated when --algorithms is not given. */
static const sl_algorithm default_algs[] = {SL_GCRA,         SL_TOKEN_BUCKET, SL_LEAKY_BUCKET,
                                            SL_FIXED_WINDOW, SL_SLIDING_LOG,  SL_SLIDING_WINDOW};

#define SIM_MAX_BUCKETS 100000
/* The most syncs of one key by one node a fleet's run may make (a few
 * seconds of work). */
#define SIM_MAX_SYNC_VISITS 200000000u

/* The nearest-rank percentile p/1000 of sorted v[0 .. n). */
static int64_t percentile(const int64_t *v, size_t n, unsigned permille)
{
    if (n == 0)
        return 0;
    size_t rank = (size_t)(((unsigned __int128)n * permille + 999) / 1000);
    if (rank < 1)
        rank = 1;
    return v[rank - 1];
}

/* Prints the table of results. */
static void print_table(FILE *out, const sim_setup *s, const sim_result *r, size_t nr)
{
    fprintf(out, "%-16s %10s %10s %14s %7s %12s %13s %13s\n", "algorithm", "admitted", "rejected",
            "max_in_period", "ratio", "state_bytes", "delay_p50_ms", "delay_p99_ms");
    for (size_t i = 0; i < nr; i++) {
        /* ratio = max / limit with two decimals, rounded down, in integers. */
        int64_t hundredths = (int64_t)((__int128)r[i].max_in_period * 100 / s->limit);
        char p50[32] = "-", p99[32] = "-";
        if (r[i].delays != NULL) {
            cli_fmt_ms(percentile(r[i].delays, r[i].ndelays, 500), p50, sizeof p50);
            cli_fmt_ms(percentile(r[i].delays, r[i].ndelays, 990), p99, sizeof p99);
        }
        fprintf(out, "%-16s %10llu %10llu %14lld %4lld.%02lld %12zu %13s %13s\n", r[i].name,
                (unsigned long long)r[i].admitted, (unsigned long long)r[i].rejected,
                (long long)r[i].max_in_period, (long long)(hundredths / 100),
                (long long)(hundredths % 100), r[i].state_bytes, p50, p99);
    }
}

static int write_csv(FILE *f, const sim_setup *s, const sim_result *r, size_t nr)
{
    fprintf(f, "algorithm,bucket,start_ns,end_ns,offered,admitted,rejected,admitted_in_period\n");
    for (size_t i = 0; i < nr; i++)
        for (size_t b = 0; b < s->nbuckets; b++)
            fprintf(f, "%s,%zu,%lld,%lld,%llu,%llu,%llu,%lld\n", r[i].name, b,
                    (long long)((int64_t)b * s->bucket_ns),
                    (long long)((int64_t)(b + 1) * s->bucket_ns),
                    (unsigned long long)r[i].b_offered[b], (unsigned long long)r[i].b_admitted[b],
                    (unsigned long long)r[i].b_rejected[b], (long long)r[i].b_window[b]);
    return ferror(f) ? -1 : 0;
}

/* Opens FILE for writing, or reports why not. */
static FILE *open_out(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        cli_error("simulate", "cannot write %s: %s", path, strerror(errno));
    return f;
}

static int close_out(FILE *f, const char *path)
{
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        cli_error("simulate", "error writing %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Parses --algorithms into algs[]; returns the count, or -1 after a usage error. */
static int parse_algorithms(const char *list, sl_algorithm *algs, int cap)
{
    int n = 0;
    const char *p = list;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        sl_algorithm a;
        if (len == 0) {
            cli_usage_error("simulate", "--algorithms: an empty name in '%s'", list);
            return -1;
        }
        if (sl_algorithm_parse(p, len, &a) != SL_OK) {
            cli_usage_error("simulate",
                            "--algorithms: unknown algorithm '%.*s' (one of gcra, token_bucket, "
                            "leaky_bucket, fixed_window, sliding_log, sliding_window)",
                            (int)(len > 40 ? 40 : len), p);
            return -1;
        }
        if (a == SL_CONCURRENCY) {
            cli_usage_error("simulate", "--algorithms: concurrency limits work in flight, not a "
                                        "rate: it is not simulated");
            return -1;
        }
        for (int k = 0; k < n; k++)
            if (algs[k] == a) {
                cli_usage_error("simulate", "--algorithms: '%s' named twice", sl_algorithm_name(a));
                return -1;
            }
        if (n >= cap) {
            cli_usage_error("simulate", "--algorithms: too many names");
            return -1;
        }
        algs[n++] = a;
        if (!comma)
            return n;
        p = comma + 1;
    }
}

/* Parses --node-weights into w[0 .. nodes): one non-negative integer per
 * node, not all 0. Returns 0, or -1 after a usage error. */
static int parse_weights(const char *list, int64_t *w, int nodes)
{
    const char *p = list;
    int64_t total = 0;
    for (int k = 0; k < nodes; k++) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char num[32];
        if (len == 0 || len >= sizeof num) {
            cli_usage_error("simulate", "--node-weights: '%s' is not %d integers in 0..1000000",
                            list, nodes);
            return -1;
        }
        memcpy(num, p, len);
        num[len] = '\0';
        if (cli_parse_int(num, 0, 1000000, &w[k]) != 0) {
            cli_usage_error("simulate", "--node-weights: '%s' is not an integer in 0..1000000",
                            num);
            return -1;
        }
        total += w[k];
        if ((k + 1 < nodes) != (comma != NULL)) {
            if (comma)
                cli_usage_error("simulate", "--node-weights: more weights than --nodes %d",
                                nodes);
            else
                cli_usage_error("simulate", "--node-weights: %d weights for --nodes %d", k + 1,
                                nodes);
            return -1;
        }
        if (comma)
            p = comma + 1;
    }
    if (total == 0) {
        cli_usage_error("simulate", "--node-weights: every weight is 0");
        return -1;
    }
    return 0;
}

/* Parses a duration flag into ns; > 0 unless allow_zero. Reports a usage error. */
static int flag_duration(const cli_flag *f, int64_t *ns)
{
    const char *why;
    if (cli_parse_duration(f->value, strlen(f->value), 1000000000, ns, &why) != 0) {
        cli_usage_error("simulate", "%s: '%s' %s", f->name, f->value, why);
        return -1;
    }
    if (*ns <= 0) {
        cli_usage_error("simulate", "%s must be more than 0", f->name);
        return -1;
    }
    return 0;
}

enum {
    F_LIMIT,
    F_PERIOD,
    F_BURST,
    F_ALGS,
    F_TRAFFIC,
    F_DURATION,
    F_RATE,
    F_SEED,
    F_BUCKETS,
    F_SVG,
    F_CSV,
    F_EVENTS,
    F_NODES,
    F_STRATEGY,
    F_SYNC,
    F_WEIGHTS,
    F_SHIFT,
    F_COUNT
};

int cmd_simulate(int argc, char **argv)
{
    cli_flag fl[F_COUNT] = {
        [F_LIMIT] = {"--limit", true, NULL, false},
        [F_PERIOD] = {"--period", true, NULL, false},
        [F_BURST] = {"--burst", true, NULL, false},
        [F_ALGS] = {"--algorithms", true, NULL, false},
        [F_TRAFFIC] = {"--traffic", true, NULL, false},
        [F_DURATION] = {"--duration", true, NULL, false},
        [F_RATE] = {"--rate", true, NULL, false},
        [F_SEED] = {"--seed", true, NULL, false},
        [F_BUCKETS] = {"--buckets", true, NULL, false},
        [F_SVG] = {"--svg", true, NULL, false},
        [F_CSV] = {"--csv", true, NULL, false},
        [F_EVENTS] = {"--events", true, NULL, false},
        [F_NODES] = {"--nodes", true, NULL, false},
        [F_STRATEGY] = {"--strategy", true, NULL, false},
        [F_SYNC] = {"--sync-interval", true, NULL, false},
        [F_WEIGHTS] = {"--node-weights", true, NULL, false},
        [F_SHIFT] = {"--shift-at", true, NULL, false},
    };
    /* The service model has flags of its own. */
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], "--service") == 0)
            return cmd_simulate_service(argc, argv);
    size_t npos;
    int pr = cli_parse_flags("simulate", argc, argv, fl, F_COUNT, NULL, 0, &npos);
    if (pr == 1) {
        fputs(simulate_usage, stdout);
        return CLI_EXIT_OK;
    }
    if (pr < 0)
        return CLI_EXIT_USAGE;

    int64_t limit, period, burst = 0, duration, buckets = 100, seed = 1;
    if (!fl[F_LIMIT].seen || !fl[F_PERIOD].seen) {
        cli_usage_error("simulate", "%s is required", fl[F_LIMIT].seen ? "--period" : "--limit");
        return CLI_EXIT_USAGE;
    }
    if (cli_parse_int(fl[F_LIMIT].value, 1, SL_SPAN_MAX, &limit) != 0) {
        cli_usage_error("simulate", "--limit: '%s' is not a positive integer", fl[F_LIMIT].value);
        return CLI_EXIT_USAGE;
    }
    if (flag_duration(&fl[F_PERIOD], &period) != 0)
        return CLI_EXIT_USAGE;
    if (period > SL_SPAN_MAX) {
        cli_usage_error("simulate", "--period is longer than sluice allows (73 years)");
        return CLI_EXIT_USAGE;
    }
    if (fl[F_BURST].seen && cli_parse_int(fl[F_BURST].value, 1, SL_SPAN_MAX, &burst) != 0) {
        cli_usage_error("simulate", "--burst: '%s' is not a positive integer", fl[F_BURST].value);
        return CLI_EXIT_USAGE;
    }
    if (fl[F_SEED].seen && cli_parse_int(fl[F_SEED].value, 0, INT64_MAX, &seed) != 0) {
        cli_usage_error("simulate", "--seed: '%s' is not a non-negative integer", fl[F_SEED].value);
        return CLI_EXIT_USAGE;
    }
    if (fl[F_BUCKETS].seen &&
        cli_parse_int(fl[F_BUCKETS].value, 1, SIM_MAX_BUCKETS, &buckets) != 0) {
        cli_usage_error("simulate", "--buckets: '%s' is not an integer in 1..%d",
                        fl[F_BUCKETS].value, SIM_MAX_BUCKETS);
        return CLI_EXIT_USAGE;
    }
    /* Ten periods show a steady state and several windows; capped so that
     * the default never overflows. */
    duration = period > SL_TIME_MAX / 10 ? SL_TIME_MAX : period * 10;
    if (fl[F_DURATION].seen && flag_duration(&fl[F_DURATION], &duration) != 0)
        return CLI_EXIT_USAGE;
    /* Twice the limit: enough offered that every algorithm must refuse some. */
    double rate = 2.0 * (double)limit * 1e9 / (double)period;
    if (fl[F_RATE].seen) {
        const char *why;
        if (cli_parse_rate(fl[F_RATE].value, &rate, &why) != 0) {
            cli_usage_error("simulate", "--rate: '%s' %s", fl[F_RATE].value, why);
            return CLI_EXIT_USAGE;
        }
    }
    const char *trace_file = NULL; /* --traffic FILE */
    traffic_params tp = {.kind = TRAFFIC_STEADY, .limit = limit, .period_ns = period,
                         .duration_ns = duration, .rate = rate, .seed = (uint64_t)seed};
    if (fl[F_TRAFFIC].seen) {
        tp.kind = traffic_kind_parse(fl[F_TRAFFIC].value);
        if (tp.kind == TRAFFIC_FILE) {
            trace_file = fl[F_TRAFFIC].value;
            if (trace_file[0] == '\0') {
                cli_usage_error("simulate", "--traffic: empty name");
                return CLI_EXIT_USAGE;
            }
            /* A trace runs to its last request unless --duration cuts it. */
            tp.duration_ns = fl[F_DURATION].seen ? duration : 0;
        }
    }
    if (!fl[F_TRAFFIC].seen || tp.kind != TRAFFIC_FILE) {
        if (rate * ((double)duration / 1e9) > (double)TRAFFIC_MAX_EVENTS * 1.01) {
            cli_usage_error("simulate",
                            "--rate x --duration is more than %u requests (%g per second%s): "
                            "lower --rate or --duration",
                            TRAFFIC_MAX_EVENTS, rate, fl[F_RATE].seen ? "" : ", twice the limit");
            return CLI_EXIT_USAGE;
        }
    }

    sl_algorithm algs[SL_ALGORITHM_COUNT];
    int nalg;
    bool named = fl[F_ALGS].seen;
    if (named) {
        nalg = parse_algorithms(fl[F_ALGS].value, algs, SL_ALGORITHM_COUNT);
        if (nalg < 0)
            return CLI_EXIT_USAGE;
    } else {
        nalg = (int)(sizeof default_algs / sizeof default_algs[0]);
        memcpy(algs, default_algs, sizeof default_algs);
    }

    /* The fleet's flags go together. */
    int64_t nodes = 0, sync_ns = 100 * 1000000LL, shift_ns = 0;
    static int64_t weights[SIM_FLEET_NODES_MAX];
    const char *strategy = NULL;
    bool skip_sync = false;
    if (fl[F_NODES].seen || fl[F_STRATEGY].seen || fl[F_SYNC].seen || fl[F_WEIGHTS].seen ||
        fl[F_SHIFT].seen) {
        if (!fl[F_NODES].seen || !fl[F_STRATEGY].seen) {
            cli_usage_error("simulate", "a fleet needs both --nodes and --strategy");
            return CLI_EXIT_USAGE;
        }
        if (cli_parse_int(fl[F_NODES].value, 1, SIM_FLEET_NODES_MAX, &nodes) != 0) {
            cli_usage_error("simulate", "--nodes: '%s' is not an integer in 1..%d",
                            fl[F_NODES].value, SIM_FLEET_NODES_MAX);
            return CLI_EXIT_USAGE;
        }
        strategy = fl[F_STRATEGY].value;
        if (strcmp(strategy, "central") != 0 && strcmp(strategy, "sync") != 0 &&
            strcmp(strategy, "split") != 0 && strcmp(strategy, "route") != 0 &&
            strcmp(strategy, "all") != 0) {
            cli_usage_error("simulate", "--strategy: '%s' is not central, sync, split, route or all",
                            strategy);
            return CLI_EXIT_USAGE;
        }
        if (fl[F_SYNC].seen && flag_duration(&fl[F_SYNC], &sync_ns) != 0)
            return CLI_EXIT_USAGE;
        if (fl[F_SHIFT].seen && flag_duration(&fl[F_SHIFT], &shift_ns) != 0)
            return CLI_EXIT_USAGE;
        if (fl[F_WEIGHTS].seen && parse_weights(fl[F_WEIGHTS].value, weights, (int)nodes) != 0)
            return CLI_EXIT_USAGE;
        if (fl[F_EVENTS].seen) {
            cli_usage_error("simulate", "--events is not written for a fleet (use --csv)");
            return CLI_EXIT_USAGE;
        }
        if (named && nalg != 1) {
            cli_usage_error("simulate", "a fleet simulates one algorithm: name one in --algorithms");
            return CLI_EXIT_USAGE;
        }
        if (!named) {
            algs[0] = SL_GCRA;
            nalg = 1;
        }
        /* The sync strategy leases a rate, to a fleet its central's table holds. */
        const char *no_sync = NULL;
        char why[128];
        if (algs[0] != SL_GCRA && algs[0] != SL_TOKEN_BUCKET && algs[0] != SL_LEAKY_BUCKET) {
            snprintf(why, sizeof why, "%s is not a rate (sync leases gcra, token_bucket or "
                     "leaky_bucket)", sl_algorithm_name(algs[0]));
            no_sync = why;
        } else if (nodes > SL_QUOTA_NODES_MAX) {
            snprintf(why, sizeof why, "sync shares a limit between at most %d nodes",
                     SL_QUOTA_NODES_MAX);
            no_sync = why;
        }
        if (no_sync && strcmp(strategy, "sync") == 0) {
            cli_usage_error("simulate", "--strategy sync: %s", no_sync);
            return CLI_EXIT_USAGE;
        }
        if (no_sync)
            fprintf(stderr, "sluice simulate: sync left out: %s\n", no_sync);
        skip_sync = no_sync != NULL;
    }

    /* Every limit first: a bad combination is a usage error before any work. */
    sim_result res[SL_ALGORITHM_COUNT + 4];
    memset(res, 0, sizeof res);
    int nres = 0;
    for (int i = 0; i < nalg; i++) {
        sim_result *r = &res[nres];
        r->alg = algs[i];
        snprintf(r->name, sizeof r->name, "%s", sl_algorithm_name(algs[i]));
        int rc = sl_limit_init(&r->lim, algs[i], limit, period, burst);
        if (rc != SL_OK) {
            if (!named && algs[i] == SL_SLIDING_LOG && rc == SL_ERR_LIMIT) {
                fprintf(stderr, "sluice simulate: sliding_log left out: its limit is at most %d\n",
                        SL_SLIDING_LOG_MAX);
                continue;
            }
            cli_usage_error("simulate", "%s with --limit %lld --period %s%s%s: %s",
                            sl_algorithm_name(algs[i]), (long long)limit, fl[F_PERIOD].value,
                            burst ? " --burst " : "", burst ? fl[F_BURST].value : "",
                            sl_strerror(rc));
            return CLI_EXIT_USAGE;
        }
        r->state_bytes = sl_state_size(&r->lim);
        nres++;
    }

    char errbuf[4096];
    traffic tr;
    memset(&tr, 0, sizeof tr);
    if ((trace_file ? traffic_read_file(&tr, trace_file, tp.duration_ns, errbuf, sizeof errbuf)
                    : traffic_build(&tr, &tp, errbuf, sizeof errbuf)) != 0) {
        traffic_free(&tr);
        /* A bad trace file is bad input: the same status as a bad flag. */
        cli_error("simulate", "%s", errbuf);
        return tp.kind == TRAFFIC_FILE ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    }
    if (tr.end_ns < 1)
        tr.end_ns = 1;

    sim_setup s = {.tr = &tr, .limit = limit, .period_ns = period, .burst = burst ? burst : limit};
    s.nbuckets = (size_t)buckets;
    s.bucket_ns = (tr.end_ns + buckets - 1) / buckets;
    if (s.bucket_ns < 1)
        s.bucket_ns = 1;
    /* Fewer buckets when the span is shorter than one nanosecond a bucket. */
    s.nbuckets = (size_t)((tr.end_ns + s.bucket_ns - 1) / s.bucket_ns);

    char title[600];
    snprintf(title, sizeof title, "%lld per %s (burst %lld), traffic %s, %zu requests",
             (long long)limit, fl[F_PERIOD].value, (long long)s.burst,
             trace_file ? trace_file : traffic_kind_name(tp.kind), tr.n);
    s.title = title;

    FILE *events = NULL;
    int status = CLI_EXIT_OK;
    if (fl[F_EVENTS].seen) {
        events = open_out(fl[F_EVENTS].value);
        if (!events) {
            status = CLI_EXIT_FAIL;
            goto out;
        }
        fprintf(events, "algorithm,t_ns,key,cost,allowed,delay_ns\n");
    }

    /* Every sync visits every key of every node: cap the work, which a
     * short interval over a long span of many keys could make endless. */
    bool runs_sync = strategy && !skip_sync &&
                     (strcmp(strategy, "sync") == 0 || strcmp(strategy, "all") == 0);
    if (runs_sync) {
        unsigned __int128 visits = (unsigned __int128)(uint64_t)(tr.end_ns / sync_ns + 1) * (uint64_t)nodes *
                         (uint64_t)(tr.nkeys ? tr.nkeys : 1);
        if (visits > SIM_MAX_SYNC_VISITS) {
            cli_usage_error("simulate",
                            "--sync-interval %s over %lld ns of %zu keys on %lld nodes is more "
                            "than %llu syncs of a key: a longer --sync-interval, or a shorter "
                            "--duration",
                            fl[F_SYNC].seen ? fl[F_SYNC].value : "100ms", (long long)tr.end_ns,
                            tr.nkeys, (long long)nodes, (unsigned long long)SIM_MAX_SYNC_VISITS);
            status = CLI_EXIT_USAGE;
            goto out;
        }
    }

    if (strategy) {
        static const char *const all[] = {"central", "sync", "split", "route"};
        bool every = strcmp(strategy, "all") == 0;
        sl_algorithm a = res[0].alg;
        nres = 0;
        for (int k = 0; k < 4; k++) {
            if ((!every && strcmp(strategy, all[k]) != 0) ||
                (skip_sync && strcmp(all[k], "sync") == 0))
                continue;
            sim_fleet f = {.nodes = (int)nodes, .strategy = all[k], .sync_ns = sync_ns,
                           .weights = fl[F_WEIGHTS].seen ? weights : NULL,
                           .shift_at_ns = shift_ns};
            if (sim_fleet_run(&s, a, &f, &res[nres], errbuf, sizeof errbuf) != 0) {
                cli_error("simulate", "%s", errbuf);
                status = CLI_EXIT_FAIL;
                nres++;
                goto out;
            }
            nres++;
        }
    } else {
        for (int i = 0; i < nres; i++)
            if (sim_run_one(&s, &res[i], events, errbuf, sizeof errbuf) != 0) {
                cli_error("simulate", "%s", errbuf);
                status = CLI_EXIT_FAIL;
                goto out;
            }
    }

    printf("sluice simulate: %s, %lld ns simulated", title, (long long)tr.end_ns);
    if (tp.kind == TRAFFIC_POISSON)
        printf(", seed %lld", (long long)seed);
    if (strategy)
        printf(", %s on %lld nodes (sync every %lld ns)", sl_algorithm_name(res[0].alg),
               (long long)nodes, (long long)sync_ns);
    printf("\n\n");
    print_table(stdout, &s, res, (size_t)nres);
    for (int i = 0; i < nres; i++) {
        sl_quota_config qc;
        if (strategy && strcmp(res[i].name, "sync") == 0 &&
            sl_quota_config_init(&qc, &res[i].lim, (int)nodes, sync_ns) == SL_OK)
            printf("\nsync's bound: in any span, at most burst + rate x span + %lld units "
                   "(3 r I + (N-1)/N (B + r I) + N)\n",
                   (long long)sl_quota_excess(&qc));
    }

    if (fl[F_CSV].seen) {
        FILE *f = open_out(fl[F_CSV].value);
        if (!f || (write_csv(f, &s, res, (size_t)nres), close_out(f, fl[F_CSV].value)) != 0) {
            status = CLI_EXIT_FAIL;
            goto out;
        }
    }
    if (fl[F_SVG].seen) {
        FILE *f = open_out(fl[F_SVG].value);
        if (!f || (sim_write_svg(f, &s, res, (size_t)nres), close_out(f, fl[F_SVG].value)) != 0) {
            status = CLI_EXIT_FAIL;
            goto out;
        }
    }
out:
    if (events && close_out(events, fl[F_EVENTS].value) != 0)
        status = CLI_EXIT_FAIL;
    for (int i = 0; i < nres; i++)
        sim_result_free(&res[i]);
    traffic_free(&tr);
    return status;
}
