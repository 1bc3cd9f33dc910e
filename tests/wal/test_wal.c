/* SPDX-License-Identifier: MIT */
/* Unit tests for the redo log: replay stops at a torn or stale record, the two halves replay in
 * generation order, a log written before the halves still replays and becomes halves at its
 * first reset. */
#include "../test.h"
#include "../fixture.h"
#include "../../src/store/wal.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static int replay_count(void *arg, uint64_t seq, const char *p, size_t len)
{
    (void)p;
    (void)len;
    uint64_t *last = arg;
    *last = seq;
    return 0;
}

/* Writes bytes into the log file at off, behind the log's back (what a failed write left). */
static void write_at(const fx_t *fx, long off, const void *p, size_t n)
{
    char path[256];
    snprintf(path, sizeof path, "%s/strata.wal", fx->dir);
    FILE *f = fopen(path, "r+b");
    CHECK(f);
    fseek(f, off, SEEK_SET);
    CHECK_EQ(fwrite(p, 1, n, f), n);
    fclose(f);
}

TEST(wal_replays_valid_records_and_stops_at_a_torn_tail)
{
    fx_t fx;
    fx_begin(&fx);
    st_wal_t *w;
    CHECK_EQ(st_wal_open(fx.dir, 1 << 20, &w), ST_OK);
    CHECK_EQ(st_wal_append(w, 1, "aaaa", 4), ST_OK);
    CHECK_EQ(st_wal_append(w, 2, "bbbb", 4), ST_OK);
    CHECK_EQ(st_wal_append(w, 3, "cccc", 4), ST_OK);
    st_wal_close(w);
    /* tear the last record: flip one payload byte */
    char path[256];
    snprintf(path, sizeof path, "%s/strata.wal", fx.dir);
    FILE *f = fopen(path, "r+b");
    CHECK(f);
    fseek(f, ST_WAL_HEADER + 2 * 28 + 24, SEEK_SET);
    fputc('X', f);
    fclose(f);
    CHECK_EQ(st_wal_open(fx.dir, 1 << 20, &w), ST_OK);
    uint64_t last = 0;
    CHECK_EQ(st_wal_replay(w, replay_count, &last), ST_OK);
    CHECK_EQ(last, 2);
    /* a new generation hides every old record */
    CHECK_EQ(st_wal_reset(w), ST_OK);
    last = 0;
    CHECK_EQ(st_wal_replay(w, replay_count, &last), ST_OK);
    CHECK_EQ(last, 0);
    CHECK_EQ(st_wal_append(w, 9, "dddd", 4), ST_OK);
    st_wal_close(w);
    CHECK_EQ(st_wal_open(fx.dir, 1 << 20, &w), ST_OK);
    CHECK_EQ(st_wal_replay(w, replay_count, &last), ST_OK);
    CHECK_EQ(last, 9);
    char big[100];
    memset(big, 'z', sizeof big);
    CHECK_EQ(st_wal_append(w, 10, big, (1 << 20)), ST_ETOOLARGE);
    st_wal_close(w);
    fx_end(&fx);
}

/* Regression: after a failed append the log was written again at the same place; a shorter
 * record left the failed one's bytes behind it, and replay could read on into them (here a
 * record hidden in the failed payload, as a client's value could hold one). */
static void wal_record(char *out, uint64_t seq, const char *p, uint32_t len, bool good_crc)
{
    uint64_t gen = 1; /* a fresh log's generation */
    uLong c = crc32(0L, Z_NULL, 0);
    c = crc32(c, (const Bytef *)&gen, 8);
    c = crc32(c, (const Bytef *)&seq, 8);
    c = crc32(c, (const Bytef *)p, len);
    uint32_t crc = (uint32_t)c ^ (good_crc ? 0 : 1);
    memcpy(out, &len, 4);
    memcpy(out + 4, &crc, 4);
    memcpy(out + 8, &gen, 8);
    memcpy(out + 16, &seq, 8);
    memcpy(out + 24, p, len);
}

