/* SPDX-License-Identifier: MIT */
/*
 * The cold cache: how the loop reads cold objects without ever waiting for them (SPEC §7).
 *
 * Design choice — the worker pool, not libcurl's multi interface on the loop. A cold read is
 * fetch *then* decode (zstd, Parquet pages, a sortedness check): the decode must leave the loop
 * too, so a multi-socket integration would still need a worker hop for every row group, and
 * `file://` would need a third path. On the pool one job does the whole step (ranged GET or
 * pread, then parse or decode) with the same code for both backends, the blocking objstore
 * calls stay as they are (and as the flush workers already use them), and keep-alive comes from
 * the objstore's pool of reusable curl handles (one connection per handle, reused by whichever
 * worker takes it). The cost is a thread held per request in flight; main sizes the pool
 * (UV_THREADPOOL_SIZE) for that.
 *
 * Entries go through wanted (a lookup missed; on the want list) → loading (a job is out) →
 * ready or failed. Readers never see a half-made entry: jobs fill private fields, and the loop
 * publishes them in the job's completion. A wait pins every entry it asked for, so the re-run
 * it triggers is guaranteed to find them; failed entries are forgotten once unpinned, so a
 * later read tries the object again.
 */
#include "strata/idle.h"
#include "strata/cold.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ST__TAIL_GUESS    (64u << 10) /* footer fetch: one ranged GET of the tail usually holds it */
#define ST__PREFETCH_JOBS 4           /* a prefetch starts fetches only while fewer are out */
#define ST__HEAP_EXTRA    16 /* what malloc adds to each block (glibc: a header, rounding) */
/* A footer a reader of rows asks for (st_coldcache_view_footer_rows) whose job read the whole
 * object (no larger than this) has its row groups decoded in the same job (issue 48): a cooled
 * user's object is a few KiB, and a read of it then waits for one job, not for the footer's and
 * then for the groups' (two pool hops, two re-runs of the read, two opens of the object). Larger
 * objects' groups are fetched one by one, as a read asks for them: their bytes would cost the
 * budget more than a hop costs the read. Readers of footers alone (the marks' backfill, recounts)
 * ask with st_coldcache_view_footer and get no groups: they would fill the budget for nothing. */
#define ST__WHOLE_MAX (32u << 10)

/* any kind's objects through its schema: footers (st_pq_file_t, and a view's form of it), row
 * groups (st_pq_table_t, or a view's form of it) */
enum { ST__PQFILE = 'F', ST__TABLE = 'T', ST__VGROUP = 'V' };
enum { ST__WANTED, ST__LOADING, ST__READY, ST__FAILED };

/* A row group a footer's job decoded with it (ST__WHOLE_MAX): published as its own entry. */
typedef struct {
    size_t gi;
    void *gview;  /* the view's form (owned until published) */
    size_t bytes; /* what it holds, for the budget */
} st__pregroup_t;

typedef struct st_centry st_centry_t;
struct st_centry {
    st_map_node_t node; /* key: kind, object key, then '#' and the group's index for groups */
    st_list_t lru;      /* in the cache's LRU (both kinds): ready entries only */
    st_coldcache_t *cc;
    char kind;
    int state;
    char *key; /* map key (owned) */
    char *obj; /* object key (owned) */
    uint64_t size;
    size_t gi, nleaves;
    unsigned pins;
    bool wanted;
    ST_VEC(st_coldwait_t *) waiters; /* waits to tell when loaded */
    /* set on the loop while wanted (before a job can start), read by the job */
    const st_pq_schema_t *schema; /* every entry's */
    const st_coldview_t *view;    /* ST__VGROUP's; a footer's once fview is made, or from when a
                                     reader of rows wanted it (its job decodes the groups too) */
    /* results: written by the job, read by the loop only after it came back */
    int rc;
    st_pq_file_t file;
    void *fview;         /* ST__PQFILE: the view's form of file (made on the loop) */
    st_pq_rowgroup_t rg; /* ST__TABLE, ST__VGROUP: where its bytes are (chunks owned) */
    st_pq_table_t table;
    void *gview; /* ST__VGROUP: the view's form of the row group */
    /* ST__PQFILE: the groups its job decoded too (view set while wanted, by
     * st_coldcache_view_footer_rows), published when it is back */
    ST_VEC(st__pregroup_t) pre;
    size_t bytes; /* counted against the budget: the entry's whole heap once ready (the job
                     sets what it decoded; the loop adds the rest when it publishes) */
    uv_work_t req;
};

