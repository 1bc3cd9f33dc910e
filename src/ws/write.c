/* SPDX-License-Identifier: MIT */
/*
 * How a stream's frames leave once queue.c lets them: framed bytes handed to lws one budget per
 * write (st__flush), from the end of a loop turn (st__ws_send_ready) or the writable callback;
 * a large turn's sends shared with fan.c's sender thread; keep-alive pings; and the ends of a
 * stream, a cut-off's close frame and a failure's (RFC 6455 §7.1.7). queue.c decides what may
 * leave and when; nothing here holds frames of its own.
 */
#include "internal.h"

#include <errno.h>
#include <libwebsockets.h>
#include <stdint.h>
#include <string.h>

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
        size_t frames = st__ws_frame(ws, c, out);
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
    st__ws_wake(ws, c); /* frames that may leave go at the end of the turn */
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
    st__ws_wake(ws, c);
    return 0;
}

/* A stream's turn came (st__queue_on_turn): its frames are written right away rather than after a
 * writable callback, which would cost two epoll_ctl calls and a poll event per stream (a third
 * of the CPU of a 1,000-subscriber fan-out). A stream with a write still buffered by lws
 * continues from its writable callback; one with more than its budget to send comes back at the
 * end of the list (st__ws_wake). */
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
    st__ws_wake(ws, c);
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
    st_metric_add(ws->m_fan_calls, it->calls);
    if (r < 0 && !later) goto broken;
    if (took < it->len) {
        st_metric_add(ws->m_fan_short, 1);
        if (st__write(ws, c, ws->arena.data + it->off + took, it->len - took) != 0) goto broken;
    }
    st_metric_add(ws->m_sent, (double)it->frames);
    st_metric_add(it->by_sender ? ws->m_fan_sender : ws->m_fan_loop, 1);
    st__ws_replay_more(ws, c);
    st__ws_wake(ws, c);
    return;
broken:
    c->broken = true;
    lws_callback_on_writable(c->wsi);
}

/* A turn made n streams ready at once: every stream that may take a plain send() has
 * its frames framed on the loop into one arena (only frames whose batch is durable, as
 * st__flush), the loop sends them in io_uring batches, with the sender thread from ST__WS_FAN_MIN
 * streams (fan.c), and each stream is
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
            size_t frames = st__ws_frame(ws, c, &ws->arena);
            if (!frames) {
                st__ws_replay_more(ws, c);
                st__ws_wake(ws, c);
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
        if (k) st__ws_fan_send(ws->fan, ws->items.v, k, ws->arena.data, n >= ST__WS_FAN_MIN);
        for (size_t j = 0; j < k; j++)
            st__fan_done(ws, &ws->items.v[j]);
    }
}

/* Writes the streams that the ready array holds: from ST__WS_FAN_MIN of them their sends are
 * shared with the sender thread (st__fan_out); from ST__WS_BATCH_MIN, where the loop has an
 * io_uring ring, they go in the loop's batches alone (one system call for up to 16 streams, no
 * wake-up of the thread); fewer, one by one (st__send_now). */
void st__ws_send_ready(st_ws_t *ws)
{
    size_t n = ws->ready.n;
    if (n >= ST__WS_FAN_MIN || (n >= ST__WS_BATCH_MIN && st__ws_fan_batched(ws->fan))) {
        st__fan_out(ws, ws->ready.v, n);
    } else {
        for (size_t i = 0; i < n; i++)
            st__send_now(ws, ws->ready.v[i]);
    }
    ws->ready.n = 0;
}
