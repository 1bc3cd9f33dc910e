/* SPDX-License-Identifier: MIT */
/* Unit tests for core: errors, names, numbers, buffers, the hash map, config, metrics. */
#define _GNU_SOURCE /* SCHED_IDLE, SCHED_BATCH, unshare */
#include "../test.h"
#include "strata/alloc.h"
#include "strata/config.h"
#include "strata/core.h"
#include "strata/idle.h"
#include "strata/kinds.h"
#include "strata/metrics.h"

#include <errno.h>
#ifdef ST_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* The well-formed UTF-8 byte sequences of Unicode's Table 3-7, as ranges: the length of the one
 * at p (0 if none is), the reference st_utf8_prefix is checked against. */
static size_t utf8_ref_len(const unsigned char *p, size_t left)
{
    static const struct {
        unsigned char lo[4], hi[4];
        size_t n;
    } t[] = {
        {{0x00}, {0x7f}, 1},
        {{0xc2, 0x80}, {0xdf, 0xbf}, 2},
        {{0xe0, 0xa0, 0x80}, {0xe0, 0xbf, 0xbf}, 3},
        {{0xe1, 0x80, 0x80}, {0xec, 0xbf, 0xbf}, 3},
        {{0xed, 0x80, 0x80}, {0xed, 0x9f, 0xbf}, 3},
        {{0xee, 0x80, 0x80}, {0xef, 0xbf, 0xbf}, 3},
        {{0xf0, 0x90, 0x80, 0x80}, {0xf0, 0xbf, 0xbf, 0xbf}, 4},
        {{0xf1, 0x80, 0x80, 0x80}, {0xf3, 0xbf, 0xbf, 0xbf}, 4},
        {{0xf4, 0x80, 0x80, 0x80}, {0xf4, 0x8f, 0xbf, 0xbf}, 4},
    };
    for (size_t r = 0; r < sizeof t / sizeof t[0]; r++) {
        if (left < t[r].n) continue;
        size_t i = 0;
        while (i < t[r].n && p[i] >= t[r].lo[i] && p[i] <= t[r].hi[i])
            i++;
        if (i == t[r].n) return i;
    }
    return 0;
}

/* Random strings of ASCII runs (the 8-byte path), well-formed sequences, stray continuation and
 * lead bytes, overlongs, surrogates and truncated sequences, at every alignment (0-7 ASCII bytes
 * in front): the valid prefix is the reference's. */
TEST(utf8_prefix_matches_table_3_7_at_every_alignment)
{
    static const struct {
        unsigned char b[4];
        size_t n;
    } pieces[] = {{{0xc3, 0xa9}, 2},
                  {{0xe2, 0x82, 0xac}, 3},
                  {{0xf0, 0x9f, 0x98, 0x80}, 4},
                  {{0xed, 0x9f, 0xbf}, 3},
                  {{0x80}, 1},
                  {{0xc0, 0xaf}, 2},
                  {{0xe0, 0x80, 0xaf}, 3},
                  {{0xed, 0xa0, 0x80}, 3},
                  {{0xf4, 0x90, 0x80, 0x80}, 4},
                  {{0xff}, 1},
                  {{0xc3}, 1},
                  {{0xf0, 0x9f, 0x98}, 3}};
    const size_t npieces = sizeof pieces / sizeof pieces[0];
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    unsigned char buf[300];
    for (int iter = 0; iter < 20000; iter++) {
        size_t off = (size_t)iter % 8, n = off;
        memset(buf, 'a', off);
        for (;;) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            if (x % 48 == 0 || n > sizeof buf - 40) break;
            if (x % 5 == 0) {
                size_t k = (size_t)(x >> 8) % npieces;
                memcpy(buf + n, pieces[k].b, pieces[k].n);
                n += pieces[k].n;
            } else {
                for (size_t i = (size_t)(x >> 16) % 24; i > 0; i--)
                    buf[n++] = (unsigned char)(0x20 + (x >> (i % 48)) % 0x5f);
            }
        }
        size_t want = 0, l;
        while (want < n && (l = utf8_ref_len(buf + want, n - want)) > 0)
            want += l;
        CHECK_EQ(st_utf8_prefix((const char *)buf, n), want);
        CHECK_EQ(st_utf8_valid((const char *)buf, n), want == n);
    }
}

