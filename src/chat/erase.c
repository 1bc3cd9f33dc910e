/* SPDX-License-Identifier: MIT */
/*
 * Erasure of a user (SPEC §2.2, GDPR art. 17). DELETE /v1/users/{u} stages, in the request's
 * batch (durable before the 202), the marker 'G' u (every answer about the user is 404 from
 * then on, st_chat_erased) and the erasure record; the change observers end the user's streams.
 * Then st_chat_erase_step, called by a timer in small slices (a bounded number of keys per call,
 * so a user with millions of rows never stalls the loop), deletes the user's hot rows, every key
 * chat keeps for it, and has the tier forget its objects (st_tier_forget: out of the manifest,
 * each deletion recorded and done by the tier's reaper once durable, then the summary). The
 * erasure is done once nothing of the user is left (no hot key, no manifest record, no object
 * being written or waiting for deletion): the marker goes, the record says done. A restart
 * resumes from the records, which are in the hot store (replicated, backed up).
 *
 * Records: "\0chat_erase" 0 id -> i64 requested_at | i64 done_at (0: pending) | the user.
 *          "\0chat_revoke" 0 user -> i64 requested_at of the user's latest erasure: tokens
 *          issued to the user before it are refused (st_chat_erased_at, http/auth.c). Staged in
 *          the erasure's batch, so it is durable before the 202 and reaches every member of a
 *          group the way the erasure does; kept for good (see chat.h), and set again by a
 *          restore that brings back an erasure the store did not hold.
 * Other modules' data of the user (rooms: the room messages it posted become tombstones, its
 * memberships go; http: the Idempotency-Key answers about it) is erased through their hooks
 * (st_chat_on_erase) before the erasure is done. Until then every read shows the room messages
 * it posted as the tombstones those hooks write (mask.c, st_chat_erasing_at: the same deleted_at).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static const char st__chat_erase_pre[] = "\0chat_erase"; /* with its 0 terminator: 12 bytes */
#define ST__ERASE_PL sizeof st__chat_erase_pre

static size_t st__rec_key(uint8_t *k, uint64_t id)
{
    memcpy(k, st__chat_erase_pre, ST__ERASE_PL);
    st_be64_put(k + ST__ERASE_PL, id);
    return ST__ERASE_PL + 8;
}

static const char st__revoke_pre[] = "\0chat_revoke"; /* with its 0 terminator: 13 bytes */

static size_t st__revoke_key(uint8_t *k, const char *u, size_t ul)
{
    memcpy(k, st__revoke_pre, sizeof st__revoke_pre);
    memcpy(k + sizeof st__revoke_pre, u, ul);
    return sizeof st__revoke_pre + ul;
}

int st_chat_erased_at(st_chat_t *c, const char *u, size_t ul, int64_t *at_us, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    if (ul > ST_NAME_MAX) return ST_ENOTFOUND;
    return st__chat_get_fixed(c->store, k, st__revoke_key(k, u, ul), at_us, sizeof *at_us, wait);
}

/* Records erasure time `at` for the user unless a later one is recorded already. */
static int st__revoke(st_chat_t *c, const char *u, size_t ul, int64_t at, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    int64_t was;
    size_t kl = st__revoke_key(k, u, ul);
    int rc = st__chat_get_fixed(c->store, k, kl, &was, sizeof was, wait);
    if (rc == ST_OK && was >= at) return ST_OK;
    if (rc != ST_OK && rc != ST_ENOTFOUND) return rc;
    return st_store_put(c->store, k, kl, &at, sizeof at, wait);
}

bool st__chat_erasing(st_chat_t *c, const char *u, size_t ul, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    const void *v;
    size_t vl;
    return st_store_get(c->store, k, st__chat_ukey(k, 'G', u, ul) - 1, &v, &vl, wait) == ST_OK;
}

bool st_chat_erased(st_chat_t *c, const st_owner_t *o)
{
    uint64_t w = 0;
    return st_chat_erasing(c, o, &w);
}

bool st_chat_erasing(st_chat_t *c, const st_owner_t *o, uint64_t *wait)
{
    if (o->len > ST_NAME_MAX) return false; /* no owner's id (a token's sub is not checked) */
    char u[ST_CHAT_OWNER_MAX];
    return st__chat_erasing(c, u, st_chat_owner_bytes(u, o), wait);
}

