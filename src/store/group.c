/* SPDX-License-Identifier: MIT */
/*
 * Group mode: the store's side of a replicated group (the repl module holds the Raft member).
 *
 * A sealed batch is encoded as one entry — a header naming the proposing process and batch,
 * then the ops in the redo log's layout — and proposed. It stays in the overlay (reads see it)
 * and in r_head until its entry applies. Applying an entry hands a batch to the apply thread
 * with the Raft index as its seq: the proposer's own batch as it is, anyone else's decoded
 * ("foreign", id 0, never in the overlay). LMDB stores the index of the last entry it took, in
 * the same transaction, so a replay skips what LMDB already has. The batch is durable once the
 * entry is committed (st_store_group_committed), which Raft reports after the apply.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ST__ENTRY_MAGIC 0x31425453u /* "STB1" */
/* u32 magic, u32 length of the ops, u64 token, u64 batch id. The length matters: C-Raft pads
 * entries to 8 bytes on disk and hands them back padded after a restart. */
#define ST__ENTRY_HDR 24

enum { ST__OP_PUT = 0, ST__OP_DEL = 1, ST__OP_NOTE = 2 };

/* h_wake's callback: nothing to do but keep the loop out of poll until its check (store.c). */
static void st__group_on_wake(uv_idle_t *h)
{
    (void)h;
}

/* Group mode's state, allocated by st_store_group_join. Loop only. */
struct st__group {
    st_store_group_t *raft;      /* the repl module's proposer (borrowed) */
    bool standby;                /* not the serving leader: staging is refused */
    uint64_t token;              /* tells this process's entries from everyone else's */
    st_batch_t *r_head, *r_tail; /* proposed, waiting for their entry to apply */
    size_t r_count;              /* how many (entries of ours in flight) */
    st_metric_t *m_inflight;
    uint64_t queued;  /* highest Raft index handed to the apply thread */
    uint64_t shown;   /* highest Raft index back from it (its notes published) */
    st_buf_t enc;     /* the entry being proposed */
    bool views_stale; /* foreign batches applied since the views were last rebuilt */
    uint64_t hold_to; /* own batches up to this barrier batch are acknowledged late (ack_late) */
    /* applied entries not yet handed to the apply thread: mu was busy (st__group_handoff) */
    st_batch_t *h_head, *h_tail;
    unsigned h_defers; /* hand-overs in a row put off */
    /* active while entries are held: the loop must not sleep in poll before the check that
     * hands them over. Its own handle, not the store's idle handle, which seals and rollbacks
     * stop for reasons of their own (review 26) */
    uv_idle_t h_wake;
    st_metric_t *m_h_defers;
};

static void st__encode_entry(st_buf_t *out, uint64_t token, const st_batch_t *b)
{
    uint32_t magic = ST__ENTRY_MAGIC, len = 0;
    st_buf_reset(out);
    st_buf_append(out, &magic, 4);
    st_buf_append(out, &len, 4);
    st_buf_append(out, &token, 8);
    st_buf_append(out, &b->id, 8);
    for (size_t i = 0; i < b->ops.n; i++) {
        const st_op_t *op = &b->ops.v[i];
        uint8_t kind = op->note ? ST__OP_NOTE : op->del ? ST__OP_DEL : ST__OP_PUT;
        uint32_t kl = (uint32_t)op->klen, vl = (uint32_t)op->vlen;
        st_buf_append(out, &kind, 1);
        st_buf_append(out, &kl, 4);
        st_buf_append(out, &vl, 4);
        st_buf_append(out, b->data.data + op->koff, op->klen);
        st_buf_append(out, b->data.data + op->voff, op->vlen);
    }
    len = (uint32_t)(out->len - ST__ENTRY_HDR);
    memcpy(out->data + 4, &len, 4);
}

