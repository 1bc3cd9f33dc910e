/* SPDX-License-Identifier: MIT */
/*
 * Connections. Each connection keeps its responses in request order (pipelining); a response
 * that shows staged data waits in a slot until its batch is durable, and everything ready at the
 * head of the queue goes out in one write. Limits: connections, pipelined requests, head and body
 * size, time to send a request (slowloris), keep-alive idle time, and output a peer has not taken:
 * past ST__OUT_HIGH bytes the connection parses and reads nothing more until it drains, and a peer
 * that takes none of its answers for --idle-timeout is closed. Whatever was received before a
 * half-close is answered.
 *
 * Parking: a request whose handler needs cold data not in memory is copied and parked (its
 * connection parses and reads nothing more meanwhile, so later pipelined answers stay behind
 * it); the cold cache fetches the data on the worker pool and the request is dispatched again.
 * Every other connection is served as usual in the meantime.
 */
#include "internal.h"
#include "strata/chat.h"
#include "strata/ws.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ST__OUT_HIGH      (1u << 20)   /* unsent output that stops parsing and reading */
#define ST__OUT_LOW       (256u << 10) /* ... and the level it must drain to before resuming */
#define ST__STOP_DEADLINE 10000        /* ms a graceful stop waits for peers to take answers */

typedef struct st_slot {
    struct st_slot *next;
    uint64_t wait;
    char *data;
    size_t len;
    int status;
    int route;
    bool close;
    uint64_t started_ns;
} st_slot_t;

typedef struct st_conn st_conn_t;
struct st_conn {
    uv_tcp_t tcp;
    st_server_t *srv;
    st_http_parser_t *parser;
    st_arena_t arena;
    st_slot_t *head, *tail;
    size_t nslots;
    st_buf_t out;   /* ready bytes not yet handed to the kernel */
    st_buf_t stash; /* bytes read but not parsed yet: parsing paused for backpressure */
    bool writing;   /* a uv_write is in flight */
    size_t wbytes;  /* bytes of that write */
    size_t wqueue;  /* the write queue size last seen by the sweep */
    bool reading, closing;
    bool close_when_done; /* parse nothing more; close once everything queued is written */
    bool eof;             /* the peer half-closed: answer what was received, then close */
    uint64_t last_active_ms, req_started_ms, write_progress_ms;
    int feed_requests;      /* requests parsed from the current feed */
    bool upgrade;           /* hand the socket to the stream module after this feed */
    st_buf_t handoff;       /* the upgrade request as libwebsockets will see it */
    const char *ws_subject; /* arena memory, valid until the hand-off */
    int64_t ws_exp_us;      /* the token's expiry (0: none) */
    st_conn_t *prev, *next;
    st_conn_t *pprev, *pnext; /* in srv->pending while responses wait for a durable batch */
    bool pending;
    st_http_request_t *parked; /* owned copy of a request waiting for cold data */
    st_coldwait_t *cold_wait;  /* what it waits for (pins the data until it has run) */
};

typedef struct {
    uv_write_t req;
    st_conn_t *conn;
    char *data;
} st_write_t;

struct st_server {
    uv_loop_t *loop;
    st_app_t *app;
    uv_tcp_t listener;
    uv_timer_t sweep;
    st_conn_t *conns;
    size_t nconns;
    st_conn_t *pending; /* connections with responses waiting: all a durable batch must visit */
    st_store_listener_t store_l;
    bool stopping;
    uint64_t stop_deadline_ms;
    void (*done)(void *arg);
    void *done_arg;
    int port;
    int open_handles;
    st_metric_t *m_conns, *m_rejected, *m_idem_expired;
    st_metric_t **m_req; /* (nroutes + 1) x 600, lazily created */
    st_metric_t **m_lat; /* nroutes + 1 */
    char readbuf[64 * 1024];
};

static void st__conn_flush(st_conn_t *c);
static void st__conn_close(st_conn_t *c);
static void st__maybe_done(st_server_t *srv);
static void st__on_listener_closed(uv_handle_t *h);
static void st__conn_read_start(st_conn_t *c);
static void st__read_stop(st_conn_t *c);

