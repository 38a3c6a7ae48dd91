/*
 * owner.c: rendezvous hashing of slots to peers (owner.h).
 */
#include <string.h>

#include "backend/owner.h"
#include "common/siphash.h"

/* Fixed, so that every node computes the same weights; it hides nothing
 * (anyone may compute a slot's owner), it only spreads the weights. */
static const uint64_t sl_owner_key[2] = {UINT64_C(0x736c756963652d72), UINT64_C(0x656e64657a766f75)};

uint64_t sl_owner_weight(const char *peer, size_t len, int slot)
{
    /* The peer's text, then the slot in two bytes, little end first: a
     * peer text is at most a host name and a port, well under the room. */
    unsigned char buf[300];
    if (len > sizeof buf - 2)
        len = sizeof buf - 2;
    memcpy(buf, peer, len);
    buf[len] = (unsigned char)(slot & 0xff);
    buf[len + 1] = (unsigned char)((unsigned)slot >> 8);
    return sl_siphash(sl_owner_key, buf, len + 2);
}

/* Does peer a (weight wa) rank before peer b (weight wb)? */
static int sl_owner_before(uint64_t wa, const char *a, uint64_t wb, const char *b)
{
    if (wa != wb)
        return wa > wb;
    return strcmp(a, b) < 0;
}

void sl_owner_rank(const char *const *peers, size_t n, uint8_t *rank)
{
    size_t lens[SL_PEERS_MAX];
    for (size_t i = 0; i < n; i++)
        lens[i] = strlen(peers[i]);
    for (int slot = 0; slot < SL_OWNER_SLOTS; slot++) {
        uint64_t w[SL_PEERS_MAX];
        uint8_t *r = rank + (size_t)slot * n;
        /* Insertion sort: n is small (at most 64), and the list is built
         * once per membership. */
        for (size_t i = 0; i < n; i++) {
            uint64_t wi = sl_owner_weight(peers[i], lens[i], slot);
            size_t j = i;
            while (j > 0 && sl_owner_before(wi, peers[i], w[j - 1], peers[r[j - 1]])) {
                w[j] = w[j - 1];
                r[j] = r[j - 1];
                j--;
            }
            w[j] = wi;
            r[j] = (uint8_t)i;
        }
    }
}

void sl_owner_table(const uint8_t *rank, size_t n, uint64_t up, uint8_t table[SL_OWNER_SLOTS])
{
    for (int slot = 0; slot < SL_OWNER_SLOTS; slot++) {
        const uint8_t *r = rank + (size_t)slot * n;
        table[slot] = SL_OWNER_NONE;
        for (size_t k = 0; k < n; k++)
            if (up & (UINT64_C(1) << r[k])) {
                table[slot] = r[k];
                break;
            }
    }
}
