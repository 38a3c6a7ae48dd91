/*
 * command.c: the commands the RESP client sends, and how it reads their
 * replies (command.h). Shared by the blocking client (sync.c) and the
 * asynchronous one (async.c), so that both send the same bytes and read
 * replies by the same rules.
 *
 * Arguments are checked only as far as the request needs: a NULL or empty
 * string, a count out of range, an algorithm that is no rate limit. Numbers
 * go to the server as they are, and the server's error reply says what is
 * wrong with one (docs/commands.md has every text), so that the rules live
 * in one place.
 *
 * Replies are read by name, not by position: a decision is a flat array of
 * (name, value) pairs, and a field this client does not know is skipped, so
 * that a server that adds fields does not break it. The fields it needs must
 * be there, with the type and range docs/commands.md gives them; anything
 * else is SL_RC_ERR_REPLY, naming the command and the field.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "command.h"

#define NS_PER_MS INT64_C(1000000)
#define NS_PER_S INT64_C(1000000000)

static int args_error(char *errstr, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int args_error(char *errstr, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errstr, cap, fmt, ap);
    va_end(ap);
    return -1;
}

static void cmd_start(sl_rc_cmd *cmd, sl_rc_kind kind, const char *name)
{
    cmd->expect.kind = kind;
    cmd->expect.name = name;
    cmd->expect.n = 1;
    cmd->argc = 0;
    cmd->nnums = 0;
}

/* Appends a string argument. The callers never pass more than
 * SL_RC_ARGV_MAX arguments: each command's count is bounded by its own
 * checks (SL_TAKE_MANY_MAX, SL_RC_RESET_MAX). */
static void add(sl_rc_cmd *cmd, const char *s)
{
    cmd->argv[cmd->argc] = s;
    cmd->lens[cmd->argc] = strlen(s);
    cmd->argc++;
}

/* Appends a number, written into the command's scratch; suffix ("ms", "mo")
 * follows the digits. */
static void add_num(sl_rc_cmd *cmd, int64_t v, const char *suffix)
{
    char *s = cmd->nums[cmd->nnums++];
    snprintf(s, sizeof cmd->nums[0], "%" PRId64 "%s", v, suffix);
    add(cmd, s);
}

static bool bad_string(const char *s)
{
    return s == NULL || s[0] == '\0';
}

int sl_rc_cmd_auth(sl_rc_cmd *cmd, const char *user, const char *password, char *errstr,
                   size_t cap)
{
    if (bad_string(password))
        return args_error(errstr, cap, "AUTH: the password is empty");
    cmd_start(cmd, SL_RC_AUTH, "AUTH");
    add(cmd, "AUTH");
    if (user) {
        if (bad_string(user))
            return args_error(errstr, cap, "AUTH: the user name is empty");
        add(cmd, user);
    }
    add(cmd, password);
    return 0;
}

int sl_rc_cmd_throttle(sl_rc_cmd *cmd, const char *key, int64_t max_burst,
                       int64_t count_per_period, int64_t period_s, int64_t quantity, char *errstr,
                       size_t cap)
{
    if (bad_string(key))
        return args_error(errstr, cap, "CL.THROTTLE: the key is empty");
    cmd_start(cmd, SL_RC_THROTTLE, "CL.THROTTLE");
    add(cmd, "CL.THROTTLE");
    add(cmd, key);
    add_num(cmd, max_burst, "");
    add_num(cmd, count_per_period, "");
    add_num(cmd, period_s, "");
    add_num(cmd, quantity, "");
    return 0;
}

/* A limit's arguments after its key (SL.TAKE) or LIMIT (SL.TAKEMANY):
 * limit, period, then the options that are set. */
