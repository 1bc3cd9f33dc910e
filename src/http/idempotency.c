/* SPDX-License-Identifier: MIT */
/*
 * Idempotency-Key answers (SPEC §0). The first answer to a keyed request is staged in the same
 * batch as the write it answers, so either both are durable or neither is: a retry can never see
 * the write without the answer, or the answer without the write. A key is scoped by principal,
 * method, route and decoded parameters (so /v1/counters/%69dp/incr and /v1/counters/idp/incr
 * share keys) and bound to its request by a fingerprint of method, decoded path and body: the
 * same key with another request is 422 idempotency_key_reused.
 *
 * Answers are stored in time order (format 3, issue 48):
 *   'x' be64(created) scope(32) 3 -> u16 status | fingerprint(32) | u16 n | about(n) | body
 * where about is the user the answer is about, or "", then for a room route's answer 0 and the
 * room's owner bytes. An answer's insert is an append at the B-tree's right edge (one page, not
 * one random page per answer) and the sweep deletes from the left edge; the loop finds an answer
 * by its scope through an index in memory (idem_index.c: a 16-byte slot an answer), rebuilt after a
 * start by a walk of the answers in slices on the loop. Until it is whole a keyed request is 503
 * with Retry-After (nothing is staged: a retry then finds its answer); /healthz and every other
 * request are served meanwhile. The index also rebuilds when the store was written by someone
 * else (a group's follower applies its leader's batches: st_store_writes_of) or rolled a batch
 * back: an answer it names is always read from the store, so it can never replay what is not
 * there.
 *
 * Answers of format 2 (from before issue 48) stay readable until their TTL:
 *   'i' scope(32)              -> i64 created_us | u16 status|0x8000 | fingerprint(32) | body
 *   'x' be64(created) scope    -> about, as above (their expiry index)
 *   'i' "v2"                   -> ""   (every record of the format before has been indexed)
 * A lookup looks there too while any is left; the sweep takes both formats, oldest first.
 *
 * A user's erasure (SPEC §2.2) walks the answers in slices for those naming it
 * (st_http_idem_erase): erasures are rare and keyed writes are not, so a keyed write pays no
 * per-user index. An answer is about a user when its request's path is /v1/users/{user}/… or it
 * is about a room message the user posted (the handler says so); one about a user being erased
 * is never replayed (the request runs afresh: 404 and the like). A room route's answer is also
 * about the room (recorded as its owner bytes, st_chat_owner_bytes): deleted with the room's
 * erasure, never replayed while the room is being deleted.
 * The index is bounded by --idempotency-index (st_idem_limit, issue 48). An answer recorded while
 * it is at its ceiling gets a store entry by scope instead, in the same batch:
 *   'y' scope(32) -> be64(created)
 * (a random B-tree insert, the cost the index saves, paid only past the budget). While any such
 * entry is left, a lookup the index cannot answer reads it too, and the sweep deletes an expired
 * answer's entry with it; the index halves as its answers expire (idem_index.c), so memory comes
 * back after a burst. A rebuild leaves out the answers that have an entry and gives one to each
 * answer past the ceiling (the ceiling was lowered across a restart): every answer is always
 * findable, by the index or by its entry, and none is ever dropped to make room.
 * Sweep steps run on the server's timer (a bounded budget a second, for what is left after a
 * burst) and every 256 answers made, deleting up to 512: twice the insert rate, so the sweep
 * keeps up with any sustained keyed write rate, in slices that never stall the loop. Records of
 * the oldest format (no fingerprint, no index entry) are indexed once, a slice per timer step,
 * then the marker is written.
 */
#include "internal.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#define ST__IDEM_V2     0x8000
#define ST__IDEM_HDR    10 /* format 2: created + status */
#define ST__IDEM_FP     (ST__IDEM_HDR + 32)
#define ST__KS_EXP      ST_KS_IDEM_EXP
#define ST__XKEY_V2     41 /* 'x' be64(created) scope: a format 2 answer's expiry entry */
#define ST__XKEY        42 /* 'x' be64(created) scope 3: an answer itself */
#define ST__V3          3
#define ST__V3_HDR      36   /* status, fingerprint, about's length */
#define ST__FOUND       8    /* creation times of one tag looked at, at most */
#define ST__WARM_INLINE 4096 /* answers a lookup indexes before it answers 503 */

static const uint8_t st__marker[] = {ST_KS_IDEM, 'v', '2'};

