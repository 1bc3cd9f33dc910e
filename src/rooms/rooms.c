/* SPDX-License-Identifier: MIT */
/* Rooms (SPEC §2.1): records, membership and read markers; messages are chat's (strata/rooms.h
 * has the key layout). */
#include "strata/rooms.h"

#include "strata/outbox.h"

#include <cjson/cJSON.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

#define ST__KS_ROOM    'r'
#define ST__KS_MEMBER  'q'
#define ST__KS_JOINED  'j'
#define ST__KS_REMOTE  'J'
#define ST__KS_POSTED  'p'
#define ST__KEY_CAP    (ST_KEY_MAX + 1)
#define ST__REMOTE_HDR 12 /* a 'J' value's fixed part */

struct st_rooms {
    st_store_t *store;
    st_chat_t *chat;
    size_t max_members;
    st_observers_t observers;
    st_outbox_t *outbox; /* many groups (SPEC §10): changes for the members' groups, or NULL */
};

typedef struct {
    int64_t created, members;
} st_room_t;

typedef struct {
    int64_t joined_at, last_read;
    uint8_t role;
} st_member_t;
#define ST__MEMBER_SIZE 17

static bool st__rooms_erase(void *arg, const char *u, size_t ul, uint64_t erasure, size_t max);

int st_rooms_open(st_rooms_t **out, st_store_t *store, st_chat_t *chat, size_t max_members)
{
    /* strata/rooms.h's layout, and the erasure records below */
    static const st_claim_t keys[] = {ST_CLAIM("r"), ST_CLAIM("q"), ST_CLAIM("j"),
                                      ST_CLAIM("J"), ST_CLAIM("p"), ST_CLAIM("\0rooms_erase")};
    int rc = st_store_claims(store, "rooms", keys, sizeof keys / sizeof *keys);
    if (rc != ST_OK) return rc;
    st_rooms_t *r = st_calloc(1, sizeof *r);
    r->store = store;
    r->chat = chat;
    r->max_members = max_members ? max_members : 100000;
    st_chat_on_erase(chat, st__rooms_erase, r);
    *out = r;
    return ST_OK;
}

void st_rooms_close(st_rooms_t *r)
{
    free(r);
}

size_t st_rooms_max_members(const st_rooms_t *r)
{
    return r->max_members;
}

void st_rooms_set_outbox(st_rooms_t *r, struct st_outbox *ob)
{
    r->outbox = ob;
}

void st_rooms_observe(st_rooms_t *r, st_rooms_observer_fn fn, void *arg)
{
    st_observers_add(&r->observers, (st_observer_any_fn)fn, arg);
}

void st_rooms_unobserve(st_rooms_t *r, const void *arg)
{
    st_observers_remove(&r->observers, arg);
}

static void st__tell(st_rooms_t *r, const char *room, size_t rl, const char *user, size_t ul,
                     bool added, uint64_t wait)
{
    for (size_t i = 0; i < r->observers.n; i++)
        ((st_rooms_observer_fn)r->observers.fn[i])(r->observers.arg[i], room, rl, user, ul, added,
                                                   wait);
}

/* ---- keys ---- */

static size_t st__room_key(uint8_t *k, const char *room, size_t rl)
{
    k[0] = ST__KS_ROOM;
    memcpy(k + 1, room, rl);
    return rl + 1;
}

/* ks a 0 b', b' = b or 0x01 + SHA-256(b)[0..20) when the key would be too long. */
static size_t st__pair(uint8_t *k, char ks, const char *a, size_t al, const char *b, size_t bl)
{
    ST_ASSERT(al <= ST_CHAT_USER_MAX); /* a name (or a room's virtual user): the key fits */
    k[0] = (uint8_t)ks;
    memcpy(k + 1, a, al);
    k[1 + al] = 0;
    size_t n = al + 2;
    if (n + bl <= ST_KEY_MAX) {
        memcpy(k + n, b, bl);
        return n + bl;
    }
    uint8_t d[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)b, bl, d);
    k[n] = 1;
    memcpy(k + n + 1, d, 20);
    return n + 21;
}

/* ---- records ---- */

static int st__room_load(st_rooms_t *r, const char *room, size_t rl, st_room_t *rm,
                         const char **creator, size_t *crl, const char **name, size_t *nl,
                         uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    const void *v;
    size_t vl;
    int rc = st_store_get(r->store, k, st__room_key(k, room, rl), &v, &vl, wait);
    if (rc) return rc;
    if (vl < 19) return ST_EINTERNAL;
    const uint8_t *p = v;
    memcpy(rm, p, 16);
    uint16_t cl;
    memcpy(&cl, p + 16, 2);
    if ((size_t)cl + 19 > vl) return ST_EINTERNAL;
    if (creator) {
        *creator = (const char *)p + 19;
        *crl = cl;
    }
    if (name) {
        *name = p[18] ? (const char *)p + 19 + cl : NULL;
        *nl = vl - 19 - cl;
    }
    return ST_OK;
}

/* Rewrites the record with a new member count (the strings kept). */
static int st__room_count(st_rooms_t *r, const char *room, size_t rl, int64_t members,
                          uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    size_t kl = st__room_key(k, room, rl);
    const void *v;
    size_t vl;
    int rc = st_store_get(r->store, k, kl, &v, &vl, wait);
    if (rc) return rc;
    uint8_t *copy = st_malloc(vl);
    memcpy(copy, v, vl);
    memcpy(copy + 8, &members, 8);
    rc = st_store_put(r->store, k, kl, copy, vl, wait);
    free(copy);
    return rc;
}

static int st__member_get(st_rooms_t *r, const char *room, size_t rl, const char *user, size_t ul,
                          st_member_t *m, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    const void *v;
    size_t vl;
    int rc =
        st_store_get(r->store, k, st__pair(k, ST__KS_MEMBER, room, rl, user, ul), &v, &vl, wait);
    if (rc) return rc;
    if (vl < ST__MEMBER_SIZE) return ST_EINTERNAL;
    memcpy(&m->joined_at, v, 8);
    memcpy(&m->last_read, (const uint8_t *)v + 8, 8);
    m->role = ((const uint8_t *)v)[16];
    return ST_OK;
}

