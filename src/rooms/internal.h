/* SPDX-License-Identifier: MIT */
/*
 * What the files of the rooms module share (strata/rooms.h has the key layout):
 *   rooms.c    the module, room records: create, read, exists, roles
 *   records.c  keys, room and member records, counts, joining and leaving (staged)
 *   members.c  membership changes, the member listing, read markers
 *   posts.c    a room's messages (stored by chat)
 *   erase.c    an erased user in rooms
 *   remote.c   rooms of other groups and a user's room list
 *   authors.c  each room's posts by author, and the room's mark that it has them
 *   sweep.c    the author index's entries of posts retention dropped, swept in the background
 */
#ifndef STRATA_ROOMS_INTERNAL_H
#define STRATA_ROOMS_INTERNAL_H

#include "strata/iceberg.h"
#include "strata/metrics.h"
#include "strata/outbox.h"
#include "strata/rooms.h"

#define ST__KS_ROOM   'r'
#define ST__KS_MEMBER 'q'
#define ST__KS_JOINED 'j'
#define ST__KS_REMOTE 'J'
#define ST__KS_POSTED 'p' /* user 0 room -> [the marker it left with] room */
#define ST__KS_OWNERS 'O'
#define ST__KS_GONE   'd' /* room 0 be64(seq) -> "": a deleted message (unread skips it) */
/* room 0 author 0 kind be64(seq) -> be64(msg_id): kind ST__AUTHOR_LIVE a live post, written in
 * its post's batch; ST__AUTHOR_DEAD a tombstone that still names its author (deleted by a
 * request), moved there in the delete's batch; both go in the batch an erasure un-names it */
#define ST__KS_AUTHOR   'a'
#define ST__AUTHOR_LIVE 0
#define ST__AUTHOR_DEAD 1
/* room -> be64(S): every post of the room up to seq S has its 'a' entry (S moves with each post
 * from S + 1 only; authors.c). Empty (the first indexing binary's) or absent: unproven. */
#define ST__KS_INDEXED    'A'
#define ST__ROOMS_KEY_CAP (ST_KEY_MAX + 1)
#define ST__ERASING_MAX   256 /* pending erasures a room's counts look at */
/* a 'p' value of a poster that left: tag | room created | its read marker then | room (a room
 * name never starts with the tag) */
#define ST__LEFT_TAG   1
#define ST__LEFT_SIZE  17
#define ST__REMOTE_HDR 12 /* a 'J' value's fixed part */

struct st_rooms {
    st_store_t *store;
    st_chat_t *chat;
    size_t max_members;
    st_observers_t observers;
    st_outbox_t *outbox;    /* many groups (SPEC §10): changes for the members' groups, or NULL */
    st_metric_t *m_swept;   /* sweep.c: strata_rooms_index_swept_total */
    long sweep_slices_left; /* sweep.c: -1, or a test's hold */
    /* tests (STRATA_TEST_ROOMS_POST_AS_OLD=1): a post writes what a binary from before the
     * author index wrote (no entry, the mark not moved), as an older leader of a rolling
     * upgrade does */
    bool test_post_as_old;
};

typedef struct {
    int64_t created, members;
} st_room_t;

typedef struct {
    int64_t joined_at, last_read;
    uint8_t role;
} st_member_t;
#define ST__MEMBER_SIZE 17

/* records.c */
void st__rooms_tell(st_rooms_t *r, const char *room, size_t rl, const char *user, size_t ul,
                    bool added, uint64_t wait);
size_t st__rooms_key(uint8_t *k, const char *room, size_t rl);
size_t st__rooms_pair(uint8_t *k, char ks, const char *a, size_t al, const char *b, size_t bl);
int st__rooms_load(st_rooms_t *r, const char *room, size_t rl, st_room_t *rm, const char **creator,
                   size_t *crl, const char **name, size_t *nl, uint64_t *wait);
int st__rooms_set_count(st_rooms_t *r, const char *room, size_t rl, int64_t members,
                        uint64_t *wait);
int st__rooms_member_get(st_rooms_t *r, const char *room, size_t rl, const char *user, size_t ul,
                         st_member_t *m, uint64_t *wait);