static uint64_t st__now_ms(const st_server_t *srv)
{
    return uv_now(srv->loop);
}

/* ---- metrics per route ---- */

static void st__count(st_server_t *srv, int route, int status, uint64_t started_ns)
{
    size_t r = route < 0 ? st_nroutes : (size_t)route;
    if (status < 100 || status > 599) status = 500;
    st_metric_t **m = &srv->m_req[r * 600 + (size_t)status];
    const char *label = route < 0 ? "unmatched" : st_routes[route].pattern;
    const char *method = route < 0                                ? "ANY"
                         : st_routes[route].method == ST_HTTP_GET ? "GET"
                                                                  : "POST";
    if (!*m) {
        char l[320];
        snprintf(l, sizeof l, "route=\"%s %s\",status=\"%d\"", method, label, status);
        *m = st_metrics_counter("strata_http_requests_total", "HTTP requests by route and status",
                                l);
    }
    st_metric_add(*m, 1);
    if (!srv->m_lat[r]) {
        char l[320];
        snprintf(l, sizeof l, "route=\"%s %s\"", method, label);
        srv->m_lat[r] =
            st_metrics_histogram("strata_http_request_seconds",
                                 "Time from a whole request to its response, incl. commit", l,
                                 st_metrics_latency_bounds, st_metrics_latency_nbounds);
    }
    st_metric_observe(srv->m_lat[r], (double)(st_mono_ns() - started_ns) / 1e9);
}

/* ---- writing ---- */

/* Output the peer has not taken yet: queued here plus the write in flight. */
static size_t st__backlog(const st_conn_t *c)
{
    return c->out.len + (c->writing ? c->wbytes : 0);
}

static void st__on_write(uv_write_t *req, int status)
{
    st_write_t *w = (st_write_t *)req;
    st_conn_t *c = w->conn;
    free(w->data);
    free(w);
    c->writing = false;
    c->wbytes = 0;
    if (status < 0) {
        st__conn_close(c);
        return;
    }
    c->last_active_ms = st__now_ms(c->srv);
    st__conn_flush(c);
}

static void st__conn_write(st_conn_t *c)
{
    if (c->writing || c->closing || c->out.len == 0) return;
    uv_buf_t b = uv_buf_init(c->out.data, (unsigned)c->out.len);
    int n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    if (n == (int)c->out.len) {
        st_buf_reset(&c->out);
        if (c->out.cap > ST__OUT_HIGH) st_buf_free(&c->out);
        return;
    }
    if (n < 0 && n != UV_EAGAIN) {
        st__conn_close(c);
        return;
    }
    size_t done = n > 0 ? (size_t)n : 0;
    st_write_t *w = st_malloc(sizeof *w);
    w->conn = c;
    size_t len;
    w->data = st_buf_steal(&c->out, &len);
    b = uv_buf_init(w->data + done, (unsigned)(len - done));
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, st__on_write) != 0) {
        free(w->data);
        free(w);
        st__conn_close(c);
        return;
    }
    c->writing = true;
    c->wbytes = len - done;
    c->wqueue = c->wbytes;
    c->write_progress_ms = st__now_ms(c->srv);
}

/* Keeps c on srv->pending exactly while it holds responses, so that a durable batch visits
 * only the connections waiting for one (not every idle keep-alive connection). */
static void st__conn_pending(st_conn_t *c)
{
    st_server_t *srv = c->srv;
    bool want = c->head != NULL && !c->closing;
    if (want == c->pending) return;
    if (want) {
        c->pprev = NULL;
        c->pnext = srv->pending;
        if (srv->pending) srv->pending->pprev = c;
        srv->pending = c;
    } else {
        if (c->pprev)
            c->pprev->pnext = c->pnext;
        else
            srv->pending = c->pnext;
        if (c->pnext) c->pnext->pprev = c->pprev;
        c->pprev = c->pnext = NULL;
    }
    c->pending = want;
}

