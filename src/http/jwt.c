/* SPDX-License-Identifier: MIT */
/*
 * One token, verified (RFC 7515/7518/7519, RFC 8037 for EdDSA). The header's "alg" picks the
 * check and is held against the key: HS256 only with --jwt-secret (so a token "signed" with a
 * public key as an HMAC secret — key confusion — finds no secret where only public keys are
 * configured), RS/PS/ES/EdDSA only with a key of the matching type, curve and pinned alg. Then
 * the claims: exp and nbf within the leeway (an identity provider's token must have exp), iss and
 * aud when configured (a token without them is refused), the subject and the roles at configured
 * paths.
 */
#include "jwt.h"

#include <cjson/cJSON.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/hmac.h>
#include <openssl/rsa.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct {
    const char *name;
    st_jwk_kty_t kty;
    const char *md; /* NULL: EdDSA hashes internally */
    bool pss;
    int ec_bits;
} st_alg_t;

static const st_alg_t st__algs[] = {
    {"RS256", ST_JWK_RSA, "SHA256", false, 0},  {"RS384", ST_JWK_RSA, "SHA384", false, 0},
    {"RS512", ST_JWK_RSA, "SHA512", false, 0},  {"PS256", ST_JWK_RSA, "SHA256", true, 0},
    {"PS384", ST_JWK_RSA, "SHA384", true, 0},   {"PS512", ST_JWK_RSA, "SHA512", true, 0},
    {"ES256", ST_JWK_EC, "SHA256", false, 256}, {"ES384", ST_JWK_EC, "SHA384", false, 384},
    {"EdDSA", ST_JWK_OKP, NULL, false, 0},
};

/* JWS ECDSA signatures are r || s of the curve's size; OpenSSL verifies DER (owned, free()). */
static unsigned char *st__ecdsa_der(const unsigned char *sig, size_t slen, int bits, size_t *dlen)
{
    size_t half = (size_t)bits / 8;
    if (slen != 2 * half) return NULL;
    ECDSA_SIG *es = ECDSA_SIG_new();
    BIGNUM *r = BN_bin2bn(sig, (int)half, NULL), *s = BN_bin2bn(sig + half, (int)half, NULL);
    unsigned char *der = NULL;
    if (es && r && s && ECDSA_SIG_set0(es, r, s) == 1) {
        r = s = NULL; /* owned by es now */
        int n = i2d_ECDSA_SIG(es, &der);
        if (n > 0) *dlen = (size_t)n;
    }
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(es);
    return der;
}

static bool st__sig_ok(const st_alg_t *a, const st_jwk_t *k, const char *msg, size_t mlen,
                       const unsigned char *sig, size_t slen)
{
    unsigned char *der = NULL;
    if (a->kty == ST_JWK_EC) {
        if (!(der = st__ecdsa_der(sig, slen, a->ec_bits, &slen))) return false;
        sig = der;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    EVP_PKEY_CTX *pctx = NULL;
    bool ok = ctx && EVP_DigestVerifyInit_ex(ctx, &pctx, a->md, NULL, NULL, k->pkey, NULL) == 1;
    if (ok && a->pss) /* RFC 7518 §3.5: MGF1 with the same hash, salt as long as the hash */
        ok = EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) == 1 &&
             EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) == 1;
    ok = ok && EVP_DigestVerify(ctx, sig, slen, (const unsigned char *)msg, mlen) == 1;
    EVP_MD_CTX_free(ctx);
    OPENSSL_free(der);
    return ok;
}

/* Whether key k may check a token of algorithm a. */
static bool st__key_fits(const st_alg_t *a, const st_jwk_t *k)
{
    return k->kty == a->kty && (!*k->alg || strcmp(k->alg, a->name) == 0) &&
           (a->kty != ST_JWK_EC || k->ec_bits == a->ec_bits);
}

