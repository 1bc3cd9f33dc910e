/* SPDX-License-Identifier: MIT */
/*
 * Chat's merge of message objects, on a compaction's worker (see strata/chatrows.h): the tier's
 * merge of any schema's objects (st_tier_pq_merge_with: the old objects read whole, their pages
 * verified, their rows sorted by conversation then id, one row group per conversation), with
 * chat's row hook: each row shown to the caller's fix as a message row (edits folded in, a
 * deleted conversation's rows left out), then left out if older than the retention, counted per
 * conversation for chat's side of the swap. Every row gets the owner column (an older object's
 * had none): the merged object has the shape of a new one. A row whose edit_history the fix
 * changes (its length, or null to a list) gets it as a splice of the tape (strata/tier.h).
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

/* Rows left out by the cutoff, per conversation: d holds entries (u32 length, the id, i64 rows
 * dropped), found again through by (conversation -> entry offset). */
typedef struct {
    st_map_node_t node; /* key: the conversation (in the entry's own bytes) */
    size_t at;
    char conv[];
} st_dconv_t;

typedef struct {
    st_buf_t *d;
    st_map_t by;
    int64_t cutoff, *ndropped;
    bool (*fix)(void *arg, st_msgrow_t *r);
    void *fix_arg;
    const char *owner;
    size_t ol;
    ST_VEC(st_msgedit_t) hist;  /* the row's edit_history as the object holds it */
    ST_VEC(st_tier_val_t) vals; /* the values of the one fix gave it (a splice) */
} st_mhook_t;

static void st__note_dropped(st_mhook_t *h, const st_msgrow_t *r)
{
    st_buf_t *d = h->d;
    st_dconv_t *e = (st_dconv_t *)st_map_get(&h->by, r->conv, r->conv_len);
    if (!e) {
        e = st_calloc(1, sizeof *e + r->conv_len + 1);
        memcpy(e->conv, r->conv, r->conv_len);
        e->node.key = e->conv;
        e->node.klen = r->conv_len;
        e->at = d->len;
        st_map_insert(&h->by, &e->node);
        uint32_t l = r->conv_len;
        int64_t zero = 0;
        st_buf_append(d, &l, 4);
        st_buf_append(d, r->conv, l);
        st_buf_append(d, &zero, 8);
    }
    int64_t cnt;
    memcpy(&cnt, d->data + e->at + 4 + r->conv_len, 8);
    cnt++;
    memcpy(d->data + e->at + 4 + r->conv_len, &cnt, 8);
}

static void st__merge_tape_str(const st_tier_val_t *v, const char **p, uint32_t *n)
{
    *p = v->op == ST_TIER_V_STR ? v->p : NULL;
    *n = v->op == ST_TIER_V_STR ? v->n : 0;
}

/* A nullable string value of the tape (NULL: null). */
static void st__merge_tape_set(st_tier_val_t *v, const char *p, uint32_t n)
{
    v->op = p ? ST_TIER_V_STR : ST_TIER_V_NULL;
    v->p = p;
    v->n = p ? n : 0;
}

/* A nullable time value of the tape (0: null). */
static void st__merge_tape_time(st_tier_val_t *v, int64_t t)
{
    v->op = t ? ST_TIER_V_INT : ST_TIER_V_NULL;
    v->i = t;
}

/* edit_history's values on the tape (from v, its first) as the row's (null in an older
 * object's rows). */
static void st__merge_tape_hist(st_mhook_t *h, const st_tier_val_t *v, size_t nv, st_msgrow_t *r)
{
    h->hist.n = 0;
    r->has_hist = v->op == ST_TIER_V_LIST;
    if (!r->has_hist) return;
    for (size_t k = 0, at = 1; k < v->n && at + 4 <= nv; k++, at += 4) { /* struct, its 3 */
        st_msgedit_t e = {.edited_at = v[at + 3].i};
        st__merge_tape_str(&v[at + 1], &e.content, &e.content_len);
        st__merge_tape_str(&v[at + 2], &e.metadata, &e.metadata_len);
        st_vec_push(&h->hist, e);
    }
    r->hist = h->hist.v;
    r->nhist = (uint32_t)h->hist.n;
}

