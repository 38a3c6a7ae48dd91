/*
 * config.c: loads sluiced's YAML config (see config.h) with libyaml's
 * document API: the file (at most SL_CONFIG_MAX_BYTES) is parsed into a node
 * tree, then walked once. Every error names where and what: file, line,
 * column, the key or value at fault, and the reason.
 */
#include "policy/config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <yaml.h>

#include "common/alloc.h"
#include "common/duration.h"
#include "common/parse.h"
#include "policy/plans.h"
#include "policy/yaml.h"

typedef struct sl_loader {
    yaml_document_t doc;
    const char *name;
    char *err;
    size_t errlen;
    sl_config *cfg;
} sl_loader;

/* Formats "NAME:LINE:COL: message" for node n (NULL: no position). */
static int sl_fail(sl_loader *ld, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int sl_fail(sl_loader *ld, const yaml_node_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sl_yaml_vfail(ld->err, ld->errlen, ld->name, n, fmt, ap);
    va_end(ap);
    return -1;
}

static yaml_node_t *sl_node(sl_loader *ld, int index)
{
    return yaml_document_get_node(&ld->doc, index);
}


static bool sl_key_is(const yaml_node_t *k, const char *name)
{
    return sl_yaml_is_scalar(k) && strcmp(sl_yaml_scalar(k), name) == 0;
}

/* Whether s[0 .. n) is `word`, ASCII case ignored. */
static bool sl_ascii_is(const char *s, size_t n, const char *word)
{
    if (strlen(word) != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i] >= 'A' && s[i] <= 'Z' ? (char)(s[i] - 'A' + 'a') : s[i];
        if (c != word[i])
            return false;
    }
    return true;
}

/* Quotes a scalar for a message, cut to 40 bytes. */
static const char *sl_quote(const yaml_node_t *n, char buf[48])
{
    if (!sl_yaml_is_scalar(n))
        return n && n->type == YAML_MAPPING_NODE ? "a mapping" : "a list";
    snprintf(buf, 48, "'%.40s'", sl_yaml_scalar(n));
    return buf;
}

static int sl_int_value(sl_loader *ld, const yaml_node_t *v, const char *where, const char *what,
                        int64_t min, int64_t *out)
{
    char q[48];
    if (sl_yaml_is_scalar(v)) {
        const char *s = sl_yaml_scalar(v);
        int64_t x;
        if (sl_parse_i64(s, strlen(s), SL_INT_SIGNED, &x) && x >= min) {
            *out = x;
            return 0;
        }
    }
    return sl_fail(ld, v, "%s: %s must be an integer of at least %lld (got %s)", where, what,
                   (long long)min, sl_quote(v, q));
}

static int sl_bool_value(sl_loader *ld, const yaml_node_t *v, const char *where, const char *what,
                         bool *out)
{
    char q[48];
    static const char *const yes[] = {"true", "yes", "on"}, *const no[] = {"false", "no", "off"};
    for (int i = 0; i < 3 && sl_yaml_is_scalar(v); i++) {
        if (strcmp(sl_yaml_scalar(v), yes[i]) == 0)
            return *out = true, 0;
        if (strcmp(sl_yaml_scalar(v), no[i]) == 0)
            return *out = false, 0;
    }
    return sl_fail(ld, v, "%s: %s must be true or false (got %s)", where, what, sl_quote(v, q));
}

static int sl_algorithm_value(sl_loader *ld, const yaml_node_t *v, const char *where,
                              sl_algorithm *out)
{
    char q[48];
    if (sl_yaml_is_scalar(v) && sl_ascii_is(sl_yaml_scalar(v), v->data.scalar.length, "adaptive"))
        return sl_fail(ld, v, "%s: adaptive is a whole policy's algorithm (algorithm: adaptive "
                              "beside its settings), not a limit's",
                       where);
    if (!sl_yaml_is_scalar(v) || sl_algorithm_parse(sl_yaml_scalar(v), v->data.scalar.length, out) != SL_OK ||
        *out == SL_CONCURRENCY)
        return sl_fail(ld, v, "%s: unknown algorithm %s (use gcra, token_bucket, leaky_bucket, "
                              "fixed_window, sliding_log or sliding_window)",
                       where, sl_quote(v, q));
    return 0;
}

static int sl_utc_offset_value(sl_loader *ld, const yaml_node_t *v, const char *where,
                               int64_t *out)
{
    char q[48];
    if (!sl_yaml_is_scalar(v) ||
        sl_parse_utc_offset(sl_yaml_scalar(v), v->data.scalar.length, out) != SL_DURATION_OK)
        return sl_fail(ld, v, "%s: utc_offset must be +HH:MM, -HH:MM, +HHMM, +HH or Z, at most "
                              "18 hours (got %s)",
                       where, sl_quote(v, q));
    return 0;
}

/* A reset day: the day of the month windows of months begin on. */
static int sl_reset_day_value(sl_loader *ld, const yaml_node_t *v, const char *where,
                              int64_t *out)
{
    char q[48];
    int64_t x;
    if (!sl_yaml_is_scalar(v) ||
        !sl_parse_i64(sl_yaml_scalar(v), v->data.scalar.length, SL_INT_SIGNED, &x) || x < 1 ||
        x > SL_RESET_DAY_MAX)
        return sl_fail(ld, v, "%s: reset_day must be a day of the month, 1 to %d (29 to 31: a "
                              "shorter month's last day) (got %s)",
                       where, SL_RESET_DAY_MAX, sl_quote(v, q));
    *out = x;
    return 0;
}

static int sl_unit_value(sl_loader *ld, const yaml_node_t *v, const char *where, sl_cost_unit *out)
{
    char q[48];
    if (sl_yaml_is_scalar(v) && strcmp(sl_yaml_scalar(v), "requests") == 0)
        *out = SL_UNIT_REQUESTS;
    else if (sl_yaml_is_scalar(v) && strcmp(sl_yaml_scalar(v), "tokens") == 0)
        *out = SL_UNIT_TOKENS;
    else
        return sl_fail(ld, v, "%s: cost must be requests (a request's COST, 1 unless it says) or "
                              "tokens (its TOKENS, 0 unless it says) (got %s)",
                       where, sl_quote(v, q));
    return 0;
}

/* A limit from a mapping {algorithm, limit, period, burst, utc_offset,
 * reset_day, cost}. `base` gives the defaults of algorithm, utc_offset and
 * reset_day (a tier inherits its policy's), NULL for none; an inherited
 * reset day applies only to windows of months, a given one must be for
 * one. Windows are aligned for a clock that is Unix time; sl_config_align
 * moves them to another. */
static int sl_limit_value(sl_loader *ld, const yaml_node_t *m, const char *where,
                          const sl_limit *base, sl_named_limit *out, const char *const *extra)
{
    char q[48];
    if (!m || m->type != YAML_MAPPING_NODE)
        return sl_fail(ld, m, "%s must be a mapping with limit and period", where);
    sl_algorithm algo = base ? base->algorithm : SL_GCRA;
    int64_t limit = 0, period = 0, burst = 0, months = 0;
    int64_t utc_offset = base ? base->utc_offset_ns : 0;
    int64_t reset_day = base ? base->reset_day : 0;
    const yaml_node_t *at_limit = NULL, *at_period = NULL, *at_reset_day = NULL;
    out->unit = SL_UNIT_REQUESTS;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = sl_node(ld, p->key), *v = sl_node(ld, p->value);
        if (sl_key_is(k, "algorithm")) {
            if (sl_algorithm_value(ld, v, where, &algo))
                return -1;
        } else if (sl_key_is(k, "limit")) {
            if (sl_int_value(ld, v, where, "limit", 1, &limit))
                return -1;
            at_limit = v;
        } else if (sl_key_is(k, "period")) {
            sl_duration_status rc =
                sl_yaml_is_scalar(v)
                    ? sl_parse_period(sl_yaml_scalar(v), v->data.scalar.length, &period, &months)
                    : SL_DURATION_MALFORMED;
            if (rc != SL_DURATION_OK)
                return sl_fail(ld, v, "%s: period must be a positive duration: seconds, or a "
                                      "number with ms, s, m, h, d, w or mo (got %s)",
                               where, sl_quote(v, q));
            at_period = v;
        } else if (sl_key_is(k, "utc_offset")) {
            if (sl_utc_offset_value(ld, v, where, &utc_offset))
                return -1;
        } else if (sl_key_is(k, "reset_day")) {
            if (sl_reset_day_value(ld, v, where, &reset_day))
                return -1;
            at_reset_day = v;
        } else if (sl_key_is(k, "burst")) {
            /* At least 1: the library reads 0 as "the limit", which is not
             * what a user who writes 0 means (nginx's burst=0: no burst).
             * Leaving burst out is how a policy asks for the limit. */
            if (sl_int_value(ld, v, where, "burst", 1, &burst))
                return -1;
        } else if (sl_key_is(k, "cost")) {
            if (sl_unit_value(ld, v, where, &out->unit))
                return -1;
        } else {
            bool known = false;
            for (int i = 0; extra && extra[i]; i++)
                known |= sl_key_is(k, extra[i]);
            if (!known)
                return sl_fail(ld, k, "%s: unknown setting %s", where, sl_quote(k, q));
        }
    }
    if (limit == 0)
        return sl_fail(ld, m, "%s: limit is required", where);
    if (period == 0)
        return sl_fail(ld, m, "%s: period is required", where);
    sl_limit *l = &out->limit;
    int rc = sl_limit_init(l, algo, limit, period, burst);
    if (rc != SL_OK)
        return sl_fail(ld, at_limit ? at_limit : m, "%s: %s", where, sl_strerror(rc));
    bool windows = algo == SL_FIXED_WINDOW || algo == SL_SLIDING_WINDOW;
    if (at_reset_day && months == 0)
        return sl_fail(ld, at_reset_day, "%s: reset_day is the day of the month windows of "
                                         "months begin on (1 to %d): give a period of months "
                                         "such as 1mo, or leave reset_day out",
                       where, SL_RESET_DAY_MAX);
    if (at_reset_day && !windows)
        return sl_fail(ld, at_reset_day, "%s: reset_day needs fixed_window or sliding_window: "
                                         "%s meters a rate and has no windows to reset",
                       where, sl_algorithm_name(algo));
    if (months == 0 || !windows)
        reset_day = 0; /* inherited by a limit it means nothing to */
    rc = sl_limit_align_day(l, months, reset_day, utc_offset, 0);
    if (rc == SL_ERR_PERIOD && algo == SL_SLIDING_LOG)
        return sl_fail(ld, at_period, "%s: sliding_log cannot count calendar months: give its "
                                      "period in days or weeks, or use fixed_window or "
                                      "sliding_window",
                       where);
    if (rc != SL_OK)
        return sl_fail(ld, at_period, "%s: %s", where, sl_strerror(rc));
    /* A policy's states name their limit, so that a key moved to another
     * tier, or a limit changed by a reload, keeps the units it has used
     * (see "Carried states" in sluice.h). Every algorithm a policy may have
     * can be carried. */
    rc = sl_limit_carry(l);
    if (rc != SL_OK)
        return sl_fail(ld, m, "%s: %s", where, sl_strerror(rc));
    return 0;
}

static int sl_name_value(sl_loader *ld, const yaml_node_t *k, const char *what, char *out)
{
    char q[48];
    if (!sl_yaml_is_scalar(k) || k->data.scalar.length == 0 ||
        k->data.scalar.length > SL_POLICY_NAME_MAX)
        return sl_fail(ld, k, "%s name must be 1 to %d characters (got %s)", what,
                       SL_POLICY_NAME_MAX, sl_quote(k, q));
    memcpy(out, sl_yaml_scalar(k), k->data.scalar.length + 1);
    return 0;
}

/* A named limit's name: it goes into store keys and the IETF fields, so it
 * is kept to letters, digits, '_' and '-'. */
