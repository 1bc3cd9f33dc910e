/* SPDX-License-Identifier: MIT */
/*
 * What the backup module needs from the store, and nothing more: a tap on the one point where
 * a group becomes durable (the sync thread, right after its redo-log record is synced and
 * before its responses are released), a barrier for writes that must reach the tap before they
 * are acknowledged, a compact copy of LMDB taken beside a running server, and an offline
 * environment that a restore fills from a snapshot plus shipped records.
 *
 * A barrier's reservations go to the backup *before* their group is logged (st__tap_ahead): if
 * the backup cannot take them within its bound, the group fails unlogged like any group the log
 * refused, so no range is issued from unless the backup holds it, and no acknowledgement waits
 * on the backup target for longer than that bound.
 *
 * Records handed to the tap are the redo log's own encoding ({u8 del, u32 klen, u32 vlen, key,
 * val}*), so a restore applies exactly what a restart would replay.
 *
 * In a replicated group the Raft log is the redo log: the leader's apply thread taps every
 * entry once it is in LMDB (committed, so nothing uncommitted is ever shipped), under its Raft
 * index; indexes without a store entry (C-Raft's own barriers and configuration changes) go as
 * empty records, so positions stay contiguous for a restore. Followers tap nothing. A member that
 * starts leading (st_store_tap_lead) has every committed entry in LMDB; its shipper begins a new
 * timeline whose snapshot holds them, so what the old leader had not shipped is not lost.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* The tap's state. fn, ahead, arg, busy, ready, confirmed and on are shared with the threads,
 * under th.mu; seq and enc are the apply thread's. */
struct st__tap {
    st_store_tap_fn fn;      /* told every logged group (backup) */
    st_store_ahead_fn ahead; /* takes a group's reservations before it is logged */
    void *arg;
    int busy;       /* tap calls running */
    bool ready;     /* st_store_tap_ready */
    bool confirmed; /* ready once since the tap was set or this member began leading */
    bool on;        /* group mode: this member leads; the apply thread taps its entries */
    uint64_t seq;   /* group mode, apply thread: the last Raft index tapped */
    st_buf_t enc;   /* group mode, apply thread: an entry's record for the tap */
};

st__tap_t *st__tap_new(void)
{
    return st_calloc(1, sizeof(st__tap_t));
}

void st__tap_free(st__tap_t *t)
{
    if (!t) return;
    st_buf_free(&t->enc);
    free(t);
}

bool st__tap_leading(const st_store_t *s)
{
    return s->tap->on;
}

void st__tap_group(st_store_t *s, const st_batch_t *group, uint64_t seq, const st_buf_t *rec)
{
    uv_mutex_lock(&s->th.mu);
    st_store_tap_fn fn = s->tap->fn;
    void *arg = s->tap->arg;
    if (fn) s->tap->busy++;
    uv_mutex_unlock(&s->th.mu);
    if (!fn) return;
    bool barrier = false; /* its reservations went ahead of it (st__tap_ahead) */
    for (const st_batch_t *b = group; b; b = b->next)
        barrier |= b->barrier;
    fn(arg, seq, rec->data, rec->len, barrier);
    uv_mutex_lock(&s->th.mu);
    s->tap->busy--;
    uv_mutex_unlock(&s->th.mu);
}

#define ST__TAP_MAX_GAP 65536 /* Raft indexes without a store entry in a row: more is a break */

void st__tap_entries(st_store_t *s, st_batch_t *group)
{
    uv_mutex_lock(&s->th.mu);
    st_store_tap_fn fn = s->tap->on ? s->tap->fn : NULL;
    void *arg = s->tap->arg;
    if (fn) s->tap->busy++;
    uv_mutex_unlock(&s->th.mu);
    if (!fn) return;
    for (st_batch_t *b = group; b; b = b->next) {
        if (b->seq <= s->tap->seq) continue;
        if (b->seq - s->tap->seq > ST__TAP_MAX_GAP)
            fn(arg, 0, "", 0, false); /* cannot happen; if it did, a new timeline covers it */
        else
            for (uint64_t i = s->tap->seq + 1; i < b->seq; i++)
                fn(arg, i, "", 0, false);
        st__rec_encode(&s->tap->enc, b, false);
        /* a barrier's own batch: the call returns once it is shipped, or fails past the
         * backup's bound (st_store_group_apply holds the acknowledgements meanwhile; a failed
         * one fails them, group.c's st__ack_late) */
        if (fn(arg, b->seq, s->tap->enc.data ? s->tap->enc.data : "", s->tap->enc.len,
               b->barrier && !b->foreign) != ST_OK) {
            b->tap_failed = true;
            uv_mutex_lock(&s->th.mu);
            s->tap->confirmed = false; /* numbers from it wait until the backup answers again */
            uv_mutex_unlock(&s->th.mu);
        }
        s->tap->seq = b->seq;
    }
    uv_mutex_lock(&s->th.mu);
    s->tap->busy--;
    uv_mutex_unlock(&s->th.mu);
}