/* The values of the edit_history r has now, spliced over the tape's at v. */
static void st__merge_tape_set_hist(st_mhook_t *h, st_tier_val_t *v, const st_msgrow_t *r)
{
    h->vals.n = 0;
    st_tier_val_t x = {.op = r->has_hist ? ST_TIER_V_LIST : ST_TIER_V_NULL, .n = r->nhist};
    st_vec_push(&h->vals, x);
    for (uint32_t k = 0; r->has_hist && k < r->nhist; k++) {
        const st_msgedit_t *e = &r->hist[k];
        x = (st_tier_val_t){.op = ST_TIER_V_STRUCT};
        st_vec_push(&h->vals, x);
        st__merge_tape_set(&x, e->content, e->content_len);
        st_vec_push(&h->vals, x);
        st__merge_tape_set(&x, e->metadata, e->metadata_len);
        st_vec_push(&h->vals, x);
        x = (st_tier_val_t){.op = ST_TIER_V_INT, .i = e->edited_at};
        st_vec_push(&h->vals, x);
    }
    *v = (st_tier_val_t){.op = ST_TIER_V_SPLICE, .n = (uint32_t)h->vals.n, .sub = h->vals.v};
}

/* A row of the tape as a message (v: its values, in st_pq_msg_schema's order: the ten columns,
 * then edit_history's); the owner column set (an older object's rows have it null). */
static bool st__merge_tape_row(void *arg, st_tier_val_t *v, size_t nv)
{
    st_mhook_t *h = arg;
    if (nv < ST_PQ_MSG_FIELDS) return true; /* cannot be: the schema's */
    v[0] = (st_tier_val_t){.op = ST_TIER_V_STR, .n = (uint32_t)h->ol, .p = h->owner};
    st_msgrow_t r = {.msg_id = (uint64_t)v[1].i, .timestamp = v[4].i, .seq = v[5].i};
    st__merge_tape_str(&v[2], &r.conv, &r.conv_len);
    st__merge_tape_str(&v[3], &r.from, &r.from_len);
    st__merge_tape_str(&v[6], &r.content, &r.content_len);
    st__merge_tape_str(&v[7], &r.metadata, &r.metadata_len);
    r.edited_at = v[8].op == ST_TIER_V_INT ? v[8].i : 0; /* null in an older object's rows */
    r.deleted_at = v[9].op == ST_TIER_V_INT ? v[9].i : 0;
    st__merge_tape_hist(h, &v[10], nv - 10, &r);
    if (h->fix) {
        const char *from = r.from, *content = r.content, *meta = r.metadata;
        const st_msgedit_t *hist = r.hist;
        uint32_t nhist = r.nhist;
        bool has_hist = r.has_hist;
        if (!h->fix(h->fix_arg, &r)) return false;
        if (r.hist != hist || r.nhist != nhist || r.has_hist != has_hist)
            st__merge_tape_set_hist(h, &v[10], &r);
        if (r.from != from) st__merge_tape_set(&v[3], r.from, r.from_len);
        if (r.content != content) st__merge_tape_set(&v[6], r.content, r.content_len);
        if (r.metadata != meta) st__merge_tape_set(&v[7], r.metadata, r.metadata_len);
        st__merge_tape_time(&v[8], r.edited_at);
        st__merge_tape_time(&v[9], r.deleted_at);
    }
    if (h->cutoff && r.timestamp < h->cutoff) {
        st__note_dropped(h, &r);
        (*h->ndropped)++;
        return false;
    }
    return true;
}

int st_chat_parquet_merge(int zstd_level, const st_owner_t *who, st_objstore_t *obj,
                          const st_tier_obj_t *objs, size_t nold, int64_t cutoff, const char *key,
                          st_tier_file_t *out, void **dropped, int64_t *ndropped,
                          bool (*fix)(void *arg, st_msgrow_t *r), void *fix_arg)
{
    st_buf_t *d = st_calloc(1, sizeof *d);
    *dropped = d;
    st_mhook_t h = {d, {0}, cutoff, ndropped, fix, fix_arg, who->id, who->len, {0}, {0}};
    st_map_init(&h.by);
    st_tier_pqmerge_t o = {.zstd_level = zstd_level,
                           .by_key = true,
                           .row = st__merge_tape_row,
                           .arg = &h,
                           .out = st_pq_msg_schema_of(who)};
    int rc = st_tier_pq_merge_with(&st_pq_msg_schema, &o, obj, objs, nold, key, out);
    size_t it;
    st_map_node_t *n;
    while ((n = st_map_first(&h.by, &it)) != NULL) {
        st_map_remove(&h.by, n);
        free(n);
    }
    st_map_free(&h.by);
    st_vec_free(&h.hist);
    st_vec_free(&h.vals);
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
