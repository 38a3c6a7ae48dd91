/*
 * yaml.c: the policy layer's YAML error messages (yaml.h).
 */
#include "policy/yaml.h"

#include <stdio.h>

int sl_yaml_vfail(char *err, size_t errlen, const char *name, const yaml_node_t *n,
                  const char *fmt, va_list ap)
{
    int w = n ? snprintf(err, errlen, "%s:%zu:%zu: ", name, n->start_mark.line + 1,
                         n->start_mark.column + 1)
              : snprintf(err, errlen, "%s: ", name);
    if (w >= 0 && (size_t)w < errlen)
        vsnprintf(err + w, errlen - (size_t)w, fmt, ap);
    return -1;
}
