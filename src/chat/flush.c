/* SPDX-License-Identifier: MIT */
/*
 * Flushes: a user's oldest hot messages become one Parquet object. On the loop, a snapshot of
 * the rows is taken; on a libuv worker they are decoded into columns, encoded, compressed and
 * written to object storage; back on the loop, one batch records the object in the manifest,
 * deletes the hot rows and moves their counts into the conversations' cold baselines. Until
 * that batch, readers see the rows hot; after it, cold; never both, never neither.
 *
 * Nothing that a crash could take back leaves the process: the snapshot may include writes
 * still staged, so the worker starts only once the batch they are in is durable (a flush whose
 * batch fails is cancelled). That batch also records the object about to be written ('P'); the
 * batch that records it in the manifest drops that again. An object whose recording batch never
 * committed (a crash, a failed batch, a failed write) is found by its 'P' before the user's
 * next flush (or at start-up) and deleted, so a user's files hold each message once.
 *
 * A failed write (storage down, disk full) leaves the hot rows alone and retries with backoff;
 * one that can never succeed (ST_EINVAL: a key the backend refuses) is reported and not retried.
 *
 * Triggers: a user reaching --flush-rows hot rows, and the flush pass over every user (pass.c):
 * every --flush-interval (a user with at least --flush-min-rows hot rows, or whose oldest is
 * --flush-max-age old), the hot store at 80 % of its capacity and POST /v1/admin/flush (every
 * user with hot rows). After a flush, a user with more than --compact-objects objects is queued
 * for compaction (compact.c).
 */
#define _GNU_SOURCE /* SCHED_IDLE */
#include "internal.h"

#include <cjson/cJSON.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

/* One flush moves at most this many rows (and bytes) into one object: its loop-side snapshot
 * and its commit batch (two deletes per row) cost loop time in proportion, and must stay within
 * a few milliseconds (SPEC §7). A user with more hot rows is flushed in several objects, each
 * re-queued at once (see st__limit); compaction merges them later. */
#define ST__FLUSH_MAX_BYTES (8u << 20)
#define ST__FLUSH_PARALLEL  1 /* the loop keeps a core to itself on small machines */
#define ST__TICK_MS         1000

typedef struct {
    st_map_node_t node;
    char user[ST_NAME_MAX + 1];
    size_t ulen;
    uint64_t not_before_ms;
    uint32_t failures;
} st_fuser_t;

typedef struct st_flushjob {
    uv_work_t req;
    st_chatcold_t *cc;
    st_fuser_t *u;
    struct st_flushjob *next_held;
    uint64_t wait; /* the batch that makes the snapshot (and the 'P' record) durable */
    uint64_t seq;
    bool capped; /* more hot rows than one flush takes */
    /* the snapshot: records as stored, concatenated */
    size_t n;
    uint64_t *ids;
    size_t *offs;
    st_buf_t recs;
    /* worker results */
    int rc;
    st_msgrow_t *rows; /* sorted by conversation, then msg_id; strings in arena */
    st_arena_t arena;
    st_buf_t key;
    uint64_t size;
    uint64_t t0;
    uint64_t t_snap; /* the snapshot taken: from here to st__queue it waits for durability */
    uint64_t waited; /* ns spent so */
    uint64_t put_ns; /* the worker's wait for object storage (written by the worker) */
} st_flushjob_t;

static uint64_t st__now_ms(st_chatcold_t *cc)
{
    return uv_now(cc->loop);
}

/* ---- the queue ---- */

static st_fuser_t *st__fuser(const char *u, size_t ul)
{
    st_fuser_t *f = st_calloc(1, sizeof *f);
    memcpy(f->user, u, ul);
    f->ulen = ul;
    f->node.key = f->user;
    f->node.klen = ul;
    return f;
}

static void st__enqueue(st_chatcold_t *cc, const char *u, size_t ul)
{
    if (st_map_get(&cc->pending, u, ul) || st_map_get(&cc->running, u, ul) ||
        st_map_get(&cc->stuck, u, ul))
        return;
    st_fuser_t *f = st__fuser(u, ul);
    st_map_insert(&cc->pending, &f->node);
    st_metric_set(cc->m_pending, (double)cc->pending.count);
}

static void st__pump(st_chatcold_t *cc);

/* ---- worker side ---- */

