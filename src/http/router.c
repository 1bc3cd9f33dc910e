/* SPDX-License-Identifier: MIT */
/* The route table and path matching. Routes are few; a linear scan over segments is fastest. */
#include "internal.h"

#include <string.h>

/* The query parameters each route takes (SPEC §2, §2.1, §4, §4.2, §10; docs/openapi.yaml says
 * the same); a route with NULL takes none. The handlers read them (api_*.c). */
const char *const st_stream_query[] = {"route", "access_token", NULL};
static const char *const st__q_route[] = {"route", NULL}; /* a key the path does not name */
static const char *const st__q_page[] = {"limit", "cursor", NULL};
static const char *const st__q_limit[] = {"limit", NULL};
static const char *const st__q_messages[] = {
    "conversation_id", "after", "before", "limit", "order", "include_deleted", "cursor", NULL};
static const char *const st__q_room_messages[] = {"after",           "before", "limit", "order",
                                                  "include_deleted", "cursor", NULL};
static const char *const st__q_seat_map[] = {"format", NULL};
static const char *const st__q_bookings[] = {"status", "owner", "limit", "cursor", NULL};
/* the Iceberg REST catalog's (SPEC v5 §5.1): taken as Iceberg's clients send them, one page */
static const char *const st__q_ice_config[] = {"warehouse", NULL};
static const char *const st__q_ice_namespaces[] = {"parent", "pageToken", "pageSize", NULL};
static const char *const st__q_ice_tables[] = {"pageToken", "pageSize", NULL};
static const char *const st__q_ice_table[] = {"snapshots", NULL};

