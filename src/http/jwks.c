/* SPDX-License-Identifier: MIT */
/*
 * JSON Web Key Sets → OpenSSL keys. Identity providers (Auth0, Okta, Cognito, Keycloak, Firebase)
 * publish their token-signing public keys as a JWKS; each JWK's numbers (RSA n/e, EC x/y, OKP x)
 * are handed to OpenSSL as parameters (OSSL_PARAM_BLD + EVP_PKEY_fromdata), which checks them
 * (an EC point must lie on its curve). cJSON reads the document.
 */
#include "jwt.h"

#include <cjson/cJSON.h>
#include <openssl/core_names.h>
#include <openssl/param_build.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

unsigned char *st_b64url_decode(const char *s, size_t n, size_t *outlen)
{
    if (n % 4 == 1 || n > (1u << 24)) return NULL;
    size_t padded = (n + 3) / 4 * 4;
    unsigned char *tmp = malloc(padded + 1);
    unsigned char *dec = malloc(padded / 4 * 3 + 1);
    if (!tmp || !dec) goto fail;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '-')
            c = '+';
        else if (c == '_')
            c = '/';
        else if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
            goto fail; /* '+', '/', '=', blanks: not base64url */
        tmp[i] = (unsigned char)c;
    }
    memset(tmp + n, '=', padded - n);
    int len = EVP_DecodeBlock(dec, tmp, (int)padded);
    if (len < 0) goto fail;
    len -= (int)(padded - n); /* EVP_DecodeBlock counts the padding as zero bytes */
    dec[len] = '\0';
    *outlen = (size_t)len;
    free(tmp);
    return dec;
fail:
    free(tmp);
    free(dec);
    return NULL;
}

/* A base64url member of a JWK, decoded (malloc'd); NULL when absent or malformed. */
static unsigned char *st__member(const cJSON *k, const char *name, size_t *len)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(k, name);
    if (!cJSON_IsString(v)) return NULL;
    unsigned char *d = st_b64url_decode(v->valuestring, strlen(v->valuestring), len);
    if (d && *len == 0) {
        free(d);
        return NULL;
    }
    return d;
}

static EVP_PKEY *st__fromdata(const char *type, OSSL_PARAM_BLD *bld)
{
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    if (!params || !ctx || EVP_PKEY_fromdata_init(ctx) != 1 ||
        EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1)
        pkey = NULL;
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    if (!pkey) return NULL;
    /* the parameters are the key's only source: have OpenSSL check them as a public key */
    EVP_PKEY_CTX *chk = EVP_PKEY_CTX_new_from_pkey(NULL, pkey, NULL);
    bool ok = chk && EVP_PKEY_public_check(chk) == 1;
    EVP_PKEY_CTX_free(chk);
    if (!ok) {
        EVP_PKEY_free(pkey);
        return NULL;
    }
    return pkey;
}

static const char *st__rsa(const cJSON *k, st_jwk_t *out)
{
    size_t nl = 0, el = 0;
    unsigned char *n = st__member(k, "n", &nl), *e = st__member(k, "e", &el);
    const char *why = NULL;
    BIGNUM *bn = n ? BN_bin2bn(n, (int)nl, NULL) : NULL,
           *be = e ? BN_bin2bn(e, (int)el, NULL) : NULL;
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    if (!bn || !be)
        why = "an RSA key needs base64url \"n\" and \"e\"";
    else if (BN_num_bits(bn) < 2048 || BN_num_bits(bn) > 16384)
        why = "an RSA key's modulus must have 2048 to 16384 bits";
    else if (!bld || !OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn) ||
             !OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be) ||
             !(out->pkey = st__fromdata("RSA", bld)))
        why = "OpenSSL refused an RSA key";
    OSSL_PARAM_BLD_free(bld);
    BN_free(bn);
    BN_free(be);
    free(n);
    free(e);
    out->kty = ST_JWK_RSA;
    return why;
}

/* EC P-256/P-384 (skip: *skip for another curve) or OKP Ed25519. */
static const char *st__ec_okp(const cJSON *k, bool okp, st_jwk_t *out, bool *skip)
{
    const cJSON *crv = cJSON_GetObjectItemCaseSensitive(k, "crv");
    const char *c = cJSON_IsString(crv) ? crv->valuestring : "";
    const char *group = NULL;
    size_t flen = 0;
    if (!okp && strcmp(c, "P-256") == 0)
        group = "prime256v1", flen = 32;
    else if (!okp && strcmp(c, "P-384") == 0)
        group = "secp384r1", flen = 48;
    else if (okp && strcmp(c, "Ed25519") == 0)
        flen = 32;
    if (!flen) {
        *skip = true; /* P-521, secp256k1, Ed448, X25519 (not for signatures): not ours */
        return NULL;
    }
    size_t xl = 0, yl = 0;
    unsigned char *x = st__member(k, "x", &xl), *y = okp ? NULL : st__member(k, "y", &yl);
    unsigned char pub[1 + 2 * 48];
    size_t plen = 0;
    const char *why = NULL;
    if (!x || xl != flen || (!okp && (!y || yl != flen))) {
        why = okp ? "an Ed25519 key needs a 32-byte \"x\""
                  : "an EC key needs \"x\" and \"y\" of its curve's size";
    } else if (okp) {
        memcpy(pub, x, flen), plen = flen;
    } else {
        pub[0] = 0x04; /* uncompressed point: 04 || x || y */
        memcpy(pub + 1, x, flen);
        memcpy(pub + 1 + flen, y, flen);
        plen = 1 + 2 * flen;
    }
    OSSL_PARAM_BLD *bld = why ? NULL : OSSL_PARAM_BLD_new();
    if (!why &&
        (!bld ||
         (group && !OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, group, 0)) ||
         !OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, pub, plen) ||
         !(out->pkey = st__fromdata(okp ? "ED25519" : "EC", bld))))
        why = okp ? "OpenSSL refused an Ed25519 key"
                  : "OpenSSL refused an EC key (not a point of "
                    "its curve?)";
    OSSL_PARAM_BLD_free(bld);
    free(x);
    free(y);
    out->kty = okp ? ST_JWK_OKP : ST_JWK_EC;
    out->ec_bits = okp ? 0 : (int)flen * 8;
    return why;
}

