/* SPDX-License-Identifier: MIT */
/*
 * The tables module (strata/tables.h): the commit timer, the view of the tier's manifest, the
 * files' provenance in the hot store, GET /v1/admin/tables and the metrics.
 */
#include "strata/idle.h"
#include "state.h"
#include "strata/metrics.h"
#include "strata/tier.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* tag: '0' + the table's index (provenance: part its partition; NULL, a record without one),
 * ST__CHANGED or ST__ERASED (part NULL). Without part, the key's length; with it, also the length
 * of the owner's prefix ("\0tables" 'p' index partition '\0') into *plen when plen. */
static size_t st__pkey_p(uint8_t *k, char tag, const char *part, const char *key, size_t *plen)
{
    size_t kl = key ? strlen(key) : 0, pl = part ? strlen(part) + 2 : 0, at = ST__PFX_LEN;
    if (ST__PFX_LEN + 1 + pl + kl > ST_KEY_MAX) return 0;
    memcpy(k, st__pfx, ST__PFX_LEN);
    if (part) {
        k[at++] = ST__PROV;
        k[at++] = (uint8_t)tag;
        memcpy(k + at, part, pl - 2);
        at += pl - 2;
        k[at++] = 0;
        if (plen) *plen = at;
    } else {
        k[at++] = (uint8_t)tag;
    }
    if (kl) memcpy(k + at, key, kl);
    return at + kl;
}

static size_t st__pkey(uint8_t *k, char tag, const char *part, const char *key)
{
    return st__pkey_p(k, tag, part, key, NULL);
}

size_t st_tables_prov_key(uint8_t *k, int ti, const char *part, const char *key)
{
    return st__pkey(k, (char)('0' + ti), part, key);
}

size_t st_tables_pending_key(uint8_t *k, int ti)
{
    return st__pkey(k, ST__PENDING, NULL, (char[]){(char)('0' + ti), 0});
}

void st_tables_rows_changed(void *arg, const char *key, uint64_t *wait)
{
    st_tables_t *t = arg;
    uint8_t k[ST_KEY_MAX + 1];
    size_t kl = st__pkey(k, ST__CHANGED, NULL, key);
    if (kl) st_store_put(t->store, k, kl, "", 0, wait);
}

/* On the worker, once every table is merged: the marks of objects no table holds any more
 * (merged away before a snapshot had them) into t->sweep, for the loop to delete. An object is
 * held when the view or the files read with it have it (both sorted by now): a mark goes with
 * the commit that has its object, so a marked object is in no snapshot yet, and its owner, whose
 * file records changed in the batch that wrote the mark, is one the view read. */
static void st__changed_sweep(st_tables_t *t)
{
    uint8_t k[ST_KEY_MAX + 1];
    for (size_t m = 0; m < t->cmarks.n; m++) {
        const char *key = t->cmarks.v[m];
        bool held = false;
        for (int i = 0; i < t->n && !held; i++)
            held =
                st_tfiles_find(&t->job[i].prev, key) || st_tfiles_find(&t->job[i].view.fresh, key);
        size_t kl = held ? 0 : st__pkey(k, ST__CHANGED, NULL, key);
        if (!kl) continue;
        st_buf_append(&t->sweep, &kl, sizeof kl);
        st_buf_append(&t->sweep, k, kl);
    }
}

/* ---- an erasure's objects ---- */
void st_tables_erased(void *arg, const char *o, size_t ol, const char *key, uint64_t *wait)
{
    st_tables_t *t = arg;
    if (!t->interval_ms) return; /* no commits: no snapshot to expire */
    int ti = st_table_of_tag(st_tier_owner_tag(o, ol));
    uint8_t k[ST_KEY_MAX + 1];
    size_t kl = ti < 0 ? 0 : st__pkey(k, ST__ERASED, NULL, key);
    if (!kl || ol > ST_KEY_MAX) return; /* no table's (a delta object) */
    /* the table's digit, then the owner: the mark goes with a commit that read the owner */
    char v[1 + ST_KEY_MAX];
    v[0] = (char)('0' + ti);
    memcpy(v + 1, o, ol);
    st_store_put(t->store, k, kl, v, 1 + ol, wait);
    t->erased_n++; /* no 'F' write may come with it (an object a hold let go) */
}

