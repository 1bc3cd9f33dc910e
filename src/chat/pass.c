/* SPDX-License-Identifier: MIT */
/*
 * chat's sources for the cold tier's pass (strata/tier.h; every --flush-interval, the hot store
 * at 80 %, POST /v1/admin/flush): every user (retention, then a flush queued if they have hot
 * rows: at the interval only if it is due, see st__chat_flush_due) and every idle conversation
 * (evicted, evict.c). Other members of the tier add theirs (counters: consolidation). The pass
 * runs in slices (src/cold/pass.c); flushes a slice queues start at once. A flush is queued once
 * (the engine's pending and running maps); a post that makes a user's flush due tells the tier.
 */
#include "internal.h"

#include <string.h>

#define ST__PAGE_USERS 32  /* per page: retention and a flush check each */
#define ST__PAGE_KEYS  256 /* per page: conversation records */

static bool st__want_user(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)arg, (void)key, (void)val, (void)vlen;
    return klen >= 2 && klen - 1 <= ST_CHAT_USER_MAX; /* 'T' user (or a room's) */
}

static void st__begin_users(void *arg, int flags)
{
    st_chatcold_t *cc = arg;
    cc->pass_all = flags & ST_TIER_PASS_ALL;
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
    st_tier_retain(cc->tier, name, nl);
    /* deltas not in a delta object yet are written into one (delta.c) */
    if (st__chat_has_prefix(c, 'f', name, nl)) {
        char o[ST_TIER_OWNER_MAX];
        st_tier_enqueue(cc->tier, o, st__chat_delta_owner(o, name, nl));
    }
    /* cold changes are folded into their objects within --delta-max-age (SPEC §2.2) */
    int64_t oldest = st__chat_oldest_fold(c, name, nl);
    if (oldest && oldest <= st_now_us() - (int64_t)cc->delta_max_age_us)
        st_tier_compact(cc->tier, name, nl, ST_TIER_COMPACT_FOLD);
    if (st__chat_get_fixed(c->store, k, st__chat_ukey(k, 'T', name, nl) - 1, &tot, sizeof tot,
                           &wait) == ST_OK &&
        st__chat_coldstat(c, name, nl, &cs, &wait) == ST_OK) {
        int64_t hot = st__chat_hot_rows(c, name, nl, tot.total, &cs);
        if (hot > 0 && (cc->pass_all || st__chat_flush_due(c, name, nl, hot)))
            st_tier_enqueue(cc->tier, name, nl);
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

void st__chat_sources(st_chatcold_t *cc)
{
    cc->sources[0] = (st_tier_source_t){.name = "chat users",
                                        .prefix = 'T',
                                        .page = ST__PAGE_USERS,
                                        .order = ST_TIER_ORDER_FIRST,
                                        .want = st__want_user,
                                        .act = st__act_user,
                                        .begin = st__begin_users,
                                        .arg = cc};
    cc->sources[1] = (st_tier_source_t){.name = "chat idle conversations",
                                        .prefix = 'C',
                                        .page = ST__PAGE_KEYS,
                                        .order = ST_TIER_ORDER_LAST,
                                        .want = st__want_conv,
                                        .act = st__act_evict,
                                        .begin = st__begin_evict,
                                        .end = st__end_evict,
                                        .arg = cc};
}
