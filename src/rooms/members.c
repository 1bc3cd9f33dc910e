/* SPDX-License-Identifier: MIT */
/* Membership changes, the member listing and read markers (SPEC §2.1). */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

int st_rooms_change(st_rooms_t *r, const char *room, size_t rl, const st_rooms_name_t *add,
                    size_t nadd, const st_rooms_name_t *remove, size_t nremove, long *who,
                    st_buf_t *out, uint64_t *wait)
{
    return st__rooms_change(r, room, rl, add, nadd, remove, nremove, true, who, out, wait);
}

int st__rooms_change(st_rooms_t *r, const char *room, size_t rl, const st_rooms_name_t *add,
                     size_t nadd, const st_rooms_name_t *remove, size_t nremove, bool keep_owner,
                     long *who, st_buf_t *out, uint64_t *wait)
{
    st_room_t rm;
    *who = -1;
    const char *nm0;
    size_t nl = 0;
    int rc = st__rooms_load(r, room, rl, &rm, NULL, NULL, &nm0, &nl, wait);
    if (rc) return rc;
    /* the name (for the outbox) is borrowed from the store until its next call: a copy */
    char nm[ST_ROOMS_NAME_MAX + 1];
    const char *name = nm0 && nl < sizeof nm ? nm : NULL;
    if (name) memcpy(nm, nm0, nl);
    /* what changes, checked before anything is staged */
    bool *in_add = st_calloc(nadd + 1, sizeof *in_add), *in_rm = st_calloc(nremove + 1, 1);
    int64_t *counts = st_calloc(nadd + 1, sizeof *counts);
    int64_t members = rm.members, owners = 0, owners_after = 0;
    st_member_t m;
    for (size_t i = 0; i < nadd && !rc; i++) {
        if (st_chat_erasing(r->chat, ST_USER(add[i].s, add[i].n),
                            wait)) { /* 404 from its erasure on */
            *who = (long)i;
            rc = ST_ENOTFOUND;
            break;
        }
        rc = st__rooms_member_get(r, room, rl, add[i].s, add[i].n, &m, wait);
        if (rc == ST_OK) continue; /* a member already */
        if (rc != ST_ENOTFOUND) break;
        rc = st__rooms_user_count(r, add[i].s, add[i].n, &counts[i], wait);
        if (!rc && counts[i] >= ST_ROOMS_USER_MAX) {
            *who = (long)i;
            rc = ST_ECONFLICT;
        }
        in_add[i] = true;
        members++;
        if (add[i].role == ST_ROOMS_OWNER) owners_after++;
    }
    bool owner_leaves = false;
    for (size_t i = 0; i < nremove && !rc; i++) {
        rc = st__rooms_member_get(r, room, rl, remove[i].s, remove[i].n, &m, wait);
        if (rc == ST_ENOTFOUND) {
            rc = ST_OK;
            continue;
        }
        in_rm[i] = true;
        members--;
        if (m.role == ST_ROOMS_OWNER) {
            owners_after--;
            owner_leaves = true;
        }
    }
    /* the last owner cannot leave (SPEC §2.1 v5): ownership passes by a role change first */
    if (!rc && owner_leaves && keep_owner) rc = st__rooms_owners(r, room, rl, &owners, wait);
    if (!rc && owner_leaves && owners > 0 && owners + owners_after <= 0) rc = ST_ELASTOWNER;
    if (!rc && members > (int64_t)r->max_members) rc = ST_ECONFLICT;
    int64_t now = st_now_us();
    for (size_t i = 0; i < nadd && !rc; i++)
        if (in_add[i])
            rc = st__rooms_join(r, room, rl, rm.created, name, nl, add[i].s, add[i].n, add[i].role,
                                now, counts[i], wait);
    for (size_t i = 0; i < nremove && !rc; i++)
        if (in_rm[i])
            rc = st__rooms_leave(r, room, rl, rm.created, name, nl, remove[i].s, remove[i].n, wait);
    if (!rc && members != rm.members) rc = st__rooms_set_count(r, room, rl, members, wait);
    free(in_add);
    free(in_rm);
    free(counts);
    int64_t gone = 0;
    if (!rc) rc = st__rooms_erasing_members(r, NULL, room, rl, &gone, wait);
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
    if (!rc) rc = st__rooms_conv(r, room, rl, &ci, &any, wait);
    if (rc) return rc;
    uint8_t pre[ST__ROOMS_KEY_CAP], lo[ST__ROOMS_KEY_CAP + 1];
    size_t pl = st__rooms_pair(pre, ST__KS_MEMBER, room, rl, "", 0), lol = 0, n = 0;
    if (cursor) { /* just after the cursor's key */
        lol = st__rooms_pair(lo, ST__KS_MEMBER, room, rl, cursor, clen);
        lo[lol++] = 0;
    }
    st_mwalk_t w = {0};
    st_mrow_t last = {0};
    /* the users being erased, once for the page: their posts are out of every unread */
    st_buf_t erasing = {0};
    if ((rc = st__rooms_erasing_names(r, &erasing, wait))) {
        st_buf_free(&erasing); /* a part may have been read */
        return rc;
    }
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
            if (st_chat_erasing(r->chat, ST_USER(m->user, m->ul), wait)) continue;
            if (n == limit) {
                more = true;
                break;
            }
            if (n++) st_buf_appendc(out, ',');
            st_buf_puts(out, "{\"user\":");
            st_buf_append_json_str(out, m->user, m->ul);
            int64_t unread;
            if ((rc = st__rooms_unread_now(r, &erasing, room, rl, m->last_read, ci.last_seq,
                                           &unread, wait)))
                break;
            st_buf_printf(
                out, ",\"role\":\"%s\",\"joined_at\":%lld,\"last_read_seq\":%lld,\"unread\":%lld}",
                st_rooms_role_name(m->role), (long long)m->joined_at, (long long)m->last_read,
                (long long)(unread > 0 ? unread : 0));
            last = *m;
        }
        if (rc < 0) break;
        if (!more && !end) { /* members being erased took places: on after the last walked */
            st_mrow_t *m = &w.rows.v[w.rows.n - 1];
            lol = st__rooms_pair(lo, ST__KS_MEMBER, room, rl, m->user, m->ul);
            lo[lol++] = 0;
        }
    }
    st_vec_free(&w.rows);
    st_buf_free(&erasing);
    if (rc < 0) return rc;
    st_buf_puts(out, "],\"next\":");
    if (more)
        st_buf_append_json_str(out, last.user, last.ul);
    else
        st_buf_puts(out, "null");
    st_buf_appendc(out, '}');
    return ST_OK;
}

