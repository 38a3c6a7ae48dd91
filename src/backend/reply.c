/*
 * reply.c: hiredis's reply objects from a per-thread pool (reply.h).
 *
 * Two free lists: reply objects, and element vectors of up to RP_VEC
 * pointers (an SL.DECIDE answer has 1 + 6n elements, n <= 8). A longer
 * array's vector, and every string, come from malloc as hiredis's own
 * would. Each list keeps at most RP_KEEP entries.
 */
#include "backend/reply.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define RP_VEC 64
#define RP_KEEP 1024

typedef union rp_obj {
    redisReply r;
    union rp_obj *next;
} rp_obj;

typedef union rp_vec {
    redisReply *e[RP_VEC];
    union rp_vec *next;
} rp_vec;

static _Thread_local struct {
    rp_obj *objs;
    rp_vec *vecs;
    unsigned nobjs, nvecs;
    bool drained; /* the thread's transports are closed: back to malloc */
} rp;

static redisReply *rp_obj_new(int type)
{
    rp_obj *o = rp.objs;
    if (o) {
        rp.objs = o->next;
        rp.nobjs--;
    } else if (!(o = malloc(sizeof *o))) {
        return NULL;
    }
    memset(&o->r, 0, sizeof o->r);
    o->r.type = type;
    return &o->r;
}

static void rp_obj_free(redisReply *r)
{
    rp_obj *o = (rp_obj *)r;
    if (rp.drained || rp.nobjs >= RP_KEEP) {
        free(o);
        return;
    }
    o->next = rp.objs;
    rp.objs = o;
    rp.nobjs++;
}

/* Puts a new object in its place in the array being read, as hiredis does. */
static void *rp_link(const redisReadTask *task, redisReply *r)
{
    if (r && task->parent) {
        redisReply *parent = task->parent->obj;
        parent->element[task->idx] = r;
    }
    return r;
}

static void *rp_string(const redisReadTask *task, char *str, size_t len)
{
    redisReply *r = rp_obj_new(task->type);
    if (!r)
        return NULL;
    if (!(r->str = malloc(len + 1))) {
        rp_obj_free(r);
        return NULL;
    }
    memcpy(r->str, str, len);
    r->str[len] = '\0';
    r->len = len;
    return rp_link(task, r);
}

static void *rp_array(const redisReadTask *task, int elements)
{
    redisReply *r = rp_obj_new(REDIS_REPLY_ARRAY);
    if (!r)
        return NULL;
    if (elements > 0) {
        if (elements <= RP_VEC && rp.vecs) {
            rp_vec *v = rp.vecs;
            rp.vecs = v->next;
            rp.nvecs--;
            memset(v->e, 0, (size_t)elements * sizeof v->e[0]);
            r->element = v->e;
        } else {
            size_t n = elements <= RP_VEC ? RP_VEC : (size_t)elements;
            if (!(r->element = calloc(n, sizeof *r->element))) {
                rp_obj_free(r);
                return NULL;
            }
        }
    }
    r->elements = (size_t)elements;
    return rp_link(task, r);
}

static void *rp_integer(const redisReadTask *task, long long value)
{
    redisReply *r = rp_obj_new(REDIS_REPLY_INTEGER);
    if (r)
        r->integer = value;
    return rp_link(task, r);
}

static void *rp_nil(const redisReadTask *task)
{
    return rp_link(task, rp_obj_new(REDIS_REPLY_NIL));
}

static void rp_free(void *obj)
{
    redisReply *r = obj;
    if (!r)
        return;
    if (r->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < r->elements; i++)
            rp_free(r->element[i]);
        if (r->element && r->elements <= RP_VEC && !rp.drained && rp.nvecs < RP_KEEP) {
            rp_vec *v = (rp_vec *)(void *)r->element;
            v->next = rp.vecs;
            rp.vecs = v;
            rp.nvecs++;
        } else {
            free(r->element);
        }
    } else if (r->type == REDIS_REPLY_ERROR || r->type == REDIS_REPLY_STATUS ||
               r->type == REDIS_REPLY_STRING) {
        free(r->str);
    }
    rp_obj_free(r);
}

static redisReplyObjectFunctions rp_functions = {
    .createString = rp_string,
    .createArray = rp_array,
    .createInteger = rp_integer,
    .createNil = rp_nil,
    .freeObject = rp_free,
};

void sl_reply_pool_install(redisContext *c)
{
    c->reader->fn = &rp_functions;
}

void sl_reply_pool_drain(void)
{
    rp.drained = true;
    while (rp.objs) {
        rp_obj *o = rp.objs;
        rp.objs = o->next;
        free(o);
    }
    while (rp.vecs) {
        rp_vec *v = rp.vecs;
        rp.vecs = v->next;
        free(v);
    }
    rp.nobjs = rp.nvecs = 0;
}
