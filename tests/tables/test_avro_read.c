/* SPDX-License-Identifier: MIT */
/* Unit tests for the Avro container reader (src/tables/avro_read.c) and the manifest readers
 * (src/tables/manifest_read.c): round trips with the writer (avro.c, manifest.c), null and deflate
 * blocks, files of several blocks, every truncation, hostile counts and lengths. */
#include "../test.h"
#include "../../src/tables/internal.h"
#include "strata/iceberg.h"

#include <stdint.h>
#include <string.h>

/* n records: long i*k, bool, string, fixed(4), union, an array block of i%3 longs. */
static void write_file(st_buf_t *b, bool deflate, int n)
{
    st_avro_w_t *w;
    const st_avro_meta_t meta[] = {{"format-version", "2"}};
    CHECK_EQ(st_avro_begin(&w, b, "{\"type\":\"record\"}", deflate, meta, 1), ST_OK);
    for (int i = 0; i < n; i++) {
        char s[32];
        int sl = snprintf(s, sizeof s, "row %d", i);
        st_avro_put_long(w, (int64_t)i * 1000003 - (i % 2 ? INT64_C(1) << 40 : 0));
        st_avro_put_bool(w, i % 2);
        st_avro_put_string(w, s, (size_t)sl);
        st_avro_put_fixed(w, "abcd", 4);
        st_avro_put_union(w, i % 2);
        if (i % 2) st_avro_put_long(w, INT64_MIN + i);
        if (i % 3) {
            st_avro_put_block(w, (size_t)(i % 3));
            for (int j = 0; j < i % 3; j++)
                st_avro_put_long(w, j);
        }
        st_avro_put_block(w, 0);
        st_avro_record_end(w);
    }
    CHECK_EQ(st_avro_finish(w), ST_OK);
}

/* Reads what write_file wrote: the number of records read whole, or -1 on an error. */
static int read_file(const void *p, size_t len, bool check)
{
    st_avro_r_t *r;
    if (st_avro_r_open(&r, p, len) != ST_OK) return -1;
    int i = 0, rc;
    while ((rc = st_avro_r_next(r)) == ST_OK) {
        int64_t v, n;
        bool bo;
        const char *s;
        size_t sl;
        const void *fx;
        int br;
        st_avro_r_long(r, &v);
        st_avro_r_bool(r, &bo);
        st_avro_r_string(r, &s, &sl);
        st_avro_r_fixed(r, 4, &fx);
        st_avro_r_union(r, 2, &br);
        int64_t u = 0;
        if (br == 1) st_avro_r_long(r, &u);
        int64_t items = 0;
        while (st_avro_r_block(r, &n) == ST_OK && n > 0)
            for (int64_t j = 0; j < n; j++, items++)
                st_avro_r_long(r, &v);
        if (st_avro_r_status(r) != ST_OK) break;
        if (check) {
            char want[32];
            int wl = snprintf(want, sizeof want, "row %d", i);
            CHECK(bo == (i % 2));
            CHECK(sl == (size_t)wl && memcmp(s, want, sl) == 0);
            CHECK(memcmp(fx, "abcd", 4) == 0);
            CHECK_EQ(br, i % 2);
            CHECK(u == (i % 2 ? INT64_MIN + i : 0));
            CHECK_EQ(items, i % 3);
        }
        i++;
    }
    st_avro_r_close(r);
    return rc == ST_ENOTFOUND ? i : -1;
}

TEST(round_trip_null_and_deflate)
{
    for (int d = 0; d < 2; d++) {
        st_buf_t b = {0};
        write_file(&b, d, 20000); /* several 64 KiB blocks */
        CHECK_EQ(read_file(b.data, b.len, true), 20000);
        st_avro_r_t *r;
        CHECK_EQ(st_avro_r_open(&r, b.data, b.len), ST_OK);
        size_t n;
        const char *v = st_avro_r_meta(r, "avro.schema", &n);
        CHECK(v && n == 17 && memcmp(v, "{\"type\":\"record\"}", 17) == 0);
        v = st_avro_r_meta(r, "format-version", &n);
        CHECK(v && n == 1 && *v == '2');
        CHECK(st_avro_r_meta(r, "nope", &n) == NULL);
        st_avro_r_close(r);
        st_buf_free(&b);
    }
}

