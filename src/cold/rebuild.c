/* SPDX-License-Identifier: MIT */
/*
 * rebuild-meta's choice of objects (strata/tier.h, st_tier_rebuild_pick): the tables are the
 * truth of what is live; the bucket also holds what they do not name.
 *
 * Objects flushed after the last table commit (written, recorded in the lost store, not yet in a
 * snapshot) are taken, so no acknowledged row is lost: a flush takes its number from the owner's
 * counter, which only grows, so its number is above every object of the owner the snapshot
 * names. An object that a compaction or a fold replaced, or that a delete took out (a deleted
 * conversation folded away), has a number below the replacement's, which the snapshot names: it
 * is never taken, so no deleted row comes back and no row is counted twice. What the tables
 * cannot tell apart (an owner the snapshot names nothing of, or one whose named objects are gone
 * from the bucket) keeps every object, and the kind's own checks (a replaced object whose rows a
 * later one repeats is dropped) decide, as a rebuild without tables does.
 */
#include "strata/tier.h"

#include <stdlib.h>
#include <string.h>

void st_tier_named_free(st_tier_named_t *nm)
{
    if (!nm) return;
    for (size_t i = 0; i < nm->n; i++)
        free(nm->keys[i]);
    free(nm->keys);
    for (size_t i = 0; i < nm->ndropped; i++)
        free(nm->dropped[i]);
    free(nm->dropped);
    memset(nm, 0, sizeof *nm);
}

uint64_t st_tier_key_version(const char *key)
{
    const char *slash = strrchr(key, '/');
    const char *base = slash ? slash + 1 : key;
    const char *dash = strrchr(base, '-');
    size_t kl = strlen(key);
    if (!dash || kl < 8 || strcmp(key + kl - 8, ".parquet") != 0) return 0;
    const char *p = dash + 1, *end = key + kl - 8;
    uint64_t n = 0;
    for (; p < end; p++) {
        if (*p == '.') {
            n = 0; /* "{seq}.{n}": the fresh number counts */
            continue;
        }
        if (*p < '0' || *p > '9') return 0;
        n = n * 10 + (uint64_t)(*p - '0');
    }
    return n;
}

/* The folder of key, with its '/' (its length). */
static size_t st__folder_len(const char *key)
{
    const char *slash = strrchr(key, '/');
    return slash ? (size_t)(slash - key) + 1 : 0;
}

static int st__pick_key_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A merge's or a fold's output ("…-{seq}.{n}.parquet"): its fresh number n was taken when the
 * merge started, so a flush of the owner that started later may be numbered above it and be
 * named by a snapshot committed before the merge swapped in. */
static bool st__pick_merged(const char *key)
{
    const char *slash = strrchr(key, '/');
    const char *dash = strrchr(slash ? slash + 1 : key, '-');
    const char *dot = dash ? strchr(dash, '.') : NULL;
    return dot && strcmp(dot, ".parquet") != 0;
}

static bool st__pick_in(char *const *v, size_t n, const char *key)
{
    return n && bsearch(&key, v, n, sizeof *v, st__pick_key_cmp) != NULL;
}

static bool st__pick_named(const st_tier_named_t *nm, const char *key)
{
    return st__pick_in(nm->keys, nm->n, key);
}

/* Leaves out what an older kept snapshot named and the current one does not; returns how many
 * are still kept. */
static size_t st__pick_undropped(const st_tier_named_t *nm, const char *const *keys, size_t n,
                                 bool *keep)
{
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        keep[i] = keep[i] && !st__pick_in(nm->dropped, nm->ndropped, keys[i]);
        kept += keep[i];
    }
    return kept;
}

/* The rule by numbers (st_tier_rebuild_pick), keep[] all true on entry; nm is known. Objects a
 * snapshot dropped are never named, so leaving them in changes nothing here. */
