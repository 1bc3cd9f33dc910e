/* SPDX-License-Identifier: MIT */
/*
 * Room presence (SPEC §2.1 v5): a member of a room is online while it holds a stream subscribed
 * to the room (topic "room") on any member of the group. Ephemeral: memory only, nothing stored
 * per connect or disconnect, nothing replayed.
 *
 * Each member counts its own subscriptions per (room, user) (topics.c calls st__ws_presence_add
 * when a room subscription joins its channel and st__ws_presence_drop when it leaves it, however
 * it ends: unsubscribe, close, ping timeout, removal, erasure, a deleted room). In a group it
 * tells the other members its part: the changes as they happen (POST /v1/cluster/presence, the
 * changes of one moment in one body) and every ST__PRES_EVERY_MS all of it again; a member's
 * entries that are not said again within ST__PRES_EXPIRE_MS go (a member that crashed), and a
 * member that comes back with another boot nonce replaces what it said before. A user is online
 * when any member has it; that is what GET …/presence lists and what the frames say.
 *
 * Frames: {"type":"presence","id","room_id","user","online"} to the room's subscribers here when
 * the group-wide state changes, at most one per user per room per second (a user that comes and
 * goes faster is coalesced: the next frame says the state it is in by then, and none leaves when
 * it is back where the last frame said).
 *
 * Bounds: at most `cap` (room, user) entries (4 x --max-connections, at least 1024), and one
 * user counted online in at most ST__PRES_USER_MAX rooms of this node; a room subscription that
 * would pass either is refused (too_many_requests, st__ws_presence_room_for), so no principal
 * fills the table and hides the others. Announcements
 * go through typing.c's bounded queue (st__ws_peers_post); one that is dropped is repaired by the
 * next full announcement.
 */
#include "internal.h"

#include "strata/chat.h"
#include "strata/config.h"
#include "strata/repl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define ST__PRES_EVERY_MS  2000 /* a full announcement to the other members */
#define ST__PRES_USER_MAX  1024 /* rooms one user may be counted online in on this node */
#define ST__PRES_EXPIRE_MS (3 * ST__PRES_EVERY_MS) /* a member's entries not said again go */
#define ST__PRES_FRAME_MS  1000                    /* one frame per user per room per second */
#define ST__PRES_BATCH_MS  10                      /* the changes of one moment leave together */
#define ST__PRES_CHUNK     (256u * 1024)           /* bytes of entries in one announcement */
#define ST__PRES_PATH      "/v1/cluster/presence"

typedef struct st_wspres_room st_wspres_room_t;

/* One (room, user): this member's count and the other members' word on it. */
typedef struct {
    st_map_node_t node; /* in its room's users, by name */
    st_list_t dlink;    /* in p->dirty while a frame or an announcement may be owed, or in
                         * room->held while its frame waits for the room's job (held) */
    st_list_t flink;    /* in room->flying while its last frame is in the room's job (presout.c) */
    st_wspres_room_t *room;
    uint32_t local;                     /* this member's subscriptions */
    uint64_t seen[ST_REPL_MAX_MEMBERS]; /* per peer slot: loop ms it last said online, 0: not */
    uint64_t frame_ms; /* loop ms the last frame about it went to its last subscriber (0: none) */
    uint64_t changed;  /* p->changes at its last change a frame is owed for */
    bool shown;        /* what the last frame said */
    bool announced;    /* what the other members were last told (local > 0) */
    bool held;         /* dlink is in room->held, not p->dirty */
    size_t ul;
    char user[];
} st_wspres_user_t;

struct st_wspres_room {
    st_map_node_t node; /* in p->rooms */
    st_map_t users;     /* st_wspres_user_t */
    st_list_t held;     /* users whose frame waits for the room's job to be out */
    st_list_t flying;   /* users whose frame is in the room's job */
    size_t rl;
    char room[];
};

typedef struct {
    uint64_t id; /* 0: a free slot */
    char nonce[33];
} st_wspres_peer_t;

typedef ST_VEC(st_wspres_user_t *) st_wspres_vec_t;

/* How many rooms this node counts a user online in (its local entries): one principal may not
 * fill the table and hide everyone else (ST__PRES_USER_MAX). */
typedef struct {
    st_map_node_t node; /* in p->locals */
    size_t n;
    char user[];
} st__pres_local_t;

