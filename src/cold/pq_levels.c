/* SPDX-License-Identifier: MIT */
/*
 * Repetition and definition levels (Dremel's record shredding and assembly). A kind gives a row
 * as a stream of values in schema order; the writer's side (st_pq_put_*) walks the schema with
 * them and appends one entry (rep, def, value) per leaf and value, or per leaf under a null or an
 * empty list. The reader's cursor (st_pq_get_*) walks the same way over decoded columns and
 * checks each entry's levels against what the schema allows there, so damaged levels end as an
 * error, never as an out-of-bounds read or a value from the wrong row.
 *
 * The repetition level of a leaf's next entry is 0 at a row's start, and the level of a LIST's
 * repeated group when that list's second or later element begins; every element writes at least
 * one entry per leaf under it, so one level per leaf is enough state.
 */
#include "pq_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- writing ---- */

void st__pq_rec_init(st_pq_rec_t *r, const st_pq_layout_t *l)
{
    memset(r, 0, sizeof *r);
    r->lay = l;
    r->cols = st_calloc((size_t)l->nleaves + 1, sizeof *r->cols);
    r->next_rep = st_calloc((size_t)l->nleaves + 1, 1);
}

void st__pq_rec_free(st_pq_rec_t *r)
{
    for (int c = 0; c < r->lay->nleaves; c++) {
        st_pq_column_t *col = &r->cols[c];
        st_vec_free(&col->rep), st_vec_free(&col->def), st_vec_free(&col->iv);
        st_vec_free(&col->sv), st_vec_free(&col->sl);
    }
    free(r->cols);
    free(r->next_rep);
}

void st__pq_rec_row_begin(st_pq_rec_t *r)
{
    r->top = 1;
    r->node[0] = 0;
    r->child[0] = r->lay->nodes[0].first;
}

bool st__pq_rec_row_end(st_pq_rec_t *r)
{
    return !r->bad && r->top == 0;
}

void st__pq_rec_shift(st_pq_rec_t *r, const size_t *from)
{
    for (int c = 0; c < r->lay->nleaves; c++) {
        st_pq_column_t *col = &r->cols[c];
        size_t keep = col->n - from[c];
        if (keep && from[c]) {
            memmove(col->rep.v, col->rep.v + from[c], keep);
            memmove(col->def.v, col->def.v + from[c], keep);
            if (col->iv.v) memmove(col->iv.v, col->iv.v + from[c], keep * sizeof *col->iv.v);
            if (col->sv.v) {
                memmove(col->sv.v, col->sv.v + from[c], keep * sizeof *col->sv.v);
                memmove(col->sl.v, col->sl.v + from[c], keep * sizeof *col->sl.v);
            }
        }
        col->n = col->rep.n = col->def.n = keep;
        if (col->iv.v) col->iv.n = keep;
        if (col->sv.v) col->sv.n = col->sl.n = keep;
    }
}

/* Appends an entry to leaf c: its value (iv or sv/sl) when def is the leaf's own level. */
static void st__entry(st_pq_rec_t *r, int c, uint8_t def, int64_t iv, const char *sv, size_t sl)
{
    st_pq_column_t *col = &r->cols[c];
    const st_pq_node_t *leaf = &r->lay->nodes[r->lay->leaf_node[c]];
    bool str = leaf->type == ST_PQ_BYTE_ARRAY;
    if (sl > UINT32_MAX) r->bad = true;
    st_vec_push(&col->rep, r->next_rep[c]);
    st_vec_push(&col->def, def);
    if (str) {
        st_vec_push(&col->sv, sv);
        st_vec_push(&col->sl, (uint32_t)sl);
    } else {
        st_vec_push(&col->iv, iv);
    }
    col->n++;
    r->next_rep[c] = 0;
}

/* The node the next value is for, consumed from its frame; -1 when the row has no more. */
static int st__take(st_pq_rec_t *r)
{
    if (r->bad || r->top == 0) return r->bad = true, -1;
    const st_pq_layout_t *l = r->lay;
    int f = r->top - 1, x;
    const st_pq_node_t *n = &l->nodes[r->node[f]];
    if (n->kind == ST_PQN_STRUCT) {
        x = r->child[f];
        r->child[f] = l->nodes[x].next;
    } else { /* a LIST with elements left: its element */
        const st_pq_node_t *rep = &l->nodes[n->first];
        x = rep->first;
        if (r->k[f]++ > 0) memset(r->next_rep + rep->leaf0, rep->repl, (size_t)rep->nleaf);
        r->left[f]--;
    }
    return x;
}

/* Closes the frames whose values are all given. */
static void st__settle(st_pq_rec_t *r)
{
    while (r->top > 0) {
        int f = r->top - 1;
        if (r->lay->nodes[r->node[f]].kind == ST_PQN_STRUCT ? r->child[f] >= 0 : r->left[f] > 0)
            break;
        r->top--;
    }
}

