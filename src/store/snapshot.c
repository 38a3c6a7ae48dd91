/*
 * snapshot.c: writes the store's states to a file and reads them back, so
 * that a restart does not give every key a fresh burst.
 *
 * File format, version 1 (integers little-endian, except the byte-order
 * mark and the states themselves, which are the writer's native layout):
 *
 *   header, 48 bytes:
 *     0  magic "SLUICESN"
 *     8  u32 version (1)
 *    12  u32 byte-order mark 0x01020304, written natively
 *    16  i64 wall clock at the snapshot (ns, CLOCK_REALTIME)
 *    24  i64 store clock at the snapshot (ns, the `now` of the takes)
 *    32  u64 reserved, 0
 *    40  u64 reserved, 0
 *   records, each:
 *     u16 key length (1..65535) | u8 algorithm | u8 flags | u32 state bytes
 *     (flags: 1 = a carried state, which begins with the name of its limit:
 *     SL_CARRY_BYTES, see sluice.h; other bits 0)
 *     i64 expiry (ns on the store clock; INT64_MAX: unknown, far away)
 *     key bytes, state bytes
 *   end: 8 zero bytes (a record header with key length 0), u64 record count,
 *        u64 FNV-1a 64 checksum of every byte before it.
 *
 * A reader verifies the whole file (structure, count, checksum, nothing
 * after the checksum) in a first pass and only then loads, in a second
 * pass: a damaged file loads nothing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store_layout.h"

#define SL_SNAP_MAGIC "SLUICESN"
#define SL_SNAP_VERSION 1u
#define SL_SNAP_BOM 0x01020304u
#define SL_SNAP_HEADER 48u
#define SL_SNAP_RECHDR 16u
#define SL_SNAP_BUF 65536u
/* The largest state any algorithm has: a concurrency limit at its maximum. */
#define SL_SNAP_MAX_STATE ((size_t)16 + (size_t)24 * SL_CONCURRENCY_MAX)
#define SL_FNV_OFFSET UINT64_C(0xcbf29ce484222325)
#define SL_FNV_PRIME UINT64_C(0x100000001b3)

static uint64_t sl_fnv(uint64_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= SL_FNV_PRIME;
    }
    return h;
}

