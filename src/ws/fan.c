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
 *
 * Batched through io_uring (issues 47 and 48): each thread claims ST__FAN_CHUNK items at a time
 * and hands their sends to the kernel in one io_uring_enter() instead of one send() each. The
 * kernel's TCP path is the same; what goes is a system call per frame, which on a virtual
 * machine like ours costs about as much as the send itself (bench/RESULTS.md, session 19:
 * build/strata-sendcost, bench/sendcost.c, measures both ways side by side). Every
 * send carries MSG_DONTWAIT, so io_uring never parks one on a poll: each completes (or fails
 * with EAGAIN) inside the submitting call, exactly as the plain non-blocking send() did, and
 * the wait for the chunk's completions returns at once. Each thread owns its own ring, created
 * where it is used; where io_uring is not allowed (an old kernel, a seccomp filter as some
 * container runtimes set, io_uring_disabled) the ring stays unset and that thread sends with
 * send() as before.
 */
#include "internal.h"

#include <errno.h>
#include <liburing.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Loads of `active` before the loop sleeps on the join: a few µs, less than one send. */
#define ST__FAN_SPINS 4096
/* Items a thread claims at once and submits in one io_uring_enter(): few enough that the two
 * threads still share a fan-out of ST__WS_FAN_MIN evenly, enough to spread the call's cost. */
#define ST__FAN_CHUNK 16

/* One thread's submission ring: `ok` once io_uring_queue_init succeeded. */
typedef struct {
    struct io_uring ring;
    bool ok;
} st__fan_ring_t;

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
    st__fan_ring_t loop_ring; /* the loop's; the sender thread's lives on its stack */
};

/* Sets r up; on failure r stays unset and its thread sends with send(). `who` names the thread
 * in the one log line that says which way its sends go. */
static void st__fan_ring_init(st__fan_ring_t *r, const char *who)
{
    /* SUBMIT_ALL: a send the kernel refuses at submission completes with its error and the
     * others still go (without it the rest would stay queued in the ring, pointing into an
     * arena that the next round overwrites): required. COOP_TASKRUN: no interrupt per
     * completion; wanted, not required. */
    int rc = io_uring_queue_init(ST__FAN_CHUNK, &r->ring,
                                 IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN);
    if (rc == -EINVAL) rc = io_uring_queue_init(ST__FAN_CHUNK, &r->ring, IORING_SETUP_SUBMIT_ALL);
    r->ok = rc == 0;
    if (!r->ok)
        st_info("ws: %s sends fan-outs with send(): io_uring unavailable (%s)", who, strerror(-rc));
}

static void st__fan_ring_exit(st__fan_ring_t *r)
{
    if (r->ok) io_uring_queue_exit(&r->ring);
    r->ok = false;
}

/* Sends one stream's bytes once, without blocking: what the socket does not take is the loop's
 * to hand to lws afterwards. Called from either thread; touches only the item's own fields. */
static void st__fan_send_one(const char *arena, st_wsfan_item_t *it, bool by_sender)
{
    ssize_t r = send(it->fd, arena + it->off, it->len, MSG_NOSIGNAL | MSG_DONTWAIT);
    it->sent = r < 0 ? -(ssize_t)errno : r;
    it->by_sender = by_sender;
    it->calls = 1;
}

/* Sends items [i, end) through r's ring in one io_uring_enter(): every send is non-blocking
 * (MSG_DONTWAIT), so each completes inside the call and the wait returns at once. Should the
 * ring refuse (no submission entry, a failed enter), what it did not take is sent with send(). */