static int st__cmp_rows(const void *a, const void *b)
{
    const st_msgrow_t *x = a, *y = b;
    size_t n = x->conv_len < y->conv_len ? x->conv_len : y->conv_len;
    int c = memcmp(x->conv, y->conv, n);
    if (c) return c;
    if (x->conv_len != y->conv_len) return x->conv_len < y->conv_len ? -1 : 1;
    return x->msg_id < y->msg_id ? -1 : x->msg_id > y->msg_id;
}

static const char *st__copy(st_arena_t *a, const char *s, size_t n, uint32_t *len)
{
    *len = (uint32_t)n;
    return st_arena_strndup(a, s, n);
}

/* A record back into columns: the JSON was rendered by st_chat_post, so its shape is known;
 * metadata is kept as the raw JSON text it was stored as. */
static int st__decode(st_flushjob_t *j, size_t i, st_msgrow_t *r)
{
    const char *rec = j->recs.data + j->offs[i];
    size_t len = j->offs[i + 1] - j->offs[i];
    if (len <= 16) return ST_EINTERNAL;
    memcpy(&r->timestamp, rec, 8);
    memcpy(&r->seq, rec + 8, 8);
    r->msg_id = j->ids[i];
    const char *json = rec + 16;
    size_t jl = len - 16;
    cJSON *o = cJSON_ParseWithLength(json, jl);
    const cJSON *conv = cJSON_GetObjectItemCaseSensitive(o, "conversation_id");
    const cJSON *from = cJSON_GetObjectItemCaseSensitive(o, "from");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(o, "content");
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    int rc = ST_EINTERNAL;
    if (cJSON_IsString(conv) && cJSON_IsString(from) && cJSON_IsString(content) && meta) {
        r->conv = st__copy(&j->arena, conv->valuestring, strlen(conv->valuestring), &r->conv_len);
        r->from = st__copy(&j->arena, from->valuestring, strlen(from->valuestring), &r->from_len);
        /* content may hold NUL bytes (\u0000): take its length from cJSON's own copy */
        r->content = st__copy(&j->arena, content->valuestring, strlen(content->valuestring),
                              &r->content_len);
        r->metadata = NULL;
        r->metadata_len = 0;
        if (!cJSON_IsNull(meta)) {
            static const char tag[] = ",\"metadata\":";
            const char *c0 = strstr(json, "\"content\":");
            const char *m0 = c0 ? strstr(c0, tag) : NULL;
            if (m0 && json[jl - 1] == '}') {
                m0 += sizeof tag - 1;
                r->metadata =
                    st__copy(&j->arena, m0, (size_t)(json + jl - 1 - m0), &r->metadata_len);
            }
        }
        rc = ST_OK;
    }
    cJSON_Delete(o);
    return rc;
}

/* Encoding and compressing is background work: it runs on CPU time nothing else wants
 * (SCHED_IDLE), so serving keeps its cores when they are few. The pool thread is back at the
 * normal policy before it returns to libuv: left at SCHED_IDLE, it would run the pool's next job
 * (a cold read) at that priority, and take libuv's queue mutexes at it — the loop, queueing
 * work, then waits for a thread the scheduler starves (priority inversion: loop stalls of
 * ~4 ms with no CPU spent, measured during a flush). */
void st__chat_background(bool on)
{
    struct sched_param sp = {0};
    sched_setscheduler((pid_t)syscall(SYS_gettid), on ? SCHED_IDLE : SCHED_OTHER, &sp);
}

static void st__encode(st_flushjob_t *j)
{
    j->rows = st_calloc(j->n, sizeof *j->rows);
    j->rc = ST_OK;
    for (size_t i = 0; i < j->n && j->rc == ST_OK; i++)
        j->rc = st__decode(j, i, &j->rows[i]);
    if (j->rc != ST_OK) return;
    qsort(j->rows, j->n, sizeof *j->rows, st__cmp_rows);
    st_buf_t file = {0};
    j->rc = st_parquet_encode(j->rows, j->n, j->cc->zstd_level, &file);
    uint64_t t = uv_hrtime();
    if (j->rc == ST_OK) j->rc = st_objstore_put(j->cc->obj, j->key.data, file.data, file.len);
    j->put_ns = uv_hrtime() - t;
    j->size = file.len;
    st_buf_free(&file);
}

static void st__flush_work(uv_work_t *req)
{
    st__chat_background(true);
    st__encode(req->data);
    st__chat_background(false);
}