void st_store_tap_lead(st_store_t *s, bool on)
{
    uv_mutex_lock(&s->th.mu);
    s->tap->on = on;
    if (on) {
        /* LMDB holds everything applied so far (a new leader serves once it does): the shipper's
         * new timeline starts with a snapshot of it, and records continue after it */
        s->tap->seq = s->th.applied_seq;
        s->tap->ready = s->tap->confirmed = false;
    }
    uv_mutex_unlock(&s->th.mu);
}

int st__tap_ahead(st_store_t *s, const st_batch_t *group, uint64_t seq, st_buf_t *rec)
{
    uv_mutex_lock(&s->th.mu);
    st_store_ahead_fn fn = s->tap->ahead;
    void *arg = s->tap->arg;
    if (fn) s->tap->busy++;
    uv_mutex_unlock(&s->th.mu);
    if (!fn) return ST_OK;
    st_buf_reset(rec);
    for (const st_batch_t *b = group; b; b = b->next)
        for (size_t i = 0; i < b->ops.n; i++)
            if (b->ops.v[i].resv) st__rec_put_op(rec, b, &b->ops.v[i]); /* a put: del is 0 */
    int rc = rec->len ? fn(arg, seq, rec->data, rec->len) : ST_OK;
    uv_mutex_lock(&s->th.mu);
    s->tap->busy--;
    uv_mutex_unlock(&s->th.mu);
    return rc;
}

void st_store_tap(st_store_t *s, st_store_tap_fn fn, void *arg)
{
    uv_mutex_lock(&s->th.mu);
    s->tap->fn = fn;
    s->tap->ahead = NULL;
    s->tap->arg = arg;
    s->tap->ready = s->tap->confirmed = false;
    while (s->tap->busy) { /* the old tap may be running: its owner frees it after we return */
        uv_mutex_unlock(&s->th.mu);
        uv_sleep(1);
        uv_mutex_lock(&s->th.mu);
    }
    uv_mutex_unlock(&s->th.mu);
}

void st_store_tap_ahead(st_store_t *s, st_store_ahead_fn fn)
{
    uv_mutex_lock(&s->th.mu);
    s->tap->ahead = fn;
    uv_mutex_unlock(&s->th.mu);
}

void st_store_tap_ready(st_store_t *s, bool ready)
{
    uv_mutex_lock(&s->th.mu);
    s->tap->ready = ready;
    if (ready) s->tap->confirmed = true;
    uv_mutex_unlock(&s->th.mu);
}

int st_store_resv_check(st_store_t *s)
{
    uv_mutex_lock(&s->th.mu);
    bool ok = !s->tap->fn || !s->group || s->tap->confirmed; /* (store.h) */
    uv_mutex_unlock(&s->th.mu);
    return ok ? ST_OK : ST_EUNAVAIL;
}

int st_store_barrier(st_store_t *s, uint64_t *wait)
{
    uv_mutex_lock(&s->th.mu);
    bool refuse = s->tap->fn && !s->tap->ready;
    uv_mutex_unlock(&s->th.mu);
    if (refuse) return ST_EUNAVAIL;
    s->open->barrier = true;
    if (*wait < s->open->id) *wait = s->open->id;
    return ST_OK;
}

int st_store_put_resv(st_store_t *s, const void *key, size_t klen, const void *val, size_t vlen,
                      uint64_t *wait)
{
    int rc = st_store_barrier(s, wait);
    if (rc == ST_OK) rc = st_store_put(s, key, klen, val, vlen, wait);
    if (rc != ST_OK) return rc;
    st_ov_t *e = (st_ov_t *)st_map_get(&s->overlay, key, klen);
    ST_ASSERT(e && e->batch == s->open->id);
    s->open->ops.v[e->op_idx].resv = true;
    return ST_OK;
}

