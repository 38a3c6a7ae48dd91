/*
 * Redis Cluster's hash slots (src/backend/slot.c): CRC16-XMODEM's check
 * value, the slots the cluster specification gives for known keys, and its
 * hash tag rules (the first '{' and the first '}' after it, a non-empty tag
 * only). tests/backend/test_cluster_transport.py checks many more keys
 * against a real cluster's CLUSTER KEYSLOT.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "backend/transport.h"

static int slot(const char *k)
{
    return sl_slot_of(k, strlen(k));
}

Test(slot, crc16_xmodem_check_value)
{
    /* CRC16-XMODEM("123456789") is 0x31C3: the slot is that mod 16384. */
    cr_assert_eq(slot("123456789"), 0x31C3 & 16383);
}

Test(slot, known_keys)
{
    cr_assert_eq(slot(""), 0);
    cr_assert_eq(slot("foo"), 12182);
    cr_assert_eq(slot("bar"), 5061);
    cr_assert_eq(slot("hello"), 866);
}

Test(slot, hash_tags)
{
    int user = slot("user1000");
    cr_assert_eq(slot("{user1000}.following"), user);
    cr_assert_eq(slot("{user1000}.followers"), user);
    cr_assert_eq(slot("x{user1000}y{other}"), user, "only the first tag counts");
    cr_assert_eq(slot("foo{}{bar}"), sl_slot_of("foo{}{bar}", 10), "an empty tag: the whole key");
    cr_assert_neq(slot("foo{}{bar}"), slot("bar"));
    cr_assert_eq(slot("foo{{bar}}zap"), slot("{bar"), "the tag ends at the first '}'");
    cr_assert_eq(slot("foo{bar}{zap}"), slot("bar"));
    cr_assert_eq(slot("{unclosed"), sl_slot_of("{unclosed", 9));
    cr_assert_neq(slot("{unclosed"), slot("unclosed"));
}

Test(slot, binary_keys_and_range)
{
    const char k[] = {'a', '\0', '{', 'b', '}', '\xff'};
    cr_assert_eq(sl_slot_of(k, sizeof k), slot("b"));
    for (int i = 0; i < 1000; i++) {
        char buf[32];
        int n = snprintf(buf, sizeof buf, "key:%d", i);
        int s = sl_slot_of(buf, (size_t)n);
        cr_assert(s >= 0 && s < 16384);
    }
}
