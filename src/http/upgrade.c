/* SPDX-License-Identifier: MIT */
/*
 * WebSocket upgrades seen from the HTTP side: the handshake checks of RFC 6455 §4.2.1 and the
 * token of the stream (SPEC §3). A refused upgrade is answered here with a 400 or 401 (and a
 * plain GET /v1/stream, no upgrade at all, with 426); one that passes is handed to
 * libwebsockets as a minimal request carrying only what its handshake needs, so a request with
 * headers up to --max-header upgrades, and a handshake libwebsockets would refuse never reaches
 * it.
 */
#include "internal.h"

#include <string.h>
#include <strings.h>

/* Trims blanks around a header value. */
static void st__trim(const char **v, size_t *n)
{
    while (*n && ((*v)[0] == ' ' || (*v)[0] == '\t'))
        (*v)++, (*n)--;
    while (*n && ((*v)[*n - 1] == ' ' || (*v)[*n - 1] == '\t'))
        (*n)--;
}

/* True if the comma-separated list v holds `token` (case-insensitive). */
static bool st__list_has(const char *v, size_t n, const char *token)
{
    size_t tl = strlen(token);
    while (n) {
        const char *comma = memchr(v, ',', n);
        size_t el = comma ? (size_t)(comma - v) : n;
        const char *e = v;
        size_t en = el;
        st__trim(&e, &en);
        if (en == tl && strncasecmp(e, token, tl) == 0) return true;
        if (!comma) break;
        v += el + 1;
        n -= el + 1;
    }
    return false;
}

/* The key is 16 random bytes in base64: 22 characters of the alphabet, then "==". */
static bool st__key_valid(const char *k, size_t n)
{
    if (n != 24 || k[22] != '=' || k[23] != '=') return false;
    for (size_t i = 0; i < 22; i++) {
        char ch = k[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '+' || ch == '/'))
            return false;
    }
    return true;
}

/* Subprotocols: tokens separated by commas and blanks, bounded so the hand-off stays small. */
static bool st__protocols_valid(const char *v, size_t n)
{
    static const char ok[] = "!#$%&'*+-.^_`|~, \t";
    if (n == 0 || n > 256) return false;
    for (size_t i = 0; i < n; i++) {
        char ch = v[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              (ch && strchr(ok, ch))))
            return false;
    }
    return true;
}

int st_http_ws_handshake(const st_http_request_t *req, st_buf_t *out, const char **msg)
{
    const char *key = req->ws_key, *ver = req->ws_version, *proto = req->ws_protocol;
    size_t kn = req->ws_key_len, vn = req->ws_version_len, pn = req->ws_protocol_len;
    if (key) st__trim(&key, &kn);
    if (ver) st__trim(&ver, &vn);
    if (proto) st__trim(&proto, &pn);
    if (!req->upgrade_to || !st__list_has(req->upgrade_to, req->upgrade_to_len, "websocket"))
        *msg = "only Upgrade: websocket is served";
    else if (!ver || vn != 2 || memcmp(ver, "13", 2) != 0)
        *msg = "Sec-WebSocket-Version must be 13";
    else if (!key || !st__key_valid(key, kn))
        *msg = "Sec-WebSocket-Key must be 16 bytes in base64";
    else if (proto && !st__protocols_valid(proto, pn))
        *msg = "Sec-WebSocket-Protocol must be a short list of tokens";
    else
        *msg = NULL;
    if (*msg) return ST_EBADREQ;
    st_buf_reset(out);
    st_buf_puts(out, "GET /v1/stream HTTP/1.1\r\nHost: strata\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ");
    st_buf_append(out, key, kn);
    /* RFC 6455 §4.2.2: strata is the one subprotocol served; a client offering only others is
     * answered without one (libwebsockets would refuse the handshake with a bare close) */
    if (proto && st__list_has(proto, pn, "strata"))
        st_buf_puts(out, "\r\nSec-WebSocket-Protocol: strata");
    st_buf_puts(out, "\r\n\r\n");
    return ST_OK;
}

static st_buf_t st__upgrade_body; /* loop-thread scratch for a 401 or 400 body */

int st_http_upgrade_check(st_app_t *app, const st_http_request_t *req, st_arena_t *arena,
                          st_buf_t *out, const char **subject, st_http_token_times_t *times,
                          bool *admin, uint64_t *wait)
{
    *subject = "";
    *times = (st_http_token_times_t){0};
    *admin = false;
    *wait = 0;
    if (*app->cfg->cors_origins && req->origin &&
        !st_cors_allowed(app->cfg, req->origin, req->origin_len)) {
        /* A browser page from an origin CORS does not allow gets no stream either. */
        static const char forbidden[] = "{\"error\":{\"code\":\"forbidden\",\"message\":\"this "
                                        "Origin is not allowed (--cors-origins)\"}}";
        st_http_write_response(out, 403, NULL, NULL, forbidden, sizeof forbidden - 1, true);
        return ST_EFORBIDDEN;
    }
    st_buf_reset(&st__upgrade_body);
    st_http_request_t r = *req;
    st_ctx_t c = {.app = app,
                  .req = &r,
                  .arena = arena,
                  .body = &st__upgrade_body,
                  .status = 200,
                  .subject = ""};
    int rc = ST_OK;
    if (st_config_auth_on(app->cfg)) {
        size_t n;
        const char *tok = st_query_get(arena, req->query, req->query_len, "access_token", &n);
        if (!r.auth && tok) {
            /* browsers cannot set headers on a WebSocket: the token may come as a query value */
            char *h = st_arena_alloc(arena, n + 8);
            memcpy(h, "Bearer ", 7);
            memcpy(h + 7, tok, n + 1);
            r.auth = h;
            r.auth_len = n + 7;
        }
        rc = st_auth_check(&c, 0);
        *wait = c.wait;
    }
    /* strict requests (SPEC §7), as for any route once let in: ?route= and ?access_token= */
    if (rc == ST_OK) rc = st_ctx_query_check(&c, st_stream_query);
    if (rc) {
        st_http_write_response(out, c.status, NULL,
                               c.status == 401 ? "WWW-Authenticate: Bearer realm=\"strata\"\r\n"
                                               : NULL,
                               st__upgrade_body.data, st__upgrade_body.len, true);
        return rc;
    }
    *subject = c.subject;
    *times = c.token;
    *admin = st_config_auth_on(app->cfg) && c.admin;
    return ST_OK;
}

/* GET /v1/stream sent as a plain request (no Upgrade: websocket with Connection: Upgrade):
 * 426 upgrade_required (SPEC §3, v4), naming the upgrade RFC 9110 §15.5.22 asks for. */
int st_api_stream_plain(st_ctx_t *c)
{
    c->extra_headers = "Upgrade: websocket\r\n";
    return st_ctx_error(c, ST_EUPGRADE,
                        "GET /v1/stream is a WebSocket: send it with Upgrade: websocket and "
                        "Connection: Upgrade");
}
