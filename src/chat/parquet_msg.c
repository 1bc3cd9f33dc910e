/* SPDX-License-Identifier: MIT */
/*
 * The message files (SPEC §5): the owner column and chat's ten as one instance of the codec,
 * and the row type, footer summary and row-group decoding chat reads them with, straight or
 * through the tier's cold cache (st_chat_msg_view). Files written before the owner column, the
 * field ids, edited_at and deleted_at or edit_history (SPEC v5 §5.1) read alike (tests/chat pins
 * the files' bytes), and so do those written while `from` and `content` were REQUIRED (they are
 * OPTIONAL since: a tombstone's content and metadata and an erased author's from are null, never
 * "").
 */
#include "strata/chatrows.h"
#include "strata/chat.h"

#include <stdlib.h>
#include <string.h>

/* edited_at and deleted_at (SPEC v5 §5.1): null unless the message was edited / is a tombstone;
 * files written before them lack them (ST_PQ_ADDED) and read as null. */
#define ST__MSG_TIMES                                                                              \
    {"edited_at", ST_PQ_INT64, ST_PQ_OPTIONAL, ST_PQ_TIMESTAMP_US, ST_PQ_ADDED, NULL, 0, 9},       \
    {                                                                                              \
        "deleted_at", ST_PQ_INT64, ST_PQ_OPTIONAL, ST_PQ_TIMESTAMP_US, ST_PQ_ADDED, NULL, 0, 10    \
    }
/* edit_history (SPEC v5 §5.1, field ids 11 to 15 as the tables' schema has them): a message's
 * earlier versions, oldest first, in Parquet's three-level LIST of a STRUCT; null for a message
 * never edited, empty for a tombstone; files written before it lack it (ST_PQ_ADDED). */
static const st_pq_field_t st__hist_fields[] = {
    {"content", ST_PQ_BYTE_ARRAY, ST_PQ_OPTIONAL, ST_PQ_STRING, 0, NULL, 0, 13},
    {"metadata", ST_PQ_BYTE_ARRAY, ST_PQ_OPTIONAL, ST_PQ_JSON, 0, NULL, 0, 14},
    {"edited_at", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_TIMESTAMP_US, 0, NULL, 0, 15},
};
static const st_pq_field_t st__hist_element = {
    "element", ST_PQ_GROUP, ST_PQ_REQUIRED, ST_PQ_NONE, 0, st__hist_fields, 3, 12};
#define ST__MSG_HISTORY                                                                            \
    {                                                                                              \
        "edit_history", ST_PQ_GROUP, ST_PQ_OPTIONAL, ST_PQ_LIST, ST_PQ_ADDED, &st__hist_element,   \
            1, 11                                                                                  \
    }
/* The owner column first (SPEC v5 §5.1): a user's name or a room's id, the same in every row;
 * files written before it lack it (ST_PQ_ADDED). A user's and a room's files differ only in its
 * name. */