const st_route_t st_routes[] = {
    {ST_HTTP_GET, "/healthz", st_api_healthz, ST_ROUTE_OPEN, NULL},
    {ST_HTTP_GET, "/metrics", st_api_metrics, ST_ROUTE_OPEN, NULL},
    {ST_HTTP_GET, "/v1/openapi.json", st_api_openapi, ST_ROUTE_OPEN, NULL},
    {ST_HTTP_GET, "/v1/cluster", st_api_cluster, 0, NULL},
    /* a stream without its upgrade: 426 (upgrades are taken before dispatch, conn.c) */
    {ST_HTTP_GET, "/v1/stream", st_api_stream_plain, ST_ROUTE_OPEN, st_stream_query},
    {ST_HTTP_POST, "/v1/cluster/snapshot", st_api_cluster_snapshot, ST_ROUTE_INTERNAL, NULL},
    {ST_HTTP_POST, "/v1/cluster/announce", st_api_cluster_announce, ST_ROUTE_INTERNAL, NULL},
    {ST_HTTP_POST, "/v1/cluster/read-index", st_api_cluster_read_index, ST_ROUTE_INTERNAL, NULL},
    {ST_HTTP_POST, "/v1/cluster/typing", st_api_cluster_typing,
     ST_ROUTE_INTERNAL | ST_ROUTE_NOSTAGE, NULL},
    {ST_HTTP_POST, "/v1/cluster/presence", st_api_cluster_presence,
     ST_ROUTE_INTERNAL | ST_ROUTE_NOSTAGE, NULL},
    {ST_HTTP_POST, "/v1/admin/flush", st_api_admin_flush, ST_ROUTE_ADMIN | ST_ROUTE_NOSTAGE, NULL},
    {ST_HTTP_POST, "/v1/admin/compact", st_api_admin_compact, ST_ROUTE_ADMIN, NULL},
    {ST_HTTP_POST, "/v1/admin/reconcile", st_api_admin_reconcile, ST_ROUTE_ADMIN, NULL},
    {ST_HTTP_GET, "/v1/admin/tables", st_api_admin_tables, ST_ROUTE_ADMIN, NULL},
    {ST_HTTP_POST, "/v1/admin/test/drift", st_api_admin_test_drift, ST_ROUTE_ADMIN, NULL},
    /* the rooms outbox's pending records and dead letters (SPEC §10) */
    {ST_HTTP_GET, "/v1/admin/outbox", st_api_admin_outbox, ST_ROUTE_ADMIN, st__q_limit},
    {ST_HTTP_POST, "/v1/admin/outbox/{id}/retry", st_api_admin_outbox_retry, ST_ROUTE_ADMIN, NULL},
    {ST_HTTP_POST, "/v1/counters/{name}/incr", st_api_counter_incr, ST_ROUTE_IDEMPOTENT, NULL},
    {ST_HTTP_POST, "/v1/counters/{name}/distinct", st_api_counter_distinct, ST_ROUTE_IDEMPOTENT,
     NULL},
    {ST_HTTP_GET, "/v1/counters/{name}", st_api_counter_get, 0, NULL},
    {ST_HTTP_POST, "/v1/sequences/{name}/next", st_api_sequence_next, ST_ROUTE_IDEMPOTENT, NULL},
    {ST_HTTP_GET, "/v1/sequences/{name}", st_api_sequence_get, 0, NULL},
    {ST_HTTP_POST, "/v1/users/{user}/messages", st_api_message_post,
     ST_ROUTE_IDEMPOTENT | ST_ROUTE_USER, NULL},
    {ST_HTTP_GET, "/v1/users/{user}/messages", st_api_message_list, ST_ROUTE_USER, st__q_messages},
    {ST_HTTP_GET, "/v1/users/{user}/conversations", st_api_conversation_list, ST_ROUTE_USER,
     st__q_page},
    {ST_HTTP_GET, "/v1/users/{user}/conversations/{cid}", st_api_conversation_get, ST_ROUTE_USER,
     NULL},
    {ST_HTTP_GET, "/v1/users/{user}/stats", st_api_user_stats, ST_ROUTE_USER, NULL},
    /* rooms (SPEC §2.1): who may do what is the handlers' (api_rooms.c) */
    {ST_HTTP_POST, "/v1/rooms", st_api_room_create, ST_ROUTE_IDEMPOTENT, st__q_route},
    {ST_HTTP_GET, "/v1/rooms/{room}", st_api_room_get, 0, NULL},
    {ST_HTTP_DELETE, "/v1/rooms/{room}", st_api_room_delete, ST_ROUTE_IDEMPOTENT, NULL},
    {ST_HTTP_POST, "/v1/rooms/{room}/members", st_api_room_members_change, ST_ROUTE_IDEMPOTENT,
     NULL},
    {ST_HTTP_GET, "/v1/rooms/{room}/members", st_api_room_members_list, 0, st__q_page},
    {ST_HTTP_PATCH, "/v1/rooms/{room}/members/{user}", st_api_room_member_patch,
     ST_ROUTE_IDEMPOTENT, NULL},
    {ST_HTTP_POST, "/v1/rooms/{room}/messages", st_api_room_message_post, ST_ROUTE_IDEMPOTENT,
     NULL},
    {ST_HTTP_GET, "/v1/rooms/{room}/messages", st_api_room_message_list, 0, st__q_room_messages},
    {ST_HTTP_PATCH, "/v1/rooms/{room}/messages/{msg_id}", st_api_room_message_patch,
     ST_ROUTE_IDEMPOTENT, NULL},
    {ST_HTTP_DELETE, "/v1/rooms/{room}/messages/{msg_id}", st_api_room_message_delete,
     ST_ROUTE_IDEMPOTENT, NULL},
    {ST_HTTP_POST, "/v1/rooms/{room}/read", st_api_room_read, ST_ROUTE_IDEMPOTENT, NULL},
    {ST_HTTP_POST, "/v1/rooms/{room}/typing", st_api_room_typing, ST_ROUTE_NOSTAGE, NULL},
    {ST_HTTP_GET, "/v1/rooms/{room}/presence", st_api_room_presence, 0, NULL},
    {ST_HTTP_GET, "/v1/users/{user}/rooms", st_api_user_rooms, 0, st__q_page},
    /* a room's group tells a user's group (SPEC §10, the rooms outbox) */
    {ST_HTTP_POST, "/v1/users/{user}/rooms/remote", st_api_user_rooms_remote,
     ST_ROUTE_INTERNAL | ST_ROUTE_IDEMPOTENT, st__q_route},
    /* a user's group tells a room's group the user is erased (SPEC §2.2, §10, the outbox) */
    {ST_HTTP_POST, "/v1/rooms/{room}/erasures", st_api_room_erasure,
     ST_ROUTE_INTERNAL | ST_ROUTE_IDEMPOTENT, st__q_route},
    {ST_HTTP_PATCH, "/v1/users/{user}/messages/{msg_id}", st_api_message_patch,
     ST_ROUTE_IDEMPOTENT | ST_ROUTE_USER | ST_ROUTE_USER_ADMIN, NULL},
    {ST_HTTP_DELETE, "/v1/users/{user}/messages/{msg_id}", st_api_message_delete,
     ST_ROUTE_IDEMPOTENT | ST_ROUTE_USER | ST_ROUTE_USER_ADMIN, NULL},
    {ST_HTTP_DELETE, "/v1/users/{user}/conversations/{cid}", st_api_conversation_delete,
     ST_ROUTE_IDEMPOTENT | ST_ROUTE_USER | ST_ROUTE_USER_ADMIN, NULL},
    {ST_HTTP_DELETE, "/v1/users/{user}", st_api_user_delete,
     ST_ROUTE_IDEMPOTENT | ST_ROUTE_USER | ST_ROUTE_USER_ADMIN, NULL},
    /* an admin's, or the erased user's own (its token revoked by that erasure too): the
     * handler's (api_edit.c) */
    {ST_HTTP_GET, "/v1/admin/erasures/{id}", st_api_erasure_get, ST_ROUTE_REVOKED_OK, NULL},
    {ST_HTTP_POST, "/v1/events", st_api_event_create, ST_ROUTE_IDEMPOTENT | ST_ROUTE_ADMIN,
     st__q_route},
    {ST_HTTP_GET, "/v1/events", st_api_event_list, 0, st__q_page},
    {ST_HTTP_GET, "/v1/events/{id}", st_api_event_get, 0, NULL},
    {ST_HTTP_GET, "/v1/events/{id}/sections/{section}/seats", st_api_seat_map, 0, st__q_seat_map},
    {ST_HTTP_POST, "/v1/events/{id}/bookings", st_api_book, ST_ROUTE_IDEMPOTENT, NULL},
    {ST_HTTP_GET, "/v1/bookings/{id}", st_api_booking_get, 0, NULL},
    {ST_HTTP_POST, "/v1/bookings/{id}/confirm", st_api_booking_confirm, ST_ROUTE_IDEMPOTENT, NULL},
    {ST_HTTP_POST, "/v1/bookings/{id}/cancel", st_api_booking_cancel, ST_ROUTE_IDEMPOTENT, NULL},
    /* bookings routed by event (SPEC §4, §10) */
    {ST_HTTP_GET, "/v1/events/{id}/bookings", st_api_event_bookings, 0, st__q_bookings},
    {ST_HTTP_GET, "/v1/events/{id}/bookings/{bid}", st_api_event_booking_get, 0, NULL},
    {ST_HTTP_POST, "/v1/events/{id}/bookings/{bid}/confirm", st_api_event_booking_confirm,
     ST_ROUTE_IDEMPOTENT, NULL},
    {ST_HTTP_POST, "/v1/events/{id}/bookings/{bid}/cancel", st_api_event_booking_cancel,
     ST_ROUTE_IDEMPOTENT, NULL},
    {ST_HTTP_POST, "/v1/events/{id}/bookings/{bid}/extend", st_api_event_booking_extend,
     ST_ROUTE_IDEMPOTENT, NULL},
    {ST_HTTP_POST, "/v1/events/{id}/bookings/{bid}/seats", st_api_event_booking_seats,
     ST_ROUTE_IDEMPOTENT, NULL},
    /* the read-only Iceberg REST catalog (SPEC v5 §5.1, iceberg.c): an admin's; errors in
     * Iceberg's shape, and anything else under /iceberg that is not a read is 403 */
    {ST_HTTP_GET, "/iceberg/v1/config", st_api_ice_config, ST_ROUTE_ADMIN, st__q_ice_config},
    {ST_HTTP_GET, "/iceberg/v1/namespaces", st_api_ice_namespaces, ST_ROUTE_ADMIN,
     st__q_ice_namespaces},
    {ST_HTTP_GET, "/iceberg/v1/namespaces/{namespace}", st_api_ice_namespace, ST_ROUTE_ADMIN, NULL},
    {ST_HTTP_GET, "/iceberg/v1/namespaces/{namespace}/tables", st_api_ice_tables, ST_ROUTE_ADMIN,
     st__q_ice_tables},
    {ST_HTTP_GET, "/iceberg/v1/namespaces/{namespace}/tables/{table}", st_api_ice_table,
     ST_ROUTE_ADMIN, st__q_ice_table},
    {ST_HTTP_POST, "/iceberg/v1/namespaces/{namespace}/tables/{table}/metrics", st_api_ice_metrics,
     ST_ROUTE_ADMIN | ST_ROUTE_NOSTAGE, NULL},
    {ST_HTTP_POST, "/iceberg/v1/oauth/tokens", st_api_ice_oauth,
     ST_ROUTE_OPEN | ST_ROUTE_NOSTAGE | ST_ROUTE_ANY_BODY, NULL},
};
const size_t st_nroutes = sizeof st_routes / sizeof st_routes[0];

