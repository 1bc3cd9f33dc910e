/* SPDX-License-Identifier: MIT */
/*
 * Messages and conversations in the hot store. Keys (u = user, c = conversation part, id = 8-byte
 * big-endian msg_id, so key order is time order):
 *   'M' u 0 id        message record
 *   'N' u 0 c 0 id    a conversation's messages (index)
 *   'C' u 0 c         conversation record (hybrid: cold baseline + hot increment)
 *   'U' u 0 ~upd c    conversations newest-updated first (value: the conversation id)
 *   'T' u             user totals
 * Long user + conversation ids would overflow LMDB's 511-byte keys, so `c` is the id itself or,
 * when the pair is long, 0x01 + a SHA-256 prefix (0x01 never occurs in a valid name).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static const char st__last_id_key[] = "\0chat_last_id";

void st_chat_observe(st_chat_t *c, st_chat_observer_fn fn, void *arg)
{
    st_observers_add(&c->observers, (st_observer_any_fn)fn, arg);
}

void st_chat_unobserve(st_chat_t *c, const void *arg)
{
    st_observers_remove(&c->observers, arg);
}

int st_chat_message_json(st_chat_t *c, const st_owner_t *o, uint64_t msg_id, st_buf_t *out)
{
    char u[ST_CHAT_OWNER_MAX];
    size_t ul = st_chat_owner_bytes(u, o);
    uint8_t k[ST__KEY_CAP];
    size_t n = st__chat_ukey(k, 'M', u, ul);
    st_be64_put(k + n, msg_id);
    const void *v;
    size_t vl;
    uint64_t w = 0;
    int rc = st_store_get(c->store, k, n + 8, &v, &vl, &w);
    if (rc != ST_OK) return rc;
    if (vl <= 16) return ST_ENOTFOUND;
    /* after the record's fixed header, as st_chat_post shows it; a room message of an author
     * being erased as every read shows it (mask.c: a follower's live note of a post read back
     * after the erasure's batch was applied, review of Session 22) */
    const char *j = (const char *)v + 16;
    size_t jl = vl - 16;
    st_buf_t tmp = {0};
    st__mask_cache_t cache = {0};
    if (o->kind == ST_OWNER_ROOM) st__chat_mask_one(c, &cache, u, ul, &j, &jl, &tmp, &w);
    st__chat_put_json(out, u, ul, j, jl);
    st__chat_mask_free(&cache);
    st_buf_free(&tmp);
    return ST_OK;
}
/* A conversation's seq is reserved in the backup (st_store_resv_*) as the max over all
 * conversations, so a barrier is rare: once per ST__SEQ_RESV_CHUNK posts of the busiest one. */
#define ST__SEQ_RESV       "chat.seq"
#define ST__SEQ_RESV_CHUNK 1000

int st_chat_open(st_chat_t **out, st_store_t *store, uint64_t node_id)
{
    /* internal.h's layout (erase.c's records, this file's last id) */
    static const st_claim_t keys[] = {ST_CLAIM("M"),
                                      ST_CLAIM("N"),
                                      ST_CLAIM("C"),
                                      ST_CLAIM("U"),
                                      ST_CLAIM("T"),
                                      ST_CLAIM("Y"),
                                      ST_CLAIM("X"),
                                      ST_CLAIM("Q"),
                                      ST_CLAIM("G"),
                                      ST_CLAIM("Z"),
                                      ST_CLAIM("z"),
                                      ST_CLAIM("e"),
                                      ST_CLAIM("f"),
                                      ST_CLAIM("h"),
                                      ST_CLAIM("R"),
                                      ST_CLAIM("L"),
                                      ST_CLAIM("\0chat_erase"),
                                      ST_CLAIM("\0chat_revoke"),
                                      ST_CLAIM("\0chat_last_id"),
                                      ST_CLAIM("\0chat_backfill")};
    int rc = st_store_claims(store, "chat", keys, sizeof keys / sizeof *keys);
    if (rc != ST_OK) return rc;
    st_chat_t *c = st_calloc(1, sizeof *c);
    c->store = store;
    st_snowflake_init(&c->ids, node_id);
    /* Never reissue: start above the newest id ever issued, whatever the clock says now. */
    uint64_t last = 0, wait = 0;
    rc = st__chat_get_fixed(store, (const uint8_t *)st__last_id_key, sizeof st__last_id_key - 1,
                            &last, sizeof last, &wait);
    if (rc && rc != ST_ENOTFOUND) {
        free(c);
        return rc;
    }
    st_snowflake_floor(&c->ids, last);
    *out = c;
    return ST_OK;
}