static int st__member_put(st_rooms_t *r, const char *room, size_t rl, const char *user, size_t ul,
                          const st_member_t *m, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP], v[ST__MEMBER_SIZE + ST_NAME_MAX];
    memcpy(v, &m->joined_at, 8);
    memcpy(v + 8, &m->last_read, 8);
    v[16] = m->role;
    memcpy(v + ST__MEMBER_SIZE, user, ul);
    return st_store_put(r->store, k, st__pair(k, ST__KS_MEMBER, room, rl, user, ul), v,
                        ST__MEMBER_SIZE + ul, wait);
}

/* How many rooms user is in ('j' user 0). */
static int st__user_count(st_rooms_t *r, const char *user, size_t ul, int64_t *n, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    *n = 0;
    const void *v;
    size_t vl;
    int rc = st_store_get(r->store, k, st__pair(k, ST__KS_JOINED, user, ul, "", 0), &v, &vl, wait);
    if (rc == ST_ENOTFOUND) return ST_OK;
    if (rc) return rc;
    if (vl != 8) return ST_EINTERNAL;
    memcpy(n, v, 8);
    return ST_OK;
}

/* The change for the user's group, in the batch that makes it (SPEC §10); name may be NULL. */
static int st__outbox(st_rooms_t *r, const char *room, size_t rl, const char *user, size_t ul,
                      const char *name, size_t nl, int64_t joined_at, bool added, uint64_t *wait)
{
    if (!st_outbox_on(r->outbox)) return ST_OK;
    return st_outbox_stage(r->outbox, user, ul, room, rl, name, nl, joined_at, added, wait);
}

/* Stages user's membership (role) of room (named name, or NULL), its index entry and count. */
static int st__join(st_rooms_t *r, const char *room, size_t rl, const char *name, size_t nl,
                    const char *user, size_t ul, uint8_t role, int64_t now, int64_t count,
                    uint64_t *wait)
{
    st_member_t m = {now, 0, role};
    uint8_t k[ST__KEY_CAP], v[8 + ST_NAME_MAX];
    int rc = st__member_put(r, room, rl, user, ul, &m, wait);
    memcpy(v, &now, 8);
    memcpy(v + 8, room, rl);
    if (!rc)
        rc = st_store_put(r->store, k, st__pair(k, ST__KS_JOINED, user, ul, room, rl), v, 8 + rl,
                          wait);
    count++;
    if (!rc)
        rc =
            st_store_put(r->store, k, st__pair(k, ST__KS_JOINED, user, ul, "", 0), &count, 8, wait);
    if (!rc) rc = st__outbox(r, room, rl, user, ul, name, nl, now, true, wait);
    if (!rc) st__tell(r, room, rl, user, ul, true, *wait);
    return rc;
}

static int st__leave(st_rooms_t *r, const char *room, size_t rl, const char *name, size_t nl,
                     const char *user, size_t ul, uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    int64_t count = 0;
    st_member_t m = {0};
    int rc = st__member_get(r, room, rl, user, ul, &m, wait); /* its joined_at, for the outbox */
    if (rc == ST_ENOTFOUND) rc = ST_OK;
    if (!rc) rc = st_store_del(r->store, k, st__pair(k, ST__KS_MEMBER, room, rl, user, ul), wait);
    if (!rc) rc = st_store_del(r->store, k, st__pair(k, ST__KS_JOINED, user, ul, room, rl), wait);
    if (!rc) rc = st__user_count(r, user, ul, &count, wait);
    count = count > 0 ? count - 1 : 0;
    if (!rc)
        rc =
            st_store_put(r->store, k, st__pair(k, ST__KS_JOINED, user, ul, "", 0), &count, 8, wait);
    if (!rc) rc = st__outbox(r, room, rl, user, ul, name, nl, m.joined_at, false, wait);
    if (!rc) st__tell(r, room, rl, user, ul, false, *wait);
    return rc;
}

/* The room's conversation as numbers; a room without messages yet reads as empty. */
static int st__conv(st_rooms_t *r, const char *room, size_t rl, st_chat_conv_info_t *ci, bool *any,
                    uint64_t *wait)
{
    char u[ST_CHAT_USER_MAX];
    size_t ul = st_chat_room_user(u, room, rl);
    int rc = st_chat_conv_info(r->chat, u, ul, room, rl, ci, wait);
    *any = rc == ST_OK;
    if (rc == ST_ENOTFOUND) {
        memset(ci, 0, sizeof *ci);
        rc = ST_OK;
    }
    return rc;
}

static void st__id_or_null(st_buf_t *out, uint64_t id)
{
    if (!id) {
        st_buf_puts(out, "null");
        return;
    }
    st_buf_appendc(out, '"');
    st_buf_append_u64(out, id);
    st_buf_appendc(out, '"');
}

#define ST__ERASING_MAX 256 /* pending erasures a room's member count looks at */

/* How many of the room's members are being erased: still in it until their erasure's slice
 * removes them, left out of its answers from the erasure's 202 on (SPEC §2.2). One get per
 * erasure pending (the users being erased are a handful at a time), ST__ERASING_MAX at most. */
static int st__erasing_members(st_rooms_t *r, const char *room, size_t rl, int64_t *n,
                               uint64_t *wait)
{
    st_buf_t names = {0};
    size_t cnt;
    *n = 0;
    /* bounded: with more erasures pending at once (a bulk job), the count may still include
     * some of them until the slices take them out */
    int rc = st_chat_erasing_users(r->chat, ST__ERASING_MAX, &names, &cnt, wait);
    for (size_t p = 0; rc == ST_OK && p < names.len;) {
        uint8_t l = (uint8_t)names.data[p];
        st_member_t m;
        int rc2 = st__member_get(r, room, rl, names.data + p + 1, l, &m, wait);
        if (rc2 == ST_OK)
            (*n)++;
        else if (rc2 != ST_ENOTFOUND)
            rc = rc2;
        p += 1 + (size_t)l;
    }
    st_buf_free(&names);
    return rc;
}

/* ---- the routes' operations ---- */

