/* SPDX-License-Identifier: MIT */
/*
 * The catalog's cache (SPEC v5 §5.1): each table's newest metadata, found in the tables'
 * metadata store the way Iceberg's readers of a "Hadoop" layout find it. A refresh reads
 * `metadata/version-hint.text` (bare digits: a hint, never the truth), then probes
 * `v{N+1}.metadata.json`, `v{N+2}`, … upward from the newest version known (from v1 when none is)
 * until one is missing; only when nothing is known yet and the hint is missing, unreadable or
 * names a missing file does it list `metadata/` for the highest v{N} — at start-up, then every
 * tenth refresh (an idle S3 tier pays no LIST a second per table). A version whose text is not a
 * JSON object is skipped (the one before it stays served). The committer writes v{N} by a create
 * that refuses to overwrite, so a version once read never changes: the steady state costs one GET
 * of the hint and one GET of a missing v{N+1} per table and refresh. The loader is newest.c's,
 * shared with the committer and rebuild-meta.
 *
 * Threads: the store is read on the worker pool only (uv_queue_work, one refresh at a time); the
 * job carries its own copy of what it needs (the versions known) and hands back what it found,
 * which the loop swaps in. The loop owns the cache; requests read it without waiting.
 */
#include "strata/idle.h"
#include "internal.h"
#include "strata/catalog.h"
#include "strata/cold.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define ST__CAT_LIST_EVERY 10    /* refreshes per listing of a table not found */
#define ST__CAT_IDLE_MS    60000 /* no question for this long: idle */
#define ST__CAT_IDLE_TICKS 30    /* idle: a refresh every this many ticks */

const char *st_catalog_table(size_t i)
{
    const st_table_def_t *d = st_table_def(i);
    return d ? d->ice.name : NULL;
}

typedef struct {
    uint64_t version; /* 0: none found */
    char *location;   /* owned */
    char *json;       /* owned */
    size_t json_len;
} st__cat_ent_t;

/* One refresh: the versions known going in, what was found coming back (owned by the job until
 * the loop takes it). */
typedef struct {
    uv_work_t work;
    st_catalog_t *cat;
    uint64_t known[ST_TABLES_MAX];
    bool may_list;                      /* a table with nothing known may be listed this time */
    st__cat_ent_t found[ST_TABLES_MAX]; /* version 0: nothing newer */
    bool failed[ST_TABLES_MAX];         /* the store could not be read */
} st__cat_job_t;

struct st_catalog {
    uv_loop_t *loop;
    st_objstore_t *obj; /* borrowed */
    uv_timer_t timer;
    int n; /* the tables (st_tables_n: the kinds'), as at open */
    st__cat_ent_t ent[ST_TABLES_MAX];
    bool busy;    /* a refresh is on the worker pool */
    bool closing; /* st_catalog_close was called */
    bool timer_closed;
    unsigned refreshes;         /* started so far (listing is rationed by it) */
    uint64_t used_ms;           /* the last st_catalog_get (loop time) */
    unsigned idle_ticks;        /* ticks skipped since the last refresh, while nobody asks */
    bool warned[ST_TABLES_MAX]; /* a read error was logged (once until it passes) */
};

bool st_catalog_is_table(const char *name, size_t n)
{
    const char *t;
    for (size_t i = 0; (t = st_catalog_table(i)); i++)
        if (strlen(t) == n && memcmp(t, name, n) == 0) return true;
    return false;
}

/* ---- the refresh, on a worker ---- */

typedef struct {
    st_objstore_t *obj;
    st__cat_ent_t *e;
} st__cat_take_t;

/* The catalog's take (newest.c): a version whose text is not a JSON object is passed over. */
static int st__cat_take(void *arg, int64_t v, const char *key, st_buf_t *b)
{
    st__cat_take_t *t = arg;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(b->data ? b->data : "", b->len, &end, false);
    bool ok = j && cJSON_IsObject(j) && end == b->data + b->len &&
              cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(j, "format-version")) &&
              !memchr(b->data, 0, b->len);
    cJSON_Delete(j);
    if (!ok) return ST_EINVAL;
    st__cat_ent_t *e = t->e;
    st_buf_t loc = {0};
    st_objstore_uri(t->obj, key, &loc);
    free(e->json);
    free(e->location);
    st_buf_appendc(b, 0);
    e->json = st_buf_steal(b, &e->json_len);
    e->json_len--;
    e->location = st_buf_steal(&loc, NULL);
    e->version = (uint64_t)v;
    return ST_OK;
}

/* The newest version of table from known on into *e (version 0 when none newer was found). */
static int st__cat_refresh_one(st_objstore_t *obj, const char *table, uint64_t known, bool may_list,
                               st__cat_ent_t *e)
{
    st__cat_take_t t = {obj, e};
    st_tables_take_t take = {st__cat_take, &t, false};
    int64_t found;
    int rc = st_tables_newest(obj, table, (int64_t)known, may_list, &take, &found);
    if ((uint64_t)found == known) e->version = 0;
    return rc;
}