/* A job's table committed with its erasures: their marks go (a mark written since stays), but
 * for an owner this commit's view did not read while it is still dirty: its objects' removal is
 * in no snapshot yet (a view takes ST_TABLES_VIEW_OWNERS owners; the erasure's may come in a
 * later one), so the snapshot just made may still name them, and the commit that takes them out
 * must expire every earlier snapshot again (SPEC v5 §5.1). A mark from before the owner was
 * written in it (one byte) goes as it did. */
static void st__erasures_done(st_tables_t *t, const st_buf_t *marks, const st_tview_t *view)
{
    uint64_t wait = 0;
    for (size_t off = 0; off + sizeof(size_t) <= marks->len;) {
        size_t n;
        memcpy(&n, marks->data + off, sizeof n);
        const char *key = marks->data + off + sizeof n;
        off += sizeof n + n;
        const void *v;
        size_t vl;
        if (st_store_get(t->store, key, n, &v, &vl, &wait) == ST_OK && vl > 1) {
            const char *o = (const char *)v + 1;
            size_t ol = vl - 1;
            if (!st_tview_has_owner(view, o, ol) && st_tier_dirty_gen(t->store, o, ol) != 0)
                continue; /* kept for the commit that reads the owner */
        }
        st_store_del(t->store, key, n, &wait);
    }
}

void st_tables_jtable_free(st__jtable_t *j)
{
    st_vec_free(&j->live); /* borrowed strings (st_tview_merge) */
    st_vec_free(&j->gone);
    st_tview_free(&j->view);
    st_tfiles_free(&j->prev);
    st_tstrs_free(&j->prev_mans);
    st_tstrs_free(&j->res.mans);
    st_tfiles_free(&j->res.moved);
    st_buf_free(&j->marks);
    st_buf_free(&j->prov);
    memset(j, 0, sizeof *j);
}

/* Whether the store holds a record under "\0tables" tag (st__any_one stops at the first). */
static int st__any_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)arg, (void)key, (void)klen, (void)val, (void)vlen;
    return 1;
}

static bool st__any(st_tables_t *t, char tag)
{
    uint8_t pre[ST__PFX_LEN + 1];
    memcpy(pre, st__pfx, ST__PFX_LEN);
    pre[ST__PFX_LEN] = (uint8_t)tag;
    uint64_t wait = 0;
    return st_store_scan(t->store, pre, sizeof pre, st__any_one, NULL, &wait) > 0;
}

/* The name of the manifest of f's man in names, or NULL (not known). */
static const char *st__man_name(const st_tfile_t *f, const st_tstrs_t *names)
{
    return f && f->man && f->man <= names->n ? names->v[f->man - 1] : NULL;
}

/* Whether f, in the committed set as c (NULL: not), is named by the same manifest as then. */
static bool st__man_same(const st_tfile_t *f, const st_tfile_t *c, const st_tstrs_t *names,
                         const st_tstrs_t *was_names)
{
    const char *was = st__man_name(c, was_names), *now = st__man_name(f, names);
    return c && (was == now || (was && now && strcmp(was, now) == 0));
}

/* One provenance write of a job into b: a put (val; 'n': of an object no snapshot had, which
 * leaves the pending count with it, slice.c) or, val NULL, a del. An 'n' is followed by its file
 * record's number (u8 known, u64 fseq: st_tfile_t's), which slice.c's check of the record reads
 * instead of the owner's whole manifest. */
static void st__prov_op(st_buf_t *b, char op, const uint8_t *k, size_t kl, const void *val,
                        size_t vl, const st_tfile_t *f)
{
    op = val ? op : 'd';
    st_buf_appendc(b, op);
    st_buf_append(b, &kl, sizeof kl);
    st_buf_append(b, k, kl);
    if (!val) return;
    st_buf_append(b, &vl, sizeof vl);
    st_buf_append(b, val, vl);
    if (op != 'n') return;
    st_buf_appendc(b, f && f->has_fseq);
    uint64_t fseq = f ? f->fseq : 0;
    st_buf_append(b, &fseq, sizeof fseq);
}

