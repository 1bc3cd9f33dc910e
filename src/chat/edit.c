/* SPDX-License-Identifier: MIT */
/*
 * Edits and deletes of a user's messages (SPEC §2.2). A message's state is its JSON: once
 * changed it carries "edited_at", "deleted_at" and "edit_history" after the seven columns, in
 * that order, "metadata" still the client's raw text. A hot message's record ('M') is rewritten
 * in place (a flush takes the new state: the commit keeps the extra fields as a delta); a cold
 * one, immutable in its Parquet object, gets a delta record ('Z' u 0 id: its JSON now) that every
 * read of cold rows applies (merge-on-read, cold_read.c). A delete leaves a tombstone (content and
 * metadata null, history empty) indexed in 'Y' so recounts and cold rebuilds count live messages
 * only; the conversation's hybrid count loses one on the side (hot or cold baseline) the message
 * is on, the user's totals too, and a cold tombstone joins the user's 'X' count (stats).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- raw JSON (valid JSON rendered by strata) ---- */

static const char *st__edit_skip_ws(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* Past the value starting at p. */
static const char *st__vend(const char *p, const char *e)
{
    if (p >= e) return e;
    if (*p == '"') {
        for (p++; p < e; p++) {
            if (*p == '\\')
                p++;
            else if (*p == '"')
                return p + 1;
        }
        return e;
    }
    if (*p == '{' || *p == '[') {
        int depth = 0;
        for (; p < e; p++) {
            if (*p == '"') {
                p = st__vend(p, e) - 1;
            } else if (*p == '{' || *p == '[') {
                depth++;
            } else if (*p == '}' || *p == ']') {
                if (--depth == 0) return p + 1;
            }
        }
        return e;
    }
    while (p < e && *p != ',' && *p != '}' && *p != ']' && *p != ' ')
        p++;
    return p;
}

bool st__chat_jmember(const char *j, size_t n, const char *key, const char **v, size_t *vl)
{
    const char *p = st__edit_skip_ws(j, j + n), *e = j + n;
    size_t kl = strlen(key);
    if (p == e || *p != '{') return false;
    p++;
    for (;;) {
        p = st__edit_skip_ws(p, e);
        if (p >= e || *p != '"') return false;
        const char *k0 = p + 1, *k1 = st__vend(p, e) - 1;
        p = st__edit_skip_ws(k1 + 1, e);
        if (p >= e || *p != ':') return false;
        p = st__edit_skip_ws(p + 1, e);
        const char *ve = st__vend(p, e);
        if ((size_t)(k1 - k0) == kl && memcmp(k0, key, kl) == 0) {
            *v = p;
            *vl = (size_t)(ve - p);
            return true;
        }
        p = st__edit_skip_ws(ve, e);
        if (p >= e || *p != ',') return false;
        p++;
    }
}

bool st__chat_jnext(const char **p, const char *e, const char **v, size_t *vl)
{
    const char *q = st__edit_skip_ws(*p, e);
    if (q >= e || (*q != '[' && *q != ',')) return false;
    q = st__edit_skip_ws(q + 1, e);
    if (q >= e || *q == ']') return false;
    const char *ve = st__vend(q, e);
    *v = q;
    *vl = (size_t)(ve - q);
    *p = st__edit_skip_ws(ve, e);
    return true;
}

static bool st__is_null(const char *v, size_t n)
{
    return n == 4 && memcmp(v, "null", 4) == 0;
}

bool st__chat_json_dead(const char *j, size_t n)
{
    const char *v;
    size_t vl;
    return st__chat_jmember(j, n, "deleted_at", &v, &vl) && !st__is_null(v, vl);
}

int64_t st__chat_json_time(const char *j, size_t n, const char *key)
{
    const char *v;
    size_t vl;
    int64_t t;
    if (!st__chat_jmember(j, n, key, &v, &vl) || st__is_null(v, vl) ||
        st_parse_i64(v, vl, &t) != ST_OK)
        return 0;
    return t;
}

/* ---- records ---- */

static size_t st__idkey(uint8_t *k, char ks, const char *u, size_t ul, uint64_t id)
{
    size_t n = st__chat_ukey(k, ks, u, ul);
    st_be64_put(k + n, id);
    return n + 8;
}

int st__chat_delta_get(st_chat_t *c, const char *u, size_t ul, uint64_t id, const char **json,
                       size_t *len, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    const void *v;
    size_t vl;
    int rc = st_store_get(c->store, k, st__idkey(k, 'Z', u, ul, id), &v, &vl, wait);
    if (rc) return rc;
    if (vl < 2) return ST_EINTERNAL;
    size_t cl = (size_t)((const uint8_t *)v)[0] << 8 | ((const uint8_t *)v)[1];
    if (vl < 2 + cl) return ST_EINTERNAL;
    *json = (const char *)v + 2 + cl;
    *len = vl - 2 - cl;
    return ST_OK;
}

int st__chat_delta_put(st_chat_t *c, const char *u, size_t ul, uint64_t id, const char *conv,
                       size_t cl, const char *json, size_t len, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    st_buf_t b = {0};
    uint8_t l[2] = {(uint8_t)(cl >> 8), (uint8_t)cl};
    st_buf_append(&b, l, 2);
    st_buf_append(&b, conv, cl);
    st_buf_append(&b, json, len);
    int rc = st_store_put(c->store, k, st__idkey(k, 'Z', u, ul, id), b.data, b.len, wait);
    st_buf_free(&b);
    if (rc == ST_OK) /* to be written into a delta object (delta.c) */
        rc = st_store_put(c->store, k, st__idkey(k, 'f', u, ul, id), "", 0, wait);
    return rc;
}

static int st__edit_found_any(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)key, (void)klen, (void)val, (void)vlen;
    *(bool *)arg = true;
    return 1;
}

