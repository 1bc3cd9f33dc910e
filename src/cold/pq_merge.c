/* SPDX-License-Identifier: MIT */
/*
 * The tier's merge of any kind's Parquet objects, on a compaction's worker (st_tier_pq_merge,
 * see strata/tier.h): each old object read whole against the kind's schema, every row copied
 * through a cursor into a tape of values (the schema says what each value is, so the copy knows
 * nothing of the columns), each row handed to the kind's hook if it has one (it may change values
 * or leave the row out), the rows sorted by their id (the sort leaf; by the key leaf first when the
 * kind asks), and the tape replayed into the writer. A row held twice is an error: the manifest is
 * not what the tier thinks.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

enum {
    ST__T_NULL = ST_TIER_V_NULL,
    ST__T_INT = ST_TIER_V_INT,
    ST__T_STR = ST_TIER_V_STR,
    ST__T_STRUCT = ST_TIER_V_STRUCT,
    ST__T_LIST = ST_TIER_V_LIST,
    ST__T_SPLICE = ST_TIER_V_SPLICE
};

typedef st_tier_val_t st_tok_t;

typedef struct {
    uint64_t id;
    size_t first;         /* its first token */
    const st_tok_t *toks; /* the tape's, set for the sort */
    size_t key;           /* the key's token: first + its offset (by_key) */
} st_trow_t;

typedef struct {
    ST_VEC(st_tok_t) toks;
    ST_VEC(st_trow_t) rows;
    ST_VEC(st_pq_table_t) tables;
    const st_pq_schema_t *s;
    const st_tier_pqmerge_t *o;
    size_t at;                /* replay: the next token */
    ST_VEC(size_t) starts;    /* the row being read: each top-level field's first token */
    ST_VEC(st_tok_t) scratch; /* a row being spliced: its tokens as the hook left them */
} st_tape_t;

static void st__tok(st_tape_t *tp, uint8_t op, uint32_t n, int64_t i, const char *p)
{
    st_tok_t t = {op, n, i, {p}};
    st_vec_push(&tp->toks, t);
}

static void st__pqm_copy(st_tape_t *tp, st_pq_cur_t *c, const st_pq_field_t *f)
{
    if (f->type == ST_PQ_GROUP && f->logical == ST_PQ_LIST) {
        size_t n;
        if (!st_pq_get_list(c, &n)) {
            st__tok(tp, ST__T_NULL, 0, 0, NULL);
            return;
        }
        st__tok(tp, ST__T_LIST, (uint32_t)n, 0, NULL);
        for (size_t k = 0; k < n; k++)
            st__pqm_copy(tp, c, &f->children[0]);
    } else if (f->type == ST_PQ_GROUP) {
        if (!st_pq_get_struct(c)) {
            st__tok(tp, ST__T_NULL, 0, 0, NULL);
            return;
        }
        st__tok(tp, ST__T_STRUCT, 0, 0, NULL);
        for (size_t k = 0; k < f->nchildren; k++)
            st__pqm_copy(tp, c, &f->children[k]);
    } else if (f->type == ST_PQ_BYTE_ARRAY) {
        const char *p;
        size_t n;
        if (st_pq_get_str(c, &p, &n))
            st__tok(tp, ST__T_STR, (uint32_t)n, 0, p);
        else
            st__tok(tp, ST__T_NULL, 0, 0, NULL);
    } else {
        int64_t v;
        if (st_pq_get_i64(c, &v))
            st__tok(tp, ST__T_INT, 0, v, NULL);
        else
            st__tok(tp, ST__T_NULL, 0, 0, NULL);
    }
}

static void st__replay(st_tape_t *tp, st_pq_rec_t *r, const st_pq_field_t *f)
{
    const st_tok_t *t = &tp->toks.v[tp->at++];
    if (t->op == ST__T_NULL) {
        st_pq_put_null(r);
    } else if (t->op == ST__T_LIST) {
        st_pq_put_list(r, t->n);
        for (uint32_t k = 0; k < t->n; k++)
            st__replay(tp, r, &f->children[0]);
    } else if (t->op == ST__T_STRUCT) {
        st_pq_put_struct(r);
        for (size_t k = 0; k < f->nchildren; k++)
            st__replay(tp, r, &f->children[k]);
    } else if (t->op == ST__T_STR) {
        st_pq_put_str(r, t->p, t->n);
    } else if (f->type == ST_PQ_INT32) {
        st_pq_put_i32(r, (int32_t)t->i);
    } else if (f->type == ST_PQ_BOOLEAN) {
        st_pq_put_bool(r, t->i != 0);
    } else {
        st_pq_put_i64(r, t->i);
    }
}