/* The put of f's record (its partition's key) naming manifest now (NULL: none known). */
static void st__prov_put(st_buf_t *b, char op, int ti, const st_tfile_t *f, const char *now)
{
    uint8_t k[ST_KEY_MAX + 1];
    size_t kl = st__pkey(k, (char)('0' + ti), f->part, f->key);
    if (!kl || !f->part) return;
    uint8_t v[32];
    st_be64_put(v, (uint64_t)f->snap);
    st_be64_put(v + 8, (uint64_t)f->seq);
    st_be64_put(v + 16, (uint64_t)f->rows);
    st_be64_put(v + 24, (uint64_t)f->size);
    st_buf_t val = {0};
    st_buf_append(&val, v, sizeof v);
    if (now) st_buf_puts(&val, now);
    st__prov_op(b, op, k, kl, val.data, val.len, f);
    st_buf_free(&val);
}

/* On the worker, after table ti's merge (and commit, when one was made): the store writes that
 * make its provenance the new snapshot's, into j->prov (done on the loop: st__prov_apply) — a
 * record for each new file, and for each one the commit moved to another manifest of ours (the
 * commit's names: a live file, or one of a rewritten manifest outside a delta's files) — unless
 * more than ST__MOVED_MAX moved (a big manifest rewritten or merged): each record is a put on the
 * loop, so those keep the name they had, which the parent no longer lists; a commit after that
 * removes such a file reads this writer's manifests once to find it (fastappend.c), as one before
 * the names were remembered does. Also: the records of files gone, the 'c' marks of files a
 * snapshot now has, and records without a partition (a whole view's) rewritten with it. */
#define ST__MOVED_MAX 4096
static void st__prov_plan(st_tables_t *t, int ti, st__jtable_t *j)
{
    (void)t;
    const st_tfiles_t *live = &j->live, *prev = &j->prev;
    const st_tstrs_t *names = j->res.mans_set ? &j->res.mans : &j->prev_mans;
    uint8_t k[ST_KEY_MAX + 1];
    size_t kl, moved = j->res.moved.n;
    for (size_t i = 0; i < live->n; i++) {
        const st_tfile_t *c = st_tfiles_find(prev, live->v[i].key);
        moved += c && !st__man_same(&live->v[i], c, names, &j->prev_mans);
    }
    for (size_t i = 0; i < j->gone.n; i++) {
        const st_tfile_t *c = &prev->v[j->gone.v[i]];
        if ((kl = st__pkey(k, (char)('0' + ti), c->part, c->key)))
            st__prov_op(&j->prov, 'd', k, kl, NULL, 0, NULL);
    }
    for (size_t i = 0; i < live->n; i++) {
        const st_tfile_t *f = &live->v[i];
        if (f->changed && (kl = st__pkey(k, ST__CHANGED, NULL, f->key))) /* in a snapshot now */
            st__prov_op(&j->prov, 'd', k, kl, NULL, 0, NULL);
        const st_tfile_t *c = st_tfiles_find(prev, f->key);
        bool legacy = c && !c->part; /* a record without a partition: rewritten with it */
        if (legacy && (kl = st__pkey(k, (char)('0' + ti), NULL, c->key)))
            st__prov_op(&j->prov, 'd', k, kl, NULL, 0, NULL);
        if (c && !legacy && (moved > ST__MOVED_MAX || st__man_same(f, c, names, &j->prev_mans)))
            continue;
        st__prov_put(&j->prov, c ? 'p' : 'n', ti, f, st__man_name(f, names));
    }
    for (size_t i = 0; moved <= ST__MOVED_MAX && i < j->res.moved.n; i++)
        st__prov_put(&j->prov, 'p', ti, &j->res.moved.v[i],
                     st__man_name(&j->res.moved.v[i], names));
}

/* This member starts committing (start-up, or a follower that now leads): the newest metadata,
 * read again; the provenance stays in the store (the last leader's commits, replicated), read per
 * changed owner at each tick. A whole view first only when records without a partition are left
 * (a store from before they had one), or none is there at all (nothing committed yet: the tier's
 * files may predate their owners' dirty marks). O(tables): two seeks each. */
