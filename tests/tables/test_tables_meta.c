/* SPDX-License-Identifier: MIT */
/* Unit tests for the Iceberg metadata documents (src/tables/meta.c) and st_objstore_uri: version
 * 1 reads back through the strict reader; a commit adds its snapshot, snapshot-log entry, main ref
 * and metadata-log entry; snapshots older than the keep window expire (never the new one), an
 * erasure's commit expires every earlier one (an ordinary delete does not), and so does a version
 * that only expires; metadata-log keeps 100 entries; the reader refuses what strata cannot
 * commit on; the message tables' fields are required exactly where the files' columns are (SPEC v5
 * §5.1); the tables are the kinds' (kinds.h), with the names, tags and indexes they always had. */
#include "../test.h"
#include "../../src/tables/internal.h"
#include "strata/catalog.h"
#include "strata/chatrows.h"
#include "strata/kinds.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static cJSON *reparse(const cJSON *d)
{
    char *text = cJSON_PrintUnformatted(d);
    cJSON *out = NULL;
    CHECK_EQ(st_tables_meta_parse(text, strlen(text), &out), ST_OK);
    free(text);
    return out;
}

static cJSON *commit(cJSON *d, int64_t id, int64_t ts, const char *op, int64_t keep, bool erase,
                     st_tstrs_t *expired, st_tstrs_t *dropped)
{
    char list[64];
    snprintf(list, sizeof list, "file:///t/metadata/snap-%lld-u.avro", (long long)id);
    st_tsnap_t s = {.id = id,
                    .parent = st_tmeta_i64(d, "current-snapshot-id", -1),
                    .seq = st_tmeta_i64(d, "last-sequence-number", 0) + 1,
                    .ts_ms = ts,
                    .op = op,
                    .list_uri = list,
                    .prev_uri = "file:///t/metadata/vN.metadata.json",
                    .keep_ms = keep,
                    .expire_all = erase};
    cJSON *n = st_tmeta_next(d, &s, expired, dropped);
    CHECK(n != NULL);
    cJSON *r = reparse(n);
    cJSON_Delete(n);
    cJSON_Delete(d);
    return r;
}

TEST(v1_reads_back)
{
    cJSON *d = st_tmeta_v1(st_table_def(1), "file:///t/room_messages", 1000);
    cJSON *r = reparse(d);
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(r, "current-snapshot-id")));
    CHECK_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(r, "snapshots")), 0);
    const cJSON *p = cJSON_GetObjectItem(r, "properties");
    CHECK(strstr(cJSON_GetObjectItem(p, "schema.name-mapping.default")->valuestring,
                 "\"room_id\",\"conversation_id\"") != NULL);
    CHECK_STR(cJSON_GetObjectItem(p, "write.metadata.metrics.column.content")->valuestring, "none");
    CHECK_EQ(st_tmeta_i64(r, "last-partition-id", 0), 1000);
    cJSON_Delete(d);
    cJSON_Delete(r);
}

TEST(commits_expire_and_an_erasure_expires_all)
{
    st_tstrs_t expired = {0}, dropped = {0};
    cJSON *d = st_tmeta_v1(st_table_def(0), "file:///t/messages", 1000);
    d = commit(d, 11, 2000, "append", 5000, false, &expired, &dropped);
    d = commit(d, 12, 3000, "append", 5000, false, &expired, &dropped);
    CHECK_EQ(expired.n, 0u);
    d = commit(d, 13, 8500, "replace", 5000, false, &expired, &dropped); /* 11, 12: before 3500 */
    CHECK_EQ(expired.n, 2u);
    CHECK_STR(expired.v[0], "file:///t/metadata/snap-11-u.avro");
    CHECK_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(d, "snapshots")), 1);
    CHECK_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(d, "snapshot-log")), 1);
    d = commit(d, 14, 8600, "append", 5000, false, &expired, &dropped);
    CHECK_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(d, "snapshots")), 2);
    /* retention's or a deleted conversation's delete: an ordinary snapshot, 13 and 14 kept */
    d = commit(d, 15, 8650, "delete", 5000, false, &expired, &dropped);
    CHECK_EQ(expired.n, 2u);
    CHECK_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(d, "snapshots")), 3);
    /* an erasure's (with a flush's files: an overwrite): every earlier one, within the window */
    d = commit(d, 16, 8700, "overwrite", 5000, true, &expired, &dropped);
    CHECK_EQ(expired.n, 5u);
    const cJSON *snaps = cJSON_GetObjectItem(d, "snapshots");
    CHECK_EQ(cJSON_GetArraySize(snaps), 1);
    CHECK_EQ(st_tmeta_i64(snaps->child, "snapshot-id", 0), 16);
    CHECK_EQ(st_tmeta_i64(snaps->child, "parent-snapshot-id", 0), 15);
    CHECK_EQ(st_tmeta_i64(snaps->child, "sequence-number", 0), 6);
    CHECK_EQ(st_tmeta_i64(d, "current-snapshot-id", 0), 16);
    CHECK_EQ(
        st_tmeta_i64(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "refs"), "main"), "snapshot-id", 0),
        16);
    CHECK_STR(
        cJSON_GetObjectItem(cJSON_GetObjectItem(snaps->child, "summary"), "operation")->valuestring,
        "overwrite");
    CHECK_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(d, "metadata-log")), 6);
    CHECK_EQ(dropped.n, 0u);
    cJSON_Delete(d);
    st_tstrs_free(&expired);
    st_tstrs_free(&dropped);
}

