/* SPDX-License-Identifier: MIT */
/*
 * Group commit with a redo log.
 *
 * The loop seals its open batch at the end of every iteration and queues it. The sync thread
 * takes every queued batch at once, writes them as one WAL record and fdatasyncs: that is the
 * durability point, and the loop then releases the responses. The apply thread writes the same
 * groups into LMDB behind it, many per transaction, with MDB_NOMETASYNC (one data sync per
 * transaction, integrity kept; the WAL covers whatever a power loss would roll back). Before the
 * log is reused, the sync thread waits for LMDB to catch up and syncs it fully (checkpoint).
 *
 * Why: at a fixed number of clients, durable throughput is bounded by the acknowledgement
 * latency, and an LMDB commit needs two ordered flushes where one in-place log write needs one.
 * Values stay in the loop's overlay until LMDB has them, so reads never miss acknowledged data.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static const char st__applied_key[] = "\0wal_applied";
#define ST__APPLIED_KLEN   (sizeof st__applied_key - 1)
#define ST__APPLY_PAUSE_MS 5

int st__mdb_err(int rc)
{
    if (rc == 0) return ST_OK;
    if (rc == MDB_MAP_FULL || rc == ENOSPC) return ST_EFULL;
    if (rc == ENOMEM) return ST_ENOMEM;
    return ST_EIO;
}

/* ---- encoding a group for the log: {u8 del, u32 klen, u32 vlen, key, val}* ---- */

static void st__encode(st_buf_t *out, const st_batch_t *group)
{
    st_buf_reset(out);
    for (const st_batch_t *b = group; b; b = b->next)
        for (size_t i = 0; i < b->nops; i++) {
            const st_op_t *op = &b->ops[i];
            uint8_t del = op->del;
            uint32_t kl = (uint32_t)op->klen, vl = (uint32_t)op->vlen;
            st_buf_append(out, &del, 1);
            st_buf_append(out, &kl, 4);
            st_buf_append(out, &vl, 4);
            st_buf_append(out, b->data.data + op->koff, op->klen);
            st_buf_append(out, b->data.data + op->voff, op->vlen);
        }
}

static int st__put_applied(st_store_t *s, MDB_txn *txn, uint64_t seq)
{
    MDB_val k = {ST__APPLIED_KLEN, (void *)st__applied_key}, v = {8, &seq};
    return mdb_put(txn, s->dbi, &k, &v, 0);
}

static int st__apply_op(st_store_t *s, MDB_txn *txn, bool del, const void *key, size_t klen,
                        const void *val, size_t vlen)
{
    MDB_val k = {klen, (void *)key};
    if (del) {
        int rc = mdb_del(txn, s->dbi, &k, NULL);
        return rc == MDB_NOTFOUND ? 0 : rc;
    }
    MDB_val v = {vlen, (void *)val};
    return mdb_put(txn, s->dbi, &k, &v, 0);
}

/* Bytes in use: the high-water mark less the pages on LMDB's free list. */
static uint64_t st__used_bytes(st_store_t *s)
{
    MDB_envinfo info;
    MDB_stat st;
    mdb_env_info(s->env, &info);
    mdb_env_stat(s->env, &st);
    uint64_t pages = info.me_last_pgno + 1, free_pages = 0;
    MDB_txn *txn;
    if (mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn) == 0) {
        MDB_cursor *c;
        if (mdb_cursor_open(txn, 0 /* the free list */, &c) == 0) {
            MDB_val k, v;
            while (mdb_cursor_get(c, &k, &v, MDB_NEXT) == 0)
                if (v.mv_size >= sizeof(size_t)) free_pages += *(const size_t *)v.mv_data;
            mdb_cursor_close(c);
        }
        mdb_txn_abort(txn);
    }
    return (pages > free_pages ? pages - free_pages : 0) * st.ms_psize;
}

/* ---- the apply thread ---- */

static int st__apply_group(st_store_t *s, st_batch_t *group, uint64_t seq)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    if (rc) return rc;
    for (st_batch_t *b = group; b && !rc; b = b->next)
        for (size_t i = 0; i < b->nops && !rc; i++) {
            st_op_t *op = &b->ops[i];
            rc = st__apply_op(s, txn, op->del, b->data.data + op->koff, op->klen,
                              b->data.data + op->voff, op->vlen);
        }
    if (!rc && seq) rc = st__put_applied(s, txn, seq);
    if (rc) {
        mdb_txn_abort(txn);
        return rc;
    }
    return mdb_txn_commit(txn);
}

static void st__to_loop(st_store_t *s, st_batch_t *head, st_batch_t *tail)
{
    if (s->d_tail)
        s->d_tail->next = head;
    else
        s->d_head = head;
    s->d_tail = tail;
    uv_async_send(&s->done);
}

