/* SPDX-License-Identifier: MIT */
/*
 * The marks of owners from stores written before them (marks.c), filled in the background: an
 * owner with file records and no 'L' kept reading every footer of its objects for a post to a new
 * conversation (with object storage down: refused 503, SPEC §7) until `strata rebuild-meta`.
 *
 * A walk of the chat owners' file records (users' and rooms'; st_tier_each_file_from, a page of
 * owners at a time), from the tier's tick (about once a second, only where the tier flushes: the
 * leader) and from the end of its own fetches: for each owner without 'L', its manifest is read and
 * its objects' footers asked of the cold cache, which fetches and parses them on the worker pool
 * (st_tier_wait); the loop never reads object storage. Once they are all in memory, in one turn —
 * the manifest read again, so the objects read are exactly the ones it records (rebuild-meta's
 * rule) — the conversations of every row group not masked by a delete ('Q') get their 'R' and the
 * owner its 'L': one batch. A manifest changed meanwhile only means its new objects' footers are
 * fetched too; a flush in the same turn cannot land between the read and the writes. An owner
 * being erased ('G') is left alone (its erasure takes its marks out). With storage down or an
 * object unreadable the walk stays at its page and tries again ST__BF_RETRY_US later; a request
 * never waits for it. Each call stops at what the turn has left of its budget (looplag.h).
 *
 * Not kept across restarts: each start walks once (an 'L' read per owner, a turn's budget at a
 * time); a walk that finds no owner without 'L' ends it. New owners get 'L' from their first flush.
 * /metrics: strata_marks_backfill_pending (owners this walk found without complete marks, not
 * done yet), strata_marks_backfill_done (1: a walk found none left), and
 * strata_marks_backfilled_total. Loop only.
 */
#include "internal.h"
#include "strata/looplag.h"

#include <string.h>

#define ST__BF_PAGE      32         /* owners a page: their footers fetched together */
#define ST__BF_RECORDS   2048       /* file records a page's walk looks at, at most */
#define ST__BF_RETRY_US  5000000    /* after a failed fetch (storage down) */
#define ST__BF_BUDGET_NS 1000000ull /* a call's own cap, within the turn's budget */
#define ST__BF_LEAST_NS  100000ull
/* A page whose fetch failed this many times in a row is passed over (its owners keep the footer
 * read): one object lost for good (404) held every owner after it without marks. The next walk
 * tries it again. */
#define ST__BF_FAILS 5

typedef struct {
    char o[ST__BF_PAGE][ST_TIER_OWNER_MAX];
    size_t ol[ST__BF_PAGE], n, seen;
    bool more;                           /* stopped before the end of the file records */
    uint8_t next[ST_TIER_OWNER_MAX + 1]; /* where the next page starts */
    size_t next_len;
} st__bf_page_t;

static int st__bf_file(void *arg, const char *o, size_t ol, uint64_t seq, const st_tier_file_t *f,
                       const char *key, size_t kl, const uint8_t *stats, size_t sl)
{
    (void)stats, (void)sl;
    st__bf_page_t *p = arg;
    (void)seq, (void)f, (void)key, (void)kl;
    bool same = p->n && p->ol[p->n - 1] == ol && memcmp(p->o[p->n - 1], o, ol) == 0;
    char tag = st_tier_owner_tag(o, ol);
    bool chat = (tag == 0 || tag == ST__ROOM_TAG) && ol <= ST_TIER_OWNER_MAX;
    if (!same && chat && p->n == ST__BF_PAGE) { /* the next page starts at this owner */
        memcpy(p->next, o, ol);
        p->next_len = ol;
        p->more = true;
        return 1;
    }
    if (++p->seen > ST__BF_RECORDS && ol < ST_TIER_OWNER_MAX) {
        /* past this owner's records: its name then a byte above the 0 after it in 'F' keys */
        memcpy(p->next, o, ol);
        p->next[ol] = 1;
        p->next_len = ol + 1;
        p->more = true;
        if (!same && chat) {
            memcpy(p->o[p->n], o, ol);
            p->ol[p->n++] = ol;
        }
        return 1;
    }
    if (!same && chat) {
        memcpy(p->o[p->n], o, ol);
        p->ol[p->n++] = ol;
    }
    return 0;
}

