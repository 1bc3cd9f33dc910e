/* SPDX-License-Identifier: MIT */
/*
 * HTTP handlers for rooms (SPEC §2.1). Who may do what:
 *   auth on:  any principal creates a room and becomes its owner; owners add and remove
 *             anyone and change roles; the room's admins add members and admins and remove
 *             those (not owners); a member may remove itself (the last owner may not: 409
 *             last_owner); reads (the room, its members, its messages) are for members and
 *             global admins; `from` and read's `user` are the token's
 *             sub (admins excepted); /v1/users/{user}/rooms is that user's or an admin's.
 *   auth off: anyone; POST /v1/rooms makes members[0] the owner.
 * `from` is a member in both (403 otherwise). A user being erased (SPEC §2.2) is out of every
 * room answer at once: its read marker and room list are 404, adding it is 404, its token reads
 * no room (403); listings and counts leave it out (rooms.c).
 */
#include "internal.h"
#include "strata/rooms.h"
#include "strata/ws.h"

#include <string.h>

#define ST__ROOMS_LIST_MAX 1000 /* users one request may list (members, add, remove) */

static const char *const st__create_fields[] = {"room_id", "name", "members", NULL};
static const char *const st__change_fields[] = {"add", "remove", NULL};
static const char *const st__post_fields[] = {"from", "content", "metadata", NULL};
static const char *const st__read_fields[] = {"user", "seq", NULL};
static const char *const st__role_fields[] = {"role", NULL};
static const char *const st__typing_fields[] = {"user", NULL};
#define ST__TYPING_US 5000000 /* a typing frame says: typing for 5 s from now */
static const char *const st__add_item_fields[] = {"user", "role", NULL};

static bool st__auth_on(const st_ctx_t *c)
{
    return st_config_auth_on(c->app->cfg);
}

static bool st__is_sub(const st_ctx_t *c, const char *u, size_t ul)
{
    return strlen(c->subject) == ul && memcmp(c->subject, u, ul) == 0;
}

/* The room of the path: a valid name, rooms served here. */
static int st__room_param(st_ctx_t *c)
{
    if (!c->app->rooms) return st_ctx_error(c, ST_EUNAVAIL, "rooms are not served here");
    return st_param_name(c, 0, "room_id");
}

static int st__not_found(st_ctx_t *c)
{
    return st_ctx_error(c, ST_ENOTFOUND, "room '%.*s%s' not found",
                        ST__V(c->params[0], c->plens[0]));
}

/* A user being erased (SPEC §2.2): every answer about it is 404, its memberships are gone for
 * every answer at once (its erasure's slices remove them from the rooms later). */
static bool st__erasing(st_ctx_t *c, const char *u, size_t ul)
{
    return c->app->chat && st_chat_erasing(c->app->chat, ST_USER(u, ul), &c->wait);
}

static int st__user_gone(st_ctx_t *c, const char *u, size_t ul)
{
    return st_ctx_error(c, ST_ENOTFOUND, "user '%.*s%s' not found (erased)", ST__V(u, ul));
}

/* Reads of a room: it exists (404) and, with auth on, the token's sub is a member or an admin. */
static int st__reader(st_ctx_t *c)
{
    int role;
    int rc = st_rooms_exists(c->app->rooms, c->params[0], c->plens[0], &c->wait);
    if (rc == ST_ENOTFOUND) return st__not_found(c);
    if (rc) return st_ctx_error(c, rc, NULL);
    if (!st__auth_on(c) || c->admin) return ST_OK;
    rc = st_rooms_role(c->app->rooms, c->params[0], c->plens[0], c->subject, strlen(c->subject),
                       &role, &c->wait);
    if (rc == ST_ENOTFOUND || (rc == ST_OK && st__erasing(c, c->subject, strlen(c->subject))))
        return st_ctx_error(c, ST_EFORBIDDEN, "only the room's members read it");
    return rc ? st_ctx_error(c, rc, NULL) : ST_OK;
}

/* A list of user names in field (absent: *n = 0, unless required): at most
 * ST__ROOMS_LIST_MAX, each valid, none twice. The array is arena memory. */
