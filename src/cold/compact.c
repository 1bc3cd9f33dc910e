/* SPDX-License-Identifier: MIT */
/*
 * The tier's compaction engine (SPEC §5; see strata/tier.h): an owner's small objects are merged
 * into larger ones, so that object count, bytes and read time stay flat as flushes pile up. The
 * kind merges the rows (st_tier_merge_t); everything else is here.
 *
 * Which objects: tiered. Objects fall in size classes (rows, powers of 4); a run of at least
 * four neighbouring objects of one class is merged into one of the next class, so a row is
 * rewritten about once per class, O(log n) times. Only when an owner still holds more than
 * --compact-objects small objects is the neighbouring pair with the fewest rows merged, which
 * keeps the count bounded. A major compaction merges the first run of neighbours (of any size)
 * that one merge may take, then the next, until no two neighbours fit in one merge. No merge
 * writes more than the cap (planned on the objects' bytes: a merge's output is no larger than its
 * inputs), more than ST__MERGE_ROWS rows (the worker holds every row of a merge in memory) or
 * replaces more than ST__MERGE_OBJECTS objects (the swap batch is on the loop). Neighbours only:
 * manifest order is id order (reads stop at the first object past their page), so a merged object
 * takes the place, and the manifest number, of the first object it replaces.
 *
 * How, with the flush's mechanisms: on the loop, the new object is recorded ('P' with a fresh
 * number) in a batch; once that batch is durable, a worker (SCHED_IDLE) has the kind merge the
 * old objects into the new one. Back on the loop, ONE batch swaps them: the new object in the
 * manifest, the old ones out with their deletion recorded ('D'), 'P' dropped, the owner's cold
 * summary adjusted, and the kind's side (rows left out by retention). The reaper deletes the old
 * objects once that batch is durable. A crash before the batch leaves a 'P' without its 'F': an
 * orphan, deleted at start-up; a crash after it leaves 'D' records, finished at start-up. So reads
 * see the old objects or the new one, never both, never neither.
 *
 * One compaction at a time, beside the flushes, paced like them. A major compaction asked for is
 * held in memory: each merge done stands after a crash, the rest is asked for again
 * (strata_compactions_pending says when it is done).
 *
 * A compaction that failed (the object store down, a read or a write refused) is asked for again
 * later, with what was asked of it: 1 s after its first failure, each further failure of the
 * owner doubling the wait up to 5 min; a success starts the owner over (the wait travels with its
 * queue entry, so none is kept for an owner that is not failing). Else an owner whose manifest
 * does not change (no new flush: a user who went quiet) kept its small objects for good. The
 * owners waiting are held in memory (at most ST__QUEUE_MAX; a restart forgets them, as it does
 * an asked-for compaction) and counted (strata_compactions_retrying,
 * strata_compaction_retries_total).
 */
#include "strata/coldshare.h"
#include "strata/looplag.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define ST__SMALL_ROWS    1000000        /* objects with fewer rows are small */
#define ST__SMALL_BYTES   (128ull << 20) /* ... and fewer bytes */
#define ST__MERGE_ROWS    2000000        /* no merge writes more rows */
#define ST__MERGE_OBJECTS 256            /* nor replaces more objects */
#define ST__RUN_MIN       4              /* objects of one class merged together */

/* Loop time a pump spends walking the store for the census or a compaction of every owner, and
 * how many owners a walk leaves queued at most: at a million owners, walked in one callback, each
 * was a loop stall of a second, and every owner's name was held at once. */
#define ST__WALK_BUDGET_NS 500000
#define ST__WALK_PAGE      256
#define ST__QUEUE_MAX      4096

/* A failed compaction is asked for again after a wait: the first, and the most (doubling) */
#define ST__RETRY_FIRST_MS 1000
#define ST__RETRY_MAX_MS   (5 * 60 * 1000)
/* The kind's note of the changes to fold in is prepared on the loop a slice a turn (fold_more),
 * each slice what the turn has left of its shared budget (looplag.h) within these bounds: in one
 * turn, a fold over a million tombstones was unbounded (3.5-5.5 ms turns beside an erasure's
 * slices at 999,900 messages, Session 22). The next slice is ST__MORE_MS later. */
#define ST__MORE_MIN_NS 100000
#define ST__MORE_MAX_NS 1000000
#define ST__MORE_MS     1