/* ---- loop side ---- */

static void st__job_free(st_flushjob_t *j)
{
    free(j->ids);
    free(j->offs);
    free(j->rows);
    st_buf_free(&j->recs);
    st_buf_free(&j->key);
    st_arena_free(&j->arena);
    free(j);
}

/* The batch that moves the rows: manifest in, hot rows out, counts to the cold baselines. */
static int st__commit(st_chatcold_t *cc, st_flushjob_t *j, uint64_t *wait)
{
    st_chat_t *c = cc->chat;
    st_store_t *s = c->store;
    const char *u = j->u->user;
    size_t ul = j->u->ulen;
    uint8_t k[ST__KEY_CAP];
    uint64_t max_id = 0, min_id = UINT64_MAX;
    /* the object is ours only while its 'P' record is: it goes in this batch */
    size_t pn = st__chat_ukey(k, 'P', u, ul);
    st__chat_be64(k + pn, j->seq);
    const void *pv;
    size_t pvl;
    int rc = st_store_get(s, k, pn + 8, &pv, &pvl, wait);
    if (rc == ST_ENOTFOUND) rc = ST_EINTERNAL;
    if (rc == ST_OK) rc = st_store_del(s, k, pn + 8, wait);
    for (size_t i = 0; i < j->n && rc == ST_OK; i++) {
        const st_msgrow_t *r = &j->rows[i];
        if (r->msg_id > max_id) max_id = r->msg_id;
        if (r->msg_id < min_id) min_id = r->msg_id;
        size_t n = st__chat_ukey(k, 'M', u, ul);
        st__chat_be64(k + n, r->msg_id);
        rc = st_store_del(s, k, n + 8, wait);
        if (rc == ST_OK) {
            n = st__chat_nprefix(k, u, ul, r->conv, r->conv_len);
            st__chat_be64(k + n, r->msg_id);
            rc = st_store_del(s, k, n + 8, wait);
        }
        /* rows are grouped by conversation: settle each group's count once */
        bool last = i + 1 == j->n || j->rows[i + 1].conv_len != r->conv_len ||
                    memcmp(j->rows[i + 1].conv, r->conv, r->conv_len) != 0;
        if (rc == ST_OK && last) {
            size_t from = i;
            while (from > 0 && j->rows[from - 1].conv_len == r->conv_len &&
                   memcmp(j->rows[from - 1].conv, r->conv, r->conv_len) == 0)
                from--;
            int64_t moved = (int64_t)(i - from + 1);
            st_conv_t cv;
            size_t kl = st__chat_ckey(k, u, ul, r->conv, r->conv_len);
            rc = st__chat_conv_get(s, k, kl, &cv, wait);
            if (rc == ST_OK) {
                cv.base_total += moved;
                cv.hot_total -= moved;
                rc = st_store_put(s, k, kl, &cv, sizeof cv, wait);
            }
        }
    }
    st_coldstat_t cs;
    if (rc == ST_OK) rc = st__chat_coldstat(c, u, ul, &cs, wait);
    if (rc == ST_OK) {
        cs.watermark = max_id;
        cs.rows += (int64_t)j->n;
        cs.bytes += (int64_t)j->size;
        cs.files++;
        if (cs.next_seq < j->seq + 1) cs.next_seq = j->seq + 1;
        rc = st_store_put(s, k, st__chat_ukey(k, 'W', u, ul) - 1, &cs, sizeof cs, wait);
    }
    if (rc == ST_OK) {
        st_coldfile_t f = {min_id, max_id, (int64_t)j->n, j->size};
        st_buf_t v = {0};
        st_buf_append(&v, &f, sizeof f);
        st_buf_append(&v, j->key.data, j->key.len);
        size_t n = st__chat_ukey(k, 'F', u, ul);
        st__chat_be64(k + n, j->seq);
        rc = st_store_put(s, k, n + 8, v.data, v.len, wait);
        st_buf_free(&v);
    }
    return rc;
}

/* Back on the queue after a failure, no sooner than the backoff (up to a minute). */
static void st__retry_later(st_chatcold_t *cc, st_fuser_t *u, int rc)
{
    st_metric_add(cc->m_flush_err, 1);
    u->failures++;
    uint64_t backoff = 1000ull << (u->failures < 6 ? u->failures : 6);
    u->not_before_ms = st__now_ms(cc) + (backoff > 60000 ? 60000 : backoff);
    st_warn("cold: flush of %.*s failed (%s); retrying in %llu ms", (int)u->ulen, u->user,
            st_strerror(rc), (unsigned long long)(u->not_before_ms - st__now_ms(cc)));
    st_map_insert(&cc->pending, &u->node);
    st_metric_set(cc->m_pending, (double)cc->pending.count);
}

