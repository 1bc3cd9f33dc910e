/* SPDX-License-Identifier: MIT */
/*
 * colstats: a data file's column statistics, taken where the file is encoded and kept in its
 * file record (strata/tier.h, 'F'), so that a tables' commit builds the file's Iceberg column
 * metrics (src/tables/metrics.c) without reading its footer back from object storage (SPEC §7:
 * no request waits on object storage; issue 48: a commit of 4,096 new files on S3 read 4,096
 * footers).
 *
 * Where they come from: the footer of the encoded file, still in memory (st_pq_top_stats, the
 * same decoding a footer read back does): the metrics are byte for byte those the read produced.
 * The flush decodes the bytes it is about to put; a merge's object (a compaction, a fold, an
 * erasure's or edit's rewrite) is put through st_tier_put_parquet, which leaves its stats with
 * the worker thread for the compaction engine to take (st_tier_stats_take) as the merge returns:
 * every kind's merge writes its one object that way, so none of them carries stats by hand.
 *
 * Where they are kept (issue 48, the rolling upgrade): under a key of their own, 'I' owner 0 seq
 * beside the file record 'F' owner 0 seq, put and deleted in the same batches, its value the
 * object's key, a 0 byte, then the stats. The file record keeps exactly the shape an older binary
 * checks (st_tier_file_t then the key, nothing after): a compaction, retention pass or erasure
 * rewrite run by one (an older leader of a group, a node downgraded) still finds the records it
 * expects. An older binary deletes a record without its stats and a compaction reuses its first
 * object's number: a stats value is taken only for the record that names the same object key
 * (an orphan is ignored, and dropped by the next compaction of its owner, the owner's erasure, or
 * the tier's sweep of every owner's at start-up: st__tier_stats_orphans, below).
 * The session-24 binary appended them to the record itself (after a 0 byte): such a record still
 * reads with its stats (st_tier_rec_split).
 *
 * The encoding (per file, never per row group; only the top-level leaves with a field id, and
 * bounds only where a fixed-width value has them: a chat file's is about a hundred bytes):
 *   u8 1 (the format) | varint n | n × (varint id | varint values | varint nulls + 1 (0: not
 *   known) | u8 len (0: no bounds) | min[len] | max[len])
 */
#include "internal.h"

#include "pq_internal.h"

#include <string.h>

enum { ST__CS_FORMAT = 1 };

static void st__cs_varint(st_buf_t *b, uint64_t v)
{
    uint8_t x[10];
    size_t n = 0;
    do {
        x[n++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        v >>= 7;
    } while (v);
    st_buf_append(b, x, n);
}

static bool st__cs_get(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int s = 0; s < 64 && *p < end; s += 7) {
        uint8_t c = *(*p)++;
        *v |= (uint64_t)(c & 0x7f) << s;
        if (!(c & 0x80)) return true;
    }
    return false;
}

void st_tier_stats_encode(const st_pq_colstat_t *s, size_t n, st_buf_t *out)
{
    st_buf_appendc(out, ST__CS_FORMAT);
    st__cs_varint(out, n);
    for (size_t i = 0; i < n; i++) {
        uint8_t len = s[i].bounds && s[i].len <= sizeof s[i].min ? (uint8_t)s[i].len : 0;
        st__cs_varint(out, (uint64_t)s[i].id);
        st__cs_varint(out, (uint64_t)s[i].values);
        st__cs_varint(out, (uint64_t)(s[i].nulls + 1));
        st_buf_appendc(out, (char)len);
        st_buf_append(out, s[i].min, len);
        st_buf_append(out, s[i].max, len);
    }
}

