/*
 * main.c: sluiced's start-up, reload and shutdown.
 *
 *   sluiced [options]     every option is a line of sl_flags below, which
 *                         --help prints and docs/configuration.md lists
 *   sluiced --help | --help-markdown | --version
 *
 * The main thread owns the signals and the timers (snapshots, the store's
 * sweep); the workers own the connections. SIGTERM and SIGINT: stop
 * accepting, finish what is in flight, write the snapshot, exit 0 (1 when
 * that final snapshot fails). SIGHUP: read --config again; its policies
 * (and a fleet's peers:) take effect at once, its other server settings
 * at the next start. What cannot work is refused before serving: a port
 * in use, a snapshot that cannot be written, nothing to serve.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cmd/adaptive.h"
#include "common/clock.h"
#include "common/parse.h"
#include "common/sample.h"
#include "policy/config.h"
#include "policy/envoy.h"
#include "server/dlog.h"
#include "server/log.h"
#include "server/notify.h"
#include "server/persist.h"
#include "server/plans_redis.h"
#include "backend/peers.h"
#include "backend/redis.h"
#include "backend/sync.h"
#include "server/server.h"
#include "server/ui.h"
#include "server/top.h"

/* With --snapshot and no --snapshot-interval: a crash loses at most this
 * many seconds of state, for a write every minute that costs little. */
#define SL_SNAPSHOT_INTERVAL_DEFAULT 60
#define SL_STR_(x) #x
#define SL_STR(x) SL_STR_(x)

/* Parses a non-negative integer with an optional k, m or g (powers of 1024). */
static bool sl_parse_size(const char *s, long long max, long long *out)
{
    size_t digits = strspn(s, "0123456789");
    int64_t n;
    if (!sl_parse_i64(s, digits, SL_INT_NO_SIGN, &n))
        return false;
    long long v = n;
    const char *end = s + digits;
    long long mul = 1;
    if (*end == 'k' || *end == 'K')
        mul = 1024, end++;
    else if (*end == 'm' || *end == 'M')
        mul = 1024 * 1024, end++;
    else if (*end == 'g' || *end == 'G')
        mul = 1024LL * 1024 * 1024, end++;
    if ((*end == 'b' || *end == 'B') && mul > 1)
        end++;
    if (*end != '\0' || __builtin_mul_overflow(v, mul, &v) || v > max)
        return false;
    *out = v;
    return true;
}

/* Parses --client-output-buffer-limit's "HARD SOFT SECONDS" (sizes as
 * sl_parse_size, words apart by spaces) into cfg; false, and cfg
 * unchanged, for anything else. */
static bool sl_parse_output_limit(const char *s, sl_server_config *cfg)
{
    long long v[3];
    const long long max[3] = {1LL << 40, 1LL << 40, 365LL * 86400};
    for (int i = 0; i < 3; i++) {
        char word[32];
        s += strspn(s, " ");
        size_t n = strcspn(s, " ");
        if (n == 0 || n >= sizeof word)
            return false;
        memcpy(word, s, n);
        word[n] = '\0';
        s += n;
        if (!sl_parse_size(word, max[i], &v[i]))
            return false;
    }
    if (s[strspn(s, " ")] != '\0' || v[0] < 64 * 1024 || v[1] > v[0] ||
        (v[1] != 0 && v[1] < 64 * 1024))
        return false;
    cfg->output_hard = (size_t)v[0];
    cfg->output_soft = (size_t)v[1];
    cfg->output_soft_s = (int)v[2];
    return true;
}

/*
 * sluiced's flags: this one table drives getopt_long, --help and
 * --help-markdown, whose output is the flag table of docs/configuration.md
 * (tests/integration/test_flags.py checks that the two are equal), so that
 * the help, the documentation and the parser cannot tell different
 * stories. A default marked SL_FLAG_APPLIED is also the value sluiced starts
 * from: it is parsed like the flag itself before the config file and the
 * command line, so the default shown is the default used.
 */
enum sl_flag_id {
    F_PORT, F_HTTP_PORT, F_GRPC_PORT, F_ENVOY_CONFIG, F_ENVOY_HEADERS, F_BIND, F_THREADS, F_REQUIREPASS, F_MAXCLIENTS, F_MAXMEM, F_MAXKEY, F_MAX_ADAPTIVE,
    F_MAXREQ, F_OUTPUT_LIMIT, F_IDLE, F_REQTIMEOUT, F_PORTSHARE, F_SNAPSHOT, F_SNAPINT, F_CONFIG,
    F_LOGLEVEL, F_DECISION_LOG, F_DECISION_LOG_SAMPLE, F_STORE, F_ONERR, F_STORE_TIMEOUT, F_SPLIT, F_FLEET_NODES, F_PEERS, F_SELF, F_AUTH_HEADER, F_TRUSTED_PROXIES, F_DENY_STATUS, F_HTTP_BIND, F_HTTP_TOKEN, F_HTTP_OPEN,
    F_TOP_KEYS, F_TOP_WINDOW, F_TOP_EXACT_RATE,
    F_ALLOW_EMPTY_RELOAD, F_VERSION, F_HELP, F_HELP_MARKDOWN,
    F_COUNT
};

enum {
    SL_FLAG_APPLIED = 1,     /* def is an argument, applied before anything else */
    SL_FLAG_CLI_ONLY = 2,    /* not a setting of the config file's server: section */
};

typedef struct sl_flag {
    const char *name;  /* without its dashes */
    const char *arg;   /* the argument's name in the help, or NULL for none */
    const char *def;   /* the default as shown, or NULL for none */
    const char *help;  /* what it does, for --help and the documentation */
    const char *valid; /* what a value must be, for the error that refuses one */
    unsigned flags;
} sl_flag;

/* The first getopt_long value: above every character. */
#define SL_FLAG_VAL 256

