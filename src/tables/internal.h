/* SPDX-License-Identifier: MIT */
/* tables' own parts (strata/tables.h): the tables' definitions, live files, metadata documents
 * and the worker's commit. */
#ifndef STRATA_TABLES_INTERNAL_H
#define STRATA_TABLES_INTERNAL_H

#include "strata/iceberg.h"
#include "strata/parquet.h"
#include "strata/tables.h"
#include "strata/tier.h"

#include <cjson/cJSON.h>

#define ST_TABLES_META_MAX (64u << 20) /* the largest metadata file strata reads */
#define ST_TABLES_LOG_MAX  100         /* write.metadata.previous-versions-max */
/* More of this writer's manifests than this in a snapshot and a commit merges its small ones
 * (fastappend.c): Iceberg's commit.manifest.min-count-to-merge default. A reader plans a scan by
 * reading every manifest the list names, so their number bounds a scan's requests and a list's
 * size; merging only past it makes the merge's cost one commit's in about a hundred. */
#define ST_TABLES_MANS_MAX 100

/* The tables are the kinds' (registry.c; st_tables_n, st_table_def: strata/iceberg.h). The index
 * of an owner tag's table, or -1 (not table data). */
int st_table_of_tag(char tag);

/* One data file of a table. */
typedef struct {
    char *key;  /* the object's key in the cold store (owned) */
    char *uri;  /* its absolute URI (owned; NULL in a committed set read back from the store) */
    char *part; /* the partition value (owned; NULL likewise) */
    int64_t rows, size;
    int64_t snap, seq; /* the snapshot that added it, its sequence number; 0: in none yet */
    uint32_t man;      /* 1 + the index of the manifest of this writer's that names it in the set's
                          manifest names (st_tstrs_t beside the set); 0: not known (a file in no
                          snapshot yet, or recorded before manifests were remembered) */
    bool changed;      /* written by a merge that changed rows (a fold): an overwrite, not a
                          replace (SPEC v5 §5.1); only while in no snapshot */
    bool has_fseq;     /* fseq is known: read from the owner's file records (the view's) */
    uint64_t fseq;     /* its file record's number ('F' owner 0 fseq, strata/tier.h) */
    uint8_t *stats;    /* its file record's column stats (owned; strata/tier.h, colstats.c), the
                          new entry's metrics; NULL: none (its footer is read, metrics.c) */
    size_t stats_len;
} st_tfile_t;
typedef ST_VEC(st_tfile_t) st_tfiles_t;
void st_tfiles_free(st_tfiles_t *v);
void st_tfiles_sort(st_tfiles_t *v); /* by key */
/* The file of key in a sorted set, or NULL. */
st_tfile_t *st_tfiles_find(const st_tfiles_t *v, const char *key);

/* A table's newest metadata, the worker's while a commit runs. */
typedef struct {
    cJSON *doc;      /* NULL: not read yet (or no table and not ours to create) */
    int64_t version; /* its N in v{N}.metadata.json */
    bool swept;      /* orphans swept since it was loaded (orphans.c) */
} st_tmeta_t;

typedef ST_VEC(char *) st_tstrs_t;
void st_tstrs_free(st_tstrs_t *v);
/* The manifests' names a provenance load left in the files' uri (owned, NULL: none) become one
 * sorted set of names in *names and each file's man index; uri is NULL after. */
void st_tfiles_intern(st_tfiles_t *files, st_tstrs_t *names);
/* The heap a set of files and its manifests' names take: arrays, strings with malloc's share. */
size_t st_tfiles_bytes(const st_tfiles_t *v, const st_tstrs_t *mans);
/* qsort's and bsearch's order of two char * items: strcmp's. */
int st_tstrs_cmp(const void *a, const void *b);