static void st__pq_merge_row(void *arg, size_t i, st_pq_rec_t *r)
{
    st_tape_t *tp = arg;
    tp->at = tp->rows.v[i].first;
    for (size_t k = 0; k < tp->s->nfields; k++)
        st__replay(tp, r, &tp->s->fields[k]);
}

static int st__by_id(const void *a, const void *b)
{
    uint64_t x = ((const st_trow_t *)a)->id, y = ((const st_trow_t *)b)->id;
    return x < y ? -1 : x > y;
}

static int st__by_key(const void *a, const void *b)
{
    const st_trow_t *x = a, *y = b;
    const st_tok_t *p = &x->toks[x->key], *q = &y->toks[y->key];
    if (p->op == ST__T_STR && q->op == ST__T_STR) {
        int c = memcmp(p->p, q->p, p->n < q->n ? p->n : q->n);
        if (c) return c;
        if (p->n != q->n) return p->n < q->n ? -1 : 1;
    } else if (p->i != q->i) {
        return p->i < q->i ? -1 : 1;
    }
    return st__by_id(a, b);
}

/* The top-level field that is leaf, when every field before it is a leaf too (its value is then
 * the row's token at that index); -1 otherwise. */
static int st__field_of_leaf(const st_pq_schema_t *s, int leaf)
{
    for (size_t i = 0; i < s->nfields && (int)i <= leaf; i++)
        if (s->fields[i].type == ST_PQ_GROUP) return -1;
    return leaf >= 0 && (size_t)leaf < s->nfields ? leaf : -1;
}

/* The row from token first rewritten with the splices its hook left (ST_TIER_V_SPLICE as a
 * top-level field's first token: that field's values are the splice's). */
static void st__splice(st_tape_t *tp, size_t first)
{
    size_t nf = tp->s->nfields;
    bool any = false;
    for (size_t k = 0; k < nf && !any; k++)
        any = tp->toks.v[tp->starts.v[k]].op == ST__T_SPLICE;
    if (!any) return;
    st_vec_reserve(&tp->scratch, tp->toks.n - first);
    memcpy(tp->scratch.v, tp->toks.v + first, (tp->toks.n - first) * sizeof *tp->toks.v);
    tp->scratch.n = tp->toks.n - first;
    tp->toks.n = first;
    for (size_t k = 0; k < nf; k++) {
        size_t a = tp->starts.v[k] - first, b = tp->starts.v[k + 1] - first;
        const st_tok_t *head = &tp->scratch.v[a];
        const st_tok_t *from = head->op == ST__T_SPLICE ? head->sub : head;
        size_t n = head->op == ST__T_SPLICE ? head->n : b - a;
        for (size_t i = 0; i < n; i++)
            st_vec_push(&tp->toks, from[i]);
    }
}

/* Every row of one object onto the tape (its tables kept: the strings point into them). */
static int st__read(st_tape_t *tp, st_objstore_t *obj, const char *key, uint64_t size)
{
    st_buf_t b = {0};
    uint32_t flen;
    st_pq_file_t f = {0};
    int rc = size >= 12 ? st_objstore_get(obj, key, 0, size, &b) : ST_EINVAL;
    if (rc == ST_OK && b.len != size) rc = ST_EIO;
    if (rc == ST_OK) rc = st_pq_footer_len((const uint8_t *)b.data + size - 8, size, &flen);
    if (rc == ST_OK)
        rc = st_pq_parse_footer(tp->s, (const uint8_t *)b.data + size - 8 - flen, flen, size, &f);
    for (size_t g = 0; rc == ST_OK && g < f.ngroups; g++) {
        const st_pq_rowgroup_t *G = &f.groups[g];
        st_pq_table_t t;
        if (G->offset + G->length > size) {
            rc = ST_EINVAL;
            break;
        }
        rc = st_pq_read_group(tp->s, G, (const uint8_t *)b.data + G->offset, G->length, &t);
        if (rc != ST_OK) break;
        st_vec_push(&tp->tables, t);
        const st_pq_table_t *tab = &tp->tables.v[tp->tables.n - 1];
        st_pq_cur_t c;
        st_pq_cur_init(&c, tab);
        for (size_t i = 0; st_pq_cur_next(&c); i++) {
            st_trow_t row = {st_tier_row_id(tp->s, tab, i), tp->toks.n, NULL, 0};
            tp->starts.n = 0;
            for (size_t k = 0; k < tp->s->nfields; k++) {
                st_vec_push(&tp->starts, tp->toks.n);
                st__pqm_copy(tp, &c, &tp->s->fields[k]);
            }
            st_vec_push(&tp->starts, tp->toks.n);
            if (tp->o && tp->o->row &&
                !tp->o->row(tp->o->arg, tp->toks.v + row.first, tp->toks.n - row.first)) {
                tp->toks.n = row.first; /* left out */
                continue;
            }
            if (tp->o && tp->o->row) st__splice(tp, row.first);
            st_vec_push(&tp->rows, row);
        }
        rc = st_pq_cur_done(&c);
    }
    if (f.mem) st_pq_file_free(&f);
    st_buf_free(&b);
    return rc == ST_ENOTFOUND ? ST_EIO : rc;
}

