/* SPDX-License-Identifier: MIT */
/*
 * Which files each table holds now (internal.h): the loop's part of a commit reads only the
 * owners whose file records changed since the last commit (the tier's dirty marks,
 * strata/tier.h; ST_TABLES_VIEW_OWNERS of them a tick at most), or, on a store with provenance
 * from before it was keyed by owner and after a failed batch, every file record; the worker
 * merges that with those owners' committed files (their provenance records, tables.c) into the
 * new set of those owners (sorting, matching, comparing: none of it on the loop).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <uv.h>

void st_tview_free(st_tview_t *v)
{
    st_tfiles_free(&v->fresh);
    st_tstrs_free(&v->parts);
    st_buf_free(&v->marks);
    memset(v, 0, sizeof *v);
}

typedef struct {
    st_objstore_t *cold;
    st_tview_t *v; /* [ST_TABLES_MAX] */
    int n;
    uint64_t visited;
    st_buf_t idle; /* marks of owners that are no table's (size_t ol, owner, be64 gen; each) */
} st__walk_t;

static void st__mark_put(st_buf_t *b, const char *o, size_t ol, uint64_t gen)
{
    uint8_t g[8];
    st_be64_put(g, gen);
    st_buf_append(b, &ol, sizeof ol);
    st_buf_append(b, o, ol);
    st_buf_append(b, g, sizeof g);
}

/* The table of owner o (-1: none's) and, for a table's, the length of its tag's prefix. */
static int st__table_of(const char *o, size_t ol, size_t *skip)
{
    char tag = st_tier_owner_tag(o, ol);
    *skip = tag ? 2 : 0; /* "~r" room, "~b" event */
    return st_table_of_tag(tag);
}

static void st__view_push(st__walk_t *w, int ti, const char *o, size_t ol, size_t skip,
                          uint64_t seq, const st_tier_file_t *f, const char *k, size_t kl,
                          const uint8_t *stats, size_t sl)
{
    st_buf_t uri = {0};
    char *okey = st_strndup(k, kl);
    st_objstore_uri(w->cold, okey, &uri);
    st_buf_appendc(&uri, 0);
    st_tfile_t tf = {.key = okey,
                     .uri = st_buf_steal(&uri, NULL),
                     .part = st_strndup(o + skip, ol - skip),
                     .rows = f->rows,
                     .size = (int64_t)f->size,
                     .has_fseq = true,
                     .fseq = seq};
    if (sl) { /* its column metrics come from these, not from its footer (metrics.c) */
        tf.stats = st_malloc(sl);
        memcpy(tf.stats, stats, sl);
        tf.stats_len = sl;
    }
    st_vec_push(&w->v[ti].fresh, tf);
    w->visited++;
}

/* One file record of a whole walk (st_tier_each_file). */
static int st__walk_file(void *arg, const char *o, size_t ol, uint64_t seq, const st_tier_file_t *f,
                         const char *k, size_t kl, const uint8_t *stats, size_t sl)
{
    st__walk_t *w = arg;
    size_t skip;
    int ti = st__table_of(o, ol, &skip);
    if (ti >= 0 && ti < w->n) st__view_push(w, ti, o, ol, skip, seq, f, k, kl, stats, sl);
    return 0;
}

typedef struct {
    st_buf_t marks;
    size_t n, max; /* max 0: no bound */
} st__marks_t;

/* One dirty mark, kept for after the walk (no read inside a scan); 1 stops it at max. */
static int st__walk_mark(void *arg, const char *o, size_t ol, uint64_t gen)
{
    st__marks_t *m = arg;
    if (m->max && m->n == m->max) return 1;
    st__mark_put(&m->marks, o, ol, gen);
    m->n++;
    return 0;
}

/* The dirty marks in marks (st__mark_put's), one by one: *o, *ol, *gen; false past the end. */
static bool st__mark_next(const st_buf_t *marks, size_t *off, const char **o, size_t *ol,
                          uint64_t *gen)
{
    if (*off + sizeof *ol > marks->len) return false;
    memcpy(ol, marks->data + *off, sizeof *ol);
    *o = marks->data + *off + sizeof *ol;
    *gen = st_be64_get((const uint8_t *)*o + *ol);
    *off += sizeof *ol + *ol + 8;
    return true;
}