int st_chat_erasing_at(st_chat_t *c, const st_owner_t *o, int64_t *at_us, uint64_t *wait)
{
    if (o->len > ST_NAME_MAX) return ST_ENOTFOUND;
    char u[ST_CHAT_OWNER_MAX];
    uint8_t k[ST__KEY_CAP];
    uint64_t id;
    size_t gl = st__chat_ukey(k, 'G', u, st_chat_owner_bytes(u, o)) - 1;
    int rc = st__chat_get_fixed(c->store, k, gl, &id, sizeof id, wait);
    if (rc) return rc;
    const void *v;
    size_t vl;
    if ((rc = st_store_get(c->store, k, st__rec_key(k, id), &v, &vl, wait))) return rc;
    if (vl < 16) return ST_EINTERNAL;
    memcpy(at_us, v, sizeof *at_us); /* requested_at */
    return ST_OK;
}

typedef struct {
    st_buf_t *out;
    size_t n, max;
    st_owner_kind_t kind;
} st_erasing_t;

static int st__erasing_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_erasing_t *x = arg;
    (void)val, (void)vlen;
    if (x->n == x->max) return 1;
    if (klen < 2 || klen - 1 > ST_CHAT_OWNER_MAX) return 0;
    st_owner_t o = st_chat_owner_from((const char *)key + 1, klen - 1);
    if (o.kind != x->kind || o.len == 0 || o.len > ST_NAME_MAX) return 0;
    uint8_t l = (uint8_t)o.len;
    st_buf_append(x->out, &l, 1);
    st_buf_append(x->out, o.id, l);
    x->n++;
    return 0;
}

int st_chat_erasing_owners(st_chat_t *c, st_owner_kind_t kind, size_t max, st_buf_t *out, size_t *n,
                           uint64_t *wait)
{
    /* the kind's owners share their bytes' start (a user's none): one range of the markers */
    uint8_t k[ST__KEY_CAP];
    char o[ST_CHAT_OWNER_MAX];
    st_erasing_t x = {out, 0, max, kind};
    size_t kl = st__chat_ukey(k, 'G', o, st_chat_owner_bytes(o, &(st_owner_t){kind, "", 0})) - 1;
    int rc = st_store_scan(c->store, k, kl, st__erasing_one, &x, wait);
    *n = x.n;
    return rc < 0 ? rc : ST_OK;
}

typedef struct {
    const char *u;
    size_t ul;
    int64_t since;
    bool found;
} st_since_t;

static int st__since_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_since_t *x = arg;
    int64_t t[2];
    if (klen != ST__ERASE_PL + 8 || vlen != 16 + x->ul) return 0;
    memcpy(t, val, sizeof t);
    if (t[0] < x->since || memcmp((const char *)val + 16, x->u, x->ul) != 0) return 0;
    x->found = true;
    return 1;
}

/* Erasure ids are snowflakes, so only the records from about since on are walked: those whose
 * id's millisecond is at most a minute before it (an id's time runs ahead of the clock, never
 * behind it by more than a clock step back). */
#define ST__SINCE_SLACK_MS 60000

bool st_chat_erased_since(st_chat_t *c, const char *u, size_t ul, int64_t since_us)
{
    st_since_t x = {.u = u, .ul = ul, .since = since_us};
    uint64_t w = 0;
    int64_t ms = since_us / 1000 - ST_SNOWFLAKE_EPOCH_MS - ST__SINCE_SLACK_MS;
    uint8_t from[ST__ERASE_PL + 8];
    size_t fl = ms > 0 ? st__rec_key(from, (uint64_t)ms << 22) : 0;
    st_store_scan_from(c->store, st__chat_erase_pre, ST__ERASE_PL, fl ? from : NULL, fl,
                       st__since_one, &x, &w);
    return x.found;
}

