/* SPDX-License-Identifier: MIT */
/* GET /v1/events/{id}/bookings (SPEC §4.2): an event's bookings, newest first, by status and
 * owner, paged; with auth on, a subject other than an admin lists only its own. */
#include "internal.h"
#include "strata/seats.h"

#include <string.h>

int st_api_event_bookings(st_ctx_t *c)
{
    int rc = st_param_name(c, 0, "event_id");
    if (rc) return rc;
    const st_http_request_t *r = c->req;
    st_bookings_query_t q = {.event_id = c->params[0], .event_len = c->plens[0], .limit = 50};
    size_t n;
    const char *v = st_query_get(c->arena, r->query, r->query_len, "limit", &n);
    int64_t limit;
    if (v && (st_parse_i64(v, n, &limit) || limit < 1 || limit > 1000))
        return st_ctx_error_field(c, ST_EINVAL, "limit", "limit must be 1..1000 (got \"%.*s%s\")",
                                  ST__V(v, n));
    if (v) q.limit = (size_t)limit;
    v = st_query_get(c->arena, r->query, r->query_len, "status", &n);
    if (v && !(q.status = st_seats_status(v, n)))
        return st_ctx_error_field(c, ST_EINVAL, "status",
                                  "status must be reserved, sold, cancelled or expired (got "
                                  "\"%.*s%s\")",
                                  ST__V(v, n));
    v = st_query_get(c->arena, r->query, r->query_len, "owner", &n);
    if (v && !st_name_valid(v, n))
        return st_ctx_error_field(c, ST_EINVAL, "owner", "owner must be a name (got \"%.*s%s\")",
                                  ST__V(v, n));
    q.owner = v;
    q.owner_len = v ? n : 0;
    v = st_query_get(c->arena, r->query, r->query_len, "cursor", &n);
    int64_t cur;
    if (v && (st_parse_i64(v, n, &cur) || cur <= 0 || v[0] == '+' || v[0] == '-'))
        return st_ctx_error_field(c, ST_EINVAL, "cursor",
                                  "cursor must be a booking_id, a page's next (got \"%.*s%s\")",
                                  ST__V(v, n));
    q.cursor = v ? (uint64_t)cur : 0;
    if (!c->admin && st_config_auth_on(c->app->cfg)) { /* only its own */
        size_t sl = strlen(c->subject);
        if (q.owner && (q.owner_len != sl || memcmp(q.owner, c->subject, sl) != 0))
            return st_ctx_error(c, ST_EFORBIDDEN, "only an admin lists another subject's bookings");
        q.owner = c->subject;
        q.owner_len = sl;
    }
    rc = st_seats_bookings_json(c->app->seats, &q, c->body, &c->wait);
    if (rc == ST_ENOTFOUND)
        return st_ctx_error(c, rc, "event '%.*s' not found", (int)c->plens[0], c->params[0]);
    return rc;
}
