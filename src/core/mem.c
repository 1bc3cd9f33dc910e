/* SPDX-License-Identifier: MIT */
/* Allocation wrappers, growable buffers and the per-request arena. */
#include "strata/core.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *st_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) st_fatal("out of memory (%zu bytes)", n);
    return p;
}

void *st_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) st_fatal("out of memory (%zu x %zu bytes)", n, size);
    return p;
}

void *st_realloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) st_fatal("out of memory (%zu bytes)", n);
    return q;
}

void *st__vec_grow(void *v, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return v;
    size_t c = *cap ? *cap : 8;
    while (c < need)
        c *= 2;
    *cap = c;
    return st_realloc(v, c * elem);
}

char *st_strndup(const char *s, size_t n)
{
    char *p = st_malloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

void st_buf_reserve(st_buf_t *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1)
        cap *= 2;
    b->data = st_realloc(b->data, cap);
    b->cap = cap;
}

void st_buf_append(st_buf_t *b, const void *p, size_t n)
{
    st_buf_reserve(b, n);
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void st_buf_appendc(st_buf_t *b, char c)
{
    st_buf_reserve(b, 1);
    b->data[b->len++] = c;
    b->data[b->len] = '\0';
}

void st_buf_puts(st_buf_t *b, const char *s)
{
    st_buf_append(b, s, strlen(s));
}

void st_buf_printf(st_buf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char tmp[256];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        st_buf_append(b, tmp, (size_t)n);
        return;
    }
    st_buf_reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void st_buf_append_u64(st_buf_t *b, uint64_t v)
{
    char tmp[24];
    size_t i = sizeof tmp;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    st_buf_append(b, tmp + i, sizeof tmp - i);
}

void st_buf_append_i64(st_buf_t *b, int64_t v)
{
    if (v < 0) {
        st_buf_appendc(b, '-');
        st_buf_append_u64(b, (uint64_t)0 - (uint64_t)v);
    } else {
        st_buf_append_u64(b, (uint64_t)v);
    }
}

void st_buf_append_json_str(st_buf_t *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    st_buf_reserve(b, n + 2);
    b->data[b->len++] = '"';
    size_t i = 0;
    while (i < n) {
        /* copy the longest run that needs no escaping in one go */
        size_t j = i;
        while (j < n && (unsigned char)s[j] >= 0x20 && s[j] != '"' && s[j] != '\\')
            j++;
        if (j > i) {
            st_buf_reserve(b, j - i + 1);
            memcpy(b->data + b->len, s + i, j - i);
            b->len += j - i;
            i = j;
            continue;
        }
        unsigned char c = (unsigned char)s[i++];
        st_buf_reserve(b, 6);
        if (c == '"' || c == '\\') {
            b->data[b->len++] = '\\';
            b->data[b->len++] = (char)c;
        } else {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            memcpy(b->data + b->len, e, 6);
            b->len += 6;
        }
    }
    st_buf_reserve(b, 1);
    b->data[b->len++] = '"';
    b->data[b->len] = '\0';
}

void st_buf_reset(st_buf_t *b)
{
    b->len = 0;
    if (b->data) b->data[0] = '\0';
}

void st_buf_free(st_buf_t *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

char *st_buf_steal(st_buf_t *b, size_t *len)
{
    char *p = b->data;
    if (len) *len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    return p;
}

struct st_arena_chunk {
    st_arena_chunk_t *next;
    size_t used, cap;
    _Alignas(16) char data[];
};

void *st_arena_alloc(st_arena_t *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    st_arena_chunk_t *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 4096 ? n : 4096;
        c = st_malloc(sizeof *c + cap);
        c->used = 0;
        c->cap = cap;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

char *st_arena_strndup(st_arena_t *a, const char *s, size_t n)
{
    char *p = st_arena_alloc(a, n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

void st_arena_reset(st_arena_t *a)
{
    /* Keep the newest chunk for reuse: most requests fit in one. */
    st_arena_chunk_t *c = a->head;
    if (!c) return;
    st_arena_chunk_t *rest = c->next;
    while (rest) {
        st_arena_chunk_t *next = rest->next;
        free(rest);
        rest = next;
    }
    c->next = NULL;
    c->used = 0;
}

void st_arena_free(st_arena_t *a)
{
    st_arena_reset(a);
    free(a->head);
    a->head = NULL;
}
