/* SPDX-License-Identifier: MIT */
/*
 * pq_stats: a Parquet footer's column statistics by field id, without the kind's schema: what an
 * Iceberg manifest entry's column metrics are made of (src/tables/metrics.c, SPEC v5 §5.1).
 *
 * Why not st_pq_parse_footer: that one checks a footer against the schema a kind reads it with
 * (and so needs that kind's st_pq_schema_t); the tables hold files of every kind and want only
 * the footer's own word (the thrift structs are read by the reader's walkers, st__pq_elem and
 * st__pq_column_chunk: one decoder of a footer, two ways of using it): each top-level leaf's
 * field_id, physical type, value and null counts and min/max (Parquet's min_value/max_value,
 * type-defined order: the only ones strata writes), summed and widened over the row groups. Leaves
 * under a group (a LIST's elements, a struct's fields) are left out: Iceberg keeps no bounds for a
 * repeated field's values either.
 */
#include "pq_internal.h"

#include <string.h>

/* The schema list: map[leaf] = the index in out of a top-level leaf, or -1. */
static int st__pqs_schema(st_tr_t *r, int *map, int *nleaves, st_pq_colstat_t *out, size_t max,
                          size_t *n)
{
    int elem;
    size_t ne;
    if (!st_tr_list(r, &elem, &ne) || elem != ST_TC_STRUCT || ne < 2) return ST_EINVAL;
    int64_t rem[ST_PQ_MAX_DEPTH + 1];
    int d = 0;
    st_pq_elem_t e;
    if (!st__pq_elem(r, &e)) return ST_EINVAL; /* the root */
    rem[0] = e.children;
    *nleaves = 0;
    for (size_t i = 1; i < ne && r->ok; i++) {
        if (!st__pq_elem(r, &e)) return ST_EINVAL;
        if (rem[d]-- <= 0) return ST_EINVAL; /* more elements than the groups hold */
        if (e.children > 0) {
            if (d + 1 > ST_PQ_MAX_DEPTH) return ST_EINVAL;
            rem[++d] = e.children;
            continue;
        }
        if (*nleaves >= ST_PQ_MAX_NODES) return ST_EINVAL;
        map[*nleaves] = -1;
        if (d == 0 && e.rep != ST_PQ_REPEATED && e.fid > 0 && e.fid <= INT32_MAX && *n < max) {
            map[*nleaves] = (int)*n;
            out[(*n)++] = (st_pq_colstat_t){.id = (int)e.fid, .type = (int)e.type, .bounds = true};
        }
        ++*nleaves;
        while (d > 0 && rem[d] == 0)
            d--;
    }
    return r->ok && d == 0 && rem[0] == 0 ? ST_OK : ST_EINVAL;
}

/* The byte width of a physical type's PLAIN value whose order strata's bounds keep (0: none). */
static size_t st__pqs_width(int type)
{
    return type == ST_PQ_INT64 ? 8 : type == ST_PQ_INT32 ? 4 : type == ST_PQ_BOOLEAN ? 1 : 0;
}

/* Signed little-endian (a BOOLEAN: its one byte, false < true). */
static int64_t st__pqs_val(const uint8_t *p, size_t w)
{
    uint64_t v = 0;
    for (size_t k = 0; k < w; k++)
        v |= (uint64_t)p[k] << (8 * k);
    if (w == 4) return (int32_t)(uint32_t)v;
    return (int64_t)v;
}

/* One column chunk's metadata (the reader's walker, parquet_read.c) into c (a row group's part). */
static void st__pqs_chunk(st_tr_t *r, st_pq_colstat_t *c)
{
    st_pq_colmeta_t m = {0};
    size_t w = st__pqs_width(c->type);
    st__pq_column_chunk(r, &m);
    c->values += m.values;
    if (!m.has_nulls || c->nulls < 0 || m.nulls < 0 || m.nulls > m.values)
        c->nulls = -1;
    else
        c->nulls += m.nulls;
    if (m.has_nulls && m.nulls == m.values) return; /* every value null: no bounds to widen by */
    if (!w || !m.min || !m.max || m.min_len != w || m.max_len != w) {
        c->bounds = false;
        return;
    }
    if (!c->len || st__pqs_val(m.min, w) < st__pqs_val(c->min, w)) memcpy(c->min, m.min, w);
    if (!c->len || st__pqs_val(m.max, w) > st__pqs_val(c->max, w)) memcpy(c->max, m.max, w);
    c->len = w;
}

int st_pq_top_stats(const uint8_t *p, size_t len, st_pq_colstat_t *out, size_t max, size_t *n)
{
    st_tr_t r;
    int16_t last = 0, id;
    int t, elem, nleaves = -1, map[ST_PQ_MAX_NODES];
    bool bv;
    size_t ng;
    *n = 0;
    st_tr_init(&r, p, len);
    if (!st_tr_enter(&r)) return ST_EINVAL;
    int rc = ST_OK;
    while (rc == ST_OK && st_tr_field(&r, &last, &id, &t, &bv)) {
        if (id == 2 && t == ST_TC_LIST) {
            rc = nleaves < 0 ? st__pqs_schema(&r, map, &nleaves, out, max, n) : ST_EINVAL;
            continue;
        }
        if (id != 4 || t != ST_TC_LIST || nleaves < 0) {
            st_tr_skip(&r, t);
            continue;
        }
        if (!st_tr_list(&r, &elem, &ng) || elem != ST_TC_STRUCT) break;
        for (size_t g = 0; g < ng && r.ok && rc == ST_OK; g++) { /* RowGroup */
            int16_t lg = 0;
            if (!st_tr_enter(&r)) break;
            while (rc == ST_OK && st_tr_field(&r, &lg, &id, &t, &bv)) {
                size_t nc;
                if (id != 1 || t != ST_TC_LIST) {
                    st_tr_skip(&r, t);
                    continue;
                }
                if (!st_tr_list(&r, &elem, &nc) || elem != ST_TC_STRUCT || nc != (size_t)nleaves) {
                    rc = ST_EINVAL;
                    break;
                }
                for (size_t c = 0; c < nc && r.ok; c++) {
                    if (map[c] >= 0)
                        st__pqs_chunk(&r, &out[map[c]]);
                    else
                        st_tr_skip(&r, ST_TC_STRUCT);
                }
            }
            st_tr_leave(&r);
        }
    }
    st_tr_leave(&r);
    if (rc == ST_OK && (!r.ok || nleaves < 0)) rc = ST_EINVAL;
    for (size_t i = 0; i < *n; i++) /* bounds only where some row group had a value */
        if (!out[i].len) out[i].bounds = false;
    if (rc != ST_OK) *n = 0;
    return rc;
}
