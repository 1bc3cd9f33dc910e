/* SPDX-License-Identifier: MIT */
/*
 * rooms: shared conversations (SPEC §2.1). A room's messages are chat's (strata/chat.h), stored
 * once under the room as their owner (ST_OWNER_ROOM, strata/owner.h) in one conversation whose id
 * is the room id: snowflake ids, the gapless never-reissued seq, the hybrid fields, merged hot/cold
 * reads, flushes to shared/conversations/{room}/, retention, eviction and restore all come from
 * chat. This module keeps who is in a room:
 *   'r' room              room record: i64 created | i64 members | u16 creator length | u8 has
 *                         name | creator | name
 *   'q' room 0 user'      member: i64 joined_at | i64 last_read_seq | u8 role | user
 *   'j' user 0 room'      the user's rooms: i64 joined_at | room
 *   'j' user 0            how many rooms the user is in (i64)
 *   'J' user 0 room'      a room of another group the user is in, as that group's outbox said
 *                         (SPEC §10): i64 joined_at | u8 live | u8 has name | u16 room length |
 *                         room | name; live 0 is a tombstone (removed)
 *   'p' user 0 room'      the user may have posted in the room it left: written when a member
 *                         whose read marker is past 0 leaves (a post moves the author's marker
 *                         to it, so every author's is; a post writes no marker of its own), and
 *                         by versions before that with a user's first post: room. An erasure
 *                         walks these rooms, then 'j'.
 *   'O' room              i64: how many owners the room has (v5 roles: the last owner cannot
 *                         leave or be demoted); absent for a room from before, counted once
 *                         from its members when a change needs it
 *   'd' room 0 seq        a deleted message of the room (be64 seq): unread skips it
 *   'a' room 0 author' 0 kind seq -> be64 msg_id: the room's posts by author (rooms/authors.c);
 *                         the entries of posts retention dropped are swept (rooms/sweep.c,
 *                         its state under "\0rooms_sweep")
 * where user' (room') is the name itself, or 0x01 + 20 bytes of its SHA-256 when the pair would
 * pass LMDB's 511-byte keys (so the value names it). A post writes nothing per member but its
 * author's marker (moved to the post: own posts are never unread): a room of 100,000 members
 * posts in O(1); unread (SPEC §2.1 v5: others' live messages after the marker) is the room's
 * last seq less the marker less the room's 'd' records after it, computed when read.
 *
 * Limits: --max-room-members (default 100,000) members per room; a user is in at most
 * ST_ROOMS_USER_MAX rooms (GET /v1/users/{user}/rooms sorts them at read time, so this bounds
 * that work). Loop thread only; functions raise *wait like the store's; JSON goes to out.
 */
#ifndef STRATA_ROOMS_H
#define STRATA_ROOMS_H

#include "strata/chat.h"

typedef struct st_rooms st_rooms_t;

#define ST_ROOMS_USER_MAX 10000 /* rooms one user may be in */
#define ST_ROOMS_NAME_MAX 1024  /* bytes of a room's display name */

/* Roles (SPEC §2.1 v5), as stored in a member record: owners manage everything and change
 * roles; admins add and remove members (not owners) and edit or delete any message; members
 * post, read and leave. */
enum { ST_ROOMS_MEMBER = 0, ST_ROOMS_OWNER = 1, ST_ROOMS_ADMIN = 2 };
/* "owner", "admin", "member". */
const char *st_rooms_role_name(int role);
/* The role named n bytes at s, or -1. */
int st_rooms_role_parse(const char *s, size_t n);

typedef struct {
    const char *s;
    size_t n;
    uint8_t role; /* for an added member: ST_ROOMS_* (0: member) */
} st_rooms_name_t;

/* chat and store are borrowed. max_members 0: 100,000. */
int st_rooms_open(st_rooms_t **out, st_store_t *store, st_chat_t *chat, size_t max_members);
void st_rooms_close(st_rooms_t *r);
/* One slice of the first queued sweep of a room's author index (the entries of posts retention
 * dropped; rooms/sweep.c): at most max entries visited, in one batch. False when none is queued.
 * Only on the member that serves writes (main.c's erasure timer runs it). */
