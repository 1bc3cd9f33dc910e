/* SPDX-License-Identifier: MIT */
/*
 * The reconciliation queue. Entries are keyed by kind + name, so marking a key twice costs
 * nothing; they are kept in marking order and worked off every interval in steps of bounded
 * work (a backlog continues in short steps rather than stalling the loop). A conversation is
 * recounted in one call; a distinct counter's members are counted in slices across steps (see
 * counters.h: exact despite adds in between). Repairs write the truth counted.
 *
 * A pass over every key (POST /v1/admin/reconcile with no body) runs the same way: pages of
 * conversations, then of distinct counters, from a cursor, within each step's budget, after
 * the queue's work.
 *
 * The queue is bounded (--reconcile-queue keys, st__overflow): past it, marks fall back to that
 * pass, so a burst of writes to a million conversations costs a pass, not a million entries.
 */
#include "strata/reconcile.h"
#include "strata/counters.h"
#include "strata/metrics.h"
#include "strata/store_group.h"

#include <stdlib.h>
#include <string.h>

#define ST__BUDGET_NS  (1500u * 1000) /* of loop time per step */
#define ST__MEMBERS    1024           /* members counted between two looks at the clock */
#define ST__RECON_PAGE 64             /* keys of a pass fetched at a time */

enum { ST__CONV = 'C', ST__DISTINCT = 'D' };

typedef struct st_rentry {
    st_map_node_t node;
    st_list_t link;     /* in the queue, oldest mark first */
    uint64_t dirty_gen; /* bumped by every mark */
    uint64_t last_ms;   /* when it was last recounted (spacing) */
    uint32_t epoch;     /* r->epoch when queued: an older one is in r->drop (st__overflow) */
    uint32_t klen;
    char key[]; /* kind, then user 0 conversation, or the counter name */
} st_rentry_t;

struct st_reconcile {
    uv_loop_t *loop;
    st_store_t *store;
    st_chat_t *chat;
    st_tier_t *tier; /* borrowed: cold footers are fetched through its wait */
    uint64_t interval_ms;
    uv_timer_t timer;
    st_map_t map;
    /* st_rentry_t, by link: marked and never recounted (queue, oldest mark first), or recounted
     * and left to come back (spaced: the cold footers it needs were being fetched, or it was
     * marked again meanwhile), in the order recounted, so by last_ms. A step takes the queue
     * whole and the spaced ones only from the front, up to the first whose interval has not
     * passed: it never walks keys it will not recount (a walk of every marked key each step was
     * a fifth of the process's CPU while 60,000 conversations cooled). */
    st_list_t queue, spaced;
    /* entries an overflow dropped (covered by a pass), freed by the steps within their budget so
     * that the post which overflowed frees nothing; still in the map (and its count) until then */
    st_list_t drop;
    uint32_t epoch; /* bumped by every drop */
    size_t queue_max;
    /* the distinct counter being recounted across steps, and its queue entry (NULL: the pass's) */
    st_distinct_recount_t *job;
    st_rentry_t *job_entry;
    uint64_t job_gen; /* the entry's generation when its job began */
    st_buf_t job_name;
    /* the pass over every key: phase 0 none, 1 conversations, 2 counters */
    int all_phase;
    bool all_again; /* asked for again while running: one more pass after it */
    bool all_asked; /* POST /v1/admin/reconcile (paced at a quarter of the loop, an overflow's
                     * at a tenth like the queue) */
    uint64_t all_started, all_done;
    st_buf_t all_cursor, all_page; /* page: kind, u8 len(s), name(s) per key */
    size_t all_off, all_keys;
    int64_t all_drift;
    uint8_t counter_cursor[ST_KEY_MAX + 1];
    size_t counter_clen;
    st_metric_t *m_runs, *m_queue, *m_keys[2], *m_drift[2], *m_passes, *m_overflows;
};

static uint64_t st__all_begin(st_reconcile_t *r, bool asked);

/* Appends every item of src to dst (src is left empty): O(1). */
static void st__list_splice(st_list_t *dst, st_list_t *src)
{
    if (st_list_empty(src)) return;
    src->next->prev = dst->prev;
    dst->prev->next = src->next;
    src->prev->next = dst;
    dst->prev = src->prev;
    st_list_init(src);
}

