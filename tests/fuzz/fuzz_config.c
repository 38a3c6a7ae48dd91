/*
 * fuzz_config: the YAML config loader (src/policy/config.c) on arbitrary
 * bytes. It must either load a config whose every policy is usable, or
 * refuse with a message that names a place; never crash, leak or read out
 * of bounds.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "policy/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    sl_config *c = NULL;
    int rc = sl_config_parse((const char *)data, size, "fuzz.yaml", &c, err, sizeof err);
    if (rc != 0) {
        if (c != NULL || strncmp(err, "fuzz.yaml", 9) != 0)
            abort(); /* an error must leave nothing and say where */
        return 0;
    }
    for (size_t i = 0; i < c->npolicies; i++) {
        const sl_policy *p = &c->policies[i];
        if (sl_config_policy(c, p->name, strlen(p->name)) != p)
            abort();
        /* Every limit of every set takes, every set holds 1 .. 8 limits with
         * the global ones, and a policy's items are its limits'. */
        for (size_t t = 0; t <= p->ntiers + 1; t++) {
            const sl_limit_set *set = t < p->ntiers ? &p->tiers[t].limits
                                      : t == p->ntiers ? &p->limits : &p->global;
            if ((t <= p->ntiers && set->n == 0) || set->n + p->global.n > SL_TAKE_MANY_MAX)
                abort();
            for (size_t j = 0; j < set->n; j++) {
                int64_t state[8] = {0}; /* every state but the log fits */
                sl_decision d;
                const sl_limit *l = &set->l[j].limit;
                if (l->algorithm != SL_SLIDING_LOG && sl_take(l, state, 1, 1, &d) != SL_OK)
                    abort();
            }
            if (t < p->ntiers &&
                sl_policy_limits(p, p->tiers[t].name, strlen(p->tiers[t].name)) != set)
                abort();
        }
        /* Each template is parsed whole: written back, it parses to itself. */
        if (p->ntemplates < 1 || p->ntemplates > 2)
            abort();
        for (size_t t = 0; t < p->ntemplates; t++) {
            char text[SL_KEY_TEMPLATE_MAX + 1], again[SL_KEY_TEMPLATE_MAX + 1], why[320];
            sl_key_template back;
            long tn = sl_key_template_describe(&p->templates[t], text, sizeof text);
            if (tn < 0 || sl_key_template_parse(text, (size_t)tn, &back, why, sizeof why) != 0 ||
                sl_key_template_describe(&back, again, sizeof again) != tn ||
                memcmp(text, again, (size_t)tn) != 0)
                abort();
        }
        if (p->keyed_by_request !=
            (p->ntemplates == 2 || sl_key_template_reads_request(&p->templates[0])))
            abort();
        char key[256], keys[SL_POLICY_KEYS_ROOM];
        long kn = sl_policy_key(p, "k", 1, key, sizeof key);
        sl_take_item items[SL_TAKE_MANY_MAX];
        const sl_named_limit *which[SL_TAKE_MANY_MAX];
        size_t nkey = 0;
        int n = sl_policy_items(p, NULL, 0, "k", 1, 1, 2, keys, sizeof keys, items, which, &nkey);
        /* "k" is a key of a policy keyed by the request only when one of its
         * templates could write it; then it is written as it is. */
        if (p->keyed_by_request && (kn == -2) != (n == -3))
            abort();
        if (p->keyed_by_request && kn == 1 && key[0] != 'k')
            abort();
        if (!p->plans && n != -3 && (n != (int)(p->limits.n + p->global.n) || nkey != p->limits.n))
            abort();
    }
    /* Every adaptive policy is found by its name, under no rate policy's,
     * and its config is one the limiter takes. */
    for (size_t i = 0; i < c->nadaptive; i++) {
        const sl_adaptive_policy *p = &c->adaptive[i];
        sl_adapt scratch;
        if (sl_config_adaptive(c, p->name, strlen(p->name)) != p ||
            sl_config_policy(c, p->name, strlen(p->name)) != NULL ||
            sl_adapt_init(&scratch, &p->cfg.adapt) != SL_OK ||
            sl_shed_config_check(&p->cfg.shed) != SL_OK || p->cfg.shed.classes != 3 ||
            p->cfg.ttl_ns < 1 || p->cfg.ttl_ns > SL_SPAN_MAX)
            abort();
        for (int k = 0; k < p->cfg.shed.partitions; k++)
            if (sl_adaptive_partition(p, p->partition[k], strlen(p->partition[k])) != k)
                abort();
    }
    sl_config_free(c);
    return 0;
}
