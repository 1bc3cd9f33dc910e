/* SPDX-License-Identifier: MIT */
/*
 * The store's loop-side API: opening LMDB and the redo log, reads that see staged writes
 * through the overlay, staging into the open batch, and prefix scans. The threads that make
 * batches durable live in commit.c, quota and disk room in space.c; group mode (group.c) and the
 * backup's tap (tap.c) hang off the commit path through their own state.
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

#define ST__WAL_SIZE     (64ULL << 20)
#define ST__FAIL_PACE_MS 100

static void st__on_pace(uv_timer_t *t);

void st__ov_free(st_ov_t *e)
{
    free(e->val);
    free(e);
}

void st__drop_overlay(st_store_t *s)
{
    st__ov_clear(s);
}

static char *st__dup(const char *p)
{
    size_t n = strlen(p) + 1;
    return memcpy(st_calloc(1, n), p, n);
}

void st__store_on_idle(uv_idle_t *h)
{
    (void)h;
}

/* Seals the open batch at the end of the iteration. Once the log has failed every batch fails,
 * and a module that retries a failed write at once (an expiry) would spin the loop through
 * fail, roll back, retry: then batches go at most every ST__FAIL_PACE_MS. */
static void st__seal(st_store_t *s)
{
    if (s->open->ops.n == 0) return;
    if (s->fail.stopped) {
        uint64_t now = uv_now(s->loop);
        if (now < s->fail.next_submit_ms) {
            uv_idle_stop(&s->uv.idle);
            if (!uv_is_active((uv_handle_t *)&s->uv.pace))
                uv_timer_start(&s->uv.pace, st__on_pace, s->fail.next_submit_ms - now, 0);
            return;
        }
        s->fail.next_submit_ms = now + ST__FAIL_PACE_MS;
    }
    if (s->group && st__group_hold(s)) {
        uv_idle_stop(&s->uv.idle); /* an entry of ours applying wakes the loop */
        return;
    }
    if (s->group)
        st__group_submit(s); /* a replicated group: the batch becomes a Raft entry */
    else
        st__store_submit(s);
}

static void st__on_pace(uv_timer_t *t)
{
    st__seal(t->data);
}

static void st__on_check(uv_check_t *h)
{
    st_store_t *s = h->data;
    st__seal(s);
    if (s->group) st__group_handoff(s, false); /* after the seal: it may stop the idle handle */
}

static double st__gauge_used(void *arg)
{
    uint64_t used, size;
    st_store_usage(arg, &used, &size);
    return (double)used;
}

/* The main tree as LMDB has it applied (not the free list, nor what waits to be applied):
 * 0 its entries, 1 its pages in bytes. Read on the loop at a scrape (a read transaction). */
static double st__tree(st_store_t *s, int what)
{
    MDB_stat st;
    bool renewed = !s->db.rtxn_held;
    if (renewed && mdb_txn_renew(s->db.rtxn) != 0) return 0;
    int rc = mdb_stat(s->db.rtxn, s->db.dbi, &st);
    if (renewed) mdb_txn_reset(s->db.rtxn);
    if (rc) return 0;
    if (!what) return (double)st.ms_entries;
    return (double)(st.ms_branch_pages + st.ms_leaf_pages + st.ms_overflow_pages) * st.ms_psize;
}

static double st__gauge_entries(void *arg)
{
    return st__tree(arg, 0);
}

static double st__gauge_tree(void *arg)
{
    return st__tree(arg, 1);
}

static double st__gauge_size(void *arg)
{
    uint64_t used, size;
    st_store_usage(arg, &used, &size);
    return (double)size;
}

static double st__gauge_backlog(void *arg)
{
    st_store_health_t h;
    st_store_health(arg, &h);
    return (double)h.backlog;
}

static double st__gauge_disk(void *arg)
{
    st_store_health_t h;
    st_store_health(arg, &h);
    return (double)h.disk_free;
}

static double st__gauge_flag(void *arg, unsigned flag)
{
    st_store_health_t h;
    st_store_health(arg, &h);
    return (h.flags & flag) ? 1 : 0;
}

static double st__gauge_log_failed(void *arg)
{
    return st__gauge_flag(arg, ST_STORE_LOG_FAILED);
}

