/* SPDX-License-Identifier: MIT */
/* The rooms outbox (SPEC §10): records staged with membership changes and erasures, sent through
 * the proxy (strata/outbox.h has the records and the contract). */
#include "strata/outbox.h"

#include "strata/metrics.h"
#include "strata/repl.h"
#include "strata/store_group.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define ST__OB_KS      'o'
#define ST__OB_BATCH   8    /* records one worker job sends, in order */
#define ST__OB_IDLE_MS 1000 /* a look now and then: a new leader, records of a past run */
#define ST__OB_WAIT_MS 10   /* a record whose batch is not durable yet */
#define ST__OB_BACKOFF 250  /* ms, doubled per failure up to the cap, then jittered */
#define ST__OB_CAP_MS  30000
#define ST__OB_POST_MS 5000 /* one POST's timeout */
#define ST__OB_HDR     14   /* the record's fixed part */

enum { ST__OB_REMOVED = 0, ST__OB_ADDED = 1, ST__OB_ERASE = 2 }; /* a record's kind */

typedef struct {
    uint8_t key[9];
    char path[1400];
    char header[80];
    char *body;
} st_obrec_t;

struct st_outbox {
    uv_loop_t *loop;
    st_store_t *store;
    char url[1024];
    char secret[512];
    uv_timer_t timer;
    uv_work_t work;
    bool busy, closing, timer_closed;
    unsigned fails;
    st_obrec_t recs[ST__OB_BATCH];
    size_t n, done; /* records in the job; sent and acknowledged, in order */
    long status;    /* the first refused record's answer (0: none came) */
    st_metric_t *sent, *failed;
};

static const uint8_t st__meta[] = {ST__OB_KS};
static void st__tick(uv_timer_t *t);
static st_outbox_t *st__gauge_ob; /* the one outbox /metrics counts (NULL once closed) */

static int st__first_rec(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)val, (void)vlen;
    if (klen != 9) return 0; /* the outbox's own record */
    *(uint64_t *)arg = st_be64_get((const uint8_t *)key + 1);
    return 1;
}

static int st__meta_get(st_outbox_t *ob, uint64_t *origin, uint64_t *last, uint64_t *wait);

/* Records are deleted oldest first, so they are always the seqs first..last: O(1). */
static double st__pending(void *arg)
{
    (void)arg;
    st_outbox_t *ob = st__gauge_ob;
    if (!ob || !st_outbox_on(ob)) return 0;
    uint64_t origin, last, first = 0, w = 0;
    if (st__meta_get(ob, &origin, &last, &w) != ST_OK || !last) return 0;
    st_store_scan(ob->store, st__meta, 1, st__first_rec, &first, &w);
    return first && first <= last ? (double)(last - first + 1) : 0;
}

bool st_outbox_on(const st_outbox_t *ob)
{
    return ob && ob->url[0];
}

/* origin and last seq ('o'); absent: a new origin and 0. */
static int st__meta_get(st_outbox_t *ob, uint64_t *origin, uint64_t *last, uint64_t *wait)
{
    const void *v;
    size_t vl;
    int rc = st_store_get(ob->store, st__meta, 1, &v, &vl, wait);
    if (rc == ST_ENOTFOUND) {
        *last = 0;
        if (getrandom(origin, sizeof *origin, 0) != (ssize_t)sizeof *origin)
            *origin = (uint64_t)st_now_us() ^ ((uint64_t)getpid() << 40);
        if (!*origin) *origin = 1;
        return ST_OK;
    }
    if (rc) return rc;
    if (vl != 16) return ST_EINTERNAL;
    memcpy(origin, v, 8);
    memcpy(last, (const uint8_t *)v + 8, 8);
    return ST_OK;
}

