/*
 * yaml.h: what the policy layer's YAML readers share (config.c, envoy.c):
 * libyaml's document nodes read as scalars, and an error message that
 * names the file, line and column of the node at fault.
 */
#ifndef SL_POLICY_YAML_H
#define SL_POLICY_YAML_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <yaml.h>

static inline bool sl_yaml_is_scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE;
}

/* A scalar node's text (NUL-terminated by libyaml). */
static inline const char *sl_yaml_scalar(const yaml_node_t *n)
{
    return (const char *)n->data.scalar.value;
}

/* Writes "NAME:LINE:COL: message" for node n (NULL: "NAME: message") into
 * err (errlen bytes). Returns -1, for a caller's `return`. */
int sl_yaml_vfail(char *err, size_t errlen, const char *name, const yaml_node_t *n,
                  const char *fmt, va_list ap) __attribute__((format(printf, 5, 0)));

#endif /* SL_POLICY_YAML_H */
