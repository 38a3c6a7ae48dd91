/*
 * notify.c: sd_notify(3)'s protocol, written out rather than linked from
 * libsystemd: one AF_UNIX datagram per message, nothing else to depend on.
 */
#define _GNU_SOURCE
#include "server/notify.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "server/log.h"

void sl_notify(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path)
        return;
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    /* Only an absolute path or an abstract name is a socket systemd hands
     * out; anything else is a misconfigured environment, not ours to guess. */
    if ((path[0] != '/' && path[0] != '@') || len >= sizeof addr.sun_path) {
        sl_log(SL_LOG_WARN, "NOTIFY_SOCKET '%.200s' is not a socket path; not notifying", path);
        return;
    }
    memcpy(addr.sun_path, path, len);
    socklen_t addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    if (path[0] == '@')
        addr.sun_path[0] = '\0'; /* the abstract name is not NUL-terminated */
    else
        addrlen++; /* a path's length counts its NUL */
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        sl_log(SL_LOG_WARN, "NOTIFY_SOCKET: socket: %s", strerror(errno));
        return;
    }
    if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&addr, addrlen) < 0)
        sl_log(SL_LOG_WARN, "NOTIFY_SOCKET %s: %s", path, strerror(errno));
    close(fd);
}

void sl_notify_reloading(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    char msg[64];
    snprintf(msg, sizeof msg, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64,
             (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000);
    sl_notify(msg);
}
