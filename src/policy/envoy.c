/*
 * envoy.c: envoyproxy/ratelimit's YAML configuration (see envoy.h), loaded
 * with libyaml's document API in two passes as the reference loads it: the
 * keys of the whole file are checked first (a key the reference does not
 * know, anywhere, refuses the file), then the domain and its descriptors
 * are read in file order with the reference's rules. Every error names the
 * file, line and column of the key or value at fault.
 */
#include "policy/envoy.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

#include "common/alloc.h"
#include "policy/yaml.h"

/* ---- units ---- */

static const struct {
    const char *name;
    sl_envoy_unit unit;
    int64_t seconds;
} sl_envoy_units[] = {
    {"second", SL_ENVOY_SECOND, 1},
    {"minute", SL_ENVOY_MINUTE, 60},
    {"hour", SL_ENVOY_HOUR, 3600},
    {"day", SL_ENVOY_DAY, 86400},
    {"month", SL_ENVOY_MONTH, 86400 * 30},
    {"year", SL_ENVOY_YEAR, 86400 * 365},
    {"week", SL_ENVOY_WEEK, 86400 * 7},
};
#define SL_ENVOY_NUNITS (sizeof sl_envoy_units / sizeof sl_envoy_units[0])

sl_envoy_unit sl_envoy_unit_parse(const char *name, size_t len)
{
    for (size_t i = 0; i < SL_ENVOY_NUNITS; i++) {
        const char *u = sl_envoy_units[i].name;
        if (strlen(u) != len)
            continue;
        size_t j = 0;
        while (j < len && (name[j] | 0x20) == u[j])
            j++;
        if (j == len)
            return sl_envoy_units[i].unit;
    }
    return SL_ENVOY_UNKNOWN;
}

const char *sl_envoy_unit_name(sl_envoy_unit u)
{
    for (size_t i = 0; i < SL_ENVOY_NUNITS; i++)
        if (sl_envoy_units[i].unit == u)
            return sl_envoy_units[i].name;
    return NULL;
}

int64_t sl_envoy_unit_seconds(sl_envoy_unit u)
{
    for (size_t i = 0; i < SL_ENVOY_NUNITS; i++)
        if (sl_envoy_units[i].unit == u)
            return sl_envoy_units[i].seconds;
    return 0;
}

int sl_envoy_limit_init(sl_envoy_limit *l, sl_envoy_unit unit, uint32_t requests_per_unit,
                        sl_algorithm algorithm, int64_t burst)
{
    memset(l, 0, sizeof *l);
    l->unit = unit;
    l->requests_per_unit = requests_per_unit;
    l->algorithm = algorithm;
    l->burst = burst;
    int64_t seconds = sl_envoy_unit_seconds(unit);
    if (seconds == 0)
        return SL_ERR_PERIOD;
    if (requests_per_unit == 0)
        return SL_OK; /* every request over the limit: no sluice limit to fill */
    sl_status st = sl_limit_init(&l->limit, algorithm, (int64_t)requests_per_unit,
                                 seconds * INT64_C(1000000000), burst);
    /* The states name the limit that wrote them (see "Carried states" in
     * sluice.h), as a policy's do: a reload that changes a rule's limit,
     * unit or algorithm carries over the units each key has used, where a
     * state of another algorithm would otherwise be refused as the wrong
     * type. Every algorithm a rule may have can be carried. */
    if (st == SL_OK)
        st = sl_limit_carry(&l->limit);
    return st;
}

/* ---- freeing ---- */

static void sl_envoy_rule_free(sl_envoy_rule *r)
{
    if (!r)
        return;
    sl_free(r->name);
    for (size_t i = 0; i < r->nreplaces; i++)
        sl_free(r->replaces[i]);
    sl_free(r->replaces);
    sl_free(r->limits);
    sl_free(r->full_key);
    sl_free(r);
}

static void sl_envoy_level_free(sl_envoy_level *l);

static void sl_envoy_node_free(sl_envoy_node *n)
{
    sl_free(n->key);
    sl_free(n->value);
    sl_free(n->final_key);
    for (size_t i = 0; i < n->nparts; i++)
        sl_free(n->parts[i]);
    sl_free(n->parts);
    sl_free(n->part_lens);
    sl_envoy_rule_free(n->rule);
    sl_envoy_level_free(&n->children);
}

static void sl_envoy_level_free(sl_envoy_level *l)
{
    for (size_t i = 0; i < l->n; i++)
        sl_envoy_node_free(&l->nodes[i]);
    sl_free(l->nodes);
    sl_free(l->sorted);
    sl_free(l->wild);
    memset(l, 0, sizeof *l);
}

static void sl_envoy_domain_free(sl_envoy_domain *d)
{
    sl_free(d->name);
    sl_free(d->file);
    sl_envoy_level_free(&d->top);
}

sl_envoy_config *sl_envoy_new(void)
{
    return sl_calloc(1, sizeof(sl_envoy_config));
}

void sl_envoy_free(sl_envoy_config *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->ndomains; i++)
        sl_envoy_domain_free(&c->domains[i]);
    sl_free(c->domains);
    sl_free(c);
}

/* ---- the loader ---- */

typedef struct sl_envoy_loader {
    yaml_document_t doc;
    const char *name; /* the file's name, for messages */
    char *file;       /* the domain's copy of it, that rules point to */
    char *err;
    size_t errlen;
    size_t nodes;     /* descriptors read so far (SL_ENVOY_MAX_NODES) */
    size_t visits;    /* mappings the key check visited */
} sl_envoy_loader;

