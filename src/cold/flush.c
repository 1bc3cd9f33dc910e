/* SPDX-License-Identifier: MIT */
/*
 * The tier's flush engine (see strata/tier.h): an owner's oldest hot rows become one object. On
 * the loop, the kind takes a snapshot of the rows; on a libuv worker the kind encodes them and
 * the engine writes the object to storage; back on the loop, one batch records the object in the
 * manifest, and the kind deletes the hot rows and moves their counts into the cold baselines in
 * that same batch. Until that batch, readers see the rows hot; after it, cold; never both, never
 * neither.
 *
 * Nothing that a crash could take back leaves the process: the snapshot may include writes
 * still staged, so the worker starts only once the batch they are in is durable (a flush whose
 * batch fails is cancelled). That batch also records the object about to be written ('P'); the
 * batch that records it in the manifest drops that again. An object whose recording batch never
 * committed (a crash, a failed batch, a failed write) is found by its 'P' before the owner's
 * next flush (or at start-up) and deleted, so an owner's files hold each row once.
 *
 * A failed write (storage down, disk full) leaves the hot rows alone and retries with backoff;
 * one that can never succeed (ST_EINVAL: a key the backend refuses) is reported and not retried.
 * Loop thread only (but for the worker's part).
 */
#include "strata/coldshare.h"
#include "strata/idle.h"
#include "strata/metrics.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Flushes in flight at once. Each one's time is mostly waits — its snapshot's batch made durable,
 * the object's fsyncs, the swap's batch — so several overlap them (and share the store's group
 * commits and the file system's journal commits): one at a time, 6,000 users cooled in 20.0 s,
 * four at a time in 10.8–11.4 s, with less CPU per user and no longer loop stall (bench/RESULTS.md,
 * Session 18). The loop keeps its core: workers encode at SCHED_IDLE (st_tier_background), and
 * four of the --cold-workers pool (16) leave the rest to cold reads. */
#define ST__FLUSH_PARALLEL 4

/* Each start takes its snapshot on the loop (up to ST_TIER_FLUSH_ROWS rows: a millisecond or
 * more) and each flush that comes back commits there: a pump starts flushes only while the loop
 * turn it runs in has spent less than ST__PUMP_BUDGET_NS on them, the rest ST__PUMP_NEXT_MS
 * later. Four snapshots started by one tick made a 7 ms turn, a commit and the next snapshot in
 * one callback 6 ms (bench/loopstall.sh erase, issue 48). */
#define ST__PUMP_BUDGET_NS 1000000
#define ST__PUMP_NEXT_MS   5

/* A user with rows to flush (a flush of every user queues them all), its key at its own length. */
typedef struct {
    st_map_node_t node;
    size_t olen;
    uint64_t not_before_ms;
    uint32_t failures;
    bool again;   /* asked for while its flush ran: the rows since that flush's snapshot */
    char owner[]; /* olen bytes */
} st_fowner_t;

typedef struct st_fjob {
    uv_work_t req;
    st_tier_flush_t *f;
    st_fowner_t *o;
    st_list_t held; /* in the engine's held list */
    uint64_t wait;  /* the batch that makes the snapshot (and the 'P' record) durable */
    uint64_t seq;
    st_tier_snap_t snap;
    st_tier_file_t file; /* the object, as the swap records it */
    /* worker results */
    int rc;
    uint64_t size;
    st_buf_t stats; /* the object's column stats, from its footer in memory (colstats.c) */
    uint64_t t0;
    uint64_t t_snap; /* the snapshot taken: from here to st__flush_queue it waits for durability */
    uint64_t waited; /* ns spent so */
    uint64_t put_ns; /* the worker's wait for object storage (written by the worker) */
} st_fjob_t;

struct st_tier_flush {
    uv_loop_t *loop;
    st_store_t *store;
    st_objstore_t *obj;
    const st_tier_kind_t *kind;
    bool stopping, urgent, timer_closed;
    uv_timer_t resume;
    uint64_t resume_ms; /* pacing: no new flush before this */
    /* owners waiting for a flush, with one in flight, and whose flush can never succeed */
    st_map_t pending, running, stuck;
    size_t nrunning;
    st_list_t held; /* st_fjob_t: snapshots waiting for their batch to be durable */
    void (*closed)(void *arg);
    void *closed_arg;
    st_metric_t *m_ok, *m_err, *m_rows, *m_bytes, *m_running, *m_pending, *m_stuck, *m_seconds;
};

static uint64_t st__flush_now_ms(st_tier_flush_t *f)
{
    return uv_now(f->loop);
}

/* ---- the queue ---- */

static void st__flush_enqueue(st_tier_flush_t *f, const char *o, size_t ol, bool asked)
{
    /* one in flight took its snapshot before this was asked for: it goes again once done (a
     * POST /v1/admin/flush while a flush waited for slow storage was dropped, and the rows
     * posted before it stayed hot until the next interval). Not for the row threshold: it
     * counts the rows in flight as hot until their flush commits, so every post during a
     * flush would queue a second flush of the few rows posted meanwhile (review, Session 22) */
    st_fowner_t *r = (st_fowner_t *)st_map_get(&f->running, o, ol);
    if (r && asked) r->again = true;
    if (f->stopping || r || st_map_get(&f->pending, o, ol) || st_map_get(&f->stuck, o, ol)) return;
    st_fowner_t *w = st_calloc(1, sizeof *w + ol);
    memcpy(w->owner, o, ol);
    w->olen = ol;
    w->node.key = w->owner;
    w->node.klen = ol;
    st_map_insert(&f->pending, &w->node);
    st_metric_set(f->m_pending, (double)f->pending.count);
}

void st_tier_flush_enqueue(st_tier_flush_t *f, const char *o, size_t ol)
{
    st__flush_enqueue(f, o, ol, true);
}

void st_tier_flush_due(st_tier_flush_t *f, const char *o, size_t ol)
{
    st__flush_enqueue(f, o, ol, false);
}

void st_tier_flush_urgent(st_tier_flush_t *f, bool urgent)
{
    f->urgent = urgent;
}

/* ---- worker side ---- */

/* Encoding and compressing is background work: it runs on CPU time nothing else wants
 * (SCHED_IDLE), so serving keeps its cores when they are few. The pool thread is back at its own
 * policy before it returns to libuv: left at SCHED_IDLE, it would run the pool's next job (a cold
 * read) at that priority, and take libuv's queue mutexes at it — the loop, queueing work, then
 * waits for a thread the scheduler starves (priority inversion: loop stalls of ~4 ms with no CPU
 * spent, measured during a flush). So a thread goes there only if it can come back, and comes
 * back to exactly the policy it had (core/idle.c). */
void st_tier_background(bool on)
{
    static __thread st_idle_t idle; /* this pool thread's, read at its first background job */
    static __thread bool known;
    if (!known) {
        st_idle_init(&idle, "a cold-tier worker");
        known = true;
    }
    if (on)
        st_idle_enter(&idle);
    else
        st_idle_leave(&idle);
}

static void st__flush_work(uv_work_t *req)
{
    st_sched_worker(); /* a pool thread: its wake-ups never preempt the loop */
    st_fjob_t *j = req->data;
    st_tier_background(true);
    st_buf_t file = {0};
    j->rc = j->f->kind->encode(j->f->kind->arg, j->snap.rows, &file);
    uint64_t t = uv_hrtime();
    if (j->rc == ST_OK) j->rc = st_objstore_put(j->f->obj, j->snap.key.data, file.data, file.len);
    j->put_ns = uv_hrtime() - t;
    j->size = file.len;
    /* taken here, where the bytes are: the tables' commit reads no footer back (colstats.c) */
    if (j->rc == ST_OK && st_tier_stats_of(file.data, file.len, &j->stats) != ST_OK)
        st_buf_reset(&j->stats);
    st_buf_free(&file);
    st_tier_background(false);
}

/* ---- loop side ---- */

static void st__flush_job_free(st_fjob_t *j)
{
    const st_tier_kind_t *k = j->f->kind;
    if (j->snap.rows) k->release(k->arg, j->snap.rows);
    st_buf_free(&j->snap.key);
    st_buf_free(&j->stats);
    free(j);
}

static void st__flush_maybe_free(st_tier_flush_t *f)
{
    if (!f->timer_closed || f->nrunning) return;
    st_map_t *maps[] = {&f->pending, &f->running, &f->stuck};
    for (size_t i = 0; i < 3; i++) {
        size_t it;
        st_map_node_t *n;
        while ((n = st_map_first(maps[i], &it)) != NULL) {
            st_map_remove(maps[i], n);
            free(n);
        }
        st_map_free(maps[i]);
    }
    void (*closed)(void *) = f->closed;
    void *arg = f->closed_arg;
    free(f);
    if (closed) closed(arg);
}

/* The kind's side of the swap: hot rows out, counts to the cold baselines (fills j->file). */
static int st__flush_kind_side(void *arg, uint64_t *wait)
{
    st_fjob_t *j = arg;
    const st_tier_kind_t *k = j->f->kind;
    return k->commit(k->arg, j->o->owner, j->o->olen, j->snap.rows, &j->file, wait);
}

/* The batch that moves the rows (intent.c): 'P' out, the kind's hot side, 'W' and 'F' in. */
static int st__cold_flush_commit(st_tier_flush_t *f, st_fjob_t *j, uint64_t *wait)
{
    j->file = (st_tier_file_t){0, 0, 0, j->size};
    st_tier_swap_t sw = {.pseq = j->seq,
                         .fseq = j->seq,
                         .file = &j->file,
                         .key = j->snap.key.data,
                         .stats = (const uint8_t *)j->stats.data,
                         .stats_len = j->stats.len,
                         .watermark = true,
                         .kind = st__flush_kind_side,
                         .arg = j};
    int rc = st__tier_swap(f->store, j->o->owner, j->o->olen, &sw, wait);
    return rc == ST_ECONFLICT ? ST_EINTERNAL : rc; /* its intent was swept: an invariant broke */
}

/* Back on the queue after a failure, no sooner than the backoff (up to a minute). */
static void st__retry_later(st_tier_flush_t *f, st_fowner_t *o, int rc)
{
    st_metric_add(f->m_err, 1);
    o->failures++;
    uint64_t backoff = 1000ull << (o->failures < 6 ? o->failures : 6);
    o->not_before_ms = st__flush_now_ms(f) + (backoff > 60000 ? 60000 : backoff);
    st_warn("cold: flush of %.*s failed (%s); retrying in %llu ms", (int)o->olen, o->owner,
            st_strerror(rc), (unsigned long long)(o->not_before_ms - st__flush_now_ms(f)));
    st_map_insert(&f->pending, &o->node);
    st_metric_set(f->m_pending, (double)f->pending.count);
}

static void st__running_done(st_tier_flush_t *f, st_fowner_t *o)
{
    st_map_remove(&f->running, &o->node);
    f->nrunning--;
    st_metric_set(f->m_running, (double)f->nrunning);
}

/* A commit that failed (nothing changed in the hot store: it is rolled back with its batch):
 * what the worker may have written is an orphan now. */
static void st__flush_failed(st_tier_flush_t *f, st_fjob_t *j, int rc, uint64_t *wait)
{
    st_fowner_t *o = j->o;
    if (rc == ST_EEXIST) /* nothing written: another writer's object is there (SPEC §5) */
        st__tier_collided(f->store, o->owner, o->olen, j->seq, wait);
    else
        st__tier_abandon(f->store, o->owner, o->olen, j->seq, j->snap.key.data, wait);
    f->kind->orphans(f->kind->arg, o->owner, o->olen, wait);
    if (rc != ST_EINVAL) {
        st__retry_later(f, o, rc);
        return;
    }
    /* it can never succeed (a key or an object the backend refuses): say so once */
    st_metric_add(f->m_err, 1);
    st_error("cold: %.*s can never be flushed (%s: the object store refuses %s); its "
             "rows stay hot",
             (int)o->olen, o->owner, st_strerror(rc), j->snap.key.data);
    st_map_insert(&f->stuck, &o->node);
    st_metric_set(f->m_stuck, (double)f->stuck.count);
}

static void st__succeeded(st_tier_flush_t *f, st_fjob_t *j)
{
    st_fowner_t *o = j->o;
    st_metric_add(f->m_ok, 1);
    st_metric_add(f->m_rows, (double)j->snap.n);
    st_metric_add(f->m_bytes, (double)j->size);
    st_metric_observe(f->m_seconds, (double)(uv_hrtime() - j->t0) / 1e9);
    st_info("cold: flushed %zu rows of %.*s to %s (%llu bytes)", j->snap.n, (int)o->olen, o->owner,
            j->snap.key.data, (unsigned long long)j->size);
    f->kind->flushed(f->kind->arg, o->owner, o->olen);
    /* more rows: again at once — unless flushed queued it already (the delta kind does when
     * marks are left), and a second node would run two flushes of one owner side by side */
    bool again = j->snap.capped || o->again;
    o->again = false;
    if (again && !st_map_get(&f->pending, o->owner, o->olen))
        st_map_insert(&f->pending, &o->node);
    else
        free(o);
    /* shown at once: the pump may not run before the pace's resume, and a gauge left at 0
     * with the owner queued told a waiter that flushing was over (Session 20) */
    st_metric_set(f->m_pending, (double)f->pending.count);
}

static void st__flush_done(uv_work_t *req, int status)
{
    uint64_t since = uv_hrtime();
    st_fjob_t *j = req->data;
    st_tier_flush_t *f = j->f;
    st__running_done(f, j->o);
    if (f->stopping || status == UV_ECANCELED) {
        /* shutting down: the object, if written, has its 'P' record and no 'F': the next
         * start-up deletes it */
        free(j->o);
        st__flush_job_free(j);
        st__flush_maybe_free(f);
        return;
    }
    uint64_t wait = 0;
    int rc = j->rc;
    if (rc == ST_OK) rc = st__cold_flush_commit(f, j, &wait);
    if (rc != ST_OK)
        st__flush_failed(f, j, rc, &wait);
    else
        st__succeeded(f, j);
    /* Pace: the next flush waits twice as long as this one worked, so flushing takes at most
     * a third of the time (the loop's snapshot and commit, the apply thread's deletes) unless
     * the hot store is filling up. Waiting is not work — for its snapshot to be durable, for
     * object storage to take the object (fsyncs, or a round trip to S3): with flushes of a few
     * thousand rows those fixed waits would otherwise set the pace. */
    uint64_t took_ms = (uv_hrtime() - j->t0 - j->waited - j->put_ns) / 1000000;
    f->resume_ms = f->urgent ? 0 : st__flush_now_ms(f) + 2 * took_ms;
    st__flush_job_free(j);
    st_tier_flush_pump_since(f, since); /* the commit's time counts */
    f->kind->done(f->kind->arg);
}

static void st__flush_queue(st_tier_flush_t *f, st_fjob_t *j)
{
    j->waited = uv_hrtime() - j->t_snap;
    if (uv_queue_work(f->loop, &j->req, st__flush_work, st__flush_done) != 0) {
        j->rc = ST_EIO;
        st__flush_done(&j->req, 0);
    }
}

/* Takes the owner's oldest hot rows and hands them to a worker once they are durable; false if
 * there was nothing to flush. */
static bool st__flush_start(st_tier_flush_t *f, st_fowner_t *o)
{
    if (st_store_writable(f->store) == ST_ENOLEADER) return false; /* a group's leader flushes */
    if (st_coldshare_held()) return false; /* ... into a store every member reads */
    st_fjob_t *j = st_calloc(1, sizeof *j);
    j->f = f;
    j->o = o;
    j->t0 = uv_hrtime();
    uint64_t wait = 0;
    st_tier_stat_t st = {0};
    uint64_t writer = 0;
    int rc = f->kind->orphans(f->kind->arg, o->owner, o->olen, &wait);
    if (rc == ST_OK) rc = st_tier_stat(f->store, o->owner, o->olen, &st, &wait);
    if (rc == ST_OK) rc = st_tier_writer(f->store, &writer, &wait); /* the intent's batch */
    j->seq = st.next_seq ? st.next_seq : 1;
    if (rc == ST_OK)
        rc = f->kind->snapshot(f->kind->arg, o->owner, o->olen, &st, j->seq, writer, &j->snap,
                               &wait);
    if (rc != ST_OK || j->snap.n == 0 ||
        st__tier_intend(f->store, o->owner, o->olen, j->seq, &j->snap.key, &st, &wait) != ST_OK) {
        st__flush_job_free(j);
        return false;
    }
    j->req.data = j;
    j->wait = wait;
    j->t_snap = uv_hrtime();
    st_map_insert(&f->running, &o->node);
    f->nrunning++;
    st_metric_set(f->m_running, (double)f->nrunning);
    if (wait > st_store_durable_id(f->store)) { /* see st_tier_flush_durable */
        st_list_insert(&f->held, &j->held);
        return true;
    }
    st__flush_queue(f, j);
    return true;
}

/* Held flushes whose snapshot is durable now go to a worker. */
void st_tier_flush_durable(st_tier_flush_t *f, uint64_t id)
{
    for (st_list_t *l = f->held.next, *next; l != &f->held; l = next) {
        st_fjob_t *j = ST_LIST_ITEM(l, st_fjob_t, held);
        next = l->next;
        if (j->wait > id) continue;
        st_list_unlink(l);
        st__flush_queue(f, j);
    }
}

/* Held flushes whose snapshot was rolled back are cancelled: those rows never existed. */
void st_tier_flush_failed(st_tier_flush_t *f, uint64_t first, int err)
{
    for (st_list_t *l = f->held.next, *next; l != &f->held; l = next) {
        st_fjob_t *j = ST_LIST_ITEM(l, st_fjob_t, held);
        next = l->next;
        if (j->wait < first) continue;
        st_list_unlink(l);
        st__running_done(f, j->o);
        st__retry_later(f, j->o, err);
        st__flush_job_free(j);
    }
    st_tier_flush_pump(f);
}

size_t st_tier_flush_pending(const st_tier_flush_t *f)
{
    return f->pending.count;
}

static void st__on_resume(uv_timer_t *t)
{
    st_tier_flush_pump(t->data);
}

void st_tier_flush_pump(st_tier_flush_t *f)
{
    st_tier_flush_pump_since(f, uv_hrtime());
}

void st_tier_flush_pump_since(st_tier_flush_t *f, uint64_t since)
{
    uint64_t now = st__flush_now_ms(f);
    size_t it;
    if (f->stopping) return;
    if (now < f->resume_ms) {
        if (f->pending.count) uv_timer_start(&f->resume, st__on_resume, f->resume_ms - now, 0);
        return;
    }
    while (f->nrunning < ST__FLUSH_PARALLEL && !f->stopping) {
        if (f->pending.count && uv_hrtime() - since >= ST__PUMP_BUDGET_NS) { /* next turn */
            uv_timer_start(&f->resume, st__on_resume, ST__PUMP_NEXT_MS, 0);
            break;
        }
        st_fowner_t *pick = NULL;
        for (st_map_node_t *n = st_map_first(&f->pending, &it); n;
             n = st_map_next(&f->pending, &it, n))
            if (((st_fowner_t *)n)->not_before_ms <= now) {
                pick = (st_fowner_t *)n;
                break;
            }
        if (!pick) break;
        st_map_remove(&f->pending, &pick->node);
        if (!st__flush_start(f, pick)) free(pick);
    }
    st_metric_set(f->m_pending, (double)f->pending.count);
}

/* The distinct owners of 'P owner 0 …' keys (they come sorted: a repeat follows its first),
 * each: u8 length, then the name. Collected first: acting on them inside the scan would read
 * and stage writes while the scan's own pointers are live. */
typedef struct {
    st_buf_t names;
    size_t prev; /* offset of the last name added */
} st_owners_t;

static int st__collect_owner(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_owners_t *us = arg;
    st_buf_t *b = &us->names;
    (void)val;
    (void)vlen;
    const char *u = (const char *)key + 1;
    size_t ul = strnlen(u, klen - 1);
    if (ul == 0 || ul >= ST_TIER_OWNER_MAX || ul == klen - 1) return 0;
    uint16_t l = (uint16_t)ul, pl = 0; /* an owner may pass 255 bytes (a tagged one) */
    if (b->len) memcpy(&pl, b->data + us->prev, sizeof pl);
    if (b->len && pl == l && memcmp(b->data + us->prev + sizeof pl, u, ul) == 0) return 0;
    us->prev = b->len;
    st_buf_append(b, &l, sizeof l);
    st_buf_append(b, u, ul);
    return 0;
}

void st_tier_flush_recover(st_tier_flush_t *f)
{
    st_owners_t us = {{0}, 0};
    uint64_t wait = 0;
    char pre = 'P';
    st_store_scan(f->store, &pre, 1, st__collect_owner, &us, &wait);
    st_buf_t *b = &us.names;
    for (size_t i = 0; i < b->len;) {
        uint16_t ul;
        memcpy(&ul, b->data + i, sizeof ul);
        f->kind->orphans(f->kind->arg, b->data + i + sizeof ul, ul, &wait);
        i += sizeof ul + ul;
    }
    st_buf_free(b);
}

int st_tier_flush_open(st_tier_flush_t **out, uv_loop_t *loop, st_store_t *store,
                       st_objstore_t *obj, const st_tier_kind_t *kind)
{
    st_tier_flush_t *f = st_calloc(1, sizeof *f);
    f->loop = loop;
    f->store = store;
    f->obj = obj;
    f->kind = kind;
    st_list_init(&f->held);
    st_map_init(&f->pending);
    st_map_init(&f->running);
    st_map_init(&f->stuck);
    f->m_ok = st_metrics_counter("strata_flush_total", "Cold-tier flushes", "result=\"ok\"");
    f->m_err = st_metrics_counter("strata_flush_total", "Cold-tier flushes", "result=\"error\"");
    f->m_rows = st_metrics_counter("strata_flush_rows_total",
                                   "Rows moved to the cold tier (every kind)", "");
    f->m_bytes = st_metrics_counter("strata_flush_bytes_total", "Parquet bytes written", "");
    f->m_running = st_metrics_gauge("strata_flush_running", "Flushes in progress", "");
    f->m_pending = st_metrics_gauge("strata_flush_pending", "Users waiting for a flush", "");
    f->m_stuck = st_metrics_gauge("strata_flush_stuck_users",
                                  "Users whose flush can never succeed (see the log)", "");
    f->m_seconds =
        st_metrics_histogram("strata_flush_seconds", "Flush duration, snapshot to manifest", "",
                             st_metrics_latency_bounds, st_metrics_latency_nbounds);
    uv_timer_init(loop, &f->resume);
    f->resume.data = f;
    *out = f;
    return ST_OK;
}

static void st__resume_closed(uv_handle_t *h)
{
    st_tier_flush_t *f = h->data;
    f->timer_closed = true;
    st__flush_maybe_free(f);
}

void st_tier_flush_close(st_tier_flush_t *f, void (*closed)(void *arg), void *arg)
{
    f->stopping = true;
    f->closed = closed;
    f->closed_arg = arg;
    while (!st_list_empty(&f->held)) { /* never handed to a worker: 'P' waits for start-up */
        st_fjob_t *j = ST_LIST_ITEM(f->held.next, st_fjob_t, held);
        st_list_unlink(&j->held);
        st__running_done(f, j->o);
        free(j->o);
        st__flush_job_free(j);
    }
    uv_close((uv_handle_t *)&f->resume, st__resume_closed);
}
