/* SPDX-License-Identifier: MIT */
/*
 * Recounting a conversation from its source of truth (SPEC §6): the hot index of its messages
 * plus the row counts of its row groups in the user's Parquet objects (footers only; no data
 * is read). Runs in one loop turn, so no post or flush can interleave: what it writes is exact
 * for the instant it ran. Footers not in memory make it ST_EPARKED before it reads anything;
 * the caller waits for the cold cache and runs it again.
 */
#include "internal.h"

#include <string.h>

static int st__last_key(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)val;
    (void)vlen;
    if (klen >= 8) *(uint64_t *)arg = st_be64_get((const uint8_t *)key + klen - 8);
    return 1;
}

/* The seq of the conversation's newest hot message (its record: i64 timestamp | i64 seq | …). */
static int st__newest_hot_seq(st_chat_t *c, const char *u, size_t ul, const uint8_t *pre, size_t pl,
                              int64_t *seq, uint64_t *wait)
{
    uint64_t id = 0;
    int rc = st_store_range(c->store, pre, pl, NULL, 0, NULL, 0, true, st__last_key, &id, wait);
    if (rc < 0) return rc;
    if (!id) return ST_OK;
    uint8_t k[ST__KEY_CAP];
    size_t n = st__chat_ukey(k, 'M', u, ul);
    st_be64_put(k + n, id);
    const void *v;
    size_t vl;
    if ((rc = st_store_get(c->store, k, n + 8, &v, &vl, wait)) != ST_OK) return rc;
    if (vl >= 16) memcpy(seq, (const char *)v + 8, 8);
    return ST_OK;
}

int st_chat_recount(st_chat_t *c, const st_owner_t *o, const char *conv, size_t cl, int64_t *drift,
                    uint64_t *wait)
{
    char u[ST_CHAT_OWNER_MAX];
    size_t ul = st_chat_owner_bytes(u, o);
    uint8_t k[ST__KEY_CAP];
    st_conv_t cv;
    size_t ckl = st__chat_ckey(k, u, ul, conv, cl);
    *drift = 0;
    int rc = st__chat_conv_get(c->store, k, ckl, &cv, wait);
    if (rc) return rc;
    int64_t hot = 0, cold = 0, top = 0;
    uint8_t pre[ST__KEY_CAP];
    size_t pl = st__chat_nprefix(pre, u, ul, conv, cl);
    if ((rc = st_store_count(c->store, pre, pl, &hot, wait)) != ST_OK) return rc;
    if (hot && (rc = st__newest_hot_seq(c, u, ul, pre, pl, &top, wait)) != ST_OK) return rc;
    if (c->cold) {
        st_manifest_t man;
        rc = st__chat_manifest(c, u, ul, false, &man, wait);
        if (rc == ST_OK)
            rc =
                st_tier_footers_ready(c->cold->tier, u, ul, &man); /* ST_EPARKED: nothing written */
        uint64_t mask_id = 0;
        int64_t mask_seq;
        if (rc == ST_OK && st__chat_mask_get(c, u, ul, conv, cl, &mask_id, &mask_seq, wait))
            mask_id = 0;
        for (size_t i = 0; i < man.n && rc == ST_OK; i++) {
            const st_pq_meta_t *m;
            rc = st__chat_footer(c->cold, man.v[i].key, man.v[i].file.size, &m);
            for (size_t g = 0; rc == ST_OK && g < m->ngroups; g++)
                if (m->groups[g].conv_len == cl && memcmp(m->groups[g].conv, conv, cl) == 0 &&
                    !(mask_id && m->groups[g].max_id <= mask_id)) {
                    cold += m->groups[g].rows;
                    if (m->groups[g].max_seq > top) top = m->groups[g].max_seq;
                }
        }
        st__chat_manifest_free(&man);
        if (rc) return rc;
    }
    /* tombstones are no messages (SPEC §2.2): out of both sides */
    st_coldstat_t cs;
    int64_t dead_cold = 0, dead_hot = 0;
    if ((rc = st_tier_stat(c->store, u, ul, &cs, wait)) ||
        (rc = st__chat_dead_count(c, u, ul, conv, cl, cs.rows ? cs.watermark : 0, &dead_cold,
                                  &dead_hot, wait)))
        return rc;
    hot -= dead_hot;
    cold -= dead_cold;
    *drift = hot + cold - (cv.base_total + cv.hot_total);
    /* seq is not a count: a repair only ever raises it to the highest one stored */
    bool seq_low = top > cv.last_seq;
    if (*drift == 0 && cv.base_total == cold && cv.hot_total == hot && !seq_low) return ST_OK;
    /* the record's split follows the truth too, so the next flush moves the right counts */
    cv.base_total = cold;
    cv.hot_total = hot;
    if (seq_low) cv.last_seq = top;
    if ((rc = st_store_put(c->store, k, ckl, &cv, sizeof cv, wait)) != ST_OK || *drift == 0)
        return rc;
    /* the user's totals are the sum of their conversations: recount them as well */
    return st__chat_refresh_totals(c, u, ul, wait);
}

int st_chat_test_drift(st_chat_t *c, const char *u, size_t ul, const char *conv, size_t cl,
                       int64_t by, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    st_conv_t cv;
    size_t ckl = st__chat_ckey(k, u, ul, conv, cl);
    int rc = st__chat_conv_get(c->store, k, ckl, &cv, wait);
    if (rc) return rc;
    cv.hot_total += by;
    return st_store_put(c->store, k, ckl, &cv, sizeof cv, wait);
}

