/* SPDX-License-Identifier: MIT */
/*
 * Presence frames on their way to a room's subscribers, a bounded part per loop turn (issue 48).
 *
 * A change of presence is a frame to every subscriber of its room (SPEC §2.1 v5). When thousands
 * of a big room's members come online together (the opening of 10,000 member streams of a room
 * of 100,000), one presence flush (presence.c, every ST__PRES_BATCH_MS) held the 64–128 members
 * that came online since, each change a queue entry for each of up to 10,000 streams, all queued
 * in the flush's one loop turn: 0.5–1.2 million entries, 60–100 ms on a quiet machine, and every
 * turn of the opening over 50 ms was one of those; on a loaded one the loop waited for a CPU in
 * the middle of them, 1–9 s (bench/RESULTS.md, sessions 20 and 21).
 *
 * So a flush's frames are not queued at once. Each room's frames are a job: the frames' bodies, in
 * the order of the changes, and the room's subscriptions when the job's first turn comes (for a
 * flush's job, the flush's own turn), in a vector. A loop turn queues at most
 * --ws-presence-budget (subscription, frame) pairs; within a job, subscription by subscription,
 * each getting every frame of the job in order; the next turn goes on where this one stopped (an
 * idle handle keeps the poll from blocking meanwhile).
 *
 * Rooms are served round-robin within that budget (issue 48): each room with frames to queue gets
 * a share of every turn, so a storm in one room of 100,000 does not hold a small room's frame
 * until the storm is out — it leaves in the next turn. A room has at most one job: a flush's
 * frames join the room's job until its first turn, and after that presence.c holds the room's
 * later changes back (st__ws_presout_busy; their users wait, coalescing, in the room's list)
 * until the job is done (st__ws_presence_sent). So every subscription of the room at a job's
 * first turn gets every frame of it, in order, and a later change's frames come after them; and
 * what presence waits to send is bounded by its table (one entry per room and user), not by the
 * length of a storm. What a job queues goes through st__ws_queue like any live frame: a stream
 * that does not read is cut as a slow consumer (SPEC §3), its subscriptions struck from the job.
 *
 * presence.c is told when a room's job is done so that the frames about one user reach every
 * subscriber at least a second apart (SPEC §2.1 v5, as typing's): a user's next frame waits a
 * second from when its last one went to the job's last subscriber, not from when the job was
 * made (a late subscriber of a long job heard of it only then).
 *
 * A subscription gets only the frames of changes made after it joined (presence.c numbers the
 * changes, st__ws_presence_since; s->pres_since): the later a job's turn, the more members joined
 * since its changes, and each would be told of changes before its time (in the opening of 10,000
 * member streams, 72–82 million frames instead of 50 million; bench/RESULTS.md, session 21).
 *
 * A subscription that ends before its turn is struck from its job (s->pres_ref, the slot that
 * holds it, is set to NULL; st__ws_presout_gone); one that starts after the job's first turn is
 * not in it (its own change comes later: it is told of every change from its own on, as before).
 * The frames' bodies are held by the job (one reference each) until it ends; each queued frame
 * holds its own.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* One room's frames, and the subscriptions they go to: a room has at most one job (presence.c
 * holds the room's later changes back while it runs, st__ws_presout_busy). */
typedef struct {
    st_list_t link;     /* in o->ring: the rooms with frames to queue, the next to serve first */
    st_map_node_t node; /* in o->rooms, by room */
    ST_VEC(st_wsbody_t *) bodies; /* owned references, in the order of the changes */
    ST_VEC(uint64_t) changes;     /* each body's change (presence.c's number) */
    ST_VEC(st_wssub_t *) subs;    /* NULL: ended since; set up at the job's first turn */
    bool snapped;                 /* subs holds the room's subscriptions: no frame joins now */
    size_t at, frame;             /* the next (subscription, frame) to queue */
    st_wsbody_t *pre;             /* the prefix of `last`'s frames (a reference), or NULL */
    char *last;                   /* owned: the subscription id pre was made for */
    size_t rl;
    char room[];
} st__presjob_t;

