/* SPDX-License-Identifier: MIT */
/*
 * The tier's reaper: deleting objects from storage, durably (see strata/tier.h). An object
 * leaves storage only after the batch that took it out of the manifest (retention, compaction),
 * or found it orphaned (a flush never recorded), is durable: that same batch records the
 * deletion ('D' owner 0 seq -> object key). The reaper deletes the objects of durable 'D' records
 * on a worker, then drops the records; a crash in between leaves the records, and start-up
 * deletes again (a missing object counts as deleted). So no manifest ever names a deleted
 * object, and no expired or orphaned object outlives a restart. An object of an incarnation the
 * store does not own (writer.c: inherited by a restore from a node that may still read it) is
 * never deleted: its record goes, the object stays.
 * Held deletions (hold.c: objects a swap replaced, which a kept snapshot or backup point may
 * still name) join a pass after the 'D' records: the reaper walks them from the oldest and stops
 * at the first replaced at or after the hold's cutoff, so a pass never reads the records still
 * held. A held record goes with both its keys (time and owner index).
 */
#include "strata/idle.h"
#include "strata/coldshare.h"
#include "strata/tier.h"
#include "strata/cold.h"
#include "strata/metrics.h"

#include <stdlib.h>
#include <string.h>

#define ST__REAP_MAX        256   /* objects per pass */
#define ST__REAP_BACKOFF_MS 30000 /* after a pass with failures (storage down) */

struct st_tier_reaper {
    uv_loop_t *loop;
    st_store_t *store;
    st_objstore_t *obj;
    bool reaping;      /* a deletion pass is on a worker */
    bool closing;      /* closed while a pass was out: freed when it is back */
    uint64_t after_ms; /* no pass before (after one that failed) */
    void (*closed)(void *arg);
    void *closed_arg;
    st_metric_t *m_reaped, *m_kept;
    int64_t (*cutoff)(void *arg); /* st_tier_reaper_hold; NULL: everything held */
    void *cutoff_arg;
};

typedef struct {
    uv_work_t req;
    st_tier_reaper_t *r;
    size_t n;
    char *dkeys[ST__REAP_MAX]; /* the 'D' records (u16 length, then the key) */
    char *objs[ST__REAP_MAX];  /* their object keys, NUL-terminated */
    char *ikeys[ST__REAP_MAX]; /* a held record's owner-index key (u16 length, key); else NULL */
    int64_t cutoff;            /* held records replaced before it are collected */
    bool kept[ST__REAP_MAX];   /* another writer's object: its record goes, the object stays */
    int rc[ST__REAP_MAX];
} st_reapjob_t;

static char *st__lkey(const void *key, size_t klen)
{
    uint16_t l = (uint16_t)klen;
    char *p = st_malloc(sizeof l + klen);
    memcpy(p, &l, sizeof l);
    memcpy(p + sizeof l, key, klen);
    return p;
}

static int st__collect_d(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_reapjob_t *j = arg;
    if (j->n == ST__REAP_MAX) return 1;
    if (klen > ST_KEY_MAX || vlen == 0) return 0;
    j->dkeys[j->n] = st__lkey(key, klen);
    j->objs[j->n++] = st_strndup(val, vlen);
    return 0;
}

/* "\0cold_hold" 0 be64 at owner 0 be64 seq -> object key, oldest first: stops at the first one
 * still held */
static int st__collect_held(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_reapjob_t *j = arg;
    const uint8_t *k = key;
    if (j->n == ST__REAP_MAX) return 1;
    if (klen < ST_TIER_HOLD_PL + 17 || klen > ST_TIER_HOLD_KEY_MAX || vlen == 0) return 0;
    if ((int64_t)st_be64_get(k + ST_TIER_HOLD_PL) >= j->cutoff) return 1;
    size_t ol = klen - ST_TIER_HOLD_PL - 17;
    uint8_t ik[ST_TIER_HOLD_KEY_MAX];
    size_t il = st_tier_held_key(ik, (const char *)k + ST_TIER_HOLD_PL + 8, ol, true,
                                 st_be64_get(k + klen - 8));
    j->dkeys[j->n] = st__lkey(key, klen);
    j->ikeys[j->n] = st__lkey(ik, il);
    j->objs[j->n++] = st_strndup(val, vlen);
    return 0;
}

static void st__reap_work(uv_work_t *req)
{
    st_sched_worker(); /* a pool thread: its wake-ups never preempt the loop */
    st_reapjob_t *j = req->data;
    for (size_t i = 0; i < j->n; i++)
        j->rc[i] = j->kept[i] ? ST_OK : st_objstore_delete(j->r->obj, j->objs[i]);
}

static void st__reap_free(st_reapjob_t *j)
{
    for (size_t i = 0; i < j->n; i++) {
        free(j->dkeys[i]);
        free(j->ikeys[i]);
        free(j->objs[i]);
    }
    free(j);
}

static void st__free(st_tier_reaper_t *r)
{
    void (*closed)(void *) = r->closed;
    void *arg = r->closed_arg;
    free(r);
    if (closed) closed(arg);
}