/* A user queued for compaction (compacting every user queues them all), its key at its length. */
typedef struct {
    st_map_node_t node;
    size_t olen;
    int flags;         /* ST_TIER_COMPACT_*; asked for while merging: << 4 */
    uint64_t retry_ms; /* a retry: the wait before it (0: not one); its next failure doubles it */
    uint64_t due_ms;   /* waiting in the retry map: when it is queued again */
    char owner[];      /* olen bytes */
} st_cowner_t;

typedef struct {
    uv_work_t req;
    st_tier_compact_t *c;
    st_cowner_t *o;
    uint64_t pseq, fseq, wait;
    int64_t cutoff;
    st_tier_manifest_t old; /* the objects replaced */
    bool queued;            /* on a worker */
    bool preparing;         /* the kind's note still being prepared (fold_more): no worker yet */
    uint64_t t0;
    /* worker results */
    int rc;
    st_buf_t key;
    st_tier_file_t out;
    st_buf_t stats; /* out's column stats (st_tier_put_parquet's, colstats.c) */
    void *dropped;
    int64_t ndropped;
} st_cjob_t;

struct st_tier_compact {
    st_tier_t *tier;
    uv_loop_t *loop;
    st_store_t *store;
    st_objstore_t *obj;
    const st_tier_merge_t *merge;
    st_tier_compact_opts_t o;
    st_map_t queue;
    st_map_t retry; /* owners whose compaction failed, until their due_ms (st_cowner_t, owned) */
    st_cjob_t *job;
    uv_timer_t more; /* the next slice of the job's note (preparing) */
    bool more_closed;
    bool stopping;
    uint64_t resume_ms; /* pacing: no compaction before this */
    void (*closed)(void *arg);
    void *closed_arg;
    st_metric_t *m_ok, *m_err, *m_rows, *m_bytes, *m_dropped;
    st_metric_t *m_pending; /* owners queued or merging: 0 once an asked for compaction is done */
    st_metric_t *m_retries, *m_retrying; /* compactions asked for again; owners waiting to be */
    st_metric_t *m_s3[4];
    st_metric_t *m_objects[2], *m_obytes[2]; /* small, large */
    uint64_t census_ms;                      /* next count of the manifests */
    st_store_walk_t census;                  /* that count, a page at a time */
    double counted[4];                       /* its sums so far: objects, bytes; small, large */
    bool counting;
    st_store_walk_t all; /* POST /v1/admin/compact of every owner: the 'W' records still to queue */
    bool sweeping;
    bool sweep_again; /* asked for again while walking: one more walk after it */
    size_t swept;     /* owners that walk queued */
};

/* ---- planning (pure) ---- */

static int st__class(int64_t rows)
{
    int c = 0;
    while (rows >= 4) {
        rows /= 4;
        c++;
    }
    return c;
}

static bool st__small(const st_tier_file_t *f)
{
    return f->rows < ST__SMALL_ROWS && f->size < ST__SMALL_BYTES;
}

/* Where a run of neighbours from f[i] that one merge may take ends: within the merge bounds;
 * tiered, only small objects of f[i]'s class. */
static size_t st__run_end(const st_tier_file_t *f, size_t n, size_t i, uint64_t max_bytes,
                          bool tiered)
{
    size_t j = i;
    int64_t rows = 0;
    uint64_t bytes = 0;
    while (j < n && j - i < ST__MERGE_OBJECTS && rows + f[j].rows <= ST__MERGE_ROWS &&
           bytes + f[j].size <= max_bytes &&
           (!tiered || (st__small(&f[j]) && st__class(f[j].rows) == st__class(f[i].rows)))) {
        rows += f[j].rows;
        bytes += f[j].size;
        j++;
    }
    return j;
}

/* A major compaction: the first run of two or more neighbours that fits one merge, as long as
 * it takes (planned again after each merge, it ends when no two neighbours fit together). */
static bool st__plan_major(const st_tier_file_t *f, size_t n, uint64_t max_bytes, size_t *from,
                           size_t *to)
{
    for (size_t i = 0; i + 1 < n; i++) {
        size_t j = st__run_end(f, n, i, max_bytes, false);
        if (j - i >= 2) {
            *from = i;
            *to = j;
            return true;
        }
    }
    return false;
}

