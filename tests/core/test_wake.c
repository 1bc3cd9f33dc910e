/* SPDX-License-Identifier: MIT */
/* Unit tests for core/wake.c: threads wake the loop, no hand-over is missed. */
#include "../test.h"
#include "strata/core.h"
#include "strata/wake.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>

#define THREADS 4
#define EACH    50000

typedef struct {
    st_wake_t w;
    uv_mutex_t mu;
    uint64_t handed; /* with mu */
    uint64_t taken;  /* loop only */
    uint64_t calls;  /* loop only */
    uint64_t again;  /* loop only: the callback sends once more itself this many times */
    int fd;
    bool threads; /* senders run: the loop stops, the test closes after joining them */
} rig_t;

static void on_closed(uv_handle_t *h)
{
    (void)h;
}

static void on_wake(st_wake_t *w)
{
    rig_t *r = w->data;
    r->calls++;
    uv_mutex_lock(&r->mu);
    r->taken = r->handed;
    uv_mutex_unlock(&r->mu);
    if (r->again) {
        r->again--;
        st_wake_send(w); /* from the loop itself: the next iteration calls again */
        return;
    }
    if (r->taken != (uint64_t)THREADS * EACH) return;
    if (r->threads)
        uv_stop(w->poll.loop); /* a thread may still be in its last send: close after the join */
    else
        st_wake_close(w, on_closed);
}

static void hand(void *arg)
{
    rig_t *r = arg;
    for (int i = 0; i < EACH; i++) {
        uv_mutex_lock(&r->mu);
        r->handed++;
        uv_mutex_unlock(&r->mu);
        st_wake_send(&r->w);
    }
}

TEST(wake_threads_hand_over_everything_and_the_loop_sees_it_all)
{
    uv_loop_t loop;
    CHECK_EQ(uv_loop_init(&loop), 0);
    rig_t r = {.threads = true};
    uv_mutex_init(&r.mu);
    CHECK_EQ(st_wake_init(&loop, &r.w, on_wake, &r), ST_OK);
    CHECK(r.w.poll.data == &r); /* the handle's data is the caller's, for close callbacks */
    r.fd = r.w.fd;
    uv_thread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK_EQ(uv_thread_create(&t[i], hand, &r), 0);
    /* runs until the callback that sees the last hand-over stops it */
    uv_run(&loop, UV_RUN_DEFAULT);
    for (int i = 0; i < THREADS; i++)
        uv_thread_join(&t[i]);
    st_wake_close(&r.w, on_closed);
    CHECK_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
    CHECK_EQ(r.taken, (uint64_t)THREADS * EACH);
    CHECK(r.calls >= 1);
    /* a burst costs fewer wakes than sends (one is on its way while the others come) */
    CHECK(r.calls < (uint64_t)THREADS * EACH);
    /* the eventfd is closed with the handle */
    CHECK(fcntl(r.fd, F_GETFD) == -1 && errno == EBADF);
    CHECK_EQ(uv_loop_close(&loop), 0);
    uv_mutex_destroy(&r.mu);
}

TEST(wake_a_send_from_the_loop_s_own_callback_calls_it_again)
{
    uv_loop_t loop;
    CHECK_EQ(uv_loop_init(&loop), 0);
    rig_t r = {.again = 3};
    uv_mutex_init(&r.mu);
    CHECK_EQ(st_wake_init(&loop, &r.w, on_wake, &r), ST_OK);
    r.handed = (uint64_t)THREADS * EACH; /* all handed: the last call closes */
    st_wake_send(&r.w);
    st_wake_send(&r.w); /* one on its way already: no second call for it */
    CHECK_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
    CHECK_EQ(r.calls, 4); /* the first, then one for each of its 3 sends */
    CHECK_EQ(uv_loop_close(&loop), 0);
    uv_mutex_destroy(&r.mu);
}

TEST(wake_an_unreferenced_handle_does_not_keep_the_loop_running)
{
    uv_loop_t loop;
    CHECK_EQ(uv_loop_init(&loop), 0);
    rig_t r = {0};
    uv_mutex_init(&r.mu);
    CHECK_EQ(st_wake_init(&loop, &r.w, on_wake, &r), ST_OK);
    uv_unref((uv_handle_t *)&r.w.poll);
    CHECK_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0); /* returns: nothing referenced */
    CHECK_EQ(r.calls, 0);
    st_wake_close(&r.w, on_closed);
    CHECK_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
    CHECK_EQ(uv_loop_close(&loop), 0);
    uv_mutex_destroy(&r.mu);
}

RUN_TESTS("wake")
