/*
 * plans.c: the plans file (see plans.h for its format and the table's
 * layout). A builder reads the file a line at a time, from memory
 * (sl_plans_parse) or in 1 MiB chunks of the file (sl_plans_load), and
 * adds each key to a table that doubles as it fills; a key given twice is
 * found as it is added, so the first mistake in file order is the one
 * reported. At the end the table is rebuilt at its final size (load factor
 * 0.7) and the arena trimmed to what it holds.
 */
#include "policy/plans.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/siphash.h"

#define SL_PLANS_CHUNK (1u << 20)   /* sl_plans_load's read buffer */
#define SL_PLANS_FIRST_SLOTS 16     /* the table's first size while building */
#define SL_PLANS_FIRST_ARENA 4096
#define SL_PLANS_TAG_MASK UINT64_C(0xffffff)

struct sl_plans {
    uint64_t hash_key[2];
    uint64_t *slots;       /* cap of them; see plans.h for a slot's bits */
    size_t cap;
    size_t count;
    unsigned char *arena;  /* arena_len bytes used of arena_cap; byte 0 is padding */
    size_t arena_len, arena_cap;
};

typedef struct sl_plans_builder {
    sl_plans *p;
    /* While building, the line each slot's key came from (parallel to
     * p->slots), for the message about a key given twice. */
    uint32_t *lines;
    const char *name;
    const char *const *tiers;
    size_t ntiers;
    size_t line; /* the line being read, 1-based */
    char *err;
    size_t errlen;
} sl_plans_builder;

static bool sl_is_blank(unsigned char c)
{
    return c == ' ' || c == '\t';
}

static bool sl_is_control(unsigned char c)
{
    return (c < 0x20 && c != '\t') || c == 0x7f;
}

/* "NAME: message", for the file as a whole. Returns -1. */
static int sl_plans_fail(sl_plans_builder *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int sl_plans_fail(sl_plans_builder *b, const char *fmt, ...)
{
    int w = snprintf(b->err, b->errlen, "%s: ", b->name);
    if (w < 0 || (size_t)w >= b->errlen)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err + w, b->errlen - (size_t)w, fmt, ap);
    va_end(ap);
    return -1;
}

/* "NAME:LINE:COLUMN: message", for the line being read. Returns -1. */
static int sl_plans_fail_at(sl_plans_builder *b, size_t column, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int sl_plans_fail_at(sl_plans_builder *b, size_t column, const char *fmt, ...)
{
    int w = snprintf(b->err, b->errlen, "%s:%zu:%zu: ", b->name, b->line, column);
    if (w < 0 || (size_t)w >= b->errlen)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err + w, b->errlen - (size_t)w, fmt, ap);
    va_end(ap);
    return -1;
}

/* The slot a hash starts its probe at: its top 32 bits scaled to cap (at
 * most 2^32 slots), which needs no power-of-two size. */
static size_t sl_plans_home(uint64_t h, size_t cap)
{
    return (size_t)(((h >> 32) * (uint64_t)cap) >> 32);
}

static size_t sl_plans_record_len(const unsigned char *r)
{
    return (size_t)r[0] | (size_t)r[1] << 8;
}

/* Probes p (cap > count, so an empty slot ends every probe) for the key of
 * hash h: returns the slot that holds it, with *found true, or the empty
 * slot where it would go. */
static size_t sl_plans_probe(const sl_plans *p, const void *key, size_t len, uint64_t h,
                             bool *found)
{
    size_t i = sl_plans_home(h, p->cap);
    uint64_t tag = h & SL_PLANS_TAG_MASK;
    for (;;) {
        uint64_t s = p->slots[i];
        uint32_t off = (uint32_t)s;
        if (off == 0) {
            *found = false;
            return i;
        }
        if ((s >> 40) == tag) {
            const unsigned char *r = p->arena + off;
            if (sl_plans_record_len(r) == len && memcmp(r + 2, key, len) == 0) {
                *found = true;
                return i;
            }
        }
        if (++i == p->cap)
            i = 0;
    }
}

