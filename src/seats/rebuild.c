/* SPDX-License-Identifier: MIT */
/*
 * `strata rebuild-meta` for cold bookings (SPEC §9): the manifests of the booking kind
 * (tier.c) made again from the objects under events/{event}/bookings-….parquet. Each object this
 * store owns (its writer record, which the chat rebuild has settled by now, or a manifest that
 * names it already) is read whole: its booking ids, from the booking_id column. An object whose
 * ids are all in a larger one kept already is what a crash left behind a compaction (its sources
 * or a merge whose swap never happened): its deletion is recorded, never counted. The others go
 * into their event's manifest ('F'), its summary ('W') and the id generator's floor.
 *
 * Offline only (no loop needed): plain blocking reads, writes staged in the store.
 */
#include "internal.h"
#include "strata/cold.h"
#include "strata/tier.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char ev[ST_NAME_MAX + 1];
    size_t el;
    char *key;
    uint64_t size;
    ST_VEC(uint64_t) ids; /* sorted */
    st_tier_file_t file;
    st_buf_t stats; /* its column stats (colstats.c), from the footer read here */
} st_bobj_t;

typedef ST_VEC(st_bobj_t) st_bobjs_t;

/* "events/{folder}/bookings-….parquet" (the folder as tier.c names it: a leading '.' as '~'). */
static int st__on_booking_object(void *arg, const char *key, uint64_t size)
{
    st_bobjs_t *o = arg;
    size_t kl = strlen(key);
    if (strncmp(key, "events/", 7) != 0 || kl < 8 || strcmp(key + kl - 8, ".parquet") != 0)
        return 0;
    const char *ev = key + 7, *slash = strchr(ev, '/');
    if (!slash || strncmp(slash + 1, "bookings-", 9) != 0 || strchr(slash + 1, '/')) return 0;
    st_bobj_t b = {.size = size};
    b.el = (size_t)(slash - ev);
    if (b.el == 0 || b.el > ST_NAME_MAX) return 0;
    memcpy(b.ev, ev, b.el);
    if (b.ev[0] == '~') b.ev[0] = '.';
    if (!st_name_valid(b.ev, b.el)) return 0;
    b.key = st_strndup(key, kl);
    st_vec_push(o, b);
    return 0;
}

static int st__u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The object's booking ids (sorted) and its file record. */
static int st__read_ids(st_objstore_t *obj, st_bobj_t *b)
{
    st_buf_t d = {0};
    uint32_t flen;
    st_pq_file_t f = {0};
    const st_pq_schema_t *s = &st_seats_booking_schema;
    int rc = b->size >= 12 ? st_objstore_get(obj, b->key, 0, b->size, &d) : ST_EINVAL;
    if (rc == ST_OK && d.len != b->size) rc = ST_EIO;
    if (rc == ST_OK) rc = st_pq_footer_len((const uint8_t *)d.data + d.len - 8, d.len, &flen);
    if (rc == ST_OK)
        rc = st_pq_parse_footer(s, (const uint8_t *)d.data + d.len - 8 - flen, flen, d.len, &f);
    /* the tables' metrics of the file, in its record: no commit reads its footer again */
    if (rc == ST_OK && st_tier_stats_of(d.data, d.len, &b->stats) != ST_OK) st_buf_reset(&b->stats);
    for (size_t g = 0; rc == ST_OK && g < f.ngroups; g++) {
        const st_pq_rowgroup_t *G = &f.groups[g];
        st_pq_table_t t;
        if (G->offset + G->length > d.len) {
            rc = ST_EINVAL;
            break;
        }
        rc = st_pq_read_group(s, G, (const uint8_t *)d.data + G->offset, G->length, &t);
        for (int64_t i = 0; rc == ST_OK && i < t.rows; i++)
            st_vec_push(&b->ids, st_tier_row_id(s, &t, (size_t)i));
        if (rc == ST_OK) st_pq_table_free(&t);
    }
    if (f.mem) st_pq_file_free(&f);
    st_buf_free(&d);
    if (rc != ST_OK) return rc;
    if (b->ids.n > 1) qsort(b->ids.v, b->ids.n, sizeof *b->ids.v, st__u64_cmp);
    b->file = (st_tier_file_t){.min_id = b->ids.n ? b->ids.v[0] : 0,
                               .max_id = b->ids.n ? b->ids.v[b->ids.n - 1] : 0,
                               .rows = (int64_t)b->ids.n,
                               .size = b->size};
    return ST_OK;
}

