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
    const char *dir;   /* created if missing */
    uint64_t map_size; /* bytes */
    uint64_t wal_size; /* redo log bytes; 0 = 64 MiB */
} st_store_opts_t;

int st_store_open(st_store_t **out, uv_loop_t *loop, const st_store_opts_t *opts);
/* Stops the commit thread after the in-flight batch; staged-but-unsubmitted writes are dropped,
 * so callers drain first (st_store_idle). Closes its uv handles; run the loop once after. */
void st_store_close(st_store_t *s);
void st_store_listen(st_store_t *s, st_store_listener_t *l);

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
/* True when nothing is staged and no commit is in flight. */
bool st_store_idle(const st_store_t *s);
/* Bytes in use in the hot store and its configured capacity (--map-size). */
void st_store_usage(st_store_t *s, uint64_t *used, uint64_t *size);
/* ST_EFULL once the hot store is at capacity: callers refuse new writes (507) up front, so a
 * write is never acknowledged that LMDB could not take. Reads keep working. */
int st_store_writable(st_store_t *s);

#endif
