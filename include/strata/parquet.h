/* SPDX-License-Identifier: MIT */
/*
 * parquet: the cold tier's schema-driven Parquet codec. A data kind describes its columns once
 * (st_pq_schema_t: a tree of fields, nested STRUCTs and LISTs included) and hands rows to the
 * writer one value at a time in schema order (st_pq_put_*); the writer turns them into
 * repetition and definition levels, pages (PLAIN or dictionary, ZSTD, CRC-32), min/max statistics
 * and the footer. The reader parses a footer against the same schema, decodes a row group's
 * column chunks, and gives the rows back through a cursor that mirrors the writer
 * (st_pq_get_*). The kind's own row struct never enters here.
 *
 * LISTs use the standard three-level form: a LIST field named x with element e is written as
 * `<rep> group x (LIST) { repeated group list { <rep> e } }`, which DuckDB, arrow-rs, pyarrow and
 * hyparquet read as a list. Plain blocking functions, safe on any thread.
 */
#ifndef STRATA_PARQUET_H
#define STRATA_PARQUET_H

#include "strata/core.h"

/* Physical types (Parquet's own numbers), and ST_PQ_GROUP for a STRUCT or LIST field. */
enum {
    ST_PQ_BOOLEAN = 0,
    ST_PQ_INT32 = 1,
    ST_PQ_INT64 = 2,
    ST_PQ_BYTE_ARRAY = 6,
    ST_PQ_GROUP = 99
};
/* Repetition of a field. Repeated fields are written as LISTs (logical ST_PQ_LIST). */
enum { ST_PQ_REQUIRED = 0, ST_PQ_OPTIONAL = 1 };
/* Logical types: STRING and JSON annotate BYTE_ARRAY, TIMESTAMP_US (UTC, µs) INT64; a GROUP is
 * a STRUCT (ST_PQ_NONE) of its children or a LIST (ST_PQ_LIST) of its one child, the element. */
enum { ST_PQ_NONE = 0, ST_PQ_STRING, ST_PQ_TIMESTAMP_US, ST_PQ_JSON, ST_PQ_LIST };
/* Per-field hints: keep min/max statistics; try a dictionary (BYTE_ARRAY with few distinct
 * values per row group); ADDED: a top-level field (a leaf, or a STRUCT or LIST group) that files
 * written before it lack (such a file's footer still matches the schema; the chunks of the
 * field's leaves then have length 0 and its value reads as null, whatever its repetition: a
 * group's getter returns false, as for a null). */
enum { ST_PQ_STATS = 1, ST_PQ_DICT = 2, ST_PQ_ADDED = 4 };

#define ST_PQ_MAX_LEVEL 15  /* deepest repetition or definition level */
#define ST_PQ_MAX_DEPTH 32  /* nested groups */
#define ST_PQ_MAX_NODES 256 /* schema elements, LISTs' inner groups included */

typedef struct st_pq_field st_pq_field_t;
struct st_pq_field {
    const char *name;
    int type;    /* ST_PQ_INT64, …, or ST_PQ_GROUP */
    int rep;     /* ST_PQ_REQUIRED or ST_PQ_OPTIONAL */
    int logical; /* ST_PQ_NONE, ST_PQ_STRING, … */
    unsigned hints;
    const st_pq_field_t *children; /* a GROUP's fields (a LIST: exactly one, its element) */
    size_t nchildren;
    int id; /* the Iceberg field id, written as the element's field_id (0: none) */
};

/* A file's schema. Leaves (column chunks) are numbered in schema order, depth first. */
typedef struct {
    const st_pq_field_t *fields; /* the top-level columns */
    size_t nfields;
    int sort_leaf; /* the leaf each row group is sorted by, ascending (-1: none recorded) */
    int key_leaf;  /* a top-level REQUIRED leaf: consecutive rows with equal values share a row
                      group, and a new value starts the next (-1: cut by row count only) */
} st_pq_schema_t;

/* Leaves of a schema (its column chunks); -1 when the schema is not one this codec supports
 * (too deep, a LIST without exactly one element, a key that is not a top-level required leaf). */
