/* SPDX-License-Identifier: MIT */
/* HTTP handlers for events, seat maps and bookings (SPEC §4). */
#include "internal.h"
#include "strata/seats.h"

#include <string.h>

/* POST /v1/events?route=event:{id} (SPEC §10): a proxy hashed the request on that key, so an
 * event_id other than the route's would be created on a node that does not own it and never be
 * found again through the proxy. */
static int st__route_names_event(st_ctx_t *c, const char *id, size_t idl)
{
    size_t n;
    const char *v = st_query_get(c->arena, c->req->query, c->req->query_len, "route", &n);
    if (!v || (n == 6 + idl && memcmp(v, "event:", 6) == 0 && memcmp(v + 6, id, idl) == 0))
        return ST_OK;
    return st_ctx_error(c, ST_EINVAL, "route names %.*s, the body's event_id is event:%.*s",
                        (int)(n > 300 ? 300 : n), v, (int)idl, id);
}

int st_api_event_create(st_ctx_t *c)
{
    cJSON *j;
    int rc = st_json_body(c, &j);
    if (rc) return rc;
    if (!j) return st_ctx_error(c, ST_EINVAL, "a JSON body with event_id and sections is required");
    st_event_spec_t spec = {0};
    st_section_spec_t secs[ST_SEATS_MAX_SECTIONS];
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "sections");
    if ((rc = st_json_name(c, j, "event_id", &spec.event_id, &spec.id_len))) goto done;
    if ((rc = st__route_names_event(c, spec.event_id, spec.id_len))) goto done;
    if (name && !cJSON_IsNull(name)) {
        if (!cJSON_IsString(name) || strlen(name->valuestring) > 1024) {
            rc = st_ctx_error(c, ST_EINVAL, "'name' must be a string of at most 1024 bytes");
            goto done;
        }
        spec.name = name->valuestring;
        spec.name_len = strlen(name->valuestring);
    }
    if ((rc = st_json_int(c, j, "hold_seconds", 1, 7 * 86400, 900, &spec.hold_seconds))) goto done;
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) < 1 ||
        cJSON_GetArraySize(arr) > ST_SEATS_MAX_SECTIONS) {
        rc = st_ctx_error(c, ST_EINVAL, "'sections' must be an array of 1..%d sections",
                          ST_SEATS_MAX_SECTIONS);
        goto done;
    }
    const cJSON *o;
    cJSON_ArrayForEach(o, arr)
    {
        st_section_spec_t *sp = &secs[spec.nsections++];
        if (!cJSON_IsObject(o)) {
            rc = st_ctx_error(c, ST_EINVAL, "each section must be an object");
            goto done;
        }
        if ((rc = st_json_name(c, o, "name", &sp->name, &sp->name_len)) ||
            (rc = st_json_int(c, o, "rows", 1, ST_SEATS_MAX_ROWS, 0, &sp->rows)) ||
            (rc = st_json_int(c, o, "cols", 1, ST_SEATS_MAX_COLS, 0, &sp->cols)) ||
            (rc = st_json_int(c, o, "price", 0, 9007199254740991LL, 0, &sp->price)))
            goto done;
        if (!sp->rows || !sp->cols) {
            rc = st_ctx_error(c, ST_EINVAL, "each section needs rows and cols");
            goto done;
        }
    }
    spec.sections = secs;
    const char *why = NULL;
    rc = st_seats_create(c->app->seats, &spec, c->body, &why, &c->wait);
    if (rc == ST_ECONFLICT)
        rc = st_ctx_error(c, rc, "event '%.*s' already exists", (int)spec.id_len, spec.event_id);
    else if (rc)
        rc = st_ctx_error(c, rc, "%s", why ? why : st_strerror(rc));
    else
        c->status = 201;
done:
    cJSON_Delete(j);
    return rc;
}

