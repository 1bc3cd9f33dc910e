/* SPDX-License-Identifier: MIT */
/*
 * Retention, chat's side (SPEC §6): the tier drops a user's objects whose newest message is past
 * --retention-seconds, whole (src/cold/retention.c), and compaction rewrites an object that mixes
 * expired and live rows. Here, in the batch that drops an object: its rows leave each
 * conversation's cold baseline and the user's totals.
 *
 * A conversation's record survives its messages: an evicted one is re-warmed from the cold tier
 * first (its last seq comes from the seq statistics), and one emptied keeps its record with
 * total_messages 0, so its seq goes on and it stays listed the same everywhere.
 */
#include "internal.h"

#include <stdlib.h>

int st__chat_expired(void *arg, const char *u, size_t ul, const st_pq_meta_t *m, uint64_t *wait)
{
    st_chat_t *c = ((st_chatcold_t *)arg)->chat;
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
    /* the manifest still holds the object here (a re-warm counts it) */
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
    if (rc == ST_OK) rc = st__chat_refresh_totals(c, u, ul, wait);
    return rc;
}
