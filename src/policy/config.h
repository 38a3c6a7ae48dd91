/*
 * config.h: sluiced's YAML config file: server settings and named policies.
 *
 *   server:                     # any sluiced flag, without its dashes
 *     port: 7379                #   (max-memory or max_memory); a flag given
 *     max_memory: 256m          #   on the command line wins over the file
 *   policies:
 *     api:
 *       algorithm: gcra         # default gcra
 *       limit: 100              # units per period (required)
 *       period: 1m              # seconds, or 500ms, 30s, 5m, 2h, 1d, 1w, 1mo (required)
 *       utc_offset: -05:00      # windows at local midnight there; default UTC
 *       reset_day: 15           # windows of months begin that day; default 1
 *       burst: 20               # default: limit
 *       key: "api:{key}"        # the store key's template (key_template.h);
 *                               #   default "{policy}:{key}"
 *       key_fallback: "{ip}"    # the template of a request that lacks a part
 *                               #   of key's; none: such a request is refused
 *       shadow: false           # dry run: decide and count, never refuse
 *       tiers:                  # optional: other limits, chosen per request; a
 *                               #   key keeps the units it used across tiers
 *         free: {limit: 100, period: 1m}
 *         paid: {limit: 10000, period: 1m, burst: 500}
 *       global: {limit: 50000, period: 1m}   # one limit shared by every key
 *       plans: plans.txt        # a key's tier from a file of "key: tier" lines
 *                               #   (src/policy/plans.h; relative to this file),
 *                               #   or redis:HASH, or {redis: HASH, refresh: 10s}:
 *                               #   from a hash in the Redis store (field = key,
 *                               #   value = tier), read by the server
 *     chat:                     # several limits, taken together (all or nothing)
 *       limits:
 *         - {name: rps, limit: 10, period: 1s}
 *         - {name: tpm, limit: 100000, period: 1m, cost: tokens}
 *       tiers:                  # a tier gives its own list; a limit keeps its
 *         paid:                 #   units across tiers by its name
 *           limits: [{name: rps, limit: 100, period: 1s},
 *                    {name: tpm, limit: 2000000, period: 1m, cost: tokens}]
 *       on_store_error: local   # a central store (--store redis://) down or slow:
 *                               #   fail_open, fail_closed or local; default the flag's
 *       store_timeout_ms: 20    # the store's time budget for this policy, 1..60000
 *     backend:                  # an adaptive concurrency limit (acquired, not taken)
 *       algorithm: adaptive
 *       estimator: anchored     # aimd, vegas, gradient2 or anchored (the default)
 *       max_limit: 200          # default the estimator's; min_limit, initial_limit too
 *       ttl: 30s                # a lease not released by then expires; default 30s
 *       backoff: 90%            # the estimator's parameters, each only for the
 *                               #   estimators that read it (sl_adapt_config)
 *       reserve: {critical: 20%, default: 10%}   # each priority's reserve
 *       partitions: {live: 90%, batch: {share: 10%, lend: false}}
 *       idle: 1s                # an unused share is lent after this long idle
 *
 * A file is loaded whole or not at all: every error names the file, line,
 * column and what was wrong, and the caller keeps what it had.
 */
#ifndef SL_POLICY_CONFIG_H
#define SL_POLICY_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "policy/key_template.h"
#include "sluice.h"

#define SL_CONFIG_MAX_BYTES (1 << 20)   /* a bigger file is refused */
#define SL_POLICY_MAX_TIERS 16
#define SL_POLICY_NAME_MAX 64
#define SL_POLICY_KEY_MAX SL_KEY_TEMPLATE_MAX /* a key template's text */
#define SL_POLICY_STORE_TIMEOUT_MAX 60000 /* store_timeout_ms's most */
#define SL_PLANS_HASH_MAX 512           /* bytes of plans: redis:NAME's NAME */
#define SL_PLANS_REFRESH_DEFAULT_NS INT64_C(10000000000) /* 10 s */
#define SL_PLANS_REFRESH_MIN_NS INT64_C(100000000)       /* 100 ms */
#define SL_PLANS_REFRESH_MAX_NS INT64_C(86400000000000)  /* 1 day */
#define SL_LIMIT_NAME_MAX 32            /* a named limit's name: [A-Za-z0-9_-] */
/* Room for the store keys of one check under a policy: every limit's key
 * together (sl_policy_items). */
#define SL_POLICY_KEYS_ROOM 8192

