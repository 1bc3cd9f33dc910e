/* SPDX-License-Identifier: MIT */
/*
 * The owners whose file records changed (strata/tier.h): "\0cold_dirty" owner -> be64 generation,
 * staged in every batch that puts or deletes one of the owner's 'F' records (intent.c's swap,
 * manifest.c's forget), so a watcher of every manifest (the tables' commit) reads the few owners
 * that changed, not every file record. Replicated and durable with the 'F' records they follow.
 * Also the file observer (st_tier_on_file), told of each 'F' put or deleted in the same places.
 */
#include "internal.h"

#include <string.h>

static const char st__dirty_pre[] = "\0cold_dirty";
#define ST__DIRTY_PL (sizeof st__dirty_pre - 1)

/* The last generation written or seen: the next one written is greater than both (and than the
 * clock's µs, so a new leader's marks differ from its predecessor's), so a mark rewritten after a
 * walk saw it never carries the generation the walk saw. Loop thread only. */
static uint64_t st__dirty_gen;

static size_t st__dirty_key(uint8_t *k, const char *o, size_t ol)
{
    memcpy(k, st__dirty_pre, ST__DIRTY_PL);
    memcpy(k + ST__DIRTY_PL, o, ol);
    return ST__DIRTY_PL + ol;
}

int st__tier_dirty(st_store_t *s, const char *o, size_t ol, uint64_t *wait)
{
    uint8_t k[ST__DIRTY_PL + ST_TIER_OWNER_MAX], v[8];
    uint64_t now = (uint64_t)st_now_us();
    st__dirty_gen = now > st__dirty_gen ? now : st__dirty_gen + 1;
    st_be64_put(v, st__dirty_gen);
    return st_store_put(s, k, st__dirty_key(k, o, ol), v, sizeof v, wait);
}

typedef struct {
    st_tier_dirty_fn fn;
    void *arg;
} st__dirty_walk_t;

static int st__dirty_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st__dirty_walk_t *w = arg;
    if (vlen != 8 || klen <= ST__DIRTY_PL) return 0;
    uint64_t gen = st_be64_get(val);
    if (gen > st__dirty_gen) st__dirty_gen = gen;
    return w->fn(w->arg, (const char *)key + ST__DIRTY_PL, klen - ST__DIRTY_PL, gen);
}

int st_tier_each_dirty(st_store_t *s, st_tier_dirty_fn fn, void *arg, uint64_t *wait)
{
    st__dirty_walk_t w = {fn, arg};
    return st_store_scan(s, st__dirty_pre, ST__DIRTY_PL, st__dirty_one, &w, wait);
}

int st_tier_each_dirty_tag(st_store_t *s, char tag, st_tier_dirty_fn fn, void *arg, uint64_t *wait)
{
    st__dirty_walk_t w = {fn, arg};
    uint8_t k[ST__DIRTY_PL + 2];
    memcpy(k, st__dirty_pre, ST__DIRTY_PL);
    k[ST__DIRTY_PL] = '~';
    k[ST__DIRTY_PL + 1] = (uint8_t)tag;
    if (tag) return st_store_scan(s, k, sizeof k, st__dirty_one, &w, wait);
    /* the untagged: every owner below "~" (a user's name is of [A-Za-z0-9_.:-], all below it),
     * then any above "~\xff…" (none a valid name makes; read rather than assumed away) */
    int rc = st_store_range(s, st__dirty_pre, ST__DIRTY_PL, NULL, 0, k, ST__DIRTY_PL + 1, false,
                            st__dirty_one, &w, wait);
    k[ST__DIRTY_PL] = '~' + 1;
    if (rc == ST_OK)
        rc = st_store_range(s, st__dirty_pre, ST__DIRTY_PL, k, ST__DIRTY_PL + 1, NULL, 0, false,
                            st__dirty_one, &w, wait);
    return rc;
}

int st_tier_dirty_clear(st_store_t *s, const char *o, size_t ol, uint64_t gen, uint64_t *wait)
{
    uint8_t k[ST__DIRTY_PL + ST_TIER_OWNER_MAX];
    size_t kl = st__dirty_key(k, o, ol);
    const void *v;
    size_t vl;
    uint64_t seen = 0;
    if (st_store_get(s, k, kl, &v, &vl, &seen) != ST_OK || vl != 8 || st_be64_get(v) != gen)
        return ST_OK; /* gone, or rewritten since: it stays */
    return st_store_del(s, k, kl, wait);
}

uint64_t st_tier_dirty_gen(st_store_t *s, const char *o, size_t ol)
{
    uint8_t k[ST__DIRTY_PL + ST_TIER_OWNER_MAX];
    const void *v;
    size_t vl;
    uint64_t seen = 0;
    if (ol > ST_TIER_OWNER_MAX) return 0;
    if (st_store_get(s, k, st__dirty_key(k, o, ol), &v, &vl, &seen) != ST_OK || vl != 8) return 0;
    return st_be64_get(v);
}

/* One observer a process: the file records are one store's (the tables' count lives beside
 * them). Set before the loop runs, cleared after it stops. */
static st_tier_file_obs_fn st__file_obs;

void st_tier_on_file(st_tier_file_obs_fn fn)
{
    st__file_obs = fn;
}

void st__tier_file_changed(st_store_t *s, const char *o, size_t ol, const char *key, bool put,
                           uint64_t *wait)
{
    if (st__file_obs) st__file_obs(s, o, ol, key, put, wait);
}