/* Rebuilds the slots (and, while building, the line numbers) at cap slots,
 * cap > count. The hashes are computed again from the arena: the slots
 * keep only 24 bits of each. On failure nothing changes. */
static int sl_plans_resize(sl_plans_builder *b, size_t cap)
{
    sl_plans *p = b->p;
    uint64_t *slots = sl_calloc(cap, sizeof *slots);
    uint32_t *lines = NULL;
    if (!slots || (b->lines && !(lines = sl_calloc(cap, sizeof *lines)))) {
        sl_free(slots);
        return sl_plans_fail(b, "out of memory");
    }
    for (size_t i = 0; i < p->cap; i++) {
        uint64_t s = p->slots[i];
        if ((uint32_t)s == 0)
            continue;
        const unsigned char *r = p->arena + (uint32_t)s;
        uint64_t h = sl_siphash(p->hash_key, r + 2, sl_plans_record_len(r));
        size_t j = sl_plans_home(h, cap);
        while (slots[j] != 0)
            if (++j == cap)
                j = 0;
        slots[j] = s;
        if (lines)
            lines[j] = b->lines[i];
    }
    sl_free(p->slots);
    p->slots = slots;
    p->cap = cap;
    if (b->lines) {
        sl_free(b->lines);
        b->lines = lines;
    }
    return 0;
}

/* Quotes a key for a message: at most 64 of its bytes, then "...". */
static int sl_plans_quote_len(size_t len)
{
    return len > 64 ? 64 : (int)len;
}

/* Adds key (len bytes, 1..SL_PLAN_KEY_MAX) on tier, written at column col
 * of the current line; refuses a key already in the table. */
static int sl_plans_add(sl_plans_builder *b, const char *key, size_t len, unsigned tier,
                        size_t col)
{
    sl_plans *p = b->p;
    /* Grown before the probe, so that the slot it finds is in the table
     * the key goes into. count + 1 <= 0.7 cap after. */
    if ((p->count + 1) * 10 > p->cap * 7) {
        size_t cap = p->cap ? p->cap * 2 : SL_PLANS_FIRST_SLOTS;
        if (sl_plans_resize(b, cap))
            return -1;
    }
    uint64_t h = sl_siphash(p->hash_key, key, len);
    bool found;
    size_t i = sl_plans_probe(p, key, len, h, &found);
    if (found)
        return sl_plans_fail_at(b, col, "key '%.*s%s' is given twice (first on line %u)",
                                sl_plans_quote_len(len), key, len > 64 ? "..." : "",
                                (unsigned)b->lines[i]);
    if (p->count == SL_PLANS_MAX_KEYS)
        return sl_plans_fail_at(b, col, "more than %u keys, the most a plans file may hold",
                                (unsigned)SL_PLANS_MAX_KEYS);
    /* The first record comes after a padding byte: none is at offset 0. */
    size_t need = 2 + len + (p->arena_len == 0);
    /* Offsets are 32 bits. A file of at most SL_PLANS_MAX_BYTES cannot
     * come near: each key's record is shorter than its line. */
    if (p->arena_len + need > UINT32_MAX)
        return sl_plans_fail_at(b, col, "the keys take more than 4 GiB");
    if (need > p->arena_cap - p->arena_len) {
        size_t cap = p->arena_cap ? p->arena_cap : SL_PLANS_FIRST_ARENA;
        while (cap - p->arena_len < need)
            cap *= 2; /* below 2^33: arena_len + need <= UINT32_MAX */
        unsigned char *a = sl_realloc(p->arena, cap);
        if (!a)
            return sl_plans_fail(b, "out of memory");
        p->arena = a;
        p->arena_cap = cap;
    }
    if (p->arena_len == 0)
        p->arena[p->arena_len++] = 0;
    size_t off = p->arena_len;
    p->arena[off] = (unsigned char)(len & 0xff);
    p->arena[off + 1] = (unsigned char)(len >> 8);
    memcpy(p->arena + off + 2, key, len);
    p->arena_len += 2 + len;
    p->slots[i] = (uint64_t)off | (uint64_t)tier << 32 | (h & SL_PLANS_TAG_MASK) << 40;
    if (b->lines)
        b->lines[i] = (uint32_t)b->line;
    p->count++;
    return 0;
}

