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

/* The sink that writes RESP into an sl_resp_buf (the sink pointer). */
extern const sl_reply_ops sl_resp_reply_sink;

/* Where states live. `now` is the executor's own clock: the server's
 * monotonic clock read once per batch, or the Redis server's clock. Each
 * returns SL_OK or an SL_ERR_* (reported to the client as "ERR <message>"). */
typedef struct sl_exec_ops {
    int (*take)(void *ex, const sl_resp_slice *key, const sl_limit *l, int64_t cost,
                sl_decision *d);
    int (*peek)(void *ex, const sl_resp_slice *key, const sl_limit *l, int64_t cost,
                sl_decision *d);
    /* All or nothing; *failed_index is -1 when all were admitted. */
    int (*take_many)(void *ex, const sl_take_item *items, size_t n, sl_decision *out,
                     int *failed_index);
    /* Returns 1 when the key was held, 0 when not, or SL_ERR_*. */
    int (*reset)(void *ex, const sl_resp_slice *key);
    /* Acquires a lease of `weight` carrying lease_id (random, non-zero). */
    int (*acquire)(void *ex, const sl_resp_slice *key, const sl_limit *l, int64_t weight,
                   uint64_t lease_id, sl_decision *d);
    /* Returns 1 released, 0 unknown or expired, or SL_ERR_*. */
    int (*release)(void *ex, const sl_resp_slice *key, const sl_limit *l, uint64_t lease_id);
} sl_exec_ops;

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
        int64_t months, utc_offset_ns;
        sl_limit limit;
    } slot[SL_LIMIT_CACHE_SLOTS];
    int64_t clock_offset_ns;
} sl_limit_cache;

/*
 * A prepared limit, from the cache when it holds one built from the same
 * parameters, else built and kept there. kind is an sl_algorithm, with
 * (a, b, d) sl_limit_init's (limit, period_ns, burst), and the windows
 * aligned by sl_limit_align(months, utc_offset_ns, the cache's clock
 * offset); or -1 for redis-cell's (max_burst, count_per_period,
 * period_seconds) of sl_limit_init_cell (months and utc_offset_ns 0).
 * Returns SL_OK with *out pointing into the cache (valid until the next call
 * on it: copy the limit to keep it), or sl_limit_init's or sl_limit_align's
 * error. cache may be NULL: *out then points at a thread-local copy, valid
 * until the thread's next call, aligned for a clock that is Unix time.
 */
int sl_limit_cached(sl_limit_cache *cache, int64_t kind, int64_t a, int64_t b, int64_t d,
                    int64_t months, int64_t utc_offset_ns, const sl_limit **out);

typedef struct sl_cmd_ctx {
    const sl_reply_ops *reply;
    void *sink;
    const sl_exec_ops *exec;
    void *ex;
    const uint64_t *lease_key;   /* 2 random words: the key of the lease id generator */
    sl_limit_cache *limit_cache; /* may be NULL */
    const struct sl_config *config; /* the policies, for SL.POLICY; may be NULL */
    size_t max_key_bytes;        /* the longest key the store takes, for errors; 0: no limit */
    void *face;                  /* the face's own context (a connection, say) */
    /* Called once per decision a command makes (not for peeks), for the
     * face's metrics: policy is the index of the config's policy, or -1 for
     * an ad-hoc limit; shadow is set when a shadow policy let through a
     * request it would have refused. May be NULL. */
    void (*decided)(struct sl_cmd_ctx *c, int policy, bool allowed, bool shadow);
} sl_cmd_ctx;

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
