/* SPDX-License-Identifier: MIT */
/* Unit tests for the tables' view of the tier's manifests (src/tables/view.c, src/cold/dirty.c,
 * issues 45 and 48): a whole view reads every file record once; after that a change to one
 * owner's file records marks that owner, and the next view reads that owner's records only, not
 * the other owners'; the worker's merge of that delta with the committed set is the whole set as
 * it now is (the others' files carried, the changed owner's replaced); the marks the view saw are
 * cleared once committed, but one rewritten since stays. */
#include "../test.h"
#include "../fixture.h"
#include "../../src/tables/internal.h"

#include <stdio.h>

#define OWNERS 50

/* Owner "u{i}" with one object (rebuild-meta's service: marked). */
static void owner_put(st_store_t *s, int i, uint64_t seq)
{
    char o[16], key[64];
    int ol = snprintf(o, sizeof o, "u%d", i);
    snprintf(key, sizeof key, "u%d/batch-1-%llu.parquet", i, (unsigned long long)seq);
    st_tier_obj_t ob = {{1, 9, 3, 100}, seq, key};
    uint64_t w = 0;
    CHECK_EQ(st_tier_rebuild_owner(s, o, (size_t)ol, &ob, 1, &(st_tier_stat_t){0}, &w), ST_OK);
}

static int count_mark(void *arg, const char *o, size_t ol, uint64_t gen)
{
    (void)o, (void)ol, (void)gen;
    (*(int *)arg)++;
    return 0;
}

static int marks(st_store_t *s)
{
    int n = 0;
    uint64_t w = 0;
    CHECK_EQ(st_tier_each_dirty(s, count_mark, &n, &w), ST_OK);
    return n;
}

static st_tfile_t tfile_dup(const st_tfile_t *f)
{
    st_tfile_t c = *f;
    c.key = st_strndup(f->key, strlen(f->key));
    c.uri = f->uri ? st_strndup(f->uri, strlen(f->uri)) : NULL;
    c.part = f->part ? st_strndup(f->part, strlen(f->part)) : NULL;
    return c;
}

static bool parts_has(const st_tview_t *v, const char *part)
{
    for (size_t i = 0; i < v->parts.n; i++)
        if (strcmp(v->parts.v[i], part) == 0) return true;
    return false;
}

/* The view v merged with the files of *committed its owners hold (as the store's provenance
 * records give them to a commit: every one for a whole view, else the changed owners'), the result
 * taking their place in *committed; returns whether the merge found the set unchanged. */
static bool merge_install(st_tview_t *v, st_tfiles_t *committed)
{
    st_tstrs_t cmarks = {0};
    st_tfiles_t prev = {0}, rest = {0}, live;
    st_tgone_t gone;
    for (size_t i = 0; i < committed->n; i++)
        if (v->full || parts_has(v, committed->v[i].part))
            st_vec_push(&prev, committed->v[i]);
        else
            st_vec_push(&rest, committed->v[i]);
    bool same = st_tview_merge(v, &prev, &cmarks, &live, &gone);
    for (size_t i = 0; i < live.n; i++) { /* as a commit would: in a snapshot now */
        if (!live.v[i].snap) live.v[i].snap = live.v[i].seq = 1;
        st_vec_push(&rest, tfile_dup(&live.v[i]));
    }
    st_tfiles_free(&prev);
    st_vec_free(committed);
    *committed = rest;
    st_tfiles_sort(committed);
    st_vec_free(&live);
    st_vec_free(&gone);
    return same;
}