int st_tier_stats_decode(const uint8_t *p, size_t len, st_pq_colstat_t *out, size_t max, size_t *n)
{
    const uint8_t *end = p + len;
    uint64_t cnt, id, values, nulls;
    *n = 0;
    if (!len || *p++ != ST__CS_FORMAT || !st__cs_get(&p, end, &cnt)) return ST_EINVAL;
    for (uint64_t i = 0; i < cnt; i++) {
        if (!st__cs_get(&p, end, &id) || !st__cs_get(&p, end, &values) ||
            !st__cs_get(&p, end, &nulls) || p >= end)
            goto bad;
        uint8_t w = *p++;
        if (w > sizeof out->min || (size_t)(end - p) < 2u * w || id == 0 || id > INT32_MAX ||
            values > INT64_MAX || nulls > INT64_MAX)
            goto bad;
        st_pq_colstat_t c = {.id = (int)id,
                             .values = (int64_t)values,
                             .nulls = (int64_t)nulls - 1,
                             .bounds = w > 0,
                             .len = w};
        memcpy(c.min, p, w);
        memcpy(c.max, p + w, w);
        p += 2u * w;
        if (*n < max) out[(*n)++] = c;
    }
    if (p == end) return ST_OK;
bad:
    *n = 0;
    return ST_EINVAL;
}

int st_tier_stats_of_footer(const void *footer, size_t flen, st_buf_t *out)
{
    enum { ST__CS_MAX = 64 }; /* metrics.c's most (ST_TMETRICS_COLS * 2) */
    st_pq_colstat_t s[ST__CS_MAX];
    size_t n = 0;
    int rc = st_pq_top_stats(footer, flen, s, ST__CS_MAX, &n);
    if (rc == ST_OK) st_tier_stats_encode(s, n, out);
    return rc;
}

int st_tier_stats_of(const void *file, size_t len, st_buf_t *out)
{
    uint32_t flen;
    const uint8_t *b = file;
    int rc = len >= 12 ? st_pq_footer_len(b + len - 8, len, &flen) : ST_EINVAL;
    if (rc == ST_OK) rc = st_tier_stats_of_footer(b + len - 8 - flen, flen, out);
    return rc;
}

/* The stats of the object this thread put last (st_tier_put_parquet), until taken. */
static _Thread_local st_buf_t st__cs_last;

int st_tier_put_parquet(st_objstore_t *obj, const char *key, const void *file, size_t len)
{
    st_buf_reset(&st__cs_last);
    int rc = st_objstore_put(obj, key, file, len);
    if (rc == ST_OK && st_tier_stats_of(file, len, &st__cs_last) != ST_OK)
        st_buf_reset(&st__cs_last); /* not a footer this reads: the record keeps none */
    return rc;
}

void st_tier_stats_take(st_buf_t *out)
{
    st_buf_reset(out);
    st_buf_append(out, st__cs_last.data, st__cs_last.len);
    st_buf_free(&st__cs_last); /* a pool thread keeps no heap between jobs */
}

void st_tier_stats_drop(void)
{
    st_buf_free(&st__cs_last);
}

size_t st_tier_rec_split(const void *val, size_t vlen, const uint8_t **stats, size_t *sl)
{
    const char *k = (const char *)val + sizeof(st_tier_file_t);
    size_t kl = vlen - sizeof(st_tier_file_t);
    const char *z = memchr(k, 0, kl);
    *stats = NULL;
    *sl = 0;
    if (!z) return kl; /* a record from before the stats: the key alone */
    if ((size_t)(z + 1 - k) < kl) {
        *stats = (const uint8_t *)z + 1;
        *sl = kl - (size_t)(z + 1 - k);
    }
    return (size_t)(z - k);
}

void st_tier_rec_value(st_buf_t *v, const st_tier_file_t *f, const char *key, const uint8_t *stats,
                       size_t sl)
{
    st_buf_append(v, f, sizeof *f);
    st_buf_puts(v, key);
    if (sl) {
        st_buf_appendc(v, 0); /* no key holds a 0 byte */
        st_buf_append(v, stats, sl);
    }
}

/* ---- the stats records: 'I' owner 0 seq -> key 0 stats ---- */

/* The object key (kl bytes) and the stats of a stats value; false when it has neither. */
static bool st__cs_value_split(const void *val, size_t vlen, const char **key, size_t *kl,
                               const uint8_t **stats, size_t *sl)
{
    const char *z = memchr(val, 0, vlen);
    if (!z || z == val || (size_t)(z + 1 - (const char *)val) >= vlen) return false;
    *key = val;
    *kl = (size_t)(z - (const char *)val);
    *stats = (const uint8_t *)z + 1;
    *sl = vlen - *kl - 1;
    return true;
}