bool st__chat_has_prefix(st_chat_t *c, char ks, const char *u, size_t ul)
{
    uint8_t k[ST__KEY_CAP];
    bool any = false;
    uint64_t w = 0;
    st_store_scan(c->store, k, st__chat_ukey(k, ks, u, ul), st__edit_found_any, &any, &w);
    return any;
}

typedef struct {
    const char *conv;
    size_t cl;
    uint64_t wm;
    int64_t cold, hot;
} st_deadcount_t;

static int st__edit_count_dead(void *arg, const void *key, size_t klen, const void *val,
                               size_t vlen)
{
    st_deadcount_t *d = arg;
    if (klen < 8 || vlen != d->cl || memcmp(val, d->conv, vlen) != 0) return 0;
    if (st_be64_get((const uint8_t *)key + klen - 8) <= d->wm)
        d->cold++;
    else
        d->hot++;
    return 0;
}

int st__chat_dead_count(st_chat_t *c, const char *u, size_t ul, const char *conv, size_t cl,
                        uint64_t wm, int64_t *cold, int64_t *hot, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    st_deadcount_t d = {conv, cl, wm, 0, 0};
    int rc =
        st_store_scan(c->store, k, st__chat_ukey(k, 'Y', u, ul), st__edit_count_dead, &d, wait);
    *cold = d.cold;
    *hot = d.hot;
    return rc < 0 ? rc : ST_OK;
}

int st__chat_mask_get(st_chat_t *c, const char *u, size_t ul, const char *conv, size_t cl,
                      uint64_t *last_id, int64_t *last_seq, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    size_t n = st__chat_ukey(k, 'Q', u, ul);
    n += st__chat_conv_part(k + n, ul, conv, cl);
    uint64_t v[2];
    int rc = st__chat_get_fixed(c->store, k, n, v, sizeof v, wait);
    if (rc) return rc;
    *last_id = v[0];
    *last_seq = (int64_t)v[1];
    return ST_OK;
}

int64_t st__chat_gone(st_chat_t *c, const char *u, size_t ul, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    int64_t g = 0;
    if (st__chat_get_fixed(c->store, k, st__chat_ukey(k, 'X', u, ul) - 1, &g, sizeof g, wait))
        g = 0;
    return g;
}

int st__chat_gone_add(st_chat_t *c, const char *u, size_t ul, int64_t by, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    int64_t g = st__chat_gone(c, u, ul, wait) + by;
    if (g < 0) g = 0;
    return st_store_put(c->store, k, st__chat_ukey(k, 'X', u, ul) - 1, &g, sizeof g, wait);
}

