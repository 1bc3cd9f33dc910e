/* SPDX-License-Identifier: MIT */
/* Rooms' records as every file of the module reads and stages them: keys, room and member
 * records, the counts, joining and leaving, and what a room's answer shows. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <openssl/sha.h>

#include <stdlib.h>
#include <string.h>

void st__rooms_tell(st_rooms_t *r, const char *room, size_t rl, const char *user, size_t ul,
                    bool added, uint64_t wait)
{
    for (size_t i = 0; i < r->observers.n; i++)
        ((st_rooms_observer_fn)r->observers.fn[i])(r->observers.arg[i], room, rl, user, ul, added,
                                                   wait);
}

/* ---- keys ---- */

size_t st__rooms_key(uint8_t *k, const char *room, size_t rl)
{
    k[0] = ST__KS_ROOM;
    memcpy(k + 1, room, rl);
    return rl + 1;
}

/* ks a 0 b', b' = b or 0x01 + SHA-256(b)[0..20) when the key would be too long. */
size_t st__rooms_pair(uint8_t *k, char ks, const char *a, size_t al, const char *b, size_t bl)
{
    ST_ASSERT(al <= ST_NAME_MAX); /* a name: the key fits */
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

int st__rooms_load(st_rooms_t *r, const char *room, size_t rl, st_room_t *rm, const char **creator,
                   size_t *crl, const char **name, size_t *nl, uint64_t *wait)
{
    uint8_t k[ST__ROOMS_KEY_CAP];
    const void *v;
    size_t vl;
    int rc = st_store_get(r->store, k, st__rooms_key(k, room, rl), &v, &vl, wait);
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
int st__rooms_set_count(st_rooms_t *r, const char *room, size_t rl, int64_t members, uint64_t *wait)
{
    uint8_t k[ST__ROOMS_KEY_CAP];
    size_t kl = st__rooms_key(k, room, rl);
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

int st__rooms_member_get(st_rooms_t *r, const char *room, size_t rl, const char *user, size_t ul,
                         st_member_t *m, uint64_t *wait)
{
    uint8_t k[ST__ROOMS_KEY_CAP];
    const void *v;
    size_t vl;
    int rc = st_store_get(r->store, k, st__rooms_pair(k, ST__KS_MEMBER, room, rl, user, ul), &v,
                          &vl, wait);
    if (rc) return rc;
    if (vl < ST__MEMBER_SIZE) return ST_EINTERNAL;
    memcpy(&m->joined_at, v, 8);
    memcpy(&m->last_read, (const uint8_t *)v + 8, 8);
    m->role = ((const uint8_t *)v)[16];
    return ST_OK;
}

int st__rooms_member_put(st_rooms_t *r, const char *room, size_t rl, const char *user, size_t ul,
                         const st_member_t *m, uint64_t *wait)
{
    uint8_t k[ST__ROOMS_KEY_CAP], v[ST__MEMBER_SIZE + ST_NAME_MAX];
    memcpy(v, &m->joined_at, 8);
    memcpy(v + 8, &m->last_read, 8);
    v[16] = m->role;
    memcpy(v + ST__MEMBER_SIZE, user, ul);
    return st_store_put(r->store, k, st__rooms_pair(k, ST__KS_MEMBER, room, rl, user, ul), v,
                        ST__MEMBER_SIZE + ul, wait);
}

/* How many rooms user is in ('j' user 0). */
int st__rooms_user_count(st_rooms_t *r, const char *user, size_t ul, int64_t *n, uint64_t *wait)
{
    uint8_t k[ST__ROOMS_KEY_CAP];
    *n = 0;
    const void *v;
    size_t vl;
    int rc =
        st_store_get(r->store, k, st__rooms_pair(k, ST__KS_JOINED, user, ul, "", 0), &v, &vl, wait);
    if (rc == ST_ENOTFOUND) return ST_OK;
    if (rc) return rc;
    if (vl != 8) return ST_EINTERNAL;
    memcpy(n, v, 8);
    return ST_OK;
}

/* The change for the user's group, in the batch that makes it (SPEC §10); name may be NULL. */
int st__rooms_outbox(st_rooms_t *r, const char *room, size_t rl, const char *user, size_t ul,
                     const char *name, size_t nl, int64_t joined_at, bool added, uint64_t *wait)
{
    if (!st_outbox_on(r->outbox)) return ST_OK;
    return st_outbox_stage(r->outbox, user, ul, room, rl, name, nl, joined_at, added, wait);
}

static int st__count_owner(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)key, (void)klen;
    if (vlen >= ST__MEMBER_SIZE && ((const uint8_t *)val)[16] == ST_ROOMS_OWNER)
        (*(int64_t *)arg)++;
    return 0;
}

int st__rooms_owners(st_rooms_t *r, const char *room, size_t rl, int64_t *n, uint64_t *wait)
{
    uint8_t k[ST__ROOMS_KEY_CAP];
    size_t kl = st__rooms_key(k, room, rl);
    k[0] = ST__KS_OWNERS;
    const void *v;
    size_t vl;
    int rc = st_store_get(r->store, k, kl, &v, &vl, wait);
    if (rc == ST_OK) {
        if (vl != 8) return ST_EINTERNAL;
        memcpy(n, v, 8);
        return ST_OK;
    }
    if (rc != ST_ENOTFOUND) return rc;
    /* a room from before roles were counted: once, from its members (--max-room-members) */
    *n = 0;
    size_t pl = st__rooms_pair(k, ST__KS_MEMBER, room, rl, "", 0);
    rc = st_store_scan(r->store, k, pl, st__count_owner, n, wait);
    return rc < 0 ? rc : ST_OK;
}

int st__rooms_owners_add(st_rooms_t *r, const char *room, size_t rl, int64_t delta, uint64_t *wait)
{
    int64_t n;
    int rc = st__rooms_owners(r, room, rl, &n, wait);
    if (rc) return rc;
    n += delta;
    if (n < 0) n = 0;
    uint8_t k[ST__ROOMS_KEY_CAP];
    size_t kl = st__rooms_key(k, room, rl);
    k[0] = ST__KS_OWNERS;
    return st_store_put(r->store, k, kl, &n, 8, wait);
}

static size_t st__gone_key(uint8_t *k, const char *room, size_t rl, int64_t seq)
{
    size_t n = st__rooms_pair(k, ST__KS_GONE, room, rl, "", 0);
    st_be64_put(k + n, (uint64_t)seq);
    return n + 8;
}

int st__rooms_gone(st_rooms_t *r, const char *room, size_t rl, int64_t seq, uint64_t *wait)
{
    if (seq <= 0) return ST_OK;
    uint8_t k[ST__ROOMS_KEY_CAP];
    return st_store_put(r->store, k, st__gone_key(k, room, rl, seq), "", 0, wait);
}

static int st__records_count_key(void *arg, const void *key, size_t klen, const void *val,
                                 size_t vlen)
{
    (void)key, (void)klen, (void)val, (void)vlen;
    (*(int64_t *)arg)++;
    return 0;
}

int st__rooms_unread(st_rooms_t *r, const char *room, size_t rl, int64_t last_read,
                     int64_t last_seq, int64_t *n, uint64_t *wait)
{
    *n = 0;
    if (last_seq <= last_read) return ST_OK;
    uint8_t pre[ST__ROOMS_KEY_CAP], lo[ST__ROOMS_KEY_CAP];
    size_t pl = st__rooms_pair(pre, ST__KS_GONE, room, rl, "", 0);
    size_t ll = st__gone_key(lo, room, rl, last_read + 1);
    int64_t gone = 0;
    int rc = st_store_range(r->store, pre, pl, lo, ll, NULL, 0, false, st__records_count_key, &gone,
                            wait);
    if (rc < 0) return rc;
    *n = last_seq - last_read - gone;
    if (*n < 0) *n = 0;
    return ST_OK;
}

int st__rooms_unread_now(st_rooms_t *r, const st_buf_t *erasing, const char *room, size_t rl,
                         int64_t last_read, int64_t last_seq, int64_t *n, uint64_t *wait)
{
    int rc = st__rooms_unread(r, room, rl, last_read, last_seq, n, wait);
    if (rc || *n <= 0) return rc;
    st_buf_t own = {0};
    if (!erasing) {
        rc = st__rooms_erasing_names(r, &own, wait);
        erasing = &own;
    }
    int64_t theirs = 0;
    if (!rc && erasing->len)
        rc = st__rooms_erasing_posts(r, erasing, room, rl, last_read, 0, &theirs, wait);
    st_buf_free(&own);
    *n -= theirs;
    if (*n < 0) *n = 0;
    return rc;
}

int st__rooms_total_now(st_rooms_t *r, const st_buf_t *erasing, const char *room, size_t rl,
                        const st_chat_conv_info_t *ci, int64_t *n, uint64_t *wait)
{
    *n = ci->total_messages;
    if (*n <= 0) return ST_OK;
    st_buf_t own = {0};
    int rc = ST_OK;
    if (!erasing) {
        rc = st__rooms_erasing_names(r, &own, wait);
        erasing = &own;
    }
    int64_t theirs = 0;
    if (!rc && erasing->len)
        rc = st__rooms_erasing_posts(r, erasing, room, rl, 0, ci->first_msg_id, &theirs, wait);
    st_buf_free(&own);
    *n -= theirs;
    if (*n < 0) *n = 0;
    return rc;
}

int64_t st__rooms_json_seq(const char *json, size_t len)
{
    cJSON *j = cJSON_ParseWithLength(json, len);
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "seq");
    int64_t seq = cJSON_IsNumber(s) ? (int64_t)s->valuedouble : 0;
    cJSON_Delete(j);
    return seq;
}

/* The read marker a poster left this incarnation of the room with ('p'), else 0. */
static int st__rooms_left_marker(st_rooms_t *r, const char *room, size_t rl, int64_t created,
                                 const char *user, size_t ul, int64_t *last_read, uint64_t *wait)
{
    uint8_t k[ST__ROOMS_KEY_CAP];
    const uint8_t *v;
    size_t vl;
    int64_t c;
    *last_read = 0;
    if (created <= 0) return ST_OK; /* a room being made: nobody left it */
    int rc = st_store_get(r->store, k, st__rooms_pair(k, ST__KS_POSTED, user, ul, room, rl),
                          (const void **)&v, &vl, wait);
    if (rc == ST_ENOTFOUND) return ST_OK;
    if (rc || vl <= ST__LEFT_SIZE || v[0] != ST__LEFT_TAG) return rc;
    memcpy(&c, v + 1, 8);
    if (c == created) memcpy(last_read, v + 9, 8);
    return ST_OK;
}

/* Stages user's membership (role) of room (named name, or NULL), its index entry and count. */
int st__rooms_join(st_rooms_t *r, const char *room, size_t rl, int64_t created, const char *name,
                   size_t nl, const char *user, size_t ul, uint8_t role, int64_t now, int64_t count,
                   uint64_t *wait)
{
    st_member_t m = {now, 0, role};
    uint8_t k[ST__ROOMS_KEY_CAP], v[8 + ST_NAME_MAX];
    /* back in a room it posted in: its marker is where it was (its own posts are not unread) */
    int rc = st__rooms_left_marker(r, room, rl, created, user, ul, &m.last_read, wait);
    /* the count first: a room from before counts its owners from the members staged so far */
    if (!rc && role == ST_ROOMS_OWNER) rc = st__rooms_owners_add(r, room, rl, 1, wait);
    if (!rc) rc = st__rooms_member_put(r, room, rl, user, ul, &m, wait);
    memcpy(v, &now, 8);
    memcpy(v + 8, room, rl);
    if (!rc)
        rc = st_store_put(r->store, k, st__rooms_pair(k, ST__KS_JOINED, user, ul, room, rl), v,
                          8 + rl, wait);
    count++;
    if (!rc)
        rc = st_store_put(r->store, k, st__rooms_pair(k, ST__KS_JOINED, user, ul, "", 0), &count, 8,
                          wait);
    if (!rc) rc = st__rooms_outbox(r, room, rl, user, ul, name, nl, now, true, wait);
    if (!rc) st__rooms_tell(r, room, rl, user, ul, true, *wait);
    return rc;
}

/* A member whose marker moved (it may have posted here) keeps it in its 'p' entry: its erasure
 * finds the room through it, and a later return takes the marker back. */
static int st__rooms_keep_marker(st_rooms_t *r, const char *room, size_t rl, int64_t created,
                                 const char *user, size_t ul, int64_t last_read, uint64_t *wait)
{
    uint8_t k[ST__ROOMS_KEY_CAP], v[ST__LEFT_SIZE + ST_NAME_MAX] = {ST__LEFT_TAG};
    if (created <= 0) return ST_OK; /* the room is being deleted: nothing to come back to */
    size_t kl = st__rooms_pair(k, ST__KS_POSTED, user, ul, room, rl);
    memcpy(v + 1, &created, 8);
    memcpy(v + 9, &last_read, 8);
    memcpy(v + ST__LEFT_SIZE, room, rl);
    return st_store_put(r->store, k, kl, v, ST__LEFT_SIZE + rl, wait);
}

int st__rooms_leave(st_rooms_t *r, const char *room, size_t rl, int64_t created, const char *name,
                    size_t nl, const char *user, size_t ul, uint64_t *wait)
{
    uint8_t k[ST__ROOMS_KEY_CAP];
    int64_t count = 0;
    st_member_t m = {0};
    int rc =
        st__rooms_member_get(r, room, rl, user, ul, &m, wait); /* its joined_at, for the outbox */
    bool member = rc == ST_OK;
    if (rc == ST_ENOTFOUND) rc = ST_OK;
    if (!rc && member && m.role == ST_ROOMS_OWNER) rc = st__rooms_owners_add(r, room, rl, -1, wait);
    if (!rc && member && m.last_read > 0)
        rc = st__rooms_keep_marker(r, room, rl, created, user, ul, m.last_read, wait);
    if (!rc)
        rc = st_store_del(r->store, k, st__rooms_pair(k, ST__KS_MEMBER, room, rl, user, ul), wait);
    if (!rc)
        rc = st_store_del(r->store, k, st__rooms_pair(k, ST__KS_JOINED, user, ul, room, rl), wait);
    if (!rc) rc = st__rooms_user_count(r, user, ul, &count, wait);
    count = count > 0 ? count - 1 : 0;
    if (!rc)
        rc = st_store_put(r->store, k, st__rooms_pair(k, ST__KS_JOINED, user, ul, "", 0), &count, 8,
                          wait);
    if (!rc) rc = st__rooms_outbox(r, room, rl, user, ul, name, nl, m.joined_at, false, wait);
    if (!rc) st__rooms_tell(r, room, rl, user, ul, false, *wait);
    return rc;
}

/* The room's conversation as numbers; a room without messages yet reads as empty. */
int st__rooms_conv(st_rooms_t *r, const char *room, size_t rl, st_chat_conv_info_t *ci, bool *any,
                   uint64_t *wait)
{
    int rc = st_chat_conv_info(r->chat, ST_ROOM(room, rl), room, rl, ci, wait);
    *any = rc == ST_OK;
    if (rc == ST_ENOTFOUND) {
        memset(ci, 0, sizeof *ci);
        rc = ST_OK;
    }
    return rc;
}

void st__rooms_id_or_null(st_buf_t *out, uint64_t id)
{
    if (!id) {
        st_buf_puts(out, "null");
        return;
    }
    st_buf_appendc(out, '"');
    st_buf_append_u64(out, id);
    st_buf_appendc(out, '"');
}

/* How many of the room's members are being erased: still in it until their erasure's slice
 * removes them, left out of its answers from the erasure's 202 on (SPEC §2.2). One get per
 * erasure pending (the users being erased are a handful at a time), ST__ERASING_MAX at most. */
int st__rooms_erasing_members(st_rooms_t *r, const st_buf_t *erasing, const char *room, size_t rl,
                              int64_t *n, uint64_t *wait)
{
    st_buf_t own = {0};
    *n = 0;
    int rc = ST_OK;
    if (!erasing) {
        rc = st__rooms_erasing_names(r, &own, wait);
        erasing = &own;
    }
    for (size_t p = 0; rc == ST_OK && p < erasing->len;) {
        uint8_t l = (uint8_t)erasing->data[p];
        st_member_t m;
        int rc2 = st__rooms_member_get(r, room, rl, erasing->data + p + 1, l, &m, wait);
        if (rc2 == ST_OK)
            (*n)++;
        else if (rc2 != ST_ENOTFOUND)
            rc = rc2;
        p += 1 + (size_t)l;
    }
    st_buf_free(&own);
    return rc;
}
