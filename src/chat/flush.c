/* SPDX-License-Identifier: MIT */
/*
 * Flushes, chat's side: chat is a data kind of the tier's flush engine (src/cold/flush.c, which
 * queues and paces flushes, records the intent ('P'), holds a snapshot until it is durable,
 * writes the object and commits the manifest). Here: the snapshot of a user's oldest hot
 * messages past the watermark (on the loop), the records back into columns and one Parquet
 * object (on a worker), and the hot side of the commit batch: hot rows out, their counts moved
 * into the conversations' cold baselines. Until that batch, readers see the rows hot; after it,
 * cold; never both, never neither.
 *
 * Triggers are the tier's: a post tells it the user's total (st_tier_posted: --flush-rows hot
 * rows), and chat's user source of its pass (pass.c) queues users every --flush-interval (a user
 * with at least --flush-min-rows hot rows, or whose oldest is --flush-max-age old), with the hot
 * store at 80 % and on POST /v1/admin/flush (every user with hot rows). After a flush the tier
 * queues compactions (compact.c is chat's merge side).
 *
 * Also here: chat's member of the tier (st_chat_tier_member).
 */
#include "internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* A flush's rows: taken on the loop, decoded on the worker, committed on the loop. */
typedef struct {
    /* the snapshot: records as stored, concatenated; ids.n rows, offs has one more (the end) */
    size_t limit;
    ST_VEC(uint64_t) ids;
    ST_VEC(size_t) offs;
    st_buf_t recs;
    bool capped; /* more hot rows than one flush takes */
    /* the worker's: sorted by conversation, then msg_id; strings in arena */
    st_msgrow_t *rows;
    st_arena_t arena;
    int zstd_level;
    char user[ST_CHAT_OWNER_MAX + 1]; /* whose rows (the owner's bytes): the owner column */
    size_t user_len;
} st_chatsnap_t;

/* ---- worker side ---- */

static const char *st__copy(st_arena_t *a, const char *s, size_t n, uint32_t *len)
{
    *len = (uint32_t)n;
    return st_arena_strndup(a, s, n);
}

/* A record back into columns: the JSON was rendered by st_chat_post, so its shape is known;
 * metadata is kept as the raw JSON text it was stored as. */
static int st__decode(st_chatsnap_t *j, size_t i, st_msgrow_t *r)
{
    const char *rec = j->recs.data + j->offs.v[i];
    size_t len = j->offs.v[i + 1] - j->offs.v[i];
    if (len <= 16) return ST_EINTERNAL;
    memcpy(&r->timestamp, rec, 8);
    memcpy(&r->seq, rec + 8, 8);
    r->msg_id = j->ids.v[i];
    const char *json = rec + 16;
    size_t jl = len - 16;
    cJSON *o = cJSON_ParseWithLength(json, jl);
    const cJSON *conv =
        cJSON_GetObjectItemCaseSensitive(o, st__chat_id_field(j->user, j->user_len));
    if (!conv) conv = cJSON_GetObjectItemCaseSensitive(o, "conversation_id"); /* from before */
    const cJSON *from = cJSON_GetObjectItemCaseSensitive(o, "from");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(o, "content");
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(o, "metadata");
    int rc = ST_EINTERNAL;
    /* a tombstone (SPEC §2.2) has content null, and an erased author's from null: null in its
     * row too (SPEC v5 §5.1; the commit keeps its state as a delta) */
    if (cJSON_IsString(conv) && (cJSON_IsString(from) || cJSON_IsNull(from)) &&
        (cJSON_IsString(content) || cJSON_IsNull(content)) && meta) {
        r->conv = st__copy(&j->arena, conv->valuestring, strlen(conv->valuestring), &r->conv_len);
        r->from = NULL;
        r->from_len = 0;
        if (cJSON_IsString(from))
            r->from =
                st__copy(&j->arena, from->valuestring, strlen(from->valuestring), &r->from_len);
        /* content may hold NUL bytes (\u0000): take its length from cJSON's own copy */
        r->content = NULL;
        r->content_len = 0;
        if (cJSON_IsString(content))
            r->content = st__copy(&j->arena, content->valuestring, strlen(content->valuestring),
                                  &r->content_len);
        r->metadata = NULL;
        r->metadata_len = 0;
        const char *m0;
        size_t ml;
        if (!cJSON_IsNull(meta) && st__chat_jmember(json, jl, "metadata", &m0, &ml))
            r->metadata = st__copy(&j->arena, m0, ml, &r->metadata_len);
        /* edited or deleted while hot: the row says when (SPEC v5 §5.1) */
        r->edited_at = st__chat_json_time(json, jl, "edited_at");
        r->deleted_at = st__chat_json_time(json, jl, "deleted_at");
        /* and its earlier versions (a record never edited nor deleted has none) */
        if (r->edited_at || r->deleted_at)
            r->has_hist = st__chat_hist_of(json, jl, &j->arena, &r->hist, &r->nhist);
        rc = ST_OK;
    }
    cJSON_Delete(o);
    return rc;
}