int st_rooms_exists(st_rooms_t *r, const char *room, size_t rl, uint64_t *wait)
{
    st_room_t rm;
    return st__room_load(r, room, rl, &rm, NULL, NULL, NULL, NULL, wait);
}

int st_rooms_role(st_rooms_t *r, const char *room, size_t rl, const char *user, size_t ul,
                  int *role, uint64_t *wait)
{
    st_member_t m;
    int rc = st__member_get(r, room, rl, user, ul, &m, wait);
    if (!rc) *role = m.role;
    return rc;
}

int st_rooms_get(st_rooms_t *r, const char *room, size_t rl, st_buf_t *out, uint64_t *wait)
{
    st_room_t rm;
    const char *name;
    size_t nl;
    int rc = st__room_load(r, room, rl, &rm, NULL, NULL, &name, &nl, wait);
    if (rc) return rc;
    /* the strings are borrowed from the store until its next call: copy the name first */
    char nm[ST_ROOMS_NAME_MAX + 1];
    bool has_name = name != NULL && nl < sizeof nm;
    if (has_name) memcpy(nm, name, nl);
    st_chat_conv_info_t ci;
    bool any;
    int64_t gone;
    if ((rc = st__conv(r, room, rl, &ci, &any, wait)) ||
        (rc = st__erasing_members(r, room, rl, &gone, wait)))
        return rc;
    st_buf_puts(out, "{\"room_id\":");
    st_buf_append_json_str(out, room, rl);
    st_buf_puts(out, ",\"name\":");
    if (has_name)
        st_buf_append_json_str(out, nm, nl);
    else
        st_buf_puts(out, "null");
    st_buf_printf(out,
                  ",\"created\":%lld,\"updated\":%lld,\"first_msg_id\":", (long long)rm.created,
                  (long long)(any ? ci.updated : rm.created));
    st__id_or_null(out, ci.first_msg_id);
    st_buf_puts(out, ",\"last_msg_id\":");
    st__id_or_null(out, ci.last_msg_id);
    st_buf_printf(out, ",\"total_messages\":%lld,\"members\":%lld}", (long long)ci.total_messages,
                  (long long)(rm.members > gone ? rm.members - gone : 0));
    return ST_OK;
}

int st_rooms_create(st_rooms_t *r, const char *room, size_t rl, const char *name, size_t nl,
                    const st_rooms_name_t *members, size_t n, const char *owner, size_t ol,
                    long *who, st_buf_t *out, uint64_t *wait)
{
    st_room_t rm;
    *who = -1;
    int rc = st__room_load(r, room, rl, &rm, NULL, NULL, NULL, NULL, wait);
    if (rc == ST_OK) return ST_EEXIST;
    if (rc != ST_ENOTFOUND) return rc;
    rc = ST_OK;
    bool owner_listed = false;
    for (size_t i = 0; i < n; i++)
        if (members[i].n == ol && memcmp(members[i].s, owner, ol) == 0) owner_listed = true;
    size_t total = n + (owner_listed ? 0 : 1);
    if (total > r->max_members) return ST_EINVAL;
    /* every user's room count first: nothing is staged when one is full */
    int64_t *counts = st_malloc((n + 1) * sizeof *counts);
    for (size_t i = 0; i <= n && !rc; i++) {
        const char *u = i < n ? members[i].s : owner;
        size_t ul = i < n ? members[i].n : ol;
        if (st_chat_erasing(r->chat, u, ul, wait)) { /* 404 from its erasure on */
            *who = i < n ? (long)i : -1;
            rc = ST_ENOTFOUND;
            break;
        }
        rc = st__user_count(r, u, ul, &counts[i], wait);
        if (!rc && counts[i] >= ST_ROOMS_USER_MAX) {
            *who = i < n ? (long)i : -1;
            rc = ST_ECONFLICT;
        }
    }
    int64_t now = st_now_us();
    if (!rc) {
        /* the record: created, members, creator, name */
        st_buf_t v = {0};
        int64_t cnt = (int64_t)total;
        uint16_t cl = (uint16_t)ol;
        uint8_t has = name != NULL;
        st_buf_append(&v, &now, 8);
        st_buf_append(&v, &cnt, 8);
        st_buf_append(&v, &cl, 2);
        st_buf_append(&v, &has, 1);
        st_buf_append(&v, owner, ol);
        if (name) st_buf_append(&v, name, nl);
        uint8_t k[ST__KEY_CAP];
        rc = st_store_put(r->store, k, st__room_key(k, room, rl), v.data, v.len, wait);
        st_buf_free(&v);
    }
    if (!rc) rc = st__join(r, room, rl, name, nl, owner, ol, ST_ROOMS_OWNER, now, counts[n], wait);
    for (size_t i = 0; i < n && !rc; i++)
        if (!(members[i].n == ol && memcmp(members[i].s, owner, ol) == 0))
            rc = st__join(r, room, rl, name, nl, members[i].s, members[i].n, ST_ROOMS_MEMBER, now,
                          counts[i], wait);
    free(counts);
    if (rc) return rc;
    return st_rooms_get(r, room, rl, out, wait);
}