TEST(error_table_maps_codes_to_status_and_wire_names)
{
    CHECK_EQ(st_err_status(ST_EINVAL), 400);
    CHECK_STR(st_err_code(ST_EINVAL), "invalid_argument");
    CHECK_STR(st_err_code(ST_EJSON), "invalid_json");
    CHECK_EQ(st_err_status(ST_EHEADERS), 431);
    CHECK_EQ(st_err_status(ST_ETOOLARGE), 413);
    CHECK_EQ(st_err_status(ST_EFULL), 507);
    CHECK_STR(st_err_code(ST_EFULL), "storage_full");
    CHECK_STR(st_err_code(ST_ESEATS), "seats_unavailable");
    CHECK_EQ(st_err_status(12345), 500);
    CHECK_EQ(st_err_status(ST_OK), 200);
}

TEST(names_follow_the_spec_alphabet_and_length)
{
    CHECK(st_name_valid("a", 1));
    CHECK(st_name_valid("A-z_0.9:x", 9));
    CHECK(!st_name_valid("", 0));
    CHECK(!st_name_valid("a b", 3));
    CHECK(!st_name_valid("a/b", 3));
    CHECK(!st_name_valid("\xc3\xa9", 2));
    char big[300];
    memset(big, 'x', sizeof big);
    CHECK(st_name_valid(big, 255));
    CHECK(!st_name_valid(big, 256));
}

TEST(parse_i64_rejects_junk_and_overflow)
{
    int64_t v;
    CHECK_EQ(st_parse_i64("42", 2, &v), ST_OK);
    CHECK_EQ(v, 42);
    CHECK_EQ(st_parse_i64("-9223372036854775808", 20, &v), ST_OK);
    CHECK(v == INT64_MIN);
    CHECK_EQ(st_parse_i64("9223372036854775808", 19, &v), ST_EINVAL);
    CHECK_EQ(st_parse_i64("12a", 3, &v), ST_EINVAL);
    CHECK_EQ(st_parse_i64("", 0, &v), ST_EINVAL);
    CHECK_EQ(st_parse_i64("-", 1, &v), ST_EINVAL);
}

