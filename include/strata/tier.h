/* SPDX-License-Identifier: MIT */
/*
 * tier: the cold tier (SPEC §5, §7), one owner for everything that moves data between the hot
 * store and object storage, whatever the data.
 *
 * Architecture. One st_tier_t, opened by main, owns the tier's runtime: the tick (every second:
 * the reaper, the hot store's fill level, the interval pass, pacing), the pass over the hot store,
 * the flush engine, the compaction engine, the reaper, the cold cache and the object store handle
 * (borrowed), and its stop state. Data kinds know nothing of these; each is a member
 * (st_tier_member_t) made by its own module and registered as a kind with one line in the kinds'
 * list (kinds.h), which main.c joins to the tier in order:
 *
 *     X(seats) (finished bookings: st_seats_kind, src/seats/tier.c)
 *
 * A member brings what it has: pass sources (a key prefix and what to do with each key: chat's
 * users and idle conversations, the counters' hot increments), a flush side (st_tier_kind_t: a
 * snapshot of an owner's oldest hot rows, their encoding, the hot side of the commit batch) and
 * a merge side (st_tier_merge_t: rewriting objects). The manifest records ('W', 'F', 'P', 'D',
 * below), the intent protocol that keeps a crash from leaving a row twice or an object nobody
 * deletes, the orphan sweep, durability waits and deletions are the tier's, shared by every
 * kind, and so are retention of whole objects (st_tier_retain), reads of cold row groups
 * (st_tier_scan, the cold cache) and the Parquet merge (st_tier_pq_merge). The tier knows a kind's
 * objects by their schema only (st_tier_member_t.schema); their rows are the kind's.
 *
 * Adding a cold data kind (the way Redis keeps rdb.c/aof.c out of its data-type files):
 *   1. one file in the kind's own module, src/<kind>/tier.c say, with a function that fills and
 *      returns a st_tier_member_t: its sources (want/act per key of its prefix), and if it
 *      moves rows to objects a st_tier_kind_t (snapshot, encode, commit, release), a
 *      st_tier_merge_t (merge: st_tier_pq_merge, or the kind's own; commit: its counts; name),
 *      its Parquet schema, and an expired hook (its counts when retention drops an object);
 *   2. in the same folder, its registration (kinds.h): `const st_kind_t st_<kind>_kind` with its
 *      options (flags, environment twins, defaults, bounds, help: an st_cfg_opt_t table over a
 *      struct of its own, which config's table, the environment and --help take from the list)
 *      and a member hook that makes the member of step 1 from the modules main opened
 *      (st_kind_env_t) and its parsed options;
 *   3. one line outside its folder: X(<kind>) in ST_KINDS (kinds.h). main.c joins it, and
 *      `strata rebuild-meta` runs its rebuild hook, from that list;
 * and its reads are st_tier_scan (decoded row groups, walked with the codec's cursor) or the cold
 * cache's lookups (st_coldcache_table, or a st_coldview_t turning row groups into the kind's own
 * rows on the worker: chat's messages), returning ST_EPARKED for the caller to park on
 * st_tier_wait; cold/ knows nothing of its columns (src/seats/tier.c: finished bookings;
 * src/chat: messages).
 * Any number of members flush: each owns the manifest owners of its tag (st_tier_member_t.tag,
 * st_tier_owner), so each kind has its own manifest and its own key prefix in one key space, and
 * the engines (flush, compaction, retention, orphans) hand every owner to its own kind.
 *
 * Waiting for cold data is the tier's too: a read that needs cold data not in memory returns
 * ST_EPARKED, and the request or stream parks with st_tier_wait (no HTTP or WebSocket code
 * knows which kind it waits for).
 *
 * The pass: every --flush-interval, with the hot store at 80 % and on POST /v1/admin/flush, one
 * pass visits every source. It runs in slices, one per loop turn on an idle handle, each a few
 * pages of keys within about 1 ms of loop time, so a pass over millions of keys never stalls the
 * loop. Sources run in ascending `order`; each walks its keys in key order from the last key it
 * visited, so every key there for the whole pass is visited once (one added behind the cursor
 * waits for the next pass). A pass asked for while one runs is queued: one more pass follows it
 * (flags OR-ed).
 *
 * Loop thread only.
 */
#ifndef STRATA_TIER_H
#define STRATA_TIER_H

#include "strata/cold.h"
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

/* A pass's flags: every owner with hot rows is flushed, not only those due (the hot store near
 * full, POST /v1/admin/flush). */
enum { ST_TIER_PASS_ALL = 1 };

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
/* begin(arg, flags) (the arg given to open) runs as each pass starts, before its first source. */
void st_tier_pass_on_begin(st_tier_pass_t *p, void (*begin)(void *arg, int flags));
/* full(arg) (the arg given to open), asked before each page: true holds the pass where it is (no
 * slice runs) until st_tier_pass_resume — what it queues waits for the engines it feeds to drain,
 * so a pass over a million users holds a bounded queue, not a node per user. */
void st_tier_pass_on_full(st_tier_pass_t *p, bool (*full)(void *arg));
/* A held pass goes on from where it stopped (no-op if it is not held). */
void st_tier_pass_resume(st_tier_pass_t *p);
/* Whether a pass is running (held or not). */
bool st_tier_pass_running(const st_tier_pass_t *p);
/* Stops: no more slices; closed(arg) once the pass is freed (after the loop runs). */
void st_tier_pass_close(st_tier_pass_t *p, void (*closed)(void *arg), void *arg);

/* ---- the writer: whose objects these are (SPEC §5, cold/writer.c) ---- */
/* Every object key a kind writes names its writer's incarnation (st_tier_key_writer: "w" and
 * 16 hex digits, between '-' and '-' or '.'), so no two stores, nor a store and its restored
 * copy, ever make the same key; object stores refuse to overwrite besides (ST_EEXIST). The
 * record is in the hot store (replicated, backed up): minted in the batch of the first object
 * intent, minted anew by a restore. A store deletes only objects of incarnations it owns. */