int st_rooms_change(st_rooms_t *r, const char *room, size_t rl, const st_rooms_name_t *add,
                    size_t nadd, const st_rooms_name_t *remove, size_t nremove, long *who,
                    st_buf_t *out, uint64_t *wait)
{
    st_room_t rm;
    *who = -1;
    const char *nm0;
    size_t nl = 0;
    int rc = st__room_load(r, room, rl, &rm, NULL, NULL, &nm0, &nl, wait);
    if (rc) return rc;
    /* the name (for the outbox) is borrowed from the store until its next call: a copy */
    char nm[ST_ROOMS_NAME_MAX + 1];
    const char *name = nm0 && nl < sizeof nm ? nm : NULL;
    if (name) memcpy(nm, nm0, nl);
    /* what changes, checked before anything is staged */
    bool *in_add = st_calloc(nadd + 1, sizeof *in_add), *in_rm = st_calloc(nremove + 1, 1);
    int64_t *counts = st_calloc(nadd + 1, sizeof *counts);
    int64_t members = rm.members;
    st_member_t m;
    for (size_t i = 0; i < nadd && !rc; i++) {
        if (st_chat_erasing(r->chat, add[i].s, add[i].n, wait)) { /* 404 from its erasure on */
            *who = (long)i;
            rc = ST_ENOTFOUND;
            break;
        }
        rc = st__member_get(r, room, rl, add[i].s, add[i].n, &m, wait);
        if (rc == ST_OK) continue; /* a member already */
        if (rc != ST_ENOTFOUND) break;
        rc = st__user_count(r, add[i].s, add[i].n, &counts[i], wait);
        if (!rc && counts[i] >= ST_ROOMS_USER_MAX) {
            *who = (long)i;
            rc = ST_ECONFLICT;
        }
        in_add[i] = true;
        members++;
    }
    for (size_t i = 0; i < nremove && !rc; i++) {
        rc = st__member_get(r, room, rl, remove[i].s, remove[i].n, &m, wait);
        if (rc == ST_ENOTFOUND) {
            rc = ST_OK;
            continue;
        }
        in_rm[i] = true;
        members--;
    }
    if (!rc && members > (int64_t)r->max_members) rc = ST_ECONFLICT;
    int64_t now = st_now_us();
    for (size_t i = 0; i < nadd && !rc; i++)
        if (in_add[i])
            rc = st__join(r, room, rl, name, nl, add[i].s, add[i].n, ST_ROOMS_MEMBER, now,
                          counts[i], wait);
    for (size_t i = 0; i < nremove && !rc; i++)
        if (in_rm[i]) rc = st__leave(r, room, rl, name, nl, remove[i].s, remove[i].n, wait);
    if (!rc && members != rm.members) rc = st__room_count(r, room, rl, members, wait);
    free(in_add);
    free(in_rm);
    free(counts);
    int64_t gone = 0;
    if (!rc) rc = st__erasing_members(r, room, rl, &gone, wait);
    if (rc) return rc;
    st_buf_puts(out, "{\"room_id\":");
    st_buf_append_json_str(out, room, rl);
    st_buf_printf(out, ",\"members\":%lld}", (long long)(members > gone ? members - gone : 0));
    return ST_OK;
}

/* A member as the listing walks it (copied out of the store: the erasure check between the
 * walk's steps is a get of its own). */
typedef struct {
    int64_t joined_at, last_read;
    uint8_t role;
    uint16_t ul;
    char user[ST_NAME_MAX];
} st_mrow_t;

typedef struct {
    ST_VEC(st_mrow_t) rows;
    size_t want;
} st_mwalk_t;

static int st__walk_member(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_mwalk_t *w = arg;
    (void)key, (void)klen;
    if (vlen <= ST__MEMBER_SIZE || vlen > ST__MEMBER_SIZE + ST_NAME_MAX) return 0;
    if (w->rows.n == w->want) return 1;
    const uint8_t *p = val;
    st_mrow_t m = {.role = p[16], .ul = (uint16_t)(vlen - ST__MEMBER_SIZE)};
    memcpy(&m.joined_at, p, 8);
    memcpy(&m.last_read, p + 8, 8);
    memcpy(m.user, p + ST__MEMBER_SIZE, m.ul);
    st_vec_push(&w->rows, m);
    return 0;
}

/* A member being erased is left out of every answer about the room at once (SPEC §2.2), though
 * its erasure's slice removes it from the room only later: one get per member listed. */
int st_rooms_members(st_rooms_t *r, const char *room, size_t rl, const char *cursor, size_t clen,
                     size_t limit, st_buf_t *out, uint64_t *wait)
{
    int rc = st_rooms_exists(r, room, rl, wait);
    st_chat_conv_info_t ci;
    bool any;
    if (!rc) rc = st__conv(r, room, rl, &ci, &any, wait);
    if (rc) return rc;
    uint8_t pre[ST__KEY_CAP], lo[ST__KEY_CAP + 1];
    size_t pl = st__pair(pre, ST__KS_MEMBER, room, rl, "", 0), lol = 0, n = 0;
    if (cursor) { /* just after the cursor's key */
        lol = st__pair(lo, ST__KS_MEMBER, room, rl, cursor, clen);
        lo[lol++] = 0;
    }
    st_mwalk_t w = {0};
    st_mrow_t last = {0};
    bool more = false, end = false;
    st_buf_puts(out, "{\"members\":[");
    while (!more && !end) {
        /* the members still wanted and one more (is there a next page?), from lo on */
        w.rows.n = 0;
        w.want = limit - n + 1;
        rc = st_store_range(r->store, pre, pl, lol ? lo : NULL, lol, NULL, 0, false,
                            st__walk_member, &w, wait);
        if (rc < 0) break;
        rc = ST_OK;
        end = w.rows.n < w.want;
        for (size_t i = 0; i < w.rows.n && !more; i++) {
            st_mrow_t *m = &w.rows.v[i];
            if (st_chat_erasing(r->chat, m->user, m->ul, wait)) continue;
            if (n == limit) {
                more = true;
                break;
            }
            if (n++) st_buf_appendc(out, ',');
            st_buf_puts(out, "{\"user\":");
            st_buf_append_json_str(out, m->user, m->ul);
            int64_t unread = ci.last_seq - m->last_read;
            st_buf_printf(
                out, ",\"role\":\"%s\",\"joined_at\":%lld,\"last_read_seq\":%lld,\"unread\":%lld}",
                m->role == ST_ROOMS_OWNER ? "owner" : "member", (long long)m->joined_at,
                (long long)m->last_read, (long long)(unread > 0 ? unread : 0));
            last = *m;
        }
        if (!more && !end) { /* members being erased took places: on after the last walked */
            st_mrow_t *m = &w.rows.v[w.rows.n - 1];
            lol = st__pair(lo, ST__KS_MEMBER, room, rl, m->user, m->ul);
            lo[lol++] = 0;
        }
    }
    st_vec_free(&w.rows);
    if (rc < 0) return rc;
    st_buf_puts(out, "],\"next\":");
    if (more)
        st_buf_append_json_str(out, last.user, last.ul);
    else
        st_buf_puts(out, "null");
    st_buf_appendc(out, '}');
    return ST_OK;
}

