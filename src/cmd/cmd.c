/*
 * cmd.c: CL.THROTTLE and the SL.* commands, for every face (see cmd.h).
 *
 * Each handler parses, builds a limit (from the per-thread cache when it can),
 * calls the executor once, and replies. Errors name what was wrong, in
 * Redis's words where Redis has them.
 */
#include "cmd/cmd.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/adaptive.h"
#include "common/duration.h"
#include "common/hex.h"
#include "common/parse.h"
#include "common/units.h"
#include "backend/backend.h"
#include "common/siphash.h"
#include "cmd/reserve.h"
#include "policy/config.h"
#include "proto/http.h"

#define R (c->reply)

/* ---- replies ---- */

void sl_reply_errorf(sl_cmd_ctx *c, const char *fmt, ...)
{
    char msg[256 + 8] = "ERR ";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + 4, sizeof msg - 4, fmt, ap);
    va_end(ap);
    R->error(c->sink, msg);
}

/* A result code's message; a key's names the longest key the face takes,
 * when it has a limit of its own (sluiced's --max-key-bytes). */
static void sl_reply_status(sl_cmd_ctx *c, int rc)
{
    if (rc == SL_ERR_WRONGTYPE) { /* Redis's prefix for a key of the wrong kind */
        char msg[256];
        snprintf(msg, sizeof msg, "WRONGTYPE %s", sl_strerror(rc));
        R->error(c->sink, msg);
        return;
    }
    if (rc == SL_ERR_KEY && c->max_key_bytes > 0)
        sl_reply_errorf(c, "%s (at most %zu bytes)", sl_strerror(rc), c->max_key_bytes);
    else
        sl_reply_errorf(c, "%s", sl_strerror(rc));
}

/* Copies at most 32 bytes of an argument for an error message, replacing
 * what is not printable (as Redis's sdscatrepr would escape it). */
static void sl_printable(char *out, size_t cap, const sl_resp_slice *a)
{
    size_t n = a->len < cap - 1 ? a->len : cap - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)a->ptr[i];
        out[i] = (isprint(ch) && ch != '\'') ? (char)ch : '?';
    }
    out[n] = '\0';
}

void sl_reply_unknown_command(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    char name[33], args[160] = "", one[33];
    size_t used = 0;
    sl_printable(name, sizeof name, &argv[0]);
    for (int i = 1; i < argc && used < 128; i++) {
        sl_printable(one, sizeof one, &argv[i]);
        int w = snprintf(args + used, sizeof args - used, "'%s' ", one);
        if (w < 0 || (size_t)w >= sizeof args - used)
            break;
        used += (size_t)w;
    }
    sl_reply_errorf(c, "unknown command '%s', with args beginning with: %s", name, args);
}

static void sl_kv_int(sl_cmd_ctx *c, const char *k, int64_t v)
{
    R->bulk(c->sink, k, strlen(k));
    R->integer(c->sink, v);
}

/* A policy's answer beside its decision: which of its limits refused and
 * which binds, and whether it is a dry run. */
typedef struct sl_policy_answer {
    int rejected_by; /* -1 admitted, else the index of the first limit that refused: the
                        key's limits come first, then the global ones */
    bool global;     /* the numbers shown are a global limit's */
    bool shadow;     /* a dry-run policy */
    const char *binding; /* the name of the limit whose numbers are shown */
    const sl_chain *reserve; /* SL.RESERVE's: the reservation, after the numbers */
} sl_policy_answer;

/* A wait in milliseconds as replies give it: 0 when admitted, -1 never. */
static int64_t sl_retry_ms(const sl_decision *d)
{
    return d->allowed                    ? 0
           : d->retry_after_ns == SL_NEVER ? -1
                                           : sl_ns_ceil_ms(d->retry_after_ns);
}

/*
 * A decision; pa (NULL for a plain one) makes it a policy's: rejected_by,
 * scope ("key" or "global") and binding (the name of the limit whose numbers
 * follow: sl_policy_limit_name) after allowed.
 * A shadow (dry-run) policy is invisible to its caller: every field a client
 * acts on says go (allowed 1, rejected_by -1, retry_after_ms and delay_ms
 * 0), and shadow 1, would_allow and would_retry_after_ms carry the real
 * answer for the operator.
 */
static void sl_reply_decision_as(sl_cmd_ctx *c, const sl_limit *l, const sl_decision *d,
                                 const sl_policy_answer *pa)
{
    bool queue = l->algorithm == SL_LEAKY_BUCKET;
    bool shadow = pa && pa->shadow;
    const sl_chain *ch = pa ? pa->reserve : NULL;
    R->map(c->sink, (queue ? 6u : 5u) + (pa ? 3u : 0u) + (shadow ? 3u : 0u) + (ch ? 2u : 0u));
    sl_kv_int(c, "allowed", shadow || d->allowed);
    if (pa) {
        sl_kv_int(c, "rejected_by", shadow ? -1 : pa->rejected_by);
        R->bulk(c->sink, "scope", 5);
        if (pa->global)
            R->bulk(c->sink, "global", 6);
        else
            R->bulk(c->sink, "key", 3);
        R->bulk(c->sink, "binding", 7);
        R->bulk(c->sink, pa->binding, strlen(pa->binding));
    }
    sl_kv_int(c, "limit", d->limit);
    sl_kv_int(c, "remaining", d->remaining);
    sl_kv_int(c, "retry_after_ms", shadow ? 0 : sl_retry_ms(d));
    sl_kv_int(c, "reset_after_ms", sl_ns_ceil_ms(d->reset_after_ns));
    if (queue)
        sl_kv_int(c, "delay_ms", shadow ? 0 : sl_ns_ceil_ms(d->delay_ns));
    if (shadow) {
        sl_kv_int(c, "shadow", 1);
        sl_kv_int(c, "would_allow", d->allowed);
        sl_kv_int(c, "would_retry_after_ms", sl_retry_ms(d));
    }
    if (ch) {
        R->bulk(c->sink, "reservation", 11);
        if (ch->reserved)
            R->bulk(c->sink, ch->id, ch->id_len);
        else
            R->null(c->sink);
        sl_kv_int(c, "ttl_ms", ch->reserved ? ch->ttl_ms : 0);
    }
}

static void sl_reply_decision(sl_cmd_ctx *c, const sl_limit *l, const sl_decision *d)
{
    sl_reply_decision_as(c, l, d, NULL);
}

/* ---- arguments ---- */

bool sl_arg_is(const sl_resp_slice *a, const char *keyword)
{
    size_t n = strlen(keyword);
    return a->len == n && strncasecmp(a->ptr, keyword, n) == 0;
}

bool sl_arg_int(sl_cmd_ctx *c, const sl_resp_slice *a, int64_t *out)
{
    if (sl_parse_i64(a->ptr, a->len, SL_INT_MINUS, out))
        return true;
    sl_reply_errorf(c, "value is not an integer or out of range");
    return false;
}

bool sl_arg_period(sl_cmd_ctx *c, const sl_resp_slice *a, const char *what, int64_t *ns,
                   int64_t *months)
{
    int64_t none;
    sl_duration_status rc = sl_parse_period(a->ptr, a->len, ns, months ? months : &none);
    if (rc == SL_DURATION_OK && !months && none > 0)
        rc = SL_DURATION_MALFORMED; /* a duration was asked for, not calendar months */
    if (rc == SL_DURATION_OUT_OF_RANGE)
        sl_reply_errorf(c, "%s must be a positive duration of at most 73 years", what);
    else if (rc != SL_DURATION_OK)
        sl_reply_errorf(c, "%s is not a duration: use seconds, or a number with ms, s, m, h, d, "
                           "w%s",
                        what, months ? " or mo" : "");
    return rc == SL_DURATION_OK;
}

