/* SPDX-License-Identifier: MIT */
/*
 * Finished bookings as a kind of the cold tier (SPEC v4 §4.2, §5 "Kinds"): the seats module's
 * member of the tier (st_seats_tier_member), registered with its option --booking-hot-seconds
 * as st_seats_kind, one line in the kinds' list (kinds.h).
 *
 * Owners are events: "~b" event_id (tag 'b'), so each event has its own manifest, and its
 * objects live under events/{event}/bookings-{ts}-w{writer}-{n}.parquet ({ts}: the oldest
 * finished_at in it, µs). Columns: booking_id INT64 (the sort leaf, with statistics), event_id,
 * owner, status STRING, items LIST of STRUCT(section STRING, seats LIST of STRING, quantity
 * INT64), total_price INT64, created_at, expires_at, finished_at TIMESTAMP µs.
 *
 * What cools: a booking sold, cancelled or expired more than --booking-hot-seconds ago. Its
 * finished_at is the record's updated_at, which the change that finished it set (a finished
 * booking never changes again), so bookings finished before this kind existed cool by the time
 * they finished, with nothing to migrate. The pass source walks the booking records ('B') and
 * queues the events that hold one due; the snapshot walks that event's index ('K') for finished
 * entries, up to ST_TIER_FLUSH_ROWS; the commit batch takes the records and their index entries
 * out, in the tier's swap batch, so a booking is hot or cold, never both, never neither. The hot
 * store then holds no finished booking past the window, however many were sold.
 *
 * Booking ids are snowflakes: a booking's id never comes back, even once every record is cold,
 * because the commit keeps the highest id it moved ('V' "bkfloor"), a floor for the generator
 * at start-up.
 *
 * Retention (--retention-seconds) is for messages and does not drop bookings: they are sales
 * records. Compaction merges an event's objects with the tier's schema-driven merge.
 *
 * Reads (hot first, then cold; a cold read that needs an object not in memory returns
 * ST_EPARKED, and the request parks on st_tier_wait): a booking by id in its event's manifest, or,
 * without an event, in the manifests whose id ranges (file records' min_id..max_id, walked with
 * st_tier_each_file) hold the id;
 * and pages of an event's cold bookings for the listing (history.c merges them with the hot ones).
 *
 * Loop thread only, but encode (a worker).
 */
#include "internal.h"
#include "strata/cold.h"
#include "strata/kinds.h"
#include "strata/tier.h"

#include <stdlib.h>
#include <string.h>

#define ST__TAG        'b'
#define ST__GROUP_ROWS 1024 /* rows a row group holds at most: a cold read decodes one */
#define ST__ZSTD       3

static const uint8_t st__floor_key[] = {ST_KS_SEATS_V, 'b', 'k', 'f', 'l', 'o', 'o', 'r'};

/* ---- the columns ---- */

static const st_pq_field_t st__seat = {
    "element", ST_PQ_BYTE_ARRAY, ST_PQ_REQUIRED, ST_PQ_STRING, 0, NULL, 0, 9};
static const st_pq_field_t st__bk_item_fields[] = {
    {"section", ST_PQ_BYTE_ARRAY, ST_PQ_REQUIRED, ST_PQ_STRING, ST_PQ_DICT, NULL, 0, 7},
    {"seats", ST_PQ_GROUP, ST_PQ_REQUIRED, ST_PQ_LIST, 0, &st__seat, 1, 8},
    {"quantity", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_NONE, 0, NULL, 0, 10},
};
static const st_pq_field_t st__bk_item = {
    "element", ST_PQ_GROUP, ST_PQ_REQUIRED, ST_PQ_NONE, 0, st__bk_item_fields, 3, 6};
