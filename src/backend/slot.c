/*
 * slot.c: Redis Cluster's hash slot of a key, as the cluster specification
 * defines it: CRC16 (the XMODEM variant: polynomial 0x1021, initial value 0,
 * no reflection, no final xor) of the key, modulo 16384. When the key holds
 * a hash tag, a '{' followed later by a '}' with at least one byte between
 * them, only the bytes between the first '{' and the first '}' after it are
 * hashed, so that keys sharing a tag share a slot.
 */
#include "backend/transport.h"

/* CRC16-XMODEM a bit at a time: keys are short, and a 512-byte table would
 * buy little next to the round trip that follows. */
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
            return sl_crc16(k + open + 1, close - open - 1) & 16383;
    }
    return sl_crc16(k, len) & 16383;
}