/* Refuses an unknown tier (tlen bytes at column col), naming the ones the
 * policy has. */
static int sl_plans_unknown_tier(sl_plans_builder *b, const char *tier, size_t tlen, size_t col)
{
    if (b->errlen == 0)
        return -1;
    if (b->ntiers == 0)
        return sl_plans_fail_at(b, col, "unknown tier '%.*s' (the policy has no tiers)",
                                (int)tlen, tier);
    sl_plans_fail_at(b, col, "unknown tier '%.*s' (the policy's tiers: ", (int)tlen, tier);
    size_t w = strlen(b->err);
    for (size_t t = 0; t < b->ntiers && w < b->errlen; t++) {
        int n = snprintf(b->err + w, b->errlen - w, "%s%s", t ? ", " : "", b->tiers[t]);
        if (n < 0)
            break;
        w += (size_t)n;
    }
    if (w < b->errlen)
        snprintf(b->err + w, b->errlen - w, ")");
    return -1;
}

/* Reads one line (len bytes, its '\n' not included): a comment, a blank
 * line, or KEY: TIER. */
static int sl_plans_line(sl_plans_builder *b, const char *s, size_t len)
{
    b->line++;
    if (len > 0 && s[len - 1] == '\r')
        len--;
    if (len > SL_PLANS_LINE_MAX)
        return sl_plans_fail_at(b, SL_PLANS_LINE_MAX + 1,
                                "the line is longer than %d bytes, the most a line may be",
                                SL_PLANS_LINE_MAX);
    for (size_t i = 0; i < len; i++)
        if (sl_is_control((unsigned char)s[i]))
            return sl_plans_fail_at(b, i + 1,
                                    "a control byte (0x%02x): a plans file is text, and "
                                    "keys that hold control bytes cannot be written in it",
                                    (unsigned char)s[i]);
    size_t i = 0;
    while (i < len && sl_is_blank((unsigned char)s[i]))
        i++;
    if (i == len || s[i] == '#')
        return 0;

    char quoted[SL_PLAN_KEY_MAX];
    const char *key;
    size_t klen = 0, kcol = i + 1, t; /* t: where the tier's part of the line begins */
    if (s[i] == '"') {
        size_t j = i + 1;
        for (;; j++) {
            if (j == len || (s[j] == '\\' && j + 1 == len))
                return sl_plans_fail_at(b, kcol, "the quoted key has no closing '\"'");
            char c = s[j];
            if (c == '"')
                break;
            if (c == '\\') {
                c = s[++j];
                if (c != '"' && c != '\\')
                    return sl_plans_fail_at(b, j, "unknown escape '\\%c' in a quoted key "
                                                  "(there are two: \\\" and \\\\)",
                                            c);
            }
            if (klen < SL_PLAN_KEY_MAX)
                quoted[klen] = c;
            klen++; /* counted on past the most, for the message */
        }
        key = quoted;
        j++;
        while (j < len && sl_is_blank((unsigned char)s[j]))
            j++;
        if (j == len || s[j] != ':' || (j + 1 < len && !sl_is_blank((unsigned char)s[j + 1])))
            return sl_plans_fail_at(b, j + 1, "after the quoted key, expected ': ' and the tier");
        t = j + 1;
    } else {
        /* The last ':' followed by a blank or the line's end. */
        size_t c = len;
        while (c > i && !(s[c - 1] == ':' && (c == len || sl_is_blank((unsigned char)s[c]))))
            c--;
        if (c == i)
            return sl_plans_fail_at(b, kcol, "no tier: write KEY: TIER, with a blank after the "
                                             "':' (a key may hold ':', the last ': ' separates)");
        c--; /* at the ':' */
        key = s + i;
        klen = c - i;
        while (klen > 0 && sl_is_blank((unsigned char)key[klen - 1]))
            klen--;
        t = c + 1;
    }
    if (klen == 0)
        return sl_plans_fail_at(b, kcol, "the key is empty: a key is 1 to %d bytes",
                                SL_PLAN_KEY_MAX);
    if (klen > SL_PLAN_KEY_MAX)
        return sl_plans_fail_at(b, kcol, "the key is %zu bytes long: a key is 1 to %d bytes",
                                klen, SL_PLAN_KEY_MAX);

    while (t < len && sl_is_blank((unsigned char)s[t]))
        t++;
    size_t tlen = len - t;
    while (tlen > 0 && sl_is_blank((unsigned char)s[t + tlen - 1]))
        tlen--;
    if (tlen == 0)
        return sl_plans_fail_at(b, t + 1, "no tier after the ':'");
    if (tlen > SL_PLAN_TIER_MAX)
        return sl_plans_fail_at(b, t + 1,
                                "the tier name is %zu bytes long: a tier name is 1 to %d bytes",
                                tlen, SL_PLAN_TIER_MAX);
    for (size_t k = 0; k < b->ntiers; k++)
        if (strlen(b->tiers[k]) == tlen && memcmp(b->tiers[k], s + t, tlen) == 0)
            return sl_plans_add(b, key, klen, (unsigned)k, kcol);
    return sl_plans_unknown_tier(b, s + t, tlen, t + 1);
}

