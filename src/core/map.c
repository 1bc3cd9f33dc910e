/* SPDX-License-Identifier: MIT */
/* Intrusive chained hash map: nodes live inside the caller's structs, so no allocation per entry.
 */
#include "strata/core.h"

#include <stdlib.h>
#include <string.h>

/* The hash's secret: keys are names clients choose (counters, users, conversations), so a
 * fixed function would let one client pick thousands of keys for one bucket and turn every
 * lookup into a list walk (hash flooding). st_hash_seed() draws it once at start-up, before any
 * map holds a node and before other threads run; unit tests keep the fixed default. */
static uint64_t st__seed = 0x2d358dccaa6c78a5ULL;

void st_hash_seed(uint64_t seed)
{
    st__seed = seed;
}

/* 64 × 64 → 128-bit multiply, folded: every output bit depends on every input bit of a and b. */
static inline uint64_t st__fold(uint64_t a, uint64_t b)
{
    unsigned __int128 r = (unsigned __int128)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

static inline uint64_t st__r64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline uint64_t st__r32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

uint64_t st_hash(const void *p, size_t n)
{
    /* 16 bytes per multiply (FNV-1a took one multiply per byte: 5 % of a group leader's loop
     * on chat posts went to it). Tails are read as two overlapping words, so no byte loop. */
    static const uint64_t k0 = 0xa0761d6478bd642fULL, k1 = 0xe7037ed1a0b428dbULL,
                          k2 = 0x8ebc6af09c88c6e3ULL;
    const unsigned char *s = p;
    /* Both sides of every multiply carry the secret: a word equal to a fixed constant would
     * zero one side and wipe the state, letting chosen keys collide whatever the seed. */
    const uint64_t s1 = st__seed ^ k1;
    uint64_t h = st__seed ^ st__fold(n ^ k0, k1);
    size_t left = n;
    while (left > 16) {
        h = st__fold(st__r64(s) ^ s1, st__r64(s + 8) ^ h);
        s += 16;
        left -= 16;
    }
    uint64_t a = 0, b = 0;
    if (left >= 8) {
        a = st__r64(s);
        b = st__r64(s + left - 8);
    } else if (left >= 4) {
        a = st__r32(s);
        b = st__r32(s + left - 4);
    } else if (left > 0) {
        a = (uint64_t)s[0] << 16 | (uint64_t)s[left >> 1] << 8 | s[left - 1];
    }
    h = st__fold(a ^ s1, b ^ h ^ k2);
    return st__fold(h ^ k0, n ^ k2);
}

void st_map_init(st_map_t *m)
{
    m->nbuckets = 16;
    m->buckets = st_calloc(m->nbuckets, sizeof *m->buckets);
    m->count = 0;
    m->low = m->nbuckets;
    m->old = NULL;
    m->nold = m->moved = 0;
}

void st_map_free(st_map_t *m)
{
    free(m->buckets);
    free(m->old);
    m->buckets = m->old = NULL;
    m->nbuckets = m->count = m->low = m->nold = m->moved = 0;
}

/* The chain a node of hash h is in, or goes in: its bucket in `old` while that bucket is not
 * moved yet, else its bucket in `buckets` (the rule every insert, lookup and removal follows). */
static st_map_node_t **st__map_slot(const st_map_t *m, uint64_t h)
{
    if (m->old) {
        size_t i = h & (m->nold - 1);
        if (i >= m->moved) return &m->old[i];
    }
    return &m->buckets[h & (m->nbuckets - 1)];
}

st_map_node_t *st_map_get(const st_map_t *m, const void *key, size_t klen)
{
    uint64_t h = st_hash(key, klen);
    for (st_map_node_t *n = *st__map_slot(m, h); n; n = n->next)
        if (n->hash == h && n->klen == klen && memcmp(n->key, key, klen) == 0) return n;
    return NULL;
}

/* Buckets of `old` moved an insert while the map grows. A grow starts at count == nold and the
 * next one is due at count == 2 * nold, at least nold inserts later, so moving one bucket an
 * insert would do; a few more end the two-table lookups sooner. Empty buckets cost a test. */
#define ST__MAP_STEP 8

static void st__map_move(st_map_t *m, size_t buckets)
{
    for (size_t k = 0; k < buckets && m->moved < m->nold; k++, m->moved++) {
        st_map_node_t *n = m->old[m->moved];
        m->old[m->moved] = NULL;
        while (n) {
            st_map_node_t *next = n->next;
            size_t j = n->hash & (m->nbuckets - 1);
            n->next = m->buckets[j];
            m->buckets[j] = n;
            if (j < m->low) m->low = j;
            n = next;
        }
    }
    if (m->moved == m->nold) {
        free(m->old);
        m->old = NULL;
        m->nold = m->moved = 0;
    }
}

void st_map_insert(st_map_t *m, st_map_node_t *node)
{
    if (m->old) st__map_move(m, ST__MAP_STEP);
    /* twice the buckets; the nodes follow, a few an insert (a grow due while nodes are still
     * moving waits for them: the chains are a little longer meanwhile) */
    if (!m->old && m->count >= m->nbuckets) {
        m->old = m->buckets;
        m->nold = m->nbuckets;
        m->moved = 0;
        m->nbuckets *= 2;
        m->buckets = st_calloc(m->nbuckets, sizeof *m->buckets);
        m->low = m->nbuckets;
        st__map_move(m, ST__MAP_STEP);
    }
    node->hash = st_hash(node->key, node->klen);
    st_map_node_t **slot = st__map_slot(m, node->hash);
    node->next = *slot;
    *slot = node;
    m->count++;
    if (slot >= m->buckets && slot < m->buckets + m->nbuckets) {
        size_t i = (size_t)(slot - m->buckets);
        if (i < m->low) m->low = i;
    }
}

void st_map_remove(st_map_t *m, st_map_node_t *node)
{
    st_map_node_t **p = st__map_slot(m, node->hash);
    while (*p && *p != node)
        p = &(*p)->next;
    ST_ASSERT(*p == node);
    *p = node->next;
    m->count--;
}

/* An iterator is a bucket of `old` (below nold) or of `buckets` (nold + its index); neither
 * table changes while an iteration runs (no insert during one). */
st_map_node_t *st_map_first(st_map_t *m, size_t *iter)
{
    if (m->old) { /* the empty buckets at the front of what is left to move count as moved */
        while (m->moved < m->nold && !m->old[m->moved])
            m->moved++;
        if (m->moved < m->nold) {
            *iter = m->moved;
            return m->old[m->moved];
        }
        st__map_move(m, 0); /* all moved: `old` goes */
    }
    for (*iter = m->low; *iter < m->nbuckets; (*iter)++)
        if (m->buckets[*iter]) break;
    m->low = *iter; /* the buckets it passed are empty (a remove leaves low where it was) */
    st_map_node_t *n = *iter < m->nbuckets ? m->buckets[*iter] : NULL;
    *iter += m->nold;
    return n;
}

st_map_node_t *st_map_next(const st_map_t *m, size_t *iter, st_map_node_t *cur)
{
    if (cur->next) return cur->next;
    for ((*iter)++; *iter < m->nold; (*iter)++)
        if (m->old[*iter]) return m->old[*iter];
    if (*iter < m->nold + m->low) *iter = m->nold + m->low; /* empty below low */
    for (; *iter < m->nold + m->nbuckets; (*iter)++)
        if (m->buckets[*iter - m->nold]) return m->buckets[*iter - m->nold];
    return NULL;
}