void st_chat_resync(st_chat_t *c)
{
    uint64_t last = 0, wait = 0;
    if (st__chat_get_fixed(c->store, (const uint8_t *)st__last_id_key, sizeof st__last_id_key - 1,
                           &last, sizeof last, &wait) == ST_OK)
        st_snowflake_floor(&c->ids, last);
}

void st_chat_close(st_chat_t *c)
{
    free(c);
}

int st_chat_post(st_chat_t *c, const st_message_in_t *m, st_buf_t *out, uint64_t *wait)
{
    st_store_t *s = c->store;
    char u[ST_CHAT_OWNER_MAX];
    size_t ul = st_chat_owner_bytes(u, &m->owner);
    const char *field = st_owner_id_field(m->owner.kind);
    uint8_t ck[ST__KEY_CAP], tk[ST__KEY_CAP], k[ST__KEY_CAP];
    size_t ckl = st__chat_ckey(ck, u, ul, m->conv, m->conv_len);
    size_t tkl = st__chat_ukey(tk, 'T', u, ul) - 1;
    st_conv_t cv;
    st_totals_t tot = {0, 0};
    int rc = st__chat_get_fixed(s, tk, tkl, &tot, sizeof tot, wait);
    if (rc && rc != ST_ENOTFOUND) return rc;
    bool rewarm;
    rc = st__chat_conv_load(c, u, ul, m->conv, m->conv_len, &cv, &rewarm, wait);
    if (rc && rc != ST_ENOTFOUND) return rc;
    bool fresh = rc == ST_ENOTFOUND; /* an evicted conversation is re-warmed from cold, not new */
    if (st__chat_erased(c, u, ul)) return ST_ENOTFOUND;
    if (fresh) { /* a deleted one of the name: its seqs never come again (SPEC §2) */
        uint64_t mid;
        if (st__chat_mask_get(c, u, ul, m->conv, m->conv_len, &mid, &cv.last_seq, wait) != ST_OK)
            cv.last_seq = 0;
    }
    /* The seq is reserved in the backup before anything is staged; restored from one, it goes
     * past anything the lost interval may have issued (read each time: a reservation rolled
     * back with a failed batch is never trusted). */
    int64_t next_seq = cv.last_seq + 1;
    st_store_resv_t resv;
    if ((rc = st_store_resv_load(s, ST__SEQ_RESV, &resv))) return rc;
    if (next_seq <= resv.floor) next_seq = resv.floor + 1;
    if ((rc = st_store_resv_cover(s, ST__SEQ_RESV, &resv, next_seq, ST__SEQ_RESV_CHUNK, wait)))
        return rc;
    int64_t now = st_now_us();
    uint64_t id = st_snowflake_next(&c->ids);
    if (fresh) {
        cv = (st_conv_t){id, id, now, now, 0, 0, cv.last_seq};
        tot.conversations++;
    } else {
        /* the old position in the newest-first index goes */
        size_t n = st__chat_ukey_upd(k, u, ul, cv.updated, m->conv, m->conv_len);
        if ((rc = st_store_del(s, k, n, wait))) return rc;
    }
    if (now < cv.updated) now = cv.updated; /* updated never goes back, even if the clock does */
    cv.hot_total++;
    cv.last = id;
    cv.updated = now;
    int64_t seq = cv.last_seq = next_seq; /* its own counter: seqs never come again */
    tot.total++;

    /* A message never changes: its JSON is rendered once here, so reads are a copy. */
    st_buf_t rec = {0};
    st_buf_append(&rec, &now, 8);
    st_buf_append(&rec, &seq, 8);
    st_buf_puts(&rec, "{\"msg_id\":\"");
    st_buf_append_u64(&rec, id);
    st__chat_put_member(&rec, field); /* the owner kind's (strata/owner.h) */
    st_buf_append_json_str(&rec, m->conv, m->conv_len);
    st_buf_puts(&rec, ",\"from\":");
    st_buf_append_json_str(&rec, m->from, m->from_len);
    st_buf_printf(&rec, ",\"timestamp\":%lld,\"seq\":%lld,\"content\":", (long long)now,
                  (long long)seq);
    st_buf_append_json_str(&rec, m->content, m->content_len);
    st_buf_puts(&rec, ",\"metadata\":");
    if (m->metadata)
        st_buf_append(&rec, m->metadata, m->metadata_len);
    else
        st_buf_puts(&rec, "null");
    st_buf_appendc(&rec, '}');
    size_t n = st__chat_ukey(k, 'M', u, ul);
    st_be64_put(k + n, id);
    rc = st_store_put(s, k, n + 8, rec.data, rec.len, wait);
    st_buf_free(&rec);
    if (!rc) {
        n = st__chat_nprefix(k, u, ul, m->conv, m->conv_len);
        st_be64_put(k + n, id);
        rc = st_store_put(s, k, n + 8, "", 0, wait);
    }
    if (!rc) rc = st_store_put(s, ck, ckl, &cv, sizeof cv, wait);
    if (!rc) {
        n = st__chat_ukey_upd(k, u, ul, cv.updated, m->conv, m->conv_len);
        rc = st_store_put(s, k, n, m->conv, m->conv_len, wait);
    }
    if (!rc) rc = st_store_put(s, tk, tkl, &tot, sizeof tot, wait);
    if (!rc)
        rc = st_store_put(s, st__last_id_key, sizeof st__last_id_key - 1, &id, sizeof id, wait);
    if (rc) return rc;
    if (c->cold) st_tier_posted(c->cold->tier, u, ul, tot.total); /* the signal */
    if (c->observers.n) {
        /* observers get the stored JSON (read back from the overlay: no second render) */
        uint64_t w0 = 0;
        const void *v;
        size_t vl;
        size_t kn = st__chat_ukey(k, 'M', u, ul);
        st_be64_put(k + kn, id);
        /* just staged, so there: the overlay holds it until it is applied */
        if (st_store_get(s, k, kn + 8, &v, &vl, &w0) != ST_OK || vl <= 16) vl = 0;
        for (size_t i = 0; vl && i < c->observers.n; i++)
            ((st_chat_observer_fn)c->observers.fn[i])(c->observers.arg[i], &m->owner, m->conv,
                                                      m->conv_len, id, (const char *)v + 16,
                                                      vl - 16, *wait);
        if (!vl)
            st_warn("chat: message %llu could not be read back for its observers",
                    (unsigned long long)id);
    }
    st_buf_puts(out, "{\"msg_id\":\"");
    st_buf_append_u64(out, id);
    st__chat_put_member(out, field);
    st_buf_append_json_str(out, m->conv, m->conv_len);
    st_buf_printf(out, ",\"seq\":%lld,\"timestamp\":%lld}", (long long)seq, (long long)now);
    return ST_OK;
}

