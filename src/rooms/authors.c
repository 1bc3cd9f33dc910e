/* SPDX-License-Identifier: MIT */
/* Each room's posts by author ('a'), so that an erasure visits only the erased user's posts and
 * the reads during it leave them out of the counts at once (SPEC §2.1 v5, §2.2); and the room's
 * mark ('A' room -> be64(S)): every post up to seq S has its entry. Each post advances S in its
 * own batch when S was the seq before it; a post an older binary made (a leader of a rolling
 * upgrade, or one node downgraded and upgraded again: no entry, S left where it was) leaves a gap
 * that stays, so the room is indexed only while S is its last seq, and otherwise keeps the
 * erasure's walk of all its messages (erase.c). Rooms made before the index have no mark; those
 * the first indexing binary made have an empty one, which proves nothing (that binary did not
 * advance it): both are walked. */
#include "internal.h"

#include <cjson/cJSON.h>

#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

/* 'a' room 0 author' 0 kind, author' = author or 0x01 + SHA-256(author)[0..20) when the key
 * with its seq would be too long (names never start with 0x01). */
static size_t st__author_pre(uint8_t *k, const char *room, size_t rl, const char *u, size_t ul,
                             uint8_t kind)
{
    ST_ASSERT(rl <= ST_NAME_MAX);
    k[0] = ST__KS_AUTHOR;
    memcpy(k + 1, room, rl);
    k[1 + rl] = 0;
    size_t n = rl + 2;
    if (n + ul + 10 <= ST_KEY_MAX) {
        memcpy(k + n, u, ul);
        n += ul;
    } else {
        uint8_t d[SHA256_DIGEST_LENGTH];
        SHA256((const unsigned char *)u, ul, d);
        k[n] = 1;
        memcpy(k + n + 1, d, 20);
        n += 21;
    }
    k[n++] = 0;
    k[n++] = kind;
    return n;
}

static size_t st__author_key(uint8_t *k, const char *room, size_t rl, const char *u, size_t ul,
                             uint8_t kind, int64_t seq)
{
    size_t n = st__author_pre(k, room, rl, u, ul, kind);
    st_be64_put(k + n, (uint64_t)seq);
    return n + 8;
}

bool st__rooms_message_ids(const char *json, size_t len, int64_t *seq, uint64_t *id, st_buf_t *from)
{
    cJSON *j = cJSON_ParseWithLength(json, len);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "seq");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "msg_id");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "from");
    *seq = cJSON_IsNumber(s) ? (int64_t)s->valuedouble : 0;
    *id = cJSON_IsString(m)   ? strtoull(m->valuestring, NULL, 10)
          : cJSON_IsNumber(m) ? (uint64_t)m->valuedouble
                              : 0;
    bool named = cJSON_IsString(f) && f->valuestring[0];
    if (named && from) st_buf_puts(from, f->valuestring);
    cJSON_Delete(j);
    return named && *seq > 0 && *id;
}

/* 'A' room */
static size_t st__indexed_key(uint8_t *k, const char *room, size_t rl)
{
    size_t kl = st__rooms_key(k, room, rl);
    k[0] = ST__KS_INDEXED;
    return kl;
}

int st__rooms_author_posted(st_rooms_t *r, const char *room, size_t rl, const char *u, size_t ul,
                            int64_t seq, uint64_t id, uint64_t *wait)
{
    if (seq <= 0 || !id || r->test_post_as_old) return ST_OK;
    uint8_t k[ST__ROOMS_KEY_CAP], v[8];
    st_be64_put(v, id);
    int rc = st_store_put(r->store, k, st__author_key(k, room, rl, u, ul, ST__AUTHOR_LIVE, seq), v,
                          8, wait);
    if (rc) return rc;
    /* the mark moves only from the seq just before: a post without its entry (an older
     * binary's) left it behind, and the gap stays for good */
    const void *mv;
    size_t ml, kl = st__indexed_key(k, room, rl);
    rc = st_store_get(r->store, k, kl, &mv, &ml, wait);
    if (rc == ST_ENOTFOUND) return ST_OK;
    if (rc || ml != 8 || st_be64_get(mv) != (uint64_t)(seq - 1)) return rc;
    st_be64_put(v, (uint64_t)seq);
    return st_store_put(r->store, k, kl, v, 8, wait);
}

