/*
 * http.c: sluiced's HTTP/1.1 face (docs/http.md). It only wires: the request
 * parser, the check decoder and the response writer are src/proto/http.c's;
 * the policies src/policy's; the decisions the store's.
 *
 *   GET  /v1/check?key=K&limit=N&period=P[&burst][&cost][&algorithm]
 *   GET  /v1/check?key=K&policy=NAME[&tier=T][&cost=C][&tokens=N]
 *   POST /v1/check                      the same as JSON, or {"limits": [...]}
 *   GET  /v1/usage?key=K&policy=NAME[&tier=T]   each limit's use (SL.USAGE)
 *   GET  /v1/top[?policy=NAME&count=N&kind=K]   the top keys (SL.TOP, server/top.c)
 *   POST /v1/reserve                    a policy check of the estimates, as JSON
 *                                       (or its query) with ttl_ms: SL.RESERVE
 *   POST /v1/settle                     {"reservation", "cost", "tokens"}: SL.SETTLE
 *   ANY  /v1/auth/{policy}[?tier=T&cost=C&tokens=N]   forward-auth: the key comes from
 *                                       a request header (--http-auth-header),
 *                                       or is the client's address
 *                                       (--trusted-proxies)
 *   ANY  /v1/auth/{policy}/{path...}    the same as Envoy's ext_authz sends it
 *                                       (the client's path and query after the
 *                                       policy: read by a key template only)
 *   GET  /metrics                       Prometheus text
 *   GET  /healthz
 *   GET  /ui, /v1/stats, /v1/simulate   the live page, its numbers, "try a limit" (ui.c)
 *   POST /json                          envoyproxy/ratelimit's: ShouldRateLimit in proto3 JSON
 *   GET  /healthcheck                   envoyproxy/ratelimit's: OK with an Envoy configuration
 *
 * Requests on a connection are served in order, pipelined or not; a request
 * whose body has not fully arrived waits for it. A malformed request gets
 * its status (400, 413, 414, 431, 501, 505) with a JSON error naming what was
 * wrong, and the connection is closed: after a framing error the next
 * request cannot be found reliably.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/duration.h"
#include "common/secret.h"
#include "cmd/adaptive.h"
#include "cmd/reserve.h"
#include "cmd/rls.h"
#include "proto/acquire_json.h"
#include "proto/cjson_parse.h"
#include "proto/rls_json.h"
#include "server/dlog.h"
#include "server/grpc.h"
#include "common/units.h"
#include "policy/config.h"
#include "proto/basic_auth.h"
#include "proto/client_addr.h"
#include "proto/http.h"
#include "proto/key_template.h"
#include "server/log.h"
#include "server/server.h"
#include "server/ui.h"
#include "server/top.h"

#define SL_HTTP_HEADERS 64

/* A connection's parser state. */
typedef struct sl_http_conn {
    sl_http_request req;
    sl_http_header headers[SL_HTTP_HEADERS];
    bool continue_sent; /* "100 Continue" already sent for the request at hand */
} sl_http_conn;

static bool sl_path_is(sl_http_slice path, const char *lit)
{
    size_t n = strlen(lit);
    return path.len == n && memcmp(path.ptr, lit, n) == 0;
}

static bool sl_method_is(const sl_http_request *r, const char *m)
{
    return sl_path_is(r->method, m);
}

/* What an HTTP check's response needs beside its decision (sl_check's
 * face_flags; face_status the status of a denial, 0 for 429). */
#define SL_HTTP_KEEP 0x01u    /* keep-alive */
#define SL_HTTP_HEAD 0x02u    /* a HEAD: the same head, no body */
#define SL_HTTP_MULTI 0x04u   /* the request listed several limits */
#define SL_HTTP_RESET 0x08u   /* DELETE /v1/keys/{key}: {"reset": bool} */
#define SL_HTTP_USAGE 0x10u   /* GET /v1/usage: each limit's usage, as SL.USAGE */

/* /v1/usage's body: {"policy": NAME, "limits": [{name, limit, used, remaining,
 * reset_after_ms, period_ms}, ...]}, each limit as SL.USAGE gives it. */
static void sl_http_render_usage(sl_buf *out, const sl_check *k, bool keep, bool head)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *list = root ? cJSON_AddArrayToObject(root, "limits") : NULL;
    if (list)
        cJSON_AddStringToObject(root, "policy", k->name);
    for (size_t i = 0; list && i < k->n; i++) {
        const sl_decision *d = &k->d[i];
        char name[SL_POLICY_LIMIT_NAME_ROOM];
        sl_policy_limit_name(k->name, k->lname[i], i >= k->nkey, name, sizeof name);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(list, o);
        cJSON_AddStringToObject(o, "name", name);
        cJSON_AddNumberToObject(o, "limit", (double)d->limit);
        cJSON_AddNumberToObject(o, "used", (double)sl_usage_used(d));
        cJSON_AddNumberToObject(o, "remaining", (double)(d->remaining < 0 ? 0 : d->remaining));
        cJSON_AddNumberToObject(o, "reset_after_ms", (double)sl_ns_ceil_ms(d->reset_after_ns));
        cJSON_AddNumberToObject(o, "period_ms", (double)sl_ns_ceil_ms(k->lim[i]->period_ns));
    }
    char *text = list ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!text) {
        sl_http_write_error(out, 503, keep, "out of memory", NULL);
        return;
    }
    size_t n = strlen(text);
    text[n] = '\n';
    sl_http_write_response(out, 200, keep, "application/json", NULL, text, n + 1, head);
    cJSON_free(text);
}

/* /v1/settle's body: {"settled": bool, "limits": [{name, adjusted}, ...]},
 * as SL.SETTLE answers; 409 when the reservation was not open (expired, or
 * settled already). */
static void sl_http_render_settle(sl_buf *out, const sl_check *k, bool keep, bool head)
{
    const sl_chain *ch = k->chain;
    cJSON *root = cJSON_CreateObject();
    if (root) {
        cJSON_AddBoolToObject(root, "settled", ch->settled);
        if (!ch->settled)
            cJSON_AddStringToObject(root, "error", "the reservation has expired or was settled "
                                                   "already: nothing was given back or charged");
    }
    cJSON *list = root ? cJSON_AddArrayToObject(root, "limits") : NULL;
    for (size_t i = 0; list && ch->settled && i < ch->n; i++) {
        char name[SL_POLICY_LIMIT_NAME_ROOM];
        sl_policy_limit_name(k->name, k->lname[i], i >= k->nkey, name, sizeof name);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(list, o);
        cJSON_AddStringToObject(o, "name", name);
        cJSON_AddNumberToObject(o, "adjusted", (double)ch->adjusted[i]);
    }
    char *text = list ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!text) {
        sl_http_write_error(out, 503, keep, "out of memory", NULL);
        return;
    }
    size_t n = strlen(text);
    text[n] = '\n';
    sl_http_write_response(out, ch->settled ? 200 : 409, keep, "application/json", NULL, text,
                           n + 1, head);
    cJSON_free(text);
}