/* Loop-thread state (one store per process): the sweep's, and the index of answers. */
static struct {
    const st_store_t *store;
    unsigned since_step; /* records made since the last insert-driven step */
    bool legacy_done;    /* answers of the oldest format all indexed (marker seen or written) */
    bool legacy_live;    /* format 2 answers may be left in 'i': lookups look there too */
    uint8_t legacy_from[33];
    size_t legacy_from_len;
    st_idem_idx_t idx;
    bool ready;   /* the index holds every answer (while the store is written by us) */
    bool warming; /* a rebuild is under way, from warm_from (length 0: the start) */
    uint8_t warm_from[ST__XKEY + 1];
    size_t warm_from_len;
    uint64_t seen;   /* st_store_writes_of('x') when the index last agreed with the store */
    bool spill_live; /* entries by scope ('y') may be left: lookups and the sweep look there */
    st_buf_t got;    /* the warm-up's slice: answers' keys, indexed after its scan */
} st__sw;

/* The ceiling (--idempotency-index) and the spill counter: the server's, kept across rebinds. */
static struct {
    size_t bytes;
    st_metric_t *spilled;
} st__lim;

static int st__any_v2(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)arg, (void)key, (void)val, (void)vlen;
    return klen == 33; /* an answer, not the marker */
}

static void st__sw_reset(void)
{
    st__idx_free(&st__sw.idx);
    st_buf_free(&st__sw.got);
    memset(&st__sw, 0, sizeof st__sw);
    st__idx_limit(&st__sw.idx, st__lim.bytes);
}

static void st__sw_bind(st_store_t *s)
{
    if (st__sw.store == s) return;
    st__sw_reset();
    st__sw.store = s;
    st__sw.spill_live = st__spill_any(s);
    const void *v;
    size_t n;
    uint64_t w = 0;
    st__sw.legacy_done = st_store_get(s, st__marker, sizeof st__marker, &v, &n, &w) == ST_OK;
    uint8_t prefix = ST_KS_IDEM;
    st__sw.legacy_live = st_store_scan(s, &prefix, 1, st__any_v2, NULL, &w) != 0;
    /* No answer at all in 'i' (a new store): nothing to index, and none of the old format can
     * appear any more, so no marker is written either: an idle server writes nothing of its own. */
    if (!st__sw.legacy_done) st__sw.legacy_done = !st__sw.legacy_live;
}

void st__idem_forget(void)
{
    st__sw_reset();
}

void st_idem_limit(size_t bytes, st_metric_t *spilled)
{
    st__lim.bytes = bytes;
    st__lim.spilled = spilled;
    st__idx_limit(&st__sw.idx, bytes);
}

bool st_idem_spilling(void)
{
    return st__sw.spill_live;
}

size_t st__idem_held(void)
{
    return st__sw.idx.n;
}

double st_idem_bytes_gauge(void *arg)
{
    (void)arg;
    return (double)st__idx_bytes(&st__sw.idx);
}

void st_idem_stale(void)
{
    st__sw.ready = st__sw.warming = false;
}

bool st_idem_warming(void)
{
    return st__sw.warming;
}

double st_idem_gauge(void *arg)
{
    (void)arg;
    return st__sw.ready ? (double)st__sw.idx.n : -1;
}

static void st__feed(EVP_MD_CTX *h, const void *p, size_t n)
{
    EVP_DigestUpdate(h, p, n);
    EVP_DigestUpdate(h, "", 1); /* separator: no two field lists hash alike */
}

void st_idem_digest(const st_ctx_t *c, const st_route_t *route, st_idem_req_t *out)
{
    const st_http_request_t *r = c->req;
    memset(out, 0, sizeof *out);
    int method = r->method == ST_HTTP_HEAD ? ST_HTTP_GET : r->method;
    /* fetched and made once (loop thread only): a fetch and two contexts per request showed in
     * a keyed post's profile (issue 48) */
    static EVP_MD *md;
    static EVP_MD_CTX *path, *h;
    if (!md && !(md = EVP_MD_fetch(NULL, "SHA256", NULL))) st_fatal("no SHA-256");
    if (!path && !(path = EVP_MD_CTX_new())) st_fatal("out of memory");
    if (!h && !(h = EVP_MD_CTX_new())) st_fatal("out of memory");
    EVP_DigestInit_ex2(path, md, NULL);
    EVP_DigestUpdate(path, &method, sizeof method);
    st__feed(path, route->pattern, strlen(route->pattern));
    for (int i = 0; i < ST_MAX_PARAMS && c->params[i]; i++)
        st__feed(path, c->params[i], c->plens[i]);
    EVP_MD_CTX_copy_ex(h, path);
    st__feed(h, c->subject, strlen(c->subject));
    st__feed(h, r->idem_key, r->idem_len);
    EVP_DigestFinal_ex(h, out->scope, NULL);
    st__feed(path, r->body ? r->body : "", r->body_len);
    EVP_DigestFinal_ex(path, out->fp, NULL);
}

