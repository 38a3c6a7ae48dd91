/*
 * mtlib.h: what the concurrent tests written as plain programs share
 * (Criterion cannot start under ThreadSanitizer, Snaipe/Criterion issue
 * 274): a check that counts a failure on any thread and goes on, and a
 * port nothing listens on.
 */
#ifndef SL_TESTS_MTLIB_H
#define SL_TESTS_MTLIB_H

#include <stdatomic.h>
#include <stdio.h>

#include <uv.h>

static _Atomic int mt_bad; /* checks that failed, on any thread */

#define CHECK(cond)                                                                              \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            atomic_fetch_add(&mt_bad, 1);                                                        \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);             \
        }                                                                                        \
    } while (0)

/* A 127.0.0.1 port that nothing listens on: bound once, never listened to,
 * closed. 0 when none could be bound. */
static inline int mt_dead_port(void)
{
    uv_loop_t tmp;
    uv_tcp_t t;
    struct sockaddr_in a;
    int len = sizeof a, port = 0;
    uv_loop_init(&tmp);
    uv_ip4_addr("127.0.0.1", 0, &a);
    uv_tcp_init(&tmp, &t);
    if (uv_tcp_bind(&t, (const struct sockaddr *)&a, 0) == 0 &&
        uv_tcp_getsockname(&t, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&tmp, UV_RUN_DEFAULT);
    uv_loop_close(&tmp);
    return port;
}

#endif /* SL_TESTS_MTLIB_H */
