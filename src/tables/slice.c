/* SPDX-License-Identifier: MIT */
/*
 * The loop's part of a tables' commit, in slices (issue 48; SPEC §7: the loop never waits, its
 * longest stall stays under 5 ms): before the worker's job, the view of the dirty owners' files
 * with their committed files (provenance records); after it, the job's writes to the hot store.
 * Each slice works for t->slice_ns (about a millisecond) and the commit timer calls again a
 * millisecond later (libuv 1.44 would run a timer started with 0 inside its callback again in the
 * same turn), so a commit of ST_TABLES_VIEW_OWNERS owners (one snapshot) is many short turns.
 *
 * What a view read across turns is, with writes landing between slices: every mark it works from
 * (the dirty owners', the erasures' 'x') is read in the first slice, before any owner's records;
 * an owner's file and provenance records are read in one turn. A write after the marks were read
 * (a flush finishing, a compaction, an erasure) changes the owners it touches whole: either the
 * view read them before it (not in this snapshot) or after (in it), and either way it left a
 * newer dirty mark, which the commit's clear keeps, so the next tick reads those owners again;
 * an erasure's 'x' marks written meanwhile are not this commit's (its marks go only with a commit
 * that read every owner after them). The generation the tick compares (t->job_f) is taken before
 * the first slice: a write during the build is never taken for seen. The 'c' marks are read in the
 * last slice (a new object's mark is in the batch that adds it, so every object the view holds has
 * its mark by then); their sweep, which deletes the marks of objects the view does not hold, runs
 * only when no file record was written during the build (else an object added after its owner was
 * read would lose its mark).
 *
 * The writes after the job: each table's provenance records a slice at a time, with the pending
 * count's change for the new records of the slice in the same turn (one batch), then its dirty
 * marks' clears (after the records: a crash between leaves the owners dirty, read again). A
 * marker ("\0tables" 's') is put in the first slice and deleted in the last: a process that dies
 * between (some records of a committed snapshot written, others not) finds it as it starts to lead
 * and takes a whole view (tables.c, st__lead). A failed batch forces a whole view (tables.c); a
 * build in progress is dropped then (what it read may be gone), and when this member stops leading.
 */
#include "state.h"
#include "strata/metrics.h"

#include <stdlib.h>
#include <string.h>

#define ST__SETTLING 's'
/* The slices a built view waits for what it read to be durable before it is given up (parked) */
#define ST__PARKS 200

/* A slice ends, the next one a millisecond later. */
static void st__slice_later(st_tables_t *t)
{
    uv_timer_start(&t->timer, t->tick, 1, t->interval_ms);
}

static int st__changed_key(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    (void)val, (void)vlen;
    st_vec_push((st_tstrs_t *)arg,
                st_strndup((const char *)key + ST__PFX_LEN + 1, klen - ST__PFX_LEN - 1));
    return 0;
}

/* The 'c' marks' object keys into t->cmarks (sorted: the store's order). A mark is written in the
 * batch that adds its object, and goes with the commit that has it (st__prov_plan): they are the
 * objects changed since the last commit. The last slice of the view. */
static void st__changed_marks(st_tables_t *t)
{
    uint8_t pre[ST__PFX_LEN + 1];
    memcpy(pre, st__pfx, ST__PFX_LEN);
    pre[ST__PFX_LEN] = ST__CHANGED;
    st_store_scan(t->store, pre, sizeof pre, st__changed_key, &t->cmarks, &t->build.wait);
}

static int st__erased_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st__jtable_t *job = arg;
    int ti = vlen >= 1 ? *(const char *)val - '0' : -1; /* the table's digit, the owner */
    if (ti < 0 || ti >= (int)st_tables_n()) return 0;
    job[ti].erase = true;
    st_buf_append(&job[ti].marks, &klen, sizeof klen);
    st_buf_append(&job[ti].marks, key, klen);
    return 0;
}

/* The erasures' marks into the job, per table, in the first slice (a mark is written in the batch
 * that takes its object out of the manifest: every owner is read after). */
static int st__erasures(st_tables_t *t)
{
    uint8_t pre[ST__PFX_LEN + 1];
    memcpy(pre, st__pfx, ST__PFX_LEN);
    pre[ST__PFX_LEN] = ST__ERASED;
    int rc = st_store_scan(t->store, pre, sizeof pre, st__erased_one, t->job, &t->build.wait);
    return rc > 0 ? ST_OK : rc;
}

/* One provenance record into its table's job prev (the manifest's name waits in uri until
 * st_tfiles_intern, on the worker): "\0tables" 'p' index partition '\0' key, or "\0tables" index
 * key (no partition). Others (marks) are passed over. */
