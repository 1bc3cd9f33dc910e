/* SPDX-License-Identifier: MIT */
/*
 * One member of a replicated group: C-Raft on strata's loop, the store as its state machine.
 *
 * Roles. Raft elects; this file watches the role (C-Raft 0.15 has no role callback, so a short
 * timer polls it) and moves the store between standby and serving. A member that wins an
 * election is not yet allowed to answer: it first commits a barrier (C-Raft appends no entry of
 * its own on election, and only an entry of the new term proves it holds every committed one),
 * waits until LMDB holds everything applied, has every in-memory view rebuilt from LMDB, and only
 * then takes writes. Losing the role puts the store back in standby at once; Raft fails the
 * pending proposals and their responses go out as 503.
 *
 * Snapshots are markers: the Raft index they stand for. LMDB itself is the state, forced to disk
 * (off the loop) before Raft may drop the entries the marker covers. A member whose LMDB is
 * older than a marker it is asked to restore cannot be caught up from the log; it refuses the
 * marker (see README: replacing a member).
 */
#include "strata/idle.h"
#include "internal.h"
#include "strata/metrics.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#define ST__POLL_MS      10
#define ST__SEGMENT_SIZE (64u << 20) /* rollover stalls the loop; 8 MiB rolled over too often */
/* Snapshots by log size, not by entry count (unless --raft-snapshot-entries says): each one
 * costs the loop a stall in C-Raft 0.15. Its snapshot puts a barrier that finalizes the open
 * segment, and closing that segment's writer calls io_destroy on the loop thread, which waits
 * for an RCU grace period: 20-50 ms on a busy 2-core machine (perf sched_switch: D state in
 * __x64_sys_io_destroy). At 8192 entries that came every ~3 s under load. */
#define ST__SNAP_MIN_ENTRIES 8192
#define ST__SNAP_MAX_ENTRIES (256u * 1024)
#define ST__SNAP_LOG_BYTES   ((uint64_t)ST__SEGMENT_SIZE) /* about one snapshot per segment */
#define ST__SNAP_SAMPLE      4096 /* entries between two threshold updates */

typedef struct {
    struct raft_apply req;
    st_repl_t *r;
    uint64_t batch_id;
    uint64_t sent_ns; /* uv_hrtime() when proposed: the lease it earns starts here */
} st_proposal_t;

typedef struct {
    struct raft_barrier req;
    st_repl_t *r;
    uint64_t term;
    uint64_t sent_ns;
} st_barrier_t;

/* ---- the read lease ----
 * A follower that took an entry of ours at time T >= sent (when we proposed it) votes for no
 * one else until its own election timer runs out, at T + election timeout at the earliest
 * (C-Raft draws it from [timeout, 2 * timeout), and a follower that hears from its leader
 * refuses to vote). So once a majority has taken an entry proposed at `sent`, no other leader
 * can exist before sent + timeout: until then this member's state is the group's newest, and a
 * read may be answered from it at once. The lease is 3/4 of that, on the monotonic clock, which
 * keeps running while a process is paused: a leader resumed from SIGSTOP finds its lease
 * expired and proves it still leads (st_store_fence) before it answers anything. */
static void st__lease_extend(st_repl_t *r, uint64_t sent_ns)
{
    uint64_t until = sent_ns + r->lease_ns;
    if (r->leading && until > r->lease_until_ns) r->lease_until_ns = until;
}

void st_repl_read_fence(st_repl_t *r, uint64_t *wait)
{
    int lease = st_repl_read_lease(r);
    if (!r->serving) return;
    if (lease == ST_REPL_LEASE_EXPIRED) {
        st_store_fence(r->store, wait);
    } else if (lease == ST_REPL_LEASE_RENEW) {
        uint64_t renew = 0; /* this read need not wait for it */
        st_store_fence(r->store, &renew);
    }
}

int st_repl_read_lease(const st_repl_t *r)
{
    uint64_t now = uv_hrtime();
    if (!r->serving || now >= r->lease_until_ns) return ST_REPL_LEASE_EXPIRED;
    return r->lease_until_ns - now < r->lease_ns / 2 ? ST_REPL_LEASE_RENEW : ST_REPL_LEASE_VALID;
}

/* ---- proposals ---- */