struct st_coldwait {
    st_coldcache_t *cc;
    size_t outstanding;         /* entries still loading */
    ST_VEC(st_centry_t *) held; /* pinned */
    st_coldwait_fn done;
    void *arg;
    bool cancelled;
};

/* Footers or row groups: a kind's ready entries, their bytes, and the gauges that show them. */
typedef struct {
    size_t n;
    uint64_t bytes;
    st_metric_t *m_n, *m_bytes;
} st_part_t;

struct st_coldcache {
    uv_loop_t *loop;
    st_objstore_t *obj;
    st_map_t entries;
    st_list_t lru;      /* ready entries of both kinds by lru, least recently used first */
    st_part_t parts[2]; /* [0] footers, [1] row groups */
    uint64_t budget;    /* for both parts together */
    ST_VEC(st_centry_t *) want;
    size_t jobs; /* in flight, fetches and deletes */
    bool closing;
    st_metric_t *m_groups, *m_fetch_ok, *m_fetch_err, *m_inflight;
    /* the last object found missing (owned; NULL: none), when that was last seen and logged:
     * /healthz names it, and a reader retrying it logs once a minute, not at every retry */
    char *missing;
    uint64_t missing_seen_ms, missing_logged_ms;
};

void st_coldcache_open(st_coldcache_t **out, uv_loop_t *loop, const st_coldcache_opts_t *o)
{
    st_coldcache_t *cc = st_calloc(1, sizeof *cc);
    cc->loop = loop;
    cc->obj = o->obj;
    cc->budget = o->budget;
    cc->m_groups = o->m_groups;
    st_map_init(&cc->entries);
    st_list_init(&cc->lru);
    static const char *const part[2] = {"part=\"footers\"", "part=\"row_groups\""};
    for (int i = 0; i < 2; i++) {
        cc->parts[i].m_bytes = st_metrics_gauge(
            "strata_cold_cache_bytes",
            "Heap held by the cold cache's parsed footers and decoded row groups (--cold-cache "
            "bounds their sum, less what reads in progress pin)",
            part[i]);
        cc->parts[i].m_n =
            st_metrics_gauge("strata_cold_cache_entries",
                             "Parsed footers and decoded row groups in the cold cache", part[i]);
    }
    st_metric_set(st_metrics_gauge("strata_cold_cache_capacity_bytes",
                                   "The cold cache's byte budget (--cold-cache)", ""),
                  (double)cc->budget);
    cc->m_fetch_ok =
        st_metrics_counter("strata_cold_fetches_total",
                           "Cold footers and row groups fetched off the loop", "result=\"ok\"");
    cc->m_fetch_err =
        st_metrics_counter("strata_cold_fetches_total",
                           "Cold footers and row groups fetched off the loop", "result=\"error\"");
    cc->m_inflight =
        st_metrics_gauge("strata_cold_fetches_in_flight", "Cold fetches on the worker pool", "");
    *out = cc;
}

/* ---- entries ---- */

static st_part_t *st__part_of(st_coldcache_t *cc, const st_centry_t *e)
{
    return &cc->parts[e->kind != ST__PQFILE];
}

/* Adds delta entries and bytes to e's part (bytes as a signed change). */
static void st__part_add(st_coldcache_t *cc, const st_centry_t *e, int delta, int64_t bytes)
{
    st_part_t *p = st__part_of(cc, e);
    p->n = (size_t)((int64_t)p->n + delta);
    p->bytes = (uint64_t)((int64_t)p->bytes + bytes);
    st_metric_set(p->m_n, (double)p->n);
    st_metric_set(p->m_bytes, (double)p->bytes);
}

/* What a ready entry holds besides what its job decoded: itself, its keys, its chunks' copy. */
static size_t st__entry_heap(const st_centry_t *e)
{
    size_t b = sizeof *e + e->node.klen + 1 + strlen(e->obj) + 1 + 3 * ST__HEAP_EXTRA;
    if (e->rg.chunks) b += (e->nleaves ? e->nleaves : 1) * sizeof *e->rg.chunks + ST__HEAP_EXTRA;
    return b;
}

