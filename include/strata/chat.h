/* SPDX-License-Identifier: MIT */
/*
 * chat: per-user message history and conversation metadata (SPEC §2). Messages get server-made
 * snowflake ids and a gapless per-conversation seq; a conversation's last_msg_id, updated and
 * total_messages are hybrid fields (a cold baseline plus a hot increment, always exact). Messages
 * belong to an owner (strata/owner.h): a user, or another kind of owner with its own messages;
 * the owner's kind names the id member of its messages (st_owner_id_field), its object folder
 * and its table. Every key starts with the owner, so nothing of one owner is ever reachable under
 * another. Functions taking a user name are about users only (conversation lists, totals,
 * erasure records of users).
 *
 * Loop-thread only; functions raise *wait like the store's. JSON goes to the caller's buffer.
 */
#ifndef STRATA_CHAT_H
#define STRATA_CHAT_H

#include "strata/owner.h"
#include "strata/store.h"

typedef struct st_chat st_chat_t;

/* An owner as bytes, and back: opaque, the same bytes for the same owner in every version (what
 * chat's keys start with), for what other modules keep or send per owner (a stream's channel, a
 * group's stream notes). o holds ST_CHAT_OWNER_MAX bytes; the id st_chat_owner_from gives is
 * borrowed from o. */
#define ST_CHAT_OWNER_MAX (ST_NAME_MAX + 2)
size_t st_chat_owner_bytes(char *o, const st_owner_t *w);
st_owner_t st_chat_owner_from(const char *o, size_t ol);

typedef struct {
    st_owner_t owner; /* whose message (its id borrowed for the call) */
    const char *conv;
    size_t conv_len;
    const char *from;
    size_t from_len;
    const char *content;
    size_t content_len;
    const char *metadata; /* JSON object text or NULL */
    size_t metadata_len;
} st_message_in_t;

typedef struct {
    const char *conv; /* NULL: all conversations */
    size_t conv_len;
    uint64_t after, before; /* exclusive bounds; 0 = none */
    bool after_given;       /* `after` was named (after=0 too: the page just after nothing) */
    size_t limit;
    bool desc;         /* st_chat_each: newest first; st_chat_messages: the page's order */
    bool hide_deleted; /* st_chat_messages: tombstones left out (include_deleted=false) */
    bool raw; /* st_chat_each: as stored; otherwise a room message whose author is being erased
                 is given as the tombstone its erasure makes of it (SPEC §2.2: at once) */
} st_message_query_t;

int st_chat_open(st_chat_t **out, st_store_t *store, uint64_t node_id);
void st_chat_close(st_chat_t *c);
/* Ids continue above the newest one in the store (a group member that became the leader: the
 * last leader issued ids this process never saw). */
void st_chat_resync(st_chat_t *c);

/* Appends {"msg_id",id member (st_owner_id_field of m->owner),"seq","timestamp"}. */
int st_chat_post(st_chat_t *c, const st_message_in_t *m, st_buf_t *out, uint64_t *wait);
/* Appends {"messages":[…],"next":cursor|null} (SPEC §2): the q->limit messages next to the
 * anchor — just before `before` when only it is given, just after `after` when only it is,
 * otherwise from the end q->desc starts at — listed in q->desc's order. The cursor is the last
 * msg_id walked from the anchor: the next page goes on the same way (st_chat_walks_back). */
int st_chat_messages(st_chat_t *c, const st_owner_t *o, const st_message_query_t *q, st_buf_t *out,
                     uint64_t *wait);
/* Whether st_chat_messages walks q from the newest end down (a next page's cursor then bounds
 * `before`, else `after`). */
bool st_chat_walks_back(const st_message_query_t *q);
/* Newest updated first; cursor from a previous page's next (NULL for the first page). */
int st_chat_conversations(st_chat_t *c, const char *user, size_t ulen, const char *cursor,
                          size_t clen, size_t limit, st_buf_t *out, uint64_t *wait);
