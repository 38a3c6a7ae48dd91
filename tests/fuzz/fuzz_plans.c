/*
 * fuzz_plans.c: libFuzzer target for the plans file's parser
 * (src/policy/plans.c, sl_plans_parse) on arbitrary bytes, under the tiers
 * free, paid, "a b" and "p:q".
 *
 * CHECK() aborts when a guarantee of plans.h breaks:
 * - a refusal leaves no table and names the file;
 * - a table holds at most one key a line, each of 1 to SL_PLAN_KEY_MAX
 *   bytes on a tier of the list, and finds each of them on its tier;
 * - the table written back as a file of quoted keys ("KEY": TIER, with \"
 *   and \\) parses, under another hash key, to the same keys and tiers;
 * - an input without '\r' reads the same with every '\n' made "\r\n": the
 *   same keys, or the same message;
 * - the table's keys set one by one into a build (sl_plans_build_set, as a
 *   Redis hash's fields are), each twice, the first time on another tier,
 *   make the same table.
 *
 * Build and run: make fuzz (FUZZ_SECONDS=N to change the time per target).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "policy/plans.h"

static const char *const tiers[] = {"free", "paid", "a b", "p:q"};
static const uint64_t key1[2] = {UINT64_C(0x736f6d6570736575), UINT64_C(0x646f72616e646f6d)};
static const uint64_t key2[2] = {1, 2};

typedef struct text {
    char *p;
    size_t len, cap;
} text;

static void put(text *t, const void *p, size_t n)
{
    if (t->len + n > t->cap) {
        t->cap = (t->len + n) * 2;
        t->p = realloc(t->p, t->cap);
        CHECK(t->p);
    }
    memcpy(t->p + t->len, p, n);
    t->len += n;
}

/* Checks a key of the table, and writes it quoted into the text. */
static int write_key(void *arg, const void *key, size_t len, int tier)
{
    text *t = arg;
    CHECK(len >= 1 && len <= SL_PLAN_KEY_MAX);
    CHECK(tier >= 0 && tier < 4);
    put(t, "\"", 1);
    for (size_t i = 0; i < len; i++) {
        char c = ((const char *)key)[i];
        if (c == '"' || c == '\\')
            put(t, "\\", 1);
        put(t, &c, 1);
    }
    put(t, "\": ", 3);
    put(t, tiers[tier], strlen(tiers[tier]));
    put(t, "\n", 1);
    return 0;
}

typedef struct pair {
    const sl_plans *other;
} pair;

static int same_tier(void *arg, const void *key, size_t len, int tier)
{
    const pair *p = arg;
    return sl_plans_lookup(p->other, key, len) == tier ? 0 : 1;
}

/* Sets a key of the table into a build on another tier, then on its own:
 * the last set is the one kept. */
static int build_key(void *arg, const void *key, size_t len, int tier)
{
    sl_plans_build *b = arg;
    CHECK(sl_plans_build_set(b, key, len, (unsigned)((tier + 1) % 4)) == 0);
    CHECK(sl_plans_build_set(b, key, len, (unsigned)tier) == 0);
    return 0;
}

static void check_same(const sl_plans *a, const sl_plans *b)
{
    CHECK(sl_plans_count(a) == sl_plans_count(b));
    pair p = {b};
    CHECK(sl_plans_each(a, same_tier, &p) == 0);
    p.other = a;
    CHECK(sl_plans_each(b, same_tier, &p) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *in = copy_of(data, size);
    char err[512], err2[512];
    sl_plans *p = (sl_plans *)1;
    int rc = sl_plans_parse(in, size, "fuzz.plans", tiers, 4, key1, &p, err, sizeof err);
    if (rc != 0) {
        CHECK(rc == -1 && p == NULL && strncmp(err, "fuzz.plans:", 11) == 0);
    } else {
        size_t lines = 1;
        for (size_t i = 0; i < size; i++)
            lines += in[i] == '\n';
        CHECK(sl_plans_count(p) <= lines);
        CHECK(sl_plans_bytes(p) >= sl_plans_count(p) * 3);
        text t = {0};
        CHECK(sl_plans_each(p, write_key, &t) == 0);
        /* The keys found where they are. */
        pair self = {p};
        CHECK(sl_plans_each(p, same_tier, &self) == 0);
        sl_plans *q = NULL;
        CHECK(sl_plans_parse(t.p ? t.p : "", t.len, "again", tiers, 4, key2, &q, err2,
                             sizeof err2) == 0);
        check_same(p, q);
        sl_plans_free(q);
        free(t.p);
        sl_plans_build *b = sl_plans_build_new(key2);
        CHECK(b);
        CHECK(sl_plans_each(p, build_key, b) == 0);
        sl_plans *built = sl_plans_build_finish(b);
        CHECK(built);
        check_same(p, built);
        sl_plans_free(built);
    }

    if (!memchr(in, '\r', size)) {
        text crlf = {0};
        for (size_t i = 0; i < size; i++)
            put(&crlf, in[i] == '\n' ? "\r\n" : &in[i], in[i] == '\n' ? 2 : 1);
        sl_plans *q = (sl_plans *)1;
        int rc2 = sl_plans_parse(crlf.p ? crlf.p : "", crlf.len, "fuzz.plans", tiers, 4, key2, &q,
                                 err2, sizeof err2);
        CHECK(rc2 == rc);
        if (rc == 0) {
            check_same(p, q);
            sl_plans_free(q);
        } else {
            CHECK(strcmp(err, err2) == 0);
        }
        free(crlf.p);
    }
    if (rc == 0)
        sl_plans_free(p);
    free(in);
    return 0;
}
