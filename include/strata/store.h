/* SPDX-License-Identifier: MIT */
/*
 * store: the durable hot store. An LMDB environment plus group commit: the loop stages puts and
 * deletes into the open batch; once per loop iteration the batch goes to the commit thread (one
 * write transaction, one fsync for every request staged meanwhile); the loop is told when it is
 * durable. Staged values are visible to later reads on the loop (read-your-writes) through an
 * overlay, and every read and write reports the batch id that must be durable before anything
 * derived from it may leave the process — that is how the durability invariant is kept.
 *
 * Only this module includes lmdb.h. All functions are loop-thread only.
 */
#ifndef STRATA_STORE_H
#define STRATA_STORE_H

#include "strata/core.h"

#include <uv.h>

typedef struct st_store st_store_t;

/* Key spaces: the first byte of every key. */
enum {
    ST_KS_COUNTER = 'c',  /* name -> st counter record */
    ST_KS_MEMBER = 'm',   /* name 0 member -> "" (distinct counter membership) */
    ST_KS_SEQUENCE = 's', /* name -> u64 last */
    ST_KS_IDEM = 'i',     /* sha256(scope) -> idempotent response (http/idempotency.c) */
    ST_KS_IDEM_EXP = 'x', /* be64(created) sha256(scope) -> "" (their expiry index) */
};
#define ST_KEY_MAX 511 /* LMDB's default maximum key size */

/* Told about batches as they settle; embed in your own struct and register with _listen. */
typedef struct st_store_listener {
    struct st_store_listener *next;
    /* Batch `id` (and all before it) is durable. */
    void (*on_durable)(struct st_store_listener *l, uint64_t id);
    /* Batches >= first_id were rolled back with err (ST_EFULL, ST_EIO): everything staged in
     * them is gone and anything waiting on them must fail. In-memory views must resync. */
    void (*on_failed)(struct st_store_listener *l, uint64_t first_id, int err);
} st_store_listener_t;

typedef struct {
    const char *dir;       /* created if missing */
    uint64_t map_size;     /* bytes: the quota writes are admitted against */
    uint64_t wal_size;     /* redo log bytes; 0 = 64 MiB */
    uint64_t max_write;    /* largest single request's writes (sizes LMDB headroom); 0 = 8 MiB */
    const char *watch_dir; /* optional: another directory whose disk must keep room (cold tier) */
} st_store_opts_t;

int st_store_open(st_store_t **out, uv_loop_t *loop, const st_store_opts_t *opts);
/* Stops the commit thread after the in-flight batch; staged-but-unsubmitted writes are dropped,
 * so callers drain first (st_store_idle). Closes its uv handles; run the loop once after. */
void st_store_close(st_store_t *s);
void st_store_listen(st_store_t *s, st_store_listener_t *l);
/* Removes a listener (before freeing it: batches may still settle while the loop runs). */
void st_store_unlisten(st_store_t *s, st_store_listener_t *l);

/*
 * Reads see every staged write. *val is borrowed: valid until the next st_store_* call.
 * *wait is raised to the batch that must be durable before the value may be shown (it is left
 * alone when the value is already durable). ST_ENOTFOUND when absent.
 */
int st_store_get(st_store_t *s, const void *key, size_t klen, const void **val, size_t *vlen,
                 uint64_t *wait);
/* Between hold and release, gets share one LMDB read snapshot instead of opening one each (for
 * a request that reads many keys). Values returned are still valid only until the next call. */
void st_store_read_hold(st_store_t *s);
void st_store_read_release(st_store_t *s);

/* Stage a write into the open batch; *wait is raised to that batch. Copies key and value. */
int st_store_put(st_store_t *s, const void *key, size_t klen, const void *val, size_t vlen,
                 uint64_t *wait);
int st_store_del(st_store_t *s, const void *key, size_t klen, uint64_t *wait);

/* Visit durable keys with the given prefix in key order, merged with staged writes; stop when
 * fn returns non-zero (that value is returned). Pointers are valid during the call only. */
typedef int (*st_store_scan_fn)(void *arg, const void *key, size_t klen, const void *val,
                                size_t vlen);
int st_store_scan(st_store_t *s, const void *prefix, size_t plen, st_store_scan_fn fn, void *arg,
                  uint64_t *wait);

/* The same, starting at the first key >= from (NULL: the prefix itself). */
int st_store_scan_from(st_store_t *s, const void *prefix, size_t plen, const void *from,
                       size_t flen, st_store_scan_fn fn, void *arg, uint64_t *wait);

