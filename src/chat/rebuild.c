/* SPDX-License-Identifier: MIT */
/*
 * Re-seeding the hot store from object storage alone (SPEC §6, `strata rebuild-meta`): every
 * object named {user}/batch-{ts}-{seq}.parquet is listed, its footer read, and from the row
 * groups' statistics (conversation, rows, msg_id and timestamp ranges) the manifest, each
 * user's cold summary, every conversation's cold baseline and first/last ids and times, the
 * newest-first index and the user totals are written — merged with whatever hot data the store
 * still holds. No message data is read, only footers.
 *
 * The tables are the truth (SPEC v5 §5.1): of the listed message objects only those the current
 * snapshot of the user's table (messages, a room's: room_messages) names are taken, and those
 * flushed after it was committed (st_tier_rebuild_pick, src/cold/rebuild.c): a conversation
 * deleted and folded away, or an object replaced and not yet reaped, does not come back. With no
 * table (never committed, --table-commit-interval 0) every listed object is, as before tables.
 * Delta objects are no table's: they are listed.
 */
#define _GNU_SOURCE /* memrchr */
#include "internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char user[ST_CHAT_OWNER_MAX + 1];
    size_t ulen;
    uint64_t seq, size;
    uint64_t gen; /* a compaction's fresh number ({seq}.{gen}.parquet); 0 for a flush's */
    char *key;
} st_obj_t;

typedef ST_VEC(st_obj_t) st_objs_t;

/* "{folder}/batch-{ts}-[w{writer}-]{seq}.parquet" (the folder as st__chat_object_key writes it). */
static int st__on_object(void *arg, const char *key, uint64_t size)
{
    st_objs_t *o = arg;
    const char *slash = strrchr(key, '/'); /* rooms' folders hold one (keys.c) */
    if (!slash || strncmp(slash + 1, "batch-", 6) != 0) return 0;
    size_t kl = strlen(key);
    if (kl < 8 || strcmp(key + kl - 8, ".parquet") != 0) return 0;
    const char *dash = memrchr(slash, '-', (size_t)(key + kl - slash));
    if (!dash) return 0;
    st_obj_t ob = {0};
    if (!st__chat_folder_user(key, (size_t)(slash - key), ob.user, &ob.ulen)) return 0;
    ob.user[ob.ulen] = 0;
    char *end;
    ob.seq = strtoull(dash + 1, &end, 10);
    if (*end == '.' && end[1] >= '0' && end[1] <= '9') ob.gen = strtoull(end + 1, NULL, 10);
    ob.size = size;
    ob.key = st_strndup(key, kl);
    st_vec_push(o, ob);
    return 0;
}

/* "{folder}/delta-{ts}-[w{writer}-]{seq}[.{gen}].parquet" (delta.c). */
static int st__on_delta(void *arg, const char *key, uint64_t size)
{
    const char *slash = strchr(key, '/');
    if (!slash || strncmp(slash + 1, "delta-", 6) != 0) return 0;
    char tmp[ST_TIER_OWNER_MAX + 600];
    size_t kl = strlen(key);
    if (kl + 1 > sizeof tmp) return 0;
    /* parsed as a batch key would be */
    memcpy(tmp, key, (size_t)(slash - key) + 1);
    memcpy(tmp + (slash - key) + 1, "batch-", 6);
    memcpy(tmp + (slash - key) + 7, slash + 7, kl - (size_t)(slash - key) - 7 + 1);
    st_objs_t *o = arg;
    size_t before = o->n;
    st__on_object(arg, tmp, size);
    if (o->n > before) {
        free(o->v[o->n - 1].key);
        o->v[o->n - 1].key = st_strndup(key, kl);
    }
    return 0;
}

static int st__cmp_obj(const void *a, const void *b)
{
    const st_obj_t *x = a, *y = b;
    int c = strcmp(x->user, y->user);
    if (c) return c;
    if (x->seq != y->seq) return (x->seq > y->seq) - (x->seq < y->seq);
    return (x->gen > y->gen) - (x->gen < y->gen);
}