/* One JWK into out (*skip when it is not a signing key strata can use). */
static const char *st__jwks_key(const cJSON *k, st_jwk_t *out, bool *skip)
{
    if (!cJSON_IsObject(k)) return "every member of \"keys\" must be an object";
    const cJSON *kty = cJSON_GetObjectItemCaseSensitive(k, "kty");
    const cJSON *use = cJSON_GetObjectItemCaseSensitive(k, "use");
    const cJSON *kid = cJSON_GetObjectItemCaseSensitive(k, "kid");
    const cJSON *alg = cJSON_GetObjectItemCaseSensitive(k, "alg");
    if (!cJSON_IsString(kty)) return "a key has no \"kty\"";
    if ((use && !(cJSON_IsString(use) && strcmp(use->valuestring, "sig") == 0)) ||
        (alg && (!cJSON_IsString(alg) || strlen(alg->valuestring) >= sizeof out->alg))) {
        *skip = true; /* an encryption key, or an algorithm no token of ours names */
        return NULL;
    }
    if (kid && (!cJSON_IsString(kid) || strlen(kid->valuestring) >= sizeof out->kid))
        return "a key's \"kid\" must be a string of at most 127 bytes";
    if (kid) strcpy(out->kid, kid->valuestring);
    if (alg) strcpy(out->alg, alg->valuestring);
    if (strcmp(kty->valuestring, "RSA") == 0) return st__rsa(k, out);
    if (strcmp(kty->valuestring, "EC") == 0) return st__ec_okp(k, false, out, skip);
    if (strcmp(kty->valuestring, "OKP") == 0) return st__ec_okp(k, true, out, skip);
    *skip = true; /* "oct" (a shared secret does not belong in a published set) and the rest */
    return NULL;
}

int st_jwks_parse(const char *json, size_t n, st_jwks_t **out, char *err, size_t errlen)
{
    *out = NULL;
    st_json_info_t info = {0};
    cJSON *doc = NULL;
    const char *why = NULL;
    st_jwks_t *set = calloc(1, sizeof *set);
    if (!set) return ST_ENOMEM;
    if (st_json_check(json, n, &info) != ST_OK || info.nul ||
        !(doc = cJSON_ParseWithLength(json, n))) {
        why = "not a JSON document";
        goto fail;
    }
    const cJSON *keys = cJSON_GetObjectItemCaseSensitive(doc, "keys");
    if (!cJSON_IsArray(keys)) {
        why = "a key set is an object with a \"keys\" array";
        goto fail;
    }
    int total = cJSON_GetArraySize(keys);
    if (total > 256) {
        why = "more than 256 keys";
        goto fail;
    }
    set->keys = calloc((size_t)total + 1, sizeof *set->keys);
    if (!set->keys) {
        why = "out of memory";
        goto fail;
    }
    const cJSON *k;
    size_t nbad = 0;
    cJSON_ArrayForEach(k, keys)
    {
        st_jwk_t *jk = &set->keys[set->n];
        bool skip = false;
        const char *bad = st__jwks_key(k, jk, &skip);
        if (bad || skip) {
            EVP_PKEY_free(jk->pkey); /* a half-built key */
            memset(jk, 0, sizeof *jk);
            if (bad) { /* RFC 7517 §5: a key that cannot be used is skipped, not the whole set */
                const cJSON *kid = cJSON_GetObjectItemCaseSensitive(k, "kid");
                st_warn("jwks: a key (kid \"%.64s\") is skipped: %s",
                        cJSON_IsString(kid) ? kid->valuestring : "", bad);
                why = bad;
                nbad++;
            }
            continue;
        }
        set->n++;
    }
    if (!set->n && nbad) goto fail; /* not one usable key: say why */
    why = NULL;
    cJSON_Delete(doc);
    *out = set;
    return ST_OK;
fail:
    if (err && errlen) snprintf(err, errlen, "%s", why);
    cJSON_Delete(doc);
    st_jwks_free(set);
    return ST_EINVAL;
}

void st_jwks_free(st_jwks_t *set)
{
    if (!set) return;
    for (size_t i = 0; i < set->n; i++)
        EVP_PKEY_free(set->keys[i].pkey);
    free(set->keys);
    free(set);
}