struct st_wspres {
    st_ws_t *ws;
    st_map_t rooms;         /* st_wspres_room_t */
    st_map_t locals;        /* st__pres_local_t */
    size_t n, cap;          /* entries, and the most kept */
    st_metric_t *m_entries; /* strata_presence_entries: n, set as it moves */
    uint64_t changes; /* changes a frame was owed for, so far: a subscription that joins now is
                       * told of those after it only (presout.c) */
    st_list_t dirty;
    uv_timer_t flush, tick;
    int handles; /* timers not closed yet: p is freed with the last */
    st_wspres_peer_t peers[ST_REPL_MAX_MEMBERS];
    char nonce[33]; /* this boot's */
};

static bool st__pres_peer_any(const st_wspres_user_t *u)
{
    for (size_t i = 0; i < ST_REPL_MAX_MEMBERS; i++)
        if (u->seen[i]) return true;
    return false;
}

static bool st__pres_online(const st_wspres_user_t *u)
{
    return u->local > 0 || st__pres_peer_any(u);
}

static size_t st__pres_locals(st_wspres_t *p, const char *user, size_t ul)
{
    st__pres_local_t *l = (st__pres_local_t *)st_map_get(&p->locals, user, ul);
    return l ? l->n : 0;
}

/* A user's local entries move by d (+1 or -1). */
static void st__pres_local(st_wspres_t *p, const char *user, size_t ul, int d)
{
    st__pres_local_t *l = (st__pres_local_t *)st_map_get(&p->locals, user, ul);
    if (!l) {
        if (d < 0) return;
        l = st_calloc(1, sizeof *l + ul + 1);
        memcpy(l->user, user, ul);
        l->node.key = l->user;
        l->node.klen = ul;
        st_map_insert(&p->locals, &l->node);
    }
    if (d < 0 && --l->n == 0) {
        st_map_remove(&p->locals, &l->node);
        free(l);
    } else if (d > 0) {
        l->n++;
    }
}

static st_wspres_user_t *st__pres_find(st_wspres_t *p, const char *room, size_t rl,
                                       const char *user, size_t ul, bool create)
{
    st_wspres_room_t *r = (st_wspres_room_t *)st_map_get(&p->rooms, room, rl);
    if (r) {
        st_map_node_t *n = st_map_get(&r->users, user, ul);
        if (n) return (st_wspres_user_t *)n;
    }
    if (!create || p->n >= p->cap) return NULL;
    if (!r) {
        r = st_calloc(1, sizeof *r + rl + 1);
        memcpy(r->room, room, rl);
        r->rl = rl;
        r->node.key = r->room;
        r->node.klen = rl;
        st_map_init(&r->users);
        st_list_init(&r->held);
        st_list_init(&r->flying);
        st_map_insert(&p->rooms, &r->node);
    }
    st_wspres_user_t *u = st_calloc(1, sizeof *u + ul + 1);
    memcpy(u->user, user, ul);
    u->ul = ul;
    u->room = r;
    u->node.key = u->user;
    u->node.klen = ul;
    st_map_insert(&r->users, &u->node);
    st_metric_set(p->m_entries, (double)++p->n);
    return u;
}

static void st__pres_free_user(st_wspres_t *p, st_wspres_user_t *u)
{
    st_wspres_room_t *r = u->room;
    if (st_list_linked(&u->dlink)) st_list_unlink(&u->dlink);
    if (st_list_linked(&u->flink)) st_list_unlink(&u->flink);
    st_map_remove(&r->users, &u->node);
    free(u);
    st_metric_set(p->m_entries, (double)--p->n);
    if (r->users.count == 0) {
        st_map_remove(&p->rooms, &r->node);
        st_map_free(&r->users);
        free(r);
    }
}

/* Nothing is left of u and nothing is owed about it (but perhaps its frame's second). */
static bool st__pres_idle(const st_wspres_user_t *u)
{
    return !u->local && !u->shown && !u->announced && !st_list_linked(&u->flink) &&
           !st__pres_peer_any(u);
}

static void st__pres_on_flush(uv_timer_t *t);

/* Frees u once nothing is left of it and nothing is owed about it. Not within a second of its
 * last frame: the entry remembers when that was, and a user that comes back at once would
 * otherwise be a new entry whose frame leaves at once (two frames about it within the second);
 * it waits among the dirty, and the flush frees it when its second is up. */
