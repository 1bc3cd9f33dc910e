/* SPDX-License-Identifier: MIT */
/*
 * Bearer tokens on requests (SPEC §7): which routes need which credential, and a cache of
 * verified tokens. Client routes take a token checked against --jwt-secret (HS256) and the
 * identity provider's keys (jwt.c); a group's internal routes take only a token signed with
 * --cluster-secret, so no client secret or key can act as a member. A keep-alive client sends
 * the same token again and again: a verified token is remembered by its SHA-256 until it expires
 * (or the key sets change), so it pays for the signature once. Whether a token is valid at a
 * time is st_http_token_check's alone (jwt.c); whether its subject was erased since it was
 * issued is asked of chat on every request, cached or not (st__revocation).
 */
#include "internal.h"
#include "jwt.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ST__TCACHE_SLOTS    2048         /* direct-mapped: a collision replaces the older token */
#define ST__TCACHE_MAX_US   3600000000LL /* longest a verified token is trusted without a check */
#define ST__TCACHE_NOEXP_US 300000000LL
#define ST__WWW_AUTH        "WWW-Authenticate: Bearer realm=\"strata\"\r\n"

struct st_tcache_entry {
    uint8_t hash[32];
    uint32_t gen; /* st_auth_t.gen when verified */
    bool used, admin;
    int64_t until_us; /* trusted until then (exp + leeway, capped) */
    st_http_token_times_t times;
    char sub[116];
};

/* The token of "Authorization: Bearer <token>"; false when there is none. */
static bool st__bearer(const st_http_request_t *r, const char **tok, size_t *n)
{
    if (!r->auth || r->auth_len < 8 || strncasecmp(r->auth, "Bearer ", 7) != 0) return false;
    *tok = r->auth + 7;
    *n = r->auth_len - 7;
    while (*n && **tok == ' ')
        (*tok)++, (*n)--;
    return *n > 0;
}

static st_jwt_opts_t st__jwt_opts(const st_config_t *cfg, const st_auth_t *a)
{
    return (st_jwt_opts_t){.hs_secret = cfg->jwt_secret,
                           .sets = {a ? a->file_keys : NULL, a ? a->url_keys : NULL},
                           .issuer = cfg->jwt_issuer,
                           .audience = cfg->jwt_audience,
                           .roles_claim = cfg->jwt_roles_claim,
                           .subject_claim = cfg->jwt_subject_claim,
                           .leeway_s = (int64_t)cfg->jwt_leeway,
                           .now_us = st_now_us()};
}

static void st__remember(st_auth_t *a, const uint8_t hash[32], const st_jwt_claims_t *cl,
                         int64_t leeway_us, int64_t now_us)
{
    size_t sl = strlen(cl->subject);
    if (sl >= sizeof a->cache->sub) return; /* a very long subject is checked every time */
    struct st_tcache_entry *e = &a->cache[(hash[0] | (size_t)hash[1] << 8) % ST__TCACHE_SLOTS];
    int64_t exp = cl->times.exp_us;
    int64_t until = now_us + (exp ? ST__TCACHE_MAX_US : ST__TCACHE_NOEXP_US);
    if (exp && exp < until - leeway_us) until = exp + leeway_us;
    memcpy(e->hash, hash, 32);
    e->gen = a->gen;
    e->used = true;
    e->admin = cl->admin;
    e->until_us = until;
    e->times = cl->times;
    memcpy(e->sub, cl->subject, sl + 1);
}

/*
 * A token issued to a user before that user's erasure (SPEC §2.2, §7) is refused, for as long as
 * it could be valid: the erasure's time is kept for the user (st_chat_erased_at) and a token of
 * that subject whose iat is before it is revoked. A token without iat cannot show when it was
 * issued, so for an erased subject it is refused too (the safe side): a user who comes back
 * needs a token with iat at or after the erasure. iat is compared as it is, in the issuer's
 * clock, with no leeway: tokens minted in the second of the erasure but with an iat rounded
 * down are refused as well, and the next second's are not. The subject is looked up only when
 * it can be a user (st_name_valid). The refusal reports the erasure, so it waits for the
 * erasure's batch to be durable (c->wait) like any answer that shows state.
 */
static int st__revocation(st_ctx_t *c, unsigned need)
{
    st_chat_t *chat = c->app->chat;
    size_t sl = strlen(c->subject);
    int64_t at;
    if (!chat || !st_name_valid(c->subject, sl) ||
        st_chat_erased_at(chat, c->subject, sl, &at, &c->wait) != ST_OK)
        return ST_OK;
    if (c->token.iat_us && c->token.iat_us >= at) return ST_OK; /* issued since: back again */
    c->revoked_at_us = at;
    if (need & ST_AUTH_REVOKED_OK) return ST_OK; /* the route decides (its own erasure's status) */
    return st_auth_refuse_revoked(c);
}

