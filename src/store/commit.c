/* SPDX-License-Identifier: MIT */
/*
 * Group commit with a redo log.
 *
 * The loop seals its open batch at the end of every iteration and queues it. A sync lane
 * (sync.c) takes every queued batch at once and writes them as one synchronous WAL record: that
 * is the durability point; the lane writes the answers that wait for nothing else itself
 * (st_store_express) and the loop then releases the rest. The apply thread writes the same
 * groups into LMDB behind it, many per transaction, with MDB_NOMETASYNC (one data sync per
 * transaction, integrity kept; the WAL covers whatever a power loss would roll back). The log
 * has two halves: when one is full the sync thread goes on in the other, and the apply thread
 * syncs LMDB fully once it holds everything the full half held (checkpoint), in the background.
 * The sync thread waits for that only if the other half fills first.
 *
 * Why: at a fixed number of clients, durable throughput is bounded by the acknowledgement
 * latency, and an LMDB commit needs two ordered flushes where one in-place log write needs one.
 * Values stay in the loop's overlay until LMDB has them, so reads never miss acknowledged data.
 *
 * Failures. A redo-log write or fdatasync that fails leaves the log's contents unknown (a failed
 * fdatasync may drop dirty pages that a later one will not report), so the store fail-stops: it
 * never appends again, every later group fails, reads go on, a restart replays what the log
 * holds. An LMDB apply that fails (a full disk, MAP_FULL, EIO) is retried with backoff and shows
 * in the health check; a checkpoint never waits for an apply that keeps failing, so nothing
 * hangs: the group that needed the room is refused instead. Replay at start-up that runs out of
 * space keeps the rest of the log in the overlay and the apply queue, so the server starts and
 * serves reads, and applies it once there is room.
 */
#include "internal.h"
#include "strata/looplag.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

const char st__applied_key[] = "\0wal_applied";
const char st__group_applied_key[] = "\0raft_applied";
_Static_assert(sizeof st__applied_key - 1 == ST__APPLIED_KLEN, "applied key length");
_Static_assert(sizeof st__group_applied_key - 1 == ST__GROUP_APPLIED_KLEN, "group key length");
#define ST__BACK_SLICE_NS     1000000ULL /* loop time per slice of applied batches taken back */
#define ST__BACK_SLICE_MIN_NS 200000ULL  /* ... when the turn's budget is spent already */
/* 25 ms: ~13 % less CPU per chat post than 5 ms (fewer LMDB data syncs beside the log's), the
 * flush row's loop stall the same within noise since the overlay's finger (RESULTS, issue 22);
 * a follower's LMDB work per write a third less (issue 24). 5 ms while someone waits for the
 * applies (st_store_apply_lazy off). */
#define ST__APPLY_PAUSE_MS       25
#define ST__APPLY_PAUSE_EAGER_MS 5

int st__mdb_err(int rc)
{
    if (rc == 0) return ST_OK;
    if (rc == MDB_MAP_FULL || rc == ENOSPC || rc == EDQUOT) return ST_EFULL;
    if (rc == ENOMEM) return ST_ENOMEM;
    return ST_EIO;
}

/* ---- encoding a group for the log: {u8 del, u32 klen, u32 vlen, key, val}* ---- */

void st__rec_encode(st_buf_t *out, const st_batch_t *b, bool chain)
{
    st_buf_reset(out);
    for (; b; b = chain ? b->next : NULL)
        for (size_t i = 0; i < b->ops.n; i++)
            if (!b->ops.v[i].note) st__rec_put_op(out, b, &b->ops.v[i]); /* notes: never in LMDB */
}

void st__rec_put_op(st_buf_t *out, const st_batch_t *b, const st_op_t *op)
{
    uint8_t del = op->del;
    uint32_t kl = (uint32_t)op->klen, vl = (uint32_t)op->vlen;
    st_buf_append(out, &del, 1);
    st_buf_append(out, &kl, 4);
    st_buf_append(out, &vl, 4);
    st_buf_append(out, b->data.data + op->koff, op->klen);
    st_buf_append(out, b->data.data + op->voff, op->vlen);
}

static int st__put_applied(st_store_t *s, MDB_txn *txn, uint64_t seq)
{
    MDB_val k = {ST__APPLIED_KLEN, (void *)st__applied_key}, v = {8, &seq};
    if (s->group) k = (MDB_val){ST__GROUP_APPLIED_KLEN, (void *)st__group_applied_key};
    return mdb_put(txn, s->db.dbi, &k, &v, 0);
}

