/* SPDX-License-Identifier: MIT */
/*
 * One request to one response: routing, Idempotency-Key replay, the handler, and the error body.
 * The response is built here but released by the connection only once `wait` is durable.
 * A handler that needs cold data not in memory returns ST_EPARKED: no response yet (server.c
 * parks the request and dispatches it again when the data has arrived).
 */
#include "internal.h"

#include <string.h>
#include <strings.h>

static bool st__idem_key_valid(const char *k, size_t n)
{
    if (n == 0 || n > 255) return false;
    for (size_t i = 0; i < n; i++)
        if (k[i] < 0x21 || k[i] > 0x7e) return false;
    return true;
}

/* Strict requests (SPEC §7): a body sent with a Content-Type other than application/json
 * (parameters such as charset allowed, any case) is 415; a request without a body needs none.
 * Browsers send a cross-site form, a text/plain POST or a POST of bytes or of a Blob without a
 * type (no Content-Type at all) without a CORS preflight; refusing those keeps a web page from
 * writing to an open strata on localhost. A body with no Content-Type is read as JSON (SPEC
 * names only "other than": scripts and tools often send none) unless it comes from a browser,
 * which always sends Origin on a cross-site POST: then it is 415 too. Writes the 415; true when
 * it did. */
static bool st__media_refused(st_ctx_t *c)
{
    const st_http_request_t *r = c->req;
    if (!r->body_len) return false;
    if (!r->content_type) {
        if (!r->origin) return false;
        st_ctx_error(c, ST_EMEDIA,
                     "a body from a browser (Origin) needs Content-Type: application/json");
        return true;
    }
    const char *v = r->content_type;
    size_t n = r->content_type_len, i = 0;
    while (i < n && (v[i] == ' ' || v[i] == '\t'))
        i++;
    size_t end = i;
    while (end < n && v[end] != ';')
        end++;
    size_t e = end;
    while (e > i && (v[e - 1] == ' ' || v[e - 1] == '\t'))
        e--;
    static const char json[] = "application/json";
    if (e - i == sizeof json - 1 && strncasecmp(v + i, json, e - i) == 0) return false;
    st_ctx_error(c, ST_EMEDIA,
                 "Content-Type \"%.*s%s\" is not supported: send the body as application/json",
                 (int)st_clip(v + i, n - i), v + i, n - i > ST_CLIP_MAX ? "..." : "");
    return true;
}

static st_buf_t st__body; /* loop-thread scratch for response bodies */

/* An Idempotency-Key answer's user is gone while it is being erased (SPEC §2.2), and for an
 * answer from before answers named their user (since > 0), once its erasure was asked for. */
static bool st__idem_user_gone(void *arg, const char *u, size_t ul, int64_t since)
{
    if (ul <= ST_NAME_MAX && st_name_valid(u, ul))
        return st_chat_erased(arg, ST_USER(u, ul)) ||
               (since > 0 && st_chat_erased_since(arg, u, ul, since));
    st_owner_t o = st_chat_owner_from(u, ul); /* a room's owner bytes (a room route's answer) */
    return o.kind == ST_OWNER_ROOM && st_chat_erased(arg, &o);
}

static const char st__rooms[] = "/v1/rooms/{room}/";

/* The user a keyed request's answer is about, as far as its path tells: /v1/users/{user}/…
 * (not DELETE /v1/users/{user} itself: its answer names only the erasure, and a retry finds
 * the same one). Room routes name theirs in the handler (c->about). */
static void st__idem_about(const st_ctx_t *c, const st_route_t *route, st_idem_req_t *d)
{
    static const char users[] = "/v1/users/{user}/";
    if (strncmp(route->pattern, users, sizeof users - 1) == 0) {
        d->about = c->params[0];
        d->about_len = c->plens[0];
    }
    if (c->app->chat) {
        d->gone = st__idem_user_gone;
        d->gone_arg = c->app->chat;
    }
}

/* Tells a client refused for a passing reason when to try again. */
static void st__retry_after(st_ctx_t *c)
{
    if (c->status != 503 || !st_http_transient(c->err)) return;
    const char *h = c->extra_headers ? c->extra_headers : "";
    if (strstr(h, "Retry-After:")) return;
    size_t n = strlen(h) + sizeof ST_HTTP_RETRY_AFTER;
    char *all = st_arena_alloc(c->arena, n);
    snprintf(all, n, "%s%s", h, ST_HTTP_RETRY_AFTER);
    c->extra_headers = all;
}

