/* SPDX-License-Identifier: MIT */
/*
 * The overlay's entries in key order: a skip list threaded through them (each entry carries its
 * own tower, allocated with it), beside the hash map that finds an entry by key. A range read
 * seeks its first staged key in O(log n) and walks only the entries in its range; before, every
 * range read walked and sorted every staged write, so reads slowed down exactly when the apply
 * thread fell behind (SPEC §7: the loop never waits).
 *
 * Towers have 1..ST__OV_LEVELS levels, each level kept with probability 1/4 (1.33 pointers per
 * entry on average). Level 0 is doubly linked for reverse ranges. Loop thread only.
 *
 * Neither an insert next to the last one (a flush stages thousands of adjacent deletes in one
 * commit), or next to the last one of its first key byte (Idempotency-Key answers, keyed by time,
 * staged between a post's other keys), nor a drop searches from the head: an entry's predecessor on
 * level l is the nearest entry before it whose tower is taller than l, found by walking level 0
 * backwards (expected O(1) steps per level, no key comparisons). A search from the head compared
 * keys with long common prefixes all the way down: a flush's 4,096-key commit took several ms of
 * loop.
 */
#include "internal.h"

#include <stdalign.h>
#include <stdlib.h>

static int st__cmp(const st_ov_t *e, const void *key, size_t klen)
{
    return st__key_cmp(e->key, e->node.klen, key, klen);
}

static unsigned st__level(st_ovidx_t *x)
{
    /* xorshift64: towers need to be unpredictable only to the extent that keys are not */
    uint64_t r = x->rng ? x->rng : 0x9e3779b97f4a7c15ULL;
    r ^= r << 13;
    r ^= r >> 7;
    r ^= r << 17;
    x->rng = r;
    unsigned lvl = 1;
    while (lvl < ST__OV_LEVELS && (r & 3) == 0) {
        lvl++;
        r >>= 2;
    }
    return lvl;
}

/* The entry key goes right after when f is next to key's place (NULL: f is not). */
static st_ov_t *st__ov_after(st_ov_t *f, const void *key, size_t klen)
{
    int c = f ? st__cmp(f, key, klen) : 0;
    if (c < 0 && (!f->fwd[0] || st__cmp(f->fwd[0], key, klen) > 0)) return f; /* ascending */
    if (c > 0 && f->prev && st__cmp(f->prev, key, klen) < 0) return f->prev;  /* descending */
    return NULL;
}

st_ov_t *st__ov_new(st_store_t *s, const void *key, size_t klen)
{
    st_ovidx_t *x = &s->ovidx;
    unsigned lvl = st__level(x);
    size_t off = sizeof(st_ov_t) + klen;
    off = (off + alignof(st_ov_t *) - 1) & ~(alignof(st_ov_t *) - 1);
    st_ov_t *e = st_calloc(1, off + lvl * sizeof(st_ov_t *));
    memcpy(e->key, key, klen);
    e->node.key = e->key;
    e->node.klen = klen;
    e->fwd = (st_ov_t **)((char *)e + off);
    e->lvl = (uint8_t)lvl;
    /* the last entry below key on each level (NULL: the head) */
    st_ov_t *upd[ST__OV_LEVELS];
    uint8_t first = *(const uint8_t *)key;
    st_ov_t *after = st__ov_after(x->finger, key, klen); /* NULL: no finger helps */
    if (!after && x->by_first[first] != x->finger)
        after = st__ov_after(x->by_first[first], key, klen);
    if (after) {
        st_ov_t *p = after;
        for (unsigned l = 0; l < lvl; l++) {
            while (p && p->lvl <= l)
                p = p->prev;
            upd[l] = p;
        }
    } else {
        st_ov_t *p = NULL;
        for (int l = ST__OV_LEVELS - 1; l >= 0; l--) {
            st_ov_t *n = p ? p->fwd[l] : x->head[l];
            while (n && st__cmp(n, key, klen) < 0) {
                p = n;
                n = n->fwd[l];
            }
            upd[l] = p;
        }
    }
    for (unsigned l = 0; l < lvl; l++) {
        st_ov_t **link = upd[l] ? &upd[l]->fwd[l] : &x->head[l];
        e->fwd[l] = *link;
        *link = e;
    }
    e->prev = upd[0];
    if (e->fwd[0])
        e->fwd[0]->prev = e;
    else
        x->tail = e;
    st_map_insert(&s->overlay, &e->node);
    x->finger = x->by_first[first] = e;
    return e;
}

void st__ov_drop(st_store_t *s, st_ov_t *e)
{
    st_ovidx_t *x = &s->ovidx;
    st_ov_t *p = e->prev;
    for (unsigned l = 0; l < e->lvl; l++) {
        while (p && p->lvl <= l)
            p = p->prev;
        st_ov_t **link = p ? &p->fwd[l] : &x->head[l];
        ST_ASSERT(*link == e);
        *link = e->fwd[l];
    }
    if (x->finger == e) x->finger = e->prev;
    uint8_t first = (uint8_t)e->key[0];
    if (x->by_first[first] == e) /* only ever an entry of its byte: a drop finds it here */
        x->by_first[first] = e->prev && (uint8_t)e->prev->key[0] == first ? e->prev : NULL;
    if (e->fwd[0])
        e->fwd[0]->prev = e->prev;
    else
        x->tail = e->prev;
    st_map_remove(&s->overlay, &e->node);
    st__ov_free(e);
}

st_ov_t *st__ov_ge(const st_store_t *s, const void *key, size_t klen)
{
    const st_ovidx_t *x = &s->ovidx;
    st_ov_t *p = NULL;
    for (int l = ST__OV_LEVELS - 1; l >= 0; l--) {
        st_ov_t *n = p ? p->fwd[l] : x->head[l];
        while (n && st__cmp(n, key, klen) < 0) {
            p = n;
            n = n->fwd[l];
        }
    }
    return p ? p->fwd[0] : x->head[0];
}

st_ov_t *st__ov_lt(const st_store_t *s, const void *key, size_t klen)
{
    if (!key) return s->ovidx.tail;
    st_ov_t *n = st__ov_ge(s, key, klen);
    return n ? n->prev : s->ovidx.tail;
}

void st__ov_clear(st_store_t *s)
{
    for (st_ov_t *e = s->ovidx.head[0], *n; e; e = n) {
        n = e->fwd[0];
        st_map_remove(&s->overlay, &e->node);
        st__ov_free(e);
    }
    memset(&s->ovidx, 0, sizeof s->ovidx);
}
