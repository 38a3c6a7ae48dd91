/*
 * adaptive.c: adaptive concurrency limits for the command faces
 * (adaptive.h). The limiters are the library's (sl_limiters); this file
 * names their keys, writes their lease ids, and reads RESP's arguments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/adaptive.h"
#include "common/duration.h"
#include "common/hex.h"
#include "common/parse.h"
#include "common/siphash.h"
#include "policy/config.h"

#define R (c->reply)

uint64_t sl_lease_new_id(const sl_cmd_ctx *c)
{
    static _Thread_local uint64_t counter;
    uint64_t in[2] = {(uint64_t)(uintptr_t)&counter, ++counter}; /* unique per thread */
    uint64_t id = sl_siphash(c->lease_key, in, sizeof in);
    return id ? id : 1;
}

bool sl_lease_text_parse(const char *p, size_t n, uint64_t *id, uint32_t *tail)
{
    uint64_t v, t;
    if (n != SL_LEASE_TEXT || !sl_hex_u64(p, 16, &v) || !sl_hex_u64(p + 16, 8, &t))
        return false;
    *id = v;
    *tail = (uint32_t)t;
    return v != 0;
}

int sl_outcome_parse(const char *s, size_t len)
{
    static const char *const names[] = {"success", "dropped", "ignored"};
    for (int i = 0; i < 3; i++)
        if (strlen(names[i]) == len && strncasecmp(names[i], s, len) == 0)
            return i; /* in sl_adapt_outcome's order */
    return -1;
}

size_t sl_adaptive_key(const char *pname, size_t pname_len, const char *key, size_t keylen,
                       char *out, size_t cap)
{
    if (pname == NULL)
        pname_len = 0;
    size_t n = pname_len + 1 + keylen;
    if (keylen == 0 || n > cap)
        return 0;
    if (pname_len > 0)
        memcpy(out, pname, pname_len);
    out[pname_len] = '\x1f';
    memcpy(out + pname_len + 1, key, keylen);
    return n;
}

size_t sl_adaptive_key_policy(const void *key, size_t keylen)
{
    const char *sep = memchr(key, '\x1f', keylen);
    return sep ? (size_t)(sep - (const char *)key) : 0;
}

int64_t sl_adaptive_reconfigure(sl_limiters *t, const sl_config *next, int64_t now)
{
    int64_t changed = 0;
    for (size_t i = 0; t && next && i < next->nadaptive; i++) {
        const sl_adaptive_policy *p = &next->adaptive[i];
        char prefix[SL_POLICY_NAME_MAX + 1];
        size_t n = strlen(p->name);
        memcpy(prefix, p->name, n);
        prefix[n] = '\x1f';
        int64_t rc = sl_limiters_configure(t, prefix, n + 1, &p->cfg, now);
        if (rc > 0)
            changed += rc;
    }
    return changed;
}

/* A limiter key in `room`, or on the heap when it is longer: *key_out, and
 * the length (0: no memory, or an empty key). */
#define SL_ADAPTIVE_KEY_STACK 1024
static size_t sl_adaptive_key_get(const char *pname, size_t pname_len, const char *key,
                                  size_t keylen, char room[SL_ADAPTIVE_KEY_STACK], char **key_out)
{
    size_t need = (pname ? pname_len : 0) + 1 + keylen;
    char *buf = need <= SL_ADAPTIVE_KEY_STACK ? room : malloc(need);
    *key_out = buf;
    return buf ? sl_adaptive_key(pname, pname_len, key, keylen, buf, need) : 0;
}

static void sl_adaptive_key_put(char room[SL_ADAPTIVE_KEY_STACK], char *key)
{
    if (key != room)
        free(key);
}

static int sl_adaptive_no_limiters(const sl_cmd_ctx *c)
{
    return c->limiters ? SL_OK : SL_ERR_ARGUMENT;
}