static void sl_put_le(unsigned char *p, uint64_t v, unsigned bytes)
{
    for (unsigned i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t sl_get_le(const unsigned char *p, unsigned bytes)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* ---- buffered writer ---- */

typedef struct sl_writer {
    int fd;
    size_t len;
    uint64_t sum;
    bool failed;
    unsigned char buf[SL_SNAP_BUF];
} sl_writer;

static void sl_w_flush(sl_writer *w)
{
    size_t off = 0;
    while (!w->failed && off < w->len) {
        ssize_t k = write(w->fd, w->buf + off, w->len - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            w->failed = true;
        else
            off += (size_t)k;
    }
    w->len = 0;
}

static void sl_w_put(sl_writer *w, const void *data, size_t n)
{
    const unsigned char *p = data;
    w->sum = sl_fnv(w->sum, p, n);
    while (n && !w->failed) {
        size_t k = SL_SNAP_BUF - w->len < n ? SL_SNAP_BUF - w->len : n;
        memcpy(w->buf + w->len, p, k);
        w->len += k;
        p += k;
        n -= k;
        if (w->len == SL_SNAP_BUF)
            sl_w_flush(w);
    }
}

/*
 * Copies one shard's live records, in file layout, into a new buffer
 * (under the shard's lock, so that takes wait only for a memcpy, never for
 * the disk). *out is malloc'd, the caller frees it.
 */
static int sl_copy_shard(sl_shard *sh, int64_t now, unsigned char **out, size_t *out_len,
                         uint64_t *count)
{
    uint64_t now_tick = now <= 0 ? 0 : (uint64_t)now >> SL_TICK_SHIFT;
    *out = NULL;
    *out_len = 0;
    sl_shard_lock(sh);
    size_t total = (size_t)sh->ngroups * SL_GROUP_SLOTS, bytes = 0;
    for (int pass = 0; pass < 2; pass++) {
        size_t off = 0;
        for (size_t pos = 0; pos < total; pos++) {
            uint32_t v = sh->slots[pos];
            if (v <= SL_SLOT_DELETED)
                continue;
            uint64_t *rec = sl_shard_record(sh, v);
            uint64_t tick = sl_rec_expiry(rec);
            if (tick != SL_TICK_NEVER && tick <= now_tick)
                continue; /* already "never seen": no need to keep it */
            sl_rec_meta *m = sl_rec_meta_of(rec);
            size_t size = sl_shard_record_state_size(sh, v);
            size_t n = SL_SNAP_RECHDR + m->keylen + size;
            if (pass == 0) {
                bytes += n;
                continue;
            }
            unsigned char *p = *out + off;
            sl_put_le(p, m->keylen, 2);
            p[2] = m->flags & SL_REC_ALGO_MASK & ~SL_REC_CARRIED;
            p[3] = (m->flags & SL_REC_CARRIED) ? 1 : 0;
            sl_put_le(p + 4, size, 4);
            int64_t exp = tick == SL_TICK_NEVER ? INT64_MAX : (int64_t)(tick << SL_TICK_SHIFT);
            sl_put_le(p + 8, (uint64_t)exp, 8);
            size_t key_units = (m->keylen + 7u) / 8u;
            size_t units = (size + 8) / 8 + key_units;
            memcpy(p + SL_SNAP_RECHDR, rec + units - key_units, m->keylen);
            memcpy(p + SL_SNAP_RECHDR + m->keylen, rec + 1, size);
            off += n;
            (*count)++;
        }
        if (pass == 0) {
            if (bytes == 0)
                break;
            *out = sl_malloc(bytes);
            if (!*out) {
                sl_shard_unlock(sh);
                return SL_ERR_NOMEM;
            }
            *out_len = bytes;
        }
    }
    sl_shard_unlock(sh);
    return SL_OK;
}

/* fsyncs the directory holding `path`, so that the rename survives a crash. */
static int sl_sync_dir(const char *path)
{
    char *dir = strdup(path);
    if (!dir)
        return -1;
    char *slash = strrchr(dir, '/');
    const char *d = ".";
    if (slash == dir)
        d = "/";
    else if (slash) {
        *slash = '\0';
        d = dir;
    }
    int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = fd < 0 ? -1 : fsync(fd);
    if (fd >= 0)
        close(fd);
    free(dir);
    return rc;
}

sl_status sl_store_snapshot_save(sl_store *s, const char *path, int64_t now_mono, int64_t now_wall)
{
    if (!s || !path)
        return SL_ERR_ARGUMENT;
    if (now_mono < 0 || now_mono > SL_TIME_MAX)
        return SL_ERR_TIME;
    size_t plen = strlen(path);
    char *tmp = sl_malloc(plen + 16);
    sl_writer *w = sl_malloc(sizeof *w);
    if (!tmp || !w) {
        sl_free(tmp);
        sl_free(w);
        return SL_ERR_NOMEM;
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmpXXXXXX", 11);
    int rc = SL_OK, saved_errno = 0;
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        saved_errno = errno;
        sl_free(tmp);
        sl_free(w);
        errno = saved_errno;
        return SL_ERR_IO;
    }
    w->fd = fd;
    w->len = 0;
    w->sum = SL_FNV_OFFSET;
    w->failed = false;

    unsigned char hdr[SL_SNAP_HEADER] = {0};
    memcpy(hdr, SL_SNAP_MAGIC, 8);
    sl_put_le(hdr + 8, SL_SNAP_VERSION, 4);
    uint32_t bom = SL_SNAP_BOM;
    memcpy(hdr + 12, &bom, 4);
    sl_put_le(hdr + 16, (uint64_t)now_wall, 8);
    sl_put_le(hdr + 24, (uint64_t)now_mono, 8);
    sl_w_put(w, hdr, sizeof hdr);

    uint64_t count = 0;
    for (uint32_t i = 0; i < s->nshards && rc == SL_OK && !w->failed; i++) {
        unsigned char *buf;
        size_t len;
        rc = sl_copy_shard(&s->shards[i], now_mono, &buf, &len, &count);
        if (rc == SL_OK && len)
            sl_w_put(w, buf, len);
        sl_free(buf);
    }
    unsigned char end[24] = {0};
    sl_put_le(end + 8, count, 8);
    sl_w_put(w, end, 16);
    sl_put_le(end + 16, w->sum, 8);
    sl_w_put(w, end + 16, 8);
    sl_w_flush(w);

    if (rc == SL_OK && (w->failed || fsync(fd) != 0))
        rc = SL_ERR_IO;
    saved_errno = errno;
    if (close(fd) != 0 && rc == SL_OK) {
        rc = SL_ERR_IO;
        saved_errno = errno;
    }
    if (rc == SL_OK && rename(tmp, path) != 0) {
        rc = SL_ERR_IO;
        saved_errno = errno;
    }
    if (rc != SL_OK)
        unlink(tmp);
    else if (sl_sync_dir(path) != 0) {
        rc = SL_ERR_IO; /* the new file is in place, but may not survive a crash */
        saved_errno = errno;
    }
    sl_free(tmp);
    sl_free(w);
    errno = saved_errno;
    return rc;
}

/* The length of the suffix mkostemp replaces in the temporary file's name. */
#define SL_SNAP_TMP_RANDOM 6

/* Whether `name` is `base` + ".tmp" + SL_SNAP_TMP_RANDOM letters or digits:
 * the name sl_store_snapshot_save gives a temporary file of `base`. */
static bool sl_is_snapshot_tmp(const char *name, const char *base, size_t blen)
{
    if (strncmp(name, base, blen) != 0 || strncmp(name + blen, ".tmp", 4) != 0)
        return false;
    const char *r = name + blen + 4;
    for (int i = 0; i < SL_SNAP_TMP_RANDOM; i++) {
        char ch = r[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')))
            return false;
    }
    return r[SL_SNAP_TMP_RANDOM] == '\0';
}

sl_status sl_store_snapshot_clean(const char *path, size_t *removed, uint64_t *bytes)
{
    if (removed)
        *removed = 0;
    if (bytes)
        *bytes = 0;
    if (!path || !*path)
        return SL_ERR_ARGUMENT;
    char *dir = strdup(path);
    if (!dir)
        return SL_ERR_NOMEM;
    char *slash = strrchr(dir, '/');
    const char *base = slash ? slash + 1 : path;
    const char *d = slash == dir ? "/" : slash ? dir : ".";
    if (slash && slash != dir)
        *slash = '\0';
    size_t blen = strlen(base);
    if (blen == 0) { /* "dir/": no file name, so no name of ours to match */
        free(dir);
        return SL_ERR_ARGUMENT;
    }
    DIR *dp = opendir(d);
    if (!dp) {
        int e = errno;
        free(dir);
        errno = e;
        return SL_ERR_IO;
    }
    uid_t me = geteuid();
    struct dirent *de;
    while ((de = readdir(dp)) != NULL) {
        if (!sl_is_snapshot_tmp(de->d_name, base, blen))
            continue;
        /* The entry itself, not what a link points to: a link planted
         * under the pattern must not remove its target, nor count it. */
        struct stat st;
        if (fstatat(dirfd(dp), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(st.st_mode) || st.st_uid != me)
            continue;
        if (unlinkat(dirfd(dp), de->d_name, 0) != 0)
            continue;
        if (removed)
            (*removed)++;
        if (bytes)
            *bytes += (uint64_t)st.st_size;
    }
    closedir(dp);
    free(dir);
    return SL_OK;
}

/* ---- buffered reader ---- */

typedef struct sl_reader {
    int fd;
    size_t pos, len;
    uint64_t sum;
    bool io_error;
    unsigned char buf[SL_SNAP_BUF];
} sl_reader;

/* Reads exactly n bytes (adding them to the checksum when `sum`); false at
 * end of file or on an error. */
static bool sl_r_get(sl_reader *r, void *dst, size_t n, bool sum)
{
    unsigned char *d = dst;
    while (n) {
        if (r->pos == r->len) {
            ssize_t k = read(r->fd, r->buf, SL_SNAP_BUF);
            if (k < 0 && errno == EINTR)
                continue;
            if (k < 0)
                r->io_error = true;
            if (k <= 0)
                return false;
            r->pos = 0;
            r->len = (size_t)k;
        }
        size_t k = r->len - r->pos < n ? r->len - r->pos : n;
        if (d) {
            memcpy(d, r->buf + r->pos, k);
            d += k;
        }
        if (sum)
            r->sum = sl_fnv(r->sum, r->buf + r->pos, k);
        r->pos += k;
        n -= k;
    }
    return true;
}

typedef struct sl_snap_ctx {
    sl_store *s;
    int64_t now;        /* store clock now */
    int64_t delta;      /* add to every snapshot time */
    bool apply;         /* second pass: store the states */
    size_t loaded;
    void *state;        /* scratch, SL_SNAP_MAX_STATE bytes, 8-aligned */
    unsigned char *key; /* scratch, 65535 bytes */
} sl_snap_ctx;

static int64_t sl_add_sat(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

/*
 * One pass over the file from its start: verifies it (first pass), or
 * stores its states (second pass). Returns SL_OK or the reason to refuse.
 */
static int sl_snap_pass(sl_reader *r, sl_snap_ctx *c, int64_t *wall, int64_t *mono)
{
    unsigned char hdr[SL_SNAP_HEADER];
    r->pos = r->len = 0;
    r->sum = SL_FNV_OFFSET;
    if (lseek(r->fd, 0, SEEK_SET) != 0)
        return SL_ERR_IO;
    if (!sl_r_get(r, hdr, sizeof hdr, true))
        return r->io_error ? SL_ERR_IO : SL_ERR_CORRUPT;
    if (memcmp(hdr, SL_SNAP_MAGIC, 8) != 0)
        return SL_ERR_CORRUPT; /* not a sluice snapshot at all */
    uint32_t bom;
    memcpy(&bom, hdr + 12, 4);
    if (sl_get_le(hdr + 8, 4) != SL_SNAP_VERSION || bom != SL_SNAP_BOM)
        return SL_ERR_VERSION;
    *wall = (int64_t)sl_get_le(hdr + 16, 8);
    *mono = (int64_t)sl_get_le(hdr + 24, 8);

    uint64_t count = 0;
    bool key_too_long = false;
    for (;;) {
        unsigned char rh[SL_SNAP_RECHDR];
        if (!sl_r_get(r, rh, 8, true))
            return r->io_error ? SL_ERR_IO : SL_ERR_CORRUPT;
        size_t keylen = (size_t)sl_get_le(rh, 2);
        unsigned algo = rh[2];
        size_t size = (size_t)sl_get_le(rh + 4, 4);
        if (keylen == 0) {
            if (algo != 0 || rh[3] != 0 || size != 0)
                return SL_ERR_CORRUPT;
            break;
        }
        bool carried = rh[3] == 1;
        if (algo >= SL_ALGORITHM_COUNT || rh[3] > 1 || size == 0 || size % 8 ||
            size > SL_SNAP_MAX_STATE || (carried && size <= SL_CARRY_BYTES))
            return SL_ERR_CORRUPT;
        if (!sl_r_get(r, rh + 8, 8, true))
            return r->io_error ? SL_ERR_IO : SL_ERR_CORRUPT;
        int64_t exp = (int64_t)sl_get_le(rh + 8, 8);
        if (keylen > c->s->max_key_len)
            key_too_long = true;
        if (!sl_r_get(r, c->apply ? c->key : NULL, keylen, true) ||
            !sl_r_get(r, c->apply ? c->state : NULL, size, true))
            return r->io_error ? SL_ERR_IO : SL_ERR_CORRUPT;
        count++;
        if (!c->apply)
            continue;
        /* The time rule: see sl_store_snapshot_load in sluice.h. */
        if (carried) /* the limit's name holds no time */
            sl_state_rebase((sl_algorithm)algo, (unsigned char *)c->state + SL_CARRY_BYTES,
                            size - SL_CARRY_BYTES,
                            c->delta);
        else
            sl_state_rebase((sl_algorithm)algo, c->state, size, c->delta);
        if (exp != INT64_MAX) {
            exp = sl_add_sat(exp, c->delta);
            if (exp <= c->now)
                continue; /* expired while the process was down */
        }
        uint64_t h = sl_store_hash(c->key, keylen, c->s->seed);
        sl_shard *sh = sl_store_shard_of(c->s, h);
        sl_shard_lock(sh);
        int rc = sl_shard_put(c->s, sh, h, c->key, keylen, algo | (carried ? SL_REC_CARRIED : 0),
                              c->state, size,
                              exp == INT64_MAX ? SL_TIME_MAX : exp, c->now);
        sl_shard_unlock(sh);
        if (rc != SL_OK)
            return rc;
        c->loaded++;
    }
    unsigned char tail[16];
    if (!sl_r_get(r, tail, 8, true))
        return r->io_error ? SL_ERR_IO : SL_ERR_CORRUPT;
    uint64_t want = r->sum;
    if (!sl_r_get(r, tail + 8, 8, false))
        return r->io_error ? SL_ERR_IO : SL_ERR_CORRUPT;
    if (sl_get_le(tail, 8) != count || sl_get_le(tail + 8, 8) != want)
        return SL_ERR_CORRUPT;
    unsigned char extra;
    if (sl_r_get(r, &extra, 1, false))
        return SL_ERR_CORRUPT; /* bytes after the end */
    if (r->io_error)
        return SL_ERR_IO;
    return key_too_long ? SL_ERR_KEY : SL_OK;
}

sl_status sl_store_snapshot_load(sl_store *s, const char *path, int64_t now_mono, int64_t now_wall,
                                 size_t *loaded)
{
    if (loaded)
        *loaded = 0;
    if (!s || !path)
        return SL_ERR_ARGUMENT;
    if (now_mono < 0 || now_mono > SL_TIME_MAX)
        return SL_ERR_TIME;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return SL_ERR_IO;
    sl_reader *r = sl_malloc(sizeof *r);
    sl_snap_ctx c = {.s = s, .now = now_mono};
    c.state = sl_malloc(SL_SNAP_MAX_STATE);
    c.key = sl_malloc(UINT16_MAX);
    int rc = SL_ERR_NOMEM;
    if (r && c.state && c.key) {
        r->fd = fd;
        r->io_error = false;
        int64_t wall, mono;
        rc = sl_snap_pass(r, &c, &wall, &mono);
        if (rc == SL_OK) {
            /* Downtime, measured on the wall clock; a clock that went back
             * (or a nonsense difference) counts as no time passed. */
            int64_t elapsed, mono_shift;
            if (__builtin_sub_overflow(now_wall, wall, &elapsed) || elapsed < 0)
                elapsed = 0;
            if (__builtin_sub_overflow(now_mono, mono, &mono_shift))
                mono_shift = now_mono > mono ? INT64_MAX : INT64_MIN;
            c.delta = sl_add_sat(mono_shift, elapsed == INT64_MIN ? INT64_MAX : -elapsed);
            c.apply = true;
            rc = sl_snap_pass(r, &c, &wall, &mono);
        }
    }
    if (loaded)
        *loaded = c.loaded;
    sl_free(c.state);
    sl_free(c.key);
    sl_free(r);
    close(fd);
    return rc;
}