/* The signature over tok[0..signed_len) by the key the header names. */
static const char *st__check_sig(const cJSON *h, const st_jwt_opts_t *o, const char *tok,
                                 size_t signed_len, const unsigned char *sig, size_t slen,
                                 st_jwt_claims_t *out)
{
    const cJSON *alg = cJSON_GetObjectItemCaseSensitive(h, "alg");
    const cJSON *kid = cJSON_GetObjectItemCaseSensitive(h, "kid");
    if (!cJSON_IsString(alg)) return "the token header has no \"alg\"";
    if (cJSON_GetObjectItemCaseSensitive(h, "crit"))
        return "the token header has \"crit\" extensions strata does not know";
    const char *name = alg->valuestring;
    if (strcasecmp(name, "none") == 0) return "unsigned tokens (alg none) are refused";
    if (strncmp(name, "HS", 2) == 0) {
        if (!o->hs_secret || !*o->hs_secret)
            return "an HMAC token is refused: only public keys are configured";
        if (strcmp(name, "HS256") != 0) return "token algorithm must be HS256 with --jwt-secret";
        unsigned char mac[EVP_MAX_MD_SIZE];
        unsigned int mlen = 0;
        if (!HMAC(EVP_sha256(), o->hs_secret, (int)strlen(o->hs_secret), (const unsigned char *)tok,
                  signed_len, mac, &mlen) ||
            slen != mlen || CRYPTO_memcmp(mac, sig, mlen) != 0)
            return "bad token signature";
        return NULL;
    }
    const st_alg_t *a = NULL;
    for (size_t i = 0; i < sizeof st__algs / sizeof *st__algs; i++)
        if (strcmp(name, st__algs[i].name) == 0) a = &st__algs[i];
    if (!a) return "unsupported token algorithm";
    if (kid && !cJSON_IsString(kid)) return "the token's \"kid\" must be a string";
    bool any = false, named = false;
    for (int s = 0; s < 2; s++) {
        const st_jwks_t *set = o->sets[s];
        for (size_t i = 0; set && i < set->n; i++) {
            const st_jwk_t *k = &set->keys[i];
            if (kid && strcmp(k->kid, kid->valuestring) != 0) continue;
            named = true;
            if (!st__key_fits(a, k)) continue;
            any = true;
            if (st__sig_ok(a, k, tok, signed_len, sig, slen)) return NULL;
        }
    }
    if (kid && !named) {
        out->unknown_kid = true;
        out->needs_public = true;
        return "no key has the token's kid";
    }
    if (kid && !any) return "the key the token names does not fit its alg (kty, curve or alg)";
    if (!any) {
        out->needs_public = true;
        return "no configured key fits the token's algorithm";
    }
    return "bad token signature";
}

/* The value at a dotted path ("realm_access.roles"). A member whose name holds dots (Auth0's
 * "https://example.com/roles") is found too: the rest of the path is tried whole first. */
static const cJSON *st__jwt_path(const cJSON *obj, const char *path)
{
    while (cJSON_IsObject(obj)) {
        const cJSON *whole = cJSON_GetObjectItemCaseSensitive(obj, path);
        if (whole) return whole;
        const char *dot = strchr(path, '.');
        if (!dot) return NULL;
        const cJSON *c;
        const cJSON *next = NULL;
        cJSON_ArrayForEach(c, obj)
        {
            if (c->string && strlen(c->string) == (size_t)(dot - path) &&
                memcmp(c->string, path, (size_t)(dot - path)) == 0)
                next = c;
        }
        obj = next;
        path = dot + 1;
    }
    return NULL;
}

/* True when v is the string s or an array holding it. */
static bool st__holds(const cJSON *v, const char *s)
{
    if (cJSON_IsString(v)) return strcmp(v->valuestring, s) == 0;
    if (!cJSON_IsArray(v)) return false;
    const cJSON *e;
    cJSON_ArrayForEach(e, v)
    {
        if (cJSON_IsString(e) && strcmp(e->valuestring, s) == 0) return true;
    }
    return false;
}

/* A NumericDate (RFC 7519 §2: seconds, maybe fractional) in Unix µs: 1 at least (0 means
 * "absent"), saturating far out. */
static int64_t st__date_us(double s)
{
    return s >= 9.2e12 ? INT64_MAX : s <= 1e-6 ? 1 : (int64_t)(s * 1e6);
}

int st_http_token_check(const st_http_token_times_t *t, int64_t at_us, int64_t leeway_us,
                        const char **why)
{
    /* at - leeway, not exp + leeway: exp may be INT64_MAX */
    if (t->exp_us && at_us - leeway_us >= t->exp_us) {
        *why = "token expired";
        return ST_EUNAUTH;
    }
    if (t->nbf_us && at_us + leeway_us < t->nbf_us) {
        *why = "token not yet valid";
        return ST_EUNAUTH;
    }
    return ST_OK;
}