static int sl_efail(sl_envoy_loader *ld, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int sl_efail(sl_envoy_loader *ld, const yaml_node_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sl_yaml_vfail(ld->err, ld->errlen, ld->name, n, fmt, ap);
    va_end(ap);
    return -1;
}

static yaml_node_t *sl_enode(sl_envoy_loader *ld, int index)
{
    return yaml_document_get_node(&ld->doc, index);
}


static bool sl_eplain(const yaml_node_t *n)
{
    return sl_yaml_is_scalar(n) && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

/* Is the scalar n the word, whole (a "\0" inside it is no end)? */
static bool sl_eis(const yaml_node_t *n, const char *word)
{
    return n->data.scalar.length == strlen(word) && strcmp(sl_yaml_scalar(n), word) == 0;
}

/* A plain scalar that YAML 1.1 (the reference's yaml.v2) reads as null. */
static bool sl_enull(const yaml_node_t *n)
{
    if (!n)
        return true;
    if (!sl_eplain(n))
        return false;
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
    for (size_t i = 0; i < 5; i++)
        if (sl_eis(n, nulls[i]))
            return true;
    return false;
}

/* Quotes a node for a message, cut to 40 bytes. */
static const char *sl_equote(const yaml_node_t *n, char buf[48])
{
    if (!n)
        return "nothing";
    if (!sl_yaml_is_scalar(n))
        return n->type == YAML_MAPPING_NODE ? "a mapping" : "a list";
    snprintf(buf, 48, "'%.40s'", sl_yaml_scalar(n));
    return buf;
}

/* ---- pass 1: the keys, as the reference's validateYamlKeys ---- */

static const char *const sl_envoy_keys[] = {
    /* the reference's */
    "domain", "key", "value", "descriptors", "rate_limit", "unit", "requests_per_unit",
    "unlimited", "shadow_mode", "quota_mode", "name", "replaces", "detailed_metric",
    "value_to_metric", "share_threshold", "metadata",
    /* sluice's extensions */
    "algorithm", "burst", "rate_limits",
};

/* A plain scalar that yaml.v2 reads as a number, a boolean or null: not
 * a string key. */
static bool sl_enot_string(const yaml_node_t *n)
{
    if (!sl_eplain(n))
        return false;
    if (sl_enull(n))
        return true;
    static const char *const bools[] = {"y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No",
                                        "NO", "true", "True", "TRUE", "false", "False", "FALSE",
                                        "on", "On", "ON", "off", "Off", "OFF"};
    for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++)
        if (sl_eis(n, bools[i]))
            return true;
    const char *s = sl_yaml_scalar(n);
    char *end;
    errno = 0;
    (void)strtod(s, &end);
    return end != s && *end == '\0';
}

static int sl_echeck_keys(sl_envoy_loader *ld, const yaml_node_t *m, int depth);

static int sl_echeck_value(sl_envoy_loader *ld, const yaml_node_t *v, int depth)
{
    char q[48];
    if (!v || v->type == YAML_SCALAR_NODE)
        return 0;
    if (depth > 2 * SL_ENVOY_MAX_DEPTH + 8)
        return sl_efail(ld, v, "config error, the file nests deeper than descriptors of %d "
                               "levels can", SL_ENVOY_MAX_DEPTH);
    if (v->type == YAML_MAPPING_NODE)
        return sl_echeck_keys(ld, v, depth + 1);
    for (yaml_node_item_t *i = v->data.sequence.items.start; i < v->data.sequence.items.top; i++) {
        const yaml_node_t *e = sl_enode(ld, *i);
        if (!e || e->type != YAML_MAPPING_NODE)
            return sl_efail(ld, e ? e : v,
                            "config error, yaml file contains list of type other than map: %s",
                            sl_equote(e, q));
        if (sl_echeck_keys(ld, e, depth + 1))
            return -1;
    }
    return 0;
}

static int sl_echeck_keys(sl_envoy_loader *ld, const yaml_node_t *m, int depth)
{
    char q[48];
    /* Aliases let a small file name one mapping many times: every visit
     * counts, which also bounds the second pass. */
    if (++ld->visits > 8 * SL_ENVOY_MAX_NODES)
        return sl_efail(ld, m, "config error, the file holds more than %d mappings (aliases "
                               "counted)", 8 * SL_ENVOY_MAX_NODES);
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = sl_enode(ld, p->key), *v = sl_enode(ld, p->value);
        if (!sl_yaml_is_scalar(k) || sl_enot_string(k))
            return sl_efail(ld, k, "config error, key is not of type string: %s", sl_equote(k, q));
        bool known = false;
        for (size_t i = 0; i < sizeof sl_envoy_keys / sizeof sl_envoy_keys[0] && !known; i++)
            known = sl_eis(k, sl_envoy_keys[i]);
        if (!known && strlen(sl_yaml_scalar(k)) != k->data.scalar.length)
            return sl_efail(ld, k, "config error, unknown key '%.60s\\0...' (it holds a NUL byte)",
                            sl_yaml_scalar(k));
        if (!known)
            return sl_efail(ld, k, "config error, unknown key '%.60s'", sl_yaml_scalar(k));
        if (sl_eis(k, "metadata"))
            continue; /* arbitrary, as the reference leaves it */
        if (sl_echeck_value(ld, v, depth))
            return -1;
    }
    /* A key twice in one mapping: YAML forbids it, and the last one would
     * silently win. */
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++)
        for (yaml_node_pair_t *r = m->data.mapping.pairs.start; r < p; r++) {
            const yaml_node_t *a = sl_enode(ld, r->key), *b = sl_enode(ld, p->key);
            if (strcmp(sl_yaml_scalar(a), sl_yaml_scalar(b)) == 0)
                return sl_efail(ld, b,
                                "config error, key '%.60s' is given twice (first on line %zu)",
                                sl_yaml_scalar(b), a->start_mark.line + 1);
        }
    return 0;
}

/* ---- pass 2: the values ---- */

static const yaml_node_t *sl_eget(sl_envoy_loader *ld, const yaml_node_t *m, const char *key,
                                  const yaml_node_t **knode)
{
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = sl_enode(ld, p->key);
        if (sl_eis(k, key)) {
            if (knode)
                *knode = k;
            const yaml_node_t *v = sl_enode(ld, p->value);
            return v ? v : k;
        }
    }
    return NULL;
}

/* A string field: any scalar's text, null as "" (as yaml.v2 fills a Go
 * string). *out points into the document. */