int st_chat_erase(st_chat_t *c, const st_owner_t *o, uint64_t *id, uint64_t *wait)
{
    char u[ST_CHAT_OWNER_MAX];
    size_t ul = st_chat_owner_bytes(u, o);
    uint8_t k[ST__KEY_CAP];
    size_t gl = st__chat_ukey(k, 'G', u, ul) - 1;
    int rc = st__chat_get_fixed(c->store, k, gl, id, sizeof *id, wait);
    if (rc != ST_ENOTFOUND) return rc; /* being erased: the same erasure */
    *id = st_snowflake_next(&c->ids);
    if ((rc = st_store_put(c->store, k, gl, id, sizeof *id, wait))) return rc;
    st_buf_t rec = {0};
    int64_t t[2] = {st_now_us(), 0};
    st_buf_append(&rec, t, sizeof t);
    st_buf_append(&rec, u, ul);
    rc = st_store_put(c->store, k, st__rec_key(k, *id), rec.data, rec.len, wait);
    st_buf_free(&rec);
    if (rc == ST_OK) rc = st__revoke(c, u, ul, t[0], wait);
    if (rc) return rc;
    st__chat_changed(c, "user_erased", u, ul, NULL, 0, 0, NULL, 0, *wait);
    return ST_OK;
}

int st_chat_erasure_owner(st_chat_t *c, uint64_t id, st_owner_t *o, uint64_t *wait)
{
    uint8_t k[ST__ERASE_PL + 8];
    const void *v;
    size_t vl;
    int rc = st_store_get(c->store, k, st__rec_key(k, id), &v, &vl, wait);
    if (rc) return rc;
    if (vl < 16) return ST_EINTERNAL;
    *o = st_chat_owner_from((const char *)v + 16, vl - 16);
    return ST_OK;
}

int st_chat_erasure_json(st_chat_t *c, uint64_t id, st_buf_t *out, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    const void *v;
    size_t vl;
    int rc = st_store_get(c->store, k, st__rec_key(k, id), &v, &vl, wait);
    if (rc) return rc;
    if (vl < 16) return ST_EINTERNAL;
    int64_t t[2];
    memcpy(t, v, sizeof t);
    st_buf_puts(out, "{\"erasure_id\":\"");
    st_buf_append_u64(out, id);
    st_owner_t o = st_chat_owner_from((const char *)v + 16, vl - 16);
    st__chat_put_member(out, o.kind == ST_OWNER_USER ? "user" : st_owner_id_field(o.kind));
    st_buf_append_json_str(out, o.id, o.len);
    st_buf_printf(out, ",\"status\":\"%s\",\"requested_at\":%lld,\"done_at\":",
                  t[1] ? "done" : "pending", (long long)t[0]);
    if (t[1])
        st_buf_append_i64(out, t[1]);
    else
        st_buf_puts(out, "null");
    st_buf_appendc(out, '}');
    return ST_OK;
}

/* ---- the slices ---- */

typedef struct {
    uint64_t id;
    char user[ST_CHAT_OWNER_MAX + 1]; /* the owner's bytes */
    size_t ul;
    int64_t t[2];
    bool found;
} st_pending_t;

static int st__pending_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_pending_t *p = arg;
    if (klen != ST__ERASE_PL + 8 || vlen < 16 || vlen - 16 > ST_CHAT_OWNER_MAX) return 0;
    memcpy(p->t, val, sizeof p->t);
    if (p->t[1]) return 0;
    p->id = st_be64_get((const uint8_t *)key + ST__ERASE_PL);
    p->ul = vlen - 16;
    memcpy(p->user, (const char *)val + 16, p->ul);
    p->user[p->ul] = 0;
    p->found = true;
    return 1;
}

typedef struct {
    st_buf_t keys; /* u16 length | key, ... */
    size_t left;
    size_t last; /* offset of the last key's length in keys */
} st_keys_t;

static int st__key_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_keys_t *x = arg;
    (void)val, (void)vlen;
    if (!x->left) return 1;
    uint16_t l = (uint16_t)klen;
    x->last = x->keys.len;
    st_buf_append(&x->keys, &l, 2);
    st_buf_append(&x->keys, key, klen);
    x->left--;
    return 0;
}

/* The user's key ranges, each walked from where the last slice stopped (c->erase_at): a key
 * deleted by a slice stays in LMDB, hidden by the overlay, until the apply thread has taken the
 * batch, and a walk from the range's start stepped over every such key again — at 100,000 hot
 * rows 4–6 ms a slice (bench/loopstall.sh erase, issue 48). Ranges 0–11: the hot rows and every
 * chat key of the user; 12: the delta objects' fold marks ('z' "~e" u 0 seq, delta.c). True when
 * the walk started at the first range's start (so finding nothing means there is nothing). */