/* A conversation's record as numbers (the hybrid fields exact, as st_chat_conversation shows
 * them); ST_ENOTFOUND when the owner has no such conversation, ST_EPARKED as for reads. */
typedef struct {
    uint64_t first_msg_id, last_msg_id;
    int64_t created, updated, total_messages;
    int64_t last_seq; /* the highest seq ever issued in it */
} st_chat_conv_info_t;
int st_chat_conv_info(st_chat_t *c, const st_owner_t *o, const char *conv, size_t clen,
                      st_chat_conv_info_t *out, uint64_t *wait);
/* ST_ENOTFOUND when the user has no such conversation. */
int st_chat_conversation(st_chat_t *c, const char *user, size_t ulen, const char *conv, size_t clen,
                         st_buf_t *out, uint64_t *wait);
int st_chat_stats(st_chat_t *c, const char *user, size_t ulen, st_buf_t *out, uint64_t *wait);

/* Calls fn with each message's JSON object (borrowed for the call; its id member the owner
 * kind's), up to q->limit, in order. *more: whether messages remain past *last (the last id
 * given to fn). */
typedef void (*st_chat_msg_fn)(void *arg, uint64_t msg_id, const char *json, size_t len);
int st_chat_each(st_chat_t *c, const st_owner_t *o, const st_message_query_t *q, st_chat_msg_fn fn,
                 void *arg, bool *more, uint64_t *last, uint64_t *wait);

/* ---- the cold tier (SPEC §5) ----
 * Chat is one data kind of the tier (strata/tier.h): its member brings the pass's sources (users:
 * retention and flushes due; idle conversations: eviction), the flush side (a user's oldest hot
 * messages into one Parquet object) and the merge side (compaction). */
typedef struct st_objstore st_objstore_t;
typedef struct st_tier st_tier_t;
typedef struct st_tier_member st_tier_member_t;
typedef struct {
    /* chat's own; the tier's options are st_tier_opts_t (main.c opens the tier) */
    int zstd_level;           /* of its objects (0: 3) */
    uint64_t hot_ttl_s;       /* evict conversations idle this long, all cold */
    uint64_t flush_min_rows;  /* at the interval, flush users with this many hot rows */
    uint64_t flush_max_age_s; /* ... or whose oldest hot row is this old (0 = any age) */
    uint64_t delta_max_age_s; /* cold edits are folded into their objects within (0: 3600) */
} st_chat_cold_opts_t;

/* Chat as a member of the tier t (borrowed, it must outlive chat's reads): reads merge cold
 * objects from here on. Join it with st_tier_join(t, …); owned by chat, freed once the tier is
 * done with it. Only the chat's fields of o are read. */
st_tier_member_t *st_chat_tier_member(st_chat_t *c, st_tier_t *t, const st_chat_cold_opts_t *o);
/* The same chat's member for the owners of another kind than users (the tier hands every owner
 * to the member of its kind's tag): the flush, merge and expired sides. Call after
 * st_chat_tier_member; join it too. NULL if chat has not joined a tier, or for ST_OWNER_USER
 * (st_chat_tier_member's). */
st_tier_member_t *st_chat_kind_tier_member(st_chat_t *c, st_owner_kind_t kind);
/* The member that writes and merges chat's delta objects (SPEC §2.2: edits and deletes of cold
 * messages, beside the Parquet objects); after st_chat_tier_member, joined the same way. */
st_tier_member_t *st_chat_delta_tier_member(st_chat_t *c);
/* A major compaction of the user's delta objects (POST /v1/admin/compact with a user). */
void st_chat_compact_deltas(st_chat_t *c, const char *user, size_t ulen);

/* ---- reconciliation (SPEC §6) ---- */
/* Recounts a conversation's total_messages from its messages, hot and cold, and repairs the
 * record (and the owner's total) if they differ; *drift = truth - what was recorded. */