/* A ready entry joins the LRU (as its most recent) and its part's count. */
static void st__entry_ready(st_coldcache_t *cc, st_centry_t *e)
{
    e->bytes += st__entry_heap(e);
    st_list_insert(&cc->lru, &e->lru);
    st__part_add(cc, e, 1, (int64_t)e->bytes);
}

static void st__entry_free(st_coldcache_t *cc, st_centry_t *e)
{
    if (st_list_linked(&e->lru)) {
        st_list_unlink(&e->lru);
        st__part_add(cc, e, -1, -(int64_t)e->bytes);
    }
    st_map_remove(&cc->entries, &e->node);
    if (e->fview) e->view->free_footer(e->fview);
    if (e->gview) e->view->free_group(e->gview);
    if (e->file.mem) st_pq_file_free(&e->file);
    if (e->table.cols || e->table.mem.v) st_pq_table_free(&e->table);
    free(e->rg.chunks);
    for (size_t i = 0; i < e->pre.n; i++)
        e->view->free_group(e->pre.v[i].gview);
    st_vec_free(&e->pre);
    st_vec_free(&e->waiters);
    free(e->key);
    free(e->obj);
    free(e);
}

void st_coldcache_usage(const st_coldcache_t *cc, st_coldcache_usage_t *out)
{
    *out = (st_coldcache_usage_t){cc->parts[0].n, cc->parts[1].n, cc->parts[0].bytes,
                                  cc->parts[1].bytes};
}

/* Least recently used first, footer or row group alike, never a pinned one nor one on the want
 * list (a lookup made while its job was out: the list points at it until the next wait or
 * forget), until both parts together fit the budget; failed entries go as soon as they are free. */
static void st__cache_trim(st_coldcache_t *cc)
{
    for (ST_LIST_EACH(l, n, &cc->lru)) {
        if (cc->parts[0].bytes + cc->parts[1].bytes <= cc->budget) break;
        st_centry_t *e = ST_LIST_ITEM(l, st_centry_t, lru);
        if (!e->pins && !e->wanted) st__entry_free(cc, e);
    }
}

static void st__unpin(st_coldcache_t *cc, st_centry_t *e)
{
    ST_ASSERT(e->pins > 0);
    if (--e->pins == 0 && e->state == ST__FAILED && !e->wanted) st__entry_free(cc, e);
}

/* The entry for (kind, obj, gi): found, or made (wanted, on no list yet). */
static st_centry_t *st__entry_of(st_coldcache_t *cc, char kind, const char *obj, uint64_t size,
                                 size_t gi)
{
    st_buf_t k = {0};
    st_buf_appendc(&k, kind);
    st_buf_puts(&k, obj);
    if (kind != ST__PQFILE) st_buf_printf(&k, "#%zu", gi);
    st_map_node_t *n = st_map_get(&cc->entries, k.data, k.len);
    st_centry_t *e = (st_centry_t *)n;
    if (!e) {
        e = st_calloc(1, sizeof *e);
        e->cc = cc;
        e->kind = kind;
        e->state = ST__WANTED;
        e->key = st_buf_steal(&k, &e->node.klen);
        e->node.key = e->key;
        e->obj = st_strndup(obj, strlen(obj));
        e->size = size;
        e->gi = gi;
        st_map_insert(&cc->entries, &e->node);
    }
    st_buf_free(&k);
    return e;
}

/* The entry for key (found, or made wanted). Ready ones move to the LRU's end. */
static int st__lookup(st_coldcache_t *cc, char kind, const char *obj, uint64_t size, size_t gi,
                      st_centry_t **out)
{
    st_centry_t *e = st__entry_of(cc, kind, obj, size, gi);
    *out = e;
    if (e->state == ST__READY) { /* now the most recently used */
        st_list_unlink(&e->lru);
        st_list_insert(&cc->lru, &e->lru);
        return ST_OK;
    }
    if (e->state == ST__FAILED) return ST_ECOLD;
    if (!e->wanted) {
        e->wanted = true;
        st_vec_push(&cc->want, e);
    }
    return ST_EPARKED;
}

