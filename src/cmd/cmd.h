/*
 * cmd.h: the rate limiting commands, once, for every face that speaks the
 * Redis command language: sluiced (over the store) and the Redis module (over
 * Redis keys).
 *
 * A command handler reads its arguments, asks an *executor* to take from
 * states, and writes its reply to a *sink*. The sink and the executor are
 * tables of functions that each face provides, so this file knows neither
 * sockets nor Redis: arrows point down.
 *
 * Handlers validate their arguments with the sl_arg_*() helpers, which reply
 * the error themselves and return false (Redis's ...OrReply pattern), so a
 * handler just returns.
 */
#ifndef SL_CMD_H
#define SL_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "policy/config.h"
#include "proto/resp.h"
#include "sluice.h"

/* Where a reply goes. Each function appends one item. */
typedef struct sl_reply_ops {
    void (*integer)(void *sink, int64_t v);
    void (*bulk)(void *sink, const char *p, size_t len);
    void (*simple)(void *sink, const char *s);
    void (*null)(void *sink);
    void (*array)(void *sink, size_t n);
    /* An array of n integers: array() then n times integer(), at once. */
    void (*integers)(void *sink, const int64_t *v, size_t n);
    /* A map of n pairs (RESP3), or a flat array of 2n items (RESP2). */
    void (*map)(void *sink, size_t n);
    /* A whole error line without the leading '-': "ERR ...", "NOAUTH ...". */
    void (*error)(void *sink, const char *msg);
} sl_reply_ops;

/* The sink that writes RESP into an sl_buf (the sink pointer). */
extern const sl_reply_ops sl_resp_reply_sink;

/* A small per-thread cache of prepared limits: sl_limit_init costs several
 * takes, and ad-hoc commands repeat the same few limits. Direct-mapped.
 * sluiced keeps one per worker, shared by its RESP and HTTP faces.
 * clock_offset_ns is the face's clock's offset from Unix time (Unix time -
 * now; 0 when now is Unix time, as in the module), with which every limit
 * is aligned (sl_limit_align): set it before the first call, and empty the
 * cache (zero it) to change it. */
#define SL_LIMIT_CACHE_SLOTS 64
typedef struct sl_limit_cache {
    struct sl_limit_cache_entry {
        int64_t kind, p1, p2, p3; /* what it was built from; kind 0 = empty */
        int64_t months, reset_day, utc_offset_ns;
        sl_limit limit;
    } slot[SL_LIMIT_CACHE_SLOTS];
    int64_t clock_offset_ns;
} sl_limit_cache;

/*
 * A prepared limit, from the cache when it holds one built from the same
 * parameters, else built and kept there. kind is an sl_algorithm, with
 * (a, b, d) sl_limit_init's (limit, period_ns, burst), and the windows
 * aligned by sl_limit_align_day(months, reset_day, utc_offset_ns, the
 * cache's clock offset); or -1 for redis-cell's (max_burst,
 * count_per_period, period_seconds) of sl_limit_init_cell (months, reset_day
 * and utc_offset_ns 0). Returns SL_OK with *out pointing into the cache
 * (valid until the next call on it: copy the limit to keep it), or
 * sl_limit_init's or sl_limit_align_day's error. cache may be NULL: *out
 * then points at a thread-local copy, valid until the thread's next call,
 * aligned for a clock that is Unix time.
 */
int sl_limit_cached(sl_limit_cache *cache, int64_t kind, int64_t a, int64_t b, int64_t d,
                    int64_t months, int64_t reset_day, int64_t utc_offset_ns,
                    const sl_limit **out);

/* How a rate command's reply is written from its decision (sl_check_finish). */
typedef enum sl_render {
    SL_RENDER_CELL,     /* CL.THROTTLE's five integers */
    SL_RENDER_DECISION, /* SL.TAKE, SL.PEEK: one decision's map */
    SL_RENDER_MANY,     /* SL.TAKEMANY */
    SL_RENDER_POLICY,   /* SL.POLICY: the binding limit's decision, its scope */
    SL_RENDER_COUNT,    /* SL.RESET, SL.RELEASE: an integer */
    SL_RENDER_LEASE,    /* SL.ACQUIRE: the lease id, or a null */
    SL_RENDER_DECIDE,   /* SL.DECIDE: integers in nanoseconds */
    SL_RENDER_USAGE,    /* SL.USAGE: each of a policy's limits, peeked */
    SL_RENDER_RESERVE,  /* SL.RESERVE: SL.POLICY's answer and the reservation (reserve.h) */
    SL_RENDER_SETTLE,   /* SL.SETTLE: whether it settled, and each limit's adjustment */
    SL_RENDER_FACE,     /* the face's own (HTTP's response): sl_cmd_ctx.render */
} sl_render;