int sl_limit_cached(sl_limit_cache *cache, int64_t kind, int64_t a, int64_t b, int64_t d,
                    int64_t months, int64_t reset_day, int64_t utc_offset_ns,
                    const sl_limit **out)
{
    struct sl_limit_cache_entry *e = NULL;
    if (reset_day == 1)
        reset_day = 0; /* the first either way: one entry for both */
    if (cache) {
        uint64_t h = (uint64_t)(kind + 2) * UINT64_C(0x9E3779B97F4A7C15);
        h = (h ^ (uint64_t)a) * UINT64_C(0xBF58476D1CE4E5B9);
        h = (h ^ (uint64_t)b) * UINT64_C(0x94D049BB133111EB);
        h = (h ^ (uint64_t)d) * UINT64_C(0x9E3779B97F4A7C15);
        h = (h ^ (uint64_t)months ^ (uint64_t)reset_day << 48 ^ (uint64_t)utc_offset_ns << 8) *
            UINT64_C(0xBF58476D1CE4E5B9);
        e = &cache->slot[(h >> 32) % SL_LIMIT_CACHE_SLOTS];
        if (e->kind == kind + 2 && e->p1 == a && e->p2 == b && e->p3 == d &&
            e->months == months && e->reset_day == reset_day &&
            e->utc_offset_ns == utc_offset_ns) {
            *out = &e->limit;
            return SL_OK;
        }
    }
    sl_limit tmp, *l = e ? &e->limit : &tmp;
    int rc = kind < 0 ? sl_limit_init_cell(l, a, b, d)
                      : sl_limit_init(l, (sl_algorithm)kind, a, b, d);
    if (rc == SL_OK && kind >= 0)
        rc = sl_limit_align_day(l, months, reset_day, utc_offset_ns,
                                cache ? cache->clock_offset_ns : 0);
    if (e) {
        e->kind = 0; /* empty unless valid */
        if (rc == SL_OK) {
            e->kind = kind + 2;
            e->p1 = a;
            e->p2 = b;
            e->p3 = d;
            e->months = months;
            e->reset_day = reset_day;
            e->utc_offset_ns = utc_offset_ns;
        }
    }
    if (rc != SL_OK)
        return rc;
    if (!e) { /* no cache: the caller needs storage that outlives this call */
        static _Thread_local sl_limit last;
        last = tmp;
        l = &last;
    }
    *out = l;
    return SL_OK;
}

/* A limit from (kind, a, b, c), kind < 0 for redis-cell's, through the
 * connection's cache; windows at UTC, periods of no months. */
static int sl_limit_get(sl_cmd_ctx *c, int64_t kind, int64_t a, int64_t b, int64_t d,
                        const sl_limit **out)
{
    return sl_limit_cached(c->limit_cache, kind, a, b, d, 0, 0, 0, out);
}

/* The error of a limit that months cannot describe, else of its numbers. */
static void sl_reply_limit_status(sl_cmd_ctx *c, int rc, sl_algorithm algo, int64_t months)
{
    if (rc == SL_ERR_PERIOD && months > 0 && algo == SL_SLIDING_LOG)
        sl_reply_errorf(c, "sliding_log cannot count calendar months: give its period in days "
                           "or weeks, or use fixed_window or sliding_window");
    else
        sl_reply_status(c, rc);
}

/*
 * Parses "limit period [BURST b] [COST c] [ALGORITHM a] [UTCOFFSET o]
 * [RESETDAY d]" from argv[*i], up to argc or the next LIMIT keyword, and
 * builds the limit. Replies the error and returns false on bad input.
 */
static bool sl_arg_limit(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv, int *i,
                         const sl_limit **l, int64_t *cost)
{
    /* The options by index; `seen` has a bit for each one given, so that a
     * repeated one is refused (as HTTP refuses a repeated parameter)
     * rather than the last one silently winning. */
    enum { OPT_BURST, OPT_COST, OPT_ALGORITHM, OPT_UTCOFFSET, OPT_RESETDAY, OPT_COUNT };
    static const char *const names[OPT_COUNT] = {"BURST", "COST", "ALGORITHM", "UTCOFFSET",
                                                 "RESETDAY"};
    unsigned seen = 0;
    int64_t limit, period, months, burst = 0, utc_offset = 0; /* burst 0: not given, the limit */
    int64_t reset_day = 0;                                     /* 0: the first */
    sl_algorithm algo = SL_GCRA;
    *cost = 1;
    if (*i + 2 > argc) {
        sl_reply_errorf(c, "syntax error: a limit needs a count and a period");
        return false;
    }
    if (!sl_arg_int(c, &argv[*i], &limit) ||
        !sl_arg_period(c, &argv[*i + 1], "period", &period, &months))
        return false;
    for (*i += 2; *i < argc && !sl_arg_is(&argv[*i], "LIMIT"); *i += 2) {
        const sl_resp_slice *opt = &argv[*i];
        if (*i + 1 >= argc) {
            sl_reply_errorf(c, "syntax error: option '%.*s' needs a value",
                            (int)(opt->len > 32 ? 32 : opt->len), opt->ptr);
            return false;
        }
        const sl_resp_slice *val = &argv[*i + 1];
        int k = 0;
        while (k < OPT_COUNT && !sl_arg_is(opt, names[k]))
            k++;
        if (k == OPT_COUNT) {
            sl_reply_errorf(c, "syntax error: unknown option '%.*s'",
                            (int)(opt->len > 32 ? 32 : opt->len), opt->ptr);
            return false;
        }
        if (seen & 1u << k) {
            sl_reply_errorf(c, "syntax error: option '%s' is given twice", names[k]);
            return false;
        }
        seen |= 1u << k;
        if (k == OPT_BURST) {
            if (!sl_arg_int(c, val, &burst))
                return false;
            /* The library reads 0 as "the limit"; a client that writes 0
             * means something else (nginx's burst=0: no burst), so a given
             * burst must be at least 1 in every face. */
            if (burst < 1) {
                sl_reply_status(c, SL_ERR_BURST);
                return false;
            }
        } else if (k == OPT_COST) {
            if (!sl_arg_int(c, val, cost))
                return false;
        } else if (k == OPT_UTCOFFSET) {
            if (sl_parse_utc_offset(val->ptr, val->len, &utc_offset) != SL_DURATION_OK) {
                sl_reply_errorf(c, "UTCOFFSET must be +HH:MM, -HH:MM, +HHMM, +HH or Z, at most "
                                   "18 hours (got '%.*s')",
                                (int)(val->len > 32 ? 32 : val->len), val->ptr);
                return false;
            }
        } else if (k == OPT_RESETDAY) {
            if (!sl_parse_i64(val->ptr, val->len, SL_INT_SIGNED, &reset_day) || reset_day < 1 ||
                reset_day > SL_RESET_DAY_MAX) {
                sl_reply_errorf(c, "RESETDAY must be a day of the month, 1 to %d (got '%.*s')",
                                SL_RESET_DAY_MAX, (int)(val->len > 32 ? 32 : val->len),
                                val->ptr);
                return false;
            }
        } else if (sl_algorithm_parse(val->ptr, val->len, &algo) != SL_OK ||
                   algo == SL_CONCURRENCY) {
            sl_reply_errorf(c, "unknown algorithm '%.*s': use gcra, token_bucket, "
                               "leaky_bucket, fixed_window, sliding_log or sliding_window",
                            (int)(val->len > 32 ? 32 : val->len), val->ptr);
            return false;
        }
    }
    if (*cost < 0) {
        sl_reply_status(c, SL_ERR_COST);
        return false;
    }
    if ((seen & 1u << OPT_RESETDAY) && months == 0) {
        sl_reply_errorf(c, "RESETDAY is the day of the month windows of months begin on: give "
                           "a period of months such as 1mo");
        return false;
    }
    if ((seen & 1u << OPT_RESETDAY) && algo != SL_FIXED_WINDOW && algo != SL_SLIDING_WINDOW) {
        sl_reply_errorf(c, "RESETDAY needs ALGORITHM fixed_window or sliding_window: %s meters "
                           "a rate and has no windows to reset",
                        sl_algorithm_name(algo));
        return false;
    }
    int rc = sl_limit_cached(c->limit_cache, algo, limit, period, burst, months, reset_day,
                             utc_offset, l);
    if (rc != SL_OK) {
        sl_reply_limit_status(c, rc, algo, months);
        return false;
    }
    return true;
}


