/*
 * command.h: what the blocking and the asynchronous RESP clients share (the
 * client's own, not public: include/sluice_resp.h is the API).
 *
 *   sl_rc_cmd      one command as hiredis sends it (argv and lengths), built
 *                  from a call's arguments, with the kind of reply it expects
 *   sl_rc_answer   what a reply says, whichever command it answers
 *   sl_rc_read()   a hiredis reply object read into an answer, or the error
 *                  it is (the server's text, or what is wrong with its shape)
 *
 * Both are plain structs on the caller's stack: building and reading
 * allocate nothing. The argv strings point into the call's arguments and into
 * the command's own scratch (numbers written as text), so a command lives
 * no longer than the call that built it; hiredis copies it when it formats.
 */
#ifndef SL_CLIENT_REDIS_COMMAND_H
#define SL_CLIENT_REDIS_COMMAND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "sluice_resp.h"

/* What a command's reply must be. */
typedef enum sl_rc_kind {
    SL_RC_AUTH,     /* +OK */
    SL_RC_THROTTLE, /* five integers */
    SL_RC_DECISION, /* SL.TAKE, SL.PEEK: a decision */
    SL_RC_POLICY,   /* SL.POLICY: a decision with rejected_by, scope, binding */
    SL_RC_MANY,     /* SL.TAKEMANY: allowed, rejected_by, results */
    SL_RC_COUNT,    /* SL.RESET: an integer >= 0 */
    SL_RC_RELEASE,  /* SL.RELEASE: 0 or 1 */
    SL_RC_LEASE,    /* SL.ACQUIRE: a bulk string, or a null */
} sl_rc_kind;

/* The most arguments of one command: SL.RESET with every key it may take
 * (SL.TAKEMANY's eight limits with every option need 114). */
#define SL_RC_ARGV_MAX (SL_RC_RESET_MAX + 1)
#define SL_RC_NUMS_MAX 48 /* numbers written as text in one command */

/* What a reply must be, kept with a call until its reply comes. */
typedef struct sl_rc_expect {
    sl_rc_kind kind;
    const char *name; /* "SL.TAKE" (static): for messages */
    size_t n;         /* SL.TAKEMANY: how many decisions the reply holds */
} sl_rc_expect;

typedef struct sl_rc_cmd {
    sl_rc_expect expect;
    int argc;
    const char *argv[SL_RC_ARGV_MAX];
    size_t lens[SL_RC_ARGV_MAX];
    size_t nnums;
    char nums[SL_RC_NUMS_MAX][32];
} sl_rc_cmd;

typedef struct sl_rc_answer {
    sl_decision d[SL_TAKE_MANY_MAX]; /* one, or SL.TAKEMANY's n */
    size_t n;
    int rejected_by;                 /* SL.TAKEMANY */
    sl_rc_policy_info info;          /* SL.POLICY */
    int64_t count;                   /* SL.RESET, SL.RELEASE */
    sl_rc_lease lease;               /* SL.ACQUIRE */
} sl_rc_answer;

/*
 * Building: each fills *cmd from a call's arguments and returns 0, or -1
 * with errstr (cap bytes) saying which argument is invalid; nothing is sent
 * then. The pointers in *cmd point into the arguments: keep them alive until
 * the command is handed to hiredis.
 */
int sl_rc_cmd_auth(sl_rc_cmd *cmd, const char *user, const char *password, char *errstr,
                   size_t cap);
int sl_rc_cmd_throttle(sl_rc_cmd *cmd, const char *key, int64_t max_burst,
                       int64_t count_per_period, int64_t period_s, int64_t quantity, char *errstr,
                       size_t cap);
int sl_rc_cmd_take(sl_rc_cmd *cmd, bool peek, const char *key, const sl_rc_limit *l, int64_t cost,
                   char *errstr, size_t cap);
int sl_rc_cmd_policy(sl_rc_cmd *cmd, const char *policy, const char *key, int64_t cost,
                     int64_t tokens, const char *tier, char *errstr, size_t cap);
int sl_rc_cmd_take_many(sl_rc_cmd *cmd, const sl_rc_item *items, size_t n, char *errstr,
                        size_t cap);
int sl_rc_cmd_reset(sl_rc_cmd *cmd, const char *const *keys, size_t n, char *errstr, size_t cap);
int sl_rc_cmd_acquire(sl_rc_cmd *cmd, const char *key, int64_t max_in_flight, int64_t ttl_ms,
                      int64_t weight, char *errstr, size_t cap);
int sl_rc_cmd_acquire_adaptive(sl_rc_cmd *cmd, const char *key, const sl_rc_adaptive *a,
                               char *errstr, size_t cap);
int sl_rc_cmd_release(sl_rc_cmd *cmd, const char *key, const char *lease_id,
                      const sl_rc_outcome *o, char *errstr, size_t cap);

/*
 * Reads reply r (not NULL) to a command that expects *e into *out. Returns SL_RC_OK;
 * SL_RC_ERR_SERVER for an error reply, its text in errstr; or
 * SL_RC_ERR_REPLY for a reply of another shape, errstr naming the command
 * and what is wrong. errstr is cap bytes, always NUL-terminated.
 */
int sl_rc_read(const sl_rc_expect *e, const redisReply *r, sl_rc_answer *out, char *errstr,
               size_t cap);

#endif
