/* SPDX-License-Identifier: MIT */
/* Unit tests for one table's commits in a file:// store (src/tables/commit.c, fastappend.c):
 * a commit writes a manifest of what it adds and carries the parent's manifests over; a remove
 * rewrites only the manifest naming the file; expiry deletes a manifest only once no kept
 * snapshot lists it (a carried-over manifest outlives the list that added it); past
 * ST_TABLES_MANS_MAX manifests the small ones merge; a parent whose manifests do not hold what was
 * committed is healed with one manifest of every live file; at every step the current snapshot
 * names exactly the live files, once each. */
#include "../test.h"
#include "../../src/tables/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct {
    st_objstore_t *ms;
    st_buf_t root;
    st_tmeta_t m;
    st_tfiles_t live, committed;
    st_tstrs_t mans;
    st_tier_writer_t w;
    char dir[64];
} fx_t;

static void fx_open(fx_t *f)
{
    memset(f, 0, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/st-tcommit-XXXXXX");
    CHECK(mkdtemp(f->dir) != NULL);
    char url[96];
    snprintf(url, sizeof url, "file://%s", f->dir);
    st_objstore_opts_t o = {.url = url};
    CHECK_EQ(st_objstore_open(&f->ms, &o), ST_OK);
    st_objstore_uri(f->ms, "", &f->root);
    f->w.current = 0xabc;
    CHECK_EQ(st_table_load(f->ms, st_table_def(0), &f->m, true), ST_OK);
}

static void fx_close(fx_t *f)
{
    st_tfiles_free(&f->live);
    st_tfiles_free(&f->committed);
    st_tstrs_free(&f->mans);
    cJSON_Delete(f->m.doc);
    st_objstore_close(f->ms);
    st_buf_free(&f->root);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    CHECK_EQ(system(cmd), 0);
}

static void fx_add(fx_t *f, const char *user, int n)
{
    char key[96];
    st_buf_t tok = {0}, uri = {0};
    st_tier_key_writer(&tok, f->w.current);
    st_buf_appendc(&tok, 0);
    snprintf(key, sizeof key, "%s/batch-%d-%s.parquet", user, n, tok.data);
    st_objstore_uri(f->ms, key, &uri);
    st_buf_appendc(&uri, 0);
    st_tfile_t t = {.key = st_strndup(key, strlen(key)),
                    .uri = st_buf_steal(&uri, NULL),
                    .part = st_strndup(user, strlen(user)),
                    .rows = 3,
                    .size = 100};
    st_vec_push(&f->live, t);
    st_tfiles_sort(&f->live);
    st_buf_free(&tok);
}

static void fx_remove(fx_t *f, const char *user, int n)
{
    char key[96];
    st_buf_t tok = {0};
    st_tier_key_writer(&tok, f->w.current);
    st_buf_appendc(&tok, 0);
    snprintf(key, sizeof key, "%s/batch-%d-%s.parquet", user, n, tok.data);
    st_tfile_t *t = st_tfiles_find(&f->live, key);
    CHECK(t != NULL);
    free(t->key);
    free(t->uri);
    free(t->part);
    memmove(t, t + 1, (size_t)(f->live.v + f->live.n - (t + 1)) * sizeof *t);
    f->live.n--;
    st_buf_free(&tok);
}

/* Commits live; the committed set follows (as tables.c keeps it). */
static void fx_commit(fx_t *f, int64_t keep_ms, bool erase)
{
    st_tcommit_t res;
    usleep(3000); /* timestamps in ms: an older snapshot is older */
    CHECK_EQ(st_table_commit(f->ms, st_table_def(0), &f->m, &f->live, &f->committed, &f->mans,
                             keep_ms, erase, &f->w, &res),
             ST_OK);
    CHECK(res.done);
    CHECK(res.mans_set);
    st_tstrs_free(&f->mans);
    f->mans = res.mans;
    st_tfiles_free(&f->committed);
    for (size_t i = 0; i < f->live.n; i++) {
        st_tfile_t t = f->live.v[i];
        CHECK(t.man > 0 && t.man <= f->mans.n);
        t.key = st_strndup(t.key, strlen(t.key));
        t.uri = t.part = NULL; /* as read back from the store */
        st_vec_push(&f->committed, t);
    }
}

static void fx_read(fx_t *f, const char *uri, st_buf_t *b)
{
    b->len = 0;
    CHECK(strncmp(uri, f->root.data, f->root.len) == 0);
    CHECK_EQ(st_objstore_read(f->ms, uri + f->root.len, ST_TABLES_META_MAX, b), ST_OK);
}

static bool fx_exists(fx_t *f, const char *uri)
{
    st_buf_t b = {0};
    bool there = st_objstore_read(f->ms, uri + f->root.len, ST_TABLES_META_MAX, &b) == ST_OK;
    st_buf_free(&b);
    return there;
}

/* The current snapshot's manifest list into *l; checks that its manifests name exactly the live
 * files, once each, and that every line's counts agree with its entries. */
static void fx_current(fx_t *f, st_ice_mlist_t *l)
{
    int64_t cur = st_tmeta_i64(f->m.doc, "current-snapshot-id", -1);
    const cJSON *s;
    const char *list = NULL;
    cJSON_ArrayForEach(s, cJSON_GetObjectItem(f->m.doc, "snapshots"))
    {
        if (st_tmeta_i64(s, "snapshot-id", -1) == cur)
            list = cJSON_GetObjectItem(s, "manifest-list")->valuestring;
    }
    CHECK(list != NULL);
    st_buf_t b = {0};
    fx_read(f, list, &b);
    CHECK_EQ(st_ice_manifest_list_read(l, b.data, b.len), ST_OK);
    size_t named = 0;
    for (size_t i = 0; i < l->n; i++) {
        st_ice_entries_t e = {0};
        fx_read(f, l->v[i].path, &b);
        CHECK_EQ(st_ice_manifest_read(&e, b.data, b.len), ST_OK);
        int32_t added = 0, existing = 0;
        for (size_t j = 0; j < e.n; j++) {
            CHECK(e.v[j].status != ST_ICE_DELETED);
            added += e.v[j].status == ST_ICE_ADDED;
            existing += e.v[j].status == ST_ICE_EXISTING;
            const st_tfile_t *t = st_tfiles_find(&f->live, e.v[j].path + f->root.len);
            CHECK(t != NULL);
            named++;
        }
        CHECK_EQ(l->v[i].added_files, added);
        CHECK_EQ(l->v[i].existing_files, existing);
        st_ice_entries_free(&e);
    }
    CHECK_EQ(named, f->live.n);
    st_buf_free(&b);
}

TEST(fast_append_rewrite_expire)
{
    fx_t f;
    fx_open(&f);
    fx_add(&f, "amy", 1);
    fx_add(&f, "bob", 1);
    fx_commit(&f, INT64_MAX / 4, false);
    st_ice_mlist_t l1, l2, l3, l4;
    fx_current(&f, &l1);
    CHECK_EQ(l1.n, 1);
    fx_add(&f, "cat", 1);
    fx_commit(&f, INT64_MAX / 4, false);
    fx_current(&f, &l2);
    CHECK_EQ(l2.n, 2);
    CHECK_STR(l2.v[0].path, l1.v[0].path); /* carried over */
    CHECK_EQ(l2.v[1].added_files, 1);
    CHECK_EQ(l2.v[1].existing_files, 0);

    /* every earlier snapshot expires: their lists go, the manifests the new one lists stay */
    fx_add(&f, "dan", 1);
    fx_commit(&f, 0, false);
    CHECK_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(f.m.doc, "snapshots")), 1);
    fx_current(&f, &l3);
    CHECK_EQ(l3.n, 3);
    CHECK(fx_exists(&f, l1.v[0].path));
    CHECK(fx_exists(&f, l2.v[1].path));

    /* amy's file goes: only the first manifest is rewritten (bob's entry EXISTING); once the
     * snapshot listing it expires, it is deleted */
    fx_remove(&f, "amy", 1);
    fx_commit(&f, 0, true);
    fx_current(&f, &l4);
    CHECK_EQ(l4.n, 3); /* the rewritten one in the first one's place */
    CHECK(strcmp(l4.v[0].path, l3.v[0].path) != 0);
    CHECK_STR(l4.v[1].path, l3.v[1].path);
    CHECK_STR(l4.v[2].path, l3.v[2].path);
    CHECK_EQ(l4.v[0].existing_files, 1);
    CHECK_EQ(l4.v[0].added_files, 0);
    CHECK_EQ(l4.v[0].lower_len, 3);
    CHECK(memcmp(l4.v[0].lower, "bob", 3) == 0 && memcmp(l4.v[0].upper, "bob", 3) == 0);
    CHECK(!fx_exists(&f, l1.v[0].path));
    CHECK(fx_exists(&f, l3.v[1].path));
    st_ice_mlist_free(&l1);
    st_ice_mlist_free(&l2);
    st_ice_mlist_free(&l3);
    st_ice_mlist_free(&l4);
    fx_close(&f);
}

