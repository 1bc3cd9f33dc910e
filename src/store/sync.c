/* SPDX-License-Identifier: MIT */
/*
 * The sync lanes: the threads that write groups to the redo log (commit.c has the rest of the
 * commit path: the loop's side, the apply thread, recovery).
 *
 * A lane takes every queued batch as one group and writes it as one record; once it is durable
 * the lane runs the group's express work (the answers that wait for nothing else, written by
 * the lane itself: st_store_express) and the loop releases the rest. With a direct log
 * (O_DIRECT|O_DSYNC: one write is one flush) there are ST__LANES lanes, so a group sealed while
 * another's write is in flight is written at once beside it instead of waiting for it: this disk
 * does concurrent synchronous writes in the time of one (bench/RESULTS.md, session 6), and at a
 * fixed number of clients durable throughput is bounded by how long an answer waits. Order is kept
 * by tickets, taken with the group:
 *  - reservation, in ticket order: the lane places its record after the last one reserved (at
 *    the next free block if that one's write is still in flight, st_wal_reserve's `apart`) and
 *    takes the next log seq;
 *  - the write, outside the lock, concurrently with the other lane's;
 *  - completion (`done`), in ticket order: a group is acknowledged only once every group
 *    before it is, so a client never sees a write whose predecessor a crash could still take
 *    away (replay stops at the first missing record);
 *  - its express work, then the hand-off to the loop and the apply thread (`published`), in
 *    ticket order.
 * Anything that changes the log's shape — a group bigger than the room left (the next half, a
 * checkpoint, a direct commit into LMDB), a barrier that goes to the backup first — runs alone:
 * it waits until every earlier group is handed on and holds the reservation turn until it is
 * done.
 *
 * Failures. A lane's write that fails — a full disk too, which alone (below) is retried —
 * fail-stops the log: its contents are unknown, and a group written apart may be on disk.
 * Every later group fails with the first failure, in order, whatever its own write did; failed
 * groups are handed to the loop together once no lane holds a group any more, because the loop
 * rolls back from the first failed batch on and needs every later one back first. A group that
 * fails alone with ST_EFULL leaves the log usable: the next group is placed where it would have
 * been.
 */
#include "internal.h"
#include "strata/idle.h"

#include <stdlib.h>
#include <sys/prctl.h>

/* ---- the log's shape: halves, checkpoints, direct commits (alone) ---- */

void st__hurry(st_store_t *s, int by)
{
    __atomic_add_fetch(&s->th.hurry, by, __ATOMIC_SEQ_CST); /* read unlocked (yield.c) */
    if (by > 0) {
        st__apply_lift(s); /* its group at SCHED_IDLE must not make a waiter wait (yield.c) */
        uv_cond_broadcast(&s->th.cv_hurry);
    }
}

/* Everything logged is in LMDB and LMDB is fully synced: the log may start over. Called with
 * mu held; drops it while waiting and syncing. An apply that keeps failing is not waited for:
 * its error is returned and the group that needed the room is refused. */
static int st__checkpoint(st_store_t *s)
{
    st__hurry(s, 1);
    uint64_t t0 = st_mono_ns();
    while (s->th.applied_seq < s->th.logged_seq && !s->th.apply_err)
        uv_cond_wait(&s->th.cv_applied, &s->th.mu);
    s->th.fig.ckpt_waits++;
    s->th.fig.ckpt_wait_ns += st_mono_ns() - t0;
    st__hurry(s, -1);
    if (s->th.applied_seq < s->th.logged_seq) return s->th.apply_err;
    /* A failed apply needs no care here: LMDB keeps two meta pages, so a commit that succeeds
     * after one whose fdatasync failed makes everything before it durable again, and the wait
     * above needed such a commit. A failed sync of our own is different: nothing after it would
     * re-dirty what it may have lost, so the log is kept. */
    uv_mutex_unlock(&s->th.mu);
    const char *what = NULL;
    bool synced = mdb_env_sync(s->db.env, 1) == 0;
    if (!synced)
        what = "syncing LMDB for a redo log checkpoint failed";
    else if (st_wal_reset(s->wal) != ST_OK)
        what = "starting a new redo log generation failed";
    uv_mutex_lock(&s->th.mu);
    if (!synced) s->th.lmdb_sync_failed = true;
    if (what) st__fail_stop(s, what);
    return what ? ST_EIO : ST_OK;
}