/* ---- the check runner: submit, count, render ---- */

void sl_check_own(sl_check *k)
{
    if (k->counted && k->given_key && k->given_key != k->given_key_buf) {
        k->given_key_len = k->given_key_len < sizeof k->given_key_buf ? k->given_key_len
                                                                       : sizeof k->given_key_buf;
        memcpy(k->given_key_buf, k->given_key, k->given_key_len);
        k->given_key = k->given_key_buf;
    }
    for (size_t i = 0; i < k->n; i++)
        if (k->lim[i] != &k->own[i]) {
            k->own[i] = *k->lim[i];
            k->lim[i] = &k->own[i];
        }
    if (k->name && k->name != k->name_buf) {
        snprintf(k->name_buf, sizeof k->name_buf, "%s", k->name);
        k->name = k->name_buf;
        for (size_t i = 0; i < k->n; i++) {
            snprintf(k->lname_buf[i], sizeof k->lname_buf[i], "%s", k->lname[i]);
            k->lname[i] = k->lname_buf[i];
        }
    }
}

void sl_check_submit(sl_cmd_ctx *c, sl_check *k)
{
    if (c->defer && c->be->defers) {
        sl_check *h = c->defer(c, k);
        if (!h) {
            sl_chain_free(k);
            sl_reply_status(c, SL_ERR_NOMEM);
            return;
        }
        h->req.d = h->d;
        if (sl_backend_submit(c->be, c->bw, &h->req) != SL_PENDING)
            h->req.done(&h->req); /* answered in the call: the face renders it in its place */
        return;
    }
    sl_backend_submit(c->be, c->bw, &k->req);
    sl_check_finish(c, k);
}

static void sl_render_decide(sl_cmd_ctx *c, const sl_check *k)
{
    if (k->req.op == SL_OP_RESET || k->req.op == SL_OP_RELEASE || k->req.op == SL_OP_REFUND) {
        R->integer(c->sink, k->req.count);
        return;
    }
    int64_t out[1 + 6 * SL_TAKE_MANY_MAX];
    out[0] = k->req.failed;
    for (size_t i = 0; i < k->n; i++) {
        const sl_decision *d = &k->d[i];
        int64_t *o = &out[1 + 6 * i];
        o[0] = d->allowed;
        o[1] = d->limit;
        o[2] = d->remaining;
        o[3] = d->allowed ? 0 : d->retry_after_ns == SL_NEVER ? -1 : d->retry_after_ns;
        o[4] = d->reset_after_ns;
        o[5] = d->delay_ns;
    }
    R->integers(c->sink, out, 1 + 6 * k->n);
}

/* SL.USAGE's answer: one map per limit of the policy, as peeked. */
static void sl_render_usage(sl_cmd_ctx *c, const sl_check *k)
{
    R->array(c->sink, k->n);
    for (size_t i = 0; i < k->n; i++) {
        const sl_decision *d = &k->d[i];
        char name[SL_POLICY_LIMIT_NAME_ROOM];
        sl_policy_limit_name(k->name, k->lname[i], i >= k->nkey, name, sizeof name);
        R->map(c->sink, 6);
        R->bulk(c->sink, "name", 4);
        R->bulk(c->sink, name, strlen(name));
        sl_kv_int(c, "limit", d->limit);
        sl_kv_int(c, "used", sl_usage_used(d));
        sl_kv_int(c, "remaining", d->remaining < 0 ? 0 : d->remaining);
        sl_kv_int(c, "reset_after_ms", sl_ns_ceil_ms(d->reset_after_ns));
        sl_kv_int(c, "period_ms", sl_ns_ceil_ms(k->lim[i]->period_ns));
    }
}

/* SL.SETTLE's answer: settled, and each limit's adjustment (given back:
 * negative, charged: positive); no limits when it did not settle. */
static void sl_render_settle(sl_cmd_ctx *c, const sl_check *k)
{
    const sl_chain *ch = k->chain;
    R->map(c->sink, 2);
    sl_kv_int(c, "settled", ch->settled);
    R->bulk(c->sink, "limits", 6);
    R->array(c->sink, ch->settled ? ch->n : 0);
    for (size_t i = 0; ch->settled && i < ch->n; i++) {
        char name[SL_POLICY_LIMIT_NAME_ROOM];
        sl_policy_limit_name(k->name, k->lname[i], i >= k->nkey, name, sizeof name);
        R->map(c->sink, 2);
        R->bulk(c->sink, "name", 4);
        R->bulk(c->sink, name, strlen(name));
        sl_kv_int(c, "adjusted", ch->adjusted[i]);
    }
}

static void sl_check_render(sl_cmd_ctx *c, sl_check *k);

bool sl_check_finish(sl_cmd_ctx *c, sl_check *k)
{
    if (k->chain && !sl_chain_next(c, k))
        return false;
    sl_check_render(c, k);
    sl_chain_free(k);
    return true;
}

static void sl_check_render(sl_cmd_ctx *c, sl_check *k)
{
    bool allowed = k->req.failed < 0;
    if (k->req.rc == SL_OK && k->counted && c->decided)
        c->decided(c, k, allowed || k->shadow, k->shadow && !allowed);
    if (k->render == SL_RENDER_FACE) {
        c->render(c, k);
        return;
    }
    if (k->chain && k->chain->error[0]) {
        R->error(c->sink, k->chain->error);
        return;
    }
    if (k->req.rc != SL_OK) {
        if (k->req.errstr && k->req.errstr_is_reply)
            R->error(c->sink, k->req.errstr);
        else if (k->req.errstr && k->req.rc != SL_ERR_WRONGTYPE)
            sl_reply_errorf(c, "store: %s",
                            k->req.errstr + (strncmp(k->req.errstr, "ERR ", 4) == 0 ? 4 : 0));
        else
            sl_reply_status(c, k->req.rc);
        return;
    }
    switch (k->render) {
    case SL_RENDER_CELL: {
        int64_t out[5];
        sl_cell_reply(&k->d[0], out);
        R->integers(c->sink, out, 5);
        break;
    }
    case SL_RENDER_DECISION:
        sl_reply_decision(c, k->lim[0], &k->d[0]);
        break;
    case SL_RENDER_MANY:
        R->map(c->sink, 3);
        sl_kv_int(c, "allowed", allowed);
        sl_kv_int(c, "rejected_by", k->req.failed);
        R->bulk(c->sink, "results", 7);
        R->array(c->sink, k->n);
        for (size_t i = 0; i < k->n; i++)
            sl_reply_decision(c, k->lim[i], &k->d[i]);
        break;
    case SL_RENDER_POLICY:
    case SL_RENDER_RESERVE: {
        /* The numbers shown are those of the limit that binds (the one
         * that admits the fewest more requests like this one, or waits the
         * longest: sl_http_binding), as HTTP's headers show them: a key
         * with room left under a spent global limit has, in truth, no
         * room. */
        const sl_decision *dp[SL_TAKE_MANY_MAX];
        for (size_t i = 0; i < k->n; i++)
            dp[i] = &k->d[i];
        size_t b = sl_http_binding(dp, k->cost, k->n, k->req.failed);
        char binding[SL_POLICY_LIMIT_NAME_ROOM];
        sl_policy_limit_name(k->name, k->lname[b], b >= k->nkey, binding, sizeof binding);
        sl_policy_answer pa = {k->req.failed, b >= k->nkey, k->shadow, binding,
                               k->render == SL_RENDER_RESERVE ? k->chain : NULL};
        sl_reply_decision_as(c, k->lim[b], &k->d[b], &pa);
        break;
    }
    case SL_RENDER_COUNT:
        R->integer(c->sink, k->req.count);
        break;
    case SL_RENDER_LEASE: {
        if (!k->d[0].allowed) {
            R->null(c->sink);
            break;
        }
        char text[SL_LEASE_TEXT];
        sl_hex_put(text, k->req.lease_id, 16);
        sl_hex_put(text + 16, (uint64_t)k->lease_max, 8);
        R->bulk(c->sink, text, SL_LEASE_TEXT);
        break;
    }
    case SL_RENDER_DECIDE:
        sl_render_decide(c, k);
        break;
    case SL_RENDER_USAGE:
        sl_render_usage(c, k);
        break;
    case SL_RENDER_SETTLE:
        sl_render_settle(c, k);
        break;
    default:
        break;
    }
}