/* An add item's {"user","role"}: its user into *e (a string node), its role into *role. */
static int st__add_item(st_ctx_t *c, const cJSON **e, const char *where, uint8_t *role)
{
    const cJSON *o = *e, *f;
    cJSON_ArrayForEach(f, o)
    {
        bool known = false;
        for (size_t i = 0; st__add_item_fields[i]; i++)
            known |= f->string && strcmp(f->string, st__add_item_fields[i]) == 0;
        if (!known)
            return st_ctx_error_field(
                c, ST_EINVAL, st_arena_strndup(c->arena, where, strlen(where)),
                "%s: unknown field \"%.*s%s\"", where, ST__V(f->string, strlen(f->string)));
    }
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "role");
    int ro = ST_ROOMS_MEMBER;
    if (r && (!cJSON_IsString(r) ||
              (ro = st_rooms_role_parse(r->valuestring, strlen(r->valuestring))) < 0))
        return st_ctx_error_field(c, ST_EINVAL, st_arena_strndup(c->arena, where, strlen(where)),
                                  "%s.role must be \"owner\", \"admin\" or \"member\"", where);
    *role = (uint8_t)ro;
    *e = cJSON_GetObjectItemCaseSensitive(o, "user");
    return ST_OK;
}

static int st__names(st_ctx_t *c, const cJSON *j, const char *field, bool required,
                     st_rooms_name_t **out, size_t *n)
{
    bool roles = strcmp(field, "add") == 0; /* add items may be {"user","role"} (SPEC §2.1 v5) */
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, field);
    *out = NULL;
    *n = 0;
    if (!a && !required) return ST_OK;
    if (!cJSON_IsArray(a))
        return st_ctx_error_field(c, ST_EINVAL, field, "'%s' must be an array of user names%s",
                                  field, a ? "" : " (required)");
    int size = cJSON_GetArraySize(a);
    if (size > ST__ROOMS_LIST_MAX)
        return st_ctx_error_field(c, ST_EINVAL, field, "'%s' lists at most %d users (got %d)",
                                  field, ST__ROOMS_LIST_MAX, size);
    st_rooms_name_t *v = st_arena_alloc(c->arena, (size_t)(size ? size : 1) * sizeof *v);
    size_t k = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, a)
    {
        const cJSON *e = item; /* the name: the item, or an add item's user */
        char where[64];
        snprintf(where, sizeof where, "%s[%zu]", field, k);
        uint8_t role = ST_ROOMS_MEMBER;
        if (roles && cJSON_IsObject(e)) {
            int rc = st__add_item(c, &e, where, &role);
            if (rc) return rc;
        }
        if (!cJSON_IsString(e) || !st_name_valid(e->valuestring, strlen(e->valuestring)))
            return st_ctx_error_field(c, ST_EINVAL,
                                      st_arena_strndup(c->arena, where, strlen(where)),
                                      "%s must be a user name: 1-255 characters of "
                                      "[A-Za-z0-9_.:-]",
                                      where);
        size_t l = strlen(e->valuestring);
        for (size_t i = 0; i < k; i++)
            if (v[i].n == l && memcmp(v[i].s, e->valuestring, l) == 0)
                return st_ctx_error_field(
                    c, ST_EINVAL, st_arena_strndup(c->arena, where, strlen(where)),
                    "%s: user \"%.*s%s\" is listed twice", where, ST__V(e->valuestring, l));
        v[k++] = (st_rooms_name_t){e->valuestring, l, role};
    }
    *out = v;
    *n = k;
    return ST_OK;
}

/* POST /v1/rooms?route=room:{id} (SPEC §10): a route naming another room is refused. */
static int st__route_names_room(st_ctx_t *c, const char *id, size_t idl)
{
    size_t n;
    const char *v = st_query_get(c->arena, c->req->query, c->req->query_len, "route", &n);
    if (!v || (n == 5 + idl && memcmp(v, "room:", 5) == 0 && memcmp(v + 5, id, idl) == 0))
        return ST_OK;
    return st_ctx_error_field(c, ST_EINVAL, "route",
                              "route names %.*s, the body's room_id is room:%.*s",
                              (int)(n > 300 ? 300 : n), v, (int)idl, id);
}