int st_store_copy(st_store_t *s, int fd, uint64_t *applied)
{
    uv_mutex_lock(&s->th.mu);
    *applied = s->th.applied_seq;
    uv_mutex_unlock(&s->th.mu);
    int rc = mdb_env_copyfd2(s->db.env, fd, MDB_CP_COMPACT);
    if (rc) st_error("store: copying LMDB failed: %s", mdb_strerror(rc));
    return st__mdb_err(rc);
}

/* ---- offline ---- */

#define ST__OFFLINE_TXN_BYTES (64u << 20) /* commit every so often: bounded dirty pages */

struct st_store_offline {
    MDB_env *env;
    MDB_dbi dbi;
    MDB_txn *txn;
    uint64_t txn_bytes;
    int err;
    bool grouped; /* the snapshot came from a replicated group */
};

static int st__offline_txn(st_store_offline_t *o)
{
    if (o->txn) return 0;
    return mdb_txn_begin(o->env, NULL, 0, &o->txn);
}

#define ST__REPL_PREFIX "\0repl:" /* a group's own keys (members' URLs): not restored */
#define ST__REPL_PLEN   6

/* The last record the environment holds. A snapshot from a group holds a Raft index instead of
 * a redo-log seq: it becomes the redo log's position (and the group's own keys go at the end,
 * st__offline_ungroup), so that the restored dir starts one node, which continues the log after
 * it, or seeds a new group, whose Raft log starts at 1 on every member. The Raft index wins: a
 * group seeded from a restore still carries the redo-log position it was seeded with. */
static int st__offline_position(st_store_offline_t *o, uint64_t *applied)
{
    MDB_val k = {ST__APPLIED_KLEN, (void *)st__applied_key}, v;
    MDB_val gk = {ST__GROUP_APPLIED_KLEN, (void *)st__group_applied_key};
    if (mdb_get(o->txn, o->dbi, &gk, &v) != 0 || v.mv_size != 8) {
        if (mdb_get(o->txn, o->dbi, &k, &v) == 0 && v.mv_size == 8) memcpy(applied, v.mv_data, 8);
        return 0;
    }
    memcpy(applied, v.mv_data, 8);
    o->grouped = true;
    int rc = mdb_del(o->txn, o->dbi, &gk, NULL);
    v = (MDB_val){8, applied};
    if (!rc) rc = mdb_put(o->txn, o->dbi, &k, &v, 0);
    return rc;
}

/* The old group's members' URLs (a leader records its own) mean nothing to a new one. */
static int st__offline_ungroup(st_store_offline_t *o)
{
    MDB_cursor *c;
    int rc = st__offline_txn(o);
    if (!rc) rc = mdb_cursor_open(o->txn, o->dbi, &c);
    if (rc) return rc;
    MDB_val k = {ST__REPL_PLEN, (void *)ST__REPL_PREFIX}, v;
    int crc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
    while (!rc && crc == 0 && k.mv_size >= ST__REPL_PLEN &&
           memcmp(k.mv_data, ST__REPL_PREFIX, ST__REPL_PLEN) == 0) {
        rc = mdb_cursor_del(c, 0);
        if (!rc) crc = mdb_cursor_get(c, &k, &v, MDB_NEXT); /* after a delete: the next one */
    }
    mdb_cursor_close(c);
    return rc;
}

int st_store_offline_open(st_store_offline_t **out, const char *dir, uint64_t map_size,
                          uint64_t *applied)
{
    st_store_offline_t *o = st_calloc(1, sizeof *o);
    int rc = mdb_env_create(&o->env);
    if (!rc) rc = mdb_env_set_mapsize(o->env, map_size);
    if (!rc) rc = mdb_env_open(o->env, dir, MDB_NOTLS | MDB_NOSYNC, 0644);
    if (!rc) rc = st__offline_txn(o);
    if (!rc) rc = mdb_dbi_open(o->txn, NULL, 0, &o->dbi);
    *applied = 0;
    if (!rc) rc = st__offline_position(o, applied);
    if (rc) {
        st_error("store: opening %s for a restore failed: %s", dir, mdb_strerror(rc));
        if (o->txn) mdb_txn_abort(o->txn);
        mdb_env_close(o->env);
        free(o);
        return st__mdb_err(rc);
    }
    *out = o;
    return ST_OK;
}