int st__rooms_member_put(st_rooms_t *r, const char *room, size_t rl, const char *user, size_t ul,
                         const st_member_t *m, uint64_t *wait);
int st__rooms_user_count(st_rooms_t *r, const char *user, size_t ul, int64_t *n, uint64_t *wait);
int st__rooms_outbox(st_rooms_t *r, const char *room, size_t rl, const char *user, size_t ul,
                     const char *name, size_t nl, int64_t joined_at, bool added, uint64_t *wait);
/* created: the room's (its incarnation; 0 for a room being deleted). A member that posted in
 * the room leaves its read marker in its 'p' entry and takes it back when it joins the same
 * incarnation again: every own post is at or below it, so unread stays others' messages. */
int st__rooms_join(st_rooms_t *r, const char *room, size_t rl, int64_t created, const char *name,
                   size_t nl, const char *user, size_t ul, uint8_t role, int64_t now, int64_t count,
                   uint64_t *wait);
/* created <= 0: the room is being deleted (no marker kept). A member whose marker moved past 0
 * (it may have posted: a post moves its author's marker) keeps it in its 'p' entry, where an
 * erasure of it finds the room and a later return to the same incarnation takes it back. */
int st__rooms_leave(st_rooms_t *r, const char *room, size_t rl, int64_t created, const char *name,
                    size_t nl, const char *user, size_t ul, uint64_t *wait);
int st__rooms_conv(st_rooms_t *r, const char *room, size_t rl, st_chat_conv_info_t *ci, bool *any,
                   uint64_t *wait);
void st__rooms_id_or_null(st_buf_t *out, uint64_t id);
/* How many of the room's members are being erased (erasing: st__rooms_erasing_names', or NULL:
 * read here). */
int st__rooms_erasing_members(st_rooms_t *r, const st_buf_t *erasing, const char *room, size_t rl,
                              int64_t *n, uint64_t *wait);

/* How many owners the room has ('O'; counted from the members once for a room from before). */
int st__rooms_owners(st_rooms_t *r, const char *room, size_t rl, int64_t *n, uint64_t *wait);
/* Stages the room's owner count moved by delta. */
int st__rooms_owners_add(st_rooms_t *r, const char *room, size_t rl, int64_t delta, uint64_t *wait);

/* Unread as people count it (SPEC §2.1 v5): the room's messages after last_read that are not
 * deleted (others' only: a member's own post moves its marker past it). One range walk over the
 * room's deleted seqs after the marker ('d'): no per-member work on a post. */
int st__rooms_unread(st_rooms_t *r, const char *room, size_t rl, int64_t last_read,
                     int64_t last_seq, int64_t *n, uint64_t *wait);
/* The same, less the live posts of the users being erased after last_read (erasing: from
 * st__rooms_erasing_names, read once for many members; NULL: read here). */
int st__rooms_unread_now(st_rooms_t *r, const st_buf_t *erasing, const char *room, size_t rl,
                         int64_t last_read, int64_t last_seq, int64_t *n, uint64_t *wait);
/* The room's total_messages less the live posts of the users being erased (ci: the room's). */
int st__rooms_total_now(st_rooms_t *r, const st_buf_t *erasing, const char *room, size_t rl,
                        const st_chat_conv_info_t *ci, int64_t *n, uint64_t *wait);
/* Moves user's read marker forward to seq (not a member, or already there: nothing). */
int st__rooms_read_to(st_rooms_t *r, const char *room, size_t rl, const char *user, size_t ul,
                      int64_t seq, uint64_t *wait);
/* Notes that the room's message seq is deleted (a tombstone): idempotent. */
int st__rooms_gone(st_rooms_t *r, const char *room, size_t rl, int64_t seq, uint64_t *wait);
/* The "seq" of a message's JSON (chat's answer), or 0. */
int64_t st__rooms_json_seq(const char *json, size_t len);

/* st_rooms_change; keep_owner false lets the last owner go (an erasure: it always wins). */
int st__rooms_change(st_rooms_t *r, const char *room, size_t rl, const st_rooms_name_t *add,
                     size_t nadd, const st_rooms_name_t *remove, size_t nremove, bool keep_owner,
                     long *who, st_buf_t *out, uint64_t *wait);