int st_coldcache_pqfile(st_coldcache_t *cc, const st_pq_schema_t *s, const char *key, uint64_t size,
                        const st_pq_file_t **out)
{
    st_centry_t *e;
    int rc = st__lookup(cc, ST__PQFILE, key, size, 0, &e);
    if (!e->schema) e->schema = s;
    if (rc == ST_OK) *out = &e->file;
    return rc;
}

static int st__footer_through(st_coldcache_t *cc, const st_coldview_t *v, const char *key,
                              uint64_t size, bool rows, const void **out)
{
    st_centry_t *e;
    int rc = st__lookup(cc, ST__PQFILE, key, size, 0, &e);
    if (!e->schema) e->schema = v->schema;
    /* its job, not out yet, decodes the groups too (ST__WHOLE_MAX): it needs the view */
    if (rows && e->state == ST__WANTED && !e->view && v->group) e->view = v;
    if (rc != ST_OK) return rc;
    const st_pq_file_t *f = &e->file;
    if (!e->fview) {
        size_t vb = 0;
        if (v->footer(f, &e->fview, &vb) != ST_OK) {
            e->fview = NULL;
            return ST_ECOLD;
        }
        e->view = v;
        /* counted now; the budget is kept at the next trim (what a reader holds stays until the
         * loop runs again) */
        e->bytes += vb + ST__HEAP_EXTRA;
        st__part_add(cc, e, 0, (int64_t)(vb + ST__HEAP_EXTRA));
    }
    *out = e->fview;
    return ST_OK;
}

int st_coldcache_view_footer(st_coldcache_t *cc, const st_coldview_t *v, const char *key,
                             uint64_t size, const void **out)
{
    return st__footer_through(cc, v, key, size, false, out);
}

int st_coldcache_view_footer_rows(st_coldcache_t *cc, const st_coldview_t *v, const char *key,
                                  uint64_t size, const void **out)
{
    return st__footer_through(cc, v, key, size, true, out);
}

static void st__set_rg(st_centry_t *e, const st_pq_schema_t *s, const st_pq_rowgroup_t *g,
                       size_t nleaves)
{
    if (!e->schema) {
        e->schema = s;
        e->nleaves = nleaves;
        e->rg = *g;
        e->rg.chunks = st_malloc((nleaves ? nleaves : 1) * sizeof *g->chunks);
        memcpy(e->rg.chunks, g->chunks, nleaves * sizeof *g->chunks);
        for (size_t i = 0; i < nleaves; i++) /* statistics point into the footer's memory */
            e->rg.chunks[i].min = e->rg.chunks[i].max = NULL;
    }
}

int st_coldcache_table(st_coldcache_t *cc, const st_pq_schema_t *s, const char *key, size_t gi,
                       const st_pq_rowgroup_t *g, size_t nleaves, const st_pq_table_t **out)
{
    st_centry_t *e;
    int rc = st__lookup(cc, ST__TABLE, key, 0, gi, &e);
    st__set_rg(e, s, g, nleaves);
    if (rc == ST_OK) *out = &e->table;
    return rc;
}

int st_coldcache_view_group(st_coldcache_t *cc, const st_coldview_t *v, const char *key, size_t gi,
                            const st_pq_rowgroup_t *g, size_t nleaves, const void **out)
{
    st_centry_t *e;
    int rc = st__lookup(cc, ST__VGROUP, key, 0, gi, &e);
    if (!e->view) e->view = v; /* never written while its job may read it */
    st__set_rg(e, v->schema, g, nleaves);
    if (rc == ST_OK) *out = e->gview;
    return rc;
}

bool st_coldcache_wanting(const st_coldcache_t *cc)
{
    return cc->want.n > 0;
}

/* ---- jobs (worker threads: only the entry's result fields and the object store) ---- */

/* Every row group of an object its footer's job holds whole (bytes: all of it), each in the
 * view's form. One that does not decode is left out: its own fetch, if a read asks, reports it. */
static void st__predecode(st_centry_t *e, const uint8_t *bytes)
{
    for (size_t gi = 0; gi < e->file.ngroups; gi++) {
        const st_pq_rowgroup_t *g = &e->file.groups[gi];
        if (g->offset > e->size || g->length > e->size - g->offset) continue;
        st_pq_table_t t;
        if (st_pq_read_group(e->schema, g, bytes + g->offset, g->length, &t) != ST_OK) continue;
        st__pregroup_t p = {.gi = gi};
        int rc = e->view->group(&t, &p.gview, &p.bytes);
        st_pq_table_free(&t); /* what the view did not take */
        if (rc == ST_OK) st_vec_push(&e->pre, p);
    }
}

