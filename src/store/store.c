/* SPDX-License-Identifier: MIT */
/*
 * The store's loop-side API: opening LMDB and the redo log, reads that see staged writes
 * through the overlay, staging into the open batch, and prefix scans. The threads that make
 * batches durable live in commit.c.
 *
 * fsync mode: a group is acknowledged after its redo-log record is written in place and
 * fdatasync'd (one flush). LMDB runs with MDB_NOMETASYNC: each of its commits syncs the data
 * pages (integrity is kept), and the meta page is synced at the next commit or checkpoint; after
 * a power loss LMDB may be a few transactions behind, and the log replays them at start-up.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ST__WAL_SIZE (64ULL << 20)

void st__ov_free(st_ov_t *e)
{
    free(e->val);
    free(e);
}

void st__drop_overlay(st_store_t *s)
{
    size_t it;
    st_map_node_t *n = st_map_first(&s->overlay, &it);
    while (n) {
        st_map_node_t *next = st_map_next(&s->overlay, &it, n);
        st_map_remove(&s->overlay, n);
        st__ov_free((st_ov_t *)n);
        n = next;
    }
}

static void st__on_idle(uv_idle_t *h)
{
    (void)h;
}

static void st__on_check(uv_check_t *h)
{
    st_store_t *s = h->data;
    if (s->open->nops > 0) st__store_submit(s);
}

static double st__gauge_used(void *arg)
{
    uint64_t used, size;
    st_store_usage(arg, &used, &size);
    return (double)used;
}

static double st__gauge_size(void *arg)
{
    uint64_t used, size;
    st_store_usage(arg, &used, &size);
    return (double)size;
}

static void st__metrics(st_store_t *s)
{
    s->m_batch_ops = st_metrics_histogram("strata_commit_batch_ops",
                                          "LMDB puts/deletes per group commit (one WAL record)", "",
                                          st_metrics_size_bounds, st_metrics_size_nbounds);
    s->m_batch_writes = st_metrics_histogram(
        "strata_commit_batch_writes",
        "Staged writes per group commit, counting rewrites of a key coalesced into one op", "",
        st_metrics_size_bounds, st_metrics_size_nbounds);
    s->m_commit_s = st_metrics_histogram(
        "strata_commit_seconds", "Group commit latency: WAL write + fdatasync (the ack point)", "",
        st_metrics_latency_bounds, st_metrics_latency_nbounds);
    s->m_apply_s = st_metrics_histogram("strata_lmdb_apply_seconds",
                                        "LMDB transaction applying logged groups (behind the ack)",
                                        "", st_metrics_latency_bounds, st_metrics_latency_nbounds);
    s->m_commits = st_metrics_counter("strata_commits_total", "Group commits completed", "");
    s->m_failed = st_metrics_counter("strata_commit_failures_total",
                                     "Group commits that failed and were rolled back", "");
    st_metrics_gauge_fn("strata_hot_bytes", "Bytes used in the LMDB hot store", "", st__gauge_used,
                        s);
    st_metrics_gauge_fn("strata_hot_capacity_bytes", "Configured hot store capacity", "",
                        st__gauge_size, s);
}

int st_store_open(st_store_t **out, uv_loop_t *loop, const st_store_opts_t *opts)
{
    if (mkdir(opts->dir, 0755) != 0 && errno != EEXIST) {
        st_error("store: cannot create %s: %s", opts->dir, strerror(errno));
        return ST_EIO;
    }
    st_store_t *s = st_calloc(1, sizeof *s);
    s->loop = loop;
    s->quota = opts->map_size;
    /* LMDB's map is larger than the quota: writes are refused at the quota, and the headroom
     * absorbs groups that were acknowledged but not yet applied. */
    uint64_t headroom = opts->map_size / 4 > (32ULL << 20) ? opts->map_size / 4 : 32ULL << 20;
    int rc = mdb_env_create(&s->env);
    if (!rc) rc = mdb_env_set_mapsize(s->env, opts->map_size + headroom);
    if (!rc) rc = mdb_env_set_maxreaders(s->env, 64);
    if (!rc) rc = mdb_env_open(s->env, opts->dir, MDB_NOTLS | MDB_NOMETASYNC, 0644);
    MDB_txn *txn = NULL;
    if (!rc) rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    if (!rc) rc = mdb_dbi_open(txn, NULL, 0, &s->dbi);
    if (!rc)
        rc = mdb_txn_commit(txn);
    else if (txn)
        mdb_txn_abort(txn);
    if (!rc) rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &s->rtxn);
    if (rc) {
        st_error("store: cannot open LMDB in %s: %s", opts->dir, mdb_strerror(rc));
        if (s->env) mdb_env_close(s->env);
        free(s);
        return st__mdb_err(rc);
    }
    mdb_txn_reset(s->rtxn);
    int err = st_wal_open(opts->dir, opts->wal_size ? opts->wal_size : ST__WAL_SIZE, &s->wal);
    if (err == ST_OK) err = st__store_recover(s);
    if (err != ST_OK) {
        st_error("store: recovery from the redo log in %s failed: %s", opts->dir, st_strerror(err));
        st_wal_close(s->wal);
        mdb_txn_abort(s->rtxn);
        mdb_env_close(s->env);
        free(s);
        return err;
    }
    st_map_init(&s->overlay);
    s->open = st__batch_new(s);
    uv_mutex_init(&s->mu);
    uv_cond_init(&s->cv_sync);
    uv_cond_init(&s->cv_apply);
    uv_cond_init(&s->cv_applied);
    uv_async_init(loop, &s->done, st__store_on_done);
    s->done.data = s;
    uv_check_init(loop, &s->check);
    s->check.data = s;
    uv_check_start(&s->check, st__on_check);
    uv_unref((uv_handle_t *)&s->check);
    uv_unref((uv_handle_t *)&s->done);
    uv_idle_init(loop, &s->idle);
    s->idle.data = s;
    st__metrics(s);
    st__store_start_threads(s);
    *out = s;
    return ST_OK;
}