static double st__gauge_stalled(void *arg)
{
    return st__gauge_flag(arg, ST_STORE_APPLY_STALLED);
}

static double st__gauge_writable(void *arg)
{
    return st_store_writable(arg) == ST_OK;
}

static void st__store_metrics(st_store_t *s)
{
    s->m.batch_ops = st_metrics_histogram("strata_commit_batch_ops",
                                          "LMDB puts/deletes per group commit (one WAL record)", "",
                                          st_metrics_size_bounds, st_metrics_size_nbounds);
    s->m.batch_writes = st_metrics_histogram(
        "strata_commit_batch_writes",
        "Staged writes per group commit, counting rewrites of a key coalesced into one op", "",
        st_metrics_size_bounds, st_metrics_size_nbounds);
    s->m.commit_s = st_metrics_histogram(
        "strata_commit_seconds", "Group commit latency: WAL write + fdatasync (the ack point)", "",
        st_metrics_latency_bounds, st_metrics_latency_nbounds);
    s->m.apply_s = st_metrics_histogram("strata_lmdb_apply_seconds",
                                        "LMDB transaction applying logged groups (behind the ack)",
                                        "", st_metrics_latency_bounds, st_metrics_latency_nbounds);
    s->m.commits = st_metrics_counter("strata_commits_total", "Group commits completed", "");
    s->m.failed = st_metrics_counter("strata_commit_failures_total",
                                     "Group commits that failed and were rolled back", "");
    s->m.apply_failed =
        st_metrics_counter("strata_lmdb_apply_failures_total",
                           "LMDB transactions applying logged groups that failed (retried)", "");
    s->m.wal_switches = st_metrics_counter("strata_wal_switches_total",
                                           "Times the redo log went on in its other half", "");
    s->m.ckpt_waits = st_metrics_counter(
        "strata_wal_checkpoint_waits_total",
        "Group commits that waited for LMDB to catch up before they could be logged", "");
    s->m.idle_applies = st_metrics_counter(
        "strata_lmdb_idle_applies_total",
        "LMDB transactions applied at SCHED_IDLE while a background job (an erasure) fed them", "");
    s->m.seal_defers = st_metrics_counter(
        "strata_store_seals_deferred_total",
        "Times the loop found the commit threads' lock busy and left its batch open for the next "
        "iteration instead of waiting",
        "");
    s->m.ckpt_wait_s = st_metrics_counter(
        "strata_wal_checkpoint_wait_seconds_total",
        "Time group commits waited for LMDB to catch up before they could be logged", "");
    st_metrics_gauge_fn("strata_hot_bytes",
                        "Bytes counted against the hot store quota: in LMDB, plus acknowledged "
                        "or staged and not applied yet",
                        "", st__gauge_used, s);
    st_metrics_gauge_fn("strata_hot_entries", "Keys in the hot store (LMDB, as applied)", "",
                        st__gauge_entries, s);
    st_metrics_gauge_fn("strata_hot_tree_bytes",
                        "Bytes of the hot store's B-tree pages as applied (without LMDB's free "
                        "list, which freed pages leave behind until they are reused)",
                        "", st__gauge_tree, s);
    st_metrics_gauge_fn("strata_hot_capacity_bytes",
                        "Hot store capacity: --map-size, or less when the disk has less room", "",
                        st__gauge_size, s);
    st_metrics_gauge_fn("strata_store_backlog_bytes",
                        "Estimated bytes acknowledged or staged and not yet applied to LMDB", "",
                        st__gauge_backlog, s);
    st_metrics_gauge_fn("strata_store_disk_free_bytes", "Free bytes on the data directory's disk",
                        "", st__gauge_disk, s);
    st_metrics_gauge_fn("strata_store_log_failed",
                        "1 after a redo log write or sync failed (writes refused until restart)",
                        "", st__gauge_log_failed, s);
    st_metrics_gauge_fn("strata_store_apply_stalled",
                        "1 while applying acknowledged writes to LMDB keeps failing", "",
                        st__gauge_stalled, s);
    st_metrics_gauge_fn("strata_store_writable", "1 when the store accepts writes", "",
                        st__gauge_writable, s);
}

