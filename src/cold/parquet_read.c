/* SPDX-License-Identifier: MIT */
/*
 * Parquet reader for the files strata writes. The footer is parsed into row-group summaries
 * (conversation, msg_id range, byte ranges) so a read fetches only the row groups it needs;
 * a row group's pages are then decompressed and decoded. Input is untrusted (a file in object
 * storage can be truncated or damaged): every offset, length and count is checked against what
 * is really there, and anything unexpected is ST_EINVAL.
 */
#include "strata/cold.h"
#include "thrift.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#define ST__MAX_PAGE (256u << 20)

static const char *const st__names[ST_PQ_COLUMNS] = {
    "msg_id", "conversation_id", "from", "timestamp", "seq", "content", "metadata"};
static const int st__types[ST_PQ_COLUMNS] = {2, 6, 6, 2, 2, 6, 6};

static uint32_t st__rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t st__rd64(const uint8_t *p)
{
    return (uint64_t)st__rd32(p) | (uint64_t)st__rd32(p + 4) << 32;
}

int st_parquet_footer_len(const uint8_t tail[8], uint64_t file_size, uint32_t *len)
{
    if (memcmp(tail + 4, "PAR1", 4) != 0) return ST_EINVAL;
    *len = st__rd32(tail);
    if (file_size < 12 || *len > file_size - 12) return ST_EINVAL;
    return ST_OK;
}

typedef struct {
    int type, codec;
    int64_t values;
    uint64_t offset, size, dict_offset;
    const uint8_t *min, *max;
    size_t min_len, max_len;
    bool dict;
} st_colmeta_t;

static void st__stats(st_tr_t *r, st_colmeta_t *c)
{
    int16_t last = 0, id;
    int t;
    bool bv;
    if (!st_tr_enter(r)) return;
    while (st_tr_field(r, &last, &id, &t, &bv)) {
        if (id == 5 && t == ST_TC_BINARY)
            c->max = st_tr_bin(r, &c->max_len);
        else if (id == 6 && t == ST_TC_BINARY)
            c->min = st_tr_bin(r, &c->min_len);
        else
            st_tr_skip(r, t);
    }
    st_tr_leave(r);
}

static void st__column_meta(st_tr_t *r, st_colmeta_t *c)
{
    int16_t last = 0, id;
    int t;
    bool bv;
    if (!st_tr_enter(r)) return;
    while (st_tr_field(r, &last, &id, &t, &bv)) {
        if (id == 1 && t == ST_TC_I32)
            c->type = (int)st_tr_int(r);
        else if (id == 4 && t == ST_TC_I32)
            c->codec = (int)st_tr_int(r);
        else if (id == 5 && t == ST_TC_I64)
            c->values = st_tr_int(r);
        else if (id == 7 && t == ST_TC_I64)
            c->size = (uint64_t)st_tr_int(r);
        else if (id == 9 && t == ST_TC_I64)
            c->offset = (uint64_t)st_tr_int(r);
        else if (id == 11 && t == ST_TC_I64) {
            c->dict = true;
            c->dict_offset = (uint64_t)st_tr_int(r);
        } else if (id == 12 && t == ST_TC_STRUCT)
            st__stats(r, c);
        else
            st_tr_skip(r, t);
    }
    st_tr_leave(r);
}

static void st__column_chunk(st_tr_t *r, st_colmeta_t *c)
{
    int16_t last = 0, id;
    int t;
    bool bv;
    if (!st_tr_enter(r)) return;
    while (st_tr_field(r, &last, &id, &t, &bv)) {
        if (id == 3 && t == ST_TC_STRUCT)
            st__column_meta(r, c);
        else
            st_tr_skip(r, t);
    }
    st_tr_leave(r);
}