/* ---- view.c: which files each table holds now ---- */
/* One table's view of the tier's file records, taken on the loop in one turn. */
typedef struct {
    bool full;         /* fresh is every file of the table (a whole walk); else only those of the
                          owners marked dirty (strata/tier.h), whose partitions are parts */
    st_tfiles_t fresh; /* the files read (owned; key, uri, part, rows, size) */
    st_tstrs_t parts;  /* not full: the dirty owners' partitions (owned) */
    st_buf_t marks;    /* the table's owners' dirty marks as seen (cleared once committed) */
    bool more;         /* a tick's delta stopped at ST_TABLES_VIEW_OWNERS: more owners are dirty */
} st_tview_t;
/* The most dirty owners one tick's delta view reads (all tables): its loop turn reads their file
 * and provenance records (a few microseconds each), so a flush of a million owners is committed
 * in slices, one commit after another, never in one long turn. */
#define ST_TABLES_VIEW_OWNERS 4096
void st_tview_free(st_tview_t *v);
/* Whether the view read owner o's file records (a whole view read every owner's). */
bool st_tview_has_owner(const st_tview_t *v, const char *o, size_t ol);
/* The tables' views v[0..n) (zeroed first): every file record (full) or the dirty owners' only.
 * *visited grows by the file records read, and the marks of owners no table has are cleared at
 * once; a tick's delta (visited set, not full) reads ST_TABLES_VIEW_OWNERS owners at most (more
 * set: the rest at the next); visited NULL: a look that writes nothing and reads every dirty
 * owner (a test's; GET /v1/admin/tables reads a running count instead: look.c).
 * Loop only. ST_EPARKED when something read is not durable yet. */
int st_tables_view(st_store_t *s, st_objstore_t *cold, bool full, st_tview_t *v, int n,
                   uint64_t *visited);
/* Clears the dirty marks v saw (a mark rewritten since stays). Loop only. */
void st_tview_clear(st_store_t *s, const st_tview_t *v);
/* The same view taken across loop turns (slice.c): st_tables_view_begin reads the dirty marks
 * (ST_TABLES_VIEW_OWNERS at most when bounded and not full) in one turn; each st_tables_view_step
 * then reads, full, every file record an owner at a time, then the marked owners' records, until
 * the deadline
 * (uv_hrtime; one owner at least), each owner in one turn, and tells fn(arg, table, partition)
 * of each owner read. A mark read first and an owner's records read later: a write between
 * them leaves a newer mark, which the commit's clear keeps (the next tick reads the owner again).
 * b->wait: the newest batch read (ST_EPARKED is the caller's, once the last step is done). */
typedef struct {
    st_buf_t marks;   /* the dirty marks read (owner, generation; each) */
    size_t off;       /* the next one to read */
    uint64_t visited; /* file records read */
    uint64_t wait;
    bool full, walked;            /* full: a whole view, every file record walked (walked) first */
    char from[ST_TIER_OWNER_MAX]; /* the owner the whole walk goes on at (fl 0: the first) */
    size_t fl;
} st_tbuild_t;
typedef void (*st_tview_owner_fn)(void *arg, int ti, const char *part);
void st_tbuild_free(st_tbuild_t *b);
int st_tables_view_begin(st_store_t *s, bool full, st_tview_t *v, int n, bool bounded,
                         st_tbuild_t *b);
/* 1: owners are left; ST_OK: every one read; else the store's error. clear_idle: the marks of
 * owners that are no table's are cleared (a tick's; a look writes nothing). */
int st_tables_view_step(st_store_t *s, st_objstore_t *cold, st_tbuild_t *b, st_tview_t *v, int n,
                        bool clear_idle, uint64_t deadline, st_tview_owner_fn fn, void *arg);
/* Clears the dirty marks v saw from *off on until the deadline (uv_hrtime; one at least); true
 * once every one is. */
