/* SPDX-License-Identifier: MIT */
/*
 * Iceberg table metadata files (format version 2) as cJSON documents: a strict reader (they come
 * from object storage: another writer's, or a damaged one), version 1 of a table, and the next
 * version after a commit (its snapshot added, expired snapshots and old metadata files out).
 * Integers are written as raw digits (never 1e+15), and strata's own ids stay below 2^53 so every
 * JSON reader keeps them exact.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

void st_tstrs_free(st_tstrs_t *v)
{
    for (size_t i = 0; i < v->n; i++)
        free(v->v[i]);
    st_vec_free(v);
}

int st_tstrs_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static cJSON *st__int(int64_t v)
{
    char b[24];
    snprintf(b, sizeof b, "%lld", (long long)v);
    return cJSON_CreateRaw(b);
}

static void st__set(cJSON *o, const char *name, cJSON *item)
{
    if (cJSON_GetObjectItemCaseSensitive(o, name))
        cJSON_ReplaceItemInObjectCaseSensitive(o, name, item);
    else
        cJSON_AddItemToObject(o, name, item);
}

int64_t st_tmeta_i64(const cJSON *o, const char *name, int64_t dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (cJSON_IsRaw(v)) return strtoll(v->valuestring, NULL, 10);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : dflt;
}

/* ---- the reader ---- */
/* A whole number JSON keeps exact (|v| < 2^53). */
static bool st__is_int(const cJSON *v)
{
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) &&
           floor(v->valuedouble) == v->valuedouble && fabs(v->valuedouble) < 9007199254740992.0;
}

static bool st__int_member(const cJSON *o, const char *name, bool need)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return v ? st__is_int(v) : !need;
}

static bool st__meta_str(const cJSON *o, const char *name)
{
    return cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, name));
}

/* An array member (absent: fine unless need) whose items are all objects passing check. */
static bool st__array_of(const cJSON *o, const char *name, bool need, bool (*check)(const cJSON *))
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!a) return !need;
    if (!cJSON_IsArray(a)) return false;
    const cJSON *it;
    cJSON_ArrayForEach(it, a)
    {
        if (!cJSON_IsObject(it) || (check && !check(it))) return false;
    }
    return true;
}

static bool st__snapshot_ok(const cJSON *s)
{
    const cJSON *sum = cJSON_GetObjectItemCaseSensitive(s, "summary");
    const cJSON *par = cJSON_GetObjectItemCaseSensitive(s, "parent-snapshot-id");
    return st__int_member(s, "snapshot-id", true) && st__int_member(s, "sequence-number", true) &&
           st__int_member(s, "timestamp-ms", true) && st__meta_str(s, "manifest-list") &&
           (!par || cJSON_IsNull(par) || st__is_int(par)) && cJSON_IsObject(sum) &&
           st__meta_str(sum, "operation") && st__int_member(s, "schema-id", false);
}

static bool st__snaplog_ok(const cJSON *e)
{
    return st__int_member(e, "timestamp-ms", true) && st__int_member(e, "snapshot-id", true);
}

static bool st__metalog_ok(const cJSON *e)
{
    return st__int_member(e, "timestamp-ms", true) && st__meta_str(e, "metadata-file");
}

static bool st__doc_ok(const cJSON *d)
{
    const cJSON *fv = cJSON_GetObjectItemCaseSensitive(d, "format-version");
    const cJSON *cur = cJSON_GetObjectItemCaseSensitive(d, "current-snapshot-id");
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(d, "properties");
    const cJSON *refs = cJSON_GetObjectItemCaseSensitive(d, "refs");
    const cJSON *uuid = cJSON_GetObjectItemCaseSensitive(d, "table-uuid");
    if (!cJSON_IsObject(d) || !st__is_int(fv) || fv->valuedouble != 2) return false;
    if (!cJSON_IsString(uuid) || strlen(uuid->valuestring) != 36) return false;
    if (!st__meta_str(d, "location") || !st__int_member(d, "last-sequence-number", true) ||
        !st__int_member(d, "last-updated-ms", true) || !st__int_member(d, "last-column-id", true) ||
        !st__int_member(d, "current-schema-id", true) ||
        !st__int_member(d, "default-spec-id", true) ||
        !st__int_member(d, "last-partition-id", true))
        return false;
    if (cur && !cJSON_IsNull(cur) && !st__is_int(cur)) return false;
    if (props && !cJSON_IsObject(props)) return false;
    if (refs && !cJSON_IsObject(refs)) return false;
    const cJSON *p;
    cJSON_ArrayForEach(p, props)
    {
        if (!cJSON_IsString(p)) return false;
    }
    return st__array_of(d, "schemas", true, NULL) &&
           st__array_of(d, "partition-specs", true, NULL) &&
           st__array_of(d, "snapshots", false, st__snapshot_ok) &&
           st__array_of(d, "snapshot-log", false, st__snaplog_ok) &&
           st__array_of(d, "metadata-log", false, st__metalog_ok) &&
           st__array_of(d, "sort-orders", false, NULL);
}

