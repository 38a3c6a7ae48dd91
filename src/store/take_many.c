/*
 * take_many.c: sl_store_take_many, several limits all or nothing. It
 * takes the locks of every shard its keys live in (in address order),
 * decides every item on copies of the states, and writes them back only
 * when every item is admitted, so it never runs on the single take's path
 * (store.c) and shares nothing with it but the shard primitives of
 * store_layout.h.
 */
#include <string.h>

#include "algo/algo.h"
#include "store/store_layout.h"

typedef struct sl_many_item {
    uint64_t h;
    sl_shard *sh;
    size_t size;     /* state bytes */
    int rep;         /* the first item with the same key (itself if none) */
    long pos;        /* slot position of a compatible record, or -1 */
    bool stale;      /* an incompatible record is stored under the key */
    uint64_t *rec;   /* the record, once found or inserted */
    void *scratch;   /* the state the takes run on */
} sl_many_item;

static bool sl_same_key(const sl_take_item *a, const sl_take_item *b)
{
    return a->keylen == b->keylen && memcmp(a->key, b->key, a->keylen) == 0;
}

/* Locks the distinct shards of the items in address order: every caller
 * takes them in the same order, so two multi-takes cannot deadlock. */
static size_t sl_lock_shards(sl_many_item *m, size_t n, sl_shard **locked)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < k && locked[j] != m[i].sh)
            j++;
        if (j == k)
            locked[k++] = m[i].sh;
    }
    for (size_t i = 1; i < k; i++) {
        sl_shard *x = locked[i];
        size_t j = i;
        for (; j > 0 && locked[j - 1] > x; j--)
            locked[j] = locked[j - 1];
        locked[j] = x;
    }
    for (size_t i = 0; i < k; i++)
        sl_shard_lock(locked[i]);
    return k;
}

static void sl_unlock_shards(sl_shard **locked, size_t k)
{
    for (size_t i = k; i-- > 0;)
        sl_shard_unlock(locked[i]);
}

