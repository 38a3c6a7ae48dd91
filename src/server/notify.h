/*
 * notify.h: telling a service manager (systemd's Type=notify) how start-up,
 * reloads and shutdown go, over sd_notify(3)'s datagram protocol.
 */
#ifndef SL_SERVER_NOTIFY_H
#define SL_SERVER_NOTIFY_H

/* Sends `state`, newline-separated VAR=value assignments such as "READY=1",
 * as one datagram to the unix socket that $NOTIFY_SOCKET names (a path, or
 * '@' and a name in the abstract namespace). Does nothing when the variable
 * is unset, so that sluiced run by hand behaves the same. A failure is logged
 * and otherwise ignored: the manager's view of the service is lost, not the
 * service. Call it from the main thread only (it reads the environment). */
void sl_notify(const char *state);

/* "RELOADING=1" with the MONOTONIC_USEC of now, which Type=notify-reload
 * managers match against the reload they asked for. */
void sl_notify_reloading(void);

#endif
