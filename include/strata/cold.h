/* SPDX-License-Identifier: MIT */
/*
 * cold: the columnar tier (SPEC §5). A Parquet writer and reader for message rows (Thrift
 * compact metadata, ZSTD pages, one row group per conversation with min/max statistics), and
 * object storage behind one interface: a local directory (file://) or any S3-compatible service
 * (s3://bucket/prefix, signed by libcurl's AWS SigV4).
 *
 * Nothing here touches the loop or the hot store: encoding, decoding and object I/O are plain
 * blocking functions, safe to call from worker threads (one st_objstore_t may serve several).
 */
#ifndef STRATA_COLD_H
#define STRATA_COLD_H

#include "strata/core.h"

/* One message as a row. Strings are borrowed; metadata NULL means SQL NULL. */
typedef struct {
    uint64_t msg_id;
    int64_t timestamp; /* µs since the epoch, UTC */
    int64_t seq;
    const char *conv, *from, *content, *metadata;
    uint32_t conv_len, from_len, content_len, metadata_len;
} st_msgrow_t;

#define ST_PQ_COLUMNS 7 /* msg_id, conversation_id, from, timestamp, seq, content, metadata */

/* Encodes rows into a whole Parquet file appended to out. Rows must be grouped by conversation
 * and sorted by msg_id inside each group: each group becomes one row group. */
int st_parquet_encode(const st_msgrow_t *rows, size_t n, int zstd_level, st_buf_t *out);

/* A row group as the footer describes it: enough to prune by statistics and to fetch only its
 * bytes. conv points into the meta's own memory. */
typedef struct {
    uint64_t min_id, max_id;
    int64_t min_ts, max_ts;   /* the timestamp column's statistics (0 if absent) */
    int64_t min_seq, max_seq; /* the seq column's statistics (0 if absent) */
    const char *conv;
    size_t conv_len;
    int64_t rows;
    uint64_t offset, length; /* the byte range of all its column chunks */
    uint64_t col_offset[ST_PQ_COLUMNS], col_length[ST_PQ_COLUMNS];
} st_pq_group_t;

typedef struct {
    st_pq_group_t *groups;
    size_t ngroups;
    int64_t rows;
    char *strings; /* owned */
} st_pq_meta_t;

/* The last 8 bytes of a file give the footer's length; ST_EINVAL if they are not Parquet's. */
int st_parquet_footer_len(const uint8_t tail[8], uint64_t file_size, uint32_t *len);
/* Parses a footer (the len bytes before the tail) of a file strata wrote. Anything else, or a
 * corrupt footer, is ST_EINVAL with nothing allocated. Free with st_parquet_meta_free. */
int st_parquet_parse_footer(const uint8_t *p, size_t len, uint64_t file_size, st_pq_meta_t *out);
void st_parquet_meta_free(st_pq_meta_t *m);

/* Decoded rows of one row group; every pointer is into mem, owned, freed by _rows_free. */
typedef struct {
    st_msgrow_t *rows;
    size_t n;
    void **mem;
    size_t nmem;
} st_pq_rows_t;

/* Decodes a row group from the bytes [g->offset, g->offset + g->length) of its file. */
int st_parquet_read_group(const st_pq_group_t *g, const uint8_t *bytes, size_t len,
                          st_pq_rows_t *out);
void st_parquet_rows_free(st_pq_rows_t *r);

/* ---- object storage ---- */
typedef struct st_objstore st_objstore_t;

typedef struct {
    const char *url;        /* file:///abs/dir, file://./rel/dir or s3://bucket/prefix */
    const char *endpoint;   /* s3: http(s)://host:port; empty = AWS for the region */
    const char *region;     /* s3: default us-east-1 */
    const char *access_key; /* s3 credentials */
    const char *secret_key;
} st_objstore_opts_t;

int st_objstore_open(st_objstore_t **out, const st_objstore_opts_t *o);
void st_objstore_close(st_objstore_t *s);
/* A printable description (the URL without credentials). */
const char *st_objstore_describe(const st_objstore_t *s);
/* Stores data under key atomically: readers see all of it or nothing (temp file + fsync +
 * rename, or one PUT). ST_EINVAL when the backend can never store that key (a path or key
 * longer than it allows): retrying is pointless. ST_EIO for what may pass on a retry. */
int st_objstore_put(st_objstore_t *s, const char *key, const void *data, size_t len);
/* Appends bytes [off, off+len) of key to out; ST_ENOTFOUND if the object is missing, ST_EIO if
 * it is shorter. */
int st_objstore_get(st_objstore_t *s, const char *key, uint64_t off, size_t len, st_buf_t *out);
int st_objstore_delete(st_objstore_t *s, const char *key);
/* Calls fn for every object whose key starts with prefix (key relative to the store's root,
 * borrowed for the call); stops early when fn returns non-zero. */
typedef int (*st_objstore_list_fn)(void *arg, const char *key, uint64_t size);
int st_objstore_list(st_objstore_t *s, const char *prefix, st_objstore_list_fn fn, void *arg);

#endif