/* Also the file's column stats into *stats (colstats.c; empty when its footer says none), for
 * its record: no tables' commit reads the footer again. */
static int st__footer_of(st_objstore_t *obj, const st_obj_t *o, st_pq_meta_t *m, st_buf_t *stats)
{
    st_buf_t b = {0};
    uint32_t flen;
    int rc = o->size >= 12 ? st_objstore_get(obj, o->key, o->size - 8, 8, &b) : ST_EINVAL;
    if (rc == ST_OK) rc = st_parquet_footer_len((const uint8_t *)b.data, o->size, &flen);
    if (rc == ST_OK) {
        st_buf_reset(&b);
        rc = st_objstore_get(obj, o->key, o->size - 8 - flen, flen, &b);
    }
    if (rc == ST_OK) rc = st_parquet_parse_footer((const uint8_t *)b.data, flen, o->size, m);
    if (rc == ST_OK && st_tier_stats_of_footer(b.data, flen, stats) != ST_OK) st_buf_reset(stats);
    st_buf_free(&b);
    return rc;
}

typedef struct {
    char conv[ST_NAME_MAX + 1];
    size_t clen;
    int64_t rows;
    uint64_t first, last;
    int64_t created, updated;
    int64_t last_seq;
} st_cagg_t;
typedef ST_VEC(st_cagg_t) st_caggs_t;

/* Folds one conversation's cold aggregate into its record (created if the store has none). */
static int st__fold_conv(st_chat_t *c, const char *u, size_t ul, const st_cagg_t *a, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    size_t kl = st__chat_ckey(k, u, ul, a->conv, a->clen);
    st_conv_t cv;
    int rc = st__chat_conv_get(c->store, k, kl, &cv, wait);
    if (rc == ST_ENOTFOUND) {
        cv = (st_conv_t){a->first, a->last, a->created, a->updated, 0, 0, 0};
    } else if (rc == ST_OK) {
        uint8_t uk[ST__KEY_CAP];
        size_t ukl = st__chat_ukey_upd(uk, u, ul, cv.updated, a->conv, a->clen);
        if ((rc = st_store_del(c->store, uk, ukl, wait)) != ST_OK) return rc;
        if (a->first < cv.first) cv.first = a->first;
        if (a->last > cv.last) cv.last = a->last;
        if (a->created < cv.created) cv.created = a->created;
        if (a->updated > cv.updated) cv.updated = a->updated;
    } else {
        return rc;
    }
    /* the rows less the tombstones among them the store holds already (a backup's: the delta
     * pass below counts only those it adds) */
    int64_t dead = 0, hot_dead;
    rc = st__chat_dead_count(c, u, ul, a->conv, a->clen, a->last, &dead, &hot_dead, wait);
    if (rc != ST_OK) return rc;
    cv.base_total = a->rows - dead;
    /* seq goes on from the highest one either side holds */
    if (a->last_seq > cv.last_seq) cv.last_seq = a->last_seq;
    if (cv.last_seq < cv.base_total + cv.hot_total) cv.last_seq = cv.base_total + cv.hot_total;
    if ((rc = st_store_put(c->store, k, kl, &cv, sizeof cv, wait)) != ST_OK) return rc;
    size_t ukl = st__chat_ukey_upd(k, u, ul, cv.updated, a->conv, a->clen);
    return st_store_put(c->store, k, ukl, a->conv, a->clen, wait);
}

/* Whether object i is an orphan of a crashed flush: its rows were flushed again into an object
 * of a higher seq (a flush that is recorded always covers the oldest hot rows, and only one
 * flush of a user runs at a time, so a recorded object never overlaps a later one). */
static bool st__superseded(const st_coldfile_t *f, const bool *skip, size_t n, size_t i)
{
    for (size_t j = i + 1; j < n; j++)
        if (!skip[j] && f[j].rows && f[i].min_id <= f[j].max_id && f[j].min_id <= f[i].max_id)
            return true;
    return false;
}

