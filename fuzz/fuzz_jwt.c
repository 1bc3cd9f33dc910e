/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer driver for the token parsers (src/http/jwt.c, jwks.c): an input starting with 'K'
 * is a JSON Web Key Set, anything else a compact JWS checked against a fixed set (an ES256, an
 * RSA and an Ed25519 key; the seeds in fuzz/corpus/jwt are tokens those keys signed, so the
 * fuzzer reaches the claims) and an HS256 secret, with issuer, audience and a dotted roles path.
 * Whatever is accepted must carry a subject; nothing may crash or leak.
 */
#include "../src/http/jwt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char fz_jwks[] =
    "{\"keys\":[{\"kty\":\"EC\",\"x\":\"Z1BifH47h-X9ntasV2JQGyAZbd66gnIVO3gbnB558pg\",\"y\":"
    "\"LWSM20ce2eqzWCt6yXR74EyKFuHbkxF4Tuyl5jFgESM\",\"crv\":\"P-256\",\"kid\":\"e1\",\"alg\":"
    "\"ES256\"},{\"kty\":\"RSA\",\"n\":\"x42opbp-Oxi7_"
    "PWoOoqTpnvpBq3DB4jEkvIYVlG4cm29srbflle5TnWkZZzfMUZE0DqvwCgMPw0w0VOAOS8YdvBPakk8CCgOUYWKFvUCqn2"
    "k70osidpbPbKlAqrugw_2a6W7lUe2GnjPoZDMzM03_0qSnDr70yH4YGUh0QNChNGUWUM-"
    "MUTsMgwEwykB4nZATHC0hsMrirHC5RRsKbgvdPh8i9T0EOUYrhjatB06KxGA_2vDYvyjvdwcHPUlqRLf4-eTTg3B-"
    "b45lldx0NLe9yJyXehWiI1S_J-HwnJ6dqC6-c6mE73Pxsl6DaBiq_Iz1duUEMkPM4rhYGWqMGouiQ\",\"e\":"
    "\"AQAB\",\"kid\":\"r1\"},{\"crv\":\"Ed25519\",\"x\":"
    "\"HFSgbp2mjXYZDMUuFvco7rNr4EqjceB9GF5EeE0Y_4g\",\"kty\":\"OKP\",\"kid\":\"d1\"}]}";
static st_jwks_t *fz_keys;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char err[160];
    if (st_jwks_parse(fz_jwks, sizeof fz_jwks - 1, &fz_keys, err, sizeof err) != ST_OK ||
        fz_keys->n != 3) {
        fprintf(stderr, "fixed key set: %s\n", err);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    const char *s = (const char *)data + 1;
    size_t n = size - 1;
    if (data[0] == 'K') {
        st_jwks_t *set = NULL;
        char err[160];
        if (st_jwks_parse(s, n, &set, err, sizeof err) == ST_OK) {
            for (size_t i = 0; i < set->n; i++)
                if (!set->keys[i].pkey) abort();
            st_jwks_free(set);
        }
        return 0;
    }
    st_jwt_opts_t o = {.hs_secret = (data[0] & 1) ? "fuzz-secret" : NULL,
                       .sets = {fz_keys, NULL},
                       .issuer = "https://idp.example",
                       .audience = "strata",
                       .roles_claim = "realm_access.roles",
                       .subject_claim = "sub",
                       .leeway_s = 30,
                       .now_us = 1800000000000000LL};
    st_jwt_claims_t cl;
    const char *why = NULL;
    if (st_jwt_verify(s, n, &o, &cl, &why) == ST_OK) {
        if (!cl.subject || !*cl.subject) abort();
        free(cl.subject);
    } else if (!why || cl.subject) {
        abort();
    }
    return 0;
}
