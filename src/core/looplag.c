/* SPDX-License-Identifier: MIT */
/*
 * Loop lag probe. Two measures, because they answer different questions:
 * - lateness of a timer that is due every ST__PROBE_MS: what a request or timer arriving at a
 *   random moment waits before the loop gets to it (sampled, cheap, the histogram);
 * - busy time of every iteration, from uv_metrics_idle_time: the longest stretch in which the
 *   loop ran callbacks without looking at its sockets (exact, the max gauge). A stall shorter
 *   than the probe period is still caught here.
 */
#include "strata/looplag.h"
#include "strata/metrics.h"

#include <stdlib.h>

#define ST__PROBE_MS 10

struct st_looplag {
    uv_loop_t *loop;
    uv_timer_t timer;
    uv_prepare_t prepare;
    uint64_t due_ns;        /* when the probe timer should fire next */
    uint64_t iter_start_ns; /* previous prepare */
    uint64_t iter_idle_ns;  /* the loop's idle time at the previous prepare */
    uint64_t max_stall_ns;
    int closing;
    st_metric_t *m_lag, *m_stall;
};

/* The open probe (one loop a process): the turn clock reads it. */
static st_looplag_t *st__lag_open;

static const double st__lag_bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005,
                                        0.01,   0.025,   0.05,   0.1,   0.25,  1};

static void st__on_probe(uv_timer_t *t)
{
    st_looplag_t *l = t->data;
    uint64_t now = uv_hrtime();
    double late = now > l->due_ns ? (double)(now - l->due_ns) / 1e9 : 0;
    st_metric_observe(l->m_lag, late);
    l->due_ns = now + (uint64_t)ST__PROBE_MS * 1000000u;
}

/* Runs once per iteration right before the loop blocks in the poller. */
static void st__on_prepare(uv_prepare_t *p)
{
    st_looplag_t *l = p->data;
    uint64_t now = uv_hrtime(), idle = uv_metrics_idle_time(l->loop);
    if (l->iter_start_ns) {
        uint64_t wall = now - l->iter_start_ns, waited = idle - l->iter_idle_ns;
        uint64_t busy = wall > waited ? wall - waited : 0;
        if (busy > l->max_stall_ns) {
            l->max_stall_ns = busy;
            st_metric_set(l->m_stall, (double)busy / 1e9);
        }
    }
    l->iter_start_ns = now;
    l->iter_idle_ns = idle;
}

int st_looplag_open(st_looplag_t **out, uv_loop_t *loop)
{
    st_looplag_t *l = st_calloc(1, sizeof *l);
    l->loop = loop;
    /* Idle-time accounting must be on for uv_metrics_idle_time; it costs a clock read around
     * each poll. Already-on (or unsupported) is not an error for the server. */
    int rc = uv_loop_configure(loop, UV_METRICS_IDLE_TIME);
    if (rc != 0) st_warn("loop lag: idle-time metrics unavailable: %s", uv_strerror(rc));
    l->m_lag = st_metrics_histogram(
        "strata_loop_lag_seconds", "How late the event loop ran a timer that was due", "",
        st__lag_bounds, sizeof st__lag_bounds / sizeof st__lag_bounds[0]);
    l->m_stall =
        st_metrics_gauge("strata_loop_stall_max_seconds",
                         "Longest single event-loop iteration spent running callbacks", "");
    uv_timer_init(loop, &l->timer);
    uv_prepare_init(loop, &l->prepare);
    l->timer.data = l->prepare.data = l;
    l->due_ns = uv_hrtime() + (uint64_t)ST__PROBE_MS * 1000000u;
    uv_timer_start(&l->timer, st__on_probe, ST__PROBE_MS, ST__PROBE_MS);
    uv_prepare_start(&l->prepare, st__on_prepare);
    uv_unref((uv_handle_t *)&l->timer);
    uv_unref((uv_handle_t *)&l->prepare);
    st__lag_open = l;
    *out = l;
    return ST_OK;
}

double st_looplag_max_stall(const st_looplag_t *l)
{
    return (double)l->max_stall_ns / 1e9;
}

static void st__on_closed(uv_handle_t *h)
{
    st_looplag_t *l = h->data;
    if (--l->closing == 0) free(l);
}

uint64_t st_looplag_turn_ns(void)
{
    const st_looplag_t *l = st__lag_open;
    if (!l || !l->iter_start_ns) return 0;
    uint64_t wall = uv_hrtime() - l->iter_start_ns;
    uint64_t waited = uv_metrics_idle_time(l->loop) - l->iter_idle_ns;
    return wall > waited ? wall - waited : 0;
}

uint64_t st_looplag_turn_left(uint64_t least, uint64_t most)
{
    uint64_t spent = st_looplag_turn_ns();
    uint64_t left = spent < ST_TURN_BUDGET_NS ? ST_TURN_BUDGET_NS - spent : 0;
    return left < least ? least : left > most ? most : left;
}

void st_looplag_close(st_looplag_t *l)
{
    if (!l) return;
    if (st__lag_open == l) st__lag_open = NULL;
    l->closing = 2;
    uv_close((uv_handle_t *)&l->timer, st__on_closed);
    uv_close((uv_handle_t *)&l->prepare, st__on_closed);
}
