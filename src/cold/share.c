/* SPDX-License-Identifier: MIT */
/*
 * Whether a group's members share one cold store: markers written and read back on the worker
 * pool, a verdict kept on the loop (see include/strata/coldshare.h for the protocol and why).
 */
#include "strata/idle.h"
#include "strata/coldshare.h"
#include "strata/core.h"
#include "strata/metrics.h"

#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ST__MARKER_LEN 33    /* 32 hex digits and a newline */
#define ST__CHECK_MS   1000  /* while not (yet) shared */
#define ST__RECHECK_MS 10000 /* once shared: a member restarted on a store of its own */
#define ST__MAX_IDS    16

/* Held from the start of a group member until its first check passes; never for a single node
 * (no checker is opened). */
static bool st__held;

struct st_coldshare {
    uv_loop_t *loop;
    st_objstore_t *obj;
    st_coldshare_expect_fn expect;
    void *arg;
    uint64_t self;
    uint64_t ids[ST__MAX_IDS];
    size_t n;
    char nonce[33];
    uv_timer_t timer;
    uv_work_t work;
    bool written;  /* our marker is in the store */
    bool checking; /* a job is on the worker pool */
    bool closing;
    bool timer_closed;
    bool ok;
    /* the job's: what each member's marker must say (empty: unknown yet), and the verdict */
    char want[ST__MAX_IDS][33];
    int put_rc;
    bool job_ok;
    bool job_failed; /* the store did not answer: no verdict from this check */
    uint64_t bad_id;
};

static void st__key(char *k, size_t cap, uint64_t id)
{
    snprintf(k, cap, ".strata/members/%llu", (unsigned long long)id);
}

/* On a worker: our marker in (until it is), then every member's marker read back. */
static void st__work(uv_work_t *w)
{
    st_sched_worker(); /* a pool thread: its wake-ups never preempt the loop */
    st_coldshare_t *s = w->data;
    char key[64];
    if (!s->written) {
        char body[ST__MARKER_LEN];
        memcpy(body, s->nonce, 32);
        body[32] = '\n';
        st__key(key, sizeof key, s->self);
        s->put_rc = st_objstore_replace(s->obj, key, body, sizeof body); /* a new nonce a start */
    }
    s->job_failed = !s->written && s->put_rc != ST_OK;
    s->job_ok = !s->job_failed;
    for (size_t i = 0; i < s->n && s->job_ok; i++) {
        if (!s->want[i][0]) { /* the group does not know this member's nonce yet */
            s->job_ok = false;
            s->bad_id = s->ids[i];
            break;
        }
        st_buf_t got = {0};
        st__key(key, sizeof key, s->ids[i]);
        int rc = st_objstore_get(s->obj, key, 0, ST__MARKER_LEN, &got);
        if (rc != ST_OK || got.len != ST__MARKER_LEN || memcmp(got.data, s->want[i], 32) != 0) {
            s->job_ok = false;
            s->bad_id = s->ids[i];
            /* missing or another nonce is a verdict; an unreachable store is not */
            s->job_failed = rc != ST_OK && rc != ST_ENOTFOUND;
        }
        st_buf_free(&got);
    }
}

static void st__after(uv_work_t *w, int status);

static void st__share_on_timer(uv_timer_t *t)
{
    st_coldshare_t *s = t->data;
    if (s->checking || s->closing) return;
    for (size_t i = 0; i < s->n; i++)
        if (!s->expect(s->arg, s->ids[i], s->want[i])) s->want[i][0] = '\0';
    s->work.data = s;
    s->bad_id = 0;
    if (uv_queue_work(s->loop, &s->work, st__work, st__after) == 0) s->checking = true;
}

static void st__after(uv_work_t *w, int status)
{
    st_coldshare_t *s = w->data;
    s->checking = false;
    if (s->closing) {
        if (s->timer_closed) free(s); /* else the timer's close frees it */
        return;
    }
    if (!s->written && s->put_rc == ST_OK) s->written = true;
    if (status != 0 || s->job_failed) { /* ask again soon; the last verdict stands meanwhile */
        uv_timer_start(&s->timer, st__share_on_timer, ST__CHECK_MS, 0);
        return;
    }
    bool ok = s->job_ok;
    if (ok != s->ok) {
        if (ok)
            st_info("cold tier: every member of the group reads the same store");
        else
            st_warn("cold tier: member %llu's marker cannot be read back from this store as the "
                    "group knows it: the members do not share one cold store; flushes and "
                    "deletes wait (set the same --cold-url, s3:// or a shared directory, on every "
                    "member)",
                    (unsigned long long)s->bad_id);
    }
    s->ok = ok;
    st__held = !ok;
    uv_timer_start(&s->timer, st__share_on_timer, ok ? ST__RECHECK_MS : ST__CHECK_MS, 0);
}

static double st__g_shared(void *arg)
{
    return ((st_coldshare_t *)arg)->ok;
}

int st_coldshare_open(st_coldshare_t **out, uv_loop_t *loop, st_objstore_t *obj, uint64_t self,
                      const uint64_t *ids, size_t n, st_coldshare_expect_fn expect, void *arg)
{
    if (n > ST__MAX_IDS) return ST_EINVAL;
    st_coldshare_t *s = st_calloc(1, sizeof *s);
    unsigned char rnd[16];
    if (RAND_bytes(rnd, sizeof rnd) != 1) {
        free(s);
        return ST_EIO;
    }
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(s->nonce + 2 * i, 3, "%02x", rnd[i]);
    s->loop = loop;
    s->obj = obj;
    s->self = self;
    s->expect = expect;
    s->arg = arg;
    memcpy(s->ids, ids, n * sizeof *ids);
    s->n = n;
    st__held = true;
    uv_timer_init(loop, &s->timer);
    s->timer.data = s;
    uv_unref((uv_handle_t *)&s->timer);
    uv_timer_start(&s->timer, st__share_on_timer, 0, 0);
    st_metrics_gauge_fn("strata_cold_shared",
                        "1 while every member's marker reads back from this cold store", "",
                        st__g_shared, s);
    *out = s;
    return ST_OK;
}

const char *st_coldshare_nonce(const st_coldshare_t *s)
{
    return s->nonce;
}

bool st_coldshare_ok(const st_coldshare_t *s)
{
    return s->ok;
}

static void st__timer_closed(uv_handle_t *h)
{
    st_coldshare_t *s = h->data;
    s->timer_closed = true;
    if (!s->checking) free(s); /* else the job, once back, frees it */
}

void st_coldshare_close(st_coldshare_t *s)
{
    if (!s) return;
    s->closing = true;
    uv_close((uv_handle_t *)&s->timer, st__timer_closed);
}

bool st_coldshare_held(void)
{
    return st__held;
}
