/*
 * clock.h: the two clocks sluice reads, in integer nanoseconds.
 *
 * The algorithms never read a clock: their callers read one of these once
 * per request (or per batch of requests) and pass the time down, as Redis
 * takes one time snapshot per command.
 */
#ifndef SL_COMMON_CLOCK_H
#define SL_COMMON_CLOCK_H

#include <stdint.h>

/*
 * The monotonic clock: CLOCK_MONOTONIC, moved 2^55 ns (about 417 days)
 * ahead. It never steps, so a store run on it never sees time go back. A
 * snapshot restored after a reboot rebases its times onto this clock; the
 * offset keeps times from before the boot positive, so that a window that
 * ended before the reboot is still seen to have ended (times clamp at 0).
 * Every reader of sluiced's store, and the CLI, use this one clock.
 */
int64_t sl_now_mono(void);

/* Unix time (CLOCK_REALTIME): what a snapshot records, and what puts a
 * limit's windows on the calendar. It may step; never measure with it. */
int64_t sl_now_wall(void);

/*
 * Unix time minus sl_now_mono, from one reading of each (the wall clock
 * read between two monotonic readings, against their midpoint). A store
 * runs on the monotonic clock, which never steps, and windows are put on
 * the wall clock through this offset instead (sl_limit_align). Measure it
 * once, at start: a wall clock stepped later (an NTP step, date -s) then
 * does not move the windows, which stay where the wall clock put them at
 * start, and no window is cut short or stretched by the step. A restart
 * measures again; states restored from a snapshot are rebased by the wall
 * clock, so each keeps its window until that ends, and the next one is
 * aligned on the wall clock as it is then.
 */
int64_t sl_clock_offset(void);

#endif /* SL_COMMON_CLOCK_H */