/* LMDB's map is larger than the quota: writes are refused at the quota, and the headroom
 * absorbs what is admitted meanwhile (one request past the quota at most, estimated low) and
 * the estimate's error on what was acknowledged but not applied yet. */
static uint64_t st__map_size(const st_store_opts_t *o)
{
    uint64_t max_write = o->max_write ? o->max_write : 8ULL << 20;
    uint64_t headroom = o->map_size / 4;
    if (headroom < (32ULL << 20)) headroom = 32ULL << 20;
    if (headroom < 4 * max_write) headroom = 4 * max_write;
    return o->map_size + headroom;
}

static int st__lmdb_open(st_store_t *s, const st_store_opts_t *opts)
{
    int rc = mdb_env_create(&s->db.env);
    if (!rc) rc = mdb_env_set_mapsize(s->db.env, st__map_size(opts));
    if (!rc) rc = mdb_env_set_maxreaders(s->db.env, 64);
    if (!rc) rc = mdb_env_open(s->db.env, opts->dir, MDB_NOTLS | MDB_NOMETASYNC, 0644);
    MDB_txn *txn = NULL;
    if (!rc) rc = mdb_txn_begin(s->db.env, NULL, 0, &txn);
    if (!rc) rc = mdb_dbi_open(txn, NULL, 0, &s->db.dbi);
    if (!rc)
        rc = mdb_txn_commit(txn);
    else if (txn)
        mdb_txn_abort(txn);
    if (!rc) rc = mdb_txn_begin(s->db.env, NULL, MDB_RDONLY, &s->db.rtxn);
    if (rc) {
        st_error("store: cannot open LMDB in %s: %s", opts->dir, mdb_strerror(rc));
        if (s->db.env) mdb_env_close(s->db.env);
        return st__mdb_err(rc);
    }
    mdb_txn_reset(s->db.rtxn);
    MDB_stat st;
    mdb_env_stat(s->db.env, &st);
    s->db.psize = st.ms_psize;
    return ST_OK;
}

static void st__free_struct(st_store_t *s)
{
    st_map_free(&s->overlay);
    uv_mutex_destroy(&s->th.mu);
    uv_cond_destroy(&s->th.cv_sync);
    uv_cond_destroy(&s->th.cv_turn);
    uv_cond_destroy(&s->th.cv_apply);
    uv_cond_destroy(&s->th.cv_applied);
    uv_cond_destroy(&s->th.cv_hurry);
    free(s->dir);
    st__space_free(&s->space);
    st__tap_free(s->tap);
    st__group_free(s);
    st__claims_free(s);
    free(s);
}

/* A first start on a full disk cannot even create its files: say what it takes. */
static void st__say_need(const st_store_t *s, uint64_t wal_size)
{
    st_error("store: the disk of %s is full (%llu bytes free): strata needs at least %llu bytes "
             "to start there (its redo log is %llu bytes, preallocated, plus %llu for LMDB)",
             s->dir, (unsigned long long)st__disk_avail(s->dir),
             (unsigned long long)(wal_size + s->space.reserve), (unsigned long long)wal_size,
             (unsigned long long)s->space.reserve);
}