struct st_wspresout {
    st_ws_t *ws;
    st_list_t ring; /* the jobs, served round-robin */
    size_t njobs;   /* in ring */
    st_map_t rooms; /* the jobs by room */
    size_t budget;  /* (subscription, frame) pairs a loop turn queues: --ws-presence-budget */
    size_t queued;  /* frames this turn queued */
    size_t most;    /* the most one turn queued */
    st_metric_t *m_frames, *m_most;
    uv_idle_t step; /* active while jobs are left */
};

/* The room's subscriptions now, into j (each remembers its slot). */
static void st__presout_snap(st_ws_t *ws, st__presjob_t *j)
{
    j->snapped = true;
    st_wschan_t *ch = st__ws_room_chan(ws, j->room, j->rl);
    if (!ch) return;
    for (ST_LIST_EACH(l, n, &ch->subs)) {
        st_wssub_t *s = ST_LIST_ITEM(l, st_wssub_t, clink);
        if (s->room) st_vec_push(&j->subs, s); /* a room's channel: only its room subscriptions */
    }
    for (size_t i = 0; i < j->subs.n; i++) /* once the vector no longer moves */
        j->subs.v[i]->pres_ref = &j->subs.v[i];
}

static void st__presout_free(st_wspresout_t *o, st__presjob_t *j)
{
    st_list_unlink(&j->link);
    o->njobs--;
    st_map_remove(&o->rooms, &j->node);
    for (size_t i = j->at; i < j->subs.n; i++)
        if (j->subs.v[i]) j->subs.v[i]->pres_ref = NULL;
    for (size_t i = 0; i < j->bodies.n; i++)
        st__ws_body_unref(j->bodies.v[i]);
    st_vec_free(&j->bodies);
    st_vec_free(&j->changes);
    st_vec_free(&j->subs);
    st__ws_body_unref(j->pre);
    free(j->last);
    free(j);
}

/* Queues j's frames, up to `budget` of them (a struck slot counts one); returns how many. */
static size_t st__presout_run(st_wspresout_t *o, st__presjob_t *j, size_t budget)
{
    st_ws_t *ws = o->ws;
    size_t spent = 0;
    if (!j->snapped) /* its flush is over (a timer's: the idle phase comes after): the
                      * subscriptions are the room's now */
        st__presout_snap(ws, j);
    while (j->at < j->subs.n && spent < budget) {
        st_wssub_t *s = j->subs.v[j->at];
        if (!s) { /* ended since (perhaps within its frames) */
            j->at++;
            j->frame = 0;
            spent++;
            continue;
        }
        if (!j->pre || strcmp(j->last, s->id) != 0) { /* a run of equal ids shares a prefix */
            st_buf_t b = {0};
            st__ws_prefix(&b, "presence", s->id);
            st__ws_body_unref(j->pre);
            j->pre = st__ws_body_new(b.data, b.len);
            st_buf_free(&b);
            free(j->last);
            j->last = st_strndup(s->id, strlen(s->id));
        }
        /* a presence frame waits for nothing but the subscription's fence (topics.c) */
        for (; j->frame < j->bodies.n && spent < budget; j->frame++, spent++) {
            if (j->changes.v[j->frame] < s->pres_since) continue; /* made before s joined */
            st__ws_queue(ws, s->conn, j->pre, j->bodies.v[j->frame], s->fence);
            o->queued++;
        }
        if (j->frame < j->bodies.n) break; /* the budget ran out within s: it goes on there */
        s->pres_ref = NULL;
        j->at++;
        j->frame = 0;
    }
    return spent;
}

/* One turn's share: --ws-presence-budget frames, shared between the rooms with frames to queue
 * (issue 48: one big room's storm held every other room's frames until it was out). Each pass
 * gives each job an equal part of what is left (at least one), in ring order, and puts it at the
 * back; what a job did not need goes to the next pass. A job that is done is freed and presence.c
 * told (its users' frames are out: the next frame about them is a second from now, and the
 * room's changes it held back may go). */