sl_status sl_store_take_many(sl_store *s, const sl_take_item *items, size_t n, int64_t now,
                             sl_decision *out, int *failed_index)
{
    sl_many_item m[SL_TAKE_MANY_MAX];
    sl_shard *locked[SL_TAKE_MANY_MAX];
    if (!s || !items || !out || !failed_index || n == 0 || n > SL_TAKE_MANY_MAX)
        return SL_ERR_ARGUMENT;
    *failed_index = -1;

    /* Outside any lock: validate, hash, find repeated keys, get scratch. */
    size_t scratch_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        int rc = sl_check_key_limit(s, items[i].key, items[i].keylen, items[i].limit, &m[i].size);
        if (rc != SL_OK)
            return rc;
        m[i].h = sl_store_hash(items[i].key, items[i].keylen, s->seed);
        m[i].sh = sl_store_shard_of(s, m[i].h);
        m[i].rep = (int)i;
        m[i].pos = -1;
        m[i].stale = false;
        m[i].rec = NULL;
        for (size_t j = 0; j < i; j++) {
            if (m[j].rep == (int)j && m[j].h == m[i].h && sl_same_key(&items[i], &items[j])) {
                if (sl_rec_kind_of(items[j].limit) != sl_rec_kind_of(items[i].limit) ||
                    m[j].size != m[i].size)
                    return SL_ERR_ARGUMENT;
                m[i].rep = (int)j;
                break;
            }
        }
        if (m[i].rep == (int)i) {
            if (__builtin_add_overflow(scratch_bytes, m[i].size, &scratch_bytes))
                return SL_ERR_NOMEM;
        }
    }
    unsigned char stack[SL_SCRATCH_BYTES] __attribute__((aligned(8)));
    unsigned char *buf = scratch_bytes <= sizeof stack ? stack : sl_malloc(scratch_bytes);
    if (!buf)
        return SL_ERR_NOMEM;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        if (m[i].rep == (int)i) {
            m[i].scratch = buf + off;
            off += m[i].size;
        } else {
            m[i].scratch = m[m[i].rep].scratch;
        }
    }

    size_t nlocked = sl_lock_shards(m, n, locked);
    int rc = SL_OK;
    now = sl_store_now(s, now); /* one time for all the limits */

    /* 1. Copy each key's state (or "never seen") into scratch. */
    for (size_t i = 0; i < n; i++) {
        if (m[i].rep != (int)i)
            continue;
        long pos = sl_index_find(m[i].sh, m[i].h, items[i].key, items[i].keylen);
        if (pos >= 0 && sl_rec_compatible(m[i].sh, m[i].sh->slots[pos], items[i].limit, m[i].size)) {
            m[i].pos = pos;
            m[i].rec = sl_shard_record(m[i].sh, m[i].sh->slots[pos]);
            memcpy(m[i].scratch, sl_rec_state(m[i].rec), m[i].size);
        } else if (pos >= 0) {
            m[i].stale = true;
            m[i].pos = pos;
            rc = sl_rec_adopt(m[i].sh, m[i].sh->slots[pos], items[i].limit, m[i].scratch, now);
            if (rc != SL_OK)
                goto done;
        } else {
            memset(m[i].scratch, 0, m[i].size);
        }
    }
    /* 2. Decide every item in order on the scratch states, past a
     * rejection too: a rejected take leaves its scratch as it was, so each
     * out[i] is what item i answers after the items before it, and a
     * repeated key's answers add up whether the request is admitted or not
     * (a peek of each item alone would show the item that rejected as
     * admitted). */
    for (size_t i = 0; i < n && rc == SL_OK; i++) {
        rc = sl_take(items[i].limit, m[i].scratch, now, items[i].cost, &out[i]);
        if (rc == SL_OK && !out[i].allowed && *failed_index < 0)
            *failed_index = (int)i;
    }
    if (rc != SL_OK || *failed_index >= 0)
        goto done; /* rejected: the scratch states are dropped, nothing is consumed */
    /* 3. Admitted: pin the records found, so that storing the new keys
     * (which may evict) cannot drop them; drop the stale ones; insert the
     * new keys pinned. */
    for (size_t i = 0; i < n; i++)
        if (m[i].rep == (int)i && m[i].rec)
            sl_rec_meta_of(m[i].rec)->flags |= SL_REC_PINNED;
    for (size_t i = 0; i < n; i++) {
        if (m[i].rep != (int)i || !m[i].stale)
            continue;
        long pos = sl_index_find(m[i].sh, m[i].h, items[i].key, items[i].keylen);
        if (pos >= 0) {
            sl_shard_remove(m[i].sh, (size_t)pos);
            m[i].sh->reinits++;
        }
    }
    for (size_t i = 0; i < n && rc == SL_OK; i++) {
        if (m[i].rep != (int)i || m[i].rec)
            continue;
        if (sl_state_expires_at(items[i].limit, m[i].scratch) <= now)
            continue; /* still "never seen": nothing to store */
        uint32_t v;
        rc = sl_shard_insert(s, m[i].sh, m[i].h, items[i].key, items[i].keylen,
                             sl_rec_kind_of(items[i].limit), m[i].scratch, m[i].size, 0, SL_REC_PINNED,
                             now, &v);
        if (rc == SL_OK) {
            m[i].rec = sl_shard_record(m[i].sh, v);
            m[i].pos = -2; /* inserted by this call */
        }
    }
    if (rc != SL_OK) {
        /* Out of memory: take back the keys this call inserted (they are
         * not consumed yet), so that nothing is consumed. */
        for (size_t i = 0; i < n; i++) {
            if (m[i].rep != (int)i || !m[i].rec)
                continue;
            if (m[i].pos == -2) {
                long pos = sl_index_find(m[i].sh, m[i].h, items[i].key, items[i].keylen);
                if (pos >= 0)
                    sl_shard_remove(m[i].sh, (size_t)pos);
            } else {
                sl_rec_meta_of(m[i].rec)->flags &= (uint8_t)~SL_REC_PINNED;
            }
        }
        goto done;
    }
    /* 4. Commit: write every state back, set its expiry, unpin. */
    for (size_t i = 0; i < n; i++) {
        if (m[i].rep != (int)i || !m[i].rec)
            continue;
        memcpy(sl_rec_state(m[i].rec), m[i].scratch, m[i].size);
        /* The expiry of a repeated key follows its last limit... */
        int64_t exp = sl_state_expires_at(items[i].limit, m[i].scratch);
        for (size_t j = i + 1; j < n; j++) {
            /* ...or the latest of its limits, so that no limit's state is
             * reclaimed while it still matters. */
            if (m[j].rep == (int)i) {
                int64_t e = sl_state_expires_at(items[j].limit, m[i].scratch);
                if (e > exp)
                    exp = e;
            }
        }
        sl_rec_set_expiry(m[i].rec, sl_store_tick_of(exp));
        sl_rec_meta_of(m[i].rec)->flags &= (uint8_t)~SL_REC_PINNED;
    }
done:
    sl_unlock_shards(locked, nlocked);
    if (buf != stack)
        sl_free(buf);
    return rc;
}
