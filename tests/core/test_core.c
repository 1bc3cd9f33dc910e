/* SPDX-License-Identifier: MIT */
/* Unit tests for core: errors, names, numbers, buffers, the hash map, config, metrics. */
#include "../test.h"
#include "strata/config.h"
#include "strata/core.h"
#include "strata/metrics.h"

#include <stdlib.h>

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

RUN_TESTS("core")