#define ST_TIER_OWNED_MAX 64
typedef struct {
    uint64_t current; /* 0: no record yet */
    bool unnamed;     /* owns keys that name no writer (objects from before incarnations) */
    size_t n;
    uint64_t owned[ST_TIER_OWNED_MAX];
} st_tier_writer_t;
/* The current incarnation; minted and staged (owning unnamed keys) when there is none. */
int st_tier_writer(st_store_t *s, uint64_t *inc, uint64_t *wait);
/* The record as it is (current 0 and ST_ENOTFOUND when there is none). */
int st_tier_writer_get(st_store_t *s, st_tier_writer_t *w, uint64_t *wait);
/* A restore: a new incarnation (*inc) that owns none of the objects the store inherited. */
int st_tier_writer_renew(st_store_t *s, uint64_t *inc, uint64_t *wait);
/* rebuild-meta: the objects of incarnation inc (0: keys naming no writer) are this store's. */
int st_tier_writer_adopt(st_store_t *s, uint64_t inc, uint64_t *wait);
/* Appends the key token of incarnation inc ("w%016x"). */
void st_tier_key_writer(st_buf_t *b, uint64_t inc);
/* The incarnation a key names in its last path segment; 0 when it names none. */
uint64_t st_tier_key_incarnation(const char *key);
/* Whether w's store may delete the object at key. */
bool st_tier_writer_owns(const st_tier_writer_t *w, const char *key);

/* ---- the reaper: objects out of storage once their deletion is durable ---- */
/* A batch that takes an object out of a manifest (or finds it orphaned) records its deletion:
 * 'D' owner 0 seq -> the object key. The reaper deletes the objects of durable 'D' records on a
 * worker, then drops the records; a failed delete is retried after 30 s. Held deletions (below:
 * objects a swap replaced) join each pass once replaced before the hold's cutoff, oldest first. */
typedef struct st_tier_reaper st_tier_reaper_t;
typedef struct st_tier st_tier_t;
typedef struct st_objstore st_objstore_t;
/* store and obj are borrowed (they must outlive the reaper). */
int st_tier_reaper_open(st_tier_reaper_t **out, uv_loop_t *loop, st_store_t *store,
                        st_objstore_t *obj);
/* A pass over up to 256 durable 'D' and due held records, unless one is out or it backs off.
 * NULL: no-op. */
void st_tier_reap(st_tier_reaper_t *r);
/* The hold's cutoff (st_tier_hold_cutoff), read at each pass: held deletions of objects replaced
 * before it go. None set yet (start-up, before the tables and the backup are open): every held
 * deletion waits. */
void st_tier_reaper_hold(st_tier_reaper_t *r, int64_t (*cutoff)(void *arg), void *arg);
/* Closes: freed now, or once its pass in flight is back; then closed(arg). */
void st_tier_reaper_close(st_tier_reaper_t *r, void (*closed)(void *arg), void *arg);

/* ---- the flush engine: an owner's oldest hot rows become one object ---- */
/* Manifest records, per owner (a data kind's user), all in the hot store:
 *   'W' owner         what of the owner is cold (st_tier_stat_t)
 *   'F' owner 0 seq   one object of the owner (st_tier_file_t, then the object key)
 *   'I' owner 0 seq   its column stats (colstats.c, below)
 *   'P' owner 0 seq   an object being written (value: its key); durable before the write
 *                     starts, deleted by the batch that records 'F' — one left without its 'F'
 *                     names an object no manifest will ever hold (an orphan)
 *   'D' owner 0 seq   an object to delete (the reaper, above); an object a swap replaced
 *                     is recorded held instead ("\0cold_hold", "\0cold_held": hold.c)
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
     * the key of object number seq, naming the writer's incarnation (st_tier_key_writer). Reads
     * only. */
    int (*snapshot)(void *arg, const char *o, size_t ol, const st_tier_stat_t *st, uint64_t seq,
                    uint64_t writer, st_tier_snap_t *out, uint64_t *wait);
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
/* Queues a flush of the owner (once: not while queued, running or stuck); asked for while one
 * runs, it goes again once that one is done (the running one's snapshot may not hold every row
 * posted before the ask). */
void st_tier_flush_enqueue(st_tier_flush_t *f, const char *o, size_t ol);
/* The same for an owner past --flush-rows: not again after a running one (its count still holds
 * the rows that flush takes). */
void st_tier_flush_due(st_tier_flush_t *f, const char *o, size_t ol);
/* Starts queued flushes while the pacing allows. */
void st_tier_flush_pump(st_tier_flush_t *f);
/* Owners queued and not yet started. */
size_t st_tier_flush_pending(const st_tier_flush_t *f);
/* The same in a loop turn that has run since `since` (uv_hrtime): no snapshot is started once
 * the turn has spent a millisecond; the rest start a few milliseconds later. */
void st_tier_flush_pump_since(st_tier_flush_t *f, uint64_t since);
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

/* ---- the manifest's records, shared by every kind ---- */
/* An owner's cold summary ('W'); all zero when nothing of it is cold. */
int st_tier_stat(st_store_t *s, const char *o, size_t ol, st_tier_stat_t *out, uint64_t *wait);
/* *any: whether the owner's manifest holds any file record ('F'), read from the records (one
 * seek), not from the summary's count. */
int st_tier_has_files(st_store_t *s, const char *o, size_t ol, bool *any, uint64_t *wait);
/* Manifest owners: a kind's names as they are (tag 0: chat's users, as before kinds had tags) or
 * "~" tag name for a kind with a tag (no name holds '~', so no two kinds share an owner). */
