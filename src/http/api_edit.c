/* SPDX-License-Identifier: MIT */
/* HTTP handlers for edits, deletes and erasure (SPEC §2.2). */
#include "internal.h"
#include "strata/chat.h"
#include "strata/rooms.h"

#include <string.h>

/* The {msg_id} path parameter: decimal, 1..2^64-1. */
static int st__msg_id(st_ctx_t *c, uint64_t *out)
{
    return st_ctx_msg_id(c, "msg_id", c->params[1], c->plens[1], out);
}

static int st__answer(st_ctx_t *c, int rc, uint64_t id)
{
    if (rc == ST_EPARKED) return rc;
    if (rc == ST_ENOTFOUND)
        return st_ctx_error(c, rc, "message %llu not found", (unsigned long long)id);
    if (rc == ST_ECONFLICT)
        return st_ctx_error(c, rc, "message %llu is deleted: a tombstone cannot be edited",
                            (unsigned long long)id);
    return rc ? st_ctx_error(c, rc, NULL) : ST_OK;
}

static const char *const st__edit_fields[] = {"content", "metadata", NULL};

/* The body of a PATCH into *e (pointing into *j, which the caller deletes; content and metadata
 * checked as for a post). */
static int st__edit_parse(st_ctx_t *c, cJSON **j, st_message_edit_t *e)
{
    int rc = st_json_body(c, j, st__edit_fields);
    if (rc) return rc;
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(*j, "content");
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(*j, "metadata");
    *e = (st_message_edit_t){0};
    if (!content && !meta)
        return st_ctx_error(c, ST_EINVAL, "a JSON body with content and/or metadata is required");
    if (content) {
        if (!cJSON_IsString(content) || !content->valuestring[0])
            return st_ctx_error_field(c, ST_EINVAL, "content",
                                      "'content' must be a non-empty string (got %s)",
                                      cJSON_IsString(content) ? "\"\"" : st_json_kind(content));
        e->content = content->valuestring;
        e->content_len = strlen(content->valuestring);
        if (e->content_len > c->app->cfg->max_content)
            return st_ctx_error_field(c, ST_ETOOLARGE, "content",
                                      "'content' is larger than %llu bytes (got %zu)",
                                      (unsigned long long)c->app->cfg->max_content, e->content_len);
        if (!st_utf8_valid(e->content, e->content_len))
            return st_ctx_error_field(c, ST_EINVAL, "content", "'content' must be valid UTF-8");
    }
    if (meta) {
        if (cJSON_IsNull(meta)) {
            e->metadata = "null";
            e->metadata_len = 4;
        } else if (!cJSON_IsObject(meta)) {
            return st_ctx_error_field(c, ST_EINVAL, "metadata",
                                      "'metadata' must be a JSON object (got %s)",
                                      st_json_kind(meta));
        } else {
            e->metadata = c->json_meta; /* as the client wrote it */
            e->metadata_len = c->json_meta_len;
        }
    }
    return ST_OK;
}

int st_api_message_patch(st_ctx_t *c)
{
    int rc = st_param_name(c, 0, "user");
    uint64_t id;
    if (rc || (rc = st__msg_id(c, &id))) return rc;
    cJSON *j = NULL;
    st_message_edit_t e;
    if (!(rc = st__edit_parse(c, &j, &e)))
        rc = st__answer(c,
                        st_chat_edit(c->app->chat, ST_USER(c->params[0], c->plens[0]), id, &e,
                                     c->body, &c->wait),
                        id);
    cJSON_Delete(j);
    return rc;
}

/* ---- a room's messages (SPEC §2.1, §2.2): the author, an owner of the room or an admin ---- */

static int st__room_change(st_ctx_t *c, const st_message_edit_t *e, uint64_t id)
{
    st_rooms_t *r = c->app->rooms;
    int rc = st_rooms_exists(r, c->params[0], c->plens[0], &c->wait);
    if (rc == ST_ENOTFOUND)
        return st_ctx_error(c, rc, "room '%.*s%s' not found", ST__V(c->params[0], c->plens[0]));
    if (rc) return st_ctx_error(c, rc, NULL);
    bool check = st_config_auth_on(c->app->cfg) && !c->admin;
    rc = st_rooms_change_message(r, c->params[0], c->plens[0], id, e, check ? c->subject : NULL,
                                 check ? strlen(c->subject) : 0, c->body, &c->wait);
    if (rc == ST_EFORBIDDEN)
        return st_ctx_error(c, rc,
                            "only the message's author, an owner of the room or an admin "
                            "edits or deletes it");
    if (rc == ST_OK && c->req->idem_key) { /* a keyed answer is about the message's author */
        cJSON *m = cJSON_ParseWithLength(c->body->data, c->body->len);
        const cJSON *from = cJSON_GetObjectItemCaseSensitive(m, "from");
        if (cJSON_IsString(from)) st_ctx_about(c, from->valuestring, strlen(from->valuestring));
        cJSON_Delete(m);
    }
    return st__answer(c, rc, id);
}

