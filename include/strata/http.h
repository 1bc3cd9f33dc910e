/* SPDX-License-Identifier: MIT */
/*
 * http: HTTP/1.1 over libuv with llhttp — connections, request limits, the router, ordered
 * (pipelined) responses held back until the data they show is durable, and the JSON API.
 */
#ifndef STRATA_HTTP_H
#define STRATA_HTTP_H

#include "strata/config.h"
#include "strata/core.h"
#include "strata/store.h"
#include "strata/owner.h"

#include <uv.h>

enum {
    ST_HTTP_DELETE = 0,
    ST_HTTP_GET = 1,
    ST_HTTP_HEAD = 2,
    ST_HTTP_POST = 3,
    ST_HTTP_PUT = 4,
    ST_HTTP_OPTIONS = 6,
    ST_HTTP_PATCH = 28
};

/* One parsed request; every pointer is borrowed from the parser and valid until it resumes. */
typedef struct {
    int method; /* llhttp method number (ST_HTTP_* for the common ones) */
    const char *method_name;
    const char *path; /* raw, before '?' */
    size_t path_len;
    const char *query; /* raw, after '?', may be empty */
    size_t query_len;
    const char *body;
    size_t body_len;
    const char *idem_key; /* Idempotency-Key header or NULL */
    size_t idem_len;
    const char *auth; /* Authorization header or NULL */
    size_t auth_len;
    /* WebSocket handshake headers, NULL when absent */
    const char *upgrade_to; /* Upgrade */
    size_t upgrade_to_len;
    const char *ws_key; /* Sec-WebSocket-Key */
    size_t ws_key_len;
    const char *ws_version; /* Sec-WebSocket-Version */
    size_t ws_version_len;
    const char *ws_protocol; /* Sec-WebSocket-Protocol */
    size_t ws_protocol_len;
    const char *origin; /* Origin header or NULL (CORS) */
    size_t origin_len;
    const char *content_type; /* Content-Type header or NULL (strict requests: 415) */
    size_t content_type_len;
    bool keep_alive;
    bool upgrade; /* Connection: upgrade requested (WebSocket) */
    uint64_t started_ns;
} st_http_request_t;

/* ---- the request parser: llhttp plus strata's limits; no sockets, so it can be fuzzed ---- */
typedef struct st_http_parser st_http_parser_t;
typedef struct {
    /* A whole request arrived. Return 0 to go on, non-zero to stop parsing this buffer. */
    int (*on_request)(void *arg, const st_http_request_t *req);
    /* Headers are in and a body is announced with Expect: 100-continue. */
    void (*on_continue)(void *arg);
} st_http_parser_cb_t;

/* Returns an owned parser; free with st_http_parser_free. */
st_http_parser_t *st_http_parser_new(const st_http_parser_cb_t *cb, void *arg, size_t max_header,
                                     size_t max_body);
void st_http_parser_free(st_http_parser_t *p);
/* Feeds bytes. ST_OK, or the error that ends the connection (ST_EBADREQ, ST_EHEADERS,
 * ST_ETOOLARGE, ST_ENOTIMPL for an unknown method). *consumed tells how far it got: less than
 * len when on_request asked to stop (the caller feeds the rest later) or after an upgrade. */
int st_http_parser_feed(st_http_parser_t *p, const char *data, size_t len, size_t *consumed);
/* True while a request has started but not completed. */
bool st_http_parser_mid_request(const st_http_parser_t *p);
/* True once a request asked to switch protocols: the bytes after *consumed are not HTTP. */
bool st_http_parser_upgraded(const st_http_parser_t *p);
/* An owned copy of a request (its strings in the same allocation; free with free()), for a
 * request that outlives the feed: one parked while it waits for cold data. The WebSocket
 * handshake headers are not copied; Origin is (the answer carries the CORS lines). */
st_http_request_t *st_http_request_copy(const st_http_request_t *r);
/* The Origin header of the request being parsed, once its value is complete (borrowed, valid
 * until the next feed); false if it has none (yet) or its value is not complete. */
bool st_http_parser_origin(const st_http_parser_t *p, const char **origin, size_t *len);
/* After a feed returned an error: whether the refused request's target is under /iceberg as far
 * as it is known (the part of it that came; an unknown method's from the bytes behind it), so
 * its answer takes the Iceberg REST catalog's error shape (SPEC v5 §5.1). */
bool st_http_parser_iceberg(const st_http_parser_t *p);

/* ---- query strings ---- */
/* Finds `name` in a raw query (names compare percent-decoded) and percent-decodes its value into
 * the arena. NULL if absent. */
const char *st_query_get(st_arena_t *a, const char *query, size_t qlen, const char *name,
                         size_t *vlen);
/* Strict requests (SPEC §7) for a query string. */
typedef enum {
    ST_QUERY_UNKNOWN = 1, /* a parameter the route does not take */
    ST_QUERY_TWICE,       /* a parameter given twice (?limit=1&limit=2) */
    ST_QUERY_BAD_NAME,    /* a malformed percent-escape, or %00, in a parameter's name */
    ST_QUERY_BAD_VALUE,   /* the same in its value (a value that does not decode is never
                             mistaken for an absent one) */
} st_query_fault_kind_t;
typedef struct {
    st_query_fault_kind_t fault;
    const char *name; /* the parameter at fault, raw as sent (borrowed from the query) */
    size_t name_len;
} st_query_fault_t;
/* Checks that every parameter of a raw query is one of known (NULL-terminated; NULL: the route
 * takes none), given once, with well-formed escapes that decode to no NUL. Names compare
 * decoded; empty pieces ("a=1&&b=2") are skipped. ST_OK, or ST_EINVAL with *f set. Allocates
 * nothing: it runs on every request. */
