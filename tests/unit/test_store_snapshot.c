/*
 * Store snapshots: a round trip restores every decision; the time rule
 * counts the downtime on the wall clock across a monotonic clock restart;
 * truncated, corrupt, wrong-version and foreign files are refused and load
 * nothing; a save replaces the old file atomically and leaves no temporary
 * file behind.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store_debug.h"
#include "testlib.h"

#define NKEYS 500

static sl_limit lims[6];
static char dir[64];
static char path[128];

static void setup(void)
{
    cr_assert_eq(sl_limit_init(&lims[0], SL_GCRA, 10, 10 * NS_PER_SEC, 10), SL_OK);
    cr_assert_eq(sl_limit_init(&lims[1], SL_TOKEN_BUCKET, 20, 20 * NS_PER_SEC, 20), SL_OK);
    cr_assert_eq(sl_limit_init(&lims[2], SL_FIXED_WINDOW, 7, 60 * NS_PER_SEC, 0), SL_OK);
    cr_assert_eq(sl_limit_init(&lims[3], SL_SLIDING_WINDOW, 9, 30 * NS_PER_SEC, 0), SL_OK);
    cr_assert_eq(sl_limit_init(&lims[4], SL_SLIDING_LOG, 6, 30 * NS_PER_SEC, 0), SL_OK);
    cr_assert_eq(sl_limit_init(&lims[5], SL_CONCURRENCY, 4, 30 * NS_PER_SEC, 0), SL_OK);
    snprintf(dir, sizeof dir, "/tmp/sl_snap_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/store.snap", dir);
}

static void teardown(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[512];
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

static sl_store *new_store(void)
{
    sl_store_config c = {.seed = 5};
    sl_store *s;
    cr_assert_eq(sl_store_new(&c, &s), SL_OK);
    return s;
}

static int key_of(int k, char *buf) { return snprintf(buf, 32, "snap:%d", k); }

/* Fills a store with NKEYS keys at t0 = 100 s, random costs. */
static sl_store *filled(int64_t t0)
{
    sl_store *s = new_store();
    test_rng rng = {3};
    char key[32];
    for (int k = 0; k < NKEYS; k++) {
        int n = key_of(k, key);
        sl_decision d;
        cr_assert_eq(sl_store_take(s, key, (size_t)n, &lims[k % 6], t0, test_range(&rng, 1, 4), &d), SL_OK);
    }
    return s;
}

/* Peeks every key of a at ta and of b at tb; they must agree. */
static void expect_same_answers(sl_store *a, int64_t ta, sl_store *b, int64_t tb)
{
    char key[32];
    for (int k = 0; k < NKEYS; k++) {
        int n = key_of(k, key);
        for (int64_t cost = 0; cost <= 5; cost++) {
            sl_decision x, y;
            cr_assert_eq(sl_store_peek(a, key, (size_t)n, &lims[k % 6], ta, cost, &x), SL_OK);
            cr_assert_eq(sl_store_peek(b, key, (size_t)n, &lims[k % 6], tb, cost, &y), SL_OK);
            cr_expect_eq(x.allowed, y.allowed, "key %d cost %lld", k, (long long)cost);
            cr_expect_eq(x.remaining, y.remaining, "key %d cost %lld", k, (long long)cost);
            cr_expect_eq(x.retry_after_ns, y.retry_after_ns, "key %d cost %lld", k, (long long)cost);
            cr_expect_eq(x.reset_after_ns, y.reset_after_ns, "key %d cost %lld", k, (long long)cost);
        }
    }
}

static size_t file_size(const char *p)
{
    struct stat st;
    cr_assert_eq(stat(p, &st), 0);
    return (size_t)st.st_size;
}

static unsigned char *read_all(const char *p, size_t *len)
{
    *len = file_size(p);
    unsigned char *buf = malloc(*len);
    FILE *f = fopen(p, "rb");
    cr_assert(f && fread(buf, 1, *len, f) == *len);
    fclose(f);
    return buf;
}

static void write_all(const char *p, const unsigned char *buf, size_t len)
{
    FILE *f = fopen(p, "wb");
    cr_assert(f && fwrite(buf, 1, len, f) == len);
    fclose(f);
}

static void expect_refused(const char *p, int want, const char *what)
{
    sl_store *s = new_store();
    size_t loaded = 99;
    cr_expect_eq(sl_store_snapshot_load(s, p, 100 * NS_PER_SEC, 0, &loaded), want, "%s", what);
    sl_store_stats st;
    sl_store_get_stats(s, &st);
    cr_expect_eq(st.keys, 0, "%s: nothing loaded", what);
    cr_expect_eq(loaded, 0, "%s", what);
    sl_store_free(s);
}