/* kind: ST__OB_REMOVED, ST__OB_ADDED (membership changes) or ST__OB_ERASE. */
static int st__stage(st_outbox_t *ob, uint8_t kind, const char *user, size_t ul, const char *room,
                     size_t rl, const char *name, size_t nl, int64_t joined_at, uint64_t *wait)
{
    if (!st_outbox_on(ob)) return ST_OK;
    uint64_t meta[2];
    int rc = st__meta_get(ob, &meta[0], &meta[1], wait);
    if (rc) return rc;
    meta[1]++;
    if ((rc = st_store_put(ob->store, st__meta, 1, meta, sizeof meta, wait))) return rc;
    st_buf_t v = {0};
    uint8_t has = name != NULL;
    uint16_t u16 = (uint16_t)ul, r16 = (uint16_t)rl;
    st_buf_append(&v, &kind, 1);
    st_buf_append(&v, &joined_at, 8);
    st_buf_append(&v, &u16, 2);
    st_buf_append(&v, &r16, 2);
    st_buf_append(&v, &has, 1);
    st_buf_append(&v, user, ul);
    st_buf_append(&v, room, rl);
    if (name) st_buf_append(&v, name, nl);
    uint8_t k[9] = {ST__OB_KS};
    st_be64_put(k + 1, meta[1]);
    rc = st_store_put(ob->store, k, sizeof k, v.data, v.len, wait);
    st_buf_free(&v);
    /* the sender looks soon (it finds the record once its batch is durable) */
    if (!rc && !ob->busy && !ob->fails && !ob->closing &&
        (!uv_is_active((uv_handle_t *)&ob->timer) ||
         uv_timer_get_due_in(&ob->timer) > ST__OB_WAIT_MS))
        uv_timer_start(&ob->timer, st__tick, ST__OB_WAIT_MS, 0);
    return rc;
}

int st_outbox_stage(st_outbox_t *ob, const char *user, size_t ul, const char *room, size_t rl,
                    const char *name, size_t nl, int64_t joined_at, bool added, uint64_t *wait)
{
    return st__stage(ob, added ? ST__OB_ADDED : ST__OB_REMOVED, user, ul, room, rl, name, nl,
                     joined_at, wait);
}

int st_outbox_stage_erase(st_outbox_t *ob, const char *user, size_t ul, const char *room, size_t rl,
                          uint64_t *wait)
{
    return st__stage(ob, ST__OB_ERASE, user, ul, room, rl, NULL, 0, 0, wait);
}

/* ---- the sender ---- */

typedef struct {
    st_outbox_t *ob;
    uint64_t origin;
    bool more;
} st_obscan_t;

static void st__url_part(st_buf_t *b, const char *s, size_t n)
{
    st_buf_append(b, s, n); /* names are [A-Za-z0-9_.:-]: nothing to escape */
}

/* r->path = pre key mid key: a route whose routing key is its own name (b: scratch, reset). */
static void st__route_path(st_buf_t *b, st_obrec_t *r, const char *pre, const char *key, size_t kl,
                           const char *mid)
{
    st_buf_puts(b, pre);
    st__url_part(b, key, kl);
    st_buf_puts(b, mid);
    st__url_part(b, key, kl);
    snprintf(r->path, sizeof r->path, "%.*s", (int)b->len, b->data);
    st_buf_reset(b);
}

/* A membership change's path into r and body into b (p: the record). */
static void st__change(st_buf_t *b, st_obrec_t *r, const char *user, size_t ul, const char *room,
                       size_t rl, const char *name, size_t nl, const uint8_t *p)
{
    int64_t joined_at;
    memcpy(&joined_at, p + 1, 8);
    st__route_path(b, r, "/v1/users/", user, ul, "/rooms/remote?route=user:");
    st_buf_puts(b, "{\"room_id\":");
    st_buf_append_json_str(b, room, rl);
    st_buf_puts(b, ",\"name\":");
    if (p[13])
        st_buf_append_json_str(b, name, nl);
    else
        st_buf_puts(b, "null");
    st_buf_printf(b, ",\"joined_at\":%lld,\"change\":\"%s\"}", (long long)joined_at,
                  p[0] == ST__OB_ADDED ? "added" : "removed");
}

