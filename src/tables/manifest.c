/* SPDX-License-Identifier: MIT */
/*
 * manifest: Iceberg's manifest and manifest-list files (Iceberg table spec, format version 2,
 * "Manifests" and "Manifest Lists"), encoded with avro.c.
 *
 * The Avro schemas are Iceberg's own, with the field ids its readers resolve columns by
 * ("field-id" on every field, "element-id" on the partition summaries' array) and the record
 * names Iceberg's Java writer uses (manifest_entry, r2, r102, manifest_file, r508). Optional
 * fields are unions with null first. Of data_file's optional fields we declare the column
 * metrics a scan prunes files by (value_counts 109, null_value_counts 110, lower_bounds 125,
 * upper_bounds 128: metrics.c fills them, text columns get none, SPEC v5 §5.1), none of the rest:
 * no column sizes or NaN counts, key metadata, split offsets, equality ids or sort order. Iceberg
 * readers decode a file with the schema in its header, so a field left out is a field read as
 * absent. The metrics' maps have int keys, so they are Avro arrays of key/value records with
 * "logicalType":"map", as Iceberg writes every such map (records k119_v120 etc., the key's and
 * value's field ids in their names; Iceberg Java checks those ids).
 *
 * The partition struct r102 holds the table's one identity field: field id part_field_id (1000),
 * named part_name, a union null/string.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

/* manifest_entry up to r102's one field, then the rest (Iceberg spec, "Manifests"). */
const char st_ice_entry_head[] =
    "{\"type\":\"record\",\"name\":\"manifest_entry\",\"fields\":["
    "{\"name\":\"status\",\"type\":\"int\",\"field-id\":0},"
    "{\"name\":\"snapshot_id\",\"type\":[\"null\",\"long\"],\"default\":null,\"field-id\":1},"
    "{\"name\":\"sequence_number\",\"type\":[\"null\",\"long\"],\"default\":null,\"field-id\":3},"
    "{\"name\":\"file_sequence_number\",\"type\":[\"null\",\"long\"],\"default\":null,"
    "\"field-id\":4},"
    "{\"name\":\"data_file\",\"type\":{\"type\":\"record\",\"name\":\"r2\",\"fields\":["
    "{\"name\":\"content\",\"type\":\"int\",\"field-id\":134},"
    "{\"name\":\"file_path\",\"type\":\"string\",\"field-id\":100},"
    "{\"name\":\"file_format\",\"type\":\"string\",\"field-id\":101},"
    "{\"name\":\"partition\",\"type\":{\"type\":\"record\",\"name\":\"r102\",\"fields\":[";
/* An optional map<int, vtype> of field id id: Iceberg's Avro form of a map whose keys are not
 * strings (an array of key/value records named k{key id}_v{value id}). */
#define ST__ICE_MAP(name, id, k, v, vtype)                                                         \
    "{\"name\":\"" name "\",\"type\":[\"null\",{\"type\":\"array\",\"items\":"                     \
    "{\"type\":\"record\",\"name\":\"k" k "_v" v "\",\"fields\":["                                 \
    "{\"name\":\"key\",\"type\":\"int\",\"field-id\":" k "},"                                      \
    "{\"name\":\"value\",\"type\":\"" vtype "\",\"field-id\":" v "}]},"                            \
    "\"logicalType\":\"map\"}],\"default\":null,\"field-id\":" id "}"
#define ST__ICE_VALUE_COUNTS ST__ICE_MAP("value_counts", "109", "119", "120", "long")
#define ST__ICE_NULL_COUNTS  ST__ICE_MAP("null_value_counts", "110", "121", "122", "long")
#define ST__ICE_LOWER        ST__ICE_MAP("lower_bounds", "125", "126", "127", "bytes")
#define ST__ICE_UPPER        ST__ICE_MAP("upper_bounds", "128", "129", "130", "bytes")
const char st_ice_entry_tail[] =
    "]},\"field-id\":102},"
    "{\"name\":\"record_count\",\"type\":\"long\",\"field-id\":103},"
    "{\"name\":\"file_size_in_bytes\",\"type\":\"long\",\"field-id\":104}," ST__ICE_VALUE_COUNTS
    "," ST__ICE_NULL_COUNTS "," ST__ICE_LOWER "," ST__ICE_UPPER "]},\"field-id\":2}]}";
