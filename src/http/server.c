/* SPDX-License-Identifier: MIT */
/*
 * The HTTP server: accepting connections within --max-connections, their time limits (time to
 * send a request, keep-alive idle time, a peer that takes none of its answers for
 * --idle-timeout), releasing answers when their batch is durable and turning failed batches into
 * errors, per-route metrics, and a graceful stop. One connection's I/O is in conn.c.
 */
#include "conn.h"
#include "strata/tier.h"
#include "strata/ws.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- metrics per route ---- */

void st__count(st_server_t *srv, int route, int status, uint64_t started_ns, uint64_t done_ns)
{
    size_t r = route < 0 ? st_nroutes : (size_t)route;
    if (status < 100 || status > 599) status = 500;
    st_metric_t **m = &srv->m_req[r * 600 + (size_t)status];
    const char *label = route < 0 ? "unmatched" : st_routes[route].pattern;
    const char *method = route < 0                                   ? "ANY"
                         : st_routes[route].method == ST_HTTP_GET    ? "GET"
                         : st_routes[route].method == ST_HTTP_PATCH  ? "PATCH"
                         : st_routes[route].method == ST_HTTP_DELETE ? "DELETE"
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
    if (!done_ns) done_ns = st_mono_ns();
    st_metric_observe(srv->m_lat[r], (double)(done_ns - started_ns) / 1e9);
}

/* ---- lifecycle ---- */

void st__conn_free(st_conn_t *c)
{
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
}

static void st__on_conn_closed(uv_handle_t *h)
{
    st_conn_t *c = h->data;
    st_server_t *srv = c->srv;
    st__conn_free(c);
    if (srv->stopping) st__maybe_done(srv);
}

void st__conn_close(st_conn_t *c)
{
    if (c->closing) return;
    c->closing = true;
    st__conn_pending(c);
    st_server_t *srv = c->srv;
    if (c->cold_wait) st_tier_release(srv->app->tier, c->cold_wait); /* cancels it */
    c->cold_wait = NULL;
    st_list_unlink(&c->link);
    if (c->xp_busy) {
        /* a commit thread may still write to the fd: it must not be reused until then (and it
         * still counts against --max-connections) */
        st__read_stop(c);
        st_list_push_front(&srv->xp_closing, &c->link);
        return;
    }
    srv->nconns--;
    st_metric_set(srv->m_conns, (double)srv->nconns);
    uv_close((uv_handle_t *)&c->tcp, st__on_conn_closed);
}

/* Closes the connections that waited for their answer's batch to settle (durable up to `upto`,
 * or failed from `from` on). */
static void st__xp_settled(st_server_t *srv, uint64_t upto, uint64_t from)
{
    for (ST_LIST_EACH(l, n, &srv->xp_closing)) {
        st_conn_t *c = ST_LIST_ITEM(l, st_conn_t, link);
        if (c->xp_wait > upto && c->xp_wait < from) continue;
        c->xp_busy = false;
        st_slot_t *s = c->head; /* the answer, if the commit thread wrote it */
        ST_ASSERT(s && s->express);
        if (c->xp_wait <= upto && c->xp.sent == s->len) {
            st__count(srv, s->route, s->status, s->started_ns, c->xp.sent_ns);
            st_metric_add(srv->m_express, 1);
        }
        st_list_unlink(&c->link);
        srv->nconns--;
        st_metric_set(srv->m_conns, (double)srv->nconns);
        uv_close((uv_handle_t *)&c->tcp, st__on_conn_closed);
    }
}

/* A connection storm (thousands connecting at once) is taken ST__ACCEPTS_PER_TURN a loop
 * iteration: a WebSocket's handshake costs ~70 µs, and the connections one epoll batch accepts
 * send their requests together in the next, so an unbounded batch made one iteration of ~90 ms
 * while 10,000 streams opened (bench/adopt.sh), and every other client waited for it. The rest
 * wait in the kernel's backlog (libuv stops polling the listener while one is held). */