/* Keys under the prefix within [lo, hi) (NULL bound: open), ascending or descending. */
int st_store_range(st_store_t *s, const void *prefix, size_t plen, const void *lo, size_t lolen,
                   const void *hi, size_t hilen, bool reverse, st_store_scan_fn fn, void *arg,
                   uint64_t *wait);
/* How many keys (durable and staged) have the prefix. */
int st_store_count(st_store_t *s, const void *prefix, size_t plen, int64_t *n, uint64_t *wait);

uint64_t st_store_durable_id(const st_store_t *s);
/* True when nothing is staged and no commit is in flight — or everything is durable and only
 * LMDB is behind, unable to apply it now (the redo log keeps it for the next start), or the log
 * has failed (nothing staged can become durable any more). */
bool st_store_idle(const st_store_t *s);
/* Bytes counted against the quota — in LMDB, plus acknowledged or staged and not applied yet —
 * and the capacity writes are admitted against: --map-size, or less when the disk has less room. */
void st_store_usage(st_store_t *s, uint64_t *used, uint64_t *size);

/* Why the store cannot take writes (SPEC §7: /healthz reasons). */
enum {
    ST_STORE_LOG_FAILED = 1,     /* the redo log failed: writes refused until a restart */
    ST_STORE_FULL = 2,           /* used reached --map-size */
    ST_STORE_DISK_FULL = 4,      /* the data directory's disk has no room left */
    ST_STORE_APPLY_STALLED = 8,  /* acknowledged writes cannot be applied to LMDB (retrying) */
    ST_STORE_COLD_DISK_FULL = 16 /* the watched (cold tier) directory's disk has no room left */
};
typedef struct {
    unsigned flags; /* ST_STORE_* */
    int refuse;     /* what st_store_writable answers */
    uint64_t used, capacity, quota;
    uint64_t backlog;    /* estimated bytes acknowledged or staged, not yet in LMDB */
    uint64_t disk_free;  /* bytes free on the data directory's disk (for unprivileged users) */
    uint64_t stalled_ms; /* how long applying has been failing */
} st_store_health_t;
void st_store_health(st_store_t *s, st_store_health_t *h);
/* Stable short name of one ST_STORE_* flag ("redo_log_failed", "store_full", ...). */
const char *st_store_reason(unsigned flag);

/* ST_OK, or why a new write must be refused up front (so that nothing is acknowledged that
 * cannot be kept): ST_EFULL (507) when the quota or a disk is full or applying is stuck on a full
 * disk; ST_EIO (503) when the redo log failed or applying fails otherwise. Reads keep working. */
int st_store_writable(st_store_t *s);
/* A sentence saying why writes are refused (for the error message); borrowed until the next
 * call. */
const char *st_store_refusal(st_store_t *s);

/* ---- replicated groups (SPEC §8): the repl module drives these; loop only unless noted ----
 * In a group a sealed batch is proposed as one Raft entry instead of going to the redo log; it
 * is durable once committed, and reaches LMDB when its entry is applied — on every member, in
 * entry order, through the same apply thread. The Raft index of the last entry in LMDB is kept
 * beside the data, so an entry applied twice (a replay after a restart) changes nothing. */
typedef struct st_store_group {
    /* Proposes a sealed batch (payload borrowed for the call). Non-zero: it cannot be proposed
     * (not the leader) and the batch fails now. Otherwise the batch becomes durable when its
     * entry is applied (st_store_group_apply), or fails by st_store_group_failed / _abandon. */
    int (*propose)(struct st_store_group *g, uint64_t batch_id, const char *payload, size_t len);
} st_store_group_t;

/* Switches the store to group mode, in standby (every write refused with ST_ENOLEADER). */
void st_store_group_join(st_store_t *s, st_store_group_t *g);
bool st_store_grouped(const st_store_t *s);
/* Standby off: this member leads and may stage writes; on: it follows. */
void st_store_set_standby(st_store_t *s, bool standby);
/* Is the store refusing writes as a group member that is not the serving leader? */
bool st_store_standby(const st_store_t *s);
void st_store_group_failed(st_store_t *s, uint64_t batch_id, int err);
/* This member stopped leading: every proposal not applied yet fails now (its entry may still be
 * committed by the next leader; it then arrives through st_store_group_apply like anyone's). */