/* Writes a check's response (SL_RENDER_FACE), now or when it is decided. */
void sl_http_render(sl_cmd_ctx *c, sl_check *k)
{
    sl_buf *out = c->sink;
    bool keep = k->face_flags & SL_HTTP_KEEP, head = k->face_flags & SL_HTTP_HEAD;
    const sl_chain *ch = k->chain;
    if (ch && ch->error[0]) { /* a step after the first failed: the store's */
        sl_http_write_error(out, 503, keep, ch->error + 4, NULL);
        return;
    }
    if (k->req.rc != SL_OK) {
        /* A remote store's own words when it has some (a key of another
         * type in Redis, a sync node's table full), as RESP gives them. */
        const char *why = k->req.errstr ? k->req.errstr : sl_strerror(k->req.rc);
        if (strncmp(why, "ERR ", 4) == 0)
            why += 4;
        sl_http_write_error(out, sl_http_status(k->req.rc), keep, why,
                            k->face_flags & SL_HTTP_RESET ? "key" : NULL);
        return;
    }
    if (k->face_flags & SL_HTTP_USAGE) {
        sl_http_render_usage(out, k, keep, head);
        return;
    }
    if (ch && ch->kind == SL_RENDER_SETTLE) {
        sl_http_render_settle(out, k, keep, head);
        return;
    }
    if (k->face_flags & SL_HTTP_RESET) {
        char body[32];
        int n = snprintf(body, sizeof body, "{\"reset\":%s}\n", k->req.count > 0 ? "true" : "false");
        sl_http_write_response(out, 200, keep, "application/json", NULL, body, (size_t)n, head);
        return;
    }
    /* A policy's limits are named as sl_policy_limit_name says: "api",
     * "api.global", "chat.tpm". */
    char names[SL_TAKE_MANY_MAX][SL_POLICY_LIMIT_NAME_ROOM];
    sl_http_limit_report items[SL_TAKE_MANY_MAX];
    for (size_t i = 0; i < k->n; i++) {
        items[i] = (sl_http_limit_report){k->name, k->lim[i], &k->d[i]};
        if (k->name) {
            sl_policy_limit_name(k->name, k->lname[i], i >= k->nkey, names[i], sizeof names[i]);
            items[i].name = names[i];
        }
    }
    bool allowed = k->req.failed < 0;
    sl_http_decision_opts o = {
        .status = !allowed && !k->shadow ? k->face_status : 0,
        .keep_alive = keep,
        .shadow = k->shadow,
        .head = head,
        .multi = k->face_flags & SL_HTTP_MULTI,
        .scoped = k->policy >= 0,
        .nkey = k->nkey,
        .rejected_by = k->req.failed,
        .costs = k->policy >= 0 ? k->cost : NULL,
    };
    char extra[SL_HTTP_BODY_EXTRA_MAX];
    if (ch) { /* /v1/reserve: the reservation after the numbers */
        int e = ch->reserved && ch->id_len < sizeof extra - 64
                    ? snprintf(extra, sizeof extra, ",\"reservation\":\"%s\",\"ttl_ms\":%lld",
                               ch->id, (long long)ch->ttl_ms)
                    : snprintf(extra, sizeof extra, ",\"reservation\":null,\"ttl_ms\":0");
        o.extra = extra;
        o.extra_len = e > 0 && (size_t)e < sizeof extra ? (size_t)e : 0;
    }
    sl_http_write_decision(out, &o, items, k->n);
}

/*
 * Runs a decoded check (and the policies) through the check runner; an
 * error found before the store is asked is written here.
 */
static void sl_http_run_check(sl_conn *c, sl_http_check *chk, uint32_t flags, int deny_status,
                              bool peek, bool reserve)
{
    sl_cmd_ctx ctx;
    sl_conn_cmd_ctx(c, &ctx);
    bool keep = flags & SL_HTTP_KEEP;
    sl_take_item items[SL_TAKE_MANY_MAX];
    char keys[SL_POLICY_KEYS_ROOM];
    sl_check k;

    if (chk->policy) {
        const sl_policy *p = sl_config_policy(ctx.config, chk->policy, chk->policy_len);
        if (!p) {
            char msg[128];
            snprintf(msg, sizeof msg, "unknown policy '%.*s'", (int)chk->policy_len, chk->policy);
            sl_http_write_error(sl_conn_out(c), 400, keep, msg, "policy");
            return;
        }
        int n = sl_check_policy(&k, ctx.config, p, chk->tier, chk->tier ? chk->tier_len : 0,
                                chk->items[0].key, chk->items[0].keylen, chk->items[0].cost,
                                chk->tokens, keys, sizeof keys, items);
        if (n == -3) {
            char msg[SL_POLICY_KEY_MAX * 2 + 200];
            sl_policy_key_hint(p, msg, sizeof msg);
            sl_http_write_error(sl_conn_out(c), 400, keep, msg, "key");
            return;
        }
        if (n == -2) {
            char msg[160];
            snprintf(msg, sizeof msg, "policy '%s' takes each key's tier from its plans %s: a "
                                      "request cannot name one",
                     p->name, p->plans_redis ? "hash" : "file");
            sl_http_write_error(sl_conn_out(c), 400, keep, msg, "tier");
            return;
        }
        if (n < 0) {
            char msg[160];
            snprintf(msg, sizeof msg, "unknown tier '%.*s' for policy '%s'", (int)chk->tier_len,
                     chk->tier, p->name);
            sl_http_write_error(sl_conn_out(c), 400, keep, msg, "tier");
            return;
        }
        if (n == 0) {
            sl_http_write_error(sl_conn_out(c), 400, keep, sl_strerror(SL_ERR_KEY), "key");
            return;
        }
        char err[256];
        if (reserve &&
            sl_reserve_prepare(&ctx, &k, p, chk->tier, chk->tier ? chk->tier_len : 0,
                               chk->items[0].key, chk->items[0].keylen, chk->items[0].cost,
                               chk->tokens, chk->ttl_ms < 0 ? SL_RESERVE_TTL_DEFAULT_MS
                                                            : chk->ttl_ms,
                               err, sizeof err)) {
            sl_http_write_error(sl_conn_out(c), 400, keep, err, NULL);
            return;
        }
    } else {
        for (size_t i = 0; i < chk->n; i++) {
            items[i] = (sl_take_item){chk->items[i].key, chk->items[i].keylen,
                                      &chk->items[i].limit, chk->items[i].cost};
            k.lim[i] = &chk->items[i].limit;
        }
        sl_check_init(&k, SL_OP_TAKE, SL_RENDER_FACE, chk->n, items);
    }
    /* HEAD is safe (RFC 9110): it says what GET would answer, and
     * consumes nothing. Each limit is asked on its own. */
    if (peek) {
        k.req.op = SL_OP_PEEK;
        k.counted = false;
    }
    k.render = SL_RENDER_FACE;
    k.face_flags = flags;
    k.face_status = deny_status;
    sl_check_submit(&ctx, &k);
}

/* The check decoder's limits, through the worker's cache of prepared limits
 * (the one its RESP commands use): a client repeats the same few limits, and
 * preparing one costs several takes. */
static int sl_http_cached_limit(void *ctx, sl_limit *out, sl_algorithm algorithm, int64_t limit,
                                int64_t period_ns, int64_t burst, int64_t months,
                                int64_t reset_day, int64_t utc_offset_ns)
{
    const sl_limit *l;
    int rc = sl_limit_cached(ctx, algorithm, limit, period_ns, burst, months, reset_day,
                             utc_offset_ns, &l);
    if (rc == SL_OK)
        *out = *l;
    return rc;
}

/* The worker's check decoder, made at its first use. NULL when out of
 * memory. */
static sl_http_check *sl_http_worker_check(sl_worker *w)
{
    if (!w->check) {
        if (!(w->check = calloc(1, sizeof *w->check)))
            return NULL;
        w->check->make_limit = sl_http_cached_limit;
        w->check->make_limit_ctx = &w->limits;
        w->check->max_key = w->srv->cfg.max_key_bytes;
    }
    return w->check;
}

/*
 * The policy segment of a forward-auth path, "/v1/auth/{policy}[/...]":
 * sets *name to the segment (still percent-encoded) and returns whether a
 * path follows it. Envoy's ext_authz appends the client's path and query to
 * the auth URL, so that "/v1/auth/api/orders/123?page=2" is a check of
 * policy "api"; the query there is the client's, not the operator's.
 */
static bool sl_auth_policy_segment(sl_http_slice path, sl_http_slice *name)
{
    const char *seg = path.ptr + 9, *end = path.ptr + path.len;
    const char *slash = memchr(seg, '/', (size_t)(end - seg));
    *name = (sl_http_slice){seg, (size_t)((slash ? slash : end) - seg)};
    return slash != NULL;
}

