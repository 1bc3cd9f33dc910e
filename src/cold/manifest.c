/* SPDX-License-Identifier: MIT */
/*
 * The manifest's records (see strata/tier.h), shared by the flush engine, the compaction engine,
 * the reaper and every kind: their keys, an owner's cold summary ('W'), and the deletion of an
 * object recorded in the batch that takes it out of the manifest ('D'). Their keys are built here
 * and in the tier's engines only: a kind changes an owner's records through the services below
 * (forget an owner, rebuild one, walk a tag's file records), never by hand.
 */
#include "internal.h"

#include <string.h>

static int st__manifest_collect(void *arg, const void *key, size_t klen, const void *val,
                                size_t vlen)
{
    st_tier_manifest_t *m = arg;
    if (klen < 8 || vlen <= sizeof(st_tier_file_t)) return 0;
    st_tier_obj_t ob = {.seq = 0};
    const uint8_t *stats;
    size_t sl, kl = st_tier_rec_split(val, vlen, &stats, &sl);
    memcpy(&ob.file, val, sizeof ob.file);
    ob.seq = st_be64_get((const uint8_t *)key + klen - 8);
    ob.key = st_strndup((const char *)val + sizeof ob.file, kl);
    if (sl) {
        ob.stats = st_malloc(sl);
        memcpy(ob.stats, stats, sl);
        ob.stats_len = sl;
    }
    st_vec_push(m, ob);
    return 0;
}

int st_tier_manifest(st_store_t *s, const char *o, size_t ol, bool desc, st_tier_manifest_t *out,
                     uint64_t *wait)
{
    uint8_t k[ST__TIER_MKEY_MAX];
    size_t pl = st__tier_mkey(k, 'F', o, ol, false, 0);
    k[pl++] = 0;
    memset(out, 0, sizeof *out);
    return st_store_range(s, k, pl, NULL, 0, NULL, 0, desc, st__manifest_collect, out, wait);
}

void st_tier_manifest_free(st_tier_manifest_t *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->v[i].key);
        free(m->v[i].stats);
    }
    st_vec_free(m);
}

size_t st__tier_mkey(uint8_t *k, char ks, const char *o, size_t ol, bool has_seq, uint64_t seq)
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
    uint8_t k[ST__TIER_MKEY_MAX];
    const void *v;
    size_t vl;
    int rc = st_store_get(s, k, st__tier_mkey(k, 'W', o, ol, false, 0), &v, &vl, wait);
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
    uint8_t k[ST__TIER_MKEY_MAX];
    return st_store_put(s, k, st__tier_mkey(k, 'D', o, ol, true, seq), key, strlen(key), wait);
}

/* ---- an owner's manifest as a whole: the services a kind calls ---- */

int st_tier_forget(st_tier_t *t, st_store_t *s, const char *o, size_t ol, size_t max, bool *busy,
                   uint64_t *wait)
{
    uint8_t k[ST__TIER_MKEY_MAX];
    st_tier_manifest_t man;
    int rc = st_tier_unhold(t, s, o, ol, max, busy, wait);
    if (rc == ST_OK) rc = st_tier_manifest(s, o, ol, false, &man, wait);
    if (rc != ST_OK) return rc;
    for (size_t i = 0; i < man.n && i < max && rc == ST_OK; i++) {
        rc = st_tier_doom(s, o, ol, man.v[i].seq, man.v[i].key, wait);
        if (rc == ST_OK)
            rc = st_store_del(s, k, st__tier_mkey(k, 'F', o, ol, true, man.v[i].seq), wait);
        if (rc == ST_OK) rc = st__tier_stats_del(s, o, ol, man.v[i].seq, wait);
        if (rc == ST_OK) st__tier_file_changed(s, o, ol, man.v[i].key, false, wait);
        if (rc == ST_OK) st_tier_erased(t, o, ol, man.v[i].key, wait); /* the tables expire */
        *busy = true;
    }
    if (rc == ST_OK && man.n) rc = st__tier_dirty(s, o, ol, wait);
    /* the last page: the stats an older binary left without their records go too (the rest of
     * the manifest, none of them 'F' any more, names none) */
    if (rc == ST_OK && man.n <= max) {
        st_tier_manifest_t none = {0};
        rc = st__tier_stats_sweep(s, o, ol, &none, wait);
    }
    st_tier_manifest_free(&man);
    const void *v;
    size_t vl;
    size_t kl = st__tier_mkey(k, 'W', o, ol, false, 0);
    if (rc == ST_OK && st_store_get(s, k, kl, &v, &vl, wait) == ST_OK) {
        rc = st_store_del(s, k, kl, wait);
        *busy = true;
    }
    return rc;
}