static void st__presout_on_step(uv_idle_t *h)
{
    st_wspresout_t *o = h->data;
    size_t left = o->budget;
    o->queued = 0;
    while (left && o->njobs) {
        size_t share = left / o->njobs ? left / o->njobs : 1;
        for (size_t pass = o->njobs; pass && left && o->njobs; pass--) {
            st__presjob_t *j = ST_LIST_ITEM(o->ring.next, st__presjob_t, link);
            left -= st__presout_run(o, j, share);
            st_list_unlink(&j->link);
            st_list_insert(&o->ring, &j->link); /* to the back */
            if (j->at < j->subs.n) continue;
            st__ws_presence_sent(o->ws, j->room, j->rl); /* arms a flush, queues nothing */
            st__presout_free(o, j);
        }
    }
    st_metric_add(o->m_frames, (double)o->queued);
    if (o->queued > o->most) st_metric_set(o->m_most, (double)(o->most = o->queued));
    if (!o->njobs) uv_idle_stop(&o->step);
}

static st__presjob_t *st__presout_job(const st_wspresout_t *o, const char *room, size_t rl)
{
    st_map_node_t *n = st_map_get(&o->rooms, room, rl);
    return n ? ST_LIST_ITEM(n, st__presjob_t, node) : NULL;
}

bool st__ws_presout_busy(const st_ws_t *ws, const char *room, size_t rl)
{
    const st__presjob_t *j = ws->presout ? st__presout_job(ws->presout, room, rl) : NULL;
    return j && j->snapped;
}

bool st__ws_presence_deliver(st_ws_t *ws, const char *room, size_t rl, const char *user, size_t ul,
                             bool online, uint64_t change)
{
    st_wspresout_t *o = ws->presout;
    if (!o || !st__ws_room_chan(ws, room, rl)) return false; /* nobody to tell */
    st__presjob_t *j = st__presout_job(o, room, rl);
    if (!j) {
        j = st_calloc(1, sizeof *j + rl + 1);
        memcpy(j->room, room, rl);
        j->rl = rl;
        j->node.key = j->room;
        j->node.klen = rl;
        st_map_insert(&o->rooms, &j->node);
        st_list_insert(&o->ring, &j->link);
        o->njobs++;
        uv_idle_start(&o->step, st__presout_on_step); /* a no-op when it runs already */
    }
    st_buf_t b = {0};
    st_buf_puts(&b, "\"room_id\":");
    st_buf_append_json_str(&b, room, rl);
    st_buf_puts(&b, ",\"user\":");
    st_buf_append_json_str(&b, user, ul);
    st_buf_puts(&b, online ? ",\"online\":true}" : ",\"online\":false}");
    st_vec_push(&j->bodies, st__ws_body_new(b.data, b.len));
    st_vec_push(&j->changes, change);
    st_buf_free(&b);
    return true;
}

void st__ws_presout_gone(st_wssub_t *s)
{
    if (s->pres_ref) *s->pres_ref = NULL;
    s->pres_ref = NULL;
}

void st__ws_presout_open(st_ws_t *ws)
{
    st_wspresout_t *o = st_calloc(1, sizeof *o);
    o->ws = ws;
    o->budget = ws->app->cfg->ws_presence_budget ? ws->app->cfg->ws_presence_budget : 16384;
    st_list_init(&o->ring);
    st_map_init(&o->rooms);
    uv_idle_init(ws->loop, &o->step);
    o->step.data = o;
    o->m_frames = st_metrics_counter("strata_ws_presence_frames_total",
                                     "Presence frames queued to streams (one per subscription and "
                                     "change)",
                                     "");
    o->m_most = st_metrics_gauge("strata_ws_presence_turn_frames_max",
                                 "The most presence frames one loop turn queued since the start "
                                 "(at most --ws-presence-budget)",
                                 "");
    ws->presout = o;
}

static void st__presout_closed(uv_handle_t *h)
{
    free(h->data);
}

/* Frames not queued yet are dropped (presence is ephemeral; the streams are closing). */
void st__ws_presout_close(st_ws_t *ws)
{
    st_wspresout_t *o = ws->presout;
    ws->presout = NULL; /* nothing is sent from now on */
    if (!o) return;
    while (!st_list_empty(&o->ring))
        st__presout_free(o, ST_LIST_ITEM(o->ring.next, st__presjob_t, link));
    st_map_free(&o->rooms);
    uv_close((uv_handle_t *)&o->step, st__presout_closed);
}
