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
 *
 * This is the whole store a data module needs. Replication (src/repl) drives the store through
 * store_group.h, backups (src/backup) tap it through store_tap.h.
 */
#ifndef STRATA_STORE_H
#define STRATA_STORE_H

#include "strata/core.h"

#include <uv.h>

typedef struct st_store st_store_t;

/* Key spaces of the functions that live with the store (counters, idempotency, the writer
 * record); each is claimed by the module that writes it (st_store_claim). */
enum {
    ST_KS_COUNTER = 'c',    /* name -> st counter record */
    ST_KS_MEMBER = 'm',     /* name 0 member -> "" (distinct counter membership) */
    ST_KS_SEQUENCE = 's',   /* name -> u64 last */
    ST_KS_IDEM = 'i',       /* sha256(scope) -> idempotent response (http/idempotency.c) */
    ST_KS_IDEM_EXP = 'x',   /* be64(created) sha256(scope) -> user or "" (their expiry index) */
    ST_KS_IDEM_SPILL = 'y', /* sha256(scope) -> be64(created): an answer the index in memory could
                               not hold (--idempotency-index full; http/idempotency.c) */
    ST_KS_WRITER = 'w',     /* "writer" -> the cold tier's writer record (cold/writer.c) */
};
#define ST_KEY_MAX 511 /* LMDB's default maximum key size */

/*
 * Registration, not convention: every module claims the first bytes of every key it writes when
 * it opens (one call per prefix, naming itself; `who` must outlive the store). A claim equal to,
 * or a prefix of, another's — or the other's a prefix of it — is refused with ST_EEXIST and
 * logged naming both, and strata does not start. main seals the claims once every module is
 * open; from then on a debug build aborts on a write (put or del) no claim covers.
 * Each module's header documents its own layout.
 */
#define ST_CLAIM_MAX 16 /* the longest claimable prefix */
int st_store_claim(st_store_t *s, const void *prefix, size_t plen, const char *who);
/* A module's prefixes, as a table: ST_CLAIM("M"), ST_CLAIM("\0chat_erase"), ... */
typedef struct {
    const char *p;
    size_t n;
} st_claim_t;
#define ST_CLAIM(lit)                                                                              \
    {                                                                                              \
        lit, sizeof lit - 1                                                                        \
    }
/* Claims every prefix of the table for who; the first refusal is returned. */
int st_store_claims(st_store_t *s, const char *who, const st_claim_t *c, size_t n);
void st_store_claims_seal(st_store_t *s);
/* The module whose claim covers key, or NULL. */
const char *st_store_claim_of(const st_store_t *s, const void *key, size_t klen);
/* A number that grows with every put or del staged of a key whose first byte is `first`, and
 * with every batch of another member applied (group mode; its keys are not looked at): equal
 * numbers at two moments mean no such write was made between them, so a module that derives
 * something from a whole key range can skip work that would find nothing new. Loop only. */
uint64_t st_store_writes_of(const st_store_t *s, uint8_t first);
/* The same over every key: equal numbers at two moments mean nothing was staged between them
 * (a background slice that found only work to wait for). Loop only. */
uint64_t st_store_writes(const st_store_t *s);
/* While on, the apply thread writes its groups into LMDB at SCHED_IDLE (store/yield.c): a
 * background job that stages many writes (an erasure) is told to set it while it runs, so their
 * LMDB work never takes a core from the loop; anyone waiting for LMDB lifts it. Loop only. */
void st_store_apply_background(st_store_t *s, bool on);
/* Visits every claim in the order made (fn's prefix is borrowed). */
void st_store_claims_each(const st_store_t *s,
                          void (*fn)(void *arg, const void *prefix, size_t plen, const char *who),
                          void *arg);

/* Told about batches as they settle; embed in your own struct (zeroed) and register with
 * _listen. A callback may unlisten its own listener, not another. */
typedef struct st_store_listener {
    st_list_t link; /* in the store's listeners, newest first */
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
/* The same; true when LMDB holds everything, synced, and the redo log was reset (a store that
 * an offline command moves as one file, data.mdb, must have closed so). */
bool st_store_close_clean(st_store_t *s);
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

/* A walk of the keys under a prefix across loop turns, a page at a time (store/walk.c): each
 * page starts after the last key the page before visited, so a key there for the whole walk is
 * visited once, whatever is written meanwhile. {0} starts from the beginning. The caller owns it.
 */
typedef struct {
    size_t clen; /* 0: from the start */
    uint8_t at[ST_KEY_MAX + 1];
} st_store_walk_t;
/* One page: fn for up to `page` keys (page >= 1) after the walk's last one; fn returns 0 to go
 * on, > 0 to end the page there. Returns 1 when the page was full or ended by fn (keys may be
 * left), 0 at the end of the keys, < 0 the store's error or fn's (the walk stays after the last
 * key fn was called for). Pointers given to fn are valid during its call only: a walk that
 * stages writes for what it visits collects the keys and stages after the page. */
int st_store_walk_page(st_store_t *s, const void *prefix, size_t plen, st_store_walk_t *w,
                       size_t page, st_store_scan_fn fn, void *arg);

/* Keys under the prefix within [lo, hi) (NULL bound: open), ascending or descending. */
int st_store_range(st_store_t *s, const void *prefix, size_t plen, const void *lo, size_t lolen,
                   const void *hi, size_t hilen, bool reverse, st_store_scan_fn fn, void *arg,
                   uint64_t *wait);
/* How many keys (durable and staged) have the prefix. */
int st_store_count(st_store_t *s, const void *prefix, size_t plen, int64_t *n, uint64_t *wait);

uint64_t st_store_durable_id(const st_store_t *s);

/*
 * Work a commit thread does itself the moment a batch is durable (and every batch before it),
 * before the loop hears of it: the HTTP server writes an answer there (src/http/conn.c), so a
 * durable write's answer waits neither for the loop's wake-up nor for the loop's writes of the
 * answers before it. Single node only (a group's batches are durable through Raft).
 * Embed it in your own struct; send() runs on a commit thread, must not block and may touch
 * only that struct, which the caller keeps unchanged (but for what send() writes) until the
 * batch settles: st_store_durable_id() reaches `wait`, or on_failed names it. send() is not
 * called for a batch that fails.
 */
typedef struct st_store_express {
    struct st_store_express *next; /* the store's */
    void (*send)(struct st_store_express *x);
} st_store_express_t;
/* Attaches x to the open batch when that is batch `wait` (a staged write's) and the store can
 * run it; false otherwise (x is untouched). */
bool st_store_express(st_store_t *s, uint64_t wait, st_store_express_t *x);
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

/* Observers of the modules that are plain functions over the store and keep no state of their
 * own (counters): they live with the store. The module owns the list's meaning. */
st_observers_t *st_store_observers(st_store_t *s);

/* ---- writes the backup must hold before they are acknowledged (tap.c; the backup module's
 * side of it, the tap, is in store_tap.h) ---- */

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