static void st__applied_cb(struct raft_apply *req, int status, void *result)
{
    st_proposal_t *p = req->data;
    (void)result;
    /* Success needs nothing: the batch became durable when its entry was applied. */
    if (status != 0)
        st_store_group_failed(p->r->store, p->batch_id, ST_ENOLEADER);
    else
        st__lease_extend(p->r, p->sent_ns);
    free(p);
}

static int st__propose(st_store_group_t *g, uint64_t batch_id, const char *payload, size_t len)
{
    st_repl_t *r = (st_repl_t *)((char *)g - offsetof(st_repl_t, group));
    if (!r->serving || r->closing) return ST_ENOLEADER;
    /* Padded to 8 bytes: C-Raft 0.15 pads entries on disk and, loading a segment after a
     * restart, misplaces the ones that follow an entry whose length is not a multiple of 8. The
     * entry's own header gives its real length. */
    size_t padded = (len + 7) & ~(size_t)7;
    struct raft_buffer buf = {raft_malloc(padded), padded};
    if (!buf.base) return ST_ENOMEM;
    memcpy(buf.base, payload, len);
    memset((char *)buf.base + len, 0, padded - len);
    st_proposal_t *p = st_calloc(1, sizeof *p);
    p->req.data = p;
    p->r = r;
    p->batch_id = batch_id;
    p->sent_ns = uv_hrtime();
    int rc = raft_apply(&r->raft, &p->req, &buf, 1, st__applied_cb);
    if (rc != 0) {
        raft_free(buf.base);
        free(p);
        return rc == RAFT_NOTLEADER || rc == RAFT_LEADERSHIPLOST ? ST_ENOLEADER : ST_EUNAVAIL;
    }
    return ST_OK;
}

/* ---- the state machine ---- */

/* Sets the snapshot threshold (and the entries kept after one) so that a snapshot comes about
 * every ST__SNAP_LOG_BYTES of log, from the mean size of the entries applied lately. */
static void st__snap_sample(st_repl_t *r, size_t len)
{
    r->snap_bytes += len;
    if (++r->snap_entries < ST__SNAP_SAMPLE) return;
    uint64_t mean = r->snap_bytes / r->snap_entries + 1;
    uint64_t n = ST__SNAP_LOG_BYTES / mean;
    n = n < ST__SNAP_MIN_ENTRIES   ? ST__SNAP_MIN_ENTRIES
        : n > ST__SNAP_MAX_ENTRIES ? ST__SNAP_MAX_ENTRIES
                                   : n;
    raft_set_snapshot_threshold(&r->raft, (unsigned)n);
    raft_set_snapshot_trailing(&r->raft, (unsigned)n);
    r->snap_bytes = r->snap_entries = 0;
}

static int st__fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf, void **result)
{
    st_repl_t *r = fsm->data;
    *result = NULL;
    /* C-Raft does not pass the index; while it applies an entry, last_applied is the one
     * before it. */
    uint64_t index = raft_last_applied(&r->raft) + 1;
    if (r->restoring) { /* the store is being replaced: these go on top of it afterwards */
        uint64_t len = buf->len;
        st_buf_append(&r->deferred, &index, 8);
        st_buf_append(&r->deferred, &len, 8);
        st_buf_append(&r->deferred, buf->base, buf->len);
        return 0;
    }
    int rc = st_store_group_apply(r->store, index, buf->base, buf->len);
    if (rc != ST_OK)
        st_fatal("repl: cannot apply entry %llu: %s", (unsigned long long)index, st_strerror(rc));
    if (r->snap_auto) st__snap_sample(r, buf->len);
    return 0;
}

static int st__fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
    st_repl_t *r = fsm->data;
    st_repl_marker_t *m = raft_malloc(sizeof *m);
    *bufs = raft_malloc(sizeof **bufs);
    if (!m || !*bufs) {
        raft_free(m);
        raft_free(*bufs);
        return RAFT_NOMEM;
    }
    m->magic = ST_REPL_MARKER_MAGIC;
    /* The last command entry given to the store: the marker's index may be a barrier after it,
     * which LMDB never records. */
    m->index = st_store_group_queued(r->store);
    memset(m->url, 0, sizeof m->url);
    snprintf(m->url, sizeof m->url, "%s", r->advertise);
    (*bufs)[0].base = m;
    (*bufs)[0].len = sizeof *m;
    *n = 1;
    return 0;
}