/* An erasure's path into r and body into b: to the room's group, which erases the user. */
static void st__erasure(st_buf_t *b, st_obrec_t *r, const char *user, size_t ul, const char *room,
                        size_t rl)
{
    st__route_path(b, r, "/v1/rooms/", room, rl, "/erasures?route=room:");
    st_buf_puts(b, "{\"user\":");
    st_buf_append_json_str(b, user, ul);
    st_buf_appendc(b, '}');
}

/* One record into ob->recs[ob->n]: its key, request path, header and JSON body. */
static int st__ob_take(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_obscan_t *sc = arg;
    st_outbox_t *ob = sc->ob;
    if (klen != 9) return 0; /* the outbox's own record */
    if (ob->n == ST__OB_BATCH) {
        sc->more = true;
        return 1;
    }
    const uint8_t *p = val;
    uint16_t ul, rl;
    if (vlen < ST__OB_HDR) return 0;
    memcpy(&ul, p + 9, 2);
    memcpy(&rl, p + 11, 2);
    if ((size_t)ul + rl + ST__OB_HDR > vlen) return 0;
    const char *user = (const char *)p + ST__OB_HDR, *room = user + ul, *name = room + rl;
    size_t nl = vlen - ST__OB_HDR - ul - rl;
    st_obrec_t *r = &ob->recs[ob->n++];
    memcpy(r->key, key, 9);
    st_buf_t b = {0};
    if (p[0] == ST__OB_ERASE)
        st__erasure(&b, r, user, ul, room, rl);
    else
        st__change(&b, r, user, ul, room, rl, name, nl, p);
    snprintf(r->header, sizeof r->header, "Idempotency-Key: outbox-%016llx-%llu",
             (unsigned long long)sc->origin, (unsigned long long)st_be64_get(r->key + 1));
    st_buf_appendc(&b, '\0');
    r->body = b.data; /* the job's own */
    return 0;
}

static void st__free_job(st_outbox_t *ob)
{
    for (size_t i = 0; i < ob->n; i++)
        free(ob->recs[i].body);
    ob->n = ob->done = 0;
}

static void st__ob_maybe_free(st_outbox_t *ob)
{
    if (ob->closing && ob->timer_closed && !ob->busy) free(ob);
}

static void st__arm(st_outbox_t *ob, uint64_t ms)
{
    if (!ob->closing) uv_timer_start(&ob->timer, st__tick, ms, 0);
}

static void st__send(uv_work_t *w)
{
    st_outbox_t *ob = w->data;
    ob->status = 0;
    for (size_t i = 0; i < ob->n; i++) {
        st_buf_t resp = {0};
        long status = 0;
        int rc = st_repl_post(ob->url, ob->recs[i].path, ob->recs[i].body, ob->secret,
                              ob->recs[i].header, ST__OB_POST_MS, &resp, &status, NULL, 0);
        st_buf_free(&resp);
        if (rc || status < 200 || status > 299) {
            ob->status = status;
            break;
        }
        ob->done++;
    }
}

static void st__sent(uv_work_t *w, int status)
{
    st_outbox_t *ob = w->data;
    (void)status;
    ob->busy = false;
    if (ob->closing) {
        st__free_job(ob);
        st__ob_maybe_free(ob);
        return;
    }
    /* acknowledged: gone (a delete lost to a crash sends again, under the same key) */
    for (size_t i = 0; i < ob->done; i++) {
        uint64_t wait = 0;
        st_store_del(ob->store, ob->recs[i].key, 9, &wait);
    }
    st_metric_add(ob->sent, (double)ob->done);
    bool failed = ob->done < ob->n;
    if (failed) {
        st_metric_add(ob->failed, 1);
        if (ob->fails++ % 16 == 0)
            st_warn("outbox: %s answered %ld to a record (a room membership change or erasure); "
                    "retrying",
                    ob->url, ob->status);
        unsigned shift = ob->fails < 8 ? ob->fails : 8;
        uint64_t ms = (uint64_t)ST__OB_BACKOFF << shift;
        if (ms > ST__OB_CAP_MS) ms = ST__OB_CAP_MS;
        uint32_t r = 0;
        if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r) r = (uint32_t)st_now_us();
        ms = ms / 2 + r % (ms / 2 + 1); /* jitter: half to all of it */
        st__free_job(ob);
        st__arm(ob, ms);
        return;
    }
    ob->fails = 0;
    st__free_job(ob);
    st__arm(ob, 0); /* more may wait */
}

