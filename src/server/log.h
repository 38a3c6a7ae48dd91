/*
 * log.h: one line per event on stderr: time, level, message.
 *   2026-11-29T22:10:03.123Z INFO listening on 127.0.0.1:7379 (RESP), 2 threads
 */
#ifndef SL_SERVER_LOG_H
#define SL_SERVER_LOG_H

enum sl_log_level { SL_LOG_DEBUG, SL_LOG_INFO, SL_LOG_WARN, SL_LOG_ERROR };

/* Messages below this level are dropped; SL_LOG_INFO by default. */
void sl_log_set_level(enum sl_log_level level);

void sl_log(enum sl_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Longest text sl_log_addr writes, its NUL included: an IPv6 literal with a
 * zone, brackets, a colon and a port. */
#define SL_LOG_ADDR_MAX 80

/* Writes "host:port" into buf (SL_LOG_ADDR_MAX bytes), with an IPv6 host in
 * brackets ("[::1]:7379") so that the port stays readable. Returns buf. */
const char *sl_log_addr(char *buf, const char *host, int port);

#endif
