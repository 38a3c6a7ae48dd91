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

#endif
