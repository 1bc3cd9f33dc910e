/* SPDX-License-Identifier: MIT */
/* store internals shared by its files: store.c (the loop-side API), commit.c (the threads),
 * ovidx.c (the overlay's order), space.c (quota and disk), group.c (group mode), tap.c (backup). */
#ifndef STRATA_STORE_INTERNAL_H
#define STRATA_STORE_INTERNAL_H

#include "strata/idle.h"
#include "strata/metrics.h"
#include "strata/store.h"
#include "strata/store_group.h"
#include "strata/store_tap.h"
#include "strata/wake.h"
#include "wal.h"

#include <lmdb.h>
#include <string.h>

typedef struct {
    size_t koff, klen, voff, vlen;
    bool del;
    bool note; /* group mode: a stream frame carried by the entry, never written to LMDB */
    bool resv; /* st_store_put_resv: shipped to the backup ahead of the group (tap.c) */
} st_op_t;

/* A batch goes open (loop) -> queued -> logged in the WAL, acknowledged -> applied to LMDB ->
 * back to the loop, which drops its overlay entries and recycles it. */
typedef struct st_batch {
    struct st_batch *next;
    st_list_t link; /* in the loop's list of submitted batches not yet returned */
    uint64_t id;
    st_buf_t data; /* keys and values of ops */
    ST_VEC(st_op_t) ops;
    size_t writes;  /* staged writes, including ones coalesced into an earlier op */
    uint64_t bytes; /* what its ops are estimated to take in LMDB (counted against the quota) */
    /* set by the threads */
    bool foreign;    /* group mode: applied from an entry this process did not propose */
    uint64_t seq;    /* WAL record (shared by a group); group mode: the Raft index */
    int rc;          /* non-zero: never became durable */
    bool barrier;    /* st_store_barrier: the tap must have taken it before it is acknowledged */
    bool ack_late;   /* group mode: acknowledged once back from the apply thread (behind a barrier
                      * the tap must ship first) rather than when its entry applies */
    bool tap_failed; /* group mode: its barrier did not reach the backup in time (tap.c) */
    uint64_t proposed_ns; /* group mode: st_mono_ns() when its entry was proposed */
    /* what a lane runs once the batch is durable (st_store_express): linked by the loop while
     * the batch is open, read-only after */
    st_store_express_t *express;
    /* on the threads' stack of chains for the loop (st__to_loop): the chain pushed before this
     * one, and this chain's last batch */
    struct st_batch *dnext, *dlast;
} st_batch_t;

/* A staged write not yet in LMDB; newest value for its key. Found by key in the overlay map and
 * in key order through the skip list (ovidx.c) whose tower it carries. */
typedef struct st_ov {
    st_map_node_t node;
    struct st_ov **fwd; /* tower: lvl forward links, allocated with the entry */
    struct st_ov *prev; /* level 0 backwards */
    uint8_t lvl;
    uint64_t batch;
    size_t op_idx; /* op in the open batch that carries this value, for in-place coalescing */
    bool del;
    bool restoring, restored; /* during a rollback only */
    char *val;
    size_t vlen, vcap;
    char key[];
} st_ov_t;

#define ST__OV_LEVELS 12 /* 4^12: plenty for any overlay the quota allows */
typedef struct {
    st_ov_t *head[ST__OV_LEVELS];
    st_ov_t *tail;
    st_ov_t *finger; /* the last entry inserted: keys often come in order (a flush's deletes) */
    /* the last entry inserted of each first key byte (or one of that byte before it, or NULL):
     * a key space written in order between other writes (Idempotency-Key answers, by time)
     * finds its place at once */
    st_ov_t *by_first[256];
    uint64_t rng;
} st_ovidx_t;

/* LMDB (store.c opens it): the loop reads through rtxn, the apply thread (commit.c) writes. */
typedef struct {
    MDB_env *env;
    MDB_dbi dbi;
    MDB_txn *rtxn;
    bool rtxn_held; /* st_store_read_hold: rtxn stays live across gets */
    size_t psize;   /* LMDB page size */
} st__lmdb_t;

/* Quota and disk room (space.c): what st_store_health and st_store_writable answer from. Loop
 * only, but for quota and reserve, fixed at open (the threads read reserve too). */
