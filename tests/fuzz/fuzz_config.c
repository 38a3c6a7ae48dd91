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
        int64_t state[4] = {0, 0, 0, 0}; /* every state but the log fits */
        sl_decision d;
        if (p->limit.algorithm != SL_SLIDING_LOG && sl_take(&p->limit, state, 1, 1, &d) != SL_OK)
            abort();
        char key[256];
        sl_policy_key(p, "k", 1, key, sizeof key);
        for (size_t t = 0; t < p->ntiers; t++)
            if (sl_policy_limit(p, p->tiers[t].name, strlen(p->tiers[t].name)) != &p->tiers[t].limit)
                abort();
    }
    sl_config_free(c);
    return 0;
}
