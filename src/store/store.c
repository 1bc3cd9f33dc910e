/* SPDX-License-Identifier: MIT */
/*
 * The LMDB environment, the overlay of staged writes, and group commit.
 *
 * Batches: there is always one open batch (id open_id) collecting writes, and at most one batch
 * in flight on the commit thread. LMDB allows one writer at a time anyway, and keeping one in
 * flight means a batch grows for exactly as long as the previous fsync takes: under load,
 * batches get bigger instead of commits getting more frequent.
 *
 * fsync mode: LMDB's default (no MDB_NOSYNC / MDB_NOMETASYNC): each commit fdatasync()s the data
 * pages and then writes the meta page synchronously. That is what makes a 2xx after commit safe
 * against power loss, not only against kill -9; the cost is paid once per batch, not per request.
 */
#include "strata/store.h"
#include "strata/metrics.h"

#include <errno.h>
#include <lmdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    size_t koff, klen, voff, vlen;
    bool del;
} st_op_t;

typedef struct st_batch {
    struct st_batch *next;
    uint64_t id;
    st_buf_t data; /* keys and values of ops */
    st_op_t *ops;
    size_t nops, cap;
    size_t writes; /* staged writes, including ones coalesced into an earlier op */
    /* set by the commit thread */
    int rc;
    bool group_end; /* last batch of one LMDB transaction */
    size_t group_ops, group_writes;
    uint64_t group_ns;
} st_batch_t;

/* A staged write not yet durable; newest value for its key. */
typedef struct {
    st_map_node_t node;
    uint64_t batch;
    size_t op_idx; /* op in the open batch that carries this value, for in-place coalescing */
    bool del;
    char *val;
    size_t vlen, vcap;
    char key[];
} st_ov_t;

struct st_store {
    uv_loop_t *loop;
    MDB_env *env;
    MDB_dbi dbi;
    MDB_txn *rtxn;
    st_map_t overlay;
    st_batch_t *open;      /* staging; loop only */
    st_batch_t *free_list; /* recycled batches; loop only */
    uint64_t open_id, durable_id;
    size_t submitted; /* batches handed to the thread and not yet returned */
    st_store_listener_t *listeners;
    st_buf_t scratch;

    /* shared with the commit thread, under mu */
    uv_thread_t thread;
    uv_mutex_t mu;
    uv_cond_t cv;
    st_batch_t *q_head, *q_tail; /* sealed, waiting for the thread */
    st_batch_t *d_head, *d_tail; /* committed or failed, waiting for the loop */
    bool halted;                 /* after a failure, until the loop has rolled back */
    bool stop;

    uv_async_t done;
    uv_check_t check;
    uv_idle_t idle;
    int closed;

    st_metric_t *m_batch_ops, *m_batch_writes, *m_commit_s, *m_commits, *m_failed;
};

static int st__mdb_err(int rc)
{
    if (rc == 0) return ST_OK;
    if (rc == MDB_MAP_FULL || rc == ENOSPC) return ST_EFULL;
    if (rc == ENOMEM) return ST_ENOMEM;
    return ST_EIO;
}

/* ---- the commit thread ---- */

/* One write transaction for a whole group of batches: one fsync however many there are. */
static int st__apply(st_store_t *s, st_batch_t *group)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    if (rc) return rc;
    for (st_batch_t *b = group; b; b = b->next) {
        for (size_t i = 0; i < b->nops; i++) {
            st_op_t *op = &b->ops[i];
            MDB_val k = {op->klen, b->data.data + op->koff};
            if (op->del) {
                rc = mdb_del(txn, s->dbi, &k, NULL);
                if (rc == MDB_NOTFOUND) rc = 0;
            } else {
                MDB_val v = {op->vlen, b->data.data + op->voff};
                rc = mdb_put(txn, s->dbi, &k, &v, 0);
            }
            if (rc) {
                mdb_txn_abort(txn);
                return rc;
            }
        }
    }
    return mdb_txn_commit(txn);
}

