/*
 * top.c: sluiced's top keys (top.h, docs/observability.md).
 *
 * Every counted decision (RESP, HTTP's checks and forward-auth, through
 * commands.c's sl_on_decided) adds its key to the summary of its policy and
 * kind on the worker that decided it. A policy's summaries are made at its
 * first decision on the worker; a table whose name is not the policy's at
 * that index any more (a reload moved the policies) starts afresh.
 *
 * A reader (SL.TOP, GET /v1/top) merges, policy by policy, every worker's
 * summary of the kind asked into one summary with room for all their keys
 * (threads x 2 generations x k counters), which loses nothing: the bounds
 * of sl_topk hold for the server as a whole, N being every worker's
 * decisions of that policy and kind over the window. It lists the largest
 * counts of each policy, sorts them together, and peeks each key's
 * remaining budget when the store answers without a round trip.
 */
#include "server/top.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/parse.h"
#include "policy/config.h"
#include "server/server.h"

void sl_top_lock_wait(sl_top *t)
{
    do
        while (atomic_load_explicit(&t->lock, memory_order_relaxed))
            sched_yield();
    while (atomic_exchange_explicit(&t->lock, true, memory_order_acquire));
}

sl_top *sl_top_new(size_t k, int64_t window_ns, uint64_t seed,
                   const atomic_uint_fast64_t *epoch, uint64_t exact_rate, uint64_t draws)
{
    size_t bytes = (sizeof(sl_top) + 63) / 64 * 64;
    sl_top *t = sl_alloc_should_fail() ? NULL : aligned_alloc(64, bytes);
    if (!t)
        return NULL;
    memset(t, 0, bytes);
    atomic_init(&t->lock, false);
    t->k = k;
    t->window_ns = window_ns;
    t->seed = seed;
    t->epoch = epoch;
    t->rng = draws;
    t->exact_rate = exact_rate;
    t->left = SL_TOP_RATE_SPAN;
    return t;
}

static void sl_top_table_free(sl_top_table *tb)
{
    if (!tb)
        return;
    sl_topk_free(tb->kind[0]);
    sl_topk_free(tb->kind[1]);
    sl_free(tb);
}

void sl_top_free(sl_top *t)
{
    if (!t)
        return;
    for (int i = 0; i <= SL_TOP_POLICIES; i++)
        sl_top_table_free(t->table[i]);
    free(t);
}

/* The table of slot i for the policy called name: made at its first use,
 * emptied when it counted another policy (a reload). NULL when out of
 * memory: the decision is not counted. Under the lock. own: name is the
 * config's string (not a deferred check's copy), whose address may stand
 * for the name for the rest of the epoch. */
static sl_top_table *sl_top_table_for(sl_top *t, int i, const char *name, bool own)
{
    sl_top_table *tb = t->table[i];
    uint64_t epoch = atomic_load_explicit(t->epoch, memory_order_relaxed);
    if (tb && strcmp(tb->name, name) == 0) {
        if (own) {
            tb->name_ptr = name;
            tb->epoch = epoch;
        }
        return tb;
    }
    if (!tb) {
        sl_topk_config cfg = {.k = t->k, .window_ns = t->window_ns, .seed = t->seed};
        tb = sl_calloc(1, sizeof *tb);
        if (!tb || sl_topk_new(&cfg, &tb->kind[0]) != SL_OK ||
            sl_topk_new(&cfg, &tb->kind[1]) != SL_OK) {
            sl_top_table_free(tb);
            return NULL;
        }
        t->table[i] = tb;
        t->bytes += sizeof *tb + 2 * sl_topk_bytes(t->k, t->window_ns);
    } else {
        sl_topk_clear(tb->kind[0]);
        sl_topk_clear(tb->kind[1]);
    }
    snprintf(tb->name, sizeof tb->name, "%s", name);
    tb->name_ptr = own ? name : NULL;
    tb->epoch = epoch;
    return tb;
}

void sl_top_adapt(sl_top *t, int64_t now)
{
    int64_t span = now - t->since;
    t->since = now;
    t->left = SL_TOP_RATE_SPAN;
    if (t->exact_rate == 0 || span <= 0) {
        /* Every decision; or a span that took no time (the clock is read
         * once per batch): the rate is past measuring, keep the step. */
        if (t->exact_rate == 0)
            t->shift = 0;
        else if (t->shift < 20)
            t->shift++;
        return;
    }
    /* The rate a second: SL_TOP_RATE_SPAN * 1e9 / span. */
    uint64_t rate = (uint64_t)SL_TOP_RATE_SPAN * 1000000000u / (uint64_t)span;
    unsigned shift = 0;
    while (shift < 20 && (rate >> shift) > t->exact_rate)
        shift++;
    t->shift = shift;
}