typedef struct {
    uint64_t quota;   /* configured capacity; LMDB's map is larger to absorb the apply lag */
    uint64_t reserve; /* disk space kept free beyond what acknowledged writes will need */
    char *watch_dir;  /* another directory strata writes to (the local cold tier), or NULL */
    uint64_t disk_checked_ms, disk_avail, watch_avail;
    bool watch_same_fs;
    bool full_latched, disk_latched; /* full until clearly below the mark again (hysteresis) */
    char why[256];                   /* st_store_refusal's answer */
} st__space_t;

/* A failed group as the loop sees it (commit.c rolls back, store.c paces): loop only. */
typedef struct {
    uint64_t first; /* the first batch to roll back (0: none) and why it failed */
    int err;
    bool stopped; /* fail-stopped: the loop's copy of th.log_err != 0 */
    uint64_t next_submit_ms, logged_ms, unlogged;
} st__fail_t;

/* The loop's handles (store.c); the struct is freed once all four have closed. */
typedef struct {
    st_wake_t done;   /* batches are back from the threads (commit.c's st__store_on_done) */
    uv_check_t check; /* seals the open batch once per iteration */
    uv_idle_t idle;   /* staged work: the loop's poll returns at once */
    uv_timer_t pace;  /* fail-stopped: batches (all doomed) go at most every ST__FAIL_PACE_MS */
    int closed;
} st__handles_t;

/* Figures handed from the threads to the loop's metrics (st__take_figures), then zeroed. */
typedef struct {
    uint64_t sync_ns_sum, sync_count, group_ops, group_writes, apply_ns_sum, apply_count;
    uint64_t apply_failures;           /* LMDB transactions that failed (retried) */
    uint64_t wal_switches;             /* times appends moved to the other half */
    uint64_t ckpt_waits, ckpt_wait_ns; /* the sync thread waited for LMDB before logging */
    uint64_t idle_applies;             /* groups applied at SCHED_IDLE (yield.c) */
} st__figures_t;

/* The commit threads (commit.c) and the state they share with the loop. Shared with the
 * threads, under mu: every field but the thread handles (which only the loop touches) is read
 * and written with mu held, after st_store_open's recovery. tap.c's shared fields use mu too. */
#define ST__LANES 2 /* sync lanes: redo-log writes in flight at once (sync.c) */
typedef struct {
    uv_thread_t sync_thread[ST__LANES], apply_thread;
    uv_mutex_t mu;
    uv_cond_t cv_sync, cv_apply, cv_applied, cv_hurry;
    uv_cond_t cv_turn; /* a lane reserved or finished (sync.c's ticket order) */
    int lanes;         /* sync lanes running: ST__LANES with a direct log, else 1 */
    int inflight;      /* groups the lanes hold, taken and not yet done */
    int sync_waiting;  /* lanes waiting on cv_sync: the loop signals only if one does */
    /* The last group taken, reserved, whose result is final (`done`), and handed on to the
     * loop and the apply thread (`published`, which a change of the log's shape waits for:
     * logged_seq counts only what is handed on); each in ticket order. */
    uint64_t ticket, reserved, done, published;
    uint64_t next_seq;           /* the log seq the next record gets */
    int pipe_err;                /* a group failed: later ones fail, until all are back */
    st_batch_t *f_head, *f_tail; /* failed groups, handed to the loop together */
    st_batch_t *q_head, *q_tail; /* sealed, waiting for the WAL */
    st_batch_t *a_head, *a_tail; /* logged, waiting for LMDB */
    /* applied or failed, waiting for the loop: a stack of chains, pushed with mu held and
     * taken whole by the loop without it (st__to_loop, st__store_on_done: __atomic only) */
    st_batch_t *d_top;
    uint64_t acked_id; /* highest batch id durable in the WAL */
    uint64_t logged_seq, applied_seq;
    uint64_t used_bytes; /* LMDB pages in use, measured after each apply */
    uint64_t lmdb_free;  /* bytes of LMDB's free pages: reusable without growing the file */
    /* estimated bytes of sealed batches not yet in LMDB (or failed): __atomic only, the loop
     * reads it for every write's health check without mu */
    uint64_t pending;
    bool halted; /* after a failed group, until the loop has rolled back */
    int log_err; /* sticky: the redo log failed; nothing is logged until a restart */
    char log_why[160];
    int apply_err;           /* the last LMDB apply failed with this (ST_EFULL, ST_EIO); 0: ok */
    bool lmdb_sync_failed;   /* a forced LMDB sync failed: the log is never reset again */
    uint64_t apply_stall_ns; /* when applying started to fail */
    bool stop, stop_apply;
    int hurry;         /* threads waiting for LMDB to catch up: the apply thread does not pause */
    bool apply_lazy;   /* st_store_apply_lazy: the apply thread's pause is the long one */
    bool background;   /* st_store_apply_background: its LMDB work may run at SCHED_IDLE */
    bool apply_idle;   /* the apply thread is at SCHED_IDLE now (yield.c) */
    st_idle_t idle;    /* the apply thread's own policy, for st__hurry to lift it (yield.c) */
    uint64_t ckpt_seq; /* the last seq the log's older half holds */
    bool ckpt_done;    /* LMDB has synced past ckpt_seq: the older half may be written over */
    st__figures_t fig;
    /* Copies of the fields above the loop reads without mu (st__publish_threads writes them with mu
     * held; __atomic only): a descheduled thread holding mu on this 2-core machine stalled
     * the loop for milliseconds (bench/RESULTS.md, session 25). */
    struct {
        uint64_t acked_id, used_bytes, lmdb_free, apply_stall_ns;
        int log_err, apply_err;
        bool halted;
    } pub;
} st__threads_t;