/* Moves every response at the head whose batch is durable into the output. */
static void st__conn_release(st_conn_t *c)
{
    st_server_t *srv = c->srv;
    uint64_t durable = st_store_durable_id(srv->app->store);
    while (c->head && c->head->wait <= durable) {
        st_slot_t *s = c->head;
        c->head = s->next;
        if (!c->head) c->tail = NULL;
        c->nslots--;
        st_buf_append(&c->out, s->data, s->len);
        st__count(srv, s->route, s->status, s->started_ns);
        free(s->data);
        free(s);
    }
    st__conn_pending(c);
}

/* Requests may be parsed (from the stash or the socket) while the peer keeps up. */
static bool st__may_parse(const st_conn_t *c)
{
    const st_server_t *srv = c->srv;
    return !c->close_when_done && !srv->stopping && !c->parked &&
           c->nslots < srv->app->cfg->max_pipeline / 2 + 1 && st__backlog(c) < ST__OUT_LOW;
}

static void st__conn_feed(st_conn_t *c, const char *data, size_t len, bool from_stash);

/* Sends what is ready; closes once a closing connection has nothing left; and resumes parsing
 * (the stash first, then the socket) when the backlog has drained. */
static void st__conn_flush(st_conn_t *c)
{
    st_server_t *srv = c->srv;
    for (;;) {
        if (c->closing) return;
        st__conn_release(c);
        st__conn_write(c);
        if (c->closing) return;
        if ((c->close_when_done || (c->eof && c->stash.len == 0)) && !c->head && !c->parked &&
            !c->writing && c->out.len == 0) {
            st__conn_close(c);
            return;
        }
        if (!st__may_parse(c)) break;
        if (c->stash.len) {
            st__conn_feed(c, c->stash.data, c->stash.len, true);
            continue;
        }
        if (!c->reading && !c->eof) st__conn_read_start(c);
        break;
    }
    if (srv->stopping) st__maybe_done(srv);
}

/* Queues one whole response (in order). data is copied. */
static void st__conn_respond(st_conn_t *c, const char *data, size_t len, uint64_t wait, int status,
                             int route, bool close, uint64_t started_ns)
{
    if (!c->head && wait <= st_store_durable_id(c->srv->app->store)) {
        st_buf_append(&c->out, data, len);
        st__count(c->srv, route, status, started_ns);
        return;
    }
    st_slot_t *s = st_malloc(sizeof *s);
    *s = (st_slot_t){NULL, wait, st_strndup(data, len), len, status, route, close, started_ns};
    if (c->tail)
        c->tail->next = s;
    else
        c->head = s;
    c->tail = s;
    c->nslots++;
    st__conn_pending(c);
}

/* Answers with an error and closes after it: nothing after it is parsed. */
static void st__conn_error(st_conn_t *c, int err, const char *msg, const char *headers)
{
    st_buf_t body = {0}, resp = {0};
    st_buf_printf(&body, "{\"error\":{\"code\":\"%s\",\"message\":", st_err_code(err));
    st_buf_append_json_str(&body, msg, strlen(msg));
    st_buf_puts(&body, "}}");
    st_http_write_response(&resp, st_err_status(err), NULL, headers, body.data, body.len, true);
    st__conn_respond(c, resp.data, resp.len, 0, st_err_status(err), -1, true, st_mono_ns());
    c->close_when_done = true;
    st_buf_free(&body);
    st_buf_free(&resp);
}

/* ---- reading ---- */

/* A WebSocket upgrade: GET /v1/stream with nothing of ours still owed on the connection, a
 * well-formed handshake (RFC 6455 §4.2.1) and, with auth on, a valid token. Refused ones get
 * their answer here and the connection closes; libwebsockets only ever sees good ones. */