/* The marker 'p' user 0 room' -> room, staged with the user's first post in the room (one get
 * on every later post): an erasure finds every room the user posted in through it, rooms it
 * left or was removed from included. */
static int st__posted(st_rooms_t *r, const char *room, size_t rl, const char *user, size_t ul,
                      uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    size_t kl = st__pair(k, ST__KS_POSTED, user, ul, room, rl);
    const void *v;
    size_t vl;
    uint64_t w = 0;
    int rc = st_store_get(r->store, k, kl, &v, &vl, &w);
    if (rc != ST_ENOTFOUND) return rc; /* ST_OK: there already (in this batch or an older one) */
    return st_store_put(r->store, k, kl, room, rl, wait);
}

int st_rooms_post(st_rooms_t *r, const char *room, size_t rl, st_message_in_t *m, st_buf_t *out,
                  uint64_t *wait)
{
    int role;
    int rc = st_rooms_exists(r, room, rl, wait);
    if (rc) return rc;
    rc = st_rooms_role(r, room, rl, m->from, m->from_len, &role, wait);
    if (rc == ST_ENOTFOUND) return ST_EFORBIDDEN; /* from must be a member */
    if (rc) return rc;
    /* a user being erased is leaving its rooms: it posts no more (SPEC §2.2) */
    if (st_chat_erased(r->chat, m->from, m->from_len)) return ST_EFORBIDDEN;
    /* the marker first: a post that then fails leaves at most a marker (one more room for an
     * erasure to walk), never a post no marker names */
    if ((rc = st__posted(r, room, rl, m->from, m->from_len, wait))) return rc;
    char u[ST_CHAT_USER_MAX]; /* m->user points here only until this returns */
    m->user = u;
    m->user_len = st_chat_room_user(u, room, rl);
    m->conv = room;
    m->conv_len = rl;
    st_buf_t tmp = {0};
    rc = st_chat_post(r->chat, m, &tmp, wait);
    if (!rc) st_chat_room_json(out, tmp.data, tmp.len);
    st_buf_free(&tmp);
    m->user = NULL;
    return rc;
}

/* A page of room messages: each renamed on its way into the page (st_chat_messages' walk). */
int st_rooms_messages(st_rooms_t *r, const char *room, size_t rl, st_message_query_t *q,
                      st_buf_t *out, uint64_t *wait)
{
    int rc = st_rooms_exists(r, room, rl, wait);
    if (rc) return rc;
    char u[ST_CHAT_USER_MAX];
    size_t ul = st_chat_room_user(u, room, rl);
    q->conv = room;
    q->conv_len = rl;
    q->as_room = true;
    return st_chat_messages(r->chat, u, ul, q, out, wait);
}

typedef struct {
    uint64_t id;
    bool found;
    st_buf_t from;
} st_author_t;

static void st__author(void *arg, uint64_t msg_id, const char *json, size_t len)
{
    st_author_t *a = arg;
    cJSON *j = msg_id == a->id ? cJSON_ParseWithLength(json, len) : NULL;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "from");
    if (cJSON_IsString(f)) {
        a->found = true;
        st_buf_puts(&a->from, f->valuestring);
    }
    cJSON_Delete(j);
}

int st_rooms_change_message(st_rooms_t *r, const char *room, size_t rl, uint64_t msg_id,
                            const st_message_edit_t *e, const char *actor, size_t al, st_buf_t *out,
                            uint64_t *wait)
{
    int rc = st_rooms_exists(r, room, rl, wait);
    if (rc) return rc;
    char u[ST_CHAT_USER_MAX];
    size_t ul = st_chat_room_user(u, room, rl);
    int role = ST_ROOMS_MEMBER;
    if (actor && (rc = st_rooms_role(r, room, rl, actor, al, &role, wait)) != ST_OK &&
        rc != ST_ENOTFOUND)
        return rc;
    if (actor && role != ST_ROOMS_OWNER) { /* the author, then: read the message's from */
        st_message_query_t q = {.conv = room, .conv_len = rl, .after = msg_id - 1, .limit = 1};
        st_author_t a = {.id = msg_id};
        bool more;
        uint64_t last;
        rc = st_chat_each(r->chat, u, ul, &q, st__author, &a, &more, &last, wait);
        bool mine = a.found && a.from.len == al && memcmp(a.from.data, actor, al) == 0;
        st_buf_free(&a.from);
        if (rc) return rc;
        if (!a.found) return ST_ENOTFOUND;
        if (!mine) return ST_EFORBIDDEN;
    }
    st_buf_t tmp = {0};
    rc = e ? st_chat_edit(r->chat, u, ul, msg_id, e, &tmp, wait)
           : st_chat_delete(r->chat, u, ul, msg_id, &tmp, wait);
    if (rc == ST_OK) st_chat_room_json(out, tmp.data, tmp.len);
    st_buf_free(&tmp);
    return rc;
}

/* ---- erasure (SPEC §2.2): an erased user's room messages become tombstones ----
 * Through chat's erase hook, in slices: the user's next room — first those it posted in ('p',
 * rooms it left or was removed from too), then those it is in ('j', which also covers posts
 * made before 'p' markers were written) — its messages walked from the state's last id (hot and
 * cold; a cold page not in memory is fetched, the slice tried again), those the user posted
 * deleted; then the user leaves that room if in it (its 'j' entry goes) and its 'p' marker
 * goes; then the next room; last the remote rooms ('J') the user's list held, each handed to the
 * outbox as an erasure for the room's group (SPEC §10: that group erases the user the same way,
 * its rooms' 'p' and 'j' entries included). State:
 * "\0rooms_erase" user -> be64 last msg_id | room. */
static const char st__erase_pre[] = "\0rooms_erase"; /* with its 0 terminator: 13 bytes */

typedef struct {
    const char *u;
    size_t ul;
    ST_VEC(uint64_t) ids;
} st_authored_t;

