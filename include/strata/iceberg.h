/* SPDX-License-Identifier: MIT */
/*
 * iceberg: the cold tier as Apache Iceberg tables, format version 2 (SPEC v5 §5.1).
 *
 * Three layers, each its own file under src/tables/:
 *   avro.c      an Avro object container writer (Iceberg's manifests and manifest lists are Avro
 *               files; Debian's libavro drops the field ids Iceberg needs, NOTES.md);
 *   manifest.c  Iceberg's manifest and manifest-list files, with Iceberg's own Avro schemas
 *               (field ids included), from plain arrays;
 *   tables.c …  the tables themselves: which objects of the tier are in which table, snapshots,
 *               metadata files committed by a create-exclusive, expiry (st_tables_*).
 * Plain functions of avro.c and manifest.c are pure and safe on any thread.
 */
#ifndef STRATA_ICEBERG_H
#define STRATA_ICEBERG_H

#include "strata/core.h"

/* ---- Avro object container files (avro.c) ---- */
/* A writer appends one whole container file to a caller's buffer: the header (magic "Obj\1", a
 * metadata map holding avro.schema — the caller's JSON text, byte for byte — avro.codec and the
 * caller's extra pairs, a 16-byte random sync marker), then blocks of records (count, size,
 * data, sync), each block "null" or raw-"deflate" coded (zlib). The caller writes each record's
 * values in the schema's order with the st_avro_put_* calls (the writer does not check them
 * against the schema) and ends it with st_avro_record_end. */
typedef struct st_avro_w st_avro_w_t;

typedef struct {
    const char *key, *value; /* a header metadata pair (Iceberg's "schema", "partition-spec", …) */
} st_avro_meta_t;

/* *out is owned: st_avro_finish (or st_avro_abort). out is borrowed until then; what the writer
 * appends to it is complete only after st_avro_finish returns ST_OK. */
int st_avro_begin(st_avro_w_t **out, st_buf_t *buf, const char *schema_json, bool deflate,
                  const st_avro_meta_t *meta, size_t nmeta);
void st_avro_put_long(st_avro_w_t *w, int64_t v); /* Avro int and long: zigzag varint */
void st_avro_put_bool(st_avro_w_t *w, bool v);
void st_avro_put_string(st_avro_w_t *w, const void *p, size_t n); /* also Avro bytes */
void st_avro_put_fixed(st_avro_w_t *w, const void *p, size_t n);  /* no length prefix */
/* A union's branch index (then the branch's value; nothing for null). */
void st_avro_put_union(st_avro_w_t *w, int branch);
/* Avro's encoding of an int or long appended to a plain buffer (values put with
 * st_avro_put_fixed later). */
void st_avro_enc_long(st_buf_t *b, int64_t v);
/* An array's or map's items: st_avro_put_block(w, n) then n items (a map item: its key string,
 * then its value); st_avro_put_block(w, 0) ends the array or map (an empty one is just that). */
void st_avro_put_block(st_avro_w_t *w, size_t n);
/* One record is complete: counted into the current block (a block is closed at about 64 KiB). */
void st_avro_record_end(st_avro_w_t *w);
/* Closes the last block and frees w. ST_ENOMEM or ST_EIO (deflate) leave buf's new bytes
 * incomplete: drop them. (st_avro_begin fails only with ST_EINVAL, for a caller's "avro." key,
 * before it appends anything.) */
int st_avro_finish(st_avro_w_t *w);
void st_avro_abort(st_avro_w_t *w);

/* A reader (avro_read.c) of one whole container file held by the caller: strict, bounded by the
 * buffer (every length and count is checked against the bytes left; a deflated block inflates to
 * at most ST_AVRO_R_BLOCK_MAX bytes), no recursion. The header is checked at open (magic, the
 * metadata map, avro.schema present, avro.codec "null", "deflate" or absent, the sync marker);
 * then the caller walks records with st_avro_r_next and reads each one's values in its schema's
 * order with the st_avro_r_* calls that mirror st_avro_put_*. A malformed input makes the call
 * that meets it, and every later one, return ST_EINVAL (the error is sticky: a caller may read a
 * whole record and check once). Strings, bytes and fixed values are borrowed: valid until the next
 * st_avro_r_next (the block they are in may be replaced) or st_avro_r_close. */
