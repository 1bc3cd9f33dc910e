/* SPDX-License-Identifier: MIT */
/*
 * avro_read: a strict Avro object container file reader (Avro 1.11 specification, "Object
 * Container Files"), the mirror of avro.c: enough to read back Iceberg's manifests and manifest
 * lists, strata's own or another writer's, from object storage (so: untrusted bytes).
 *
 * Everything is bounded by the caller's buffer: a varint has at most 10 bytes, a length or count
 * never runs past the bytes left, a deflated block inflates to at most ST_AVRO_R_BLOCK_MAX. The
 * reader keeps one block's data at a time (a "null" block is borrowed from the file, a deflated
 * one inflated into blk). Errors are sticky (r->bad). No recursion: the caller walks its schema.
 */
#include "strata/iceberg.h"

#include <string.h>
#include <zlib.h>

enum { ST__AVRO_R_SYNC = 16, ST__AVRO_R_META = 64 };

typedef struct {
    const uint8_t *p, *end;
} st__cur_t;

typedef struct {
    const char *k, *v; /* borrowed from the file */
    size_t kn, vn;
} st__avro_kv_t;

struct st_avro_r {
    st__cur_t file; /* the rest of the file after the current block */
    st__cur_t blk;  /* the current block's data left */
    int64_t left;   /* records left in the current block */
    bool deflate, bad, eof;
    uint8_t sync[ST__AVRO_R_SYNC];
    st_buf_t z; /* owned: the current block inflated */
    size_t nmeta;
    st__avro_kv_t meta[ST__AVRO_R_META];
};

static int st__avro_r_varint(st__cur_t *c, int64_t *v)
{
    uint64_t z = 0;
    for (int i = 0; i < 10; i++) {
        if (c->p >= c->end) return ST_EINVAL;
        uint8_t b = *c->p++;
        if (i == 9 && b > 1) return ST_EINVAL; /* past 64 bits */
        z |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
            return ST_OK;
        }
    }
    return ST_EINVAL;
}

/* A length-prefixed byte string within c. */
static int st__avro_r_bytes(st__cur_t *c, const char **p, size_t *n)
{
    int64_t len;
    if (st__avro_r_varint(c, &len) != ST_OK || len < 0 || (uint64_t)len > (size_t)(c->end - c->p))
        return ST_EINVAL;
    *p = (const char *)c->p;
    *n = (size_t)len;
    c->p += len;
    return ST_OK;
}

static bool st__avro_r_is(const char *p, size_t n, const char *s)
{
    return n == strlen(s) && memcmp(p, s, n) == 0;
}

/* The header's metadata map<bytes>: blocks of pairs until a 0 count. */
static int st__avro_r_header_meta(st_avro_r_t *r)
{
    for (;;) {
        int64_t n, size;
        if (st__avro_r_varint(&r->file, &n) != ST_OK) return ST_EINVAL;
        if (n == 0) return ST_OK;
        if (n < 0) {
            if (n == INT64_MIN || st__avro_r_varint(&r->file, &size) != ST_OK || size < 0)
                return ST_EINVAL;
            n = -n;
        }
        if ((uint64_t)n > (size_t)(r->file.end - r->file.p) / 2) return ST_EINVAL;
        for (int64_t i = 0; i < n; i++) {
            if (r->nmeta == ST__AVRO_R_META) return ST_EINVAL;
            st__avro_kv_t *m = &r->meta[r->nmeta++];
            if (st__avro_r_bytes(&r->file, &m->k, &m->kn) != ST_OK ||
                st__avro_r_bytes(&r->file, &m->v, &m->vn) != ST_OK)
                return ST_EINVAL;
            for (size_t j = 0; j + 1 < r->nmeta; j++) /* a key twice: which one counts? */
                if (r->meta[j].kn == m->kn && memcmp(r->meta[j].k, m->k, m->kn) == 0)
                    return ST_EINVAL;
        }
    }
}