static int st__manifest_any(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)key, (void)klen, (void)val, (void)vlen;
    *(bool *)arg = true;
    return 1;
}

bool st_tier_owner_busy(st_store_t *s, const char *o, size_t ol)
{
    if (st_tier_holding(s, o, ol)) return true;
    static const char recs[] = {'P', 'D'};
    uint8_t k[ST__TIER_MKEY_MAX];
    uint64_t wait = 0;
    bool any = false;
    for (size_t i = 0; i < sizeof recs && !any; i++) {
        size_t kl = st__tier_mkey(k, recs[i], o, ol, false, 0);
        k[kl++] = 0;
        st_store_scan(s, k, kl, st__manifest_any, &any, &wait);
    }
    return any;
}

bool st_tier_file_records(st_store_t *s, const char *o, size_t ol, uint64_t seq, const char *key,
                          uint64_t *wait)
{
    uint8_t k[ST__TIER_MKEY_MAX];
    const void *v;
    size_t vl, kl = strlen(key);
    if (ol > ST_TIER_OWNER_MAX) return false;
    if (st_store_get(s, k, st__tier_mkey(k, 'F', o, ol, true, seq), &v, &vl, wait) != ST_OK)
        return false;
    /* the value: the file, then its key (st__manifest_collect's layout: up to a 0, if any) */
    if (vl <= sizeof(st_tier_file_t)) return false;
    const char *vk = (const char *)v + sizeof(st_tier_file_t);
    return strnlen(vk, vl - sizeof(st_tier_file_t)) == kl && memcmp(vk, key, kl) == 0;
}

bool st_tier_manifest_names(st_store_t *s, const char *o, size_t ol, const char *key,
                            uint64_t *wait)
{
    st_tier_manifest_t m;
    if (st_tier_manifest(s, o, ol, false, &m, wait) != ST_OK) return false;
    bool in = false;
    for (size_t i = 0; i < m.n && !in; i++)
        in = strcmp(m.v[i].key, key) == 0;
    st_tier_manifest_free(&m);
    return in;
}

typedef struct {
    int tag;
    st_tier_file_fn fn;
    void *arg;
} st__each_file_t;

static int st__each_file_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st__each_file_t *x = arg;
    const uint8_t *k = key;
    st_tier_file_t f;
    if (klen < 1 + 9 || vlen <= sizeof f || k[klen - 9] != 0) return 0; /* 'F' owner 0 seq */
    const char *o = (const char *)k + 1;
    size_t ol = klen - 10;
    if (memchr(o, 0, ol)) return 0; /* not of the manifest's shape */
    if (x->tag != ST_TIER_TAG_ANY && st_tier_owner_tag(o, ol) != x->tag) return 0;
    const uint8_t *stats;
    size_t sl, kl = st_tier_rec_split(val, vlen, &stats, &sl);
    memcpy(&f, val, sizeof f);
    return x->fn(x->arg, o, ol, st_be64_get(k + klen - 8), &f, (const char *)val + sizeof f, kl,
                 stats, sl);
}

int st_tier_each_file(st_store_t *s, int tag, st_tier_file_fn fn, void *arg, uint64_t *wait)
{
    /* a tag's owners share a prefix (st_tier_owner's "~" tag name); the untagged ones do not */
    const uint8_t pre[3] = {'F', '~', (uint8_t)tag};
    size_t pl = tag == ST_TIER_TAG_ANY || tag == 0 ? 1 : sizeof pre;
    st__each_file_t x = {tag, fn, arg};
    return st_store_scan(s, pre, pl, st__each_file_one, &x, wait);
}