/* (two tags deep: a room's messages, owner "~r" room (chat's bytes of a room), own deltas as
 * "~e~r" room, 4 + 255 bytes) */
#define ST_TIER_OWNER_MAX (ST_NAME_MAX + 5)
/* The owner of name for the kind with tag into o (ST_TIER_OWNER_MAX bytes); returns its length. */
size_t st_tier_owner(char *o, char tag, const char *name, size_t nl);
/* The tag of an owner (0: a name as it is). */
char st_tier_owner_tag(const char *o, size_t ol);

/* ---- held deletions (hold.c): objects a kept snapshot or backup point may still name ----
 * A swap (compaction, fold, retention) records a replaced object held, with the time it was
 * replaced, rather than 'D'; the reaper deletes it once that time is before the hold's cutoff.
 * An erasure lets its owners' held objects go at once (st_tier_unhold). */
#define ST_TIER_HOLD_PL       11 /* "\0cold_hold" with its 0 terminator */
#define ST_TIER_HOLD_KEY_MAX  (ST_TIER_HOLD_PL + 17 + ST_TIER_OWNER_MAX)
#define ST_TIER_HOLD_SLACK_US 60000000 /* a snapshot's time may trail the view it names */
extern const char st_tier_hold_pre[ST_TIER_HOLD_PL]; /* by time (the reaper's cursor) */
extern const char st_tier_held_pre[ST_TIER_HOLD_PL]; /* by owner (an erasure's) */
typedef struct {
    int64_t now_us;
    int64_t keep_us;          /* --table-keep (0: the tables hold nothing) */
    int64_t tables_oldest_us; /* the oldest snapshot the tables keep; 0: none (now - keep
                                 holds); < 0: not read yet (everything holds) */
    bool backup;              /* --backup-url set */
    int64_t backup_oldest_us; /* the oldest kept backup snapshot's time; 0: not known yet */
} st_tier_hold_t;
/* Pure: objects replaced before the returned time (µs) may go; INT64_MAX: nothing is held. */
int64_t st_tier_hold_cutoff(const st_tier_hold_t *h);
/* Keys into k (ST_TIER_HOLD_KEY_MAX bytes): the time index's, and the owner index's (has_seq
 * false: the owner's prefix). */
size_t st_tier_hold_key(uint8_t *k, int64_t at, const char *o, size_t ol, uint64_t seq);
size_t st_tier_held_key(uint8_t *k, const char *o, size_t ol, bool has_seq, uint64_t seq);
/* Stages the held deletion of object key (owner o, 'D' number seq), replaced at `at` (µs). */
int st_tier_defer(st_store_t *s, const char *o, size_t ol, uint64_t seq, const char *key,
                  int64_t at, uint64_t *wait);
/* An erasure: up to max of o's held deletions become 'D' records (the reaper deletes them at
 * once), each told to t's erasure observer (st_tier_erased; t NULL: none); *any set when one was
 * found. */
int st_tier_unhold(st_tier_t *t, st_store_t *s, const char *o, size_t ol, size_t max, bool *any,
                   uint64_t *wait);
/* Whether o has a held deletion. */
bool st_tier_holding(st_store_t *s, const char *o, size_t ol);
/* How many deletions are held (one scan of the owner index). */
size_t st_tier_held_count(st_store_t *s);
/* One object of an owner's manifest: 'F' owner 0 seq -> file, key (and 'I' owner 0 seq). */
typedef struct {
    st_tier_file_t file;
    uint64_t seq;
    char *key;        /* owned by the manifest */
    uint8_t *stats;   /* its column stats (colstats.c; owned by the manifest), NULL: none */
    size_t stats_len; /* (st_tier_manifest_stats not called, a file from before them, or one
                         whose footer did not say) */
} st_tier_obj_t;
/* ---- a data file's column stats (colstats.c): kept beside its file record, where a tables'
 * commit takes its Iceberg column metrics from (no footer read back from object storage) ----
 *   'I' owner 0 seq   the stats of 'F' owner 0 seq: its object key, a 0 byte, the stats; put and
 *                     deleted in the batches that put and delete the record, taken only for a
 *                     record naming the same key (an older binary's deletion leaves it: ignored)
 * A file record's value is st_tier_file_t then the key, the shape every binary checks; one the
 * session-24 binary wrote may go on with a 0 byte and the stats (still read). */
/* The key's length in record value val (vlen bytes), and its stats (*stats NULL, *sl 0: none). */
size_t st_tier_rec_split(const void *val, size_t vlen, const uint8_t **stats, size_t *sl);
/* Appends a record's value (stats sl bytes; sl 0: none: what is written now) to v. */
void st_tier_rec_value(st_buf_t *v, const st_tier_file_t *f, const char *key, const uint8_t *stats,
                       size_t sl);
/* One stats record of an owner: its number, the object key it names (kl bytes, not
 * 0-terminated) and the stats; borrowed for the call. Non-zero stops the walk. */
typedef int (*st_tier_stats_fn)(void *arg, uint64_t seq, const char *key, size_t kl,
                                const uint8_t *stats, size_t sl);
/* Walks owner o's stats records by number (one scan). */
int st_tier_each_stats(st_store_t *s, const char *o, size_t ol, st_tier_stats_fn fn, void *arg,
                       uint64_t *wait);
/* The stats of the top-level leaves with a field id, encoded (appended to out). */
void st_tier_stats_encode(const st_pq_colstat_t *s, size_t n, st_buf_t *out);
/* Decodes stats p[0..len) into out[0..max) (*n; the rest of them skipped): ST_OK, or ST_EINVAL
 * (*n 0) when they are not stats this reads. */
int st_tier_stats_decode(const uint8_t *p, size_t len, st_pq_colstat_t *out, size_t max, size_t *n);
/* The encoded stats of a whole Parquet file in memory (file[0..len)), from its footer there:
 * ST_OK, or ST_EINVAL (out untouched) when it is not a footer st_pq_top_stats reads. */
