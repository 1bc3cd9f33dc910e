/* SPDX-License-Identifier: MIT */
/*
 * Delta objects (SPEC §2.2): the changes of a user's cold messages, beside its Parquet objects in
 * the bucket: {folder}/delta-{ts}-w{writer}-{seq}.parquet. A delta record ('Z', edit.c) is what
 * every strata read applies; a delta object carries the same state into the object store, so a
 * reader of the bucket (DuckDB) can apply the changes the message objects do not hold yet (their
 * own edited_at, deleted_at and edit_history columns hold a change once a fold wrote it in).
 *
 * Columns: the message's seven (content null in a tombstone, from null in an erased author's
 * room tombstone; objects written before from was OPTIONAL read alike) plus edited_at and
 * deleted_at (TIMESTAMP µs, nullable) and edit_history (JSON text:
 * [{"content","metadata","edited_at"}]), one row per message, its state as of the object; of
 * several objects the one with the highest number in its key is the newest.
 *
 * They are a data kind of the tier of their own (tag 'e': the manifest owner "~e" + user), so
 * the tier's flush engine writes them (intent, never-overwrite keys naming the writer, orphans,
 * reaper) and its compaction merges a user's delta objects into one (the newest state of each
 * message kept). A delta record not yet in an object is marked 'f' u 0 id; the chat pass queues
 * a flush of the user's deltas when it finds marks.
 */
#include "internal.h"
#include "strata/looplag.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define ST__DELTA_TAG  'e'
#define ST__DELTA_COLS 10

static const st_pq_field_t st__delta_fields[ST__DELTA_COLS] = {
    {"msg_id", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_NONE, ST_PQ_STATS, NULL, 0, 0},
    {"conversation_id", ST_PQ_BYTE_ARRAY, ST_PQ_REQUIRED, ST_PQ_STRING, ST_PQ_DICT, NULL, 0, 0},
    {"from", ST_PQ_BYTE_ARRAY, ST_PQ_OPTIONAL, ST_PQ_STRING, ST_PQ_DICT, NULL, 0, 0},
    {"timestamp", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_TIMESTAMP_US, 0, NULL, 0, 0},
    {"seq", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_NONE, 0, NULL, 0, 0},
    {"content", ST_PQ_BYTE_ARRAY, ST_PQ_OPTIONAL, ST_PQ_STRING, 0, NULL, 0, 0},
    {"metadata", ST_PQ_BYTE_ARRAY, ST_PQ_OPTIONAL, ST_PQ_JSON, 0, NULL, 0, 0},
    {"edited_at", ST_PQ_INT64, ST_PQ_OPTIONAL, ST_PQ_TIMESTAMP_US, 0, NULL, 0, 0},
    {"deleted_at", ST_PQ_INT64, ST_PQ_OPTIONAL, ST_PQ_TIMESTAMP_US, 0, NULL, 0, 0},
    {"edit_history", ST_PQ_BYTE_ARRAY, ST_PQ_OPTIONAL, ST_PQ_JSON, 0, NULL, 0, 0},
};

/* Sorted by msg_id; row groups cut by count only. */
static const st_pq_schema_t st__delta_schema = {st__delta_fields, ST__DELTA_COLS, 0, -1};

size_t st__chat_delta_owner(char *o, const char *u, size_t ul)
{
    return st_tier_owner(o, ST__DELTA_TAG, u, ul);
}

/* ---- a row: a message's state (its JSON, as 'Z' holds it) ---- */

typedef struct {
    uint64_t id;
    char *json; /* owned */
    size_t len;
    /* decoded for a write (the writer borrows strings until the file is done): owned */
    st_buf_t conv, from, content;
    bool has_from, has_content; /* false: null (an erased author's; a tombstone's) */
} st_drow_t;

typedef ST_VEC(st_drow_t) st_drows_t;