/* The commit path's metrics: store.c registers them, commit.c and group.c observe. */
typedef struct {
    st_metric_t *batch_ops, *batch_writes, *commit_s, *apply_s, *commits, *failed;
    st_metric_t *apply_failed, *wal_switches, *ckpt_waits, *ckpt_wait_s, *idle_applies;
    st_metric_t *seal_defers;
} st__store_metrics_t;

/* Owned by tap.c (the backup's tap; allocated at open) and group.c (group mode). */
/* claims.c: one module's key prefix */
#define ST__CLAIM_MAX ST_CLAIM_MAX
typedef struct {
    uint8_t prefix[ST__CLAIM_MAX];
    size_t len;
    const char *who; /* static: the module's name */
} st__claim_t;
void st__claims_check(const st_store_t *s, const void *key, size_t klen);
void st__claims_free(st_store_t *s);

typedef struct st__tap st__tap_t;
typedef struct st__group st__group_t;

/* What the store is made of, by owner. Replication and backup hang off the commit path through
 * two pointers (group, tap) and the hooks other modules set; the rest is the single node's. */
struct st_store {
    uv_loop_t *loop;
    char *dir;
    st__lmdb_t db;         /* store.c opens it */
    st_wal_t *wal;         /* the redo log: the sync thread's once the store is open (commit.c) */
    st__space_t space;     /* space.c */
    st__handles_t uv;      /* store.c */
    st__threads_t th;      /* commit.c: shared with the threads, under th.mu */
    st__store_metrics_t m; /* store.c registers them */

    /* staging, loop only (store.c stages, commit.c takes batches back; ovidx.c orders) */
    st_map_t overlay;
    st_ovidx_t ovidx;      /* the overlay in key order */
    st_batch_t *open;      /* staging */
    st_batch_t *free_list; /* recycled batches, at most ST__FREE_MAX (commit.c) */
    size_t free_n;
    st_list_t inflight; /* st_batch_t by link: submitted, not yet back; ascending ids */
    uint64_t open_id, durable_id;
    unsigned back_behind; /* loop turns in a row that put applied batches back (commit.c) */
    st_batch_t *back_head, *back_tail; /* those put back: taken first next time (loop only) */
    unsigned submit_defers;            /* seals in a row put off because mu was busy (commit.c) */
    bool figures_owed; /* the threads' figures were not taken: mu was busy (commit.c) */
    size_t submitted;  /* sealed batches not yet returned to the loop */
    st__fail_t fail;   /* commit.c */
    st_buf_t scratch;  /* st_store_get's copy of an LMDB value */

    /* hooks other modules set (loop only) */
    st_list_t listeners;      /* st_store_listener_t by link */
    st_observers_t observers; /* of modules that are functions over the store (counters) */
    st_store_note_fn note_fn; /* group mode: a foreign entry's stream frames (group.c) */
    void *note_arg;

    st__tap_t *tap;     /* tap.c: the backup's hooks on the commit path */
    st__group_t *group; /* group.c: group mode; NULL on a single node */

    ST_VEC(st__claim_t) claims; /* claims.c: who owns which key prefixes */
    /* st_store_writes_of: writes staged per first key byte, and foreign batches applied (loop) */
    uint64_t writes_by_first[256], foreign_back;
    bool claims_sealed;
};

