/*
 * test_client_headers.c: sl_rl_parse over every case of the shared table
 * (tests/vectors/ratelimit_headers.json, section "headers", read with
 * cJSON: the same file the Python client's tests read), then what the
 * table does not cover: odd whitespace, garbage, texts too long for their
 * buffers, values too long, every kind of structured item, the three date
 * forms at their edges, and what `ignored` and the error texts say.
 */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice_client.h"

#define NOW_MS INT64_C(1796126400000) /* Tue, 01 Dec 2026 12:00:00 GMT */

/* ---- the shared vectors ---- */

static cJSON *load_vectors(void)
{
    FILE *f = fopen(SLUICE_VECTORS "/ratelimit_headers.json", "rb");
    cr_assert(f != NULL, "cannot open %s", SLUICE_VECTORS "/ratelimit_headers.json");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    cr_assert(fread(text, 1, (size_t)n, f) == (size_t)n);
    text[n] = '\0';
    fclose(f);
    cJSON *root = cJSON_Parse(text);
    free(text);
    cr_assert(root != NULL, "the vectors are not JSON");
    return root;
}

/* A JSON integer (cJSON keeps numbers as doubles: exact below 2^53, which
 * every value of the table is but 2^63 - 1, which a double rounds to 2^63
 * and is read back as itself) or null. */
static bool json_int(const cJSON *v, int64_t *out)
{
    if (v == NULL || cJSON_IsNull(v))
        return false;
    cr_assert(cJSON_IsNumber(v));
    if (v->valuedouble == 9223372036854775808.0) {
        *out = INT64_MAX;
        return true;
    }
    *out = (int64_t)v->valuedouble;
    cr_assert((double)*out == v->valuedouble);
    return true;
}

static void expect_opt_int(const char *c, const char *what, bool has, int64_t got,
                           const cJSON *want)
{
    int64_t w;
    if (json_int(want, &w)) {
        cr_expect(has, "%s: %s absent, want %lld", c, what, (long long)w);
        cr_expect(!has || got == w, "%s: %s %lld, want %lld", c, what, (long long)got,
                  (long long)w);
    } else {
        cr_expect(!has, "%s: %s %lld, want null", c, what, (long long)got);
    }
}

static void expect_opt_text(const char *c, const char *what, bool has, const char *got,
                            size_t got_len, const cJSON *want)
{
    if (want == NULL || cJSON_IsNull(want)) {
        cr_expect(!has, "%s: %s '%s', want null", c, what, got);
        return;
    }
    cr_assert(cJSON_IsString(want));
    cr_expect(has, "%s: %s absent, want '%s'", c, what, want->valuestring);
    cr_expect(got_len == strlen(want->valuestring) && strcmp(got, want->valuestring) == 0,
              "%s: %s '%s', want '%s'", c, what, got, want->valuestring);
    cr_expect(strlen(got) == got_len, "%s: %s is not NUL-terminated at its length", c, what);
}

