/* SPDX-License-Identifier: MIT */
/*
 * chat internals shared by its files: posting and reading (chat.c), the key layout (keys.c),
 * cold reads (cold_read.c), and chat's side of the cold tier: its member (flush.c: the flush
 * side; pass.c: its sources; compact.c: the merge side; retention.c, evict.c, recount.c).
 *
 * Hot keys (u = user, c = conversation part, id = 8-byte big-endian msg_id):
 *   'M' u 0 id        message record: i64 timestamp | i64 seq | the message's JSON
 *   'N' u 0 c 0 id    a conversation's messages (index)
 *   'C' u 0 c         conversation record (hybrid: cold baseline + hot increment)
 *   'U' u 0 ~upd c    conversations newest-updated first (value: the conversation id)
 *   'T' u             user totals
 *   'Z' u 0 id        delta of a cold message (edit.c): u16 conv length | conv | its JSON now
 *   'e' u 0 id        a cold change not folded into its object yet (compact.c): i64 its time
 *   'z' u 0 seq       an object holding a deleted conversation's rows (compact.c): i64 time
 *   'f' u 0 id        a delta not in a delta object yet (delta.c)
 *   'h' u 0 id        a hot message edited or deleted (edit.c): its flush keeps a delta
 *   'Y' u 0 id        a tombstone (hot or cold): the conversation id (recounts subtract them)
 *   'X' u             i64: the user's cold rows that are no live message (tombstones, masked)
 *   'Q' u 0 c         a deleted conversation: u64 its last msg_id | i64 its last seq (cold rows
 *                     up to that id are masked; a new one of the name goes on from that seq)
 *   'G' u             the user is being erased (erase.c): u64 erasure id
 *   'R' u 0 c         empty: c may have cold rows (marks.c; written in the batch that records
 *                     an object holding rows of c; removed by c's delete and by an erasure)
 *   'L' u             empty: the owner's 'R' markers are complete (set by its first flush or
 *                     rebuild-meta): without it, an absent marker proves nothing (older stores)
 *   "\0chat_backfill"  the marks backfill's walk (backfill.c): 'd' (done) or 'w' | u32 owners its
 *                     walk found without marks so far | the owner its next page starts at
 * Cold tier keys ('W', 'F', 'I', 'P', 'D', owner = user) are the tier's manifest records: see
 * strata/tier.h, which owns them and the protocol around them; chat reads and changes them only
 * through the tier's services (st_tier_stat, st_tier_manifest, st_tier_forget, ...).
 * The flush invariant: every cold msg_id of a user is <= its watermark < every hot msg_id, and
 * a flush moves rows by one atomic batch (manifest record in, hot rows out, counts moved from
 * hot to the cold baseline), so a read sees each message exactly once, before or after.
 */
#ifndef STRATA_CHAT_INTERNAL_H
#define STRATA_CHAT_INTERNAL_H

#include "strata/chat.h"
#include "strata/chatrows.h"
#include "strata/cold.h"
#include "strata/iceberg.h"
#include "strata/metrics.h"
#include "strata/tier.h"

#define ST__KEY_CAP 600

typedef struct st_chatcold st_chatcold_t;

struct st_chat {
    st_store_t *store;
    st_snowflake_t ids;
    st_observers_t observers;      /* of posted messages (st_chat_observer_fn) */
    st_chatcold_t *cold;           /* NULL until chat joins a tier, and once it stops */
    st_observers_t changes;        /* of edits, deletes, erasures (st_chat_change_fn) */
    size_t max_history;            /* --max-edit-history */
    uint64_t erase_within_us;      /* --erase-within */
    uint64_t erase_late_id;        /* the last erasure reported late */
    bool revoke_checked;           /* erase.c: every erasure record has its revocation record */
    st_observers_t erase_hooks;    /* st_chat_on_erase: what others keep of a user */
    st_chat_expired_fn expired_fn; /* st_chat_on_expired (retention.c) */
    void *expired_arg;
    /* erase.c: where the pending erasure's walk of the user's keys got to (its id, the key
     * range, the last key taken); a hint only: lost at a restart, the walk starts over */
    struct {
        uint64_t id;
        size_t range, kl;
        uint8_t key[ST__KEY_CAP];
    } erase_at;
};

typedef struct {
    uint64_t first, last;
    int64_t created, updated;
    int64_t hot_total, base_total;
    /* the highest seq ever issued in the conversation: the next post takes last_seq + 1, so
     * no count moving (retention, repair, re-warm) ever makes a seq come again */
    int64_t last_seq;
} st_conv_t;
#define ST__CONV_V1_SIZE 48 /* records written before last_seq: last_seq = the count */