static const st_pq_field_t st__fields[] = {
    {"booking_id", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_NONE, ST_PQ_STATS, NULL, 0, 1},
    {"event_id", ST_PQ_BYTE_ARRAY, ST_PQ_REQUIRED, ST_PQ_STRING, ST_PQ_DICT, NULL, 0, 2},
    {"owner", ST_PQ_BYTE_ARRAY, ST_PQ_REQUIRED, ST_PQ_STRING, ST_PQ_DICT, NULL, 0, 3},
    {"status", ST_PQ_BYTE_ARRAY, ST_PQ_REQUIRED, ST_PQ_STRING, ST_PQ_DICT, NULL, 0, 4},
    {"items", ST_PQ_GROUP, ST_PQ_REQUIRED, ST_PQ_LIST, 0, &st__bk_item, 1, 5},
    {"total_price", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_NONE, 0, NULL, 0, 11},
    {"created_at", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_TIMESTAMP_US, 0, NULL, 0, 12},
    {"expires_at", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_TIMESTAMP_US, 0, NULL, 0, 13},
    {"finished_at", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_TIMESTAMP_US, ST_PQ_STATS, NULL, 0, 14},
};
/* sorted by booking_id (leaf 0); row groups cut by count */
const st_pq_schema_t st_seats_booking_schema = {st__fields, 9, 0, -1};

static const char *const st__status_names[] = {"", "reserved", "sold", "cancelled", "expired"};

/* ---- the member ---- */

struct st_bkcold {
    st_seats_t *s;
    st_tier_t *tier;
    int64_t hot_us;
    int64_t cutoff; /* this pass's: bookings finished before it cool */
    char last[ST_NAME_MAX];
    size_t last_len; /* the event the pass queued last */
    st_tier_kind_t kind;
    st_tier_merge_t merge;
    st_tier_source_t source;
    st_tier_member_t member;
};

static bool st__finished(int status)
{
    return status == ST_BK_SOLD || status == ST_BK_CANCELLED || status == ST_BK_EXPIRED;
}

/* The object key's folder: the event id, a leading '.' as '~' (no "." or ".." segment). */
static void st__folder(st_buf_t *b, const char *ev, size_t el)
{
    st_buf_puts(b, "events/");
    if (el && ev[0] == '.') {
        st_buf_appendc(b, '~');
        ev++;
        el--;
    }
    st_buf_append(b, ev, el);
}

static void st__object_key(st_buf_t *b, const char *ev, size_t el, int64_t ts, uint64_t writer,
                           uint64_t seq)
{
    st__folder(b, ev, el);
    st_buf_printf(b, "/bookings-%lld-", (long long)ts);
    st_tier_key_writer(b, writer);
    st_buf_printf(b, "-%llu.parquet", (unsigned long long)seq);
    st_buf_appendc(b, 0);
    b->len--;
}

/* ---- the pass: events with bookings due ---- */

static void st__bk_pass_begin(void *arg, int flags)
{
    st_bkcold_t *bc = arg;
    (void)flags;
    bc->cutoff = st_now_us() - bc->hot_us;
    bc->last_len = 0;
}

static bool st__bk_want(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_bkcold_t *bc = arg;
    const uint8_t *p = val;
    int64_t upd;
    (void)key;
    if (klen != 9 || vlen < 52 || !st__finished(p[1])) return false;
    memcpy(&upd, p + 36, 8); /* the record's updated_at (record.c) */
    return upd <= bc->cutoff;
}

static void st__bk_act(void *arg, const void *key, size_t klen)
{
    st_bkcold_t *bc = arg;
    uint64_t w = 0;
    st_booking_t b;
    st_buf_t keep = {0};
    if (klen == 9 &&
        st__load(bc->s, st_be64_get((const uint8_t *)key + 1), &b, &keep, &w) == ST_OK) {
        free(b.seats);
        if (b.event_len != bc->last_len || memcmp(b.event_id, bc->last, b.event_len) != 0) {
            char o[ST_TIER_OWNER_MAX];
            size_t ol = st_tier_owner(o, ST__TAG, b.event_id, b.event_len);
            st_tier_enqueue(bc->tier, o, ol);
            memcpy(bc->last, b.event_id, b.event_len);
            bc->last_len = b.event_len;
        }
    }
    st_buf_free(&keep);
}

/* ---- the flush: a snapshot of an event's bookings due ---- */

typedef struct {
    uint32_t off, len;
} st_span_t;

typedef struct {
    uint64_t id;
    int status;
    int64_t price, created, expires, finished;
    st_span_t owner;
    uint32_t item0, nitems;
} st_bkrow_t;

typedef struct {
    st_span_t section;
    uint32_t name0, nnames;
    int64_t quantity;
} st_bkitem_t;