bool st_tview_clear_step(st_store_t *s, const st_tview_t *v, size_t *off, uint64_t deadline);
/* ---- look.c: GET /v1/admin/tables's pending, a running count per table (issue 48) ---- */
/* Registers strata_tables_pending_repairs_total (st_tables_open). */
void st_tables_pending_open(void);
/* Per table (n of them), the objects no snapshot has yet into pending[i]: exact, O(1) a table
 * (the count's record and one seek of the dirty marks); a count absent or found drifted is
 * recounted from the dirty owners' records (written back when this member may write). Loop only. */
void st_tables_pending(st_store_t *s, int n, int64_t *pending);
/* The same check for table ti, written back (a commit's end). Loop only. */
void st_tables_pending_checked(st_store_t *s, int ti);
/* The same for every table when this member may write (at open, and as it starts to lead): a
 * count absent (a new store, one from before the count), or 0 while owners of the table are dirty
 * (a store upgraded from one without provenance records), is recounted and written. Loop only. */
void st_tables_pending_init(st_store_t *s, int n);
/* On the loop, in the batch of a commit's new provenance record of table ti (pk: its key, with a
 * partition): whether the object's file record is still there, so that the record takes it off
 * the count (unchanged: no file record was written since the view, so it is, and nothing is
 * read; else its owner's manifest says: a compaction may have taken it out meanwhile). */
bool st_tables_pending_there(st_store_t *s, int ti, const uint8_t *pk, size_t pkl, bool unchanged,
                             const uint64_t *fseq);
/* Adds d to table ti's count (staged: the caller's batch). */
void st_tables_pending_add(st_store_t *s, int ti, int64_t d);
/* The key of table ti's pending count ("\0tables" 'n' index) into k (ST_KEY_MAX + 1 bytes); its
 * length (tables.c). */
size_t st_tables_pending_key(uint8_t *k, int ti);
/* The key of table ti's provenance record of object key (part: its partition; NULL: a record
 * from before partitions were in the key) into k (ST_KEY_MAX + 1 bytes); its length, 0 when too
 * long (tables.c). */
size_t st_tables_prov_key(uint8_t *k, int ti, const char *part, const char *key);
/* Indices into a committed set. */
typedef ST_VEC(size_t) st_tgone_t;
/* On a worker: the table's new set into *live (sorted; its entries borrow the strings of v's
 * files, which must stay while live is used): prev, the committed files of the owners the view
 * read (the changed owners' provenance records, or every one for a whole view), replaced by the
 * view's (their provenance kept; a new one's changed set when cmarks, sorted, names it). prev is
 * sorted here; *gone: the indices of prev's files not in the view. True when nothing was added or
 * removed. */
bool st_tview_merge(st_tview_t *v, st_tfiles_t *prev, const st_tstrs_t *cmarks, st_tfiles_t *live,
                    st_tgone_t *gone);

/* ---- manifest.c: the Avro schemas strata writes (and manifest_read.c checks) ---- */
extern const char st_ice_entry_head[], st_ice_entry_tail[], st_ice_mfile_schema[];
extern const char st_ice_entry_tail_v0[]; /* before the entries' metrics */

/* ---- metrics.c: data files' column metrics (issue 48) ---- */
#define ST_TMETRICS_COLS 32 /* the most top-level columns a table's metrics hold */
typedef struct {
    int id;        /* the column's field id */
    bool full;     /* counts and bounds; else counts only */
    uint8_t width; /* its bounds' bytes (full) */
} st_tmetrics_col_t;
typedef struct {
    st_tmetrics_col_t c[ST_TMETRICS_COLS];
    size_t n;
} st_tmetrics_cols_t;
/* The columns of d that keep metrics, in schema order (pure). */
void st_tables_metrics_cols(const st_table_def_t *d, st_tmetrics_cols_t *out);
/* Sets d's metrics modes in a table's properties: write.metadata.metrics.default "counts", and
 * write.metadata.metrics.column.<col> "none" or "full" for the columns that differ (pure). */