static int sl_estring(sl_envoy_loader *ld, const yaml_node_t *v, const char *what,
                      const char **out)
{
    char q[48];
    if (!v || sl_enull(v)) {
        *out = "";
        return 0;
    }
    if (!sl_yaml_is_scalar(v))
        return sl_efail(ld, v, "%s must be a string (got %s)", what, sl_equote(v, q));
    *out = sl_yaml_scalar(v);
    if (strlen(*out) != v->data.scalar.length)
        return sl_efail(ld, v, "%s must not hold a NUL byte", what);
    return 0;
}

static int sl_ebool(sl_envoy_loader *ld, const yaml_node_t *v, const char *what, bool *out)
{
    char q[48];
    static const char *const yes[] = {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE",
                                      "on", "On", "ON"};
    static const char *const no[] = {"n", "N", "no", "No", "NO", "false", "False", "FALSE",
                                     "off", "Off", "OFF"};
    *out = false;
    if (!v || sl_enull(v))
        return 0;
    for (size_t i = 0; i < sizeof yes / sizeof yes[0] && sl_eplain(v); i++) {
        if (sl_eis(v, yes[i]))
            return *out = true, 0;
        if (sl_eis(v, no[i]))
            return 0;
    }
    return sl_efail(ld, v, "%s must be true or false (got %s)", what, sl_equote(v, q));
}

/* A whole number from 0 to max, plain decimal (null: 0). */
static int sl_euint(sl_envoy_loader *ld, const yaml_node_t *v, const char *what, uint64_t max,
                    uint64_t *out)
{
    char q[48];
    *out = 0;
    if (!v || sl_enull(v))
        return 0;
    if (sl_eplain(v)) {
        const char *s = sl_yaml_scalar(v);
        if (*s == '+')
            s++;
        uint64_t x = 0;
        size_t i = 0;
        for (; s[i] >= '0' && s[i] <= '9'; i++) {
            x = x * 10 + (uint64_t)(s[i] - '0');
            if (x > max)
                break;
        }
        if (i > 0 && s[i] == '\0' && x <= max) {
            *out = x;
            return 0;
        }
    }
    return sl_efail(ld, v, "%s must be a whole number from 0 to %llu (got %s)", what,
                    (unsigned long long)max, sl_equote(v, q));
}

static int sl_ealgorithm(sl_envoy_loader *ld, const yaml_node_t *v, sl_algorithm *out)
{
    char q[48];
    *out = SL_FIXED_WINDOW;
    if (!v || sl_enull(v))
        return 0;
    for (int a = 0; a < SL_ALGORITHM_COUNT && sl_yaml_is_scalar(v); a++)
        if (a != SL_CONCURRENCY && sl_eis(v, sl_algorithm_name((sl_algorithm)a)))
            return *out = (sl_algorithm)a, 0;
    return sl_efail(ld, v,
                    "unknown algorithm %s (use fixed_window, sliding_window, sliding_log, gcra, "
                    "token_bucket or leaky_bucket)",
                    sl_equote(v, q));
}

/* One limit of the mapping m: unit and requests_per_unit (the
 * reference's), algorithm and burst (sluice's). */
static int sl_elimit(sl_envoy_loader *ld, const yaml_node_t *m, sl_envoy_limit *out)
{
    const yaml_node_t *uk = NULL;
    const yaml_node_t *u = sl_eget(ld, m, "unit", &uk);
    const char *unit;
    if (sl_estring(ld, u, "unit", &unit))
        return -1;
    out->unit = sl_envoy_unit_parse(unit, strlen(unit));
    if (out->unit == SL_ENVOY_UNKNOWN)
        return sl_efail(ld, u ? u : m, "invalid rate limit unit '%.40s'", unit);
    uint64_t rpu;
    const yaml_node_t *r = sl_eget(ld, m, "requests_per_unit", NULL);
    if (sl_euint(ld, r, "requests_per_unit", UINT32_MAX, &rpu))
        return -1;
    out->requests_per_unit = (uint32_t)rpu;
    const yaml_node_t *a = sl_eget(ld, m, "algorithm", NULL);
    if (sl_ealgorithm(ld, a, &out->algorithm))
        return -1;
    uint64_t burst;
    const yaml_node_t *b = sl_eget(ld, m, "burst", NULL);
    if (sl_euint(ld, b, "burst", UINT32_MAX, &burst))
        return -1;
    out->burst = (int64_t)burst;
    if (burst > 0 && out->algorithm != SL_GCRA && out->algorithm != SL_TOKEN_BUCKET &&
        out->algorithm != SL_LEAKY_BUCKET)
        return sl_efail(ld, b,
                        "burst applies to gcra, token_bucket and leaky_bucket, not %s (its limit "
                        "is per window)",
                        sl_algorithm_name(out->algorithm));
    sl_status st = sl_envoy_limit_init(out, out->unit, out->requests_per_unit, out->algorithm,
                                       out->burst);
    if (st != SL_OK)
        return sl_efail(ld, r ? r : m, "%u per %s cannot be a %s limit: %s",
                        out->requests_per_unit, unit, sl_algorithm_name(out->algorithm),
                        sl_strerror(st));
    return 0;
}

/* Refuses in `m` every key of `keys` (a rate_limits entry's or an
 * unlimited rule's misplaced keys), with `why`. */
static int sl_erefuse(sl_envoy_loader *ld, const yaml_node_t *m, const char *const *keys,
                      size_t n, const char *why)
{
    for (size_t i = 0; i < n; i++) {
        const yaml_node_t *k = NULL;
        if (sl_eget(ld, m, keys[i], &k))
            return sl_efail(ld, k, "%s %s", keys[i], why);
    }
    return 0;
}

static char *sl_edup(sl_envoy_loader *ld, const char *s)
{
    char *d = sl_strdup(s);
    if (!d)
        sl_efail(ld, NULL, "out of memory");
    return d;
}

/* Reads a descriptor's rate_limit (the mapping rl) and its rate_limits
 * (rls, or NULL) into a new rule. */