/* What decides a check when a central store cannot answer within its time
 * budget (src/backend/): a policy's on_store_error, or the server's
 * --on-store-error. */
typedef enum sl_on_error {
    SL_ON_ERROR_DEFAULT = 0, /* the server's (the flag's) */
    SL_ON_ERROR_FAIL_OPEN,
    SL_ON_ERROR_FAIL_CLOSED,
    SL_ON_ERROR_LOCAL,
} sl_on_error;

/* What a limit of a policy is charged per request: the request's COST (1
 * unless it says), or its TOKENS (0 unless it says). */
typedef enum sl_cost_unit {
    SL_UNIT_REQUESTS = 0,
    SL_UNIT_TOKENS,
} sl_cost_unit;

/* One limit of a policy. A set's limits are all named (written as a list,
 * limits:) or it is one unnamed limit (limit: and period: in place). */
typedef struct sl_named_limit {
    char name[SL_LIMIT_NAME_MAX + 1]; /* "" for a set's one unnamed limit */
    sl_cost_unit unit;
    sl_limit limit;
} sl_named_limit;

/* The limits one request is taken from together: a policy's (or a tier's),
 * or its global ones. */
typedef struct sl_limit_set {
    size_t n;          /* 0: none (a policy without a global limit) */
    sl_named_limit *l; /* owned by the config */
} sl_limit_set;

typedef struct sl_policy_tier {
    char name[SL_POLICY_NAME_MAX + 1];
    sl_limit_set limits;
} sl_policy_tier;

typedef struct sl_policy {
    char name[SL_POLICY_NAME_MAX + 1];
    sl_limit_set limits;          /* the default tier's */
    char key[SL_POLICY_KEY_MAX + 1];          /* the key template, as written */
    char key_fallback[SL_POLICY_KEY_MAX + 1]; /* the fallback's, as written; "": none */
    size_t ntemplates;                        /* 1, or 2 with a fallback */
    sl_key_template templates[2];             /* key's, then key_fallback's */
    /* A template reads the request (a header, the query, the method, the
     * path or the address), or there is a fallback: only forward-auth can
     * choose the template and render it, so every other face names the
     * store key in full (sl_policy_key). */
    bool keyed_by_request;
    bool shadow;
    sl_limit_set global;          /* shared by every key; n == 0: none */
    char *plans_path;             /* the plans file, as resolved; NULL: none */
    /* The Redis hash the plans come from (plans: redis:NAME), NULL: none;
     * and how often it is read again, in ns. The config does not read it:
     * the server does, and puts each table it reads into `plans`. */
    char *plans_redis;
    int64_t plans_refresh_ns;
    /* The table of the file or the hash: a key's tier (src/policy/plans.h).
     * Atomic because a hash's table is replaced while workers read it:
     * load it once per lookup; a table replaced stays valid until every
     * worker has moved to the next config epoch (src/server). Freed with
     * the config. */
    _Atomic(struct sl_plans *) plans;
    size_t ntiers;
    sl_policy_tier tiers[SL_POLICY_MAX_TIERS];
    /* When the store cannot answer: an sl_on_error (above),
     * 0 for the server's --on-store-error; and the time budget in ms, 0 for
     * --store-timeout-ms. */
    int on_store_error;
    int32_t store_timeout_ms;
} sl_policy;

/* One "server:" setting, as written: applied by the server with the same
 * parser as its flags. line is 1-based, for messages. */
typedef struct sl_config_setting {
    char *name;  /* with '_' turned into '-' */
    char *value;
    int line, column;
} sl_config_setting;

#define SL_ADAPTIVE_PARTITION_NAME_MAX 32
#define SL_ADAPTIVE_TTL_DEFAULT_NS INT64_C(30000000000) /* 30 s */
#define SL_ADAPTIVE_IDLE_DEFAULT_NS INT64_C(1000000000) /* 1 s */

/* A policy whose algorithm is adaptive: a concurrency limit that follows
 * measured latency, with priorities and partitions (acquired, not taken). */
typedef struct sl_adaptive_policy {
    char name[SL_POLICY_NAME_MAX + 1];
    sl_limiter_config cfg; /* shed.classes is 3: critical, default, sheddable */
    /* cfg.shed.partitions names, in the order written */
    char partition[SL_SHED_PARTITIONS_MAX][SL_ADAPTIVE_PARTITION_NAME_MAX + 1];
} sl_adaptive_policy;