/* Starts a builder; checks the caller's tiers. */
static int sl_plans_begin(sl_plans_builder *b, const char *name, const char *const *tiers,
                          size_t ntiers, const uint64_t hash_key[2], char *err, size_t errlen)
{
    *b = (sl_plans_builder){.name = name, .tiers = tiers, .ntiers = ntiers, .err = err,
                            .errlen = errlen};
    if (ntiers > SL_PLANS_MAX_TIERS)
        return sl_plans_fail(b, "at most %d tiers (got %zu)", SL_PLANS_MAX_TIERS, ntiers);
    for (size_t t = 0; t < ntiers; t++) {
        size_t n = tiers[t] ? strlen(tiers[t]) : 0;
        if (n == 0 || n > SL_PLAN_TIER_MAX)
            return sl_plans_fail(b, "tier %zu's name must be 1 to %d bytes", t, SL_PLAN_TIER_MAX);
    }
    b->p = sl_calloc(1, sizeof *b->p);
    b->lines = sl_calloc(1, sizeof *b->lines); /* resized with the slots from the first key */
    if (!b->p || !b->lines) {
        sl_free(b->p);
        sl_free(b->lines);
        b->p = NULL;
        b->lines = NULL;
        return sl_plans_fail(b, "out of memory");
    }
    b->p->hash_key[0] = hash_key[0];
    b->p->hash_key[1] = hash_key[1];
    return 0;
}

/* Ends a builder: on success (rc 0) the table at its final size into *out;
 * else frees everything. Returns rc. */
static int sl_plans_end(sl_plans_builder *b, int rc, sl_plans **out)
{
    sl_free(b->lines);
    b->lines = NULL;
    sl_plans *p = b->p;
    if (rc != 0) {
        sl_plans_free(p);
        return rc;
    }
    if (p->count == 0) {
        sl_free(p->slots);
        sl_free(p->arena);
        p->slots = NULL;
        p->arena = NULL;
        p->cap = p->arena_len = p->arena_cap = 0;
    } else {
        /* The least cap with count <= 0.7 cap. Best effort: when memory
         * is short the table keeps the size it grew to, which is as good
         * for lookups, and the arena its slack. */
        size_t cap = (p->count * 10 + 6) / 7;
        char scratch[8];
        sl_plans_builder quiet = *b;
        quiet.err = scratch;
        quiet.errlen = sizeof scratch;
        if (cap < p->cap)
            sl_plans_resize(&quiet, cap);
        if (p->arena_cap > p->arena_len) {
            unsigned char *a = sl_realloc(p->arena, p->arena_len);
            if (a) {
                p->arena = a;
                p->arena_cap = p->arena_len;
            }
        }
    }
    *out = p;
    return 0;
}

