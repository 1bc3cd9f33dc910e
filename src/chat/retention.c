/* SPDX-License-Identifier: MIT */
/*
 * Retention (SPEC §6, off by default): a user's Parquet objects whose newest message is older
 * than --retention-seconds are dropped. One batch takes the object out of the manifest and its
 * rows out of the counts (user cold summary, each conversation's cold baseline, the user
 * totals) and records its deletion ('D'); the reaper deletes it from storage only once that
 * batch is durable, so no manifest, before or after a crash, names a deleted object, and a
 * crash never leaves an expired object behind. Whole objects only: a message is kept until
 * every message of its object has expired.
 *
 * A conversation's record survives its messages: an evicted one is re-warmed from the cold
 * tier first (its last seq comes from the seq statistics), and one emptied keeps its record
 * with total_messages 0, so its seq goes on and it stays listed the same everywhere.
 *
 * Nothing waits on the loop: a user's footers are fetched by the cold cache first (the pass
 * runs again for that user once they are in memory).
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
    if (rc == ST_OK) rc = st__chat_doom(c, u, ul, seq, key, wait);
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

/* A user whose footers were not in memory: the pass runs again for it once they are. */
typedef struct {
    st_chat_t *chat;
    st_coldwait_t *w;
    size_t ul;
    char u[];
} st_retry_t;

static void st__retention_resume(void *arg)
{
    st_retry_t *r = arg;
    st__chat_retention(r->chat, r->u, r->ul);
    st_chat_cold_release(r->chat, r->w);
    free(r);
}

size_t st__chat_retention(st_chat_t *c, const char *u, size_t ul)
{
    st_chatcold_t *cc = c->cold;
    if (!cc || !cc->retention_us) return 0;
    int64_t cutoff = st_now_us() - (int64_t)cc->retention_us;
    uint64_t wait = 0;
    st_manifest_t man;
    size_t dropped = 0;
    if (st__chat_manifest(c, u, ul, false, &man, &wait) != ST_OK) return 0;
    /* the footers are fetched off the loop first; then the whole pass runs in one turn */
    if (st__chat_footers_ready(c, &man) == ST_EPARKED) {
        st_retry_t *r = st_malloc(sizeof *r + ul);
        r->chat = c;
        r->w = NULL;
        r->ul = ul;
        memcpy(r->u, u, ul);
        if (!st_chat_cold_wait(c, &r->w, st__retention_resume, r)) {
            st_chat_cold_release(c, r->w); /* nothing to wait for after all: next pass */
            free(r);
        }
        st__chat_manifest_free(&man);
        return 0;
    }
    for (size_t i = 0; i < man.n; i++) {
        const st_pq_meta_t *m;
        if (st__chat_footer(cc, man.keys[i], man.files[i].size, &m) != ST_OK) continue;
        int64_t newest = INT64_MIN;
        for (size_t g = 0; g < m->ngroups; g++)
            if (m->groups[g].max_ts > newest) newest = m->groups[g].max_ts;
        if (newest >= cutoff) break; /* objects are in time order: the rest are newer */
        /* the manifest key's seq: the object key ends in -{seq}.parquet */
        const char *dash = strrchr(man.keys[i], '-');
        uint64_t seq = dash ? strtoull(dash + 1, NULL, 10) : 0;
        int64_t rows = man.files[i].rows;
        if (st__drop(c, u, ul, seq, man.keys[i], &man.files[i], m, &wait) != ST_OK) break;
        st_metric_add(cc->m_retained, (double)rows);
        dropped++;
    }
    st__chat_manifest_free(&man);
    return dropped;
}