bool st_tier_compact_plan(const st_tier_file_t *f, size_t n, size_t limit, uint64_t max_bytes,
                          int flags, size_t *from, size_t *to)
{
    if (flags & ST_TIER_COMPACT_EXPIRE && n) {
        *from = 0;
        *to = 1;
        return true;
    }
    if (flags & ST_TIER_COMPACT_MAJOR) return st__plan_major(f, n, max_bytes, from, to);
    size_t nsmall = 0;
    for (size_t i = 0; i < n; i++)
        nsmall += st__small(&f[i]);
    if (nsmall <= limit) return false;
    /* a run of neighbouring small objects of one class (tiered) */
    for (size_t i = 0; i < n;) {
        size_t j = st__run_end(f, n, i, max_bytes, true);
        if (j - i >= ST__RUN_MIN) {
            *from = i;
            *to = j;
            return true;
        }
        i = j > i ? j : i + 1;
    }
    /* still too many: the neighbouring pair with the fewest rows */
    int64_t best = INT64_MAX;
    for (size_t i = 0; i + 1 < n; i++)
        if (st__small(&f[i]) && st__small(&f[i + 1]) && f[i].rows + f[i + 1].rows < best &&
            f[i].rows + f[i + 1].rows <= ST__MERGE_ROWS && f[i].size + f[i + 1].size <= max_bytes) {
            best = f[i].rows + f[i + 1].rows;
            *from = i;
            *to = i + 2;
        }
    return best != INT64_MAX;
}

/* ---- worker side ---- */

static void st__compact_work(uv_work_t *req)
{
    st_cjob_t *j = req->data;
    const st_tier_merge_t *m = j->c->merge;
    st_tier_background(true); /* SCHED_IDLE while merging (see flush.c) */
    st_tier_stats_drop();
    j->rc = m->merge(m->arg, j->o->owner, j->o->olen, j->c->obj, j->old.v, j->old.n, j->cutoff,
                     j->key.data, &j->out, &j->dropped, &j->ndropped);
    st_tier_stats_take(&j->stats); /* the merged object's, put on this thread */
    if (j->rc != ST_OK) st_buf_reset(&j->stats);
    st_tier_background(false);
}

/* ---- loop side ---- */

static void st__on_more(uv_timer_t *t);

static void st__job_free(st_cjob_t *j)
{
    const st_tier_merge_t *m = j->c->merge;
    if (j->dropped) m->release(m->arg, j->dropped);
    st_tier_manifest_free(&j->old);
    st_buf_free(&j->key);
    st_buf_free(&j->stats);
    free(j);
}

/* [from, to) of the owner's manifest m, taken into a new job. */
static st_cjob_t *st__job(st_tier_compact_t *c, st_cowner_t *o, st_tier_manifest_t *m, size_t from,
                          size_t to)
{
    st_cjob_t *j = st_calloc(1, sizeof *j);
    j->c = c;
    j->o = o;
    j->t0 = uv_hrtime();
    j->req.data = j;
    for (size_t i = from; i < to; i++) {
        st_vec_push(&j->old, m->v[i]);
        m->v[i].key = NULL; /* moved to the job, with its stats */
        m->v[i].stats = NULL;
    }
    j->fseq = j->old.v[0].seq;
    if (c->o.retention_us) j->cutoff = st_now_us() - (int64_t)c->o.retention_us;
    return j;
}

/* Which of the manifest m to merge next (the plan works on the files alone). */
static bool st__plan(st_tier_compact_t *c, const st_cowner_t *o, const st_tier_manifest_t *m,
                     int flags, size_t *from, size_t *to)
{
    ST_VEC(st_tier_file_t) f = {0};
    for (size_t i = 0; i < m->n; i++)
        st_vec_push(&f, m->v[i].file);
    bool due = false;
    if ((flags & ST_TIER_COMPACT_FOLD) && c->o.fold_pick && m->n &&
        c->o.fold_pick(c->o.hook_arg, o->owner, o->olen, m->v, m->n, from)) {
        *to = *from + 1; /* the object holding changes, rewritten alone with them folded in */
        due = true;
    }
    if (!due)
        due = st_tier_compact_plan(f.v, f.n, c->o.limit, c->o.max_bytes,
                                   flags & ~ST_TIER_COMPACT_FOLD, from, to);
    st_vec_free(&f);
    return due;
}

