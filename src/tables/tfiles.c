/* SPDX-License-Identifier: MIT */
/* A table's files (internal.h): sorting, finding, their heap, their manifests' names. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- live files ---- */
static int st__tfile_cmp(const void *a, const void *b)
{
    return strcmp(((const st_tfile_t *)a)->key, ((const st_tfile_t *)b)->key);
}

void st_tfiles_sort(st_tfiles_t *v)
{
    if (v->n > 1) qsort(v->v, v->n, sizeof *v->v, st__tfile_cmp);
}

st_tfile_t *st_tfiles_find(const st_tfiles_t *v, const char *key)
{
    st_tfile_t k = {.key = (char *)key};
    return v->n ? bsearch(&k, v->v, v->n, sizeof *v->v, st__tfile_cmp) : NULL;
}

/* A string's share of the heap: its bytes, malloc's header and rounding (glibc: 16). */
static size_t st__str_bytes(const char *p)
{
    return p ? (strlen(p) + 1 + 8 + 15) & ~(size_t)15 : 0;
}

size_t st_tfiles_bytes(const st_tfiles_t *v, const st_tstrs_t *mans)
{
    size_t b = v->cap * sizeof *v->v + mans->cap * sizeof *mans->v;
    for (size_t i = 0; i < v->n; i++)
        b += st__str_bytes(v->v[i].key) + st__str_bytes(v->v[i].uri) + st__str_bytes(v->v[i].part) +
             (v->v[i].stats ? (v->v[i].stats_len + 8 + 15) & ~(size_t)15 : 0);
    for (size_t i = 0; i < mans->n; i++)
        b += st__str_bytes(mans->v[i]);
    return b;
}

void st_tfiles_free(st_tfiles_t *v)
{
    for (size_t i = 0; i < v->n; i++) {
        free(v->v[i].key);
        free(v->v[i].uri);
        free(v->v[i].part);
        free(v->v[i].stats);
    }
    st_vec_free(v);
}

void st_tfiles_intern(st_tfiles_t *files, st_tstrs_t *m)
{
    for (size_t i = 0; i < files->n; i++)
        if (files->v[i].uri) st_vec_push(m, files->v[i].uri);
    if (m->n > 1) qsort(m->v, m->n, sizeof *m->v, st_tstrs_cmp);
    size_t n = 0;
    for (size_t i = 0; i < m->n; i++)
        if (!n || strcmp(m->v[i], m->v[n - 1]) != 0)
            m->v[n++] = st_strndup(m->v[i], strlen(m->v[i]));
    m->n = n;
    for (size_t i = 0; i < files->n; i++) {
        st_tfile_t *f = &files->v[i];
        if (!f->uri) continue;
        char **hit = bsearch(&f->uri, m->v, m->n, sizeof *m->v, st_tstrs_cmp);
        f->man = (uint32_t)(hit - m->v) + 1;
        free(f->uri);
        f->uri = NULL;
    }
}
