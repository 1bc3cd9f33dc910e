/* SPDX-License-Identifier: MIT */
/*
 * Parquet reader for the files strata writes, for any schema st_pq_schema_t describes. The
 * footer is checked against the schema and parsed into row-group summaries (byte ranges,
 * statistics) so a read fetches only the row groups it needs; a row group's pages are then
 * decompressed and decoded into per-leaf entries (levels and values) that pq_levels.c's cursor
 * turns back into rows. Input is untrusted (a file in object storage can be truncated or
 * damaged): every offset, length, count and level is checked against what is really there, and
 * anything unexpected is ST_EINVAL.
 */
#include "pq_internal.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#define ST__MAX_PAGE      (256u << 20)
#define ST__MAX_ENTRIES   (1u << 24) /* per chunk beyond its rows (repeated columns only) */
#define ST__MIN_ENTRIES   64         /* a decoded column's first arrays (st__grow) */
#define ST__CHUNK_RAW_MAX ((uint64_t)512 << 20) /* decompressed bytes of one column chunk */
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#define ST__CRC 0 /* a fuzzer cannot fix a CRC: let it reach the levels and values behind one */
#else
#define ST__CRC 1
#endif

static uint32_t st__rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t st__rd64(const uint8_t *p)
{
    return (uint64_t)st__rd32(p) | (uint64_t)st__rd32(p + 4) << 32;
}

int st_pq_footer_len(const uint8_t tail[8], uint64_t file_size, uint32_t *len)
{
    if (memcmp(tail + 4, "PAR1", 4) != 0) return ST_EINVAL;
    *len = st__rd32(tail);
    if (file_size < 12 || *len > file_size - 12) return ST_EINVAL;
    return ST_OK;
}

static void st__stats(st_tr_t *r, st_pq_colmeta_t *c)
{
    int16_t last = 0, id;
    int t;
    bool bv;
    if (!st_tr_enter(r)) return;
    while (st_tr_field(r, &last, &id, &t, &bv)) {
        if (id == 3 && t == ST_TC_I64)
            c->nulls = st_tr_int(r), c->has_nulls = true;
        else if (id == 5 && t == ST_TC_BINARY)
            c->max = st_tr_bin(r, &c->max_len);
        else if (id == 6 && t == ST_TC_BINARY)
            c->min = st_tr_bin(r, &c->min_len);
        else
            st_tr_skip(r, t);
    }
    st_tr_leave(r);
}

static void st__column_meta(st_tr_t *r, st_pq_colmeta_t *c)
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

void st__pq_column_chunk(st_tr_t *r, st_pq_colmeta_t *c)
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

/* What parsing the footer collects: row groups, their chunks, statistics bytes. */
typedef struct {
    st_pq_layout_t *lay;
    uint64_t data_end;
    st_buf_t groups, chunks, strings; /* chunks' min/max: offsets into strings until the end */
} st_parse_t;

/* Copies a statistic into strings; its offset + 1 (0: absent) stands in for the pointer. */
static const uint8_t *st__keep_stat(st_parse_t *ps, const uint8_t *p, size_t n)
{
    if (!p) return NULL;
    size_t at = ps->strings.len;
    st_buf_append(&ps->strings, p, n);
    return (const uint8_t *)(uintptr_t)(at + 1);
}