/* In the thread pool: LMDB must hold (on disk) everything the marker stands for before Raft
 * drops the entries behind it. */
static int st__fsm_snapshot_async(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
    st_repl_t *r = fsm->data;
    const st_repl_marker_t *m = (*bufs)[0].base;
    (void)n;
    int rc = st_store_group_sync(r->store, m->index);
    if (rc != ST_OK)
        st_error("repl: cannot force LMDB to disk for a snapshot: %s", st_strerror(rc));
    return rc == ST_OK ? 0 : RAFT_IOERR;
}

static int st__fsm_snapshot_finalize(struct raft_fsm *fsm, struct raft_buffer *bufs[], unsigned *n)
{
    (void)fsm;
    if (*bufs) {
        for (unsigned i = 0; i < *n; i++)
            raft_free((*bufs)[i].base);
        raft_free(*bufs);
    }
    *bufs = NULL;
    *n = 0;
    return 0;
}

static void st__fetch_start(st_repl_t *r);

static int st__fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
    st_repl_t *r = fsm->data;
    st_repl_marker_t m;
    if (buf->len != sizeof m) return RAFT_MALFORMED;
    memcpy(&m, buf->base, sizeof m);
    if (m.magic != ST_REPL_MARKER_MAGIC || memchr(m.url, 0, sizeof m.url) == NULL)
        return RAFT_MALFORMED;
    raft_free(buf->base);
    uint64_t have = st_store_group_queued(r->store);
    if (have >= m.index && !r->restoring) return 0; /* a restart: LMDB has it all */
    /* Behind the snapshot: fetch the store from a member, off the loop; meanwhile the entries
     * after the marker are kept aside (st__fsm_apply). */
    if (m.index > r->restore_index) r->restore_index = m.index;
    snprintf(r->restore_url, sizeof r->restore_url, "%s", m.url);
    if (!r->restoring)
        st_warn("repl: the store holds entries up to %llu, the group's snapshot %llu: fetching a "
                "copy of the store through %s",
                (unsigned long long)have, (unsigned long long)m.index, m.url);
    r->restoring = true;
    /* what Raft applied before this goes to LMDB before the copy does, in order */
    st_store_group_handoff(r->store);
    if (!r->fetching) st__fetch_start(r);
    return 0;
}

static void st__repl_fetch_work(uv_work_t *w)
{
    st_sched_worker(); /* a pool thread: its wake-ups never preempt the loop */
    st_repl_t *r = w->data;
    char path[1200];
    snprintf(path, sizeof path, "%s/../snapshot.mdb", r->dir);
    r->fetch_rc = st__snapshot_fetch(r->store, r->restore_url, r->secret, path, &r->fetched);
}

static void st__on_retry(uv_timer_t *t)
{
    st_repl_t *r = t->data;
    if (!r->closing && r->restoring && !r->fetching) st__fetch_start(r);
}

/* The store holds the copy: apply what Raft applied meanwhile, then go on as usual. */
static void st__repl_fetch_done(uv_work_t *w, int status)
{
    st_repl_t *r = w->data;
    r->fetching = false;
    if (r->closing) {
        st__closed_step(r);
        return;
    }
    if (status != 0 || r->fetch_rc != ST_OK || r->fetched < r->restore_index) {
        st_warn("repl: fetching the store failed (%s); retrying in 1 s",
                status || r->fetch_rc ? st_strerror(r->fetch_rc) : "the copy is older");
        uv_timer_start(&r->retry, st__on_retry, 1000, 0);
        return;
    }
    st_store_group_loaded(r->store, r->fetched);
    r->restoring = false;
    r->restore_index = 0;
    size_t n = 0;
    for (size_t off = 0; off + 16 <= r->deferred.len;) {
        uint64_t index, len;
        memcpy(&index, r->deferred.data + off, 8);
        memcpy(&len, r->deferred.data + off + 8, 8);
        int rc = st_store_group_apply(r->store, index, r->deferred.data + off + 16, len);
        if (rc != ST_OK)
            st_fatal("repl: cannot apply entry %llu: %s", (unsigned long long)index,
                     st_strerror(rc));
        off += 16 + len;
        n++;
    }
    st_buf_free(&r->deferred);
    st_info("repl: store installed from a copy (entries up to %llu) and %zu later entries",
            (unsigned long long)r->fetched, n);
}