static void st__on_upgrade(st_conn_t *c, const st_http_request_t *req)
{
    st_server_t *srv = c->srv;
    bool stream = req->method == ST_HTTP_GET && req->path_len == 10 &&
                  memcmp(req->path, "/v1/stream", 10) == 0;
    const char *msg = NULL;
    c->close_when_done = true;
    if (!stream) {
        st__conn_error(c, ST_ENOTFOUND, "WebSocket streams are served at GET /v1/stream", NULL);
        return;
    }
    if (!srv->app->ws) {
        st__conn_error(c, ST_EUNAVAIL, "streams are not enabled", NULL);
        return;
    }
    if (c->feed_requests > 1 || c->head || c->out.len || c->writing) {
        st__conn_error(c, ST_EBADREQ, "send the upgrade request on its own", NULL);
        return;
    }
    if (st_http_ws_handshake(req, &c->handoff, &msg) != ST_OK) {
        st__conn_error(c, ST_EBADREQ, msg, "Sec-WebSocket-Version: 13\r\n");
        return;
    }
    st_buf_t resp = {0};
    int rc = st_http_upgrade_check(srv->app, req, &c->arena, &resp, &c->ws_subject, &c->ws_exp_us);
    if (rc != ST_OK) {
        /* 401, or 403 for an Origin --cors-origins does not allow */
        st__conn_respond(c, resp.data, resp.len, 0, st_err_status(rc), -1, true, req->started_ns);
        st_buf_free(&resp);
        return;
    }
    c->upgrade = true;
}

/* ---- parked requests ---- */

static void st__conn_unparked(void *arg);

/* Dispatches req and queues its response; false when it parked (c->parked holds a copy). */
static bool st__conn_run(st_conn_t *c, const st_http_request_t *req)
{
    st_server_t *srv = c->srv;
    st_buf_t resp = {0};
    uint64_t wait;
    int status, route, rc;
    /* a wait that finds everything in memory already means: run again now (a few times) */
    for (int tries = 0;; tries++) {
        st_arena_reset(&c->arena);
        rc = st_http_dispatch(srv->app, req, &c->arena, &resp, &wait, &status, &route);
        if (rc != ST_EPARKED || !srv->app->chat || tries == 3) break;
        if (st_chat_cold_wait(srv->app->chat, &c->cold_wait, st__conn_unparked, c)) {
            if (!c->parked) c->parked = st_http_request_copy(req);
            st__read_stop(c);
            return false;
        }
    }
    if (rc == ST_EPARKED) { /* cannot happen unless the cold tier stopped under it */
        static const char body[] = "{\"error\":{\"code\":\"unavailable\",\"message\":"
                                   "\"the cold tier is stopping\"}}";
        status = 503;
        wait = 0;
        st_http_write_response(&resp, status, NULL, NULL, body, sizeof body - 1, !req->keep_alive);
    }
    st__conn_respond(c, resp.data, resp.len, wait, status, route, !req->keep_alive,
                     req->started_ns);
    st_buf_free(&resp);
    if (srv->app->chat) st_chat_cold_release(srv->app->chat, c->cold_wait);
    c->cold_wait = NULL;
    if (!req->keep_alive) c->close_when_done = true;
    return true;
}

/* The cold data a parked request waited for is in memory: run it, then go on with the rest. */
static void st__conn_unparked(void *arg)
{
    st_conn_t *c = arg;
    st_http_request_t *req = c->parked;
    if (c->closing || !req || !st__conn_run(c, req)) return;
    c->parked = NULL;
    free(req);
    c->last_active_ms = st__now_ms(c->srv);
    st__conn_flush(c);
}

static int st__on_request(void *arg, const st_http_request_t *req)
{
    st_conn_t *c = arg;
    st_server_t *srv = c->srv;
    if (c->close_when_done || c->closing) return 1;
    c->feed_requests++;
    c->last_active_ms = st__now_ms(srv);
    st_arena_reset(&c->arena);
    if (req->upgrade) {
        st__on_upgrade(c, req);
        return 1;
    }
    if (!st__conn_run(c, req)) return 1; /* parked: the rest of the input waits in the stash */
    /* Backpressure: the rest of the input waits (stashed) until the peer takes its answers. */
    if (c->nslots >= srv->app->cfg->max_pipeline) return 1;
    if (st__backlog(c) >= ST__OUT_HIGH) {
        st__conn_write(c);
        if (st__backlog(c) >= ST__OUT_HIGH) return 1;
    }
    return c->close_when_done;
}

static void st__on_continue(void *arg)
{
    st_conn_t *c = arg;
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    if (!c->head) st_buf_append(&c->out, cont, sizeof cont - 1);
}

