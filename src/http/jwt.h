/* SPDX-License-Identifier: MIT */
/*
 * JSON Web Tokens (RFC 7519) and Key Sets (RFC 7517, 7518, 8037), verified with OpenSSL 3's EVP
 * API; no cryptography of our own. jwks.c turns a key set into EVP_PKEYs, jwt.c checks one
 * token's signature and claims (its times by st_http_token_check, the one clock rule), keys.c keeps
 * the identity provider's keys fresh and auth.c wires all of it to requests, with a cache of
 * verified tokens. Nothing here touches the loop but keys.c; the parsers are pure functions (the
 * fuzzer drives them).
 */
#ifndef STRATA_HTTP_JWT_H
#define STRATA_HTTP_JWT_H

#include "strata/config.h"
#include "strata/core.h"
#include "strata/http.h"

#include <openssl/evp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef enum { ST_JWK_RSA = 1, ST_JWK_EC, ST_JWK_OKP } st_jwk_kty_t;

typedef struct {
    char kid[128]; /* "" when the key has none */
    char alg[16];  /* "" when the key does not pin an algorithm */
    st_jwk_kty_t kty;
    int ec_bits;    /* EC: 256 or 384 (the curve); 0 otherwise */
    EVP_PKEY *pkey; /* owned by the set */
} st_jwk_t;

typedef struct {
    st_jwk_t *keys;
    size_t n;
} st_jwks_t;

/*
 * Parses a JWKS document ({"keys":[…]}) into usable public signing keys: RSA (≥ 2048 bits), EC
 * P-256/P-384 and OKP Ed25519. Keys of other types, curves or uses ("use":"enc") are skipped, as
 * RFC 7517 §5 asks; a key of a known type that is malformed fails the whole set. On success *out
 * is owned (st_jwks_free) and may hold no keys; on failure err says why (ST_EINVAL).
 * Thread-safe: the URL fetcher parses on a worker.
 */
int st_jwks_parse(const char *json, size_t n, st_jwks_t **out, char *err, size_t errlen);
void st_jwks_free(st_jwks_t *set);

/* base64url without padding (RFC 7515 §2) → malloc'd bytes (NUL-terminated, *outlen without
 * it); NULL on any character outside the alphabet or a length no encoding has. */
unsigned char *st_b64url_decode(const char *s, size_t n, size_t *outlen);

typedef struct {
    const char *hs_secret;     /* HS256 key; NULL or "": HMAC tokens are refused */
    const st_jwks_t *sets[2];  /* public keys (file, URL); either may be NULL */
    const char *issuer;        /* "" or NULL: unchecked */
    const char *audience;      /* "" or NULL: unchecked */
    const char *roles_claim;   /* dotted path; NULL: "role" */
    const char *subject_claim; /* NULL: "sub" */
    int64_t leeway_s;
    int64_t now_us; /* the time the token is checked at (st_http_token_check) */
} st_jwt_opts_t;

typedef struct {
    char *subject;               /* owned: free() */
    bool admin;                  /* "admin" among the roles */
    st_http_token_times_t times; /* exp, nbf, iat (0 each when absent) */
    bool unknown_kid;            /* refused for a kid no key set holds: worth a refresh */
    bool needs_public;           /* an asymmetric token no configured key could check */
} st_jwt_claims_t;

/*
 * Verifies the compact JWS tok[0..n) against o: the algorithm (never "none"; an HMAC token only
 * with an HS256 secret), the key (kid, kty, alg and curve must fit), the signature, then exp/nbf
 * with the leeway (st_http_token_check; a public-key token must have exp; exp, nbf and iat must be
 * numbers when present), iss, aud and the subject. ST_OK fills *out
 * (free out->subject); ST_EUNAUTH sets *why to a static reason and leaves only the two flags of
 * *out meaningful.
 */
int st_jwt_verify(const char *tok, size_t n, const st_jwt_opts_t *o, st_jwt_claims_t *out,
                  const char **why);

/* ---- keys.c: the keys of --jwt-jwks-file and --jwt-jwks-url, and the verified-token cache ---- */
typedef struct st_tcache_entry st_tcache_entry_t;
typedef struct st_auth st_auth_t;

struct st_auth {
    uv_loop_t *loop;
    const st_config_t *cfg; /* borrowed */
    st_jwks_t *file_keys;   /* loaded at start; NULL without --jwt-jwks-file */
    st_jwks_t *url_keys;    /* the last good set from the URL; NULL until one arrived */
    uint32_t gen;           /* bumped when a key set changes: older cache entries are stale */
    uv_timer_t timer;
    uv_work_t work;
    bool fetching, closing, timer_open;
    uint64_t last_fetch_ms; /* monotonic start of the last fetch */
    st_jwks_t *fetched;     /* worker → loop */
    char fetch_err[256];
    st_tcache_entry_t *cache;
};

/* A token named a kid no set holds: fetch the URL again unless that happened < 10 s ago. */
void st_auth_kid_miss(st_auth_t *a);

#endif
