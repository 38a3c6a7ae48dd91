/*
 * ui.c: the live page's three paths (ui.h): GET /ui, GET /v1/stats and GET
 * /v1/simulate.
 *
 * The page is src/server/ui/page.html, embedded at build time
 * (generated/sluice_ui.c): its markers "@@NAME@@" are filled here, each
 * request, with the numbers as plain HTML tables (so that the page reads
 * without JavaScript, and `curl /ui` shows them) and the nonce its inline
 * style and script run under (Content-Security-Policy: nothing else runs,
 * whatever a key holds). Every name and key written into it goes through
 * sl_html_escape.
 *
 * A simulation can take tens of milliseconds: it runs on libuv's threadpool
 * (uv_queue_work), answered in its reply slot when done, so that a worker
 * never stalls and the connection's replies keep their order; at most
 * SL_UI_SIMS_MAX run at once (the pool has 4 threads, which sluiced's other
 * users share), and one past that is a 503 to retry.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "common/alloc.h"
#include "common/parse.h"
#include "policy/config.h"
#include "proto/html.h"
#include "proto/sim_query.h"
#include "server/log.h"
#include "server/top.h"
#include "server/ui.h"
#include "sim/sim.h"

/* generated/sluice_ui.c (src/server/ui/embed.cmake): page.html's bytes. */
extern const char sl_ui_page[];
extern const size_t sl_ui_page_len;

/* Simulations running at once, on the threadpool, in the whole server. */
#define SL_UI_SIMS_MAX 2
static atomic_int sl_ui_sims;

static bool sl_ui_path_is(sl_http_slice path, const char *lit)
{
    size_t n = strlen(lit);
    return path.len == n && memcmp(path.ptr, lit, n) == 0;
}

bool sl_ui_basic_allowed(const sl_http_request *r)
{
    bool get = sl_ui_path_is(r->method, "GET") || sl_ui_path_is(r->method, "HEAD");
    return get && (sl_ui_path_is(r->path, "/ui") || sl_ui_path_is(r->path, "/v1/stats") ||
                   sl_ui_path_is(r->path, "/v1/simulate") || sl_ui_path_is(r->path, "/v1/top") ||
                   sl_ui_path_is(r->path, "/favicon.ico"));
}

/* ---- formatting, the same as the page's script does it ---- */

/* n with its digits in groups of three, separated by U+202F (a narrow
 * no-break space): "1 234 567". */
static void sl_ui_count(sl_buf *out, uint64_t n)
{
    char digits[24];
    int len = snprintf(digits, sizeof digits, "%llu", (unsigned long long)n);
    for (int i = 0; i < len; i++) {
        if (i > 0 && (len - i) % 3 == 0)
            sl_buf_add(out, "\xE2\x80\xAF", 3);
        sl_buf_add(out, &digits[i], 1);
    }
}

/* A duration of us microseconds: "25 µs", "2.5 ms", "1 s". */
static void sl_ui_micros(sl_buf *out, int64_t us)
{
    if (us < 1000)
        sl_out(out, "%lld \xC2\xB5s", (long long)us);
    else if (us < 1000000)
        sl_out(out, "%g ms", (double)us / 1e3);
    else
        sl_out(out, "%g s", (double)us / 1e6);
}

/* Bytes in binary units with one decimal: "812 B", "1.5 MiB". */
static void sl_ui_bytes(sl_buf *out, uint64_t b)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        sl_out(out, "%llu B", (unsigned long long)b);
    else
        sl_out(out, "%.1f %s", v, unit[u]);
}

/* A table cell of a count: <td data-f="F" data-v="N">N, grouped</td>. */
static void sl_ui_count_cell(sl_buf *out, const char *f, uint64_t n)
{
    sl_out(out, "<td data-f=\"%s\" data-v=\"%llu\">", f, (unsigned long long)n);
    sl_ui_count(out, n);
    sl_buf_add(out, "</td>", 5);
}

/* ---- the page's tables ----
 *
 * Each writes the rows of one table's body, as the page's script writes
 * them again from /v1/stats (the same cells, data-f naming the field and
 * data-v holding the exact value, the text formatted alike), so that the
 * page reads the same with the script or without it. */

