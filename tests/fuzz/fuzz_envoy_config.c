/*
 * fuzz_envoy_config.c: libFuzzer target for envoyproxy/ratelimit's
 * configuration (src/policy/envoy.c): arbitrary YAML, then arbitrary
 * descriptors matched against what parsed.
 *
 * The input is the file's text, a NUL byte, then the request: its first
 * line names the domain (empty: the file's), each further line is a
 * descriptor of entries "key=value" separated by ','.
 *
 * CHECK() aborts when a guarantee of envoy.h breaks:
 * - a refusal names the file and leaves the config as it was; the same
 *   text added to a config that holds its domain is refused;
 * - every rule has 1 to SL_ENVOY_MAX_LIMITS limits (none when unlimited),
 *   each of a known unit, with its sluice limit of requests_per_unit per
 *   unit when requests_per_unit > 0; replaces never names the rule itself;
 * - every level's sorted index is in order and holds each child once;
 * - matching agrees with a slow model that scans every child and matches
 *   wildcards with a recursive glob: the same node at each level, found
 *   the same way, and the same rule;
 * - a rule matched consumed every entry, and is the last node's rule;
 * - a replaced descriptor has a named, limited rule that another matched
 *   rule replaces;
 * - the store key's length does not depend on the buffer, begins with
 *   "\x1f" "envoy" "\x1f", and holds no 0x1f but its separators.
 *
 * Build and run: make fuzz (FUZZ_SECONDS=N to change the time per target).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "policy/envoy.h"

#define MAX_DESCS 8
#define MAX_ENTRIES 12

/* Does s[0..n) match the pattern p[0..pn), where '*' matches any run of
 * bytes? The textbook table: row j says which prefixes of s the pattern's
 * first j bytes match. Slow and obviously right. */
static bool glob(const char *p, size_t pn, const char *s, size_t n)
{
    bool *row = calloc(n + 1, sizeof *row), *next = calloc(n + 1, sizeof *next);
    CHECK(row && next);
    row[0] = true;
    for (size_t j = 0; j < pn; j++) {
        for (size_t i = 0; i <= n; i++) {
            if (p[j] == '*')
                next[i] = row[i] || (i > 0 && next[i - 1]);
            else
                next[i] = i > 0 && row[i - 1] && s[i - 1] == p[j];
        }
        bool *t = row;
        row = next;
        next = t;
    }
    bool ok = row[n];
    free(row);
    free(next);
    return ok;
}

static bool same(const sl_envoy_node *x, const char *s, size_t n)
{
    return x->final_len == n && memcmp(x->final_key, s, n) == 0;
}

/* The slow model of one level: the node and how it was found. */
static const sl_envoy_node *model_step(const sl_envoy_level *l, const sl_envoy_entry *e,
                                       uint8_t *how)
{
    char *fk = malloc(e->key_len + 1 + e->value_len);
    CHECK(fk);
    memcpy(fk, e->key, e->key_len);
    fk[e->key_len] = '_';
    memcpy(fk + e->key_len + 1, e->value, e->value_len);
    size_t flen = e->key_len + 1 + e->value_len;
    const sl_envoy_node *found = NULL;
    for (size_t i = 0; i < l->n && !found; i++)
        if (same(&l->nodes[i], fk, flen))
            found = &l->nodes[i], *how = SL_ENVOY_BY_VALUE;
    /* Then the wildcards, in file order. */
    for (size_t i = 0; i < l->n && !found; i++)
        if (l->nodes[i].nparts && glob(l->nodes[i].final_key, l->nodes[i].final_len, fk, flen))
            found = &l->nodes[i], *how = SL_ENVOY_BY_WILDCARD;
    for (size_t i = 0; i < l->n && !found; i++)
        if (same(&l->nodes[i], e->key, e->key_len))
            found = &l->nodes[i], *how = SL_ENVOY_BY_KEY;
    free(fk);
    return found;
}