void st_tables_metrics_props(const st_table_def_t *d, cJSON *props);
/* Appends to out the manifest entry's metrics (st_ice_file_t.metrics) of the data file key
 * (size bytes) in cold, read from its Parquet footer: ST_OK, or the error that left out untouched
 * (the entry then keeps no metrics; no column of cols: ST_ENOTFOUND). On a worker. */
int st_tables_file_metrics(st_objstore_t *cold, const st_tmetrics_cols_t *cols, const char *key,
                           uint64_t size, st_buf_t *out);
/* The same from a file record's column stats (stats[0..sl): strata/tier.h), nothing read:
 * ST_OK, or ST_EINVAL when they do not decode (no column of cols: ST_ENOTFOUND). Pure. */
int st_tables_stats_metrics(const st_tmetrics_cols_t *cols, const uint8_t *stats, size_t sl,
                            st_buf_t *out);
/* The same for n files (keys[i], sizes[i] bytes) into out[i] (empty: none), several read at once
 * (threads of its own, joined before it returns). On a worker. */
void st_tables_files_metrics(st_objstore_t *cold, const st_tmetrics_cols_t *cols,
                             const char *const *keys, const int64_t *sizes, size_t n,
                             st_buf_t *out);

/* ---- meta.c: metadata documents ---- */
void st_tables_random(void *p, size_t n);
void st_tables_uuid(char out[37]); /* a random (v4) UUID */
/* Version 1 of a table: no snapshot. Owned. */
cJSON *st_tmeta_v1(const st_table_def_t *d, const char *location, int64_t now_ms);
/* A member as int64 (dflt when absent, null or not a number). */
int64_t st_tmeta_i64(const cJSON *o, const char *name, int64_t dflt);

/* What a commit adds. */
typedef struct {
    int64_t id, parent, seq, ts_ms; /* parent -1: none */
    const char *op;                 /* append, replace, delete, overwrite */
    const char *list_uri;           /* its manifest list */
    const char *prev_uri;           /* the metadata file it replaces (for metadata-log) */
    int64_t added_files, deleted_files, added_rows, deleted_rows, total_rows, total_files;
    int64_t keep_ms; /* snapshots older expire */
    bool expire_all; /* every earlier snapshot expires (an erasure's commit, SPEC v5 §5.1) */
} st_tsnap_t;
/* The next version of doc with snapshot s; the manifest lists of expired snapshots and the
 * metadata files dropped from metadata-log are appended to expired and dropped (URIs, owned). */
cJSON *st_tmeta_next(const cJSON *doc, const st_tsnap_t *s, st_tstrs_t *expired,
                     st_tstrs_t *dropped);
/* The next version of doc with no new snapshot, every snapshot but the current one expired
 * (Iceberg's expire-snapshots; an erasure whose objects the current snapshot no longer names),
 * at ts_ms; prev_uri is doc's own file (metadata-log). expired and dropped as above. */
cJSON *st_tmeta_expire(const cJSON *doc, int64_t ts_ms, const char *prev_uri, st_tstrs_t *expired,
                       st_tstrs_t *dropped);

/* ---- shared.c: several groups on one --tables-url (pure) ---- */
/* Whether a manifest list (its URI) is this writer's: its name's incarnation token is one w owns
 * (current or owned), or it is a pre-token strata name (snap-{id}-{uuid}.avro). */
bool st_tables_list_mine(const st_tier_writer_t *w, const char *list_uri);
/* Whether a manifest named in the list list_uri is this writer's: its token is one w owns, or
 * (no token) it is the pre-token manifest of a pre-token list ({uuid}-m0.avro, the list's uuid). */
bool st_tables_manifest_mine(const st_tier_writer_t *w, const char *path, const char *list_uri);
/* Reads the parent snapshot's manifest list (list: its bytes; list_uri: its URI) and keeps in
 * *out (owned: st_ice_mlist_free) the manifests that carry over to a commit of w's: every one not
 * w's, unchanged. *rows and *files: the live data rows and files those hold (added + existing).
 * The readers' errors (ST_EINVAL, ST_ENOTIMPL for another engine's schema). */