static void st__drows_free(st_drows_t *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->v[i].json);
        st_buf_free(&r->v[i].conv);
        st_buf_free(&r->v[i].from);
        st_buf_free(&r->v[i].content);
    }
    st_vec_free(r);
}

static bool st__i64_member(const char *j, size_t n, const char *key, int64_t *v)
{
    const char *s;
    size_t sl;
    return st__chat_jmember(j, n, key, &s, &sl) && !(sl == 4 && memcmp(s, "null", 4) == 0) &&
           st_parse_i64(s, sl, v) == ST_OK;
}

/* A JSON string member, unescaped into b (false: absent, null or not a string). */
static bool st__str_member(const char *j, size_t n, const char *key, st_buf_t *b)
{
    const char *s;
    size_t sl;
    if (!st__chat_jmember(j, n, key, &s, &sl) || sl < 2 || s[0] != '"') return false;
    cJSON *x = cJSON_ParseWithLength(s, sl);
    bool ok = cJSON_IsString(x);
    if (ok) st_buf_puts(b, x->valuestring);
    cJSON_Delete(x);
    return ok;
}

/* The raw JSON of a member, unless absent or null. */
static bool st__raw_member(const char *j, size_t n, const char *key, const char **v, size_t *vl)
{
    return st__chat_jmember(j, n, key, v, vl) && !(*vl == 4 && memcmp(*v, "null", 4) == 0);
}

static void st__delta_row(void *arg, size_t i, st_pq_rec_t *r)
{
    const st_drow_t *d = (const st_drow_t *)arg + i;
    const char *j = d->json, *v;
    size_t n = d->len, vl;
    int64_t x = 0;
    st_pq_put_i64(r, (int64_t)d->id);
    st_pq_put_str(r, d->conv.data ? d->conv.data : "", d->conv.len);
    if (d->has_from)
        st_pq_put_str(r, d->from.data ? d->from.data : "", d->from.len);
    else
        st_pq_put_null(r);
    st_pq_put_i64(r, st__i64_member(j, n, "timestamp", &x) ? x : 0);
    st_pq_put_i64(r, st__i64_member(j, n, "seq", &x) ? x : 0);
    if (d->has_content)
        st_pq_put_str(r, d->content.data ? d->content.data : "", d->content.len);
    else
        st_pq_put_null(r);
    if (st__raw_member(j, n, "metadata", &v, &vl))
        st_pq_put_str(r, v, vl);
    else
        st_pq_put_null(r);
    if (st__i64_member(j, n, "edited_at", &x))
        st_pq_put_i64(r, x);
    else
        st_pq_put_null(r);
    if (st__i64_member(j, n, "deleted_at", &x))
        st_pq_put_i64(r, x);
    else
        st_pq_put_null(r);
    if (st__raw_member(j, n, "edit_history", &v, &vl))
        st_pq_put_str(r, v, vl);
    else
        st_pq_put_null(r);
}

static int st__encode_rows(st_drows_t *rows, int zstd_level, st_buf_t *out)
{
    for (size_t i = 0; i < rows->n; i++) {
        st_drow_t *d = &rows->v[i];
        st_buf_reset(&d->conv);
        st_buf_reset(&d->from);
        st_buf_reset(&d->content);
        if (!st__str_member(d->json, d->len, "conversation_id", &d->conv))
            st__str_member(d->json, d->len, "room_id", &d->conv); /* a room's (render.c) */
        d->has_from = st__str_member(d->json, d->len, "from", &d->from);
        d->has_content = st__str_member(d->json, d->len, "content", &d->content);
    }
    st_pq_write_t w = {.schema = &st__delta_schema,
                       .nrows = rows->n,
                       .row = st__delta_row,
                       .arg = rows->v,
                       .group_rows = 65536,
                       .zstd_level = zstd_level};
    return st_pq_write(&w, out);
}

