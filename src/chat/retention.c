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
#include <string.h>

typedef struct {
    const char *conv;
    size_t cl;
    st_buf_t ids;
} st_dead_t;

static int st__dead_in(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_dead_t *d = arg;
    if (klen >= 8 && vlen == d->cl && memcmp(val, d->conv, vlen) == 0) {
        uint64_t id = st_be64_get((const uint8_t *)key + klen - 8);
        st_buf_append(&d->ids, &id, 8);
    }
    return 0;
}

/* The tombstones (SPEC §2.2) of a conversation among ids lo..hi leave with their rows: counted
 * (they were no messages) and their records out. */
static int st__dead_rows(st_chat_t *c, const char *u, size_t ul, const char *conv, size_t cl,
                         uint64_t lo, uint64_t hi, int64_t *n, uint64_t *wait)
{
    uint8_t pre[ST__KEY_CAP], a[ST__KEY_CAP], b[ST__KEY_CAP], k[ST__KEY_CAP];
    size_t pl = st__chat_ukey(pre, 'Y', u, ul);
    memcpy(a, pre, pl);
    st_be64_put(a + pl, lo);
    memcpy(b, pre, pl);
    st_be64_put(b + pl, hi == UINT64_MAX ? hi : hi + 1);
    st_dead_t d = {conv, cl, {0}};
    int rc = st_store_range(c->store, pre, pl, a, pl + 8, b, pl + 8, false, st__dead_in, &d, wait);
    rc = rc < 0 ? rc : ST_OK;
    *n = (int64_t)(d.ids.len / 8);
    for (size_t i = 0; i + 8 <= d.ids.len && rc == ST_OK; i += 8) {
        uint64_t id;
        memcpy(&id, d.ids.data + i, 8);
        for (const char *ks = "YEef"; *ks && rc == ST_OK; ks++) {
            size_t kn = st__chat_ukey(k, *ks, u, ul);
            st_be64_put(k + kn, id);
            rc = st_store_del(c->store, k, kn + 8, wait);
            if (rc == ST_ENOTFOUND) rc = ST_OK;
        }
    }
    st_buf_free(&d.ids);
    return rc;
}

int st__chat_expired(void *arg, const char *u, size_t ul, const st_pq_file_t *f, uint64_t *wait)
{
    st_chat_t *c = ((st_chatcold_t *)arg)->chat;
    uint8_t k[ST__KEY_CAP];
    /* f is borrowed from the footer cache, which re-warming reads through: summarized into our
     * own memory */
    st_pq_meta_t m;
    int rc = st_parquet_meta_of(f, &m);
    if (rc != ST_OK) return ST_OK; /* not a message file: it holds none of our counts */
    size_t ng = m.ngroups;
    st_pq_group_t *gs = m.groups;
    /* the manifest still holds the object here (a re-warm counts it) */
    int64_t gone = 0;
    for (size_t g = 0; rc == ST_OK && g < ng; g++) {
        const char *conv = gs[g].conv;
        st_conv_t cv;
        bool cold;
        int64_t dead = 0;
        uint64_t mask_id;
        int64_t mask_seq;
        if (st__chat_mask_get(c, u, ul, conv, gs[g].conv_len, &mask_id, &mask_seq, wait) == ST_OK &&
            gs[g].max_id <= mask_id) { /* a deleted conversation's rows: counted as gone */
            gone += gs[g].rows;
            continue;
        }
        /* loaded first: one re-warmed from the footers counts these tombstones out already */
        rc = st__chat_conv_load(c, u, ul, conv, gs[g].conv_len, &cv, &cold, wait);
        int r2 =
            st__dead_rows(c, u, ul, conv, gs[g].conv_len, gs[g].min_id, gs[g].max_id, &dead, wait);
        gone += dead;
        if (r2 != ST_OK) rc = r2;
        if (rc == ST_OK) {
            cv.base_total -= gs[g].rows - dead;
            size_t ckl = st__chat_ckey(k, u, ul, conv, gs[g].conv_len);
            rc = st_store_put(c->store, k, ckl, &cv, sizeof cv, wait);
            if (rc == ST_OK && c->expired_fn) {
                st_owner_t o = st_chat_owner_from(u, ul);
                rc = c->expired_fn(c->expired_arg, &o, conv, gs[g].conv_len, gs[g].rows, wait);
            }
        } else if (rc == ST_ENOTFOUND) {
            rc = ST_OK;
        }
    }
    st_parquet_meta_free(&m);
    if (rc == ST_OK && gone) rc = st__chat_gone_add(c, u, ul, -gone, wait);
    if (rc == ST_OK) rc = st__chat_refresh_totals(c, u, ul, wait);
    return rc;
}

void st_chat_on_expired(st_chat_t *c, st_chat_expired_fn fn, void *arg)
{
    c->expired_fn = fn;
    c->expired_arg = arg;
}

uint64_t st_chat_dropped_below(st_chat_t *c, const st_owner_t *o, uint64_t *wait)
{
    char u[ST_CHAT_OWNER_MAX];
    size_t ul = st_chat_owner_bytes(u, o);
    st_manifest_t man = {0};
    uint64_t floor = 0;
    if (st__chat_manifest(c, u, ul, false, &man, wait) != ST_OK) return 0;
    for (size_t i = 0; i < man.n; i++) {
        uint64_t lo = man.v[i].file.min_id;
        if (!lo) { /* an object whose ids are not recorded: nothing is known */
            floor = 0;
            break;
        }
        if (!floor || lo < floor) floor = lo;
    }
    if (!man.n) { /* all dropped (or none flushed: watermark 0) */
        st_coldstat_t cs;
        if (st_tier_stat(c->store, u, ul, &cs, wait) == ST_OK && cs.watermark)
            floor = cs.watermark + 1;
    }
    st__chat_manifest_free(&man);
    return floor;
}
