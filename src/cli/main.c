/*
 * main.c: `sluice`, the command-line tool: simulate, take, bench.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char main_usage[] =
    "usage: sluice COMMAND [options]     (sluice COMMAND --help for each)\n"
    "\n"
    "  simulate   compare the rate limiting algorithms on traffic, in virtual time,\n"
    "             with a table, a plot (--svg) and a CSV\n"
    "  take       one take, from an in-process store or a sluiced server, with the\n"
    "             decision and the headers a client would receive\n"
    "  bench      a load generator for a sluiced (or Redis) server: throughput and\n"
    "             latency percentiles\n"
    "\n"
    "examples:\n"
    "  sluice simulate --limit 100 --period 1s --traffic boundary --svg boundary.svg\n"
    "  sluice take user:42 --limit 10 --period 1m\n"
    "  sluice bench --server 127.0.0.1:7379 --connections 8 --pipeline 16 --duration 10\n";

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(main_usage, stderr);
        return CLI_EXIT_USAGE;
    }
    const char *c = argv[1];
    if (strcmp(c, "--help") == 0 || strcmp(c, "-h") == 0 || strcmp(c, "help") == 0) {
        fputs(main_usage, stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(c, "--version") == 0) {
        printf("sluice %s\n", SLUICE_VERSION);
        return CLI_EXIT_OK;
    }
    if (strcmp(c, "simulate") == 0)
        return cmd_simulate(argc - 1, argv + 1);
    if (strcmp(c, "take") == 0)
        return cmd_take(argc - 1, argv + 1);
    if (strcmp(c, "bench") == 0)
        return cmd_bench(argc - 1, argv + 1);
    fprintf(stderr, "sluice: unknown command '%s' (one of simulate, take, bench; see sluice --help)\n",
            c);
    return CLI_EXIT_USAGE;
}
