/* SPDX-License-Identifier: MIT */
/*
 * A stream's requests: subscribe (counter, seats, messages, room) and unsubscribe, checked
 * against the SPEC (§3) and the token, then started: "subscribed" and the subscription's snapshot
 * behind its fence, or, on a member that does not serve, once its read index round completes
 * (SPEC §8).
 */
#include "internal.h"
#include "strata/chat.h"
#include "strata/counters.h"
#include "strata/repl.h"
#include "strata/rooms.h"
#include "strata/seats.h"
#include "strata/store_group.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- subscribe ---- */

/* `after` of a messages subscription: absent or null (SPEC §3, v4) is no replay, *given false;
 * otherwise a msg_id string, "0" replaying everything. */
static int st__parse_after(const cJSON *after, uint64_t *out, bool *given)
{
    *out = 0;
    *given = false;
    if (!after || cJSON_IsNull(after)) return ST_OK;
    *given = true;
    const char *a = cJSON_IsString(after) ? after->valuestring : "";
    size_t n = strlen(a);
    bool ok = n > 0 && n <= 20;
    for (size_t i = 0; ok && i < n; i++)
        ok = a[i] >= '0' && a[i] <= '9';
    if (!ok || (n == 20 && strcmp(a, "18446744073709551615") > 0)) return ST_EINVAL;
    *out = strtoull(a, NULL, 10);
    return ST_OK;
}

/* c's subscription with this id, or NULL. */
static st_wssub_t *st__sub_find(st_wsconn_t *c, const char *id)
{
    for (ST_LIST_EACH(l, n, &c->subs)) {
        st_wssub_t *s = ST_LIST_ITEM(l, st_wssub_t, link);
        if (strcmp(s->id, id) == 0) return s;
    }
    return NULL;
}

/* Whether c can take a subscription with this id: none of its subscriptions has it, and it has
 * fewer than ST__WS_MAX_SUBS. On error a frame has been queued. */
static int st__check_free_slot(st_ws_t *ws, st_wsconn_t *c, const char *id)
{
    if (st__sub_find(c, id)) {
        st__ws_send_error(ws, c, id, "conflict", "a subscription with this id exists");
        return ST_ECONFLICT;
    }
    if (c->nsubs >= ST__WS_MAX_SUBS) {
        st__ws_send_error(ws, c, id, "too_many_requests", "too many subscriptions on this stream");
        return ST_ERATE;
    }
    return ST_OK;
}

/* The name in j's `field` (*out; absent or null is NULL when `optional`): 1-255 characters of
 * [A-Za-z0-9_.:-]. On error a frame has been queued. */
static int st__check_name(st_ws_t *ws, st_wsconn_t *c, const char *id, const cJSON *j,
                          const char *field, bool optional, const cJSON **out)
{
    *out = cJSON_GetObjectItemCaseSensitive(j, field);
    if (optional && cJSON_IsNull(*out)) *out = NULL; /* null is absent (SPEC §3, v4) */
    if ((optional && !*out) ||
        (cJSON_IsString(*out) && st_name_valid((*out)->valuestring, strlen((*out)->valuestring))))
        return ST_OK;
    char msg[96];
    snprintf(msg, sizeof msg, "'%s' must be 1-255 characters of [A-Za-z0-9_.:-]", field);
    st__ws_send_error(ws, c, id, "invalid_argument", msg);
    return ST_EINVAL;
}

/* j's `after` (st__parse_after). On error a frame has been queued. */
static int st__check_after(st_ws_t *ws, st_wsconn_t *c, const char *id, const cJSON *j,
                           uint64_t *after, bool *replay)
{
    if (st__parse_after(cJSON_GetObjectItemCaseSensitive(j, "after"), after, replay) == ST_OK)
        return ST_OK;
    st__ws_send_error(ws, c, id, "invalid_argument", "'after' must be a msg_id string");
    return ST_EINVAL;
}

