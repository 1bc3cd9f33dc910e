/* SPDX-License-Identifier: MIT */
/* Logging to stderr, one line per event with a UTC timestamp; and the fatal path. */
#include "strata/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int st__log_level = ST_LOG_INFO;

void st_log_set_level(int level)
{
    st__log_level = level;
}

static void st__vlog(const char *tag, const char *fmt, va_list ap)
{
    char ts[32];
    int64_t us = st_now_us();
    time_t secs = (time_t)(us / 1000000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    char line[2048];
    int n = snprintf(line, sizeof line, "%s.%03dZ %s ", ts, (int)(us / 1000 % 1000), tag);
    if (n > 0 && (size_t)n < sizeof line) vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    fprintf(stderr, "%s\n", line);
}

void st_log(int level, const char *fmt, ...)
{
    static const char *tags[] = {"debug", "info", "warn", "error"};
    if (level < st__log_level) return;
    va_list ap;
    va_start(ap, fmt);
    st__vlog(tags[level & 3], fmt, ap);
    va_end(ap);
}

void st__fatal(const char *file, int line, const char *fmt, ...)
{
    fprintf(stderr, "FATAL %s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    abort();
}