/*
 * Takes every sealed batch at once and commits them as one transaction, back to back with the
 * previous commit: the disk never waits for the loop, and the longer a commit takes, the more
 * the next one carries.
 */
static void st__commit_thread(void *arg)
{
    st_store_t *s = arg;
    uv_mutex_lock(&s->mu);
    for (;;) {
        while ((!s->q_head || s->halted) && !(s->stop && (!s->q_head || s->halted)))
            uv_cond_wait(&s->cv, &s->mu);
        if (!s->q_head || s->halted) break; /* stopping, nothing (committable) left */
        st_batch_t *group = s->q_head, *last = s->q_tail;
        s->q_head = s->q_tail = NULL;
        uv_mutex_unlock(&s->mu);
        uint64_t t0 = st_mono_ns();
        int rc = st__apply(s, group);
        uint64_t ns = st_mono_ns() - t0;
        size_t ops = 0, writes = 0;
        for (st_batch_t *b = group; b; b = b->next) {
            b->rc = rc;
            b->group_end = b == last;
            ops += b->nops;
            writes += b->writes;
        }
        last->group_ops = ops;
        last->group_writes = writes;
        last->group_ns = ns;
        uv_mutex_lock(&s->mu);
        if (s->d_tail)
            s->d_tail->next = group;
        else
            s->d_head = group;
        s->d_tail = last;
        if (rc) s->halted = true;
        uv_async_send(&s->done);
    }
    uv_mutex_unlock(&s->mu);
}

/* ---- the loop side ---- */

static st_batch_t *st__batch_new(st_store_t *s)
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
    b->group_end = false;
    b->id = ++s->open_id;
    return b;
}

static void st__batch_recycle(st_store_t *s, st_batch_t *b)
{
    /* Keep one big buffer at most per batch around; drop outsized ones. */
    if (b->data.cap > (8u << 20)) {
        st_buf_free(&b->data);
        free(b->ops);
        b->ops = NULL;
        b->cap = 0;
    }
    b->next = s->free_list;
    s->free_list = b;
}

static void st__batch_free(st_batch_t *b)
{
    st_buf_free(&b->data);
    free(b->ops);
    free(b);
}

/* Seals the open batch and queues it for the commit thread (only ever at a request boundary:
 * the loop calls this between callbacks, so one request's writes never straddle two batches). */
static void st__submit(st_store_t *s)
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
    uv_cond_signal(&s->cv);
    uv_mutex_unlock(&s->mu);
    s->submitted++;
    s->open = st__batch_new(s);
    /* Pending durable work keeps the loop alive; idle, the store does not. */
    uv_ref((uv_handle_t *)&s->done);
    uv_idle_stop(&s->idle);
}

static void st__ov_free(st_ov_t *e)
{
    free(e->val);
    free(e);
}

static void st__drop_overlay(st_store_t *s)
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

