/* SPDX-License-Identifier: MIT */
/*
 * Parquet writer for any schema st_pq_schema_t describes. Layout: "PAR1", then per row group one
 * column chunk per leaf, each a series of v1 data pages (repetition and definition levels as
 * RLE runs, then PLAIN values or dictionary indices, ZSTD-compressed, pages cut near 1 MiB at a
 * row's start, each with its CRC-32), then the footer (FileMetaData in Thrift compact), its
 * length, "PAR1". Column chunks carry min/max statistics in type-defined order where the schema
 * asks, so any reader can prune row groups. The kind's values arrive through pq_levels.c.
 */
#include "pq_internal.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#define ST__PAGE_TARGET (1u << 20)
#define ST__DICT_MAX    256 /* distinct values beyond which a chunk stays PLAIN */

enum { ST__ENC_PLAIN = 0, ST__ENC_RLE = 3, ST__ENC_RLE_DICT = 8 };
enum { ST__CODEC_ZSTD = 6 };

/* What the footer needs to know about one column chunk. */
typedef struct {
    uint64_t offset, data_offset, compressed, uncompressed;
    bool dict;
    int64_t values, nulls;
    bool has_minmax;
    st_buf_t min, max;
} st_chunk_t;

/* The entries of one leaf in one row group, and what the leaf is. */
typedef struct {
    const st_pq_node_t *leaf;
    const st_pq_column_t *col;
    size_t n;
} st_colview_t;

static void st__le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void st__le(st_buf_t *b, uint64_t v, int bytes)
{
    uint8_t t[8];
    for (int i = 0; i < bytes; i++)
        t[i] = (uint8_t)(v >> (8 * i));
    st_buf_append(b, t, (size_t)bytes);
}