TEST(manifests_merge_past_the_bound)
{
    fx_t f;
    fx_open(&f);
    st_ice_mlist_t l;
    for (int i = 0; i < ST_TABLES_MANS_MAX + 5; i++) {
        fx_add(&f, "eve", i);
        fx_commit(&f, INT64_MAX / 4, false);
    }
    fx_current(&f, &l);
    CHECK(l.n <= ST_TABLES_MANS_MAX);
    CHECK(l.n < 10);
    st_ice_mlist_free(&l);
    /* provenance from before manifests were remembered: a remove reads them all and learns */
    for (size_t i = 0; i < f.committed.n; i++)
        f.committed.v[i].man = 0;
    fx_remove(&f, "eve", 7);
    fx_commit(&f, INT64_MAX / 4, false);
    fx_current(&f, &l);
    st_ice_mlist_free(&l);
    /* the parent's manifests hold fewer files than were committed: healed with one manifest */
    fx_add(&f, "fay", 1);
    st_tfile_t extra = {.key = st_strndup("zed/never", 9)};
    st_vec_push(&f.committed, extra);
    st_tfiles_sort(&f.committed);
    fx_commit(&f, INT64_MAX / 4, false);
    fx_current(&f, &l);
    CHECK_EQ(l.n, 1);
    CHECK_EQ(l.v[0].added_files, 1);
    CHECK_EQ((size_t)l.v[0].existing_files, f.live.n - 1);
    st_ice_mlist_free(&l);
    fx_close(&f);
}

