/* SPDX-License-Identifier: MIT */
/*
 * The tier (see strata/tier.h): one owner for the cold tier's runtime, whatever the data. It
 * opens and closes the engines (flush.c, compact.c, reaper.c, pass.c, cache.c), runs the tick
 * that drives them, forwards the store's settling batches to them, sweeps orphans, and lets
 * requests wait for cold data. Members (data kinds) plug in their sources and their flush and
 * merge sides; the tier calls them and knows nothing else of them.
 */
#include "strata/coldshare.h"
#include "strata/looplag.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define ST__TICK_MS 1000

enum { ST__PARTS = 6 }; /* closed separately: tick, due, pass, flush, reaper, compaction */

/* An owner a post made due (st_tier_posted): looked at by the tier's own handle. */
typedef struct {
    st_map_node_t node;
    int64_t total;
    size_t olen;
    char owner[];
} st_tier_due_t;

/* ---- orphans: objects begun ('P') but never recorded ('F') ---- */

typedef struct {
    st_buf_t seqs; /* u64 seq, u16 length, object key */
} st_pset_t;

static int st__collect_p(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_pset_t *p = arg;
    if (klen < 8 || vlen == 0 || vlen > 4096) return 0;
    uint64_t seq = st_be64_get((const uint8_t *)key + klen - 8);
    uint16_t l = (uint16_t)vlen;
    st_buf_append(&p->seqs, &seq, sizeof seq);
    st_buf_append(&p->seqs, &l, sizeof l);
    st_buf_append(&p->seqs, val, vlen);
    return 0;
}

/* One 'P' record (o, seq -> key) not in flight: its object goes unless the manifest has it. */
static int st__orphan(st_tier_t *t, const char *o, size_t ol, uint64_t seq, const char *key,
                      uint64_t *wait)
{
    uint8_t k[ST__TIER_MKEY_MAX];
    const void *v;
    size_t vl;
    int rc = st_store_get(t->store, k, st__tier_mkey(k, 'F', o, ol, true, seq), &v, &vl, wait);
    if (rc == ST_ENOTFOUND) { /* written (maybe) but never recorded: it goes */
        rc = st_tier_doom(t->store, o, ol, seq, key, wait);
        if (rc == ST_OK) st_metric_add(t->m_orphans, 1);
        if (rc == ST_OK)
            st_warn("cold: %s was written by a flush that never completed; deleting it", key);
    }
    if (rc == ST_OK) rc = st_store_del(t->store, k, st__tier_mkey(k, 'P', o, ol, true, seq), wait);
    return rc;
}

int st__tier_orphans(st_tier_t *t, const char *o, size_t ol, uint64_t *wait)
{
    uint8_t k[ST__TIER_MKEY_MAX];
    size_t pl = st__tier_mkey(k, 'P', o, ol, false, 0);
    k[pl++] = 0;
    st_pset_t ps = {{0}};
    int rc = st_store_scan(t->store, k, pl, st__collect_p, &ps, wait);
    for (size_t i = 0; rc == ST_OK && i < ps.seqs.len;) {
        uint64_t seq;
        uint16_t l;
        memcpy(&seq, ps.seqs.data + i, sizeof seq);
        memcpy(&l, ps.seqs.data + i + sizeof seq, sizeof l);
        char *key = st_strndup(ps.seqs.data + i + sizeof seq + sizeof l, l);
        i += sizeof seq + sizeof l + l;
        if (!st__tier_compacting(t->compact, o, ol, seq)) /* in flight, not an orphan */
            rc = st__orphan(t, o, ol, seq, key, wait);
        free(key);
    }
    st_buf_free(&ps.seqs);
    return rc;
}

/* ---- the engines' kinds: each owner's member, with the tier's steps around it ---- */

size_t st_tier_owner(char *o, char tag, const char *name, size_t nl)
{
    size_t n = 0;
    if (tag) {
        o[n++] = '~';
        o[n++] = tag;
    }
    memcpy(o + n, name, nl);
    return n + nl;
}

