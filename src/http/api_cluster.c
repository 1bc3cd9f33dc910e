/* SPDX-License-Identifier: MIT */
/*
 * Replicated groups at the HTTP door (SPEC §8): GET /v1/cluster on every member, and the gate
 * that sends a follower's /v1 requests to the leader — 307 with Location = the leader's
 * advertised URL + the same path and query, or 503 no_leader with Retry-After while no leader
 * is known. Streams are not gated: they are upgraded before dispatch and served by every member.
 */
#include "internal.h"
#include "strata/repl.h"
#include "strata/ws.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

int st_api_cluster(st_ctx_t *c)
{
    if (!c->app->repl)
        return st_ctx_error(c, ST_ENOTFOUND, "this server is not a member of a group (--cluster)");
    st_repl_status_json(c->app->repl, c->body);
    return ST_OK;
}

/* A member behind the group's snapshot asks for a copy of the store (src/repl/snapshot.c). */
int st_api_cluster_snapshot(st_ctx_t *c)
{
    int rc = st_json_no_fields(c); /* strict requests: a malformed body is 400 first */
    if (rc) return rc;
    if (!c->app->repl) return st_ctx_error(c, ST_ENOTFOUND, "not a member of a group");
    int port;
    char token[33];
    rc = st_repl_snapshot_offer(c->app->repl, &port, token);
    if (rc != ST_OK) return st_ctx_error(c, rc, "cannot offer a copy of the store now");
    st_buf_printf(c->body, "{\"port\":%d,\"token\":\"%s\"}", port, token);
    return ST_OK;
}

/* A member that does not serve asks the leader for a read index (src/repl/readindex.c). The
 * answer goes out after the read fence (dispatch.c): only a leader that proved it leads sends
 * it, and its commit index covers every write acknowledged before the request came. */
int st_api_cluster_read_index(st_ctx_t *c)
{
    int rc = st_json_no_fields(c); /* strict requests: a malformed body is 400 first */
    if (rc) return rc;
    if (!c->app->repl) return st_ctx_error(c, ST_ENOTFOUND, "not a member of a group");
    st_buf_printf(c->body, "{\"commit_index\":%llu}",
                  (unsigned long long)st_repl_commit_index(c->app->repl));
    return ST_OK;
}

/* A member's record (src/repl/announce.c): {"id","http","cold"}, signed as admin. Answered
 * once the group holds it. */
int st_api_cluster_announce(st_ctx_t *c)
{
    cJSON *j;
    static const char *const fields[] = {"id", "http", "cold", NULL};
    int rc = st_json_body(c, &j, fields); /* strict requests: a malformed body is 400 first */
    if (rc) return rc;
    if (!c->app->repl) {
        cJSON_Delete(j);
        return st_ctx_error(c, ST_ENOTFOUND, "not a member of a group");
    }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
    const cJSON *url = cJSON_GetObjectItemCaseSensitive(j, "http");
    const cJSON *cold = cJSON_GetObjectItemCaseSensitive(j, "cold");
    if (!cJSON_IsNumber(id) || id->valuedouble < 1 || id->valuedouble > 1023 ||
        !cJSON_IsString(url) || (cold && !cJSON_IsString(cold))) {
        const char *ik = id ? st_json_kind(id) : "nothing",
                   *uk = url ? st_json_kind(url) : "nothing";
        cJSON_Delete(j); /* the kinds are static strings */
        return st_ctx_error(c, ST_EINVAL,
                            "expected {\"id\":1..1023,\"http\":string,\"cold\":string} (got "
                            "id %s, http %s)",
                            ik, uk);
    }
    rc = st_repl_announce(c->app->repl, (uint64_t)id->valuedouble, url->valuestring,
                          cold ? cold->valuestring : "", &c->wait);
    cJSON_Delete(j);
    if (rc == ST_EINVAL)
        return st_ctx_error(c, rc, "not a member of this group, or a malformed URL or nonce");
    if (rc) return st_ctx_error(c, rc, NULL);
    st_buf_puts(c->body, "{\"recorded\":true}");
    return ST_OK;
}

/* Every /v1 route but the group's own and /v1/stream (every member serves streams, and
 * answers one sent without its upgrade itself). */
static bool st__gated(const st_http_request_t *r)
{
    static const char cluster[] = "/v1/cluster", stream[] = "/v1/stream",
                      typing[] = "/v1/cluster/typing", /* any member's subscribers */
        presence[] = "/v1/cluster/presence";           /* any member's word to any other */
    if (r->path_len < 4 || memcmp(r->path, "/v1/", 4) != 0) return false;
    if (r->path_len == sizeof stream - 1 && memcmp(r->path, stream, r->path_len) == 0) return false;
    if (r->path_len == sizeof typing - 1 && memcmp(r->path, typing, r->path_len) == 0) return false;
    if (r->path_len == sizeof presence - 1 && memcmp(r->path, presence, r->path_len) == 0)
        return false;
    /* GET /v1/rooms/{room}/presence: every member knows the group's presence and answers it
     * itself (SPEC §2.1 v5: the same answer from every member within 1 s of a change) */
    static const char rooms[] = "/v1/rooms/", tail[] = "/presence";
    if (r->method == ST_HTTP_GET && r->path_len > sizeof rooms - 1 + sizeof tail - 1 &&
        memcmp(r->path, rooms, sizeof rooms - 1) == 0 &&
        memcmp(r->path + r->path_len - (sizeof tail - 1), tail, sizeof tail - 1) == 0)
        return false;
    return !(r->path_len == sizeof cluster - 1 && memcmp(r->path, cluster, r->path_len) == 0);
}

