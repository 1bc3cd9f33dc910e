/* SPDX-License-Identifier: MIT */
/* Request-body helpers on cJSON: every way a field can be wrong gets its own clear 400. */
#include "internal.h"

#include <math.h>
#include <string.h>

#define ST__MAX_SAFE_INT 9007199254740991.0 /* 2^53 - 1: exact in a double and in JavaScript */

/* What a JSON value is, for "(got …)" in a message. */
const char *st_json_kind(const cJSON *v)
{
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsArray(v)) return "an array";
    return "an object";
}

int st_json_fields(st_ctx_t *c, const cJSON *obj, const char *const *fields, const char *where)
{
    if (!obj) return ST_OK;
    const cJSON *m;
    uint64_t seen = 0; /* the fields met so far (a route takes fewer than 64) */
    cJSON_ArrayForEach(m, obj)
    {
        const char *k = m->string ? m->string : "";
        size_t i = 0;
        while (fields[i] && strcmp(fields[i], k) != 0)
            i++;
        if (fields[i] && i < 64 && (seen >> i & 1)) { /* {"by":1,"by":5}: which one is meant? */
            char path[160];
            snprintf(path, sizeof path, "%s%s%s", where ? where : "", where ? "." : "", k);
            return st_ctx_error_field(c, ST_EINVAL, path, "field \"%s\" given twice%s%s", k,
                                      where ? " in " : "", where ? where : "");
        }
        if (fields[i]) {
            if (i < 64) seen |= (uint64_t)1 << i;
            continue;
        }
        size_t kl = strlen(k), cl = st_clip(k, kl);
        const char *more = kl > ST_CLIP_MAX ? "..." : "";
        char path[160];
        snprintf(path, sizeof path, "%s%s%.*s%s", where ? where : "", where ? "." : "", (int)cl, k,
                 more);
        if (where)
            return st_ctx_error_field(c, ST_EINVAL, path, "unknown field \"%.*s%s\" in %s", (int)cl,
                                      k, more, where);
        return st_ctx_error_field(c, ST_EINVAL, path, "unknown field \"%.*s%s\"", (int)cl, k, more);
    }
    return ST_OK;
}

int st_json_body(st_ctx_t *c, cJSON **out, const char *const *fields)
{
    *out = NULL;
    const st_http_request_t *r = c->req;
    size_t i = 0;
    while (i < r->body_len &&
           (r->body[i] == ' ' || r->body[i] == '\t' || r->body[i] == '\r' || r->body[i] == '\n'))
        i++;
    if (i == r->body_len) return ST_OK;
    /* cJSON takes some text that is not JSON (raw bytes that are not UTF-8, "01") and cuts
     * strings at U+0000: the text is checked strictly first, and strings that become names,
     * ids or content may not hold U+0000. Metadata is kept as the text sent (SPEC §2). */
    st_json_info_t info = {.member = "metadata"};
    if (st_json_check(r->body, r->body_len, &info) != ST_OK)
        return st_ctx_error(c, ST_EJSON, "request body is not valid JSON in UTF-8 (near byte %zu)",
                            info.error_at);
    if (info.nul)
        return st_ctx_error(c, ST_EINVAL, "strings must not contain U+0000 (outside metadata)");
    cJSON *j = cJSON_ParseWithLength(r->body, r->body_len);
    if (!j) return st_ctx_error(c, ST_EJSON, "request body is not valid JSON");
    if (!cJSON_IsObject(j)) {
        const char *kind = st_json_kind(j); /* a static string */
        cJSON_Delete(j);
        return st_ctx_error(c, ST_EINVAL, "request body must be a JSON object (got %s)", kind);
    }
    int rc = st_json_fields(c, j, fields, NULL);
    if (rc) {
        cJSON_Delete(j);
        return rc;
    }
    c->json_meta = info.value;
    c->json_meta_len = info.value_len;
    *out = j;
    return ST_OK;
}

int st_json_no_fields(st_ctx_t *c)
{
    static const char *const none[] = {NULL};
    cJSON *j;
    int rc = st_json_body(c, &j, none);
    cJSON_Delete(j);
    return rc;
}

int st_json_int(st_ctx_t *c, const cJSON *obj, const char *field, int64_t lo, int64_t hi,
                int64_t def, int64_t *out)
{
    const cJSON *v = obj ? cJSON_GetObjectItemCaseSensitive(obj, field) : NULL;
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return ST_OK;
    }
    if (!cJSON_IsNumber(v))
        return st_ctx_error_field(c, ST_EINVAL, field, "'%s' must be an integer (got %s)", field,
                                  st_json_kind(v));
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d) || fabs(d) > ST__MAX_SAFE_INT)
        return st_ctx_error_field(
            c, ST_EINVAL, field, "'%s' must be an integer within +-(2^53-1) (got %.15g)", field, d);
    int64_t n = (int64_t)d;
    if (n < lo || n > hi)
        return st_ctx_error_field(c, ST_EINVAL, field,
                                  "'%s' must be between %lld and %lld (got %lld)", field,
                                  (long long)lo, (long long)hi, (long long)n);
    *out = n;
    return ST_OK;
}

int st_json_name(st_ctx_t *c, const cJSON *obj, const char *field, const char **s, size_t *n)
{
    const cJSON *v = obj ? cJSON_GetObjectItemCaseSensitive(obj, field) : NULL;
    if (!v) return st_ctx_error_field(c, ST_EINVAL, field, "'%s' is required", field);
    if (!cJSON_IsString(v))
        return st_ctx_error_field(c, ST_EINVAL, field, "'%s' must be a string (got %s)", field,
                                  st_json_kind(v));
    size_t len = strlen(v->valuestring);
    if (!st_name_valid(v->valuestring, len))
        return st_ctx_error_field(
            c, ST_EINVAL, field,
            "'%s' must be 1-255 characters of [A-Za-z0-9_.:-] (got \"%.*s%s\")", field,
            (int)st_clip(v->valuestring, len), v->valuestring, len > ST_CLIP_MAX ? "..." : "");
    *s = v->valuestring;
    *n = len;
    return ST_OK;
}

int st_param_name(st_ctx_t *c, int idx, const char *what)
{
    if (!st_name_valid(c->params[idx], c->plens[idx]))
        return st_ctx_error(c, ST_EINVAL,
                            "%s must be 1-255 characters of [A-Za-z0-9_.:-] (got \"%.*s%s\")", what,
                            (int)st_clip(c->params[idx], c->plens[idx]), c->params[idx],
                            c->plens[idx] > ST_CLIP_MAX ? "..." : "");
    return ST_OK;
}

void st_ctx_about(st_ctx_t *c, const char *user, size_t ulen)
{
    if (!c->req->idem_key || !user || !ulen || ulen > ST_NAME_MAX) return; /* only keyed answers */
    char *u = st_arena_alloc(c->arena, ulen);
    memcpy(u, user, ulen);
    c->about = u;
    c->about_len = ulen;
}

void st_ctx_about_room(st_ctx_t *c, const char *room, size_t rl)
{
    if (!c->req->idem_key || !room || !rl || rl > ST_NAME_MAX) return; /* only keyed answers */
    char *u = st_arena_alloc(c->arena, ST_CHAT_OWNER_MAX);
    c->about_room_len = st_chat_owner_bytes(u, ST_ROOM(room, rl));
    c->about_room = u;
}