/* Plans the owner's next merge and records its object ('P'); NULL when there is nothing to do. */
static st_cjob_t *st__begin(st_tier_compact_t *c, st_cowner_t *o)
{
    uint64_t wait = 0;
    st_tier_manifest_t m;
    size_t from, to;
    st_tier_stat_t st;
    int rc = st_tier_manifest(c->store, o->owner, o->olen, false, &m, &wait);
    /* the stats records an older binary left (colstats.c) go with the intent's batch: one scan
     * of the owner's a compaction, none a read */
    if (rc != ST_OK || !st__plan(c, o, &m, o->flags, &from, &to) ||
        st_tier_stat(c->store, o->owner, o->olen, &st, &wait) != ST_OK ||
        st__tier_stats_sweep(c->store, o->owner, o->olen, &m, &wait) != ST_OK) {
        st_tier_manifest_free(&m);
        return NULL;
    }
    st_cjob_t *j = st__job(c, o, &m, from, to);
    st_tier_manifest_free(&m);
    if (c->o.prepare) /* the kind's changes to fold in: merge finds them in dropped */
        j->dropped = c->o.prepare(c->o.hook_arg, o->owner, o->olen, j->old.v, j->old.n, j->cutoff);
    j->preparing = j->dropped && c->o.more; /* in slices, from the pump (st__more) */
    j->pseq = st.next_seq ? st.next_seq : 1;
    uint64_t writer = 0;
    if (st_tier_writer(c->store, &writer, &wait) != ST_OK ||
        (c->merge->name(c->merge->arg, o->owner, o->olen, j->old.v[0].key, j->fseq, j->pseq, writer,
                        &j->key),
         st__tier_intend(c->store, o->owner, o->olen, j->pseq, &j->key, &st, &wait) != ST_OK)) {
        j->o = NULL;
        st__job_free(j);
        return NULL;
    }
    j->wait = wait;
    return j;
}

/* The kind's side of the swap: rows left out by retention leave its counts; a merge that changed
 * rows is told to the tier's observer (the new object's key). */
static int st__kind_side(void *arg, uint64_t *wait)
{
    st_cjob_t *j = arg;
    const st_tier_merge_t *m = j->c->merge;
    const st_tier_t *t = j->c->tier;
    int rc = m->commit(m->arg, j->o->owner, j->o->olen, j->dropped, j->ndropped, wait);
    if (rc == ST_OK && j->out.rows && t->rows_changed && m->changed &&
        m->changed(m->arg, j->dropped))
        t->rows_changed(t->rows_changed_arg, j->key.data, wait);
    return rc;
}

/* The swap (intent.c): one batch, everything checked before anything is written. */
static int st__compact_commit(st_tier_compact_t *c, st_cjob_t *j, uint64_t *wait)
{
    st_tier_swap_t sw = {.pseq = j->pseq,
                         .fseq = j->fseq,
                         .old = j->old.v,
                         .nold = j->old.n,
                         .file = &j->out,
                         .key = j->key.data,
                         .stats = (const uint8_t *)j->stats.data,
                         .stats_len = j->stats.len,
                         .kind = st__kind_side,
                         .arg = j};
    int rc = st__tier_swap(c->store, j->o->owner, j->o->olen, &sw, wait);
    if (rc == ST_OK) st_metric_add(c->m_dropped, (double)j->ndropped);
    if (rc == ST_OK) st_metric_add(c->tier->m_retained, (double)j->ndropped);
    return rc;
}

/* Owners queued or merging, and one more while a compaction of every owner is still walking
 * them: 0 only once it is done. */
static void st__count_pending(st_tier_compact_t *c)
{
    st_metric_set(c->m_pending,
                  (double)(c->queue.count + (c->job ? 1 : 0) + (c->sweeping ? 1 : 0)));
}

/* Queues the owner (or adds flags to its entry); retry_ms: the wait of a retry, kept with it. */
static void st__add_retry(st_tier_compact_t *c, const char *o, size_t ol, int flags,
                          uint64_t retry_ms)
{
    st_cowner_t *q = (st_cowner_t *)st_map_get(&c->queue, o, ol);
    if (q) {
        q->flags |= flags;
        if (retry_ms > q->retry_ms) q->retry_ms = retry_ms;
        return;
    }
    if (c->job && c->job->o->olen == ol && memcmp(c->job->o->owner, o, ol) == 0) {
        c->job->o->flags |= flags << 4; /* noted for when it comes back */
        return;
    }
    st_cowner_t *r = (st_cowner_t *)st_map_get(&c->retry, o, ol);
    if (r) { /* waiting for a retry: it goes now (once), its wait kept for a further failure */
        st_map_remove(&c->retry, &r->node);
        flags |= r->flags;
        if (r->retry_ms > retry_ms) retry_ms = r->retry_ms;
        free(r);
        st_metric_set(c->m_retrying, (double)c->retry.count);
    }
    q = st_calloc(1, sizeof *q + ol);
    memcpy(q->owner, o, ol);
    q->olen = ol;
    q->flags = flags;
    q->retry_ms = retry_ms;
    q->node.key = q->owner;
    q->node.klen = ol;
    st_map_insert(&c->queue, &q->node);
    st__count_pending(c);
}