/* Byte-wise unsigned order: the type-defined order of UTF8/JSON strings. */
static int st__bytes_cmp(const void *a, size_t al, const void *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

static int64_t st__rdle(const st_buf_t *b)
{
    uint64_t v = 0;
    for (size_t i = b->len; i-- > 0;)
        v = v << 8 | (uint8_t)b->data[i];
    return b->len == 4 ? (int64_t)(int32_t)v : (int64_t)v;
}

/* Widens the chunk's min/max by entry i (present). */
static void st__minmax(st_chunk_t *ch, const st_colview_t *v, size_t i)
{
    int t = v->leaf->type;
    if (!(v->leaf->hints & ST_PQ_STATS) || t == ST_PQ_BOOLEAN) return;
    uint8_t le[8];
    const void *p;
    size_t n;
    int lo = 0, hi = 0;
    if (t == ST_PQ_BYTE_ARRAY) {
        p = v->col->sv.v[i];
        n = v->col->sl.v[i];
        if (ch->has_minmax) {
            lo = st__bytes_cmp(p, n, ch->min.data, ch->min.len) < 0;
            hi = st__bytes_cmp(p, n, ch->max.data, ch->max.len) > 0;
        }
    } else {
        int64_t x = v->col->iv.v[i];
        n = t == ST_PQ_INT32 ? 4 : 8;
        for (size_t k = 0; k < n; k++)
            le[k] = (uint8_t)((uint64_t)x >> (8 * k));
        p = le;
        if (ch->has_minmax) {
            lo = x < st__rdle(&ch->min);
            hi = x > st__rdle(&ch->max);
        }
    }
    if (!ch->has_minmax || lo) st_buf_reset(&ch->min), st_buf_append(&ch->min, p, n);
    if (!ch->has_minmax || hi) st_buf_reset(&ch->max), st_buf_append(&ch->max, p, n);
    ch->has_minmax = true;
}

/* One RLE run of the RLE/bit-packed hybrid: ULEB128(run << 1), then the value in vbytes
 * little-endian bytes. */
static void st__rle_run(st_buf_t *page, size_t run, uint32_t value, int vbytes)
{
    uint64_t h = (uint64_t)run << 1;
    while (h >= 0x80) {
        st_buf_appendc(page, (char)(h | 0x80));
        h >>= 7;
    }
    st_buf_appendc(page, (char)h);
    for (int b = 0; b < vbytes; b++)
        st_buf_appendc(page, (char)(value >> (8 * b)));
}

/* Levels [a, b) up to max: RLE runs of the width max needs, behind a 4-byte length. */
static void st__parquet_write_levels(st_buf_t *page, const uint8_t *lv, size_t a, size_t b, int max)
{
    int bw = 0;
    while ((1 << bw) <= max)
        bw++;
    size_t at = page->len;
    uint8_t zero[4] = {0};
    st_buf_append(page, zero, 4);
    for (size_t i = a; i < b;) {
        size_t run = 1;
        while (i + run < b && lv[i + run] == lv[i])
            run++;
        st__rle_run(page, run, lv[i], (bw + 7) / 8);
        i += run;
    }
    st__le32((uint8_t *)page->data + at, (uint32_t)(page->len - at - 4));
}

/* A DATA_PAGE (v1) header, or with dict_page a DICTIONARY_PAGE header. crc: the CRC-32 (zlib's,
 * as Parquet specifies) of the page as stored, after the header: readers detect a damaged page
 * instead of decoding wrong values from it. */
static void st__parquet_write_page_header(st_buf_t *out, size_t raw, size_t packed, uint32_t crc,
                                          size_t values, int encoding, bool dict_page)
{
    st_tw_t w;
    st_tw_init(&w, out);
    st_tw_i32(&w, 1, dict_page ? 2 : 0);
    st_tw_i32(&w, 2, (int32_t)raw);
    st_tw_i32(&w, 3, (int32_t)packed);
    st_tw_i32(&w, 4, (int32_t)crc);
    st_tw_struct_begin(&w, dict_page ? 7 : 5);
    st_tw_i32(&w, 1, (int32_t)values);
    st_tw_i32(&w, 2, encoding);
    if (!dict_page) {
        st_tw_i32(&w, 3, ST__ENC_RLE);
        st_tw_i32(&w, 4, ST__ENC_RLE);
    }
    st_tw_struct_end(&w);
    st_tw_struct_end(&w);
}

/* Compresses page and appends header + payload to out. */
static int st__emit_page(st_buf_t *out, const st_buf_t *page, st_buf_t *packed, ZSTD_CCtx *z,
                         int level, size_t values, int encoding, bool dict_page, st_chunk_t *ch)
{
    size_t cap = ZSTD_compressBound(page->len);
    st_buf_reset(packed);
    st_buf_reserve(packed, cap);
    /* one compression context for the whole file: creating one per page costs more than
     * compressing a small page */
    size_t zl = ZSTD_compressCCtx(z, packed->data, cap, page->data, page->len, level);
    if (ZSTD_isError(zl) || page->len > INT32_MAX || values > INT32_MAX) return ST_EINTERNAL;
    size_t h0 = out->len;
    uint32_t crc = (uint32_t)crc32(0L, (const Bytef *)packed->data, (uInt)zl);
    st__parquet_write_page_header(out, page->len, zl, crc, values, encoding, dict_page);
    size_t hl = out->len - h0;
    st_buf_append(out, packed->data, zl);
    ch->compressed += hl + zl;
    ch->uncompressed += hl + page->len;
    return ST_OK;
}

static bool st__present(const st_colview_t *v, size_t i)
{
    return v->col->def.v[i] == v->leaf->def;
}

/* Dictionary of a string column chunk: distinct values in first-seen order and each present
 * entry's index, or false when the chunk has too many distinct values to be worth it. */
static bool st__dictionary(const st_colview_t *v, st_buf_t *dict_page, uint16_t *index,
                           size_t *ndict)
{
    const char *vals[ST__DICT_MAX];
    uint32_t lens[ST__DICT_MAX];
    size_t nd = 0, prev = ST__DICT_MAX;
    for (size_t i = 0; i < v->n; i++) {
        if (!st__present(v, i)) continue;
        uint32_t len = v->col->sl.v[i];
        const char *s = v->col->sv.v[i];
        size_t k = 0;
        /* rows of a group repeat the previous value most of the time: check it first */
        if (prev < nd && lens[prev] == len && memcmp(vals[prev], s, len) == 0)
            k = prev;
        else
            for (k = 0; k < nd && !(lens[k] == len && memcmp(vals[k], s, len) == 0); k++)
                ;
        if (k == nd) {
            if (nd == ST__DICT_MAX) return false;
            vals[nd] = s;
            lens[nd++] = len;
        }
        index[i] = (uint16_t)k;
        prev = k;
    }
    st_buf_reset(dict_page);
    for (size_t k = 0; k < nd; k++) {
        uint8_t l4[4];
        st__le32(l4, lens[k]);
        st_buf_append(dict_page, l4, 4);
        st_buf_append(dict_page, vals[k], lens[k]);
    }
    *ndict = nd;
    return true;
}

/* Dictionary indices of the present entries in [a, b): bit width byte, then RLE runs. */
static void st__dict_indices(st_buf_t *page, const st_colview_t *v, const uint16_t *index, size_t a,
                             size_t b, size_t ndict)
{
    int bw = 1;
    while (bw < 16 && (1u << bw) < ndict)
        bw++;
    st_buf_appendc(page, (char)bw);
    for (size_t i = a; i < b;) {
        if (!st__present(v, i)) {
            i++;
            continue;
        }
        size_t run = 1, j = i + 1;
        for (; j < b; j++) {
            if (!st__present(v, j)) continue;
            if (index[j] != index[i]) break;
            run++;
        }
        st__rle_run(page, run, index[i], bw > 8 ? 2 : 1);
        i = j;
    }
}

/* PLAIN values of the present entries in [a, b). */
static void st__plain(st_buf_t *page, const st_colview_t *v, size_t a, size_t b)
{
    const st_pq_column_t *col = v->col;
    uint8_t bits = 0;
    int nbits = 0;
    for (size_t i = a; i < b; i++) {
        if (!st__present(v, i)) continue;
        switch (v->leaf->type) {
        case ST_PQ_INT64:
            st__le(page, (uint64_t)col->iv.v[i], 8);
            break;
        case ST_PQ_INT32:
            st__le(page, (uint64_t)col->iv.v[i], 4);
            break;
        case ST_PQ_BOOLEAN: /* bit-packed, first value in the lowest bit */
            bits |= (uint8_t)((col->iv.v[i] != 0) << nbits);
            if (++nbits == 8) st_buf_appendc(page, (char)bits), bits = 0, nbits = 0;
            break;
        default:
            st__le(page, col->sl.v[i], 4);
            st_buf_append(page, col->sv.v[i], col->sl.v[i]);
        }
    }
    if (nbits) st_buf_appendc(page, (char)bits);
}

/* The bytes entry i adds to a page, roughly: where the page is cut. */
static size_t st__entry_bytes(const st_colview_t *v, bool dict, size_t i)
{
    if (v->leaf->type != ST_PQ_BYTE_ARRAY || dict) return 8;
    return (st__present(v, i) ? v->col->sl.v[i] : 0) + 4;
}

/* Writes one column chunk to out as pages of about ST__PAGE_TARGET bytes, each starting a row:
 * a dictionary page first when the column has few distinct values here. */
static int st__write_chunk(st_buf_t *out, const st_colview_t *v, ZSTD_CCtx *z, int level,
                           st_chunk_t *ch)
{
    const st_pq_node_t *leaf = v->leaf;
    const uint8_t *rep = leaf->repl ? v->col->rep.v : NULL;
    st_buf_t page = {0}, packed = {0};
    int rc = ST_OK;
    uint16_t *index = NULL;
    size_t ndict = 0;
    ch->offset = ch->data_offset = out->len;
    if ((leaf->hints & ST_PQ_DICT) && leaf->type == ST_PQ_BYTE_ARRAY) {
        index = st_malloc(v->n * sizeof *index);
        ch->dict = st__dictionary(v, &page, index, &ndict);
        if (ch->dict) {
            rc = st__emit_page(out, &page, &packed, z, level, ndict, ST__ENC_PLAIN, true, ch);
            ch->data_offset = out->len;
        }
    }
    for (size_t i = 0; i < v->n && rc == ST_OK;) {
        size_t start = i, bytes = 0;
        while (i < v->n && (i == start || bytes < ST__PAGE_TARGET || (rep && rep[i]))) {
            bytes += st__entry_bytes(v, ch->dict, i);
            if (st__present(v, i))
                st__minmax(ch, v, i);
            else
                ch->nulls++;
            i++;
        }
        st_buf_reset(&page);
        if (rep) st__parquet_write_levels(&page, rep, start, i, leaf->repl);
        if (leaf->def) st__parquet_write_levels(&page, v->col->def.v, start, i, leaf->def);
        if (ch->dict)
            st__dict_indices(&page, v, index, start, i, ndict);
        else
            st__plain(&page, v, start, i);
        rc = st__emit_page(out, &page, &packed, z, level, i - start,
                           ch->dict ? ST__ENC_RLE_DICT : ST__ENC_PLAIN, false, ch);
        ch->values += (int64_t)(i - start);
    }
    free(index);
    st_buf_free(&page);
    st_buf_free(&packed);
    return rc;
}

static void st__parquet_write_column_meta(st_tw_t *w, const st_pq_layout_t *l, int c,
                                          const st_chunk_t *ch)
{
    const st_pq_node_t *n = &l->nodes[l->leaf_node[c]];
    bool levels = n->def || n->repl;
    const char *path[ST_PQ_MAX_DEPTH];
    int np = st__pq_path(l, c, path);
    st_tw_elem_begin(w); /* ColumnChunk */
    st_tw_i64(w, 2, (int64_t)ch->offset);
    st_tw_struct_begin(w, 3); /* ColumnMetaData */
    st_tw_i32(w, 1, n->type);
    st_tw_list(w, 2, ST_TC_I32, 1 + (levels || ch->dict) + ch->dict);
    st_tw_elem_i32(w, ST__ENC_PLAIN);
    if (levels || ch->dict) st_tw_elem_i32(w, ST__ENC_RLE);
    if (ch->dict) st_tw_elem_i32(w, ST__ENC_RLE_DICT);
    st_tw_list(w, 3, ST_TC_BINARY, (size_t)np);
    for (int k = 0; k < np; k++)
        st_tw_elem_bin(w, path[k], strlen(path[k]));
    st_tw_i32(w, 4, ST__CODEC_ZSTD);
    st_tw_i64(w, 5, ch->values);
    st_tw_i64(w, 6, (int64_t)ch->uncompressed);
    st_tw_i64(w, 7, (int64_t)ch->compressed);
    st_tw_i64(w, 9, (int64_t)ch->data_offset);
    if (ch->dict) st_tw_i64(w, 11, (int64_t)ch->offset);
    st_tw_struct_begin(w, 12); /* Statistics */
    st_tw_i64(w, 3, ch->nulls);
    if (ch->has_minmax) {
        st_tw_bin(w, 5, ch->max.data, ch->max.len);
        st_tw_bin(w, 6, ch->min.data, ch->min.len);
    }
    st_tw_struct_end(w);
    st_tw_struct_end(w);
    st_tw_struct_end(w);
}

/* What the file being written has so far. */
typedef struct {
    const st_pq_layout_t *lay;
    ST_VEC(st_chunk_t) chunks; /* nleaves per row group */
    ST_VEC(size_t) rows;       /* per row group */
    ZSTD_CCtx *z;
    int level;
    size_t base;
} st_file_t;

/* Writes the first n[c] entries of every column as the next row group of `rows` rows. */
static int st__parquet_write_row_group(st_file_t *f, st_buf_t *out, const st_pq_rec_t *r,
                                       const size_t *n, size_t rows)
{
    int rc = ST_OK;
    size_t nl = (size_t)f->lay->nleaves;
    st_vec_reserve(&f->chunks, f->chunks.n + nl);
    st_chunk_t *cs = &f->chunks.v[f->chunks.n];
    memset(cs, 0, nl * sizeof *cs);
    f->chunks.n += nl;
    st_vec_push(&f->rows, rows);
    for (size_t c = 0; c < nl && rc == ST_OK; c++) {
        st_colview_t v = {&f->lay->nodes[f->lay->leaf_node[c]], &r->cols[c], n[c]};
        rc = st__write_chunk(out, &v, f->z, f->level, &cs[c]);
        cs[c].offset -= f->base;
        cs[c].data_offset -= f->base;
    }
    return rc;
}

static void st__footer(const st_file_t *f, st_buf_t *out, size_t nrows)
{
    const st_pq_layout_t *l = f->lay;
    size_t nl = (size_t)l->nleaves, foot = out->len;
    st_tw_t w;
    st_tw_init(&w, out);
    st_tw_i32(&w, 1, 1); /* version */
    st__pq_schema_write(&w, l);
    st_tw_i64(&w, 3, (int64_t)nrows);
    st_tw_list(&w, 4, ST_TC_STRUCT, f->rows.n);
    for (size_t g = 0; g < f->rows.n; g++) {
        const st_chunk_t *cs = &f->chunks.v[g * nl];
        uint64_t raw = 0, packed = 0;
        st_tw_elem_begin(&w); /* RowGroup */
        st_tw_list(&w, 1, ST_TC_STRUCT, nl);
        for (size_t c = 0; c < nl; c++) {
            st__parquet_write_column_meta(&w, l, (int)c, &cs[c]);
            raw += cs[c].uncompressed;
            packed += cs[c].compressed;
        }
        st_tw_i64(&w, 2, (int64_t)raw);
        st_tw_i64(&w, 3, (int64_t)f->rows.v[g]);
        if (l->sort_leaf >= 0) {
            st_tw_list(&w, 4, ST_TC_STRUCT, 1);
            st_tw_elem_begin(&w);
            st_tw_i32(&w, 1, l->sort_leaf);
            st_tw_bool(&w, 2, false); /* ascending */
            st_tw_bool(&w, 3, false);
            st_tw_struct_end(&w);
        }
        st_tw_i64(&w, 5, (int64_t)cs[0].offset);
        st_tw_i64(&w, 6, (int64_t)packed);
        st_tw_struct_end(&w);
    }
    static const char by[] = "strata";
    st_tw_bin(&w, 6, by, sizeof by - 1);
    st_tw_list(&w, 7, ST_TC_STRUCT, nl); /* TypeDefinedOrder for every column */
    for (size_t c = 0; c < nl; c++) {
        st_tw_elem_begin(&w);
        st_tw_struct_begin(&w, 1);
        st_tw_struct_end(&w);
        st_tw_struct_end(&w);
    }
    st_tw_struct_end(&w);
    uint8_t tail[8];
    st__le32(tail, (uint32_t)(out->len - foot));
    memcpy(tail + 4, "PAR1", 4);
    st_buf_append(out, tail, 8);
}

/* Whether the key of the row starting at entry `at` differs from the group's (entry 0). */
static bool st__new_key(const st_pq_rec_t *r, size_t at)
{
    const st_pq_layout_t *l = r->lay;
    if (l->key_leaf < 0 || at == 0) return false;
    const st_pq_column_t *k = &r->cols[l->key_leaf];
    if (l->nodes[l->leaf_node[l->key_leaf]].type != ST_PQ_BYTE_ARRAY)
        return k->iv.v[at] != k->iv.v[0];
    return st__bytes_cmp(k->sv.v[at], k->sl.v[at], k->sv.v[0], k->sl.v[0]) != 0;
}

int st_pq_write(const st_pq_write_t *w, st_buf_t *out)
{
    st_file_t f = {.level = w->zstd_level, .base = out->len};
    st_pq_layout_t *lay;
    if (st__pq_layout(w->schema, &lay) != ST_OK) return ST_EINVAL;
    f.lay = lay;
    f.z = ZSTD_createCCtx();
    if (!f.z) st_fatal("out of memory (zstd context)");
    st_pq_rec_t r;
    st__pq_rec_init(&r, lay);
    size_t *mark = st_calloc((size_t)lay->nleaves, sizeof *mark), rows = 0;
    int rc = ST_OK;
    st_buf_append(out, "PAR1", 4);
    for (size_t i = 0; i < w->nrows && rc == ST_OK; i++) {
        for (int c = 0; c < lay->nleaves; c++)
            mark[c] = r.cols[c].n;
        st__pq_rec_row_begin(&r);
        w->row(w->arg, i, &r);
        if (!st__pq_rec_row_end(&r)) {
            rc = ST_EINVAL;
            break;
        }
        /* the row just given starts the next group: write the group before it */
        if (rows && ((w->group_rows && rows == w->group_rows) ||
                     st__new_key(&r, lay->key_leaf >= 0 ? mark[lay->key_leaf] : 0))) {
            rc = st__parquet_write_row_group(&f, out, &r, mark, rows);
            st__pq_rec_shift(&r, mark);
            rows = 0;
        }
        rows++;
    }
    if (rc == ST_OK && rows) {
        for (int c = 0; c < lay->nleaves; c++)
            mark[c] = r.cols[c].n;
        rc = st__parquet_write_row_group(&f, out, &r, mark, rows);
    }
    if (rc == ST_OK)
        st__footer(&f, out, w->nrows);
    else
        out->len = f.base;
    for (size_t k = 0; k < f.chunks.n; k++) {
        st_buf_free(&f.chunks.v[k].min);
        st_buf_free(&f.chunks.v[k].max);
    }
    st_vec_free(&f.chunks);
    st_vec_free(&f.rows);
    st__pq_rec_free(&r);
    ZSTD_freeCCtx(f.z);
    free(mark);
    free(lay);
    return rc;
}