static void st__on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    st_conn_t *c = h->data;
    (void)hint;
    buf->base = c->srv->readbuf;
    buf->len = sizeof c->srv->readbuf;
}

static void st__read_stop(st_conn_t *c)
{
    if (!c->reading) return;
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = false;
}

/* Hands the socket (a duplicate of its fd) to the stream module with the upgrade request in a
 * minimal form — the client's headers may be as large as --max-header, libwebsockets' header
 * buffer is not — followed by any bytes the client sent after it; then forgets our side. */
static void st__conn_handoff(st_conn_t *c, const char *rest, size_t rlen)
{
    st_server_t *srv = c->srv;
    st__read_stop(c);
    if (c->handoff.len + rlen > ST_WS_MAX_HANDOFF) {
        c->upgrade = false;
        st__conn_error(c, ST_EBADREQ, "frames sent before the handshake completed", NULL);
        return;
    }
    st_buf_append(&c->handoff, rest, rlen);
    uv_os_fd_t fd;
    int dupfd = uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0 ? dup(fd) : -1;
    if (dupfd < 0 || st_ws_adopt(srv->app->ws, dupfd, c->handoff.data, c->handoff.len,
                                 c->ws_subject, c->ws_exp_us) != ST_OK)
        st_warn("ws: could not hand over a stream connection");
    st__conn_close(c);
}

/* Parses data (read from the socket, or the stash). Whatever backpressure left unparsed is
 * kept in the stash, and reading stops until the flush resumes it. */
static void st__conn_feed(st_conn_t *c, const char *data, size_t len, bool from_stash)
{
    st_server_t *srv = c->srv;
    bool was_mid = st_http_parser_mid_request(c->parser);
    c->feed_requests = 0;
    size_t used;
    int rc = st_http_parser_feed(c->parser, data, len, &used);
    if (c->upgrade) {
        st__conn_handoff(c, data + used, len - used);
        return;
    }
    if (rc != ST_OK) {
        const char *msg = rc == ST_EHEADERS    ? "request line and headers too large"
                          : rc == ST_ETOOLARGE ? "request body too large"
                          : rc == ST_ENOTIMPL  ? "unknown method"
                                               : "malformed HTTP request";
        /* A browser must see a 413 as one (SPEC §7), not as a network error. */
        const char *origin = NULL;
        size_t olen = 0;
        char *cors = rc == ST_ETOOLARGE && st_http_parser_origin(c->parser, &origin, &olen)
                         ? st_cors_headers_for(srv->app->cfg, origin, olen)
                         : NULL;
        st__conn_error(c, rc, msg, cors);
        free(cors);
    } else if (st_http_parser_upgraded(c->parser)) {
        c->close_when_done = true;
    }
    if (c->close_when_done) {
        st_buf_free(&c->stash);
    } else if (from_stash) {
        memmove(c->stash.data, data + used, len - used);
        c->stash.len = len - used;
    } else if (used < len) {
        st_buf_append(&c->stash, data + used, len - used);
    }
    if (c->stash.len == 0 && c->stash.cap > (64u << 10)) st_buf_free(&c->stash);
    if (!was_mid && st_http_parser_mid_request(c->parser)) c->req_started_ms = st__now_ms(srv);
    if (c->close_when_done || c->stash.len || c->nslots >= srv->app->cfg->max_pipeline)
        st__read_stop(c);
}

static void st__on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    st_conn_t *c = stream->data;
    if (nread == 0) return;
    if (nread < 0) {
        /* EOF: everything received before it is answered, then the connection closes. */
        st__read_stop(c);
        if (nread != UV_EOF) {
            st__conn_close(c);
            return;
        }
        c->eof = true;
        st__conn_flush(c);
        return;
    }
    st__conn_feed(c, buf->base, (size_t)nread, false);
    if (!c->closing) st__conn_flush(c);
}

static void st__conn_read_start(st_conn_t *c)
{
    if (uv_read_start((uv_stream_t *)&c->tcp, st__on_alloc, st__on_read) == 0) c->reading = true;
}

/* ---- lifecycle ---- */