int sl_adaptive_acquire(sl_cmd_ctx *c, const char *key, size_t keylen,
                        const sl_adaptive_policy *policy, int pindex,
                        const sl_limiter_config *cfg, int cls, int part, sl_limiter_decision *d,
                        char lease[SL_LEASE_TEXT + 1])
{
    memset(d, 0, sizeof *d);
    lease[0] = 0;
    if (sl_adaptive_no_limiters(c) != SL_OK)
        return SL_ERR_ARGUMENT;
    if (c->max_key_bytes && keylen > c->max_key_bytes)
        return SL_ERR_KEY;
    char room[SL_ADAPTIVE_KEY_STACK], *lk;
    size_t n = sl_adaptive_key_get(policy ? policy->name : NULL, policy ? strlen(policy->name) : 0, key,
                            keylen, room, &lk);
    if (n == 0) {
        sl_adaptive_key_put(room, lk);
        return keylen == 0 ? SL_ERR_KEY : SL_ERR_NOMEM;
    }
    uint64_t id = sl_lease_new_id(c);
    sl_limiter_lease l;
    int rc = sl_limiters_acquire(c->limiters, lk, n, policy ? &policy->cfg : cfg, c->now_mono(c),
                                 cls, part, id, &l, d);
    sl_adaptive_key_put(room, lk);
    if (rc != SL_OK)
        return rc;
    if (d->admitted) {
        sl_hex_put(lease, l.id, 16);
        sl_hex_put(lease + 16, l.slot | SL_LEASE_ADAPTIVE_BIT, 8);
        lease[SL_LEASE_TEXT] = '\0';
    }
    if (c->adapted)
        c->adapted(c, policy ? pindex : -1, cls, d->admitted);
    return SL_OK;
}

int sl_adaptive_release(sl_cmd_ctx *c, const char *key, size_t keylen, const char *pname,
                        size_t pname_len, const char *text, size_t len, sl_adapt_outcome outcome,
                        int64_t rtt_ns, int *held)
{
    *held = 0;
    if (sl_adaptive_no_limiters(c) != SL_OK)
        return SL_ERR_ARGUMENT;
    uint64_t id;
    uint32_t tail;
    if (!sl_lease_text_parse(text, len, &id, &tail) || !(tail & SL_LEASE_ADAPTIVE_BIT))
        return SL_OK; /* not a lease this server hands out: not held */
    if (c->max_key_bytes && keylen > c->max_key_bytes)
        return SL_ERR_KEY;
    char room[SL_ADAPTIVE_KEY_STACK], *lk;
    size_t n = sl_adaptive_key_get(pname, pname_len, key, keylen, room, &lk);
    if (n == 0) {
        sl_adaptive_key_put(room, lk);
        return keylen == 0 ? SL_ERR_KEY : SL_ERR_NOMEM;
    }
    sl_limiter_lease l = {.id = id, .slot = tail & ~SL_LEASE_ADAPTIVE_BIT};
    int rc = sl_limiters_complete(c->limiters, lk, n, c->now_mono(c), &l, outcome, rtt_ns);
    sl_adaptive_key_put(room, lk);
    if (rc < 0)
        return rc;
    *held = rc;
    return SL_OK;
}

int sl_adaptive_stats(sl_cmd_ctx *c, const char *key, size_t keylen, const char *pname,
                      size_t pname_len, sl_limiter_stats *st, int *found)
{
    *found = 0;
    memset(st, 0, sizeof *st);
    if (sl_adaptive_no_limiters(c) != SL_OK)
        return SL_ERR_ARGUMENT;
    if (c->max_key_bytes && keylen > c->max_key_bytes)
        return SL_ERR_KEY;
    char room[SL_ADAPTIVE_KEY_STACK], *lk;
    size_t n = sl_adaptive_key_get(pname, pname_len, key, keylen, room, &lk);
    if (n == 0) {
        sl_adaptive_key_put(room, lk);
        return keylen == 0 ? SL_ERR_KEY : SL_ERR_NOMEM;
    }
    int rc = sl_limiters_stats(c->limiters, lk, n, c->now_mono(c), st);
    sl_adaptive_key_put(room, lk);
    if (rc < 0)
        return rc;
    *found = rc;
    return SL_OK;
}

int sl_estimator_parse(const char *s, size_t len)
{
    for (int k = 0; k < SL_ADAPT_KIND_COUNT; k++) {
        const char *name = sl_adapt_kind_name((sl_adapt_kind)k);
        if (strlen(name) == len && strncasecmp(name, s, len) == 0)
            return k;
    }
    return -1;
}