int st_pq_schema_leaves(const st_pq_schema_t *s);

/* ---- writing ---- */
typedef struct st_pq_rec st_pq_rec_t;
/* Gives row i: calls st_pq_put_* once for every top-level field, in schema order. */
typedef void (*st_pq_row_fn)(void *arg, size_t i, st_pq_rec_t *r);

typedef struct {
    const st_pq_schema_t *schema; /* borrowed for the call */
    size_t nrows;
    st_pq_row_fn row;
    void *arg;
    size_t group_rows; /* most rows in a row group (0: no limit but the key) */
    int zstd_level;
} st_pq_write_t;

/* Encodes a whole file and appends it to out. ST_EINVAL (out unchanged) when the schema is not
 * supported or a row's values do not follow the schema. */
int st_pq_write(const st_pq_write_t *w, st_buf_t *out);

/* The next value of the row. A string is borrowed until st_pq_write returns. */
void st_pq_put_i64(st_pq_rec_t *r, int64_t v);               /* INT64 */
void st_pq_put_i32(st_pq_rec_t *r, int32_t v);               /* INT32 */
void st_pq_put_bool(st_pq_rec_t *r, bool v);                 /* BOOLEAN */
void st_pq_put_str(st_pq_rec_t *r, const void *p, size_t n); /* BYTE_ARRAY */
void st_pq_put_null(st_pq_rec_t *r);                         /* any OPTIONAL field */
void st_pq_put_struct(st_pq_rec_t *r);         /* a STRUCT: its fields' values follow */
void st_pq_put_list(st_pq_rec_t *r, size_t n); /* a LIST: n element values follow */

/* ---- reading ---- */
/* One column chunk as the footer describes it. min/max: PLAIN bytes in the type's order, NULL if
 * absent; they point into the st_pq_file_t's memory. */
typedef struct {
    uint64_t offset, length; /* the chunk's bytes, dictionary page included */
    int64_t values, nulls;
    const uint8_t *min, *max;
    size_t min_len, max_len;
    bool required; /* the file declares this OPTIONAL leaf REQUIRED (written before the schema
                      made it OPTIONAL): its entries carry one definition level less */
} st_pq_chunk_t;

typedef struct {
    int64_t rows;
    uint64_t offset, length; /* the byte range of all its column chunks */
    st_pq_chunk_t *chunks;   /* one per leaf, into the file's memory */
} st_pq_rowgroup_t;

typedef struct {
    st_pq_rowgroup_t *groups;
    size_t ngroups, nleaves;
    int64_t rows;
    void *mem;    /* owned: chunks and statistics */
    size_t bytes; /* what mem holds (one allocation), for a cache's byte budget */
} st_pq_file_t;

/* The last 8 bytes of a file give the footer's length; ST_EINVAL if they are not Parquet's. */
int st_pq_footer_len(const uint8_t tail[8], uint64_t file_size, uint32_t *len);
/* Parses a footer (the len bytes before the tail) of a file of file_size bytes written with
 * schema s. Another schema, or a corrupt footer, is ST_EINVAL with nothing allocated. Field ids
 * need not be there (files written before them): an element's field_id only has to agree with
 * the field's id when both are set, and when they do, the names may differ (Iceberg matches
 * columns by id). A file may lack s's ST_PQ_ADDED fields, and may declare an OPTIONAL leaf of s
 * REQUIRED (a file written before it became OPTIONAL: its chunk's required is set, and its
 * values read as always present). Chunks are per leaf of s, a missing
 * leaf's all zero. Free with st_pq_file_free. */
int st_pq_parse_footer(const st_pq_schema_t *s, const uint8_t *p, size_t len, uint64_t file_size,
                       st_pq_file_t *out);
void st_pq_file_free(st_pq_file_t *f);