int st_api_event_list(st_ctx_t *c)
{
    const st_http_request_t *r = c->req;
    size_t n;
    int64_t limit = 20;
    const char *v = st_query_get(c->arena, r->query, r->query_len, "limit", &n);
    if (v && (st_parse_i64(v, n, &limit) || limit < 1 || limit > 1000))
        return st_ctx_error(c, ST_EINVAL, "limit must be 1..1000");
    size_t clen = 0;
    const char *cursor = st_query_get(c->arena, r->query, r->query_len, "cursor", &clen);
    if (cursor && !st_name_valid(cursor, clen)) return st_ctx_error(c, ST_EINVAL, "bad cursor");
    return st_seats_list_json(c->app->seats, cursor, clen, (size_t)limit, c->body, &c->wait);
}

int st_api_event_get(st_ctx_t *c)
{
    int rc = st_param_name(c, 0, "event_id");
    if (rc) return rc;
    rc = st_seats_event_json(c->app->seats, c->params[0], c->plens[0], c->body, &c->wait);
    if (rc == ST_ENOTFOUND)
        return st_ctx_error(c, rc, "event '%.*s' not found", (int)c->plens[0], c->params[0]);
    return rc;
}

int st_api_seat_map(st_ctx_t *c)
{
    int rc = st_param_name(c, 0, "event_id");
    if (!rc) rc = st_param_name(c, 1, "section");
    if (rc) return rc;
    size_t n;
    const char *fmt = st_query_get(c->arena, c->req->query, c->req->query_len, "format", &n);
    bool as_json = fmt && strcmp(fmt, "json") == 0;
    if (fmt && !as_json && strcmp(fmt, "bitmap") != 0)
        return st_ctx_error(c, ST_EINVAL, "format must be bitmap or json");
    rc = st_seats_map_json(c->app->seats, c->params[0], c->plens[0], c->params[1], c->plens[1],
                           as_json, c->body, &c->wait);
    if (rc == ST_ENOTFOUND) return st_ctx_error(c, rc, "event or section not found");
    return rc;
}

int st_api_book(st_ctx_t *c)
{
    int rc = st_param_name(c, 0, "event_id");
    if (rc) return rc;
    cJSON *j;
    if ((rc = st_json_body(c, &j))) return rc;
    const char *section;
    size_t slen;
    const char *seats[ST_SEATS_MAX_PER_BOOKING];
    size_t lens[ST_SEATS_MAX_PER_BOOKING];
    size_t nseats = 0;
    int64_t quantity = 0;
    const cJSON *arr = j ? cJSON_GetObjectItemCaseSensitive(j, "seats") : NULL;
    const cJSON *q = j ? cJSON_GetObjectItemCaseSensitive(j, "quantity") : NULL;
    if ((rc = st_json_name(c, j, "section", &section, &slen))) goto done;
    if ((arr != NULL) == (q != NULL)) {
        rc = st_ctx_error(c, ST_EINVAL, "give either 'seats' or 'quantity'");
        goto done;
    }
    if (arr) {
        if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) < 1 ||
            cJSON_GetArraySize(arr) > ST_SEATS_MAX_PER_BOOKING) {
            rc = st_ctx_error(c, ST_EINVAL, "'seats' must be an array of 1..%d \"row-col\" names",
                              ST_SEATS_MAX_PER_BOOKING);
            goto done;
        }
        const cJSON *it;
        cJSON_ArrayForEach(it, arr)
        {
            if (!cJSON_IsString(it)) {
                rc = st_ctx_error(c, ST_EINVAL, "each seat must be a \"row-col\" string");
                goto done;
            }
            seats[nseats] = it->valuestring;
            lens[nseats++] = strlen(it->valuestring);
        }
    } else if ((rc = st_json_int(c, j, "quantity", 1, ST_SEATS_MAX_PER_BOOKING, 0, &quantity))) {
        goto done;
    }
    st_buf_t taken = {0};
    const char *why = NULL;
    rc = st_seats_book(c->app->seats, c->params[0], c->plens[0], section, slen, arr ? seats : NULL,
                       lens, nseats, quantity, c->subject, strlen(c->subject), c->body, &taken,
                       &why, &c->wait);
    if (rc == ST_ESEATS) {
        st_buf_reset(c->body);
        st_buf_puts(c->body, "{\"error\":{\"code\":\"seats_unavailable\",\"message\":");
        st_buf_puts(c->body,
                    arr ? "\"some of the seats are taken\"" : "\"not enough seats available\"");
        st_buf_puts(c->body, ",\"seats\":");
        st_buf_append(c->body, taken.data, taken.len);
        st_buf_puts(c->body, "}}");
        c->status = 409;
        c->error_written = true;
    } else if (rc) {
        rc = st_ctx_error(c, rc, "%s", why ? why : st_strerror(rc));
    } else {
        c->status = 201;
    }
    st_buf_free(&taken);
