/* SPDX-License-Identifier: MIT */
/* Intrusive chained hash map: nodes live inside the caller's structs, so no allocation per entry.
 */
#include "strata/core.h"

#include <stdlib.h>
#include <string.h>

uint64_t st_hash(const void *p, size_t n)
{
    /* FNV-1a 64 with a final avalanche; keys are short and not attacker-chosen in bulk. */
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ULL;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

void st_map_init(st_map_t *m)
{
    m->nbuckets = 16;
    m->buckets = st_calloc(m->nbuckets, sizeof *m->buckets);
    m->count = 0;
}

void st_map_free(st_map_t *m)
{
    free(m->buckets);
    m->buckets = NULL;
    m->nbuckets = m->count = 0;
}

st_map_node_t *st_map_get(const st_map_t *m, const void *key, size_t klen)
{
    uint64_t h = st_hash(key, klen);
    for (st_map_node_t *n = m->buckets[h & (m->nbuckets - 1)]; n; n = n->next)
        if (n->hash == h && n->klen == klen && memcmp(n->key, key, klen) == 0) return n;
    return NULL;
}

static void st__map_grow(st_map_t *m)
{
    size_t nb = m->nbuckets * 2;
    st_map_node_t **b = st_calloc(nb, sizeof *b);
    for (size_t i = 0; i < m->nbuckets; i++) {
        st_map_node_t *n = m->buckets[i];
        while (n) {
            st_map_node_t *next = n->next;
            n->next = b[n->hash & (nb - 1)];
            b[n->hash & (nb - 1)] = n;
            n = next;
        }
    }
    free(m->buckets);
    m->buckets = b;
    m->nbuckets = nb;
}

void st_map_insert(st_map_t *m, st_map_node_t *node)
{
    if (m->count >= m->nbuckets) st__map_grow(m);
    node->hash = st_hash(node->key, node->klen);
    st_map_node_t **slot = &m->buckets[node->hash & (m->nbuckets - 1)];
    node->next = *slot;
    *slot = node;
    m->count++;
}

void st_map_remove(st_map_t *m, st_map_node_t *node)
{
    st_map_node_t **p = &m->buckets[node->hash & (m->nbuckets - 1)];
    while (*p && *p != node)
        p = &(*p)->next;
    ST_ASSERT(*p == node);
    *p = node->next;
    m->count--;
}

st_map_node_t *st_map_first(const st_map_t *m, size_t *iter)
{
    for (*iter = 0; *iter < m->nbuckets; (*iter)++)
        if (m->buckets[*iter]) return m->buckets[*iter];
    return NULL;
}

st_map_node_t *st_map_next(const st_map_t *m, size_t *iter, st_map_node_t *cur)
{
    if (cur->next) return cur->next;
    for ((*iter)++; *iter < m->nbuckets; (*iter)++)
        if (m->buckets[*iter]) return m->buckets[*iter];
    return NULL;
}
