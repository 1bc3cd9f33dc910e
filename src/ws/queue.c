/* SPDX-License-Identifier: MIT */
/*
 * Outbound side of the streams: each connection queues frames tagged with the batch they
 * show, and a frame leaves only once that batch is durable (SPEC §3: only durable state is
 * published), in order. The body of a frame is shared by every subscriber it goes to, so a
 * change to a thousand subscribers is serialized once and held in memory once.
 *
 * A connection whose live backlog outgrows its limit is cut off (SPEC §3): its queue is dropped
 * at once and a 1008 "slow consumer" close frame goes out ahead of everything not yet written,
 * behind only what the kernel or lws already holds; the socket stays open ST__WS_CLOSE_GRACE
 * seconds for it, then is closed anyway. What a connection can hold is bounded:
 *  - live frames (fan-out, acknowledgements, errors) that may leave: a frame counts toward the
 *    backlog once its batch is durable and every frame ahead of it may leave, never before (no
 *    reader could have taken a frame that was not allowed to leave). What one loop turn makes
 *    sendable to a stream is a release (a durable batch; what a member applied at once, frame by
 *    frame), together with everything the stream gets while it waits for its write on ws->soon
 *    (none of that was offered to its socket yet; it waits at most one turn per
 *    ST__WS_TURN_STREAMS streams ahead of it) — but not the backlog it had before;
 *    the backlog holds up to ST__WS_MAX_QUEUED plus the largest release counted since it was last
 *    empty. So a reader that keeps up is never cut off for what one group commit brought it,
 *    however big, and one that stops reading is cut off once more than ST__WS_MAX_QUEUED piles up
 *    beside that release. A body shared by consecutive frames (one change to several
 *    subscriptions of the stream) is held once and counted once, by the first of them still
 *    queued;
 *  - live frames still waiting for their batch, which do not count: their bodies are the changes
 *    the store has in flight, serialized once and shared by every stream they go to, so they are
 *    bounded by what the store holds until it is durable (the batch), not by how a stream reads;
 *    a stream adds only its queue entries and its subscriptions' prefixes;
 *  - replayed messages, which never count as backlog: a replay page is taken only while the
 *    whole queue is under its low-water mark, and it stops before a message that would take the
 *    queue past ST__WS_MAX_QUEUED unless no replayed message is queued (so every page sends at
 *    least one): at most ST__WS_MAX_QUEUED or one frame;
 *  - what lws holds of a write the socket did not take: one write is at most
 *    ST__WS_WRITE_BUDGET bytes plus one frame, and nothing more is written while lws holds some;
 *  - after a cut-off, nothing but that part of one write and the close frame.
 * Lazy frames (typing, st__ws_queue_lazy) count like live ones but ask for no write: a stream
 * whose frames that may leave are all lazy waits on ws->lazy for its next write (a post's frame,
 * an answer) to carry them, or for ST__WS_LAZY_MS, whichever comes first.
 * Because a replay is paced by the reader and never cuts it off, a stream resuming with `after`
 * gets its replay page by page as fast as it reads, whatever the size of its messages (live ones
 * of a replaying subscription come through the replay); only falling behind live traffic after
 * it caught up can cut it off again.
 */
#include "internal.h"

#include <libwebsockets.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

st_wsbody_t *st__ws_body_new(const void *data, size_t len)
{
    st_wsbody_t *b = st_malloc(sizeof *b + len);
    b->refs = 1;
    b->len = len;
    memcpy(b->data, data, len);
    return b;
}

void st__ws_body_unref(st_wsbody_t *b)
{
    if (b && --b->refs == 0) free(b);
}

/* ---- the ring of queued frames ---- */

static st_wsent_t *st__q_at(const st_wsconn_t *c, uint32_t i)
{
    return &c->q[(c->qhead + i) & (c->qcap - 1)];
}

static st_wsent_t *st__q_head(const st_wsconn_t *c)
{
    return c->qlen ? &c->q[c->qhead] : NULL;
}

static void st__q_push(st_ws_t *ws, st_wsconn_t *c, const st_wsent_t *e)
{
    if (c->qlen == c->qcap) st__ws_ring_resize(ws, c, c->qcap ? c->qcap * 2 : 4);
    *st__q_at(c, c->qlen++) = *e;
}

