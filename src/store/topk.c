/*
 * topk.c: the top keys, a Space-Saving summary of k counters (sluice.h
 * teaches the algorithm, its bounds and its window).
 *
 * One generation is five arrays, allocated with the summary:
 *
 *   count[pos]   the counts, ascending by position (pos 0: the smallest)
 *   order[pos]   which slot is at that position, and pos[s] the other way
 *   slot[s]      a key: its hash, length, first SL_TOPK_KEY_MAX bytes and
 *                error; length 0 for an empty slot
 *   table[i]     an open-addressing index of the slots by hash: slot + 1
 *                and the hash's low 32 bits (0: empty), linear probing, at
 *                most a quarter full; the bits spare most probes a look at
 *                the slot
 *
 * Empty slots count 0 and so sit at the lowest positions: a new key always
 * takes the slot at position 0, empty or not, which is Space-Saving's rule
 * with no case for "not yet full". A count that grows moves its slot up past
 * the smaller counts: for a unit add that is a swap with the last slot of
 * its old count: the generation keeps how many positions hold the
 * smallest count, so that the unit add of a new key (every add, under a
 * flood) finds it at once; other adds search count[], contiguous and small
 * (1 KiB for k = 128), by a binary search without branches.
 *
 * Nothing here reads a clock, takes a lock or does I/O.
 */
#include <stdlib.h>
#include <string.h>

#include "sluice.h"
#include "common/alloc.h"
#include "store/store_layout.h" /* sl_store_hash: the store's seeded key hash */

typedef struct tk_slot {
    uint64_t hash;
    uint64_t error;
    size_t len;    /* the key's whole length; 0: empty */
    uint32_t mark; /* sl_topk_merge: the merge that last touched it */
    unsigned char key[SL_TOPK_KEY_MAX];
} tk_slot;

typedef struct tk_gen {
    int64_t id;     /* the window it counts (now / window_ns, rounded down) */
    uint64_t total; /* N: the units added */
    uint64_t floor; /* a key not held has a true count of at most this */
    uint64_t max_n; /* the largest n of one add (or of a generation merged in) */
    size_t used;    /* slots holding a key */
    size_t min_n;   /* the smallest count's positions: [0, min_n) (k when all are equal) */
    uint64_t *count;
    uint32_t *order;
    uint32_t *pos; /* [slot]: its position in count[] and order[] (dense: a swap of
                      positions touches it, not two slots) */
    tk_slot *slot;
    uint64_t *table;
} tk_gen;

struct sl_topk {
    size_t k;
    size_t tmask;      /* table size - 1 */
    int64_t window_ns; /* 0: one generation */
    uint64_t seed;
    uint32_t marks;    /* merges so far, for tk_slot.mark */
    int cur;           /* the current generation in gen[] */
    int64_t cur_end;   /* where the current generation's window ends (INT64_MAX: far) */
    tk_gen gen[2];     /* gen[1] unused without a window */
};

/* ---- sizes ---- */

/* The table's size: a power of two at least 4k, so that it is at most a
 * quarter full and a probe (and the shift of a removal) ends within one or
 * two entries; a new key is indexed before the key it replaces leaves, and
 * k + 1 entries still leave most of it empty. */
static size_t tk_table_size(size_t k)
{
    size_t n = 4;
    while (n < 4 * k)
        n <<= 1;
    return n;
}

/* order[] (or pos[]) rounded up to 8 bytes: the next generation's arrays
 * stay aligned. */
static size_t tk_order_bytes(size_t k)
{
    return (k * sizeof(uint32_t) + 7) / 8 * 8;
}

static size_t tk_gen_bytes(size_t k)
{
    return k * (sizeof(uint64_t) + sizeof(tk_slot)) + 2 * tk_order_bytes(k) +
           tk_table_size(k) * sizeof(uint64_t);
}

size_t sl_topk_bytes(size_t k, int64_t window_ns)
{
    if (k < 1 || k > SL_TOPK_K_MAX)
        return 0;
    return sizeof(sl_topk) + tk_gen_bytes(k) * (window_ns > 0 ? 2 : 1);
}

/* ---- one generation ---- */

static void tk_gen_clear(tk_gen *g, size_t k, size_t tsize)
{
    for (size_t i = 0; i < k; i++) {
        g->count[i] = 0;
        g->order[i] = (uint32_t)i;
        g->slot[i].len = 0;
        g->pos[i] = (uint32_t)i;
        g->slot[i].mark = 0;
    }
    memset(g->table, 0, tsize * sizeof *g->table);
    g->total = g->floor = g->max_n = 0;
    g->used = 0;
    g->min_n = k;
}