int st_avro_r_open(st_avro_r_t **out, const void *data, size_t len)
{
    *out = NULL;
    if (len < 4 || memcmp(data, "Obj\x01", 4) != 0) return ST_EINVAL;
    st_avro_r_t *r = st_calloc(1, sizeof *r);
    r->file = (st__cur_t){(const uint8_t *)data + 4, (const uint8_t *)data + len};
    size_t n;
    const char *codec = NULL;
    if (st__avro_r_header_meta(r) != ST_OK || !st_avro_r_meta(r, "avro.schema", &n) ||
        (size_t)(r->file.end - r->file.p) < ST__AVRO_R_SYNC)
        goto bad;
    codec = st_avro_r_meta(r, "avro.codec", &n);
    if (codec && st__avro_r_is(codec, n, "deflate"))
        r->deflate = true;
    else if (codec && !st__avro_r_is(codec, n, "null"))
        goto bad;
    memcpy(r->sync, r->file.p, ST__AVRO_R_SYNC);
    r->file.p += ST__AVRO_R_SYNC;
    *out = r;
    return ST_OK;
bad:
    free(r);
    return ST_EINVAL;
}

void st_avro_r_close(st_avro_r_t *r)
{
    if (!r) return;
    st_buf_free(&r->z);
    free(r);
}

const char *st_avro_r_meta(const st_avro_r_t *r, const char *key, size_t *len)
{
    for (size_t i = 0; i < r->nmeta; i++)
        if (st__avro_r_is(r->meta[i].k, r->meta[i].kn, key)) {
            *len = r->meta[i].vn;
            return r->meta[i].v;
        }
    *len = 0;
    return NULL;
}

int st_avro_r_status(const st_avro_r_t *r)
{
    return r->bad ? ST_EINVAL : ST_OK;
}

static int st__avro_r_fail(st_avro_r_t *r)
{
    r->bad = true;
    return ST_EINVAL;
}

/* Raw inflate of n bytes at p into r->z, at most ST_AVRO_R_BLOCK_MAX out; the stream must end
 * exactly at n. */
static int st__avro_r_inflate(st_avro_r_t *r, const uint8_t *p, size_t n)
{
    z_stream zs = {0};
    int zrc = inflateInit2(&zs, -15);
    if (zrc != Z_OK) return zrc == Z_MEM_ERROR ? ST_ENOMEM : ST_EIO;
    st_buf_reset(&r->z);
    int rc = ST_EINVAL;
    zs.next_in = (Bytef *)p;
    zs.avail_in = (uInt)n;
    for (;;) {
        size_t room = r->z.len < 4096 ? 4096 : r->z.len; /* doubling */
        if (room > ST_AVRO_R_BLOCK_MAX - r->z.len) room = ST_AVRO_R_BLOCK_MAX - r->z.len;
        if (room == 0) break; /* too large */
        st_buf_reserve(&r->z, room);
        zs.next_out = (Bytef *)r->z.data + r->z.len;
        zs.avail_out = (uInt)room;
        zrc = inflate(&zs, Z_NO_FLUSH);
        r->z.len += room - zs.avail_out;
        if (zrc == Z_STREAM_END) {
            rc = zs.avail_in == 0 ? ST_OK : ST_EINVAL;
            break;
        }
        if (zrc == Z_MEM_ERROR) {
            rc = ST_ENOMEM;
            break;
        }
        if (zrc != Z_OK && zrc != Z_BUF_ERROR) break;
        if (zrc == Z_BUF_ERROR && zs.avail_in == 0) break; /* truncated stream */
    }
    inflateEnd(&zs);
    return rc;
}