/* Matches one pattern; fills raw (undecoded) params. */
static bool st__match(const char *pat, const char *path, size_t plen, const char **raw,
                      size_t *rlen, int *nparams)
{
    const char *p = path, *end = path + plen;
    int n = 0;
    while (*pat) {
        if (*pat == '{') {
            const char *close = strchr(pat, '}');
            const char *seg_end = memchr(p, '/', (size_t)(end - p));
            if (!seg_end) seg_end = end;
            if (n == ST_MAX_PARAMS) return false;
            raw[n] = p;
            rlen[n++] = (size_t)(seg_end - p);
            p = seg_end;
            pat = close + 1;
            continue;
        }
        if (p == end || *p != *pat) return false;
        p++;
        pat++;
    }
    *nparams = n;
    return p == end;
}

/* HTTP's own methods (RFC 9110, and PATCH): anything else llhttp knows (WebDAV, RTSP, ...)
 * strata does not implement for any resource, which is 501 rather than 405. */
static bool st__method_known(const char *m)
{
    static const char *const known[] = {"GET",     "HEAD",  "POST",  "PUT",    "DELETE",
                                        "OPTIONS", "PATCH", "TRACE", "CONNECT"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(m, known[i]) == 0) return true;
    return false;
}

int st_router_match(st_ctx_t *c, const st_route_t **route)
{
    const st_http_request_t *r = c->req;
    if (r->method_name && !st__method_known(r->method_name)) return ST_ENOTIMPL;
    const char *raw[ST_MAX_PARAMS];
    size_t rlen[ST_MAX_PARAMS];
    int nparams = 0;
    bool path_known = false;
    char allow[64] = "";
    for (size_t i = 0; i < st_nroutes; i++) {
        if (!st__match(st_routes[i].pattern, r->path, r->path_len, raw, rlen, &nparams)) continue;
        /* HEAD is GET without the body (the response writer drops it). */
        int method = r->method == ST_HTTP_HEAD ? ST_HTTP_GET : r->method;
        if (st_routes[i].method != method) {
            path_known = true;
            int rm = st_routes[i].method;
            const char *m = rm == ST_HTTP_GET      ? "GET, HEAD"
                            : rm == ST_HTTP_PATCH  ? "PATCH"
                            : rm == ST_HTTP_DELETE ? "DELETE"
                            : rm == ST_HTTP_PUT    ? "PUT"
                                                   : "POST";
            if (!strstr(allow, m)) {
                if (*allow) strcat(allow, ", ");
                strcat(allow, m);
            }
            continue;
        }
        for (int k = 0; k < nparams; k++) {
            c->params[k] = st_url_decode(c->arena, raw[k], rlen[k], &c->plens[k]);
            if (!c->params[k]) return ST_EINVAL;
        }
        *route = &st_routes[i];
        return ST_OK;
    }
    if (path_known) {
        char *h = st_arena_alloc(c->arena, sizeof allow + 16);
        strcpy(h, "Allow: ");
        strcat(h, allow);
        strcat(h, "\r\n");
        c->extra_headers = h;
        return ST_EMETHOD;
    }
    return ST_ENOTFOUND;
}