TEST(a_change_reads_the_changed_owner_only)
{
    fx_t fx;
    fx_begin(&fx);
    st_store_t *s = fx_store(&fx, 64 << 20, 0);
    st_objstore_t *cold = fx_objstore(&fx);
    int n = (int)st_tables_n();
    for (int i = 0; i < OWNERS; i++)
        owner_put(s, i, 1);
    fx_settle(&fx, s);
    CHECK_EQ(marks(s), OWNERS); /* rebuild-meta marks the owners it puts back */

    /* the whole view at the start of a lead: every record */
    st_tview_t v[ST_TABLES_MAX];
    st_tfiles_t committed[ST_TABLES_MAX] = {{0}};
    uint64_t visited = 0;
    CHECK_EQ(st_tables_view(s, cold, true, v, n, &visited), ST_OK);
    CHECK_EQ(visited, (uint64_t)OWNERS);
    CHECK_EQ(v[0].fresh.n, (size_t)OWNERS); /* messages: the untagged owners */
    CHECK(!merge_install(&v[0], &committed[0]));
    CHECK_EQ(committed[0].n, (size_t)OWNERS);
    st_tview_clear(s, &v[0]);
    fx_settle(&fx, s);
    CHECK_EQ(marks(s), 0);
    for (int i = 0; i < n; i++)
        st_tview_free(&v[i]);

    /* nothing changed: a view reads nothing */
    visited = 0;
    CHECK_EQ(st_tables_view(s, cold, false, v, n, &visited), ST_OK);
    CHECK_EQ(visited, 0u);
    CHECK_EQ(v[0].parts.n, 0u);
    for (int i = 0; i < n; i++)
        st_tview_free(&v[i]);

    /* u7 is forgotten (its file record deleted: marked); u9's object is replaced (forgotten,
     * marked, then a new one put back) */
    bool busy = false;
    uint64_t w = 0;
    CHECK_EQ(st_tier_forget(NULL, s, "u7", 2, 64, &busy, &w), ST_OK);
    CHECK_EQ(st_tier_forget(NULL, s, "u9", 2, 64, &busy, &w), ST_OK);
    owner_put(s, 9, 2);
    fx_settle(&fx, s);
    CHECK_EQ(marks(s), 2);
    visited = 0;
    CHECK_EQ(st_tables_view(s, cold, false, v, n, &visited), ST_OK);
    CHECK_EQ(visited, 1u); /* u9's new record: not the other 48 owners' */
    CHECK_EQ(v[0].parts.n, 2u);
    CHECK_EQ(v[0].fresh.n, 1u);
    CHECK(!merge_install(&v[0], &committed[0]));
    CHECK_EQ(committed[0].n, (size_t)OWNERS - 1);
    CHECK(st_tfiles_find(&committed[0], "u7/batch-1-1.parquet") == NULL);
    CHECK(st_tfiles_find(&committed[0], "u9/batch-1-1.parquet") == NULL);
    CHECK(st_tfiles_find(&committed[0], "u9/batch-1-2.parquet") != NULL);
    const st_tfile_t *u1 = st_tfiles_find(&committed[0], "u1/batch-1-1.parquet");
    CHECK(u1 && u1->snap == 1 && u1->part && strcmp(u1->part, "u1") == 0); /* carried */

    /* u9's mark is rewritten after the view saw it (its new object forgotten): clearing what
     * the view saw clears u7's and keeps u9's */
    CHECK_EQ(st_tier_forget(NULL, s, "u9", 2, 64, &busy, &w), ST_OK);
    st_tview_clear(s, &v[0]);
    fx_settle(&fx, s);
    CHECK_EQ(marks(s), 1);
    for (int i = 0; i < n; i++)
        st_tview_free(&v[i]);
    visited = 0;
    CHECK_EQ(st_tables_view(s, cold, false, v, n, &visited), ST_OK);
    CHECK_EQ(v[0].parts.n, 1u);
    CHECK(strcmp(v[0].parts.v[0], "u9") == 0);
    CHECK_EQ(v[0].fresh.n, 0u);
    CHECK(!merge_install(&v[0], &committed[0]));
    CHECK_EQ(committed[0].n, (size_t)OWNERS - 2);
    st_tview_clear(s, &v[0]);
    fx_settle(&fx, s);
    CHECK_EQ(marks(s), 0);
    for (int i = 0; i < n; i++) {
        st_tview_free(&v[i]);
        st_tfiles_free(&committed[i]);
    }
    st_objstore_close(cold);
    fx_close_store(&fx, s);
    fx_end(&fx);
}