int st_api_room_create(st_ctx_t *c)
{
    if (!c->app->rooms) return st_ctx_error(c, ST_EUNAVAIL, "rooms are not served here");
    cJSON *j;
    int rc = st_json_body(c, &j, st__create_fields);
    if (rc) return rc;
    if (!j) return st_ctx_error(c, ST_EINVAL, "a JSON body with room_id and members is required");
    const char *room, *name = NULL, *owner;
    size_t rl, nl = 0, ol, n;
    st_rooms_name_t *members;
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(j, "name");
    if ((rc = st_json_name(c, j, "room_id", &room, &rl)) ||
        (rc = st__route_names_room(c, room, rl)) ||
        (rc = st__names(c, j, "members", true, &members, &n)))
        goto done;
    st_ctx_about_room(c, room, rl); /* its answer (the name) goes with the room */
    if (nm && !cJSON_IsNull(nm)) {
        if (!cJSON_IsString(nm) || strlen(nm->valuestring) > ST_ROOMS_NAME_MAX) {
            rc = st_ctx_error_field(c, ST_EINVAL, "name",
                                    "'name' must be a string of at most %d "
                                    "bytes",
                                    ST_ROOMS_NAME_MAX);
            goto done;
        }
        name = nm->valuestring;
        nl = strlen(name);
    }
    if (st__auth_on(c)) { /* the creator owns it */
        owner = c->subject;
        ol = strlen(owner);
        if (!st_name_valid(owner, ol)) {
            rc = st_ctx_error(c, ST_EFORBIDDEN, "the token's subject is not a valid user name");
            goto done;
        }
    } else if (n) { /* no principal: the first member listed */
        owner = members[0].s;
        ol = members[0].n;
    } else {
        rc = st_ctx_error_field(c, ST_EINVAL, "members",
                                "'members' must name at least one user (the first is the owner)");
        goto done;
    }
    long who;
    rc = st_rooms_create(c->app->rooms, room, rl, name, nl, members, n, owner, ol, &who, c->body,
                         &c->wait);
    if (rc == ST_EEXIST && st_rooms_deleting(c->app->rooms, room, rl, &c->wait))
        rc = st_ctx_error(c, rc, "room '%.*s' is being deleted: its id is free once that is done",
                          (int)rl, room);
    else if (rc == ST_EEXIST)
        rc = st_ctx_error(c, rc, "room '%.*s' exists already", (int)rl, room);
    else if (rc == ST_ENOTFOUND)
        rc = st__user_gone(c, who < 0 ? owner : members[who].s, who < 0 ? ol : members[who].n);
    else if (rc == ST_EINVAL)
        rc = st_ctx_error_field(c, rc, "members", "a room has at most %zu members",
                                st_rooms_max_members(c->app->rooms));
    else if (rc == ST_ECONFLICT)
        rc = st_ctx_error(c, rc, "user '%.*s' is in %d rooms already",
                          who < 0 ? (int)ol : (int)members[who].n, who < 0 ? owner : members[who].s,
                          ST_ROOMS_USER_MAX);
    else if (rc)
        rc = st_ctx_error(c, rc, NULL);
    else
        c->status = 201;
done:
    cJSON_Delete(j);
    return rc;
}

int st_api_room_get(st_ctx_t *c)
{
    int rc = st__room_param(c);
    if (!rc) rc = st__reader(c);
    if (rc) return rc;
    rc = st_rooms_get(c->app->rooms, c->params[0], c->plens[0], c->body, &c->wait);
    if (rc == ST_ENOTFOUND) return st__not_found(c);
    return rc ? st_ctx_error(c, rc, NULL) : ST_OK;
}

/* What a room admin (not an owner) may change: add members and admins, remove those. */
static int st__admin_may(st_ctx_t *c, const char *room, size_t rl, const st_rooms_name_t *add,
                         size_t nadd, const st_rooms_name_t *rm, size_t nrm)
{
    for (size_t i = 0; i < nadd; i++)
        if (add[i].role == ST_ROOMS_OWNER)
            return st_ctx_error_field(c, ST_EFORBIDDEN, "add",
                                      "only an owner makes owners (user \"%.*s%s\")",
                                      ST__V(add[i].s, add[i].n));
    for (size_t i = 0; i < nrm; i++) {
        int role = -1;
        int rc = st_rooms_role(c->app->rooms, room, rl, rm[i].s, rm[i].n, &role, &c->wait);
        if (rc && rc != ST_ENOTFOUND) return st_ctx_error(c, rc, NULL);
        if (role == ST_ROOMS_OWNER)
            return st_ctx_error_field(c, ST_EFORBIDDEN, "remove",
                                      "only an owner removes an owner (user \"%.*s%s\")",
                                      ST__V(rm[i].s, rm[i].n));
    }
    return ST_OK;
}

