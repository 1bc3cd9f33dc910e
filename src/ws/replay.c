/* SPDX-License-Identifier: MIT */
/*
 * The paged replay of a messages (or room) subscription's history, hot and cold, from its
 * `after` on: a page at a time while the stream's queue is short, parked while the cold data it
 * needs is read, and turned live in the same loop turn as its last page (SPEC §3).
 */
#include "internal.h"
#include "strata/chat.h"
#include "strata/tier.h"

#include <string.h>

#define ST__REPLAY_PAGE       256
#define ST__REPLAY_LOW_WATER  (256u * 1024)
#define ST__REPLAY_PAGE_BYTES (2 * ST__REPLAY_LOW_WATER)

typedef struct {
    st_ws_t *ws;
    st_wssub_t *s;
    st_buf_t prefix;
    st_wsbody_t *pbody; /* the prefix, shared by the page's frames (made at the first) */
    uint64_t wait;
    bool full; /* the page reached its byte budget: the rest waits for the next page */
} st_replay_ctx_t;

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
    st_wsbody_t *body = st__ws_message_body(json, len);
    if (!r->pbody) r->pbody = st__ws_body_new(r->prefix.data, r->prefix.len);
    st__ws_queue_replay(r->ws, c, r->pbody, body, r->wait);
    st__ws_body_unref(body);
    r->s->cursor = msg_id;
}

/* The cold data a parked replay page needs is in memory: run the page again. */
static void st__replay_unparked(void *arg)
{
    st_wssub_t *s = arg;
    st_ws_t *ws = s->ws;
    st_wsconn_t *c = s->conn;
    if (!st__ws_replay_step(ws, s))
        st__ws_sub_remove(ws, s); /* releases the wait unless it parks */
    st__ws_replay_more(ws, c);
}

/* One page of replay, hot and cold. When the page reaches the end, replay_done goes out and
 * the subscription turns live in the same loop turn: every message is either in the replay or
 * live, never both, never neither. A page that needs cold data not in memory sends nothing and
 * parks until the cold cache has it (live messages keep going through the replay meanwhile).
 * A page that fails ends the subscription, which cannot go on without a gap: an error with the
 * failure's HTTP code (cold_unavailable, unavailable),
 * and false (the caller frees it; the client subscribes again with `after`). */
bool st__ws_replay_step(st_ws_t *ws, st_wssub_t *s)
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
            !st__ws_replay_step(ws, s))
            st__ws_sub_remove(ws, s);
    }
}