/* A ring that drained to a quarter of its room shrinks to twice what it holds (an empty one past
 * ST__WS_RING_KEEP goes), so what a burst grew goes back as the stream catches up, not only once
 * it has nothing queued (a stream that always has a few frames queued kept the burst's ring). */
static void st__q_fit(st_ws_t *ws, st_wsconn_t *c)
{
    if (c->qcap <= ST__WS_RING_KEEP || c->qlen > c->qcap / 4) return;
    uint32_t cap = ST__WS_RING_KEEP;
    while (cap < 2 * c->qlen)
        cap *= 2;
    st__ws_ring_resize(ws, c, c->qlen ? cap : 0);
}

static void st__ent_free(st_wsent_t *e)
{
    st__ws_body_unref(e->prefix);
    st__ws_body_unref(e->body);
}

static size_t st__ent_len(const st_wsent_t *e)
{
    return (e->prefix ? e->prefix->len : 0) + e->body->len;
}

/* The bytes e holds in memory: what counts against the backlog cap. */
static size_t st__ent_cost(const st_wsent_t *e)
{
    return e->shared ? st__ent_len(e) - e->body->len : st__ent_len(e);
}

void st__ws_prefix(st_buf_t *b, const char *type, const char *sid)
{
    st_buf_reset(b);
    st_buf_puts(b, "{\"type\":\"");
    st_buf_puts(b, type);
    st_buf_puts(b, "\",\"id\":");
    st_buf_append_json_str(b, sid, strlen(sid));
    st_buf_appendc(b, ',');
}

st_wsbody_t *st__ws_prefix_of(st_wsbody_t **pre, const char **last, const char *type,
                              const char *sid)
{
    if (*pre && *last && strcmp(*last, sid) == 0) return *pre;
    st_buf_t b = {0};
    st__ws_prefix(&b, type, sid);
    st__ws_body_unref(*pre);
    *pre = st__ws_body_new(b.data, b.len);
    *last = sid;
    st_buf_free(&b);
    return *pre;
}

static void st__unwait(st_wsconn_t *c)
{
    if (st_list_linked(&c->wlink)) st_list_unlink(&c->wlink);
}

/* Counts the frames that may leave now toward the backlog: from the first uncounted one, while
 * their batch is durable. They are one release, which no reader could have taken any of before,
 * and the cap bounds a backlog, not a release: the largest release since the backlog was last
 * empty does not count. A stream past its cap is cut off. */
static void st__queue_count(st_ws_t *ws, st_wsconn_t *c)
{
    uint64_t durable = st_store_durable_id(ws->app->store);
    size_t release = 0;
    for (; c->counted < c->qlen; c->counted++) {
        const st_wsent_t *e = st__q_at(c, c->counted);
        if (e->wait > durable) break;
        if (!e->replay) release += st__ent_cost(e);
    }
    if (!release) return;
    c->live += release;
    /* One release is what one loop turn makes sendable to c — a durable batch, or the entries a
     * member applied at once, frame by frame, which the leader made as one batch — and all that
     * c gets while it waits on ws->soon for its write (nothing of it was refused yet). */
    if (st_list_linked(&c->slink) || c->rel_turn == ws->turn_no) {
        release = c->rel_bytes += release;
    } else {
        c->rel_bytes = release;
        c->rel_turn = ws->turn_no;
    }
    if (release > c->biggest) c->biggest = release;
    if (c->live > ST__WS_MAX_QUEUED + c->biggest) {
        st_metric_add(ws->m_slow, 1);
        st__ws_cut(ws, c, "slow consumer");
    }
}

/* Parks c on the waiting list while a frame of it waits for its batch, so that a durable batch
 * visits only the connections it concerns. */
static void st__park(st_ws_t *ws, st_wsconn_t *c)
{
    if (c->wsi && !c->cut && c->counted < c->qlen && !st_list_linked(&c->wlink))
        st_list_push_front(&ws->waiting, &c->wlink);
}

/* The end of a loop turn (after the poll): the first ST__WS_TURN_STREAMS streams of ws->soon are
 * written, each once with every frame it may send (up to its budget); the rest wait for the next
 * turn, which comes without blocking in the poll. A fan-out to 10,000 streams is thus ~40 turns,
 * with the loop's other work served between them, and what arrives meanwhile (more changes
 * applied, more batches durable) joins the frames of the streams not yet written: on a member
 * publishing what it applies, a stream took 1.6 frames per send when every turn wrote them all,
 * ~10 this way (bench/followerfan.sh, RESULTS "Session 8"). */