/* ---- reading messages ---- */

static void st__chat_nop_msg(void *arg, uint64_t msg_id, const char *json, size_t len)
{
    (void)arg;
    (void)msg_id;
    (void)json;
    (void)len;
}

/* Message record: i64 timestamp | i64 seq | the message's JSON object (rendered at post). */

/* Collects up to `limit` msg_ids from a key walk (ids are the last 8 key bytes). */
typedef struct {
    size_t limit, n;
    uint64_t last;
    bool more;
    uint64_t *ids;
} st_walk_t;

static int st__walk_msg(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_walk_t *w = arg;
    (void)val;
    (void)vlen;
    if (klen < 8) return 0;
    if (w->n == w->limit) {
        w->more = true;
        return 1;
    }
    w->last = st_be64_get((const uint8_t *)key + klen - 8);
    w->ids[w->n++] = w->last;
    return 0;
}

typedef struct {
    st_buf_t *out;
    size_t n;
    /* walked against the page's order: the messages wait here ([offset, length] in held) and
     * are listed in reverse once the walk is done */
    bool hold;
    st_buf_t held;
    ST_VEC(size_t) at;
} st_page_t;

static void st__page_add(void *arg, uint64_t msg_id, const char *json, size_t len)
{
    st_page_t *p = arg;
    (void)msg_id;
    if (p->hold) {
        size_t at = p->held.len;
        st_buf_append(&p->held, json, len);
        st_vec_push(&p->at, at);
        st_vec_push(&p->at, p->held.len - at);
        return;
    }
    if (p->n++) st_buf_appendc(p->out, ',');
    st_buf_append(p->out, json, len);
}

