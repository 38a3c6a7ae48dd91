/*
 * error.c: the one table of sluice's result codes. Each code has one English
 * message (RESP replies put "ERR " in front of it) and the HTTP status that
 * reports it. Messages are lowercase without a final period, as Redis writes
 * its errors.
 */
#include "sluice.h"

struct sl_error_entry {
    const char *message;
    int http_status;
};

/* Indexed by -status. */
static const struct sl_error_entry sl_errors[] = {
    [0] = {"ok", 200},
    [-SL_ERR_LIMIT] = {"limit must be a positive integer of at most 2305843009213693951 "
                       "(65536 for sliding_log)", 400},
    [-SL_ERR_PERIOD] = {"period must be positive and at most 73 years", 400},
    /* The faces refuse a burst of 0 with this too (the library reads 0 as
     * "the limit"; a user who writes it means no burst): omitting it is how
     * a user asks for the limit. */
    [-SL_ERR_BURST] = {"burst must be a positive integer of at most 2305843009213693951 "
                       "(omit it for a burst of the limit)", 400},
    [-SL_ERR_COST] = {"cost must be a non-negative integer", 400},
    [-SL_ERR_OVERFLOW] = {"burst * period / limit is too large: at most 73 years", 400},
    [-SL_ERR_TIME] = {"time is outside the supported range", 500},
    [-SL_ERR_ALGORITHM] = {"unknown algorithm", 400},
    [-SL_ERR_RATE] = {"rate is too high: less than one microsecond per request", 400},
    [-SL_ERR_NOMEM] = {"out of memory", 503},
    [-SL_ERR_KEY] = {"key is empty or too long", 400},
    [-SL_ERR_IO] = {"i/o error", 500},
    [-SL_ERR_CORRUPT] = {"snapshot is truncated or corrupt", 500},
    [-SL_ERR_VERSION] = {"snapshot has an unknown format version", 500},
    [-SL_ERR_ARGUMENT] = {"invalid argument", 400},
    [-SL_ERR_WRONGTYPE] = {"key holds a state of another algorithm or size that this limit cannot "
                           "carry over (SL.RESET the key to start it again)", 409},
    [-SL_ERR_UNAVAILABLE] = {"the store is unavailable", 503},
    [-SL_ERR_UNSUPPORTED] = {"not supported by this store", 501},
};

#define SL_ERROR_COUNT ((int)(sizeof sl_errors / sizeof sl_errors[0]))

static const struct sl_error_entry *sl_error_find(int status)
{
    if (status > 0 || -status >= SL_ERROR_COUNT || sl_errors[-status].message == NULL)
        return NULL;
    return &sl_errors[-status];
}

const char *sl_strerror(int status)
{
    const struct sl_error_entry *e = sl_error_find(status);
    return e ? e->message : "unknown error";
}

int sl_http_status(int status)
{
    const struct sl_error_entry *e = sl_error_find(status);
    return e ? e->http_status : 500;
}