static int st__load_prov(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_tables_t *t = arg;
    const uint8_t *k = key, *v = val, *end = k + klen, *at = k + ST__PFX_LEN;
    bool part = klen > ST__PFX_LEN + 2 && *at == ST__PROV;
    int ti = klen > ST__PFX_LEN + 1 ? at[part] - '0' : -1;
    if (ti < 0 || ti >= t->n || vlen < 32) return 0;
    at += 1 + part;
    const uint8_t *nul = part ? memchr(at, 0, (size_t)(end - at)) : NULL;
    if (part && !nul) return 0;
    const uint8_t *kk = part ? nul + 1 : at;
    st_tfile_t f = {.key = st_strndup((const char *)kk, (size_t)(end - kk)),
                    .part = part ? st_strndup((const char *)at, (size_t)(nul - at)) : NULL,
                    .uri = vlen > 32 ? st_strndup((const char *)v + 32, vlen - 32) : NULL,
                    .snap = (int64_t)st_be64_get(v),
                    .seq = (int64_t)st_be64_get(v + 8),
                    .rows = (int64_t)st_be64_get(v + 16),
                    .size = (int64_t)st_be64_get(v + 24)};
    st_vec_push(&t->job[ti].prev, f);
    return 0;
}

/* The committed files of one owner the view read (its partition's provenance records), in the
 * turn that read its file records: O(its files). */
static void st__owner_prevs(void *arg, int ti, const char *part)
{
    st_tables_t *t = arg;
    uint8_t k[ST_KEY_MAX + 1];
    size_t pl = st_tables_prov_key(k, ti, part, NULL);
    if (pl) st_store_scan(t->store, k, pl, st__load_prov, t, &t->build.wait);
}

typedef struct {
    st_tables_t *t;
    uint64_t deadline;
    size_t n;
} st__pwalk_t;

/* One provenance record of a whole view's walk in slices; past the deadline (looked at every 64
 * records) it stops after this one (t->pat: the least key after it). */
static int st__prev_page(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st__pwalk_t *x = arg;
    st__load_prov(x->t, key, klen, val, vlen);
    if (++x->n % 64 || uv_hrtime() < x->deadline || klen >= sizeof x->t->pat) return 0;
    memcpy(x->t->pat, key, klen);
    x->t->pat[klen] = 0;
    x->t->patl = klen + 1;
    return 1;
}

/* Every provenance record (a whole view's committed set), walked from where the last slice
 * stopped: 1 when it stopped at the deadline. Only a commit writes them (slice.c, after the
 * build): a walk across turns reads each once, as it is. */
static int st__prevs_step(st_tables_t *t, uint64_t deadline)
{
    st__pwalk_t x = {t, deadline, 0};
    int rc = st_store_scan_from(t->store, st__pfx, ST__PFX_LEN, t->patl ? t->pat : NULL, t->patl,
                                st__prev_page, &x, &t->build.wait);
    if (rc == ST_OK) t->provs_done = true;
    return rc;
}

void st_tables_build_drop(st_tables_t *t)
{
    for (int i = 0; i < t->n; i++) {
        st_tview_free(&t->views[i]);
        st_tables_jtable_free(&t->job[i]);
    }
    st_tbuild_free(&t->build);
    st_tstrs_free(&t->cmarks);
    t->build_started = false;
    t->provs_done = false;
    t->patl = 0;
    t->phase = ST__IDLE;
}

int st_tables_build_step(st_tables_t *t)
{
    uint64_t deadline = uv_hrtime() + t->slice_ns;
    st_metric_add(t->slices, 1);
    bool lost = st_store_writable(t->store) == ST_ENOLEADER;
    if (lost || t->fails != t->job_fails) { /* again from the start at the next tick */
        if (lost) t->leading = false;
        st_tables_build_drop(t);
        return 0;
    }
    int rc;
    if (!t->build_started) { /* the marks first, in one turn */
        t->build_started = true;
        t->parks = 0;
        rc = st_tables_view_begin(t->store, t->job_full, t->views, t->n, true, &t->build);
        if (rc == ST_OK) rc = st__erasures(t);
        t->build_rc = rc;
    }
    rc = t->build_rc;
    if (rc == ST_OK)
        rc = st_tables_view_step(t->store, t->cold, &t->build, t->views, t->n, true, deadline,
                                 t->job_full ? NULL : st__owner_prevs, t);
    if (rc == ST_OK && t->job_full && !t->provs_done) rc = st__prevs_step(t, deadline);
    /* what was read is durable in a moment (a flush's batch of this turn): a slice later, not a
     * whole build again (a batch that fails meanwhile drops the build, above) */
    if (rc == ST_OK && t->build.wait > st_store_durable_id(t->store) && t->parks++ < ST__PARKS)
        rc = 1;
    if (rc == 1) {
        st__slice_later(t);
        return 0;
    }
    for (int i = 0; i < t->n; i++) {
        t->job[i].view = t->views[i];
        memset(&t->views[i], 0, sizeof t->views[i]);
    }
    st_metric_add(t->visited, t->build.visited);
    st__changed_marks(t);
    if (rc == ST_OK && t->build.wait > st_store_durable_id(t->store)) rc = ST_EPARKED;
    t->build_rc = rc;
    st_tbuild_free(&t->build);
    t->build_started = t->provs_done = false;
    t->patl = 0;
    return 1;
}