/* A mark of a key not queued, with the queue full (map.count at --reconcile-queue). The rule:
 * every key marked must be recounted after its mark, by the queue or by a pass over every key
 * that reaches the key after the mark. So the mark is not stored, and
 * - while a pass runs that is already asked to run once more (all_again), that next pass covers
 *   it (and every key queued); so does the running pass for a distinct counter while it is on
 *   conversations (counters come after them): nothing to do;
 * - else, while a pass runs, the key may be behind its cursor (already passed: the mark came
 *   after its recount), so one more pass is asked for; with no pass running, one starts. Either
 *   way the pass to come visits every key after this mark, so every queued entry is dropped too
 *   (their marks are older): the queue empties and marks are kept again, exactly as before. A
 *   dropped key marked again is taken back into the queue (st__mark: its pass may have passed).
 * Only the entry of the distinct counter whose recount is under way stays (its job holds it).
 * Cost on the post: list splices, never a walk; the steps free the dropped entries. */
static void st__overflow(st_reconcile_t *r, int kind)
{
    st_metric_add(r->m_overflows, 1);
    if (r->all_started != r->all_done &&
        (r->all_again || (kind == ST__DISTINCT && r->all_phase == 1)))
        return;
    st_rentry_t *job = r->job_entry;
    if (job) st_list_unlink(&job->link);
    st__list_splice(&r->drop, &r->queue);
    st__list_splice(&r->drop, &r->spaced);
    r->epoch++;
    if (job) {
        job->epoch = r->epoch;
        st_list_insert(&r->queue, &job->link);
    }
    bool running = r->all_started != r->all_done;
    uint64_t pass = st__all_begin(r, false);
    /* once per pass at most (an overflow during the one asked for again returns above) */
    st_info("reconcile: queue full (%zu keys): its keys are left to pass %llu over every key%s",
            r->queue_max, (unsigned long long)pass, running ? ", after the one under way" : "");
}

static void st__mark(st_reconcile_t *r, const char *key, size_t klen)
{
    if (!r) return;
    st_map_node_t *n = st_map_get(&r->map, key, klen);
    st_rentry_t *e = (st_rentry_t *)n;
    if (e && e->epoch != r->epoch) { /* dropped, not freed yet: queued again (see st__overflow) */
        st_list_unlink(&e->link);
        st_list_insert(&r->queue, &e->link);
        e->epoch = r->epoch;
    }
    if (!e) {
        if (r->map.count >= r->queue_max) {
            st__overflow(r, key[0]);
            return;
        }
        e = st_calloc(1, sizeof *e + klen);
        memcpy(e->key, key, klen);
        e->klen = (uint32_t)klen;
        e->epoch = r->epoch;
        e->node.key = e->key;
        e->node.klen = klen;
        st_map_insert(&r->map, &e->node);
        st_list_insert(&r->queue, &e->link);
        st_metric_set(r->m_queue, (double)r->map.count);
    }
    e->dirty_gen++;
}

void st_reconcile_mark_conversation(st_reconcile_t *r, const st_owner_t *o, const char *conv,
                                    size_t clen)
{
    char k[2 + ST_CHAT_OWNER_MAX + ST_NAME_MAX];
    if (o->len > ST_NAME_MAX || clen > ST_NAME_MAX) return;
    k[0] = ST__CONV; /* the owner by its bytes (no 0 in them) */
    size_t ulen = st_chat_owner_bytes(k + 1, o);
    k[1 + ulen] = 0;
    memcpy(k + 2 + ulen, conv, clen);
    st__mark(r, k, 2 + ulen + clen);
}

void st_reconcile_mark_distinct(st_reconcile_t *r, const char *name, size_t nlen)
{
    char k[1 + ST_NAME_MAX];
    if (nlen > ST_NAME_MAX) return;
    k[0] = ST__DISTINCT;
    memcpy(k + 1, name, nlen);
    st__mark(r, k, 1 + nlen);
}

static void st__account(st_reconcile_t *r, int kind, int64_t drift, const char *what, size_t wlen)
{
    int i = kind == ST__CONV ? 0 : 1;
    st_metric_add(r->m_keys[i], 1);
    if (!drift) return;
    st_metric_add(r->m_drift[i], (double)(drift < 0 ? -drift : drift));
    st_warn("reconcile: %s %.*s was off by %lld; repaired",
            kind == ST__CONV ? "conversation" : "distinct counter", (int)wlen, what,
            (long long)drift);
}

