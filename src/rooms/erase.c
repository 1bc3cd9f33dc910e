/* SPDX-License-Identifier: MIT */
/* An erased user in rooms (SPEC §2.2). */
#include "internal.h"

#include <cjson/cJSON.h>

#include <stdlib.h>
#include <string.h>

/* ---- erasure (SPEC §2.2): an erased user's room messages become tombstones ----
 * Through chat's erase hook, in slices: the user's next room — first those it posted in ('p',
 * rooms it left or was removed from too), then those it is in ('j', which also covers posts
 * made before 'p' markers were written) — the user's posts there found (a room indexed since it
 * was made, every post since by a binary that keeps the index (its mark says so, authors.c): its
 * author index's entries of the user, so the cost follows the user's posts; any other room —
 * from before, or posted to by an older binary — every message walked from the state's last id),
 * hot and cold (a cold page not in memory is fetched, the slice tried again), and deleted, their
 * from null (v5: no row names the user); then the user leaves that room if in it (its 'j' entry
 * goes) and its 'p' marker goes; then the next room; last the remote rooms ('J') the user's list
 * held, each handed to the outbox as an erasure for the room's group (SPEC §10: that group erases
 * the user the same way, its rooms' 'p' and 'j' entries included). State:
 * "\0rooms_erase" user -> be64 last msg_id | room. */
static const char st__rooms_erase_pre[] = "\0rooms_erase"; /* with its 0 terminator: 13 bytes */

typedef struct {
    const char *u;
    size_t ul;
    ST_VEC(uint64_t) ids;  /* its live messages */
    ST_VEC(uint64_t) dead; /* its tombstones (deleted before the erasure): from still names it */
} st_authored_t;

static void st__authored(void *arg, uint64_t msg_id, const char *json, size_t len)
{
    st_authored_t *a = arg;
    cJSON *j = cJSON_ParseWithLength(json, len);
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "from");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "deleted_at");
    if (cJSON_IsString(f) && strlen(f->valuestring) == a->ul &&
        memcmp(f->valuestring, a->u, a->ul) == 0) {
        if (!d || cJSON_IsNull(d))
            st_vec_push(&a->ids, msg_id);
        else
            st_vec_push(&a->dead, msg_id);
    }
    cJSON_Delete(j);
}

static int st__first_val(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_buf_t *b = arg;
    (void)key;
    st_buf_append(b, &klen, sizeof klen);
    st_buf_append(b, key, klen);
    st_buf_append(b, val, vlen);
    return 1;
}

/* A 'j' entry that names a room (not the user's count, 'j' user 0 itself: 8 bytes). */
static int st__first_room(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    return vlen > 8 ? st__first_val(arg, key, klen, val, vlen) : 0;
}

/* The user's next room into room: the first it posted in ('p' user 0 …, rooms it left too),
 * else the first it is in ('j' user 0 …); false when there is none. */
static bool st__erase_next_room(st_rooms_t *r, const char *u, size_t ul, st_buf_t *room)
{
    uint8_t k[ST__ROOMS_KEY_CAP];
    st_buf_t b = {0};
    uint64_t w = 0;
    size_t kl = 0, skip = 0;
    k[1 + ul] = 0;
    memcpy(k + 1, u, ul);
    k[0] = ST__KS_POSTED;
    st_store_scan(r->store, k, ul + 2, st__first_val, &b, &w);
    if (!b.len) {
        k[0] = ST__KS_JOINED;
        st_store_scan(r->store, k, ul + 2, st__first_room, &b, &w);
        skip = 8; /* joined_at | room */
    }
    if (b.len >= sizeof kl) memcpy(&kl, b.data, sizeof kl);
    /* a 'p' value is the room, after the marker it left with (ST__LEFT_TAG) if it left */
    if (!skip && b.len > sizeof kl + kl && (uint8_t)b.data[sizeof kl + kl] == ST__LEFT_TAG)
        skip = ST__LEFT_SIZE;
    bool found = b.len > sizeof kl + kl + skip;
    if (found) st_buf_append(room, b.data + sizeof kl + kl + skip, b.len - sizeof kl - kl - skip);
    st_buf_free(&b);
    return found;
}

/* ---- a deleted room (SPEC §2.1 v5): its messages were erased as its own name's; then, in
 * slices of at most max, its members leave (each one's list entry and count go, and the outbox
 * tells a member's other group), last its owner count and its deleted-message records ---- */

