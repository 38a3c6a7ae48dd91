/*
 * take.c: `sluice take`, one take (or a few) by hand: from an in-process
 * store, from a sluiced over RESP (SL.TAKE or CL.THROTTLE, through the RESP
 * client of libsluice_client, sluice_resp.h), or over HTTP (GET /v1/check,
 * the response read by src/proto's response parser). Prints the decision and
 * the headers a client of sluiced's HTTP face would receive with it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/clock.h"
#include "common/units.h"
#include "proto/http.h"
#include "sluice_resp.h"

static const char take_usage[] =
    "usage: sluice take [--server HOST:PORT [--http]] KEY --limit N --period DURATION\n"
    "                   [--burst B] [--cost C] [--algorithm A] [--repeat N]\n"
    "                   [--command sl.take|cl.throttle]\n"
    "\n"
    "Takes COST units from KEY under a limit of N per period, and prints the\n"
    "decision and the headers an HTTP client would receive (200 or 429,\n"
    "Retry-After, X-RateLimit-*, RateLimit-Policy, RateLimit).\n"
    "\n"
    "  --server HOST:PORT  ask a sluiced over RESP (SL.TAKE); without it the take\n"
    "                      runs on an in-process store (a fresh, empty one)\n"
    "  --http              HOST:PORT is sluiced's HTTP port: GET /v1/check, and the\n"
    "                      response is printed as received\n"
    "  --limit N           units per period (required)\n"
    "  --period DURATION   seconds, or 500ms, 1m, 1h, 1d (required; a server takes\n"
    "                      whole milliseconds)\n"
    "  --burst B           at most B at once (default: the limit)\n"
    "  --cost C            units to take (default 1; 0 peeks)\n"
    "  --algorithm A       gcra (default), token_bucket, leaky_bucket, fixed_window,\n"
    "                      sliding_log, sliding_window\n"
    "  --repeat N          take N times in a row (default 1): a line per take, then\n"
    "                      the last decision in full\n"
    "  --command cl.throttle\n"
    "                      redis-cell's form: CL.THROTTLE KEY B-1 N P C (P whole\n"
    "                      seconds), in-process with the same arithmetic; prints\n"
    "                      its five integers\n"
    "\n"
    "A server that asks for a password (sluiced --requirepass, --http-token) gets\n"
    "the one in the environment variable SLUICE_PASSWORD: AUTH over RESP, a bearer\n"
    "token over HTTP. There is no flag for it, which ps would show.\n"
    "\n"
    "Exit status: 0 when the takes were answered (allowed or not), 1 when the\n"
    "server could not be asked, 2 for a usage error.\n"
    "\n"
    "examples:\n"
    "  sluice take user:42 --limit 10 --period 1m\n"
    "  sluice take user:42 --limit 3 --period 10s --repeat 5\n"
    "  sluice take user123 --command cl.throttle --burst 16 --limit 30 --period 60\n"
    "  sluice take --server 127.0.0.1:7379 user:42 --limit 100 --period 1m --algorithm sliding_window\n"
    "  sluice take --server 127.0.0.1:7380 --http user:42 --limit 100 --period 60\n";

#define TAKE_MAX_REPEAT 1000000
#define TAKE_MAX_RESPONSE (64 * 1024) /* bytes of one HTTP response, head and body */

static void print_decision(const sl_decision *d, sl_algorithm alg)
{
    printf("allowed          %d\n", d->allowed ? 1 : 0);
    printf("limit            %lld\n", (long long)d->limit);
    printf("remaining        %lld\n", (long long)d->remaining);
    printf("retry_after_ms   %lld\n",
           d->retry_after_ns == SL_NEVER ? -1LL : (long long)sl_ns_ceil_ms(d->retry_after_ns));
    printf("reset_after_ms   %lld\n", (long long)sl_ns_ceil_ms(d->reset_after_ns));
    if (alg == SL_LEAKY_BUCKET)
        printf("delay_ms         %lld\n", (long long)sl_ns_ceil_ms(d->delay_ns));
}

/*
 * The answer sluiced's HTTP face would give with this decision, written by
 * the same writer the server uses (src/proto/http.h), so that the CLI shows
 * exactly what a client receives: status, X-RateLimit-*, Retry-After,
 * RateLimit-Policy, RateLimit, and the JSON body. CR LF become LF.
 */