static int sl_limit_name_value(sl_loader *ld, const yaml_node_t *v, const char *where, char *out)
{
    char q[48];
    bool ok = sl_yaml_is_scalar(v) && v->data.scalar.length >= 1 &&
              v->data.scalar.length <= SL_LIMIT_NAME_MAX;
    for (size_t i = 0; ok && i < v->data.scalar.length; i++) {
        char c = sl_yaml_scalar(v)[i];
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '_' || c == '-';
    }
    if (!ok)
        return sl_fail(ld, v, "%s: a limit's name must be 1 to %d letters, digits, '_' or '-' "
                              "(got %s)",
                       where, SL_LIMIT_NAME_MAX, sl_quote(v, q));
    memcpy(out, sl_yaml_scalar(v), v->data.scalar.length + 1);
    return 0;
}

static const yaml_node_t *sl_mapping_get(sl_loader *ld, const yaml_node_t *m, const char *key)
{
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++)
        if (sl_key_is(sl_node(ld, p->key), key))
            return sl_node(ld, p->value);
    return NULL;
}

static const sl_named_limit *sl_set_find(const sl_limit_set *set, const char *name)
{
    for (size_t i = 0; set && i < set->n; i++)
        if (strcmp(set->l[i].name, name) == 0)
            return &set->l[i];
    return NULL;
}

/*
 * A set of limits from a mapping: one unnamed limit written in place
 * (limit, period, ...), or `limits:`, a list of named ones, beside which the
 * mapping may give the algorithm, utc_offset and reset_day its limits default
 * to. *defaults comes in as what the set inherits (algorithm, utc_offset,
 * reset_day) and goes out as what the set's own tiers inherit. A named limit inherits from
 * `like`'s limit of the same name when there is one (a tier's "rpm" is its
 * policy's "rpm" at another size), else from the defaults. `extra` are the
 * mapping's other keys (a policy's settings).
 */
static int sl_set_value(sl_loader *ld, const yaml_node_t *m, const char *where,
                        sl_limit *defaults, const sl_limit_set *like, sl_limit_set *out,
                        const char *const *extra)
{
    char q[48];
    if (!m || m->type != YAML_MAPPING_NODE)
        return sl_fail(ld, m, "%s must be a mapping with limit and period, or with limits", where);
    const yaml_node_t *list = sl_mapping_get(ld, m, "limits");
    if (!list) {
        if (!(out->l = sl_calloc(1, sizeof *out->l)))
            return sl_fail(ld, NULL, "out of memory");
        out->n = 1;
        if (sl_limit_value(ld, m, where, defaults, &out->l[0], extra))
            return -1;
        *defaults = out->l[0].limit;
        return 0;
    }
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = sl_node(ld, p->key), *v = sl_node(ld, p->value);
        if (sl_key_is(k, "algorithm")) {
            if (sl_algorithm_value(ld, v, where, &defaults->algorithm))
                return -1;
        } else if (sl_key_is(k, "utc_offset")) {
            if (sl_utc_offset_value(ld, v, where, &defaults->utc_offset_ns))
                return -1;
        } else if (sl_key_is(k, "reset_day")) {
            if (sl_reset_day_value(ld, v, where, &defaults->reset_day))
                return -1;
        } else if (sl_key_is(k, "limit") || sl_key_is(k, "period") || sl_key_is(k, "burst") ||
                   sl_key_is(k, "cost")) {
            return sl_fail(ld, k, "%s: %s belongs to each of limits, not beside them", where,
                           sl_quote(k, q));
        } else if (!sl_key_is(k, "limits")) {
            bool known = false;
            for (int i = 0; extra && extra[i]; i++)
                known |= sl_key_is(k, extra[i]);
            if (!known)
                return sl_fail(ld, k, "%s: unknown setting %s", where, sl_quote(k, q));
        }
    }
    size_t n = list->type == YAML_SEQUENCE_NODE
                   ? (size_t)(list->data.sequence.items.top - list->data.sequence.items.start)
                   : 0;
    if (n == 0 || n > SL_TAKE_MANY_MAX)
        return sl_fail(ld, list, "%s: limits must be a list of 1 to %d limits, each with a name",
                       where, SL_TAKE_MANY_MAX);
    if (!(out->l = sl_calloc(n, sizeof *out->l)))
        return sl_fail(ld, NULL, "out of memory");
    static const char *const named[] = {"name", NULL};
    for (size_t i = 0; i < n; i++) {
        const yaml_node_t *item = sl_node(ld, list->data.sequence.items.start[i]);
        if (!item || item->type != YAML_MAPPING_NODE)
            return sl_fail(ld, item, "%s: each of limits must be a mapping with name, limit and "
                                     "period", where);
        const yaml_node_t *name = sl_mapping_get(ld, item, "name");
        if (!name)
            return sl_fail(ld, item, "%s: each of limits needs a name", where);
        sl_named_limit *l = &out->l[i];
        if (sl_limit_name_value(ld, name, where, l->name))
            return -1;
        if (sl_set_find(out, l->name)) /* among those before it: out->n is i */
            return sl_fail(ld, name, "%s: limit '%s' is given twice", where, l->name);
        char lwhere[160];
        snprintf(lwhere, sizeof lwhere, "%s limit '%s'", where, l->name);
        const sl_named_limit *same = sl_set_find(like, l->name);
        sl_limit base = *defaults;
        if (same && !sl_mapping_get(ld, m, "algorithm"))
            base.algorithm = same->limit.algorithm;
        if (same && !sl_mapping_get(ld, m, "utc_offset"))
            base.utc_offset_ns = same->limit.utc_offset_ns;
        if (same && !sl_mapping_get(ld, m, "reset_day"))
            base.reset_day = same->limit.reset_day;
        out->n = i + 1;
        if (sl_limit_value(ld, item, lwhere, &base, l, named))
            return -1;
    }
    return 0;
}

static void sl_set_free(sl_limit_set *set)
{
    sl_free(set->l);
    set->l = NULL;
    set->n = 0;
}

static void sl_policy_free_sets(sl_policy *p)
{
    sl_plans_free(atomic_exchange(&p->plans, NULL));
    sl_free(p->plans_path);
    p->plans_path = NULL;
    sl_free(p->plans_redis);
    p->plans_redis = NULL;
    sl_set_free(&p->limits);
    sl_set_free(&p->global);
    for (size_t t = 0; t < p->ntiers; t++)
        sl_set_free(&p->tiers[t].limits);
}

/* The checks a policy's settings make together, once they are all read. */
static int sl_policy_check(sl_loader *ld, const yaml_node_t *m, const char *where,
                           const sl_policy *p)
{
    bool named = p->limits.l[0].name[0] != 0;
    for (size_t t = 0; t <= p->ntiers; t++) {
        const sl_limit_set *set = t < p->ntiers ? &p->tiers[t].limits : &p->limits;
        char what[96] = "";
        if (t < p->ntiers)
            snprintf(what, sizeof what, " tier '%s'", p->tiers[t].name);
        if ((set->l[0].name[0] != 0) != named)
            return sl_fail(ld, m, "%s%s: %s, so every tier must give %s", where, what,
                           named ? "the policy's limits are a list (limits:)"
                                 : "the policy is one limit (limit: and period:)",
                           named ? "a list of limits too" : "one limit too");
        if (set->n + p->global.n > SL_TAKE_MANY_MAX)
            return sl_fail(ld, m, "%s%s: %zu limits and %zu global ones make %zu, more than the "
                                  "%d one request is taken from together",
                           where, what, set->n, p->global.n, set->n + p->global.n,
                           SL_TAKE_MANY_MAX);
    }
    return 0;
}

/* A policy's plans from a Redis hash: "redis:NAME", or a mapping
 * {redis: NAME, refresh: DURATION}. Only named here: the server reads the
 * hash (src/server/plans_redis.c). */
static int sl_plans_redis_value(sl_loader *ld, const yaml_node_t *v, const char *where,
                                sl_policy *p)
{
    char q[48];
    const yaml_node_t *name = NULL, *refresh = NULL;
    const char *hash = NULL;
    size_t hlen = 0;
    if (v->type == YAML_MAPPING_NODE) {
        for (yaml_node_pair_t *pr = v->data.mapping.pairs.start; pr < v->data.mapping.pairs.top;
             pr++) {
            yaml_node_t *k = sl_node(ld, pr->key), *x = sl_node(ld, pr->value);
            if (sl_key_is(k, "redis"))
                name = x;
            else if (sl_key_is(k, "refresh"))
                refresh = x;
            else
                return sl_fail(ld, k, "%s: plans: unknown setting %s (redis, refresh)", where,
                               sl_quote(k, q));
        }
        if (!name)
            return sl_fail(ld, v, "%s: plans: a mapping names the Redis hash (redis: NAME)",
                           where);
        if (!sl_yaml_is_scalar(name))
            return sl_fail(ld, name, "%s: plans: redis must be the name of a hash (got %s)",
                           where, sl_quote(name, q));
        hash = sl_yaml_scalar(name);
        hlen = name->data.scalar.length;
    } else {
        name = v;
        hash = sl_yaml_scalar(v) + 6;
        hlen = v->data.scalar.length - 6;
    }
    if (hlen == 0 || hlen > SL_PLANS_HASH_MAX || memchr(hash, '\0', hlen))
        return sl_fail(ld, name, "%s: plans: the Redis hash's name must be 1 to %d bytes "
                                 "(plans: redis:NAME)",
                       where, SL_PLANS_HASH_MAX);
    p->plans_refresh_ns = SL_PLANS_REFRESH_DEFAULT_NS;
    if (refresh) {
        int64_t ns = 0;
        sl_duration_status rc = sl_yaml_is_scalar(refresh)
                                    ? sl_parse_duration(sl_yaml_scalar(refresh),
                                                        refresh->data.scalar.length, &ns)
                                    : SL_DURATION_MALFORMED;
        if (rc != SL_DURATION_OK || ns < SL_PLANS_REFRESH_MIN_NS || ns > SL_PLANS_REFRESH_MAX_NS)
            return sl_fail(ld, refresh, "%s: plans: refresh must be a duration from 100ms to 1d "
                                        "(got %s)",
                           where, sl_quote(refresh, q));
        p->plans_refresh_ns = ns;
    }
    if (!(p->plans_redis = sl_malloc(hlen + 1)))
        return sl_fail(ld, NULL, "out of memory");
    memcpy(p->plans_redis, hash, hlen);
    p->plans_redis[hlen] = '\0';
    return 0;
}

/* A policy's plans file: its path resolved against the config file's
 * directory when relative, and loaded with the policy's tier names, under a
 * hash key of its own; or a Redis hash's name. */
static int sl_plans_value(sl_loader *ld, const yaml_node_t *v, const char *where, sl_policy *p)
{
    if (p->ntiers == 0)
        return sl_fail(ld, v, "%s: plans needs tiers to choose from", where);
    if (v->type == YAML_MAPPING_NODE || strncmp(sl_yaml_scalar(v), "redis:", 6) == 0)
        return sl_plans_redis_value(ld, v, where, p);
    const char *path = sl_yaml_scalar(v);
    const char *slash = strrchr(ld->name, '/');
    size_t dir = path[0] != '/' && slash ? (size_t)(slash - ld->name) + 1 : 0;
    size_t len = strlen(path);
    if (!(p->plans_path = sl_malloc(dir + len + 1)))
        return sl_fail(ld, NULL, "out of memory");
    memcpy(p->plans_path, ld->name, dir);
    memcpy(p->plans_path + dir, path, len + 1);
    const char *tiers[SL_POLICY_MAX_TIERS];
    for (size_t t = 0; t < p->ntiers; t++)
        tiers[t] = p->tiers[t].name;
    uint64_t hash_key[2];
    if (getrandom(hash_key, sizeof hash_key, 0) != (ssize_t)sizeof hash_key)
        return sl_fail(ld, v, "%s: plans: no random bytes for the table's hash key: %s", where,
                       strerror(errno));
    char perr[320];
    sl_plans *table;
    if (sl_plans_load(p->plans_path, tiers, p->ntiers, hash_key, &table, perr, sizeof perr))
        return sl_fail(ld, v, "%s: plans: %s", where, perr);
    atomic_store(&p->plans, table);
    return 0;
}

/* Whether s[0 .. n) holds the NUL-terminated word. */
static bool sl_holds(const char *s, size_t n, const char *word)
{
    size_t k = strlen(word);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(s + i, word, k) == 0)
            return true;
    return false;
}

