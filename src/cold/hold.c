/* SPDX-License-Identifier: MIT */
/*
 * Held deletions (SPEC v5 §5.1 "Snapshot expiry", §9): an object a swap (compaction, a fold,
 * retention's drop) takes out of the manifest may still be named by a kept Iceberg snapshot or a
 * kept backup point, so its deletion waits. The swap records it held, with the time it was
 * replaced, instead of 'D' (intent.c); the reaper (reaper.c) walks the held records from the
 * oldest and deletes those replaced before the hold's cutoff (st_tier_hold_cutoff), stopping at
 * the first still held — it never reads the others. An erasure (SPEC §2.2) lets its users' held
 * objects go at once (st_tier_unhold: they become 'D' records, each told to the erasure observer,
 * so the tables expire the snapshots that name them). Records, in the hot store
 * (replicated, backed up, kept across a restart):
 *   "\0cold_hold" 0 be64 replaced_us owner 0 be64 seq -> object key   (by time: the reaper)
 *   "\0cold_held" 0 owner 0 be64 seq -> be64 replaced_us               (by owner: an erasure)
 * seq is the 'D' number the swap would have used (unique per owner).
 */
#include "strata/tier.h"

#include <stdlib.h>
#include <string.h>

const char st_tier_hold_pre[ST_TIER_HOLD_PL] = "\0cold_hold";
const char st_tier_held_pre[ST_TIER_HOLD_PL] = "\0cold_held";

int64_t st_tier_hold_cutoff(const st_tier_hold_t *h)
{
    int64_t c = INT64_MAX;
    if (h->keep_us > 0) { /* --table-keep 0: the tables hold nothing */
        int64_t t = h->tables_oldest_us < 0   ? INT64_MIN /* not read yet: everything held */
                    : h->tables_oldest_us > 0 ? h->tables_oldest_us - ST_TIER_HOLD_SLACK_US
                                              : h->now_us - h->keep_us;
        if (t < c) c = t;
    }
    if (h->backup) {
        int64_t b = h->backup_oldest_us > 0 ? h->backup_oldest_us - ST_TIER_HOLD_SLACK_US
                                            : INT64_MIN; /* no point listed yet */
        if (b < c) c = b;
    }
    return c;
}

size_t st_tier_hold_key(uint8_t *k, int64_t at, const char *o, size_t ol, uint64_t seq)
{
    memcpy(k, st_tier_hold_pre, ST_TIER_HOLD_PL);
    st_be64_put(k + ST_TIER_HOLD_PL, (uint64_t)at);
    memcpy(k + ST_TIER_HOLD_PL + 8, o, ol);
    k[ST_TIER_HOLD_PL + 8 + ol] = 0;
    st_be64_put(k + ST_TIER_HOLD_PL + 9 + ol, seq);
    return ST_TIER_HOLD_PL + 17 + ol;
}

size_t st_tier_held_key(uint8_t *k, const char *o, size_t ol, bool has_seq, uint64_t seq)
{
    memcpy(k, st_tier_held_pre, ST_TIER_HOLD_PL);
    memcpy(k + ST_TIER_HOLD_PL, o, ol);
    k[ST_TIER_HOLD_PL + ol] = 0;
    if (!has_seq) return ST_TIER_HOLD_PL + ol + 1;
    st_be64_put(k + ST_TIER_HOLD_PL + 1 + ol, seq);
    return ST_TIER_HOLD_PL + 9 + ol;
}

int st_tier_defer(st_store_t *s, const char *o, size_t ol, uint64_t seq, const char *key,
                  int64_t at, uint64_t *wait)
{
    uint8_t k[ST_TIER_HOLD_KEY_MAX], t[8];
    int rc = st_store_put(s, k, st_tier_hold_key(k, at, o, ol, seq), key, strlen(key), wait);
    st_be64_put(t, (uint64_t)at);
    if (rc == ST_OK) rc = st_store_put(s, k, st_tier_held_key(k, o, ol, true, seq), t, 8, wait);
    return rc;
}

typedef struct {
    size_t max, n;
    st_buf_t keys; /* u16 length, then an owner-index key */
} st__held_t;

static int st__held_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st__held_t *h = arg;
    if (h->n == h->max) return 1;
    if (vlen != 8 || klen > UINT16_MAX) return 0;
    uint16_t l = (uint16_t)klen;
    st_buf_append(&h->keys, &l, sizeof l);
    st_buf_append(&h->keys, key, klen);
    st_buf_append(&h->keys, val, 8);
    h->n++;
    return 0;
}

int st_tier_unhold(st_tier_t *tier, st_store_t *s, const char *o, size_t ol, size_t max, bool *any,
                   uint64_t *wait)
{
    uint8_t k[ST_TIER_HOLD_KEY_MAX];
    st__held_t h = {.max = max ? max : 1};
    st_store_scan(s, k, st_tier_held_key(k, o, ol, false, 0), st__held_one, &h, wait);
    int rc = ST_OK;
    for (size_t off = 0; off < h.keys.len && rc == ST_OK;) {
        uint16_t l;
        memcpy(&l, h.keys.data + off, sizeof l);
        const uint8_t *ik = (const uint8_t *)h.keys.data + off + sizeof l;
        uint64_t seq = st_be64_get(ik + l - 8);
        int64_t at = (int64_t)st_be64_get(ik + l);
        off += sizeof l + l + 8;
        const void *v;
        size_t vl;
        size_t kl = st_tier_hold_key(k, at, o, ol, seq);
        rc = st_store_get(s, k, kl, &v, &vl, wait);
        char *okey = rc == ST_OK ? st_strndup(v, vl) : NULL;
        if (rc == ST_OK) rc = st_store_del(s, k, kl, wait);
        if (rc == ST_OK) rc = st_tier_doom(s, o, ol, seq, okey, wait);
        if (rc == ST_OK) st_tier_erased(tier, o, ol, okey, wait);
        free(okey);
        if (rc == ST_ENOTFOUND) rc = ST_OK; /* the reaper took it meanwhile */
        if (rc == ST_OK) rc = st_store_del(s, ik, l, wait);
        if (rc == ST_ENOTFOUND) rc = ST_OK;
        *any = true;
    }
    st_buf_free(&h.keys);
    return rc;
}

bool st_tier_holding(st_store_t *s, const char *o, size_t ol)
{
    uint8_t k[ST_TIER_HOLD_KEY_MAX];
    uint64_t wait = 0;
    st__held_t h = {.max = 1};
    st_store_scan(s, k, st_tier_held_key(k, o, ol, false, 0), st__held_one, &h, &wait);
    st_buf_free(&h.keys);
    return h.n > 0;
}

static int st__count_held(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)key, (void)klen, (void)val, (void)vlen;
    (*(size_t *)arg)++;
    return 0;
}

size_t st_tier_held_count(st_store_t *s)
{
    size_t n = 0;
    uint64_t wait = 0;
    st_store_scan(s, st_tier_held_pre, ST_TIER_HOLD_PL, st__count_held, &n, &wait);
    return n;
}