/* Collected first and called after the scan: fn may read and write the store. */
static int st__collect_conv(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_buf_t *b = arg;
    const char *k = key;
    size_t ul = strnlen(k + 1, klen - 1);
    if (ul == 0 || ul > ST_CHAT_OWNER_MAX || vlen == 0 || vlen > ST_NAME_MAX) return 0;
    uint16_t l[2] = {(uint16_t)ul, (uint16_t)vlen};
    st_buf_append(b, l, sizeof l);
    st_buf_append(b, k + 1, ul);
    st_buf_append(b, val, vlen);
    return 0;
}

size_t st_chat_each_conversation(st_chat_t *c, st_chat_conv_fn fn, void *arg)
{
    st_buf_t b = {0};
    uint64_t wait = 0;
    char pre = 'U';
    st_store_scan(c->store, &pre, 1, st__collect_conv, &b, &wait);
    size_t n = 0;
    for (size_t i = 0; i + 4 <= b.len; n++) {
        uint16_t l[2];
        memcpy(l, b.data + i, sizeof l);
        st_owner_t o = st_chat_owner_from(b.data + i + 4, l[0]);
        fn(arg, &o, b.data + i + 4 + l[0], l[1]);
        i += 4 + (size_t)l[0] + l[1];
    }
    st_buf_free(&b);
    return n;
}

typedef struct {
    st_buf_t *b;
    size_t left;
    st_buf_t *cursor;
} st__conv_page_t;

static int st__page_conv(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st__conv_page_t *pg = arg;
    if (pg->left == 0) { /* the next page starts here */
        st_buf_reset(pg->cursor);
        st_buf_append(pg->cursor, key, klen);
        return 1;
    }
    size_t before = pg->b->len;
    st__collect_conv(pg->b, key, klen, val, vlen);
    if (pg->b->len > before) pg->left--;
    return 0;
}

size_t st_chat_conversations_page(st_chat_t *c, st_buf_t *cursor, size_t max, bool *done,
                                  st_chat_conv_fn fn, void *arg)
{
    st_buf_t b = {0};
    uint64_t wait = 0;
    char pre = 'U';
    st__conv_page_t pg = {&b, max, cursor};
    int rc = st_store_scan_from(c->store, &pre, 1, cursor->len ? cursor->data : NULL, cursor->len,
                                st__page_conv, &pg, &wait);
    *done = rc != 1;
    size_t n = 0;
    for (size_t i = 0; i + 4 <= b.len; n++) {
        uint16_t l[2];
        memcpy(l, b.data + i, sizeof l);
        st_owner_t o = st_chat_owner_from(b.data + i + 4, l[0]);
        fn(arg, &o, b.data + i + 4 + l[0], l[1]);
        i += 4 + (size_t)l[0] + l[1];
    }
    st_buf_free(&b);
    return n;
}

/* ---- hybrid fields: hot record, else the cold tier (an evicted conversation) ---- */

int st__chat_conv_load(st_chat_t *c, const char *u, size_t ul, const char *conv, size_t cl,
                       st_conv_t *cv, bool *from_cold, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    *from_cold = false;
    int rc = st__chat_conv_get(c->store, k, st__chat_ckey(k, u, ul, conv, cl), cv, wait);
    if (rc != ST_ENOTFOUND || !c->cold) {
        if (rc == ST_OK && c->cold) st_metric_add(c->cold->m_hybrid_hot, 1);
        return rc;
    }
    /* not hot and never flushed (marks.c): new, known without a cold read (SPEC §7) */
    if (st__chat_cold_none(c, u, ul, conv, cl, wait)) return ST_ENOTFOUND;
    /* else evicted, or an older store's: rebuilt from the footers of the user's objects (no
     * message data is read) */
    st_manifest_t man;
    rc = st__chat_manifest(c, u, ul, false, &man, wait);
    if (rc == ST_OK)
        rc = st_tier_footers_ready(c->cold->tier, u, ul, &man); /* ST_EPARKED: the caller waits */
    st_conv_t x = {UINT64_MAX, 0, INT64_MAX, INT64_MIN, 0, 0, 0};
    uint64_t mask_id = 0;
    int64_t mask_seq = 0;
    if (st__chat_mask_get(c, u, ul, conv, cl, &mask_id, &mask_seq, wait) != ST_OK) mask_id = 0;
    for (size_t i = 0; i < man.n && rc == ST_OK; i++) {
        const st_pq_meta_t *m;
        rc = st__chat_footer(c->cold, man.v[i].key, man.v[i].file.size, &m);
        for (size_t g = 0; rc == ST_OK && g < m->ngroups; g++) {
            const st_pq_group_t *G = &m->groups[g];
            if (G->conv_len != cl || memcmp(G->conv, conv, cl) != 0) continue;
            if (mask_id && G->max_id <= mask_id) continue; /* a deleted conversation's rows */
            x.base_total += G->rows;
            if (G->min_id < x.first) x.first = G->min_id;
            if (G->max_id > x.last) x.last = G->max_id;
            if (G->min_ts < x.created) x.created = G->min_ts;
            if (G->max_ts > x.updated) x.updated = G->max_ts;
            if (G->max_seq > x.last_seq) x.last_seq = G->max_seq;
        }
    }
    st__chat_manifest_free(&man);
    if (rc) return rc;
    if (!x.base_total) return ST_ENOTFOUND;
    int64_t dead_cold = 0, dead_hot = 0; /* tombstones are no messages (SPEC §2.2) */
    if ((rc = st__chat_dead_count(c, u, ul, conv, cl, UINT64_MAX, &dead_cold, &dead_hot, wait)))
        return rc;
    x.base_total -= dead_cold;
    if (x.last_seq < x.base_total) x.last_seq = x.base_total; /* files without seq statistics */
    st_metric_add(c->cold->m_hybrid_cold, 1);
    *cv = x;
    *from_cold = true;
    return ST_OK;
}