static void st__on_closed(uv_handle_t *h)
{
    st_store_t *s = h->data;
    if (++s->closed == 3) free(s);
}

void st_store_close(st_store_t *s)
{
    st__store_stop_threads(s);
    st__drop_overlay(s);
    st_map_free(&s->overlay);
    s->open->next = NULL;
    st_batch_t *lists[] = {s->free_list, s->q_head, s->a_head, s->d_head, s->open};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
        for (st_batch_t *b = lists[i], *n; b; b = n) {
            n = b->next;
            st__batch_free(b);
        }
    st_buf_free(&s->scratch);
    st_wal_close(s->wal);
    mdb_txn_abort(s->rtxn);
    mdb_env_close(s->env);
    uv_mutex_destroy(&s->mu);
    uv_cond_destroy(&s->cv_sync);
    uv_cond_destroy(&s->cv_apply);
    uv_cond_destroy(&s->cv_applied);
    /* The struct is freed once the handles have closed (the loop must run once more). */
    uv_close((uv_handle_t *)&s->done, st__on_closed);
    uv_close((uv_handle_t *)&s->check, st__on_closed);
    uv_close((uv_handle_t *)&s->idle, st__on_closed);
}

void st_store_listen(st_store_t *s, st_store_listener_t *l)
{
    l->next = s->listeners;
    s->listeners = l;
}

int st_store_get(st_store_t *s, const void *key, size_t klen, const void **val, size_t *vlen,
                 uint64_t *wait)
{
    st_ov_t *e = (st_ov_t *)st_map_get(&s->overlay, key, klen);
    if (e) {
        if (*wait < e->batch) *wait = e->batch;
        if (e->del) return ST_ENOTFOUND;
        *val = e->val ? e->val : "";
        *vlen = e->vlen;
        return ST_OK;
    }
    int rc = s->rtxn_held ? 0 : mdb_txn_renew(s->rtxn);
    if (rc) return st__mdb_err(rc);
    MDB_val k = {klen, (void *)key}, v;
    rc = mdb_get(s->rtxn, s->dbi, &k, &v);
    if (rc == 0) {
        st_buf_reset(&s->scratch);
        st_buf_append(&s->scratch, v.mv_data, v.mv_size);
        *val = s->scratch.data;
        *vlen = v.mv_size;
    }
    if (!s->rtxn_held) mdb_txn_reset(s->rtxn);
    if (rc == MDB_NOTFOUND) return ST_ENOTFOUND;
    return st__mdb_err(rc);
}

void st_store_read_hold(st_store_t *s)
{
    ST_ASSERT(!s->rtxn_held);
    if (mdb_txn_renew(s->rtxn) == 0) s->rtxn_held = true;
}

void st_store_read_release(st_store_t *s)
{
    if (s->rtxn_held) mdb_txn_reset(s->rtxn);
    s->rtxn_held = false;
}