#define ST__ERASE_RANGES 13
static bool st__erase_keys(st_chat_t *c, uint64_t id, const char *u, size_t ul, st_keys_t *x)
{
    static const char prefixed[] = {'M', 'N', 'Z', 'e', 'f', 'z', 'Y', 'C', 'U', 'Q', 'h', 'R'};
    uint8_t k[ST__KEY_CAP];
    uint64_t wait = 0;
    if (c->erase_at.id != id) c->erase_at.id = id, c->erase_at.range = c->erase_at.kl = 0;
    bool whole = c->erase_at.range == 0 && c->erase_at.kl == 0;
    char dm[ST_TIER_OWNER_MAX];
    size_t dml = st__chat_delta_owner(dm, u, ul);
    for (size_t r = c->erase_at.range; r < ST__ERASE_RANGES && x->left; r++) {
        size_t pl = r < sizeof prefixed ? st__chat_ukey(k, prefixed[r], u, ul)
                                        : st__chat_ukey(k, 'z', dm, dml);
        bool from = r == c->erase_at.range && c->erase_at.kl > 0;
        size_t before = x->keys.len;
        st_store_scan_from(c->store, k, pl, from ? c->erase_at.key : NULL,
                           from ? c->erase_at.kl : 0, st__key_one, x, &wait);
        c->erase_at.range = r;
        c->erase_at.kl = 0;
        uint16_t l = 0;
        if (x->keys.len > before) memcpy(&l, x->keys.data + x->last, 2);
        if (l && l <= sizeof c->erase_at.key) { /* the last key taken: the next slice's start */
            memcpy(c->erase_at.key, x->keys.data + x->last + 2, l);
            c->erase_at.kl = l;
        }
        if (x->left) c->erase_at.range = r + 1, c->erase_at.kl = 0; /* this range is done */
    }
    return whole;
}

void st_chat_on_erase(st_chat_t *c, st_chat_erase_hook_fn fn, void *arg)
{
    st_observers_t *o = &c->erase_hooks;
    for (size_t i = 0; i < o->n; i++)
        if (o->fn[i] == (st_observer_any_fn)fn && o->arg[i] == arg) return; /* there already */
    st_observers_add(o, (st_observer_any_fn)fn, arg);
}

void st_chat_off_erase(st_chat_t *c, const void *arg)
{
    st_observers_remove(&c->erase_hooks, arg);
}

void st_chat_prefetch(st_chat_t *c)
{
    if (c->cold) st_tier_wait(c->cold->tier, NULL, NULL, NULL);
}

void st_chat_set_erase_within(st_chat_t *c, uint64_t seconds)
{
    c->erase_within_us = seconds * 1000000ull;
}

bool st_chat_cold_settled(st_chat_t *c, const st_owner_t *o)
{
    char u[ST_CHAT_OWNER_MAX];
    size_t ul = st_chat_owner_bytes(u, o);
    st_chatcold_t *cc = c->cold;
    if (!cc) return true; /* no tier: nothing is cold */
    char d[ST_TIER_OWNER_MAX];
    size_t dl = st__chat_delta_owner(d, u, ul);
    uint64_t wait = 0;
    st_tier_stat_t ds;
    if (st_tier_stat(c->store, d, dl, &ds, &wait) != ST_OK) return false;
    /* objects of the owner a fold replaced hold the erased text: no hold keeps them */
    bool held = false;
    if (st_tier_unhold(cc->tier, c->store, u, ul, 64, &held, &wait) != ST_OK ||
        st_tier_unhold(cc->tier, c->store, d, dl, 64, &held, &wait) != ST_OK)
        return false;
    bool fold = st__chat_has_prefix(c, 'e', u, ul) || st__chat_has_prefix(c, 'z', u, ul);
    bool unwritten = st__chat_has_prefix(c, 'f', u, ul);
    if (fold) st_tier_compact(cc->tier, u, ul, ST_TIER_COMPACT_FOLD);
    if (unwritten)
        st_tier_enqueue(cc->tier, d, dl);
    else if (ds.files > 1)
        st_tier_compact(cc->tier, d, dl, ST_TIER_COMPACT_MAJOR);
    return !fold && !unwritten && ds.files <= 1 && !st_tier_owner_busy(c->store, u, ul) &&
           !st_tier_owner_busy(c->store, d, dl);
}