/* One RowGroup, its column chunks checked against the schema's leaves. */
static int st__row_group(st_tr_t *r, st_parse_t *ps)
{
    const st_pq_layout_t *l = ps->lay;
    int16_t last = 0, id;
    int t;
    bool bv;
    st_pq_colmeta_t cols[ST_PQ_MAX_NODES];
    size_t ncols = 0;
    st_pq_rowgroup_t g = {0};
    memset(cols, 0, sizeof cols);
    if (!st_tr_enter(r)) return ST_EINVAL;
    while (st_tr_field(r, &last, &id, &t, &bv)) {
        if (id == 1 && t == ST_TC_LIST) {
            int elem;
            size_t n;
            /* exactly one list of exactly our columns (a repeated field would overflow) */
            if (ncols || !st_tr_list(r, &elem, &n) || elem != ST_TC_STRUCT ||
                n != (size_t)(l->nleaves - l->nmissing)) {
                r->ok = false;
                break;
            }
            for (size_t i = 0; i < n && r->ok; i++)
                st__pq_column_chunk(r, &cols[ncols++]);
        } else if (id == 3 && t == ST_TC_I64) {
            g.rows = st_tr_int(r);
        } else {
            st_tr_skip(r, t);
        }
    }
    st_tr_leave(r);
    if (!r->ok || ncols == 0 || ncols != (size_t)(l->nleaves - l->nmissing) || g.rows <= 0)
        return ST_EINVAL;
    uint64_t lo = UINT64_MAX, hi = 0;
    size_t first = ps->chunks.len;
    for (int i = 0, fc = 0; i < l->nleaves; i++) {
        const st_pq_node_t *leaf = &l->nodes[l->leaf_node[i]];
        if (leaf->missing) { /* its chunk all zero (placed at the group's start below) */
            st_pq_chunk_t none = {0};
            st_buf_append(&ps->chunks, &none, sizeof none);
            continue;
        }
        st_pq_colmeta_t *c = &cols[fc++];
        /* a dictionary page, when there is one, starts the chunk (only strings have them) */
        if (c->dict) {
            if (leaf->type != ST_PQ_BYTE_ARRAY || c->dict_offset >= c->offset) return ST_EINVAL;
            c->offset = c->dict_offset;
        }
        /* a flat column has one entry per row, a repeated one at least that */
        if (c->type != leaf->type || c->codec != 6 ||
            (leaf->repl ? c->values < g.rows : c->values != g.rows) || c->offset < 4 ||
            c->size == 0 || c->offset > ps->data_end || c->size > ps->data_end - c->offset)
            return ST_EINVAL;
        st_pq_chunk_t ch = {.offset = c->offset,
                            .length = c->size,
                            .values = c->values,
                            .nulls = c->nulls,
                            .min_len = c->min_len,
                            .max_len = c->max_len,
                            .required = leaf->narrowed};
        ch.min = st__keep_stat(ps, c->min, c->min_len);
        ch.max = st__keep_stat(ps, c->max, c->max_len);
        st_buf_append(&ps->chunks, &ch, sizeof ch);
        if (c->offset < lo) lo = c->offset;
        if (c->offset + c->size > hi) hi = c->offset + c->size;
    }
    g.offset = lo;
    g.length = hi - lo;
    for (int i = 0; i < l->nleaves; i++) /* a missing leaf's chunk: empty, inside the group */
        if (l->nodes[l->leaf_node[i]].missing)
            ((st_pq_chunk_t *)(void *)(ps->chunks.data + first))[i].offset = lo;
    st_buf_append(&ps->groups, &g, sizeof g);
    return ST_OK;
}

/* Moves what ps collected into one allocation owned by out. */
static void st__finish(st_parse_t *ps, st_pq_file_t *out)
{
    size_t gl = ps->groups.len, cl = ps->chunks.len;
    out->bytes = gl + cl + ps->strings.len + 1;
    char *mem = st_malloc(out->bytes);
    memcpy(mem, ps->groups.data, gl);
    memcpy(mem + gl, ps->chunks.data, cl);
    memcpy(mem + gl + cl, ps->strings.data, ps->strings.len);
    const uint8_t *strings = (const uint8_t *)mem + gl + cl;
    out->mem = mem;
    out->groups = (st_pq_rowgroup_t *)(void *)mem;
    st_pq_chunk_t *ch = (st_pq_chunk_t *)(void *)(mem + gl);
    for (size_t k = 0; k < cl / sizeof *ch; k++) {
        if (ch[k].min) ch[k].min = strings + ((uintptr_t)ch[k].min - 1);
        if (ch[k].max) ch[k].max = strings + ((uintptr_t)ch[k].max - 1);
    }
    for (size_t g = 0; g < out->ngroups; g++)
        out->groups[g].chunks = ch + g * out->nleaves;
}

