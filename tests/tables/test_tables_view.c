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
#include "../../src/cold/internal.h"
#include "strata/metrics.h"

#include <stdio.h>

#define OWNERS 50

/* Owner "u{i}" with one object (rebuild-meta's service: marked). */
static void owner_put(st_store_t *s, int i, uint64_t seq)
{
    char o[16], key[64];
    int ol = snprintf(o, sizeof o, "u%d", i);
    snprintf(key, sizeof key, "u%d/batch-1-%llu.parquet", i, (unsigned long long)seq);
    st_tier_obj_t ob = {{1, 9, 3, 100}, seq, key, NULL, 0};
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

/* Each file's stats as owner_stats_put gave them: "s" owner "-" seq. */
static void stats_want(char *b, size_t n, const char *o, uint64_t seq)
{
    snprintf(b, n, "s%s-%llu", o, (unsigned long long)seq);
}

/* Checks every file of v: the stats given to it (none for "u3"'s number 1, whose stats record an
 * older binary left naming the object it replaced). */
static void check_view_stats(const st_tview_t *v, size_t want_files)
{
    CHECK_EQ(v->fresh.n, want_files);
    for (size_t i = 0; i < v->fresh.n; i++) {
        const st_tfile_t *t = &v->fresh.v[i];
        char want[64];
        stats_want(want, sizeof want, t->part, t->fseq);
        if (!strcmp(t->part, "u3") && t->fseq == 1)
            CHECK(!t->stats && !t->stats_len);
        else
            CHECK(t->stats && t->stats_len == strlen(want) &&
                  !memcmp(t->stats, want, strlen(want)));
    }
}

/* Issue 48, the rolling upgrade: a file's stats are read from their own records ('I', beside
 * 'F'), by a whole view (one scan an owner after each step's walk) and by a delta (one beside
 * each owner's manifest); a stats record an older binary left under a number now holding
 * another object attaches to none; a session-24 record's own stats still read. */
TEST(a_view_takes_each_file_s_stats_from_its_own_record)
{
    fx_t fx;
    fx_begin(&fx);
    st_store_t *s = fx_store(&fx, 64 << 20, 0);
    st_objstore_t *cold = fx_objstore(&fx);
    int n = (int)st_tables_n();
    uint64_t w = 0;
    char want[2][64], key[2][64];
    for (int i = 0; i < 8; i++) {
        char o[16];
        int ol = snprintf(o, sizeof o, "u%d", i);
        st_tier_obj_t ob[2];
        for (uint64_t q = 1; q <= 2; q++) {
            stats_want(want[q - 1], sizeof want[0], o, q);
            snprintf(key[q - 1], sizeof key[0], "%s/batch-1-%llu.parquet", o,
                     (unsigned long long)q);
            ob[q - 1] = (st_tier_obj_t){
                {q, q, 3, 100}, q, key[q - 1], (uint8_t *)want[q - 1], strlen(want[q - 1])};
        }
        CHECK_EQ(st_tier_rebuild_owner(s, o, (size_t)ol, ob, 2, &(st_tier_stat_t){0}, &w), ST_OK);
    }
    uint8_t k[ST__TIER_MKEY_MAX];
    st_buf_t v = {0};
    st_tier_file_t f = {1, 1, 3, 100};
    /* u3: an older binary's compaction put another object under number 1 ('I' left as it was) */
    st_buf_append(&v, &f, sizeof f);
    st_buf_puts(&v, "u3/batch-1-9.1.parquet");
    CHECK_EQ(st_store_put(s, k, st__tier_mkey(k, 'F', "u3", 2, true, 1), v.data, v.len, &w), ST_OK);
    /* u5: number 2 as the session-24 binary wrote it (its stats after the key, none beside) */
    stats_want(want[0], sizeof want[0], "u5", 2);
    st_buf_reset(&v);
    st_tier_rec_value(&v, &f, "u5/batch-1-2.parquet", (const uint8_t *)want[0], strlen(want[0]));
    CHECK_EQ(st_store_put(s, k, st__tier_mkey(k, 'F', "u5", 2, true, 2), v.data, v.len, &w), ST_OK);
    CHECK_EQ(st__tier_stats_del(s, "u5", 2, 2, &w), ST_OK);
    st_buf_free(&v);
    fx_settle(&fx, s);

    st_tview_t tv[ST_TABLES_MAX];
    uint64_t visited = 0;
    CHECK_EQ(st_tables_view(s, cold, true, tv, n, &visited), ST_OK); /* whole */
    check_view_stats(&tv[0], 16);
    for (int i = 0; i < n; i++)
        st_tview_free(&tv[i]);
    visited = 0;
    CHECK_EQ(st_tables_view(s, cold, false, tv, n, &visited), ST_OK); /* the marked owners' */
    CHECK_EQ(tv[0].parts.n, 8u);
    check_view_stats(&tv[0], 16);
    for (int i = 0; i < n; i++)
        st_tview_free(&tv[i]);
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

/* A view read in steps across loop turns (slice.c's, each step one owner: deadline 0): an owner
 * written after the marks were read, before or after the view read its records, keeps its mark
 * once the view's marks are cleared (the next tick reads it again); a whole walk in steps reads
 * each owner's records once, each owner whole. */
TEST(a_view_in_steps_keeps_the_marks_of_owners_written_between_them)
{
    fx_t fx;
    fx_begin(&fx);
    st_store_t *s = fx_store(&fx, 64 << 20, 0);
    st_objstore_t *cold = fx_objstore(&fx);
    int n = (int)st_tables_n(), rc, steps = 0;
    for (int i = 0; i < 4; i++)
        owner_put(s, i, 1);
    fx_settle(&fx, s);
    st_tview_t v[ST_TABLES_MAX];
    st_tbuild_t b;
    CHECK_EQ(st_tables_view_begin(s, false, v, n, true, &b), ST_OK);
    CHECK_EQ(st_tables_view_step(s, cold, &b, v, n, true, 0, NULL, NULL), 1); /* u0 only */
    CHECK_EQ(v[0].fresh.n, 1u);
    owner_put(s, 0, 2); /* read before this write */
    owner_put(s, 3, 2); /* read after it, its mark as read before */
    fx_settle(&fx, s);
    while ((rc = st_tables_view_step(s, cold, &b, v, n, true, 0, NULL, NULL)) == 1)
        steps++;
    CHECK_EQ(rc, ST_OK);
    CHECK(steps >= 2);
    CHECK_EQ(v[0].parts.n, 4u);
    CHECK_EQ(v[0].fresh.n, 5u); /* u0's first object, u1's, u2's, u3's two */
    st_tbuild_free(&b);
    size_t off = 0;
    while (!st_tview_clear_step(s, &v[0], &off, 0))
        ;
    fx_settle(&fx, s);
    CHECK_EQ(marks(s), 2); /* u0 and u3: written after the marks were read */
    for (int i = 0; i < n; i++)
        st_tview_free(&v[i]);

    /* a whole walk in steps: every file record once, an owner a step */
    CHECK_EQ(st_tables_view_begin(s, true, v, n, true, &b), ST_OK);
    for (steps = 0; (rc = st_tables_view_step(s, cold, &b, v, n, true, 0, NULL, NULL)) == 1;)
        steps++;
    CHECK_EQ(rc, ST_OK);
    CHECK(steps >= 3);
    CHECK_EQ(v[0].fresh.n, 6u);
    st_tfiles_sort(&v[0].fresh);
    for (size_t i = 1; i < v[0].fresh.n; i++)
        CHECK(strcmp(v[0].fresh.v[i - 1].key, v[0].fresh.v[i].key) != 0);
    st_tbuild_free(&b);
    for (int i = 0; i < n; i++)
        st_tview_free(&v[i]);
    st_objstore_close(cold);
    fx_close_store(&fx, s);
    fx_end(&fx);
}

/* Owner o with one object key, put back (marked). */
static void obj_put(st_store_t *s, const char *o, const char *key)
{
    st_tier_obj_t ob = {{1, 9, 3, 100}, 1, (char *)key, NULL, 0};
    uint64_t w = 0;
    CHECK_EQ(st_tier_rebuild_owner(s, o, strlen(o), &ob, 1, &(st_tier_stat_t){0}, &w), ST_OK);
}

/* ---- GET /v1/admin/tables's pending: a running count (look.c, issue 48) ---- */

/* A flush's swap: owner o's object seq (key) in. */
static void flush_one(st_store_t *s, const char *o, uint64_t seq, const char *key)
{
    st_tier_file_t f = {1, 9, 3, 100};
    st_tier_swap_t sw = {.fseq = seq, .file = &f, .key = key};
    uint64_t w = 0;
    CHECK_EQ(st__tier_swap(s, o, strlen(o), &sw, &w), ST_OK);
}

/* A compaction's (or, key NULL, retention's) swap: owner o's objects replaced by object seq. */
static void replace_all(st_store_t *s, const char *o, uint64_t seq, const char *key)
{
    st_tier_manifest_t m;
    uint64_t w = 0;
    CHECK_EQ(st_tier_manifest(s, o, strlen(o), false, &m, &w), ST_OK);
    st_tier_file_t f = {1, 9, key ? 3 : 0, 100};
    st_tier_swap_t sw = {.fseq = seq, .old = m.v, .nold = m.n, .file = &f, .key = key};
    CHECK_EQ(st__tier_swap(s, o, strlen(o), &sw, &w), ST_OK);
    st_tier_manifest_free(&m);
}

static bool committed(st_store_t *s, int ti, const char *part, const char *key)
{
    uint8_t k[ST_KEY_MAX + 1];
    const void *v;
    size_t kl = st_tables_prov_key(k, ti, part, key), vl;
    uint64_t w = 0;
    return kl && st_store_get(s, k, kl, &v, &vl, &w) == ST_OK;
}

/* One commit as tables.c and slice.c run it: the view (every dirty owner), merged with the
 * owners' committed files; meanwhile (between the view and the loop's apply) between(s); then a
 * provenance record per new file, each taking its object off the count when its file record is
 * still there (st_tables_pending_there), the marks cleared, the count checked. */
static void commit(fx_t *fx, st_store_t *s, st_objstore_t *cold, void (*between)(st_store_t *s))
{
    int n = (int)st_tables_n();
    st_tview_t v[ST_TABLES_MAX];
    st_tfiles_t live[ST_TABLES_MAX], prev[ST_TABLES_MAX] = {{0}};
    st_tgone_t gone[ST_TABLES_MAX];
    st_tstrs_t cm = {0};
    CHECK_EQ(st_tables_view(s, cold, false, v, n, NULL), ST_OK);
    for (int i = 0; i < n; i++) {
        for (size_t f = 0; f < v[i].fresh.n; f++)
            if (committed(s, i, v[i].fresh.v[f].part, v[i].fresh.v[f].key)) {
                st_tfile_t c = tfile_dup(&v[i].fresh.v[f]);
                c.snap = c.seq = 1;
                st_vec_push(&prev[i], c);
            }
        st_tview_merge(&v[i], &prev[i], &cm, &live[i], &gone[i]);
    }
    if (between) between(s);
    uint64_t w = 0;
    uint8_t k[ST_KEY_MAX + 1], val[32] = {0};
    for (int i = 0; i < n; i++) {
        int64_t done = 0;
        for (size_t f = 0; f < live[i].n; f++) {
            if (st_tfiles_find(&prev[i], live[i].v[f].key)) continue;
            size_t kl = st_tables_prov_key(k, i, live[i].v[f].part, live[i].v[f].key);
            CHECK_EQ(st_store_put(s, k, kl, val, sizeof val, &w), ST_OK);
            const st_tfile_t *lf = &live[i].v[f]; /* its file record's number, as slice.c has */
            done += st_tables_pending_there(s, i, k, kl, !between, /* nothing written since */
                                            lf->has_fseq ? &lf->fseq : NULL);
        }
        st_tables_pending_add(s, i, -done);
        st_tview_clear(s, &v[i]);
        st_tables_pending_checked(s, i);
        st_vec_free(&live[i]);
        st_vec_free(&gone[i]);
        st_tfiles_free(&prev[i]);
        st_tview_free(&v[i]);
    }
    fx_settle(fx, s);
}

static int64_t pending(fx_t *fx, st_store_t *s, int ti)
{
    int64_t p[ST_TABLES_MAX];
    st_tables_pending(s, (int)st_tables_n(), p);
    fx_settle(fx, s);
    return p[ti];
}

/* The count's record as stored (-1000: none). */
static int64_t stored(st_store_t *s, int ti)
{
    uint8_t k[ST_KEY_MAX + 1];
    const void *v;
    size_t vl;
    uint64_t w = 0;
    if (st_store_get(s, k, st_tables_pending_key(k, ti), &v, &vl, &w) != ST_OK || vl != 8)
        return -1000;
    return (int64_t)st_be64_get(v);
}

static void set_stored(fx_t *fx, st_store_t *s, int ti, int64_t n)
{
    uint8_t k[ST_KEY_MAX + 1], v[8];
    uint64_t w = 0;
    st_be64_put(v, (uint64_t)n);
    CHECK_EQ(st_store_put(s, k, st_tables_pending_key(k, ti), v, sizeof v, &w), ST_OK);
    fx_settle(fx, s);
}

#define BIG 600 /* past the 256 owners the route once read */

/* Meanwhile a commit runs: u1's uncommitted object compacted into another (its file record gone
 * before the commit's provenance lands), u7 flushes a second object. */
static void meanwhile(st_store_t *s)
{
    replace_all(s, "u1", 5, "u1/batch-1-5.parquet");
    flush_one(s, "u7", 2, "u7/batch-1-2.parquet");
}

TEST(pending_is_an_exact_running_count_at_any_scale)
{
    fx_t fx;
    fx_begin(&fx);
    st_store_t *s = fx_store(&fx, 64 << 20, 0);
    st_objstore_t *cold = fx_objstore(&fx);
    st_tier_on_file(st_tables_file_changed);
    st_tables_pending_open();
    int n = (int)st_tables_n(), rooms = st_table_of_tag('r');
    CHECK(rooms > 0 && rooms < n);
    char o[32], key[64];
    /* a store without counts: recounted (0) and written by the first read */
    CHECK_EQ(stored(s, 0), -1000);
    CHECK_EQ(pending(&fx, s, 0), 0);
    CHECK_EQ(stored(s, 0), 0);
    CHECK_EQ(stored(s, rooms), 0);
    for (int i = 0; i < BIG; i++) {
        snprintf(o, sizeof o, "u%d", i);
        snprintf(key, sizeof key, "u%d/batch-1-1.parquet", i);
        flush_one(s, o, 1, key);
    }
    for (int i = 0; i < 5; i++) {
        snprintf(o, sizeof o, "~rhall%d", i);
        snprintf(key, sizeof key, "r/hall%d/batch-1-1.parquet", i);
        flush_one(s, o, 1, key);
    }
    fx_settle(&fx, s);
    CHECK_EQ(pending(&fx, s, 0), BIG); /* every object, one record read */
    CHECK_EQ(pending(&fx, s, rooms), 5);

    /* a commit while u1 compacts and u7 flushes: what is left is exactly those two objects */
    commit(&fx, s, cold, meanwhile);
    CHECK(committed(s, 0, "u0", "u0/batch-1-1.parquet"));
    CHECK(!committed(s, 0, "u1", "u1/batch-1-5.parquet"));
    CHECK_EQ(pending(&fx, s, 0), 2);
    CHECK_EQ(pending(&fx, s, rooms), 0);

    /* a compaction of a committed object: its replacement is pending */
    replace_all(s, "u2", 5, "u2/batch-1-5.parquet");
    fx_settle(&fx, s);
    CHECK_EQ(pending(&fx, s, 0), 3);
    /* an erasure: a committed object goes (no change), an uncommitted one too (one less) */
    bool busy = false;
    uint64_t w = 0;
    CHECK_EQ(st_tier_forget(NULL, s, "u3", 2, 64, &busy, &w), ST_OK);
    CHECK_EQ(st_tier_forget(NULL, s, "u1", 2, 64, &busy, &w), ST_OK);
    fx_settle(&fx, s);
    CHECK_EQ(pending(&fx, s, 0), 2);
    /* retention drops a committed object: no change */
    replace_all(s, "u4", 6, NULL);
    fx_settle(&fx, s);
    CHECK_EQ(pending(&fx, s, 0), 2);
    commit(&fx, s, cold, NULL);
    CHECK_EQ(pending(&fx, s, 0), 0);
    CHECK_EQ(marks(s), 0);
    double repairs =
        st_metric_value(st_metrics_counter("strata_tables_pending_repairs_total", "", ""));
    CHECK_EQ(repairs, 0);

    /* the self-check: a count not 0 while no owner is dirty is repaired (and counted) */
    set_stored(&fx, s, 0, 7);
    CHECK_EQ(pending(&fx, s, 0), 0);
    CHECK_EQ(stored(s, 0), 0);
    /* a negative count is recounted */
    flush_one(s, "u8", 2, "u8/batch-1-2.parquet");
    fx_settle(&fx, s);
    CHECK_EQ(pending(&fx, s, 0), 1);
    set_stored(&fx, s, 0, -3);
    CHECK_EQ(pending(&fx, s, 0), 1);
    CHECK_EQ(stored(s, 0), 1);
    CHECK_EQ(st_metric_value(st_metrics_counter("strata_tables_pending_repairs_total", "", "")),
             repairs + 2);
    /* a 0 while an owner is dirty (a store upgraded from one without provenance records): a
     * read takes it (it can be right), the open's init recounts it, not as a drift */
    set_stored(&fx, s, 0, 0);
    CHECK_EQ(pending(&fx, s, 0), 0);
    st_tables_pending_init(s, n);
    fx_settle(&fx, s);
    CHECK_EQ(stored(s, 0), 1);
    CHECK_EQ(pending(&fx, s, 0), 1);
    CHECK_EQ(st_metric_value(st_metrics_counter("strata_tables_pending_repairs_total", "", "")),
             repairs + 2);
    /* rebuild-meta puts file records without the observer, then recounts */
    obj_put(s, "u9999", "u9999/batch-1-1.parquet");
    uint64_t rw = 0;
    CHECK_EQ(st_tables_pending_recount(s, &rw), ST_OK);
    fx_settle(&fx, s);
    CHECK_EQ(pending(&fx, s, 0), 2);
    st_tier_on_file(NULL);
    st_objstore_close(cold);
    fx_close_store(&fx, s);
    fx_end(&fx);
}

RUN_TESTS("tables_view")