/* A row read back as the message JSON edit.c renders (for merges and rebuilds). */
static void st__render_back(st_buf_t *b, const char *field, int64_t id, const char *conv, size_t cl,
                            const char *from, size_t fl, int64_t ts, int64_t seq,
                            const char *content, size_t col, bool has_content, const char *meta,
                            size_t ml, bool has_meta, int64_t edited, bool has_edited,
                            int64_t deleted, bool has_deleted, const char *hist, size_t hl,
                            bool has_hist)
{
    st_buf_puts(b, "{\"msg_id\":\"");
    st_buf_append_u64(b, (uint64_t)id);
    st__chat_put_member(b, field);
    st_buf_append_json_str(b, conv, cl);
    st_buf_puts(b, ",\"from\":");
    if (from) /* NULL: an erased author's room tombstone */
        st_buf_append_json_str(b, from, fl);
    else
        st_buf_puts(b, "null");
    st_buf_printf(b, ",\"timestamp\":%lld,\"seq\":%lld,\"content\":", (long long)ts,
                  (long long)seq);
    if (has_content)
        st_buf_append_json_str(b, content, col);
    else
        st_buf_puts(b, "null");
    st_buf_puts(b, ",\"metadata\":");
    if (has_meta)
        st_buf_append(b, meta, ml);
    else
        st_buf_puts(b, "null");
    st_buf_puts(b, ",\"edited_at\":");
    if (has_edited)
        st_buf_append_i64(b, edited);
    else
        st_buf_puts(b, "null");
    st_buf_puts(b, ",\"deleted_at\":");
    if (has_deleted)
        st_buf_append_i64(b, deleted);
    else
        st_buf_puts(b, "null");
    st_buf_puts(b, ",\"edit_history\":");
    if (has_hist)
        st_buf_append(b, hist, hl);
    else
        st_buf_puts(b, "[]");
    st_buf_appendc(b, '}');
}

int st__chat_delta_decode(const void *data, size_t size, const char *field, st_chat_delta_fn fn,
                          void *arg)
{
    const uint8_t *p = data;
    uint32_t flen;
    st_pq_file_t f;
    int rc = size >= 12 ? st_pq_footer_len(p + size - 8, size, &flen) : ST_EINVAL;
    if (rc == ST_OK)
        rc = st_pq_parse_footer(&st__delta_schema, p + size - 8 - flen, flen, size, &f);
    if (rc != ST_OK) return rc;
    st_buf_t b = {0};
    for (size_t g = 0; g < f.ngroups && rc == ST_OK; g++) {
        const st_pq_rowgroup_t *G = &f.groups[g];
        st_pq_table_t t;
        if (G->offset + G->length > size) {
            rc = ST_EINVAL;
            break;
        }
        if ((rc = st_pq_read_group(&st__delta_schema, G, p + G->offset, G->length, &t))) break;
        st_pq_cur_t c;
        st_pq_cur_init(&c, &t);
        while (st_pq_cur_next(&c)) {
            int64_t id = 0, ts = 0, seq = 0, ed = 0, del = 0;
            const char *conv = "", *from = "", *content = "", *meta = "", *hist = "";
            size_t cl = 0, fl = 0, col = 0, ml = 0, hl = 0;
            st_pq_get_i64(&c, &id);
            st_pq_get_str(&c, &conv, &cl);
            st_pq_get_str(&c, &from, &fl);
            st_pq_get_i64(&c, &ts);
            st_pq_get_i64(&c, &seq);
            bool hc = st_pq_get_str(&c, &content, &col);
            bool hm = st_pq_get_str(&c, &meta, &ml);
            bool he = st_pq_get_i64(&c, &ed);
            bool hd = st_pq_get_i64(&c, &del);
            bool hh = st_pq_get_str(&c, &hist, &hl);
            st_buf_reset(&b);
            st__render_back(&b, field, id, conv, cl, from, fl, ts, seq, content, col, hc, meta, ml,
                            hm, ed, he, del, hd, hist, hl, hh);
            fn(arg, (uint64_t)id, conv, cl, hd, b.data, b.len);
        }
        rc = st_pq_cur_done(&c);
        st_pq_table_free(&t);
    }
    st_buf_free(&b);
    st_pq_file_free(&f);
    return rc;
}