typedef struct {
    st_buf_t keys;       /* (size_t length, bytes) each */
    size_t n, max, skip; /* skip: bytes of a value before what is kept (a member's user) */
    bool values;         /* keep the value's bytes after skip, not the key */
} st_collect_t;

static int st__erase_collect_key(void *arg, const void *key, size_t klen, const void *val,
                                 size_t vlen)
{
    st_collect_t *c = arg;
    const void *p = c->values ? (const uint8_t *)val + c->skip : key;
    size_t n = c->values ? (vlen > c->skip ? vlen - c->skip : 0) : klen;
    st_buf_append(&c->keys, &n, sizeof n);
    st_buf_append(&c->keys, p, n);
    return ++c->n >= c->max;
}

static bool st__room_deleted_slice(st_rooms_t *r, const char *room, size_t rl, size_t max)
{
    uint8_t k[ST__ROOMS_KEY_CAP];
    uint64_t w = 0;
    st_collect_t c = {.max = max ? max : 1, .skip = ST__MEMBER_SIZE, .values = true};
    st_store_scan(r->store, k, st__rooms_pair(k, ST__KS_MEMBER, room, rl, "", 0),
                  st__erase_collect_key, &c, &w);
    for (size_t off = 0; off < c.keys.len;) {
        size_t n;
        memcpy(&n, c.keys.data + off, sizeof n);
        st__rooms_leave(r, room, rl, 0, NULL, 0, c.keys.data + off + sizeof n, n, &w);
        off += sizeof n + n;
    }
    bool more = c.n >= c.max;
    if (!more) { /* no member left: the deleted messages' records, then the owner count */
        st_buf_reset(&c.keys);
        c.n = 0;
        c.values = false;
        st_store_scan(r->store, k, st__rooms_pair(k, ST__KS_GONE, room, rl, "", 0),
                      st__erase_collect_key, &c, &w);
        for (size_t off = 0; off < c.keys.len;) {
            size_t n;
            memcpy(&n, c.keys.data + off, sizeof n);
            st_store_del(r->store, c.keys.data + off + sizeof n, n, &w);
            off += sizeof n + n;
        }
        more = c.n >= c.max;
        /* then its author index and its mark: a new room of the same id starts clean */
        if (!more) more = st__rooms_authors_drop_room(r, room, rl, c.max, &w);
        size_t kl = st__rooms_key(k, room, rl);
        k[0] = ST__KS_OWNERS;
        if (!more) st_store_del(r->store, k, kl, &w);
    }
    st_buf_free(&c.keys);
    return more;
}

/* The erasure's last step: every room whose messages it turned into tombstones ("\0rooms_erase"
 * user 0 room, recorded as each room was done) has them in its objects too — folded in, the
 * deltas merged, no object holding the text left (chat asks the tier for that work at once).
 * Entries of settled rooms go; true once none is left. */
static bool st__erase_settled(st_rooms_t *r, const uint8_t *sk, size_t skl, size_t max)
{
    uint8_t pre[ST__ROOMS_KEY_CAP];
    memcpy(pre, sk, skl);
    pre[skl] = 0;
    uint64_t w = 0;
    st_collect_t c = {.max = max ? max : 1};
    st_store_scan(r->store, pre, skl + 1, st__erase_collect_key, &c, &w);
    size_t left = 0;
    for (size_t off = 0; off < c.keys.len;) {
        size_t n;
        memcpy(&n, c.keys.data + off, sizeof n);
        const uint8_t *key = (const uint8_t *)c.keys.data + off + sizeof n;
        if (st_chat_cold_settled(r->chat, ST_ROOM((const char *)key + skl + 1, n - skl - 1)))
            st_store_del(r->store, key, n, &w);
        else
            left++;
        off += sizeof n + n;
    }
    bool done = !left && c.n < c.max;
    st_buf_free(&c.keys);
    return done;
}

/* The remote rooms ('J') the user's list holds, each handed to the outbox as an erasure for the
 * room's group in the same batch as its entry goes (SPEC §10: that group erases the user the
 * same way, its rooms' 'p' and 'j' entries included; tombstones too: a room the user left may
 * hold its posts). A room of this group is walked by the slices ('j', 'p'): only the others' are
 * sent. True when max were handled (more may be left) or one could not be staged (tried again
 * by the next slice). */