static int sl_check_policy_fill(sl_check *k, const sl_config *cfg, const sl_policy *p, int n,
                                sl_take_item items[SL_TAKE_MANY_MAX],
                                const sl_named_limit *which[SL_TAKE_MANY_MAX], size_t nkey);

int sl_check_policy(sl_check *k, const sl_config *cfg, const sl_policy *p, const char *tier,
                    size_t tier_len, const char *key, size_t key_len, int64_t cost,
                    int64_t tokens, char *kbuf, size_t kcap, sl_take_item items[SL_TAKE_MANY_MAX])
{
    const sl_named_limit *which[SL_TAKE_MANY_MAX];
    size_t nkey = 0;
    int n = sl_policy_items(p, tier, tier_len, key, key_len, cost, tokens, kbuf, kcap, items,
                            which, &nkey);
    n = sl_check_policy_fill(k, cfg, p, n, items, which, nkey);
    if (n > 0) {
        k->given_key = key;
        k->given_key_len = key_len;
    }
    return n;
}

/* sl_check_policy with the key's tier looked up by the caller: its index
 * in p->tiers, -1 for the default. */
static int sl_check_policy_at(sl_check *k, const sl_config *cfg, const sl_policy *p, int tier,
                              const char *key, size_t key_len, int64_t cost, int64_t tokens,
                              char *kbuf, size_t kcap, sl_take_item items[SL_TAKE_MANY_MAX])
{
    const sl_named_limit *which[SL_TAKE_MANY_MAX];
    size_t nkey = 0;
    int n = sl_policy_items_at(p, tier, key, key_len, cost, tokens, kbuf, kcap, items, which,
                               &nkey);
    n = sl_check_policy_fill(k, cfg, p, n, items, which, nkey);
    if (n > 0) {
        k->given_key = key;
        k->given_key_len = key_len;
    }
    return n;
}

/* Fills k for the n items of policy p (n <= 0: nothing, returned). */
static int sl_check_policy_fill(sl_check *k, const sl_config *cfg, const sl_policy *p, int n,
                                sl_take_item items[SL_TAKE_MANY_MAX],
                                const sl_named_limit *which[SL_TAKE_MANY_MAX], size_t nkey)
{
    if (n <= 0)
        return n;
    sl_check_init(k, SL_OP_TAKE, SL_RENDER_POLICY, (size_t)n, items);
    for (int i = 0; i < n; i++) {
        k->lim[i] = items[i].limit;
        k->lname[i] = which[i]->name;
        k->lunit[i] = (unsigned char)which[i]->unit;
        k->cost[i] = items[i].cost;
    }
    k->nkey = nkey;
    /* A named limit's store key is "{KEY}\x1fNAME" (sl_policy_items):
     * the key's own store key is inside the braces. */
    if (which[0]->name[0]) {
        k->key = (const char *)items[0].key + 1;
        k->key_len = items[0].keylen - 3 - strlen(which[0]->name);
    }
    k->policy = (int)(p - cfg->policies);
    k->name = p->name;
    k->shadow = p->shadow;
    k->req.on_error = (sl_on_error)p->on_store_error;
    k->req.timeout_ms = p->store_timeout_ms;
    return n;
}

/* ---- commands ---- */

/* CL.THROTTLE key max_burst count_per_period period [quantity] */
static void sl_cmd_throttle(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    int64_t max_burst, count, period, quantity = 1;
    if (!sl_arg_int(c, &argv[2], &max_burst) || !sl_arg_int(c, &argv[3], &count) ||
        !sl_arg_int(c, &argv[4], &period) || (argc == 6 && !sl_arg_int(c, &argv[5], &quantity)))
        return;
    if (argc > 6) {
        sl_reply_errorf(c, "wrong number of arguments for 'cl.throttle' command");
        return;
    }
    /* redis-cell computes the emission interval as period / count in whole
     * nanoseconds and refuses an interval of 0 (a count or a period of 0,
     * or more than one per nanosecond) with these words, and no ERR: its
     * users may match them. */
    if (count == 0 || period == 0 ||
        (count > 0 && period > 0 && period <= INT64_MAX / 1000000000 &&
         period * 1000000000 / count == 0)) {
        R->error(c->sink, "Cell error: Zero rates are not supported");
        return;
    }
    if (quantity < 0) {
        sl_reply_status(c, SL_ERR_COST);
        return;
    }
    const sl_limit *l;
    int rc = sl_limit_get(c, -1, max_burst, count, period, &l);
    if (rc == SL_ERR_BURST) { /* max_burst, not a burst: 0 is fine here */
        sl_reply_errorf(c, "max_burst must be an integer between 0 and %lld",
                        (long long)(SL_SPAN_MAX - 1));
        return;
    }
    if (rc != SL_OK) {
        sl_reply_status(c, rc);
        return;
    }
    sl_check k;
    sl_take_item item = {argv[1].ptr, argv[1].len, l, quantity};
    sl_check_init(&k, SL_OP_TAKE, SL_RENDER_CELL, 1, &item);
    k.lim[0] = l;
    sl_check_submit(c, &k);
}

/* SL.TAKE / SL.PEEK key limit period [BURST b] [COST c] [ALGORITHM a] [UTCOFFSET o] */
static void sl_cmd_take_or_peek(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv, bool peek)
{
    int i = 2;
    const sl_limit *l;
    int64_t cost;
    if (!sl_arg_limit(c, argc, argv, &i, &l, &cost))
        return;
    if (i < argc) {
        sl_reply_errorf(c, "syntax error: LIMIT is for SL.TAKEMANY");
        return;
    }
    sl_check k;
    sl_take_item item = {argv[1].ptr, argv[1].len, l, cost};
    sl_check_init(&k, peek ? SL_OP_PEEK : SL_OP_TAKE, SL_RENDER_DECISION, 1, &item);
    k.lim[0] = l;
    sl_check_submit(c, &k);
}

static void sl_cmd_take(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    sl_cmd_take_or_peek(c, argc, argv, false);
}

static void sl_cmd_peek(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    sl_cmd_take_or_peek(c, argc, argv, true);
}

