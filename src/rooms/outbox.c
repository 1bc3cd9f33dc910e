/* SPDX-License-Identifier: MIT */
/* The rooms outbox (SPEC §10): records staged with membership changes and erasures, sent through
 * the proxy (strata/outbox.h has the records and the contract). */
#include "strata/idle.h"
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
#define ST__OB_DEAD    0xff /* 'o' 0xff be64(seq): dead letters, after every pending record */
#define ST__OB_ANSWER  512  /* bytes of a refusal's answer kept with its dead letter */
#define ST__OB_DHDR    14   /* a dead letter's fixed part: i64 at | i32 status | u16 answer */

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
    size_t n, done;             /* records in the job; sent and acknowledged, in order */
    long status;                /* the first refused record's answer (0: none came) */
    char answer[ST__OB_ANSWER]; /* its body, cut (the worker's until the job is back) */
    size_t answer_len;
    st_metric_t *sent, *failed, *dead;
};

static const uint8_t st__meta[] = {ST__OB_KS};
static const uint8_t st__dead_ks[] = {ST__OB_KS, ST__OB_DEAD};
static void st__tick(uv_timer_t *t);
static st_outbox_t *st__gauge_ob; /* the one outbox /metrics counts (NULL once closed) */

static int st__first_rec(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)val, (void)vlen;
    if (klen == 10) return 1; /* the dead letters, after every pending record: none pending */
    if (klen != 9) return 0;  /* the outbox's own record */
    *(uint64_t *)arg = st_be64_get((const uint8_t *)key + 1);
    return 1;
}

static int st__outbox_count_one(void *arg, const void *key, size_t klen, const void *val,
                                size_t vlen)
{
    (void)key, (void)klen, (void)val, (void)vlen;
    ++*(size_t *)arg;
    return 0;
}