int st__chat_fold_mark(st_chat_t *c, const char *u, size_t ul, uint64_t id, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    int64_t now = st_now_us();
    return st_store_put(c->store, k, st__idkey(k, 'e', u, ul, id), &now, sizeof now, wait);
}

int64_t st__chat_hot_rows(st_chat_t *c, const char *u, size_t ul, int64_t total,
                          const st_coldstat_t *cs)
{
    uint64_t w = 0;
    int64_t hot = total - (cs->rows - st__chat_gone(c, u, ul, &w));
    if (hot <= 0) hot = st__chat_has_prefix(c, 'M', u, ul) ? 1 : 0;
    return hot;
}

void st__chat_changed(st_chat_t *c, const char *kind, const char *u, size_t ul, const char *conv,
                      size_t cl, uint64_t id, const char *json, size_t len, uint64_t wait)
{
    st_owner_t o = st_chat_owner_from(u, ul);
    for (size_t i = 0; i < c->changes.n; i++)
        ((st_chat_change_fn)c->changes.fn[i])(c->changes.arg[i], kind, &o, conv, cl, id, json, len,
                                              wait);
}

void st_chat_observe_changes(st_chat_t *c, st_chat_change_fn fn, void *arg)
{
    st_observers_add(&c->changes, (st_observer_any_fn)fn, arg);
}

void st_chat_unobserve_changes(st_chat_t *c, const void *arg)
{
    st_observers_remove(&c->changes, arg);
}

void st_chat_set_max_history(st_chat_t *c, size_t n)
{
    c->max_history = n;
}

/* ---- finding a message ---- */

typedef struct {
    st_buf_t *json;
    uint64_t id;
    bool found;
} st_find_t;

static void st__found(void *arg, uint64_t msg_id, const char *json, size_t len)
{
    st_find_t *f = arg;
    if (msg_id != f->id) return;
    st_buf_reset(f->json);
    st_buf_append(f->json, json, len);
    f->found = true;
}

/* The message as it is now into cur; *hot: its record is in the hot store. */
static int st__find(st_chat_t *c, const char *u, size_t ul, uint64_t id, st_buf_t *cur, bool *hot,
                    uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    const void *v;
    size_t vl;
    int rc = st_store_get(c->store, k, st__idkey(k, 'M', u, ul, id), &v, &vl, wait);
    *hot = rc == ST_OK;
    if (rc == ST_OK) {
        if (vl <= 16) return ST_EINTERNAL;
        st_buf_append(cur, (const char *)v + 16, vl - 16);
        return ST_OK;
    }
    if (rc != ST_ENOTFOUND) return rc;
    st_coldstat_t cs;
    if ((rc = st_tier_stat(c->store, u, ul, &cs, wait))) return rc;
    if (!cs.rows || id > cs.watermark || !c->cold) return ST_ENOTFOUND;
    /* the cold read applies deltas and masks (cold_read.c) */
    st_find_t f = {cur, id, false};
    size_t given;
    bool more;
    uint64_t last;
    rc = st__chat_cold_each(c, u, ul, NULL, 0, id - 1, id + 1, false, 1, st__found, &f, &given,
                            &more, &last, wait);
    if (rc) return rc;
    return f.found ? ST_OK : ST_ENOTFOUND;
}

/* ---- the new state ---- */

static void st__edit_copy_member(st_buf_t *b, const char *cur, size_t n, const char *key)
{
    const char *v;
    size_t vl;
    st_buf_printf(b, "\"%s\":", key);
    if (st__chat_jmember(cur, n, key, &v, &vl))
        st_buf_append(b, v, vl);
    else
        st_buf_puts(b, "null");
}

/* cur with content/metadata replaced, edited_at, deleted_at and history set; from null when
 * unnamed (an erased author's tombstone). */
