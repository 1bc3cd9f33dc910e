/* SPDX-License-Identifier: MIT */
/*
 * The flush pass (every --flush-interval, the hot store at 80 %, POST /v1/admin/flush): every
 * user (retention, then a flush queued if they have hot rows: at the interval only if it is due,
 * see st__chat_flush_due), every counter (hot increments
 * into the baseline; values do not change), every idle conversation (evicted, evict.c). It runs
 * in slices: one per loop turn on an idle handle (a timer re-armed at 0 would run again in the
 * same turn with this libuv), each a few pages of keys within ST__PASS_BUDGET_NS of loop time,
 * so a pass over millions of keys never stalls the loop. Flushes a slice queues start at once.
 *
 * Exactness: each phase walks its keys in key order from the last key it visited, so every key
 * there for the whole pass is visited once (one added behind the cursor waits for the next pass;
 * a post that makes a user's flush due queues it itself). A flush is queued once (the pending
 * and running maps). A pass asked for while one runs is queued: one more pass follows it.
 */
#include "internal.h"
#include "strata/counters.h"

#include <string.h>

#define ST__PASS_BUDGET_NS (1000u * 1000) /* of loop time per slice */
#define ST__PAGE_USERS     32             /* per page: retention and a flush check each */
#define ST__PAGE_KEYS      256            /* per page: counters, conversation records */

enum { ST__PHASE_NONE, ST__PHASE_USERS, ST__PHASE_COUNTERS, ST__PHASE_EVICT };

/* One page of keys under a prefix after the cursor; the cursor moves to the last key visited. */
typedef struct {
    st_flushpass_t *p;
    int64_t before; /* eviction: idle since */
    size_t seen, max;
    st_buf_t keys; /* the keys to act on, each: u16 length, then the key */
} st_page_t;

static int st__page_key(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_page_t *pg = arg;
    st_flushpass_t *p = pg->p;
    if (klen > ST_KEY_MAX) return 0;
    memcpy(p->cursor, key, klen);
    p->cursor[klen] = 0; /* the next page starts at the first key after this one */
    p->clen = klen + 1;
    bool want = p->phase == ST__PHASE_EVICT
                    ? st__chat_evictable(key, klen, val, vlen, pg->before)
                    : klen >= 2 && klen - 1 <= ST_NAME_MAX; /* 'T' user, or a counter's name */
    if (want) {
        uint16_t l = (uint16_t)klen;
        st_buf_append(&pg->keys, &l, sizeof l);
        st_buf_append(&pg->keys, key, klen);
    }
    return ++pg->seen == pg->max;
}

/* Acted on after the scan: acting inside it would stage writes under the scan's own pointers. */
static void st__act(st_chat_t *c, st_flushpass_t *p, const char *key, size_t klen)
{
    uint64_t wait = 0;
    const char *name = key + 1;
    size_t nl = klen - 1;
    if (p->phase == ST__PHASE_USERS) {
        uint8_t k[ST__KEY_CAP];
        st_totals_t tot;
        st_coldstat_t cs;
        st__chat_retention(c, name, nl);
        if (st__chat_get_fixed(c->store, k, st__chat_ukey(k, 'T', name, nl) - 1, &tot, sizeof tot,
                               &wait) == ST_OK &&
            st__chat_coldstat(c, name, nl, &cs, &wait) == ST_OK && tot.total > cs.rows &&
            (p->all || st__chat_flush_due(c, name, nl, tot.total - cs.rows))) {
            st__chat_flush_enqueue(c->cold, name, nl);
            p->queued++;
        }
    } else if (p->phase == ST__PHASE_COUNTERS) {
        st_counter_t ctr;
        if (st_counter_get(c->store, name, nl, &ctr, &wait) == ST_OK && ctr.hot)
            st_counter_consolidate(c->store, name, nl, &wait);
    } else {
        st_store_del(c->store, key, klen, &wait);
        p->evicted++;
    }
}