typedef struct {
    ST_VEC(st_bkrow_t) rows;
    ST_VEC(st_bkitem_t) items;
    ST_VEC(st_span_t) names;
    st_buf_t str;
    char ev[ST_NAME_MAX];
    size_t el;
} st_bksnap_t;

static st_span_t st__bksnap_str(st_bksnap_t *j, const char *p, size_t n)
{
    st_span_t sp = {(uint32_t)j->str.len, (uint32_t)n};
    st_buf_append(&j->str, p, n);
    return sp;
}

/* One booking into the snapshot: its seats as names ("row-col"; none in general admission). */
static void st__snap_add(st_bksnap_t *j, st_event_t *e, const st_booking_t *b)
{
    st_bkrow_t r = {.id = b->id,
                    .status = b->status,
                    .price = b->total_price,
                    .created = b->created_at,
                    .expires = b->expires_at,
                    .finished = b->updated_at,
                    .owner = st__bksnap_str(j, b->owner, b->owner_len),
                    .item0 = (uint32_t)j->items.n,
                    .nitems = (uint32_t)b->nitems};
    st_buf_t nm = {0};
    for (size_t k = 0; k < b->nitems; k++) {
        const st_bitem_t *it = &b->items[k];
        const st_section_t *sec = e ? st__section_find(e, it->section, it->section_len) : NULL;
        st_bkitem_t bi = {.section = st__bksnap_str(j, it->section, it->section_len),
                          .name0 = (uint32_t)j->names.n,
                          .quantity = it->n};
        for (uint32_t i = 0; sec && !sec->ga && i < it->n; i++) {
            st_buf_reset(&nm);
            st__seat_name(&nm, sec, b->seats[it->off + i]); /* a JSON string: "row-col" */
            bool q = nm.len >= 2 && nm.data[0] == '"';
            st_span_t sp = st__bksnap_str(j, nm.data + q, nm.len - 2 * q);
            st_vec_push(&j->names, sp);
            bi.nnames++;
        }
        st_vec_push(&j->items, bi);
    }
    st_buf_free(&nm);
    st_vec_push(&j->rows, r);
}

#define ST__SCAN_PAGE   1024  /* index entries read per range */
#define ST__SCAN_BUDGET 65536 /* finished entries one snapshot looks at, at most */

typedef struct {
    ST_VEC(uint64_t) ids;
    uint64_t last; /* the last entry seen (finished or not) */
    size_t seen;
} st_idscan_t;

static int st__index_entry(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_idscan_t *x = arg;
    if (klen < 10 || vlen != 1) return 0;
    x->last = st_be64_get((const uint8_t *)key + klen - 8);
    if (st__finished(((const uint8_t *)val)[0])) st_vec_push(&x->ids, x->last);
    return ++x->seen == ST__SCAN_PAGE ? 1 : 0;
}

/* 'K' event 0 (history.c's index) */
static size_t st__index_prefix(uint8_t *k, const char *ev, size_t el)
{
    k[0] = 'K';
    memcpy(k + 1, ev, el);
    k[1 + el] = 0;
    return 2 + el;
}

