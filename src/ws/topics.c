/* SPDX-License-Identifier: MIT */
/*
 * What streams follow: subscribe/unsubscribe requests, paged replay of messages, and the
 * fan-out of changes (counters, seat changes, new messages). Subscriptions are indexed by
 * channel (topic + name), so a change costs work only for its own subscribers, and its body is
 * serialized once for all of them.
 */
#include "internal.h"
#include "strata/chat.h"
#include "strata/tier.h"
#include "strata/counters.h"
#include "strata/repl.h"
#include "strata/rooms.h"
#include "strata/seats.h"
#include "strata/store_group.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define ST__REPLAY_PAGE       256
#define ST__REPLAY_LOW_WATER  (256u * 1024)
#define ST__REPLAY_PAGE_BYTES (2 * ST__REPLAY_LOW_WATER)

static const char st__topic_char[] = {'c', 's', 'm'};

/* ---- channels ---- */

static st_wschan_t *st__chan_find(st_ws_t *ws, st_topic_t t, const char *name, size_t nlen)
{
    char key[1 + ST_CHAT_OWNER_MAX]; /* messages' channels: their owner's bytes */
    if (nlen > ST_CHAT_OWNER_MAX) return NULL;
    key[0] = st__topic_char[t];
    memcpy(key + 1, name, nlen);
    st_map_node_t *n = st_map_get(&ws->chans, key, nlen + 1);
    return n ? (st_wschan_t *)n : NULL;
}

static void st__chan_add(st_ws_t *ws, st_wssub_t *s)
{
    size_t nlen = strlen(s->name);
    st_wschan_t *ch = st__chan_find(ws, s->topic, s->name, nlen);
    if (!ch) {
        ch = st_calloc(1, sizeof *ch + nlen + 1);
        ch->key[0] = st__topic_char[s->topic];
        memcpy(ch->key + 1, s->name, nlen);
        ch->klen = nlen + 1;
        ch->node.key = ch->key;
        ch->node.klen = ch->klen;
        st_list_init(&ch->subs);
        st_map_insert(&ws->chans, &ch->node);
    }
    s->chan = ch;
    st_list_push_front(&ch->subs, &s->clink);
    if (s->room && s->member) s->present = st__ws_presence_add(ws, s->conv, s->member);
}

static void st__sub_free(st_ws_t *ws, st_wssub_t *s)
{
    if (s->cold_wait) st_tier_release(ws->app->tier, s->cold_wait); /* cancels it */
    st_wschan_t *ch = s->chan;                                      /* NULL while pending */
    if (s->present) st__ws_presence_drop(ws, s->conv, s->member);
    if (ch) {
        st_list_unlink(&s->clink);
        if (st_list_empty(&ch->subs)) {
            st_map_remove(&ws->chans, &ch->node);
            free(ch);
        }
    }
    free(s->id);
    free(s->name);
    free(s->conv);
    free(s->member);
    st__ws_body_unref(s->typing_prefix);
    free(s);
    ws->nsubs--;
    st_metric_add(ws->m_subs, -1);
}

void st__ws_unsubscribe_all(st_ws_t *ws, st_wsconn_t *c)
{
    while (!st_list_empty(&c->subs)) {
        st_wssub_t *s = ST_LIST_ITEM(c->subs.next, st_wssub_t, link);
        st_list_unlink(&s->link);
        st__sub_free(ws, s);
    }
    c->nsubs = 0;
}

/* ---- replay ---- */

typedef struct {
    st_ws_t *ws;
    st_wssub_t *s;
    st_buf_t prefix;
    st_wsbody_t *pbody; /* the prefix, shared by the page's frames (made at the first) */
    uint64_t wait;
    bool full; /* the page reached its byte budget: the rest waits for the next page */
} st_replay_ctx_t;

/* Body of a message frame: "message":<json>} */
static st_wsbody_t *st__message_body(const char *json, size_t len)
{
    st_wsbody_t *b = st_malloc(sizeof *b + len + 11);
    b->refs = 1;
    memcpy(b->data, "\"message\":", 10);
    memcpy(b->data + 10, json, len);
    b->data[10 + len] = '}';
    b->len = len + 11;
    return b;
}