TEST(empty_file)
{
    st_buf_t b = {0};
    write_file(&b, true, 0);
    CHECK_EQ(read_file(b.data, b.len, true), 0);
    st_buf_free(&b);
}

TEST(every_truncation_refused)
{
    for (int d = 0; d < 2; d++) {
        st_buf_t b = {0};
        write_file(&b, d, 7); /* one block */
        for (size_t len = 0; len < b.len; len++) {
            int got = read_file(b.data, len, false);
            /* the header alone (cut right after its sync marker) is an empty file */
            CHECK(got == -1 || got == 0);
        }
        st_buf_free(&b);
    }
}

TEST(every_byte_flipped_never_crashes)
{
    st_buf_t b = {0};
    write_file(&b, true, 5);
    for (size_t i = 0; i < b.len; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            b.data[i] ^= (char)(1 << bit);
            (void)read_file(b.data, b.len, false);
            b.data[i] ^= (char)(1 << bit);
        }
    }
    st_buf_free(&b);
}

/* A file of one null block holding data, by hand. */
static size_t hand(uint8_t *out, const uint8_t *blk, size_t n, int64_t count)
{
    static const uint8_t head[] = {'O', 'b', 'j', 1,   2,   22,  'a', 'v', 'r', 'o', '.',
                                   's', 'c', 'h', 'e', 'm', 'a', 4,   '{', '}', 0};
    size_t o = 0;
    memcpy(out, head, sizeof head);
    o += sizeof head;
    memset(out + o, 0x5a, 16);
    o += 16;
    out[o++] = (uint8_t)(count * 2);
    out[o++] = (uint8_t)(n * 2);
    memcpy(out + o, blk, n);
    o += n;
    memset(out + o, 0x5a, 16);
    return o + 16;
}