static void st__fetch_start(st_repl_t *r)
{
    r->fetch.data = r;
    if (uv_queue_work(r->loop, &r->fetch, st__repl_fetch_work, st__repl_fetch_done) == 0)
        r->fetching = true;
    else
        uv_timer_start(&r->retry, st__on_retry, 1000, 0);
}

int st_repl_snapshot_offer(st_repl_t *r, int *port, char token[33])
{
    if (!r->serving) return ST_ENOLEADER;
    return st__snapshot_offer(r->store, r->listen_host, port, token);
}

/* ---- roles ---- */

static void st__barrier_cb(struct raft_barrier *req, int status)
{
    st_barrier_t *b = req->data;
    st_repl_t *r = b->r;
    if (r->leading && r->lead_term == b->term) {
        r->barrier_pending = false;
        if (status == 0) {
            r->caught_up = true;
            st__lease_extend(r, b->sent_ns);
        }
    }
    free(b);
}

static void st__step_down(st_repl_t *r)
{
    if (r->serving)
        st_warn("repl: no longer the leader (term %llu)", (unsigned long long)r->lead_term);
    r->leading = r->barrier_pending = r->caught_up = r->serving = false;
    r->lease_until_ns = 0;
    st_store_set_standby(r->store, true);
    st_store_group_abandon(r->store, ST_ENOLEADER); /* Raft may report them late, or never */
    if (r->on_follow) r->on_follow(r->on_follow_arg);
}

static void st__start_barrier(st_repl_t *r)
{
    st_barrier_t *b = st_calloc(1, sizeof *b);
    b->req.data = b;
    b->r = r;
    b->term = r->lead_term;
    b->sent_ns = uv_hrtime();
    if (raft_barrier(&r->raft, &b->req, st__barrier_cb) != 0) {
        free(b); /* retried at the next poll */
        return;
    }
    r->barrier_pending = true;
}

/* Lazy applies while nobody waits for them (st_store_apply_lazy). The serving leader: its own
 * writes are acknowledged and published at commit, its reads see the overlay. A follower with no
 * read index round (that waits until this member shows the index) and no stream open (a stream
 * shows a change once applied). Not a leader catching up (it waits for LMDB before it serves),
 * not a candidate. Checked every poll; a read index round turns it off at once. */
void st__lazy_update(st_repl_t *r)
{
    bool reading = r->ri_busy || r->ri_applying || r->ri_round < r->ri_next;
    bool follower = !r->leading && raft_state(&r->raft) == RAFT_FOLLOWER;
    bool lazy =
        !r->closing &&
        (r->serving || (follower && !reading && !(r->streams && r->streams(r->streams_arg))));
    if (lazy == r->apply_lazy) return;
    r->apply_lazy = lazy;
    st_store_apply_lazy(r->store, lazy);
}

static void st__on_poll(uv_timer_t *t)
{
    st_repl_t *r = t->data;
    if (r->closing) return;
    st__lazy_update(r);
    bool leader = raft_state(&r->raft) == RAFT_LEADER;
    uint64_t term = r->raft.current_term;
    if (!leader || (r->leading && term != r->lead_term)) {
        if (r->leading) st__step_down(r);
        if (!leader) return;
    }
    if (!r->leading) {
        r->leading = true;
        r->lead_term = term;
        st_info("repl: elected leader (term %llu); catching up before serving",
                (unsigned long long)term);
    }
    if (!r->caught_up && !r->barrier_pending) st__start_barrier(r);
    if (!r->caught_up || r->serving || r->restoring || !st_store_idle(r->store)) return;
    /* Everything committed is in LMDB: rebuild the in-memory views, then serve. */
    st_store_resync(r->store);
    if (r->on_lead) r->on_lead(r->on_lead_arg);
    st_store_set_standby(r->store, false);
    r->serving = true;
    st__record_self(r);
    st_info("repl: serving as the leader (term %llu, applied %llu)", (unsigned long long)term,
            (unsigned long long)raft_last_applied(&r->raft));
}

/* ---- metrics ---- */

static double st__g_serving(void *arg)
{
    return ((st_repl_t *)arg)->serving;
}

static double st__g_term(void *arg)
{
    return (double)((st_repl_t *)arg)->raft.current_term;
}

static double st__g_commit(void *arg)
{
    return (double)((st_repl_t *)arg)->raft.commit_index;
}