/*
 * The template s[0 .. n) as sluice read a policy's key before templates were
 * parsed, spelled for the parser: {key} and {policy} were replaced, and every
 * other byte, a brace too, was written as it was. So "{api}:{key}" wrote
 * "{api}:alice", which the parser's "{{api}}:{key}" writes, and "{{key}}"
 * wrote "{alice}", the parser's "{{{key}}}". Writes it NUL-terminated into
 * out, which has room for 2n + 1 bytes.
 */
static void sl_old_spelling(const char *s, size_t n, char *out)
{
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        size_t part = n - i >= 5 && memcmp(s + i, "{key}", 5) == 0      ? 5
                      : n - i >= 8 && memcmp(s + i, "{policy}", 8) == 0 ? 8
                                                                          : 0;
        if (part) {
            memcpy(out + w, s + i, part);
            w += part;
            i += part;
            continue;
        }
        if (s[i] == '{' || s[i] == '}')
            out[w++] = s[i];
        out[w++] = s[i++];
    }
    out[w] = '\0';
}

/*
 * A key template (key: or key_fallback:, `what`) from v into *t, and its
 * text as written into text (SL_POLICY_KEY_MAX + 1 bytes). The parser
 * refuses a single brace, which sluice used to write as it was: a template
 * it refuses that the old reading took ({key} in it) is told how to write
 * the same keys now. Text that spells {key} or {policy} with doubled braces
 * ("{{key}}", which used to be the key in braces) is a literal now, the same
 * for every request: refused, with the spelling of what it meant. `primary`:
 * the template must tell clients apart ({key} or a part of the request).
 */
static int sl_template_value(sl_loader *ld, const yaml_node_t *v, const char *where,
                             const char *what, bool primary, sl_key_template *t, char *text)
{
    char q[48], err[320], old[2 * SL_POLICY_KEY_MAX + 1];
    if (!sl_yaml_is_scalar(v))
        return sl_fail(ld, v, "%s: %s must be a key template such as \"{policy}:{key}\" (got %s)",
                       where, what, sl_quote(v, q));
    const char *s = sl_yaml_scalar(v);
    size_t n = v->data.scalar.length;
    if (memchr(s, '\0', n))
        return sl_fail(ld, v, "%s: %s must not hold a NUL byte", where, what);
    if (sl_key_template_parse(s, n, t, err, sizeof err) != 0) {
        sl_key_template again;
        char none[8];
        if (n <= SL_POLICY_KEY_MAX && strstr(s, "{key}")) {
            sl_old_spelling(s, n, old);
            if (strcmp(old, s) != 0 &&
                sl_key_template_parse(old, strlen(old), &again, none, sizeof none) == 0)
                return sl_fail(ld, v, "%s: %s: %s; a brace of the key's text is written twice: "
                                      "\"%s\" writes the keys this template wrote before",
                               where, what, err, old);
        }
        return sl_fail(ld, v, "%s: %s: %s", where, what, err);
    }
    for (size_t i = 0; i < t->nparts; i++) {
        const sl_key_part *k = &t->parts[i];
        const char *lit = t->text + k->off;
        if (k->kind != SL_KEY_PART_TEXT)
            continue;
        const char *word = sl_holds(lit, k->len, "{key}")      ? "key"
                           : sl_holds(lit, k->len, "{policy}") ? "policy"
                                                               : NULL;
        if (!word)
            continue;
        if (sl_key_template_reads_request(t))
            snprintf(old, sizeof old, "{{{%s}}}", word);
        else
            sl_old_spelling(s, n, old);
        return sl_fail(ld, v, "%s: %s writes the text {%s}, not the %s: {{ and }} write one brace "
                              "each; for the %s in braces (a Redis Cluster hash tag), as sluice "
                              "wrote it before, write \"%s\"",
                       where, what, word, word, word, old);
    }
    if (primary && !(t->uses & (SL_KEY_USES(SL_KEY_PART_KEY) | SL_KEY_USES_REQUEST)))
        return sl_fail(ld, v, "%s: key %s writes one store key for every request: it needs {key} "
                              "or a part of the request (header.NAME, query.NAME, method, path, "
                              "ip)",
                       where, sl_quote(v, q));
    memcpy(text, s, n + 1);
    return 0;
}

static int sl_policy_value(sl_loader *ld, const yaml_node_t *k, const yaml_node_t *m,
                           sl_policy *p)
{
    static const char *const policy_keys[] = {"key",    "key_fallback",   "shadow",
                                              "tiers",  "global",         "on_store_error",
                                              "store_timeout_ms", "plans", NULL};
    char where[96], q[48];
    if (sl_name_value(ld, k, "policy", p->name))
        return -1;
    snprintf(where, sizeof where, "policy '%s'", p->name);
    sl_limit defaults = {.algorithm = SL_GCRA};
    if (sl_set_value(ld, m, where, &defaults, NULL, &p->limits, policy_keys))
        return -1;
    snprintf(p->key, sizeof p->key, "{policy}:{key}");
    char none[8];
    sl_key_template_parse(p->key, strlen(p->key), &p->templates[0], none, sizeof none);
    p->ntemplates = 1;
    const yaml_node_t *plans = NULL;
    for (yaml_node_pair_t *pr = m->data.mapping.pairs.start; pr < m->data.mapping.pairs.top; pr++) {
        yaml_node_t *pk = sl_node(ld, pr->key), *v = sl_node(ld, pr->value);
        if (sl_key_is(pk, "key")) {
            if (sl_template_value(ld, v, where, "key", true, &p->templates[0], p->key))
                return -1;
        } else if (sl_key_is(pk, "key_fallback")) {
            if (sl_template_value(ld, v, where, "key_fallback", false, &p->templates[1],
                                  p->key_fallback))
                return -1;
            p->ntemplates = 2;
        } else if (sl_key_is(pk, "shadow")) {
            if (sl_bool_value(ld, v, where, "shadow", &p->shadow))
                return -1;
        } else if (sl_key_is(pk, "on_store_error")) {
            sl_on_error e;
            if (!sl_yaml_is_scalar(v) ||
                sl_on_error_parse(sl_yaml_scalar(v), v->data.scalar.length, &e) != SL_OK)
                return sl_fail(ld, v, "%s: on_store_error must be fail_open, fail_closed or local "
                                      "(got %s)",
                               where, sl_quote(v, q));
            p->on_store_error = (int)e;
        } else if (sl_key_is(pk, "store_timeout_ms")) {
            int64_t ms;
            if (sl_int_value(ld, v, where, "store_timeout_ms", 1, &ms))
                return -1;
            if (ms > SL_POLICY_STORE_TIMEOUT_MAX)
                return sl_fail(ld, v, "%s: store_timeout_ms must be at most %d (got %s)", where,
                               SL_POLICY_STORE_TIMEOUT_MAX, sl_quote(v, q));
            p->store_timeout_ms = (int32_t)ms;
        } else if (sl_key_is(pk, "plans")) {
            if (!(v && v->type == YAML_MAPPING_NODE) &&
                (!sl_yaml_is_scalar(v) || v->data.scalar.length == 0 || v->data.scalar.length > 4096))
                return sl_fail(ld, v, "%s: plans must be the path of a plans file, or "
                                      "redis:HASH (got %s)",
                               where, sl_quote(v, q));
            plans = v;
        } else if (sl_key_is(pk, "global")) {
            char gwhere[128];
            snprintf(gwhere, sizeof gwhere, "%s global", where);
            sl_limit gdefaults = defaults;
            if (sl_set_value(ld, v, gwhere, &gdefaults, NULL, &p->global, NULL))
                return -1;
        } else if (sl_key_is(pk, "tiers")) {
            if (!v || v->type != YAML_MAPPING_NODE)
                return sl_fail(ld, v, "%s: tiers must be a mapping of tier names to limits", where);
            for (yaml_node_pair_t *t = v->data.mapping.pairs.start; t < v->data.mapping.pairs.top;
                 t++) {
                if (p->ntiers == SL_POLICY_MAX_TIERS)
                    return sl_fail(ld, v, "%s: at most %d tiers", where, SL_POLICY_MAX_TIERS);
                sl_policy_tier *tier = &p->tiers[p->ntiers];
                yaml_node_t *tk = sl_node(ld, t->key);
                if (sl_name_value(ld, tk, "tier", tier->name))
                    return -1;
                char twhere[192];
                snprintf(twhere, sizeof twhere, "%s tier '%s'", where, tier->name);
                sl_limit tdefaults = defaults;
                p->ntiers++; /* counted before it is filled, so that a failure frees it */
                if (sl_set_value(ld, sl_node(ld, t->value), twhere, &tdefaults, &p->limits,
                                 &tier->limits, NULL))
                    return -1;
            }
        }
    }
    p->keyed_by_request = p->ntemplates == 2 || sl_key_template_reads_request(&p->templates[0]);
    if (sl_policy_check(ld, m, where, p))
        return -1;
    return plans ? sl_plans_value(ld, plans, where, p) : 0;
}

/* ---- adaptive policies ---- */

int sl_priority_parse(const char *s, size_t len)
{
    static const char *const names[] = {"critical", "default", "sheddable"};
    for (int i = 0; i < 3; i++)
        if (sl_ascii_is(s, len, names[i]))
            return i;
    if (len == 1 && s[0] >= '0' && s[0] <= '2')
        return s[0] - '0';
    return -1;
}

void sl_adaptive_defaults(sl_limiter_config *c, sl_adapt_kind kind, int64_t max, int64_t ttl_ns)
{
    memset(c, 0, sizeof *c);
    sl_adapt_config_default(kind, &c->adapt);
    c->adapt.max_limit = max;
    if (c->adapt.min_limit > max)
        c->adapt.min_limit = max;
    if (c->adapt.initial_limit > max)
        c->adapt.initial_limit = max;
    if (c->adapt.initial_limit < c->adapt.min_limit)
        c->adapt.initial_limit = c->adapt.min_limit;
    c->shed.classes = 3;
    c->shed.reserve_permille[SL_PRIO_CRITICAL] = 200;
    c->shed.reserve_permille[SL_PRIO_DEFAULT] = 100;
    c->shed.reserve_permille[SL_PRIO_SHEDDABLE] = 0;
    c->shed.idle_ns = SL_ADAPTIVE_IDLE_DEFAULT_NS;
    c->ttl_ns = ttl_ns;
}

/*
 * A percentage with at most one decimal ("90%", "12.5%") as per mille.
 * Seven digits at most before the point: no sane ratio is larger, and the
 * product stays far from overflow.
 */
static bool sl_percent_parse(const char *s, size_t n, int64_t *permille)
{
    size_t i = 0;
    int64_t whole = 0, tenth = 0;
    while (i < n && i < 7 && s[i] >= '0' && s[i] <= '9')
        whole = whole * 10 + (s[i++] - '0');
    if (i == 0)
        return false;
    if (i < n && s[i] == '.') {
        if (i + 1 >= n || s[i + 1] < '0' || s[i + 1] > '9')
            return false;
        tenth = s[i + 1] - '0';
        i += 2;
    }
    if (i + 1 != n || s[i] != '%')
        return false;
    *permille = whole * 10 + tenth;
    return true;
}

const char *sl_permille_text(int64_t permille, char buf[32])
{
    if (permille % 10)
        snprintf(buf, 32, "%lld.%lld%%", (long long)(permille / 10), (long long)(permille % 10));
    else
        snprintf(buf, 32, "%lld%%", (long long)(permille / 10));
    return buf;
}

/* Nanoseconds in the largest unit that divides them: "30s", "500ms". */
static const char *sl_span_text(int64_t ns, char buf[32])
{
    static const struct {
        int64_t ns;
        const char *unit;
    } units[] = {{INT64_C(86400000000000), "d"}, {INT64_C(3600000000000), "h"},
                 {INT64_C(60000000000), "m"},    {INT64_C(1000000000), "s"},
                 {INT64_C(1000000), "ms"},       {INT64_C(1000), "us"}};
    for (size_t i = 0; ns != 0 && i < sizeof units / sizeof units[0]; i++)
        if (ns % units[i].ns == 0) {
            snprintf(buf, 32, "%lld%s", (long long)(ns / units[i].ns), units[i].unit);
            return buf;
        }
    snprintf(buf, 32, ns == 0 ? "0" : "%lldns", (long long)ns);
    return buf;
}