static const sl_flag sl_flags[F_COUNT] = {
    [F_PORT] = {"port", "N", "7379", "RESP port; 0 turns it off", "a port from 0 to 65535",
                SL_FLAG_APPLIED},
    [F_HTTP_PORT] = {"http-port", "N", "7380", "HTTP port; 0 turns it off, if the RESP port is on",
                     "a port from 0 to 65535", SL_FLAG_APPLIED},
    [F_GRPC_PORT] = {"grpc-port", "N", "0",
                     "gRPC port (h2c on --bind's address): Envoy's rate limit service "
                     "(ShouldRateLimit, with --envoy-config) and grpc.health.v1 Health/Check "
                     "(docs/grpc.md); 0 turns it off",
                     "a port from 0 to 65535", SL_FLAG_APPLIED},
    [F_ENVOY_CONFIG] = {"envoy-config", "DIR", NULL,
                        "envoyproxy/ratelimit's configuration: every *.yaml file of DIR, served "
                        "by ShouldRateLimit on --grpc-port; read again on SIGHUP and when a file "
                        "in DIR changes, a configuration with an error refused whole "
                        "(docs/envoy.md)",
                        "a directory", 0},
    [F_ENVOY_HEADERS] = {"envoy-headers", "NAMES", "off",
                         "the headers ShouldRateLimit asks Envoy to add to its answers (the "
                         "limit, what remains, the seconds to the reset, of the descriptor "
                         "nearest its limit): off; ratelimit for RateLimit-Limit, "
                         "RateLimit-Remaining and RateLimit-Reset (the names of "
                         "envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED); x-ratelimit for "
                         "X-RateLimit-*; or three names, comma-separated",
                         "off, ratelimit, x-ratelimit, or three header names (letters, digits "
                         "and -, at most 64 bytes each) separated by commas",
                         SL_FLAG_APPLIED},
    [F_BIND] = {"bind", "ADDR", "127.0.0.1",
                "address to listen on, an IPv4 or IPv6 literal; any other than loopback "
                "without --requirepass is warned about at start",
                "an IPv4 or IPv6 literal", SL_FLAG_APPLIED},
    [F_THREADS] = {"threads", "N", "one per core",
                   "worker threads, each with its own event loop, all accepting from the "
                   "port's one listening socket",
                   "an integer from 1 to 256", 0},
    [F_REQUIREPASS] = {"requirepass", "SECRET", NULL,
                       "clients must AUTH SECRET (or HELLO 3 AUTH default SECRET) before other "
                       "commands; compared in constant time",
                       "a non-empty string", 0},
    [F_MAXCLIENTS] = {"maxclients", "N", "10000",
                      "connections at once, lowered at start to what the open file limit fits; "
                      "more are answered ERR max number of clients reached (HTTP: 503) and "
                      "closed",
                      "an integer from 1 to 1000000", SL_FLAG_APPLIED},
    [F_MAXMEM] = {"max-memory", "BYTES", NULL,
                  "hard cap on the store's memory, at least 256k (k, m or g: powers of 1024); "
                  "at the cap the idlest states are evicted (docs/store.md)",
                  "at least 256k (k, m or g: powers of 1024), or 0 for no cap", 0},
    [F_MAXKEY] = {"max-key-bytes", "N", "512",
                  "longest key; a longer one is an error, not a truncation",
                  "an integer from 1 to 65535", SL_FLAG_APPLIED},
    [F_MAX_ADAPTIVE] = {"max-adaptive-keys", "N", "65536",
                        "adaptive concurrency limits held at once (docs/concurrency.md); a new "
                        "key past it evicts the least recently used one with nothing in "
                        "flight, which starts again from its initial limit",
                        "an integer from 1 to 16777216", SL_FLAG_APPLIED},
    [F_MAXREQ] = {"max-request-bytes", "N", "65536",
                  "largest request; a larger one is a protocol error and closes the connection",
                  "from 1024 to 512m", SL_FLAG_APPLIED},
    [F_OUTPUT_LIMIT] = {"client-output-buffer-limit", "LIMITS", "256m 64m 60",
                        "HARD SOFT SECONDS, as Redis's: the replies one client may be owed (k, m "
                        "or g: powers of 1024); a client past HARD, or past SOFT for longer than "
                        "SECONDS, is closed with a log line; SOFT 0 has no soft limit",
                        "HARD SOFT SECONDS: HARD from 64k to 1024g, SOFT 0 or from 64k to HARD, "
                        "SECONDS from 0 to 31536000",
                        SL_FLAG_APPLIED},
    [F_IDLE] = {"idle-timeout", "S", "0",
                "close connections idle this many seconds; 0 never does",
                "seconds, from 0 to 31536000", SL_FLAG_APPLIED},
    [F_REQTIMEOUT] = {"request-timeout", "S", "10",
                      "close a connection whose request (RESP command or HTTP request) is not "
                      "complete this many seconds after its first byte, with an error; reads "
                      "do not reset it; 0 never does",
                      "seconds, from 0 to 31536000", SL_FLAG_APPLIED},
    [F_PORTSHARE] = {"maxclients-port-share", "PERCENT", "90",
                     "while both ports are on, the most of --maxclients one port may hold, so "
                     "that neither face can lock the other out",
                     "a percentage from 1 to 100", SL_FLAG_APPLIED},
    [F_SNAPSHOT] = {"snapshot", "FILE", NULL,
                    "restore the store from FILE at start and write it there every "
                    "--snapshot-interval and at shutdown (SIGTERM, SIGINT); a FILE that cannot "
                    "be written is refused at start, and a final write that fails makes the "
                    "exit status 1",
                    "a file name", 0},
    [F_SNAPINT] = {"snapshot-interval", "S", SL_STR(SL_SNAPSHOT_INTERVAL_DEFAULT),
                   "seconds between snapshots while serving; 0 writes only at shutdown",
                   "seconds, from 0 to 31536000", 0},
    [F_CONFIG] = {"config", "FILE", NULL,
                  "the YAML file below: policies, and any of these settings",
                  "a file name", SL_FLAG_CLI_ONLY},
    [F_LOGLEVEL] = {"log-level", "LEVEL", "info",
                    "debug, info, warn or error; logs go to stderr, one line per event",
                    "debug, info, warn or error", SL_FLAG_APPLIED},
    [F_DECISION_LOG] = {"decision-log", "FILE", NULL,
                        "one JSON line per sampled decision (time, face, policy, key, cost, "
                        "allowed, remaining, the limit that refused) appended to FILE, - for "
                        "standard output; created with mode 0640, opened again on SIGHUP (for "
                        "logrotate); written by a thread of its own: lines it cannot keep up "
                        "with are dropped and counted, never waited for "
                        "(docs/observability.md)",
                        "a file name, or - for standard output", 0},
    [F_DECISION_LOG_SAMPLE] = {"decision-log-sample", "R", "1",
                               "the fraction of decisions --decision-log writes, chosen at "
                               "random: 1 every one, 0.01 one in a hundred (or as a percentage: "
                               "1%)",
                               "a fraction above 0 and at most 1 with at most six decimals "
                               "(0.01), or a percentage with at most four (1%)",
                               SL_FLAG_APPLIED},
    [F_STORE] = {"store", "URL", "memory://",
                 "where state lives: memory:// (in this process), redis://[USER:PASS@]HOST:PORT"
                 "[/DB] (one central Redis; also ?password=P&user=U) or "
                 "redis-cluster://HOST:PORT[,HOST:PORT...] (a Redis Cluster), so that every "
                 "sluiced on the store enforces one limit; sync+redis://HOST:PORT[?interval_ms=M]"
                 " (or sync+redis-cluster://) decides here on a lease of each limit traded "
                 "with the store every interval (docs/deployment.md)",
                 "memory://, redis://HOST:PORT[/DB], redis-cluster://HOST:PORT[,...], or either "
                 "after sync+",
                 SL_FLAG_APPLIED},
    [F_ONERR] = {"on-store-error", "MODE", "fail_open",
                 "what decides when the store does not answer within --store-timeout-ms: "
                 "fail_open (allow), fail_closed (refuse), local (a limiter in this process, "
                 "at limit / --split); a policy's on_store_error wins",
                 "fail_open, fail_closed or local", SL_FLAG_APPLIED},
    [F_STORE_TIMEOUT] = {"store-timeout-ms", "N", "50",
                         "a check's time budget with a remote store, after which "
                         "--on-store-error decides; a policy's store_timeout_ms wins",
                         "an integer from 1 to 60000", SL_FLAG_APPLIED},
    [F_SPLIT] = {"split", "N", "1",
                 "this sluiced is one of N that share every limit with no coordination: each "
                 "enforces limit / N (docs/deployment.md); with a remote store, the store "
                 "enforces the whole limit and --on-store-error local enforces limit / N",
                 "an integer from 1 to 10000", SL_FLAG_APPLIED},
    [F_FLEET_NODES] = {"fleet-nodes", "N", "1", "the old name of --split",
                       "an integer from 1 to 10000", SL_FLAG_APPLIED},
    [F_PEERS] = {"peers", "LIST", NULL,
                 "a fleet that routes each key to its owner: the RESP addresses "
                 "HOST:PORT,HOST:PORT,... of every sluiced of the fleet, this one included, "
                 "written the same on every node (at most 64); with --self, and the "
                 "memory store; as the config file's peers:, reloaded on SIGHUP "
                 "(docs/deployment.md)",
                 "HOST:PORT,HOST:PORT,... (at most 64)", 0},
    [F_SELF] = {"self", "HOST:PORT", NULL,
                "this sluiced's entry in --peers, written as there",
                "one of --peers' entries", 0},
    [F_AUTH_HEADER] = {"http-auth-header", "NAME", "X-Api-Key",
                       "forward-auth (GET /v1/auth/POLICY): the request header holding the key; "
                       "X-Forwarded-For, Forwarded or X-Real-IP make the key the client's "
                       "address as --trusted-proxies finds it",
                       "a header name of at most 64 bytes", SL_FLAG_APPLIED},
    [F_TRUSTED_PROXIES] = {"trusted-proxies", "CIDR,...", "127.0.0.0/8,::1",
                           "forward-auth by address: the proxies whose X-Forwarded-For, Forwarded "
                           "or X-Real-IP is believed (IPv4 and IPv6 ranges, a bare address one "
                           "host); the client is the socket's peer unless the peer is one of "
                           "them, else the right-most address of the header not in a range, so "
                           "that a client cannot forge its own; none trusts no proxy; the "
                           "default lets a proxy on the same host work without flags",
                           "none, or IPv4/IPv6 ranges ADDR[/BITS] separated by commas (at most "
                           "64)",
                           SL_FLAG_APPLIED},
    [F_DENY_STATUS] = {"http-deny-status", "N", "429",
                       "forward-auth: the status of a denial, 429, 401 or 403 (nginx's "
                       "auth_request passes only 401 and 403 on)",
                       "429, 401 or 403", SL_FLAG_APPLIED},
    [F_HTTP_BIND] = {"http-bind", "ADDR", "--bind's",
                     "the HTTP port's address, when it differs from the RESP port's (RESP "
                     "exposed with a password, HTTP kept on loopback)",
                     "an IPv4 or IPv6 literal", 0},
    [F_HTTP_TOKEN] = {"http-token", "SECRET", "--requirepass's",
                      "the bearer token every HTTP request but GET /healthz (and --http-open's "
                      "paths) must send, as Authorization: Bearer SECRET; compared in constant "
                      "time; without it and --requirepass, HTTP asks for none",
                      "a non-empty string of printable ASCII without spaces", 0},
    [F_HTTP_OPEN] = {"http-open", "PATHS", NULL,
                     "HTTP paths served without the token, comma-separated: /metrics, or a "
                     "prefix ending in / such as /v1/auth/",
                     "paths beginning with /, comma-separated", 0},
    [F_TOP_KEYS] = {"top-keys", "N", "128",
                    "the top keys (SL.TOP, GET /v1/top; docs/observability.md): counters per "
                    "policy, kind (refused, admitted), thread and generation (two per "
                    "--top-window): about 73 KiB per policy, kind and thread at 128; a key "
                    "above 1/N of its policy's "
                    "decisions of a kind is always listed; 0 turns them off",
                    "an integer from 0 to " SL_STR(SL_TOP_KEYS_MAX), SL_FLAG_APPLIED},
    [F_TOP_WINDOW] = {"top-window", "S", "60",
                      "the top keys' window in seconds: they count the decisions of the "
                      "current window and the one before it (the last S to 2S seconds)",
                      "seconds, from 1 to 86400", SL_FLAG_APPLIED},
    [F_TOP_EXACT_RATE] = {"top-exact-rate", "N", "200000",
                          "the top keys count every decision while a thread makes at most N a "
                          "second; above, 1 in S at random with weight S (S the smallest power "
                          "of two that brings the rate to N), so that their cost stays that of N "
                          "a second; 0 counts every decision always",
                          "an integer from 0 to 1000000000", SL_FLAG_APPLIED},
    [F_ALLOW_EMPTY_RELOAD] = {"allow-empty-reload", NULL, NULL,
                              "let SIGHUP load a config file that is empty or has no policies "
                              "while policies are in force (by default such a file is refused "
                              "and the policies stay: a file caught half written removes none)",
                              NULL, SL_FLAG_CLI_ONLY},
    [F_VERSION] = {"version", NULL, NULL, "print the version and exit", NULL, SL_FLAG_CLI_ONLY},
    [F_HELP] = {"help", NULL, NULL, "print this help and exit", NULL, SL_FLAG_CLI_ONLY},
    [F_HELP_MARKDOWN] = {"help-markdown", NULL, NULL,
                         "print the flags as the Markdown table of docs/configuration.md and exit",
                         NULL, SL_FLAG_CLI_ONLY},
};

