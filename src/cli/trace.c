/*
 * trace.c: the trace file reader (docs/cli.md: "TIME [KEY [COST]]" a line),
 * into a traffic of the simulator's (sim/traffic.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/trace.h"

/* An open-addressing table from key names to their numbers, for the reader. */
typedef struct key_index {
    uint32_t *slot; /* key number + 1; 0 = empty */
    size_t mask;
} key_index;

static uint64_t hash_bytes(const char *p, size_t n)
{
    uint64_t h = UINT64_C(1469598103934665603); /* FNV-1a: keys are the user's own file */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= UINT64_C(1099511628211);
    }
    return h;
}

static int key_lookup(traffic *t, key_index *ix, const char *k, size_t kl, uint32_t *out)
{
    /* Keep the load under one half: grow (and rehash) first. */
    if ((t->nkeys + 1) * 2 > ix->mask + 1) {
        size_t ncap = (ix->mask + 1) * 2;
        uint32_t *ns = calloc(ncap, sizeof *ns);
        if (!ns)
            return -1;
        for (size_t i = 0; i < t->nkeys; i++) {
            size_t h = hash_bytes(t->keys[i], strlen(t->keys[i])) & (ncap - 1);
            while (ns[h])
                h = (h + 1) & (ncap - 1);
            ns[h] = (uint32_t)i + 1;
        }
        free(ix->slot);
        ix->slot = ns;
        ix->mask = ncap - 1;
    }
    size_t h = hash_bytes(k, kl) & ix->mask;
    while (ix->slot[h]) {
        const char *s = t->keys[ix->slot[h] - 1];
        if (strlen(s) == kl && memcmp(s, k, kl) == 0) {
            *out = ix->slot[h] - 1;
            return 0;
        }
        h = (h + 1) & ix->mask;
    }
    if (t->nkeys >= TRAFFIC_MAX_KEYS)
        return -2;
    if (t->nkeys == t->keys_cap) {
        size_t nc = t->keys_cap ? t->keys_cap * 2 : 16;
        char **nk = realloc(t->keys, nc * sizeof *nk);
        if (!nk)
            return -1;
        t->keys = nk;
        t->keys_cap = nc;
    }
    char *copy = malloc(kl + 1);
    if (!copy)
        return -1;
    memcpy(copy, k, kl);
    copy[kl] = '\0';
    t->keys[t->nkeys] = copy;
    ix->slot[h] = (uint32_t)t->nkeys + 1;
    *out = (uint32_t)t->nkeys++;
    return 0;
}

/* Splits the next whitespace-separated field from *p; returns its length (0 at the end). */
static size_t next_field(const char **p, const char **start)
{
    const char *s = *p;
    while (*s == ' ' || *s == '\t')
        s++;
    *start = s;
    while (*s && *s != ' ' && *s != '\t')
        s++;
    *p = s;
    return (size_t)(s - *start);
}

int traffic_read_file(traffic *t, const char *path, int64_t duration_ns, char *errbuf,
                      size_t errcap)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(errbuf, errcap, "cannot open trace file %s: %s", path, strerror(errno));
        return -1;
    }
    int rc = traffic_read_stream(t, f, path, duration_ns, errbuf, errcap);
    fclose(f);
    return rc;
}

int traffic_read_stream(traffic *t, FILE *f, const char *name, int64_t duration_ns, char *errbuf,
                        size_t errcap)
{
    key_index ix = {calloc(16, sizeof(uint32_t)), 15};
    char line[TRAFFIC_MAX_LINE + 2];
    unsigned long lineno = 0;
    int64_t last = 0;
    int rc = -1;
    if (!ix.slot) {
        snprintf(errbuf, errcap, "out of memory");
        goto out;
    }
    while (fgets(line, sizeof line, f)) {
        lineno++;
        size_t len = strlen(line);
        if (len > 0 && line[len - 1] == '\n')
            line[--len] = '\0';
        else if (!feof(f)) {
            snprintf(errbuf, errcap, "%s:%lu: line longer than %d bytes", name, lineno,
                     TRAFFIC_MAX_LINE);
            goto out;
        }
        if (len > 0 && line[len - 1] == '\r')
            line[--len] = '\0';
        if (len > TRAFFIC_MAX_LINE) {
            snprintf(errbuf, errcap, "%s:%lu: line longer than %d bytes", name, lineno,
                     TRAFFIC_MAX_LINE);
            goto out;
        }
        if (memchr(line, '\0', len) != NULL) {
            snprintf(errbuf, errcap, "%s:%lu: a NUL byte in the line", name, lineno);
            goto out;
        }
        const char *cur = line, *f1, *f2, *f3, *f4;
        size_t l1 = next_field(&cur, &f1);
        if (l1 == 0 || f1[0] == '#')
            continue; /* blank line or comment */
        size_t l2 = next_field(&cur, &f2);
        size_t l3 = next_field(&cur, &f3);
        size_t l4 = next_field(&cur, &f4);
        if (l4 != 0) {
            snprintf(errbuf, errcap, "%s:%lu: more than 3 fields (expected: TIME [KEY [COST]])",
                     name, lineno);
            goto out;
        }
        int64_t tns;
        const char *why;
        if (cli_parse_duration(f1, l1, 1000000000, &tns, &why) != 0) {
            snprintf(errbuf, errcap, "%s:%lu: time '%.*s' %s", name, lineno, (int)(l1 > 40 ? 40 : l1),
                     f1, why);
            goto out;
        }
        if (tns < last) {
            snprintf(errbuf, errcap,
                     "%s:%lu: time goes backwards (%lld ns after %lld ns): sort the trace",
                     name, lineno, (long long)tns, (long long)last);
            goto out;
        }
        last = tns;
        uint32_t key = 0;
        if (l2 > TRAFFIC_MAX_KEY) {
            snprintf(errbuf, errcap, "%s:%lu: key longer than %d bytes", name, lineno,
                     TRAFFIC_MAX_KEY);
            goto out;
        }
        int kr = l2 ? key_lookup(t, &ix, f2, l2, &key) : key_lookup(t, &ix, "default", 7, &key);
        if (kr == -2) {
            snprintf(errbuf, errcap, "%s:%lu: more than %u distinct keys", name, lineno,
                     TRAFFIC_MAX_KEYS);
            goto out;
        }
        if (kr != 0) {
            snprintf(errbuf, errcap, "out of memory");
            goto out;
        }
        int64_t cost = 1;
        if (l3) {
            char num[24];
            if (l3 >= sizeof num ||
                (memcpy(num, f3, l3), num[l3] = '\0', cli_parse_int(num, 0, INT32_MAX, &cost)) != 0) {
                snprintf(errbuf, errcap, "%s:%lu: cost '%.*s' is not an integer in 0..%d", name,
                         lineno, (int)(l3 > 40 ? 40 : l3), f3, INT32_MAX);
                goto out;
            }
        }
        if (duration_ns > 0 && tns >= duration_ns)
            break; /* --duration cuts the trace */
        if (traffic_push(t, tns, key, cost, errbuf, errcap) != 0)
            goto out;
    }
    if (ferror(f)) {
        snprintf(errbuf, errcap, "%s: read error: %s", name, strerror(errno));
        goto out;
    }
    if (t->n == 0) {
        snprintf(errbuf, errcap, "%s: no requests in the trace", name);
        goto out;
    }
    t->end_ns = duration_ns > 0 ? duration_ns : t->ev[t->n - 1].t_ns + 1;
    rc = 0;
out:
    free(ix.slot);
    return rc;
}