static void st__add(st_tier_compact_t *c, const char *o, size_t ol, int flags)
{
    st__add_retry(c, o, ol, flags, 0);
}

/* The failed compaction of o (rc) asked for again later: o (owned) into the retry map, its wait
 * doubled from the last (or the first); an owner already waiting keeps the later of the two. */
static void st__compact_retry_later(st_tier_compact_t *c, st_cowner_t *o, int rc)
{
    uint64_t wait = o->retry_ms ? o->retry_ms * 2 : ST__RETRY_FIRST_MS;
    if (wait > ST__RETRY_MAX_MS) wait = ST__RETRY_MAX_MS;
    st_warn("cold: compaction of %.*s failed (%s); asked for again in %llu ms", (int)o->olen,
            o->owner, st_strerror(rc), (unsigned long long)wait);
    o->flags = (o->flags | (o->flags >> 4)) & 0xf; /* all it was asked for, meanwhile too */
    o->retry_ms = wait;
    o->due_ms = uv_now(c->loop) + wait;
    st_cowner_t *r = (st_cowner_t *)st_map_get(&c->retry, o->owner, o->olen);
    if (r) {
        r->flags |= o->flags;
        if (o->retry_ms > r->retry_ms) {
            r->retry_ms = o->retry_ms;
            r->due_ms = o->due_ms;
        }
        free(o);
    } else if (c->retry.count >= ST__QUEUE_MAX) { /* bounded: this one waits for its next flush */
        st_warn("cold: compaction of %.*s not retried (%zu owners wait already)", (int)o->olen,
                o->owner, (size_t)c->retry.count);
        free(o);
        return;
    } else {
        o->node.key = o->owner;
        o->node.klen = o->olen;
        st_map_insert(&c->retry, &o->node);
    }
    st_metric_set(c->m_retrying, (double)c->retry.count);
}

/* The retries that are due, queued (with their waits). */
static void st__compact_retry_due(st_tier_compact_t *c)
{
    if (!c->retry.count) return;
    uint64_t now = uv_now(c->loop);
    size_t it;
    ST_VEC(st_cowner_t *) due = {0};
    for (st_map_node_t *n = st_map_first(&c->retry, &it); n; n = st_map_next(&c->retry, &it, n))
        if (((st_cowner_t *)n)->due_ms <= now) st_vec_push(&due, (st_cowner_t *)n);
    for (size_t i = 0; i < due.n; i++) {
        st_cowner_t *r = due.v[i];
        st_map_remove(&c->retry, &r->node);
        st__add_retry(c, r->owner, r->olen, r->flags, r->retry_ms);
        st_metric_add(c->m_retries, 1);
        free(r);
    }
    st_vec_free(&due);
    st_metric_set(c->m_retrying, (double)c->retry.count);
}

/* What an owner whose merge is back is queued again for: a major compaction goes on, merge after
 * merge, until its plan finds nothing; what was asked for meanwhile is added. */
static int st__again(const st_cowner_t *o)
{
    return (o->flags & (ST_TIER_COMPACT_MAJOR | ST_TIER_COMPACT_FOLD)) |
           ((o->flags >> 4) & ~ST_TIER_COMPACT_EXPIRE);
}

static void st__maybe_free(st_tier_compact_t *c)
{
    if (!c->stopping || c->job || !c->more_closed) return;
    size_t it;
    st_map_node_t *n;
    while ((n = st_map_first(&c->queue, &it)) != NULL) {
        st_map_remove(&c->queue, n);
        free(n);
    }
    st_map_free(&c->queue);
    while ((n = st_map_first(&c->retry, &it)) != NULL) {
        st_map_remove(&c->retry, n);
        free(n);
    }
    st_map_free(&c->retry);
    void (*closed)(void *) = c->closed;
    void *arg = c->closed_arg;
    free(c);
    if (closed) closed(arg);
}