static void check_case(const cJSON *tc)
{
    const char *name = cJSON_GetObjectItem(tc, "name")->valuestring;
    int64_t now_ms;
    cr_assert(json_int(cJSON_GetObjectItem(tc, "now_ms"), &now_ms));
    const cJSON *hs = cJSON_GetObjectItem(tc, "headers");
    size_t n = (size_t)cJSON_GetArraySize(hs);
    sl_header_line *lines = calloc(n ? n : 1, sizeof *lines);
    char **copies = calloc(2 * (n ? n : 1), sizeof *copies);
    for (size_t i = 0; i < n; i++) {
        const cJSON *h = cJSON_GetArrayItem(hs, (int)i);
        const char *k = cJSON_GetArrayItem(h, 0)->valuestring;
        const char *v = cJSON_GetArrayItem(h, 1)->valuestring;
        /* exact-size copies, not NUL-terminated: a read past the end shows */
        copies[2 * i] = malloc(strlen(k) + 1);
        copies[2 * i + 1] = malloc(strlen(v) + 1);
        memcpy(copies[2 * i], k, strlen(k));
        memcpy(copies[2 * i + 1], v, strlen(v));
        lines[i] = (sl_header_line){copies[2 * i], strlen(k), copies[2 * i + 1], strlen(v)};
    }
    sl_rl_headers *got = malloc(sizeof *got);
    memset(got, 0xa5, sizeof *got); /* every field must be written */
    sl_rl_parse(lines, n, now_ms, got);

    const cJSON *want = cJSON_GetObjectItem(tc, "expect");
    const cJSON *wp = cJSON_GetObjectItem(want, "policies");
    cr_expect_eq(got->policy_count, (size_t)cJSON_GetArraySize(wp), "%s: %zu policies, want %d",
                 name, got->policy_count, cJSON_GetArraySize(wp));
    for (size_t i = 0; i < got->policy_count && i < (size_t)cJSON_GetArraySize(wp); i++) {
        const sl_rl_policy *p = &got->policies[i];
        const cJSON *w = cJSON_GetArrayItem(wp, (int)i);
        expect_opt_text(name, "policy name", p->has_name, p->name, p->name_len,
                        cJSON_GetObjectItem(w, "name"));
        int64_t q;
        cr_assert(json_int(cJSON_GetObjectItem(w, "quota"), &q));
        cr_expect_eq(p->quota, q, "%s: quota %lld, want %lld", name, (long long)p->quota,
                     (long long)q);
        expect_opt_int(name, "window", p->has_window, p->window_s, cJSON_GetObjectItem(w, "window"));
        expect_opt_text(name, "unit", p->has_unit, p->unit, p->unit_len,
                        cJSON_GetObjectItem(w, "unit"));
        expect_opt_text(name, "policy partition", p->has_partition, p->partition,
                        p->partition_len, cJSON_GetObjectItem(w, "partition"));
    }
    const cJSON *wl = cJSON_GetObjectItem(want, "limits");
    cr_expect_eq(got->limit_count, (size_t)cJSON_GetArraySize(wl), "%s: %zu limits, want %d",
                 name, got->limit_count, cJSON_GetArraySize(wl));
    for (size_t i = 0; i < got->limit_count && i < (size_t)cJSON_GetArraySize(wl); i++) {
        const sl_rl_limit *l = &got->limits[i];
        const cJSON *w = cJSON_GetArrayItem(wl, (int)i);
        expect_opt_text(name, "limit name", true, l->name, l->name_len,
                        cJSON_GetObjectItem(w, "name"));
        int64_t r;
        cr_assert(json_int(cJSON_GetObjectItem(w, "remaining"), &r));
        cr_expect_eq(l->remaining, r, "%s: remaining %lld, want %lld", name,
                     (long long)l->remaining, (long long)r);
        expect_opt_int(name, "reset_ms", l->has_reset, l->reset_ms,
                       cJSON_GetObjectItem(w, "reset_ms"));
        expect_opt_text(name, "limit partition", l->has_partition, l->partition,
                        l->partition_len, cJSON_GetObjectItem(w, "partition"));
    }
    const cJSON *wx = cJSON_GetObjectItem(want, "x");
    if (cJSON_IsNull(wx)) {
        cr_expect(!got->has_x, "%s: X- fields read, want null", name);
    } else {
        cr_expect(got->has_x, "%s: no X- fields, want some", name);
        expect_opt_int(name, "x limit", got->has_x_limit, got->x_limit,
                       cJSON_GetObjectItem(wx, "limit"));
        expect_opt_int(name, "x remaining", got->has_x_remaining, got->x_remaining,
                       cJSON_GetObjectItem(wx, "remaining"));
        expect_opt_int(name, "x reset_ms", got->has_x_reset, got->x_reset_ms,
                       cJSON_GetObjectItem(wx, "reset_ms"));
    }
    expect_opt_int(name, "retry_after_ms", got->has_retry_after, got->retry_after_ms,
                   cJSON_GetObjectItem(want, "retry_after_ms"));

    free(got);
    for (size_t i = 0; i < 2 * n; i++)
        free(copies[i]);
    free(copies);
    free(lines);
}

Test(client_headers, every_shared_vector)
{
    cJSON *root = load_vectors();
    const cJSON *cases = cJSON_GetObjectItem(root, "headers");
    cr_assert(cJSON_IsArray(cases));
    int n = cJSON_GetArraySize(cases);
    cr_assert_geq(n, 40, "the table holds %d cases", n);
    for (int i = 0; i < n; i++)
        check_case(cJSON_GetArrayItem(cases, i));
    printf("client_headers: %d shared cases\n", n);
    cJSON_Delete(root);
}

/* ---- cases of our own ---- */

/* Parses lines given as "Name", "value" pairs (NULL-terminated) at NOW_MS. */
static sl_rl_headers *parse(const char *const *kv)
{
    sl_header_line lines[16];
    size_t n = 0;
    for (; kv[2 * n] != NULL; n++)
        lines[n] = (sl_header_line){kv[2 * n], strlen(kv[2 * n]), kv[2 * n + 1],
                                    strlen(kv[2 * n + 1])};
    sl_rl_headers *h = malloc(sizeof *h);
    sl_rl_parse(lines, n, NOW_MS, h);
    return h;
}