static int add_limit(sl_rc_cmd *cmd, const sl_rc_limit *l, int64_t cost, const char *what,
                     char *errstr, size_t cap)
{
    if (!l)
        return args_error(errstr, cap, "%s: no limit given", what);
    const char *alg = sl_algorithm_name(l->algorithm);
    if (!alg || l->algorithm == SL_CONCURRENCY)
        return args_error(errstr, cap, "%s: the algorithm is not a rate limit (%d)", what,
                          (int)l->algorithm);
    if (l->reset_day < 0 || l->reset_day > 31)
        return args_error(errstr, cap, "%s: reset_day must be 0 (none) or 1 to 31 (got %d)", what,
                          l->reset_day);
    add_num(cmd, l->limit, "");
    if (l->months > 0)
        add_num(cmd, l->months, "mo");
    else
        add_num(cmd, l->period_ms, "ms");
    if (l->burst != 0) {
        add(cmd, "BURST");
        add_num(cmd, l->burst, "");
    }
    add(cmd, "COST");
    add_num(cmd, cost, "");
    if (l->algorithm != SL_GCRA) {
        add(cmd, "ALGORITHM");
        add(cmd, alg);
    }
    if (l->utc_offset) {
        if (bad_string(l->utc_offset))
            return args_error(errstr, cap, "%s: utc_offset is empty (NULL for none)", what);
        add(cmd, "UTCOFFSET");
        add(cmd, l->utc_offset);
    }
    if (l->reset_day > 0) {
        add(cmd, "RESETDAY");
        add_num(cmd, l->reset_day, "");
    }
    return 0;
}

int sl_rc_cmd_take(sl_rc_cmd *cmd, bool peek, const char *key, const sl_rc_limit *l, int64_t cost,
                   char *errstr, size_t cap)
{
    const char *name = peek ? "SL.PEEK" : "SL.TAKE";
    if (bad_string(key))
        return args_error(errstr, cap, "%s: the key is empty", name);
    cmd_start(cmd, SL_RC_DECISION, name);
    add(cmd, name);
    add(cmd, key);
    return add_limit(cmd, l, cost, name, errstr, cap);
}

int sl_rc_cmd_policy(sl_rc_cmd *cmd, const char *policy, const char *key, int64_t cost,
                     int64_t tokens, const char *tier, char *errstr, size_t cap)
{
    if (bad_string(policy))
        return args_error(errstr, cap, "SL.POLICY: the policy name is empty");
    if (bad_string(key))
        return args_error(errstr, cap, "SL.POLICY: the key is empty");
    if (tier && bad_string(tier))
        return args_error(errstr, cap, "SL.POLICY: the tier is empty (NULL for none)");
    cmd_start(cmd, SL_RC_POLICY, "SL.POLICY");
    add(cmd, "SL.POLICY");
    add(cmd, policy);
    add(cmd, key);
    add(cmd, "COST");
    add_num(cmd, cost, "");
    if (tokens != 0) {
        add(cmd, "TOKENS");
        add_num(cmd, tokens, "");
    }
    if (tier) {
        add(cmd, "TIER");
        add(cmd, tier);
    }
    return 0;
}

int sl_rc_cmd_take_many(sl_rc_cmd *cmd, const sl_rc_item *items, size_t n, char *errstr,
                        size_t cap)
{
    if (!items || n < 1 || n > SL_TAKE_MANY_MAX)
        return args_error(errstr, cap, "SL.TAKEMANY: 1 to %d limits (got %zu)", SL_TAKE_MANY_MAX,
                          items ? n : (size_t)0);
    for (size_t i = 0; i < n; i++)
        if (bad_string(items[i].key))
            return args_error(errstr, cap, "SL.TAKEMANY: the key of limit %zu is empty", i);
    cmd_start(cmd, SL_RC_MANY, "SL.TAKEMANY");
    cmd->expect.n = n;
    add(cmd, "SL.TAKEMANY");
    add_num(cmd, (int64_t)n, "");
    for (size_t i = 0; i < n; i++)
        add(cmd, items[i].key);
    for (size_t i = 0; i < n; i++) {
        add(cmd, "LIMIT");
        if (add_limit(cmd, &items[i].limit, items[i].cost, "SL.TAKEMANY", errstr, cap) != 0)
            return -1;
    }
    return 0;
}

int sl_rc_cmd_reset(sl_rc_cmd *cmd, const char *const *keys, size_t n, char *errstr, size_t cap)
{
    if (!keys || n < 1 || n > SL_RC_RESET_MAX)
        return args_error(errstr, cap, "SL.RESET: 1 to %d keys (got %zu)", SL_RC_RESET_MAX,
                          keys ? n : (size_t)0);
    cmd_start(cmd, SL_RC_COUNT, "SL.RESET");
    add(cmd, "SL.RESET");
    for (size_t i = 0; i < n; i++) {
        if (bad_string(keys[i]))
            return args_error(errstr, cap, "SL.RESET: key %zu is empty", i);
        add(cmd, keys[i]);
    }
    return 0;
}