/* An erasure whose objects the current snapshot no longer names: a version with no new snapshot,
 * every snapshot but the current one expired (and out of snapshot-log), the current one and its
 * ref unchanged, the version before in metadata-log. */
TEST(expire_only_keeps_the_current_snapshot)
{
    st_tstrs_t expired = {0}, dropped = {0};
    cJSON *d = st_tmeta_v1(st_table_def(1), "file:///t/room_messages", 1000);
    d = commit(d, 21, 2000, "append", 100000, false, &expired, &dropped);
    d = commit(d, 22, 3000, "overwrite", 100000, false, &expired, &dropped);
    d = commit(d, 23, 4000, "delete", 100000, false, &expired, &dropped);
    CHECK_EQ(expired.n, 0u);
    cJSON *n = st_tmeta_expire(d, 5000, "file:///t/metadata/v4.metadata.json", &expired, &dropped);
    CHECK(n != NULL);
    cJSON *r = reparse(n);
    cJSON_Delete(n);
    CHECK_EQ(expired.n, 2u);
    CHECK_STR(expired.v[0], "file:///t/metadata/snap-21-u.avro");
    CHECK_STR(expired.v[1], "file:///t/metadata/snap-22-u.avro");
    const cJSON *snaps = cJSON_GetObjectItem(r, "snapshots");
    CHECK_EQ(cJSON_GetArraySize(snaps), 1);
    CHECK_EQ(st_tmeta_i64(snaps->child, "snapshot-id", 0), 23);
    CHECK_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(r, "snapshot-log")), 1);
    CHECK_EQ(st_tmeta_i64(r, "current-snapshot-id", 0), 23);
    CHECK_EQ(st_tmeta_i64(r, "last-sequence-number", 0), 3);
    CHECK_EQ(st_tmeta_i64(r, "last-updated-ms", 0), 5000);
    CHECK_EQ(
        st_tmeta_i64(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "refs"), "main"), "snapshot-id", 0),
        23);
    const cJSON *log = cJSON_GetObjectItem(r, "metadata-log");
    CHECK_EQ(cJSON_GetArraySize(log), 4);
    CHECK_STR(cJSON_GetObjectItem(cJSON_GetArrayItem(log, 3), "metadata-file")->valuestring,
              "file:///t/metadata/v4.metadata.json");
    CHECK_EQ(st_tmeta_i64(cJSON_GetArrayItem(log, 3), "timestamp-ms", 0), 4000);
    cJSON_Delete(d);
    cJSON_Delete(r);
    st_tstrs_free(&expired);
    st_tstrs_free(&dropped);
}

/* SPEC v5 §5.1 (issue 45): a message table's field is required exactly where the files' column of
 * the same field id is REQUIRED (from, content and metadata are null in tombstones). */
TEST(message_tables_required_as_the_files)
{
    const st_pq_schema_t *pq[] = {&st_pq_msg_schema, &st_pq_room_schema};
    for (int t = 0; t < 2; t++) {
        cJSON *sch = cJSON_Parse(st_table_def((size_t)t)->ice.schema_json);
        CHECK(sch != NULL);
        size_t seen = 0;
        const cJSON *f;
        cJSON_ArrayForEach(f, cJSON_GetObjectItem(sch, "fields"))
        {
            int id = (int)st_tmeta_i64(f, "id", 0);
            for (size_t i = 0; i < pq[t]->nfields; i++) {
                const st_pq_field_t *c = &pq[t]->fields[i];
                if (c->id != id) continue;
                seen++;
                CHECK_STR(cJSON_GetObjectItem(f, "name")->valuestring, c->name);
                CHECK_EQ(cJSON_IsTrue(cJSON_GetObjectItem(f, "required")),
                         c->rep == ST_PQ_REQUIRED);
            }
        }
        /* a room's files also carry conversation_id (id 3, the room's one conversation), which
         * room_messages leaves out */
        CHECK_EQ(seen, pq[t]->nfields - (size_t)t);
        cJSON_Delete(sch);
    }
    const st_pq_field_t *from = &st_pq_room_schema.fields[3],
                        *content = &st_pq_msg_schema.fields[6];
    CHECK(from->rep == ST_PQ_OPTIONAL && content->rep == ST_PQ_OPTIONAL);
}

TEST(metadata_log_keeps_100)
{
    st_tstrs_t expired = {0}, dropped = {0};
    cJSON *d = st_tmeta_v1(st_table_def(2), "file:///t/bookings", 1000);
    for (int i = 1; i <= 103; i++)
        d = commit(d, i, 1000 + i, "append", 1000000, false, &expired, &dropped);
    CHECK_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(d, "metadata-log")), 100);
    CHECK_EQ(dropped.n, 3u);
    cJSON_Delete(d);
    st_tstrs_free(&expired);
    st_tstrs_free(&dropped);
}

