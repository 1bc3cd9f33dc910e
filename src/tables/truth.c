/* SPDX-License-Identifier: MIT */
/*
 * What the tables say is live, for `strata rebuild-meta` (SPEC v5 §5.1): the data files the
 * current snapshot of a kind's table names — its newest metadata version (newest.c, the loader
 * the catalog and the committer use), its current snapshot, that snapshot's manifest list, each
 * data manifest's entries. Only files under the cold store's own root are kept (on a shared
 * --tables-url another group's files live under its own cold URL); the kinds then keep only the
 * objects of this store's writer incarnations, by the token in each key, as a listing would.
 * The files older snapshots the table keeps name and the current one does not are read too: they
 * were replaced or deleted, and a rebuild never takes them back (st_tier_rebuild_pick).
 *
 * Offline (blocking reads), any thread.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

const char *st_tables_key_of(const char *uri, const st_buf_t *root)
{
    return strncmp(uri, root->data, root->len) == 0 ? uri + root->len : NULL;
}

/* The manifest list of the current snapshot of doc, or NULL (none yet). */
static const char *st__current_list(const cJSON *doc, int64_t *id)
{
    *id = st_tmeta_i64(doc, "current-snapshot-id", -1);
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(doc, "snapshots"))
    {
        const cJSON *ml = cJSON_GetObjectItemCaseSensitive(s, "manifest-list");
        if (*id >= 0 && st_tmeta_i64(s, "snapshot-id", -1) == *id && cJSON_IsString(ml))
            return ml->valuestring;
    }
    return NULL;
}

/* Adds to out the data files of one manifest (key in the tables' store) that are the cold
 * store's (owned copies). */
static int st__manifest_files(st_objstore_t *meta, const char *key, const st_buf_t *croot,
                              st_tstrs_t *out)
{
    st_buf_t b = {0};
    st_ice_entries_t e = {0};
    int rc = st_objstore_read(meta, key, ST_TABLES_META_MAX, &b);
    if (rc == ST_OK) rc = st_ice_manifest_read(&e, b.data, b.len);
    for (size_t i = 0; rc == ST_OK && e.content == ST_ICE_DATA && i < e.n; i++) {
        const char *k =
            e.v[i].status == ST_ICE_DELETED ? NULL : st_tables_key_of(e.v[i].path, croot);
        if (!k) continue;
        st_vec_push(out, st_strndup(k, strlen(k)));
    }
    if (rc != ST_OK)
        st_error("rebuild-meta: the manifest %s cannot be read: %s", key, st_strerror(rc));
    st_ice_entries_free(&e);
    st_buf_free(&b);
    return rc;
}

static int st__truth_key_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Manifest keys already read (a manifest never changes: snapshots that carry it over name the
 * same files); owned strings. */
typedef ST_VEC(char *) st_seen_t;

static bool st__seen_add(st_seen_t *seen, const char *key)
{
    for (size_t i = 0; i < seen->n; i++)
        if (strcmp(seen->v[i], key) == 0) return false;
    st_vec_push(seen, st_strndup(key, strlen(key)));
    return true;
}

/* Adds to out (sorted at the end) the files of the snapshot whose manifest list is list_uri, of
 * the manifests not in *seen (added to it). */
static int st__snapshot_files(st_objstore_t *meta, st_objstore_t *cold, const char *list_uri,
                              st_seen_t *seen, st_tstrs_t *out)
{
    st_buf_t mroot = {0}, croot = {0}, b = {0};
    st_objstore_uri(meta, "", &mroot);
    st_objstore_uri(cold, "", &croot);
    st_ice_mlist_t l = {0};
    const char *lk = st_tables_key_of(list_uri, &mroot);
    int rc = lk ? st_objstore_read(meta, lk, ST_TABLES_META_MAX, &b) : ST_EINVAL;
    if (rc == ST_OK) rc = st_ice_manifest_list_read(&l, b.data, b.len);
    if (rc != ST_OK)
        st_error("rebuild-meta: the manifest list %s cannot be read: %s", list_uri,
                 st_strerror(rc));
    for (size_t i = 0; rc == ST_OK && i < l.n; i++) {
        if (l.v[i].content != ST_ICE_DATA) continue;
        const char *mk = st_tables_key_of(l.v[i].path, &mroot);
        if (mk && !st__seen_add(seen, mk)) continue; /* its files are counted already */
        rc = mk ? st__manifest_files(meta, mk, &croot, out) : ST_EINVAL;
        if (!mk) st_error("rebuild-meta: the manifest %s is not in the tables' store", l.v[i].path);
    }
    if (out->n) qsort(out->v, out->n, sizeof *out->v, st__truth_key_cmp);
    st_ice_mlist_free(&l);
    st_buf_free(&b);
    st_buf_free(&mroot);
    st_buf_free(&croot);
    return rc;
}

