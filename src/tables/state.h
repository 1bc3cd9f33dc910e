/* SPDX-License-Identifier: MIT */
/* The tables module's state (tables.c), shared with its sliced loop work (slice.c). */
#ifndef STRATA_TABLES_STATE_H
#define STRATA_TABLES_STATE_H

#include "internal.h"

#include <uv.h>

/* "\0tables" key of an object's provenance: "\0tables" 'p' table-index partition '\0' key ->
 * be64 snapshot, be64 sequence number, be64 rows, be64 size, then the name of the manifest of
 * this writer's that names it (fastappend.c; absent in records from before manifests were
 * remembered: a commit removing such a file reads the parent's manifests to find it). Keyed by
 * partition (the owner) so that a commit reads the changed owners' records only: the committed
 * set lives here, not in RAM (issue 48). Records from before partitions were in the key
 * ("\0tables" table-index key, the same value) are read by a whole view, which rewrites them. An
 * object
 * written by a merge that changed rows (st_tier_on_rows_changed), until a snapshot has it:
 * "\0tables" 'c' key -> "". An object an erasure deleted (st_tier_on_erased), until a commit of its
 * table has expired every snapshot before it: "\0tables" 'x' key -> the table's index ('0' + i).
 * A table's pending count (look.c): "\0tables" 'n' index -> be64. */
static const char st__pfx[] = "\0tables";
#define ST__PFX_LEN (sizeof st__pfx - 1)
#define ST__CHANGED 'c'
#define ST__ERASED  'x'
#define ST__PROV    'p'
#define ST__PENDING 'n'
/* a table's index in its keys and marks is one digit, never ST__CHANGED or ST__ERASED */
_Static_assert(ST_TABLES_MAX <= 10, "a table's index is one digit");

enum { ST__IDLE, ST__BUILD, ST__WORK, ST__SETTLE };
enum { ST__SETTLE_START, ST__SETTLE_PROV, ST__SETTLE_CLEAR, ST__SETTLE_SWEEP };
/* A slice's budget: about a millisecond of the loop a turn. */
#define ST_TABLES_SLICE_NS 1000000

typedef struct {
    st_tmeta_t meta;   /* the worker's while a job runs */
    bool loaded;       /* meta.doc read (or created) */
    int64_t snap, seq; /* the current snapshot (snap -1: none), for the admin route */
    int64_t committed_us;
    int64_t oldest_us; /* the oldest snapshot the loaded document keeps (0: none) */
    size_t bytes;      /* the heap the last job's file sets took (st_tfiles_bytes; /metrics) */
} st__table_t;

typedef struct {
    st_tview_t view;  /* the loop's view (view.c); its files the worker's while the job runs */
    st_tfiles_t prev; /* the committed files of the owners the view read, from their provenance
                         records (every one for a whole view); their man index prev_mans */
    st_tstrs_t prev_mans;
    bool want;        /* the loop's: the view may differ from the committed set (a whole walk, a
                         dirty owner, an erasure): the worker merges it */
    st_tfiles_t live; /* the worker's new set (st_tview_merge: borrowed strings) and what of the */
    st_tgone_t gone;  /* committed set it does not carry */
    bool built;       /* live and gone were built */
    bool changed;     /* the worker's: live differs from the committed set, or an erasure */
    bool erase;       /* an erasure deleted objects of the table: every earlier snapshot expires */
    bool whole;       /* the worker's: the delta could not be planned (ST_TABLES_WHOLE) */
    st_buf_t marks;   /* their 'x' marks as the view saw them (size_t length, key; each) */
    st_buf_t prov;    /* the worker's provenance writes (st__prov_plan), done on the loop */
    st_buf_t pend;    /* the files they newly record (st_tables_pending_plan) */
    int rc;
    st_tcommit_t res;
    size_t bytes; /* the worker's: the heap live and its manifests' names will take, installed */
} st__jtable_t;