#define PARSE(...) parse((const char *const[]){__VA_ARGS__, NULL})

Test(client_headers, nothing_at_all)
{
    sl_rl_headers h;
    memset(&h, 0x5a, sizeof h);
    sl_rl_parse(NULL, 0, NOW_MS, &h);
    cr_assert_eq(h.policy_count, 0);
    cr_assert_eq(h.limit_count, 0);
    cr_assert(!h.has_x && !h.has_retry_after && h.ignored == 0);
    cr_assert(h.policy_error == NULL && h.limit_error == NULL);
}

Test(client_headers, odd_whitespace)
{
    sl_rl_headers *h = PARSE("RateLimit-Policy", "\t\"a\";q=1;w=2\t,\t \"b\";q=3 ;w=4 ",
                             "RateLimit", "  a;r=1;  t=2 ,b;r=3", "retry-after", "\t 7\t",
                             "X-RateLimit-Reset", " 1.5\t");
    /* "q=3 ;w=4": a space before ';' ends the member and is no separator */
    cr_assert_eq(h->policy_count, 0, "%zu", h->policy_count);
    cr_assert(h->ignored & SL_RL_IGNORED_POLICY);
    cr_assert_str_eq(h->policy_error, "expected ',' between members");
    /* "; t=2": spaces after ';' are allowed (RFC 9651 parameters) */
    cr_assert_eq(h->limit_count, 2);
    cr_assert(h->limits[0].has_reset && h->limits[0].reset_ms == 2000);
    cr_assert(h->has_retry_after && h->retry_after_ms == 7000);
    cr_assert(h->has_x_reset && h->x_reset_ms == 1500);
    free(h);

    /* a tab inside a parameter list is not allowed, around members it is */
    h = PARSE("RateLimit-Policy", "a;q=1;\tw=2");
    cr_assert_eq(h->policy_count, 0);
    free(h);
    h = PARSE("RateLimit-Policy", "a;q=1;w=2\t,\tb;q=2");
    cr_assert_eq(h->policy_count, 2);
    free(h);
}

Test(client_headers, garbage_is_left_out_and_named)
{
    const char *junk[] = {
        "\"unterminated", "a;q=1,,b;q=2", ",a;q=1", "a;Q=1", "a;q=1;", "a;q=1;w=", "(a b",
        "(a b)x", "a;q=:YWJj", "a;q=?2", "a;q=1.2345", "a;q=1.", "a;q=-", "\"\x01\"",
        "\"\\n\"", "%\"%zz\"", "%\"\xc3\"", "@1.5", "a b", "\xff", "a;q=1 x",
    };
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        sl_rl_headers *h = PARSE("RateLimit-Policy", junk[i], "RateLimit", junk[i]);
        cr_expect_eq(h->policy_count, 0, "'%s' gave %zu policies", junk[i], h->policy_count);
        cr_expect_eq(h->limit_count, 0, "'%s' gave %zu limits", junk[i], h->limit_count);
        cr_expect(h->ignored == (SL_RL_IGNORED_POLICY | SL_RL_IGNORED_RATELIMIT), "'%s': %x",
                  junk[i], h->ignored);
        cr_expect(h->policy_error != NULL && h->limit_error != NULL, "'%s'", junk[i]);
        free(h);
    }
    sl_rl_headers *h = PARSE("RateLimit-Policy", "a;q=1;w=1, b;q=\"x\"");
    cr_assert_eq(h->policy_count, 1);
    cr_assert_eq(h->policies_skipped, 1);
    cr_assert_eq(h->ignored, 0);
    free(h);
    h = PARSE("RateLimit-Policy", "a;q=\"1");
    cr_assert_str_eq(h->policy_error, "an unterminated string");
    free(h);
    h = PARSE("X-RateLimit-Limit", "x", "X-RateLimit-Remaining", "1e3", "X-RateLimit-Reset",
              "-1", "Retry-After", "Mon, 01 Dec 2026");
    cr_assert(h->has_x && !h->has_x_limit && !h->has_x_remaining && !h->has_x_reset);
    cr_assert_eq(h->ignored, SL_RL_IGNORED_X_LIMIT | SL_RL_IGNORED_X_REMAINING |
                                 SL_RL_IGNORED_X_RESET | SL_RL_IGNORED_RETRY_AFTER);
    free(h);
}

