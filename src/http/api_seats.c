/* SPDX-License-Identifier: MIT */
/* HTTP handlers for events, seat maps and bookings (SPEC §4). */
#include "internal.h"
#include "strata/seats.h"

#include <string.h>

/* A value in a message: "%.*s%s" with ST__V(s, n). */

/* POST /v1/events?route=event:{id} (SPEC §10): a proxy hashed the request on that key, so an
 * event_id other than the route's would be created on a node that does not own it and never be
 * found again through the proxy. */
static int st__route_names_event(st_ctx_t *c, const char *id, size_t idl)
{
    size_t n;
    const char *v = st_query_get(c->arena, c->req->query, c->req->query_len, "route", &n);
    if (!v || (n == 6 + idl && memcmp(v, "event:", 6) == 0 && memcmp(v + 6, id, idl) == 0))
        return ST_OK;
    return st_ctx_error_field(c, ST_EINVAL, "route",
                              "route names %.*s, the body's event_id is event:%.*s",
                              (int)(n > 300 ? 300 : n), v, (int)idl, id);
}

/* The fields each body takes (strict requests, SPEC §7; docs/openapi.yaml says the same). */
static const char *const st__event_fields[] = {"event_id", "name", "hold_seconds", "sections",
                                               NULL};
static const char *const st__section_fields[] = {"name", "rows", "cols", "capacity", "price", NULL};
static const char *const st__book_fields[] = {"section", "seats",         "quantity",
                                              "items",   "allow_orphans", NULL};
static const char *const st__item_fields[] = {"section", "seats", "quantity", NULL};
static const char *const st__extend_fields[] = {"seconds", NULL};
static const char *const st__seats_change_fields[] = {
    "section", "add", "remove", "add_quantity", "remove_quantity", "allow_orphans", NULL};

