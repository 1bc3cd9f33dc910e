/* SPDX-License-Identifier: MIT */
/*
 * What streams follow, and the fan-out of changes to them: channels (topic + name) index the
 * subscriptions, so a change (a counter, a seat change, a new, edited or deleted message, a room's
 * membership, typing and presence) costs work only for its own subscribers, and its body is
 * serialized once for all of them. A subscription's lifetime ends here too (st__ws_sub_remove).
 * The requests that make subscriptions are subscribe.c's; the paged replay of messages is
 * replay.c's.
 */
#include "internal.h"
#include "strata/chat.h"
#include "strata/tier.h"
#include "strata/counters.h"
#include "strata/rooms.h"
#include "strata/seats.h"
#include "strata/store_group.h"

#include <stdlib.h>
#include <string.h>

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

void st__ws_chan_add(st_ws_t *ws, st_wssub_t *s)
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
    s->pres_since = st__ws_presence_since(ws); /* before its own change (presence_add) */
    if (s->room && s->member) s->present = st__ws_presence_add(ws, s->conv, s->member);
}

static void st__sub_free(st_ws_t *ws, st_wssub_t *s)
{
    if (s->cold_wait) st_tier_release(ws->app->tier, s->cold_wait); /* cancels it */
    st_wschan_t *ch = s->chan;                                      /* NULL while pending */
    if (s->present) st__ws_presence_drop(ws, s->conv, s->member);
    st__ws_presout_gone(s);
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

/* Takes s out of its connection and frees it. */
void st__ws_sub_remove(st_ws_t *ws, st_wssub_t *s)
{
    st_list_unlink(&s->link);
    s->conn->nsubs--;
    st__sub_free(ws, s);
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

st_wsbody_t *st__ws_message_body(const char *json, size_t len)
{
    st_wsbody_t *b = st_malloc(sizeof *b + len + 11);
    b->refs = 1;
    memcpy(b->data, "\"message\":", 10);
    memcpy(b->data + 10, json, len);
    b->data[10 + len] = '}';
    b->len = len + 11;
    return b;
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
        if (!body) body = st__ws_message_body(json, len);
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
    st__ws_sub_remove(ws, s);
}

st_wschan_t *st__ws_room_chan(st_ws_t *ws, const char *room, size_t rl)
{
    char vu[ST_CHAT_OWNER_MAX];
    return st__chan_find(ws, ST_TOPIC_MESSAGES, vu, st_chat_owner_bytes(vu, ST_ROOM(room, rl)));
}

/* A room's channel here (NULL: no subscriber) and, when there is one, the start of a frame about
 * one of its users into b: "room_id":…,"user":… */
static st_wschan_t *st__room_user_frame(st_ws_t *ws, const char *room, size_t rl, const char *user,
                                        size_t ul, st_buf_t *b)
{
    st_wschan_t *ch = st__ws_room_chan(ws, room, rl);
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
        if (!body) body = st__ws_message_body(json, len);
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
