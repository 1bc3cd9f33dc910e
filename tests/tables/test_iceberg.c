/* SPDX-License-Identifier: MIT */
/* Unit tests for the Avro container writer (src/tables/avro.c) and Iceberg's manifests
 * (src/tables/manifest.c): the varint edge cases, an empty file, blocks split past 64 KiB,
 * deflate blocks inflated with zlib, the header's metadata. The files are decoded here by a small
 * reader of the container format; independent readers (avsc, icebird) decode them end to end
 * (tests/e2e/iceberg-avro.test.mjs). */
#include "../test.h"
#include "strata/iceberg.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

/* ---- a minimal container reader, for the tests only ---- */
typedef struct {
    const uint8_t *p, *end;
} rd_t;

static int64_t rd_long(rd_t *r)
{
    uint64_t z = 0;
    for (int shift = 0;; shift += 7) {
        CHECK(r->p < r->end && shift < 70);
        uint8_t b = *r->p++;
        z |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) break;
    }
    return (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
}

/* A string/bytes value: its bytes stay in the file; *n its length. */
static const uint8_t *rd_bytes(rd_t *r, size_t *n)
{
    int64_t len = rd_long(r);
    CHECK(len >= 0 && len <= r->end - r->p);
    const uint8_t *s = r->p;
    r->p += len;
    *n = (size_t)len;
    return s;
}

static bool rd_str_is(rd_t *r, const char *want)
{
    size_t n;
    const uint8_t *s = rd_bytes(r, &n);
    return n == strlen(want) && memcmp(s, want, n) == 0;
}

typedef struct {
    char key[32];
    st_buf_t value;
} kv_t;

typedef struct {
    kv_t meta[16];
    size_t nmeta;
    uint8_t sync[16];
    st_buf_t data;  /* every block's data, decoded, end to end */
    size_t records; /* their counts' sum */
    size_t blocks;
    size_t max_block; /* the largest block's uncompressed size */
} file_t;

static void file_free(file_t *f)
{
    for (size_t i = 0; i < f->nmeta; i++)
        st_buf_free(&f->meta[i].value);
    st_buf_free(&f->data);
}

static const char *file_meta(file_t *f, const char *key)
{
    for (size_t i = 0; i < f->nmeta; i++)
        if (strcmp(f->meta[i].key, key) == 0) return f->meta[i].value.data;
    return NULL;
}

static void inflate_raw(const uint8_t *p, size_t n, st_buf_t *out)
{
    z_stream zs = {0};
    CHECK(inflateInit2(&zs, -15) == Z_OK);
    uint8_t tmp[4096];
    zs.next_in = (Bytef *)p;
    zs.avail_in = (uInt)n;
    int zrc;
    do {
        zs.next_out = tmp;
        zs.avail_out = sizeof tmp;
        zrc = inflate(&zs, Z_NO_FLUSH);
        CHECK(zrc == Z_OK || zrc == Z_STREAM_END);
        st_buf_append(out, tmp, sizeof tmp - zs.avail_out);
    } while (zrc != Z_STREAM_END);
    CHECK(zs.avail_in == 0); /* nothing after the deflate stream */
    inflateEnd(&zs);
}

static void file_read(const st_buf_t *b, file_t *f)
{
    memset(f, 0, sizeof *f);
    rd_t r = {(const uint8_t *)b->data, (const uint8_t *)b->data + b->len};
    CHECK(b->len >= 4 && memcmp(r.p, "Obj\x01", 4) == 0);
    r.p += 4;
    for (int64_t n; (n = rd_long(&r)) != 0;) {
        CHECK(n > 0);
        for (int64_t i = 0; i < n; i++) {
            CHECK(f->nmeta < 16);
            kv_t *kv = &f->meta[f->nmeta++];
            size_t kn, vn;
            const uint8_t *k = rd_bytes(&r, &kn);
            CHECK(kn < sizeof kv->key);
            memcpy(kv->key, k, kn);
            const uint8_t *v = rd_bytes(&r, &vn);
            st_buf_append(&kv->value, v, vn);
        }
    }
    CHECK(r.end - r.p >= 16);
    memcpy(f->sync, r.p, 16);
    r.p += 16;
    const char *codec = file_meta(f, "avro.codec");
    CHECK(codec && (strcmp(codec, "null") == 0 || strcmp(codec, "deflate") == 0));
    while (r.p < r.end) {
        int64_t count = rd_long(&r);
        CHECK(count > 0);
        size_t n, before = f->data.len;
        const uint8_t *d = rd_bytes(&r, &n);
        if (strcmp(codec, "deflate") == 0)
            inflate_raw(d, n, &f->data);
        else
            st_buf_append(&f->data, d, n);
        CHECK(r.end - r.p >= 16 && memcmp(r.p, f->sync, 16) == 0);
        r.p += 16;
        f->records += (size_t)count;
        f->blocks++;
        if (f->data.len - before > f->max_block) f->max_block = f->data.len - before;
    }
}