/* --envoy-headers: off, ratelimit, x-ratelimit or three names, into
 * cfg->envoy_headers (NULL for off). The names are kept in static room:
 * the value may come from a config file's setting, which a reload frees. */
static bool sl_parse_envoy_headers(const char *v, sl_server_config *cfg)
{
    static const char *const ratelimit[3] = {"RateLimit-Limit", "RateLimit-Remaining",
                                             "RateLimit-Reset"};
    static const char *const x_ratelimit[3] = {"X-RateLimit-Limit", "X-RateLimit-Remaining",
                                               "X-RateLimit-Reset"};
    static char names[3][65];
    static const char *custom[3] = {names[0], names[1], names[2]};
    if (strcmp(v, "off") == 0) {
        cfg->envoy_headers = NULL;
        return true;
    }
    if (strcmp(v, "ratelimit") == 0 || strcmp(v, "x-ratelimit") == 0) {
        cfg->envoy_headers = v[0] == 'r' ? ratelimit : x_ratelimit;
        return true;
    }
    char parsed[3][65];
    const char *p = v;
    for (int i = 0; i < 3; i++) {
        size_t n = 0;
        for (; *p && *p != ','; p++, n++) {
            bool ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                      (*p >= '0' && *p <= '9') || *p == '-';
            if (!ok || n == 64)
                return false;
            parsed[i][n] = *p;
        }
        parsed[i][n] = '\0';
        if (n == 0 || (i < 2 && *p != ',') || (i == 2 && *p != '\0'))
            return false;
        if (i < 2)
            p++;
    }
    memcpy(names, parsed, sizeof names);
    cfg->envoy_headers = custom;
    return true;
}

/* "--name ARG" into buf: the flag as the help and the table show it. */
static void sl_flag_synopsis(const sl_flag *f, char *buf, size_t len)
{
    snprintf(buf, len, "--%s%s%s", f->name, f->arg ? " " : "", f->arg ? f->arg : "");
}

/* Writes text to f in lines of at most `width` columns, every line after the
 * first indented by `indent` spaces; `col` is where the first line starts. */
static void sl_wrap(FILE *f, const char *text, int col, int indent, int width)
{
    const char *p = text;
    while (*p) {
        size_t word = strcspn(p, " ");
        if (col > indent && col + 1 + (int)word > width) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', f);
            col++;
        }
        fprintf(f, "%.*s", (int)word, p);
        col += (int)word;
        p += word;
        p += strspn(p, " ");
    }
    fputc('\n', f);
}

static void sl_usage(FILE *f)
{
    int w = 0;
    char syn[64];
    for (int i = 0; i < F_COUNT; i++) {
        sl_flag_synopsis(&sl_flags[i], syn, sizeof syn);
        if ((int)strlen(syn) > w)
            w = (int)strlen(syn);
    }
    fprintf(f, "usage: sluiced [options]\n");
    for (int i = 0; i < F_COUNT; i++) {
        const sl_flag *fl = &sl_flags[i];
        sl_flag_synopsis(fl, syn, sizeof syn);
        char text[512];
        snprintf(text, sizeof text, "%s%s%s%s", fl->help, fl->def ? " (default " : "",
                 fl->def ? fl->def : "", fl->def ? ")" : "");
        fprintf(f, "  %-*s", w + 2, syn);
        sl_wrap(f, text, w + 4, w + 4, 100);
    }
}

/* The flag table of docs/configuration.md, and the line that follows it. */
static void sl_usage_markdown(FILE *f)
{
    char syn[64];
    fprintf(f, "| flag | default | meaning |\n|---|---|---|\n");
    for (int i = 0; i < F_COUNT; i++) {
        const sl_flag *fl = &sl_flags[i];
        sl_flag_synopsis(fl, syn, sizeof syn);
        fprintf(f, "| `%s` | %s | %s |\n", syn, fl->def ? fl->def : fl->arg ? "none" : "",
                fl->help);
    }
}

/* Parses flags into *cfg. `origin` names where they come from in messages
 * ("sluiced" for the command line, "FILE:LINE:COL: server" for the config).
 * Returns 0, or 2 (the exit status) with the error printed. */