Test(client_headers, every_kind_of_item_parses)
{
    /* Items and parameters of every kind: the field is a List, and only the
     * members that are usable are kept. */
    sl_rl_headers *h = PARSE(
        "RateLimit-Policy",
        "1.5, -2, \"s\";q=1;w=1, *tok/en:x;q=2;w=1;x=?1;y=?0;z=@1700000000;d=-1.25, :aGk=:, ?1,"
        " @-5, %\"caf%c3%a9\", (1 \"two\";p=3 three);k, ();k=1, 7;w=2, x;q=3;w=1;u=%\"%e2%82%ac\"");
    cr_assert_eq(h->ignored, 0, "%s", h->policy_error);
    cr_assert_eq(h->policy_count, 4);
    /* "-2" is an integer item: the earlier drafts' quota, negative: skipped */
    cr_assert_str_eq(h->policies[0].name, "s");
    cr_assert_str_eq(h->policies[1].name, "*tok/en:x");
    cr_assert_eq(h->policies[1].quota, 2);
    cr_assert(!h->policies[2].has_name && h->policies[2].quota == 7 && h->policies[2].window_s == 2,
              "%d %lld", h->policies[2].has_name, (long long)h->policies[2].quota);
    cr_assert_str_eq(h->policies[3].name, "x");
    cr_assert_eq(h->policies_skipped, 8);
    free(h);
}

Test(client_headers, texts_too_long_for_their_buffers_skip_the_member)
{
    char name[SL_RL_NAME_MAX + 8], value[512];
    memset(name, 'n', sizeof name);
    name[SL_RL_NAME_MAX - 1] = '\0'; /* 63 bytes: fits */
    snprintf(value, sizeof value, "\"%s\";q=1;w=1, \"%sx\";q=2;w=1", name, name);
    sl_rl_headers *h = PARSE("RateLimit-Policy", value);
    cr_assert_eq(h->policy_count, 1);
    cr_assert_eq(h->policies[0].name_len, SL_RL_NAME_MAX - 1);
    cr_assert_eq(h->policies_skipped, 1);
    free(h);

    char pk[SL_RL_PARTITION_MAX + 1];
    memset(pk, 'A', sizeof pk);
    pk[SL_RL_PARTITION_MAX] = '\0'; /* 128 characters: one too many */
    snprintf(value, sizeof value, "a;r=1;pk=:%s:, b;r=2;pk=:%.*s:", pk, SL_RL_PARTITION_MAX - 1,
             pk);
    h = PARSE("RateLimit", value);
    cr_assert_eq(h->limit_count, 1);
    cr_assert_str_eq(h->limits[0].name, "b");
    cr_assert_eq(h->limits[0].partition_len, SL_RL_PARTITION_MAX - 1);
    free(h);

    h = PARSE("RateLimit-Policy", "a;q=1;qu=\"0123456789012345678901234567890\", "
                                  "b;q=1;qu=\"01234567890123456789012345678901\"");
    cr_assert_eq(h->policy_count, 1);
    cr_assert_eq(h->policies[0].unit_len, SL_RL_UNIT_MAX - 1);
    free(h);
}

Test(client_headers, a_value_over_4096_bytes_is_ignored_whole)
{
    /* 4096 bytes exactly is read; one more, joined from two lines, is not */
    static char a[SL_RL_FIELD_MAX + 1], b[8];
    memset(a, ' ', SL_RL_FIELD_MAX);
    memcpy(a, "a;r=5", 5);
    a[SL_RL_FIELD_MAX] = '\0';
    sl_rl_headers *h = PARSE("RateLimit", a);
    cr_assert_eq(h->limit_count, 1);
    free(h);
    a[SL_RL_FIELD_MAX - 2] = '\0'; /* 4094 + ", " + "b;r=1" = 4101 */
    strcpy(b, "b;r=1");
    h = PARSE("RateLimit", a, "ratelimit", b);
    cr_assert_eq(h->limit_count, 0);
    cr_assert(h->ignored & SL_RL_IGNORED_RATELIMIT);
    cr_assert_str_eq(h->limit_error, "longer than 4096 bytes");
    free(h);
}