int st_api_event_create(st_ctx_t *c)
{
    cJSON *j;
    int rc = st_json_body(c, &j, st__event_fields);
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
            rc = cJSON_IsString(name)
                     ? st_ctx_error_field(c, ST_EINVAL, "name",
                                          "'name' must be a string of at most 1024 bytes (got %zu)",
                                          strlen(name->valuestring))
                     : st_ctx_error_field(c, ST_EINVAL, "name",
                                          "'name' must be a string of at most 1024 bytes (got %s)",
                                          st_json_kind(name));
            goto done;
        }
        spec.name = name->valuestring;
        spec.name_len = strlen(name->valuestring);
    }
    if ((rc = st_json_int(c, j, "hold_seconds", 1, 7 * 86400, 900, &spec.hold_seconds))) goto done;
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) < 1 ||
        cJSON_GetArraySize(arr) > ST_SEATS_MAX_SECTIONS) {
        if (cJSON_IsArray(arr))
            rc = st_ctx_error_field(c, ST_EINVAL, "sections",
                                    "'sections' must be an array of 1..%d sections (got %d)",
                                    ST_SEATS_MAX_SECTIONS, cJSON_GetArraySize(arr));
        else
            rc = st_ctx_error_field(c, ST_EINVAL, "sections",
                                    "'sections' must be an array of 1..%d sections (got %s)",
                                    ST_SEATS_MAX_SECTIONS, arr ? st_json_kind(arr) : "nothing");
        goto done;
    }
    const cJSON *o;
    cJSON_ArrayForEach(o, arr)
    {
        char where[32];
        snprintf(where, sizeof where, "sections[%zu]", spec.nsections);
        st_section_spec_t *sp = &secs[spec.nsections++];
        if (!cJSON_IsObject(o)) {
            rc = st_ctx_error_field(c, ST_EINVAL, where, "%s must be an object (got %s)", where,
                                    st_json_kind(o));
            goto done;
        }
        if ((rc = st_json_fields(c, o, st__section_fields, where)) ||
            (rc = st_json_name(c, o, "name", &sp->name, &sp->name_len)) ||
            (rc = st_json_int(c, o, "rows", 1, ST_SEATS_MAX_ROWS, 0, &sp->rows)) ||
            (rc = st_json_int(c, o, "cols", 1, ST_SEATS_MAX_COLS, 0, &sp->cols)) ||
            (rc = st_json_int(c, o, "capacity", 1, 100000000, 0, &sp->capacity)) ||
            (rc = st_json_int(c, o, "price", 0, 9007199254740991LL, 0, &sp->price)))
            goto done;
        if (sp->capacity && (cJSON_GetObjectItemCaseSensitive(o, "rows") ||
                             cJSON_GetObjectItemCaseSensitive(o, "cols"))) {
            rc = st_ctx_error_field(c, ST_EINVAL, where,
                                    "section \"%.*s%s\" has a capacity (general admission), so no "
                                    "rows or cols",
                                    ST__V(sp->name, sp->name_len));
            goto done;
        }
        if (!sp->capacity && (!sp->rows || !sp->cols)) {
            rc = st_ctx_error_field(c, ST_EINVAL, where,
                                    "section \"%.*s%s\" needs rows and cols, or a capacity",
                                    ST__V(sp->name, sp->name_len));
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
        return st_ctx_error_field(c, ST_EINVAL, "limit", "limit must be 1..1000 (got \"%.*s%s\")",
                                  ST__V(v, n));
    size_t clen = 0;
    const char *cursor = st_query_get(c->arena, r->query, r->query_len, "cursor", &clen);
    if (cursor && !st_name_valid(cursor, clen))
        return st_ctx_error_field(c, ST_EINVAL, "cursor",
                                  "cursor must be an event_id (got \"%.*s%s\")",
                                  ST__V(cursor, clen));
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
        return st_ctx_error_field(c, ST_EINVAL, "format",
                                  "format must be bitmap or json (got \"%.*s%s\")", ST__V(fmt, n));
    rc = st_seats_map_json(c->app->seats, c->params[0], c->plens[0], c->params[1], c->plens[1],
                           as_json, c->body, &c->wait);
    if (rc == ST_ENOTFOUND)
        return st_ctx_error(c, rc, "event \"%.*s\" or its section \"%.*s\" not found",
                            (int)c->plens[0], c->params[0], (int)c->plens[1], c->params[1]);
    if (rc == ST_EINVAL)
        return st_ctx_error(c, rc,
                            "section \"%.*s\" is general admission: it has no seat map (see its "
                            "stats)",
                            (int)c->plens[1], c->params[1]);
    return rc;
}

/* An optional array of "row-col" names (borrowed from the JSON) into names/lens. */
static int st__seat_names(st_ctx_t *c, const cJSON *arr, const char *field, const char **names,
                          size_t *lens, size_t room, size_t *n)
{
    *n = 0;
    if (!arr) return ST_OK;
    if (!cJSON_IsArray(arr))
        return st_ctx_error_field(c, ST_EINVAL, field,
                                  "'%s' must be an array of at most %d \"row-col\" names (got %s)",
                                  field, ST_SEATS_MAX_PER_BOOKING, st_json_kind(arr));
    if ((size_t)cJSON_GetArraySize(arr) > room)
        return st_ctx_error_field(c, ST_EINVAL, field,
                                  "'%s' must be an array of at most %d \"row-col\" names in all "
                                  "(got %d more)",
                                  field, ST_SEATS_MAX_PER_BOOKING, cJSON_GetArraySize(arr));
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        if (!cJSON_IsString(it))
            return st_ctx_error_field(c, ST_EINVAL, field,
                                      "each seat in '%s' must be a \"row-col\" string (got %s)",
                                      field, st_json_kind(it));
        names[*n] = it->valuestring;
        lens[(*n)++] = strlen(it->valuestring);
    }
    return ST_OK;
}

static int st__json_bool(st_ctx_t *c, const cJSON *o, const char *field, bool *out)
{
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, field) : NULL;
    *out = false;
    if (!v) return ST_OK;
    if (!cJSON_IsBool(v))
        return st_ctx_error_field(c, ST_EINVAL, field, "'%s' must be true or false (got %s)", field,
                                  st_json_kind(v));
    *out = cJSON_IsTrue(v);
    return ST_OK;
}

/* Seat names of every item of one request (a booking holds at most 100 seats in all). */
typedef struct {
    const char *names[ST_SEATS_MAX_PER_BOOKING];
    size_t lens[ST_SEATS_MAX_PER_BOOKING];
    size_t used;
} st__names_t;