static void st__replay_one(void *arg, uint64_t msg_id, const char *json, size_t len)
{
    st_replay_ctx_t *r = arg;
    /* A page is also bounded in bytes: it stops once the queue holds ST__REPLAY_PAGE_BYTES, or
     * before a message that would take it past ST__WS_MAX_QUEUED, except that a message goes
     * whenever no replayed message is queued on the stream: every page sends at least one, so a
     * replay makes progress whatever its messages' size and whatever live backlog sits beside
     * it, and replayed messages never hold more than the cap or one message (queue.c). */
    st_wsconn_t *c = r->s->conn;
    size_t queued = c->queued, n = r->prefix.len + len + 11;
    if (r->full ||
        (c->replayed && (queued >= ST__REPLAY_PAGE_BYTES || queued + n > ST__WS_MAX_QUEUED))) {
        r->full = true;
        return;
    }
    st_wsbody_t *body = st__message_body(json, len);
    if (!r->pbody) r->pbody = st__ws_body_new(r->prefix.data, r->prefix.len);
    st__ws_queue_replay(r->ws, c, r->pbody, body, r->wait);
    st__ws_body_unref(body);
    r->s->cursor = msg_id;
}

static bool st__replay_step(st_ws_t *ws, st_wssub_t *s);
static void st__sub_remove(st_ws_t *ws, st_wssub_t *s);

/* The cold data a parked replay page needs is in memory: run the page again. */
static void st__replay_unparked(void *arg)
{
    st_wssub_t *s = arg;
    st_ws_t *ws = s->ws;
    st_wsconn_t *c = s->conn;
    if (!st__replay_step(ws, s)) st__sub_remove(ws, s); /* releases the wait unless it parks */
    st__ws_replay_more(ws, c);
}

/* One page of replay, hot and cold. When the page reaches the end, replay_done goes out and
 * the subscription turns live in the same loop turn: every message is either in the replay or
 * live, never both, never neither. A page that needs cold data not in memory sends nothing and
 * parks until the cold cache has it (live messages keep going through the replay meanwhile).
 * A page that fails ends the subscription, which cannot go on without a gap: an error with the
 * failure's HTTP code (cold_unavailable, unavailable),
 * and false (the caller frees it; the client subscribes again with `after`). */
static bool st__replay_step(st_ws_t *ws, st_wssub_t *s)
{
    st_wsconn_t *c = s->conn;
    st_message_query_t q = {.conv = s->conv,
                            .conv_len = s->conv ? strlen(s->conv) : 0,
                            .after = s->cursor,
                            .limit = ST__REPLAY_PAGE};
    st_replay_ctx_t r = {ws, s, {0}, NULL, s->fence, false}; /* nothing shows before the fence */
    st__ws_prefix(&r.prefix, "message", s->id);
    bool more = false;
    uint64_t last = 0;
    /* a room's stream is of the room's messages (SPEC §2.1), a messages stream of the user's */
    st_owner_t o = s->room ? (st_owner_t){ST_OWNER_ROOM, s->conv, q.conv_len}
                           : (st_owner_t){ST_OWNER_USER, s->name, strlen(s->name)};
    int rc = st_chat_each(ws->app->chat, &o, &q, st__replay_one, &r, &more, &last, &r.wait);
    for (int tries = 0; rc == ST_EPARKED && tries < 3; tries++) {
        if (st_tier_wait(ws->app->tier, &s->cold_wait, st__replay_unparked, s)) {
            s->ws = ws;
            st_buf_free(&r.prefix);
            st__ws_body_unref(r.pbody);
            return true; /* parked: nothing was sent */
        }
        rc = st_chat_each(ws->app->chat, &o, &q, st__replay_one, &r, &more, &last, &r.wait);
    }
    more |= r.full;
    st_tier_release(ws->app->tier, s->cold_wait);
    s->cold_wait = NULL;
    if (rc != ST_OK) {
        /* the HTTP code of the failure (SPEC §3, v4): cold_unavailable for unreadable cold data */
        st__ws_send_error(ws, c, s->id, st_err_code(rc),
                          "replay failed; the subscription ended: subscribe again with after");
    } else if (!more) {
        st__ws_prefix(&r.prefix, "replay_done", s->id);
        r.prefix.data[r.prefix.len - 1] = '}';
        st__ws_queue_buf(ws, c, &r.prefix, r.wait);
        s->replaying = false;
        s->safe_cursor = s->cursor;
        s->last_wait = r.wait;
    }
    st_buf_free(&r.prefix);
    st__ws_body_unref(r.pbody);
    return rc == ST_OK;
}