int st_chat_recount(st_chat_t *c, const st_owner_t *o, const char *conv, size_t clen,
                    int64_t *drift, uint64_t *wait);
/* Calls fn for every conversation of every owner (o and conv borrowed for the call). */
typedef void (*st_chat_conv_fn)(void *arg, const st_owner_t *o, const char *conv, size_t clen);
size_t st_chat_each_conversation(st_chat_t *c, st_chat_conv_fn fn, void *arg);
/* The same a page at a time (bounded work per call, for background passes): up to max
 * conversations from *cursor on (an empty buffer starts at the first); the cursor moves past
 * them and *done says the last one was reached. A conversation updated during the paging may be
 * visited twice or not at all (a post marks it for reconciliation anyway). */
size_t st_chat_conversations_page(st_chat_t *c, st_buf_t *cursor, size_t max, bool *done,
                                  st_chat_conv_fn fn, void *arg);
/* Re-seeds cold metadata from object storage alone, every listed object (no tables: rebuild-meta
 * runs chat's member's rebuild hook, which takes the objects the tables name): the manifest, each
 * user's cold summary, conversations' baselines and first/last ids and times, the user totals,
 * merged with what the store holds hot. Counts are returned; everything is staged in one batch. */
int st_chat_rebuild(st_chat_t *c, st_objstore_t *obj, size_t *users, size_t *convs, int64_t *rows,
                    uint64_t *wait);
/* What st_chat_rebuild would find: the users and message objects in obj (a listing only). */
int st_chat_cold_census(st_objstore_t *obj, size_t *users, size_t *objects);
/* Testing only (--test-hooks): shifts a conversation's recorded count by `by`. */
int st_chat_test_drift(st_chat_t *c, const char *user, size_t ulen, const char *conv, size_t clen,
                       int64_t by, uint64_t *wait);

/* Told about every posted message as it is staged (wait: the batch that makes it durable); json
 * is the stored message object (its id member the owner kind's). Observers are called in the
 * order they registered (at most ST_OBSERVERS_MAX); o and arg are borrowed (o for the call, arg
 * until st_chat_unobserve). */
typedef void (*st_chat_observer_fn)(void *arg, const st_owner_t *o, const char *conv, size_t clen,
                                    uint64_t msg_id, const char *json, size_t len, uint64_t wait);
void st_chat_observe(st_chat_t *c, st_chat_observer_fn fn, void *arg);
void st_chat_unobserve(st_chat_t *c, const void *arg);
/* Appends a hot message's JSON object, as the observer got it; ST_ENOTFOUND when it is not in
 * the hot store. */
int st_chat_message_json(st_chat_t *c, const st_owner_t *o, uint64_t msg_id, st_buf_t *out);

/* ---- edits, deletes and erasure (SPEC §2.2) ---- */
typedef struct {
    const char *content; /* NULL: unchanged */
    size_t content_len;
    const char *metadata; /* raw JSON (an object, or "null"); NULL: unchanged */
    size_t metadata_len;
} st_message_edit_t;

/* The newest earlier versions an edit keeps (--max-edit-history; 0: 20). */
void st_chat_set_max_history(st_chat_t *c, size_t n);
/* Edits a message of the owner (hot or cold): appends the message as it is now. ST_ENOTFOUND,
 * ST_ECONFLICT (a tombstone), ST_EPARKED (cold data not in memory: nothing staged, run again). */
int st_chat_edit(st_chat_t *c, const st_owner_t *o, uint64_t msg_id, const st_message_edit_t *e,
                 st_buf_t *out, uint64_t *wait);
/* Deletes a message (a tombstone; again: the same tombstone): appends it. As st_chat_edit. */
int st_chat_delete(st_chat_t *c, const st_owner_t *o, uint64_t msg_id, st_buf_t *out,
                   uint64_t *wait);