/* Decisions: a row per counter slot (ad hoc first), as /metrics counts them. */
static void sl_ui_decisions(sl_buf *out, const sl_ui_snapshot *s)
{
    static const char *const field[SL_OUTCOMES] = {"allowed", "refused", "shadow_refused"};
    for (size_t p = 0; p <= s->m.policies; p++) {
        const char *name = p ? s->cfg->policies[p - 1].name : "";
        sl_buf_add(out, "<tr data-policy=\"", 17);
        sl_html_escape_str(out, name);
        sl_buf_add(out, "\"><th scope=\"row\">", 18);
        if (p == 0)
            sl_out(out, "<i>ad hoc</i>");
        else
            sl_html_escape_str(out, name);
        if (p > 0 && s->cfg->policies[p - 1].shadow)
            sl_out(out, " <span class=\"tag\">shadow</span>");
        sl_buf_add(out, "</th>", 5);
        for (int o = 0; o < SL_OUTCOMES; o++)
            sl_ui_count_cell(out, field[o], s->m.decisions[p][o]);
        uint64_t last = 0;
        for (int k = 0; k < s->seconds[p]; k++)
            last += s->per_second[p][SL_OUT_REJECTED][k];
        sl_ui_count_cell(out, "refused_60s", last);
        sl_buf_add(out, "</tr>\n", 6);
    }
}

/* Store: its keys, its memory against the cap, what it evicted and
 * reclaimed, takes it could not serve; and the connections open. */
static void sl_ui_store(sl_buf *out, const sl_ui_snapshot *s)
{
    sl_out(out, "<tr><th scope=\"row\">keys</th>");
    sl_ui_count_cell(out, "keys", s->store.keys);
    sl_out(out, "</tr>\n<tr><th scope=\"row\">memory</th><td data-f=\"bytes\" data-v=\"%llu\" "
                "data-max=\"%llu\">",
           (unsigned long long)s->store.bytes_used, (unsigned long long)s->store.max_memory);
    sl_ui_bytes(out, s->store.bytes_used);
    if (s->store.max_memory) {
        sl_out(out, " of ");
        sl_ui_bytes(out, s->store.max_memory);
        sl_out(out, " <meter min=\"0\" max=\"%llu\" value=\"%llu\"></meter>",
               (unsigned long long)s->store.max_memory, (unsigned long long)s->store.bytes_used);
    } else {
        sl_out(out, " (no cap)");
    }
    sl_out(out, "</td></tr>\n<tr><th scope=\"row\">evictions</th>");
    sl_ui_count_cell(out, "evictions", s->store.evictions);
    sl_out(out, "</tr>\n<tr><th scope=\"row\">reclaimed</th>");
    sl_ui_count_cell(out, "reclaimed", s->store.reclaimed);
    sl_out(out, "</tr>\n<tr><th scope=\"row\">store errors</th>");
    sl_ui_count_cell(out, "errors", s->m.store_errors);
    sl_out(out, "</tr>\n<tr><th scope=\"row\">connections</th>");
    sl_ui_count_cell(out, "connections", (uint64_t)(s->connections > 0 ? s->connections : 0));
    sl_out(out, "</tr>\n");
}

/* Latency: a row per face, its requests and percentiles as upper bounds
 * (sl_ui_quantile_us). */
static void sl_ui_latency(sl_buf *out, const sl_ui_snapshot *s)
{
    static const char *const proto[SL_PROTOS] = {"resp", "http", "grpc"};
    static const char *const label[SL_PROTOS] = {"RESP", "HTTP", "gRPC"};
    static const char *const qf[SL_UI_QUANTILES] = {"p50", "p90", "p99", "p999"};
    for (int pr = 0; pr < SL_PROTOS; pr++) {
        uint64_t count = 0;
        for (int b = 0; b <= SL_LATENCY_BUCKETS; b++)
            count += s->m.latency[pr][b];
        sl_out(out, "<tr data-proto=\"%s\"><th scope=\"row\">%s</th>", proto[pr], label[pr]);
        sl_ui_count_cell(out, "count", count);
        for (int q = 0; q < SL_UI_QUANTILES; q++) {
            int64_t us = sl_ui_quantile_us(s, pr, sl_ui_quantile_permille[q]);
            sl_out(out, "<td data-f=\"%s\" data-v=\"%lld\">", qf[q], (long long)us);
            if (us == 0) {
                sl_out(out, "\xE2\x80\x94"); /* an em dash: no request yet */
            } else if (us < 0) {
                sl_out(out, "&gt; ");
                sl_ui_micros(out, (int64_t)sl_latency_bound_us[SL_LATENCY_BUCKETS - 1]);
            } else {
                sl_out(out, "\xE2\x89\xA4 "); /* "≤ " */
                sl_ui_micros(out, us);
            }
            sl_buf_add(out, "</td>", 5);
        }
        sl_buf_add(out, "</tr>\n", 6);
    }
}