static int st__bk_take_snapshot(void *arg, const char *o, size_t ol, const st_tier_stat_t *st,
                                uint64_t seq, uint64_t writer, st_tier_snap_t *out, uint64_t *wait)
{
    st_bkcold_t *bc = arg;
    st_seats_t *s = bc->s;
    (void)st;
    st_bksnap_t *j = st_calloc(1, sizeof *j);
    out->rows = j;
    if (ol < 3 || ol - 2 > ST_NAME_MAX) return ST_OK;
    j->el = ol - 2;
    memcpy(j->ev, o + 2, j->el);
    st_event_t *e = st__event_find(s, j->ev, j->el, NULL);
    int64_t cutoff = st_now_us() - bc->hot_us;
    uint8_t pre[ST_NAME_MAX + 16], from[ST_NAME_MAX + 16];
    size_t pl = st__index_prefix(pre, j->ev, j->el);
    memcpy(from, pre, pl);
    st_idscan_t x = {0};
    st_buf_t keep = {0};
    int64_t oldest = INT64_MAX;
    size_t looked = 0;
    int rc = ST_OK;
    bool full = false;
    /* The event's index in pages, oldest id first, for the finished entries (a bounded number
     * per snapshot: one made of bookings not yet due waits for the next pass), then their
     * records for the time they finished. */
    for (bool more = true; rc == ST_OK && more && !full && looked < ST__SCAN_BUDGET;) {
        x.ids.n = 0;
        x.seen = 0;
        rc = st_store_scan_from(s->store, pre, pl, x.last ? from : NULL, x.last ? pl + 8 : 0,
                                st__index_entry, &x, wait);
        more = rc == 1;
        if (rc == 1) rc = ST_OK;
        st_be64_put(from + pl, x.last + 1);
        looked += x.ids.n;
        for (size_t i = 0; rc == ST_OK && i < x.ids.n; i++) {
            st_booking_t b;
            if (st__load(s, x.ids.v[i], &b, &keep, wait) != ST_OK) continue;
            if (st__finished(b.status) && b.updated_at <= cutoff) {
                if (j->rows.n == ST_TIER_FLUSH_ROWS || j->str.len >= ST_TIER_FLUSH_BYTES) {
                    out->capped = true; /* more are due: the next flush follows at once */
                    full = true;
                    free(b.seats);
                    break;
                }
                st__snap_add(j, e, &b);
                if (b.updated_at < oldest) oldest = b.updated_at;
            }
            free(b.seats);
        }
    }
    st_buf_free(&keep);
    st_vec_free(&x.ids);
    if (rc != ST_OK || j->rows.n == 0) return rc;
    out->n = j->rows.n;
    st__object_key(&out->key, j->ev, j->el, oldest, writer, seq);
    return ST_OK;
}

static const char *st__sp(const st_bksnap_t *j, st_span_t sp)
{
    return j->str.data + sp.off;
}

static void st__put_row(void *arg, size_t i, st_pq_rec_t *r)
{
    const st_bksnap_t *j = arg;
    const st_bkrow_t *b = &j->rows.v[i];
    const char *st = st__status_names[b->status];
    st_pq_put_i64(r, (int64_t)b->id);
    st_pq_put_str(r, j->ev, j->el);
    st_pq_put_str(r, st__sp(j, b->owner), b->owner.len);
    st_pq_put_str(r, st, strlen(st));
    st_pq_put_list(r, b->nitems);
    for (uint32_t k = 0; k < b->nitems; k++) {
        const st_bkitem_t *it = &j->items.v[b->item0 + k];
        st_pq_put_struct(r);
        st_pq_put_str(r, st__sp(j, it->section), it->section.len);
        st_pq_put_list(r, it->nnames);
        for (uint32_t n = 0; n < it->nnames; n++) {
            st_span_t sp = j->names.v[it->name0 + n];
            st_pq_put_str(r, st__sp(j, sp), sp.len);
        }
        st_pq_put_i64(r, it->quantity);
    }
    st_pq_put_i64(r, b->price);
    st_pq_put_i64(r, b->created);
    st_pq_put_i64(r, b->expires);
    st_pq_put_i64(r, b->finished);
}

static int st__bk_encode(void *arg, void *rows, st_buf_t *object)
{
    (void)arg;
    st_bksnap_t *j = rows;
    st_pq_write_t w = {.schema = &st_seats_booking_schema,
                       .nrows = j->rows.n,
                       .row = st__put_row,
                       .arg = j,
                       .group_rows = ST__GROUP_ROWS,
                       .zstd_level = ST__ZSTD};
    return st_pq_write(&w, object);
}

/* The hot side of the commit: the records and their index entries out. */
static int st__snap_commit(void *arg, const char *o, size_t ol, void *rows, st_tier_file_t *f,
                           uint64_t *wait)
{
    st_bkcold_t *bc = arg;
    st_bksnap_t *j = rows;
    (void)o, (void)ol;
    uint8_t k[ST_NAME_MAX + 16];
    size_t pl = st__index_prefix(k, j->ev, j->el);
    int rc = ST_OK;
    f->min_id = UINT64_MAX;
    f->max_id = 0;
    for (size_t i = 0; i < j->rows.n && rc == ST_OK; i++) {
        uint64_t id = j->rows.v[i].id;
        uint8_t bk[9];
        rc = st_store_del(bc->s->store, bk, st__bkey(bk, id, ST_KS_BOOKING), wait);
        if (rc == ST_ENOTFOUND) rc = ST_OK;
        st_be64_put(k + pl, id);
        if (rc == ST_OK) rc = st_store_del(bc->s->store, k, pl + 8, wait);
        if (rc == ST_ENOTFOUND) rc = ST_OK;
        if (id < f->min_id) f->min_id = id;
        if (id > f->max_id) f->max_id = id;
    }
    f->rows = (int64_t)j->rows.n;
    /* the floor of the id generator: the highest id that ever left the hot store */
    if (rc == ST_OK) rc = st__cold_floor_raise(bc->s->store, f->max_id, wait);
    return rc;
}