/* The first field called name whose value is not empty, or NULL. */
static const sl_http_header *sl_auth_field(const sl_http_request *r, const char *name)
{
    for (size_t i = 0; i < r->num_headers; i++)
        if (sl_http_slice_ieq(r->headers[i].name, name) && r->headers[i].value.len > 0)
            return &r->headers[i];
    return NULL;
}

/*
 * The method, path and query of the client's request that forward-auth
 * authorizes, for a key template. Envoy's ext_authz sends them as its own:
 * the path after the policy's segment (seg), and the query. Traefik sends
 * X-Forwarded-Method and X-Forwarded-Uri, nginx's auth_request (by
 * convention) X-Original-Method and X-Original-URI: believed only from a
 * trusted proxy (--trusted-proxies), as the client's address is, since a
 * client could write them itself. Otherwise the request's own.
 */
static void sl_auth_original(const sl_conn *c, const sl_http_request *r, bool envoy,
                             sl_http_slice seg, sl_key_request *kr)
{
    kr->method = r->method;
    kr->path = r->path;
    kr->query = r->query;
    if (envoy) {
        const char *rest = seg.ptr + seg.len; /* the '/' after the policy */
        kr->path = (sl_http_slice){rest, (size_t)(r->path.ptr + r->path.len - rest)};
        return;
    }
    if (!sl_trusted_has(&c->w->srv->cfg.trusted_proxies, &c->peer))
        return;
    const sl_http_header *m = sl_auth_field(r, "x-forwarded-method");
    if (!m)
        m = sl_auth_field(r, "x-original-method");
    if (m)
        kr->method = m->value;
    const sl_http_header *u = sl_auth_field(r, "x-forwarded-uri");
    if (!u)
        u = sl_auth_field(r, "x-original-uri");
    if (u) {
        const char *q = memchr(u->value.ptr, '?', u->value.len);
        size_t plen = q ? (size_t)(q - u->value.ptr) : u->value.len;
        kr->path = (sl_http_slice){u->value.ptr, plen};
        kr->query = q ? (sl_http_slice){q + 1, u->value.len - plen - 1} : (sl_http_slice){NULL, 0};
    }
}

/*
 * Forward-auth's store key for a policy keyed by the request: its template
 * (else its fallback) rendered from the request, into out (cap bytes). `key`
 * is what {key} stands for (the key header's value, or the client's address),
 * client the client's address when it has been found (else it is found here,
 * when a template wants it). Returns the key's length, or 0 after writing the
 * error response (a missing part: 401 naming it; a key too long, or a client
 * address that cannot be read: 400).
 */
static size_t sl_auth_render(sl_conn *c, const sl_http_request *r, const sl_policy *p,
                             sl_http_slice key, const sl_client_addr_result *client, bool envoy,
                             sl_http_slice seg, char *out, size_t cap, bool keep)
{
    const sl_server_config *cfg = &c->w->srv->cfg;
    sl_key_request kr = {.key = key,
                         .policy = {p->name, strlen(p->name)},
                         .headers = r->headers,
                         .nheaders = r->num_headers,
                         .client = client ? &client->ip : NULL};
    sl_auth_original(c, r, envoy, seg, &kr);
    sl_client_addr_result found;
    bool wants_ip = false;
    for (size_t i = 0; i < p->ntemplates; i++)
        wants_ip |= (p->templates[i].uses & SL_KEY_USES(SL_KEY_PART_IP)) != 0;
    if (wants_ip && !kr.client) {
        /* The address headers: --http-auth-header's when it names one, else
         * X-Forwarded-For, which nginx, Traefik and Envoy write. */
        const char *name = cfg->http_auth_header;
        sl_client_source src = sl_client_source_of(name);
        if (src == SL_CLIENT_NONE) {
            src = SL_CLIENT_XFF;
            name = "X-Forwarded-For";
        }
        if (sl_client_addr(&cfg->trusted_proxies, &c->peer, src, name, r->headers,
                           r->num_headers, &found) != 0) {
            sl_http_write_error(sl_conn_out(c), 400, keep, found.err, name);
            return 0;
        }
        kr.client = &found.ip;
    }
    const char *missing[2] = {NULL, NULL};
    long n = 0;
    for (size_t i = 0; i < p->ntemplates && n == 0; i++)
        n = sl_key_template_render(&p->templates[i], &kr, out, cap, &missing[i]);
    if (n > 0)
        return (size_t)n;
    char msg[SL_POLICY_KEY_MAX + 160];
    if (n < 0) {
        snprintf(msg, sizeof msg, "the key policy '%s' writes for this request is longer than "
                                  "%zu bytes", p->name, cap);
        sl_http_write_error(sl_conn_out(c), 400, keep, msg, "key");
        return 0;
    }
    /* Missing: the first template's part names the field; {key} is the
     * key header. */
    bool is_key = strcmp(missing[0], "key") == 0;
    const char *field = is_key ? cfg->http_auth_header : missing[0];
    int w = is_key ? snprintf(msg, sizeof msg, "missing %s header, which policy '%s' keys by",
                              field, p->name)
                   : snprintf(msg, sizeof msg, "missing %s, which policy '%s' keys by", field,
                              p->name);
    if (missing[1] && w > 0 && (size_t)w < sizeof msg)
        snprintf(msg + w, sizeof msg - (size_t)w, ", and %s%s, which its key_fallback does",
                 missing[1], strcmp(missing[1], "key") == 0 ? " (the key header)" : "");
    sl_http_write_error(sl_conn_out(c), 401, keep, msg, field);
    return 0;
}

/* /v1/check, /v1/reserve and /v1/auth/{policy}: decode, run, answer. */
static void sl_http_check_request(sl_conn *c, const sl_http_request *r, const char *body,
                                  bool keep, bool forward_auth, bool reserve)
{
    sl_worker *w = c->w;
    sl_http_check *chk = sl_http_worker_check(w);
    if (!chk) {
        sl_http_write_error(sl_conn_out(c), 503, keep, "out of memory", NULL);
        return;
    }
    int rc;
    if (forward_auth) {
        /* The key from a header, the policy from the path, tier and cost
         * from the query string. X-Forwarded-For, Forwarded and X-Real-IP
         * key by the client's address as --trusted-proxies finds it: the
         * socket's peer unless it is a trusted proxy, else the right-most
         * untrusted address the proxies wrote (proto/client_addr.h), never
         * one the client wrote itself. */
        const sl_server_config *cfg = &w->srv->cfg;
        sl_http_slice key = {NULL, 0};
        sl_client_source src = sl_client_source_of(cfg->http_auth_header);
        sl_client_addr_result client;
        bool have_client = false;
        if (src != SL_CLIENT_NONE) {
            if (sl_client_addr(&cfg->trusted_proxies, &c->peer, src, cfg->http_auth_header,
                               r->headers, r->num_headers, &client) != 0) {
                sl_http_write_error(sl_conn_out(c), 400, keep, client.err,
                                    cfg->http_auth_header);
                return;
            }
            key = (sl_http_slice){client.text, strlen(client.text)};
            have_client = true;
        } else {
            const sl_http_header *h = sl_http_find_header(r, cfg->http_auth_header);
            if (h)
                key = h->value;
        }
        char policy[SL_HTTP_NAME_MAX + 1];
        sl_http_slice seg;
        bool envoy = sl_auth_policy_segment(r->path, &seg);
        long plen = sl_http_path_decode(seg.ptr, seg.len, policy, sizeof policy);
        if (plen <= 0) {
            sl_http_write_error(sl_conn_out(c), 400, keep,
                                plen == 0 ? "the path names no policy"
                                          : "the policy in the path is not a valid name",
                                "policy");
            return;
        }
        /* A policy keyed by the request: the store key is its template's
         * rendering, which forward-auth alone can make, and is named in full,
         * as SL.POLICY names it (sl_policy_key). An unknown policy is the
         * check's 400, below. */
        const sl_config *config = atomic_load_explicit(&w->srv->config, memory_order_acquire);
        const sl_policy *p = sl_config_policy(config, policy, (size_t)plen);
        char rendered[SL_HTTP_KEY_MAX];
        if (p && p->keyed_by_request) {
            size_t cap = cfg->max_key_bytes > 0 && cfg->max_key_bytes < sizeof rendered
                             ? cfg->max_key_bytes
                             : sizeof rendered;
            size_t n = sl_auth_render(c, r, p, key, have_client ? &client : NULL, envoy, seg,
                                      rendered, cap, keep);
            if (n == 0)
                return;
            key = (sl_http_slice){rendered, n};
        }
        /* After a trailing path the query string is the client's own (Envoy
         * appends it): none of it is read, so that a client cannot choose its
         * own tier or cost (?tier=paid, ?cost=0), and its other parameters
         * are no error. */
        rc = sl_http_check_auth(chk, policy, (size_t)plen, key.ptr, key.len,
                                cfg->http_auth_header, envoy ? NULL : r->query.ptr,
                                envoy ? 0 : r->query.len);
    } else if (sl_method_is(r, "POST") && (!reserve || r->content_length > 0)) {
        rc = sl_http_check_from_json(chk, body, (size_t)r->content_length);
    } else {
        rc = sl_http_check_from_query(chk, r->query.ptr, r->query.len);
    }
    if (rc != 0) {
        sl_http_write_error(sl_conn_out(c), chk->status, keep, chk->errstr, chk->field);
        return;
    }
    /* HEAD on /v1/check asks without consuming (a safe method). On
     * forward-auth the method is that of the client's request being
     * authorized (Envoy keeps it), and a HEAD to the application is a
     * request like any other: it takes. */
    bool head = sl_method_is(r, "HEAD");
    uint32_t flags = (keep ? SL_HTTP_KEEP : 0) | (head ? SL_HTTP_HEAD : 0) |
                     (chk->multi ? SL_HTTP_MULTI : 0);
    if (chk->ttl_ms >= 0 && !reserve) {
        sl_http_write_error(sl_conn_out(c), 400, keep, "ttl_ms is a reservation's: POST it to "
                            "/v1/reserve", "ttl_ms");
        return;
    }
    if (reserve && !chk->policy) {
        sl_http_write_error(sl_conn_out(c), 400, keep, "a reservation is of a policy: policy is "
                            "required", "policy");
        return;
    }
    sl_http_run_check(c, chk, flags, forward_auth ? w->srv->cfg.http_deny_status : 0,
                      head && !forward_auth, reserve);
}

