/*
 * reply.h: hiredis's reply objects from a per-thread pool. hiredis's reader
 * allocates every object of a reply (an SL.DECIDE answer is an array and
 * seven integers) and frees them after the reply's callback, which made
 * malloc and free a large share of a check's work. A transport installs these functions on each connection's
 * reader; the objects are hiredis's redisReply, so callbacks read them as
 * ever.
 */
#ifndef SL_BACKEND_REPLY_H
#define SL_BACKEND_REPLY_H

#include <hiredis/hiredis.h>

/* Makes the context's reader build its replies from this thread's pool. */
void sl_reply_pool_install(redisContext *c);

/* Frees this thread's pool, when its transports are closed: objects freed
 * after it go back to malloc. */
void sl_reply_pool_drain(void);

#endif /* SL_BACKEND_REPLY_H */
