/* SPDX-License-Identifier: MIT */
/*
 * Compaction, chat's side (the tier's merge side, strata/tier.h): the tier plans which of a
 * user's objects to merge, records the new one ('P'), waits for that record to be durable, merges
 * the rows on a worker (src/cold/merge.c) and swaps the manifest in one batch (src/cold/compact.c).
 * Here, in the swap batch: rows left out by retention taken out of the conversations' cold
 * baselines and the totals; and the new object's name. The new key is
 * {folder}/batch-{ts}-w{writer}-{seq}.{n}.parquet, where n is a fresh number, so no key is ever
 * used twice.
 * Readers of the bucket (DuckDB) may see old and new objects between the swap and the reaper's
 * next pass (about a second).
 */
#include "internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* ---- folding edits in (SPEC §2.2) ----
 * A cold message's change lives in its delta ('Z', applied by every read) and, until an object
 * holding the row has been rewritten with it, a fold marker ('e' u 0 id -> i64 the change's
 * time). A deleted conversation's cold rows are masked on read ('Q') and their objects marked
 * ('z' u 0 seq -> i64 the time). Every merge of a user's objects folds in the changes of the rows
 * it rewrites (their content and metadata as they are now: a tombstone's content and metadata
 * null, and its from null too when its author was erased) and leaves masked rows out, so a reader
 * of the bucket sees the corrected rows, and a deleted message's bytes leave the object store. The
 * pass asks for a fold (ST_TIER_COMPACT_FOLD: the objects holding marked rows, rewritten one at a
 * time) once a marker is --delta-max-age old; POST /v1/admin/compact asks at once. Every row with
 * a delta gets its edited_at and deleted_at too (SPEC v5 §5.1; an older object's lack them, even
 * for a change folded in before), and its edit_history (a tombstone's empty; an older object's
 * rows have none). The delta stays: reads take the changed fields from it. */

typedef struct {
    uint64_t id;
    int64_t changed;         /* its fold marker's time (0: none, only a delta) */
    int64_t edited, deleted; /* its edited_at and deleted_at (0: null) */
    char *content, *meta;    /* owned; NULL: null (content: a tombstone's) */
    size_t cl, ml;
    bool anon;                /* from null: an erased author's room tombstone (SPEC §2.2) */
    const st_msgedit_t *hist; /* its edit_history: nhist entries in the fold's arena */
    uint32_t nhist;
    bool has_hist; /* false: null (never edited) */
} st_fold_row_t;

typedef struct {
    uint8_t conv[ST__KEY_CAP]; /* its key part (st__chat_conv_part) */
    size_t cl;
    uint64_t last; /* rows of the conversation up to this id are a deleted one's */
} st_fold_mask_t;

typedef struct {
    uint64_t id;
    char conv[ST_NAME_MAX + 1];
    size_t cl;
} st_fold_dead_t;

typedef struct {
    ST_VEC(st_fold_row_t) rows;   /* by id */
    ST_VEC(st_fold_dead_t) dead;  /* tombstones among the rows, by id */
    ST_VEC(size_t) dead_dropped;  /* of those, left out by retention (worker) */
    int64_t cutoff;               /* rows older are left out by retention */
    ST_VEC(st_fold_mask_t) masks; /* the user's deleted conversations */
    ST_VEC(uint64_t) seqs;        /* the objects rewritten (their 'z' markers go) */
    int64_t at;                   /* when this was prepared */
    int64_t masked;               /* rows left out as a deleted conversation's (worker) */
    int64_t changed;              /* rows whose values the fold changed (worker) */
    void *inner;                  /* the tier's note of rows left out by retention */
    st_arena_t arena;             /* the rows' edit_history entries */
    /* being prepared (st__chat_fold_more): the owner, and the ids [next, end) still to read */
    st_chatcold_t *cc;
    char u[ST_TIER_OWNER_MAX];
    size_t ul;
    uint64_t next, end;
    bool ready; /* every id read */
} st_fold_t;

/* The index of id among n entries of size bytes sorted by id, their first member; n if none. */
static size_t st__fold_find(const void *v, size_t n, size_t size, uint64_t id)
{
    size_t lo = 0, hi = n;
    uint64_t x;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        memcpy(&x, (const char *)v + mid * size, sizeof x);
        if (x < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < n) memcpy(&x, (const char *)v + lo * size, sizeof x);
    return lo < n && x == id ? lo : n;
}