int st_http_dispatch(st_app_t *app, const st_http_request_t *req, st_arena_t *arena, st_buf_t *out,
                     uint64_t *wait, int *status, int *route_idx)
{
    st_buf_reset(&st__body);
    st_ctx_t c = {
        .app = app, .req = req, .arena = arena, .body = &st__body, .status = 200, .subject = ""};
    const st_route_t *route = NULL;
    int rc = st_router_match(&c, &route);
    *route_idx = route ? (int)(route - st_routes) : -1;
    if (rc != ST_OK && st_iceberg_refuse(&c, rc)) {
        /* the Iceberg catalog is read-only: a change is 403 ForbiddenException (SPEC v5 §5.1) */
    } else if (st_cors_preflight(&c)) {
        /* a browser's preflight: 204, no auth (SPEC §7) */
    } else if (st_cluster_gate(&c)) {
        /* a follower in a group: 307 to the leader, or 503 no_leader (SPEC §8) */
    } else if (rc == ST_EINVAL) {
        st_ctx_error(&c, rc, "malformed percent-escape in the path");
    } else if (rc == ST_ENOTFOUND) {
        st_ctx_error(&c, rc, "no route for %s %.*s", req->method_name,
                     (int)(req->path_len > 200 ? 200 : req->path_len), req->path);
    } else if (rc == ST_EMETHOD) {
        st_ctx_error(&c, rc, "%s is not allowed here", req->method_name);
    } else if (rc == ST_ENOTIMPL) {
        st_ctx_error(&c, rc, "%s is not implemented", req->method_name);
    } else if (st_auth_route(&c, route->flags) != ST_OK) {
        /* 401/403 (503 while the identity provider's keys are not in) written by auth.c */
    } else if (st_config_auth_on(app->cfg) && (route->flags & ST_ROUTE_USER) &&
               !(c.admin && (route->flags & ST_ROUTE_USER_ADMIN)) &&
               (strlen(c.subject) != c.plens[0] ||
                memcmp(c.subject, c.params[0], c.plens[0]) != 0)) {
        st_ctx_error(&c, ST_EFORBIDDEN, "the token's subject may only access its own user");
    } else if (st_ctx_query_check(&c, route->query) != ST_OK) {
        /* 400 naming the query parameter the route does not take (SPEC §7), before anything is
         * staged or remembered: ?by=100 on an incr adds nothing */
    } else if (!(route->flags & ST_ROUTE_ANY_BODY) && st__media_refused(&c)) {
        /* 415, before the Idempotency-Key: a refused request is not remembered (SPEC §0) */
    } else {
        st_cluster_read_fence(&c); /* a group's leader answers only while it leads */
        /* Idempotency-Key (idempotency.c): replay, 422 for another request, or record. */
        bool idem = (route->flags & ST_ROUTE_IDEMPOTENT) && req->idem_key;
        st_idem_req_t digest;
        int st = 0;
        const char *stored;
        size_t slen;
        if (idem && !st__idem_key_valid(req->idem_key, req->idem_len)) {
            st_ctx_error(&c, ST_EINVAL, "Idempotency-Key must be 1-255 visible ASCII characters");
            idem = false;
        } else if (idem) {
            st_idem_digest(&c, route, &digest);
            st__idem_about(&c, route, &digest);
            rc = st_idem_lookup(app->store, &digest, (int64_t)app->cfg->idempotency_ttl * 1000000,
                                &st, &stored, &slen, &c.wait);
        }
        if (c.error_written) {
            /* invalid key: answered above */
        } else if (idem && rc == ST_EUNAVAIL) {
            /* the answers' index is being rebuilt (after a start): nothing staged, 503 with
             * Retry-After, and the retry finds its answer (idempotency.c) */
            st_ctx_error(&c, rc, "Idempotency-Key answers are being loaded; retry shortly");
        } else if (idem && rc == ST_EIDEMREUSED) {
            st_ctx_error(&c, rc, "this Idempotency-Key was first used with another request");
        } else if (idem && rc == ST_OK) {
            /* A retry: the first answer again, and nothing changes. */
            st_buf_append(&st__body, stored, slen);
            c.status = st;
            c.extra_headers = "Idempotent-Replayed: true\r\n";
        } else if ((req->method == ST_HTTP_POST || req->method == ST_HTTP_PATCH ||
                    req->method == ST_HTTP_DELETE) &&
                   !(route->flags & ST_ROUTE_NOSTAGE) &&
                   (rc = st_store_writable(app->store)) != ST_OK) {
            /* Full, or the log or LMDB failing: refuse before anything is staged; reads go on. */
            st_ctx_error(&c, rc, "%s; the write was not applied", st_store_refusal(app->store));
            st_store_health_t h;
            st_store_health(app->store, &h);
            if (rc == ST_EIO && !(h.flags & ST_STORE_LOG_FAILED))
                c.err = ST_EUNAVAIL; /* LMDB applies failing: retried, it passes (Retry-After) */
        } else {
            rc = route->fn(&c);
            /* Parked: the handler needs cold data not in memory and changed nothing; the
             * connection runs it again once the data is in (whatever it wrote is dropped). */
            if (rc == ST_EPARKED) return ST_EPARKED;
            if (rc && !c.error_written) st_ctx_error(&c, rc, NULL);
            if (idem && c.about) { /* a room route's: the message's author */
                digest.about = c.about;
                digest.about_len = c.about_len;
            }
            /* and the room of a room route's answer (POST /v1/rooms names it from its body):
             * deleted with the room; DELETE /v1/rooms/{room}'s own answer stays (a retry finds
             * the same erasure), as DELETE /v1/users/{user}'s does */
            if (idem && !c.about_room &&
                strncmp(route->pattern, st__rooms, sizeof st__rooms - 1) == 0)
                st_ctx_about_room(&c, c.params[0], c.plens[0]);
            if (idem && c.about_room) {
                digest.room = c.about_room;
                digest.room_len = c.about_room_len;
            }
            if (idem && st_idem_storable(c.status))
                st_idem_record(app->store, &digest, (int64_t)app->cfg->idempotency_ttl * 1000000,
                               c.status, st__body.data, st__body.len, &c.wait);
        }
    }
    st__retry_after(&c);
    st_cors_finish(&c);
    st_http_write_response(out, c.status, c.content_type, c.extra_headers, st__body.data,
                           st__body.len, !req->keep_alive);
    if (req->method == ST_HTTP_HEAD)
        out->len -= st__body.len; /* same headers, Content-Length included; no body */
    *wait = c.wait;
    *status = c.status;
    return ST_OK;
}
