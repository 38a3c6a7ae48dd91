/*
 * quota_replay: the sync strategy's central rules (src/algo/quota.h) on a
 * script of syncs, for checking the central's other implementations (the
 * module's SL.SYNC, sluice.lua's SYNC) against the C on the same cases.
 *
 * Reads lines from stdin:
 *
 *     config <algorithm> <limit> <period_ns> <burst> <interval_ns> <nodes>
 *     sync <now_ns> <node> <admitted> <asked> <length_ns> <carry>
 *
 * A config line starts a new key (a zeroed central state) and prints "ok",
 * or "error <name>" for a config it cannot use. For each sync it prints
 * "grant <hold> <rate> <remaining>", or "error <name>" for a sync that
 * sl_quota_sync refuses (the state unchanged). "state" prints the state's fields, in the record's
 * order, on one line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algo/quota.h"

static const char *rc_name(int rc)
{
    switch (rc) {
    case SL_ERR_UNSUPPORTED: return "unsupported";
    case SL_ERR_LIMIT: return "limit";
    case SL_ERR_BURST: return "burst";
    case SL_ERR_PERIOD: return "period";
    case SL_ERR_ARGUMENT: return "argument";
    case SL_ERR_TIME: return "time";
    default: return "other";
    }
}

static int algorithm_of(const char *name, sl_algorithm *a)
{
    static const struct { const char *name; sl_algorithm a; } names[] = {
        {"gcra", SL_GCRA}, {"token_bucket", SL_TOKEN_BUCKET},
        {"leaky_bucket", SL_LEAKY_BUCKET}, {"fixed_window", SL_FIXED_WINDOW},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(names[i].name, name) == 0) {
            *a = names[i].a;
            return 0;
        }
    return -1;
}

int main(void)
{
    char line[512];
    sl_quota_config cfg;
    sl_quota_central st;
    bool ok = false;
    memset(&st, 0, sizeof st);
    while (fgets(line, sizeof line, stdin)) {
        char word[32], alg[32];
        long long a[6];
        if (sscanf(line, "%31s", word) != 1)
            continue;
        if (strcmp(word, "config") == 0 &&
            sscanf(line, "config %31s %lld %lld %lld %lld %lld", alg, &a[0], &a[1], &a[2], &a[3],
                   &a[4]) == 6) {
            sl_limit l;
            memset(&l, 0, sizeof l);
            memset(&st, 0, sizeof st);
            if (algorithm_of(alg, &l.algorithm) != 0) {
                puts("error unsupported");
                ok = false;
                continue;
            }
            l.limit = a[0];
            l.period_ns = a[1];
            l.burst = a[2];
            int rc = sl_quota_config_init(&cfg, &l, (int)a[4], a[3]);
            ok = rc == SL_OK;
            if (ok)
                puts("ok");
            else
                printf("error %s\n", rc_name(rc));
        } else if (strcmp(word, "sync") == 0 &&
                   sscanf(line, "sync %lld %lld %lld %lld %lld %lld", &a[0], &a[1], &a[2], &a[3],
                          &a[4], &a[5]) == 6) {
            if (!ok) {
                puts("error config");
                continue;
            }
            sl_quota_report r = {(int)a[1], a[2], a[3], a[4], a[5]};
            sl_quota_grant g;
            int rc = sl_quota_sync(&cfg, &st, a[0], &r, &g);
            if (rc == SL_OK)
                printf("grant %lld %lld %lld\n", (long long)g.hold, (long long)g.rate,
                       (long long)st.remaining);
            else
                printf("error %s\n", rc_name(rc));
        } else if (strcmp(word, "state") == 0) {
            printf("state %lld %lld %lld %lld %lld", (long long)st.seen, (long long)st.first,
                   (long long)st.remaining, (long long)st.anchor, (long long)st.frac);
            for (int j = 0; j < SL_QUOTA_NODES_MAX; j++) {
                const sl_quota_slot *o = &st.node[j];
                printf(" %lld %lld %lld %lld %lld", (long long)o->synced_at, (long long)o->demand,
                       (long long)o->hold, (long long)o->rate, (long long)o->carry);
            }
            putchar('\n');
        } else {
            printf("error line\n");
        }
        fflush(stdout);
    }
    return 0;
}