Test(client_headers, an_empty_line_of_a_list_field_fails_the_join)
{
    /* "a;q=1;w=1, " after joining: a trailing comma (RFC 9651 joins field
     * lines before parsing, and so does every sluice client) */
    sl_rl_headers *h = PARSE("RateLimit-Policy", "a;q=1;w=1", "RateLimit-Policy", "");
    cr_assert_eq(h->policy_count, 0);
    cr_assert_str_eq(h->policy_error, "a trailing ','");
    free(h);
}

Test(client_headers, names_are_case_insensitive_and_exact)
{
    sl_rl_headers *h = PARSE("RATELIMIT-policy", "a;q=1;w=1", "RateLimit-Policies", "b;q=1;w=1",
                             "Retry-After ", "5", "X-RateLimit-Limit", "9");
    cr_assert_eq(h->policy_count, 1);
    cr_assert(!h->has_retry_after); /* "Retry-After " is another name */
    cr_assert(h->has_x_limit && h->x_limit == 9);
    free(h);
}

Test(client_headers, integers_at_64_bits)
{
    sl_rl_headers *h = PARSE("X-RateLimit-Limit", "-9223372036854775808", "X-RateLimit-Remaining",
                             "9223372036854775807");
    cr_assert(h->has_x_limit && h->x_limit == INT64_MIN);
    cr_assert(h->has_x_remaining && h->x_remaining == INT64_MAX);
    free(h);
    h = PARSE("X-RateLimit-Limit", "9223372036854775808", "X-RateLimit-Remaining",
              "-9223372036854775809");
    cr_assert(!h->has_x_limit && !h->has_x_remaining);
    free(h);
    /* 21 digits are too many even when the value is small */
    h = PARSE("X-RateLimit-Limit", "000000000000000000001x", "X-RateLimit-Remaining",
              "00000000000000000001");
    cr_assert(!h->has_x_limit);
    cr_assert(h->has_x_remaining && h->x_remaining == 1);
    free(h);
}