static int st__fetch_pqfile(st_objstore_t *obj, st_centry_t *e)
{
    if (e->size < 12) return ST_EINVAL;
    uint64_t t = e->size < ST__TAIL_GUESS ? e->size : ST__TAIL_GUESS;
    st_buf_t b = {0};
    uint32_t flen = 0;
    int rc = st_objstore_get(obj, e->obj, e->size - t, (size_t)t, &b);
    if (rc == ST_OK) rc = st_pq_footer_len((const uint8_t *)b.data + t - 8, e->size, &flen);
    if (rc == ST_OK && (uint64_t)flen + 8 > t) {
        st_buf_reset(&b);
        rc = st_objstore_get(obj, e->obj, e->size - 8 - flen, flen, &b);
        t = flen + 8; /* b holds the footer only */
    }
    if (rc == ST_OK)
        rc = st_pq_parse_footer(e->schema, (const uint8_t *)b.data + t - 8 - flen, flen, e->size,
                                &e->file);
    if (rc == ST_OK) e->bytes = e->file.bytes + ST__HEAP_EXTRA;
    if (rc == ST_OK && e->view && t == e->size && e->size <= ST__WHOLE_MAX)
        st__predecode(e, (const uint8_t *)b.data);
    st_buf_free(&b);
    return rc;
}

static int st__fetch_table(st_objstore_t *obj, st_centry_t *e)
{
    st_buf_t b = {0};
    int rc = st_objstore_get(obj, e->obj, e->rg.offset, e->rg.length, &b);
    if (rc == ST_OK)
        rc = st_pq_read_group(e->schema, &e->rg, (const uint8_t *)b.data, b.len, &e->table);
    st_buf_free(&b);
    if (rc != ST_OK) return rc;
    /* a block per page and per column array, and the layout and columns */
    e->bytes = e->table.bytes + (e->table.mem.n + 5 * e->table.ncols + 3) * ST__HEAP_EXTRA;
    if (e->kind != ST__VGROUP) return ST_OK;
    size_t vb = 0;
    rc = e->view->group(&e->table, &e->gview, &vb);
    st_pq_table_free(&e->table); /* what the view did not take */
    memset(&e->table, 0, sizeof e->table);
    if (rc != ST_OK) {
        e->gview = NULL;
        return rc;
    }
    e->bytes = vb;
    return ST_OK;
}

/* Workers yield to the loop thread: on 2 cores, a row group's zstd decode must not preempt the
 * loop in the middle of answering requests (Linux niceness is per thread). */
static void st__worker_nice(void)
{
    static _Thread_local bool niced;
    if (niced) return;
    niced = true;
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
}

static void st__job_work(uv_work_t *req)
{
    st_sched_worker(); /* a pool thread: its wake-ups never preempt the loop */
    st__worker_nice();
    st_centry_t *e = req->data;
    st_objstore_t *obj = e->cc->obj;
    e->rc = e->kind == ST__PQFILE ? st__fetch_pqfile(obj, e) : st__fetch_table(obj, e);
}

static void st__maybe_free_cache(st_coldcache_t *cc)
{
    if (cc->jobs) return;
    size_t it;
    st_map_node_t *n;
    while ((n = st_map_first(&cc->entries, &it)) != NULL)
        st__entry_free(cc, (st_centry_t *)n);
    st_map_free(&cc->entries);
    st_vec_free(&cc->want);
    free(cc->missing);
    free(cc);
}

static void st__wait_finish(st_coldcache_t *cc, st_coldwait_t *w)
{
    if (--w->outstanding) return;
    if (w->cancelled) {
        st_vec_free(&w->held);
        free(w);
    } else if (!cc->closing) {
        w->done(w->arg); /* may release w */
    }
}

/* A missing object is remembered (the newest one) for /healthz; whether this failure goes
 * unlogged: the same object, missing again within a minute of its last log line. */