/* The entry's ops, copied in one piece: the batch's ops point into its copy of the body. */
static int st__decode_entry(st_store_t *s, st_batch_t *b, const char *p, size_t len)
{
    st_recop_t op;
    int rc;
    st_buf_reset(&b->data);
    st_buf_append(&b->data, p + ST__ENTRY_HDR, len - ST__ENTRY_HDR);
    const char *base = b->data.data, *q = base, *end = base + b->data.len;
    while ((rc = st__rec_next(&q, end, &op)) == 1) {
        if (op.kind > ST__OP_NOTE) return ST_EIO;
        st_vec_reserve(&b->ops, b->ops.n + 1);
        bool del = op.kind == ST__OP_DEL;
        b->ops.v[b->ops.n++] = (st_op_t){.koff = (size_t)(op.key - base),
                                         .klen = op.klen,
                                         .voff = (size_t)(op.val - base),
                                         .vlen = del ? 0 : op.vlen,
                                         .del = del,
                                         .note = op.kind == ST__OP_NOTE};
        b->bytes += st__op_cost(s, op.klen, op.vlen, del);
        b->writes++;
    }
    return rc;
}

static uint64_t st__read_applied(st_store_t *s)
{
    uint64_t v = 0, wait = 0;
    const void *val;
    size_t vlen;
    if (st_store_get(s, st__group_applied_key, ST__GROUP_APPLIED_KLEN, &val, &vlen, &wait) ==
            ST_OK &&
        vlen == 8)
        memcpy(&v, val, 8);
    return v;
}

static double st__g_lazy(void *arg)
{
    st_store_t *s = arg;
    uv_mutex_lock(&s->th.mu);
    bool lazy = s->th.apply_lazy;
    uv_mutex_unlock(&s->th.mu);
    return lazy;
}

void st_store_apply_lazy(st_store_t *s, bool lazy)
{
    uv_mutex_lock(&s->th.mu);
    if (s->th.apply_lazy != lazy) {
        s->th.apply_lazy = lazy;
        if (!lazy) uv_cond_broadcast(&s->th.cv_hurry); /* a long pause under way ends */
    }
    uv_mutex_unlock(&s->th.mu);
}

void st_store_group_join(st_store_t *s, st_store_group_t *raft)
{
    st__group_t *g = st_calloc(1, sizeof *g);
    g->raft = raft;
    g->standby = true;
    g->token = st_mono_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)st_now_us();
    g->queued = g->shown = st__read_applied(s);
    st_metrics_gauge_fn("strata_store_apply_lazy",
                        "1 while LMDB takes this member's entries in larger transactions (25 ms "
                        "pauses; 0: 5 ms, someone waits for them)",
                        "", st__g_lazy, s);
    g->m_h_defers = st_metrics_counter(
        "strata_store_handoffs_deferred_total",
        "Times the loop found the commit threads' lock busy and kept the Raft entries it applied "
        "for the next iteration instead of waiting",
        "");
    g->m_inflight = st_metrics_histogram(
        "strata_repl_entries_in_flight",
        "Entries of this leader proposed and not yet committed, counted as one is proposed", "",
        st_metrics_size_bounds, st_metrics_size_nbounds);
    uv_idle_init(s->loop, &g->h_wake);
    g->h_wake.data = s;
    uv_unref((uv_handle_t *)&g->h_wake); /* held entries keep the loop alive through the store */
    s->group = g;
    uv_mutex_lock(&s->th.mu);
    s->th.applied_seq = g->queued;
    uv_mutex_unlock(&s->th.mu);
}

void st__group_close(st_store_t *s, uv_close_cb cb)
{
    s->group->h_wake.data = s;
    uv_close((uv_handle_t *)&s->group->h_wake, cb);
}

void st__group_free(st_store_t *s)
{
    st__group_t *g = s->group;
    if (!g) return;
    for (st_batch_t *b = g->r_head, *n; b; b = n) {
        n = b->next;
        st__batch_free(b);
    }
    ST_ASSERT(!g->h_head); /* handed over when the threads stopped */
    st_buf_free(&g->enc);
    free(g);
    s->group = NULL;
}

bool st_store_grouped(const st_store_t *s)
{
    return s->group != NULL;
}

void st_store_set_standby(st_store_t *s, bool standby)
{
    ST_ASSERT(s->group);
    s->group->standby = standby;
}

bool st_store_standby(const st_store_t *s)
{
    return s->group && s->group->standby;
}

int st__group_refuse(st_store_t *s)
{
    if (!s->group->standby) return ST_OK;
    s->group->views_stale = true; /* whoever tried may have changed its view already */
    return ST_ENOLEADER;          /* a follower's store only takes committed entries */
}

uint64_t st_store_group_queued(const st_store_t *s)
{
    return s->group ? s->group->queued : 0;
}

uint64_t st_store_group_shown(const st_store_t *s)
{
    return s->group ? s->group->shown : 0;
}

