/* SPDX-License-Identifier: MIT */
/*
 * CORS for browsers (SPEC §7): which Origins may call strata, the preflight answer, and the
 * headers every answer to an allowed Origin carries. strata authenticates with bearer tokens, not
 * cookies, so no credentials mode is offered; the allowed Origin is echoed (never `*`) so that a
 * cache keyed with `Vary: Origin` stays right.
 */
#include "internal.h"

#include <string.h>
#include <strings.h>

/* PATCH: edits; DELETE: message and conversation deletes, erasures (SPEC §2.2) */
#define ST__CORS_METHODS "GET, HEAD, POST, PATCH, DELETE, OPTIONS"
#define ST__CORS_HEADERS "Authorization, Content-Type, Idempotency-Key"
#define ST__CORS_EXPOSE  "Location, Retry-After, Idempotent-Replayed"
#define ST__CORS_MAX_AGE "7200" /* Chromium's cap; Firefox allows a day */

/* An Origin is echoed into a header: only a short run of visible ASCII qualifies. */
static bool st__origin_sane(const char *o, size_t n)
{
    if (n == 0 || n > 512) return false;
    for (size_t i = 0; i < n; i++)
        if (o[i] < 0x21 || o[i] > 0x7e || o[i] == ',') return false;
    return true;
}

bool st_cors_allowed(const st_config_t *cfg, const char *origin, size_t n)
{
    if (!origin || !st__origin_sane(origin, n)) return false;
    const char *p = cfg->cors_origins;
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ')
            e++;
        size_t len = (size_t)(e - p);
        if ((len == 1 && *p == '*') || (len == n && memcmp(p, origin, n) == 0)) return true;
        p = e;
    }
    return false;
}

bool st_cors_preflight(st_ctx_t *c)
{
    const st_http_request_t *r = c->req;
    if (r->method != ST_HTTP_OPTIONS || r->path_len < 4 || memcmp(r->path, "/v1/", 4) != 0)
        return false;
    if (!st_cors_allowed(c->app->cfg, r->origin, r->origin_len)) return false;
    st_buf_reset(c->body);
    c->status = 204;
    c->extra_headers = "Access-Control-Allow-Methods: " ST__CORS_METHODS "\r\n"
                       "Access-Control-Allow-Headers: " ST__CORS_HEADERS "\r\n"
                       "Access-Control-Max-Age: " ST__CORS_MAX_AGE "\r\n";
    return true;
}

static void st__cors_lines(st_buf_t *h, const st_config_t *cfg, const char *origin, size_t n)
{
    /* The answer depends on Origin whenever CORS is on, whether or not this one is allowed. */
    st_buf_puts(h, "Vary: Origin\r\n");
    if (st_cors_allowed(cfg, origin, n)) {
        st_buf_puts(h, "Access-Control-Allow-Origin: ");
        st_buf_append(h, origin, n);
        st_buf_puts(h, "\r\nAccess-Control-Expose-Headers: " ST__CORS_EXPOSE "\r\n");
    }
}

void st_cors_finish(st_ctx_t *c)
{
    const st_http_request_t *r = c->req;
    if (!*c->app->cfg->cors_origins) return;
    const char *extra = c->extra_headers ? c->extra_headers : "";
    st_buf_t h = {0};
    st_buf_puts(&h, extra);
    st__cors_lines(&h, c->app->cfg, r->origin, r->origin_len);
    c->extra_headers = st_arena_strndup(c->arena, h.data, h.len);
    st_buf_free(&h);
}

char *st_cors_headers_for(const st_config_t *cfg, const char *origin, size_t n)
{
    if (!*cfg->cors_origins) return NULL;
    st_buf_t h = {0};
    st__cors_lines(&h, cfg, origin, n);
    size_t len;
    return st_buf_steal(&h, &len);
}

char *st_cors_headers_of(const char *resp, size_t len)
{
    st_buf_t h = {0};
    st_buf_puts(&h, "");
    const char *end = resp + len;
    const char *p = memchr(resp, '\n', len); /* skip the status line */
    while (p && ++p < end && *p != '\r') {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) break;
        size_t n = (size_t)(eol - p) + 1;
        if ((n > 5 && strncasecmp(p, "vary:", 5) == 0) ||
            (n > 15 && strncasecmp(p, "access-control-", 15) == 0))
            st_buf_append(&h, p, n);
        p = eol;
    }
    size_t out_len;
    return st_buf_steal(&h, &out_len);
}