/* Whether object i's rows are all in a compacted object (a merge whose swap a crash left
 * unfinished, or whose replaced objects were not deleted yet): the merged one holds them. */
static bool st__merged(const st_coldfile_t *f, const st_obj_t *o, size_t n, size_t i)
{
    for (size_t j = 0; j < n; j++)
        if (j != i && o[j].gen && f[j].min_id <= f[i].min_id && f[i].max_id <= f[j].max_id &&
            (f[j].rows > f[i].rows || (f[j].rows == f[i].rows && j > i)))
            return true;
    return false;
}

/* Folds one object's row groups into the per-conversation aggregates. */
static void st__aggregate(const st_pq_meta_t *m, st_caggs_t *agg)
{
    for (size_t g = 0; g < m->ngroups; g++) {
        const st_pq_group_t *G = &m->groups[g];
        size_t a = 0;
        while (a < agg->n && !(agg->v[a].clen == G->conv_len &&
                               memcmp(agg->v[a].conv, G->conv, G->conv_len) == 0))
            a++;
        if (a == agg->n) {
            st_cagg_t n = {.clen = G->conv_len,
                           .first = UINT64_MAX,
                           .created = INT64_MAX,
                           .updated = INT64_MIN};
            memcpy(n.conv, G->conv, G->conv_len);
            st_vec_push(agg, n);
        }
        st_cagg_t *x = &agg->v[a];
        x->rows += G->rows;
        if (G->min_id < x->first) x->first = G->min_id;
        if (G->max_id > x->last) x->last = G->max_id;
        if (G->min_ts < x->created) x->created = G->min_ts;
        if (G->max_ts > x->updated) x->updated = G->max_ts;
        if (G->max_seq > x->last_seq) x->last_seq = G->max_seq;
    }
}

/* How far a rebuild got, for a line on stderr each second (a big bucket takes a while). */
typedef struct {
    uint64_t tick;
    size_t done, total, users;
} st_rb_progress_t;

static void st__progress(st_rb_progress_t *p)
{
    uint64_t now = st_mono_ns();
    if (!p->tick) p->tick = now; /* the first second is quiet */
    if (now - p->tick < 1000000000ull) return;
    p->tick = now;
    st_info("rebuild-meta: %zu of %zu objects read, %zu user(s) done", p->done, p->total, p->users);
}