void st_cluster_read_fence(st_ctx_t *c)
{
    st_repl_t *repl = c->app->repl;
    if (!repl || !st__gated(c->req)) return;
    st_repl_read_fence(repl, &c->wait);
}

/* POST /v1/cluster/typing (internal, any member): the leader hands a typing signal to the other
 * members for their subscribers (ws/typing.c). 204; 404 outside a group (as the other
 * /v1/cluster routes: a single node takes no member's word, whoever sends it). */
int st_api_cluster_typing(st_ctx_t *c)
{
    cJSON *j;
    static const char *const fields[] = {"room_id", "user", "until", NULL};
    int rc = st_json_body(c, &j, fields);
    if (rc) return rc;
    const char *room, *user;
    size_t rl, ul;
    int64_t until = 0;
    if (!j)
        return st_ctx_error(c, ST_EINVAL, "a JSON body with room_id, user and until is required");
    if (!(rc = st_json_name(c, j, "room_id", &room, &rl)) &&
        !(rc = st_json_name(c, j, "user", &user, &ul)) &&
        !(rc = st_json_int(c, j, "until", 1, INT64_MAX, 0, &until))) {
        /* a group's member-to-member call (a malformed body is 400 first, as for the others) */
        if (!c->app->repl) {
            rc = st_ctx_error(c, ST_ENOTFOUND, "not a member of a group");
        } else {
            if (c->app->ws) st_ws_typing(c->app->ws, room, rl, user, ul, until, false);
            c->status = 204;
        }
    }
    cJSON_Delete(j);
    return rc;
}

/* One entry of a presence announcement: {"room_id","user","online"}. */
static int st__presence_item(st_ctx_t *c, const cJSON *e, size_t i, st_ws_presence_t *out)
{
    static const char *const fields[] = {"room_id", "user", "online", NULL};
    char where[32];
    snprintf(where, sizeof where, "entries[%zu]", i);
    if (!cJSON_IsObject(e))
        return st_ctx_error_field(c, ST_EINVAL, "entries", "%s must be an object", where);
    int rc = st_json_fields(c, e, fields, st_arena_strndup(c->arena, where, strlen(where)));
    if (rc) return rc;
    const cJSON *on = cJSON_GetObjectItemCaseSensitive(e, "online");
    if (!cJSON_IsBool(on))
        return st_ctx_error_field(c, ST_EINVAL, "entries", "%s.online must be a boolean", where);
    out->online = cJSON_IsTrue(on);
    if ((rc = st_json_name(c, e, "room_id", &out->room, &out->rl))) return rc;
    return st_json_name(c, e, "user", &out->user, &out->ul);
}

/* POST /v1/cluster/presence (internal, any member) {"member","nonce","entries":[{"room_id",
 * "user","online"}]}: another member's word on its own streams (ws/presence.c). 204; 404
 * outside a group. */
int st_api_cluster_presence(st_ctx_t *c)
{
    cJSON *j;
    static const char *const fields[] = {"member", "nonce", "entries", NULL};
    int rc = st_json_body(c, &j, fields);
    if (rc) return rc;
    if (!j)
        return st_ctx_error(c, ST_EINVAL, "a JSON body with member, nonce and entries is required");
    int64_t member = 0;
    const cJSON *nonce = cJSON_GetObjectItemCaseSensitive(j, "nonce");
    const cJSON *entries = cJSON_GetObjectItemCaseSensitive(j, "entries");
    if ((rc = st_json_int(c, j, "member", 1, 1023, 0, &member))) goto done;
    if (!member || !cJSON_IsString(nonce) || strlen(nonce->valuestring) != 32 ||
        strspn(nonce->valuestring, "0123456789abcdef") != 32 || !cJSON_IsArray(entries)) {
        rc = st_ctx_error(c, ST_EINVAL,
                          "expected {\"member\":1..1023,\"nonce\":32 hex digits,\"entries\":[…]}");
        goto done;
    }
    size_t n = (size_t)cJSON_GetArraySize(entries), i = 0;
    st_ws_presence_t *items = st_arena_alloc(c->arena, (n ? n : 1) * sizeof *items);
    const cJSON *e;
    cJSON_ArrayForEach(e, entries)
    {
        if ((rc = st__presence_item(c, e, i, &items[i]))) goto done;
        i++;
    }
    if (!c->app->repl) { /* a group's member-to-member call: none outside a group */
        rc = st_ctx_error(c, ST_ENOTFOUND, "not a member of a group");
        goto done;
    }
    if (c->app->ws) st_ws_presence_peer(c->app->ws, (uint64_t)member, nonce->valuestring, items, n);
    c->status = 204;
done:
    cJSON_Delete(j);
    return rc;
}

bool st_cluster_gate(st_ctx_t *c)
{
    st_repl_t *repl = c->app->repl;
    const st_http_request_t *r = c->req;
    if (!repl || st_repl_serving(repl) || !st__gated(r)) return false;
    char url[512];
    if (st_repl_leader_url(repl, url, sizeof url) != ST_OK) {
        st_ctx_error(c, ST_ENOLEADER, NULL);
        c->extra_headers = "Retry-After: 1\r\n";
        return true;
    }
    size_t ul = strlen(url), n = ul + r->path_len + r->query_len + 32;
    char *h = st_arena_alloc(c->arena, n);
    int len = snprintf(h, n, "Location: %s%.*s%s%.*s\r\n", url, (int)r->path_len, r->path,
                       r->query_len ? "?" : "", (int)r->query_len, r->query);
    (void)len;
    c->extra_headers = h;
    c->status = 307;
    st_buf_puts(c->body, "{\"leader\":");
    st_buf_append_json_str(c->body, url, ul);
    st_buf_puts(c->body, "}");
    return true;
}