void st_store_group_abandon(st_store_t *s, int err);
/* The FSM apply of the committed entry at `index` (payload borrowed). Entries at or below the
 * index LMDB already has are skipped. Cheap: the entry is queued for the apply thread. */
int st_store_group_apply(st_store_t *s, uint64_t index, const char *payload, size_t len);
/* Highest Raft index given to st_store_group_apply (queued or in LMDB). */
uint64_t st_store_group_queued(const st_store_t *s);
/* Highest Raft index whose batch came back from the apply thread to the loop: readers see it
 * and, on a follower, its changes have gone to the streams (<= st_store_group_queued). */
uint64_t st_store_group_shown(const st_store_t *s);
/* Any thread: waits until LMDB holds every entry up to `index` and forces it to disk (before
 * Raft may drop those entries from its log). */
int st_store_group_sync(st_store_t *s, uint64_t index);
/* In-memory views derived from the store must be rebuilt from it (listeners' on_failed is
 * called with a batch id past every batch so far): a follower became the leader. */
void st_store_resync(st_store_t *s);
/* On a follower, whose in-memory views do not follow what it applies: rebuild them if entries
 * were applied since (before answering from them, e.g. a stream's seat-map snapshot). */
void st_store_refresh_views(st_store_t *s);
/* Stream frames ride in the entry of the batch whose change they announce ("notes"): the leader
 * stages them with st_store_note (a no-op outside a group), and every other member hands them
 * to fn once the entry is in its LMDB. kind and data are the caller's own encoding. */
/* Snapshot install. Any thread: writes a consistent, compacted copy of the store to fd. */
int st_store_copy_fd(st_store_t *s, int fd);
/* A worker thread, while this member applies nothing: replaces the store's contents with the
 * copy at path (an LMDB file written by st_store_copy_fd) and gives the Raft index it holds.
 * Then, on the loop, st_store_group_loaded(s, applied). */
int st_store_group_load(st_store_t *s, const char *path, uint64_t *applied);
void st_store_group_loaded(st_store_t *s, uint64_t applied);

/* Observers of the modules that are plain functions over the store and keep no state of their
 * own (counters): they live with the store. The module owns the list's meaning. */
st_observers_t *st_store_observers(st_store_t *s);

typedef void (*st_store_note_fn)(void *arg, uint8_t kind, const char *data, size_t len);
void st_store_on_note(st_store_t *s, st_store_note_fn fn, void *arg);
int st_store_note(st_store_t *s, uint8_t kind, const void *data, size_t len, uint64_t *wait);
/* Group mode, the serving leader: raises *wait to the open batch, which becomes an entry of its
 * own even if nothing else is staged in it (an empty note). An answer held for it leaves only
 * once an entry proposed after it was built is committed by a majority — the leader has proved
 * it still leads — and becomes 503 no_leader if this member is deposed first (a ReadIndex
 * through the log). A no-op on a single node; ST_ENOLEADER on a standby member. */
int st_store_fence(st_store_t *s, uint64_t *wait);
/* Group mode: on while nobody waits for this member's applies (it follows, no read index round
 * waits, no stream is open on it). LMDB then takes entries in larger transactions, pausing up
 * to 25 ms between them instead of 5: a follower's LMDB work per write drops by about a third
 * (issue 24). Turning it off ends a pause under way. Gauge strata_store_apply_lazy. */
void st_store_apply_lazy(st_store_t *s, bool lazy);
/* ---- backup hooks (src/backup): the one "batch is durable" point, and offline restore ---- */

/* Told every group once it is durable in the redo log, on the sync thread, before its
 * responses are released: seq is its log record's (0 for a group too big for the log, committed
 * straight to LMDB: a gap the tap must cover otherwise), rec its encoded ops (borrowed for the
 * call). barrier: the group holds a batch marked by st_store_barrier. On a single node its
 * reservations already went ahead (st_store_ahead_fn): nothing to wait for. In a replicated
 * group the call returns once it is shipped, or ST_EUNAVAIL past the backup's bound, which
 * fails the held answers. In a replicated group it is told, on the leader only, every committed
 * entry once it is in LMDB (on the apply thread), with its Raft index as seq — an empty record for
 * an index that carries no store entry — and a barrier's acknowledgement (and every later one)
 * waits for the call. */