TEST(wal_rewritten_after_a_failed_append_never_replays_what_the_failed_one_left)
{
    fx_t fx;
    fx_begin(&fx);
    st_wal_t *w;
    CHECK_EQ(st_wal_open(fx.dir, 1 << 20, &w), ST_OK);
    CHECK_EQ(st_wal_append(w, 1, "aaaa", 4), ST_OK);
    st_wal_close(w);
    /* the failed append of seq 2, torn: "xxxx" then a well-formed seq 3 in its payload */
    char hidden[32], payload[36], failed[60];
    wal_record(hidden, 3, "PHANTOM!", 8, true);
    memcpy(payload, "xxxx", 4);
    memcpy(payload + 4, hidden, 32);
    wal_record(failed, 2, payload, 36, false);
    write_at(&fx, ST_WAL_HEADER + 28, failed, sizeof failed);
    /* the retry: seq 2 again, shorter, in the same place */
    CHECK_EQ(st_wal_open(fx.dir, 1 << 20, &w), ST_OK);
    uint64_t last = 0;
    CHECK_EQ(st_wal_replay(w, replay_count, &last), ST_OK);
    CHECK_EQ(last, 1);
    CHECK_EQ(st_wal_append(w, 2, "bbbb", 4), ST_OK);
    st_wal_close(w);
    CHECK_EQ(st_wal_open(fx.dir, 1 << 20, &w), ST_OK);
    last = 0;
    CHECK_EQ(st_wal_replay(w, replay_count, &last), ST_OK);
    CHECK_EQ(last, 2); /* not 3 */
    st_wal_close(w);
    fx_end(&fx);
}

typedef struct {
    uint64_t seqs[4096];
    size_t n;
} seen_t;

static int replay_all(void *arg, uint64_t seq, const char *p, size_t len)
{
    seen_t *s = arg;
    CHECK(len == 40 && (uint64_t)atoi(p) == seq);
    if (s->n < 4096) s->seqs[s->n++] = seq;
    return 0;
}

static int append_n(st_wal_t *w, uint64_t seq)
{
    char rec[40] = {0};
    snprintf(rec, sizeof rec, "%llu", (unsigned long long)seq);
    return st_wal_append(w, seq, rec, sizeof rec);
}

/* Appends fill one half, go on in the other, and come back to the first: after a crash the
 * older half replays before the newer, and a half written over shows none of its old records. */
TEST(wal_halves_replay_oldest_first_and_a_reused_half_hides_its_old_records)
{
    fx_t fx;
    fx_begin(&fx);
    st_wal_t *w;
    CHECK_EQ(st_wal_open(fx.dir, 64 << 10, &w), ST_OK); /* two halves of 32 KiB */
    uint64_t seq = 0, first_of_third = 0;
    for (int half = 0; half < 3; half++) {
        if (half == 2) first_of_third = seq + 1;
        while (append_n(w, seq + 1) == ST_OK)
            seq++;
        CHECK(st_wal_remaining(w) < st_wal_record_size(40));
        if (half < 2) CHECK_EQ(st_wal_switch(w), ST_OK);
    }
    st_wal_close(w); /* a crash: nothing reset */
    CHECK_EQ(st_wal_open(fx.dir, 64 << 10, &w), ST_OK);
    seen_t seen = {0};
    CHECK_EQ(st_wal_replay(w, replay_all, &seen), ST_OK);
    /* the second half (older), then the first one written over (newer) */
    CHECK(seen.n > 0);
    uint64_t first_of_second = seen.seqs[0];
    CHECK(first_of_second > 1 && first_of_second < first_of_third);
    for (size_t i = 0; i < seen.n; i++)
        CHECK_EQ(seen.seqs[i], first_of_second + i);
    CHECK_EQ(seen.seqs[seen.n - 1], seq);
    CHECK_EQ(st_wal_older_last(w), first_of_third - 1);
    /* appends go on after the newest record; a reset hides both halves */
    CHECK_EQ(append_n(w, seq + 1) == ST_OK || st_wal_remaining(w) < st_wal_record_size(40), 1);
    CHECK_EQ(st_wal_reset(w), ST_OK);
    CHECK_EQ(append_n(w, 1000), ST_OK);
    st_wal_close(w);
    CHECK_EQ(st_wal_open(fx.dir, 64 << 10, &w), ST_OK);
    seen = (seen_t){0};
    CHECK_EQ(st_wal_replay(w, replay_all, &seen), ST_OK);
    CHECK_EQ(seen.n, 1);
    CHECK_EQ(seen.seqs[0], 1000);
    st_wal_close(w);
    fx_end(&fx);
}