/* A leaf's value: the next node must be a leaf of physical type `type`. */
static void st__leaf(st_pq_rec_t *r, int type, int64_t iv, const char *sv, size_t sl)
{
    int x = st__take(r);
    if (x < 0) return;
    const st_pq_node_t *n = &r->lay->nodes[x];
    if (n->kind != ST_PQN_LEAF || n->type != type) {
        r->bad = true;
        return;
    }
    st__entry(r, n->leaf, n->def, iv, sv, sl);
    st__settle(r);
}

void st_pq_put_i64(st_pq_rec_t *r, int64_t v)
{
    st__leaf(r, ST_PQ_INT64, v, NULL, 0);
}

void st_pq_put_i32(st_pq_rec_t *r, int32_t v)
{
    st__leaf(r, ST_PQ_INT32, v, NULL, 0);
}

void st_pq_put_bool(st_pq_rec_t *r, bool v)
{
    st__leaf(r, ST_PQ_BOOLEAN, v, NULL, 0);
}

void st_pq_put_str(st_pq_rec_t *r, const void *p, size_t n)
{
    st__leaf(r, ST_PQ_BYTE_ARRAY, 0, p ? p : "", n);
}

/* One entry at level def for every leaf under node n (a null or an empty list). */
static void st__fill(st_pq_rec_t *r, const st_pq_node_t *n, uint8_t def)
{
    for (int c = n->leaf0; c < n->leaf0 + n->nleaf; c++)
        st__entry(r, c, def, 0, NULL, 0);
}

void st_pq_put_null(st_pq_rec_t *r)
{
    int x = st__take(r);
    if (x < 0) return;
    const st_pq_node_t *n = &r->lay->nodes[x];
    if (n->rep != ST_PQ_OPTIONAL) {
        r->bad = true;
        return;
    }
    st__fill(r, n, (uint8_t)(n->def - 1));
    st__settle(r);
}

static void st__open(st_pq_rec_t *r, int x, size_t left)
{
    if (r->top > ST_PQ_MAX_DEPTH) {
        r->bad = true;
        return;
    }
    int f = r->top++;
    r->node[f] = x;
    r->child[f] = r->lay->nodes[x].first;
    r->left[f] = left;
    r->k[f] = 0;
}

void st_pq_put_struct(st_pq_rec_t *r)
{
    int x = st__take(r);
    if (x < 0) return;
    if (r->lay->nodes[x].kind != ST_PQN_STRUCT) {
        r->bad = true;
        return;
    }
    st__open(r, x, 0);
}

void st_pq_put_list(st_pq_rec_t *r, size_t n)
{
    int x = st__take(r);
    if (x < 0) return;
    const st_pq_node_t *l = &r->lay->nodes[x];
    if (l->kind != ST_PQN_LIST) {
        r->bad = true;
        return;
    }
    if (n == 0) {
        st__fill(r, l, l->def);
        st__settle(r);
        return;
    }
    st__open(r, x, n);
}

/* ---- reading ---- */

void st_pq_cur_init(st_pq_cur_t *c, const st_pq_table_t *t)
{
    memset(c, 0, sizeof *c);
    c->t = t;
    c->pos = st_calloc((size_t)t->lay->nleaves + 1, sizeof *c->pos);
    c->expect = st_calloc((size_t)t->lay->nleaves + 1, 1);
    c->row = -1;
    c->ok = true;
}

int st_pq_cur_done(st_pq_cur_t *c)
{
    free(c->pos);
    free(c->expect);
    c->pos = NULL;
    c->expect = NULL;
    return c->ok ? ST_OK : ST_EINVAL;
}

static bool st__fail(st_pq_cur_t *c)
{
    c->ok = false;
    return false;
}

bool st_pq_cur_next(st_pq_cur_t *c)
{
    if (!c->ok) return false;
    const st_pq_layout_t *l = c->t->lay;
    if (c->row >= 0 && c->top != 0) return st__fail(c); /* the last row was not read whole */
    c->row++;
    bool end = c->row >= c->t->rows;
    for (int k = 0; k < l->nleaves; k++) {
        const st_pq_column_t *col = &c->t->cols[k];
        /* every column starts the row here, or every one has ended */
        if (end ? c->pos[k] != col->n
                : c->pos[k] >= col->n || (col->rep.v && col->rep.v[c->pos[k]]))
            return st__fail(c);
    }
    if (end) return false;
    c->top = 1;
    c->node[0] = 0;
    c->child[0] = l->nodes[0].first;
    return true;
}

/* As st__take, for the cursor. */
static int st__next_node(st_pq_cur_t *c)
{
    if (!c->ok || c->top == 0) return st__fail(c), -1;
    const st_pq_layout_t *l = c->t->lay;
    int f = c->top - 1, x;
    const st_pq_node_t *n = &l->nodes[c->node[f]];
    if (n->kind == ST_PQN_STRUCT) {
        x = c->child[f];
        c->child[f] = l->nodes[x].next;
    } else {
        const st_pq_node_t *rep = &l->nodes[n->first];
        x = rep->first;
        if (c->k[f]++ > 0) memset(c->expect + rep->leaf0, rep->repl, (size_t)rep->nleaf);
        c->left[f]--;
    }
    return x;
}

