/* SPDX-License-Identifier: MIT */
/*
 * Retention (SPEC §6, off by default), the tier's for every kind: an owner's objects whose newest
 * row is older than --retention-seconds are dropped, whole. One batch takes the object out of the
 * manifest and its rows out of the counts (the owner's cold summary here, the kind's own counts
 * through its member's expired hook) and records its deletion: the swap of intent.c, without
 * an intent. The reaper deletes it from storage only once that batch is durable, so no manifest,
 * before or after a crash, names a deleted object, and a crash never leaves an expired object
 * behind. Like a compaction's, the deletion is held (hold.c) while a kept Iceberg snapshot or
 * backup point may name the object: retention is data policy, not privacy (an erasure is what
 * overrides the hold), and a restore to a point before the drop should read what that point
 * held (the restored node drops it again by its own retention). An object that mixes expired and
 * live rows is queued for compaction, which rewrites it without the expired ones (compact.c), so
 * retention is row-exact within a pass or two. Rows are dated by the statistics of the first
 * top-level TIMESTAMP_US column (with statistics) of the member's schema; kinds without an expired
 * hook, a schema or such a column are never retained.
 *
 * Nothing waits on the loop: an owner's footers are fetched by the cold cache first, and the owner
 * is retained again once they are in memory. Owners whose footers are not in memory wait in a
 * queue; at most ST__RETAIN_FETCHING have their footers fetched at once, so a pass over many cold
 * owners never floods the worker pool ahead of the reads clients are waiting for.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define ST__RETAIN_FETCHING 4

typedef struct {
    st_map_node_t node; /* in t->ret_users, key: the owner */
    st_list_t link;     /* in t->ret_queue while queued */
    st_tier_t *tier;
    st_coldwait_t *w; /* NULL while queued */
    size_t ol;
    char o[];
} st_tier_retry_t;

static void st__pump(st_tier_t *t);

static void st__retry_free(st_tier_t *t, st_tier_retry_t *r)
{
    if (st_list_linked(&r->link)) st_list_unlink(&r->link);
    st_map_remove(&t->ret_users, &r->node);
    free(r);
}

static void st__resume(void *arg)
{
    st_tier_retry_t *r = arg;
    st_tier_t *t = r->tier;
    t->ret_fetching--;
    st_coldwait_t *w = r->w;
    char o[ST_TIER_OWNER_MAX];
    size_t ol = r->ol;
    memcpy(o, r->o, ol);
    st__retry_free(t, r);
    st_tier_retain(t, o, ol); /* its footers are pinned by w: it runs to the end */
    st_tier_release(t, w);
    st__pump(t);
}

/* Starts fetching the footers of queued owners while fewer than the limit are under way. */
static void st__pump(st_tier_t *t)
{
    while (!st_list_empty(&t->ret_queue) && t->ret_fetching < ST__RETAIN_FETCHING && !t->stopping) {
        st_tier_retry_t *r = ST_LIST_ITEM(t->ret_queue.next, st_tier_retry_t, link);
        st_list_unlink(&r->link);
        st_tier_manifest_t man;
        uint64_t wait = 0;
        bool need = st_tier_manifest(t->store, r->o, r->ol, false, &man, &wait) == ST_OK &&
                    st_tier_footers_ready(t, r->o, r->ol, &man) == ST_EPARKED;
        st_tier_manifest_free(&man);
        if (need && st_coldcache_wait(t->cache, &r->w, st__resume, r)) {
            t->ret_fetching++;
            continue;
        }
        st_coldcache_release(t->cache, r->w);
        r->w = NULL;
        char o[ST_TIER_OWNER_MAX];
        size_t ol = r->ol;
        memcpy(o, r->o, ol);
        st__retry_free(t, r);
        if (need) continue; /* nothing could be waited for: the next pass */
        st_tier_retain(t, o, ol);
    }
}

/* Queues an owner whose footers are not in memory (once). */
static void st__retention_queue(st_tier_t *t, const char *o, size_t ol)
{
    st_coldcache_forget(t->cache); /* fetched in the queue's turn, not now */
    if (!t->ret_users.buckets) st_map_init(&t->ret_users);
    if (ol >= ST_TIER_OWNER_MAX || st_map_get(&t->ret_users, o, ol)) return;
    st_tier_retry_t *r = st_calloc(1, sizeof *r + ol);
    r->tier = t;
    r->ol = ol;
    memcpy(r->o, o, ol);
    r->node.key = r->o;
    r->node.klen = ol;
    st_map_insert(&t->ret_users, &r->node);
    st_list_insert(&t->ret_queue, &r->link);
    st__pump(t);
}

void st__tier_retain_stop(st_tier_t *t)
{
    if (!t->ret_users.buckets) return;
    size_t it;
    st_map_node_t *n;
    while ((n = st_map_first(&t->ret_users, &it)) != NULL) {
        st_tier_retry_t *r = (st_tier_retry_t *)n;
        st_coldcache_release(t->cache, r->w); /* cancels a fetch under way */
        st__retry_free(t, r);
    }
    st_map_free(&t->ret_users);
    t->ret_fetching = 0;
}