/* The same for a message whose author is erased (one in an owner other than the author, SPEC
 * §2.2): the tombstone's from is null too, so no row names the author; a tombstone that still
 * names it loses its from (nothing else of it changes, nor any count). at_us: the deleted_at a
 * live one gets (the erasure's time, st_chat_erasing_at; 0: now), so that it is the tombstone
 * reads showed from the erasure's 202 on (st_chat_each, st_chat_messages). */
int st_chat_delete_unnamed(st_chat_t *c, const st_owner_t *o, uint64_t msg_id, int64_t at_us,
                           st_buf_t *out, uint64_t *wait);
/* Deletes a conversation: its hot rows go, its cold rows are masked; *n: its live messages. */
int st_chat_delete_conversation(st_chat_t *c, const char *user, size_t ulen, const char *conv,
                                size_t clen, int64_t *n, uint64_t *wait);
/* Erases an owner (durable marker + erasure record; the rows go in st_chat_erase_step slices).
 * *id: the erasure (the pending one's when the owner is being erased already). */
int st_chat_erase(st_chat_t *c, const st_owner_t *o, uint64_t *id, uint64_t *wait);
/* When the user was last erased: the request time (Unix µs, strata's clock) of its latest
 * erasure, recorded in the erasure's batch and kept after it is done, so that tokens issued to
 * the user before it stay refused (http/auth.c). Kept for good, like the erasure's record: a
 * token issued before may be valid for ever (an HS256 token needs no exp, and no bound on a
 * token's lifetime is known), so no time comes when it could be dropped; it is one small key
 * per erased user, rewritten when the same user is erased again. ST_ENOTFOUND: never erased. */
int st_chat_erased_at(st_chat_t *c, const char *user, size_t ulen, int64_t *at_us, uint64_t *wait);
/* The owner erasure `id` is of: o->id borrowed until the next store call; ST_ENOTFOUND. */
int st_chat_erasure_owner(st_chat_t *c, uint64_t id, st_owner_t *o, uint64_t *wait);
/* Appends {"erasure_id","user","status","requested_at","done_at"} (an owner of another kind:
 * its id member, st_owner_id_field, for "user"); ST_ENOTFOUND. */
int st_chat_erasure_json(st_chat_t *c, uint64_t id, st_buf_t *out, uint64_t *wait);
/* An erasure pending longer than this is late (--erase-within; 0: 3600 s): logged, counted in
 * strata_erasures_late_total. */
void st_chat_set_erase_within(st_chat_t *c, uint64_t seconds);
/* One bounded slice of pending erasures (at most max keys deleted); returns whether work
 * remains. Stages its writes. */
bool st_chat_erase_step(st_chat_t *c, size_t max);
/* Whether the owner's cold objects hold its changes: no cold change waiting to be folded into an
 * object or written into a delta object, its delta objects merged into one, no object being written
 * or waiting for deletion. When not, the tier is asked for that work now (a fold, a delta flush, a
 * major compaction of the deltas), not within --delta-max-age: an erasure waits on this for the
 * owners whose messages it turned into tombstones (SPEC §2.2, v5 §5.1: done means no object
 * holds the text). */
bool st_chat_cold_settled(st_chat_t *c, const st_owner_t *o);
/* Restores (SPEC §9): every erasure record of the store into out (opaque), and those of in
 * the store does not hold staged as pending erasures (their users' data, as restored, is erased
 * once the server runs). *n: how many were added. */
int st_chat_erasures_export(st_chat_t *c, st_buf_t *out);
int st_chat_erasures_import(st_chat_t *c, const st_buf_t *in, size_t *n, uint64_t *wait);
/* What another module keeps of an owner goes with its erasure (rooms: the room messages a user
 * posted become tombstones, its memberships go): called by the erasure's slices once the owner's
 * own data is gone, with at most max changes per call, until it returns false (nothing left);
 * only then is the erasure done. `erasure` is the erasure's id: a hook that keeps state between
 * calls keys it by that id (the same owner may be erased again later). Hooks run in the order
 * registered (the same fn and arg again is ignored); arg borrowed until st_chat_off_erase(arg),
 * o for the call. */