int st_ctx_query_check(st_ctx_t *c, const char *const *known)
{
    const st_http_request_t *r = c->req;
    st_query_fault_t f;
    if (!r->query_len || st_query_check(r->query, r->query_len, known, &f) == ST_OK) return ST_OK;
    char name[ST_CLIP_MAX + 16];
    st_query_fault_name(&f, name, sizeof name);
    switch (f.fault) {
    case ST_QUERY_UNKNOWN: {
        /* the names this route takes, so a typo (?limt=) shows its fix */
        char takes[200] = "none";
        size_t n = 0;
        for (size_t i = 0; known && known[i] && n < sizeof takes; i++)
            n += (size_t)snprintf(takes + n, sizeof takes - n, "%s%s", i ? ", " : "", known[i]);
        return st_ctx_error_field(c, ST_EINVAL, name,
                                  "unknown query parameter \"%s\" (this route takes %s)", name,
                                  takes);
    }
    case ST_QUERY_TWICE:
        return st_ctx_error_field(c, ST_EINVAL, name, "query parameter \"%s\" given twice", name);
    case ST_QUERY_BAD_NAME:
        return st_ctx_error_field(c, ST_EINVAL, name,
                                  "query parameter \"%s\": malformed percent-escape or %%00 in "
                                  "its name",
                                  name);
    case ST_QUERY_BAD_VALUE:
    default:
        return st_ctx_error_field(c, ST_EINVAL, name,
                                  "query parameter \"%s\": malformed percent-escape or %%00 in "
                                  "its value",
                                  name);
    }
}