static void st__tick(uv_timer_t *t)
{
    st_outbox_t *ob = t->data;
    if (ob->busy || ob->closing) return;
    if (st_store_standby(ob->store)) { /* a follower: the leader sends */
        st__arm(ob, ST__OB_IDLE_MS);
        return;
    }
    uint64_t origin, last, wait = 0;
    if (st__meta_get(ob, &origin, &last, &wait) != ST_OK || last == 0) {
        st__arm(ob, ST__OB_IDLE_MS); /* nothing was ever staged */
        return;
    }
    st_obscan_t sc = {.ob = ob, .origin = origin};
    st_store_scan(ob->store, st__meta, 1, st__ob_take, &sc, &wait);
    /* only what is durable leaves the process (SPEC §0), in order */
    uint64_t durable = st_store_durable_id(ob->store);
    size_t keep = 0;
    for (; keep < ob->n; keep++) {
        const void *v;
        size_t vl;
        uint64_t w = 0;
        if (st_store_get(ob->store, ob->recs[keep].key, 9, &v, &vl, &w) != ST_OK || w > durable)
            break;
    }
    bool waiting = keep < ob->n;
    for (size_t i = keep; i < ob->n; i++)
        free(ob->recs[i].body);
    ob->n = keep;
    if (!ob->n) {
        st__arm(ob, waiting ? ST__OB_WAIT_MS : ST__OB_IDLE_MS);
        return;
    }
    ob->busy = true;
    ob->work.data = ob;
    if (uv_queue_work(ob->loop, &ob->work, st__send, st__sent) != 0) {
        ob->busy = false;
        st__free_job(ob);
        st__arm(ob, ST__OB_IDLE_MS);
    }
}

static void st__ob_timer_closed(uv_handle_t *h)
{
    st_outbox_t *ob = h->data;
    ob->timer_closed = true;
    st__ob_maybe_free(ob);
}

int st_outbox_open(st_outbox_t **out, uv_loop_t *loop, st_store_t *store, const st_outbox_opts_t *o)
{
    int rc = st_store_claim(store, "o", 1, "outbox");
    if (rc != ST_OK) return rc;
    st_outbox_t *ob = st_calloc(1, sizeof *ob);
    ob->loop = loop;
    ob->store = store;
    if (o && o->route_url) {
        snprintf(ob->url, sizeof ob->url, "%s", o->route_url);
        size_t n = strlen(ob->url);
        while (n && ob->url[n - 1] == '/')
            ob->url[--n] = '\0';
    }
    if (o && o->secret) snprintf(ob->secret, sizeof ob->secret, "%s", o->secret);
    ob->sent = st_metrics_counter(
        "strata_outbox_sent_total",
        "room membership changes and erasures the outbox delivered to another group", "");
    ob->failed = st_metrics_counter("strata_outbox_failures_total",
                                    "outbox sends that failed (retried with backoff)", "");
    st__gauge_ob = ob;
    st_metrics_gauge_fn(
        "strata_outbox_pending",
        "room membership changes and erasures waiting in the outbox for another group", "",
        st__pending, NULL);
    uv_timer_init(loop, &ob->timer);
    ob->timer.data = ob;
    if (st_outbox_on(ob)) {
        st__arm(ob, ST__OB_WAIT_MS); /* records of a past run */
        st_info("outbox: room membership changes and erasures go to other groups through %s",
                ob->url);
    }
    *out = ob;
    return ST_OK;
}

void st_outbox_close(st_outbox_t *ob)
{
    if (!ob) return;
    if (st__gauge_ob == ob) st__gauge_ob = NULL;
    ob->closing = true;
    uv_timer_stop(&ob->timer);
    uv_close((uv_handle_t *)&ob->timer, st__ob_timer_closed);
}
