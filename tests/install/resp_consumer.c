/*
 * resp_consumer.c: a program outside the project, built against an installed
 * libsluice_client with nothing but `pkg-config --cflags --libs sluice-client
 * libuv`, run against the installed sluiced (its port in argv[1]). It prints
 * a line per answer, which test_install.py checks: a limit of 2 taken three
 * times by the blocking client (the third refused), then once by the async
 * client on a libuv loop.
 */
#include <sluice_resp.h>
#include <stdio.h>
#include <stdlib.h>
#include <uv.h>

static void on_take(sl_rc_async *ac, int err, const char *errstr, const sl_decision *d,
                    void *priv)
{
    (void)priv;
    if (err)
        printf("async: error %s\n", errstr);
    else
        printf("async: allowed=%d remaining=%lld\n", d->allowed, (long long)d->remaining);
    /* The last answer: closing the connection lets uv_run return. */
    sl_rc_async_free(ac);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    int port = atoi(argv[1]);
    sl_rc *c = sl_rc_connect("127.0.0.1", port, 5000);
    if (!c || c->err) {
        printf("connect: %s\n", c ? c->errstr : "out of memory");
        return 1;
    }
    sl_rc_limit l = {.limit = 2, .period_ms = 60000};
    for (int i = 0; i < 3; i++) {
        sl_decision d;
        if (sl_rc_take(c, "install:k", &l, 1, &d) != 0) {
            printf("take: %s\n", c->errstr);
            return 1;
        }
        printf("take %d: allowed=%d remaining=%lld\n", i, d.allowed, (long long)d.remaining);
    }
    sl_rc_free(c);

    uv_loop_t loop;
    uv_loop_init(&loop);
    sl_rc_async *ac = sl_rc_async_connect(&loop, "127.0.0.1", port, NULL, NULL, 5000);
    if (!ac || sl_rc_async_take(ac, "install:a", &l, 1, on_take, NULL) != 0)
        return 1;
    uv_run(&loop, UV_RUN_DEFAULT); /* until on_take has freed the context */
    return uv_loop_close(&loop) == 0 ? 0 : 1;
}