/* Checks a subscribe request; on error a frame has been queued and the result is not ST_OK. */
static int st__check_subscribe(st_ws_t *ws, st_wsconn_t *c, const char *id, const cJSON *j,
                               st_topic_t *topic, const cJSON **name, const cJSON **conv,
                               uint64_t *after, bool *replay)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "topic");
    const char *ts = cJSON_IsString(t) ? t->valuestring : "";
    if (strcmp(ts, "counter") == 0)
        *topic = ST_TOPIC_COUNTER;
    else if (strcmp(ts, "seats") == 0)
        *topic = ST_TOPIC_SEATS;
    else if (strcmp(ts, "messages") == 0)
        *topic = ST_TOPIC_MESSAGES;
    else {
        st__ws_send_error(ws, c, id, "invalid_argument",
                          "'topic' must be one of counter, messages, room, seats");
        return ST_EINVAL;
    }
    const char *field = *topic == ST_TOPIC_SEATS      ? "event_id"
                        : *topic == ST_TOPIC_MESSAGES ? "user"
                                                      : "name";
    if (st__check_name(ws, c, id, j, field, false, name) != ST_OK) return ST_EINVAL;
    *conv = NULL;
    *after = 0;
    *replay = false;
    if (*topic == ST_TOPIC_MESSAGES) {
        if (st__check_name(ws, c, id, j, "conversation_id", true, conv) != ST_OK ||
            st__check_after(ws, c, id, j, after, replay) != ST_OK)
            return ST_EINVAL;
        if (st_config_auth_on(ws->app->cfg) &&
            strcmp(c->subject ? c->subject : "", (*name)->valuestring)) {
            st__ws_send_error(ws, c, id, "forbidden",
                              "the token's subject may only stream its own user");
            return ST_EFORBIDDEN;
        }
        if (!ws->app->chat) {
            st__ws_send_error(ws, c, id, "unavailable", "messages are not served here");
            return ST_EUNAVAIL;
        }
        if (st_chat_erased(ws->app->chat,
                           ST_USER((*name)->valuestring, strlen((*name)->valuestring)))) {
            st__ws_send_error(ws, c, id, "not_found", "no such user (erased)");
            return ST_ENOTFOUND;
        }
    }
    return st__check_free_slot(ws, c, id);
}

/* Shows a subscription what this member holds now: "subscribed", then its snapshot (current
 * value, event state, or the first replay page) behind the subscription's fence, and puts it in
 * its channel. Read and queued in one loop turn with the batch it shows, so nothing published
 * after it can overtake it and nothing before it is missed. An event that does not exist, or a
 * first replay page that fails, ends the subscription: an error frame, and false (the caller
 * frees it). */
static bool st__sub_start(st_ws_t *ws, st_wssub_t *s)
{
    bool ok = true;
    st_wsconn_t *c = s->conn;
    const char *nm = s->name, *id = s->id;
    st_buf_t snap = {0}, b = {0};
    uint64_t wait = 0;
    if (s->topic == ST_TOPIC_SEATS) st_store_refresh_views(ws->app->store); /* a follower */
    if (s->topic == ST_TOPIC_SEATS &&
        (!ws->app->seats ||
         st_seats_event_json(ws->app->seats, nm, strlen(nm), &snap, &wait) != ST_OK)) {
        st_buf_free(&snap);
        st__ws_send_error(ws, c, id, "not_found", "no such event");
        return false;
    }
    st__ws_chan_add(ws, s);
    st__ws_prefix(&b, "subscribed", id);
    b.data[b.len - 1] = '}';
    st__ws_queue_buf(ws, c, &b, 0);
    if (s->topic == ST_TOPIC_MESSAGES && s->replaying) {
        if (!st__ws_replay_step(ws, s)) ok = false;
    } else if (s->topic == ST_TOPIC_MESSAGES) {
        /* no `after`: no replay (SPEC §3, v4); live from here, every message staged from now on
         * (st__ws_message_posted finds the channel) and none before */
        st__ws_prefix(&b, "replay_done", id);
        b.data[b.len - 1] = '}';
        st__ws_queue_buf(ws, c, &b, s->fence);
    } else if (s->topic == ST_TOPIC_SEATS) {
        st__ws_prefix(&b, "seats", id);
        st_buf_puts(&b, "\"event_id\":");
        st_buf_append_json_str(&b, nm, strlen(nm));
        st_buf_puts(&b, ",\"snapshot\":");
        st_buf_append(&b, snap.data, snap.len);
        st_buf_appendc(&b, '}');
        st__ws_queue_buf(ws, c, &b, wait > s->fence ? wait : s->fence);
    } else {
        st_counter_t ctr = {ST_COUNTER_PLAIN, 0, 0};
        int rc = st_counter_get(ws->app->store, nm, strlen(nm), &ctr, &wait);
        if (rc == ST_OK || rc == ST_ENOTFOUND) {
            st__ws_prefix(&b, "counter", id);
            st_buf_puts(&b, "\"name\":");
            st_buf_append_json_str(&b, nm, strlen(nm));
            st_buf_puts(&b, ",\"value\":");
            st_buf_append_i64(&b, st_counter_value(&ctr));
            /* the snapshot says whether the counter exists: one never written reads 0 here and
             * 404 over HTTP (SPEC §1); updates mean it does */
            st_buf_puts(&b, rc == ST_OK ? ",\"exists\":true}" : ",\"exists\":false}");
            st__ws_queue_buf(ws, c, &b, wait > s->fence ? wait : s->fence);
        }
    }
    st_buf_free(&snap);
    st_buf_free(&b);
    return ok;
}

