/* SPDX-License-Identifier: MIT */
/* Unit tests for backups: the segment format catches any damage, object keys round-trip, and the
 * store's tap + snapshot + offline replay rebuild exactly what was written (the restore path),
 * with barriers reported to the tap. */
#include "../test.h"
#include "../fixture.h"
#include "../../src/backup/internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

static int count_rec(void *arg, uint64_t seq, int64_t time, const char *p, size_t len)
{
    (*(int *)arg)++;
    return 0;
}

static st_bk_rec_t *mkrec(uint64_t seq, const char *s)
{
    st_bk_rec_t *r = st_calloc(1, sizeof *r + strlen(s));
    r->seq = seq;
    r->time = (int64_t)seq * 10;
    r->len = strlen(s);
    memcpy(r->data, s, r->len);
    return r;
}

TEST(a_damaged_segment_applies_nothing_whatever_byte_is_hit)
{
    st_bk_rec_t *a = mkrec(7, "hello"), *b = mkrec(8, "world!");
    st_list_t q;
    st_list_init(&q);
    st_list_insert(&q, &a->link);
    st_list_insert(&q, &b->link);
    st_buf_t seg = {0};
    st__bk_seg_encode(&seg, 42, a, 2);
    int n = 0;
    CHECK_EQ(st__bk_seg_decode(seg.data, seg.len, count_rec, &n), ST_OK);
    CHECK_EQ(n, 2);
    for (size_t i = 0; i < seg.len; i++)
        for (int bit = 0; bit < 8; bit++) {
            seg.data[i] ^= (char)(1 << bit);
            n = 0;
            CHECK_EQ(st__bk_seg_decode(seg.data, seg.len, count_rec, &n), ST_EIO);
            CHECK_EQ(n, 0);
            seg.data[i] ^= (char)(1 << bit);
        }
    n = 0;
    CHECK_EQ(st__bk_seg_decode(seg.data, seg.len - 1, count_rec, &n), ST_EIO);
    st_buf_t z = {0}, back = {0};
    CHECK_EQ(st__bk_compress(seg.data, seg.len, &z), ST_OK);
    CHECK_EQ(st__bk_decompress(z.data, z.len, &back), ST_OK);
    CHECK_EQ(back.len, seg.len);
    CHECK(memcmp(back.data, seg.data, seg.len) == 0);
    st_buf_free(&seg);
    st_buf_free(&z);
    st_buf_free(&back);
    free(a);
    free(b);
}

TEST(object_keys_round_trip_and_strangers_are_ignored)
{
    char key[128];
    st_bk_obj_t o;
    st__bk_seg_key(key, sizeof key, 0xabcdef, 10, 20, 1795678520555228);
    CHECK(st__bk_parse_key(key, &o));
    CHECK(!o.snap);
    CHECK_EQ(o.timeline, 0xabcdef);
    CHECK_EQ(o.first, 10);
    CHECK_EQ(o.last, 20);
    CHECK_EQ(o.time, 1795678520555228);
    st__bk_snap_key(key, sizeof key, 5, 99, 123);
    CHECK(st__bk_parse_key(key, &o));
    CHECK(o.snap);
    CHECK_EQ(o.first, 99);
    CHECK_EQ(o.time, 123);
    CHECK(!st__bk_parse_key("snap/0000000000000005/x.zst", &o));
    CHECK(!st__bk_parse_key("seg/0000000000000005/1-2-3.zst.tmp", &o));
    CHECK(!st__bk_parse_key("u1/batch-1-1.parquet", &o));
}

typedef struct {
    st_buf_t recs; /* {u64 seq, u32 len, bytes}* */
    int barriers;
    uint64_t last_seq;
    bool gap;
} tap_t;