static int print_headers(const sl_limit *l, const sl_decision *d)
{
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    if (sl_http_write_check(&b, true, "default", l, d, false) != 0) {
        sl_buf_free(&b);
        cli_error("take", "cannot format the HTTP answer");
        return -1;
    }
    for (size_t i = 0; i < b.len; i++)
        if (b.data[i] != '\r')
            putchar(b.data[i]);
    putchar('\n');
    sl_buf_free(&b);
    return 0;
}

static void print_short(int64_t i, const sl_decision *d)
{
    printf("take %lld: %s remaining=%lld retry_after_ms=%lld reset_after_ms=%lld", (long long)i,
           d->allowed ? "allowed " : "rejected", (long long)d->remaining,
           d->retry_after_ns == SL_NEVER ? -1LL : (long long)sl_ns_ceil_ms(d->retry_after_ns),
           (long long)sl_ns_ceil_ms(d->reset_after_ns));
    if (d->delay_ns)
        printf(" delay_ms=%lld", (long long)sl_ns_ceil_ms(d->delay_ns));
    putchar('\n');
}

/* ---- HTTP: GET /v1/check ---- */

/* Appends s percent-encoded (all but unreserved characters) to out. */
static size_t pct_encode(const char *s, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                     c == '-' || c == '_' || c == '.' || c == '~' || c == ':';
        if (n + 3 >= cap)
            break;
        if (plain) {
            out[n++] = (char)c;
        } else {
            out[n++] = '%';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        }
    }
    out[n] = '\0';
    return n;
}

/*
 * Reads one response from fd into buf (TAKE_MAX_RESPONSE bytes) and prints
 * it as received, CR LF turned into LF for the terminal: its head, read by
 * src/proto's response parser, and the body its Content-Length announces
 * (or, without one, what comes until the server closes). Returns the exit
 * status: a response that is cut short, malformed or too long is a failure.
 */
static int read_response(int fd, const char *server, char *buf)
{
    sl_http_header hdr[64];
    sl_http_response res;
    sl_http_response_init(&res, hdr, sizeof hdr / sizeof hdr[0]);
    size_t have = 0, want = 0; /* want: head + body, once the head is parsed */
    int head = SL_HTTP_INCOMPLETE;
    for (;;) {
        if (head == SL_HTTP_INCOMPLETE && have > 0) {
            head = sl_http_parse_response(buf, have, &res, TAKE_MAX_RESPONSE);
            if (head == SL_HTTP_ERROR) {
                cli_error("take", "%s: malformed HTTP response: %s%s%s", server, res.errstr,
                          res.field ? " in " : "", res.field ? res.field : "");
                return CLI_EXIT_FAIL;
            }
            if (head > 0 && !res.body_until_close) {
                if (res.body_length > TAKE_MAX_RESPONSE - (size_t)head) {
                    cli_error("take", "%s: the response is longer than %d bytes", server,
                              TAKE_MAX_RESPONSE);
                    return CLI_EXIT_FAIL;
                }
                want = (size_t)head + (size_t)res.body_length;
            }
        }
        if (head > 0 && !res.body_until_close && have >= want)
            break;
        if (have == TAKE_MAX_RESPONSE) {
            cli_error("take", "%s: the response is longer than %d bytes", server,
                      TAKE_MAX_RESPONSE);
            return CLI_EXIT_FAIL;
        }
        ssize_t r = read(fd, buf + have, TAKE_MAX_RESPONSE - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            cli_error("take", "reading the response: %s", strerror(errno));
            return CLI_EXIT_FAIL;
        }
        if (r == 0) {
            if (head > 0 && res.body_until_close) {
                want = have;
                break;
            }
            cli_error("take", "%s: the server closed the connection %s", server,
                      have == 0 ? "without an answer" : "in the middle of its response");
            return CLI_EXIT_FAIL;
        }
        have += (size_t)r;
    }
    for (size_t i = 0; i < want; i++)
        if (buf[i] != '\r')
            putchar(buf[i]);
    if (want == 0 || buf[want - 1] != '\n')
        putchar('\n');
    return CLI_EXIT_OK;
}