int st_reconcile_conversation_now(st_reconcile_t *r, const st_owner_t *o, const char *conv,
                                  size_t clen, int64_t *drift, uint64_t *wait)
{
    *drift = 0;
    if (!r->chat) return ST_ENOTFOUND;
    int rc = st_chat_recount(r->chat, o, conv, clen, drift, wait);
    if (rc == ST_OK) {
        char what[2 * ST_NAME_MAX + 16];
        int n = snprintf(what, sizeof what, "%s%.*s/%.*s", o->kind == ST_OWNER_ROOM ? "room " : "",
                         (int)o->len, o->id, (int)clen, conv);
        st__account(r, ST__CONV, *drift, what, (size_t)n);
    }
    return rc;
}

int st_reconcile_distinct_now(st_reconcile_t *r, const char *name, size_t nlen, int64_t *drift,
                              uint64_t *wait)
{
    int rc = st_counter_distinct_recount(r->store, name, nlen, drift, wait);
    if (rc == ST_OK) st__account(r, ST__DISTINCT, *drift, name, nlen);
    return rc;
}

/* ST_EPARKED: the cold footers a conversation's recount needs are being fetched (not an error). */
static void st__log_rc(const char *what, size_t wlen, int rc)
{
    if (rc != ST_OK && rc != ST_ENOTFOUND && rc != ST_ECONFLICT && rc != ST_EPARKED)
        st_warn("reconcile: %.*s: %s", (int)wlen, what, st_strerror(rc));
}

static void st__free_entry(st_reconcile_t *r, st_rentry_t *e)
{
    st_list_unlink(&e->link);
    st_map_remove(&r->map, &e->node);
    free(e);
}

/* Frees entries an overflow dropped until the budget is spent; true if some are left. */
static bool st__free_dropped(st_reconcile_t *r, uint64_t t0)
{
    for (unsigned n = 1; !st_list_empty(&r->drop); n++) {
        if (n % 256 == 0 && st_mono_ns() - t0 > ST__BUDGET_NS) return true;
        st__free_entry(r, ST_LIST_ITEM(r->drop.next, st_rentry_t, link));
    }
    return false;
}

/* Starts the sliced recount of a distinct counter (its entry, or NULL for the pass). */
static void st__job_start(st_reconcile_t *r, const char *name, size_t nlen, st_rentry_t *e)
{
    uint64_t wait = 0;
    int rc = st_counter_recount_start(r->store, name, nlen, &r->job, &wait);
    if (rc != ST_OK) {
        st__log_rc(name, nlen, rc);
        r->job = NULL;
        return;
    }
    r->job_entry = e;
    st_buf_reset(&r->job_name);
    st_buf_append(&r->job_name, name, nlen);
}

/* Counts members until the budget is spent; returns true once the recount is finished. */
static bool st__job_run(st_reconcile_t *r, uint64_t t0)
{
    bool done = false;
    int64_t drift = 0;
    uint64_t wait = 0;
    int rc = ST_OK;
    while (!done && rc == ST_OK && st_mono_ns() - t0 <= ST__BUDGET_NS)
        rc = st_counter_recount_step(r->job, ST__MEMBERS, &done, &drift, &wait);
    if (rc == ST_OK && !done) return false;
    if (rc == ST_OK) st__account(r, ST__DISTINCT, drift, r->job_name.data, r->job_name.len);
    st__log_rc(r->job_name.data, r->job_name.len, rc);
    if (r->job_entry == NULL) {
        r->all_keys += rc == ST_OK;
        r->all_drift += drift < 0 ? -drift : drift;
    }
    st_counter_recount_free(r->job);
    r->job = NULL;
    return true;
}

/* One queue entry: a conversation is recounted now, a distinct counter starts its job (left in
 * r->job). ST_EPARKED: the conversation's cold footers are being fetched (prefetched here); its
 * entry stays for a later step. */
static int st__recount(st_reconcile_t *r, st_rentry_t *e)
{
    if (e->key[0] == ST__DISTINCT) {
        st__job_start(r, e->key + 1, e->klen - 1, e);
        return ST_OK;
    }
    int64_t drift;
    uint64_t wait = 0;
    size_t ul = strnlen(e->key + 1, e->klen - 1);
    st_owner_t o = st_chat_owner_from(e->key + 1, ul);
    int rc = st_reconcile_conversation_now(r, &o, e->key + 2 + ul, e->klen - 2 - ul, &drift, &wait);
    if (rc == ST_EPARKED) st_tier_wait(r->tier, NULL, NULL, NULL); /* prefetch */
    st__log_rc(e->key + 1, e->klen - 1, rc);
    return rc;
}