static void st__authored(void *arg, uint64_t msg_id, const char *json, size_t len)
{
    st_authored_t *a = arg;
    cJSON *j = cJSON_ParseWithLength(json, len);
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, "from");
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "deleted_at");
    if (cJSON_IsString(f) && strlen(f->valuestring) == a->ul &&
        memcmp(f->valuestring, a->u, a->ul) == 0 && (!d || cJSON_IsNull(d)))
        st_vec_push(&a->ids, msg_id);
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
    uint8_t k[ST__KEY_CAP];
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
    bool found = b.len > sizeof kl + kl + skip;
    if (found) st_buf_append(room, b.data + sizeof kl + kl + skip, b.len - sizeof kl - kl - skip);
    st_buf_free(&b);
    return found;
}

static bool st__rooms_erase(void *arg, const char *u, size_t ul, uint64_t erasure, size_t max)
{
    (void)erasure; /* its state is in the store, keyed by the user */
    st_rooms_t *r = arg;
    uint8_t sk[ST__KEY_CAP], k[ST__KEY_CAP];
    memcpy(sk, st__erase_pre, sizeof st__erase_pre);
    memcpy(sk + sizeof st__erase_pre, u, ul);
    size_t skl = sizeof st__erase_pre + ul;
    uint64_t w = 0, last = 0;
    const void *v;
    size_t vl;
    st_buf_t room = {0};
    if (st_store_get(r->store, sk, skl, &v, &vl, &w) == ST_OK && vl > 8) {
        last = st_be64_get(v);
        st_buf_append(&room, (const char *)v + 8, vl - 8);
    } else if (!st__erase_next_room(r, u, ul, &room)) {
        /* no room left here: its count of rooms goes, and the remote rooms its list held, each
         * with the erasure staged for the room's group in the same batch (SPEC §10: it erases
         * the user there; tombstones too: a room the user left may hold its posts) */
        k[0] = ST__KS_JOINED;
        memcpy(k + 1, u, ul);
        k[1 + ul] = 0;
        st_store_del(r->store, k, ul + 2, &w);
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
            /* a room of this group was walked above ('j', 'p'): only the others' are sent */
            int rc =
                rl && (size_t)rl + ST__REMOTE_HDR <= vlen ? st_rooms_exists(r, rm, rl, &w) : ST_OK;
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
        return n == max; /* more may be left: the next slice */
    }
    char vu[ST_CHAT_USER_MAX];
    size_t vul = st_chat_room_user(vu, room.data, room.len);
    st_message_query_t q = {.conv = room.data, .conv_len = room.len, .after = last, .limit = max};
    st_authored_t a = {.u = u, .ul = ul};
    bool more = false;
    uint64_t upto = 0;
    int rc = st_chat_each(r->chat, vu, vul, &q, st__authored, &a, &more, &upto, &w);
    st_buf_t tmp = {0};
    for (size_t i = 0; rc == ST_OK && i < a.ids.n; i++) {
        st_buf_reset(&tmp);
        rc = st_chat_delete(r->chat, vu, vul, a.ids.v[i], &tmp, &w);
        if (rc == ST_ENOTFOUND) rc = ST_OK; /* gone by retention meanwhile */
    }
    st_vec_free(&a.ids);
    if (rc == ST_EPARKED) st_chat_prefetch(r->chat);
    if (rc == ST_OK && more && upto) { /* this room goes on from upto */
        st_buf_reset(&tmp);
        uint8_t be[8];
        st_be64_put(be, upto);
        st_buf_append(&tmp, be, 8);
        st_buf_append(&tmp, room.data, room.len);
        st_store_put(r->store, sk, skl, tmp.data, tmp.len, &w);
    } else if (rc == ST_OK) { /* done with this room: the user leaves it (if in it still) */
        long who;
        st_rooms_name_t me = {u, ul};
        st_buf_reset(&tmp);
        rc = st_rooms_change(r, room.data, room.len, NULL, 0, &me, 1, &who, &tmp, &w);
        if (rc == ST_ENOTFOUND) /* no such room any more: its entry in the user's list goes */
            st_store_del(r->store, k, st__pair(k, ST__KS_JOINED, u, ul, room.data, room.len), &w);
        st_store_del(r->store, k, st__pair(k, ST__KS_POSTED, u, ul, room.data, room.len), &w);
        st_store_del(r->store, sk, skl, &w);
    }
    st_buf_free(&tmp);
    st_buf_free(&room);
    return true;
}

int st_rooms_read(st_rooms_t *r, const char *room, size_t rl, const char *user, size_t ul,
                  int64_t seq, st_buf_t *out, uint64_t *wait)
{
    int rc = st_rooms_exists(r, room, rl, wait);
    if (rc) return rc;
    st_member_t m;
    rc = st__member_get(r, room, rl, user, ul, &m, wait);
    if (rc == ST_ENOTFOUND) return ST_EFORBIDDEN;
    st_chat_conv_info_t ci;
    bool any;
    if (!rc) rc = st__conv(r, room, rl, &ci, &any, wait);
    if (rc) return rc;
    if (seq > ci.last_seq) seq = ci.last_seq; /* nothing past the last message is read */
    if (seq > m.last_read) {
        m.last_read = seq;
        if ((rc = st__member_put(r, room, rl, user, ul, &m, wait))) return rc;
    }
    int64_t unread = ci.last_seq - m.last_read;
    st_buf_puts(out, "{\"room_id\":");
    st_buf_append_json_str(out, room, rl);
    st_buf_puts(out, ",\"user\":");
    st_buf_append_json_str(out, user, ul);
    st_buf_printf(out, ",\"last_read_seq\":%lld,\"unread\":%lld}", (long long)m.last_read,
                  (long long)(unread > 0 ? unread : 0));
    return ST_OK;
}

/* ---- rooms of other groups (SPEC §10) ---- */

/* 'J' user 0 room' -> i64 joined_at | u8 live | u8 has name | u16 room length | room | name:
 * what the outbox of the room's group said last. "removed" leaves a tombstone (live 0), so a
 * change that arrives late (an older joined_at) never brings a room back. */