bool st_rooms_sweep_step(st_rooms_t *r, size_t max);
size_t st_rooms_max_members(const st_rooms_t *r);

/* Creates a room (name may be NULL) with members (distinct, valid names; checked by the
 * caller), owner among them or not (it is added with role owner). Appends the room object.
 * ST_EEXIST: the room exists, or one of that id is still being deleted (st_rooms_deleting);
 * ST_EINVAL: more than the room's limit; ST_CONFLICT with *who
 * (index into members, or -1 for the owner): that user is in ST_ROOMS_USER_MAX rooms already;
 * ST_ENOTFOUND with *who: that user is being erased (SPEC §2.2). */
int st_rooms_create(st_rooms_t *r, const char *room, size_t rl, const char *name, size_t nl,
                    const st_rooms_name_t *members, size_t n, const char *owner, size_t ol,
                    long *who, st_buf_t *out, uint64_t *wait);
/* Deletes a room (SPEC §2.1 v5): at once it is 404 to everyone, its streams end and it leaves
 * every member's list; its messages are then erased as a user's are (st_chat_erase under the
 * room's name, *erasure its id) and the erasure's slices take its members out. The id may be
 * taken again once that is done (ST_ECONFLICT from st_rooms_create until then). ST_ENOTFOUND. */
int st_rooms_delete(st_rooms_t *r, const char *room, size_t rl, uint64_t *erasure, uint64_t *wait);
/* Whether a room of that id is being deleted (one get). */
bool st_rooms_deleting(st_rooms_t *r, const char *room, size_t rl, uint64_t *wait);
/* Appends the room object ({"room_id","name","created","updated","first_msg_id","last_msg_id",
 * "total_messages","members"}; "members" leaves out members being erased: one get per erasure
 * pending). ST_ENOTFOUND; ST_EPARKED as for chat reads. */
int st_rooms_get(st_rooms_t *r, const char *room, size_t rl, st_buf_t *out, uint64_t *wait);
/* ST_OK (the room exists) or ST_ENOTFOUND. */
int st_rooms_exists(st_rooms_t *r, const char *room, size_t rl, uint64_t *wait);
/* A member's role (ST_ROOMS_*); ST_ENOTFOUND when user is not a member. */
int st_rooms_role(st_rooms_t *r, const char *room, size_t rl, const char *user, size_t ul,
                  int *role, uint64_t *wait);
/* Adds (each with its role) and removes members (distinct names; one in both lists is the
 * caller's 400). Adding a member or removing a non-member changes nothing (a member's role
 * changes through st_rooms_set_role). Appends {"room_id","members"}. ST_ELASTOWNER: the change
 * would leave a room that has owners with none.
 * ST_ENOTFOUND: no room (*who = -1) or a user of add being erased (*who: its index);
 * ST_CONFLICT: past --max-room-members (*who = -1) or a user in ST_ROOMS_USER_MAX rooms (*who:
 * its index in add). Nothing is staged on an error. The count leaves out members being erased. */
int st_rooms_change(st_rooms_t *r, const char *room, size_t rl, const st_rooms_name_t *add,
                    size_t nadd, const st_rooms_name_t *remove, size_t nremove, long *who,
                    st_buf_t *out, uint64_t *wait);
/* Sets a member's role and appends the member ({"user","role","joined_at","last_read_seq",
 * "unread"}). ST_ENOTFOUND: no room or user is not a member (*not_member); ST_ELASTOWNER: user
 * is the room's last owner and role is not owner. Who may is the caller's check. */
int st_rooms_set_role(st_rooms_t *r, const char *room, size_t rl, const char *user, size_t ul,
                      int role, bool *not_member, st_buf_t *out, uint64_t *wait);
/* {"members":[{"user","role","joined_at","last_read_seq","unread"}],"next"}: limit members
 * after cursor (a user name, NULL first), in key order; members being erased left out (SPEC
 * §2.2: one get per member walked). */