int st_api_room_members_change(st_ctx_t *c)
{
    int rc = st__room_param(c);
    if (rc) return rc;
    cJSON *j;
    if ((rc = st_json_body(c, &j, st__change_fields))) return rc;
    st_rooms_name_t *add = NULL, *rm = NULL;
    size_t nadd = 0, nrm = 0;
    if ((rc = st__names(c, j, "add", false, &add, &nadd)) ||
        (rc = st__names(c, j, "remove", false, &rm, &nrm)))
        goto done;
    if (!j || (!cJSON_GetObjectItemCaseSensitive(j, "add") &&
               !cJSON_GetObjectItemCaseSensitive(j, "remove"))) {
        rc = st_ctx_error(c, ST_EINVAL, "a JSON body with add and/or remove is required");
        goto done;
    }
    for (size_t i = 0; i < nadd; i++)
        for (size_t k = 0; k < nrm; k++)
            if (add[i].n == rm[k].n && memcmp(add[i].s, rm[k].s, add[i].n) == 0) {
                rc = st_ctx_error_field(c, ST_EINVAL, "remove",
                                        "user \"%.*s%s\" is both added and removed",
                                        ST__V(add[i].s, add[i].n));
                goto done;
            }
    const char *room = c->params[0];
    size_t rl = c->plens[0];
    rc = st_rooms_exists(c->app->rooms, room, rl, &c->wait);
    if (rc == ST_ENOTFOUND) {
        rc = st__not_found(c);
        goto done;
    }
    if (rc == ST_OK && st__auth_on(c) && !c->admin) {
        int role = -1;
        rc =
            st_rooms_role(c->app->rooms, room, rl, c->subject, strlen(c->subject), &role, &c->wait);
        if (rc == ST_ENOTFOUND) rc = ST_OK;
        if (!rc && role >= 0 && st__erasing(c, c->subject, strlen(c->subject)))
            role = -1; /* its membership is gone for every answer */
        bool self = nadd == 0 && nrm == 1 && st__is_sub(c, rm[0].s, rm[0].n) && role >= 0;
        if (!rc && role != ST_ROOMS_OWNER && role != ST_ROOMS_ADMIN && !self) {
            rc = st_ctx_error(c, ST_EFORBIDDEN,
                              "only the room's owners and admins change its "
                              "members (a member may remove itself)");
            goto done;
        }
        if (!rc && role == ST_ROOMS_ADMIN && !self) /* admins: members and admins, not owners */
            rc = st__admin_may(c, room, rl, add, nadd, rm, nrm);
        if (rc) goto done;
    }
    long who = -1;
    if (!rc)
        rc = st_rooms_change(c->app->rooms, room, rl, add, nadd, rm, nrm, &who, c->body, &c->wait);
    if (rc == ST_ENOTFOUND && who >= 0)
        rc = st__user_gone(c, add[who].s, add[who].n);
    else if (rc == ST_ENOTFOUND)
        rc = st__not_found(c);
    else if (rc == ST_ELASTOWNER)
        rc = st_ctx_error(c, rc, NULL);
    else if (rc == ST_ECONFLICT && who >= 0)
        rc = st_ctx_error_field(c, rc, "add", "user '%.*s' is in %d rooms already", (int)add[who].n,
                                add[who].s, ST_ROOMS_USER_MAX);
    else if (rc == ST_ECONFLICT)
        rc = st_ctx_error_field(c, rc, "add", "a room has at most %zu members (--max-room-members)",
                                st_rooms_max_members(c->app->rooms));
    else if (rc)
        rc = st_ctx_error(c, rc, NULL);
done:
    cJSON_Delete(j);
    return rc;
}