static int sl_parse_args(int argc, char **argv, sl_server_config *cfg, const char *origin)
{
    struct option opts[F_COUNT + 1];
    for (int i = 0; i < F_COUNT; i++) {
        int has_arg = sl_flags[i].arg ? required_argument : no_argument;
        opts[i] = (struct option){sl_flags[i].name, has_arg, NULL, SL_FLAG_VAL + i};
    }
    opts[F_COUNT] = (struct option){NULL, 0, NULL, 0};
    int o;
    long long v;
    opterr = 0;
    optind = 0; /* glibc: start afresh, this may be the second list parsed */
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (o < SL_FLAG_VAL || o >= SL_FLAG_VAL + F_COUNT) {
            const char *arg = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
            fprintf(stderr, "%s: unknown or incomplete option '%.60s' (sluiced --help lists "
                            "them)\n",
                    origin, arg);
            return 2;
        }
        enum sl_flag_id id = (enum sl_flag_id)(o - SL_FLAG_VAL);
        const sl_flag *fl = &sl_flags[id];
        /* getopt_long takes any unambiguous prefix ("--snap"); sluiced takes
         * a flag only as it is named, as a config file names it, so that
         * "--conf FILE" is not a --config that sl_find_config_flag missed. */
        const char *as_written = argv[optind - 1];
        if (optarg && !(optarg > as_written && optarg <= as_written + strlen(as_written)))
            as_written = argv[optind - 2];
        size_t nlen = strlen(fl->name);
        if (strncmp(as_written, "--", 2) != 0 || strncmp(as_written + 2, fl->name, nlen) != 0 ||
            (as_written[2 + nlen] != '\0' && as_written[2 + nlen] != '=')) {
            fprintf(stderr, "%s: unknown option '%.60s' (sluiced --help lists them)\n", origin,
                    as_written);
            return 2;
        }
        switch (id) {
        case F_PORT:
        case F_HTTP_PORT:
        case F_GRPC_PORT:
            if (!sl_parse_size(optarg, 65535, &v))
                goto bad;
            *(id == F_PORT ? &cfg->port : id == F_HTTP_PORT ? &cfg->http_port : &cfg->grpc_port) =
                (int)v;
            break;
        case F_BIND:
        case F_HTTP_BIND: {
            /* Numeric only: the listener does not resolve names. */
            struct addrinfo hints = {.ai_flags = AI_NUMERICHOST, .ai_socktype = SOCK_STREAM};
            struct addrinfo *res;
            if (getaddrinfo(optarg, NULL, &hints, &res) != 0)
                goto bad;
            freeaddrinfo(res);
            *(id == F_BIND ? &cfg->bind : &cfg->http_bind) = optarg;
            break;
        }
        case F_THREADS:
            if (!sl_parse_size(optarg, 256, &v) || v < 1)
                goto bad;
            cfg->threads = (int)v;
            break;
        case F_REQUIREPASS:
            if (!*optarg)
                goto bad;
            cfg->requirepass = optarg;
            break;
        case F_HTTP_TOKEN:
            /* It travels in a header: printable, no spaces. */
            if (!*optarg)
                goto bad;
            for (const char *t = optarg; *t; t++)
                if (*t <= ' ' || *t > '~')
                    goto bad;
            cfg->http_token = optarg;
            break;
        case F_HTTP_OPEN:
            /* "/a,/b/": each path begins with '/', nothing empty. */
            if (optarg[0] != '/')
                goto bad;
            for (const char *t = optarg; *t; t++)
                if (*t <= ' ' || *t > '~' || (*t == ',' && t[1] != '/'))
                    goto bad;
            cfg->http_open = optarg;
            break;
        case F_ENVOY_HEADERS:
            if (!sl_parse_envoy_headers(optarg, cfg))
                goto bad;
            break;
        case F_MAXCLIENTS:
            if (!sl_parse_size(optarg, 1000000, &v) || v < 1)
                goto bad;
            cfg->maxclients = (int)v;
            break;
        case F_MAXMEM:
            /* The store refuses a smaller cap: say so here, with the flag. */
            if (!sl_parse_size(optarg, (long long)1 << 50, &v) || (v != 0 && v < 256 * 1024))
                goto bad;
            cfg->max_memory = (size_t)v;
            break;
        case F_MAXKEY:
            if (!sl_parse_size(optarg, 65535, &v) || v < 1)
                goto bad;
            cfg->max_key_bytes = (size_t)v;
            break;
        case F_MAX_ADAPTIVE:
            if (!sl_parse_size(optarg, 1 << 24, &v) || v < 1)
                goto bad;
            cfg->max_adaptive_keys = (size_t)v;
            break;
        case F_MAXREQ:
            if (!sl_parse_size(optarg, 512LL * 1024 * 1024, &v) || v < 1024)
                goto bad;
            cfg->max_request_bytes = (size_t)v;
            break;
        case F_OUTPUT_LIMIT:
            if (!sl_parse_output_limit(optarg, cfg))
                goto bad;
            break;
        case F_REQTIMEOUT:
            if (!sl_parse_size(optarg, 365LL * 86400, &v))
                goto bad;
            cfg->request_timeout_s = (int)v;
            break;
        case F_PORTSHARE:
            if (!sl_parse_size(optarg, 100, &v) || v < 1)
                goto bad;
            cfg->port_share_pct = (int)v;
            break;
        case F_IDLE:
        case F_SNAPINT:
            if (!sl_parse_size(optarg, 365LL * 86400, &v))
                goto bad;
            *(id == F_IDLE ? &cfg->idle_timeout_s : &cfg->snapshot_interval_s) = (int)v;
            break;
        case F_SNAPSHOT:
            if (!*optarg)
                goto bad;
            cfg->snapshot = optarg;
            break;
        case F_DECISION_LOG:
            if (!*optarg)
                goto bad;
            cfg->decision_log = optarg;
            break;
        case F_DECISION_LOG_SAMPLE:
            if (!sl_sample_parse(optarg, strlen(optarg), &cfg->decision_log_ppm))
                goto bad;
            break;
        case F_TOP_KEYS:
            if (!sl_parse_size(optarg, SL_TOP_KEYS_MAX, &v))
                goto bad;
            cfg->top_keys = (size_t)v;
            break;
        case F_TOP_WINDOW:
            if (!sl_parse_size(optarg, 86400, &v) || v < 1)
                goto bad;
            cfg->top_window_s = (int)v;
            break;
        case F_TOP_EXACT_RATE:
            if (!sl_parse_size(optarg, 1000000000, &v))
                goto bad;
            cfg->top_exact_rate = (uint64_t)v;
            break;
        case F_CONFIG: cfg->config_path = optarg; break;
        case F_ENVOY_CONFIG: cfg->envoy_config = optarg; break;
        case F_ALLOW_EMPTY_RELOAD: cfg->allow_empty_reload = true; break;
        case F_AUTH_HEADER:
            if (!*optarg || strlen(optarg) > 64 || strpbrk(optarg, " :\t\r\n"))
                goto bad;
            cfg->http_auth_header = optarg;
            break;
        case F_TRUSTED_PROXIES: {
            char why[160];
            if (sl_trusted_parse(&cfg->trusted_proxies, optarg, strlen(optarg), why,
                                 sizeof why) != 0) {
                fprintf(stderr, "%s: invalid value '%.200s' for --%s: %s\n", origin, optarg,
                        fl->name, why);
                return 2;
            }
            break;
        }
        case F_DENY_STATUS:
            if (!sl_parse_size(optarg, 999, &v) || (v != 429 && v != 401 && v != 403))
                goto bad;
            cfg->http_deny_status = (int)v;
            break;
        case F_LOGLEVEL:
            if (!strcmp(optarg, "debug")) cfg->log_level = SL_LOG_DEBUG;
            else if (!strcmp(optarg, "info")) cfg->log_level = SL_LOG_INFO;
            else if (!strcmp(optarg, "warn")) cfg->log_level = SL_LOG_WARN;
            else if (!strcmp(optarg, "error")) cfg->log_level = SL_LOG_ERROR;
            else goto bad;
            break;
        case F_STORE:
            if (strcmp(optarg, "memory://") != 0 && strncmp(optarg, "redis://", 8) != 0 &&
                strncmp(optarg, "redis-cluster://", 16) != 0 &&
                strncmp(optarg, "sync+redis://", 13) != 0 &&
                strncmp(optarg, "sync+redis-cluster://", 21) != 0)
                goto bad;
            cfg->store_url = optarg;
            break;
        case F_ONERR: {
            sl_on_error e;
            if (sl_on_error_parse(optarg, strlen(optarg), &e) != SL_OK)
                goto bad;
            cfg->on_store_error = (int)e;
            break;
        }
        case F_STORE_TIMEOUT:
            if (!sl_parse_size(optarg, 60000, &v) || v < 1)
                goto bad;
            cfg->store_timeout_ms = (int)v;
            break;
        case F_SPLIT:
        case F_FLEET_NODES:
            if (!sl_parse_size(optarg, 10000, &v) || v < 1)
                goto bad;
            cfg->split = (int)v;
            break;
        case F_PEERS:
            if (!optarg[0])
                goto bad;
            cfg->peers = optarg;
            break;
        case F_SELF:
            if (!optarg[0])
                goto bad;
            cfg->self = optarg;
            break;
        case F_VERSION: printf("sluiced %s\n", SLUICE_VERSION); exit(0);
        case F_HELP: sl_usage(stdout); exit(0);
        case F_HELP_MARKDOWN: sl_usage_markdown(stdout); exit(0);
        default: /* the unavailable ones, refused above */ return 2;
        }
        continue;
    bad:
        fprintf(stderr, "%s: invalid value '%s' for --%s: %s\n", origin, optarg, fl->name,
                fl->valid);
        return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", origin, argv[optind]);
        return 2;
    }
    return 0;
}

/* Sets every default the table shows as applied, with the flags' parser. */
static void sl_apply_defaults(sl_server_config *cfg)
{
    for (int i = 0; i < F_COUNT; i++) {
        const sl_flag *fl = &sl_flags[i];
        if (!(fl->flags & SL_FLAG_APPLIED))
            continue;
        char flag[64];
        snprintf(flag, sizeof flag, "--%s", fl->name);
        char *args[] = {(char *)"sluiced", flag, (char *)fl->def, NULL};
        int rc = sl_parse_args(3, args, cfg, "sluiced: default");
        (void)rc;
        assert(rc == 0); /* the table's defaults parse */
    }
}

static sl_server sl_srv;
static uv_signal_t sl_sigterm, sl_sigint, sl_sighup;
static uv_timer_t sl_snapshot_timer, sl_sweep_timer;

/* Whether addr, a numeric address, is a loopback one: 127.0.0.0/8, ::1, or
 * 127.0.0.0/8 mapped into IPv6. */
static bool sl_is_loopback(const char *addr)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, addr, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, addr, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6) || (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127);
    return false;
}

/* Checks at start that the snapshot can be written where it is to go, so
 * that a path that cannot be is refused now, and not found out at
 * shutdown, when the state it should keep is about to be lost. The store
 * writes a temporary file beside the path and renames it over the path:
 * this creates and removes such a file, and refuses a path that is there
 * but is not a regular file. Returns 0, or -1 with the reason printed. */
static int sl_snapshot_check(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        fprintf(stderr, "sluiced: --snapshot %s: not a regular file\n", path);
        return -1;
    }
    size_t len = strlen(path);
    char *tmp = malloc(len + sizeof ".tmpXXXXXX");
    if (!tmp) {
        fprintf(stderr, "sluiced: --snapshot %s: out of memory\n", path);
        return -1;
    }
    memcpy(tmp, path, len);
    memcpy(tmp + len, ".tmpXXXXXX", sizeof ".tmpXXXXXX");
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "sluiced: --snapshot %s: cannot create a file in its directory: %s\n", path,
                strerror(errno));
        free(tmp);
        return -1;
    }
    close(fd);
    unlink(tmp);
    free(tmp);
    return 0;
}

/* Removes what writes to the snapshot interrupted by a crash (kill -9, a
 * power cut) left beside it: each such file is as big as a snapshot, and
 * without this they pile up, one per crash. */
static void sl_snapshot_clean_start(const char *path)
{
    size_t n = 0;
    uint64_t bytes = 0;
    if (sl_store_snapshot_clean(path, &n, &bytes) != SL_OK)
        sl_log(SL_LOG_WARN, "snapshot %s: cannot look for temporary files left by a crash: %s",
               path, strerror(errno));
    else if (n > 0)
        sl_log(SL_LOG_INFO, "snapshot %s: removed %zu temporary file%s (%llu bytes) left by "
                            "writes a crash interrupted",
               path, n, n == 1 ? "" : "s", (unsigned long long)bytes);
}

