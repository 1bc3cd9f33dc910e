/* SPDX-License-Identifier: MIT */
/*
 * libwebsockets on strata's libuv loop: the context, connection lifecycle and adoption of
 * sockets upgraded by the HTTP side. What streams ask for lives in subscribe.c and replay.c, what
 * they carry in topics.c, how frames wait for durability in queue.c and how they leave in
 * write.c. Only this module includes libwebsockets.h.
 */
#include "internal.h"

#include <libwebsockets.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The longest a stream on a revoked token waits for its queue to empty (st__ws_revoke). */
#define ST__WS_REVOKE_GRACE_MS 2000

static st_ws_t *st__ws(struct lws *wsi)
{
    return lws_context_user(lws_get_context(wsi));
}

/* What the HTTP side learnt from the upgrade and the socket's fd (the key of its read-side check,
 * rx.c), kept on the wsi for its lifetime: lws has closed the socket by LWS_CALLBACK_WSI_DESTROY,
 * which must still stop the check of a connection that never became a stream. */
typedef struct {
    st_http_token_times_t token;
    int fd;
    bool admin;
    char subject[];
} st_wsauth_t;

static st_wsauth_t *st__auth_new(int fd, const char *subject, const st_http_token_times_t *t,
                                 bool admin)
{
    size_t n = subject ? strlen(subject) : 0;
    st_wsauth_t *a = st_malloc(sizeof *a + n + 1);
    a->token = t ? *t : (st_http_token_times_t){0};
    a->fd = fd;
    a->admin = admin;
    if (n) memcpy(a->subject, subject, n);
    a->subject[n] = '\0';
    return a;
}

/* Only a connection that became a stream was counted (a failed handshake also ends in
 * LWS_CALLBACK_CLOSED, with zeroed user memory): only that one is uncounted. */
static void st__ws_conn_free(st_ws_t *ws, st_wsconn_t *c)
{
    if (!c || !c->established) return;
    c->established = false;
    st_list_unlink(&c->link);
    st__ws_unsubscribe_all(ws, c);
    st__ws_queue_clear(ws, c);
    ws->nconns--;
    st__ws_rx_detach(c->fd);
    free(c->subject);
    st_buf_free(&c->in);
    st_metric_add(ws->m_conns, -1);
}

static void st__established(st_ws_t *ws, struct lws *wsi, st_wsconn_t *c)
{
    memset(c, 0, sizeof *c);
    c->wsi = wsi;
    c->established = true;
    /* lws services the read-ahead inside st_ws_adopt, so the token's subject is usually still in
     * ws->adopting; a handshake completed later finds it on the wsi instead */
    const st_wsauth_t *a = lws_get_opaque_user_data(wsi);
    const st_wsauth_t *from = a ? a : ws->adopting;
    c->subject = st_strndup(from ? from->subject : "", from ? strlen(from->subject) : 0);
    c->token = from ? from->token : (st_http_token_times_t){0};
    c->admin = from && from->admin;
    c->fd = from ? from->fd : -1;
    c->rx_ms = uv_now(ws->loop); /* the handshake was the last thing heard */
    st_list_init(&c->subs);
    st_list_push_front(&ws->conns, &c->link);
    ws->nconns++;
    st_metric_add(ws->m_conns, 1);
    /* a bad frame behind the upgrade request fails the stream before anything is served */
    const char *bad = st__ws_rx_attach(c->fd, c);
    if (bad) st__ws_fail(ws, c, st__ws_rx_code(bad), bad);
}

static int st__ws_receive(st_ws_t *ws, struct lws *wsi, st_wsconn_t *c, const void *in, size_t len)
{
    if (c->cut) return 0; /* ending: nothing more is served */
    if (lws_frame_is_binary(wsi)) {
        if (lws_is_final_fragment(wsi))
            st__ws_send_error(ws, c, NULL, "invalid_argument", "binary frames are not used");
        return 0;
    }
    if (c->in.len + len > ST__WS_MAX_IN) {
        st__ws_fail(ws, c, ST__WS_CLOSE_TOO_BIG, "message too large");
        return 0;
    }
    st_buf_append(&c->in, in, len);
    if (lws_is_final_fragment(wsi) && !lws_remaining_packet_payload(wsi)) {
        if (!st_utf8_valid(c->in.data, c->in.len)) {
            /* lws checks too (LWS_SERVER_OPTION_VALIDATE_UTF8); this covers joined fragments */
            st__ws_fail(ws, c, ST__WS_CLOSE_INVALID, "invalid UTF-8");
            return 0;
        }
        st__ws_on_message(ws, c, c->in.data, c->in.len);
        st_buf_reset(&c->in);
    }
    return 0;
}