TEST(hostile_counts_and_lengths)
{
    uint8_t f[256];
    st_avro_r_t *r;
    int64_t v;
    const char *s;
    size_t sl;
    int br;
    /* a string longer than the block */
    static const uint8_t longstr[] = {0x7e, 'a'};
    size_t n = hand(f, longstr, sizeof longstr, 1);
    CHECK_EQ(st_avro_r_open(&r, f, n), ST_OK);
    CHECK_EQ(st_avro_r_next(r), ST_OK);
    CHECK_EQ(st_avro_r_string(r, &s, &sl), ST_EINVAL);
    CHECK_EQ(st_avro_r_long(r, &v), ST_EINVAL); /* sticky */
    CHECK_EQ(st_avro_r_next(r), ST_EINVAL);
    st_avro_r_close(r);
    /* an array count past the bytes left, positive and negative */
    static const uint8_t bigarr[] = {0xfe, 0xff, 0xff, 0xff, 0x0f, 2};
    n = hand(f, bigarr, sizeof bigarr, 1);
    CHECK_EQ(st_avro_r_open(&r, f, n), ST_OK);
    CHECK_EQ(st_avro_r_next(r), ST_OK);
    CHECK_EQ(st_avro_r_block(r, &v), ST_EINVAL);
    st_avro_r_close(r);
    static const uint8_t negarr[] = {0x01, 0x7e, 2};
    n = hand(f, negarr, sizeof negarr, 1);
    CHECK_EQ(st_avro_r_open(&r, f, n), ST_OK);
    CHECK_EQ(st_avro_r_next(r), ST_OK);
    CHECK_EQ(st_avro_r_block(r, &v), ST_EINVAL); /* its byte size runs past the block */
    st_avro_r_close(r);
    /* more records than bytes */
    static const uint8_t one[] = {2};
    n = hand(f, one, 1, 5);
    CHECK_EQ(st_avro_r_open(&r, f, n), ST_OK);
    CHECK_EQ(st_avro_r_next(r), ST_EINVAL);
    st_avro_r_close(r);
    /* a varint of 11 bytes; a bool 2; a union branch out of range; data left over */
    static const uint8_t vi[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1};
    n = hand(f, vi, sizeof vi, 1);
    CHECK_EQ(st_avro_r_open(&r, f, n), ST_OK);
    CHECK_EQ(st_avro_r_next(r), ST_OK);
    CHECK_EQ(st_avro_r_long(r, &v), ST_EINVAL);
    st_avro_r_close(r);
    static const uint8_t two[] = {2, 4};
    n = hand(f, two, 1, 1);
    CHECK_EQ(st_avro_r_open(&r, f, n), ST_OK);
    CHECK_EQ(st_avro_r_next(r), ST_OK);
    bool bo;
    CHECK_EQ(st_avro_r_bool(r, &bo), ST_EINVAL);
    st_avro_r_close(r);
    n = hand(f, two + 1, 1, 1);
    CHECK_EQ(st_avro_r_open(&r, f, n), ST_OK);
    CHECK_EQ(st_avro_r_next(r), ST_OK);
    CHECK_EQ(st_avro_r_union(r, 2, &br), ST_EINVAL);
    st_avro_r_close(r);
    n = hand(f, two, 2, 1);
    CHECK_EQ(st_avro_r_open(&r, f, n), ST_OK);
    CHECK_EQ(st_avro_r_next(r), ST_OK);
    CHECK_EQ(st_avro_r_long(r, &v), ST_OK);
    CHECK_EQ(st_avro_r_next(r), ST_EINVAL); /* a byte of the block not read */
    st_avro_r_close(r);
    /* a wrong sync marker after the block */
    n = hand(f, one, 1, 1);
    f[n - 1] ^= 1;
    CHECK_EQ(st_avro_r_open(&r, f, n), ST_OK);
    CHECK_EQ(st_avro_r_next(r), ST_EINVAL);
    st_avro_r_close(r);
    /* an unknown codec, no schema, a key twice, not Avro */
    static const uint8_t snappy[] = {'O', 'b', 'j', 1,   4,   22,  'a', 'v', 'r', 'o',
                                     '.', 's', 'c', 'h', 'e', 'm', 'a', 4,   '{', '}',
                                     20,  'a', 'v', 'r', 'o', '.', 'c', 'o', 'd', 'e',
                                     'c', 12,  's', 'n', 'a', 'p', 'p', 'y', 0};
    uint8_t g[sizeof snappy + 16] = {0};
    memcpy(g, snappy, sizeof snappy);
    CHECK_EQ(st_avro_r_open(&r, g, sizeof g), ST_EINVAL);
    static const uint8_t noschema[] = {'O', 'b', 'j', 1, 0};
    memset(g, 0, sizeof g);
    memcpy(g, noschema, sizeof noschema);
    CHECK_EQ(st_avro_r_open(&r, g, sizeof noschema + 16), ST_EINVAL);
    static const uint8_t twice[] = {'O', 'b', 'j', 1,   6,   2,   'k', 0,   2,
                                    'k', 0,   22,  'a', 'v', 'r', 'o', '.', 's',
                                    'c', 'h', 'e', 'm', 'a', 4,   '{', '}', 0};
    memset(g, 0, sizeof g);
    memcpy(g, twice, sizeof twice);
    CHECK_EQ(st_avro_r_open(&r, g, sizeof twice + 16), ST_EINVAL);
    CHECK_EQ(st_avro_r_open(&r, "PAR1", 4), ST_EINVAL);
}