/* One item of a booking: {"section","seats":[…]} or {"section","quantity":n}. */
static int st__item(st_ctx_t *c, const cJSON *o, const char *where, st_seats_item_t *it,
                    st__names_t *nm)
{
    if (!cJSON_IsObject(o))
        return st_ctx_error_field(c, ST_EINVAL, where, "%s must be an object (got %s)", where,
                                  st_json_kind(o));
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(o, "seats");
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(o, "quantity");
    int rc = st_json_name(c, o, "section", &it->section, &it->section_len);
    if (rc) return rc;
    if ((arr != NULL) == (q != NULL))
        return st_ctx_error_field(c, ST_EINVAL, arr ? "quantity" : "seats",
                                  "section \"%.*s%s\": give either 'seats' or 'quantity'%s",
                                  ST__V(it->section, it->section_len), arr ? ", not both" : "");
    if (arr) {
        size_t room = ST_SEATS_MAX_PER_BOOKING - nm->used;
        if ((rc = st__seat_names(c, arr, "seats", nm->names + nm->used, nm->lens + nm->used, room,
                                 &it->nseats)))
            return rc;
        if (!it->nseats)
            return st_ctx_error_field(
                c, ST_EINVAL, "seats",
                "'seats' must be an array of 1..%d \"row-col\" names (got [])",
                ST_SEATS_MAX_PER_BOOKING);
        it->seats = nm->names + nm->used;
        it->seat_lens = nm->lens + nm->used;
        nm->used += it->nseats;
        return ST_OK;
    }
    it->seats = NULL;
    return st_json_int(c, o, "quantity", 1, ST_SEATS_MAX_PER_BOOKING, 0, &it->quantity);
}

/* The body of a 409 seats_unavailable: the rest of the error object comes from seats. */
static void st__seats_unavailable(st_ctx_t *c, const char *msg, const st_buf_t *taken)
{
    st_buf_reset(c->body);
    st_buf_puts(c->body, "{\"error\":{\"code\":\"seats_unavailable\",\"message\":\"");
    st_buf_puts(c->body, msg);
    st_buf_puts(c->body, "\",");
    st_buf_append(c->body, taken->data, taken->len);
    st_buf_puts(c->body, "}}");
    c->status = 409;
    c->error_written = true;
}

/* Either {"items":[…]} or one item's fields at the top level. */
static int st__book_items(st_ctx_t *c, const cJSON *j, st_seats_item_t *items, st__names_t *nm,
                          size_t *n)
{
    const cJSON *arr = j ? cJSON_GetObjectItemCaseSensitive(j, "items") : NULL;
    *n = 0;
    if (!arr) {
        if (!j) return st_ctx_error(c, ST_EINVAL, "a JSON body with section or items is required");
        *n = 1;
        return st__item(c, j, "body", &items[0], nm);
    }
    static const char *const beside[] = {"section", "seats", "quantity"};
    for (size_t i = 0; i < 3; i++)
        if (cJSON_GetObjectItemCaseSensitive(j, beside[i]))
            return st_ctx_error_field(c, ST_EINVAL, beside[i],
                                      "'%s' goes inside each of 'items', not beside it", beside[i]);
    if (!cJSON_IsArray(arr))
        return st_ctx_error_field(c, ST_EINVAL, "items",
                                  "'items' must be an array of 1..%d items (got %s)",
                                  ST_SEATS_MAX_PER_BOOKING, st_json_kind(arr));
    if (cJSON_GetArraySize(arr) < 1 || cJSON_GetArraySize(arr) > ST_SEATS_MAX_PER_BOOKING)
        return st_ctx_error_field(c, ST_EINVAL, "items",
                                  "'items' must be an array of 1..%d items (got %d)",
                                  ST_SEATS_MAX_PER_BOOKING, cJSON_GetArraySize(arr));
    const cJSON *o;
    cJSON_ArrayForEach(o, arr)
    {
        char where[32];
        snprintf(where, sizeof where, "items[%zu]", *n);
        int rc = cJSON_IsObject(o) ? st_json_fields(c, o, st__item_fields, where) : ST_OK;
        if (!rc) rc = st__item(c, o, where, &items[*n], nm);
        if (rc) return rc;
        (*n)++;
    }
    return ST_OK;
}