bool sl_adaptive_adhoc(sl_limiter_config *cfg, const char *est, size_t est_len, int64_t max,
                       int64_t ttl_ms, int64_t min, int64_t initial, char *err, size_t errlen)
{
    int kind = est ? sl_estimator_parse(est, est_len) : SL_ADAPT_ANCHORED;
    int64_t ttl;
    if (kind < 0) {
        snprintf(err, errlen, "unknown estimator '%.*s': use aimd, vegas, gradient2 or anchored",
                 (int)(est_len > 32 ? 32 : est_len), est);
        return false;
    }
    if (max < 1 || max > SL_ADAPTIVE_ADHOC_MAX) {
        snprintf(err, errlen, "max_in_flight must be between 1 and %d", SL_ADAPTIVE_ADHOC_MAX);
        return false;
    }
    if (ttl_ms < 1 || __builtin_mul_overflow(ttl_ms, INT64_C(1000000), &ttl) ||
        ttl > SL_SPAN_MAX) {
        snprintf(err, errlen, "ttl_ms must be a positive number of milliseconds of at most %lld",
                 (long long)(SL_SPAN_MAX / 1000000));
        return false;
    }
    for (int i = 0; i < 2; i++) {
        int64_t v = i ? initial : min;
        if (v != -1 && (v < 1 || v > max)) {
            snprintf(err, errlen, "the %s limit must be between 1 and max_in_flight (%lld)",
                     i ? "initial" : "min", (long long)max);
            return false;
        }
    }
    sl_adaptive_defaults(cfg, (sl_adapt_kind)kind, max, ttl);
    if (min > 0)
        cfg->adapt.min_limit = min;
    if (initial > 0)
        cfg->adapt.initial_limit = initial;
    if (cfg->adapt.initial_limit < cfg->adapt.min_limit) {
        if (initial > 0) {
            snprintf(err, errlen, "the initial limit %lld is below the min limit %lld",
                     (long long)initial, (long long)cfg->adapt.min_limit);
            return false;
        }
        cfg->adapt.initial_limit = cfg->adapt.min_limit;
    }
    return true;
}

/* ---- RESP ---- */

static void sl_adaptive_reply_status(sl_cmd_ctx *c, int rc)
{
    if (rc == SL_ERR_KEY && c->max_key_bytes > 0)
        sl_reply_errorf(c, "%s (at most %zu bytes)", sl_strerror(rc), c->max_key_bytes);
    else
        sl_reply_errorf(c, "%s", sl_strerror(rc));
}

static bool sl_adaptive_here(sl_cmd_ctx *c)
{
    if (c->limiters)
        return true;
    sl_reply_errorf(c, "adaptive concurrency limits are not served here");
    return false;
}

/* An argument for a message: at most 32 bytes of it. */
#define SL_ARG_SHOWN(a) (int)((a)->len > 32 ? 32 : (a)->len), (a)->ptr

/*
 * The keyword option at argv[i] (followed by its value): its index in
 * opts[0 .. n), each at most once (*seen's bits). Replies the error and
 * returns -1 for an unknown option, one without a value, or one given twice;
 * usage is the syntax an unknown one is told.
 */
static int sl_arg_option(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv, int i,
                         const char *const *opts, int n, unsigned *seen, const char *usage)
{
    int o = 0;
    while (o < n && !sl_arg_is(&argv[i], opts[o]))
        o++;
    if (o == n || i + 1 >= argc) {
        sl_reply_errorf(c, "syntax error: %s", usage);
        return -1;
    }
    if (*seen & 1u << o) {
        sl_reply_errorf(c, "syntax error: option '%s' is given twice", opts[o]);
        return -1;
    }
    *seen |= 1u << o;
    return o;
}

/* PRIORITY's value: a class of the three, or replies the error. */
static bool sl_arg_priority(sl_cmd_ctx *c, const sl_resp_slice *a, int *cls)
{
    *cls = sl_priority_parse(a->ptr, a->len);
    if (*cls >= 0)
        return true;
    sl_reply_errorf(c, "PRIORITY must be critical, default or sheddable (or 0, 1, 2), got '%.*s'",
                    SL_ARG_SHOWN(a));
    return false;
}

/*
 * SL.ACQUIRE key max_in_flight ttl_ms ADAPTIVE [ESTIMATOR e] [MIN n]
 *            [INITIAL n] [PRIORITY p]
 * SL.ACQUIRE key POLICY name [PRIORITY p] [PARTITION part]
 */