/* One RowGroup into g; its strings (conversation) are copied to strings. */
static int st__row_group(st_tr_t *r, uint64_t data_end, st_pq_group_t *g, st_buf_t *strings)
{
    int16_t last = 0, id;
    int t;
    bool bv;
    st_colmeta_t cols[ST_PQ_COLUMNS];
    size_t ncols = 0;
    memset(cols, 0, sizeof cols);
    if (!st_tr_enter(r)) return ST_EINVAL;
    while (st_tr_field(r, &last, &id, &t, &bv)) {
        if (id == 1 && t == ST_TC_LIST) {
            int elem;
            size_t n;
            /* exactly one list of exactly our columns (a repeated field would overflow) */
            if (ncols || !st_tr_list(r, &elem, &n) || elem != ST_TC_STRUCT || n != ST_PQ_COLUMNS) {
                r->ok = false;
                break;
            }
            for (size_t i = 0; i < n && r->ok; i++)
                st__column_chunk(r, &cols[ncols++]);
        } else if (id == 3 && t == ST_TC_I64) {
            g->rows = st_tr_int(r);
        } else {
            st_tr_skip(r, t);
        }
    }
    st_tr_leave(r);
    if (!r->ok || ncols != ST_PQ_COLUMNS || g->rows <= 0) return ST_EINVAL;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int i = 0; i < ST_PQ_COLUMNS; i++) {
        st_colmeta_t *c = &cols[i];
        /* a dictionary page, when there is one, starts the chunk (only strings have them) */
        if (c->dict) {
            if (st__types[i] != 6 || c->dict_offset >= c->offset) return ST_EINVAL;
            c->offset = c->dict_offset;
        }
        if (c->type != st__types[i] || c->codec != 6 || c->values != g->rows || c->offset < 4 ||
            c->size == 0 || c->offset > data_end || c->size > data_end - c->offset)
            return ST_EINVAL;
        g->col_offset[i] = c->offset;
        g->col_length[i] = c->size;
        if (c->offset < lo) lo = c->offset;
        if (c->offset + c->size > hi) hi = c->offset + c->size;
    }
    /* pruning needs exact msg_id bounds and the conversation */
    if (!cols[0].min || !cols[0].max || cols[0].min_len != 8 || cols[0].max_len != 8 ||
        !cols[1].min || !cols[1].max || cols[1].min_len != cols[1].max_len ||
        memcmp(cols[1].min, cols[1].max, cols[1].min_len) != 0 || cols[1].min_len > ST_NAME_MAX)
        return ST_EINVAL;
    g->min_id = st__rd64(cols[0].min);
    g->max_id = st__rd64(cols[0].max);
    if (cols[3].min && cols[3].max && cols[3].min_len == 8 && cols[3].max_len == 8) {
        g->min_ts = (int64_t)st__rd64(cols[3].min);
        g->max_ts = (int64_t)st__rd64(cols[3].max);
    }
    if (cols[4].min && cols[4].max && cols[4].min_len == 8 && cols[4].max_len == 8) {
        g->min_seq = (int64_t)st__rd64(cols[4].min);
        g->max_seq = (int64_t)st__rd64(cols[4].max);
    }
    g->offset = lo;
    g->length = hi - lo;
    g->conv = (const char *)(uintptr_t)strings->len; /* an offset until strings stops moving */
    g->conv_len = cols[1].min_len;
    st_buf_append(strings, cols[1].min, cols[1].min_len);
    return g->min_id <= g->max_id ? ST_OK : ST_EINVAL;
}

static bool st__schema_ok(st_tr_t *r)
{
    int elem;
    size_t n;
    if (!st_tr_list(r, &elem, &n) || elem != ST_TC_STRUCT || n != ST_PQ_COLUMNS + 1) return false;
    for (size_t i = 0; i < n && r->ok; i++) {
        int16_t last = 0, id;
        int t;
        bool bv;
        const uint8_t *name = NULL;
        size_t nl = 0;
        if (!st_tr_enter(r)) return false;
        while (st_tr_field(r, &last, &id, &t, &bv))
            if (id == 4 && t == ST_TC_BINARY)
                name = st_tr_bin(r, &nl);
            else
                st_tr_skip(r, t);
        st_tr_leave(r);
        if (i > 0 &&
            (!name || nl != strlen(st__names[i - 1]) || memcmp(name, st__names[i - 1], nl) != 0))
            return false;
    }
    return r->ok;
}