static const char st__prefix[] = {0, 'T', ST_KS_COUNTER, 'C'};

/* One page of the phase; false when the phase has no keys left. */
static bool st__page(st_chat_t *c, st_flushpass_t *p)
{
    st_page_t pg = {
        p, p->evict_before, 0, p->phase == ST__PHASE_USERS ? ST__PAGE_USERS : ST__PAGE_KEYS, {0}};
    uint64_t wait = 0;
    char pre = st__prefix[p->phase];
    st_store_scan_from(c->store, &pre, 1, p->clen ? p->cursor : NULL, p->clen, st__page_key, &pg,
                       &wait);
    for (size_t i = 0; i + sizeof(uint16_t) <= pg.keys.len;) {
        uint16_t l;
        memcpy(&l, pg.keys.data + i, sizeof l);
        st__act(c, p, pg.keys.data + i + sizeof l, l);
        i += sizeof l + l;
    }
    st_buf_free(&pg.keys);
    return pg.seen == pg.max;
}

static void st__next_phase(st_chatcold_t *cc, st_flushpass_t *p)
{
    p->clen = 0;
    if (++p->phase == ST__PHASE_EVICT) p->evict_before = st_now_us() - (int64_t)cc->hot_ttl_us;
    if (p->phase <= ST__PHASE_EVICT) return;
    /* done */
    if (p->evicted) {
        st_metric_add(cc->m_evicted, (double)p->evicted);
        st_info("cold: evicted %zu idle conversations from the hot store", p->evicted);
    }
    st_metric_add(p->m_passes, 1);
    p->phase = ST__PHASE_NONE;
    if (p->again) { /* asked for while this one ran */
        p->again = false;
        p->all = p->again_all;
        p->again_all = false;
        p->phase = ST__PHASE_USERS;
        p->queued = p->evicted = 0;
    }
}

/* One slice: pages of the current phase until the budget is spent or the pass is done. */
static void st__slice(st_chatcold_t *cc)
{
    st_flushpass_t *p = &cc->pass;
    uint64_t t0 = uv_hrtime();
    while (p->phase != ST__PHASE_NONE && !cc->stopping) {
        if (!st__page(cc->chat, p)) st__next_phase(cc, p);
        if (uv_hrtime() - t0 >= ST__PASS_BUDGET_NS) break;
    }
    if (p->phase == ST__PHASE_NONE || cc->stopping) uv_idle_stop(&p->idle);
    st__chat_flush_pump(cc); /* what this slice queued starts now */
}

static void st__on_idle(uv_idle_t *h)
{
    st__slice(h->data);
}

size_t st__chat_flush_pass(st_chat_t *c, bool all)
{
    st_chatcold_t *cc = c->cold;
    if (!cc || cc->stopping) return 0;
    st_flushpass_t *p = &cc->pass;
    if (p->phase != ST__PHASE_NONE) {
        p->again = true;
        p->again_all |= all;
        return p->queued;
    }
    p->all = all;
    p->phase = ST__PHASE_USERS;
    p->clen = 0;
    p->queued = p->evicted = 0;
    uv_idle_start(&p->idle, st__on_idle);
    st__slice(cc); /* the first slice now: flushes start without waiting a turn */
    return p->queued;
}

size_t st_chat_flush_all(st_chat_t *c)
{
    return st__chat_flush_pass(c, true);
}

void st__chat_pass_init(st_chatcold_t *cc)
{
    uv_idle_init(cc->loop, &cc->pass.idle);
    cc->pass.idle.data = cc;
    cc->pass.m_passes = st_metrics_counter(
        "strata_flush_passes_total",
        "Flush passes completed (every user, counter and idle conversation visited)", "");
}

void st__chat_pass_stop(st_chatcold_t *cc, uv_close_cb closed)
{
    uv_idle_stop(&cc->pass.idle);
    cc->pass.phase = ST__PHASE_NONE;
    uv_close((uv_handle_t *)&cc->pass.idle, closed);
}
