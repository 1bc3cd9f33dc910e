/* SPDX-License-Identifier: MIT */
/*
 * Query strings: percent-decoding, finding a value, and strict requests (SPEC §7) for the query:
 * each route declares the parameters it takes (the route table, router.c), and a query naming
 * another one, naming one twice or holding a bad escape is refused before the handler runs.
 * Names compare decoded (`li%6Dit` is `limit`), so a value is never read under one spelling and
 * checked under another.
 */
#include "strata/http.h"

#include <stdio.h>
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

/* The byte at s[*i] decoded (a '%XX' escape or '+' as one byte), *i moved past it; -1 for a
 * malformed escape. */
static int st__next(const char *s, size_t n, size_t *i)
{
    char ch = s[*i];
    if (ch == '+') {
        (*i)++;
        return ' ';
    }
    if (ch != '%') {
        (*i)++;
        return (unsigned char)ch;
    }
    if (*i + 2 >= n) return -1;
    int hi = st__hex(s[*i + 1]), lo = st__hex(s[*i + 2]);
    if (hi < 0 || lo < 0) return -1;
    *i += 3;
    return hi << 4 | lo;
}

/* Whether the raw (undecoded) key k is name once decoded; no copy. */
static bool st__key_is(const char *k, size_t kn, const char *name)
{
    size_t i = 0;
    const unsigned char *p = (const unsigned char *)name;
    while (i < kn) {
        int b = st__next(k, kn, &i);
        if (b < 0 || !*p || b != *p++) return false;
    }
    return !*p;
}

const char *st_query_get(st_arena_t *a, const char *query, size_t qlen, const char *name,
                         size_t *vlen)
{
    const char *p = query, *end = query + qlen;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *pe = amp ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(pe - p));
        const char *ke = eq ? eq : pe;
        if (st__key_is(p, (size_t)(ke - p), name)) {
            const char *v = eq ? eq + 1 : pe;
            return st_url_decode(a, v, (size_t)(pe - v), vlen);
        }
        p = pe + 1;
    }
    return NULL;
}

/* Whether s[0..n) is well-formed and decodes to no U+0000 (a value read as a C string would
 * be cut there: `order=desc%00x` is not "desc"). */
static bool st__clean(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        int b = st__next(s, n, &i);
        if (b <= 0) return false;
    }
    return true;
}

int st_query_check(const char *query, size_t qlen, const char *const *known, st_query_fault_t *f)
{
    const char *p = query, *end = query + qlen;
    uint64_t seen = 0; /* the known names met so far (a route takes fewer than 64) */
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *pe = amp ? amp : end;
        if (pe == p) { /* "a=1&&b=2", a trailing '&': an empty piece names nothing */
            p = pe + 1;
            continue;
        }
        const char *eq = memchr(p, '=', (size_t)(pe - p));
        const char *ke = eq ? eq : pe;
        *f = (st_query_fault_t){.name = p, .name_len = (size_t)(ke - p)};
        if (!st__clean(p, f->name_len)) {
            f->fault = ST_QUERY_BAD_NAME;
            return ST_EINVAL;
        }
        size_t i = 0;
        while (known && known[i] && !st__key_is(p, f->name_len, known[i]))
            i++;
        if (!known || !known[i]) {
            f->fault = ST_QUERY_UNKNOWN;
            return ST_EINVAL;
        }
        if (i < 64 && (seen >> i & 1)) { /* ?limit=1&limit=2: which one is meant? */
            f->fault = ST_QUERY_TWICE;
            return ST_EINVAL;
        }
        if (i < 64) seen |= (uint64_t)1 << i;
        if (eq && !st__clean(eq + 1, (size_t)(pe - eq - 1))) {
            f->fault = ST_QUERY_BAD_VALUE;
            return ST_EINVAL;
        }
        p = pe + 1;
    }
    return ST_OK;
}

size_t st_query_fault_name(const st_query_fault_t *f, char *out, size_t cap)
{
    size_t o = 0, i = 0;
    const char *k = f->name;
    while (i < f->name_len && o + 4 < cap) {
        size_t at = i;
        int b = st__next(k, f->name_len, &i);
        bool broken = b < 0; /* a broken escape's '%': shown as sent */
        if (broken) {
            i = at + 1;
            b = '%';
        }
        if (broken || (b >= 0x20 && b < 0x7f && b != '%'))
            out[o++] = (char)b;
        else
            o += (size_t)snprintf(out + o, cap - o, "%%%02X", (unsigned)b);
    }
    if (i < f->name_len && o + 4 <= cap) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
    return o;
}
