/* SPDX-License-Identifier: MIT */
/*
 * Parquet writer for message rows. Layout: "PAR1", then per row group (one conversation) one
 * column chunk per column, each a series of v1 data pages (PLAIN values, definition levels for
 * the nullable metadata column, ZSTD-compressed, pages cut near 1 MiB, each with its CRC-32),
 * then the footer (FileMetaData in Thrift compact), its length, "PAR1". Column chunks carry min/max
 * statistics with type-defined order, so any reader can prune row groups by msg_id or conversation.
 */
#include "strata/cold.h"
#include "thrift.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#define ST__PAGE_TARGET (1u << 20)

enum { ST__T_INT64 = 2, ST__T_BYTE_ARRAY = 6 };
enum { ST__ENC_PLAIN = 0, ST__ENC_RLE = 3, ST__ENC_RLE_DICT = 8 };

#define ST__DICT_MAX 256 /* distinct values beyond which a chunk stays PLAIN */
enum { ST__CODEC_ZSTD = 6 };

typedef struct {
    const char *name;
    int type;
    bool optional;
    int converted; /* -1: none */
    int logical;   /* LogicalType union field: 1 STRING, 8 TIMESTAMP, 12 JSON, 0 none */
    bool stats;    /* min/max worth keeping (not for content and metadata) */
    bool dict;     /* few distinct values: try dictionary encoding */
} st_pqcol_t;

static const st_pqcol_t st__cols[ST_PQ_COLUMNS] = {
    {"msg_id", ST__T_INT64, false, -1, 0, true, false},
    {"conversation_id", ST__T_BYTE_ARRAY, false, 0, 1, true, true},
    {"from", ST__T_BYTE_ARRAY, false, 0, 1, true, true},
    {"timestamp", ST__T_INT64, false, 10, 8, true, false},
    {"seq", ST__T_INT64, false, -1, 0, true, false},
    {"content", ST__T_BYTE_ARRAY, false, 0, 1, false, false},
    {"metadata", ST__T_BYTE_ARRAY, true, 19, 12, false, false},
};

/* What the footer needs to know about one column chunk. */
typedef struct {
    uint64_t offset, data_offset, compressed, uncompressed;
    bool dict;
    int64_t values, nulls;
    bool has_minmax;
    st_buf_t min, max;
} st_chunk_t;

static void st__le64(st_buf_t *b, uint64_t v)
{
    uint8_t t[8];
    for (int i = 0; i < 8; i++)
        t[i] = (uint8_t)(v >> (8 * i));
    st_buf_append(b, t, 8);
}

static void st__le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static int64_t st__int_of(const st_msgrow_t *r, int col)
{
    return col == 0 ? (int64_t)r->msg_id : col == 3 ? r->timestamp : r->seq;
}

static const char *st__str_of(const st_msgrow_t *r, int col, uint32_t *len)
{
    switch (col) {
    case 1:
        *len = r->conv_len;
        return r->conv;
    case 2:
        *len = r->from_len;
        return r->from;
    case 5:
        *len = r->content_len;
        return r->content;
    default:
        *len = r->metadata_len;
        return r->metadata;
    }
}