/* The first position above `from` whose count is at least c (k when
 * none), by a binary search without branches on the counts: under a flood
 * of keys they are as good as random, and a branch would be mispredicted
 * half the time. */
static size_t tk_first_at_least(const tk_gen *g, size_t k, size_t from, uint64_t c)
{
    const uint64_t *b = &g->count[from];
    size_t n = k - from;
    while (n > 1) {
        size_t half = n / 2;
        b += half & -(size_t)(b[half - 1] < c);
        n -= half;
    }
    return (size_t)(b - g->count) + (n == 1 && *b < c);
}

/* Finds the smallest count's positions again (after they all moved up, or
 * a sort). */
static void tk_min_again(tk_gen *g, size_t k)
{
    g->min_n = g->count[0] == UINT64_MAX ? k : tk_first_at_least(g, k, 1, g->count[0] + 1);
}

static uint64_t tk_sat_add(uint64_t a, uint64_t b)
{
    uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* Are the n bytes (1 .. SL_TOPK_KEY_MAX) at a and b equal? Word compares
 * with no call: the keys are short, and this is on every add's path. */
static inline bool tk_bytes_equal(const unsigned char *a, const unsigned char *b, size_t n)
{
    uint64_t x, y, u, v;
    if (n >= 8) {
        for (size_t i = 0; i + 8 < n; i += 8) {
            memcpy(&x, a + i, 8);
            memcpy(&y, b + i, 8);
            if (x != y)
                return false;
        }
        memcpy(&x, a + n - 8, 8);
        memcpy(&y, b + n - 8, 8);
        return x == y;
    }
    if (n >= 4) { /* the first 4 bytes and the last 4, which may overlap */
        uint32_t p, q, r, s;
        memcpy(&p, a, 4);
        memcpy(&q, b, 4);
        memcpy(&r, a + n - 4, 4);
        memcpy(&s, b + n - 4, 4);
        return p == q && r == s;
    }
    u = (uint64_t)a[0] | (uint64_t)a[n / 2] << 8 | (uint64_t)a[n - 1] << 16;
    v = (uint64_t)b[0] | (uint64_t)b[n / 2] << 8 | (uint64_t)b[n - 1] << 16;
    return u == v;
}

/* Copies n bytes (1 .. SL_TOPK_KEY_MAX) from src to dst, as words. */
static inline void tk_bytes_copy(unsigned char *dst, const unsigned char *src, size_t n)
{
    if (n >= 8) {
        for (size_t i = 0; i + 8 < n; i += 8)
            memcpy(dst + i, src + i, 8);
        memcpy(dst + n - 8, src + n - 8, 8);
    } else if (n >= 4) {
        memcpy(dst, src, 4);
        memcpy(dst + n - 4, src + n - 4, 4);
    } else {
        dst[0] = src[0];
        dst[n / 2] = src[n / 2];
        dst[n - 1] = src[n - 1];
    }
}

static inline size_t tk_kept(size_t len)
{
    return len < SL_TOPK_KEY_MAX ? len : SL_TOPK_KEY_MAX;
}

static bool tk_is(const tk_slot *s, uint64_t h, const void *key, size_t len)
{
    return s->hash == h && s->len == len && tk_bytes_equal(s->key, key, tk_kept(len));
}

/* The slot holding the key, or -1; *at gets the table index where it was
 * found, or the empty one where it would go. */
static inline __attribute__((always_inline)) long tk_find(const sl_topk *t, const tk_gen *g,
                                                         uint64_t h, const void *key, size_t len,
                                                         size_t *at)
{
    size_t i = (size_t)h & t->tmask;
    for (uint64_t e; (e = g->table[i]) != 0; i = (i + 1) & t->tmask) {
        uint32_t v = (uint32_t)e;
        if ((uint32_t)(e >> 32) == (uint32_t)h && tk_is(&g->slot[v - 1], h, key, len)) {
            *at = i;
            return (long)(v - 1);
        }
    }
    *at = i;
    return -1;
}

/* Takes the entry (slot + 1 and its hash's bits) of slot s under hash h
 * out of the table: the entries after it in its run move back into the
 * hole when their home is not between the hole and them (backward-shift
 * deletion: no tombstones, probes stay short). */
static inline __attribute__((always_inline)) void tk_table_remove(const sl_topk *t, tk_gen *g,
                                                                 uint32_t s, uint64_t h)
{
    uint64_t want = (h << 32) | (s + 1);
    size_t i = (size_t)h & t->tmask;
    while (g->table[i] != want)
        i = (i + 1) & t->tmask;
    for (size_t j = i;;) {
        j = (j + 1) & t->tmask;
        uint64_t e = g->table[j];
        if (e == 0)
            break;
        size_t home = (size_t)(e >> 32) & t->tmask; /* the table is at most 2^21 */
        /* Stays when its home lies cyclically in (i, j]. */
        bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (!stays) {
            g->table[i] = e;
            i = j;
        }
    }
    g->table[i] = 0;
}

static void tk_table_insert(const sl_topk *t, tk_gen *g, uint32_t s)
{
    uint64_t h = g->slot[s].hash;
    size_t i = (size_t)h & t->tmask;
    while (g->table[i] != 0)
        i = (i + 1) & t->tmask;
    g->table[i] = (h << 32) | (s + 1);
}

/*
 * Sets the count of the slot at position p to c, which is at least what the
 * positions below p hold, and moves it up past the positions above p that
 * count less than c: the order stays ascending. The positions above p must
 * be in order; position p's old count is read only to spot the fast case.
 *
 * Equal counts may sit in any order, so the slot moves up by hops, each
 * past a whole run of one count: it trades places with the last slot of
 * the run above it, which takes its place at the run's bottom. A unit add
 * makes one hop (past its own count's run; from the smallest count, whose
 * run's end the generation keeps, with no search); an add of n at most n.
 */
static inline __attribute__((always_inline)) void tk_raise(tk_gen *g, size_t k, size_t p,
                                                          uint64_t c)
{
    uint32_t s = g->order[p];
    uint64_t c0 = g->count[p];
    bool in_min = p < g->min_n;
    size_t at = p;
    if (in_min && c0 + 1 == c && c > c0) {
        /* The last of the smallest count's run: one swap. */
        size_t q = g->min_n - 1;
        uint32_t o = g->order[q];
        g->order[p] = o;
        g->pos[o] = (uint32_t)p;
        at = q;
    } else {
        for (size_t next = at + 1; next < k && g->count[next] < c; next = at + 1) {
            uint64_t run = g->count[next];
            size_t end = (run == UINT64_MAX ? k : tk_first_at_least(g, k, next, run + 1)) - 1;
            uint32_t o = g->order[end];
            g->order[at] = o;
            g->pos[o] = (uint32_t)at;
            g->count[at] = run;
            at = end;
        }
    }
    g->order[at] = s;
    g->count[at] = c;
    g->pos[s] = (uint32_t)at;
    /* It left the smallest count's run (whose slots are still [0, min_n - 1)). */
    if (in_min && --g->min_n == 0)
        tk_min_again(g, k);
}

/* Writes the key into slot s (taken at position 0 by the caller) with count
 * c and error e, and indexes it. */
static void tk_fill(const sl_topk *t, tk_gen *g, uint32_t s, uint64_t h, const void *key,
                    size_t len, uint64_t c, uint64_t e)
{
    tk_slot *sl = &g->slot[s];
    sl->hash = h;
    sl->len = len;
    sl->error = e;
    memcpy(sl->key, key, len < SL_TOPK_KEY_MAX ? len : SL_TOPK_KEY_MAX);
    tk_table_insert(t, g, s);
    tk_raise(g, t->k, g->pos[s], c);
}

/*
 * A key that is not held takes the slot at position 0: an empty one starts
 * from the floor (0 for a summary that never dropped a key), an occupied
 * one from its count, which becomes the floor (its key, forgotten, was
 * counted at most that). Count base + n, error base.
 */
static void tk_take(const sl_topk *t, tk_gen *g, uint64_t h, const void *key, size_t len,
                    uint64_t n, size_t at)
{
    uint32_t s = g->order[0];
    uint64_t base = g->floor;
    tk_slot *sl = &g->slot[s];
    /* Indexed first where the search ended (empty), then the old key out:
     * one probe less than the other way round. */
    g->table[at] = (h << 32) | (s + 1);
    if (sl->len != 0) {
        tk_table_remove(t, g, s, sl->hash);
        base = g->count[0];
        if (base > g->floor)
            g->floor = base;
    } else {
        g->used++;
    }
    sl->hash = h;
    sl->len = len;
    sl->error = base;
    tk_bytes_copy(sl->key, key, tk_kept(len));
    tk_raise(g, t->k, 0, tk_sat_add(base, n));
}

static void tk_gen_add(const sl_topk *t, tk_gen *g, uint64_t h, const void *key, size_t len,
                       uint64_t n)
{
    size_t at;
    long s = tk_find(t, g, h, key, len, &at);
    if (s >= 0) {
        size_t p = g->pos[s];
        tk_raise(g, t->k, p, tk_sat_add(g->count[p], n));
    } else {
        tk_take(t, g, h, key, len, n, at);
    }
    g->total = tk_sat_add(g->total, n);
    if (n > g->max_n)
        g->max_n = n;
}

/* Sorts the positions by count, ascending (a heapsort of count[] and
 * order[] together: no allocation), and fixes each slot's pos. */
static void tk_sift(tk_gen *g, size_t root, size_t n)
{
    for (;;) {
        size_t c = 2 * root + 1;
        if (c >= n)
            return;
        if (c + 1 < n && g->count[c + 1] > g->count[c])
            c++;
        if (g->count[c] <= g->count[root])
            return;
        uint64_t tc = g->count[c];
        g->count[c] = g->count[root];
        g->count[root] = tc;
        uint32_t to = g->order[c];
        g->order[c] = g->order[root];
        g->order[root] = to;
        root = c;
    }
}

static void tk_sort(tk_gen *g, size_t k)
{
    for (size_t i = k / 2; i-- > 0;)
        tk_sift(g, i, k);
    for (size_t end = k; end-- > 1;) {
        uint64_t tc = g->count[0];
        g->count[0] = g->count[end];
        g->count[end] = tc;
        uint32_t to = g->order[0];
        g->order[0] = g->order[end];
        g->order[end] = to;
        tk_sift(g, 0, end);
    }
    for (size_t i = 0; i < k; i++)
        g->pos[g->order[i]] = (uint32_t)i;
    tk_min_again(g, k);
}

/* ---- the summary ---- */

sl_status sl_topk_new(const sl_topk_config *cfg, sl_topk **out)
{
    if (!cfg || !out || cfg->k < 1 || cfg->k > SL_TOPK_K_MAX || cfg->window_ns < 0 ||
        cfg->window_ns > SL_SPAN_MAX)
        return SL_ERR_ARGUMENT;
    size_t k = cfg->k, tsize = tk_table_size(k);
    int ngen = cfg->window_ns > 0 ? 2 : 1;
    sl_topk *t = sl_malloc(sl_topk_bytes(k, cfg->window_ns));
    if (!t)
        return SL_ERR_NOMEM;
    *t = (sl_topk){.k = k, .tmask = tsize - 1, .window_ns = cfg->window_ns, .seed = cfg->seed};
    /* The arrays after the header, widest first: every one stays aligned. */
    unsigned char *p = (unsigned char *)(t + 1);
    for (int i = 0; i < ngen; i++) {
        tk_gen *g = &t->gen[i];
        g->slot = (tk_slot *)p;
        p += k * sizeof(tk_slot);
        g->count = (uint64_t *)p;
        p += k * sizeof(uint64_t);
        g->table = (uint64_t *)p;
        p += tsize * sizeof(uint64_t);
        g->order = (uint32_t *)p;
        p += tk_order_bytes(k);
        g->pos = (uint32_t *)p;
        p += tk_order_bytes(k);
        tk_gen_clear(g, k, tsize);
    }
    t->gen[1].id = -1; /* the generation before gen[0]'s window 0 */
    t->cur_end = t->window_ns > 0 ? t->window_ns : INT64_MAX;
    *out = t;
    return SL_OK;
}

void sl_topk_free(sl_topk *t)
{
    sl_free(t);
}

void sl_topk_clear(sl_topk *t)
{
    if (!t)
        return;
    for (int i = 0; i < (t->window_ns > 0 ? 2 : 1); i++)
        tk_gen_clear(&t->gen[i], t->k, t->tmask + 1);
    t->cur = 0;
    t->gen[0].id = 0;
    t->gen[1].id = -1;
    t->cur_end = t->window_ns > 0 ? t->window_ns : INT64_MAX;
}

/* The window `now` falls in: now / window_ns rounded down (towards minus
 * infinity, so that windows are aligned for a negative now too). */
static int64_t tk_window_of(const sl_topk *t, int64_t now)
{
    int64_t q = now / t->window_ns;
    return now % t->window_ns < 0 ? q - 1 : q;
}

/* The generation an add at `now` counts in: a later window starts a new
 * one, the current becoming the previous (or both starting afresh when a
 * whole window passed with no add). */
static tk_gen *tk_current(sl_topk *t, int64_t now)
{
    if (now < t->cur_end || t->window_ns == 0) /* the common case: no division */
        return &t->gen[t->cur];
    tk_gen *g = &t->gen[t->cur];
    int64_t w = tk_window_of(t, now);
    if (w <= g->id)
        return g;
    size_t tsize = t->tmask + 1;
    if (w - 1 == g->id) {
        t->cur ^= 1;
    } else {
        tk_gen *prev = &t->gen[t->cur ^ 1];
        tk_gen_clear(prev, t->k, tsize);
        prev->id = w - 1;
    }
    g = &t->gen[t->cur];
    tk_gen_clear(g, t->k, tsize);
    g->id = w;
    int64_t end;
    t->cur_end = __builtin_mul_overflow(w + 1, t->window_ns, &end) ? INT64_MAX : end;
    return g;
}

sl_status sl_topk_add(sl_topk *t, const void *key, size_t len, uint64_t n, int64_t now)
{
    if (__builtin_expect(!t || !key || len == 0 || n == 0, 0))
        return !t || (!key && len > 0) ? SL_ERR_ARGUMENT : len == 0 ? SL_ERR_KEY : SL_OK;
    tk_gen *g = tk_current(t, now);
    tk_gen_add(t, g, sl_store_hash(key, len, t->seed), key, len, n);
    return SL_OK;
}

/* The generations that hold t's window at `now`, current first: the
 * current and the previous while now is in the current's window (or
 * before it), the current alone (as the previous) in the next window,
 * none later. Returns how many. */
static int tk_parts(const sl_topk *t, int64_t now, const tk_gen *parts[2])
{
    if (t->window_ns == 0) {
        parts[0] = &t->gen[0];
        return 1;
    }
    const tk_gen *g = &t->gen[t->cur], *prev = &t->gen[t->cur ^ 1];
    int64_t w = tk_window_of(t, now);
    int n = 0;
    if (w <= g->id || (g->id < INT64_MAX && w == g->id + 1))
        parts[n++] = g;
    if (w <= g->id && prev->id == g->id - 1)
        parts[n++] = prev;
    return n;
}

/* ---- merging ---- */

/* A key that did not fit in the target of a merge. */
typedef struct tk_spill {
    uint64_t hash, count, error;
    size_t len;
    unsigned char key[SL_TOPK_KEY_MAX];
} tk_spill;

/*
 * Adds generation `p` into g (into's one): a key of both adds count and
 * error; a key of p alone comes in at g's old floor plus its own; a key of
 * g alone gets p's floor added (its true count in p is at most that).
 * Keys that find no room go to *spill (grown as needed). Returns SL_OK or
 * SL_ERR_NOMEM.
 */
static sl_status tk_merge_gen(sl_topk *into, tk_gen *g, const tk_gen *p, size_t pk,
                              tk_spill **spill, size_t *nspill, size_t *capspill)
{
    uint32_t mark = ++into->marks;
    if (mark == 0) { /* the counter wrapped: no slot may keep a stale mark */
        for (size_t i = 0; i < into->k; i++)
            g->slot[i].mark = 0;
        mark = into->marks = 1;
    }
    uint64_t old_floor = g->floor;
    size_t free_at = 0; /* slots below it are known to be taken */
    for (size_t i = 0; i < pk; i++) {
        const tk_slot *y = &p->slot[i];
        if (y->len == 0)
            continue;
        uint64_t yc = p->count[p->pos[i]];
        size_t at;
        long s = tk_find(into, g, y->hash, y->key, y->len, &at);
        if (s >= 0) {
            tk_slot *x = &g->slot[s];
            g->count[g->pos[s]] = tk_sat_add(g->count[g->pos[s]], yc);
            x->error = tk_sat_add(x->error, y->error);
            x->mark = mark;
            continue;
        }
        uint64_t c = tk_sat_add(old_floor, yc), e = tk_sat_add(old_floor, y->error);
        while (free_at < into->k && g->slot[free_at].len != 0)
            free_at++;
        if (free_at == into->k) {
            if (*nspill == *capspill) {
                size_t cap = *capspill ? *capspill * 2 : 64;
                tk_spill *more = sl_realloc(*spill, cap * sizeof *more);
                if (!more)
                    return SL_ERR_NOMEM;
                *spill = more;
                *capspill = cap;
            }
            tk_spill *sp = &(*spill)[(*nspill)++];
            *sp = (tk_spill){.hash = y->hash, .count = c, .error = e, .len = y->len};
            memcpy(sp->key, y->key, sizeof sp->key);
            continue;
        }
        tk_slot *x = &g->slot[free_at];
        x->hash = y->hash;
        x->len = y->len;
        x->error = e;
        x->mark = mark;
        memcpy(x->key, y->key, sizeof x->key);
        g->count[g->pos[free_at]] = c;
        tk_table_insert(into, g, (uint32_t)free_at);
        g->used++;
    }
    if (p->floor > 0)
        for (size_t i = 0; i < into->k; i++) {
            tk_slot *x = &g->slot[i];
            if (x->len != 0 && x->mark != mark) {
                g->count[g->pos[i]] = tk_sat_add(g->count[g->pos[i]], p->floor);
                x->error = tk_sat_add(x->error, p->floor);
            }
        }
    g->floor = tk_sat_add(old_floor, p->floor);
    g->total = tk_sat_add(g->total, p->total);
    if (p->max_n > g->max_n)
        g->max_n = p->max_n;
    return SL_OK;
}

/* The keys that found no room: each takes the smallest counter when it
 * counts more (the one dropped raising the floor), or raises the floor
 * itself. g is sorted. */
static void tk_merge_spill(const sl_topk *into, tk_gen *g, const tk_spill *sp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (sp[i].count <= g->count[0]) {
            if (sp[i].count > g->floor)
                g->floor = sp[i].count;
            continue;
        }
        uint32_t s = g->order[0];
        if (g->slot[s].len != 0) {
            tk_table_remove(into, g, s, g->slot[s].hash);
            if (g->count[0] > g->floor)
                g->floor = g->count[0];
        } else {
            g->used++;
        }
        /* The key's stored bytes stand for all of it: its hash and length
         * come along, so it is the same key to the target. */
        tk_fill(into, g, s, sp[i].hash, sp[i].key, sp[i].len, sp[i].count, sp[i].error);
    }
}