/* The index of id among the rows; f->rows.n if it is none. */
static size_t st__fold_row_at(const st_fold_t *f, uint64_t id)
{
    return st__fold_find(f->rows.v, f->rows.n, sizeof *f->rows.v, id);
}

/* Rows a slice of the fold's preparation reads at most: their deltas' JSON parsed, about a
 * millisecond's worth. */
#define ST__FOLD_CHUNK 256

/* A delta ('Z', in id order): a row to fold; a slice's chunk ends at ST__FOLD_CHUNK rows. */
typedef struct {
    st_fold_t *f;
    size_t left;
} st_fold_chunk_t;

static int st__fold_delta(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_fold_chunk_t *x = arg;
    (void)val, (void)vlen;
    if (klen < 8) return 0;
    st_fold_row_t r = {.id = st_be64_get((const uint8_t *)key + klen - 8)};
    st_vec_push(&x->f->rows, r);
    return --x->left == 0;
}

/* A fold marker: its row's time (a marker without a delta has nothing to fold). */
static int st__fold_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_fold_t *f = arg;
    if (klen < 8 || vlen != 8) return 0;
    size_t i = st__fold_row_at(f, st_be64_get((const uint8_t *)key + klen - 8));
    if (i < f->rows.n) memcpy(&f->rows.v[i].changed, val, 8);
    return 0;
}

static int st__mask_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_fold_t *f = arg;
    (void)key, (void)klen;
    if (vlen != 16) return 0;
    /* the key holds the conversation part (maybe hashed): the mask is matched on the part,
     * made for each row's conversation */
    st_fold_mask_t m = {.cl = klen};
    if (klen > ST__KEY_CAP) return 0;
    memcpy(m.conv, key, klen);
    memcpy(&m.last, val, 8);
    st_vec_push(&f->masks, m);
    return 0;
}

/* The content, metadata, times and edit_history of row r from its delta (false: no delta). */
static bool st__fold_state(st_chat_t *c, const char *u, size_t ul, st_fold_row_t *r, st_arena_t *a)
{
    const char *j, *v;
    size_t jl, vl;
    uint64_t w = 0;
    if (st__chat_delta_get(c, u, ul, r->id, &j, &jl, &w) != ST_OK) return false;
    r->content = NULL;
    r->cl = 0;
    if (st__chat_jmember(j, jl, "content", &v, &vl) && vl >= 2 && v[0] == '"') {
        cJSON *s = cJSON_ParseWithLength(v, vl);
        if (cJSON_IsString(s)) {
            r->cl = strlen(s->valuestring);
            r->content = st_strndup(s->valuestring, r->cl);
        }
        cJSON_Delete(s);
    }
    /* a tombstone's content stays NULL: null in the row, never "" (SPEC v5 §5.1) */
    r->anon = st__chat_jmember(j, jl, "from", &v, &vl) && vl == 4 && memcmp(v, "null", 4) == 0;
    r->meta = NULL;
    if (st__chat_jmember(j, jl, "metadata", &v, &vl) && !(vl == 4 && memcmp(v, "null", 4) == 0)) {
        r->meta = st_strndup(v, vl);
        r->ml = vl;
    }
    r->edited = st__chat_json_time(j, jl, "edited_at");
    r->deleted = st__chat_json_time(j, jl, "deleted_at");
    r->has_hist = st__chat_hist_of(j, jl, a, &r->hist, &r->nhist);
    return true;
}

static size_t st__qkey(uint8_t *k, const char *u, size_t ul, uint64_t seq)
{
    size_t n = st__chat_ukey(k, 'z', u, ul);
    st_be64_put(k + n, seq);
    return n + 8;
}

int st__chat_fold_objects(st_chat_t *c, const char *u, size_t ul, uint64_t lo, uint64_t hi,
                          uint64_t *wait)
{
    st_manifest_t man;
    uint8_t k[ST__KEY_CAP];
    int rc = st__chat_manifest(c, u, ul, false, &man, wait);
    int64_t now = st_now_us();
    for (size_t i = 0; i < man.n && rc == ST_OK; i++)
        if (man.v[i].file.max_id >= lo && man.v[i].file.min_id <= hi)
            rc =
                st_store_put(c->store, k, st__qkey(k, u, ul, man.v[i].seq), &now, sizeof now, wait);
    st__chat_manifest_free(&man);
    return rc;
}

