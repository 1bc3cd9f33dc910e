/* SPDX-License-Identifier: MIT */
/*
 * Retention (SPEC §6, off by default): a user's Parquet objects whose newest message is older
 * than --retention-seconds are dropped. One batch takes the object out of the manifest and its
 * rows out of the counts (user cold summary, each conversation's cold baseline, the user
 * totals) and records its deletion ('D'); the reaper deletes it from storage only once that
 * batch is durable, so no manifest, before or after a crash, names a deleted object, and a
 * crash never leaves an expired object behind. Whole objects here; an object that mixes
 * expired and live rows is queued for compaction, which rewrites it without the expired ones
 * (compact.c), so retention is message-exact within a pass or two.
 *
 * A conversation's record survives its messages: an evicted one is re-warmed from the cold
 * tier first (its last seq comes from the seq statistics), and one emptied keeps its record
 * with total_messages 0, so its seq goes on and it stays listed the same everywhere.
 *
 * Nothing waits on the loop: a user's footers are fetched by the cold cache first (the pass
 * runs again for that user once they are in memory, a few users at a time).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Drops one expired object of user u from the manifest and the counts. */
static int st__drop(st_chat_t *c, const char *u, size_t ul, uint64_t seq, const char *key,
                    const st_coldfile_t *f, const st_pq_meta_t *m, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    int rc = ST_OK;
    /* m is borrowed from the footer cache, which re-warming reads through: copy what we need */
    size_t ng = m->ngroups;
    st_pq_group_t *gs = st_malloc(ng * sizeof *gs);
    st_buf_t names = {0};
    for (size_t g = 0; g < ng; g++) {
        gs[g] = m->groups[g];
        gs[g].conv = (const char *)(uintptr_t)names.len;
        st_buf_append(&names, m->groups[g].conv, m->groups[g].conv_len);
    }
    /* first the conversations, while the manifest still holds the object (a re-warm counts it) */
    for (size_t g = 0; rc == ST_OK && g < ng; g++) {
        const char *conv = names.data + (uintptr_t)gs[g].conv;
        st_conv_t cv;
        bool cold;
        rc = st__chat_conv_load(c, u, ul, conv, gs[g].conv_len, &cv, &cold, wait);
        if (rc == ST_OK) {
            cv.base_total -= gs[g].rows;
            size_t ckl = st__chat_ckey(k, u, ul, conv, gs[g].conv_len);
            rc = st_store_put(c->store, k, ckl, &cv, sizeof cv, wait);
        } else if (rc == ST_ENOTFOUND) {
            rc = ST_OK;
        }
    }
    free(gs);
    st_buf_free(&names);
    size_t n = st__chat_ukey(k, 'F', u, ul);
    st__chat_be64(k + n, seq);
    if (rc == ST_OK) rc = st_store_del(c->store, k, n + 8, wait);
    if (rc == ST_OK) rc = st_tier_doom(c->store, u, ul, seq, key, wait);
    st_coldstat_t cs;
    if (rc == ST_OK) rc = st__chat_coldstat(c, u, ul, &cs, wait);
    if (rc == ST_OK) {
        cs.rows -= f->rows;
        cs.bytes -= (int64_t)f->size;
        cs.files--;
        rc = st_store_put(c->store, k, st__chat_ukey(k, 'W', u, ul) - 1, &cs, sizeof cs, wait);
    }
    if (rc == ST_OK) rc = st__chat_refresh_totals(c, u, ul, wait);
    return rc;
}

/* Users whose footers were not in memory wait in a queue; at most ST__RETENTION_FETCHING of
 * them have their footers fetched at once, so a pass over many cold users never floods the
 * worker pool ahead of the reads clients are waiting for. */
#define ST__RETENTION_FETCHING 4

typedef struct st_retry {
    st_map_node_t node; /* in cc->ret_users, key: the user */
    st_list_t link;     /* in cc->ret_queue while queued */
    st_chat_t *chat;
    st_coldwait_t *w; /* NULL while queued */
    size_t ul;
    char u[];
} st_retry_t;

static void st__retention_pump(st_chatcold_t *cc);

static void st__retry_free(st_chatcold_t *cc, st_retry_t *r)
{
    if (st_list_linked(&r->link)) st_list_unlink(&r->link);
    st_map_remove(&cc->ret_users, &r->node);
    free(r);
}

static void st__retention_resume(void *arg)
{
    st_retry_t *r = arg;
    st_chatcold_t *cc = r->chat->cold;
    cc->ret_fetching--;
    st_coldwait_t *w = r->w;
    st_chat_t *c = r->chat;
    char u[ST_NAME_MAX + 1];
    size_t ul = r->ul;
    memcpy(u, r->u, ul);
    st__retry_free(cc, r);
    st__chat_retention(c, u, ul); /* its footers are pinned by w: it runs to the end */
    st_tier_release(cc->tier, w);
    st__retention_pump(cc);
}