char st_tier_owner_tag(const char *o, size_t ol)
{
    return ol > 2 && o[0] == '~' ? o[1] : 0;
}

static const st_tier_member_t *st__tier_member_tag(const st_tier_t *t, char tag)
{
    for (size_t i = 0; i < t->nflushers; i++)
        if (t->flushers[i]->tag == tag) return t->flushers[i];
    return NULL;
}

const st_tier_member_t *st__tier_member(const st_tier_t *t, const char *o, size_t ol)
{
    return st__tier_member_tag(t, st_tier_owner_tag(o, ol));
}

/* What the engines carry for a kind (rows of a flush, rows a merge left out): the kind's own
 * pointer and the member it belongs to, so calls that have no owner reach the right kind. */
typedef struct {
    const st_tier_member_t *m;
    void *p;
} st_box_t;

static void *st__box(const st_tier_member_t *m, void *p)
{
    st_box_t *b = st_malloc(sizeof *b);
    *b = (st_box_t){m, p};
    return b;
}

static int st__tier_snapshot(void *arg, const char *o, size_t ol, const st_tier_stat_t *st,
                             uint64_t seq, uint64_t writer, st_tier_snap_t *out, uint64_t *wait)
{
    const st_tier_member_t *m = st__tier_member(arg, o, ol);
    if (!m) return ST_ENOTFOUND; /* an owner of no kind that joined */
    const st_tier_kind_t *k = m->flush;
    int rc = k->snapshot(k->arg, o, ol, st, seq, writer, out, wait);
    if (out->rows) out->rows = st__box(m, out->rows);
    return rc;
}

static int st__tier_encode(void *arg, void *rows, st_buf_t *object)
{
    (void)arg;
    st_box_t *b = rows;
    return b->m->flush->encode(b->m->flush->arg, b->p, object);
}

static int st__tier_commit(void *arg, const char *o, size_t ol, void *rows, st_tier_file_t *f,
                           uint64_t *wait)
{
    (void)arg;
    st_box_t *b = rows;
    return b->m->flush->commit(b->m->flush->arg, o, ol, b->p, f, wait);
}

static void st__tier_release(void *arg, void *rows)
{
    (void)arg;
    st_box_t *b = rows;
    b->m->flush->release(b->m->flush->arg, b->p);
    free(b);
}

static int st__orphans(void *arg, const char *o, size_t ol, uint64_t *wait)
{
    st_tier_t *t = arg;
    const st_tier_member_t *m = st__tier_member(t, o, ol);
    const st_tier_kind_t *k = m ? m->flush : NULL;
    return k && k->orphans ? k->orphans(k->arg, o, ol, wait) : st__tier_orphans(t, o, ol, wait);
}

static void st__tier_owner_flushed(void *arg, const char *o, size_t ol)
{
    st_tier_t *t = arg;
    const st_tier_member_t *m = st__tier_member(t, o, ol);
    st__tier_compact_enqueue(t->compact, o, ol, ST_TIER_COMPACT_AUTO);
    if (!t->stopping) st_tier_reap(t->reaper); /* orphans found when it started are durable */
    if (m && m->flush->flushed) m->flush->flushed(m->flush->arg, o, ol);
}

/* A pass that queues flushes holds once ST__PASS_QUEUE_MAX owners wait, and goes on once the
 * flushes took them below half of it: a flush of every user (POST /v1/admin/flush, the hot store
 * near full) holds a few thousand owners' names at a time, not a million (≈ 90 MB). Half of it is
 * seconds of flushing, so the pass is back long before the queue runs dry. */
#define ST__PASS_QUEUE_MAX 4096

static bool st__pass_full(void *arg)
{
    return st_tier_flush_pending(((st_tier_t *)arg)->flush) >= ST__PASS_QUEUE_MAX;
}