int st_rooms_set_role(st_rooms_t *r, const char *room, size_t rl, const char *user, size_t ul,
                      int role, bool *not_member, st_buf_t *out, uint64_t *wait)
{
    *not_member = false;
    int rc = st_rooms_exists(r, room, rl, wait);
    if (rc) return rc;
    st_member_t m;
    rc = st__rooms_member_get(r, room, rl, user, ul, &m, wait);
    /* a member being erased is gone for every answer (SPEC §2.2) */
    if (rc == ST_ENOTFOUND || (!rc && st_chat_erasing(r->chat, ST_USER(user, ul), wait))) {
        *not_member = true;
        return ST_ENOTFOUND;
    }
    if (rc) return rc;
    if (m.role != role) {
        int64_t owners = 0;
        if (m.role == ST_ROOMS_OWNER) {
            if ((rc = st__rooms_owners(r, room, rl, &owners, wait))) return rc;
            if (owners <= 1) return ST_ELASTOWNER;
        }
        int64_t delta = role == ST_ROOMS_OWNER ? 1 : m.role == ST_ROOMS_OWNER ? -1 : 0;
        if (delta && (rc = st__rooms_owners_add(r, room, rl, delta, wait))) return rc;
        m.role = (uint8_t)role;
        if ((rc = st__rooms_member_put(r, room, rl, user, ul, &m, wait))) return rc;
    }
    st_chat_conv_info_t ci;
    bool any;
    if ((rc = st__rooms_conv(r, room, rl, &ci, &any, wait))) return rc;
    int64_t unread;
    if ((rc = st__rooms_unread_now(r, NULL, room, rl, m.last_read, ci.last_seq, &unread, wait)))
        return rc;
    st_buf_puts(out, "{\"user\":");
    st_buf_append_json_str(out, user, ul);
    st_buf_printf(out,
                  ",\"role\":\"%s\",\"joined_at\":%lld,\"last_read_seq\":%lld,\"unread\":%lld}",
                  st_rooms_role_name(m.role), (long long)m.joined_at, (long long)m.last_read,
                  (long long)(unread > 0 ? unread : 0));
    return ST_OK;
}

int st__rooms_read_to(st_rooms_t *r, const char *room, size_t rl, const char *user, size_t ul,
                      int64_t seq, uint64_t *wait)
{
    st_member_t m;
    int rc = st__rooms_member_get(r, room, rl, user, ul, &m, wait);
    if (rc == ST_ENOTFOUND) return ST_OK;
    if (rc || seq <= m.last_read) return rc;
    m.last_read = seq;
    return st__rooms_member_put(r, room, rl, user, ul, &m, wait);
}

int st_rooms_read(st_rooms_t *r, const char *room, size_t rl, const char *user, size_t ul,
                  int64_t seq, st_buf_t *out, uint64_t *wait)
{
    int rc = st_rooms_exists(r, room, rl, wait);
    if (rc) return rc;
    st_member_t m;
    rc = st__rooms_member_get(r, room, rl, user, ul, &m, wait);
    if (rc == ST_ENOTFOUND) return ST_EFORBIDDEN;
    st_chat_conv_info_t ci;
    bool any;
    if (!rc) rc = st__rooms_conv(r, room, rl, &ci, &any, wait);
    if (rc) return rc;
    if (seq > ci.last_seq) seq = ci.last_seq; /* nothing past the last message is read */
    if (seq > m.last_read) {
        m.last_read = seq;
        if ((rc = st__rooms_member_put(r, room, rl, user, ul, &m, wait))) return rc;
    }
    int64_t unread;
    if ((rc = st__rooms_unread_now(r, NULL, room, rl, m.last_read, ci.last_seq, &unread, wait)))
        return rc;
    st_buf_puts(out, "{\"room_id\":");
    st_buf_append_json_str(out, room, rl);
    st_buf_puts(out, ",\"user\":");
    st_buf_append_json_str(out, user, ul);
    st_buf_printf(out, ",\"last_read_seq\":%lld,\"unread\":%lld}", (long long)m.last_read,
                  (long long)(unread > 0 ? unread : 0));
    return ST_OK;
}