/* The writes staged in b (st__prov_plan's; deletions only: st__changed_sweep's) from *off on
 * until the deadline (one at least); true once every one is done. Table ti's new records ('n')
 * take their objects off its pending count in the same turn (ti < 0: none). */
static bool st__prov_apply(st_tables_t *t, int ti, const st_buf_t *b, size_t *off,
                           uint64_t deadline)
{
    uint64_t wait = 0;
    bool unchanged = st_tier_manifest_writes(t->store) + t->erased_n == t->job_f;
    int64_t done = 0;
    bool first = true;
    for (; *off < b->len && (first || uv_hrtime() < deadline); first = false) {
        char op = ti < 0 ? 'd' : b->data[(*off)++];
        size_t kl, vl;
        memcpy(&kl, b->data + *off, sizeof kl);
        const char *k = b->data + *off + sizeof kl;
        *off += sizeof kl + kl;
        if (op == 'd') {
            st_store_del(t->store, k, kl, &wait);
            continue;
        }
        memcpy(&vl, b->data + *off, sizeof vl);
        st_store_put(t->store, k, kl, b->data + *off + sizeof vl, vl, &wait);
        *off += sizeof vl + vl;
        if (op != 'n') continue;
        bool known = b->data[(*off)++];
        uint64_t fseq;
        memcpy(&fseq, b->data + *off, sizeof fseq);
        *off += sizeof fseq;
        done += st_tables_pending_there(t->store, ti, (const uint8_t *)k, kl, unchanged,
                                        known ? &fseq : NULL);
    }
    if (done) st_tables_pending_add(t->store, ti, -done); /* the records' batch */
    return *off >= b->len;
}

int st_tables_settle_step(st_tables_t *t)
{
    uint64_t deadline = uv_hrtime() + t->slice_ns, wait = 0;
    st_metric_add(t->slices, 1);
    uint8_t mk[ST__PFX_LEN + 1];
    memcpy(mk, st__pfx, ST__PFX_LEN);
    mk[ST__PFX_LEN] = ST__SETTLING;
    if (t->settle_stage == ST__SETTLE_START) {
        st_store_put(t->store, mk, sizeof mk, "", 0, &wait);
        t->settle_stage = ST__SETTLE_PROV;
        t->settle_ti = 0;
        t->settle_off = 0;
    }
    while (t->settle_stage != ST__SETTLE_SWEEP) {
        if (t->settle_ti == t->n) {
            t->settle_stage = ST__SETTLE_SWEEP;
            t->settle_off = 0;
            break;
        }
        st__jtable_t *j = &t->job[t->settle_ti];
        bool ok = j->built && j->rc == ST_OK; /* committed, or nothing to commit */
        bool done = t->settle_stage == ST__SETTLE_PROV
                        ? st__prov_apply(t, t->settle_ti, &j->prov, &t->settle_off, deadline)
                        : !ok || st_tview_clear_step(t->store, &j->view, &t->settle_off, deadline);
        if (!done) {
            st__slice_later(t);
            return 0;
        }
        t->settle_off = 0;
        if (t->settle_stage == ST__SETTLE_PROV) {
            t->settle_stage = ST__SETTLE_CLEAR;
            continue;
        }
        t->settle_all &= st_tables_job_end(t, t->settle_ti);
        t->settle_ti++;
        t->settle_stage = ST__SETTLE_PROV;
        if (uv_hrtime() >= deadline) {
            st__slice_later(t);
            return 0;
        }
    }
    if (t->job_sweep && !st__prov_apply(t, -1, &t->sweep, &t->settle_off, deadline)) {
        st__slice_later(t);
        return 0;
    }
    st_store_del(t->store, mk, sizeof mk, &wait);
    t->settle_stage = ST__SETTLE_START;
    return 1;
}

bool st_tables_settling(st_store_t *s)
{
    uint8_t mk[ST__PFX_LEN + 1];
    const void *v;
    size_t vl;
    uint64_t wait = 0;
    memcpy(mk, st__pfx, ST__PFX_LEN);
    mk[ST__PFX_LEN] = ST__SETTLING;
    return st_store_get(s, mk, sizeof mk, &v, &vl, &wait) == ST_OK;
}