/* Byte-wise unsigned order: the type-defined order of UTF8/JSON strings. */
static int st__bytes_cmp(const void *a, size_t al, const void *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

static void st__minmax(st_chunk_t *ch, const st_pqcol_t *col, const st_msgrow_t *r, int ci)
{
    if (!col->stats) return;
    uint8_t v[8];
    const void *p;
    size_t n;
    if (col->type == ST__T_INT64) {
        int64_t x = st__int_of(r, ci);
        for (int i = 0; i < 8; i++)
            v[i] = (uint8_t)((uint64_t)x >> (8 * i));
        p = v;
        n = 8;
        if (ch->has_minmax) {
            int64_t lo = 0, hi = 0;
            for (int i = 7; i >= 0; i--) {
                lo = (int64_t)((uint64_t)lo << 8 | (uint8_t)ch->min.data[i]);
                hi = (int64_t)((uint64_t)hi << 8 | (uint8_t)ch->max.data[i]);
            }
            if (x < lo) st_buf_reset(&ch->min), st_buf_append(&ch->min, p, n);
            if (x > hi) st_buf_reset(&ch->max), st_buf_append(&ch->max, p, n);
            return;
        }
    } else {
        uint32_t len;
        p = st__str_of(r, ci, &len);
        n = len;
        if (!p) return;
        if (ch->has_minmax) {
            if (st__bytes_cmp(p, n, ch->min.data, ch->min.len) < 0)
                st_buf_reset(&ch->min), st_buf_append(&ch->min, p, n);
            if (st__bytes_cmp(p, n, ch->max.data, ch->max.len) > 0)
                st_buf_reset(&ch->max), st_buf_append(&ch->max, p, n);
            return;
        }
    }
    st_buf_append(&ch->min, p, n);
    st_buf_append(&ch->max, p, n);
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

/* Definition levels of the nullable column: RLE runs (bit width 1), behind a 4-byte length. */
static void st__def_levels(st_buf_t *page, const st_msgrow_t *rows, size_t n)
{
    size_t at = page->len;
    uint8_t zero[4] = {0};
    st_buf_append(page, zero, 4);
    for (size_t i = 0; i < n;) {
        uint8_t v = rows[i].metadata != NULL;
        size_t run = 1;
        while (i + run < n && (rows[i + run].metadata != NULL) == v)
            run++;
        st__rle_run(page, run, v, 1);
        i += run;
    }
    st__le32((uint8_t *)page->data + at, (uint32_t)(page->len - at - 4));
}

/* A DATA_PAGE (v1) header, or with dict_page a DICTIONARY_PAGE header. crc: the CRC-32 (zlib's,
 * as Parquet specifies) of the page as stored, after the header: readers detect a damaged page
 * instead of decoding wrong values from it. */
static void st__page_header(st_buf_t *out, size_t raw, size_t packed, uint32_t crc, size_t values,
                            int encoding, bool dict_page)
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
    if (ZSTD_isError(zl) || page->len > INT32_MAX) return ST_EINTERNAL;
    size_t h0 = out->len;
    uint32_t crc = (uint32_t)crc32(0L, (const Bytef *)packed->data, (uInt)zl);
    st__page_header(out, page->len, zl, crc, values, encoding, dict_page);
    size_t hl = out->len - h0;
    st_buf_append(out, packed->data, zl);
    ch->compressed += hl + zl;
    ch->uncompressed += hl + page->len;
    return ST_OK;
}

/* Dictionary of a string column chunk: distinct values in first-seen order and each row's
 * index, or false when the chunk has too many distinct values to be worth it. */
static bool st__dictionary(const st_msgrow_t *rows, size_t n, int ci, st_buf_t *dict_page,
                           uint16_t *index, size_t *ndict)
{
    const char *vals[ST__DICT_MAX];
    uint32_t lens[ST__DICT_MAX];
    size_t nd = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t len;
        const char *v = st__str_of(&rows[i], ci, &len);
        size_t k = 0;
        /* rows of a conversation repeat the previous value most of the time: check it first */
        if (i && index[i - 1] < nd && lens[index[i - 1]] == len &&
            memcmp(vals[index[i - 1]], v, len) == 0)
            k = index[i - 1];
        else
            for (k = 0; k < nd && !(lens[k] == len && memcmp(vals[k], v, len) == 0); k++)
                ;
        if (k == nd) {
            if (nd == ST__DICT_MAX) return false;
            vals[nd] = v;
            lens[nd++] = len;
        }
        index[i] = (uint16_t)k;
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

/* Dictionary indices of rows [a, b): bit width byte, then RLE runs of equal indices. */
static void st__dict_indices(st_buf_t *page, const uint16_t *index, size_t a, size_t b,
                             size_t ndict)
{
    int bw = 1;
    while (bw < 16 && (1u << bw) < ndict)
        bw++;
    st_buf_appendc(page, (char)bw);
    for (size_t i = a; i < b;) {
        size_t run = 1;
        while (i + run < b && index[i + run] == index[i])
            run++;
        st__rle_run(page, run, index[i], bw > 8 ? 2 : 1);
        i += run;
    }
}

/* Writes one column chunk of rows[0..n) to out as pages of about ST__PAGE_TARGET bytes:
 * a dictionary page first when the column has few distinct values here. */
static int st__write_chunk(st_buf_t *out, const st_msgrow_t *rows, size_t n, int ci, ZSTD_CCtx *z,
                           int level, st_chunk_t *ch)
{
    const st_pqcol_t *col = &st__cols[ci];
    st_buf_t page = {0}, packed = {0};
    int rc = ST_OK;
    uint16_t *index = NULL;
    size_t ndict = 0;
    ch->offset = ch->data_offset = out->len;
    if (col->dict) {
        index = st_malloc(n * sizeof *index);
        ch->dict = st__dictionary(rows, n, ci, &page, index, &ndict);
        if (ch->dict) {
            rc = st__emit_page(out, &page, &packed, z, level, ndict, ST__ENC_PLAIN, true, ch);
            ch->data_offset = out->len;
        }
    }
    for (size_t i = 0; i < n && rc == ST_OK;) {
        size_t start = i, bytes = 0;
        while (i < n && (i == start || bytes < ST__PAGE_TARGET)) {
            uint32_t len = 8;
            if (col->type == ST__T_BYTE_ARRAY && !ch->dict)
                st__str_of(&rows[i], ci, &len), len += 4;
            bytes += len;
            i++;
        }
        st_buf_reset(&page);
        if (col->optional) st__def_levels(&page, rows + start, i - start);
        for (size_t k = start; k < i; k++) {
            const st_msgrow_t *r = &rows[k];
            st__minmax(ch, col, r, ci);
            if (ch->dict) continue;
            if (col->type == ST__T_INT64) {
                st__le64(&page, (uint64_t)st__int_of(r, ci));
                continue;
            }
            uint32_t len;
            const char *s = st__str_of(r, ci, &len);
            if (!s) {
                ch->nulls++;
                continue;
            }
            uint8_t l4[4];
            st__le32(l4, len);
            st_buf_append(&page, l4, 4);
            st_buf_append(&page, s, len);
        }
        if (ch->dict) st__dict_indices(&page, index, start, i, ndict);
        rc = st__emit_page(out, &page, &packed, z, level, i - start,
                           ch->dict ? ST__ENC_RLE_DICT : ST__ENC_PLAIN, false, ch);
        ch->values += (int64_t)(i - start);
    }
    free(index);
    st_buf_free(&page);
    st_buf_free(&packed);
    return rc;
}

static void st__schema(st_tw_t *w)
{
    st_tw_list(w, 2, ST_TC_STRUCT, ST_PQ_COLUMNS + 1);
    st_tw_elem_begin(w);
    st_tw_bin(w, 4, "schema", 6);
    st_tw_i32(w, 5, ST_PQ_COLUMNS);
    st_tw_struct_end(w);
    for (int i = 0; i < ST_PQ_COLUMNS; i++) {
        const st_pqcol_t *c = &st__cols[i];
        st_tw_elem_begin(w);
        st_tw_i32(w, 1, c->type);
        st_tw_i32(w, 3, c->optional ? 1 : 0);
        st_tw_bin(w, 4, c->name, strlen(c->name));
        if (c->converted >= 0) st_tw_i32(w, 6, c->converted);
        if (c->logical) {
            st_tw_struct_begin(w, 10);
            st_tw_struct_begin(w, (int16_t)c->logical);
            if (c->logical == 8) { /* TIMESTAMP(isAdjustedToUTC = true, unit = MICROS) */
                st_tw_bool(w, 1, true);
                st_tw_struct_begin(w, 2);
                st_tw_struct_begin(w, 2);
                st_tw_struct_end(w);
                st_tw_struct_end(w);
            }
            st_tw_struct_end(w);
            st_tw_struct_end(w);
        }
        st_tw_struct_end(w);
    }
}

static void st__column_meta(st_tw_t *w, int ci, const st_chunk_t *ch)
{
    const st_pqcol_t *c = &st__cols[ci];
    st_tw_elem_begin(w); /* ColumnChunk */
    st_tw_i64(w, 2, (int64_t)ch->offset);
    st_tw_struct_begin(w, 3); /* ColumnMetaData */
    st_tw_i32(w, 1, c->type);
    st_tw_list(w, 2, ST_TC_I32, 1 + (c->optional || ch->dict) + ch->dict);
    st_tw_elem_i32(w, ST__ENC_PLAIN);
    if (c->optional || ch->dict) st_tw_elem_i32(w, ST__ENC_RLE);
    if (ch->dict) st_tw_elem_i32(w, ST__ENC_RLE_DICT);
    st_tw_list(w, 3, ST_TC_BINARY, 1);
    st_tw_elem_bin(w, c->name, strlen(c->name));
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

int st_parquet_encode(const st_msgrow_t *rows, size_t n, int zstd_level, st_buf_t *out)
{
    size_t ngroups = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || st__bytes_cmp(rows[i].conv, rows[i].conv_len, rows[i - 1].conv,
                                    rows[i - 1].conv_len) != 0)
            ngroups++;
    st_chunk_t *chunks = st_calloc(ngroups * ST_PQ_COLUMNS + 1, sizeof *chunks);
    size_t *starts = st_calloc(ngroups + 1, sizeof *starts);
    int rc = ST_OK;
    size_t base = out->len;
    ZSTD_CCtx *z = ZSTD_createCCtx();
    if (!z) st_fatal("out of memory (zstd context)");
    st_buf_append(out, "PAR1", 4);
    for (size_t g = 0, i = 0; g < ngroups && rc == ST_OK; g++) {
        size_t j = i + 1;
        while (j < n &&
               st__bytes_cmp(rows[j].conv, rows[j].conv_len, rows[i].conv, rows[i].conv_len) == 0)
            j++;
        starts[g] = i;
        for (int c = 0; c < ST_PQ_COLUMNS && rc == ST_OK; c++) {
            st_chunk_t *ch = &chunks[g * ST_PQ_COLUMNS + (size_t)c];
            rc = st__write_chunk(out, rows + i, j - i, c, z, zstd_level, ch);
            ch->offset -= base;
            ch->data_offset -= base;
        }
        i = j;
    }
    starts[ngroups] = n;
    if (rc == ST_OK) {
        size_t foot = out->len;
        st_tw_t w;
        st_tw_init(&w, out);
        st_tw_i32(&w, 1, 1); /* version */
        st__schema(&w);
        st_tw_i64(&w, 3, (int64_t)n);
        st_tw_list(&w, 4, ST_TC_STRUCT, ngroups);
        for (size_t g = 0; g < ngroups; g++) {
            st_chunk_t *cs = &chunks[g * ST_PQ_COLUMNS];
            uint64_t raw = 0, packed = 0;
            st_tw_elem_begin(&w); /* RowGroup */
            st_tw_list(&w, 1, ST_TC_STRUCT, ST_PQ_COLUMNS);
            for (int c = 0; c < ST_PQ_COLUMNS; c++) {
                st__column_meta(&w, c, &cs[c]);
                raw += cs[c].uncompressed;
                packed += cs[c].compressed;
            }
            st_tw_i64(&w, 2, (int64_t)raw);
            st_tw_i64(&w, 3, (int64_t)(starts[g + 1] - starts[g]));
            st_tw_list(&w, 4, ST_TC_STRUCT, 1); /* sorted by msg_id */
            st_tw_elem_begin(&w);
            st_tw_i32(&w, 1, 0);
            st_tw_bool(&w, 2, false);
            st_tw_bool(&w, 3, false);
            st_tw_struct_end(&w);
            st_tw_i64(&w, 5, (int64_t)cs[0].offset);
            st_tw_i64(&w, 6, (int64_t)packed);
            st_tw_struct_end(&w);
        }
        static const char by[] = "strata";
        st_tw_bin(&w, 6, by, sizeof by - 1);
        st_tw_list(&w, 7, ST_TC_STRUCT, ST_PQ_COLUMNS); /* TypeDefinedOrder for every column */
        for (int c = 0; c < ST_PQ_COLUMNS; c++) {
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
    } else {
        out->len = base;
    }
    for (size_t k = 0; k < ngroups * ST_PQ_COLUMNS; k++) {
        st_buf_free(&chunks[k].min);
        st_buf_free(&chunks[k].max);
    }
    ZSTD_freeCCtx(z);
    free(chunks);
    free(starts);
    return rc;
}