static int sl_erule(sl_envoy_loader *ld, const yaml_node_t *rlkey, const yaml_node_t *rl,
                    const yaml_node_t *rls, const char *full_key, sl_envoy_rule **out)
{
    char q[48];
    if (rl->type != YAML_MAPPING_NODE)
        return sl_efail(ld, rl, "rate_limit must be a mapping (got %s)", sl_equote(rl, q));
    sl_envoy_rule *r = sl_calloc(1, sizeof *r);
    if (!r)
        return sl_efail(ld, NULL, "out of memory");
    *out = r;
    r->file = ld->file;
    r->line = (int)rlkey->start_mark.line + 1;
    if (!(r->full_key = sl_edup(ld, full_key)))
        return -1;
    const char *name;
    if (sl_estring(ld, sl_eget(ld, rl, "name", NULL), "name", &name) ||
        !(r->name = sl_edup(ld, name)))
        return -1;
    if (sl_ebool(ld, sl_eget(ld, rl, "unlimited", NULL), "unlimited", &r->unlimited))
        return -1;
    const yaml_node_t *uk = NULL, *u = sl_eget(ld, rl, "unit", &uk);
    if (r->unlimited) {
        const char *unit;
        if (sl_estring(ld, u, "unit", &unit))
            return -1;
        if (sl_envoy_unit_parse(unit, strlen(unit)) != SL_ENVOY_UNKNOWN)
            return sl_efail(ld, uk, "should not specify rate limit unit when unlimited");
        static const char *const extra[] = {"algorithm", "burst"};
        if (sl_erefuse(ld, rl, extra, 2, "has no meaning when unlimited"))
            return -1;
        if (rls && !sl_enull(rls))
            return sl_efail(ld, rls, "rate_limits has no meaning beside an unlimited rate_limit");
    } else {
        r->limits = sl_calloc(SL_ENVOY_MAX_LIMITS, sizeof *r->limits);
        if (!r->limits)
            return sl_efail(ld, NULL, "out of memory");
        if (sl_elimit(ld, rl, &r->limits[0]))
            return -1;
        r->nlimits = 1;
    }
    /* replaces: a list of {name} (checked as maps by pass 1). */
    const yaml_node_t *rep = sl_eget(ld, rl, "replaces", NULL);
    if (rep && !sl_enull(rep)) {
        if (rep->type != YAML_SEQUENCE_NODE)
            return sl_efail(ld, rep, "replaces must be a list of {name: ...} (got %s)",
                            sl_equote(rep, q));
        size_t n = (size_t)(rep->data.sequence.items.top - rep->data.sequence.items.start);
        r->replaces = sl_calloc(n ? n : 1, sizeof *r->replaces);
        if (!r->replaces)
            return sl_efail(ld, NULL, "out of memory");
        for (yaml_node_item_t *i = rep->data.sequence.items.start;
             i < rep->data.sequence.items.top; i++) {
            const yaml_node_t *e = sl_enode(ld, *i);
            const char *rn;
            if (sl_estring(ld, sl_eget(ld, e, "name", NULL), "replaces: name", &rn))
                return -1;
            if (!*rn)
                return sl_efail(ld, e, "should not have an empty replaces entry");
            if (strcmp(rn, r->name) == 0)
                return sl_efail(ld, e, "replaces should not contain name of same descriptor");
            if (!(r->replaces[r->nreplaces] = sl_edup(ld, rn)))
                return -1;
            r->nreplaces++;
        }
    }
    /* rate_limits: more limits, taken with rate_limit's. */
    if (rls && !sl_enull(rls) && !r->unlimited) {
        if (rls->type != YAML_SEQUENCE_NODE)
            return sl_efail(ld, rls, "rate_limits must be a list of limits (got %s)",
                            sl_equote(rls, q));
        for (yaml_node_item_t *i = rls->data.sequence.items.start;
             i < rls->data.sequence.items.top; i++) {
            const yaml_node_t *e = sl_enode(ld, *i);
            if (r->nlimits == SL_ENVOY_MAX_LIMITS)
                return sl_efail(ld, e, "a descriptor has at most %d limits (rate_limit and "
                                       "rate_limits together)", SL_ENVOY_MAX_LIMITS);
            static const char *const own[] = {"name", "replaces", "unlimited"};
            if (sl_erefuse(ld, e, own, 3, "belongs in rate_limit, not in rate_limits"))
                return -1;
            if (sl_elimit(ld, e, &r->limits[r->nlimits]))
                return -1;
            r->nlimits++;
        }
    }
    return 0;
}

static int sl_ecmp_nodes(const void *a, const void *b)
{
    const sl_envoy_node *x = *(sl_envoy_node *const *)a, *y = *(sl_envoy_node *const *)b;
    size_t n = x->final_len < y->final_len ? x->final_len : y->final_len;
    int c = memcmp(x->final_key, y->final_key, n);
    if (c != 0)
        return c;
    return x->final_len < y->final_len ? -1 : x->final_len > y->final_len ? 1 : 0;
}

/* Splits a wildcard's final_key at each '*' (strings.Split). */
static int sl_esplit(sl_envoy_loader *ld, sl_envoy_node *n)
{
    size_t stars = 0;
    for (size_t i = 0; i < n->final_len; i++)
        stars += n->final_key[i] == '*';
    n->parts = sl_calloc(stars + 1, sizeof *n->parts);
    n->part_lens = sl_calloc(stars + 1, sizeof *n->part_lens);
    if (!n->parts || !n->part_lens)
        return sl_efail(ld, NULL, "out of memory");
    const char *s = n->final_key;
    for (size_t p = 0; p <= stars; p++) {
        const char *e = strchr(s, '*');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        n->parts[p] = sl_malloc(len + 1);
        if (!n->parts[p])
            return sl_efail(ld, NULL, "out of memory");
        memcpy(n->parts[p], s, len);
        n->parts[p][len] = '\0';
        n->part_lens[p] = len;
        n->nparts = p + 1;
        s = e ? e + 1 : s + len;
    }
    return 0;
}

static int sl_elevel(sl_envoy_loader *ld, const yaml_node_t *list, const char *parent,
                     int depth, sl_envoy_level *out);

/* One `- key: ...` of a descriptors list into *n; `parent` is the composite
 * key of the level ("domain." or "domain.key_value."). `level` holds the
 * siblings read so far, for the duplicate check. */