void st__chat_render_state(st_buf_t *b, const char *field, const char *cur, size_t n,
                           const char *content, size_t cl, const char *meta, size_t ml,
                           int64_t edited_at, int64_t deleted_at, bool unnamed,
                           const st_buf_t *hist)
{
    const char *v;
    size_t vl;
    st_buf_appendc(b, '{');
    st__edit_copy_member(b, cur, n, "msg_id");
    st_buf_printf(b, ",\"%s\":", field); /* the owner kind's, whatever cur named it */
    if (st__chat_json_conv(cur, n, &v, &vl))
        st_buf_append(b, v, vl);
    else
        st_buf_puts(b, "null");
    st_buf_appendc(b, ',');
    if (unnamed)
        st_buf_puts(b, "\"from\":null");
    else
        st__edit_copy_member(b, cur, n, "from");
    st_buf_appendc(b, ',');
    st__edit_copy_member(b, cur, n, "timestamp");
    st_buf_appendc(b, ',');
    st__edit_copy_member(b, cur, n, "seq");
    st_buf_puts(b, ",\"content\":");
    st_buf_append(b, content, cl);
    st_buf_puts(b, ",\"metadata\":");
    st_buf_append(b, meta, ml);
    st_buf_puts(b, ",\"edited_at\":");
    if (edited_at)
        st_buf_append_i64(b, edited_at);
    else
        st_buf_puts(b, "null");
    st_buf_puts(b, ",\"deleted_at\":");
    if (deleted_at)
        st_buf_append_i64(b, deleted_at);
    else
        st_buf_puts(b, "null");
    st_buf_puts(b, ",\"edit_history\":[");
    st_buf_append(b, hist->data, hist->len);
    st_buf_puts(b, "]}");
}

/* The elements of a raw JSON array, each through out (comma-joined), keeping the newest keep
 * (after one more is added: keep - 1 of the old ones). */
static void st__history(const char *arr, size_t n, size_t keep, st_buf_t *out)
{
    const char *p = arr, *v;
    size_t vl;
    ST_VEC(const char *) at = {0};
    ST_VEC(size_t) len = {0};
    while (st__chat_jnext(&p, arr + n, &v, &vl)) {
        st_vec_push(&at, v);
        st_vec_push(&len, vl);
    }
    size_t from = at.n + 1 > keep ? at.n + 1 - keep : 0;
    for (size_t i = from; i < at.n; i++) {
        if (out->len) st_buf_appendc(out, ',');
        st_buf_append(out, at.v[i], len.v[i]);
    }
    st_vec_free(&at);
    st_vec_free(&len);
}

