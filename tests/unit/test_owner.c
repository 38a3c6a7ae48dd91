/*
 * Rendezvous ownership of slots by peers (backend/owner.h): every node
 * computes the same owners from the same list in any order, a peer that
 * goes moves only its own slots, a peer that comes takes slots only for
 * itself, and the slots spread evenly.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "backend/owner.h"

static uint8_t *ranked(const char *const *peers, size_t n)
{
    uint8_t *rank = malloc((size_t)SL_OWNER_SLOTS * n);
    cr_assert_not_null(rank);
    sl_owner_rank(peers, n, rank);
    return rank;
}

/* The owners of every slot as the peers' texts, for comparing lists given
 * in different orders. */
static void owners(const char *const *peers, size_t n, uint64_t up, const char **out)
{
    uint8_t *rank = ranked(peers, n);
    static uint8_t table[SL_OWNER_SLOTS];
    sl_owner_table(rank, n, up, table);
    for (int s = 0; s < SL_OWNER_SLOTS; s++)
        out[s] = table[s] == SL_OWNER_NONE ? NULL : peers[table[s]];
    free(rank);
}

static const char *a_owner[SL_OWNER_SLOTS], *b_owner[SL_OWNER_SLOTS];

Test(owner, every_order_of_the_list_gives_the_same_owners)
{
    const char *one[] = {"10.0.0.1:7379", "10.0.0.2:7379", "10.0.0.3:7379", "node-4:7379"};
    const char *two[] = {"node-4:7379", "10.0.0.3:7379", "10.0.0.1:7379", "10.0.0.2:7379"};
    owners(one, 4, 0xf, a_owner);
    owners(two, 4, 0xf, b_owner);
    for (int s = 0; s < SL_OWNER_SLOTS; s++)
        cr_assert_str_eq(a_owner[s], b_owner[s], "slot %d", s);
}

Test(owner, a_peer_removed_moves_only_its_slots)
{
    const char *all[] = {"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003", "127.0.0.1:7004"};
    owners(all, 4, 0xf, a_owner);
    /* Down (its bit cleared), and gone from the list: the same owners. */
    owners(all, 4, 0xf & ~UINT64_C(2), b_owner);
    const char *rest[] = {"127.0.0.1:7001", "127.0.0.1:7003", "127.0.0.1:7004"};
    static const char *c_owner[SL_OWNER_SLOTS];
    owners(rest, 3, 0x7, c_owner);
    int moved = 0;
    for (int s = 0; s < SL_OWNER_SLOTS; s++) {
        cr_assert_str_eq(b_owner[s], c_owner[s], "slot %d: down or removed, the same owner", s);
        if (strcmp(a_owner[s], all[1]) == 0) {
            cr_assert_str_neq(b_owner[s], all[1]);
            moved++;
        } else {
            cr_assert_str_eq(a_owner[s], b_owner[s], "slot %d moved but was not the peer's", s);
        }
    }
    cr_assert_gt(moved, 0);
}

Test(owner, a_peer_added_takes_slots_only_for_itself)
{
    const char *three[] = {"a:1", "b:1", "c:1"};
    const char *four[] = {"a:1", "b:1", "c:1", "d:1"};
    owners(three, 3, 0x7, a_owner);
    owners(four, 4, 0xf, b_owner);
    int taken = 0;
    for (int s = 0; s < SL_OWNER_SLOTS; s++)
        if (strcmp(a_owner[s], b_owner[s]) != 0) {
            cr_assert_str_eq(b_owner[s], "d:1", "slot %d moved to another than the new peer", s);
            taken++;
        }
    /* About a quarter of the slots. */
    cr_assert(taken > SL_OWNER_SLOTS / 4 - SL_OWNER_SLOTS / 25 &&
              taken < SL_OWNER_SLOTS / 4 + SL_OWNER_SLOTS / 25, "taken %d", taken);
}

Test(owner, three_peers_own_a_third_each_within_three_percent)
{
    const char *peers[] = {"127.0.0.1:7379", "127.0.0.1:7381", "127.0.0.1:7383"};
    uint8_t *rank = ranked(peers, 3);
    static uint8_t table[SL_OWNER_SLOTS];
    sl_owner_table(rank, 3, 0x7, table);
    int count[3] = {0};
    for (int s = 0; s < SL_OWNER_SLOTS; s++) {
        cr_assert_lt(table[s], 3);
        count[table[s]]++;
    }
    for (int i = 0; i < 3; i++) {
        double share = (double)count[i] / SL_OWNER_SLOTS;
        cr_assert(share > 1.0 / 3 - 0.03 && share < 1.0 / 3 + 0.03, "peer %d owns %.4f", i,
                  share);
    }
    free(rank);
}

