/* SPDX-License-Identifier: MIT */
/*
 * The tier's internals shared by its files: the compaction engine (compact.c), driven by the tier
 * object (tier.c) beside the flush engine (flush.c), the reaper (reaper.c), the pass (pass.c) and
 * the cold cache (cache.c). Loop thread only.
 */
#ifndef STRATA_COLD_INTERNAL_H
#define STRATA_COLD_INTERNAL_H

#include "strata/tier.h"

typedef struct st_tier_compact st_tier_compact_t;

#define ST__FLUSHERS_MAX 8 /* kinds with a flush side */

/* The tier (tier.c opens and closes it; its parts read it). */
struct st_tier {
    uv_loop_t *loop;
    st_store_t *store;
    st_objstore_t *obj; /* borrowed */
    uint64_t flush_rows, retention_us;
    bool stopping, urgent;
    bool done, free_asked; /* every part closed; st_tier_free called */
    int closed_parts;
    uv_timer_t tick;
    st_map_t due;    /* st_tier_due_t: owners a post made due, looked at on the next turn */
    uv_idle_t due_h; /* runs while due holds any */
    uint64_t interval_ms, next_interval_ms, next_full_ms;
    st_tier_flush_t *flush;
    st_tier_compact_t *compact;
    st_tier_reaper_t *reaper;
    st_tier_pass_t *pass;
    st_coldcache_t *cache; /* NULL once stopping */
    st_store_listener_t listener;
    st_list_t members;                                  /* st_tier_member_t, by link */
    const st_tier_member_t *flushers[ST__FLUSHERS_MAX]; /* members with a flush side, one a tag */
    size_t nflushers;
    st_tier_kind_t fkind;  /* the flush engine's kind: the tier's, handing each owner to its own */
    st_tier_merge_t mkind; /* the compaction engine's, likewise */
    void (*rows_changed)(void *arg, const char *key, uint64_t *wait); /* st_tier_on_rows_changed */
    void *rows_changed_arg;
    st_tier_erased_fn erased; /* st_tier_on_erased */
    void *erased_arg;
    size_t pass_queued; /* flushes queued by this pass so far */
    st_metric_t *m_orphans, *m_retained;
    /* retention: owners waiting for their footers (retention.c), queued first */
    st_list_t ret_queue; /* st_tier_retry_t, in order */
    st_map_t ret_users;  /* queued or being fetched */
    size_t ret_fetching;
    /* start-up: the stats records an older binary left without their file record, swept in
     * slices from the tick (tier.c, st__tier_isweep) */
    st_store_walk_t isweep;
    bool isweeping;
    size_t iswept;
};

/* A manifest record's key into k (ST__TIER_MKEY_MAX bytes): ks owner, then (has_seq) 0 be64 seq
 * (manifest.c). Only the tier builds these keys: kinds go through the services in strata/tier.h. */
#define ST__TIER_MKEY_MAX (ST_TIER_OWNER_MAX + 10)
size_t st__tier_mkey(uint8_t *k, char ks, const char *o, size_t ol, bool has_seq, uint64_t seq);

/* The column stats of owner o's file record seq (colstats.c): 'I' o 0 seq -> key 0 stats, staged
 * in every batch that puts the record (sl 0: deleted instead, so that no stats left under the
 * number by an older binary stay) and deleted in every batch that deletes it. */
int st__tier_stats_put(st_store_t *s, const char *o, size_t ol, uint64_t seq, const char *key,
                       const uint8_t *stats, size_t sl, uint64_t *wait);
int st__tier_stats_del(st_store_t *s, const char *o, size_t ol, uint64_t seq, uint64_t *wait);
/* Stages the deletion of the owner's stats records that name no object of its manifest m (the
 * whole of it, read in this turn): the orphans an older binary left. One scan of the owner's. */
int st__tier_stats_sweep(st_store_t *s, const char *o, size_t ol, const st_tier_manifest_t *m,
                         uint64_t *wait);
/* Stages the deletion of every owner's stats records whose file record is missing or names
 * another object (an erasure or compaction by an older binary left them: SPEC §2.2, nothing
 * naming an erased user stays), pages of `page` keys from where walk stopped until the loop time
 * `until` (ns, uv_hrtime) has passed, the first page whatever the time. Sums the deletions into
 * *deleted. Returns 1 while keys are left, 0 at their end, < 0 the store's error (the walk stays
 * after the last page read: the next call goes on from there). Loop thread only. */
int st__tier_stats_orphans(st_store_t *s, st_store_walk_t *walk, size_t page, uint64_t until,
                           size_t *deleted);

/* Stages owner o's dirty mark (dirty.c, strata/tier.h): in every batch that puts or deletes one of
 * its 'F' records. */
int st__tier_dirty(st_store_t *s, const char *o, size_t ol, uint64_t *wait);
/* Tells the file observer (st_tier_on_file) of one file record put or deleted: in that batch. */
void st__tier_file_changed(st_store_t *s, const char *o, size_t ol, const char *key, bool put,
                           uint64_t *wait);