static void st__rkey(uint8_t key[33], const uint8_t scope[32])
{
    key[0] = ST_KS_IDEM;
    memcpy(key + 1, scope, 32);
}

/* An answer's key (format 3); with scope NULL only its 9-byte time prefix (a sweep's bound). */
static void st__xkey(uint8_t *key, int64_t created, const uint8_t *scope)
{
    key[0] = ST__KS_EXP;
    st_be64_put(key + 1, (uint64_t)created);
    if (!scope) return;
    memcpy(key + 9, scope, 32);
    key[41] = ST__V3;
}

/* ---- the index: it agrees with the store while only this module writes 'x' ---- */

/* Before a write of ours: someone else's since the last one means the index may disagree. */
static void st__own_before(st_store_t *s)
{
    if (st_store_writes_of(s, ST__KS_EXP) != st__sw.seen) st_idem_stale();
}

static void st__own_after(st_store_t *s)
{
    st__sw.seen = st_store_writes_of(s, ST__KS_EXP);
}

static int st__xput(st_store_t *s, const uint8_t *k, size_t kl, const void *v, size_t vl,
                    uint64_t *w)
{
    st__own_before(s);
    int rc = st_store_put(s, k, kl, v, vl, w);
    st__own_after(s);
    return rc;
}

/* An answer past the index's ceiling: its store entry by scope (idem_spill.c), counted. */
static int st__spill_put(st_store_t *s, const uint8_t scope[32], int64_t created, uint64_t *wait)
{
    int rc = st__spill_write(s, scope, created, wait);
    if (rc != ST_OK) return rc;
    st__sw.spill_live = true;
    if (st__lim.spilled) st_metric_add(st__lim.spilled, 1);
    return ST_OK;
}

static void st__spill_drop(st_store_t *s, const uint8_t scope[32], int64_t created)
{
    if (st__sw.spill_live) st__spill_del(s, scope, created);
}

static void st__xdel(st_store_t *s, const uint8_t *k, size_t kl)
{
    uint64_t w = 0;
    st__own_before(s);
    st_store_del(s, k, kl, &w);
    st__own_after(s);
    if (kl != ST__XKEY) return;
    int64_t created = (int64_t)st_be64_get(k + 1);
    st__idx_del(&st__sw.idx, st__idx_tag(k + 9), created);
    st__spill_drop(s, k + 9, created);
}

typedef struct {
    size_t budget, seen;
    uint8_t last[ST__XKEY];
    size_t last_len;
} st_warm_t;

static int st__warm_visit(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)val, (void)vlen;
    st_warm_t *w = arg;
    if (w->seen == w->budget) return 1;
    w->seen++;
    if (klen == ST__XKEY) st_buf_append(&st__sw.got, key, klen);
    w->last_len = klen < ST__XKEY ? klen : ST__XKEY;
    memcpy(w->last, key, w->last_len);
    return 0;
}

/* One answer of a rebuild's slice: into the index, unless its store entry holds it; past the
 * ceiling, an entry for it (the ceiling was lowered since it was recorded). */
static void st__warm_one(st_store_t *s, const uint8_t *k)
{
    int64_t created = (int64_t)st_be64_get(k + 1), c;
    if (st__sw.spill_live && st__spill_get(s, k + 9, &c) && c == created) return;
    if (st__idx_add(&st__sw.idx, st__idx_tag(k + 9), created)) return;
    uint64_t w = 0;
    if (st__spill_put(s, k + 9, created, &w) == ST_OK) return;
    /* the store refuses writes: the index holds it past its ceiling (never lost) */
    st_warn("idempotency: the store refused an answer's entry; the index grows past "
            "--idempotency-index until it takes writes again");
    size_t max = st__sw.idx.max;
    st__sw.idx.max = 0;
    st__idx_add(&st__sw.idx, st__idx_tag(k + 9), created);
    st__sw.idx.max = max;
}

