/* SPDX-License-Identifier: MIT */
/* http module internals: the per-request context, the router and the handlers' helpers. */
#ifndef STRATA_HTTP_INTERNAL_H
#define STRATA_HTTP_INTERNAL_H

#include "strata/chat.h"
#include "strata/http.h"
#include "strata/metrics.h"

#include <cjson/cJSON.h>

#define ST_MAX_PARAMS 4

/* One request being answered. The handler fills status + body, or returns an error code (then
 * the caller writes the error body unless the handler already did with st_ctx_error). */
typedef struct {
    st_app_t *app;
    const st_http_request_t *req;
    st_arena_t *arena; /* request lifetime */
    const char *params[ST_MAX_PARAMS];
    size_t plens[ST_MAX_PARAMS];
    uint64_t wait; /* the batch that must be durable before the response may leave */
    int status;
    st_buf_t *body;
    bool error_written;
    int err;                     /* st_ctx_error's code (0: none) */
    const char *extra_headers;   /* e.g. "Allow: GET\r\n" */
    const char *content_type;    /* default application/json */
    const char *subject;         /* authenticated principal ("" when auth is off) */
    bool admin;                  /* the token has role admin */
    st_http_token_times_t token; /* the token's exp, nbf, iat (Unix µs, 0 when absent) */
    int64_t revoked_at_us; /* with ST_ROUTE_REVOKED_OK: the erasure time of the token's subject
                              when the token predates it (st_auth_check), else 0 */
    const char *json_meta; /* st_json_body: raw text of the body's "metadata" value, or NULL */
    size_t json_meta_len;
    const char *error_type; /* under /iceberg: Iceberg's exception type of the next st_ctx_error
                               (NULL: the one its status implies) */
    const char *about; /* the user a room route's answer is about (its Idempotency-Key answer is
                          erased with it; arena memory), or NULL */
    size_t about_len;
    const char
        *about_room; /* the room's owner bytes (st_chat_owner_bytes) a room route's answer is about
                        (erased with the room when it is deleted; arena memory), or NULL */
    size_t about_room_len;
} st_ctx_t;

typedef int (*st_handler_fn)(st_ctx_t *c);

enum {
    ST_ROUTE_IDEMPOTENT = 1,   /* honours Idempotency-Key */
    ST_ROUTE_ADMIN = 2,        /* needs role admin when auth is on */
    ST_ROUTE_OPEN = 4,         /* never needs auth (healthz, metrics) */
    ST_ROUTE_USER = 8,         /* params[0] is a user: the token's sub must equal it */
    ST_ROUTE_NOSTAGE = 16,     /* a POST that stages nothing itself (admin flush): served while
                                  writes are refused, since a flush is what frees the hot store */
    ST_ROUTE_INTERNAL = 32,    /* a group's member-to-member call: only --cluster-secret tokens */
    ST_ROUTE_USER_ADMIN = 64,  /* with ST_ROUTE_USER: an admin token may act for any user too */
    ST_ROUTE_REVOKED_OK = 128, /* a token revoked by its subject's erasure passes auth (with
                                  c->revoked_at_us set): the handler decides (SPEC §2.2: a user
                                  polls its own erasure) */
    ST_ROUTE_ANY_BODY = 256,   /* the body is never read, whatever its Content-Type (OAuth's
                                  form posts to the Iceberg catalog's token endpoint) */
};

typedef struct {
    int method;
    const char *pattern; /* "/v1/counters/{name}/incr" */
    st_handler_fn fn;
    unsigned flags;
    /* The query parameters the route takes (NULL-terminated; NULL: none). Any other is 400
     * before the handler runs (SPEC §7, st_query_check); the handler reads these. */
    const char *const *query;
} st_route_t;

extern const st_route_t st_routes[];
extern const size_t st_nroutes;
/* The query parameters of GET /v1/stream, upgraded or not (SPEC §3, §10): route, access_token. */
extern const char *const st_stream_query[];

/* Strict requests (SPEC §7) for c->req's query against known (a route's query): writes the 400
 * naming the parameter (`unknown query parameter "by"`, with "field") and returns ST_EINVAL, or
 * ST_OK. Allocates nothing unless it refuses. */