static void st__snap_release(void *arg, void *rows)
{
    (void)arg;
    st_bksnap_t *j = rows;
    if (!j) return;
    st_vec_free(&j->rows);
    st_vec_free(&j->items);
    st_vec_free(&j->names);
    st_buf_free(&j->str);
    free(j);
}

/* ---- compaction: the tier's merge for any schema ---- */

static int st__bk_merge(void *arg, const char *o, size_t ol, st_objstore_t *obj,
                        const st_tier_obj_t *objs, size_t n, int64_t cutoff, const char *key,
                        st_tier_file_t *out, void **dropped, int64_t *ndropped)
{
    (void)arg, (void)o, (void)ol, (void)cutoff; /* no retention of bookings */
    *dropped = NULL;
    *ndropped = 0;
    return st_tier_pq_merge(&st_seats_booking_schema, ST__GROUP_ROWS, ST__ZSTD, obj, objs, n, key,
                            out);
}

static int st__bk_merge_commit(void *arg, const char *o, size_t ol, void *dropped, int64_t ndropped,
                               uint64_t *wait)
{
    (void)arg, (void)o, (void)ol, (void)dropped, (void)ndropped, (void)wait;
    return ST_OK;
}

static void st__bk_merge_release(void *arg, void *dropped)
{
    (void)arg, (void)dropped;
}

/* The merged object keeps the first one's timestamp. */
static void st__bk_merge_name(void *arg, const char *o, size_t ol, const char *first_key,
                              uint64_t seq, uint64_t pseq, uint64_t writer, st_buf_t *key)
{
    (void)arg, (void)seq;
    const char *p = strstr(first_key, "/bookings-");
    long long ts = p ? strtoll(p + 10, NULL, 10) : 0;
    st__object_key(key, o + 2, ol - 2, ts, writer, pseq);
}

/* ---- the member ---- */

static void st__bk_stop(void *arg)
{
    st_bkcold_t *bc = arg;
    if (bc->s && bc->s->cold == bc) bc->s->cold = NULL;
}

static void st__bk_closed(void *arg)
{
    free(arg);
}

st_tier_member_t *st_seats_tier_member(st_seats_t *s, st_tier_t *t, uint64_t hot_seconds)
{
    st_bkcold_t *bc = st_calloc(1, sizeof *bc);
    bc->s = s;
    bc->tier = t;
    bc->hot_us = (int64_t)hot_seconds * 1000000;
    bc->kind = (st_tier_kind_t){.snapshot = st__bk_take_snapshot,
                                .encode = st__bk_encode,
                                .commit = st__snap_commit,
                                .release = st__snap_release,
                                .arg = bc};
    bc->merge = (st_tier_merge_t){.merge = st__bk_merge,
                                  .commit = st__bk_merge_commit,
                                  .release = st__bk_merge_release,
                                  .name = st__bk_merge_name,
                                  .arg = bc};
    bc->source = (st_tier_source_t){.name = "finished bookings",
                                    .prefix = ST_KS_BOOKING,
                                    .page = 256,
                                    .order = ST_TIER_ORDER_MIDDLE,
                                    .want = st__bk_want,
                                    .act = st__bk_act,
                                    .begin = st__bk_pass_begin,
                                    .arg = bc};
    bc->member = (st_tier_member_t){.name = "bookings",
                                    .tag = ST__TAG,
                                    .sources = &bc->source,
                                    .nsources = 1,
                                    .flush = &bc->kind,
                                    .merge = &bc->merge,
                                    .schema = &st_seats_booking_schema,
                                    .rebuild = st__bk_rebuild,
                                    .stop = st__bk_stop,
                                    .closed = st__bk_closed,
                                    .arg = bc};
    if (s) s->cold = bc;
    return &bc->member;
}

