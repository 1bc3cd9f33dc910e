/* SPDX-License-Identifier: MIT */
/*
 * The manifest's records (see strata/tier.h), shared by the flush engine, the compaction engine,
 * the reaper and every kind: their keys, an owner's cold summary ('W'), and the deletion of an
 * object recorded in the batch that takes it out of the manifest ('D').
 */
#include "strata/tier.h"

#include <string.h>

static int st__manifest_collect(void *arg, const void *key, size_t klen, const void *val,
                                size_t vlen)
{
    st_tier_manifest_t *m = arg;
    if (klen < 8 || vlen <= sizeof(st_tier_file_t)) return 0;
    st_tier_obj_t ob = {.seq = 0};
    memcpy(&ob.file, val, sizeof ob.file);
    ob.seq = st_be64_get((const uint8_t *)key + klen - 8);
    ob.key = st_strndup((const char *)val + sizeof ob.file, vlen - sizeof ob.file);
    st_vec_push(m, ob);
    return 0;
}

int st_tier_manifest(st_store_t *s, const char *o, size_t ol, bool desc, st_tier_manifest_t *out,
                     uint64_t *wait)
{
    uint8_t k[ST_TIER_MKEY_MAX];
    size_t pl = st_tier_mkey(k, 'F', o, ol, false, 0);
    k[pl++] = 0;
    memset(out, 0, sizeof *out);
    return st_store_range(s, k, pl, NULL, 0, NULL, 0, desc, st__manifest_collect, out, wait);
}

void st_tier_manifest_free(st_tier_manifest_t *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->v[i].key);
    st_vec_free(m);
}

size_t st_tier_mkey(uint8_t *k, char ks, const char *o, size_t ol, bool has_seq, uint64_t seq)
{
    k[0] = (uint8_t)ks;
    memcpy(k + 1, o, ol);
    if (!has_seq) return 1 + ol;
    k[1 + ol] = 0;
    st_be64_put(k + 2 + ol, seq);
    return 2 + ol + 8;
}

int st_tier_stat(st_store_t *s, const char *o, size_t ol, st_tier_stat_t *st, uint64_t *wait)
{
    uint8_t k[ST_TIER_MKEY_MAX];
    const void *v;
    size_t vl;
    int rc = st_store_get(s, k, st_tier_mkey(k, 'W', o, ol, false, 0), &v, &vl, wait);
    if (rc == ST_ENOTFOUND) {
        memset(st, 0, sizeof *st);
        return ST_OK;
    }
    if (rc == ST_OK && vl != sizeof *st) rc = ST_EINTERNAL;
    if (rc == ST_OK) memcpy(st, v, sizeof *st);
    return rc;
}

int st_tier_doom(st_store_t *s, const char *o, size_t ol, uint64_t seq, const char *key,
                 uint64_t *wait)
{
    uint8_t k[ST_TIER_MKEY_MAX];
    return st_store_put(s, k, st_tier_mkey(k, 'D', o, ol, true, seq), key, strlen(key), wait);
}