int st_tier_stats_of(const void *file, size_t len, st_buf_t *out);
/* The same from a footer alone (the flen bytes before a file's 8-byte tail). */
int st_tier_stats_of_footer(const void *footer, size_t flen, st_buf_t *out);
/* A merge's object: st_objstore_put of the Parquet file, its stats left with this thread for the
 * engine that runs the merge (st_tier_stats_take, on the same worker thread, as it returns). */
int st_tier_put_parquet(st_objstore_t *obj, const char *key, const void *file, size_t len);
/* The stats of the object this thread put last through st_tier_put_parquet into out (empty:
 * none), and forgets them; st_tier_stats_drop only forgets them (before a job). */
void st_tier_stats_take(st_buf_t *out);
void st_tier_stats_drop(void);

/* An owner's objects in manifest order (desc: reversed). Free with st_tier_manifest_free. */
typedef ST_VEC(st_tier_obj_t) st_tier_manifest_t;
int st_tier_manifest(st_store_t *s, const char *o, size_t ol, bool desc, st_tier_manifest_t *out,
                     uint64_t *wait);
void st_tier_manifest_free(st_tier_manifest_t *m);
/* The stats records of owner o attached to the entries of its manifest m without stats (one scan
 * beside st_tier_manifest's, for the tables' view; the other readers need none). */
int st_tier_manifest_stats(st_store_t *s, const char *o, size_t ol, st_tier_manifest_t *m,
                           uint64_t *wait);
/* Stages the deletion of one object of the owner (its 'D' record; key borrowed). */
int st_tier_doom(st_store_t *s, const char *o, size_t ol, uint64_t seq, const char *key,
                 uint64_t *wait);

/* ---- an owner's manifest as a whole (manifest.c): the tier's services to a kind ----
 * The manifest's keys are the tier's alone: a kind reads and changes an owner's records through
 * these (and st_tier_stat, st_tier_manifest, st_tier_doom), never by hand. Loop thread, or
 * offline (rebuild-meta); writes are staged (*wait raised as by st_store_put). */
/* Forgets an owner (an erasure, SPEC §2.2; an erasure overrides --table-keep and backup points,
 * SPEC v5 §5.1, §9): up to max of its held deletions become 'D' records (st_tier_unhold), up to
 * max of its objects leave the manifest with their deletion recorded ('D': the reaper deletes
 * them once durable), each told to t's erasure observer (st_tier_erased; t NULL: none), then its
 * summary ('W') goes. *busy is set when anything was found: call again until a call finds
 * nothing, then wait for st_tier_owner_busy to turn false. */
int st_tier_forget(st_tier_t *t, st_store_t *s, const char *o, size_t ol, size_t max, bool *busy,
                   uint64_t *wait);
/* Whether the tier still writes an object of the owner (an intent, 'P'), has one to delete ('D')
 * or holds one (st_tier_holding). */
bool st_tier_owner_busy(st_store_t *s, const char *o, size_t ol);
/* Whether the owner's file record number seq ('F' o 0 seq) is there and records key: one get,
 * where st_tier_manifest_names reads the whole manifest (key borrowed). */
bool st_tier_file_records(st_store_t *s, const char *o, size_t ol, uint64_t seq, const char *key,
                          uint64_t *wait);
/* Whether the owner's manifest names key (an object a restore inherited; key borrowed). */
bool st_tier_manifest_names(st_store_t *s, const char *o, size_t ol, const char *key,
                            uint64_t *wait);
/* One file record of a manifest: its owner o (ol bytes), its number, its file, its object's
 * key (kl bytes, not 0-terminated) and its column stats (sl bytes, colstats.c; sl 0: none); all
 * borrowed for the call. Non-zero stops the walk. */
typedef int (*st_tier_file_fn)(void *arg, const char *o, size_t ol, uint64_t seq,
                               const st_tier_file_t *f, const char *key, size_t kl,
                               const uint8_t *stats, size_t sl);
/* Walks the file records of every owner of tag (st_tier_owner; 0: the untagged owners;
 * ST_TIER_TAG_ANY: every owner), by owner then number. Returns the store's code, or fn's non-zero
 * value that stopped the walk. */
enum { ST_TIER_TAG_ANY = -1 };
int st_tier_each_file(st_store_t *s, int tag, st_tier_file_fn fn, void *arg, uint64_t *wait);
/* The same over every owner from owner `from` (fl bytes; fl 0: the first) on, in key order: a walk
 * across loop turns (the tables' whole view, slice.c) stops as an owner begins and resumes at it,
 * so each owner's records are read in one turn. */
int st_tier_each_file_from(st_store_t *s, const char *from, size_t fl, st_tier_file_fn fn,
                           void *arg, uint64_t *wait);
/* The owners whose file records changed (dirty.c): every batch that puts or deletes an owner's
 * file record (a flush's or a compaction's swap, retention's drop, st_tier_forget) also stages the
 * owner's mark, "\0cold_dirty" owner -> a generation, new at each write and never one a walk has
 * shown. A watcher of every manifest (the tables' commit) walks the marks (few: the owners changed
 * since it last cleared them) instead of every file record, reads those owners' records
 * (st_tier_manifest) and, once what it derived from them is safe, clears each mark it saw: a mark
 * rewritten since stays. rebuild-meta (st_tier_rebuild_owner, offline) marks each owner it puts
 * back too. Loop thread. fn's owner is borrowed for the
 * call; non-zero stops the walk (returned). */
typedef int (*st_tier_dirty_fn)(void *arg, const char *o, size_t ol, uint64_t gen);
int st_tier_each_dirty(st_store_t *s, st_tier_dirty_fn fn, void *arg, uint64_t *wait);
/* The same over the owners of one tag (st_tier_owner_tag; 0: the untagged ones, every owner
 * not under "~"), in key order: a reader of one table's owners (GET /v1/admin/tables) walks only
 * theirs, and may stop early. */