static double st__g_applied(void *arg)
{
    return (double)raft_last_applied(&((st_repl_t *)arg)->raft);
}

static void st__repl_metrics(st_repl_t *r)
{
    st_metrics_gauge_fn("strata_repl_leader", "1 while this member serves as the group's leader",
                        "", st__g_serving, r);
    st_metrics_gauge_fn("strata_repl_term", "Raft term", "", st__g_term, r);
    st_metrics_gauge_fn("strata_repl_commit_index", "Highest Raft entry known committed", "",
                        st__g_commit, r);
    st_metrics_gauge_fn("strata_repl_applied_index", "Highest Raft entry applied here", "",
                        st__g_applied, r);
}

/* ---- election timeouts ----
 * C-Raft 0.15 draws each election timeout from io->random(et, 2 et), and a follower refuses its
 * vote for as long as it still knows a leader, i.e. until its own timeout fires. After a leader
 * dies the first follower to time out is refused by the other, waits a whole new timeout as a
 * candidate, and a second draw can collide: failovers of 1.1-3.3 s were measured with et = 1000.
 * Here each member's timeout is et + rank x step instead (rank = members with a lower id), so
 * the followers time out one after the other, step apart (step > et / 10, ten of C-Raft's ticks):
 * the second one finds the first already a candidate, gets both votes, and leads within et + 2 step
 * + a tick of the leader's last heartbeat. No two members ever draw the same timeout, so split
 * votes cannot repeat. Every timeout stays >= et: a follower never campaigns sooner than before,
 * which is what the read lease (3/4 et) relies on. */
static int st__election_timeout(struct raft_io *io, int min, int max)
{
    const st_repl_t *r =
        (const st_repl_t *)(const void *)((const char *)io - offsetof(st_repl_t, io));
    int t = (int)r->election_ms;
    return t < min ? min : t > max ? max : t;
}

unsigned st_repl_election_timeout(const st_repl_member_t *m, size_t n, uint64_t self, unsigned et)
{
    unsigned rank = 0;
    for (size_t i = 0; i < n; i++)
        if (m[i].id < self) rank++;
    unsigned spread = n > 6 ? (unsigned)n - 1 : 5;
    unsigned step = et / spread ? et / spread : 1;
    return et + rank * step;
}

/* ---- lifecycle ---- */

static int st__raft_setup(st_repl_t *r, const st_repl_opts_t *o, const char *self_addr)
{
    int rc = st__transport_init(&r->transport, r->loop);
    if (rc) return rc;
    rc = raft_uv_init(&r->io, r->loop, r->dir, &r->transport.outer);
    if (rc) return rc;
    r->io.version = 2; /* raft_uv implements async_work; version 1 rejects async snapshots */
    raft_uv_set_segment_size(&r->io, ST__SEGMENT_SIZE);
    r->fsm = (struct raft_fsm){.version = 3,
                               .data = r,
                               .apply = st__fsm_apply,
                               .snapshot = st__fsm_snapshot,
                               .restore = st__fsm_restore,
                               .snapshot_finalize = st__fsm_snapshot_finalize,
                               .snapshot_async = st__fsm_snapshot_async};
    rc = raft_init(&r->raft, &r->io, &r->fsm, r->self, self_addr);
    if (rc) return rc;
    r->raft.data = r;
    unsigned et = o->election_timeout ? o->election_timeout : 1000;
    st__read_index_init(r, et);
    r->lease_ns = (uint64_t)et * 1000000 / 4 * 3;
    raft_set_election_timeout(&r->raft, et);
    r->election_ms = st_repl_election_timeout(r->members, r->nmembers, r->self, et);
    r->io.random = st__election_timeout;
    /* C-Raft 0.15 tells followers the commit index only with its next message: with nothing
     * more to send, an empty append one to two heartbeat intervals later. A follower applies (and
     * its streams show) a change only then: at et / 10 a follower's notification came 51 ms after
     * the post (p50, 20 posts/s); at et / 100 (10 ms) 15 ms, for ~1 % of a core in heartbeats
     * while idle (RESULTS, issue 23). The heartbeat is also C-Raft's tick. */
    /* at least 5 ms (et / 10 below 50 ms): a shorter tick costs idle CPU for a few ms of lag */
    unsigned hb = et / 100, floor_ms = et / 10 < 5 ? et / 10 : 5;
    raft_set_heartbeat_timeout(&r->raft, hb > floor_ms ? hb : floor_ms ? floor_ms : 1);
    raft_set_pre_vote(&r->raft, true); /* a member coming back does not depose a healthy leader */
    r->snap_auto = o->snapshot_threshold == 0;
    unsigned snap = r->snap_auto ? ST__SNAP_MIN_ENTRIES : o->snapshot_threshold;
    raft_set_snapshot_threshold(&r->raft, snap);
    raft_set_snapshot_trailing(&r->raft, snap);
    struct raft_configuration conf;
    raft_configuration_init(&conf);
    for (size_t i = 0; i < r->nmembers && !rc; i++)
        rc = raft_configuration_add(&conf, r->members[i].id, r->members[i].raft, RAFT_VOTER);
    if (!rc) rc = raft_bootstrap(&r->raft, &conf);
    raft_configuration_close(&conf);
    if (rc == RAFT_CANTBOOTSTRAP) rc = 0; /* not a first start: the log has the configuration */
    if (!rc) rc = raft_start(&r->raft);
    return rc;
}

