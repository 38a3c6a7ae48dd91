/*
 * reset_day in /v1/check (src/proto/check_json.c): in the query string and
 * the JSON body, through sluiced's limit cache (sl_limit_cached) and
 * without it, and refused naming the field where it means nothing.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "proto/http.h"
#include "testlib.h"

static int cached_limit(void *ctx, sl_limit *out, sl_algorithm algorithm, int64_t limit,
                        int64_t period_ns, int64_t burst, int64_t months, int64_t reset_day,
                        int64_t utc_offset_ns)
{
    const sl_limit *l;
    int rc = sl_limit_cached(ctx, algorithm, limit, period_ns, burst, months, reset_day,
                             utc_offset_ns, &l);
    if (rc == SL_OK)
        *out = *l;
    return rc;
}

static int query(sl_http_check *c, const char *q)
{
    return sl_http_check_from_query(c, q, strlen(q));
}

static int json(sl_http_check *c, const char *b)
{
    return sl_http_check_from_json(c, b, strlen(b));
}

Test(http_check_reset_day, in_the_query_and_the_body_with_and_without_the_cache)
{
    sl_limit_cache *cache = calloc(1, sizeof *cache);
    cache->clock_offset_ns = 1000 * NS_PER_SEC;
    for (int cached = 0; cached < 2; cached++) {
        sl_http_check *c = calloc(1, sizeof *c);
        if (cached) {
            c->make_limit = cached_limit;
            c->make_limit_ctx = cache;
        }
        int64_t clock = cached ? 1000 * NS_PER_SEC : 0;
        cr_assert_eq(query(c, "key=k&limit=5&period=1mo&algorithm=fixed_window&reset_day=15"), 0,
                     "%s", c->errstr);
        cr_assert_eq(c->items[0].limit.reset_day, 15);
        cr_assert_eq(c->items[0].limit.local_offset_ns, clock);
        cr_assert_eq(query(c, "key=k&limit=5&period=1mo&algorithm=fixed_window"), 0);
        cr_assert_eq(c->items[0].limit.reset_day, 0, "another limit than the cache's last");
        cr_assert_eq(query(c, "key=k&limit=5&period=1mo&algorithm=fixed_window&reset_day=1"), 0);
        cr_assert_eq(c->items[0].limit.reset_day, 0, "day 1 is the first");
        cr_assert_eq(json(c, "{\"key\":\"a\",\"limit\":3,\"period\":\"3mo\",\"reset_day\":31,"
                             "\"algorithm\":\"sliding_window\",\"utc_offset\":\"-05:00\"}"),
                     0, "%s", c->errstr);
        cr_assert_eq(c->items[0].limit.reset_day, 31);
        cr_assert_eq(c->items[0].limit.months, 3);
        cr_assert_eq(c->items[0].limit.local_offset_ns, clock - 5 * 3600 * NS_PER_SEC);
        cr_assert_eq(json(c, "{\"limits\":[{\"key\":\"a\",\"limit\":3,\"period\":\"1mo\","
                             "\"algorithm\":\"fixed_window\",\"reset_day\":20},"
                             "{\"key\":\"b\",\"limit\":3,\"period\":\"1mo\","
                             "\"algorithm\":\"fixed_window\"}]}"),
                     0, "%s", c->errstr);
        cr_assert(c->items[0].limit.reset_day == 20 && c->items[1].limit.reset_day == 0);
        free(c);
    }
    free(cache);
}

Test(http_check_reset_day, refused_naming_the_field)
{
    static const struct {
        bool is_json;
        const char *in, *err, *field;
    } bad[] = {
        {false, "key=k&limit=5&period=1mo&algorithm=fixed_window&reset_day=0",
         "reset_day must be a day of the month, 1 to 31", "reset_day"},
        {false, "key=k&limit=5&period=1mo&algorithm=fixed_window&reset_day=32",
         "reset_day must be a day of the month, 1 to 31", "reset_day"},
        {false, "key=k&limit=5&period=1mo&algorithm=fixed_window&reset_day=x",
         "reset_day must be an integer", "reset_day"},
        {false, "key=k&limit=5&period=1mo&algorithm=fixed_window&reset_day=2&reset_day=3",
         "reset_day is given twice", "reset_day"},
        {false, "key=k&limit=5&period=30d&algorithm=fixed_window&reset_day=15",
         "reset_day is the day of the month windows of months begin on: give a period of "
         "months such as 1mo",
         "reset_day"},
        {false, "key=k&limit=5&period=1mo&reset_day=15",
         "reset_day needs algorithm fixed_window or sliding_window: gcra meters a rate",
         "reset_day"},
        {false, "key=k&policy=bill&reset_day=15", "policy cannot be combined with reset_day",
         "reset_day"},
        {true, "{\"key\":\"a\",\"limit\":3,\"period\":\"1mo\",\"algorithm\":\"fixed_window\","
               "\"reset_day\":\"15\"}",
         "reset_day must be an integer", "reset_day"},
        {true, "{\"limits\":[{\"key\":\"a\",\"limit\":3,\"period\":60,"
               "\"algorithm\":\"fixed_window\",\"reset_day\":15}]}",
         "reset_day is the day of the month", "limits[0].reset_day"},
    };
    sl_http_check *c = calloc(1, sizeof *c);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = bad[i].is_json ? json(c, bad[i].in) : query(c, bad[i].in);
        cr_assert_eq(rc, -1, "%s", bad[i].in);
        cr_assert(strstr(c->errstr, bad[i].err), "%s: %s", bad[i].in, c->errstr);
        cr_assert_str_eq(c->field, bad[i].field, "%s", bad[i].in);
        cr_assert_eq(c->status, 400);
    }
    free(c);
}