static void st__on_conn_closed(uv_handle_t *h)
{
    st_conn_t *c = h->data;
    st_server_t *srv = c->srv;
    while (c->head) {
        st_slot_t *n = c->head->next;
        free(c->head->data);
        free(c->head);
        c->head = n;
    }
    free(c->parked);
    st_http_parser_free(c->parser);
    st_arena_free(&c->arena);
    st_buf_free(&c->out);
    st_buf_free(&c->stash);
    st_buf_free(&c->handoff);
    free(c);
    if (srv->stopping) st__maybe_done(srv);
}

static void st__conn_close(st_conn_t *c)
{
    if (c->closing) return;
    c->closing = true;
    st__conn_pending(c);
    st_server_t *srv = c->srv;
    if (c->cold_wait) st_chat_cold_release(srv->app->chat, c->cold_wait); /* cancels it */
    c->cold_wait = NULL;
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    srv->nconns--;
    st_metric_set(srv->m_conns, (double)srv->nconns);
    uv_close((uv_handle_t *)&c->tcp, st__on_conn_closed);
}

static void st__on_connection(uv_stream_t *server, int status)
{
    st_server_t *srv = server->data;
    if (status < 0 || srv->stopping) return;
    st_conn_t *c = st_calloc(1, sizeof *c);
    c->srv = srv;
    uv_tcp_init(srv->loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
        uv_close((uv_handle_t *)&c->tcp, (uv_close_cb)free);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    static const st_http_parser_cb_t cb = {st__on_request, st__on_continue};
    c->parser = st_http_parser_new(&cb, c, srv->app->cfg->max_header, srv->app->cfg->max_body);
    c->last_active_ms = st__now_ms(srv);
    c->next = srv->conns;
    if (srv->conns) srv->conns->prev = c;
    srv->conns = c;
    srv->nconns++;
    st_metric_set(srv->m_conns, (double)srv->nconns);
    if (srv->nconns + st_ws_connections(srv->app->ws) > srv->app->cfg->max_connections) {
        st_metric_add(srv->m_rejected, 1);
        st__conn_error(c, ST_EUNAVAIL, "too many connections", ST_HTTP_RETRY_AFTER);
        st__conn_flush(c);
        return;
    }
    st__conn_read_start(c);
}

/* Every durable batch may release responses anywhere; failed batches turn into errors. */
static void st__on_durable(st_store_listener_t *l, uint64_t id)
{
    st_server_t *srv = (st_server_t *)((char *)l - offsetof(st_server_t, store_l));
    for (st_conn_t *c = srv->pending, *n; c; c = n) {
        n = c->pnext;
        if (c->head && c->head->wait <= id) st__conn_flush(c);
    }
    if (srv->stopping) st__maybe_done(srv);
}

static void st__on_failed(st_store_listener_t *l, uint64_t first, int err)
{
    st_server_t *srv = (st_server_t *)((char *)l - offsetof(st_server_t, store_l));
    for (st_conn_t *c = srv->conns, *n; c; c = n) {
        n = c->next;
        for (st_slot_t *s = c->head; s; s = s->next) {
            if (s->wait < first) continue;
            st_buf_t body = {0}, resp = {0};
            st_buf_printf(&body,
                          "{\"error\":{\"code\":\"%s\",\"message\":\"%s; the request was not "
                          "applied\"}}",
                          st_err_code(err), st_strerror(err));
            char *cors = st_cors_headers_of(s->data, s->len); /* a browser must see it too */
            st_buf_t hdr = {0};
            st_buf_puts(&hdr, cors);
            if (st_err_status(err) == 503 && st_http_transient(err))
                st_buf_puts(&hdr, ST_HTTP_RETRY_AFTER);
            st_http_write_response(&resp, st_err_status(err), NULL, hdr.data, body.data, body.len,
                                   s->close);
            st_buf_free(&hdr);
            free(cors);
            free(s->data);
            s->data = st_buf_steal(&resp, &s->len);
            s->status = st_err_status(err);
            s->wait = 0;
            st_buf_free(&body);
        }
        st__conn_flush(c);
    }
}

/* Time limits of one connection: a request must arrive within --request-timeout of its first
 * byte (408), a connection with nothing to do is closed after --idle-timeout (bytes that start
 * no request, such as blank lines, do not count as activity), and so is a peer that takes none
 * of our output for as long. */
static void st__conn_timers(st_conn_t *c, uint64_t now)
{
    const st_config_t *cfg = c->srv->app->cfg;
    uint64_t req_to = cfg->request_timeout * 1000, idle_to = cfg->idle_timeout * 1000;
    if (c->writing) {
        size_t q = uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp);
        if (q != c->wqueue) {
            c->wqueue = q;
            c->write_progress_ms = now;
        } else if (now - c->write_progress_ms > idle_to) {
            st_info("http: closing a connection whose peer took no output for %llus",
                    (unsigned long long)cfg->idle_timeout);
            st__conn_close(c);
            return;
        }
    }
    if (c->close_when_done || c->eof) return;
    bool mid = st_http_parser_mid_request(c->parser);
    if (mid && now - c->req_started_ms > req_to) {
        st__read_stop(c);
        st_buf_free(&c->stash);
        st__conn_error(c, ST_ETIMEOUT, "request not received in time", NULL);
        st__conn_flush(c);
    } else if (!mid && !c->head && !c->parked && !c->writing && c->out.len == 0 &&
               c->stash.len == 0 && now - c->last_active_ms > idle_to) {
        st__conn_close(c);
    }
}