/* One top-level leaf column of a file (pq_stats.c): not under a group, so one entry per row. */
typedef struct {
    int id;         /* its field_id (columns without one are left out) */
    int type;       /* its physical type (ST_PQ_INT64, …) */
    int64_t values; /* entries over the row groups: the rows, nulls included */
    int64_t nulls;  /* nulls over the row groups; -1: a row group does not say */
    bool bounds;    /* min and max hold the lowest and highest value of every row group that has
                       one (PLAIN bytes: 8 for INT64, 4 for INT32, 1 for BOOLEAN); false: a row
                       group with values has none, or another type */
    uint8_t min[8], max[8];
    size_t len; /* the bytes of min and max */
} st_pq_colstat_t;
/* The top-level leaf columns with a field id of the footer p[0..len) (the len bytes before a
 * file's 8-byte tail; any schema, no kind's needed), in schema order, into out[0..max): *n of
 * them. ST_EINVAL (*n 0) when it is not a footer this reads. */
int st_pq_top_stats(const uint8_t *p, size_t len, st_pq_colstat_t *out, size_t max, size_t *n);

/* A decoded row group: per leaf, one entry per repetition/definition level slot. The entries'
 * parallel arrays are ST_VECs of n items each, or empty (v NULL) where the leaf has no such
 * levels or values of another type. */
typedef struct {
    size_t n;
    ST_VEC(uint8_t) rep, def;
    ST_VEC(int64_t) iv; /* INT64 / INT32 / BOOLEAN value per entry (0 when null) */
    /* BYTE_ARRAY value per entry (NULL when null), into the table's memory */
    ST_VEC(const char *) sv;
    ST_VEC(uint32_t) sl;
    bool absent; /* a leaf of an ST_PQ_ADDED field the file lacks: one null per row, no arrays */
} st_pq_column_t;

typedef struct st_pq_layout st_pq_layout_t;
typedef struct {
    int64_t rows;
    st_pq_column_t *cols;
    size_t ncols;
    st_pq_layout_t *lay; /* owned */
    ST_VEC(void *) mem;  /* owned pages that sv points into; st_pq_table_free */
    size_t page_bytes;   /* the pages in mem (what a reader taking mem takes) */
    size_t bytes;        /* all its heap: pages, level and value arrays, layout (for a cache) */
} st_pq_table_t;

/* Decodes row group g from its bytes [g->offset, g->offset + g->length); pages' CRCs are
 * checked. ST_EINVAL for anything malformed, with nothing allocated. */
int st_pq_read_group(const st_pq_schema_t *s, const st_pq_rowgroup_t *g, const uint8_t *bytes,
                     size_t len, st_pq_table_t *out);
void st_pq_table_free(st_pq_table_t *t);

/* A cursor over a table's rows: st_pq_cur_next starts each row, then the st_pq_get_* calls take
 * its values in the order they were put. Levels that contradict the schema turn ok false (and
 * every later value null/0); check st_pq_cur_done at the end. Borrows the table. */
typedef struct {
    const st_pq_table_t *t;
    size_t *pos;     /* owned: per leaf, the next entry */
    uint8_t *expect; /* owned: per leaf, the repetition level its next entry must have */
    int node[ST_PQ_MAX_DEPTH + 1], child[ST_PQ_MAX_DEPTH + 1]; /* open STRUCTs and LISTs */
    size_t left[ST_PQ_MAX_DEPTH + 1], k[ST_PQ_MAX_DEPTH + 1];
    int top;
    int64_t row;
    bool ok;
} st_pq_cur_t;

void st_pq_cur_init(st_pq_cur_t *c, const st_pq_table_t *t);
/* Starts the next row: false after the last (or on an error). Call it until it returns false:
 * that last call checks every column ended with the last row. */
bool st_pq_cur_next(st_pq_cur_t *c);
/* Values of the row in schema order; a getter of an OPTIONAL field returns false for null. */
bool st_pq_get_i64(st_pq_cur_t *c, int64_t *v);                /* INT64, INT32 and BOOLEAN */
bool st_pq_get_str(st_pq_cur_t *c, const char **p, size_t *n); /* borrowed from the table */
bool st_pq_get_struct(st_pq_cur_t *c);
bool st_pq_get_list(st_pq_cur_t *c, size_t *n);
/* ST_OK when every row was read whole and the levels were consistent; frees the cursor. */
int st_pq_cur_done(st_pq_cur_t *c);

#endif