int st__rooms_author_deleted(st_rooms_t *r, const char *room, size_t rl, const char *json,
                             size_t len, uint64_t *wait)
{
    int64_t seq;
    uint64_t id;
    st_buf_t from = {0};
    int rc = ST_OK;
    /* a tombstone that still names its author: an erasure of it un-names it (from the 'dead'
     * entry); one of an erased author (from null) has nothing left to do */
    if (st__rooms_message_ids(json, len, &seq, &id, &from)) {
        uint8_t k[ST__ROOMS_KEY_CAP], v[8];
        st_be64_put(v, id);
        rc = st_store_del(r->store, k,
                          st__author_key(k, room, rl, from.data, from.len, ST__AUTHOR_LIVE, seq),
                          wait);
        if (!rc)
            rc = st_store_put(
                r->store, k, st__author_key(k, room, rl, from.data, from.len, ST__AUTHOR_DEAD, seq),
                v, 8, wait);
    }
    st_buf_free(&from);
    return rc;
}

int st__rooms_author_drop(st_rooms_t *r, const char *room, size_t rl, const char *u, size_t ul,
                          int64_t seq, uint64_t *wait)
{
    uint8_t k[ST__ROOMS_KEY_CAP];
    if (seq <= 0) return ST_OK;
    int rc =
        st_store_del(r->store, k, st__author_key(k, room, rl, u, ul, ST__AUTHOR_LIVE, seq), wait);
    if (!rc)
        rc = st_store_del(r->store, k, st__author_key(k, room, rl, u, ul, ST__AUTHOR_DEAD, seq),
                          wait);
    return rc;
}

/* ---- the mark ---- */

int st__rooms_indexed(st_rooms_t *r, const char *room, size_t rl, bool *indexed, uint64_t *wait)
{
    uint8_t k[ST__ROOMS_KEY_CAP];
    const void *v;
    size_t vl;
    *indexed = false;
    int rc = st_store_get(r->store, k, st__indexed_key(k, room, rl), &v, &vl, wait);
    if (rc == ST_ENOTFOUND) return ST_OK;
    if (rc || vl != 8) return rc;   /* empty: the first indexing binary's, which never moved it */
    uint64_t upto = st_be64_get(v); /* v is the store's until its next call */
    st_chat_conv_info_t ci;
    bool any;
    if ((rc = st__rooms_conv(r, room, rl, &ci, &any, wait))) return rc;
    *indexed = ci.last_seq >= 0 && upto == (uint64_t)ci.last_seq;
    return ST_OK;
}

int st__rooms_mark_indexed(st_rooms_t *r, const char *room, size_t rl, bool on, uint64_t *wait)
{
    uint8_t k[ST__ROOMS_KEY_CAP];
    size_t kl = st__indexed_key(k, room, rl);
    if (!on) return st_store_del(r->store, k, kl, wait);
    /* tests make a room as an older binary did (no mark: its erasure walks every message) */
    const char *e = getenv("STRATA_TEST_ROOMS_NO_INDEX");
    if (e && *e == '1') return ST_OK;
    /* S = 0: a new room's first post is seq 1 (a deleted room's erasure took its owner's
     * records, the conversation's too; were a seq ever issued before, the first post would
     * find a gap: the room walked, never an erasure short) */
    uint8_t v[8];
    st_be64_put(v, 0);
    return st_store_put(r->store, k, kl, v, 8, wait);
}

/* ---- the reads during an erasure ---- */

int st__rooms_erasing_names(st_rooms_t *r, st_buf_t *names, uint64_t *wait)
{
    size_t cnt;
    /* bounded: with more erasures pending at once (a bulk job), the later users stay in the
     * member counts and their posts in the others' counts until the slices take them out */
    return st_chat_erasing_owners(r->chat, ST_OWNER_USER, ST__ERASING_MAX, names, &cnt, wait);
}

/* The most entries one read walks: a heavy poster being erased (a bot's million posts, taken 16
 * a slice) made every read of its rooms walk them all in one loop turn. Past it a read subtracts
 * what it walked, and the counts reach exact as the erasure's slices drop the entries. */
#define ST__ERASING_WALK_MAX 4096

typedef struct {
    int64_t n;
    uint64_t first_id;
    size_t walked; /* across the users of one read: ST__ERASING_WALK_MAX at most */
} st_acount_t;

static int st__author_count(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_acount_t *c = arg;
    (void)key, (void)klen;
    if (++c->walked > ST__ERASING_WALK_MAX) return 1;
    /* below the room's first message: gone by retention (its entry is left until an erasure
     * of the author or the room's deletion drops it), in no count any more */
    if (vlen == 8 && st_be64_get(val) < c->first_id) return 0;
    c->n++;
    return 0;
}