static void st__pres_gc(st_wspres_t *p, st_wspres_user_t *u)
{
    if (!st__pres_idle(u) || st_list_linked(&u->dlink)) return;
    uint64_t since = uv_now(p->ws->loop) - u->frame_ms;
    if (u->frame_ms && since < ST__PRES_FRAME_MS) {
        st_list_insert(&p->dirty, &u->dlink);
        if (!uv_is_active((uv_handle_t *)&p->flush))
            uv_timer_start(&p->flush, st__pres_on_flush, ST__PRES_FRAME_MS - since, 0);
        return;
    }
    st__pres_free_user(p, u);
}

/* ---- announcements to the other members ---- */

static void st__pres_begin(const st_wspres_t *p, st_buf_t *b)
{
    st_buf_reset(b);
    st_buf_printf(b, "{\"member\":%llu,\"nonce\":\"%s\",\"entries\":[",
                  (unsigned long long)p->ws->app->cfg->cluster_self, p->nonce);
}

static void st__pres_post(st_wspres_t *p, st_buf_t *b, size_t *items)
{
    if (!*items) return;
    st_buf_puts(b, "]}");
    st__ws_peers_post(p->ws, ST__PRES_PATH, b->data, b->len);
    *items = 0;
    st__pres_begin(p, b);
}

static void st__pres_entry(st_wspres_t *p, st_buf_t *b, size_t *items, const st_wspres_user_t *u,
                           bool online)
{
    if (*items) st_buf_appendc(b, ',');
    st_buf_puts(b, "{\"room_id\":");
    st_buf_append_json_str(b, u->room->room, u->room->rl);
    st_buf_puts(b, ",\"user\":");
    st_buf_append_json_str(b, u->user, u->ul);
    st_buf_puts(b, online ? ",\"online\":true}" : ",\"online\":false}");
    if (++*items && b->len >= ST__PRES_CHUNK) st__pres_post(p, b, items);
}

/* ---- the flush: frames and announcements owed ---- */

/* u's frame may not go yet: its last one is still in the room's job, or the room's job has begun
 * (a frame now would overtake it); it waits in the room's list for st__ws_presence_sent. */
static bool st__pres_waits(const st_wspres_t *p, const st_wspres_user_t *u)
{
    return st_list_linked(&u->flink) || st__ws_presout_busy(p->ws, u->room->room, u->room->rl);
}

static void st__pres_hold(st_wspres_user_t *u)
{
    if (st_list_linked(&u->dlink)) st_list_unlink(&u->dlink);
    st_list_insert(&u->room->held, &u->dlink);
    u->held = true;
}

static void st__pres_on_flush(uv_timer_t *t)
{
    st_wspres_t *p = t->data;
    st_ws_t *ws = p->ws;
    uint64_t now = uv_now(ws->loop), next = 0;
    bool group = ws->app->repl != NULL;
    st_buf_t b = {0};
    size_t items = 0;
    st__pres_begin(p, &b);
    for (ST_LIST_EACH(l, n, &p->dirty)) {
        st_wspres_user_t *u = ST_LIST_ITEM(l, st_wspres_user_t, dlink);
        if (group && (u->local > 0) != u->announced) { /* the other members are told now */
            u->announced = u->local > 0;
            st__pres_entry(p, &b, &items, u, u->announced);
        }
        bool on = st__pres_online(u);
        if (on != u->shown) {
            if (st__pres_waits(p, u)) {
                st__pres_hold(u);
                continue;
            }
            uint64_t since = now - u->frame_ms;
            if (u->frame_ms && since < ST__PRES_FRAME_MS) { /* coalesced: it waits its turn */
                uint64_t wait = ST__PRES_FRAME_MS - since;
                if (!next || wait < next) next = wait;
                continue;
            }
            u->shown = on;
            u->frame_ms = now ? now : 1;
            if (st__ws_presence_deliver(ws, u->room->room, u->room->rl, u->user, u->ul, on,
                                        u->changed))
                st_list_insert(&u->room->flying, &u->flink); /* restamped when it is out */
        }
        if (st__pres_idle(u) && u->frame_ms && now - u->frame_ms < ST__PRES_FRAME_MS) {
            uint64_t wait = ST__PRES_FRAME_MS - (now - u->frame_ms); /* freed when it is up */
            if (!next || wait < next) next = wait;
            continue;
        }
        st_list_unlink(&u->dlink);
        st__pres_gc(p, u);
    }
    st__pres_post(p, &b, &items);
    st_buf_free(&b);
    if (next && !uv_is_active((uv_handle_t *)&p->flush))
        uv_timer_start(&p->flush, st__pres_on_flush, next, 0);
}