sl_status sl_topk_merge(sl_topk *into, const sl_topk *from, int64_t now)
{
    if (!into || !from || into == from || into->window_ns != 0 || into->seed != from->seed)
        return SL_ERR_ARGUMENT;
    const tk_gen *parts[2];
    int np = tk_parts(from, now, parts);
    tk_gen *g = &into->gen[0];
    tk_spill *spill = NULL;
    size_t nspill = 0, capspill = 0;
    sl_status rc = SL_OK;
    for (int i = 0; i < np && rc == SL_OK; i++) {
        rc = tk_merge_gen(into, g, parts[i], from->k, &spill, &nspill, &capspill);
        tk_sort(g, into->k);
        tk_merge_spill(into, g, spill, nspill);
        nspill = 0;
    }
    sl_free(spill);
    return rc;
}

/* ---- reading ---- */

/* Orders slots for a listing: the larger count first, then the key's
 * stored bytes, then its length. */
static int tk_cmp(const tk_gen *g, uint32_t a, uint32_t b)
{
    uint64_t ca = g->count[g->pos[a]], cb = g->count[g->pos[b]];
    if (ca != cb)
        return ca > cb ? -1 : 1;
    const tk_slot *x = &g->slot[a], *y = &g->slot[b];
    size_t la = x->len < SL_TOPK_KEY_MAX ? x->len : SL_TOPK_KEY_MAX;
    size_t lb = y->len < SL_TOPK_KEY_MAX ? y->len : SL_TOPK_KEY_MAX;
    int c = memcmp(x->key, y->key, la < lb ? la : lb);
    if (c != 0)
        return c;
    if (la != lb)
        return la < lb ? -1 : 1;
    return x->len < y->len ? -1 : x->len > y->len ? 1 : (a < b ? -1 : a > b);
}