typedef struct {
    int64_t total, conversations;
} st_totals_t;

/* What of a user is cold ('W'), and one of its objects ('F'): the tier's manifest records. */
typedef st_tier_stat_t st_coldstat_t;
typedef st_tier_file_t st_coldfile_t;

/* keys.c */
/* An owner's bytes (st_chat_owner_bytes, the `u` of chat's keys and the tier's manifest owner):
 * a user is its name as it is; a room the tier's owner of tag ST__ROOM_TAG, "~r" room (no name
 * holds '~', so no owner of one kind is one of another: the encoding data dirs and buckets have
 * always had). */
#define ST__ROOM_TAG 'r'
/* A user's bytes are its name: chat.h's functions that take a user name use it as they are. */
size_t st__chat_ukey(uint8_t *k, char ks, const char *u, size_t ul); /* ks u 0 */
size_t st__chat_conv_part(uint8_t *k, size_t ul, const char *c, size_t cl);
size_t st__chat_ckey(uint8_t *k, const char *u, size_t ul, const char *c, size_t cl);
size_t st__chat_nprefix(uint8_t *k, const char *u, size_t ul, const char *c, size_t cl);
size_t st__chat_ukey_upd(uint8_t *k, const char *u, size_t ul, int64_t updated, const char *c,
                         size_t cl);
int st__chat_get_fixed(st_store_t *s, const uint8_t *k, size_t kl, void *dst, size_t n,
                       uint64_t *wait);
/* A conversation record from its stored bytes (either layout); false if it is not one. */
bool st__chat_conv_decode(const void *val, size_t vlen, st_conv_t *cv);
/* The conversation record under the 'C' key k (either layout). */
int st__chat_conv_get(st_store_t *s, const uint8_t *k, size_t kl, st_conv_t *cv, uint64_t *wait);
/* Rewrites the user's totals ('T') as the sum of their conversation records: after a repair,
 * a rebuild or a retention pass changed counts other than by a post. */
int st__chat_refresh_totals(st_chat_t *c, const char *u, size_t ul, uint64_t *wait);
/* A room's objects (SPEC §2.1): shared/conversations/{room}/batch-…. */
#define ST__ROOM_FOLDER "shared/conversations/"
/* The object key of a user's file: {folder}/batch-{ts}-w{writer}-{seq}.parquet (writer: the
 * tier's incarnation in 16 hex digits; 0 leaves it out, as keys were before), where the folder is
 * the user name itself, or for a name starting with '.', that first dot written as '~' (so "." and
 * ".." stay names, not directories; '~' never occurs in a name, so no two names share a folder, and
 * the folder is never longer than the name: it fits every backend). A room writes under
 * ST__ROOM_FOLDER {room}. o: the owner's bytes (st_chat_owner_bytes). */
void st__chat_object_key(st_buf_t *b, const char *o, size_t ol, int64_t ts, uint64_t writer,
                         uint64_t seq);
/* The owner's bytes of an object key's folder (either encoding, including the older %2E one; a
 * room's folder gives the room's); false when the folder is no owner's. u holds
 * ST_CHAT_OWNER_MAX + 1 bytes. */
bool st__chat_folder_user(const char *key, size_t flen, char *u, size_t *ul);

/* erase.c: whether the owner u is being erased (*wait as st_chat_erasing's). */
bool st__chat_erasing(st_chat_t *c, const char *u, size_t ul, uint64_t *wait);
#define st__chat_erased(c, u, ul) st__chat_erasing((c), (u), (ul), &(uint64_t){0})
/* chat.c: st_chat_each of the owner u. */
int st__chat_each(st_chat_t *c, const char *u, size_t ul, const st_message_query_t *q,
                  st_chat_msg_fn fn, void *arg, bool *more, uint64_t *last, uint64_t *wait);

/* render.c: messages as JSON, their id member named for their owner's kind */
/* The id member's name of the owner u's messages (st_owner_id_field). */
const char *st__chat_id_field(const char *u, size_t ul);
/* Appends `","name":` (the member after a string one). */
void st__chat_put_member(st_buf_t *b, const char *name);
/* A message row rendered as the hot store renders it at post time, for the owner u. */
void st__chat_render_row(st_buf_t *b, const char *u, size_t ul, const st_msgrow_t *r);
/* Appends a stored message object of the owner u: as it is, or, a record of an owner of another
 * kind than users written before owners had kinds (its id member was "conversation_id"),
 * rendered again member by member with the kind's id member. */