/* A log from before the halves: one header {"STRATAWAL1", gen, crc} and records over the whole
 * file. It replays as it is; its reset turns the file into halves. */
TEST(wal_written_before_the_halves_replays_and_its_reset_makes_halves)
{
    fx_t fx;
    fx_begin(&fx);
    char path[256];
    snprintf(path, sizeof path, "%s/strata.wal", fx.dir);
    size_t size = 64 << 10;
    char *img = calloc(1, size);
    uint64_t gen = 7;
    memcpy(img, "STRATAWAL1", 10);
    memcpy(img + 16, &gen, 8);
    uLong c = crc32(0L, Z_NULL, 0);
    c = crc32(c, (const Bytef *)&gen, 8);
    uint64_t zero = 0;
    c = crc32(c, (const Bytef *)&zero, 8);
    c = crc32(c, (const Bytef *)img, 16);
    uint32_t hc = (uint32_t)c;
    memcpy(img + 24, &hc, 4);
    /* records 1..n, across the middle of the file */
    size_t off = ST_WAL_HEADER;
    uint64_t n = 0;
    while (off + 64 <= size - 64) {
        char p[40] = {0};
        uint64_t seq = ++n;
        snprintf(p, sizeof p, "%llu", (unsigned long long)seq);
        uint32_t len = 40;
        uLong rc = crc32(0L, Z_NULL, 0);
        rc = crc32(rc, (const Bytef *)&gen, 8);
        rc = crc32(rc, (const Bytef *)&seq, 8);
        rc = crc32(rc, (const Bytef *)p, len);
        uint32_t crc = (uint32_t)rc;
        memcpy(img + off, &len, 4);
        memcpy(img + off + 4, &crc, 4);
        memcpy(img + off + 8, &gen, 8);
        memcpy(img + off + 16, &seq, 8);
        memcpy(img + off + 24, p, len);
        off += 64;
    }
    FILE *f = fopen(path, "wb");
    CHECK(f);
    CHECK_EQ(fwrite(img, 1, size, f), size);
    fclose(f);
    free(img);
    st_wal_t *w;
    CHECK_EQ(st_wal_open(fx.dir, size, &w), ST_OK);
    CHECK(st_wal_legacy(w));
    seen_t seen = {0};
    CHECK_EQ(st_wal_replay(w, replay_all, &seen), ST_OK);
    CHECK_EQ(seen.n, n);                   /* every record, also those past the middle */
    CHECK_EQ(st_wal_switch(w), ST_EINVAL); /* one region: only a reset moves on */
    /* what fits is what fits a half: the log becomes halves at the reset that makes room */
    size_t big = size / 2;
    CHECK(!st_wal_fits_empty(w, big));
    CHECK(st_wal_fits_empty(w, size / 2 - ST_WAL_HEADER - 24));
    CHECK_EQ(st_wal_reset(w), ST_OK);
    CHECK(!st_wal_legacy(w));
    CHECK_EQ(append_n(w, n + 1), ST_OK);
    st_wal_close(w);
    CHECK_EQ(st_wal_open(fx.dir, size, &w), ST_OK);
    CHECK(!st_wal_legacy(w));
    seen = (seen_t){0};
    CHECK_EQ(st_wal_replay(w, replay_all, &seen), ST_OK);
    CHECK_EQ(seen.n, 1);
    CHECK_EQ(seen.seqs[0], n + 1);
    st_wal_close(w);
    fx_end(&fx);
}

/* A record damaged in the middle of the older half ends replay there: the newer half's records
 * come after a gap and are not applied (LMDB would hold later writes without earlier ones). */