int st__tier_stats_put(st_store_t *s, const char *o, size_t ol, uint64_t seq, const char *key,
                       const uint8_t *stats, size_t sl, uint64_t *wait)
{
    uint8_t k[ST__TIER_MKEY_MAX];
    size_t kl = st__tier_mkey(k, 'I', o, ol, true, seq);
    if (!sl) return st__tier_stats_del(s, o, ol, seq, wait);
    st_buf_t v = {0};
    st_buf_puts(&v, key);
    st_buf_appendc(&v, 0); /* no key holds a 0 byte */
    st_buf_append(&v, stats, sl);
    int rc = st_store_put(s, k, kl, v.data, v.len, wait);
    st_buf_free(&v);
    return rc;
}

int st__tier_stats_del(st_store_t *s, const char *o, size_t ol, uint64_t seq, uint64_t *wait)
{
    uint8_t k[ST__TIER_MKEY_MAX];
    int rc = st_store_del(s, k, st__tier_mkey(k, 'I', o, ol, true, seq), wait);
    return rc == ST_ENOTFOUND ? ST_OK : rc;
}

typedef struct {
    st_tier_stats_fn fn;
    void *arg;
} st__cs_each_t;

static int st__cs_each_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st__cs_each_t *x = arg;
    const char *ok;
    const uint8_t *stats;
    size_t kl, sl;
    if (klen < 9 || !st__cs_value_split(val, vlen, &ok, &kl, &stats, &sl)) return 0;
    return x->fn(x->arg, st_be64_get((const uint8_t *)key + klen - 8), ok, kl, stats, sl);
}

int st_tier_each_stats(st_store_t *s, const char *o, size_t ol, st_tier_stats_fn fn, void *arg,
                       uint64_t *wait)
{
    uint8_t k[ST__TIER_MKEY_MAX];
    if (ol > ST_TIER_OWNER_MAX) return ST_EINVAL;
    size_t pl = st__tier_mkey(k, 'I', o, ol, false, 0);
    k[pl++] = 0; /* 'I' o 0: not the stats of an owner whose name o begins */
    st__cs_each_t x = {fn, arg};
    return st_store_scan(s, k, pl, st__cs_each_one, &x, wait);
}

