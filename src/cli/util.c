/*
 * util.c: the CLI's small shared helpers: errors, number and duration
 * parsing, the PRNG, and a TCP connect.
 */
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/buf.h"
#include "common/parse.h"

void cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "sluice %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see: sluice %s --help)\n", cmd);
}

void cli_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "sluice %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int cli_parse_int(const char *s, int64_t min, int64_t max, int64_t *out)
{
    int64_t r;
    if (!sl_parse_i64(s, strlen(s), SL_INT_MINUS, &r) || r < min || r > max)
        return -1;
    *out = r;
    return 0;
}

int cli_parse_duration(const char *s, size_t len, int64_t default_unit_ns, int64_t *ns,
                       const char **why)
{
    size_t i = 0;
    uint64_t whole = 0, frac = 0;
    int frac_digits = 0;
    bool any = false;
    while (i < len && s[i] >= '0' && s[i] <= '9') {
        /* SL_TIME_MAX is below 2^62: a whole part beyond it is too long in any unit. */
        if (whole > (uint64_t)SL_TIME_MAX / 10) {
            *why = "is too large";
            return -1;
        }
        whole = whole * 10 + (uint64_t)(s[i] - '0');
        any = true;
        i++;
    }
    if (i < len && s[i] == '.') {
        i++;
        while (i < len && s[i] >= '0' && s[i] <= '9') {
            if (frac_digits == 9) {
                *why = "has more than 9 digits after the point";
                return -1;
            }
            frac = frac * 10 + (uint64_t)(s[i] - '0');
            frac_digits++;
            any = true;
            i++;
        }
    }
    if (!any) {
        *why = "is not a number (expected e.g. 60, 1.5, 500ms)";
        return -1;
    }
    int64_t unit = default_unit_ns;
    const char *u = s + i;
    size_t ul = len - i;
    if (ul > 0) {
        static const struct {
            const char *name;
            int64_t ns;
        } units[] = {{"ns", 1},
                     {"us", 1000},
                     {"ms", 1000000},
                     {"s", 1000000000},
                     {"m", 60LL * 1000000000},
                     {"h", 3600LL * 1000000000},
                     {"d", 86400LL * 1000000000}};
        unit = 0;
        for (size_t k = 0; k < sizeof units / sizeof units[0]; k++)
            if (strlen(units[k].name) == ul && memcmp(units[k].name, u, ul) == 0)
                unit = units[k].ns;
        if (unit == 0) {
            *why = "has an unknown unit (use ns, us, ms, s, m, h or d)";
            return -1;
        }
    }
    /* frac is frac_digits decimal digits: scale it to a fraction of 1e9. */
    uint64_t frac9 = frac;
    for (int k = frac_digits; k < 9; k++)
        frac9 *= 10;
    /* whole * unit + frac9 * unit / 1e9, in 128 bits: the unit is at most a day. */
    unsigned __int128 total = (unsigned __int128)whole * (uint64_t)unit;
    unsigned __int128 part = (unsigned __int128)frac9 * (uint64_t)unit;
    if (part % 1000000000u != 0) {
        *why = "is not a whole number of nanoseconds";
        return -1;
    }
    total += part / 1000000000u;
    if (total > (unsigned __int128)SL_TIME_MAX) {
        *why = "is too large";
        return -1;
    }
    *ns = (int64_t)total;
    return 0;
}

int cli_parse_rate(const char *s, double *rate, const char **why)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || errno != 0 || !isfinite(v)) {
        *why = "is not a number (requests per second, e.g. 100 or 2.5)";
        return -1;
    }
    if (v <= 0 || v > 1e9) {
        *why = "must be above 0 and at most 1e9 requests per second";
        return -1;
    }
    *rate = v;
    return 0;
}

const char *cli_fmt_ms(int64_t ns, char *buf, size_t cap)
{
    /* Rounded to the nearest microsecond, printed as ms with 3 decimals. */
    int64_t us = (ns + 500) / 1000;
    snprintf(buf, cap, "%lld.%03lld", (long long)(us / 1000), (long long)(us % 1000));
    return buf;
}

/* ---- TCP ---- */

int cli_split_hostport(const char *hostport, char *host, size_t hostcap, int *port,
                       char *errbuf, size_t errcap)
{
    const char *colon = strrchr(hostport, ':');
    if (!colon || colon == hostport || colon[1] == '\0') {
        snprintf(errbuf, errcap, "'%s' is not HOST:PORT", hostport);
        return -1;
    }
    size_t hl = (size_t)(colon - hostport);
    const char *h = hostport;
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') { /* [::1]:7379 */
        h++;
        hl -= 2;
    }
    if (hl >= hostcap) {
        snprintf(errbuf, errcap, "host name too long");
        return -1;
    }
    memcpy(host, h, hl);
    host[hl] = '\0';
    int64_t p;
    if (cli_parse_int(colon + 1, 1, 65535, &p) != 0) {
        snprintf(errbuf, errcap, "'%s' is not a port (1-65535)", colon + 1);
        return -1;
    }
    *port = (int)p;
    return 0;
}

int cli_connect(const char *hostport, int timeout_ms, char *errbuf, size_t errcap)
{
    char host[256], service[8];
    int port;
    if (cli_split_hostport(hostport, host, sizeof host, &port, errbuf, errcap) != 0)
        return -1;
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0) {
        snprintf(errbuf, errcap, "%s: %s", host, gai_strerror(rc));
        return -1;
    }
    int fd = -1, err = 0;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            break;
        err = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        snprintf(errbuf, errcap, "cannot connect to %s: %s", hostport, strerror(err));
    return fd;
}