static int st__chat_compact_note_dead(void *arg, const void *key, size_t klen, const void *val,
                                      size_t vlen)
{
    st_fold_t *f = arg;
    if (klen < 8 || vlen > ST_NAME_MAX) return 0;
    st_fold_dead_t d = {.id = st_be64_get((const uint8_t *)key + klen - 8), .cl = vlen};
    memcpy(d.conv, val, vlen);
    st_vec_push(&f->dead, d);
    return 0;
}

/* The keys of kind under the owner with ids in [lo, hi): fn for each, in id order. */
static int st__fold_range(st_fold_t *f, char kind, uint64_t lo, uint64_t hi, st_store_scan_fn fn,
                          void *arg)
{
    uint8_t pre[ST__KEY_CAP], a[ST__KEY_CAP], b[ST__KEY_CAP];
    uint64_t w = 0;
    size_t pl = st__chat_ukey(pre, kind, f->u, f->ul);
    memcpy(a, pre, pl);
    st_be64_put(a + pl, lo);
    memcpy(b, pre, pl);
    st_be64_put(b + pl, hi);
    return st_store_range(f->cc->chat->store, pre, pl, a, pl + 8, b, pl + 8, false, fn, arg, &w);
}

/* One chunk of the ids left: up to ST__FOLD_CHUNK rows with a delta, then the markers' times
 * and the tombstones among the same ids, then the rows' states — all in this turn, each row's
 * marker read before its state, so a change landing after the chunk leaves a marker newer than
 * the one noted (the swap keeps it: the next fold takes it), and a change to an id of a later
 * chunk is read by that chunk. */
static void st__fold_chunk(st_fold_t *f)
{
    st_chat_t *c = f->cc->chat;
    size_t first = f->rows.n;
    st_fold_chunk_t x = {f, ST__FOLD_CHUNK};
    uint64_t end = f->end;
    if (st__fold_range(f, 'Z', f->next, f->end, st__fold_delta, &x) == 1 && f->rows.n > first) {
        uint64_t last = f->rows.v[f->rows.n - 1].id; /* the chunk ends after it */
        end = last < f->end ? last + 1 : f->end;
    }
    st__fold_range(f, 'e', f->next, end, st__fold_one, f);
    /* the tombstones among the rows: retention may leave them out (no messages to count out),
     * and an older object's tombstone ("" content) is rewritten with null (SPEC v5 §5.1) */
    st__fold_range(f, 'Y', f->next, end, st__chat_compact_note_dead, f);
    size_t kept = first;
    for (size_t i = first; i < f->rows.n; i++)
        if (st__fold_state(c, f->u, f->ul, &f->rows.v[i], &f->arena))
            f->rows.v[kept++] = f->rows.v[i];
    f->rows.n = kept;
    f->next = end;
    f->ready = end >= f->end;
}

bool st__chat_fold_more(void *arg, void *note, uint64_t until)
{
    st_fold_t *f = note;
    (void)arg;
    do
        if (!f->ready) st__fold_chunk(f);
    while (!f->ready && uv_hrtime() < until);
    return f->ready;
}

void *st__chat_fold_prepare(void *arg, const char *u, size_t ul, const st_tier_obj_t *objs,
                            size_t n, int64_t cutoff)
{
    st_chatcold_t *cc = arg;
    st_chat_t *c = cc->chat;
    if (ul > sizeof((st_fold_t *)0)->u) return NULL;
    st_fold_t *f = st_calloc(1, sizeof *f);
    /* before anything is read: a conversation deleted after it marks the objects later (the
     * swap keeps such a mark, st__chat_compact_commit) */
    f->at = st_now_us();
    f->cutoff = cutoff;
    f->cc = cc;
    memcpy(f->u, u, ul);
    f->ul = ul;
    uint64_t lo = UINT64_MAX, hi = 0, w = 0;
    for (size_t i = 0; i < n; i++) {
        if (objs[i].file.min_id < lo) lo = objs[i].file.min_id;
        if (objs[i].file.max_id > hi) hi = objs[i].file.max_id;
        st_vec_push(&f->seqs, objs[i].seq);
    }
    /* the ids [lo, hi] are read a chunk at a time by st__chat_fold_more, across turns */
    f->next = lo;
    f->end = hi == UINT64_MAX ? hi : hi + 1;
    f->ready = !n || f->next >= f->end;
    /* masks keyed by conversation part, as 'Q' keys hold it after the user: a few a user */
    uint8_t pre[ST__KEY_CAP];
    size_t pl = st__chat_ukey(pre, 'Q', u, ul);
    st_fold_t tmp = {0};
    st_store_scan(c->store, pre, pl, st__mask_one, &tmp, &w);
    for (size_t i = 0; i < tmp.masks.n; i++) {
        st_fold_mask_t m = tmp.masks.v[i];
        m.cl -= pl; /* the part after the prefix */
        memmove(m.conv, m.conv + pl, m.cl);
        st_vec_push(&f->masks, m);
    }
    st_vec_free(&tmp.masks);
    return f;
}