void sl_top_record_slow(sl_top *t, unsigned i, const sl_check *k, bool refused, int64_t now)
{
    const char *name = i == 0 || !k->name ? "" : k->name;
    sl_top_table *tb = sl_top_table_for(t, (int)i, name, name != k->name_buf);
    if (tb)
        sl_topk_add(tb->kind[refused], k->given_key, k->given_key_len, UINT64_C(1) << t->shift, now);
    sl_top_unlock(t);
}

/* ---- reading: merge, list, peek ---- */

static int sl_top_row_cmp(const void *a, const void *b)
{
    const sl_top_row *x = a, *y = b;
    if (x->e.count != y->e.count)
        return x->e.count > y->e.count ? -1 : 1;
    int c = strcmp(x->policy ? x->policy->name : "", y->policy ? y->policy->name : "");
    if (c)
        return c;
    size_t lx = x->e.len < SL_TOPK_KEY_MAX ? x->e.len : SL_TOPK_KEY_MAX;
    size_t ly = y->e.len < SL_TOPK_KEY_MAX ? y->e.len : SL_TOPK_KEY_MAX;
    c = memcmp(x->e.key, y->e.key, lx < ly ? lx : ly);
    if (c)
        return c;
    return x->e.len < y->e.len ? -1 : x->e.len > y->e.len;
}

/*
 * The key's remaining budget now under policy p, as SL.POLICY would show
 * it (the limit that admits the fewest more requests): a peek of nothing,
 * asked of the store only when it answers in the call (the in-memory
 * store). False when it cannot be told.
 */
static bool sl_top_remaining(sl_cmd_ctx *c, const sl_policy *p, const sl_topk_entry *e,
                             int64_t *out)
{
    if (c->be->defers || e->len > SL_TOPK_KEY_MAX)
        return false;
    sl_check k;
    sl_take_item items[SL_TAKE_MANY_MAX];
    char keys[SL_POLICY_KEYS_ROOM];
    int n = sl_check_policy(&k, c->config, p, NULL, 0, (const char *)e->key, e->len, 0, 0, keys,
                            sizeof keys, items);
    if (n <= 0)
        return false;
    k.req.op = SL_OP_PEEK;
    k.counted = false;
    if (sl_backend_submit(c->be, c->bw, &k.req) != SL_OK || k.req.rc != SL_OK)
        return false;
    const sl_decision *dp[SL_TAKE_MANY_MAX];
    int64_t one[SL_TAKE_MANY_MAX];
    for (int i = 0; i < n; i++) {
        dp[i] = &k.d[i];
        one[i] = 1;
    }
    size_t b = sl_http_binding(dp, one, (size_t)n, -1);
    *out = k.d[b].remaining < 0 ? 0 : k.d[b].remaining;
    return true;
}