/* A recount of e (begun at generation gen) finished: a key marked again since keeps its place. */
/* After e's recount (of generation gen; rc EPARKED: not done, its footers are being fetched): it
 * goes, or waits its interval at the end of the spaced list. */
static void st__entry_done(st_reconcile_t *r, st_rentry_t *e, uint64_t gen, int rc)
{
    if (rc != ST_EPARKED && e->dirty_gen == gen) {
        st__free_entry(r, e);
        return;
    }
    st_list_unlink(&e->link);
    st_list_insert(&r->spaced, &e->link);
}

/* Recounts e, unless it is the distinct counter whose job runs across steps. Returns true if the
 * budget is spent with work left. */
static bool st__work_entry(st_reconcile_t *r, st_rentry_t *e, uint64_t now, uint64_t t0)
{
    uint64_t gen = e->dirty_gen;
    e->last_ms = now;
    int rc = st__recount(r, e);
    if (r->job) { /* a distinct counter: its job runs on in later steps */
        r->job_gen = gen;
        if (!st__job_run(r, t0)) return true;
        r->job_entry = NULL;
    }
    st__entry_done(r, e, gen, rc);
    return false;
}

/* Works the queue: keys not recounted within the last interval, oldest mark first, until the
 * budget is spent. Returns true if work is left for another step. */
static bool st__work_queue(st_reconcile_t *r, uint64_t now, uint64_t t0)
{
    for (ST_LIST_EACH(l, n, &r->queue)) {
        st_rentry_t *e = ST_LIST_ITEM(l, st_rentry_t, link);
        if (e == r->job_entry) continue;
        if (st_mono_ns() - t0 > ST__BUDGET_NS) return true;
        if (st__work_entry(r, e, now, t0)) return true;
    }
    /* the spaced ones, oldest recount first, until one recounted within the interval: an entry
     * recounted here goes to the end (last_ms now), so the walk ends at it at the latest */
    while (!st_list_empty(&r->spaced)) {
        st_rentry_t *e = ST_LIST_ITEM(r->spaced.next, st_rentry_t, link);
        if (e == r->job_entry || now - e->last_ms < r->interval_ms) break;
        if (st_mono_ns() - t0 > ST__BUDGET_NS) return true;
        if (st__work_entry(r, e, now, t0)) return true;
    }
    return false;
}

/* A page entry: ST__CONV | u8 kind | u8 id length | u8 conv length | id | conv. */
static void st__reconcile_page_conv(void *arg, const st_owner_t *o, const char *conv, size_t clen)
{
    st_buf_t *b = arg;
    if (o->len > ST_NAME_MAX || clen > ST_NAME_MAX) return;
    uint8_t h[4] = {ST__CONV, (uint8_t)o->kind, (uint8_t)o->len, (uint8_t)clen};
    st_buf_append(b, h, 4);
    st_buf_append(b, o->id, o->len);
    st_buf_append(b, conv, clen);
}

/* Refills the pass's page; false when the pass has visited every key. */
static bool st__all_refill(st_reconcile_t *r)
{
    bool done = false;
    uint64_t wait = 0;
    st_buf_reset(&r->all_page);
    r->all_off = 0;
    while (r->all_page.len == 0 && r->all_phase) {
        if (r->all_phase == 1 && r->chat) {
            st_chat_conversations_page(r->chat, &r->all_cursor, ST__RECON_PAGE, &done,
                                       st__reconcile_page_conv, &r->all_page);
        } else if (r->all_phase == 2) {
            st_buf_t names = {0};
            st_counter_distinct_page(r->store, r->counter_cursor, &r->counter_clen, ST__RECON_PAGE,
                                     &names, &done, &wait);
            for (size_t i = 0; i < names.len; i += 1 + (uint8_t)names.data[i]) {
                st_buf_appendc(&r->all_page, ST__DISTINCT);
                st_buf_append(&r->all_page, names.data + i, 1 + (uint8_t)names.data[i]);
            }
            st_buf_free(&names);
        } else {
            done = true;
        }
        if (done) r->all_phase = r->all_phase == 1 ? 2 : 0;
    }
    return r->all_page.len > 0;
}