static const st_pq_field_t st__msg_fields[ST_PQ_MSG_FIELDS] = {
    {"user", ST_PQ_BYTE_ARRAY, ST_PQ_REQUIRED, ST_PQ_STRING, ST_PQ_STATS | ST_PQ_DICT | ST_PQ_ADDED,
     NULL, 0, 1},
    {"msg_id", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_NONE, ST_PQ_STATS, NULL, 0, 2},
    {"conversation_id", ST_PQ_BYTE_ARRAY, ST_PQ_REQUIRED, ST_PQ_STRING, ST_PQ_STATS | ST_PQ_DICT,
     NULL, 0, 3},
    {"from", ST_PQ_BYTE_ARRAY, ST_PQ_OPTIONAL, ST_PQ_STRING, ST_PQ_STATS | ST_PQ_DICT, NULL, 0, 4},
    {"timestamp", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_TIMESTAMP_US, ST_PQ_STATS, NULL, 0, 5},
    {"seq", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_NONE, ST_PQ_STATS, NULL, 0, 6},
    {"content", ST_PQ_BYTE_ARRAY, ST_PQ_OPTIONAL, ST_PQ_STRING, 0, NULL, 0, 7},
    {"metadata", ST_PQ_BYTE_ARRAY, ST_PQ_OPTIONAL, ST_PQ_JSON, 0, NULL, 0, 8},
    ST__MSG_TIMES,
    ST__MSG_HISTORY,
};
static const st_pq_field_t st__room_fields[ST_PQ_MSG_FIELDS] = {
    {"room_id", ST_PQ_BYTE_ARRAY, ST_PQ_REQUIRED, ST_PQ_STRING,
     ST_PQ_STATS | ST_PQ_DICT | ST_PQ_ADDED, NULL, 0, 1},
    {"msg_id", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_NONE, ST_PQ_STATS, NULL, 0, 2},
    {"conversation_id", ST_PQ_BYTE_ARRAY, ST_PQ_REQUIRED, ST_PQ_STRING, ST_PQ_STATS | ST_PQ_DICT,
     NULL, 0, 3},
    {"from", ST_PQ_BYTE_ARRAY, ST_PQ_OPTIONAL, ST_PQ_STRING, ST_PQ_STATS | ST_PQ_DICT, NULL, 0, 4},
    {"timestamp", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_TIMESTAMP_US, ST_PQ_STATS, NULL, 0, 5},
    {"seq", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_NONE, ST_PQ_STATS, NULL, 0, 6},
    {"content", ST_PQ_BYTE_ARRAY, ST_PQ_OPTIONAL, ST_PQ_STRING, 0, NULL, 0, 7},
    {"metadata", ST_PQ_BYTE_ARRAY, ST_PQ_OPTIONAL, ST_PQ_JSON, 0, NULL, 0, 8},
    ST__MSG_TIMES,
    ST__MSG_HISTORY,
};

/* Sorted by msg_id; one row group per conversation. */
const st_pq_schema_t st_pq_msg_schema = {st__msg_fields, ST_PQ_MSG_FIELDS, 1, 2};
const st_pq_schema_t st_pq_room_schema = {st__room_fields, ST_PQ_MSG_FIELDS, 1, 2};

const st_pq_schema_t *st_pq_msg_schema_of(const st_owner_t *o)
{
    return o->kind == ST_OWNER_ROOM ? &st_pq_room_schema : &st_pq_msg_schema;
}

typedef struct {
    const st_msgrow_t *rows;
    const char *owner;
    size_t ol;
} st_msgenc_t;

/* A nullable string column's value (NULL: null). */
static void st__msg_put(st_pq_rec_t *r, const char *p, uint32_t n)
{
    if (p)
        st_pq_put_str(r, p, n);
    else
        st_pq_put_null(r);
}

/* A nullable time column's value (0: null). */
static void st__msg_time(st_pq_rec_t *r, int64_t t)
{
    if (t)
        st_pq_put_i64(r, t);
    else
        st_pq_put_null(r);
}

/* edit_history's value: null, or a list of its versions. */
static void st__msg_hist(st_pq_rec_t *r, const st_msgrow_t *m)
{
    if (!m->has_hist) {
        st_pq_put_null(r);
        return;
    }
    st_pq_put_list(r, m->nhist);
    for (uint32_t k = 0; k < m->nhist; k++) {
        const st_msgedit_t *e = &m->hist[k];
        st_pq_put_struct(r);
        st__msg_put(r, e->content, e->content_len);
        st__msg_put(r, e->metadata, e->metadata_len);
        st_pq_put_i64(r, e->edited_at);
    }
}

static void st__msg_row(void *arg, size_t i, st_pq_rec_t *r)
{
    const st_msgenc_t *e = arg;
    const st_msgrow_t *m = e->rows + i;
    st_pq_put_str(r, e->owner, e->ol);
    st_pq_put_i64(r, (int64_t)m->msg_id);
    st_pq_put_str(r, m->conv, m->conv_len);
    st__msg_put(r, m->from, m->from_len);
    st_pq_put_i64(r, m->timestamp);
    st_pq_put_i64(r, m->seq);
    st__msg_put(r, m->content, m->content_len);
    st__msg_put(r, m->metadata, m->metadata_len);
    st__msg_time(r, m->edited_at);
    st__msg_time(r, m->deleted_at);
    st__msg_hist(r, m);
}