uint64_t st__ws_presence_since(const st_ws_t *ws)
{
    return ws->presence ? ws->presence->changes + 1 : 0;
}

void st__ws_presence_sent(st_ws_t *ws, const char *room, size_t rl)
{
    st_wspres_t *p = ws->presence;
    st_wspres_room_t *r = p ? (st_wspres_room_t *)st_map_get(&p->rooms, room, rl) : NULL;
    if (!r) return; /* deleted since (st__ws_presence_forget) */
    uint64_t now = uv_now(ws->loop);
    /* the room's frames reached its last subscriber now: the next about each of their users is a
     * second from now; the flush frees those that are owed nothing (not here: r may go with them)
     */
    while (!st_list_empty(&r->flying)) {
        st_wspres_user_t *u = ST_LIST_ITEM(r->flying.next, st_wspres_user_t, flink);
        st_list_unlink(&u->flink);
        u->frame_ms = now ? now : 1;
        if (!st_list_linked(&u->dlink)) st_list_insert(&p->dirty, &u->dlink);
    }
    /* what waited for the job: at once (the next loop turn), or when its second is up */
    while (!st_list_empty(&r->held)) {
        st_wspres_user_t *u = ST_LIST_ITEM(r->held.next, st_wspres_user_t, dlink);
        st_list_unlink(&u->dlink);
        u->held = false;
        st_list_insert(&p->dirty, &u->dlink);
    }
    if (!st_list_empty(&p->dirty)) uv_timer_start(&p->flush, st__pres_on_flush, 0, 0);
}

/* u changed: a frame or an announcement may be owed (st__pres_on_flush sends them). */
static void st__pres_touch(st_wspres_t *p, st_wspres_user_t *u)
{
    bool announce = p->ws->app->repl && (u->local > 0) != u->announced;
    bool owed = st__pres_online(u) != u->shown || announce;
    if (owed) u->changed = ++p->changes;
    bool linked = st_list_linked(&u->dlink);
    if (!linked && !owed) {
        st__pres_gc(p, u);
        return;
    }
    /* while the room's frames are going out (presout.c) its frame waits in the room's list, which
     * st__ws_presence_sent hands to the flush: a flush would only walk it to hold it back (in a
     * storm, every 10 ms, that walk grew with the storm); an announcement to the other members
     * does not wait */
    if (!announce && (u->held || st__pres_waits(p, u))) {
        if (!linked) st__pres_hold(u);
        return; /* in p->dirty already: the flush, armed when it went in, holds it */
    }
    if (u->held) {
        st_list_unlink(&u->dlink);
        u->held = false;
        linked = false;
    }
    if (!linked) st_list_insert(&p->dirty, &u->dlink);
    if (!uv_is_active((uv_handle_t *)&p->flush))
        uv_timer_start(&p->flush, st__pres_on_flush, ST__PRES_BATCH_MS, 0);
}

/* Every entry of one room, or of every room (room NULL), into out. */
static void st__pres_collect(st_wspres_t *p, const st_wspres_room_t *only, st_wspres_vec_t *out)
{
    size_t i, j;
    for (st_map_node_t *rn = st_map_first(&p->rooms, &i); rn; rn = st_map_next(&p->rooms, &i, rn)) {
        st_wspres_room_t *r = (st_wspres_room_t *)rn;
        if (only && r != only) continue;
        for (st_map_node_t *un = st_map_first(&r->users, &j); un;
             un = st_map_next(&r->users, &j, un))
            st_vec_push(out, (st_wspres_user_t *)un);
    }
}

/* Drops what peer slot `slot` said (its member is gone or came back with another nonce), or
 * only what it has not said again since `before` (0: all of it). */
static void st__pres_expire(st_wspres_t *p, size_t slot, uint64_t before)
{
    st_wspres_vec_t all = {0};
    st__pres_collect(p, NULL, &all);
    for (size_t i = 0; i < all.n; i++) {
        st_wspres_user_t *u = all.v[i];
        bool changed = false;
        for (size_t s = 0; s < ST_REPL_MAX_MEMBERS; s++) {
            if (!u->seen[s] || (slot != SIZE_MAX && s != slot) || (before && u->seen[s] >= before))
                continue;
            u->seen[s] = 0;
            changed = true;
        }
        if (changed) st__pres_touch(p, u); /* frees at most u itself */
    }
    st_vec_free(&all);
}