int st_tables_meta_parse(const void *data, size_t len, cJSON **out)
{
    *out = NULL;
    st_json_info_t info = {0};
    if (len == 0 || len > ST_TABLES_META_MAX || st_json_check(data, len, &info) != ST_OK ||
        info.nul)
        return ST_EINVAL;
    cJSON *d = cJSON_ParseWithLength(data, len);
    if (!d) return ST_EINVAL;
    if (!st__doc_ok(d)) {
        cJSON_Delete(d);
        return ST_EINVAL;
    }
    *out = d;
    return ST_OK;
}

/* ---- version 1 ---- */
void st_tables_random(void *p, size_t n)
{
    uint8_t *b = p;
    while (n) {
        ssize_t got = getrandom(b, n, 0);
        if (got <= 0) continue; /* EINTR; the pool is always ready after boot */
        b += got;
        n -= (size_t)got;
    }
}

static void st__uuid(char out[37])
{
    uint8_t r[16];
    st_tables_random(r, sizeof r);
    r[6] = (uint8_t)((r[6] & 0x0f) | 0x40);
    r[8] = (uint8_t)((r[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", r[0],
             r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13],
             r[14], r[15]);
}

void st_tables_uuid(char out[37])
{
    st__uuid(out);
}

static cJSON *st__props(const st_table_def_t *d)
{
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "write.metadata.previous-versions-max", "100");
    cJSON_AddStringToObject(p, "write.format.default", "parquet");
    cJSON_AddStringToObject(p, "schema.name-mapping.default", d->name_mapping);
    st_tables_metrics_props(d, p); /* metrics.c */
    return p;
}

cJSON *st_tmeta_v1(const st_table_def_t *d, const char *location, int64_t now_ms)
{
    char uuid[37];
    st__uuid(uuid);
    cJSON *m = cJSON_CreateObject();
    cJSON_AddItemToObject(m, "format-version", st__int(2));
    cJSON_AddStringToObject(m, "table-uuid", uuid);
    cJSON_AddStringToObject(m, "location", location);
    cJSON_AddItemToObject(m, "last-sequence-number", st__int(0));
    cJSON_AddItemToObject(m, "last-updated-ms", st__int(now_ms));
    cJSON_AddItemToObject(m, "last-column-id", st__int(d->last_column_id));
    cJSON *schemas = cJSON_AddArrayToObject(m, "schemas");
    cJSON_AddItemToArray(schemas, cJSON_Parse(d->ice.schema_json));
    cJSON_AddItemToObject(m, "current-schema-id", st__int(0));
    char spec[256];
    snprintf(spec, sizeof spec,
             "[{\"spec-id\":0,\"fields\":[{\"name\":\"%s\",\"transform\":\"identity\","
             "\"source-id\":%d,\"field-id\":%d}]}]",
             d->ice.part_name, d->ice.part_source_id, d->ice.part_field_id);
    cJSON_AddItemToObject(m, "partition-specs", cJSON_Parse(spec));
    cJSON_AddItemToObject(m, "default-spec-id", st__int(0));
    cJSON_AddItemToObject(m, "last-partition-id", st__int(d->ice.part_field_id));
    cJSON_AddItemToObject(m, "properties", st__props(d));
    cJSON_AddNullToObject(m, "current-snapshot-id");
    cJSON_AddArrayToObject(m, "snapshots");
    cJSON_AddArrayToObject(m, "snapshot-log");
    cJSON_AddArrayToObject(m, "metadata-log");
    cJSON_AddItemToObject(m, "sort-orders", cJSON_Parse("[{\"order-id\":0,\"fields\":[]}]"));
    cJSON_AddItemToObject(m, "default-sort-order-id", st__int(0));
    cJSON_AddObjectToObject(m, "refs");
    return m;
}

/* ---- the next version ---- */
static cJSON *st__array(cJSON *d, const char *name)
{
    cJSON *a = cJSON_GetObjectItemCaseSensitive(d, name);
    if (!cJSON_IsArray(a)) {
        a = cJSON_CreateArray();
        st__set(d, name, a);
    }
    return a;
}

static cJSON *st__summary(const st_tsnap_t *s)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "operation", s->op);
    const struct {
        const char *k;
        int64_t v;
    } c[] = {{"added-data-files", s->added_files},
             {"deleted-data-files", s->deleted_files},
             {"added-records", s->added_rows},
             {"deleted-records", s->deleted_rows},
             {"total-records", s->total_rows},
             {"total-data-files", s->total_files},
             {"total-delete-files", 0},
             {"total-position-deletes", 0},
             {"total-equality-deletes", 0}};
    char b[24];
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        snprintf(b, sizeof b, "%lld", (long long)c[i].v);
        cJSON_AddStringToObject(o, c[i].k, b);
    }
    return o;
}