static void st__lead(st_tables_t *t)
{
    for (int i = 0; i < t->n; i++) {
        cJSON_Delete(t->t[i].meta.doc);
        t->t[i].meta.doc = NULL;
        t->t[i].meta.version = 0;
        t->t[i].meta.swept = false;
    }
    t->read = false; /* what a document keeps is known again once loaded */
    bool legacy = false;
    for (int i = 0; i < t->n && !legacy; i++)
        legacy = st__any(t, (char)('0' + i));
    t->leading = true;
    t->seen = false;
    st_tables_pending_init(t->store, t->n); /* a store from before the count: recounted */
    if (legacy || !st__any(t, ST__PROV) || st_tables_settling(t->store)) t->full = true;
}

/* ---- the commit job ---- */
static void st__commit_work(uv_work_t *req)
{
    st_sched_worker(); /* a pool thread: its wake-ups never preempt the loop */
    st_tables_t *t = req->data;
    st_tier_background(true);
    for (int i = 0; i < t->n; i++) {
        st__table_t *tb = &t->t[i];
        st__jtable_t *j = &t->job[i];
        const st_table_def_t *d = st_table_def((size_t)i);
        j->rc = ST_OK;
        st_tfiles_intern(&j->prev, &j->prev_mans); /* O(files): here, not on the loop */
        if (!tb->meta.doc) j->rc = st_table_load(t->meta, d, &tb->meta, t->job_create);
        if (j->rc == ST_OK && j->want) {
            bool same = st_tview_merge(&j->view, &j->prev, &t->cmarks, &j->live, &j->gone);
            j->built = true;
            j->changed = !same || j->erase;
        } else {
            st_tfiles_sort(&j->view.fresh); /* for st__changed_sweep */
            st_tfiles_sort(&j->prev);
        }
        st_tcommit_in_t in = {&j->live,   &j->prev, &j->prev_mans, t->job_full ? NULL : t->croot,
                              t->keep_ms, j->erase, &t->writer,    t->cold};
        if (j->rc == ST_OK && j->changed)
            j->rc = st_table_commit_in(t->meta, d, &tb->meta, &in, &j->res);
        if (j->rc == ST_TABLES_WHOLE) { /* the next tick reads the whole set and commits it */
            st_warn("tables: %s: the changed owners' files cannot be committed alone; the next "
                    "commit reads every file",
                    d->ice.name);
            j->whole = true;
            j->rc = ST_EUNAVAIL;
        }
        if (j->rc == ST_OK && j->built) st__prov_plan(t, i, j);
        if (j->built) /* O(the files read): counted here, off the loop */
            j->bytes = st_tfiles_bytes(&j->view.fresh, &j->prev_mans) +
                       st_tfiles_bytes(&j->prev, j->res.mans_set ? &j->res.mans : &j->prev_mans) +
                       st_tfiles_bytes(&j->res.moved, &(st_tstrs_t){0}) +
                       j->live.cap * sizeof *j->live.v;
        if (j->rc != ST_OK && j->rc != ST_ENOTFOUND)
            st_warn("tables: %s: commit failed (%s); retried at the next tick", d->ice.name,
                    st_strerror(j->rc));
    }
    if (t->job_sweep) st__changed_sweep(t);
    st_tier_background(false);
}

/* The current snapshot of a loaded table, for the admin route. */
static void st__status(st__table_t *tb)
{
    const cJSON *doc = tb->meta.doc;
    tb->snap = st_tmeta_i64(doc, "current-snapshot-id", -1);
    tb->seq = st_tmeta_i64(doc, "last-sequence-number", 0);
    tb->committed_us = 0;
    tb->oldest_us = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(doc, "snapshots"))
    {
        int64_t at = st_tmeta_i64(s, "timestamp-ms", 0) * 1000;
        if (st_tmeta_i64(s, "snapshot-id", 0) == tb->snap) tb->committed_us = at;
        if (at > 0 && (!tb->oldest_us || at < tb->oldest_us)) tb->oldest_us = at;
    }
}