static void st__turn(st_ws_t *ws, size_t streams)
{
    ws->ready.n = 0;
    for (ST_LIST_EACH(l, n, &ws->soon)) {
        if (ws->ready.n == streams) break;
        st_wsconn_t *c = ST_LIST_ITEM(l, st_wsconn_t, slink);
        st_list_unlink(l);
        st_vec_push(&ws->ready, c);
    }
    if (st_list_empty(&ws->soon)) {
        uv_check_stop(&ws->turn);
        uv_idle_stop(&ws->spin);
    }
    st__ws_send_ready(ws);
}

static void st__queue_on_turn(uv_check_t *h)
{
    st__turn(h->data, ST__WS_TURN_STREAMS);
}

static void st__on_spin(uv_idle_t *h)
{
    (void)h; /* only there so that the poll does not block while streams wait in ws->soon */
}

/* Puts c at the end of ws->soon (a no-op if it is there): it is written at the end of this loop
 * turn, or of the next one when this turn's end is past (the poll does not block meanwhile).
 * What c gets from now until its turn is one release with what this turn brought it
 * (st__queue_count); its backlog so far is not: a reader that takes each write but falls behind
 * must still reach the cap (review, session 8). */
static void st__soon_add(st_ws_t *ws, st_wsconn_t *c)
{
    if (st_list_linked(&c->llink)) st_list_unlink(&c->llink); /* its write comes now */
    if (st_list_linked(&c->slink)) return;
    if (uv_is_closing((uv_handle_t *)&ws->turn)) { /* shutting down: lws's way */
        lws_callback_on_writable(c->wsi);
        return;
    }
    if (st_list_empty(&ws->soon)) {
        uv_check_start(&ws->turn, st__queue_on_turn);
        uv_idle_start(&ws->spin, st__on_spin);
    }
    st_list_insert(&ws->soon, &c->slink);
    if (c->rel_turn != ws->turn_no) {
        c->rel_bytes = 0;
        c->rel_turn = ws->turn_no;
    }
}

/* Counts what may leave now and parks c while something waits for its batch. What may leave goes
 * out at the end of the loop turn with every other stream's (st__queue_on_turn), one send per
 * stream, rather than from a writable callback each (two epoll_ctl calls, a poll event and an lws
 * dispatch per stream: on a member publishing what it applies to 10,000 streams that was 3.3
 * epoll_ctl calls per send and half its loop); a stream written up to its budget with more to
 * send comes back at the end of the list. Only a stream whose socket refused part of its last
 * write (lws holds the rest) waits for the writable callback: that reader is behind. */
void st__ws_wake(st_ws_t *ws, st_wsconn_t *c)
{
    st__queue_count(ws, c);
    if (!c->wsi || c->cut) return;
    if (c->counted) {
        if (st_list_linked(&c->llink)) st_list_unlink(&c->llink); /* a write is asked for now */
        if (lws_partial_buffered(c->wsi))
            lws_callback_on_writable(c->wsi);
        else
            st__soon_add(ws, c);
    }
    st__park(ws, c);
}

/* Writes the streams of ws->lazy that waited ST__WS_LAZY_MS for a write (all of them: every
 * one, at shutdown), oldest first, and arms the timer for the next one due. Only those: the list
 * empties and fills again as posts' writes take the frames, so a timer armed for one stream long
 * gone must not write the streams that joined since (with typing into a room of 1,000 streams
 * and a post every 10 ms that was an extra write to each of them, ~6 ms of the loop, ten times a
 * second, the posts' fan-out waiting behind it: bench/typing.sh). */
static void st__lazy_on_timer(uv_timer_t *h);
static void st__lazy_flush(st_ws_t *ws, bool all)
{
    uint64_t now = uv_now(ws->loop);
    for (ST_LIST_EACH(l, n, &ws->lazy)) {
        st_wsconn_t *c = ST_LIST_ITEM(l, st_wsconn_t, llink);
        if (!all && now - c->lazy_ms < ST__WS_LAZY_MS) {
            uv_timer_start(&ws->lazy_timer, st__lazy_on_timer, c->lazy_ms + ST__WS_LAZY_MS - now,
                           0);
            return;
        }
        st_list_unlink(l);
        st__ws_wake(ws, c);
    }
}