/* Dead letters are few (a record no retry can deliver): counted. */
static double st__dead_now(void *arg)
{
    (void)arg;
    st_outbox_t *ob = st__gauge_ob;
    if (!ob || !st_outbox_on(ob)) return 0;
    size_t n = 0;
    uint64_t w = 0;
    st_store_scan(ob->store, st__dead_ks, 2, st__outbox_count_one, &n, &w);
    return (double)n;
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

/* Records are deleted (delivered, or moved to the dead letters) oldest first, and a retried dead
 * letter is staged again as the newest, so they are always the seqs first..last: O(1). */
static uint64_t st__pending_n(st_outbox_t *ob, uint64_t *wait)
{
    uint64_t origin, last, first = 0;
    if (st__meta_get(ob, &origin, &last, wait) != ST_OK || !last) return 0;
    st_store_scan(ob->store, st__meta, 1, st__first_rec, &first, wait);
    return first && first <= last ? last - first + 1 : 0;
}

static double st__pending(void *arg)
{
    (void)arg;
    st_outbox_t *ob = st__gauge_ob;
    uint64_t w = 0;
    return ob && st_outbox_on(ob) ? (double)st__pending_n(ob, &w) : 0;
}

bool st_outbox_on(const st_outbox_t *ob)
{
    return ob && ob->url[0];
}

/* Stages one record (its value, v) as the newest, *seq its seq, and wakes the sender. */
static int st__stage_raw(st_outbox_t *ob, const void *v, size_t vl, uint64_t *seq, uint64_t *wait)
{
    uint64_t meta[2];
    int rc = st__meta_get(ob, &meta[0], &meta[1], wait);
    if (rc) return rc;
    meta[1]++;
    if ((rc = st_store_put(ob->store, st__meta, 1, meta, sizeof meta, wait))) return rc;
    uint8_t k[9] = {ST__OB_KS};
    st_be64_put(k + 1, meta[1]);
    rc = st_store_put(ob->store, k, sizeof k, v, vl, wait);
    if (seq) *seq = meta[1];
    /* the sender looks soon (it finds the record once its batch is durable) */
    if (!rc && !ob->busy && !ob->fails && !ob->closing &&
        (!uv_is_active((uv_handle_t *)&ob->timer) ||
         uv_timer_get_due_in(&ob->timer) > ST__OB_WAIT_MS))
        uv_timer_start(&ob->timer, st__tick, ST__OB_WAIT_MS, 0);
    return rc;
}

/* kind: ST__OB_REMOVED, ST__OB_ADDED (membership changes) or ST__OB_ERASE. */
static int st__outbox_stage(st_outbox_t *ob, uint8_t kind, const char *user, size_t ul,
                            const char *room, size_t rl, const char *name, size_t nl,
                            int64_t joined_at, uint64_t *wait)
{
    if (!st_outbox_on(ob)) return ST_OK;
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
    int rc = st__stage_raw(ob, v.data, v.len, NULL, wait);
    st_buf_free(&v);
    return rc;
}

int st_outbox_stage(st_outbox_t *ob, const char *user, size_t ul, const char *room, size_t rl,
                    const char *name, size_t nl, int64_t joined_at, bool added, uint64_t *wait)
{
    return st__outbox_stage(ob, added ? ST__OB_ADDED : ST__OB_REMOVED, user, ul, room, rl, name, nl,
                            joined_at, wait);
}

int st_outbox_stage_erase(st_outbox_t *ob, const char *user, size_t ul, const char *room, size_t rl,
                          uint64_t *wait)
{
    return st__outbox_stage(ob, ST__OB_ERASE, user, ul, room, rl, NULL, 0, 0, wait);
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
static void st__outbox_render_change(st_buf_t *b, st_obrec_t *r, const char *user, size_t ul,
                                     const char *room, size_t rl, const char *name, size_t nl,
                                     const uint8_t *p)
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
    if (klen == 10) return 1; /* the dead letters: every pending record was seen */
    if (klen != 9) return 0;  /* the outbox's own record */
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
        st__outbox_render_change(&b, r, user, ul, room, rl, name, nl, p);
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
    st_sched_worker(); /* a pool thread: its wake-ups never preempt the loop */
    st_outbox_t *ob = w->data;
    ob->status = 0;
    ob->answer_len = 0;
    for (size_t i = 0; i < ob->n; i++) {
        st_buf_t resp = {0};
        long status = 0;
        int rc = st_repl_post(ob->url, ob->recs[i].path, ob->recs[i].body, ob->secret,
                              ob->recs[i].header, ST__OB_POST_MS, &resp, &status, NULL, 0);
        if (rc || status < 200 || status > 299) {
            ob->status = rc ? 0 : status;
            ob->answer_len = resp.len < sizeof ob->answer ? resp.len : sizeof ob->answer;
            if (ob->answer_len) memcpy(ob->answer, resp.data, ob->answer_len);
            st_buf_free(&resp);
            break;
        }
        st_buf_free(&resp);
        ob->done++;
    }
}

/* A refusal no resend can change: the receiving group looked at the record and said no (4xx),
 * and answers under an Idempotency-Key are remembered (a 404 or 409 comes back on every resend).
 * Retried: 401 and 403 (the route or --cluster-secret is wrong: fixing it fixes every record),
 * 408, 425 and 429 (timing), 5xx and no answer (status 0). */
static bool st__for_good(long status)
{
    return status >= 400 && status <= 499 && status != 401 && status != 403 && status != 408 &&
           status != 425 && status != 429;
}

/* Moves the refused record r from the pending records to the dead letters, with the answer, in
 * one batch: the same store path as the record itself (in a group, replicated by the leader's
 * batch like the delete of a delivered record), so every member holds the same lists. */
static int st__bury(st_outbox_t *ob, const st_obrec_t *r)
{
    if (st_store_standby(ob->store)) return ST_EUNAVAIL; /* no longer the leader: its business */
    const void *v;
    size_t vl;
    uint64_t wait = 0;
    int rc = st_store_get(ob->store, r->key, 9, &v, &vl, &wait);
    if (rc) return rc;
    st_buf_t d = {0};
    int64_t at = st_now_us();
    int32_t status = (int32_t)ob->status;
    uint16_t al = (uint16_t)ob->answer_len;
    st_buf_append(&d, &at, 8);
    st_buf_append(&d, &status, 4);
    st_buf_append(&d, &al, 2);
    st_buf_append(&d, ob->answer, al);
    st_buf_append(&d, v, vl); /* v is the store's until its next call: copied first */
    uint8_t k[10] = {ST__OB_KS, ST__OB_DEAD};
    memcpy(k + 2, r->key + 1, 8);
    rc = st_store_put(ob->store, k, sizeof k, d.data, d.len, &wait);
    if (!rc) rc = st_store_del(ob->store, r->key, 9, &wait);
    st_buf_free(&d);
    if (rc) return rc;
    st_metric_add(ob->dead, 1);
    st_warn("outbox: %s refused record %llu for good (%ld: %.*s): moved to the dead letters (GET "
            "/v1/admin/outbox; POST /v1/admin/outbox/%llu/retry sends it again)",
            ob->url, (unsigned long long)st_be64_get(r->key + 1), ob->status,
            (int)(ob->answer_len > 200 ? 200 : ob->answer_len), ob->answer,
            (unsigned long long)st_be64_get(r->key + 1));
    return ST_OK;
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
    if (failed && st__for_good(ob->status) && st__bury(ob, &ob->recs[ob->done]) == ST_OK) {
        ob->fails = 0; /* the records behind it go on */
        st__free_job(ob);
        st__arm(ob, 0);
        return;
    }
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
    ob->dead = st_metrics_counter(
        "strata_outbox_dead_total",
        "outbox records the receiving group refused for good (4xx), moved to the dead letters", "");
    st__gauge_ob = ob;
    st_metrics_gauge_fn("strata_outbox_dead",
                        "outbox records in the dead letters (GET /v1/admin/outbox), not sent "
                        "until retried",
                        "", st__dead_now, NULL);
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

/* ---- the admin view (GET /v1/admin/outbox, POST /v1/admin/outbox/{id}/retry) ---- */

/* A record's fields as JSON members (no braces): id, kind, user, room_id, name, joined_at. */
static bool st__rec_json(st_buf_t *out, uint64_t seq, const uint8_t *p, size_t vlen)
{
    static const char *kinds[] = {"removed", "added", "erased"};
    uint16_t ul, rl;
    if (vlen < ST__OB_HDR || p[0] > ST__OB_ERASE) return false;
    memcpy(&ul, p + 9, 2);
    memcpy(&rl, p + 11, 2);
    if ((size_t)ul + rl + ST__OB_HDR > vlen) return false;
    int64_t joined_at;
    memcpy(&joined_at, p + 1, 8);
    const char *user = (const char *)p + ST__OB_HDR, *room = user + ul, *name = room + rl;
    st_buf_printf(out, "\"id\":\"%llu\",\"kind\":\"%s\",\"user\":", (unsigned long long)seq,
                  kinds[p[0]]);
    st_buf_append_json_str(out, user, ul);
    st_buf_puts(out, ",\"room_id\":");
    st_buf_append_json_str(out, room, rl);
    if (p[0] != ST__OB_ERASE) {
        st_buf_puts(out, ",\"name\":");
        if (p[13])
            st_buf_append_json_str(out, name, vlen - ST__OB_HDR - ul - rl);
        else
            st_buf_puts(out, "null");
        st_buf_printf(out, ",\"joined_at\":%lld", (long long)joined_at);
    }
    return true;
}

typedef struct {
    st_buf_t *out;
    size_t n, limit, total; /* listed, at most listed, dead letters seen */
    bool dead;
} st_oblist_t;

static int st__list_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_oblist_t *l = arg;
    const uint8_t *k = key, *p = val;
    if (l->dead ? klen != 10 : klen != 9) return klen == 10 ? 1 : 0;
    if (l->dead) l->total++;                      /* few: all counted */
    if (l->n == l->limit) return l->dead ? 0 : 1; /* the pending ones are counted in O(1) */
    uint64_t seq = st_be64_get(k + klen - 8);
    size_t mark = l->out->len;
    st_buf_puts(l->out, l->n ? ",{" : "{");
    bool ok;
    if (l->dead) {
        int64_t at;
        int32_t status;
        uint16_t al;
        ok = vlen >= ST__OB_DHDR;
        if (ok) {
            memcpy(&at, p, 8);
            memcpy(&status, p + 8, 4);
            memcpy(&al, p + 12, 2);
            ok = (size_t)ST__OB_DHDR + al <= vlen &&
                 st__rec_json(l->out, seq, p + ST__OB_DHDR + al, vlen - ST__OB_DHDR - al);
        }
        if (ok) {
            st_buf_printf(l->out, ",\"status\":%d,\"answer\":", (int)status);
            st_buf_append_json_str(l->out, (const char *)p + ST__OB_DHDR, al);
            st_buf_printf(l->out, ",\"dead_at\":%lld", (long long)at);
        }
    } else {
        ok = st__rec_json(l->out, seq, p, vlen);
    }
    if (!ok) { /* not a record this module wrote: left out */
        l->out->len = mark;
        return 0;
    }
    st_buf_appendc(l->out, '}');
    l->n++;
    return 0;
}

int st_outbox_json(st_outbox_t *ob, size_t limit, st_buf_t *out, uint64_t *wait)
{
    if (!st_outbox_on(ob)) return ST_ENOTFOUND;
    st_buf_puts(out, "{\"route_url\":");
    st_buf_append_json_str(out, ob->url, strlen(ob->url));
    st_buf_puts(out, ",\"pending\":[");
    st_oblist_t l = {.out = out, .limit = limit};
    int rc = st_store_scan(ob->store, st__meta, 1, st__list_one, &l, wait);
    if (rc < 0) return rc;
    uint64_t pending = st__pending_n(ob, wait); /* O(1): the pending records are first..last */
    st_buf_puts(out, "],\"dead\":[");
    l = (st_oblist_t){.out = out, .limit = limit, .dead = true};
    rc = st_store_scan(ob->store, st__dead_ks, 2, st__list_one, &l, wait);
    if (rc < 0) return rc;
    st_buf_printf(out, "],\"pending_count\":%llu,\"dead_count\":%zu}", (unsigned long long)pending,
                  l.total);
    return ST_OK;
}

int st_outbox_retry(st_outbox_t *ob, uint64_t id, st_buf_t *out, uint64_t *wait)
{
    if (!st_outbox_on(ob)) return ST_ENOTFOUND;
    uint8_t k[10] = {ST__OB_KS, ST__OB_DEAD};
    st_be64_put(k + 2, id);
    const void *v;
    size_t vl;
    int rc = st_store_get(ob->store, k, sizeof k, &v, &vl, wait);
    if (rc) return rc;
    uint16_t al;
    if (vl < ST__OB_DHDR) return ST_EINTERNAL;
    memcpy(&al, (const uint8_t *)v + 12, 2);
    if ((size_t)ST__OB_DHDR + al + ST__OB_HDR > vl) return ST_EINTERNAL;
    st_buf_t rec = {0}; /* v is the store's until its next call */
    st_buf_append(&rec, (const uint8_t *)v + ST__OB_DHDR + al, vl - ST__OB_DHDR - al);
    uint64_t seq = 0;
    rc = st__stage_raw(ob, rec.data, rec.len, &seq, wait);
    if (!rc) rc = st_store_del(ob->store, k, sizeof k, wait);
    if (!rc) {
        st_buf_puts(out, "{");
        st__rec_json(out, seq, (const uint8_t *)rec.data, rec.len);
        st_buf_printf(out, ",\"retried\":\"%llu\"}", (unsigned long long)id);
    }
    st_buf_free(&rec);
    return rc;
}