TEST(wal_damage_in_the_older_half_stops_replay_before_the_newer_half)
{
    fx_t fx;
    fx_begin(&fx);
    st_wal_t *w;
    CHECK_EQ(st_wal_open(fx.dir, 64 << 10, &w), ST_OK); /* two halves of 32 KiB */
    uint64_t seq = 0;
    while (append_n(w, seq + 1) == ST_OK)
        seq++;
    CHECK(seq > 10);
    CHECK_EQ(st_wal_switch(w), ST_OK);
    for (int i = 0; i < 3; i++, seq++)
        CHECK_EQ(append_n(w, seq + 1), ST_OK);
    st_wal_close(w);
    /* flip one payload byte of seq 5, in the first half (records of 64 bytes) */
    char path[256];
    snprintf(path, sizeof path, "%s/strata.wal", fx.dir);
    FILE *f = fopen(path, "r+b");
    CHECK(f);
    fseek(f, ST_WAL_HEADER + 4 * 64 + 24 + 30, SEEK_SET);
    fputc('X', f);
    fclose(f);
    CHECK_EQ(st_wal_open(fx.dir, 64 << 10, &w), ST_OK);
    seen_t seen = {0};
    CHECK_EQ(st_wal_replay(w, replay_all, &seen), ST_OK);
    CHECK_EQ(seen.n, 4);
    for (size_t i = 0; i < seen.n; i++)
        CHECK_EQ(seen.seqs[i], i + 1);
    /* appends go on after seq 4, and a crash then replays them after it */
    CHECK_EQ(append_n(w, 5), ST_OK);
    st_wal_close(w);
    CHECK_EQ(st_wal_open(fx.dir, 64 << 10, &w), ST_OK);
    seen = (seen_t){0};
    CHECK_EQ(st_wal_replay(w, replay_all, &seen), ST_OK);
    CHECK_EQ(seen.n, 5);
    CHECK_EQ(seen.seqs[4], 5);
    st_wal_close(w);
    fx_end(&fx);
}

/* Records the seqs and the payloads' first bytes replayed. */
typedef struct {
    uint64_t seqs[16];
    char first[16];
    size_t n;
} seqs_t;

static int replay_seqs(void *arg, uint64_t seq, const char *p, size_t len)
{
    seqs_t *s = arg;
    CHECK(len > 0 && s->n < 16);
    s->first[s->n] = p[0];
    s->seqs[s->n++] = seq;
    return 0;
}

/* Two records in flight at once: the second is placed apart (at the first free block past the
 * first one's empty header), written before the first finishes, and both replay in order. */
static void write_io(st_wal_t *w, st_wal_io_t *io, const char *p, size_t n, bool done)
{
    st_wal_build(io, p, n);
    CHECK_EQ(st_wal_write(io), ST_OK);
    if (done) CHECK_EQ(st_wal_done(w, io, ST_OK), ST_OK);
}