int sl_rc_cmd_acquire(sl_rc_cmd *cmd, const char *key, int64_t max_in_flight, int64_t ttl_ms,
                      int64_t weight, char *errstr, size_t cap)
{
    if (bad_string(key))
        return args_error(errstr, cap, "SL.ACQUIRE: the key is empty");
    cmd_start(cmd, SL_RC_LEASE, "SL.ACQUIRE");
    add(cmd, "SL.ACQUIRE");
    add(cmd, key);
    add_num(cmd, max_in_flight, "");
    add_num(cmd, ttl_ms, "");
    if (weight != 0) {
        add(cmd, "WEIGHT");
        add_num(cmd, weight, "");
    }
    return 0;
}

int sl_rc_cmd_acquire_adaptive(sl_rc_cmd *cmd, const char *key, const sl_rc_adaptive *a,
                               char *errstr, size_t cap)
{
    if (bad_string(key))
        return args_error(errstr, cap, "SL.ACQUIRE: the key is empty");
    if (!a)
        return args_error(errstr, cap, "SL.ACQUIRE: no adaptive limit given");
    if ((a->partition && bad_string(a->partition)) || (a->estimator && bad_string(a->estimator)) ||
        (a->priority && bad_string(a->priority)) || (a->policy && bad_string(a->policy)))
        return args_error(errstr, cap, "SL.ACQUIRE: an option is an empty string (NULL omits it)");
    if (a->partition && !a->policy)
        return args_error(errstr, cap, "SL.ACQUIRE: a partition belongs to a policy");
    cmd_start(cmd, SL_RC_LEASE, "SL.ACQUIRE");
    add(cmd, "SL.ACQUIRE");
    add(cmd, key);
    if (a->policy) {
        add(cmd, "POLICY");
        add(cmd, a->policy);
    } else {
        add_num(cmd, a->max_in_flight, "");
        add_num(cmd, a->ttl_ms, "");
        add(cmd, "ADAPTIVE");
        if (a->estimator) {
            add(cmd, "ESTIMATOR");
            add(cmd, a->estimator);
        }
        if (a->min_limit != 0) {
            add(cmd, "MIN");
            add_num(cmd, a->min_limit, "");
        }
        if (a->initial_limit != 0) {
            add(cmd, "INITIAL");
            add_num(cmd, a->initial_limit, "");
        }
    }
    if (a->priority) {
        add(cmd, "PRIORITY");
        add(cmd, a->priority);
    }
    if (a->partition) {
        add(cmd, "PARTITION");
        add(cmd, a->partition);
    }
    return 0;
}