bool st_chat_walks_back(const st_message_query_t *q)
{
    bool after = q->after || q->after_given;
    if (q->before && !after) return true;  /* "load older": the page just before */
    if (after && !q->before) return false; /* the page just after */
    return q->desc;                        /* neither or both: from the end the order names */
}

static void st__page_live(void *arg, uint64_t msg_id, const char *json, size_t len)
{
    if (!st__chat_json_dead(json, len)) st__page_add(arg, msg_id, json, len);
}

int st_chat_messages(st_chat_t *c, const st_owner_t *o, const st_message_query_t *q, st_buf_t *out,
                     uint64_t *wait)
{
    char user[ST_CHAT_OWNER_MAX];
    size_t ulen = st_chat_owner_bytes(user, o);
    if (st__chat_erased(c, user, ulen)) return ST_ENOTFOUND;
    st_message_query_t wq = *q;
    wq.desc = st_chat_walks_back(q);
    st_page_t page = {.out = out, .hold = wq.desc != q->desc};
    bool more;
    uint64_t last;
    st_buf_puts(out, "{\"messages\":[");
    int rc = st__chat_each(c, user, ulen, &wq, q->hide_deleted ? st__page_live : st__page_add,
                           &page, &more, &last, wait);
    /* tombstones left out: the page is filled from further on (a bounded number of walks; the
     * cursor is where the walk stopped, so a short page still pages on exactly) */
    for (int walks = 1; q->hide_deleted && rc == ST_OK && more && walks < 64; walks++) {
        size_t shown = page.hold ? page.at.n / 2 : page.n;
        if (shown >= q->limit) break;
        wq.limit = q->limit - shown;
        if (wq.desc)
            wq.before = last;
        else
            wq.after = last;
        uint64_t l2 = 0;
        rc = st__chat_each(c, user, ulen, &wq, st__page_live, &page, &more, &l2, wait);
        if (l2) last = l2;
    }
    for (size_t i = page.at.n; rc == ST_OK && i > 0; i -= 2) {
        if (i < page.at.n) st_buf_appendc(out, ',');
        st_buf_append(out, page.held.data + page.at.v[i - 2], page.at.v[i - 1]);
    }
    st_buf_free(&page.held);
    st_vec_free(&page.at);
    if (rc) return rc;
    st_buf_puts(out, "],\"next\":");
    if (more) {
        st_buf_appendc(out, '"');
        st_buf_append_u64(out, last);
        st_buf_puts(out, "\"}");
    } else {
        st_buf_puts(out, "null}");
    }
    return ST_OK;
}

/* ---- conversations ---- */

static void st__render_conv(st_buf_t *out, const char *conv, size_t cl, const st_conv_t *cv)
{
    st_buf_puts(out, "{\"conversation_id\":");
    st_buf_append_json_str(out, conv, cl);
    st_buf_puts(out, ",\"first_msg_id\":\"");
    st_buf_append_u64(out, cv->first);
    st_buf_puts(out, "\",\"last_msg_id\":\"");
    st_buf_append_u64(out, cv->last);
    st_buf_printf(out, "\",\"created\":%lld,\"updated\":%lld,\"total_messages\":%lld}",
                  (long long)cv->created, (long long)cv->updated,
                  (long long)(cv->base_total + cv->hot_total));
}

int st_chat_conv_info(st_chat_t *c, const st_owner_t *o, const char *conv, size_t clen,
                      st_chat_conv_info_t *out, uint64_t *wait)
{
    char user[ST_CHAT_OWNER_MAX];
    size_t ulen = st_chat_owner_bytes(user, o);
    st_conv_t cv;
    bool cold;
    int rc = st__chat_conv_load(c, user, ulen, conv, clen, &cv, &cold, wait);
    if (rc) return rc;
    *out = (st_chat_conv_info_t){
        cv.first, cv.last, cv.created, cv.updated, cv.base_total + cv.hot_total, cv.last_seq};
    return ST_OK;
}

int st_chat_conversation(st_chat_t *c, const char *user, size_t ulen, const char *conv, size_t clen,
                         st_buf_t *out, uint64_t *wait)
{
    st_conv_t cv;
    bool cold;
    if (st__chat_erased(c, user, ulen)) return ST_ENOTFOUND;
    int rc = st__chat_conv_load(c, user, ulen, conv, clen, &cv, &cold, wait);
    if (rc) return rc;
    st__render_conv(out, conv, clen, &cv);
    return ST_OK;
}