/* GET /v1/usage?policy=P&key=K[&tier=T]: SL.USAGE over HTTP. */
static void sl_http_usage(sl_conn *c, const sl_http_request *r, bool keep, bool head)
{
    sl_http_check *chk = sl_http_worker_check(c->w);
    if (!chk) {
        sl_http_write_error(sl_conn_out(c), 503, keep, "out of memory", NULL);
        return;
    }
    /* Told of a policy's limits only: without one the decoder would ask
     * for an ad-hoc limit. */
    size_t pos = 0;
    bool named = false;
    sl_http_slice name, value;
    while (!named && sl_http_query_next(r->query.ptr, r->query.len, &pos, &name, &value))
        named = name.len == 6 && memcmp(name.ptr, "policy", 6) == 0;
    if (named && sl_http_check_from_query(chk, r->query.ptr, r->query.len) != 0) {
        sl_http_write_error(sl_conn_out(c), chk->status, keep, chk->errstr, chk->field);
        return;
    }
    if (!named || !chk->policy) {
        sl_http_write_error(sl_conn_out(c), 400, keep,
                            "policy is required: usage is told of a policy's limits", "policy");
        return;
    }
    if (chk->items[0].cost != 1 || chk->tokens != 0) {
        sl_http_write_error(sl_conn_out(c), 400, keep, "usage takes nothing: no cost or tokens",
                            chk->tokens ? "tokens" : "cost");
        return;
    }
    chk->items[0].cost = 0; /* a peek of nothing: what is used and left now */
    sl_http_run_check(c, chk, SL_HTTP_USAGE | (keep ? SL_HTTP_KEEP : 0) | (head ? SL_HTTP_HEAD : 0),
                      0, true, false);
}

/* POST /v1/settle {"reservation": ID, "cost": C, "tokens": N}: SL.SETTLE
 * over HTTP (cost and tokens, when left out, are the estimate's). */
static void sl_http_settle(sl_conn *c, const sl_http_request *r, const char *body, bool keep)
{
    cJSON *root = r->content_length > 0
                      ? sl_cjson_parse(body, (size_t)r->content_length, NULL)
                      : NULL;
    const char *id = NULL, *bad = NULL, *field = NULL;
    int64_t amount[2];
    bool has[2] = {false, false};
    if (!cJSON_IsObject(root))
        bad = "the body must be a JSON object: {\"reservation\": ID, \"cost\": C, "
              "\"tokens\": N}";
    for (const cJSON *m = root && !bad ? root->child : NULL; m && !bad; m = m->next) {
        const char *f = m->string ? m->string : "";
        int which = strcmp(f, "cost") == 0 ? 0 : strcmp(f, "tokens") == 0 ? 1 : -1;
        field = f;
        if (strcmp(f, "reservation") == 0) {
            if (!cJSON_IsString(m))
                bad = "reservation must be a string, as /v1/reserve gave it";
            else
                id = m->valuestring;
        } else if (which < 0) {
            bad = "unknown field: a settle takes reservation, cost and tokens";
        } else if (!cJSON_IsNumber(m) || m->valuedouble != (double)(int64_t)m->valuedouble ||
                   m->valuedouble < 0 || m->valuedouble > 9007199254740992.0) {
            bad = which ? "tokens must be a non-negative integer"
                        : "cost must be a non-negative integer";
        } else {
            amount[which] = (int64_t)m->valuedouble;
            has[which] = true;
        }
    }
    if (!bad && !id) {
        bad = "reservation is required";
        field = "reservation";
    }
    char err[256];
    int status = 400;
    sl_cmd_ctx ctx;
    sl_check k;
    if (!bad) {
        sl_conn_cmd_ctx(c, &ctx);
        status = sl_settle_prepare(&ctx, &k, id, strlen(id), has[0] ? &amount[0] : NULL,
                                   has[1] ? &amount[1] : NULL, err, sizeof err);
        bad = status ? err : NULL;
        field = status == 400 ? "reservation" : NULL;
    }
    if (bad) {
        char shown[32];
        snprintf(shown, sizeof shown, "%s", field ? field : "");
        sl_http_write_error(sl_conn_out(c), status, keep, bad, field ? shown : NULL);
        cJSON_Delete(root);
        return;
    }
    cJSON_Delete(root);
    k.render = SL_RENDER_FACE;
    k.face_flags = keep ? SL_HTTP_KEEP : 0;
    k.face_status = 0;
    sl_check_submit(&ctx, &k);
}

/* ---- adaptive concurrency: /v1/acquire, /v1/release, /v1/limit ---- */

static void sl_http_write_json(sl_conn *c, int status, bool keep, cJSON *obj, bool head);

static const char *const sl_shed_reasons[] = {"admitted", "full", "reserved", "partition"};

