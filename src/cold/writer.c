/* SPDX-License-Identifier: MIT */
/*
 * The tier's writer (see strata/tier.h): whose objects these are. SPEC §5: no object key is ever
 * written twice, not by a restored node nor by a second node on the same bucket. Every key a kind
 * writes names the writer's incarnation ("w" and 16 hex digits), a random number minted in the
 * batch of the store's first object intent and minted anew by a restore; object stores refuse to
 * overwrite on top of that (objstore.c). The record lives in the hot store, so a group's members
 * share it (it is replicated and shipped like the manifest), and it lists the incarnations whose
 * objects this store may delete: a restored store owns only its new one, so it never deletes the
 * objects of the node it came from, which that node may still read.
 *
 *   'w' "writer" -> u64 current | u32 flags (1: owns keys that name no writer) | u32 n |
 *                   u64 owned[n]
 *
 * Loop thread only.
 */
#include "strata/tier.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

static const uint8_t st__writer_key[] = {ST_KS_WRITER, 'w', 'r', 'i', 't', 'e', 'r'};

enum { ST__OWNS_UNNAMED = 1 };

#define ST__HEAD 16 /* current, flags, n */

static uint64_t st__mint(void)
{
    uint64_t v = 0;
    while (v == 0) /* 0 is "no writer" */
        if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) v = (uint64_t)st_now_us() ^ rand();
    return v;
}

static int st__writer_load(st_store_t *s, st_tier_writer_t *w, uint64_t *wait)
{
    const void *v;
    size_t vl;
    memset(w, 0, sizeof *w);
    int rc = st_store_get(s, st__writer_key, sizeof st__writer_key, &v, &vl, wait);
    if (rc != ST_OK) return rc;
    uint32_t flags, n;
    if (vl < ST__HEAD) return ST_EINTERNAL;
    memcpy(&w->current, v, 8);
    memcpy(&flags, (const char *)v + 8, 4);
    memcpy(&n, (const char *)v + 12, 4);
    if (n > ST_TIER_OWNED_MAX || vl != ST__HEAD + (size_t)n * 8) return ST_EINTERNAL;
    w->unnamed = flags & ST__OWNS_UNNAMED;
    w->n = n;
    memcpy(w->owned, (const char *)v + ST__HEAD, (size_t)n * 8);
    return ST_OK;
}

static int st__writer_save(st_store_t *s, const st_tier_writer_t *w, uint64_t *wait)
{
    uint8_t v[ST__HEAD + ST_TIER_OWNED_MAX * 8];
    uint32_t flags = w->unnamed ? ST__OWNS_UNNAMED : 0, n = (uint32_t)w->n;
    memcpy(v, &w->current, 8);
    memcpy(v + 8, &flags, 4);
    memcpy(v + 12, &n, 4);
    memcpy(v + ST__HEAD, w->owned, w->n * 8);
    return st_store_put(s, st__writer_key, sizeof st__writer_key, v, ST__HEAD + w->n * 8, wait);
}

int st_tier_writer_get(st_store_t *s, st_tier_writer_t *w, uint64_t *wait)
{
    return st__writer_load(s, w, wait);
}

int st_tier_writer(st_store_t *s, uint64_t *inc, uint64_t *wait)
{
    st_tier_writer_t w;
    int rc = st__writer_load(s, &w, wait);
    if (rc == ST_ENOTFOUND) {
        /* the store's first object, or one from before incarnations: the objects it already
         * names (keys without a writer) are its own */
        w.current = st__mint();
        w.unnamed = true;
        w.owned[w.n++] = w.current;
        rc = st__writer_save(s, &w, wait);
    }
    if (rc == ST_OK) *inc = w.current;
    return rc;
}

int st_tier_writer_renew(st_store_t *s, uint64_t *inc, uint64_t *wait)
{
    st_tier_writer_t w = {.current = st__mint()};
    w.owned[w.n++] = w.current;
    *inc = w.current;
    return st__writer_save(s, &w, wait);
}

int st_tier_writer_adopt(st_store_t *s, uint64_t inc, uint64_t *wait)
{
    uint64_t cur;
    int rc = st_tier_writer(s, &cur, wait);
    st_tier_writer_t w;
    if (rc == ST_OK) rc = st__writer_load(s, &w, wait);
    if (rc != ST_OK) return rc;
    if (inc == 0) {
        w.unnamed = true;
    } else {
        for (size_t i = 0; i < w.n; i++)
            if (w.owned[i] == inc) return ST_OK;
        if (w.n == ST_TIER_OWNED_MAX) return ST_EFULL;
        w.owned[w.n++] = inc;
    }
    return st__writer_save(s, &w, wait);
}

void st_tier_key_writer(st_buf_t *b, uint64_t inc)
{
    st_buf_printf(b, "w%016llx", (unsigned long long)inc);
}

static int st__writer_hex(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

uint64_t st_tier_key_incarnation(const char *key)
{
    const char *name = strrchr(key, '/');
    for (const char *p = name ? name + 1 : key; (p = strchr(p, '-')) != NULL; p++) {
        if (p[1] != 'w') continue;
        uint64_t v = 0;
        int i = 0;
        for (; i < 16 && st__writer_hex(p[2 + i]) >= 0; i++)
            v = v << 4 | (uint64_t)st__writer_hex(p[2 + i]);
        if (i == 16 && (p[18] == '-' || p[18] == '.') && v) return v;
    }
    return 0;
}

bool st_tier_writer_owns(const st_tier_writer_t *w, const char *key)
{
    if (!w->current) return true; /* no record: nothing was restored, every object is its own */
    uint64_t inc = st_tier_key_incarnation(key);
    if (!inc) return w->unnamed;
    for (size_t i = 0; i < w->n; i++)
        if (w->owned[i] == inc) return true;
    return false;
}