/* With mu held: the current half is full. Appends go on in the other half once LMDB has
 * synced everything it held (usually long done, by the apply thread); the full half is then the
 * one to checkpoint. A log from before the halves is checkpointed whole and reset instead. An
 * apply that keeps failing is not waited for: its error is returned. */
static int st__next_half(st_store_t *s)
{
    if (st_wal_legacy(s->wal)) {
        int rc = st__checkpoint(s);
        if (rc == ST_OK) s->th.ckpt_done = true;
        return rc;
    }
    if (!s->th.ckpt_done) {
        st__hurry(s, 1);
        uv_cond_signal(&s->th.cv_apply);
        uint64_t t0 = st_mono_ns();
        while (!s->th.ckpt_done && !s->th.apply_err && !s->th.log_err)
            uv_cond_wait(&s->th.cv_applied, &s->th.mu);
        s->th.fig.ckpt_waits++;
        s->th.fig.ckpt_wait_ns += st_mono_ns() - t0;
        st__hurry(s, -1);
    }
    if (!s->th.ckpt_done) return s->th.log_err ? s->th.log_err : s->th.apply_err;
    if (st_wal_switch(s->wal) != ST_OK) {
        st__fail_stop(s, "starting a new redo log half failed");
        return ST_EIO;
    }
    s->th.ckpt_seq = s->th.logged_seq;
    s->th.ckpt_done = false;
    s->th.fig.wal_switches++;
    uv_cond_signal(&s->th.cv_apply);
    return ST_OK;
}

/* A group bigger than a half of the log: LMDB is caught up (checkpoint), so it is committed
 * straight into it with a full sync. */
static int st__apply_direct(st_store_t *s, st_batch_t *group)
{
    int mrc = st__apply_group(s, group, 0);
    if (mrc) return st__apply_class(s, mrc, st__group_bytes(group));
    if (mdb_env_sync(s->db.env, 1) != 0) {
        /* committed and visible, durability unknown: neither answer is safe from here on */
        uv_mutex_lock(&s->th.mu);
        s->th.lmdb_sync_failed = true;
        st__fail_stop(s, "syncing LMDB after a direct commit failed");
        uv_mutex_unlock(&s->th.mu);
        return ST_EIO;
    }
    return ST_OK;
}

/* Logs one group (or commits it directly); returns how it went. Called without mu. */
static int st__log_group(st_store_t *s, st_buf_t *payload, st_batch_t *group, uint64_t seq,
                         bool *direct)
{
    uv_mutex_lock(&s->th.mu);
    int rc = s->th.log_err; /* fail-stopped: the log is not touched again */
    uv_mutex_unlock(&s->th.mu);
    if (rc) return rc;
    st__rec_encode(payload, group, true);
    if (!st_wal_fits_empty(s->wal, payload->len)) {
        uv_mutex_lock(&s->th.mu);
        rc = st__checkpoint(s);
        if (rc == ST_OK) s->th.ckpt_done = true;
        uv_mutex_unlock(&s->th.mu);
        if (rc) return rc;
        *direct = true;
        return st__apply_direct(s, group);
    }
    uv_mutex_lock(&s->th.mu);
    if (st_wal_record_size(payload->len) > st_wal_remaining(s->wal)) rc = st__next_half(s);
    uv_mutex_unlock(&s->th.mu);
    if (rc) return rc;
    rc = st_wal_append(s->wal, seq, payload->data, payload->len);
    if (rc == ST_EIO) {
        uv_mutex_lock(&s->th.mu);
        st__fail_stop(s, "a redo log write or fdatasync failed");
        uv_mutex_unlock(&s->th.mu);
    }
    return rc; /* ST_EFULL: nothing of it can replay; the next group tries the same place */
}