int st_parquet_parse_footer(const uint8_t *p, size_t len, uint64_t file_size, st_pq_meta_t *out)
{
    memset(out, 0, sizeof *out);
    if (file_size < len + 12) return ST_EINVAL;
    uint64_t data_end = file_size - len - 8;
    st_tr_t r;
    st_tr_init(&r, p, len);
    st_buf_t groups = {0}, strings = {0};
    bool schema = false;
    int rc = ST_OK;
    int16_t last = 0, id;
    int t;
    bool bv;
    while (rc == ST_OK && st_tr_field(&r, &last, &id, &t, &bv)) {
        if (id == 2 && t == ST_TC_LIST) {
            schema = st__schema_ok(&r);
        } else if (id == 3 && t == ST_TC_I64) {
            out->rows = st_tr_int(&r);
        } else if (id == 4 && t == ST_TC_LIST) {
            int elem;
            size_t n;
            if (!st_tr_list(&r, &elem, &n) || elem != ST_TC_STRUCT) break;
            for (size_t i = 0; i < n && rc == ST_OK; i++) {
                st_pq_group_t g;
                memset(&g, 0, sizeof g);
                rc = st__row_group(&r, data_end, &g, &strings);
                st_buf_append(&groups, &g, sizeof g);
            }
        } else {
            st_tr_skip(&r, t);
        }
    }
    int64_t total = 0;
    out->ngroups = groups.len / sizeof(st_pq_group_t);
    out->groups = (st_pq_group_t *)groups.data;
    for (size_t i = 0; i < out->ngroups; i++)
        total += out->groups[i].rows;
    if (rc != ST_OK || !r.ok || !schema || out->ngroups == 0 || total != out->rows) {
        st_buf_free(&groups);
        st_buf_free(&strings);
        memset(out, 0, sizeof *out);
        return ST_EINVAL;
    }
    st_buf_appendc(&strings, 0);
    out->strings = st_buf_steal(&strings, NULL);
    for (size_t i = 0; i < out->ngroups; i++)
        out->groups[i].conv = out->strings + (uintptr_t)out->groups[i].conv;
    return ST_OK;
}

void st_parquet_meta_free(st_pq_meta_t *m)
{
    free(m->groups);
    free(m->strings);
    memset(m, 0, sizeof *m);
}

/* ---- row groups ---- */

void st_parquet_rows_free(st_pq_rows_t *r)
{
    for (size_t i = 0; i < r->nmem; i++)
        free(r->mem[i]);
    free(r->mem);
    free(r->rows);
    memset(r, 0, sizeof *r);
}

static void *st__keep(st_pq_rows_t *out, void *p)
{
    out->mem = st_realloc(out->mem, (out->nmem + 1) * sizeof *out->mem);
    out->mem[out->nmem++] = p;
    return p;
}

typedef struct {
    int type, page_type, encoding;
    int64_t raw, packed, values;
    bool has_crc;
    uint32_t crc;
} st_page_t;

static bool st__page_header(st_tr_t *r, st_page_t *pg)
{
    int16_t last = 0, id;
    int t;
    bool bv;
    memset(pg, 0, sizeof *pg);
    pg->page_type = -1;
    pg->values = -1;
    pg->encoding = -1;
    while (st_tr_field(r, &last, &id, &t, &bv)) {
        if (id == 1 && t == ST_TC_I32)
            pg->page_type = (int)st_tr_int(r);
        else if (id == 2 && t == ST_TC_I32)
            pg->raw = st_tr_int(r);
        else if (id == 3 && t == ST_TC_I32)
            pg->packed = st_tr_int(r);
        else if (id == 4 && t == ST_TC_I32) {
            pg->crc = (uint32_t)st_tr_int(r);
            pg->has_crc = true;
        } else if ((id == 5 || id == 7) && t == ST_TC_STRUCT) { /* data or dictionary page */
            int16_t l2 = 0, fid;
            if (!st_tr_enter(r)) return false;
            while (st_tr_field(r, &l2, &fid, &t, &bv))
                if (fid == 1 && t == ST_TC_I32)
                    pg->values = st_tr_int(r);
                else if (fid == 2 && t == ST_TC_I32)
                    pg->encoding = (int)st_tr_int(r);
                else
                    st_tr_skip(r, t);
            st_tr_leave(r);
        } else
            st_tr_skip(r, t);
    }
    /* values PLAIN or dictionary indices (RLE_DICTIONARY, or its old name PLAIN_DICTIONARY) */
    bool enc_ok =
        pg->encoding == 0 || (pg->page_type == 0 && (pg->encoding == 8 || pg->encoding == 2));
    return r->ok && (pg->page_type == 0 || pg->page_type == 2) && enc_ok && pg->values >= 0 &&
           pg->raw >= 0 && pg->packed >= 0 && (uint64_t)pg->raw <= ST__MAX_PAGE;
}