/* POST /v1/acquire: a lease (200), or 503 with Retry-After when shed. */
static void sl_http_acquire(sl_conn *c, const sl_http_request *r, const char *body, bool keep)
{
    sl_acquire_body b;
    const char *bad, *field;
    char err[200];
    sl_cmd_ctx ctx;
    sl_conn_cmd_ctx(c, &ctx);
    const sl_adaptive_policy *p = NULL;
    int cls = SL_PRIO_DEFAULT, part = 0, pindex = -1;
    sl_limiter_config cfg;
    if (sl_acquire_body_parse(body, r->content_length > 0 ? (size_t)r->content_length : 0, false,
                              &b, &bad, &field) == 0) {
        if (b.priority_num >= 0)
            cls = (int)b.priority_num;
        else if (b.priority && (cls = sl_priority_parse(b.priority, b.priority_len)) < 0)
            bad = "priority must be critical, default or sheddable (or 0, 1, 2)",
            field = "priority";
        else if (b.policy) {
            p = ctx.config ? sl_config_adaptive(ctx.config, b.policy, b.policy_len) : NULL;
            field = "policy";
            if (!p) {
                bool rate = ctx.config && sl_config_policy(ctx.config, b.policy, b.policy_len);
                snprintf(err, sizeof err, rate ? "policy '%.*s' is a rate limit: check it at /v1/check"
                                               : "unknown adaptive policy '%.*s'",
                         (int)(b.policy_len > 64 ? 64 : b.policy_len), b.policy);
                bad = err;
            } else if (p->cfg.shed.partitions > 0 && !b.partition) {
                snprintf(err, sizeof err, "policy '%s' has partitions: name one", p->name);
                bad = err, field = "partition";
            } else if (b.partition &&
                       (part = sl_adaptive_partition(p, b.partition, b.partition_len)) < 0) {
                snprintf(err, sizeof err, "unknown partition '%.*s' for policy '%s'",
                         (int)(b.partition_len > 32 ? 32 : b.partition_len), b.partition,
                         p->name);
                bad = err, field = "partition";
            } else {
                pindex = (int)(p - ctx.config->adaptive);
                field = NULL;
            }
        } else if (!sl_adaptive_adhoc(&cfg, b.estimator, b.estimator_len, b.max_in_flight,
                                      b.ttl_ms, b.min_limit, b.initial_limit, err, sizeof err)) {
            bad = err;
            field = NULL;
        }
    }
    sl_limiter_decision d;
    char lease[SL_LEASE_TEXT + 1];
    int rc = bad ? SL_OK
                 : sl_adaptive_acquire(&ctx, b.key, b.key_len, p, pindex, &cfg, cls, part, &d,
                                       lease);
    /* field may point into b's tree (an unknown field's name): copy it first */
    char field_copy[64];
    if (field) {
        snprintf(field_copy, sizeof field_copy, "%s", field);
        field = field_copy;
    }
    sl_acquire_body_free(&b); /* b's strings are not read past here */
    if (bad || rc != SL_OK) {
        sl_http_write_error(sl_conn_out(c), rc == SL_ERR_NOMEM ? 503 : 400, keep,
                            bad ? bad : sl_strerror(rc), bad ? field : "key");
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "admitted", d.admitted);
    if (d.admitted)
        cJSON_AddStringToObject(o, "lease", lease);
    else
        cJSON_AddStringToObject(o, "reason", sl_shed_reasons[d.reason & 3]);
    cJSON_AddNumberToObject(o, "limit", (double)d.limit);
    cJSON_AddNumberToObject(o, "in_flight", (double)d.in_flight);
    cJSON_AddNumberToObject(o, "remaining", (double)d.remaining);
    if (d.admitted) {
        sl_http_write_json(c, 200, keep, o, false);
        return;
    }
    /* Shed: 503, and when to try again, in whole seconds rounded up. */
    int64_t ms = (d.retry_after_ns + 999999) / 1000000;
    cJSON_AddNumberToObject(o, "retry_after_ms", (double)ms);
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!text) {
        sl_http_write_error(sl_conn_out(c), 503, keep, "out of memory", NULL);
        return;
    }
    char extra[64];
    int64_t secs = (ms + 999) / 1000;
    snprintf(extra, sizeof extra, "Retry-After: %lld\r\n", (long long)(secs > 0 ? secs : 1));
    size_t n = strlen(text);
    text[n] = '\n';
    sl_http_write_response(sl_conn_out(c), 503, keep, "application/json", extra, text, n + 1,
                           false);
    cJSON_free(text);
}

/* POST /v1/release: {"released": bool}. */
static void sl_http_release(sl_conn *c, const sl_http_request *r, const char *body, bool keep)
{
    sl_acquire_body b;
    const char *bad, *field;
    int outcome = SL_ADAPT_SUCCESS, held = 0, rc = SL_OK;
    if (sl_acquire_body_parse(body, r->content_length > 0 ? (size_t)r->content_length : 0, true,
                              &b, &bad, &field) == 0 &&
        b.outcome && (outcome = sl_outcome_parse(b.outcome, b.outcome_len)) < 0)
        bad = "outcome must be success, dropped or ignored", field = "outcome";
    if (!bad) {
        sl_cmd_ctx ctx;
        sl_conn_cmd_ctx(c, &ctx);
        rc = sl_adaptive_release(&ctx, b.key, b.key_len, b.policy, b.policy_len, b.lease,
                                 b.lease_len, (sl_adapt_outcome)outcome, b.latency_ns, &held);
    }
    /* field may point into b's tree (an unknown field's name): copy it first */
    char field_copy[64];
    if (field) {
        snprintf(field_copy, sizeof field_copy, "%s", field);
        field = field_copy;
    }
    sl_acquire_body_free(&b);
    if (bad || rc != SL_OK) {
        sl_http_write_error(sl_conn_out(c), rc == SL_ERR_NOMEM ? 503 : 400, keep,
                            bad ? bad : sl_strerror(rc), bad ? field : "key");
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "released", held == 1);
    sl_http_write_json(c, 200, keep, o, false);
}

/* GET /v1/limit?key=K[&policy=P]: what the key's adaptive limiter holds. */
static void sl_http_limit(sl_conn *c, const sl_http_request *r, bool keep, bool head)
{
    char key[SL_HTTP_KEY_MAX], pname[SL_HTTP_NAME_MAX];
    long klen = sl_http_query_param(r->query.ptr, r->query.len, "key", key, sizeof key);
    long plen = sl_http_query_param(r->query.ptr, r->query.len, "policy", pname, sizeof pname);
    if (klen <= 0 || plen == SL_HTTP_BAD_ESCAPE || plen == SL_HTTP_TOO_LONG || plen == 0) {
        sl_http_write_error(sl_conn_out(c), 400, keep,
                            klen <= 0 ? "key is required, at most 1024 bytes, percent-encoded"
                                      : "policy must be a name of at most 64 bytes",
                            klen <= 0 ? "key" : "policy");
        return;
    }
    sl_cmd_ctx ctx;
    sl_conn_cmd_ctx(c, &ctx);
    sl_limiter_stats st;
    int found;
    int rc = sl_adaptive_stats(&ctx, key, (size_t)klen, plen > 0 ? pname : NULL,
                               plen > 0 ? (size_t)plen : 0, &st, &found);
    if (rc != SL_OK || !found) {
        sl_http_write_error(sl_conn_out(c), rc == SL_OK ? 404 : 400, keep,
                            rc == SL_OK ? "no adaptive limit for this key" : sl_strerror(rc),
                            "key");
        return;
    }
    static const char *const prio[] = {"critical", "default", "sheddable"};
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "estimator", sl_adapt_kind_name(st.kind));
    cJSON_AddNumberToObject(o, "limit", (double)st.limit);
    cJSON_AddNumberToObject(o, "min_limit", (double)st.min_limit);
    cJSON_AddNumberToObject(o, "max_limit", (double)st.max_limit);
    cJSON_AddNumberToObject(o, "in_flight", (double)st.in_flight);
    cJSON_AddNumberToObject(o, "admitted", (double)st.admitted);
    cJSON_AddNumberToObject(o, "refused", (double)st.refused);
    cJSON_AddNumberToObject(o, "completed", (double)st.completed);
    cJSON_AddNumberToObject(o, "dropped", (double)st.dropped);
    cJSON_AddNumberToObject(o, "expired", (double)st.expired);
    cJSON_AddNumberToObject(o, "baseline_ms", (double)st.rtt_base_ns / 1e6);
    cJSON_AddNumberToObject(o, "latency_ms", (double)st.rtt_short_ns / 1e6);
    cJSON_AddBoolToObject(o, "probing", st.probing);
    cJSON *by = cJSON_AddObjectToObject(o, "priorities");
    for (int k = 0; k < st.classes && k < 3; k++) {
        cJSON *e = cJSON_AddObjectToObject(by, prio[k]);
        cJSON_AddNumberToObject(e, "in_flight", (double)st.class_in_flight[k]);
        cJSON_AddNumberToObject(e, "refused", (double)st.refused_by_class[k]);
    }
    sl_http_write_json(c, 200, keep, o, head);
}