int st_tier_each_dirty_tag(st_store_t *s, char tag, st_tier_dirty_fn fn, void *arg, uint64_t *wait);
/* Clears owner o's mark if it still holds gen (staged; the store's code). */
int st_tier_dirty_clear(st_store_t *s, const char *o, size_t ol, uint64_t gen, uint64_t *wait);
/* Owner o's mark as it is (0: none): equal to a generation seen earlier, none of o's file
 * records was put or deleted since. */
uint64_t st_tier_dirty_gen(st_store_t *s, const char *o, size_t ol);
/* The observer of file records (one a process; NULL: none): told of every file record put (put
 * true: a new object) or deleted (an object out of the manifest) on the loop — a swap (flush,
 * compaction, fold, retention) and st_tier_forget (erasure) — in the batch that writes it, so
 * what it stages goes with the record (the tables' pending count, issue 48). Not told of
 * st_tier_rebuild_owner (offline; rebuild-meta recounts). o and key are borrowed for the call. */
typedef void (*st_tier_file_obs_fn)(st_store_t *s, const char *o, size_t ol, const char *key,
                                    bool put, uint64_t *wait);
void st_tier_on_file(st_tier_file_obs_fn fn);
/* A number that changes whenever a batch that wrote a file record commits (st_store_writes_of):
 * a watcher of every manifest (the tables' commit) that sees it unchanged may skip its walk. */
uint64_t st_tier_manifest_writes(const st_store_t *s);
/* rebuild-meta (offline): puts objs[0..n) (borrowed) into the owner's manifest, each under its
 * seq, then sets *st's files, rows and bytes to those of every file record the owner's manifest
 * now holds (those it held before and objs does not list too), raises its watermark to each
 * record's max_id and its next_seq past each seq (a higher one *st held stays: the store's, or
 * the kind's own), and writes *st as the owner's summary. */
int st_tier_rebuild_owner(st_store_t *s, const char *o, size_t ol, const st_tier_obj_t *objs,
                          size_t n, st_tier_stat_t *st, uint64_t *wait);

/* ---- the compaction engine: an owner's small objects merged into larger ones ---- */
/* The tier plans which neighbours to merge, records the new object ('P', with a fresh number),
 * waits until that record is durable, has the kind merge on a worker (SCHED_IDLE), then swaps in
 * ONE batch: the new object in the manifest ('F' under the first old one's number), the old ones
 * out with their deletion recorded ('D'), 'P' out, 'W' adjusted, and the kind's side (rows left
 * out by retention out of its counts). A failure is the flush's: the object written, if any, is
 * an orphan swept by its 'P'. One compaction at a time, paced like flushes (the next waits twice
 * as long as the last took), none while the hot store is filling up or the store is held. */
typedef struct {
    /* On a worker: reads objects objs[0..n) and writes one object under key with their rows,
     * leaving out rows older than cutoff (µs; 0: none); sets out->min_id, max_id, rows and size
     * (rows 0: every row was left out, nothing written). *dropped: the kind's note of what it left
     * out (owned; given to commit, then release); *ndropped: rows. */
    int (*merge)(void *arg, const char *o, size_t ol, st_objstore_t *obj, const st_tier_obj_t *objs,
                 size_t n, int64_t cutoff, const char *key, st_tier_file_t *out, void **dropped,
                 int64_t *ndropped);
    /* On the loop, in the swap batch, before the manifest changes: the rows left out leave the
     * kind's counts (dropped may be NULL: nothing was). */
    int (*commit)(void *arg, const char *o, size_t ol, void *dropped, int64_t ndropped,
                  uint64_t *wait);
    void (*release)(void *arg, void *dropped);
    /* The key of the merged object that takes first_key's place (seq: its manifest number, pseq:
     * the fresh number that makes the key unique, writer: the incarnation it names). */
    void (*name)(void *arg, const char *o, size_t ol, const char *first_key, uint64_t seq,
                 uint64_t pseq, uint64_t writer, st_buf_t *key);
    void *arg;
    /* Optional, on the loop in the swap batch: whether the merge changed a row's values (a fold
     * of edits or deletes, SPEC §2.2) or left a row out for a reason other than retention; the
     * tier then tells st_tier_on_rows_changed's observer (a table commit is then an overwrite,
     * not a replace, SPEC v5 §5.1). NULL: never. */
    bool (*changed)(void *arg, const void *dropped);
} st_tier_merge_t;

/* Why an owner is queued for compaction: after a flush (merged if it holds more than the limit of
 * small objects), a major compaction (POST /v1/admin/compact: planned again after each merge, it
 * ends with as few objects as the size cap allows), its oldest object mixing expired and live
 * rows (rewritten alone). */
enum {
    ST_TIER_COMPACT_AUTO = 0,
    ST_TIER_COMPACT_MAJOR = 1,
    ST_TIER_COMPACT_EXPIRE = 2,
    ST_TIER_COMPACT_FOLD = 4 /* rewrite the objects the kind's fold_pick names, one at a time */
};

/* Which neighbours of f[0..n) (manifest order) to merge next: [*from, *to), an object of at most
 * max_bytes (flags: ST_TIER_COMPACT_*). Pure. */
bool st_tier_compact_plan(const st_tier_file_t *f, size_t n, size_t limit, uint64_t max_bytes,
                          int flags, size_t *from, size_t *to);

/* ---- the tier ---- */

typedef struct {
    st_objstore_t *obj;         /* borrowed; must outlive the tier */
    uint64_t flush_interval_s;  /* a pass this often (0: 300) */
    uint64_t flush_rows;        /* an owner is flushed once it has this many hot rows (0: 10000) */
    uint64_t cache_bytes;       /* cold footers and decoded row groups kept for reads */
    uint64_t retention_s;       /* rows older are dropped (compaction leaves them out); 0: keep */
    uint64_t compact_objects;   /* merge an owner's small objects once it has more; 0 = 8 */
    uint64_t compact_max_bytes; /* no merge writes a larger object; 0 = 256 MiB */
} st_tier_opts_t;

