/* SPDX-License-Identifier: MIT */
/*
 * C-Raft's TCP transport with TCP_NODELAY on every connection. The stock transport leaves Nagle
 * on: with more than one entry in flight, Nagle plus the peer's delayed ACK held appends back
 * ~40 ms (p99). This wrapper delegates everything to raft_uv_tcp and only sets the option on
 * the streams it accepts and connects.
 */
#include "internal.h"

#include <stdlib.h>

typedef struct {
    struct raft_uv_connect req; /* handed to the inner transport */
    struct raft_uv_connect *outer;
} st_conn_req_t;

static void st__nodelay(struct uv_stream_s *stream)
{
    if (stream && stream->type == UV_TCP) uv_tcp_nodelay((uv_tcp_t *)stream, 1);
}

static int st__init(struct raft_uv_transport *t, raft_id id, const char *address)
{
    st_transport_t *w = t->impl;
    int rc = w->inner.init(&w->inner, id, address);
    if (rc) memcpy(t->errmsg, w->inner.errmsg, sizeof t->errmsg);
    return rc;
}

static void st__on_accept(struct raft_uv_transport *inner, raft_id id, const char *address,
                          struct uv_stream_s *stream)
{
    st_transport_t *w = inner->data;
    st__nodelay(stream);
    w->accept_cb(&w->outer, id, address, stream);
}

static int st__listen(struct raft_uv_transport *t, raft_uv_accept_cb cb)
{
    st_transport_t *w = t->impl;
    w->accept_cb = cb;
    return w->inner.listen(&w->inner, st__on_accept);
}

static void st__on_connect(struct raft_uv_connect *req, struct uv_stream_s *stream, int status)
{
    st_conn_req_t *cr = req->data;
    struct raft_uv_connect *outer = cr->outer;
    free(cr);
    if (status == 0) st__nodelay(stream);
    outer->cb(outer, stream, status);
}

static int st__connect(struct raft_uv_transport *t, struct raft_uv_connect *req, raft_id id,
                       const char *address, raft_uv_connect_cb cb)
{
    st_transport_t *w = t->impl;
    st_conn_req_t *cr = st_calloc(1, sizeof *cr);
    cr->req.data = cr;
    cr->outer = req;
    req->cb = cb;
    int rc = w->inner.connect(&w->inner, &cr->req, id, address, st__on_connect);
    if (rc) {
        /* "if a call that takes a callback fails, the callback never runs" */
        free(cr);
        memcpy(t->errmsg, w->inner.errmsg, sizeof t->errmsg);
    }
    return rc;
}

static void st__on_inner_closed(struct raft_uv_transport *inner)
{
    st_transport_t *w = inner->data;
    if (w->close_cb) w->close_cb(&w->outer);
}

static void st__close(struct raft_uv_transport *t, raft_uv_transport_close_cb cb)
{
    st_transport_t *w = t->impl;
    w->close_cb = cb;
    w->inner.close(&w->inner, st__on_inner_closed);
}

int st__transport_init(st_transport_t *w, uv_loop_t *loop)
{
    memset(w, 0, sizeof *w);
    int rc = raft_uv_tcp_init(&w->inner, loop);
    if (rc) return rc;
    w->inner.data = w;
    w->outer.impl = w;
    w->outer.init = st__init;
    w->outer.listen = st__listen;
    w->outer.connect = st__connect;
    w->outer.close = st__close;
    return 0;
}

void st__transport_free(st_transport_t *w)
{
    raft_uv_tcp_close(&w->inner);
}
