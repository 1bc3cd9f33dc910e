/* SPDX-License-Identifier: MIT */
/* Rooms (SPEC §2.1): the module, and room records — create, read, exists (strata/rooms.h has the
 * key layout; internal.h what the files share). */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

int st_rooms_open(st_rooms_t **out, st_store_t *store, st_chat_t *chat, size_t max_members)
{
    /* strata/rooms.h's layout, and the erasure records below */
    static const st_claim_t keys[] = {ST_CLAIM("r"),
                                      ST_CLAIM("q"),
                                      ST_CLAIM("j"),
                                      ST_CLAIM("J"),
                                      ST_CLAIM("p"),
                                      ST_CLAIM("O"),
                                      ST_CLAIM("d"),
                                      ST_CLAIM("a"),
                                      ST_CLAIM("A"),
                                      ST_CLAIM("\0rooms_erase"),
                                      ST_CLAIM("\0rooms_sweep")};
    int rc = st_store_claims(store, "rooms", keys, sizeof keys / sizeof *keys);
    if (rc != ST_OK) return rc;
    st_rooms_t *r = st_calloc(1, sizeof *r);
    r->store = store;
    r->chat = chat;
    r->max_members = max_members ? max_members : 100000;
    st_chat_on_erase(chat, st__rooms_erase, r);
    st__rooms_sweep_open(r);
    const char *e = getenv("STRATA_TEST_ROOMS_POST_AS_OLD");
    r->test_post_as_old = e && *e == '1';
    *out = r;
    return ST_OK;
}

void st_rooms_close(st_rooms_t *r)
{
    if (r) st_chat_on_expired(r->chat, NULL, NULL);
    free(r);
}

size_t st_rooms_max_members(const st_rooms_t *r)
{
    return r->max_members;
}

void st_rooms_set_outbox(st_rooms_t *r, struct st_outbox *ob)
{
    r->outbox = ob;
}

void st_rooms_observe(st_rooms_t *r, st_rooms_observer_fn fn, void *arg)
{
    st_observers_add(&r->observers, (st_observer_any_fn)fn, arg);
}

void st_rooms_unobserve(st_rooms_t *r, const void *arg)
{
    st_observers_remove(&r->observers, arg);
}

/* ---- the routes' operations ---- */

int st_rooms_exists(st_rooms_t *r, const char *room, size_t rl, uint64_t *wait)
{
    st_room_t rm;
    return st__rooms_load(r, room, rl, &rm, NULL, NULL, NULL, NULL, wait);
}

const char *st_rooms_role_name(int role)
{
    return role == ST_ROOMS_OWNER ? "owner" : role == ST_ROOMS_ADMIN ? "admin" : "member";
}

int st_rooms_role_parse(const char *s, size_t n)
{
    static const int roles[] = {ST_ROOMS_MEMBER, ST_ROOMS_ADMIN, ST_ROOMS_OWNER};
    for (size_t i = 0; i < sizeof roles / sizeof *roles; i++) {
        const char *name = st_rooms_role_name(roles[i]);
        if (strlen(name) == n && memcmp(name, s, n) == 0) return roles[i];
    }
    return -1;
}

int st_rooms_role(st_rooms_t *r, const char *room, size_t rl, const char *user, size_t ul,
                  int *role, uint64_t *wait)
{
    st_member_t m;
    int rc = st__rooms_member_get(r, room, rl, user, ul, &m, wait);
    if (!rc) *role = m.role;
    return rc;
}

int st_rooms_get(st_rooms_t *r, const char *room, size_t rl, st_buf_t *out, uint64_t *wait)
{
    st_room_t rm;
    const char *name;
    size_t nl;
    int rc = st__rooms_load(r, room, rl, &rm, NULL, NULL, &name, &nl, wait);
    if (rc) return rc;
    /* the strings are borrowed from the store until its next call: copy the name first */
    char nm[ST_ROOMS_NAME_MAX + 1];
    bool has_name = name != NULL && nl < sizeof nm;
    if (has_name) memcpy(nm, name, nl);
    st_chat_conv_info_t ci;
    bool any;
    int64_t gone = 0, total = 0;
    /* the users being erased, read once: out of the members and their posts out of the count */
    st_buf_t erasing = {0};
    if (!(rc = st__rooms_conv(r, room, rl, &ci, &any, wait)) &&
        !(rc = st__rooms_erasing_names(r, &erasing, wait)) &&
        !(rc = st__rooms_erasing_members(r, &erasing, room, rl, &gone, wait)))
        rc = st__rooms_total_now(r, &erasing, room, rl, &ci, &total, wait);
    st_buf_free(&erasing);
    if (rc) return rc;
    st_buf_puts(out, "{\"room_id\":");
    st_buf_append_json_str(out, room, rl);
    st_buf_puts(out, ",\"name\":");
    if (has_name)
        st_buf_append_json_str(out, nm, nl);
    else
        st_buf_puts(out, "null");
    st_buf_printf(out,
                  ",\"created\":%lld,\"updated\":%lld,\"first_msg_id\":", (long long)rm.created,
                  (long long)(any ? ci.updated : rm.created));
    st__rooms_id_or_null(out, ci.first_msg_id);
    st_buf_puts(out, ",\"last_msg_id\":");
    st__rooms_id_or_null(out, ci.last_msg_id);
    st_buf_printf(out, ",\"total_messages\":%lld,\"members\":%lld}", (long long)total,
                  (long long)(rm.members > gone ? rm.members - gone : 0));
    return ST_OK;
}

