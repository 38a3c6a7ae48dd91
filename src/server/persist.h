/*
 * persist.h: sluiced's snapshot writes (periodic, SAVE and shutdown alike)
 * and what INFO and /metrics say of the last one.
 */
#ifndef SL_SERVER_PERSIST_H
#define SL_SERVER_PERSIST_H

#include <stdbool.h>
#include <stdint.h>

struct sl_server;

/* The last snapshot write, as INFO's persistence section and /metrics show
 * it. Times are Unix nanoseconds; a 0 time means none yet. */
typedef struct sl_snapshot_status {
    int64_t attempt_wall_ns; /* when the last write began */
    int64_t success_wall_ns; /* when the last write that succeeded began */
    int64_t duration_ns;     /* how long the last write took, success or not */
    bool ok;                 /* the last write succeeded (true before any) */
    uint64_t saves, failures; /* writes that succeeded, and that failed */
} sl_snapshot_status;

/*
 * Writes the snapshot (--snapshot), if there is one to write, records how
 * it went for sl_snapshot_last, and logs it with `why` ("periodic", "SAVE",
 * "shutdown"). Returns SL_OK or the store's error; errno is left as the
 * failed write set it, so that the caller can name the cause. Safe from any
 * thread (the main thread's timer and a worker's SAVE may overlap: each
 * writes a file of its own and renames it over the path).
 */
int sl_snapshot_write(struct sl_server *srv, const char *why);

/* Copies the record of the last write into *out. Safe from any thread. */
void sl_snapshot_last(sl_snapshot_status *out);

#endif
