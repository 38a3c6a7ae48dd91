/*
 * configlib.h: what the config file's unit tests share: parse a YAML text
 * that must load (the config, freed by the test) or must be refused (the
 * message, in a buffer of the test file's own).
 */
#ifndef SL_TESTS_CONFIGLIB_H
#define SL_TESTS_CONFIGLIB_H

#include <criterion/criterion.h>
#include <string.h>

#include "policy/config.h"

static char err[512];

static inline sl_config *parse_ok(const char *yaml)
{
    sl_config *c = NULL;
    cr_assert_eq(sl_config_parse(yaml, strlen(yaml), "t.yaml", &c, err, sizeof err), 0, "%s", err);
    return c;
}

static inline const char *parse_err(const char *yaml)
{
    sl_config *c = (sl_config *)1;
    cr_assert_eq(sl_config_parse(yaml, strlen(yaml), "t.yaml", &c, err, sizeof err), -1,
                 "accepted: %s", yaml);
    cr_assert_null(c);
    return err;
}

#endif /* SL_TESTS_CONFIGLIB_H */
