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

#include <errno.h>
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

static void st__q_push(st_wsconn_t *c, const st_wsent_t *e)
{
    if (c->qlen == c->qcap) {
        uint32_t cap = c->qcap ? c->qcap * 2 : 4;
        st_wsent_t *q = st_malloc(cap * sizeof *q);
        for (uint32_t i = 0; i < c->qlen; i++)
            q[i] = *st__q_at(c, i);
        free(c->q);
        c->q = q;
        c->qcap = cap;
        c->qhead = 0;
    }
    *st__q_at(c, c->qlen++) = *e;
}

/* A queue that emptied gives back a ring grown past ST__WS_RING_KEEP by a burst. */
static void st__q_trim(st_wsconn_t *c)
{
    if (c->qlen || c->qcap <= ST__WS_RING_KEEP) return;
    free(c->q);
    c->q = NULL;
    c->qcap = c->qhead = 0;
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

static void st__queue_on_turn(uv_check_t *h);

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
static void st__wake(st_ws_t *ws, st_wsconn_t *c)
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
        st__wake(ws, c);
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
        st__wake(ws, c);
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
    st__q_push(c, &e);
    c->queued += n;
    if (replay) c->replayed += n;
    /* It counts now if its batch is durable and every frame ahead counts; behind a frame that
     * waits for its batch, it waits too and counts with it (on_durable). */
    if (lazy) {
        if (c->counted + 1 == c->qlen) st__queue_count(ws, c);
        if (!coming && c->counted && !c->cut && c->wsi) st__lazy_add(ws, c);
        st__park(ws, c);
    } else if (c->qlen == 1) {
        st__wake(ws, c);
    } else if (c->counted + 1 == c->qlen) {
        st__queue_count(ws, c); /* the head may leave: a write is asked for already, */
        if (c->counted == c->qlen && st_list_linked(&c->llink))
            st__wake(ws, c); /* unless what was ahead of it was lazy: it leaves now */
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
static size_t st__frame(st_ws_t *ws, st_wsconn_t *c, st_buf_t *out)
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
    st__q_trim(c);
    return frames;
}

/* Hands n framed bytes to lws as raw bytes (LWS_WRITE_HTTP is sent unchanged on a WebSocket
 * connection; strata negotiates no extension, so nothing would transform them). What the
 * socket does not take, lws keeps and writes on its own before anything else
 * (lws_partial_buffered meanwhile). Copies them behind LWS_PRE headroom in ws->out unless they
 * are there already. Returns -1 if the stream broke. */
static int st__write(st_ws_t *ws, st_wsconn_t *c, const char *p, size_t n)
{
    st_buf_t *out = &ws->out;
    if (p != out->data + LWS_PRE) {
        st_buf_reset(out);
        st_buf_reserve(out, LWS_PRE + n);
        out->len = LWS_PRE;
        st_buf_append(out, p, n);
    }
    return lws_write(c->wsi, (unsigned char *)out->data + LWS_PRE, n, LWS_WRITE_HTTP) < 0 ? -1 : 0;
}

/* Sends the frames that may leave, a budget per write: each budget's frames are framed into one
 * scratch buffer, so one send and one TCP push carry them, whatever their number (on loopback and
 * in VMs the syscall and the peer's wake-up cost far more than the copy). At most one budget plus
 * one frame is left to lws. Returns -1 if the stream broke. */
static int st__flush(st_ws_t *ws, st_wsconn_t *c)
{
    st_buf_t *out = &ws->out;
    /* Budget after budget while the socket takes them whole, up to ST__WS_MAX_QUEUED a call: the
     * server does not hold back what a reader can take (300 KB messages left one per loop turn,
     * and a reader that kept up was cut off for the server's own pace; hostile test, session 8).
     * lws is written again only while it holds nothing. */
    for (size_t wrote = 0; wrote < ST__WS_MAX_QUEUED && !lws_partial_buffered(c->wsi);) {
        st_buf_reset(out);
        st_buf_reserve(out, LWS_PRE);
        out->len = LWS_PRE;
        size_t frames = st__frame(ws, c, out);
        if (!frames) break;
        if (st__write(ws, c, out->data + LWS_PRE, out->len - LWS_PRE) != 0) return -1;
        st_metric_add(ws->m_sent, (double)frames);
        wrote += out->len - LWS_PRE;
    }
    return 0;
}

static void st__end(st_ws_t *ws, st_wsconn_t *c, uint16_t code, const char *reason)
{
    if (c->cut) return;
    c->cut = reason;
    c->cut_code = code;
    st__ws_queue_clear(ws, c); /* the close goes ahead of every frame not yet written */
    if (!c->wsi) return;
    /* The deadline, should the peer never read again (the writable callback comes only when it
     * does). lws 4.1 on libuv re-arms its timer only when it services an event: a timeout set
     * from outside its callbacks (a fan-out from an HTTP request, the keep-alive's tick) waits
     * for the next one, which may never come (lws runs no keep-alive timer of its own, ws.c).
     * Waking lws makes it re-arm now. */
    lws_set_timeout(c->wsi, PENDING_TIMEOUT_USER_OK, ST__WS_CLOSE_GRACE);
    lws_callback_on_writable(c->wsi);
    lws_cancel_service(lws_get_context(c->wsi));
}

void st__ws_cut(st_ws_t *ws, st_wsconn_t *c, const char *reason)
{
    st__end(ws, c, ST__WS_CLOSE_POLICY, reason);
}

void st__ws_fail(st_ws_t *ws, st_wsconn_t *c, uint16_t code, const char *reason)
{
    st__end(ws, c, code, reason);
}

/* Fails a stream from its writable callback: the close frame is written here, as raw bytes
 * like every frame strata sends, and -1 has lws close the socket right after it (lws's own
 * close would wait up to 5 s for the client's close frame; RFC 6455 §7.1.7 has the server
 * close the connection). The socket has room for a few bytes: it just reported so. */
static int st__fail_now(st_ws_t *ws, st_wsconn_t *c)
{
    if (lws_partial_buffered(c->wsi)) {
        lws_callback_on_writable(c->wsi);
        return 0;
    }
    size_t rl = strlen(c->cut);
    if (rl > 123) rl = 123;
    st_buf_t *out = &ws->out;
    st_buf_reset(out);
    st_buf_reserve(out, LWS_PRE);
    out->len = LWS_PRE;
    unsigned char h[4] = {0x88, (unsigned char)(2 + rl), (unsigned char)(c->cut_code >> 8),
                          (unsigned char)c->cut_code};
    st_buf_append(out, h, sizeof h);
    st_buf_append(out, c->cut, rl);
    lws_write(c->wsi, (unsigned char *)out->data + LWS_PRE, out->len - LWS_PRE, LWS_WRITE_HTTP);
    c->closing = true;
    return -1;
}

/* Starts the close of a cut-off stream, from its writable callback: lws calls it only once it
 * has written every byte of earlier frames it held, and only a close started with nothing
 * pending gets its frame out. In libwebsockets 4.1 a close asked for by returning -1 from this
 * callback marks the socket unusable, and one started while lws holds part of a frame flushes
 * it and then drops the socket: both end in a bare TCP close (1006). This way lws writes the
 * close frame on the next writable event (the socket has room: it just reported so), waits up
 * to 5 s for the peer's, and only then calls LWS_CALLBACK_CLOSED. */
static int st__start_close(st_wsconn_t *c)
{
    struct lws *wsi = c->wsi;
    if (lws_partial_buffered(wsi)) {
        lws_callback_on_writable(wsi);
        return 0;
    }
    c->closing = true;
    lws_close_reason(wsi, (enum lws_close_status)c->cut_code, (unsigned char *)c->cut,
                     strlen(c->cut));
    lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_SYNC);
    return 0;
}