/* SL.TAKEMANY numkeys key [key ...] LIMIT limit period [opts] [LIMIT ...] */
static void sl_cmd_takemany(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    int64_t n;
    if (!sl_arg_int(c, &argv[1], &n))
        return;
    if (n < 1 || n > SL_TAKE_MANY_MAX) {
        sl_reply_errorf(c, "numkeys must be between 1 and %d", SL_TAKE_MANY_MAX);
        return;
    }
    if (argc < 2 + n) {
        sl_reply_errorf(c, "numkeys is more than the keys given");
        return;
    }
    /* Limits live in the cache, which a later get may overwrite: copy them. */
    sl_check k;
    sl_take_item items[SL_TAKE_MANY_MAX];
    int i = 2 + (int)n;
    for (int j = 0; j < n; j++) {
        if (i >= argc || !sl_arg_is(&argv[i], "LIMIT")) {
            sl_reply_errorf(c, "syntax error: expected LIMIT for key %d of %d", j + 1, (int)n);
            return;
        }
        i++;
        const sl_limit *l;
        if (!sl_arg_limit(c, argc, argv, &i, &l, &items[j].cost))
            return;
        k.own[j] = *l;
        k.lim[j] = &k.own[j];
        items[j].key = argv[2 + j].ptr;
        items[j].keylen = argv[2 + j].len;
        items[j].limit = &k.own[j];
    }
    if (i < argc) {
        sl_reply_errorf(c, "syntax error: more LIMIT groups than keys");
        return;
    }
    sl_check_init(&k, SL_OP_TAKE, SL_RENDER_MANY, (size_t)n, items);
    sl_check_submit(c, &k);
}

/* SL.RESET key [key ...]: every key in one request, so that its reply
 * counts them all whenever it completes. */
static void sl_cmd_reset(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    sl_take_item few[16] = {{0}}, *items = few; /* zeroed: gcc -fno-inline cannot see n >= 1 */
    size_t n = (size_t)argc - 1;
    if (n > sizeof few / sizeof few[0] && !(items = malloc(n * sizeof *items))) {
        sl_reply_status(c, SL_ERR_NOMEM);
        return;
    }
    for (size_t i = 0; i < n; i++)
        items[i] = (sl_take_item){argv[1 + i].ptr, argv[1 + i].len, NULL, 0};
    sl_check k;
    sl_check_init(&k, SL_OP_RESET, SL_RENDER_COUNT, n, items);
    sl_check_submit(c, &k);
    if (items != few)
        free(items);
}

/*
 * Lease ids as clients see them: 24 hex digits, the lease's 64-bit id (16)
 * and the max_in_flight it was granted under (8, so that SL.RELEASE finds
 * the state's shape without being told). The id is SipHash of a per-thread
 * counter under the face's random key: unguessable, and never the id of an
 * earlier lease (a 64-bit collision aside), even across restarts.
 */

/* SL.ACQUIRE key max_in_flight ttl_ms [WEIGHT w] */
static void sl_cmd_acquire(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    int64_t max, ttl_ms, weight = 1, ttl;
    if (sl_arg_is(&argv[2], "POLICY") || (argc >= 5 && sl_arg_is(&argv[4], "ADAPTIVE"))) {
        sl_cmd_acquire_adaptive(c, argc, argv);
        return;
    }
    if (!sl_arg_int(c, &argv[2], &max) || !sl_arg_int(c, &argv[3], &ttl_ms))
        return;
    if (argc == 6 && sl_arg_is(&argv[4], "WEIGHT")) {
        if (!sl_arg_int(c, &argv[5], &weight))
            return;
        if (weight < 1) {
            sl_reply_errorf(c, "weight must be a positive integer");
            return;
        }
    } else if (argc == 8 && sl_arg_is(&argv[4], "WEIGHT") && sl_arg_is(&argv[6], "WEIGHT")) {
        sl_reply_errorf(c, "syntax error: option 'WEIGHT' is given twice");
        return;
    } else if (argc != 4) {
        sl_reply_errorf(c, "syntax error: SL.ACQUIRE key max_in_flight ttl_ms [WEIGHT weight]");
        return;
    }
    if (max < 1 || max > SL_CONCURRENCY_MAX) {
        sl_reply_errorf(c, "max_in_flight must be between 1 and %d", SL_CONCURRENCY_MAX);
        return;
    }
    if (ttl_ms < 1 || __builtin_mul_overflow(ttl_ms, INT64_C(1000000), &ttl) || ttl > SL_SPAN_MAX) {
        sl_reply_errorf(c, "ttl_ms must be a positive number of milliseconds of at most %lld",
                        (long long)(SL_SPAN_MAX / 1000000));
        return;
    }
    /* A null says "full now, try later"; a weight that no number of
     * releases would make room for is the caller's error, not a wait. */
    if (weight > max) {
        sl_reply_errorf(c, "weight %lld exceeds max_in_flight %lld", (long long)weight,
                        (long long)max);
        return;
    }
    const sl_limit *l;
    int rc = sl_limit_get(c, SL_CONCURRENCY, max, ttl, 0, &l);
    if (rc != SL_OK) {
        sl_reply_status(c, rc);
        return;
    }
    sl_check k;
    sl_take_item item = {argv[1].ptr, argv[1].len, l, weight};
    sl_check_init(&k, SL_OP_ACQUIRE, SL_RENDER_LEASE, 1, &item);
    k.lim[0] = l;
    k.req.lease_id = sl_lease_new_id(c);
    k.lease_max = max;
    sl_check_submit(c, &k);
}

/* SL.RELEASE key lease_id */
static void sl_cmd_release(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    uint64_t id, max;
    const sl_resp_slice *t = &argv[2];
    uint32_t tail;
    if (argc > 3 || (sl_lease_text_parse(t->ptr, t->len, &id, &tail) &&
                     (tail & SL_LEASE_ADAPTIVE_BIT))) {
        sl_cmd_release_adaptive(c, argc, argv);
        return;
    }
    if (t->len != SL_LEASE_TEXT || !sl_hex_u64(t->ptr, 16, &id) || !sl_hex_u64(t->ptr + 16, 8, &max) ||
        id == 0 || max < 1 || max > SL_CONCURRENCY_MAX) {
        R->integer(c->sink, 0); /* not a lease id this server hands out */
        return;
    }
    /* The TTL does not matter to a release; any valid one builds the shape. */
    const sl_limit *l;
    int rc = sl_limit_get(c, SL_CONCURRENCY, (int64_t)max, 1, 0, &l);
    if (rc != SL_OK) {
        sl_reply_status(c, rc);
        return;
    }
    sl_check k;
    sl_take_item item = {argv[1].ptr, argv[1].len, l, 0};
    sl_check_init(&k, SL_OP_RELEASE, SL_RENDER_COUNT, 1, &item);
    k.lim[0] = l;
    k.req.lease_id = id;
    sl_check_submit(c, &k);
}

/* sl_check_policy for a command: replies its errors itself and returns
 * false (the ...OrReply pattern of the sl_arg_* helpers). */