int st__rooms_erasing_posts(st_rooms_t *r, const st_buf_t *names, const char *room, size_t rl,
                            int64_t after, uint64_t first_id, int64_t *n, uint64_t *wait)
{
    st_acount_t c = {0, first_id, 0};
    *n = 0;
    int rc = ST_OK;
    for (size_t p = 0; rc == ST_OK && p < names->len;) {
        uint8_t l = (uint8_t)names->data[p];
        uint8_t pre[ST__ROOMS_KEY_CAP], lo[ST__ROOMS_KEY_CAP];
        size_t pl = st__author_pre(pre, room, rl, names->data + p + 1, l, ST__AUTHOR_LIVE);
        size_t ll = st__author_key(lo, room, rl, names->data + p + 1, l, ST__AUTHOR_LIVE,
                                   after > 0 ? after + 1 : 0);
        int rc2 =
            st_store_range(r->store, pre, pl, lo, ll, NULL, 0, false, st__author_count, &c, wait);
        if (rc2 < 0) rc = rc2;
        if (c.walked > ST__ERASING_WALK_MAX) break;
        p += 1 + (size_t)l;
    }
    *n = c.n;
    return rc;
}

/* ---- the erasure of an indexed room's author ---- */

typedef struct {
    ST_VEC(int64_t) seq;
    ST_VEC(uint64_t) id;
    ST_VEC(uint8_t) kind;
    size_t max;
} st_aentries_t;

static int st__author_take(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_aentries_t *a = arg;
    if (a->seq.n >= a->max) return 1;
    if (klen < 10 || vlen != 8) return 0;
    const uint8_t *k = key;
    st_vec_push(&a->seq, (int64_t)st_be64_get(k + klen - 8));
    st_vec_push(&a->kind, k[klen - 9]);
    st_vec_push(&a->id, st_be64_get(val));
    return 0;
}

int st__rooms_erase_indexed(st_rooms_t *r, const char *room, size_t rl, const char *u, size_t ul,
                            int64_t at, size_t max, bool *more, uint64_t *wait)
{
    uint8_t pre[ST__ROOMS_KEY_CAP];
    /* both kinds: live first (0 < 1), then the tombstones that still name the author */
    size_t pl = st__author_pre(pre, room, rl, u, ul, ST__AUTHOR_LIVE) - 1;
    st_aentries_t a = {.max = max ? max : 1};
    int rc = st_store_scan(r->store, pre, pl, st__author_take, &a, wait);
    rc = rc < 0 ? rc : ST_OK;
    *more = a.seq.n >= a.max;
    const st_owner_t *ro = ST_ROOM(room, rl);
    st_buf_t tmp = {0};
    for (size_t i = 0; rc == ST_OK && i < a.seq.n; i++) {
        st_buf_reset(&tmp);
        /* the walk's own path (erase.c): a live one becomes a tombstone, from null, and its
         * 'd' record goes with it (chat's count moves in the same batch as the entry goes, so
         * the reads never subtract it twice); a tombstone loses its from, no count moves */
        rc = st_chat_delete_unnamed(r->chat, ro, a.id.v[i], at, &tmp, wait);
        if (rc == ST_OK && a.kind.v[i] == ST__AUTHOR_LIVE)
            rc = st__rooms_gone(r, room, rl, a.seq.v[i], wait);
        if (rc == ST_ENOTFOUND) rc = ST_OK; /* gone by retention meanwhile */
        if (rc == ST_OK) rc = st__rooms_author_drop(r, room, rl, u, ul, a.seq.v[i], wait);
    }
    st_buf_free(&tmp);
    st_vec_free(&a.seq);
    st_vec_free(&a.id);
    st_vec_free(&a.kind);
    return rc;
}

/* ---- a deleted room: its entries and its mark go, in slices ---- */

typedef struct {
    st_buf_t keys;
    size_t n, max;
} st_akeys_t;

static int st__author_key_take(void *arg, const void *key, size_t klen, const void *val,
                               size_t vlen)
{
    st_akeys_t *c = arg;
    (void)val, (void)vlen;
    st_buf_append(&c->keys, &klen, sizeof klen);
    st_buf_append(&c->keys, key, klen);
    return ++c->n >= c->max;
}

bool st__rooms_authors_drop_room(st_rooms_t *r, const char *room, size_t rl, size_t max,
                                 uint64_t *wait)
{
    uint8_t k[ST__ROOMS_KEY_CAP];
    size_t kl = st__rooms_key(k, room, rl);
    k[0] = ST__KS_AUTHOR;
    k[kl++] = 0;
    st_akeys_t c = {.max = max ? max : 1};
    st_store_scan(r->store, k, kl, st__author_key_take, &c, wait);
    for (size_t off = 0; off < c.keys.len;) {
        size_t n;
        memcpy(&n, c.keys.data + off, sizeof n);
        st_store_del(r->store, c.keys.data + off + sizeof n, n, wait);
        off += sizeof n + n;
    }
    bool more = c.n >= c.max;
    st_buf_free(&c.keys);
    if (!more) st__rooms_mark_indexed(r, room, rl, false, wait);
    if (!more) st__rooms_sweep_forget(r, room, rl, wait); /* nothing left to sweep */
    return more;
}