static int sl_edescriptor(sl_envoy_loader *ld, const yaml_node_t *m, const char *parent,
                          int depth, const sl_envoy_level *level, sl_envoy_node *n)
{
    const yaml_node_t *kk = NULL;
    const char *key, *value;
    if (sl_estring(ld, sl_eget(ld, m, "key", &kk), "key", &key))
        return -1;
    if (!*key)
        return sl_efail(ld, kk ? kk : m, "descriptor has empty key");
    if (sl_estring(ld, sl_eget(ld, m, "value", NULL), "value", &value))
        return -1;
    size_t klen = strlen(key), vlen = strlen(value), plen = strlen(parent);
    n->final_len = klen + (vlen ? 1 + vlen : 0);
    char *composite = sl_malloc(plen + n->final_len + 2);
    n->key = sl_edup(ld, key);
    n->value = sl_edup(ld, value);
    n->final_key = sl_malloc(n->final_len + 1);
    if (!composite || !n->key || !n->value || !n->final_key) {
        sl_free(composite);
        return sl_efail(ld, NULL, "out of memory");
    }
    snprintf(n->final_key, n->final_len + 1, vlen ? "%s_%s" : "%s", key, value);
    snprintf(composite, plen + n->final_len + 1, "%s%s", parent, n->final_key);
    for (size_t i = 0; i + 1 < level->n; i++) /* the siblings before this one */
        if (level->nodes[i].final_len == n->final_len &&
            memcmp(level->nodes[i].final_key, n->final_key, n->final_len) == 0) {
            int rc = sl_efail(ld, kk, "duplicate descriptor composite key '%.200s'", composite);
            sl_free(composite);
            return rc;
        }
    int rc = -1;
    const yaml_node_t *rlk = NULL, *rl = sl_eget(ld, m, "rate_limit", &rlk);
    const yaml_node_t *rlsk = NULL, *rls = sl_eget(ld, m, "rate_limits", &rlsk);
    if (rls && !sl_enull(rls) && (!rl || sl_enull(rl))) {
        sl_efail(ld, rlsk, "rate_limits needs a rate_limit beside it (the first limit, the "
                           "one Envoy is told of)");
        goto out;
    }
    if (rl && !sl_enull(rl) && sl_erule(ld, rlk, rl, rls, composite, &n->rule))
        goto out;
    bool shadow, quota, detailed;
    if (sl_ebool(ld, sl_eget(ld, m, "shadow_mode", NULL), "shadow_mode", &shadow) ||
        sl_ebool(ld, sl_eget(ld, m, "quota_mode", NULL), "quota_mode", &quota) ||
        sl_ebool(ld, sl_eget(ld, m, "detailed_metric", NULL), "detailed_metric", &detailed) ||
        sl_ebool(ld, sl_eget(ld, m, "value_to_metric", NULL), "value_to_metric",
                 &n->value_to_metric))
        goto out;
    const yaml_node_t *stk = NULL, *st = sl_eget(ld, m, "share_threshold", &stk);
    if (sl_ebool(ld, st, "share_threshold", &n->share_threshold))
        goto out;
    if (n->rule) {
        n->rule->shadow_mode = shadow;
        n->rule->quota_mode = quota;
        n->rule->detailed_metric = detailed;
    }
    bool wildcard = memchr(n->final_key, '*', n->final_len) != NULL;
    if (n->share_threshold && !wildcard) {
        sl_efail(ld, stk,
                 "share_threshold can only be used with wildcard values (containing '*'), but "
                 "found key '%.200s'",
                 n->final_key);
        goto out;
    }
    if (wildcard && sl_esplit(ld, n))
        goto out;
    const yaml_node_t *dk = NULL, *d = sl_eget(ld, m, "descriptors", &dk);
    if (d && !sl_enull(d)) {
        if (depth + 1 >= SL_ENVOY_MAX_DEPTH) {
            sl_efail(ld, dk, "descriptors nest deeper than %d levels", SL_ENVOY_MAX_DEPTH);
            goto out;
        }
        composite[plen + n->final_len] = '.';
        composite[plen + n->final_len + 1] = '\0';
        if (sl_elevel(ld, d, composite, depth + 1, &n->children))
            goto out;
    }
    rc = 0;
out:
    sl_free(composite);
    return rc;
}

/* A descriptors list (the file's top one at depth 0) into *out. */
static int sl_elevel(sl_envoy_loader *ld, const yaml_node_t *list, const char *parent,
                     int depth, sl_envoy_level *out)
{
    char q[48];
    memset(out, 0, sizeof *out);
    if (!list || sl_enull(list))
        return 0;
    if (list->type != YAML_SEQUENCE_NODE)
        return sl_efail(ld, list, "descriptors must be a list (got %s)", sl_equote(list, q));
    size_t n = (size_t)(list->data.sequence.items.top - list->data.sequence.items.start);
    if (n == 0)
        return 0;
    if (n > SL_ENVOY_MAX_NODES - ld->nodes)
        return sl_efail(ld, list, "the file holds more than %d descriptors", SL_ENVOY_MAX_NODES);
    ld->nodes += n;
    out->nodes = sl_calloc(n, sizeof *out->nodes);
    out->sorted = sl_calloc(n, sizeof *out->sorted);
    out->wild = sl_calloc(n, sizeof *out->wild);
    if (!out->nodes || !out->sorted || !out->wild)
        return sl_efail(ld, NULL, "out of memory");
    for (yaml_node_item_t *i = list->data.sequence.items.start; i < list->data.sequence.items.top;
         i++) {
        sl_envoy_node *node = &out->nodes[out->n];
        /* Counted before it is read, so that a failure frees what it holds. */
        out->n++;
        if (sl_edescriptor(ld, sl_enode(ld, *i), parent, depth, out, node)) {
            out->n--;
            sl_envoy_node_free(node);
            return -1;
        }
        out->sorted[out->n - 1] = node;
        if (node->nparts)
            out->wild[out->nwild++] = node;
    }
    qsort(out->sorted, out->n, sizeof *out->sorted, sl_ecmp_nodes);
    return 0;
}

