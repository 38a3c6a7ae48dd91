/*
 * rls.c: ShouldRateLimit over the backend layer (rls.h).
 *
 * sl_rls_start matches the descriptors, copies what the answer will need
 * (each rule's limits as Envoy states them, its name, its stats key) into
 * the call, and submits one take per limited descriptor. The call is
 * decided when the last take is: at once with the memory store, later with
 * a remote one. Nothing of the configuration is read after sl_rls_start.
 */
#include "cmd/rls.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"

enum {
    IT_NONE,      /* no rule, an unknown domain, or replaced: OK, no limit */
    IT_UNLIMITED, /* OK, no limit, all remaining */
    IT_ZERO,      /* a limit of 0 requests: OVER_LIMIT, the store not asked */
    IT_TAKE,      /* decided by the store */
};

typedef struct rls_item {
    struct sl_rls_call *call;
    uint8_t kind;
    bool shadow;
    uint8_t n;                          /* limits (IT_TAKE), the one at 0 (IT_ZERO) */
    int64_t hits;
    uint32_t rpu[SL_ENVOY_MAX_LIMITS];  /* each limit as Envoy states it */
    uint8_t unit[SL_ENVOY_MAX_LIMITS];  /* an sl_envoy_unit each */
    int64_t window_left[SL_ENVOY_MAX_LIMITS]; /* a fixed window's time left; 0: not one */
    const char *name;                   /* the rule's name, in the call's arena */
    const char *mkey;                   /* its stats key, in the arena; NULL: none */
    size_t mlen;
    const char *skey;                   /* its first store key, in the arena, for
                                           `logged`; NULL: none */
    size_t slen;
    sl_backend_req r;
    sl_decision d[SL_ENVOY_MAX_LIMITS];
} rls_item;

struct sl_rls_call {
    sl_rls_request req;
    size_t n;
    size_t pending;   /* takes not yet answered */
    bool submitting;  /* in sl_rls_start: a take answered later does not end the call */
    bool cancelled;
    sl_rls_done_fn done;
    void *arg;
    void (*decided)(void *arg, const char *key, size_t len, int64_t hits, bool over, bool near,
                    bool shadow);
    void *decided_arg;
    void (*logged)(void *arg, const sl_rls_decision *d);
    void *logged_arg;
    const char *const *header_names;
    char *arena;      /* names and stats keys */
    sl_rls_status *statuses;
    sl_rls_header headers[3];
    char header_values[3][24];
    rls_item items[];
};

/* Past 80% of its limit used, within it: the reference's near_limit. */
static bool near_limit(const sl_decision *d)
{
    int64_t rem = d->remaining < 0 ? 0 : d->remaining;
    int64_t used = d->limit > rem ? d->limit - rem : 0;
    return used > d->limit / 5 * 4 + d->limit % 5 * 4 / 5;
}

/* The limit an item reports: the one that refused, else the least remaining. */
static size_t binding(const rls_item *it)
{
    if (it->r.failed >= 0 && (size_t)it->r.failed < it->n)
        return (size_t)it->r.failed;
    size_t b = 0;
    for (size_t i = 1; i < it->n; i++)
        if (it->d[i].remaining < it->d[b].remaining)
            b = i;
    return b;
}

/* Tells the face's decision log of each descriptor decided. */
static void call_logged(sl_rls_call *call)
{
    for (size_t i = 0; i < call->n; i++) {
        const rls_item *it = &call->items[i];
        if (!it->skey || (it->kind != IT_TAKE && it->kind != IT_ZERO) ||
            (it->kind == IT_TAKE && it->r.rc != SL_OK))
            continue;
        sl_rls_decision e = {.key = it->skey, .key_len = it->slen, .rule = it->mkey,
                             .rule_len = it->mlen, .hits = it->hits};
        if (it->kind == IT_ZERO) { /* the limit at it->n has 0 requests: never */
            e.over = true;
            e.n = it->n + 1u;
            e.binding = it->n;
            e.retry_after_ns = SL_NEVER;
        } else {
            size_t b = binding(it);
            e.over = it->r.failed >= 0;
            e.n = it->n;
            e.binding = b;
            e.remaining = it->d[b].remaining;
            e.retry_after_ns = e.over ? it->d[b].retry_after_ns : 0;
        }
        e.shadow = it->shadow && e.over;
        call->logged(call->logged_arg, &e);
    }
}