/* Is the store this process's own memory (--store memory://)? */
static bool sl_store_is_memory(const sl_server_config *cfg)
{
    return cfg->store_url == NULL || strcmp(cfg->store_url, "memory://") == 0;
}

/* --peers' company: --self, the memory store (each node's states are its
 * own keys'), and no --split (an owner enforces its keys' whole limits).
 * Builds the membership (srv->peers) before any port is opened, so that a
 * bad list is refused as any bad flag is. */
static int sl_peers_check(sl_server *srv)
{
    const sl_server_config *cfg = &srv->cfg;
    if (!cfg->peers && !cfg->self)
        return 0;
    const char *why = NULL;
    if (!cfg->peers)
        why = "--self is this node's entry in --peers: give --peers too";
    else if (!cfg->self)
        why = "--peers needs --self, this node's entry in the list";
    else if (!sl_store_is_memory(cfg))
        why = "--peers routes keys between the memory stores of sluiced nodes: it cannot be "
              "used with a remote --store (the store already shares the limits)";
    else if (cfg->split > 1)
        why = "--peers and --split cannot be used together: with --peers each key's owner "
              "enforces its whole limit";
    char err[256];
    if (!why && !(srv->peers = sl_peers_new(cfg->peers, cfg->self, err, sizeof err)))
        why = err + (strncmp(err, "ERR ", 4) == 0 ? 4 : 0);
    if (why) {
        fprintf(stderr, "sluiced: %s\n", why);
        return 2;
    }
    /* Behind a port mapping the two may differ; more often --self names
     * another node, which would then get this node's keys counted twice. */
    const char *port = strrchr(cfg->self, ':') + 1;
    char mine[16];
    snprintf(mine, sizeof mine, "%d", cfg->port);
    if (strcmp(port, mine) != 0)
        sl_log(SL_LOG_WARN, "--self %s is not on --port %d: the other nodes send this node's "
                            "keys to %s",
               cfg->self, cfg->port, cfg->self);
    return 0;
}

/* A peer that the first worker sees down, or the last sees up again. */
static void sl_peer_note(const char *peer, bool up)
{
    if (up)
        sl_log(SL_LOG_INFO, "peer %s answers again: its keys are routed to it again", peer);
    else
        sl_log(SL_LOG_WARN, "peer %s does not answer: marked down, its keys go to their next "
                            "owner, where they start afresh", peer);
}

/* With --peers, the backend becomes a route over the memory backend (this
 * node's states, which a peer's SL.DECIDE is decided on) and the redis
 * backend over the peers (every other request). */
static int sl_peers_start(sl_server *srv)
{
    char err[256];
    srv->peers->note = sl_peer_note;
    sl_redis_config rcfg = {.on_error = (sl_on_error)srv->cfg.on_store_error,
                            .timeout_ms = srv->cfg.store_timeout_ms,
                            .fleet_nodes = (int32_t)srv->peers->n,
                            .local_memory = srv->cfg.max_memory,
                            .peers = srv->peers,
                            .peer_password = srv->cfg.requirepass};
    sl_backend *remote = NULL, *route = NULL;
    if (sl_backend_redis(&rcfg, &remote, err, sizeof err) != SL_OK) {
        sl_log(SL_LOG_ERROR, "--peers: %s", err + (strncmp(err, "ERR ", 4) == 0 ? 4 : 0));
        return 1;
    }
    if (!(route = sl_backend_route(srv->backend, remote, srv->peers))) {
        remote->ops->free(remote);
        sl_log(SL_LOG_ERROR, "cannot create the store: out of memory");
        return 1;
    }
    srv->backend = route;
    sl_log(SL_LOG_INFO, "routing keys among %zu peers, this node %s", srv->peers->n,
           srv->peers->names[srv->peers->self]);
    return 0;
}

static void sl_on_snapshot_timer(uv_timer_t *t)
{
    sl_snapshot_write(t->data, "periodic");
}

static void sl_on_sweep_timer(uv_timer_t *t)
{
    sl_server *srv = t->data;
    if (srv->store)
        sl_store_sweep(srv->store, sl_now_mono(), 4096);
}

static void sl_on_stop_signal(uv_signal_t *s, int signum)
{
    sl_log(SL_LOG_INFO, "%s: shutting down", signum == SIGTERM ? "SIGTERM" : "SIGINT");
    uv_stop(s->loop);
}

static uv_timer_t sl_retire_timer;

/* The config file's server: settings as they were at start. sl_server_config
 * points into their values (cfg.bind, cfg.snapshot, ...), so they are kept
 * apart from the config they came in, which a reload frees; and SIGHUP
 * compares a reloaded file's settings with them. */
static sl_config_setting *sl_start_settings;
static size_t sl_start_nsettings;

static void sl_start_settings_free(void)
{
    for (size_t i = 0; i < sl_start_nsettings; i++) {
        free(sl_start_settings[i].name);
        free(sl_start_settings[i].value);
    }
    free(sl_start_settings);
    sl_start_settings = NULL;
    sl_start_nsettings = 0;
}

/* The value of setting `name` in list, or NULL. */
static const char *sl_setting_find(const sl_config_setting *list, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i].name, name) == 0)
            return list[i].value;
    return NULL;
}

/* Writes into buf the names of the settings that differ between the start's
 * and next's server: sections (set in one only, or to other values), comma
 * separated, but for `skip` (NULL: none); returns how many. */
static int sl_settings_changed(const sl_config *next, const char *skip, char *buf, size_t len)
{
    int count = 0;
    size_t used = 0;
    buf[0] = '\0';
    for (int pass = 0; pass < 2; pass++) {
        const sl_config_setting *list = pass ? sl_start_settings : next->settings;
        size_t n = pass ? sl_start_nsettings : next->nsettings;
        const sl_config_setting *other = pass ? next->settings : sl_start_settings;
        size_t nother = pass ? next->nsettings : sl_start_nsettings;
        for (size_t i = 0; i < n; i++) {
            const char *theirs = sl_setting_find(other, nother, list[i].name);
            /* A setting in both lists is named by the first pass only. */
            if (theirs && (pass == 1 || strcmp(theirs, list[i].value) == 0))
                continue;
            if (skip && strcmp(list[i].name, skip) == 0)
                continue;
            int m = snprintf(buf + used, len - used, "%s%s", count ? ", " : "", list[i].name);
            if (m > 0 && (size_t)m < len - used)
                used += (size_t)m;
            count++;
        }
    }
    return count;
}

/* A SIGHUP that came while the previous reload was still being applied: it
 * is run, once, when that one is retired, and reads the file as it is
 * then; any number of SIGHUPs meanwhile are one reload of the newest file. */
static bool sl_reload_pending;
/* Likewise for --envoy-config's directory alone (a change seen in it). */
static bool sl_envoy_pending;

static void sl_reload(sl_server *srv);
static void sl_reload_envoy(sl_server *srv, const char *why);

/* Frees the old config once every worker has seen the new epoch, then runs
 * the reload that was asked for meanwhile, if one was. */
static void sl_on_retire_timer(uv_timer_t *t)
{
    sl_server *srv = t->data;
    uint64_t epoch = atomic_load(&srv->epoch);
    for (int i = 0; i < srv->nworkers; i++)
        if (atomic_load(&srv->workers[i].seen_epoch) != epoch)
            return;
    sl_config_free(srv->retired);
    srv->retired = NULL;
    sl_envoy_free(srv->envoy_retired);
    srv->envoy_retired = NULL;
    uv_timer_stop(t);
    if (sl_reload_pending) {
        sl_reload_pending = false;
        sl_envoy_pending = false;
        sl_log(SL_LOG_INFO, "SIGHUP: running the reload asked for during the previous one");
        sl_reload(srv);
        /* The manager was told RELOADING=1 when that SIGHUP came, and
         * waits for this to know that it is over. */
        sl_notify("READY=1");
    } else if (sl_envoy_pending) {
        sl_envoy_pending = false;
        sl_reload_envoy(srv, "changed");
    }
}

static void sl_say_reload(void *arg, const char *line)
{
    sl_log(SL_LOG_WARN, "SIGHUP: %s", line);
}

/* Puts a new config and Envoy configuration in force (either may be the
 * one in force already): the old ones are retired, and freed once every
 * worker has seen the new epoch (sl_on_retire_timer). */
static void sl_swap_configs(sl_server *srv, sl_config *next, sl_envoy_config *envoy)
{
    if (next != atomic_load(&srv->config)) {
        srv->retired = atomic_exchange(&srv->config, next);
        sl_metrics_reset_policies(srv); /* the indexes now name other policies */
    }
    if (envoy != atomic_load(&srv->envoy))
        srv->envoy_retired = atomic_exchange(&srv->envoy, envoy);
    atomic_fetch_add(&srv->epoch, 1);
    sl_workers_wake(srv);
    uv_timer_start(&sl_retire_timer, sl_on_retire_timer, 10, 10);
}

/* Reads --envoy-config's directory again: in force when it loads whole,
 * refused with the file, line and key of its first error otherwise. */
