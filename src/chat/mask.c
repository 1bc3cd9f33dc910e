/* SPDX-License-Identifier: MIT */
/*
 * An erased author's room messages at once (SPEC §2.2). The erasure's slices (rooms/erase.c)
 * turn a user's room messages into tombstones a few at a time, so for a user with many posts
 * that takes long after the 202; from the 202 on every read shows each of them as the tombstone
 * it will become: from, content and metadata null, edit_history [], deleted_at the erasure's
 * request time (st_chat_erasing_at), which is what the slices write (st_chat_delete_unnamed), so
 * the shown and the written tombstone are the same. Whether an author is being erased is its
 * marker in the store ('G', st_chat_erasing_at), in the erasure's own batch: it holds wherever
 * the batch is applied (a follower too) and goes when the erasure is done, when the written
 * tombstones exist. One store read per author per read, remembered in the read's cache.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    st_map_node_t node; /* first: the node is the entry */
    int64_t at;         /* the author's erasure's time; 0: not being erased */
    char name[];
} st_maskname_t;

bool st__chat_mask(st_chat_t *c, st__mask_cache_t *cache, const char *u, size_t ul, const char *j,
                   size_t n, st_buf_t *out, bool *copied, uint64_t *wait)
{
    *copied = false;
    const char *fv;
    size_t fvl;
    /* a name is a JSON string without escapes (names are validated at post) */
    if (!st__chat_jmember(j, n, "from", &fv, &fvl) || fvl < 3 || fv[0] != '"') return false;
    const char *name = fv + 1;
    size_t nl = fvl - 2;
    if (nl > ST_NAME_MAX) return false;
    if (!cache->seen.buckets) st_map_init(&cache->seen);
    st_map_node_t *nd = st_map_get(&cache->seen, name, nl);
    int64_t at = 0;
    st_buf_t copy = {0};
    if (nd) {
        at = ((st_maskname_t *)nd)->at;
    } else {
        st_maskname_t *e = st_malloc(sizeof *e + nl); /* owned by the cache */
        memcpy(e->name, name, nl);
        /* j may be the store's buffer, which the look-up reuses: kept for after it */
        st_buf_append(&copy, j, n);
        j = copy.data;
        if (st_chat_erasing_at(c, ST_USER(e->name, nl), &at, wait) != ST_OK) at = 0;
        e->at = at;
        e->node.key = e->name;
        e->node.klen = nl;
        st_map_insert(&cache->seen, &e->node);
        st_vec_push(&cache->nodes, (void *)e);
    }
    if (!at) {
        if (copy.len) { /* the look-up may have reused j's buffer: the copy is what is shown */
            st_buf_append(out, copy.data, copy.len);
            *copied = true;
        }
        st_buf_free(&copy);
        return false;
    }
    /* as st_chat_delete_unnamed makes it: a tombstone already keeps its deleted_at; a live one
     * gets the erasure's time, after its last edit */
    int64_t edited = st__chat_json_time(j, n, "edited_at");
    int64_t deleted = st__chat_json_time(j, n, "deleted_at");
    if (!deleted) deleted = edited && at <= edited ? edited + 1 : at;
    st_buf_t hist = {0};
    st__chat_render_state(out, st__chat_id_field(u, ul), j, n, "null", 4, "null", 4, edited,
                          deleted, true, &hist);
    st_buf_free(&copy);
    return true;
}

void st__chat_mask_one(st_chat_t *c, st__mask_cache_t *cache, const char *u, size_t ul,
                       const char **j, size_t *n, st_buf_t *tmp, uint64_t *wait)
{
    bool copied;
    st_buf_reset(tmp);
    if (st__chat_mask(c, cache, u, ul, *j, *n, tmp, &copied, wait) || copied) {
        *j = tmp->data;
        *n = tmp->len;
    }
}

void st__chat_mask_free(st__mask_cache_t *cache)
{
    for (size_t i = 0; i < cache->nodes.n; i++)
        free(cache->nodes.v[i]);
    st_vec_free(&cache->nodes);
    if (cache->seen.buckets) st_map_free(&cache->seen);
}