/* Every take is answered: counts them for the face, then ends the call. */
static void call_decided(sl_rls_call *call)
{
    if (call->logged)
        call_logged(call);
    for (size_t i = 0; call->decided && i < call->n; i++) {
        const rls_item *it = &call->items[i];
        if (!it->mkey || (it->kind != IT_TAKE && it->kind != IT_ZERO) ||
            (it->kind == IT_TAKE && it->r.rc != SL_OK))
            continue;
        bool over = it->kind == IT_ZERO || it->r.failed >= 0;
        bool near = !over && near_limit(&it->d[binding(it)]);
        call->decided(call->decided_arg, it->mkey, it->mlen, it->hits, over, near,
                      it->shadow && over);
    }
}

static void item_done(sl_backend_req *r)
{
    rls_item *it = r->owner;
    sl_rls_call *call = it->call;
    if (--call->pending > 0 || call->submitting)
        return;
    call_decided(call);
    if (call->cancelled)
        sl_rls_free(call);
    else
        call->done(call, call->arg);
}

/* The hits a descriptor takes: its own hits_addend, else the request's (0: one). */
static int64_t hits(const sl_rls_request *r, const sl_rls_descriptor *d)
{
    uint64_t h = d->has_hits_addend ? d->hits_addend : r->hits_addend ? r->hits_addend : 1;
    return h > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)h;
}

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* A fixed window's time left at c->now: the reference's windows, at
 * multiples of the unit since the epoch (sl_envoy_limit_align); 0 for
 * another algorithm, whose reset is its state's. */
static int64_t window_left(const sl_rls_ctx *c, const sl_envoy_limit *l)
{
    if (l->algorithm != SL_FIXED_WINDOW)
        return 0;
    int64_t p = sl_envoy_unit_seconds(l->unit) * INT64_C(1000000000);
    /* now + clock_offset is Unix time, both within SL_TIME_MAX: no overflow. */
    int64_t at = (c->now + c->clock_offset_ns) % p;
    return p - (at < 0 ? at + p : at);
}

/* The limits a descriptor takes from: its override's (in *own), or its
 * rule's; sets it->kind, n, rpu, unit, shadow. Returns the limits, NULL
 * for none to take. */
static const sl_envoy_limit *item_limits(const sl_rls_ctx *c, const sl_rls_descriptor *rd,
                                         const sl_envoy_match *m, bool known, rls_item *it,
                                         sl_envoy_limit *own)
{
    const sl_envoy_rule *rule = m->rule;
    const sl_envoy_limit *lim = NULL;
    size_t n = 0;
    if (known && rd->has_limit) {
        sl_status st = sl_envoy_limit_init(own, (sl_envoy_unit)rd->limit_unit,
                                           rd->limit_requests_per_unit, SL_FIXED_WINDOW, 0);
        if (st == SL_OK)
            st = sl_envoy_limit_align(own, c->clock_offset_ns);
        if (st != SL_OK) {
            it->kind = IT_NONE;
            return NULL;
        }
        lim = own;
        n = 1;
    } else if (rule && !m->replaced) {
        if (rule->unlimited) {
            it->kind = IT_UNLIMITED;
            return NULL;
        }
        lim = rule->limits;
        n = rule->nlimits;
        it->shadow = rule->shadow_mode;
    }
    if (!lim) {
        it->kind = IT_NONE;
        return NULL;
    }
    it->kind = IT_TAKE;
    it->n = (uint8_t)n;
    for (size_t j = 0; j < n; j++) {
        it->rpu[j] = lim[j].requests_per_unit;
        it->unit[j] = (uint8_t)lim[j].unit;
        it->window_left[j] = window_left(c, &lim[j]);
        if (lim[j].requests_per_unit == 0 && it->kind == IT_TAKE) {
            it->kind = IT_ZERO;
            it->n = (uint8_t)j;
        }
    }
    return it->kind == IT_TAKE ? lim : NULL;
}

/* What sl_rls_start keeps on the stack when the request fits. */
#define RLS_STACK_DESCRIPTORS 4
#define RLS_STACK_ENTRIES 16
#define RLS_STACK_KEYS 2048

/* Frees what sl_rls_start allocated for a request too large for its stack room. */
static void free_room(char *keybuf, const char *key_room, sl_envoy_descriptor *desc,
                      const sl_envoy_descriptor *desc_room, sl_envoy_entry *entries,
                      const sl_envoy_entry *entries_room, sl_envoy_match *m,
                      const sl_envoy_match *m_room)
{
    if (keybuf != key_room)
        sl_free(keybuf);
    if (desc != desc_room)
        sl_free(desc);
    if (entries != entries_room)
        sl_free(entries);
    if (m != m_room)
        sl_free(m);
}

