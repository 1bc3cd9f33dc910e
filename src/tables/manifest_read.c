/* SPDX-License-Identifier: MIT */
/*
 * manifest_read: Iceberg manifest lists and manifests written with strata's own schemas
 * (manifest.c), read back with the strict Avro reader (avro_read.c): what a commit needs to carry
 * another writer's manifests over unchanged, and what tests and sweeps need to see what a
 * manifest names. A file with another schema (another engine's, with more fields) is ST_ENOTIMPL:
 * this reader walks strata's field order, it does not resolve schemas.
 */
#include "internal.h"

#include <string.h>

/* An optional long (union null/long): -1 for null. */
static void st__mr_opt_long(st_avro_r_t *r, int64_t *v)
{
    int b;
    *v = -1;
    if (st_avro_r_union(r, 2, &b) == ST_OK && b == 1) st_avro_r_long(r, v);
}

/* An optional string or bytes (union null/…): an owned NUL-terminated copy, or NULL. */
static char *st__mr_opt_str(st_avro_r_t *r, size_t *len)
{
    int b;
    const char *p;
    *len = 0;
    if (st_avro_r_union(r, 2, &b) != ST_OK || b == 0 || st_avro_r_string(r, &p, len) != ST_OK)
        return NULL;
    return st_strndup(p, *len);
}

static char *st__mr_str(st_avro_r_t *r)
{
    const char *p;
    size_t n;
    return st_avro_r_string(r, &p, &n) == ST_OK ? st_strndup(p, n) : NULL;
}

/* Whether the manifest schema s (n bytes) ends with tail. */
static bool st__mr_tail(const char *s, size_t n, const char *tail)
{
    size_t hn = strlen(st_ice_entry_head), tn = strlen(tail);
    return n > hn + tn && memcmp(s, st_ice_entry_head, hn) == 0 &&
           memcmp(s + n - tn, tail, tn) == 0;
}

/* *metrics (a manifest): whether its entries carry metrics (written since issue 48's) or not. */
static int st__mr_open(st_avro_r_t **r, const void *data, size_t len, bool list, bool *metrics)
{
    int rc = st_avro_r_open(r, data, len);
    if (rc != ST_OK) return rc;
    size_t n;
    const char *s = st_avro_r_meta(*r, "avro.schema", &n);
    bool ours;
    if (list) {
        ours = n == strlen(st_ice_mfile_schema) && memcmp(s, st_ice_mfile_schema, n) == 0;
    } else {
        *metrics = st__mr_tail(s, n, st_ice_entry_tail);
        ours = *metrics || st__mr_tail(s, n, st_ice_entry_tail_v0);
    }
    if (ours) return ST_OK;
    st_avro_r_close(*r);
    *r = NULL;
    return ST_ENOTIMPL;
}