static bool sl_policy_check_or_reply(sl_cmd_ctx *c, sl_check *k, const sl_policy *p,
                                     const sl_resp_slice *tier, const sl_resp_slice *key,
                                     int64_t cost, int64_t tokens, char *keys, size_t cap,
                                     sl_take_item items[SL_TAKE_MANY_MAX])
{
    int n;
    if (p->plans_redis && c->plan_tier && !(tier && tier->len)) {
        /* The face reads the plans hash itself (the module). */
        int t = c->plan_tier(c, p, key->ptr, key->len);
        if (t == -2) {
            sl_reply_errorf(c, "policy '%s' reads its plans from the key '%.64s', which holds "
                               "another type than a hash", p->name, p->plans_redis);
            return false;
        }
        n = sl_check_policy_at(k, c->config, p, t, key->ptr, key->len, cost, tokens, keys, cap,
                               items);
    } else {
        n = sl_check_policy(k, c->config, p, tier ? tier->ptr : NULL, tier ? tier->len : 0,
                            key->ptr, key->len, cost, tokens, keys, cap, items);
    }
    if (n == -3) {
        char hint[SL_POLICY_KEY_MAX * 2 + 200];
        sl_policy_key_hint(p, hint, sizeof hint);
        sl_reply_errorf(c, "%s", hint);
    } else if (n == -2)
        sl_reply_errorf(c, "policy '%s' takes each key's tier from its plans %s: a request "
                           "cannot name one", p->name, p->plans_redis ? "hash" : "file");
    else if (n < 0)
        sl_reply_errorf(c, "unknown tier '%.*s' for policy '%s'",
                        (int)(tier->len > 64 ? 64 : tier->len), tier->ptr, p->name);
    else if (n == 0)
        sl_reply_status(c, SL_ERR_KEY);
    return n > 0;
}

/* A policy command's options from argv[from], each once: the first nopts
 * of COST, TOKENS, TIER and TTL; else the error is replied. */
typedef struct sl_policy_opts {
    int64_t cost, tokens, ttl_ms;
    bool has_cost, has_tokens, has_ttl;
    const sl_resp_slice *tier;
} sl_policy_opts;

static bool sl_policy_opts_parse(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv, int from,
                                 int nopts, const char *usage, sl_policy_opts *o)
{
    static const char *const names[] = {"COST", "TOKENS", "TIER", "TTL"};
    for (int i = from; i < argc; i += 2) {
        int which = -1;
        for (int j = 0; j < nopts; j++)
            if (sl_arg_is(&argv[i], names[j]))
                which = j;
        if (which < 0 || i + 1 >= argc) {
            if (which < 0)
                sl_reply_errorf(c, "syntax error: unknown option '%.*s' (%s)",
                                (int)(argv[i].len > 32 ? 32 : argv[i].len), argv[i].ptr, usage);
            else
                sl_reply_errorf(c, "syntax error: %s", usage);
            return false;
        }
        bool *seen[] = {&o->has_cost, &o->has_tokens, NULL, &o->has_ttl};
        int64_t *value[] = {&o->cost, &o->tokens, NULL, &o->ttl_ms};
        if (which == 2 ? o->tier != NULL : *seen[which]) {
            sl_reply_errorf(c, "syntax error: option '%s' is given twice", names[which]);
            return false;
        }
        if (which == 2) {
            o->tier = &argv[i + 1];
            continue;
        }
        *seen[which] = true;
        if (!sl_arg_int(c, &argv[i + 1], value[which]))
            return false;
    }
    if (o->cost < 0) {
        sl_reply_status(c, SL_ERR_COST);
        return false;
    }
    if (o->tokens < 0) {
        sl_reply_errorf(c, "tokens must be a non-negative integer");
        return false;
    }
    return true;
}

static const sl_policy *sl_policy_or_reply(sl_cmd_ctx *c, const sl_resp_slice *name)
{
    const sl_policy *p = sl_config_policy(c->config, name->ptr, name->len);
    if (!p)
        sl_reply_errorf(c, "unknown policy '%.*s'", (int)(name->len > 64 ? 64 : name->len),
                        name->ptr);
    return p;
}

/* SL.POLICY policy key [COST cost] [TOKENS tokens] [TIER tier] */
static void sl_cmd_policy(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    static const char usage[] = "SL.POLICY policy key [COST cost] [TOKENS tokens] [TIER tier]";
    const sl_policy *p = sl_policy_or_reply(c, &argv[1]);
    sl_policy_opts o = {.cost = 1};
    if (!p || !sl_policy_opts_parse(c, argc, argv, 3, 3, usage, &o))
        return;
    char keys[SL_POLICY_KEYS_ROOM];
    sl_take_item items[SL_TAKE_MANY_MAX];
    sl_check k;
    if (sl_policy_check_or_reply(c, &k, p, o.tier, &argv[2], o.cost, o.tokens, keys, sizeof keys,
                                 items))
        sl_check_submit(c, &k);
}

/* SL.RESERVE policy key [COST cost] [TOKENS tokens] [TIER tier] [TTL ms]:
 * SL.POLICY's take of the estimates, and a reservation to settle them by
 * (reserve.h). */
static void sl_cmd_reserve(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    static const char usage[] =
        "SL.RESERVE policy key [COST cost] [TOKENS tokens] [TIER tier] [TTL ms]";
    const sl_policy *p = sl_policy_or_reply(c, &argv[1]);
    sl_policy_opts o = {.cost = 1, .ttl_ms = SL_RESERVE_TTL_DEFAULT_MS};
    if (!p || !sl_policy_opts_parse(c, argc, argv, 3, 4, usage, &o))
        return;
    char keys[SL_POLICY_KEYS_ROOM];
    sl_take_item items[SL_TAKE_MANY_MAX];
    sl_check k;
    if (!sl_policy_check_or_reply(c, &k, p, o.tier, &argv[2], o.cost, o.tokens, keys,
                                  sizeof keys, items))
        return;
    char err[256];
    if (sl_reserve_prepare(c, &k, p, o.tier ? o.tier->ptr : NULL, o.tier ? o.tier->len : 0,
                           argv[2].ptr, argv[2].len, o.cost, o.tokens, o.ttl_ms, err,
                           sizeof err)) {
        sl_reply_errorf(c, "%s", err);
        return;
    }
    sl_check_submit(c, &k);
}

/* SL.SETTLE reservation [COST cost] [TOKENS tokens]: the actual amounts
 * (those not given: the estimate's). */
static void sl_cmd_settle(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    static const char usage[] = "SL.SETTLE reservation [COST cost] [TOKENS tokens]";
    sl_policy_opts o = {0};
    if (!sl_policy_opts_parse(c, argc, argv, 2, 2, usage, &o))
        return;
    sl_check k;
    char err[256];
    if (sl_settle_prepare(c, &k, argv[1].ptr, argv[1].len, o.has_cost ? &o.cost : NULL,
                          o.has_tokens ? &o.tokens : NULL, err, sizeof err) != 0) {
        sl_reply_errorf(c, "%s", err);
        return;
    }
    sl_check_submit(c, &k);
}

/* SL.USAGE key POLICY policy [TIER tier]: what each limit of the policy has
 * used in its current period and has left, consuming nothing. */
static void sl_cmd_usage(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    static const char usage[] = "SL.USAGE key POLICY policy [TIER tier]";
    const sl_resp_slice *name = NULL, *tier = NULL;
    for (int i = 2; i < argc; i += 2) {
        bool is_policy = sl_arg_is(&argv[i], "POLICY"), is_tier = sl_arg_is(&argv[i], "TIER");
        if (i + 1 >= argc || (!is_policy && !is_tier)) {
            sl_reply_errorf(c, "syntax error: %s", usage);
            return;
        }
        if ((is_policy && name) || (is_tier && tier)) {
            sl_reply_errorf(c, "syntax error: option '%s' is given twice",
                            is_policy ? "POLICY" : "TIER");
            return;
        }
        *(is_policy ? &name : &tier) = &argv[i + 1];
    }
    if (!name) {
        sl_reply_errorf(c, "syntax error: %s (the limits are a policy's)", usage);
        return;
    }
    const sl_policy *p = sl_config_policy(c->config, name->ptr, name->len);
    if (!p) {
        sl_reply_errorf(c, "unknown policy '%.*s'", (int)(name->len > 64 ? 64 : name->len),
                        name->ptr);
        return;
    }
    char keys[SL_POLICY_KEYS_ROOM];
    sl_take_item items[SL_TAKE_MANY_MAX];
    sl_check k;
    if (!sl_policy_check_or_reply(c, &k, p, tier, &argv[1], 0, 0, keys, sizeof keys, items))
        return;
    k.req.op = SL_OP_PEEK;
    k.counted = false;
    k.render = SL_RENDER_USAGE;
    sl_check_submit(c, &k);
}