#define ST__ACCEPTS_PER_TURN 64
/* ... and waiting there a storm must not overflow it (the kernel caps it at somaxconn, 4096 on
 * Debian 12): a dropped SYN costs its client a 1 s retransmit. */
#define ST__LISTEN_BACKLOG 4096

static void st__accept(st_server_t *srv)
{
    st_conn_t *c = st_calloc(1, sizeof *c);
    c->srv = srv;
    uv_tcp_init(srv->loop, &c->tcp);
    c->tcp.data = c;
    srv->accepted++;
    if (uv_accept((uv_stream_t *)&srv->listener, (uv_stream_t *)&c->tcp) != 0) {
        uv_close((uv_handle_t *)&c->tcp, (uv_close_cb)free);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    static const st_http_parser_cb_t cb = {st__on_request, st__on_continue};
    c->parser = st_http_parser_new(&cb, c, srv->app->cfg->max_header, srv->app->cfg->max_body);
    c->last_active_ms = st__now_ms(srv);
    st_list_push_front(&srv->conns, &c->link);
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

static void st__on_connection(uv_stream_t *server, int status)
{
    st_server_t *srv = server->data;
    if (status < 0 || srv->stopping) return;
    if (srv->accepted >= ST__ACCEPTS_PER_TURN) {
        srv->accept_held = true; /* taken in the next iteration (st__on_turn) */
        st_metric_add(srv->m_held, 1);
        return;
    }
    st__accept(srv);
}

/* After each poll: a new budget, and the connection held back, if any, is taken — which
 * makes libuv poll the listener again, so the next iteration accepts the rest. */
static void st__on_turn(uv_check_t *h)
{
    st_server_t *srv = h->data;
    srv->accepted = 0;
    if (!srv->accept_held || srv->stopping) return;
    srv->accept_held = false;
    st__accept(srv);
}

/* Every durable batch may release responses anywhere; failed batches turn into errors. */
static void st__on_durable(st_store_listener_t *l, uint64_t id)
{
    st_server_t *srv = (st_server_t *)((char *)l - offsetof(st_server_t, store_l));
    srv->walking = true; /* a stop check would close connections the walk has yet to visit */
    for (ST_LIST_EACH(it, n, &srv->pending)) {
        st_conn_t *c = ST_LIST_ITEM(it, st_conn_t, plink);
        if (c->head && c->head->wait <= id) st__conn_flush(c);
    }
    srv->walking = false;
    if (!st_list_empty(&srv->xp_closing)) st__xp_settled(srv, id, UINT64_MAX);
    if (srv->stopping) st__maybe_done(srv);
}

static void st__on_failed(st_store_listener_t *l, uint64_t first, int err)
{
    st_server_t *srv = (st_server_t *)((char *)l - offsetof(st_server_t, store_l));
    st_idem_stale(); /* answers of the failed batches may be in the index */
    srv->walking = true;
    for (ST_LIST_EACH(it, n, &srv->conns)) {
        st_conn_t *c = ST_LIST_ITEM(it, st_conn_t, link);
        for (st_slot_t *s = c->head; s; s = s->next) {
            if (s->wait < first) continue;
            if (s->express) { /* a failed batch's answers are never written by the store */
                ST_ASSERT(c->xp.sent == 0);
                s->express = false;
                c->xp_busy = false;
            }
            st_buf_t body = {0}, resp = {0};
            /* In a group a lost term's entry may still commit under the next leader (Raft does
             * not tell): its outcome is unknown, and the answer must not claim otherwise. */
            st_buf_printf(&body, "{\"error\":{\"code\":\"%s\",\"message\":\"%s; %s\"}}",
                          st_err_code(err), st_strerror(err),
                          err == ST_ENOLEADER
                              ? "a write's outcome is unknown (it may yet be applied): "
                                "retry it, with the same Idempotency-Key if it had one"
                              : "the request was not applied");
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
    srv->walking = false;
    if (!st_list_empty(&srv->xp_closing)) st__xp_settled(srv, 0, first);
    if (srv->stopping) st__maybe_done(srv);
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

#define ST__WARM_SLICE 16384 /* answers indexed per turn of the warm-up (a few ms of loop) */

static void st__on_sweep(uv_timer_t *t)
{
    st_server_t *srv = t->data;
    uint64_t now = st__now_ms(srv);
    /* The Idempotency-Key answers' index, rebuilt after a start (or when a lookup found it
     * stale): a slice every millisecond until it is whole, the rest of the tick once a second. */
    if (!st_idem_warm(srv->app->store, ST__WARM_SLICE, srv->warm_start) && st_idem_warming()) {
        srv->warm_start = false;
        uv_timer_start(t, st__on_sweep, 1, 1000);
        if (now < srv->sweep_due_ms) return;
    }
    srv->warm_start = false;
    srv->sweep_due_ms = now + 1000;
    /* Expired Idempotency-Key answers go a bounded slice at a time, so the loop never stalls. */
    size_t gone =
        st_idem_sweep(srv->app->store, (int64_t)srv->app->cfg->idempotency_ttl * 1000000, 2000);
    if (gone) st_metric_add(srv->m_idem_expired, (double)gone);
    for (ST_LIST_EACH(l, n, &srv->conns)) {
        st_conn_t *c = ST_LIST_ITEM(l, st_conn_t, link);
        st__conn_timers(c, now);
    }
}

int st_server_start(st_server_t **out, uv_loop_t *loop, st_app_t *app)
{
    /* idempotency.c's answers, their expiry index and the entries of those past its ceiling */
    static const st_claim_t keys[] = {ST_CLAIM("i"), ST_CLAIM("x"), ST_CLAIM("y")};
    int rc = st_store_claims(app->store, "idempotency", keys, sizeof keys / sizeof *keys);
    if (rc != ST_OK) return rc;
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
    st_list_init(&srv->conns);
    st_list_init(&srv->pending);
    st_list_init(&srv->xp_closing);
    srv->m_req = st_calloc((st_nroutes + 1) * 600, sizeof *srv->m_req);
    srv->m_lat = st_calloc(st_nroutes + 1, sizeof *srv->m_lat);
    srv->m_conns = st_metrics_gauge("strata_http_connections", "Open HTTP connections", "");
    srv->m_idem_expired = st_metrics_counter("strata_idempotency_expired_total",
                                             "Idempotency-Key answers deleted after their TTL", "");
    st_metrics_gauge_fn("strata_idempotency_answers",
                        "Idempotency-Key answers the index in memory holds (-1 while it is being "
                        "rebuilt after a start; those past --idempotency-index have a store "
                        "entry instead)",
                        "", st_idem_gauge, NULL);
    st_metrics_gauge_fn("strata_idempotency_index_bytes",
                        "Bytes the index of Idempotency-Key answers takes (16 a slot, bounded by "
                        "--idempotency-index; it shrinks as answers expire)",
                        "", st_idem_bytes_gauge, NULL);
    st_idem_limit((size_t)app->cfg->idempotency_index,
                  st_metrics_counter("strata_idempotency_spilled_total",
                                     "Idempotency-Key answers recorded with a store entry by "
                                     "scope because the index was at --idempotency-index",
                                     ""));
    srv->m_rejected = st_metrics_counter("strata_http_connections_rejected_total",
                                         "Connections refused over --max-connections", "");
    srv->m_held = st_metrics_counter(
        "strata_http_accepts_held_total",
        "Times new connections waited for the next loop iteration (a connection storm)", "");
    srv->m_express = st_metrics_counter(
        "strata_http_express_answers_total",
        "Durable answers a commit thread wrote whole the moment their batch was durable", "");
    uv_tcp_init(loop, &srv->listener);
    srv->listener.data = srv;
    rc = uv_tcp_bind(&srv->listener, (struct sockaddr *)&addr, 0);
    if (!rc) rc = uv_listen((uv_stream_t *)&srv->listener, ST__LISTEN_BACKLOG, st__on_connection);
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
    srv->warm_start = true; /* the answers' index: its first slice at once */
    uv_timer_start(&srv->sweep, st__on_sweep, 0, 1000);
    uv_check_init(loop, &srv->turn);
    srv->turn.data = srv;
    uv_check_start(&srv->turn, st__on_turn);
    uv_unref((uv_handle_t *)&srv->turn);
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

static void st__on_listener_closed(uv_handle_t *h)
{
    (void)h;
}

void st__maybe_done(st_server_t *srv)
{
    if (!srv->stopping || !srv->done || srv->walking) return;
    /* Close connections whose answers are all out; the rest finish first. */
    for (ST_LIST_EACH(l, n, &srv->conns)) {
        st_conn_t *c = ST_LIST_ITEM(l, st_conn_t, link);
        if (!c->head && !c->writing && c->out.len == 0 && !c->parked) st__conn_close(c);
    }
    if (!st_list_empty(&srv->conns) || !st_store_idle(srv->app->store)) return;
    void (*done)(void *) = srv->done;
    srv->done = NULL;
    uv_timer_stop(&srv->sweep);
    uv_close((uv_handle_t *)&srv->sweep, st__on_listener_closed);
    uv_close((uv_handle_t *)&srv->turn, st__on_listener_closed);
    done(srv->done_arg);
}

static void st__on_drain_tick(uv_timer_t *t)
{
    st_server_t *srv = t->data;
    if (!st_list_empty(&srv->conns) && st__now_ms(srv) >= srv->stop_deadline_ms) {
        /* Peers that do not take their answers do not hold the stop up for ever. */
        size_t n = 0;
        for (ST_LIST_EACH(l, next, &srv->conns)) {
            st__conn_close(ST_LIST_ITEM(l, st_conn_t, link));
            n++;
        }
        st_warn("shutdown: closed %zu connection(s) whose answers were not taken in %d s", n,
                ST__STOP_DEADLINE / 1000);
    }
    st__maybe_done(srv);
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
    for (ST_LIST_EACH(l, n, &srv->conns)) {
        st_conn_t *c = ST_LIST_ITEM(l, st_conn_t, link);
        st__read_stop(c);
        st_buf_free(&c->stash);
        c->close_when_done = true;
    }
    st__maybe_done(srv);
}

void st_server_close(st_server_t *srv)
{
    for (ST_LIST_EACH(l, n, &srv->conns)) {
        st_conn_t *c = ST_LIST_ITEM(l, st_conn_t, link);
        st__conn_close(c);
    }
    if (!uv_is_closing((uv_handle_t *)&srv->listener))
        uv_close((uv_handle_t *)&srv->listener, st__on_listener_closed);
    if (!uv_is_closing((uv_handle_t *)&srv->sweep)) {
        uv_timer_stop(&srv->sweep);
        uv_close((uv_handle_t *)&srv->sweep, st__on_listener_closed);
    }
    if (!uv_is_closing((uv_handle_t *)&srv->turn))
        uv_close((uv_handle_t *)&srv->turn, st__on_listener_closed);
    srv->done = NULL;
}

void st_server_free(st_server_t *srv)
{
    /* closed while their batch never settled (a stop past its deadline): the store's threads
     * are gone and the loop closed their handles */
    for (ST_LIST_EACH(l, n, &srv->xp_closing)) {
        st_list_unlink(l);
        st__conn_free(ST_LIST_ITEM(l, st_conn_t, link));
    }
    free(srv->m_req);
    free(srv->m_lat);
    free(srv);
}