int st_parquet_encode(const st_msgrow_t *rows, size_t n, const st_owner_t *o, int zstd_level,
                      st_buf_t *out)
{
    st_msgenc_t e = {rows, o->id, o->len};
    st_pq_write_t w = {.schema = st_pq_msg_schema_of(o),
                       .nrows = n,
                       .row = st__msg_row,
                       .arg = &e,
                       .zstd_level = zstd_level};
    return st_pq_write(&w, out);
}

int st_parquet_footer_len(const uint8_t tail[8], uint64_t file_size, uint32_t *len)
{
    return st_pq_footer_len(tail, file_size, len);
}

static bool st__i64_stat(const st_pq_chunk_t *c, int64_t *lo, int64_t *hi)
{
    if (!c->min || !c->max || c->min_len != 8 || c->max_len != 8) return false;
    uint64_t a = 0, b = 0;
    for (int i = 7; i >= 0; i--) {
        a = a << 8 | c->min[i];
        b = b << 8 | c->max[i];
    }
    *lo = (int64_t)a;
    *hi = (int64_t)b;
    return true;
}

/* A row group of a message file: pruning needs exact msg_id bounds and the conversation. */
static int st__msg_group(const st_pq_rowgroup_t *G, st_pq_group_t *g, st_buf_t *strings)
{
    const st_pq_chunk_t *c = G->chunks;
    int64_t lo, hi;
    if (!st__i64_stat(&c[1], &lo, &hi) || !c[2].min || !c[2].max || c[2].min_len != c[2].max_len ||
        memcmp(c[2].min, c[2].max, c[2].min_len) != 0 || c[2].min_len > ST_NAME_MAX)
        return ST_EINVAL;
    g->min_id = (uint64_t)lo;
    g->max_id = (uint64_t)hi;
    st__i64_stat(&c[4], &g->min_ts, &g->max_ts);
    st__i64_stat(&c[5], &g->min_seq, &g->max_seq);
    g->rows = G->rows;
    g->offset = G->offset;
    g->length = G->length;
    for (int k = 0; k < ST_PQ_COLUMNS; k++) {
        g->col_offset[k] = c[k].offset;
        g->col_length[k] = c[k].length;
        g->col_required[k] = c[k].required;
    }
    g->conv = (const char *)(uintptr_t)strings->len; /* an offset until strings stops moving */
    g->conv_len = c[2].min_len;
    st_buf_append(strings, c[2].min, c[2].min_len);
    return g->min_id <= g->max_id ? ST_OK : ST_EINVAL;
}

int st_parquet_meta_of(const st_pq_file_t *f, st_pq_meta_t *out)
{
    memset(out, 0, sizeof *out);
    st_buf_t strings = {0};
    int rc = ST_OK;
    out->groups = st_calloc(f->ngroups ? f->ngroups : 1, sizeof *out->groups);
    out->ngroups = f->ngroups;
    out->rows = f->rows;
    for (size_t i = 0; i < f->ngroups && rc == ST_OK; i++)
        rc = st__msg_group(&f->groups[i], &out->groups[i], &strings);
    if (rc != ST_OK) {
        st_buf_free(&strings);
        free(out->groups);
        memset(out, 0, sizeof *out);
        return ST_EINVAL;
    }
    st_buf_appendc(&strings, 0);
    out->strings = st_buf_steal(&strings, NULL);
    for (size_t i = 0; i < out->ngroups; i++)
        out->groups[i].conv = out->strings + (uintptr_t)out->groups[i].conv;
    return ST_OK;
}

int st_parquet_parse_footer(const uint8_t *p, size_t len, uint64_t file_size, st_pq_meta_t *out)
{
    memset(out, 0, sizeof *out);
    st_pq_file_t f;
    if (st_pq_parse_footer(&st_pq_msg_schema, p, len, file_size, &f) != ST_OK) return ST_EINVAL;
    int rc = st_parquet_meta_of(&f, out);
    st_pq_file_free(&f);
    return rc;
}