static void st__running_done(st_chatcold_t *cc, st_fuser_t *u)
{
    st_map_remove(&cc->running, &u->node);
    cc->nrunning--;
    st_metric_set(cc->m_running, (double)cc->nrunning);
}

static void st__flush_done(uv_work_t *req, int status)
{
    st_flushjob_t *j = req->data;
    st_chatcold_t *cc = j->cc;
    st_fuser_t *u = j->u;
    st__running_done(cc, u);
    if (cc->stopping || status == UV_ECANCELED) {
        /* shutting down: the object, if written, has its 'P' record and no 'F': the next
         * start-up deletes it */
        free(u);
        st__job_free(j);
        st__chat_cold_maybe_free(cc);
        return;
    }
    uint64_t wait = 0;
    int rc = j->rc;
    if (rc == ST_OK) rc = st__commit(cc, j, &wait);
    if (rc != ST_OK) {
        /* nothing changed in the hot store (a failed commit is rolled back with its batch);
         * what the worker may have written is an orphan now */
        st__chat_orphans(cc->chat, u->user, u->ulen, &wait);
        if (rc == ST_EINVAL) {
            /* it can never succeed (a key or an object the backend refuses): say so once */
            st_metric_add(cc->m_flush_err, 1);
            st_error("cold: %.*s can never be flushed (%s: the object store refuses %s); its "
                     "messages stay hot",
                     (int)u->ulen, u->user, st_strerror(rc), j->key.data);
            st_map_insert(&cc->stuck, &u->node);
            st_metric_set(cc->m_stuck, (double)cc->stuck.count);
        } else {
            st__retry_later(cc, u, rc);
        }
    } else {
        st_metric_add(cc->m_flush_ok, 1);
        st_metric_add(cc->m_rows, (double)j->n);
        st_metric_add(cc->m_bytes, (double)j->size);
        st_metric_observe(cc->m_seconds, (double)(uv_hrtime() - j->t0) / 1e9);
        st_info("cold: flushed %zu messages of %.*s to %s (%llu bytes)", j->n, (int)u->ulen,
                u->user, j->key.data, (unsigned long long)j->size);
        st__chat_compact_note(cc, u->user, u->ulen, false);
        if (j->capped)
            st_map_insert(&cc->pending, &u->node);
        else
            free(u);
        st__chat_reap(cc); /* orphans found when this flush started are durable by now */
    }
    /* Pace: the next flush waits twice as long as this one worked, so flushing takes at most
     * a third of the time (the loop's snapshot and commit, the apply thread's deletes) unless
     * the hot store is filling up. Waiting is not work — for its snapshot to be durable, for
     * object storage to take the object (fsyncs, or a round trip to S3): with flushes of a few
     * thousand rows those fixed waits would otherwise set the pace. */
    uint64_t took_ms = (uv_hrtime() - j->t0 - j->waited - j->put_ns) / 1000000;
    cc->resume_ms = cc->urgent ? 0 : st__now_ms(cc) + 2 * took_ms;
    st__job_free(j);
    st__pump(cc);
    st__chat_compact_pump(cc);
}

typedef struct {
    st_flushjob_t *j;
    size_t cap;
    size_t limit; /* rows this flush takes */
} st_snap_t;

static int st__snap_row(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_snap_t *sn = arg;
    st_flushjob_t *j = sn->j;
    if (klen < 8 || vlen < 16) return 0;
    if (j->n == sn->limit || (j->n && j->recs.len + vlen > ST__FLUSH_MAX_BYTES)) {
        j->capped = true;
        return 1;
    }
    if (j->n + 2 > sn->cap) {
        sn->cap = sn->cap ? sn->cap * 2 : 1024;
        j->ids = st_realloc(j->ids, sn->cap * sizeof *j->ids);
        j->offs = st_realloc(j->offs, sn->cap * sizeof *j->offs);
    }
    j->ids[j->n] = st__chat_rd64((const uint8_t *)key + klen - 8);
    j->offs[j->n++] = j->recs.len;
    st_buf_append(&j->recs, val, vlen);
    return 0;
}