static bool st__missing_quiet(st_coldcache_t *cc, const st_centry_t *e)
{
    if (e->rc != ST_ENOTFOUND) return false;
    uint64_t now = uv_now(cc->loop);
    cc->missing_seen_ms = now;
    if (cc->missing && strcmp(cc->missing, e->obj) == 0) {
        if (now - cc->missing_logged_ms < 60000) return true;
    } else {
        free(cc->missing);
        cc->missing = st_strndup(e->obj, strlen(e->obj));
    }
    cc->missing_logged_ms = now;
    return false;
}

const char *st_coldcache_missing(const st_coldcache_t *cc, uint64_t within_ms)
{
    if (!cc || !cc->missing) return NULL;
    return uv_now(cc->loop) - cc->missing_seen_ms <= within_ms ? cc->missing : NULL;
}

/* The groups a footer's job decoded with it, each published as its own ready entry (unless a
 * read asked for it meanwhile and its own job is out, or it came back already). */
static void st__publish_pre(st_coldcache_t *cc, st_centry_t *e)
{
    for (size_t i = 0; i < e->pre.n; i++) {
        st__pregroup_t *p = &e->pre.v[i];
        st_centry_t *g = cc->closing ? NULL : st__entry_of(cc, ST__VGROUP, e->obj, 0, p->gi);
        /* one on the want list is left to its own fetch: made ready and unpinned here, the trim
         * below could free it while the list still points at it */
        if (!g || g->state != ST__WANTED || g->wanted) {
            e->view->free_group(p->gview);
            continue;
        }
        g->view = e->view;
        st__set_rg(g, e->view->schema, &e->file.groups[p->gi], e->file.nleaves);
        g->gview = p->gview;
        g->bytes = p->bytes;
        g->state = ST__READY;
        st__entry_ready(cc, g);
        if (cc->m_groups) st_metric_add(cc->m_groups, 1);
    }
    st_vec_free(&e->pre);
}

static void st__job_done(uv_work_t *req, int status)
{
    st_centry_t *e = req->data;
    st_coldcache_t *cc = e->cc;
    cc->jobs--;
    st_metric_set(cc->m_inflight, (double)cc->jobs);
    if (status != 0 && e->rc == ST_OK) e->rc = ST_EIO;
    if (e->rc == ST_OK) {
        if (cc->missing && strcmp(cc->missing, e->obj) == 0) { /* back (restored, re-linked) */
            free(cc->missing);
            cc->missing = NULL;
        }
        e->state = ST__READY;
        st__entry_ready(cc, e);
        st__publish_pre(cc, e);
        if (e->kind != ST__PQFILE && cc->m_groups) st_metric_add(cc->m_groups, 1);
        st_metric_add(cc->m_fetch_ok, 1);
    } else {
        e->state = ST__FAILED;
        st_metric_add(cc->m_fetch_err, 1);
        if (!cc->closing && !st__missing_quiet(cc, e)) {
            const char *why = e->rc == ST_ENOTFOUND ? "missing"
                              : e->rc == ST_EINVAL  ? "not a valid strata Parquet file"
                                                    : "storage error";
            if (e->kind == ST__PQFILE)
                st_error("cold: object %s cannot be read (%s)", e->obj, why);
            else
                st_error("cold: row group %zu of %s cannot be read (%s)", e->gi, e->obj, why);
        }
    }
    /* the waiters are told after the entry is published; each may re-run its read now */
    st_coldwait_t **ws = e->waiters.v;
    size_t nw = e->waiters.n;
    e->waiters.v = NULL;
    e->waiters.n = e->waiters.cap = 0;
    e->pins++; /* not freed under the callbacks */
    for (size_t i = 0; i < nw; i++)
        st__wait_finish(cc, ws[i]);
    free(ws);
    st__unpin(cc, e);
    if (cc->closing) {
        st__maybe_free_cache(cc);
        return;
    }
    st__cache_trim(cc);
}

static void st__start(st_coldcache_t *cc, st_centry_t *e)
{
    e->state = ST__LOADING;
    e->req.data = e;
    cc->jobs++;
    st_metric_set(cc->m_inflight, (double)cc->jobs);
    if (uv_queue_work(cc->loop, &e->req, st__job_work, st__job_done) != 0) {
        e->rc = ST_EIO;
        st__job_done(&e->req, -1);
    }
}

