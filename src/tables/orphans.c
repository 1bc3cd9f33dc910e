/* SPDX-License-Identifier: MIT */
/*
 * orphans: this writer's manifests and manifest lists that no kept snapshot names (a commit
 * killed between its puts and its create of v{N}, a delete that failed, a list another writer's
 * commit expired), deleted. What the kept snapshots name is read from their manifest lists (an
 * other writer's list may carry a manifest of ours); any list that cannot be read stops the sweep
 * before it deletes anything. Only names carrying an incarnation this writer owns are candidates
 * (pre-token names and other writers' never are).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const st_tier_writer_t *w;
    st_tstrs_t named; /* sorted keys */
    st_tstrs_t doomed;
} st__orph_t;

static int st__orph_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void st__orph_name(st__orph_t *o, const char *uri, const st_buf_t *root)
{
    if (strncmp(uri, root->data, root->len) == 0)
        st_vec_push(&o->named, st_strndup(uri + root->len, strlen(uri + root->len)));
}

static int st__orph_list(void *arg, const char *key, uint64_t size)
{
    (void)size;
    st__orph_t *o = arg;
    const char *base = strrchr(key, '/');
    base = base ? base + 1 : key;
    size_t n = strlen(base);
    if (n < 5 || strcmp(base + n - 5, ".avro") != 0) return 0;
    uint64_t inc = st_tier_key_incarnation(base);
    bool mine = inc && inc == o->w->current;
    for (size_t i = 0; !mine && inc && i < o->w->n; i++)
        mine = o->w->owned[i] == inc;
    char *k = (char *)key;
    if (mine &&
        !(o->named.n && bsearch(&k, o->named.v, o->named.n, sizeof *o->named.v, st__orph_cmp)))
        st_vec_push(&o->doomed, st_strndup(key, strlen(key)));
    return 0;
}

int st_table_orphans(st_objstore_t *ms, const st_table_def_t *d, const cJSON *doc,
                     const st_tier_writer_t *w, size_t *deleted)
{
    *deleted = 0;
    if (!w->current) return ST_OK;
    st__orph_t o = {.w = w};
    st_buf_t root = {0}, b = {0}, pfx = {0};
    st_objstore_uri(ms, "", &root);
    int rc = ST_OK;
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(doc, "snapshots"))
    {
        const cJSON *ml = cJSON_GetObjectItemCaseSensitive(s, "manifest-list");
        if (!cJSON_IsString(ml)) continue;
        const char *uri = ml->valuestring;
        st__orph_name(&o, uri, &root);
        if (strncmp(uri, root.data, root.len) != 0) continue; /* not in this store */
        st_ice_mlist_t l;
        b.len = 0;
        rc = st_objstore_read(ms, uri + root.len, ST_TABLES_META_MAX, &b);
        if (rc == ST_ENOTFOUND) { /* gone already: it names nothing to keep */
            rc = ST_OK;
            continue;
        }
        if (rc == ST_OK) rc = st_ice_manifest_list_read(&l, b.data, b.len);
        if (rc != ST_OK) break;
        for (size_t i = 0; i < l.n; i++)
            st__orph_name(&o, l.v[i].path, &root);
        st_ice_mlist_free(&l);
    }
    if (rc == ST_OK) {
        if (o.named.n > 1) qsort(o.named.v, o.named.n, sizeof *o.named.v, st__orph_cmp);
        st_buf_printf(&pfx, "%s/metadata/", d->ice.name);
        st_buf_appendc(&pfx, 0);
        rc = st_objstore_list(ms, pfx.data, st__orph_list, &o);
    }
    for (size_t i = 0; rc == ST_OK && i < o.doomed.n; i++) {
        if (st_objstore_delete(ms, o.doomed.v[i]) == ST_OK) {
            (*deleted)++;
            st_info("tables: %s: deleted %s (named by no snapshot)", d->ice.name, o.doomed.v[i]);
        }
    }
    st_tstrs_free(&o.named);
    st_tstrs_free(&o.doomed);
    st_buf_free(&root);
    st_buf_free(&b);
    st_buf_free(&pfx);
    return rc;
}