TEST(a_wrongly_remembered_manifest_heals)
{
    fx_t f;
    fx_open(&f);
    st_ice_mlist_t l;
    fx_add(&f, "amy", 1);
    fx_commit(&f, INT64_MAX / 4, false);
    fx_add(&f, "bob", 1);
    fx_commit(&f, INT64_MAX / 4, false);
    CHECK_EQ(f.committed.n, 2);
    f.committed.v[0].man = f.committed.v[1].man; /* amy's said to be in bob's manifest */
    fx_remove(&f, "amy", 1);
    fx_commit(&f, INT64_MAX / 4, true);
    fx_current(&f, &l); /* names bob's file only */
    CHECK_EQ(l.n, 1);
    st_ice_mlist_free(&l);
    fx_close(&f);
}

/* The entries of the manifest at uri, read whole. */
static void fx_entries(fx_t *f, const char *uri, st_ice_entries_t *e)
{
    st_buf_t b = {0};
    fx_read(f, uri, &b);
    CHECK_EQ(st_ice_manifest_read(e, b.data, b.len), ST_OK);
    st_buf_free(&b);
}

/* The entry of the data file user's batch-1 in e. */
static const st_ice_file_t *fx_entry(const st_ice_entries_t *e, const char *user)
{
    char want[32];
    snprintf(want, sizeof want, "/%s/batch-1-", user);
    for (size_t i = 0; i < e->n; i++)
        if (strstr(e->v[i].path, want)) return &e->v[i];
    return NULL;
}

/* value_counts {2: 12, 5: 12}, null_value_counts {2: 0}, lower_bounds {2: 1 as 8 bytes},
 * upper_bounds null (as test_avro_read's round trip) */
static const uint8_t fx_mx[] = {2, 4, 4,  24, 10, 24, 0, 2, 2, 4, 0, 0, 2,
                                2, 4, 16, 1,  0,  0,  0, 0, 0, 0, 0, 0, 0};

/* Rewrites the current snapshot's manifest m so that user's batch-1 entry holds fx_mx, as a
 * commit reading that file's footer would have written it. */
