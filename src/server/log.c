/*
 * log.c: one line per event on stderr. The line is formatted in full first
 * and written with one write(2), so lines from several threads never mix.
 */
#include "server/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static enum sl_log_level sl_log_min = SL_LOG_INFO;

void sl_log_set_level(enum sl_log_level level)
{
    sl_log_min = level;
}

void sl_log(enum sl_log_level level, const char *fmt, ...)
{
    static const char *const names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    if (level < sl_log_min)
        return;
    char line[1024];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = (int)strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
    n += snprintf(line + n, sizeof line - (size_t)n, ".%03ldZ %s ", ts.tv_nsec / 1000000,
                  names[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    n = m < 0 ? n : (n + m > (int)sizeof line - 2 ? (int)sizeof line - 2 : n + m);
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
}

const char *sl_log_addr(char *buf, const char *host, int port)
{
    if (strchr(host, ':'))
        snprintf(buf, SL_LOG_ADDR_MAX, "[%.64s]:%d", host, port);
    else
        snprintf(buf, SL_LOG_ADDR_MAX, "%.64s:%d", host, port);
    return buf;
}
