/* SPDX-License-Identifier: MIT */
/*
 * Stream frames in a replicated group. The leader publishes a change to its own subscribers
 * and also stages it as a note in the batch that makes the change, so it travels inside that
 * batch's Raft entry; every other member publishes the note once the entry is in its LMDB
 * (SPEC §8: a member publishes a change once it has applied it). Outside a group st_store_note
 * does nothing.
 */
#include "internal.h"
#include "strata/chat.h"
#include "strata/store_group.h"

#include <stdlib.h>
#include <string.h>

enum {
    ST__NOTE_COUNTER = 'c',
    ST__NOTE_SEATS = 's',
    ST__NOTE_MESSAGE = 'm',
    ST__NOTE_ROOM = 'r',
    ST__NOTE_CHANGE = 'x' /* an edit, delete or erasure (SPEC §2.2) */
};

static bool st__replaying; /* publishing a note: it is not noted again */

static void st__put_str(st_buf_t *b, const char *s, size_t n)
{
    uint32_t n32 = (uint32_t)n;
    st_buf_append(b, &n32, 4);
    st_buf_append(b, s, n);
}

static bool st__get_str(const char **p, const char *end, const char **s, size_t *n)
{
    uint32_t n32;
    if (end - *p < 4) return false;
    memcpy(&n32, *p, 4);
    if ((size_t)(end - *p - 4) < n32) return false;
    *s = *p + 4;
    *n = n32;
    *p += 4 + n32;
    return true;
}

static void st__note(st_ws_t *ws, uint8_t kind, const st_buf_t *b)
{
    uint64_t w = 0;
    if (!st__replaying && ws->app->store) st_store_note(ws->app->store, kind, b->data, b->len, &w);
}

void st__ws_note_counter(st_ws_t *ws, const char *name, size_t nlen, int64_t value)
{
    if (!ws->app->store || !st_store_grouped(ws->app->store) || st__replaying) return;
    st_buf_t b = {0};
    st__put_str(&b, name, nlen);
    st_buf_append(&b, &value, 8);
    st__note(ws, ST__NOTE_COUNTER, &b);
    st_buf_free(&b);
}

void st__ws_note_seats(st_ws_t *ws, const char *event_id, size_t elen, const char *tail,
                       size_t tlen)
{
    if (!ws->app->store || !st_store_grouped(ws->app->store) || st__replaying) return;
    st_buf_t b = {0};
    st__put_str(&b, event_id, elen);
    st_buf_append(&b, tail, tlen);
    st__note(ws, ST__NOTE_SEATS, &b);
    st_buf_free(&b);
}

void st__ws_note_message(st_ws_t *ws, const char *user, size_t ulen, const char *conv, size_t clen,
                         uint64_t msg_id, const char *json, size_t len)
{
    if (!ws->app->store || !st_store_grouped(ws->app->store) || st__replaying) return;
    st_buf_t b = {0};
    st__put_str(&b, user, ulen);
    st__put_str(&b, conv, clen);
    st_buf_append(&b, &msg_id, 8);
    /* not the JSON: the entry carries the message already; members read it from their store */
    (void)json;
    (void)len;
    st__note(ws, ST__NOTE_MESSAGE, &b);
    st_buf_free(&b);
}

void st__ws_note_room_member(st_ws_t *ws, const char *room, size_t rl, const char *user, size_t ul,
                             bool added)
{
    if (!ws->app->store || !st_store_grouped(ws->app->store) || st__replaying) return;
    st_buf_t b = {0};
    st__put_str(&b, room, rl);
    st__put_str(&b, user, ul);
    st_buf_appendc(&b, added ? 1 : 0);
    st__note(ws, ST__NOTE_ROOM, &b);
    st_buf_free(&b);
}

void st__ws_note_change(st_ws_t *ws, const char *kind, const char *user, size_t ulen,
                        const char *conv, size_t clen, uint64_t msg_id, const char *json,
                        size_t len)
{
    if (!ws->app->store || !st_store_grouped(ws->app->store) || st__replaying) return;
    st_buf_t b = {0};
    st__put_str(&b, kind, strlen(kind));
    st__put_str(&b, user, ulen);
    st__put_str(&b, conv ? conv : "", conv ? clen : 0);
    st_buf_append(&b, &msg_id, 8);
    st__put_str(&b, json ? json : "", json ? len : 0); /* a cold message's state is no record */
    st__note(ws, ST__NOTE_CHANGE, &b);
    st_buf_free(&b);
}

/* A note from an entry another member proposed, now in LMDB: publish it here (durable). */
static void st__on_note(void *arg, uint8_t kind, const char *p, size_t len)
{
    st_ws_t *ws = arg;
    const char *end = p + len, *a, *c, *k;
    size_t al, cl, kl;
    st__replaying = true;
    if (kind == ST__NOTE_COUNTER && st__get_str(&p, end, &a, &al) && end - p == 8) {
        int64_t v;
        memcpy(&v, p, 8);
        st__ws_counter_changed(ws, a, al, v, 0);
    } else if (kind == ST__NOTE_SEATS && st__get_str(&p, end, &a, &al)) {
        st__ws_seats_changed(ws, a, al, p, (size_t)(end - p), 0);
    } else if (kind == ST__NOTE_MESSAGE && st__get_str(&p, end, &a, &al) &&
               st__get_str(&p, end, &c, &cl) && end - p == 8) {
        uint64_t id;
        memcpy(&id, p, 8);
        /* Read back only if a stream here takes it (most posts have no subscriber on a member:
         * the read and the copy were a tenth of a follower's loop per post, issue 24). Copied:
         * the store's buffer is reused by the next read. */
        st_buf_t json = {0};
        st_owner_t o = st_chat_owner_from(a, al); /* as st__ws_message_posted noted it */
        if (ws->app->chat && st__ws_message_wanted(ws, a, al, c, cl, id) &&
            st_chat_message_json(ws->app->chat, &o, id, &json) == ST_OK)
            st__ws_message_posted(ws, &o, c, cl, id, json.data, json.len, 0);
        st_buf_free(&json);
    } else if (kind == ST__NOTE_ROOM && st__get_str(&p, end, &a, &al) &&
               st__get_str(&p, end, &c, &cl) && end - p == 1) {
        st__ws_room_member(ws, a, al, c, cl, *p != 0, 0);
    } else if (kind == ST__NOTE_CHANGE && st__get_str(&p, end, &k, &kl) && kl < 32 &&
               st__get_str(&p, end, &a, &al) && st__get_str(&p, end, &c, &cl) && end - p >= 8) {
        uint64_t id;
        memcpy(&id, p, 8);
        p += 8;
        const char *json;
        size_t jl;
        char kind_s[32];
        memcpy(kind_s, k, kl);
        kind_s[kl] = 0;
        st_owner_t o = st_chat_owner_from(a, al);
        if (st__get_str(&p, end, &json, &jl) && p == end)
            st__ws_message_changed(ws, kind_s, &o, cl ? c : NULL, cl, id, jl ? json : NULL, jl, 0);
    } else {
        st_warn("ws: an unreadable stream note (kind %u, %zu bytes) was skipped", kind, len);
    }
    st__replaying = false;
}

void st__ws_notes_init(st_ws_t *ws)
{
    if (ws->app->store) st_store_on_note(ws->app->store, st__on_note, ws);
}
