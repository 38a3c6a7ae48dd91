/*
 * Reset days in the command layer (src/cmd), over a real store on a
 * virtual clock that reads Unix time: SL.TAKE's RESETDAY, the limit cache
 * keyed on the day, SL.DECIDE's flags carrying it, and SL.USAGE of a
 * policy with one. Every reset_after is where the billing cycle ends.
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "algo/calendar.h"
#include "cmd/cmd.h"
#include "policy/config.h"
#include "testlib.h"

#define NS_PER_DAY (86400 * NS_PER_SEC)

static struct {
    sl_store *store;
    int64_t now;
    sl_buf out;
    sl_limit_cache cache;
    uint64_t key[2];
    sl_config *config;
    sl_backend *be;
    sl_backend_worker *bw;
} H;

static int64_t utc(int64_t y, int m, int d)
{
    return sl_days_from_civil(y, m, d) * NS_PER_DAY;
}

static void setup(void)
{
    memset(&H, 0, sizeof H);
    cr_assert_eq(sl_store_new(NULL, &H.store), SL_OK);
    const char *err;
    cr_assert_not_null(H.be = sl_backend_memory(H.store));
    cr_assert_not_null(H.bw = H.be->ops->attach(H.be, NULL, &H.now, &err));
    sl_buf_init(&H.out, 2, 0);
    H.now = utc(2024, 2, 3); /* a Saturday in a leap February, 00:00 UTC */
    H.key[0] = 1;
    H.key[1] = 2;
}

static void teardown(void)
{
    sl_config_free(H.config);
    H.be->ops->detach(H.bw);
    H.be->ops->free(H.be);
    sl_store_free(H.store);
    sl_buf_free(&H.out);
}