/* ---- authors.c ---- */
/* A message's seq, msg_id and from (appended to from, when not NULL); false when it names no
 * author or lacks one of them. */
bool st__rooms_message_ids(const char *json, size_t len, int64_t *seq, uint64_t *id,
                           st_buf_t *from);
/* Stages the index entry of u's post seq (msg_id id), and the room's mark moved to seq when it
 * was at seq - 1 (a post's batch). */
int st__rooms_author_posted(st_rooms_t *r, const char *room, size_t rl, const char *u, size_t ul,
                            int64_t seq, uint64_t id, uint64_t *wait);
/* Stages a deleted message's entry moving to the tombstones that name their author. */
int st__rooms_author_deleted(st_rooms_t *r, const char *room, size_t rl, const char *json,
                             size_t len, uint64_t *wait);
/* Stages the removal of u's entries (both kinds) for seq: the message no longer names u. */
int st__rooms_author_drop(st_rooms_t *r, const char *room, size_t rl, const char *u, size_t ul,
                          int64_t seq, uint64_t *wait);
/* *indexed: the room's mark proves that every post of it has its entry (the mark is 8 bytes and
 * equals the conversation's last seq); an error (ST_EPARKED: the conversation's record is
 * cold) leaves it false. */
int st__rooms_indexed(st_rooms_t *r, const char *room, size_t rl, bool *indexed, uint64_t *wait);
/* Stages the room's mark (on, at its creation: S = 0; STRATA_TEST_ROOMS_NO_INDEX=1: none, as
 * an older binary made it) or its removal. */
int st__rooms_mark_indexed(st_rooms_t *r, const char *room, size_t rl, bool on, uint64_t *wait);
/* The users being erased (u8 length | id each, appended to names), ST__ERASING_MAX at most. */
int st__rooms_erasing_names(st_rooms_t *r, st_buf_t *names, uint64_t *wait);
/* How many live posts of those users the room's index holds with seq > after and msg_id >=
 * first_id (the reads leave them out of unread and total_messages from the erasure's 202 on:
 * SPEC §2.1 v5, §2.2; first_id: the room's first message for total_messages, 0 for unread). */
int st__rooms_erasing_posts(st_rooms_t *r, const st_buf_t *names, const char *room, size_t rl,
                            int64_t after, uint64_t first_id, int64_t *n, uint64_t *wait);
/* An erasure's slice in an indexed room: at most max of u's entries, each post un-named (a live
 * one a tombstone at `at`, its 'd' record written) and its entry dropped; *more: max were. */
int st__rooms_erase_indexed(st_rooms_t *r, const char *room, size_t rl, const char *u, size_t ul,
                            int64_t at, size_t max, bool *more, uint64_t *wait);
/* A deleted room's entries, at most max a call, then its mark; true while more are left. */
bool st__rooms_authors_drop_room(st_rooms_t *r, const char *room, size_t rl, size_t max,
                                 uint64_t *wait);

/* sweep.c: the author index's entries of the posts retention dropped. Chat's expired hook
 * (st_chat_on_expired) counts them per room and queues a room's sweep; st_rooms_sweep_step
 * (strata/rooms.h) runs it. _open registers both and the metrics; _forget stages the removal of a
 * room's sweep state (a deleted room's slices: its entries go with it). */
int st__rooms_expired(void *arg, const st_owner_t *o, const char *conv, size_t cl, int64_t rows,
                      uint64_t *wait);
void st__rooms_sweep_open(st_rooms_t *r);
int st__rooms_sweep_forget(st_rooms_t *r, const char *room, size_t rl, uint64_t *wait);

/* erase.c: chat's erase hook (st_chat_on_erase) */
bool st__rooms_erase(void *arg, const st_owner_t *o, uint64_t erasure, size_t max);

/* ---- table.c: the Iceberg table `room_messages`, st_rooms_kind's (kinds.h) ---- */
extern const st_table_def_t st_rooms_table;

#endif