int st_store_open(st_store_t **out, uv_loop_t *loop, const st_store_opts_t *opts)
{
    if (mkdir(opts->dir, 0755) != 0 && errno != EEXIST) {
        st_error("store: cannot create %s: %s", opts->dir, strerror(errno));
        return ST_EIO;
    }
    st_store_t *s = st_calloc(1, sizeof *s);
    s->loop = loop;
    s->dir = st__dup(opts->dir);
    st__space_init(&s->space, opts);
    s->tap = st__tap_new();
    st_map_init(&s->overlay);
    st_list_init(&s->inflight);
    st_list_init(&s->listeners);
    uv_mutex_init(&s->th.mu);
    s->th.apply_lazy = true; /* st_store_apply_lazy */
    uv_cond_init(&s->th.cv_sync);
    uv_cond_init(&s->th.cv_turn);
    uv_cond_init(&s->th.cv_apply);
    uv_cond_init(&s->th.cv_applied);
    uv_cond_init(&s->th.cv_hurry);
    uint64_t wal_size = opts->wal_size ? opts->wal_size : ST__WAL_SIZE;
    int err = st__lmdb_open(s, opts);
    if (err == ST_EFULL) st__say_need(s, wal_size);
    if (err != ST_OK) {
        st__free_struct(s);
        return err;
    }
    err = st_wal_open(opts->dir, wal_size, &s->wal);
    if (err == ST_EFULL) st__say_need(s, wal_size);
    if (err == ST_OK) err = st__store_recover(s);
    /* recovery's state (an apply error: records wait for room in LMDB) is what st_store_idle
     * reads below, without mu: published before it, or the loop keeps waiting for LMDB */
    if (err == ST_OK) st__publish_threads(s);
    if (err != ST_OK)
        st_error("store: recovery from the redo log in %s failed: %s", opts->dir, st_strerror(err));
    if (err == ST_OK && (err = st_wake_init(loop, &s->uv.done, st__store_on_done, s)) != ST_OK)
        st_error("store: no eventfd for the loop's wake-ups: %s", strerror(errno));
    if (err != ST_OK) {
        st__drop_overlay(s);
        for (st_batch_t *b = s->th.a_head, *n; b; b = n) {
            n = b->next;
            st__batch_free(b);
        }
        st_wal_close(s->wal);
        mdb_txn_abort(s->db.rtxn);
        mdb_env_close(s->db.env);
        st__free_struct(s);
        return err;
    }
    s->open = st__batch_new(s);
    uv_check_init(loop, &s->uv.check);
    s->uv.check.data = s;
    uv_check_start(&s->uv.check, st__on_check);
    uv_unref((uv_handle_t *)&s->uv.check);
    if (st_store_idle(s)) uv_unref((uv_handle_t *)&s->uv.done.poll);
    uv_idle_init(loop, &s->uv.idle);
    s->uv.idle.data = s;
    uv_timer_init(loop, &s->uv.pace);
    s->uv.pace.data = s;
    st__store_metrics(s);
    /* the store's own records (commit.c, tap.c) */
    static const st_claim_t own[] = {ST_CLAIM("\0wal_applied"), ST_CLAIM("\0raft_applied"),
                                     ST_CLAIM("\0resv/")};
    ST_ASSERT(st_store_claims(s, "store", own, sizeof own / sizeof *own) == ST_OK);
    st__store_start_threads(s);
    *out = s;
    return ST_OK;
}

static void st__store_on_closed(uv_handle_t *h)
{
    st_store_t *s = h->data;
    if (++s->uv.closed == (s->group ? 5 : 4)) st__free_struct(s);
}

void st_store_close(st_store_t *s)
{
    st_store_close_clean(s);
}

bool st_store_close_clean(st_store_t *s)
{
    bool clean = st__store_stop_threads(s);
    st__drop_overlay(s);
    s->open->next = NULL;
    st_batch_t *back = s->back_head;
    if (back) s->back_tail->next = NULL;
    st_batch_t *lists[] = {s->free_list,           s->th.q_head, s->th.a_head,
                           st__store_take_done(s), back,         s->open};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
        for (st_batch_t *b = lists[i], *n; b; b = n) {
            n = b->next;
            st__batch_free(b);
        }
    st_buf_free(&s->scratch);
    st_wal_close(s->wal);
    mdb_txn_abort(s->db.rtxn);
    mdb_env_close(s->db.env);
    /* The struct is freed once the handles have closed (the loop must run once more). */
    st_wake_close(&s->uv.done, st__store_on_closed);
    uv_close((uv_handle_t *)&s->uv.check, st__store_on_closed);
    uv_close((uv_handle_t *)&s->uv.idle, st__store_on_closed);
    uv_close((uv_handle_t *)&s->uv.pace, st__store_on_closed);
    if (s->group) st__group_close(s, st__store_on_closed);
    return clean;
}

st_observers_t *st_store_observers(st_store_t *s)
{
    return &s->observers;
}

void st_store_listen(st_store_t *s, st_store_listener_t *l)
{
    st_list_push_front(&s->listeners, &l->link);
}

void st_store_unlisten(st_store_t *s, st_store_listener_t *l)
{
    if (st_list_linked(&l->link)) st_list_unlink(&l->link);
}