/* The time claims: numbers when present; *t gets them in µs. */
static const char *st__times(const cJSON *p, st_http_token_times_t *t)
{
    static const char *const names[] = {"exp", "nbf", "iat"};
    int64_t *dst[] = {&t->exp_us, &t->nbf_us, &t->iat_us};
    for (size_t i = 0; i < 3; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(p, names[i]);
        *dst[i] = 0;
        if (!v) continue;
        if (!cJSON_IsNumber(v))
            return i == 0   ? "token expired" /* as before: an exp that is no date never holds */
                   : i == 1 ? "token not yet valid"
                            : "the token's iat is not a number";
        *dst[i] = st__date_us(v->valuedouble);
    }
    return NULL;
}

/* The claims of a token whose signature held. An identity provider's token (public_key) must
 * carry exp: every provider sets it, and one without would be good forever. An HS256 token is
 * minted by the deployment itself with --jwt-secret; exp there is its choice (SPEC §7). */
static const char *st__check_claims(const cJSON *p, const st_jwt_opts_t *o, bool public_key,
                                    st_jwt_claims_t *out)
{
    if (!cJSON_IsObject(p)) return "token payload is not a JSON object";
    const char *w = st__times(p, &out->times);
    if (w) return w;
    if (!out->times.exp_us && public_key) return "token has no expiry (exp)";
    if (st_http_token_check(&out->times, o->now_us, o->leeway_s * 1000000, &w) != ST_OK) return w;
    if (o->issuer && *o->issuer) {
        const cJSON *iss = cJSON_GetObjectItemCaseSensitive(p, "iss");
        if (!cJSON_IsString(iss) || strcmp(iss->valuestring, o->issuer) != 0)
            return "the token's issuer (iss) is not --jwt-issuer";
    }
    if (o->audience && *o->audience &&
        !st__holds(cJSON_GetObjectItemCaseSensitive(p, "aud"), o->audience))
        return "the token's audience (aud) does not hold --jwt-audience";
    const cJSON *sub = st__jwt_path(p, o->subject_claim ? o->subject_claim : "sub");
    if (!cJSON_IsString(sub) || !*sub->valuestring) return "token has no subject";
    out->subject = strdup(sub->valuestring);
    if (!out->subject) return "out of memory";
    out->admin = st__holds(st__jwt_path(p, o->roles_claim ? o->roles_claim : "role"), "admin");
    return NULL;
}

/* Whether the header (already checked) names an HMAC algorithm. */
static bool st__is_hmac(const cJSON *h)
{
    const cJSON *alg = cJSON_GetObjectItemCaseSensitive(h, "alg");
    return cJSON_IsString(alg) && strncmp(alg->valuestring, "HS", 2) == 0;
}

/* Strict JSON without U+0000, as cJSON reads it: a "sub" of "alice\u0000bob" must not read as
 * "alice". NULL when the bytes are not that. */
static cJSON *st__json(const unsigned char *s, size_t n)
{
    st_json_info_t info = {0};
    if (!s || st_json_check((const char *)s, n, &info) != ST_OK || info.nul) return NULL;
    return cJSON_ParseWithLength((const char *)s, n);
}

int st_jwt_verify(const char *tok, size_t n, const st_jwt_opts_t *o, st_jwt_claims_t *out,
                  const char **why)
{
    memset(out, 0, sizeof *out);
    const char *d1 = memchr(tok, '.', n);
    const char *d2 = d1 ? memchr(d1 + 1, '.', n - (size_t)(d1 + 1 - tok)) : NULL;
    if (!d1 || !d2 || memchr(d2 + 1, '.', n - (size_t)(d2 + 1 - tok))) {
        *why = "malformed token";
        return ST_EUNAUTH;
    }
    size_t hl = 0, pl = 0, sl = 0;
    unsigned char *hdr = st_b64url_decode(tok, (size_t)(d1 - tok), &hl);
    unsigned char *pay = st_b64url_decode(d1 + 1, (size_t)(d2 - d1 - 1), &pl);
    unsigned char *sig = st_b64url_decode(d2 + 1, n - (size_t)(d2 + 1 - tok), &sl);
    cJSON *h = st__json(hdr, hl), *p = NULL;
    const char *w = NULL;
    if (!hdr || !pay || !sig || !cJSON_IsObject(h))
        w = "malformed token";
    else if (!(w = st__check_sig(h, o, tok, (size_t)(d2 - tok), sig, sl, out)) &&
             !(p = st__json(pay, pl)))
        w = "malformed token";
    else if (!w)
        w = st__check_claims(p, o, !st__is_hmac(h), out);
    cJSON_Delete(h);
    cJSON_Delete(p);
    free(hdr);
    free(pay);
    free(sig);
    if (w) {
        free(out->subject);
        out->subject = NULL;
        *why = w;
        return ST_EUNAUTH;
    }
    return ST_OK;
}