/* Whether s[0 .. n) is a zero duration: "0", "0s", "0ms", ... */
static bool sl_zero_duration(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && s[i] == '0')
        i++;
    if (i == 0)
        return false;
    const char *unit = s + i;
    size_t ulen = n - i;
    static const char *const units[] = {"", "ms", "s", "m", "h", "d", "w"};
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++)
        if (strlen(units[u]) == ulen && memcmp(unit, units[u], ulen) == 0)
            return true;
    return false;
}

/* How an adaptive policy's value is written. */
typedef enum sl_arg_type {
    SL_ARG_PERCENT, /* "12.5%", stored per mille */
    SL_ARG_COUNT,   /* a whole number */
    SL_ARG_SPAN,    /* a duration, stored in ns; 0 only where min is 0 */
} sl_arg_type;

static const char *sl_arg_text(sl_arg_type type, int64_t x, char buf[32])
{
    if (type == SL_ARG_PERCENT)
        return sl_permille_text(x, buf);
    if (type == SL_ARG_SPAN)
        return sl_span_text(x, buf);
    snprintf(buf, 32, "%lld", (long long)x);
    return buf;
}

/* A value of `type` in [min, max] into *out; the message names `what` and
 * the range. */
static int sl_arg_value(sl_loader *ld, const yaml_node_t *v, const char *where, const char *what,
                        sl_arg_type type, int64_t min, int64_t max, int64_t *out)
{
    char q[48], lo[32], hi[32];
    bool ok = sl_yaml_is_scalar(v);
    const char *s = ok ? sl_yaml_scalar(v) : "";
    size_t n = ok ? v->data.scalar.length : 0;
    int64_t x = 0;
    if (ok && type == SL_ARG_PERCENT)
        ok = sl_percent_parse(s, n, &x);
    else if (ok && type == SL_ARG_COUNT)
        ok = sl_parse_i64(s, n, SL_INT_NO_SIGN, &x);
    else if (ok && sl_zero_duration(s, n))
        x = 0;
    else if (ok)
        ok = sl_parse_duration(s, n, &x) == SL_DURATION_OK;
    if (ok && x >= min && x <= max) {
        *out = x;
        return 0;
    }
    if (type == SL_ARG_PERCENT)
        return sl_fail(ld, v, "%s: %s must be a percentage with at most one decimal, from %s to "
                              "%s (got %s)",
                       where, what, sl_arg_text(type, min, lo), sl_arg_text(type, max, hi),
                       sl_quote(v, q));
    if (type == SL_ARG_COUNT)
        return sl_fail(ld, v, "%s: %s must be an integer from %s to %s (got %s)", where, what,
                       sl_arg_text(type, min, lo), sl_arg_text(type, max, hi), sl_quote(v, q));
    return sl_fail(ld, v, "%s: %s must be a %sduration: seconds, or a number with ms, s, m, h, d "
                          "or w%s (got %s)",
                   where, what, min > 0 ? "positive " : "", min > 0 ? "" : " (0: never)",
                   sl_quote(v, q));
}

#define SL_KIND_BIT(k) (1u << (k))

/* An estimator's parameter: its setting's name, the estimators that read
 * it, how it is written, its field of sl_adapt_config and its range
 * (sluice.h's, which sl_adapt_init checks). */
typedef struct sl_adapt_param {
    const char *name;
    unsigned kinds;
    sl_arg_type type;
    size_t off;
    int64_t min, max;
} sl_adapt_param;

static const sl_adapt_param sl_adapt_params[] = {
    {"backoff", SL_KIND_BIT(SL_ADAPT_AIMD) | SL_KIND_BIT(SL_ADAPT_ANCHORED), SL_ARG_PERCENT,
     offsetof(sl_adapt_config, backoff_permille), 500, 999},
    {"timeout", SL_KIND_BIT(SL_ADAPT_AIMD), SL_ARG_SPAN, offsetof(sl_adapt_config, timeout_ns), 1,
     SL_SPAN_MAX},
    {"smoothing",
     SL_KIND_BIT(SL_ADAPT_VEGAS) | SL_KIND_BIT(SL_ADAPT_GRADIENT2) | SL_KIND_BIT(SL_ADAPT_ANCHORED),
     SL_ARG_PERCENT, offsetof(sl_adapt_config, smoothing_permille), 1, 1000},
    {"probe_multiplier", SL_KIND_BIT(SL_ADAPT_VEGAS), SL_ARG_COUNT,
     offsetof(sl_adapt_config, probe_multiplier), 1, SL_ADAPT_LIMIT_MAX},
    {"tolerance", SL_KIND_BIT(SL_ADAPT_GRADIENT2), SL_ARG_PERCENT,
     offsetof(sl_adapt_config, tolerance_permille), 1000, 100000},
    {"long_window", SL_KIND_BIT(SL_ADAPT_GRADIENT2), SL_ARG_COUNT,
     offsetof(sl_adapt_config, long_window), 10, 1000000},
    {"queue_size", SL_KIND_BIT(SL_ADAPT_GRADIENT2), SL_ARG_COUNT,
     offsetof(sl_adapt_config, queue_size), 0, SL_ADAPT_LIMIT_MAX},
    {"queue", SL_KIND_BIT(SL_ADAPT_ANCHORED), SL_ARG_PERCENT,
     offsetof(sl_adapt_config, queue_permille), 1, 10000},
    {"short_window", SL_KIND_BIT(SL_ADAPT_ANCHORED), SL_ARG_COUNT,
     offsetof(sl_adapt_config, short_window), 1, 1000000},
    {"probe_interval", SL_KIND_BIT(SL_ADAPT_ANCHORED), SL_ARG_SPAN,
     offsetof(sl_adapt_config, probe_interval_ns), 1, SL_SPAN_MAX},
    {"probe_samples", SL_KIND_BIT(SL_ADAPT_ANCHORED), SL_ARG_COUNT,
     offsetof(sl_adapt_config, probe_samples), 1, 1000000},
};
#define SL_ADAPT_NPARAMS (sizeof sl_adapt_params / sizeof sl_adapt_params[0])

static int64_t *sl_param_field(sl_adapt_config *a, const sl_adapt_param *p)
{
    return (int64_t *)((char *)a + p->off);
}

static int64_t sl_param_get(const sl_adapt_config *a, const sl_adapt_param *p)
{
    return *(const int64_t *)((const char *)a + p->off);
}

void sl_adaptive_params(const sl_adaptive_policy *p,
                        void (*fn)(void *arg, const char *name, const char *text), void *arg)
{
    char t[32];
    for (size_t i = 0; i < SL_ADAPT_NPARAMS; i++) {
        const sl_adapt_param *pm = &sl_adapt_params[i];
        if (pm->kinds & SL_KIND_BIT(p->cfg.adapt.kind))
            fn(arg, pm->name, sl_arg_text(pm->type, sl_param_get(&p->cfg.adapt, pm), t));
    }
}

/* "aimd and anchored": the estimators of mask `kinds`, for a message. */
static const char *sl_kinds_text(unsigned kinds, char buf[64])
{
    int total = 0, seen = 0;
    for (int k = 0; k < SL_ADAPT_KIND_COUNT; k++)
        total += (kinds & SL_KIND_BIT(k)) != 0;
    size_t w = 0;
    buf[0] = '\0';
    for (int k = 0; k < SL_ADAPT_KIND_COUNT && w < 64; k++) {
        if (!(kinds & SL_KIND_BIT(k)))
            continue;
        seen++;
        const char *sep = seen == 1 ? "" : seen == total ? " and " : ", ";
        int n = snprintf(buf + w, 64 - w, "%s%s", sep, sl_adapt_kind_name((sl_adapt_kind)k));
        w += n < 0 ? 0 : (size_t)n;
    }
    return buf;
}

static int sl_estimator_value(sl_loader *ld, const yaml_node_t *v, const char *where,
                              sl_adapt_kind *out)
{
    char q[48];
    for (int k = 0; k < SL_ADAPT_KIND_COUNT && sl_yaml_is_scalar(v); k++)
        if (sl_ascii_is(sl_yaml_scalar(v), v->data.scalar.length,
                        sl_adapt_kind_name((sl_adapt_kind)k))) {
            *out = (sl_adapt_kind)k;
            return 0;
        }
    return sl_fail(ld, v, "%s: unknown estimator %s (use aimd, vegas, gradient2 or anchored)",
                   where, sl_quote(v, q));
}

/* reserve: {critical: 20%, default: 10%}: each class named is given its
 * reserve; the others keep the defaults. Their sum is checked with all. */
static int sl_reserve_value(sl_loader *ld, const yaml_node_t *v, const char *where,
                            sl_shed_config *shed)
{
    char q[48], what[64], a[32], b[32], c[32];
    if (!v || v->type != YAML_MAPPING_NODE)
        return sl_fail(ld, v, "%s: reserve must be a mapping of priorities (critical, default, "
                              "sheddable) to percentages (got %s)",
                       where, sl_quote(v, q));
    unsigned given = 0;
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
        yaml_node_t *k = sl_node(ld, p->key), *x = sl_node(ld, p->value);
        int cls = sl_yaml_is_scalar(k) ? sl_priority_parse(sl_yaml_scalar(k), k->data.scalar.length)
                                       : -1;
        if (cls < 0)
            return sl_fail(ld, k, "%s: reserve: unknown priority %s (use critical, default or "
                                  "sheddable)",
                           where, sl_quote(k, q));
        if (given & (1u << cls))
            return sl_fail(ld, k, "%s: reserve: priority %s is given twice", where,
                           sl_quote(k, q));
        given |= 1u << cls;
        int64_t permille;
        snprintf(what, sizeof what, "reserve %s", sl_quote(k, q));
        if (sl_arg_value(ld, x, where, what, SL_ARG_PERCENT, 0, 1000, &permille))
            return -1;
        shed->reserve_permille[cls] = (int32_t)permille;
    }
    int64_t sum = 0;
    for (int k = 0; k < shed->classes; k++)
        sum += shed->reserve_permille[k];
    if (sum > 1000) {
        char total[32];
        return sl_fail(ld, v, "%s: reserve: the reserves add up to %s (critical %s, default %s, "
                              "sheddable %s), more than 100%%",
                       where, sl_permille_text(sum, total),
                       sl_permille_text(shed->reserve_permille[SL_PRIO_CRITICAL], a),
                       sl_permille_text(shed->reserve_permille[SL_PRIO_DEFAULT], b),
                       sl_permille_text(shed->reserve_permille[SL_PRIO_SHEDDABLE], c));
    }
    return 0;
}

/* A partition's name: letters, digits, '_' and '-', as a limit's. */
static int sl_partition_name_value(sl_loader *ld, const yaml_node_t *k, const char *where,
                                   char *out)
{
    char q[48];
    bool ok = sl_yaml_is_scalar(k) && k->data.scalar.length >= 1 &&
              k->data.scalar.length <= SL_ADAPTIVE_PARTITION_NAME_MAX;
    for (size_t i = 0; ok && i < k->data.scalar.length; i++) {
        char c = sl_yaml_scalar(k)[i];
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             c == '_' || c == '-';
    }
    if (!ok)
        return sl_fail(ld, k, "%s: a partition's name must be 1 to %d letters, digits, '_' or "
                              "'-' (got %s)",
                       where, SL_ADAPTIVE_PARTITION_NAME_MAX, sl_quote(k, q));
    memcpy(out, sl_yaml_scalar(k), k->data.scalar.length + 1);
    return 0;
}