/* Drops expired snapshots (their manifest lists to *expired) and their snapshot-log entries. */
static void st__expire_snapshots(cJSON *d, const st_tsnap_t *s, st_tstrs_t *expired)
{
    cJSON *snaps = st__array(d, "snapshots"), *log = st__array(d, "snapshot-log");
    cJSON *it = snaps->child;
    while (it) {
        cJSON *next = it->next;
        int64_t id = st_tmeta_i64(it, "snapshot-id", 0);
        if (id != s->id &&
            (s->expire_all || st_tmeta_i64(it, "timestamp-ms", 0) < s->ts_ms - s->keep_ms)) {
            const cJSON *ml = cJSON_GetObjectItemCaseSensitive(it, "manifest-list");
            if (cJSON_IsString(ml))
                st_vec_push(expired, st_strndup(ml->valuestring, strlen(ml->valuestring)));
            for (cJSON *e = log->child, *en; e; e = en) {
                en = e->next;
                if (st_tmeta_i64(e, "snapshot-id", 0) == id)
                    cJSON_Delete(cJSON_DetachItemViaPointer(log, e));
            }
            cJSON_Delete(cJSON_DetachItemViaPointer(snaps, it));
        }
        it = next;
    }
}

/* The metadata file prev_uri (NULL: none, a first version) into metadata-log, as of prev_ms; the
 * oldest beyond ST_TABLES_LOG_MAX out, into *dropped. */
static void st__metalog(cJSON *d, const char *prev_uri, int64_t prev_ms, st_tstrs_t *dropped)
{
    if (!prev_uri) return;
    cJSON *ml = st__array(d, "metadata-log"), *me = cJSON_CreateObject();
    cJSON_AddItemToObject(me, "timestamp-ms", st__int(prev_ms));
    cJSON_AddStringToObject(me, "metadata-file", prev_uri);
    cJSON_AddItemToArray(ml, me);
    while (cJSON_GetArraySize(ml) > ST_TABLES_LOG_MAX) {
        cJSON *old = cJSON_DetachItemFromArray(ml, 0);
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(old, "metadata-file");
        if (cJSON_IsString(f))
            st_vec_push(dropped, st_strndup(f->valuestring, strlen(f->valuestring)));
        cJSON_Delete(old);
    }
}

cJSON *st_tmeta_next(const cJSON *doc, const st_tsnap_t *s, st_tstrs_t *expired,
                     st_tstrs_t *dropped)
{
    cJSON *d = cJSON_Duplicate(doc, 1);
    if (!d) return NULL;
    int64_t prev_ms = st_tmeta_i64(d, "last-updated-ms", s->ts_ms);
    st__set(d, "last-sequence-number", st__int(s->seq));
    st__set(d, "last-updated-ms", st__int(s->ts_ms));
    st__set(d, "current-snapshot-id", st__int(s->id));
    cJSON *sn = cJSON_CreateObject();
    cJSON_AddItemToObject(sn, "snapshot-id", st__int(s->id));
    if (s->parent >= 0) cJSON_AddItemToObject(sn, "parent-snapshot-id", st__int(s->parent));
    cJSON_AddItemToObject(sn, "sequence-number", st__int(s->seq));
    cJSON_AddItemToObject(sn, "timestamp-ms", st__int(s->ts_ms));
    cJSON_AddStringToObject(sn, "manifest-list", s->list_uri);
    cJSON_AddItemToObject(sn, "summary", st__summary(s));
    cJSON_AddItemToObject(sn, "schema-id", st__int(0));
    cJSON_AddItemToArray(st__array(d, "snapshots"), sn);
    cJSON *le = cJSON_CreateObject();
    cJSON_AddItemToObject(le, "timestamp-ms", st__int(s->ts_ms));
    cJSON_AddItemToObject(le, "snapshot-id", st__int(s->id));
    cJSON_AddItemToArray(st__array(d, "snapshot-log"), le);
    cJSON *refs = cJSON_GetObjectItemCaseSensitive(d, "refs");
    if (!cJSON_IsObject(refs)) {
        refs = cJSON_CreateObject();
        st__set(d, "refs", refs);
    }
    cJSON *main = cJSON_CreateObject();
    cJSON_AddItemToObject(main, "snapshot-id", st__int(s->id));
    cJSON_AddStringToObject(main, "type", "branch");
    st__set(refs, "main", main);
    st__metalog(d, s->prev_uri, prev_ms, dropped);
    st__expire_snapshots(d, s, expired);
    return d;
}

cJSON *st_tmeta_expire(const cJSON *doc, int64_t ts_ms, const char *prev_uri, st_tstrs_t *expired,
                       st_tstrs_t *dropped)
{
    cJSON *d = cJSON_Duplicate(doc, 1);
    if (!d) return NULL;
    int64_t prev_ms = st_tmeta_i64(d, "last-updated-ms", ts_ms);
    st__set(d, "last-updated-ms", st__int(ts_ms));
    st__metalog(d, prev_uri, prev_ms, dropped);
    st_tsnap_t s = {.id = st_tmeta_i64(d, "current-snapshot-id", -1), .expire_all = true};
    st__expire_snapshots(d, &s, expired);
    return d;
}