static int st__edit_apply(st_chat_t *c, const char *u, size_t ul, uint64_t id,
                          const st_message_edit_t *e, bool del, bool unnamed, int64_t at,
                          st_buf_t *out, uint64_t *wait)
{
    if (st__chat_erased(c, u, ul)) return ST_ENOTFOUND;
    st_buf_t cur = {0}, next = {0}, hist = {0};
    bool hot;
    int rc = st__find(c, u, ul, id, &cur, &hot, wait);
    const char *cv_, *mv, *ev, *tv, *conv;
    size_t cvl, mvl, evl, tvl, cl = 0;
    if (rc) goto done;
    if (!st__chat_jmember(cur.data, cur.len, "content", &cv_, &cvl) ||
        !st__chat_jmember(cur.data, cur.len, "metadata", &mv, &mvl) ||
        !st__chat_json_conv(cur.data, cur.len, &conv, &cl) || cl < 2) {
        rc = ST_EINTERNAL;
        goto done;
    }
    if (!unnamed && st_chat_owner_from(u, ul).kind == ST_OWNER_ROOM) {
        /* its author being erased, it reads as a tombstone already (mask.c): edited, 409;
         * deleted, that tombstone, as a tombstone deleted again (its erasure writes it) */
        st__mask_cache_t mc = {0};
        bool copied; /* cur is ours: no copy is needed, any made is dropped */
        bool masked = st__chat_mask(c, &mc, u, ul, cur.data, cur.len, &next, &copied, wait);
        st__chat_mask_free(&mc);
        if (!masked) st_buf_reset(&next);
        if (masked) {
            if (del)
                st_buf_append(out, next.data, next.len);
            else
                rc = ST_ECONFLICT;
            goto done;
        }
    }
    conv++; /* the conversation id is a name: its JSON string has no escapes */
    cl -= 2;
    bool dead = st__chat_json_dead(cur.data, cur.len), named = false;
    const char *fv;
    size_t fvl;
    if (dead && unnamed && st__chat_jmember(cur.data, cur.len, "from", &fv, &fvl))
        named = !st__is_null(fv, fvl); /* deleted before its author was erased */
    if (dead && !named) {
        if (!del) {
            rc = ST_ECONFLICT;
            goto done;
        }
        st__chat_put_json(out, u, ul, cur.data, cur.len); /* deleted again: the same tombstone */
        goto done;
    }
    int64_t now = at ? at : st_now_us(), edited = 0, deleted = 0;
    if (st__chat_jmember(cur.data, cur.len, "edited_at", &ev, &evl) && !st__is_null(ev, evl))
        st_parse_i64(ev, evl, &edited);
    if (edited && now <= edited) now = edited + 1; /* edits stay in order whatever the clock */
    if (dead) { /* the tombstone as it was, its from null: nothing else changes, nor any count */
        if (st__chat_jmember(cur.data, cur.len, "deleted_at", &ev, &evl))
            st_parse_i64(ev, evl, &deleted);
        st__chat_render_state(&next, st__chat_id_field(u, ul), cur.data, cur.len, "null", 4, "null",
                              4, edited, deleted, true, &hist);
    } else if (del) {
        st__chat_render_state(&next, st__chat_id_field(u, ul), cur.data, cur.len, "null", 4, "null",
                              4, edited, now, unnamed, &hist);
    } else {
        size_t keep = c->max_history ? c->max_history : 20;
        if (st__chat_jmember(cur.data, cur.len, "edit_history", &tv, &tvl))
            st__history(tv, tvl, keep, &hist);
        if (keep) { /* the version being replaced, with the time it was written */
            if (hist.len) st_buf_appendc(&hist, ',');
            st_buf_puts(&hist, "{\"content\":");
            st_buf_append(&hist, cv_, cvl);
            st_buf_puts(&hist, ",\"metadata\":");
            st_buf_append(&hist, mv, mvl);
            st_buf_puts(&hist, ",\"edited_at\":");
            if (edited) {
                st_buf_append_i64(&hist, edited);
            } else {
                const char *ts;
                size_t tsl;
                if (st__chat_jmember(cur.data, cur.len, "timestamp", &ts, &tsl))
                    st_buf_append(&hist, ts, tsl);
                else
                    st_buf_puts(&hist, "null");
            }
            st_buf_appendc(&hist, '}');
        }
        st_buf_t content = {0};
        if (e->content) st_buf_append_json_str(&content, e->content, e->content_len);
        st__chat_render_state(&next, st__chat_id_field(u, ul), cur.data, cur.len,
                              e->content ? content.data : cv_, e->content ? content.len : cvl,
                              e->metadata ? e->metadata : mv, e->metadata ? e->metadata_len : mvl,
                              now, 0, false, &hist);
        st_buf_free(&content);
    }
    uint8_t k[ST__KEY_CAP];
    if (hot) {
        const void *v;
        size_t vl;
        size_t kl = st__idkey(k, 'M', u, ul, id);
        if ((rc = st_store_get(c->store, k, kl, &v, &vl, wait))) goto done;
        st_buf_t rec = {0};
        st_buf_append(&rec, v, 16);
        st_buf_append(&rec, next.data, next.len);
        rc = st_store_put(c->store, k, kl, rec.data, rec.len, wait);
        st_buf_free(&rec);
        /* the flush that takes it keeps its state as a delta: it looks only at marked rows */
        if (!rc) rc = st_store_put(c->store, k, st__idkey(k, 'h', u, ul, id), "", 0, wait);
    } else {
        rc = st__chat_delta_put(c, u, ul, id, conv, cl, next.data, next.len, wait);
        if (!rc) rc = st__chat_fold_mark(c, u, ul, id, wait);
    }
    if (!rc && del && !dead) {
        rc = st_store_put(c->store, k, st__idkey(k, 'Y', u, ul, id), conv, cl, wait);
        st_conv_t cv;
        size_t ckl = st__chat_ckey(k, u, ul, conv, cl);
        int r2 = rc ? rc : st__chat_conv_get(c->store, k, ckl, &cv, wait);
        if (r2 == ST_OK) { /* an evicted one is rebuilt from cold less its tombstones */
            if (hot)
                cv.hot_total--;
            else
                cv.base_total--;
            rc = st_store_put(c->store, k, ckl, &cv, sizeof cv, wait);
        } else if (r2 != ST_ENOTFOUND) {
            rc = r2;
        }
        if (!rc && !hot) rc = st__chat_gone_add(c, u, ul, 1, wait);
        st_totals_t tot;
        size_t tkl = st__chat_ukey(k, 'T', u, ul) - 1;
        if (!rc && st__chat_get_fixed(c->store, k, tkl, &tot, sizeof tot, wait) == ST_OK) {
            tot.total--;
            rc = st_store_put(c->store, k, tkl, &tot, sizeof tot, wait);
        }
    }
    if (rc) goto done;
    st__chat_changed(c, del ? "message_deleted" : "message_edited", u, ul, conv, cl, id, next.data,
                     next.len, *wait);
    st_buf_append(out, next.data, next.len);
done:
    st_buf_free(&cur);
    st_buf_free(&next);
    st_buf_free(&hist);
    return rc;
}