int st_repl_open(st_repl_t **out, uv_loop_t *loop, st_store_t *store, const st_repl_opts_t *o)
{
    /* announce.c's records of the members (never restored: store/tap.c) */
    int rc = st_store_claim(store, "\0repl:", 6, "repl");
    if (rc != ST_OK) return rc;
    st_repl_t *r = st_calloc(1, sizeof *r);
    const char *why;
    if (st_repl_parse_members(o->cluster, r->members, ST_REPL_MAX_MEMBERS, &r->nmembers, &why) !=
        ST_OK) {
        st_error("repl: bad --cluster: %s", why);
        free(r);
        return ST_EINVAL;
    }
    const char *self_addr = NULL;
    for (size_t i = 0; i < r->nmembers; i++)
        if (r->members[i].id == o->self) self_addr = r->members[i].raft;
    if (!self_addr) {
        st_error("repl: --cluster-self %llu is not in --cluster", (unsigned long long)o->self);
        free(r);
        return ST_EINVAL;
    }
    r->loop = loop;
    r->store = store;
    r->apply_lazy = true; /* the store's default */
    r->self = o->self;
    snprintf(r->advertise, sizeof r->advertise, "%s", o->advertise);
    snprintf(r->listen_host, sizeof r->listen_host, "%s", o->listen_host ? o->listen_host : "");
    snprintf(r->secret, sizeof r->secret, "%s", o->cluster_secret ? o->cluster_secret : "");
    snprintf(r->dir, sizeof r->dir, "%s/raft", o->data_dir);
    if (mkdir(r->dir, 0755) != 0 && errno != EEXIST) {
        st_error("repl: cannot create %s: %s", r->dir, strerror(errno));
        free(r);
        return ST_EIO;
    }
    r->group.propose = st__propose;
    st_store_group_join(store, &r->group);
    rc = st__raft_setup(r, o, self_addr);
    if (rc) {
        /* C-Raft's own cleanup needs the loop; a failed start ends the process anyway */
        st_error("repl: cannot start Raft in %s: %s (%s)", r->dir, raft_strerror(rc),
                 raft_errmsg(&r->raft));
        return ST_EIO;
    }
    uv_timer_init(loop, &r->poll);
    r->poll.data = r;
    uv_timer_init(loop, &r->retry);
    r->retry.data = r;
    uv_unref((uv_handle_t *)&r->retry);
    uv_timer_start(&r->poll, st__on_poll, ST__POLL_MS, ST__POLL_MS);
    uv_unref((uv_handle_t *)&r->poll);
    st__announce_start(r);
    st__repl_metrics(r);
    st_info("repl: member %llu of %zu (raft %s, http %s)", (unsigned long long)r->self, r->nmembers,
            self_addr, r->advertise);
    *out = r;
    return ST_OK;
}

void st_repl_on_lead(st_repl_t *r, void (*fn)(void *arg), void *arg)
{
    r->on_lead = fn;
    r->on_lead_arg = arg;
}

void st_repl_on_follow(st_repl_t *r, void (*fn)(void *arg), void *arg)
{
    r->on_follow = fn;
    r->on_follow_arg = arg;
}