static int st__offline_ops(st_store_offline_t *o, const char *p, size_t len)
{
    const char *end = p + len;
    st_recop_t op;
    int rc;
    while ((rc = st__rec_next(&p, end, &op)) == 1) {
        MDB_val k = {op.klen, (void *)op.key}, v = {op.vlen, (void *)op.val};
        int mrc = op.kind ? mdb_del(o->txn, o->dbi, &k, NULL) : mdb_put(o->txn, o->dbi, &k, &v, 0);
        if (mrc && mrc != MDB_NOTFOUND) return st__mdb_err(mrc);
    }
    return rc;
}

int st_store_offline_apply(st_store_offline_t *o, uint64_t seq, const void *rec, size_t len)
{
    if (o->err) return o->err;
    int rc = st__mdb_err(st__offline_txn(o));
    if (!rc) rc = st__offline_ops(o, rec, len);
    if (!rc && seq) {
        MDB_val k = {ST__APPLIED_KLEN, (void *)st__applied_key}, v = {8, &seq};
        rc = st__mdb_err(mdb_put(o->txn, o->dbi, &k, &v, 0));
    }
    o->txn_bytes += len;
    if (!rc && o->txn_bytes >= ST__OFFLINE_TXN_BYTES) {
        rc = st__mdb_err(mdb_txn_commit(o->txn));
        o->txn = NULL;
        o->txn_bytes = 0;
    }
    if (rc) o->err = rc;
    return rc;
}

int st_store_offline_close(st_store_offline_t *o)
{
    int rc = o->err;
    if (!rc && o->grouped) rc = st__mdb_err(st__offline_ungroup(o));
    if (o->txn) {
        if (!rc)
            rc = st__mdb_err(mdb_txn_commit(o->txn));
        else
            mdb_txn_abort(o->txn);
    }
    if (!rc && mdb_env_sync(o->env, 1) != 0) rc = ST_EIO;
    mdb_env_close(o->env);
    free(o);
    return rc;
}

/* ---- reservations ---- */

#define ST__RESV_PREFIX "\0resv/"
#define ST__RESV_PLEN   6

static size_t st__resv_key(char *k, const char *name)
{
    size_t n = strlen(name);
    memcpy(k, ST__RESV_PREFIX, ST__RESV_PLEN);
    memcpy(k + ST__RESV_PLEN, name, n);
    return ST__RESV_PLEN + n;
}

int st_store_resv_load(st_store_t *s, const char *name, st_store_resv_t *r)
{
    char k[ST_KEY_MAX];
    size_t kl = st__resv_key(k, name);
    const void *v;
    size_t vlen;
    uint64_t wait = 0;
    int rc = st_store_get(s, k, kl, &v, &vlen, &wait);
    memset(r, 0, sizeof *r);
    if (rc == ST_ENOTFOUND) return ST_OK;
    if (rc != ST_OK) return rc;
    if (vlen != sizeof *r) return ST_EINTERNAL;
    memcpy(r, v, sizeof *r);
    return ST_OK;
}

int st_store_resv_cover(st_store_t *s, const char *name, st_store_resv_t *r, int64_t value,
                        int64_t chunk, uint64_t *wait)
{
    if (value <= r->reserved) return st_store_resv_check(s);
    char k[ST_KEY_MAX];
    size_t kl = st__resv_key(k, name);
    st_store_resv_t n = *r;
    if (__builtin_add_overflow(value, chunk, &n.reserved)) n.reserved = INT64_MAX;
    int rc = st_store_put_resv(s, k, kl, &n, sizeof n, wait);
    if (rc != ST_OK) return rc;
    *r = n;
    return ST_OK;
}

static int st__resv_collect(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_buf_t *b = arg;
    uint32_t kl = (uint32_t)klen;
    if (vlen != sizeof(st_store_resv_t)) return 0;
    st_buf_append(b, &kl, 4);
    st_buf_append(b, key, klen);
    st_buf_append(b, val, vlen);
    return 0;
}

int st_store_resv_resume(st_store_t *s, size_t *n, uint64_t *wait)
{
    st_buf_t b = {0};
    int rc = st_store_scan(s, ST__RESV_PREFIX, ST__RESV_PLEN, st__resv_collect, &b, wait);
    *n = 0;
    for (size_t off = 0; rc == ST_OK && off < b.len; (*n)++) {
        uint32_t kl;
        st_store_resv_t r;
        memcpy(&kl, b.data + off, 4);
        memcpy(&r, b.data + off + 4 + kl, sizeof r);
        r.floor = r.reserved;
        rc = st_store_put(s, b.data + off + 4, kl, &r, sizeof r, wait);
        off += 4 + kl + sizeof r;
    }
    st_buf_free(&b);
    return rc;
}