/*
 * SL.DECIDE op lease numkeys key [key ...] [group ...]: the backend's
 * interface (src/backend/backend.h) as one command, for sluiced's central
 * store (--store redis://): limits given as the library builds them,
 * answers in nanoseconds, so that a decision made in Redis reads exactly as
 * one made in memory. docs/commands.md has the grammar.
 */
#define SL_DECIDE_GROUP 8 /* algorithm a b c cost months utc_offset_ns flags */
/* A group's flags: bit 0 marks a carried limit, bits 8 to 12 hold the reset
 * day of windows of months (0: the first), so that a group without one reads
 * as it always has. */
#define SL_DECIDE_CARRY INT64_C(1)
#define SL_DECIDE_DAY_SHIFT 8
#define SL_DECIDE_FLAGS (SL_DECIDE_CARRY | INT64_C(31) << SL_DECIDE_DAY_SHIFT)

/* One group's limit, built into *l (a copy: the cache may move on). */
static bool sl_decide_limit(sl_cmd_ctx *c, const sl_resp_slice *g, sl_limit *l, int64_t *cost)
{
    int64_t v[7];
    for (int i = 0; i < 7; i++)
        if (!sl_arg_int(c, &g[1 + i], &v[i]))
            return false;
    int64_t kind;
    sl_algorithm algo;
    if (sl_arg_is(&g[0], "cell")) {
        kind = -1;
    } else if (sl_algorithm_parse(g[0].ptr, g[0].len, &algo) == SL_OK) {
        kind = algo;
    } else {
        sl_reply_errorf(c, "unknown algorithm '%.*s'", (int)(g[0].len > 32 ? 32 : g[0].len),
                        g[0].ptr);
        return false;
    }
    if (v[3] < 0) {
        sl_reply_status(c, SL_ERR_COST);
        return false;
    }
    int64_t reset_day = (v[6] & SL_DECIDE_FLAGS) >> SL_DECIDE_DAY_SHIFT;
    if ((v[6] & ~SL_DECIDE_FLAGS) != 0 ||
        (kind < 0 && (v[4] != 0 || v[5] != 0 || reset_day != 0))) {
        sl_reply_errorf(c, "syntax error: a group's months, offset and flags are out of range");
        return false;
    }
    const sl_limit *built;
    int rc = sl_limit_cached(c->limit_cache, kind, v[0], v[1], v[2], v[4], reset_day, v[5],
                             &built);
    if (rc == SL_OK) {
        *l = *built;
        if (v[6] & SL_DECIDE_CARRY)
            rc = sl_limit_carry(l);
    }
    if (rc != SL_OK) {
        sl_reply_status(c, rc);
        return false;
    }
    *cost = v[3];
    return true;
}

static void sl_cmd_decide(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    static const char *const ops[] = {"TAKE",    "PEEK",   "RESET", "ACQUIRE",
                                      "RELEASE", "REFUND", "CHARGE"};
    static const sl_op op_of[] = {SL_OP_TAKE,    SL_OP_PEEK,   SL_OP_RESET, SL_OP_ACQUIRE,
                                  SL_OP_RELEASE, SL_OP_REFUND, SL_OP_CHARGE};
    int o = 0;
    while (o < 7 && !sl_arg_is(&argv[1], ops[o]))
        o++;
    if (o == 7) {
        sl_reply_errorf(c, "syntax error: SL.DECIDE's op is TAKE, PEEK, RESET, ACQUIRE, "
                           "RELEASE, REFUND or CHARGE");
        return;
    }
    sl_op op = op_of[o];
    uint64_t lease = 0;
    bool leased = op == SL_OP_ACQUIRE || op == SL_OP_RELEASE;
    if (leased ? argv[2].len != 16 || !sl_hex_u64(argv[2].ptr, 16, &lease) || lease == 0
               : !sl_arg_is(&argv[2], "0")) {
        sl_reply_errorf(c, "syntax error: the lease is 16 hex digits for ACQUIRE and RELEASE, "
                           "else 0");
        return;
    }
    int64_t n;
    if (!sl_arg_int(c, &argv[3], &n))
        return;
    int64_t max = leased || op == SL_OP_REFUND || op == SL_OP_CHARGE ? 1 : SL_TAKE_MANY_MAX;
    if (n < 1 || n > max) {
        sl_reply_errorf(c, "numkeys must be between 1 and %lld", (long long)max);
        return;
    }
    int64_t groups = op == SL_OP_RESET ? 0 : n;
    if (argc != 4 + n + groups * SL_DECIDE_GROUP) {
        sl_reply_errorf(c, "wrong number of arguments for 'sl.decide' command");
        return;
    }
    sl_check k;
    sl_take_item items[SL_TAKE_MANY_MAX];
    for (int j = 0; j < n; j++) {
        items[j] = (sl_take_item){argv[4 + j].ptr, argv[4 + j].len, NULL, 0};
        if (op == SL_OP_RESET)
            continue;
        const sl_resp_slice *g = &argv[4 + n + j * SL_DECIDE_GROUP];
        if (!sl_decide_limit(c, g, &k.own[j], &items[j].cost))
            return;
        if ((k.own[j].algorithm == SL_CONCURRENCY) != leased) {
            sl_reply_errorf(c, "syntax error: ACQUIRE and RELEASE take a concurrency limit, "
                               "the other ops any other");
            return;
        }
        if (op == SL_OP_ACQUIRE && (items[j].cost < 1 || items[j].cost > k.own[j].limit)) {
            sl_reply_errorf(c, "weight must be between 1 and max_in_flight");
            return;
        }
        items[j].limit = k.lim[j] = &k.own[j];
    }
    sl_check_init(&k, op, SL_RENDER_DECIDE, (size_t)n, items);
    k.req.lease_id = lease;
    sl_check_submit(c, &k);
}

