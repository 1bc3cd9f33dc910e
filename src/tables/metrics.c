/* SPDX-License-Identifier: MIT */
/*
 * metrics: a data file's column metrics in its manifest entry (Iceberg table spec, "Manifests":
 * value_counts 109, null_value_counts 110, lower_bounds 125, upper_bounds 128), so an engine
 * planning a scan skips the files whose msg_id, timestamp or seq cannot match (issue 48).
 *
 * Where they come from: the file's own Parquet footer (its column chunks' num_values,
 * null_count, min_value and max_value: src/cold/pq_stats.c), decoded where the file was encoded
 * and kept in its file record (src/cold/colstats.c), taken from there when a commit first adds
 * the file: a commit reads no footer from object storage (SPEC §7; on S3 a commit of 4,096 new
 * files read 4,096 footers, ~10 s). Only a record from before those stats (an older binary's)
 * has its footer read, once, as before. After that they travel in the manifests (read back and
 * rewritten as they are, manifest_read.c). A footer is the file's truth whoever wrote it: a file
 * written by an older binary gets its own bounds, one whose footer has none (or that cannot be
 * read) gets none.
 * Bounds may be wider than the rows a snapshot keeps live (a position delete leaves them), never
 * narrower: they are the file's.
 *
 * What each column keeps (Iceberg's metrics modes, also set as the table's properties so a
 * writer of the table would do the same): the table's metrics_none columns (free text, user ids)
 * nothing; other strings counts only (no bounds: strings are what would name someone); other
 * top-level primitives counts and bounds, the bounds in Iceberg's binary single-value
 * serialization, which for long, timestamptz (µs), int and boolean is byte for byte Parquet's
 * PLAIN statistic (8 or 4 bytes little-endian, 1 byte). Columns under a list or struct keep
 * nothing (Iceberg keeps no bounds for repeated values either).
 */
#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

enum { ST__MX_NONE = 0, ST__MX_COUNTS, ST__MX_FULL };

/* The width of a top-level Iceberg type's bounds (and its Parquet statistic's), 0: no bounds. */
static size_t st__mx_width(const char *type)
{
    if (!strcmp(type, "long") || !strcmp(type, "timestamptz") || !strcmp(type, "timestamp"))
        return 8;
    if (!strcmp(type, "int") || !strcmp(type, "date")) return 4;
    if (!strcmp(type, "boolean")) return 1;
    return 0;
}

static bool st__mx_listed(const st_table_def_t *d, const char *name)
{
    for (const char *const *c = d->metrics_none; c && *c; c++)
        if (!strcmp(*c, name)) return true;
    return false;
}

/* A schema field's mode; *width its bounds' width (0: none). */
static int st__mx_mode(const st_table_def_t *d, const cJSON *f, size_t *width)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(f, "type");
    *width = 0;
    if (!cJSON_IsString(name) || st__mx_listed(d, name->valuestring)) return ST__MX_NONE;
    if (!cJSON_IsString(type)) return ST__MX_NONE; /* a list or struct */
    *width = st__mx_width(type->valuestring);
    return *width ? ST__MX_FULL : ST__MX_COUNTS;
}

void st_tables_metrics_cols(const st_table_def_t *d, st_tmetrics_cols_t *out)
{
    memset(out, 0, sizeof *out);
    cJSON *s = cJSON_Parse(d->ice.schema_json);
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(s, "fields"))
    {
        size_t w;
        int mode = st__mx_mode(d, f, &w);
        int id = (int)st_tmeta_i64(f, "id", 0);
        if (mode == ST__MX_NONE || id <= 0 || out->n == ST_TMETRICS_COLS) continue;
        out->c[out->n++] = (st_tmetrics_col_t){id, mode == ST__MX_FULL, (uint8_t)w};
    }
    cJSON_Delete(s);
}

void st_tables_metrics_props(const st_table_def_t *d, cJSON *props)
{
    if (!cJSON_IsObject(props)) return;
    cJSON *s = cJSON_Parse(d->ice.schema_json);
    const cJSON *f;
    char k[128];
    static const char *const modes[] = {"none", "counts", "full"};
    /* "counts": Iceberg's default, truncate(16), would keep 16 bytes of every string */
    cJSON_DeleteItemFromObjectCaseSensitive(props, "write.metadata.metrics.default");
    cJSON_AddStringToObject(props, "write.metadata.metrics.default", "counts");
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(s, "fields"))
    {
        size_t w;
        int mode = st__mx_mode(d, f, &w);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
        if (!cJSON_IsString(name) || mode == ST__MX_COUNTS) continue;              /* the default */
        if (mode == ST__MX_NONE && !st__mx_listed(d, name->valuestring)) continue; /* nested */
        snprintf(k, sizeof k, "write.metadata.metrics.column.%s", name->valuestring);
        cJSON_DeleteItemFromObjectCaseSensitive(props, k);
        cJSON_AddStringToObject(props, k, modes[mode]);
    }
    cJSON_Delete(s);
}

/* The file's footer (size bytes) into *b, its length into *flen (the footer at b's end, before
 * the 8-byte tail). */
static int st__mx_footer(st_objstore_t *cold, const char *key, uint64_t size, st_buf_t *b,
                         uint32_t *flen)
{
    enum { ST__GUESS = 16 * 1024 };
    if (size < 12) return ST_EINVAL;
    uint64_t t = size < ST__GUESS ? size : ST__GUESS;
    int rc = st_objstore_get(cold, key, size - t, (size_t)t, b);
    if (rc == ST_OK) rc = st_pq_footer_len((const uint8_t *)b->data + t - 8, size, flen);
    if (rc == ST_OK && (uint64_t)*flen + 8 > t) { /* a footer past the guess */
        st_buf_reset(b);
        rc = st_objstore_get(cold, key, size - 8 - *flen, (size_t)*flen + 8, b);
    }
    return rc;
}