/* ---- the flush side: the marked deltas of a user into one object ---- */

typedef struct {
    st_drows_t rows;
    st_buf_t gone; /* marked ids whose delta is gone (their conversation deleted) */
    int zstd_level;
} st_dsnap_t;

typedef struct {
    st_buf_t ids;
    size_t left;
    bool capped;
} st_dscan_t;

/* The most rows one delta object takes: each is a lookup and a copy of its record on the loop
 * (the snapshot) and a lookup and compare again at the commit, about twice a message row's cost,
 * so a room's 2,500 tombstones of an erased user in one object made a 4.7 ms commit
 * (bench/loopstall.sh erase, issue 48). More are flushed in the next object, queued at once. */
#define ST__DELTA_FLUSH_ROWS 1024
/* ... and at most what the turn has left of its budget (strata/looplag.h), within these: with a
 * big overlay (an erasure's deletes not yet applied) each lookup missed the caches and 1,024 rows
 * made an 18.5 ms turn (bench/RESULTS.md, Session 24). The rest stay marked for the next object. */
#define ST__DELTA_SNAP_MIN_NS 250000ull
#define ST__DELTA_SNAP_MAX_NS 1500000ull

static int st__mark_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_dscan_t *x = arg;
    (void)val, (void)vlen;
    if (klen < 8) return 0;
    if (!x->left) {
        x->capped = true;
        return 1;
    }
    uint64_t id = st_be64_get((const uint8_t *)key + klen - 8);
    st_buf_append(&x->ids, &id, 8);
    x->left--;
    return 0;
}

static int st__delta_snapshot(void *arg, const char *o, size_t ol, const st_tier_stat_t *st,
                              uint64_t seq, uint64_t writer, st_tier_snap_t *out, uint64_t *wait)
{
    st_chatcold_t *cc = arg;
    st_chat_t *c = cc->chat;
    (void)st;
    const char *u = o + 2;
    size_t ul = ol - 2;
    st_dsnap_t *j = st_calloc(1, sizeof *j);
    j->zstd_level = cc->zstd_level;
    out->rows = j;
    uint8_t pre[ST__KEY_CAP];
    st_dscan_t x = {{0}, ST__DELTA_FLUSH_ROWS, false};
    int rc = st_store_scan(c->store, pre, st__chat_ukey(pre, 'f', u, ul), st__mark_one, &x, wait);
    int64_t first_ts = 0;
    uint64_t until =
        uv_hrtime() + st_looplag_turn_left(ST__DELTA_SNAP_MIN_NS, ST__DELTA_SNAP_MAX_NS);
    for (size_t i = 0; rc >= 0 && i + 8 <= x.ids.len; i += 8) {
        if (i && i % (8 * 32) == 0 && uv_hrtime() >= until) {
            x.capped = true; /* the flush goes again at once for the rest */
            break;
        }
        uint64_t id;
        memcpy(&id, x.ids.data + i, 8);
        const char *js;
        size_t jl;
        if (st__chat_delta_get(c, u, ul, id, &js, &jl, wait) != ST_OK) {
            st_buf_append(&j->gone, &id, 8); /* its mark goes with the next object's commit */
            continue;
        }
        st_drow_t r = {.id = id, .json = st_strndup(js, jl), .len = jl};
        int64_t ts;
        if (!first_ts && st__i64_member(js, jl, "timestamp", &ts)) first_ts = ts;
        st_vec_push(&j->rows, r);
    }
    st_buf_free(&x.ids);
    if (rc < 0) return rc;
    out->n = j->rows.n;
    out->capped = x.capped;
    if (!j->rows.n) return ST_OK;
    st_buf_t key = {0};
    st__chat_object_key(&key, u, ul, first_ts ? first_ts : st_now_us(), writer, seq);
    const char *b = strstr(key.data, "/batch-"); /* the folder's, then delta- for batch- */
    size_t at = b ? (size_t)(b - key.data) + 1 : 0;
    st_buf_append(&out->key, key.data, at);
    st_buf_puts(&out->key, "delta-");
    st_buf_append(&out->key, key.data + at + 6, key.len - at - 6);
    st_buf_free(&key);
    return ST_OK;
}