/* Records the object about to be written: its 'P' record, and the user's next file number
 * moves past it (a number, and so a key, is never used twice). */
static int st__intend(st_chat_t *c, st_flushjob_t *j, st_coldstat_t *cs, uint64_t *wait)
{
    const char *u = j->u->user;
    size_t ul = j->u->ulen;
    int64_t first_ts;
    memcpy(&first_ts, j->recs.data, 8); /* the oldest row's timestamp names the file */
    st__chat_object_key(&j->key, u, ul, first_ts, j->seq);
    uint8_t k[ST__KEY_CAP];
    size_t n = st__chat_ukey(k, 'P', u, ul);
    st__chat_be64(k + n, j->seq);
    int rc = st_store_put(c->store, k, n + 8, j->key.data, j->key.len, wait);
    cs->next_seq = j->seq + 1;
    if (rc == ST_OK)
        rc = st_store_put(c->store, k, st__chat_ukey(k, 'W', u, ul) - 1, cs, sizeof *cs, wait);
    return rc;
}

/* The rows one flush of the user takes: all its hot rows, or, past ST__FLUSH_OBJECT_ROWS, an
 * even share of them (10,000 hot rows go in three objects of 3,334, 3,333 and 3,333, not two
 * full ones and a sliver). The count is the user's totals less its cold rows; the share is never
 * below half the cap, so a count that is off never makes a run of tiny objects. */
static size_t st__limit(st_chat_t *c, const char *u, size_t ul, const st_coldstat_t *cs,
                        uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    st_totals_t tot;
    if (st__chat_get_fixed(c->store, k, st__chat_ukey(k, 'T', u, ul) - 1, &tot, sizeof tot, wait) !=
            ST_OK ||
        tot.total - cs->rows <= ST__FLUSH_OBJECT_ROWS)
        return ST__FLUSH_OBJECT_ROWS;
    uint64_t hot = (uint64_t)(tot.total - cs->rows);
    uint64_t parts = (hot + ST__FLUSH_OBJECT_ROWS - 1) / ST__FLUSH_OBJECT_ROWS;
    return (size_t)((hot + parts - 1) / parts);
}

static void st__queue(st_chatcold_t *cc, st_flushjob_t *j)
{
    j->waited = uv_hrtime() - j->t_snap;
    if (uv_queue_work(cc->loop, &j->req, st__flush_work, st__flush_done) != 0) {
        j->rc = ST_EIO;
        st__flush_done(&j->req, 0);
    }
}

/* Takes the user's oldest hot rows and hands them to a worker once they are durable; false if
 * there was nothing to flush. */
static bool st__start(st_chatcold_t *cc, st_fuser_t *u)
{
    st_chat_t *c = cc->chat;
    if (st_store_writable(c->store) == ST_ENOLEADER) return false; /* a group's leader flushes */
    st_flushjob_t *j = st_calloc(1, sizeof *j);
    j->cc = cc;
    j->u = u;
    j->t0 = uv_hrtime();
    uint64_t wait = 0;
    st_coldstat_t cs;
    uint8_t pre[ST__KEY_CAP];
    st_snap_t sn = {j, 0, 0};
    int rc = st__chat_orphans(c, u->user, u->ulen, &wait);
    if (rc == ST_OK) rc = st__chat_coldstat(c, u->user, u->ulen, &cs, &wait);
    j->seq = cs.next_seq ? cs.next_seq : 1;
    if (rc == ST_OK) {
        sn.limit = st__limit(c, u->user, u->ulen, &cs, &wait);
        /* from past the watermark: every hot id is above it, and the rows of the user's last
         * flush may still be in LMDB, deleted only in the overlay (not applied yet) */
        size_t pl = st__chat_ukey(pre, 'M', u->user, u->ulen);
        uint8_t from[ST__KEY_CAP];
        memcpy(from, pre, pl);
        st__chat_be64(from + pl, cs.watermark + 1);
        rc = st_store_scan_from(c->store, pre, pl, from, pl + 8, st__snap_row, &sn, &wait);
        if (rc == 1) rc = ST_OK;
    }
    if (rc != ST_OK || j->n == 0 || st__intend(c, j, &cs, &wait) != ST_OK) {
        st__job_free(j);
        return false;
    }
    j->offs[j->n] = j->recs.len;
    j->req.data = j;
    j->wait = wait;
    j->t_snap = uv_hrtime();
    st_map_insert(&cc->running, &u->node);
    cc->nrunning++;
    st_metric_set(cc->m_running, (double)cc->nrunning);
    if (wait > st_store_durable_id(c->store)) { /* see st__on_durable */
        j->next_held = cc->held;
        cc->held = j;
        return true;
    }
    st__queue(cc, j);
    return true;
}

