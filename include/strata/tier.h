/* SPDX-License-Identifier: MIT */
/*
 * tier: the cold tier's pass over the hot store (SPEC §5, §7). Every --flush-interval, with the
 * hot store at 80 % and on POST /v1/admin/flush, one pass visits every key space that has work
 * to do in the background: chat's users (retention, flushes queued), the counters (hot
 * increments into their baselines), chat's idle conversations (eviction). Each is a source: a
 * key prefix and what to do with each key, implemented by the module that owns those keys, so
 * the tier knows nothing of counters or messages (the way Redis keeps rdb.c/aof.c out of its
 * data-type files).
 *
 * The pass runs in slices, one per loop turn on an idle handle, each a few pages of keys within
 * about 1 ms of loop time, so a pass over millions of keys never stalls the loop. Sources run in
 * ascending `order`; each walks its keys in key order from the last key it visited, so every key
 * there for the whole pass is visited once (one added behind the cursor waits for the next pass).
 * A pass asked for while one runs is queued: one more pass follows it (flags OR-ed).
 * Loop thread only.
 */
#ifndef STRATA_TIER_H
#define STRATA_TIER_H

#include "strata/store.h"

#include <uv.h>

typedef struct st_tier_source {
    const char *name; /* for logs */
    char prefix;      /* the source's keys: every key starting with this byte */
    size_t page;      /* keys scanned per page */
    int order;        /* sources run in ascending order */
    /* Whether to act on a key: called inside the store's scan, so it only reads (key, val). */
    bool (*want)(void *arg, const void *key, size_t klen, const void *val, size_t vlen);
    /* Acts on a wanted key, after the page's scan (it may stage writes). */
    void (*act)(void *arg, const void *key, size_t klen);
    /* Optional: the pass reaches this source (flags as given to st_tier_pass_start), or is done
     * with it. */
    void (*begin)(void *arg, int flags);
    void (*end)(void *arg);
    void *arg;
    struct st_tier_source *next; /* the pass's list */
} st_tier_source_t;

/* Orders of the pass's sources: a data kind's users first, the eviction of what is idle last,
 * everything else between (counters: ST_TIER_ORDER_MIDDLE). */
enum { ST_TIER_ORDER_FIRST = 0, ST_TIER_ORDER_MIDDLE = 50, ST_TIER_ORDER_LAST = 100 };

typedef struct st_tier_pass st_tier_pass_t;

/* after_slice (optional) runs after every slice: what the slice queued can start. *out is owned:
 * st_tier_pass_close. */
int st_tier_pass_open(st_tier_pass_t **out, uv_loop_t *loop, st_store_t *store,
                      void (*after_slice)(void *arg), void *arg);
/* Adds a source (borrowed: it must outlive the pass). Not while a pass runs. */
void st_tier_pass_add(st_tier_pass_t *p, st_tier_source_t *src);
/* Starts a pass and runs its first slice now; one asked for while a pass runs follows it. */
void st_tier_pass_start(st_tier_pass_t *p, int flags);
/* Whether a pass is running. */
bool st_tier_pass_running(const st_tier_pass_t *p);
/* Stops: no more slices; closed(arg) once the pass is freed (after the loop runs). */
void st_tier_pass_close(st_tier_pass_t *p, void (*closed)(void *arg), void *arg);

/* ---- the reaper: objects out of storage once their deletion is durable ---- */
/* A batch that takes an object out of a manifest (or finds it orphaned) records its deletion:
 * 'D' owner 0 seq -> the object key. The reaper deletes the objects of durable 'D' records on a
 * worker, then drops the records; a failed delete is retried after 30 s. */
typedef struct st_tier_reaper st_tier_reaper_t;
typedef struct st_objstore st_objstore_t;
/* store and obj are borrowed (they must outlive the reaper). */
int st_tier_reaper_open(st_tier_reaper_t **out, uv_loop_t *loop, st_store_t *store,
                        st_objstore_t *obj);
/* A pass over up to 256 durable 'D' records, unless one is out or it backs off. NULL: no-op. */
void st_tier_reap(st_tier_reaper_t *r);
/* Closes: freed now, or once its pass in flight is back; then closed(arg). */
void st_tier_reaper_close(st_tier_reaper_t *r, void (*closed)(void *arg), void *arg);