/* Starts fetching the footers of queued users while fewer than the limit are under way. */
static void st__retention_pump(st_chatcold_t *cc)
{
    while (!st_list_empty(&cc->ret_queue) && cc->ret_fetching < ST__RETENTION_FETCHING &&
           !st_tier_stopping(cc->tier)) {
        st_retry_t *r = ST_LIST_ITEM(cc->ret_queue.next, st_retry_t, link);
        st_list_unlink(&r->link);
        st_manifest_t man;
        uint64_t wait = 0;
        bool need = st__chat_manifest(cc->chat, r->u, r->ul, false, &man, &wait) == ST_OK &&
                    st__chat_footers_ready(cc->chat, &man) == ST_EPARKED;
        st__chat_manifest_free(&man);
        if (need && st_coldcache_wait(st_tier_cache(cc->tier), &r->w, st__retention_resume, r)) {
            cc->ret_fetching++;
            continue;
        }
        st_coldcache_release(st_tier_cache(cc->tier), r->w);
        r->w = NULL;
        char u[ST_NAME_MAX + 1];
        size_t ul = r->ul;
        memcpy(u, r->u, ul);
        st__retry_free(cc, r);
        if (need) continue; /* nothing could be waited for: the next pass */
        st__chat_retention(cc->chat, u, ul);
    }
}

/* Queues a user whose footers are not in memory (once). */
static void st__retention_queue(st_chatcold_t *cc, const char *u, size_t ul)
{
    st_coldcache_forget(st_tier_cache(cc->tier)); /* fetched in the queue's turn, not now */
    if (!cc->ret_users.buckets) st_map_init(&cc->ret_users);
    if (ul > ST_NAME_MAX || st_map_get(&cc->ret_users, u, ul)) return;
    st_retry_t *r = st_calloc(1, sizeof *r + ul);
    r->chat = cc->chat;
    r->ul = ul;
    memcpy(r->u, u, ul);
    r->node.key = r->u;
    r->node.klen = ul;
    st_map_insert(&cc->ret_users, &r->node);
    st_list_insert(&cc->ret_queue, &r->link);
    st__retention_pump(cc);
}

void st__chat_retention_stop(st_chatcold_t *cc)
{
    if (!cc->ret_users.buckets) return;
    size_t it;
    st_map_node_t *n;
    while ((n = st_map_first(&cc->ret_users, &it)) != NULL) {
        st_retry_t *r = (st_retry_t *)n;
        st_coldcache_release(st_tier_cache(cc->tier), r->w); /* cancels a fetch under way */
        st__retry_free(cc, r);
    }
    st_map_free(&cc->ret_users);
    cc->ret_fetching = 0;
}

size_t st__chat_retention(st_chat_t *c, const char *u, size_t ul)
{
    st_chatcold_t *cc = c->cold;
    int64_t cutoff = cc ? st_tier_cutoff(cc->tier) : 0;
    if (!cutoff) return 0;
    uint64_t wait = 0;
    st_manifest_t man;
    size_t dropped = 0;
    if (st__chat_manifest(c, u, ul, false, &man, &wait) != ST_OK) return 0;
    /* the footers are fetched off the loop first; then the whole pass runs in one turn */
    if (st__chat_footers_ready(c, &man) == ST_EPARKED) {
        st__retention_queue(cc, u, ul);
        st__chat_manifest_free(&man);
        return 0;
    }
    for (size_t i = 0; i < man.n; i++) {
        const st_pq_meta_t *m;
        if (st__chat_footer(cc, man.v[i].key, man.v[i].file.size, &m) != ST_OK) continue;
        int64_t newest = INT64_MIN;
        for (size_t g = 0; g < m->ngroups; g++)
            if (m->groups[g].max_ts > newest) newest = m->groups[g].max_ts;
        if (newest >= cutoff) { /* objects are in time order: the rest are newer */
            /* one mixing expired and live rows is rewritten without them (compact.c) */
            for (size_t g = 0; g < m->ngroups; g++)
                if (m->groups[g].min_ts < cutoff) {
                    st_tier_compact(cc->tier, u, ul, ST_TIER_COMPACT_EXPIRE);
                    break;
                }
            break;
        }
        int64_t rows = man.v[i].file.rows;
        if (st__drop(c, u, ul, man.v[i].seq, man.v[i].key, &man.v[i].file, m, &wait) != ST_OK)
            break;
        st_metric_add(cc->m_retained, (double)rows);
        dropped++;
    }
    st__chat_manifest_free(&man);
    return dropped;
}