sl_status sl_top_answer(sl_cmd_ctx *c, sl_server *srv, const sl_top_query *q, int64_t now,
                                        sl_top_row **rows, size_t *n)
{
    const sl_config *cfg = c->config;
    size_t k = srv->cfg.top_keys;
    size_t npol = cfg ? cfg->npolicies : 0;
    int last = (int)(npol < SL_TOP_POLICIES ? npol : SL_TOP_POLICIES);
    int from = q->slot < 0 ? 0 : q->slot, to = q->slot < 0 ? last : q->slot;
    size_t cap = (size_t)(to - from + 1) * q->count;
    sl_top_row *out = sl_calloc(cap, sizeof *out);
    sl_topk_entry *list = sl_malloc(q->count * sizeof *list);
    sl_topk *acc = NULL;
    sl_topk_config acfg = {.k = (size_t)srv->nworkers * 2 * k, .seed = srv->workers[0].top->seed};
    sl_status rc = out && list ? sl_topk_new(&acfg, &acc) : SL_ERR_NOMEM;
    size_t m = 0;
    for (int i = from; rc == SL_OK && i <= to; i++) {
        const sl_policy *p = i > 0 ? &cfg->policies[i - 1] : NULL;
        const char *name = p ? p->name : "";
        sl_topk_clear(acc);
        for (int w = 0; rc == SL_OK && w < srv->nworkers; w++) {
            sl_top *t = srv->workers[w].top;
            sl_top_lock(t);
            sl_top_table *tb = t->table[i];
            if (tb && strcmp(tb->name, name) == 0)
                rc = sl_topk_merge(acc, tb->kind[q->kind], now);
            sl_top_unlock(t);
        }
        size_t got = 0;
        sl_topk_stats st = {0};
        if (rc == SL_OK)
            rc = sl_topk_list(acc, now, list, q->count, &got);
        if (rc == SL_OK)
            rc = sl_topk_stats_get(acc, now, &st);
        for (size_t j = 0; j < got; j++)
            out[m++] = (sl_top_row){.policy = p, .e = list[j], .sample = st.max_n};
    }
    sl_topk_free(acc);
    sl_free(list);
    if (rc != SL_OK) {
        sl_free(out);
        return rc;
    }
    qsort(out, m, sizeof *out, sl_top_row_cmp);
    if (m > q->count)
        m = q->count;
    for (size_t j = 0; j < m; j++)
        if (out[j].policy)
            out[j].has_remaining = sl_top_remaining(c, out[j].policy, &out[j].e,
                                                    &out[j].remaining);
    *rows = out;
    *n = m;
    return SL_OK;
}

/* The table index of the policy called name (len bytes; "" the ad-hoc
 * limits): >= 0, or -1 for an unknown policy, -2 for one past the first
 * SL_TOP_POLICIES. */
static int sl_top_slot(const sl_config *cfg, const char *name, size_t len)
{
    if (len == 0)
        return 0;
    const sl_policy *p = sl_config_policy(cfg, name, len);
    if (!p)
        return -1;
    size_t i = (size_t)(p - cfg->policies);
    return i < SL_TOP_POLICIES ? (int)i + 1 : -2;
}

/* ---- SL.TOP ---- */

#define SL_TOP_USAGE "SL.TOP [POLICY name] [COUNT n] [REFUSED|ADMITTED]"

static void sl_top_kv(sl_cmd_ctx *c, const char *k, int64_t v)
{
    c->reply->bulk(c->sink, k, strlen(k));
    c->reply->integer(c->sink, v);
}