void st_parquet_meta_free(st_pq_meta_t *m)
{
    free(m->groups);
    free(m->strings);
    memset(m, 0, sizeof *m);
}

void st_parquet_rows_free(st_pq_rows_t *r)
{
    for (size_t i = 0; i < r->nmem; i++)
        free(r->mem[i]);
    free(r->mem);
    free(r->rows);
    memset(r, 0, sizeof *r);
}

static void st__msg_str(st_pq_cur_t *c, const char **p, uint32_t *len)
{
    size_t n;
    st_pq_get_str(c, p, &n);
    *len = (uint32_t)n;
}

typedef ST_VEC(st_msgedit_t) st__edits_t;

/* A row's edit_history onto all (the row's hist: its first entry's index until all stops
 * moving); the cursor at the field. */
static void st__msg_hist_get(st_pq_cur_t *c, st_msgrow_t *m, st__edits_t *all)
{
    size_t n;
    m->has_hist = st_pq_get_list(c, &n);
    m->nhist = (uint32_t)n;
    m->hist = (const st_msgedit_t *)(uintptr_t)all->n;
    for (size_t k = 0; k < n; k++) {
        st_msgedit_t e = {0};
        st_pq_get_struct(c);
        st__msg_str(c, &e.content, &e.content_len);
        st__msg_str(c, &e.metadata, &e.metadata_len);
        st_pq_get_i64(c, &e.edited_at);
        st_vec_push(all, e);
    }
}

/* The rows of a decoded row group, their strings taken from t (whose memory moves to out, with
 * the rows' edit_history entries). */
static int st__rows_of(st_pq_table_t *tp, st_pq_rows_t *out)
{
    st_pq_table_t t = *tp;
    size_t n = (size_t)t.rows;
    out->rows = st_calloc(n, sizeof *out->rows);
    out->n = n;
    st__edits_t all = {0};
    st_pq_cur_t c;
    st_pq_cur_init(&c, &t);
    for (size_t i = 0; st_pq_cur_next(&c); i++) { /* the cursor stops after t.rows */
        st_msgrow_t *m = &out->rows[i];
        int64_t v;
        const char *owner; /* the object's owner (null in files written before it): not a row's */
        size_t ol;
        st_pq_get_str(&c, &owner, &ol);
        st_pq_get_i64(&c, &v);
        m->msg_id = (uint64_t)v;
        st__msg_str(&c, &m->conv, &m->conv_len);
        st__msg_str(&c, &m->from, &m->from_len);
        st_pq_get_i64(&c, &m->timestamp);
        st_pq_get_i64(&c, &m->seq);
        st__msg_str(&c, &m->content, &m->content_len);
        st__msg_str(&c, &m->metadata, &m->metadata_len);
        if (!st_pq_get_i64(&c, &m->edited_at)) m->edited_at = 0; /* null */
        if (!st_pq_get_i64(&c, &m->deleted_at)) m->deleted_at = 0;
        st__msg_hist_get(&c, m, &all);
    }
    int rc = st_pq_cur_done(&c);
    for (size_t i = 0; i < n; i++) /* the entries stopped moving: indices become pointers */
        out->rows[i].hist = all.v ? all.v + (uintptr_t)out->rows[i].hist : NULL;
    if (all.v) st_vec_push(&t.mem, (void *)all.v); /* owned by out, as the pages are */
    /* the strings point into the table's pages: they move to out */
    out->mem = t.mem.v;
    out->nmem = t.mem.n;
    tp->mem.v = NULL;
    tp->mem.n = tp->mem.cap = 0;
    if (rc != ST_OK) st_parquet_rows_free(out);
    return rc;
}

/* The row group's place in its file, as the codec's reader wants it (chunks: ST_PQ_COLUMNS). */
static void st__rowgroup(const st_pq_group_t *g, st_pq_chunk_t *chunks, st_pq_rowgroup_t *G)
{
    memset(chunks, 0, ST_PQ_COLUMNS * sizeof *chunks);
    for (int k = 0; k < ST_PQ_COLUMNS; k++) {
        chunks[k].offset = g->col_offset[k];
        chunks[k].length = g->col_length[k];
        chunks[k].required = g->col_required[k];
    }
    *G = (st_pq_rowgroup_t){
        .rows = g->rows, .offset = g->offset, .length = g->length, .chunks = chunks};
}