int sl_rc_cmd_release(sl_rc_cmd *cmd, const char *key, const char *lease_id,
                      const sl_rc_outcome *o, char *errstr, size_t cap)
{
    if (bad_string(key))
        return args_error(errstr, cap, "SL.RELEASE: the key is empty");
    if (bad_string(lease_id))
        return args_error(errstr, cap, "SL.RELEASE: the lease id is empty");
    cmd_start(cmd, SL_RC_RELEASE, "SL.RELEASE");
    add(cmd, "SL.RELEASE");
    add(cmd, key);
    add(cmd, lease_id);
    if (!o)
        return 0;
    if ((o->policy && bad_string(o->policy)) || (o->outcome && bad_string(o->outcome)))
        return args_error(errstr, cap, "SL.RELEASE: an option is an empty string (NULL omits it)");
    if (o->policy) {
        add(cmd, "POLICY");
        add(cmd, o->policy);
    }
    if (o->latency_us >= 0) {
        /* Milliseconds with six decimals: the server's own resolution. */
        char *s = cmd->nums[cmd->nnums++];
        snprintf(s, sizeof cmd->nums[0], "%" PRId64 ".%06" PRId64, o->latency_us / 1000,
                 (o->latency_us % 1000) * 1000);
        add(cmd, "LATENCY");
        add(cmd, s);
    }
    if (o->outcome) {
        add(cmd, "OUTCOME");
        add(cmd, o->outcome);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Replies                                                                  */
/* ------------------------------------------------------------------------ */

int sl_throttle_reply_decode(const long long v[], size_t n, sl_decision *out)
{
    if (!v || n != 5)
        return -1;
    long long limited = v[0], limit = v[1], remaining = v[2], retry = v[3], reset = v[4];
    if ((limited != 0 && limited != 1) || limit < 0 || remaining < 0 || retry < -1 || reset < 0)
        return -1;
    /* Seconds to nanoseconds, refused (never wrapped) beyond int64. */
    if (retry > INT64_MAX / NS_PER_S || reset > INT64_MAX / NS_PER_S)
        return -1;
    memset(out, 0, sizeof *out);
    out->allowed = limited == 0;
    out->limit = limit;
    out->remaining = remaining;
    out->retry_after_ns = out->allowed ? 0 : retry < 0 ? SL_NEVER : (int64_t)retry * NS_PER_S;
    out->reset_after_ns = (int64_t)reset * NS_PER_S;
    return 0;
}

static int reply_error(char *errstr, size_t cap, const sl_rc_expect *cmd, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int reply_error(char *errstr, size_t cap, const sl_rc_expect *cmd, const char *fmt, ...)
{
    int n = snprintf(errstr, cap, "unexpected reply to %s: ", cmd->name);
    if (n >= 0 && (size_t)n < cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(errstr + n, cap - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return SL_RC_ERR_REPLY;
}

/* What hiredis calls each type, for messages. */
static const char *type_name(int type)
{
    switch (type) {
    case REDIS_REPLY_STRING:
        return "a string";
    case REDIS_REPLY_ARRAY:
        return "an array";
    case REDIS_REPLY_INTEGER:
        return "an integer";
    case REDIS_REPLY_NIL:
        return "a null";
    case REDIS_REPLY_STATUS:
        return "a status";
    default:
        return "an error";
    }
}

static bool is_name(const redisReply *r, const char *s)
{
    size_t n = strlen(s);
    return (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) && r->len == n &&
           memcmp(r->str, s, n) == 0;
}

/* Milliseconds as the replies give them (rounded up, never negative) to
 * nanoseconds; -1 when ms is negative or too large for int64 nanoseconds. */
static int64_t ms_to_ns(long long ms)
{
    if (ms < 0 || ms > INT64_MAX / NS_PER_MS)
        return -1;
    return (int64_t)ms * NS_PER_MS;
}

/* The fields of a decision, and of a policy's answer around it. */
enum {
    F_ALLOWED = 1 << 0,
    F_LIMIT = 1 << 1,
    F_REMAINING = 1 << 2,
    F_RETRY = 1 << 3,
    F_RESET = 1 << 4,
    F_NEEDED = (1 << 5) - 1,
    F_REJECTED_BY = 1 << 5,
    F_SCOPE = 1 << 6,
    F_BINDING = 1 << 7,
    F_POLICY = F_NEEDED | F_REJECTED_BY | F_SCOPE | F_BINDING,
};

static const char *const field_names[] = {"allowed",   "limit",       "remaining",
                                          "retry_after_ms", "reset_after_ms", "rejected_by",
                                          "scope",     "binding"};

/*
 * A decision (a flat array of name, value pairs) into *d, and, when info is
 * not NULL, a policy's fields into *info. `where` names the decision in
 * messages ("" alone, "results[2]: " in SL.TAKEMANY).
 */
static int read_decision(const sl_rc_expect *cmd, const redisReply *r, sl_decision *d,
                         sl_rc_policy_info *info, const char *where, char *errstr, size_t cap)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0)
        return reply_error(errstr, cap, cmd, "%s%s where a decision (pairs of names and values) "
                                             "goes",
                           where, r->type == REDIS_REPLY_ARRAY ? "an odd array" : type_name(r->type));
    memset(d, 0, sizeof *d);
    if (info) {
        memset(info, 0, sizeof *info);
        info->rejected_by = -1;
    }
    unsigned seen = 0;
    for (size_t i = 0; i < r->elements; i += 2) {
        const redisReply *k = r->element[i], *v = r->element[i + 1];
        if (k->type != REDIS_REPLY_STRING && k->type != REDIS_REPLY_STATUS)
            return reply_error(errstr, cap, cmd, "%s%s where a field's name goes", where,
                               type_name(k->type));
        if (info && (is_name(k, "scope") || is_name(k, "binding"))) {
            if (v->type != REDIS_REPLY_STRING && v->type != REDIS_REPLY_STATUS)
                return reply_error(errstr, cap, cmd, "%s%.*s is %s, not a string", where,
                                   (int)k->len, k->str, type_name(v->type));
            if (is_name(k, "scope")) {
                if (!is_name(v, "key") && !is_name(v, "global"))
                    return reply_error(errstr, cap, cmd, "%sscope is neither key nor global",
                                       where);
                info->global = is_name(v, "global");
                seen |= F_SCOPE;
            } else {
                if (v->len >= sizeof info->binding)
                    return reply_error(errstr, cap, cmd, "%sbinding is longer than %d bytes",
                                       where, SL_RC_NAME_MAX - 1);
                memcpy(info->binding, v->str, v->len);
                info->binding[v->len] = '\0';
                seen |= F_BINDING;
            }
            continue;
        }
        if (v->type != REDIS_REPLY_INTEGER)
            continue; /* a field this client does not read (a reservation's id) */
        long long x = v->integer;
        int64_t ns = ms_to_ns(x);
        unsigned f = 0;
        bool bad = false;
        if (is_name(k, "allowed")) {
            f = F_ALLOWED;
            bad = x != 0 && x != 1;
            d->allowed = x == 1;
        } else if (is_name(k, "limit")) {
            f = F_LIMIT;
            bad = x < 0;
            d->limit = x;
        } else if (is_name(k, "remaining")) {
            f = F_REMAINING;
            bad = x < 0;
            d->remaining = x;
        } else if (is_name(k, "retry_after_ms")) {
            f = F_RETRY;
            bad = x < -1 || (x >= 0 && ns < 0);
            d->retry_after_ns = x == -1 ? SL_NEVER : ns;
        } else if (is_name(k, "reset_after_ms")) {
            f = F_RESET;
            bad = ns < 0;
            d->reset_after_ns = ns;
        } else if (is_name(k, "delay_ms")) {
            bad = ns < 0;
            d->delay_ns = ns;
        } else if (info && is_name(k, "rejected_by")) {
            f = F_REJECTED_BY;
            bad = x < -1 || x > INT32_MAX;
            info->rejected_by = (int)x;
        } else if (info && is_name(k, "shadow")) {
            info->shadow = x != 0;
        } else if (info && is_name(k, "would_allow")) {
            info->would_allow = x != 0;
        } else if (info && is_name(k, "would_retry_after_ms")) {
            bad = x < -1 || (x >= 0 && ns < 0);
            info->would_retry_after_ns = x == -1 ? SL_NEVER : ns;
        }
        if (bad)
            return reply_error(errstr, cap, cmd, "%s%.*s is out of range (%lld)", where,
                               (int)k->len, k->str, x);
        seen |= f;
    }
    unsigned want = info ? F_POLICY : F_NEEDED;
    if ((seen & want) != want) {
        for (size_t b = 0; b < sizeof field_names / sizeof field_names[0]; b++)
            if ((want & (1u << b)) && !(seen & (1u << b)))
                return reply_error(errstr, cap, cmd, "%sa decision without %s", where,
                                   field_names[b]);
    }
    /* An admitted decision waits for nothing, whatever was written. */
    if (d->allowed)
        d->retry_after_ns = 0;
    return SL_RC_OK;
}

static int read_throttle(const sl_rc_expect *cmd, const redisReply *r, sl_decision *d, char *errstr,
                         size_t cap)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 5)
        return reply_error(errstr, cap, cmd, "%s where five integers go",
                           r->type == REDIS_REPLY_ARRAY ? "an array of another length"
                                                        : type_name(r->type));
    long long v[5];
    for (size_t i = 0; i < 5; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER)
            return reply_error(errstr, cap, cmd, "item %zu is %s, not an integer", i + 1,
                               type_name(r->element[i]->type));
        v[i] = r->element[i]->integer;
    }
    if (sl_throttle_reply_decode(v, 5, d) != 0)
        return reply_error(errstr, cap, cmd, "%lld %lld %lld %lld %lld is out of range", v[0],
                           v[1], v[2], v[3], v[4]);
    return SL_RC_OK;
}