TestSuite(snapshot, .init = setup, .fini = teardown);

Test(snapshot, round_trip_same_clock)
{
    const int64_t t0 = 100 * NS_PER_SEC, wall = 1700000000 * NS_PER_SEC;
    sl_store *a = filled(t0);
    cr_assert_eq(sl_store_snapshot_save(a, path, t0, wall), SL_OK);
    sl_store *b = new_store();
    size_t loaded;
    cr_assert_eq(sl_store_snapshot_load(b, path, t0, wall, &loaded), SL_OK);
    sl_store_stats sa, sb;
    sl_store_get_stats(a, &sa);
    sl_store_get_stats(b, &sb);
    cr_expect_eq(loaded, sa.keys);
    cr_expect_eq(sb.keys, sa.keys);
    expect_same_answers(a, t0, b, t0);
    expect_same_answers(a, t0 + 3 * NS_PER_SEC, b, t0 + 3 * NS_PER_SEC);
    cr_expect_eq(sl_store_debug_check(b), 0);
    /* No temporary file is left beside the snapshot. */
    DIR *d = opendir(dir);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d)))
        files += e->d_name[0] != '.';
    closedir(d);
    cr_expect_eq(files, 1);
    sl_store_free(a);
    sl_store_free(b);
}

/* The process stops at mono 100 s, is down 7 s of wall time, and the new
 * process's monotonic clock reads 500 s: the restored store answers at
 * 500 s what the old one would have answered at 107 s. */
Test(snapshot, downtime_counts_across_a_clock_restart)
{
    const int64_t t0 = 100 * NS_PER_SEC, wall = 1700000000 * NS_PER_SEC;
    sl_store *a = filled(t0);
    cr_assert_eq(sl_store_snapshot_save(a, path, t0, wall), SL_OK);
    sl_store *b = new_store();
    cr_assert_eq(sl_store_snapshot_load(b, path, 500 * NS_PER_SEC, wall + 7 * NS_PER_SEC, NULL), SL_OK);
    expect_same_answers(a, t0 + 7 * NS_PER_SEC, b, 500 * NS_PER_SEC);
    expect_same_answers(a, t0 + 19 * NS_PER_SEC, b, 512 * NS_PER_SEC);
    sl_store_free(b);
    /* A wall clock that went backwards counts as no time passed. */
    b = new_store();
    cr_assert_eq(sl_store_snapshot_load(b, path, 50 * NS_PER_SEC, wall - 3600 * NS_PER_SEC, NULL), SL_OK);
    expect_same_answers(a, t0, b, 50 * NS_PER_SEC);
    sl_store_free(b);
    /* Down longer than every period: everything expired, nothing loaded. */
    b = new_store();
    size_t loaded = 9;
    cr_assert_eq(sl_store_snapshot_load(b, path, 5 * NS_PER_SEC, wall + 3600 * NS_PER_SEC, &loaded), SL_OK);
    cr_expect_eq(loaded, 0);
    sl_store_free(b);
    sl_store_free(a);
}

/* A new clock that reads less than the restored times' distance into the
 * past (the new process started 2 s after boot, but a window began 5 s
 * before the restore): times clamp at 0, which is never more lenient. */
Test(snapshot, clamped_times_err_on_the_strict_side)
{
    const int64_t t0 = 100 * NS_PER_SEC, wall = 1700000000 * NS_PER_SEC;
    sl_store *a = filled(t0);
    cr_assert_eq(sl_store_snapshot_save(a, path, t0, wall), SL_OK);
    sl_store *b = new_store();
    cr_assert_eq(sl_store_snapshot_load(b, path, 2 * NS_PER_SEC, wall + 7 * NS_PER_SEC, NULL), SL_OK);
    char key[32];
    for (int k = 0; k < NKEYS; k++) {
        int n = key_of(k, key);
        for (int64_t cost = 1; cost <= 5; cost++) {
            sl_decision x, y;
            cr_assert_eq(sl_store_peek(a, key, (size_t)n, &lims[k % 6], t0 + 7 * NS_PER_SEC, cost, &x), SL_OK);
            cr_assert_eq(sl_store_peek(b, key, (size_t)n, &lims[k % 6], 2 * NS_PER_SEC, cost, &y), SL_OK);
            cr_expect(!y.allowed || x.allowed, "key %d cost %lld: more lenient", k, (long long)cost);
            cr_expect_leq(y.remaining, x.remaining, "key %d cost %lld", k, (long long)cost);
        }
    }
    sl_store_free(a);
    sl_store_free(b);
}