/* Owner u's marks from its objects' footers, all in memory: ST_OK (written, or nothing to do),
 * ST_EPARKED (now on the cache's want list), or the cache's error. */
static int st__bf_owner(st_chatcold_t *cc, const char *u, size_t ul, bool *wrote, uint64_t *wait)
{
    st_chat_t *c = cc->chat;
    st_manifest_t man;
    int rc = st__chat_manifest(c, u, ul, false, &man, wait);
    if (rc == ST_OK && !man.n) rc = ST_ENOTFOUND; /* no objects left: its next flush marks it */
    if (rc == ST_OK) rc = st_tier_footers_ready(cc->tier, u, ul, &man);
    /* one turn for the owner (its writes one batch with the manifest read): a record read and
     * one put per conversation, a mask read only for an owner with deleted conversations */
    bool masks = rc == ST_OK && st__chat_has_prefix(c, 'Q', u, ul);
    for (size_t i = 0; rc == ST_OK && i < man.n; i++) {
        const st_pq_meta_t *m;
        rc = st__chat_footer(cc, man.v[i].key, man.v[i].file.size, &m);
        for (size_t g = 0; rc == ST_OK && g < m->ngroups; g++) {
            const st_pq_group_t *G = &m->groups[g];
            const st_pq_group_t *P = g ? &m->groups[g - 1] : NULL; /* groups go by conversation */
            if (P && P->conv_len == G->conv_len && memcmp(P->conv, G->conv, G->conv_len) == 0 &&
                !masks)
                continue;
            uint64_t mask_id = 0;
            int64_t mask_seq;
            if (masks && st__chat_mask_get(c, u, ul, G->conv, G->conv_len, &mask_id, &mask_seq,
                                           wait) != ST_OK)
                mask_id = 0;
            if (mask_id && G->max_id <= mask_id) continue; /* a deleted conversation's (marks.c) */
            rc = st__chat_cold_mark(c, u, ul, G->conv, G->conv_len, wait);
        }
    }
    if (rc == ST_OK) rc = st__chat_marks_complete(c, u, ul, wait);
    *wrote = rc == ST_OK;
    st__chat_manifest_free(&man);
    return rc == ST_ENOTFOUND ? ST_OK : rc;
}

static void st__bf_resume(void *arg);