/* ---- rebuild-meta: a kind's records made again from the cold tier (offline, no tier open) ----
 * The truth of what is live is the current snapshot of the kind's Iceberg table (SPEC v5 §5.1):
 * its data files, as keys of the cold store (src/tables/truth.c reads them). */
typedef struct {
    bool known;  /* a snapshot was read: keys is the truth; false: no table (list the bucket) */
    char **keys; /* the cold store's keys, sorted by strcmp; owned */
    size_t n;
    /* The keys an older snapshot the table keeps names and the current one does not (replaced
     * by a compaction or fold, taken out by a delete or retention), sorted; owned. Names never
     * repeat, so none of them is live again: a rebuild never takes one back. */
    char **dropped;
    size_t ndropped;
} st_tier_named_t;
void st_tier_named_free(st_tier_named_t *nm);

/* Which of one owner's objects in the bucket a rebuild takes: keys[0..n), all in the owner's
 * folder (the key up to its last '/'), into keep[i]; returns how many. With no table (nm NULL or
 * not known) every one. Otherwise never one nm->dropped holds (an older kept snapshot named it,
 * the current one does not: an owner a delete emptied stays empty), each the snapshot names,
 * and, of the others, those
 * flushed after that snapshot was committed: a number (st_tier_key_version) above every object
 * of the owner the snapshot names. Never one below: a compaction or fold replaced it, or a
 * delete took it out (the kind's own checks still drop a replaced object a later one repeats).
 * An owner the snapshot names nothing of keeps every object (a first flush after the commit);
 * one whose named objects are missing from the bucket (replaced after the commit and deleted
 * already) keeps every object too, for the kind's checks to sort out. Pure. */
size_t st_tier_rebuild_pick(const st_tier_named_t *nm, const char *const *keys, size_t n,
                            bool *keep);
/* The manifest number an object key ends with: "-{n}.parquet", or "-{seq}.{n}.parquet" (a
 * compaction's or fold's fresh number n); 0 when it has none. An owner's numbers only grow. */
uint64_t st_tier_key_version(const char *key);

typedef struct {
    st_store_t *store;  /* the store being rebuilt (borrowed) */
    st_objstore_t *obj; /* the cold tier (borrowed) */
    bool adopt;         /* the store had no writer record when the rebuild began */
    /* The data files the current snapshot of the table of owners tagged tag names; NULL when
     * the tag is no table's (its objects are listed, as they are without a table). */
    const st_tier_named_t *(*named)(void *arg, char tag);
    void *arg;
    char line[256]; /* the member's summary for the user ("" none): printed once durable */
} st_tier_rebuild_t;
/* Keeps of a kind's listed objects v[0..n) (elements of size bytes, each with its owned key, a
 * char *, at key_off; an owner's objects contiguous, in one folder) those st_tier_rebuild_pick
 * keeps, each owner against the table rb->named gives for tag_of(its key), in order; the others'
 * keys are freed. Logs how many were left out; returns how many are kept (the new count). */
size_t st_tier_rebuild_filter(st_tier_rebuild_t *rb, char (*tag_of)(const char *key), void *v,
                              size_t n, size_t size, size_t key_off);
/* The writers of a kind's listed objects v[0..n) (as above): *one the incarnation the first key
 * naming one names (st_tier_key_incarnation), *other the first that names another (the walk
 * stops there); 0 when none. A store lost without a backup that knew its writer adopts *one
 * (st_tier_writer_adopt) when *other is 0; with several, which were its own cannot be told. */
void st_tier_rebuild_writers(const void *v, size_t n, size_t size, size_t key_off, uint64_t *one,
                             uint64_t *other);

/* A data kind (or any module with background work on the hot store) as the tier sees it. Filled
 * and owned by its module; borrowed by the tier until closed(arg). Any part may be NULL/0. */
typedef struct st_tier_member {
    const char *name;
    char tag; /* the manifest owners of its flush side (st_tier_owner); one member per tag */
    st_tier_source_t *sources; /* its pass sources (an array of nsources) */
    size_t nsources;
    const st_tier_kind_t *flush; /* its flush side; orphans/flushed/done may be NULL (the tier's) */
    const st_tier_merge_t *merge; /* its compaction side (with a flush side) */
    /* The columns of its objects: the tier reads their footers (retention, st_tier_footers_ready)
     * and row groups (st_tier_scan with no schema of its own) through it. */
    const st_pq_schema_t *schema;
    /* Retention: an expired object (f: its footer, borrowed for the call) leaves the manifest;
     * stage its rows out of the kind's counts. NULL: the kind's objects are not retained (the
     * tier dates rows by the schema's first top-level TIMESTAMP_US column with statistics). */
    int (*expired)(void *arg, const char *o, size_t ol, const st_pq_file_t *f, uint64_t *wait);
    /* Optional, merge-on-read kinds (chat's edits, SPEC §2.2). On the loop as a merge of the
     * owner's objects objs[0..n) begins (rows older than cutoff, µs, are left out): the kind's note
     * of the changes to fold into their rows (owned; its merge finds it in *dropped on entry, and
     * what it leaves in *dropped goes to commit and release as always). */
    void *(*fold_prepare)(void *arg, const char *o, size_t ol, const st_tier_obj_t *objs, size_t n,
                          int64_t cutoff);
    /* Optional, with fold_prepare: the note goes on being prepared on the loop, a slice a turn,
     * until this returns true (the merge waits for it). until is a uv_hrtime() deadline: stop at
     * it, after one slice at least. A slice reads the records it folds in id order, each row's
     * marker before its state, so a change that lands between slices is either in the note or
     * left marked for the next fold (SPEC §5.1: exact at every snapshot). */
    bool (*fold_more)(void *arg, void *note, uint64_t until);
    /* For ST_TIER_COMPACT_FOLD: which object of objs[0..n) (manifest order) to rewrite alone so
     * that changes are folded in; false when none needs it. On the loop. */
    bool (*fold_pick)(void *arg, const char *o, size_t ol, const st_tier_obj_t *objs, size_t n,
                      size_t *at);
    /* Optional: every tick of the tier (about once a second, on the loop, only where the tier
     * flushes: a group's leader) — a member's own deadlines that must hold whatever
     * --flush-interval is (chat: cold changes folded within --delta-max-age). Keep it to a page
     * of keys: it runs inside the tick. */
    void (*tick)(void *arg);
    /* Optional: `strata rebuild-meta` (offline: no tier runs, the member was made without one):
     * stages the kind's records in rb->store from the objects in rb->obj that the tables name
     * (st_tier_rebuild_pick), merged with what the store holds. Members are called in the order
     * they are listed (kinds.h); a kind whose rebuild another's covers leaves it NULL. */
    int (*rebuild)(void *arg, st_tier_rebuild_t *rb, uint64_t *wait);
    /* The tier stops: give up waits on the cache (it closes right after) and stop reading. */
    void (*stop)(void *arg);
    /* The tier is done with the member (every job back): it may be freed. */
    void (*closed)(void *arg);
    void *arg;
    st_list_t link; /* in the tier's list */
} st_tier_member_t;