static void st__all_finish(st_reconcile_t *r)
{
    r->all_done = r->all_started;
    st_metric_add(r->m_passes, 1);
    st_info("reconcile: pass %llu over every key done: %zu recounted, drift %lld repaired",
            (unsigned long long)r->all_done, r->all_keys, (long long)r->all_drift);
    if (r->all_again) {
        r->all_again = false;
        st__all_begin(r, false);
    } else {
        r->all_asked = false;
    }
}

/* Continues the pass over every key until the budget is spent; true if work is left. */
static bool st__work_all(st_reconcile_t *r, uint64_t t0)
{
    while (r->all_started != r->all_done) {
        if (st_mono_ns() - t0 > ST__BUDGET_NS) return true;
        if (r->all_off >= r->all_page.len && !st__all_refill(r)) {
            st__all_finish(r);
            continue;
        }
        const char *p = r->all_page.data + r->all_off;
        if (p[0] == ST__DISTINCT) {
            size_t nl = (uint8_t)p[1];
            r->all_off += 2 + nl;
            st__job_start(r, p + 2, nl, NULL);
            if (r->job && !st__job_run(r, t0)) return true;
        } else {
            size_t ul = (uint8_t)p[2], cl = (uint8_t)p[3];
            int64_t d = 0;
            uint64_t wait = 0;
            r->all_off += 4 + ul + cl;
            st_owner_t o = {(st_owner_kind_t)(uint8_t)p[1], p + 4, ul};
            int rc = st_reconcile_conversation_now(r, &o, p + 4 + ul, cl, &d, &wait);
            if (rc == ST_EPARKED) { /* its footers are being fetched: the queue retries it */
                st_tier_wait(r->tier, NULL, NULL, NULL);
                st_reconcile_mark_conversation(r, &o, p + 4 + ul, cl);
            }
            st__log_rc(p + 4, ul, rc);
            r->all_keys += rc == ST_OK;
            r->all_drift += d < 0 ? -d : d;
        }
    }
    return false;
}

/* One step: the recount under way, the queue, then the pass over every key, within the budget.
 * A backlog continues after nine times the loop time this step took (a pass someone asked for:
 * three times), so reconciliation takes at most a tenth (a quarter) of the loop. */
static void st__step(uv_timer_t *t)
{
    st_reconcile_t *r = t->data;
    if (st_store_standby(r->store)) {
        /* a group member that is not the serving leader repairs nothing (it could not write the
         * repair); the leader it follows recounts, and a new leader starts a full pass */
        uv_timer_start(&r->timer, st__step, r->interval_ms, 0);
        return;
    }
    uint64_t now = uv_now(r->loop), t0 = st_mono_ns();
    st_metric_add(r->m_runs, 1);
    bool more = st__free_dropped(r, t0);
    if (!more && r->job) {
        st_rentry_t *e = r->job_entry;
        if (!st__job_run(r, t0)) {
            more = true;
        } else if (e) {
            r->job_entry = NULL;
            st__entry_done(r, e, r->job_gen, ST_OK);
        }
    }
    if (!more) more = st__work_queue(r, now, t0);
    if (!more) more = st__work_all(r, t0);
    st_metric_set(r->m_queue, (double)r->map.count);
    uint64_t spent_ms = (st_mono_ns() - t0) / 1000000;
    uint64_t pace = r->all_started != r->all_done && r->all_asked ? 3 : 9;
    uv_timer_start(&r->timer, st__step, more ? pace * spent_ms + 1 : r->interval_ms, 0);
}

/* asked: by POST /v1/admin/reconcile or a new leader (paced faster), else by an overflow. */
static uint64_t st__all_begin(st_reconcile_t *r, bool asked)
{
    r->all_asked |= asked;
    if (r->all_started != r->all_done) {
        r->all_again = true;
        return r->all_started + 1;
    }
    r->all_started++;
    r->all_phase = 1;
    r->all_keys = 0;
    r->all_drift = 0;
    r->counter_clen = 0;
    st_buf_reset(&r->all_cursor);
    st_buf_reset(&r->all_page);
    r->all_off = 0;
    uv_timer_start(&r->timer, st__step, 0, 0);
    return r->all_started;
}