void st__chat_put_json(st_buf_t *b, const char *u, size_t ul, const char *j, size_t n);
/* Whether a stored record is one st__chat_put_json renders again (not as it is). */
bool st__chat_json_legacy(const char *u, size_t ul, const char *j, size_t n);
/* The raw value (a JSON string) of a stored message's id member, under either name. */
bool st__chat_json_conv(const char *j, size_t n, const char **v, size_t *vl);

/* cold_read.c */
/* A user's manifest: its cold objects in file order (or reversed); the tier's. */
typedef st_tier_manifest_t st_manifest_t;
#define st__chat_manifest(c, u, ul, desc, out, wait)                                               \
    st_tier_manifest((c)->store, (u), (ul), (desc), (out), (wait))
#define st__chat_manifest_free st_tier_manifest_free
/* The parsed footer of an object (from the tier's cold cache, borrowed until the loop runs
 * again); ST_EPARKED when it is not in memory yet (now on the cache's want list), ST_ECOLD if it
 * cannot be read. */
#define st__chat_footer(cc, key, size, out)                                                        \
    st_chat_cold_footer(st_tier_cache((cc)->tier), (key), (size), (out))
/* cold_rows.c: a page of a user's cold messages in one conversation (conv NULL: all) with
 * lo < id < hi (0 = open), oldest or newest first, up to limit. one_conv: every row of the
 * owner is of conv (a room's), so the manifest's counts of rows are the conversation's. */
typedef struct {
    const char *conv;
    size_t cl;
    uint64_t lo, hi;
    bool desc;
    size_t limit;
    bool one_conv;
} st__chat_rowq_t;
typedef void (*st__chat_row_fn)(void *arg, const st_msgrow_t *r);
/* Calls fn with each row of the page (borrowed for the call); *more: rows remain past the last
 * one given (*last, its id). ST_EPARKED (nothing given) when some of it is not in memory (then
 * st_tier_wait); fn NULL only checks that. No tier, or a stopping one: nothing. */
int st__chat_cold_rows(st_tier_t *t, st_store_t *store, const char *o, size_t ol,
                       const st__chat_rowq_t *q, st__chat_row_fn fn, void *arg, size_t *given,
                       bool *more, uint64_t *last, uint64_t *wait);
/* Cold messages of a user (one conversation or all) with lo < msg_id < hi (0 = open), oldest or
 * newest first, up to limit, through fn. *more: rows remain past the last one given.
 * ST_EPARKED (nothing given) when some of it is not in memory; fn NULL only checks that. */
int st__chat_cold_each(st_chat_t *c, const char *u, size_t ul, const char *conv, size_t cl,
                       uint64_t lo, uint64_t hi, bool desc, size_t limit, st_chat_msg_fn fn,
                       void *arg, size_t *given, bool *more, uint64_t *last, uint64_t *wait);

/* edit.c: raw JSON of rendered messages (no parse: metadata is kept as the client wrote it). */
/* The raw value of a top-level member of the object j; false when absent. */
bool st__chat_jmember(const char *j, size_t n, const char *key, const char **v, size_t *vl);
/* The next element of a raw JSON array: *p at the array's '[' for the first, then where the
 * last call left it; false after the last (or when *p is at no array). */
bool st__chat_jnext(const char **p, const char *e, const char **v, size_t *vl);
/* history.c: the message JSON's edit_history (SPEC §2.2) as its row's (SPEC v5 §5.1): *nhist
 * entries at *hist (allocated from a with their strings, for a's life); false (null in the row)
 * when the JSON has none, a message never edited. */
bool st__chat_hist_of(const char *j, size_t n, st_arena_t *a, const st_msgedit_t **hist,
                      uint32_t *nhist);
/* edit.c: cur (a message's JSON) as the state a change makes of it: content and metadata
 * replaced, edited_at, deleted_at and history set; from null when unnamed. */
void st__chat_render_state(st_buf_t *b, const char *field, const char *cur, size_t n,
                           const char *content, size_t cl, const char *meta, size_t ml,
                           int64_t edited_at, int64_t deleted_at, bool unnamed,
                           const st_buf_t *hist);
/* mask.c: a room message (u: the room's owner bytes) whose author is being erased, as the
 * tombstone its erasure will make of it, into out; false when its author is not being erased,
 * out untouched unless *copied: then out holds j as it was (the author's look-up may reuse the
 * store's buffer j is in). cache: one per read, so each author is looked up once. */