/* A tick's delta takes ST_TABLES_VIEW_OWNERS owners at most (its loop turn stays short); the
 * marks it did not take stay for the next, which reads the rest; a look (no visited) reads all. */
TEST(a_delta_is_bounded_and_the_rest_follows)
{
    fx_t fx;
    fx_begin(&fx);
    st_store_t *s = fx_store(&fx, 64 << 20, 0);
    st_objstore_t *cold = fx_objstore(&fx);
    int n = (int)st_tables_n(), many = ST_TABLES_VIEW_OWNERS + 3;
    bool busy = false;
    uint64_t w = 0;
    for (int i = 0; i < many; i++) {
        char o[16];
        int ol = snprintf(o, sizeof o, "u%d", i);
        owner_put(s, i, 1);
        CHECK_EQ(st_tier_forget(NULL, s, o, (size_t)ol, 64, &busy, &w), ST_OK); /* marked */
    }
    fx_settle(&fx, s);
    CHECK_EQ(marks(s), many);
    st_tview_t v[ST_TABLES_MAX];
    CHECK_EQ(st_tables_view(s, cold, false, v, n, NULL), ST_OK); /* a look: every owner */
    CHECK_EQ(v[0].parts.n, (size_t)many);
    CHECK(!v[0].more);
    for (int i = 0; i < n; i++)
        st_tview_free(&v[i]);
    uint64_t visited = 0;
    CHECK_EQ(st_tables_view(s, cold, false, v, n, &visited), ST_OK);
    CHECK_EQ(v[0].parts.n, (size_t)ST_TABLES_VIEW_OWNERS);
    CHECK(v[0].more);
    st_tview_clear(s, &v[0]);
    fx_settle(&fx, s);
    for (int i = 0; i < n; i++)
        st_tview_free(&v[i]);
    CHECK_EQ(marks(s), 3);
    CHECK_EQ(st_tables_view(s, cold, false, v, n, &visited), ST_OK);
    CHECK_EQ(v[0].parts.n, 3u);
    CHECK(!v[0].more);
    for (int i = 0; i < n; i++)
        st_tview_free(&v[i]);
    st_objstore_close(cold);
    fx_close_store(&fx, s);
    fx_end(&fx);
}

/* Owner o with one object key, put back (marked). */
static void obj_put(st_store_t *s, const char *o, const char *key)
{
    st_tier_obj_t ob = {{1, 9, 3, 100}, 1, (char *)key};
    uint64_t w = 0;
    CHECK_EQ(st_tier_rebuild_owner(s, o, strlen(o), &ob, 1, &(st_tier_stat_t){0}, &w), ST_OK);
}

static int keep_mark(void *arg, const char *o, size_t ol, uint64_t gen)
{
    st_buf_t *b = arg;
    st_buf_append(b, &ol, sizeof ol);
    st_buf_append(b, o, ol);
    st_buf_append(b, &gen, sizeof gen);
    return 0;
}

/* Every owner's mark cleared (as commits would), read first: no write inside a scan. */
static void clear_marks(st_store_t *s)
{
    st_buf_t b = {0};
    uint64_t w = 0, gen;
    CHECK_EQ(st_tier_each_dirty(s, keep_mark, &b, &w), ST_OK);
    for (size_t off = 0, ol; off < b.len; off += sizeof ol + ol + sizeof gen) {
        memcpy(&ol, b.data + off, sizeof ol);
        memcpy(&gen, b.data + off + sizeof ol + ol, sizeof gen);
        CHECK_EQ(st_tier_dirty_clear(s, b.data + off + sizeof ol, ol, gen, &w), ST_OK);
    }
    st_buf_free(&b);
}