int st_chat_edit(st_chat_t *c, const st_owner_t *o, uint64_t msg_id, const st_message_edit_t *e,
                 st_buf_t *out, uint64_t *wait)
{
    char u[ST_CHAT_OWNER_MAX];
    return st__edit_apply(c, u, st_chat_owner_bytes(u, o), msg_id, e, false, false, 0, out, wait);
}

int st_chat_delete(st_chat_t *c, const st_owner_t *o, uint64_t msg_id, st_buf_t *out,
                   uint64_t *wait)
{
    char u[ST_CHAT_OWNER_MAX];
    return st__edit_apply(c, u, st_chat_owner_bytes(u, o), msg_id, NULL, true, false, 0, out, wait);
}

int st_chat_delete_unnamed(st_chat_t *c, const st_owner_t *o, uint64_t msg_id, int64_t at_us,
                           st_buf_t *out, uint64_t *wait)
{
    char u[ST_CHAT_OWNER_MAX];
    return st__edit_apply(c, u, st_chat_owner_bytes(u, o), msg_id, NULL, true, true, at_us, out,
                          wait);
}

/* ---- deleting a conversation ---- */

static int st__collect_id(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)val, (void)vlen;
    if (klen >= 8) {
        uint64_t id = st_be64_get((const uint8_t *)key + klen - 8);
        st_buf_append(arg, &id, 8);
    }
    return 0;
}

typedef struct {
    const char *conv;
    size_t cl;
    bool delta; /* 'Z' values: u16 length | conv | …; 'Y' values: the conv */
    st_buf_t ids;
} st_convkeys_t;

static int st__conv_key(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_convkeys_t *x = arg;
    const uint8_t *v = val;
    bool match = x->delta ? vlen >= 2 + x->cl && ((size_t)v[0] << 8 | v[1]) == x->cl &&
                                memcmp(v + 2, x->conv, x->cl) == 0
                          : vlen == x->cl && memcmp(v, x->conv, x->cl) == 0;
    if (match && klen >= 8) {
        uint64_t id = st_be64_get((const uint8_t *)key + klen - 8);
        st_buf_append(&x->ids, &id, 8);
    }
    return 0;
}

/* The conversation's tombstones ('Y'), deltas ('Z') and fold markers ('e') out: its rows are
 * gone or masked, and a new conversation of the name must not count them. */
static int st__conv_records_out(st_chat_t *c, const char *u, size_t ul, const char *conv, size_t cl,
                                uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    int rc = ST_OK;
    for (int pass = 0; pass < 2 && rc == ST_OK; pass++) {
        st_convkeys_t x = {conv, cl, pass == 1, {0}};
        rc = st_store_scan(c->store, k, st__chat_ukey(k, pass ? 'Z' : 'Y', u, ul), st__conv_key, &x,
                           wait);
        rc = rc < 0 ? rc : ST_OK;
        for (size_t i = 0; i + 8 <= x.ids.len && rc == ST_OK; i += 8) {
            uint64_t id;
            memcpy(&id, x.ids.data + i, 8);
            rc = st_store_del(c->store, k, st__idkey(k, pass ? 'Z' : 'Y', u, ul, id), wait);
            for (const char *m = pass ? "ef" : ""; *m && rc == ST_OK; m++) {
                rc = st_store_del(c->store, k, st__idkey(k, *m, u, ul, id), wait);
                if (rc == ST_ENOTFOUND) rc = ST_OK;
            }
        }
        st_buf_free(&x.ids);
    }
    return rc;
}