TEST(manifest_list_round_trip)
{
    st_ice_mfile_t m[2] = {
        {.path = "file:///t/metadata/a-w00000000000000aa-m0.avro",
         .length = 1234,
         .content = ST_ICE_DATA,
         .seq = 5,
         .min_seq = 2,
         .added_snapshot_id = 77,
         .added_files = 1,
         .existing_files = 3,
         .added_rows = 10,
         .existing_rows = 30,
         .lower = "alice",
         .lower_len = 5,
         .upper = "bob",
         .upper_len = 3},
        {.path = "s3://b/t/metadata/x-m0.avro",
         .length = 9,
         .content = ST_ICE_POS_DELETES,
         .seq = 1,
         .min_seq = 1,
         .added_snapshot_id = INT64_MAX,
         .deleted_files = 2,
         .deleted_rows = 4},
    };
    for (int d = 0; d < 2; d++) {
        st_buf_t b = {0};
        CHECK_EQ(st_ice_manifest_list(&b, 78, 77, 6, m, 2, d), ST_OK);
        st_ice_mlist_t l;
        CHECK_EQ(st_ice_manifest_list_read(&l, b.data, b.len), ST_OK);
        CHECK_EQ(l.n, 2);
        CHECK_STR(l.v[0].path, m[0].path);
        CHECK(l.v[0].length == 1234 && l.v[0].seq == 5 && l.v[0].min_seq == 2);
        CHECK(l.v[0].added_snapshot_id == 77 && l.v[0].existing_files == 3);
        CHECK(l.v[0].added_rows == 10 && l.v[0].existing_rows == 30);
        CHECK_STR(l.v[0].lower, "alice");
        CHECK_STR(l.v[0].upper, "bob");
        CHECK_EQ(l.v[1].content, ST_ICE_POS_DELETES);
        CHECK(l.v[1].added_snapshot_id == INT64_MAX && l.v[1].deleted_files == 2);
        CHECK(l.v[1].lower == NULL && l.v[1].upper == NULL);
        st_ice_mlist_free(&l);
        for (size_t len = 0; len + 1 < b.len; len++) /* truncations: an error, never a crash */
            if (st_ice_manifest_list_read(&l, b.data, len) == ST_OK) {
                CHECK(l.n == 0);
                st_ice_mlist_free(&l);
            }
        st_buf_free(&b);
    }
    st_buf_t b = {0}; /* a manifest is not a manifest list */
    st_ice_table_t t = {"messages", "{}", 0, "user", 1, 1000};
    CHECK_EQ(st_ice_manifest(&b, &t, ST_ICE_DATA, NULL, 0, false), ST_OK);
    st_ice_mlist_t l;
    CHECK_EQ(st_ice_manifest_list_read(&l, b.data, b.len), ST_ENOTIMPL);
    st_buf_free(&b);
}

TEST(manifest_round_trip)
{
    st_ice_table_t t = {"messages", "{\"type\":\"struct\"}", 0, "user", 1, 1000};
    /* value_counts {2: 12, 5: 12}, null_value_counts {2: 0}, lower_bounds {2: 1 as 8 bytes},
     * upper_bounds null: read back byte for byte, so a rewrite carries them as they are */
    static const uint8_t mx[] = {2, 4, 4,  24, 10, 24, 0, 2, 2, 4, 0, 0, 2,
                                 2, 4, 16, 1,  0,  0,  0, 0, 0, 0, 0, 0, 0};
    st_ice_file_t f[2] = {
        {.status = ST_ICE_ADDED,
         .snapshot_id = -1,
         .data_seq = -1,
         .file_seq = -1,
         .path = "file:///c/u-alice-w0000000000000001-1.parquet",
         .part = "alice",
         .part_len = 5,
         .records = 12,
         .size = 3456,
         .metrics = mx,
         .metrics_len = sizeof mx},
        {.status = ST_ICE_EXISTING,
         .snapshot_id = 4,
         .data_seq = 2,
         .file_seq = 3,
         .path = "file:///c/b",
         .records = 1,
         .size = 2},
    };
    st_buf_t b = {0};
    CHECK_EQ(st_ice_manifest(&b, &t, ST_ICE_DATA, f, 2, true), ST_OK);
    st_ice_entries_t e;
    CHECK_EQ(st_ice_manifest_read(&e, b.data, b.len), ST_OK);
    CHECK_EQ(e.n, 2);
    CHECK_EQ(e.content, ST_ICE_DATA);
    CHECK_EQ(e.v[0].status, ST_ICE_ADDED);
    CHECK(e.v[0].snapshot_id == -1 && e.v[0].data_seq == -1 && e.v[0].file_seq == -1);
    CHECK_STR(e.v[0].path, f[0].path);
    CHECK_STR(e.v[0].part, "alice");
    CHECK(e.v[0].records == 12 && e.v[0].size == 3456);
    CHECK(e.v[1].snapshot_id == 4 && e.v[1].data_seq == 2 && e.v[1].file_seq == 3);
    CHECK(e.v[1].part == NULL);
    CHECK(e.v[0].metrics_len == sizeof mx && memcmp(e.v[0].metrics, mx, sizeof mx) == 0);
    CHECK(e.v[1].metrics == NULL && e.v[1].metrics_len == 0); /* four nulls: none */
    st_ice_entries_free(&e);
    st_buf_free(&b);
}

