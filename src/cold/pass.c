/* SPDX-License-Identifier: MIT */
/*
 * The tier's pass over its sources, in slices (see strata/tier.h). One slice per loop turn on an
 * idle handle (a timer re-armed at 0 would run again in the same turn with this libuv), each a
 * few pages of keys within ST__PASS_BUDGET_NS of loop time.
 *
 * Exactness: each source walks its keys in key order from the last key it visited, so every key
 * there for the whole pass is visited once. Keys to act on are collected during a page's scan and
 * acted on after it: acting inside it would stage writes under the scan's own pointers.
 */
#include "strata/tier.h"
#include "strata/metrics.h"

#include <stdlib.h>
#include <string.h>

#define ST__PASS_BUDGET_NS (1000u * 1000) /* of loop time per slice */

struct st_tier_pass {
    uv_idle_t idle;
    st_store_t *store;
    st_tier_source_t *sources; /* ascending order */
    st_tier_source_t *cur;     /* the source being walked; NULL: no pass */
    int flags;
    bool again;      /* one more pass asked for while this one runs */
    int again_flags; /* … and its flags, OR-ed */
    bool stopping;
    bool held;            /* full() said so: no slice until st_tier_pass_resume */
    st_store_walk_t walk; /* where in the current source */
    void (*after_slice)(void *arg);
    void (*begin)(void *arg, int flags);
    bool (*full)(void *arg);
    void *arg;
    void (*closed)(void *arg);
    void *closed_arg;
    st_metric_t *m_passes;
};

/* One page of keys under the source's prefix, after the last one visited. */
typedef struct {
    st_tier_source_t *src;
    st_buf_t keys; /* the keys to act on, each: u16 length, then the key */
} st_page_t;

static int st__page_key(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_page_t *pg = arg;
    if (pg->src->want(pg->src->arg, key, klen, val, vlen)) {
        uint16_t l = (uint16_t)klen;
        st_buf_append(&pg->keys, &l, sizeof l);
        st_buf_append(&pg->keys, key, klen);
    }
    return 0;
}

/* One page of the current source; false when it has no keys left (or could not be read: the
 * next pass visits them). */
static bool st__page(st_tier_pass_t *p)
{
    st_tier_source_t *src = p->cur;
    st_page_t pg = {src, {0}};
    int more =
        st_store_walk_page(p->store, &src->prefix, 1, &p->walk, src->page, st__page_key, &pg);
    for (size_t i = 0; i + sizeof(uint16_t) <= pg.keys.len;) {
        uint16_t l;
        memcpy(&l, pg.keys.data + i, sizeof l);
        src->act(src->arg, pg.keys.data + i + sizeof l, l);
        i += sizeof l + l;
    }
    st_buf_free(&pg.keys);
    return more == 1;
}

static void st__enter(st_tier_pass_t *p, st_tier_source_t *src)
{
    if (src == p->sources && p->begin) p->begin(p->arg, p->flags);
    p->cur = src;
    p->walk.clen = 0; /* from the start */
    if (src && src->begin) src->begin(src->arg, p->flags);
}

static void st__next_source(st_tier_pass_t *p)
{
    if (p->cur->end) p->cur->end(p->cur->arg);
    if (p->cur->next) {
        st__enter(p, p->cur->next);
        return;
    }
    st_metric_add(p->m_passes, 1);
    p->cur = NULL;
    if (p->again) { /* asked for while this one ran */
        p->again = false;
        p->flags = p->again_flags;
        p->again_flags = 0;
        st__enter(p, p->sources);
    }
}

/* One slice: pages of the current source until the budget is spent or the pass is done. */
static void st__slice(st_tier_pass_t *p)
{
    uint64_t t0 = uv_hrtime();
    while (p->cur && !p->stopping) {
        if (p->full && p->full(p->arg)) {
            p->held = true;
            break;
        }
        if (!st__page(p)) st__next_source(p);
        if (uv_hrtime() - t0 >= ST__PASS_BUDGET_NS) break;
    }
    if (!p->cur || p->stopping || p->held) uv_idle_stop(&p->idle);
    if (p->after_slice && !p->stopping) p->after_slice(p->arg); /* what it queued starts now */
}

static void st__on_idle(uv_idle_t *h)
{
    st__slice(h->data);
}

int st_tier_pass_open(st_tier_pass_t **out, uv_loop_t *loop, st_store_t *store,
                      void (*after_slice)(void *arg), void *arg)
{
    st_tier_pass_t *p = st_calloc(1, sizeof *p);
    p->store = store;
    p->after_slice = after_slice;
    p->arg = arg;
    uv_idle_init(loop, &p->idle);
    p->idle.data = p;
    p->m_passes = st_metrics_counter(
        "strata_flush_passes_total",
        "Flush passes completed (every user, counter and idle conversation visited)", "");
    *out = p;
    return ST_OK;
}

void st_tier_pass_add(st_tier_pass_t *p, st_tier_source_t *src)
{
    ST_ASSERT(!p->cur);
    st_tier_source_t **at = &p->sources;
    while (*at && (*at)->order <= src->order)
        at = &(*at)->next;
    src->next = *at;
    *at = src;
}

void st_tier_pass_start(st_tier_pass_t *p, int flags)
{
    if (p->stopping || !p->sources) return;
    if (p->cur) {
        p->again = true;
        p->again_flags |= flags;
        return;
    }
    p->flags = flags;
    p->held = false;
    st__enter(p, p->sources);
    uv_idle_start(&p->idle, st__on_idle);
    st__slice(p); /* the first slice now: what it queues starts without waiting a turn */
}

void st_tier_pass_on_full(st_tier_pass_t *p, bool (*full)(void *arg))
{
    p->full = full;
}

void st_tier_pass_resume(st_tier_pass_t *p)
{
    if (!p->held || p->stopping) return;
    p->held = false;
    if (p->cur) uv_idle_start(&p->idle, st__on_idle);
}

void st_tier_pass_on_begin(st_tier_pass_t *p, void (*begin)(void *arg, int flags))
{
    p->begin = begin;
}

bool st_tier_pass_running(const st_tier_pass_t *p)
{
    return p->cur != NULL;
}

static void st__pass_closed(uv_handle_t *h)
{
    st_tier_pass_t *p = h->data;
    void (*closed)(void *) = p->closed;
    void *arg = p->closed_arg;
    free(p);
    if (closed) closed(arg);
}

void st_tier_pass_close(st_tier_pass_t *p, void (*closed)(void *arg), void *arg)
{
    p->stopping = true;
    p->cur = NULL;
    p->closed = closed;
    p->closed_arg = arg;
    uv_idle_stop(&p->idle);
    uv_close((uv_handle_t *)&p->idle, st__pass_closed);
}