#define ST_AVRO_R_BLOCK_MAX (64u << 20)
typedef struct st_avro_r st_avro_r_t;
/* data is borrowed and must outlive *out (owned: st_avro_r_close). ST_EINVAL: not a container
 * file this reader accepts (nothing allocated); ST_ENOMEM. */
int st_avro_r_open(st_avro_r_t **out, const void *data, size_t len);
void st_avro_r_close(st_avro_r_t *r);
/* A header metadata value (avro.schema, the writer's pairs), borrowed from data; NULL if absent. */
const char *st_avro_r_meta(const st_avro_r_t *r, const char *key, size_t *len);
/* Starts the next record: ST_OK, ST_ENOTFOUND after the last one (the file ended cleanly, each
 * block's data consumed whole and followed by the sync marker), ST_EINVAL, ST_ENOMEM. */
int st_avro_r_next(st_avro_r_t *r);
int st_avro_r_long(st_avro_r_t *r, int64_t *v); /* int or long (an int checked to 32 bits:
                                                   st_avro_r_int) */
int st_avro_r_int(st_avro_r_t *r, int32_t *v);
int st_avro_r_bool(st_avro_r_t *r, bool *v);                     /* the byte 0 or 1, nothing else */
int st_avro_r_string(st_avro_r_t *r, const char **p, size_t *n); /* also bytes; not terminated */
int st_avro_r_fixed(st_avro_r_t *r, size_t n, const void **p);
/* A union's branch index, checked below nbranch. */
int st_avro_r_union(st_avro_r_t *r, int nbranch, int *branch);
/* An array's or map's next block: *n items follow (0: the array or map ended). A negative count
 * (a block with its byte size) is read as its absolute value; a count larger than the bytes left
 * in the block is refused (strata's items are never empty). */
int st_avro_r_block(st_avro_r_t *r, int64_t *n);
/* Whether the reader has met malformed input (ST_EINVAL) or not (ST_OK). */
int st_avro_r_status(const st_avro_r_t *r);

/* ---- Iceberg's manifests and manifest lists (manifest.c) ---- */
/* A table as its manifests need it: the partition spec is one identity field. */
typedef struct {
    const char *name;        /* "messages", "room_messages", "bookings" */
    const char *schema_json; /* the table's schema, Iceberg JSON ({"type":"struct",…,"fields"}) */
    int schema_id;           /* 0 */
    const char *part_name;   /* the partition field's name ("user", "room_id", "event_id") */
    int part_source_id;      /* the schema field it is the identity of (1) */
    int part_field_id;       /* 1000 */
} st_ice_table_t;

/* ---- a kind's table (kinds.h: st_kind_t.table) ---- */
/* The most tables the kinds may register. */
#define ST_TABLES_MAX 8
/* One Iceberg table of the tier, as the kind whose objects it holds defines it in its own folder
 * (static, never freed). The tables are the kinds' tables in ST_KINDS order, and a table's index in
 * that order is stored (the hot store's "\0tables" provenance keys): a new table kind goes after
 * the others. */
typedef struct st_table_def {
    st_ice_table_t ice;
    char tag;                 /* the tier's owner tag of its objects (st_tier_owner), unique */
    int last_column_id;       /* the schema's highest field id */
    const char *name_mapping; /* schema.name-mapping.default (JSON text) */
    /* The top-level columns that keep no metrics at all (Iceberg's metrics mode "none"; NULL
     * ends the list): free text and user ids, whose bounds would copy them into metadata (SPEC v5
     * §5.1). Every other string keeps counts only and every other primitive its bounds too
     * (src/tables/metrics.c). */
    const char *const *metrics_none;
} st_table_def_t;
/* The registered tables (src/tables/registry.c): how many, and the i-th (NULL: i >= that). Derived
 * from the kinds' list, nothing stored: any thread. */
size_t st_tables_n(void);
const st_table_def_t *st_table_def(size_t i);

enum { ST_ICE_EXISTING = 0, ST_ICE_ADDED = 1, ST_ICE_DELETED = 2 };
enum { ST_ICE_DATA = 0, ST_ICE_POS_DELETES = 1 };

/* One manifest entry: a data or delete file. snapshot_id, data_seq and file_seq < 0 are written
 * as null: an ADDED entry inherits them from the manifest list's entry (Iceberg's
 * "sequence number inheritance"), so a manifest may be written before its snapshot's sequence
 * number is known; EXISTING and DELETED entries must carry them. */
