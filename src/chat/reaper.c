/* SPDX-License-Identifier: MIT */
/*
 * Deleting objects from storage, durably: chat's side. An object leaves storage only after the
 * batch that took it out of the manifest (retention, compaction), or found it orphaned (a flush
 * never recorded), is durable: that same batch records the deletion ('D' u 0 seq -> object key,
 * st__chat_doom). The tier's reaper (src/cold/reaper.c) deletes the objects of durable 'D'
 * records on a worker, then drops the records.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

int st__chat_doom(st_chat_t *c, const char *u, size_t ul, uint64_t seq, const char *key,
                  uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    size_t n = st__chat_ukey(k, 'D', u, ul);
    st__chat_be64(k + n, seq);
    return st_store_put(c->store, k, n + 8, key, strlen(key), wait);
}

typedef struct {
    st_buf_t seqs; /* u64 seq, u16 length, object key */
} st_pset_t;

static int st__collect_p(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_pset_t *p = arg;
    if (klen < 8 || vlen == 0 || vlen > 4096) return 0;
    uint64_t seq = st__chat_rd64((const uint8_t *)key + klen - 8);
    uint16_t l = (uint16_t)vlen;
    st_buf_append(&p->seqs, &seq, sizeof seq);
    st_buf_append(&p->seqs, &l, sizeof l);
    st_buf_append(&p->seqs, val, vlen);
    return 0;
}

int st__chat_orphans(st_chat_t *c, const char *u, size_t ul, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    size_t pl = st__chat_ukey(k, 'P', u, ul);
    st_pset_t ps = {{0}};
    int rc = st_store_scan(c->store, k, pl, st__collect_p, &ps, wait);
    for (size_t i = 0; rc == ST_OK && i < ps.seqs.len;) {
        uint64_t seq;
        uint16_t l;
        memcpy(&seq, ps.seqs.data + i, sizeof seq);
        memcpy(&l, ps.seqs.data + i + sizeof seq, sizeof l);
        char *key = st_strndup(ps.seqs.data + i + sizeof seq + sizeof l, l);
        i += sizeof seq + sizeof l + l;
        if (st__chat_compacting(c->cold, u, ul, seq)) { /* in flight, not an orphan */
            free(key);
            continue;
        }
        size_t n = st__chat_ukey(k, 'F', u, ul);
        st__chat_be64(k + n, seq);
        const void *v;
        size_t vl;
        rc = st_store_get(c->store, k, n + 8, &v, &vl, wait);
        if (rc == ST_ENOTFOUND) { /* written (maybe) but never recorded: it goes */
            rc = st__chat_doom(c, u, ul, seq, key, wait);
            if (rc == ST_OK && c->cold) st_metric_add(c->cold->m_orphans, 1);
            if (rc == ST_OK)
                st_warn("cold: %s was written by a flush that never completed; deleting it", key);
        }
        free(key);
        if (rc == ST_OK) {
            n = st__chat_ukey(k, 'P', u, ul);
            st__chat_be64(k + n, seq);
            rc = st_store_del(c->store, k, n + 8, wait);
        }
    }
    st_buf_free(&ps.seqs);
    return rc;
}

void st__chat_reap(st_chatcold_t *cc)
{
    if (cc && !cc->tier.stopping) st_tier_reap(cc->tier.reaper);
}
