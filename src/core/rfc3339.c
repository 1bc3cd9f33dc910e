/* SPDX-License-Identifier: MIT */
/*
 * Times as people type and read them (RFC 3339) and as strata keeps them (Unix µs): `strata
 * restore --to-time` takes either, `restore --list` prints both. Pure arithmetic on the
 * proleptic Gregorian calendar, so neither the process's time zone nor its locale matters.
 */
#include "strata/core.h"

#include <stdio.h>
#include <string.h>

/* Days since 1970-01-01 of y-m-d (H. Hinnant's days_from_civil). */
static int64_t st__days(int64_t y, int64_t m, int64_t d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* n decimal digits at *p (advanced); -1 if any is not a digit. */
static int64_t st__digits(const char **p, int n)
{
    int64_t v = 0;
    for (int i = 0; i < n; i++, (*p)++) {
        if (**p < '0' || **p > '9') return -1;
        v = v * 10 + (**p - '0');
    }
    return v;
}

static bool st__leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int st__rfc3339(const char *s, int64_t *out)
{
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    const char *p = s;
    int64_t y = st__digits(&p, 4);
    if (y < 1970 || *p++ != '-') return ST_EINVAL;
    int64_t mo = st__digits(&p, 2);
    if (mo < 1 || mo > 12 || *p++ != '-') return ST_EINVAL;
    int64_t d = st__digits(&p, 2);
    if (d < 1 || d > mdays[mo - 1] + (mo == 2 && st__leap(y))) return ST_EINVAL;
    if (*p != 'T' && *p != 't' && *p != ' ') return ST_EINVAL;
    p++;
    int64_t h = st__digits(&p, 2);
    if (h < 0 || h > 23 || *p++ != ':') return ST_EINVAL;
    int64_t mi = st__digits(&p, 2);
    if (mi < 0 || mi > 59 || *p++ != ':') return ST_EINVAL;
    int64_t sec = st__digits(&p, 2);
    if (sec < 0 || sec > 60) return ST_EINVAL; /* a leap second reads as the next one */
    int64_t us = 0;
    if (*p == '.') {
        p++;
        int n = 0;
        for (; *p >= '0' && *p <= '9'; p++, n++)
            if (n < 6) us = us * 10 + (*p - '0'); /* finer than µs: cut */
        if (n == 0) return ST_EINVAL;
        for (; n < 6; n++)
            us *= 10;
    }
    int64_t off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p++ == '-' ? -1 : 1;
        int64_t oh = st__digits(&p, 2);
        if (oh < 0 || oh > 23 || *p++ != ':') return ST_EINVAL;
        int64_t om = st__digits(&p, 2);
        if (om < 0 || om > 59) return ST_EINVAL;
        off = sign * (oh * 3600 + om * 60);
    } else {
        return ST_EINVAL; /* RFC 3339 always names the offset */
    }
    if (*p) return ST_EINVAL;
    int64_t t = (st__days(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - off);
    if (t < 0) return ST_EINVAL;
    *out = t * 1000000 + us;
    return ST_OK;
}

int st_parse_time_us(const char *s, int64_t *out)
{
    size_t n = strlen(s);
    if (n && strspn(s, "0123456789") == n) {
        int64_t v;
        if (st_parse_i64(s, n, &v) != ST_OK) return ST_EINVAL;
        *out = v;
        return ST_OK;
    }
    return st__rfc3339(s, out);
}

void st_format_time_us(int64_t us, char *buf, size_t n)
{
    int64_t secs = us / 1000000, frac = us % 1000000;
    if (frac < 0) {
        frac += 1000000;
        secs--;
    }
    int64_t days = secs / 86400, rem = secs % 86400;
    if (rem < 0) {
        rem += 86400;
        days--;
    }
    /* civil_from_days */
    int64_t z = days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1;
    int64_t m = mp + (mp < 10 ? 3 : -9);
    int64_t y = yoe + era * 400 + (m <= 2);
    snprintf(buf, n, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%06lldZ", (long long)y,
             (long long)m, (long long)d, (long long)(rem / 3600), (long long)(rem / 60 % 60),
             (long long)(rem % 60), (long long)frac);
}
