/* SPDX-License-Identifier: MIT */
/*
 * One connection's I/O. Each connection keeps its responses in request order (pipelining); a
 * response that shows staged data waits in a slot until its batch is durable, and everything
 * ready at the head of the queue goes out in one write. Past ST__OUT_HIGH bytes of output the
 * peer has not taken, the connection parses and reads nothing more until it drains. Whatever was
 * received before a half-close is answered.
 *
 * Parking: a request whose handler needs cold data not in memory is copied and parked (its
 * connection parses and reads nothing more meanwhile, so later pipelined answers stay behind
 * it); the cold cache fetches the data on the worker pool and the request is dispatched again.
 * Every other connection is served as usual in the meantime.
 */
#include "conn.h"
#include "strata/tier.h"
#include "strata/ws.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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
    if (c->writing || c->closing || c->xp_busy || c->out.len == 0) return;
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
void st__conn_pending(st_conn_t *c)
{
    st_server_t *srv = c->srv;
    bool want = c->head != NULL && !c->closing;
    if (want == st_list_linked(&c->plink)) return;
    if (want)
        st_list_push_front(&srv->pending, &c->plink);
    else
        st_list_unlink(&c->plink);
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
        size_t skip = 0;
        uint64_t done_ns = 0;
        if (s->express) { /* settled: what the commit thread wrote of it is out */
            skip = c->xp.sent < s->len ? c->xp.sent : s->len;
            done_ns = skip == s->len ? c->xp.sent_ns : 0;
            if (done_ns) st_metric_add(srv->m_express, 1);
            c->xp_busy = false;
        }
        st_buf_append(&c->out, s->data + skip, s->len - skip);
        if (s->status != 100) st__count(srv, s->route, s->status, s->started_ns, done_ns);
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

/* On a commit thread, once the answer's batch is durable: what the socket takes now goes; the
 * rest is the loop's to write when it learns the batch is durable. */
static void st__xp_send(st_store_express_t *x)
{
    st__xp_t *xp = (st__xp_t *)x;
    ssize_t r = send(xp->fd, xp->data, xp->len, MSG_NOSIGNAL | MSG_DONTWAIT);
    xp->sent = r > 0 ? (size_t)r : 0;
    xp->sent_ns = st_mono_ns();
}

/* The answer at the head, with nothing before it to write, waits for the open batch: a commit
 * thread may write it the moment the batch is durable, before the loop hears of it. */
static void st__conn_express(st_conn_t *c, st_slot_t *s)
{
    uv_os_fd_t fd;
    if (c->writing || c->out.len || c->xp_busy || c->closing || s->len > ST__XP_MAX ||
        uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0)
        return;
    c->xp = (st__xp_t){.x.send = st__xp_send, .fd = fd, .data = s->data, .len = s->len};
    if (!st_store_express(c->srv->app->store, s->wait, &c->xp.x)) return;
    s->express = true;
    c->xp_busy = true;
    c->xp_wait = s->wait;
}

/* Queues one whole response (in order). data is copied. */
static void st__conn_respond(st_conn_t *c, const char *data, size_t len, uint64_t wait, int status,
                             int route, bool close, uint64_t started_ns)
{
    if (!c->head && wait <= st_store_durable_id(c->srv->app->store)) {
        st_buf_append(&c->out, data, len);
        st__count(c->srv, route, status, started_ns, 0);
        return;
    }
    st_slot_t *s = st_malloc(sizeof *s);
    *s = (st_slot_t){.wait = wait,
                     .data = st_strndup(data, len),
                     .len = len,
                     .status = status,
                     .route = route,
                     .close = close,
                     .started_ns = started_ns};
    if (c->tail) {
        c->tail->next = s;
    } else {
        c->head = s;
        st__conn_express(c, s);
    }
    c->tail = s;
    c->nslots++;
    st__conn_pending(c);
}

/* Answers with an error and closes after it: nothing after it is parsed. */
/* An answer of the connection's own, in strata's error shape or (iceberg) the Iceberg REST
 * catalog's (SPEC v5 §5.1); the connection closes after it. */
static void st__conn_refuse(st_conn_t *c, int err, const char *msg, const char *headers,
                            bool iceberg)
{
    st_buf_t body = {0}, resp = {0};
    if (iceberg) {
        st_iceberg_error_body(&body, st_err_status(err),
                              err == ST_ENOTIMPL ? "UnsupportedOperationException" : NULL, msg);
    } else {
        st_buf_printf(&body, "{\"error\":{\"code\":\"%s\",\"message\":", st_err_code(err));
        st_buf_append_json_str(&body, msg, strlen(msg));
        st_buf_puts(&body, "}}");
    }
    st_http_write_response(&resp, st_err_status(err), NULL, headers, body.data, body.len, true);
    st__conn_respond(c, resp.data, resp.len, 0, st_err_status(err), -1, true, st_mono_ns());
    c->close_when_done = true;
    st_buf_free(&body);
    st_buf_free(&resp);
}

void st__conn_error(st_conn_t *c, int err, const char *msg, const char *headers)
{
    st__conn_refuse(c, err, msg, headers, false);
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
        if (rc != ST_EPARKED || !srv->app->tier || tries == 3) break;
        if (st_tier_wait(srv->app->tier, &c->cold_wait, st__conn_unparked, c)) {
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
    st_tier_release(srv->app->tier, c->cold_wait);
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

/* ---- reading ---- */

/* A WebSocket upgrade: GET /v1/stream with nothing of ours still owed on the connection, a
 * well-formed handshake (RFC 6455 §4.2.1) and, with auth on, a valid token. Refused ones get
 * their answer here and the connection closes; libwebsockets only ever sees good ones. */
static void st__on_upgrade(st_conn_t *c, const st_http_request_t *req)
{
    st_server_t *srv = c->srv;
    bool at_stream = req->path_len == 10 && memcmp(req->path, "/v1/stream", 10) == 0;
    bool stream = at_stream && req->method == ST_HTTP_GET;
    const char *msg = NULL;
    c->close_when_done = true;
    if (at_stream && !stream) { /* as without an Upgrade: 405 with Allow, HEAD 426; CORS too */
        st_http_request_t plain = *req;
        plain.keep_alive = false; /* the parser stopped at the handshake: nothing else follows */
        st__conn_run(c, &plain);
        return;
    }
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
    uint64_t wait;
    int rc = st_http_upgrade_check(srv->app, req, &c->arena, &resp, &c->ws_subject, &c->ws_times,
                                   &c->ws_admin, &wait);
    if (rc != ST_OK) {
        /* 401 (once batch wait is durable: a refusal that reports an erasure), 403 for an Origin
         * --cors-origins does not allow, 400 for a query parameter a stream does not take */
        st__conn_respond(c, resp.data, resp.len, wait, st_err_status(rc), -1, true,
                         req->started_ns);
        st_buf_free(&resp);
        return;
    }
    c->upgrade = true;
}

int st__on_request(void *arg, const st_http_request_t *req)
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

/* The interim answer goes out in order: at once when nothing is waiting, else behind the answers
 * queued before it (a client pipelining behind a slow commit still gets its 100). Not counted. */
void st__on_continue(void *arg)
{
    st_conn_t *c = arg;
    static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
    if (!c->head) {
        st_buf_append(&c->out, cont, sizeof cont - 1);
        return;
    }
    st_slot_t *s = st_malloc(sizeof *s);
    *s = (st_slot_t){.data = st_strndup(cont, sizeof cont - 1),
                     .len = sizeof cont - 1,
                     .status = 100,
                     .route = -1};
    c->tail->next = s;
    c->tail = s;
    c->nslots++;
}

static void st__on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    st_conn_t *c = h->data;
    (void)hint;
    buf->base = c->srv->readbuf;
    buf->len = sizeof c->srv->readbuf;
}

void st__read_stop(st_conn_t *c)
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
                                 c->ws_subject, &c->ws_times, c->ws_admin) != ST_OK)
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
        /* A browser must see a 413 or a 431 as one (SPEC §7), not as a network error. */
        const char *origin = NULL;
        size_t olen = 0;
        char *cors = (rc == ST_ETOOLARGE || rc == ST_EHEADERS) &&
                             st_http_parser_origin(c->parser, &origin, &olen)
                         ? st_cors_headers_for(srv->app->cfg, origin, olen)
                         : NULL;
        st__conn_refuse(c, rc, msg, cors, st_http_parser_iceberg(c->parser));
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

/* Sends what is ready; closes once a closing connection has nothing left; and resumes parsing
 * (the stash first, then the socket) when the backlog has drained. */
void st__conn_flush(st_conn_t *c)
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

void st__conn_read_start(st_conn_t *c)
{
    if (uv_read_start((uv_stream_t *)&c->tcp, st__on_alloc, st__on_read) == 0) c->reading = true;
}