typedef struct {
    const st_tier_member_t *m;
    const char *o;
    size_t ol;
    const st_pq_file_t *file;
} st_expiry_t;

static int st__expired(void *arg, uint64_t *wait)
{
    st_expiry_t *x = arg;
    return x->m->expired ? x->m->expired(x->m->arg, x->o, x->ol, x->file, wait) : ST_OK;
}

/* Whether the object (its footer m) is past the cutoff; one mixing expired and live rows is
 * queued for compaction (objects are in time order: the rest are newer). */
/* Leaves under a field (one for a leaf). */
static int st__leaves(const st_pq_field_t *f)
{
    if (f->type != ST_PQ_GROUP) return 1;
    int n = 0;
    for (size_t i = 0; i < f->nchildren; i++)
        n += st__leaves(&f->children[i]);
    return n;
}

/* The leaf whose statistics date a row: the schema's first top-level TIMESTAMP_US column with
 * statistics; -1: none (its objects are not retained). */
static int st__time_leaf(const st_pq_schema_t *s)
{
    int leaf = 0;
    for (size_t i = 0; i < s->nfields; i++) {
        const st_pq_field_t *f = &s->fields[i];
        if (f->type == ST_PQ_INT64 && f->logical == ST_PQ_TIMESTAMP_US && (f->hints & ST_PQ_STATS))
            return leaf;
        leaf += st__leaves(f);
    }
    return -1;
}

static int64_t st__i64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return (int64_t)v;
}

/* A row group's times by the leaf's statistics; false when it has none. */
static bool st__rowgroup_times(const st_pq_rowgroup_t *g, int leaf, int64_t *lo, int64_t *hi)
{
    const st_pq_chunk_t *c = &g->chunks[leaf];
    if (!c->min || !c->max || c->min_len != 8 || c->max_len != 8) return false;
    *lo = st__i64(c->min);
    *hi = st__i64(c->max);
    return true;
}

static bool st__past(st_tier_t *t, const char *o, size_t ol, const st_pq_file_t *f, int leaf,
                     int64_t cutoff)
{
    int64_t newest = INT64_MIN, lo, hi;
    for (size_t g = 0; g < f->ngroups; g++)
        if (!st__rowgroup_times(&f->groups[g], leaf, &lo, &hi))
            return false; /* undated rows are kept */
        else if (hi > newest)
            newest = hi;
    if (newest < cutoff) return true;
    for (size_t g = 0; g < f->ngroups; g++)
        if (st__rowgroup_times(&f->groups[g], leaf, &lo, &hi) && lo < cutoff) {
            st_tier_compact(t, o, ol, ST_TIER_COMPACT_EXPIRE);
            break;
        }
    return false;
}

size_t st_tier_retain(st_tier_t *t, const char *o, size_t ol)
{
    int64_t cutoff = st_tier_cutoff(t);
    const st_tier_member_t *mb = st__tier_member(t, o, ol);
    /* a kind's objects are retained when it has an expired hook and its rows a time column */
    if (!cutoff || t->stopping || !mb || !mb->expired || !mb->schema) return 0;
    int leaf = st__time_leaf(mb->schema);
    if (leaf < 0) return 0;
    uint64_t wait = 0;
    st_tier_manifest_t man;
    size_t dropped = 0;
    if (st_tier_manifest(t->store, o, ol, false, &man, &wait) != ST_OK) return 0;
    /* the footers are fetched off the loop first; then the whole pass runs in one turn */
    if (st_tier_footers_ready(t, o, ol, &man) == ST_EPARKED) {
        st__retention_queue(t, o, ol);
        st_tier_manifest_free(&man);
        return 0;
    }
    for (size_t i = 0; i < man.n; i++) {
        const st_pq_file_t *f;
        if (st_coldcache_pqfile(t->cache, mb->schema, man.v[i].key, man.v[i].file.size, &f) !=
            ST_OK)
            continue;
        if (!st__past(t, o, ol, f, leaf, cutoff)) break;
        st_tier_file_t none = {0};
        st_expiry_t x = {mb, o, ol, f};
        st_tier_swap_t sw = {
            .old = &man.v[i], .nold = 1, .file = &none, .kind = st__expired, .arg = &x};
        if (st__tier_swap(t->store, o, ol, &sw, &wait) != ST_OK) break;
        st_metric_add(t->m_retained, (double)man.v[i].file.rows);
        dropped++;
    }
    st_tier_manifest_free(&man);
    return dropped;
}

int st_tier_footers_ready(st_tier_t *t, const char *o, size_t ol, const st_tier_manifest_t *man)
{
    const st_tier_member_t *mb = st__tier_member(t, o, ol);
    if (!t->cache || !mb || !mb->schema) return ST_OK;
    bool parked = false;
    for (size_t i = 0; i < man->n; i++) {
        const st_pq_file_t *f;
        int rc = st_coldcache_pqfile(t->cache, mb->schema, man->v[i].key, man->v[i].file.size, &f);
        if (rc == ST_EPARKED)
            parked = true;
        else if (rc != ST_OK && !parked)
            return rc;
    }
    return parked ? ST_EPARKED : ST_OK;
}
