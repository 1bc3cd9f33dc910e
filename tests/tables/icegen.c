/* SPDX-License-Identifier: MIT */
/*
 * strata-icegen: a test-only tool (never part of the strata binary) that writes sample Iceberg
 * manifests and manifest lists through src/tables/manifest.c, so iceberg-avro.test.mjs can decode
 * them with readers we did not write (avsc, icebird) and hold them to the values below.
 *   strata-icegen DIR   writes into DIR (which must exist), for CODEC deflate and null:
 *     data.CODEC.avro      a data manifest of three entries (the first with column metrics)
 *     deletes.CODEC.avro   a position-delete manifest of one entry
 *     list.CODEC.avro      a manifest list naming those two (file://DIR/…, their real lengths)
 *     big.deflate.avro     a data manifest of 3000 entries (many blocks)
 *     empty-list.null.avro a manifest list of no manifests, without a parent
 * The values are repeated in the test; change both together.
 */
#include "strata/iceberg.h"

#include <stdio.h>
#include <string.h>

#define ST__GEN_SNAP   9007199254740993LL /* 2^53 + 1: a double cannot hold it */
#define ST__GEN_PARENT 9007199254740992LL

static const st_ice_table_t st__gen_table = {
    .name = "messages",
    .schema_json = "{\"type\":\"struct\",\"schema-id\":0,\"fields\":["
                   "{\"id\":1,\"name\":\"user\",\"required\":true,\"type\":\"string\"},"
                   "{\"id\":2,\"name\":\"id\",\"required\":true,\"type\":\"long\"}]}",
    .schema_id = 0,
    .part_name = "user",
    .part_source_id = 1,
    .part_field_id = 1000,
};

static int st__gen_save(const char *dir, const char *name, const st_buf_t *b)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(b->data, 1, b->len, fp) != b->len || fclose(fp) != 0) {
        fprintf(stderr, "icegen: cannot write %s\n", path);
        return 1;
    }
    return 0;
}

/* Column metrics as src/tables/metrics.c encodes them, of column 2 (long): value_counts {2: 10},
 * null_value_counts {2: 0}, lower_bounds {2: 1}, upper_bounds {2: 9} (8 bytes little-endian). */
static void st__gen_metrics(st_buf_t *b)
{
    static const uint8_t lo[8] = {1}, hi[8] = {9};
    for (int m = 0; m < 4; m++) {
        st_avro_enc_long(b, 1); /* the array branch */
        st_avro_enc_long(b, 1); /* one item */
        st_avro_enc_long(b, 2); /* key: the field id */
        if (m < 2) {
            st_avro_enc_long(b, m == 0 ? 10 : 0);
        } else {
            st_avro_enc_long(b, 8);
            st_buf_append(b, m == 2 ? lo : hi, 8);
        }
        st_avro_enc_long(b, 0); /* the array's end */
    }
}