static void st__lazy_on_timer(uv_timer_t *h)
{
    st__lazy_flush(h->data, false);
}

/* c's frames that may leave are lazy ones and no write is coming: the next one takes them, or
 * the timer within ST__WS_LAZY_MS (armed here when none is: one armed already is due no later
 * than this stream, the list being oldest first). */
static void st__lazy_add(st_ws_t *ws, st_wsconn_t *c)
{
    if (st_list_linked(&c->llink) || st_list_linked(&c->slink)) return;
    if (uv_is_closing((uv_handle_t *)&ws->lazy_timer)) { /* shutting down: no waiting */
        st__ws_wake(ws, c);
        return;
    }
    c->lazy_ms = uv_now(ws->loop);
    if (!uv_is_active((uv_handle_t *)&ws->lazy_timer))
        uv_timer_start(&ws->lazy_timer, st__lazy_on_timer, ST__WS_LAZY_MS, 0);
    st_list_insert(&ws->lazy, &c->llink);
}

static void st__enqueue(st_ws_t *ws, st_wsconn_t *c, st_wsbody_t *prefix, st_wsbody_t *body,
                        uint64_t wait, bool replay, bool lazy)
{
    if (c->cut) return;
    st_wsent_t e = {prefix, body, wait, replay, false};
    const st_wsent_t *prev = c->qlen ? st__q_at(c, c->qlen - 1) : NULL;
    e.shared = prev && prev->body == body && prev->replay == replay;
    size_t n = st__ent_cost(&e);
    bool coming = c->counted > 0; /* a write is asked for what may leave (or it is lazy) */
    if (prefix) prefix->refs++;
    body->refs++;
    st__q_push(ws, c, &e);
    c->queued += n;
    if (replay) c->replayed += n;
    /* It counts now if its batch is durable and every frame ahead counts; behind a frame that
     * waits for its batch, it waits too and counts with it (on_durable). */
    if (lazy) {
        if (c->counted + 1 == c->qlen) st__queue_count(ws, c);
        if (!coming && c->counted && !c->cut && c->wsi) st__lazy_add(ws, c);
        st__park(ws, c);
    } else if (c->qlen == 1) {
        st__ws_wake(ws, c);
    } else if (c->counted + 1 == c->qlen) {
        st__queue_count(ws, c); /* the head may leave: a write is asked for already, */
        if (c->counted == c->qlen && st_list_linked(&c->llink))
            st__ws_wake(ws, c); /* unless what was ahead of it was lazy: it leaves now */
        else
            st__park(ws, c);
    }
}

void st__ws_queue(st_ws_t *ws, st_wsconn_t *c, st_wsbody_t *prefix, st_wsbody_t *body,
                  uint64_t wait)
{
    st__enqueue(ws, c, prefix, body, wait, false, false);
}

void st__ws_queue_lazy(st_ws_t *ws, st_wsconn_t *c, st_wsbody_t *prefix, st_wsbody_t *body,
                       uint64_t wait)
{
    st__enqueue(ws, c, prefix, body, wait, false, true);
}

void st__ws_queue_replay(st_ws_t *ws, st_wsconn_t *c, st_wsbody_t *prefix, st_wsbody_t *body,
                         uint64_t wait)
{
    st__enqueue(ws, c, prefix, body, wait, true, false);
}

/* Takes the bytes of entry i off c's counts, as it leaves the queue; the caller moves the queue
 * and `counted`. The entry behind it takes over a body they share: it still holds it, so the body
 * stays queued, and stays in the backlog if that entry counts too (else it counts with it). */
static void st__unqueue(st_wsconn_t *c, uint32_t i)
{
    const st_wsent_t *e = st__q_at(c, i);
    st_wsent_t *next = i + 1 < c->qlen ? st__q_at(c, i + 1) : NULL;
    size_t n = st__ent_cost(e), kept = 0; /* kept: bytes the entry behind takes over */
    if (!e->shared && next && next->shared && next->body == e->body) {
        next->shared = false;
        kept = e->body->len;
    }
    c->queued -= n - kept;
    if (e->replay) {
        c->replayed -= n - kept;
    } else if (i < c->counted) {
        c->live -= i + 1 < c->counted ? n - kept : n;
        if (c->live == 0) c->biggest = 0;
    }
}

