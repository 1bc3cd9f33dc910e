/* SPDX-License-Identifier: MIT */
/*
 * What a backup looks like in object storage: segment bodies (records with their commit times,
 * one CRC over the whole), zstd framing, and object keys that carry every figure a restore
 * needs to choose objects without downloading them.
 */
#include "internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

void st__bk_seg_encode(st_buf_t *out, uint64_t timeline, const st_bk_rec_t *first, size_t n)
{
    st_buf_reset(out);
    st_buf_append(out, ST_BK_SEG_MAGIC, 8);
    st_buf_append(out, &timeline, 8);
    uint32_t cnt = (uint32_t)n;
    st_buf_append(out, &cnt, 4);
    const st_bk_rec_t *r = first;
    for (size_t i = 0; i < n; i++) {
        if (i) r = ST_LIST_ITEM(r->link.next, const st_bk_rec_t, link);
        uint32_t len = (uint32_t)r->len;
        st_buf_append(out, &r->seq, 8);
        st_buf_append(out, &r->time, 8);
        st_buf_append(out, &len, 4);
        st_buf_append(out, r->data, r->len);
    }
    uint32_t crc = (uint32_t)crc32(0L, (const Bytef *)out->data, (uInt)out->len);
    st_buf_append(out, &crc, 4);
}

int st__bk_seg_decode(const char *p, size_t len, st_bk_rec_fn fn, void *arg)
{
    if (len < 24 || memcmp(p, ST_BK_SEG_MAGIC, 8) != 0) return ST_EIO;
    uint32_t crc;
    memcpy(&crc, p + len - 4, 4);
    if ((uint32_t)crc32(0L, (const Bytef *)p, (uInt)(len - 4)) != crc) return ST_EIO;
    uint32_t cnt;
    memcpy(&cnt, p + 16, 4);
    const char *q = p + 20, *end = p + len - 4;
    /* check the framing first: a damaged segment applies nothing */
    for (uint32_t i = 0; i < cnt; i++) {
        uint32_t rl;
        if (end - q < 20) return ST_EIO;
        memcpy(&rl, q + 16, 4);
        if ((uint64_t)(end - q - 20) < rl) return ST_EIO;
        q += 20 + rl;
    }
    if (q != end) return ST_EIO;
    q = p + 20;
    for (uint32_t i = 0; i < cnt; i++) {
        uint64_t seq;
        int64_t t;
        uint32_t rl;
        memcpy(&seq, q, 8);
        memcpy(&t, q + 8, 8);
        memcpy(&rl, q + 16, 4);
        int rc = fn(arg, seq, t, q + 20, rl);
        if (rc) return rc;
        q += 20 + rl;
    }
    return ST_OK;
}

int st__bk_compress(const void *p, size_t len, st_buf_t *out)
{
    size_t bound = ZSTD_compressBound(len);
    st_buf_reserve(out, bound);
    size_t n = ZSTD_compress(out->data + out->len, bound, p, len, 1);
    if (ZSTD_isError(n)) return ST_EINTERNAL;
    out->len += n;
    return ST_OK;
}

int st__bk_decompress(const void *p, size_t len, st_buf_t *out)
{
    unsigned long long n = ZSTD_getFrameContentSize(p, len);
    if (n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN || n > (1ULL << 40))
        return ST_EIO;
    st_buf_reserve(out, (size_t)n);
    size_t got = ZSTD_decompress(out->data + out->len, (size_t)n, p, len);
    if (ZSTD_isError(got) || got != n) return ST_EIO;
    out->len += got;
    return ST_OK;
}

void st__bk_snap_key(char *out, size_t n, uint64_t timeline, uint64_t applied, int64_t time)
{
    snprintf(out, n, "snap/%016" PRIx64 "/%020" PRIu64 "-%020" PRId64 ".zst", timeline, applied,
             time);
}

void st__bk_seg_key(char *out, size_t n, uint64_t timeline, uint64_t first, uint64_t last,
                    int64_t tfirst)
{
    snprintf(out, n, "seg/%016" PRIx64 "/%020" PRIu64 "-%020" PRIu64 "-%020" PRId64 ".zst",
             timeline, first, last, tfirst);
}

bool st__bk_parse_key(const char *key, st_bk_obj_t *o)
{
    memset(o, 0, sizeof *o);
    if (strlen(key) >= sizeof o->key) return false;
    int end = 0;
    if (strncmp(key, "snap/", 5) == 0) {
        o->snap = true;
        if (sscanf(key, "snap/%16" SCNx64 "/%20" SCNu64 "-%20" SCNd64 ".zst%n", &o->timeline,
                   &o->first, &o->time, &end) != 3)
            return false;
        o->last = o->first;
    } else if (sscanf(key, "seg/%16" SCNx64 "/%20" SCNu64 "-%20" SCNu64 "-%20" SCNd64 ".zst%n",
                      &o->timeline, &o->first, &o->last, &o->time, &end) != 4) {
        return false;
    }
    if (end == 0 || key[end] != '\0') return false;
    /* only the exact form this module writes: sscanf alone also takes "snap/1/+2- 3.zst" */
    char canon[sizeof o->key];
    if (o->snap)
        st__bk_snap_key(canon, sizeof canon, o->timeline, o->first, o->time);
    else
        st__bk_seg_key(canon, sizeof canon, o->timeline, o->first, o->last, o->time);
    if (strcmp(canon, key) != 0) return false;
    strcpy(o->key, key);
    return true;
}

typedef ST_VEC(st_bk_obj_t) st_bk_list_t;

static int st__bk_list_one(void *arg, const char *key, uint64_t size)
{
    st_bk_list_t *l = arg;
    st_bk_obj_t o;
    if (!st__bk_parse_key(key, &o)) return 0; /* a temp file or a stranger's object */
    o.size = size;
    st_vec_push(l, o);
    return 0;
}

static int st__bk_cmp(const void *a, const void *b)
{
    const st_bk_obj_t *x = a, *y = b;
    if (x->snap != y->snap) return x->snap ? -1 : 1;
    if (x->timeline != y->timeline) return x->timeline < y->timeline ? -1 : 1;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return 0;
}

int st__bk_list(st_objstore_t *os, st_bk_obj_t **out, size_t *n)
{
    st_bk_list_t l = {0};
    int rc = st_objstore_list(os, "snap/", st__bk_list_one, &l);
    if (rc == ST_OK || rc == ST_ENOTFOUND) rc = st_objstore_list(os, "seg/", st__bk_list_one, &l);
    if (rc == ST_ENOTFOUND) rc = ST_OK;
    if (rc != ST_OK) {
        free(l.v);
        return rc;
    }
    if (l.n) qsort(l.v, l.n, sizeof *l.v, st__bk_cmp);
    *out = l.v;
    *n = l.n;
    return ST_OK;
}
