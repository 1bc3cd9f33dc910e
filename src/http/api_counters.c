/* SPDX-License-Identifier: MIT */
/* HTTP handlers for counters, distinct counters and sequences (SPEC §1). */
#include "internal.h"
#include "strata/counters.h"

static void st__name_value(st_ctx_t *c, const char *k2, int64_t v)
{
    st_buf_puts(c->body, "{\"name\":\"");
    st_buf_append(c->body, c->params[0], c->plens[0]); /* a valid name needs no escaping */
    st_buf_puts(c->body, "\",\"");
    st_buf_puts(c->body, k2);
    st_buf_puts(c->body, "\":");
    st_buf_append_i64(c->body, v);
}

static int st__domain_error(st_ctx_t *c, int rc, const char *what)
{
    switch (rc) {
    case ST_ENOTFOUND:
        return st_ctx_error(c, rc, "%s '%.*s' not found", what, (int)c->plens[0], c->params[0]);
    case ST_ECONFLICT:
        return st_ctx_error(c, rc, "%s '%.*s' is of another kind (plain vs distinct)", what,
                            (int)c->plens[0], c->params[0]);
    case ST_EINVAL:
        return st_ctx_error(c, rc, "%s '%.*s' would overflow a signed 64-bit value", what,
                            (int)c->plens[0], c->params[0]);
    default:
        return st_ctx_error(c, rc, NULL);
    }
}

static const char *const st__incr_fields[] = {"by", NULL};
static const char *const st__distinct_fields[] = {"member", NULL};
static const char *const st__next_fields[] = {"count", NULL};

int st_api_counter_incr(st_ctx_t *c)
{
    int rc = st_param_name(c, 0, "counter name");
    if (rc) return rc;
    cJSON *j;
    if ((rc = st_json_body(c, &j, st__incr_fields))) return rc;
    int64_t by;
    rc = st_json_int(c, j, "by", -9007199254740991LL, 9007199254740991LL, 1, &by);
    cJSON_Delete(j);
    if (rc) return rc;
    int64_t value;
    rc = st_counter_incr(c->app->store, c->params[0], c->plens[0], by, &value, &c->wait);
    if (rc) return st__domain_error(c, rc, "counter");
    st__name_value(c, "value", value);
    st_buf_appendc(c->body, '}');
    return ST_OK;
}

int st_api_counter_get(st_ctx_t *c)
{
    int rc = st_param_name(c, 0, "counter name");
    if (rc) return rc;
    st_counter_t ctr;
    rc = st_counter_get(c->app->store, c->params[0], c->plens[0], &ctr, &c->wait);
    if (rc) return st__domain_error(c, rc, "counter");
    st__name_value(c, "value", st_counter_value(&ctr));
    st_buf_appendc(c->body, '}');
    return ST_OK;
}

int st_api_counter_distinct(st_ctx_t *c)
{
    int rc = st_param_name(c, 0, "counter name");
    if (rc) return rc;
    cJSON *j;
    if ((rc = st_json_body(c, &j, st__distinct_fields))) return rc;
    const char *member;
    size_t mlen;
    if ((rc = st_json_name(c, j, "member", &member, &mlen))) {
        cJSON_Delete(j);
        return rc;
    }
    int64_t value;
    bool added;
    rc = st_counter_distinct_add(c->app->store, c->params[0], c->plens[0], member, mlen, &value,
                                 &added, &c->wait);
    cJSON_Delete(j);
    if (rc) return st__domain_error(c, rc, "counter");
    st__name_value(c, "value", value);
    st_buf_puts(c->body, added ? ",\"added\":true}" : ",\"added\":false}");
    return ST_OK;
}

int st_api_sequence_next(st_ctx_t *c)
{
    int rc = st_param_name(c, 0, "sequence name");
    if (rc) return rc;
    cJSON *j;
    if ((rc = st_json_body(c, &j, st__next_fields))) return rc;
    int64_t count;
    rc = st_json_int(c, j, "count", 1, ST_SEQ_MAX_COUNT, 1, &count);
    cJSON_Delete(j);
    if (rc) return rc;
    int64_t first, last;
    rc = st_sequence_next(c->app->store, c->params[0], c->plens[0], count, &first, &last, &c->wait);
    if (rc) return st__domain_error(c, rc, "sequence");
    st__name_value(c, "first", first);
    st_buf_puts(c->body, ",\"last\":");
    st_buf_append_i64(c->body, last);
    st_buf_appendc(c->body, '}');
    return ST_OK;
}

int st_api_sequence_get(st_ctx_t *c)
{
    int rc = st_param_name(c, 0, "sequence name");
    if (rc) return rc;
    int64_t last;
    rc = st_sequence_get(c->app->store, c->params[0], c->plens[0], &last, &c->wait);
    if (rc) return st__domain_error(c, rc, "sequence");
    st__name_value(c, "last", last);
    st_buf_appendc(c->body, '}');
    return ST_OK;
}
