/* SPDX-License-Identifier: MIT */
/*
 * Typing indicators (SPEC §2.1 v5): ephemeral, never stored, never replayed. A signal becomes one
 * frame {"type":"typing","id","room_id","user","until"} to each of the room's subscribers here;
 * at most one per user per room per second leaves (more are coalesced: dropped, the frame sent
 * already says typing until `until`, 5 s on). In a group the leader takes the signal (a /v1
 * route) and hands it to the other members (POST /v1/cluster/typing with the group's secret)
 * for their subscribers: one worker thread sends a bounded queue of them, dropping what does
 * not fit (a signal that is late is worth nothing). Presence (presence.c) hands its
 * announcements to the other members through the same queue (st__ws_peers_post).
 *
 * Cost of a client that never stops: one slot check per signal (a fixed table of
 * ST__TYPING_SLOTS recent (room, user) pairs by hash; a collision at worst lets one more frame
 * through), no allocation; frames at most one per second per (room, user).
 *
 * Typing yields to durable frames (issue 47): a typing frame asks for no write of its own. It is
 * queued lazily (queue.c st__ws_queue_lazy) and rides in the stream's next write, a post's, or
 * goes out within ST__WS_LAZY_MS when no write comes. With 100 typers in a room of 1,000
 * subscribers that is 100,000 typing frames a second and no send() for them beside the posts'
 * (each of their own had been a send per subscriber, the kernel's TCP path ~12 µs apiece, on
 * the loop that also writes the posts). A subscriber whose output is backed up gets none
 * (topics.c st__ws_typing_deliver): a typing frame never waits behind a backlog, and the next
 * one says the same with a later `until`.
 */
#include "strata/idle.h"
#include "internal.h"

#include "strata/repl.h"

#include <stdlib.h>
#include <string.h>

#define ST__TYPING_EVERY_MS 1000
#define ST__TYPING_QUEUE    256 /* signals waiting to be handed to the other members */

struct st_wstyping {
    uint64_t hash[ST__TYPING_SLOTS];
    uint64_t last_ms[ST__TYPING_SLOTS];
    /* the hand-over to the other members: jobs wait in q; the worker takes them all at once */
    ST_VEC(st_buf_t) q, sending; /* each: url \0 path \0 body \0 */
    uv_loop_t *loop;
    uv_work_t work;
    bool busy, closing;
    char secret[512];
};

static uint64_t st__typing_hash(const char *room, size_t rl, const char *user, size_t ul)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a, over room 0 user */
    for (size_t i = 0; i < rl; i++)
        h = (h ^ (uint8_t)room[i]) * 1099511628211ull;
    h = (h ^ 0) * 1099511628211ull;
    for (size_t i = 0; i < ul; i++)
        h = (h ^ (uint8_t)user[i]) * 1099511628211ull;
    return h | 1; /* 0 marks an empty slot */
}

static void st__typing_send(uv_work_t *w)
{
    st_sched_worker(); /* a pool thread: its wake-ups never preempt the loop */
    st_wstyping_t *t = w->data;
    for (size_t i = 0; i < t->sending.n; i++) {
        const char *url = t->sending.v[i].data, *path = url + strlen(url) + 1,
                   *body = path + strlen(path) + 1;
        st_buf_t resp = {0};
        long status = 0;
        /* 2 s at most: a member that does not answer misses the signal, nothing more */
        st_repl_post(url, path, body, t->secret, NULL, 2000, &resp, &status, NULL, 0);
        st_buf_free(&resp);
    }
}

static void st__typing_start(st_wstyping_t *t);

/* Frees t once closing, with no hand-over under way. */
static void st__typing_free(st_wstyping_t *t)
{
    if (!t->closing || t->busy) return;
    for (size_t i = 0; i < t->q.n; i++)
        st_buf_free(&t->q.v[i]);
    st_vec_free(&t->q);
    st_vec_free(&t->sending);
    free(t);
}

