/* SPDX-License-Identifier: MIT */
/*
 * Retention (SPEC §6, off by default): a user's Parquet objects whose newest message is older
 * than --retention-seconds are dropped. One batch takes the object out of the manifest and its
 * rows out of the counts (user cold summary, each conversation's cold baseline, the user
 * totals); the object itself is deleted a pass later, once that batch is long durable, so no
 * read ever finds a manifest entry without its object. Whole objects only: a message is kept
 * until every message of its object has expired.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Drops one expired object of user u from the manifest and the counts. */
static int st__drop(st_chat_t *c, const char *u, size_t ul, uint64_t seq, const st_coldfile_t *f,
                    const st_pq_meta_t *m, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    size_t n = st__chat_ukey(k, 'F', u, ul);
    st__chat_be64(k + n, seq);
    int rc = st_store_del(c->store, k, n + 8, wait);
    for (size_t g = 0; rc == ST_OK && g < m->ngroups; g++) {
        const st_pq_group_t *G = &m->groups[g];
        st_conv_t cv;
        size_t ckl = st__chat_ckey(k, u, ul, G->conv, G->conv_len);
        rc = st__chat_get_fixed(c->store, k, ckl, &cv, sizeof cv, wait);
        if (rc == ST_ENOTFOUND) { /* evicted: its fields come from the remaining objects */
            rc = ST_OK;
            continue;
        }
        if (rc == ST_OK) {
            cv.base_total -= G->rows;
            rc = st_store_put(c->store, k, ckl, &cv, sizeof cv, wait);
        }
    }
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

size_t st__chat_retention(st_chat_t *c, const char *u, size_t ul)
{
    st_chatcold_t *cc = c->cold;
    if (!cc || !cc->retention_us) return 0;
    int64_t cutoff = st_now_us() - (int64_t)cc->retention_us;
    uint64_t wait = 0;
    st_manifest_t man;
    size_t dropped = 0;
    if (st__chat_manifest(c, u, ul, false, &man, &wait) != ST_OK) return 0;
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
        if (st__drop(c, u, ul, seq, &man.files[i], m, &wait) != ST_OK) break;
        st_metric_add(cc->m_retained, (double)rows);
        /* deleted from storage a pass later, when the batch above is durable */
        cc->doomed = st_realloc(cc->doomed, (cc->ndoomed + 1) * sizeof *cc->doomed);
        cc->doomed[cc->ndoomed++] = st_strndup(man.keys[i], strlen(man.keys[i]));
        dropped++;
    }
    st__chat_manifest_free(&man);
    return dropped;
}

void st__chat_delete_doomed(st_chatcold_t *cc)
{
    for (size_t i = 0; i < cc->ndoomed; i++) {
        if (st_objstore_delete(cc->obj, cc->doomed[i]) != ST_OK)
            st_warn("cold: could not delete expired object %s", cc->doomed[i]);
        free(cc->doomed[i]);
    }
    free(cc->doomed);
    cc->doomed = NULL;
    cc->ndoomed = 0;
}