typedef struct {
    size_t limit, n, pl;
    bool more;
    char (*names)[ST_NAME_MAX + 1];
    size_t *lens;
    int64_t *upds;             /* the updated time each entry is filed under */
    uint8_t last[ST__KEY_CAP]; /* the last entry walked: the next walk starts after it */
    size_t last_len;
} st_cwalk_t;

static int st__walk_conv(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_cwalk_t *w = arg;
    if (w->n == w->limit) {
        w->more = true;
        return 1;
    }
    if (klen < w->pl + 8 || klen > ST__KEY_CAP) return 0;
    memcpy(w->last, key, klen);
    w->last_len = klen;
    if (vlen == 0 || vlen > ST_NAME_MAX) return 0;
    memcpy(w->names[w->n], val, vlen);
    w->lens[w->n] = vlen;
    w->upds[w->n++] = (int64_t)~st_be64_get((const uint8_t *)key + w->pl);
    return 0;
}

/* An index entry that names no conversation any more (its record gone and nothing cold: an
 * older build let eviction and retention leave such entries), or one filed under a stale time,
 * is repaired instead of failing the list (SPEC §2: listing never fails). */
static int st__conv_entry(st_chat_t *c, const char *u, size_t ul, const char *conv, size_t cl,
                          int64_t upd, st_conv_t *cv, bool *show, uint64_t *wait)
{
    bool cold;
    uint8_t k[ST__KEY_CAP];
    int rc = st__chat_conv_load(c, u, ul, conv, cl, cv, &cold, wait);
    bool found = rc == ST_OK;
    *show = found && cv->updated == upd;
    if (rc == ST_ENOTFOUND || (found && !*show)) {
        rc = st_store_del(c->store, k, st__chat_ukey_upd(k, u, ul, upd, conv, cl), wait);
        if (rc == ST_OK && found) /* refiled where it belongs */
            rc = st_store_put(c->store, k, st__chat_ukey_upd(k, u, ul, cv->updated, conv, cl), conv,
                              cl, wait);
    }
    return rc;
}

int st_chat_conversations(st_chat_t *c, const char *user, size_t ulen, const char *cursor,
                          size_t clen, size_t limit, st_buf_t *out, uint64_t *wait)
{
    uint8_t pre[ST__KEY_CAP], lo[ST__KEY_CAP + 1];
    size_t pl = st__chat_ukey(pre, 'U', user, ulen), lol = 0;
    if (st__chat_erased(c, user, ulen)) return ST_ENOTFOUND;
    if (cursor) {
        /* "<updated>:<conversation_id>" of the last row seen: start just after its key */
        const char *colon = memchr(cursor, ':', clen);
        int64_t upd;
        if (!colon || st_parse_i64(cursor, (size_t)(colon - cursor), &upd) ||
            !st_name_valid(colon + 1, clen - (size_t)(colon + 1 - cursor)))
            return ST_EINVAL;
        lol =
            st__chat_ukey_upd(lo, user, ulen, upd, colon + 1, clen - (size_t)(colon + 1 - cursor));
        lo[lol++] = 0;
    }
    st_cwalk_t w = {.pl = pl};
    w.names = st_malloc(limit * sizeof *w.names);
    w.lens = st_malloc(limit * sizeof *w.lens);
    w.upds = st_malloc(limit * sizeof *w.upds);
    st_buf_puts(out, "{\"conversations\":[");
    st_conv_t cv = {0};
    size_t shown = 0;
    int64_t last_upd = 0;
    size_t last_i = 0;
    int rc = ST_OK;
    do { /* entries skipped by repair are made up for from further down the index */
        w.limit = limit - shown;
        w.n = 0;
        w.more = false;
        rc = st_store_range(c->store, pre, pl, lol ? lo : NULL, lol, NULL, 0, false, st__walk_conv,
                            &w, wait);
        if (rc == 1) rc = 0;
        for (size_t i = 0; i < w.n && !rc; i++) {
            bool show;
            rc = st__conv_entry(c, user, ulen, w.names[i], w.lens[i], w.upds[i], &cv, &show, wait);
            if (rc || !show) continue;
            if (shown++) st_buf_appendc(out, ',');
            st__render_conv(out, w.names[i], w.lens[i], &cv);
            last_upd = cv.updated;
            last_i = i;
        }
        if (!rc && shown < limit && w.more) {
            memcpy(lo, w.last, w.last_len);
            lol = w.last_len;
            lo[lol++] = 0;
        }
    } while (!rc && shown < limit && w.more);
    if (!rc) {
        st_buf_puts(out, "],\"next\":");
        if (w.more && shown) {
            st_buf_printf(out, "\"%lld:", (long long)last_upd);
            st_buf_append(out, w.names[last_i], w.lens[last_i]);
            st_buf_puts(out, "\"}");
        } else {
            st_buf_puts(out, "null}");
        }
    }
    free(w.names);
    free(w.lens);
    free(w.upds);
    return rc;
}