static int http_take(const char *server, const char *password, const char *key,
                     const char *limit, int64_t period_ms, const char *burst, const char *cost,
                     const char *alg)
{
    char err[256];
    int fd = cli_connect(server, 5000, err, sizeof err);
    if (fd < 0) {
        cli_error("take", "%s", err);
        return CLI_EXIT_FAIL;
    }
    char ekey[3 * 1024 + 1];
    pct_encode(key, ekey, sizeof ekey);
    char req[4096 + sizeof ekey];
    /* The query takes a period in seconds or a duration string: send ms. */
    int n = snprintf(req, sizeof req,
                     "GET /v1/check?key=%s&limit=%s&period=%lldms%s%s%s%s%s%s HTTP/1.1\r\n"
                     "Host: %s\r\nUser-Agent: sluice/" SLUICE_VERSION "\r\n%s%s%s"
                     "Connection: close\r\n\r\n",
                     ekey, limit, (long long)period_ms, burst ? "&burst=" : "", burst ? burst : "",
                     cost ? "&cost=" : "", cost ? cost : "", alg ? "&algorithm=" : "",
                     alg ? alg : "", server, password ? "Authorization: Bearer " : "",
                     password ? password : "", password ? "\r\n" : "");
    if (n < 0 || (size_t)n >= sizeof req || cli_write_all(fd, req, (size_t)n) != 0) {
        cli_error("take", "cannot send the request: %s", strerror(errno));
        close(fd);
        return CLI_EXIT_FAIL;
    }
    char *buf = malloc(TAKE_MAX_RESPONSE);
    if (!buf) {
        close(fd);
        return CLI_EXIT_FAIL;
    }
    int st = read_response(fd, server, buf);
    close(fd);
    free(buf);
    return st;
}

enum { T_SERVER, T_HTTP, T_LIMIT, T_PERIOD, T_BURST, T_COST, T_ALG, T_REPEAT, T_CMD, T_COUNT };

/* CL.THROTTLE's five integers, as redis-cell's users read them. */
static void print_cell(const int64_t v[5])
{
    printf("limited          %lld\n", (long long)v[0]);
    printf("limit            %lld\n", (long long)v[1]);
    printf("remaining        %lld\n", (long long)v[2]);
    printf("retry_after_s    %lld\n", (long long)v[3]);
    printf("reset_after_s    %lld\n", (long long)v[4]);
}

/* What the RESP client's error was, as take reports it: the server's own
 * refusal, or what went wrong with the connection. */
static void resp_error(const char *server, const sl_rc *c)
{
    if (c->err == SL_RC_ERR_SERVER)
        cli_error("take", "%s: server: %s", server, c->errstr);
    else if (c->err == SL_RC_ERR_IO)
        cli_error("take", "%s", c->errstr);
    else
        cli_error("take", "%s: %s", server, c->errstr);
}

/*
 * The takes against a server over RESP, through the RESP client: SL.TAKE
 * key limit <period>ms BURST b COST c [ALGORITHM a], or CL.THROTTLE key b-1
 * limit <period in s> c, `repeat` times on one connection, a line each when
 * repeat > 1. *d is the last decision. Returns the exit status.
 */
static int resp_takes(const char *server, const char *password, const char *key, int64_t limit,
                      int64_t period, int64_t burst, int64_t cost, sl_algorithm alg, bool cell,
                      int64_t repeat, sl_decision *d)
{
    char host[256], err[256];
    int port;
    if (cli_split_hostport(server, host, sizeof host, &port, err, sizeof err) != 0) {
        cli_error("take", "%s", err);
        return CLI_EXIT_FAIL;
    }
    sl_rc *c = sl_rc_connect(host, port, 5000);
    if (!c) {
        cli_error("take", "out of memory");
        return CLI_EXIT_FAIL;
    }
    if (c->err) {
        resp_error(server, c);
        sl_rc_free(c);
        return CLI_EXIT_FAIL;
    }
    if (password && sl_rc_auth(c, NULL, password) != 0) {
        if (c->err == SL_RC_ERR_SERVER)
            cli_error("take", "%s: AUTH (SLUICE_PASSWORD) refused: %s", server, c->errstr);
        else
            resp_error(server, c);
        sl_rc_free(c);
        return CLI_EXIT_FAIL;
    }
    int64_t b = burst ? burst : limit;
    sl_rc_limit l = {.limit = limit, .period_ms = period / 1000000, .burst = b, .algorithm = alg};
    for (int64_t i = 1; i <= repeat; i++) {
        int rc = cell ? sl_rc_throttle(c, key, b - 1, limit, period / 1000000000, cost, d)
                      : sl_rc_take(c, key, &l, cost, d);
        if (rc != 0) {
            resp_error(server, c);
            sl_rc_free(c);
            return CLI_EXIT_FAIL;
        }
        if (repeat > 1 && cell) {
            int64_t v[5];
            sl_cell_reply(d, v);
            printf("take %lld: %lld %lld %lld %lld %lld\n", (long long)i, (long long)v[0],
                   (long long)v[1], (long long)v[2], (long long)v[3], (long long)v[4]);
        } else if (repeat > 1) {
            print_short(i, d);
        }
    }
    sl_rc_free(c);
    return CLI_EXIT_OK;
}