static void st__remote_answer(st_buf_t *out, const char *user, size_t ul, const char *room,
                              size_t rl, int64_t joined_at, bool added, bool applied)
{
    st_buf_puts(out, "{\"user\":");
    st_buf_append_json_str(out, user, ul);
    st_buf_puts(out, ",\"room_id\":");
    st_buf_append_json_str(out, room, rl);
    st_buf_printf(out, ",\"change\":\"%s\",\"joined_at\":%lld,\"applied\":%s}",
                  added ? "added" : "removed", (long long)joined_at, applied ? "true" : "false");
}

int st_rooms_remote(st_rooms_t *r, const char *user, size_t ul, const char *room, size_t rl,
                    const char *name, size_t nl, int64_t joined_at, bool added, st_buf_t *out,
                    uint64_t *wait)
{
    uint8_t k[ST__KEY_CAP];
    size_t kl = st__pair(k, ST__KS_REMOTE, user, ul, room, rl);
    const void *v;
    size_t vl;
    int rc;
    /* a membership of a user erased since it began (being erased, or its erasure asked for
     * after joined_at: the change was on its way meanwhile; a walk of the erasures since then,
     * st_chat_erased_since) is not listed; an addition sends
     * the erasure back to the room's group (a removal is that group's own doing already) */
    if (st_chat_erasing(r->chat, user, ul, wait) ||
        (added && st_chat_erased_since(r->chat, user, ul, joined_at))) {
        if (added && (rc = st_outbox_stage_erase(r->outbox, user, ul, room, rl, wait))) return rc;
        st__remote_answer(out, user, ul, room, rl, joined_at, added, false);
        return ST_OK;
    }
    rc = st_store_get(r->store, k, kl, &v, &vl, wait);
    if (rc && rc != ST_ENOTFOUND) return rc;
    bool exists = rc == ST_OK && vl >= ST__REMOTE_HDR, live = false;
    int64_t was = 0;
    if (exists) {
        memcpy(&was, v, 8);
        live = ((const uint8_t *)v)[8] != 0;
    }
    /* a removal of a user erased since (the room's group acting on the erasure sent to it):
     * nothing to mark, and no row naming the user may outlive its erasure (SPEC §2.2); a late
     * addition is caught above */
    if (!added && !exists && st_chat_erased_since(r->chat, user, ul, joined_at)) {
        st__remote_answer(out, user, ul, room, rl, joined_at, added, false);
        return ST_OK;
    }
    /* the newer membership wins; at the same joined_at a removal wins over an addition, and an
     * addition again only renames */
    bool apply = added ? !exists || was < joined_at || (was == joined_at && live)
                       : !exists || was <= joined_at;
    rc = ST_OK;
    if (apply) {
        st_buf_t b = {0};
        uint8_t l = added, has = added && name != NULL;
        uint16_t r16 = (uint16_t)rl;
        st_buf_append(&b, &joined_at, 8);
        st_buf_append(&b, &l, 1);
        st_buf_append(&b, &has, 1);
        st_buf_append(&b, &r16, 2);
        st_buf_append(&b, room, rl);
        if (has) st_buf_append(&b, name, nl);
        rc = st_store_put(r->store, k, kl, b.data, b.len, wait);
        st_buf_free(&b);
    }
    if (rc) return rc;
    st__remote_answer(out, user, ul, room, rl, joined_at, added, apply);
    return ST_OK;
}

/* ---- a user's rooms ---- */

typedef struct {
    char room[ST_NAME_MAX + 1];
    size_t rl;
    int64_t joined_at, updated;
    bool remote, has_name;
    size_t name_at, name_len; /* a remote room's name in st_ulist_t.names */
} st_uroom_t;

typedef struct {
    ST_VEC(st_uroom_t) v;
    st_buf_t names;
} st_ulist_t;

static int st__collect_room(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_ulist_t *l = arg;
    (void)key, (void)klen;
    if (vlen <= 8 || vlen > 8 + ST_NAME_MAX) return 0; /* the count has 8 bytes */
    st_uroom_t x = {.rl = vlen - 8};
    memcpy(&x.joined_at, val, 8);
    memcpy(x.room, (const uint8_t *)val + 8, x.rl);
    st_vec_push(&l->v, x);
    return 0;
}

static int st__collect_remote(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_ulist_t *l = arg;
    const uint8_t *p = val;
    (void)key, (void)klen;
    if (vlen < ST__REMOTE_HDR || !p[8]) return 0; /* a tombstone */
    uint16_t rl;
    memcpy(&rl, p + 10, 2);
    if (!rl || rl > ST_NAME_MAX || (size_t)rl + ST__REMOTE_HDR > vlen) return 0;
    st_uroom_t x = {.rl = rl, .remote = true, .has_name = p[9] != 0};
    memcpy(&x.joined_at, p, 8);
    x.updated = x.joined_at; /* no activity here: it sorts by when the user joined */
    memcpy(x.room, p + ST__REMOTE_HDR, rl);
    x.name_at = l->names.len;
    x.name_len = vlen - ST__REMOTE_HDR - rl;
    st_buf_append(&l->names, p + ST__REMOTE_HDR + rl, x.name_len);
    st_vec_push(&l->v, x);
    return 0;
}

static int st__cmp_uroom(const void *a, const void *b)
{
    const st_uroom_t *x = a, *y = b;
    if (x->updated != y->updated) return x->updated > y->updated ? -1 : 1;
    size_t n = x->rl < y->rl ? x->rl : y->rl;
    int c = memcmp(x->room, y->room, n);
    return c ? c : (x->rl > y->rl) - (x->rl < y->rl);
}

/* The user's rooms of other groups not also known here (the local entry wins). */
static int st__add_remote(st_rooms_t *r, const char *user, size_t ul, st_ulist_t *l, uint64_t *wait)
{
    uint8_t pre[ST__KEY_CAP], k[ST__KEY_CAP];
    size_t pl = st__pair(pre, ST__KS_REMOTE, user, ul, "", 0), local = l->v.n;
    int rc = st_store_scan(r->store, pre, pl, st__collect_remote, l, wait);
    if (rc < 0) return rc;
    size_t keep = local;
    for (size_t i = local; i < l->v.n; i++) {
        const void *v;
        size_t vl;
        rc = st_store_get(r->store, k,
                          st__pair(k, ST__KS_JOINED, user, ul, l->v.v[i].room, l->v.v[i].rl), &v,
                          &vl, wait);
        if (rc == ST_OK) continue;
        if (rc != ST_ENOTFOUND) return rc;
        l->v.v[keep++] = l->v.v[i];
    }
    l->v.n = keep;
    return ST_OK;
}