static const char st__not_current[] =
    "this member cannot prove its state is current (no leader); subscribe again";

/* Read index rounds resolved (a member that does not serve): pending subscriptions whose round
 * completed start; those whose round failed end with error no_leader. */
static void st__read_index_done(void *arg)
{
    st_ws_t *ws = arg;
    for (ST_LIST_EACH(cl, cn, &ws->conns)) {
        st_wsconn_t *c = ST_LIST_ITEM(cl, st_wsconn_t, link);
        for (ST_LIST_EACH(l, n, &c->subs)) {
            st_wssub_t *s = ST_LIST_ITEM(l, st_wssub_t, link);
            if (!s->pending) continue;
            int state = st_repl_read_index_state(ws->app->repl, s->ticket);
            if (state == 0) continue;
            s->pending = false;
            if (state < 0) {
                st__ws_send_error(ws, c, s->id, "no_leader", st__not_current);
                st__ws_sub_remove(ws, s);
            } else if (!st__sub_start(ws, s)) {
                st__ws_sub_remove(ws, s);
            }
        }
    }
}

void st__ws_fence_failed(st_ws_t *ws, st_wsconn_t *c, uint64_t first)
{
    for (ST_LIST_EACH(l, n, &c->subs)) {
        st_wssub_t *s = ST_LIST_ITEM(l, st_wssub_t, link);
        if (!s->fence || s->fence < first) continue;
        st__ws_send_error(ws, c, s->id, "no_leader", st__not_current);
        st__ws_sub_remove(ws, s);
    }
}

/* Checks a room subscription ({"topic":"room","room_id","after"?,"user"?}): the room exists
 * and, with auth on, the token's sub is a member (with auth off, "user" if given must be one).
 * On error a frame has been queued. *member: the user it streams for (NULL: none). */
static int st__check_room(st_ws_t *ws, st_wsconn_t *c, const char *id, const cJSON *j,
                          const cJSON **room, const char **member, uint64_t *after, bool *replay)
{
    const cJSON *user;
    uint64_t w = 0;
    int role;
    if (st__check_name(ws, c, id, j, "room_id", false, room) != ST_OK ||
        st__check_name(ws, c, id, j, "user", true, &user) != ST_OK ||
        st__check_after(ws, c, id, j, after, replay) != ST_OK)
        return ST_EINVAL;
    st_rooms_t *rooms = ws->app->rooms;
    if (!rooms || !ws->app->chat) {
        st__ws_send_error(ws, c, id, "unavailable", "rooms are not served here");
        return ST_EUNAVAIL;
    }
    const char *rm = (*room)->valuestring;
    *member = user ? user->valuestring : NULL;
    if (st_config_auth_on(ws->app->cfg)) {
        const char *sub = c->subject ? c->subject : "";
        if (*member && strcmp(*member, sub) != 0) {
            st__ws_send_error(ws, c, id, "forbidden",
                              "the token's subject may only stream as itself");
            return ST_EFORBIDDEN;
        }
        *member = sub;
    }
    if (st_rooms_exists(rooms, rm, strlen(rm), &w) != ST_OK) {
        st__ws_send_error(ws, c, id, "not_found", "no such room");
        return ST_ENOTFOUND;
    }
    if (*member &&
        (st_rooms_role(rooms, rm, strlen(rm), *member, strlen(*member), &role, &w) != ST_OK ||
         (ws->app->chat && st_chat_erased(ws->app->chat, ST_USER(*member, strlen(*member)))))) {
        /* a member being erased is out of its rooms from the erasure on (SPEC §2.2); a global
         * admin that is no member streams the room as a reader, as it reads it over HTTP (SPEC
         * §2.1 v5: it may do anything), not online in it (presence counts members) */
        if (!c->admin) {
            st__ws_send_error(ws, c, id, "forbidden", "only the room's members stream it");
            return ST_EFORBIDDEN;
        }
        *member = NULL;
    }
    int rc = st__check_free_slot(ws, c, id);
    if (rc != ST_OK) return rc;
    if (*member && **member && !st__ws_presence_room_for(ws, rm, *member)) {
        /* never streamed uncounted: presence would say offline (SPEC §2.1 v5) */
        st__ws_send_error(ws, c, id, "too_many_requests",
                          "presence is tracked for too many rooms of this user or of this node");
        return ST_ERATE;
    }
    return ST_OK;
}