/* partitions: {live: 90%, batch: {share: 10%, lend: false}}, in order. */
static int sl_partitions_value(sl_loader *ld, const yaml_node_t *v, const char *where,
                               sl_adaptive_policy *p)
{
    char q[48], pwhere[160], total[32];
    sl_shed_config *shed = &p->cfg.shed;
    if (!v || v->type != YAML_MAPPING_NODE)
        return sl_fail(ld, v, "%s: partitions must be a mapping of partition names to shares "
                              "(live: 90%%, or batch: {share: 10%%, lend: false}) (got %s)",
                       where, sl_quote(v, q));
    size_t n = (size_t)(v->data.mapping.pairs.top - v->data.mapping.pairs.start);
    if (n > SL_SHED_PARTITIONS_MAX)
        return sl_fail(ld, v, "%s: at most %d partitions (got %zu)", where,
                       SL_SHED_PARTITIONS_MAX, n);
    int64_t sum = 0;
    for (yaml_node_pair_t *pr = v->data.mapping.pairs.start; pr < v->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k = sl_node(ld, pr->key), *x = sl_node(ld, pr->value);
        int i = shed->partitions;
        if (sl_partition_name_value(ld, k, where, p->partition[i]))
            return -1;
        snprintf(pwhere, sizeof pwhere, "%s partition '%s'", where, p->partition[i]);
        int64_t share = -1;
        bool lends = true;
        if (x && x->type == YAML_MAPPING_NODE) {
            for (yaml_node_pair_t *s = x->data.mapping.pairs.start; s < x->data.mapping.pairs.top;
                 s++) {
                yaml_node_t *sk = sl_node(ld, s->key), *sv = sl_node(ld, s->value);
                if (sl_key_is(sk, "share")) {
                    if (sl_arg_value(ld, sv, pwhere, "share", SL_ARG_PERCENT, 0, 1000, &share))
                        return -1;
                } else if (sl_key_is(sk, "lend")) {
                    if (sl_bool_value(ld, sv, pwhere, "lend", &lends))
                        return -1;
                } else {
                    return sl_fail(ld, sk, "%s: unknown setting %s (share, lend)", pwhere,
                                   sl_quote(sk, q));
                }
            }
            if (share < 0)
                return sl_fail(ld, x, "%s: share is required (a percentage of the limit)",
                               pwhere);
        } else if (sl_arg_value(ld, x, pwhere, "share", SL_ARG_PERCENT, 0, 1000, &share)) {
            return -1;
        }
        shed->guarantee_permille[i] = (int32_t)share;
        shed->lends[i] = lends;
        shed->partitions = i + 1;
        sum += share;
    }
    if (sum > 1000)
        return sl_fail(ld, v, "%s: the partitions' shares add up to %s, more than 100%%", where,
                       sl_permille_text(sum, total));
    return 0;
}

/*
 * A policy of algorithm adaptive into *p. The estimator is read first (its
 * defaults are those of the rest), then the limits (a default min or
 * initial limit is clamped to the max given), then every other setting.
 */
static int sl_adaptive_value(sl_loader *ld, const yaml_node_t *k, const yaml_node_t *m,
                             sl_adaptive_policy *p)
{
    static const char *const rate_keys[] = {
        "tiers",  "global", "plans",    "key",       "key_fallback", "shadow", "on_store_error",
        "store_timeout_ms", "limits", "period", "burst", "cost", "utc_offset", "reset_day", NULL};
    char where[96], q[48], known[64], a[32];
    if (sl_name_value(ld, k, "policy", p->name))
        return -1;
    snprintf(where, sizeof where, "policy '%s'", p->name);
    sl_adapt_kind kind = SL_ADAPT_ANCHORED;
    const yaml_node_t *v = sl_mapping_get(ld, m, "estimator");
    if (v && sl_estimator_value(ld, v, where, &kind))
        return -1;
    sl_adapt_config def;
    sl_adapt_config_default(kind, &def);

    const yaml_node_t *vmax = sl_mapping_get(ld, m, "max_limit");
    const yaml_node_t *vlimit = sl_mapping_get(ld, m, "limit");
    if (vmax && vlimit)
        return sl_fail(ld, vlimit, "%s: limit is another spelling of max_limit: give one of them",
                       where);
    int64_t max = def.max_limit, ttl = SL_ADAPTIVE_TTL_DEFAULT_NS;
    if ((vmax || vlimit) && sl_arg_value(ld, vmax ? vmax : vlimit, where,
                                         vmax ? "max_limit" : "limit", SL_ARG_COUNT, 1,
                                         SL_ADAPT_LIMIT_MAX, &max))
        return -1;
    if ((v = sl_mapping_get(ld, m, "ttl")) &&
        sl_arg_value(ld, v, where, "ttl", SL_ARG_SPAN, 1, SL_SPAN_MAX, &ttl))
        return -1;
    sl_adaptive_defaults(&p->cfg, kind, max, ttl);
    sl_adapt_config *ac = &p->cfg.adapt;
    const char *of_max = vmax || vlimit ? "" : " (the estimator's default)";
    if ((v = sl_mapping_get(ld, m, "min_limit"))) {
        if (sl_arg_value(ld, v, where, "min_limit", SL_ARG_COUNT, 1, SL_ADAPT_LIMIT_MAX,
                         &ac->min_limit))
            return -1;
        if (ac->min_limit > ac->max_limit)
            return sl_fail(ld, v, "%s: min_limit %lld is above max_limit %lld%s", where,
                           (long long)ac->min_limit, (long long)ac->max_limit, of_max);
        ac->initial_limit = def.initial_limit < ac->min_limit   ? ac->min_limit
                            : def.initial_limit > ac->max_limit ? ac->max_limit
                                                                : def.initial_limit;
    }
    if ((v = sl_mapping_get(ld, m, "initial_limit"))) {
        if (sl_arg_value(ld, v, where, "initial_limit", SL_ARG_COUNT, 1, SL_ADAPT_LIMIT_MAX,
                         &ac->initial_limit))
            return -1;
        if (ac->initial_limit > ac->max_limit)
            return sl_fail(ld, v, "%s: initial_limit %lld is above max_limit %lld%s", where,
                           (long long)ac->initial_limit, (long long)ac->max_limit, of_max);
        if (ac->initial_limit < ac->min_limit)
            return sl_fail(ld, v, "%s: initial_limit %lld is below min_limit %lld", where,
                           (long long)ac->initial_limit, (long long)ac->min_limit);
    }

    for (yaml_node_pair_t *pr = m->data.mapping.pairs.start; pr < m->data.mapping.pairs.top; pr++) {
        yaml_node_t *pk = sl_node(ld, pr->key);
        v = sl_node(ld, pr->value);
        if (sl_key_is(pk, "algorithm") || sl_key_is(pk, "estimator") ||
            sl_key_is(pk, "max_limit") || sl_key_is(pk, "limit") || sl_key_is(pk, "min_limit") ||
            sl_key_is(pk, "initial_limit") || sl_key_is(pk, "ttl"))
            continue; /* read above */
        const sl_adapt_param *param = NULL;
        for (size_t i = 0; i < SL_ADAPT_NPARAMS && !param; i++)
            if (sl_key_is(pk, sl_adapt_params[i].name))
                param = &sl_adapt_params[i];
        if (param) {
            if (!(param->kinds & SL_KIND_BIT(kind)))
                return sl_fail(ld, pk, "%s: %s is read only by %s, not by %s (the estimator)",
                               where, param->name, sl_kinds_text(param->kinds, known),
                               sl_adapt_kind_name(kind));
            if (sl_arg_value(ld, v, where, param->name, param->type, param->min, param->max,
                             sl_param_field(ac, param)))
                return -1;
            continue;
        }
        if (sl_key_is(pk, "reserve")) {
            if (sl_reserve_value(ld, v, where, &p->cfg.shed))
                return -1;
        } else if (sl_key_is(pk, "partitions")) {
            if (sl_partitions_value(ld, v, where, p))
                return -1;
        } else if (sl_key_is(pk, "idle")) {
            if (sl_arg_value(ld, v, where, "idle", SL_ARG_SPAN, 0, SL_SPAN_MAX,
                             &p->cfg.shed.idle_ns))
                return -1;
        } else {
            bool rate = false;
            for (int i = 0; rate_keys[i]; i++)
                rate |= sl_key_is(pk, rate_keys[i]);
            if (rate)
                return sl_fail(ld, pk, "%s: %s is a rate policy's setting: an adaptive policy "
                                       "limits the requests in flight, acquired and released, "
                                       "and has none",
                               where, sl_quote(pk, q));
            return sl_fail(ld, pk, "%s: unknown setting %s", where, sl_quote(pk, q));
        }
    }
    /* Every range was checked as it was read; the library's own checks
     * stand behind them. */
    sl_adapt scratch;
    int rc = sl_adapt_init(&scratch, ac);
    if (rc == SL_OK)
        rc = sl_shed_config_check(&p->cfg.shed);
    if (rc == SL_OK && (p->cfg.ttl_ns < 1 || p->cfg.ttl_ns > SL_SPAN_MAX))
        rc = SL_ERR_ARGUMENT;
    if (rc != SL_OK)
        return sl_fail(ld, m, "%s: %s (ttl %s)", where, sl_strerror(rc),
                       sl_span_text(p->cfg.ttl_ns, a));
    return 0;
}

/* Whether the policy mapping m says algorithm: adaptive. */
static bool sl_is_adaptive(sl_loader *ld, const yaml_node_t *m)
{
    const yaml_node_t *a = m && m->type == YAML_MAPPING_NODE ? sl_mapping_get(ld, m, "algorithm")
                                                             : NULL;
    return sl_yaml_is_scalar(a) && sl_ascii_is(sl_yaml_scalar(a), a->data.scalar.length,
                                                "adaptive");
}

static int sl_setting_value(sl_loader *ld, const yaml_node_t *k, const yaml_node_t *v)
{
    char q[48];
    if (!sl_yaml_is_scalar(k) || k->data.scalar.length == 0 || k->data.scalar.length > 64)
        return sl_fail(ld, k, "server: a setting name must be 1 to 64 characters (got %s)",
                       sl_quote(k, q));
    if (!sl_yaml_is_scalar(v))
        return sl_fail(ld, v, "server: %s must be a single value (got %s)", sl_yaml_scalar(k),
                       sl_quote(v, q));
    sl_config *c = ld->cfg;
    sl_config_setting *s = sl_realloc(c->settings, (c->nsettings + 1) * sizeof *s);
    if (!s)
        return sl_fail(ld, NULL, "out of memory");
    c->settings = s;
    s = &s[c->nsettings];
    s->name = sl_strdup(sl_yaml_scalar(k));
    s->value = sl_strdup(sl_yaml_scalar(v));
    s->line = (int)v->start_mark.line + 1;
    s->column = (int)v->start_mark.column + 1;
    if (!s->name || !s->value) {
        sl_free(s->name);
        sl_free(s->value);
        return sl_fail(ld, NULL, "out of memory");
    }
    for (char *p = s->name; *p; p++)
        if (*p == '_')
            *p = '-';
    c->nsettings++;
    return 0;
}

/* Orders key nodes by their text, for sl_unique_keys. */
static int sl_cmp_key_nodes(const void *a, const void *b)
{
    const yaml_node_t *x = *(yaml_node_t *const *)a, *y = *(yaml_node_t *const *)b;
    size_t n = x->data.scalar.length < y->data.scalar.length ? x->data.scalar.length
                                                             : y->data.scalar.length;
    int c = memcmp(x->data.scalar.value, y->data.scalar.value, n);
    if (c != 0)
        return c;
    return x->data.scalar.length < y->data.scalar.length ? -1
           : x->data.scalar.length > y->data.scalar.length ? 1
           : x->start_mark.index < y->start_mark.index ? -1 : 1;
}

/* Refuses a key given twice in any mapping of the file (YAML says a
 * mapping's keys are unique; libyaml lets a repeat through, and the last
 * one would silently win), naming the second one. Sorting keeps a mapping
 * of many keys cheap. */
