/* SPDX-License-Identifier: MIT */
/*
 * Reads on a member that does not serve (SPEC §8: what a stream on a member shows is
 * linearizable): a ReadIndex round. The member asks the leader for its commit index
 * (POST /v1/cluster/read-index, on a worker thread); the leader answers only once it has proved
 * it still leads (its lease, or a fence committed by a majority), so the index covers every
 * write acknowledged before the round was sent. The member then waits until Raft applied that
 * index here and the store shows it, and only then are the reads of the round answered.
 *
 * Tickets: a read takes the next one; a round covers every ticket taken before it was sent, so
 * a burst of subscriptions costs one round. A round that fails (no leader known, no answer, the
 * answer not applied in time) fails its tickets: their readers answer no_leader.
 */
#include "strata/idle.h"
#include "internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>

static void st__ri_tick(uv_timer_t *t);

/* Tickets up to ri_round failed: tell the reader (from the timer, never from inside a begin). */
static void st__ri_fail(st_repl_t *r)
{
    r->ri_failed = r->ri_round;
    r->ri_applying = false;
    r->ri_notify = true;
    uv_timer_start(&r->ri_timer, st__ri_tick, 0, 0);
}

static void st__ri_work(uv_work_t *w)
{
    st_sched_worker(); /* a pool thread: its wake-ups never preempt the loop */
    st_repl_t *r = w->data;
    st_buf_t resp = {0};
    long status = 0;
    int rc = st__member_post(r->ri_leader, "/v1/cluster/read-index", "{}", r->secret,
                             (long)r->ri_timeout_ms, &resp, &status, NULL, 0);
    r->ri_rc = ST_EUNAVAIL;
    if (rc == ST_OK && status == 200) {
        cJSON *j = cJSON_ParseWithLength(resp.data ? resp.data : "", resp.len);
        const cJSON *ci = cJSON_GetObjectItemCaseSensitive(j, "commit_index");
        if (cJSON_IsNumber(ci) && ci->valuedouble >= 0) {
            r->ri_index = (uint64_t)ci->valuedouble;
            r->ri_rc = ST_OK;
        }
        cJSON_Delete(j);
    }
    st_buf_free(&resp);
}

static void st__ri_done(uv_work_t *w, int status)
{
    st_repl_t *r = w->data;
    r->ri_busy = false;
    if (r->closing) {
        st__closed_step(r);
        return;
    }
    if (status != 0 || r->ri_rc != ST_OK) {
        st__ri_fail(r);
        return;
    }
    r->ri_applying = true;
    r->ri_shown = 0;
    r->ri_deadline_ns = uv_hrtime() + (uint64_t)r->ri_timeout_ms * 1000000;
    uv_timer_start(&r->ri_timer, st__ri_tick, 0, 0);
}

/* Sends a round for the tickets taken since the last one, if none is running. */
static void st__ri_kick(st_repl_t *r)
{
    if (r->closing || r->ri_busy || r->ri_applying || r->ri_round >= r->ri_next) return;
    r->ri_round = r->ri_next;
    r->ri_work.data = r;
    if (st_repl_leader_url(r, r->ri_leader, sizeof r->ri_leader) != ST_OK ||
        uv_queue_work(r->loop, &r->ri_work, st__ri_work, st__ri_done) != 0) {
        st__ri_fail(r);
        return;
    }
    r->ri_busy = true;
}

static void st__ri_tick(uv_timer_t *t)
{
    st_repl_t *r = t->data;
    if (r->closing) return;
    bool resolved = r->ri_notify;
    r->ri_notify = false;
    if (r->ri_applying) {
        if (!r->ri_shown && raft_last_applied(&r->raft) >= r->ri_index)
            r->ri_shown = st_store_group_queued(r->store) + 1; /* +1: 0 means not yet */
        if (r->ri_shown && st_store_group_shown(r->store) + 1 >= r->ri_shown) {
            r->ri_applying = false;
            r->ri_done = r->ri_round;
            resolved = true;
        } else if (uv_hrtime() > r->ri_deadline_ns) {
            r->ri_applying = false;
            r->ri_failed = r->ri_round;
            resolved = true;
        } else {
            uv_timer_start(&r->ri_timer, st__ri_tick, 1, 0);
        }
    }
    if (resolved && r->ri_fn) r->ri_fn(r->ri_arg);
    st__ri_kick(r);
}

uint64_t st_repl_read_index_begin(st_repl_t *r)
{
    uint64_t t = ++r->ri_next;
    st__lazy_update(r); /* this member's applies are waited for now */
    if (!r->ri_busy && !r->ri_applying) uv_timer_start(&r->ri_timer, st__ri_tick, 0, 0);
    return t;
}

int st_repl_read_index_state(const st_repl_t *r, uint64_t ticket)
{
    if (ticket <= r->ri_failed && ticket > r->ri_done) return -1;
    return ticket <= r->ri_done ? 1 : 0;
}

void st_repl_on_read_index(st_repl_t *r, void (*fn)(void *arg), void *arg)
{
    r->ri_fn = fn;
    r->ri_arg = arg;
}

uint64_t st_repl_commit_index(const st_repl_t *r)
{
    return r->raft.commit_index;
}

void st__read_index_init(st_repl_t *r, unsigned election_timeout_ms)
{
    r->ri_timeout_ms = 2 * election_timeout_ms < 1000 ? 1000 : 2 * election_timeout_ms;
    uv_timer_init(r->loop, &r->ri_timer);
    r->ri_timer.data = r;
    uv_unref((uv_handle_t *)&r->ri_timer);
}