static void st__subscribe(st_ws_t *ws, st_wsconn_t *c, const char *id, const cJSON *j)
{
    st_topic_t topic = ST_TOPIC_MESSAGES;
    const cJSON *name, *conv;
    uint64_t after;
    bool replay;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "topic");
    const char *member = NULL;
    char vu[ST_CHAT_OWNER_MAX + 1];
    const char *nm;
    if (cJSON_IsString(t) && strcmp(t->valuestring, "room") == 0) {
        /* a room owns its one conversation, streamed as messages are (SPEC §3): its channel is
         * the room's (its owner's bytes) */
        if (st__check_room(ws, c, id, j, &conv, &member, &after, &replay) != ST_OK) return;
        vu[st_chat_owner_bytes(vu, ST_ROOM(conv->valuestring, strlen(conv->valuestring)))] = 0;
        nm = vu;
    } else {
        if (st__check_subscribe(ws, c, id, j, &topic, &name, &conv, &after, &replay) != ST_OK)
            return;
        nm = name->valuestring;
    }
    st_wssub_t *s = st_calloc(1, sizeof *s);
    s->conn = c;
    s->topic = topic;
    s->conv = conv ? st_strndup(conv->valuestring, strlen(conv->valuestring)) : NULL;
    s->room = nm == vu;
    s->member = member && *member ? st_strndup(member, strlen(member)) : NULL;
    s->cursor = after;
    s->replaying = replay;
    s->id = st_strndup(id, strlen(id));
    s->name = st_strndup(nm, strlen(nm));
    st_list_push_front(&c->subs, &s->link);
    c->nsubs++;
    ws->nsubs++;
    st_metric_add(ws->m_subs, 1);
    /* SPEC §8: in a group a snapshot shows only state this member knows is current. The
     * serving leader fences it (at once while its lease holds); any other member first learns
     * the leader's commit index and shows it (st__read_index_done). */
    st_repl_t *repl = ws->app->repl;
    if (repl && !st_repl_serving(repl)) {
        st_repl_on_read_index(repl, st__read_index_done, ws);
        s->pending = true;
        s->ticket = st_repl_read_index_begin(repl);
        return;
    }
    if (repl) st_repl_read_fence(repl, &s->fence);
    if (!st__sub_start(ws, s)) st__ws_sub_remove(ws, s);
}

static void st__unsubscribe(st_ws_t *ws, st_wsconn_t *c, const char *id)
{
    st_wssub_t *s = st__sub_find(c, id);
    if (s) {
        st__ws_sub_remove(ws, s);
        return;
    }
    st__ws_send_error(ws, c, id, "not_found", "no subscription with this id");
}

void st__ws_on_message(st_ws_t *ws, st_wsconn_t *c, const char *p, size_t n)
{
    /* strict JSON in UTF-8, and no U+0000 that would cut an id or a name short */
    st_json_info_t info = {0};
    bool strict = st_json_check(p, n, &info) == ST_OK;
    if (strict && info.nul) {
        st__ws_send_error(ws, c, NULL, "invalid_argument", "strings must not contain U+0000");
        return;
    }
    cJSON *j = strict ? cJSON_ParseWithLength(p, n) : NULL;
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        st__ws_send_error(ws, c, NULL, "invalid_json", "frames must be JSON objects");
        return;
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "type");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
    const char *ids = cJSON_IsString(id) && strlen(id->valuestring) <= 64 ? id->valuestring : NULL;
    if (!cJSON_IsString(type))
        st__ws_send_error(ws, c, ids, "invalid_argument", "'type' must be a string");
    else if (!ids || !*ids)
        st__ws_send_error(ws, c, NULL, "invalid_argument", "'id' must be a string of 1-64 bytes");
    else if (strcmp(type->valuestring, "subscribe") == 0)
        st__subscribe(ws, c, ids, j);
    else if (strcmp(type->valuestring, "unsubscribe") == 0)
        st__unsubscribe(ws, c, ids);
    else
        st__ws_send_error(ws, c, ids, "invalid_argument", "unknown type (subscribe, unsubscribe)");
    cJSON_Delete(j);
}