int st_chat_delete_conversation(st_chat_t *c, const char *u, size_t ul, const char *conv, size_t cl,
                                int64_t *n, uint64_t *wait)
{
    if (st__chat_erased(c, u, ul)) return ST_ENOTFOUND;
    st_conv_t cv;
    bool from_cold;
    int rc = st__chat_conv_load(c, u, ul, conv, cl, &cv, &from_cold, wait);
    if (rc) return rc;
    *n = cv.base_total + cv.hot_total;
    st_coldstat_t cs;
    if ((rc = st_tier_stat(c->store, u, ul, &cs, wait))) return rc;
    int64_t dead_cold, dead_hot;
    if ((rc = st__chat_dead_count(c, u, ul, conv, cl, cs.watermark, &dead_cold, &dead_hot, wait)))
        return rc;
    uint8_t k[ST__KEY_CAP], pre[ST__KEY_CAP];
    /* hot rows out (the index walk gives the ids) */
    st_buf_t ids = {0};
    size_t pl = st__chat_nprefix(pre, u, ul, conv, cl);
    rc = st_store_scan(c->store, pre, pl, st__collect_id, &ids, wait);
    if (rc < 0) goto done;
    rc = ST_OK;
    for (size_t i = 0; i + 8 <= ids.len && !rc; i += 8) {
        uint64_t id;
        memcpy(&id, ids.data + i, 8);
        memcpy(k, pre, pl);
        st_be64_put(k + pl, id);
        rc = st_store_del(c->store, k, pl + 8, wait);
        if (!rc) rc = st_store_del(c->store, k, st__idkey(k, 'M', u, ul, id), wait);
        if (!rc && st_store_del(c->store, k, st__idkey(k, 'h', u, ul, id), wait) == ST_ENOTFOUND)
            rc = ST_OK;
    }
    if (!rc) rc = st__conv_records_out(c, u, ul, conv, cl, wait);
    if (!rc) rc = st__chat_delta_mark(c, u, ul, wait); /* their states leave the delta objects */
    if (rc) goto done;
    /* cold rows masked (reads skip them, the user's stats count them as gone) */
    uint64_t mask[2] = {cv.last, (uint64_t)cv.last_seq};
    size_t ml = st__chat_ukey(k, 'Q', u, ul);
    ml += st__chat_conv_part(k + ml, ul, conv, cl);
    if ((rc = st_store_put(c->store, k, ml, mask, sizeof mask, wait))) goto done;
    /* all its rows masked: a post of the name needs no footer read (marks.c) */
    if ((rc = st__chat_cold_unmark(c, u, ul, conv, cl, wait))) goto done;
    if (cv.base_total + dead_cold > 0 &&
        ((rc = st__chat_gone_add(c, u, ul, cv.base_total, wait)) ||
         (rc = st__chat_fold_objects(c, u, ul, cv.first, cv.last, wait))))
        goto done;
    if (!from_cold) {
        rc = st_store_del(c->store, k, st__chat_ckey(k, u, ul, conv, cl), wait);
        if (!rc) {
            rc = st_store_del(c->store, k, st__chat_ukey_upd(k, u, ul, cv.updated, conv, cl), wait);
            if (rc == ST_ENOTFOUND) rc = ST_OK;
        }
        if (rc) goto done;
    }
    st_totals_t tot;
    size_t tkl = st__chat_ukey(k, 'T', u, ul) - 1;
    if (st__chat_get_fixed(c->store, k, tkl, &tot, sizeof tot, wait) == ST_OK) {
        tot.total -= *n;
        if (tot.conversations > 0) tot.conversations--;
        rc = st_store_put(c->store, k, tkl, &tot, sizeof tot, wait);
    }
done:
    st_buf_free(&ids);
    return rc;
}