bool st_idem_warm(st_store_t *s, size_t budget, bool start)
{
    st__sw_bind(s);
    if (st_store_writes_of(s, ST__KS_EXP) != st__sw.seen) st_idem_stale();
    if (st__sw.ready) return true;
    if (!st__sw.warming) {
        if (!start) return false;
        st__idx_free(&st__sw.idx);
        uint8_t ip = ST_KS_IDEM; /* format 2 answers may have come with the others' writes */
        uint64_t w0 = 0;
        st__sw.legacy_live = st_store_scan(s, &ip, 1, st__any_v2, NULL, &w0) != 0;
        /* and entries past the ceiling: a leader's come with its answers ('x' and 'y' in one
         * batch), so a follower that now leads finds them */
        st__sw.spill_live = st__spill_any(s);
        st__sw.warming = true;
        st__sw.warm_from_len = 0;
        st__own_after(s);
    }
    st_warm_t w = {.budget = budget};
    uint8_t prefix = ST__KS_EXP;
    uint64_t wait = 0;
    size_t fl = st__sw.warm_from_len;
    st_buf_reset(&st__sw.got);
    st_store_scan_from(s, &prefix, 1, fl ? st__sw.warm_from : NULL, fl, st__warm_visit, &w, &wait);
    for (size_t off = 0; off + ST__XKEY <= st__sw.got.len; off += ST__XKEY)
        st__warm_one(s, (const uint8_t *)st__sw.got.data + off);
    if (w.seen == w.budget && w.last_len) { /* more: go on just after the last one seen */
        memcpy(st__sw.warm_from, w.last, w.last_len);
        st__sw.warm_from[w.last_len] = 0;
        st__sw.warm_from_len = w.last_len + 1;
        return false;
    }
    st__sw.warming = false;
    st__sw.ready = true;
    return true;
}

/* Whether a user may name an answer: a name or a room's owner bytes (no 0 byte). */
static bool st__about_ok(const char *u, size_t ul)
{
    return u && ul && ul <= ST_CHAT_OWNER_MAX && !memchr(u, 0, ul);
}

/* The names an expiry entry's value holds: the user (or none), then after a 0 the room's owner
 * bytes (st_chat_owner_bytes, or none). */
static void st__about_split(const char *v, size_t vl, size_t *ul, const char **room, size_t *rl)
{
    const char *z = vl ? memchr(v, 0, vl) : NULL;
    *ul = z ? (size_t)(z - v) : vl;
    *room = z ? z + 1 : NULL;
    *rl = z ? vl - *ul - 1 : 0;
}

/* Whether an expiry entry's value names u (its user or its room). */
static bool st__about_names(const char *v, size_t vl, const char *u, size_t ul)
{
    size_t al, rl;
    const char *room;
    st__about_split(v, vl, &al, &room, &rl);
    return (al == ul && memcmp(v, u, ul) == 0) || (rl == ul && rl && memcmp(room, u, ul) == 0);
}

/* The about bytes of an answer about nobody that names no user on purpose: about a user being
 * erased when it was recorded (a 404 and the like; kept, so a retry after the erasure gets it
 * again rather than a fresh 201, SPEC §0), never walked by its erasure. */
static const char st__nobody[1] = {0};

/* A format 2 answer's expiry entry. */
static void st__xkey_v2(uint8_t key[ST__XKEY_V2], int64_t created, const uint8_t scope[32])
{
    key[0] = ST__KS_EXP;
    st_be64_put(key + 1, (uint64_t)created);
    memcpy(key + 9, scope, 32);
}

/* The about bytes (borrowed from val) of an answer (format 3) or a format 2 expiry entry. */
static bool st__about_of(size_t klen, const void *val, size_t vlen, const char **a, size_t *al)
{
    if (klen == ST__XKEY_V2) {
        *a = val;
        *al = vlen;
        return true;
    }
    uint16_t n;
    if (klen != ST__XKEY || vlen < ST__V3_HDR) return false;
    memcpy(&n, (const char *)val + 34, 2);
    if (n > vlen - ST__V3_HDR) return false;
    *a = (const char *)val + ST__V3_HDR;
    *al = n;
    return true;
}

/* Whether about bytes name a user or a room r->gone() says is gone. A format 2 entry naming
 * none ("") of a request whose path names a user was recorded before answers named theirs:
 * that user, gone too once an erasure of it was asked for after the answer (created). */
