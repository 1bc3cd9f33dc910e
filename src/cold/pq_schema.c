/* SPDX-License-Identifier: MIT */
/*
 * A kind's schema (a tree of st_pq_field_t) flattened into Parquet's schema elements, each with
 * the definition and repetition levels its values are written with: an OPTIONAL field adds a
 * definition level, a LIST's repeated group adds one of each. The writer emits these elements
 * (with the field's Iceberg field id, when it has one); the reader checks a footer's against them
 * before it trusts any column chunk.
 */
#include "pq_internal.h"

#include <stdlib.h>
#include <string.h>

/* Parquet's ConvertedType and LogicalType union field of each logical type. */
static const int st__converted[] = {-1, 0 /* UTF8 */, 10 /* TIMESTAMP_MICROS */, 19 /* JSON */,
                                    3 /* LIST */};
static const int st__logical[] = {0, 1 /* STRING */, 8 /* TIMESTAMP */, 12 /* JSON */,
                                  3 /* LIST */};

static int st__pq_schema_add(st_pq_layout_t *l, const char *name, int kind, int parent, int rep)
{
    if (l->nnodes == ST_PQ_MAX_NODES) return -1;
    int i = l->nnodes++;
    st_pq_node_t *n = &l->nodes[i], *p = parent >= 0 ? &l->nodes[parent] : NULL;
    memset(n, 0, sizeof *n);
    n->name = name;
    n->kind = kind;
    n->rep = rep;
    n->type = ST_PQ_GROUP;
    n->parent = parent;
    n->first = n->next = -1;
    n->leaf = -1;
    n->leaf0 = l->nleaves;
    n->def = (uint8_t)((p ? p->def : 0) + (rep == ST_PQ_OPTIONAL || rep == ST_PQ_REPEATED));
    n->repl = (uint8_t)((p ? p->repl : 0) + (rep == ST_PQ_REPEATED));
    n->depth = p ? p->depth + 1 : 0;
    n->added = p && p->added;
    if (p) {
        int *link = &p->first;
        while (*link >= 0)
            link = &l->nodes[*link].next;
        *link = i;
        p->nchildren++;
    }
    return i;
}

static bool st__field(st_pq_layout_t *l, const st_pq_field_t *f, int parent)
{
    if (!f->name || !*f->name || (f->rep != ST_PQ_REQUIRED && f->rep != ST_PQ_OPTIONAL) ||
        f->logical < ST_PQ_NONE || f->logical > ST_PQ_LIST)
        return false;
    bool group = f->type == ST_PQ_GROUP, list = f->logical == ST_PQ_LIST;
    if (group ? (list ? f->nchildren != 1 : (f->nchildren == 0 || f->logical != ST_PQ_NONE))
              : (f->nchildren || list ||
                 (f->type != ST_PQ_BOOLEAN && f->type != ST_PQ_INT32 && f->type != ST_PQ_INT64 &&
                  f->type != ST_PQ_BYTE_ARRAY)))
        return false;
    int i = st__pq_schema_add(
        l, f->name, group ? (list ? ST_PQN_LIST : ST_PQN_STRUCT) : ST_PQN_LEAF, parent, f->rep);
    if (i < 0) return false;
    st_pq_node_t *n = &l->nodes[i];
    n->type = f->type;
    n->logical = f->logical;
    n->hints = f->hints;
    n->id = f->id;
    n->added |= (f->hints & ST_PQ_ADDED) != 0;
    /* ADDED: a top-level field only (a leaf, or a group a file lacks whole) */
    if (f->id < 0 || ((f->hints & ST_PQ_ADDED) && parent != 0)) return false;
    if (n->def > ST_PQ_MAX_LEVEL || n->depth > ST_PQ_MAX_DEPTH - 1) return false;
    if (!group) {
        n->leaf = l->nleaves;
        l->leaf_node[l->nleaves++] = i;
    } else if (list) {
        int r = st__pq_schema_add(l, "list", ST_PQN_LISTREP, i, ST_PQ_REPEATED);
        if (r < 0 || l->nodes[r].def > ST_PQ_MAX_LEVEL || !st__field(l, &f->children[0], r))
            return false;
        l->nodes[r].nleaf = l->nleaves - l->nodes[r].leaf0;
    } else {
        for (size_t c = 0; c < f->nchildren; c++)
            if (!st__field(l, &f->children[c], i)) return false;
    }
    l->nodes[i].nleaf = l->nleaves - l->nodes[i].leaf0;
    return true;
}

