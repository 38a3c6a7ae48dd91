/*
 * dlog.h: the decision log (--decision-log FILE|-, --decision-log-sample R):
 * one JSON line per sampled decision (proto/dlog_json.h), written by a
 * thread of its own so that no worker ever waits on the file.
 *
 *   worker 0 ──sample──> ring 0 ─┐
 *   worker 1 ──sample──> ring 1 ─┼──> writer thread ──format, batch──> write(2)
 *   worker N ──sample──> ring N ─┘
 *
 * A worker decides whether to keep a decision with its own sampler (no
 * lock, no shared line), copies the decision's fields (not yet JSON) into
 * its own ring (common/spsc.h), and goes on; when its ring is full the
 * decision is dropped and counted. The writer drains every ring, formats
 * the lines into a batch and writes it with write(2); a file that does not
 * take its writes (a full disk, a pipe nobody reads) slows only the
 * writer, whose rings then fill and drop. With the flag off, a worker's
 * cost is one test of a NULL pointer (sl_worker.dlog).
 *
 * SIGHUP reopens the file by its path (logrotate's `create` then
 * `postrotate kill -HUP`): the main thread opens it, and the writer takes
 * the new descriptor before its next write. At shutdown the writer writes
 * what the rings hold, for at most SL_DLOG_STOP_MS.
 */
#ifndef SL_SERVER_DLOG_H
#define SL_SERVER_DLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stdalign.h>
#include <stdatomic.h>

#include "cmd/rls.h"
#include "common/buf.h"
#include "common/sample.h"
#include "common/spsc.h"

struct sl_worker;
struct sl_check;

typedef struct sl_dlog sl_dlog;

/* A worker's half of the log, which only its worker writes (but for the
 * ring's consumer side, the writer's): in the open so that the sampling
 * test is inlined into the worker's path (sl_dlog_check). */
typedef struct sl_dlog_worker {
    sl_spsc ring;
    /* On a line of its own: the worker writes it at every decision, and
     * the writer reads the ring's last line (its size and bytes). */
    alignas(64) sl_sampler sampler;
    /* Lines dropped for a full ring: written by this worker alone
     * (sl_counter_add), read by /metrics. */
    alignas(64) atomic_uint_fast64_t dropped;
} sl_dlog_worker;

/* Each worker's ring, in bytes: about 6000 lines of a short key. */
#define SL_DLOG_RING_BYTES ((size_t)1 << 20)
/* How long the writer may go on writing at shutdown. */
#define SL_DLOG_STOP_MS 2000
/* Write errors are logged at most once per this many seconds. */
#define SL_DLOG_ERROR_LOG_S 10

/*
 * Opens path for the log ("-": standard output), appending, creating it
 * with mode 0640 (keys may be credentials: an API key as forward-auth's
 * key), and prepares one ring per worker, keeping ppm parts per million of
 * the decisions (common/sample.h), each worker's sampler seeded from seed.
 * max_key is the longest key a line may hold. Returns the log, its writer
 * not yet started, or NULL with the reason in err ("cannot open
 * /var/log/x: Permission denied").
 */
sl_dlog *sl_dlog_open(const char *path, uint32_t ppm, int nworkers, uint64_t seed,
                      size_t max_key, char *err, size_t errlen);

/* Starts the writer thread; 0, or -1 with the error logged. */
int sl_dlog_start(sl_dlog *d);

/* Worker i's half (0 <= i < nworkers), for sl_worker.dlog. */
sl_dlog_worker *sl_dlog_worker_of(sl_dlog *d, int i);

/* SIGHUP, on the main thread: opens the path again; the writer writes to
 * the new file from its next write on. A path that cannot be opened now is
 * logged, and the writer keeps the file it has. Nothing for "-". */
void sl_dlog_reopen(sl_dlog *d);

/* Shutdown, once no worker runs: lets the writer write what the rings
 * hold (for at most SL_DLOG_STOP_MS), stops it and frees the log. A writer
 * stuck in write(2) past that (a blocked standard output) is left behind,
 * logged, with the log. NULL does nothing. */
void sl_dlog_stop(sl_dlog *d);

/* The log's /metrics series (written and dropped lines, write errors);
 * zeros when d is NULL (no log). */
void sl_dlog_metrics(sl_dlog *d, sl_buf *out);

/* A worker's decision (sl_cmd_ctx.decided's arguments) that its sampler
 * kept: copied into its ring. face is SL_PROTO_RESP or SL_PROTO_HTTP.
 * Only w's thread; w->dlog not NULL. */
void sl_dlog_record(struct sl_worker *w, int face, const struct sl_check *k, bool allowed,
                    bool shadow);

/* A worker's decision, dw its half of the log (w->dlog): logged when the
 * sampler keeps it. The test is inline; the copy is not. */
static inline void sl_dlog_check(sl_dlog_worker *dw, struct sl_worker *w, int face,
                                 const struct sl_check *k, bool allowed, bool shadow)
{
    if (sl_sampler_keep(&dw->sampler))
        sl_dlog_record(w, face, k, allowed, shadow);
}

/* ShouldRateLimit's decisions (sl_rls_ctx.logged, arg the worker): over
 * gRPC, and over HTTP's POST /json. */
void sl_dlog_rls_grpc(void *arg, const sl_rls_decision *d);
void sl_dlog_rls_http(void *arg, const sl_rls_decision *d);

#endif /* SL_SERVER_DLOG_H */