int st_tier_pq_merge(const st_pq_schema_t *s, size_t group_rows, int zstd_level, st_objstore_t *obj,
                     const st_tier_obj_t *objs, size_t nold, const char *key, st_tier_file_t *out)
{
    st_tier_pqmerge_t o = {.group_rows = group_rows, .zstd_level = zstd_level};
    return st_tier_pq_merge_with(s, &o, obj, objs, nold, key, out);
}

int st_tier_pq_merge_with(const st_pq_schema_t *s, const st_tier_pqmerge_t *o, st_objstore_t *obj,
                          const st_tier_obj_t *objs, size_t nold, const char *key,
                          st_tier_file_t *out)
{
    st_tape_t tp = {.s = s, .o = o};
    size_t group_rows = o->group_rows;
    int zstd_level = o->zstd_level;
    int kf = o->by_key ? st__field_of_leaf(s, s->key_leaf) : -1;
    int rc = s->sort_leaf >= 0 && (!o->by_key || kf >= 0) ? ST_OK : ST_EINVAL;
    for (size_t i = 0; i < nold && rc == ST_OK; i++)
        rc = st__read(&tp, obj, objs[i].key, objs[i].file.size);
    if (rc == ST_OK && kf >= 0) {
        for (size_t i = 0; i < tp.rows.n; i++) {
            tp.rows.v[i].toks = tp.toks.v;
            tp.rows.v[i].key = tp.rows.v[i].first + (size_t)kf;
        }
    }
    if (rc == ST_OK && tp.rows.n > 1)
        qsort(tp.rows.v, tp.rows.n, sizeof *tp.rows.v, kf >= 0 ? st__by_key : st__by_id);
    for (size_t i = 1; rc == ST_OK && i < tp.rows.n; i++)
        if (tp.rows.v[i].id == tp.rows.v[i - 1].id) rc = ST_EINTERNAL; /* a row held twice */
    out->rows = (int64_t)tp.rows.n;
    out->min_id = UINT64_MAX;
    out->max_id = 0;
    for (size_t i = 0; i < tp.rows.n; i++) {
        if (tp.rows.v[i].id < out->min_id) out->min_id = tp.rows.v[i].id;
        if (tp.rows.v[i].id > out->max_id) out->max_id = tp.rows.v[i].id;
    }
    if (!tp.rows.n) out->min_id = 0;
    out->size = 0;
    if (rc == ST_OK && tp.rows.n) {
        st_buf_t file = {0};
        st_pq_write_t w = {.schema = o->out ? o->out : s,
                           .nrows = tp.rows.n,
                           .row = st__pq_merge_row,
                           .arg = &tp,
                           .group_rows = group_rows,
                           .zstd_level = zstd_level};
        rc = st_pq_write(&w, &file);
        if (rc == ST_OK) rc = st_tier_put_parquet(obj, key, file.data, file.len);
        out->size = file.len;
        st_buf_free(&file);
    }
    for (size_t i = 0; i < tp.tables.n; i++)
        st_pq_table_free(&tp.tables.v[i]);
    st_vec_free(&tp.tables);
    st_vec_free(&tp.toks);
    st_vec_free(&tp.rows);
    st_vec_free(&tp.starts);
    st_vec_free(&tp.scratch);
    return rc;
}