typedef bool (*st_chat_erase_hook_fn)(void *arg, const st_owner_t *o, uint64_t erasure, size_t max);
void st_chat_on_erase(st_chat_t *c, st_chat_erase_hook_fn fn, void *arg);
void st_chat_off_erase(st_chat_t *c, const void *arg);
/* Retention dropped `rows` rows (tombstones too) of an owner's conversation, in a whole object or
 * left out of a compacted one: fn runs in the batch that drops them (on the member that serves
 * writes), so what another module keeps of those rows
 * is counted durably with the drop (rooms: the author index's entries it leaves, rooms/sweep.c).
 * One hook (a second call replaces it); arg borrowed while set, o and conv for the call. */
typedef int (*st_chat_expired_fn)(void *arg, const st_owner_t *o, const char *conv, size_t clen,
                                  int64_t rows, uint64_t *wait);
void st_chat_on_expired(st_chat_t *c, st_chat_expired_fn fn, void *arg);
/* An id below which the owner has no message left (retention dropped them): the smallest min_id
 * of the objects its manifest holds, or, with none, its cold watermark + 1 (the tier's flush
 * invariant: every hot id is above every cold one). 0: nothing known dropped. Reads manifest
 * records (one per object), no footer. */
uint64_t st_chat_dropped_below(st_chat_t *c, const st_owner_t *o, uint64_t *wait);
/* Starts fetching what a read that returned ST_EPARKED wants, with no one waiting (background
 * work re-runs later and finds it in memory). */
void st_chat_prefetch(st_chat_t *c);
/* Whether an erasure of the user was requested at or after since_us (pending or done): walks the
 * erasure records from about since_us on (their ids are snowflakes), for an Idempotency-Key
 * answer or a remote membership older than the user's erasure (idempotency.c, rooms.c). */
bool st_chat_erased_since(st_chat_t *c, const char *user, size_t ulen, int64_t since_us);
/* Whether the owner is being erased (every answer about it is 404). */
bool st_chat_erased(st_chat_t *c, const st_owner_t *o);
/* The same for an answer that shows it (a 404, a listing that leaves the owner out): *wait is
 * raised to the batch of the erasure's marker while that is not durable yet. */
bool st_chat_erasing(st_chat_t *c, const st_owner_t *o, uint64_t *wait);
/* The request time (Unix µs) of the owner's pending erasure: what an erased author's room
 * messages show as deleted_at from the 202 on, and what its erasure's slices then write, so the
 * two are the same tombstone (SPEC §2.2). ST_ENOTFOUND: not being erased. */
int st_chat_erasing_at(st_chat_t *c, const st_owner_t *o, int64_t *at_us, uint64_t *wait);
/* The owners of the kind being erased now (one key each: as many as erasures pending), at most
 * max of them (in id order), their ids appended to out as u8 length | id; *n their number. One
 * range read for a kind other than users, so "none of them" costs one seek. */
int st_chat_erasing_owners(st_chat_t *c, st_owner_kind_t kind, size_t max, st_buf_t *out, size_t *n,
                           uint64_t *wait);

/* Told about every edit, delete (kind "message_edited" / "message_deleted": json the new state)
 * and erasure (kind "user_erased", of an owner of any kind; conv and json NULL). o is borrowed
 * for the call. */
typedef void (*st_chat_change_fn)(void *arg, const char *kind, const st_owner_t *o,
                                  const char *conv, size_t clen, uint64_t msg_id, const char *json,
                                  size_t len, uint64_t wait);
void st_chat_observe_changes(st_chat_t *c, st_chat_change_fn fn, void *arg);
void st_chat_unobserve_changes(st_chat_t *c, const void *arg);

#endif