/* Held flushes whose snapshot is durable now go to a worker. */
static void st__on_durable(st_store_listener_t *l, uint64_t id)
{
    st_chat_t *c = (st_chat_t *)((char *)l - offsetof(st_chat_t, listener));
    st_chatcold_t *cc = c->cold;
    if (!cc) return;
    st__chat_compact_durable(cc, id);
    for (st_flushjob_t **p = &cc->held; *p;) {
        st_flushjob_t *j = *p;
        if (j->wait > id) {
            p = &j->next_held;
            continue;
        }
        *p = j->next_held;
        st__queue(cc, j);
    }
}

/* Held flushes whose snapshot was rolled back are cancelled: those rows never existed. */
static void st__on_failed(st_store_listener_t *l, uint64_t first, int err)
{
    st_chat_t *c = (st_chat_t *)((char *)l - offsetof(st_chat_t, listener));
    st_chatcold_t *cc = c->cold;
    if (!cc) return;
    for (st_flushjob_t **p = &cc->held; *p;) {
        st_flushjob_t *j = *p;
        if (j->wait < first) {
            p = &j->next_held;
            continue;
        }
        *p = j->next_held;
        st__running_done(cc, j->u);
        st__retry_later(cc, j->u, err);
        st__job_free(j);
    }
    st__pump(cc);
}

static void st__on_resume(uv_timer_t *t)
{
    st__pump(t->data);
}

static void st__pump(st_chatcold_t *cc)
{
    uint64_t now = st__now_ms(cc);
    size_t it;
    if (cc->stopping) return;
    if (now < cc->resume_ms) {
        if (cc->pending.count) uv_timer_start(&cc->resume, st__on_resume, cc->resume_ms - now, 0);
        return;
    }
    while (cc->nrunning < ST__FLUSH_PARALLEL && !cc->stopping) {
        st_fuser_t *pick = NULL;
        for (st_map_node_t *n = st_map_first(&cc->pending, &it); n;
             n = st_map_next(&cc->pending, &it, n))
            if (((st_fuser_t *)n)->not_before_ms <= now) {
                pick = (st_fuser_t *)n;
                break;
            }
        if (!pick) break;
        st_map_remove(&cc->pending, &pick->node);
        if (!st__start(cc, pick)) free(pick);
    }
    st_metric_set(cc->m_pending, (double)cc->pending.count);
}

/* ---- triggers (the flush pass over every user: pass.c) ---- */

void st__chat_flush_enqueue(st_chatcold_t *cc, const char *u, size_t ul)
{
    st__enqueue(cc, u, ul);
}

void st__chat_flush_pump(st_chatcold_t *cc)
{
    st__pump(cc);
}

static int st__first_ts(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)key, (void)klen;
    if (vlen >= 8) memcpy(arg, val, 8);
    return 1;
}

bool st__chat_flush_due(st_chat_t *c, const char *u, size_t ul, int64_t hot)
{
    st_chatcold_t *cc = c->cold;
    if ((uint64_t)hot >= cc->flush_min_rows || !cc->flush_max_age_us) return true;
    uint8_t pre[ST__KEY_CAP];
    uint64_t wait = 0;
    int64_t ts = INT64_MAX;
    st_store_scan(c->store, pre, st__chat_ukey(pre, 'M', u, ul), st__first_ts, &ts, &wait);
    return ts <= st_now_us() - (int64_t)cc->flush_max_age_us;
}

void st__chat_posted(st_chat_t *c, const char *u, size_t ul, int64_t total)
{
    st_chatcold_t *cc = c->cold;
    if (!cc || (uint64_t)total < cc->flush_rows) return;
    st_coldstat_t cs;
    uint64_t wait = 0;
    if (st__chat_coldstat(c, u, ul, &cs, &wait) != ST_OK) return;
    if ((uint64_t)(total - cs.rows) >= cc->flush_rows) {
        st__enqueue(cc, u, ul);
        st__pump(cc);
    }
}