static void fx_give_metrics(fx_t *f, size_t m, const char *user)
{
    st_ice_mlist_t l;
    st_ice_entries_t e = {0};
    fx_current(f, &l);
    CHECK(m < l.n);
    fx_entries(f, l.v[m].path, &e);
    st_ice_file_t *x = (st_ice_file_t *)fx_entry(&e, user);
    CHECK(x != NULL);
    x->metrics = fx_mx; /* borrowed: cleared before the free */
    x->metrics_len = sizeof fx_mx;
    st_buf_t b = {0};
    CHECK_EQ(st_ice_manifest(&b, &st_table_def(0)->ice, ST_ICE_DATA, e.v, e.n, true), ST_OK);
    x->metrics = NULL;
    x->metrics_len = 0;
    /* a put never overwrites: the old manifest goes first */
    CHECK_EQ(st_objstore_delete(f->ms, l.v[m].path + f->root.len), ST_OK);
    CHECK_EQ(st_objstore_put(f->ms, l.v[m].path + f->root.len, b.data, b.len), ST_OK);
    st_buf_free(&b);
    st_ice_entries_free(&e);
    st_ice_mlist_free(&l);
}

/* Whether user's batch-1 entry in the current snapshot's manifests holds fx_mx (else none). */
static bool fx_has_metrics(fx_t *f, const char *user)
{
    st_ice_mlist_t l;
    fx_current(f, &l);
    int found = 0;
    bool has = false;
    for (size_t m = 0; m < l.n; m++) {
        st_ice_entries_t e = {0};
        fx_entries(f, l.v[m].path, &e);
        const st_ice_file_t *x = fx_entry(&e, user);
        if (x) {
            found++;
            has = x->metrics_len == sizeof fx_mx && memcmp(x->metrics, fx_mx, sizeof fx_mx) == 0;
            if (!has) CHECK(x->metrics == NULL && x->metrics_len == 0);
        }
        st_ice_entries_free(&e);
    }
    CHECK_EQ(found, 1);
    st_ice_mlist_free(&l);
    return has;
}

/* A heal (one manifest of every live file) carries the already-committed files' column metrics
 * over from the parent's manifests by path: pruning survives it. A file whose entry had none keeps
 * none. Both ways to a heal: the parent's manifests hold other than what was committed, and a
 * wrongly remembered manifest found at the count after the plan. */
TEST(a_heal_keeps_the_old_files_metrics)
{
    fx_t f;
    fx_open(&f);
    st_ice_mlist_t l;
    fx_add(&f, "amy", 1);
    fx_add(&f, "bob", 1);
    fx_commit(&f, INT64_MAX / 4, false);
    fx_give_metrics(&f, 0, "amy");
    /* the parent's manifests hold fewer files than were committed: healed with one manifest */
    fx_add(&f, "cat", 1);
    st_tfile_t extra = {.key = st_strndup("zed/never", 9)};
    st_vec_push(&f.committed, extra);
    st_tfiles_sort(&f.committed);
    fx_commit(&f, INT64_MAX / 4, false);
    fx_current(&f, &l);
    CHECK_EQ(l.n, 1);
    CHECK_EQ(l.v[0].existing_files, 2);
    CHECK_EQ(l.v[0].added_files, 1);
    st_ice_mlist_free(&l);
    CHECK(fx_has_metrics(&f, "amy"));
    CHECK(!fx_has_metrics(&f, "bob")); /* it had none */
    CHECK(!fx_has_metrics(&f, "cat")); /* new, and no cold store to read its footer */
    fx_close(&f);

    /* a remove whose file's manifest is wrongly remembered: the plan names too many, healed */
    fx_open(&f);
    fx_add(&f, "amy", 1);
    fx_commit(&f, INT64_MAX / 4, false);
    fx_add(&f, "bob", 1);
    fx_commit(&f, INT64_MAX / 4, false);
    fx_give_metrics(&f, 1, "bob");
    f.committed.v[0].man = f.committed.v[1].man; /* amy's said to be in bob's manifest */
    fx_remove(&f, "amy", 1);
    fx_commit(&f, INT64_MAX / 4, true);
    fx_current(&f, &l);
    CHECK_EQ(l.n, 1);
    CHECK_EQ(l.v[0].existing_files, 1);
    st_ice_mlist_free(&l);
    CHECK(fx_has_metrics(&f, "bob"));
    fx_close(&f);
}