/* A merge or its swap failed: what the worker may have written is an orphan now (its 'P' says
 * so; if that record never became durable, the object is doomed here). Returns whether o went
 * to the retry map (then it is owned there). */
static bool st__failed(st_tier_compact_t *c, st_cjob_t *j, int rc, uint64_t *wait)
{
    st_cowner_t *o = j->o;
    st_metric_add(c->m_err, 1);
    if (rc == ST_EEXIST) /* nothing written: another writer's object is there (SPEC §5) */
        st__tier_collided(c->store, o->owner, o->olen, j->pseq, wait);
    else
        st__tier_abandon(c->store, o->owner, o->olen, j->pseq, j->key.data, wait);
    st__tier_orphans(c->tier, o->owner, o->olen, wait);
    /* the manifest changed meanwhile (retention): planned again on the new one, so an asked for
     * major compaction is not given up */
    if (rc == ST_ECONFLICT) {
        st_warn("cold: compaction of %.*s failed (%s)", (int)o->olen, o->owner, st_strerror(rc));
        st__add(c, o->owner, o->olen, st__again(o));
        return false;
    }
    st__compact_retry_later(c, o, rc);
    return true;
}

static void st__done(uv_work_t *req, int status)
{
    st_cjob_t *j = req->data;
    st_tier_compact_t *c = j->c;
    st_cowner_t *o = j->o;
    c->job = NULL;
    if (c->stopping || status == UV_ECANCELED) { /* its 'P' record waits for start-up */
        free(o);
        st__job_free(j);
        st__maybe_free(c);
        return;
    }
    uint64_t wait = 0;
    int rc = j->rc;
    if (rc == ST_OK) rc = st__compact_commit(c, j, &wait);
    if (rc != ST_OK) {
        if (st__failed(c, j, rc, &wait)) o = NULL; /* the retry map's now */
    } else {
        st_metric_add(c->m_ok, 1);
        st_metric_add(c->m_rows, (double)(j->out.rows + j->ndropped));
        st_metric_add(c->m_bytes, (double)j->out.size);
        st_info("cold: compacted %zu objects of %.*s into %s (%lld rows, %llu bytes)", j->old.n,
                (int)o->olen, o->owner, j->out.rows ? j->key.data : "nothing",
                (long long)j->out.rows, (unsigned long long)j->out.size);
        st__add(c, o->owner, o->olen, st__again(o)); /* more may be due */
    }
    free(o);
    uint64_t took_ms = (uv_hrtime() - j->t0) / 1000000;
    c->resume_ms = uv_now(c->loop) + 2 * took_ms;
    st__job_free(j);
    st__count_pending(c);
}

static void st__queue(st_tier_compact_t *c, st_cjob_t *j)
{
    j->queued = true;
    if (uv_queue_work(c->loop, &j->req, st__compact_work, st__done) != 0) {
        j->rc = ST_EIO;
        st__done(&j->req, 0);
    }
}

void st__tier_compact_durable(st_tier_compact_t *c, uint64_t id)
{
    st_cjob_t *j = c ? c->job : NULL;
    if (j && !j->queued && !j->preparing && j->wait <= id) st__queue(c, j);
}

/* A slice of the job's note (fold_more), within what the turn has left; once it is whole, the
 * merge goes to a worker as soon as its 'P' record is durable. */
static void st__more(st_tier_compact_t *c)
{
    st_cjob_t *j = c->job;
    if (!j || !j->preparing) return;
    uint64_t until = uv_hrtime() + st_looplag_turn_left(ST__MORE_MIN_NS, ST__MORE_MAX_NS);
    if (!c->o.more(c->o.hook_arg, j->dropped, until)) {
        uv_timer_start(&c->more, st__on_more, ST__MORE_MS, 0);
        return;
    }
    j->preparing = false;
    st__tier_compact_durable(c, st_store_durable_id(c->store));
}

static void st__on_more(uv_timer_t *t)
{
    st_tier_compact_t *c = t->data;
    if (!c->stopping) st__more(c);
}

static int st__census(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    double *t = arg; /* objects, bytes: small, then large */
    st_tier_file_t f;
    (void)key, (void)klen;
    if (vlen <= sizeof f) return 0;
    memcpy(&f, val, sizeof f);
    int large = !st__small(&f);
    t[large * 2] += 1;
    t[large * 2 + 1] += (double)f.size;
    return 0;
}

