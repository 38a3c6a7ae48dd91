/*
 * envoy.h: envoyproxy/ratelimit's configuration, read as that service reads
 * it, and its descriptor matching. Pure: no I/O beyond reading the files.
 * The gRPC face (and HTTP's POST /json) call it; docs/envoy.md describes
 * the format and the rules for users.
 *
 * One file holds one domain and a tree of descriptors:
 *
 *     domain: messaging
 *     descriptors:
 *       - key: message_type            # a level of the tree: key, and
 *         value: marketing             #   optionally value ("foo*": a wildcard)
 *         descriptors:
 *           - key: to_number
 *             rate_limit: {unit: day, requests_per_unit: 5}
 *
 * A request's descriptor, the entries (message_type, marketing),
 * (to_number, 2061111111), walks the tree one entry a level. At each level:
 * the child whose "key_value" is the entry's key_value, else the first
 * wildcard child (in file order) whose pattern matches it, else the child
 * whose key alone is the entry's key. The walk stops at a child without
 * children. The rule of the node reached by the last entry applies; a
 * descriptor that ends above the rule or runs past the tree matches none.
 *
 *     level 0        level 1
 *     message_type_marketing ── to_number  (rule: 5/day)
 *     to_number  (rule: 100/day)
 *
 * Extensions, all off unless written: rate_limit.algorithm (any sluice
 * algorithm but concurrency; default fixed_window, windows at multiples of
 * the unit since the Unix epoch, as the reference), rate_limit.burst, and
 * rate_limits: [...] beside rate_limit, more limits on one rule, taken
 * together.
 *
 * Memory: a config owns everything it points to; sl_envoy_free frees it.
 * Matching allocates nothing (but for an entry longer than
 * SL_ENVOY_SCRATCH bytes) and reads the config only: many threads may match
 * against one config at once.
 */
#ifndef SL_POLICY_ENVOY_H
#define SL_POLICY_ENVOY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice.h"

#define SL_ENVOY_FILE_MAX_BYTES (1 << 20) /* a bigger file is refused */
#define SL_ENVOY_MAX_DEPTH 32             /* levels of descriptors a file may nest */
#define SL_ENVOY_MAX_LIMITS 8             /* rate_limit and rate_limits together */
#define SL_ENVOY_MAX_NODES 100000         /* descriptors a file may hold (aliases counted) */
#define SL_ENVOY_SCRATCH 1024             /* bytes of key_value matched on the stack */

/* The reference's units (RateLimitResponse.RateLimit.Unit: the same
 * numbers as the proto's enum). A month is 30 days and a year 365, as the
 * reference counts them. */
typedef enum sl_envoy_unit {
    SL_ENVOY_UNKNOWN = 0,
    SL_ENVOY_SECOND = 1,
    SL_ENVOY_MINUTE = 2,
    SL_ENVOY_HOUR = 3,
    SL_ENVOY_DAY = 4,
    SL_ENVOY_MONTH = 5,
    SL_ENVOY_YEAR = 6,
    SL_ENVOY_WEEK = 7,
} sl_envoy_unit;

/* The unit named `name` (any case, as the reference upper-cases it);
 * SL_ENVOY_UNKNOWN for any other name, "unknown" included. */
sl_envoy_unit sl_envoy_unit_parse(const char *name, size_t len);
/* The unit's name in lowercase ("second"), NULL for UNKNOWN or a bad value. */
const char *sl_envoy_unit_name(sl_envoy_unit u);
/* The unit's length in seconds (the reference's divider); 0 for UNKNOWN. */
int64_t sl_envoy_unit_seconds(sl_envoy_unit u);

/* One limit of a rule. */
typedef struct sl_envoy_limit {
    sl_envoy_unit unit;
    uint32_t requests_per_unit; /* 0: every request is over the limit */
    sl_algorithm algorithm;     /* SL_FIXED_WINDOW unless the file says */
    int64_t burst;              /* as written; 0: the algorithm's default */
    /* The sluice limit: limit = requests_per_unit, period = the unit,
     * carried. Initialized (sl_limit_init) only when requests_per_unit > 0. */
    sl_limit limit;
} sl_envoy_limit;

