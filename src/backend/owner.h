/*
 * owner.h: which peer owns a key (--peers), by rendezvous hashing (highest
 * random weight, Thaler and Ravishankar 1996) over Redis Cluster's hash
 * slots: every peer gets a pseudorandom weight for each slot, and a slot's
 * owner is the peer of highest weight among those that are up. Removing a
 * peer moves only the slots it owned (each to its next-ranked peer), adding
 * one moves only the slots it now wins, and every node that knows the same
 * peers computes the same owners, in whatever order the list is given.
 *
 * The slot (sl_slot_of) rather than the key is hashed, so that keys sharing
 * a hash tag ("{user:42}:minute", "{user:42}:day") share an owner and a
 * multi-key check on them is one command to one node.
 *
 * Pure code: no clock, no I/O; the caller owns every buffer.
 */
#ifndef SL_BACKEND_OWNER_H
#define SL_BACKEND_OWNER_H

#include <stddef.h>
#include <stdint.h>

#define SL_OWNER_SLOTS 16384
#define SL_PEERS_MAX 64
#define SL_OWNER_NONE 0xff /* a slot whose peers are all down */

/* The weight of a peer ("host:port" exactly as the list gives it) for a
 * slot: SipHash-2-4 under a fixed key of the text and the slot, so that
 * every node, of any build, computes the same. */
uint64_t sl_owner_weight(const char *peer, size_t len, int slot);

/* Ranks the n peers (1 .. SL_PEERS_MAX) for every slot: rank[slot * n + r]
 * is the index into peers[] of the peer ranked r for that slot, by weight,
 * highest first, equal weights by the peers' texts in byte order. rank has
 * room for SL_OWNER_SLOTS * n bytes (the caller's). */
void sl_owner_rank(const char *const *peers, size_t n, uint8_t *rank);

/* Fills table[slot] with the index of the slot's owner: its best-ranked
 * peer whose bit is set in `up` (bit i: peers[i] is up), or SL_OWNER_NONE
 * when none is. */
void sl_owner_table(const uint8_t *rank, size_t n, uint64_t up, uint8_t table[SL_OWNER_SLOTS]);

#endif /* SL_BACKEND_OWNER_H */