void st_tbuild_free(st_tbuild_t *b)
{
    st_buf_free(&b->marks);
    memset(b, 0, sizeof *b);
}

/* ST_TABLES_VIEW_OWNERS; tests take fewer (STRATA_TEST_TABLES_VIEW_OWNERS: an erasure's owner
 * past a view's owners, tables-expire) */
static size_t st__view_owners(void)
{
    static size_t n;
    if (!n) {
        const char *e = getenv("STRATA_TEST_TABLES_VIEW_OWNERS");
        long v = e ? strtol(e, NULL, 10) : 0;
        n = v > 0 && v < ST_TABLES_VIEW_OWNERS ? (size_t)v : ST_TABLES_VIEW_OWNERS;
    }
    return n;
}

bool st_tview_has_owner(const st_tview_t *v, const char *o, size_t ol)
{
    if (v->full) return true;
    const char *mo;
    size_t ml, off = 0;
    uint64_t gen;
    while (st__mark_next(&v->marks, &off, &mo, &ml, &gen))
        if (ml == ol && memcmp(mo, o, ol) == 0) return true;
    return false;
}

int st_tables_view_begin(st_store_t *s, bool full, st_tview_t *v, int n, bool bounded,
                         st_tbuild_t *b)
{
    st__marks_t mk = {.max = bounded && !full ? st__view_owners() : 0};
    memset(v, 0, sizeof *v * (size_t)n);
    memset(b, 0, sizeof *b);
    b->full = full;
    for (int i = 0; i < n; i++)
        v[i].full = full;
    int rc = st_tier_each_dirty(s, st__walk_mark, &mk, &b->wait);
    b->marks = mk.marks;
    if (rc == 1) { /* bounded: the rest waits for the next tick */
        rc = ST_OK;
        for (int i = 0; i < n; i++)
            v[i].more = true;
    }
    return rc;
}

/* An owner of a table a whole walk's step read: its files are v[ti].fresh[from..) up to the
 * next owner of that table's (the walk pushes them in order), its name at name[off..off+ol). */
typedef struct {
    int ti;
    size_t from, off, ol;
} st__wowner_t;

typedef struct {
    st__walk_t w;
    st_tbuild_t *b;
    uint64_t deadline;
    size_t seen; /* records this step */
    ST_VEC(st__wowner_t) owners;
    st_buf_t names;
} st__fwalk_t;

/* The files of one owner (ascending numbers) a stats record of that owner may belong to. */
typedef struct {
    st_tfile_t *v;
    size_t n;
} st__fstats_t;

/* One stats record of an owner (strata/tier.h 'I'): its file's, if that names the same object
 * (an orphan an older binary left names another: ignored). */