typedef struct {
    st_map_t seen; /* author -> its erasure's time, 0: not being erased */
    ST_VEC(void *) nodes;
} st__mask_cache_t;
bool st__chat_mask(st_chat_t *c, st__mask_cache_t *cache, const char *u, size_t ul, const char *j,
                   size_t n, st_buf_t *out, bool *copied, uint64_t *wait);
void st__chat_mask_free(st__mask_cache_t *cache);
/* *j / *n (a room message's JSON) as every read shows it: st__chat_mask's tombstone or copy in
 * tmp (reset first; owned by the caller) and *j / *n pointed at it, else left as they are. */
void st__chat_mask_one(st_chat_t *c, st__mask_cache_t *cache, const char *u, size_t ul,
                       const char **j, size_t *n, st_buf_t *tmp, uint64_t *wait);
/* A walk that hands each message of one owner (u, ul), rendered, to the caller's fn(arg):
 * cold_read.c's cold rows as the hot store shows them, chat.c's room messages masked (mask.c).
 * buf: the rendering, reused for each message; the walk's starter frees it. */
typedef struct {
    st_chat_t *c;
    const char *u;
    size_t ul;
    st_chat_msg_fn fn;
    void *arg;
    st_buf_t buf;
} st__chat_walk_t;
/* Whether the message JSON is a tombstone (its deleted_at set). */
bool st__chat_json_dead(const char *j, size_t n);
/* The message JSON's edited_at or deleted_at (key), µs; 0 when null or absent. */
int64_t st__chat_json_time(const char *j, size_t n, const char *key);
/* A cold message's delta ('Z'): its JSON now (borrowed until the next store call). */
int st__chat_delta_get(st_chat_t *c, const char *u, size_t ul, uint64_t id, const char **json,
                       size_t *len, uint64_t *wait);
/* Stages a cold message's delta. */
int st__chat_delta_put(st_chat_t *c, const char *u, size_t ul, uint64_t id, const char *conv,
                       size_t cl, const char *json, size_t len, uint64_t *wait);
/* Whether the user has any deltas or deleted conversations (reads of cold rows then look). */
bool st__chat_has_prefix(st_chat_t *c, char ks, const char *u, size_t ul);
/* Tombstones of a conversation ('Y') with id <= wm (cold) and above (hot). */
int st__chat_dead_count(st_chat_t *c, const char *u, size_t ul, const char *conv, size_t cl,
                        uint64_t wm, int64_t *cold, int64_t *hot, uint64_t *wait);
/* The mask of a deleted conversation ('Q'): its last id and seq; ST_ENOTFOUND. */
int st__chat_mask_get(st_chat_t *c, const char *u, size_t ul, const char *conv, size_t cl,
                      uint64_t *last_id, int64_t *last_seq, uint64_t *wait);
/* Adds to the user's count of cold rows that are no live message ('X'). */
int st__chat_gone_add(st_chat_t *c, const char *u, size_t ul, int64_t by, uint64_t *wait);
int64_t st__chat_gone(st_chat_t *c, const char *u, size_t ul, uint64_t *wait);
/* The user's hot rows, about: its live messages less the live cold ones, and at least 1 while
 * it has hot records (tombstones count no message but are rows to flush). */
int64_t st__chat_hot_rows(st_chat_t *c, const char *u, size_t ul, int64_t total,
                          const st_coldstat_t *cs);
/* Marks a cold message's change as not folded into its object yet ('e': now). */
int st__chat_fold_mark(st_chat_t *c, const char *u, size_t ul, uint64_t id, uint64_t *wait);
/* Tells the change observers. */
void st__chat_changed(st_chat_t *c, const char *kind, const char *u, size_t ul, const char *conv,
                      size_t cl, uint64_t id, const char *json, size_t len, uint64_t wait);

/* recount.c: a conversation's record, from the hot store or, if it was evicted, rebuilt from
 * the cold tier's footers (*from_cold). ST_ENOTFOUND when neither knows it. */
int st__chat_conv_load(st_chat_t *c, const char *u, size_t ul, const char *conv, size_t cl,
                       st_conv_t *cv, bool *from_cold, uint64_t *wait);
/* marks.c: which conversations may have cold rows, from the hot store alone ('R', 'L'). */
/* Marks c as having cold rows (in the batch that records the object holding them). */
int st__chat_cold_mark(st_chat_t *c, const char *u, size_t ul, const char *conv, size_t cl,
                       uint64_t *wait);