/* The object store's requests (counted on the workers), and the objects and bytes of every
 * manifest, small (compacted further) and large: a walk of the file records in pages within the
 * pump's budget, published once it reached the end (an unreadable page: not published), the
 * next walk 10 s later. At a million objects a walk takes many pumps (ticks and flushes). */
static void st__publish(st_tier_compact_t *c, uint64_t t0)
{
    for (int v = 0; v < 4; v++)
        st_metric_set(c->m_s3[v], (double)st_objstore_requests(v));
    if (!c->counting) {
        if (uv_now(c->loop) < c->census_ms) return;
        c->counting = true;
        memset(c->counted, 0, sizeof c->counted);
        c->census = (st_store_walk_t){0};
    }
    int rc = 1;
    while (rc > 0 && uv_hrtime() - t0 < ST__WALK_BUDGET_NS)
        rc =
            st_store_walk_page(c->store, "F", 1, &c->census, ST__WALK_PAGE, st__census, c->counted);
    if (rc > 0) return; /* more next pump */
    if (rc == 0)
        for (int i = 0; i < 2; i++) {
            st_metric_set(c->m_objects[i], c->counted[i * 2]);
            st_metric_set(c->m_obytes[i], c->counted[i * 2 + 1]);
        }
    c->counting = false;
    c->census_ms = uv_now(c->loop) + 10000;
}

static int st__sweep_key(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_tier_compact_t *c = arg;
    (void)val, (void)vlen;
    if (klen < 2 || klen - 1 >= ST_TIER_OWNER_MAX) return 0; /* up to 255 bytes (a tagged one) */
    st__add(c, (const char *)key + 1, klen - 1, ST_TIER_COMPACT_MAJOR | ST_TIER_COMPACT_FOLD);
    c->swept++;
    return 0;
}

/* A compaction of every owner goes on: pages of owners queued while fewer than ST__QUEUE_MAX
 * wait and the budget from t0 lasts. Returns how many it queued. */
static size_t st__sweep_owners(st_tier_compact_t *c, uint64_t t0, uint64_t budget)
{
    size_t before = c->swept;
    while (c->sweeping && c->queue.count < ST__QUEUE_MAX && uv_hrtime() - t0 < budget) {
        int rc = st_store_walk_page(c->store, "W", 1, &c->all, ST__WALK_PAGE, st__sweep_key, c);
        if (rc < 0) { /* the next pump tries the same page again */
            st_warn("cold: compaction of every owner: %s; going on later", st_strerror(rc));
            break;
        }
        if (rc == 0 && c->sweep_again) { /* asked for again while it walked: once more */
            c->sweep_again = false;
            c->all = (st_store_walk_t){0};
        } else if (rc == 0) {
            c->sweeping = false;
        }
    }
    st__count_pending(c);
    return c->swept - before;
}

void st__tier_compact_pump(st_tier_compact_t *c, bool urgent)
{
    if (!c || c->stopping) return;
    st__compact_retry_due(c);
    st__publish(c, uv_hrtime());
    st__sweep_owners(c, uv_hrtime(), ST__WALK_BUDGET_NS); /* a budget of its own */
    if (c->job) {
        if (c->job->preparing && !uv_is_active((uv_handle_t *)&c->more)) st__more(c);
        st__tier_compact_durable(c, st_store_durable_id(c->store));
        return;
    }
    /* beside flushes, never holding one up; none while the hot store is filling up */
    if (urgent || uv_now(c->loop) < c->resume_ms || st_coldshare_held()) return;
    size_t it;
    st_map_node_t *n;
    while (!c->job && (n = st_map_first(&c->queue, &it)) != NULL) {
        st_cowner_t *o = (st_cowner_t *)n;
        st_map_remove(&c->queue, n);
        st_cjob_t *j = st__begin(c, o);
        if (!j) {
            free(o);
            continue;
        }
        c->job = j;
        st__more(c); /* its note's first slice */
        st__tier_compact_durable(c, st_store_durable_id(c->store));
    }
    st__count_pending(c);
}

bool st__tier_compacting(const st_tier_compact_t *c, const char *o, size_t ol, uint64_t pseq)
{
    const st_cjob_t *j = c ? c->job : NULL;
    return j && j->pseq == pseq && j->o->olen == ol && memcmp(j->o->owner, o, ol) == 0;
}