/* ---- for operators: /v1/keys/{key}, /v1/policies ---- */

/* Writes a cJSON object as the JSON body (and frees it), or a 503 when it
 * could not be built. */
static void sl_http_write_json(sl_conn *c, int status, bool keep, cJSON *obj, bool head)
{
    char *text = obj ? cJSON_PrintUnformatted(obj) : NULL;
    cJSON_Delete(obj);
    if (!text) {
        sl_http_write_error(sl_conn_out(c), 503, keep, "out of memory", NULL);
        return;
    }
    size_t n = strlen(text);
    text[n] = '\n'; /* cJSON's terminator becomes the body's line end */
    sl_http_write_response(sl_conn_out(c), status, keep, "application/json", NULL, text, n + 1, head);
    cJSON_free(text);
}

/* GET /v1/keys/{key}: what the store holds for the key, as SL.INSPECT
 * says it (docs/commands.md), without changing it; DELETE forgets it, as
 * SL.RESET does. The key is the rest of the path, percent-decoded. */
static void sl_http_key(sl_conn *c, const sl_http_request *r, sl_http_slice path, bool keep,
                        bool head)
{
    char key[4096];
    long klen = sl_http_path_decode(path.ptr + 9, path.len - 9, key, sizeof key);
    const sl_backend *be = c->w->srv->backend;
    if (klen <= 0) {
        sl_http_write_error(sl_conn_out(c), 400, keep, "the key (after /v1/keys/) is empty or malformed",
                            "key");
        return;
    }
    if (sl_method_is(r, "DELETE")) {
        sl_cmd_ctx ctx;
        sl_conn_cmd_ctx(c, &ctx);
        sl_take_item item = {key, (size_t)klen, NULL, 0};
        sl_check k;
        sl_check_init(&k, SL_OP_RESET, SL_RENDER_FACE, 1, &item);
        k.face_flags = SL_HTTP_RESET | (keep ? SL_HTTP_KEEP : 0) | (head ? SL_HTTP_HEAD : 0);
        sl_check_submit(&ctx, &k);
        return;
    }
    sl_key_info info;
    int rc = be->ops->inspect ? be->ops->inspect(c->w->bw, key, (size_t)klen, &info)
                              : SL_ERR_UNSUPPORTED;
    if (rc < 0) {
        sl_http_write_error(sl_conn_out(c), sl_http_status(rc), keep, sl_strerror(rc), "key");
        return;
    }
    if (rc == 0) {
        sl_http_write_error(sl_conn_out(c), 404, keep, "the store holds no state for this key", "key");
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "algorithm", sl_algorithm_name(info.algorithm));
    cJSON_AddNumberToObject(o, "bytes", (double)info.state_bytes);
    int64_t reset_ms = sl_ns_ceil_ms(info.expires_at - c->w->now);
    cJSON_AddNumberToObject(o, "reset_after_ms",
                            info.expires_at >= SL_TIME_MAX ? -1 : (double)reset_ms);
    cJSON_AddBoolToObject(o, "carried", info.carried);
    if (info.carried) {
        cJSON_AddNumberToObject(o, "limit", (double)info.limit);
        cJSON_AddNumberToObject(o, "period_ms", (double)sl_ns_ceil_ms(info.period_ns));
        cJSON_AddNumberToObject(o, "used", (double)info.used);
    }
    sl_http_write_json(c, 200, keep, o, head);
}

/* A set of a policy's limits, as SL.POLICIES lists it. */
static cJSON *sl_http_limits_json(const sl_policy *p, const sl_limit_set *set, bool global)
{
    cJSON *list = cJSON_CreateArray();
    for (size_t i = 0; list && i < set->n; i++) {
        const sl_limit *l = &set->l[i].limit;
        char name[SL_POLICY_LIMIT_NAME_ROOM];
        sl_policy_limit_name(p->name, set->l[i].name, global, name, sizeof name);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(list, o);
        cJSON_AddStringToObject(o, "name", name);
        cJSON_AddStringToObject(o, "algorithm", sl_algorithm_name(l->algorithm));
        cJSON_AddNumberToObject(o, "limit", (double)l->limit);
        cJSON_AddNumberToObject(o, "period_ms", (double)sl_ns_ceil_ms(l->period_ns));
        cJSON_AddNumberToObject(o, "burst", (double)l->burst);
        cJSON_AddStringToObject(o, "cost", set->l[i].unit == SL_UNIT_TOKENS ? "tokens" : "requests");
        if (l->algorithm == SL_FIXED_WINDOW || l->algorithm == SL_SLIDING_WINDOW) {
            char off[8];
            sl_utc_offset_text(l->utc_offset_ns, off);
            cJSON_AddStringToObject(o, "utc_offset", off);
        }
        if (l->months > 0) {
            cJSON_AddNumberToObject(o, "months", (double)l->months);
            cJSON_AddNumberToObject(o, "reset_day", (double)(l->reset_day > 0 ? l->reset_day : 1));
        }
    }
    return list;
}

static void sl_json_param(void *arg, const char *name, const char *text)
{
    cJSON_AddStringToObject(arg, name, text);
}

/* An adaptive policy, as SL.POLICIES lists it. */
static cJSON *sl_http_adaptive_json(const sl_adaptive_policy *p)
{
    static const char *const prio[] = {"critical", "default", "sheddable"};
    const sl_adapt_config *a = &p->cfg.adapt;
    const sl_shed_config *sh = &p->cfg.shed;
    char t[32];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", p->name);
    cJSON_AddStringToObject(o, "algorithm", "adaptive");
    cJSON_AddStringToObject(o, "estimator", sl_adapt_kind_name(a->kind));
    cJSON_AddNumberToObject(o, "min_limit", (double)a->min_limit);
    cJSON_AddNumberToObject(o, "max_limit", (double)a->max_limit);
    cJSON_AddNumberToObject(o, "initial_limit", (double)a->initial_limit);
    cJSON_AddNumberToObject(o, "ttl_ms", (double)sl_ns_ceil_ms(p->cfg.ttl_ns));
    cJSON *params = cJSON_AddObjectToObject(o, "parameters");
    if (params)
        sl_adaptive_params(p, sl_json_param, params);
    cJSON *reserve = cJSON_AddObjectToObject(o, "reserve");
    for (int k = 0; reserve && k < 3; k++)
        cJSON_AddStringToObject(reserve, prio[k], sl_permille_text(sh->reserve_permille[k], t));
    cJSON *parts = cJSON_AddArrayToObject(o, "partitions");
    for (int i = 0; parts && i < sh->partitions; i++) {
        cJSON *q = cJSON_CreateObject();
        cJSON_AddItemToArray(parts, q);
        cJSON_AddStringToObject(q, "name", p->partition[i]);
        cJSON_AddStringToObject(q, "share", sl_permille_text(sh->guarantee_permille[i], t));
        cJSON_AddBoolToObject(q, "lend", sh->lends[i]);
    }
    cJSON_AddNumberToObject(o, "idle_ms", (double)sl_ns_ceil_ms(sh->idle_ns));
    return o;
}