const sl_command sl_rate_commands[] = {
    {"cl.throttle", -5, SL_CMD_WRITE | SL_CMD_FAST | SL_CMD_STOREKEYS, 1, 1, 1, sl_cmd_throttle,
     "Takes from a GCRA limit as redis-cell does", "key max_burst count_per_period period [quantity]",
     0},
    {"sl.take", -4, SL_CMD_WRITE | SL_CMD_FAST | SL_CMD_STOREKEYS, 1, 1, 1, sl_cmd_take,
     "Takes from an ad-hoc limit",
     "key limit period [BURST burst] [COST cost] [ALGORITHM name] [UTCOFFSET offset] "
     "[RESETDAY day]",
     0},
    {"sl.peek", -4, SL_CMD_READONLY | SL_CMD_FAST | SL_CMD_STOREKEYS, 1, 1, 1, sl_cmd_peek,
     "Answers what SL.TAKE would, consuming nothing",
     "key limit period [BURST burst] [COST cost] [ALGORITHM name] [UTCOFFSET offset] "
     "[RESETDAY day]",
     0},
    {"sl.takemany", -6, SL_CMD_WRITE | SL_CMD_FAST | SL_CMD_STOREKEYS, 0, 0, 0, sl_cmd_takemany,
     "Takes from up to 8 limits, all or nothing",
     "numkeys key [key ...] LIMIT limit period [BURST b] [COST c] [ALGORITHM a] [UTCOFFSET o] "
     "[RESETDAY d] [LIMIT ...]",
     1},
    {"sl.policy", -3, SL_CMD_WRITE | SL_CMD_FAST, 2, 2, 1, sl_cmd_policy,
     "Takes from a policy's limits of the config file, all or nothing",
     "policy key [COST cost] [TOKENS tokens] [TIER tier]", 0},
    {"sl.reserve", -3, SL_CMD_WRITE | SL_CMD_FAST, 2, 2, 1, sl_cmd_reserve,
     "Takes a request's estimated costs under a policy, to be settled after the fact",
     "policy key [COST cost] [TOKENS tokens] [TIER tier] [TTL ms]", 0},
    {"sl.settle", -2, SL_CMD_WRITE | SL_CMD_FAST, 0, 0, 0, sl_cmd_settle,
     "Settles a reservation at the actual costs: gives back or charges the difference",
     "reservation [COST cost] [TOKENS tokens]", 0},
    {"sl.usage", -4, SL_CMD_READONLY | SL_CMD_FAST, 0, 0, 0, sl_cmd_usage,
     "What each limit of a policy has used in its period and has left, consuming nothing",
     "key POLICY policy [TIER tier]", 0},
    {"sl.reset", -2, SL_CMD_WRITE | SL_CMD_FAST | SL_CMD_STOREKEYS, 1, -1, 1, sl_cmd_reset,
     "Forgets keys: their next take starts afresh", "key [key ...]", 0},
    {"sl.acquire", -4, SL_CMD_WRITE | SL_CMD_FAST | SL_CMD_STOREKEYS, 1, 1, 1, sl_cmd_acquire,
     "Acquires a concurrency lease, of a fixed or an adaptive limit",
     "key max_in_flight ttl_ms [WEIGHT weight] | key max_in_flight ttl_ms ADAPTIVE [ESTIMATOR e] "
     "[MIN n] [INITIAL n] [PRIORITY p] | key POLICY name [PRIORITY p] [PARTITION part]",
     0},
    {"sl.release", -3, SL_CMD_WRITE | SL_CMD_FAST | SL_CMD_STOREKEYS, 1, 1, 1, sl_cmd_release,
     "Releases a concurrency lease; an adaptive one with its latency and outcome",
     "key lease_id [POLICY name] [LATENCY ms] [OUTCOME success|dropped|ignored]", 0},
    {"sl.limit", -2, SL_CMD_READONLY | SL_CMD_FAST, 1, 1, 1, sl_cmd_limit,
     "What a key's adaptive concurrency limit holds: its estimate, in flight, refusals",
     "key [POLICY name]", 0},
    {"sl.decide", -5, SL_CMD_WRITE | SL_CMD_FAST | SL_CMD_STOREKEYS, 0, 0, 0, sl_cmd_decide,
     "Decides for sluiced's central store: limits as built, answers in nanoseconds",
     "op lease numkeys key [key ...] [algorithm a b c cost months utc_offset_ns flags ...]", 3},
    {"", 0, 0, 0, 0, 0, NULL, NULL, NULL, 0},
};

/* ---- the RESP sink ---- */

static void sk_integer(void *s, int64_t v) { sl_resp_add_int(s, v); }
static void sk_bulk(void *s, const char *p, size_t len) { sl_resp_add_bulk(s, p, len); }
static void sk_simple(void *s, const char *str) { sl_resp_add_simple(s, str, strlen(str)); }
static void sk_null(void *s) { sl_resp_add_null(s); }
static void sk_array(void *s, size_t n) { sl_resp_add_array(s, n); }
static void sk_integers(void *s, const int64_t *v, size_t n) { sl_resp_add_int_array(s, v, n); }
static void sk_map(void *s, size_t n) { sl_resp_add_map(s, n); }
static void sk_error(void *s, const char *msg) { sl_resp_add_errorf(s, "-%s", msg); }

const sl_reply_ops sl_resp_reply_sink = {
    .integer = sk_integer, .bulk = sk_bulk,         .simple = sk_simple, .null = sk_null,
    .array = sk_array,     .integers = sk_integers, .map = sk_map,       .error = sk_error,
};

/* The eight bytes of x with 'A'..'Z' made lowercase, all at once: a byte's
 * low seven bits plus 0x80 - 'A' reach 0x80 from 'A' up, plus 0x7f - 'Z'
 * from past 'Z' up; neither sum carries into the next byte. Bytes with the
 * high bit set are left alone. */
static inline uint64_t sl_ascii_lower8(uint64_t x)
{
    const uint64_t ones = UINT64_C(0x0101010101010101), high = ones * 0x80;
    uint64_t low7 = x & ~high;
    uint64_t from_a = low7 + ones * (0x80 - 'A'), past_z = low7 + ones * (0x7f - 'Z');
    uint64_t upper = from_a & ~past_z & ~x & high;
    return x | upper >> 2; /* 0x80 >> 2 == 0x20, the case bit */
}

const sl_command *sl_command_find(const sl_command *table, const char *name, size_t len)
{
    if (len == 0 || len >= SL_CMD_NAME_MAX)
        return NULL;
    /* The name folded and NUL-padded as the table's are: two words. */
    uint64_t w[2] = {0, 0};
    memcpy(w, name, len);
    w[0] = sl_ascii_lower8(w[0]);
    w[1] = sl_ascii_lower8(w[1]);
    for (const sl_command *cmd = table; cmd->name[0]; cmd++) {
        uint64_t n[2];
        memcpy(n, cmd->name, sizeof n);
        /* Equal words, and the entry is len bytes long: a NUL inside
         * `name` would otherwise match the entry's padding. */
        if (n[0] == w[0] && n[1] == w[1] && cmd->name[len - 1] != '\0')
            return cmd;
    }
    return NULL;
}

/* The positions of the key spec, or the numkeys argument's count for a
 * command with movable keys. */
size_t sl_command_store_keys(const sl_command *cmd, size_t argc, const sl_resp_slice *argv,
                             const void **keys, size_t *lens, size_t cap)
{
    size_t first = (size_t)cmd->first_key, last, step = (size_t)cmd->key_step, n = 0;
    if (!(cmd->flags & SL_CMD_STOREKEYS))
        return 0;
    if (cmd->numkeys_at > 0) {
        if ((size_t)cmd->numkeys_at >= argc)
            return 0;
        const sl_resp_slice *a = &argv[cmd->numkeys_at];
        size_t count = 0;
        for (size_t i = 0; i < a->len && i < 3 && a->ptr[i] >= '0' && a->ptr[i] <= '9'; i++)
            count = count * 10 + (size_t)(a->ptr[i] - '0');
        first = (size_t)cmd->numkeys_at + 1;
        last = first + count - 1;
        step = 1;
    } else if (cmd->last_key < 0) {
        if ((size_t)-cmd->last_key > argc)
            return 0;
        last = argc - (size_t)-cmd->last_key;
    } else {
        last = (size_t)cmd->last_key;
    }
    if (first == 0 || step == 0)
        return 0;
    for (size_t i = first; i <= last && i < argc && n < cap; i += step) {
        keys[n] = argv[i].ptr;
        lens[n++] = argv[i].len;
    }
    return n;
}

void sl_command_call(const sl_command *cmd, sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    if (!sl_command_arity_ok(cmd, argc)) {
        sl_reply_errorf(c, "wrong number of arguments for '%s' command", cmd->name);
        return;
    }
    cmd->fn(c, argc, argv);
}