/* One call: pages until the turn's budget is spent, a fetch is under way, or the walk ends. */
static void st__bf_run(st_chatcold_t *cc)
{
    st_chat_t *c = cc->chat;
    uint64_t wait = 0;
    uint64_t until = uv_hrtime() + st_looplag_turn_left(ST__BF_LEAST_NS, ST__BF_BUDGET_NS);
    while (!cc->bf.done && !cc->bf.fetching) {
        st__bf_page_t p = {0};
        int rc = st_tier_each_file_from(c->store, (const char *)cc->bf.from, cc->bf.from_len,
                                        st__bf_file, &p, &wait);
        if (rc < 0) return; /* the next tick */
        bool parked = false, failed = false, late = false;
        for (size_t i = 0; i < p.n; i++) {
            const char *u = p.o[i];
            size_t ul = p.ol[i];
            uint8_t k[ST__KEY_CAP];
            const void *v;
            size_t vl;
            if (st__chat_marks_known(c, u, ul, &wait) ||
                st_store_get(c->store, k, st__chat_ukey(k, 'G', u, ul) - 1, &v, &vl, &wait) ==
                    ST_OK)
                continue;
            if (!cc->bf.counted) { /* once a page, however often it is run again */
                cc->bf.pending++;
                cc->bf.walk_found++;
            }
            if (late) continue;
            bool wrote = false;
            rc = st__bf_owner(cc, u, ul, &wrote, &wait);
            if (rc == ST_EPARKED) {
                parked = true;
            } else if (rc != ST_OK) {
                failed = true;
            } else if (wrote) {
                cc->bf.pending--;
                st_metric_add(cc->bf.m_total, 1);
            }
            late = uv_hrtime() >= until && i + 1 < p.n; /* the rest counted, done next time */
        }
        cc->bf.counted = true;
        st_metric_set(cc->bf.m_pending, (double)cc->bf.pending);
        if (parked && !failed && st_tier_wait(cc->tier, &cc->bf.w, st__bf_resume, cc)) {
            cc->bf.fetching = true; /* on the workers: the page again once it is in memory */
            return;
        }
        st_tier_release(cc->tier, cc->bf.w); /* what a page pinned, or a failed fetch's entries */
        cc->bf.w = NULL;
        if (parked || failed) {
            st_coldcache_forget(st_tier_cache(cc->tier)); /* the want list: fetched next time */
            cc->bf.retry_at = st_now_us() + ST__BF_RETRY_US;
            if (!failed || ++cc->bf.fails < ST__BF_FAILS) return;
            late = false; /* passed over: on to the next page, this walk counts it found */
        }
        cc->bf.fails = 0;
        if (late) return; /* the same page next time: its done owners are skipped */
        cc->bf.counted = false;
        memcpy(cc->bf.from, p.next, p.next_len);
        cc->bf.from_len = p.more ? p.next_len : 0;
        if (!p.more) { /* a whole walk: none found without marks ends it, else once more */
            cc->bf.done = cc->bf.walk_found == 0;
            cc->bf.walk_found = 0;
            cc->bf.pending = 0;
            st_metric_set(cc->bf.m_done, cc->bf.done);
            st_metric_set(cc->bf.m_pending, 0);
            return;
        }
        if (uv_hrtime() >= until) return;
    }
}

static void st__bf_resume(void *arg)
{
    st_chatcold_t *cc = arg;
    /* the fetch is done: the page is run again with its footers pinned by the wait (released
     * there); a member that no longer leads lets them go, and walks again when it leads */
    cc->bf.fetching = false;
    if (st_store_writable(cc->chat->store) != ST_OK) {
        st_tier_release(cc->tier, cc->bf.w);
        cc->bf.w = NULL;
        return;
    }
    st__bf_run(cc);
}

void st__chat_backfill_open(st_chatcold_t *cc)
{
    cc->bf.m_pending = st_metrics_gauge(
        "strata_marks_backfill_pending",
        "Chat owners from before the cold-rows marks that the background backfill found without "
        "them and has not done yet (on the member that flushes)",
        "");
    cc->bf.m_done = st_metrics_gauge(
        "strata_marks_backfill_done",
        "1 once a walk of the chat owners found every one's cold-rows marks complete", "");
    cc->bf.m_total = st_metrics_counter("strata_marks_backfilled_total",
                                        "Chat owners whose cold-rows marks were backfilled", "");
}

void st__chat_backfill_tick(st_chatcold_t *cc)
{
    if (cc->bf.done || cc->bf.fetching || st__chat_marks_off() || st_now_us() < cc->bf.retry_at ||
        st_store_writable(cc->chat->store) != ST_OK)
        return;
    st__bf_run(cc);
}

void st__chat_backfill_stop(st_chatcold_t *cc)
{
    st_tier_release(cc->tier, cc->bf.w); /* cancels a fetch under way: no resume */
    cc->bf.w = NULL;
    cc->bf.fetching = false;
    cc->bf.done = true; /* the tier ticks no more */
}

void st__chat_tick(void *arg)
{
    st__chat_fold_tick(arg);
    st__chat_backfill_tick(arg);
}
