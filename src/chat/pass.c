/* SPDX-License-Identifier: MIT */
/*
 * chat's sources for the cold tier's pass (strata/tier.h; every --flush-interval, the hot store
 * at 80 %, POST /v1/admin/flush): every user (retention, then a flush queued if they have hot
 * rows: at the interval only if it is due, see st__chat_flush_due) and every idle conversation
 * (evicted, evict.c). Other members of the tier add theirs (counters: consolidation). The pass
 * runs in slices (src/cold/pass.c); flushes a slice queues start at once. A flush is queued once
 * (the engine's pending and running maps); a post that makes a user's flush due tells the tier.
 *
 * Folds keep their own clock: the tier's tick sweeps the fold markers ('e' u 0 id: a cold row
 * changed; 'z' u 0 seq: an object to rewrite, both -> i64 when), a page a tick, and queues a
 * fold compaction of every owner (a user, or a room: its bytes, keys.c) with a marker older than
 * --delta-max-age. A sweep starts every quarter of --delta-max-age (1 s to 60 s), so a cold
 * change is in its object within about 1.25 × --delta-max-age plus the compaction's own time,
 * whatever --flush-interval is (SPEC §2.2, v5 §5.1).
 */
#include "internal.h"

#include <string.h>

#define ST__PAGE_USERS 32  /* per page: retention and a flush check each */
#define ST__PAGE_KEYS  256 /* per page: conversation records */

static bool st__want_user(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)arg, (void)key, (void)val, (void)vlen;
    return klen >= 2 && klen - 1 <= ST_CHAT_OWNER_MAX; /* 'T' owner (any kind's bytes) */
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
    /* cold changes are folded by the sweep below, on the tier's tick */
    if (st__chat_get_fixed(c->store, k, st__chat_ukey(k, 'T', name, nl) - 1, &tot, sizeof tot,
                           &wait) == ST_OK &&
        st_tier_stat(c->store, name, nl, &cs, &wait) == ST_OK) {
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

/* ---- the fold sweep ---- */

#define ST__FOLD_PAGE   256 /* marker keys looked at per tick */
#define ST__FOLD_OWNERS 16  /* owners queued per tick, at most */

typedef struct {
    int64_t due; /* markers at or before this are late */
    size_t seen;
    bool stopped; /* the page ended before the prefix did: resume at from */
    uint8_t from[ST__KEY_CAP];
    size_t from_len;
    char owners[ST__FOLD_OWNERS][ST_CHAT_OWNER_MAX];
    size_t olen[ST__FOLD_OWNERS], n;
} st__fold_page_t;

static int st__fold_marker(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st__fold_page_t *p = arg;
    const uint8_t *k = key;
    const uint8_t *z = klen > 1 ? memchr(k + 1, 0, klen - 1) : NULL;
    size_t ol = z ? (size_t)(z - (k + 1)) : 0;
    int64_t t;
    bool late = vlen == 8 && ol && ol <= ST_CHAT_OWNER_MAX && (memcpy(&t, val, 8), t <= p->due);
    bool known = p->n && p->olen[p->n - 1] == ol && !memcmp(p->owners[p->n - 1], k + 1, ol);
    if (p->seen == ST__FOLD_PAGE || (late && !known && p->n == ST__FOLD_OWNERS)) {
        if (klen > sizeof p->from) return 1; /* cannot be: keys are built within the cap */
        memcpy(p->from, key, klen);
        p->from_len = klen;
        p->stopped = true;
        return 1;
    }
    p->seen++;
    if (late && !known) {
        memcpy(p->owners[p->n], k + 1, ol);
        p->olen[p->n++] = ol;
    }
    return 0;
}

void st__chat_fold_tick(void *arg)
{
    st_chatcold_t *cc = arg;
    int64_t now = st_now_us();
    if (!cc->fold_ks) {
        if (now < cc->fold_next_us) return;
        int64_t every = (int64_t)cc->delta_max_age_us / 4;
        if (every < 1000000) every = 1000000;
        if (every > 60000000) every = 60000000;
        cc->fold_next_us = now + every;
        cc->fold_ks = 'e';
        cc->fold_from_len = 0;
    }
    st__fold_page_t p = {.due = now - (int64_t)cc->delta_max_age_us};
    uint8_t pre = (uint8_t)cc->fold_ks;
    uint64_t wait = 0;
    st_store_scan_from(cc->chat->store, &pre, 1, cc->fold_from_len ? cc->fold_from : NULL,
                       cc->fold_from_len, st__fold_marker, &p, &wait);
    for (size_t i = 0; i < p.n; i++)
        st_tier_compact(cc->tier, p.owners[i], p.olen[i], ST_TIER_COMPACT_FOLD);
    if (p.stopped) {
        memcpy(cc->fold_from, p.from, p.from_len);
        cc->fold_from_len = p.from_len;
        return;
    }
    cc->fold_ks = cc->fold_ks == 'e' ? 'z' : 0; /* this prefix is done: the next, or rest */
    cc->fold_from_len = 0;
}