/* GET /v1/policies: the policies in force, as SL.POLICIES lists them. */
static void sl_http_policies(sl_conn *c, bool keep, bool head)
{
    const sl_config *cfg = atomic_load_explicit(&c->w->srv->config, memory_order_acquire);
    cJSON *root = cJSON_CreateObject();
    cJSON *list = cJSON_AddArrayToObject(root, "policies");
    for (size_t i = 0; cfg && list && i < cfg->npolicies; i++) {
        const sl_policy *p = &cfg->policies[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToArray(list, o);
        cJSON_AddStringToObject(o, "name", p->name);
        cJSON_AddItemToObject(o, "limits", sl_http_limits_json(p, &p->limits, false));
        cJSON_AddStringToObject(o, "key", p->key);
        if (p->ntemplates == 2)
            cJSON_AddStringToObject(o, "key_fallback", p->key_fallback);
        cJSON_AddBoolToObject(o, "shadow", p->shadow);
        cJSON *tiers = cJSON_AddObjectToObject(o, "tiers");
        for (size_t t = 0; tiers && t < p->ntiers; t++)
            cJSON_AddItemToObject(tiers, p->tiers[t].name,
                                  sl_http_limits_json(p, &p->tiers[t].limits, false));
        cJSON_AddItemToObject(o, "global", sl_http_limits_json(p, &p->global, true));
    }
    for (size_t i = 0; cfg && list && i < cfg->nadaptive; i++)
        cJSON_AddItemToArray(list, sl_http_adaptive_json(&cfg->adaptive[i]));
    sl_http_write_json(c, 200, keep, root, head);
}

/* Is `path` one of --http-open's paths: equal to an entry, or under an
 * entry that ends in '/'? */
static bool sl_path_open(const char *open, sl_http_slice path)
{
    while (open && *open) {
        const char *end = strchr(open, ',');
        size_t n = end ? (size_t)(end - open) : strlen(open);
        if (n > 0 && (open[n - 1] == '/' ? path.len >= n : path.len == n) &&
            memcmp(path.ptr, open, n) == 0)
            return true;
        open = end ? end + 1 : NULL;
    }
    return false;
}

/* Does the request carry "Authorization: Bearer <token>" (the scheme in any
 * case, RFC 9110), compared in constant time? */
static bool sl_http_bears(const sl_http_request *r, const char *token)
{
    const sl_http_header *h = sl_http_find_header(r, "authorization");
    if (!h || h->value.len < 7 || strncasecmp(h->value.ptr, "bearer ", 7) != 0)
        return false;
    const char *v = h->value.ptr + 7;
    size_t n = h->value.len - 7;
    while (n > 0 && *v == ' ') {
        v++;
        n--;
    }
    return sl_equal_ct(v, n, token, strlen(token));
}

/* Does the request carry the token as the password of HTTP Basic (any user
 * name), compared in constant time? Only the live page's paths take it
 * (sl_ui_basic_allowed): a browser sends Basic credentials it has been
 * given with every request to the origin, even one another site's page
 * makes, so they open nothing that changes state. */
static bool sl_http_basic(const sl_http_request *r, const char *token)
{
    const sl_http_header *h = sl_http_find_header(r, "authorization");
    char pw[SL_BASIC_MAX];
    long n = h ? sl_basic_password(h->value.ptr, h->value.len, pw, sizeof pw) : -1;
    return n >= 0 && sl_equal_ct(pw, (size_t)n, token, strlen(token));
}

/* ---- POST /json: envoyproxy/ratelimit's ShouldRateLimit in proto3 JSON ---- */

/* The answer: 200 with the RateLimitResponse for OK, 429 for OVER_LIMIT,
 * as the reference; 503 when the store could not answer. */
static void sl_http_rls_write(sl_buf *out, sl_rls_call *call, bool keep)
{
    sl_rls_response resp;
    char msg[300];
    if (sl_rls_result(call, &resp, msg, sizeof msg) != SL_OK) {
        sl_http_write_error(out, 503, keep, msg, NULL);
        return;
    }
    size_t n;
    char *json = sl_rls_response_to_json(&resp, &n);
    if (!json) {
        sl_http_write_error(out, 503, keep, "out of memory", NULL);
        return;
    }
    sl_http_write_response(out, resp.overall_code == SL_RLS_CODE_OVER_LIMIT ? 429 : 200, keep,
                           "application/json", NULL, json, n, false);
    sl_free(json);
}

/* A call the store answered later: written in its slot, in order. */
static void sl_http_rls_done(sl_rls_call *call, void *arg)
{
    sl_slot *s = arg;
    sl_conn *conn = s->conn;
    if (conn)
        sl_http_rls_write(&s->reply, call, s->rls_keep);
    sl_rls_free(call);
    s->rls = NULL;
    if (!conn) {
        sl_slot_free(s); /* closed meanwhile */
        return;
    }
    s->done = true;
    conn->inflight--;
    sl_conn_slots_drain(conn);
}

static void sl_http_rls_json(sl_conn *c, const sl_http_request *r, const char *body, bool keep)
{
    sl_rls_ctx ctx;
    if (!sl_rls_ctx_of(c->w, &ctx)) {
        sl_http_write_error(sl_conn_out(c), 503, keep, SL_RLS_NO_CONFIG, NULL);
        return;
    }
    if (ctx.logged)
        ctx.logged = sl_dlog_rls_http;
    sl_rls_request req;
    char err[256];
    int rc = sl_rls_request_from_json(&req, body, (size_t)r->content_length, NULL, err,
                                      sizeof err);
    if (rc != SL_RLS_OK) {
        sl_http_write_error(sl_conn_out(c), rc == SL_RLS_ENOMEM ? 503 : 400, keep,
                            rc == SL_RLS_ENOMEM ? "out of memory" : err, NULL);
        return;
    }
    /* The slot is taken first, so that a call the store answers later has
     * its place; one answered now gives it back. */
    sl_slot *s = sl_slot_new(c->w, c->out.proto);
    if (!s) {
        sl_rls_request_free(&req);
        sl_http_write_error(sl_conn_out(c), 503, keep, "out of memory", NULL);
        return;
    }
    sl_rls_call *call;
    rc = sl_rls_start(&ctx, &req, sl_http_rls_done, s, &call, err, sizeof err);
    if (rc < 0) {
        sl_slot_free(s);
        sl_rls_request_free(&req);
        sl_http_write_error(sl_conn_out(c), rc == SL_ERR_NOMEM ? 503 : 400, keep, err, NULL);
    } else if (rc == SL_OK) {
        sl_slot_free(s);
        sl_http_rls_write(sl_conn_out(c), call, keep);
        sl_rls_free(call);
    } else {
        s->conn = c;
        s->rls = call;
        s->rls_keep = keep;
        if (c->slots_tail)
            c->slots_tail->next = s;
        else
            c->slots = s;
        c->slots_tail = s;
        c->inflight++;
    }
}

/* Routes one complete request (its body, content_length bytes, at `body`). */
static void sl_http_route(sl_conn *c, const sl_http_request *r, const char *body)
{
    bool keep = r->keep_alive;
    bool get = sl_method_is(r, "GET") || sl_method_is(r, "HEAD");
    bool head = sl_method_is(r, "HEAD");
    sl_http_slice path = r->path;

    /* With a token (--http-token or --requirepass), only /healthz, /healthcheck and the
     * paths --http-open names are served without it: every other path can
     * take from a limit, or tells who is being limited. */
    const char *token = sl_http_token(&c->w->srv->cfg);
    bool ui = sl_ui_basic_allowed(r);
    if (token && !sl_path_is(path, "/healthz") && !sl_path_is(path, "/healthcheck") &&
        !sl_path_open(c->w->srv->cfg.http_open, path) &&
        !sl_http_bears(r, token) && !(ui && sl_http_basic(r, token))) {
        static const char body401[] =
            "{\"error\":\"authentication required: send Authorization: Bearer <token> "
            "(--http-token, or --requirepass)\",\"field\":\"authorization\"}\n";
        /* The live page's: a browser asks its user for Basic credentials. */
        static const char body401_ui[] =
            "{\"error\":\"authentication required: the token (--http-token, or "
            "--requirepass) as the password of HTTP Basic, any user name; or Authorization: "
            "Bearer <token>\",\"field\":\"authorization\"}\n";
        if (ui && sl_path_is(path, "/ui"))
            sl_http_write_response(sl_conn_out(c), 401, keep, "application/json",
                                   "WWW-Authenticate: Basic realm=\"sluice\", charset=\"UTF-8\"\r\n",
                                   body401_ui, sizeof body401_ui - 1, head);
        else
            sl_http_write_response(sl_conn_out(c), 401, keep, "application/json",
                                   "WWW-Authenticate: Bearer realm=\"sluice\"\r\n",
                                   ui ? body401_ui : body401,
                                   (ui ? sizeof body401_ui : sizeof body401) - 1, head);
        if (!keep)
            c->closing = true;
        return;
    }

    if (sl_path_is(path, "/v1/check")) {
        if (get || sl_method_is(r, "POST"))
            sl_http_check_request(c, r, body, keep, false, false);
        else
            sl_http_write_response(sl_conn_out(c), 405, keep, "application/json",
                                   "Allow: GET, HEAD, POST\r\n",
                                   "{\"error\":\"method not allowed\"}\n", 31, head);
    } else if (path.len > 9 && memcmp(path.ptr, "/v1/auth/", 9) == 0) {
        /* Any method: a proxy asks with the client's own (Envoy's ext_authz
         * does), and the body, if any, is not read. */
        sl_http_check_request(c, r, body, keep, true, false);
    } else if (path.len >= 9 && memcmp(path.ptr, "/v1/keys/", 9) == 0) {
        if (get || sl_method_is(r, "DELETE"))
            sl_http_key(c, r, path, keep, head);
        else
            sl_http_write_response(sl_conn_out(c), 405, keep, "application/json",
                                   "Allow: GET, HEAD, DELETE\r\n",
                                   "{\"error\":\"method not allowed\"}\n", 31, head);
    } else if (sl_path_is(path, "/v1/reserve") || sl_path_is(path, "/v1/settle")) {
        if (!sl_method_is(r, "POST"))
            sl_http_write_response(sl_conn_out(c), 405, keep, "application/json",
                                   "Allow: POST\r\n", "{\"error\":\"method not allowed\"}\n", 31,
                                   head);
        else if (sl_path_is(path, "/v1/reserve"))
            sl_http_check_request(c, r, body, keep, false, true);
        else
            sl_http_settle(c, r, body, keep);
    } else if (sl_path_is(path, "/v1/acquire") || sl_path_is(path, "/v1/release")) {
        if (!sl_method_is(r, "POST"))
            sl_http_write_response(sl_conn_out(c), 405, keep, "application/json",
                                   "Allow: POST\r\n", "{\"error\":\"method not allowed\"}\n", 31,
                                   head);
        else if (sl_path_is(path, "/v1/acquire"))
            sl_http_acquire(c, r, body, keep);
        else
            sl_http_release(c, r, body, keep);
    } else if (sl_path_is(path, "/v1/limit") && get) {
        sl_http_limit(c, r, keep, head);
    } else if (sl_path_is(path, "/v1/policies") && get) {
        sl_http_policies(c, keep, head);
    } else if (sl_path_is(path, "/v1/usage") && get) {
        sl_http_usage(c, r, keep, head);
    } else if (sl_path_is(path, "/v1/top") && get) {
        sl_http_top(c, r, keep, head);
    } else if (sl_path_is(path, "/healthz") && get) {
        sl_http_write_response(sl_conn_out(c), 200, keep, "application/json", NULL,
                               "{\"status\":\"ok\"}\n", 16, head);
    } else if (sl_path_is(path, "/json")) {
        if (sl_method_is(r, "POST"))
            sl_http_rls_json(c, r, body, keep);
        else
            sl_http_write_response(sl_conn_out(c), 405, keep, "application/json",
                                   "Allow: POST\r\n", "{\"error\":\"method not allowed\"}\n", 31,
                                   head);
    } else if (sl_path_is(path, "/healthcheck") && get) {
        /* envoyproxy/ratelimit's: OK once there is a configuration to serve. */
        if (atomic_load(&c->w->srv->envoy))
            sl_http_write_response(sl_conn_out(c), 200, keep, "text/plain", NULL, "OK\n", 3,
                                   head);
        else
            sl_http_write_response(sl_conn_out(c), 503, keep, "text/plain", NULL,
                                   "no Envoy rate limit configuration (--envoy-config)\n", 51,
                                   head);
    } else if (sl_path_is(path, "/metrics") && get) {
        sl_buf text;
        sl_buf_init(&text, 2, 0);
        sl_metrics_render(c->w->srv, &text);
        if (text.failed)
            sl_http_write_error(sl_conn_out(c), 503, keep, "out of memory", NULL);
        else
            sl_http_write_response(sl_conn_out(c), 200, keep, "text/plain; version=0.0.4; charset=utf-8",
                                   NULL, text.data, text.len, head);
        sl_buf_free(&text);
    } else if (sl_ui_route(c, r, keep, head)) {
        /* /ui, /v1/stats, /v1/simulate: the live page's (ui.c) */
    } else if (sl_path_is(path, "/healthz") || sl_path_is(path, "/healthcheck") ||
               sl_path_is(path, "/metrics") ||
               sl_path_is(path, "/v1/policies") || sl_path_is(path, "/v1/usage") ||
               sl_path_is(path, "/v1/limit") || sl_path_is(path, "/v1/top")) {
        sl_http_write_response(sl_conn_out(c), 405, keep, "application/json", "Allow: GET, HEAD\r\n",
                               "{\"error\":\"method not allowed\"}\n", 31, head);
    } else {
        sl_http_write_error(sl_conn_out(c), 404, keep, "not found", "path");
    }
    if (!keep)
        c->closing = true;
}

size_t sl_http_serve(sl_conn *c)
{
    if (!c->http) {
        c->http = calloc(1, sizeof *c->http);
        if (!c->http) {
            c->closing = true;
            return c->rlen;
        }
        sl_http_request_init(&c->http->req, c->http->headers, SL_HTTP_HEADERS);
    }
    sl_http_conn *h = c->http;
    sl_http_limits lim;
    sl_http_limits_default(&lim);
    lim.max_body = c->w->srv->cfg.max_request_bytes;
    size_t off = 0;
    while (!c->closing && off < c->rlen && c->inflight < SL_CONN_MAX_INFLIGHT) {
        int n = sl_http_parse_request(c->rbuf + off, c->rlen - off, &h->req, &lim);
        if (n == SL_HTTP_INCOMPLETE)
            break;
        if (n == SL_HTTP_ERROR) {
            sl_http_write_error(sl_conn_out(c), h->req.status, false, h->req.errstr, h->req.field);
            sl_log(SL_LOG_INFO, "http client %llu: %d %s; closing", (unsigned long long)c->id,
                   h->req.status, h->req.errstr);
            c->closing = true;
            break;
        }
        const sl_http_request *r = &h->req;
        if (r->body_too_large) {
            char msg[96];
            snprintf(msg, sizeof msg, "request body larger than --max-request-bytes (%zu)",
                     lim.max_body);
            sl_http_write_error(sl_conn_out(c), 413, false, msg, "content-length");
            c->closing = true;
            break;
        }
        size_t need = (size_t)n + (size_t)r->content_length;
        if (c->rlen - off < need) {
            /* The body is still coming. The head is parsed again when it is
             * complete (a few hundred bytes: cheap). */
            if (r->expect_continue && !h->continue_sent) {
                sl_buf_add(sl_conn_out(c), SL_HTTP_CONTINUE, strlen(SL_HTTP_CONTINUE));
                h->continue_sent = true;
            }
            sl_http_request_reset(&h->req);
            break;
        }
        int64_t started = sl_now_mono();
        sl_counter_add(&c->w->metrics.commands, 1);
        sl_http_route(c, r, c->rbuf + off + n);
        sl_metrics_latency(&c->w->metrics, SL_PROTO_HTTP, sl_now_mono() - started, 1);
        h->continue_sent = false;
        off += need;
        sl_http_request_reset(&h->req);
    }
    if (off > 0) /* the caller moves what is left to the front: start afresh */
        sl_http_request_reset(&h->req);
    return off;
}