void st__listeners_durable(st_store_t *s, uint64_t id)
{
    for (ST_LIST_EACH(l, n, &s->listeners)) {
        st_store_listener_t *x = ST_LIST_ITEM(l, st_store_listener_t, link);
        if (x->on_durable) x->on_durable(x, id);
    }
}

void st__listeners_failed(st_store_t *s, uint64_t first_id, int err)
{
    for (ST_LIST_EACH(l, n, &s->listeners)) {
        st_store_listener_t *x = ST_LIST_ITEM(l, st_store_listener_t, link);
        if (x->on_failed) x->on_failed(x, first_id, err);
    }
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
    int rc = s->db.rtxn_held ? 0 : mdb_txn_renew(s->db.rtxn);
    if (rc) return st__mdb_err(rc);
    MDB_val k = {klen, (void *)key}, v;
    rc = mdb_get(s->db.rtxn, s->db.dbi, &k, &v);
    if (rc == 0) {
        st_buf_reset(&s->scratch);
        st_buf_append(&s->scratch, v.mv_data, v.mv_size);
        *val = s->scratch.data;
        *vlen = v.mv_size;
    }
    if (!s->db.rtxn_held) mdb_txn_reset(s->db.rtxn);
    if (rc == MDB_NOTFOUND) return ST_ENOTFOUND;
    return st__mdb_err(rc);
}

void st_store_read_hold(st_store_t *s)
{
    ST_ASSERT(!s->db.rtxn_held);
    if (mdb_txn_renew(s->db.rtxn) == 0) s->db.rtxn_held = true;
}

void st_store_read_release(st_store_t *s)
{
    if (s->db.rtxn_held) mdb_txn_reset(s->db.rtxn);
    s->db.rtxn_held = false;
}

/* Roughly what a put takes in LMDB: a leaf node plus its share of a half-full page, or its own
 * overflow pages for a big value. Deletes count nothing (they free space once applied). The
 * estimate stands in for the real figure only until the batch is applied and measured. */
uint64_t st__op_cost(const st_store_t *s, size_t klen, size_t vlen, bool del)
{
    if (del) return 0;
    uint64_t node = 8 + 2 + (uint64_t)klen;
    if (node + vlen > s->db.psize / 2 - 16)
        return (vlen + 16 + s->db.psize - 1) / s->db.psize * s->db.psize + 2 * (node + 8);
    return 2 * (node + vlen);
}

/* Appends one op to a batch (loop only, while the batch is open or before it is queued). */
void st__batch_add(st_store_t *s, st_batch_t *b, const void *key, size_t klen, const void *val,
                   size_t vlen, bool del)
{
    st_vec_reserve(&b->ops, b->ops.n + 1);
    st_op_t *op = &b->ops.v[b->ops.n++];
    op->koff = b->data.len;
    op->klen = klen;
    st_buf_append(&b->data, key, klen);
    op->voff = b->data.len;
    op->vlen = del ? 0 : vlen;
    op->del = del;
    op->note = false;
    op->resv = false;
    if (!del) st_buf_append(&b->data, val, vlen);
    b->bytes += st__op_cost(s, klen, vlen, del);
    b->writes++;
}

/* Makes the overlay entry of an op's key carry that op's value (creating the entry). */
void st__ov_set(st_store_t *s, st_batch_t *b, size_t op_idx)
{
    const st_op_t *op = &b->ops.v[op_idx];
    const char *key = b->data.data + op->koff;
    st_ov_t *e = (st_ov_t *)st_map_get(&s->overlay, key, op->klen);
    if (!e) e = st__ov_new(s, key, op->klen);
    e->batch = b->id;
    e->op_idx = op_idx;
    e->del = op->del;
    if (!op->del && op->vlen) {
        if (e->vcap < op->vlen) {
            e->val = st_realloc(e->val, op->vlen);
            e->vcap = op->vlen;
        }
        memcpy(e->val, b->data.data + op->voff, op->vlen);
    }
    e->vlen = op->vlen;
}

