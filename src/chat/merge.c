/* SPDX-License-Identifier: MIT */
/*
 * Chat's merge of message objects, on a compaction's worker (see strata/chatrows.h): the old
 * objects read whole, their pages verified, their rows merged (one row group per conversation, id
 * order, statistics, ZSTD, page CRCs) into the new object, rows older than the retention left
 * out and counted per conversation for chat's side of the swap.
 */
#include "strata/chatrows.h"

#include <stdlib.h>
#include <string.h>

int st_chat_cmp_rows(const void *a, const void *b)
{
    const st_msgrow_t *x = a, *y = b;
    size_t n = x->conv_len < y->conv_len ? x->conv_len : y->conv_len;
    int c = memcmp(x->conv, y->conv, n);
    if (c) return c;
    if (x->conv_len != y->conv_len) return x->conv_len < y->conv_len ? -1 : 1;
    return x->msg_id < y->msg_id ? -1 : x->msg_id > y->msg_id;
}

typedef ST_VEC(st_pq_rows_t) st_groups_t;

/* Every row group of one object, decoded (pages verified), appended to gs. */
static int st__read_object(st_objstore_t *obj, const char *key, uint64_t size, st_groups_t *gs)
{
    st_buf_t b = {0};
    st_pq_meta_t m;
    uint32_t flen;
    int rc = size >= 12 ? st_objstore_get(obj, key, 0, size, &b) : ST_EINVAL;
    if (rc == ST_OK && b.len != size) rc = ST_EIO;
    if (rc == ST_OK) rc = st_parquet_footer_len((const uint8_t *)b.data + size - 8, size, &flen);
    if (rc == ST_OK)
        rc = st_parquet_parse_footer((const uint8_t *)b.data + size - 8 - flen, flen, size, &m);
    if (rc != ST_OK) {
        st_buf_free(&b);
        return rc == ST_ENOTFOUND ? ST_EIO : rc;
    }
    for (size_t g = 0; g < m.ngroups && rc == ST_OK; g++) {
        const st_pq_group_t *G = &m.groups[g];
        if (G->offset + G->length > size) {
            rc = ST_EINVAL;
            break;
        }
        st_vec_reserve(gs, gs->n + 1);
        rc =
            st_parquet_read_group(G, (const uint8_t *)b.data + G->offset, G->length, &gs->v[gs->n]);
        if (rc == ST_OK) gs->n++;
    }
    st_parquet_meta_free(&m);
    st_buf_free(&b);
    return rc;
}

/* Counts a row left out in d (per conversation: u32 length, the id, i64 rows dropped). */
static void st__note_dropped(st_buf_t *d, const st_msgrow_t *r)
{
    /* rows come grouped by conversation: the last entry is the only candidate */
    size_t at = d->len;
    if (d->len) {
        size_t p = 0, last = 0;
        while (p < d->len) {
            uint32_t l;
            memcpy(&l, d->data + p, 4);
            last = p;
            p += 4 + l + 8;
        }
        uint32_t l;
        memcpy(&l, d->data + last, 4);
        if (l == r->conv_len && memcmp(d->data + last + 4, r->conv, l) == 0) at = last;
    }
    if (at == d->len) {
        uint32_t l = r->conv_len;
        int64_t zero = 0;
        st_buf_append(d, &l, 4);
        st_buf_append(d, r->conv, l);
        st_buf_append(d, &zero, 8);
    }
    uint32_t l;
    memcpy(&l, d->data + at, 4);
    int64_t cnt;
    memcpy(&cnt, d->data + at + 4 + l, 8);
    cnt++;
    memcpy(d->data + at + 4 + l, &cnt, 8);
}

/* Sorts the rows, checks none is held twice, and leaves out those older than cutoff (noted in
 * dropped); the rows kept are compacted at the front. */
static int st__keep(st_msgrow_t *rows, size_t n, int64_t cutoff, st_tier_file_t *out,
                    st_buf_t *dropped, int64_t *ndropped, size_t *kept)
{
    qsort(rows, n, sizeof *rows, st_chat_cmp_rows);
    size_t keep = 0;
    out->min_id = UINT64_MAX;
    out->max_id = 0;
    for (size_t i = 0; i < n; i++) {
        if (i && st_chat_cmp_rows(&rows[i], &rows[i - 1]) == 0)
            return ST_EINTERNAL; /* a row held twice: the manifest is not what we think */
        if (cutoff && rows[i].timestamp < cutoff) {
            st__note_dropped(dropped, &rows[i]);
            (*ndropped)++;
            continue;
        }
        if (rows[i].msg_id < out->min_id) out->min_id = rows[i].msg_id;
        if (rows[i].msg_id > out->max_id) out->max_id = rows[i].msg_id;
        rows[keep++] = rows[i];
    }
    out->rows = (int64_t)keep;
    *kept = keep;
    return ST_OK;
}

int st_chat_parquet_merge(int zstd_level, st_objstore_t *obj, const st_tier_obj_t *objs,
                          size_t nold, int64_t cutoff, const char *key, st_tier_file_t *out,
                          void **dropped, int64_t *ndropped, bool (*fix)(void *arg, st_msgrow_t *r),
                          void *fix_arg)
{
    st_groups_t gs = {0};
    int rc = ST_OK;
    for (size_t i = 0; i < nold && rc == ST_OK; i++)
        rc = st__read_object(obj, objs[i].key, objs[i].file.size, &gs);
    size_t total = 0, n = 0, keep = 0;
    for (size_t g = 0; g < gs.n; g++)
        total += gs.v[g].n;
    st_msgrow_t *rows = st_malloc((total ? total : 1) * sizeof *rows);
    for (size_t g = 0; g < gs.n && rc == ST_OK; g++)
        for (size_t i = 0; i < gs.v[g].n; i++) {
            rows[n] = gs.v[g].rows[i];
            if (!fix || fix(fix_arg, &rows[n])) n++;
        }
    st_buf_t *d = st_calloc(1, sizeof *d);
    *dropped = d;
    if (rc == ST_OK) rc = st__keep(rows, n, cutoff, out, d, ndropped, &keep);
    if (rc == ST_OK && keep) {
        st_buf_t file = {0};
        rc = st_parquet_encode(rows, keep, zstd_level, &file);
        if (rc == ST_OK) rc = st_objstore_put(obj, key, file.data, file.len);
        out->size = file.len;
        st_buf_free(&file);
    }
    free(rows);
    for (size_t g = 0; g < gs.n; g++)
        st_parquet_rows_free(&gs.v[g]);
    st_vec_free(&gs);
    return rc;
}

bool st_chat_dropped_next(const void *dropped, size_t *pos, const char **g, size_t *gl,
                          int64_t *rows)
{
    const st_buf_t *d = dropped;
    if (!d || *pos >= d->len) return false;
    uint32_t l;
    memcpy(&l, d->data + *pos, 4);
    *g = d->data + *pos + 4;
    *gl = l;
    memcpy(rows, *g + l, 8);
    *pos += 4 + l + 8;
    return true;
}

void st_chat_dropped_free(void *arg, void *dropped)
{
    (void)arg;
    st_buf_free(dropped);
    free(dropped);
}
