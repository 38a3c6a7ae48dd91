/*
 * fuzz_check_json.c: libFuzzer target for the /v1/check decoder
 * (src/proto/check_json.c) on arbitrary bytes.
 *
 * The first input byte picks the source: even, the bytes are a JSON body;
 * odd, a query string (of /v1/check, or with bit 1 set of forward-auth, the
 * bytes before the first '/' being the key header). Besides the sanitizers' checks, CHECK() aborts when a
 * guarantee of http.h breaks: on success every item is valid and its key lies
 * in the check's own buffer; on failure a status of 400 or 413 and a message;
 * either way, the response the server would send (a decision, or the error)
 * is written and its body must be a JSON object that cJSON reads back.
 *
 * Build and run: make fuzz (FUZZ_SECONDS=N to change the time per target).
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proto/http.h"

static sl_http_check check;

/* The body after the head of a response in b, checked to be a JSON object. */
static void check_body_json(const sl_buf *b)
{
    const char *end = NULL;
    for (size_t i = 0; i + 3 < b->len; i++)
        if (!memcmp(b->data + i, "\r\n\r\n", 4)) {
            end = b->data + i + 4;
            break;
        }
    CHECK(end);
    cJSON *j = cJSON_ParseWithLength(end, b->len - (size_t)(end - b->data));
    CHECK(j && cJSON_IsObject(j));
    cJSON_Delete(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    bool query = data[0] & 1;
    size_t n = size - 1;
    char *copy = malloc(n ? n : 1); /* exact size: ASan sees a read past the end */
    CHECK(copy);
    if (n)
        memcpy(copy, data + 1, n);

    /* Bit 1 with a query: forward-auth, the first bytes (up to a '/') the key. */
    int rc;
    if (query && (data[0] & 2)) {
        const char *slash = memchr(copy, '/', n);
        size_t kl = slash ? (size_t)(slash - copy) : 0, qoff = slash ? kl + 1 : 0;
        rc = sl_http_check_auth(&check, "api", 3, copy, kl, "X-Api-Key", copy + qoff, n - qoff);
        if (rc < 0)
            CHECK(check.status != 401 || kl == 0);
    } else {
        rc = query ? sl_http_check_from_query(&check, copy, n)
                   : sl_http_check_from_json(&check, copy, n);
    }
    /* The check owns its strings: scribble over the input first. */
    memset(copy, 0x5a, n);
    free(copy);

    sl_buf b;
    sl_buf_init(&b, 2, 0);
    if (rc == 0) {
        CHECK(check.n >= 1 && check.n <= SL_HTTP_CHECK_MAX_LIMITS);
        CHECK(check.multi || check.n == 1);
        CHECK(!(check.multi && check.policy));
        for (size_t i = 0; i < check.n; i++) {
            const sl_http_check_item *it = &check.items[i];
            CHECK(it->keylen >= 1 && it->keylen <= SL_HTTP_KEY_MAX);
            CHECK(it->key >= check.strbuf &&
                  it->key + it->keylen <= check.strbuf + sizeof check.strbuf);
            CHECK(it->cost >= 0);
            if (!check.policy)
                CHECK(it->limit.algorithm != SL_CONCURRENCY && it->limit.limit > 0 &&
                      it->limit.period_ns > 0);
        }
        if (check.policy)
            CHECK(check.policy_len >= 1 && check.policy_len <= SL_HTTP_NAME_MAX);
        if (!check.policy) {
            /* What the server would answer, from a made-up decision. */
            sl_decision d[SL_HTTP_CHECK_MAX_LIMITS];
            sl_http_limit_report items[SL_HTTP_CHECK_MAX_LIMITS];
            for (size_t i = 0; i < check.n; i++) {
                d[i] = (sl_decision){.allowed = i != 0, .limit = check.items[i].limit.burst,
                                     .remaining = 0, .reset_after_ns = check.items[i].limit.period_ns,
                                     .retry_after_ns = check.items[i].cost ? 1 : SL_NEVER};
                items[i] = (sl_http_limit_report){"p", &check.items[i].limit, &d[i]};
            }
            sl_http_decision_opts o = {.keep_alive = true, .multi = check.multi,
                                       .rejected_by = 0};
            CHECK(sl_http_write_decision(&b, &o, items, check.n) == 0);
            check_body_json(&b);
        }
    } else {
        CHECK(rc == -1);
        CHECK(check.status == 400 || check.status == 413 || check.status == 401);
        CHECK(check.errstr && *check.errstr);
        CHECK(!check.field || strlen(check.field) < sizeof check.fieldbuf);
        CHECK(sl_http_write_error(&b, check.status, false, check.errstr, check.field) == 0);
        check_body_json(&b);
    }
    sl_buf_free(&b);
    return 0;
}