/* A manifest an older strata wrote (data_file without the metrics: st_ice_entry_tail_v0) still
 * reads back, its entries without metrics; a rewrite of one writes them with four nulls. */
TEST(manifest_before_metrics_reads_back)
{
    st_buf_t schema = {0}, b = {0}, again = {0};
    st_buf_puts(&schema, st_ice_entry_head);
    st_buf_puts(&schema, "{\"name\":\"user\",\"type\":[\"null\",\"string\"],\"default\":null,"
                         "\"field-id\":1000}");
    st_buf_puts(&schema, st_ice_entry_tail_v0);
    const st_avro_meta_t meta[] = {{"content", "data"}};
    st_avro_w_t *w;
    CHECK_EQ(st_avro_begin(&w, &b, schema.data, true, meta, 1), ST_OK);
    st_avro_put_long(w, ST_ICE_EXISTING);
    for (int i = 0; i < 3; i++) { /* snapshot id, sequence numbers: 7 */
        st_avro_put_union(w, 1);
        st_avro_put_long(w, 7);
    }
    st_avro_put_long(w, ST_ICE_DATA);
    st_avro_put_string(w, "file:///c/old.parquet", 21);
    st_avro_put_string(w, "PARQUET", 7);
    st_avro_put_union(w, 1);
    st_avro_put_string(w, "alice", 5);
    st_avro_put_long(w, 4);
    st_avro_put_long(w, 900);
    st_avro_record_end(w);
    CHECK_EQ(st_avro_finish(w), ST_OK);
    st_ice_entries_t e;
    CHECK_EQ(st_ice_manifest_read(&e, b.data, b.len), ST_OK);
    CHECK_EQ(e.n, 1);
    CHECK_STR(e.v[0].path, "file:///c/old.parquet");
    CHECK(e.v[0].records == 4 && e.v[0].size == 900 && e.v[0].data_seq == 7);
    CHECK(e.v[0].metrics == NULL && e.v[0].metrics_len == 0);
    st_ice_table_t t = {"messages", "{}", 0, "user", 1, 1000};
    CHECK_EQ(st_ice_manifest(&again, &t, ST_ICE_DATA, e.v, e.n, false), ST_OK);
    st_ice_entries_t e2;
    CHECK_EQ(st_ice_manifest_read(&e2, again.data, again.len), ST_OK);
    CHECK(e2.n == 1 && e2.v[0].metrics == NULL && e2.v[0].records == 4);
    st_ice_entries_free(&e2);
    st_ice_entries_free(&e);
    st_buf_free(&again);
    st_buf_free(&b);
    st_buf_free(&schema);
}

/* ---- shared tables (src/tables/shared.c): which manifests carry over ---- */
#define U1 "0e1c6f2a-8a5b-4c3d-9e7f-112233445566"
#define U2 "7f00aa11-2b3c-4d5e-8f90-a1b2c3d4e5f6"
#define U3 "c0ffee00-1111-4222-8333-444455556666"