/* Backend: the store, its state, a remote store's requests, and the
 * decisions of the store-down policies. */
static void sl_ui_backend(sl_buf *out, const sl_ui_snapshot *s)
{
    static const char *const mode[4] = {"", "fail_open", "fail_closed", "local"};
    const char *state = !s->remote || s->bs.state == SL_STORE_UP ? "up"
                        : s->bs.state == SL_STORE_BREAKER_OPEN ? "breaker_open"
                                                               : "down";
    sl_out(out, "<tr><th scope=\"row\">store</th><td data-f=\"store\">");
    sl_html_escape_str(out, s->backend);
    sl_out(out, "%s</td></tr>\n", s->remote ? "" : " (in this process)");
    sl_out(out, "<tr><th scope=\"row\">state</th><td data-f=\"state\" data-v=\"%s\"><span "
                "class=\"state %s\">%s</span></td></tr>\n",
           state, state, strcmp(state, "breaker_open") == 0 ? "breaker open" : state);
    if (s->remote) {
        sl_out(out, "<tr><th scope=\"row\">requests</th>");
        sl_ui_count_cell(out, "requests", s->bs.requests);
        sl_out(out, "</tr>\n<tr><th scope=\"row\">errors</th>");
        sl_ui_count_cell(out, "errors", s->bs.errors);
        sl_out(out, "</tr>\n<tr><th scope=\"row\">timeouts</th>");
        sl_ui_count_cell(out, "timeouts", s->bs.timeouts);
        sl_out(out, "</tr>\n");
    }
    for (int b = 1; b < 4; b++) {
        uint64_t n = 0;
        for (size_t p = 0; p <= s->m.policies; p++)
            n += s->m.fallback[p][b];
        sl_out(out, "<tr><th scope=\"row\">fallback %s</th>", mode[b]);
        sl_ui_count_cell(out, mode[b], n);
        sl_out(out, "</tr>\n");
    }
    if (s->peers) {
        sl_out(out, "<tr><th scope=\"row\">peers down</th><td data-f=\"peers_down\" "
                    "data-v=\"%zu\">%zu of %zu</td></tr>\n",
               s->peers_down, s->peers_down, s->peers);
    }
}

/* Adaptive limits, when there are any: a row per adaptive policy (and the
 * ad-hoc ones, once used). */
static void sl_ui_adaptive(sl_buf *out, const sl_ui_snapshot *s)
{
    if (!s->adaptive)
        return;
    for (size_t p = 0; p <= s->a.slots; p++) {
        const char *name = p ? s->cfg->adaptive[p - 1].name : "";
        if (p == 0 && s->a.keys[0] == 0 && s->m.adaptive[0][0] + s->m.adaptive[0][1] == 0)
            continue; /* no ad-hoc adaptive limit: no row */
        sl_buf_add(out, "<tr data-policy=\"", 17);
        sl_html_escape_str(out, name);
        sl_buf_add(out, "\"><th scope=\"row\">", 18);
        if (p == 0)
            sl_out(out, "<i>ad hoc</i>");
        else
            sl_html_escape_str(out, name);
        sl_buf_add(out, "</th>", 5);
        sl_ui_count_cell(out, "keys", s->a.keys[p]);
        sl_ui_count_cell(out, "limit", (uint64_t)(s->a.limit[p] > 0 ? s->a.limit[p] : 0));
        sl_ui_count_cell(out, "in_flight", (uint64_t)(s->a.in_flight[p] > 0 ? s->a.in_flight[p] : 0));
        sl_ui_count_cell(out, "admitted", s->m.adaptive[p][1]);
        sl_ui_count_cell(out, "shed", s->m.adaptive[p][0]);
        sl_buf_add(out, "</tr>\n", 6);
    }
}

/* The top keys of a kind, read now as GET /v1/top reads them (every
 * policy, its default count): a table as the page's script writes it, or a
 * note when there is none to show. */
