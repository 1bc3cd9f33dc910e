/* SPDX-License-Identifier: MIT */
/*
 * The marks of owners from stores written before them (marks.c), filled in the background: an
 * owner with file records and no 'L' kept reading every footer of its objects for a post to a new
 * conversation (with object storage down: refused 503, SPEC §7) until `strata rebuild-meta`.
 *
 * A walk of the chat owners' file records (users' and rooms'; st_tier_each_file_from, a page of
 * owners at a time), from the tier's tick (about once a second, only where the tier flushes: the
 * leader), from the end of its own fetches, and at the next turn while it has more to do: for each
 * owner without 'L', its manifest is read and its objects' footers asked of the cold cache, which
 * fetches and parses them on the worker pool (st_tier_wait); the loop never reads object storage.
 * Once they are in memory, the conversations of every row group not masked by a delete ('Q') get
 * their 'R', as many groups a turn as the turn's budget allows (an owner of thousands of objects
 * takes several turns and fetches, the only owner run until it is done; a fetch's footers stay
 * pinned until they are marked, then go). Each object's file record is read before it is marked:
 * one no longer recorded (its owner erased since) gets none. A mark too many costs a footer read,
 * never a wrong answer, so each turn's marks go in that turn's batch; 'L' alone needs the
 * manifest: when every object read is marked, the manifest is read again and, in that turn, 'L'
 * goes only if each object it records now is one whose conversations were marked (rebuild-meta's
 * rule). Objects recorded meanwhile (a flush's, a compaction's) are read and marked first, then
 * the check again. An owner being erased ('G') is left alone (its erasure takes its marks out).
 * With storage down or an object unreadable the walk stays at its page and tries again
 * ST__BF_RETRY_US later; a request never waits for it. Each call stops at what the turn has left
 * of its budget (looplag.h).
 *
 * Kept across restarts, replicated as every write: "\0chat_backfill" (internal.h) holds where the
 * walk's next page starts and how many owners it found without marks so far (staged in the batch
 * of each page's end), or 'd' once a walk found none: a start after that walks nothing, one in the
 * middle of a walk goes on at its page. New owners get 'L' from their first flush; rebuild-meta
 * takes 'd' out when it leaves an owner without 'L'. /metrics: strata_marks_backfill_pending
 * (owners this walk found without complete marks, not done yet), strata_marks_backfill_done (1: a
 * walk found none left), strata_marks_backfilled_total, strata_marks_backfill_checked_total (owners
 * the walk looked at, each once a page). Loop only.
 */
#include "internal.h"
#include "strata/looplag.h"

#include <stdlib.h>
#include <string.h>

#define ST__BF_PAGE      32         /* owners a page: their footers fetched together */
#define ST__BF_RECORDS   2048       /* file records a page's walk looks at, at most */
#define ST__BF_RETRY_US  5000000    /* after a failed fetch (storage down) */
#define ST__BF_BUDGET_NS 1000000ull /* a call's own cap, within the turn's budget */
#define ST__BF_LEAST_NS  100000ull
#define ST__BF_MORE_MS   1  /* the walk's next turn */
#define ST__BF_LATER     1  /* not an error: an owner's marking goes on at the next call */
#define ST__BF_WANT      32 /* footers of one owner a fetch */
/* A page whose fetch failed this many times in a row is passed over (its owners keep the footer
 * read): one object lost for good (404) held every owner after it without marks. The next walk
 * tries it again. */
#define ST__BF_FAILS 5

/* test-only: STRATA_TEST_BF_HOLD_MS=N marks one object of an owner a call, and the walk's next
 * call comes N ms later at the earliest (a tick's): time for an erasure of the owner between two
 * of its objects, with the owner, its manifest and its pinned footers kept. 0: off. */
static int64_t st__bf_hold_us(void)
{
    static int64_t us = -1;
    if (us < 0) {
        const char *e = getenv("STRATA_TEST_BF_HOLD_MS");
        us = e ? strtoll(e, NULL, 10) * 1000 : 0;
        if (us < 0) us = 0;
    }
    return us;
}

static const char st__bf_key[] = "\0chat_backfill";
#define ST__BF_KEY ((const uint8_t *)st__bf_key), (sizeof st__bf_key - 1)