static bool st__ids_has(const uint64_t *v, size_t n, uint64_t id)
{
    return n && bsearch(&id, v, n, sizeof *v, st__u64_cmp) != NULL; /* none: v may be NULL */
}

static int st__by_event_then_size(const void *a, const void *b)
{
    const st_bobj_t *x = a, *y = b;
    if (x->el != y->el || memcmp(x->ev, y->ev, x->el) != 0) {
        size_t n = x->el < y->el ? x->el : y->el;
        int c = memcmp(x->ev, y->ev, n);
        return c ? c : (x->el < y->el ? -1 : 1);
    }
    return x->ids.n > y->ids.n ? -1 : x->ids.n < y->ids.n; /* the larger first */
}

/* One event's objects [o, o + n), the larger first. */
static int st__rebuild_event(st_store_t *store, st_bobj_t *o, size_t n, size_t *objects,
                             int64_t *rows, uint64_t *max_id, uint64_t *wait)
{
    char ow[ST_TIER_OWNER_MAX];
    size_t ol = st_tier_owner(ow, 'b', o[0].ev, o[0].el);
    st_tier_stat_t st;
    st_tier_manifest_t man;
    int rc = st_tier_stat(store, ow, ol, &st, wait);
    if (rc == ST_OK) rc = st_tier_manifest(store, ow, ol, false, &man, wait);
    if (rc != ST_OK) return rc;
    if (!st.next_seq) st.next_seq = 1;
    ST_VEC(uint64_t) kept = {0};
    st_tier_obj_t *put = st_calloc(n, sizeof *put); /* keys borrowed from o */
    size_t nput = 0;
    for (size_t i = 0; i < man.n; i++) /* what the manifest holds already stays */
        for (size_t k = 0; k < n; k++)
            if (strcmp(o[k].key, man.v[i].key) == 0)
                for (size_t j = 0; j < o[k].ids.n; j++)
                    st_vec_push(&kept, o[k].ids.v[j]);
    for (size_t i = 0; i < n && rc == ST_OK; i++) {
        bool known = false;
        for (size_t m = 0; m < man.n && !known; m++)
            known = strcmp(man.v[m].key, o[i].key) == 0;
        if (known) continue;
        if (kept.n > 1) qsort(kept.v, kept.n, sizeof *kept.v, st__u64_cmp);
        size_t dup = 0;
        for (size_t j = 0; j < o[i].ids.n; j++)
            dup += st__ids_has(kept.v, kept.n, o[i].ids.v[j]);
        uint64_t seq = st.next_seq++;
        if (dup && dup == o[i].ids.n) { /* left behind by a compaction: deleted, never counted */
            st_warn("rebuild: %s repeats bookings of a larger object; it will be deleted",
                    o[i].key);
            rc = st_tier_doom(store, ow, ol, seq, o[i].key, wait);
            continue;
        }
        if (dup)
            st_warn("rebuild: %s shares %zu booking(s) with another object; kept (reads show "
                    "them once, a compaction of the event refuses)",
                    o[i].key, dup);
        put[nput++] = (st_tier_obj_t){.file = o[i].file,
                                      .seq = seq,
                                      .key = o[i].key,
                                      .stats = (uint8_t *)o[i].stats.data,
                                      .stats_len = o[i].stats.len};
        for (size_t j = 0; j < o[i].ids.n; j++)
            st_vec_push(&kept, o[i].ids.v[j]);
        if (o[i].file.max_id > *max_id) *max_id = o[i].file.max_id;
        *rows += o[i].file.rows;
        ++*objects;
    }
    /* into the event's manifest, and its summary: the tier's */
    if (rc == ST_OK) rc = st_tier_rebuild_owner(store, ow, ol, put, nput, &st, wait);
    free(put);
    st_vec_free(&kept);
    st_tier_manifest_free(&man);
    return rc;
}

/* A store that had no writer record (lost without a backup that knew it) takes over the one
 * writer the booking objects name, as the chat rebuild does with its objects; objects of several
 * writers are left alone (which were this store's cannot be told). */