/* A store written by a version before the revocation record holds erasures without it: their
 * users' older tokens would still be taken. Once per process, the member that serves writes
 * (st_chat_erase_step's caller) gives every erasure record its user's record (the newest
 * erasure's time wins; one that is there already is left), staged and replicated like the
 * erasure's slices. Erasure records are few (one per erasure ever) and read in one scan. */
static void st__revoke_check(st_chat_t *c)
{
    st_buf_t recs = {0};
    uint64_t wait = 0;
    c->revoke_checked = true;
    if (st_chat_erasures_export(c, &recs) != ST_OK) c->revoke_checked = false; /* next time */
    for (size_t p = 0; c->revoke_checked && p + 12 <= recs.len;) {
        uint32_t l;
        int64_t t;
        memcpy(&l, recs.data + p + 8, 4);
        memcpy(&t, recs.data + p + 12, sizeof t);
        if (st__revoke(c, recs.data + p + 12 + 16, l - 16, t, &wait) != ST_OK)
            c->revoke_checked = false;
        p += 12 + (size_t)l;
    }
    st_buf_free(&recs);
}

bool st_chat_erase_step(st_chat_t *c, size_t max)
{
    st_pending_t p = {0};
    uint64_t wait = 0;
    if (!c->revoke_checked) st__revoke_check(c);
    st_store_scan(c->store, st__chat_erase_pre, ST__ERASE_PL, st__pending_one, &p, &wait);
    if (!p.found) return false;
    uint64_t within = c->erase_within_us ? c->erase_within_us : 3600000000ull;
    if (p.id != c->erase_late_id && p.t[0] < st_now_us() - (int64_t)within) {
        static st_metric_t *late;
        if (!late)
            late = st_metrics_counter("strata_erasures_late_total",
                                      "Erasures still pending after --erase-within", "");
        st_metric_add(late, 1);
        st_warn("erasure %llu is still pending after --erase-within (%llu s)",
                (unsigned long long)p.id, (unsigned long long)(within / 1000000));
        c->erase_late_id = p.id;
    }
    const char *u = p.user;
    size_t ul = p.ul;
    uint8_t k[ST__KEY_CAP];
    st_keys_t x = {{0}, max, 0};
    /* its marks' "complete" before the marks (marks.c): never trusted while they go; a flush
     * in flight that sets it again is found by the walk of the exact keys below */
    size_t lkl = st__chat_ukey(k, 'L', u, ul) - 1;
    const void *lv;
    size_t lvl;
    bool marks = st_store_get(c->store, k, lkl, &lv, &lvl, &wait) == ST_OK &&
                 st_store_del(c->store, k, lkl, &wait) == ST_OK;
    /* the hot rows and every chat key of the user */
    bool whole = st__erase_keys(c, p.id, u, ul, &x);
    static const char exact[] = {'T', 'X', 'L'};
    for (size_t i = 0; i < sizeof exact && x.left; i++) {
        const void *v;
        size_t vl;
        size_t kl = st__chat_ukey(k, exact[i], u, ul) - 1;
        if (st_store_get(c->store, k, kl, &v, &vl, &wait) == ST_OK) st__key_one(&x, k, kl, v, vl);
    }
    int rc = ST_OK;
    for (size_t off = 0; off + 2 <= x.keys.len && rc == ST_OK;) {
        uint16_t l;
        memcpy(&l, x.keys.data + off, 2);
        rc = st_store_del(c->store, x.keys.data + off + 2, l, &wait);
        if (rc == ST_ENOTFOUND) rc = ST_OK;
        off += 2 + (size_t)l;
    }
    bool busy = x.keys.len > 0 || marks;
    st_buf_free(&x.keys);
    /* its objects, message and delta ones (two manifest owners): forgotten by the tier (out of
     * the manifest, their deletion recorded: the reaper deletes them; held ones let go) */
    char owners[2][ST_TIER_OWNER_MAX];
    size_t ols[2] = {st_tier_owner(owners[0], 0, u, ul), st__chat_delta_owner(owners[1], u, ul)};
    st_tier_t *tier = c->cold ? c->cold->tier : NULL;
    /* a quarter of the slice's keys in objects: each costs a doom record, a manifest delete and
     * the tables' expiry, and 64 with their manifest read made 3.4-3.9 ms slices (Session 19) */
    size_t objs = max / 4 ? max / 4 : 1;
    for (int w = 0; w < 2 && rc == ST_OK; w++)
        rc = st_tier_forget(tier, c->store, owners[w], ols[w], objs, &busy, &wait);
    if (rc != ST_OK) {
        st_warn("erasure %llu: a slice failed (%s); retried", (unsigned long long)p.id,
                st_err_code(rc));
        return true;
    }
    if (busy) return true;
    /* nothing of the user left but what the tier still does: objects being written ('P') or
     * waiting for the reaper ('D') */
    for (int w = 0; w < 2; w++)
        if (st_tier_owner_busy(c->store, owners[w], ols[w])) return true;
    /* what other modules keep of the user (rooms: the messages it posted, its memberships;
     * http: the Idempotency-Key answers about it), one module at a time */
    st_owner_t o = st_chat_owner_from(u, ul);
    for (size_t i = 0; i < c->erase_hooks.n; i++)
        if (((st_chat_erase_hook_fn)c->erase_hooks.fn[i])(c->erase_hooks.arg[i], &o, p.id, max))
            return true;
    if (!whole) { /* a key written behind the walk meanwhile: one more walk from the start */
        c->erase_at.range = c->erase_at.kl = 0;
        return true;
    }
    p.t[1] = st_now_us();
    st_buf_t rec = {0};
    st_buf_append(&rec, p.t, sizeof p.t);
    st_buf_append(&rec, u, ul);
    rc = st_store_put(c->store, k, st__rec_key(k, p.id), rec.data, rec.len, &wait);
    st_buf_free(&rec);
    if (rc == ST_OK) rc = st_store_del(c->store, k, st__chat_ukey(k, 'G', u, ul) - 1, &wait);
    if (rc == ST_OK) st_info("erasure %llu of a user: done", (unsigned long long)p.id);
    return true;
}