Test(client_headers, reset_and_retry_after_numbers)
{
    struct {
        const char *v;
        bool ok;
        int64_t reset_ms, retry_ms;
    } cases[] = {
        {"0", true, 0, 0},
        {"0.0001", true, 1, 1},
        {"1.000", true, 1000, 1000},
        {"1.0010", true, 1001, 1001},
        {"1.00100000001", true, 1002, 1002},
        {"999999999", true, 999999999000, 999999999000},
        {"1000000000", true, 0, 1000000000000}, /* an epoch in the past, or seconds */
        {"1796126400.001", true, 1, 1796126400001},
        {"1796126400000", true, 0, 1796126400000000},
        {"1796126400000.5", true, 1, 1796126400000500},
        {"9223372036854775807", true, INT64_MAX - NOW_MS, INT64_MAX},
        {"9223372036854775808", false, 0, 0},
        {"12345678901234567890", false, 0, 0},
        {"1.", false, 0, 0},
        {".5", false, 0, 0},
        {"1.2.3", false, 0, 0},
        {"+1", false, 0, 0},
        {"1 2", false, 0, 0},
        {"", false, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sl_rl_headers *h = PARSE("X-RateLimit-Reset", cases[i].v, "Retry-After", cases[i].v);
        cr_expect_eq(h->has_x_reset, cases[i].ok, "'%s'", cases[i].v);
        cr_expect_eq(h->has_retry_after, cases[i].ok, "'%s'", cases[i].v);
        if (cases[i].ok) {
            cr_expect_eq(h->x_reset_ms, cases[i].reset_ms, "'%s': reset %lld", cases[i].v,
                         (long long)h->x_reset_ms);
            cr_expect_eq(h->retry_after_ms, cases[i].retry_ms, "'%s': retry %lld", cases[i].v,
                         (long long)h->retry_after_ms);
        }
        free(h);
    }
}

Test(client_headers, http_dates_at_their_edges)
{
    struct {
        const char *v;
        int64_t ms; /* -1: refused */
    } cases[] = {
        {"Tue, 01 Dec 2026 12:00:00 GMT", 0},
        {"Wed, 02 Dec 2026 12:00:00 GMT", 86400000},
        {"Thu, 31 Dec 2026 23:59:60 GMT", (30 * 86400 + 12 * 3600) * INT64_C(1000)},
        {"Mon, 29 Feb 2027 00:00:00 GMT", -1}, /* 2027 is no leap year */
        {"Mon, 29 Feb 2028 00:00:00 GMT", (INT64_C(455) * 86400 - 12 * 3600) * 1000},
        {"Mon, 01 Dec 2026 24:00:00 GMT", -1},
        {"Mon, 01 Dec 2026 12:60:00 GMT", -1},
        {"Mon, 01 Dec 2026 12:00:61 GMT", -1},
        {"Mon, 00 Dec 2026 12:00:00 GMT", -1},
        {"Mon, 1 Dec 2026 12:00:00 GMT", -1},
        {"mon, 01 Dec 2026 12:00:00 GMT", -1},
        {"Mon, 01 dec 2026 12:00:00 GMT", -1},
        {"Mon, 01 Dec 2026 12:00:00 UTC", -1},
        {"Mon, 01 Dec 2026 12:00:00 GMT ", 0}, /* trailing space trimmed: Tue's date, any weekday */
        {"Mon,  01 Dec 2026 12:00:00 GMT", -1},
        {"Tuesday, 01-Dec-26 12:00:00 GMT", 0},
        {"Tuesday, 01-Dec-69 12:00:00 GMT", INT64_C(15706) * 86400 * 1000}, /* 43 years, 11 leap days */
        {"Tuesday, 01-Dec-70 12:00:00 GMT", 0},
        {"Tue, 01-Dec-26 12:00:00 GMT", -1},
        {"Tues, 01 Dec 2026 12:00:00 GMT", -1},
        {"Tue Dec  1 12:00:00 2026", 0},
        {"Tue Dec 01 12:00:00 2026", 0},
        {"Tue Dec 1 12:00:00 2026", -1},
        {"Tue Dec  1 12:00:00 2026 GMT", -1},
        {"Sun, 06 Nov 0000 08:49:37 GMT", 0},
        {"Sun, 06 Nov 9999 08:49:37 GMT", INT64_C(253397494177000) - NOW_MS}, /* date -d 9999-11-06T08:49:37Z +%s */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t ms = -7;
        int ok = sl_rl_parse_retry_after(cases[i].v, strlen(cases[i].v), NOW_MS, &ms);
        if (cases[i].ms < 0) {
            cr_expect_eq(ok, 0, "'%s' read as %lld", cases[i].v, (long long)ms);
        } else {
            cr_expect_eq(ok, 1, "'%s' refused", cases[i].v);
            cr_expect_eq(ms, cases[i].ms, "'%s': %lld ms, want %lld", cases[i].v, (long long)ms,
                         (long long)cases[i].ms);
        }
    }
}

Test(client_headers, at_most_sixteen_members_kept_and_the_rest_counted)
{
    char v[2048] = "";
    for (int i = 0; i < 40; i++)
        snprintf(v + strlen(v), sizeof v - strlen(v), "%s\"p%d\";r=%d", i ? ", " : "", i, i);
    sl_rl_headers *h = PARSE("RateLimit", v);
    cr_assert_eq(h->limit_count, SL_RL_MEMBERS_MAX);
    cr_assert_eq(h->limits_skipped, 40 - SL_RL_MEMBERS_MAX);
    cr_assert_str_eq(h->limits[15].name, "p15");
    free(h);
}

Test(client_headers, values_may_hold_any_byte)
{
    /* NULs and bytes above 0x7f in names and values never match and never
     * read past their slices. */
    char name[] = {'R', 'e', 't', 'r', 'y', '-', 'A', 'f', 't', 'e', 'r', '\0'};
    char value[] = {'5', '\0', '1'};
    sl_header_line lines[] = {
        {name, 12, "9", 1},
        {"Retry-After", 11, value, 3},
        {"RateLimit", 9, "\"a\0\";r=1", 8},
    };
    sl_rl_headers h;
    sl_rl_parse(lines, 3, NOW_MS, &h);
    cr_assert(!h.has_retry_after); /* "5\0" "1" is not a number */
    cr_assert(h.ignored & SL_RL_IGNORED_RETRY_AFTER);
    cr_assert_eq(h.limit_count, 0);
    cr_assert_str_eq(h.limit_error, "a string holds printable ASCII only");
}

Test(client_headers, retry_after_in_nanoseconds)
{
    sl_rl_headers *h = PARSE("Retry-After", "1.5");
    cr_assert_eq(sl_rl_retry_after_ns(h), INT64_C(1500000000));
    free(h);
    h = PARSE("Retry-After", "99999999999999999");
    cr_assert_eq(sl_rl_retry_after_ns(h), SL_TIME_MAX, "saturated");
    free(h);
    h = PARSE("Retry-After", "soon");
    cr_assert_eq(sl_rl_retry_after_ns(h), 0);
    free(h);
    cr_assert_eq(sl_rl_retry_after_ns(NULL), 0);
}
