/* SPDX-License-Identifier: MIT */
/*
 * A walk of one key space across loop turns, a page at a time (include/strata/store.h): the
 * cold tier's pass over its sources and its census and compaction of every owner walk a million
 * keys this way without a long loop turn. Loop thread only (the store's reads are).
 */
#include "strata/store.h"

#include <string.h>

/* One page of a walk, for the scan's callback. */
typedef struct {
    st_store_walk_t *w;
    size_t seen, page;
    st_store_scan_fn fn;
    void *arg;
} st__walk_page_t;

static int st__walk_page_key(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st__walk_page_t *pg = arg;
    st_store_walk_t *w = pg->w;
    if (klen > ST_KEY_MAX) return 0; /* the store holds none */
    memcpy(w->at, key, klen);
    w->at[klen] = 0; /* the next page starts at the first key after this one */
    w->clen = klen + 1;
    int rc = pg->fn(pg->arg, key, klen, val, vlen);
    if (rc) return rc < 0 ? rc : 1; /* 1: the page stops here */
    return ++pg->seen == pg->page;
}

int st_store_walk_page(st_store_t *s, const void *prefix, size_t plen, st_store_walk_t *w,
                       size_t page, st_store_scan_fn fn, void *arg)
{
    st__walk_page_t pg = {w, 0, page, fn, arg};
    uint64_t wait = 0; /* nobody is answered from a walk: its reads wait for no batch */
    int rc = st_store_scan_from(s, prefix, plen, w->clen ? w->at : NULL, w->clen, st__walk_page_key,
                                &pg, &wait);
    if (rc < 0) return rc;
    return rc == 1; /* stopped by a full page or by fn: keys may be left */
}