/* GET /v1/admin/tables's pending (look.c, issue 48): exact while a table has at most
 * ST_TABLES_LOOK_OWNERS dirty owners (a committed object, one with a provenance record, is not
 * pending; an owner whose objects only went holds none), bounded past it and never 0 then; one
 * table's owners do not count against another's; 0 once no owner is dirty. */
TEST(the_admin_look_is_exact_below_its_bound_and_never_0_above_it)
{
    fx_t fx;
    fx_begin(&fx);
    st_store_t *s = fx_store(&fx, 64 << 20, 0);
    int n = (int)st_tables_n(), rooms = st_table_of_tag('r'), few = ST_TABLES_LOOK_OWNERS - 6;
    CHECK(rooms > 0 && rooms < n);
    int64_t p[ST_TABLES_MAX];
    char o[32], key[64];
    for (int i = 0; i < few; i++) {
        snprintf(o, sizeof o, "u%d", i);
        snprintf(key, sizeof key, "u%d/batch-1-1.parquet", i);
        obj_put(s, o, key);
    }
    for (int i = 0; i < 5; i++) {
        snprintf(o, sizeof o, "~rhall%d", i);
        snprintf(key, sizeof key, "r/hall%d/batch-1-1.parquet", i);
        obj_put(s, o, key);
    }
    fx_settle(&fx, s);
    st_tables_pending(s, n, p);
    CHECK_EQ(p[0], (int64_t)few);
    CHECK_EQ(p[rooms], 5);

    /* u0's object committed (its provenance record): not pending */
    uint8_t k[ST_KEY_MAX + 1], v[32] = {0};
    size_t kl = st_tables_prov_key(k, 0, "u0", "u0/batch-1-1.parquet");
    uint64_t w = 0;
    CHECK(kl > 0);
    CHECK_EQ(st_store_put(s, k, kl, v, sizeof v, &w), ST_OK);
    fx_settle(&fx, s);
    st_tables_pending(s, n, p);
    CHECK_EQ(p[0], (int64_t)few - 1);

    /* past the bound: a lower bound, above 0; the rooms' figure stays exact */
    for (int i = few; i < few + 100; i++) {
        snprintf(o, sizeof o, "u%d", i);
        snprintf(key, sizeof key, "u%d/batch-1-1.parquet", i);
        obj_put(s, o, key);
    }
    fx_settle(&fx, s);
    st_tables_pending(s, n, p);
    CHECK(p[0] > 0 && p[0] <= ST_TABLES_LOOK_OWNERS);
    CHECK(p[0] < few + 100 - 1); /* not every owner read */
    CHECK_EQ(p[rooms], 5);

    /* every object gone (owners marked, nothing to commit): 0 below the bound, 1 above it */
    bool busy = false;
    for (int i = 0; i < few + 100; i++) {
        int ol = snprintf(o, sizeof o, "u%d", i);
        CHECK_EQ(st_tier_forget(NULL, s, o, (size_t)ol, 64, &busy, &w), ST_OK);
    }
    fx_settle(&fx, s);
    st_tables_pending(s, n, p);
    CHECK_EQ(p[0], 1); /* more owners dirty than read: not known to be 0 */
    clear_marks(s);
    fx_settle(&fx, s);
    for (int i = 0; i < few; i++) {
        int ol = snprintf(o, sizeof o, "u%d", i);
        obj_put(s, o, "x.parquet");
        CHECK_EQ(st_tier_forget(NULL, s, o, (size_t)ol, 64, &busy, &w), ST_OK);
    }
    fx_settle(&fx, s);
    st_tables_pending(s, n, p);
    CHECK_EQ(p[0], 0); /* every dirty owner read: none holds an object */
    CHECK_EQ(p[rooms], 0);
    CHECK_EQ(marks(s), few);
    fx_close_store(&fx, s);
    fx_end(&fx);
}

RUN_TESTS("tables_view")