static bool st__gone(const st_idem_req_t *r, const char *a, size_t al, bool v2, int64_t created)
{
    size_t ul, rl;
    const char *room;
    st__about_split(a, al, &ul, &room, &rl);
    char u[ST_CHAT_OWNER_MAX], rm[ST_CHAT_OWNER_MAX]; /* copied: gone() reads the store */
    bool has_u = st__about_ok(a, ul), has_r = st__about_ok(room, rl);
    if (has_u) memcpy(u, a, ul);
    if (has_r) memcpy(rm, room, rl);
    if (has_r && r->gone(r->gone_arg, rm, rl, 0)) return true; /* a room being deleted */
    if (has_u) return r->gone(r->gone_arg, u, ul, 0);
    if (v2 && al == 0 && st__about_ok(r->about, r->about_len))
        return r->gone(r->gone_arg, r->about, r->about_len, created);
    return false;
}

/* A format 2 answer: 'i' scope, and what its expiry entry says it is about. */
static int st__lookup_v2(st_store_t *s, const st_idem_req_t *r, int64_t ttl_us, int64_t now,
                         int *status, const char **body, size_t *blen, uint64_t *wait)
{
    uint8_t key[33];
    st__rkey(key, r->scope);
    const void *val;
    size_t vlen;
    uint64_t w = 0;
    int rc = st_store_get(s, key, sizeof key, &val, &vlen, &w);
    if (rc != ST_OK) return rc;
    if (vlen < ST__IDEM_HDR) return ST_ENOTFOUND;
    int64_t created;
    uint16_t st;
    memcpy(&created, val, 8);
    memcpy(&st, (const char *)val + 8, 2);
    if (now - created > ttl_us) return ST_ENOTFOUND;
    size_t off = ST__IDEM_HDR;
    if (st & ST__IDEM_V2) {
        if (vlen < ST__IDEM_FP) return ST_ENOTFOUND;
        off = ST__IDEM_FP;
    }
    /* The answer (a replay or a 422) reports the first request: it waits for that too. */
    if (*wait < w) *wait = w;
    if ((st & ST__IDEM_V2) && memcmp((const char *)val + ST__IDEM_HDR, r->fp, 32) != 0)
        return ST_EIDEMREUSED;
    if (r->gone) { /* the expiry entry, then the record again (pointers borrowed) */
        uint8_t xkey[ST__XKEY_V2];
        st__xkey_v2(xkey, created, r->scope);
        const void *v;
        size_t vl;
        uint64_t w0 = 0;
        if (st_store_get(s, xkey, sizeof xkey, &v, &vl, &w0) == ST_OK &&
            st__gone(r, v, vl, true, created))
            return ST_ENOTFOUND;
        if ((rc = st_store_get(s, key, sizeof key, &val, &vlen, &w)) != ST_OK) return rc;
        if (vlen < off) return ST_ENOTFOUND;
    }
    *status = st & ~ST__IDEM_V2;
    *body = (const char *)val + off;
    *blen = vlen - off;
    return ST_OK;
}

/* The answer under key (format 3), if it is there. */
static int st__lookup_v3(st_store_t *s, const st_idem_req_t *r, const uint8_t key[ST__XKEY],
                         int *status, const char **body, size_t *blen, uint64_t *wait)
{
    const void *val;
    size_t vlen, al;
    const char *a;
    uint64_t w = 0;
    int rc = st_store_get(s, key, ST__XKEY, &val, &vlen, &w);
    if (rc != ST_OK) return rc;
    if (!st__about_of(ST__XKEY, val, vlen, &a, &al)) return ST_ENOTFOUND;
    if (*wait < w) *wait = w; /* a replay or a 422 reports the first request: it waits too */
    if (memcmp((const char *)val + 2, r->fp, 32) != 0) return ST_EIDEMREUSED;
    if (r->gone && al) {
        if (st__gone(r, a, al, false, 0)) return ST_ENOTFOUND;
        /* gone() read the store: the answer again (pointers borrowed) */
        if ((rc = st_store_get(s, key, ST__XKEY, &val, &vlen, &w)) != ST_OK) return rc;
        if (!st__about_of(ST__XKEY, val, vlen, &a, &al)) return ST_ENOTFOUND;
    }
    uint16_t st;
    memcpy(&st, val, 2);
    *status = st;
    *body = a + al;
    *blen = vlen - ST__V3_HDR - al;
    return ST_OK;
}