int st_pq_parse_footer(const st_pq_schema_t *s, const uint8_t *p, size_t len, uint64_t file_size,
                       st_pq_file_t *out)
{
    memset(out, 0, sizeof *out);
    st_pq_layout_t *lay;
    if (file_size < len + 12 || st__pq_layout(s, &lay) != ST_OK) return ST_EINVAL;
    st_parse_t ps = {.lay = lay, .data_end = file_size - len - 8};
    st_tr_t r;
    st_tr_init(&r, p, len);
    bool schema = false;
    int rc = ST_OK;
    int16_t last = 0, id;
    int t;
    bool bv;
    while (rc == ST_OK && st_tr_field(&r, &last, &id, &t, &bv)) {
        if (id == 2 && t == ST_TC_LIST) {
            schema = st__pq_schema_check(&r, lay);
            if (!schema) break;
        } else if (id == 3 && t == ST_TC_I64) {
            out->rows = st_tr_int(&r);
        } else if (id == 4 && t == ST_TC_LIST) {
            int elem;
            size_t n;
            /* row groups are read against the schema, which comes first */
            if (!schema || !st_tr_list(&r, &elem, &n) || elem != ST_TC_STRUCT) break;
            for (size_t i = 0; i < n && rc == ST_OK; i++)
                rc = st__row_group(&r, &ps);
        } else {
            st_tr_skip(&r, t);
        }
    }
    int64_t total = 0;
    out->ngroups = ps.groups.len / sizeof(st_pq_rowgroup_t);
    out->nleaves = (size_t)lay->nleaves;
    for (size_t i = 0; i < out->ngroups; i++)
        total += ((st_pq_rowgroup_t *)(void *)ps.groups.data)[i].rows;
    if (rc == ST_OK && r.ok && schema && out->ngroups > 0 && total == out->rows)
        st__finish(&ps, out);
    else
        rc = ST_EINVAL;
    st_buf_free(&ps.groups);
    st_buf_free(&ps.chunks);
    st_buf_free(&ps.strings);
    free(lay);
    if (rc != ST_OK) memset(out, 0, sizeof *out);
    return rc;
}

void st_pq_file_free(st_pq_file_t *f)
{
    free(f->mem);
    memset(f, 0, sizeof *f);
}

/* ---- row groups ---- */

void st_pq_table_free(st_pq_table_t *t)
{
    for (size_t c = 0; c < t->ncols; c++) {
        st_pq_column_t *col = &t->cols[c];
        st_vec_free(&col->rep), st_vec_free(&col->def), st_vec_free(&col->iv);
        st_vec_free(&col->sv), st_vec_free(&col->sl);
    }
    for (size_t i = 0; i < t->mem.n; i++)
        free(t->mem.v[i]);
    st_vec_free(&t->mem);
    free(t->cols);
    free(t->lay);
    memset(t, 0, sizeof *t);
}

static void *st__parquet_read_keep(st_pq_table_t *t, void *p)
{
    st_vec_push(&t->mem, p);
    return p;
}

typedef struct {
    int page_type, encoding;
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

/* RLE / bit-packed hybrid runs of `bw`-bit values, count of them, each at most max. */
static int st__hybrid(const uint8_t *q, const uint8_t *end, int bw, uint32_t max, uint32_t *out32,
                      uint8_t *out8, size_t count)
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
                if (i == count) continue;
                if (x > max) return ST_EINVAL;
                if (out32)
                    out32[i++] = x;
                else
                    out8[i++] = (uint8_t)x;
            }
        } else {
            uint64_t run = h >> 1;
            if (run == 0 || run > count - i || (size_t)(r.end - r.p) < vbytes) return ST_EINVAL;
            uint32_t x = 0;
            for (size_t b = 0; b < vbytes; b++)
                x |= (uint32_t)*r.p++ << (8 * b);
            if (x > max) return ST_EINVAL;
            if (out32)
                for (uint64_t k = 0; k < run; k++)
                    out32[i++] = x;
            else
                memset(out8 + i, (int)x, (size_t)run), i += (size_t)run;
        }
    }
    return ST_OK;
}

