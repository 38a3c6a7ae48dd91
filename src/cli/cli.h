/*
 * cli.h: what the pieces of the `sluice` command-line tool share.
 *
 * Every command is a function `int cmd_NAME(int argc, char **argv)` that
 * returns the process's exit status: 0 done, 1 a failure at run time (a file
 * that cannot be written, a server that does not answer), 2 a usage error
 * (a wrong flag, a bad value). Usage errors are reported by cli_usage_error(),
 * which names the command and the flag and says why.
 */
#ifndef SLUICE_CLI_H
#define SLUICE_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/resp.h"
#include "sim/rng.h"
#include "sluice.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

int cmd_simulate(int argc, char **argv);
/* `sluice simulate --service` (simulate_service.c); cmd_simulate hands over to it. */
int cmd_simulate_service(int argc, char **argv);
int cmd_take(int argc, char **argv);
int cmd_bench(int argc, char **argv);

/* Prints "sluice CMD: <message>" and a pointer to --help on stderr; the
 * caller then returns CLI_EXIT_USAGE. */
void cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints "sluice CMD: <message>" on stderr (a run-time failure). */
void cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Parses a whole decimal integer in [min, max] from s (NUL-terminated): an
 * optional '-', then digits (sl_parse_i64). Returns 0 and sets *out, or -1
 * (not a number, trailing bytes, or out of range).
 */
int cli_parse_int(const char *s, int64_t min, int64_t max, int64_t *out);

/*
 * Parses a duration into nanoseconds: a decimal number with at most 9 digits
 * after the point, then an optional unit: ns, us, ms, s, m, h or d; no unit
 * means `default_unit_ns` (1e9 for seconds). "1.5" is 1.5 s, "250ms" 0.25 s,
 * "20us" 20 microseconds. The result must lie in [0, SL_TIME_MAX] and be a
 * whole number of nanoseconds. Returns 0, or -1 with *why set to a static
 * reason.
 */
int cli_parse_duration(const char *s, size_t len, int64_t default_unit_ns, int64_t *ns,
                       const char **why);

/*
 * Parses a rate in requests per second: a positive, finite decimal number of
 * at most 1e9. Rates live only in the traffic generators (which may use
 * doubles); the algorithms never see them. Returns 0, or -1 with *why set.
 */
int cli_parse_rate(const char *s, double *rate, const char **why);

/* Formats ns as milliseconds with 3 decimals ("12.345") into buf. */
const char *cli_fmt_ms(int64_t ns, char *buf, size_t cap);

/* ---- flags ---- */

/* One flag of a command: "--name VALUE", "--name=VALUE", or a switch. */
typedef struct cli_flag {
    const char *name;  /* with its dashes: "--limit" */
    bool takes_value;
    const char *value; /* out: the value; "" for a switch that was given */
    bool seen;         /* out */
} cli_flag;

/*
 * Parses argv[1 .. argc) against flags[0 .. nflags): values go into the
 * table, other words into pos[0 .. maxpos). "--" ends the flags. Returns 0,
 * 1 when --help (or -h) was given, or -1 after reporting a usage error (an
 * unknown flag, a flag given twice, a missing value, too many arguments).
 */
int cli_parse_flags(const char *cmd, int argc, char **argv, cli_flag *flags, size_t nflags,
                    char **pos, size_t maxpos, size_t *npos);

/* The flag called `name` in the table (it must be there). */
cli_flag *cli_flag_get(cli_flag *flags, size_t nflags, const char *name);

/* ---- a client connection (util.c, for take and bench) ---- */

/*
 * Splits "HOST:PORT" ("[::1]:7379" for IPv6) into host (hostcap bytes,
 * NUL-terminated) and *port (1-65535). Returns 0, or -1 with errbuf filled.
 */
int cli_split_hostport(const char *hostport, char *host, size_t hostcap, int *port,
                       char *errbuf, size_t errcap);

/*
 * Connects a blocking TCP socket to "HOST:PORT" (a name or an IPv4/IPv6
 * address; "[::1]:7379" for IPv6), with send and receive timeouts of
 * timeout_ms. Returns the descriptor, or -1 with errbuf filled.
 */
int cli_connect(const char *hostport, int timeout_ms, char *errbuf, size_t errcap);

/* Writes all len bytes; 0, or -1 (errno set). */
int cli_write_all(int fd, const void *p, size_t len);

/* Sends one command on a blocking socket and reads its reply into *rep
 * (rbuf, rcap bytes, holds the reply's text); returns 0, or -1 with errbuf.
 * For bench's sockets, which it drives itself (take asks through
 * libsluice_client, sluice_resp.h). */
int cli_resp_call(int fd, const sl_resp_slice *argv, size_t argc, char *rbuf, size_t rcap,
                  sl_resp_reply *rep, char *errbuf, size_t errcap);

/* The password to send, from the environment (SLUICE_PASSWORD: sluiced's
 * --requirepass, or its HTTP bearer token), never from a flag, which every
 * local user could read in ps. NULL when unset, or with errbuf filled when
 * it cannot be sent (longer than CLI_PASSWORD_MAX, spaces, not ASCII). */
#define CLI_PASSWORD_MAX 512
const char *cli_password(char *errbuf, size_t errcap);

/* AUTH password on a blocking RESP connection: 0, or -1 with errbuf. */
int cli_auth(int fd, const char *password, char *errbuf, size_t errcap);

#endif