/* Sends the keep-alive ping that is due (ws.c st__keepalive), from the writable callback: one
 * lws_write per callback, and only while lws holds nothing of an earlier write, so the ping
 * leaves between whole frames (every frame strata sends leaves whole from one write, st__write,
 * or a parallel send that is over before the loop goes on, fan.c; what a socket did not take is
 * lws's to finish first). Frames that may leave go in the next callback. */
static int st__ping(st_ws_t *ws, st_wsconn_t *c)
{
    unsigned char buf[LWS_PRE + 1]; /* an empty payload: lws writes the 2-byte header before it */
    c->ping_due = false;
    if (lws_write(c->wsi, buf + LWS_PRE, 0, LWS_WRITE_PING) < 0) return -1;
    st__ws_replay_more(ws, c);
    st__wake(ws, c); /* frames that may leave go at the end of the turn */
    return 0;
}

int st__ws_on_writable(st_ws_t *ws, st_wsconn_t *c)
{
    if (c->closing) return 0; /* lws sends the close frame itself */
    if (c->cut)
        return c->cut_code == ST__WS_CLOSE_POLICY ? st__start_close(c) : st__fail_now(ws, c);
    if (c->broken) return -1;
    if (c->ping_due && !lws_partial_buffered(c->wsi)) return st__ping(ws, c);
    if (st__flush(ws, c) != 0) return -1;
    if (c->ping_due) lws_callback_on_writable(c->wsi); /* after what lws holds */
    /* A flush that stopped on a partly buffered write, with its queue empty, must still fetch the
     * next replay page: nothing else would (a replay of big messages stalled after one page). */
    st__ws_replay_more(ws, c);
    st__wake(ws, c);
    return 0;
}