static int st__callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                        size_t len)
{
    st_wsconn_t *c = user;
    switch (reason) {
    case LWS_CALLBACK_ESTABLISHED:
        st__established(st__ws(wsi), wsi, c);
        return 0;
    case LWS_CALLBACK_RECEIVE:
        return st__ws_receive(st__ws(wsi), wsi, c, in, len);
    case LWS_CALLBACK_SERVER_WRITEABLE:
        return st__ws_on_writable(st__ws(wsi), c);
    case LWS_CALLBACK_CLOSED:
        st__ws_conn_free(st__ws(wsi), c);
        return 0;
    case LWS_CALLBACK_WSI_DESTROY: {
        st_wsauth_t *a = lws_get_opaque_user_data(wsi);
        if (a) st__ws_rx_detach(a->fd); /* a no-op if its stream's close did it */
        free(a);
        lws_set_opaque_user_data(wsi, NULL);
        return 0;
    }
    default:
        return 0;
    }
}

/* Keep-alive (SPEC §3: ping every 30 s, a peer silent for 90 s is closed), strata's own rather
 * than lws's "validity" timers: lws 4.1 keeps one timer per connection in a single list sorted by
 * insertion from its head, so opening a stream and every pong re-sorted it, a walk over every
 * stream (opening 10,000 streams took 3.3 s, most of it there). Here, rx.c stamps c->rx_ms with
 * the loop's cached time on every read of the stream's socket (a pong, a ping, a frame: anything
 * heard), and this tick walks the streams once: silent for ping_ms since the last read and the
 * last ping, a stream gets a ping (sent from its writable callback, between whole frames,
 * st__ws_on_writable); silent for 3 x ping_ms by the next tick, it is closed now with 1001
 * "going away", so a vanished peer is closed, and leaves presence, within the 90 s rather than a
 * tick after them: the server ends a stream that is not broken (1002) nor against a policy (1008,
 * which clients here read as "slow consumer" or "token expired"), and a client reconnects (with
 * `after`) as it does when a server goes away. The close frame is written and the socket closed at
 * once (st__ws_fail: a peer silent that long is not waited on for its own close frame); should it
 * not even take the close frame, the socket is closed after ST__WS_CLOSE_GRACE seconds. */
static void st__keepalive(st_ws_t *ws, st_wsconn_t *c, uint64_t now)
{
    /* rx_ms is never ahead of the tick's time (the loop's clock is monotonic and a read is
     * stamped after it); should it ever be, the stream counts as just heard from, not closed */
    if (now > c->rx_ms && now - c->rx_ms + ws->tick_ms >= 3 * ws->ping_ms) {
        st__ws_fail(ws, c, ST__WS_CLOSE_GOING_AWAY, "ping timeout");
        return;
    }
    uint64_t last = c->ping_ms > c->rx_ms ? c->ping_ms : c->rx_ms;
    if (c->ping_due || now < last + ws->ping_ms) return;
    c->ping_due = true;
    c->ping_ms = now;
    lws_callback_on_writable(c->wsi);
}

/* Every tick: the keep-alive of every stream, and a token that expired while its stream was open
 * ends the stream (SPEC §3) with 1008 "token expired", the way a slow consumer is cut off
 * (write.c): the close frame goes out from the writable callback, ahead of what was still
 * queued. Expired means what it means for a request (st_http_token_check, with --jwt-leeway):
 * a token the handshake took within the leeway keeps its stream until exp + leeway, not
 * beyond, and is cut within a tick of it. A few loads per stream. */
static void st__ws_on_tick(uv_timer_t *t)
{
    st_ws_t *ws = t->data;
    uint64_t now = uv_now(ws->loop);
    int64_t now_us = st_now_us();
    int64_t leeway_us = (int64_t)ws->app->cfg->jwt_leeway * 1000000;
    for (ST_LIST_EACH(l, n, &ws->conns)) {
        st_wsconn_t *c = ST_LIST_ITEM(l, st_wsconn_t, link);
        const char *why;
        if (c->cut) continue; /* ending already */
        if (c->token.exp_us && st_http_token_check(&c->token, now_us, leeway_us, &why) != ST_OK)
            st__ws_cut(ws, c, "token expired");
        else if (c->revoked && c->revoke_wait <= st_store_durable_id(ws->app->store) &&
                 (!c->qlen || now - c->revoke_ms >= ST__WS_REVOKE_GRACE_MS))
            st__ws_cut(ws, c, "token revoked");
        else
            st__keepalive(ws, c, now);
    }
    st__ws_ring_tick(ws); /* the heap back after a burst */
}