int sl_rls_start(const sl_rls_ctx *c, sl_rls_request *r, sl_rls_done_fn done, void *arg,
                 sl_rls_call **out, char *err, size_t errlen)
{
    *out = NULL;
    if (r->domain.n == 0)
        return fail(err, errlen, SL_ERR_ARGUMENT, "rate limit domain must not be empty");
    if (r->n_descriptors == 0)
        return fail(err, errlen, SL_ERR_ARGUMENT, "rate limit descriptor list must not be empty");
    size_t n = r->n_descriptors;
    size_t nentries = 0;
    for (size_t i = 0; i < n; i++)
        nentries += r->descriptors[i].n_entries;
    /* The matching's room: on the stack for the common request, a few
     * descriptors of a few entries; else allocated. */
    sl_envoy_descriptor desc_room[RLS_STACK_DESCRIPTORS];
    sl_envoy_entry entries_room[RLS_STACK_ENTRIES];
    sl_envoy_match m_room[RLS_STACK_DESCRIPTORS];
    char key_room[RLS_STACK_KEYS];
    bool small = n <= RLS_STACK_DESCRIPTORS && nentries <= RLS_STACK_ENTRIES;
    sl_envoy_descriptor *desc = small ? desc_room : sl_calloc(n, sizeof *desc);
    sl_envoy_entry *entries = small ? entries_room : sl_calloc(nentries + 1, sizeof *entries);
    sl_envoy_match *m = small ? m_room : sl_calloc(n, sizeof *m);
    int rc = SL_OK;
    sl_rls_call *call = NULL;
    char *keybuf = NULL;
    if (!desc || !m || !entries) {
        rc = SL_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0, e = 0; i < n; i++) {
        const sl_rls_descriptor *rd = &r->descriptors[i];
        desc[i].entries = &entries[e];
        desc[i].n = rd->n_entries;
        for (size_t j = 0; j < rd->n_entries; j++, e++) {
            entries[e].key = rd->entries[j].key.p;
            entries[e].key_len = rd->entries[j].key.n;
            entries[e].value = rd->entries[j].value.p;
            entries[e].value_len = rd->entries[j].value.n;
        }
    }
    bool known = false;
    if (!c->envoy) {
        memset(m, 0, n * sizeof *m); /* no rule for any */
    } else {
        int mr = sl_envoy_match_request(c->envoy, r->domain.p, r->domain.n, desc, n, m);
        if (mr < 0) {
            rc = mr;
            goto out;
        }
        known = mr != SL_ENVOY_DOMAIN_UNKNOWN;
    }

    /* Sizes first: the store keys against the bound, the arena for the
     * names and stats keys, before anything is taken. */
    size_t arena = 0, keymax = 0;
    for (size_t i = 0; i < n; i++) {
        const sl_envoy_rule *rule = m[i].rule;
        if (!known)
            break;
        if (rule) {
            arena += strlen(rule->name) + 1;
            size_t ml = sl_envoy_metric_key(r->domain.p, r->domain.n, &desc[i], &m[i], NULL, 0);
            arena += (ml < SL_RLS_METRIC_KEY_MAX ? ml : SL_RLS_METRIC_KEY_MAX) + 1;
        }
        size_t kl = sl_envoy_store_key(r->domain.p, r->domain.n, &desc[i], &m[i],
                                       SL_ENVOY_MAX_LIMITS + SL_ENVOY_WEEK, NULL, 0);
        if (c->logged)
            arena += kl + 1; /* its first store key, for the log */
        if (c->max_key_bytes && kl > c->max_key_bytes &&
            (r->descriptors[i].has_limit || (rule && !rule->unlimited && !m[i].replaced))) {
            rc = fail(err, errlen, SL_ERR_ARGUMENT,
                      "descriptor %zu: its store key of %zu bytes is over the bound of %zu "
                      "(--max-key-bytes)",
                      i, kl, c->max_key_bytes);
            goto out;
        }
        if (kl > keymax)
            keymax = kl;
        const sl_rls_descriptor *rd = &r->descriptors[i];
        sl_envoy_limit own;
        sl_status st = SL_OK;
        if (rd->has_limit)
            st = sl_envoy_limit_init(&own, (sl_envoy_unit)rd->limit_unit,
                                     rd->limit_requests_per_unit, SL_FIXED_WINDOW, 0);
        if (st != SL_OK) {
            rc = fail(err, errlen, SL_ERR_ARGUMENT,
                      "descriptor %zu: its limit override (%u per unit %d) is not a limit: %s", i,
                      rd->limit_requests_per_unit, (int)rd->limit_unit, sl_strerror(st));
            goto out;
        }
    }
    /* The call, its statuses and its arena in one allocation (the items
     * and statuses are 8-byte aligned, the arena bytes). */
    size_t head = sizeof *call + n * sizeof call->items[0];
    call = sl_calloc(1, head + n * sizeof *call->statuses + arena + 1);
    size_t keybytes = SL_ENVOY_MAX_LIMITS * (keymax + 1);
    keybuf = keybytes <= sizeof key_room ? key_room : sl_malloc(keybytes);
    if (!call || !keybuf) {
        rc = SL_ERR_NOMEM;
        goto out;
    }
    call->statuses = (sl_rls_status *)((char *)call + head);
    call->arena = (char *)(call->statuses + n);
    call->n = n;
    call->done = done;
    call->arg = arg;
    call->decided = c->decided;
    call->decided_arg = c->decided_arg;
    call->logged = c->logged;
    call->logged_arg = c->logged_arg;
    call->header_names = c->header_names;
    call->submitting = true;
    char *a = call->arena;
    for (size_t i = 0; i < n; i++) {
        rls_item *it = &call->items[i];
        it->call = call;
        it->name = "";
        const sl_rls_descriptor *rd = &r->descriptors[i];
        sl_envoy_limit own;
        /* An override was checked above: this finds no error. */
        const sl_envoy_limit *lim = item_limits(c, rd, &m[i], known, it, &own);
        const sl_envoy_rule *rule = m[i].rule;
        if (rule && known && !rd->has_limit) {
            size_t nl = strlen(rule->name);
            memcpy(a, rule->name, nl + 1);
            it->name = a;
            a += nl + 1;
            size_t ml = sl_envoy_metric_key(r->domain.p, r->domain.n, &desc[i], &m[i], a,
                                            SL_RLS_METRIC_KEY_MAX);
            it->mkey = a;
            it->mlen = ml < SL_RLS_METRIC_KEY_MAX ? ml : SL_RLS_METRIC_KEY_MAX;
            a += it->mlen + 1;
        }
        if (it->kind == IT_ZERO)
            it->hits = hits(r, rd);
        if (c->logged && (lim || it->kind == IT_ZERO)) {
            /* Its first limit's store key, as the take below writes it. */
            size_t index = rd->has_limit ? SL_ENVOY_MAX_LIMITS + (size_t)rd->limit_unit : 0;
            size_t room = arena - (size_t)(a - call->arena);
            size_t kl = sl_envoy_store_key(r->domain.p, r->domain.n, &desc[i], &m[i], index, a,
                                           room);
            if (kl < room) { /* it fits: the sizes above reserved its longest */
                it->skey = a;
                it->slen = kl;
                a += kl + 1;
            }
        }
        if (!lim)
            continue;
        sl_take_item items[SL_ENVOY_MAX_LIMITS];
        int64_t cost = hits(r, rd);
        it->hits = cost;
        for (size_t j = 0; j < it->n; j++) {
            char *k = keybuf + j * (keymax + 1);
            size_t index = rd->has_limit ? SL_ENVOY_MAX_LIMITS + (size_t)rd->limit_unit : j;
            items[j].key = k;
            items[j].keylen =
                sl_envoy_store_key(r->domain.p, r->domain.n, &desc[i], &m[i], index, k, keymax);
            items[j].limit = &lim[j].limit;
            items[j].cost = cost;
        }
        sl_backend_req *br = &it->r;
        br->op = SL_OP_TAKE;
        br->n = it->n;
        br->items = items;
        br->on_error = SL_ON_ERROR_DEFAULT;
        br->d = it->d;
        br->failed = -1;
        br->done = item_done;
        br->owner = it;
        call->pending++;
        if (sl_backend_submit(c->be, c->bw, br) != SL_PENDING)
            call->pending--;
    }
    call->submitting = false;
    free_room(keybuf, key_room, desc, desc_room, entries, entries_room, m, m_room);
    call->req = *r;
    memset(r, 0, sizeof *r);
    *out = call;
    if (call->pending > 0)
        return SL_PENDING;
    call_decided(call);
    return SL_OK;

out:
    free_room(keybuf, key_room, desc, desc_room, entries, entries_room, m, m_room);
    sl_free(call);
    if (rc == SL_ERR_NOMEM)
        fail(err, errlen, rc, "out of memory");
    return rc;
}