void sl_cmd_acquire_adaptive(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    if (!sl_adaptive_here(c))
        return;
    const sl_adaptive_policy *p = NULL;
    int pindex = -1, cls = SL_PRIO_DEFAULT, part = 0, from;
    sl_limiter_config cfg;
    bool adhoc = !sl_arg_is(&argv[2], "POLICY");
    int64_t max = 0, ttl_ms = 0, min = -1, initial = -1;
    const sl_resp_slice *est = NULL;
    if (adhoc) {
        if (!sl_arg_int(c, &argv[2], &max) || !sl_arg_int(c, &argv[3], &ttl_ms))
            return;
        from = 5; /* past ADAPTIVE */
    } else {
        const sl_resp_slice *name = &argv[3];
        const sl_config *config = c->config;
        p = config ? sl_config_adaptive(config, name->ptr, name->len) : NULL;
        if (!p) {
            if (config && sl_config_policy(config, name->ptr, name->len))
                sl_reply_errorf(c, "policy '%.*s' is a rate limit: take from it with SL.POLICY",
                                SL_ARG_SHOWN(name));
            else
                sl_reply_errorf(c, "unknown adaptive policy '%.*s'", SL_ARG_SHOWN(name));
            return;
        }
        pindex = (int)(p - config->adaptive);
        from = 4;
    }
    unsigned seen = 0;
    bool named = false; /* PARTITION given */
    static const char *const opts[] = {"ESTIMATOR", "MIN", "INITIAL", "PRIORITY", "PARTITION"};
    const char *usage = adhoc ? "SL.ACQUIRE key max_in_flight ttl_ms ADAPTIVE [ESTIMATOR name] "
                                "[MIN n] [INITIAL n] [PRIORITY p]"
                              : "SL.ACQUIRE key POLICY name [PRIORITY p] [PARTITION name]";
    for (int i = from; i < argc; i += 2) {
        /* The ad-hoc form's options, or the policy's: PRIORITY is both's. */
        const char *const *mine = adhoc ? opts : opts + 3;
        int o = sl_arg_option(c, argc, argv, i, mine, adhoc ? 4 : 2, &seen, usage);
        if (o < 0)
            return;
        if (!adhoc)
            o += 3;
        const sl_resp_slice *v = &argv[i + 1];
        if (o == 0) {
            est = v;
        } else if (o == 1 || o == 2) {
            if (!sl_arg_int(c, v, o == 1 ? &min : &initial))
                return;
            if (*(o == 1 ? &min : &initial) < 1) {
                sl_reply_errorf(c, "%s must be a positive integer", opts[o]);
                return;
            }
        } else if (o == 3) {
            if (!sl_arg_priority(c, v, &cls))
                return;
        } else {
            named = true;
            if ((part = sl_adaptive_partition(p, v->ptr, v->len)) < 0) {
                sl_reply_errorf(c, "unknown partition '%.*s' for policy '%s'", SL_ARG_SHOWN(v),
                                p->name);
                return;
            }
        }
    }
    char err[200];
    if (adhoc && !sl_adaptive_adhoc(&cfg, est ? est->ptr : NULL, est ? est->len : 0, max, ttl_ms,
                                    min, initial, err, sizeof err)) {
        sl_reply_errorf(c, "%s", err);
        return;
    }
    if (!adhoc && p->cfg.shed.partitions > 0 && !named) {
        sl_reply_errorf(c, "policy '%s' has partitions: name one with PARTITION", p->name);
        return;
    }
    sl_limiter_decision d;
    char lease[SL_LEASE_TEXT + 1];
    int rc = sl_adaptive_acquire(c, argv[1].ptr, argv[1].len, p, pindex, &cfg, cls, part, &d,
                                 lease);
    if (rc != SL_OK)
        sl_adaptive_reply_status(c, rc);
    else if (d.admitted)
        R->bulk(c->sink, lease, SL_LEASE_TEXT);
    else
        R->null(c->sink);
}

/* Parses LATENCY's value: milliseconds, with up to 6 decimals ("12",
 * "0.25"), into nanoseconds in [1, SL_SPAN_MAX]. */
static bool sl_parse_latency_ms(const char *s, size_t len, int64_t *ns)
{
    const char *dot = memchr(s, '.', len);
    size_t whole = dot ? (size_t)(dot - s) : len, frac = dot ? len - whole - 1 : 0;
    uint64_t w = 0, f = 0;
    if (whole == 0 || (dot && (frac == 0 || frac > 6)) || !sl_parse_digits(s, whole, &w) ||
        (frac && !sl_parse_digits(dot + 1, frac, &f)))
        return false;
    for (size_t i = frac; i < 6; i++)
        f *= 10;
    if (w > (uint64_t)(SL_SPAN_MAX / 1000000))
        return false;
    int64_t v = (int64_t)w * 1000000 + (int64_t)f;
    if (v < 1 || v > SL_SPAN_MAX)
        return false;
    *ns = v;
    return true;
}

/* SL.RELEASE key lease_id [POLICY name] [LATENCY ms] [OUTCOME o], for an
 * adaptive lease (or any lease given options). */