/* A user's erasure revokes the tokens issued to it before (http/auth.c refuses them 401
 * token_revoked): a stream opened with one ends too, the same rule applied to what the handshake
 * kept (iat before the erasure, or none). Not at once: the erasure ended the stream's
 * subscriptions about the user with error frames (topics.c), and a cut drops what is queued, so
 * the tick cuts it once the erasure is durable (a close reports state like an answer does) and
 * its queue is out, or ST__WS_REVOKE_GRACE_MS after the erasure if it never empties (a stream
 * with a busy subscription always has a frame waiting for the next batch). One walk over every
 * stream: erasures are rare. Only with auth on (a subject; "" is nobody's). */
void st__ws_revoke(st_ws_t *ws, const char *user, size_t ul, int64_t erased_us, uint64_t wait)
{
    for (ST_LIST_EACH(l, n, &ws->conns)) {
        st_wsconn_t *c = ST_LIST_ITEM(l, st_wsconn_t, link);
        if (ul && c->subject && strlen(c->subject) == ul && memcmp(c->subject, user, ul) == 0 &&
            !(c->token.iat_us && c->token.iat_us >= erased_us)) {
            if (!c->revoked) c->revoke_ms = uv_now(ws->loop);
            c->revoked = true;
            if (wait > c->revoke_wait) c->revoke_wait = wait;
        }
    }
}

/* rx_buffer_size is what lws allocates per connection for reading; client frames are small
 * (subscribe requests), larger ones arrive in pieces and are joined in st__ws_receive.
 * tx_packet_size is how much one send() may carry: left at 0 it would be rx_buffer_size, and a
 * flush of several frames (write.c) would be cut into 1 KiB sends, each a partial write that lws
 * buffers and finishes from a writable callback (two epoll_ctl calls and a loop turn). */