static int st__store_stage(st_store_t *s, const void *key, size_t klen, const void *val,
                           size_t vlen, bool del, uint64_t *wait)
{
    if (klen == 0 || klen > ST_KEY_MAX) return ST_EINVAL;
    if (s->group) {
        int rc = st__group_refuse(s);
        if (rc != ST_OK) return rc;
    }
    st_batch_t *b = s->open;
    st_ov_t *e = (st_ov_t *)st_map_get(&s->overlay, key, klen);
    if (e && e->batch == b->id && !e->del && !del && e->vlen == vlen) {
        /* Same key rewritten in this batch with a value of the same size (a hot counter):
         * overwrite in place instead of growing the batch. */
        if (vlen) {
            memcpy(b->data.data + b->ops.v[e->op_idx].voff, val, vlen);
            memcpy(e->val, val, vlen);
        }
        b->writes++;
        if (*wait < b->id) *wait = b->id;
        return ST_OK;
    }
    /* Staged work must not wait for unrelated I/O to wake the loop: the idle handle makes this
     * iteration's poll return at once so the check handle seals the batch. */
    if (b->ops.n == 0) uv_idle_start(&s->uv.idle, st__store_on_idle);
    st__batch_add(s, b, key, klen, val, vlen, del);
    st__ov_set(s, b, b->ops.n - 1);
    if (*wait < b->id) *wait = b->id;
    return ST_OK;
}

int st_store_put(st_store_t *s, const void *key, size_t klen, const void *val, size_t vlen,
                 uint64_t *wait)
{
    st__claims_check(s, key, klen);
    if (klen) s->writes_by_first[*(const uint8_t *)key]++;
    return st__store_stage(s, key, klen, val, vlen, false, wait);
}

int st_store_del(st_store_t *s, const void *key, size_t klen, uint64_t *wait)
{
    st__claims_check(s, key, klen);
    if (klen) s->writes_by_first[*(const uint8_t *)key]++;
    return st__store_stage(s, key, klen, NULL, 0, true, wait);
}

uint64_t st_store_writes_of(const st_store_t *s, uint8_t first)
{
    return s->writes_by_first[first] + s->foreign_back;
}

uint64_t st_store_writes(const st_store_t *s)
{
    uint64_t n = s->foreign_back;
    for (size_t i = 0; i < 256; i++)
        n += s->writes_by_first[i];
    return n;
}

uint64_t st_store_durable_id(const st_store_t *s)
{
    return s->durable_id;
}

bool st_store_express(st_store_t *s, uint64_t wait, st_store_express_t *x)
{
    /* a group's batches become durable through Raft; a failing store sends nothing */
    if (s->group || s->fail.first || s->fail.stopped || wait != s->open->id || !s->open->ops.n)
        return false;
    x->next = s->open->express;
    s->open->express = x;
    return true;
}

bool st_store_idle(const st_store_t *s)
{
    /* fail-stopped, nothing staged can become durable any more: nothing is worth waiting for
     * (and a module retrying a failed write would keep the store busy for ever) */
    if (s->fail.stopped) return true;
    if (s->open->ops.n) return false;
    if (s->submitted == 0) return true;
    if (s->durable_id + 1 < s->open->id) return false; /* something is not durable yet */
    /* All durable; LMDB is behind. Waiting for it is pointless while it cannot take them. */
    return __atomic_load_n(&s->th.pub.apply_err, __ATOMIC_RELAXED) != 0; /* without mu */
}

int st__key_cmp(const void *a, size_t an, const void *b, size_t bn)
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

static int st__store_count_key(void *arg, const void *key, size_t klen, const void *val,
                               size_t vlen)
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
    return st_store_scan(s, prefix, plen, st__store_count_key, n, wait);
}