typedef int (*st_store_tap_fn)(void *arg, uint64_t seq, const void *rec, size_t len, bool barrier);
/* Sets (or clears, fn NULL) the tap. Loop thread. The tap starts not ready. */
void st_store_tap(st_store_t *s, st_store_tap_fn fn, void *arg);
/* Told, on the sync thread, a group's reservation ops (st_store_put_resv; same encoding as a
 * record, borrowed) *before* the group is logged as seq, which only happens once this returns
 * ST_OK: they are then in the backup. Any error (the backup did not take them within its bound)
 * fails the group unlogged: its requests get 503 and nothing of it is applied, so a range is
 * never issued from unless its reservation is in the backup, and nothing waits longer than the
 * tap's bound. Set after st_store_tap (same arg); cleared with it. */
typedef int (*st_store_ahead_fn)(void *arg, uint64_t seq, const void *rec, size_t len);
void st_store_tap_ahead(st_store_t *s, st_store_ahead_fn fn);
/* Whether the tap can take a barrier now (the backup target answers). Any thread. */
void st_store_tap_ready(st_store_t *s, bool ready);
/* Group mode, loop thread, while the store is idle (st_repl_on_lead) or on losing the lead: the
 * tap follows the entries this member applies from now on (on), or nothing (off). On, the tap is
 * not ready until it says so again (the shipper's new timeline has its snapshot). */
void st_store_tap_lead(st_store_t *s, bool on);
/* Marks the open batch so that the tap has taken it before anything in it is acknowledged (a
 * reservation is shipped before ids from it are issued); raises *wait to it. Call it before
 * staging anything: ST_EUNAVAIL (503) while a tap is set and not ready — the request needing a
 * barrier is refused rather than every write waiting for the backup target to come back. */
int st_store_barrier(st_store_t *s, uint64_t *wait);
/* st_store_barrier, then a put whose op is a reservation: it goes to the backup ahead of its
 * group (st_store_ahead_fn), so the backup holds it before any id it covers is acknowledged.
 * Its value must be safe to restore even if the group then fails (it only ever raises). */
int st_store_put_resv(st_store_t *s, const void *key, size_t klen, const void *val, size_t vlen,
                      uint64_t *wait);
/* A compact copy of LMDB written to fd (mdb_env_copyfd2, MDB_CP_COMPACT). Any thread; the loop
 * goes on. *applied: a lower bound of the last log seq the copy holds (the copy's own
 * st_store_offline_open tells the exact one). */
int st_store_copy(st_store_t *s, int fd, uint64_t *applied);

/* Offline: an LMDB environment in dir (no redo log, no threads), for building a data dir out
 * of a snapshot and shipped records. *applied: the last seq the environment holds. */
typedef struct st_store_offline st_store_offline_t;
int st_store_offline_open(st_store_offline_t **out, const char *dir, uint64_t map_size,
                          uint64_t *applied);
/* Applies one record as the tap saw it (commits every so often). ST_EIO if it is malformed. */
int st_store_offline_apply(st_store_offline_t *o, uint64_t seq, const void *rec, size_t len);
/* Commits, syncs and closes; returns the first error of the whole run. */
int st_store_offline_close(st_store_offline_t *o);

/* Reservations: ids that must never be issued twice, even by a server restored from a backup
 * that missed the last interval. A reservation covers every value up to `reserved`; raising it
 * is a barrier (shipped before anything staged with it is acknowledged). A restore sets `floor`
 * to `reserved`: the owner then issues only values above the floor. */
typedef struct {
    int64_t reserved, floor;
} st_store_resv_t;
/* Reads the reservation called name (zeros when there is none). */
int st_store_resv_load(st_store_t *s, const char *name, st_store_resv_t *r);
/* Whether values of a reservation already in the store may be issued. In a replicated group
 * with a tap set, only once it was ready since this member began leading — a reservation the
 * old leader committed may have missed the backup, and the new leader's first snapshot holds
 * it — and not after a reservation's entry failed to reach it, until it answers again:
 * ST_EUNAVAIL (503) until then. A single node logs a reservation only once the backup has it
 * (st_store_ahead_fn), so every reservation in its store is in the backup: always ST_OK. */
int st_store_resv_check(st_store_t *s);
/* Before issuing value: raises the reservation to value + chunk when value is past it (else
 * st_store_resv_check). */
int st_store_resv_cover(st_store_t *s, const char *name, st_store_resv_t *r, int64_t value,
                        int64_t chunk, uint64_t *wait);
/* After a restore: every reservation's floor = its reserved. *n: how many. */
int st_store_resv_resume(st_store_t *s, size_t *n, uint64_t *wait);

#endif