typedef struct {
    st_fold_t *f;
    size_t ul;
} st_fixarg_t;

/* The index of id among the tombstones of the rows; f->dead.n if it is none. */
static size_t st__fold_dead_at(const st_fold_t *f, uint64_t id)
{
    return st__fold_find(f->dead.v, f->dead.n, sizeof *f->dead.v, id);
}

/* On a worker: a row as its delta says, or left out as a deleted conversation's. */
static bool st__fix_row(st_fixarg_t *x, st_msgrow_t *r)
{
    st_fold_t *f = x->f;
    for (size_t i = 0; i < f->masks.n; i++) {
        uint8_t part[ST__KEY_CAP];
        size_t pl = st__chat_conv_part(part, x->ul, r->conv, r->conv_len);
        if (pl == f->masks.v[i].cl && memcmp(part, f->masks.v[i].conv, pl) == 0 &&
            r->msg_id <= f->masks.v[i].last) {
            f->masked++;
            return false;
        }
    }
    size_t dead = st__fold_dead_at(f, r->msg_id);
    if (f->cutoff && r->timestamp < f->cutoff) { /* retention leaves it out */
        if (dead < f->dead.n) st_vec_push(&f->dead_dropped, dead);
        return true;
    }
    if (dead < f->dead.n) { /* written before, its content "": null now; no history */
        r->content = r->metadata = NULL;
        r->content_len = r->metadata_len = 0;
        r->hist = NULL;
        r->nhist = 0;
        r->has_hist = true;
    }
    size_t at = st__fold_row_at(f, r->msg_id);
    if (at == f->rows.n) return true;
    const st_fold_row_t *d = &f->rows.v[at];
    r->content = d->content;
    r->content_len = d->content ? (uint32_t)d->cl : 0;
    if (d->anon) {
        r->from = NULL;
        r->from_len = 0;
    }
    r->metadata = d->meta;
    r->metadata_len = d->meta ? (uint32_t)d->ml : 0;
    r->edited_at = d->edited;
    r->deleted_at = d->deleted;
    r->hist = d->hist;
    r->nhist = d->nhist;
    r->has_hist = d->has_hist;
    return true;
}

/* Whether two nullable strings are equal (NULL: null). */
static bool st__fold_same(const char *a, uint32_t al, const char *b, uint32_t bl)
{
    return (!a && !b) || (a && b && al == bl && memcmp(a, b, al) == 0);
}

/* Whether two edit_history values are equal. */
static bool st__fold_same_hist(const st_msgrow_t *a, const st_msgrow_t *b)
{
    if (a->has_hist != b->has_hist || a->nhist != b->nhist) return false;
    for (uint32_t k = 0; a->has_hist && k < a->nhist; k++) {
        const st_msgedit_t *x = &a->hist[k], *y = &b->hist[k];
        if (x->edited_at != y->edited_at ||
            !st__fold_same(x->content, x->content_len, y->content, y->content_len) ||
            !st__fold_same(x->metadata, x->metadata_len, y->metadata, y->metadata_len))
            return false;
    }
    return true;
}

/* st__fix_row, counting the rows whose values it changed. */
static bool st__fix(void *arg, st_msgrow_t *r)
{
    st_fixarg_t *x = arg;
    st_msgrow_t was = *r;
    if (!st__fix_row(x, r)) return false;
    x->f->changed += !st__fold_same(was.from, was.from_len, r->from, r->from_len) ||
                     !st__fold_same(was.content, was.content_len, r->content, r->content_len) ||
                     !st__fold_same(was.metadata, was.metadata_len, r->metadata, r->metadata_len) ||
                     was.edited_at != r->edited_at || was.deleted_at != r->deleted_at ||
                     !st__fold_same_hist(&was, r);
    return true;
}