static int sl_edomain(sl_envoy_loader *ld, const sl_envoy_config *c, sl_envoy_domain *d)
{
    char q[48];
    yaml_node_t *root = yaml_document_get_root_node(&ld->doc);
    if (root && root->type != YAML_MAPPING_NODE && !sl_enull(root))
        return sl_efail(ld, root, "error loading config file: the file must be a mapping "
                                  "(domain, descriptors), not %s",
                        sl_equote(root, q));
    if (root && root->type == YAML_MAPPING_NODE && sl_echeck_keys(ld, root, 0))
        return -1;
    const char *domain = "";
    const yaml_node_t *dk = NULL, *dv = NULL;
    if (root && root->type == YAML_MAPPING_NODE) {
        dv = sl_eget(ld, root, "domain", &dk);
        if (sl_estring(ld, dv, "domain", &domain))
            return -1;
    }
    if (!*domain)
        return sl_efail(ld, dk ? dk : root, "config file cannot have empty domain");
    if (sl_envoy_domain_find(c, domain, strlen(domain)))
        return sl_efail(ld, dv, "duplicate domain '%.200s' in config file", domain);
    size_t dlen = strlen(domain);
    d->name = sl_edup(ld, domain);
    char *parent = sl_malloc(dlen + 2);
    if (!d->name || !parent) {
        sl_free(parent);
        return sl_efail(ld, NULL, "out of memory");
    }
    memcpy(parent, domain, dlen);
    parent[dlen] = '.';
    parent[dlen + 1] = '\0';
    int rc = sl_elevel(ld, sl_eget(ld, root, "descriptors", NULL), parent, 0, &d->top);
    sl_free(parent);
    return rc;
}

int sl_envoy_add(sl_envoy_config *c, const char *text, size_t len, const char *name, char *err,
                 size_t errlen)
{
    sl_envoy_loader ld = {.name = name, .err = err, .errlen = errlen};
    if (len > SL_ENVOY_FILE_MAX_BYTES)
        return sl_efail(&ld, NULL, "the file is larger than %d bytes", SL_ENVOY_FILE_MAX_BYTES);
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return sl_efail(&ld, NULL, "out of memory");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &ld.doc)) {
        snprintf(err, errlen, "%s:%zu:%zu: error loading config file: %s%s%s", name,
                 parser.problem_mark.line + 1, parser.problem_mark.column + 1,
                 parser.problem ? parser.problem : "invalid YAML", parser.context ? " " : "",
                 parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        return -1;
    }
    yaml_parser_delete(&parser);
    sl_envoy_domain d = {0};
    sl_envoy_domain *grown = NULL;
    int rc = -1;
    if (!(d.file = ld.file = sl_edup(&ld, name)))
        goto out;
    if (sl_edomain(&ld, c, &d))
        goto out;
    grown = sl_realloc(c->domains, (c->ndomains + 1) * sizeof *c->domains);
    if (!grown) {
        sl_efail(&ld, NULL, "out of memory");
        goto out;
    }
    c->domains = grown;
    size_t at = 0;
    while (at < c->ndomains && strcmp(c->domains[at].name, d.name) < 0)
        at++;
    memmove(&c->domains[at + 1], &c->domains[at], (c->ndomains - at) * sizeof *c->domains);
    c->domains[at] = d;
    c->ndomains++;
    rc = 0;
out:
    if (rc != 0)
        sl_envoy_domain_free(&d);
    yaml_document_delete(&ld.doc);
    return rc;
}