int sl_plans_parse(const char *text, size_t len, const char *name, const char *const *tiers,
                   size_t ntiers, const uint64_t hash_key[2], sl_plans **out, char *err,
                   size_t errlen)
{
    sl_plans_builder b;
    *out = NULL;
    if (sl_plans_begin(&b, name, tiers, ntiers, hash_key, err, errlen))
        return -1;
    int rc = 0;
    if (len > SL_PLANS_MAX_BYTES)
        rc = sl_plans_fail(&b, "the file is larger than 1 GiB (%llu bytes), the most a plans "
                               "file may be",
                           (unsigned long long)SL_PLANS_MAX_BYTES);
    size_t pos = 0;
    if (rc == 0 && len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0)
        pos = 3;
    while (rc == 0 && pos < len) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len;
        rc = sl_plans_line(&b, text + pos, end - pos);
        pos = end + 1;
    }
    return sl_plans_end(&b, rc, out);
}

/* Reads the file in chunks into the builder: each chunk's whole lines,
 * the last partial one carried to the next (it is at most a line long). */
static int sl_plans_read(sl_plans_builder *b, FILE *f)
{
    char *buf = sl_malloc(SL_PLANS_CHUNK);
    if (!buf)
        return sl_plans_fail(b, "out of memory");
    size_t have = 0, pos = 0;
    uint64_t total = 0;
    int rc = 0;
    for (bool first = true; rc == 0; first = false) {
        size_t n = fread(buf + have, 1, SL_PLANS_CHUNK - have, f);
        if (n == 0 && ferror(f)) {
            rc = sl_plans_fail(b, "cannot read the file: %s", strerror(errno));
            break;
        }
        total += n;
        if (total > SL_PLANS_MAX_BYTES) {
            rc = sl_plans_fail(b, "the file is larger than 1 GiB (%llu bytes), the most a "
                                  "plans file may be",
                               (unsigned long long)SL_PLANS_MAX_BYTES);
            break;
        }
        have += n;
        if (first && have >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0)
            pos = 3;
        const char *nl;
        while (rc == 0 && (nl = memchr(buf + pos, '\n', have - pos)) != NULL) {
            rc = sl_plans_line(b, buf + pos, (size_t)(nl - buf) - pos);
            pos = (size_t)(nl - buf) + 1;
        }
        if (rc != 0)
            break;
        if (n == 0) { /* the end of the file: its last line has no '\n' */
            if (pos < have)
                rc = sl_plans_line(b, buf + pos, have - pos);
            break;
        }
        /* The partial line, which may still end in "\r" before its '\n'. */
        if (have - pos > SL_PLANS_LINE_MAX + 1) {
            b->line++;
            rc = sl_plans_fail_at(b, SL_PLANS_LINE_MAX + 1,
                                  "the line is longer than %d bytes, the most a line may be",
                                  SL_PLANS_LINE_MAX);
            break;
        }
        memmove(buf, buf + pos, have - pos);
        have -= pos;
        pos = 0;
    }
    sl_free(buf);
    return rc;
}

int sl_plans_load(const char *path, const char *const *tiers, size_t ntiers,
                  const uint64_t hash_key[2], sl_plans **out, char *err, size_t errlen)
{
    *out = NULL;
    sl_plans_builder b;
    if (sl_plans_begin(&b, path, tiers, ntiers, hash_key, err, errlen))
        return -1;
    /* Opened without blocking, so that a FIFO named by mistake cannot hang
     * the load (a reload runs on the server's main thread), and read only
     * when it is a regular file. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        sl_plans_fail(&b, "%s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return sl_plans_end(&b, -1, out);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        sl_plans_fail(&b, "not a regular file");
        return sl_plans_end(&b, -1, out);
    }
    FILE *f = fcntl(fd, F_SETFL, 0) == 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        sl_plans_fail(&b, "%s", strerror(errno));
        close(fd);
        return sl_plans_end(&b, -1, out);
    }
    int rc;
    /* Refused before a byte is read; sl_plans_read counts as well, for a
     * file that grows while it is read. */
    if ((uint64_t)st.st_size > SL_PLANS_MAX_BYTES)
        rc = sl_plans_fail(&b, "the file is larger than 1 GiB (%llu bytes), the most a plans "
                               "file may be",
                           (unsigned long long)SL_PLANS_MAX_BYTES);
    else
        rc = sl_plans_read(&b, f);
    fclose(f);
    return sl_plans_end(&b, rc, out);
}