int st_auth_refuse_revoked(st_ctx_t *c)
{
    size_t sl = strlen(c->subject);
    c->extra_headers = ST__WWW_AUTH; /* a handler's refusal too (api_edit.c) */
    if (!c->token.iat_us)
        return st_ctx_error(c, ST_EREVOKED,
                            "the token has no iat and its subject '%.*s%s' was erased: only a "
                            "token issued after the user's erasure (with iat) is accepted",
                            ST__V(c->subject, sl));
    return st_ctx_error(c, ST_EREVOKED,
                        "the token was issued before the user's erasure ('%.*s%s'); a token "
                        "issued after it is needed",
                        ST__V(c->subject, sl));
}

int st_auth_check(st_ctx_t *c, unsigned need)
{
    const char *tok;
    size_t tlen;
    if (!st__bearer(c->req, &tok, &tlen))
        return st_ctx_error(c, ST_EUNAUTH, "an Authorization: Bearer token is required");
    st_auth_t *a = c->app->auth;
    const st_config_t *cfg = c->app->cfg;
    int64_t now_us = st_now_us();
    uint8_t hash[32];
    struct st_tcache_entry *e = NULL;
    if (a) {
        if (!a->cache && !(a->cache = calloc(ST__TCACHE_SLOTS, sizeof *a->cache)))
            return st_ctx_error(c, ST_ENOMEM, NULL);
        EVP_Digest(tok, tlen, hash, NULL, EVP_sha256(), NULL);
        e = &a->cache[(hash[0] | (size_t)hash[1] << 8) % ST__TCACHE_SLOTS];
        if (!(e->used && e->gen == a->gen && now_us < e->until_us && !memcmp(e->hash, hash, 32)))
            e = NULL;
    }
    if (e) {
        /* the same clock rule as a verified token's (the cache's until_us is only a cap) */
        const char *why;
        if (st_http_token_check(&e->times, now_us, (int64_t)cfg->jwt_leeway * 1000000, &why))
            return st_ctx_error(c, ST_EUNAUTH, "%s", why);
        c->subject = st_arena_strndup(c->arena, e->sub, strlen(e->sub));
        c->admin = e->admin;
        c->token = e->times;
    } else {
        st_jwt_opts_t o = st__jwt_opts(cfg, a);
        o.now_us = now_us;
        st_jwt_claims_t cl;
        const char *why;
        if (st_jwt_verify(tok, tlen, &o, &cl, &why) != ST_OK) {
            if (cl.unknown_kid) st_auth_kid_miss(a);
            if (cl.needs_public && a && *cfg->jwt_jwks_url && !a->url_keys && !a->file_keys)
                return st_ctx_error(c, ST_EUNAVAIL,
                                    "the identity provider's keys (--jwt-jwks-url) are not "
                                    "loaded yet");
            return st_ctx_error(c, ST_EUNAUTH, "%s", why);
        }
        c->subject = st_arena_strndup(c->arena, cl.subject, strlen(cl.subject));
        c->admin = cl.admin;
        c->token = cl.times;
        if (a) st__remember(a, hash, &cl, (int64_t)cfg->jwt_leeway * 1000000, now_us);
        free(cl.subject);
    }
    int rc = st__revocation(c, need);
    if (rc) return rc;
    if ((need & ST_AUTH_ADMIN) && !c->admin)
        return st_ctx_error(c, ST_EFORBIDDEN, "this route needs role admin");
    return ST_OK;
}

/* A group's internal call: a token signed with --cluster-secret and nothing else. */
static int st__check_member(st_ctx_t *c)
{
    const st_config_t *cfg = c->app->cfg;
    if (!*cfg->cluster_secret) {
        if (!st_config_auth_on(cfg)) return ST_OK; /* an open group */
        return st_ctx_error(c, ST_EUNAUTH, "internal routes need --cluster-secret");
    }
    const char *tok;
    size_t tlen;
    if (!st__bearer(c->req, &tok, &tlen))
        return st_ctx_error(c, ST_EUNAUTH, "a member's Bearer token is required");
    st_jwt_opts_t o = {.hs_secret = cfg->cluster_secret,
                       .leeway_s = (int64_t)cfg->jwt_leeway,
                       .now_us = st_now_us()};
    st_jwt_claims_t cl;
    const char *why;
    if (st_jwt_verify(tok, tlen, &o, &cl, &why) != ST_OK)
        return st_ctx_error(c, ST_EUNAUTH, "not a member's token: %s", why);
    c->subject = st_arena_strndup(c->arena, cl.subject, strlen(cl.subject));
    c->admin = true;
    free(cl.subject);
    return ST_OK;
}

int st_auth_route(st_ctx_t *c, unsigned flags)
{
    int rc = ST_OK;
    if (flags & ST_ROUTE_INTERNAL)
        rc = st__check_member(c);
    else if (st_config_auth_on(c->app->cfg) && !(flags & ST_ROUTE_OPEN))
        rc = st_auth_check(c, ((flags & ST_ROUTE_ADMIN) ? ST_AUTH_ADMIN : 0) |
                                  ((flags & ST_ROUTE_REVOKED_OK) ? ST_AUTH_REVOKED_OK : 0));
    if (rc != ST_OK && c->status == 401) c->extra_headers = ST__WWW_AUTH;
    return rc;
}