static void st__fan_send_chunk(st__fan_ring_t *r, const char *arena, st_wsfan_item_t *items,
                               size_t i, size_t end, bool by_sender)
{
    size_t k = 0;
    for (; r->ok && i + k < end; k++) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
        if (!sqe) break;
        st_wsfan_item_t *it = &items[i + k];
        io_uring_prep_send(sqe, it->fd, arena + it->off, it->len, MSG_NOSIGNAL | MSG_DONTWAIT);
        io_uring_sqe_set_data64(sqe, i + k);
    }
    if (k) {
        int rc;
        do /* interrupted before it submitted anything: the entries are still in the ring */
            rc = io_uring_submit_and_wait(&r->ring, (unsigned)k);
        while (rc == -EINTR);
        if (rc < 0) { /* nothing was submitted (EAGAIN, EBUSY, ...): the ring and its entries go */
            st__fan_ring_exit(r);
            k = 0;
        }
        size_t seen = 0;
        while (seen < k) { /* every submitted send completes inside the call (see above) */
            struct io_uring_cqe *cqe;
            int w = io_uring_wait_cqe(&r->ring, &cqe);
            if (w == -EINTR || w == -EAGAIN) continue;
            if (w != 0) { /* cannot happen with sends that never wait: end those streams */
                for (size_t j = i; j < i + k; j++)
                    if (!items[j].sent) items[j].sent = -EIO;
                st__fan_ring_exit(r);
                return;
            }
            st_wsfan_item_t *it = &items[io_uring_cqe_get_data64(cqe)];
            it->sent = cqe->res;
            it->by_sender = by_sender;
            it->calls = it == &items[i]; /* the chunk's one system call, counted once */
            io_uring_cqe_seen(&r->ring, cqe);
            seen++;
        }
    }
    for (i += k; i < end; i++)
        st__fan_send_one(arena, &items[i], by_sender);
}

/* Sends items, ST__FAN_CHUNK at a time, until none is left to claim. */
static void st__fan_drain(st_wsfan_t *f, st__fan_ring_t *r, bool by_sender)
{
    for (;;) {
        size_t i = atomic_fetch_add(&f->next, ST__FAN_CHUNK);
        if (i >= f->n) return;
        size_t end = i + ST__FAN_CHUNK < f->n ? i + ST__FAN_CHUNK : f->n;
        st__fan_send_chunk(r, f->arena, f->items, i, end, by_sender);
    }
}

static void st__fan_thread(void *arg)
{
    st_wsfan_t *f = arg;
    uint64_t seen = 0;
    st__fan_ring_t ring;
    st__fan_ring_init(&ring, "the sender thread");
    for (;;) {
        uv_mutex_lock(&f->mu);
        while (!f->stop && f->gen == seen)
            uv_cond_wait(&f->cv, &f->mu);
        bool stop = f->stop;
        seen = f->gen;
        uv_mutex_unlock(&f->mu);
        if (stop) break;
        atomic_fetch_add(&f->active, 1); /* announced before looking: see the file comment */
        if (atomic_load(&f->open)) st__fan_drain(f, &ring, true);
        uv_mutex_lock(&f->mu);
        atomic_fetch_sub(&f->active, 1);
        if (f->joining) uv_cond_signal(&f->done);
        uv_mutex_unlock(&f->mu);
    }
    st__fan_ring_exit(&ring);
}

st_wsfan_t *st__ws_fan_start(void)
{
    st_wsfan_t *f = st_calloc(1, sizeof *f);
    st__fan_ring_init(&f->loop_ring, "the loop");
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
    st__fan_ring_exit(&f->loop_ring);
    free(f);
    st_warn("ws: no sender thread; large fan-outs are sent from the loop alone");
    return NULL;
}

bool st__ws_fan_batched(const st_wsfan_t *f)
{
    return f && f->loop_ring.ok;
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
    st__fan_ring_exit(&f->loop_ring);
    free(f);
}

void st__ws_fan_send(st_wsfan_t *f, st_wsfan_item_t *items, size_t n, const char *arena, bool share)
{
    if (!f) { /* no sender thread (and no ring): the loop sends everything */
        for (size_t i = 0; i < n; i++)
            st__fan_send_one(arena, &items[i], false);
        return;
    }
    if (!share) { /* a small one: the loop's batches alone, no wake-up of the thread */
        for (size_t i = 0; i < n; i += ST__FAN_CHUNK)
            st__fan_send_chunk(&f->loop_ring, arena, items, i,
                               i + ST__FAN_CHUNK < n ? i + ST__FAN_CHUNK : n, false);
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
    st__fan_drain(f, &f->loop_ring, false);
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
