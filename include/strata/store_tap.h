/* SPDX-License-Identifier: MIT */
/*
 * store_tap: what the backup module (src/backup) needs from the store — the tap on the one
 * point where a group becomes durable, a compact copy of LMDB taken beside a running server, and
 * an offline environment that a restore fills. Loop thread unless noted. A data module marks its
 * barrier writes with st_store_barrier / st_store_put_resv (store.h) and needs nothing here.
 */
#ifndef STRATA_STORE_TAP_H
#define STRATA_STORE_TAP_H

#include "strata/store.h"

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

#endif
