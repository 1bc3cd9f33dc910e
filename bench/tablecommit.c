/* SPDX-License-Identifier: MIT */
/*
 * tablecommit: what one Iceberg table commit costs as the table grows (issues 45, 48). Builds
 * the `messages` table with N data files in a file:// store (one commit), then times one commit
 * adding ADD files, one commit replacing one file (a compaction's shape), and, with ROUNDS, that
 * many commits of ADD files in a row (manifest merging at work). For each: the wall time of
 * st_table_commit and the bytes it wrote, manifests and manifest list apart from the metadata
 * JSON. Built against the tables' internals; compiles against the code before fast append too
 * (the commit's signature then had no manifest names), so the same program measures both.
 *
 *   build/strata-tablecommit N ADD [ROUNDS]
 */
#include "../src/tables/internal.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const uint64_t inc = 0x5eed;

/* Sum of the sizes of dir's files, manifests and lists (.avro) apart from the rest. */
static void sizes(const char *dir, long long *avro, long long *other, long *n)
{
    *avro = *other = 0;
    *n = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[4096];
    while (d && (e = readdir(d))) {
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (e->d_name[0] == '.' || stat(p, &st) != 0) continue;
        size_t l = strlen(e->d_name);
        if (l > 5 && strcmp(e->d_name + l - 5, ".avro") == 0)
            *avro += st.st_size;
        else
            *other += st.st_size;
        (*n)++;
    }
    if (d) closedir(d);
}

static void add_file(st_objstore_t *ms, st_tfiles_t *v, long i)
{
    char key[128], part[32];
    st_buf_t k = {0}, uri = {0};
    snprintf(part, sizeof part, "user%07ld", i);
    st_tier_key_writer(&k, inc);
    st_buf_appendc(&k, 0);
    snprintf(key, sizeof key, "%s/batch-%07ld-%s.parquet", part, i, k.data);
    st_objstore_uri(ms, key, &uri);
    st_buf_appendc(&uri, 0);
    st_tfile_t f = {.key = st_strndup(key, strlen(key)),
                    .uri = st_buf_steal(&uri, NULL),
                    .part = st_strndup(part, strlen(part)),
                    .rows = 10,
                    .size = 4096};
    st_vec_push(v, f);
    st_buf_free(&k);
}

static void copy(st_tfiles_t *to, const st_tfiles_t *from)
{
    st_tfiles_free(to);
    for (size_t i = 0; i < from->n; i++) {
        st_tfile_t f = from->v[i];
        f.key = st_strndup(f.key, strlen(f.key));
        f.uri = st_strndup(f.uri, strlen(f.uri));
        f.part = st_strndup(f.part, strlen(f.part));
        st_vec_push(to, f);
    }
}

typedef struct {
    st_objstore_t *ms;
    st_tmeta_t m;
    st_tfiles_t committed;
    st_tstrs_t mans;
    st_tier_writer_t w;
    char dir[512];
} bench_t;

/* Commits live (sorted) against the committed set: ms and bytes written. */
static double commit(bench_t *b, st_tfiles_t *live, long long *avro, long long *meta)
{
    const st_table_def_t *d = st_table_def(0);
    long long a0, o0, a1, o1;
    long n0, n1;
    sizes(b->dir, &a0, &o0, &n0);
    st_tcommit_t res;
    int64_t t0 = st_now_us();
#ifdef ST_TABLES_MANS_MAX
    int rc = st_table_commit(b->ms, d, &b->m, live, &b->committed, &b->mans, INT64_MAX / 4, false,
                             &b->w, &res);
#else
    int rc =
        st_table_commit(b->ms, d, &b->m, live, &b->committed, INT64_MAX / 4, false, &b->w, &res);
#endif
    int64_t t1 = st_now_us();
    if (rc != ST_OK || !res.done) {
        fprintf(stderr, "commit failed: %s\n", st_strerror(rc));
        exit(1);
    }
    sizes(b->dir, &a1, &o1, &n1);
    *avro = a1 - a0;
    *meta = o1 - o0;
#ifdef ST_TABLES_MANS_MAX
    if (res.mans_set) {
        st_tstrs_free(&b->mans);
        b->mans = res.mans;
    }
#endif
    copy(&b->committed, live);
    return (double)(t1 - t0) / 1000.0;
}