/* With mu held: takes the queued batches as one group, but a batch whose reservations must go
 * to the backup first (a barrier) starts a group of its own, so that the batches before it are
 * not held while the backup takes them (nor fail with it). Returns the group's last batch. */
static st_batch_t *st__take_group(st_store_t *s)
{
    st_batch_t *last = s->th.q_head;
    while (last->next && !last->next->barrier)
        last = last->next;
    if (s->th.q_head->barrier || !last->next) {
        last = s->th.q_tail;
        s->th.q_head = s->th.q_tail = NULL;
    } else {
        s->th.q_head = last->next;
        last->next = NULL;
    }
    return last;
}

/* ---- the lanes ---- */

/* The record payload's length, as st__rec_encode writes it. */
static size_t st__rec_len(const st_batch_t *group)
{
    size_t n = 0;
    for (const st_batch_t *b = group; b; b = b->next)
        for (size_t i = 0; i < b->ops.n; i++)
            if (!b->ops.v[i].note) n += 9 + b->ops.v[i].klen + b->ops.v[i].vlen;
    return n;
}

/* With mu held: a lane may take a group — one is queued, a lane is free, and no failure is
 * waiting for the groups still held to come back. */
static bool st__can_take(const st_store_t *s)
{
    return s->th.q_head && !s->th.halted && !s->th.pipe_err && s->th.inflight < s->th.lanes;
}

/* What one lane owns: the record's payload and its blocks. */
typedef struct {
    st_buf_t payload;
    st_wal_io_t io;
} st__lane_t;

/* How a group's logging went. */
typedef struct {
    int rc;
    uint64_t seq;         /* its log record (none when committed directly or failed) */
    bool direct;          /* committed straight into LMDB */
    uint64_t used, lfree; /* st__measure's figures after a direct commit */
} st__outcome_t;

/* With mu held: the group of ticket t is done (acknowledged, failed, or committed directly)
 * and handed on, in ticket order. */
static void st__lane_done(st_store_t *s, st_batch_t *group, st_batch_t *last, uint64_t t,
                          const st__outcome_t *o)
{
    int rc = o->rc;
    bool direct = o->direct;
    uint64_t seq = o->seq;
    for (st_batch_t *b = group; b; b = b->next) {
        b->seq = direct || rc ? 0 : seq;
        b->rc = rc;
    }
    if (rc != ST_OK) {
        if (!s->th.pipe_err) s->th.pipe_err = rc;
        st__pending_sub(s, st__group_bytes(group));
        st__chain(&s->th.f_head, &s->th.f_tail, group, last);
    } else if (direct) {
        st__pending_sub(s, st__group_bytes(group));
        s->th.acked_id = last->id;
        s->th.used_bytes = o->used;
        s->th.lmdb_free = o->lfree;
        st__publish_threads(s);
        st__to_loop(s, group, last);
    } else {
        s->th.acked_id = last->id;
        st__publish_threads(s);
        s->th.logged_seq = seq;
        st__chain(&s->th.a_head, &s->th.a_tail, group, last);
        uv_cond_signal(&s->th.cv_apply);
        st_wake_send(&s->uv.done);
    }
    if (s->th.done < t) s->th.done = t; /* (a later group may have finished already) */
    if (s->th.reserved < t) s->th.reserved = t;
    s->th.published = t;
    s->th.inflight--;
    if (s->th.pipe_err && !s->th.inflight) {
        /* every group taken is back: the loop rolls back from the first failed one */
        s->th.halted = true;
        st__publish_threads(s);
        s->th.next_seq = s->th.logged_seq + 1;
        s->th.pipe_err = 0;
        st__to_loop(s, s->th.f_head, s->th.f_tail);
        s->th.f_head = s->th.f_tail = NULL;
    }
    uv_cond_broadcast(&s->th.cv_turn);
    if (st__can_take(s)) uv_cond_signal(&s->th.cv_sync); /* the other lane, if it waits */
}