Test(snapshot, refuses_truncated_files)
{
    const int64_t t0 = 100 * NS_PER_SEC;
    sl_store *a = filled(t0);
    cr_assert_eq(sl_store_snapshot_save(a, path, t0, 0), SL_OK);
    size_t len;
    unsigned char *buf = read_all(path, &len);
    char cut[160];
    snprintf(cut, sizeof cut, "%s.cut", path);
    /* Every length from 0 to 200, then every 97th, then the last 40. */
    for (size_t n = 0; n < len; n += n < 200 ? 1 : (n > len - 40 ? 1 : 97)) {
        write_all(cut, buf, n);
        char what[64];
        snprintf(what, sizeof what, "cut at %zu of %zu", n, len);
        expect_refused(cut, SL_ERR_CORRUPT, what);
    }
    free(buf);
    sl_store_free(a);
}

Test(snapshot, refuses_corrupt_and_foreign_files)
{
    const int64_t t0 = 100 * NS_PER_SEC;
    sl_store *a = filled(t0);
    cr_assert_eq(sl_store_snapshot_save(a, path, t0, 0), SL_OK);
    size_t len;
    unsigned char *buf = read_all(path, &len);
    char bad[160];
    snprintf(bad, sizeof bad, "%s.bad", path);
    test_rng rng = {11};
    /* One flipped bit anywhere after the version (header, records, count,
     * checksum) is caught. */
    for (int i = 0; i < 300; i++) {
        size_t at = (size_t)test_range(&rng, 16, (int64_t)len - 1);
        unsigned bit = 1u << test_range(&rng, 0, 7);
        buf[at] ^= (unsigned char)bit;
        write_all(bad, buf, len);
        char what[64];
        snprintf(what, sizeof what, "bit flipped at %zu", at);
        expect_refused(bad, SL_ERR_CORRUPT, what);
        buf[at] ^= (unsigned char)bit;
    }
    /* Trailing garbage. */
    unsigned char *longer = malloc(len + 1);
    memcpy(longer, buf, len);
    longer[len] = 0;
    write_all(bad, longer, len + 1);
    expect_refused(bad, SL_ERR_CORRUPT, "a byte after the end");
    free(longer);
    /* Not a snapshot. */
    write_all(bad, (const unsigned char *)"*1\r\n$4\r\nPING\r\n", 14);
    expect_refused(bad, SL_ERR_CORRUPT, "foreign file");
    memcpy(longer = malloc(len), buf, len);
    longer[0] = 'X';
    write_all(bad, longer, len);
    expect_refused(bad, SL_ERR_CORRUPT, "bad magic");
    free(longer);
    /* A version from the future, and another byte order. */
    buf[8] = 2;
    write_all(bad, buf, len);
    expect_refused(bad, SL_ERR_VERSION, "version 2");
    buf[8] = 1;
    unsigned char bom[4];
    memcpy(bom, buf + 12, 4);
    for (int i = 0; i < 4; i++)
        buf[12 + i] = bom[3 - i];
    write_all(bad, buf, len);
    expect_refused(bad, SL_ERR_VERSION, "other byte order");
    memcpy(buf + 12, bom, 4);
    /* Missing file; a directory. */
    snprintf(bad, sizeof bad, "%s/missing", dir);
    expect_refused(bad, SL_ERR_IO, "missing file");
    expect_refused(dir, SL_ERR_IO, "a directory");
    /* The untouched original still loads. */
    write_all(bad, buf, len);
    sl_store *b = new_store();
    cr_expect_eq(sl_store_snapshot_load(b, bad, t0, 0, NULL), SL_OK);
    sl_store_free(b);
    free(buf);
    sl_store_free(a);
}

Test(snapshot, refuses_keys_too_long_for_the_store)
{
    sl_store_config c = {.max_key_len = 1000};
    sl_store *a, *b;
    cr_assert_eq(sl_store_new(&c, &a), SL_OK);
    char key[900];
    memset(key, 'q', sizeof key);
    sl_decision d;
    cr_assert_eq(sl_store_take(a, "short", 5, &lims[0], NS_PER_SEC, 1, &d), SL_OK);
    cr_assert_eq(sl_store_take(a, key, sizeof key, &lims[0], NS_PER_SEC, 1, &d), SL_OK);
    cr_assert_eq(sl_store_snapshot_save(a, path, NS_PER_SEC, 0), SL_OK);
    b = new_store(); /* max 512 */
    cr_expect_eq(sl_store_snapshot_load(b, path, NS_PER_SEC, 0, NULL), SL_ERR_KEY);
    sl_store_stats st;
    sl_store_get_stats(b, &st);
    cr_expect_eq(st.keys, 0, "not even the short key: never half-loaded");
    sl_store_free(a);
    sl_store_free(b);
}