/* Levels of count entries up to max, behind their 4-byte length. */
static int st__levels(const uint8_t **p, const uint8_t *end, int max, uint8_t *out, size_t count)
{
    if (end - *p < 4) return ST_EINVAL;
    uint32_t len = st__rd32(*p);
    *p += 4;
    if (len > (size_t)(end - *p)) return ST_EINVAL;
    int bw = 0;
    while ((1 << bw) <= max)
        bw++;
    int rc = st__hybrid(*p, *p + len, bw, (uint32_t)max, NULL, out, count);
    *p += len;
    return rc;
}

/* A column being decoded: the leaf, its entries so far, its dictionary. */
typedef struct {
    const st_pq_node_t *leaf;
    st_pq_column_t *col;
    size_t rows;
    const char **dv;
    uint32_t *dl;
    ST_VEC(uint32_t) idx; /* a data page's dictionary indices */
    size_t nd;
    bool have_dict;
} st_dec_t;

/* The arrays of the column's leaf take n entries; those past the column's n are decoded next
 * (a page that fails leaves them unset, and the table is freed). Room for at least
 * ST__MIN_ENTRIES is made at once, so capacities run 64, 128, ... (the cache counts a row
 * group's bytes by them, st_pq_read_group). */
static void st__grow(st_dec_t *d, size_t n)
{
    st_pq_column_t *c = d->col;
    size_t room = n > ST__MIN_ENTRIES ? n : ST__MIN_ENTRIES;
    if (d->leaf->repl) st_vec_reserve(&c->rep, room), c->rep.n = n;
    if (d->leaf->def) st_vec_reserve(&c->def, room), c->def.n = n;
    if (d->leaf->type == ST_PQ_BYTE_ARRAY) {
        st_vec_reserve(&c->sv, room), c->sv.n = n;
        st_vec_reserve(&c->sl, room), c->sl.n = n;
    } else {
        st_vec_reserve(&c->iv, room), c->iv.n = n;
    }
}

static int st__dict_page(st_dec_t *d, const uint8_t *q, const uint8_t *qend, size_t nd)
{
    if (d->have_dict || d->col->n || d->leaf->type != ST_PQ_BYTE_ARRAY ||
        nd > (size_t)(qend - q) / 4 + 1)
        return ST_EINVAL;
    d->dv = st_malloc((nd ? nd : 1) * sizeof *d->dv);
    d->dl = st_malloc((nd ? nd : 1) * sizeof *d->dl);
    for (size_t k = 0; k < nd; k++) {
        if (qend - q < 4 || st__rd32(q) > (size_t)(qend - q - 4)) return ST_EINVAL;
        d->dl[k] = st__rd32(q);
        d->dv[k] = (const char *)q + 4;
        q += 4 + d->dl[k];
    }
    d->nd = nd;
    d->have_dict = true;
    return ST_OK;
}

/* Values of the present entries [at, at + count) of a data page, from q. */
static int st__values(st_dec_t *d, const uint8_t *q, const uint8_t *qend, int encoding, size_t at,
                      size_t count)
{
    st_pq_column_t *c = d->col;
    const st_pq_node_t *leaf = d->leaf;
    size_t present = 0;
    for (size_t k = at; k < at + count; k++)
        present += !c->def.v || c->def.v[k] == leaf->def;
    if (encoding != 0) { /* dictionary indices */
        if (!d->have_dict || q >= qend || *q > 32) return ST_EINVAL;
        int bw = *q++;
        st_vec_reserve(&d->idx, present ? present : 1);
        if (bw == 0 && d->nd != 1 && present) return ST_EINVAL;
        if (bw == 0) memset(d->idx.v, 0, present * sizeof *d->idx.v);
        if (bw && st__hybrid(q, qend, bw, UINT32_MAX, d->idx.v, NULL, present) != ST_OK)
            return ST_EINVAL;
    }
    int bit = 0;
    for (size_t k = at, v = 0; k < at + count; k++) {
        bool here = !c->def.v || c->def.v[k] == leaf->def;
        if (leaf->type == ST_PQ_BYTE_ARRAY) {
            c->sv.v[k] = NULL;
            c->sl.v[k] = 0;
        } else {
            c->iv.v[k] = 0;
        }
        if (!here) continue;
        if (encoding != 0) {
            uint32_t x = d->idx.v[v++];
            if (x >= d->nd) return ST_EINVAL;
            c->sv.v[k] = d->dv[x];
            c->sl.v[k] = d->dl[x];
            continue;
        }
        size_t need = leaf->type == ST_PQ_INT64 ? 8 : leaf->type == ST_PQ_INT32 ? 4 : 0;
        if (leaf->type == ST_PQ_BOOLEAN) {
            if (q >= qend) return ST_EINVAL;
            c->iv.v[k] = (*q >> bit) & 1;
            if (++bit == 8) bit = 0, q++;
        } else if (need) {
            if ((size_t)(qend - q) < need) return ST_EINVAL;
            c->iv.v[k] = need == 8 ? (int64_t)st__rd64(q) : (int64_t)(int32_t)st__rd32(q);
            q += need;
        } else {
            if (qend - q < 4 || st__rd32(q) > (size_t)(qend - q - 4)) return ST_EINVAL;
            c->sl.v[k] = st__rd32(q);
            c->sv.v[k] = (const char *)q + 4;
            q += 4 + c->sl.v[k];
        }
    }
    return ST_OK;
}