void sl_cmd_top(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv)
{
    sl_conn *conn = c->face;
    sl_server *srv = conn->w->srv;
    const sl_resp_slice *policy = NULL, *count = NULL, *kind = NULL;
    for (int i = 1; i < argc; i++) {
        const sl_resp_slice *a = &argv[i];
        bool pol = sl_arg_is(a, "POLICY"), cnt = sl_arg_is(a, "COUNT");
        if (pol || cnt) {
            if (i + 1 >= argc) {
                sl_reply_errorf(c, "syntax error: %s needs a value (%s)", pol ? "POLICY" : "COUNT",
                                SL_TOP_USAGE);
                return;
            }
            if (pol ? policy != NULL : count != NULL) {
                sl_reply_errorf(c, "syntax error: option '%s' is given twice",
                                pol ? "POLICY" : "COUNT");
                return;
            }
            *(pol ? &policy : &count) = &argv[++i];
        } else if (sl_arg_is(a, "REFUSED") || sl_arg_is(a, "ADMITTED")) {
            if (kind) {
                sl_reply_errorf(c, "syntax error: REFUSED or ADMITTED, once (%s)", SL_TOP_USAGE);
                return;
            }
            kind = a;
        } else {
            sl_reply_errorf(c, "syntax error: unknown option '%.*s' (%s)",
                            (int)(a->len > 32 ? 32 : a->len), a->ptr, SL_TOP_USAGE);
            return;
        }
    }
    if (srv->cfg.top_keys == 0) {
        sl_reply_errorf(c, "top keys are off: start sluiced with --top-keys N (N > 0)");
        return;
    }
    sl_top_query q = {.slot = -1,
                      .kind = kind && sl_arg_is(kind, "ADMITTED") ? SL_TOP_ADMITTED
                                                                  : SL_TOP_REFUSED,
                      .count = SL_TOP_COUNT(srv)};
    if (count) {
        int64_t v;
        if (!sl_arg_int(c, count, &v))
            return;
        if (v < 1 || (uint64_t)v > srv->cfg.top_keys) {
            sl_reply_errorf(c, "COUNT must be between 1 and %zu (--top-keys)",
                            srv->cfg.top_keys);
            return;
        }
        q.count = (size_t)v;
    }
    if (policy) {
        q.slot = sl_top_slot(c->config, policy->ptr, policy->len);
        int shown = (int)(policy->len > 64 ? 64 : policy->len);
        if (q.slot == -1) {
            sl_reply_errorf(c, "unknown policy '%.*s'", shown, policy->ptr);
            return;
        }
        if (q.slot == -2) {
            sl_reply_errorf(c, "policy '%.*s' is not one of the first %d policies, whose top "
                               "keys are kept",
                            shown, policy->ptr, SL_TOP_POLICIES);
            return;
        }
    }
    sl_top_row *rows;
    size_t n;
    if (sl_top_answer(c, srv, &q, conn->w->now, &rows, &n) != SL_OK) {
        sl_reply_errorf(c, "%s", sl_strerror(SL_ERR_NOMEM));
        return;
    }
    c->reply->array(c->sink, n);
    for (size_t i = 0; i < n; i++) {
        const sl_top_row *r = &rows[i];
        bool cut = r->e.len > SL_TOPK_KEY_MAX, sampled = r->sample > 1;
        const char *pname = r->policy ? r->policy->name : "";
        c->reply->map(c->sink, 5u + cut + sampled);
        c->reply->bulk(c->sink, "policy", 6);
        c->reply->bulk(c->sink, pname, strlen(pname));
        c->reply->bulk(c->sink, "key", 3);
        c->reply->bulk(c->sink, (const char *)r->e.key, cut ? SL_TOPK_KEY_MAX : r->e.len);
        sl_top_kv(c, "count", r->e.count > INT64_MAX ? INT64_MAX : (int64_t)r->e.count);
        sl_top_kv(c, "error", r->e.error > INT64_MAX ? INT64_MAX : (int64_t)r->e.error);
        c->reply->bulk(c->sink, "remaining", 9);
        if (r->has_remaining)
            c->reply->integer(c->sink, r->remaining);
        else
            c->reply->null(c->sink);
        if (cut)
            sl_top_kv(c, "truncated", 1);
        if (sampled)
            sl_top_kv(c, "sample", r->sample > INT64_MAX ? INT64_MAX : (int64_t)r->sample);
    }
    sl_free(rows);
}

/* ---- GET /v1/top ---- */

/* Appends len bytes as a JSON string: ", \ and the control bytes escaped,
 * UTF-8 as it is, each byte that is not UTF-8 as U+FFFD. */
static void sl_json_bytes(sl_buf *b, const unsigned char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    sl_buf_add(b, "\"", 1);
    for (size_t i = 0; i < len;) {
        unsigned char ch = s[i];
        if (ch == '"' || ch == '\\') {
            char e[2] = {'\\', (char)ch};
            sl_buf_add(b, e, 2);
            i++;
        } else if (ch < 0x20 || ch == 0x7f) {
            char u[6] = {'\\', 'u', '0', '0', hex[ch >> 4], hex[ch & 15]};
            sl_buf_add(b, u, sizeof u);
            i++;
        } else if (ch < 0x80) {
            sl_buf_add(b, &s[i], 1);
            i++;
        } else {
            /* A well-formed sequence (RFC 3629: no overlong forms, no
             * surrogates, nothing past U+10FFFF) passes whole. */
            size_t n = ch >= 0xf0 ? 4 : ch >= 0xe0 ? 3 : ch >= 0xc2 ? 2 : 0;
            bool ok = n > 0 && ch <= 0xf4 && i + n <= len;
            for (size_t j = 1; ok && j < n; j++)
                ok = (s[i + j] & 0xc0) == 0x80;
            if (ok && n == 3)
                ok = !(ch == 0xe0 && s[i + 1] < 0xa0) && !(ch == 0xed && s[i + 1] >= 0xa0);
            if (ok && n == 4)
                ok = !(ch == 0xf0 && s[i + 1] < 0x90) && !(ch == 0xf4 && s[i + 1] >= 0x90);
            if (ok) {
                sl_buf_add(b, &s[i], n);
                i += n;
            } else {
                sl_buf_add(b, "\xef\xbf\xbd", 3);
                i++;
            }
        }
    }
    sl_buf_add(b, "\"", 1);
}