static int st__delta_encode(void *arg, void *rows, st_buf_t *file)
{
    (void)arg;
    st_dsnap_t *j = rows;
    return st__encode_rows(&j->rows, j->zstd_level, file);
}

static void st__delta_release(void *arg, void *rows)
{
    (void)arg;
    st_dsnap_t *j = rows;
    st__drows_free(&j->rows);
    st_buf_free(&j->gone);
    free(j);
}

/* The marks of the rows written go, unless their delta changed since (written again next). */
static int st__delta_commit(void *arg, const char *o, size_t ol, void *rows, st_tier_file_t *f,
                            uint64_t *wait)
{
    st_chatcold_t *cc = arg;
    st_chat_t *c = cc->chat;
    st_dsnap_t *j = rows;
    const char *u = o + 2;
    size_t ul = ol - 2;
    uint8_t k[ST__KEY_CAP];
    int rc = ST_OK;
    f->min_id = UINT64_MAX;
    f->max_id = 0;
    for (size_t i = 0; i < j->rows.n && rc == ST_OK; i++) {
        const st_drow_t *r = &j->rows.v[i];
        if (r->id < f->min_id) f->min_id = r->id;
        if (r->id > f->max_id) f->max_id = r->id;
        const char *js;
        size_t jl;
        if (st__chat_delta_get(c, u, ul, r->id, &js, &jl, wait) == ST_OK &&
            (jl != r->len || memcmp(js, r->json, jl) != 0))
            continue;
        size_t n = st__chat_ukey(k, 'f', u, ul);
        st_be64_put(k + n, r->id);
        rc = st_store_del(c->store, k, n + 8, wait);
        if (rc == ST_ENOTFOUND) rc = ST_OK;
    }
    for (size_t i = 0; i + 8 <= j->gone.len && rc == ST_OK; i += 8) {
        uint64_t id;
        memcpy(&id, j->gone.data + i, 8);
        size_t n = st__chat_ukey(k, 'f', u, ul);
        st_be64_put(k + n, id);
        rc = st_store_del(c->store, k, n + 8, wait);
        if (rc == ST_ENOTFOUND) rc = ST_OK;
    }
    f->rows = (int64_t)j->rows.n;
    return rc;
}

/* Deltas marked meanwhile (a flush of edited hot messages while this one ran): another. */
static void st__delta_flush_again(void *arg, const char *o, size_t ol)
{
    st_chatcold_t *cc = arg;
    if (ol > 2 && st__chat_has_prefix(cc->chat, 'f', o + 2, ol - 2))
        st_tier_enqueue(cc->tier, o, ol);
}

/* ---- folding dead rows out of delta objects ----
 * A message whose delta record ('Z') went — its conversation deleted, or its owner erased — has
 * no state to keep, but its earlier states stay in the delta objects that hold them. Every merge
 * of an owner's delta objects keeps only rows of messages with a delta record (fold_prepare
 * collects them on the loop as the merge begins). Deleting a conversation marks the owner's
 * delta objects ('z' "~e" u 0 seq -> i64 when, st__chat_delta_mark): chat's fold sweep
 * (pass.c) asks for a fold of the delta owner once a mark is --delta-max-age old, and fold_pick
 * names a marked object to rewrite alone; the swap drops its mark (SPEC §2.2: a deleted
 * conversation's text leaves the object store). */