bool st__ws_backed_up(const st_wsconn_t *c)
{
    if (c->cut || c->broken || c->live >= ST__WS_MAX_QUEUED / 2) return true;
    return c->wsi && lws_partial_buffered(c->wsi);
}

void st__ws_queue_buf(st_ws_t *ws, st_wsconn_t *c, const st_buf_t *b, uint64_t wait)
{
    st_wsbody_t *body = st__ws_body_new(b->data, b->len);
    st__ws_queue(ws, c, NULL, body, wait);
    st__ws_body_unref(body);
}

void st__ws_send_error(st_ws_t *ws, st_wsconn_t *c, const char *id, const char *code,
                       const char *msg)
{
    st_buf_t b = {0};
    st_buf_puts(&b, "{\"type\":\"error\",");
    if (id) {
        st_buf_puts(&b, "\"id\":");
        st_buf_append_json_str(&b, id, strlen(id));
        st_buf_appendc(&b, ',');
    }
    st_buf_printf(&b, "\"code\":\"%s\",\"message\":", code);
    st_buf_append_json_str(&b, msg, strlen(msg));
    st_buf_appendc(&b, '}');
    st__ws_queue_buf(ws, c, &b, 0);
    st_buf_free(&b);
}

/* Appends the WebSocket header of an unmasked, final text frame of n payload bytes to b
 * (RFC 6455 §5.2): strata frames what it sends itself, so a flush is one write. */
static void st__frame_header(st_buf_t *b, size_t n)
{
    unsigned char h[10];
    size_t hl;
    h[0] = 0x81;
    if (n < 126) {
        h[1] = (unsigned char)n;
        hl = 2;
    } else if (n <= UINT16_MAX) {
        h[1] = 126;
        h[2] = (unsigned char)(n >> 8);
        h[3] = (unsigned char)n;
        hl = 4;
    } else {
        h[1] = 127;
        st_be64_put(h + 2, (uint64_t)n);
        hl = 10;
    }
    st_buf_append(b, h, hl);
}

/* Frames every frame of c that may leave (its batch is durable), up to a budget so one busy
 * stream does not starve the others, onto the end of out: RFC 6455 header, prefix and shared
 * body, taken off c's queue. Returns how many. Loop only. */
size_t st__ws_frame(st_ws_t *ws, st_wsconn_t *c, st_buf_t *out)
{
    uint64_t durable = st_store_durable_id(ws->app->store);
    size_t start = out->len, frames = 0;
    while (c->qlen && st__q_head(c)->wait <= durable && out->len - start < ST__WS_WRITE_BUDGET) {
        st_wsent_t e = *st__q_head(c);
        st__unqueue(c, 0);
        c->qhead = (c->qhead + 1) & (c->qcap - 1);
        c->qlen--;
        if (c->counted) c->counted--;
        st__frame_header(out, st__ent_len(&e));
        if (e.prefix) st_buf_append(out, e.prefix->data, e.prefix->len);
        st_buf_append(out, e.body->data, e.body->len);
        st__ent_free(&e);
        frames++;
        /* a replay page taken now leaves in this write */
        if (!c->qlen || st__q_head(c)->wait > durable) st__ws_replay_more(ws, c);
    }
    st__q_fit(ws, c);
    return frames;
}

void st__ws_queue_clear(st_ws_t *ws, st_wsconn_t *c)
{
    st__unwait(c);
    if (st_list_linked(&c->slink)) st_list_unlink(&c->slink);
    if (st_list_linked(&c->llink)) st_list_unlink(&c->llink);
    c->rel_bytes = 0;
    for (uint32_t i = 0; i < c->qlen; i++)
        st__ent_free(st__q_at(c, i));
    c->qlen = c->counted = 0;
    st__ws_ring_resize(ws, c, 0);
    c->queued = c->replayed = c->live = c->biggest = 0;
}