/* The tail of manifests written before the metrics (read back by manifest_read.c). */
const char st_ice_entry_tail_v0[] =
    "]},\"field-id\":102},"
    "{\"name\":\"record_count\",\"type\":\"long\",\"field-id\":103},"
    "{\"name\":\"file_size_in_bytes\",\"type\":\"long\",\"field-id\":104}"
    "]},\"field-id\":2}]}";

/* manifest_file (Iceberg spec, "Manifest Lists"), the v2 fields in the Java writer's order. */
const char st_ice_mfile_schema[] =
    "{\"type\":\"record\",\"name\":\"manifest_file\",\"fields\":["
    "{\"name\":\"manifest_path\",\"type\":\"string\",\"field-id\":500},"
    "{\"name\":\"manifest_length\",\"type\":\"long\",\"field-id\":501},"
    "{\"name\":\"partition_spec_id\",\"type\":\"int\",\"field-id\":502},"
    "{\"name\":\"content\",\"type\":\"int\",\"field-id\":517},"
    "{\"name\":\"sequence_number\",\"type\":\"long\",\"field-id\":515},"
    "{\"name\":\"min_sequence_number\",\"type\":\"long\",\"field-id\":516},"
    "{\"name\":\"added_snapshot_id\",\"type\":\"long\",\"field-id\":503},"
    "{\"name\":\"added_files_count\",\"type\":\"int\",\"field-id\":504},"
    "{\"name\":\"existing_files_count\",\"type\":\"int\",\"field-id\":505},"
    "{\"name\":\"deleted_files_count\",\"type\":\"int\",\"field-id\":506},"
    "{\"name\":\"added_rows_count\",\"type\":\"long\",\"field-id\":512},"
    "{\"name\":\"existing_rows_count\",\"type\":\"long\",\"field-id\":513},"
    "{\"name\":\"deleted_rows_count\",\"type\":\"long\",\"field-id\":514},"
    "{\"name\":\"partitions\",\"type\":[\"null\",{\"type\":\"array\",\"items\":"
    "{\"type\":\"record\",\"name\":\"r508\",\"fields\":["
    "{\"name\":\"contains_null\",\"type\":\"boolean\",\"field-id\":509},"
    "{\"name\":\"contains_nan\",\"type\":[\"null\",\"boolean\"],\"default\":null,"
    "\"field-id\":518},"
    "{\"name\":\"lower_bound\",\"type\":[\"null\",\"bytes\"],\"default\":null,\"field-id\":510},"
    "{\"name\":\"upper_bound\",\"type\":[\"null\",\"bytes\"],\"default\":null,\"field-id\":511}"
    "]},\"element-id\":508}],\"default\":null,\"field-id\":507}]}";

/* An optional long: null (branch 0) when v < 0, which Iceberg reads as inherited from the
 * manifest list (an ADDED entry's snapshot id and sequence numbers). */
static void st__ice_opt_long(st_avro_w_t *w, int64_t v)
{
    st_avro_put_union(w, v < 0 ? 0 : 1);
    if (v >= 0) st_avro_put_long(w, v);
}

/* The manifest_entry schema with t's partition field in r102, into s. */
static void st__ice_entry_schema(st_buf_t *s, const st_ice_table_t *t)
{
    st_buf_puts(s, st_ice_entry_head);
    st_buf_puts(s, "{\"name\":");
    st_buf_append_json_str(s, t->part_name, strlen(t->part_name));
    st_buf_printf(s, ",\"type\":[\"null\",\"string\"],\"default\":null,\"field-id\":%d}",
                  t->part_field_id);
    st_buf_puts(s, st_ice_entry_tail);
}

static void st__ice_entry(st_avro_w_t *w, int content, const st_ice_file_t *f)
{
    st_avro_put_long(w, f->status);
    st__ice_opt_long(w, f->snapshot_id);
    st__ice_opt_long(w, f->data_seq);
    st__ice_opt_long(w, f->file_seq);
    st_avro_put_long(w, content); /* data_file (r2) */
    st_avro_put_string(w, f->path, strlen(f->path));
    st_avro_put_string(w, "PARQUET", 7);
    if (f->part) { /* partition (r102) */
        st_avro_put_union(w, 1);
        st_avro_put_string(w, f->part, f->part_len);
    } else {
        st_avro_put_union(w, 0);
    }
    st_avro_put_long(w, f->records);
    st_avro_put_long(w, f->size);
    if (f->metrics_len) {
        st_avro_put_fixed(w, f->metrics, f->metrics_len);
    } else {
        for (int i = 0; i < 4; i++) /* value_counts … upper_bounds: null */
            st_avro_put_union(w, 0);
    }
    st_avro_record_end(w);
}