static void st__on_tick(uv_timer_t *t)
{
    st_chatcold_t *cc = t->data;
    if (st_store_writable(cc->chat->store) == ST_ENOLEADER) return; /* a group's leader flushes */
    st__chat_reap(cc); /* objects out of the manifest, once that is durable */
    uint64_t now = st__now_ms(cc), used, size;
    st_store_usage(cc->chat->store, &used, &size);
    /* near full: flush now, then give the flushes time to free space before asking again */
    cc->urgent = size && used >= size / 10 * 8;
    bool full = cc->urgent && now >= cc->next_full_ms;
    if (full) cc->next_full_ms = now + 10000;
    if (now >= cc->next_interval_ms || full) {
        if (full)
            st_warn("cold: hot store at %llu of %llu bytes: flushing", (unsigned long long)used,
                    (unsigned long long)size);
        cc->next_interval_ms = now + cc->interval_ms;
        st__chat_flush_pass(cc->chat, full);
    }
    st__pump(cc);
    st__chat_compact_pump(cc);
}

/* The distinct users of 'ks u 0 …' keys (they come sorted: a repeat follows its first), each:
 * u8 length, then the name. Collected first: acting on them inside the scan would read and
 * stage writes while the scan's own pointers are live. */
typedef struct {
    st_buf_t names;
    size_t prev; /* offset of the last name added */
} st_users_t;

static int st__collect_user(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_users_t *us = arg;
    st_buf_t *b = &us->names;
    (void)val;
    (void)vlen;
    const char *u = (const char *)key + 1;
    size_t ul = strnlen(u, klen - 1);
    if (ul == 0 || ul > ST_NAME_MAX || ul == klen - 1) return 0;
    if (b->len && (uint8_t)b->data[us->prev] == ul && memcmp(b->data + us->prev + 1, u, ul) == 0)
        return 0;
    us->prev = b->len;
    st_buf_appendc(b, (char)(uint8_t)ul);
    st_buf_append(b, u, ul);
    return 0;
}

/* Start-up: flushes a crash interrupted left 'P' records; their objects are deleted (and the
 * deletions a crash interrupted are finished) by the reaper. */
static void st__recover(st_chat_t *c)
{
    st_users_t us = {{0}, 0};
    uint64_t wait = 0;
    char pre = 'P';
    st_store_scan(c->store, &pre, 1, st__collect_user, &us, &wait);
    st_buf_t *b = &us.names;
    for (size_t i = 0; i < b->len;) {
        size_t ul = (uint8_t)b->data[i];
        st__chat_orphans(c, b->data + i + 1, ul, &wait);
        i += 1 + ul;
    }
    st_buf_free(b);
    st__chat_reap(c->cold);
}