int st_rooms_members(st_rooms_t *r, const char *room, size_t rl, const char *cursor, size_t clen,
                     size_t limit, st_buf_t *out, uint64_t *wait);
/* Posts m (its user and conv are set here) in the room; appends {"msg_id","room_id","seq",
 * "timestamp"}. ST_ENOTFOUND: no room; ST_FORBIDDEN: from is not a member, or is being erased.
 * A user's first post in a room also stages its 'p' marker (one get on every later post). */
int st_rooms_post(st_rooms_t *r, const char *room, size_t rl, st_message_in_t *m, st_buf_t *out,
                  uint64_t *wait);
/* st_chat_messages for the room (q->conv is set here), messages with room_id. */
int st_rooms_messages(st_rooms_t *r, const char *room, size_t rl, st_message_query_t *q,
                      st_buf_t *out, uint64_t *wait);
/* Edits (e non-NULL) or deletes (e NULL) a message of the room (SPEC §2.2) and appends it as
 * it is now, with room_id. actor NULL: no check (auth off, an admin); else it must be the
 * message's author or an owner or admin of the room (ST_EFORBIDDEN). ST_ENOTFOUND: no room or no
 * such message; ST_ECONFLICT: an edit of a tombstone; ST_EPARKED as for reads. */
int st_rooms_change_message(st_rooms_t *r, const char *room, size_t rl, uint64_t msg_id,
                            const st_message_edit_t *e, const char *actor, size_t al, st_buf_t *out,
                            uint64_t *wait);
/* Moves user's last_read_seq forward to seq (at most the room's last seq; a lower one changes
 * nothing). Appends {"room_id","user","last_read_seq","unread"}. ST_ENOTFOUND: no room;
 * ST_FORBIDDEN: user is not a member. */
int st_rooms_read(st_rooms_t *r, const char *room, size_t rl, const char *user, size_t ul,
                  int64_t seq, st_buf_t *out, uint64_t *wait);
/* {"rooms":[{"room_id","name","joined_at","last_msg_id","updated","total_messages","unread"}],
 * "next"}: newest updated first; cursor "<updated>:<room_id>" of the last row seen (ST_EINVAL
 * when it is not one). Rooms of other groups ('J', not also known here) are rows of their own,
 * {"room_id","name","joined_at","remote":true}, sorted among the others with joined_at as their
 * updated. */
int st_rooms_of_user(st_rooms_t *r, const char *user, size_t ul, const char *cursor, size_t clen,
                     size_t limit, st_buf_t *out, uint64_t *wait);

/* Many groups behind a proxy (SPEC §10): every membership change also stages a record in ob (
 * borrowed; strata/outbox.h) for the user's group. NULL or an outbox that is off: nothing. */
struct st_outbox;
void st_rooms_set_outbox(st_rooms_t *r, struct st_outbox *ob);
/* The receiving side: the room's group says user was added to (or removed from) room, whose
 * membership began at joined_at. The newer joined_at wins; at the same one a removal wins, and an
 * addition again updates the name. A change for a user being erased, or erased since joined_at
 * (one scan of the erasure records), is not recorded (applied false); an addition then stages
 * the erasure for the room's group. Appends {"user","room_id","change","joined_at","applied"}.
 * An erasure of the user sends every room of its list ('J', tombstones too) the erasure through
 * the outbox (st_outbox_stage_erase) in the batch that drops the entry. */
int st_rooms_remote(st_rooms_t *r, const char *user, size_t ul, const char *room, size_t rl,
                    const char *name, size_t nl, int64_t joined_at, bool added, st_buf_t *out,
                    uint64_t *wait);

/* Told about every membership change as it is staged (wait: the batch that makes it durable).
 * At most ST_OBSERVERS_MAX; arg borrowed until st_rooms_unobserve. */
typedef void (*st_rooms_observer_fn)(void *arg, const char *room, size_t rl, const char *user,
                                     size_t ul, bool added, uint64_t wait);
void st_rooms_observe(st_rooms_t *r, st_rooms_observer_fn fn, void *arg);
void st_rooms_unobserve(st_rooms_t *r, const void *arg);

#endif