/* The member whose flush side owns the owner o (its tag), or NULL (no such kind joined). */
const st_tier_member_t *st__tier_member(const st_tier_t *t, const char *o, size_t ol);

/* retention.c: whole objects past the retention out of the manifest (st_tier_retain); the owners
 * waiting for their footers forgotten (their fetches cancelled), before the cache goes. */
void st__tier_retain_stop(st_tier_t *t);

typedef struct {
    size_t limit;          /* small objects an owner may hold before a merge (0: 8) */
    uint64_t max_bytes;    /* no merge writes a larger object (0: 256 MiB) */
    uint64_t retention_us; /* rows older are left out of a merged object (0: keep) */
    /* the members' fold hooks (st_tier_member_t.fold_prepare, fold_pick), through the tier */
    void *(*prepare)(void *arg, const char *o, size_t ol, const st_tier_obj_t *objs, size_t n,
                     int64_t cutoff);
    bool (*fold_pick)(void *arg, const char *o, size_t ol, const st_tier_obj_t *objs, size_t n,
                      size_t *at);
    bool (*more)(void *arg, void *dropped, uint64_t until); /* fold_more: true when done */
    void *hook_arg;
} st_tier_compact_opts_t;

/* t (its orphan sweep), store, obj and merge are borrowed (they must outlive the engine). */
void st__tier_compact_open(st_tier_compact_t **out, st_tier_t *t, uv_loop_t *loop,
                           st_store_t *store, st_objstore_t *obj, const st_tier_merge_t *merge,
                           const st_tier_compact_opts_t *o);
/* Queues the owner (flags ST_TIER_COMPACT_*; AUTO only once it holds more than the limit). */
void st__tier_compact_enqueue(st_tier_compact_t *c, const char *o, size_t ol, int flags);
/* Every owner with cold objects, for a major compaction, walked in pages as the queue drains;
 * returns how many the first pages queued (see st_tier_compact). */
size_t st__tier_compact_all(st_tier_compact_t *c);
/* Starts the next compaction unless one runs, it is paced, urgent or the store is held. */
void st__tier_compact_pump(st_tier_compact_t *c, bool urgent);
/* A batch is durable: a compaction waiting for its 'P' record may start writing. */
void st__tier_compact_durable(st_tier_compact_t *c, uint64_t id);
/* Whether the 'P' record (o, pseq) is the running compaction's (not an orphan). */
bool st__tier_compacting(const st_tier_compact_t *c, const char *o, size_t ol, uint64_t pseq);
/* Stops: a job not yet on a worker is dropped (its 'P' waits for start-up); freed once the job
 * in flight is back, then closed(arg). */
void st__tier_compact_close(st_tier_compact_t *c, void (*closed)(void *arg), void *arg);

/* ---- the intent protocol (intent.c): one for flushes and compactions ---- */
/* Stages the intent to write object seq under key ('P'), with st->next_seq moved past seq and
 * the owner's summary st written back. */
int st__tier_intend(st_store_t *s, const char *o, size_t ol, uint64_t seq, const st_buf_t *key,
                    st_tier_stat_t *st, uint64_t *wait);
/* One swap batch (pseq 0: no intent, retention's drop): the new object (file, key; none when
 * file->rows is 0) in under fseq, the objects replaced (old[0..nold)) out, the intent pseq dropped,
 * the summary moved (watermark: raised to file->max_id, a flush), and kind(arg, wait) staged first
 * (it may fill *file). */
typedef struct {
    uint64_t pseq, fseq;
    const st_tier_obj_t *old;
    size_t nold;
    st_tier_file_t *file;
    const char *key;
    const uint8_t *stats; /* the new object's column stats (colstats.c; stats_len 0: none) */
    size_t stats_len;
    bool watermark;
    int (*kind)(void *arg, uint64_t *wait);
    void *arg;
} st_tier_swap_t;
/* ST_ECONFLICT (nothing staged) when the intent or an old object is gone. */
int st__tier_swap(st_store_t *s, const char *o, size_t ol, const st_tier_swap_t *sw,
                  uint64_t *wait);
/* A job whose swap did not happen: its object is doomed if its intent is gone (the owner's sweep,
 * run next by the caller, takes it otherwise). */
int st__tier_abandon(st_store_t *s, const char *o, size_t ol, uint64_t pseq, const char *key,
                     uint64_t *wait);

/* A job whose key held another object (ST_EEXIST): its intent goes without dooming the object
 * there, whoever wrote it. */
int st__tier_collided(st_store_t *s, const char *o, size_t ol, uint64_t pseq, uint64_t *wait);

/* Stages 'D' for the owner's objects that a flush or compaction began but never recorded ('P'
 * without 'F', none in flight) and drops those 'P' records (tier.c). */
int st__tier_orphans(st_tier_t *t, const char *o, size_t ol, uint64_t *wait);

#endif