typedef struct {
    int status;          /* ST_ICE_* (strata writes no DELETED entries: SPEC v5 §5.1 erasure) */
    int64_t snapshot_id; /* the snapshot that added the file */
    int64_t data_seq;    /* the data sequence number it was added with */
    int64_t file_seq;    /* its file sequence number */
    int content;         /* ST_ICE_DATA or ST_ICE_POS_DELETES (the manifest's content decides:
                          * st_ice_manifest writes its own content argument, not this) */
    const char *path;    /* absolute URI (file:///…, s3://bucket/…), borrowed */
    const char *part;    /* the partition value (NULL: null), borrowed; UTF-8 */
    size_t part_len;
    int64_t records;
    int64_t size; /* bytes of the file */
    /* The entry's column metrics as Avro values (st_tables_file_metrics, src/tables/metrics.c):
     * value_counts, null_value_counts, lower_bounds and upper_bounds, each a union null/array in
     * the manifest schema's order; NULL: four nulls (no metrics). Borrowed, or owned by the set
     * when read back. */
    const uint8_t *metrics;
    size_t metrics_len;
} st_ice_file_t;

/* A manifest file (Avro) of n entries, all data or all position deletes (content), appended to
 * out. Iceberg's manifest_entry schema with field ids; header metadata "schema", "schema-id",
 * "partition-spec", "partition-spec-id", "format-version" "2", "content" "data"/"deletes". No
 * column bounds are written but an entry's metrics (text is given none, SPEC v5 §5.1). ST_EINVAL
 * for another content (out untouched); ST_ENOMEM/ST_EIO as st_avro_finish (drop out's new bytes).
 */
int st_ice_manifest(st_buf_t *out, const st_ice_table_t *t, int content, const st_ice_file_t *f,
                    size_t n, bool deflate);

/* One manifest as a manifest list names it. */
typedef struct {
    const char *path; /* absolute URI, borrowed */
    int64_t length;   /* bytes */
    int content;      /* ST_ICE_DATA or ST_ICE_POS_DELETES */
    int64_t seq, min_seq;
    int64_t added_snapshot_id;
    int32_t added_files, existing_files, deleted_files;
    int64_t added_rows, existing_rows, deleted_rows;
    /* the partition field's summary: lowest and highest value (binary, as Iceberg's
     * single-value serialization of a string: its UTF-8 bytes); borrowed */
    const char *lower, *upper;
    size_t lower_len, upper_len;
} st_ice_mfile_t;

/* A manifest list (Avro) of n manifests for snapshot snapshot_id (parent: -1 for none) at
 * sequence number seq, appended to out. Header metadata "snapshot-id", "parent-snapshot-id"
 * ("null" for none), "sequence-number", "format-version" "2". Every manifest gets one partition
 * summary (contains_null false, contains_nan null, the bounds given, NULL ones null) and
 * partition_spec_id 0. ST_EINVAL for a manifest's content neither ST_ICE_DATA nor
 * ST_ICE_POS_DELETES (out untouched); ST_ENOMEM/ST_EIO as st_avro_finish. */
int st_ice_manifest_list(st_buf_t *out, int64_t snapshot_id, int64_t parent, int64_t seq,
                         const st_ice_mfile_t *m, size_t n, bool deflate);

/* ---- reading them back (manifest_read.c) ---- */
/* Files written with strata's own schemas (the header's avro.schema is checked: ST_ENOTIMPL for
 * another writer's schema), through the strict reader above (ST_EINVAL for anything malformed). */
/* path, lower and upper: NUL-terminated copies owned by the list */
typedef ST_VEC(st_ice_mfile_t) st_ice_mlist_t;
/* *out is owned (st_ice_mlist_free) on ST_OK; empty on failure. */
int st_ice_manifest_list_read(st_ice_mlist_t *out, const void *data, size_t len);
void st_ice_mlist_free(st_ice_mlist_t *l);

typedef struct {
    st_ice_file_t *v; /* path and part: NUL-terminated copies owned by the set (part NULL: null;
                       * snapshot_id and sequence numbers -1: null, inherited) */
    size_t n, cap;    /* v, n, cap: an ST_VEC's (st_vec_push grows it) */
    int content;      /* the header's "content": ST_ICE_DATA or ST_ICE_POS_DELETES */
} st_ice_entries_t;
int st_ice_manifest_read(st_ice_entries_t *out, const void *data, size_t len);
void st_ice_entries_free(st_ice_entries_t *e);

#endif
