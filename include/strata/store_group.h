/* SPDX-License-Identifier: MIT */
/*
 * store_group: the store's side of a replicated group (SPEC §8). The repl module drives it (it
 * holds the Raft member); the modules that behave differently on a follower use the rest: ws
 * (stream frames ride in the entries, st_store_note) and reconcile (st_store_standby). A data
 * module needs none of it: store.h is the whole store on a single node.
 */
#ifndef STRATA_STORE_GROUP_H
#define STRATA_STORE_GROUP_H

#include "strata/store.h"

/* Loop thread unless noted. In a group a sealed batch is proposed as one Raft entry instead of
 * going to the redo log; it is durable once committed, and reaches LMDB when its entry is applied —
 * on every member, in entry order, through the same apply thread. The Raft index of the last entry
 * in LMDB is kept beside the data, so an entry applied twice (a replay after a restart) changes
 * nothing. */
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
/* On the loop: every entry applied so far goes to the apply thread now (its lock waited for),
 * not at the end of the loop iteration; before a copy of the store is fetched. */
void st_store_group_handoff(st_store_t *s);
/* In-memory views derived from the store must be rebuilt from it (listeners' on_failed is
 * called with a batch id past every batch so far): a follower became the leader. */
void st_store_resync(st_store_t *s);
/* On a follower, whose in-memory views do not follow what it applies: rebuild them if entries
 * were applied since (before answering from them, e.g. a stream's seat-map snapshot). */
void st_store_refresh_views(st_store_t *s);
/* Snapshot install. Any thread: writes a consistent, compacted copy of the store to fd. */
int st_store_copy_fd(st_store_t *s, int fd);
/* A worker thread, while this member applies nothing: replaces the store's contents with the
 * copy at path (an LMDB file written by st_store_copy_fd) and gives the Raft index it holds.
 * Then, on the loop, st_store_group_loaded(s, applied). */
int st_store_group_load(st_store_t *s, const char *path, uint64_t *applied);
void st_store_group_loaded(st_store_t *s, uint64_t applied);

/* Stream frames ride in the entry of the batch whose change they announce ("notes"): the leader
 * stages them with st_store_note (a no-op outside a group), and every other member hands them
 * to fn once the entry is in its LMDB. kind and data are the caller's own encoding. */
typedef void (*st_store_note_fn)(void *arg, uint8_t kind, const char *data, size_t len);
void st_store_on_note(st_store_t *s, st_store_note_fn fn, void *arg);
int st_store_note(st_store_t *s, uint8_t kind, const void *data, size_t len, uint64_t *wait);
/* Group mode, the serving leader: raises *wait to the open batch, which becomes an entry of its
 * own even if nothing else is staged in it (an empty note). An answer held for it leaves only
 * once an entry proposed after it was built is committed by a majority — the leader has proved
 * it still leads — and becomes 503 no_leader if this member is deposed first (a ReadIndex
 * through the log). A no-op on a single node; ST_ENOLEADER on a standby member. */
int st_store_fence(st_store_t *s, uint64_t *wait);
/* Whether anyone waits for this member's applies to reach LMDB promptly. Lazy (the default, and
 * a single node's): LMDB takes entries in larger transactions, pausing up to 25 ms between them.
 * Eager, 5 ms: a follower whose streams show a change once applied, or a read index round waits
 * for it to show an index; a leader catching up before it serves. Turning laziness off ends a
 * pause under way. Gauge strata_store_apply_lazy. */
void st_store_apply_lazy(st_store_t *s, bool lazy);

#endif