int st_avro_r_next(st_avro_r_t *r)
{
    if (r->bad) return ST_EINVAL;
    if (r->left > 0) {
        r->left--;
        return ST_OK;
    }
    if (r->blk.p != r->blk.end) return st__avro_r_fail(r); /* a block's data not all read */
    if (r->eof || r->file.p == r->file.end) {
        r->eof = true;
        return ST_ENOTFOUND;
    }
    int64_t count, size;
    if (st__avro_r_varint(&r->file, &count) != ST_OK || count <= 0 ||
        st__avro_r_varint(&r->file, &size) != ST_OK || size < 0 ||
        (uint64_t)size > (size_t)(r->file.end - r->file.p) ||
        (size_t)(r->file.end - r->file.p) - (size_t)size < ST__AVRO_R_SYNC ||
        memcmp(r->file.p + size, r->sync, ST__AVRO_R_SYNC) != 0)
        return st__avro_r_fail(r);
    const uint8_t *data = r->file.p;
    r->file.p += size + ST__AVRO_R_SYNC;
    if (r->deflate) {
        if ((uint64_t)size > UINT32_MAX / 2) return st__avro_r_fail(r);
        int rc = st__avro_r_inflate(r, data, (size_t)size);
        if (rc != ST_OK) {
            r->bad = true;
            return rc == ST_ENOMEM ? ST_ENOMEM : ST_EINVAL;
        }
        r->blk = (st__cur_t){(const uint8_t *)r->z.data, (const uint8_t *)r->z.data + r->z.len};
    } else {
        r->blk = (st__cur_t){data, data + size};
    }
    /* every record of strata's schemas has at least one byte */
    if ((uint64_t)count > (size_t)(r->blk.end - r->blk.p)) return st__avro_r_fail(r);
    r->left = count - 1;
    return ST_OK;
}

int st_avro_r_long(st_avro_r_t *r, int64_t *v)
{
    *v = 0;
    if (r->bad || st__avro_r_varint(&r->blk, v) != ST_OK) return st__avro_r_fail(r);
    return ST_OK;
}

int st_avro_r_int(st_avro_r_t *r, int32_t *v)
{
    int64_t l;
    *v = 0;
    if (st_avro_r_long(r, &l) != ST_OK || l < INT32_MIN || l > INT32_MAX) return st__avro_r_fail(r);
    *v = (int32_t)l;
    return ST_OK;
}

int st_avro_r_bool(st_avro_r_t *r, bool *v)
{
    *v = false;
    if (r->bad || r->blk.p >= r->blk.end || *r->blk.p > 1) return st__avro_r_fail(r);
    *v = *r->blk.p++ == 1;
    return ST_OK;
}

int st_avro_r_string(st_avro_r_t *r, const char **p, size_t *n)
{
    *p = "";
    *n = 0;
    if (r->bad || st__avro_r_bytes(&r->blk, p, n) != ST_OK) return st__avro_r_fail(r);
    return ST_OK;
}

int st_avro_r_fixed(st_avro_r_t *r, size_t n, const void **p)
{
    *p = NULL;
    if (r->bad || n > (size_t)(r->blk.end - r->blk.p)) return st__avro_r_fail(r);
    *p = r->blk.p;
    r->blk.p += n;
    return ST_OK;
}

int st_avro_r_union(st_avro_r_t *r, int nbranch, int *branch)
{
    int64_t b;
    *branch = 0;
    if (st_avro_r_long(r, &b) != ST_OK || b < 0 || b >= nbranch) return st__avro_r_fail(r);
    *branch = (int)b;
    return ST_OK;
}

int st_avro_r_block(st_avro_r_t *r, int64_t *n)
{
    int64_t c, size;
    *n = 0;
    if (st_avro_r_long(r, &c) != ST_OK) return ST_EINVAL;
    if (c < 0) {
        if (c == INT64_MIN || st_avro_r_long(r, &size) != ST_OK || size < 0 ||
            (uint64_t)size > (size_t)(r->blk.end - r->blk.p))
            return st__avro_r_fail(r);
        c = -c;
    }
    if ((uint64_t)c > (size_t)(r->blk.end - r->blk.p)) return st__avro_r_fail(r);
    *n = c;
    return ST_OK;
}