static void sl_reload_envoy(sl_server *srv, const char *why)
{
    sl_envoy_config *next;
    char err[512];
    if (sl_envoy_load_dir(srv->cfg.envoy_config, &next, err, sizeof err) != 0) {
        sl_log(SL_LOG_ERROR, "envoy config %s (%s): refused, keeping the one in force: %s",
               srv->cfg.envoy_config, why, err);
        return;
    }
    sl_envoy_align(next, srv->clock_offset_ns);
    sl_swap_configs(srv, atomic_load(&srv->config), next);
    /* Store keys do not depend on the rules: a limit changed in place
     * applies to the state its key holds (a window keeps its count). */
    sl_log(SL_LOG_INFO, "envoy config %s (%s): reloaded, %zu domain%s; keys keep their state",
           srv->cfg.envoy_config, why, next->ndomains, next->ndomains == 1 ? "" : "s");
}

static uv_fs_event_t sl_envoy_watch;
static uv_timer_t sl_envoy_settle;

/* A change in the directory: read it once the writes have settled (an
 * editor's or a deploy's several events are one reload). */
static void sl_on_envoy_settled(uv_timer_t *t)
{
    sl_server *srv = t->data;
    if (srv->retired || srv->envoy_retired) {
        sl_envoy_pending = true;
        return;
    }
    sl_reload_envoy(srv, "changed");
}

static void sl_on_envoy_change(uv_fs_event_t *h, const char *filename, int events, int status)
{
    uv_timer_start(&sl_envoy_settle, sl_on_envoy_settled, 200, 0);
}

/*
 * A reloaded file's peers: setting, put in force when it changed (the
 * fleet's transports take it within a tick), so that a node can be added
 * or removed without restarting the others. --self stays: a node does not
 * change its own address. Returns whether the setting was handled here (it
 * is then no setting to restart for); false when there is none, or when
 * --peers came from the command line (which wins over the file).
 */
static bool sl_reload_peers(sl_server *srv, const sl_config *next)
{
    const char *list = sl_setting_find(next->settings, next->nsettings, "peers");
    const char *start = sl_setting_find(sl_start_settings, sl_start_nsettings, "peers");
    if (!srv->peers || !list || srv->cfg.peers != start)
        return false;
    const char *self = sl_setting_find(next->settings, next->nsettings, "self");
    sl_peers *cur = sl_peers_latest(srv->peers);
    if (self && strcmp(self, srv->cfg.self) != 0) {
        sl_log(SL_LOG_ERROR, "SIGHUP: peers not reloaded: self changed (%s, now %s), which "
                             "takes a restart",
               srv->cfg.self, self);
        return true;
    }
    if (strcmp(list, cur->list) == 0)
        return true;
    char err[256];
    sl_peers *p = sl_peers_new(list, srv->cfg.self, err, sizeof err);
    if (!p) {
        sl_log(SL_LOG_ERROR, "SIGHUP: peers not reloaded, keeping %zu: %s", cur->n,
               err + (strncmp(err, "ERR ", 4) == 0 ? 4 : 0));
        return true;
    }
    p->note = sl_peer_note;
    sl_peers_replace(srv->peers, p);
    sl_log(SL_LOG_INFO, "SIGHUP: routing keys among %zu peers now (%zu before): the keys that "
                        "move start afresh at their new owners",
           p->n, cur->n);
    return true;
}

/* Loads the config file again and puts it in force. A bad file is refused
 * with where and why, and the old policies stay; what the new one changes
 * for the keys' states is logged, policy by policy. Server settings take
 * effect at restart. The caller has checked that no reload is being
 * applied (srv->retired is NULL). */
static void sl_reload_policies(sl_server *srv)
{
    sl_config *next;
    char err[512];
    if (sl_config_load(srv->cfg.config_path, &next, err, sizeof err) != 0) {
        sl_log(SL_LOG_ERROR, "SIGHUP: config refused, keeping the old policies: %s", err);
        return;
    }
    /* An empty file is most often one caught while it is being written (an
     * editor or a deploy that truncates, then writes): taking it would lift
     * every limit at once. */
    const sl_config *cur = atomic_load(&srv->config);
    size_t in_force = cur ? cur->npolicies + cur->nadaptive : 0;
    if (next->npolicies + next->nadaptive == 0 && in_force > 0 && !srv->cfg.allow_empty_reload) {
        sl_log(SL_LOG_ERROR, "SIGHUP: config refused, keeping the old policies: %s %s and would "
                             "remove all %zu policies in force (--allow-empty-reload lets it)",
               srv->cfg.config_path, next->empty ? "is empty" : "has no policies", in_force);
        sl_config_free(next);
        return;
    }
    if (!sl_plans_redis_allowed(srv, next, err, sizeof err)) {
        sl_log(SL_LOG_ERROR, "SIGHUP: config refused, keeping the old policies: %s", err);
        sl_config_free(next);
        return;
    }
    sl_config_align(next, srv->clock_offset_ns);
    sl_config_describe_reload(atomic_load(&srv->config), next, sl_say_reload, NULL);
    bool peers = sl_reload_peers(srv, next);
    char changed[512];
    if (sl_settings_changed(next, peers ? "peers" : NULL, changed, sizeof changed) > 0)
        sl_log(SL_LOG_WARN, "SIGHUP: server settings take effect at the next start, not now: "
                            "%s changed in %s",
               changed, srv->cfg.config_path);
    sl_plans_redis_reload(srv, next); /* carries the hash tables over */
    sl_swap_configs(srv, next, atomic_load(&srv->envoy));
    /* What the reload's lines said of each key's limiter holds from now,
     * not from each key's next acquire. */
    sl_adaptive_reconfigure(srv->limiters, next, sl_now_mono());
    sl_log(SL_LOG_INFO, "SIGHUP: reloaded %s: %zu policies", srv->cfg.config_path,
           next->npolicies + next->nadaptive);
}

/* SIGHUP's reload: the config file, then --envoy-config's directory (once
 * the policies' swap is applied, when there was one: one retirement at a
 * time). */
static void sl_reload(sl_server *srv)
{
    if (srv->cfg.config_path)
        sl_reload_policies(srv);
    if (!srv->cfg.envoy_config)
        return;
    if (srv->retired)
        sl_envoy_pending = true;
    else
        sl_reload_envoy(srv, "SIGHUP");
}

/* SIGHUP: reload now, or, while the previous reload is still being applied
 * (some worker may still hold the config it retired), once that one is
 * retired. Returns whether the reload is over (false: it is pending). */
static bool sl_on_sighup(uv_signal_t *s, int signum)
{
    sl_server *srv = s->data;
    /* The decision log's file first (logrotate renamed it, and waits for
     * no reload), whatever the config does. */
    sl_dlog_reopen(srv->dlog);
    if (!srv->cfg.config_path && !srv->cfg.envoy_config) {
        sl_log(SL_LOG_INFO, "SIGHUP: no config file to reload");
        return true;
    }
    if (srv->retired || srv->envoy_retired) {
        if (!sl_reload_pending)
            sl_log(SL_LOG_INFO, "SIGHUP: the previous reload is still being applied; this one "
                                "runs when it is done");
        sl_reload_pending = true;
        return false;
    }
    sl_reload(srv);
    return true;
}

/* SIGHUP under a service manager: the reload is bracketed by RELOADING=1 and
 * READY=1, so that `systemctl reload` shows it and a notify-reload manager
 * knows when it is over (a refused config still ends the reload). A pending
 * reload sends its READY=1 when it has run (sl_on_retire_timer). */
static void sl_on_sighup_notify(uv_signal_t *s, int signum)
{
    sl_notify_reloading();
    if (sl_on_sighup(s, signum))
        sl_notify("READY=1");
}

/* The value of --config in argv, or NULL. */
static const char *sl_find_config_flag(int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            path = argv[++i];
        else if (strncmp(argv[i], "--config=", 9) == 0)
            path = argv[i] + 9;
    }
    return path;
}

/* The secrets given as flags are copied out of argv, and argv's bytes are
 * overwritten, because ps and /proc/PID/cmdline show every process's
 * arguments to every local user (curl and mysql do the same). Of --store's
 * URL only the password is hidden, so that ps still tells which store a
 * sluiced uses. A config file readable by sluiced alone keeps secrets off
 * the command line altogether. */
static char *sl_secret_copies[3];

/* Is p inside one of argv's strings (and not in a config file's value)? */
static bool sl_in_argv(const char *p, int argc, char **argv)
{
    uintptr_t a = (uintptr_t)p;
    for (int i = 0; i < argc; i++)
        if (a >= (uintptr_t)argv[i] && a <= (uintptr_t)argv[i] + strlen(argv[i]))
            return true;
    return false;
}

static void sl_mask(char *from, char *to)
{
    for (; from < to; from++)
        *from = '*';
}

/* Overwrites the password of a redis:// or redis-cluster:// URL in place:
 * the userinfo's after its ':', and every password= query parameter. */
