/* SPDX-License-Identifier: MIT */
/*
 * chat's sources for the cold tier's pass (strata/tier.h; every --flush-interval, the hot store
 * at 80 %, POST /v1/admin/flush): every user (retention, then a flush queued if they have hot
 * rows: at the interval only if it is due, see st__chat_flush_due) and every idle conversation
 * (evicted, evict.c). Other modules add theirs (counters: consolidation) with
 * st_chat_cold_source. The pass runs in slices (src/cold/pass.c); flushes a slice queues start
 * at once. A flush is queued once (the pending and running maps); a post that makes a user's
 * flush due queues it itself.
 */
#include "internal.h"

#include <string.h>

#define ST__PAGE_USERS 32  /* per page: retention and a flush check each */
#define ST__PAGE_KEYS  256 /* per page: conversation records */

enum { ST__PASS_ALL = 1 }; /* every user with hot rows (else only those due) */

static bool st__want_user(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)arg, (void)key, (void)val, (void)vlen;
    return klen >= 2 && klen - 1 <= ST_NAME_MAX; /* 'T' user */
}

static void st__begin_users(void *arg, int flags)
{
    st_chatcold_t *cc = arg;
    cc->pass_all = flags & ST__PASS_ALL;
    cc->pass_queued = 0;
}

static void st__act_user(void *arg, const void *key, size_t klen)
{
    st_chatcold_t *cc = arg;
    st_chat_t *c = cc->chat;
    uint64_t wait = 0;
    const char *name = (const char *)key + 1;
    size_t nl = klen - 1;
    uint8_t k[ST__KEY_CAP];
    st_totals_t tot;
    st_coldstat_t cs;
    st__chat_retention(c, name, nl);
    if (st__chat_get_fixed(c->store, k, st__chat_ukey(k, 'T', name, nl) - 1, &tot, sizeof tot,
                           &wait) == ST_OK &&
        st__chat_coldstat(c, name, nl, &cs, &wait) == ST_OK && tot.total > cs.rows &&
        (cc->pass_all || st__chat_flush_due(c, name, nl, tot.total - cs.rows))) {
        st__chat_flush_enqueue(cc, name, nl);
        cc->pass_queued++;
    }
}

static bool st__want_conv(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_chatcold_t *cc = arg;
    return st__chat_evictable(key, klen, val, vlen, cc->evict_before);
}

static void st__begin_evict(void *arg, int flags)
{
    st_chatcold_t *cc = arg;
    (void)flags;
    cc->evict_before = st_now_us() - (int64_t)cc->hot_ttl_us;
    cc->pass_evicted = 0;
}

static void st__act_evict(void *arg, const void *key, size_t klen)
{
    st_chatcold_t *cc = arg;
    uint64_t wait = 0;
    st_store_del(cc->chat->store, key, klen, &wait);
    cc->pass_evicted++;
}

static void st__end_evict(void *arg)
{
    st_chatcold_t *cc = arg;
    if (!cc->pass_evicted) return;
    st_metric_add(cc->m_evicted, (double)cc->pass_evicted);
    st_info("cold: evicted %zu idle conversations from the hot store", cc->pass_evicted);
}

size_t st__chat_flush_pass(st_chat_t *c, bool all)
{
    st_chatcold_t *cc = c->cold;
    if (!cc || cc->tier.stopping) return 0;
    st_tier_pass_start(cc->tier.pass, all ? ST__PASS_ALL : 0);
    return cc->pass_queued;
}

size_t st_chat_flush_all(st_chat_t *c)
{
    return st__chat_flush_pass(c, true);
}

void st_chat_cold_source(st_chat_t *c, st_tier_source_t *src)
{
    if (c->cold) st_tier_pass_add(c->cold->tier.pass, src);
}

static void st__after_slice(void *arg)
{
    st__chat_flush_pump(arg); /* what this slice queued starts now */
}

void st__chat_pass_init(st_chatcold_t *cc)
{
    st_tier_pass_open(&cc->tier.pass, cc->tier.loop, cc->chat->store, st__after_slice, cc);
    cc->src_users = (st_tier_source_t){.name = "chat users",
                                       .prefix = 'T',
                                       .page = ST__PAGE_USERS,
                                       .order = ST_TIER_ORDER_FIRST,
                                       .want = st__want_user,
                                       .act = st__act_user,
                                       .begin = st__begin_users,
                                       .arg = cc};
    cc->src_evict = (st_tier_source_t){.name = "chat idle conversations",
                                       .prefix = 'C',
                                       .page = ST__PAGE_KEYS,
                                       .order = ST_TIER_ORDER_LAST,
                                       .want = st__want_conv,
                                       .act = st__act_evict,
                                       .begin = st__begin_evict,
                                       .end = st__end_evict,
                                       .arg = cc};
    st_tier_pass_add(cc->tier.pass, &cc->src_users);
    st_tier_pass_add(cc->tier.pass, &cc->src_evict);
}

void st__chat_pass_stop(st_chatcold_t *cc, void (*closed)(void *arg))
{
    st_tier_pass_close(cc->tier.pass, closed, cc);
    cc->tier.pass = NULL;
}
