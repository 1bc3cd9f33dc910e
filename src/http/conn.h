/* SPDX-License-Identifier: MIT */
/*
 * The HTTP server's connections, shared by server.c (accepting, limits, timers, durable and
 * failed batches, shutdown, per-route metrics) and conn.c (one connection's I/O: ordered
 * responses, reading with backpressure, parked requests, the WebSocket hand-off). Nothing
 * outside src/http sees these.
 */
#ifndef STRATA_HTTP_CONN_H
#define STRATA_HTTP_CONN_H

#include "internal.h"
#include "strata/tier.h"

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
    bool express; /* the connection's xp: the store may have written part of it already */
    uint64_t started_ns;
} st_slot_t;

/* An answer a commit thread writes once its batch is durable (st_store_express): send() runs
 * there and touches only this struct. */
typedef struct {
    st_store_express_t x;
    int fd;
    const char *data; /* the head slot's */
    size_t len;
    size_t sent;      /* written by send(): bytes the socket took (0: none, or an error) */
    uint64_t sent_ns; /* ... and when */
} st__xp_t;
#define ST__XP_MAX (16u << 10) /* larger answers: the loop writes them (not a lane's time) */

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
    int feed_requests;              /* requests parsed from the current feed */
    bool upgrade;                   /* hand the socket to the stream module after this feed */
    st_buf_t handoff;               /* the upgrade request as libwebsockets will see it */
    const char *ws_subject;         /* arena memory, valid until the hand-off */
    st_http_token_times_t ws_times; /* the token's times (st_http_token_check) */
    bool ws_admin;                  /* the token has role admin */
    st_list_t link;                 /* in srv->conns */
    st_list_t plink;                /* in srv->pending while responses wait for a durable batch */
    st_http_request_t *parked;      /* owned copy of a request waiting for cold data */
    st_coldwait_t *cold_wait;       /* what it waits for (pins the data until it has run) */
    /* The head answer, attached to its batch for a commit thread to write once durable. While
     * xp_busy nothing else is written and the fd stays open: a closed connection waits in
     * srv->xp_closing until its batch settles (still counted in nconns: it holds its fd). */
    st__xp_t xp;
    uint64_t xp_wait;
    bool xp_busy;
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
    uint64_t sweep_due_ms; /* the next second's tick of the sweep (server.c) */
    bool warm_start;       /* the next tick starts the answers' index (after a start) */
    uv_check_t turn;       /* after each poll: the accept budget starts over (server.c) */
    unsigned accepted;     /* connections accepted in this loop iteration */
    bool accept_held;      /* one is waiting in libuv, which stops polling the listener meanwhile */
    st_list_t conns;       /* st_conn_t, newest first */
    size_t nconns;
    st_list_t pending;    /* connections with responses waiting: all a durable batch must visit */
    st_list_t xp_closing; /* closed while xp_busy (linked by `link`): closed once it settles */
    st_store_listener_t store_l;
    bool stopping;
    bool walking; /* a durable or failed batch's walk over the connections: no stop check */
    uint64_t stop_deadline_ms;
    void (*done)(void *arg);
    void *done_arg;
    int port;
    int open_handles;
    st_metric_t *m_conns, *m_rejected, *m_idem_expired, *m_held;
    st_metric_t *m_express; /* answers a commit thread wrote whole */
    st_metric_t **m_req;    /* (nroutes + 1) x 600, lazily created */
    st_metric_t **m_lat;    /* nroutes + 1 */
    char readbuf[64 * 1024];
};

static inline uint64_t st__now_ms(const st_server_t *srv)
{
    return uv_now(srv->loop);
}

/* conn.c: a connection's I/O (all on the loop; c stays owned by the server's list) */
/* Queues an error answer (headers: extra header lines or NULL) in request order. */
void st__conn_error(st_conn_t *c, int err, const char *msg, const char *headers);
/* Sends every answer at the head of c's queue whose batch is durable; resumes parsing. */
void st__conn_flush(st_conn_t *c);
/* Keeps c on the server's pending list while answers wait for a batch (or takes it off). */
void st__conn_pending(st_conn_t *c);
void st__conn_read_start(st_conn_t *c);
void st__read_stop(st_conn_t *c);
/* The parser's callbacks (arg: the connection). */
int st__on_request(void *arg, const st_http_request_t *req);
void st__on_continue(void *arg);

/* server.c */
/* Closes c (idempotent); it is freed once libuv has closed its handle. */
void st__conn_close(st_conn_t *c);
/* Frees c's own memory (its handle is closed). */
void st__conn_free(st_conn_t *c);
/* Counts an answer in the per-route metrics (done_ns: when it left; 0: now). */
void st__count(st_server_t *srv, int route, int status, uint64_t started_ns, uint64_t done_ns);
/* While stopping: finishes the stop once nothing is left to answer. */
void st__maybe_done(st_server_t *srv);

#endif