int st_api_room_message_patch(st_ctx_t *c)
{
    if (!c->app->rooms) return st_ctx_error(c, ST_EUNAVAIL, "rooms are not served here");
    int rc = st_param_name(c, 0, "room_id");
    uint64_t id;
    if (rc || (rc = st__msg_id(c, &id))) return rc;
    cJSON *j = NULL;
    st_message_edit_t e;
    if (!(rc = st__edit_parse(c, &j, &e))) rc = st__room_change(c, &e, id);
    cJSON_Delete(j);
    return rc;
}

int st_api_room_message_delete(st_ctx_t *c)
{
    if (!c->app->rooms) return st_ctx_error(c, ST_EUNAVAIL, "rooms are not served here");
    int rc = st_param_name(c, 0, "room_id");
    uint64_t id;
    if (rc || (rc = st__msg_id(c, &id)) || (rc = st_json_no_fields(c))) return rc;
    return st__room_change(c, NULL, id);
}

int st_api_message_delete(st_ctx_t *c)
{
    int rc = st_param_name(c, 0, "user");
    uint64_t id;
    if (rc || (rc = st__msg_id(c, &id)) || (rc = st_json_no_fields(c))) return rc;
    return st__answer(
        c, st_chat_delete(c->app->chat, ST_USER(c->params[0], c->plens[0]), id, c->body, &c->wait),
        id);
}

int st_api_conversation_delete(st_ctx_t *c)
{
    int rc = st_param_name(c, 0, "user");
    if (!rc) rc = st_param_name(c, 1, "conversation_id");
    if (rc || (rc = st_json_no_fields(c))) return rc;
    int64_t n = 0;
    rc = st_chat_delete_conversation(c->app->chat, c->params[0], c->plens[0], c->params[1],
                                     c->plens[1], &n, &c->wait);
    if (rc == ST_EPARKED) return rc;
    if (rc == ST_ENOTFOUND)
        return st_ctx_error(c, rc, "conversation '%.*s' not found", (int)c->plens[1], c->params[1]);
    if (rc) return st_ctx_error(c, rc, NULL);
    st_buf_printf(c->body, "{\"deleted\":%lld}", (long long)n);
    return ST_OK;
}

void st_ctx_erasure_accepted(st_ctx_t *c, uint64_t id)
{
    c->status = 202;
    st_buf_puts(c->body, "{\"erasure_id\":\"");
    st_buf_append_u64(c->body, id);
    st_buf_puts(c->body, "\"}");
}

int st_api_user_delete(st_ctx_t *c)
{
    int rc = st_param_name(c, 0, "user");
    if (rc || (rc = st_json_no_fields(c))) return rc;
    uint64_t id;
    rc = st_chat_erase(c->app->chat, ST_USER(c->params[0], c->plens[0]), &id, &c->wait);
    if (rc) return st_ctx_error(c, rc, NULL);
    st_ctx_erasure_accepted(c, id);
    return ST_OK;
}

/* Whether the erasure is of the token's subject. */
static bool st__own_erasure(st_ctx_t *c, uint64_t id)
{
    st_owner_t o;
    return st_chat_erasure_owner(c->app->chat, id, &o, &c->wait) == ST_OK &&
           o.kind == ST_OWNER_USER && o.len == strlen(c->subject) &&
           memcmp(o.id, c->subject, o.len) == 0;
}

/* GET /v1/admin/erasures/{id} (SPEC §2.2): an admin reads any erasure; a user that erased itself
 * (DELETE /v1/users/{user} with its own token) polls its own, with that very token although the
 * erasure revoked it for everything else (auth.c): the one thing such a token still reads. A
 * token revoked by its subject's erasure gets 401 token_revoked for any other erasure, admin or
 * not; another user's token 403 (for an id that is no erasure too, so it learns nothing). */
int st_api_erasure_get(st_ctx_t *c)
{
    uint64_t id;
    int rc = st_ctx_msg_id(c, "erasure_id", c->params[0], c->plens[0], &id);
    if (rc) return rc;
    if (st_config_auth_on(c->app->cfg) && (!c->admin || c->revoked_at_us) &&
        !st__own_erasure(c, id)) {
        if (c->revoked_at_us) return st_auth_refuse_revoked(c);
        return st_ctx_error(c, ST_EFORBIDDEN,
                            "this route needs role admin, or the token of the user erased");
    }
    rc = st_chat_erasure_json(c->app->chat, id, c->body, &c->wait);
    if (rc == ST_ENOTFOUND)
        return st_ctx_error(c, rc, "erasure %llu not found", (unsigned long long)id);
    return rc ? st_ctx_error(c, rc, NULL) : ST_OK;
}