/* The room exists (404) and, with auth on, the token's sub is one of its owners (a member being
 * erased is none) or a global admin (403 "only the room's owners <what>"). */
static int st__owner_only(st_ctx_t *c, const char *room, size_t rl, const char *what)
{
    int rc = st_rooms_exists(c->app->rooms, room, rl, &c->wait);
    if (rc == ST_ENOTFOUND) return st__not_found(c);
    if (rc) return st_ctx_error(c, rc, NULL);
    if (!st__auth_on(c) || c->admin) return ST_OK;
    int mine = -1;
    rc = st_rooms_role(c->app->rooms, room, rl, c->subject, strlen(c->subject), &mine, &c->wait);
    if (rc && rc != ST_ENOTFOUND) return st_ctx_error(c, rc, NULL);
    if (mine >= 0 && st__erasing(c, c->subject, strlen(c->subject))) mine = -1;
    if (mine != ST_ROOMS_OWNER)
        return st_ctx_error(c, ST_EFORBIDDEN, "only the room's owners %s", what);
    return ST_OK;
}

/* DELETE /v1/rooms/{room} (SPEC §2.1 v5): an owner or a global admin; 202 {"erasure_id"}. */
int st_api_room_delete(st_ctx_t *c)
{
    int rc = st__room_param(c);
    if (rc || (rc = st_json_no_fields(c))) return rc;
    const char *room = c->params[0];
    size_t rl = c->plens[0];
    if ((rc = st__owner_only(c, room, rl, "delete it"))) return rc;
    uint64_t id;
    rc = st_rooms_delete(c->app->rooms, room, rl, &id, &c->wait);
    if (rc == ST_ENOTFOUND) return st__not_found(c);
    if (rc) return st_ctx_error(c, rc, NULL);
    st_ctx_erasure_accepted(c, id);
    return ST_OK;
}

/* PATCH /v1/rooms/{room}/members/{user} {"role"}: owners (and global admins) change roles. */
int st_api_room_member_patch(st_ctx_t *c)
{
    int rc = st__room_param(c);
    if (!rc) rc = st_param_name(c, 1, "user");
    if (rc) return rc;
    cJSON *j;
    if ((rc = st_json_body(c, &j, st__role_fields))) return rc;
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "role");
    int role = -1;
    if (!cJSON_IsString(r) ||
        (role = st_rooms_role_parse(r->valuestring, strlen(r->valuestring))) < 0) {
        cJSON_Delete(j);
        return st_ctx_error_field(
            c, ST_EINVAL, "role",
            "a JSON body with role \"owner\", \"admin\" or \"member\" is required");
    }
    cJSON_Delete(j);
    const char *room = c->params[0], *user = c->params[1];
    size_t rl = c->plens[0], ul = c->plens[1];
    if ((rc = st__owner_only(c, room, rl, "change roles"))) return rc;
    bool not_member;
    rc = st_rooms_set_role(c->app->rooms, room, rl, user, ul, role, &not_member, c->body, &c->wait);
    if (rc == ST_ENOTFOUND && not_member)
        return st_ctx_error(c, rc, "user '%.*s%s' is not a member of room '%.*s%s'",
                            ST__V(user, ul), ST__V(room, rl));
    if (rc == ST_ENOTFOUND) return st__not_found(c);
    return rc ? st_ctx_error(c, rc, NULL) : ST_OK;
}

static int st__limit(st_ctx_t *c, int64_t def, int64_t *out)
{
    size_t n;
    const char *v = st_query_get(c->arena, c->req->query, c->req->query_len, "limit", &n);
    *out = def;
    if (v && (st_parse_i64(v, n, out) || *out < 1 || *out > 1000))
        return st_ctx_error_field(c, ST_EINVAL, "limit", "limit must be 1..1000 (got \"%.*s%s\")",
                                  ST__V(v, n));
    return ST_OK;
}