int sl_plans_lookup(const sl_plans *p, const void *key, size_t len)
{
    if (!p || p->count == 0 || len == 0 || len > SL_PLAN_KEY_MAX)
        return -1;
    bool found;
    size_t i = sl_plans_probe(p, key, len, sl_siphash(p->hash_key, key, len), &found);
    return found ? (int)((p->slots[i] >> 32) & 0xff) : -1;
}

size_t sl_plans_count(const sl_plans *p)
{
    return p ? p->count : 0;
}

size_t sl_plans_bytes(const sl_plans *p)
{
    return p ? sizeof *p + p->cap * sizeof *p->slots + p->arena_cap : 0;
}

int sl_plans_each(const sl_plans *p, int (*fn)(void *arg, const void *key, size_t len, int tier),
                  void *arg)
{
    for (size_t i = 0; p && i < p->cap; i++) {
        uint64_t s = p->slots[i];
        if ((uint32_t)s == 0)
            continue;
        const unsigned char *r = p->arena + (uint32_t)s;
        int rc = fn(arg, r + 2, sl_plans_record_len(r), (int)((s >> 32) & 0xff));
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* A build: a builder without line numbers (no key is refused as given
 * twice) and with room of its own for its messages. */
struct sl_plans_build {
    sl_plans_builder b;
    char err[160];
};

sl_plans_build *sl_plans_build_new(const uint64_t hash_key[2])
{
    sl_plans_build *pb = sl_calloc(1, sizeof *pb);
    if (!pb)
        return NULL;
    if (sl_plans_begin(&pb->b, "plans", NULL, 0, hash_key, pb->err, sizeof pb->err)) {
        sl_free(pb);
        return NULL;
    }
    sl_free(pb->b.lines);
    pb->b.lines = NULL;
    return pb;
}

int sl_plans_build_set(sl_plans_build *pb, const void *key, size_t len, unsigned tier)
{
    sl_plans_builder *b = &pb->b;
    if (len == 0 || len > SL_PLAN_KEY_MAX)
        return sl_plans_fail(b, "a key is 1 to %d bytes (got %zu)", SL_PLAN_KEY_MAX, len);
    if (tier >= SL_PLANS_MAX_TIERS)
        return sl_plans_fail(b, "tier %u: at most %d tiers", tier, SL_PLANS_MAX_TIERS);
    sl_plans *p = b->p;
    if (p->count > 0) {
        bool found;
        size_t i = sl_plans_probe(p, key, len, sl_siphash(p->hash_key, key, len), &found);
        if (found) {
            p->slots[i] = (p->slots[i] & ~(UINT64_C(0xff) << 32)) | (uint64_t)tier << 32;
            return 0;
        }
    }
    if (p->count == SL_PLANS_MAX_KEYS)
        return sl_plans_fail(b, "more than %u keys, the most a plans table may hold",
                             (unsigned)SL_PLANS_MAX_KEYS);
    return sl_plans_add(b, key, len, tier, 0);
}

const char *sl_plans_build_error(const sl_plans_build *pb)
{
    return pb->err;
}

sl_plans *sl_plans_build_finish(sl_plans_build *pb)
{
    sl_plans *out = NULL;
    sl_plans_end(&pb->b, 0, &out);
    sl_free(pb);
    return out;
}

void sl_plans_build_abort(sl_plans_build *pb)
{
    if (!pb)
        return;
    sl_plans_end(&pb->b, -1, &(sl_plans *){NULL});
    sl_free(pb);
}

void sl_plans_free(sl_plans *p)
{
    if (!p)
        return;
    sl_free(p->slots);
    sl_free(p->arena);
    sl_free(p);
}