static void st__apply_thread(void *arg)
{
    st_store_t *s = arg;
    unsigned backoff_ms = 0;
    uv_mutex_lock(&s->mu);
    for (;;) {
        while (!s->a_head && !s->stop_apply)
            uv_cond_wait(&s->cv_apply, &s->mu);
        if (!s->a_head) break;
        st_batch_t *group = s->a_head, *last = s->a_tail;
        s->a_head = s->a_tail = NULL;
        uv_mutex_unlock(&s->mu);
        uint64_t t0 = st_mono_ns();
        int rc = st__apply_group(s, group, last->seq);
        uint64_t ns = st_mono_ns() - t0;
        uint64_t used = rc ? 0 : st__used_bytes(s);
        uv_mutex_lock(&s->mu);
        if (rc) {
            /* Acknowledged data cannot be dropped: it is in the WAL and the overlay. Put the
             * group back and retry; the capacity guard keeps this from being a full map. */
            st_error("store: applying WAL seq %llu to LMDB failed: %s; retrying",
                     (unsigned long long)last->seq, mdb_strerror(rc));
            last->next = s->a_head;
            s->a_head = group;
            if (!s->a_tail) s->a_tail = last;
            backoff_ms = backoff_ms ? (backoff_ms * 2 > 1000 ? 1000 : backoff_ms * 2) : 10;
            uv_mutex_unlock(&s->mu);
            uv_sleep(backoff_ms);
            uv_mutex_lock(&s->mu);
            continue;
        }
        backoff_ms = 0;
        s->applied_seq = last->seq;
        s->used_bytes = used;
        s->apply_ns_sum += ns;
        s->apply_count++;
        uv_cond_broadcast(&s->cv_applied);
        st__to_loop(s, group, last);
        /* Each LMDB transaction costs a device flush that the WAL's acknowledgements would
         * otherwise get: let groups pile up for a few milliseconds, unless a checkpoint or a
         * stop is waiting for LMDB to catch up. */
        if (!s->stop && !s->checkpointing) {
            uv_mutex_unlock(&s->mu);
            uv_sleep(ST__APPLY_PAUSE_MS);
            uv_mutex_lock(&s->mu);
        }
    }
    uv_mutex_unlock(&s->mu);
}

/* ---- the sync thread ---- */

/* Everything logged is in LMDB and LMDB is fully synced: the log may start over. Called with
 * mu held; drops it while waiting and syncing. */
static int st__checkpoint(st_store_t *s)
{
    s->checkpointing = true;
    while (s->applied_seq < s->logged_seq)
        uv_cond_wait(&s->cv_applied, &s->mu);
    s->checkpointing = false;
    uv_mutex_unlock(&s->mu);
    int rc = mdb_env_sync(s->env, 1) ? ST_EIO : st_wal_reset(s->wal);
    uv_mutex_lock(&s->mu);
    return rc;
}

static void st__sync_thread(void *arg)
{
    st_store_t *s = arg;
    st_buf_t payload = {0};
    uv_mutex_lock(&s->mu);
    for (;;) {
        while ((!s->q_head || s->halted) && !s->stop)
            uv_cond_wait(&s->cv_sync, &s->mu);
        if (!s->q_head || s->halted) break;
        st_batch_t *group = s->q_head, *last = s->q_tail;
        s->q_head = s->q_tail = NULL;
        uv_mutex_unlock(&s->mu);
        size_t ops = 0, writes = 0;
        for (st_batch_t *b = group; b; b = b->next) {
            ops += b->nops;
            writes += b->writes;
        }
        st__encode(&payload, group);
        uint64_t t0 = st_mono_ns();
        uint64_t seq = s->logged_seq + 1;
        uv_mutex_lock(&s->mu);
        int rc = ST_OK;
        if (st_wal_record_size(payload.len) > st_wal_remaining(s->wal)) rc = st__checkpoint(s);
        uv_mutex_unlock(&s->mu);
        bool direct = false;
        if (rc == ST_OK) {
            rc = st_wal_append(s->wal, seq, payload.data, payload.len);
            if (rc == ST_ETOOLARGE) {
                /* Bigger than the whole log: LMDB is caught up (checkpoint above), so commit
                 * this group straight into it with a full sync. */
                int mrc = st__apply_group(s, group, 0);
                if (!mrc) mrc = mdb_env_sync(s->env, 1);
                rc = st__mdb_err(mrc);
                direct = true;
            }
        }
        uint64_t ns = st_mono_ns() - t0;
        for (st_batch_t *b = group; b; b = b->next) {
            b->seq = direct ? 0 : seq;
            b->rc = rc;
        }
        uv_mutex_lock(&s->mu);
        s->sync_ns_sum += ns;
        s->sync_count++;
        s->group_ops += ops;
        s->group_writes += writes;
        if (rc != ST_OK) {
            s->halted = true;
            st__to_loop(s, group, last);
            continue;
        }
        s->acked_id = last->id;
        if (direct) {
            st__to_loop(s, group, last);
            continue;
        }
        s->logged_seq = seq;
        if (s->a_tail)
            s->a_tail->next = group;
        else
            s->a_head = group;
        s->a_tail = last;
        uv_cond_signal(&s->cv_apply);
        uv_async_send(&s->done);
    }
    uv_mutex_unlock(&s->mu);
    st_buf_free(&payload);
}