/* ---- commit.c: the commit threads, recovery, and the loop's side of batches coming back ---- */

/* The key LMDB keeps its applied position under: the WAL seq alone, the Raft index in a group. */
extern const char st__applied_key[], st__group_applied_key[];
#define ST__APPLIED_KLEN       12
#define ST__GROUP_APPLIED_KLEN 13

/* One op of an encoded group — the redo log's record, a Raft entry's body, a backup segment's
 * record: {u8 kind, u32 klen, u32 vlen, key, val}*. kind is 0 put, 1 delete (entries add notes).
 * Returns 1 with *op pointing into the record, 0 at its end, ST_EIO if it is malformed (cut
 * short, or an empty key). */
typedef struct {
    uint8_t kind;
    uint32_t klen, vlen;
    const char *key, *val;
} st_recop_t;

static inline int st__rec_next(const char **p, const char *end, st_recop_t *op)
{
    if (*p >= end) return 0;
    if (end - *p < 9) return ST_EIO;
    memcpy(&op->kind, *p, 1);
    memcpy(&op->klen, *p + 1, 4);
    memcpy(&op->vlen, *p + 5, 4);
    *p += 9;
    if ((uint64_t)(end - *p) < (uint64_t)op->klen + op->vlen || op->klen == 0) return ST_EIO;
    op->key = *p;
    op->val = *p + op->klen;
    *p += op->klen + op->vlen;
    return 1;
}

int st__store_recover(st_store_t *s);
void st__store_start_threads(st_store_t *s);
/* Whether the stop was clean: LMDB holds everything, synced, and the log was reset. */
bool st__store_stop_threads(st_store_t *s);
void st__store_on_done(st_wake_t *w);
/* false: put off, mu was busy (the batch stays open, the loop's next iteration seals it) */
bool st__store_submit(st_store_t *s);
st_batch_t *st__batch_new(st_store_t *s);
void st__batch_recycle(st_store_t *s, st_batch_t *b);
void st__batch_free(st_batch_t *b);
void st__batch_back(st_store_t *s, st_batch_t *b);
void st__rollback(st_store_t *s);
/* With th.mu held: a thread starts (+1) or stops (-1) waiting for LMDB to catch up; while any
 * waits, the apply thread does not pause between transactions. */
void st__hurry(st_store_t *s, int by);
/* yield.c: the apply thread's LMDB work at SCHED_IDLE while a background job feeds it.
 * _yield: mu held, before a group (true: the group may run at SCHED_IDLE); _go_idle: mu NOT
 * held, after _yield said true, before the group; _unyield: mu NOT held, after it (back at the
 * normal policy before it takes mu again); _lift: mu held, someone waits. */
bool st__apply_yield(st_store_t *s);
void st__apply_go_idle(st_store_t *s);
void st__apply_unyield(st_store_t *s);
void st__apply_lift(st_store_t *s);
int st__mdb_err(int rc);
/* A batch's ops (the whole chain from b with chain) as a record the redo log, the tap and a
 * restore share: {u8 del, u32 klen, u32 vlen, key, val}*; stream notes left out. */
void st__rec_encode(st_buf_t *out, const st_batch_t *b, bool chain);
/* commit.c's helpers for the sync lanes (sync.c); the _locked ones with mu held */
void st__measure(st_store_t *s, uint64_t *used, uint64_t *free_bytes);
uint64_t st__group_bytes(const st_batch_t *group);
int st__apply_class(st_store_t *s, int rc, uint64_t bytes);
void st__fail_stop(st_store_t *s, const char *what); /* mu held */
int st__apply_group(st_store_t *s, st_batch_t *group, uint64_t seq);
/* Appends the chain first..last to the list head/tail. */
void st__chain(st_batch_t **head, st_batch_t **tail, st_batch_t *first, st_batch_t *last);
void st__to_loop(st_store_t *s, st_batch_t *head, st_batch_t *tail); /* mu held */
void st__publish_threads(st_store_t *s);                             /* mu held */
st_batch_t *st__store_take_done(st_store_t *s); /* loop: the chains back, oldest first */
/* The pending bytes (th.pending) moved by the threads and the loop. */
static inline void st__pending_add(st_store_t *s, uint64_t n)
{
    __atomic_add_fetch(&s->th.pending, n, __ATOMIC_RELAXED);
}
static inline void st__pending_sub(st_store_t *s, uint64_t n)
{
    __atomic_sub_fetch(&s->th.pending, n, __ATOMIC_RELAXED);
}
static inline uint64_t st__pending_bytes(const st_store_t *s)
{
    return __atomic_load_n(&s->th.pending, __ATOMIC_RELAXED);
}
/* sync.c: the lanes start with the commit threads and stop before the apply thread */
void st__sync_start(st_store_t *s);
void st__sync_join(st_store_t *s);
/* Appends one op of b in that encoding. */
void st__rec_put_op(st_buf_t *out, const st_batch_t *b, const st_op_t *op);