static int st__flush_encode(void *arg, void *rows, st_buf_t *file)
{
    st_chatsnap_t *j = rows;
    (void)arg;
    j->rows = st_calloc(j->ids.n, sizeof *j->rows);
    int rc = ST_OK;
    for (size_t i = 0; i < j->ids.n && rc == ST_OK; i++)
        rc = st__decode(j, i, &j->rows[i]);
    if (rc != ST_OK) return rc;
    qsort(j->rows, j->ids.n, sizeof *j->rows, st_chat_cmp_rows);
    st_owner_t who = st_chat_owner_from(j->user, j->user_len);
    return st_parquet_encode(j->rows, j->ids.n, &who, j->zstd_level, file);
}

static void st__flush_release(void *arg, void *rows)
{
    st_chatsnap_t *j = rows;
    (void)arg;
    st_vec_free(&j->ids);
    st_vec_free(&j->offs);
    free(j->rows);
    st_buf_free(&j->recs);
    st_arena_free(&j->arena);
    free(j);
}

/* Moves the count of rows [from, to) (one conversation's) to its cold baseline. */
static int st__move_count(st_store_t *s, const char *u, size_t ul, const st_msgrow_t *r,
                          int64_t moved, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    st_conv_t cv;
    size_t kl = st__chat_ckey(k, u, ul, r->conv, r->conv_len);
    int rc = st__chat_conv_get(s, k, kl, &cv, wait);
    if (rc == ST_OK) {
        cv.base_total += moved;
        cv.hot_total -= moved;
        rc = st_store_put(s, k, kl, &cv, sizeof cv, wait);
    }
    return rc;
}