TEST(reader_refuses)
{
    static const char *const bad[] = {
        "",
        "[]",
        "{\"format-version\":1}",
        "{\"format-version\":2,\"table-uuid\":\"x\"}",
        /* a snapshot without its manifest list */
        "{\"format-version\":2,\"table-uuid\":\"0b8e4c0e-1111-4a4a-8a8a-0123456789ab\","
        "\"location\":\"l\",\"last-sequence-number\":1,\"last-updated-ms\":1,\"last-column-id\":1,"
        "\"current-schema-id\":0,\"default-spec-id\":0,\"last-partition-id\":1000,\"schemas\":[],"
        "\"partition-specs\":[],\"snapshots\":[{\"snapshot-id\":1,\"sequence-number\":1,"
        "\"timestamp-ms\":1,\"summary\":{\"operation\":\"append\"}}]}",
        /* an id JSON cannot hold exactly */
        "{\"format-version\":2,\"table-uuid\":\"0b8e4c0e-1111-4a4a-8a8a-0123456789ab\","
        "\"location\":\"l\",\"last-sequence-number\":1,\"last-updated-ms\":1,\"last-column-id\":1,"
        "\"current-schema-id\":0,\"default-spec-id\":0,\"last-partition-id\":1000,\"schemas\":[],"
        "\"partition-specs\":[],\"current-snapshot-id\":9007199254740993}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cJSON *d = NULL;
        CHECK_EQ(st_tables_meta_parse(bad[i], strlen(bad[i]), &d), ST_EINVAL);
        CHECK(d == NULL);
    }
}

/* Manifests name data files by absolute URI (st_objstore_uri, src/cold/objstore.c). */
TEST(objstore_uri)
{
    st_objstore_t *s;
    st_objstore_opts_t o = {.url = "s3://bkt/pre/fix/", .endpoint = "http://127.0.0.1:9"};
    CHECK_EQ(st_objstore_open(&s, &o), ST_OK);
    st_buf_t b = {0};
    st_objstore_uri(s, "alice/batch-1.parquet", &b);
    st_buf_appendc(&b, 0);
    CHECK_STR(b.data, "s3://bkt/pre/fix/alice/batch-1.parquet");
    st_objstore_close(s);
    char dir[] = "/tmp/st-uri-XXXXXX", url[64], want[128];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(url, sizeof url, "file://%s/./x/../y", dir);
    o = (st_objstore_opts_t){.url = url};
    CHECK_EQ(st_objstore_open(&s, &o), ST_OK);
    b.len = 0;
    st_objstore_uri(s, "k", &b);
    st_buf_appendc(&b, 0);
    snprintf(want, sizeof want, "file://%s/y/k", dir);
    CHECK_STR(b.data, want);
    st_objstore_close(s);
    st_buf_free(&b);
    const char *sub[] = {"y", "x", ""};
    for (size_t i = 0; i < 3; i++) {
        snprintf(want, sizeof want, "%s/%s", dir, sub[i]);
        rmdir(want);
    }
}

/* Issue 46: the tables are the kinds' tables in ST_KINDS order, each defined in its kind's folder;
 * their indexes are stored ("\0tables" provenance and erasure marks: '0' + index), so messages 0,
 * room_messages 1, bookings 2, as when they were a fixed array. */
TEST(tables_come_from_the_kinds)
{
    static const struct {
        const char *name;
        char tag;
        const st_kind_t *kind;
    } want[] = {{"messages", 0, &st_chat_kind},
                {"room_messages", 'r', &st_rooms_kind},
                {"bookings", 'b', &st_seats_kind}};
    CHECK_EQ(st_tables_n(), 3u);
    for (size_t i = 0; i < 3; i++) {
        const st_table_def_t *d = st_table_def(i);
        CHECK(d != NULL);
        CHECK(d == want[i].kind->table);
        CHECK_STR(d->ice.name, want[i].name);
        CHECK_EQ(d->tag, want[i].tag);
        CHECK_EQ(st_table_of_tag(want[i].tag), (int)i);
        CHECK_STR(st_catalog_table(i), want[i].name);
        CHECK(st_catalog_is_table(want[i].name, strlen(want[i].name)));
    }
    CHECK(st_table_def(3) == NULL);
    CHECK(st_catalog_table(3) == NULL);
    CHECK_EQ(st_table_of_tag('e'), -1); /* chat's delta objects: no table's */
    CHECK(!st_catalog_is_table("seats", 5));
    /* every table is one kind's, each kind at most one table, in the kinds' order */
    size_t n = 0;
    for (size_t k = 0; k < st_kinds_n; k++)
        if (st_kinds[k]->table) CHECK(st_kinds[k]->table == st_table_def(n++));
    CHECK_EQ(n, st_tables_n());
    for (size_t i = 0; i < n; i++) /* a tag names one table */
        for (size_t j = i + 1; j < n; j++)
            CHECK(st_table_def(i)->tag != st_table_def(j)->tag);
    CHECK(st_chat_delta_kind.table == NULL && st_counters_kind.table == NULL);
}

RUN_TESTS("tables_meta")