static void st__pass_maybe_resume(st_tier_t *t)
{
    if (st_tier_flush_pending(t->flush) < ST__PASS_QUEUE_MAX / 2) st_tier_pass_resume(t->pass);
}

static void st__tier_flush_done(void *arg)
{
    st_tier_t *t = arg;
    st__pass_maybe_resume(t);
    st__tier_compact_pump(t->compact, t->urgent);
    for (size_t i = 0; i < t->nflushers; i++) {
        const st_tier_kind_t *k = t->flushers[i]->flush;
        if (k->done) k->done(k->arg);
    }
}

static int st__tier_merge(void *arg, const char *o, size_t ol, st_objstore_t *obj,
                          const st_tier_obj_t *objs, size_t n, int64_t cutoff, const char *key,
                          st_tier_file_t *out, void **dropped, int64_t *ndropped)
{
    const st_tier_member_t *mb = st__tier_member(arg, o, ol);
    if (!mb) return ST_ENOTFOUND;
    const st_tier_merge_t *m = mb->merge;
    st_box_t *b = *dropped; /* what the kind's prepare noted, if any */
    void *d = b ? b->p : NULL;
    int rc = m->merge(m->arg, o, ol, obj, objs, n, cutoff, key, out, &d, ndropped);
    if (b)
        b->p = d;
    else
        *dropped = d ? st__box(mb, d) : NULL;
    return rc;
}

static void *st__merge_prepare(void *arg, const char *o, size_t ol, const st_tier_obj_t *objs,
                               size_t n, int64_t cutoff)
{
    const st_tier_member_t *mb = st__tier_member(arg, o, ol);
    if (!mb || !mb->fold_prepare) return NULL;
    void *p = mb->fold_prepare(mb->arg, o, ol, objs, n, cutoff);
    return p ? st__box(mb, p) : NULL;
}

static bool st__merge_more(void *arg, void *dropped, uint64_t until)
{
    st_box_t *b = dropped;
    (void)arg;
    return !b || !b->m->fold_more || b->m->fold_more(b->m->arg, b->p, until);
}

static bool st__merge_fold_pick(void *arg, const char *o, size_t ol, const st_tier_obj_t *objs,
                                size_t n, size_t *at)
{
    const st_tier_member_t *mb = st__tier_member(arg, o, ol);
    return mb && mb->fold_pick && mb->fold_pick(mb->arg, o, ol, objs, n, at);
}

static int st__tier_merge_commit(void *arg, const char *o, size_t ol, void *dropped,
                                 int64_t ndropped, uint64_t *wait)
{
    const st_tier_member_t *mb = st__tier_member(arg, o, ol);
    if (!mb) return ST_ENOTFOUND;
    st_box_t *b = dropped;
    return mb->merge->commit(mb->merge->arg, o, ol, b ? b->p : NULL, ndropped, wait);
}

static bool st__tier_merge_changed(void *arg, const void *dropped)
{
    (void)arg;
    const st_box_t *b = dropped;
    return b && b->m->merge->changed && b->m->merge->changed(b->m->merge->arg, b->p);
}

void st_tier_on_rows_changed(st_tier_t *t, void (*fn)(void *arg, const char *key, uint64_t *wait),
                             void *arg)
{
    if (!t) return;
    t->rows_changed = fn;
    t->rows_changed_arg = arg;
}

void st_tier_on_erased(st_tier_t *t, st_tier_erased_fn fn, void *arg)
{
    if (!t) return;
    t->erased = fn;
    t->erased_arg = arg;
}

void st_tier_erased(st_tier_t *t, const char *o, size_t ol, const char *key, uint64_t *wait)
{
    if (t && t->erased) t->erased(t->erased_arg, o, ol, key, wait);
}

static void st__tier_merge_release(void *arg, void *dropped)
{
    (void)arg;
    st_box_t *b = dropped;
    b->m->merge->release(b->m->merge->arg, b->p);
    free(b);
}