/* Whether the record of id is now what the snapshot took (ids are ascending, as scanned). */
static bool st__snap_same(const st_chatsnap_t *j, uint64_t id, const void *v, size_t vl)
{
    size_t lo = 0, hi = j->ids.n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (j->ids.v[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == j->ids.n || j->ids.v[lo] != id) return false;
    size_t len = j->offs.v[lo + 1] - j->offs.v[lo];
    return len == vl && memcmp(j->recs.data + j->offs.v[lo], v, vl) == 0;
}

/* The hot side of the batch that moves the rows: hot rows out, counts to the cold baselines. */
static int st__flush_commit(void *arg, const char *u, size_t ul, void *rows, st_tier_file_t *f,
                            uint64_t *wait)
{
    st_chatcold_t *cc = arg;
    st_store_t *s = cc->chat->store;
    st_chatsnap_t *j = rows;
    uint8_t k[ST__KEY_CAP];
    uint64_t max_id = 0, min_id = UINT64_MAX;
    int rc = ST_OK;
    int64_t dead = 0, group_dead = 0;
    /* rows edited or deleted while hot are marked ('h'): only they are looked at again */
    bool edited = st__chat_has_prefix(cc->chat, 'h', u, ul);
    /* the owner's first object (the manifest holds the old ones until after this side): every
     * one from it on has its conversations marked (marks.c). "First" is read from the file
     * records themselves, not the summary's count: a summary rebuild-meta wrote before it
     * recounted could count fewer files than are recorded, and retention then bring it to 0
     * with unmarked objects still there. Owners marked already pay the one read of 'L'. */
    if (!st__chat_marks_known(cc->chat, u, ul, wait)) {
        bool any = true;
        rc = st_tier_has_files(s, u, ul, &any, wait);
        if (rc == ST_OK && !any) rc = st__chat_marks_complete(cc->chat, u, ul, wait);
    }
    for (size_t i = 0; i < j->ids.n && rc == ST_OK; i++) {
        const st_msgrow_t *r = &j->rows[i];
        if (r->msg_id > max_id) max_id = r->msg_id;
        if (r->msg_id < min_id) min_id = r->msg_id;
        size_t n = st__chat_ukey(k, 'M', u, ul);
        st_be64_put(k + n, r->msg_id);
        /* an edited or deleted message (SPEC §2.2), edited even after the snapshot: its state
         * as it is now goes on as the cold row's delta; a tombstone is no message to count */
        const void *v;
        size_t vl;
        uint8_t hk[ST__KEY_CAP];
        size_t hn = 0;
        if (edited) {
            hn = st__chat_ukey(hk, 'h', u, ul);
            st_be64_put(hk + hn, r->msg_id);
            hn += 8;
        }
        rc = hn ? st_store_get(s, hk, hn, &v, &vl, wait) : ST_ENOTFOUND;
        if (rc == ST_OK) rc = st_store_del(s, hk, hn, wait);
        if (rc == ST_OK) rc = st_store_get(s, k, n + 8, &v, &vl, wait);
        if (rc == ST_OK && vl > 16) {
            const char *js = (const char *)v + 16, *x;
            size_t jl = vl - 16, xl;
            if (st__chat_jmember(js, jl, "edit_history", &x, &xl)) {
                bool d = st__chat_json_dead(js, jl);
                dead += d;
                group_dead += d;
                bool since =
                    !st__snap_same(j, r->msg_id, v, vl); /* the object holds an older state */
                st_buf_t copy = {0};
                st_buf_append(&copy, js, jl);
                rc = st__chat_delta_put(cc->chat, u, ul, r->msg_id, r->conv, r->conv_len, copy.data,
                                        copy.len, wait);
                if (rc == ST_OK && since) rc = st__chat_fold_mark(cc->chat, u, ul, r->msg_id, wait);
                st_buf_free(&copy);
            }
        } else if (rc == ST_ENOTFOUND) {
            rc = ST_OK;
        }
        if (rc == ST_OK) rc = st_store_del(s, k, n + 8, wait);
        if (rc == ST_OK) {
            n = st__chat_nprefix(k, u, ul, r->conv, r->conv_len);
            st_be64_put(k + n, r->msg_id);
            rc = st_store_del(s, k, n + 8, wait);
        }
        /* rows are grouped by conversation: settle each group's count once */
        bool last = i + 1 == j->ids.n || j->rows[i + 1].conv_len != r->conv_len ||
                    memcmp(j->rows[i + 1].conv, r->conv, r->conv_len) != 0;
        if (rc == ST_OK && last) {
            size_t from = i;
            while (from > 0 && j->rows[from - 1].conv_len == r->conv_len &&
                   memcmp(j->rows[from - 1].conv, r->conv, r->conv_len) == 0)
                from--;
            rc = st__move_count(s, u, ul, r, (int64_t)(i - from + 1) - group_dead, wait);
            group_dead = 0;
            /* in the batch that records the object: cold rows never exist unmarked */
            if (rc == ST_OK) rc = st__chat_cold_mark(cc->chat, u, ul, r->conv, r->conv_len, wait);
        }
    }
    if (rc == ST_OK && dead) rc = st__chat_gone_add(cc->chat, u, ul, dead, wait);
    f->min_id = min_id;
    f->max_id = max_id;
    f->rows = (int64_t)j->ids.n;
    return rc;
}

static int st__snap_row(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_chatsnap_t *j = arg;
    if (klen < 8 || vlen < 16) return 0;
    if (j->ids.n == j->limit || (j->ids.n && j->recs.len + vlen > ST_TIER_FLUSH_BYTES)) {
        j->capped = true;
        return 1;
    }
    st_vec_push(&j->ids, st_be64_get((const uint8_t *)key + klen - 8));
    st_vec_push(&j->offs, j->recs.len);
    st_buf_append(&j->recs, val, vlen);
    return 0;
}

/* The rows one flush of the user takes: all its hot rows, or, past ST__FLUSH_OBJECT_ROWS, an
 * even share of them (10,000 hot rows go in three objects of 3,334, 3,333 and 3,333, not two
 * full ones and a sliver). The count is the user's totals less its cold rows; the share is never
 * below half the cap, so a count that is off never makes a run of tiny objects. */
static size_t st__flush_limit(st_chat_t *c, const char *u, size_t ul, const st_coldstat_t *cs,
                              uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    st_totals_t tot;
    if (st__chat_get_fixed(c->store, k, st__chat_ukey(k, 'T', u, ul) - 1, &tot, sizeof tot, wait) !=
            ST_OK ||
        tot.total - cs->rows <= ST__FLUSH_OBJECT_ROWS)
        return ST__FLUSH_OBJECT_ROWS;
    uint64_t hot = (uint64_t)(tot.total - cs->rows);
    uint64_t parts = (hot + ST__FLUSH_OBJECT_ROWS - 1) / ST__FLUSH_OBJECT_ROWS;
    return (size_t)((hot + parts - 1) / parts);
}

/* The user's oldest hot rows, from past the watermark: every hot id is above it, and the rows
 * of the user's last flush may still be in LMDB, deleted only in the overlay (not applied
 * yet). The oldest row's timestamp names the object. */
static int st__flush_snapshot(void *arg, const char *u, size_t ul, const st_tier_stat_t *cs,
                              uint64_t seq, uint64_t writer, st_tier_snap_t *out, uint64_t *wait)
{
    st_chatcold_t *cc = arg;
    st_chat_t *c = cc->chat;
    if (ul > ST_CHAT_OWNER_MAX) return ST_EINTERNAL; /* chat's owners fit */
    st_chatsnap_t *j = st_calloc(1, sizeof *j);
    j->zstd_level = cc->zstd_level;
    memcpy(j->user, u, ul);
    j->user_len = ul;
    out->rows = j;
    j->limit = st__flush_limit(c, u, ul, cs, wait);
    uint8_t pre[ST__KEY_CAP], from[ST__KEY_CAP];
    size_t pl = st__chat_ukey(pre, 'M', u, ul);
    memcpy(from, pre, pl);
    st_be64_put(from + pl, cs->watermark + 1);
    int rc = st_store_scan_from(c->store, pre, pl, from, pl + 8, st__snap_row, j, wait);
    if (rc == 1) rc = ST_OK;
    if (rc != ST_OK || j->ids.n == 0) return rc;
    st_vec_push(&j->offs, j->recs.len);
    out->n = j->ids.n;
    out->capped = j->capped;
    int64_t first_ts;
    memcpy(&first_ts, j->recs.data, 8);
    st__chat_object_key(&out->key, u, ul, first_ts, writer, seq);
    return ST_OK;
}

static int st__first_ts(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)key, (void)klen;
    if (vlen >= 8) memcpy(arg, val, 8);
    return 1;
}

