/* SPDX-License-Identifier: MIT */
/*
 * The memory of the streams' queues (queue.c keeps the rings' contents; this file where their
 * arrays live), and giving the heap back after a burst (issue 48).
 *
 * A burst of frames — a room's presence storm as thousands of members come online, each one a
 * frame to every stream already there — grows every stream's ring at once, to thousands of
 * entries each. glibc keeps what it got for them once they are freed: with 10,000 member
 * streams 121 KiB per stream stayed in the process after the storm (bench/RESULTS.md, session
 * 18), 15 times Redis's 8.21 KiB per subscriber; with 3,000, malloc_info showed 84 MB of the
 * main arena's 96 MB free once the storm was over. So:
 *  - a ring of ST__WS_RING_MAP bytes or more (a stream thousands of frames behind) is a mapping
 *    of its own: freeing or shrinking it gives its pages back at once, and the heap never holds
 *    it. Not the smaller ones: with every ring of 16 KiB or more mapped, the opening of 3,000
 *    member streams took 1.6 times the CPU (a map, its page faults and an unmap per ring as it
 *    grows and drains, over and over through the storm);
 *  - a ring shrinks as it drains (queue.c st__q_fit), not only once empty;
 *  - the free pages inside the heap (what the smaller rings, the frames' bodies and
 *    libwebsockets' buffers of unsent bytes used during the burst): jemalloc (release builds,
 *    core/alloc.c) gives them back from its own thread within about a second, the loop does
 *    nothing. With glibc's malloc (sanitizer builds, or ST_JEMALLOC=OFF), once the rings went
 *    back from a burst of at least ST__WS_TRIM_MIN bytes to a sixteenth of it, and stayed there
 *    for a tick, the tick (ws.c) calls malloc_trim(0): once per burst, timed in
 *    strata_ws_heap_trim_seconds_total — it holds the loop 69–200 ms after a storm of 10,000
 *    streams (bench/RESULTS.md, session 19), which is why release builds run on jemalloc.
 * strata_ws_queue_capacity_bytes is what the rings hold now, wherever they live.
 */
#include "internal.h"

#include "strata/alloc.h"

#include <malloc.h>
#include <stdlib.h>
#include <sys/mman.h>

static size_t st__ring_size(uint32_t cap)
{
    return (size_t)cap * sizeof(st_wsent_t);
}

static void st__ring_count(st_ws_t *ws, size_t add, size_t sub)
{
    ws->ring_bytes += add;
    ws->ring_bytes -= sub;
    if (ws->ring_bytes > ws->ring_peak) ws->ring_peak = ws->ring_bytes;
    if (ws->m_ring) st_metric_set(ws->m_ring, (double)ws->ring_bytes);
}

/* Returns an owned array of cap entries (st__ring_free gives it back). A big one is its own
 * mapping; should the kernel refuse one (its limit of mappings), the heap serves it. */
static st_wsent_t *st__ring_alloc(st_ws_t *ws, uint32_t cap, bool *mapped)
{
    size_t n = st__ring_size(cap);
    st__ring_count(ws, n, 0);
    *mapped = false;
    if (n >= ST__WS_RING_MAP) {
        void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
            *mapped = true;
            return p;
        }
    }
    return st_malloc(n);
}

static void st__ring_free(st_ws_t *ws, st_wsent_t *q, uint32_t cap, bool mapped)
{
    if (!q) return;
    size_t n = st__ring_size(cap);
    st__ring_count(ws, 0, n);
    if (mapped)
        munmap(q, n);
    else
        free(q);
}

void st__ws_ring_resize(st_ws_t *ws, st_wsconn_t *c, uint32_t cap)
{
    if (cap == c->qcap) return;
    st_wsent_t *q = NULL;
    bool mapped = false;
    if (cap) {
        q = st__ring_alloc(ws, cap, &mapped);
        for (uint32_t i = 0; i < c->qlen; i++)
            q[i] = c->q[(c->qhead + i) & (c->qcap - 1)];
    }
    st__ring_free(ws, c->q, c->qcap, c->qmapped);
    c->q = q;
    c->qcap = cap;
    c->qhead = 0;
    c->qmapped = mapped;
}

void st__ws_ring_tick(st_ws_t *ws)
{
    /* drained at two ticks in a row: the burst is over, not a dip in the middle of it (a trim
     * then would leave what the rest of the burst makes on the heap, below the next peak) */
    bool drained = ws->ring_peak >= ST__WS_TRIM_MIN && ws->ring_bytes <= ws->ring_peak / 16;
    bool twice = drained && ws->ring_drained;
    ws->ring_drained = drained;
    if (!twice) return;
    ws->ring_peak = ws->ring_bytes; /* the next burst is measured from here */
    ws->ring_drained = false;
    if (st_alloc_purges_itself()) return; /* its own thread gives the pages back */
    uint64_t t0 = uv_hrtime();
    malloc_trim(0);
    if (ws->m_trim) st_metric_add(ws->m_trim, (double)(uv_hrtime() - t0) / 1e9);
    if (ws->m_trims) st_metric_add(ws->m_trims, 1);
}