static void st__maybe_rollback(st_store_t *s)
{
    if (s->fail.first) {
        st__rollback(s);
        /* What waited behind the dropped batches waits for nothing now; a follower makes no
         * batches of its own, so no later durable batch would wake it. */
        st__listeners_durable(s, s->durable_id);
    }
    if (st_store_idle(s)) uv_unref((uv_handle_t *)&s->uv.done.poll);
}

/* Seals the open batch and proposes it (the check handle calls this once per iteration). */
void st__group_submit(st_store_t *s)
{
    st__group_t *g = s->group;
    st_batch_t *b = s->open;
    b->next = NULL;
    s->open = st__batch_new(s);
    st_list_insert(&s->inflight, &b->link);
    s->submitted++;
    uv_ref((uv_handle_t *)&s->uv.done.poll);
    uv_idle_stop(&s->uv.idle);
    st__encode_entry(&g->enc, g->token, b);
    st_metric_observe(s->m.batch_ops, (double)b->ops.n);
    st_metric_observe(s->m.batch_writes, (double)b->writes);
    st_metric_observe(g->m_inflight, (double)g->r_count);
    st_metric_add(s->m.commits, 1);
    b->proposed_ns = st_mono_ns();
    int rc = g->raft->propose(g->raft, b->id, g->enc.data, g->enc.len);
    if (rc != ST_OK) {
        b->rc = rc;
        st__batch_back(s, b);
        st__maybe_rollback(s);
        return;
    }
    if (g->r_tail)
        g->r_tail->next = b;
    else
        g->r_head = b;
    g->r_tail = b;
    g->r_count++;
}

/* Group commit at the Raft level: while an entry of ours is in flight, the open batch is not
 * proposed but goes on taking writes, and is proposed once that entry applies (or fails) — as
 * the WAL's group commit takes everything queued while an fsync runs. One entry per loop
 * iteration carried half as many writes, and every entry costs each member a message, a disk
 * write and its wake-ups (issue 24, bench/cluster.sh). A batch grown past ST__ENTRY_BYTES goes
 * anyway, with at most ST__MAX_IN_FLIGHT entries in flight. */
#define ST__ENTRY_BYTES   (1u << 20)
#define ST__MAX_IN_FLIGHT 4
bool st__group_hold(st_store_t *s)
{
    if (s->group->r_count == 0) return false;
    return s->group->r_count >= ST__MAX_IN_FLIGHT || s->open->data.len < ST__ENTRY_BYTES;
}

/* Takes batch `id` out of the proposed list (NULL if it is not there). */
static st_batch_t *st__take_proposed(st_store_t *s, uint64_t id)
{
    st__group_t *g = s->group;
    st_batch_t *prev = NULL;
    for (st_batch_t *b = g->r_head; b; prev = b, b = b->next) {
        if (b->id != id) continue;
        if (prev)
            prev->next = b->next;
        else
            g->r_head = b->next;
        if (g->r_tail == b) g->r_tail = prev;
        b->next = NULL;
        g->r_count--;
        return b;
    }
    return NULL;
}

static void st__group_committed(st_store_t *s, uint64_t batch_id)
{
    if (batch_id <= s->durable_id) return;
    s->durable_id = batch_id;
    st__listeners_durable(s, s->durable_id);
}