static void st__merge_name(void *arg, const char *o, size_t ol, const char *first_key, uint64_t seq,
                           uint64_t pseq, uint64_t writer, st_buf_t *key)
{
    const st_tier_member_t *mb = st__tier_member(arg, o, ol);
    if (mb) mb->merge->name(mb->merge->arg, o, ol, first_key, seq, pseq, writer, key);
}

/* ---- the tick ---- */

/* The start-up sweep of the stats records ('I') an older binary left (colstats.c): a rolling
 * upgrade's older leader erases a user's or compacts an owner's file records and leaves their
 * stats, naming the user, under an owner this binary may never compact or erase again. A walk of
 * every 'I' key once per start (run by the tick of a member whose store takes writes: a group's
 * follower sweeps nothing until it leads; one that leads later sweeps then), in pages within what
 * the turn has left of its budget (looplag.h; SPEC §7), its deletions staged in that turn's batch,
 * replicated like every write. A file record read per stats record: each key is read once per
 * start, never per request. */
#define ST__ISWEEP_PAGE   128
#define ST__ISWEEP_MIN_NS (100u * 1000)
#define ST__ISWEEP_MAX_NS (1000u * 1000)
static void st__tier_isweep(st_tier_t *t)
{
    uint64_t until = uv_hrtime() + st_looplag_turn_left(ST__ISWEEP_MIN_NS, ST__ISWEEP_MAX_NS);
    int rc = st__tier_stats_orphans(t->store, &t->isweep, ST__ISWEEP_PAGE, until, &t->iswept);
    if (rc < 0) { /* the next tick reads the same page again */
        st_warn("cold: the sweep of orphaned column stats: %s; going on later", st_strerror(rc));
        return;
    }
    if (rc > 0) return;
    t->isweeping = false;
    if (t->iswept)
        st_info("cold: %zu column stats records an older binary left without their file were "
                "deleted",
                t->iswept);
}

static void st__on_tick(uv_timer_t *h)
{
    st_tier_t *t = h->data;
    uint64_t since = uv_hrtime();
    if (st_store_writable(t->store) == ST_ENOLEADER) return; /* a group's leader flushes */
    if (st_coldshare_held()) return; /* ... once every member reads the same cold store */
    if (t->isweeping && st_store_writable(t->store) == ST_OK) st__tier_isweep(t);
    st_tier_reap(t->reaper);  /* objects out of the manifest, once that is durable */
    st__pass_maybe_resume(t); /* a held pass whose queue drained without a flush coming back */
    uint64_t now = uv_now(t->loop), used, size;
    st_store_usage(t->store, &used, &size);
    /* near full: flush now, then give the flushes time to free space before asking again */
    t->urgent = size && used >= size / 10 * 8;
    st_tier_flush_urgent(t->flush, t->urgent);
    bool full = t->urgent && now >= t->next_full_ms;
    if (full) t->next_full_ms = now + 10000;
    if (now >= t->next_interval_ms || full) {
        if (full)
            st_warn("cold: hot store at %llu of %llu bytes: flushing", (unsigned long long)used,
                    (unsigned long long)size);
        t->next_interval_ms = now + t->interval_ms;
        st_tier_pass_start(t->pass, full ? ST_TIER_PASS_ALL : 0);
    }
    for (st_list_t *l = t->members.next; l != &t->members; l = l->next) {
        st_tier_member_t *m = ST_LIST_ITEM(l, st_tier_member_t, link);
        if (m->tick) m->tick(m->arg);
    }
    /* a compaction's start (its merge read on the loop) first: the flushes' snapshots start in
     * what is left of the turn's budget, or a few milliseconds later */
    st__tier_compact_pump(t->compact, t->urgent);
    st_tier_flush_pump_since(t->flush, since);
}

