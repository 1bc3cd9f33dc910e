/* SPDX-License-Identifier: MIT */
/*
 * Bearer tokens: JWT with HS256 only (SPEC §7). The signature is an HMAC-SHA256 from OpenSSL,
 * compared in constant time; "alg" must be exactly HS256 (so "none" and algorithm confusion are
 * refused), "exp" and "nbf" are enforced when present, "sub" names the principal.
 */
#include "internal.h"

#include <math.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <string.h>
#include <strings.h>

/* base64url without padding -> bytes in the arena; NULL on bad input. */
static unsigned char *st__b64url(st_arena_t *a, const char *s, size_t n, size_t *out)
{
    if (n % 4 == 1) return NULL;
    size_t padded = (n + 3) / 4 * 4;
    char *tmp = st_arena_alloc(a, padded + 1);
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '-')
            c = '+';
        else if (c == '_')
            c = '/';
        else if (c == '+' || c == '/' || c == '=')
            return NULL;
        tmp[i] = c;
    }
    for (size_t i = n; i < padded; i++)
        tmp[i] = '=';
    tmp[padded] = '\0';
    unsigned char *dec = st_arena_alloc(a, padded / 4 * 3 + 1);
    int len = EVP_DecodeBlock(dec, (const unsigned char *)tmp, (int)padded);
    if (len < 0) return NULL;
    len -= (int)(padded - n); /* EVP_DecodeBlock counts padding as zero bytes */
    dec[len] = '\0';
    *out = (size_t)len;
    return dec;
}

int st_auth_check(st_ctx_t *c, bool need_admin)
{
    const st_http_request_t *r = c->req;
    const char *secret = c->app->cfg->jwt_secret;
    if (!r->auth || r->auth_len < 8 || strncasecmp(r->auth, "Bearer ", 7) != 0)
        return st_ctx_error(c, ST_EUNAUTH, "an Authorization: Bearer token is required");
    const char *tok = r->auth + 7;
    size_t tlen = r->auth_len - 7;
    while (tlen && *tok == ' ')
        tok++, tlen--;
    const char *d1 = memchr(tok, '.', tlen);
    const char *d2 = d1 ? memchr(d1 + 1, '.', tlen - (size_t)(d1 + 1 - tok)) : NULL;
    if (!d1 || !d2) return st_ctx_error(c, ST_EUNAUTH, "malformed token");
    size_t hl, pl, sl;
    unsigned char *hdr = st__b64url(c->arena, tok, (size_t)(d1 - tok), &hl);
    unsigned char *pay = st__b64url(c->arena, d1 + 1, (size_t)(d2 - d1 - 1), &pl);
    unsigned char *sig = st__b64url(c->arena, d2 + 1, tlen - (size_t)(d2 + 1 - tok), &sl);
    if (!hdr || !pay || !sig) return st_ctx_error(c, ST_EUNAUTH, "malformed token");
    /* strict JSON without U+0000: a "sub" of "alice\u0000bob" must not read as "alice" */
    st_json_info_t info = {0};
    if (st_json_check((const char *)hdr, hl, &info) != ST_OK || info.nul ||
        st_json_check((const char *)pay, pl, &info) != ST_OK || info.nul)
        return st_ctx_error(c, ST_EUNAUTH, "malformed token");
    cJSON *h = cJSON_ParseWithLength((const char *)hdr, hl);
    const cJSON *alg = h ? cJSON_GetObjectItemCaseSensitive(h, "alg") : NULL;
    bool hs256 = cJSON_IsString(alg) && strcmp(alg->valuestring, "HS256") == 0;
    cJSON_Delete(h);
    if (!hs256) return st_ctx_error(c, ST_EUNAUTH, "token algorithm must be HS256");
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mlen = 0;
    if (!HMAC(EVP_sha256(), secret, (int)strlen(secret), (const unsigned char *)tok,
              (size_t)(d2 - tok), mac, &mlen) ||
        sl != mlen || CRYPTO_memcmp(mac, sig, mlen) != 0)
        return st_ctx_error(c, ST_EUNAUTH, "bad token signature");
    cJSON *p = cJSON_ParseWithLength((const char *)pay, pl);
    if (!cJSON_IsObject(p)) {
        cJSON_Delete(p);
        return st_ctx_error(c, ST_EUNAUTH, "token payload is not a JSON object");
    }
    double now = (double)st_now_us() / 1e6;
    const cJSON *exp = cJSON_GetObjectItemCaseSensitive(p, "exp");
    const cJSON *nbf = cJSON_GetObjectItemCaseSensitive(p, "nbf");
    const cJSON *sub = cJSON_GetObjectItemCaseSensitive(p, "sub");
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(p, "role");
    int rc = ST_OK;
    if (exp && (!cJSON_IsNumber(exp) || now >= exp->valuedouble))
        rc = st_ctx_error(c, ST_EUNAUTH, "token expired");
    else if (nbf && (!cJSON_IsNumber(nbf) || now < nbf->valuedouble))
        rc = st_ctx_error(c, ST_EUNAUTH, "token not yet valid");
    else if (!cJSON_IsString(sub) || !*sub->valuestring)
        rc = st_ctx_error(c, ST_EUNAUTH, "token has no subject");
    else if (need_admin && !(cJSON_IsString(role) && strcmp(role->valuestring, "admin") == 0))
        rc = st_ctx_error(c, ST_EFORBIDDEN, "this route needs role admin");
    if (rc == ST_OK) {
        c->subject = st_arena_strndup(c->arena, sub->valuestring, strlen(sub->valuestring));
        c->admin = cJSON_IsString(role) && strcmp(role->valuestring, "admin") == 0;
        c->token_exp_us =
            exp ? (exp->valuedouble >= 9.2e12 ? INT64_MAX : (int64_t)(exp->valuedouble * 1e6)) : 0;
    }
    cJSON_Delete(p);
    return rc;
}