/* ---- restores (SPEC §9: an erased user never comes back) ---- */

static int st__export_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_buf_t *b = arg;
    if (klen != ST__ERASE_PL + 8 || vlen < 16 || vlen - 16 > ST_NAME_MAX) return 0;
    uint32_t l = (uint32_t)vlen;
    st_buf_append(b, (const char *)key + ST__ERASE_PL, 8);
    st_buf_append(b, &l, 4);
    st_buf_append(b, val, vlen);
    return 0;
}

int st_chat_erasures_export(st_chat_t *c, st_buf_t *out)
{
    uint64_t wait = 0;
    int rc = st_store_scan(c->store, st__chat_erase_pre, ST__ERASE_PL, st__export_one, out, &wait);
    return rc < 0 ? rc : ST_OK;
}

int st_chat_erasures_import(st_chat_t *c, const st_buf_t *in, size_t *n, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    *n = 0;
    for (size_t p = 0; p + 12 <= in->len;) {
        uint32_t l;
        memcpy(&l, in->data + p + 8, 4);
        if (p + 12 + l > in->len || l < 16) return ST_EINVAL;
        uint64_t id = st_be64_get((const uint8_t *)in->data + p);
        const char *val = in->data + p + 12;
        p += 12 + l;
        const void *v;
        size_t vl;
        size_t kl = st__rec_key(k, id);
        int rc = st_store_get(c->store, k, kl, &v, &vl, wait);
        if (rc == ST_OK) continue; /* known here: pending goes on, done was done by then */
        if (rc != ST_ENOTFOUND) return rc;
        /* pending again: the user's data as restored goes the way it went before */
        st_buf_t rec = {0};
        int64_t t[2];
        memcpy(t, val, sizeof t);
        t[1] = 0;
        st_buf_append(&rec, t, sizeof t);
        st_buf_append(&rec, val + 16, l - 16);
        rc = st_store_put(c->store, k, kl, rec.data, rec.len, wait);
        st_buf_free(&rec);
        if (rc == ST_OK)
            rc = st_store_put(c->store, k, st__chat_ukey(k, 'G', val + 16, l - 16) - 1, &id,
                              sizeof id, wait);
        if (rc == ST_OK) rc = st__revoke(c, val + 16, l - 16, t[0], wait);
        if (rc) return rc;
        (*n)++;
    }
    return ST_OK;
}