/* The headers of the descriptor nearest its limit: the last one over it,
 * else the one with the least remaining; none when no status has a limit. */
static void add_headers(sl_rls_call *call, sl_rls_response *resp)
{
    const sl_rls_status *min = NULL;
    for (size_t i = 0; i < call->n; i++) {
        const sl_rls_status *s = &call->statuses[i];
        if (!s->has_limit)
            continue;
        bool over = call->items[i].kind == IT_ZERO ||
                    (call->items[i].kind == IT_TAKE && call->items[i].r.failed >= 0);
        /* An over one has none remaining: only a later one over takes its place. */
        if (over || !min || s->limit_remaining < min->limit_remaining)
            min = s;
    }
    if (!min)
        return;
    /* The seconds to the reset, rounded up: a client that waits them finds
     * the window over. */
    int64_t reset = min->has_reset ? min->reset_after_ns / 1000000000 +
                                         (min->reset_after_ns % 1000000000 != 0)
                                   : 0;
    snprintf(call->header_values[0], sizeof call->header_values[0], "%u",
             min->requests_per_unit);
    snprintf(call->header_values[1], sizeof call->header_values[1], "%u",
             min->limit_remaining);
    snprintf(call->header_values[2], sizeof call->header_values[2], "%lld", (long long)reset);
    for (int i = 0; i < 3; i++) {
        call->headers[i].key = call->header_names[i];
        call->headers[i].value = call->header_values[i];
    }
    resp->response_headers = call->headers;
    resp->n_response_headers = 3;
}