/* Every ST__PRES_EVERY_MS in a group: all of this member's part again, and the others' entries
 * that were not said again in time go. */
static void st__pres_on_tick(uv_timer_t *t)
{
    st_wspres_t *p = t->data;
    uint64_t now = uv_now(p->ws->loop);
    if (!p->ws->app->repl) return; /* one node: nothing to tell, nobody else's to expire */
    st_buf_t b = {0};
    size_t items = 0;
    st__pres_begin(p, &b);
    st_wspres_vec_t all = {0};
    st__pres_collect(p, NULL, &all);
    for (size_t i = 0; i < all.n; i++)
        if (all.v[i]->local && all.v[i]->announced) st__pres_entry(p, &b, &items, all.v[i], true);
    st__pres_post(p, &b, &items);
    st_buf_free(&b);
    st_vec_free(&all);
    if (now > ST__PRES_EXPIRE_MS) st__pres_expire(p, SIZE_MAX, now - ST__PRES_EXPIRE_MS);
}

/* ---- what topics.c and the routes call ---- */

bool st__ws_presence_add(st_ws_t *ws, const char *room, const char *user)
{
    st_wspres_t *p = ws->presence;
    if (!p) return false;
    st_wspres_user_t *u = st__pres_find(p, room, strlen(room), user, strlen(user), true);
    if (!u) return false; /* the table is full: not counted (st__ws_presence_room_for) */
    if (u->local++ == 0) {
        st__pres_local(p, user, strlen(user), +1);
        st__pres_touch(p, u);
    }
    return true;
}

bool st__ws_presence_room_for(st_ws_t *ws, const char *room, const char *user)
{
    st_wspres_t *p = ws->presence;
    if (!p) return true;
    size_t ul = strlen(user);
    st_wspres_user_t *u = st__pres_find(p, room, strlen(room), user, ul, false);
    if (u && u->local) return true; /* counted already: another stream of the user */
    return (u || p->n < p->cap) && st__pres_locals(p, user, ul) < ST__PRES_USER_MAX;
}

void st__ws_presence_drop(st_ws_t *ws, const char *room, const char *user)
{
    st_wspres_t *p = ws->presence;
    if (!p) return;
    st_wspres_user_t *u = st__pres_find(p, room, strlen(room), user, strlen(user), false);
    if (!u || !u->local) return; /* its room was deleted since (st__ws_presence_forget) */
    if (--u->local == 0) {
        st__pres_local(p, user, strlen(user), -1);
        st__pres_touch(p, u);
    }
}

void st__ws_presence_forget(st_ws_t *ws, const char *room, size_t rl)
{
    st_wspres_t *p = ws->presence;
    st_wspres_room_t *r = p ? (st_wspres_room_t *)st_map_get(&p->rooms, room, rl) : NULL;
    if (!r) return;
    st_wspres_vec_t all = {0};
    st__pres_collect(p, r, &all);
    for (size_t i = 0; i < all.n; i++) { /* no subscriber is left to be told: no frame */
        if (all.v[i]->local) st__pres_local(p, all.v[i]->user, all.v[i]->ul, -1);
        st__pres_free_user(p, all.v[i]);
    }
    st_vec_free(&all);
}

static int st__pres_cmp(const void *a, const void *b)
{
    const st_wspres_user_t *x = *(st_wspres_user_t *const *)a, *y = *(st_wspres_user_t *const *)b;
    size_t n = x->ul < y->ul ? x->ul : y->ul;
    int c = memcmp(x->user, y->user, n);
    return c ? c : (x->ul > y->ul) - (x->ul < y->ul);
}

void st_ws_presence_json(st_ws_t *ws, const char *room, size_t rl, st_buf_t *out)
{
    st_wspres_t *p = ws ? ws->presence : NULL;
    st_wspres_room_t *r = p ? (st_wspres_room_t *)st_map_get(&p->rooms, room, rl) : NULL;
    st_wspres_vec_t all = {0};
    if (r) st__pres_collect(p, r, &all);
    size_t n = 0;
    for (size_t i = 0; i < all.n; i++)
        if (st__pres_online(all.v[i])) all.v[n++] = all.v[i];
    if (n) qsort(all.v, n, sizeof *all.v, st__pres_cmp);
    st_buf_puts(out, "{\"room_id\":");
    st_buf_append_json_str(out, room, rl);
    st_buf_puts(out, ",\"online\":[");
    for (size_t i = 0; i < n; i++) {
        if (i) st_buf_appendc(out, ',');
        st_buf_append_json_str(out, all.v[i]->user, all.v[i]->ul);
    }
    st_buf_puts(out, "]}");
    st_vec_free(&all);
}