bool st__chat_flush_due(st_chat_t *c, const char *u, size_t ul, int64_t hot)
{
    st_chatcold_t *cc = c->cold;
    if ((uint64_t)hot >= cc->flush_min_rows || !cc->flush_max_age_us) return true;
    uint8_t pre[ST__KEY_CAP];
    uint64_t wait = 0;
    int64_t ts = INT64_MAX;
    st_store_scan(c->store, pre, st__chat_ukey(pre, 'M', u, ul), st__first_ts, &ts, &wait);
    return ts <= st_now_us() - (int64_t)cc->flush_max_age_us;
}

/* A flush of edited messages made deltas: their delta object follows (delta.c). */
static void st__flush_enqueue_deltas(void *arg, const char *u, size_t ul)
{
    st_chatcold_t *cc = arg;
    if (!st__chat_has_prefix(cc->chat, 'f', u, ul)) return;
    char o[ST_TIER_OWNER_MAX];
    st_tier_enqueue(cc->tier, o, st__chat_delta_owner(o, u, ul));
}

/* ---- chat as a member of the tier ---- */

/* The tier stops: chat's reads answer without it from now on. */
static void st__stop(void *arg)
{
    st_chatcold_t *cc = arg;
    st__chat_backfill_stop(cc); /* once per member: the second finds nothing to give up */
    if (cc->chat->cold == cc) cc->chat->cold = NULL;
}

