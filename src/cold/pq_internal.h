/* SPDX-License-Identifier: MIT */
/*
 * The Parquet codec's internals shared by its files: a schema flattened into Parquet's schema
 * elements (pq_schema.c), the level machinery that turns values into repetition/definition
 * levels and back (pq_levels.c), the writer (parquet_write.c) and the reader (parquet_read.c).
 */
#ifndef STRATA_COLD_PQ_INTERNAL_H
#define STRATA_COLD_PQ_INTERNAL_H

#include "strata/parquet.h"
#include "thrift.h"

enum { ST_PQN_LEAF, ST_PQN_STRUCT, ST_PQN_LIST, ST_PQN_LISTREP };
enum { ST_PQ_REPEATED = 2 };

/* One schema element. A LIST field becomes two nodes: the LIST group and its repeated "list"
 * group (ST_PQN_LISTREP), whose one child is the element. */
typedef struct {
    const char *name;
    int kind, type, rep, logical; /* rep: -1 for the root */
    int id;                       /* field_id, 0: none (the root, a LIST's "list" group) */
    bool added;    /* an ST_PQ_ADDED field, or a node under one: files written before may lack it */
    bool missing;  /* a node of an ST_PQ_ADDED field the file being parsed lacks */
    bool narrowed; /* an OPTIONAL leaf the file being parsed declares REQUIRED (written before) */
    unsigned hints;
    int parent, first, next, nchildren; /* node indices, -1: none */
    uint8_t def;                        /* definition level when this node is present */
    uint8_t repl;     /* repetition level of its innermost enclosing repeated group (or itself) */
    int leaf;         /* a leaf's column index */
    int leaf0, nleaf; /* the leaves under it: [leaf0, leaf0 + nleaf) */
    int depth;
} st_pq_node_t;

struct st_pq_layout {
    st_pq_node_t nodes[ST_PQ_MAX_NODES]; /* [0]: the root */
    int nnodes;
    int leaf_node[ST_PQ_MAX_NODES];
    int nleaves;
    int sort_leaf, key_leaf;
    int nmissing;     /* leaves marked missing (the file has nleaves - nmissing column chunks) */
    int nmissing_top; /* top-level fields marked missing (the root's children the file lacks) */
};

/* Flattens s; ST_EINVAL if it is not supported. Free with free(). */
int st__pq_layout(const st_pq_schema_t *s, st_pq_layout_t **out);
/* FileMetaData field 2: the schema elements. */
void st__pq_schema_write(st_tw_t *w, const st_pq_layout_t *l);
/* Reads field 2's list and checks it describes l (names, types, repetition, children, and
 * field ids where both the file and l have one; the names where the ids do not match), marking
 * the ST_PQ_ADDED fields the file lacks missing (a group's every node) and the OPTIONAL leaves it
 * declares REQUIRED narrowed. */
bool st__pq_schema_check(st_tr_t *r, st_pq_layout_t *l);

/* The footer's one walker of each thrift struct, shared by the reader (st_pq_parse_footer,
 * against a schema) and the statistics by field id (st_pq_top_stats, pq_stats.c, any schema). */
/* One SchemaElement (pq_schema.c); name borrowed from the footer; -1: a field not there (type,
 * rep), 0 (children, fid). False when r is not at a struct. */
typedef struct {
    int64_t type, rep, children, fid;
    const uint8_t *name;
    size_t nl;
} st_pq_elem_t;
bool st__pq_elem(st_tr_t *r, st_pq_elem_t *e);
/* One ColumnChunk's ColumnMetaData and its Statistics (parquet_read.c); min and max borrowed from
 * the footer; has_nulls: the statistics said null_count. */
typedef struct {
    int type, codec;
    int64_t values, nulls;
    uint64_t offset, size, dict_offset;
    const uint8_t *min, *max;
    size_t min_len, max_len;
    bool dict, has_nulls;
} st_pq_colmeta_t;
void st__pq_column_chunk(st_tr_t *r, st_pq_colmeta_t *c);
/* Leaf's path in the schema (names borrowed from l) into names[ST_PQ_MAX_DEPTH]; its length. */
int st__pq_path(const st_pq_layout_t *l, int leaf, const char **names);

/* ---- levels (pq_levels.c) ---- */
struct st_pq_rec {
    const st_pq_layout_t *lay;
    st_pq_column_t *cols; /* per leaf: the row group's entries so far */
    uint8_t *next_rep;    /* per leaf: the repetition level of its next entry */
    int node[ST_PQ_MAX_DEPTH + 1], child[ST_PQ_MAX_DEPTH + 1];
    size_t left[ST_PQ_MAX_DEPTH + 1], k[ST_PQ_MAX_DEPTH + 1];
    int top;
    bool bad;
};

void st__pq_rec_init(st_pq_rec_t *r, const st_pq_layout_t *l);
void st__pq_rec_free(st_pq_rec_t *r);
void st__pq_rec_row_begin(st_pq_rec_t *r);
/* Whether the row gave exactly the schema's values. */
bool st__pq_rec_row_end(st_pq_rec_t *r);
/* Drops entries [0, from[c]) of every column, keeping the rest at the front. */
void st__pq_rec_shift(st_pq_rec_t *r, const size_t *from);

#endif