int st_ice_manifest(st_buf_t *out, const st_ice_table_t *t, int content, const st_ice_file_t *f,
                    size_t n, bool deflate)
{
    if (content != ST_ICE_DATA && content != ST_ICE_POS_DELETES) return ST_EINVAL;
    st_buf_t schema = {0}, spec = {0};
    char schema_id[16], spec_id[] = "0";
    st__ice_entry_schema(&schema, t);
    st_buf_puts(&spec, "[{\"name\":");
    st_buf_append_json_str(&spec, t->part_name, strlen(t->part_name));
    st_buf_printf(&spec, ",\"transform\":\"identity\",\"source-id\":%d,\"field-id\":%d}]",
                  t->part_source_id, t->part_field_id);
    snprintf(schema_id, sizeof schema_id, "%d", t->schema_id);
    const st_avro_meta_t meta[] = {
        {"schema", t->schema_json},    {"schema-id", schema_id},
        {"partition-spec", spec.data}, {"partition-spec-id", spec_id},
        {"format-version", "2"},       {"content", content == ST_ICE_DATA ? "data" : "deletes"},
    };
    st_avro_w_t *w;
    int rc = st_avro_begin(&w, out, schema.data, deflate, meta, sizeof meta / sizeof meta[0]);
    if (rc == ST_OK) {
        for (size_t i = 0; i < n; i++)
            st__ice_entry(w, content, &f[i]);
        rc = st_avro_finish(w);
    }
    st_buf_free(&schema);
    st_buf_free(&spec);
    return rc;
}

static void st__ice_mfile(st_avro_w_t *w, const st_ice_mfile_t *m)
{
    st_avro_put_string(w, m->path, strlen(m->path));
    st_avro_put_long(w, m->length);
    st_avro_put_long(w, 0); /* partition_spec_id: the one spec */
    st_avro_put_long(w, m->content);
    st_avro_put_long(w, m->seq);
    st_avro_put_long(w, m->min_seq);
    st_avro_put_long(w, m->added_snapshot_id);
    st_avro_put_long(w, m->added_files);
    st_avro_put_long(w, m->existing_files);
    st_avro_put_long(w, m->deleted_files);
    st_avro_put_long(w, m->added_rows);
    st_avro_put_long(w, m->existing_rows);
    st_avro_put_long(w, m->deleted_rows);
    st_avro_put_union(w, 1); /* partitions: one summary, of the one partition field */
    st_avro_put_block(w, 1);
    st_avro_put_bool(w, false); /* contains_null: strata's partition values are never null */
    st_avro_put_union(w, 0);    /* contains_nan: null (not a float) */
    st_avro_put_union(w, m->lower ? 1 : 0);
    if (m->lower) st_avro_put_string(w, m->lower, m->lower_len);
    st_avro_put_union(w, m->upper ? 1 : 0);
    if (m->upper) st_avro_put_string(w, m->upper, m->upper_len);
    st_avro_put_block(w, 0);
    st_avro_record_end(w);
}

int st_ice_manifest_list(st_buf_t *out, int64_t snapshot_id, int64_t parent, int64_t seq,
                         const st_ice_mfile_t *m, size_t n, bool deflate)
{
    for (size_t i = 0; i < n; i++)
        if (m[i].content != ST_ICE_DATA && m[i].content != ST_ICE_POS_DELETES) return ST_EINVAL;
    char sid[24], pid[24], sq[24];
    snprintf(sid, sizeof sid, "%lld", (long long)snapshot_id);
    if (parent < 0)
        snprintf(pid, sizeof pid, "null");
    else
        snprintf(pid, sizeof pid, "%lld", (long long)parent);
    snprintf(sq, sizeof sq, "%lld", (long long)seq);
    const st_avro_meta_t meta[] = {
        {"snapshot-id", sid},
        {"parent-snapshot-id", pid},
        {"sequence-number", sq},
        {"format-version", "2"},
    };
    st_avro_w_t *w;
    int rc =
        st_avro_begin(&w, out, st_ice_mfile_schema, deflate, meta, sizeof meta / sizeof meta[0]);
    if (rc != ST_OK) return rc;
    for (size_t i = 0; i < n; i++)
        st__ice_mfile(w, &m[i]);
    return st_avro_finish(w);
}