void st__tier_compact_enqueue(st_tier_compact_t *c, const char *o, size_t ol, int flags)
{
    if (!c || c->stopping || ol >= ST_TIER_OWNER_MAX) return;
    if (flags == ST_TIER_COMPACT_AUTO) {
        st_tier_stat_t st;
        uint64_t wait = 0;
        if (st_tier_stat(c->store, o, ol, &st, &wait) != ST_OK || st.files <= (int64_t)c->o.limit)
            return;
    }
    st__add(c, o, ol, flags);
}

size_t st__tier_compact_all(st_tier_compact_t *c)
{
    if (!c || c->stopping) return 0;
    /* one asked for while a walk goes on follows it once (restarting it at every request would
     * never end); else the first pages now, so a small store is queued whole */
    if (c->sweeping) {
        c->sweep_again = true;
        return 0;
    }
    c->sweeping = true;
    c->all = (st_store_walk_t){0};
    return st__sweep_owners(c, uv_hrtime(), 4 * ST__WALK_BUDGET_NS);
}

static void st__metrics(st_tier_compact_t *c)
{
    const char *h = "Cold-tier compactions (small objects merged)";
    c->m_ok = st_metrics_counter("strata_compactions_total", h, "result=\"ok\"");
    c->m_err = st_metrics_counter("strata_compactions_total", h, "result=\"error\"");
    c->m_rows = st_metrics_counter("strata_compaction_rows_rewritten_total",
                                   "Rows read and rewritten by compactions", "");
    c->m_bytes = st_metrics_counter("strata_compaction_bytes_written_total",
                                    "Parquet bytes written by compactions", "");
    c->m_pending = st_metrics_gauge("strata_compactions_pending",
                                    "Users whose compaction is queued or running", "");
    c->m_dropped = st_metrics_counter("strata_compaction_expired_rows_total",
                                      "Expired rows left out by compactions (retention)", "");
    c->m_retries = st_metrics_counter(
        "strata_compaction_retries_total",
        "Failed compactions asked for again (1 s after the first failure, doubling to 5 min)", "");
    c->m_retrying =
        st_metrics_gauge("strata_compactions_retrying",
                         "Users whose failed compaction waits to be asked for again", "");
    static const char *verbs[4] = {"verb=\"GET\"", "verb=\"PUT\"", "verb=\"DELETE\"",
                                   "verb=\"LIST\""};
    static const char *tiers[2] = {"tier=\"small\"", "tier=\"large\""};
    for (int i = 0; i < 2; i++) {
        c->m_objects[i] =
            st_metrics_gauge("strata_cold_objects",
                             "Cold objects (small: merged further; counted every 10 s)", tiers[i]);
        c->m_obytes[i] = st_metrics_gauge("strata_cold_bytes", "Bytes of cold objects", tiers[i]);
    }
    for (int v = 0; v < 4; v++)
        c->m_s3[v] = st_metrics_counter("strata_objstore_requests_total",
                                        "Object store requests (S3 or local)", verbs[v]);
}

void st__tier_compact_open(st_tier_compact_t **out, st_tier_t *t, uv_loop_t *loop,
                           st_store_t *store, st_objstore_t *obj, const st_tier_merge_t *merge,
                           const st_tier_compact_opts_t *o)
{
    st_tier_compact_t *c = st_calloc(1, sizeof *c);
    c->tier = t;
    c->loop = loop;
    c->store = store;
    c->obj = obj;
    c->merge = merge;
    c->o = *o;
    if (!c->o.limit) c->o.limit = 8;
    if (!c->o.max_bytes) c->o.max_bytes = 256ull << 20;
    st_map_init(&c->queue);
    st_map_init(&c->retry);
    uv_timer_init(loop, &c->more);
    c->more.data = c;
    uv_unref((uv_handle_t *)&c->more); /* slices go on only while the loop runs anyway */
    st__metrics(c);
    *out = c;
}

static void st__more_closed(uv_handle_t *h)
{
    st_tier_compact_t *c = h->data;
    c->more_closed = true;
    st__maybe_free(c);
}

void st__tier_compact_close(st_tier_compact_t *c, void (*closed)(void *arg), void *arg)
{
    c->stopping = true;
    c->closed = closed;
    c->closed_arg = arg;
    if (c->job && !c->job->queued) { /* its 'P' record waits for start-up */
        free(c->job->o);
        st__job_free(c->job);
        c->job = NULL;
    }
    uv_close((uv_handle_t *)&c->more, st__more_closed);
}
