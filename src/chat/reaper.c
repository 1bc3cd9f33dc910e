/* SPDX-License-Identifier: MIT */
/*
 * Deleting objects from storage, durably. An object leaves storage only after the batch that
 * took it out of the manifest (retention), or found it orphaned (a flush never recorded), is
 * durable: that same batch records the deletion ('D' u 0 seq -> object key). The reaper deletes
 * the objects of durable 'D' records on a worker, then drops the records; a crash in between
 * leaves the records, and start-up deletes again (a missing object counts as deleted). So no
 * manifest ever names a deleted object, and no expired or orphaned object outlives a restart.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define ST__REAP_MAX        256   /* objects per pass */
#define ST__REAP_BACKOFF_MS 30000 /* after a pass with failures (storage down) */

typedef struct {
    uv_work_t req;
    st_chatcold_t *cc;
    size_t n;
    char *dkeys[ST__REAP_MAX]; /* the 'D' records (u16 length, then the key) */
    char *objs[ST__REAP_MAX];  /* their object keys, NUL-terminated */
    int rc[ST__REAP_MAX];
} st_reapjob_t;

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

/* ---- the passes ---- */

static int st__collect_d(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_reapjob_t *j = arg;
    if (j->n == ST__REAP_MAX) return 1;
    if (klen > ST__KEY_CAP || vlen == 0) return 0;
    uint16_t l = (uint16_t)klen;
    j->dkeys[j->n] = st_malloc(sizeof l + klen);
    memcpy(j->dkeys[j->n], &l, sizeof l);
    memcpy(j->dkeys[j->n] + sizeof l, key, klen);
    j->objs[j->n++] = st_strndup(val, vlen);
    return 0;
}

static void st__reap_work(uv_work_t *req)
{
    st_reapjob_t *j = req->data;
    for (size_t i = 0; i < j->n; i++)
        j->rc[i] = st_objstore_delete(j->cc->obj, j->objs[i]);
}

static void st__reap_free(st_reapjob_t *j)
{
    for (size_t i = 0; i < j->n; i++) {
        free(j->dkeys[i]);
        free(j->objs[i]);
    }
    free(j);
}

static void st__reap_done(uv_work_t *req, int status)
{
    st_reapjob_t *j = req->data;
    st_chatcold_t *cc = j->cc;
    cc->reaping = false;
    if (!cc->stopping && status == 0) {
        uint64_t wait = 0;
        size_t done = 0;
        for (size_t i = 0; i < j->n; i++) {
            if (j->rc[i] != ST_OK) {
                st_warn("cold: could not delete %s (%s); trying again later", j->objs[i],
                        st_strerror(j->rc[i]));
                cc->reap_after_ms = uv_now(cc->loop) + ST__REAP_BACKOFF_MS;
                continue;
            }
            uint16_t l;
            memcpy(&l, j->dkeys[i], sizeof l);
            if (st_store_del(cc->chat->store, j->dkeys[i] + sizeof l, l, &wait) == ST_OK) done++;
        }
        st_metric_add(cc->m_reaped, (double)done);
    }
    st__reap_free(j);
    if (cc->stopping) st__chat_cold_maybe_free(cc); /* it may have waited for this pass */
}

void st__chat_reap(st_chatcold_t *cc)
{
    if (!cc || cc->reaping || cc->stopping || uv_now(cc->loop) < cc->reap_after_ms) return;
    st_store_t *s = cc->chat->store;
    st_reapjob_t *j = st_calloc(1, sizeof *j);
    j->cc = cc;
    j->req.data = j;
    uint64_t wait = 0;
    char pre = 'D';
    st_store_scan(s, &pre, 1, st__collect_d, j, &wait);
    /* only records whose batch is durable: until then the manifest may still name the object */
    uint64_t durable = st_store_durable_id(s);
    size_t keep = 0;
    for (size_t i = 0; i < j->n; i++) {
        uint16_t l;
        memcpy(&l, j->dkeys[i], sizeof l);
        uint64_t w = 0;
        const void *v;
        size_t vl;
        if (st_store_get(s, j->dkeys[i] + sizeof l, l, &v, &vl, &w) == ST_OK && w <= durable) {
            j->dkeys[keep] = j->dkeys[i];
            j->objs[keep++] = j->objs[i];
        } else {
            free(j->dkeys[i]);
            free(j->objs[i]);
        }
    }
    j->n = keep;
    if (keep == 0 || uv_queue_work(cc->loop, &j->req, st__reap_work, st__reap_done) != 0) {
        st__reap_free(j);
        return;
    }
    cc->reaping = true;
}