static int st__stage(st_store_t *s, const void *key, size_t klen, const void *val, size_t vlen,
                     bool del, uint64_t *wait)
{
    if (klen == 0 || klen > ST_KEY_MAX) return ST_EINVAL;
    st_batch_t *b = s->open;
    st_ov_t *e = (st_ov_t *)st_map_get(&s->overlay, key, klen);
    if (e && e->batch == b->id && !e->del && !del && e->vlen == vlen) {
        /* Same key rewritten in this batch with a value of the same size (a hot counter):
         * overwrite in place instead of growing the batch. */
        if (vlen) {
            memcpy(b->data.data + b->ops[e->op_idx].voff, val, vlen);
            memcpy(e->val, val, vlen);
        }
        b->writes++;
        if (*wait < b->id) *wait = b->id;
        return ST_OK;
    }
    if (b->nops == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 256;
        b->ops = st_realloc(b->ops, b->cap * sizeof *b->ops);
    }
    st_op_t *op = &b->ops[b->nops];
    /* Staged work must not wait for unrelated I/O to wake the loop: the idle handle makes this
     * iteration's poll return at once so the check handle seals the batch. */
    if (b->nops == 0) uv_idle_start(&s->idle, st__on_idle);
    op->koff = b->data.len;
    op->klen = klen;
    st_buf_append(&b->data, key, klen);
    op->voff = b->data.len;
    op->vlen = del ? 0 : vlen;
    op->del = del;
    if (!del) st_buf_append(&b->data, val, vlen);
    if (!e) {
        e = st_calloc(1, sizeof *e + klen);
        memcpy(e->key, key, klen);
        e->node.key = e->key;
        e->node.klen = klen;
        st_map_insert(&s->overlay, &e->node);
    }
    e->batch = b->id;
    e->op_idx = b->nops;
    e->del = del;
    if (!del && vlen) {
        if (e->vcap < vlen) {
            e->val = st_realloc(e->val, vlen);
            e->vcap = vlen;
        }
        memcpy(e->val, val, vlen);
    }
    e->vlen = del ? 0 : vlen;
    b->nops++;
    b->writes++;
    if (*wait < b->id) *wait = b->id;
    return ST_OK;
}

int st_store_put(st_store_t *s, const void *key, size_t klen, const void *val, size_t vlen,
                 uint64_t *wait)
{
    return st__stage(s, key, klen, val, vlen, false, wait);
}

int st_store_del(st_store_t *s, const void *key, size_t klen, uint64_t *wait)
{
    return st__stage(s, key, klen, NULL, 0, true, wait);
}

uint64_t st_store_durable_id(const st_store_t *s)
{
    return s->durable_id;
}

bool st_store_idle(const st_store_t *s)
{
    return s->submitted == 0 && s->open->nops == 0;
}

void st_store_usage(st_store_t *s, uint64_t *used, uint64_t *size)
{
    uv_mutex_lock(&s->mu);
    *used = s->used_bytes;
    uv_mutex_unlock(&s->mu);
    *size = s->quota;
}

int st_store_writable(st_store_t *s)
{
    uint64_t used, size;
    st_store_usage(s, &used, &size);
    return used >= size ? ST_EFULL : ST_OK;
}

static int st__ov_cmp(const void *a, const void *b)
{
    const st_ov_t *x = *(st_ov_t *const *)a, *y = *(st_ov_t *const *)b;
    size_t n = x->node.klen < y->node.klen ? x->node.klen : y->node.klen;
    int c = memcmp(x->key, y->key, n);
    if (c) return c;
    return x->node.klen < y->node.klen ? -1 : x->node.klen > y->node.klen;
}

static int st__key_cmp(const void *a, size_t an, const void *b, size_t bn)
{
    size_t n = an < bn ? an : bn;
    int c = memcmp(a, b, n);
    if (c) return c;
    return an < bn ? -1 : an > bn;
}

int st_store_scan(st_store_t *s, const void *prefix, size_t plen, st_store_scan_fn fn, void *arg,
                  uint64_t *wait)
{
    return st_store_scan_from(s, prefix, plen, NULL, 0, fn, arg, wait);
}

static int st__count_key(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)key;
    (void)klen;
    (void)val;
    (void)vlen;
    ++*(int64_t *)arg;
    return 0;
}

int st_store_count(st_store_t *s, const void *prefix, size_t plen, int64_t *n, uint64_t *wait)
{
    *n = 0;
    return st_store_scan(s, prefix, plen, st__count_key, n, wait);
}

int st_store_scan_from(st_store_t *s, const void *prefix, size_t plen, const void *from,
                       size_t flen, st_store_scan_fn fn, void *arg, uint64_t *wait)
{
    return st_store_range(s, prefix, plen, from, flen, NULL, 0, false, fn, arg, wait);
}

static int st__ov_cmp_desc(const void *a, const void *b)
{
    return st__ov_cmp(b, a);
}