/* ---- store.c: staging ---- */

/* the idle handle's callback (staged work makes the loop's poll return at once) */
void st__store_on_idle(uv_idle_t *h);
uint64_t st__op_cost(const st_store_t *s, size_t klen, size_t vlen, bool del);
void st__batch_add(st_store_t *s, st_batch_t *b, const void *key, size_t klen, const void *val,
                   size_t vlen, bool del);
void st__ov_set(st_store_t *s, st_batch_t *b, size_t op_idx);
/* tell every listener (a callback may unlisten itself) */
void st__listeners_durable(st_store_t *s, uint64_t id);
void st__listeners_failed(st_store_t *s, uint64_t first_id, int err);
void st__ov_free(st_ov_t *e);
void st__drop_overlay(st_store_t *s);
/* LMDB's key order: bytes, then length. */
int st__key_cmp(const void *a, size_t an, const void *b, size_t bn);

/* ---- ovidx.c: overlay entries are created and dropped here (map and order together) ---- */

st_ov_t *st__ov_new(st_store_t *s, const void *key, size_t klen);
void st__ov_drop(st_store_t *s, st_ov_t *e);
/* First entry >= key; last entry < key (key NULL: the last entry). NULL if none. */
st_ov_t *st__ov_ge(const st_store_t *s, const void *key, size_t klen);
st_ov_t *st__ov_lt(const st_store_t *s, const void *key, size_t klen);
void st__ov_clear(st_store_t *s);

/* ---- space.c: quota and disk room ---- */

void st__space_init(st__space_t *sp, const st_store_opts_t *opts);
void st__space_free(st__space_t *sp);

/* ---- group.c: group mode (s->group set); none of these is called on a single node ---- */

void st__group_submit(st_store_t *s);
/* The Raft entries applied on the loop go to the apply thread (called at the end of each
 * iteration): mu is only tried unless `wait`, or after many tries in a row. */
void st__group_handoff(st_store_t *s, bool wait);
/* With the store's handles: closes the group's own (its close callback counts it). */
void st__group_close(st_store_t *s, uv_close_cb cb);
bool st__group_hold(st_store_t *s);
/* A write staged on a member that does not serve: ST_ENOLEADER (else ST_OK). */
int st__group_refuse(st_store_t *s);
/* A batch is back from the apply thread, applied: a foreign one's stream frames go to the note
 * handler, the readers' horizon moves, an ack_late one (the tap has taken it) is acknowledged. */
void st__group_back(st_store_t *s, const st_batch_t *b);
/* With the store (the threads have stopped): frees the group state and its proposals. */
void st__group_free(st_store_t *s);

/* ---- tap.c: the backup's hooks on the commit path ---- */

st__tap_t *st__tap_new(void);
void st__tap_free(st__tap_t *t);
/* The sync thread, once a group is logged as seq (0: committed straight to LMDB): the tap is
 * told its record. */
void st__tap_group(st_store_t *s, const st_batch_t *group, uint64_t seq, const st_buf_t *rec);
/* Group mode, the apply thread, once group's entries are in LMDB: taps each under its Raft
 * index (a leader only). */
void st__tap_entries(st_store_t *s, st_batch_t *group);
/* Before a group holding a barrier batch is logged as seq: its reservation ops (st_op_t.resv)
 * go to the backup first. ST_EUNAVAIL when the backup did not take them within its bound: the
 * group then fails unlogged. Sync thread; rec is scratch. */
int st__tap_ahead(st_store_t *s, const st_batch_t *group, uint64_t seq, st_buf_t *rec);
/* Group mode, loop thread: does the tap follow this member's entries (st_store_tap_lead)? Only
 * the loop sets it, so it reads it without th.mu. */
bool st__tap_leading(const st_store_t *s);

#endif