int st_ws_presence_peer(st_ws_t *ws, uint64_t member, const char *nonce,
                        const st_ws_presence_t *items, size_t n)
{
    st_wspres_t *p = ws ? ws->presence : NULL;
    /* one node has no other members (and would never expire what one said) */
    if (!p || !ws->app->repl || member == ws->app->cfg->cluster_self) return ST_OK;
    size_t slot = SIZE_MAX;
    for (size_t i = 0; i < ST_REPL_MAX_MEMBERS && slot == SIZE_MAX; i++)
        if (p->peers[i].id == member) slot = i;
    for (size_t i = 0; i < ST_REPL_MAX_MEMBERS && slot == SIZE_MAX; i++)
        if (!p->peers[i].id) slot = i;
    if (slot == SIZE_MAX) return ST_ERATE; /* more members than a group has */
    st_wspres_peer_t *peer = &p->peers[slot];
    if (peer->id == member && strcmp(peer->nonce, nonce) != 0)
        st__pres_expire(p, slot, 0); /* it restarted: what it said before is void */
    peer->id = member;
    snprintf(peer->nonce, sizeof peer->nonce, "%s", nonce);
    uint64_t now = uv_now(ws->loop);
    for (size_t i = 0; i < n; i++) {
        const st_ws_presence_t *e = &items[i];
        st_wspres_user_t *u = st__pres_find(p, e->room, e->rl, e->user, e->ul, e->online);
        if (!u) continue;
        u->seen[slot] = e->online ? (now ? now : 1) : 0;
        st__pres_touch(p, u);
    }
    return ST_OK;
}

/* ---- lifetime ---- */

void st__ws_presence_open(st_ws_t *ws)
{
    st_wspres_t *p = st_calloc(1, sizeof *p);
    p->ws = ws;
    st_map_init(&p->rooms);
    st_map_init(&p->locals);
    st_list_init(&p->dirty);
    uint64_t max = ws->app->cfg->max_connections;
    p->cap = max > 256 ? 4 * max : 1024;
    p->m_entries = st_metrics_gauge("strata_presence_entries",
                                    "Connected (room, user) pairs presence keeps (this node's "
                                    "streams and its peers' word)",
                                    "");
    st_metric_set(st_metrics_gauge("strata_presence_capacity",
                                   "Presence entries kept at most (4 x --max-connections, at "
                                   "least 1,024)",
                                   ""),
                  (double)p->cap);
    uint8_t rnd[16];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        uint64_t t = st_now_us();
        memcpy(rnd, &t, sizeof t);
        memcpy(rnd + 8, &ws, sizeof ws < 8 ? sizeof ws : 8);
    }
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(p->nonce + 2 * i, 3, "%02x", rnd[i]);
    uv_timer_init(ws->loop, &p->flush);
    uv_timer_init(ws->loop, &p->tick);
    p->flush.data = p->tick.data = p;
    p->handles = 2;
    /* always: the group (app->repl) opens after the streams do */
    uv_timer_start(&p->tick, st__pres_on_tick, ST__PRES_EVERY_MS, ST__PRES_EVERY_MS);
    ws->presence = p;
}

static void st__pres_closed(uv_handle_t *h)
{
    st_wspres_t *p = h->data;
    if (--p->handles == 0) free(p);
}

void st__ws_presence_close(st_ws_t *ws)
{
    st_wspres_t *p = ws->presence;
    ws->presence = NULL; /* subscriptions that end from now on are not counted */
    if (!p) return;
    st_wspres_vec_t all = {0};
    st__pres_collect(p, NULL, &all);
    for (size_t i = 0; i < all.n; i++) {
        if (all.v[i]->local) st__pres_local(p, all.v[i]->user, all.v[i]->ul, -1);
        st__pres_free_user(p, all.v[i]);
    }
    st_vec_free(&all);
    st_map_free(&p->rooms);
    st_map_free(&p->locals);
    uv_close((uv_handle_t *)&p->flush, st__pres_closed);
    uv_close((uv_handle_t *)&p->tick, st__pres_closed);
}