/* Heapsort of idx[0 .. n) by tk_cmp, first in order first. */
static void tk_idx_sift(const tk_gen *g, uint32_t *idx, size_t root, size_t n)
{
    for (;;) {
        size_t c = 2 * root + 1;
        if (c >= n)
            return;
        if (c + 1 < n && tk_cmp(g, idx[c + 1], idx[c]) > 0)
            c++;
        if (tk_cmp(g, idx[c], idx[root]) <= 0)
            return;
        uint32_t t = idx[c];
        idx[c] = idx[root];
        idx[root] = t;
        root = c;
    }
}

static void tk_idx_sort(const tk_gen *g, uint32_t *idx, size_t n)
{
    for (size_t i = n / 2; i-- > 0;)
        tk_idx_sift(g, idx, i, n);
    for (size_t end = n; end-- > 1;) {
        uint32_t t = idx[0];
        idx[0] = idx[end];
        idx[end] = t;
        tk_idx_sift(g, idx, 0, end);
    }
}

/* Lists one generation (the whole of a summary's window). */
static sl_status tk_list_gen(const tk_gen *g, size_t k, sl_topk_entry *out, size_t cap,
                             size_t *n)
{
    *n = 0;
    if (g->used == 0 || cap == 0)
        return SL_OK;
    uint32_t *idx = sl_malloc(g->used * sizeof *idx);
    if (!idx)
        return SL_ERR_NOMEM;
    size_t m = 0;
    for (size_t pos = k; pos-- > 0 && m < g->used;)
        if (g->slot[g->order[pos]].len != 0)
            idx[m++] = g->order[pos];
    tk_idx_sort(g, idx, m);
    for (size_t i = 0; i < m && i < cap; i++) {
        const tk_slot *s = &g->slot[idx[i]];
        sl_topk_entry *e = &out[i];
        e->count = g->count[g->pos[idx[i]]];
        e->error = s->error;
        e->len = s->len;
        memcpy(e->key, s->key, sizeof e->key);
        ++*n;
    }
    sl_free(idx);
    return SL_OK;
}

