/*
 * persist.c: the snapshot writes of sluiced and their record. The record is
 * the process's (one server runs per process), behind a mutex: a write is
 * seldom, and INFO or /metrics must see its fields from one write, not a
 * time from one and a status from another.
 */
#include "server/persist.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "server/log.h"
#include "server/server.h"

static pthread_mutex_t sl_last_lock = PTHREAD_MUTEX_INITIALIZER;
static sl_snapshot_status sl_last = {.ok = true};

int sl_snapshot_write(sl_server *srv, const char *why)
{
    if (!srv->cfg.snapshot)
        return SL_OK;
    int64_t wall = sl_now_wall(), start = sl_now_mono();
    int rc = sl_store_snapshot_save(srv->store, srv->cfg.snapshot, start, wall);
    int e = errno;
    int64_t took = sl_now_mono() - start;
    pthread_mutex_lock(&sl_last_lock);
    sl_last.attempt_wall_ns = wall;
    sl_last.duration_ns = took;
    sl_last.ok = rc == SL_OK;
    if (rc == SL_OK) {
        sl_last.success_wall_ns = wall;
        sl_last.saves++;
    } else {
        sl_last.failures++;
    }
    pthread_mutex_unlock(&sl_last_lock);
    if (rc == SL_OK)
        sl_log(SL_LOG_INFO, "snapshot written to %s (%s)", srv->cfg.snapshot, why);
    else
        sl_log(SL_LOG_ERROR, "snapshot %s (%s): %s: %s", srv->cfg.snapshot, why, sl_strerror(rc),
               strerror(e));
    errno = e;
    return rc;
}

void sl_snapshot_last(sl_snapshot_status *out)
{
    pthread_mutex_lock(&sl_last_lock);
    *out = sl_last;
    pthread_mutex_unlock(&sl_last_lock);
}