int st_chat_stats(st_chat_t *c, const char *user, size_t ulen, st_buf_t *out, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    st_totals_t tot = {0, 0};
    if (st__chat_erased(c, user, ulen)) return ST_ENOTFOUND;
    int rc = st__chat_get_fixed(c->store, k, st__chat_ukey(k, 'T', user, ulen) - 1, &tot,
                                sizeof tot, wait);
    if (rc && rc != ST_ENOTFOUND) return rc;
    st_coldstat_t cs;
    if ((rc = st_tier_stat(c->store, user, ulen, &cs, wait)) != ST_OK) return rc;
    cs.rows -= st__chat_gone(c, user, ulen, wait); /* cold rows that are live messages */
    if (cs.rows < 0) cs.rows = 0;
    st_buf_printf(out,
                  "{\"total_messages\":%lld,\"conversations\":%lld,\"hot_messages\":%lld,"
                  "\"cold_messages\":%lld,\"cold_bytes\":%lld}",
                  (long long)tot.total, (long long)tot.conversations,
                  (long long)(tot.total - cs.rows), (long long)cs.rows, (long long)cs.bytes);
    return ST_OK;
}

/* The hot part of a read: the walk over 'M' (or a conversation's 'N' index) within bounds. */
static int st__hot_each(st_chat_t *c, const char *user, size_t ulen, const st_message_query_t *q,
                        st_chat_msg_fn fn, void *arg, size_t *given, bool *more, uint64_t *last,
                        uint64_t *wait)
{
    uint8_t pre[ST__KEY_CAP], lo[ST__KEY_CAP], hi[ST__KEY_CAP];
    size_t pl = q->conv ? st__chat_nprefix(pre, user, ulen, q->conv, q->conv_len)
                        : st__chat_ukey(pre, 'M', user, ulen);
    size_t lol = 0, hil = 0;
    *given = 0;
    *more = false;
    if (q->after == UINT64_MAX || q->limit == 0) return ST_OK;
    if (q->after) {
        memcpy(lo, pre, pl);
        st_be64_put(lo + pl, q->after + 1);
        lol = pl + 8;
    }
    if (q->before) {
        memcpy(hi, pre, pl);
        st_be64_put(hi + pl, q->before);
        hil = pl + 8;
    }
    st_walk_t w = {.limit = q->limit};
    w.ids = st_malloc(q->limit * sizeof *w.ids);
    int rc = st_store_range(c->store, pre, pl, lol ? lo : NULL, lol, hil ? hi : NULL, hil, q->desc,
                            st__walk_msg, &w, wait);
    if (rc == 1) rc = 0;
    /* the walk gave ids; the messages live under 'M' (one read snapshot for all of them) */
    size_t n = st__chat_ukey(lo, 'M', user, ulen);
    st_buf_t old = {0};
    st_store_read_hold(c->store);
    for (size_t i = 0; i < w.n && !rc; i++) {
        const void *v;
        size_t vl;
        st_be64_put(lo + n, w.ids[i]);
        rc = st_store_get(c->store, lo, n + 8, &v, &vl, wait);
        if (rc || vl <= 16) continue;
        const char *j = (const char *)v + 16;
        if (st__chat_json_legacy(user, ulen, j, vl - 16)) { /* a record from before kinds */
            st_buf_reset(&old);
            st__chat_put_json(&old, user, ulen, j, vl - 16);
            fn(arg, w.ids[i], old.data, old.len);
        } else {
            fn(arg, w.ids[i], j, vl - 16);
        }
    }
    st_store_read_release(c->store);
    st_buf_free(&old);
    *given = w.n;
    *more = w.more;
    if (w.n) *last = w.last;
    free(w.ids);
    return rc;
}