void st__ws_replay_more(st_ws_t *ws, st_wsconn_t *c)
{
    for (ST_LIST_EACH(l, n, &c->subs)) {
        st_wssub_t *s = ST_LIST_ITEM(l, st_wssub_t, link);
        if (c->cut) break;
        if (s->replaying && !s->cold_wait && c->queued < ST__REPLAY_LOW_WATER &&
            !st__replay_step(ws, s))
            st__sub_remove(ws, s);
    }
}

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
    *name = cJSON_GetObjectItemCaseSensitive(j, field);
    if (!cJSON_IsString(*name) ||
        !st_name_valid((*name)->valuestring, strlen((*name)->valuestring))) {
        char msg[96];
        snprintf(msg, sizeof msg, "'%s' must be 1-255 characters of [A-Za-z0-9_.:-]", field);
        st__ws_send_error(ws, c, id, "invalid_argument", msg);
        return ST_EINVAL;
    }
    *conv = NULL;
    *after = 0;
    *replay = false;
    if (*topic == ST_TOPIC_MESSAGES) {
        *conv = cJSON_GetObjectItemCaseSensitive(j, "conversation_id");
        if (cJSON_IsNull(*conv)) *conv = NULL; /* null is absent (SPEC §3, v4) */
        if (*conv && !(cJSON_IsString(*conv) &&
                       st_name_valid((*conv)->valuestring, strlen((*conv)->valuestring)))) {
            st__ws_send_error(ws, c, id, "invalid_argument",
                              "'conversation_id' must be 1-255 characters of [A-Za-z0-9_.:-]");
            return ST_EINVAL;
        }
        if (st__parse_after(cJSON_GetObjectItemCaseSensitive(j, "after"), after, replay) != ST_OK) {
            st__ws_send_error(ws, c, id, "invalid_argument", "'after' must be a msg_id string");
            return ST_EINVAL;
        }
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
    st__chan_add(ws, s);
    st__ws_prefix(&b, "subscribed", id);
    b.data[b.len - 1] = '}';
    st__ws_queue_buf(ws, c, &b, 0);
    if (s->topic == ST_TOPIC_MESSAGES && s->replaying) {
        if (!st__replay_step(ws, s)) ok = false;
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

/* Takes s out of its connection and frees it. */
static void st__sub_remove(st_ws_t *ws, st_wssub_t *s)
{
    st_list_unlink(&s->link);
    s->conn->nsubs--;
    st__sub_free(ws, s);
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
                st__sub_remove(ws, s);
            } else if (!st__sub_start(ws, s)) {
                st__sub_remove(ws, s);
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
        st__sub_remove(ws, s);
    }
}

/* Checks a room subscription ({"topic":"room","room_id","after"?,"user"?}): the room exists
 * and, with auth on, the token's sub is a member (with auth off, "user" if given must be one).
 * On error a frame has been queued. *member: the user it streams for (NULL: none). */
static int st__check_room(st_ws_t *ws, st_wsconn_t *c, const char *id, const cJSON *j,
                          const cJSON **room, const char **member, uint64_t *after, bool *replay)
{
    *room = cJSON_GetObjectItemCaseSensitive(j, "room_id");
    const cJSON *user = cJSON_GetObjectItemCaseSensitive(j, "user");
    if (cJSON_IsNull(user)) user = NULL;
    uint64_t w = 0;
    int role;
    if (!cJSON_IsString(*room) ||
        !st_name_valid((*room)->valuestring, strlen((*room)->valuestring))) {
        st__ws_send_error(ws, c, id, "invalid_argument",
                          "'room_id' must be 1-255 characters of [A-Za-z0-9_.:-]");
        return ST_EINVAL;
    }
    if (user &&
        !(cJSON_IsString(user) && st_name_valid(user->valuestring, strlen(user->valuestring)))) {
        st__ws_send_error(ws, c, id, "invalid_argument",
                          "'user' must be 1-255 characters of [A-Za-z0-9_.:-]");
        return ST_EINVAL;
    }
    if (st__parse_after(cJSON_GetObjectItemCaseSensitive(j, "after"), after, replay) != ST_OK) {
        st__ws_send_error(ws, c, id, "invalid_argument", "'after' must be a msg_id string");
        return ST_EINVAL;
    }
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
    if (st__sub_find(c, id)) {
        st__ws_send_error(ws, c, id, "conflict", "a subscription with this id exists");
        return ST_ECONFLICT;
    }
    if (c->nsubs >= ST__WS_MAX_SUBS) {
        st__ws_send_error(ws, c, id, "too_many_requests", "too many subscriptions on this stream");
        return ST_ERATE;
    }
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
    if (!st__sub_start(ws, s)) st__sub_remove(ws, s);
}

static void st__unsubscribe(st_ws_t *ws, st_wsconn_t *c, const char *id)
{
    st_wssub_t *s = st__sub_find(c, id);
    if (s) {
        st__sub_remove(ws, s);
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

/* ---- fan-out: each change is serialized once, then queued for each subscriber ---- */

/* The wait of a change queued for s: never before s's fence. A change can reach a subscription
 * whose snapshot still waits for its fence (a resumed leader applying the new leader's entries
 * before it notices it lost the lead); queued with its own wait it would overtake the snapshot
 * and, should the fence fail (the snapshot is dropped and the subscription ends no_leader), be
 * taken for the snapshot: state this member never proved current. */
static uint64_t st__sub_wait(const st_wssub_t *s, uint64_t wait)
{
    return wait > s->fence ? wait : s->fence;
}

/* A counter changed to `value` in batch `wait`: subscribers get it once the batch is durable. */
void st__ws_counter_changed(st_ws_t *ws, const char *name, size_t nlen, int64_t value,
                            uint64_t wait)
{
    if (ws) st__ws_note_counter(ws, name, nlen, value);
    st_wschan_t *ch = ws ? st__chan_find(ws, ST_TOPIC_COUNTER, name, nlen) : NULL;
    if (!ch) return;
    st_buf_t b = {0};
    st_wsbody_t *pre = NULL; /* the prefix for the id in last */
    const char *last = NULL;
    st_buf_puts(&b, "\"name\":");
    st_buf_append_json_str(&b, name, nlen);
    st_buf_puts(&b, ",\"value\":");
    st_buf_append_i64(&b, value);
    st_buf_appendc(&b, '}');
    st_wsbody_t *body = st__ws_body_new(b.data, b.len);
    for (ST_LIST_EACH(l, n, &ch->subs)) {
        st_wssub_t *s = ST_LIST_ITEM(l, st_wssub_t, clink);
        st__ws_queue(ws, s->conn, st__ws_prefix_of(&pre, &last, "counter", s->id), body,
                     st__sub_wait(s, wait));
    }
    st__ws_body_unref(body);
    st__ws_body_unref(pre);
    st_buf_free(&b);
}

static void st__ws_counter_observed(void *arg, const char *name, size_t nlen, int64_t value,
                                    bool distinct, bool repair, uint64_t wait)
{
    (void)distinct;
    (void)repair;
    st__ws_counter_changed(arg, name, nlen, value, wait);
}

/* Seat changes of an event go to its subscribers, with their subscription id in front. */
void st__ws_seats_changed(void *arg, const char *event_id, size_t elen, const char *tail,
                          size_t tlen, uint64_t wait)
{
    st_ws_t *ws = arg;
    st__ws_note_seats(ws, event_id, elen, tail, tlen);
    st_wschan_t *ch = st__chan_find(ws, ST_TOPIC_SEATS, event_id, elen);
    if (!ch) return;
    st_wsbody_t *pre = NULL; /* the prefix for the id in last */
    const char *last = NULL;
    st_wsbody_t *body = st__ws_body_new(tail, tlen);
    for (ST_LIST_EACH(l, n, &ch->subs)) {
        st_wssub_t *s = ST_LIST_ITEM(l, st_wssub_t, clink);
        st__ws_queue(ws, s->conn, st__ws_prefix_of(&pre, &last, "seats", s->id), body,
                     st__sub_wait(s, wait));
    }
    st__ws_body_unref(body);
    st__ws_body_unref(pre);
}

/* Would a seat change of this event reach any stream? Yes in a group: the leader notes every
 * change for the other members' subscribers (st__ws_note_seats; they publish what they apply),
 * whoever subscribes here. Alone: only if the event's channel exists. A change skipped while it
 * does not is never owed to anyone: a seats subscription joins its channel in the same call that
 * reads its snapshot (st__sub_start, in one loop turn), so every change staged before it is in
 * that snapshot and every change after it finds the channel. Costs a subscriber count, then a
 * channel lookup when there are subscribers. */
bool st__ws_seats_wanted(void *arg, const char *event_id, size_t elen)
{
    st_ws_t *ws = arg;
    if (ws->app->store && st_store_grouped(ws->app->store)) return true;
    return ws->nsubs && st__chan_find(ws, ST_TOPIC_SEATS, event_id, elen);
}

/* A new message: subscribers of its user (and conversation) that finished replay get it now;
 * those still replaying will read it in their next page. */
/* Would st__ws_message_posted send this message to any stream here? (The same test it makes per
 * subscriber.) Lets a member that publishes another member's post skip reading its JSON back
 * when no stream takes it. */
static bool st__ws_message_taken(const st_wssub_t *s, const char *conv, size_t clen,
                                 uint64_t msg_id)
{
    return !s->replaying && msg_id > s->cursor &&
           (!s->conv || (strlen(s->conv) == clen && memcmp(s->conv, conv, clen) == 0));
}

bool st__ws_message_wanted(st_ws_t *ws, const char *user, size_t ulen, const char *conv,
                           size_t clen, uint64_t msg_id)
{
    st_wschan_t *ch = st__chan_find(ws, ST_TOPIC_MESSAGES, user, ulen);
    if (!ch) return false;
    for (ST_LIST_EACH(l, n, &ch->subs))
        if (st__ws_message_taken(ST_LIST_ITEM(l, st_wssub_t, clink), conv, clen, msg_id))
            return true;
    return false;
}

void st__ws_message_posted(void *arg, const st_owner_t *o, const char *conv, size_t clen,
                           uint64_t msg_id, const char *json, size_t len, uint64_t wait)
{
    st_ws_t *ws = arg;
    char ob[ST_CHAT_OWNER_MAX];
    size_t obl = st_chat_owner_bytes(ob, o);
    st__ws_note_message(ws, ob, obl, conv, clen, msg_id, json, len);
    st_wschan_t *ch = st__chan_find(ws, ST_TOPIC_MESSAGES, ob, obl);
    if (!ch) return;
    st_wsbody_t *pre = NULL; /* the prefix for the id in last */
    const char *last = NULL;
    st_wsbody_t *body = NULL;
    for (ST_LIST_EACH(l, n, &ch->subs)) {
        st_wssub_t *s = ST_LIST_ITEM(l, st_wssub_t, clink);
        if (!st__ws_message_taken(s, conv, clen, msg_id)) continue;
        if (!body) body = st__message_body(json, len);
        uint64_t w = st__sub_wait(s, wait);
        st__ws_queue(ws, s->conn, st__ws_prefix_of(&pre, &last, "message", s->id), body, w);
        s->cursor = msg_id;
        s->last_wait = w;
        if (w <= st_store_durable_id(ws->app->store)) s->safe_cursor = msg_id;
    }
    st__ws_body_unref(body);
    st__ws_body_unref(pre);
}

/* Ends a subscription with an error frame that leaves once the batch of the change that ended
 * it is durable (SPEC §0: no frame shows what a crash could take back). */
static void st__ws_end_sub(st_ws_t *ws, st_wssub_t *s, const char *code, const char *msg,
                           uint64_t wait)
{
    st_buf_t b = {0};
    st_buf_puts(&b, "{\"type\":\"error\",\"id\":");
    st_buf_append_json_str(&b, s->id, strlen(s->id));
    st_buf_printf(&b, ",\"code\":\"%s\",\"message\":", code);
    st_buf_append_json_str(&b, msg, strlen(msg));
    st_buf_appendc(&b, '}');
    st__ws_queue_buf(ws, s->conn, &b, st__sub_wait(s, wait));
    st_buf_free(&b);
    st__sub_remove(ws, s);
}

/* A room's channel here (NULL: no subscriber) and, when there is one, the start of a frame about
 * one of its users into b: "room_id":…,"user":… */
static st_wschan_t *st__room_user_frame(st_ws_t *ws, const char *room, size_t rl, const char *user,
                                        size_t ul, st_buf_t *b)
{
    char vu[ST_CHAT_OWNER_MAX];
    st_wschan_t *ch =
        st__chan_find(ws, ST_TOPIC_MESSAGES, vu, st_chat_owner_bytes(vu, ST_ROOM(room, rl)));
    if (!ch) return NULL;
    st_buf_puts(b, "\"room_id\":");
    st_buf_append_json_str(b, room, rl);
    st_buf_puts(b, ",\"user\":");
    st_buf_append_json_str(b, user, ul);
    return ch;
}

/* A membership change of a room: its subscribers get a room_member frame; the streams of a
 * removed member end with error forbidden (SPEC §2.1), once the removal is durable. */
void st__ws_room_member(void *arg, const char *room, size_t rl, const char *user, size_t ul,
                        bool added, uint64_t wait)
{
    st_ws_t *ws = arg;
    st__ws_note_room_member(ws, room, rl, user, ul, added); /* a group's other members too */
    st_buf_t b = {0};
    st_wschan_t *ch = st__room_user_frame(ws, room, rl, user, ul, &b);
    if (!ch) return;
    st_buf_puts(&b, added ? ",\"change\":\"added\"}" : ",\"change\":\"removed\"}");
    st_wsbody_t *body = st__ws_body_new(b.data, b.len);
    st_wsbody_t *pre = NULL;
    const char *last = NULL;
    ST_VEC(st_wssub_t *) ended = {0};
    for (ST_LIST_EACH(l, n, &ch->subs)) {
        st_wssub_t *s = ST_LIST_ITEM(l, st_wssub_t, clink);
        if (!added && s->member && strlen(s->member) == ul && memcmp(s->member, user, ul) == 0) {
            st_vec_push(&ended, s); /* taken out after the walk: the channel may go with it */
            continue;
        }
        st__ws_queue(ws, s->conn, st__ws_prefix_of(&pre, &last, "room_member", s->id), body,
                     st__sub_wait(s, wait));
    }
    for (size_t i = 0; i < ended.n; i++)
        st__ws_end_sub(ws, ended.v[i], "forbidden", "removed from the room; the subscription ended",
                       wait);
    st_vec_free(&ended);
    st__ws_body_unref(body);
    st__ws_body_unref(pre);
    st_buf_free(&b);
}

/* A frame of `type` about one of a room's users to the room's subscribers here: "room_id",
 * "user", then tail (which closes the object). */
static void st__room_user_send(st_ws_t *ws, const char *room, size_t rl, const char *user,
                               size_t ul, const char *type, const st_buf_t *tail)
{
    st_buf_t b = {0};
    st_wschan_t *ch = st__room_user_frame(ws, room, rl, user, ul, &b);
    if (!ch) return;
    st_buf_append(&b, tail->data, tail->len);
    st_wsbody_t *body = st__ws_body_new(b.data, b.len);
    st_wsbody_t *pre = NULL;
    const char *last = NULL;
    for (ST_LIST_EACH(l, n, &ch->subs)) {
        st_wssub_t *s = ST_LIST_ITEM(l, st_wssub_t, clink);
        if (!s->room) continue; /* a room's own channel: its subscriptions are the room's */
        st__ws_queue(ws, s->conn, st__ws_prefix_of(&pre, &last, type, s->id), body,
                     st__sub_wait(s, 0));
    }
    st__ws_body_unref(body);
    st__ws_body_unref(pre);
    st_buf_free(&b);
}

/* A typing signal's frame to the room's subscribers here (typing.c decides when). It is
 * ephemeral: a subscriber whose output is backed up gets none (it would only wait there, ahead
 * of or behind data; the next signal says the same with a later `until`). Each subscription
 * keeps its typing prefix, so a frame costs a queue entry per subscriber and no allocation. */
void st__ws_typing_deliver(st_ws_t *ws, const char *room, size_t rl, const char *user, size_t ul,
                           int64_t until)
{
    st_buf_t b = {0};
    st_wschan_t *ch = st__room_user_frame(ws, room, rl, user, ul, &b);
    if (!ch) return;
    st_buf_printf(&b, ",\"until\":%lld}", (long long)until);
    st_wsbody_t *body = st__ws_body_new(b.data, b.len);
    for (ST_LIST_EACH(l, n, &ch->subs)) {
        st_wssub_t *s = ST_LIST_ITEM(l, st_wssub_t, clink);
        if (!s->room || st__ws_backed_up(s->conn)) continue;
        if (!s->typing_prefix) {
            st__ws_prefix(&b, "typing", s->id);
            s->typing_prefix = st__ws_body_new(b.data, b.len);
        }
        st__ws_queue_lazy(ws, s->conn, s->typing_prefix, body, st__sub_wait(s, 0));
    }
    st__ws_body_unref(body);
    st_buf_free(&b);
}

/* A presence change's frame to the room's subscribers here (presence.c decides when). */
void st__ws_presence_deliver(st_ws_t *ws, const char *room, size_t rl, const char *user, size_t ul,
                             bool online)
{
    st_buf_t t = {0};
    st_buf_puts(&t, online ? ",\"online\":true}" : ",\"online\":false}");
    st__room_user_send(ws, room, rl, user, ul, "presence", &t);
    st_buf_free(&t);
}

/* An erased user's room streams (the rooms it streams as a member) end at once with forbidden,
 * as a removed member's do (SPEC §2.2: its streams end); its memberships go later, in the
 * erasure's slices. One walk over every stream: erasures are rare. */
static void st__ws_end_member_rooms(st_ws_t *ws, const char *user, size_t ul, uint64_t wait)
{
    ST_VEC(st_wssub_t *) ended = {0};
    for (ST_LIST_EACH(l, n, &ws->conns)) {
        st_wsconn_t *c = ST_LIST_ITEM(l, st_wsconn_t, link);
        for (ST_LIST_EACH(sl, sn, &c->subs)) {
            st_wssub_t *s = ST_LIST_ITEM(sl, st_wssub_t, link);
            if (s->room && s->member && strlen(s->member) == ul && memcmp(s->member, user, ul) == 0)
                st_vec_push(&ended, s); /* taken out after the walk */
        }
    }
    for (size_t i = 0; i < ended.n; i++)
        st__ws_end_sub(ws, ended.v[i], "forbidden", "the user was erased; the subscription ended",
                       wait);
    st_vec_free(&ended);
}

/* An edit or delete (SPEC §2.2): live subscribers get its new state, in order with their other
 * frames (a live-only one too, for a message older than its subscription); a replay not there
 * yet reads the new state itself (a room's messages name room_id: chat renders them so). An
 * erased user's subscriptions end, and a deleted room's. */
void st__ws_message_changed(void *arg, const char *kind, const st_owner_t *o, const char *conv,
                            size_t clen, uint64_t msg_id, const char *json, size_t len,
                            uint64_t wait)
{
    st_ws_t *ws = arg;
    char ob[ST_CHAT_OWNER_MAX];
    size_t obl = st_chat_owner_bytes(ob, o);
    st__ws_note_change(ws, kind, ob, obl, conv, clen, msg_id, json, len);
    if (!json && o->kind == ST_OWNER_USER) { /* erased: out of its rooms; older tokens' end */
        int64_t at;
        uint64_t w = 0;
        st__ws_end_member_rooms(ws, o->id, o->len, wait);
        if (ws->app->chat && st_chat_erased_at(ws->app->chat, o->id, o->len, &at, &w) == ST_OK)
            st__ws_revoke(ws, o->id, o->len, at, wait > w ? wait : w);
    }
    st_wschan_t *ch = st__chan_find(ws, ST_TOPIC_MESSAGES, ob, obl);
    if (!ch) return;
    if (!json) { /* erased */
        /* the channel is freed with its last subscription: take them one at a time */
        if (o->kind == ST_OWNER_ROOM) st__ws_presence_forget(ws, o->id, o->len); /* deleted */
        while ((ch = st__chan_find(ws, ST_TOPIC_MESSAGES, ob, obl))) {
            st_wssub_t *s = ST_LIST_ITEM(ch->subs.next, st_wssub_t, clink);
            st__ws_end_sub(ws, s, "not_found",
                           s->room ? "the room was deleted; the subscription ended"
                                   : "the user was erased; the subscription ended",
                           wait);
        }
        return;
    }
    st_wsbody_t *pre = NULL;
    const char *last = NULL;
    st_wsbody_t *body = NULL;
    for (ST_LIST_EACH(l, n, &ch->subs)) {
        st_wssub_t *s = ST_LIST_ITEM(l, st_wssub_t, clink);
        if ((s->replaying && msg_id > s->cursor) ||
            (s->conv && (strlen(s->conv) != clen || memcmp(s->conv, conv, clen) != 0)))
            continue;
        if (!body) body = st__message_body(json, len);
        uint64_t w = st__sub_wait(s, wait);
        st__ws_queue(ws, s->conn, st__ws_prefix_of(&pre, &last, kind, s->id), body, w);
        s->last_wait = w;
    }
    st__ws_body_unref(body);
    st__ws_body_unref(pre);
}

void st__ws_topics_init(st_ws_t *ws)
{
    st_map_init(&ws->chans);
    if (ws->app->seats)
        st_seats_observe(ws->app->seats, st__ws_seats_changed, st__ws_seats_wanted, ws);
    if (ws->app->chat) st_chat_observe(ws->app->chat, st__ws_message_posted, ws);
    if (ws->app->rooms) st_rooms_observe(ws->app->rooms, st__ws_room_member, ws);
    if (ws->app->chat) st_chat_observe_changes(ws->app->chat, st__ws_message_changed, ws);
    if (ws->app->store) st_counters_observe(ws->app->store, st__ws_counter_observed, ws);
    st__ws_notes_init(ws);
}

void st__ws_topics_detach(st_ws_t *ws)
{
    if (ws->app->seats) st_seats_unobserve(ws->app->seats, ws);
    if (ws->app->chat) st_chat_unobserve(ws->app->chat, ws);
    if (ws->app->rooms) st_rooms_unobserve(ws->app->rooms, ws);
    if (ws->app->chat) st_chat_unobserve_changes(ws->app->chat, ws);
    if (ws->app->store) st_counters_unobserve(ws->app->store, ws);
}

void st__ws_topics_free(st_ws_t *ws)
{
    st_map_free(&ws->chans);
}