static int sl_ecmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads the file at path into a new buffer (the caller's, sl_free). */
static char *sl_eread(const char *path, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = sl_malloc(SL_ENVOY_FILE_MAX_BYTES + 1);
    size_t n = buf ? fread(buf, 1, SL_ENVOY_FILE_MAX_BYTES + 1, f) : 0;
    int failed = !buf || ferror(f);
    fclose(f);
    if (failed) {
        snprintf(err, errlen, buf ? "%s: cannot read the file" : "%s: out of memory", path);
        sl_free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

int sl_envoy_load_dir(const char *dir, sl_envoy_config **out, char *err, size_t errlen)
{
    *out = NULL;
    DIR *dh = opendir(dir);
    if (!dh) {
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = -1;
    sl_envoy_config *c = sl_envoy_new();
    if (!c) {
        snprintf(err, errlen, "%s: out of memory", dir);
        goto out;
    }
    for (struct dirent *e; (e = readdir(dh));) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len <= 5 || strcmp(e->d_name + len - 5, ".yaml") != 0)
            continue;
        if (n == cap) {
            size_t ncap = cap ? 2 * cap : 16;
            char **g = sl_realloc(names, ncap * sizeof *names);
            if (!g) {
                snprintf(err, errlen, "%s: out of memory", dir);
                goto out;
            }
            names = g;
            cap = ncap;
        }
        size_t plen = strlen(dir) + 1 + len + 1;
        if (!(names[n] = sl_malloc(plen))) {
            snprintf(err, errlen, "%s: out of memory", dir);
            goto out;
        }
        snprintf(names[n++], plen, "%s/%s", dir, e->d_name);
    }
    if (n)
        qsort(names, n, sizeof *names, sl_ecmp_names);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (stat(names[i], &st) != 0) {
            snprintf(err, errlen, "%s: %s", names[i], strerror(errno));
            goto out;
        }
        if (!S_ISREG(st.st_mode))
            continue;
        size_t len;
        char *text = sl_eread(names[i], &len, err, errlen);
        if (!text)
            goto out;
        int added = sl_envoy_add(c, text, len, names[i], err, errlen);
        sl_free(text);
        if (added)
            goto out;
    }
    *out = c;
    c = NULL;
    rc = 0;
out:
    closedir(dh);
    for (size_t i = 0; i < n; i++)
        sl_free(names[i]);
    sl_free(names);
    sl_envoy_free(c);
    return rc;
}

sl_status sl_envoy_limit_align(sl_envoy_limit *l, int64_t clock_offset_ns)
{
    if (l->requests_per_unit == 0)
        return SL_OK;
    sl_status st = sl_limit_align(&l->limit, 0, 0, clock_offset_ns);
    if (st != SL_OK)
        return st;
    /* sl_limit_align counts windows from Monday 1970-01-05; the reference
     * from the epoch, which differs for a week, a month and a year: now +
     * clock_offset_ns a multiple of the period, so now = -offset mod it. */
    int64_t p = l->limit.period_ns, ph = -clock_offset_ns % p;
    l->limit.phase_ns = ph < 0 ? ph + p : ph;
    return SL_OK;
}

static void sl_envoy_level_align(sl_envoy_level *l, int64_t clock_offset_ns)
{
    for (size_t i = 0; i < l->n; i++) {
        sl_envoy_node *n = &l->nodes[i];
        /* Loaded limits align without an error (no months, an offset in range). */
        for (size_t j = 0; n->rule && j < n->rule->nlimits; j++)
            sl_envoy_limit_align(&n->rule->limits[j], clock_offset_ns);
        sl_envoy_level_align(&n->children, clock_offset_ns);
    }
}

void sl_envoy_align(sl_envoy_config *c, int64_t clock_offset_ns)
{
    for (size_t i = 0; c && i < c->ndomains; i++)
        sl_envoy_level_align(&c->domains[i].top, clock_offset_ns);
}

const sl_envoy_domain *sl_envoy_domain_find(const sl_envoy_config *c, const char *name,
                                            size_t len)
{
    size_t lo = 0, hi = c ? c->ndomains : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *d = c->domains[mid].name;
        size_t dl = strlen(d);
        int cmp = memcmp(d, name, dl < len ? dl : len);
        if (cmp == 0)
            cmp = dl < len ? -1 : dl > len ? 1 : 0;
        if (cmp == 0)
            return &c->domains[mid];
        if (cmp < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* ---- matching ---- */

/* The child of `l` whose final_key is s[0..len), NULL when none. */
static const sl_envoy_node *sl_efind(const sl_envoy_level *l, const char *s, size_t len)
{
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const sl_envoy_node *x = l->sorted[mid];
        int cmp = memcmp(x->final_key, s, x->final_len < len ? x->final_len : len);
        if (cmp == 0)
            cmp = x->final_len < len ? -1 : x->final_len > len ? 1 : 0;
        if (cmp == 0)
            return x;
        if (cmp < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static bool sl_ehas(const char *s, size_t len, const char *p, size_t plen, size_t *at)
{
    if (plen > len)
        return false;
    for (size_t i = 0; i + plen <= len; i++)
        if (memcmp(s + i, p, plen) == 0)
            return *at = i, true;
    return false;
}

/* The reference's wildcardMatch: each '*' matches zero or more bytes; the
 * first part is a prefix, the last a suffix, the middle ones found in
 * order between them. */
static bool sl_ewild(const sl_envoy_node *w, const char *s, size_t len)
{
    if (w->nparts == 1)
        return w->part_lens[0] == len && memcmp(w->parts[0], s, len) == 0;
    size_t first = w->part_lens[0], last = w->part_lens[w->nparts - 1], fixed = 0;
    for (size_t i = 0; i < w->nparts; i++)
        fixed += w->part_lens[i];
    if (len < fixed || memcmp(s, w->parts[0], first) != 0 ||
        memcmp(s + len - last, w->parts[w->nparts - 1], last) != 0)
        return false;
    const char *rest = s + first;
    size_t rlen = len - first - last;
    for (size_t i = 1; i + 1 < w->nparts; i++) {
        size_t at;
        if (!sl_ehas(rest, rlen, w->parts[i], w->part_lens[i], &at))
            return false;
        rest += at + w->part_lens[i];
        rlen -= at + w->part_lens[i];
    }
    return true;
}

int sl_envoy_match_descriptor(const sl_envoy_domain *d, const sl_envoy_descriptor *desc,
                              sl_envoy_match *m)
{
    m->rule = NULL;
    m->replaced = false;
    m->depth = 0;
    const sl_envoy_level *level = &d->top;
    char stack[SL_ENVOY_SCRATCH];
    for (size_t i = 0; i < desc->n && i < SL_ENVOY_MAX_DEPTH; i++) {
        const sl_envoy_entry *e = &desc->entries[i];
        /* key "_" value: the reference's finalKey (a "_" even when the
         * value is empty). */
        if (e->key_len > SIZE_MAX - 1 - e->value_len)
            return SL_ERR_NOMEM;
        size_t flen = e->key_len + 1 + e->value_len;
        char *fk = flen <= sizeof stack ? stack : sl_malloc(flen);
        if (!fk)
            return SL_ERR_NOMEM;
        if (e->key_len)
            memcpy(fk, e->key, e->key_len);
        fk[e->key_len] = '_';
        if (e->value_len)
            memcpy(fk + e->key_len + 1, e->value, e->value_len);
        const sl_envoy_node *next = sl_efind(level, fk, flen);
        uint8_t how = SL_ENVOY_BY_VALUE;
        for (size_t w = 0; !next && w < level->nwild; w++)
            if (sl_ewild(level->wild[w], fk, flen))
                next = level->wild[w], how = SL_ENVOY_BY_WILDCARD;
        if (fk != stack)
            sl_free(fk);
        if (!next)
            next = sl_efind(level, e->key, e->key_len), how = SL_ENVOY_BY_KEY;
        if (!next)
            break;
        m->path[i] = next;
        m->how[i] = how;
        m->depth = i + 1;
        if (next->rule && i == desc->n - 1)
            m->rule = next->rule;
        if (next->children.n == 0)
            break;
        level = &next->children;
    }
    return 0;
}

int sl_envoy_match_request(const sl_envoy_config *c, const char *domain, size_t dlen,
                           const sl_envoy_descriptor *desc, size_t n, sl_envoy_match *out)
{
    const sl_envoy_domain *d = sl_envoy_domain_find(c, domain, dlen);
    for (size_t i = 0; i < n; i++) {
        out[i].rule = NULL;
        out[i].replaced = false;
        out[i].depth = 0;
        if (d) {
            int rc = sl_envoy_match_descriptor(d, &desc[i], &out[i]);
            if (rc != 0)
                return rc;
        }
    }
    if (!d)
        return SL_ENVOY_DOMAIN_UNKNOWN;
    /* replaces: names gathered from every matched rule, then every named,
     * limited rule among them dropped (an unlimited one is answered OK
     * either way). Quadratic in the request's descriptors, which are few. */
    for (size_t i = 0; i < n; i++) {
        const sl_envoy_rule *r = out[i].rule;
        if (!r || r->unlimited || !*r->name)
            continue;
        for (size_t j = 0; j < n && !out[i].replaced; j++) {
            const sl_envoy_rule *o = out[j].rule;
            for (size_t k = 0; o && k < o->nreplaces; k++)
                if (strcmp(o->replaces[k], r->name) == 0) {
                    out[i].replaced = true;
                    break;
                }
        }
    }
    return 0;
}

/* ---- keys ---- */

typedef struct sl_ekey {
    char *out;
    size_t cap, len;
} sl_ekey;

static void sl_ekey_raw(sl_ekey *k, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++, k->len++)
        if (k->len < k->cap)
            k->out[k->len] = s[i];
}

/* Appends s with 0x1b and 0x1f escaped (envoy.h). */
static void sl_ekey_part(sl_ekey *k, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\x1b')
            sl_ekey_raw(k, "\x1b" "1", 2);
        else if (s[i] == '\x1f')
            sl_ekey_raw(k, "\x1b" "2", 2);
        else
            sl_ekey_raw(k, &s[i], 1);
    }
}

/* A wildcard node's pattern less the entry's key and "_" in front, as the
 * reference's strings.TrimPrefix (the whole pattern when it does not begin
 * so). */
static const char *sl_etrim(const sl_envoy_node *n, const sl_envoy_entry *e, size_t *len)
{
    if (n->final_len > e->key_len && memcmp(n->final_key, e->key, e->key_len) == 0 &&
        n->final_key[e->key_len] == '_') {
        *len = n->final_len - e->key_len - 1;
        return n->final_key + e->key_len + 1;
    }
    *len = n->final_len;
    return n->final_key;
}

/* A share_threshold wildcard's value for entry i: its pattern less the
 * "key_" in front (as the reference trims it); NULL when entry i keeps
 * its own value. */
static const char *sl_eshared(const sl_envoy_match *m, size_t i, const sl_envoy_entry *e,
                              size_t *len)
{
    if (i >= m->depth || m->how[i] != SL_ENVOY_BY_WILDCARD || !m->path[i]->share_threshold)
        return NULL;
    return sl_etrim(m->path[i], e, len);
}

size_t sl_envoy_store_key(const char *domain, size_t dlen, const sl_envoy_descriptor *desc,
                          const sl_envoy_match *m, size_t index, char *out, size_t cap)
{
    sl_ekey k = {out, cap, 0};
    sl_ekey_raw(&k, "\x1f" "envoy" "\x1f", 7);
    sl_ekey_part(&k, domain, dlen);
    for (size_t i = 0; i < desc->n; i++) {
        const sl_envoy_entry *e = &desc->entries[i];
        sl_ekey_raw(&k, "\x1f", 1);
        sl_ekey_part(&k, e->key, e->key_len);
        sl_ekey_raw(&k, "\x1f", 1);
        size_t slen;
        const char *shared = sl_eshared(m, i, e, &slen);
        if (shared)
            sl_ekey_part(&k, shared, slen);
        else
            sl_ekey_part(&k, e->value, e->value_len);
    }
    if (index > 0) {
        char num[24];
        size_t at = sizeof num;
        do
            num[--at] = (char)('0' + index % 10);
        while ((index /= 10) > 0);
        sl_ekey_raw(&k, "\x1f#", 2);
        sl_ekey_raw(&k, num + at, sizeof num - at);
    }
    return k.len;
}

size_t sl_envoy_metric_key(const char *domain, size_t dlen, const sl_envoy_descriptor *desc,
                           const sl_envoy_match *m, char *out, size_t cap)
{
    sl_ekey k = {out, cap, 0};
    if (!m->rule)
        return 0;
    sl_ekey_raw(&k, domain, dlen);
    if (m->rule->detailed_metric) {
        /* Every entry as the request gives it, "key_value" ("key_" for an
         * empty value); when a share_threshold wildcard matched, that
         * entry's value is its pattern and an empty value drops the "_",
         * as the reference builds its two detailed keys. */
        bool any_shared = false;
        for (size_t i = 0; i < desc->n; i++) {
            size_t slen;
            any_shared |= sl_eshared(m, i, &desc->entries[i], &slen) != NULL;
        }
        for (size_t i = 0; i < desc->n; i++) {
            const sl_envoy_entry *e = &desc->entries[i];
            size_t slen;
            const char *shared = sl_eshared(m, i, e, &slen);
            sl_ekey_raw(&k, ".", 1);
            sl_ekey_raw(&k, e->key, e->key_len);
            if (shared) {
                sl_ekey_raw(&k, "_", 1);
                sl_ekey_raw(&k, shared, slen);
            } else if (e->value_len || !any_shared) {
                sl_ekey_raw(&k, "_", 1);
                sl_ekey_raw(&k, e->value, e->value_len);
            }
        }
        return k.len;
    }
    /* Each level as the config names it, with the request's value where
     * value_to_metric says: the reference's valueToMetricFullKey (the
     * config's full_key when no level says). */
    for (size_t i = 0; i < m->depth; i++) {
        const sl_envoy_entry *e = &desc->entries[i];
        const sl_envoy_node *node = m->path[i];
        const char *v = NULL;
        size_t vlen = 0;
        if (m->how[i] == SL_ENVOY_BY_WILDCARD) {
            if (node->share_threshold || !node->value_to_metric)
                v = sl_etrim(node, e, &vlen);
            else
                v = e->value, vlen = e->value_len;
        } else if (m->how[i] == SL_ENVOY_BY_VALUE || node->value_to_metric) {
            v = e->value, vlen = e->value_len;
        }
        sl_ekey_raw(&k, ".", 1);
        sl_ekey_raw(&k, e->key, e->key_len);
        if (vlen) {
            sl_ekey_raw(&k, "_", 1);
            sl_ekey_raw(&k, v, vlen);
        }
    }
    return k.len;
}