static void st__typing_sent(uv_work_t *w, int status)
{
    (void)status;
    st_wstyping_t *t = w->data;
    for (size_t i = 0; i < t->sending.n; i++)
        st_buf_free(&t->sending.v[i]);
    t->sending.n = 0;
    t->busy = false;
    if (t->closing) {
        st__typing_free(t);
        return;
    }
    st__typing_start(t);
}

static void st__typing_start(st_wstyping_t *t)
{
    if (t->busy || !t->q.n) return;
    st_vec_reserve(&t->sending, t->q.n);
    memcpy(t->sending.v, t->q.v, t->q.n * sizeof *t->q.v);
    t->sending.n = t->q.n;
    t->q.n = 0;
    t->work.data = t;
    if (uv_queue_work(t->loop, &t->work, st__typing_send, st__typing_sent) == 0)
        t->busy = true;
    else
        st__typing_sent(&t->work, 0);
}

size_t st__ws_peers_post(st_ws_t *ws, const char *path, const char *body, size_t len)
{
    st_repl_t *repl = ws->app->repl;
    st_wstyping_t *t = ws->typing;
    uint64_t ids[ST_REPL_MAX_MEMBERS];
    size_t queued = 0;
    if (!repl || !t) return 0;
    size_t n = st_repl_member_ids(repl, ids, ST_REPL_MAX_MEMBERS);
    for (size_t i = 0; i < n && t->q.n < ST__TYPING_QUEUE; i++) {
        char url[512];
        if (st_repl_member_url(repl, ids[i], url, sizeof url)) continue; /* itself, or unknown */
        st_buf_t b = {0};
        st_buf_append(&b, url, strlen(url) + 1);
        st_buf_append(&b, path, strlen(path) + 1);
        st_buf_append(&b, body, len);
        st_buf_appendc(&b, 0);
        st_vec_push(&t->q, b);
        queued++;
    }
    st__typing_start(t);
    return queued;
}

/* Hands the signal to every other member of the group (bounded; dropped when full). */
static void st__typing_forward(st_ws_t *ws, const char *room, size_t rl, const char *user,
                               size_t ul, int64_t until)
{
    st_buf_t b = {0};
    st_buf_puts(&b, "{\"room_id\":");
    st_buf_append_json_str(&b, room, rl);
    st_buf_puts(&b, ",\"user\":");
    st_buf_append_json_str(&b, user, ul);
    st_buf_printf(&b, ",\"until\":%lld}", (long long)until);
    st__ws_peers_post(ws, "/v1/cluster/typing", b.data, b.len);
    st_buf_free(&b);
}

int st_ws_typing(st_ws_t *ws, const char *room, size_t rl, const char *user, size_t ul,
                 int64_t until, bool forward)
{
    st_wstyping_t *t = ws->typing;
    if (!t) return ST_OK;
    uint64_t h = st__typing_hash(room, rl, user, ul), now = uv_now(ws->loop);
    size_t slot = (size_t)(h % ST__TYPING_SLOTS);
    if (t->hash[slot] == h && now - t->last_ms[slot] < ST__TYPING_EVERY_MS) return ST_OK;
    t->hash[slot] = h;
    t->last_ms[slot] = now;
    st__ws_typing_deliver(ws, room, rl, user, ul, until);
    if (forward && ws->app->repl) st__typing_forward(ws, room, rl, user, ul, until);
    return ST_OK;
}

void st__ws_typing_open(st_ws_t *ws)
{
    st_wstyping_t *t = st_calloc(1, sizeof *t);
    t->loop = ws->loop;
    t->work.data = t;
    snprintf(t->secret, sizeof t->secret, "%s", ws->app->cfg->cluster_secret);
    ws->typing = t;
}

void st__ws_typing_close(st_ws_t *ws)
{
    st_wstyping_t *t = ws->typing;
    ws->typing = NULL;
    if (!t) return;
    t->closing = true;
    st__typing_free(t); /* or once the hand-over under way ends */
}
