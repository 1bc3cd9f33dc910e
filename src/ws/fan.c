/* SPDX-License-Identifier: MIT */
/*
 * The sends of a large fan-out, shared between the loop and one sender thread (issue 23). With
 * a thousand subscribers a post is a thousand send() calls of one frame each, ~12 µs apiece on
 * loopback (the kernel's TCP path and the reader's wake-up run in the sender's context), so the
 * loop alone takes ~12 ms to write them and that loop is the whole p50–p99 spread of post →
 * notify. Here the loop frames every ready stream's bytes first (queue.c, on the loop, as
 * always), then both threads send them: each takes the next stream through one atomic index.
 * If the sender thread does not get a CPU in time the loop simply sends everything itself, so a
 * fan-out is never slower than on the loop alone by more than the wake-up call.
 *
 * What the sender thread touches: the job's items (it reads fd, off and len, and writes `sent`
 * of the items it claimed) and the framed bytes, read-only. Nothing from libwebsockets, no
 * stream, no queue, no metric: all of that stays on the loop, before and after the parallel
 * phase. lws cannot write on those sockets meanwhile, since the loop is inside one of its own
 * calls (the end-of-turn write, write.c) and does not return to lws until the job is joined.
 *
 * The hand-off: the loop publishes a job (items, n, arena) and opens it; the sender thread
 * announces itself in `active` and only then looks whether a job is open. The loop, done
 * claiming, closes the job and waits until `active` is zero. With both sides sequentially
 * consistent, either the thread saw the job closed (and touched nothing) or the loop sees it
 * active and waits for the item it is sending: the join. The loop spins a little first (one
 * send is ~12 µs); if the sender thread lost its CPU in the middle of a send, the loop sleeps on
 * `done` instead of spinning through a time slice, and the thread leaves the job under `mu`, so
 * the wake-up cannot be missed.
 */
#include "internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>

/* Loads of `active` before the loop sleeps on the join: a few µs, less than one send. */
#define ST__FAN_SPINS 4096

struct st_wsfan {
    uv_thread_t thread;
    uv_mutex_t mu;
    uv_cond_t cv;   /* a job announced, or stop */
    uv_cond_t done; /* the sender thread left a job the loop is joining */
    uint64_t gen;   /* jobs announced; under mu */
    bool stop;      /* under mu */
    bool joining;   /* the loop sleeps on `done`; under mu */
    /* The job: written by the loop while it is closed and no sender is active; read by the
     * sender thread only while it is open and the thread counted in `active`. */
    st_wsfan_item_t *items; /* borrowed from the loop for the job */
    size_t n;
    const char *arena; /* borrowed: the framed bytes */
    atomic_size_t next;
    atomic_bool open;
    atomic_int active;
};

/* Sends one stream's bytes once, without blocking: what the socket does not take is the loop's
 * to hand to lws afterwards. Called from either thread; touches only the item's own fields. */
static void st__fan_send_one(const char *arena, st_wsfan_item_t *it, bool by_sender)
{
    ssize_t r = send(it->fd, arena + it->off, it->len, MSG_NOSIGNAL | MSG_DONTWAIT);
    it->sent = r < 0 ? -(ssize_t)errno : r;
    it->by_sender = by_sender;
}

/* Sends items until none is left to claim. */
static void st__fan_drain(st_wsfan_t *f, bool by_sender)
{
    for (;;) {
        size_t i = atomic_fetch_add(&f->next, 1);
        if (i >= f->n) return;
        st__fan_send_one(f->arena, &f->items[i], by_sender);
    }
}

static void st__fan_thread(void *arg)
{
    st_wsfan_t *f = arg;
    uint64_t seen = 0;
    for (;;) {
        uv_mutex_lock(&f->mu);
        while (!f->stop && f->gen == seen)
            uv_cond_wait(&f->cv, &f->mu);
        bool stop = f->stop;
        seen = f->gen;
        uv_mutex_unlock(&f->mu);
        if (stop) return;
        atomic_fetch_add(&f->active, 1); /* announced before looking: see the file comment */
        if (atomic_load(&f->open)) st__fan_drain(f, true);
        uv_mutex_lock(&f->mu);
        atomic_fetch_sub(&f->active, 1);
        if (f->joining) uv_cond_signal(&f->done);
        uv_mutex_unlock(&f->mu);
    }
}

st_wsfan_t *st__ws_fan_start(void)
{
    st_wsfan_t *f = st_calloc(1, sizeof *f);
    atomic_init(&f->next, 0);
    atomic_init(&f->open, false);
    atomic_init(&f->active, 0);
    if (uv_mutex_init(&f->mu) != 0) goto fail_mu;
    if (uv_cond_init(&f->cv) != 0) goto fail_cv;
    if (uv_cond_init(&f->done) != 0) goto fail_done;
    if (uv_thread_create(&f->thread, st__fan_thread, f) != 0) goto fail_thread;
    return f;
fail_thread:
    uv_cond_destroy(&f->done);
fail_done:
    uv_cond_destroy(&f->cv);
fail_cv:
    uv_mutex_destroy(&f->mu);
fail_mu:
    free(f);
    st_warn("ws: no sender thread; large fan-outs are sent from the loop alone");
    return NULL;
}

void st__ws_fan_stop(st_wsfan_t *f)
{
    if (!f) return;
    uv_mutex_lock(&f->mu);
    f->stop = true;
    uv_cond_signal(&f->cv);
    uv_mutex_unlock(&f->mu);
    uv_thread_join(&f->thread);
    uv_cond_destroy(&f->done);
    uv_cond_destroy(&f->cv);
    uv_mutex_destroy(&f->mu);
    free(f);
}

void st__ws_fan_send(st_wsfan_t *f, st_wsfan_item_t *items, size_t n, const char *arena)
{
    if (!f) { /* no sender thread: the loop sends everything */
        for (size_t i = 0; i < n; i++)
            st__fan_send_one(arena, &items[i], false);
        return;
    }
    f->items = items;
    f->n = n;
    f->arena = arena;
    atomic_store(&f->next, 0);
    atomic_store(&f->open, true);
    uv_mutex_lock(&f->mu);
    f->gen++;
    uv_cond_signal(&f->cv);
    uv_mutex_unlock(&f->mu);
    st__fan_drain(f, false);
    /* the join: the sender thread finishes the item it claimed, if any, and leaves the job */
    atomic_store(&f->open, false);
    for (unsigned spins = 0; spins < ST__FAN_SPINS; spins++)
        if (!atomic_load(&f->active)) return;
    uv_mutex_lock(&f->mu);
    f->joining = true;
    while (atomic_load(&f->active))
        uv_cond_wait(&f->done, &f->mu);
    f->joining = false;
    uv_mutex_unlock(&f->mu);
}