void sl_cmd_release_adaptive(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    uint64_t id;
    uint32_t tail;
    bool adaptive = sl_lease_text_parse(argv[2].ptr, argv[2].len, &id, &tail) &&
                    (tail & SL_LEASE_ADAPTIVE_BIT);
    const sl_resp_slice *pname = NULL;
    int64_t rtt = 0;
    int outcome = SL_ADAPT_SUCCESS;
    unsigned seen = 0;
    static const char *const opts[] = {"POLICY", "LATENCY", "OUTCOME"};
    for (int i = 3; i < argc; i += 2) {
        int o = sl_arg_option(c, argc, argv, i, opts, 3, &seen,
                              "SL.RELEASE key lease_id [POLICY name] [LATENCY ms] "
                              "[OUTCOME success|dropped|ignored]");
        if (o < 0)
            return;
        const sl_resp_slice *v = &argv[i + 1];
        if (o == 0) {
            pname = v;
        } else if (o == 1) {
            if (!sl_parse_latency_ms(v->ptr, v->len, &rtt)) {
                sl_reply_errorf(c, "LATENCY must be milliseconds, a positive number with at most "
                                   "6 decimals of at most %lld, got '%.*s'",
                                (long long)(SL_SPAN_MAX / 1000000), SL_ARG_SHOWN(v));
                return;
            }
        } else if ((outcome = sl_outcome_parse(v->ptr, v->len)) < 0) {
            sl_reply_errorf(c, "OUTCOME must be success, dropped or ignored, got '%.*s'",
                            SL_ARG_SHOWN(v));
            return;
        }
    }
    if (!adaptive && argv[2].len == SL_LEASE_TEXT && sl_lease_text_parse(argv[2].ptr, argv[2].len,
                                                                          &id, &tail)) {
        sl_reply_errorf(c, "POLICY, LATENCY and OUTCOME are for adaptive leases (SL.ACQUIRE "
                           "... ADAPTIVE or POLICY); this lease is a fixed one");
        return;
    }
    if (!sl_adaptive_here(c))
        return;
    int held;
    int rc = sl_adaptive_release(c, argv[1].ptr, argv[1].len, pname ? pname->ptr : NULL,
                                 pname ? pname->len : 0, argv[2].ptr, argv[2].len,
                                 (sl_adapt_outcome)outcome, rtt, &held);
    if (rc != SL_OK)
        sl_adaptive_reply_status(c, rc);
    else
        R->integer(c->sink, held);
}

/* SL.LIMIT key [POLICY name]: what the key's adaptive limiter holds, as a
 * map; a null when it has none. */
void sl_cmd_limit(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    if (argc != 2 && !(argc == 4 && sl_arg_is(&argv[2], "POLICY"))) {
        sl_reply_errorf(c, "syntax error: SL.LIMIT key [POLICY name]");
        return;
    }
    if (!sl_adaptive_here(c))
        return;
    sl_limiter_stats st;
    int found;
    int rc = sl_adaptive_stats(c, argv[1].ptr, argv[1].len, argc == 4 ? argv[3].ptr : NULL,
                               argc == 4 ? argv[3].len : 0, &st, &found);
    if (rc != SL_OK) {
        sl_adaptive_reply_status(c, rc);
        return;
    }
    if (!found) {
        R->null(c->sink);
        return;
    }
    static const char *const prio[] = {"critical", "default", "sheddable"};
    const char *est = sl_adapt_kind_name(st.kind);
    R->map(c->sink, 14 + (size_t)st.classes);
    R->bulk(c->sink, "estimator", 9);
    R->bulk(c->sink, est, strlen(est));
    const char *names[] = {"limit", "min_limit", "max_limit", "in_flight", "admitted", "refused",
                           "completed", "dropped", "expired", "baseline_us", "latency_us"};
    int64_t vals[] = {st.limit,
                      st.min_limit,
                      st.max_limit,
                      st.in_flight,
                      (int64_t)st.admitted,
                      (int64_t)st.refused,
                      (int64_t)st.completed,
                      (int64_t)st.dropped,
                      (int64_t)st.expired,
                      st.rtt_base_ns / 1000,
                      st.rtt_short_ns / 1000};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        R->bulk(c->sink, names[i], strlen(names[i]));
        R->integer(c->sink, vals[i]);
    }
    R->bulk(c->sink, "probing", 7);
    R->integer(c->sink, st.probing);
    R->bulk(c->sink, "in_flight_by_priority", 21);
    R->integers(c->sink, st.class_in_flight, (size_t)st.classes);
    for (int k = 0; k < st.classes; k++) {
        char name[40];
        int n = snprintf(name, sizeof name, "refused_%s", k < 3 ? prio[k] : "other");
        R->bulk(c->sink, name, (size_t)n);
        R->integer(c->sink, (int64_t)st.refused_by_class[k]);
    }
}