int st_tables_carry(const void *list, size_t len, const char *list_uri, const st_tier_writer_t *w,
                    st_ice_mlist_t *out, int64_t *rows, int64_t *files);
/* The same, and w's own manifests of that list into *mine (owned: st_ice_mlist_free; NULL: they
 * are dropped), in the list's order. */
int st_tables_carry_mine(const void *list, size_t len, const char *list_uri,
                         const st_tier_writer_t *w, st_ice_mlist_t *out, st_ice_mlist_t *mine,
                         int64_t *rows, int64_t *files);

/* ---- orphans.c: on a worker ---- */
/* Deletes the manifests and manifest lists under {table}/metadata/ named with an incarnation w
 * owns that no snapshot of doc names, directly or through a kept manifest list (read back, so an
 * other writer's list carrying one of ours keeps it); *deleted counts them. Run right after a
 * commit of w's (nothing of w's is in flight then; a member of the same group still committing
 * after losing its lead could lose its uncommitted files). Any list that cannot be read (an
 * error, another engine's schema) stops it before it deletes anything: that error. */
int st_table_orphans(st_objstore_t *ms, const st_table_def_t *d, const cJSON *doc,
                     const st_tier_writer_t *w, size_t *deleted);

/* ---- newest.c: a table's newest metadata version, on a worker ---- */
/* Each version read is offered to take(arg, v, key, text): ST_OK takes it (the newest so far),
 * ST_EINVAL refuses it (passed over, the one before stays; strict: the load stops with it),
 * another code stops the load. text is borrowed for the call (the callee may steal its bytes). */
typedef struct {
    int (*take)(void *arg, int64_t v, const char *key, st_buf_t *text);
    void *arg;
    bool strict;
} st_tables_take_t;
/* The newest version of table (its folder in ms) from known on: the hint (when newer than known),
 * a listing of metadata/ (may_list, when nothing is known and no hinted version was taken), then
 * probing upward until a version is missing. *found: the newest taken (known when none newer). */
int st_tables_newest(st_objstore_t *ms, const char *table, int64_t known, bool may_list,
                     const st_tables_take_t *t, int64_t *found);

/* ---- truth.c ---- */
/* The key of uri in the store whose root URI is root (st_objstore_uri(s, "")), or NULL when it is
 * not in it (another store's). */
const char *st_tables_key_of(const char *uri, const st_buf_t *root);

/* ---- fastappend.c: this writer's manifests of one commit, on a worker ---- */
/* One manifest of this writer's in a new snapshot: carried over from the parent, or written by
 * the commit (bytes). */
typedef struct {
    st_ice_mfile_t mf; /* its line in the manifest list (path, lower, upper owned) */
    char *key;         /* its key in the tables' store (owned) */
    st_buf_t bytes;    /* the Avro file when this commit writes it; empty: carried over */
} st_tman_t;
typedef ST_VEC(st_tman_t) st_tmans_t;
void st_tmans_free(st_tmans_t *v);

typedef struct {
    st_objstore_t *ms;
    st_objstore_t *cold; /* where the data files are, to read a new one's metrics (NULL: none) */
    const st_table_def_t *d;
    const char *croot; /* NULL: live and prev are the whole table; else they are the changed
                          owners' files only and croot is the cold store's root URI ("…/"): a
                          manifest entry names a live file unless prev names it and live not */
    int64_t id, seq;   /* the new snapshot */
    /* its manifests' keys: mpfx + "{k}.avro" ("{table}/metadata/{uuid}-{tok}-m") */
    const char *mpfx;
    const char *upfx;           /* the tables' store root URI + "/" (a key's URI: upfx + key) */
    const st_ice_mlist_t *mine; /* the parent's manifests of this writer's */
    const st_tfiles_t *live, *prev;
    const st_tstrs_t *prev_mans; /* the names prev's and live's man index */
} st_tplan_in_t;
/* A file of a rewritten or merged manifest that live does not hold (a delta commit's): its key,
 * partition, provenance and new manifest (st_tfile_t, uri NULL) into *moved, for its record. When
 * a delta commit cannot be planned from the delta (a removed file no manifest of ours names, a
 * manifest from before writer tokens), the plan returns ST_TABLES_WHOLE: the caller commits the
 * whole set instead (a whole view). */
