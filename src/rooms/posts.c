/* SPDX-License-Identifier: MIT */
/* A room's messages: posting, reading, editing and deleting them (chat stores them), and their
 * kind of the cold tier (kinds.h): chat's member for room owners. */
#include "internal.h"
#include "strata/kinds.h"

#include <cjson/cJSON.h>

#include <stdlib.h>
#include <string.h>

int st_rooms_post(st_rooms_t *r, const char *room, size_t rl, st_message_in_t *m, st_buf_t *out,
                  uint64_t *wait)
{
    int role;
    int rc = st_rooms_exists(r, room, rl, wait);
    if (rc) return rc;
    rc = st_rooms_role(r, room, rl, m->from, m->from_len, &role, wait);
    if (rc == ST_ENOTFOUND) return ST_EFORBIDDEN; /* from must be a member */
    if (rc) return rc;
    /* a user being erased is leaving its rooms: it posts no more (SPEC §2.2) */
    if (st_chat_erased(r->chat, ST_USER(m->from, m->from_len))) return ST_EFORBIDDEN;
    m->owner = (st_owner_t){ST_OWNER_ROOM, room, rl}; /* borrowed: only until this returns */
    m->conv = room;
    m->conv_len = rl;
    size_t at = out->len;
    rc = st_chat_post(r->chat, m, out, wait);
    /* the author has read the room up to its own post (SPEC §2.1 v5: unread counts others'
     * messages): its marker moves there, the only member record a post writes; it also tells
     * an erasure that the author may have posted here once it left (st__rooms_leave) */
    int64_t seq = 0;
    uint64_t id = 0;
    if (!rc) st__rooms_message_ids(out->data + at, out->len - at, &seq, &id, NULL);
    if (!rc) rc = st__rooms_read_to(r, room, rl, m->from, m->from_len, seq, wait);
    /* its author's index entry, in the post's batch: an erasure finds it there, and the counts
     * leave it out from the erasure's 202 on; the room's mark moves to it (authors.c) */
    if (!rc) rc = st__rooms_author_posted(r, room, rl, m->from, m->from_len, seq, id, wait);
    if (rc) out->len = at; /* no answer but the error's */
    m->owner = (st_owner_t){0};
    return rc;
}

/* A page of room messages (the room's owner: chat renders room_id). */
int st_rooms_messages(st_rooms_t *r, const char *room, size_t rl, st_message_query_t *q,
                      st_buf_t *out, uint64_t *wait)
{
    int rc = st_rooms_exists(r, room, rl, wait);
    if (rc) return rc;
    q->conv = room;
    q->conv_len = rl;
    return st_chat_messages(r->chat, ST_ROOM(room, rl), q, out, wait);
}

typedef struct {
    uint64_t id;
    bool found;
    st_buf_t from;
} st_author_t;

static void st__author(void *arg, uint64_t msg_id, const char *json, size_t len)
{
    st_author_t *a = arg;
    cJSON *j = msg_id == a->id ? cJSON_ParseWithLength(json, len) : NULL;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "from");
    if (cJSON_IsString(f)) {
        a->found = true;
        st_buf_puts(&a->from, f->valuestring);
    }
    cJSON_Delete(j);
}

int st_rooms_change_message(st_rooms_t *r, const char *room, size_t rl, uint64_t msg_id,
                            const st_message_edit_t *e, const char *actor, size_t al, st_buf_t *out,
                            uint64_t *wait)
{
    int rc = st_rooms_exists(r, room, rl, wait);
    if (rc) return rc;
    const st_owner_t *o = ST_ROOM(room, rl);
    int role = ST_ROOMS_MEMBER;
    if (actor && (rc = st_rooms_role(r, room, rl, actor, al, &role, wait)) != ST_OK &&
        rc != ST_ENOTFOUND)
        return rc;
    if (actor && role != ST_ROOMS_OWNER &&
        role != ST_ROOMS_ADMIN) { /* the author, then: read the message's from */
        st_message_query_t q = {.conv = room, .conv_len = rl, .after = msg_id - 1, .limit = 1};
        st_author_t a = {.id = msg_id};
        bool more;
        uint64_t last;
        rc = st_chat_each(r->chat, o, &q, st__author, &a, &more, &last, wait);
        bool mine = a.found && a.from.len == al && memcmp(a.from.data, actor, al) == 0;
        st_buf_free(&a.from);
        if (rc) return rc;
        if (!a.found) return ST_ENOTFOUND;
        if (!mine) return ST_EFORBIDDEN;
    }
    size_t at = out->len;
    rc = e ? st_chat_edit(r->chat, o, msg_id, e, out, wait)
           : st_chat_delete(r->chat, o, msg_id, out, wait);
    if (rc == ST_OK && !e)
        rc = st__rooms_gone(r, room, rl, st__rooms_json_seq(out->data + at, out->len - at), wait);
    /* no longer a live post of its author (the counts' subtraction must not take it again), a
     * tombstone that still names it (its erasure un-names it) */
    if (rc == ST_OK && !e)
        rc = st__rooms_author_deleted(r, room, rl, out->data + at, out->len - at, wait);
    return rc;
}

/* Rooms own chat messages: their objects and manifests are chat's member's, for room owners. */
static st_tier_member_t *st__rooms_kind_member(const st_kind_env_t *env, const void *opts)
{
    return st_chat_kind_tier_member(env->chat, ST_OWNER_ROOM);
}

const st_kind_t st_rooms_kind = {
    .name = "chat rooms", .member = st__rooms_kind_member, .table = &st_rooms_table};