/*
 * Fills *l with requests_per_unit per unit under algorithm (SL_FIXED_WINDOW
 * for the reference's) and burst (0: the algorithm's default): what a rule's
 * limit holds, and what a request's own limit override (RateLimitDescriptor's
 * limit, fixed_window) maps to. The limit is carried (sl_limit_carry): its
 * states name it, so that a reload that changes a rule's limit, unit or
 * algorithm carries over the units each key has used. Returns SL_OK;
 * SL_ERR_PERIOD for an unknown unit; or sl_limit_init's (or
 * sl_limit_carry's) error.
 */
int sl_envoy_limit_init(sl_envoy_limit *l, sl_envoy_unit unit, uint32_t requests_per_unit,
                        sl_algorithm algorithm, int64_t burst);

/* A descriptor's rate_limit block (with the rate_limits beside it). */
typedef struct sl_envoy_rule {
    char *name;          /* rate_limit.name; "" when none */
    char **replaces;     /* rate_limit.replaces[*].name, each non-empty */
    size_t nreplaces;
    bool unlimited;      /* every request OK, nothing counted; nlimits == 0 */
    bool shadow_mode;    /* counted, but always OK */
    bool quota_mode;     /* read and kept: the reference's quota_mode */
    bool detailed_metric;
    size_t nlimits;      /* 1 (rate_limit) + rate_limits; 0 when unlimited */
    sl_envoy_limit *limits;
    char *full_key;      /* the reference's stats key: "domain.key_value.key" */
    const char *file;    /* the file it came from (the config's copy) */
    int line;            /* the line of its rate_limit key, 1-based */
} sl_envoy_rule;

/* A node of the descriptor tree: one `- key: ...` of a descriptors list. */
typedef struct sl_envoy_node {
    char *key, *value;      /* value "" when the file gives none */
    char *final_key;        /* key, or key "_" value: what a level is looked up by */
    size_t final_len;
    bool value_to_metric, share_threshold;
    /* A wildcard (final_key holds '*'): final_key split at each '*'. */
    size_t nparts;          /* 0: not a wildcard */
    char **parts;
    size_t *part_lens;
    sl_envoy_rule *rule;    /* NULL: no rate_limit here */
    struct sl_envoy_level {
        size_t n;
        struct sl_envoy_node **sorted;   /* by final_key, for the exact look-ups */
        struct sl_envoy_node **wild;     /* the wildcard children, in file order */
        size_t nwild;
        struct sl_envoy_node *nodes;     /* in file order, owned */
    } children;
} sl_envoy_node;

typedef struct sl_envoy_level sl_envoy_level;

typedef struct sl_envoy_domain {
    char *name;
    char *file;             /* the file that gave it */
    sl_envoy_level top;
} sl_envoy_domain;

typedef struct sl_envoy_config {
    size_t ndomains;
    sl_envoy_domain *domains; /* sorted by name */
} sl_envoy_config;

/* A new, empty config (no domains); NULL when out of memory. */
sl_envoy_config *sl_envoy_new(void);
void sl_envoy_free(sl_envoy_config *c);

/*
 * Adds the domain of one file's text (`name` is the file's name in
 * messages). Returns 0, or -1 with "NAME:LINE:COL: message" (or "NAME:
 * message" when there is no place) in err; the config is then as it was.
 * A domain that the config already holds is refused, as the reference
 * refuses it.
 */
int sl_envoy_add(sl_envoy_config *c, const char *text, size_t len, const char *name, char *err,
                 size_t errlen);

/*
 * Loads every file of `dir` whose name ends in ".yaml" and does not begin
 * with '.', in name order (symbolic links followed; subdirectories not
 * read), into a new config: *out is the caller's (sl_envoy_free). Returns 0,
 * or -1 with *out NULL and the first error in err (which names the file).
 */
int sl_envoy_load_dir(const char *dir, sl_envoy_config **out, char *err, size_t errlen);

/* Puts a limit's windows where the reference has them, at multiples of the
 * unit since the Unix epoch (a week from Thursday 1970-01-01), for a clock
 * that reads Unix time minus clock_offset_ns; as initialized, they fall at
 * multiples of the unit on that clock. Returns sl_limit_align's error. */