int st_api_book(st_ctx_t *c)
{
    int rc = st_param_name(c, 0, "event_id");
    if (rc) return rc;
    cJSON *j;
    if ((rc = st_json_body(c, &j, st__book_fields))) return rc;
    st_seats_item_t items[ST_SEATS_MAX_PER_BOOKING];
    st__names_t *nm = st_arena_alloc(c->arena, sizeof *nm);
    nm->used = 0;
    size_t n = 0;
    bool orphans = false;
    if ((rc = st__book_items(c, j, items, nm, &n)) ||
        (rc = st__json_bool(c, j, "allow_orphans", &orphans)))
        goto done;
    st_buf_t taken = {0};
    const char *why = NULL;
    rc = st_seats_book_items(c->app->seats, c->params[0], c->plens[0], items, n, orphans,
                             c->subject, strlen(c->subject), c->body, &taken, &why, &c->wait);
    if (rc == ST_ESEATS)
        st__seats_unavailable(c,
                              n == 1 && items[0].seats ? "some of the seats are taken"
                                                       : "not enough seats available",
                              &taken);
    else if (rc)
        rc = st_ctx_error(c, rc, "%s", why ? why : st_strerror(rc));
    else
        c->status = 201;
    st_buf_free(&taken);
done:
    cJSON_Delete(j);
    return rc;
}

typedef int (*st__booking_fn)(st_seats_t *, uint64_t, const st_booking_ref_t *, st_buf_t *,
                              uint64_t *);

/* The booking id of a booking route, and who asks about it (ST_ENOTFOUND written). With auth
 * on, only the token subject that booked it, or an admin, may see or change it. */
static int st__booking_ref(st_ctx_t *c, bool nested, uint64_t *id, st_booking_ref_t *ref)
{
    int p = nested ? 1 : 0;
    if (nested) {
        int rc = st_param_name(c, 0, "event_id");
        if (rc) return rc;
    }
    int64_t v;
    if (st_parse_i64(c->params[p], c->plens[p], &v) || v <= 0 || c->params[p][0] == '+' ||
        c->params[p][0] == '-')
        return st_ctx_error(c, ST_ENOTFOUND, "booking not found");
    *id = (uint64_t)v;
    *ref = (st_booking_ref_t){.event_id = nested ? c->params[0] : NULL,
                              .event_len = nested ? c->plens[0] : 0,
                              .subject = c->subject,
                              .subject_len = strlen(c->subject),
                              .admin = c->admin || !st_config_auth_on(c->app->cfg)};
    return ST_OK;
}

/* Writes the answer of a booking operation: the booking (cur), or its error. */
static int st__booking_answer(st_ctx_t *c, int rc, bool nested, const st_buf_t *cur,
                              const char *why, const st_buf_t *taken)
{
    if (rc == ST_ENOTFOUND && why) {
        rc = st_ctx_error(c, rc, "%s", why);
    } else if (rc == ST_ENOTFOUND) {
        rc = nested ? st_ctx_error(c, rc, "booking not found in event '%.*s'", (int)c->plens[0],
                                   c->params[0])
                    : st_ctx_error(c, rc, "booking not found");
    } else if (rc == ST_EFORBIDDEN) {
        rc = st_ctx_error(c, rc, "the booking belongs to another subject");
    } else if (rc == ST_ECONFLICT) {
        st_buf_reset(c->body);
        st_buf_puts(c->body, "{\"error\":{\"code\":\"conflict\",\"message\":\"the booking is "
                             "no longer reserved\",\"booking\":");
        st_buf_append(c->body, cur->data, cur->len);
        st_buf_puts(c->body, "}}");
        c->status = 409;
        c->error_written = true;
    } else if (rc == ST_ESEATS) {
        st__seats_unavailable(c, "some of the seats are taken", taken);
    } else if (rc) {
        rc = st_ctx_error(c, rc, why ? "%s" : NULL, why);
    } else {
        st_buf_append(c->body, cur->data, cur->len);
    }
    return rc;
}

static int st__booking_op(st_ctx_t *c, st__booking_fn op, bool nested)
{
    uint64_t id = 0;
    st_booking_ref_t ref;
    int rc = st__booking_ref(c, nested, &id, &ref);
    if (!rc && c->req->method == ST_HTTP_POST) rc = st_json_no_fields(c); /* confirm, cancel */
    if (rc) return rc;
    st_buf_t cur = {0};
    rc = op(c->app->seats, id, &ref, &cur, &c->wait);
    rc = st__booking_answer(c, rc, nested, &cur, NULL, NULL);
    st_buf_free(&cur);
    return rc;
}

/* A nested booking route with a JSON body: the booking it names and the body (*j owned:
 * cJSON_Delete; NULL when there was none). */