/* Opens the tier on store (borrowed, must outlive it) and starts its tick. *out is owned:
 * st_tier_close, run the loop, st_tier_free. */
int st_tier_open(st_tier_t **out, uv_loop_t *loop, st_store_t *store, const st_tier_opts_t *o);
/* The observer of compactions whose merge changed rows (st_tier_merge_t.changed): fn gets the new
 * object's key on the loop, in the swap batch (its writes land with the new manifest). One
 * observer; NULL: none. */
void st_tier_on_rows_changed(st_tier_t *t, void (*fn)(void *arg, const char *key, uint64_t *wait),
                             void *arg);
/* The observer of an erasure's objects: fn gets owner o's object key on the loop, in the batch
 * that records its deletion at once — out of the manifest (the kind calls st_tier_erased) or let
 * go from a hold (st_tier_unhold) — so the tables expire every snapshot that may name it with the
 * next commit (SPEC v5 §5.1; other deletions wait for --table-keep). One observer; NULL: none. */
typedef void (*st_tier_erased_fn)(void *arg, const char *o, size_t ol, const char *key,
                                  uint64_t *wait);
void st_tier_on_erased(st_tier_t *t, st_tier_erased_fn fn, void *arg);
/* Tells t's erasure observer (t NULL, or none: nothing) that an erasure deletes owner o's object
 * key: call it in the batch that records the deletion. */
void st_tier_erased(st_tier_t *t, const char *o, size_t ol, const char *key, uint64_t *wait);
/* Adds a member (borrowed until its closed callback); then finishes what a crash left (orphans
 * of interrupted flushes and compactions, deletions recorded but not done). NULL: no-op. */
void st_tier_join(st_tier_t *t, st_tier_member_t *m);
/* The tier's cold cache, for a kind's reads (NULL once the tier stops). */
st_coldcache_t *st_tier_cache(st_tier_t *t);
/* The hold on deletions of replaced objects (SPEC v5 §5.1, §9): cutoff(arg) as in
 * st_tier_reaper_hold. */
void st_tier_set_hold(st_tier_t *t, int64_t (*cutoff)(void *arg), void *arg);
/* Whether the tier is stopping (a kind's background work gives up). */
bool st_tier_stopping(const st_tier_t *t);
/* Rows older than this (µs since the epoch) are expired: now - retention, or 0 (none). */
int64_t st_tier_cutoff(const st_tier_t *t);
/* The one signal of the hot path: the owner now holds `total` rows (hot and cold). From
 * --flush-rows rows up the owner is only marked due (no store read, no flush engine inside the
 * request); the tier's own handle then queues a flush once total less the cold rows reaches
 * --flush-rows, and starts flushes. */
void st_tier_posted(st_tier_t *t, const char *o, size_t ol, int64_t total);
/* Queues a flush of the owner now (a pass source that found it due; counted in the pass's
 * st_tier_flush_all answer). */
void st_tier_enqueue(st_tier_t *t, const char *o, size_t ol);
/* Starts a pass (every source's work; flushes of every owner with hot rows, not only those due)
 * or queues one more; returns how many owners this pass has queued so far. */
size_t st_tier_flush_all(st_tier_t *t);
/* Queues a compaction of the owner (flags ST_TIER_COMPACT_*); o NULL: a major compaction of
 * every owner with cold objects, walked in pages with at most a few thousand queued at once
 * (src/cold/compact.c). Returns how many owners were queued now: 1 for one owner; for every
 * owner, those the first pages took (every owner of a small store; 0 if a walk already runs,
 * which then goes once more). A major one starts now, others at the next tick. */
size_t st_tier_compact(st_tier_t *t, const char *o, size_t ol, int flags);
/* Requests and streams: a read that returned ST_EPARKED parks and calls st_tier_wait: done(arg)
 * runs on the loop once the data is in memory, where it stays until st_tier_release(*w); the
 * caller re-runs the read (which may park again, with the same *w). Returns false when there is
 * nothing to wait for (or the tier is stopping): re-run at once. done NULL: a prefetch. Release
 * *w (NULL is fine) once the read completed or was abandoned; t NULL is a no-op for both. */