static void st__on_done(uv_async_t *h)
{
    st_store_t *s = h->data;
    uv_mutex_lock(&s->mu);
    st_batch_t *list = s->d_head;
    s->d_head = s->d_tail = NULL;
    uv_mutex_unlock(&s->mu);
    if (!list) return;
    uint64_t failed_first = 0;
    int err = ST_OK;
    for (st_batch_t *b = list, *next; b; b = next) {
        next = b->next;
        s->submitted--;
        if (b->group_end) {
            st_metric_observe(s->m_commit_s, (double)b->group_ns / 1e9);
            st_metric_observe(s->m_batch_ops, (double)b->group_ops);
            st_metric_observe(s->m_batch_writes, (double)b->group_writes);
            st_metric_add(b->rc ? s->m_failed : s->m_commits, 1);
        }
        if (b->rc == 0) {
            /* The values are in LMDB now: overlay entries last written by this batch go. */
            for (size_t i = 0; i < b->nops; i++) {
                st_op_t *op = &b->ops[i];
                st_ov_t *e = (st_ov_t *)st_map_get(&s->overlay, b->data.data + op->koff, op->klen);
                if (e && e->batch == b->id) {
                    st_map_remove(&s->overlay, &e->node);
                    st__ov_free(e);
                }
            }
            s->durable_id = b->id;
        } else if (!failed_first) {
            failed_first = b->id;
            err = st__mdb_err(b->rc);
            st_error("store: commit of batch %llu (%zu ops) failed: %s; rolled back",
                     (unsigned long long)b->id, b->nops, mdb_strerror(b->rc));
        }
        st__batch_recycle(s, b);
    }
    if (failed_first) {
        /* Nothing from the failed group on is durable, and everything queued or staged since
         * was built on top of it: roll all of it back. The overlay holds nothing else. */
        uv_mutex_lock(&s->mu);
        st_batch_t *q = s->q_head;
        s->q_head = s->q_tail = NULL;
        s->halted = false;
        uv_mutex_unlock(&s->mu);
        while (q) {
            st_batch_t *n = q->next;
            s->submitted--;
            st__batch_recycle(s, q);
            q = n;
        }
        st__drop_overlay(s);
        st__batch_recycle(s, s->open);
        s->open = st__batch_new(s);
        uv_idle_stop(&s->idle);
        for (st_store_listener_t *l = s->listeners; l; l = l->next)
            if (l->on_failed) l->on_failed(l, failed_first, err);
    } else {
        for (st_store_listener_t *l = s->listeners; l; l = l->next)
            if (l->on_durable) l->on_durable(l, s->durable_id);
    }
    if (s->submitted == 0) uv_unref((uv_handle_t *)&s->done);
}

static void st__on_idle(uv_idle_t *h)
{
    (void)h;
}