static void st__tables_free(st_tables_t *t)
{
    st_tables_build_drop(t); /* a build or writes cut off by the close */
    st_buf_free(&t->sweep);
    for (int i = 0; i < t->n; i++)
        cJSON_Delete(t->t[i].meta.doc);
    free(t->croot);
    free(t);
}

bool st_tables_job_end(st_tables_t *t, int i)
{
    st__jtable_t *j = &t->job[i];
    bool ok = j->built && j->rc == ST_OK; /* committed, or nothing to commit */
    if (ok) {
        if (j->erase) st__erasures_done(t, &j->marks, &j->view);
        st_tables_pending_checked(t->store, i); /* none dirty now: 0 */
    }
    return ok || !j->want;
}

static void st__commit_tick(uv_timer_t *h);
#define ST__SLICE_MS 20

/* The job's writes are done (slice.c): what the commit covered is seen. */
static void st__commit_end(st_tables_t *t)
{
    bool all = t->settle_all, wrote = t->settle_wrote, ok = t->job_view_ok;
    st_tables_build_drop(t);
    st_buf_free(&t->sweep);
    if (all) t->lag_since_us = 0;
    bool loaded = true;
    for (int i = 0; i < t->n; i++)
        loaded &= t->t[i].meta.doc != NULL;
    t->read = loaded;
    t->slicing = all && loaded && ok && t->job_more;
    if (t->slicing) /* the next slice at once (1 ms: never in this turn, libuv 1.44) */
        uv_timer_start(&t->timer, st__commit_tick, 1, t->interval_ms);
    else if (all && loaded && ok) {
        t->seen = true;
        t->seen_f = t->job_f;
        if (t->job_full && t->fails == t->job_fails) t->full = false;
    }
    if (wrote && t->on_commit) t->on_commit(t->on_commit_arg);
}

static void st__commit_done(uv_work_t *req, int status)
{
    (void)status;
    st_tables_t *t = req->data;
    t->busy = false;
    if (t->closing) {
        /* the timer's close callback may still be due (both can end in one loop turn): it
         * frees the module then, seeing the job back */
        if (t->timer_closed) st__tables_free(t);
        return;
    }
    t->settle_all = true;
    t->settle_wrote = false;
    for (int i = 0; i < t->n; i++) {
        st__jtable_t *j = &t->job[i];
        st__table_t *tb = &t->t[i];
        t->settle_wrote |= j->res.done;
        if (j->res.done) st_metric_add(t->commits, 1);
        if (j->whole) t->full = true;
        if (j->built) tb->bytes = j->bytes;
        if (tb->meta.doc) st__status(tb);
    }
    /* a commit's provenance written (or a whole view's records rewritten); when the merged set
     * is the table's now (committed, or the same as before), the dirty marks and erasures it
     * covered cleared: in slices */
    t->phase = ST__SETTLE;
    t->settle_stage = ST__SETTLE_START;
    if (st_tables_settle_step(t)) st__commit_end(t);
}

void st_tables_on_commit(st_tables_t *t, void (*fn)(void *arg), void *arg)
{
    if (!t) return;
    t->on_commit = fn;
    t->on_commit_arg = arg;
}