/* Runs a space-separated command; returns the reply as RESP text. */
static const char *run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *run(const char *fmt, ...)
{
    static char copy[2048], reply[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(copy, sizeof copy, fmt, ap);
    va_end(ap);
    sl_resp_slice argv[64];
    int argc = 0;
    for (char *tok = strtok(copy, " "); tok && argc < 64; tok = strtok(NULL, " "))
        argv[argc++] = (sl_resp_slice){tok, strlen(tok)};
    sl_cmd_ctx c = {.reply = &sl_resp_reply_sink,
                    .sink = &H.out,
                    .be = H.be,
                    .bw = H.bw,
                    .lease_key = H.key,
                    .limit_cache = &H.cache,
                    .config = H.config};
    sl_buf_clear(&H.out);
    const sl_command *cmd = sl_command_find(sl_rate_commands, argv[0].ptr, argv[0].len);
    cr_assert_not_null(cmd, "%s", copy);
    sl_command_call(cmd, &c, argc, argv);
    snprintf(reply, sizeof reply, "%.*s", (int)H.out.len, H.out.data);
    return reply;
}

/* The integer after the first `name` in a RESP reply. */
static int64_t field(const char *reply, const char *name)
{
    char pat[64];
    snprintf(pat, sizeof pat, "%s\r\n:", name);
    const char *at = strstr(reply, pat);
    cr_assert_not_null(at, "no %s in %s", name, reply);
    return strtoll(at + strlen(pat), NULL, 10);
}

#define MS(ns) (((ns) + NS_PER_MS - 1) / NS_PER_MS)

TestSuite(cmd_reset_day, .init = setup, .fini = teardown);

Test(cmd_reset_day, take_and_peek_reset_on_the_day)
{
    const char *r = run("SL.TAKE a 3 1mo ALGORITHM fixed_window RESETDAY 15");
    cr_assert_eq(field(r, "allowed"), 1, "%s", r);
    cr_assert_eq(field(r, "reset_after_ms"), MS(utc(2024, 2, 15) - H.now));
    /* the 31st: February's last day, the 29th in 2024 */
    r = run("SL.TAKE b 3 1mo ALGORITHM fixed_window RESETDAY 31");
    cr_assert_eq(field(r, "reset_after_ms"), MS(utc(2024, 2, 29) - H.now));
    /* -05:00: the 15th begins at 05:00 UTC */
    r = run("SL.TAKE c 3 1mo ALGORITHM sliding_window RESETDAY 15 UTCOFFSET -05:00");
    cr_assert_eq(field(r, "reset_after_ms"),
                 MS(utc(2024, 3, 15) + 5 * 3600 * NS_PER_SEC - H.now), "%s", r);
    /* quarters from the 10th (of January, April, July and October) */
    r = run("SL.TAKE d 3 3mo ALGORITHM fixed_window RESETDAY 10");
    cr_assert_eq(field(r, "reset_after_ms"), MS(utc(2024, 4, 10) - H.now));
    r = run("SL.PEEK a 3 1mo ALGORITHM fixed_window RESETDAY 15 COST 0");
    cr_assert_eq(field(r, "remaining"), 2);
    cr_assert_eq(field(r, "reset_after_ms"), MS(utc(2024, 2, 15) - H.now));
    /* SL.TAKEMANY: each LIMIT its own day */
    r = run("SL.TAKEMANY 2 e f LIMIT 3 1mo ALGORITHM fixed_window RESETDAY 20 "
            "LIMIT 3 1mo ALGORITHM fixed_window");
    const char *second = strstr(strstr(r, "reset_after_ms") + 1, "reset_after_ms");
    cr_assert_eq(field(r, "reset_after_ms"), MS(utc(2024, 2, 20) - H.now), "%s", r);
    cr_assert_eq(field(second, "reset_after_ms"), MS(utc(2024, 3, 1) - H.now), "%s", r);
    /* the day passes: a new count */
    run("SL.TAKE a 3 1mo ALGORITHM fixed_window RESETDAY 15 COST 2");
    cr_assert_eq(field(run("SL.TAKE a 3 1mo ALGORITHM fixed_window RESETDAY 15"), "allowed"), 0);
    H.now = utc(2024, 2, 15) - 1;
    cr_assert_eq(field(run("SL.TAKE a 3 1mo ALGORITHM fixed_window RESETDAY 15"), "allowed"), 0);
    H.now = utc(2024, 2, 15);
    r = run("SL.TAKE a 3 1mo ALGORITHM fixed_window RESETDAY 15");
    cr_assert(field(r, "allowed") == 1 && field(r, "remaining") == 2, "%s", r);
    cr_assert_eq(field(r, "reset_after_ms"), MS(utc(2024, 3, 15) - H.now));
}

Test(cmd_reset_day, the_limit_cache_keys_on_the_day)
{
    /* The same numbers on three days are three limits, one after the other
     * through the one cache; day 1 is the same limit as no day. */
    for (int round = 0; round < 3; round++) {
        const char *r = run("SL.PEEK k 5 1mo ALGORITHM fixed_window RESETDAY 15 COST 1");
        cr_assert_eq(field(r, "reset_after_ms"), MS(utc(2024, 2, 15) - H.now), "%s", r);
        r = run("SL.PEEK k 5 1mo ALGORITHM fixed_window RESETDAY 5 COST 1");
        cr_assert_eq(field(r, "reset_after_ms"), MS(utc(2024, 2, 5) - H.now), "%s", r);
        r = run("SL.PEEK k 5 1mo ALGORITHM fixed_window COST 1");
        cr_assert_eq(field(r, "reset_after_ms"), MS(utc(2024, 3, 1) - H.now), "%s", r);
        r = run("SL.PEEK k 5 1mo ALGORITHM fixed_window RESETDAY 1 COST 1");
        cr_assert_eq(field(r, "reset_after_ms"), MS(utc(2024, 3, 1) - H.now), "%s", r);
    }
}

Test(cmd_reset_day, bad_reset_days_are_refused)
{
    static const struct {
        const char *cmd, *reply;
    } cases[] = {
        {"SL.TAKE k 5 1mo ALGORITHM fixed_window RESETDAY 0",
         "-ERR RESETDAY must be a day of the month, 1 to 31 (got '0')\r\n"},
        {"SL.TAKE k 5 1mo ALGORITHM fixed_window RESETDAY 32",
         "-ERR RESETDAY must be a day of the month, 1 to 31 (got '32')\r\n"},
        {"SL.TAKE k 5 1mo ALGORITHM fixed_window RESETDAY mid",
         "-ERR RESETDAY must be a day of the month, 1 to 31 (got 'mid')\r\n"},
        {"SL.TAKE k 5 1mo ALGORITHM fixed_window RESETDAY",
         "-ERR syntax error: option 'RESETDAY' needs a value\r\n"},
        {"SL.TAKE k 5 1mo ALGORITHM fixed_window RESETDAY 3 RESETDAY 4",
         "-ERR syntax error: option 'RESETDAY' is given twice\r\n"},
        {"SL.TAKE k 5 30d ALGORITHM fixed_window RESETDAY 15",
         "-ERR RESETDAY is the day of the month windows of months begin on: give a period of "
         "months such as 1mo\r\n"},
        {"SL.PEEK k 5 1mo RESETDAY 15",
         "-ERR RESETDAY needs ALGORITHM fixed_window or sliding_window: gcra meters a rate and "
         "has no windows to reset\r\n"},
        {"SL.TAKEMANY 1 k LIMIT 5 1d ALGORITHM sliding_window RESETDAY 2",
         "-ERR RESETDAY is the day of the month windows of months begin on: give a period of "
         "months such as 1mo\r\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        cr_assert_str_eq(run("%s", cases[i].cmd), cases[i].reply, "%s", cases[i].cmd);
    cr_assert_str_eq(run("SL.RESET k"), ":0\r\n", "nothing was stored");
}

/* SL.DECIDE: flags = carried + 256 * reset day. Durations in ns, exact. */
Test(cmd_reset_day, decide_carries_the_day_in_its_flags)
{
    int64_t p = SL_MONTH_NS;
    char want[128];
    const char *r = run("SL.DECIDE TAKE 0 1 b fixed_window 3 %lld 0 1 1 0 %d", (long long)p, 15 << 8 | 1);
    snprintf(want, sizeof want, "*7\r\n:-1\r\n:1\r\n:3\r\n:2\r\n:0\r\n:%lld\r\n:0\r\n",
             (long long)(utc(2024, 2, 15) - H.now));
    cr_assert_str_eq(r, want, "a carried limit of months from the 15th");
    /* the same key under day 0 is another window grid: [Feb 1, Mar 1) */
    r = run("SL.DECIDE PEEK 0 1 c fixed_window 3 %lld 0 0 1 0 0", (long long)p);
    snprintf(want, sizeof want, "*7\r\n:-1\r\n:1\r\n:3\r\n:3\r\n:0\r\n:0\r\n:0\r\n");
    cr_assert_str_eq(r, want);
    r = run("SL.DECIDE TAKE 0 1 c fixed_window 3 %lld 0 1 1 0 256", (long long)p);
    snprintf(want, sizeof want, "*7\r\n:-1\r\n:1\r\n:3\r\n:2\r\n:0\r\n:%lld\r\n:0\r\n",
             (long long)(utc(2024, 3, 1) - H.now));
    cr_assert_str_eq(r, want, "day 1 is the first");

    const char *range = "-ERR syntax error: a group's months, offset and flags are out of range\r\n";
    cr_assert_str_eq(run("SL.DECIDE TAKE 0 1 d fixed_window 3 %lld 0 1 1 0 %d", (long long)p,
                         32 << 8),
                     range);
    cr_assert_str_eq(run("SL.DECIDE TAKE 0 1 d fixed_window 3 %lld 0 1 1 0 2", (long long)p), range);
    cr_assert_str_eq(run("SL.DECIDE TAKE 0 1 d fixed_window 3 %lld 0 1 1 0 -256", (long long)p),
                     range);
    cr_assert_str_eq(run("SL.DECIDE TAKE 0 1 d cell 4 5 60 1 0 0 %d", 15 << 8), range);
    /* a day for a period that is not months */
    cr_assert_str_eq(run("SL.DECIDE TAKE 0 1 d fixed_window 3 60000000000 0 1 0 0 %d", 15 << 8),
                     "-ERR period must be positive and at most 73 years\r\n");
    cr_assert_str_eq(run("SL.RESET d"), ":0\r\n", "nothing was stored");
}

Test(cmd_reset_day, usage_answers_the_cycle)
{
    static const char yaml[] = "policies:\n"
                               "  bill:\n"
                               "    algorithm: fixed_window\n"
                               "    limits:\n"
                               "      - {name: monthly, limit: 1000, period: 1mo, reset_day: 15}\n"
                               "      - {name: daily, limit: 100, period: 1d}\n";
    char err[256];
    cr_assert_eq(sl_config_parse(yaml, sizeof yaml - 1, "t.yaml", &H.config, err, sizeof err), 0,
                 "%s", err);
    H.now = utc(2024, 2, 3) + 3600 * NS_PER_SEC;
    const char *r = run("SL.POLICY bill alice COST 7");
    cr_assert_eq(field(r, "allowed"), 1, "%s", r);
    r = run("SL.USAGE alice POLICY bill");
    const char *monthly = strstr(r, "monthly");
    cr_assert_not_null(monthly, "%s", r);
    cr_assert_eq(field(monthly, "remaining"), 993, "%s", r);
    cr_assert_eq(field(monthly, "reset_after_ms"), MS(utc(2024, 2, 15) - H.now), "%s", r);
}