/* The entry of m (ordered by seq, ascending or descending) numbered seq, or NULL. */
static st_tier_obj_t *st__cs_find(st_tier_manifest_t *m, uint64_t seq)
{
    size_t lo = 0, hi = m->n;
    bool desc = m->n > 1 && m->v[0].seq > m->v[m->n - 1].seq;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t at = m->v[mid].seq;
        if (at == seq) return &m->v[mid];
        if ((at < seq) != desc)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* One stats value of st_tier_manifest_stats: attached when its record names the same object. */
static int st__cs_attach(void *arg, uint64_t seq, const char *key, size_t kl, const uint8_t *stats,
                         size_t sl)
{
    st_tier_obj_t *ob = st__cs_find(arg, seq);
    if (!ob || ob->stats || strlen(ob->key) != kl || memcmp(ob->key, key, kl) != 0) return 0;
    ob->stats = st_malloc(sl);
    memcpy(ob->stats, stats, sl);
    ob->stats_len = sl;
    return 0;
}

int st_tier_manifest_stats(st_store_t *s, const char *o, size_t ol, st_tier_manifest_t *m,
                           uint64_t *wait)
{
    return m->n ? st_tier_each_stats(s, o, ol, st__cs_attach, m, wait) : ST_OK;
}

typedef struct {
    const st_tier_manifest_t *m;
    ST_VEC(uint64_t) orphans;
} st__cs_sweep_t;

static int st__cs_orphan(void *arg, uint64_t seq, const char *key, size_t kl, const uint8_t *stats,
                         size_t sl)
{
    st__cs_sweep_t *x = arg;
    (void)stats, (void)sl;
    const st_tier_obj_t *ob = st__cs_find((st_tier_manifest_t *)x->m, seq);
    if (!ob || strlen(ob->key) != kl || memcmp(ob->key, key, kl) != 0)
        st_vec_push(&x->orphans, seq);
    return 0;
}

int st__tier_stats_sweep(st_store_t *s, const char *o, size_t ol, const st_tier_manifest_t *m,
                         uint64_t *wait)
{
    st__cs_sweep_t x = {.m = m};
    int rc = st_tier_each_stats(s, o, ol, st__cs_orphan, &x, wait);
    for (size_t i = 0; rc == ST_OK && i < x.orphans.n; i++) /* staged after the scan */
        rc = st__tier_stats_del(s, o, ol, x.orphans.v[i], wait);
    st_vec_free(&x.orphans);
    return rc;
}

/* ---- the start-up sweep of every owner's orphans (issue 48, the rolling upgrade) ---- */

/* The 'I' keys of one page and the object keys they name, each: u16 key length, the key, u16
 * object key length, the object key. Collected first: the deletions are staged after the page. */
static int st__cs_collect(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_buf_t *b = arg;
    const char *ok;
    const uint8_t *stats;
    size_t kl, sl;
    if (klen < 11 || klen > ST__TIER_MKEY_MAX || ((const uint8_t *)key)[klen - 9] != 0) return 0;
    if (!st__cs_value_split(val, vlen, &ok, &kl, &stats, &sl)) kl = 0, ok = ""; /* no object */
    uint16_t l = (uint16_t)klen, ol = (uint16_t)(kl > UINT16_MAX ? 0 : kl);
    st_buf_append(b, &l, sizeof l);
    st_buf_append(b, key, klen);
    st_buf_append(b, &ol, sizeof ol);
    st_buf_append(b, ok, ol);
    return 0;
}

/* Whether the stats key sk ('I' o 0 seq) has a file record 'F' o 0 seq naming object ok. */
static bool st__cs_attached(st_store_t *s, const uint8_t *sk, size_t skl, const char *ok, size_t kl,
                            uint64_t *wait)
{
    uint8_t fk[ST__TIER_MKEY_MAX];
    const void *v;
    size_t vl;
    const uint8_t *stats;
    size_t sl;
    memcpy(fk, sk, skl);
    fk[0] = 'F';
    if (!kl || st_store_get(s, fk, skl, &v, &vl, wait) != ST_OK || vl < sizeof(st_tier_file_t))
        return false;
    size_t rk = st_tier_rec_split(v, vl, &stats, &sl);
    return rk == kl && memcmp((const char *)v + sizeof(st_tier_file_t), ok, kl) == 0;
}

int st__tier_stats_orphans(st_store_t *s, st_store_walk_t *walk, size_t page, uint64_t until,
                           size_t *deleted)
{
    int more = 1, rc = ST_OK;
    uint64_t wait = 0; /* nobody is answered from here */
    while (more > 0 && rc == ST_OK) {
        st_buf_t b = {0};
        more = st_store_walk_page(s, "I", 1, walk, page, st__cs_collect, &b);
        for (size_t i = 0; rc == ST_OK && i < b.len;) {
            uint16_t l, ol;
            memcpy(&l, b.data + i, sizeof l);
            const uint8_t *sk = (const uint8_t *)b.data + i + sizeof l;
            memcpy(&ol, sk + l, sizeof ol);
            const char *ok = (const char *)sk + l + sizeof ol;
            i += sizeof l + l + sizeof ol + ol;
            if (st__cs_attached(s, sk, l, ok, ol, &wait)) continue;
            rc = st_store_del(s, sk, l, &wait);
            if (rc == ST_ENOTFOUND) rc = ST_OK;
            if (rc == ST_OK) ++*deleted;
        }
        st_buf_free(&b);
        if (more < 0) rc = more;
        if (uv_hrtime() >= until) break;
    }
    return rc < 0 ? rc : more > 0;
}
