/* SPDX-License-Identifier: MIT */
/* Rooms of other groups (SPEC §10) and a user's room list. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

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
    uint8_t k[ST__ROOMS_KEY_CAP];
    size_t kl = st__rooms_pair(k, ST__KS_REMOTE, user, ul, room, rl);
    const void *v;
    size_t vl;
    int rc;
    /* a membership of a user erased since it began (being erased, or its erasure asked for
     * after joined_at: the change was on its way meanwhile; a walk of the erasures since then,
     * st_chat_erased_since) is not listed; an addition sends
     * the erasure back to the room's group (a removal is that group's own doing already) */
    if (st_chat_erasing(r->chat, ST_USER(user, ul), wait) ||
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

/* One room of the list: small, so that sorting 500 of them moves little; the names are in
 * st_ulist_t.names (room at room_at, then a remote room's name), room set once every room is
 * collected (the buffer no longer moves). */
typedef struct {
    const char *room;
    size_t room_at, rl;
    int64_t joined_at, updated;
    bool remote, has_name;
    size_t name_at, name_len; /* a remote room's name in st_ulist_t.names */
    st_chat_conv_info_t ci;   /* a local room's activity (zero when it has no message yet) */
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
    st_uroom_t x = {.rl = vlen - 8, .room_at = l->names.len};
    memcpy(&x.joined_at, val, 8);
    st_buf_append(&l->names, (const uint8_t *)val + 8, x.rl);
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
    x.room_at = l->names.len;
    st_buf_append(&l->names, p + ST__REMOTE_HDR, rl);
    x.name_at = l->names.len;
    x.name_len = vlen - ST__REMOTE_HDR - rl;
    st_buf_append(&l->names, p + ST__REMOTE_HDR + rl, x.name_len);
    st_vec_push(&l->v, x);
    return 0;
}

/* Points every room at its name, once the names buffer no longer moves (after a collection). */
static void st__ulist_names(st_ulist_t *l)
{
    for (size_t i = 0; i < l->v.n; i++)
        l->v.v[i].room = l->names.data + l->v.v[i].room_at;
}

#define ST__DELETING_MAX 64 /* rooms being deleted the list compares with by name */

static bool st__listed(const st_buf_t *names, const char *room, size_t rl)
{
    for (size_t p = 0; p < names->len; p += 1 + (uint8_t)names->data[p])
        if ((uint8_t)names->data[p] == rl && memcmp(names->data + p + 1, room, rl) == 0)
            return true;
    return false;
}

/* Takes the rooms being deleted out of the list: a room being deleted left every list at once
 * (SPEC §2.1 v5); its entries go in the deletion's slices. One range read of the deletions
 * pending (their markers are in the store, so this holds on every member of a group and after a
 * restart); none is the usual case and costs nothing more. With more than ST__DELETING_MAX
 * pending, each room is looked up. */
static int st__drop_deleting(st_rooms_t *r, st_ulist_t *l, uint64_t *wait)
{
    st_buf_t names = {0};
    size_t cnt;
    int rc =
        st_chat_erasing_owners(r->chat, ST_OWNER_ROOM, ST__DELETING_MAX + 1, &names, &cnt, wait);
    if (rc == ST_OK && cnt) {
        size_t kept = 0;
        for (size_t i = 0; i < l->v.n; i++) {
            const st_uroom_t *x = &l->v.v[i];
            bool gone = cnt > ST__DELETING_MAX ? st_rooms_deleting(r, x->room, x->rl, wait)
                                               : st__listed(&names, x->room, x->rl);
            if (!gone) l->v.v[kept++] = *x;
        }
        l->v.n = kept;
    }
    st_buf_free(&names);
    return rc;
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
    uint8_t pre[ST__ROOMS_KEY_CAP], k[ST__ROOMS_KEY_CAP];
    size_t pl = st__rooms_pair(pre, ST__KS_REMOTE, user, ul, "", 0), local = l->v.n;
    int rc = st_store_scan(r->store, pre, pl, st__collect_remote, l, wait);
    if (rc < 0) return rc;
    st__ulist_names(l);
    size_t keep = local;
    for (size_t i = local; i < l->v.n; i++) {
        const void *v;
        size_t vl;
        rc = st_store_get(r->store, k,
                          st__rooms_pair(k, ST__KS_JOINED, user, ul, l->v.v[i].room, l->v.v[i].rl),
                          &v, &vl, wait);
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
        cur.room = colon + 1;
    }
    st_ulist_t l = {0};
    uint8_t pre[ST__ROOMS_KEY_CAP];
    size_t pl = st__rooms_pair(pre, ST__KS_JOINED, user, ul, "", 0);
    int rc = st_store_scan(r->store, pre, pl, st__collect_room, &l, wait);
    st__ulist_names(&l);
    if (rc >= 0) rc = st__drop_deleting(r, &l, wait);
    size_t local = l.v.n;
    if (rc >= 0) rc = st__add_remote(r, user, ul, &l, wait);
    /* every room's activity (the hybrid fields, kept for the rows shown); a parked one is waited
     * for after the others asked for their cold footers too */
    bool parked = false;
    for (size_t i = 0; i < local && rc >= 0; i++) {
        st_uroom_t *x = &l.v.v[i];
        bool any;
        st_room_t rm = {0, 0};
        int rc2 = st__rooms_conv(r, x->room, x->rl, &x->ci, &any, wait);
        if (rc2 == ST_EPARKED) {
            parked = true;
            continue;
        }
        if (rc2 == ST_OK && !any)
            rc2 = st__rooms_load(r, x->room, x->rl, &rm, NULL, NULL, NULL, NULL, wait);
        if (rc2 == ST_ENOTFOUND)
            rm.created = 0;
        else if (rc2) {
            rc = rc2;
            break;
        }
        x->updated = any ? x->ci.updated : rm.created;
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
    /* the users being erased, once for the page: their posts are out of every count */
    st_buf_t erasing = {0};
    rc = st__rooms_erasing_names(r, &erasing, wait);
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
        const st_chat_conv_info_t ci = x->ci;
        st_room_t rm = {0, 0};
        const char *name = NULL;
        size_t nl = 0;
        char nm[ST_ROOMS_NAME_MAX + 1];
        rc = st__rooms_load(r, x->room, x->rl, &rm, NULL, NULL, &name, &nl, wait);
        if (rc == ST_ENOTFOUND) {
            rc = ST_OK;
            name = NULL;
        }
        bool has_name = name && nl < sizeof nm;
        if (has_name) memcpy(nm, name, nl);
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
        st__rooms_id_or_null(out, ci.last_msg_id);
        /* unread from the member's marker */
        st_member_t m = {0};
        int rc3 = st__rooms_member_get(r, x->room, x->rl, user, ul, &m, wait);
        if (rc3 && rc3 != ST_ENOTFOUND) {
            rc = rc3;
            break;
        }
        int64_t unread;
        int64_t total;
        if ((rc3 = st__rooms_unread_now(r, &erasing, x->room, x->rl, m.last_read, ci.last_seq,
                                        &unread, wait)) ||
            (rc3 = st__rooms_total_now(r, &erasing, x->room, x->rl, &ci, &total, wait))) {
            rc = rc3;
            break;
        }
        st_buf_printf(out, ",\"updated\":%lld,\"total_messages\":%lld,\"unread\":%lld}",
                      (long long)x->updated, (long long)total,
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
    st_buf_free(&erasing);
    return rc;
}