static void st__pick_by_number(const st_tier_named_t *nm, const char *const *keys, size_t n,
                               bool *keep)
{
    size_t fl = st__folder_len(keys[0]);
    /* the owner's named objects: a run of the sorted keys */
    size_t lo = 0, hi = nm->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strncmp(nm->keys[mid], keys[0], fl) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t end = lo, named = 0, missing = 0;
    for (; end < nm->n && strncmp(nm->keys[end], keys[0], fl) == 0; end++) {
        size_t j = end;
        if (strchr(nm->keys[j] + fl, '/')) continue; /* a deeper folder's */
        named++;
        bool listed = false;
        for (size_t i = 0; i < n && !listed; i++)
            listed = strcmp(keys[i], nm->keys[j]) == 0;
        missing += !listed;
    }
    if (named == 0 || missing) return;
    for (size_t i = 0; i < n; i++) {
        if (st__pick_named(nm, keys[i]) || st__pick_merged(keys[i])) {
            /* named, or a merge's output: the kind's own checks (a replaced object whose rows a
             * later one repeats is dropped) decide, as a rebuild without tables does */
            continue;
        }
        /* numbers are per writer (an owner's folder may hold several writers' objects: a node
         * restored from another that both flush, a shared bucket): compare with the named
         * objects of the same writer; none named, nothing tells: taken */
        uint64_t inc = st_tier_key_incarnation(keys[i]), top = 0;
        bool any = false;
        for (size_t j = lo; j < end; j++) {
            if (strchr(nm->keys[j] + fl, '/') || st_tier_key_incarnation(nm->keys[j]) != inc)
                continue;
            uint64_t v = st_tier_key_version(nm->keys[j]);
            if (v > top) top = v;
            any = true;
        }
        keep[i] = !any || st_tier_key_version(keys[i]) > top;
    }
}

size_t st_tier_rebuild_pick(const st_tier_named_t *nm, const char *const *keys, size_t n,
                            bool *keep)
{
    for (size_t i = 0; i < n; i++)
        keep[i] = true;
    if (!nm || !nm->known || n == 0) return n;
    st__pick_by_number(nm, keys, n, keep);
    return st__pick_undropped(nm, keys, n, keep);
}

static char *st__key_at(const void *v, size_t i, size_t size, size_t key_off)
{
    char *k;
    memcpy(&k, (const char *)v + i * size + key_off, sizeof k);
    return k;
}

size_t st_tier_rebuild_filter(st_tier_rebuild_t *rb, char (*tag_of)(const char *key), void *v,
                              size_t n, size_t size, size_t key_off)
{
    const char **keys = st_calloc(n + 1, sizeof *keys);
    bool *keep = st_calloc(n + 1, sizeof *keep);
    for (size_t i = 0; i < n; i++)
        keys[i] = st__key_at(v, i, size, key_off);
    for (size_t i = 0; i < n;) {
        size_t fl = st__folder_len(keys[i]), j = i + 1;
        while (j < n && st__folder_len(keys[j]) == fl && strncmp(keys[j], keys[i], fl) == 0)
            j++;
        const st_tier_named_t *nm = rb->named ? rb->named(rb->arg, tag_of(keys[i])) : NULL;
        st_tier_rebuild_pick(nm, keys + i, j - i, keep + i);
        i = j;
    }
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (!keep[i]) {
            free(st__key_at(v, i, size, key_off));
            continue;
        }
        if (kept != i) memmove((char *)v + kept * size, (char *)v + i * size, size);
        kept++;
    }
    if (kept < n)
        st_info("rebuild: %zu object(s) no table snapshot names (replaced or deleted before it was "
                "committed) not taken",
                n - kept);
    free(keys);
    free(keep);
    return kept;
}

void st_tier_rebuild_writers(const void *v, size_t n, size_t size, size_t key_off, uint64_t *one,
                             uint64_t *other)
{
    *one = *other = 0;
    for (size_t i = 0; i < n && !*other; i++) {
        uint64_t inc = st_tier_key_incarnation(st__key_at(v, i, size, key_off));
        if (inc && !*one)
            *one = inc;
        else if (inc && inc != *one)
            *other = inc;
    }
}