int st__pq_layout(const st_pq_schema_t *s, st_pq_layout_t **out)
{
    st_pq_layout_t *l = st_calloc(1, sizeof *l);
    *out = NULL;
    st__pq_schema_add(l, "schema", ST_PQN_STRUCT, -1, -1);
    bool ok = s->nfields > 0;
    for (size_t i = 0; i < s->nfields && ok; i++)
        ok = st__field(l, &s->fields[i], 0);
    l->nodes[0].nleaf = l->nleaves;
    l->sort_leaf = s->sort_leaf;
    l->key_leaf = s->key_leaf;
    if (ok && (s->sort_leaf < -1 || s->sort_leaf >= l->nleaves)) ok = false;
    if (ok && s->key_leaf != -1) {
        const st_pq_node_t *k =
            s->key_leaf >= 0 && s->key_leaf < l->nleaves ? &l->nodes[l->leaf_node[s->key_leaf]] : 0;
        ok = k && k->parent == 0 && k->rep == ST_PQ_REQUIRED && k->type != ST_PQ_BOOLEAN &&
             !k->added;
    }
    if (ok && s->sort_leaf >= 0 && l->nodes[l->leaf_node[s->sort_leaf]].added)
        ok = false; /* an older file would have none */
    if (!ok) {
        free(l);
        return ST_EINVAL;
    }
    *out = l;
    return ST_OK;
}

int st_pq_schema_leaves(const st_pq_schema_t *s)
{
    st_pq_layout_t *l;
    if (st__pq_layout(s, &l) != ST_OK) return -1;
    int n = l->nleaves;
    free(l);
    return n;
}

int st__pq_path(const st_pq_layout_t *l, int leaf, const char **names)
{
    int n = 0;
    for (int i = l->leaf_node[leaf]; i > 0; i = l->nodes[i].parent)
        n++;
    int k = n;
    for (int i = l->leaf_node[leaf]; i > 0; i = l->nodes[i].parent)
        names[--k] = l->nodes[i].name;
    return n;
}

static void st__logical_type(st_tw_t *w, int logical)
{
    st_tw_struct_begin(w, 10);
    st_tw_struct_begin(w, (int16_t)st__logical[logical]);
    if (logical == ST_PQ_TIMESTAMP_US) { /* isAdjustedToUTC = true, unit = MICROS */
        st_tw_bool(w, 1, true);
        st_tw_struct_begin(w, 2);
        st_tw_struct_begin(w, 2);
        st_tw_struct_end(w);
        st_tw_struct_end(w);
    }
    st_tw_struct_end(w);
    st_tw_struct_end(w);
}

void st__pq_schema_write(st_tw_t *w, const st_pq_layout_t *l)
{
    st_tw_list(w, 2, ST_TC_STRUCT, (size_t)l->nnodes);
    for (int i = 0; i < l->nnodes; i++) {
        const st_pq_node_t *n = &l->nodes[i];
        st_tw_elem_begin(w);
        if (n->kind == ST_PQN_LEAF) st_tw_i32(w, 1, n->type);
        if (n->rep >= 0) st_tw_i32(w, 3, n->rep);
        st_tw_bin(w, 4, n->name, strlen(n->name));
        if (n->kind != ST_PQN_LEAF) st_tw_i32(w, 5, n->nchildren);
        if (n->logical && st__converted[n->logical] >= 0)
            st_tw_i32(w, 6, st__converted[n->logical]);
        if (n->id > 0) st_tw_i32(w, 9, n->id);
        if (n->logical) st__logical_type(w, n->logical);
        st_tw_struct_end(w);
    }
}