static int st__booking_ref_body(st_ctx_t *c, uint64_t *id, st_booking_ref_t *ref, cJSON **j,
                                const char *const *fields)
{
    *j = NULL;
    int rc = st__booking_ref(c, true, id, ref);
    return rc ? rc : st_json_body(c, j, fields);
}

int st_api_event_booking_extend(st_ctx_t *c)
{
    uint64_t id = 0;
    st_booking_ref_t ref;
    cJSON *j;
    int rc = st__booking_ref_body(c, &id, &ref, &j, st__extend_fields);
    if (rc) return rc;
    int64_t max = (int64_t)c->app->cfg->max_hold_seconds, secs = 0;
    if (!j || !cJSON_GetObjectItemCaseSensitive(j, "seconds"))
        rc = st_ctx_error_field(c, ST_EINVAL, "seconds",
                                "a JSON body with 'seconds' (1..%lld) is required", (long long)max);
    else
        rc = st_json_int(c, j, "seconds", 1, max, 0, &secs);
    cJSON_Delete(j);
    if (rc) return rc;
    st_buf_t cur = {0};
    const char *why = NULL;
    rc = st_seats_extend(c->app->seats, id, &ref, secs, &cur, &why, &c->wait);
    rc = st__booking_answer(c, rc, true, &cur, why, NULL);
    st_buf_free(&cur);
    return rc;
}

/* {"section"?,"add"?:[…],"remove"?:[…],"add_quantity"?,"remove_quantity"?,"allow_orphans"?} */
static int st__change_body(st_ctx_t *c, const cJSON *j, st_seats_change_t *ch, st__names_t *add,
                           st__names_t *rm)
{
    if (!j) return st_ctx_error(c, ST_EINVAL, "a JSON body with add, remove or add_quantity");
    const cJSON *sec = cJSON_GetObjectItemCaseSensitive(j, "section");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "add");
    const cJSON *aq = cJSON_GetObjectItemCaseSensitive(j, "add_quantity");
    int rc = sec ? st_json_name(c, j, "section", &ch->section, &ch->section_len) : ST_OK;
    if (!rc)
        rc =
            st__seat_names(c, a, "add", add->names, add->lens, ST_SEATS_MAX_PER_BOOKING, &ch->nadd);
    if (!rc)
        rc = st__seat_names(c, cJSON_GetObjectItemCaseSensitive(j, "remove"), "remove", rm->names,
                            rm->lens, ST_SEATS_MAX_PER_BOOKING, &ch->nremove);
    if (!rc)
        rc = st_json_int(c, j, "add_quantity", 1, ST_SEATS_MAX_PER_BOOKING, 0, &ch->add_quantity);
    if (!rc)
        rc = st_json_int(c, j, "remove_quantity", 1, ST_SEATS_MAX_PER_BOOKING, 0,
                         &ch->remove_quantity);
    if (!rc) rc = st__json_bool(c, j, "allow_orphans", &ch->allow_orphans);
    if (rc) return rc;
    if (a && aq)
        return st_ctx_error_field(c, ST_EINVAL, "add_quantity",
                                  "give 'add' or 'add_quantity', not both");
    if (!ch->nadd && !ch->nremove && !ch->add_quantity && !ch->remove_quantity)
        return st_ctx_error(c, ST_EINVAL, "nothing to change: give add, remove or add_quantity");
    ch->add = add->names;
    ch->add_lens = add->lens;
    ch->remove = rm->names;
    ch->remove_lens = rm->lens;
    return ST_OK;
}

int st_api_event_booking_seats(st_ctx_t *c)
{
    uint64_t id = 0;
    st_booking_ref_t ref;
    cJSON *j;
    int rc = st__booking_ref_body(c, &id, &ref, &j, st__seats_change_fields);
    if (rc) return rc;
    st__names_t *nm = st_arena_alloc(c->arena, 2 * sizeof *nm);
    st_seats_change_t ch = {0};
    rc = st__change_body(c, j, &ch, &nm[0], &nm[1]);
    if (!rc) {
        st_buf_t cur = {0}, taken = {0};
        const char *why = NULL;
        rc = st_seats_change(c->app->seats, id, &ref, &ch, &cur, &taken, &why, &c->wait);
        rc = st__booking_answer(c, rc, true, &cur, why, &taken);
        st_buf_free(&cur);
        st_buf_free(&taken);
    }
    cJSON_Delete(j);
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