/* A wanted entry nobody waits for and no job fetches: gone. */
static void st__drop_want(st_coldcache_t *cc, st_centry_t *e)
{
    e->wanted = false;
    if (e->state == ST__WANTED && !e->pins && !e->waiters.n) st__entry_free(cc, e);
}

void st_coldcache_forget(st_coldcache_t *cc)
{
    for (size_t i = 0; i < cc->want.n; i++)
        st__drop_want(cc, cc->want.v[i]);
    cc->want.n = 0;
}

bool st_coldcache_wait(st_coldcache_t *cc, st_coldwait_t **wp, st_coldwait_fn done, void *arg)
{
    st_coldwait_t *w = done ? (wp ? *wp : NULL) : NULL;
    if (done && !w) {
        w = st_calloc(1, sizeof *w);
        w->cc = cc;
        *wp = w;
    }
    if (w) {
        w->done = done;
        w->arg = arg;
        st_vec_reserve(&w->held, w->held.n + cc->want.n + 1);
    }
    /* the list is taken first: a job that fails at once may change it under us */
    st_centry_t **want = cc->want.v;
    size_t n = cc->want.n;
    cc->want.v = NULL;
    cc->want.n = cc->want.cap = 0;
    for (size_t i = 0; i < n; i++) {
        st_centry_t *e = want[i];
        e->wanted = false;
        if (w) {
            e->pins++;
            w->held.v[w->held.n++] = e;
            if (e->state == ST__WANTED || e->state == ST__LOADING) {
                st_vec_push(&e->waiters, w);
                w->outstanding++;
            }
        }
    }
    /* one extra count so that jobs failing inside st__start cannot finish the wait early */
    if (w) w->outstanding++;
    for (size_t i = 0; i < n; i++) {
        if (want[i]->state != ST__WANTED) continue;
        if (!w && cc->jobs >= ST__PREFETCH_JOBS)
            st__drop_want(cc, want[i]);
        else
            st__start(cc, want[i]);
    }
    free(want);
    if (!w) return false;
    if (--w->outstanding) return true;
    return false; /* all of it was in memory (or failed) already: the caller re-runs now */
}

void st_coldcache_release(st_coldcache_t *cc, st_coldwait_t *w)
{
    if (!w) return;
    for (size_t i = 0; i < w->held.n; i++)
        st__unpin(cc, w->held.v[i]);
    w->held.n = 0;
    if (w->outstanding) {
        w->cancelled = true; /* freed when its last entry comes back */
        return;
    }
    st_vec_free(&w->held);
    free(w);
    st__cache_trim(cc);
}

/* ---- deletes ---- */

typedef struct {
    uv_work_t req;
    st_coldcache_t *cc;
    char *key;
    int rc;
    void (*done)(void *arg, int rc);
    void *arg;
} st_delete_t;

static void st__delete_work(uv_work_t *req)
{
    st_sched_worker(); /* a pool thread: its wake-ups never preempt the loop */
    st_delete_t *d = req->data;
    d->rc = st_objstore_delete(d->cc->obj, d->key);
}

static void st__delete_done(uv_work_t *req, int status)
{
    st_delete_t *d = req->data;
    st_coldcache_t *cc = d->cc;
    cc->jobs--;
    if (status != 0) d->rc = ST_EIO;
    if (d->done) d->done(d->arg, d->rc);
    free(d->key);
    free(d);
    if (cc->closing) st__maybe_free_cache(cc);
}

void st_coldcache_delete(st_coldcache_t *cc, const char *key, void (*done)(void *arg, int rc),
                         void *arg)
{
    st_delete_t *d = st_calloc(1, sizeof *d);
    d->req.data = d;
    d->cc = cc;
    d->key = st_strndup(key, strlen(key));
    d->done = done;
    d->arg = arg;
    cc->jobs++;
    if (uv_queue_work(cc->loop, &d->req, st__delete_work, st__delete_done) != 0) {
        d->rc = ST_EIO;
        st__delete_done(&d->req, -1);
    }
}

/* ---- closing ---- */

void st_coldcache_close(st_coldcache_t *cc)
{
    if (!cc) return;
    cc->closing = true;
    st_vec_free(&cc->want);
    st__maybe_free_cache(cc);
}
