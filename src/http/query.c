/* SPDX-License-Identifier: MIT */
/* Query strings and percent-decoding. */
#include "strata/http.h"

#include <string.h>

static int st__hex(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

char *st_url_decode(st_arena_t *a, const char *s, size_t n, size_t *outlen)
{
    char *out = st_arena_alloc(a, n + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            if (i + 2 >= n) return NULL;
            int hi = st__hex(s[i + 1]);
            int lo = st__hex(s[i + 2]);
            if (hi < 0 || lo < 0) return NULL;
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else if (s[i] == '+') {
            out[o++] = ' ';
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = '\0';
    *outlen = o;
    return out;
}

bool st_query_valid(const char *query, size_t qlen)
{
    for (size_t i = 0; i < qlen; i++)
        if (query[i] == '%' &&
            (i + 2 >= qlen || st__hex(query[i + 1]) < 0 || st__hex(query[i + 2]) < 0))
            return false;
    return true;
}

const char *st_query_get(st_arena_t *a, const char *query, size_t qlen, const char *name,
                         size_t *vlen)
{
    size_t nlen = strlen(name);
    const char *p = query, *end = query + qlen;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *pe = amp ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(pe - p));
        const char *ke = eq ? eq : pe;
        if ((size_t)(ke - p) == nlen && memcmp(p, name, nlen) == 0) {
            const char *v = eq ? eq + 1 : pe;
            return st_url_decode(a, v, (size_t)(pe - v), vlen);
        }
        p = pe + 1;
    }
    return NULL;
}