/* A stream's turn came (st__queue_on_turn): its frames are written right away rather than after a
 * writable callback, which would cost two epoll_ctl calls and a poll event per stream (a third
 * of the CPU of a 1,000-subscriber fan-out). A stream with a write still buffered by lws
 * continues from its writable callback; one with more than its budget to send comes back at the
 * end of the list (st__wake). */
static void st__send_now(st_ws_t *ws, st_wsconn_t *c)
{
    if (c->cut || c->broken || lws_partial_buffered(c->wsi)) {
        lws_callback_on_writable(c->wsi);
        return;
    }
    if (st__flush(ws, c) != 0) {
        c->broken = true; /* closed from its writable callback */
        lws_callback_on_writable(c->wsi);
        return;
    }
    st__ws_replay_more(ws, c);
    st__wake(ws, c);
}

/* Whether c's bytes may go out through a plain send() from either thread (fan.c): lws holds
 * nothing of an earlier write (that must leave first) and the stream is not being ended. And
 * only on plain TCP, where send() writes what a client reads: strata's vhost is created without
 * LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT and without a certificate, so lws 4.1 turns TLS off on it
 * (lws_context_init_server_ssl sets its use_ssl to 0), and an adopted socket is wrapped in TLS
 * only on a vhost that uses it (LWS_ADOPT_ALLOW_SSL); strata itself serves no TLS. lws_is_ssl()
 * checks anyway: should that ever change, such a stream goes through lws_write instead. */
static bool st__direct_ok(const st_wsconn_t *c)
{
    return !c->cut && !c->broken && !lws_partial_buffered(c->wsi) && !lws_is_ssl(c->wsi);
}

/* The end of a stream's part of a parallel send, on the loop, as st__send_now ends: what the
 * socket did not take goes to lws, which keeps it and writes it before anything else; a send
 * that failed outright breaks the stream (closed from its writable callback). */
