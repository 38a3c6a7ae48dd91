/*
 * fuzz_key_template.c: libFuzzer target for key templates
 * (src/proto/key_template.c).
 *
 * The input is read as:
 *   byte 0     the cap a render gets: 1 + byte0 * 17 (1 .. 4336, so that
 *              caps above SL_KEY_RENDER_MAX are tried too)
 *   byte 1     L, the template's length (0 .. 255)
 *   L bytes    the template, parsed in an exact-size copy
 *   the rest   the request, in lines (split at '\n'): key, policy, method,
 *              path, query, an address (sl_ip_parse; none when it is not
 *              one), then header fields "name:value", each part in an
 *              exact-size copy; an empty line is an absent part
 *
 * CHECK() aborts when a guarantee of key_template.h breaks: an error says
 * something; a parsed template has at most SL_KEY_TEMPLATE_MAX_PARTS parts,
 * flags that match them, and a canonical text no longer than its source
 * that parses to itself; a render answers a key within its cap, 0 with a
 * part's name, or -1, the same with a larger buffer when it fitted, and
 * -1 with one byte less.
 *
 * Build and run: make fuzz (FUZZ_SECONDS=N to change the time per target).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proto/key_template.h"

#define MAX_LINES 24

static long render(const sl_key_template *t, const sl_key_request *r, size_t cap,
                   const char **missing, char *keep)
{
    char *out = malloc(cap);
    CHECK(out);
    long n = sl_key_template_render(t, r, out, cap, missing);
    if (n > 0 && keep)
        memcpy(keep, out, (size_t)n);
    free(out);
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t cap = 1 + (size_t)data[0] * 17, tlen = data[1];
    if (tlen > size - 2)
        tlen = size - 2;
    char *s = copy_of(data + 2, tlen);
    sl_key_template t;
    char err[256] = "";
    int rc = sl_key_template_parse(s, tlen, &t, err, sizeof err);
    free(s);
    if (rc != 0) {
        CHECK(rc == -1 && err[0] != '\0' && strlen(err) < sizeof err);
        return 0;
    }
    CHECK(t.nparts >= 1 && t.nparts <= SL_KEY_TEMPLATE_MAX_PARTS);
    unsigned uses = 0;
    for (size_t i = 0; i < t.nparts; i++) {
        CHECK(t.parts[i].kind <= SL_KEY_PART_IP);
        uses |= SL_KEY_USES(t.parts[i].kind);
    }
    CHECK(uses == t.uses);

    /* The canonical text: no longer than the source, and a fixed point. */
    char canon[SL_KEY_TEMPLATE_MAX + 1], canon2[SL_KEY_TEMPLATE_MAX + 1];
    long cl = sl_key_template_describe(&t, canon, sizeof canon);
    CHECK(cl > 0 && (size_t)cl <= tlen && canon[cl] == '\0'); /* text may hold NULs */
    sl_key_template again;
    CHECK(sl_key_template_parse(canon, (size_t)cl, &again, err, sizeof err) == 0);
    CHECK(again.nparts == t.nparts && again.uses == t.uses);
    CHECK(sl_key_template_describe(&again, canon2, sizeof canon2) == cl);
    CHECK(memcmp(canon, canon2, (size_t)cl) == 0);

    /* The request from the rest of the input. */
    const char *rest = (const char *)data + 2 + tlen;
    size_t n = size - 2 - tlen, start = 0, nl = 0;
    char *lines[MAX_LINES];
    size_t lens[MAX_LINES];
    for (size_t i = 0; i <= n && nl < MAX_LINES; i++) {
        if (i < n && rest[i] != '\n')
            continue;
        lines[nl] = copy_of((const uint8_t *)rest + start, i - start);
        lens[nl++] = i - start;
        start = i + 1;
    }
    sl_http_slice part[5] = {{0}};
    for (size_t i = 0; i < 5 && i < nl; i++)
        part[i] = (sl_http_slice){lens[i] ? lines[i] : NULL, lens[i]};
    sl_ip ip;
    bool has_ip = nl > 5 && sl_ip_parse(lines[5], lens[5], &ip) == 0;
    sl_http_header h[MAX_LINES];
    size_t nh = 0;
    for (size_t i = 6; i < nl; i++) {
        const char *colon = memchr(lines[i], ':', lens[i]);
        size_t nlen = colon ? (size_t)(colon - lines[i]) : lens[i];
        h[nh].name = (sl_http_slice){lines[i], nlen};
        h[nh].value = colon ? (sl_http_slice){colon + 1, lens[i] - nlen - 1}
                            : (sl_http_slice){NULL, 0};
        nh++;
    }
    sl_key_request r = {
        .key = part[0], .policy = part[1], .method = part[2], .path = part[3],
        .query = part[4], .headers = h, .nheaders = nh, .client = has_ip ? &ip : NULL,
    };

    const char *missing = NULL;
    static char key[SL_KEY_RENDER_MAX], key2[SL_KEY_RENDER_MAX];
    long k = render(&t, &r, cap, &missing, key);
    CHECK(k >= -1);
    if (k == 0) {
        CHECK(missing != NULL && missing[0] != '\0');
        CHECK(missing >= t.text && missing < t.text + sizeof t.text);
    } else if (k > 0) {
        CHECK((size_t)k <= cap && (size_t)k <= SL_KEY_RENDER_MAX);
        /* The same key with room to spare, and none with a byte less. */
        CHECK(render(&t, &r, SL_KEY_RENDER_MAX, NULL, key2) == k);
        CHECK(memcmp(key, key2, (size_t)k) == 0);
        CHECK(render(&t, &r, (size_t)k - 1 ? (size_t)k - 1 : 1, NULL, NULL) ==
              ((size_t)k - 1 ? -1 : k));
        /* A template of {key} and text only: its key is their concatenation. */
        if ((t.uses & ~(SL_KEY_USES(SL_KEY_PART_TEXT) | SL_KEY_USES(SL_KEY_PART_KEY))) == 0) {
            size_t w = 0;
            for (size_t i = 0; i < t.nparts; i++) {
                const sl_key_part *p = &t.parts[i];
                const char *src = p->kind == SL_KEY_PART_TEXT ? t.text + p->off : r.key.ptr;
                size_t len = p->kind == SL_KEY_PART_TEXT ? p->len : r.key.len;
                CHECK(w + len <= (size_t)k && memcmp(key + w, src, len) == 0);
                w += len;
            }
            CHECK(w == (size_t)k);
        }
    } else {
        /* Too long for cap: then it is too long for every smaller cap. */
        CHECK(render(&t, &r, 1, NULL, NULL) == -1);
    }
    for (size_t i = 0; i < nl; i++)
        free(lines[i]);
    return 0;
}