static int on_tap(void *arg, uint64_t seq, const void *rec, size_t len, bool barrier)
{
    tap_t *t = arg;
    if (t->last_seq && seq != t->last_seq + 1) t->gap = true;
    t->last_seq = seq;
    uint32_t l = (uint32_t)len;
    st_buf_append(&t->recs, &seq, 8);
    st_buf_append(&t->recs, &l, 4);
    st_buf_append(&t->recs, rec, len);
    t->barriers += barrier;
    return ST_OK;
}

static void put_str(st_store_t *s, const char *k, const char *v)
{
    uint64_t w = 0;
    CHECK_EQ(st_store_put(s, k, strlen(k), v, strlen(v), &w), ST_OK);
}

TEST(snapshot_plus_tapped_records_rebuild_the_store_offline)
{
    fx_t fx, out;
    fx_begin(&fx);
    fx_begin(&out);
    st_store_t *s = fx_store(&fx, 64 << 20, 1 << 20);
    tap_t t = {0};
    st_store_tap(s, on_tap, &t);
    put_str(s, "a", "1");
    fx_settle(&fx, s);
    /* the snapshot: a then, records after it later */
    char path[128];
    snprintf(path, sizeof path, "%s/data.mdb", out.dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    uint64_t floor = 0;
    CHECK_EQ(st_store_copy(s, fd, &floor), ST_OK);
    close(fd);
    put_str(s, "b", "2");
    uint64_t w = 0;
    CHECK_EQ(st_store_barrier(s, &w), ST_EUNAVAIL); /* the tap is not ready: refused, unmarked */
    CHECK_EQ(w, 0);
    st_store_tap_ready(s, true);
    CHECK_EQ(st_store_barrier(s, &w), ST_OK);
    fx_settle(&fx, s);
    put_str(s, "a", "3");
    CHECK_EQ(st_store_del(s, "b", 1, &w), ST_OK);
    put_str(s, "c", "4");
    fx_settle(&fx, s);
    CHECK_EQ(t.barriers, 1);
    CHECK(!t.gap);
    st_store_tap(s, NULL, NULL);
    fx_close_store(&fx, s);

    st_store_offline_t *o;
    uint64_t applied;
    CHECK_EQ(st_store_offline_open(&o, out.dir, 64 << 20, &applied), ST_OK);
    CHECK(applied >= floor);
    CHECK(applied >= 1);
    for (size_t off = 0; off < t.recs.len;) {
        uint64_t seq;
        uint32_t l;
        memcpy(&seq, t.recs.data + off, 8);
        memcpy(&l, t.recs.data + off + 8, 4);
        if (seq > applied)
            CHECK_EQ(st_store_offline_apply(o, seq, t.recs.data + off + 12, l), ST_OK);
        off += 12 + l;
    }
    CHECK_EQ(st_store_offline_close(o), ST_OK);
    st_buf_free(&t.recs);

    /* the rebuilt dir opens as a store holding exactly the final state */
    st_store_t *r = fx_store(&out, 64 << 20, 1 << 20);
    const void *v;
    size_t vlen;
    w = 0;
    CHECK_EQ(st_store_get(r, "a", 1, &v, &vlen, &w), ST_OK);
    CHECK(vlen == 1 && memcmp(v, "3", 1) == 0);
    CHECK_EQ(st_store_get(r, "b", 1, &v, &vlen, &w), ST_ENOTFOUND);
    CHECK_EQ(st_store_get(r, "c", 1, &v, &vlen, &w), ST_OK);
    CHECK(vlen == 1 && memcmp(v, "4", 1) == 0);
    fx_close_store(&out, r);

    /* a malformed record is refused, and the whole run reports it */
    CHECK_EQ(st_store_offline_open(&o, out.dir, 64 << 20, &applied), ST_OK);
    CHECK_EQ(st_store_offline_apply(o, applied + 1, "\x01", 1), ST_EIO);
    CHECK_EQ(st_store_offline_close(o), ST_EIO);
    fx_end(&fx);
    fx_end(&out);
}

RUN_TESTS("backup")