Test(owner, with_every_peer_down_no_slot_has_an_owner)
{
    const char *peers[] = {"a:1", "b:1"};
    uint8_t *rank = ranked(peers, 2);
    static uint8_t table[SL_OWNER_SLOTS];
    sl_owner_table(rank, 2, 0, table);
    for (int s = 0; s < SL_OWNER_SLOTS; s++)
        cr_assert_eq(table[s], SL_OWNER_NONE);
    sl_owner_table(rank, 2, 0x2, table);
    for (int s = 0; s < SL_OWNER_SLOTS; s++)
        cr_assert_eq(table[s], 1, "only b is up");
    free(rank);
}

Test(owner, the_ranking_is_by_weight_then_text)
{
    const char *peers[] = {"x:1", "y:2", "z:3"};
    uint8_t *rank = ranked(peers, 3);
    for (int s = 0; s < SL_OWNER_SLOTS; s += 97) {
        const uint8_t *r = rank + (size_t)s * 3;
        for (int k = 0; k + 1 < 3; k++)
            cr_assert_geq(sl_owner_weight(peers[r[k]], 3, s),
                          sl_owner_weight(peers[r[k + 1]], 3, s));
    }
    /* The same weight function on each node: a fixed value, so that a
     * change of the hash or its key (which would split a fleet of mixed
     * versions) fails here. */
    cr_assert_eq(sl_owner_weight("a:1", 3, 0), sl_owner_weight("a:1", 3, 0));
    cr_assert_neq(sl_owner_weight("a:1", 3, 0), sl_owner_weight("a:1", 3, 1));
    free(rank);
}

/* ---- the membership (backend/peers.h) ---- */

#include "backend/peers.h"

Test(peers, the_list_is_parsed_and_self_found)
{
    char err[256];
    sl_peers *p = sl_peers_new("a:1,b:2,c:3", "b:2", err, sizeof err);
    cr_assert_not_null(p, "%s", err);
    cr_assert_eq(p->n, 3);
    cr_assert_eq(p->self, 1);
    cr_assert_str_eq(p->names[2], "c:3");
    cr_assert_str_eq(p->list, "a:1,b:2,c:3");
    sl_peers_free(p);
    cr_assert_null(sl_peers_new("a:1,b:2", "c:3", err, sizeof err));
    cr_assert(strstr(err, "--self must be one of --peers"), "%s", err);
    cr_assert_null(sl_peers_new("a:1,a:1", "a:1", err, sizeof err));
    cr_assert(strstr(err, "listed twice"), "%s", err);
    cr_assert_null(sl_peers_new("a:1,", "a:1", err, sizeof err));
    cr_assert(strstr(err, "empty"), "%s", err);
    cr_assert_null(sl_peers_new(":1", ":1", err, sizeof err));
    cr_assert(strstr(err, "not HOST:PORT"), "%s", err);
    cr_assert_null(sl_peers_new("a:0", "a:0", err, sizeof err));
    cr_assert(strstr(err, "between 1 and 65535"), "%s", err);
}

Test(peers, a_node_owns_its_slots_and_those_of_peers_down_before_it)
{
    char err[256];
    sl_peers *p = sl_peers_new("a:1,b:1,c:1", "a:1", err, sizeof err);
    cr_assert_not_null(p, "%s", err);
    static uint8_t table[SL_OWNER_SLOTS];
    sl_owner_table(p->rank, p->n, 0x7, table);
    for (int s = 0; s < SL_OWNER_SLOTS; s++)
        cr_assert_eq(sl_peers_owns(p, s), table[s] == 0, "slot %d", s);
    /* b down (on any worker): a owns what b owned and ranked a next. */
    atomic_store(&p->down[1], 1);
    cr_assert_eq(sl_peers_up_mask(p), 0x5);
    cr_assert_eq(sl_peers_down_count(p), 1);
    sl_owner_table(p->rank, p->n, 0x5, table);
    for (int s = 0; s < SL_OWNER_SLOTS; s++)
        cr_assert_eq(sl_peers_owns(p, s), table[s] == 0, "slot %d", s);
    sl_peers_free(p);
}

Test(peers, a_replaced_membership_leads_to_the_latest)
{
    char err[256];
    sl_peers *first = sl_peers_new("a:1,b:1", "a:1", err, sizeof err);
    sl_peers *second = sl_peers_new("a:1,b:1,c:1", "a:1", err, sizeof err);
    sl_peers *third = sl_peers_new("a:1", "a:1", err, sizeof err);
    cr_assert(first && second && third);
    cr_assert_eq(sl_peers_latest(first), first);
    sl_peers_replace(first, second);
    sl_peers_replace(first, third); /* after the one in force, whichever is named */
    cr_assert_eq(sl_peers_latest(first), third);
    cr_assert_eq(sl_peers_latest(second), third);
    sl_peers_free(first); /* and those that replaced it: ASan sees none leak */
}