static void st__on_sweep(uv_timer_t *t)
{
    st_server_t *srv = t->data;
    /* Expired Idempotency-Key answers go a bounded slice at a time, so the loop never stalls. */
    size_t gone =
        st_idem_sweep(srv->app->store, (int64_t)srv->app->cfg->idempotency_ttl * 1000000, 2000);
    if (gone) st_metric_add(srv->m_idem_expired, (double)gone);
    uint64_t now = st__now_ms(srv);
    for (st_conn_t *c = srv->conns, *n; c; c = n) {
        n = c->next;
        st__conn_timers(c, now);
    }
}

int st_server_start(st_server_t **out, uv_loop_t *loop, st_app_t *app)
{
    const char *listen = app->cfg->listen;
    const char *colon = strrchr(listen, ':');
    if (!colon || colon == listen) {
        st_error("http: --listen must be HOST:PORT, got '%s'", listen);
        return ST_EINVAL;
    }
    char host[256];
    size_t hl = (size_t)(colon - listen);
    if (hl >= sizeof host) return ST_EINVAL;
    memcpy(host, listen, hl);
    host[hl] = '\0';
    if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    int64_t port;
    if (st_parse_i64(colon + 1, strlen(colon + 1), &port) || port < 0 || port > 65535) {
        st_error("http: bad port in --listen '%s'", listen);
        return ST_EINVAL;
    }
    struct sockaddr_storage addr;
    if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)&addr) != 0 &&
        uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)&addr) != 0) {
        st_error("http: bad address in --listen '%s' (use an IP address)", listen);
        return ST_EINVAL;
    }
    st_server_t *srv = st_calloc(1, sizeof *srv);
    srv->loop = loop;
    srv->app = app;
    srv->m_req = st_calloc((st_nroutes + 1) * 600, sizeof *srv->m_req);
    srv->m_lat = st_calloc(st_nroutes + 1, sizeof *srv->m_lat);
    srv->m_conns = st_metrics_gauge("strata_http_connections", "Open HTTP connections", "");
    srv->m_idem_expired = st_metrics_counter("strata_idempotency_expired_total",
                                             "Idempotency-Key answers deleted after their TTL", "");
    srv->m_rejected = st_metrics_counter("strata_http_connections_rejected_total",
                                         "Connections refused over --max-connections", "");
    uv_tcp_init(loop, &srv->listener);
    srv->listener.data = srv;
    int rc = uv_tcp_bind(&srv->listener, (struct sockaddr *)&addr, 0);
    if (!rc) rc = uv_listen((uv_stream_t *)&srv->listener, 1024, st__on_connection);
    if (rc) {
        st_error("http: cannot listen on %s: %s", listen, uv_strerror(rc));
        uv_close((uv_handle_t *)&srv->listener, NULL);
        uv_run(loop, UV_RUN_NOWAIT);
        free(srv->m_req);
        free(srv->m_lat);
        free(srv);
        return ST_EIO;
    }
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&bound, &blen);
    char ip[64];
    if (bound.ss_family == AF_INET6) {
        uv_ip6_name((struct sockaddr_in6 *)&bound, ip, sizeof ip);
        srv->port = ntohs(((struct sockaddr_in6 *)&bound)->sin6_port);
    } else {
        uv_ip4_name((struct sockaddr_in *)&bound, ip, sizeof ip);
        srv->port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
    }
    uv_timer_init(loop, &srv->sweep);
    srv->sweep.data = srv;
    uv_timer_start(&srv->sweep, st__on_sweep, 1000, 1000);
    srv->store_l.on_durable = st__on_durable;
    srv->store_l.on_failed = st__on_failed;
    st_store_listen(app->store, &srv->store_l);
    st_info(bound.ss_family == AF_INET6 ? "listening on [%s]:%d" : "listening on %s:%d", ip,
            srv->port);
    *out = srv;
    return ST_OK;
}