static void st__on_check(uv_check_t *h)
{
    st_store_t *s = h->data;
    if (s->open->nops > 0) st__submit(s);
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

int st_store_open(st_store_t **out, uv_loop_t *loop, const st_store_opts_t *opts)
{
    if (mkdir(opts->dir, 0755) != 0 && errno != EEXIST) {
        st_error("store: cannot create %s: %s", opts->dir, strerror(errno));
        return ST_EIO;
    }
    st_store_t *s = st_calloc(1, sizeof *s);
    s->loop = loop;
    int rc = mdb_env_create(&s->env);
    if (!rc) rc = mdb_env_set_mapsize(s->env, opts->map_size);
    if (!rc) rc = mdb_env_set_maxreaders(s->env, 64);
    if (!rc) rc = mdb_env_open(s->env, opts->dir, MDB_NOTLS, 0644);
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
    st_map_init(&s->overlay);
    s->open = st__batch_new(s);
    uv_mutex_init(&s->mu);
    uv_cond_init(&s->cv);
    uv_async_init(loop, &s->done, st__on_done);
    s->done.data = s;
    uv_check_init(loop, &s->check);
    s->check.data = s;
    uv_check_start(&s->check, st__on_check);
    uv_unref((uv_handle_t *)&s->check);
    uv_unref((uv_handle_t *)&s->done);
    uv_idle_init(loop, &s->idle);
    s->idle.data = s;
    if (uv_thread_create(&s->thread, st__commit_thread, s) != 0)
        st_fatal("store: cannot start the commit thread");

    s->m_batch_ops = st_metrics_histogram(
        "strata_commit_batch_ops", "LMDB puts/deletes per group commit (one transaction)", "",
        st_metrics_size_bounds, st_metrics_size_nbounds);
    s->m_batch_writes = st_metrics_histogram(
        "strata_commit_batch_writes",
        "Staged writes per group commit, counting rewrites of a key coalesced into one op", "",
        st_metrics_size_bounds, st_metrics_size_nbounds);
    s->m_commit_s =
        st_metrics_histogram("strata_commit_seconds", "LMDB commit latency including fsync", "",
                             st_metrics_latency_bounds, st_metrics_latency_nbounds);
    s->m_commits = st_metrics_counter("strata_commits_total", "Group commits completed", "");
    s->m_failed = st_metrics_counter("strata_commit_failures_total",
                                     "Group commits that failed and were rolled back", "");
    st_metrics_gauge_fn("strata_hot_bytes", "Bytes used in the LMDB hot store", "", st__gauge_used,
                        s);
    st_metrics_gauge_fn("strata_hot_capacity_bytes", "LMDB map size", "", st__gauge_size, s);
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
    uv_mutex_lock(&s->mu);
    s->stop = true;
    uv_cond_signal(&s->cv);
    uv_mutex_unlock(&s->mu);
    uv_thread_join(&s->thread);
    st__drop_overlay(s);
    st_map_free(&s->overlay);
    st_batch_t *lists[] = {s->free_list, s->q_head, s->d_head, s->open};
    s->open->next = NULL;
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
        for (st_batch_t *b = lists[i], *n; b; b = n) {
            n = b->next;
            st__batch_free(b);
        }
    st_buf_free(&s->scratch);
    mdb_txn_abort(s->rtxn);
    mdb_env_close(s->env);
    uv_mutex_destroy(&s->mu);
    uv_cond_destroy(&s->cv);
    /* The struct is freed once both handles have closed (the loop must run once more). */
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
    int rc = mdb_txn_renew(s->rtxn);
    if (rc) return st__mdb_err(rc);
    MDB_val k = {klen, (void *)key}, v;
    rc = mdb_get(s->rtxn, s->dbi, &k, &v);
    if (rc == 0) {
        st_buf_reset(&s->scratch);
        st_buf_append(&s->scratch, v.mv_data, v.mv_size);
        *val = s->scratch.data;
        *vlen = v.mv_size;
    }
    mdb_txn_reset(s->rtxn);
    if (rc == MDB_NOTFOUND) return ST_ENOTFOUND;
    return st__mdb_err(rc);
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
    MDB_envinfo info;
    MDB_stat st;
    mdb_env_info(s->env, &info);
    mdb_env_stat(s->env, &st);
    *used = (uint64_t)(info.me_last_pgno + 1) * st.ms_psize;
    *size = info.me_mapsize;
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
    /* Staged entries under the prefix, sorted, merged with an LMDB cursor walk. The overlay
     * holds at most two batches' worth, so collecting it is cheap. */
    st_ov_t **staged = NULL;
    size_t nstaged = 0, cap = 0, it;
    for (st_map_node_t *n = st_map_first(&s->overlay, &it); n;
         n = st_map_next(&s->overlay, &it, n)) {
        if (n->klen < plen || memcmp(n->key, prefix, plen) != 0) continue;
        if (nstaged == cap) {
            cap = cap ? cap * 2 : 16;
            staged = st_realloc(staged, cap * sizeof *staged);
        }
        staged[nstaged++] = (st_ov_t *)n;
    }
    if (nstaged) qsort(staged, nstaged, sizeof *staged, st__ov_cmp);
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
    MDB_val k = {plen, (void *)prefix}, v;
    int mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    size_t si = 0;
    int ret = 0;
    for (;;) {
        bool have_db = mrc == 0 && k.mv_size >= plen && memcmp(k.mv_data, prefix, plen) == 0;
        bool have_ov = si < nstaged;
        if (!have_db && !have_ov) break;
        int c = !have_db ? 1
                : !have_ov
                    ? -1
                    : st__key_cmp(k.mv_data, k.mv_size, staged[si]->key, staged[si]->node.klen);
        if (c < 0) {
            ret = fn(arg, k.mv_data, k.mv_size, v.mv_data, v.mv_size);
            mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
        } else {
            st_ov_t *e = staged[si++];
            if (*wait < e->batch) *wait = e->batch;
            if (!e->del) ret = fn(arg, e->key, e->node.klen, e->val, e->vlen);
            if (c == 0) mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
        }
        if (ret) break;
    }
    mdb_cursor_close(cur);
    mdb_txn_reset(s->rtxn);
    free(staged);
    return ret;
}