TEST(wal_records_written_apart_replay_in_order_and_a_torn_first_hides_the_second)
{
    fx_t fx;
    fx_begin(&fx);
    st_wal_t *w;
    CHECK_EQ(st_wal_open(fx.dir, 1 << 20, &w), ST_OK);
    CHECK_EQ(st_wal_append(w, 1, "aaaa", 4), ST_OK);
    st_wal_io_t a = {0}, b = {0}, c = {0};
    CHECK_EQ(st_wal_reserve(w, 2, 5, false, &a), ST_OK);
    CHECK_EQ(st_wal_reserve(w, 3, 6, true, &b), ST_OK);
    CHECK(b.at % 4096 == 0 && b.at > a.at + 24 + 5); /* its own block, after a's */
    CHECK(b.from >= a.to);                           /* no block written twice at once */
    write_io(w, &b, "cccccc", 6, false);             /* the later one lands first */
    write_io(w, &a, "bbbbb", 5, true);
    CHECK_EQ(st_wal_done(w, &b, ST_OK), ST_OK);
    /* and in place again after it, once nothing is in flight */
    CHECK_EQ(st_wal_reserve(w, 4, 3, false, &c), ST_OK);
    CHECK_EQ(c.at, b.at + 24 + 6);
    write_io(w, &c, "ddd", 3, true);
    st_wal_close(w);
    CHECK_EQ(st_wal_open(fx.dir, 1 << 20, &w), ST_OK);
    seqs_t seen = {0};
    CHECK_EQ(st_wal_replay(w, replay_seqs, &seen), ST_OK);
    CHECK_EQ(seen.n, 4);
    for (size_t i = 0; i < seen.n; i++)
        CHECK_EQ(seen.seqs[i], i + 1);
    CHECK_EQ(seen.first[2], 'c');
    st_wal_close(w);

    /* the first of two in flight never landed (a crash): the second is not replayed, though
     * valid, and what is appended after the replay goes on from the first's place */
    CHECK_EQ(st_wal_open(fx.dir, 1 << 20, &w), ST_OK);
    CHECK_EQ(st_wal_reset(w), ST_OK);
    CHECK_EQ(st_wal_append(w, 10, "aaaa", 4), ST_OK);
    CHECK_EQ(st_wal_reserve(w, 11, 5, false, &a), ST_OK);
    CHECK_EQ(st_wal_reserve(w, 12, 6, true, &b), ST_OK);
    write_io(w, &b, "cccccc", 6, false);
    st_wal_close(w); /* a never written */
    CHECK_EQ(st_wal_open(fx.dir, 1 << 20, &w), ST_OK);
    seen = (seqs_t){0};
    CHECK_EQ(st_wal_replay(w, replay_seqs, &seen), ST_OK);
    CHECK_EQ(seen.n, 1);
    CHECK_EQ(seen.seqs[0], 10);
    /* without a reset (a replay that waits for room in LMDB) the rest of the half is cleared:
     * a new seq 11 placed where it ends just before the stale 12 cannot bring 12 back */
    CHECK_EQ(st_wal_clear_tail(w), ST_OK);
    CHECK_EQ(st_wal_reserve(w, 11, 5, false, &a), ST_OK);
    write_io(w, &a, "BBBBB", 5, true);
    st_wal_close(w);
    CHECK_EQ(st_wal_open(fx.dir, 1 << 20, &w), ST_OK);
    seen = (seqs_t){0};
    CHECK_EQ(st_wal_replay(w, replay_seqs, &seen), ST_OK);
    CHECK_EQ(seen.n, 2);
    CHECK_EQ(seen.seqs[1], 11);
    CHECK_EQ(seen.first[1], 'B');
    st_wal_close(w);
    free(a.buf);
    free(b.buf);
    free(c.buf);
    fx_end(&fx);
}

/* Regression: replay looks for a record written apart at the first block past an empty
 * header, and a client's value can hold a well-formed record there: what a failed append left
 * behind a shorter retry of it, or a torn record whose header did reach the disk. Neither may
 * replay: a record written apart carries the half's secret in its CRC. */
TEST(wal_a_record_hidden_where_one_written_apart_would_start_never_replays)
{
    for (int torn = 0; torn < 2; torn++) {
        fx_t fx;
        fx_begin(&fx);
        st_wal_t *w;
        CHECK_EQ(st_wal_open(fx.dir, 1 << 20, &w), ST_OK);
        CHECK_EQ(st_wal_append(w, 1, "aaaa", 4), ST_OK); /* ends at 4124 */
        st_wal_close(w);
        /* seq 2, torn, from 4124; its payload holds a well-formed record at 8192 (the first
         * block past the empty header after 4124 + 28): seq 3 behind a retry, else seq 2 */
        static char hidden[32], payload[4044 + 32], failed[24 + sizeof payload];
        wal_record(hidden, torn ? 2 : 3, "PHANTOM!", 8, true);
        memset(payload, 'x', sizeof payload);
        memcpy(payload + 4044, hidden, sizeof hidden);
        wal_record(failed, 2, payload, sizeof payload, false);
        write_at(&fx, ST_WAL_HEADER + 28, failed, sizeof failed);
        CHECK_EQ(st_wal_open(fx.dir, 1 << 20, &w), ST_OK);
        uint64_t last = 0;
        CHECK_EQ(st_wal_replay(w, replay_count, &last), ST_OK);
        CHECK_EQ(last, 1);
        if (!torn) CHECK_EQ(st_wal_append(w, 2, "bbbb", 4), ST_OK); /* the retry, shorter */
        st_wal_close(w);
        CHECK_EQ(st_wal_open(fx.dir, 1 << 20, &w), ST_OK);
        last = 0;
        CHECK_EQ(st_wal_replay(w, replay_count, &last), ST_OK);
        CHECK_EQ(last, torn ? 1 : 2); /* never the hidden record */
        st_wal_close(w);
        fx_end(&fx);
    }
}

RUN_TESTS("wal")