static st_ice_mfile_t mfile(const char *path, int content, int64_t snap, int32_t af, int32_t ef,
                            int64_t ar, int64_t er)
{
    return (st_ice_mfile_t){.path = path,
                            .length = 100,
                            .content = content,
                            .seq = 3,
                            .min_seq = 1,
                            .added_snapshot_id = snap,
                            .added_files = af,
                            .existing_files = ef,
                            .added_rows = ar,
                            .existing_rows = er,
                            .lower = "a",
                            .lower_len = 1,
                            .upper = "z",
                            .upper_len = 1};
}

TEST(carry_over_keeps_other_writers_manifests)
{
    st_tier_writer_t w = {.current = 0xaa, .n = 2, .owned = {0xaa, 0x99}};
    const char *list = "file:///t/messages/metadata/snap-5-" U1 "-w00000000000000aa.avro";
    st_ice_mfile_t m[] = {
        mfile("file:///t/messages/metadata/" U2 "-w00000000000000aa-m0.avro", ST_ICE_DATA, 5, 1, 4,
              10, 40),
        mfile("file:///t/messages/metadata/" U3 "-w00000000000000bb-m0.avro", ST_ICE_DATA, 4, 2, 1,
              20, 7),
        mfile("file:///t/messages/metadata/" U3 "-w0000000000000099-m0.avro", ST_ICE_DATA, 2, 1, 0,
              1, 0),
        mfile("file:///t/messages/metadata/" U1 "-m0.avro", ST_ICE_DATA, 3, 0, 3, 0, 9),
        mfile("s3://other/warehouse/x-m0.avro", ST_ICE_POS_DELETES, 3, 1, 0, 2, 0),
    };
    st_buf_t b = {0};
    CHECK_EQ(st_ice_manifest_list(&b, 5, 4, 3, m, 5, true), ST_OK);
    st_ice_mlist_t out;
    int64_t rows, files;
    CHECK_EQ(st_tables_carry(b.data, b.len, list, &w, &out, &rows, &files), ST_OK);
    /* ours (current and an older incarnation of ours) go; another writer's, an untokened one that
     * is not this list's pre-token manifest, and another engine's delete manifest stay */
    CHECK_EQ(out.n, 3);
    CHECK_STR(out.v[0].path, m[1].path);
    CHECK(out.v[0].added_snapshot_id == 4 && out.v[0].seq == 3 && out.v[0].min_seq == 1);
    CHECK(out.v[0].added_rows == 20 && out.v[0].existing_rows == 7 && out.v[0].length == 100);
    CHECK_STR(out.v[0].lower, "a");
    CHECK_STR(out.v[1].path, m[3].path);
    CHECK_STR(out.v[2].path, m[4].path);
    CHECK_EQ(out.v[2].content, ST_ICE_POS_DELETES);
    CHECK_EQ(rows, 20 + 7 + 9); /* data manifests only */
    CHECK_EQ(files, 2 + 1 + 3);
    st_ice_mlist_free(&out);

    /* a pre-token list of strata's: its own {uuid}-m0.avro is the committer's (replaced) */
    const char *legacy = "file:///t/messages/metadata/snap-5-" U1 ".avro";
    CHECK_EQ(st_tables_carry(b.data, b.len, legacy, &w, &out, &rows, &files), ST_OK);
    CHECK_EQ(out.n, 2);
    CHECK_STR(out.v[0].path, m[1].path);
    CHECK_STR(out.v[1].path, m[4].path);
    st_ice_mlist_free(&out);
    st_buf_free(&b);

    CHECK(st_tables_list_mine(&w, list));
    CHECK(st_tables_list_mine(&w, legacy));
    CHECK(!st_tables_list_mine(&w, "file:///t/m/snap-5-" U1 "-w00000000000000bb.avro"));
    CHECK(!st_tables_list_mine(&w, "file:///t/m/snap-5-1-" U1 ".avro")); /* Java's name */
    CHECK(!st_tables_list_mine(&w, "file:///t/m/snap-5-" U1 "x.avro"));

    /* not a list strata can read: refused, nothing kept */
    CHECK_EQ(st_tables_carry("Obj\x01", 4, list, &w, &out, &rows, &files), ST_EINVAL);
    CHECK_EQ(out.n, 0);
}

RUN_TESTS("avro_read")