static void sl_mask_url_password(char *url)
{
    char *auth = strstr(url, "://");
    if (!auth)
        return;
    auth += 3;
    char *end = auth + strcspn(auth, "/?");
    char *at = NULL;
    for (char *c = auth; c < end; c++)
        if (*c == '@')
            at = c;
    if (at) {
        char *colon = memchr(auth, ':', (size_t)(at - auth));
        if (colon)
            sl_mask(colon + 1, at);
    }
    char *q = strchr(end, '?');
    while (q) {
        q++;
        char *next = q + strcspn(q, "&");
        if (strncmp(q, "password=", 9) == 0)
            sl_mask(q + 9, next);
        q = *next ? next : NULL;
    }
}

/* Moves each secret that came from argv into memory of its own and masks
 * it in argv. Returns false when out of memory. */
static bool sl_hide_secrets(int argc, char **argv, sl_server_config *cfg)
{
    const char **secrets[] = {&cfg->requirepass, &cfg->http_token, &cfg->store_url};
    for (size_t i = 0; i < sizeof secrets / sizeof *secrets; i++) {
        char *arg = (char *)*secrets[i];
        if (!arg || !sl_in_argv(arg, argc, argv))
            continue;
        if (!(sl_secret_copies[i] = strdup(arg)))
            return false;
        *secrets[i] = sl_secret_copies[i];
        if (secrets[i] == &cfg->store_url)
            sl_mask_url_password(arg);
        else
            sl_mask(arg, arg + strlen(arg));
    }
    return true;
}

static void sl_secret_copies_free(void)
{
    for (size_t i = 0; i < sizeof sl_secret_copies / sizeof *sl_secret_copies; i++) {
        free(sl_secret_copies[i]);
        sl_secret_copies[i] = NULL;
    }
}

/* Applies the config file's server settings with the flags' own parser.
 * A setting is named exactly as its flag is (no abbreviation). */