int st_parquet_read_group(const st_pq_group_t *g, const uint8_t *bytes, size_t len,
                          st_pq_rows_t *out)
{
    memset(out, 0, sizeof *out);
    st_pq_chunk_t chunks[ST_PQ_COLUMNS];
    st_pq_rowgroup_t G;
    st__rowgroup(g, chunks, &G);
    st_pq_table_t t;
    if (st_pq_read_group(&st_pq_msg_schema, &G, bytes, len, &t) != ST_OK) return ST_EINVAL;
    int rc = st__rows_of(&t, out);
    st_pq_table_free(&t);
    return rc;
}

/* ---- the cold cache's view ---- */

static int st__view_footer(const st_pq_file_t *f, void **out, size_t *bytes)
{
    st_pq_meta_t *m = st_malloc(sizeof *m);
    if (st_parquet_meta_of(f, m) != ST_OK) {
        free(m);
        return ST_EINVAL;
    }
    /* the struct, its groups and its strings (each group's conversation, then a 0) */
    size_t b = sizeof *m + (m->ngroups ? m->ngroups : 1) * sizeof *m->groups + 1;
    for (size_t i = 0; i < m->ngroups; i++)
        b += m->groups[i].conv_len;
    *bytes = b;
    *out = m;
    return ST_OK;
}

static void st__view_footer_free(void *v)
{
    st_parquet_meta_free(v);
    free(v);
}

static void st__view_group_free(void *v)
{
    st_parquet_rows_free(v);
    free(v);
}

static int st__view_group(st_pq_table_t *t, void **out, size_t *bytes)
{
    st_pq_rows_t *r = st_calloc(1, sizeof *r);
    int rc = st__rows_of(t, r);
    for (size_t i = 1; rc == ST_OK && i < r->n; i++)
        if (r->rows[i].msg_id <= r->rows[i - 1].msg_id)
            rc = ST_EINVAL; /* reads binary-search a group: it must be sorted */
    if (rc != ST_OK) {
        st__view_group_free(r);
        return ST_EINVAL;
    }
    /* the rows, their edit_history entries, and the pages their strings point into (taken
     * from t), a heap block each */
    size_t edits = 0;
    for (size_t i = 0; i < r->n; i++)
        edits += r->rows[i].nhist;
    *bytes = sizeof *r + r->n * sizeof *r->rows + edits * sizeof(st_msgedit_t) + t->page_bytes +
             r->nmem * sizeof *r->mem + (r->nmem + 3) * 16;
    *out = r;
    return ST_OK;
}

const st_coldview_t st_chat_msg_view = {&st_pq_msg_schema, st__view_footer, st__view_footer_free,
                                        st__view_group, st__view_group_free};

int st_chat_cold_footer(st_coldcache_t *cc, const char *key, uint64_t size,
                        const st_pq_meta_t **out)
{
    const void *v;
    int rc = st_coldcache_view_footer(cc, &st_chat_msg_view, key, size, &v);
    if (rc == ST_OK) *out = v;
    return rc;
}

int st_chat_cold_footer_rows(st_coldcache_t *cc, const char *key, uint64_t size,
                             const st_pq_meta_t **out)
{
    const void *v;
    int rc = st_coldcache_view_footer_rows(cc, &st_chat_msg_view, key, size, &v);
    if (rc == ST_OK) *out = v;
    return rc;
}

int st_chat_cold_group(st_coldcache_t *cc, const char *key, size_t gi, const st_pq_group_t *g,
                       const st_pq_rows_t **out)
{
    st_pq_chunk_t chunks[ST_PQ_COLUMNS];
    st_pq_rowgroup_t G;
    st__rowgroup(g, chunks, &G);
    const void *v;
    int rc = st_coldcache_view_group(cc, &st_chat_msg_view, key, gi, &G, ST_PQ_COLUMNS, &v);
    if (rc == ST_OK) *out = v;
    return rc;
}