int st_server_port(const st_server_t *srv)
{
    return srv->port;
}

static void st__maybe_done(st_server_t *srv)
{
    if (!srv->stopping || !srv->done) return;
    /* Close connections whose answers are all out; the rest finish first. */
    for (st_conn_t *c = srv->conns, *n; c; c = n) {
        n = c->next;
        if (!c->head && !c->writing && c->out.len == 0 && !c->parked) st__conn_close(c);
    }
    if (srv->conns || !st_store_idle(srv->app->store)) return;
    void (*done)(void *) = srv->done;
    srv->done = NULL;
    uv_timer_stop(&srv->sweep);
    uv_close((uv_handle_t *)&srv->sweep, st__on_listener_closed);
    done(srv->done_arg);
}

static void st__on_drain_tick(uv_timer_t *t)
{
    st_server_t *srv = t->data;
    if (srv->conns && st__now_ms(srv) >= srv->stop_deadline_ms) {
        /* Peers that do not take their answers do not hold the stop up for ever. */
        size_t n = 0;
        for (st_conn_t *c = srv->conns, *next; c; c = next) {
            next = c->next;
            st__conn_close(c);
            n++;
        }
        st_warn("shutdown: closed %zu connection(s) whose answers were not taken in %d s", n,
                ST__STOP_DEADLINE / 1000);
    }
    st__maybe_done(srv);
}

static void st__on_listener_closed(uv_handle_t *h)
{
    (void)h;
}

void st_server_shutdown(st_server_t *srv, void (*done)(void *arg), void *arg)
{
    if (srv->stopping) return;
    srv->stopping = true;
    srv->done = done;
    srv->done_arg = arg;
    srv->stop_deadline_ms = st__now_ms(srv) + ST__STOP_DEADLINE;
    uv_close((uv_handle_t *)&srv->listener, st__on_listener_closed);
    /* The store settles on its own threads' schedule (the last LMDB apply reports nothing to
     * the loop's listeners), so check for "all done" on a short timer until it is. */
    uv_timer_stop(&srv->sweep);
    uv_timer_start(&srv->sweep, st__on_drain_tick, 5, 5);
    for (st_conn_t *c = srv->conns; c; c = c->next) {
        st__read_stop(c);
        st_buf_free(&c->stash);
        c->close_when_done = true;
    }
    st__maybe_done(srv);
}

void st_server_close(st_server_t *srv)
{
    for (st_conn_t *c = srv->conns, *n; c; c = n) {
        n = c->next;
        st__conn_close(c);
    }
    if (!uv_is_closing((uv_handle_t *)&srv->listener))
        uv_close((uv_handle_t *)&srv->listener, st__on_listener_closed);
    if (!uv_is_closing((uv_handle_t *)&srv->sweep)) {
        uv_timer_stop(&srv->sweep);
        uv_close((uv_handle_t *)&srv->sweep, st__on_listener_closed);
    }
    srv->done = NULL;
}

void st_server_free(st_server_t *srv)
{
    free(srv->m_req);
    free(srv->m_lat);
    free(srv);
}