typedef ST_VEC(uint64_t) st__dids_t;
typedef struct {
    st__dids_t live; /* ids with a delta record, ascending (key order) */
    st__dids_t seqs; /* the objects merged */
    int64_t at;      /* when the merge read the records */
    /* being read (st__delta_fold_more): the delta records under pre, a page at a time */
    st_store_t *store;
    uint8_t pre[ST__KEY_CAP];
    size_t pl;
    st_store_walk_t walk;
    bool ready;
    bool failed; /* the walk could not be read: every row is kept */
} st_dfold_t;

/* Delta records a page of the fold's walk reads (a turn reads pages while its budget lasts). */
#define ST__DFOLD_PAGE 1024

static size_t st__delta_qkey(uint8_t *k, const char *o, size_t ol, uint64_t seq)
{
    size_t n = st__chat_ukey(k, 'z', o, ol);
    st_be64_put(k + n, seq);
    return n + 8;
}

static int st__delta_id(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)val, (void)vlen;
    if (klen >= 8) st_vec_push((st__dids_t *)arg, st_be64_get((const uint8_t *)key + klen - 8));
    return 0;
}

static bool st__delta_live(const st_dfold_t *f, uint64_t id)
{
    if (!f || f->failed) return true;
    size_t lo = 0, hi = f->live.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (f->live.v[mid] == id) return true;
        if (f->live.v[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

static void *st__delta_fold_prepare(void *arg, const char *o, size_t ol, const st_tier_obj_t *objs,
                                    size_t n, int64_t cutoff)
{
    st_chatdelta_t *d = arg;
    (void)cutoff;
    if (ol < 2) return NULL;
    st_dfold_t *f = st_calloc(1, sizeof *f);
    f->at = st_now_us();
    f->store = d->cc->chat->store;
    f->pl = st__chat_ukey(f->pre, 'Z', o + 2, ol - 2);
    for (size_t i = 0; i < n; i++)
        st_vec_push(&f->seqs, objs[i].seq);
    return f;
}

/* The delta records, a page at a time across turns (st_store_walk_page: a record there the whole
 * walk is read once). One that goes meanwhile may still be counted live (its rows kept until a
 * later fold); one written meanwhile has no rows in the objects merged. */
static bool st__delta_fold_more(void *arg, void *note, uint64_t until)
{
    st_dfold_t *f = note;
    (void)arg;
    while (!f->ready) {
        int rc = st_store_walk_page(f->store, f->pre, f->pl, &f->walk, ST__DFOLD_PAGE, st__delta_id,
                                    &f->live);
        if (rc < 0) { /* a read failed: everything is live (nothing is dropped wrongly) */
            f->live.n = 0;
            f->ready = true;
            f->failed = true;
        } else if (rc == 0) {
            f->ready = true;
        }
        if (uv_hrtime() >= until) break;
    }
    return f->ready;
}

static bool st__delta_fold_pick(void *arg, const char *o, size_t ol, const st_tier_obj_t *objs,
                                size_t n, size_t *at)
{
    st_chatdelta_t *d = arg;
    uint8_t pre[ST__KEY_CAP];
    st__dids_t q = {0};
    uint64_t w = 0;
    st_store_scan(d->cc->chat->store, pre, st__chat_ukey(pre, 'z', o, ol), st__delta_id, &q, &w);
    bool found = false;
    for (size_t i = 0; i < n && !found; i++)
        for (size_t k = 0; k < q.n && !found; k++)
            if (q.v[k] == objs[i].seq) {
                found = true;
                *at = i;
            }
    st_vec_free(&q);
    return found;
}

int st__chat_delta_mark(st_chat_t *c, const char *u, size_t ul, uint64_t *wait)
{
    char o[ST_TIER_OWNER_MAX];
    size_t ol = st__chat_delta_owner(o, u, ul);
    st_tier_manifest_t man;
    int rc = st_tier_manifest(c->store, o, ol, false, &man, wait);
    uint8_t k[ST__KEY_CAP];
    int64_t now = st_now_us();
    for (size_t i = 0; i < man.n && rc == ST_OK; i++)
        rc = st_store_put(c->store, k, st__delta_qkey(k, o, ol, man.v[i].seq), &now, sizeof now,
                          wait);
    st_tier_manifest_free(&man);
    return rc;
}

/* ---- the merge side: a user's delta objects into one, the newest state of each message ---- */

typedef struct {
    st_drows_t rows;
} st_dmerge_t;

typedef struct {
    uint64_t id;
    size_t order, at;
} st_dkey_t;

static void st__delta_collect(void *arg, uint64_t id, const char *conv, size_t cl, bool deleted,
                              const char *json, size_t len)
{
    st_dmerge_t *m = arg;
    (void)conv, (void)cl, (void)deleted;
    st_drow_t r = {.id = id, .json = st_strndup(json, len), .len = len};
    st_vec_push(&m->rows, r);
}

static int st__cmp_key(const void *a, const void *b)
{
    const st_dkey_t *x = a, *y = b;
    if (x->id != y->id) return x->id < y->id ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

static int st__delta_merge(void *arg, const char *o, size_t ol, st_objstore_t *obj,
                           const st_tier_obj_t *objs, size_t n, int64_t cutoff, const char *key,
                           st_tier_file_t *out, void **dropped, int64_t *ndropped)
{
    st_chatcold_t *cc = arg;
    (void)cutoff;
    const st_dfold_t *live = *dropped; /* fold_prepare's note: it goes on to commit */
    *ndropped = 0;
    st_dmerge_t m = {0};
    ST_VEC(size_t) ends = {0}; /* rows of objects [0, i] */
    int rc = ST_OK;
    for (size_t i = 0; i < n && rc == ST_OK; i++) {
        st_buf_t b = {0};
        rc = st_objstore_get(obj, objs[i].key, 0, objs[i].file.size, &b);
        if (rc == ST_OK && b.len != objs[i].file.size) rc = ST_EIO;
        if (rc == ST_OK) /* o: the delta owner of an owner's bytes (st__chat_delta_owner) */
            rc = st__chat_delta_decode(b.data, b.len, st__chat_id_field(o + 2, ol - 2),
                                       st__delta_collect, &m);
        if (rc == ST_ENOTFOUND) rc = ST_EIO;
        st_buf_free(&b);
        st_vec_push(&ends, m.rows.n);
    }
    st_dkey_t *ks = st_malloc((m.rows.n ? m.rows.n : 1) * sizeof *ks);
    size_t obj_i = 0;
    for (size_t i = 0; i < m.rows.n; i++) {
        while (obj_i < ends.n && i >= ends.v[obj_i])
            obj_i++;
        ks[i] = (st_dkey_t){m.rows.v[i].id, obj_i, i};
    }
    if (m.rows.n > 1) qsort(ks, m.rows.n, sizeof *ks, st__cmp_key);
    st_drows_t keep = {0};
    for (size_t i = 0; i < m.rows.n; i++)
        if ((i + 1 == m.rows.n || ks[i + 1].id != ks[i].id) && /* the newest of the id */
            st__delta_live(live, ks[i].id)) {
            st_vec_push(&keep, m.rows.v[ks[i].at]);
            m.rows.v[ks[i].at].json = NULL; /* keep's now */
        }
    out->min_id = keep.n ? keep.v[0].id : 0;
    out->max_id = keep.n ? keep.v[keep.n - 1].id : 0;
    out->rows = (int64_t)keep.n;
    if (rc == ST_OK && keep.n) {
        st_buf_t file = {0};
        rc = st__encode_rows(&keep, cc->zstd_level, &file);
        if (rc == ST_OK) rc = st_tier_put_parquet(obj, key, file.data, file.len);
        out->size = file.len;
        st_buf_free(&file);
    }
    st__drows_free(&keep);
    free(ks);
    st_vec_free(&ends);
    st__drows_free(&m.rows);
    return rc;
}

/* In the swap batch: the rewritten objects' markers go, but one set after the merge read its
 * input (a conversation deleted meanwhile) stays, on the new object (it takes the first old
 * one's number), so the delete is folded in by the next rewrite. */
static int st__delta_merge_commit(void *arg, const char *o, size_t ol, void *dropped,
                                  int64_t ndropped, uint64_t *wait)
{
    st_chatcold_t *cc = arg;
    const st_dfold_t *f = dropped;
    (void)ndropped;
    if (!f) return ST_OK;
    uint8_t k[ST__KEY_CAP];
    int64_t later = 0, t;
    int rc = ST_OK;
    for (size_t i = 0; i < f->seqs.n && rc == ST_OK; i++) {
        size_t kl = st__delta_qkey(k, o, ol, f->seqs.v[i]);
        if (st__chat_get_fixed(cc->chat->store, k, kl, &t, sizeof t, wait) != ST_OK) continue;
        if (t > f->at && t > later) later = t;
        rc = st_store_del(cc->chat->store, k, kl, wait);
    }
    if (rc == ST_OK && later && f->seqs.n)
        rc = st_store_put(cc->chat->store, k, st__delta_qkey(k, o, ol, f->seqs.v[0]), &later,
                          sizeof later, wait);
    return rc == ST_ENOTFOUND ? ST_OK : rc;
}

static void st__delta_merge_release(void *arg, void *dropped)
{
    (void)arg;
    st_dfold_t *f = dropped;
    if (!f) return;
    st_vec_free(&f->live);
    st_vec_free(&f->seqs);
    free(f);
}

/* {folder}/delta-{ts}-w{writer}-{seq}.{pseq}.parquet, the first object's time. */
static void st__delta_name(void *arg, const char *o, size_t ol, const char *first_key, uint64_t seq,
                           uint64_t pseq, uint64_t writer, st_buf_t *key)
{
    (void)arg;
    const char *b = strstr(first_key, "/delta-");
    int64_t ts = b ? strtoll(b + 7, NULL, 10) : 0;
    st_buf_t k = {0};
    st__chat_object_key(&k, o + 2, ol - 2, ts, writer, seq);
    const char *bb = strstr(k.data, "/batch-");
    size_t at = bb ? (size_t)(bb - k.data) + 1 : 0;
    st_buf_append(key, k.data, at);
    st_buf_puts(key, "delta-");
    st_buf_append(key, k.data + at + 6, k.len - at - 6 - 8); /* without ".parquet" */
    st_buf_printf(key, ".%llu.parquet", (unsigned long long)pseq);
    st_buf_appendc(key, 0);
    key->len--;
    st_buf_free(&k);
}

/* ---- the member ---- */

static void st__delta_closed(void *arg)
{
    st_chatdelta_t *d = arg;
    st__chat_cold_unref(d->cc);
    free(d);
}

st_tier_member_t *st__chat_delta_member(st_chatcold_t *cc)
{
    st_chatdelta_t *d = st_calloc(1, sizeof *d);
    d->cc = cc; /* its kind's arg: held until the tier is done with this member */
    cc->refs++;
    d->kind = (st_tier_kind_t){.snapshot = st__delta_snapshot,
                               .encode = st__delta_encode,
                               .commit = st__delta_commit,
                               .release = st__delta_release,
                               .flushed = st__delta_flush_again,
                               .arg = cc};
    d->merge = (st_tier_merge_t){
        st__delta_merge, st__delta_merge_commit, st__delta_merge_release, st__delta_name, cc, NULL};
    d->member = (st_tier_member_t){.name = "chat-deltas",
                                   .tag = ST__DELTA_TAG,
                                   .flush = &d->kind,
                                   .merge = &d->merge,
                                   .fold_prepare = st__delta_fold_prepare,
                                   .fold_pick = st__delta_fold_pick,
                                   .fold_more = st__delta_fold_more,
                                   .closed = st__delta_closed,
                                   .arg = d};
    return &d->member;
}