static int read_many(const sl_rc_expect *cmd, const redisReply *r, sl_rc_answer *out, char *errstr,
                     size_t cap)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0)
        return reply_error(errstr, cap, cmd, "%s where allowed, rejected_by and results go",
                           type_name(r->type));
    const redisReply *results = NULL, *rejected = NULL;
    for (size_t i = 0; i < r->elements; i += 2) {
        if (is_name(r->element[i], "results"))
            results = r->element[i + 1];
        else if (is_name(r->element[i], "rejected_by"))
            rejected = r->element[i + 1];
    }
    if (!rejected || rejected->type != REDIS_REPLY_INTEGER || rejected->integer < -1 ||
        rejected->integer >= (long long)cmd->n)
        return reply_error(errstr, cap, cmd, "no rejected_by from -1 to %zu", cmd->n - 1);
    if (!results || results->type != REDIS_REPLY_ARRAY || results->elements != cmd->n)
        return reply_error(errstr, cap, cmd, "no results array of %zu decisions", cmd->n);
    out->n = cmd->n;
    out->rejected_by = (int)rejected->integer;
    for (size_t i = 0; i < cmd->n; i++) {
        char where[32];
        snprintf(where, sizeof where, "results[%zu]: ", i);
        int rc = read_decision(cmd, results->element[i], &out->d[i], NULL, where, errstr, cap);
        if (rc != SL_RC_OK)
            return rc;
    }
    return SL_RC_OK;
}