int st_store_group_apply(st_store_t *s, uint64_t index, const char *payload, size_t len)
{
    st__group_t *g = s->group;
    uint32_t magic, olen;
    uint64_t token, id;
    if (len < ST__ENTRY_HDR) return ST_EIO;
    memcpy(&magic, payload, 4);
    memcpy(&olen, payload + 4, 4);
    memcpy(&token, payload + 8, 8);
    memcpy(&id, payload + 16, 8);
    if (magic != ST__ENTRY_MAGIC || olen > len - ST__ENTRY_HDR) return ST_EIO;
    len = ST__ENTRY_HDR + olen;           /* without the padding */
    if (index <= g->queued) return ST_OK; /* LMDB has it already */
    st_batch_t *b = token == g->token ? st__take_proposed(s, id) : NULL;
    /* A batch held back behind this entry (st__group_hold) goes at the end of this iteration:
     * the loop must not block in poll before it. */
    if (b && s->open->ops.n) uv_idle_start(&s->uv.idle, st__store_on_idle);
    if (!b) {
        b = st__batch_new(s);
        s->open_id--; /* foreign batches take no id: they are never in the overlay */
        b->id = 0;
        b->foreign = true;
        if (st__decode_entry(s, b, payload, len) != ST_OK) {
            st_error("store: Raft entry %llu is damaged", (unsigned long long)index);
            st__batch_recycle(s, b);
            return ST_EIO;
        }
        st_list_insert(&s->inflight, &b->link);
        s->submitted++;
        uv_ref((uv_handle_t *)&s->uv.done.poll);
    }
    b->seq = index;
    g->queued = index;
    /* Only committed entries are applied: an own batch is durable now, whatever Raft reports
     * for its request later (a leader deposed meanwhile reports it lost). Frames waiting for it
     * must not wait for a durable id that might never come. Unless the backup must have it
     * first (a reservation, st_store_barrier): then it and every own batch after it are
     * acknowledged once back from the apply thread, whose tap ships the barrier before it
     * returns (acknowledgements stay in order). */
    if (!b->foreign) {
        st_metric_observe(s->m.commit_s, (double)(st_mono_ns() - b->proposed_ns) / 1e9);
        if (b->barrier && st__tap_leading(s)) g->hold_to = b->id;
        if (g->hold_to)
            b->ack_late = true;
        else
            st__group_committed(s, b->id);
    }
    /* To the apply thread at the end of the iteration (st__group_handoff), every entry applied
     * in it with one hold of mu. */
    b->next = NULL;
    if (!g->h_head) uv_idle_start(&g->h_wake, st__group_on_wake);
    st__chain(&g->h_head, &g->h_tail, b, b);
    st__pending_add(s, b->bytes);
    return ST_OK;
}

/* With mu held: the entries waiting on the loop go to the apply thread, in order. */
static void st__group_splice(st_store_t *s)
{
    st__group_t *g = s->group;
    if (!g || !g->h_head) return;
    st__chain(&s->th.a_head, &s->th.a_tail, g->h_head, g->h_tail);
    g->h_head = g->h_tail = NULL;
    uv_cond_signal(&s->th.cv_apply);
}

/* How many iterations in a row a hand-over may be put off while mu is busy: then it waits. */
#define ST__HANDOFF_DEFERS_MAX 64

void st__group_handoff(st_store_t *s, bool wait)
{
    st__group_t *g = s->group;
    if (!g || !g->h_head) return;
    /* mu is only tried, as st__store_submit does: held by a commit thread the scheduler took
     * the core from, it would stall the loop for a time slice; the entries wait one more
     * iteration instead (the idle handle keeps the loop from sleeping in poll meanwhile) */
    if (!wait && g->h_defers < ST__HANDOFF_DEFERS_MAX && uv_mutex_trylock(&s->th.mu) != 0) {
        g->h_defers++;
        st_metric_add(g->m_h_defers, 1);
        return; /* h_wake stays active: the next iteration comes at once */
    }
    if (wait || g->h_defers >= ST__HANDOFF_DEFERS_MAX) uv_mutex_lock(&s->th.mu);
    g->h_defers = 0;
    st__group_splice(s);
    uv_mutex_unlock(&s->th.mu);
    uv_idle_stop(&g->h_wake);
}

void st_store_group_handoff(st_store_t *s)
{
    st__group_handoff(s, true);
}

/* Fails every proposal from `b` on (taken out of the list already) with err, and rolls back. */
static void st__fail_from(st_store_t *s, st_batch_t *b, int err)
{
    st__group_t *g = s->group;
    b->rc = err;
    st__batch_back(s, b);
    /* Raft fails every entry of a lost term: the later proposals are as good as failed, and
     * the rollback must not find them in flight. */
    while ((b = g->r_head)) {
        g->r_head = b->next;
        b->next = NULL;
        b->rc = err;
        st__batch_back(s, b);
    }
    g->r_tail = NULL;
    g->r_count = 0;
    st__maybe_rollback(s);
}

void st_store_group_failed(st_store_t *s, uint64_t batch_id, int err)
{
    st_batch_t *b = st__take_proposed(s, batch_id);
    if (b) st__fail_from(s, b, err); /* else: applied (committed), or failed already */
}