static bool st__has_express(const st_batch_t *group)
{
    for (const st_batch_t *b = group; b; b = b->next)
        if (b->express) return true;
    return false;
}

/*
 * With mu held: hands the group of ticket t on, in ticket order. A durable group's express
 * work (st_store_express: the HTTP server's answers) runs first, here, with mu dropped. The
 * group's result is final, so `done` lets the next group finish meanwhile; it is handed on —
 * acknowledged to the loop, queued for the apply thread, counted in logged_seq — only after,
 * so the loop touches none of it before that, and a change of the log's shape (which waits
 * for `published`) always sees every durable group.
 * A lane does this because it is awake anyway: the loop's wake-up and its writes of the
 * answers before it no longer stand between a durable write and its answer, and the loop keeps
 * its time for requests (bench/RESULTS.md, "Session 7": ~6 µs of kernel TCP per answer).
 */
static void st__lane_finish(st_store_t *s, st_batch_t *group, st_batch_t *last, uint64_t t,
                            const st__outcome_t *o)
{
    if (o->rc == ST_OK && st__has_express(group)) {
        if (s->th.done < t) s->th.done = t;
        if (s->th.reserved < t) s->th.reserved = t;
        uv_cond_broadcast(&s->th.cv_turn);
        uv_mutex_unlock(&s->th.mu);
        for (st_batch_t *b = group; b; b = b->next)
            for (st_store_express_t *x = b->express; x; x = x->next)
                x->send(x);
        uv_mutex_lock(&s->th.mu);
    }
    while (s->th.published != t - 1)
        uv_cond_wait(&s->th.cv_turn, &s->th.mu);
    st__lane_done(s, group, last, t, o);
}