static void st__cur_settle(st_pq_cur_t *c)
{
    while (c->top > 0) {
        int f = c->top - 1;
        if (c->t->lay->nodes[c->node[f]].kind == ST_PQN_STRUCT ? c->child[f] >= 0 : c->left[f] > 0)
            break;
        c->top--;
    }
}

/* The definition level of leaf k's next entry, checking its repetition level; -1 if none. */
static int st__peek(st_pq_cur_t *c, int k)
{
    const st_pq_column_t *col = &c->t->cols[k];
    size_t p = c->pos[k];
    if (p >= col->n || (col->rep.v ? col->rep.v[p] : 0) != c->expect[k]) return -1;
    return col->def.v ? col->def.v[p] : 0;
}

/* Consumes one entry of every leaf under n, each of which must be at level def. */
static bool st__skip(st_pq_cur_t *c, const st_pq_node_t *n, int def)
{
    for (int k = n->leaf0; k < n->leaf0 + n->nleaf; k++) {
        if (st__peek(c, k) != def) return st__fail(c);
        c->pos[k]++;
        c->expect[k] = 0;
    }
    return true;
}

/* A value of the next node, which must be of kind `kind`: 1 present, 0 null (consumed),
 * -1 error. */
static int st__pq_levels_present(st_pq_cur_t *c, int kind, int *x)
{
    *x = st__next_node(c);
    if (*x < 0) return -1;
    const st_pq_node_t *n = &c->t->lay->nodes[*x];
    if (n->kind != kind) return st__fail(c), -1;
    if (c->t->cols[n->leaf0].absent) { /* a field the file lacks (every leaf of it): null */
        for (int k = n->leaf0; k < n->leaf0 + n->nleaf; k++) {
            if (!c->t->cols[k].absent || c->pos[k] >= c->t->cols[k].n) return st__fail(c), -1;
            c->pos[k]++;
        }
        st__cur_settle(c);
        return 0;
    }
    int d = st__peek(c, n->leaf0);
    if (d >= n->def) return 1;
    if (n->rep != ST_PQ_OPTIONAL || d != n->def - 1 || !st__skip(c, n, d)) return st__fail(c), -1;
    st__cur_settle(c);
    return 0;
}

bool st_pq_get_i64(st_pq_cur_t *c, int64_t *v)
{
    int x;
    *v = 0;
    if (st__pq_levels_present(c, ST_PQN_LEAF, &x) <= 0) return false;
    const st_pq_node_t *n = &c->t->lay->nodes[x];
    const st_pq_column_t *col = &c->t->cols[n->leaf];
    if (n->type == ST_PQ_BYTE_ARRAY || st__peek(c, n->leaf) != n->def) return st__fail(c);
    *v = col->iv.v[c->pos[n->leaf]++];
    c->expect[n->leaf] = 0;
    st__cur_settle(c);
    return true;
}

bool st_pq_get_str(st_pq_cur_t *c, const char **p, size_t *len)
{
    int x;
    *p = NULL;
    *len = 0;
    if (st__pq_levels_present(c, ST_PQN_LEAF, &x) <= 0) return false;
    const st_pq_node_t *n = &c->t->lay->nodes[x];
    const st_pq_column_t *col = &c->t->cols[n->leaf];
    if (n->type != ST_PQ_BYTE_ARRAY || st__peek(c, n->leaf) != n->def) return st__fail(c);
    size_t at = c->pos[n->leaf]++;
    *p = col->sv.v[at];
    *len = col->sl.v[at];
    c->expect[n->leaf] = 0;
    st__cur_settle(c);
    return true;
}

static bool st__cur_open(st_pq_cur_t *c, int x, size_t left)
{
    if (c->top > ST_PQ_MAX_DEPTH) return st__fail(c);
    int f = c->top++;
    c->node[f] = x;
    c->child[f] = c->t->lay->nodes[x].first;
    c->left[f] = left;
    c->k[f] = 0;
    return true;
}

bool st_pq_get_struct(st_pq_cur_t *c)
{
    int x;
    if (st__pq_levels_present(c, ST_PQN_STRUCT, &x) <= 0) return false;
    return st__cur_open(c, x, 0);
}

bool st_pq_get_list(st_pq_cur_t *c, size_t *len)
{
    int x;
    *len = 0;
    if (st__pq_levels_present(c, ST_PQN_LIST, &x) <= 0) return false;
    const st_pq_node_t *n = &c->t->lay->nodes[x], *rep = &c->t->lay->nodes[n->first];
    if (st__peek(c, n->leaf0) == n->def) { /* present and empty */
        if (!st__skip(c, n, n->def)) return false;
        st__cur_settle(c);
        return true;
    }
    /* elements: this entry and every later one of the first leaf that repeats this list */
    const st_pq_column_t *col = &c->t->cols[n->leaf0];
    size_t k = 1;
    for (size_t p = c->pos[n->leaf0] + 1; p < col->n && col->rep.v[p] >= rep->repl; p++)
        k += col->rep.v[p] == rep->repl;
    *len = k;
    return st__cur_open(c, x, k);
}