static void st__fan_done(st_ws_t *ws, const st_wsfan_item_t *it)
{
    st_wsconn_t *c = it->conn;
    ssize_t r = it->sent;
    bool later = r == -EAGAIN || r == -EWOULDBLOCK || r == -EINTR;
    size_t took = r > 0 ? (size_t)r : 0;
    if (r < 0 && !later) goto broken;
    if (took < it->len) {
        st_metric_add(ws->m_fan_short, 1);
        if (st__write(ws, c, ws->arena.data + it->off + took, it->len - took) != 0) goto broken;
    }
    st_metric_add(ws->m_sent, (double)it->frames);
    st_metric_add(it->by_sender ? ws->m_fan_sender : ws->m_fan_loop, 1);
    st__ws_replay_more(ws, c);
    st__wake(ws, c);
    return;
broken:
    c->broken = true;
    lws_callback_on_writable(c->wsi);
}

/* A turn made n streams ready at once: every stream that may take a plain send() has
 * its frames framed on the loop into one arena (only frames whose batch is durable, as
 * st__flush), the loop and the sender thread send them together (fan.c), and each stream is
 * finished on the loop (st__fan_done). The others take st__send_now's way. Rounds of up to
 * ST__WS_FAN_ARENA bytes (plus one stream's) bound the arena. */
static void st__fan_out(st_ws_t *ws, st_wsconn_t **cs, size_t n)
{
    size_t i = 0;
    while (i < n) {
        st_buf_reset(&ws->arena);
        ws->items.n = 0;
        for (; i < n && ws->arena.len < ST__WS_FAN_ARENA; i++) {
            st_wsconn_t *c = cs[i];
            if (!st__direct_ok(c)) {
                st__send_now(ws, c);
                continue;
            }
            size_t off = ws->arena.len;
            size_t frames = st__frame(ws, c, &ws->arena);
            if (!frames) {
                st__ws_replay_more(ws, c);
                st__wake(ws, c);
                continue;
            }
            st_wsfan_item_t it = {.conn = c,
                                  .frames = frames,
                                  .fd = lws_get_socket_fd(c->wsi),
                                  .off = off,
                                  .len = ws->arena.len - off};
            st_vec_push(&ws->items, it);
        }
        size_t k = ws->items.n;
        if (k) st__ws_fan_send(ws->fan, ws->items.v, k, ws->arena.data);
        for (size_t j = 0; j < k; j++)
            st__fan_done(ws, &ws->items.v[j]);
    }
}

void st__ws_queue_clear(st_ws_t *ws, st_wsconn_t *c)
{
    st__unwait(c);
    if (st_list_linked(&c->slink)) st_list_unlink(&c->slink);
    if (st_list_linked(&c->llink)) st_list_unlink(&c->llink);
    c->rel_bytes = 0;
    for (uint32_t i = 0; i < c->qlen; i++)
        st__ent_free(st__q_at(c, i));
    free(c->q);
    c->q = NULL;
    c->qcap = c->qhead = c->qlen = c->counted = 0;
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
        st__wake(ws, c); /* what waited behind a rolled-back frame may leave now */
        /* A replay paused behind rolled-back frames fetches its next page from the writable
         * callback (st__ws_on_writable), once the rollback is over: nothing else would ask. */
        bool replaying = false;
        for (ST_LIST_EACH(sl, sn, &c->subs))
            replaying |= ST_LIST_ITEM(sl, st_wssub_t, link)->replaying;
        if (replaying && c->wsi && !c->cut) lws_callback_on_writable(c->wsi);
        st__ws_fence_failed(ws, c, first);
    }
}

/* Writes the streams that the ready array holds: up to ST__WS_FAN_MIN of them one by one
 * (st__send_now); more, and their sends are shared with the sender thread (st__fan_out). */
static void st__send_ready(st_ws_t *ws)
{
    if (ws->ready.n >= ST__WS_FAN_MIN) {
        st__fan_out(ws, ws->ready.v, ws->ready.n);
    } else {
        for (size_t i = 0; i < ws->ready.n; i++)
            st__send_now(ws, ws->ready.v[i]);
    }
    ws->ready.n = 0;
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
    st__send_ready(ws);
}

static void st__queue_on_turn(uv_check_t *h)
{
    st__turn(h->data, ST__WS_TURN_STREAMS);
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