bool st_rooms_deleting(st_rooms_t *r, const char *room, size_t rl, uint64_t *wait)
{
    return st_chat_erasing(r->chat, ST_ROOM(room, rl), wait);
}

int st_rooms_delete(st_rooms_t *r, const char *room, size_t rl, uint64_t *erasure, uint64_t *wait)
{
    int rc = st_rooms_exists(r, room, rl, wait);
    if (rc) return rc;
    /* the room owns its messages in chat: their erasure (hot and cold, every kept object) is
     * an owner's (SPEC §2.2); it ends the room's streams with not_found, and its slices take
     * the members out (erase.c) */
    if ((rc = st_chat_erase(r->chat, ST_ROOM(room, rl), erasure, wait))) return rc;
    /* at once: 404 to everyone */
    uint8_t k[ST__ROOMS_KEY_CAP];
    return st_store_del(r->store, k, st__rooms_key(k, room, rl), wait);
}

int st_rooms_create(st_rooms_t *r, const char *room, size_t rl, const char *name, size_t nl,
                    const st_rooms_name_t *members, size_t n, const char *owner, size_t ol,
                    long *who, st_buf_t *out, uint64_t *wait)
{
    st_room_t rm;
    *who = -1;
    int rc = st__rooms_load(r, room, rl, &rm, NULL, NULL, NULL, NULL, wait);
    if (rc == ST_OK) return ST_EEXIST;
    if (rc != ST_ENOTFOUND) return rc;
    /* the id is free again once the deletion of the room that had it is done */
    if (st_rooms_deleting(r, room, rl, wait)) return ST_EEXIST;
    rc = ST_OK;
    bool owner_listed = false;
    for (size_t i = 0; i < n; i++)
        if (members[i].n == ol && memcmp(members[i].s, owner, ol) == 0) owner_listed = true;
    size_t total = n + (owner_listed ? 0 : 1);
    if (total > r->max_members) return ST_EINVAL;
    /* every user's room count first: nothing is staged when one is full */
    int64_t *counts = st_malloc((n + 1) * sizeof *counts);
    for (size_t i = 0; i <= n && !rc; i++) {
        const char *u = i < n ? members[i].s : owner;
        size_t ul = i < n ? members[i].n : ol;
        if (st_chat_erasing(r->chat, ST_USER(u, ul), wait)) { /* 404 from its erasure on */
            *who = i < n ? (long)i : -1;
            rc = ST_ENOTFOUND;
            break;
        }
        rc = st__rooms_user_count(r, u, ul, &counts[i], wait);
        if (!rc && counts[i] >= ST_ROOMS_USER_MAX) {
            *who = i < n ? (long)i : -1;
            rc = ST_ECONFLICT;
        }
    }
    int64_t now = st_now_us();
    if (!rc) {
        /* the record: created, members, creator, name */
        st_buf_t v = {0};
        int64_t cnt = (int64_t)total;
        uint16_t cl = (uint16_t)ol;
        uint8_t has = name != NULL;
        st_buf_append(&v, &now, 8);
        st_buf_append(&v, &cnt, 8);
        st_buf_append(&v, &cl, 2);
        st_buf_append(&v, &has, 1);
        st_buf_append(&v, owner, ol);
        if (name) st_buf_append(&v, name, nl);
        uint8_t k[ST__ROOMS_KEY_CAP];
        rc = st_store_put(r->store, k, st__rooms_key(k, room, rl), v.data, v.len, wait);
        st_buf_free(&v);
        /* its posts go into the author index from the first: an erasure visits only the
         * erased user's (authors.c) */
        if (!rc) rc = st__rooms_mark_indexed(r, room, rl, true, wait);
    }
    if (!rc)
        rc = st__rooms_join(r, room, rl, 0, name, nl, owner, ol, ST_ROOMS_OWNER, now, counts[n],
                            wait);
    for (size_t i = 0; i < n && !rc; i++)
        if (!(members[i].n == ol && memcmp(members[i].s, owner, ol) == 0))
            rc = st__rooms_join(r, room, rl, 0, name, nl, members[i].s, members[i].n,
                                ST_ROOMS_MEMBER, now, counts[i], wait);
    free(counts);
    if (rc) return rc;
    return st_rooms_get(r, room, rl, out, wait);
}