void st_repl_on_streams(st_repl_t *r, bool (*fn)(void *arg), void *arg)
{
    r->streams = fn;
    r->streams_arg = arg;
}

void st__closed_step(st_repl_t *r)
{
    if (--r->closing > 1) return;
    st__transport_free(&r->transport);
    st_buf_free(&r->deferred);
    void (*cb)(void *) = r->closed_cb;
    void *arg = r->closed_arg;
    free(r);
    if (cb) cb(arg);
}

static void st__poll_closed(uv_handle_t *h)
{
    st__closed_step(h->data);
}

static void st__raft_closed(struct raft *raft)
{
    st_repl_t *r = raft->data;
    raft_uv_close(&r->io);
    st__closed_step(r);
}

void st_repl_close(st_repl_t *r, void (*done)(void *arg), void *arg)
{
    r->closed_cb = done;
    r->closed_arg = arg;
    /* the four timers and Raft (and a fetch, an announcement or a read index round in flight);
     * the last step frees */
    r->closing = 6;
    st_store_apply_lazy(r->store, false);
    if (r->fetching) r->closing++;
    if (r->announcing) r->closing++;
    if (r->ri_busy) r->closing++;
    st_store_set_standby(r->store, true);
    uv_close((uv_handle_t *)&r->poll, st__poll_closed);
    uv_close((uv_handle_t *)&r->retry, st__poll_closed);
    uv_close((uv_handle_t *)&r->announce, st__poll_closed);
    uv_close((uv_handle_t *)&r->ri_timer, st__poll_closed);
    r->raft.data = r;
    raft_close(&r->raft, st__raft_closed);
}

/* ---- what the HTTP layer asks ---- */

bool st_repl_serving(const st_repl_t *r)
{
    return r->serving;
}

bool st_repl_has_leader(st_repl_t *r)
{
    raft_id id;
    const char *addr;
    raft_leader(&r->raft, &id, &addr);
    return id != 0;
}

int st_repl_member_url(st_repl_t *r, uint64_t id, char *buf, size_t cap)
{
    if (id == r->self) return ST_ENOTFOUND;
    return st__member_url(r, id, buf, cap) ? ST_OK : ST_ENOTFOUND;
}

int st_repl_leader_url(st_repl_t *r, char *buf, size_t cap)
{
    raft_id id;
    const char *addr;
    raft_leader(&r->raft, &id, &addr);
    if (id == 0 || (id == r->self && !r->serving)) return ST_ENOLEADER;
    return st__member_url(r, id, buf, cap) ? ST_OK : ST_ENOLEADER;
}

static const char *st__role_name(int state)
{
    switch (state) {
    case RAFT_LEADER:
        return "leader";
    case RAFT_CANDIDATE:
        return "candidate";
    case RAFT_FOLLOWER:
        return "follower";
    default:
        return "unavailable";
    }
}

void st_repl_status_json(st_repl_t *r, st_buf_t *out)
{
    raft_id leader;
    const char *addr;
    raft_leader(&r->raft, &leader, &addr);
    char url[512];
    st_buf_printf(out, "{\"self\":%llu,\"leader\":", (unsigned long long)r->self);
    if (leader)
        st_buf_printf(out, "%llu", (unsigned long long)leader);
    else
        st_buf_puts(out, "null");
    st_buf_printf(out, ",\"term\":%llu,\"commit_index\":%llu,\"applied_index\":%llu,\"members\":[",
                  (unsigned long long)r->raft.current_term,
                  (unsigned long long)r->raft.commit_index,
                  (unsigned long long)raft_last_applied(&r->raft));
    for (size_t i = 0; i < r->nmembers; i++) {
        const st_repl_member_t *m = &r->members[i];
        st_buf_printf(out, "%s{\"id\":%llu,\"raft\":", i ? "," : "", (unsigned long long)m->id);
        st_buf_append_json_str(out, m->raft, strlen(m->raft));
        st_buf_puts(out, ",\"http\":");
        if (st__member_url(r, m->id, url, sizeof url))
            st_buf_append_json_str(out, url, strlen(url));
        else
            st_buf_puts(out, "null");
        const char *role = m->id == r->self  ? st__role_name(raft_state(&r->raft))
                           : m->id == leader ? "leader"
                                             : "follower";
        st_buf_printf(out, ",\"role\":\"%s\"}", role);
    }
    st_buf_puts(out, "]}");
}