/* Both generations of t as one summary without a window (the caller frees
 * it), or NULL when out of memory. */
static sl_topk *tk_flatten(const sl_topk *t, int64_t now)
{
    sl_topk_config cfg = {.k = 2 * t->k, .window_ns = 0, .seed = t->seed};
    sl_topk *u;
    if (sl_topk_new(&cfg, &u) != SL_OK)
        return NULL;
    if (sl_topk_merge(u, t, now) != SL_OK) {
        sl_topk_free(u);
        return NULL;
    }
    return u;
}

sl_status sl_topk_list(const sl_topk *t, int64_t now, sl_topk_entry *out, size_t cap, size_t *n)
{
    if (!t || !n || (!out && cap > 0))
        return SL_ERR_ARGUMENT;
    *n = 0;
    const tk_gen *parts[2];
    int np = tk_parts(t, now, parts);
    if (np == 0)
        return SL_OK;
    if (np == 1 || (parts[1]->used == 0 && parts[1]->floor == 0))
        return tk_list_gen(parts[0], t->k, out, cap, n);
    if (parts[0]->used == 0 && parts[0]->floor == 0)
        return tk_list_gen(parts[1], t->k, out, cap, n);
    sl_topk *u = tk_flatten(t, now);
    if (!u)
        return SL_ERR_NOMEM;
    sl_status rc = tk_list_gen(&u->gen[0], u->k, out, cap, n);
    sl_topk_free(u);
    return rc;
}

sl_status sl_topk_stats_get(const sl_topk *t, int64_t now, sl_topk_stats *st)
{
    if (!t || !st)
        return SL_ERR_ARGUMENT;
    *st = (sl_topk_stats){.k = t->k, .bytes = sl_topk_bytes(t->k, t->window_ns)};
    const tk_gen *parts[2];
    int np = tk_parts(t, now, parts);
    for (int i = 0; i < np; i++) {
        st->total = tk_sat_add(st->total, parts[i]->total);
        st->floor = tk_sat_add(st->floor, parts[i]->floor);
        if (parts[i]->max_n > st->max_n)
            st->max_n = parts[i]->max_n;
    }
    if (np > 0)
        st->keys = parts[0]->used;
    if (np == 2) /* the previous generation's keys the current one lacks */
        for (size_t i = 0; i < t->k; i++) {
            const tk_slot *s = &parts[1]->slot[i];
            size_t at;
            if (s->len != 0 && tk_find(t, parts[0], s->hash, s->key, s->len, &at) < 0)
                st->keys++;
        }
    return SL_OK;
}