static void sl_json_u64(sl_buf *b, uint64_t v)
{
    char t[24];
    int n = snprintf(t, sizeof t, "%llu", (unsigned long long)v);
    sl_buf_add(b, t, (size_t)n);
}

/* The parameters of /v1/top, each once; else the 400 is written. */
static bool sl_top_params(sl_conn *conn, const sl_http_request *r, bool keep, sl_top_query *q,
                          char *policy, long *plen)
{
    sl_server *srv = conn->w->srv;
    static const char *const names[] = {"policy", "count", "kind"};
    bool seen[3] = {false, false, false};
    size_t pos = 0;
    sl_http_slice name, value;
    char msg[160], field[32];
    while (sl_http_query_next(r->query.ptr, r->query.len, &pos, &name, &value)) {
        char nbuf[16], vbuf[SL_POLICY_NAME_MAX + 1];
        long nl = sl_http_percent_decode(name.ptr, name.len, nbuf, sizeof nbuf - 1);
        int which = -1;
        for (int i = 0; nl > 0 && i < 3; i++)
            if ((size_t)nl == strlen(names[i]) && memcmp(nbuf, names[i], (size_t)nl) == 0)
                which = i;
        if (which < 0) {
            /* Named as it was sent (at most 24 bytes, the unprintable as '?'). */
            size_t fl = name.len < 24 ? name.len : 24;
            for (size_t i = 0; i < fl; i++)
                field[i] = name.ptr[i] > ' ' && name.ptr[i] < 0x7f ? name.ptr[i] : '?';
            field[fl] = '\0';
            snprintf(msg, sizeof msg, "unknown parameter '%s': /v1/top takes policy, count and "
                                      "kind", field);
            sl_http_write_error(sl_conn_out(conn), 400, keep, msg, field);
            return false;
        }
        if (seen[which]) {
            snprintf(msg, sizeof msg, "%s is given twice", names[which]);
            sl_http_write_error(sl_conn_out(conn), 400, keep, msg, names[which]);
            return false;
        }
        seen[which] = true;
        long vl = sl_http_percent_decode(value.ptr, value.len, vbuf, sizeof vbuf - 1);
        if (which == 0) {
            if (vl < 0) {
                sl_http_write_error(sl_conn_out(conn), 400, keep,
                                    vl == SL_HTTP_TOO_LONG ? "policy must be a name of at most 64 "
                                                             "bytes"
                                                           : "policy is not percent-encoded",
                                    "policy");
                return false;
            }
            memcpy(policy, vbuf, (size_t)vl);
            *plen = vl;
        } else if (which == 1) {
            int64_t v;
            if (vl <= 0 || !sl_parse_i64(vbuf, (size_t)vl, SL_INT_NO_SIGN, &v) || v < 1 ||
                (uint64_t)v > srv->cfg.top_keys) {
                snprintf(msg, sizeof msg, "count must be an integer from 1 to %zu (--top-keys)",
                         srv->cfg.top_keys);
                sl_http_write_error(sl_conn_out(conn), 400, keep, msg, "count");
                return false;
            }
            q->count = (size_t)v;
        } else {
            bool refused = vl == 7 && memcmp(vbuf, "refused", 7) == 0;
            bool admitted = vl == 8 && memcmp(vbuf, "admitted", 8) == 0;
            if (!refused && !admitted) {
                sl_http_write_error(sl_conn_out(conn), 400, keep,
                                    "kind must be refused or admitted", "kind");
                return false;
            }
            q->kind = refused ? SL_TOP_REFUSED : SL_TOP_ADMITTED;
        }
    }
    return true;
}