static int sl_unique_keys(sl_loader *ld)
{
    for (yaml_node_t *n = ld->doc.nodes.start; n < ld->doc.nodes.top; n++) {
        if (n->type != YAML_MAPPING_NODE)
            continue;
        size_t count = (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start), k = 0;
        if (count < 2)
            continue;
        yaml_node_t **keys = sl_malloc(count * sizeof *keys);
        if (!keys)
            return sl_fail(ld, NULL, "out of memory");
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
            yaml_node_t *key = sl_node(ld, p->key);
            if (sl_yaml_is_scalar(key))
                keys[k++] = key;
        }
        qsort(keys, k, sizeof *keys, sl_cmp_key_nodes);
        for (size_t i = 1; i < k; i++) {
            if (keys[i]->data.scalar.length == keys[i - 1]->data.scalar.length &&
                memcmp(keys[i]->data.scalar.value, keys[i - 1]->data.scalar.value,
                       keys[i]->data.scalar.length) == 0) {
                char q[48];
                const yaml_node_t *second = keys[i];
                int line = (int)keys[i - 1]->start_mark.line + 1;
                sl_free(keys);
                return sl_fail(ld, second, "%s is given twice in one mapping (first on line %d)",
                               sl_quote(second, q), line);
            }
        }
        sl_free(keys);
    }
    return 0;
}

static int sl_walk(sl_loader *ld)
{
    char q[48];
    yaml_node_t *root = yaml_document_get_root_node(&ld->doc);
    if (!root) {
        ld->cfg->empty = true; /* an empty file: no settings, no policies */
        return 0;
    }
    if (sl_unique_keys(ld))
        return -1;
    if (root->type != YAML_MAPPING_NODE)
        return sl_fail(ld, root, "the file must be a mapping with server and policies sections");
    /* Each key once (sl_unique_keys): one server and one policies section,
     * each policy and tier name once. */
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *k = sl_node(ld, p->key), *v = sl_node(ld, p->value);
        if (sl_key_is(k, "server")) {
            if (!v || (v->type != YAML_MAPPING_NODE && !(sl_yaml_is_scalar(v) && !*sl_yaml_scalar(v))))
                return sl_fail(ld, v, "server must be a mapping of settings");
            if (v->type != YAML_MAPPING_NODE)
                continue;
            for (yaml_node_pair_t *s = v->data.mapping.pairs.start; s < v->data.mapping.pairs.top; s++)
                if (sl_setting_value(ld, sl_node(ld, s->key), sl_node(ld, s->value)))
                    return -1;
        } else if (sl_key_is(k, "policies")) {
            if (!v || (v->type != YAML_MAPPING_NODE && !(sl_yaml_is_scalar(v) && !*sl_yaml_scalar(v))))
                return sl_fail(ld, v, "policies must be a mapping of policy names to limits");
            if (v->type != YAML_MAPPING_NODE)
                continue;
            size_t n = (size_t)(v->data.mapping.pairs.top - v->data.mapping.pairs.start);
            ld->cfg->policies = sl_calloc(n ? n : 1, sizeof(sl_policy));
            ld->cfg->adaptive = sl_calloc(n ? n : 1, sizeof(sl_adaptive_policy));
            if (!ld->cfg->policies || !ld->cfg->adaptive)
                return sl_fail(ld, NULL, "out of memory");
            /* A name is unique across both kinds: sl_unique_keys refused a
             * name given twice in this one mapping. */
            for (yaml_node_pair_t *s = v->data.mapping.pairs.start; s < v->data.mapping.pairs.top; s++) {
                if (sl_is_adaptive(ld, sl_node(ld, s->value))) {
                    sl_adaptive_policy *ap = &ld->cfg->adaptive[ld->cfg->nadaptive];
                    if (sl_adaptive_value(ld, sl_node(ld, s->key), sl_node(ld, s->value), ap))
                        return -1;
                    ld->cfg->nadaptive++;
                    continue;
                }
                sl_policy *pol = &ld->cfg->policies[ld->cfg->npolicies];
                if (sl_policy_value(ld, sl_node(ld, s->key), sl_node(ld, s->value), pol)) {
                    sl_policy_free_sets(pol);
                    return -1;
                }
                ld->cfg->npolicies++;
            }
        } else {
            return sl_fail(ld, k, "unknown section %s (use server or policies)", sl_quote(k, q));
        }
    }
    return 0;
}

int sl_config_parse(const char *text, size_t len, const char *name, sl_config **out, char *err,
                    size_t errlen)
{
    sl_loader ld = {.name = name, .err = err, .errlen = errlen};
    *out = NULL;
    if (len > SL_CONFIG_MAX_BYTES)
        return sl_fail(&ld, NULL, "the file is larger than %d bytes", SL_CONFIG_MAX_BYTES);
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return sl_fail(&ld, NULL, "out of memory");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &ld.doc)) {
        snprintf(err, errlen, "%s:%zu:%zu: %s%s%s", name, parser.problem_mark.line + 1,
                 parser.problem_mark.column + 1, parser.problem ? parser.problem : "invalid YAML",
                 parser.context ? " " : "", parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        return -1;
    }
    yaml_parser_delete(&parser);
    ld.cfg = sl_calloc(1, sizeof *ld.cfg);
    int rc = ld.cfg ? sl_walk(&ld) : sl_fail(&ld, NULL, "out of memory");
    yaml_document_delete(&ld.doc);
    if (rc != 0) {
        sl_config_free(ld.cfg);
        return -1;
    }
    *out = ld.cfg;
    return 0;
}

int sl_config_load(const char *path, sl_config **out, char *err, size_t errlen)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    char *buf = sl_malloc(SL_CONFIG_MAX_BYTES + 1);
    size_t n = buf ? fread(buf, 1, SL_CONFIG_MAX_BYTES + 1, f) : 0;
    int failed = !buf || ferror(f);
    fclose(f);
    if (failed) {
        snprintf(err, errlen, buf ? "%s: cannot read the file" : "%s: out of memory", path);
        sl_free(buf);
        return -1;
    }
    int rc = sl_config_parse(buf, n, path, out, err, errlen);
    sl_free(buf);
    return rc;
}

void sl_config_align(sl_config *c, int64_t clock_offset_ns)
{
    for (size_t i = 0; c && i < c->npolicies; i++) {
        sl_policy *p = &c->policies[i];
        for (size_t t = 0; t <= p->ntiers + 1; t++) {
            sl_limit_set *set = t < p->ntiers ? &p->tiers[t].limits
                                : t == p->ntiers ? &p->limits : &p->global;
            /* Every limit was aligned once when loaded, so this cannot fail. */
            for (size_t j = 0; j < set->n; j++) {
                sl_limit *l = &set->l[j].limit;
                sl_limit_align_day(l, l->months, l->reset_day, l->utc_offset_ns,
                                   clock_offset_ns);
            }
        }
    }
}

void sl_config_free(sl_config *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nsettings; i++) {
        sl_free(c->settings[i].name);
        sl_free(c->settings[i].value);
    }
    sl_free(c->settings);
    for (size_t i = 0; i < c->npolicies; i++)
        sl_policy_free_sets(&c->policies[i]);
    sl_free(c->policies);
    sl_free(c->adaptive);
    sl_free(c);
}

/* "gcra 100 per 60s, burst 20" into buf. */
static const char *sl_limit_text(const sl_limit *l, char *buf, size_t cap)
{
    long long p = (long long)l->period_ns;
    const char *unit = "ns";
    if (p % 1000000000 == 0) {
        p /= 1000000000;
        unit = "s";
    } else if (p % 1000000 == 0) {
        p /= 1000000;
        unit = "ms";
    }
    if (l->months > 0) {
        p = (long long)l->months;
        unit = "mo";
    }
    int n = snprintf(buf, cap, "%s %lld per %lld%s, burst %lld", sl_algorithm_name(l->algorithm),
                     (long long)l->limit, p, unit, (long long)l->burst);
    if (l->reset_day > 1 && n > 0 && (size_t)n < cap)
        n += snprintf(buf + n, cap - (size_t)n, ", reset_day %lld", (long long)l->reset_day);
    long long off = (long long)(l->utc_offset_ns / 60000000000);
    if (off != 0 && n > 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, ", utc_offset %c%02lld:%02lld", off < 0 ? '-' : '+',
                 (off < 0 ? -off : off) / 60, (off < 0 ? -off : off) % 60);
    return buf;
}

static bool sl_limit_same(const sl_limit *a, const sl_limit *b)
{
    return a->algorithm == b->algorithm && a->limit == b->limit && a->period_ns == b->period_ns &&
           a->burst == b->burst && a->months == b->months && a->reset_day == b->reset_day &&
           a->utc_offset_ns == b->utc_offset_ns;
}

static bool sl_limit_windows(const sl_limit *l)
{
    return l->algorithm == SL_FIXED_WINDOW || l->algorithm == SL_SLIDING_WINDOW;
}

/* One changed limit of a reload, if it changed. */
static void sl_reload_limit(const char *pname, const char *what, const sl_named_limit *old,
                            const sl_named_limit *next, void (*say)(void *, const char *),
                            void *arg)
{
    char line[512], a[128], b[128];
    if (old->unit != next->unit) {
        snprintf(line, sizeof line, "policy '%s'%s: now charged in %s: each key keeps the units "
                                    "it has used, now counted as %s",
                 pname, what, next->unit == SL_UNIT_TOKENS ? "tokens" : "requests",
                 next->unit == SL_UNIT_TOKENS ? "tokens" : "requests");
        say(arg, line);
    }
    if (sl_limit_same(&old->limit, &next->limit))
        return;
    bool moved = true; /* said loudly below: some keys start again */
    if (old->limit.months > 0 && next->limit.months > 0 &&
        old->limit.reset_day != next->limit.reset_day) {
        /* A key's window now lasts until the first new boundary after it
         * began (sl_window_end): a fixed window that began before the
         * latest new boundary is over at once, whatever it has used; a
         * sliding window's count then weighs as the previous window's, and
         * is gone when it began before the boundary before that. */
        long long was = old->limit.reset_day > 1 ? (long long)old->limit.reset_day : 1;
        long long now = next->limit.reset_day > 1 ? (long long)next->limit.reset_day : 1;
        char loud[768];
        if (next->limit.algorithm == SL_SLIDING_WINDOW)
            snprintf(loud, sizeof loud,
                     "policy '%s'%s: reset_day %lld -> %lld: windows of months now begin on day "
                     "%lld; a key's count is its current window's only until the first new reset "
                     "day after that window began, and its previous window's until the next "
                     "one: a key whose window began before the latest new reset day has it "
                     "weigh as the previous window's, and one whose window began before the "
                     "reset day before that STARTS AGAIN with a full budget now",
                     pname, what, was, now, now);
        else
            snprintf(loud, sizeof loud,
                     "policy '%s'%s: reset_day %lld -> %lld: windows of months now begin on day "
                     "%lld; a key keeps its count only until the first new reset day after its "
                     "window began, so a key whose window began before the latest one STARTS "
                     "AGAIN with a full budget now",
                     pname, what, was, now, now);
        say(arg, loud);
    } else if (sl_limit_windows(&old->limit) && old->limit.algorithm == next->limit.algorithm &&
               (old->limit.utc_offset_ns != next->limit.utc_offset_ns ||
                old->limit.months != next->limit.months)) {
        /* The same for windows moved by their offset or their months: a
         * key's window ends at the first new boundary after it began. */
        char was[8], now[8], loud[512];
        sl_utc_offset_text(old->limit.utc_offset_ns, was);
        sl_utc_offset_text(next->limit.utc_offset_ns, now);
        snprintf(loud, sizeof loud,
                 "policy '%s'%s: windows at UTC%s%s -> UTC%s%s: a key keeps its count only until "
                 "the first new window boundary after its window began, so a key whose window "
                 "began before the latest one STARTS AGAIN with a full budget now",
                 pname, what, was, old->limit.months > 0 ? " of months" : "", now,
                 next->limit.months > 0 ? " of months" : "");
        say(arg, loud);
    } else {
        moved = false;
    }
    snprintf(line, sizeof line, "policy '%s'%s: %s -> %s: %s the units it has used (rounded up)",
             pname, what, sl_limit_text(&old->limit, a, sizeof a),
             sl_limit_text(&next->limit, b, sizeof b),
             moved ? "every other key keeps" : "each key keeps");
    say(arg, line);
}

/* What a reload does to one set of a policy's limits (`what`: "", " tier
 * 'paid'", " global"). Limits are matched by name: a named limit keeps its
 * keys' states across reloads (and tiers) by it. */