done:
    cJSON_Delete(j);
    return rc;
}

typedef int (*st__booking_fn)(st_seats_t *, uint64_t, const st_booking_ref_t *, st_buf_t *,
                              uint64_t *);

/* A booking by id, optionally within its event (nested routes). With auth on, only the token
 * subject that booked it, or an admin, may see or change it. */
static int st__booking_op(st_ctx_t *c, st__booking_fn op, bool nested)
{
    int p = nested ? 1 : 0;
    if (nested) {
        int rc = st_param_name(c, 0, "event_id");
        if (rc) return rc;
    }
    int64_t id;
    if (st_parse_i64(c->params[p], c->plens[p], &id) || id <= 0 || c->params[p][0] == '+' ||
        c->params[p][0] == '-')
        return st_ctx_error(c, ST_ENOTFOUND, "booking not found");
    st_booking_ref_t ref = {.event_id = nested ? c->params[0] : NULL,
                            .event_len = nested ? c->plens[0] : 0,
                            .subject = c->subject,
                            .subject_len = strlen(c->subject),
                            .admin = c->admin || !*c->app->cfg->jwt_secret};
    st_buf_t cur = {0};
    int rc = op(c->app->seats, (uint64_t)id, &ref, &cur, &c->wait);
    if (rc == ST_ENOTFOUND) {
        rc = nested ? st_ctx_error(c, rc, "booking not found in event '%.*s'", (int)c->plens[0],
                                   c->params[0])
                    : st_ctx_error(c, rc, "booking not found");
    } else if (rc == ST_EFORBIDDEN) {
        rc = st_ctx_error(c, rc, "the booking belongs to another subject");
    } else if (rc == ST_ECONFLICT) {
        st_buf_reset(c->body);
        st_buf_puts(c->body, "{\"error\":{\"code\":\"conflict\",\"message\":\"the booking is "
                             "no longer reserved\",\"booking\":");
        st_buf_append(c->body, cur.data, cur.len);
        st_buf_puts(c->body, "}}");
        c->status = 409;
        c->error_written = true;
    } else if (rc) {
        rc = st_ctx_error(c, rc, NULL);
    } else {
        st_buf_append(c->body, cur.data, cur.len);
    }
    st_buf_free(&cur);
    return rc;
}

int st_api_booking_get(st_ctx_t *c)
{
    return st__booking_op(c, st_seats_booking_json, false);
}

int st_api_booking_confirm(st_ctx_t *c)
{
    return st__booking_op(c, st_seats_confirm, false);
}

int st_api_booking_cancel(st_ctx_t *c)
{
    return st__booking_op(c, st_seats_cancel, false);
}

int st_api_event_booking_get(st_ctx_t *c)
{
    return st__booking_op(c, st_seats_booking_json, true);
}

int st_api_event_booking_confirm(st_ctx_t *c)
{
    return st__booking_op(c, st_seats_confirm, true);
}

int st_api_event_booking_cancel(st_ctx_t *c)
{
    return st__booking_op(c, st_seats_cancel, true);
}