int sl_rls_result(sl_rls_call *call, sl_rls_response *resp, char *err, size_t errlen)
{
    memset(resp, 0, sizeof *resp);
    sl_rls_code overall = SL_RLS_CODE_OK;
    for (size_t i = 0; i < call->n; i++) {
        const rls_item *it = &call->items[i];
        sl_rls_status *s = &call->statuses[i];
        memset(s, 0, sizeof *s);
        s->code = SL_RLS_CODE_OK;
        switch (it->kind) {
        case IT_NONE:
            break;
        case IT_UNLIMITED:
            s->limit_remaining = UINT32_MAX;
            break;
        case IT_ZERO:
            s->code = it->shadow ? SL_RLS_CODE_OK : SL_RLS_CODE_OVER_LIMIT;
            s->has_limit = true;
            s->requests_per_unit = 0;
            s->unit = (sl_rls_unit)it->unit[it->n];
            s->limit_name = it->name;
            s->has_reset = it->window_left[it->n] > 0;
            s->reset_after_ns = it->window_left[it->n];
            break;
        case IT_TAKE: {
            if (it->r.rc != SL_OK)
                return fail(err, errlen, it->r.rc, "store: %s",
                            it->r.errstr ? it->r.errstr : sl_strerror((sl_status)it->r.rc));
            size_t b = binding(it);
            const sl_decision *d = &it->d[b];
            bool over = it->r.failed >= 0;
            s->code = over && !it->shadow ? SL_RLS_CODE_OVER_LIMIT : SL_RLS_CODE_OK;
            s->has_limit = true;
            s->requests_per_unit = it->rpu[b];
            s->unit = (sl_rls_unit)it->unit[b];
            s->limit_name = it->name;
            int64_t rem = over || d->remaining < 0 ? 0 : d->remaining;
            s->limit_remaining = rem > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)rem;
            s->has_reset = true;
            s->reset_after_ns = it->window_left[b] > 0   ? it->window_left[b]
                                : d->reset_after_ns > 0 ? d->reset_after_ns
                                                        : 0;
            break;
        }
        }
        if (s->code == SL_RLS_CODE_OVER_LIMIT)
            overall = SL_RLS_CODE_OVER_LIMIT;
    }
    resp->overall_code = overall;
    resp->statuses = call->statuses;
    resp->n_statuses = call->n;
    if (call->header_names)
        add_headers(call, resp);
    return SL_OK;
}

void sl_rls_free(sl_rls_call *call)
{
    if (!call)
        return;
    sl_rls_request_free(&call->req);
    sl_free(call);
}

void sl_rls_cancel(sl_rls_call *call)
{
    call->cancelled = true;
}