static void st__reap_done(uv_work_t *req, int status)
{
    st_reapjob_t *j = req->data;
    st_tier_reaper_t *r = j->r;
    r->reaping = false;
    if (!r->closing && status == 0) {
        uint64_t wait = 0;
        size_t done = 0;
        for (size_t i = 0; i < j->n; i++) {
            if (j->rc[i] != ST_OK) {
                st_warn("cold: could not delete %s (%s); trying again later", j->objs[i],
                        st_strerror(j->rc[i]));
                r->after_ms = uv_now(r->loop) + ST__REAP_BACKOFF_MS;
                continue;
            }
            uint16_t l;
            memcpy(&l, j->dkeys[i], sizeof l);
            if (st_store_del(r->store, j->dkeys[i] + sizeof l, l, &wait) != ST_OK) continue;
            done++;
            if (j->ikeys[i]) {
                memcpy(&l, j->ikeys[i], sizeof l);
                st_store_del(r->store, j->ikeys[i] + sizeof l, l, &wait);
            }
        }
        st_metric_add(r->m_reaped, (double)done);
        for (size_t i = 0; i < j->n; i++)
            if (j->kept[i] && j->rc[i] == ST_OK) st_metric_add(r->m_kept, 1);
    }
    st__reap_free(j);
    if (r->closing) st__free(r); /* it waited for this pass */
}

static st_store_t *st__held_store; /* the open reaper's, for the gauge (NULL: none) */

/* The count is a walk of the held records: a scrape walks them again only when some key of the
 * held records' first byte was written since (an idle node's scrape walks nothing). */
static double st__held_gauge(void *arg)
{
    (void)arg;
    static const st_store_t *of;
    static uint64_t gen;
    static size_t n;
    if (!st__held_store) return 0;
    uint64_t g = st_store_writes_of(st__held_store, (uint8_t)st_tier_held_pre[0]);
    if (g != gen || of != st__held_store) {
        n = st_tier_held_count(st__held_store);
        gen = g;
        of = st__held_store;
    }
    return (double)n;
}

int st_tier_reaper_open(st_tier_reaper_t **out, uv_loop_t *loop, st_store_t *store,
                        st_objstore_t *obj)
{
    st_tier_reaper_t *r = st_calloc(1, sizeof *r);
    r->loop = loop;
    r->store = store;
    r->obj = obj;
    r->m_reaped = st_metrics_counter("strata_cold_objects_deleted_total",
                                     "Objects deleted from storage (expired or orphaned)", "");
    r->m_kept = st_metrics_counter("strata_cold_objects_kept_total",
                                   "Objects out of the manifest left in storage: another writer's "
                                   "(the node a restore came from)",
                                   "");
    st__held_store = store;
    st_metrics_gauge_fn("strata_cold_objects_held",
                        "Objects out of the manifest kept in storage while a kept Iceberg snapshot "
                        "or backup point may name them",
                        "", st__held_gauge, NULL);
    *out = r;
    return ST_OK;
}

void st_tier_reap(st_tier_reaper_t *r)
{
    if (!r || r->reaping || r->closing || uv_now(r->loop) < r->after_ms) return;
    if (st_coldshare_held()) return; /* nothing leaves a store the group may not share */
    st_reapjob_t *j = st_calloc(1, sizeof *j);
    j->r = r;
    j->req.data = j;
    uint64_t wait = 0;
    char pre = 'D';
    st_store_scan(r->store, &pre, 1, st__collect_d, j, &wait);
    j->cutoff = r->cutoff ? r->cutoff(r->cutoff_arg) : INT64_MIN; /* none yet: all held */
    if (j->n < ST__REAP_MAX)
        st_store_scan(r->store, st_tier_hold_pre, ST_TIER_HOLD_PL, st__collect_held, j, &wait);
    /* only records whose batch is durable: until then the manifest may still name the object */
    uint64_t durable = st_store_durable_id(r->store);
    st_tier_writer_t wr;
    int wrc = st_tier_writer_get(r->store, &wr, &wait);
    if (wrc != ST_OK && wrc != ST_ENOTFOUND) { /* unreadable: no guess at whose objects these are */
        st__reap_free(j);
        return;
    }
    size_t keep = 0;
    for (size_t i = 0; i < j->n; i++) {
        uint16_t l;
        memcpy(&l, j->dkeys[i], sizeof l);
        uint64_t w = 0;
        const void *v;
        size_t vl;
        if (st_store_get(r->store, j->dkeys[i] + sizeof l, l, &v, &vl, &w) == ST_OK &&
            w <= durable) {
            j->dkeys[keep] = j->dkeys[i];
            j->ikeys[keep] = j->ikeys[i];
            j->kept[keep] = !st_tier_writer_owns(&wr, j->objs[i]);
            if (j->kept[keep])
                st_info("cold: %s was written by another incarnation (the node this store was "
                        "restored from): left in storage",
                        j->objs[i]);
            j->objs[keep++] = j->objs[i];
        } else {
            free(j->dkeys[i]);
            free(j->ikeys[i]);
            free(j->objs[i]);
        }
    }
    j->n = keep;
    if (keep == 0 || uv_queue_work(r->loop, &j->req, st__reap_work, st__reap_done) != 0) {
        st__reap_free(j);
        return;
    }
    r->reaping = true;
}

void st_tier_reaper_hold(st_tier_reaper_t *r, int64_t (*cutoff)(void *arg), void *arg)
{
    r->cutoff = cutoff;
    r->cutoff_arg = arg;
}

void st_tier_reaper_close(st_tier_reaper_t *r, void (*closed)(void *arg), void *arg)
{
    r->closed = closed;
    r->closed_arg = arg;
    r->closing = true;
    if (st__held_store == r->store) st__held_store = NULL;
    if (!r->reaping) st__free(r);
}