typedef struct {
    uint64_t hot_seconds; /* --booking-hot-seconds */
} st__bk_kind_opts_t;

static const st_cfg_opt_t st__bk_kind_opts[] = {
    ST_CFG_NUM(st__bk_kind_opts_t, ST_CFG_U64, hot_seconds, "booking-hot-seconds",
               "STRATA_BOOKING_HOT_SECONDS", "86400", 0, 86400ULL * 36500,
               "seconds a finished booking stays hot after it finished (then cold, in Parquet; 0: "
               "at the next flush pass)"),
};

static st_tier_member_t *st__bk_kind_member(const st_kind_env_t *env, const void *opts)
{
    const st__bk_kind_opts_t *o = opts;
    return st_seats_tier_member(env->seats, env->tier, o->hot_seconds);
}

const st_kind_t st_seats_kind = {.name = "bookings",
                                 ST_KIND_OPTS(st__bk_kind_opts, st__bk_kind_opts_t),
                                 .member = st__bk_kind_member,
                                 .table = &st_seats_table};

int st__cold_floor_raise(st_store_t *store, uint64_t id, uint64_t *wait)
{
    const void *v;
    size_t vl;
    uint64_t floor = 0;
    if (st_store_get(store, st__floor_key, sizeof st__floor_key, &v, &vl, wait) == ST_OK && vl == 8)
        memcpy(&floor, v, 8);
    return id > floor ? st_store_put(store, st__floor_key, sizeof st__floor_key, &id, 8, wait)
                      : ST_OK;
}

int st__cold_floor(st_seats_t *s)
{
    const void *v;
    size_t vl;
    uint64_t w = 0, floor;
    if (st_store_get(s->store, st__floor_key, sizeof st__floor_key, &v, &vl, &w) == ST_OK &&
        vl == 8) {
        memcpy(&floor, v, 8);
        st_snowflake_floor(&s->ids, floor);
    }
    return ST_OK;
}

/* ---- reads ---- */

typedef struct {
    const char *p;
    size_t n;
} st_sv_t;

/* One cold row, its strings borrowed from the table. */
typedef struct {
    int64_t id, price, created, expires, finished;
    st_sv_t ev, owner, status;
    size_t nitems;
    struct {
        st_sv_t section;
        size_t seat0, nseats;
        int64_t quantity;
    } items[ST_SEATS_MAX_PER_BOOKING];
    ST_VEC(st_sv_t) seats;
} st_crow_t;

static void st__bk_get_str(st_pq_cur_t *c, st_sv_t *v)
{
    if (!st_pq_get_str(c, &v->p, &v->n)) v->p = "", v->n = 0;
}

static void st__row_read(st_pq_cur_t *c, st_crow_t *r)
{
    r->seats.n = 0;
    st_pq_get_i64(c, &r->id);
    st__bk_get_str(c, &r->ev);
    st__bk_get_str(c, &r->owner);
    st__bk_get_str(c, &r->status);
    size_t n = 0;
    st_pq_get_list(c, &n);
    r->nitems = 0;
    for (size_t k = 0; k < n; k++) {
        st_sv_t sec;
        size_t ns = 0;
        int64_t q = 0;
        st_pq_get_struct(c);
        st__bk_get_str(c, &sec);
        st_pq_get_list(c, &ns);
        size_t first = r->seats.n;
        for (size_t i = 0; i < ns; i++) {
            st_sv_t sv;
            st__bk_get_str(c, &sv);
            st_vec_push(&r->seats, sv);
        }
        st_pq_get_i64(c, &q);
        if (r->nitems < ST_SEATS_MAX_PER_BOOKING) {
            r->items[r->nitems].section = sec;
            r->items[r->nitems].seat0 = first;
            r->items[r->nitems].nseats = ns;
            r->items[r->nitems].quantity = q;
            r->nitems++;
        }
    }
    st_pq_get_i64(c, &r->price);
    st_pq_get_i64(c, &r->created);
    st_pq_get_i64(c, &r->expires);
    st_pq_get_i64(c, &r->finished);
}