static int manifests(bench_t *b)
{
    const cJSON *s;
    int64_t cur = st_tmeta_i64(b->m.doc, "current-snapshot-id", -1);
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(b->m.doc, "snapshots"))
    {
        if (st_tmeta_i64(s, "snapshot-id", -1) != cur) continue;
        const char *uri = cJSON_GetObjectItemCaseSensitive(s, "manifest-list")->valuestring;
        st_buf_t root = {0}, x = {0};
        st_objstore_uri(b->ms, "", &root);
        st_ice_mlist_t l = {0};
        if (st_objstore_read(b->ms, uri + root.len, ST_TABLES_META_MAX, &x) == ST_OK)
            st_ice_manifest_list_read(&l, x.data, x.len);
        int n = (int)l.n;
        st_ice_mlist_free(&l);
        st_buf_free(&root);
        st_buf_free(&x);
        return n;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s N ADD [ROUNDS]\n", argv[0]);
        return 2;
    }
    long n = atol(argv[1]), add = atol(argv[2]), rounds = argc > 3 ? atol(argv[3]) : 0;
    bench_t b = {.w = {.current = inc}};
    char root[] = "/tmp/tablecommit-XXXXXX";
    if (!mkdtemp(root)) return 1;
    char url[600];
    snprintf(url, sizeof url, "file://%s", root);
    st_objstore_opts_t o = {.url = url};
    if (st_objstore_open(&b.ms, &o) != ST_OK) return 1;
    snprintf(b.dir, sizeof b.dir, "%s/messages/metadata", root);
    if (st_table_load(b.ms, st_table_def(0), &b.m, true) != ST_OK) return 1;
    st_tfiles_t live = {0};
    for (long i = 0; i < n; i++)
        add_file(b.ms, &live, i);
    st_tfiles_sort(&live);
    long long avro, meta;
    double ms = commit(&b, &live, &avro, &meta);
    printf("build: %ld files in one commit: %.1f ms, %lld bytes of manifests+list, %lld of "
           "metadata\n",
           n, ms, avro, meta);
    long next = n;
    for (long r = 0; r < 1 + rounds; r++) {
        for (long i = 0; i < add; i++)
            add_file(b.ms, &live, next++);
        st_tfiles_sort(&live);
        ms = commit(&b, &live, &avro, &meta);
        if (r == 0)
            printf("append: %ld files to %ld: %.1f ms, %lld bytes of manifests+list, %lld of "
                   "metadata; %d manifests listed\n",
                   add, n, ms, avro, meta, manifests(&b));
        else if (r == rounds)
            printf("append #%ld: %.1f ms, %lld bytes of manifests+list; %d manifests listed\n",
                   r + 1, ms, avro, manifests(&b));
    }
    /* a compaction's shape: one file out, one in */
    size_t mid = live.n / 2;
    free(live.v[mid].key);
    free(live.v[mid].uri);
    free(live.v[mid].part);
    live.v[mid] = live.v[live.n - 1];
    live.n--;
    add_file(b.ms, &live, next++);
    st_tfiles_sort(&live);
    ms = commit(&b, &live, &avro, &meta);
    printf("replace: one file of %zu: %.1f ms, %lld bytes of manifests+list, %lld of metadata; "
           "%d manifests listed\n",
           live.n, ms, avro, meta, manifests(&b));
    st_tfiles_free(&live);
    st_tfiles_free(&b.committed);
    st_tstrs_free(&b.mans);
    cJSON_Delete(b.m.doc);
    st_objstore_close(b.ms);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    return system(cmd) == 0 ? 0 : 1;
}
