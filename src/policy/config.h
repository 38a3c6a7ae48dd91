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
 *       burst: 20               # default: limit
 *       key: "api:{key}"        # the store key; default "{policy}:{key}"
 *       shadow: false           # dry run: decide and count, never refuse
 *       tiers:                  # optional: other limits, chosen per request; a
 *                               #   key keeps the units it used across tiers
 *         free: {limit: 100, period: 1m}
 *         paid: {limit: 10000, period: 1m, burst: 500}
 *       global: {limit: 50000, period: 1m}   # one limit shared by every key
 *       on_store_error: local   # a central store (--store redis://) down or slow:
 *                               #   fail_open, fail_closed or local; default the flag's
 *       store_timeout_ms: 20    # the store's time budget for this policy, 1..60000
 *
 * A file is loaded whole or not at all: every error names the file, line,
 * column and what was wrong, and the caller keeps what it had.
 */
#ifndef SL_POLICY_CONFIG_H
#define SL_POLICY_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "sluice.h"

#define SL_CONFIG_MAX_BYTES (1 << 20)   /* a bigger file is refused */
#define SL_POLICY_MAX_TIERS 16
#define SL_POLICY_NAME_MAX 64
#define SL_POLICY_KEY_MAX 128           /* the key template */
#define SL_POLICY_STORE_TIMEOUT_MAX 60000 /* store_timeout_ms's most */

/* What decides a check when a central store cannot answer within its time
 * budget (src/backend/): a policy's on_store_error, or the server's
 * --on-store-error. */
typedef enum sl_on_error {
    SL_ON_ERROR_DEFAULT = 0, /* the server's (the flag's) */
    SL_ON_ERROR_FAIL_OPEN,
    SL_ON_ERROR_FAIL_CLOSED,
    SL_ON_ERROR_LOCAL,
} sl_on_error;

typedef struct sl_policy_tier {
    char name[SL_POLICY_NAME_MAX + 1];
    sl_limit limit;
} sl_policy_tier;

typedef struct sl_policy {
    char name[SL_POLICY_NAME_MAX + 1];
    sl_limit limit;               /* the default tier */
    char key[SL_POLICY_KEY_MAX + 1]; /* template: {policy} and {key} are replaced */
    bool shadow;
    bool has_global;
    sl_limit global;
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

typedef struct sl_config {
    sl_config_setting *settings;
    size_t nsettings;
    sl_policy *policies;
    size_t npolicies;
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
 * and tiers, and shadow mode turned on or off. Nothing for what is unchanged.
 */
void sl_config_describe_reload(const sl_config *old, const sl_config *next,
                               void (*say)(void *arg, const char *line), void *arg);

/* Aligns every limit of c for a clock that reads Unix time minus
 * clock_offset_ns (sl_limit_align); as loaded, limits are aligned for Unix
 * time (offset 0), which is the module's clock. c may be NULL. */
void sl_config_align(sl_config *c, int64_t clock_offset_ns);

/* The policy called `name` (len bytes), or NULL. */
const sl_policy *sl_config_policy(const sl_config *c, const char *name, size_t len);

/* The policy's limit for `tier` (NULL or len 0: the default); NULL when the
 * tier is unknown. */
const sl_limit *sl_policy_limit(const sl_policy *p, const char *tier, size_t len);

/*
 * A store-down policy by its name ("fail_open", "fail_closed", "local"; len
 * bytes, exact case), as --on-store-error and on_store_error: write it.
 * Returns SL_OK with *out set, or SL_ERR_ARGUMENT for any other name.
 */
int sl_on_error_parse(const char *name, size_t len, sl_on_error *out);

/* A store-down policy's name; "default" for SL_ON_ERROR_DEFAULT. Static. */
const char *sl_on_error_name(sl_on_error e);

/*
 * Writes the store key for `key` under policy p into out (cap bytes): the
 * template with {policy} and {key} replaced. Returns its length, or 0 when
 * it does not fit.
 */
size_t sl_policy_key(const sl_policy *p, const char *key, size_t keylen, char *out, size_t cap);

/*
 * The takes one request under policy p makes: its key under the tier's limit
 * (tier NULL or tierlen 0: the default) and, when the policy has a global
 * limit, that limit under its global key; both of `cost`. The keys are
 * written into keybuf (keycap bytes) and gkeybuf (at least
 * SL_POLICY_NAME_MAX + 16 bytes), which items[] then points into. Returns
 * the number of items (1 or 2), 0 when the key is empty or its store key does
 * not fit (SL_ERR_KEY), or -1 for an unknown tier.
 */
int sl_policy_items(const sl_policy *p, const char *tier, size_t tierlen, const char *key,
                    size_t keylen, int64_t cost, char *keybuf, size_t keycap, char *gkeybuf,
                    size_t gkeycap, sl_take_item items[2]);

/* The store key of the policy's global limit: "\x1fglobal\x1f{policy}". The
 * control bytes keep it apart from any key a template makes of an ordinary
 * client key (clients of sluiced are trusted: any of them may name any key). */
size_t sl_policy_global_key(const sl_policy *p, char *out, size_t cap);

#endif
