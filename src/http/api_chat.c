/* SPDX-License-Identifier: MIT */
/* HTTP handlers for messages, conversations and per-user stats (SPEC §2). */
#include "internal.h"
#include "strata/chat.h"

#include <string.h>

/* A value in a message: "%.*s%s" with ST__V(s, n). */

/* metadata is free-form: any object, its members unchecked (SPEC §2) */
static const char *const st__message_fields[] = {"conversation_id", "from", "content", "metadata",
                                                 NULL};

int st_ctx_message_body(st_ctx_t *c, const cJSON *j, st_message_in_t *m)
{
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(j, "content");
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(j, "metadata");
    if (!cJSON_IsString(content) || !content->valuestring[0])
        return content
                   ? st_ctx_error_field(c, ST_EINVAL, "content",
                                        "'content' must be a non-empty string (got %s)",
                                        cJSON_IsString(content) ? "\"\"" : st_json_kind(content))
                   : st_ctx_error_field(c, ST_EINVAL, "content", "'content' is required");
    m->content = content->valuestring;
    m->content_len = strlen(content->valuestring);
    if (m->content_len > c->app->cfg->max_content)
        return st_ctx_error_field(c, ST_ETOOLARGE, "content",
                                  "'content' is larger than %llu bytes (got %zu)",
                                  (unsigned long long)c->app->cfg->max_content, m->content_len);
    if (!st_utf8_valid(m->content, m->content_len))
        return st_ctx_error_field(c, ST_EINVAL, "content", "'content' must be valid UTF-8");
    if (meta && !cJSON_IsNull(meta)) {
        if (!cJSON_IsObject(meta))
            return st_ctx_error_field(c, ST_EINVAL, "metadata",
                                      "'metadata' must be a JSON object (got %s)",
                                      st_json_kind(meta));
        /* stored as the client wrote it: cJSON would round numbers past 2^53 and drop 1e400 */
        ST_ASSERT(c->json_meta);
        m->metadata = c->json_meta;
        m->metadata_len = c->json_meta_len;
    }
    return ST_OK;
}

int st_api_message_post(st_ctx_t *c)
{
    int rc = st_param_name(c, 0, "user");
    if (rc) return rc;
    cJSON *j;
    if ((rc = st_json_body(c, &j, st__message_fields))) return rc;
    if (!j)
        return st_ctx_error(c, ST_EINVAL,
                            "a JSON body with conversation_id, from and content "
                            "is required");
    st_message_in_t m = {.owner = {ST_OWNER_USER, c->params[0], c->plens[0]}};
    if ((rc = st_json_name(c, j, "conversation_id", &m.conv, &m.conv_len)) ||
        (rc = st_json_name(c, j, "from", &m.from, &m.from_len)))
        goto done;
    if ((rc = st_ctx_message_body(c, j, &m))) goto done;
    rc = st_chat_post(c->app->chat, &m, c->body, &c->wait);
    if (rc) {
        rc = st_ctx_error(c, rc, NULL);
    } else {
        c->status = 201; /* observers (streams, reconciliation) were told by chat */
    }
done:
    cJSON_Delete(j);
    return rc;
}

int st_ctx_msg_id(st_ctx_t *c, const char *name, const char *v, size_t n, uint64_t *out)
{
    uint64_t x = 0;
    bool ok = n > 0 && n <= 20;
    for (size_t i = 0; ok && i < n; i++) {
        if (v[i] < '0' || v[i] > '9' || x > (UINT64_MAX - (uint64_t)(v[i] - '0')) / 10)
            ok = false;
        else
            x = x * 10 + (uint64_t)(v[i] - '0');
    }
    if (!ok || x == 0)
        return st_ctx_error_field(c, ST_EINVAL, name,
                                  "'%s' must be an id (decimal digits, not 0) (got \"%.*s%s\")",
                                  name, ST__V(v, n));
    *out = x;
    return ST_OK;
}

/* A msg_id query value (absent: 0; *given says whether it was named). With zero_ok, "0" is a
 * bound below every msg_id (`after=0`: the page just after nothing, as a stream's "after":"0"). */
static int st__id_param(st_ctx_t *c, const char *name, bool zero_ok, uint64_t *out, bool *given)
{
    size_t n;
    const char *v = st_query_get(c->arena, c->req->query, c->req->query_len, name, &n);
    *out = 0;
    *given = v != NULL;
    if (!v || (zero_ok && n == 1 && v[0] == '0')) return ST_OK;
    return st_ctx_msg_id(c, name, v, n, out);
}