struct st_tables {
    uv_loop_t *loop;
    st_store_t *store;
    st_objstore_t *cold, *meta;
    char *croot; /* the cold store's root URI + "/" (a file's URI: croot + key) */
    uint64_t interval_ms;
    int64_t keep_ms;
    uv_timer_t timer;
    uv_work_t work;
    bool busy, closing;
    bool timer_closed; /* st_tables_close's uv_close is done: whichever of it and the job ends
                          last frees the module */
    int n;             /* the tables: the kinds' (st_tables_n, registry.c), as at open */
    st__table_t t[ST_TABLES_MAX];
    st__jtable_t job[ST_TABLES_MAX];
    bool job_create;
    st_tier_writer_t writer; /* the store's writer record, read at the tick (the job's) */
    /* The next view reads every file record (view.c) and every provenance record: at the start
     * of a lead while the store holds provenance records without a partition (or none at all),
     * after a failed batch (what the last view saw may be gone, a commit's records too) and when
     * a delta could not be planned, until a whole view is committed. fails: failed batches so
     * far; job_fails: as the running job's view was taken. */
    bool full, job_full;
    uint64_t fails, job_fails;
    st_tstrs_t cmarks; /* the 'c' marks' object keys as the running job's view saw them */
    st_buf_t sweep;    /* the worker's: those no table holds (store keys, size_t length first) */
    st_store_listener_t listener;
    bool leading; /* this member committed at its last tick */
    bool read;    /* every table's document loaded since it began to lead */
    /* The tier's file records and the erasures' marks as of st_tier_manifest_writes(store) +
     * erased_n == seen_f are all committed (seen): a tick finding the same number skips the scan
     * (an idle node's tick is O(1), not O(objects)). job_f: the number when the running job's
     * view was taken. erased_n: marks st_tables_erased wrote (a hold let go writes no 'F'). */
    bool seen, job_view_ok;
    bool job_more; /* the running job's view stopped at ST_TABLES_VIEW_OWNERS: the next tick
                      follows its end at once */
    bool slicing;  /* a slice follows: a tick that finds what it reads not durable yet (the last
                      slice's own writes) tries again in ST__SLICE_MS, not a whole interval */
    uint64_t seen_f, job_f, erased_n;
    /* The loop's part of a commit in slices (slice.c). phase: ST__IDLE; ST__BUILD, the view read
     * across turns (views, build: the marks; the job's prev, erasures filled as it goes);
     * ST__WORK, the worker's job (busy); ST__SETTLE, its writes across turns (settle_*). */
    int phase;
    st_tview_t views[ST_TABLES_MAX];
    st_tbuild_t build;
    bool build_started;
    int parks;                   /* slices the built view waited for its reads to be durable */
    bool provs_done;             /* a whole view: every provenance record read */
    uint8_t pat[ST_KEY_MAX + 1]; /* where their walk goes on (patl 0: the first) */
    size_t patl;
    int build_rc;      /* the view's code once built (ST_EPARKED: something read not durable) */
    uint64_t slice_ns; /* a slice's budget */
    uv_timer_cb tick;  /* the commit timer's callback (tables.c) */
    bool job_sweep;    /* no file record was written while the view was read: the 'c' marks'
                          sweep is safe (slice.c) */
    int settle_stage, settle_ti;
    size_t settle_off;
    bool settle_all, settle_wrote; /* every table as its view saw it; a version was committed */
    int64_t lag_since_us; /* when the tier first differed from the committed tables (0: it does
                             not) */
    st_metric_t *commits, *visited, *slices;
    void (*on_commit)(void *arg); /* st_tables_on_commit */
    void *on_commit_arg;
};

/* ---- tables.c ---- */
void st_tables_jtable_free(st__jtable_t *j);
/* Table i's end after its writes (slice.c): the erasures' marks it covered go, its pending count
 * checked. Whether the table is as the view saw it. */
bool st_tables_job_end(st_tables_t *t, int i);

/* ---- slice.c: the loop's part of a commit, across turns ---- */
/* One slice of the view (t->phase ST__BUILD; the first one reads the marks). 1: the view is built
 * (t->build_rc, the job's views and prev filled; the worker's job may be queued); 0: a slice
 * follows (the timer rearmed), or the build was dropped (t->phase ST__IDLE: no longer the
 * leader, or a batch failed). */
int st_tables_build_step(st_tables_t *t);
/* Frees what a build or a job holds (t->phase ST__IDLE after). */
void st_tables_build_drop(st_tables_t *t);
/* One slice of the job's writes (t->phase ST__SETTLE; t->settle_stage ST__SETTLE_START at the
 * first). 1: every one done; 0: a slice follows. */
int st_tables_settle_step(st_tables_t *t);
/* Whether a commit's writes were cut off (the settling marker is there): the next view reads
 * every file. */
bool st_tables_settling(st_store_t *s);

#endif