/* One user's objects [o, o + n), sorted by seq. */
static int st__rebuild_user(st_chat_t *c, st_objstore_t *obj, const st_obj_t *o, size_t n,
                            size_t *convs, int64_t *rows, uint64_t *max_id, uint64_t *wait,
                            st_rb_progress_t *pg)
{
    const char *u = o[0].user;
    size_t ul = o[0].ulen;
    st_coldstat_t cs = {0, 0, 0, 0, 1};
    st_caggs_t agg = {0};
    int rc = ST_OK;
    st_pq_meta_t *m = st_calloc(n, sizeof *m);
    st_coldfile_t *f = st_calloc(n, sizeof *f);
    bool *skip = st_calloc(n, sizeof *skip);
    st_buf_t *stats = st_calloc(n, sizeof *stats);
    st_tier_obj_t *kept = st_calloc(n, sizeof *kept); /* keys borrowed from o */
    size_t nkept = 0;
    for (size_t i = 0; i < n && rc == ST_OK; i++, pg->done++) {
        st__progress(pg);
        if ((rc = st__footer_of(obj, &o[i], &m[i], &stats[i])) != ST_OK) {
            st_error("rebuild: %s cannot be read; stopping", o[i].key);
            break;
        }
        f[i] = (st_coldfile_t){UINT64_MAX, 0, m[i].rows, o[i].size};
        for (size_t g = 0; g < m[i].ngroups; g++) {
            if (m[i].groups[g].min_id < f[i].min_id) f[i].min_id = m[i].groups[g].min_id;
            if (m[i].groups[g].max_id > f[i].max_id) f[i].max_id = m[i].groups[g].max_id;
        }
    }
    for (size_t i = 0; i < n && rc == ST_OK; i++)
        skip[i] = st__merged(f, o, n, i);
    for (size_t i = n; i-- > 0 && rc == ST_OK;)
        skip[i] = skip[i] || st__superseded(f, skip, n, i);
    for (size_t i = 0; i < n && rc == ST_OK; i++) {
        if (o[i].seq + 1 > cs.next_seq) cs.next_seq = o[i].seq + 1;
        if (o[i].gen + 1 > cs.next_seq) cs.next_seq = o[i].gen + 1;
        if (skip[i]) { /* an orphan: deleted by the next server start, never counted */
            st_warn("rebuild: %s repeats rows of a later object; it will be deleted", o[i].key);
            rc = st_tier_doom(c->store, u, ul, o[i].seq, o[i].key, wait);
            continue;
        }
        st__aggregate(&m[i], &agg);
        kept[nkept++] = (st_tier_obj_t){.file = f[i],
                                        .seq = o[i].seq,
                                        .key = o[i].key,
                                        .stats = (uint8_t *)stats[i].data,
                                        .stats_len = stats[i].len};
    }
    for (size_t i = 0; i < n; i++)
        st_parquet_meta_free(&m[i]);
    free(m);
    free(f);
    free(skip);
    for (size_t a = 0; a < agg.n && rc == ST_OK; a++) {
        rc = st__fold_conv(c, u, ul, &agg.v[a], wait);
        if (rc == ST_OK) rc = st__chat_cold_mark(c, u, ul, agg.v[a].conv, agg.v[a].clen, wait);
    }
    /* the manifest and the summary: the tier's */
    if (rc == ST_OK) rc = st_tier_rebuild_owner(c->store, u, ul, kept, nkept, &cs, wait);
    free(kept);
    for (size_t i = 0; i < n; i++)
        st_buf_free(&stats[i]);
    free(stats);
    /* every object the manifest now records was read and its conversations marked: their
     * absence can be trusted from here on (an object recorded before and not listed now keeps
     * the owner as it was: marked complete only if it was) */
    st_manifest_t man;
    if (rc == ST_OK && (rc = st__chat_manifest(c, u, ul, false, &man, wait)) == ST_OK) {
        if (man.n == nkept)
            rc = st__chat_marks_complete(c, u, ul, wait);
        else /* left without 'L': the backfill walks again at the next start */
            rc = st__chat_backfill_owed(c, wait);
        st__chat_manifest_free(&man);
    }
    if (rc == ST_OK) rc = st__chat_refresh_totals(c, u, ul, wait);
    *convs += agg.n;
    *rows += cs.rows;
    if (cs.watermark > *max_id) *max_id = cs.watermark;
    st_vec_free(&agg);
    return rc;
}

/* Keeps the listed objects that are this store's (writer.c): of incarnations its writer record
 * owns, or named by its manifest already (inherited by a restore). With no record (a store lost
 * without a backup that knew its writer) the one writer the listing holds is taken over; objects
 * of several writers are refused, since which of them were this store's cannot be told — taking
 * another node's over would let compaction and retention delete them under that node. */
static int st__mine(st_chat_t *c, st_objs_t *o, uint64_t *wait)
{
    st_tier_writer_t w;
    int rc = st_tier_writer_get(c->store, &w, wait);
    if (rc == ST_ENOTFOUND) {
        uint64_t one, other;
        st_tier_rebuild_writers(o->v, o->n, sizeof *o->v, offsetof(st_obj_t, key), &one, &other);
        if (other) {
            st_error("rebuild: the cold tier holds objects of several writers (w%016llx, "
                     "w%016llx…): which were this store's cannot be told; rebuild with "
                     "--backup-url (its writer record says), or point --cold-url at one writer's "
                     "objects",
                     (unsigned long long)one, (unsigned long long)other);
            return ST_ECONFLICT;
        }
        rc = st_tier_writer_adopt(c->store, 0, wait); /* mints one; keys naming none are its */
        if (rc == ST_OK && one) rc = st_tier_writer_adopt(c->store, one, wait);
        if (rc == ST_OK) rc = st_tier_writer_get(c->store, &w, wait);
    }
    if (rc != ST_OK) return rc;
    size_t keep = 0, skipped = 0;
    for (size_t i = 0; i < o->n; i++) {
        if (st_tier_writer_owns(&w, o->v[i].key) || /* or inherited by a restore */
            st_tier_manifest_names(c->store, o->v[i].user, o->v[i].ulen, o->v[i].key, wait)) {
            o->v[keep++] = o->v[i];
        } else {
            free(o->v[i].key);
            skipped++;
        }
    }
    o->n = keep;
    if (skipped)
        st_warn("rebuild: %zu object(s) of other writers (a node this store was restored from, or "
                "one sharing the bucket) left alone",
                skipped);
    return ST_OK;
}

