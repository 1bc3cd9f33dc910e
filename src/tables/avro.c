/* SPDX-License-Identifier: MIT */
/*
 * avro: an Avro object container file writer (Avro 1.11 specification, "Object Container
 * Files"), just enough for Iceberg's manifests and manifest lists.
 *
 * Why our own: Debian's libavro (Avro C 1.11.1) rewrites the schema it puts in a file's header
 * and drops every attribute it does not know — Iceberg's "field-id", "element-id" and the like
 * (NOTES.md, "Iceberg on this machine") — and Iceberg readers resolve columns by those ids. A
 * writer for schemas the caller already holds as JSON text is small: the header keeps that text
 * byte for byte, and the caller encodes each record's values in the schema's order (the writer
 * does not parse or check the schema; tests decode our files with independent readers).
 *
 * The file: "Obj\1", the metadata as an Avro map<bytes> in one block (avro.schema, avro.codec,
 * then the caller's pairs), a 16-byte sync marker from getrandom, then blocks of records: a long
 * count, a long byte size, the (coded) data and the sync marker. A block is closed once its
 * uncompressed data passes 64 KiB, at a record's end (Avro's usual block size; a reader holds one
 * block in memory). Codec "deflate" is RAW deflate (RFC 1951, zlib windowBits -15, no zlib header
 * or checksum), as the Avro specification says; "null" stores the data as is.
 */
#include "strata/iceberg.h"

#include <string.h>
#include <sys/random.h>
#include <zlib.h>

enum { ST__AVRO_BLOCK = 64 * 1024, ST__AVRO_SYNC = 16 };

struct st_avro_w {
    st_buf_t *out; /* borrowed: the caller's file */
    st_buf_t blk;  /* owned: the current block's uncompressed data */
    st_buf_t z;    /* owned: the current block deflated (reused) */
    size_t count;  /* records complete in blk */
    bool deflate;
    uint8_t sync[ST__AVRO_SYNC];
};

/* Avro's int and long: zigzag, then a little-endian base-128 varint (at most 10 bytes). */
static void st__avro_long(st_buf_t *b, int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (0 - ((uint64_t)v >> 63));
    uint8_t tmp[10];
    size_t n = 0;
    while (z >= 0x80) {
        tmp[n++] = (uint8_t)(z | 0x80);
        z >>= 7;
    }
    tmp[n++] = (uint8_t)z;
    st_buf_append(b, tmp, n);
}

static void st__avro_bytes(st_buf_t *b, const void *p, size_t n)
{
    st__avro_long(b, (int64_t)n);
    st_buf_append(b, p, n);
}

static void st__avro_sync_init(uint8_t *sync)
{
    if (getrandom(sync, ST__AVRO_SYNC, 0) == (ssize_t)ST__AVRO_SYNC) return;
    /* No entropy yet (early boot): the marker only has to be unlikely inside the data. */
    uint64_t a = (uint64_t)st_now_us(), b = a * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)sync;
    memcpy(sync, &a, 8);
    memcpy(sync + 8, &b, 8);
}

int st_avro_begin(st_avro_w_t **out, st_buf_t *buf, const char *schema_json, bool deflate,
                  const st_avro_meta_t *meta, size_t nmeta)
{
    *out = NULL;
    for (size_t i = 0; i < nmeta; i++) /* "avro." keys are the format's own */
        if (strncmp(meta[i].key, "avro.", 5) == 0) return ST_EINVAL;
    st_avro_w_t *w = st_calloc(1, sizeof *w);
    w->out = buf;
    w->deflate = deflate;
    st__avro_sync_init(w->sync);

    st_buf_append(buf, "Obj\x01", 4);
    st__avro_long(buf, (int64_t)(2 + nmeta)); /* the map in one block */
    st__avro_bytes(buf, "avro.schema", 11);
    st__avro_bytes(buf, schema_json, strlen(schema_json));
    st__avro_bytes(buf, "avro.codec", 10);
    st__avro_bytes(buf, deflate ? "deflate" : "null", deflate ? 7 : 4);
    for (size_t i = 0; i < nmeta; i++) {
        st__avro_bytes(buf, meta[i].key, strlen(meta[i].key));
        st__avro_bytes(buf, meta[i].value, strlen(meta[i].value));
    }
    st__avro_long(buf, 0);
    st_buf_append(buf, w->sync, ST__AVRO_SYNC);
    *out = w;
    return ST_OK;
}