/* The bytes of its key a check copied by sl_check_own() keeps: as many as
 * sluiced's default --max-key-bytes. */
#define SL_CHECK_KEY_ROOM 512

/*
 * A rate command between its three steps: parsed (the backend request and
 * what its reply needs), decided (the backend's answer, now or later), and
 * rendered. Whatever renders reads only this: once sl_check_own() has run,
 * nothing points outside it, so that a decision that completes after the
 * read buffer, the limit cache or the config have moved on renders alone.
 * On the common path (a backend that answers in the call) it lives on the
 * stack and points at the cache and the config, copying nothing.
 */
typedef struct sl_check {
    sl_backend_req req;
    sl_render render;
    bool counted;              /* a decision for the metrics (not a peek, reset, release) */
    bool shadow;               /* a dry-run policy */
    int policy;                /* the config's policy index, -1 ad hoc */
    const char *name;          /* the policy's name, or NULL */
    /* A policy's: how many of the limits are the key's (the rest are its
     * global ones), and each limit's own name ("" for an unnamed one). */
    size_t nkey;
    const char *lname[SL_TAKE_MANY_MAX];
    unsigned char lunit[SL_TAKE_MANY_MAX]; /* each limit's sl_unit: what its cost counts */
    int64_t cost[SL_TAKE_MANY_MAX];       /* what the request takes from each limit */
    /* The key a decision is reported under (a face's decision log): the
     * first item's store key; a policy's, its key's store key without a
     * named limit's suffix. It points where the items' keys do, and
     * sl_check_own does not copy it: a face that defers a check and reads
     * the key when it is decided copies it itself. */
    const char *key;
    size_t key_len;
    int64_t lease_max;         /* SL.ACQUIRE: the max_in_flight the lease id carries */
    size_t n;                  /* the limits below (req.n but for RESET) */
    const sl_limit *lim[SL_TAKE_MANY_MAX];
    sl_decision d[SL_TAKE_MANY_MAX];
    /* SL.RESERVE, SL.SETTLE: the chain of store ops the check runs
     * (cmd/reserve.h), owned by the check; NULL for the others. */
    struct sl_chain *chain;
    /* The face's own, for SL_RENDER_FACE (HTTP: keep-alive, HEAD, ...). */
    uint32_t face_flags;
    int face_status;
    /* The key a counted decision is about, for the face's observers
     * (sluiced's top keys): a policy's check, the key it was given (before
     * its template); an ad-hoc one, its first item's. Points into the
     * request until sl_check_own() copies its first SL_CHECK_KEY_ROOM bytes
     * into given_key_buf (given_key_len then says how many were copied). Set
     * by sl_check_init and sl_check_policy; read only when `counted`. (`key`
     * above is the store key, for the decision log.) */
    const char *given_key;
    size_t given_key_len;
    /* What sl_check_own() copies the limits and the name into. */
    sl_limit own[SL_TAKE_MANY_MAX];
    char name_buf[SL_POLICY_NAME_MAX + 8];
    char lname_buf[SL_TAKE_MANY_MAX][SL_LIMIT_NAME_MAX + 1];
    char given_key_buf[SL_CHECK_KEY_ROOM];
} sl_check;

/* The units a peeked decision says are used: its limit less what remains,
 * never below 0 (SL.USAGE, /v1/usage). */
static inline int64_t sl_usage_used(const sl_decision *d)
{
    int64_t rem = d->remaining < 0 ? 0 : d->remaining;
    return d->limit > rem ? d->limit - rem : 0;
}

/* Makes k self-contained: its limits, its name and (a counted one) the
 * first SL_CHECK_KEY_ROOM bytes of its key copied into it. */
void sl_check_own(sl_check *k);

/* Sets the fields of k that every check sets (an ad-hoc one: no policy),
 * the rest left as they are: the struct is large, and the common path must
 * not clear it. The caller sets k->lim[0 .. n) (not for a reset). */
