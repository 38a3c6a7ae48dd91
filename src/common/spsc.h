/*
 * spsc.h: a bounded ring of variable-length records between exactly one
 * producer thread and one consumer thread, without locks: the producer
 * never waits for the consumer (a record that does not fit is refused, and
 * the producer counts it), and the consumer never waits for the producer.
 * sluiced's decision log gives each worker one, which its writer thread
 * drains (server/dlog.h).
 *
 * The bytes, cap of them (a power of two), hold records one after the
 * other, each an 8-byte header (its payload's length) and its payload,
 * padded to 8 bytes. A record never wraps: when one does not fit between
 * its place and the end of the bytes, a wrap header fills that end and the
 * record starts again at 0.
 *
 *   0                                                    cap
 *   | rec | rec |   free    | rec | rec | rec | WRAP pad |
 *               ^ head (next write)  ^ tail (next read)
 *
 * head and tail count every byte ever written and read (they never wrap
 * in practice: 2^64 bytes), so head - tail is the bytes in use. The
 * producer publishes head with a release store once a record's bytes are
 * written; the consumer reads head with an acquire load, so it sees the
 * bytes; the consumer publishes tail likewise once it is done with a
 * record's bytes, so the producer may write over them. Each keeps a cached
 * copy of the other's counter and loads it again only when the copy says
 * full (producer) or empty (consumer): an uncontended record costs no
 * load of a line the other thread writes.
 */
#ifndef SL_COMMON_SPSC_H
#define SL_COMMON_SPSC_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sl_spsc {
    /* The producer's line: head, its cached tail, the record it reserved. */
    alignas(64) _Atomic uint64_t head;
    uint64_t tail_seen;
    uint64_t reserved_end; /* head after the reserved record; 0: none */
    /* The consumer's line: tail, its cached head, the record it peeked. */
    alignas(64) _Atomic uint64_t tail;
    uint64_t head_seen;
    uint64_t peeked_end;   /* tail after the peeked record; 0: none */
    /* Read by both, written by neither after sl_spsc_init. */
    alignas(64) size_t cap;
    unsigned char *bytes; /* malloc'ed by sl_spsc_init, freed by sl_spsc_free */
} sl_spsc;

/* The smallest and largest rings: 64 bytes, 1 GiB. */
#define SL_SPSC_MIN ((size_t)64)
#define SL_SPSC_MAX ((size_t)1 << 30)

/* The header in front of each record, and the alignment of records. */
#define SL_SPSC_HEADER ((size_t)8)

/*
 * Makes r an empty ring of cap bytes: a power of two from SL_SPSC_MIN to
 * SL_SPSC_MAX. Returns 0, or -1 (r left empty) for another cap or when out
 * of memory. Not thread-safe: before either thread uses the ring.
 */
int sl_spsc_init(sl_spsc *r, size_t cap);

/* Frees the bytes; r is left empty (sl_spsc_free again does nothing). */
void sl_spsc_free(sl_spsc *r);

/* The longest payload a ring of cap bytes takes: half of it less a header,
 * so that a record fits whatever the ring's position. */
static inline size_t sl_spsc_max_record(const sl_spsc *r)
{
    return r->cap / 2 - SL_SPSC_HEADER;
}

/*
 * Producer: room for a record of len bytes (1 .. sl_spsc_max_record),
 * where the caller writes them and then calls sl_spsc_commit; NULL when
 * the ring has no room now (the consumer is behind) or len is out of range:
 * the record is refused, nothing is changed. Only the producer thread.
 */
void *sl_spsc_reserve(sl_spsc *r, size_t len);

/* Producer: publishes the record sl_spsc_reserve returned room for. */
void sl_spsc_commit(sl_spsc *r);

/*
 * Consumer: the oldest record not yet released, its length in *len, or
 * NULL when the ring is empty. The bytes stay valid and unchanged until
 * sl_spsc_release. Peeking again before releasing returns the same record.
 * Only the consumer thread.
 */
const void *sl_spsc_peek(sl_spsc *r, size_t *len);

/* Consumer: done with the record sl_spsc_peek returned; its room is the
 * producer's again. */
void sl_spsc_release(sl_spsc *r);

/* Bytes in use (records, their headers and padding), as either thread
 * sees them now; for tests and gauges. */
size_t sl_spsc_used(sl_spsc *r);

#endif /* SL_COMMON_SPSC_H */