void st_ice_mlist_free(st_ice_mlist_t *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free((char *)l->v[i].path);
        free((char *)l->v[i].lower);
        free((char *)l->v[i].upper);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* One manifest_file record (manifest.c's st__ice_mfile, in its order). */
static void st__mr_mfile(st_avro_r_t *r, st_ice_mfile_t *m)
{
    int32_t spec, content;
    int b;
    m->path = st__mr_str(r);
    st_avro_r_long(r, &m->length);
    st_avro_r_int(r, &spec);
    st_avro_r_int(r, &content);
    m->content = content;
    st_avro_r_long(r, &m->seq);
    st_avro_r_long(r, &m->min_seq);
    st_avro_r_long(r, &m->added_snapshot_id);
    st_avro_r_int(r, &m->added_files);
    st_avro_r_int(r, &m->existing_files);
    st_avro_r_int(r, &m->deleted_files);
    st_avro_r_long(r, &m->added_rows);
    st_avro_r_long(r, &m->existing_rows);
    st_avro_r_long(r, &m->deleted_rows);
    if (content != ST_ICE_DATA && content != ST_ICE_POS_DELETES) st_avro_r_union(r, 0, &b);
    if (st_avro_r_union(r, 2, &b) != ST_OK || b == 0) return; /* partitions: null */
    int64_t n;
    while (st_avro_r_block(r, &n) == ST_OK && n > 0) /* iterative: one level of array */
        for (int64_t i = 0; i < n && st_avro_r_status(r) == ST_OK; i++) {
            bool nul;
            int nan;
            size_t ln, un;
            st_avro_r_bool(r, &nul);
            if (st_avro_r_union(r, 2, &nan) == ST_OK && nan == 1) st_avro_r_bool(r, &nul);
            char *lo = st__mr_opt_str(r, &ln), *up = st__mr_opt_str(r, &un);
            if (!m->lower && !m->upper) { /* the first summary: the one partition field's */
                m->lower = lo, m->lower_len = ln;
                m->upper = up, m->upper_len = un;
            } else {
                free(lo);
                free(up);
            }
        }
}

int st_ice_manifest_list_read(st_ice_mlist_t *out, const void *data, size_t len)
{
    memset(out, 0, sizeof *out);
    st_avro_r_t *r;
    int rc = st__mr_open(&r, data, len, true, NULL);
    if (rc != ST_OK) return rc;
    while ((rc = st_avro_r_next(r)) == ST_OK) {
        st_vec_push(out, (st_ice_mfile_t){0});
        st__mr_mfile(r, &out->v[out->n - 1]);
        if ((rc = st_avro_r_status(r)) != ST_OK) break;
    }
    st_avro_r_close(r);
    if (rc == ST_ENOTFOUND) return ST_OK;
    st_ice_mlist_free(out);
    return rc;
}

void st_ice_entries_free(st_ice_entries_t *e)
{
    for (size_t i = 0; i < e->n; i++) {
        free((char *)e->v[i].path);
        free((char *)e->v[i].part);
        free((void *)e->v[i].metrics);
    }
    free(e->v);
    memset(e, 0, sizeof *e);
}

/* An entry's metrics (value_counts, null_value_counts: map<int, long>; lower_bounds,
 * upper_bounds: map<int, bytes>), re-encoded as they were into an owned copy (NULL: all four
 * null), for a rewrite of the entry to carry them as they are. */
static void st__mr_metrics(st_avro_r_t *r, st_ice_file_t *f)
{
    st_buf_t b = {0};
    bool any = false;
    for (int m = 0; m < 4 && st_avro_r_status(r) == ST_OK; m++) {
        int u;
        int64_t n;
        if (st_avro_r_union(r, 2, &u) != ST_OK) break;
        st_avro_enc_long(&b, u);
        if (u == 0) continue;
        any = true;
        while (st_avro_r_block(r, &n) == ST_OK && n > 0) { /* one level of array */
            st_avro_enc_long(&b, n);
            for (int64_t i = 0; i < n && st_avro_r_status(r) == ST_OK; i++) {
                int32_t key;
                int64_t v;
                const char *p;
                size_t pl;
                st_avro_r_int(r, &key);
                st_avro_enc_long(&b, key);
                if (m < 2) {
                    st_avro_r_long(r, &v);
                    st_avro_enc_long(&b, v);
                } else if (st_avro_r_string(r, &p, &pl) == ST_OK) {
                    st_avro_enc_long(&b, (int64_t)pl);
                    st_buf_append(&b, p, pl);
                }
            }
        }
        st_avro_enc_long(&b, 0);
    }
    if (!any || st_avro_r_status(r) != ST_OK) {
        st_buf_free(&b);
        return;
    }
    f->metrics_len = b.len;
    f->metrics = (const uint8_t *)st_buf_steal(&b, NULL);
}

/* One manifest_entry record (manifest.c's st__ice_entry). */
static void st__mr_entry(st_avro_r_t *r, st_ice_file_t *f, bool metrics)
{
    int32_t status, content;
    const char *fmt;
    size_t fn;
    st_avro_r_int(r, &status);
    f->status = status;
    st__mr_opt_long(r, &f->snapshot_id);
    st__mr_opt_long(r, &f->data_seq);
    st__mr_opt_long(r, &f->file_seq);
    st_avro_r_int(r, &content);
    f->content = content;
    f->path = st__mr_str(r);
    st_avro_r_string(r, &fmt, &fn);
    f->part = st__mr_opt_str(r, &f->part_len);
    st_avro_r_long(r, &f->records);
    st_avro_r_long(r, &f->size);
    if (metrics) st__mr_metrics(r, f);
}

int st_ice_manifest_read(st_ice_entries_t *out, const void *data, size_t len)
{
    memset(out, 0, sizeof *out);
    st_avro_r_t *r;
    bool metrics = false;
    int rc = st__mr_open(&r, data, len, false, &metrics);
    if (rc != ST_OK) return rc;
    size_t n;
    const char *c = st_avro_r_meta(r, "content", &n);
    if (c && n == 7 && memcmp(c, "deletes", 7) == 0)
        out->content = ST_ICE_POS_DELETES;
    else if (!c || n != 4 || memcmp(c, "data", 4) != 0)
        rc = ST_EINVAL;
    while (rc == ST_OK && (rc = st_avro_r_next(r)) == ST_OK) {
        st_vec_push(out, (st_ice_file_t){0});
        st_ice_file_t *f = &out->v[out->n - 1];
        st__mr_entry(r, f, metrics);
        rc = st_avro_r_status(r);
        if (rc == ST_OK && (f->status < ST_ICE_EXISTING || f->status > ST_ICE_DELETED))
            rc = ST_EINVAL;
    }
    st_avro_r_close(r);
    if (rc == ST_ENOTFOUND) return ST_OK;
    st_ice_entries_free(out);
    return rc;
}