int st_api_room_members_list(st_ctx_t *c)
{
    int rc = st__room_param(c);
    if (!rc) rc = st__reader(c);
    if (rc) return rc;
    int64_t limit;
    if ((rc = st__limit(c, 100, &limit))) return rc;
    size_t clen = 0;
    const char *cursor = st_query_get(c->arena, c->req->query, c->req->query_len, "cursor", &clen);
    if (cursor && !st_name_valid(cursor, clen))
        return st_ctx_error_field(c, ST_EINVAL, "cursor", "bad cursor (got \"%.*s%s\")",
                                  ST__V(cursor, clen));
    rc = st_rooms_members(c->app->rooms, c->params[0], c->plens[0], cursor, clen, (size_t)limit,
                          c->body, &c->wait);
    if (rc == ST_ENOTFOUND) return st__not_found(c);
    return rc ? st_ctx_error(c, rc, NULL) : ST_OK;
}

int st_api_room_message_post(st_ctx_t *c)
{
    int rc = st__room_param(c);
    if (rc) return rc;
    cJSON *j;
    if ((rc = st_json_body(c, &j, st__post_fields))) return rc;
    if (!j) return st_ctx_error(c, ST_EINVAL, "a JSON body with from and content is required");
    st_message_in_t m = {0};
    if ((rc = st_json_name(c, j, "from", &m.from, &m.from_len)) ||
        (rc = st_ctx_message_body(c, j, &m)))
        goto done;
    if (st__auth_on(c) && !c->admin && !st__is_sub(c, m.from, m.from_len)) {
        rc = st_ctx_error(c, ST_EFORBIDDEN, "'from' must be the token's subject");
        goto done;
    }
    rc = st_rooms_post(c->app->rooms, c->params[0], c->plens[0], &m, c->body, &c->wait);
    st_ctx_about(c, m.from, m.from_len);
    if (rc == ST_ENOTFOUND)
        rc = st__not_found(c);
    else if (rc == ST_EFORBIDDEN)
        rc = st_ctx_error(c, rc, "'%.*s' is not a member of the room", (int)m.from_len, m.from);
    else if (rc)
        rc = st_ctx_error(c, rc, NULL);
    else
        c->status = 201;
done:
    cJSON_Delete(j);
    return rc;
}

int st_api_room_message_list(st_ctx_t *c)
{
    int rc = st__room_param(c);
    if (rc) return rc;
    st_message_query_t q = {0};
    if ((rc = st_ctx_message_query(c, &q)) || (rc = st__reader(c))) return rc;
    rc = st_rooms_messages(c->app->rooms, c->params[0], c->plens[0], &q, c->body, &c->wait);
    if (rc == ST_ENOTFOUND) return st__not_found(c);
    return rc ? st_ctx_error(c, rc, NULL) : ST_OK;
}

/* POST /v1/rooms/{room}/typing {"user"} (SPEC §2.1 v5): 204; a member's typing frame to the
 * room's subscribers (coalesced to one per user per room per second), never stored. */
int st_api_room_typing(st_ctx_t *c)
{
    int rc = st__room_param(c);
    if (rc) return rc;
    cJSON *j;
    if ((rc = st_json_body(c, &j, st__typing_fields))) return rc;
    if (!j) return st_ctx_error(c, ST_EINVAL, "a JSON body with user is required");
    const char *user;
    size_t ul;
    int role;
    const char *room = c->params[0];
    size_t rl = c->plens[0];
    if ((rc = st_json_name(c, j, "user", &user, &ul))) goto done;
    if (st__auth_on(c) && !c->admin && !st__is_sub(c, user, ul)) {
        rc = st_ctx_error(c, ST_EFORBIDDEN, "'user' must be the token's subject");
        goto done;
    }
    rc = st_rooms_exists(c->app->rooms, room, rl, &c->wait);
    if (rc == ST_ENOTFOUND) {
        rc = st__not_found(c);
        goto done;
    }
    if (!rc) rc = st_rooms_role(c->app->rooms, room, rl, user, ul, &role, &c->wait);
    if (rc == ST_ENOTFOUND || (!rc && st__erasing(c, user, ul))) {
        rc = st_ctx_error(c, ST_EFORBIDDEN, "'%.*s' is not a member of the room", (int)ul, user);
        goto done;
    }
    if (rc) {
        rc = st_ctx_error(c, rc, NULL);
        goto done;
    }
    if (c->app->ws) st_ws_typing(c->app->ws, room, rl, user, ul, st_now_us() + ST__TYPING_US, true);
    c->status = 204;
done:
    cJSON_Delete(j);
    return rc;
}

