/* SPDX-License-Identifier: MIT */
/* Another thread wakes the loop with one write(2) (include/strata/wake.h says why). */
#include "strata/wake.h"

#include "strata/core.h"

#include <errno.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

static void st__wake_on_poll(uv_poll_t *p, int status, int events)
{
    st_wake_t *w = (st_wake_t *)p; /* poll is its first member */
    (void)events;
    uint64_t n;
    /* Drained before the flag is cleared: a send after the clear writes again and wakes us
     * again, never into an eventfd this read already emptied. */
    while (read(w->fd, &n, sizeof n) < 0 && errno == EINTR) {
    }
    __atomic_store_n(&w->pending, 0, __ATOMIC_SEQ_CST);
    if (status < 0) st_error("wake: polling its eventfd failed: %s", uv_strerror(status));
    w->cb(w);
}

int st_wake_init(uv_loop_t *loop, st_wake_t *w, st_wake_cb cb, void *data)
{
    *w = (st_wake_t){.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), .cb = cb, .data = data};
    if (w->fd < 0) return ST_EIO;
    int rc = uv_poll_init(loop, &w->poll, w->fd);
    if (rc != 0) {
        close(w->fd);
        w->fd = -1;
        errno = -rc;
        return ST_EIO;
    }
    w->poll.data = data;
    /* fails only for a descriptor the loop watches already (UV_EEXIST): not a new eventfd */
    ST_ASSERT(uv_poll_start(&w->poll, UV_READABLE, st__wake_on_poll) == 0);
    return ST_OK;
}

void st_wake_send(st_wake_t *w)
{
    if (__atomic_exchange_n(&w->pending, 1, __ATOMIC_SEQ_CST)) return; /* one is on its way */
    uint64_t one = 1;
    /* EAGAIN: the counter is full, so the loop is woken already; nothing else can fail on a
     * valid eventfd */
    while (write(w->fd, &one, sizeof one) < 0 && errno == EINTR) {
    }
}

void st_wake_close(st_wake_t *w, uv_close_cb close_cb)
{
    /* uv_close stops the watcher at once, so the descriptor may go now */
    uv_close((uv_handle_t *)&w->poll, close_cb);
    close(w->fd);
    w->fd = -1;
}