/* Logs the group of ticket t (taken with mu held, called without). */
static void st__lane_log(st_store_t *s, st__lane_t *l, st_batch_t *group, st_batch_t *last,
                         uint64_t t)
{
    size_t ops = 0, writes = 0, len = st__rec_len(group);
    for (st_batch_t *b = group; b; b = b->next) {
        ops += b->ops.n;
        writes += b->writes;
    }
    uv_mutex_lock(&s->th.mu);
    while (s->th.reserved != t - 1)
        uv_cond_wait(&s->th.cv_turn, &s->th.mu);
    uint64_t t0 = st_mono_ns();
    int rc = s->th.log_err ? s->th.log_err : s->th.pipe_err;
    uint64_t seq = s->th.next_seq;
    bool alone = true, wrote = false;
    /* Side by side only while the log is direct: each write then reports its own failure.
     * Buffered (after a direct write was refused), two lanes' fdatasyncs on one descriptor
     * would share its writeback errors, so one could return 0 for pages the other's failed. */
    if (rc == ST_OK && !group->barrier && s->th.lanes > 1 && st_wal_direct(s->wal)) {
        bool apart = s->th.done != t - 1; /* the previous record's write is in flight */
        alone = st_wal_reserve(s->wal, seq, len, apart, &l->io) != ST_OK;
    }
    if (!alone) {
        s->th.next_seq++;
        s->th.reserved = t;
        uv_cond_broadcast(&s->th.cv_turn);
    } else if (rc == ST_OK) {
        /* the log's shape may change: every group before is handed on (logged_seq is whole) */
        while (s->th.published != t - 1)
            uv_cond_wait(&s->th.cv_turn, &s->th.mu);
        rc = s->th.log_err ? s->th.log_err : s->th.pipe_err;
    }
    uv_mutex_unlock(&s->th.mu);
    st__outcome_t o = {0};
    if (rc == ST_OK && alone) {
        /* the log's shape may change: nothing else is in flight, and no lane reserves until
         * this is done */
        rc = group->barrier ? st__tap_ahead(s, group, seq, &l->payload) : ST_OK;
        if (rc == ST_OK) rc = st__log_group(s, &l->payload, group, seq, &o.direct);
        if (o.direct && rc == ST_OK) st__measure(s, &o.used, &o.lfree);
    } else if (rc == ST_OK) {
        st__rec_encode(&l->payload, group, true);
        st_wal_build(&l->io, l->payload.data, l->payload.len);
        rc = st_wal_write(&l->io);
        wrote = true;
    }
    uv_mutex_lock(&s->th.mu);
    while (s->th.done != t - 1)
        uv_cond_wait(&s->th.cv_turn, &s->th.mu);
    if (wrote) {
        rc = st_wal_done(s->wal, &l->io, rc);
        if (rc != ST_OK) {
            st__fail_stop(s, "a redo log write or fdatasync failed");
            rc = ST_EIO;
        }
    }
    /* A group before this one failed after this one was placed: it cannot be acknowledged.
     * (Such a failure always sets pipe_err before this turn. A log_err alone was set by the
     * apply thread's checkpoint since this group was placed: the group is durable all the same,
     * and one committed directly into LMDB is visible already, so it is not failed for it.) */
    if (rc == ST_OK && s->th.pipe_err) rc = s->th.pipe_err;
    uint64_t t1 = st_mono_ns();
    if (rc == ST_OK) {
        if (alone && !o.direct) s->th.next_seq = seq + 1;
        /* the backup's tap takes groups in log order: the turn is still this group's */
        uv_mutex_unlock(&s->th.mu);
        st__tap_group(s, group, o.direct ? 0 : seq, &l->payload);
        t1 = st_mono_ns();
        uv_mutex_lock(&s->th.mu);
    }
    s->th.fig.sync_ns_sum += t1 - t0;
    s->th.fig.sync_count++;
    s->th.fig.group_ops += ops;
    s->th.fig.group_writes += writes;
    o.rc = rc;
    o.seq = seq;
    st__lane_finish(s, group, last, t, &o);
    uv_mutex_unlock(&s->th.mu);
}

static void st__sync_lane(void *arg)
{
    st_store_t *s = arg;
    prctl(PR_SET_NAME, "strata-sync");
    st_sched_worker();
    st__lane_t l = {0};
    uv_mutex_lock(&s->th.mu);
    for (;;) {
        while (!st__can_take(s)) {
            if (s->th.stop && (!s->th.q_head || s->th.halted || s->th.pipe_err)) goto out;
            s->th.sync_waiting++;
            uv_cond_wait(&s->th.cv_sync, &s->th.mu);
            s->th.sync_waiting--;
        }
        st_batch_t *group = s->th.q_head, *last = st__take_group(s);
        uint64_t t = ++s->th.ticket;
        s->th.inflight++;
        if (st__can_take(s)) uv_cond_signal(&s->th.cv_sync); /* a barrier split the queue */
        uv_mutex_unlock(&s->th.mu);
        st__lane_log(s, &l, group, last, t);
        uv_mutex_lock(&s->th.mu);
    }
out:
    uv_mutex_unlock(&s->th.mu);
    st_buf_free(&l.payload);
    free(l.io.buf);
}

void st__sync_start(st_store_t *s)
{
    s->th.lanes = s->wal && st_wal_direct(s->wal) ? ST__LANES : 1;
    s->th.next_seq = s->th.logged_seq + 1;
    for (int i = 0; i < s->th.lanes; i++)
        if (uv_thread_create(&s->th.sync_thread[i], st__sync_lane, s) != 0)
            st_fatal("store: cannot start the commit threads");
}

void st__sync_join(st_store_t *s)
{
    for (int i = 0; i < s->th.lanes; i++)
        uv_thread_join(&s->th.sync_thread[i]);
}