/* Held flushes and a compaction whose 'P' record is durable now go to a worker. */
static void st__tier_on_durable(st_store_listener_t *l, uint64_t id)
{
    st_tier_t *t = (st_tier_t *)((char *)l - offsetof(st_tier_t, listener));
    if (t->stopping) return;
    st__tier_compact_durable(t->compact, id);
    st_tier_flush_durable(t->flush, id);
}

/* Held flushes whose snapshot was rolled back are cancelled: those rows never existed. */
static void st__tier_on_failed(st_store_listener_t *l, uint64_t first, int err)
{
    st_tier_t *t = (st_tier_t *)((char *)l - offsetof(st_tier_t, listener));
    if (!t->stopping) st_tier_flush_failed(t->flush, first, err);
}

static void st__pass_begin(void *arg, int flags)
{
    (void)flags;
    ((st_tier_t *)arg)->pass_queued = 0;
}

static void st__after_slice(void *arg)
{
    st_tier_flush_pump(((st_tier_t *)arg)->flush); /* what this slice queued starts now */
}

/* ---- opening and closing ---- */

int st_tier_open(st_tier_t **out, uv_loop_t *loop, st_store_t *store, const st_tier_opts_t *o)
{
    /* the manifest records (strata/tier.h) and the files' column stats beside them ('I',
     * colstats.c), the writer record (writer.c), held deletions (hold.c), the owners whose file
     * records changed (dirty.c) */
    static const st_claim_t keys[] = {
        ST_CLAIM("W"),           ST_CLAIM("F"),           ST_CLAIM("I"),
        ST_CLAIM("P"),           ST_CLAIM("D"),           ST_CLAIM("w"),
        ST_CLAIM("\0cold_hold"), ST_CLAIM("\0cold_held"), ST_CLAIM("\0cold_dirty")};
    int rc = st_store_claims(store, "cold tier", keys, sizeof keys / sizeof *keys);
    if (rc != ST_OK) return rc;
    st_tier_t *t = st_calloc(1, sizeof *t);
    t->loop = loop;
    t->store = store;
    t->obj = o->obj;
    t->flush_rows = o->flush_rows ? o->flush_rows : 10000;
    t->retention_us = o->retention_s * 1000000ull;
    t->interval_ms = (o->flush_interval_s ? o->flush_interval_s : 300) * 1000;
    t->fkind = (st_tier_kind_t){
        st__tier_snapshot, st__tier_encode,        st__tier_commit,     st__tier_release,
        st__orphans,       st__tier_owner_flushed, st__tier_flush_done, t};
    t->mkind = (st_tier_merge_t){
        st__tier_merge,        st__tier_merge_commit, st__tier_merge_release, st__merge_name, t,
        st__tier_merge_changed};
    st_tier_flush_open(&t->flush, loop, store, o->obj, &t->fkind);
    st_tier_compact_opts_t co = {.limit = o->compact_objects,
                                 .max_bytes = o->compact_max_bytes,
                                 .retention_us = t->retention_us,
                                 .prepare = st__merge_prepare,
                                 .fold_pick = st__merge_fold_pick,
                                 .more = st__merge_more,
                                 .hook_arg = t};
    st__tier_compact_open(&t->compact, t, loop, store, o->obj, &t->mkind, &co);
    st_metric_t *m_reads = st_metrics_counter("strata_cold_row_groups_read_total",
                                              "Parquet row groups decoded for reads", "");
    st_coldcache_opts_t cco = {o->obj, o->cache_bytes, m_reads};
    st_coldcache_open(&t->cache, loop, &cco);
    st_tier_reaper_open(&t->reaper, loop, store, o->obj);
    t->m_orphans = st_metrics_counter("strata_flush_orphans_total",
                                      "Objects written by a flush that was never recorded", "");
    t->m_retained = st_metrics_counter("strata_retention_deleted_messages_total",
                                       "Cold messages deleted by retention", "");
    st_list_init(&t->ret_queue);
    st_tier_pass_open(&t->pass, loop, store, st__after_slice, t);
    st_tier_pass_on_begin(t->pass, st__pass_begin);
    st_tier_pass_on_full(t->pass, st__pass_full);
    uv_timer_init(loop, &t->tick);
    t->tick.data = t;
    t->next_interval_ms = uv_now(loop) + t->interval_ms;
    uv_timer_start(&t->tick, st__on_tick, ST__TICK_MS, ST__TICK_MS);
    st_map_init(&t->due);
    uv_idle_init(loop, &t->due_h);
    t->due_h.data = t;
    st_list_init(&t->members);
    t->listener.on_durable = st__tier_on_durable;
    t->listener.on_failed = st__tier_on_failed;
    st_store_listen(store, &t->listener);
    *out = t;
    return ST_OK;
}

