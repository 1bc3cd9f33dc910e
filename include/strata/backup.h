/* SPDX-License-Identifier: MIT */
/*
 * backup: continuous backups and point-in-time restore (SPEC §9), Litestream's model on strata's
 * own redo log. The store's tap hands every durable group to a backlog; a worker thread ships
 * the backlog as one segment per --backup-interval and a compact LMDB snapshot every
 * --snapshot-interval, prunes what the kept snapshots make useless, and retries while the
 * object store is down. Nothing here runs object I/O on the loop thread.
 *
 * Layout under the backup URL (T: a timeline, 16 hex digits — the wall clock in µs when it
 * began; a timeline is one unbroken run of redo-log records that starts with its snapshot):
 *   snap/T/APPLIED-TIME.zst         zstd(LMDB compact copy); APPLIED: a lower bound of the last
 *                                   record it holds, TIME: µs when the copy began
 *   seg/T/FIRST-LAST-TFIRST.zst     zstd(records FIRST..LAST, each with its commit time + CRC)
 * In a replicated group the positions are Raft indexes and each leader ships its own timelines.
 */
#ifndef STRATA_BACKUP_H
#define STRATA_BACKUP_H

#include "strata/cold.h"
#include "strata/store.h"

#include <stdio.h>
#include <uv.h>

typedef struct st_backup st_backup_t;

typedef struct {
    st_objstore_opts_t obj; /* where backups go (borrowed during open) */
    const char *data_dir;   /* the snapshot's scratch file goes here */
    uint64_t interval_ms;   /* a segment per interval */
    uint64_t snapshot_s;    /* between snapshots */
    uint64_t keep;          /* snapshots kept (>= 1); older ones and their segments go */
    uint64_t max_backlog;   /* bytes; past it the backlog is dropped for a new snapshot */
    bool standby;           /* a group member: ships nothing until st_backup_lead(b, true) */
    uint64_t barrier_ms;    /* longest wait for a reservation to reach the backup (then 503) */
    uint64_t part_size;     /* bytes per part of a snapshot's upload (multipart) */
} st_backup_opts_t;

/* Starts shipping: taps the store, starts the worker (which takes a snapshot first). */
int st_backup_open(st_backup_t **out, uv_loop_t *loop, st_store_t *store,
                   const st_backup_opts_t *o);
/* A replicated group (SPEC §8): only the leader ships. Loop thread, from st_repl_on_lead (the
 * store holds every committed entry and is idle) with true: a new timeline starts, with a
 * snapshot, then the entries this member applies; and on losing the lead with false: the
 * backlog is dropped (the next leader's snapshot holds it) and the worker idles. NULL: no-op. */
void st_backup_lead(st_backup_t *b, bool leading);
/* Ships what the backlog holds (one try), stops the worker, unhooks the store, frees. Call
 * after the store is idle and before st_store_close. */
void st_backup_close(st_backup_t *b);
/* Seconds the oldest acknowledged write not yet in the backup has waited (0 when none waits):
 * the loss window if the machine went now. It counts writes of a dropped backlog (and of a
 * group committed straight to LMDB) until the snapshot that holds them is shipped. Any thread. */
double st_backup_lag(st_backup_t *b);
/* The time (µs) of the oldest store snapshot the backup keeps (the oldest restore point), as the
 * worker's last prune listed it; 0 until it has (the tier then holds every replaced object).
 * Any thread. NULL: 0. */
int64_t st_backup_oldest_us(st_backup_t *b);
/* True from a backlog dropped past max_backlog until the snapshot that holds it is shipped (a
 * /healthz reason: points in that stretch cannot be restored, and the loss window is its age). */
bool st_backup_dropped(st_backup_t *b);
/* True when the lag is past the alert threshold (max(10 s, 10 intervals)): a /healthz reason. */
bool st_backup_lagging(st_backup_t *b);

typedef struct {
    st_objstore_opts_t obj; /* the backup URL and S3 settings */
    const char *data_dir;   /* must be missing or empty */
    int64_t to_time;        /* µs; 0: the newest shipped point */
    uint64_t map_size;      /* LMDB map for the restored environment */
} st_restore_opts_t;

typedef struct {
    char snapshot[256];    /* the snapshot's key */
    uint64_t snapshot_seq; /* the last record it held */
    uint64_t records;      /* records replayed after it */
    uint64_t last_seq;     /* the last record applied */
    int64_t last_time;     /* its commit time (µs), or the snapshot's */
} st_restore_result_t;

/* The file a restore leaves in its data dir until its caller finished (sequences resumed, the
 * writer renewed) and removed it: strata refuses to start on a data dir that holds it. It names
 * the files the restore writes there; a restore into a data dir that holds only it and those
 * files removes them first (the restore they came from failed or was killed), and refuses a
 * data dir holding anything else, or whose restore still runs (it keeps the marker locked until
 * the process exits). */
#define ST_RESTORE_MARKER "RESTORE-INCOMPLETE"
/* Builds a data dir (LMDB only; the redo log starts fresh) from the newest snapshot at or
 * before to_time plus the records up to to_time, and leaves ST_RESTORE_MARKER in it. ST_EINVAL:
 * dir not empty (beyond an unfinished restore's files); ST_ENOTFOUND: no snapshot at or before
 * to_time. */
int st_backup_restore(const st_restore_opts_t *o, st_restore_result_t *res);

/* `strata restore --list`: prints the restore points under o's URL to out — per timeline its
 * snapshots and the range of its records, times in RFC 3339 and µs. ST_ENOTFOUND (with a
 * message) when there is no backup there. o is borrowed. */
int st_backup_list_points(const st_objstore_opts_t *o, FILE *out);

#endif