static int st__apply_op(st_store_t *s, MDB_txn *txn, bool del, const void *key, size_t klen,
                        const void *val, size_t vlen)
{
    MDB_val k = {klen, (void *)key};
    if (del) {
        int rc = mdb_del(txn, s->db.dbi, &k, NULL);
        return rc == MDB_NOTFOUND ? 0 : rc;
    }
    MDB_val v = {vlen, (void *)val};
    return mdb_put(txn, s->db.dbi, &k, &v, 0);
}

/* Bytes in use (the high-water mark less the pages on LMDB's free list) and the free list's
 * bytes, which later transactions reuse without growing the file. */
void st__measure(st_store_t *s, uint64_t *used, uint64_t *free_bytes)
{
    MDB_envinfo info;
    mdb_env_info(s->db.env, &info);
    uint64_t pages = info.me_last_pgno + 1, free_pages = 0;
    MDB_txn *txn;
    if (mdb_txn_begin(s->db.env, NULL, MDB_RDONLY, &txn) == 0) {
        MDB_cursor *c;
        if (mdb_cursor_open(txn, 0 /* the free list */, &c) == 0) {
            MDB_val k, v;
            while (mdb_cursor_get(c, &k, &v, MDB_NEXT) == 0)
                if (v.mv_size >= sizeof(size_t)) free_pages += *(const size_t *)v.mv_data;
            mdb_cursor_close(c);
        }
        mdb_txn_abort(txn);
    }
    if (free_pages > pages) free_pages = pages;
    *used = (pages - free_pages) * s->db.psize;
    *free_bytes = free_pages * s->db.psize;
}

uint64_t st__group_bytes(const st_batch_t *group)
{
    uint64_t n = 0;
    for (const st_batch_t *b = group; b; b = b->next)
        n += b->bytes;
    return n;
}

/* Why LMDB refused a transaction: a full map or disk is ST_EFULL (it heals once there is room),
 * anything else ST_EIO. LMDB reports a write cut short by a full disk as EIO, so the disk is
 * asked. */
int st__apply_class(st_store_t *s, int rc, uint64_t bytes)
{
    if (rc == MDB_MAP_FULL || rc == ENOSPC || rc == EDQUOT) return ST_EFULL;
    if (rc == EIO && st__disk_avail(s->dir) < bytes + s->space.reserve) return ST_EFULL;
    return ST_EIO;
}

/* With mu held: the log may hold anything from here on, so nothing is appended to it again in
 * this process. */
void st__fail_stop(st_store_t *s, const char *what)
{
    if (s->th.log_err) return;
    s->th.log_err = ST_EIO;
    snprintf(s->th.log_why, sizeof s->th.log_why, "%s", what);
    st__publish_threads(s);
    st_error("store: %s: refusing every write until strata is restarted (reads go on; the "
             "restart replays the redo log)",
             what);
}

/* ---- the apply thread ---- */