static int st__walk_stats(void *arg, uint64_t seq, const char *key, size_t kl, const uint8_t *stats,
                          size_t sl)
{
    st__fstats_t *x = arg;
    size_t lo = 0, hi = x->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (x->v[mid].fseq < seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    st_tfile_t *t = lo < x->n && x->v[lo].fseq == seq ? &x->v[lo] : NULL;
    if (!t || t->stats || strlen(t->key) != kl || memcmp(t->key, key, kl) != 0) return 0;
    t->stats = st_malloc(sl);
    memcpy(t->stats, stats, sl);
    t->stats_len = sl;
    return 0;
}

/* The stats of the files a whole walk's step read, from their own records: one scan an owner,
 * after the walk's (no read inside a scan). Owners taken last first: each one's files end where
 * the next owner of its table begins. */
static int st__walk_step_stats(st_store_t *s, st__fwalk_t *x, uint64_t *wait)
{
    size_t end[ST_TABLES_MAX];
    int rc = ST_OK;
    for (int i = 0; i < x->w.n && i < ST_TABLES_MAX; i++)
        end[i] = x->w.v[i].fresh.n;
    for (size_t i = x->owners.n; rc == ST_OK && i-- > 0;) {
        const st__wowner_t *ow = &x->owners.v[i];
        st__fstats_t fs = {x->w.v[ow->ti].fresh.v + ow->from, end[ow->ti] - ow->from};
        end[ow->ti] = ow->from;
        if (fs.n)
            rc = st_tier_each_stats(s, x->names.data + ow->off, ow->ol, st__walk_stats, &fs, wait);
    }
    return rc;
}

/* One file record of a whole walk in slices: past the deadline, the walk stops as an owner
 * begins (the next step resumes at it), so an owner's records are read in one turn. */
static int st__walk_file_sliced(void *arg, const char *o, size_t ol, uint64_t seq,
                                const st_tier_file_t *f, const char *k, size_t kl,
                                const uint8_t *stats, size_t sl)
{
    st__fwalk_t *x = arg;
    st_tbuild_t *b = x->b;
    if (ol > sizeof b->from) return 0; /* no owner of the tier's (ST_TIER_OWNER_MAX) */
    if (b->fl != ol || memcmp(b->from, o, ol) != 0) {
        bool stop = x->seen && uv_hrtime() >= x->deadline;
        memcpy(b->from, o, ol);
        b->fl = ol;
        if (stop) return 1;
    }
    x->seen++;
    size_t skip;
    int ti = st__table_of(o, ol, &skip);
    if (ti >= 0 && ti < x->w.n &&
        (!x->owners.n || x->owners.v[x->owners.n - 1].ol != ol ||
         memcmp(x->names.data + x->owners.v[x->owners.n - 1].off, o, ol) != 0)) {
        st__wowner_t ow = {ti, x->w.v[ti].fresh.n, x->names.len, ol};
        st_buf_append(&x->names, o, ol);
        st_vec_push(&x->owners, ow);
    }
    return st__walk_file(&x->w, o, ol, seq, f, k, kl, stats, sl);
}

/* A whole view's walk from where the last step stopped: 1 when it stopped at the deadline. */
static int st__walk_step(st_store_t *s, st_objstore_t *cold, st_tbuild_t *b, st_tview_t *v, int n,
                         uint64_t deadline)
{
    st__fwalk_t x = {.w = {.cold = cold, .v = v, .n = n}, .b = b, .deadline = deadline};
    int rc = st_tier_each_file_from(s, b->from, b->fl, st__walk_file_sliced, &x, &b->wait);
    int src = st__walk_step_stats(s, &x, &b->wait);
    if (rc >= 0 && src != ST_OK) rc = src;
    st_vec_free(&x.owners);
    st_buf_free(&x.names);
    b->visited += x.w.visited;
    if (rc == ST_OK) b->walked = true;
    return rc;
}

int st_tables_view_step(st_store_t *s, st_objstore_t *cold, st_tbuild_t *b, st_tview_t *v, int n,
                        bool clear_idle, uint64_t deadline, st_tview_owner_fn fn, void *arg)
{
    st__walk_t w = {.cold = cold, .v = v, .n = n};
    const char *o;
    size_t ol, skip;
    uint64_t gen;
    int rc = ST_OK;
    if (b->full && !b->walked) {
        rc = st__walk_step(s, cold, b, v, n, deadline);
        if (rc != ST_OK || uv_hrtime() >= deadline) return rc == ST_OK ? 1 : rc;
    }
    /* one owner at least a step, whatever the deadline: a step always goes on */
    for (bool first = true; rc == ST_OK && (first || uv_hrtime() < deadline); first = false) {
        if (!st__mark_next(&b->marks, &b->off, &o, &ol, &gen)) {
            b->visited += w.visited;
            return ST_OK;
        }
        int ti = st__table_of(o, ol, &skip);
        if (ti < 0 || ti >= n) { /* no table's: nothing to commit (a look writes nothing) */
            if (clear_idle) st_tier_dirty_clear(s, o, ol, gen, &b->wait);
            continue;
        }
        st__mark_put(&v[ti].marks, o, ol, gen);
        if (v[ti].full) continue; /* the whole walk read the files */
        char *part = st_strndup(o + skip, ol - skip);
        st_vec_push(&v[ti].parts, part);
        /* the owner's records in one turn: a write between two steps changes a whole owner, in
         * the view or not (its mark, read before, then differs: it stays for the next tick) */
        st_tier_manifest_t m;
        rc = st_tier_manifest(s, o, ol, false, &m, &b->wait);
        if (rc == ST_OK) rc = st_tier_manifest_stats(s, o, ol, &m, &b->wait); /* colstats.c */
        for (size_t i = 0; rc == ST_OK && i < m.n; i++)
            st__view_push(&w, ti, o, ol, skip, m.v[i].seq, &m.v[i].file, m.v[i].key,
                          strlen(m.v[i].key), m.v[i].stats, m.v[i].stats_len);
        st_tier_manifest_free(&m);
        if (rc == ST_OK && fn) fn(arg, ti, part);
    }
    b->visited += w.visited;
    return rc == ST_OK ? 1 : rc;
}

int st_tables_view(st_store_t *s, st_objstore_t *cold, bool full, st_tview_t *v, int n,
                   uint64_t *visited)
{
    /* a tick's delta takes ST_TABLES_VIEW_OWNERS owners at most: its loop turn stays short */
    st_tbuild_t b;
    int rc = st_tables_view_begin(s, full, v, n, visited != NULL, &b);
    while (rc == ST_OK && (rc = st_tables_view_step(s, cold, &b, v, n, visited != NULL, UINT64_MAX,
                                                    NULL, NULL)) == 1)
        ;
    if (visited) *visited += b.visited;
    if (rc == ST_OK && b.wait > st_store_durable_id(s)) rc = ST_EPARKED;
    st_tbuild_free(&b);
    return rc;
}

void st_tview_clear(st_store_t *s, const st_tview_t *v)
{
    const char *o;
    size_t ol, off = 0;
    uint64_t gen, wait = 0;
    while (st__mark_next(&v->marks, &off, &o, &ol, &gen))
        st_tier_dirty_clear(s, o, ol, gen, &wait);
}

bool st_tview_clear_step(st_store_t *s, const st_tview_t *v, size_t *off, uint64_t deadline)
{
    const char *o;
    size_t ol;
    uint64_t gen, wait = 0;
    for (bool first = true; first || uv_hrtime() < deadline; first = false) {
        if (!st__mark_next(&v->marks, off, &o, &ol, &gen)) return true;
        st_tier_dirty_clear(s, o, ol, gen, &wait);
    }
    return false;
}

/* ---- the worker's merge ---- */
static bool st__parts_has(const st_tstrs_t *v, const char *s)
{
    return v->n && bsearch(&s, v->v, v->n, sizeof *v->v, st_tstrs_cmp) != NULL;
}

bool st_tview_merge(st_tview_t *v, st_tfiles_t *prev, const st_tstrs_t *cmarks, st_tfiles_t *live,
                    st_tgone_t *gone)
{
    st_tfiles_sort(&v->fresh);
    st_tfiles_sort(prev);
    const st_tfiles_t *c = prev, *f = &v->fresh;
    size_t i = 0, j = 0, added = 0, removed = 0;
    memset(live, 0, sizeof *live);
    memset(gone, 0, sizeof *gone);
    st_vec_reserve(live, f->n);
    while (i < c->n || j < f->n) {
        int cmp = i < c->n && j < f->n ? strcmp(c->v[i].key, f->v[j].key) : i < c->n ? -1 : 1;
        if (cmp < 0) { /* committed, its owner read, not in the view: gone */
            st_vec_push(gone, i++);
            removed++;
            continue;
        }
        st_tfile_t *nf = &f->v[j++];
        nf->snap = nf->seq = 0;
        nf->man = 0;
        nf->changed = false;
        if (cmp == 0) { /* the view's copy (uri, partition) with the committed provenance */
            nf->snap = c->v[i].snap;
            nf->seq = c->v[i].seq;
            nf->man = c->v[i].man;
            i++;
        } else {
            nf->changed = st__parts_has(cmarks, nf->key);
            added++;
        }
        live->v[live->n++] = *nf; /* borrowed */
    }
    return added == 0 && removed == 0;
}