static void st__fail_held(st_store_t *s, int err)
{
    /* Committed, but held for a barrier the backup does not have: their answers fail (an
     * unknown outcome, like any write of a lost term), so no number is handed out from a
     * reservation the backup may not have. Numbers from it wait for the tap to be ready again
     * (st_store_resv_check; the failed tap cleared its confirmation), once the target answers. */
    s->group->hold_to = 0;
    st__listeners_failed(s, s->durable_id + 1, err);
}

/* An ack_late batch is back from the apply thread (the tap has taken it): acknowledge it. */
static void st__ack_late(st_store_t *s, const st_batch_t *b)
{
    if (b->tap_failed) {
        st__fail_held(s, ST_EUNAVAIL);
        return;
    }
    st__group_committed(s, b->id); /* (held behind a failed barrier: answered 503 already) */
    if (b->id >= s->group->hold_to) s->group->hold_to = 0;
}

void st_store_group_abandon(st_store_t *s, int err)
{
    st__group_t *g = s->group;
    if (g->hold_to) st__fail_held(s, err); /* a barrier this member will not ship any more */
    st_batch_t *b = g->r_head;
    if (!b) return;
    g->r_head = b->next;
    if (!g->r_head) g->r_tail = NULL;
    b->next = NULL;
    st__fail_from(s, b, err);
}

int st_store_group_sync(st_store_t *s, uint64_t index)
{
    /* (in the thread pool: the entries the loop applied reach the apply thread at the end of
     * the loop's iteration, st__group_handoff; the loop's own, not touched from here) */
    uv_mutex_lock(&s->th.mu);
    st__hurry(s, 1);
    while (s->th.applied_seq < index && !s->th.stop_apply && !s->th.apply_err)
        uv_cond_wait(&s->th.cv_applied, &s->th.mu);
    st__hurry(s, -1);
    bool ok = s->th.applied_seq >= index;
    uv_mutex_unlock(&s->th.mu);
    if (!ok) return ST_EIO;
    return mdb_env_sync(s->db.env, 1) == 0 ? ST_OK : ST_EIO;
}

void st_store_refresh_views(st_store_t *s)
{
    if (s->group && s->group->standby && s->group->views_stale) st_store_resync(s);
}

void st_store_resync(st_store_t *s)
{
    if (s->group) s->group->views_stale = false;
    st__listeners_failed(s, s->open_id + 1, ST_ENOLEADER);
}

void st_store_on_note(st_store_t *s, st_store_note_fn fn, void *arg)
{
    s->note_fn = fn;
    s->note_arg = arg;
}

int st_store_note(st_store_t *s, uint8_t kind, const void *data, size_t len, uint64_t *wait)
{
    if (!s->group) return ST_OK;
    if (s->group->standby) return ST_ENOLEADER;
    st_batch_t *b = s->open;
    if (b->ops.n == 0) uv_idle_start(&s->uv.idle, st__store_on_idle);
    st__batch_add(s, b, &kind, 1, data, len, false);
    b->ops.v[b->ops.n - 1].note = true;
    if (*wait < b->id) *wait = b->id;
    return ST_OK;
}

/* The fence's note kind: no listener knows it, so applying it publishes nothing. */
#define ST__NOTE_FENCE 0xff

int st_store_fence(st_store_t *s, uint64_t *wait)
{
    if (!s->group) return ST_OK;
    if (s->group->standby) return ST_ENOLEADER;
    st_batch_t *b = s->open;
    if (b->ops.n == 0) { /* otherwise the batch is an entry anyway */
        uint8_t kind = ST__NOTE_FENCE;
        uv_idle_start(&s->uv.idle, st__store_on_idle);
        st__batch_add(s, b, &kind, 1, "", 0, false);
        b->ops.v[b->ops.n - 1].note = true;
    }
    if (*wait < b->id) *wait = b->id;
    return ST_OK;
}

/* A foreign batch is back from LMDB: its stream frames go to the note handler. */
static void st__notes(st_store_t *s, const st_batch_t *b)
{
    s->group->views_stale = true;
    if (!s->note_fn) return;
    for (size_t i = 0; i < b->ops.n; i++) {
        const st_op_t *op = &b->ops.v[i];
        if (op->note && (uint8_t)b->data.data[op->koff] != ST__NOTE_FENCE) /* fences say nothing */
            s->note_fn(s->note_arg, (uint8_t)b->data.data[op->koff], b->data.data + op->voff,
                       op->vlen);
    }
}