uint64_t st_reconcile_all(st_reconcile_t *r)
{
    return st__all_begin(r, true);
}

/* Writes mark what they touch: a posted message its conversation, a distinct member its counter
 * (a repair is the recount's own write and marks nothing). */
static void st__on_posted(void *arg, const st_owner_t *o, const char *conv, size_t clen,
                          uint64_t msg_id, const char *json, size_t len, uint64_t wait)
{
    (void)msg_id;
    (void)json;
    (void)len;
    (void)wait;
    st_reconcile_mark_conversation(arg, o, conv, clen);
}

static void st__on_counter(void *arg, const char *name, size_t nlen, int64_t value, bool distinct,
                           bool repair, uint64_t wait)
{
    (void)value;
    (void)wait;
    if (distinct && !repair) st_reconcile_mark_distinct(arg, name, nlen);
}

int st_reconcile_open(st_reconcile_t **out, uv_loop_t *loop, st_store_t *store, st_chat_t *chat,
                      st_tier_t *tier, uint64_t interval_s, uint64_t queue_max)
{
    st_reconcile_t *r = st_calloc(1, sizeof *r);
    r->loop = loop;
    r->store = store;
    r->chat = chat;
    r->tier = tier;
    r->interval_ms = (interval_s ? interval_s : 20) * 1000;
    st_map_init(&r->map);
    st_list_init(&r->queue);
    st_list_init(&r->spaced);
    st_list_init(&r->drop);
    r->queue_max = queue_max ? (size_t)queue_max : 100000;
    r->m_runs = st_metrics_counter("strata_reconcile_runs_total", "Reconciliation passes", "");
    r->m_queue = st_metrics_gauge("strata_reconcile_queue", "Keys waiting to be recounted", "");
    r->m_overflows = st_metrics_counter(
        "strata_reconcile_overflows_total",
        "Marks that found the reconciliation queue full (--reconcile-queue): left to a pass over "
        "every key",
        "");
    st_metric_set(
        st_metrics_gauge("strata_reconcile_queue_capacity",
                         "Keys the reconciliation queue holds at most (--reconcile-queue)", ""),
        (double)r->queue_max);
    r->m_keys[0] = st_metrics_counter("strata_reconcile_keys_total", "Keys recounted",
                                      "kind=\"conversation\"");
    r->m_keys[1] =
        st_metrics_counter("strata_reconcile_keys_total", "Keys recounted", "kind=\"distinct\"");
    r->m_drift[0] =
        st_metrics_counter("strata_reconcile_drift_total", "Drift found and repaired (absolute)",
                           "kind=\"conversation\"");
    r->m_drift[1] = st_metrics_counter("strata_reconcile_drift_total",
                                       "Drift found and repaired (absolute)", "kind=\"distinct\"");
    r->m_passes =
        st_metrics_counter("strata_reconcile_all_passes_total",
                           "Passes over every key (POST /v1/admin/reconcile) finished", "");
    uv_timer_init(loop, &r->timer);
    r->timer.data = r;
    uv_timer_start(&r->timer, st__step, r->interval_ms, 0);
    if (chat) st_chat_observe(chat, st__on_posted, r);
    st_counters_observe(store, st__on_counter, r);
    *out = r;
    return ST_OK;
}

static void st__reconcile_closed(uv_handle_t *h)
{
    st_reconcile_t *r = h->data;
    st_counter_recount_free(r->job);
    while (!st_list_empty(&r->queue))
        st__free_entry(r, ST_LIST_ITEM(r->queue.next, st_rentry_t, link));
    while (!st_list_empty(&r->spaced))
        st__free_entry(r, ST_LIST_ITEM(r->spaced.next, st_rentry_t, link));
    while (!st_list_empty(&r->drop))
        st__free_entry(r, ST_LIST_ITEM(r->drop.next, st_rentry_t, link));
    st_map_free(&r->map);
    st_buf_free(&r->job_name);
    st_buf_free(&r->all_cursor);
    st_buf_free(&r->all_page);
    free(r);
}

void st_reconcile_close(st_reconcile_t *r)
{
    if (!r) return;
    if (r->chat) st_chat_unobserve(r->chat, r);
    st_counters_unobserve(r->store, r);
    uv_close((uv_handle_t *)&r->timer, st__reconcile_closed);
}
