/* SPDX-License-Identifier: MIT */
/*
 * The reconciliation queue. Entries are keyed by kind + name, so marking a key twice costs
 * nothing; they are kept in marking order and worked off every interval within a time budget
 * (a backlog continues in short steps rather than stalling the loop). Each recount runs in one
 * loop turn against the store's current state, and repairs by writing the truth it counted.
 */
#include "strata/reconcile.h"
#include "strata/counters.h"
#include "strata/metrics.h"

#include <stdlib.h>
#include <string.h>

#define ST__BUDGET_NS (20u * 1000 * 1000) /* of loop time per step */

enum { ST__CONV = 'C', ST__DISTINCT = 'D' };

typedef struct st_rentry {
    st_map_node_t node;
    struct st_rentry *prev, *next;
    uint64_t dirty_gen; /* bumped by every mark */
    uint64_t last_ms;   /* when it was last recounted (spacing) */
    size_t klen;
    char key[]; /* kind, then user 0 conversation, or the counter name */
} st_rentry_t;

struct st_reconcile {
    uv_loop_t *loop;
    st_store_t *store;
    st_chat_t *chat;
    uint64_t interval_ms;
    uv_timer_t timer;
    st_map_t map;
    st_rentry_t *head, *tail;
    st_metric_t *m_runs, *m_queue, *m_keys[2], *m_drift[2];
};

static void st__unlink(st_reconcile_t *r, st_rentry_t *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        r->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        r->tail = e->prev;
    e->prev = e->next = NULL;
}

static void st__mark(st_reconcile_t *r, const char *key, size_t klen)
{
    if (!r) return;
    st_map_node_t *n = st_map_get(&r->map, key, klen);
    st_rentry_t *e = (st_rentry_t *)n;
    if (!e) {
        e = st_calloc(1, sizeof *e + klen);
        memcpy(e->key, key, klen);
        e->klen = klen;
        e->node.key = e->key;
        e->node.klen = klen;
        st_map_insert(&r->map, &e->node);
        e->prev = r->tail;
        if (r->tail)
            r->tail->next = e;
        else
            r->head = e;
        r->tail = e;
        st_metric_set(r->m_queue, (double)r->map.count);
    }
    e->dirty_gen++;
}