void st_tier_set_hold(st_tier_t *t, int64_t (*cutoff)(void *arg), void *arg)
{
    if (t) st_tier_reaper_hold(t->reaper, cutoff, arg);
}

void st_tier_join(st_tier_t *t, st_tier_member_t *m)
{
    if (!t || !m || t->stopping) return;
    for (size_t i = 0; i < m->nsources; i++)
        st_tier_pass_add(t->pass, &m->sources[i]);
    st_list_insert(&t->members, &m->link);
    if (!m->flush) return;
    ST_ASSERT(m->merge && t->nflushers < ST__FLUSHERS_MAX);
    ST_ASSERT(!st__tier_member_tag(t, m->tag)); /* one member per tag: its owners (tier.h) */
    t->flushers[t->nflushers++] = m;
    /* start-up: flushes and compactions a crash interrupted left 'P' records; their objects are
     * deleted (and the deletions a crash interrupted are finished) by the reaper */
    st_tier_flush_recover(t->flush);
    st_tier_reap(t->reaper);
    /* ... and the stats records an older binary left: from the next tick on (st__tier_isweep) */
    t->isweep = (st_store_walk_t){0};
    t->isweeping = true;
    t->iswept = 0;
}

/* Every part is closed: the members may go, and the tier once st_tier_free asked for it. */
static void st__part_closed(void *arg)
{
    st_tier_t *t = arg;
    if (++t->closed_parts < ST__PARTS) return;
    for (st_list_t *l = t->members.next, *next; l != &t->members; l = next) {
        st_tier_member_t *m = ST_LIST_ITEM(l, st_tier_member_t, link);
        next = l->next;
        st_list_unlink(l);
        if (m->closed) m->closed(m->arg); /* it may free m */
    }
    t->done = true;
    if (t->free_asked) free(t);
}

static void st__tick_closed(uv_handle_t *h)
{
    st__part_closed(h->data);
}

static void st__due_drop(st_tier_t *t)
{
    size_t it;
    st_map_node_t *n;
    while ((n = st_map_first(&t->due, &it)) != NULL) {
        st_map_remove(&t->due, n);
        free(n);
    }
}

void st_tier_close(st_tier_t *t)
{
    if (!t || t->stopping) return;
    t->stopping = true;
    st_store_unlisten(t->store, &t->listener);
    /* flushes held for durability are dropped (their 'P' records wait for start-up); those in
     * flight come back while the loop runs */
    st_tier_flush_close(t->flush, st__part_closed, t);
    for (st_list_t *l = t->members.next; l != &t->members; l = l->next) {
        st_tier_member_t *m = ST_LIST_ITEM(l, st_tier_member_t, link);
        if (m->stop) m->stop(m->arg); /* their waits go before the cache does */
    }
    st__tier_retain_stop(t);
    st_tier_reaper_close(t->reaper, st__part_closed, t); /* its pass in flight comes back */
    st_coldcache_close(t->cache); /* its jobs in flight come back while the loop runs */
    t->cache = NULL;
    st__tier_compact_close(t->compact, st__part_closed, t);
    st_tier_pass_close(t->pass, st__part_closed, t);
    uv_close((uv_handle_t *)&t->tick, st__tick_closed);
    st__due_drop(t);
    st_map_free(&t->due);
    uv_close((uv_handle_t *)&t->due_h, st__tick_closed);
}

