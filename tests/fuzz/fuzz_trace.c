/*
 * fuzz_trace.c: libFuzzer target for the CLI's trace file reader and its
 * number parsers (src/cli/trace.c, util.c).
 *
 * The input is read as a trace file (through fmemopen, as the CLI reads a
 * file): it must either fail with a message that names the line, or give
 * events whose times never go backwards and lie in [0, SL_TIME_MAX], whose
 * costs are non-negative and whose keys are known; then the first line is
 * also given to the duration and integer parsers, whose results must be in
 * range. CHECK() aborts when a guarantee breaks.
 *
 * Build and run: make fuzz (FUZZ_SECONDS=N to change the time per target).
 * The CLI is not a library: CMake compiles its two files into this target.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/trace.h"
#include "fuzz.h"
#include "sluice.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    FILE *f = fmemopen((void *)data, size, "r");
    if (!f)
        return 0;
    traffic t;
    memset(&t, 0, sizeof t);
    char err[512];
    err[0] = '\0';
    int64_t duration = (data[0] & 1) ? (int64_t)data[0] * 1000000000 : 0;
    int rc = traffic_read_stream(&t, f, "fuzz.txt", duration, err, sizeof err);
    fclose(f);
    if (rc != 0) {
        CHECK(strncmp(err, "fuzz.txt", 8) == 0 || strcmp(err, "out of memory") == 0);
    } else {
        CHECK(t.n > 0 && t.nkeys > 0);
        for (size_t i = 0; i < t.n; i++) {
            CHECK(t.ev[i].t_ns >= 0 && t.ev[i].t_ns <= SL_TIME_MAX);
            CHECK(i == 0 || t.ev[i].t_ns >= t.ev[i - 1].t_ns);
            CHECK(t.ev[i].cost >= 0 && t.ev[i].cost <= INT32_MAX);
            CHECK(t.ev[i].key < t.nkeys);
            CHECK(duration == 0 || t.ev[i].t_ns < duration);
        }
        CHECK(t.end_ns > t.ev[t.n - 1].t_ns || (duration && t.end_ns == duration));
        for (size_t k = 0; k < t.nkeys; k++)
            CHECK(strlen(t.keys[k]) >= 1 && strlen(t.keys[k]) <= TRAFFIC_MAX_KEY);
    }
    traffic_free(&t);

    /* The parsers on the first line, NUL-terminated. */
    char line[128];
    size_t n = 0;
    while (n < size && n < sizeof line - 1 && data[n] != '\n')
        n++;
    memcpy(line, data, n);
    line[n] = '\0';
    int64_t v;
    const char *why = NULL;
    if (cli_parse_duration(line, strlen(line), 1000000000, &v, &why) == 0)
        CHECK(v >= 0 && v <= SL_TIME_MAX);
    else
        CHECK(why != NULL);
    if (cli_parse_int(line, -5, 5, &v) == 0)
        CHECK(v >= -5 && v <= 5);
    double r;
    if (cli_parse_rate(line, &r, &why) == 0)
        CHECK(r > 0 && r <= 1e9);
    return 0;
}
