/* SPDX-License-Identifier: MIT */
/*
 * libwebsockets on strata's libuv loop: the context, connection lifecycle and adoption of
 * sockets upgraded by the HTTP side. What streams carry lives in topics.c, how frames wait for
 * durability and leave in queue.c. Only this module includes libwebsockets.h.
 */
#include "internal.h"

#include <libwebsockets.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static st_ws_t *st__ws(struct lws *wsi)
{
    return lws_context_user(lws_get_context(wsi));
}

static void st__conn_free(st_ws_t *ws, st_wsconn_t *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else if (ws->conns == c)
        ws->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    st__ws_unsubscribe_all(ws, c);
    st__ws_queue_clear(ws, c);
    ws->nconns--;
    free(c->subject);
    st_buf_free(&c->in);
    st_metric_add(ws->m_conns, -1);
}

static void st__established(st_ws_t *ws, struct lws *wsi, st_wsconn_t *c)
{
    memset(c, 0, sizeof *c);
    c->wsi = wsi;
    /* lws services the read-ahead inside st_ws_adopt, so the subject is usually still in
     * ws->adopting; a handshake completed later finds it on the wsi instead */
    c->subject = lws_get_opaque_user_data(wsi);
    lws_set_opaque_user_data(wsi, NULL);
    if (!c->subject)
        c->subject =
            st_strndup(ws->adopting ? ws->adopting : "", ws->adopting ? strlen(ws->adopting) : 0);
    c->next = ws->conns;
    if (ws->conns) ws->conns->prev = c;
    ws->conns = c;
    ws->nconns++;
    st_metric_add(ws->m_conns, 1);
}

static int st__receive(st_ws_t *ws, struct lws *wsi, st_wsconn_t *c, const void *in, size_t len)
{
    if (lws_frame_is_binary(wsi)) {
        if (lws_is_final_fragment(wsi))
            st__ws_send_error(ws, c, NULL, "invalid_argument", "binary frames are not used");
        return 0;
    }
    if (c->in.len + len > ST__WS_MAX_IN) {
        lws_close_reason(wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE,
                         (unsigned char *)"message too large", 17);
        return -1;
    }
    st_buf_append(&c->in, in, len);
    if (lws_is_final_fragment(wsi) && !lws_remaining_packet_payload(wsi)) {
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
        return st__receive(st__ws(wsi), wsi, c, in, len);
    case LWS_CALLBACK_SERVER_WRITEABLE:
        return st__ws_on_writable(st__ws(wsi), c);
    case LWS_CALLBACK_CLOSED:
        st__conn_free(st__ws(wsi), c);
        return 0;
    case LWS_CALLBACK_WSI_DESTROY:
        /* a connection that never became a stream still owns its subject */
        free(lws_get_opaque_user_data(wsi));
        lws_set_opaque_user_data(wsi, NULL);
        return 0;
    default:
        return 0;
    }
}

/* rx_buffer_size is what lws allocates per connection for reading; client frames are small
 * (subscribe requests), larger ones arrive in pieces and are joined in st__receive. */
static const struct lws_protocols st__protocols[] = {
    {"strata", st__callback, sizeof(st_wsconn_t), 1024, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

/* Ping after 30 s of silence, hang up after 90 s (SPEC §3). */
static const lws_retry_bo_t st__keepalive = {.secs_since_valid_ping = 30,
                                             .secs_since_valid_hangup = 90};

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
    lws_set_log_level(LLL_ERR | LLL_WARN, st__lws_log);
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    void *loops[] = {loop};
    info.options = LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_EXPLICIT_VHOSTS;
    info.foreign_loops = loops;
    info.port = CONTEXT_PORT_NO_LISTEN_SERVER;
    info.protocols = st__protocols;
    info.user = ws;
    info.retry_and_idle_policy = &st__keepalive;
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
    st__ws_topics_init(ws);
    st__ws_listen(ws);
    *out = ws;
    return ST_OK;
}

void st_ws_close(st_ws_t *ws)
{
    lws_context_destroy(ws->ctx); /* starts closing its handles on our loop */
}

void st_ws_free(st_ws_t *ws)
{
    /* With a foreign loop, libwebsockets 4.1 frees its context only when destroy is called
     * again after the loop has run its close callbacks. */
    lws_context_destroy(ws->ctx);
    st__ws_topics_free(ws);
    st_buf_free(&ws->out);
    free(ws);
}

int st_ws_adopt(st_ws_t *ws, int fd, const char *buf, size_t len, const char *subject)
{
    if (len > ST_WS_MAX_HANDOFF) {
        close(fd);
        return ST_EHEADERS;
    }
    ws->adopting = subject ? subject : "";
    struct lws *wsi = lws_adopt_socket_vhost_readbuf(ws->vh, fd, buf, len);
    ws->adopting = NULL;
    if (!wsi) return ST_EUNAVAIL; /* lws has closed fd */
    st_wsconn_t *c = lws_wsi_user(wsi);
    if (!c || c->wsi != wsi) /* not established yet: keep the subject on the wsi */
        lws_set_opaque_user_data(wsi,
                                 st_strndup(subject ? subject : "", subject ? strlen(subject) : 0));
    return ST_OK;
}

size_t st_ws_connections(const st_ws_t *ws)
{
    return ws ? ws->nconns : 0;
}