static void sl_reload_set(const char *pname, const char *what, const sl_limit_set *old,
                          const sl_limit_set *next, void (*say)(void *, const char *), void *arg)
{
    char line[512], lwhat[160];
    bool old_named = old->l[0].name[0] != 0, next_named = next->l[0].name[0] != 0;
    if (old_named != next_named) {
        snprintf(line, sizeof line,
                 "policy '%s'%s: %s: the store keys change, so every key STARTS AGAIN with a "
                 "full budget", pname, what,
                 next_named ? "one limit -> a list of named limits"
                            : "a list of named limits -> one limit");
        say(arg, line);
        return;
    }
    if (!old_named) {
        sl_reload_limit(pname, what, &old->l[0], &next->l[0], say, arg);
        return;
    }
    for (size_t i = 0; i < old->n; i++) {
        const sl_named_limit *n = sl_set_find(next, old->l[i].name);
        snprintf(lwhat, sizeof lwhat, "%s limit '%s'", what, old->l[i].name);
        if (n) {
            sl_reload_limit(pname, lwhat, &old->l[i], n, say, arg);
        } else {
            snprintf(line, sizeof line,
                     "policy '%s'%s removed: no longer checked (its states stay in the store "
                     "until they expire)", pname, lwhat);
            say(arg, line);
        }
    }
    for (size_t i = 0; i < next->n; i++)
        if (!sl_set_find(old, next->l[i].name)) {
            snprintf(line, sizeof line,
                     "policy '%s'%s limit '%s' added: every key starts it with a full budget",
                     pname, what, next->l[i].name);
            say(arg, line);
        }
}

/* Whether two policies write the same store keys: the same templates, as
 * the parser writes them back ("{header.X-Api-Key}" is "{header.x-api-key}"). */
static bool sl_templates_same(const sl_policy *a, const sl_policy *b)
{
    if (a->ntemplates != b->ntemplates)
        return false;
    for (size_t i = 0; i < a->ntemplates; i++) {
        char x[SL_KEY_TEMPLATE_MAX + 1], y[SL_KEY_TEMPLATE_MAX + 1];
        long nx = sl_key_template_describe(&a->templates[i], x, sizeof x);
        long ny = sl_key_template_describe(&b->templates[i], y, sizeof y);
        if (nx != ny || nx < 0 || memcmp(x, y, (size_t)nx) != 0)
            return false;
    }
    return true;
}

/* Appends ", " and the formatted text to buf (cap bytes) at *w. */
static void sl_append(char *buf, size_t cap, size_t *w, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void sl_append(char *buf, size_t cap, size_t *w, const char *fmt, ...)
{
    if (*w + 1 >= cap)
        return;
    if (*w > 0) {
        int n = snprintf(buf + *w, cap - *w, ", ");
        *w += n < 0 ? 0 : (size_t)n < cap - *w ? (size_t)n : cap - *w - 1;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *w, cap - *w, fmt, ap);
    va_end(ap);
    *w += n < 0 ? 0 : (size_t)n < cap - *w ? (size_t)n : cap - *w - 1;
}

/* "live 90%, batch 10% (not lent)", or "none". */
static const char *sl_partitions_text(const sl_adaptive_policy *p, char *buf, size_t cap)
{
    size_t w = 0;
    char a[32];
    buf[0] = '\0';
    for (int i = 0; i < p->cfg.shed.partitions; i++)
        sl_append(buf, cap, &w, "%s %s%s", p->partition[i],
                  sl_permille_text(p->cfg.shed.guarantee_permille[i], a),
                  p->cfg.shed.lends[i] ? "" : " (not lent)");
    if (w == 0)
        snprintf(buf, cap, "none");
    return buf;
}

/* What differs between two adaptive policies' configs, as "max_limit 200
 * -> 100, backoff 90% -> 80%" into buf; "" when nothing does. */
static void sl_adaptive_diff(const sl_adaptive_policy *o, const sl_adaptive_policy *n, char *buf,
                             size_t cap)
{
    const sl_adapt_config *oa = &o->cfg.adapt, *na = &n->cfg.adapt;
    char a[32], b[32];
    size_t w = 0;
    buf[0] = '\0';
    if (oa->kind != na->kind)
        sl_append(buf, cap, &w, "estimator %s -> %s", sl_adapt_kind_name(oa->kind),
                  sl_adapt_kind_name(na->kind));
    static const struct {
        const char *name;
        size_t off;
    } limits[] = {{"min_limit", offsetof(sl_adapt_config, min_limit)},
                  {"max_limit", offsetof(sl_adapt_config, max_limit)},
                  {"initial_limit", offsetof(sl_adapt_config, initial_limit)}};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        int64_t x = *(const int64_t *)((const char *)oa + limits[i].off);
        int64_t y = *(const int64_t *)((const char *)na + limits[i].off);
        if (x != y)
            sl_append(buf, cap, &w, "%s %lld -> %lld", limits[i].name, (long long)x,
                      (long long)y);
    }
    /* Under another estimator the parameters are the new one's: the
     * estimator's change says it. */
    for (size_t i = 0; oa->kind == na->kind && i < SL_ADAPT_NPARAMS; i++) {
        const sl_adapt_param *pm = &sl_adapt_params[i];
        int64_t x = sl_param_get(oa, pm), y = sl_param_get(na, pm);
        if ((pm->kinds & SL_KIND_BIT(na->kind)) && x != y)
            sl_append(buf, cap, &w, "%s %s -> %s", pm->name, sl_arg_text(pm->type, x, a),
                      sl_arg_text(pm->type, y, b));
    }
    if (o->cfg.ttl_ns != n->cfg.ttl_ns)
        sl_append(buf, cap, &w, "ttl %s -> %s", sl_span_text(o->cfg.ttl_ns, a),
                  sl_span_text(n->cfg.ttl_ns, b));
    static const char *const classes[] = {"critical", "default", "sheddable"};
    for (int k = 0; k < 3; k++)
        if (o->cfg.shed.reserve_permille[k] != n->cfg.shed.reserve_permille[k])
            sl_append(buf, cap, &w, "reserve %s %s -> %s", classes[k],
                      sl_permille_text(o->cfg.shed.reserve_permille[k], a),
                      sl_permille_text(n->cfg.shed.reserve_permille[k], b));
    char op[400], np[400];
    sl_partitions_text(o, op, sizeof op);
    sl_partitions_text(n, np, sizeof np);
    if (strcmp(op, np) != 0)
        sl_append(buf, cap, &w, "partitions %s -> %s", op, np);
    if (o->cfg.shed.idle_ns != n->cfg.shed.idle_ns)
        sl_append(buf, cap, &w, "idle %s -> %s", sl_span_text(o->cfg.shed.idle_ns, a),
                  sl_span_text(n->cfg.shed.idle_ns, b));
}

/* What a reload does to the adaptive policies: those removed, changed
 * and added, in that order. */
static void sl_reload_adaptive(const sl_config *old, const sl_config *next,
                               void (*say)(void *, const char *), void *arg)
{
    char line[2048], diff[1536];
    for (size_t i = 0; old && i < old->nadaptive; i++) {
        const sl_adaptive_policy *o = &old->adaptive[i];
        const sl_adaptive_policy *n = sl_config_adaptive(next, o->name, strlen(o->name));
        if (!n) {
            snprintf(line, sizeof line,
                     "policy '%s' removed: adaptive limit (%s): requests naming it are "
                     "refused", o->name, sl_adapt_kind_name(o->cfg.adapt.kind));
            say(arg, line);
            continue;
        }
        sl_adaptive_diff(o, n, diff, sizeof diff);
        if (diff[0]) {
            snprintf(line, sizeof line,
                     "policy '%s': adaptive limit changed (%s): each key keeps its estimate, "
                     "clamped to [min, max], and its leases", o->name, diff);
            say(arg, line);
        }
    }
    for (size_t i = 0; next && i < next->nadaptive; i++) {
        const sl_adaptive_policy *n = &next->adaptive[i];
        if (sl_config_adaptive(old, n->name, strlen(n->name)))
            continue;
        const sl_adapt_config *na = &n->cfg.adapt;
        char ttl[32];
        snprintf(line, sizeof line,
                 "policy '%s' added: adaptive limit (%s, %lld to %lld, ttl %s): each key starts "
                 "at %lld", n->name, sl_adapt_kind_name(na->kind), (long long)na->min_limit,
                 (long long)na->max_limit, sl_span_text(n->cfg.ttl_ns, ttl),
                 (long long)na->initial_limit);
        say(arg, line);
    }
}

void sl_config_describe_reload(const sl_config *old, const sl_config *next,
                               void (*say)(void *arg, const char *line), void *arg)
{
    char line[512], what[96];
    for (size_t i = 0; old && i < old->npolicies; i++) {
        const sl_policy *o = &old->policies[i];
        const sl_policy *n = sl_config_policy(next, o->name, strlen(o->name));
        if (!n) {
            snprintf(line, sizeof line,
                     "policy '%s' removed: its keys' states stay in the store until they expire "
                     "(a policy of that name added back finds them)", o->name);
            say(arg, line);
            continue;
        }
        if (!sl_templates_same(o, n)) {
            char keys[1400];
            snprintf(keys, sizeof keys,
                     "policy '%s': key template '%s'%s%s%s -> '%s'%s%s%s: keys are looked up "
                     "under the new template, so every key STARTS AGAIN with a full budget%s",
                     o->name, o->key, o->ntemplates == 2 ? " (fallback '" : "", o->key_fallback,
                     o->ntemplates == 2 ? "')" : "", n->key, n->ntemplates == 2 ? " (fallback '" : "",
                     n->key_fallback, n->ntemplates == 2 ? "')" : "",
                     o->keyed_by_request == n->keyed_by_request ? ""
                     : n->keyed_by_request ? "; SL.POLICY and /v1/check now name the store key in "
                                             "full (the template reads the request)"
                                           : "; SL.POLICY and /v1/check now name the key of "
                                             "{key}");
            say(arg, keys);
        }
        sl_reload_set(o->name, "", &o->limits, &n->limits, say, arg);
        for (size_t t = 0; t < o->ntiers; t++) {
            const sl_limit_set *nt =
                sl_policy_limits(n, o->tiers[t].name, strlen(o->tiers[t].name));
            snprintf(what, sizeof what, " tier '%s'", o->tiers[t].name);
            if (nt)
                sl_reload_set(o->name, what, &o->tiers[t].limits, nt, say, arg);
            else {
                snprintf(line, sizeof line,
                         "policy '%s' tier '%s' removed: requests naming it are refused", o->name,
                         o->tiers[t].name);
                say(arg, line);
            }
        }
        if (o->global.n && n->global.n)
            sl_reload_set(o->name, " global", &o->global, &n->global, say, arg);
        else if ((o->global.n != 0) != (n->global.n != 0)) {
            snprintf(line, sizeof line, "policy '%s': global limit %s", o->name,
                     n->global.n ? "added" : "removed");
            say(arg, line);
        }
        if (n->plans_path) {
            snprintf(line, sizeof line, "policy '%s': plans %s: %zu keys (%zu bytes)", o->name,
                     n->plans_path, sl_plans_count(n->plans), sl_plans_bytes(n->plans));
            say(arg, line);
        } else if (n->plans_redis) {
            if (!o->plans_redis || strcmp(o->plans_redis, n->plans_redis) != 0 ||
                o->plans_refresh_ns != n->plans_refresh_ns) {
                snprintf(line, sizeof line, "policy '%s': plans from the Redis hash '%.200s', "
                                            "read every %lld ms",
                         o->name, n->plans_redis, (long long)(n->plans_refresh_ns / 1000000));
                say(arg, line);
            }
        } else if (o->plans_path || o->plans_redis) {
            snprintf(line, sizeof line,
                     "policy '%s': plans %s dropped: every key is on the default tier unless "
                     "its request names one", o->name, o->plans_path ? "file" : "hash");
            say(arg, line);
        }
        if (o->shadow != n->shadow) {
            snprintf(line, sizeof line, "policy '%s': shadow mode %s", o->name,
                     n->shadow ? "on (decides and counts, never refuses)" : "off (refuses again)");
            say(arg, line);
        }
        if (o->on_store_error != n->on_store_error) {
            snprintf(line, sizeof line, "policy '%s': on_store_error %s -> %s", o->name,
                     sl_on_error_name((sl_on_error)o->on_store_error),
                     sl_on_error_name((sl_on_error)n->on_store_error));
            say(arg, line);
        }
        if (o->store_timeout_ms != n->store_timeout_ms) {
            snprintf(line, sizeof line, "policy '%s': store_timeout_ms %d -> %d%s", o->name,
                     (int)o->store_timeout_ms, (int)n->store_timeout_ms,
                     n->store_timeout_ms ? "" : " (the flag's)");
            say(arg, line);
        }
    }
    sl_reload_adaptive(old, next, say, arg);
}