/* On the loop, in the swap: whether the merge changed a row (its snapshot an overwrite). */
static bool st__chat_compact_changed(void *arg, const void *dropped)
{
    const st_fold_t *f = dropped;
    (void)arg;
    return f && (f->changed || f->masked);
}

static void st__fold_free(void *arg, void *dropped)
{
    st_fold_t *f = dropped;
    if (!f) return;
    for (size_t i = 0; i < f->rows.n; i++) {
        free(f->rows.v[i].content);
        free(f->rows.v[i].meta);
    }
    st_vec_free(&f->rows);
    st_vec_free(&f->masks);
    st_vec_free(&f->seqs);
    st_vec_free(&f->dead);
    st_vec_free(&f->dead_dropped);
    if (f->inner) st_chat_dropped_free(arg, f->inner);
    st_arena_free(&f->arena);
    free(f);
}

typedef ST_VEC(uint64_t) st_ids_t;

static int st__id_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_ids_t *x = arg;
    (void)val, (void)vlen;
    if (klen < 8) return 0;
    st_vec_push(x, st_be64_get((const uint8_t *)key + klen - 8));
    return 0;
}

/* The first object holding a row with a fold marker, or marked itself ('z'). */
bool st__chat_fold_pick(void *arg, const char *u, size_t ul, const st_tier_obj_t *objs, size_t n,
                        size_t *at)
{
    st_chatcold_t *cc = arg;
    uint8_t pre[ST__KEY_CAP];
    st_ids_t x = {0}, q = {0};
    uint64_t w = 0;
    st_store_scan(cc->chat->store, pre, st__chat_ukey(pre, 'e', u, ul), st__id_one, &x, &w);
    st_store_scan(cc->chat->store, pre, st__chat_ukey(pre, 'z', u, ul), st__id_one, &q, &w);
    bool found = false;
    for (size_t i = 0; i < n && !found; i++) {
        for (size_t k = 0; k < q.n && !found; k++)
            found = q.v[k] == objs[i].seq;
        for (size_t k = 0; k < x.n && !found; k++)
            found = x.v[k] >= objs[i].file.min_id && x.v[k] <= objs[i].file.max_id;
        if (found) *at = i;
    }
    st_vec_free(&x);
    st_vec_free(&q);
    return found;
}

/* On a worker: the tier's merge of Parquet objects, at chat's compression level, with the
 * changes prepared folded in. */
static int st__chat_compact_merge(void *arg, const char *u, size_t ul, st_objstore_t *obj,
                                  const st_tier_obj_t *objs, size_t nold, int64_t cutoff,
                                  const char *key, st_tier_file_t *out, void **dropped,
                                  int64_t *ndropped)
{
    st_chatcold_t *cc = arg;
    st_fold_t *f = *dropped ? *dropped : st_calloc(1, sizeof *f);
    *dropped = f;
    st_fixarg_t x = {f, ul};
    st_owner_t who = st_chat_owner_from(u, ul);
    return st_chat_parquet_merge(cc->zstd_level, &who, obj, objs, nold, cutoff, key, out, &f->inner,
                                 ndropped, f->rows.n || f->masks.n || f->dead.n ? st__fix : NULL,
                                 &x);
}

/* ---- loop side: in the swap batch ---- */

/* Rows left out by retention leave the conversations first, while the manifest still holds them
 * (a conversation re-warmed from the cold tier counts them). */