/* ---- deltas (SPEC §2.2): the delta objects re-seed the delta records ---- */

typedef struct {
    uint64_t id;
    bool deleted;
    char conv[ST_NAME_MAX + 1];
    size_t cl;
    char *json;
    size_t len;
} st_rbdelta_t;

typedef ST_VEC(st_rbdelta_t) st_rbdeltas_t;

static void st__rb_delta(void *arg, uint64_t id, const char *conv, size_t cl, bool deleted,
                         const char *json, size_t len)
{
    st_rbdeltas_t *d = arg;
    if (cl > ST_NAME_MAX) return;
    st_rbdelta_t r = {.id = id, .deleted = deleted, .cl = cl, .len = len};
    memcpy(r.conv, conv, cl);
    r.json = st_strndup(json, len);
    st_vec_push(d, r);
}

/* Of several states of a message, the one read last (the newest object's) is kept. */
static int st__cmp_delta(const void *a, const void *b)
{
    const st_rbdelta_t *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* The version of an object: a merged one's fresh number, else its number. */
static uint64_t st__version(const st_obj_t *o)
{
    return o->gen ? o->gen : o->seq;
}

static int st__cmp_version(const void *a, const void *b)
{
    const st_obj_t *x = a, *y = b;
    int c = strcmp(x->user, y->user);
    if (c) return c;
    return (st__version(x) > st__version(y)) - (st__version(x) < st__version(y));
}

/* A user's delta objects o[0..n) (oldest first): its delta manifest, and the delta records (and
 * tombstones, out of the counts) the store does not hold already. */
static int st__rebuild_deltas(st_chat_t *c, st_objstore_t *obj, const st_obj_t *o, size_t n,
                              int64_t *deltas, uint64_t *wait)
{
    const char *u = o[0].user;
    size_t ul = o[0].ulen;
    char ow[ST_TIER_OWNER_MAX];
    size_t owl = st__chat_delta_owner(ow, u, ul);
    st_tier_stat_t ds = {0, 0, 0, 0, 1};
    st_rbdeltas_t d = {0};
    uint8_t k[ST__KEY_CAP];
    int rc = ST_OK;
    st_tier_obj_t *objs = st_calloc(n, sizeof *objs); /* keys borrowed from o */
    for (size_t i = 0; i < n && rc == ST_OK; i++) {
        st_buf_t b = {0};
        size_t before = d.n;
        rc = st_objstore_get(obj, o[i].key, 0, o[i].size, &b);
        if (rc == ST_OK)
            rc = st__chat_delta_decode(b.data, b.len, st__chat_id_field(u, ul), st__rb_delta, &d);
        st_buf_free(&b);
        if (rc != ST_OK) {
            st_error("rebuild: %s cannot be read; stopping", o[i].key);
            break;
        }
        st_tier_file_t f = {UINT64_MAX, 0, (int64_t)(d.n - before), o[i].size};
        for (size_t r = before; r < d.n; r++) {
            if (d.v[r].id < f.min_id) f.min_id = d.v[r].id;
            if (d.v[r].id > f.max_id) f.max_id = d.v[r].id;
        }
        objs[i] = (st_tier_obj_t){.file = f, .seq = o[i].seq, .key = o[i].key};
        if (o[i].gen + 1 > ds.next_seq) ds.next_seq = o[i].gen + 1;
    }
    if (rc == ST_OK) rc = st_tier_rebuild_owner(c->store, ow, owl, objs, n, &ds, wait);
    free(objs);
    /* newest state per message: a stable sort keeps the read order among equal ids */
    for (size_t i = 1; i < d.n; i++) { /* insertion into id order, stable */
        st_rbdelta_t x = d.v[i];
        size_t j = i;
        while (j > 0 && st__cmp_delta(&d.v[j - 1], &x) > 0) {
            d.v[j] = d.v[j - 1];
            j--;
        }
        d.v[j] = x;
    }
    st_coldstat_t cs;
    if (rc == ST_OK) rc = st_tier_stat(c->store, u, ul, &cs, wait);
    int64_t gone = 0;
    for (size_t i = 0; i < d.n && rc == ST_OK; i++) {
        if (i + 1 < d.n && d.v[i + 1].id == d.v[i].id) continue;
        const st_rbdelta_t *r = &d.v[i];
        const char *js;
        size_t jl;
        if (r->id > cs.watermark || st__chat_delta_get(c, u, ul, r->id, &js, &jl, wait) == ST_OK)
            continue; /* not cold, or the store holds it already */
        rc = st__chat_delta_put(c, u, ul, r->id, r->conv, r->cl, r->json, r->len, wait);
        if (rc == ST_OK) { /* delta_put marks it for a delta object: it is in one */
            size_t kn = st__chat_ukey(k, 'f', u, ul);
            st_be64_put(k + kn, r->id);
            rc = st_store_del(c->store, k, kn + 8, wait);
        }
        if (rc == ST_OK) rc = st__chat_fold_mark(c, u, ul, r->id, wait);
        (*deltas)++;
        if (rc != ST_OK || !r->deleted) continue;
        size_t kn = st__chat_ukey(k, 'Y', u, ul);
        st_be64_put(k + kn, r->id);
        const void *yv;
        size_t yl;
        if (st_store_get(c->store, k, kn + 8, &yv, &yl, wait) == ST_OK) continue;
        rc = st_store_put(c->store, k, kn + 8, r->conv, r->cl, wait);
        st_conv_t cv;
        size_t ckl = st__chat_ckey(k, u, ul, r->conv, r->cl);
        if (rc == ST_OK && st__chat_conv_get(c->store, k, ckl, &cv, wait) == ST_OK) {
            cv.base_total--; /* a tombstone is no message */
            rc = st_store_put(c->store, k, ckl, &cv, sizeof cv, wait);
        }
        gone++;
    }
    if (rc == ST_OK && gone) rc = st__chat_gone_add(c, u, ul, gone, wait);
    if (rc == ST_OK && gone) rc = st__chat_refresh_totals(c, u, ul, wait);
    for (size_t i = 0; i < d.n; i++)
        free(d.v[i].json);
    st_vec_free(&d);
    return rc;
}

/* A key's table: a room's folder, room_messages; a user's, messages. */
static char st__chat_key_tag(const char *key)
{
    return strncmp(key, ST__ROOM_FOLDER, sizeof ST__ROOM_FOLDER - 1) == 0 ? ST__ROOM_TAG : 0;
}

/* Chat's objects, users' and rooms' (those rb's tables name), then the delta objects
 * (no table's: listed). */
static int st__chat_rebuild_all(st_chat_t *c, st_tier_rebuild_t *rb, size_t *pusers, size_t *pconvs,
                                int64_t *prows, uint64_t *wait)
{
    st_objstore_t *obj = rb->obj;
    st_objs_t o = {0};
    size_t users = 0, convs = 0;
    int64_t rows = 0;
    int rc = st_objstore_list(obj, "", st__on_object, &o);
    if (o.n) qsort(o.v, o.n, sizeof *o.v, st__cmp_obj);
    if (rc == ST_OK) /* those the tables name, or flushed after their snapshot */
        o.n = st_tier_rebuild_filter(rb, st__chat_key_tag, o.v, o.n, sizeof *o.v,
                                     offsetof(st_obj_t, key));
    if (rc == ST_OK) rc = st__mine(c, &o, wait);
    uint64_t max_id = 0;
    st_rb_progress_t pg = {.total = o.n};
    for (size_t i = 0; i < o.n && rc == ST_OK;) {
        size_t j = i + 1;
        while (j < o.n && strcmp(o.v[j].user, o.v[i].user) == 0)
            j++;
        rc = st__rebuild_user(c, obj, o.v + i, j - i, &convs, &rows, &max_id, wait, &pg);
        pg.users = ++users;
        i = j;
    }
    /* then the delta objects, over what the message objects gave */
    st_objs_t dl = {0};
    if (rc == ST_OK) rc = st_objstore_list(obj, "", st__on_delta, &dl);
    if (rc == ST_ENOTFOUND) rc = ST_OK;
    if (dl.n) qsort(dl.v, dl.n, sizeof *dl.v, st__cmp_version);
    if (rc == ST_OK && dl.n) rc = st__mine(c, &dl, wait);
    int64_t deltas = 0;
    for (size_t i = 0; i < dl.n && rc == ST_OK;) {
        size_t j = i + 1;
        while (j < dl.n && strcmp(dl.v[j].user, dl.v[i].user) == 0)
            j++;
        rc = st__rebuild_deltas(c, obj, dl.v + i, j - i, &deltas, wait);
        i = j;
    }
    if (deltas)
        st_info("rebuild: %lld edited or deleted cold message(s) from delta objects",
                (long long)deltas);
    for (size_t i = 0; i < dl.n; i++)
        free(dl.v[i].key);
    free(dl.v);
    if (rc == ST_OK && max_id) { /* ids never go back below what the cold tier holds */
        static const char last_key[] = "\0chat_last_id";
        uint64_t last = 0;
        int g = st__chat_get_fixed(c->store, (const uint8_t *)last_key, sizeof last_key - 1, &last,
                                   sizeof last, wait);
        if ((g == ST_OK || g == ST_ENOTFOUND) && max_id > last)
            rc =
                st_store_put(c->store, last_key, sizeof last_key - 1, &max_id, sizeof max_id, wait);
        st_snowflake_floor(&c->ids, max_id);
    }
    for (size_t i = 0; i < o.n; i++)
        free(o.v[i].key);
    free(o.v);
    *pusers = users;
    *pconvs = convs;
    *prows = rows;
    return rc;
}

int st__chat_rebuild(void *arg, st_tier_rebuild_t *rb, uint64_t *wait)
{
    size_t users, convs;
    int64_t rows;
    int rc = st__chat_rebuild_all(((st_chatcold_t *)arg)->chat, rb, &users, &convs, &rows, wait);
    if (rc == ST_OK)
        snprintf(rb->line, sizeof rb->line, "%zu users, %zu conversations, %lld cold messages",
                 users, convs, (long long)rows);
    return rc;
}

int st_chat_rebuild(st_chat_t *c, st_objstore_t *obj, size_t *users, size_t *convs, int64_t *rows,
                    uint64_t *wait)
{
    st_tier_rebuild_t rb = {.store = c->store, .obj = obj};
    return st__chat_rebuild_all(c, &rb, users, convs, rows, wait);
}

int st_chat_cold_census(st_objstore_t *obj, size_t *users, size_t *objects)
{
    st_objs_t o = {0};
    *users = *objects = 0;
    int rc = st_objstore_list(obj, "", st__on_object, &o);
    if (o.n) qsort(o.v, o.n, sizeof *o.v, st__cmp_obj);
    for (size_t i = 0; i < o.n; i++) {
        if (i == 0 || strcmp(o.v[i].user, o.v[i - 1].user) != 0) ++*users;
        free(o.v[i].key);
    }
    *objects = o.n;
    free(o.v);
    return rc == ST_ENOTFOUND ? ST_OK : rc;
}