int st_idem_lookup(st_store_t *s, const st_idem_req_t *r, int64_t ttl_us, int *status,
                   const char **body, size_t *blen, uint64_t *wait)
{
    return st__idem_lookup_at(s, r, ttl_us, st_now_us(), status, body, blen, wait);
}

int st__idem_lookup_at(st_store_t *s, const st_idem_req_t *r, int64_t ttl_us, int64_t now,
                       int *status, const char **body, size_t *blen, uint64_t *wait)
{
    if (!st_idem_warm(s, ST__WARM_INLINE, true)) return ST_EUNAVAIL;
    int64_t c[ST__FOUND];
    size_t n = st__idx_find(&st__sw.idx, st__idx_tag(r->scope), c, ST__FOUND);
    for (size_t i = 1; i < n; i++) /* newest first */
        for (size_t j = i; j > 0 && c[j - 1] < c[j]; j--) {
            int64_t t = c[j];
            c[j] = c[j - 1];
            c[j - 1] = t;
        }
    for (size_t i = 0; i < n; i++) {
        if (now - c[i] > ttl_us) continue; /* expired: not replayed, the sweep takes it */
        uint8_t key[ST__XKEY];
        st__xkey(key, c[i], r->scope);
        int rc = st__lookup_v3(s, r, key, status, body, blen, wait);
        if (rc != ST_ENOTFOUND) return rc;
    }
    int64_t sc;
    if (st__sw.spill_live && st__spill_get(s, r->scope, &sc) && now - sc <= ttl_us) {
        uint8_t key[ST__XKEY]; /* past the index's ceiling: the store's entry names it */
        st__xkey(key, sc, r->scope);
        int rc = st__lookup_v3(s, r, key, status, body, blen, wait);
        if (rc != ST_ENOTFOUND) return rc;
    }
    if (st__sw.legacy_live) return st__lookup_v2(s, r, ttl_us, now, status, body, blen, wait);
    return ST_ENOTFOUND;
}

bool st_idem_storable(int status)
{
    /* domain outcomes; a request refused as malformed may be retried fixed, with the same key */
    return (status >= 200 && status < 300) || status == 404 || status == 409;
}

/* ---- the sweep ---- */

typedef struct {
    uint8_t k[ST__XKEY];
    uint8_t len;
} st_xkey_t;

typedef struct {
    size_t budget, n; /* answers wanted, collected */
    st_xkey_t *keys;
    /* an erasure's walk (st_http_idem_erase): only answers naming this user, at most `scan`
     * looked at; the last one looked at is kept in `last` */
    const char *user;
    size_t ul, scan, seen;
    st_xkey_t last;
} st_expired_t;

static int st__collect(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_expired_t *x = arg;
    if (x->n == x->budget) return 1;
    if (klen != ST__XKEY_V2 && klen != ST__XKEY) return 0;
    if (x->user) {
        if (x->seen == x->scan) return 1;
        x->seen++;
        memcpy(x->last.k, key, klen);
        x->last.len = (uint8_t)klen;
        const char *a;
        size_t al;
        if (!st__about_of(klen, val, vlen, &a, &al) || !st__about_names(a, al, x->user, x->ul))
            return 0;
    }
    memcpy(x->keys[x->n].k, key, klen);
    x->keys[x->n++].len = (uint8_t)klen;
    return 0;
}

/* Deletes an answer; for format 2 its expiry entry, and its record unless the key was recorded
 * again since. Returns the answers deleted. */
static size_t st__expire(st_store_t *s, const st_xkey_t *x)
{
    if (x->len == ST__XKEY) {
        st__xdel(s, x->k, x->len);
        return 1;
    }
    uint8_t key[33];
    st__rkey(key, x->k + 9);
    uint64_t w = 0;
    const void *val;
    size_t vlen;
    size_t gone = 0;
    int64_t created = (int64_t)st_be64_get(x->k + 1);
    if (st_store_get(s, key, sizeof key, &val, &vlen, &w) == ST_OK && vlen >= 8) {
        int64_t cur;
        memcpy(&cur, val, 8);
        if (cur == created) {
            st_store_del(s, key, sizeof key, &w);
            gone = 1;
        }
    }
    st__xdel(s, x->k, x->len);
    return gone;
}

typedef struct {
    size_t budget, visited;
    uint8_t last[33];
    bool stopped;
    st_store_t *s;
} st_legacy_t;