static void sl_ui_top(sl_buf *out, sl_conn *c, int kind)
{
    sl_server *srv = c->w->srv;
    const char *what = kind == SL_TOP_REFUSED ? "refused" : "admitted";
    if (srv->cfg.top_keys == 0) {
        sl_out(out, "<p class=\"note\">top keys: not available</p>");
        return;
    }
    sl_cmd_ctx ctx;
    sl_conn_cmd_ctx(c, &ctx);
    sl_top_query q = {.slot = -1, .kind = kind, .count = SL_TOP_COUNT(srv)};
    sl_top_row *rows;
    size_t n;
    if (sl_top_answer(&ctx, srv, &q, c->w->now, &rows, &n) != SL_OK) {
        sl_out(out, "<p class=\"note\">top keys: out of memory</p>");
        return;
    }
    if (n == 0)
        sl_out(out, "<p class=\"note\">no %s keys in the window</p>", what);
    else
        sl_out(out, "<table data-kind=\"%s\"><thead><tr><th>policy</th><th>key</th>"
                    "<th>count</th><th>remaining</th></tr></thead><tbody>", what);
    for (size_t i = 0; i < n; i++) {
        const sl_top_row *r = &rows[i];
        const char *pol = r->policy ? r->policy->name : NULL;
        size_t klen = r->e.len < SL_TOPK_KEY_MAX ? r->e.len : SL_TOPK_KEY_MAX;
        sl_out(out, "<tr><td class=\"pol\" data-f=\"policy\" title=\"");
        sl_html_escape_str(out, pol ? pol : "ad hoc");
        sl_out(out, "\">");
        if (pol)
            sl_html_escape_str(out, pol);
        else
            sl_out(out, "<i>ad hoc</i>");
        sl_out(out, "</td><td class=\"key\" data-f=\"key\" title=\"");
        sl_html_escape(out, r->e.key, klen);
        sl_out(out, "\">");
        sl_html_escape(out, r->e.key, klen);
        /* The true count is between count - error and count; a sampled one is
         * an estimate (as the script shows them). */
        sl_out(out, "</td><td data-f=\"count\" data-v=\"%llu\"", (unsigned long long)r->e.count);
        if (r->e.error || r->sample > 1) {
            sl_out(out, " title=\"");
            if (r->e.error) {
                sl_out(out, "between ");
                sl_ui_count(out, r->e.count - r->e.error);
                sl_out(out, " and ");
                sl_ui_count(out, r->e.count);
            }
            if (r->sample > 1) {
                sl_out(out, "%sestimated from 1 in ", r->e.error ? "; " : "");
                sl_ui_count(out, r->sample);
                sl_out(out, " decisions");
            }
            sl_out(out, "\"");
        }
        sl_out(out, ">");
        if (r->sample > 1)
            sl_buf_add(out, "\xE2\x89\x88\xC2\xA0", 5); /* U+2248, U+00A0 */
        if (r->e.error) {
            sl_ui_count(out, r->e.count - r->e.error);
            sl_buf_add(out, "\xE2\x80\x93", 3); /* U+2013 */
        }
        sl_ui_count(out, r->e.count);
        if (r->has_remaining) {
            sl_out(out, "</td><td data-f=\"remaining\" data-v=\"%lld\">", (long long)r->remaining);
            sl_ui_count(out, (uint64_t)r->remaining);
        } else {
            sl_out(out, "</td><td data-f=\"remaining\" data-v=\"\">\xE2\x80\x94"); /* U+2014 */
        }
        sl_out(out, "</td></tr>");
    }
    if (n)
        sl_out(out, "</tbody></table>");
    sl_free(rows);
}