/* The view is built (slice.c): the worker's job, when there is something to commit. */
static void st__commit_queue(st_tables_t *t)
{
    int rc = t->build_rc;
    bool full = t->job_full;
    if (rc == ST_EPARKED && t->slicing) { /* the last slice's writes: durable in a moment */
        st_tables_build_drop(t);
        uv_timer_start(&t->timer, st__commit_tick, ST__SLICE_MS, t->interval_ms);
        return;
    }
    /* whose manifests are whose (shared tables): no writer record, no object, nothing to commit */
    uint64_t wait = 0;
    bool writer_ok = rc == ST_OK; /* else nothing is "seen": the record is no 'F' write to wake a
                                     tick */
    if (rc == ST_OK &&
        (st_tier_writer_get(t->store, &t->writer, &wait) != ST_OK || !t->writer.current))
        writer_ok = false;
    bool any = false, dirty = false;
    for (int i = 0; i < t->n; i++) {
        st__jtable_t *j = &t->job[i];
        bool may = full || j->view.parts.n || j->erase;
        j->want = may && writer_ok;
        any |= j->want || !t->t[i].meta.doc;
        /* a whole view that finds as many files as committed is likely the same (the worker
         * knows) */
        dirty |= j->want && (!full || j->erase || j->view.fresh.n != j->prev.n);
    }
    if (dirty && !t->lag_since_us) t->lag_since_us = st_now_us();
    if (!dirty && !full) t->lag_since_us = 0;
    if (!any || (rc != ST_OK && rc != ST_EPARKED)) {
        st_tables_build_drop(t);
        if (!any && rc == ST_OK && writer_ok) {
            t->seen = true;
            t->seen_f = t->job_f;
        }
        return;
    }
    t->job_more = t->n && t->job[0].view.more;
    t->job_view_ok = writer_ok;
    t->job_sweep = writer_ok && st_tier_manifest_writes(t->store) + t->erased_n == t->job_f;
    t->job_create = true;
    t->busy = true;
    t->phase = ST__WORK;
    t->work.data = t;
    if (uv_queue_work(t->loop, &t->work, st__commit_work, st__commit_done) != 0) {
        t->busy = false;
        st_tables_build_drop(t);
    }
}

static void st__commit_tick(uv_timer_t *h)
{
    st_tables_t *t = h->data;
    if (t->closing) return;
    if (t->phase == ST__BUILD) { /* the next slice of the view */
        if (st_tables_build_step(t)) st__commit_queue(t);
        return;
    }
    if (t->phase == ST__SETTLE) { /* the next slice of the job's writes */
        if (st_tables_settle_step(t)) st__commit_end(t);
        return;
    }
    if (t->phase != ST__IDLE) return; /* the worker's */
    /* a group's leader commits, as it flushes (followers commit nothing) */
    if (st_store_writable(t->store) == ST_ENOLEADER) {
        t->leading = false;
        return;
    }
    if (!t->leading) st__lead(t);
    uint64_t gen = st_tier_manifest_writes(t->store) + t->erased_n;
    if (t->seen && gen == t->seen_f) return;
    /* the dirty owners' files (or every file) and the marks, in slices: a write landing from
     * now on is after gen (the next tick sees it) */
    t->phase = ST__BUILD;
    t->job_f = gen;
    t->job_full = t->full;
    t->job_fails = t->fails;
    if (st_tables_build_step(t)) st__commit_queue(t);
}

int64_t st_tables_oldest_us(const st_tables_t *t)
{
    if (!t || !t->interval_ms) return 0; /* no commits at all: no snapshot to keep */
    if (!t->read) return -1;
    int64_t oldest = 0;
    for (int i = 0; i < t->n; i++)
        if (t->t[i].oldest_us && (!oldest || t->t[i].oldest_us < oldest))
            oldest = t->t[i].oldest_us;
    return oldest;
}

/* A batch rolled back: what the last view saw may be gone; the next one reads every file. */
static void st__tables_on_failed(st_store_listener_t *l, uint64_t first_id, int err)
{
    st_tables_t *t = (st_tables_t *)((char *)l - offsetof(st_tables_t, listener));
    (void)first_id, (void)err;
    t->fails++;
    t->full = true;
    t->seen = false;
}

static st_tables_t *st__live; /* the open module, for the lag gauge */

static double st__lag(void *arg)
{
    (void)arg;
    st_tables_t *t = st__live;
    return t && t->lag_since_us ? (double)(st_now_us() - t->lag_since_us) / 1e6 : 0;
}

static double st__bytes(void *arg)
{
    (void)arg;
    st_tables_t *t = st__live;
    size_t b = 0;
    for (int i = 0; t && i < t->n; i++)
        b += t->t[i].bytes;
    return (double)b;
}