/* Definition levels: RLE / bit-packed runs of bit width 1, behind a 4-byte length. */
static int st__def_levels(const uint8_t **p, const uint8_t *end, uint8_t *defs, size_t n)
{
    if (end - *p < 4) return ST_EINVAL;
    uint32_t len = st__rd32(*p);
    *p += 4;
    if (len > (size_t)(end - *p)) return ST_EINVAL;
    st_tr_t r;
    st_tr_init(&r, *p, len);
    *p += len;
    for (size_t i = 0; i < n;) {
        uint64_t h = st_tr_uvarint(&r);
        if (!r.ok) return ST_EINVAL;
        if (h & 1) { /* bit-packed groups of 8 */
            uint64_t groups = h >> 1;
            if (groups > (uint64_t)(r.end - r.p)) return ST_EINVAL;
            for (uint64_t gi = 0; gi < groups; gi++) {
                uint8_t b = *r.p++;
                for (int k = 0; k < 8 && i < n; k++)
                    defs[i++] = (b >> k) & 1;
            }
        } else {
            uint64_t run = h >> 1;
            if (r.p >= r.end || run == 0 || run > n - i) return ST_EINVAL;
            uint8_t v = *r.p++ & 1;
            memset(defs + i, v, (size_t)run);
            i += (size_t)run;
        }
    }
    return ST_OK;
}

static void st__set_str(st_msgrow_t *m, int ci, const char *s, uint32_t sl)
{
    switch (ci) {
    case 1:
        m->conv = s, m->conv_len = sl;
        break;
    case 2:
        m->from = s, m->from_len = sl;
        break;
    case 5:
        m->content = s, m->content_len = sl;
        break;
    default:
        m->metadata = s, m->metadata_len = sl;
    }
}

/* RLE / bit-packed hybrid runs of `bw`-bit values (dictionary indices), count of them. */
static int st__hybrid(const uint8_t *q, const uint8_t *end, int bw, uint32_t *out, size_t count)
{
    st_tr_t r;
    st_tr_init(&r, q, (size_t)(end - q));
    size_t vbytes = ((size_t)bw + 7) / 8;
    for (size_t i = 0; i < count;) {
        uint64_t h = st_tr_uvarint(&r);
        if (!r.ok) return ST_EINVAL;
        if (h & 1) { /* groups of 8 values, bw bits each, little-endian bit order */
            uint64_t groups = h >> 1;
            if (groups == 0 || groups > (uint64_t)(r.end - r.p) / (uint64_t)(bw ? bw : 1))
                return ST_EINVAL;
            uint64_t bits = 0;
            int have = 0;
            for (uint64_t v = 0; v < groups * 8; v++) {
                while (have < bw) {
                    bits |= (uint64_t)*r.p++ << have;
                    have += 8;
                }
                uint32_t x = (uint32_t)(bits & ((1ull << bw) - 1));
                bits >>= bw;
                have -= bw;
                if (i < count) out[i++] = x;
            }
        } else {
            uint64_t run = h >> 1;
            if (run == 0 || run > count - i || (size_t)(r.end - r.p) < vbytes) return ST_EINVAL;
            uint32_t x = 0;
            for (size_t b = 0; b < vbytes; b++)
                x |= (uint32_t)*r.p++ << (8 * b);
            for (uint64_t k = 0; k < run; k++)
                out[i++] = x;
        }
    }
    return ST_OK;
}

/* Decodes the pages of column ci into rows[0..n): an optional dictionary page, then data pages
 * with PLAIN values or dictionary indices. */