/* ---- a new file's metrics from its record's stats (metrics.c, src/cold/colstats.c) ---- */
static const st_pq_field_t mx_fields[] = {
    {"id", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_NONE, ST_PQ_STATS, NULL, 0, 1},
    {"name", ST_PQ_BYTE_ARRAY, ST_PQ_REQUIRED, ST_PQ_STRING, ST_PQ_STATS, NULL, 0, 2},
    {"opt", ST_PQ_INT64, ST_PQ_OPTIONAL, ST_PQ_NONE, ST_PQ_STATS, NULL, 0, 3},
    {"flag", ST_PQ_BOOLEAN, ST_PQ_REQUIRED, ST_PQ_NONE, ST_PQ_STATS, NULL, 0, 4},
    {"nostat", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_NONE, 0, NULL, 0, 5},
    {"small", ST_PQ_INT32, ST_PQ_OPTIONAL, ST_PQ_NONE, ST_PQ_STATS, NULL, 0, 6},
};
static const st_pq_schema_t mx_schema = {mx_fields, 6, -1, -1};

static void mx_put(void *arg, size_t i, st_pq_rec_t *r)
{
    (void)arg;
    static char names[40][8]; /* borrowed until st_pq_write returns */
    int nl = snprintf(names[i], sizeof names[0], "n%zu", i);
    st_pq_put_i64(r, 1000 - 7 * (int64_t)i);
    st_pq_put_str(r, names[i], (size_t)nl);
    if (i % 3 == 0 || i < 10) /* the first row group: all null */
        st_pq_put_null(r);
    else
        st_pq_put_i64(r, (int64_t)i * 11 - 200);
    st_pq_put_bool(r, i % 5 == 1);
    st_pq_put_i64(r, (int64_t)i);
    if (i % 4 == 2)
        st_pq_put_null(r);
    else
        st_pq_put_i32(r, -(int32_t)i);
}

/* The metrics a commit builds from a file record's stats are byte for byte those it read from
 * the file's footer (what the tables' e2e tests check against DuckDB), for any columns wanted;
 * stats that do not decode are refused (the commit then reads the footer). */
TEST(a_records_stats_give_the_footers_metrics_byte_for_byte)
{
    fx_t f;
    fx_open(&f);
    st_buf_t file = {0}, stats = {0};
    st_pq_write_t w = {.schema = &mx_schema, .nrows = 40, .row = mx_put, .group_rows = 10};
    CHECK_EQ(st_pq_write(&w, &file), ST_OK);
    CHECK_EQ(st_objstore_put(f.ms, "mx/one.parquet", file.data, file.len), ST_OK);
    CHECK_EQ(st_tier_stats_of(file.data, file.len, &stats), ST_OK);
    st_tmetrics_cols_t cols[3] = {
        {{{1, true, 8}, {2, false, 0}, {3, true, 8}, {4, true, 1}, {5, true, 8}, {6, true, 4}}, 6},
        {{{6, true, 4}, {3, false, 0}, {9, true, 8}}, 3}, /* another order, a column not there */
        {{{0}}, 0}};
    st_tables_metrics_cols(st_table_def(0), &cols[2]); /* the messages table's: ids not there */
    for (size_t c = 0; c < 3; c++) {
        st_buf_t read = {0}, rec = {0};
        CHECK_EQ(st_tables_file_metrics(f.ms, &cols[c], "mx/one.parquet", file.len, &read), ST_OK);
        CHECK_EQ(st_tables_stats_metrics(&cols[c], (const uint8_t *)stats.data, stats.len, &rec),
                 ST_OK);
        CHECK(read.len > 0 && read.len == rec.len && !memcmp(read.data, rec.data, rec.len));
        st_buf_free(&read);
        st_buf_free(&rec);
    }
    st_buf_t bad = {0};
    CHECK_EQ(st_tables_stats_metrics(&cols[0], (const uint8_t *)stats.data, stats.len - 1, &bad),
             ST_EINVAL);
    st_buf_free(&bad);
    st_buf_free(&stats);
    st_buf_free(&file);
    fx_close(&f);
}

RUN_TESTS("tables_commit")
