/* SPDX-License-Identifier: MIT */
/*
 * Key spaces by registration: each module claims the first bytes of every key it writes when it
 * opens, naming itself. Two claims may not overlap (equal, or one a prefix of the other): the
 * second is refused (unless it is the same module's own claim again: a module reopened on the
 * same store) and strata does not start, so two modules can never share keys by accident
 * (an erasure that scans its own prefix would otherwise delete another module's records).
 * Sealed once main has opened every module; from then on a debug build aborts on a write that no
 * claim covers, so a module writing a key it never claimed fails its tests at once.
 *
 * The claims are a short list (a few dozen entries) read only at start-up and, in debug builds,
 * on each staged write: a linear scan is the right structure.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* A printable form of a prefix for messages: bytes outside 0x21..0x7e as \xNN. */
static const char *st__claim_show(char *out, size_t cap, const uint8_t *p, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < cap; i++) {
        if (p[i] > 0x20 && p[i] < 0x7f && p[i] != '\\')
            out[o++] = (char)p[i];
        else
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", p[i]);
    }
    out[o] = 0;
    return out;
}

static bool st__claim_overlaps(const st__claim_t *c, const uint8_t *p, size_t n)
{
    size_t m = c->len < n ? c->len : n;
    return memcmp(c->prefix, p, m) == 0;
}

int st_store_claim(st_store_t *s, const void *prefix, size_t plen, const char *who)
{
    ST_ASSERT(plen > 0 && plen <= ST__CLAIM_MAX && who);
    const uint8_t *p = prefix;
    for (size_t i = 0; i < s->claims.n; i++) {
        const st__claim_t *c = &s->claims.v[i];
        if (!st__claim_overlaps(c, p, plen)) continue;
        /* the same module reopened on the same store (tests, offline commands) */
        if (c->len == plen && strcmp(c->who, who) == 0) return ST_OK;
        char a[4 * ST__CLAIM_MAX + 8], b[4 * ST__CLAIM_MAX + 8];
        st_error("store: key prefix \"%s\" claimed by %s overlaps \"%s\" of %s: two modules "
                 "would share keys",
                 st__claim_show(a, sizeof a, p, plen), who,
                 st__claim_show(b, sizeof b, c->prefix, c->len), c->who);
        return ST_EEXIST;
    }
    st__claim_t c = {.len = plen, .who = who};
    memcpy(c.prefix, p, plen);
    st_vec_push(&s->claims, c);
    return ST_OK;
}

void st_store_claims_seal(st_store_t *s)
{
    s->claims_sealed = true;
}

const char *st_store_claim_of(const st_store_t *s, const void *key, size_t klen)
{
    for (size_t i = 0; i < s->claims.n; i++) {
        const st__claim_t *c = &s->claims.v[i];
        if (c->len <= klen && memcmp(c->prefix, key, c->len) == 0) return c->who;
    }
    return NULL;
}

void st__claims_check(const st_store_t *s, const void *key, size_t klen)
{
#ifndef NDEBUG
    if (!s->claims_sealed || st_store_claim_of(s, key, klen)) return;
    char k[4 * ST__CLAIM_MAX + 8];
    st_fatal("store: a write to key \"%s…\" that no module claimed (st_store_claim)",
             st__claim_show(k, sizeof k, key, klen < ST__CLAIM_MAX ? klen : ST__CLAIM_MAX));
#else
    (void)s, (void)key, (void)klen;
#endif
}

void st__claims_free(st_store_t *s)
{
    st_vec_free(&s->claims);
}

void st_store_claims_each(const st_store_t *s,
                          void (*fn)(void *arg, const void *prefix, size_t plen, const char *who),
                          void *arg)
{
    for (size_t i = 0; i < s->claims.n; i++)
        fn(arg, s->claims.v[i].prefix, s->claims.v[i].len, s->claims.v[i].who);
}

int st_store_claims(st_store_t *s, const char *who, const st_claim_t *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int rc = st_store_claim(s, c[i].p, c[i].n, who);
        if (rc != ST_OK) return rc;
    }
    return ST_OK;
}