int st_ctx_query_check(st_ctx_t *c, const char *const *known);

/* Matches path + method. On success *route is set and params decoded into c. ST_ENOTFOUND,
 * ST_EMETHOD (c->extra_headers gets an Allow line), ST_ENOTIMPL for a method strata serves
 * nowhere, or ST_EINVAL for a bad escape in the path. The query is not looked at: the route's
 * check (st_ctx_query_check) runs once the request is let in (a follower redirects it as is). */
int st_router_match(st_ctx_t *c, const st_route_t **route);

/* A 503 that passes by itself (no leader yet, a deposed leader, a reservation the backup target
 * cannot take yet, LMDB applies failing, too many connections): its answer carries
 * ST_HTTP_RETRY_AFTER. A fail-stopped redo log (a restart is needed) and missing cold objects do
 * not. */
#define ST_HTTP_RETRY_AFTER "Retry-After: 1\r\n"
bool st_http_transient(int err);
/* Writes the error body {"error":{"code","message"}} and sets status; returns err. */
int st_ctx_error(st_ctx_t *c, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A value quoted in an error message: "%.*s%s" with ST__V(s, n) (clipped to ST_CLIP_MAX bytes). */
#define ST__V(s, n) (int)st_clip((s), (n)), (s), (n) > ST_CLIP_MAX ? "..." : ""
/* The same with "field": the body field the error is about (a path such as "items[1].seats";
 * borrowed), so a program can tell which one without parsing the message. */
int st_ctx_error_field(st_ctx_t *c, int err, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Appends a whole HTTP response (status line, headers, body) to out. */
void st_http_write_response(st_buf_t *out, int status, const char *content_type,
                            const char *extra_headers, const char *body, size_t blen, bool close);
const char *st_http_reason(int status);

/* Runs one request to completion: auth, idempotency, route, handler. Appends the response to
 * out and sets *wait (0 when it may be sent now). ST_EPARKED instead (out untouched) when the
 * handler waits for cold data: call st_tier_wait, then dispatch the request again. */
int st_http_dispatch(st_app_t *app, const st_http_request_t *req, st_arena_t *arena, st_buf_t *out,
                     uint64_t *wait, int *status, int *route_idx);

/* With auth on, checks the token of a WebSocket upgrade (header or ?access_token=) as a request's
 * (st_auth_check: the same clock rule, a revoked token refused), then the query (st_stream_query:
 * 400 naming another parameter); on failure writes the whole 401/400 response into out, to leave
 * once batch *wait is durable (a refusal that reports an erasure). *subject is arena memory;
 * *times are the token's (all 0 with auth off), which the stream keeps: it ends once
 * st_http_token_check fails; *admin: the token has role admin (a global admin streams any room,
 * SPEC §2.1 v5). */
int st_http_upgrade_check(st_app_t *app, const st_http_request_t *req, st_arena_t *arena,
                          st_buf_t *out, const char **subject, st_http_token_times_t *times,
                          bool *admin, uint64_t *wait);

/* Checks the WebSocket handshake headers of an upgrade request (RFC 6455 §4.2.1). On success
 * out holds the request libwebsockets is handed (only what its handshake needs); otherwise
 * ST_EBADREQ and *msg (static) says what is wrong. */
int st_http_ws_handshake(const st_http_request_t *req, st_buf_t *out, const char **msg);

/* ---- CORS (cors.c) ---- */
/* True when cfg->cors_origins lists this Origin (or is `*`); origin is borrowed, may be NULL. */
bool st_cors_allowed(const st_config_t *cfg, const char *origin, size_t n);
/* A preflight (OPTIONS on /v1/... from an allowed Origin): sets the 204 answer and returns true. */
bool st_cors_preflight(st_ctx_t *c);
/* Adds Vary and, for an allowed Origin, the Access-Control-* headers to c->extra_headers (arena
 * memory). Call once, just before the response is written. */
void st_cors_finish(st_ctx_t *c);
/* The CORS lines (Vary, Access-Control-*) of a whole response already written, so an answer
 * that replaces it (a failed batch) keeps them. Returns owned "Name: value\r\n..." (maybe
 * empty); free with free(). */
char *st_cors_headers_of(const char *resp, size_t len);
/* The CORS lines for an answer written outside dispatch (a 413 cut off mid-request) to this
 * Origin (may be NULL). Returns owned "Name: value\r\n..." or NULL when CORS is off. */
char *st_cors_headers_for(const st_config_t *cfg, const char *origin, size_t n);

/* ---- JSON body helpers (on cJSON); each writes the 400 itself and returns its code ---- */
/* Parses the body as a JSON object whose members are all in fields (NULL-terminated); an empty
 * body gives *out = NULL. Free with cJSON_Delete.
 * The body must be strict JSON in UTF-8 without U+0000 in strings (except inside "metadata",
 * whose raw text is left in c->json_meta). */
int st_json_body(st_ctx_t *c, cJSON **out, const char *const *fields);
/* Strict requests (SPEC §7): every member of obj must be one of fields (NULL-terminated), else
 * 400 `unknown field "x"` (with "field", prefixed by where, e.g. "items[0]"). obj may be NULL.
 * st_json_body checks the top level with its fields. */
int st_json_fields(st_ctx_t *c, const cJSON *obj, const char *const *fields, const char *where);
/* "a string", "a number", … for a message. */
const char *st_json_kind(const cJSON *v);
/* For a route that takes no fields: an empty body, or a JSON object with no members ({}). */
int st_json_no_fields(st_ctx_t *c);
/* Optional integer field in [lo, hi]; *out = def when absent. */
int st_json_int(st_ctx_t *c, const cJSON *obj, const char *field, int64_t lo, int64_t hi,
                int64_t def, int64_t *out);
/* Field that must be a string that is a valid name. */
int st_json_name(st_ctx_t *c, const cJSON *obj, const char *field, const char **s, size_t *n);

/* What st_auth_check asks of a token beyond being valid now. */
enum {
    ST_AUTH_ADMIN = 1,      /* role admin (403 otherwise) */
    ST_AUTH_REVOKED_OK = 2, /* a token revoked by its subject's erasure passes, c->revoked_at_us
                               set (otherwise 401 token_revoked) */
};
/* With client auth configured: checks the Bearer token (401; 503 while the identity provider's
 * keys have not arrived yet) at this time (st_http_token_check), that its subject was not erased
 * after it was issued (401 token_revoked, SPEC §2.2), what `need` asks (ST_AUTH_*), and sets
 * c->subject, c->admin and c->token. Writes the error itself. */
int st_auth_check(st_ctx_t *c, unsigned need);
/* 401 token_revoked for c's token (its subject was erased after it was issued). */
int st_auth_refuse_revoked(st_ctx_t *c);
/* The credential a route needs (ST_ROUTE_OPEN none, ST_ROUTE_INTERNAL a --cluster-secret token,
 * the rest a client's token when auth is on). Writes the error (a 401 with WWW-Authenticate). */
int st_auth_route(st_ctx_t *c, unsigned flags);

/* Names the user the answer is about (copied into the arena): a keyed request's answer is
 * then erased with that user (SPEC §2.2). */
void st_ctx_about(st_ctx_t *c, const char *user, size_t ulen);
/* Names the room the answer is about (as its owner bytes, in the arena): a keyed request's
 * answer is then erased with the room when it is deleted (SPEC §2.1 v5). */
void st_ctx_about_room(st_ctx_t *c, const char *room, size_t rl);

/* Validates a path parameter as a name (400 otherwise). */
int st_param_name(st_ctx_t *c, int idx, const char *what);

/* ---- Idempotency-Key answers (idempotency.c), stored through the public store API ---- */
typedef struct {
    uint8_t scope[32]; /* principal, method, route, decoded params, key: where the answer lives */
    uint8_t fp[32];    /* method, route, decoded params, body: the request the key is bound to */
    /* The user the answer is about (NULL: none; borrowed): recorded with it, so that the user's
     * erasure deletes it (st_http_idem_erase); for a lookup, the user of an answer recorded
     * before answers named theirs. */
    const char *about;
    size_t about_len;
    /* The room's owner bytes the answer is also about (NULL: none; borrowed): recorded after
     * the user (0-separated), so that the room's deletion deletes it too. */
    const char *room;
    size_t room_len;
    /* Lookup: an answer about a user for whom gone() says true (being erased; or, since > 0,
     * an erasure of it asked for at or after since) is not replayed (ST_ENOTFOUND: the request
     * runs afresh). NULL: no such check. */
    bool (*gone)(void *arg, const char *user, size_t ulen, int64_t since);
    void *gone_arg;
} st_idem_req_t;
/* Call after st_router_match (uses c->params, c->subject). */
void st_idem_digest(const st_ctx_t *c, const st_route_t *route, st_idem_req_t *out);
/* ST_OK: *status and *body (borrowed until the next store call) are the first answer;
 * ST_EIDEMREUSED: the key was first used with another request; ST_ENOTFOUND. *wait is raised
 * to the batch of the first answer in both the first cases. */
int st_idem_lookup(st_store_t *s, const st_idem_req_t *r, int64_t ttl_us, int *status,
                   const char **body, size_t *blen, uint64_t *wait);
/* Whether an answer with this status is remembered (2xx, 404, 409; not a refused request). */
bool st_idem_storable(int status);
/* Stages the answer in the open batch (*wait raised); every 256 records it also sweeps up to 512
 * answers older than ttl_us, so expiry keeps up with any sustained rate. */
int st_idem_record(st_store_t *s, const st_idem_req_t *r, int64_t ttl_us, int status,
                   const char *body, size_t blen, uint64_t *wait);
/* The timer's step: deletes at most `budget` expired answers, oldest first (and indexes a slice
 * of old-format ones until they are all indexed). Returns how many it deleted. */
size_t st_idem_sweep(st_store_t *s, int64_t ttl_us, size_t budget);
/* The same with the clock given (tests). */
int st__idem_lookup_at(st_store_t *s, const st_idem_req_t *r, int64_t ttl_us, int64_t now,
                       int *status, const char **body, size_t *blen, uint64_t *wait);
int st__idem_record_at(st_store_t *s, const st_idem_req_t *r, int64_t ttl_us, int status,
                       const char *body, size_t blen, int64_t now, uint64_t *wait);
size_t st__idem_sweep_at(st_store_t *s, int64_t ttl_us, size_t budget, int64_t now);
/* Drops the sweep's per-store state and the index (tests that open another store). */
void st__idem_forget(void);
/* Builds the index of answers a slice of at most `budget` answers at a time (the server's timer,
 * after a start); true once it agrees with the store. With start false it only goes on with a
 * rebuild under way (a follower in a group, whose store others write, rebuilds only when it
 * looks an answer up). */
bool st_idem_warm(st_store_t *s, size_t budget, bool start);
/* Whether a rebuild of the index is under way (false when it is whole, or stale and waiting
 * for a lookup to start one). */
bool st_idem_warming(void);
/* /metrics: answers in the index, or -1 while it is being rebuilt (arg unused). */
double st_idem_gauge(void *arg);
/* Answers the index holds, whether whole or not (tests). */
size_t st__idem_held(void);
/* /metrics: the bytes the index's slots take (arg unused). */
double st_idem_bytes_gauge(void *arg);
/* The index's ceiling in bytes (--idempotency-index; 0: none), and the counter of answers
 * recorded with a store entry by scope because the index was at it (NULL: none; borrowed). Set
 * before the first lookup. */
void st_idem_limit(size_t bytes, st_metric_t *spilled);
/* Whether answers may be held by a store entry by scope (some were, and not all swept yet). */
bool st_idem_spilling(void);
/* Marks the index as disagreeing with the store (a batch was rolled back): rebuilt when needed. */
void st_idem_stale(void);

/* Answers past the index's ceiling (idem_spill.c): the store's entry 'y' scope -> created. */
/* The creation time scope's entry names, if it has one. */
bool st__spill_get(st_store_t *s, const uint8_t scope[32], int64_t *created);
int st__spill_write(st_store_t *s, const uint8_t scope[32], int64_t created, uint64_t *wait);
/* Deletes scope's entry if it names the answer created then (not one recorded again since). */
void st__spill_del(st_store_t *s, const uint8_t scope[32], int64_t created);
/* Whether any entry is left. */
bool st__spill_any(st_store_t *s);

/* The index of answers (idem_index.c): a scope's first 8 bytes -> when its answer was created.
 * Loop thread only; the table is owned by its st_idem_idx_t (st__idx_free). */
typedef struct {
    uint64_t tag; /* 0: a free slot */
    int64_t created;
} st_idem_slot_t;
typedef struct {
    st_idem_slot_t *v;
    size_t cap, n; /* cap: a power of 2 (0 before the first add) */
    size_t max;    /* the most slots it may have (st__idx_limit; 0: no ceiling) */
} st_idem_idx_t;
uint64_t st__idx_tag(const uint8_t scope[32]);
/* The ceiling: at most `bytes` of slots (at least 64 slots; 0: none). Set it while empty. */
void st__idx_limit(st_idem_idx_t *x, size_t bytes);
/* Adds tag -> created unless that very pair is there; false (nothing added) when the table is
 * at its ceiling. */
bool st__idx_add(st_idem_idx_t *x, uint64_t tag, int64_t created);
/* Whether an add of a new pair would be refused. */
bool st__idx_full(const st_idem_idx_t *x);
/* Up to max creation times recorded under tag (any order); returns how many. */
size_t st__idx_find(const st_idem_idx_t *x, uint64_t tag, int64_t *out, size_t max);
/* Deletes tag -> created; false when it was not there. The table shrinks when mostly empty. */
bool st__idx_del(st_idem_idx_t *x, uint64_t tag, int64_t created);
/* The bytes its slots take (/metrics). */
size_t st__idx_bytes(const st_idem_idx_t *x);
/* Frees the slots (the ceiling stays). */
void st__idx_free(st_idem_idx_t *x);

/* ---- handlers ---- */
int st_api_counter_incr(st_ctx_t *c);
int st_api_counter_get(st_ctx_t *c);
int st_api_counter_distinct(st_ctx_t *c);
int st_api_sequence_next(st_ctx_t *c);
int st_api_sequence_get(st_ctx_t *c);
int st_api_event_create(st_ctx_t *c);
int st_api_event_list(st_ctx_t *c);
int st_api_event_get(st_ctx_t *c);
int st_api_seat_map(st_ctx_t *c);
int st_api_book(st_ctx_t *c);
int st_api_booking_get(st_ctx_t *c);
int st_api_booking_confirm(st_ctx_t *c);
int st_api_booking_cancel(st_ctx_t *c);
int st_api_event_booking_get(st_ctx_t *c);
int st_api_event_bookings(st_ctx_t *c);
int st_api_event_booking_confirm(st_ctx_t *c);
int st_api_event_booking_cancel(st_ctx_t *c);
int st_api_event_booking_extend(st_ctx_t *c);
int st_api_event_booking_seats(st_ctx_t *c);
int st_api_message_post(st_ctx_t *c);
int st_api_message_list(st_ctx_t *c);
/* A posted message's content and metadata from body j into m (SPEC §2's checks: 400/413 naming
 * the field; metadata kept as the client's text) (api_chat.c). */
int st_ctx_message_body(st_ctx_t *c, const cJSON *j, st_message_in_t *m);
/* A 64-bit id in decimal (1..2^64-1) into *out; else 400 naming name (api_chat.c). */
int st_ctx_msg_id(st_ctx_t *c, const char *name, const char *v, size_t n, uint64_t *out);
/* A message listing's query (limit, order, include_deleted, after, before, cursor: SPEC §2) into
 * q, the cursor folded into after/before; a bad value is answered 400 (api_chat.c). */
int st_ctx_message_query(st_ctx_t *c, st_message_query_t *q);
int st_api_conversation_list(st_ctx_t *c);
int st_api_conversation_get(st_ctx_t *c);
int st_api_user_stats(st_ctx_t *c);
int st_api_room_create(st_ctx_t *c);
int st_api_room_get(st_ctx_t *c);
int st_api_room_members_change(st_ctx_t *c);
int st_api_room_members_list(st_ctx_t *c);
int st_api_room_member_patch(st_ctx_t *c);
int st_api_room_delete(st_ctx_t *c);
int st_api_room_typing(st_ctx_t *c);
int st_api_cluster_typing(st_ctx_t *c);
int st_api_room_presence(st_ctx_t *c);
int st_api_cluster_presence(st_ctx_t *c);
int st_api_room_message_post(st_ctx_t *c);
int st_api_room_message_list(st_ctx_t *c);
int st_api_room_read(st_ctx_t *c);
int st_api_user_rooms(st_ctx_t *c);
int st_api_user_rooms_remote(st_ctx_t *c);
int st_api_room_erasure(st_ctx_t *c);
/* api_edit.c (SPEC §2.2) */
int st_api_message_patch(st_ctx_t *c);
int st_api_message_delete(st_ctx_t *c);
int st_api_room_message_patch(st_ctx_t *c);
int st_api_room_message_delete(st_ctx_t *c);
int st_api_conversation_delete(st_ctx_t *c);
/* 202 {"erasure_id"}: an erasure was asked for (a user's or a deleted room's). */
void st_ctx_erasure_accepted(st_ctx_t *c, uint64_t id);
int st_api_user_delete(st_ctx_t *c);
int st_api_erasure_get(st_ctx_t *c);
int st_api_healthz(st_ctx_t *c);
int st_api_metrics(st_ctx_t *c);
int st_api_openapi(st_ctx_t *c);
int st_api_stream_plain(st_ctx_t *c);
int st_api_admin_flush(st_ctx_t *c);
int st_api_admin_compact(st_ctx_t *c);
int st_api_admin_reconcile(st_ctx_t *c);
int st_api_admin_outbox(st_ctx_t *c);
int st_api_admin_tables(st_ctx_t *c);
int st_api_admin_outbox_retry(st_ctx_t *c);
int st_api_admin_test_drift(st_ctx_t *c);
int st_api_cluster(st_ctx_t *c);
/* iceberg.c: the read-only Iceberg REST catalog (SPEC v5 §5.1) */
int st_api_ice_config(st_ctx_t *c);
int st_api_ice_namespaces(st_ctx_t *c);
int st_api_ice_namespace(st_ctx_t *c);
int st_api_ice_tables(st_ctx_t *c);
int st_api_ice_table(st_ctx_t *c);
int st_api_ice_metrics(st_ctx_t *c);
int st_api_ice_oauth(st_ctx_t *c);
/* Whether the request is the catalog's (its path is /iceberg or under it): its errors then take
 * Iceberg's shape (st_iceberg_error_body). */
bool st_iceberg_path(const st_http_request_t *r);
/* Iceberg's error model: {"error":{"message","type","code"}} appended to b; type NULL: the one
 * the status implies (BadRequestException, NotAuthorizedException, …). */
void st_iceberg_error_body(st_buf_t *b, int status, const char *type, const char *msg);
/* For a catalog request the router did not match (rc: ST_EMETHOD, ST_ENOTIMPL, or ST_ENOTFOUND
 * for a method other than GET and HEAD): writes 403 ForbiddenException — the catalog is
 * read-only, so any change (a create, a commit, a rename, a drop) is refused — and returns
 * true. False, writing nothing, otherwise. */
bool st_iceberg_refuse(st_ctx_t *c, int rc);
int st_api_cluster_snapshot(st_ctx_t *c);
int st_api_cluster_announce(st_ctx_t *c);
int st_api_cluster_read_index(st_ctx_t *c);
/* api_cluster.c: in a group, a member that is not the serving leader answers /v1 requests (but
 * /v1/cluster) itself — 307 to the leader or 503 no_leader. True when it answered. */
bool st_cluster_gate(st_ctx_t *c);
/* In a group, on the leader: an answer (of any status) that reports state is held until the
 * leader has proved it still leads, unless its read lease is valid (SPEC §8: linearizable
 * reads; st_repl_read_lease). Call before the handler or a replayed answer. */
void st_cluster_read_fence(st_ctx_t *c);

#endif