/* ---- recovery ---- */

typedef struct {
    st_store_t *s;
    uint64_t applied;
    uint64_t replayed;
} st_replay_t;

static int st__replay_record(void *arg, uint64_t seq, const char *p, size_t len)
{
    st_replay_t *r = arg;
    st_store_t *s = r->s;
    if (seq <= r->applied) return 0;
    MDB_txn *txn;
    int rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    const char *end = p + len;
    while (!rc && p < end) {
        uint8_t del;
        uint32_t kl, vl;
        if (end - p < 9) {
            rc = MDB_CORRUPTED;
            break;
        }
        memcpy(&del, p, 1);
        memcpy(&kl, p + 1, 4);
        memcpy(&vl, p + 5, 4);
        p += 9;
        if ((uint64_t)(end - p) < (uint64_t)kl + vl) {
            rc = MDB_CORRUPTED;
            break;
        }
        rc = st__apply_op(s, txn, del, p, kl, p + kl, vl);
        p += kl + vl;
    }
    if (!rc) rc = st__put_applied(s, txn, seq);
    if (!rc)
        rc = mdb_txn_commit(txn);
    else if (txn)
        mdb_txn_abort(txn);
    if (rc) {
        st_error("store: replaying WAL seq %llu failed: %s", (unsigned long long)seq,
                 mdb_strerror(rc));
        return st__mdb_err(rc);
    }
    r->applied = seq;
    r->replayed++;
    return 0;
}

int st__store_recover(st_store_t *s)
{
    st_replay_t r = {s, 0, 0};
    MDB_txn *txn;
    if (mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn) == 0) {
        MDB_val k = {ST__APPLIED_KLEN, (void *)st__applied_key}, v;
        if (mdb_get(txn, s->dbi, &k, &v) == 0 && v.mv_size == 8) memcpy(&r.applied, v.mv_data, 8);
        mdb_txn_abort(txn);
    }
    int rc = st_wal_replay(s->wal, st__replay_record, &r);
    if (rc) return rc;
    if (r.replayed)
        st_info("store: replayed %llu WAL record(s) into LMDB", (unsigned long long)r.replayed);
    /* LMDB now holds everything: make it durable and start a fresh log generation. */
    if (mdb_env_sync(s->env, 1) != 0) return ST_EIO;
    rc = st_wal_reset(s->wal);
    s->logged_seq = s->applied_seq = r.applied;
    s->used_bytes = st__used_bytes(s);
    return rc;
}

/* ---- the loop side ---- */

st_batch_t *st__batch_new(st_store_t *s)
{
    st_batch_t *b = s->free_list;
    if (b)
        s->free_list = b->next;
    else
        b = st_calloc(1, sizeof *b);
    b->next = NULL;
    st_buf_reset(&b->data);
    b->nops = b->writes = 0;
    b->rc = 0;
    b->seq = 0;
    b->id = ++s->open_id;
    return b;
}

static void st__batch_recycle(st_store_t *s, st_batch_t *b)
{
    if (b->data.cap > (8u << 20)) { /* do not keep outsized buffers around */
        st_buf_free(&b->data);
        free(b->ops);
        b->ops = NULL;
        b->cap = 0;
    }
    b->next = s->free_list;
    s->free_list = b;
}

void st__batch_free(st_batch_t *b)
{
    st_buf_free(&b->data);
    free(b->ops);
    free(b);
}

/* Seals the open batch and queues it. Only ever called between callbacks, so one request's
 * writes never straddle two batches. */
void st__store_submit(st_store_t *s)
{
    ST_ASSERT(s->open->nops > 0);
    st_batch_t *b = s->open;
    b->next = NULL;
    uv_mutex_lock(&s->mu);
    if (s->q_tail)
        s->q_tail->next = b;
    else
        s->q_head = b;
    s->q_tail = b;
    uv_cond_signal(&s->cv_sync);
    uv_mutex_unlock(&s->mu);
    s->submitted++;
    s->open = st__batch_new(s);
    /* Pending durable work keeps the loop alive; idle, the store does not. */
    uv_ref((uv_handle_t *)&s->done);
    uv_idle_stop(&s->idle);
}