static inline void sl_check_init(sl_check *k, sl_op op, sl_render render, size_t n,
                                 const sl_take_item *items)
{
    k->req.op = op;
    k->req.n = n;
    k->req.items = items;
    k->req.lease_id = 0;
    k->req.on_error = SL_ON_ERROR_DEFAULT;
    k->req.timeout_ms = 0;
    k->req.d = k->d;
    k->req.errstr = NULL;
    k->req.errstr_is_reply = false;
    k->render = render;
    k->counted = op == SL_OP_TAKE || op == SL_OP_ACQUIRE;
    k->shadow = false;
    k->policy = -1;
    k->name = NULL;
    k->nkey = 0;
    k->chain = NULL;
    k->n = op == SL_OP_RESET ? 0 : n;
    k->key = k->given_key = n ? (const char *)items[0].key : NULL;
    k->key_len = k->given_key_len = n ? items[0].keylen : 0;
    for (size_t i = 0; i < k->n && i < SL_TAKE_MANY_MAX; i++)
        k->cost[i] = items[i].cost;
}

typedef struct sl_cmd_ctx {
    const sl_reply_ops *reply;
    void *sink;
    const sl_backend *be;
    sl_backend_worker *bw;
    const uint64_t *lease_key;   /* 2 random words: the key of the lease id generator */
    sl_limit_cache *limit_cache; /* may be NULL */
    const struct sl_config *config; /* the policies, for SL.POLICY; may be NULL */
    size_t max_key_bytes;        /* the longest key the store takes, for errors; 0: no limit */
    void *face;                  /* the face's own context (a connection, say) */
    /* Called once per decision a command makes (not for peeks), for the
     * face's metrics: k->policy is the index of the config's policy, or -1
     * for an ad-hoc limit; shadow is set when a shadow policy let through a
     * request it would have refused; k->req.by says what decided. May be
     * NULL. */
    void (*decided)(struct sl_cmd_ctx *c, const sl_check *k, bool allowed, bool shadow);
    /* For a backend that may answer later (be->defers): a copy of k that
     * outlives the call, owned (sl_check_own) and with req.done and
     * req.owner set, in the place of the face's replies where this
     * command's reply goes; the face moves c->sink past it. NULL when out
     * of memory. */
    sl_check *(*defer)(struct sl_cmd_ctx *c, const sl_check *k);
    /* SL_RENDER_FACE's renderer (errors too). */
    void (*render)(struct sl_cmd_ctx *c, sl_check *k);
    /* For a policy whose plans are a Redis hash (plans: redis:NAME) that
     * the face reads itself (the module, in its own keyspace): the index of
     * the key's tier in p->tiers, -1 when the hash does not name one it has
     * (the default), -2 when NAME is a key of another type. NULL: the
     * policy's table, which sluiced fills. */
    int (*plan_tier)(struct sl_cmd_ctx *c, const struct sl_policy *p, const char *key,
                     size_t len);
    /* The face's adaptive concurrency limits (cmd/adaptive.h); NULL: it
     * serves none. */
    sl_limiters *limiters;
    /* Their time, on sl_now_mono's clock, as the face reads it (sluiced:
     * once per batch of commands); read only by commands on limiters. */
    int64_t (*now_mono)(struct sl_cmd_ctx *c);
    /* Called once per adaptive decision, for the metrics: policy is the
     * index of the config's adaptive policy, -1 ad hoc. May be NULL. */
    void (*adapted)(struct sl_cmd_ctx *c, int policy, int cls, bool admitted);
} sl_cmd_ctx;

/*
 * Asks the backend for k's decision (k->req's op and items; k->lim and the
 * rest for the reply), then counts and renders it, now or, through the
 * face's defer(), when the backend answers.
 */
void sl_check_submit(sl_cmd_ctx *c, sl_check *k);

/* The last two steps: counts k's decision for the metrics and renders it
 * (or its error) into c's sink. For a face's done(). A check that chains
 * several store ops (SL.RESERVE, SL.SETTLE) first submits its next one:
 * false when that one is in flight, and done() will be called again. */
bool sl_check_finish(sl_cmd_ctx *c, sl_check *k);

/*
 * A policy's items for `key` under `tier` (NULL: the policy's own limits)
 * at `cost` and `tokens` (sl_policy_items), its global limits after the
 * key's: fills items[0..n) and k->lim, k->policy, k->name, k->shadow,
 * k->nkey, k->lname; kbuf is the room for the store keys
 * (SL_POLICY_KEYS_ROOM). Returns n (1 .. SL_TAKE_MANY_MAX), or what
 * sl_policy_items says: 0 for a key empty or too long, -1 for an unknown
 * tier, -2 for a tier of a policy with a plans file, -3 for a key that a
 * policy keyed by the request could not have written (sl_policy_key_hint).
 * The runner SL.POLICY and HTTP's checks share.
 */