void st_avro_put_long(st_avro_w_t *w, int64_t v)
{
    st__avro_long(&w->blk, v);
}

void st_avro_enc_long(st_buf_t *b, int64_t v)
{
    st__avro_long(b, v);
}

void st_avro_put_bool(st_avro_w_t *w, bool v)
{
    st_buf_appendc(&w->blk, v ? 1 : 0);
}

void st_avro_put_string(st_avro_w_t *w, const void *p, size_t n)
{
    st__avro_bytes(&w->blk, p, n);
}

void st_avro_put_fixed(st_avro_w_t *w, const void *p, size_t n)
{
    st_buf_append(&w->blk, p, n);
}

void st_avro_put_union(st_avro_w_t *w, int branch)
{
    st__avro_long(&w->blk, branch);
}

void st_avro_put_block(st_avro_w_t *w, size_t n)
{
    st__avro_long(&w->blk, (int64_t)n);
}

/* Raw deflate of w->blk into w->z, in one call (the block is at most ~64 KiB plus a record). */
static int st__avro_deflate(st_avro_w_t *w)
{
    if (w->blk.len > UINT32_MAX / 2) return ST_EIO; /* one record past zlib's uInt lengths */
    z_stream zs = {0};
    int zrc = deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
    if (zrc != Z_OK) return zrc == Z_MEM_ERROR ? ST_ENOMEM : ST_EIO;
    size_t bound = deflateBound(&zs, (uLong)w->blk.len);
    st_buf_reset(&w->z);
    st_buf_reserve(&w->z, bound);
    zs.next_in = (Bytef *)w->blk.data;
    zs.avail_in = (uInt)w->blk.len;
    zs.next_out = (Bytef *)w->z.data;
    zs.avail_out = (uInt)bound;
    zrc = deflate(&zs, Z_FINISH);
    w->z.len = bound - zs.avail_out;
    deflateEnd(&zs);
    return zrc == Z_STREAM_END ? ST_OK : ST_EIO;
}

/* Appends the current block (if it holds a record) to the file and empties it. */
static int st__avro_flush(st_avro_w_t *w)
{
    if (w->count == 0) {
        ST_ASSERT(w->blk.len == 0); /* values put after the last st_avro_record_end */
        return ST_OK;
    }
    const st_buf_t *data = &w->blk;
    if (w->deflate) {
        int rc = st__avro_deflate(w);
        if (rc != ST_OK) return rc;
        data = &w->z;
    }
    st__avro_long(w->out, (int64_t)w->count);
    st__avro_bytes(w->out, data->data, data->len);
    st_buf_append(w->out, w->sync, ST__AVRO_SYNC);
    st_buf_reset(&w->blk);
    w->count = 0;
    return ST_OK;
}

void st_avro_record_end(st_avro_w_t *w)
{
    w->count++;
    /* A deflate failure here is met again, and reported, by st_avro_finish: the block stays. */
    if (w->blk.len >= ST__AVRO_BLOCK) (void)st__avro_flush(w);
}

int st_avro_finish(st_avro_w_t *w)
{
    int rc = st__avro_flush(w);
    st_avro_abort(w);
    return rc;
}

void st_avro_abort(st_avro_w_t *w)
{
    if (!w) return;
    st_buf_free(&w->blk);
    st_buf_free(&w->z);
    free(w);
}
