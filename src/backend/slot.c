/*
 * slot.c: Redis Cluster's hash slot of a key, as its specification defines
 * it: CRC16 (the XMODEM variant: polynomial 0x1021, initial value 0, no
 * reflection) of the key modulo 16384, where a key holding a hash tag (the
 * bytes between its first '{' and the first '}' after it, when there is at
 * least one) hashes by the tag alone, so that keys sharing a tag share a
 * slot and a multi-key command on them stays on one node.
 */
#include "backend/transport.h"

#define SL_CLUSTER_SLOTS 16384

/* CRC16/XMODEM one bit at a time: keys are short, and a table would be 512
 * bytes of constants for a few nanoseconds per key. */
static uint16_t sl_crc16(const unsigned char *p, size_t len)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

int sl_slot_of(const char *key, size_t len)
{
    const unsigned char *k = (const unsigned char *)key;
    size_t open = 0;
    while (open < len && k[open] != '{')
        open++;
    if (open < len) {
        size_t close = open + 1;
        while (close < len && k[close] != '}')
            close++;
        /* An empty tag ("{}") or an unclosed one hashes the whole key. */
        if (close < len && close > open + 1)
            return sl_crc16(k + open + 1, close - open - 1) & (SL_CLUSTER_SLOTS - 1);
    }
    return sl_crc16(k, len) & (SL_CLUSTER_SLOTS - 1);
}