/* Once per member (chat's, rooms' and the deltas' when they joined): the last one frees. */
void st__chat_cold_unref(st_chatcold_t *cc)
{
    if (--cc->refs == 0) free(cc);
}

static void st__flush_closed(void *arg)
{
    st__chat_cold_unref(arg);
}

st_tier_member_t *st_chat_tier_member(st_chat_t *c, st_tier_t *t, const st_chat_cold_opts_t *o)
{
    st_chatcold_t *cc = st_calloc(1, sizeof *cc);
    cc->tier = t;
    cc->chat = c;
    cc->zstd_level = o->zstd_level ? o->zstd_level : 3;
    cc->kind = (st_tier_kind_t){.snapshot = st__flush_snapshot,
                                .encode = st__flush_encode,
                                .commit = st__flush_commit,
                                .release = st__flush_release,
                                .flushed = st__flush_enqueue_deltas,
                                .arg = cc};
    cc->m_hybrid_hot = st_metrics_counter("strata_hybrid_reads_total",
                                          "Conversation hybrid fields served", "source=\"hot\"");
    cc->m_hybrid_cold = st_metrics_counter("strata_hybrid_reads_total",
                                           "Conversation hybrid fields served", "source=\"cold\"");
    cc->m_evicted = st_metrics_counter("strata_hot_evictions_total",
                                       "Idle conversations evicted from the hot store", "");
    cc->hot_ttl_us = (o->hot_ttl_s ? o->hot_ttl_s : 86400) * 1000000ull;
    cc->flush_min_rows = o->flush_min_rows;
    cc->flush_max_age_us = o->flush_max_age_s * 1000000ull;
    cc->delta_max_age_us = (o->delta_max_age_s ? o->delta_max_age_s : 3600) * 1000000ull;
    st__chat_sources(cc);
    st__chat_merge_side(cc);
    st__chat_backfill_open(cc);
    cc->member = (st_tier_member_t){.name = "chat",
                                    .sources = cc->sources,
                                    .nsources = 2,
                                    .flush = &cc->kind,
                                    .merge = &cc->merge,
                                    .schema = &st_pq_msg_schema,
                                    .expired = st__chat_expired,
                                    .fold_prepare = st__chat_fold_prepare,
                                    .fold_more = st__chat_fold_more,
                                    .fold_pick = st__chat_fold_pick,
                                    .tick = st__chat_tick,
                                    .rebuild = st__chat_rebuild,
                                    .stop = st__stop,
                                    .closed = st__flush_closed,
                                    .arg = cc};
    cc->refs = 1;
    c->cold = cc;
    return &cc->member;
}

st_tier_member_t *st_chat_kind_tier_member(st_chat_t *c, st_owner_kind_t kind)
{
    st_chatcold_t *cc = c->cold;
    if (!cc || kind != ST_OWNER_ROOM) return NULL;
    /* the same sides and arg: a room's messages are flushed, merged and retained as a user's
     * (chat's pass sources already visit it: its 'T' and 'C' keys are chat's) */
    cc->room_member = cc->member;
    cc->room_member.name = "chat rooms";
    cc->room_member.tag = ST__ROOM_TAG;
    cc->room_member.sources = NULL;
    cc->room_member.nsources = 0;
    cc->room_member.tick = NULL;    /* chat's sweep covers rooms' markers too */
    cc->room_member.rebuild = NULL; /* and chat's rebuild rooms' objects */
    cc->refs++;
    return &cc->room_member;
}

st_tier_member_t *st_chat_delta_tier_member(st_chat_t *c)
{
    return c->cold ? st__chat_delta_member(c->cold) : NULL;
}

void st_chat_compact_deltas(st_chat_t *c, const char *u, size_t ul)
{
    if (!c->cold) return;
    char o[ST_TIER_OWNER_MAX];
    st_tier_compact(c->cold->tier, o, st__chat_delta_owner(o, u, ul), ST_TIER_COMPACT_MAJOR);
}