bool st_tier_wait(st_tier_t *t, st_coldwait_t **w, void (*done)(void *arg), void *arg);
void st_tier_release(st_tier_t *t, st_coldwait_t *w);
/* Retention (SPEC §6): drops the owner's objects whose newest row is past the retention, whole,
 * oldest first (the member's expired hook, then the tier's swap: out of the manifest, deletion
 * recorded); the oldest object mixing expired and live rows is queued for compaction
 * (ST_TIER_COMPACT_EXPIRE). Footers not in memory are fetched first, a few owners at a time, and
 * the owner is retained again once they are in. Returns how many objects were dropped now. */
size_t st_tier_retain(st_tier_t *t, const char *o, size_t ol);
/* ---- any kind's rows, through its schema (scan.c, pq_merge.c) ---- */
/* A kind gives its schema (its sort_leaf: a top-level REQUIRED INT64
 * leaf, the row's id, with statistics) and reads its cold rows as decoded row groups
 * (st_pq_table_t, walked with st_pq_cur_*); the tier prunes by the id statistics, caches, parks
 * and merges, knowing nothing of the columns. */
typedef ST_VEC(uint64_t) st_tier_ids_t;
typedef struct {
    const st_pq_schema_t *schema; /* NULL: the owner's member's (st_tier_member_t.schema) */
    uint64_t lo, hi;              /* the ids wanted: lo < id < hi (0 = open) */
    size_t need;                  /* kept rows wanted, highest ids first */
    size_t budget;                /* rows looked at, at most, in whole row groups (0: no limit) */
    /* Each row group read: the kind walks its rows (some may lie outside (lo, hi): it skips
     * them) and pushes onto *kept the id of every row it keeps. Non-zero stops the scan. */
    int (*group)(void *arg, const st_pq_table_t *tab, st_tier_ids_t *kept);
    void *arg;
} st_tier_scanq_t;
/* Hands the kind the owner's row groups that can hold ids in (lo, hi), highest ids first, until
 * it kept `need` rows that no row group left could beat, or the budget is spent. *frontier: every
 * id >= it in (lo, hi) was handed over (0: all of them). ST_EPARKED when some of it is not in
 * memory (st_tier_wait, then re-run: the kind drops what it was given); ST_ECOLD when an object
 * cannot be read. */
int st_tier_scan(st_tier_t *t, const char *o, size_t ol, const st_tier_scanq_t *q,
                 uint64_t *frontier, uint64_t *wait);
/* The row id (the sort leaf's value) of row i of a table (0 if the table has no such column). */
uint64_t st_tier_row_id(const st_pq_schema_t *s, const st_pq_table_t *tab, size_t i);
/* A merge side for any schema (st_tier_merge_t.merge of a kind that keeps no counts): the
 * objects' rows, decoded and written again sorted by id (group_rows rows a row group at most),
 * into key; no row is left out (no retention). */
int st_tier_pq_merge(const st_pq_schema_t *s, size_t group_rows, int zstd_level, st_objstore_t *obj,
                     const st_tier_obj_t *objs, size_t nold, const char *key, st_tier_file_t *out);

/* The same, with a kind's hooks: each row read is handed to row (on the worker, before the sort)
 * as its values in schema order, depth first (a flat schema: one per top-level field); the kind
 * may change values in place (a string it points elsewhere must live until the merge returns; the
 * id must stay) or return false to leave the row out (its to account for). A top-level field's
 * value may take another shape (a list of another length, a null for a struct): its first value
 * becomes ST_TIER_V_SPLICE, sub pointing at the n values that replace the whole field's (in schema
 * order, depth first; copied when the hook returns, their strings kept until the merge returns).
 * An ST_PQ_ADDED field an older object lacks comes as a null the kind may fill in (it must, for
 * a REQUIRED one). by_key: rows sorted by the key leaf (a top-level leaf with only leaves before
 * it), then id, so that each key gets its row groups; otherwise by id alone. out: the schema the
 * merged object is written with (NULL: s), of s's shape (only names and field ids may differ). */
enum {
    ST_TIER_V_NULL,
    ST_TIER_V_INT,
    ST_TIER_V_STR,
    ST_TIER_V_STRUCT,
    ST_TIER_V_LIST,
    ST_TIER_V_SPLICE
};
typedef struct st_tier_val st_tier_val_t;
struct st_tier_val {
    uint8_t op; /* ST_TIER_V_* */
    uint32_t n; /* a string's length, a list's count, a splice's values */
    int64_t i;  /* an INT64, INT32 or BOOLEAN value */
    union {
        const char *p;            /* a string's bytes */
        const st_tier_val_t *sub; /* a splice's values (borrowed) */
    };
};
typedef struct {
    size_t group_rows; /* rows a row group at most (0: no limit but the key) */
    int zstd_level;
    bool by_key;
    bool (*row)(void *arg, st_tier_val_t *v, size_t nv);
    void *arg;
    const st_pq_schema_t *out;
} st_tier_pqmerge_t;
int st_tier_pq_merge_with(const st_pq_schema_t *s, const st_tier_pqmerge_t *o, st_objstore_t *obj,
                          const st_tier_obj_t *objs, size_t nold, const char *key,
                          st_tier_file_t *out);

/* Every footer of the owner's manifest man in memory (parsed against its member's schema: ST_OK),
 * or ST_EPARKED with those that are not on the cache's want list; another code when one cannot be
 * read. */
int st_tier_footers_ready(st_tier_t *t, const char *o, size_t ol, const st_tier_manifest_t *man);
/* Stops: no more passes, flushes or compactions start; held ones are dropped (their 'P' records
 * wait for start-up), those in flight come back while the loop runs; members are stopped, then
 * told closed. NULL: no-op. */
void st_tier_close(st_tier_t *t);
/* Frees the tier after st_tier_close and a run of the loop (or once it is done). NULL: no-op. */
void st_tier_free(st_tier_t *t);

#endif