static int st__read_column(const uint8_t *p, size_t len, int ci, st_msgrow_t *rows, size_t n,
                           ZSTD_DCtx *dz, st_pq_rows_t *out)
{
    const uint8_t *end = p + len;
    size_t row = 0, nd = 0;
    bool have_dict = false;
    uint8_t *defs = ci == 6 ? st_malloc(n ? n : 1) : NULL;
    const char **dv = NULL;
    uint32_t *dl = NULL, *idx = NULL;
    int rc = ST_OK;
    while (row < n && rc == ST_OK) {
        st_tr_t r;
        st_page_t pg;
        st_tr_init(&r, p, (size_t)(end - p));
        if (!st__page_header(&r, &pg) || (uint64_t)pg.packed > (uint64_t)(end - r.p) ||
            (pg.page_type == 0 && (uint64_t)pg.values > n - row)) {
            rc = ST_EINVAL;
            break;
        }
        /* a page with a CRC (every page strata writes) must match it: a flipped bit is an error,
         * never a wrong value */
        if (pg.has_crc && (uint32_t)crc32(0L, r.p, (uInt)pg.packed) != pg.crc) {
            rc = ST_EINVAL;
            break;
        }
        uint8_t *raw = st__keep(out, st_malloc(pg.raw ? (size_t)pg.raw : 1));
        size_t z = ZSTD_decompressDCtx(dz, raw, (size_t)pg.raw, r.p, (size_t)pg.packed);
        p = r.p + pg.packed;
        if (ZSTD_isError(z) || z != (size_t)pg.raw) {
            rc = ST_EINVAL;
            break;
        }
        const uint8_t *q = raw, *qend = raw + z;
        if (pg.page_type == 2) { /* the dictionary: PLAIN strings, before any data page */
            if (have_dict || row || st__types[ci] != 6 || (uint64_t)pg.values > z / 4 + 1) {
                rc = ST_EINVAL;
                break;
            }
            nd = (size_t)pg.values;
            dv = st_malloc((nd ? nd : 1) * sizeof *dv);
            dl = st_malloc((nd ? nd : 1) * sizeof *dl);
            for (size_t k = 0; k < nd && rc == ST_OK; k++) {
                if (qend - q < 4 || st__rd32(q) > (size_t)(qend - q - 4)) {
                    rc = ST_EINVAL;
                    break;
                }
                dl[k] = st__rd32(q);
                dv[k] = (const char *)q + 4;
                q += 4 + dl[k];
            }
            have_dict = true;
            continue;
        }
        size_t count = (size_t)pg.values;
        if (defs && (rc = st__def_levels(&q, qend, defs + row, count)) != ST_OK) break;
        if (pg.encoding != 0) { /* dictionary indices for the non-null values */
            size_t present = 0;
            for (size_t k = 0; k < count; k++)
                present += !defs || defs[row + k];
            if (!have_dict || q >= qend || *q > 32) {
                rc = ST_EINVAL;
                break;
            }
            int bw = *q++;
            idx = st_realloc(idx, (present ? present : 1) * sizeof *idx);
            if ((bw == 0 && nd != 1 && present) ||
                (bw && (rc = st__hybrid(q, qend, bw, idx, present)) != ST_OK)) {
                rc = ST_EINVAL;
                break;
            }
            if (bw == 0) memset(idx, 0, present * sizeof *idx);
            for (size_t k = 0, v = 0; k < count; k++, row++) {
                if (defs && !defs[row]) {
                    st__set_str(&rows[row], ci, NULL, 0);
                    continue;
                }
                if (idx[v] >= nd) {
                    rc = ST_EINVAL;
                    break;
                }
                st__set_str(&rows[row], ci, dv[idx[v]], dl[idx[v]]);
                v++;
            }
            continue;
        }
        for (size_t k = 0; k < count && rc == ST_OK; k++, row++) {
            st_msgrow_t *m = &rows[row];
            if (st__types[ci] == 2) {
                if (qend - q < 8) {
                    rc = ST_EINVAL;
                    break;
                }
                uint64_t v = st__rd64(q);
                q += 8;
                if (ci == 0)
                    m->msg_id = v;
                else if (ci == 3)
                    m->timestamp = (int64_t)v;
                else
                    m->seq = (int64_t)v;
                continue;
            }
            if (defs && !defs[row]) {
                st__set_str(m, ci, NULL, 0);
                continue;
            }
            if (qend - q < 4 || st__rd32(q) > (size_t)(qend - q - 4)) {
                rc = ST_EINVAL;
                break;
            }
            uint32_t sl = st__rd32(q);
            st__set_str(m, ci, (const char *)q + 4, sl);
            q += 4 + sl;
        }
    }
    free(defs);
    free(dv);
    free(dl);
    free(idx);
    return rc;
}

int st_parquet_read_group(const st_pq_group_t *g, const uint8_t *bytes, size_t len,
                          st_pq_rows_t *out)
{
    memset(out, 0, sizeof *out);
    if (len != g->length || g->rows <= 0 || (uint64_t)g->rows > len) return ST_EINVAL;
    size_t n = (size_t)g->rows;
    out->rows = st_calloc(n, sizeof *out->rows);
    out->n = n;
    int rc = ST_OK;
    ZSTD_DCtx *dz = ZSTD_createDCtx();
    if (!dz) st_fatal("out of memory (zstd context)");
    for (int c = 0; c < ST_PQ_COLUMNS && rc == ST_OK; c++) {
        uint64_t off = g->col_offset[c] - g->offset;
        if (g->col_offset[c] < g->offset || off > len || g->col_length[c] > len - off) {
            rc = ST_EINVAL;
            break;
        }
        rc = st__read_column(bytes + off, (size_t)g->col_length[c], c, out->rows, n, dz, out);
    }
    ZSTD_freeDCtx(dz);
    if (rc != ST_OK) st_parquet_rows_free(out);
    return rc;
}