static bool st__erase_remote(st_rooms_t *r, const char *u, size_t ul, size_t max)
{
    uint8_t k[ST__ROOMS_KEY_CAP];
    uint64_t w = 0;
    k[0] = ST__KS_REMOTE;
    memcpy(k + 1, u, ul);
    k[1 + ul] = 0;
    st_buf_t keys = {0};
    size_t n = 0;
    while (n < max && st_store_scan(r->store, k, ul + 2, st__first_val, &keys, &w) > 0) {
        size_t kl;
        memcpy(&kl, keys.data, sizeof kl);
        const uint8_t *val = (const uint8_t *)keys.data + sizeof kl + kl;
        size_t vlen = keys.len - sizeof kl - kl;
        uint16_t rl = 0;
        if (vlen >= ST__REMOTE_HDR) memcpy(&rl, val + 10, 2);
        const char *rm = (const char *)val + ST__REMOTE_HDR;
        int rc = rl && (size_t)rl + ST__REMOTE_HDR <= vlen ? st_rooms_exists(r, rm, rl, &w) : ST_OK;
        if (rc == ST_ENOTFOUND) rc = st_outbox_stage_erase(r->outbox, u, ul, rm, rl, &w);
        if (rc != ST_OK) {
            n = max; /* the entry stays: the next slice tries again */
            break;
        }
        st_store_del(r->store, keys.data + sizeof kl, kl, &w);
        st_buf_reset(&keys);
        n++;
    }
    st_buf_free(&keys);
    return n == max;
}

/* Room messages walked per slice, fewer than chat's keys: each is parsed, and each of the user's
 * becomes a tombstone (its delta, fold and count records): 64 made slices of 3–7 ms (bench/
 * loopstall.sh erase, issue 48). An indexed room's slice takes as many of the user's entries. */
#define ST__ERASE_ROOM_MSGS 16
/* The state's "last msg_id" of a room from before the index once its walk is done: its index
 * entries for the user go next (no msg_id is this high: snowflakes are 63 bits). */
#define ST__ERASE_ENTRIES UINT64_MAX

/* A room made before the author index: lim of its messages from last on, those the user posted
 * un-named (a live one a tombstone at `at`, its 'd' record written; index entries a newer binary
 * wrote for it go too); *more and *upto: where the walk goes on. */
static int st__erase_walk(st_rooms_t *r, const char *room, size_t rl, const char *u, size_t ul,
                          uint64_t last, size_t lim, int64_t at, bool *more, uint64_t *upto)
{
    uint64_t w = 0;
    const st_owner_t *ro = ST_ROOM(room, rl);
    /* raw: reads show the user's messages as tombstones already (chat's mask.c) */
    st_message_query_t q = {.conv = room, .conv_len = rl, .after = last, .limit = lim, .raw = true};
    st_authored_t a = {.u = u, .ul = ul};
    int rc = st_chat_each(r->chat, ro, &q, st__authored, &a, more, upto, &w);
    st_buf_t tmp = {0};
    for (size_t i = 0; rc == ST_OK && i < a.ids.n + a.dead.n; i++) {
        bool live = i < a.ids.n;
        st_buf_reset(&tmp);
        /* from null; a tombstone is no longer named: no count moves */
        rc = st_chat_delete_unnamed(r->chat, ro, live ? a.ids.v[i] : a.dead.v[i - a.ids.n], at,
                                    &tmp, &w);
        int64_t seq = rc == ST_OK ? st__rooms_json_seq(tmp.data, tmp.len) : 0;
        if (rc == ST_OK && live) rc = st__rooms_gone(r, room, rl, seq, &w);
        if (rc == ST_OK) rc = st__rooms_author_drop(r, room, rl, u, ul, seq, &w);
        if (rc == ST_ENOTFOUND) rc = ST_OK; /* gone by retention meanwhile */
    }
    st_buf_free(&tmp);
    st_vec_free(&a.ids);
    st_vec_free(&a.dead);
    return rc;
}