/* Decodes the pages of one column chunk: an optional dictionary page, then data pages with
 * levels and PLAIN values or dictionary indices, until the chunk's bytes end (a flat column:
 * until it has its rows). */
static int st__read_column(st_dec_t *d, const uint8_t *p, size_t len, size_t rows, ZSTD_DCtx *dz,
                           st_pq_table_t *t)
{
    const uint8_t *end = p + len;
    st_pq_column_t *c = d->col;
    size_t cap = d->leaf->repl ? rows + ST__MAX_ENTRIES : rows;
    uint64_t raw_total = 0; /* decompressed bytes of the chunk so far (a zstd bomb stops here) */
    while (p < end && (d->leaf->repl || c->n < rows)) {
        st_tr_t r;
        st_page_t pg;
        st_tr_init(&r, p, (size_t)(end - p));
        if (!st__page_header(&r, &pg) || (uint64_t)pg.packed > (uint64_t)(end - r.p) ||
            (pg.page_type == 0 && ((uint64_t)pg.values > cap - c->n || pg.values == 0)) ||
            (raw_total += (uint64_t)pg.raw) > ST__CHUNK_RAW_MAX)
            return ST_EINVAL;
        /* a page with a CRC (every page strata writes) must match it: a flipped bit is an error,
         * never a wrong value */
        if (ST__CRC && pg.has_crc && (uint32_t)crc32(0L, r.p, (uInt)pg.packed) != pg.crc)
            return ST_EINVAL;
        uint8_t *raw = st__parquet_read_keep(t, st_malloc(pg.raw ? (size_t)pg.raw : 1));
        t->page_bytes += pg.raw ? (size_t)pg.raw : 1;
        size_t z = ZSTD_decompressDCtx(dz, raw, (size_t)pg.raw, r.p, (size_t)pg.packed);
        p = r.p + pg.packed;
        if (ZSTD_isError(z) || z != (size_t)pg.raw) return ST_EINVAL;
        const uint8_t *q = raw, *qend = raw + z;
        if (pg.page_type == 2) { /* the dictionary: PLAIN strings, before any data page */
            if (st__dict_page(d, q, qend, (size_t)pg.values) != ST_OK) return ST_EINVAL;
            continue;
        }
        size_t count = (size_t)pg.values, at = c->n;
        st__grow(d, at + count);
        if (d->leaf->repl && st__levels(&q, qend, d->leaf->repl, c->rep.v + at, count) != ST_OK)
            return ST_EINVAL;
        if (d->leaf->def && st__levels(&q, qend, d->leaf->def, c->def.v + at, count) != ST_OK)
            return ST_EINVAL;
        if (st__values(d, q, qend, pg.encoding, at, count) != ST_OK) return ST_EINVAL;
        c->n += count;
    }
    /* as many rows as the row group has, the first starting at the first entry */
    size_t starts = 0;
    for (size_t k = 0; k < c->n; k++)
        starts += !c->rep.v || c->rep.v[k] == 0;
    return starts == rows && (!c->rep.v || c->rep.v[0] == 0) ? ST_OK : ST_EINVAL;
}