const sl_policy *sl_config_policy(const sl_config *c, const char *name, size_t len)
{
    for (size_t i = 0; c && i < c->npolicies; i++)
        if (strlen(c->policies[i].name) == len && memcmp(c->policies[i].name, name, len) == 0)
            return &c->policies[i];
    return NULL;
}

const sl_adaptive_policy *sl_config_adaptive(const sl_config *c, const char *name, size_t len)
{
    for (size_t i = 0; c && i < c->nadaptive; i++)
        if (strlen(c->adaptive[i].name) == len && memcmp(c->adaptive[i].name, name, len) == 0)
            return &c->adaptive[i];
    return NULL;
}

int sl_adaptive_partition(const sl_adaptive_policy *p, const char *name, size_t len)
{
    for (int i = 0; p && i < p->cfg.shed.partitions; i++)
        if (strlen(p->partition[i]) == len && memcmp(p->partition[i], name, len) == 0)
            return i;
    return -1;
}

const sl_limit_set *sl_policy_limits(const sl_policy *p, const char *tier, size_t len)
{
    if (!tier || len == 0)
        return &p->limits;
    for (size_t i = 0; i < p->ntiers; i++)
        if (strlen(p->tiers[i].name) == len && memcmp(p->tiers[i].name, tier, len) == 0)
            return &p->tiers[i].limits;
    return NULL;
}

/* The bytes a part that is the same for every request writes (text, the
 * policy's name) into *piece; false for a part that varies. */
static bool sl_fixed_piece(const sl_key_template *t, const sl_key_part *k, const char *policy,
                           const char **piece, size_t *len)
{
    if (k->kind == SL_KEY_PART_TEXT) {
        *piece = t->text + k->off;
        *len = k->len;
    } else if (k->kind == SL_KEY_PART_POLICY) {
        *piece = policy;
        *len = strlen(policy);
    } else {
        return false;
    }
    return true;
}

/* Whether t could write key[0 .. n) under policy `policy`: the key begins
 * with the fixed pieces before t's first part that varies, ends with those
 * after its last, and leaves at least a byte for each that varies (none is
 * ever empty); a template without one writes one key only. */
static bool sl_template_fits(const sl_key_template *t, const char *policy, const char *key,
                             size_t n)
{
    const char *piece;
    size_t len, pos = 0, end = n, vary = 0, i = 0, last = t->nparts;
    for (; i < t->nparts && sl_fixed_piece(t, &t->parts[i], policy, &piece, &len); i++) {
        if (len > n - pos || memcmp(key + pos, piece, len) != 0)
            return false;
        pos += len;
    }
    if (i == t->nparts)
        return pos == n;
    while (last > i && sl_fixed_piece(t, &t->parts[last - 1], policy, &piece, &len)) {
        if (len > end - pos || memcmp(key + end - len, piece, len) != 0)
            return false;
        end -= len;
        last--;
    }
    for (; i < last; i++)
        vary += !sl_fixed_piece(t, &t->parts[i], policy, &piece, &len);
    return end - pos >= vary;
}

long sl_policy_key(const sl_policy *p, const char *key, size_t keylen, char *out, size_t cap)
{
    if (keylen == 0)
        return 0;
    if (p->keyed_by_request) {
        bool fits = false;
        for (size_t i = 0; i < p->ntemplates && !fits; i++)
            fits = sl_template_fits(&p->templates[i], p->name, key, keylen);
        if (!fits)
            return -2;
        if (keylen > cap)
            return -1;
        memcpy(out, key, keylen);
        return (long)keylen;
    }
    /* Text, {key} and {policy} only: a template with any other part keys by
     * the request. */
    const sl_key_template *t = &p->templates[0];
    size_t n = 0;
    for (size_t i = 0; i < t->nparts; i++) {
        const char *piece = key;
        size_t len = keylen;
        if (t->parts[i].kind != SL_KEY_PART_KEY)
            sl_fixed_piece(t, &t->parts[i], p->name, &piece, &len);
        if (len > cap - n)
            return -1;
        memcpy(out + n, piece, len);
        n += len;
    }
    return (long)n;
}

/* Writes what t writes, its varying parts as <name>, into buf at *w. */
static void sl_template_shape(const sl_key_template *t, const char *policy, char *buf, size_t cap,
                              size_t *w)
{
    for (size_t i = 0; i < t->nparts && *w + 1 < cap; i++) {
        const char *piece;
        size_t len;
        int n = sl_fixed_piece(t, &t->parts[i], policy, &piece, &len)
                    ? snprintf(buf + *w, cap - *w, "%.*s", (int)len, piece)
                    : snprintf(buf + *w, cap - *w, "<%s>", t->text + t->parts[i].off);
        *w += n < 0 ? 0 : (size_t)n < cap - *w ? (size_t)n : cap - *w - 1;
    }
}

void sl_policy_key_hint(const sl_policy *p, char *buf, size_t cap)
{
    if (cap == 0)
        return;
    int n = snprintf(buf, cap, "policy '%s' keys by the request: name the store key in full, as "
                               "forward-auth writes it: ", p->name);
    size_t w = n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
    sl_template_shape(&p->templates[0], p->name, buf, cap, &w);
    if (p->ntemplates == 2 && w + 5 < cap) {
        memcpy(buf + w, " or ", 5);
        w += 4;
        sl_template_shape(&p->templates[1], p->name, buf, cap, &w);
    }
    buf[w] = '\0';
}

size_t sl_policy_global_key(const sl_policy *p, char *out, size_t cap)
{
    int n = snprintf(out, cap, "\x1fglobal\x1f%s", p->name);
    return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}

/* Appends a set's items for the key base[0 .. blen) (written at *used in
 * keybuf): the key itself for an unnamed limit, "{BASE}\x1fNAME" for a
 * named one. Returns false when keybuf is full. */
static bool sl_set_items(const sl_limit_set *set, const char *base, size_t blen, int64_t cost,
                         int64_t tokens, char *keybuf, size_t keycap, size_t *used,
                         sl_take_item *items, const sl_named_limit **which, size_t *n)
{
    for (size_t i = 0; i < set->n; i++) {
        const sl_named_limit *l = &set->l[i];
        const char *key = base;
        size_t len = blen;
        if (l->name[0]) {
            size_t nlen = strlen(l->name);
            if (blen + nlen + 3 > keycap - *used)
                return false;
            char *k = keybuf + *used;
            k[0] = '{';
            memcpy(k + 1, base, blen);
            k[blen + 1] = '}';
            k[blen + 2] = '\x1f';
            memcpy(k + blen + 3, l->name, nlen);
            key = k;
            len = blen + nlen + 3;
            *used += len;
        }
        items[*n] = (sl_take_item){key, len, &l->limit, l->unit == SL_UNIT_TOKENS ? tokens : cost};
        which[(*n)++] = l;
    }
    return true;
}

static int sl_policy_items_of(const sl_policy *p, const sl_limit_set *set, const char *key,
                              size_t keylen, int64_t cost, int64_t tokens, char *keybuf,
                              size_t keycap, sl_take_item items[SL_TAKE_MANY_MAX],
                              const sl_named_limit *which[SL_TAKE_MANY_MAX], size_t *nkey);

int sl_policy_items(const sl_policy *p, const char *tier, size_t tierlen, const char *key,
                    size_t keylen, int64_t cost, int64_t tokens, char *keybuf, size_t keycap,
                    sl_take_item items[SL_TAKE_MANY_MAX],
                    const sl_named_limit *which[SL_TAKE_MANY_MAX], size_t *nkey)
{
    const sl_limit_set *set = &p->limits;
    if (p->plans_path || p->plans_redis) {
        if (tier && tierlen)
            return -2;
        int t = sl_plans_lookup(atomic_load_explicit(&p->plans, memory_order_acquire), key,
                                keylen);
        if (t >= 0)
            set = &p->tiers[t].limits;
    } else if (!(set = sl_policy_limits(p, tier, tierlen))) {
        return -1;
    }
    return sl_policy_items_of(p, set, key, keylen, cost, tokens, keybuf, keycap, items, which,
                              nkey);
}

int sl_policy_items_at(const sl_policy *p, int tier, const char *key, size_t keylen,
                       int64_t cost, int64_t tokens, char *keybuf, size_t keycap,
                       sl_take_item items[SL_TAKE_MANY_MAX],
                       const sl_named_limit *which[SL_TAKE_MANY_MAX], size_t *nkey)
{
    const sl_limit_set *set =
        tier >= 0 && (size_t)tier < p->ntiers ? &p->tiers[tier].limits : &p->limits;
    return sl_policy_items_of(p, set, key, keylen, cost, tokens, keybuf, keycap, items, which,
                              nkey);
}

static int sl_policy_items_of(const sl_policy *p, const sl_limit_set *set, const char *key,
                              size_t keylen, int64_t cost, int64_t tokens, char *keybuf,
                              size_t keycap, sl_take_item items[SL_TAKE_MANY_MAX],
                              const sl_named_limit *which[SL_TAKE_MANY_MAX], size_t *nkey)
{
    long written = sl_policy_key(p, key, keylen, keybuf, keycap);
    if (written == -2)
        return -3;
    if (written <= 0)
        return 0;
    size_t klen = (size_t)written, used = klen, n = 0;
    if (!sl_set_items(set, keybuf, klen, cost, tokens, keybuf, keycap, &used, items, which, &n))
        return 0;
    *nkey = n;
    if (p->global.n == 0)
        return (int)n;
    size_t glen = sl_policy_global_key(p, keybuf + used, keycap - used);
    if (glen == 0)
        return 0;
    const char *gkey = keybuf + used;
    used += glen;
    if (!sl_set_items(&p->global, gkey, glen, cost, tokens, keybuf, keycap, &used, items, which,
                      &n))
        return 0;
    return (int)n;
}

int sl_policy_limit_name(const char *policy, const char *limit, bool global, char *out,
                         size_t cap)
{
    /* On every policy answer: pieces copied, not formatted (snprintf
     * costs more than the take). */
    const char *piece[4] = {policy, global ? ".global" : "", limit && *limit ? "." : "",
                            limit ? limit : ""};
    size_t n = 0;
    for (int i = 0; i < 4; i++) {
        size_t len = strlen(piece[i]);
        if (n < cap) {
            size_t fit = len < cap - n ? len : cap - n - 1;
            memcpy(out + n, piece[i], fit);
            out[n + fit] = '\0';
        }
        n += len;
    }
    return (int)n;
}

int sl_on_error_parse(const char *name, size_t len, sl_on_error *out)
{
    static const struct {
        const char *name;
        sl_on_error v;
    } names[] = {{"fail_open", SL_ON_ERROR_FAIL_OPEN},
                 {"fail_closed", SL_ON_ERROR_FAIL_CLOSED},
                 {"local", SL_ON_ERROR_LOCAL}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i].name) == len && memcmp(names[i].name, name, len) == 0) {
            *out = names[i].v;
            return SL_OK;
        }
    return SL_ERR_ARGUMENT;
}

const char *sl_on_error_name(sl_on_error e)
{
    switch (e) {
    case SL_ON_ERROR_FAIL_OPEN: return "fail_open";
    case SL_ON_ERROR_FAIL_CLOSED: return "fail_closed";
    case SL_ON_ERROR_LOCAL: return "local";
    default: return "default";
    }
}