/* Writes the value of marker name[0 .. n) ("NONCE", "DECISIONS", ...). */
static void sl_ui_marker(sl_buf *out, const char *name, size_t n, const sl_ui_snapshot *s,
                         const char *nonce, sl_conn *c)
{
#define IS(lit) (n == sizeof lit - 1 && memcmp(name, lit, n) == 0)
    if (IS("NONCE"))
        sl_buf_add(out, nonce, strlen(nonce));
    else if (IS("VERSION"))
        sl_html_escape_str(out, SLUICE_VERSION);
    else if (IS("UPTIME"))
        sl_ui_count(out, (uint64_t)(s->uptime_ns / 1000000000));
    else if (IS("DECISIONS"))
        sl_ui_decisions(out, s);
    else if (IS("STORE"))
        sl_ui_store(out, s);
    else if (IS("LATENCY"))
        sl_ui_latency(out, s);
    else if (IS("BACKEND"))
        sl_ui_backend(out, s);
    else if (IS("ADAPTIVE"))
        sl_ui_adaptive(out, s);
    else if (IS("ADAPTIVE_HIDDEN"))
        sl_out(out, "%s", s->adaptive ? "" : " hidden");
    else if (IS("TOP_REFUSED"))
        sl_ui_top(out, c, SL_TOP_REFUSED);
    else if (IS("TOP_ADMITTED"))
        sl_ui_top(out, c, SL_TOP_ADMITTED);
    else if (IS("TOP_WINDOW") && c->w->srv->cfg.top_keys)
        sl_out(out, "the last %d s", c->w->srv->cfg.top_window_s);
#undef IS
}

/* The page: the template with its markers filled. */
static void sl_ui_render_page(sl_buf *out, const sl_ui_snapshot *s, const char *nonce,
                              sl_conn *c)
{
    /* The page holds no NUL but its terminator's. */
    const char *p = sl_ui_page, *end = sl_ui_page + sl_ui_page_len;
    while (p < end) {
        const char *m = strstr(p, "@@");
        const char *close = m ? strstr(m + 2, "@@") : NULL;
        if (!m || !close) {
            sl_buf_add(out, p, (size_t)(end - p));
            break;
        }
        sl_buf_add(out, p, (size_t)(m - p));
        sl_ui_marker(out, m + 2, (size_t)(close - m - 2), s, nonce, c);
        p = close + 2;
    }
}

/* The page's paths take GET and HEAD only. */
static void sl_ui_method_not_allowed(sl_conn *c, bool keep, bool head)
{
    sl_http_write_response(sl_conn_out(c), 405, keep, "application/json", "Allow: GET, HEAD\r\n",
                           "{\"error\":\"method not allowed\"}\n", 31, head);
}

/* GET /ui: the page, its numbers read now, under a nonce new with this
 * response. */
static void sl_ui_page_request(sl_conn *c, bool keep, bool head)
{
    unsigned char rnd[16];
    char nonce[33];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        sl_http_write_error(sl_conn_out(c), 503, keep, "no random bytes for the page's nonce",
                            NULL);
        return;
    }
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(nonce + 2 * i, 3, "%02x", rnd[i]);
    sl_ui_snapshot *s = malloc(sizeof *s);
    sl_buf page;
    sl_buf_init(&page, 0, 0);
    if (s) {
        sl_ui_snapshot_take(c->w->srv, atomic_load_explicit(&c->w->srv->config,
                                                            memory_order_acquire), s);
        sl_ui_render_page(&page, s, nonce, c);
    }
    if (!s || page.failed) {
        sl_http_write_error(sl_conn_out(c), 503, keep, "out of memory", NULL);
    } else {
        char extra[512];
        snprintf(extra, sizeof extra,
                 "Content-Security-Policy: default-src 'none'; script-src 'nonce-%s'; "
                 "style-src 'nonce-%s'; connect-src 'self'; img-src 'self' blob:; "
                 "form-action 'self'; base-uri 'none'; frame-ancestors 'none'\r\n"
                 "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
                 "Referrer-Policy: no-referrer\r\n",
                 nonce, nonce);
        sl_http_write_response(sl_conn_out(c), 200, keep, "text/html; charset=utf-8", extra,
                               page.data, page.len, head);
    }
    sl_buf_free(&page);
    free(s);
}

/* GET /v1/stats: the numbers as JSON (sl_ui_stats_json). */
static void sl_ui_stats_request(sl_conn *c, const sl_http_request *r, bool keep, bool head)
{
    if (r->query.len > 0) {
        sl_http_write_error(sl_conn_out(c), 400, keep, "/v1/stats takes no parameters", NULL);
        return;
    }
    sl_ui_snapshot *s = malloc(sizeof *s);
    char *text = NULL;
    if (s) {
        sl_ui_snapshot_take(c->w->srv, atomic_load_explicit(&c->w->srv->config,
                                                            memory_order_acquire), s);
        text = sl_ui_stats_json(s);
        free(s);
    }
    if (!text) {
        sl_http_write_error(sl_conn_out(c), 503, keep, "out of memory", NULL);
        return;
    }
    size_t n = strlen(text);
    text[n] = '\n'; /* cJSON's terminator becomes the body's line end */
    sl_http_write_response(sl_conn_out(c), 200, keep, "application/json",
                           "Cache-Control: no-store\r\n", text, n + 1, head);
    cJSON_free(text);
}