static void check_level(const sl_envoy_level *l, int depth)
{
    CHECK(depth < SL_ENVOY_MAX_DEPTH);
    size_t wild = 0;
    for (size_t i = 0; i < l->n; i++) {
        const sl_envoy_node *n = &l->nodes[i];
        CHECK(*n->key);
        CHECK(n->final_len == strlen(n->final_key));
        CHECK((n->nparts > 0) == (memchr(n->final_key, '*', n->final_len) != NULL));
        CHECK(!n->share_threshold || n->nparts > 0);
        wild += n->nparts > 0;
        if (i > 0) {
            const sl_envoy_node *a = l->sorted[i - 1], *b = l->sorted[i];
            size_t m = a->final_len < b->final_len ? a->final_len : b->final_len;
            int c = memcmp(a->final_key, b->final_key, m);
            CHECK(c < 0 || (c == 0 && a->final_len < b->final_len));
        }
        const sl_envoy_rule *r = n->rule;
        if (r) {
            CHECK(r->unlimited ? r->nlimits == 0 : r->nlimits >= 1);
            CHECK(r->nlimits <= SL_ENVOY_MAX_LIMITS);
            for (size_t k = 0; k < r->nlimits; k++) {
                const sl_envoy_limit *lim = &r->limits[k];
                CHECK(sl_envoy_unit_seconds(lim->unit) > 0);
                if (lim->requests_per_unit > 0) {
                    CHECK(lim->limit.limit == (int64_t)lim->requests_per_unit);
                    CHECK(lim->limit.period_ns ==
                          sl_envoy_unit_seconds(lim->unit) * INT64_C(1000000000));
                    CHECK(lim->limit.algorithm == lim->algorithm);
                }
            }
            for (size_t k = 0; k < r->nreplaces; k++)
                CHECK(*r->replaces[k] && strcmp(r->replaces[k], r->name) != 0);
        }
        check_level(&n->children, depth + 1);
    }
    CHECK(wild == l->nwild);
}

typedef struct request {
    size_t n;
    sl_envoy_descriptor d[MAX_DESCS];
    sl_envoy_entry e[MAX_DESCS][MAX_ENTRIES];
} request;

/* Parses the request's lines (after the domain's) into r. */
static void parse_request(const char *p, size_t len, request *r)
{
    r->n = 0;
    while (len > 0 && r->n < MAX_DESCS) {
        const char *nl = memchr(p, '\n', len);
        size_t line = nl ? (size_t)(nl - p) : len;
        sl_envoy_descriptor *d = &r->d[r->n];
        d->entries = r->e[r->n];
        d->n = 0;
        const char *q = p;
        size_t left = line;
        while (d->n < MAX_ENTRIES) {
            const char *comma = memchr(q, ',', left);
            size_t elen = comma ? (size_t)(comma - q) : left;
            const char *eq = memchr(q, '=', elen);
            sl_envoy_entry *e = &r->e[r->n][d->n++];
            e->key = q;
            e->key_len = eq ? (size_t)(eq - q) : elen;
            e->value = eq ? eq + 1 : q + elen;
            e->value_len = eq ? elen - e->key_len - 1 : 0;
            if (!comma)
                break;
            q = comma + 1;
            left -= elen + 1;
        }
        r->n++;
        if (!nl)
            break;
        len -= line + 1;
        p = nl + 1;
    }
}

static void check_key(const char *domain, size_t dlen, const sl_envoy_descriptor *d,
                      const sl_envoy_match *m)
{
    size_t need = sl_envoy_store_key(domain, dlen, d, m, 0, NULL, 0);
    char *k = malloc(need ? need : 1);
    CHECK(k);
    CHECK(sl_envoy_store_key(domain, dlen, d, m, 0, k, need) == need);
    CHECK(need >= 7 && memcmp(k, "\x1f" "envoy" "\x1f", 7) == 0);
    size_t seps = 0;
    for (size_t i = 0; i < need; i++)
        seps += k[i] == '\x1f';
    CHECK(seps == 2 + 2 * d->n);
    free(k);
    size_t mlen = sl_envoy_metric_key(domain, dlen, d, m, NULL, 0);
    char *mk = malloc(mlen ? mlen : 1);
    CHECK(mk);
    CHECK(sl_envoy_metric_key(domain, dlen, d, m, mk, mlen) == mlen);
    CHECK(mlen >= dlen && memcmp(mk, domain, dlen) == 0);
    free(mk);
}