int st__apply_group(st_store_t *s, st_batch_t *group, uint64_t seq)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin(s->db.env, NULL, 0, &txn);
    if (rc) return rc;
    for (st_batch_t *b = group; b && !rc; b = b->next)
        for (size_t i = 0; i < b->ops.n && !rc; i++) {
            st_op_t *op = &b->ops.v[i];
            if (op->note) continue;
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

void st__chain(st_batch_t **head, st_batch_t **tail, st_batch_t *first, st_batch_t *last)
{
    if (*tail)
        (*tail)->next = first;
    else
        *head = first;
    *tail = last;
}

/* With mu held: a failed apply is put back to be retried, and made visible (health, metric). */
static void st__apply_failed(st_store_t *s, st_batch_t *group, st_batch_t *last, int rc, int err,
                             uint64_t *logged_ns)
{
    uint64_t now = st_mono_ns();
    last->next = s->th.a_head;
    s->th.a_head = group;
    if (!s->th.a_tail) s->th.a_tail = last;
    s->th.fig.apply_failures++;
    bool first = !s->th.apply_err;
    if (first) {
        s->th.apply_stall_ns = now;
        *logged_ns = 0;
    }
    if (now - *logged_ns >= 30000000000ULL) {
        st_error("store: applying WAL seq %llu to LMDB failed: %s (%llu bytes free on the data "
                 "disk); retrying, writes are refused meanwhile",
                 (unsigned long long)last->seq, mdb_strerror(rc),
                 (unsigned long long)st__disk_avail(s->dir));
        *logged_ns = now;
    }
    s->th.apply_err = err;
    st__publish_threads(s);
    /* the loop stops waiting for LMDB (st_store_idle reads the published error without mu:
     * woken before it is published, the loop could read 0 and never be woken again) */
    if (first) st_wake_send(&s->uv.done);
    uv_cond_broadcast(&s->th.cv_applied); /* a checkpoint waiting for us gives up */
}

/* With mu held: LMDB holds everything the older half of the log held, and has not been fully
 * synced since. */
static bool st__ckpt_due(const st_store_t *s)
{
    return !s->th.ckpt_done && s->th.applied_seq >= s->th.ckpt_seq && !s->th.log_err &&
           !s->th.lmdb_sync_failed;
}

/* With mu held (dropped while syncing): the checkpoint of the older half. Once LMDB is synced
 * the half may be written over. A failed sync fail-stops: the half must then be kept. */
static void st__ckpt_sync(st_store_t *s)
{
    /* What this sync covers: the halves may have switched meanwhile (a checkpoint of the sync
     * thread's own, for a group too big for a half, sets ckpt_done and lets it switch), and then
     * ckpt_seq is past what this sync made durable. */
    uint64_t covered = s->th.applied_seq;
    uv_mutex_unlock(&s->th.mu);
    bool ok = mdb_env_sync(s->db.env, 1) == 0;
    uv_mutex_lock(&s->th.mu);
    if (ok) {
        if (covered >= s->th.ckpt_seq) s->th.ckpt_done = true;
    } else {
        s->th.lmdb_sync_failed = true;
        st__fail_stop(s, "syncing LMDB for a redo log checkpoint failed");
    }
    uv_cond_broadcast(&s->th.cv_applied);
}

static void st__apply_thread(void *arg)
{
    st_store_t *s = arg;
    prctl(PR_SET_NAME, "strata-apply"); /* for top, perf and bench/lib.sh's cost figures */
    st_sched_worker();                  /* before st_idle_init: its own policy is SCHED_BATCH */
    st_idle_init(&s->th.idle, "the store's apply thread"); /* before mu: nothing reads it yet */
    unsigned backoff_ms = 0;
    uint64_t logged_ns = 0;
    uv_mutex_lock(&s->th.mu);
    for (;;) {
        while (!s->th.a_head && !s->th.stop_apply && !st__ckpt_due(s))
            uv_cond_wait(&s->th.cv_apply, &s->th.mu);
        if (st__ckpt_due(s)) {
            st__ckpt_sync(s);
            continue;
        }
        if (!s->th.a_head) break;
        st_batch_t *group = s->th.a_head, *last = s->th.a_tail;
        s->th.a_head = s->th.a_tail = NULL;
        bool idle = st__apply_yield(s); /* a background job's deletes: SCHED_IDLE (yield.c) */
        uv_mutex_unlock(&s->th.mu);
        if (idle) st__apply_go_idle(s);
        uint64_t t0 = st_mono_ns();
        int rc = st__apply_group(s, group, last->seq);
        if (idle) st__apply_unyield(s);
        uint64_t ns = st_mono_ns() - t0, used = 0, lfree = 0;
        int err = rc ? st__apply_class(s, rc, st__group_bytes(group)) : 0;
        if (!rc) st__measure(s, &used, &lfree);
        if (!rc && s->group) st__tap_entries(s, group); /* the Raft log is the redo log there */
        uv_mutex_lock(&s->th.mu);
        s->th.apply_idle = false;
        if (rc) {
            /* Acknowledged data cannot be dropped: it is in the WAL and the overlay. */
            st__apply_failed(s, group, last, rc, err, &logged_ns);
            if (s->th.stop_apply) {
                st_error("store: stopping with logged writes not yet in LMDB; the next start "
                         "replays them from the redo log");
                break;
            }
            backoff_ms = backoff_ms ? (backoff_ms * 2 > 1000 ? 1000 : backoff_ms * 2) : 10;
            uint64_t until = st_mono_ns() + (uint64_t)backoff_ms * 1000000, now;
            while (!s->th.stop_apply && (now = st_mono_ns()) < until)
                uv_cond_timedwait(&s->th.cv_apply, &s->th.mu, until - now);
            continue;
        }
        if (s->th.apply_err)
            st_info("store: applying to LMDB works again after %.1f s",
                    (double)(st_mono_ns() - s->th.apply_stall_ns) / 1e9);
        s->th.apply_err = 0;
        backoff_ms = 0;
        s->th.applied_seq = last->seq;
        s->th.used_bytes = used;
        s->th.lmdb_free = lfree;
        st__pending_sub(s, st__group_bytes(group));
        st__publish_threads(s);
        s->th.fig.apply_ns_sum += ns;
        s->th.fig.apply_count++;
        uv_cond_broadcast(&s->th.cv_applied);
        st__to_loop(s, group, last);
        if (st__ckpt_due(s)) st__ckpt_sync(s);
        /* Each LMDB transaction costs a device flush that the WAL's acknowledgements would
         * otherwise get: let groups pile up for a while, unless (or until) a checkpoint, a
         * snapshot or a stop waits for LMDB to catch up. The length is read on every turn:
         * st_store_apply_lazy ends a long pause under way. */
        uint64_t start = st_mono_ns(), now, until;
        while (!s->th.stop && !s->th.stop_apply && !s->th.hurry &&
               (now = st_mono_ns()) <
                   (until =
                        start + (s->th.apply_lazy ? ST__APPLY_PAUSE_MS : ST__APPLY_PAUSE_EAGER_MS) *
                                    1000000ULL))
            uv_cond_timedwait(&s->th.cv_hurry, &s->th.mu, until - now);
    }
    uv_mutex_unlock(&s->th.mu);
}

/* ---- recovery ---- */

typedef struct {
    st_store_t *s;
    uint64_t applied, replayed, last_seq;
    uint64_t deferred, deferred_bytes;
    int err, mdb_rc; /* why records were deferred */
} st_replay_t;

/* A log record back into a batch: {u8 del, u32 klen, u32 vlen, key, val}*. */
static int st__commit_decode(st_store_t *s, st_batch_t *b, const char *p, size_t len)
{
    const char *end = p + len;
    st_recop_t op;
    int rc;
    while ((rc = st__rec_next(&p, end, &op)) == 1)
        st__batch_add(s, b, op.key, op.klen, op.val, op.vlen, op.kind != 0);
    return rc;
}

/* Keeps a record LMDB cannot take now as an acknowledged batch waiting in the apply queue, its
 * values visible through the overlay, exactly as if it had just been logged. */
static void st__defer(st_replay_t *r, st_batch_t *b, uint64_t seq)
{
    st_store_t *s = r->s;
    b->seq = seq;
    for (size_t i = 0; i < b->ops.n; i++)
        st__ov_set(s, b, i);
    st__chain(&s->th.a_head, &s->th.a_tail, b, b);
    st_list_insert(&s->inflight, &b->link);
    s->submitted++;
    st__pending_add(s, b->bytes);
    r->deferred++;
    r->deferred_bytes += b->bytes;
}

static int st__replay_record(void *arg, uint64_t seq, const char *p, size_t len)
{
    st_replay_t *r = arg;
    st_store_t *s = r->s;
    if (seq <= r->applied) return 0;
    r->last_seq = seq;
    st_batch_t *b = st__batch_new(s);
    if (st__commit_decode(s, b, p, len) != ST_OK) {
        st_error("store: WAL seq %llu is damaged", (unsigned long long)seq);
        st__batch_recycle(s, b);
        return ST_EIO;
    }
    if (!r->deferred) {
        int rc = st__apply_group(s, b, seq);
        if (!rc) {
            st__batch_recycle(s, b);
            r->applied = seq;
            r->replayed++;
            return 0;
        }
        r->err = st__apply_class(s, rc, b->bytes);
        r->mdb_rc = rc;
        st_error("store: replaying WAL seq %llu failed: %s", (unsigned long long)seq,
                 mdb_strerror(rc));
        if (r->err != ST_EFULL) {
            st__batch_recycle(s, b);
            return r->err;
        }
    }
    /* out of space: this record and every later one wait for room (in order) */
    st__defer(r, b, seq);
    return 0;
}

int st__store_recover(st_store_t *s)
{
    st_replay_t r = {.s = s};
    MDB_txn *txn;
    if (mdb_txn_begin(s->db.env, NULL, MDB_RDONLY, &txn) == 0) {
        MDB_val k = {ST__APPLIED_KLEN, (void *)st__applied_key}, v;
        if (mdb_get(txn, s->db.dbi, &k, &v) == 0 && v.mv_size == 8)
            memcpy(&r.applied, v.mv_data, 8);
        mdb_txn_abort(txn);
    }
    int rc = st_wal_replay(s->wal, st__replay_record, &r);
    if (rc) return rc;
    if (r.replayed)
        st_info("store: replayed %llu WAL record(s) into LMDB", (unsigned long long)r.replayed);
    s->th.acked_id = s->durable_id = s->open_id;
    st__measure(s, &s->th.used_bytes, &s->th.lmdb_free);
    s->th.ckpt_done = true;
    if (r.deferred) {
        /* what the older half holds beyond LMDB must be applied and synced before it is reused
         * (what LMDB held at start is on its disk already) */
        s->th.ckpt_seq = st_wal_older_last(s->wal);
        s->th.ckpt_done = s->th.ckpt_seq <= r.applied;
        /* The log holds the only durable copy of these: it is not reset, and appends go on
         * after its last record. */
        s->th.applied_seq = r.applied;
        s->th.logged_seq = r.last_seq;
        s->th.apply_err = r.err;
        s->th.apply_stall_ns = st_mono_ns();
        /* no reset: nothing after the last record may pass for a later one */
        if (st_wal_clear_tail(s->wal) != ST_OK) return ST_EIO;
        st_warn("store: %llu WAL record(s) wait for room in LMDB (%s; about %llu bytes to "
                "apply, %llu bytes free on %s): serving reads, refusing writes until they are "
                "applied",
                (unsigned long long)r.deferred, mdb_strerror(r.mdb_rc),
                (unsigned long long)r.deferred_bytes, (unsigned long long)st__disk_avail(s->dir),
                s->dir);
        return ST_OK;
    }
    /* LMDB now holds everything: make it durable and start a fresh log generation. */
    if (mdb_env_sync(s->db.env, 1) != 0) return ST_EIO;
    rc = st_wal_reset(s->wal);
    s->th.logged_seq = s->th.applied_seq = r.applied;
    return rc;
}

/* ---- the loop side ---- */

st_batch_t *st__batch_new(st_store_t *s)
{
    st_batch_t *b = s->free_list;
    if (b) {
        s->free_list = b->next;
        s->free_n--;
    } else
        b = st_calloc(1, sizeof *b);
    b->next = NULL;
    st_buf_reset(&b->data);
    b->ops.n = b->writes = 0;
    st_vec_reserve(&b->ops, 256); /* a batch's first ops: no regrowth for small ones */
    b->bytes = 0;
    b->rc = 0;
    b->seq = 0;
    b->foreign = false;
    b->barrier = false;
    b->ack_late = false;
    b->tap_failed = false;
    b->express = NULL;
    b->id = ++s->open_id;
    return b;
}

/* Batches kept for reuse, and the largest buffer one keeps. What a backlog took (every batch
 * between its seal and its return from LMDB is live: seconds of writes when LMDB falls behind)
 * goes back to the allocator once it has drained, instead of staying in the free list at the
 * backlog's peak, each buffer at the largest batch it ever held (issue 48: a post's ≈ 200 bytes
 * stayed allocated after it was applied). A loop iteration's batch is rarely past 512 KiB: at most
 * 16 MiB kept. */
#define ST__FREE_MAX     32
#define ST__FREE_BUF_MAX (512u << 10)

void st__batch_recycle(st_store_t *s, st_batch_t *b)
{
    if (s->free_n >= ST__FREE_MAX) {
        st__batch_free(b);
        return;
    }
    if (b->data.cap > ST__FREE_BUF_MAX || b->ops.cap * sizeof *b->ops.v > ST__FREE_BUF_MAX) {
        /* do not keep outsized buffers around */
        st_buf_free(&b->data);
        st_vec_free(&b->ops);
    }
    b->next = s->free_list;
    s->free_list = b;
    s->free_n++;
}

void st__batch_free(st_batch_t *b)
{
    st_buf_free(&b->data);
    st_vec_free(&b->ops);
    free(b);
}

/* How many iterations in a row a seal may be put off while mu is busy: then it waits for it. */
#define ST__SUBMIT_DEFERS_MAX 64

/* Seals the open batch and queues it. Only ever called between callbacks, so one request's
 * writes never straddle two batches. mu is only tried: held by a thread the scheduler took the
 * core from, it would stall the loop for a time slice (milliseconds on 2 cores); the batch stays
 * open instead (taking more writes) and the next iteration seals it. */
bool st__store_submit(st_store_t *s)
{
    ST_ASSERT(s->open->ops.n > 0);
    if (s->submit_defers < ST__SUBMIT_DEFERS_MAX && uv_mutex_trylock(&s->th.mu) != 0) {
        s->submit_defers++;
        st_metric_add(s->m.seal_defers, 1);
        uv_idle_start(&s->uv.idle, st__store_on_idle); /* the next iteration comes at once */
        return false;
    }
    if (s->submit_defers >= ST__SUBMIT_DEFERS_MAX) uv_mutex_lock(&s->th.mu);
    s->submit_defers = 0;
    st_batch_t *b = s->open;
    b->next = NULL;
    st__chain(&s->th.q_head, &s->th.q_tail, b, b);
    st__pending_add(s, b->bytes);
    /* only a lane that waits is signalled: glibc's signal can itself wait (for the waiters of
     * an earlier signal to leave its group), 885 times in one flush (bench/RESULTS.md) */
    if (s->th.sync_waiting) uv_cond_signal(&s->th.cv_sync);
    uv_mutex_unlock(&s->th.mu);
    st_list_insert(&s->inflight, &b->link);
    s->submitted++;
    s->open = st__batch_new(s);
    /* Pending durable work keeps the loop alive; idle, the store does not. */
    uv_ref((uv_handle_t *)&s->uv.done.poll);
    uv_idle_stop(&s->uv.idle);
    return true;
}

/* After a failed group, the overlay goes back to what the acknowledged batches say: an entry
 * last written by a batch >= first takes the value of the newest acknowledged batch still on
 * its way to LMDB that wrote the key, or goes (LMDB has the newest acknowledged value). */
static void st__restore_overlay(st_store_t *s, uint64_t first)
{
    size_t it, n = 0;
    for (st_map_node_t *m = s->overlay.count ? st_map_first(&s->overlay, &it) : NULL; m;
         m = st_map_next(&s->overlay, &it, m)) {
        st_ov_t *e = (st_ov_t *)m;
        if (e->batch >= first) {
            e->restoring = true;
            n++;
        }
    }
    if (!n) return;
    for (st_list_t *l = s->inflight.next; l != &s->inflight; l = l->next) {
        st_batch_t *b = ST_LIST_ITEM(l, st_batch_t, link);
        ST_ASSERT(b->id < first);
        for (size_t i = 0; i < b->ops.n; i++) {
            const st_op_t *op = &b->ops.v[i];
            st_ov_t *e = (st_ov_t *)st_map_get(&s->overlay, b->data.data + op->koff, op->klen);
            if (e && e->restoring) {
                st__ov_set(s, b, i);
                e->restored = true;
            }
        }
    }
    st_ov_t **gone = st_calloc(n, sizeof *gone);
    size_t ngone = 0;
    for (st_map_node_t *m = st_map_first(&s->overlay, &it); m;
         m = st_map_next(&s->overlay, &it, m)) {
        st_ov_t *e = (st_ov_t *)m;
        if (e->restoring && !e->restored) gone[ngone++] = e;
        e->restoring = e->restored = false;
    }
    for (size_t i = 0; i < ngone; i++)
        st__ov_drop(s, gone[i]);
    free(gone);
}

/* After a failed group: every batch from it on (failed, queued behind it, open) is dropped,
 * without waiting for LMDB to catch up with the acknowledged ones. */
void st__rollback(st_store_t *s)
{
    uint64_t first = s->fail.first;
    int err = s->fail.err;
    s->fail.first = 0;
    st__batch_recycle(s, s->open);
    s->open = st__batch_new(s);
    uv_idle_stop(&s->uv.idle);
    st__restore_overlay(s, first);
    uv_mutex_lock(&s->th.mu);
    s->th.halted = false;
    st__publish_threads(s);
    uv_cond_signal(&s->th.cv_sync);
    uv_mutex_unlock(&s->th.mu);
    st__listeners_failed(s, first, err);
}

/* Figures the threads gathered, into the metrics (loop only). Called with mu held. */
static void st__take_figures(st_store_t *s)
{
    const st__figures_t *f = &s->th.fig;
    uint64_t syncs = f->sync_count, applies = f->apply_count;
    if (syncs) {
        st_metric_observe(s->m.commit_s, (double)f->sync_ns_sum / 1e9 / (double)syncs);
        st_metric_observe(s->m.batch_ops, (double)f->group_ops / (double)syncs);
        st_metric_observe(s->m.batch_writes, (double)f->group_writes / (double)syncs);
        st_metric_add(s->m.commits, (double)syncs);
    }
    if (applies) st_metric_observe(s->m.apply_s, (double)f->apply_ns_sum / 1e9 / (double)applies);
    if (f->apply_failures) st_metric_add(s->m.apply_failed, (double)f->apply_failures);
    if (f->wal_switches) st_metric_add(s->m.wal_switches, (double)f->wal_switches);
    if (f->idle_applies) st_metric_add(s->m.idle_applies, (double)f->idle_applies);
    if (f->ckpt_waits) {
        st_metric_add(s->m.ckpt_waits, (double)f->ckpt_waits);
        st_metric_add(s->m.ckpt_wait_s, (double)f->ckpt_wait_ns / 1e9);
    }
    memset(&s->th.fig, 0, sizeof s->th.fig);
}

/* A batch is back from the threads: applied (its overlay entries go) or failed. */
void st__batch_back(st_store_t *s, st_batch_t *b)
{
    st_list_unlink(&b->link);
    s->submitted--;
    if (b->rc == 0) {
        /* its keys are in LMDB now: whoever watches st_store_writes_of looks again */
        if (b->foreign) s->foreign_back++;
        /* a foreign batch (group mode) was never in the overlay: nothing to look up */
        for (size_t i = 0; !b->foreign && i < b->ops.n; i++) {
            st_op_t *op = &b->ops.v[i];
            st_ov_t *e = (st_ov_t *)st_map_get(&s->overlay, b->data.data + op->koff, op->klen);
            if (e && e->batch == b->id) st__ov_drop(s, e);
        }
    } else if (!s->fail.first) {
        s->fail.first = b->id;
        s->fail.err = b->rc;
        st_metric_add(s->m.failed, 1);
        /* fail-stopped, every batch fails: one line a minute says how many did */
        uint64_t now = uv_now(s->loop);
        if (!s->fail.stopped || now >= s->fail.logged_ms + 60000) {
            /* in a group a lost term (or a write before the first leader) is routine: the
             * answers say so (503 no_leader); a failed disk is not */
            st_log(b->rc == ST_ENOLEADER ? ST_LOG_WARN : ST_LOG_ERROR,
                   "store: logging batch %llu failed: %s; rolling back what was not "
                   "acknowledged%s",
                   (unsigned long long)b->id, st_strerror(b->rc),
                   s->fail.unlogged ? " (more failed meanwhile, counted in /metrics)" : "");
            s->fail.logged_ms = now;
            s->fail.unlogged = 0;
        } else {
            s->fail.unlogged++;
        }
    }
    st__batch_recycle(s, b);
}

void st__store_on_done(st_wake_t *w)
{
    st_store_t *s = w->data;
    /* Without mu (st__to_loop, st__publish_threads): the batches back, the acknowledged id, whether
     * the log failed. The put-back ones of the last turn go first. */
    st_batch_t *list = s->back_head, *got = st__store_take_done(s);
    if (list)
        s->back_tail->next = got;
    else
        list = got;
    s->back_head = s->back_tail = NULL;
    uint64_t acked = __atomic_load_n(&s->th.pub.acked_id, __ATOMIC_ACQUIRE);
    bool failed = __atomic_load_n(&s->th.pub.halted, __ATOMIC_ACQUIRE);
    for (st_batch_t *b = got; b && !failed; b = b->next)
        failed = b->rc != 0;
    st_batch_t *queued = NULL;
    bool halted = false;
    /* A failure (rare) is read under mu: a lane sets halted and hands the failed groups over
     * in one hold of it, so what was taken above and halted agree once mu is ours. */
    if (failed)
        uv_mutex_lock(&s->th.mu);
    else if (uv_mutex_trylock(&s->th.mu) != 0) {
        s->figures_owed = true; /* taken when mu is free, or once the store is idle (below) */
        goto figures_later;
    }
    if ((halted = s->th.halted)) {
        /* the stack was taken before mu: a lane may have set halted and pushed the failed
         * groups since (one hold of mu, so they are on the stack now): taken too, so the
         * rollback below starts from the first failed batch, never from a queued one */
        st_batch_t *more = st__store_take_done(s);
        if (more) {
            st_batch_t *t = list;
            while (t && t->next)
                t = t->next;
            if (t)
                t->next = more;
            else
                list = more;
        }
        /* take back what will never reach the log: it fails with the failed group */
        queued = s->th.q_head;
        s->th.q_head = s->th.q_tail = NULL;
        st__pending_sub(s, st__group_bytes(queued));
    }
    st__take_figures(s);
    s->figures_owed = false;
    uv_mutex_unlock(&s->th.mu);
figures_later:
    s->fail.stopped = __atomic_load_n(&s->th.pub.log_err, __ATOMIC_RELAXED) != 0;
    /* Taking applied batches back drops their overlay entries: 25 ms of groups can be a lot of
     * them, so it goes in slices of ST__BACK_SLICE_NS and the rest waits for the next loop
     * iteration (put back at the head, the async re-sent). A failure is taken back whole, in
     * order, with everything before it. The slice is what the turn has left of its shared budget
     * (an erasure's slices or a compaction's fold may have spent it), one batch at least; after
     * two turns in a row that left batches behind, the whole ST__BACK_SLICE_NS again, so under
     * sustained writes the taking back keeps up (its overlay entries would pile up otherwise,
     * every lookup slower, every turn longer). */
    bool whole = halted || queued;
    for (st_batch_t *b = list; b && !whole; b = b->next)
        whole = b->rc != 0;
    uint64_t slice = s->back_behind >= 2
                         ? ST__BACK_SLICE_NS
                         : st_looplag_turn_left(ST__BACK_SLICE_MIN_NS, ST__BACK_SLICE_NS);
    uint64_t until = uv_hrtime() + slice;
    st_batch_t *b = list;
    while (b) {
        st_batch_t *next = b->next;
        if (s->group && b->rc == 0) st__group_back(s, b);
        st__batch_back(s, b);
        b = next;
        if (b && !whole && uv_hrtime() >= until) break;
    }
    s->back_behind = b ? s->back_behind + 1 : 0;
    if (b) {
        st_batch_t *last = b;
        while (last->next)
            last = last->next;
        s->back_head = b;
        s->back_tail = last;
        st_wake_send(&s->uv.done);
    }
    for (st_batch_t *q = queued, *next; q; q = next) {
        next = q->next;
        q->rc = ST_EIO;
        st__batch_back(s, q);
    }
    if (acked > s->durable_id) {
        s->durable_id = acked;
        st__listeners_durable(s, s->durable_id);
    }
    /* Halted, the sync thread takes nothing more: every batch not acknowledged is back. */
    if (s->fail.first) st__rollback(s);
    if (st_store_idle(s)) {
        if (s->figures_owed) { /* nothing waits on the loop now: the metrics catch up */
            uv_mutex_lock(&s->th.mu);
            st__take_figures(s);
            s->figures_owed = false;
            uv_mutex_unlock(&s->th.mu);
        }
        uv_unref((uv_handle_t *)&s->uv.done.poll);
    }
}

void st__store_start_threads(st_store_t *s)
{
    st__publish_threads(s); /* recovery's figures, before any thread runs */
    st__sync_start(s);
    if (uv_thread_create(&s->th.apply_thread, st__apply_thread, s) != 0)
        st_fatal("store: cannot start the commit threads");
}

bool st__store_stop_threads(st_store_t *s)
{
    /* The sync lanes finish what is queued; the apply thread what is logged, the Raft entries
     * the loop applied last included. */
    if (s->group) st__group_handoff(s, true);
    uv_mutex_lock(&s->th.mu);
    s->th.stop = true;
    s->th.background = false;
    st__apply_lift(s); /* a group at SCHED_IDLE finishes at its own policy: the join waits */
    uv_cond_broadcast(&s->th.cv_sync);
    uv_cond_broadcast(&s->th.cv_hurry);
    uv_mutex_unlock(&s->th.mu);
    st__sync_join(s);
    uv_mutex_lock(&s->th.mu);
    s->th.stop_apply = true; /* only now: the sync thread may have logged a last group */
    uv_cond_broadcast(&s->th.cv_apply);
    uv_cond_broadcast(&s->th.cv_hurry);
    uv_mutex_unlock(&s->th.mu);
    uv_thread_join(&s->th.apply_thread);
    /* Clean stop: LMDB has everything, so the next start replays nothing. Otherwise (applying
     * is stuck, or LMDB's syncs failed) the log keeps what the next start must replay. */
    if (s->th.applied_seq >= s->th.logged_seq && !s->th.lmdb_sync_failed &&
        mdb_env_sync(s->db.env, 1) == 0)
        return st_wal_reset(s->wal) == ST_OK;
    return false;
}