/* ---- the flush engine: an owner's oldest hot rows become one object ---- */
/* Manifest records, per owner (a data kind's user), all in the hot store:
 *   'W' owner         what of the owner is cold (st_tier_stat_t)
 *   'F' owner 0 seq   one object of the owner (st_tier_file_t, then the object key)
 *   'P' owner 0 seq   an object being written (value: its key); durable before the write
 *                     starts, deleted by the batch that records 'F' — one left without its 'F'
 *                     names an object no manifest will ever hold (an orphan)
 *   'D' owner 0 seq   an object to delete (the reaper, above)
 * The flush invariant: every cold id of an owner is <= its watermark < every hot id, and a flush
 * moves rows by one atomic batch (manifest record in, hot rows out, counts moved from hot to the
 * cold baseline), so a read sees each row exactly once, before or after.
 *
 * The engine queues owners, paces flushes, takes a snapshot through the kind, records the
 * intent ('P') and holds the snapshot until its batch is durable (nothing that a crash could take
 * back leaves the process), has the kind encode it on a worker, writes the object, then commits
 * one batch: 'P' out, the kind's hot side, 'W' and 'F' in. A failed write or commit leaves the
 * hot rows alone: the kind stages the orphans' deletion and the owner is retried with backoff,
 * or, for ST_EINVAL (a key the backend refuses), reported once and never retried. */
typedef struct {
    uint64_t watermark; /* the newest cold id (0: nothing cold) */
    int64_t rows, bytes, files;
    uint64_t next_seq;
} st_tier_stat_t;

typedef struct {
    uint64_t min_id, max_id;
    int64_t rows;
    uint64_t size;
} st_tier_file_t;

/* The most rows (and bytes of records) one flush moves into one object: its loop-side snapshot
 * and its commit batch cost loop time in proportion, and must stay within a few milliseconds
 * (SPEC §7). An owner with more is flushed in several objects, each re-queued at once. */
#define ST_TIER_FLUSH_ROWS  4096
#define ST_TIER_FLUSH_BYTES (8u << 20)

/* What one flush took (the kind fills it in its snapshot). */
typedef struct {
    void *rows;   /* the kind's: owned by the job, given back through release */
    size_t n;     /* rows taken (0: nothing to flush) */
    bool capped;  /* more hot rows than one flush takes: re-queued at once */
    st_buf_t key; /* the object's key (the kind names it) */
} st_tier_snap_t;

/* A data kind's side of a flush; every function but encode runs on the loop. */
typedef struct {
    /* The owner's oldest hot rows past st->watermark (every hot id is above it, and rows of the
     * last flush may still be in the store, deleted only in the overlay), up to the limits, and
     * the key of object number seq. Reads only. */
    int (*snapshot)(void *arg, const char *o, size_t ol, const st_tier_stat_t *st, uint64_t seq,
                    st_tier_snap_t *out, uint64_t *wait);
    /* On a worker: the rows into one object (*object, owned by the caller). */
    int (*encode)(void *arg, void *rows, st_buf_t *object);
    /* Stages the hot side of the commit: hot rows out, their counts to the cold baselines;
     * sets f->min_id, max_id and rows. */
    int (*commit)(void *arg, const char *o, size_t ol, void *rows, st_tier_file_t *f,
                  uint64_t *wait);
    void (*release)(void *arg, void *rows);
    /* Stages the deletion of the owner's orphans ('P' without 'F', none in flight). */
    int (*orphans)(void *arg, const char *o, size_t ol, uint64_t *wait);
    /* After a flush committed (st_tier_flush_done: after every flush that came back). */
    void (*flushed)(void *arg, const char *o, size_t ol);
    void (*done)(void *arg);
    void *arg;
} st_tier_kind_t;

typedef struct st_tier_flush st_tier_flush_t;
/* store, obj and kind are borrowed (they must outlive the engine). Registers the flush metrics
 * (strata_flush_*). */
int st_tier_flush_open(st_tier_flush_t **out, uv_loop_t *loop, st_store_t *store,
                       st_objstore_t *obj, const st_tier_kind_t *kind);
/* Queues a flush of the owner (once: not while queued, running or stuck). */
void st_tier_flush_enqueue(st_tier_flush_t *f, const char *o, size_t ol);
/* Starts queued flushes while the pacing allows. */
void st_tier_flush_pump(st_tier_flush_t *f);
/* The hot store is near full: no pause between flushes. */
void st_tier_flush_urgent(st_tier_flush_t *f, bool urgent);
/* The store's batches settling (forward from a st_store_listener_t): held snapshots go to a
 * worker once durable, or are cancelled when their batch failed. */
void st_tier_flush_durable(st_tier_flush_t *f, uint64_t id);
void st_tier_flush_failed(st_tier_flush_t *f, uint64_t first, int err);
/* Start-up: stages the deletion of the objects of flushes a crash interrupted ('P' records). */
void st_tier_flush_recover(st_tier_flush_t *f);
/* Background work on a pool thread (SCHED_IDLE while on; off before the work returns). */
void st_tier_background(bool on);
/* Closes: held snapshots are dropped (their 'P' records wait for start-up); freed once the
 * flushes in flight are back, then closed(arg). */
void st_tier_flush_close(st_tier_flush_t *f, void (*closed)(void *arg), void *arg);

#endif