static void st__remote_row(st_buf_t *out, const st_ulist_t *l, const st_uroom_t *x)
{
    st_buf_puts(out, "{\"room_id\":");
    st_buf_append_json_str(out, x->room, x->rl);
    st_buf_puts(out, ",\"name\":");
    if (x->has_name)
        st_buf_append_json_str(out, l->names.data + x->name_at, x->name_len);
    else
        st_buf_puts(out, "null");
    st_buf_printf(out, ",\"joined_at\":%lld,\"remote\":true}", (long long)x->joined_at);
}

int st_rooms_of_user(st_rooms_t *r, const char *user, size_t ul, const char *cursor, size_t clen,
                     size_t limit, st_buf_t *out, uint64_t *wait)
{
    st_uroom_t cur = {0};
    if (cursor) {
        const char *colon = memchr(cursor, ':', clen);
        if (!colon || st_parse_i64(cursor, (size_t)(colon - cursor), &cur.updated) ||
            !st_name_valid(colon + 1, clen - (size_t)(colon + 1 - cursor)))
            return ST_EINVAL;
        cur.rl = clen - (size_t)(colon + 1 - cursor);
        memcpy(cur.room, colon + 1, cur.rl);
    }
    st_ulist_t l = {0};
    uint8_t pre[ST__KEY_CAP];
    size_t pl = st__pair(pre, ST__KS_JOINED, user, ul, "", 0);
    int rc = st_store_scan(r->store, pre, pl, st__collect_room, &l, wait);
    size_t local = l.v.n;
    if (rc >= 0) rc = st__add_remote(r, user, ul, &l, wait);
    /* every room's activity (the hybrid fields); a parked one is waited for after the others
     * asked for their cold footers too */
    bool parked = false;
    for (size_t i = 0; i < local && rc >= 0; i++) {
        st_chat_conv_info_t ci;
        bool any;
        st_room_t rm = {0, 0};
        int rc2 = st__conv(r, l.v.v[i].room, l.v.v[i].rl, &ci, &any, wait);
        if (rc2 == ST_EPARKED) {
            parked = true;
            continue;
        }
        if (rc2 == ST_OK && !any)
            rc2 = st__room_load(r, l.v.v[i].room, l.v.v[i].rl, &rm, NULL, NULL, NULL, NULL, wait);
        if (rc2 == ST_ENOTFOUND)
            rm.created = 0;
        else if (rc2) {
            rc = rc2;
            break;
        }
        l.v.v[i].updated = any ? ci.updated : rm.created;
    }
    if (rc >= 0 && parked) rc = ST_EPARKED;
    if (rc < 0) {
        st_vec_free(&l.v);
        st_buf_free(&l.names);
        return rc;
    }
    st_uroom_t *v = l.v.v;
    size_t n = l.v.n;
    if (n) qsort(v, n, sizeof *v, st__cmp_uroom);
    size_t i = 0, shown = 0;
    if (cursor)
        while (i < n && st__cmp_uroom(&v[i], &cur) <= 0)
            i++;
    st_buf_puts(out, "{\"rooms\":[");
    for (; i < n && shown < limit && rc >= 0; i++, shown++) {
        st_uroom_t *x = &v[i];
        if (x->remote) { /* its activity is the room's group's (the client reads it there) */
            if (shown) st_buf_appendc(out, ',');
            st__remote_row(out, &l, x);
            continue;
        }
        st_chat_conv_info_t ci;
        bool any;
        st_room_t rm = {0, 0};
        const char *name = NULL;
        size_t nl = 0;
        char nm[ST_ROOMS_NAME_MAX + 1];
        rc = st__room_load(r, x->room, x->rl, &rm, NULL, NULL, &name, &nl, wait);
        if (rc == ST_ENOTFOUND) {
            rc = ST_OK;
            name = NULL;
        }
        bool has_name = name && nl < sizeof nm;
        if (has_name) memcpy(nm, name, nl);
        if (rc >= 0) rc = st__conv(r, x->room, x->rl, &ci, &any, wait);
        if (rc < 0) break;
        if (shown) st_buf_appendc(out, ',');
        st_buf_puts(out, "{\"room_id\":");
        st_buf_append_json_str(out, x->room, x->rl);
        st_buf_puts(out, ",\"name\":");
        if (has_name)
            st_buf_append_json_str(out, nm, nl);
        else
            st_buf_puts(out, "null");
        st_buf_printf(out, ",\"joined_at\":%lld,\"last_msg_id\":", (long long)x->joined_at);
        st__id_or_null(out, ci.last_msg_id);
        /* unread from the member's marker */
        st_member_t m = {0};
        int rc3 = st__member_get(r, x->room, x->rl, user, ul, &m, wait);
        if (rc3 && rc3 != ST_ENOTFOUND) {
            rc = rc3;
            break;
        }
        int64_t unread = ci.last_seq - m.last_read;
        st_buf_printf(out, ",\"updated\":%lld,\"total_messages\":%lld,\"unread\":%lld}",
                      (long long)x->updated, (long long)ci.total_messages,
                      (long long)(unread > 0 ? unread : 0));
    }
    if (rc >= 0) {
        st_buf_puts(out, "],\"next\":");
        if (i < n && shown == limit) {
            st_buf_t c = {0};
            st_buf_printf(&c, "%lld:", (long long)v[i - 1].updated);
            st_buf_append(&c, v[i - 1].room, v[i - 1].rl);
            st_buf_append_json_str(out, c.data, c.len);
            st_buf_free(&c);
        } else {
            st_buf_puts(out, "null");
        }
        st_buf_appendc(out, '}');
        rc = ST_OK;
    }
    st_vec_free(&l.v);
    st_buf_free(&l.names);
    return rc;
}