/* GET /v1/rooms/{room}/presence (SPEC §2.1 v5): {"room_id","online":[user…]}, the members
 * streaming the room on any member of the group (ws/presence.c), for the room's readers. */
int st_api_room_presence(st_ctx_t *c)
{
    int rc = st__room_param(c);
    if (!rc) rc = st__reader(c);
    if (rc) return rc;
    st_ws_presence_json(c->app->ws, c->params[0], c->plens[0], c->body);
    return ST_OK;
}

int st_api_room_read(st_ctx_t *c)
{
    int rc = st__room_param(c);
    if (rc) return rc;
    cJSON *j;
    if ((rc = st_json_body(c, &j, st__read_fields))) return rc;
    if (!j) return st_ctx_error(c, ST_EINVAL, "a JSON body with user and seq is required");
    const char *user;
    size_t ul;
    int64_t seq;
    if ((rc = st_json_name(c, j, "user", &user, &ul))) goto done;
    if (!cJSON_GetObjectItemCaseSensitive(j, "seq")) {
        rc = st_ctx_error_field(c, ST_EINVAL, "seq", "'seq' is required");
        goto done;
    }
    if ((rc = st_json_int(c, j, "seq", 0, INT64_MAX, 0, &seq))) goto done;
    if (st__auth_on(c) && !c->admin && !st__is_sub(c, user, ul)) {
        rc = st_ctx_error(c, ST_EFORBIDDEN, "'user' must be the token's subject");
        goto done;
    }
    if (st__erasing(c, user, ul)) { /* its read marker is an answer about it */
        rc = st__user_gone(c, user, ul);
        goto done;
    }
    rc = st_rooms_read(c->app->rooms, c->params[0], c->plens[0], user, ul, seq, c->body, &c->wait);
    if (rc == ST_ENOTFOUND)
        rc = st__not_found(c);
    else if (rc == ST_EFORBIDDEN)
        rc = st_ctx_error(c, rc, "'%.*s' is not a member of the room", (int)ul, user);
    else if (rc)
        rc = st_ctx_error(c, rc, NULL);
done:
    cJSON_Delete(j);
    return rc;
}

int st_api_user_rooms(st_ctx_t *c)
{
    int rc = st_param_name(c, 0, "user");
    if (rc) return rc;
    if (!c->app->rooms) return st_ctx_error(c, ST_EUNAVAIL, "rooms are not served here");
    if (st__auth_on(c) && !c->admin && !st__is_sub(c, c->params[0], c->plens[0]))
        return st_ctx_error(c, ST_EFORBIDDEN, "the token's subject may only list its own rooms");
    if (st__erasing(c, c->params[0], c->plens[0]))
        return st__user_gone(c, c->params[0], c->plens[0]);
    int64_t limit;
    if ((rc = st__limit(c, 20, &limit))) return rc;
    size_t clen = 0;
    const char *cursor = st_query_get(c->arena, c->req->query, c->req->query_len, "cursor", &clen);
    rc = st_rooms_of_user(c->app->rooms, c->params[0], c->plens[0], cursor, clen, (size_t)limit,
                          c->body, &c->wait);
    if (rc == ST_EINVAL) return st_ctx_error_field(c, rc, "cursor", "bad cursor");
    return rc ? st_ctx_error(c, rc, NULL) : ST_OK;
}

/* POST /v1/users/{user}/rooms/remote (SPEC §10, internal): a room's group tells the user's
 * group about a membership change, from its outbox (src/rooms/outbox.c). Signed with the groups'
 * shared --cluster-secret; its Idempotency-Key makes a resend change nothing. */
static const char *const st__remote_fields[] = {"room_id", "name", "joined_at", "change", NULL};