/* The data and delete manifests and the list naming them, for one codec. */
static int st__gen_codec(const char *dir, bool deflate)
{
    const char *codec = deflate ? "deflate" : "null";
    st_buf_t mx = {0};
    st__gen_metrics(&mx);
    const st_ice_file_t data[] = {
        {ST_ICE_ADDED, ST__GEN_SNAP, 5, 5, ST_ICE_DATA,
         "file:///tables/messages/data/user=alice/00001.parquet", "alice", 5, 10, 2048,
         (const uint8_t *)mx.data, mx.len},
        {ST_ICE_EXISTING, 1234567890123456789LL, 2, 2, ST_ICE_DATA,
         "file:///tables/messages/data/user=bob/00002.parquet", "bob", 3, 3, 999, NULL, 0},
        {ST_ICE_ADDED, -1, -1, -1, ST_ICE_DATA,
         "file:///tables/messages/data/user=zo%C3%AB/00003.parquet", "zo\xc3\xab", 4, 1, 100, NULL,
         0},
    };
    const st_ice_file_t dels[] = {
        {ST_ICE_ADDED, ST__GEN_SNAP, 5, 5, ST_ICE_POS_DELETES,
         "file:///tables/messages/data/user=alice/delete-00001.parquet", "alice", 5, 2, 512, NULL,
         0},
    };
    st_buf_t d = {0}, x = {0}, l = {0};
    char name[2][64], path[2][4200];
    snprintf(name[0], sizeof name[0], "data.%s.avro", codec);
    snprintf(name[1], sizeof name[1], "deletes.%s.avro", codec);
    for (int i = 0; i < 2; i++)
        snprintf(path[i], sizeof path[i], "file://%s/%s", dir, name[i]);
    int rc = st_ice_manifest(&d, &st__gen_table, ST_ICE_DATA, data, 3, deflate);
    if (rc == ST_OK) rc = st_ice_manifest(&x, &st__gen_table, ST_ICE_POS_DELETES, dels, 1, deflate);
    const st_ice_mfile_t m[] = {
        {.path = path[0],
         .length = (int64_t)d.len,
         .content = ST_ICE_DATA,
         .seq = 5,
         .min_seq = 2,
         .added_snapshot_id = ST__GEN_SNAP,
         .added_files = 2,
         .existing_files = 1,
         .added_rows = 11,
         .existing_rows = 3,
         .lower = "alice",
         .lower_len = 5,
         .upper = "zo\xc3\xab",
         .upper_len = 4},
        {.path = path[1],
         .length = (int64_t)x.len,
         .content = ST_ICE_POS_DELETES,
         .seq = 5,
         .min_seq = 5,
         .added_snapshot_id = ST__GEN_SNAP,
         .added_files = 1,
         .added_rows = 2,
         .lower = "alice",
         .lower_len = 5,
         .upper = "alice",
         .upper_len = 5},
    };
    if (rc == ST_OK) rc = st_ice_manifest_list(&l, ST__GEN_SNAP, ST__GEN_PARENT, 5, m, 2, deflate);
    char lname[64];
    snprintf(lname, sizeof lname, "list.%s.avro", codec);
    int bad = rc != ST_OK || st__gen_save(dir, name[0], &d) || st__gen_save(dir, name[1], &x) ||
              st__gen_save(dir, lname, &l);
    st_buf_free(&d);
    st_buf_free(&x);
    st_buf_free(&l);
    st_buf_free(&mx);
    return bad;
}

/* 3000 entries with ~80-byte paths: past 64 KiB, so several blocks. */
static int st__gen_big(const char *dir)
{
    enum { N = 3000 };
    static st_ice_file_t f[N];
    static char paths[N][96], parts[N][16];
    for (int i = 0; i < N; i++) {
        int pl = snprintf(parts[i], sizeof parts[i], "user%d", i % 50);
        snprintf(paths[i], sizeof paths[i], "s3://bucket/tables/messages/data/user=%s/%08d.parquet",
                 parts[i], i);
        f[i] = (st_ice_file_t){ST_ICE_ADDED,
                               ST__GEN_SNAP + i,
                               i,
                               i,
                               ST_ICE_DATA,
                               paths[i],
                               parts[i],
                               (size_t)pl,
                               i * 3,
                               (int64_t)i * 1000 + 1,
                               NULL,
                               0};
    }
    st_buf_t b = {0};
    int bad = st_ice_manifest(&b, &st__gen_table, ST_ICE_DATA, f, N, true) != ST_OK ||
              st__gen_save(dir, "big.deflate.avro", &b);
    st_buf_reset(&b);
    bad = bad || st_ice_manifest_list(&b, 42, -1, 1, NULL, 0, false) != ST_OK ||
          st__gen_save(dir, "empty-list.null.avro", &b);
    st_buf_free(&b);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: strata-icegen DIR\n");
        return 2;
    }
    if (st__gen_codec(argv[1], true) || st__gen_codec(argv[1], false) || st__gen_big(argv[1]))
        return 1;
    return 0;
}