static int st__chat_compact_commit(void *arg, const char *u, size_t ul, void *dropped,
                                   int64_t ndropped, uint64_t *wait)
{
    st_chatcold_t *cc = arg;
    st_chat_t *c = cc->chat;
    uint8_t k[ST__KEY_CAP];
    int rc = ST_OK;
    st_fold_t *f = dropped;
    /* the changes folded in: their markers go, unless changed again since */
    for (size_t i = 0; f && i < f->rows.n && rc == ST_OK; i++) {
        size_t kl = st__chat_ukey(k, 'e', u, ul);
        st_be64_put(k + kl, f->rows.v[i].id);
        int64_t now;
        if (st__chat_get_fixed(c->store, k, kl + 8, &now, sizeof now, wait) == ST_OK &&
            now == f->rows.v[i].changed)
            rc = st_store_del(c->store, k, kl + 8, wait);
    }
    /* the objects rewritten: no deleted conversation's rows are left in them */
    for (size_t i = 0; f && i < f->seqs.n && rc == ST_OK; i++) {
        int64_t t;
        size_t kl = st__qkey(k, u, ul, f->seqs.v[i]);
        if (st__chat_get_fixed(c->store, k, kl, &t, sizeof t, wait) == ST_OK && t <= f->at)
            rc = st_store_del(c->store, k, kl, wait);
    }
    /* rows left out as a deleted conversation's were counted as gone ('X'): no longer cold */
    if (f && f->masked && rc == ST_OK) rc = st__chat_gone_add(c, u, ul, -f->masked, wait);
    dropped = f ? f->inner : NULL;
    if (rc || !ndropped) return rc;
    const char *conv;
    size_t l, p = 0;
    int64_t cnt;
    while (rc == ST_OK && st_chat_dropped_next(dropped, &p, &conv, &l, &cnt)) {
        st_conv_t cv;
        bool cold;
        int64_t dead = 0; /* tombstones among them: no messages, counted as gone */
        for (size_t i = 0; f && i < f->dead_dropped.n; i++) {
            const st_fold_dead_t *d = &f->dead.v[f->dead_dropped.v[i]];
            dead += d->cl == l && memcmp(d->conv, conv, l) == 0;
        }
        rc = st__chat_conv_load(c, u, ul, conv, l, &cv, &cold, wait);
        if (rc == ST_OK) {
            cv.base_total -= cnt - dead;
            rc = st_store_put(c->store, k, st__chat_ckey(k, u, ul, conv, l), &cv, sizeof cv, wait);
        } else if (rc == ST_ENOTFOUND || rc == ST_EPARKED) {
            /* evicted, its footers not in memory: it stays evicted, and its count comes from
             * the footers when it is re-warmed — the merged object's, without these rows */
            rc = ST_OK;
        }
        /* expired rows left out: as retention's whole objects (retention.c) */
        if (rc == ST_OK && c->expired_fn) {
            st_owner_t o = st_chat_owner_from(u, ul);
            rc = c->expired_fn(c->expired_arg, &o, conv, l, cnt, wait);
        }
    }
    /* the tombstones left out: their records go, and they are no longer cold rows */
    for (size_t i = 0; f && i < f->dead_dropped.n && rc == ST_OK; i++) {
        uint64_t id = f->dead.v[f->dead_dropped.v[i]].id;
        for (const char *ks = "YEef"; *ks && rc == ST_OK; ks++) {
            size_t kn = st__chat_ukey(k, *ks, u, ul);
            st_be64_put(k + kn, id);
            rc = st_store_del(c->store, k, kn + 8, wait);
            if (rc == ST_ENOTFOUND) rc = ST_OK;
        }
    }
    if (rc == ST_OK && f && f->dead_dropped.n)
        rc = st__chat_gone_add(c, u, ul, -(int64_t)f->dead_dropped.n, wait);
    if (rc == ST_OK) rc = st__chat_refresh_totals(c, u, ul, wait);
    return rc;
}

/* The new key: the first object's time, its manifest number, then the fresh number. */
static void st__chat_compact_name(void *arg, const char *u, size_t ul, const char *first_key,
                                  uint64_t seq, uint64_t pseq, uint64_t writer, st_buf_t *key)
{
    (void)arg;
    const char *b = strstr(first_key, "/batch-");
    int64_t ts = b ? strtoll(b + 7, NULL, 10) : 0;
    st__chat_object_key(key, u, ul, ts, writer, seq);
    key->len -= 8; /* ".parquet" */
    st_buf_printf(key, ".%llu.parquet", (unsigned long long)pseq);
    st_buf_appendc(key, 0);
    key->len--;
}

void st__chat_merge_side(st_chatcold_t *cc)
{
    cc->merge = (st_tier_merge_t){.merge = st__chat_compact_merge,
                                  .commit = st__chat_compact_commit,
                                  .release = st__fold_free,
                                  .name = st__chat_compact_name,
                                  .arg = cc,
                                  .changed = st__chat_compact_changed};
}