/* Is key within [lo, hi) under the prefix? (NULL bounds are open.) */
static bool st__in_range(const void *key, size_t klen, const void *prefix, size_t plen,
                         const void *lo, size_t lolen, const void *hi, size_t hilen)
{
    if (klen < plen || memcmp(key, prefix, plen) != 0) return false;
    if (lo && st__key_cmp(key, klen, lo, lolen) < 0) return false;
    if (hi && st__key_cmp(key, klen, hi, hilen) >= 0) return false;
    return true;
}

/* Puts the cursor on the last key below hi (or below the end of the prefix). */
static int st__seek_last(MDB_cursor *cur, const void *prefix, size_t plen, const void *hi,
                         size_t hilen, MDB_val *k, MDB_val *v)
{
    uint8_t succ[ST_KEY_MAX + 1];
    if (!hi) {
        /* the smallest key after every key with this prefix */
        size_t n = plen;
        memcpy(succ, prefix, plen);
        while (n && succ[n - 1] == 0xff)
            n--;
        if (!n) return mdb_cursor_get(cur, k, v, MDB_LAST);
        succ[n - 1]++;
        hi = succ;
        hilen = n;
    }
    k->mv_size = hilen;
    k->mv_data = (void *)hi;
    int rc = mdb_cursor_get(cur, k, v, MDB_SET_RANGE);
    if (rc == MDB_NOTFOUND) return mdb_cursor_get(cur, k, v, MDB_LAST);
    if (rc) return rc;
    return mdb_cursor_get(cur, k, v, MDB_PREV);
}

int st_store_range(st_store_t *s, const void *prefix, size_t plen, const void *lo, size_t lolen,
                   const void *hi, size_t hilen, bool reverse, st_store_scan_fn fn, void *arg,
                   uint64_t *wait)
{
    /* Staged entries in range, sorted, merged with an LMDB cursor walk. The overlay holds only
     * what is not yet in LMDB, so collecting it is cheap. */
    st_ov_t **staged = NULL;
    size_t nstaged = 0, cap = 0, it;
    ST_ASSERT(!s->rtxn_held);
    for (st_map_node_t *n = s->overlay.count ? st_map_first(&s->overlay, &it) : NULL; n;
         n = st_map_next(&s->overlay, &it, n)) {
        if (!st__in_range(n->key, n->klen, prefix, plen, lo, lolen, hi, hilen)) continue;
        if (nstaged == cap) {
            cap = cap ? cap * 2 : 16;
            staged = st_realloc(staged, cap * sizeof *staged);
        }
        staged[nstaged++] = (st_ov_t *)n;
    }
    if (nstaged) qsort(staged, nstaged, sizeof *staged, reverse ? st__ov_cmp_desc : st__ov_cmp);
    int rc = mdb_txn_renew(s->rtxn);
    if (rc) {
        free(staged);
        return st__mdb_err(rc);
    }
    MDB_cursor *cur;
    rc = mdb_cursor_open(s->rtxn, s->dbi, &cur);
    if (rc) {
        mdb_txn_reset(s->rtxn);
        free(staged);
        return st__mdb_err(rc);
    }
    MDB_val k, v;
    int mrc;
    if (reverse) {
        mrc = st__seek_last(cur, prefix, plen, hi, hilen, &k, &v);
    } else {
        bool from_lo = lo && st__key_cmp(lo, lolen, prefix, plen) > 0;
        k.mv_size = from_lo ? lolen : plen;
        k.mv_data = (void *)(from_lo ? lo : prefix);
        mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    }
    MDB_cursor_op step = reverse ? MDB_PREV : MDB_NEXT;
    size_t si = 0;
    int ret = 0;
    for (;;) {
        bool have_db =
            mrc == 0 && st__in_range(k.mv_data, k.mv_size, prefix, plen, lo, lolen, hi, hilen);
        bool have_ov = si < nstaged;
        if (!have_db && !have_ov) break;
        int c = !have_db ? 1
                : !have_ov
                    ? -1
                    : st__key_cmp(k.mv_data, k.mv_size, staged[si]->key, staged[si]->node.klen);
        if (reverse && have_db && have_ov) c = -c;
        if (c < 0) {
            ret = fn(arg, k.mv_data, k.mv_size, v.mv_data, v.mv_size);
            mrc = mdb_cursor_get(cur, &k, &v, step);
        } else {
            st_ov_t *e = staged[si++];
            if (*wait < e->batch) *wait = e->batch;
            if (!e->del) ret = fn(arg, e->key, e->node.klen, e->val, e->vlen);
            if (c == 0) mrc = mdb_cursor_get(cur, &k, &v, step);
        }
        if (ret) break;
    }
    mdb_cursor_close(cur);
    mdb_txn_reset(s->rtxn);
    free(staged);
    return ret;
}