Test(snapshot, save_replaces_atomically_and_reports_io_errors)
{
    const int64_t t0 = 100 * NS_PER_SEC;
    sl_store *a = filled(t0);
    sl_store *empty = new_store();
    cr_assert_eq(sl_store_snapshot_save(a, path, t0, 0), SL_OK);
    size_t before = file_size(path);
    char nodir[160];
    snprintf(nodir, sizeof nodir, "%s/no/such/dir/x.snap", dir);
    cr_expect_eq(sl_store_snapshot_save(a, nodir, t0, 0), SL_ERR_IO);
    cr_expect_eq(file_size(path), before, "the old snapshot is untouched");
    cr_assert_eq(sl_store_snapshot_save(empty, path, t0, 0), SL_OK);
    cr_expect_lt(file_size(path), before, "replaced by the empty store's snapshot");
    sl_store *b = new_store();
    size_t loaded = 9;
    cr_expect_eq(sl_store_snapshot_load(b, path, t0, 0, &loaded), SL_OK);
    cr_expect_eq(loaded, 0);
    cr_expect_eq(sl_store_snapshot_save(a, path, -1, 0), SL_ERR_TIME);
    sl_store_free(a);
    sl_store_free(b);
    sl_store_free(empty);
}

/* Writes n bytes into dir/name. */
static void put_file(const char *name, size_t n)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    cr_assert_not_null(f);
    for (size_t i = 0; i < n; i++)
        fputc('x', f);
    fclose(f);
}

static bool there(const char *name)
{
    char p[256];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return lstat(p, &st) == 0;
}

Test(snapshot, clean_removes_only_the_temporary_files_of_a_save)
{
    put_file("store.snap", 3);
    put_file("store.snap.tmpAb3xY9", 10);
    put_file("store.snap.tmp000000", 7);
    const char *kept[] = {"store.snap.tmpAbCdE", "store.snap.tmpAbCdEfG", "store.snap.tmpAb-dEf",
                          "store.snap.tmp", "other.snap.tmpAbCdEf", "store.snapXtmpAbCdEf",
                          "xstore.snap.tmpAbCdEf"};
    for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
        put_file(kept[i], 1);
    char link[256], target[256];
    snprintf(link, sizeof link, "%s/store.snap.tmpLiNk00", dir);
    snprintf(target, sizeof target, "%s/target", dir);
    put_file("target", 99);
    cr_assert_eq(symlink(target, link), 0);

    size_t removed = 99;
    uint64_t bytes = 99;
    cr_assert_eq(sl_store_snapshot_clean(path, &removed, &bytes), SL_OK);
    cr_expect_eq(removed, 2);
    cr_expect_eq(bytes, 17);
    cr_expect(!there("store.snap.tmpAb3xY9") && !there("store.snap.tmp000000"));
    cr_expect(there("store.snap"), "the snapshot itself stays");
    for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
        cr_expect(there(kept[i]), "%s was removed", kept[i]);
    cr_expect(there("store.snap.tmpLiNk00") && there("target"), "a link and its target stay");

    /* Nothing left to remove; a save leaves nothing behind either. */
    sl_store *s = new_store();
    cr_assert_eq(sl_store_snapshot_save(s, path, NS_PER_SEC, 0), SL_OK);
    cr_assert_eq(sl_store_snapshot_clean(path, &removed, NULL), SL_OK);
    cr_expect_eq(removed, 0);
    sl_store_free(s);

    char nodir[160];
    snprintf(nodir, sizeof nodir, "%s/no/such/x.snap", dir);
    cr_expect_eq(sl_store_snapshot_clean(nodir, &removed, &bytes), SL_ERR_IO);
    cr_expect_eq(sl_store_snapshot_clean(NULL, NULL, NULL), SL_ERR_ARGUMENT);
    char slash[160];
    snprintf(slash, sizeof slash, "%s/", dir);
    put_file(".tmpAbCdEf", 1);
    cr_expect_eq(sl_store_snapshot_clean(slash, NULL, NULL), SL_ERR_ARGUMENT);
    cr_expect(there(".tmpAbCdEf"), "a path with no file name matches nothing");
}