/* ---- GET /v1/simulate: the simulator on the threadpool ---- */

typedef struct sl_ui_sim_job {
    uv_work_t work;
    sl_slot *slot;   /* its reply's place among the connection's */
    bool keep, head;
    sl_sim_request req;
    char *svg;       /* the plot, open_memstream's (freed with the job) */
    size_t svg_len;
    char err[256];   /* else why not (a 500: the simulator failed) */
} sl_ui_sim_job;

/* A test hook: SLUICED_DEBUG_SIM_HOLD_MS=N holds every simulation N ms (at
 * most 10 s) before it runs, so that tests/integration/test_ui.py sees the
 * cap on simulations at once, a worker that serves meanwhile, and a
 * shutdown that waits for one. */
static void sl_ui_sim_hold(void)
{
    const char *v = getenv("SLUICED_DEBUG_SIM_HOLD_MS");
    int64_t ms;
    if (v && sl_parse_i64(v, strlen(v), SL_INT_NO_SIGN, &ms) && ms > 0 && ms <= 10000)
        usleep((useconds_t)ms * 1000);
}

/* On a threadpool thread: the traffic, the run, the plot, into job->svg. */
static void sl_ui_sim_work(uv_work_t *w)
{
    sl_ui_sim_job *job = w->data;
    const sl_sim_request *q = &job->req;
    sl_ui_sim_hold();
    traffic tr;
    memset(&tr, 0, sizeof tr);
    /* A bound on the work even where traffic_expected is an expectation
     * (poisson's count varies about it by its square root). */
    tr.max_events = SL_SIM_MAX_REQUESTS + SL_SIM_MAX_REQUESTS / 10;
    sim_result r;
    memset(&r, 0, sizeof r);
    if (traffic_build(&tr, &q->traffic, job->err, sizeof job->err) != 0)
        goto out;
    if (tr.end_ns < 1)
        tr.end_ns = 1;
    char title[200];
    sim_setup s = {.tr = &tr, .limit = q->limit, .period_ns = q->period_ns, .burst = q->burst,
                   .title = title};
    s.bucket_ns = (tr.end_ns + SL_SIM_BUCKETS - 1) / SL_SIM_BUCKETS;
    if (s.bucket_ns < 1)
        s.bucket_ns = 1;
    s.nbuckets = (size_t)((tr.end_ns + s.bucket_ns - 1) / s.bucket_ns);
    snprintf(title, sizeof title, "%lld per %s (burst %lld), traffic %s at %g per second, %zu "
                                  "requests",
             (long long)q->limit, q->period_text, (long long)q->burst,
             traffic_kind_name(q->traffic.kind), q->traffic.rate, tr.n);
    r.alg = q->algorithm;
    r.lim = q->lim;
    r.state_bytes = sl_state_size(&r.lim);
    snprintf(r.name, sizeof r.name, "%s", sl_algorithm_name(q->algorithm));
    if (sim_run_one(&s, &r, NULL, job->err, sizeof job->err) != 0)
        goto out;
    FILE *f = open_memstream(&job->svg, &job->svg_len);
    if (!f || sim_write_svg(f, &s, &r, 1) != 0 || fclose(f) != 0) {
        if (f)
            fclose(f);
        free(job->svg);
        job->svg = NULL;
        snprintf(job->err, sizeof job->err, "out of memory for the plot");
    }
out:
    sim_result_free(&r);
    traffic_free(&tr);
}

/* Back on the worker's loop: the answer into its slot, then the
 * connection's replies that are now in order go out. */