/* Whether element e (its fields as read) is node want. */
static bool st__pq_schema_same(const st_pq_node_t *want, const uint8_t *name, size_t nl,
                               int64_t type, int64_t rep, int64_t children, int64_t fid)
{
    bool leaf = want->kind == ST_PQN_LEAF, by_id = fid > 0 && fid == want->id;
    if (fid > 0 && want->id > 0 && fid != want->id) return false;
    if (!by_id && (!name || nl != strlen(want->name) || memcmp(name, want->name, nl) != 0))
        return false;
    /* an OPTIONAL leaf may be REQUIRED in a file written before it became OPTIONAL */
    bool narrowed = leaf && want->rep == ST_PQ_OPTIONAL && rep == ST_PQ_REQUIRED;
    return (rep == want->rep || narrowed) && type == (leaf ? want->type : -1) &&
           children == (leaf ? 0 : want->nchildren);
}

/* Whether node i is an ST_PQ_ADDED field (a top-level leaf or group), which a file may lack. */
static bool st__pq_schema_added(const st_pq_layout_t *l, int i)
{
    return l->nodes[i].parent == 0 && (l->nodes[i].hints & ST_PQ_ADDED);
}

/* Marks the ADDED field at node i missing, every node under it too (a group's nodes follow it,
 * depth first); the node after them. */
static int st__pq_schema_miss(st_pq_layout_t *l, int i)
{
    int end = i + 1;
    while (end < l->nnodes && l->nodes[end].depth > l->nodes[i].depth)
        end++;
    for (int k = i; k < end; k++)
        l->nodes[k].missing = true;
    l->nmissing += l->nodes[i].nleaf;
    l->nmissing_top++;
    return end;
}

bool st__pq_elem(st_tr_t *r, st_pq_elem_t *e)
{
    int16_t last = 0, id;
    int t;
    bool bv;
    *e = (st_pq_elem_t){.type = -1, .rep = -1};
    if (!st_tr_enter(r)) return false;
    while (st_tr_field(r, &last, &id, &t, &bv))
        if (id == 1 && t == ST_TC_I32)
            e->type = st_tr_int(r);
        else if (id == 3 && t == ST_TC_I32)
            e->rep = st_tr_int(r);
        else if (id == 4 && t == ST_TC_BINARY)
            e->name = st_tr_bin(r, &e->nl);
        else if (id == 5 && t == ST_TC_I32)
            e->children = st_tr_int(r);
        else if (id == 9 && t == ST_TC_I32)
            e->fid = st_tr_int(r);
        else
            st_tr_skip(r, t);
    st_tr_leave(r);
    return true;
}

bool st__pq_schema_check(st_tr_t *r, st_pq_layout_t *l)
{
    int elem;
    size_t n;
    int64_t root_children = -1;
    if (!st_tr_list(r, &elem, &n) || elem != ST_TC_STRUCT || n == 0 || n > (size_t)l->nnodes)
        return false;
    int w = 0; /* the node the next element must be (after the ADDED leaves it lacks) */
    for (size_t i = 0; i < n && r->ok; i++) {
        st_pq_elem_t e;
        if (!st__pq_elem(r, &e)) return false;
        if (i == 0) { /* the root's name is free; its children are counted at the end */
            root_children = e.children;
            w = 1;
            continue;
        }
        while (w < l->nnodes && st__pq_schema_added(l, w) &&
               !st__pq_schema_same(&l->nodes[w], e.name, e.nl, e.type, e.rep, e.children, e.fid))
            w = st__pq_schema_miss(l, w);
        if (w == l->nnodes ||
            !st__pq_schema_same(&l->nodes[w], e.name, e.nl, e.type, e.rep, e.children, e.fid))
            return false;
        l->nodes[w].narrowed = e.rep != l->nodes[w].rep;
        w++;
    }
    while (w < l->nnodes && st__pq_schema_added(l, w))
        w = st__pq_schema_miss(l, w);
    return r->ok && w == l->nnodes && root_children == l->nodes[0].nchildren - l->nmissing_top;
}