bool st__rooms_erase(void *arg, const st_owner_t *o, uint64_t erasure, size_t max)
{
    (void)erasure; /* its state is in the store, keyed by the user */
    st_rooms_t *r = arg;
    if (o->kind == ST_OWNER_ROOM) /* a room's own erasure: it was deleted */
        return st__room_deleted_slice(r, o->id, o->len, max);
    const char *u = o->id;
    size_t ul = o->len;
    uint8_t sk[ST__ROOMS_KEY_CAP], k[ST__ROOMS_KEY_CAP];
    memcpy(sk, st__rooms_erase_pre, sizeof st__rooms_erase_pre);
    memcpy(sk + sizeof st__rooms_erase_pre, u, ul);
    size_t skl = sizeof st__rooms_erase_pre + ul;
    uint64_t w = 0, last = 0;
    const void *v;
    size_t vl;
    st_buf_t room = {0};
    bool mid = st_store_get(r->store, sk, skl, &v, &vl, &w) == ST_OK && vl > 8;
    /* between rooms (first of all: right after the 202) the remote rooms go to their groups,
     * before this group's rooms are walked: the other groups mask and erase the user's posts
     * there at once, not after this group's walk (minutes for a heavy poster) */
    if (!mid && st__erase_remote(r, u, ul, max)) return true;
    if (mid) {
        last = st_be64_get(v);
        st_buf_append(&room, (const char *)v + 8, vl - 8);
    } else if (!st__erase_next_room(r, u, ul, &room)) {
        /* no room left here: its count of rooms goes; remote rooms added to its list meanwhile
         * went above */
        k[0] = ST__KS_JOINED;
        memcpy(k + 1, u, ul);
        k[1 + ul] = 0;
        st_store_del(r->store, k, ul + 2, &w);
        return !st__erase_settled(r, sk, skl, max);
    }
    size_t lim = max < ST__ERASE_ROOM_MSGS ? max : ST__ERASE_ROOM_MSGS;
    /* the deleted_at reads have shown since the 202: the same tombstone is written */
    int64_t at = 0;
    if (st_chat_erasing_at(r->chat, ST_USER(u, ul), &at, &w) != ST_OK) at = 0;
    /* the mark proves itself at every slice (authors.c): an older leader's post between two
     * slices (a rolling upgrade) leaves the room walked from its first message on, as the
     * indexed slices left the state's id at 0; a cold conversation record: fetched, again */
    bool more = false, indexed = false;
    int rc = st__rooms_indexed(r, room.data, room.len, &indexed, &w);
    if (rc != ST_OK) {
        if (rc == ST_EPARKED) st_chat_prefetch(r->chat);
        st_buf_free(&room);
        return true;
    }
    /* a room from before the index, walked to its end: the entries a newer binary wrote for the
     * user's later posts are left (those retention took were not walked; the keys name the user) */
    bool entries = !indexed && mid && last == ST__ERASE_ENTRIES;
    uint64_t upto = 0;
    /* a room whose mark proves every post has its entry: only the user's entries (authors.c);
     * any other: every message walked, then its entries */
    rc = indexed || entries
             ? st__rooms_erase_indexed(r, room.data, room.len, u, ul, at, lim, &more, &w)
             : st__erase_walk(r, room.data, room.len, u, ul, last, lim, at, &more, &upto);
    if (rc == ST_EPARKED) st_chat_prefetch(r->chat); /* a cold page: the slice comes again */
    if (rc == ST_OK && !indexed && (entries ? more : !more)) { /* the entries go next / go on */
        more = true;
        upto = ST__ERASE_ENTRIES;
    }
    st_buf_t tmp = {0};
    if (rc == ST_OK && more && (upto || indexed)) { /* this room goes on (from upto) */
        st_buf_reset(&tmp);
        uint8_t be[8];
        st_be64_put(be, upto);
        st_buf_append(&tmp, be, 8);
        st_buf_append(&tmp, room.data, room.len);
        st_store_put(r->store, sk, skl, tmp.data, tmp.len, &w);
    } else if (rc == ST_OK) { /* done with this room: the user leaves it (if in it still) */
        long who;
        st_rooms_name_t me = {u, ul, ST_ROOMS_MEMBER};
        st_buf_reset(&tmp);
        /* the erasure wins over the last-owner rule: the room may be left with no owner (a
         * global admin then manages it, or makes a member owner) */
        rc = st__rooms_change(r, room.data, room.len, NULL, 0, &me, 1, false, &who, &tmp, &w);
        if (rc == ST_ENOTFOUND) /* no such room any more: its entry in the user's list goes */
            st_store_del(r->store, k, st__rooms_pair(k, ST__KS_JOINED, u, ul, room.data, room.len),
                         &w);
        st_store_del(r->store, k, st__rooms_pair(k, ST__KS_POSTED, u, ul, room.data, room.len), &w);
        st_store_del(r->store, sk, skl, &w);
        /* the room's objects must lose the text too: waited for at the end */
        memcpy(k, sk, skl);
        k[skl] = 0;
        memcpy(k + skl + 1, room.data, room.len);
        st_store_put(r->store, k, skl + 1 + room.len, "", 0, &w);
    }
    st_buf_free(&tmp);
    st_buf_free(&room);
    return true;
}