int st_query_check(const char *query, size_t qlen, const char *const *known, st_query_fault_t *f);
/* The faulty parameter's name for a message, decoded, with bytes that are not printable ASCII
 * as %XX and "..." when cut: written into out (cap bytes, at least 8, NUL-terminated). Returns
 * its length. */
size_t st_query_fault_name(const st_query_fault_t *f, char *out, size_t cap);
/* Percent-decodes into the arena; NULL on a malformed escape. */
char *st_url_decode(st_arena_t *a, const char *s, size_t n, size_t *outlen);

/* ---- serving ---- */
typedef struct st_server st_server_t;

typedef struct st_seats st_seats_t;
typedef struct st_chat st_chat_t;
typedef struct st_rooms st_rooms_t;
typedef struct st_tier st_tier_t;
typedef struct st_objstore st_objstore_t;
typedef struct st_ws st_ws_t;
typedef struct st_reconcile st_reconcile_t;
typedef struct st_repl st_repl_t;
typedef struct st_backup st_backup_t;
typedef struct st_auth st_auth_t;
typedef struct st_outbox st_outbox_t;
typedef struct st_catalog st_catalog_t;
typedef struct st_tables st_tables_t;

/* Everything a request may touch; borrowed, owned by main. */
typedef struct {
    const st_config_t *cfg;
    st_store_t *store;
    st_seats_t *seats;
    st_chat_t *chat;
    st_rooms_t *rooms;         /* may be NULL: rooms are not served (503) */
    st_tier_t *tier;           /* may be NULL: no cold tier (nothing to wait for or flush) */
    st_objstore_t *tables;     /* may be NULL: the Iceberg tables' metadata (SPEC v5 §5.1) */
    st_catalog_t *catalog;     /* may be NULL: the REST catalog then knows no table */
    st_tables_t *iceberg;      /* may be NULL: the tables' commits (GET /v1/admin/tables 404) */
    st_ws_t *ws;               /* may be NULL (tools, fuzzers): nothing is streamed */
    st_reconcile_t *reconcile; /* may be NULL: nothing is queued for reconciliation */
    st_repl_t *repl;           /* NULL outside a replicated group */
    st_backup_t *backup;       /* may be NULL: no --backup-url */
    st_auth_t *auth;           /* may be NULL: then only --jwt-secret, without a token cache */
    st_outbox_t *outbox;       /* may be NULL; off without --route-url (admin routes 404) */
} st_app_t;

/* Client auth (SPEC §7): loads --jwt-jwks-file now (ST_EINVAL, logged, when it is unusable) and
 * starts fetching --jwt-jwks-url in the background. *out is NULL when auth is off; otherwise
 * owned: st_auth_close. */
int st_auth_open(st_auth_t **out, uv_loop_t *loop, const st_config_t *cfg);
/* Stops refreshing; the object frees itself once a fetch in flight is back (run the loop). */
void st_auth_close(st_auth_t *a);

/* Binds and listens per cfg->listen; logs "listening on HOST:PORT". */
int st_server_start(st_server_t **out, uv_loop_t *loop, st_app_t *app);
/* Graceful stop: no new connections or requests; answers everything in flight, then closes all
 * connections and calls done. */
void st_server_shutdown(st_server_t *srv, void (*done)(void *arg), void *arg);
/* Closes whatever is still open (connections a deadline cut short, the listener, timers). */
void st_server_close(st_server_t *srv);
/* Frees the server after it was closed and the loop ran. */
void st_server_free(st_server_t *srv);
/* The bound port (useful with port 0). */
int st_server_port(const st_server_t *srv);

/* A chat erase hook (st_chat_on_erase, arg: the st_store_t): for a user, deletes up to max
 * Idempotency-Key answers about the user (those of its /v1/users/{user}/… requests and of the room
 * messages it posted), walking the expiry index a slice per call; true until the walk of this
 * erasure is done, false from then on (for the same erasure id). Register it after the hooks whose
 * work may still record answers about the user (rooms). */
bool st_http_idem_erase(void *store, const st_owner_t *o, uint64_t erasure, size_t max);

/* ---- when a token may be used (SPEC §7, §3) ---- */

/* A token's time claims in Unix microseconds; 0 when the token has no such claim (a claim of
 * 0 or less is kept as 1: present, at the epoch). exp saturates at INT64_MAX far out. */
typedef struct {
    int64_t exp_us;
    int64_t nbf_us;
    int64_t iat_us;
} st_http_token_times_t;

/* The one clock rule of tokens: whether a token is valid at at_us, allowing leeway_us of clock
 * skew (--jwt-leeway) both ways: it is valid while at_us < exp + leeway and from nbf - leeway
 * on; iat only dates the token (st_auth's revocation after an erasure), it does not limit
 * validity. HTTP requests (auth.c, a cached token too), the stream's handshake (upgrade.c) and
 * an open stream's expiry (ws.c, closed 1008 "token expired" once this fails) all ask here, so
 * a token a request may use opens and keeps a stream for exactly as long. ST_OK, or
 * ST_EUNAUTH with *why a static reason ("token expired", "token not yet valid"). */
int st_http_token_check(const st_http_token_times_t *t, int64_t at_us, int64_t leeway_us,
                        const char **why);

#endif