void st_reconcile_mark_conversation(st_reconcile_t *r, const char *user, size_t ulen,
                                    const char *conv, size_t clen)
{
    char k[2 + 2 * ST_NAME_MAX + 2];
    if (ulen > ST_NAME_MAX || clen > ST_NAME_MAX) return;
    k[0] = ST__CONV;
    memcpy(k + 1, user, ulen);
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

int st_reconcile_conversation_now(st_reconcile_t *r, const char *user, size_t ulen,
                                  const char *conv, size_t clen, int64_t *drift, uint64_t *wait)
{
    *drift = 0;
    if (!r->chat) return ST_ENOTFOUND;
    int rc = st_chat_recount(r->chat, user, ulen, conv, clen, drift, wait);
    if (rc == ST_OK) {
        char what[2 * ST_NAME_MAX + 2];
        int n = snprintf(what, sizeof what, "%.*s/%.*s", (int)ulen, user, (int)clen, conv);
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

/* One entry's recount; its errors are logged and the key dropped (a later write re-marks it).
 * ST_EPARKED: the cold footers it needs are being fetched; the key stays for a later step. */
static int st__recount(st_reconcile_t *r, st_rentry_t *e)
{
    int64_t drift;
    uint64_t wait = 0;
    int rc;
    if (e->key[0] == ST__CONV) {
        size_t ul = strnlen(e->key + 1, e->klen - 1);
        rc = st_reconcile_conversation_now(r, e->key + 1, ul, e->key + 2 + ul, e->klen - 2 - ul,
                                           &drift, &wait);
    } else {
        rc = st_reconcile_distinct_now(r, e->key + 1, e->klen - 1, &drift, &wait);
    }
    if (rc == ST_EPARKED) st_chat_cold_wait(r->chat, NULL, NULL, NULL); /* prefetch */
    if (rc != ST_OK && rc != ST_ENOTFOUND && rc != ST_ECONFLICT && rc != ST_EPARKED)
        st_warn("reconcile: %.*s: %s", (int)e->klen - 1, e->key + 1, st_strerror(rc));
    return rc;
}

static void st__free_entry(st_reconcile_t *r, st_rentry_t *e)
{
    st__unlink(r, e);
    st_map_remove(&r->map, &e->node);
    free(e);
}

/* Works the queue: keys not recounted within the last interval, oldest mark first, until the
 * budget is spent. A key marked again after this recount began keeps its place for later. */
static void st__step(uv_timer_t *t)
{
    st_reconcile_t *r = t->data;
    uint64_t now = uv_now(r->loop), t0 = st_mono_ns();
    bool more = false;
    st_metric_add(r->m_runs, 1);
    for (st_rentry_t *e = r->head, *next; e; e = next) {
        next = e->next;
        if (e->last_ms && now - e->last_ms < r->interval_ms) continue;
        if (st_mono_ns() - t0 > ST__BUDGET_NS) {
            more = true;
            break;
        }
        uint64_t gen = e->dirty_gen;
        bool parked = st__recount(r, e) == ST_EPARKED;
        e->last_ms = now;
        if (e->dirty_gen == gen && !parked) st__free_entry(r, e);
    }
    st_metric_set(r->m_queue, (double)r->map.count);
    /* a backlog continues after nine times the loop time this step took: reconciliation
     * never takes more than a tenth of the loop, however long the queue */
    uint64_t spent_ms = (st_mono_ns() - t0) / 1000000;
    uv_timer_start(&r->timer, st__step, more ? 9 * spent_ms + 1 : r->interval_ms, 0);
}

typedef struct {
    st_reconcile_t *r;
    size_t keys;
    int64_t drift;
    uint64_t *wait;
} st_all_t;

static void st__all_conv(void *arg, const char *user, size_t ulen, const char *conv, size_t clen)
{
    st_all_t *a = arg;
    int64_t d;
    if (st_reconcile_conversation_now(a->r, user, ulen, conv, clen, &d, a->wait) == ST_OK) {
        a->keys++;
        a->drift += d < 0 ? -d : d;
    }
}

static int st__collect_counter(void *arg, const void *key, size_t klen, const void *val,
                               size_t vlen)
{
    st_buf_t *b = arg;
    (void)val;
    (void)vlen;
    if (klen < 2 || klen - 1 > ST_NAME_MAX) return 0;
    st_buf_appendc(b, (char)(uint8_t)(klen - 1));
    st_buf_append(b, (const char *)key + 1, klen - 1);
    return 0;
}

void st_reconcile_all(st_reconcile_t *r, size_t *keys, int64_t *drift, uint64_t *wait)
{
    st_all_t a = {r, 0, 0, wait};
    if (r->chat) st_chat_each_conversation(r->chat, st__all_conv, &a);
    st_buf_t names = {0};
    char pre = ST_KS_COUNTER;
    st_store_scan(r->store, &pre, 1, st__collect_counter, &names, wait);
    for (size_t i = 0; i < names.len;) {
        size_t nl = (uint8_t)names.data[i];
        int64_t d;
        if (st_reconcile_distinct_now(r, names.data + i + 1, nl, &d, wait) == ST_OK) {
            a.keys++;
            a.drift += d < 0 ? -d : d;
        }
        i += 1 + nl;
    }
    st_buf_free(&names);
    *keys = a.keys;
    *drift = a.drift;
}

int st_reconcile_open(st_reconcile_t **out, uv_loop_t *loop, st_store_t *store, st_chat_t *chat,
                      uint64_t interval_s)
{
    st_reconcile_t *r = st_calloc(1, sizeof *r);
    r->loop = loop;
    r->store = store;
    r->chat = chat;
    r->interval_ms = (interval_s ? interval_s : 20) * 1000;
    st_map_init(&r->map);
    r->m_runs = st_metrics_counter("strata_reconcile_runs_total", "Reconciliation passes", "");
    r->m_queue = st_metrics_gauge("strata_reconcile_queue", "Keys waiting to be recounted", "");
    r->m_keys[0] = st_metrics_counter("strata_reconcile_keys_total", "Keys recounted",
                                      "kind=\"conversation\"");
    r->m_keys[1] =
        st_metrics_counter("strata_reconcile_keys_total", "Keys recounted", "kind=\"distinct\"");
    r->m_drift[0] =
        st_metrics_counter("strata_reconcile_drift_total", "Drift found and repaired (absolute)",
                           "kind=\"conversation\"");
    r->m_drift[1] = st_metrics_counter("strata_reconcile_drift_total",
                                       "Drift found and repaired (absolute)", "kind=\"distinct\"");
    uv_timer_init(loop, &r->timer);
    r->timer.data = r;
    uv_timer_start(&r->timer, st__step, r->interval_ms, 0);
    *out = r;
    return ST_OK;
}

static void st__closed(uv_handle_t *h)
{
    st_reconcile_t *r = h->data;
    while (r->head)
        st__free_entry(r, r->head);
    st_map_free(&r->map);
    free(r);
}

void st_reconcile_close(st_reconcile_t *r)
{
    if (r) uv_close((uv_handle_t *)&r->timer, st__closed);
}