static void st__cat_work(uv_work_t *w)
{
    st_sched_worker(); /* a pool thread: its wake-ups never preempt the loop */
    st__cat_job_t *j = w->data;
    for (int i = 0; i < j->cat->n; i++) {
        int rc = st__cat_refresh_one(j->cat->obj, st_catalog_table((size_t)i), j->known[i],
                                     j->may_list, &j->found[i]);
        j->failed[i] = rc != ST_OK && !j->found[i].version;
    }
}

/* ---- on the loop ---- */

static void st__cat_ent_free(st__cat_ent_t *e)
{
    free(e->location);
    free(e->json);
    memset(e, 0, sizeof *e);
}

static void st__cat_maybe_free(st_catalog_t *c)
{
    if (!c->closing || c->busy || !c->timer_closed) return;
    for (int i = 0; i < c->n; i++)
        st__cat_ent_free(&c->ent[i]);
    free(c);
}

static void st__cat_done(uv_work_t *w, int status)
{
    st__cat_job_t *j = w->data;
    st_catalog_t *c = j->cat;
    c->busy = false;
    for (int i = 0; i < c->n; i++) {
        st__cat_ent_t *f = &j->found[i];
        bool failed = j->failed[i];
        if (failed && !c->warned[i])
            st_warn("catalog: could not read table %s's metadata; serving v%llu",
                    st_catalog_table((size_t)i), (unsigned long long)c->ent[i].version);
        c->warned[i] = failed;
        if (status == 0 && f->version > c->ent[i].version) {
            st__cat_ent_free(&c->ent[i]);
            c->ent[i] = *f;
            memset(f, 0, sizeof *f);
            st_info("catalog: table %s at v%llu", st_catalog_table((size_t)i),
                    (unsigned long long)c->ent[i].version);
        }
        free(f->location);
        free(f->json);
    }
    free(j);
    st__cat_maybe_free(c);
}

static void st__cat_tick(uv_timer_t *t)
{
    st_catalog_t *c = t->data;
    if (c->busy || c->closing || !c->obj) return;
    /* nobody asked for a minute: a refresh every ST__CAT_IDLE_TICKS ticks only, so an idle node
     * does not read each table's hint from S3 every second; the first question after that is
     * answered from what is known (at most that old) and refreshes every second again */
    if (c->refreshes && uv_now(c->loop) - c->used_ms > ST__CAT_IDLE_MS &&
        ++c->idle_ticks < ST__CAT_IDLE_TICKS)
        return;
    c->idle_ticks = 0;
    st__cat_job_t *j = st_calloc(1, sizeof *j);
    j->cat = c;
    j->work.data = j;
    for (int i = 0; i < c->n; i++)
        j->known[i] = c->ent[i].version;
    /* a listing (an S3 LIST per table) at start-up, then one refresh in ST__CAT_LIST_EVERY */
    j->may_list = c->refreshes++ % ST__CAT_LIST_EVERY == 0;
    if (uv_queue_work(c->loop, &j->work, st__cat_work, st__cat_done) != 0) {
        free(j);
        return;
    }
    c->busy = true;
}

int st_catalog_open(st_catalog_t **out, uv_loop_t *loop, st_objstore_t *obj, unsigned refresh_ms)
{
    st_catalog_t *c = st_calloc(1, sizeof *c);
    c->loop = loop;
    c->obj = obj;
    c->n = (int)st_tables_n();
    c->used_ms = uv_now(loop); /* active for a minute from the start */
    uv_timer_init(loop, &c->timer);
    c->timer.data = c;
    uv_timer_start(&c->timer, st__cat_tick, 0, refresh_ms ? refresh_ms : 1000);
    uv_unref((uv_handle_t *)&c->timer); /* the loop's lifetime is the server's, not ours */
    *out = c;
    return ST_OK;
}

void st_catalog_nudge(st_catalog_t *c)
{
    if (!c || c->closing) return;
    c->used_ms = uv_now(c->loop);
    st__cat_tick(&c->timer); /* a refresh now, unless one is out (then the next tick) */
}

static void st__cat_timer_closed(uv_handle_t *h)
{
    st_catalog_t *c = h->data;
    c->timer_closed = true;
    st__cat_maybe_free(c);
}

void st_catalog_close(st_catalog_t *c)
{
    if (!c) return;
    c->closing = true;
    uv_close((uv_handle_t *)&c->timer, st__cat_timer_closed);
}

int st_catalog_get(st_catalog_t *c, const char *name, size_t n, st_catalog_entry_t *e)
{
    if (!c) return ST_ENOTFOUND;
    c->used_ms = uv_now(c->loop);
    for (int i = 0; i < c->n; i++) {
        const char *t = st_catalog_table((size_t)i);
        if (strlen(t) != n || memcmp(t, name, n) != 0) continue;
        const st__cat_ent_t *x = &c->ent[i];
        if (!x->version) return ST_ENOTFOUND;
        *e = (st_catalog_entry_t){x->version, x->location, x->json, x->json_len};
        return ST_OK;
    }
    return ST_ENOTFOUND;
}