static int st__adopt(st_store_t *store, const st_bobjs_t *o, st_tier_writer_t *w, uint64_t *wait)
{
    uint64_t one, other;
    st_tier_rebuild_writers(o->v, o->n, sizeof *o->v, offsetof(st_bobj_t, key), &one, &other);
    if (one && w->n > 1 && !st_tier_writer_owns(w, o->v[0].key)) {
        st_warn("rebuild: the cold bookings' writer (w%016llx) is not the one the messages' "
                "objects name: they are left alone",
                (unsigned long long)one);
        return ST_OK;
    }
    if (other) {
        st_warn("rebuild: cold bookings of several writers (w%016llx, w%016llx…): which were this "
                "store's cannot be told; only those its writer record names are rebuilt",
                (unsigned long long)one, (unsigned long long)other);
        return ST_OK;
    }
    int rc = one && !st_tier_writer_owns(w, o->v[0].key) ? st_tier_writer_adopt(store, one, wait)
                                                         : ST_OK;
    return rc == ST_OK ? st_tier_writer_get(store, w, wait) : rc;
}

static int st__bk_by_key(const void *a, const void *b)
{
    return strcmp(((const st_bobj_t *)a)->key, ((const st_bobj_t *)b)->key);
}

static char st__bk_key_tag(const char *key)
{
    (void)key;
    return 'b';
}

int st__bk_rebuild(void *arg, st_tier_rebuild_t *rb, uint64_t *wait)
{
    (void)arg;
    st_store_t *store = rb->store;
    st_objstore_t *obj = rb->obj;
    size_t objects = 0, others = 0;
    int64_t rows = 0;
    st_bobjs_t o = {0};
    st_tier_writer_t w;
    int rc = st_objstore_list(obj, "events/", st__on_booking_object, &o);
    if (rc == ST_ENOTFOUND) rc = ST_OK;
    if (rc == ST_OK && o.n > 1) qsort(o.v, o.n, sizeof *o.v, st__bk_by_key); /* by event */
    if (rc == ST_OK) /* those the bookings table names, or flushed after its snapshot */
        o.n = st_tier_rebuild_filter(rb, st__bk_key_tag, o.v, o.n, sizeof *o.v,
                                     offsetof(st_bobj_t, key));
    if (rc == ST_OK && o.n) rc = st_tier_writer_get(store, &w, wait);
    if (rc == ST_OK && o.n && rb->adopt) rc = st__adopt(store, &o, &w, wait);
    size_t keep = 0;
    for (size_t i = 0; i < o.n && rc == ST_OK; i++) {
        char ow[ST_TIER_OWNER_MAX];
        size_t ol = st_tier_owner(ow, 'b', o.v[i].ev, o.v[i].el);
        bool mine = st_tier_writer_owns(&w, o.v[i].key) ||
                    st_tier_manifest_names(store, ow, ol, o.v[i].key, wait);
        if (!mine) { /* another writer's (a node sharing the bucket): left alone */
            free(o.v[i].key);
            others++;
            continue;
        }
        if ((rc = st__read_ids(obj, &o.v[i])) != ST_OK)
            st_error("rebuild: %s cannot be read; stopping", o.v[i].key);
        o.v[keep++] = o.v[i];
    }
    if (rc == ST_OK) o.n = keep;
    if (rc == ST_OK && o.n > 1) qsort(o.v, o.n, sizeof *o.v, st__by_event_then_size);
    uint64_t max_id = 0;
    for (size_t i = 0; i < o.n && rc == ST_OK;) {
        size_t j = i + 1;
        while (j < o.n && o.v[j].el == o.v[i].el && memcmp(o.v[j].ev, o.v[i].ev, o.v[i].el) == 0)
            j++;
        rc = st__rebuild_event(store, o.v + i, j - i, &objects, &rows, &max_id, wait);
        i = j;
    }
    if (rc == ST_OK && max_id) rc = st__cold_floor_raise(store, max_id, wait);
    for (size_t i = 0; i < (rc == ST_OK ? o.n : keep); i++) {
        free(o.v[i].key);
        st_vec_free(&o.v[i].ids);
        st_buf_free(&o.v[i].stats);
    }
    st_vec_free(&o);
    if (rc == ST_OK && (objects || others))
        st_info("rebuild-meta: %zu cold booking object(s) (%lld bookings) back in their events' "
                "manifests; %zu of other writers left alone",
                objects, (long long)rows, others);
    return rc;
}