static const struct lws_protocols st__protocols[] = {
    {"strata", st__callback, sizeof(st_wsconn_t), 256, 0, NULL, ST__WS_MAX_QUEUED},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

/* lws's own keep-alive ("validity") off: strata's is st__ws_on_tick. Leaving the policy unset would
 * not do: lws would use its default one, which pings after 300 s. */
static const lws_retry_bo_t st__no_validity = {.secs_since_valid_ping = 0,
                                               .secs_since_valid_hangup = 0};

static void st__lws_log(int level, const char *line)
{
    /* lws reports a routine adoption at error level; keep real errors visible */
    if (level == LLL_ERR && !strstr(line, "calling service"))
        st_error("ws: %.*s", (int)strcspn(line, "\n"), line);
    else
        st_debug("ws: %.*s", (int)strcspn(line, "\n"), line);
}

int st_ws_open(st_ws_t **out, uv_loop_t *loop, st_app_t *app)
{
    st_ws_t *ws = st_calloc(1, sizeof *ws);
    ws->loop = loop;
    ws->app = app;
    st_list_init(&ws->conns);
    st_list_init(&ws->waiting);
    lws_set_log_level(LLL_ERR | LLL_WARN, st__lws_log);
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    void *loops[] = {loop};
    info.options = LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_EXPLICIT_VHOSTS |
                   LWS_SERVER_OPTION_VALIDATE_UTF8;
    info.foreign_loops = loops;
    info.port = CONTEXT_PORT_NO_LISTEN_SERVER;
    info.protocols = st__protocols;
    info.user = ws;
    info.retry_and_idle_policy = &st__no_validity;
    ws->ctx = lws_create_context(&info);
    if (ws->ctx) ws->vh = lws_create_vhost(ws->ctx, &info);
    if (!ws->ctx || !ws->vh) {
        st_error("ws: cannot start libwebsockets on the loop");
        if (ws->ctx) lws_context_destroy(ws->ctx);
        free(ws);
        return ST_EINTERNAL;
    }
    ws->m_conns = st_metrics_gauge("strata_ws_connections", "Open WebSocket streams", "");
    ws->m_subs = st_metrics_gauge("strata_ws_subscribers", "Active subscriptions", "");
    ws->m_slow = st_metrics_counter("strata_ws_slow_consumer_drops_total",
                                    "Streams closed 1008 for not reading", "");
    ws->m_sent = st_metrics_counter("strata_ws_frames_sent_total", "Frames sent", "");
    static const char fan_help[] =
        "Stream writes of large fan-outs (shared by the loop and a sender thread), by thread";
    ws->m_fan_loop =
        st_metrics_counter("strata_ws_fanout_writes_total", fan_help, "thread=\"loop\"");
    ws->m_fan_sender =
        st_metrics_counter("strata_ws_fanout_writes_total", fan_help, "thread=\"sender\"");
    ws->m_fan_short = st_metrics_counter(
        "strata_ws_fanout_short_writes_total",
        "Fan-out writes a socket took only part of; libwebsockets sends the rest", "");
    ws->m_fan_calls = st_metrics_counter(
        "strata_ws_fanout_syscalls_total",
        "System calls that carried fan-out writes: one per io_uring batch, or one per send()", "");
    ws->m_ring =
        st_metrics_gauge("strata_ws_queue_capacity_bytes",
                         "Bytes of the streams' outbound queues (their rings), in use or not", "");
    ws->m_trims = st_metrics_counter("strata_ws_heap_trims_total",
                                     "Free heap pages given back to the system after a burst of "
                                     "frames drained (malloc_trim; glibc's malloc only: jemalloc "
                                     "gives them back from its own thread)",
                                     "");
    ws->m_trim = st_metrics_counter("strata_ws_heap_trim_seconds_total",
                                    "Time the loop spent in those heap trims", "");
    st__ws_topics_init(ws);
    st__ws_typing_open(ws);
    st__ws_presence_open(ws);
    st__ws_presout_open(ws);
    st__ws_listen(ws);
    st__ws_rx_init(ws);
    ws->fan = st__ws_fan_start();
    st_metric_set(st_metrics_gauge("strata_ws_fanout_io_uring",
                                   "1 when the loop sends fan-outs in io_uring batches, 0 when "
                                   "with one send() each (io_uring unavailable here)",
                                   ""),
                  st__ws_fan_batched(ws->fan));
    /* a tick of a quarter of the ping interval, at most 1 s: a ping leaves within 1.25 x the
     * interval of silence, a silent stream is closed after between 3 x the interval less a tick
     * and 3 x the interval (a healthy peer answers the ping within the first interval) */
    ws->ping_ms = app->cfg->ws_ping_seconds * 1000;
    ws->tick_ms = ws->ping_ms / 4 < 1000 ? ws->ping_ms / 4 : 1000;
    uv_timer_init(loop, &ws->tick);
    ws->tick.data = ws;
    uv_timer_start(&ws->tick, st__ws_on_tick, ws->tick_ms, ws->tick_ms);
    *out = ws;
    return ST_OK;
}

void st_ws_close(st_ws_t *ws)
{
    st__ws_topics_detach(ws); /* before the modules it observes close */
    st__ws_presence_close(ws);
    st__ws_presout_close(ws);
    st__ws_typing_close(ws);
    st__ws_fan_stop(ws->fan); /* a fan-out from now on is sent from the loop alone */
    ws->fan = NULL;
    uv_close((uv_handle_t *)&ws->tick, NULL);
    st__ws_turn_close(ws);
    lws_context_destroy(ws->ctx); /* starts closing its handles on our loop */
}

void st_ws_free(st_ws_t *ws)
{
    st_store_unlisten(ws->app->store, &ws->listener);
    /* With a foreign loop, libwebsockets 4.1 frees its context only when destroy is called
     * again after the loop has run its close callbacks. */
    lws_context_destroy(ws->ctx);
    st__ws_topics_free(ws);
    st__ws_rx_free();
    st_buf_free(&ws->out);
    st_buf_free(&ws->arena);
    st_vec_free(&ws->ready);
    st_vec_free(&ws->items);
    free(ws);
}

int st_ws_adopt(st_ws_t *ws, int fd, const char *buf, size_t len, const char *subject,
                const st_http_token_times_t *times, bool admin)
{
    if (len > ST_WS_MAX_HANDOFF) {
        close(fd);
        return ST_EHEADERS;
    }
    st_wsauth_t *a = st__auth_new(fd, subject, times, admin);
    st__ws_rx_adopt(fd, buf, &len); /* lws is not given a bad frame that came behind the head */
    ws->adopting = a;
    struct lws *wsi = lws_adopt_socket_vhost_readbuf(ws->vh, fd, buf, len);
    ws->adopting = NULL;
    if (wsi) {
        lws_set_opaque_user_data(wsi, a);
        return ST_OK;
    }
    st__ws_rx_detach(fd); /* without a wsi, lws has closed fd */
    free(a);
    return ST_EUNAVAIL;
}

size_t st_ws_connections(const st_ws_t *ws)
{
    return ws ? ws->nconns : 0;
}

size_t st_ws_subscriptions(const st_ws_t *ws)
{
    return ws ? ws->nsubs : 0;
}