static void check_matches(const sl_envoy_config *c, const char *domain, size_t dlen,
                          const request *r)
{
    sl_envoy_match m[MAX_DESCS];
    int rc = sl_envoy_match_request(c, domain, dlen, r->d, r->n, m);
    const sl_envoy_domain *dom = sl_envoy_domain_find(c, domain, dlen);
    CHECK(rc == (dom ? 0 : SL_ENVOY_DOMAIN_UNKNOWN));
    for (size_t i = 0; i < r->n; i++) {
        const sl_envoy_descriptor *d = &r->d[i];
        if (!dom) {
            CHECK(!m[i].rule && !m[i].replaced);
            continue;
        }
        /* The model's walk. */
        const sl_envoy_level *level = &dom->top;
        const sl_envoy_rule *want = NULL;
        size_t depth = 0;
        for (size_t k = 0; k < d->n; k++) {
            uint8_t how = 0;
            const sl_envoy_node *node = model_step(level, &d->entries[k], &how);
            if (!node)
                break;
            CHECK(k < SL_ENVOY_MAX_DEPTH);
            CHECK(m[i].path[k] == node);
            CHECK(m[i].how[k] == how);
            depth = k + 1;
            if (node->rule && k == d->n - 1)
                want = node->rule;
            if (node->children.n == 0)
                break;
            level = &node->children;
        }
        CHECK(m[i].depth == depth);
        CHECK(m[i].rule == want);
        if (want)
            CHECK(depth == d->n && m[i].path[depth - 1]->rule == want);
        if (m[i].replaced) {
            CHECK(want && !want->unlimited && *want->name);
            bool by = false;
            for (size_t j = 0; j < r->n; j++)
                for (size_t k = 0; m[j].rule && k < m[j].rule->nreplaces; k++)
                    by |= strcmp(m[j].rule->replaces[k], want->name) == 0;
            CHECK(by);
        }
        if (want)
            check_key(domain, dlen, d, &m[i]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t tlen = nul ? (size_t)(nul - data) : size;
    char *text = copy_of(data, tlen);
    char err[512];
    sl_envoy_config *c = sl_envoy_new();
    CHECK(c);
    if (sl_envoy_add(c, text, tlen, "f.yaml", err, sizeof err) != 0) {
        CHECK(strncmp(err, "f.yaml", 6) == 0);
        CHECK(c->ndomains == 0);
        free(text);
        sl_envoy_free(c);
        return 0;
    }
    CHECK(c->ndomains == 1);
    check_level(&c->domains[0].top, 0);
    CHECK(sl_envoy_add(c, text, tlen, "g.yaml", err, sizeof err) == -1);
    CHECK(strstr(err, "duplicate domain") != NULL && strncmp(err, "g.yaml", 6) == 0);
    CHECK(c->ndomains == 1);
    if (nul) {
        size_t rlen = size - tlen - 1;
        char *req = copy_of(nul + 1, rlen);
        const char *nl = memchr(req, '\n', rlen);
        size_t dlen = nl ? (size_t)(nl - req) : rlen;
        const char *domain = req;
        if (dlen == 0) {
            domain = c->domains[0].name;
            dlen = strlen(domain);
        }
        request r;
        if (nl)
            parse_request(nl + 1, rlen - (size_t)(nl - req) - 1, &r);
        else
            r.n = 0;
        check_matches(c, domain, dlen, &r);
        free(req);
    }
    free(text);
    sl_envoy_free(c);
    return 0;
}
