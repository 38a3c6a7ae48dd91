/* cjson_parse.c: see cjson_parse.h. */
#include "proto/cjson_parse.h"

#include <pthread.h>

static pthread_mutex_t cjson_lock = PTHREAD_MUTEX_INITIALIZER;

cJSON *sl_cjson_parse(const char *s, size_t n, const char **end)
{
    const char *stop = NULL;
    pthread_mutex_lock(&cjson_lock);
    cJSON *root = cJSON_ParseWithLengthOpts(s, n, &stop, 0);
    pthread_mutex_unlock(&cjson_lock);
    if (end)
        *end = stop;
    return root;
}