static int st__legacy_visit(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_legacy_t *l = arg;
    if (l->visited == l->budget) {
        memcpy(l->last, key, klen < 33 ? klen : 33);
        l->stopped = true;
        return 1;
    }
    l->visited++;
    uint16_t st;
    if (klen != 33 || vlen < ST__IDEM_HDR) return 0;
    memcpy(&st, (const char *)val + 8, 2);
    if (st & ST__IDEM_V2) return 0;
    int64_t created;
    memcpy(&created, val, 8);
    uint8_t xkey[ST__XKEY_V2];
    uint64_t w = 0;
    st__xkey_v2(xkey, created, (const uint8_t *)key + 1);
    st__xput(l->s, xkey, sizeof xkey, "", 0, &w); /* the sweep takes it from here */
    return 0;
}

/* Indexes a slice of the oldest format's records; writes the marker once all are done. */
static void st__legacy_step(st_store_t *s, size_t budget)
{
    st_legacy_t l = {.budget = budget, .s = s};
    uint8_t prefix = ST_KS_IDEM;
    uint64_t w = 0;
    st_store_scan_from(s, &prefix, 1, st__sw.legacy_from_len ? st__sw.legacy_from : NULL,
                       st__sw.legacy_from_len, st__legacy_visit, &l, &w);
    if (l.stopped) {
        memcpy(st__sw.legacy_from, l.last, 33);
        st__sw.legacy_from_len = 33;
        return;
    }
    st_store_put(s, st__marker, sizeof st__marker, "", 0, &w);
    st__sw.legacy_done = true;
}

/* Deletes up to `want` answers created before cutoff, oldest first. */
static size_t st__sweep_step(st_store_t *s, int64_t cutoff, size_t want)
{
    if (cutoff <= 0 || !want) return 0;
    st_expired_t x = {.budget = want};
    x.keys = st_malloc(want * sizeof *x.keys);
    uint8_t prefix = ST__KS_EXP, hi[9];
    st__xkey(hi, cutoff, NULL);
    uint64_t w = 0;
    st_store_range(s, &prefix, 1, NULL, 0, hi, sizeof hi, false, st__collect, &x, &w);
    size_t gone = 0;
    for (size_t i = 0; i < x.n; i++)
        gone += st__expire(s, &x.keys[i]);
    free(x.keys);
    return gone;
}

size_t st__idem_sweep_at(st_store_t *s, int64_t ttl_us, size_t budget, int64_t now)
{
    st__sw_bind(s);
    if (!st__sw.legacy_done) st__legacy_step(s, budget);
    size_t gone = st__sweep_step(s, now - ttl_us, budget);
    uint8_t prefix = ST_KS_IDEM;
    uint64_t w = 0;
    if (st__sw.legacy_live && st__sw.legacy_done) /* the last format 2 answer gone? */
        st__sw.legacy_live = st_store_scan(s, &prefix, 1, st__any_v2, NULL, &w) != 0;
    if (st__sw.spill_live) /* the last entry past the ceiling gone? */
        st__sw.spill_live = st__spill_any(s);
    return gone;
}

size_t st_idem_sweep(st_store_t *s, int64_t ttl_us, size_t budget)
{
    return st__idem_sweep_at(s, ttl_us, budget, st_now_us());
}

#define ST__STEP_EVERY 256
#define ST__STEP_MAX   512

static st_buf_t st__val; /* loop-thread scratch: the answer's value */

