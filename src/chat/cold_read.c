/* SPDX-License-Identifier: MIT */
/*
 * Reading cold messages: the tier reads a page of a user's cold rows (src/cold/read.c: the row
 * groups of one conversation, or all, within a msg_id range, from the cold cache); here each
 * row is rendered exactly as the hot store would have. Nothing waits: a page not all in memory
 * returns ST_EPARKED, and its caller parks with st_tier_wait, then re-runs.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    st__chat_walk_t w;
    bool deltas, masks; /* the user has deltas ('Z') / deleted conversations ('Q') */
} st_render_t;

/* Merge-on-read (SPEC §2.2): a row of a deleted conversation is left out, a row with a delta is
 * shown as the delta says. */
static void st__cold_read_render_row(void *arg, const st_msgrow_t *r)
{
    st_render_t *x = arg;
    st__chat_walk_t *k = &x->w;
    uint64_t w = 0, mid;
    int64_t mseq;
    if (x->masks &&
        st__chat_mask_get(k->c, k->u, k->ul, r->conv, r->conv_len, &mid, &mseq, &w) == ST_OK &&
        r->msg_id <= mid)
        return;
    const char *dj;
    size_t dl;
    st_buf_reset(&k->buf);
    if (x->deltas && st__chat_delta_get(k->c, k->u, k->ul, r->msg_id, &dj, &dl, &w) == ST_OK)
        st__chat_put_json(&k->buf, k->u, k->ul, dj, dl); /* copied: fn may use the store */
    else
        st__chat_render_row(&k->buf, k->u, k->ul, r);
    k->fn(k->arg, r->msg_id, k->buf.data, k->buf.len);
}

int st__chat_cold_each(st_chat_t *c, const char *u, size_t ul, const char *conv, size_t cl,
                       uint64_t lo, uint64_t hi, bool desc, size_t limit, st_chat_msg_fn fn,
                       void *arg, size_t *given, bool *more, uint64_t *last, uint64_t *wait)
{
    *given = 0;
    *more = false;
    if (!c->cold || limit == 0) return ST_OK;
    st_render_t x = {.w = {.c = c, .u = u, .ul = ul, .fn = fn, .arg = arg}};
    if (fn) {
        x.deltas = st__chat_has_prefix(c, 'Z', u, ul);
        x.masks = st__chat_has_prefix(c, 'Q', u, ul);
    }
    /* a room's rows are all of its one conversation */
    bool room = st_chat_owner_from(u, ul).kind == ST_OWNER_ROOM;
    st__chat_rowq_t q = {conv, cl, lo, hi, desc, limit, room};
    int rc = st__chat_cold_rows(c->cold->tier, c->store, u, ul, &q,
                                fn ? st__cold_read_render_row : NULL, &x, given, more, last, wait);
    st_buf_free(&x.w.buf);
    return rc;
}