int cli_write_all(int fd, const void *p, size_t len)
{
    const char *c = p;
    while (len > 0) {
        ssize_t n = send(fd, c, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        c += n;
        len -= (size_t)n;
    }
    return 0;
}

/* ---- flags ---- */

cli_flag *cli_flag_get(cli_flag *flags, size_t nflags, const char *name)
{
    for (size_t i = 0; i < nflags; i++)
        if (strcmp(flags[i].name, name) == 0)
            return &flags[i];
    abort(); /* a programming error: every caller names a flag of its own table */
}

int cli_parse_flags(const char *cmd, int argc, char **argv, cli_flag *flags, size_t nflags,
                    char **pos, size_t maxpos, size_t *npos)
{
    bool only_pos = false;
    *npos = 0;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (!only_pos && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0))
            return 1;
        if (!only_pos && strcmp(a, "--") == 0) {
            only_pos = true;
            continue;
        }
        if (only_pos || a[0] != '-' || a[1] == '\0') {
            if (*npos >= maxpos) {
                if (maxpos == 0)
                    cli_usage_error(cmd, "unexpected argument '%s' (this command takes only flags)", a);
                else
                    cli_usage_error(cmd, "unexpected extra argument '%s'", a);
                return -1;
            }
            pos[(*npos)++] = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t nl = eq ? (size_t)(eq - a) : strlen(a);
        cli_flag *f = NULL;
        for (size_t k = 0; k < nflags; k++)
            if (strlen(flags[k].name) == nl && memcmp(flags[k].name, a, nl) == 0)
                f = &flags[k];
        if (!f) {
            cli_usage_error(cmd, "unknown flag '%.*s'", (int)(nl > 64 ? 64 : nl), a);
            return -1;
        }
        if (f->seen) {
            cli_usage_error(cmd, "flag %s given twice", f->name);
            return -1;
        }
        f->seen = true;
        if (!f->takes_value) {
            if (eq) {
                cli_usage_error(cmd, "flag %s takes no value", f->name);
                return -1;
            }
            f->value = "";
        } else if (eq) {
            f->value = eq + 1;
        } else {
            if (i + 1 >= argc) {
                cli_usage_error(cmd, "flag %s needs a value", f->name);
                return -1;
            }
            f->value = argv[++i];
        }
    }
    return 0;
}

int cli_resp_call(int fd, const sl_resp_slice *argv, size_t argc, char *rbuf, size_t rcap,
                  sl_resp_reply *rep, char *errbuf, size_t errcap)
{
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    sl_resp_add_command(&b, argv, argc);
    if (b.failed || cli_write_all(fd, b.data, b.len) != 0) {
        snprintf(errbuf, errcap, "cannot send: %s", b.failed ? "out of memory" : strerror(errno));
        sl_buf_free(&b);
        return -1;
    }
    sl_buf_free(&b);
    size_t have = 0;
    for (;;) {
        if (have > 0) {
            int n = sl_resp_parse_reply(rbuf, have, rep, NULL);
            if (n > 0)
                return 0;
            if (n == SL_RESP_ERROR) {
                snprintf(errbuf, errcap, "bad reply: %s", rep->errstr);
                return -1;
            }
        }
        if (have == rcap) {
            snprintf(errbuf, errcap, "reply longer than %zu bytes", rcap);
            return -1;
        }
        ssize_t n = read(fd, rbuf + have, rcap - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            snprintf(errbuf, errcap, "%s", n == 0 ? "the server closed the connection" : strerror(errno));
            return -1;
        }
        have += (size_t)n;
    }
}

const char *cli_password(char *errbuf, size_t errcap)
{
    const char *pw = getenv("SLUICE_PASSWORD");
    if (!pw || !*pw)
        return NULL;
    if (strlen(pw) > CLI_PASSWORD_MAX) {
        snprintf(errbuf, errcap, "SLUICE_PASSWORD is longer than %d bytes", CLI_PASSWORD_MAX);
        return NULL;
    }
    for (const char *c = pw; *c; c++)
        if (*c <= ' ' || *c > '~') {
            snprintf(errbuf, errcap, "SLUICE_PASSWORD holds a space or a byte that is not "
                                     "printable ASCII");
            return NULL;
        }
    return pw;
}

int cli_auth(int fd, const char *password, char *errbuf, size_t errcap)
{
    sl_resp_slice av[] = {{"AUTH", 4}, {password, strlen(password)}};
    char rbuf[1024];
    sl_resp_value nodes[4];
    sl_resp_reply rep = {.nodes = nodes, .nodes_cap = 4};
    if (cli_resp_call(fd, av, 2, rbuf, sizeof rbuf, &rep, errbuf, errcap) != 0)
        return -1;
    if (nodes[0].type == SL_RESP_STATUS && nodes[0].len == 2 && memcmp(nodes[0].str, "OK", 2) == 0)
        return 0;
    snprintf(errbuf, errcap, "AUTH (SLUICE_PASSWORD) refused: %.*s",
             nodes[0].type == SL_RESP_ERR ? (int)nodes[0].len : 0, nodes[0].str);
    return -1;
}