int st_chat_cold_start(st_chat_t *c, uv_loop_t *loop, const st_chat_cold_opts_t *o)
{
    st_chatcold_t *cc = st_calloc(1, sizeof *cc);
    cc->loop = loop;
    cc->chat = c;
    cc->obj = o->store;
    cc->flush_rows = o->flush_rows ? o->flush_rows : 10000;
    cc->interval_ms = (o->flush_interval_s ? o->flush_interval_s : 300) * 1000;
    cc->zstd_level = o->zstd_level ? o->zstd_level : 3;
    st_map_init(&cc->pending);
    st_map_init(&cc->running);
    st_map_init(&cc->stuck);
    cc->m_flush_ok = st_metrics_counter("strata_flush_total", "Cold-tier flushes", "result=\"ok\"");
    cc->m_flush_err =
        st_metrics_counter("strata_flush_total", "Cold-tier flushes", "result=\"error\"");
    cc->m_rows =
        st_metrics_counter("strata_flush_rows_total", "Messages moved to the cold tier", "");
    cc->m_bytes = st_metrics_counter("strata_flush_bytes_total", "Parquet bytes written", "");
    cc->m_running = st_metrics_gauge("strata_flush_running", "Flushes in progress", "");
    cc->m_pending = st_metrics_gauge("strata_flush_pending", "Users waiting for a flush", "");
    cc->m_cold_reads = st_metrics_counter("strata_cold_row_groups_read_total",
                                          "Parquet row groups decoded for reads", "");
    st_coldcache_opts_t co = {o->store, o->cache_bytes, 0, cc->m_cold_reads};
    st_coldcache_open(&cc->cache, loop, &co);
    cc->m_hybrid_hot = st_metrics_counter("strata_hybrid_reads_total",
                                          "Conversation hybrid fields served", "source=\"hot\"");
    cc->m_hybrid_cold = st_metrics_counter("strata_hybrid_reads_total",
                                           "Conversation hybrid fields served", "source=\"cold\"");
    cc->m_evicted = st_metrics_counter("strata_hot_evictions_total",
                                       "Idle conversations evicted from the hot store", "");
    cc->hot_ttl_us = (o->hot_ttl_s ? o->hot_ttl_s : 86400) * 1000000ull;
    cc->retention_us = o->retention_s * 1000000ull;
    cc->m_retained = st_metrics_counter("strata_retention_deleted_messages_total",
                                        "Cold messages deleted by retention", "");
    cc->m_stuck = st_metrics_gauge("strata_flush_stuck_users",
                                   "Users whose flush can never succeed (see the log)", "");
    st_tier_reaper_open(&cc->reaper, loop, c->store, o->store);
    cc->m_orphans = st_metrics_counter("strata_flush_orphans_total",
                                       "Objects written by a flush that was never recorded", "");
    cc->m_seconds =
        st_metrics_histogram("strata_flush_seconds", "Flush duration, snapshot to manifest", "",
                             st_metrics_latency_bounds, st_metrics_latency_nbounds);
    uv_timer_init(loop, &cc->tick);
    uv_timer_init(loop, &cc->resume);
    cc->tick.data = cc->resume.data = cc;
    cc->next_interval_ms = uv_now(loop) + cc->interval_ms;
    uv_timer_start(&cc->tick, st__on_tick, ST__TICK_MS, ST__TICK_MS);
    cc->flush_min_rows = o->flush_min_rows;
    cc->flush_max_age_us = o->flush_max_age_s * 1000000ull;
    st__chat_compact_init(cc, o->compact_objects);
    st__chat_pass_init(cc);
    c->cold = cc;
    c->listener.on_durable = st__on_durable;
    c->listener.on_failed = st__on_failed;
    st_store_listen(c->store, &c->listener);
    st__recover(c);
    return ST_OK;
}

/* Freed once its timer is closed and the last job in flight has come back. */
void st__chat_cold_maybe_free(st_chatcold_t *cc)
{
    if (!cc->closed || cc->nrunning || cc->reaper || st__chat_compact_busy(cc)) return;
    size_t it;
    st_map_node_t *n;
    while ((n = st_map_first(&cc->pending, &it)) != NULL) {
        st_map_remove(&cc->pending, n);
        free(n);
    }
    while ((n = st_map_first(&cc->stuck, &it)) != NULL) {
        st_map_remove(&cc->stuck, n);
        free(n);
    }
    st_map_free(&cc->pending);
    st_map_free(&cc->running);
    st_map_free(&cc->stuck);
    st__chat_compact_free(cc);
    free(cc);
}

static void st__handle_closed(void *arg)
{
    st_chatcold_t *cc = arg;
    if (++cc->closed_handles < 3) return;
    cc->closed = true;
    st__chat_cold_maybe_free(cc);
}

static void st__reaper_closed(void *arg)
{
    st_chatcold_t *cc = arg;
    cc->reaper = NULL;
    st__chat_cold_maybe_free(cc);
}

static void st__tick_closed(uv_handle_t *h)
{
    st__handle_closed(h->data);
}

void st_chat_cold_stop(st_chat_t *c)
{
    st_chatcold_t *cc = c->cold;
    if (!cc) return;
    cc->stopping = true;
    c->cold = NULL;
    while (cc->held) { /* never handed to a worker: their 'P' records wait for start-up */
        st_flushjob_t *j = cc->held;
        cc->held = j->next_held;
        st__running_done(cc, j->u);
        free(j->u);
        st__job_free(j);
    }
    st__chat_retention_stop(cc);
    st_tier_reaper_close(cc->reaper, st__reaper_closed, cc); /* its pass in flight comes back */
    st_coldcache_close(cc->cache); /* its jobs in flight come back while the loop runs */
    cc->cache = NULL;
    st__chat_compact_stop(cc);
    st__chat_pass_stop(cc, st__handle_closed);
    uv_close((uv_handle_t *)&cc->tick, st__tick_closed);
    uv_close((uv_handle_t *)&cc->resume, st__tick_closed);
}