int st_tables_open(st_tables_t **out, uv_loop_t *loop, st_store_t *store, st_objstore_t *cold,
                   st_objstore_t *meta, const st_config_t *cfg)
{
    int rc = st_store_claim(store, st__pfx, ST__PFX_LEN, "tables");
    if (rc != ST_OK) return rc;
    st_tables_t *t = st_calloc(1, sizeof *t);
    t->loop = loop;
    t->store = store;
    t->cold = cold;
    t->meta = meta;
    t->interval_ms = cfg->table_commit_interval * 1000; /* 0: no commits at all */
    t->keep_ms = (int64_t)cfg->table_keep * 1000;
    t->n = (int)st_tables_n();
    for (int i = 0; i < t->n; i++)
        t->t[i].snap = -1;
    if (cold) {
        st_buf_t root = {0};
        st_objstore_uri(cold, "", &root);
        st_buf_appendc(&root, 0);
        t->croot = st_buf_steal(&root, NULL);
    }
    t->commits = st_metrics_counter("strata_table_commits_total",
                                    "Snapshots committed to the Iceberg tables", "");
    t->slices = st_metrics_counter(
        "strata_table_commit_slices_total",
        "Loop turns the tables' commits worked in (slices of about 1 ms: the view of the changed "
        "owners before a commit's worker job, its writes to the hot store after)",
        "");
    t->visited = st_metrics_counter(
        "strata_table_view_files_total",
        "File records of the cold tier's manifests read on the loop by the tables' commit ticks",
        "");
    st_metrics_gauge_fn("strata_table_commit_lag_seconds",
                        "Age of the oldest change of the cold tier not in a committed snapshot", "",
                        st__lag, NULL);
    st_tables_pending_open();
    st_tables_pending_init(store, t->n); /* a new store's counts: 0 from its first write on */
    st_metrics_gauge_fn("strata_table_files_bytes",
                        "Heap the file sets of the Iceberg tables' last commit took (the changed "
                        "owners' files; the committed set is in the store, docs/memory.md)",
                        "", st__bytes, NULL);
    t->listener.on_failed = st__tables_on_failed;
    st_store_listen(store, &t->listener);
    uv_timer_init(loop, &t->timer);
    t->timer.data = t;
    t->tick = st__commit_tick;
    /* a slice's budget; tests force one owner or write a slice (STRATA_TEST_TABLES_SLICE_NS=0) */
    const char *sl = getenv("STRATA_TEST_TABLES_SLICE_NS");
    t->slice_ns = sl && *sl ? strtoull(sl, NULL, 10) : ST_TABLES_SLICE_NS;
    if (t->interval_ms) uv_timer_start(&t->timer, st__commit_tick, 200, t->interval_ms);
    st__live = t;
    *out = t;
    return ST_OK;
}

static void st__tables_timer_closed(uv_handle_t *h)
{
    st_tables_t *t = h->data;
    t->timer_closed = true;
    if (!t->busy) st__tables_free(t); /* a build or writes in slices stop here */
}

void st_tables_close(st_tables_t *t)
{
    if (!t) return;
    st__live = NULL;
    t->closing = true;
    st_store_unlisten(t->store, &t->listener);
    uv_close((uv_handle_t *)&t->timer, st__tables_timer_closed);
}

int st_tables_json(st_tables_t *t, st_buf_t *out)
{
    /* pending: each table's running count (look.c), O(1) a table */
    int64_t pending[ST_TABLES_MAX];
    st_tables_pending(t->store, t->n, pending);
    st_buf_append(out, "{\"tables\":[", 11);
    for (int i = 0; i < t->n; i++) {
        const st__table_t *tb = &t->t[i];
        st_buf_printf(out, "%s{\"table\":\"%s\",\"snapshot_id\":", i ? "," : "",
                      st_table_def((size_t)i)->ice.name);
        if (tb->snap < 0)
            st_buf_append(out, "null", 4);
        else
            st_buf_printf(out, "%lld", (long long)tb->snap);
        st_buf_printf(out, ",\"sequence_number\":%lld,\"committed_at\":", (long long)tb->seq);
        if (tb->committed_us)
            st_buf_printf(out, "%lld", (long long)tb->committed_us);
        else
            st_buf_append(out, "null", 4);
        st_buf_printf(out, ",\"pending\":%lld}", (long long)pending[i]);
    }
    st_buf_append(out, "]}", 2);
    return ST_OK;
}
