/*
 * The allocator hook (common/alloc.h) in the layers above the store: the
 * config loader answers "out of memory" whichever of its allocations fails,
 * and leaks nothing (LeakSanitizer is asked, in the ASan build); a RESP
 * output buffer whose growth fails keeps what it had and fails stickily.
 * The store's own allocation failures are tested in test_store.c.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "policy/config.h"
#include "proto/resp.h"
#include "testlib.h"

/* Two settings, three policies (one with tiers and a global limit): every
 * kind of allocation the loader makes, several times. */
static const char small_config[] = "server:\n"
                                   "  port: 7000\n"
                                   "  max_memory: 64m\n"
                                   "policies:\n"
                                   "  api:\n"
                                   "    algorithm: token_bucket\n"
                                   "    limit: 100\n"
                                   "    period: 1m\n"
                                   "    tiers:\n"
                                   "      free: {limit: 10, period: 60}\n"
                                   "      paid: {limit: 1000, period: 1m}\n"
                                   "    global: {limit: 50000, period: 1m}\n"
                                   "  login:\n"
                                   "    limit: 5\n"
                                   "    period: 15m\n"
                                   "  search: {limit: 20, period: 1s}\n";

Test(alloc_fail, config_load_fails_cleanly_at_every_allocation)
{
    char path[] = "/tmp/sl_alloc_cfg_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, small_config, sizeof small_config - 1),
                 (ssize_t)(sizeof small_config - 1));
    close(fd);
    char err[256];
    long failed = 0, ok_at = 0;
    for (long nth = 1; nth <= 500 && !ok_at; nth++) {
        sl_config *c = (sl_config *)1;
        sl_alloc_fail_nth(nth);
        int rc = sl_config_load(path, &c, err, sizeof err);
        sl_alloc_fail_nth(0);
        if (rc == 0) {
            /* The nth allocation was never reached: the load made fewer,
             * and so does every later nth. */
            cr_assert_not_null(c);
            cr_assert_eq(c->npolicies, 3);
            cr_assert_eq(c->nsettings, 2);
            sl_config_free(c);
            ok_at = nth;
            continue;
        }
        cr_assert_eq(rc, -1);
        cr_assert_null(c, "a failed load hands nothing back (allocation %ld)", nth);
        cr_assert(strstr(err, "out of memory") != NULL, "allocation %ld: %s", nth, err);
        cr_assert(strncmp(err, path, strlen(path)) == 0, "the error names the file: %s", err);
        failed++;
    }
    unlink(path);
    cr_log_info("config load: %ld allocations, each failed once", failed);
    cr_assert_gt(ok_at, 0, "the load succeeds once the hook is past its allocations");
    /* The buffer, the config, the policies, the settings' array and two
     * strings per setting, and one sort array per mapping of two keys or
     * more: at least 12 allocations, each of which failed once above. */
    cr_expect_geq(failed, 12, "the hook reached the loader's allocations (%ld)", failed);
    test_assert_no_leak();
}

Test(alloc_fail, config_parse_fails_cleanly_at_every_allocation)
{
    char err[256];
    long failed = 0;
    for (long nth = 1; nth <= 500; nth++) {
        sl_config *c = (sl_config *)1;
        sl_alloc_fail_nth(nth);
        int rc = sl_config_parse(small_config, sizeof small_config - 1, "t.yaml", &c, err,
                                 sizeof err);
        sl_alloc_fail_nth(0);
        if (rc == 0) {
            sl_config_free(c);
            break;
        }
        cr_assert_null(c);
        cr_assert_str_eq(err, "t.yaml: out of memory", "allocation %ld", nth);
        failed++;
    }
    cr_expect_geq(failed, 11, "the hook reached the parser's allocations (%ld)", failed);
    test_assert_no_leak();
}

Test(alloc_fail, resp_buffer_growth_fails_stickily)
{
    sl_buf b;
    sl_buf_init(&b, 2, 0);
    char big[200];
    memset(big, 'x', sizeof big);
    /* The first add allocates 256 bytes; the second needs 512 and fails. */
    sl_alloc_fail_nth(2);
    cr_assert_eq(sl_resp_add_simple(&b, big, sizeof big), 0);
    size_t len = b.len;
    cr_assert_eq(sl_resp_add_simple(&b, big, sizeof big), -1);
    sl_alloc_fail_nth(0);
    cr_assert(b.failed);
    cr_assert_eq(b.len, len, "what was written before the failure stays");
    cr_assert_eq(memcmp(b.data, "+xxx", 4), 0);
    /* Sticky: the allocator works again, the buffer still refuses. */
    cr_assert_eq(sl_resp_add_int(&b, 1), -1);
    sl_buf_clear(&b);
    cr_assert_eq(sl_resp_add_simple(&b, big, sizeof big), 0);
    cr_assert_eq(sl_resp_add_simple(&b, big, sizeof big), 0);
    sl_buf_free(&b);
    test_assert_no_leak();
}