int sl_rc_read(const sl_rc_expect *cmd, const redisReply *r, sl_rc_answer *out, char *errstr,
               size_t cap)
{
    errstr[0] = '\0';
    if (r->type == REDIS_REPLY_ERROR) {
        /* The server's words, as they came (cut to fit). */
        snprintf(errstr, cap, "%.*s", (int)(r->len < cap ? r->len : cap - 1), r->str);
        return SL_RC_ERR_SERVER;
    }
    out->n = 1;
    switch (cmd->kind) {
    case SL_RC_AUTH:
        if (!is_name(r, "OK"))
            return reply_error(errstr, cap, cmd, "%s where OK goes", type_name(r->type));
        return SL_RC_OK;
    case SL_RC_THROTTLE:
        return read_throttle(cmd, r, &out->d[0], errstr, cap);
    case SL_RC_DECISION:
        return read_decision(cmd, r, &out->d[0], NULL, "", errstr, cap);
    case SL_RC_POLICY:
        return read_decision(cmd, r, &out->d[0], &out->info, "", errstr, cap);
    case SL_RC_MANY:
        return read_many(cmd, r, out, errstr, cap);
    case SL_RC_COUNT:
    case SL_RC_RELEASE:
        if (r->type != REDIS_REPLY_INTEGER || r->integer < 0 ||
            (cmd->kind == SL_RC_RELEASE && r->integer > 1))
            return reply_error(errstr, cap, cmd, "%s where %s goes", type_name(r->type),
                               cmd->kind == SL_RC_RELEASE ? "1 or 0" : "a count");
        out->count = r->integer;
        return SL_RC_OK;
    case SL_RC_LEASE:
        memset(&out->lease, 0, sizeof out->lease);
        if (r->type == REDIS_REPLY_NIL)
            return SL_RC_OK;
        if (r->type != REDIS_REPLY_STRING || r->len == 0 || r->len > SL_RC_LEASE_MAX ||
            memchr(r->str, '\0', r->len) != NULL)
            return reply_error(errstr, cap, cmd, "%s where a lease id (1 to %d bytes) or a null "
                                                 "goes",
                               type_name(r->type), SL_RC_LEASE_MAX);
        out->lease.granted = true;
        memcpy(out->lease.id, r->str, r->len);
        out->lease.id[r->len] = '\0';
        return SL_RC_OK;
    }
    return reply_error(errstr, cap, cmd, "a command this client does not know");
}