int cmd_take(int argc, char **argv)
{
    cli_flag fl[T_COUNT] = {
        [T_SERVER] = {"--server", true, NULL, false}, [T_HTTP] = {"--http", false, NULL, false},
        [T_LIMIT] = {"--limit", true, NULL, false},   [T_PERIOD] = {"--period", true, NULL, false},
        [T_BURST] = {"--burst", true, NULL, false},   [T_COST] = {"--cost", true, NULL, false},
        [T_ALG] = {"--algorithm", true, NULL, false}, [T_REPEAT] = {"--repeat", true, NULL, false},
        [T_CMD] = {"--command", true, NULL, false},
    };
    char *pos[1];
    size_t npos;
    int pr = cli_parse_flags("take", argc, argv, fl, T_COUNT, pos, 1, &npos);
    if (pr == 1) {
        fputs(take_usage, stdout);
        return CLI_EXIT_OK;
    }
    if (pr < 0)
        return CLI_EXIT_USAGE;
    if (npos != 1) {
        cli_usage_error("take", "a KEY is required");
        return CLI_EXIT_USAGE;
    }
    const char *key = pos[0];
    size_t keylen = strlen(key);
    if (keylen == 0 || keylen > 1024) {
        cli_usage_error("take", "KEY must be 1 to 1024 bytes");
        return CLI_EXIT_USAGE;
    }
    if (!fl[T_LIMIT].seen || !fl[T_PERIOD].seen) {
        cli_usage_error("take", "%s is required", fl[T_LIMIT].seen ? "--period" : "--limit");
        return CLI_EXIT_USAGE;
    }
    if (fl[T_HTTP].seen && !fl[T_SERVER].seen) {
        cli_usage_error("take", "--http needs --server HOST:PORT");
        return CLI_EXIT_USAGE;
    }
    int64_t limit, period, burst = 0, cost = 1, repeat = 1;
    const char *why;
    if (cli_parse_int(fl[T_LIMIT].value, 1, SL_SPAN_MAX, &limit) != 0) {
        cli_usage_error("take", "--limit: '%s' is not a positive integer", fl[T_LIMIT].value);
        return CLI_EXIT_USAGE;
    }
    if (cli_parse_duration(fl[T_PERIOD].value, strlen(fl[T_PERIOD].value), 1000000000, &period,
                           &why) != 0) {
        cli_usage_error("take", "--period: '%s' %s", fl[T_PERIOD].value, why);
        return CLI_EXIT_USAGE;
    }
    if (period <= 0 || period > SL_SPAN_MAX) {
        cli_usage_error("take", "--period must be more than 0 and at most 73 years");
        return CLI_EXIT_USAGE;
    }
    if (fl[T_BURST].seen && cli_parse_int(fl[T_BURST].value, 1, SL_SPAN_MAX, &burst) != 0) {
        cli_usage_error("take", "--burst: '%s' is not a positive integer", fl[T_BURST].value);
        return CLI_EXIT_USAGE;
    }
    if (fl[T_COST].seen && cli_parse_int(fl[T_COST].value, 0, SL_SPAN_MAX, &cost) != 0) {
        cli_usage_error("take", "--cost: '%s' is not a non-negative integer", fl[T_COST].value);
        return CLI_EXIT_USAGE;
    }
    if (fl[T_REPEAT].seen && cli_parse_int(fl[T_REPEAT].value, 1, TAKE_MAX_REPEAT, &repeat) != 0) {
        cli_usage_error("take", "--repeat: '%s' is not an integer in 1..%d", fl[T_REPEAT].value,
                        TAKE_MAX_REPEAT);
        return CLI_EXIT_USAGE;
    }
    sl_algorithm alg = SL_GCRA;
    if (fl[T_ALG].seen) {
        if (sl_algorithm_parse(fl[T_ALG].value, strlen(fl[T_ALG].value), &alg) != SL_OK ||
            alg == SL_CONCURRENCY) {
            cli_usage_error("take",
                            "--algorithm: '%s' is not one of gcra, token_bucket, leaky_bucket, "
                            "fixed_window, sliding_log, sliding_window",
                            fl[T_ALG].value);
            return CLI_EXIT_USAGE;
        }
    }
    bool cell = false;
    if (fl[T_CMD].seen) {
        if (strcmp(fl[T_CMD].value, "cl.throttle") == 0)
            cell = true;
        else if (strcmp(fl[T_CMD].value, "sl.take") != 0) {
            cli_usage_error("take", "--command: '%s' is not sl.take or cl.throttle", fl[T_CMD].value);
            return CLI_EXIT_USAGE;
        }
    }
    if (cell && (fl[T_ALG].seen || fl[T_HTTP].seen || period % 1000000000 != 0 ||
                 period / 1000000000 > INT32_MAX)) {
        cli_usage_error("take", "--command cl.throttle: %s",
                        fl[T_ALG].seen   ? "--algorithm does not apply (CL.THROTTLE is gcra)"
                        : fl[T_HTTP].seen ? "a RESP command: not with --http"
                                          : "--period must be whole seconds");
        return CLI_EXIT_USAGE;
    }
    sl_limit lim;
    /* CL.THROTTLE key max_burst count period: max_burst = burst - 1, count = limit. */
    int rc = cell ? sl_limit_init_cell(&lim, (burst ? burst : limit) - 1, limit, period / 1000000000)
                  : sl_limit_init(&lim, alg, limit, period, burst);
    if (rc != SL_OK) {
        cli_usage_error("take", "the limit is invalid: %s", sl_strerror(rc));
        return CLI_EXIT_USAGE;
    }
    if (fl[T_SERVER].seen && period % 1000000 != 0) {
        cli_usage_error("take", "--period: a server takes whole milliseconds");
        return CLI_EXIT_USAGE;
    }
    char pwerr[128] = "";
    const char *password = fl[T_SERVER].seen ? cli_password(pwerr, sizeof pwerr) : NULL;
    if (pwerr[0]) {
        cli_usage_error("take", "%s", pwerr);
        return CLI_EXIT_USAGE;
    }

    if (fl[T_HTTP].seen) {
        int st = CLI_EXIT_OK;
        for (int64_t i = 0; i < repeat && st == CLI_EXIT_OK; i++)
            st = http_take(fl[T_SERVER].value, password, key, fl[T_LIMIT].value,
                           period / 1000000, fl[T_BURST].value, fl[T_COST].value, fl[T_ALG].seen ? fl[T_ALG].value : NULL);
        return st;
    }

    sl_decision d;
    memset(&d, 0, sizeof d);
    if (!fl[T_SERVER].seen) {
        sl_store *st;
        if (sl_store_new(NULL, &st) != SL_OK) {
            cli_error("take", "cannot create a store: out of memory");
            return CLI_EXIT_FAIL;
        }
        for (int64_t i = 1; i <= repeat; i++) {
            rc = sl_store_take(st, key, keylen, &lim, sl_now_mono(), cost, &d);
            if (rc != SL_OK) {
                cli_error("take", "%s", sl_strerror(rc));
                sl_store_free(st);
                return rc == SL_ERR_KEY ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
            }
            if (repeat > 1)
                print_short(i, &d);
        }
        sl_store_free(st);
    } else {
        int st = resp_takes(fl[T_SERVER].value, password, key, limit, period, burst, cost, alg,
                            cell, repeat, &d);
        if (st != CLI_EXIT_OK)
            return st;
    }
    if (repeat > 1)
        putchar('\n');
    if (cell) {
        /* CL.THROTTLE's five integers: from the decision, exactly (its
         * seconds came whole, and go back whole). */
        int64_t v[5];
        sl_cell_reply(&d, v);
        print_cell(v);
    } else {
        print_decision(&d, alg);
    }
    putchar('\n');
    return print_headers(&lim, &d) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