void st__group_back(st_store_t *s, const st_batch_t *b)
{
    if (b->foreign) st__notes(s, b);
    if (b->seq > s->group->shown) s->group->shown = b->seq;
    if (b->ack_late) st__ack_late(s, b);
}

/* ---- snapshot install: a member's whole store, copied from another member ---- */

int st_store_copy_fd(st_store_t *s, int fd)
{
    /* a consistent copy from one read transaction; writers go on meanwhile */
    int rc = mdb_env_copyfd2(s->db.env, fd, MDB_CP_COMPACT);
    if (rc) st_error("store: copying LMDB for another member failed: %s", mdb_strerror(rc));
    return rc ? ST_EIO : ST_OK;
}

/* Puts every key of the copy into the live store, in transactions of `chunk` keys, after
 * emptying it. The applied index goes in last: a crash half-way leaves no index (the member
 * loads again), never a store that claims entries it does not hold. */
static int st__load_keys(st_store_t *s, MDB_env *src, MDB_dbi sdbi, uint64_t *applied)
{
    MDB_txn *rt = NULL, *wt = NULL;
    MDB_cursor *c = NULL;
    int rc = mdb_txn_begin(src, NULL, MDB_RDONLY, &rt);
    if (!rc) rc = mdb_cursor_open(rt, sdbi, &c);
    if (!rc) rc = mdb_txn_begin(s->db.env, NULL, 0, &wt);
    if (!rc) rc = mdb_drop(wt, s->db.dbi, 0);
    MDB_val k, v;
    size_t n = 0;
    *applied = 0;
    for (int op = MDB_FIRST; !rc && (rc = mdb_cursor_get(c, &k, &v, op)) == 0; op = MDB_NEXT) {
        if (k.mv_size == ST__GROUP_APPLIED_KLEN &&
            memcmp(k.mv_data, st__group_applied_key, k.mv_size) == 0) {
            if (v.mv_size == 8) memcpy(applied, v.mv_data, 8);
            continue;
        }
        rc = mdb_put(wt, s->db.dbi, &k, &v, MDB_APPEND);
        if (!rc && ++n % 20000 == 0) {
            rc = mdb_txn_commit(wt);
            wt = NULL;
            if (!rc) rc = mdb_txn_begin(s->db.env, NULL, 0, &wt);
        }
    }
    if (rc == MDB_NOTFOUND) rc = 0;
    if (!rc) {
        MDB_val ak = {ST__GROUP_APPLIED_KLEN, (void *)st__group_applied_key}, av = {8, applied};
        rc = mdb_put(wt, s->db.dbi, &ak, &av, 0);
    }
    if (!rc) {
        rc = mdb_txn_commit(wt);
        wt = NULL;
    }
    if (wt) mdb_txn_abort(wt);
    if (c) mdb_cursor_close(c);
    if (rt) mdb_txn_abort(rt);
    if (!rc) rc = mdb_env_sync(s->db.env, 1);
    return rc;
}

int st_store_group_load(st_store_t *s, const char *path, uint64_t *applied)
{
    MDB_env *src = NULL;
    MDB_txn *t = NULL;
    MDB_dbi sdbi;
    int rc = mdb_env_create(&src);
    if (!rc) rc = mdb_env_set_mapsize(src, 1ULL << 40);
    if (!rc) rc = mdb_env_open(src, path, MDB_NOSUBDIR | MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS, 0644);
    if (!rc) rc = mdb_txn_begin(src, NULL, MDB_RDONLY, &t);
    if (!rc) rc = mdb_dbi_open(t, NULL, 0, &sdbi);
    if (t) mdb_txn_abort(t);
    if (!rc) rc = st__load_keys(s, src, sdbi, applied);
    if (src) mdb_env_close(src);
    if (rc) st_error("store: loading the copy %s failed: %s", path, mdb_strerror(rc));
    return rc ? ST_EIO : ST_OK;
}

void st_store_group_loaded(st_store_t *s, uint64_t applied)
{
    s->group->queued = s->group->shown = applied;
    /* handed over when the fetch began (st_store_group_handoff), and Raft's entries kept aside
     * by the repl module since: applied over the copy now they would bring back older values */
    ST_ASSERT(!s->group->h_head);
    uv_mutex_lock(&s->th.mu);
    s->th.applied_seq = applied;
    uv_mutex_unlock(&s->th.mu);
    st_store_resync(s);
}