/* Adds to out->dropped the files of every other snapshot doc keeps that out->keys (the current
 * one's) does not name, sorted, once each. An older snapshot that cannot be read (expired
 * meanwhile) only tells nothing: logged, skipped. */
static void st__dropped(st_objstore_t *meta, st_objstore_t *cold, const cJSON *doc, int64_t current,
                        st_seen_t *seen, st_tier_named_t *out)
{
    const cJSON *sn;
    size_t snaps = 0;
    st_tstrs_t dropped = {0};
    cJSON_ArrayForEach(sn, cJSON_GetObjectItemCaseSensitive(doc, "snapshots"))
    {
        const cJSON *ml = cJSON_GetObjectItemCaseSensitive(sn, "manifest-list");
        if (st_tmeta_i64(sn, "snapshot-id", -1) == current || !cJSON_IsString(ml)) continue;
        st_tstrs_t old = {0};
        if (st__snapshot_files(meta, cold, ml->valuestring, seen, &old) != ST_OK) {
            st_warn("rebuild-meta: an older snapshot's files cannot be read; what it alone named "
                    "is judged by its number");
            st_tstrs_free(&old);
            continue;
        }
        snaps++;
        for (size_t i = 0; i < old.n; i++) {
            const char *k = old.v[i];
            if (bsearch(&k, out->keys, out->n, sizeof *out->keys, st__truth_key_cmp)) continue;
            st_vec_push(&dropped, old.v[i]);
            old.v[i] = NULL;
        }
        st_tstrs_free(&old);
    }
    if (!dropped.n) return;
    qsort(dropped.v, dropped.n, sizeof *dropped.v, st__truth_key_cmp);
    size_t m = 1;
    for (size_t i = 1; i < dropped.n; i++) {
        if (strcmp(dropped.v[i], dropped.v[m - 1]) == 0)
            free(dropped.v[i]);
        else
            dropped.v[m++] = dropped.v[i];
    }
    out->dropped = dropped.v; /* taken: out owns the array and its strings */
    out->ndropped = m;
    st_info("rebuild-meta: %zu older snapshot(s) kept name %zu file(s) the current one does not "
            "(replaced or deleted): never taken back",
            snaps, m);
}

int st_tables_named(st_objstore_t *meta, st_objstore_t *cold, char tag, st_tier_named_t *out)
{
    memset(out, 0, sizeof *out);
    int ti = st_table_of_tag(tag);
    if (ti < 0) return ST_ENOTFOUND;
    const st_table_def_t *d = st_table_def((size_t)ti);
    st_tmeta_t m = {0};
    int rc = st_table_load(meta, d, &m, false);
    int64_t id = -1;
    const char *list = rc == ST_OK ? st__current_list(m.doc, &id) : NULL;
    if (rc == ST_ENOTFOUND || (rc == ST_OK && !list)) {
        st_warn("rebuild-meta: table %s: %s at %s (never committed, or --table-commit-interval "
                "0): every object of it listed in the cold tier is taken",
                d->ice.name, rc == ST_OK ? "no snapshot" : "no table", st_objstore_describe(meta));
        cJSON_Delete(m.doc);
        return ST_OK;
    }
    st_seen_t seen = {0};
    st_tstrs_t keys = {0};
    if (rc == ST_OK) rc = st__snapshot_files(meta, cold, list, &seen, &keys);
    out->keys = keys.v; /* taken: out owns the array and its strings (st_tier_named_free) */
    out->n = keys.n;
    if (rc == ST_OK) st__dropped(meta, cold, m.doc, id, &seen, out);
    for (size_t i = 0; i < seen.n; i++)
        free(seen.v[i]);
    st_vec_free(&seen);
    if (rc == ST_OK) {
        out->known = true;
        st_info("rebuild-meta: table %s v%lld, snapshot %lld: %zu data file(s) of this cold tier; "
                "objects it does not name are taken only when flushed after it",
                d->ice.name, (long long)m.version, (long long)id, out->n);
    } else {
        st_tier_named_free(out);
    }
    cJSON_Delete(m.doc);
    return rc;
}