/* Takes c's marker out (in the batch of its delete, which masks all its rows: marks.c). */
int st__chat_cold_unmark(st_chat_t *c, const char *u, size_t ul, const char *conv, size_t cl,
                         uint64_t *wait);
/* Records that every conversation of u with cold rows is marked (in the batch that makes it so). */
int st__chat_marks_complete(st_chat_t *c, const char *u, size_t ul, uint64_t *wait);
/* backfill.c: the tier's tick for chat (the fold sweep, then the backfill of owners' marks from
 * stores before them); the backfill's end at the tier's stop (its fetch given up). */
void st__chat_tick(void *arg);
void st__chat_backfill_open(st_chatcold_t *cc); /* its metrics */
void st__chat_backfill_tick(st_chatcold_t *cc);
void st__chat_backfill_stop(st_chatcold_t *cc);
/* An owner rebuild-meta left without 'L': the backfill's durable "done" goes (in the batch), so
 * the next start walks again. */
int st__chat_backfill_owed(st_chat_t *c, uint64_t *wait);
/* Test-only (STRATA_TEST_NO_MARKS=1): no marks written, no backfill, as before them. */
bool st__chat_marks_off(void);
/* Whether u's markers are complete ('L'). */
bool st__chat_marks_known(st_chat_t *c, const char *u, size_t ul, uint64_t *wait);
/* True only when the hot store proves c has no cold rows (its owner's markers complete and c
 * unmarked): then no footer need be read to know it is new. */
bool st__chat_cold_none(st_chat_t *c, const char *u, size_t ul, const char *conv, size_t cl,
                        uint64_t *wait);
/* retention.c: an expired object leaves (the member's expired hook, strata/tier.h): its rows out
 * of the conversations' cold baselines and the totals. */
int st__chat_expired(void *arg, const char *u, size_t ul, const st_pq_file_t *f, uint64_t *wait);
/* evict.c: whether the conversation record (key, val) is to be evicted: idle since before
 * `before` (µs) with all its messages cold. */
bool st__chat_evictable(const void *key, size_t klen, const void *val, size_t vlen, int64_t before);

/* The most rows one flush moves into one object (strata/tier.h). */
#define ST__FLUSH_OBJECT_ROWS ST_TIER_FLUSH_ROWS
/* Whether an interval flush is due for a user with `hot` hot rows: at least --flush-min-rows,
 * or the oldest --flush-max-age old (quiet users are not flushed into a tiny object at every
 * interval). */
bool st__chat_flush_due(st_chat_t *c, const char *u, size_t ul, int64_t hot);

/* pass.c: chat's sources for the tier's pass (users: retention and flushes; idle conversations:
 * eviction), into cc->sources. */
void st__chat_sources(st_chatcold_t *cc);
/* pass.c: the tier's tick (st_tier_member_t.tick): the fold markers swept a page a tick, so
 * cold changes are folded within --delta-max-age whatever --flush-interval is. */
void st__chat_fold_tick(void *arg);
/* compact.c: chat's merge side of the tier's compaction (Parquet objects merged, rows left out
 * by retention out of the conversations' baselines). */
void st__chat_merge_side(st_chatcold_t *cc);
/* compact.c: the fold hooks of chat's member (strata/tier.h: fold_prepare, fold_pick). */
void *st__chat_fold_prepare(void *arg, const char *u, size_t ul, const st_tier_obj_t *objs,
                            size_t n, int64_t cutoff);
/* fold_more: the note's next slices, until the deadline (uv_hrtime()); true once it is whole. */
bool st__chat_fold_more(void *arg, void *note, uint64_t until);
bool st__chat_fold_pick(void *arg, const char *u, size_t ul, const st_tier_obj_t *objs, size_t n,
                        size_t *at);
/* Marks the user's objects holding ids lo..hi ('z') to be rewritten (a deleted conversation's
 * rows left out). */
int st__chat_fold_objects(st_chat_t *c, const char *u, size_t ul, uint64_t lo, uint64_t hi,
                          uint64_t *wait);
/* Which neighbours to merge next: the tier's plan (kept under chat's name for its tests). */
#define st__chat_compact_plan st_tier_compact_plan