static void st__row_seats(st_buf_t *out, const st_crow_t *r, size_t k)
{
    st_buf_appendc(out, '[');
    for (size_t i = 0; i < r->items[k].nseats; i++) {
        const st_sv_t *sv = &r->seats.v[r->items[k].seat0 + i];
        if (i) st_buf_appendc(out, ',');
        st_buf_append_json_str(out, sv->p, sv->n);
    }
    st_buf_appendc(out, ']');
}

/* The booking JSON of a cold row: the same fields as a hot booking's (record.c). */
static void st__row_json(st_buf_t *out, const st_crow_t *r)
{
    st_buf_puts(out, "{\"booking_id\":\"");
    st_buf_append_u64(out, (uint64_t)r->id);
    st_buf_puts(out, "\",\"event_id\":");
    st_buf_append_json_str(out, r->ev.p, r->ev.n);
    st_buf_puts(out, ",\"section\":");
    if (r->nitems)
        st_buf_append_json_str(out, r->items[0].section.p, r->items[0].section.n);
    else
        st_buf_puts(out, "\"\"");
    st_buf_puts(out, ",\"seats\":");
    if (r->nitems)
        st__row_seats(out, r, 0);
    else
        st_buf_puts(out, "[]");
    st_buf_puts(out, ",\"items\":[");
    for (size_t k = 0; k < r->nitems; k++) {
        st_buf_puts(out, k ? ",{\"section\":" : "{\"section\":");
        st_buf_append_json_str(out, r->items[k].section.p, r->items[k].section.n);
        st_buf_puts(out, ",\"seats\":");
        st__row_seats(out, r, k);
        st_buf_printf(out, ",\"quantity\":%lld}", (long long)r->items[k].quantity);
    }
    st_buf_puts(out, "],\"status\":");
    st_buf_append_json_str(out, r->status.p, r->status.n);
    st_buf_printf(out, ",\"total_price\":%lld,\"created_at\":%lld,\"expires_at\":%lld",
                  (long long)r->price, (long long)r->created, (long long)r->expires);
    st_buf_puts(out, ",\"owner\":");
    st_buf_append_json_str(out, r->owner.p, r->owner.n);
    st_buf_printf(out, ",\"finished_at\":%lld}", (long long)r->finished); /* cold: finished */
}

/* What a scan of cold rows keeps: the rows that match, rendered. */
typedef struct {
    uint64_t lo, hi; /* lo < id < hi (0: open) */
    int status;      /* 0: any */
    const char *owner;
    size_t owner_len;
    st_crow_t row;
    st_cands_t *cands;
    bool found_owner_check; /* with ref: the booking's owner must be who asks */
    const st_booking_ref_t *ref;
    bool forbidden;
} st_cscan_t;

static int st__scan_group(void *arg, const st_pq_table_t *tab, st_tier_ids_t *kept)
{
    st_cscan_t *x = arg;
    st_pq_cur_t c;
    st_pq_cur_init(&c, tab);
    while (st_pq_cur_next(&c)) {
        st_crow_t *r = &x->row;
        st__row_read(&c, r);
        uint64_t id = (uint64_t)r->id;
        if ((x->lo && id <= x->lo) || (x->hi && id >= x->hi)) continue;
        if (x->status && (r->status.n != strlen(st__status_names[x->status]) ||
                          memcmp(r->status.p, st__status_names[x->status], r->status.n) != 0))
            continue;
        if (x->owner &&
            (r->owner.n != x->owner_len || memcmp(r->owner.p, x->owner, x->owner_len) != 0))
            continue;
        if (x->ref && !x->ref->admin &&
            (r->owner.n != x->ref->subject_len ||
             memcmp(r->owner.p, x->ref->subject, r->owner.n) != 0)) {
            x->forbidden = true;
            st_vec_push(kept, id);
            continue;
        }
        st_cand_t cd = {id, x->cands->json.len, 0};
        st__row_json(&x->cands->json, r);
        cd.len = x->cands->json.len - cd.off;
        st_vec_push(&x->cands->v, cd);
        st_vec_push(kept, id);
    }
    return st_pq_cur_done(&c) == ST_OK ? 0 : 1;
}