int st__idem_record_at(st_store_t *s, const st_idem_req_t *r, int64_t ttl_us, int status,
                       const char *body, size_t blen, int64_t now, uint64_t *wait)
{
    st__sw_bind(s);
    /* an answer about a user being erased (a 404, a 403) names nobody (st__nobody): the
     * erasure's walk, which may have passed already, leaves it, and a retry after the erasure
     * gets it again, never a fresh 201 (SPEC §0); it holds nothing of the user. A 2xx is never
     * about such a user (its routes answer 404, a room post by it 403, checked in the same loop
     * turn), so only other answers pay for the check. */
    bool about = st__about_ok(r->about, r->about_len), nobody = false;
    if (about && r->gone && (status < 200 || status > 299) &&
        r->gone(r->gone_arg, r->about, r->about_len, 0))
        about = false, nobody = true;
    uint8_t key[ST__XKEY];
    st__xkey(key, now, r->scope);
    st_buf_t *v = &st__val;
    uint16_t st = (uint16_t)status, n = 0;
    st_buf_reset(v);
    st_buf_append(v, &st, 2);
    st_buf_append(v, r->fp, 32);
    st_buf_append(v, &n, 2); /* about's length, once known */
    if (nobody)
        st_buf_append(v, st__nobody, 1);
    else if (about)
        st_buf_append(v, r->about, r->about_len);
    if (!nobody && st__about_ok(r->room, r->room_len)) {
        st_buf_append(v, "", 1);
        st_buf_append(v, r->room, r->room_len);
    }
    n = (uint16_t)(v->len - ST__V3_HDR);
    memcpy(v->data + 34, &n, 2);
    st_buf_append(v, body, blen);
    /* past the index's ceiling, the answer's entry by scope first (nothing staged if refused) */
    bool spill = st__idx_full(&st__sw.idx);
    int rc = spill ? st__spill_put(s, r->scope, now, wait) : ST_OK;
    if (rc != ST_OK) return rc;
    rc = st__xput(s, key, sizeof key, v->data, v->len, wait);
    if (rc == ST_OK && !spill && !st__idx_add(&st__sw.idx, st__idx_tag(r->scope), now))
        rc = st__spill_put(s, r->scope, now, wait); /* not reached: full was checked */
    if (rc != ST_OK && spill) st__spill_drop(s, r->scope, now);
    if (rc == ST_OK && ++st__sw.since_step >= ST__STEP_EVERY) {
        st__sw.since_step = 0;
        st__sweep_step(s, now - ttl_us, ST__STEP_MAX);
    }
    return rc;
}

int st_idem_record(st_store_t *s, const st_idem_req_t *r, int64_t ttl_us, int status,
                   const char *body, size_t blen, uint64_t *wait)
{
    return st__idem_record_at(s, r, ttl_us, status, body, blen, st_now_us(), wait);
}

/* ---- erasure (SPEC §2.2): the answers about a user go with it ---- */

/* Where the walk of the answers for the erasure under way stands (loop thread; one erasure runs
 * at a time, chat/erase.c), keyed by the erasure's id and the store: a walk that ended stays
 * ended for that erasure (the hook is called again while later hooks work), another erasure (of
 * the same user too) walks afresh. Lost at a restart: the walk then starts over, which only
 * deletes what is still there. */
static struct {
    const st_store_t *store;
    uint64_t erasure;
    st_xkey_t from; /* the last answer looked at (the next walk starts after it) */
    bool started, ended;
} st__ew;

#define ST__ERASE_SCAN 4096 /* answers looked at per slice */

bool st_http_idem_erase(void *store, const st_owner_t *o, uint64_t erasure, size_t max)
{
    st_store_t *s = store;
    const char *u = o->id;
    size_t ul = o->len;
    /* answers are about users, and a room route's about its room too (its owner bytes) */
    char ob[ST_CHAT_OWNER_MAX];
    if (o->kind != ST_OWNER_USER) {
        ul = st_chat_owner_bytes(ob, o);
        u = ob;
    }
    if (!st__about_ok(u, ul)) return false;
    st__sw_bind(s);
    if (st__ew.store != s || st__ew.erasure != erasure) { /* another erasure: from the top */
        memset(&st__ew, 0, sizeof st__ew);
        st__ew.store = s;
        st__ew.erasure = erasure;
    }
    if (st__ew.ended) return false; /* this erasure's walk is done */
    st_expired_t x = {.budget = max ? max : 1, .user = u, .ul = ul, .scan = ST__ERASE_SCAN};
    x.keys = st_malloc(x.budget * sizeof *x.keys);
    uint8_t prefix = ST__KS_EXP, from[ST__XKEY + 1];
    size_t fl = st__ew.from.len;
    if (st__ew.started) { /* just after the last answer looked at */
        memcpy(from, st__ew.from.k, fl);
        from[fl++] = 0;
    }
    uint64_t w = 0;
    st_store_scan_from(s, &prefix, 1, st__ew.started ? from : NULL, st__ew.started ? fl : 0,
                       st__collect, &x, &w);
    for (size_t i = 0; i < x.n; i++)
        st__expire(s, &x.keys[i]);
    free(x.keys);
    /* the walk stopped early (a full slice or the deletion budget) or went to the end */
    bool more = x.seen == x.scan || x.n == x.budget;
    if (x.seen) {
        st__ew.from = x.last;
        st__ew.started = true;
    }
    if (!more) st__ew.ended = true;
    return true;
}