static void sl_ui_sim_done(uv_work_t *w, int status)
{
    sl_ui_sim_job *job = w->data;
    sl_slot *s = job->slot;
    sl_conn *conn = s->conn;
    atomic_fetch_sub(&sl_ui_sims, 1);
    if (!conn) {
        sl_slot_free(s); /* closed meanwhile */
    } else {
        if (status != 0 || !job->svg)
            sl_http_write_error(&s->reply, status != 0 ? 503 : 500, job->keep,
                                status != 0 ? "the simulation was cancelled" : job->err, NULL);
        else
            sl_http_write_response(&s->reply, 200, job->keep, "image/svg+xml",
                                   "Content-Security-Policy: default-src 'none'; style-src "
                                   "'unsafe-inline'\r\nCache-Control: no-store\r\n"
                                   "X-Content-Type-Options: nosniff\r\n",
                                   job->svg, job->svg_len, job->head);
        s->done = true;
        conn->inflight--;
        sl_conn_slots_drain(conn);
    }
    free(job->svg);
    free(job);
}

/* GET /v1/simulate: the query decoded and bounded (proto/sim_query.h: a 400 names the
 * field), the run on the threadpool, its answer in a reply slot so that the
 * connection's replies keep their order. */
static void sl_ui_simulate_request(sl_conn *c, const sl_http_request *r, bool keep, bool head)
{
    sl_ui_sim_job *job = calloc(1, sizeof *job);
    if (!job) {
        sl_http_write_error(sl_conn_out(c), 503, keep, "out of memory", NULL);
        return;
    }
    char err[256];
    const char *field;
    if (sl_sim_request_parse(r->query.ptr, r->query.len, &job->req, err, sizeof err, &field) !=
        0) {
        sl_http_write_error(sl_conn_out(c), 400, keep, err, field);
        free(job);
        return;
    }
    if (atomic_fetch_add(&sl_ui_sims, 1) >= SL_UI_SIMS_MAX) {
        atomic_fetch_sub(&sl_ui_sims, 1);
        free(job);
        static const char body[] = "{\"error\":\"2 simulations are running, the most at once: "
                                   "try again in a moment\"}\n";
        sl_http_write_response(sl_conn_out(c), 503, keep, "application/json", "Retry-After: 1\r\n",
                               body, sizeof body - 1, head);
        return;
    }
    sl_slot *s = sl_slot_new(c->w, c->out.proto);
    job->slot = s;
    job->keep = keep;
    job->head = head;
    job->work.data = job;
    if (!s || uv_queue_work(&c->w->loop, &job->work, sl_ui_sim_work, sl_ui_sim_done) != 0) {
        atomic_fetch_sub(&sl_ui_sims, 1);
        if (s)
            sl_slot_free(s);
        free(job);
        sl_http_write_error(sl_conn_out(c), 503, keep, "cannot start the simulation", NULL);
        return;
    }
    s->conn = c;
    if (c->slots_tail)
        c->slots_tail->next = s;
    else
        c->slots = s;
    c->slots_tail = s;
    c->inflight++;
}

/* The page's icon, also at /favicon.ico: a browser asks for that whatever the page
 * says, and a 401 there would make it forget the Basic credentials it signed in with
 * (it takes them for rejected). */
static const char sl_ui_icon[] =
    "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 16 16\"><rect width=\"16\" "
    "height=\"16\" rx=\"3\" fill=\"#1f4e9c\"/><path d=\"M3 11h10M3 7h6\" stroke=\"white\" "
    "stroke-width=\"2\"/></svg>\n";

bool sl_ui_route(sl_conn *c, const sl_http_request *r, bool keep, bool head)
{
    enum { UI_PAGE, UI_STATS, UI_SIMULATE, UI_ICON } which;
    if (sl_ui_path_is(r->path, "/ui"))
        which = UI_PAGE;
    else if (sl_ui_path_is(r->path, "/favicon.ico"))
        which = UI_ICON;
    else if (sl_ui_path_is(r->path, "/v1/stats"))
        which = UI_STATS;
    else if (sl_ui_path_is(r->path, "/v1/simulate"))
        which = UI_SIMULATE;
    else
        return false;
    bool get = sl_ui_path_is(r->method, "GET") || sl_ui_path_is(r->method, "HEAD");
    if (!get)
        sl_ui_method_not_allowed(c, keep, head);
    else if (which == UI_PAGE)
        sl_ui_page_request(c, keep, head);
    else if (which == UI_STATS)
        sl_ui_stats_request(c, r, keep, head);
    else if (which == UI_ICON)
        sl_http_write_response(sl_conn_out(c), 200, keep, "image/svg+xml",
                               "Cache-Control: max-age=86400\r\n", sl_ui_icon,
                               sizeof sl_ui_icon - 1, head);
    else
        sl_ui_simulate_request(c, r, keep, head);
    return true;
}
