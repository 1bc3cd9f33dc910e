/* SPDX-License-Identifier: MIT */
/*
 * wake: another thread wakes the loop, with no state the loop could catch half-written.
 *
 * libuv 1.44 (Debian 12's) sends a uv_async_t in two steps: a flag to "sending", a write to its
 * eventfd, the flag to "sent". The loop, woken by the write, spins (then sched_yield()s) until
 * the flag says "sent" (uv__async_spin). A sender preempted between the write and the last step
 * (the write itself wakes the loop, which may take the sender's core) holds the loop for as long
 * as the scheduler keeps it off a core: milliseconds on a busy 2-core machine (bench/RESULTS.md,
 * Session 24). Here the sender's whole part is one atomic exchange and one write(2) after it:
 * the loop never waits for a sender. (libuv 1.46 removed the spin; its own thread pool's
 * completion async keeps it.)
 *
 * A flag says a wake is on its way, so a burst of sends costs one write and one loop callback.
 * The callback clears the flag before it takes the work: whatever is handed over after that
 * sends again. A callback may find nothing to do (spurious wakes are harmless).
 */
#ifndef STRATA_WAKE_H
#define STRATA_WAKE_H

#include <uv.h>

typedef struct st_wake_s st_wake_t;
typedef void (*st_wake_cb)(st_wake_t *w);

struct st_wake_s {
    uv_poll_t poll; /* the handle: ref, unref and close it as (uv_handle_t *)&w->poll */
    int fd;         /* an eventfd, non-blocking */
    int pending;    /* a wake is on its way; atomic */
    st_wake_cb cb;  /* called on the loop */
    void *data;     /* the caller's */
};

/* Opens the eventfd and starts watching it on loop. The caller owns w (it must stay until
 * st_wake_close's close callback). 0, or ST_EIO (errno set) if no eventfd could be had. */
int st_wake_init(uv_loop_t *loop, st_wake_t *w, st_wake_cb cb, void *data);
/* Wakes the loop: cb runs in one of its next iterations. Any thread, the loop's too; not after
 * st_wake_close. */
void st_wake_send(st_wake_t *w);
/* Stops watching and closes the eventfd; close_cb (may be NULL) gets (uv_handle_t *)&w->poll
 * once libuv lets go of it. No thread may send from the call on. */
void st_wake_close(st_wake_t *w, uv_close_cb close_cb);

#endif