typedef struct sl_config {
    sl_config_setting *settings;
    size_t nsettings;
    sl_policy *policies;
    size_t npolicies;
    /* The policies of algorithm adaptive, apart: they have no sl_limit. A
     * name is that of one policy of either kind. Owned by the config. */
    sl_adaptive_policy *adaptive;
    size_t nadaptive;
    /* The file holds no YAML node at all: it is empty, or only blanks and
     * comments. A reload tells it apart from a file without policies. */
    bool empty;
} sl_config;

/*
 * Loads `path`. On success returns 0 and *out is a config the caller frees
 * with sl_config_free(). On failure returns -1 and writes
 * "PATH:LINE:COLUMN: what was wrong" into err (errlen bytes).
 */
int sl_config_load(const char *path, sl_config **out, char *err, size_t errlen);

/* As sl_config_load, from len bytes in memory; `name` stands for the path in
 * messages. */
int sl_config_parse(const char *text, size_t len, const char *name, sl_config **out, char *err,
                    size_t errlen);

void sl_config_free(sl_config *c);

/*
 * Says, one line at a time through say(arg, line), what replacing `old` by
 * `next` does to the states of the keys: every changed limit of a policy (its
 * default, a tier, its global limit) carries each key's used units over (a
 * policy's limits are carried: see "Carried states" in sluice.h); a changed
 * key template, which finds no key again, is said loudly; removed policies
 * and tiers, and shadow mode turned on or off. Adaptive policies added,
 * removed and changed (what changed: each key keeps its estimate, clamped
 * to the new limits, and its leases). Nothing for what is unchanged.
 */
void sl_config_describe_reload(const sl_config *old, const sl_config *next,
                               void (*say)(void *arg, const char *line), void *arg);

/* Aligns every limit of c for a clock that reads Unix time minus
 * clock_offset_ns (sl_limit_align); as loaded, limits are aligned for Unix
 * time (offset 0), which is the module's clock. c may be NULL. */
void sl_config_align(sl_config *c, int64_t clock_offset_ns);

/* The policy called `name` (len bytes), or NULL. */
const sl_policy *sl_config_policy(const sl_config *c, const char *name, size_t len);

/* The adaptive policy called name (len bytes), or NULL. */
const sl_adaptive_policy *sl_config_adaptive(const sl_config *c, const char *name, size_t len);

/* Calls fn with each estimator parameter that p's estimator reads, by its
 * setting's name and as the config file writes it ("backoff", "90%";
 * "timeout", "5s"; "long_window", "600"), in the order docs/configuration.md
 * lists them. */
void sl_adaptive_params(const sl_adaptive_policy *p,
                        void (*fn)(void *arg, const char *name, const char *text), void *arg);

/* Per mille as a percentage, as the config file writes it: 125 is "12.5%",
 * 900 "90%". Returns buf. */
const char *sl_permille_text(int64_t permille, char buf[32]);

/* The defaults of an adaptive limit with estimator `kind`, max_limit `max` (>= 1; the
 * estimator's min and initial limits clamped to it) and TTL ttl_ns: sl_adapt_config_default's
 * parameters, three classes with reserves critical 20%, default 10%, sheddable 0, no partitions,
 * idle_ns 1 s. Shared by the policies and the ad-hoc commands (SL.ACQUIRE ... ADAPTIVE). */
void sl_adaptive_defaults(sl_limiter_config *c, sl_adapt_kind kind, int64_t max, int64_t ttl_ns);

/* A priority by name: "critical" 0, "default" 1, "sheddable" 2 (ASCII case ignored), or the
 * digits 0..2. Returns the class, or -1. */
int sl_priority_parse(const char *s, size_t len);

/* The partition called name in p, or -1. */
int sl_adaptive_partition(const sl_adaptive_policy *p, const char *name, size_t len);

/* The policy's limits for `tier` (NULL or len 0: the default); NULL when the
 * tier is unknown. A policy's plans file is not read here (sl_policy_items
 * does). */
const sl_limit_set *sl_policy_limits(const sl_policy *p, const char *tier, size_t len);

/*
 * A store-down policy by its name ("fail_open", "fail_closed", "local"; len
 * bytes, exact case), as --on-store-error and on_store_error: write it.
 * Returns SL_OK with *out set, or SL_ERR_ARGUMENT for any other name.
 */
int sl_on_error_parse(const char *name, size_t len, sl_on_error *out);

/* A store-down policy's name; "default" for SL_ON_ERROR_DEFAULT. Static. */
const char *sl_on_error_name(sl_on_error e);