int st_api_user_rooms_remote(st_ctx_t *c)
{
    int rc = st_param_name(c, 0, "user");
    if (rc) return rc;
    if (!c->app->rooms) return st_ctx_error(c, ST_EUNAVAIL, "rooms are not served here");
    size_t qn, ul = c->plens[0];
    const char *q = st_query_get(c->arena, c->req->query, c->req->query_len, "route", &qn);
    if (q && !(qn == 5 + ul && memcmp(q, "user:", 5) == 0 && memcmp(q + 5, c->params[0], ul) == 0))
        return st_ctx_error_field(c, ST_EINVAL, "route",
                                  "route names %.*s, the path's user is user:%.*s",
                                  (int)(qn > 300 ? 300 : qn), q, (int)ul, c->params[0]);
    cJSON *j;
    if ((rc = st_json_body(c, &j, st__remote_fields))) return rc;
    if (!j)
        return st_ctx_error(c, ST_EINVAL,
                            "a JSON body with room_id, joined_at and change is required");
    const char *room, *name = NULL;
    size_t rl, nl = 0;
    int64_t joined_at;
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(j, "name");
    const cJSON *ch = cJSON_GetObjectItemCaseSensitive(j, "change");
    bool added = false;
    if ((rc = st_json_name(c, j, "room_id", &room, &rl))) goto done;
    if (!cJSON_GetObjectItemCaseSensitive(j, "joined_at")) {
        rc = st_ctx_error_field(c, ST_EINVAL, "joined_at", "'joined_at' is required");
        goto done;
    }
    if ((rc = st_json_int(c, j, "joined_at", 0, INT64_MAX, 0, &joined_at))) goto done;
    if (cJSON_IsString(ch) && strcmp(ch->valuestring, "added") == 0)
        added = true;
    else if (!cJSON_IsString(ch) || strcmp(ch->valuestring, "removed") != 0) {
        rc =
            st_ctx_error_field(c, ST_EINVAL, "change", "'change' must be \"added\" or \"removed\"");
        goto done;
    }
    if (nm && !cJSON_IsNull(nm)) {
        if (!cJSON_IsString(nm) || strlen(nm->valuestring) > ST_ROOMS_NAME_MAX) {
            rc = st_ctx_error_field(c, ST_EINVAL, "name",
                                    "'name' must be a string of at most %d bytes",
                                    ST_ROOMS_NAME_MAX);
            goto done;
        }
        name = nm->valuestring;
        nl = strlen(name);
    }
    rc = st_rooms_remote(c->app->rooms, c->params[0], ul, room, rl, name, nl, joined_at, added,
                         c->body, &c->wait);
    if (rc) rc = st_ctx_error(c, rc, NULL);
done:
    cJSON_Delete(j);
    return rc;
}

/* POST /v1/rooms/{room}/erasures (SPEC §2.2, §10, internal): a user's group erased a user who
 * is or was in this room; the room's group erases it too, from the user's group's outbox
 * (src/rooms/outbox.c). That is an erasure of the user here (st_chat_erase, durable before the
 * 202): at once it is out of every room answer of this group, then the slices make its
 * messages in this group's rooms tombstones and take it out of them (the rooms it posted in
 * and left too). The room need not exist here: the user is erased all the same. Signed with the
 * groups' shared --cluster-secret; a resend joins the pending erasure (or finds nothing left). */
static const char *const st__erasure_fields[] = {"user", NULL};

int st_api_room_erasure(st_ctx_t *c)
{
    int rc = st__room_param(c);
    if (rc) return rc;
    size_t qn, rl = c->plens[0];
    const char *q = st_query_get(c->arena, c->req->query, c->req->query_len, "route", &qn);
    if (q && !(qn == 5 + rl && memcmp(q, "room:", 5) == 0 && memcmp(q + 5, c->params[0], rl) == 0))
        return st_ctx_error_field(c, ST_EINVAL, "route",
                                  "route names %.*s, the path's room is room:%.*s",
                                  (int)(qn > 300 ? 300 : qn), q, (int)rl, c->params[0]);
    cJSON *j;
    if ((rc = st_json_body(c, &j, st__erasure_fields))) return rc;
    if (!j) return st_ctx_error(c, ST_EINVAL, "a JSON body with user is required");
    const char *user;
    size_t ul;
    uint64_t id;
    if (!(rc = st_json_name(c, j, "user", &user, &ul))) {
        rc = st_chat_erase(c->app->chat, ST_USER(user, ul), &id, &c->wait);
        if (rc) {
            rc = st_ctx_error(c, rc, NULL);
        } else {
            st_ctx_erasure_accepted(c, id);
        }
    }
    cJSON_Delete(j);
    return rc;
}