typedef struct st__bf_page {
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

/* ---- the durable record: where the walk is, or that it is done ---- */

/* The record into cc->bf (done, from, walk_found); none (a store from before it): a walk from the
 * first owner. An unreadable one is a whole walk too (reads of 'L', never a mark missed). */
static int st__bf_load(st_chatcold_t *cc, uint64_t *wait)
{
    const void *v;
    size_t vl;
    int rc = st_store_get(cc->chat->store, ST__BF_KEY, &v, &vl, wait);
    cc->bf.from_len = 0;
    cc->bf.walk_found = 0;
    if (rc == ST_ENOTFOUND) return ST_OK;
    if (rc != ST_OK) return rc;
    const uint8_t *p = v;
    if (vl < 5 || vl - 5 > sizeof cc->bf.from) return ST_OK;
    cc->bf.done = p[0] == 'd';
    cc->bf.walk_found = st_be32_get(p + 1);
    cc->bf.from_len = vl - 5;
    memcpy(cc->bf.from, p + 5, cc->bf.from_len);
    return ST_OK;
}

static int st__bf_save(st_chatcold_t *cc, uint64_t *wait)
{
    uint8_t v[5 + sizeof cc->bf.from];
    v[0] = cc->bf.done ? 'd' : 'w';
    st_be32_put(v + 1, cc->bf.walk_found > UINT32_MAX ? UINT32_MAX : (uint32_t)cc->bf.walk_found);
    memcpy(v + 5, cc->bf.from, cc->bf.from_len);
    return st_store_put(cc->chat->store, ST__BF_KEY, v, 5 + cc->bf.from_len, wait);
}

int st__chat_backfill_owed(st_chat_t *c, uint64_t *wait)
{
    int rc = st_store_del(c->store, ST__BF_KEY, wait);
    return rc == ST_ENOTFOUND ? ST_OK : rc;
}

/* ---- one owner, across turns ---- */

static void st__bf_drop(st_chatcold_t *cc)
{
    st__chat_manifest_free(&cc->bf.man);
    free(cc->bf.marked);
    cc->bf.marked = NULL;
    cc->bf.cur_len = 0;
}

/* A footer not in memory at object i: the next ones' misses go on the cache's want list too, for
 * one fetch, up to ST__BF_WANT of them and until `until` (a lookup each): a wait starts a worker's
 * job per footer, and hundreds of them started in one turn held the loop for 5-12 ms (one per
 * job's wake-up of the pool, and the woken workers taking the cores). ST_EPARKED, or an error. */
static int st__bf_want(st_chatcold_t *cc, size_t i, uint64_t until)
{
    size_t wanted = 1;
    for (i++; i < cc->bf.man.n && wanted < ST__BF_WANT && uv_hrtime() < until; i++) {
        const st_tier_obj_t *o = &cc->bf.man.v[i];
        const st_pq_meta_t *m;
        int rc = cc->bf.marked[i] ? ST_OK : st__chat_footer(cc, o->key, o->file.size, &m);
        if (rc == ST_EPARKED)
            wanted++;
        else if (rc != ST_OK)
            return rc;
    }
    return ST_EPARKED;
}

/* Marks the conversations of the objects not marked yet, in file order, a row group at a time
 * until `until` (one group at least: *worked): ST_OK when all are, ST__BF_LATER at the deadline,
 * ST_EPARKED at a footer not in memory (it and the next ones fetched), or the error. A record read
 * and one put per conversation, a mask read only for an owner with deleted conversations. */
static int st__bf_mark(st_chatcold_t *cc, uint64_t until, bool *worked, uint64_t *wait)
{
    st_chat_t *c = cc->chat;
    const char *u = cc->bf.cur;
    size_t ul = cc->bf.cur_len;
    bool masks = st__chat_has_prefix(c, 'Q', u, ul);
    for (; cc->bf.obj < cc->bf.man.n; cc->bf.obj++, cc->bf.group = 0) {
        if (cc->bf.marked[cc->bf.obj]) continue;
        const st_tier_obj_t *o = &cc->bf.man.v[cc->bf.obj];
        /* the manifest was read turns ago: an object no longer recorded (the owner erased since,
         * 'G' come and gone; a swap's) names nobody to mark, even with its footer pinned (one
         * get; the object it became is marked from the manifest read again at the end) */
        if (!st_tier_file_records(c->store, u, ul, o->seq, o->key, wait)) continue;
        const st_pq_meta_t *m;
        int rc = st__chat_footer(cc, o->key, o->file.size, &m);
        if (rc == ST_EPARKED) return st__bf_want(cc, cc->bf.obj, until);
        if (rc != ST_OK) return rc;
        for (; cc->bf.group < m->ngroups; cc->bf.group++) {
            if (*worked && uv_hrtime() >= until) return ST__BF_LATER;
            *worked = true;
            size_t g = cc->bf.group;
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
            if (rc != ST_OK) return rc;
        }
        cc->bf.marked[cc->bf.obj] = true;
        if (st__bf_hold_us() && cc->bf.obj + 1 < cc->bf.man.n) {
            cc->bf.obj++, cc->bf.group = 0;
            return ST__BF_LATER;
        }
    }
    return ST_OK;
}

/* Every object read is marked: the manifest read again, and in this turn 'L' if each object it
 * records is one of them (ST_OK, *wrote). Objects recorded since (a flush's, a compaction's) are
 * the ones to mark now (ST__BF_LATER); none left: nothing to do (its next flush marks it). Both
 * manifests go by file number; a compaction's object takes its first old one's number, so the key
 * says whether it is the same object. */
static int st__bf_settle(st_chatcold_t *cc, bool *wrote, uint64_t *wait)
{
    st_manifest_t now;
    int rc = st__chat_manifest(cc->chat, cc->bf.cur, cc->bf.cur_len, false, &now, wait);
    if (rc != ST_OK) {
        st__chat_manifest_free(&now);
        return rc == ST_ENOTFOUND ? ST_OK : rc;
    }
    bool *marked = st_calloc(now.n + 1, sizeof *marked), all = true;
    const st_manifest_t *was = &cc->bf.man;
    for (size_t i = 0, j = 0; i < now.n; i++) {
        while (j < was->n && was->v[j].seq < now.v[i].seq)
            j++;
        marked[i] = j < was->n && was->v[j].seq == now.v[i].seq && cc->bf.marked[j] &&
                    strcmp(was->v[j].key, now.v[i].key) == 0;
        all = all && marked[i];
    }
    if (all) {
        rc = now.n ? st__chat_marks_complete(cc->chat, cc->bf.cur, cc->bf.cur_len, wait) : ST_OK;
        *wrote = rc == ST_OK && now.n;
        free(marked);
        st__chat_manifest_free(&now);
        return rc;
    }
    st__chat_manifest_free(&cc->bf.man);
    free(cc->bf.marked);
    cc->bf.man = now;
    cc->bf.marked = marked;
    cc->bf.obj = cc->bf.group = 0;
    return ST__BF_LATER;
}

/* Owner u's marks, from where the last call left them: ST_OK (its 'L' written: *wrote, or nothing
 * to do), ST__BF_LATER (the turn's budget spent: it goes on next call), ST_EPARKED (footers on the
 * cache's want list), or the error (the owner starts over next time). */
static int st__bf_owner(st_chatcold_t *cc, const char *u, size_t ul, uint64_t until, bool *wrote,
                        uint64_t *wait)
{
    if (cc->bf.cur_len != ul || memcmp(cc->bf.cur, u, ul) != 0) {
        st__bf_drop(cc);
        st_manifest_t man;
        int rc = st__chat_manifest(cc->chat, u, ul, false, &man, wait);
        if (rc == ST_OK && !man.n) rc = ST_ENOTFOUND; /* no objects left: its next flush marks it */
        if (rc != ST_OK) {
            st__chat_manifest_free(&man);
            return rc == ST_ENOTFOUND ? ST_OK : rc;
        }
        memcpy(cc->bf.cur, u, ul);
        cc->bf.cur_len = ul;
        cc->bf.man = man;
        cc->bf.marked = st_calloc(man.n, sizeof *cc->bf.marked);
        cc->bf.obj = cc->bf.group = 0;
    }
    bool worked = false;
    for (;;) {
        int rc = st__bf_mark(cc, until, &worked, wait);
        /* the manifest read again in a turn of its own once marking took this one's budget */
        if (rc == ST_OK && worked && uv_hrtime() >= until) rc = ST__BF_LATER;
        if (rc == ST_OK) rc = st__bf_settle(cc, wrote, wait);
        if (rc == ST__BF_LATER && uv_hrtime() < until && !st__bf_hold_us())
            continue; /* objects recorded since */
        if (rc != ST__BF_LATER && rc != ST_EPARKED) st__bf_drop(cc);
        return rc;
    }
}

/* ---- the walk ---- */

/* The next page: where the record says the walk is (another leader's, or this one's before a
 * restart), then its owners. */
static int st__bf_walk_page(st_chatcold_t *cc, uint64_t *wait)
{
    int rc = st__bf_load(cc, wait);
    if (rc != ST_OK || cc->bf.done) {
        st_metric_set(cc->bf.m_done, cc->bf.done);
        return rc;
    }
    st__bf_page_t *p = st_calloc(1, sizeof *p);
    rc = st_tier_each_file_from(cc->chat->store, (const char *)cc->bf.from, cc->bf.from_len,
                                st__bf_file, p, wait);
    if (rc < 0) {
        free(p);
        return rc;
    }
    cc->bf.page = p;
    cc->bf.counted = false;
    st_metric_add(cc->bf.m_checked, (double)p->n);
    return ST_OK;
}

/* The page is done (or passed over): the record moves on in this turn's batch. */
static void st__bf_next(st_chatcold_t *cc)
{
    st__bf_page_t *p = cc->bf.page;
    uint64_t wait = 0;
    st__bf_drop(cc); /* an owner passed over with its page starts over next walk */
    cc->bf.counted = false;
    memcpy(cc->bf.from, p->next, p->next_len);
    cc->bf.from_len = p->more ? p->next_len : 0;
    if (!p->more) { /* a whole walk: none found without marks ends it, else once more */
        cc->bf.done = cc->bf.walk_found == 0;
        cc->bf.walk_found = 0;
        cc->bf.pending = 0;
        st_metric_set(cc->bf.m_done, cc->bf.done);
        st_metric_set(cc->bf.m_pending, 0);
    }
    free(p);
    cc->bf.page = NULL;
    if (st__bf_save(cc, &wait) != ST_OK) /* the next page walked from where the record says */
        st_warn("chat: the marks backfill's place could not be staged; the walk goes on");
}

static void st__bf_resume(void *arg);

static void st__bf_closed(uv_handle_t *h)
{
    free(h);
}

static void st__bf_on_more(uv_timer_t *h)
{
    st__chat_backfill_tick(h->data);
}

/* More of the walk at the next turn, not the next tick (a second later): a timer of its own, made
 * the first time (a tier whose backfill never needs it has none to close). */
static void st__bf_more(st_chatcold_t *cc)
{
    if (!cc->bf.more) {
        cc->bf.more = st_calloc(1, sizeof *cc->bf.more);
        uv_timer_init(st_tier_loop(cc->tier), cc->bf.more);
        uv_unref((uv_handle_t *)cc->bf.more);
        cc->bf.more->data = cc;
    }
    uv_timer_start(cc->bf.more, st__bf_on_more, ST__BF_MORE_MS, 0);
}

/* One call: pages until the turn's budget is spent, a fetch is under way, or the walk ends. */
static void st__bf_run(st_chatcold_t *cc)
{
    st_chat_t *c = cc->chat;
    uint64_t wait = 0;
    uint64_t until = uv_hrtime() + st_looplag_turn_left(ST__BF_LEAST_NS, ST__BF_BUDGET_NS);
    while (!cc->bf.done && !cc->bf.fetching) {
        if (!cc->bf.page && (st__bf_walk_page(cc, &wait) != ST_OK || cc->bf.done))
            return; /* the next tick */
        st__bf_page_t *p = cc->bf.page;
        bool parked = false, failed = false, late = false, held = false;
        /* an owner going on from the last call (its footers fetched) is the only one run until it
         * is done: the others, run with it, would each drop its progress and start over, needing
         * every footer pinned so far, not only the last fetch's (2,000 objects pinned 2,000
         * footers beyond --cold-cache); they run once it is done, in this call or the next */
        bool going = cc->bf.cur_len != 0;
        for (size_t i = 0; i < p->n; i++) {
            const char *u = p->o[i];
            size_t ul = p->ol[i];
            uint8_t k[ST__KEY_CAP];
            const void *v;
            size_t vl;
            if (st__chat_marks_known(c, u, ul, &wait) ||
                st_store_get(c->store, k, st__chat_ukey(k, 'G', u, ul) - 1, &v, &vl, &wait) ==
                    ST_OK) {
                if (cc->bf.cur_len == ul && memcmp(cc->bf.cur, u, ul) == 0) {
                    st__bf_drop(cc);
                    going = false;
                }
                continue;
            }
            if (!cc->bf.counted) { /* once a page, however often it is run again */
                cc->bf.pending++;
                cc->bf.walk_found++;
            }
            if (late) continue;
            bool cur = cc->bf.cur_len == ul && memcmp(cc->bf.cur, u, ul) == 0;
            if (going && !cur) {
                held = true; /* after the owner going on */
                continue;
            }
            bool wrote = false;
            int rc = st__bf_owner(cc, u, ul, until, &wrote, &wait);
            going = going && rc == ST_EPARKED; /* parked again: the others wait still */
            if (rc == ST__BF_LATER) {
                late = true; /* the same owner goes on next time */
            } else if (rc == ST_EPARKED) {
                parked = true;
            } else if (rc != ST_OK) {
                failed = true;
            } else if (wrote) {
                cc->bf.pending--;
                st_metric_add(cc->bf.m_total, 1);
            }
            late = late || (uv_hrtime() >= until && i + 1 < p->n); /* the rest counted */
        }
        cc->bf.counted = true;
        st_metric_set(cc->bf.m_pending, (double)cc->bf.pending);
        if (parked && !failed) {
            /* the last fetch's footers are marked (the owner going on is past them, the others
             * were done or run after it): this fetch pins only what it asks for */
            st_tier_release(cc->tier, cc->bf.w);
            cc->bf.w = NULL;
        }
        if (parked && !failed && st_tier_wait(cc->tier, &cc->bf.w, st__bf_resume, cc)) {
            cc->bf.fetching = true; /* on the workers: the page again once it is in memory */
            return;
        }
        if (!cc->bf.cur_len || failed) {         /* an owner going on keeps its footers pinned */
            st_tier_release(cc->tier, cc->bf.w); /* what a page pinned, or a failed fetch's */
            cc->bf.w = NULL;
        }
        if (parked || failed) {
            st_coldcache_forget(st_tier_cache(cc->tier)); /* the want list: fetched next time */
            cc->bf.retry_at = st_now_us() + ST__BF_RETRY_US;
            if (!failed || ++cc->bf.fails < ST__BF_FAILS) return;
            late = held = false; /* passed over: on to the next page, this walk counts it found */
        }
        cc->bf.fails = 0;
        if (late || held) { /* the same page next time: its done owners are skipped */
            if (st__bf_hold_us() && late) { /* the log line: what a test waits for */
                cc->bf.retry_at = st_now_us() + st__bf_hold_us();
                st_warn("chat: the marks backfill holds at an owner (STRATA_TEST_BF_HOLD_MS)");
            } else {
                st__bf_more(cc);
            }
            return;
        }
        st__bf_next(cc);
        if (cc->bf.done || !cc->bf.from_len) return;
        if (uv_hrtime() >= until) {
            st__bf_more(cc);
            return;
        }
    }
}

/* A member that no longer leads lets go of the owner, the page and their footers: when it leads
 * again, the walk goes on from the record (another leader may have moved it, and erased the
 * owner: its manifest and footers name what no longer is). */
static void st__bf_abandon(st_chatcold_t *cc)
{
    st_tier_release(cc->tier, cc->bf.w); /* cancels a fetch under way: no resume */
    cc->bf.w = NULL;
    cc->bf.fetching = false;
    st__bf_drop(cc);
    free(cc->bf.page);
    cc->bf.page = NULL;
    cc->bf.counted = false;
    cc->bf.pending = 0; /* counted again from the page the record names */
    st_metric_set(cc->bf.m_pending, 0);
}

static void st__bf_resume(void *arg)
{
    st_chatcold_t *cc = arg;
    /* the fetch is done: the page is run again with its footers pinned by the wait (released
     * there) */
    cc->bf.fetching = false;
    if (st_store_writable(cc->chat->store) != ST_OK) {
        st__bf_abandon(cc);
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
    cc->bf.m_checked = st_metrics_counter(
        "strata_marks_backfill_checked_total",
        "Chat owners the cold-rows marks backfill looked at (each once a page of its walk)", "");
    /* a walk done before this start: none at all now (shown at once) */
    uint64_t wait = 0;
    if (!st__chat_marks_off() && st__bf_load(cc, &wait) == ST_OK)
        st_metric_set(cc->bf.m_done, cc->bf.done);
}

void st__chat_backfill_tick(st_chatcold_t *cc)
{
    if (cc->bf.done || st__chat_marks_off()) return;
    if (st_store_writable(cc->chat->store) != ST_OK) {
        if (cc->bf.page || cc->bf.cur_len || cc->bf.w || cc->bf.fetching) st__bf_abandon(cc);
        return;
    }
    if (cc->bf.fetching || st_now_us() < cc->bf.retry_at) return;
    st__bf_run(cc);
}

void st__chat_backfill_stop(st_chatcold_t *cc)
{
    st_tier_release(cc->tier, cc->bf.w); /* cancels a fetch under way: no resume */
    cc->bf.w = NULL;
    cc->bf.fetching = false;
    cc->bf.done = true; /* the tier ticks no more */
    st__bf_drop(cc);
    free(cc->bf.page);
    cc->bf.page = NULL;
    if (cc->bf.more) { /* freed once closed: cc may go first */
        uv_timer_stop(cc->bf.more);
        uv_close((uv_handle_t *)cc->bf.more, st__bf_closed);
        cc->bf.more = NULL;
    }
}

void st__chat_tick(void *arg)
{
    st__chat_fold_tick(arg);
    st__chat_backfill_tick(arg);
}