/* One map<int, long> (value_counts, null_value_counts) of the columns with counts. */
static void st__mx_counts(st_buf_t *o, const st_tmetrics_cols_t *cols, const st_pq_colstat_t *s,
                          size_t ns, bool nulls)
{
    st_buf_t items = {0};
    size_t n = 0;
    for (size_t i = 0; i < cols->n; i++)
        for (size_t j = 0; j < ns; j++) {
            if (s[j].id != cols->c[i].id || (nulls && s[j].nulls < 0)) continue;
            st_avro_enc_long(&items, cols->c[i].id);
            st_avro_enc_long(&items, nulls ? s[j].nulls : s[j].values);
            n++;
        }
    st_avro_enc_long(o, n ? 1 : 0); /* union: null or the array */
    if (n) {
        st_avro_enc_long(o, (int64_t)n);
        st_buf_append(o, items.data, items.len);
        st_avro_enc_long(o, 0);
    }
    st_buf_free(&items);
}

/* One map<int, binary> (lower_bounds, upper_bounds) of the columns with bounds. */
static void st__mx_bounds(st_buf_t *o, const st_tmetrics_cols_t *cols, const st_pq_colstat_t *s,
                          size_t ns, bool upper)
{
    st_buf_t items = {0};
    size_t n = 0;
    for (size_t i = 0; i < cols->n; i++)
        for (size_t j = 0; j < ns; j++) {
            const st_tmetrics_col_t *c = &cols->c[i];
            if (s[j].id != c->id || !c->full || !s[j].bounds || s[j].len != c->width) continue;
            st_avro_enc_long(&items, c->id);
            st_avro_enc_long(&items, (int64_t)s[j].len);
            st_buf_append(&items, upper ? s[j].max : s[j].min, s[j].len);
            n++;
        }
    st_avro_enc_long(o, n ? 1 : 0);
    if (n) {
        st_avro_enc_long(o, (int64_t)n);
        st_buf_append(o, items.data, items.len);
        st_avro_enc_long(o, 0);
    }
    st_buf_free(&items);
}

/* The four maps of stats s[0..ns) (a footer's, or a file record's) appended to out. */
static void st__mx_encode(st_buf_t *out, const st_tmetrics_cols_t *cols, const st_pq_colstat_t *s,
                          size_t ns)
{
    st__mx_counts(out, cols, s, ns, false);
    st__mx_counts(out, cols, s, ns, true);
    st__mx_bounds(out, cols, s, ns, false);
    st__mx_bounds(out, cols, s, ns, true);
}

int st_tables_stats_metrics(const st_tmetrics_cols_t *cols, const uint8_t *stats, size_t sl,
                            st_buf_t *out)
{
    st_pq_colstat_t s[ST_TMETRICS_COLS * 2];
    size_t ns = 0;
    if (!cols->n) return ST_ENOTFOUND;
    int rc = st_tier_stats_decode(stats, sl, s, sizeof s / sizeof s[0], &ns);
    if (rc == ST_OK) st__mx_encode(out, cols, s, ns);
    return rc;
}

int st_tables_file_metrics(st_objstore_t *cold, const st_tmetrics_cols_t *cols, const char *key,
                           uint64_t size, st_buf_t *out)
{
    st_buf_t b = {0};
    uint32_t flen = 0;
    st_pq_colstat_t s[ST_TMETRICS_COLS * 2];
    size_t ns = 0;
    int rc = cols->n ? st__mx_footer(cold, key, size, &b, &flen) : ST_ENOTFOUND;
    if (rc == ST_OK)
        rc = st_pq_top_stats((const uint8_t *)b.data + b.len - 8 - flen, flen, s,
                             sizeof s / sizeof s[0], &ns);
    st_buf_free(&b);
    if (rc == ST_OK) st__mx_encode(out, cols, s, ns);
    return rc;
}

/* How many footers a commit reads at once: a commit adding thousands of files (a flush of that
 * many owners) waits on one round trip per ST__MX_THREADS files, not per file (an S3 GET is tens
 * of milliseconds; the object store's handles are pooled and safe on any thread). */
#define ST__MX_THREADS 8

typedef struct {
    st_objstore_t *cold;
    const st_tmetrics_cols_t *cols;
    const char *const *keys;
    const int64_t *sizes;
    size_t n;
    st_buf_t *out;
    atomic_size_t next;
} st__mx_job_t;

static void *st__mx_thread(void *arg)
{
    st__mx_job_t *j = arg;
    for (size_t i; (i = atomic_fetch_add(&j->next, 1)) < j->n;)
        if (j->sizes[i] <= 0 || st_tables_file_metrics(j->cold, j->cols, j->keys[i],
                                                       (uint64_t)j->sizes[i], &j->out[i]) != ST_OK)
            st_buf_reset(&j->out[i]);
    return NULL;
}

void st_tables_files_metrics(st_objstore_t *cold, const st_tmetrics_cols_t *cols,
                             const char *const *keys, const int64_t *sizes, size_t n, st_buf_t *out)
{
    st__mx_job_t j = {cold, cols, keys, sizes, n, out, 0};
    pthread_t t[ST__MX_THREADS - 1];
    size_t started = 0;
    while (started < ST__MX_THREADS - 1 && started + 1 < n &&
           pthread_create(&t[started], NULL, st__mx_thread, &j) == 0)
        started++;
    st__mx_thread(&j); /* this thread too (all of it when no thread could start) */
    for (size_t i = 0; i < started; i++)
        pthread_join(t[i], NULL);
}