int st__cold_page(st_seats_t *s, const st_bookings_query_t *q, size_t need, size_t budget,
                  st_cands_t *out, uint64_t *frontier, uint64_t *wait)
{
    *frontier = 0;
    st_bkcold_t *bc = s->cold;
    if (!bc) return ST_OK;
    char o[ST_TIER_OWNER_MAX];
    size_t ol = st_tier_owner(o, ST__TAG, q->event_id, q->event_len);
    st_cscan_t x = {.hi = q->cursor,
                    .status = q->status,
                    .owner = q->owner,
                    .owner_len = q->owner_len,
                    .cands = out};
    st_tier_scanq_t sq = {.hi = q->cursor, /* the member's schema */
                          .need = need,
                          .budget = budget,
                          .group = st__scan_group,
                          .arg = &x};
    int rc = st_tier_scan(bc->tier, o, ol, &sq, frontier, wait);
    st_vec_free(&x.row.seats);
    return rc;
}

/* The events whose manifests' id ranges hold id (the tier's file records of the kind's owners). */
typedef struct {
    uint64_t id;
    ST_VEC(st_sv_t) evs;
    st_buf_t names;
} st_evfind_t;

static int st__ev_range(void *arg, const char *o, size_t ol, uint64_t seq, const st_tier_file_t *f,
                        const char *key, size_t kl, const uint8_t *stats, size_t sl)
{
    st_evfind_t *x = arg;
    (void)seq, (void)key, (void)kl, (void)stats, (void)sl;
    if (x->id < f->min_id || x->id > f->max_id) return 0;
    const char *ev = o + 2; /* the owner: "~" ST__TAG event */
    size_t el = ol - 2;
    for (size_t i = 0; i < x->evs.n; i++)
        if (x->evs.v[i].n == el && memcmp(x->names.data + (uintptr_t)x->evs.v[i].p, ev, el) == 0)
            return 0;
    st_sv_t sv = {(const char *)(uintptr_t)x->names.len, el};
    st_buf_append(&x->names, ev, el);
    st_vec_push(&x->evs, sv);
    return 0;
}

int st__cold_booking(st_seats_t *s, uint64_t id, const st_booking_ref_t *ref, st_buf_t *out,
                     uint64_t *wait)
{
    st_bkcold_t *bc = s->cold;
    if (!bc) return ST_ENOTFOUND;
    st_evfind_t ev = {.id = id};
    if (ref->event_id) {
        st_sv_t sv = {0, ref->event_len};
        st_buf_append(&ev.names, ref->event_id, ref->event_len);
        st_vec_push(&ev.evs, sv);
    } else {
        int rc = st_tier_each_file(s->store, ST__TAG, st__ev_range, &ev, wait);
        if (rc != ST_OK) {
            st_vec_free(&ev.evs);
            st_buf_free(&ev.names);
            return rc;
        }
    }
    st_cands_t cands = {0};
    int rc = ST_ENOTFOUND;
    bool parked = false, forbidden = false;
    for (size_t i = 0; i < ev.evs.n && !cands.v.n; i++) {
        char o[ST_TIER_OWNER_MAX];
        size_t ol =
            st_tier_owner(o, ST__TAG, ev.names.data + (uintptr_t)ev.evs.v[i].p, ev.evs.v[i].n);
        st_cscan_t x = {.lo = id - 1, .hi = id + 1, .cands = &cands, .ref = ref};
        st_tier_scanq_t sq = {
            .lo = id - 1, .hi = id + 1, .need = 1, .group = st__scan_group, .arg = &x};
        uint64_t fr;
        int r = st_tier_scan(bc->tier, o, ol, &sq, &fr, wait);
        st_vec_free(&x.row.seats);
        if (r == ST_EPARKED) {
            parked = true;
            cands.v.n = 0;
        } else if (r != ST_OK) {
            rc = r;
            break;
        }
        forbidden |= x.forbidden && r == ST_OK;
    }
    if (cands.v.n) {
        st_buf_append(out, cands.json.data + cands.v.v[0].off, cands.v.v[0].len);
        rc = ST_OK;
    } else if (parked) {
        rc = ST_EPARKED;
    } else if (forbidden) {
        rc = ST_EFORBIDDEN;
    }
    st_vec_free(&cands.v);
    st_buf_free(&cands.json);
    st_vec_free(&ev.evs);
    st_buf_free(&ev.names);
    return rc;
}