int st_tier_each_file_from(st_store_t *s, const char *from, size_t fl, st_tier_file_fn fn,
                           void *arg, uint64_t *wait)
{
    uint8_t k[1 + ST_TIER_OWNER_MAX];
    if (fl > ST_TIER_OWNER_MAX) return ST_EINVAL;
    k[0] = 'F';
    if (fl) memcpy(k + 1, from, fl); /* 'F' owner: before the owner's first record */
    st__each_file_t x = {ST_TIER_TAG_ANY, fn, arg};
    return st_store_scan_from(s, k, 1, k, 1 + fl, st__each_file_one, &x, wait);
}

uint64_t st_tier_manifest_writes(const st_store_t *s)
{
    return st_store_writes_of(s, 'F');
}

static int st__has_file_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)key, (void)klen, (void)val, (void)vlen;
    *(bool *)arg = true;
    return 1; /* the first is enough */
}

int st_tier_has_files(st_store_t *s, const char *o, size_t ol, bool *any, uint64_t *wait)
{
    uint8_t k[ST__TIER_MKEY_MAX];
    size_t pl = st__tier_mkey(k, 'F', o, ol, false, 0);
    k[pl++] = 0; /* 'F' o 0: not the records of an owner whose name o begins */
    *any = false;
    int rc = st_store_scan(s, k, pl, st__has_file_one, any, wait);
    return rc < 0 ? rc : ST_OK;
}

/* The summary's counts from every file record of the owner, read after rebuild's puts (staged
 * writes are seen): the records rebuild did not list stay in the manifest, so they are counted. */
static int st__recount_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_tier_stat_t *st = arg;
    st_tier_file_t f;
    if (klen < 8 || vlen <= sizeof f) return 0;
    memcpy(&f, val, sizeof f);
    uint64_t seq = st_be64_get((const uint8_t *)key + klen - 8);
    if (seq + 1 > st->next_seq) st->next_seq = seq + 1;
    if (f.max_id > st->watermark) st->watermark = f.max_id;
    st->rows += f.rows;
    st->bytes += (int64_t)f.size;
    st->files++;
    return 0;
}

int st_tier_rebuild_owner(st_store_t *s, const char *o, size_t ol, const st_tier_obj_t *objs,
                          size_t n, st_tier_stat_t *st, uint64_t *wait)
{
    uint8_t k[ST__TIER_MKEY_MAX];
    int rc = ST_OK;
    for (size_t i = 0; i < n && rc == ST_OK; i++) {
        const st_tier_obj_t *ob = &objs[i];
        st_buf_t v = {0};
        st_tier_rec_value(&v, &ob->file, ob->key, NULL, 0); /* the stats beside: colstats.c */
        rc = st_store_put(s, k, st__tier_mkey(k, 'F', o, ol, true, ob->seq), v.data, v.len, wait);
        st_buf_free(&v);
        if (rc == ST_OK)
            rc = st__tier_stats_put(s, o, ol, ob->seq, ob->key, ob->stats, ob->stats_len, wait);
    }
    /* counted from the whole manifest, not from objs: a summary short of files recorded made
     * the chat flush take an owner with unmarked objects for one with none (its 'L', marks.c)
     * until it read the records instead; the kind's watermark and next_seq stay if higher */
    if (rc == ST_OK) {
        st->rows = st->bytes = st->files = 0;
        size_t pl = st__tier_mkey(k, 'F', o, ol, false, 0);
        k[pl++] = 0;
        rc = st_store_scan(s, k, pl, st__recount_one, st, wait);
    }
    if (rc == ST_OK)
        rc = st_store_put(s, k, st__tier_mkey(k, 'W', o, ol, false, 0), st, sizeof *st, wait);
    /* marked like any change of file records: the tables' commit reads the owner's files (it no
     * longer reads every file record when it starts) */
    if (rc == ST_OK && n) rc = st__tier_dirty(s, o, ol, wait);
    return rc;
}