/* After a WAL failure: once every acknowledged batch is in LMDB, drop everything else. */
static void st__rollback(st_store_t *s)
{
    st__drop_overlay(s);
    st__batch_recycle(s, s->open);
    s->open = st__batch_new(s);
    uv_idle_stop(&s->idle);
    uint64_t first = s->fail_first;
    int err = s->fail_err;
    s->fail_first = 0;
    uv_mutex_lock(&s->mu);
    s->halted = false;
    uv_cond_signal(&s->cv_sync);
    uv_mutex_unlock(&s->mu);
    for (st_store_listener_t *l = s->listeners; l; l = l->next)
        if (l->on_failed) l->on_failed(l, first, err);
}

void st__store_on_done(uv_async_t *h)
{
    st_store_t *s = h->data;
    uv_mutex_lock(&s->mu);
    st_batch_t *list = s->d_head;
    s->d_head = s->d_tail = NULL;
    uint64_t acked = s->acked_id;
    st_batch_t *queued = NULL;
    if (s->halted) {
        /* take back what will never reach the log: it fails with the failed group */
        queued = s->q_head;
        s->q_head = s->q_tail = NULL;
    }
    uint64_t sync_ns = s->sync_ns_sum, syncs = s->sync_count, ops = s->group_ops,
             writes = s->group_writes, apply_ns = s->apply_ns_sum, applies = s->apply_count;
    s->sync_ns_sum = s->sync_count = s->group_ops = s->group_writes = 0;
    s->apply_ns_sum = s->apply_count = 0;
    uv_mutex_unlock(&s->mu);
    if (syncs) {
        st_metric_observe(s->m_commit_s, (double)sync_ns / 1e9 / (double)syncs);
        st_metric_observe(s->m_batch_ops, (double)ops / (double)syncs);
        st_metric_observe(s->m_batch_writes, (double)writes / (double)syncs);
        st_metric_add(s->m_commits, (double)syncs);
    }
    if (applies) st_metric_observe(s->m_apply_s, (double)apply_ns / 1e9 / (double)applies);
    for (st_batch_t *b = list, *next; b; b = next) {
        next = b->next;
        s->submitted--;
        if (b->rc == 0) {
            /* In LMDB now: overlay entries last written by this batch go. */
            for (size_t i = 0; i < b->nops; i++) {
                st_op_t *op = &b->ops[i];
                st_ov_t *e = (st_ov_t *)st_map_get(&s->overlay, b->data.data + op->koff, op->klen);
                if (e && e->batch == b->id) {
                    st_map_remove(&s->overlay, &e->node);
                    st__ov_free(e);
                }
            }
        } else if (!s->fail_first) {
            s->fail_first = b->id;
            s->fail_err = b->rc;
            st_metric_add(s->m_failed, 1);
            st_error("store: logging batch %llu failed: %s; rolling back what was not "
                     "acknowledged",
                     (unsigned long long)b->id, st_strerror(b->rc));
        }
        st__batch_recycle(s, b);
    }
    for (st_batch_t *b = queued, *next; b; b = next) {
        next = b->next;
        s->submitted--;
        st__batch_recycle(s, b);
    }
    if (acked > s->durable_id) {
        s->durable_id = acked;
        for (st_store_listener_t *l = s->listeners; l; l = l->next)
            if (l->on_durable) l->on_durable(l, s->durable_id);
    }
    if (s->fail_first && s->submitted == 0) st__rollback(s);
    if (s->submitted == 0) uv_unref((uv_handle_t *)&s->done);
}

void st__store_start_threads(st_store_t *s)
{
    if (uv_thread_create(&s->sync_thread, st__sync_thread, s) != 0 ||
        uv_thread_create(&s->apply_thread, st__apply_thread, s) != 0)
        st_fatal("store: cannot start the commit threads");
}

void st__store_stop_threads(st_store_t *s)
{
    /* The sync thread finishes what is queued; the apply thread what is logged. */
    uv_mutex_lock(&s->mu);
    s->stop = true;
    uv_cond_broadcast(&s->cv_sync);
    uv_mutex_unlock(&s->mu);
    uv_thread_join(&s->sync_thread);
    uv_mutex_lock(&s->mu);
    s->stop_apply = true; /* only now: the sync thread may have logged a last group */
    uv_cond_broadcast(&s->cv_apply);
    uv_mutex_unlock(&s->mu);
    uv_thread_join(&s->apply_thread);
    /* Clean stop: LMDB has everything, so the next start replays nothing. */
    if (mdb_env_sync(s->env, 1) == 0) st_wal_reset(s->wal);
}