/*
 * Writes the store key for `key` under policy p into out (cap bytes).
 * Usually key is the template's {key} and {policy} is the policy's name:
 * "{policy}:{key}" makes "api:alice" of "alice" (as every release wrote it).
 * A policy keyed by the request (keyed_by_request) is given the store key in
 * full, as forward-auth renders it from a request: it is written as it is,
 * provided one of the policy's templates could have written it (it begins and
 * ends with the template's fixed text: "{policy}:{header.x-api-key}" writes
 * only keys that begin with "api:"), so that a caller stays in the policy's
 * own keys. Returns the key's length, 0 when key is empty, -1 when it does not
 * fit in cap, or -2 when a policy keyed by the request could not have written
 * it.
 */
long sl_policy_key(const sl_policy *p, const char *key, size_t keylen, char *out, size_t cap);

/*
 * The takes one request under policy p makes, all or nothing: the key under
 * each limit of the tier (tier NULL or tierlen 0: the default), then each of
 * the policy's global limits under the global key. A limit charged in
 * tokens takes `tokens`, the others `cost`. The store key of a set's one
 * unnamed limit is the key itself (the template's, or the global key); a
 * named limit's is "{KEY}\x1fNAME", so that in Redis Cluster the limits of
 * one key share a hash slot and are taken in one command. The keys are
 * written into keybuf (keycap bytes, SL_POLICY_KEYS_ROOM is enough for any
 * key the store takes), which items[] then points into; which[i] is the
 * limit of items[i], and *nkey how many of them are the key's (the rest are
 * global). A policy with a plans file takes the tier the file gives the key
 * (the key as the caller names it, before the template), its default
 * limits for a key the file does not name (a policy keyed by the request
 * looks up the store key, which is what its callers name). Returns the number
 * of items (1 .. SL_TAKE_MANY_MAX), 0 when the key is empty or the store keys
 * do not fit (SL_ERR_KEY), -1 for an unknown tier, -2 for a tier named to a
 * policy that takes its tiers from its plans file (a caller does not choose
 * its own plan), or -3 for a key that a policy keyed by the request could not
 * have written (sl_policy_key).
 */
int sl_policy_items(const sl_policy *p, const char *tier, size_t tierlen, const char *key,
                    size_t keylen, int64_t cost, int64_t tokens, char *keybuf, size_t keycap,
                    sl_take_item items[SL_TAKE_MANY_MAX],
                    const sl_named_limit *which[SL_TAKE_MANY_MAX], size_t *nkey);

/*
 * Writes what -3 of sl_policy_items means for p into buf (cap bytes,
 * NUL-terminated): which keys its templates write, each varying part as
 * <name>: "policy 'api' keys by the request: name the store key in full, as
 * forward-auth writes it: api:<header.x-api-key>:<method>".
 */
void sl_policy_key_hint(const sl_policy *p, char *buf, size_t cap);

/* As sl_policy_items, for a policy whose plans the caller looked the key
 * up in itself (the module reads a plans hash in its own keyspace): tier is
 * the index of the key's tier in p->tiers, -1 (or any other) for the
 * default. Returns as sl_policy_items, never -1 or -2. */
int sl_policy_items_at(const sl_policy *p, int tier, const char *key, size_t keylen,
                       int64_t cost, int64_t tokens, char *keybuf, size_t keycap,
                       sl_take_item items[SL_TAKE_MANY_MAX],
                       const sl_named_limit *which[SL_TAKE_MANY_MAX], size_t *nkey);

/* The key of the policy's global limits: "\x1fglobal\x1f{policy}". The
 * control bytes keep it apart from any key a template makes of an ordinary
 * client key (clients of sluiced are trusted: any of them may name any key). */
size_t sl_policy_global_key(const sl_policy *p, char *out, size_t cap);

/*
 * The name a reply and the IETF fields give a policy's limit: "P" for the
 * key's unnamed limit, "P.NAME" for its limit NAME, "P.global" and
 * "P.global.NAME" for the global ones (P the policy's name). At most
 * SL_POLICY_NAME_MAX + SL_LIMIT_NAME_MAX + 8 bytes and its NUL. Returns the
 * length written, as snprintf.
 */
int sl_policy_limit_name(const char *policy, const char *limit, bool global, char *out,
                         size_t cap);
#define SL_POLICY_LIMIT_NAME_ROOM (SL_POLICY_NAME_MAX + SL_LIMIT_NAME_MAX + 9)

#endif