#define ST_TABLES_WHOLE 1
/* This writer's manifests of the new snapshot (Iceberg's fast append and manifest merge): the
 * parent's carried over unchanged, but each one naming a file no longer live, rewritten with its
 * surviving entries only (EXISTING: no DELETED entry names what went, SPEC v5 §5.1 erasure); one
 * new manifest of the files the commit adds (ADDED); when that makes more than ST_TABLES_MANS_MAX,
 * the small ones merged into one. Their names into *names and, per live file, 1 + the index of
 * its manifest into man[live->n] (0: not known). A manifest that cannot be read: its error. */
int st_tables_plan(const st_tplan_in_t *in, st_tmans_t *out, st_tstrs_t *names, uint32_t *man,
                   st_tfiles_t *moved);

/* ---- commit.c: on a worker ---- */
/* Reads the newest version (version-hint, then probing upward); none and create: commits v1. */
int st_table_load(st_objstore_t *ms, const st_table_def_t *d, st_tmeta_t *m, bool create);
typedef struct {
    bool done;                /* a version was committed: a snapshot, or an erasure's expiry */
    int64_t snap, seq, ts_ms; /* its current snapshot */
    bool mans_set;            /* a snapshot: mans holds the names of this writer's manifests in it,
                                 and the live files' man index them */
    st_tstrs_t mans;          /* owned by the caller (st_tstrs_free) */
    st_tfiles_t moved;        /* a delta commit's files outside live whose manifest changed (their
                                 man indexes mans; owned by the caller: st_tfiles_free) */
} st_tcommit_t;
/* What a commit is given: the table's live files (sorted; new ones have snap 0 and get the new
 * snapshot's) against prev, the files of the last commit (sorted), whose man (and the committed
 * live files') index prev_mans; croot as in st_tplan_in_t (NULL: the whole table). */
typedef struct {
    st_tfiles_t *live;
    const st_tfiles_t *prev;
    const st_tstrs_t *prev_mans;
    const char *croot;
    int64_t keep_ms;
    bool erase;
    const st_tier_writer_t *w;
    st_objstore_t *cold; /* the data files' store, for their metrics (NULL: none) */
} st_tcommit_in_t;
/* st_table_commit with in; a delta (croot set) that cannot be planned: ST_TABLES_WHOLE. */
int st_table_commit_in(st_objstore_t *ms, const st_table_def_t *d, st_tmeta_t *m,
                       const st_tcommit_in_t *in, st_tcommit_t *res);
/* Commits the table's live files (sorted; new ones have snap 0 and get the new snapshot's)
 * against prev, the files of the last commit, whose man (and the committed live files') index
 * prev_mans, as writer w (its current incarnation names the manifests and the list; every
 * manifest of the parent snapshot that is not w's carries over, shared.c; w's are carried or
 * rewritten, fastappend.c; expiry deletes only w's lists and manifests). On a snapshot, res->mans
 * names w's manifests in it and every live file's man indexes them. Snapshots older than keep_ms
 * expire; erase (an erasure deleted objects of the table since the last commit): every earlier
 * one does, with a version that only expires them when the files did not change (SPEC v5
 * §5.1). */
int st_table_commit(st_objstore_t *ms, const st_table_def_t *d, st_tmeta_t *m, st_tfiles_t *live,
                    const st_tfiles_t *prev, const st_tstrs_t *prev_mans, int64_t keep_ms,
                    bool erase, const st_tier_writer_t *w, st_tcommit_t *res);

#endif