static int sl_apply_settings(const sl_config_setting *settings, size_t n, const char *path,
                             sl_server_config *cfg)
{
    for (size_t i = 0; i < n; i++) {
        const sl_config_setting *st = &settings[i];
        char flag[80], origin[600];
        snprintf(flag, sizeof flag, "--%s", st->name);
        snprintf(origin, sizeof origin, "sluiced: %s:%d:%d: server", path, st->line, st->column);
        const sl_flag *fl = NULL;
        for (int f = 0; f < F_COUNT && !fl; f++)
            if (strcmp(sl_flags[f].name, st->name) == 0)
                fl = &sl_flags[f];
        if (!fl) {
            fprintf(stderr, "%s: unknown setting '%s' (sluiced --help lists them)\n", origin,
                    st->name);
            return 2;
        }
        if (fl->flags & SL_FLAG_CLI_ONLY) {
            fprintf(stderr, "%s: %s is a command-line flag, not a setting\n", origin, st->name);
            return 2;
        }
        char *args[] = {(char *)"sluiced", flag, st->value, NULL};
        int rc = sl_parse_args(fl->arg ? 3 : 2, args, cfg, origin);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int main(int argc, char **argv)
{
    sl_server *srv = &sl_srv;
    /* Hold the signals until their handlers are in place: a SIGTERM that
     * arrives while the store loads must still shut down cleanly. The
     * worker threads inherit the mask and never take them. */
    sigset_t held;
    sigemptyset(&held);
    sigaddset(&held, SIGTERM);
    sigaddset(&held, SIGINT);
    sigaddset(&held, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &held, NULL);

    srv->cfg = (sl_server_config){.snapshot_interval_s = -1};
    sl_apply_defaults(&srv->cfg);
    srv->clock_offset_ns = sl_clock_offset();
    /* The config file first, then the flags: a flag wins over the file. */
    int rc;
    const char *config_path = sl_find_config_flag(argc, argv);
    if (config_path) {
        sl_config *conf;
        char err[512];
        if (sl_config_load(config_path, &conf, err, sizeof err) != 0) {
            fprintf(stderr, "sluiced: %s\n", err);
            return 2;
        }
        sl_config_align(conf, srv->clock_offset_ns);
        atomic_store(&srv->config, conf);
        sl_start_settings = conf->settings;
        sl_start_nsettings = conf->nsettings;
        conf->settings = NULL;
        conf->nsettings = 0;
        rc = sl_apply_settings(sl_start_settings, sl_start_nsettings, config_path, &srv->cfg);
        if (rc != 0)
            return rc;
    }
    rc = sl_parse_args(argc, argv, &srv->cfg, "sluiced");
    if (rc != 0)
        return rc;
    if (!sl_hide_secrets(argc, argv, &srv->cfg)) {
        fprintf(stderr, "sluiced: out of memory\n");
        return 1;
    }
    sl_log_set_level((enum sl_log_level)srv->cfg.log_level);
    if (srv->cfg.threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        srv->cfg.threads = n > 0 ? (int)n : 1;
    }
    srv->nworkers = srv->cfg.threads;
    signal(SIGPIPE, SIG_IGN);
    /* A snapshot past the file size limit (RLIMIT_FSIZE) must fail as a
     * full disk does, with an error the snapshot reports, not kill the
     * server and every state with it. */
    signal(SIGXFSZ, SIG_IGN);
    if (srv->cfg.port == 0 && srv->cfg.http_port == 0 && srv->cfg.grpc_port == 0) {
        fprintf(stderr, "sluiced: --port 0, --http-port 0 and --grpc-port 0 turn every "
                        "listener off: nothing to serve\n");
        return 2;
    }
    if (srv->cfg.port != 0 && srv->cfg.port == srv->cfg.http_port &&
        strcmp(srv->cfg.bind, sl_http_bind(&srv->cfg)) == 0) {
        char addr[SL_LOG_ADDR_MAX];
        fprintf(stderr, "sluiced: cannot listen on %s for both RESP and HTTP (--port and "
                        "--http-port are the same): Address already in use\n",
                sl_log_addr(addr, srv->cfg.bind, srv->cfg.port));
        return 2;
    }
    if (srv->cfg.snapshot && sl_snapshot_check(srv->cfg.snapshot) != 0)
        return 2;
    if (srv->cfg.decision_log) {
        uint64_t dseed;
        if (getrandom(&dseed, sizeof dseed, 0) != sizeof dseed)
            dseed = (uint64_t)sl_now_wall();
        char err[600];
        srv->dlog = sl_dlog_open(srv->cfg.decision_log, srv->cfg.decision_log_ppm, srv->nworkers,
                                 dseed, srv->cfg.max_key_bytes, err, sizeof err);
        if (!srv->dlog) {
            fprintf(stderr, "sluiced: --decision-log: %s\n", err);
            return 2;
        }
    }
    if (sl_peers_check(srv) != 0)
        return 2;
    if (srv->cfg.port && !srv->cfg.requirepass && !sl_is_loopback(srv->cfg.bind))
        sl_log(SL_LOG_WARN, "will listen on %s, not a loopback address, without --requirepass: "
                            "anyone who can reach it can take from and reset any limit",
               srv->cfg.bind);
    if (srv->cfg.http_port && !sl_http_token(&srv->cfg) && !sl_is_loopback(sl_http_bind(&srv->cfg)))
        sl_log(SL_LOG_WARN, "will serve HTTP on %s, not a loopback address, without --http-token "
                            "or --requirepass: anyone who can reach it can take from any limit",
               sl_http_bind(&srv->cfg));
    /* The ports first: a second server on a port is refused before it
     * spends any time loading a snapshot. */
    if (sl_listeners_open(srv) != 0)
        return 1;
    /* After the ports: a second sluiced started by mistake on the same
     * ports and snapshot is refused above, before it could remove the
     * temporary file of a write the first one has under way. */
    if (srv->cfg.snapshot)
        sl_snapshot_clean_start(srv->cfg.snapshot);

    if (getrandom(srv->lease_key, sizeof srv->lease_key, 0) != sizeof srv->lease_key) {
        sl_log(SL_LOG_ERROR, "getrandom: %s", strerror(errno));
        return 1;
    }
    uint64_t seed;
    if (getrandom(&seed, sizeof seed, 0) != sizeof seed)
        seed = (uint64_t)sl_now_wall();
    /* Adaptive limits are the node's own, whatever the store: a key's
     * estimate follows what this node's callers report. */
    srv->limiters = sl_limiters_new(srv->cfg.max_adaptive_keys,
                                    srv->cfg.max_key_bytes + SL_POLICY_NAME_MAX + 1);
    if (!srv->limiters) {
        sl_log(SL_LOG_ERROR, "cannot create the adaptive limiters: out of memory");
        return 1;
    }
    if (sl_store_is_memory(&srv->cfg)) {
        sl_store_config scfg = {.max_memory = srv->cfg.max_memory,
                                .max_key_len = srv->cfg.max_key_bytes,
                                .seed = seed};
        rc = sl_store_new(&scfg, &srv->store);
        if (rc != SL_OK) {
            sl_log(SL_LOG_ERROR, "cannot create the store: %s", sl_strerror(rc));
            return 1;
        }
        if (srv->cfg.snapshot && access(srv->cfg.snapshot, F_OK) != 0) {
            sl_log(SL_LOG_INFO, "no snapshot at %s yet: starting empty", srv->cfg.snapshot);
        } else if (srv->cfg.snapshot) {
            size_t loaded = 0;
            rc = sl_store_snapshot_load(srv->store, srv->cfg.snapshot, sl_now_mono(), sl_now_wall(),
                                        &loaded);
            if (rc != SL_OK) {
                sl_log(SL_LOG_ERROR, "snapshot %s refused: %s", srv->cfg.snapshot, sl_strerror(rc));
                return 1;
            }
            sl_log(SL_LOG_INFO, "restored %zu keys from %s", loaded, srv->cfg.snapshot);
        }
        srv->backend = sl_backend_memory(srv->store);
        if (srv->backend && srv->cfg.split > 1) {
            sl_backend *split = sl_backend_split(srv->backend, srv->cfg.split);
            if (!split)
                srv->backend->ops->free(srv->backend);
            srv->backend = split;
        }
        if (!srv->backend) {
            sl_log(SL_LOG_ERROR, "cannot create the store: out of memory");
            return 1;
        }
        if (srv->peers && sl_peers_start(srv) != 0)
            return 1;
    } else {
        /* States live in Redis: snapshots are Redis's business (RDB, AOF). */
        if (srv->cfg.snapshot) {
            sl_log(SL_LOG_ERROR, "--snapshot is for the memory store: with a Redis store the "
                                 "states are Redis's to persist (RDB or AOF)");
            return 1;
        }
        char err[256];
        sl_redis_config rcfg = {.url = srv->cfg.store_url,
                                .on_error = (sl_on_error)srv->cfg.on_store_error,
                                .timeout_ms = srv->cfg.store_timeout_ms,
                                .fleet_nodes = srv->cfg.split,
                                .local_memory = srv->cfg.max_memory};
        bool sync = strncmp(srv->cfg.store_url, "sync+", 5) == 0;
        if ((sync ? sl_backend_sync(&rcfg, &srv->backend, err, sizeof err)
                  : sl_backend_redis(&rcfg, &srv->backend, err, sizeof err)) != SL_OK) {
            /* Not the URL: it may hold a password. The backend words its
             * errors as Redis replies do ("ERR ..."): a log line needs no
             * prefix. */
            sl_log(SL_LOG_ERROR, "--store: %s", err + (strncmp(err, "ERR ", 4) == 0 ? 4 : 0));
            return 1;
        }
    }

    sl_config *conf = atomic_load(&srv->config);
    char perr[512];
    if (!sl_plans_redis_allowed(srv, conf, perr, sizeof perr)) {
        sl_log(SL_LOG_ERROR, "%s: %s", srv->cfg.config_path, perr);
        return 2;
    }
    /* Said before the workers run, so that the lines are in the log by the
     * time a client is answered. */
    char resp[SL_LOG_ADDR_MAX + 8] = "off", http[SL_LOG_ADDR_MAX + 24] = "off";
    char addr[SL_LOG_ADDR_MAX];
    if (srv->cfg.port)
        snprintf(resp, sizeof resp, "on %s", sl_log_addr(addr, srv->cfg.bind, srv->cfg.port));
    if (srv->cfg.http_port)
        snprintf(http, sizeof http, "on %s%s",
                 sl_log_addr(addr, sl_http_bind(&srv->cfg), srv->cfg.http_port),
                 sl_http_token(&srv->cfg) ? " (bearer token)" : "");
    char grpc[SL_LOG_ADDR_MAX + 16] = "";
    if (srv->cfg.grpc_port)
        snprintf(grpc, sizeof grpc, ", gRPC on %s",
                 sl_log_addr(addr, srv->cfg.bind, srv->cfg.grpc_port));
    /* The store by its kind only: its URL may hold a password. */
    sl_log(SL_LOG_INFO, "sluiced %s: RESP %s, HTTP %s%s, %d threads, store %s, %zu policies",
           SLUICE_VERSION, resp, http, grpc, srv->nworkers, srv->backend->ops->name,
           conf ? conf->npolicies + conf->nadaptive : 0);
    if (srv->cfg.snapshot && srv->cfg.snapshot_interval_s < 0)
        srv->cfg.snapshot_interval_s = SL_SNAPSHOT_INTERVAL_DEFAULT;
    if (srv->cfg.snapshot && srv->cfg.snapshot_interval_s > 0)
        sl_log(SL_LOG_INFO, "snapshot %s: written every %d s and at shutdown", srv->cfg.snapshot,
               srv->cfg.snapshot_interval_s);
    else if (srv->cfg.snapshot)
        sl_log(SL_LOG_INFO, "snapshot %s: written at shutdown only", srv->cfg.snapshot);
    if (srv->cfg.envoy_config) {
        sl_envoy_config *envoy;
        char err[512];
        if (sl_envoy_load_dir(srv->cfg.envoy_config, &envoy, err, sizeof err) != 0) {
            sl_log(SL_LOG_ERROR, "--envoy-config %s: %s", srv->cfg.envoy_config, err);
            return 1;
        }
        sl_envoy_align(envoy, srv->clock_offset_ns);
        atomic_store(&srv->envoy, envoy);
        sl_log(SL_LOG_INFO, "envoy config %s: %zu domain%s%s", srv->cfg.envoy_config,
               envoy->ndomains, envoy->ndomains == 1 ? "" : "s",
               srv->cfg.grpc_port ? "" : " (not served: --grpc-port is 0)");
    }
    srv->started_mono = sl_now_mono();
    uv_loop_t *loop = uv_default_loop();
    if (srv->cfg.envoy_config) {
        uv_timer_init(loop, &sl_envoy_settle);
        sl_envoy_settle.data = srv;
        uv_fs_event_init(loop, &sl_envoy_watch);
        int wrc = uv_fs_event_start(&sl_envoy_watch, sl_on_envoy_change, srv->cfg.envoy_config, 0);
        if (wrc != 0)
            sl_log(SL_LOG_WARN, "envoy config %s: changes are not watched (%s): SIGHUP reads it "
                                "again",
                   srv->cfg.envoy_config, uv_strerror(wrc));
    }
    /* The plans of Redis hashes are read before a client is answered. */
    sl_plans_redis_start(srv, loop);
    if (srv->dlog) {
        if (sl_dlog_start(srv->dlog) != 0)
            return 1;
        char rate[16];
        bool all = srv->cfg.decision_log_ppm >= SL_SAMPLE_ALL;
        sl_log(SL_LOG_INFO, "decision log %s: %s%s",
               strcmp(srv->cfg.decision_log, "-") == 0 ? "(standard output)"
                                                      : srv->cfg.decision_log,
               all ? "every decision" : sl_sample_format(srv->cfg.decision_log_ppm, rate),
               all ? "" : " of the decisions, chosen at random");
    }
    if (sl_workers_start(srv) != 0)
        return 1;
    uv_signal_init(loop, &sl_sigterm);
    uv_signal_init(loop, &sl_sigint);
    uv_signal_init(loop, &sl_sighup);
    sl_sighup.data = srv;
    uv_signal_start(&sl_sigterm, sl_on_stop_signal, SIGTERM);
    uv_signal_start(&sl_sigint, sl_on_stop_signal, SIGINT);
    uv_signal_start(&sl_sighup, sl_on_sighup_notify, SIGHUP);
    pthread_sigmask(SIG_UNBLOCK, &held, NULL);
    uv_timer_init(loop, &sl_retire_timer);
    sl_retire_timer.data = srv;
    uv_timer_init(loop, &sl_sweep_timer);
    sl_sweep_timer.data = srv;
    uv_timer_start(&sl_sweep_timer, sl_on_sweep_timer, 1000, 1000);
    sl_ui_stats_start(srv, loop); /* the live page's last minute (server/ui.h) */
    if (srv->cfg.snapshot && srv->cfg.snapshot_interval_s > 0) {
        uint64_t ms = (uint64_t)srv->cfg.snapshot_interval_s * 1000;
        uv_timer_init(loop, &sl_snapshot_timer);
        sl_snapshot_timer.data = srv;
        uv_timer_start(&sl_snapshot_timer, sl_on_snapshot_timer, ms, ms);
    }
    /* Every listener is up (sl_workers_start) and every signal handled. */
    sl_notify("READY=1");
    uv_run(loop, UV_RUN_DEFAULT);
    sl_notify("STOPPING=1");

    sl_workers_stop(srv);
    /* No worker decides any more: what the log's rings hold is all. */
    sl_dlog_stop(srv->dlog);
    srv->dlog = NULL;
    sl_plans_redis_stop(srv);
    /* A final snapshot that fails loses the state: the exit status says so,
     * so that a service manager does not see a clean stop. */
    int status = sl_snapshot_write(srv, "shutdown") == SL_OK ? 0 : 1;
    srv->backend->ops->free(srv->backend);
    sl_peers_free(srv->peers);
    if (srv->store)
        sl_store_free(srv->store);
    sl_limiters_free(srv->limiters);
    sl_config_free(atomic_load(&srv->config));
    sl_config_free(srv->retired);
    sl_envoy_free(atomic_load(&srv->envoy));
    sl_envoy_free(srv->envoy_retired);
    sl_start_settings_free();
    sl_secret_copies_free();
    sl_log(SL_LOG_INFO, status == 0 ? "bye" : "bye, without the final snapshot");
    return status;
}