void sl_http_top(sl_conn *conn, const sl_http_request *r, bool keep, bool head)
{
    sl_server *srv = conn->w->srv;
    if (srv->cfg.top_keys == 0) {
        sl_http_write_error(sl_conn_out(conn), 404, keep,
                            "top keys are off: start sluiced with --top-keys N (N > 0)", NULL);
        return;
    }
    sl_top_query q = {.slot = -1, .kind = SL_TOP_REFUSED,
                      .count = SL_TOP_COUNT(srv)};
    char policy[SL_POLICY_NAME_MAX + 1];
    long plen = -1; /* no policy: all of them */
    if (!sl_top_params(conn, r, keep, &q, policy, &plen))
        return;
    sl_cmd_ctx ctx;
    sl_conn_cmd_ctx(conn, &ctx);
    if (plen >= 0) {
        q.slot = sl_top_slot(ctx.config, policy, (size_t)plen);
        if (q.slot < 0) {
            char msg[SL_POLICY_NAME_MAX + 96];
            if (q.slot == -1)
                snprintf(msg, sizeof msg, "unknown policy '%.*s'", (int)plen, policy);
            else
                snprintf(msg, sizeof msg, "policy '%.*s' is not one of the first %d policies, "
                                          "whose top keys are kept",
                         (int)plen, policy, SL_TOP_POLICIES);
            sl_http_write_error(sl_conn_out(conn), 400, keep, msg, "policy");
            return;
        }
    }
    sl_top_row *rows;
    size_t n;
    if (sl_top_answer(&ctx, srv, &q, conn->w->now, &rows, &n) != SL_OK) {
        sl_http_write_error(sl_conn_out(conn), 503, keep, "out of memory", NULL);
        return;
    }
    sl_buf b;
    sl_buf_init(&b, 0, 0);
    sl_buf_add(&b, q.kind == SL_TOP_REFUSED ? "{\"kind\":\"refused\",\"policy\":"
                                            : "{\"kind\":\"admitted\",\"policy\":",
               q.kind == SL_TOP_REFUSED ? 27 : 28);
    if (plen >= 0)
        sl_json_bytes(&b, (const unsigned char *)policy, (size_t)plen);
    else
        sl_buf_add(&b, "null", 4);
    sl_buf_add(&b, ",\"window_s\":", 12);
    sl_json_u64(&b, (uint64_t)srv->cfg.top_window_s);
    sl_buf_add(&b, ",\"k\":", 5);
    sl_json_u64(&b, srv->cfg.top_keys);
    sl_buf_add(&b, ",\"keys\":[", 9);
    for (size_t i = 0; i < n; i++) {
        const sl_top_row *row = &rows[i];
        const char *pname = row->policy ? row->policy->name : "";
        bool cut = row->e.len > SL_TOPK_KEY_MAX;
        sl_buf_add(&b, i ? ",{\"policy\":" : "{\"policy\":", i ? 11 : 10);
        sl_json_bytes(&b, (const unsigned char *)pname, strlen(pname));
        sl_buf_add(&b, ",\"key\":", 7);
        sl_json_bytes(&b, row->e.key, cut ? SL_TOPK_KEY_MAX : row->e.len);
        sl_buf_add(&b, ",\"count\":", 9);
        sl_json_u64(&b, row->e.count);
        sl_buf_add(&b, ",\"error\":", 9);
        sl_json_u64(&b, row->e.error);
        sl_buf_add(&b, ",\"remaining\":", 13);
        if (row->has_remaining)
            sl_json_u64(&b, (uint64_t)row->remaining);
        else
            sl_buf_add(&b, "null", 4);
        if (cut)
            sl_buf_add(&b, ",\"truncated\":true", 17);
        if (row->sample > 1) {
            sl_buf_add(&b, ",\"sample\":", 10);
            sl_json_u64(&b, row->sample);
        }
        sl_buf_add(&b, "}", 1);
    }
    sl_buf_add(&b, "]}\n", 3);
    sl_free(rows);
    if (b.failed)
        sl_http_write_error(sl_conn_out(conn), 503, keep, "out of memory", NULL);
    else
        sl_http_write_response(sl_conn_out(conn), 200, keep, "application/json", NULL, b.data,
                               b.len, head);
    sl_buf_free(&b);
}

/* ---- /metrics ---- */

void sl_top_metrics(sl_server *srv, sl_buf *out)
{
    uint64_t bytes = 0;
    for (int w = 0; w < srv->nworkers; w++) {
        sl_top *t = srv->workers[w].top;
        if (!t)
            continue;
        sl_top_lock(t);
        bytes += (uint64_t)t->bytes;
        sl_top_unlock(t);
    }
    sl_out(out, "# HELP sluice_top_keys_bytes The memory the top keys' summaries hold (every "
                "worker's, every policy's).\n"
                "# TYPE sluice_top_keys_bytes gauge\nsluice_top_keys_bytes %llu\n",
           (unsigned long long)bytes);
}
