/* SPDX-License-Identifier: MIT */
/* A room's messages: posting, reading, editing and deleting them (chat stores them). */
#include "internal.h"

#include <cjson/cJSON.h>

#include <stdlib.h>
#include <string.h>

/* The marker 'p' user 0 room' -> room, staged with the user's first post in the room (one get
 * on every later post; leaving puts its read marker ahead of the room, internal.h): an erasure
 * finds every room the user posted in through it, rooms it left or was removed from included. */
static int st__posted(st_rooms_t *r, const char *room, size_t rl, const char *user, size_t ul,
                      uint64_t *wait)
{
    uint8_t k[ST__ROOMS_KEY_CAP];
    size_t kl = st__rooms_pair(k, ST__KS_POSTED, user, ul, room, rl);
    const void *v;
    size_t vl;
    uint64_t w = 0;
    int rc = st_store_get(r->store, k, kl, &v, &vl, &w);
    if (rc != ST_ENOTFOUND) return rc; /* ST_OK: there already (in this batch or an older one) */
    return st_store_put(r->store, k, kl, room, rl, wait);
}

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
    if (st_chat_erased(r->chat, m->from, m->from_len)) return ST_EFORBIDDEN;
    /* the marker first: a post that then fails leaves at most a marker (one more room for an
     * erasure to walk), never a post no marker names */
    if ((rc = st__posted(r, room, rl, m->from, m->from_len, wait))) return rc;
    char u[ST_CHAT_USER_MAX]; /* m->user points here only until this returns */
    m->user = u;
    m->user_len = st_chat_room_user(u, room, rl);
    m->conv = room;
    m->conv_len = rl;
    st_buf_t tmp = {0};
    rc = st_chat_post(r->chat, m, &tmp, wait);
    /* the author has read the room up to its own post (SPEC §2.1 v5: unread counts others'
     * messages): its marker moves there, the only member record a post writes */
    if (!rc)
        rc = st__rooms_read_to(r, room, rl, m->from, m->from_len,
                               st__rooms_json_seq(tmp.data, tmp.len), wait);
    if (!rc) st_chat_room_json(out, tmp.data, tmp.len);
    st_buf_free(&tmp);
    m->user = NULL;
    return rc;
}

/* A page of room messages: each renamed on its way into the page (st_chat_messages' walk). */
int st_rooms_messages(st_rooms_t *r, const char *room, size_t rl, st_message_query_t *q,
                      st_buf_t *out, uint64_t *wait)
{
    int rc = st_rooms_exists(r, room, rl, wait);
    if (rc) return rc;
    char u[ST_CHAT_USER_MAX];
    size_t ul = st_chat_room_user(u, room, rl);
    q->conv = room;
    q->conv_len = rl;
    q->as_room = true;
    return st_chat_messages(r->chat, u, ul, q, out, wait);
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
    char u[ST_CHAT_USER_MAX];
    size_t ul = st_chat_room_user(u, room, rl);
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
        rc = st_chat_each(r->chat, u, ul, &q, st__author, &a, &more, &last, wait);
        bool mine = a.found && a.from.len == al && memcmp(a.from.data, actor, al) == 0;
        st_buf_free(&a.from);
        if (rc) return rc;
        if (!a.found) return ST_ENOTFOUND;
        if (!mine) return ST_EFORBIDDEN;
    }
    st_buf_t tmp = {0};
    rc = e ? st_chat_edit(r->chat, u, ul, msg_id, e, &tmp, wait)
           : st_chat_delete(r->chat, u, ul, msg_id, &tmp, wait);
    if (rc == ST_OK && !e)
        rc = st__rooms_gone(r, room, rl, st__rooms_json_seq(tmp.data, tmp.len), wait);
    if (rc == ST_OK) st_chat_room_json(out, tmp.data, tmp.len);
    st_buf_free(&tmp);
    return rc;
}