static rd_t file_data(const file_t *f)
{
    return (rd_t){(const uint8_t *)f->data.data, (const uint8_t *)f->data.data + f->data.len};
}

/* ---- the writer ---- */

TEST(zigzag_edges)
{
    static const struct {
        int64_t v;
        const char *enc;
        size_t n;
    } cases[] = {
        {0, "\x00", 1},
        {-1, "\x01", 1},
        {1, "\x02", 1},
        {-64, "\x7f", 1},
        {64, "\x80\x01", 2},
        {INT64_MAX, "\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10},
        {INT64_MIN, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        st_buf_t b = {0};
        st_avro_w_t *w;
        CHECK_EQ(st_avro_begin(&w, &b, "\"long\"", false, NULL, 0), ST_OK);
        st_avro_put_long(w, cases[i].v);
        st_avro_record_end(w);
        CHECK_EQ(st_avro_finish(w), ST_OK);
        file_t f;
        file_read(&b, &f);
        CHECK_EQ(f.records, 1);
        CHECK_EQ(f.data.len, cases[i].n);
        CHECK(memcmp(f.data.data, cases[i].enc, cases[i].n) == 0);
        rd_t r = file_data(&f);
        CHECK(rd_long(&r) == cases[i].v);
        file_free(&f);
        st_buf_free(&b);
    }
}

TEST(empty_file_is_header_only)
{
    static const char schema[] = "{\"type\":\"record\",\"name\":\"x\",\"fields\":[]}";
    const st_avro_meta_t meta[] = {{"format-version", "2"}, {"empty", ""}};
    for (int deflate = 0; deflate <= 1; deflate++) {
        st_buf_t b = {0};
        st_avro_w_t *w;
        CHECK_EQ(st_avro_begin(&w, &b, schema, deflate, meta, 2), ST_OK);
        CHECK_EQ(st_avro_finish(w), ST_OK);
        file_t f;
        file_read(&b, &f);
        CHECK_EQ(f.blocks, 0);
        CHECK_EQ(f.records, 0);
        CHECK_EQ(f.nmeta, 4);
        CHECK_STR(f.meta[0].key, "avro.schema");
        CHECK_STR(f.meta[0].value.data, schema); /* byte for byte */
        CHECK_STR(f.meta[1].key, "avro.codec");
        CHECK_STR(f.meta[1].value.data, deflate ? "deflate" : "null");
        CHECK_STR(file_meta(&f, "format-version"), "2");
        CHECK_STR(file_meta(&f, "empty"), "");
        /* the header ends with the sync marker: nothing after it */
        CHECK(memcmp(b.data + b.len - 16, f.sync, 16) == 0);
        file_free(&f);
        st_buf_free(&b);
    }
}

TEST(reserved_meta_key_refused)
{
    st_buf_t b = {0};
    st_avro_w_t *w = (st_avro_w_t *)&b;
    const st_avro_meta_t meta[] = {{"avro.codec", "snappy"}};
    CHECK_EQ(st_avro_begin(&w, &b, "\"long\"", false, meta, 1), ST_EINVAL);
    CHECK(w == NULL);
    CHECK_EQ(b.len, 0);
    st_avro_abort(NULL);
}

TEST(sync_marker_differs_per_file)
{
    st_buf_t a = {0}, b = {0};
    st_avro_w_t *w;
    CHECK_EQ(st_avro_begin(&w, &a, "\"long\"", false, NULL, 0), ST_OK);
    CHECK_EQ(st_avro_finish(w), ST_OK);
    CHECK_EQ(st_avro_begin(&w, &b, "\"long\"", false, NULL, 0), ST_OK);
    CHECK_EQ(st_avro_finish(w), ST_OK);
    CHECK_EQ(a.len, b.len);
    CHECK(memcmp(a.data + a.len - 16, b.data + b.len - 16, 16) != 0);
    st_buf_free(&a);
    st_buf_free(&b);
}

/* Records of a string and a long: about 5 MB raw, so many blocks of about 64 KiB each. */
static void write_many(st_buf_t *b, bool deflate, size_t n)
{
    st_avro_w_t *w;
    CHECK_EQ(st_avro_begin(&w, b,
                           "{\"type\":\"record\",\"name\":\"r\",\"fields\":["
                           "{\"name\":\"s\",\"type\":\"string\"},"
                           "{\"name\":\"v\",\"type\":\"long\"},"
                           "{\"name\":\"o\",\"type\":[\"null\",\"boolean\"]}]}",
                           deflate, NULL, 0),
             ST_OK);
    char s[128];
    for (size_t i = 0; i < n; i++) {
        int len = snprintf(s, sizeof s, "s3://bucket/messages/data/user=%zu/%zu.parquet", i % 97,
                           i * 7919);
        st_avro_put_string(w, s, (size_t)len);
        st_avro_put_long(w, (int64_t)i * 1000003 - 5000000);
        st_avro_put_union(w, (int)(i % 2));
        if (i % 2) st_avro_put_bool(w, i % 3 == 0);
        st_avro_record_end(w);
    }
    CHECK_EQ(st_avro_finish(w), ST_OK);
}

static void check_many(const file_t *f, size_t n)
{
    CHECK_EQ(f->records, n);
    rd_t r = file_data(f);
    char s[128];
    for (size_t i = 0; i < n; i++) {
        int len = snprintf(s, sizeof s, "s3://bucket/messages/data/user=%zu/%zu.parquet", i % 97,
                           i * 7919);
        size_t got;
        const uint8_t *p = rd_bytes(&r, &got);
        CHECK(got == (size_t)len && memcmp(p, s, got) == 0);
        CHECK(rd_long(&r) == (int64_t)i * 1000003 - 5000000);
        CHECK_EQ(rd_long(&r), (int64_t)(i % 2));
        if (i % 2) {
            CHECK(r.p < r.end);
            CHECK_EQ(*r.p++, i % 3 == 0);
        }
    }
    CHECK(r.p == r.end);
}

TEST(blocks_split_past_64k)
{
    const size_t n = 100000;
    st_buf_t b = {0};
    write_many(&b, false, n);
    file_t f;
    file_read(&b, &f);
    check_many(&f, n);
    CHECK(f.data.len > 4u << 20);
    CHECK(f.blocks >= f.data.len / (64 * 1024 + 128)); /* none much past 64 KiB ... */
    CHECK(f.blocks <= f.data.len / (64 * 1024) + 1);   /* ... nor much under */
    CHECK(f.max_block < 64 * 1024 + 128);
    file_free(&f);
    st_buf_free(&b);
}

TEST(deflate_round_trip)
{
    const size_t n = 100000;
    st_buf_t raw = {0}, z = {0};
    write_many(&raw, false, n);
    write_many(&z, true, n);
    file_t fr, fz;
    file_read(&raw, &fr);
    file_read(&z, &fz); /* inflated by zlib's raw inflate: no zlib header in the blocks */
    CHECK_STR(file_meta(&fz, "avro.codec"), "deflate");
    check_many(&fz, n);
    CHECK_EQ(fz.data.len, fr.data.len);
    CHECK(memcmp(fz.data.data, fr.data.data, fr.data.len) == 0);
    CHECK_EQ(fz.blocks, fr.blocks); /* blocks close on the uncompressed size */
    CHECK(z.len < raw.len / 2);
    file_free(&fr);
    file_free(&fz);
    st_buf_free(&raw);
    st_buf_free(&z);
}

TEST(arrays_and_maps_as_blocks)
{
    st_buf_t b = {0};
    st_avro_w_t *w;
    CHECK_EQ(st_avro_begin(&w, &b,
                           "{\"type\":\"record\",\"name\":\"r\",\"fields\":["
                           "{\"name\":\"a\",\"type\":{\"type\":\"array\",\"items\":\"long\"}},"
                           "{\"name\":\"m\",\"type\":{\"type\":\"map\",\"values\":\"bytes\"}},"
                           "{\"name\":\"f\",\"type\":{\"type\":\"fixed\",\"name\":\"f4\","
                           "\"size\":4}}]}",
                           false, NULL, 0),
             ST_OK);
    st_avro_put_block(w, 2);
    st_avro_put_long(w, 5);
    st_avro_put_long(w, -3);
    st_avro_put_block(w, 0);
    st_avro_put_block(w, 1);
    st_avro_put_string(w, "k", 1);
    st_avro_put_string(w, "\x00\x01", 2);
    st_avro_put_block(w, 0);
    st_avro_put_fixed(w, "abcd", 4);
    st_avro_record_end(w);
    CHECK_EQ(st_avro_finish(w), ST_OK);
    file_t f;
    file_read(&b, &f);
    static const char want[] = "\x04\x0a\x05\x00"
                               "\x02\x02k\x04\x00\x01\x00"
                               "abcd";
    CHECK_EQ(f.data.len, sizeof want - 1);
    CHECK(memcmp(f.data.data, want, sizeof want - 1) == 0);
    file_free(&f);
    st_buf_free(&b);
}

/* ---- Iceberg's files ---- */

static const st_ice_table_t tbl = {
    .name = "messages",
    .schema_json = "{\"type\":\"struct\",\"schema-id\":0,\"fields\":[{\"id\":1,\"name\":\"user\","
                   "\"required\":true,\"type\":\"string\"}]}",
    .schema_id = 0,
    .part_name = "user",
    .part_source_id = 1,
    .part_field_id = 1000,
};

TEST(manifest_entries)
{
    /* metrics as metrics.c encodes them: value_counts {2: 10}, null_value_counts null,
     * lower_bounds {2: 8 bytes LE of 7}, upper_bounds null */
    static const uint8_t mx[] = {2, 2, 4, 20, 0, 0, 2, 2, 4, 16, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    const st_ice_file_t files[] = {
        {ST_ICE_ADDED, 9007199254740993, 3, 3, ST_ICE_DATA, "file:///t/a.parquet", "alice", 5, 10,
         1234, mx, sizeof mx},
        {ST_ICE_EXISTING, 7, -1, -1, ST_ICE_DATA, "file:///t/b.parquet", NULL, 0, 0, 99, NULL, 0},
    };
    st_buf_t b = {0};
    CHECK_EQ(st_ice_manifest(&b, &tbl, ST_ICE_DATA, files, 2, false), ST_OK);
    file_t f;
    file_read(&b, &f);
    CHECK_STR(file_meta(&f, "schema"), tbl.schema_json);
    CHECK_STR(file_meta(&f, "schema-id"), "0");
    CHECK_STR(file_meta(&f, "partition-spec"), "[{\"name\":\"user\",\"transform\":\"identity\","
                                               "\"source-id\":1,\"field-id\":1000}]");
    CHECK_STR(file_meta(&f, "partition-spec-id"), "0");
    CHECK_STR(file_meta(&f, "format-version"), "2");
    CHECK_STR(file_meta(&f, "content"), "data");
    const char *sc = file_meta(&f, "avro.schema");
    CHECK(strstr(sc, "\"name\":\"user\",\"type\":[\"null\",\"string\"],\"default\":null,"
                     "\"field-id\":1000}"));
    CHECK(strstr(sc, "\"name\":\"r102\""));
    CHECK(strstr(
        sc, "{\"name\":\"lower_bounds\",\"type\":[\"null\",{\"type\":\"array\",\"items\":"
            "{\"type\":\"record\",\"name\":\"k126_v127\",\"fields\":[{\"name\":\"key\","
            "\"type\":\"int\",\"field-id\":126},{\"name\":\"value\",\"type\":\"bytes\","
            "\"field-id\":127}]},\"logicalType\":\"map\"}],\"default\":null,\"field-id\":125}"));
    CHECK_EQ(f.records, 2);
    rd_t r = file_data(&f);
    CHECK_EQ(rd_long(&r), ST_ICE_ADDED);
    CHECK_EQ(rd_long(&r), 1);
    CHECK(rd_long(&r) == 9007199254740993);
    CHECK_EQ(rd_long(&r), 1);
    CHECK_EQ(rd_long(&r), 3);
    CHECK_EQ(rd_long(&r), 1);
    CHECK_EQ(rd_long(&r), 3);
    CHECK_EQ(rd_long(&r), ST_ICE_DATA);
    CHECK(rd_str_is(&r, "file:///t/a.parquet"));
    CHECK(rd_str_is(&r, "PARQUET"));
    CHECK_EQ(rd_long(&r), 1);
    CHECK(rd_str_is(&r, "alice"));
    CHECK_EQ(rd_long(&r), 10);
    CHECK_EQ(rd_long(&r), 1234);
    CHECK(r.end - r.p > (ptrdiff_t)sizeof mx && memcmp(r.p, mx, sizeof mx) == 0); /* as given */
    r.p += sizeof mx;
    CHECK_EQ(rd_long(&r), ST_ICE_EXISTING);
    CHECK_EQ(rd_long(&r), 1);
    CHECK_EQ(rd_long(&r), 7);
    CHECK_EQ(rd_long(&r), 0); /* sequence numbers < 0: null */
    CHECK_EQ(rd_long(&r), 0);
    CHECK_EQ(rd_long(&r), ST_ICE_DATA);
    CHECK(rd_str_is(&r, "file:///t/b.parquet"));
    CHECK(rd_str_is(&r, "PARQUET"));
    CHECK_EQ(rd_long(&r), 0); /* no partition value: null */
    CHECK_EQ(rd_long(&r), 0);
    CHECK_EQ(rd_long(&r), 99);
    for (int i = 0; i < 4; i++) /* no metrics: value_counts … upper_bounds null */
        CHECK_EQ(rd_long(&r), 0);
    CHECK(r.p == r.end);
    file_free(&f);
    st_buf_free(&b);

    CHECK_EQ(st_ice_manifest(&b, &tbl, 2, files, 2, false), ST_EINVAL);
    CHECK_EQ(b.len, 0);
}

TEST(manifest_list_header)
{
    const st_ice_mfile_t m = {.path = "file:///t/m.avro",
                              .length = 4242,
                              .content = ST_ICE_POS_DELETES,
                              .seq = 4,
                              .min_seq = 2,
                              .added_snapshot_id = INT64_MAX,
                              .added_files = 1,
                              .added_rows = 3,
                              .lower = "a",
                              .lower_len = 1};
    st_buf_t b = {0};
    CHECK_EQ(st_ice_manifest_list(&b, INT64_MAX, -1, 4, &m, 1, true), ST_OK);
    file_t f;
    file_read(&b, &f);
    CHECK_STR(file_meta(&f, "snapshot-id"), "9223372036854775807");
    CHECK_STR(file_meta(&f, "parent-snapshot-id"), "null");
    CHECK_STR(file_meta(&f, "sequence-number"), "4");
    CHECK_STR(file_meta(&f, "format-version"), "2");
    CHECK(strstr(file_meta(&f, "avro.schema"), "\"element-id\":508"));
    rd_t r = file_data(&f);
    CHECK(rd_str_is(&r, "file:///t/m.avro"));
    CHECK_EQ(rd_long(&r), 4242);
    CHECK_EQ(rd_long(&r), 0);
    CHECK_EQ(rd_long(&r), ST_ICE_POS_DELETES);
    CHECK_EQ(rd_long(&r), 4);
    CHECK_EQ(rd_long(&r), 2);
    CHECK(rd_long(&r) == INT64_MAX);
    CHECK_EQ(rd_long(&r), 1);
    CHECK_EQ(rd_long(&r), 0);
    CHECK_EQ(rd_long(&r), 0);
    CHECK_EQ(rd_long(&r), 3);
    CHECK_EQ(rd_long(&r), 0);
    CHECK_EQ(rd_long(&r), 0);
    CHECK_EQ(rd_long(&r), 1); /* partitions: the array */
    CHECK_EQ(rd_long(&r), 1); /* one summary */
    CHECK_EQ(*r.p++, 0);      /* contains_null */
    CHECK_EQ(rd_long(&r), 0); /* contains_nan null */
    CHECK_EQ(rd_long(&r), 1);
    CHECK(rd_str_is(&r, "a"));
    CHECK_EQ(rd_long(&r), 0); /* no upper bound */
    CHECK_EQ(rd_long(&r), 0); /* the array's end */
    CHECK(r.p == r.end);
    file_free(&f);
    st_buf_free(&b);

    st_ice_mfile_t odd = m;
    odd.content = 2;
    CHECK_EQ(st_ice_manifest_list(&b, 5, 4, 1, &odd, 1, false), ST_EINVAL);
    CHECK_EQ(b.len, 0);
    CHECK_EQ(st_ice_manifest_list(&b, 5, 4, 1, NULL, 0, false), ST_OK);
    file_read(&b, &f);
    CHECK_STR(file_meta(&f, "parent-snapshot-id"), "4");
    CHECK_EQ(f.records, 0);
    file_free(&f);
    st_buf_free(&b);
}

RUN_TESTS("iceberg")