void st_tier_free(st_tier_t *t)
{
    if (!t) return;
    ST_ASSERT(t->stopping);
    if (t->done)
        free(t);
    else
        t->free_asked = true;
}

/* ---- what kinds and requests ask of it ---- */

st_coldcache_t *st_tier_cache(st_tier_t *t)
{
    return t ? t->cache : NULL;
}

uv_loop_t *st_tier_loop(st_tier_t *t)
{
    return t->loop;
}

bool st_tier_stopping(const st_tier_t *t)
{
    return !t || t->stopping;
}

int64_t st_tier_cutoff(const st_tier_t *t)
{
    return t && t->retention_us ? st_now_us() - (int64_t)t->retention_us : 0;
}

/* The tier's own turn (an idle handle, after the posts of this loop turn): every owner made due
 * is queued once its hot rows (total less the cold ones) reach --flush-rows, then flushes start. */
static void st__on_due(uv_idle_t *h)
{
    st_tier_t *t = h->data;
    uv_idle_stop(h);
    size_t it;
    for (st_map_node_t *n = st_map_first(&t->due, &it); n; n = st_map_next(&t->due, &it, n)) {
        st_tier_due_t *d = (st_tier_due_t *)n;
        st_tier_stat_t st;
        uint64_t wait = 0;
        if (st_tier_stat(t->store, d->owner, d->olen, &st, &wait) == ST_OK &&
            (uint64_t)(d->total - st.rows) >= t->flush_rows)
            st_tier_flush_due(t->flush, d->owner, d->olen);
    }
    st__due_drop(t);
    st_tier_flush_pump(t->flush);
}

void st_tier_posted(st_tier_t *t, const char *o, size_t ol, int64_t total)
{
    if (!t || t->stopping || !t->nflushers || (uint64_t)total < t->flush_rows) return;
    st_tier_due_t *d = (st_tier_due_t *)st_map_get(&t->due, o, ol);
    if (!d) {
        d = st_malloc(sizeof *d + ol);
        memcpy(d->owner, o, ol);
        d->olen = ol;
        d->node.key = d->owner;
        d->node.klen = ol;
        st_map_insert(&t->due, &d->node);
        if (t->due.count == 1) uv_idle_start(&t->due_h, st__on_due);
    }
    d->total = total; /* the newest */
}

void st_tier_enqueue(st_tier_t *t, const char *o, size_t ol)
{
    if (!t || t->stopping || !t->nflushers) return;
    st_tier_flush_enqueue(t->flush, o, ol);
    t->pass_queued++;
}

size_t st_tier_flush_all(st_tier_t *t)
{
    if (!t || t->stopping) return 0;
    st_tier_pass_start(t->pass, ST_TIER_PASS_ALL);
    return t->pass_queued;
}

size_t st_tier_compact(st_tier_t *t, const char *o, size_t ol, int flags)
{
    if (!t || t->stopping || !t->nflushers) return 0;
    size_t n = 1;
    if (o)
        st__tier_compact_enqueue(t->compact, o, ol, flags);
    else
        n = st__tier_compact_all(t->compact);
    if (flags & ST_TIER_COMPACT_MAJOR) st__tier_compact_pump(t->compact, t->urgent);
    return n;
}

bool st_tier_wait(st_tier_t *t, st_coldwait_t **w, void (*done)(void *arg), void *arg)
{
    if (!t || !t->cache) return false; /* stopping: the re-run answers without the cold tier */
    return st_coldcache_wait(t->cache, w, done, arg);
}

void st_tier_release(st_tier_t *t, st_coldwait_t *w)
{
    if (w && t && t->cache) st_coldcache_release(t->cache, w);
}
