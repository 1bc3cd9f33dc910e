/* SPDX-License-Identifier: MIT */
/*
 * Reading any kind's cold rows through its schema (see strata/tier.h, st_tier_scan): the owner's
 * manifest lists its objects, their footers (parsed against the kind's schema, cached) give each
 * row group's id range from the sort leaf's statistics, and the row groups that can hold the ids
 * wanted are decoded (cached) and handed to the kind, highest ids first. Objects of one owner may
 * overlap in ids (a kind whose rows leave the hot store out of id order: finished bookings), so
 * the order is by row group, the highest maximum first, and the scan stops once the kind kept
 * `need` rows higher than any maximum left.
 *
 * Nothing waits: everything comes from the cold cache; a scan that misses any of it hands over
 * what it can (the kind drops it) and returns ST_EPARKED with the rest on the want list.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const st_tier_obj_t *obj;
    const st_pq_rowgroup_t *g;
    size_t gi, nleaves;
    uint64_t min, max;
} st_sgroup_t;

static uint64_t st__le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static int st__by_max_desc(const void *a, const void *b)
{
    uint64_t x = ((const st_sgroup_t *)a)->max, y = ((const st_sgroup_t *)b)->max;
    return x > y ? -1 : x < y;
}

static int st__u64_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x > y ? -1 : x < y;
}

uint64_t st_tier_row_id(const st_pq_schema_t *s, const st_pq_table_t *tab, size_t i)
{
    if (s->sort_leaf < 0 || (size_t)s->sort_leaf >= tab->ncols) return 0;
    const st_pq_column_t *c = &tab->cols[s->sort_leaf];
    return i < c->n && c->n == (size_t)tab->rows ? (uint64_t)c->iv.v[i] : 0;
}

int st_tier_scan(st_tier_t *t, const char *o, size_t ol, const st_tier_scanq_t *q,
                 uint64_t *frontier, uint64_t *wait)
{
    *frontier = 0;
    const st_tier_member_t *mb = t ? st__tier_member(t, o, ol) : NULL;
    const st_pq_schema_t *schema = q->schema ? q->schema : mb ? mb->schema : NULL;
    if (!t || !t->cache || !schema || schema->sort_leaf < 0) return ST_OK;
    st_tier_manifest_t man;
    int rc = st_tier_manifest(t->store, o, ol, false, &man, wait);
    if (rc != ST_OK) return rc;
    ST_VEC(st_sgroup_t) gs = {0};
    bool parked = false;
    size_t leaf = (size_t)schema->sort_leaf;
    for (size_t i = 0; i < man.n && rc == ST_OK; i++) {
        const st_tier_file_t *f = &man.v[i].file;
        if ((q->lo && f->max_id <= q->lo) || (q->hi && f->min_id >= q->hi)) continue;
        const st_pq_file_t *pf;
        rc = st_coldcache_pqfile(t->cache, schema, man.v[i].key, f->size, &pf);
        if (rc == ST_EPARKED) {
            parked = true;
            rc = ST_OK;
            continue;
        }
        for (size_t gi = 0; rc == ST_OK && gi < pf->ngroups; gi++) {
            const st_pq_rowgroup_t *g = &pf->groups[gi];
            const st_pq_chunk_t *c = leaf < pf->nleaves ? &g->chunks[leaf] : NULL;
            st_sgroup_t sg = {&man.v[i], g, gi, pf->nleaves, 0, UINT64_MAX};
            if (c && c->min && c->max && c->min_len == 8 && c->max_len == 8) {
                sg.min = st__le64(c->min);
                sg.max = st__le64(c->max);
            }
            if ((q->lo && sg.max <= q->lo) || (q->hi && sg.min >= q->hi)) continue;
            st_vec_push(&gs, sg);
        }
    }
    if (rc == ST_OK && parked) rc = ST_EPARKED; /* the groups' order needs every footer */
    if (rc == ST_OK && gs.n > 1) qsort(gs.v, gs.n, sizeof *gs.v, st__by_max_desc);
    st_tier_ids_t kept = {0};
    size_t looked = 0, i = 0;
    for (; rc == ST_OK && i < gs.n; i++) {
        const st_sgroup_t *sg = &gs.v[i];
        if (kept.n >= q->need && q->need) {
            qsort(kept.v, kept.n, sizeof *kept.v, st__u64_desc);
            if (sg->max < kept.v[q->need - 1]) break; /* nothing left can make the page */
        }
        /* out of budget, unless the frontier would not move below hi: row groups that straddle
         * hi (their rows under it handed over again) never use up a page, so paging ends */
        if (q->budget && looked >= q->budget && (!q->hi || sg->max < q->hi - 1)) break;
        const st_pq_table_t *tab;
        int r =
            st_coldcache_table(t->cache, schema, sg->obj->key, sg->gi, sg->g, sg->nleaves, &tab);
        if (r == ST_EPARKED) { /* its rows are unknown: the ones after it are fetched too */
            parked = true;
            looked += (size_t)sg->g->rows;
            continue;
        }
        if (r != ST_OK) {
            rc = r;
            break;
        }
        looked += (size_t)tab->rows;
        if (!parked && q->group(q->arg, tab, &kept) != 0) {
            i++;
            break;
        }
    }
    if (rc == ST_OK && parked) rc = ST_EPARKED;
    if (rc == ST_OK && i < gs.n)
        *frontier = gs.v[i].max == UINT64_MAX ? UINT64_MAX : gs.v[i].max + 1;
    st_vec_free(&kept);
    st_vec_free(&gs);
    st_tier_manifest_free(&man);
    return rc;
}