/* The definition levels of a column read with one level less than the schema's leaf (fdef: the
 * file's): an entry present in the file (fdef) is present at the schema's level; one whose
 * enclosing group is null keeps its level. */
static void st__lift_def(st_pq_column_t *c, uint8_t fdef)
{
    if (!c->def.v) { /* fdef 0: every entry at level 0 */
        st_vec_reserve(&c->def, c->n ? c->n : 1);
        memset(c->def.v, 0, c->n);
        c->def.n = c->n;
    }
    for (size_t k = 0; k < c->n; k++)
        if (c->def.v[k] == fdef) c->def.v[k]++;
}

/* Whether each ADDED group the row group lacks lacks every leaf: a file has a field whole or not
 * at all (the cursor reads a group the file lacks by its first leaf). */
static bool st__absent_whole(const st_pq_table_t *t)
{
    const st_pq_layout_t *l = t->lay;
    for (int i = l->nodes[0].first; i >= 0; i = l->nodes[i].next) {
        const st_pq_node_t *n = &l->nodes[i];
        for (int k = n->leaf0; k < n->leaf0 + n->nleaf; k++)
            if (t->cols[k].absent != t->cols[n->leaf0].absent) return false;
    }
    return true;
}

int st_pq_read_group(const st_pq_schema_t *s, const st_pq_rowgroup_t *g, const uint8_t *bytes,
                     size_t len, st_pq_table_t *out)
{
    memset(out, 0, sizeof *out);
    if (len != g->length || g->rows <= 0 || (uint64_t)g->rows > len) return ST_EINVAL;
    if (st__pq_layout(s, &out->lay) != ST_OK) return ST_EINVAL;
    out->rows = g->rows;
    out->ncols = (size_t)out->lay->nleaves;
    out->cols = st_calloc(out->ncols + 1, sizeof *out->cols);
    int rc = ST_OK;
    ZSTD_DCtx *dz = ZSTD_createDCtx();
    if (!dz) st_fatal("out of memory (zstd context)");
    for (size_t c = 0; c < out->ncols && rc == ST_OK; c++) {
        const st_pq_chunk_t *ch = &g->chunks[c];
        uint64_t off = ch->offset - g->offset;
        if (ch->offset < g->offset || off > len || ch->length > len - off) {
            rc = ST_EINVAL;
            break;
        }
        const st_pq_node_t *leaf = &out->lay->nodes[out->lay->leaf_node[c]];
        if (ch->length == 0 && leaf->added) { /* the file lacks its field: nulls */
            out->cols[c].n = (size_t)g->rows;
            out->cols[c].absent = true;
            continue;
        }
        /* a file's REQUIRED leaf the schema has OPTIONAL: decoded with the file's levels, then
         * lifted to the schema's (its values are all present) */
        st_pq_node_t file_leaf = *leaf;
        if (ch->required && (leaf->kind != ST_PQN_LEAF || leaf->rep != ST_PQ_OPTIONAL)) {
            rc = ST_EINVAL;
            break;
        }
        if (ch->required) file_leaf.def--;
        st_dec_t d = {.leaf = &file_leaf, .col = &out->cols[c]};
        rc = st__read_column(&d, bytes + off, (size_t)ch->length, (size_t)g->rows, dz, out);
        if (rc == ST_OK && ch->required) st__lift_def(&out->cols[c], file_leaf.def);
        /* rep, def (a byte each), then an int64 or a pointer and a length per entry at most, for
         * every entry the arrays have room for (the value array's capacity: every decoded leaf
         * has one, of either kind) */
        size_t cap = out->cols[c].iv.cap + out->cols[c].sv.cap;
        out->bytes += cap * (2 + sizeof(int64_t) + sizeof(char *) + sizeof(uint32_t));
        free(d.dv);
        free(d.dl);
        st_vec_free(&d.idx);
    }
    ZSTD_freeDCtx(dz);
    if (rc == ST_OK && !st__absent_whole(out)) rc = ST_EINVAL;
    out->bytes += out->page_bytes + sizeof *out->lay + (out->ncols + 1) * sizeof *out->cols +
                  out->mem.cap * sizeof *out->mem.v;
    if (rc != ST_OK) st_pq_table_free(out);
    return rc;
}