/* --to-time (issue 38.5): RFC 3339 in any offset and with any fraction is the same µs. */
TEST(parse_time_takes_rfc3339_and_micros)
{
    int64_t v;
    CHECK_EQ(st_parse_time_us("1795816486524214", &v), ST_OK);
    CHECK(v == 1795816486524214);
    CHECK_EQ(st_parse_time_us("2026-11-27T21:55:00Z", &v), ST_OK);
    CHECK(v == 1795816500000000);
    CHECK_EQ(st_parse_time_us("2026-11-27T23:55:00.5+02:00", &v), ST_OK);
    CHECK(v == 1795816500500000);
    CHECK_EQ(st_parse_time_us("2026-11-27t16:25:00.0000019-05:30", &v), ST_OK);
    CHECK(v == 1795816500000001); /* finer than µs is cut */
    CHECK_EQ(st_parse_time_us("2024-02-29T00:00:00Z", &v), ST_OK);
    CHECK(v == 1709164800000000);
    CHECK_EQ(st_parse_time_us("1970-01-01T00:00:00Z", &v), ST_OK);
    CHECK(v == 0);
    const char *bad[] = {"",
                         "2026-11-27",
                         "2026-11-27T21:55:00",
                         "2026-11-27T21:55Z",
                         "2026-02-29T00:00:00Z",
                         "2026-13-01T00:00:00Z",
                         "2026-11-27T24:00:00Z",
                         "2026-11-27T21:55:00.Z",
                         "2026-11-27T21:55:00+2:00",
                         "2026-11-27T21:55:00Z ",
                         "1969-12-31T23:59:59Z",
                         "-5",
                         "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK_EQ(st_parse_time_us(bad[i], &v), ST_EINVAL);
    char buf[40];
    st_format_time_us(1795816500500001, buf, sizeof buf);
    CHECK_STR(buf, "2026-11-27T21:55:00.500001Z");
    st_format_time_us(1709164800000000, buf, sizeof buf);
    CHECK_STR(buf, "2024-02-29T00:00:00.000000Z");
    CHECK_EQ(st_parse_time_us(buf, &v), ST_OK);
    CHECK(v == 1709164800000000);
}

TEST(parse_size_understands_suffixes)
{
    uint64_t v;
    CHECK_EQ(st_parse_size("4096", &v), ST_OK);
    CHECK_EQ(v, 4096);
    CHECK_EQ(st_parse_size("64k", &v), ST_OK);
    CHECK_EQ(v, 65536);
    CHECK_EQ(st_parse_size("1GiB", &v), ST_OK);
    CHECK_EQ(v, 1 << 30);
    CHECK_EQ(st_parse_size("2MB", &v), ST_OK);
    CHECK_EQ(v, 2 << 20);
    CHECK_EQ(st_parse_size("1x", &v), ST_EINVAL);
    CHECK_EQ(st_parse_size("-1", &v), ST_EINVAL);
    CHECK_EQ(st_parse_size("99999999999999999999", &v), ST_EINVAL);
}

TEST(buf_escapes_json_strings)
{
    st_buf_t b = {0};
    st_buf_append_json_str(&b, "a\"b\\c\n\x01", 7);
    CHECK_STR(b.data, "\"a\\\"b\\\\c\\u000a\\u0001\"");
    st_buf_reset(&b);
    st_buf_append_i64(&b, INT64_MIN);
    CHECK_STR(b.data, "-9223372036854775808");
    st_buf_free(&b);
}

/* Every byte of a key of every length up to 40 moves the hash, and the seed moves it too. */
TEST(hash_depends_on_every_byte_length_and_seed)
{
    unsigned char key[40] = {0};
    for (size_t n = 0; n <= sizeof key; n++) {
        uint64_t base = st_hash(key, n);
        if (n) CHECK(base != st_hash(key, n - 1)); /* same bytes, one shorter */
        for (size_t i = 0; i < n; i++)
            for (int bit = 0; bit < 8; bit++) {
                key[i] ^= (unsigned char)(1u << bit);
                uint64_t h = st_hash(key, n);
                key[i] ^= (unsigned char)(1u << bit);
                CHECK(h != base);
                /* avalanche, roughly: one flipped input bit flips about half the output */
                int flipped = __builtin_popcountll(h ^ base);
                CHECK(flipped > 8 && flipped < 56);
            }
    }
    uint64_t a = st_hash("counter", 7);
    st_hash_seed(12345);
    uint64_t b = st_hash("counter", 7);
    st_hash_seed(0x2d358dccaa6c78a5ULL); /* the default again, for the tests that follow */
    CHECK(a != b);
    CHECK_EQ(st_hash("counter", 7), a);
}

/* Sequential names (k0..k65535) spread over the low bits the map uses for its buckets. */
TEST(hash_spreads_sequential_keys_over_buckets)
{
    enum { N = 65536, B = 65536 };
    unsigned short *hits = calloc(B, sizeof *hits);
    char k[16];
    size_t used = 0, worst = 0;
    for (int i = 0; i < N; i++) {
        int n = snprintf(k, sizeof k, "k%d", i);
        unsigned short *b = &hits[st_hash(k, (size_t)n) & (B - 1)];
        if ((*b)++ == 0) used++;
        if (*b > worst) worst = *b;
    }
    free(hits);
    /* a random function fills 1 - 1/e = 63.2 % of the buckets, longest chain ~8 */
    CHECK(used > N * 60 / 100);
    CHECK(worst < 16);
}

typedef struct {
    st_map_node_t node;
    char key[16];
} item_t;

TEST(map_inserts_finds_and_removes_through_growth)
{
    st_map_t m;
    st_map_init(&m);
    item_t *items = calloc(1000, sizeof *items);
    for (int i = 0; i < 1000; i++) {
        int n = snprintf(items[i].key, sizeof items[i].key, "k%d", i);
        items[i].node.key = items[i].key;
        items[i].node.klen = (size_t)n;
        st_map_insert(&m, &items[i].node);
    }
    CHECK_EQ(m.count, 1000);
    CHECK(st_map_get(&m, "k999", 4) == &items[999].node);
    CHECK(st_map_get(&m, "k1000", 5) == NULL);
    for (int i = 0; i < 1000; i += 2)
        st_map_remove(&m, &items[i].node);
    CHECK_EQ(m.count, 500);
    CHECK(st_map_get(&m, "k2", 2) == NULL);
    CHECK(st_map_get(&m, "k3", 2) == &items[3].node);
    size_t it, seen = 0;
    for (st_map_node_t *n = st_map_first(&m, &it); n; n = st_map_next(&m, &it, n))
        seen++;
    CHECK_EQ(seen, 500);
    st_map_free(&m);
    free(items);
}

/* A queue drained in place (the flush and compaction queues: take the first, remove it, again)
 * while new owners join: every node comes out once, a node inserted below the first bucket in
 * use included, and the first bucket a drain starts from only moves up between inserts (so a
 * drain of n nodes passes each empty bucket once, not once a node). */
TEST(map_drained_from_the_front_yields_every_node_once)
{
    st_map_t m;
    st_map_init(&m);
    enum { N = 20000 };
    item_t *items = calloc(N, sizeof *items);
    bool *out = calloc(N, sizeof *out);
    for (int i = 0; i < N; i++) {
        int n = snprintf(items[i].key, sizeof items[i].key, "o%d", i);
        items[i].node.key = items[i].key;
        items[i].node.klen = (size_t)n;
    }
    for (int i = 0; i < N / 2; i++)
        st_map_insert(&m, &items[i].node);
    size_t it, taken = 0, low = 0, next = N / 2;
    bool monotone = true;
    st_map_node_t *n;
    for (;;) {
        bool moving = m.old != NULL;
        if ((n = st_map_first(&m, &it)) == NULL) break;
        if (moving && !m.old) low = 0; /* the buckets being moved ran out: on in the new ones */
        monotone &= it >= low;
        low = it;
        st_map_remove(&m, n);
        out[(item_t *)n - items] = true;
        taken++;
        if (taken % 3 == 0 && next < N) { /* joins meanwhile, wherever its hash puts it */
            st_map_insert(&m, &items[next++].node);
            /* an insert below the first bucket takes it down; one that grows the map starts
             * the drain over in the buckets being moved */
            low = m.old ? m.moved : m.low;
        }
    }
    CHECK(monotone);
    CHECK_EQ(m.count, 0);
    CHECK_EQ(taken, next);
    size_t all = 0;
    for (size_t i = 0; i < next; i++)
        all += out[i];
    CHECK_EQ(all, next);
    st_map_free(&m);
    free(items);
    free(out);
}

/* Growing moves the nodes a few buckets an insert (a million-node rehash in one loop turn took
 * tens of ms): while both tables are in use, every node is found, removed and iterated exactly
 * once, and the move ends long before the next grow is due. */
TEST(map_grows_a_few_buckets_an_insert)
{
    st_map_t m;
    st_map_init(&m);
    enum { N = 5000 };
    item_t *items = calloc(N, sizeof *items);
    for (int i = 0; i < N; i++) {
        int n = snprintf(items[i].key, sizeof items[i].key, "g%d", i);
        items[i].node.key = items[i].key;
        items[i].node.klen = (size_t)n;
    }
    int i = 0;
    while (!(m.old && m.nold == 1024)) /* up to the insert that starts the grow from 1,024 */
        st_map_insert(&m, &items[i++].node);
    CHECK_EQ(m.nold, 1024);
    CHECK(m.moved < 64); /* a few buckets, not all of them */
    size_t grew_at = (size_t)i, bad = 0, seen = 0, it;
    for (int k = 0; k < i; k++)
        bad += st_map_get(&m, items[k].key, strlen(items[k].key)) != &items[k].node;
    CHECK_EQ(bad, 0);
    bool *out = calloc(N, sizeof *out);
    for (st_map_node_t *n = st_map_first(&m, &it); n; n = st_map_next(&m, &it, n)) {
        bad += out[(item_t *)n - items];
        out[(item_t *)n - items] = true;
        seen++;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(seen, (size_t)i);
    for (int k = 0; k < i; k += 3) /* removals from both tables */
        st_map_remove(&m, &items[k].node);
    CHECK(m.old != NULL);
    while (m.old) /* the rest moves with the next inserts */
        st_map_insert(&m, &items[i++].node);
    CHECK((size_t)i - grew_at <= 1024 / 8 + 1);
    CHECK_EQ(m.nbuckets, 2048);
    for (int k = 0; k < i; k++) {
        st_map_node_t *want = (k < (int)grew_at && k % 3 == 0) ? NULL : &items[k].node;
        bad += st_map_get(&m, items[k].key, strlen(items[k].key)) != want;
    }
    CHECK_EQ(bad, 0);
    while (i < N)
        st_map_insert(&m, &items[i++].node);
    seen = 0;
    for (st_map_node_t *n = st_map_first(&m, &it); n; n = st_map_next(&m, &it, n))
        seen++;
    CHECK_EQ(seen, m.count);
    st_map_free(&m);
    free(items);
    free(out);
}

/* Inserts, removals and lookups in a random order against a plain array: the same members at
 * every step, through several grows. */
TEST(map_matches_a_reference_through_grows)
{
    st_map_t m;
    st_map_init(&m);
    enum { N = 30000 };
    item_t *items = calloc(N, sizeof *items);
    bool *in = calloc(N, sizeof *in);
    for (int i = 0; i < N; i++) {
        int n = snprintf(items[i].key, sizeof items[i].key, "r%d", i);
        items[i].node.key = items[i].key;
        items[i].node.klen = (size_t)n;
    }
    uint64_t x = 88172645463325252ULL;
    size_t members = 0, bad = 0;
    for (int step = 0; step < 200000; step++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int k = (int)(x % N);
        if (!in[k] && (x >> 40) % 4 != 0) {
            st_map_insert(&m, &items[k].node);
            in[k] = true, members++;
        } else if (in[k] && (x >> 40) % 4 == 0) {
            st_map_remove(&m, &items[k].node);
            in[k] = false, members--;
        }
        bad +=
            st_map_get(&m, items[k].key, strlen(items[k].key)) != (in[k] ? &items[k].node : NULL);
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(m.count, members);
    size_t seen = 0, it;
    for (st_map_node_t *n = st_map_first(&m, &it); n; n = st_map_next(&m, &it, n))
        bad += !in[(item_t *)n - items], seen++;
    CHECK_EQ(bad, 0);
    CHECK_EQ(seen, members);
    st_map_free(&m);
    free(items);
    free(in);
}

TEST(config_flags_override_environment_override_defaults)
{
    st_config_t c;
    setenv("STRATA_FLUSH_ROWS", "77", 1);
    setenv("STRATA_LISTEN", "0.0.0.0:9", 1);
    char *argv[] = {"strata", "--listen", "127.0.0.1:0", "--map-size=64MiB", NULL};
    CHECK_EQ(st_config_load(&c, 4, argv), ST_OK);
    CHECK_STR(c.listen, "127.0.0.1:0");
    CHECK_EQ(c.flush_rows, 77);
    CHECK_EQ(c.map_size, 64 << 20);
    CHECK_STR(c.data_dir, "./data");
    CHECK_STR(c.cold_url, "file://./data/cold");
    CHECK_EQ(c.flush_interval, 300);
    unsetenv("STRATA_FLUSH_ROWS");
    unsetenv("STRATA_LISTEN");
    char *bad[] = {"strata", "--node-id", "5000", NULL};
    CHECK_EQ(st_config_load(&c, 3, bad), ST_EINVAL);
    char *unknown[] = {"strata", "--nope", "1", NULL};
    CHECK_EQ(st_config_load(&c, 3, unknown), ST_EINVAL);
    /* getopt answers '?' (63) for an unknown flag: never read as the 64th option (a crash once) */
    char *unknown2[] = {"strata", "--no-such-flag", NULL};
    CHECK_EQ(st_config_load(&c, 2, unknown2), ST_EINVAL);
}

/* A kind's number option as parsed into cfg (the kind's struct, through the registry). */
static uint64_t kind_u64(const st_config_t *cfg, const st_kind_t *k, const st_cfg_opt_t *o)
{
    uint64_t v;
    memcpy(&v, (const char *)st_config_kind(cfg, k) + o->off, sizeof v);
    return v;
}

TEST(config_takes_each_kinds_options_from_the_kinds_list)
{
    /* --booking-hot-seconds is the bookings kind's, registered in its own folder */
    const st_kind_t *bk = NULL;
    const st_cfg_opt_t *hot = NULL;
    for (size_t k = 0; k < st_kinds_n; k++)
        for (size_t i = 0; i < st_kinds[k]->nopts; i++)
            if (strcmp(st_kinds[k]->opts[i].flag, "booking-hot-seconds") == 0) {
                bk = st_kinds[k];
                hot = &st_kinds[k]->opts[i];
            }
    CHECK(bk == &st_seats_kind);
    CHECK_STR(hot->env, "STRATA_BOOKING_HOT_SECONDS");
    char *help = NULL;
    size_t hl = 0;
    FILE *f = open_memstream(&help, &hl);
    st_config_usage(f);
    fclose(f);
    st_config_t c;
    char line[1024], val[32];
    for (size_t k = 0; k < st_kinds_n; k++) {
        for (size_t i = 0; i < st_kinds[k]->nopts; i++) {
            const st_cfg_opt_t *o = &st_kinds[k]->opts[i];
            /* --help lists it with its twin, help and default */
            snprintf(line, sizeof line, "  --%-20s %-26s %s (default: %s)\n", o->flag, o->env,
                     o->help, o->def);
            CHECK(strstr(help, line) != NULL);
            if (o->type != ST_CFG_U64) continue;
            /* the default, then the environment, then the flag over the environment */
            char *none[] = {"strata", NULL};
            CHECK_EQ(st_config_load(&c, 1, none), ST_OK);
            CHECK_EQ(kind_u64(&c, st_kinds[k], o), strtoull(o->def, NULL, 10));
            snprintf(val, sizeof val, "%llu", (unsigned long long)o->min);
            setenv(o->env, val, 1);
            CHECK_EQ(st_config_load(&c, 1, none), ST_OK);
            CHECK_EQ(kind_u64(&c, st_kinds[k], o), o->min);
            char flag[64];
            snprintf(flag, sizeof flag, "--%s", o->flag);
            snprintf(val, sizeof val, "%llu", (unsigned long long)o->max);
            char *argv[] = {"strata", flag, val, NULL};
            CHECK_EQ(st_config_load(&c, 3, argv), ST_OK);
            CHECK_EQ(kind_u64(&c, st_kinds[k], o), o->max);
            /* its bounds hold */
            snprintf(val, sizeof val, "%llu", (unsigned long long)o->max + 1);
            CHECK_EQ(st_config_load(&c, 3, argv), ST_EINVAL);
            unsetenv(o->env);
        }
    }
    free(help);
    /* the bookings kind's value as its member hook gets it */
    setenv("STRATA_BOOKING_HOT_SECONDS", "600", 1);
    char *argv[] = {"strata", "--flush-rows", "5", NULL};
    CHECK_EQ(st_config_load(&c, 3, argv), ST_OK);
    CHECK_EQ(kind_u64(&c, bk, hot), 600);
    CHECK_EQ(c.flush_rows, 5);
    char *flag[] = {"strata", "--booking-hot-seconds=7", NULL};
    CHECK_EQ(st_config_load(&c, 2, flag), ST_OK);
    CHECK_EQ(kind_u64(&c, bk, hot), 7);
    unsetenv("STRATA_BOOKING_HOT_SECONDS");
}

TEST(protected_mode_refuses_no_auth_on_a_non_loopback_address)
{
    CHECK(st_config_listen_loopback("127.0.0.1:8080"));
    CHECK(st_config_listen_loopback("127.9.9.9:0"));
    CHECK(st_config_listen_loopback("[::1]:8080"));
    CHECK(st_config_listen_loopback("localhost:1"));
    CHECK(!st_config_listen_loopback("0.0.0.0:8080"));
    CHECK(!st_config_listen_loopback("[::]:8080"));
    CHECK(!st_config_listen_loopback("10.0.0.1:8080"));
    st_config_t c;
    st_config_defaults(&c);
    snprintf(c.listen, sizeof c.listen, "0.0.0.0:8080");
    CHECK_EQ(st_config_check(&c), ST_EINVAL);
    c.insecure = 1;
    CHECK_EQ(st_config_check(&c), ST_OK);
    c.insecure = 0;
    snprintf(c.jwt_jwks_url, sizeof c.jwt_jwks_url, "https://idp.example/certs");
    CHECK_EQ(st_config_check(&c), ST_OK);
    snprintf(c.cluster, sizeof c.cluster, "1=10.0.0.1:9000");
    CHECK_EQ(st_config_check(&c), ST_EINVAL); /* a group with auth on needs --cluster-secret */
    snprintf(c.cluster_secret, sizeof c.cluster_secret, "s");
    CHECK_EQ(st_config_check(&c), ST_OK);
}

TEST(metrics_render_groups_families)
{
    st_metric_t *a = st_metrics_counter("t_req_total", "reqs", "route=\"a\"");
    st_metric_t *g = st_metrics_gauge("t_gauge", "g", "");
    st_metric_t *b = st_metrics_counter("t_req_total", "reqs", "route=\"b\"");
    CHECK(a == st_metrics_counter("t_req_total", "reqs", "route=\"a\""));
    st_metric_add(a, 2);
    st_metric_add(b, 3);
    st_metric_set(g, 7);
    double bounds[] = {1, 10};
    st_metric_t *h = st_metrics_histogram("t_h", "h", "", bounds, 2);
    st_metric_observe(h, 5);
    st_metric_observe(h, 50);
    st_buf_t out = {0};
    st_metrics_render(&out);
    CHECK(strstr(out.data, "t_req_total{route=\"a\"} 2\nt_req_total{route=\"b\"} 3\n"));
    CHECK(strstr(out.data, "t_gauge 7\n"));
    CHECK(strstr(out.data, "t_h_bucket{le=\"10\"} 1\n"));
    CHECK(strstr(out.data, "t_h_bucket{le=\"+Inf\"} 2\n"));
    CHECK(strstr(out.data, "t_h_count 2\n"));
    st_buf_free(&out);
    st_metrics_shutdown();
}

/* A render hook runs once a render, before any gauge's fn; the same one registered twice runs
 * once; st_metrics_shutdown forgets it. */
static int hook_runs, hook_seen_by_gauge;
static void count_hook(void *arg)
{
    (*(int *)arg)++;
}
static double hook_gauge(void *arg)
{
    hook_seen_by_gauge = *(int *)arg;
    return 1;
}

TEST(metrics_render_hooks_run_once_a_render_before_the_gauges)
{
    hook_runs = 0;
    st_metrics_on_render(count_hook, &hook_runs);
    st_metrics_on_render(count_hook, &hook_runs);
    st_metrics_gauge_fn("t_hooked", "h", "", hook_gauge, &hook_runs);
    st_metrics_gauge_fn("t_hooked2", "h", "", hook_gauge, &hook_runs);
    for (int i = 1; i <= 3; i++) {
        st_buf_t out = {0};
        st_metrics_render(&out);
        CHECK_EQ(hook_runs, i);
        CHECK_EQ(hook_seen_by_gauge, i);
        st_buf_free(&out);
    }
    st_metrics_shutdown();
    st_buf_t out = {0};
    st_metrics_render(&out);
    CHECK_EQ(hook_runs, 3);
    st_buf_free(&out);
}

/* alloc.c: a scrape refreshes jemalloc's statistics once (one epoch), not once a strata_malloc_*
 * gauge; with glibc's malloc only strata_malloc_jemalloc 0 is there. */
TEST(a_scrape_refreshes_the_allocator_s_figures_once)
{
    st_alloc_metrics_open();
    st_buf_t out = {0};
    st_metrics_render(&out);
#ifdef ST_JEMALLOC
    CHECK(strstr(out.data, "\nstrata_malloc_jemalloc 1\n"));
    CHECK(strstr(out.data, "\nstrata_malloc_dirty_bytes "));
    for (int i = 0; i < 3; i++) {
        uint64_t e0 = 0, e1 = 0;
        size_t n = sizeof e0;
        CHECK_EQ(mallctl("epoch", &e0, &n, NULL, 0), 0);
        st_buf_reset(&out);
        st_metrics_render(&out);
        CHECK_EQ(mallctl("epoch", &e1, &n, NULL, 0), 0);
        CHECK_EQ(e1 - e0, 1);
    }
#else
    CHECK(strstr(out.data, "\nstrata_malloc_jemalloc 0\n"));
    CHECK(!strstr(out.data, "strata_malloc_allocated_bytes"));
#endif
    st_buf_free(&out);
    st_metrics_shutdown();
}

TEST(snowflakes_increase_and_encode_node_and_time)
{
    st_snowflake_t sf;
    st_snowflake_init(&sf, 7);
    uint64_t prev = 0;
    for (int i = 0; i < 20000; i++) { /* more than 4096 per ms: borrows the next ms */
        uint64_t id = st_snowflake_next(&sf);
        CHECK(id > prev);
        CHECK_EQ((id >> 12) & 1023, 7);
        prev = id;
    }
    int64_t t = st_snowflake_time_us(prev);
    CHECK(t > st_now_us() - 60000000LL && t < st_now_us() + 60000000LL);
    /* a floor from the future (clock went back across a restart) is respected */
    st_snowflake_t sf2;
    st_snowflake_init(&sf2, 7);
    st_snowflake_floor(&sf2, prev + (1000ULL << 22));
    CHECK(st_snowflake_next(&sf2) > prev + (1000ULL << 22));
}

/* Regression: the floor compared only the millisecond and sequence bits, so after a restart
 * with a lower node id (same millisecond, clock gone back) the next id was below the floor. */
TEST(snowflake_floor_from_a_higher_node_id_is_never_undercut)
{
    st_snowflake_t a, b;
    st_snowflake_init(&a, 9);
    uint64_t floor = st_snowflake_next(&a) + (5000ULL << 22); /* ahead of the clock */
    st_snowflake_init(&b, 3);
    st_snowflake_floor(&b, floor);
    CHECK(st_snowflake_next(&b) > floor);
    st_snowflake_init(&b, 900);
    st_snowflake_floor(&b, floor | 4000);
    CHECK(st_snowflake_next(&b) > (floor | 4000));
}

/* ---- idle (core/idle.c): each case in a child, whose policy, limits and capabilities it
 * changes ---- */

/* At SCHED_BATCH with SCHED_RESET_ON_FORK and nice 5 (as under `chrt -b -R` and `nice`), the
 * thread comes back to exactly that, twice; a leave without an enter changes nothing. Then a
 * real-time policy, where this process may set one: back at SCHED_FIFO with its priority. */
static void kid_back_to_its_own_policy(void)
{
    struct sched_param sp = {0};
    KID_CHECK(sched_setscheduler(0, SCHED_BATCH | SCHED_RESET_ON_FORK, &sp) == 0);
    KID_CHECK(setpriority(PRIO_PROCESS, 0, 5) == 0);
    st_idle_t t;
    st_idle_init(&t, "a test thread");
    if (!st_idle_may(&t)) KID_NOT_EXERCISED();
    for (int i = 0; i < 2; i++) {
        KID_CHECK(st_idle_enter(&t));
        KID_CHECK(sched_getscheduler(0) == (SCHED_IDLE | SCHED_RESET_ON_FORK));
        st_idle_leave(&t);
        KID_CHECK(sched_getscheduler(0) == (SCHED_BATCH | SCHED_RESET_ON_FORK));
        errno = 0;
        KID_CHECK(getpriority(PRIO_PROCESS, 0) == 5 && errno == 0);
    }
    st_idle_leave(&t);
    KID_CHECK(sched_getscheduler(0) == (SCHED_BATCH | SCHED_RESET_ON_FORK));
    sp.sched_priority = 3;
    if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) != 0) return;
    st_idle_init(&t, "a test thread");
    KID_CHECK(st_idle_enter(&t));
    st_idle_leave(&t);
    KID_CHECK(sched_getscheduler(0) == (SCHED_FIFO | SCHED_RESET_ON_FORK));
    KID_CHECK(sched_getparam(0, &sp) == 0 && sp.sched_priority == 3);
}

TEST(idle_comes_back_to_the_thread_s_own_policy_priority_and_nice)
{
    RUN_IN_CHILD(kid_back_to_its_own_policy,
                 "no thread here may leave SCHED_IDLE (CAP_SYS_NICE, RLIMIT_NICE of 15)");
}

/* Without CAP_SYS_NICE and with RLIMIT_NICE 0 (an unprivileged container's), the thread never
 * goes to SCHED_IDLE; that the kernel would then have kept it there is shown last. */
static void kid_not_where_it_could_not_leave(void)
{
    KID_CHECK(st_unprivileged_nice());
    st_idle_t t;
    st_idle_init(&t, "a test thread");
    KID_CHECK(!st_idle_may(&t));
    KID_CHECK(!st_idle_enter(&t));
    KID_CHECK(sched_getscheduler(0) == SCHED_OTHER);
    st_idle_leave(&t);
    KID_CHECK(sched_getscheduler(0) == SCHED_OTHER);
    struct sched_param sp = {0};
    KID_CHECK(sched_setscheduler(0, SCHED_IDLE, &sp) == 0);
    if (sched_setscheduler(0, SCHED_OTHER, &sp) == 0 || errno != EPERM) KID_NOT_EXERCISED();
}

TEST(idle_is_not_entered_where_the_way_back_is_not_allowed)
{
    RUN_IN_CHILD(kid_not_where_it_could_not_leave,
                 "the kernel lets a thread leave SCHED_IDLE without CAP_SYS_NICE here");
}

/* In a user namespace of its own the process holds CAP_SYS_NICE, which the kernel does not
 * honour (the prediction believes it): the return is refused, and from then on no thread goes
 * to SCHED_IDLE. */
static void kid_refused_once_never_again(void)
{
    struct rlimit rl = {0, 0};
    KID_CHECK(setrlimit(RLIMIT_NICE, &rl) == 0);
    if (unshare(CLONE_NEWUSER) != 0) KID_NOT_EXERCISED();
    st_idle_t t;
    st_idle_init(&t, "a test thread");
    KID_CHECK(st_idle_may(&t));
    KID_CHECK(st_idle_enter(&t));
    st_idle_leave(&t);
    if (sched_getscheduler(0) != SCHED_IDLE) KID_NOT_EXERCISED(); /* it was allowed after all */
    KID_CHECK(!st_idle_may(&t));
    KID_CHECK(!st_idle_enter(&t));
}

TEST(idle_stops_for_good_once_a_return_is_refused)
{
    RUN_IN_CHILD(kid_refused_once_never_again,
                 "no user namespace of its own here, or its CAP_SYS_NICE is honoured");
}

RUN_TESTS("core")
