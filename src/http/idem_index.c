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
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define ST__IDX_MIN 1024

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

static void st__idx_grow(st_idem_idx_t *x)
{
    st_idem_slot_t *old = x->v;
    size_t ocap = x->cap;
    x->cap = ocap ? ocap * 2 : ST__IDX_MIN;
    x->v = st_calloc(x->cap, sizeof *x->v);
    x->n = 0;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].tag) st__idx_place(x, old[i].tag, old[i].created);
    free(old);
}

void st__idx_add(st_idem_idx_t *x, uint64_t tag, int64_t created)
{
    if ((x->n + 1) * 10 > x->cap * 7) st__idx_grow(x);
    size_t i = st__home(x, tag);
    for (; x->v[i].tag; i = (i + 1) & (x->cap - 1))
        if (x->v[i].tag == tag && x->v[i].created == created) return; /* there already */
    x->v[i].tag = tag;
    x->v[i].created = created;
    x->n++;
}

size_t st__idx_find(const st_idem_idx_t *x, uint64_t tag, int64_t *out, size_t max)
{
    size_t n = 0;
    if (!x->cap) return 0;
    for (size_t i = st__home(x, tag); x->v[i].tag; i = (i + 1) & (x->cap - 1))
        if (x->v[i].tag == tag && n < max) out[n++] = x->v[i].created;
    return n;
}

void st__idx_del(st_idem_idx_t *x, uint64_t tag, int64_t created)
{
    if (!x->cap) return;
    size_t mask = x->cap - 1, i = st__home(x, tag);
    for (; x->v[i].tag; i = (i + 1) & mask)
        if (x->v[i].tag == tag && x->v[i].created == created) break;
    if (!x->v[i].tag) return;
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
}

void st__idx_free(st_idem_idx_t *x)
{
    free(x->v);
    memset(x, 0, sizeof *x);
}