int st_ctx_message_query(st_ctx_t *c, st_message_query_t *q)
{
    const st_http_request_t *r = c->req;
    size_t n;
    const char *v;
    int64_t limit;
    q->limit = 50;
    if ((v = st_query_get(c->arena, r->query, r->query_len, "limit", &n)) &&
        (st_parse_i64(v, n, &limit) || limit < 1 || limit > 1000))
        return st_ctx_error_field(c, ST_EINVAL, "limit", "limit must be 1..1000 (got \"%.*s%s\")",
                                  ST__V(v, n));
    if (v) q->limit = (size_t)limit;
    if ((v = st_query_get(c->arena, r->query, r->query_len, "order", &n))) {
        if (strcmp(v, "desc") == 0)
            q->desc = true;
        else if (strcmp(v, "asc") != 0)
            return st_ctx_error_field(c, ST_EINVAL, "order",
                                      "order must be asc or desc (got \"%.*s%s\")", ST__V(v, n));
    }
    if ((v = st_query_get(c->arena, r->query, r->query_len, "include_deleted", &n))) {
        if (strcmp(v, "false") == 0)
            q->hide_deleted = true;
        else if (strcmp(v, "true") != 0)
            return st_ctx_error_field(c, ST_EINVAL, "include_deleted",
                                      "include_deleted must be true or false (got \"%.*s%s\")",
                                      ST__V(v, n));
    }
    uint64_t cursor;
    bool given;
    int rc;
    if ((rc = st__id_param(c, "after", true, &q->after, &q->after_given)) ||
        (rc = st__id_param(c, "before", false, &q->before, &given)) ||
        (rc = st__id_param(c, "cursor", false, &cursor, &given)))
        return rc;
    if (cursor) {
        /* the next page continues past the last message of the previous one, the same way */
        if (st_chat_walks_back(q))
            q->before = q->before && q->before < cursor ? q->before : cursor;
        else
            q->after = q->after > cursor ? q->after : cursor;
    }
    return ST_OK;
}

int st_api_message_list(st_ctx_t *c)
{
    int rc = st_param_name(c, 0, "user");
    if (rc) return rc;
    const st_http_request_t *r = c->req;
    st_message_query_t q = {0};
    size_t n;
    const char *v = st_query_get(c->arena, r->query, r->query_len, "conversation_id", &n);
    if (v) {
        if (!st_name_valid(v, n))
            return st_ctx_error_field(c, ST_EINVAL, "conversation_id",
                                      "conversation_id must be 1-255 characters of "
                                      "[A-Za-z0-9_.:-] (got \"%.*s%s\")",
                                      ST__V(v, n));
        q.conv = v;
        q.conv_len = n;
    }
    if ((rc = st_ctx_message_query(c, &q))) return rc;
    rc = st_chat_messages(c->app->chat, ST_USER(c->params[0], c->plens[0]), &q, c->body, &c->wait);
    return rc ? st_ctx_error(c, rc, NULL) : ST_OK;
}

int st_api_conversation_list(st_ctx_t *c)
{
    int rc = st_param_name(c, 0, "user");
    if (rc) return rc;
    const st_http_request_t *r = c->req;
    size_t n, clen = 0;
    int64_t limit = 20;
    const char *v = st_query_get(c->arena, r->query, r->query_len, "limit", &n);
    if (v && (st_parse_i64(v, n, &limit) || limit < 1 || limit > 1000))
        return st_ctx_error_field(c, ST_EINVAL, "limit", "limit must be 1..1000 (got \"%.*s%s\")",
                                  ST__V(v, n));
    const char *cursor = st_query_get(c->arena, r->query, r->query_len, "cursor", &clen);
    rc = st_chat_conversations(c->app->chat, c->params[0], c->plens[0], cursor, clen, (size_t)limit,
                               c->body, &c->wait);
    if (rc == ST_EINVAL) return st_ctx_error_field(c, rc, "cursor", "bad cursor");
    return rc ? st_ctx_error(c, rc, NULL) : ST_OK;
}

int st_api_conversation_get(st_ctx_t *c)
{
    int rc = st_param_name(c, 0, "user");
    if (!rc) rc = st_param_name(c, 1, "conversation_id");
    if (rc) return rc;
    rc = st_chat_conversation(c->app->chat, c->params[0], c->plens[0], c->params[1], c->plens[1],
                              c->body, &c->wait);
    if (rc == ST_ENOTFOUND)
        return st_ctx_error(c, rc, "conversation '%.*s' not found", (int)c->plens[1], c->params[1]);
    return rc ? st_ctx_error(c, rc, NULL) : ST_OK;
}

int st_api_user_stats(st_ctx_t *c)
{
    int rc = st_param_name(c, 0, "user");
    if (rc) return rc;
    rc = st_chat_stats(c->app->chat, c->params[0], c->plens[0], c->body, &c->wait);
    return rc ? st_ctx_error(c, rc, NULL) : ST_OK;
}
