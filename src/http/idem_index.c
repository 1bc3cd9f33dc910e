/* SPDX-License-Identifier: MIT */
/*
 * The loop's index of Idempotency-Key answers (idempotency.c): the first 8 bytes of an answer's
 * scope (its tag) -> the time it was created, which with the whole scope is the answer's key in
 * the store. Answers are stored in time order, so that an answer's insert is an append at the
 * B-tree's right edge and an expiry sweep deletes from its left edge; this index is what finds
 * one by its scope without a random B-tree insert per answer (issue 48, bench/RESULTS.md
 * session 18). It is never stored: idempotency.c rebuilds it from the answers (a walk in time
 * order) after a start and whenever it may disagree with the store.
 *
 * Open addressing with linear probing: 16 bytes a slot, at most 70 % full, deletion by backward
 * shift (no tombstones: a sweep deletes as many as were made). Several entries may share a tag
 * (scopes alike in their first 64 bits, or a key recorded again after its answer expired): a
 * lookup gets them all and the store's key, which holds the whole scope, tells them apart.
 * Tag 0 marks a free slot, so a tag of 0 is stored as 1. Loop thread only.
 *
 * Bounded (issue 48): with a ceiling set (st__idx_limit, from --idempotency-index) the table never
 * grows past it and an add that would is refused: the caller keeps that answer findable another
 * way (idempotency.c: a store entry by scope). The table halves when it is less than an eighth
 * full, so a burst's memory is given back as its answers expire.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define ST__IDX_MIN   1024 /* slots of a table's first size, and the least it shrinks to */
#define ST__IDX_LEAST 64   /* the smallest ceiling (a 1 KiB budget) */

static size_t st__home(const st_idem_idx_t *x, uint64_t tag)
{
    return (size_t)((tag * 0x9e3779b97f4a7c15ULL) >> 32) & (x->cap - 1);
}

uint64_t st__idx_tag(const uint8_t scope[32])
{
    uint64_t t;
    memcpy(&t, scope, sizeof t);
    return t ? t : 1;
}

static void st__idx_place(st_idem_idx_t *x, uint64_t tag, int64_t created)
{
    size_t i = st__home(x, tag);
    while (x->v[i].tag)
        i = (i + 1) & (x->cap - 1);
    x->v[i].tag = tag;
    x->v[i].created = created;
    x->n++;
}

/* The table rebuilt with cap slots (a power of 2 that holds every entry under 70 %). */
static void st__idx_resize(st_idem_idx_t *x, size_t cap)
{
    st_idem_slot_t *old = x->v;
    size_t ocap = x->cap;
    x->cap = cap;
    x->v = st_calloc(x->cap, sizeof *x->v);
    x->n = 0;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].tag) st__idx_place(x, old[i].tag, old[i].created);
    free(old);
}

void st__idx_limit(st_idem_idx_t *x, size_t bytes)
{
    size_t max = 0;
    if (bytes) {
        max = ST__IDX_LEAST;
        while (max <= SIZE_MAX / 2 / sizeof *x->v && max * 2 * sizeof *x->v <= bytes)
            max *= 2;
    }
    x->max = max;
}

static size_t st__idx_first(const st_idem_idx_t *x)
{
    return x->max && x->max < ST__IDX_MIN ? x->max : ST__IDX_MIN;
}

bool st__idx_add(st_idem_idx_t *x, uint64_t tag, int64_t created)
{
    if (x->cap) {
        size_t i = st__home(x, tag);
        for (; x->v[i].tag; i = (i + 1) & (x->cap - 1))
            if (x->v[i].tag == tag && x->v[i].created == created) return true; /* there already */
    }
    if ((x->n + 1) * 10 > x->cap * 7) {
        size_t cap = x->cap ? x->cap * 2 : st__idx_first(x);
        if (x->max && cap > x->max) return false; /* full: the caller holds it elsewhere */
        st__idx_resize(x, cap);
    }
    st__idx_place(x, tag, created);
    return true;
}

size_t st__idx_find(const st_idem_idx_t *x, uint64_t tag, int64_t *out, size_t max)
{
    size_t n = 0;
    if (!x->cap) return 0;
    for (size_t i = st__home(x, tag); x->v[i].tag; i = (i + 1) & (x->cap - 1))
        if (x->v[i].tag == tag && n < max) out[n++] = x->v[i].created;
    return n;
}

bool st__idx_del(st_idem_idx_t *x, uint64_t tag, int64_t created)
{
    if (!x->cap) return false;
    size_t mask = x->cap - 1, i = st__home(x, tag);
    for (; x->v[i].tag; i = (i + 1) & mask)
        if (x->v[i].tag == tag && x->v[i].created == created) break;
    if (!x->v[i].tag) return false;
    /* backward shift: an entry after the hole moves into it unless its home lies cyclically
     * within (hole, entry], where the probe from its home would not pass the hole */
    for (size_t j = i;;) {
        j = (j + 1) & mask;
        if (!x->v[j].tag) break;
        size_t k = st__home(x, x->v[j].tag);
        bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (stays) continue;
        x->v[i] = x->v[j];
        i = j;
    }
    x->v[i].tag = 0;
    x->n--;
    /* memory back after a burst: half the slots once less than an eighth are used (a quarter
     * then, well under the 70 % that grows it again) */
    if (x->cap > st__idx_first(x) && x->n * 8 < x->cap) st__idx_resize(x, x->cap / 2);
    return true;
}

size_t st__idx_bytes(const st_idem_idx_t *x)
{
    return x->cap * sizeof *x->v;
}

bool st__idx_full(const st_idem_idx_t *x)
{
    size_t cap = x->cap ? x->cap : st__idx_first(x);
    if ((x->n + 1) * 10 <= cap * 7) return false;
    return x->max && cap * 2 > x->max;
}

void st__idx_free(st_idem_idx_t *x)
{
    size_t max = x->max; /* the ceiling stays */
    free(x->v);
    memset(x, 0, sizeof *x);
    x->max = max;
}