int sl_check_policy(sl_check *k, const struct sl_config *cfg, const struct sl_policy *p,
                    const char *tier, size_t tier_len, const char *key, size_t key_len,
                    int64_t cost, int64_t tokens, char *kbuf, size_t kcap,
                    sl_take_item items[SL_TAKE_MANY_MAX]);

/* Command flags, as Redis names them. */
#define SL_CMD_WRITE 0x01u    /* may change state */
#define SL_CMD_READONLY 0x02u /* never changes state */
#define SL_CMD_FAST 0x04u     /* O(1) (or O(limit) for the sliding log) */
#define SL_CMD_NOAUTH 0x08u   /* allowed before AUTH */
#define SL_CMD_LOADING 0x10u  /* connection commands */
#define SL_CMD_STOREKEYS 0x20u /* its keys (the key spec) are the store's keys as given */

typedef void (*sl_cmd_fn)(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv);

/* Room for a command's name: at most 15 bytes, NUL-padded to 16, so that
 * the lookup compares whole words. */
#define SL_CMD_NAME_MAX 16

typedef struct sl_command {
    char name[SL_CMD_NAME_MAX]; /* lowercase, NUL-padded; "" ends a table */
    int arity;         /* > 0 exactly, < 0 at least -arity, counting the name */
    uint32_t flags;
    int first_key, last_key, key_step; /* as Redis's COMMAND reports them */
    sl_cmd_fn fn;
    const char *summary;
    const char *usage;
    /* > 0: the keys are counted by the argument at this position (numkeys
     * key ...), which the triple above cannot describe: the command's keys
     * are "movable" (COMMAND says so; the module uses the getkeys API). */
    int numkeys_at;
} sl_command;

/* The rate limiting commands: CL.THROTTLE and SL.*; ends with an empty name. */
extern const sl_command sl_rate_commands[];

/* Finds a command by name (ASCII case-insensitive) in a table that ends
 * with an empty name; NULL when it is not there. */
const sl_command *sl_command_find(const sl_command *table, const char *name, size_t len);

/*
 * The store keys of a command marked SL_CMD_STOREKEYS, by its key spec (or
 * its numkeys argument): up to cap of them into keys[] / lens[], slices of
 * argv. For prefetching: a malformed command gives fewer keys (or none),
 * never an error; the command itself judges its arguments.
 */
size_t sl_command_store_keys(const sl_command *cmd, size_t argc, const sl_resp_slice *argv,
                             const void **keys, size_t *lens, size_t cap);

/* Does argc (the name included) fit the command's arity? */
static inline bool sl_command_arity_ok(const sl_command *cmd, int argc)
{
    return cmd->arity > 0 ? argc == cmd->arity : argc >= -cmd->arity;
}

/*
 * Checks the arity and runs the command, or replies Redis's error for a
 * wrong number of arguments.
 */
void sl_command_call(const sl_command *cmd, sl_cmd_ctx *c, int argc, const sl_resp_slice *argv);

/* Replies "ERR unknown command 'name', with args beginning with: 'a' 'b' "
 * as Redis does. */
void sl_reply_unknown_command(sl_cmd_ctx *c, int argc, const sl_resp_slice *argv);

/* Replies "ERR <printf>" (message cut at 256 bytes). */
void sl_reply_errorf(sl_cmd_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parses a whole decimal int64; else replies "ERR value is not an integer
 * or out of range" and returns false. */
bool sl_arg_int(sl_cmd_ctx *c, const sl_resp_slice *a, int64_t *out);

/* Parses a period: an integer number of seconds, or an integer with a unit
 * ms, s, m, h, d or w; into nanoseconds; and, when months is not NULL, mo
 * for calendar months (*months; 0 for a duration). Else replies an error
 * naming `what`. */
bool sl_arg_period(sl_cmd_ctx *c, const sl_resp_slice *a, const char *what, int64_t *ns,
                   int64_t *months);

/* Is the argument equal to the keyword (case-insensitive)? */
bool sl_arg_is(const sl_resp_slice *a, const char *keyword);

#endif /* SL_CMD_H */