/* Hot and cold merged: cold ids are all <= the user's watermark < every hot id, so oldest-first
 * reads cold then hot and newest-first hot then cold; each side is asked only for what the
 * page still needs, and `more` looks past the boundary when a side ends exactly at the limit. */
int st_chat_each(st_chat_t *c, const st_owner_t *o, const st_message_query_t *q, st_chat_msg_fn fn,
                 void *arg, bool *more, uint64_t *last, uint64_t *wait)
{
    char u[ST_CHAT_OWNER_MAX];
    return st__chat_each(c, u, st_chat_owner_bytes(u, o), q, fn, arg, more, last, wait);
}

static int st__each_stored(st_chat_t *c, const char *user, size_t ulen, const st_message_query_t *q,
                           st_chat_msg_fn fn, void *arg, bool *more, uint64_t *last, uint64_t *wait)
{
    st_coldstat_t cs;
    *more = false;
    *last = 0;
    int rc = st_tier_stat(c->store, user, ulen, &cs, wait);
    if (rc) return rc;
    uint64_t wm = cs.rows ? cs.watermark : 0;
    bool cold_in = wm && q->after < wm; /* the range reaches into the cold part */
    bool hot_in = !(q->before && wm && q->before <= wm + 1);
    size_t given = 0, got;
    bool m = false;
    st_message_query_t hq = *q;
    if (wm && hq.after < wm) hq.after = wm;
    uint64_t chi = q->before && q->before <= wm ? q->before : wm + 1;
    if (!q->desc) {
        if (cold_in) {
            rc = st__chat_cold_each(c, user, ulen, q->conv, q->conv_len, q->after, chi, false,
                                    q->limit, fn, arg, &got, &m, last, wait);
            given = got;
            if (rc || m) {
                *more = m;
                return rc;
            }
        }
        if (!hot_in) return ST_OK;
        hq.limit = q->limit - given;
        if (hq.limit == 0) {
            hq.limit = 1; /* is there anything hot at all? */
            rc = st__hot_each(c, user, ulen, &hq, st__chat_nop_msg, NULL, &got, &m, &(uint64_t){0},
                              wait);
            *more = got > 0;
            return rc;
        }
        rc = st__hot_each(c, user, ulen, &hq, fn, arg, &got, more, last, wait);
        return rc;
    }
    if (hot_in) {
        rc = st__hot_each(c, user, ulen, &hq, fn, arg, &got, &m, last, wait);
        given = got;
        if (rc || m) {
            *more = m;
            return rc;
        }
    }
    if (!cold_in) return ST_OK;
    if (given == q->limit) {
        uint64_t ignore = 0;
        rc = st__chat_cold_each(c, user, ulen, q->conv, q->conv_len, q->after, chi, true, 1,
                                st__chat_nop_msg, NULL, &got, &m, &ignore, wait);
        *more = got > 0;
        return rc;
    }
    return st__chat_cold_each(c, user, ulen, q->conv, q->conv_len, q->after, chi, true,
                              q->limit - given, fn, arg, &got, more, last, wait);
}

/* A room's messages as every read shows them: those of an author being erased as the
 * tombstones its erasure makes of them (mask.c, SPEC §2.2). */
typedef struct {
    st__chat_walk_t w;
    uint64_t *wait;
    st__mask_cache_t cache;
} st_masking_t;

static void st__masked_one(void *arg, uint64_t msg_id, const char *json, size_t len)
{
    st_masking_t *m = arg;
    st__chat_mask_one(m->w.c, &m->cache, m->w.u, m->w.ul, &json, &len, &m->w.buf, m->wait);
    m->w.fn(m->w.arg, msg_id, json, len);
}

int st__chat_each(st_chat_t *c, const char *user, size_t ulen, const st_message_query_t *q,
                  st_chat_msg_fn fn, void *arg, bool *more, uint64_t *last, uint64_t *wait)
{
    if (q->raw || st_chat_owner_from(user, ulen).kind != ST_OWNER_ROOM)
        return st__each_stored(c, user, ulen, q, fn, arg, more, last, wait);
    st_masking_t m = {.w = {.c = c, .u = user, .ul = ulen, .fn = fn, .arg = arg}, .wait = wait};
    int rc = st__each_stored(c, user, ulen, q, st__masked_one, &m, more, last, wait);
    st__chat_mask_free(&m.cache);
    st_buf_free(&m.w.buf);
    return rc;
}