sl_status sl_envoy_limit_align(sl_envoy_limit *l, int64_t clock_offset_ns);
/* sl_envoy_limit_align on every limit of c. */
void sl_envoy_align(sl_envoy_config *c, int64_t clock_offset_ns);

/* The domain named so, NULL when none. */
const sl_envoy_domain *sl_envoy_domain_find(const sl_envoy_config *c, const char *name,
                                            size_t len);

/* A request's descriptor entry: bytes, not necessarily NUL-terminated. */
typedef struct sl_envoy_entry {
    const char *key;
    size_t key_len;
    const char *value;
    size_t value_len;
} sl_envoy_entry;

typedef struct sl_envoy_descriptor {
    const sl_envoy_entry *entries;
    size_t n;
} sl_envoy_descriptor;

/* How an entry found its node. */
typedef enum sl_envoy_how {
    SL_ENVOY_BY_VALUE = 1,    /* its key_value */
    SL_ENVOY_BY_WILDCARD = 2, /* a wildcard pattern */
    SL_ENVOY_BY_KEY = 3,      /* its key alone */
} sl_envoy_how;

/* What matching gave one descriptor. */
typedef struct sl_envoy_match {
    const sl_envoy_rule *rule; /* NULL: no rule applies */
    /* Dropped by another matched rule's replaces (sl_envoy_match_request):
     * answer OK with no limit, and count nothing. */
    bool replaced;
    size_t depth;              /* entries the walk consumed */
    const sl_envoy_node *path[SL_ENVOY_MAX_DEPTH];
    uint8_t how[SL_ENVOY_MAX_DEPTH]; /* an sl_envoy_how each */
} sl_envoy_match;

/*
 * Matches one descriptor against a domain (as the reference's GetLimit).
 * Returns 0 (m->rule NULL when nothing applies), or SL_ERR_NOMEM when a
 * long entry could not be copied for a look-up.
 */
int sl_envoy_match_descriptor(const sl_envoy_domain *d, const sl_envoy_descriptor *desc,
                              sl_envoy_match *m);

/* What sl_envoy_match_request found of the domain. */
#define SL_ENVOY_DOMAIN_UNKNOWN 1

/*
 * Matches each of a request's n descriptors (out[i] for desc[i]), then
 * applies replaces as the reference's service does: every name that a
 * matched rule replaces (unlimited rules included) drops each matched,
 * limited rule of that name (out[i].replaced). Returns 0;
 * SL_ENVOY_DOMAIN_UNKNOWN when the config has no such domain (every out[i]
 * then has no rule); or SL_ERR_NOMEM.
 */
int sl_envoy_match_request(const sl_envoy_config *c, const char *domain, size_t dlen,
                           const sl_envoy_descriptor *desc, size_t n, sl_envoy_match *out);

/*
 * The store key of a matched descriptor's limit number `index` (0 for
 * rate_limit, 1.. for rate_limits): "\x1f" "envoy" "\x1f" DOMAIN, then
 * "\x1f" KEY "\x1f" VALUE for each entry of the request (a share_threshold
 * wildcard's entry gives the pattern instead of its value, so that every
 * value it matches shares one state), then "\x1f#" INDEX for index > 0.
 * A request's limit override of unit U takes index SL_ENVOY_MAX_LIMITS + U,
 * so that it never shares a state with a rule's limit.
 * Inside each part the bytes 0x1b and 0x1f are escaped as 0x1b '1' and
 * 0x1b '2': two requests share a key only when their domain and entries
 * are the same (a share_threshold entry counting as its pattern), and no
 * key of sluiced's policies begins with 0x1f. The window is not part of it
 * (the state carries it).
 * Writes at most cap bytes (no NUL) and returns the key's full length:
 * larger than cap means out was too small.
 */
size_t sl_envoy_store_key(const char *domain, size_t dlen, const sl_envoy_descriptor *desc,
                          const sl_envoy_match *m, size_t index, char *out, size_t cap);

/*
 * The stats key the reference names a matched descriptor's metrics by:
 * the rule's full_key, with the request's values where detailed_metric or
 * value_to_metric say. Writes and returns as sl_envoy_store_key.
 */
size_t sl_envoy_metric_key(const char *domain, size_t dlen, const sl_envoy_descriptor *desc,
                           const sl_envoy_match *m, char *out, size_t cap);

#endif
