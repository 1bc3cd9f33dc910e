/* SPDX-License-Identifier: MIT */
/*
 * Compaction, chat's side (the tier's merge side, strata/tier.h): the tier plans which of a
 * user's objects to merge, records the new one ('P'), waits for that record to be durable, merges
 * the rows on a worker (src/cold/merge.c) and swaps the manifest in one batch (src/cold/compact.c).
 * Here, in the swap batch: rows left out by retention taken out of the conversations' cold
 * baselines and the totals; and the new object's name. The new key is
 * {folder}/batch-{ts}-w{writer}-{seq}.{n}.parquet, where n is a fresh number, so no key is ever
 * used twice.
 * Readers of the bucket (DuckDB) may see old and new objects between the swap and the reaper's
 * next pass (about a second).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* On a worker: the tier's merge of Parquet objects, at chat's compression level. */
static int st__merge(void *arg, const char *u, size_t ul, st_objstore_t *obj,
                     const st_tier_obj_t *objs, size_t nold, int64_t cutoff, const char *key,
                     st_tier_file_t *out, void **dropped, int64_t *ndropped)
{
    st_chatcold_t *cc = arg;
    (void)u, (void)ul;
    return st_tier_parquet_merge(cc->zstd_level, obj, objs, nold, cutoff, key, out, dropped,
                                 ndropped);
}

/* ---- loop side: in the swap batch ---- */

/* Rows left out by retention leave the conversations first, while the manifest still holds them
 * (a conversation re-warmed from the cold tier counts them). */
static int st__commit(void *arg, const char *u, size_t ul, void *dropped, int64_t ndropped,
                      uint64_t *wait)
{
    st_chatcold_t *cc = arg;
    st_chat_t *c = cc->chat;
    uint8_t k[ST__KEY_CAP];
    int rc = ST_OK;
    if (!ndropped) return ST_OK;
    const char *conv;
    size_t l, p = 0;
    int64_t cnt;
    while (rc == ST_OK && st_tier_dropped_next(dropped, &p, &conv, &l, &cnt)) {
        st_conv_t cv;
        bool cold;
        rc = st__chat_conv_load(c, u, ul, conv, l, &cv, &cold, wait);
        if (rc == ST_OK) {
            cv.base_total -= cnt;
            rc = st_store_put(c->store, k, st__chat_ckey(k, u, ul, conv, l), &cv, sizeof cv, wait);
        } else if (rc == ST_ENOTFOUND || rc == ST_EPARKED) {
            /* evicted, its footers not in memory: it stays evicted, and its count comes from
             * the footers when it is re-warmed — the merged object's, without these rows */
            rc = ST_OK;
        }
    }
    if (rc == ST_OK) rc = st__chat_refresh_totals(c, u, ul, wait);
    return rc;
}

/* The new key: the first object's time, its manifest number, then the fresh number. */
static void st__name(void *arg, const char *u, size_t ul, const char *first_key, uint64_t seq,
                     uint64_t pseq, uint64_t writer, st_buf_t *key)
{
    (void)arg;
    const char *b = strstr(first_key, "/batch-");
    int64_t ts = b ? strtoll(b + 7, NULL, 10) : 0;
    st__chat_object_key(key, u, ul, ts, writer, seq);
    key->len -= 8; /* ".parquet" */
    st_buf_printf(key, ".%llu.parquet", (unsigned long long)pseq);
    st_buf_appendc(key, 0);
    key->len--;
}

void st__chat_merge_side(st_chatcold_t *cc)
{
    cc->merge = (st_tier_merge_t){st__merge, st__commit, st_tier_dropped_free, st__name, cc};
}