/* Batches from `first` on were rolled back: what they would have shown must never be sent. */
static void st__queue_on_failed(st_store_listener_t *l, uint64_t first, int err)
{
    st_ws_t *ws = (st_ws_t *)((char *)l - offsetof(st_ws_t, listener));
    (void)err;
    for (ST_LIST_EACH(cl, cn, &ws->conns)) {
        st_wsconn_t *c = ST_LIST_ITEM(cl, st_wsconn_t, link);
        for (ST_LIST_EACH(sl, sn, &c->subs)) {
            st_wssub_t *s = ST_LIST_ITEM(sl, st_wssub_t, link);
            if (s->topic == ST_TOPIC_MESSAGES && !s->replaying && s->last_wait >= first)
                s->cursor = s->safe_cursor; /* rolled-back ids must not hide the next ones */
        }
        uint32_t kept = 0, counted = 0; /* the entries kept move up, in order */
        for (uint32_t i = 0; i < c->qlen; i++) {
            st_wsent_t e = *st__q_at(c, i);
            if (e.wait >= first) {
                st__unqueue(c, i);
                st__ent_free(&e);
            } else {
                counted += i < c->counted;
                *st__q_at(c, kept++) = e;
            }
        }
        c->qlen = kept;
        c->counted = counted;
        st__q_fit(ws, c);
        st__ws_wake(ws, c); /* what waited behind a rolled-back frame may leave now */
        /* A replay paused behind rolled-back frames fetches its next page from the writable
         * callback (st__ws_on_writable), once the rollback is over: nothing else would ask. */
        bool replaying = false;
        for (ST_LIST_EACH(sl, sn, &c->subs))
            replaying |= ST_LIST_ITEM(sl, st_wssub_t, link)->replaying;
        if (replaying && c->wsi && !c->cut) lws_callback_on_writable(c->wsi);
        st__ws_fence_failed(ws, c, first);
    }
}

static void st__queue_on_prepare(uv_prepare_t *h)
{
    ((st_ws_t *)h->data)->turn_no++;
}

/* A batch became durable: the frames it released count toward their stream's backlog (which
 * may cut it off), and the streams whose next frame it released are written at the end of the
 * loop turn (st__queue_on_turn). A stream that had frames to send already has a write coming. */
static void st__queue_on_durable(st_store_listener_t *l, uint64_t id)
{
    st_ws_t *ws = (st_ws_t *)((char *)l - offsetof(st_ws_t, listener));
    (void)id; /* st__queue_count reads it from the store */
    for (ST_LIST_EACH(wl, wn, &ws->waiting)) {
        st_wsconn_t *c = ST_LIST_ITEM(wl, st_wsconn_t, wlink);
        /* nothing to send, or only lazy frames: no write is coming */
        uint32_t was = c->counted;
        bool idle = was == 0 || st_list_linked(&c->llink);
        st__queue_count(ws, c);
        if (c->cut) continue;
        if (c->counted == c->qlen) st__unwait(c);
        if (idle && c->counted > was) st__soon_add(ws, c);
    }
}

void st__ws_listen(st_ws_t *ws)
{
    ws->listener.on_durable = st__queue_on_durable;
    ws->listener.on_failed = st__queue_on_failed;
    st_store_listen(ws->app->store, &ws->listener);
    st_list_init(&ws->soon);
    st_list_init(&ws->lazy);
    uv_timer_init(ws->loop, &ws->lazy_timer);
    ws->lazy_timer.data = ws;
    uv_check_init(ws->loop, &ws->turn);
    ws->turn.data = ws;
    uv_idle_init(ws->loop, &ws->spin);
    uv_prepare_init(ws->loop, &ws->turns);
    ws->turns.data = ws;
    uv_prepare_start(&ws->turns, st__queue_on_prepare);
}

void st__ws_turn_close(st_ws_t *ws)
{
    uv_close((uv_handle_t *)&ws->turn, NULL);
    uv_close((uv_handle_t *)&ws->spin, NULL);
    uv_close((uv_handle_t *)&ws->turns, NULL);
    uv_close((uv_handle_t *)&ws->lazy_timer, NULL);
    /* what may leave leaves before the streams close, lazy frames too; anything it brings (a
     * replay page) asks lws for a writable callback instead (st__soon_add), so this is one round */
    st__lazy_flush(ws, true);
    st__turn(ws, SIZE_MAX);
}