int st_store_scan_from(st_store_t *s, const void *prefix, size_t plen, const void *from,
                       size_t flen, st_store_scan_fn fn, void *arg, uint64_t *wait)
{
    return st_store_range(s, prefix, plen, from, flen, NULL, 0, false, fn, arg, wait);
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

/* The smallest key after every key with this prefix, in succ (ST_KEY_MAX + 1 bytes); its
 * length, 0 if there is none (the prefix is empty or all 0xff). */
static size_t st__prefix_end(const void *prefix, size_t plen, uint8_t *succ)
{
    size_t n = plen;
    memcpy(succ, prefix, plen);
    while (n && succ[n - 1] == 0xff)
        n--;
    if (n) succ[n - 1]++;
    return n;
}

/* Puts the cursor on the last key below hi and below the end of the prefix (a hi past the
 * prefix's keys must not land the cursor on a key outside it). */
static int st__seek_last(MDB_cursor *cur, const void *prefix, size_t plen, const void *hi,
                         size_t hilen, MDB_val *k, MDB_val *v)
{
    uint8_t succ[ST_KEY_MAX + 1];
    size_t n = st__prefix_end(prefix, plen, succ);
    if (n && (!hi || st__key_cmp(hi, hilen, succ, n) > 0)) {
        hi = succ;
        hilen = n;
    }
    if (!hi) return mdb_cursor_get(cur, k, v, MDB_LAST);
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
    /* Staged entries in range, in the walk's order, merged with an LMDB cursor walk. They are
     * collected first (fn may stage writes), from the overlay's ordered index: the cost is the
     * entries in range, not everything staged. */
    ST_VEC(st_ov_t *) staged = {0};
    ST_ASSERT(!s->db.rtxn_held);
    st_ov_t *n;
    if (!reverse) {
        bool from_lo = lo && st__key_cmp(lo, lolen, prefix, plen) > 0;
        n = st__ov_ge(s, from_lo ? lo : prefix, from_lo ? lolen : plen);
    } else {
        uint8_t succ[ST_KEY_MAX + 1];
        size_t sl = st__prefix_end(prefix, plen, succ);
        bool to_hi = hi && (!sl || st__key_cmp(hi, hilen, succ, sl) < 0);
        n = to_hi ? st__ov_lt(s, hi, hilen) : st__ov_lt(s, sl ? succ : NULL, sl);
    }
    for (; n && st__in_range(n->key, n->node.klen, prefix, plen, lo, lolen, hi, hilen);
         n = reverse ? n->prev : n->fwd[0]) {
        if (!staged.cap) st_vec_reserve(&staged, 16);
        st_vec_push(&staged, n);
    }
    int rc = mdb_txn_renew(s->db.rtxn);
    if (rc) {
        st_vec_free(&staged);
        return st__mdb_err(rc);
    }
    MDB_cursor *cur;
    rc = mdb_cursor_open(s->db.rtxn, s->db.dbi, &cur);
    if (rc) {
        mdb_txn_reset(s->db.rtxn);
        st_vec_free(&staged);
        return st__mdb_err(rc);
    }
    MDB_val k, v;
    int mrc;
    if (reverse) {
        mrc = st__seek_last(cur, prefix, plen, hi, hilen, &k, &v);
    } else {
        bool from_lo = lo && lolen && st__key_cmp(lo, lolen, prefix, plen) > 0;
        k.mv_size = from_lo ? lolen : plen;
        k.mv_data = (void *)(from_lo ? lo : prefix);
        /* LMDB refuses an empty key: an empty prefix (and no lo) starts at the first key */
        mrc = mdb_cursor_get(cur, &k, &v, k.mv_size ? MDB_SET_RANGE : MDB_FIRST);
    }
    MDB_cursor_op step = reverse ? MDB_PREV : MDB_NEXT;
    size_t si = 0;
    int ret = 0;
    for (;;) {
        bool have_db =
            mrc == 0 && st__in_range(k.mv_data, k.mv_size, prefix, plen, lo, lolen, hi, hilen);
        bool have_ov = si < staged.n;
        if (!have_db && !have_ov) break;
        int c = !have_db ? 1
                : !have_ov
                    ? -1
                    : st__key_cmp(k.mv_data, k.mv_size, staged.v[si]->key, staged.v[si]->node.klen);
        if (reverse && have_db && have_ov) c = -c;
        if (c < 0) {
            ret = fn(arg, k.mv_data, k.mv_size, v.mv_data, v.mv_size);
            mrc = mdb_cursor_get(cur, &k, &v, step);
        } else {
            st_ov_t *e = staged.v[si++];
            if (*wait < e->batch) *wait = e->batch;
            if (!e->del) ret = fn(arg, e->key, e->node.klen, e->val, e->vlen);
            if (c == 0) mrc = mdb_cursor_get(cur, &k, &v, step);
        }
        if (ret) break;
    }
    mdb_cursor_close(cur);
    mdb_txn_reset(s->db.rtxn);
    st_vec_free(&staged);
    return ret;
}