/* delta.c: delta objects, a kind of the tier of their own (tag 'e'). */
typedef struct {
    st_tier_member_t member;
    st_tier_kind_t kind;
    st_tier_merge_t merge;
    st_chatcold_t *cc; /* a reference (st__chat_cold_unref when closed) */
} st_chatdelta_t;
/* The manifest owner of a user's delta objects into o (ST_TIER_OWNER_MAX bytes). */
size_t st__chat_delta_owner(char *o, const char *u, size_t ul);
/* Marks every delta object of u to be rewritten without the rows whose delta record went (a
 * deleted conversation's): 'z' "~e" u 0 seq -> now. */
int st__chat_delta_mark(st_chat_t *c, const char *u, size_t ul, uint64_t *wait);
/* The member (owned by the tier until closed); it holds a reference to cc. */

st_tier_member_t *st__chat_delta_member(st_chatcold_t *cc);
/* rebuild.c: chat's rebuild hook (st_tier_member_t.rebuild; arg: the st_chatcold_t), rooms' and
 * deltas' objects included. */
int st__chat_rebuild(void *arg, st_tier_rebuild_t *rb, uint64_t *wait);
/* Drops one member's reference to chat's cold state (flush.c); the last frees it. */
void st__chat_cold_unref(st_chatcold_t *cc);
/* Each row of a delta object's bytes as the message JSON a delta record holds. */
typedef void (*st_chat_delta_fn)(void *arg, uint64_t id, const char *conv, size_t cl, bool deleted,
                                 const char *json, size_t len);
/* field: the id member's name (st__chat_id_field of the delta objects' owner). */
int st__chat_delta_decode(const void *data, size_t size, const char *field, st_chat_delta_fn fn,
                          void *arg);

/* Chat's cold state: chat as a member of the tier (strata/tier.h), and what of the cold tier is
 * chat's own. Made by st_chat_tier_member (flush.c); freed when the tier is done with it. */
struct st_chatcold {
    st_tier_t *tier; /* borrowed */
    st_chat_t *chat;
    st_tier_member_t member;
    st_tier_member_t room_member; /* the same sides for rooms (tag ST__ROOM_TAG) */
    int refs;                     /* members the tier holds: freed at the last one's closed */
    st_tier_source_t sources[2];  /* pass.c */
    st_tier_kind_t kind;          /* flush.c */
    st_tier_merge_t merge;        /* compact.c */
    int zstd_level;
    st_metric_t *m_hybrid_hot, *m_hybrid_cold, *m_evicted;
    uint64_t hot_ttl_us;
    /* at the interval, a user is flushed only with this many hot rows, or one this old */
    uint64_t flush_min_rows, flush_max_age_us;
    uint64_t delta_max_age_us; /* a cold change is folded into its object within this */
    bool pass_all;             /* this pass queues every user with hot rows */
    size_t pass_evicted;       /* by this pass so far */
    int64_t evict_before;      /* set when the eviction source starts */
    /* pass.c's fold sweep: the marker prefix being swept ('e', then 'z'; 0 between sweeps),
     * the key it resumes at, and when the next sweep starts */
    char fold_ks;
    uint8_t fold_from[ST__KEY_CAP];
    size_t fold_from_len;
    int64_t fold_next_us;
    /* backfill.c: the walk writing the marks of owners from before them */
    struct {
        struct st__bf_page *page; /* the page being done (owned; NULL: walked at the next call) */
        uint8_t from[ST_TIER_OWNER_MAX + 1]; /* where that page starts (as the record says) */
        size_t from_len;
        st_coldwait_t *w; /* what the page's fetch pinned (owned; NULL: nothing) */
        uv_timer_t *more; /* the walk's next turn (owned, closed at the stop; NULL: none yet) */
        bool fetching;    /* w's fetch is under way: its end runs the page again */
        bool counted;     /* the page's owners without marks are in pending */
        bool done;        /* a walk found none without marks (or the tier stopped) */
        int64_t retry_at; /* µs: after a failed fetch, not before */
        size_t pending, walk_found;
        unsigned fails; /* the page's failed tries in a row (ST__BF_FAILS: passed over) */
        /* the owner being marked across turns: its name (cur_len 0: none), its objects as last
         * read (owned), which of them are marked (owned, man.n), where the marking goes on */
        char cur[ST_TIER_OWNER_MAX];
        size_t cur_len;
        st_manifest_t man;
        bool *marked;
        size_t obj, group;
        st_metric_t *m_pending, *m_done, *m_total, *m_checked;
    } bf;
};

/* ---- table.c: the Iceberg table `messages`, st_chat_kind's (kinds.h) ---- */
extern const st_table_def_t st_chat_table;

#endif
