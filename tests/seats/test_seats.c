/* SPDX-License-Identifier: MIT */
/* Unit tests for seats: bitmap layout, stats kept in step, best available, expiry, rebuild. */
#include "../test.h"
#include "../fixture.h"
#include "strata/metrics.h"
#include "strata/seats.h"

#include <stdlib.h>

static fx_t fx;
static st_store_t *store;
static st_seats_t *seats;
static const st_booking_ref_t any = {NULL, 0, "", 0, true};

static void open_all(bool fresh)
{
    if (fresh) fx_begin(&fx);
    store = fx_store(&fx, 64 << 20, 0);
    st_seats_opts_t so = {1000000, 1, 0};
    if (st_seats_open(&seats, &fx.loop, store, &so) != ST_OK) abort();
}

/* remove: also drop the data dir (otherwise the next open_all(false) reopens it). */
static void close_all(bool remove)
{
    fx_settle(&fx, store);
    st_seats_close(seats);
    fx_close_store(&fx, store);
    if (remove)
        fx_end(&fx);
    else
        st_metrics_shutdown();
}

static void create(const char *id, int64_t rows, int64_t cols, int64_t hold)
{
    st_section_spec_t sec = {"S", 1, rows, cols, 10};
    st_event_spec_t spec = {id, strlen(id), NULL, 0, hold, &sec, 1};
    st_buf_t out = {0};
    const char *why;
    uint64_t w = 0;
    CHECK_EQ(st_seats_create(seats, &spec, &out, &why, &w), ST_OK);
    st_buf_free(&out);
}

static int book(const char *id, const char *const *names, size_t n, int64_t q, st_buf_t *out)
{
    size_t lens[8];
    for (size_t i = 0; i < n; i++)
        lens[i] = strlen(names[i]);
    st_buf_t taken = {0};
    const char *why;
    uint64_t w = 0;
    st_buf_reset(out);
    int rc = st_seats_book(seats, id, strlen(id), "S", 1, names, lens, n, q, "", 0, out, &taken,
                           &why, &w);
    st_buf_free(&taken);
    return rc;
}

TEST(bitmap_matches_the_wire_layout_and_stats_match_a_recount)
{
    open_all(true);
    create("e", 2, 5, 900);
    st_buf_t out = {0};
    const char *s1[] = {"1-1", "1-4", "2-5"};
    CHECK_EQ(book("e", s1, 3, 0, &out), ST_OK);
    st_buf_reset(&out);
    uint64_t w = 0;
    CHECK_EQ(st_seats_map_json(seats, "e", 1, "S", 1, false, &out, &w), ST_OK);
    /* seats 0, 3, 9 reserved: byte0 = 01 00 00 01 -> 0x41, byte1 = 0, byte2 = 0x04 */
    CHECK(strstr(out.data, "\"seats\":\"QQAE\""));
    CHECK(st_seats_check(seats));
    const char *s2[] = {"1-4", "1-5"};
    CHECK_EQ(book("e", s2, 2, 0, &out), ST_ESEATS);
    CHECK(st_seats_check(seats));
    st_buf_free(&out);
    close_all(true);
}

TEST(best_available_prefers_one_row_then_fewest_blocks)
{
    open_all(true);
    create("b", 3, 4, 900);
    st_buf_t out = {0};
    const char *s1[] = {"1-2", "2-2", "2-3"};
    CHECK_EQ(book("b", s1, 3, 0, &out), ST_OK);
    CHECK_EQ(book("b", NULL, 0, 3, &out), ST_OK);
    CHECK(strstr(out.data, "[\"3-1\",\"3-2\",\"3-3\"]"));
    CHECK_EQ(book("b", NULL, 0, 2, &out), ST_OK);
    CHECK(strstr(out.data, "[\"1-3\",\"1-4\"]"));
    /* left: 1-1, 2-1, 2-4, 3-4 */
    CHECK_EQ(book("b", NULL, 0, 5, &out), ST_ESEATS);
    CHECK_EQ(book("b", NULL, 0, 4, &out), ST_OK);
    CHECK(st_seats_check(seats));
    st_buf_free(&out);
    close_all(true);
}

TEST(holds_expire_and_everything_is_rebuilt_after_a_restart)
{
    open_all(true);
    create("x", 2, 2, 1);
    create("y", 2, 2, 3600);
    st_buf_t out = {0};
    CHECK_EQ(book("x", NULL, 0, 2, &out), ST_OK);
    CHECK_EQ(book("y", NULL, 0, 3, &out), ST_OK);
    char *id = strstr(out.data, "\"booking_id\":\"") + 14;
    uint64_t bid = strtoull(id, NULL, 10);
    uint64_t w = 0;
    st_buf_reset(&out);
    CHECK_EQ(st_seats_confirm(seats, bid, &any, &out, &w), ST_OK);
    fx_settle(&fx, store);
    uint64_t until = uv_now(&fx.loop) + 1300;
    while (uv_now(&fx.loop) < until) {
        uv_run(&fx.loop, UV_RUN_NOWAIT);
        uv_sleep(10);
        uv_update_time(&fx.loop);
    }
    fx_settle(&fx, store);
    st_buf_reset(&out);
    CHECK_EQ(st_seats_event_json(seats, "x", 1, &out, &w), ST_OK);
    CHECK(strstr(out.data, "\"event_stats\":{\"available\":4,\"reserved\":0"));
    close_all(false);
    open_all(false);
    st_buf_reset(&out);
    CHECK_EQ(st_seats_event_json(seats, "y", 1, &out, &w), ST_OK);
    CHECK(strstr(out.data, "\"event_stats\":{\"available\":1,\"reserved\":0,\"sold\":3"));
    CHECK(st_seats_check(seats));
    st_buf_reset(&out);
    CHECK_EQ(st_seats_cancel(seats, bid, &any, &out, &w), ST_ECONFLICT);
    st_buf_free(&out);
    close_all(true);
}

RUN_TESTS("seats")
