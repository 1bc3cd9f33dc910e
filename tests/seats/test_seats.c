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
    st_seats_opts_t so = {1000000, 1, 0, 0};
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
    st_section_spec_t sec = {"S", 1, rows, cols, 10, 0};
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

static uint64_t booking_id_of(const st_buf_t *out)
{
    return strtoull(strstr(out->data, "\"booking_id\":\"") + 14, NULL, 10);
}

/* Issue 11.2: answers that report state carry the batch of that state, even when they change
 * nothing — a 409 for an existing event, seats_unavailable, a read, a 409 for a final booking. */
TEST(answers_that_report_staged_state_wait_for_it)
{
    open_all(true);
    uint64_t created = 0;
    {
        st_section_spec_t sec = {"S", 1, 1, 4, 10, 0};
        st_event_spec_t spec = {"w", 1, NULL, 0, 900, &sec, 1};
        st_buf_t out = {0};
        const char *why;
        CHECK_EQ(st_seats_create(seats, &spec, &out, &why, &created), ST_OK);
        CHECK(created > st_store_durable_id(store));
        uint64_t w = 0;
        CHECK_EQ(st_seats_create(seats, &spec, &out, &why, &w), ST_ECONFLICT);
        CHECK_EQ(w, created); /* the 409 waits for the create it reports */
        w = 0;
        st_buf_reset(&out);
        CHECK_EQ(st_seats_event_json(seats, "w", 1, &out, &w), ST_OK);
        CHECK_EQ(w, created);
        st_buf_free(&out);
    }
    fx_settle(&fx, store);
    st_buf_t out = {0}, taken = {0};
    const char *names[] = {"1-1"};
    size_t lens[] = {3};
    const char *why;
    uint64_t booked = 0, w = 0;
    CHECK_EQ(
        st_seats_book(seats, "w", 1, "S", 1, names, lens, 1, 0, "", 0, &out, &taken, &why, &booked),
        ST_OK);
    uint64_t bid = booking_id_of(&out);
    st_buf_reset(&taken);
    CHECK_EQ(st_seats_book(seats, "w", 1, "S", 1, names, lens, 1, 0, "", 0, &out, &taken, &why, &w),
             ST_ESEATS);
    CHECK_EQ(w, booked); /* seats_unavailable reports the booking that took them */
    uint64_t cancelled = 0;
    CHECK_EQ(st_seats_cancel(seats, bid, &any, &out, &cancelled), ST_OK);
    w = 0;
    CHECK_EQ(st_seats_confirm(seats, bid, &any, &out, &w), ST_ECONFLICT);
    CHECK_EQ(w, cancelled); /* the 409 of a final state waits for that state */
    w = 0;
    CHECK_EQ(st_seats_booking_json(seats, bid, &any, &out, &w), ST_OK);
    CHECK_EQ(w, cancelled);
    st_buf_free(&out);
    st_buf_free(&taken);
    close_all(true);
}

/* Issue 11.9: start-up read every booking ever made. It now reads the seat maps and the index of
 * active holds only: with every finished booking record removed from the store, the sold seats
 * and the pending hold are still all there after a restart. */
TEST(start_up_does_not_read_finished_bookings)
{
    open_all(true);
    create("f", 4, 5, 3600);
    st_buf_t out = {0};
    uint64_t ids[3], w = 0;
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(book("f", NULL, 0, 2, &out), ST_OK);
        ids[i] = booking_id_of(&out);
    }
    CHECK_EQ(st_seats_confirm(seats, ids[0], &any, &out, &w), ST_OK); /* sold */
    CHECK_EQ(st_seats_cancel(seats, ids[1], &any, &out, &w), ST_OK);  /* cancelled */
    fx_settle(&fx, store);
    for (int i = 0; i < 2; i++) { /* the finished ones */
        uint8_t key[9] = {'B'};
        for (int k = 0; k < 8; k++)
            key[1 + k] = (uint8_t)(ids[i] >> (56 - 8 * k));
        CHECK_EQ(st_store_del(store, key, sizeof key, &w), ST_OK);
    }
    close_all(false);
    open_all(false);
    st_buf_reset(&out);
    CHECK_EQ(st_seats_event_json(seats, "f", 1, &out, &w), ST_OK);
    CHECK(strstr(out.data, "\"event_stats\":{\"available\":16,\"reserved\":2,\"sold\":2"));
    CHECK(st_seats_check(seats));
    st_buf_reset(&out);
    CHECK_EQ(st_seats_map_json(seats, "f", 1, "S", 1, true, &out, &w), ST_OK);
    /* sold, cancelled, the hold (no orphan seat: each pair skips a row whose run of 3 it would
     * split into 2 + 1) */
    CHECK(strstr(out.data, "[[2,2,0,0,0],[0,0,0,0,0],[1,1,0,0,0],"));
    /* the hold is still indexed: it can be confirmed and its id is never reissued */
    CHECK_EQ(st_seats_confirm(seats, ids[2], &any, &out, &w), ST_OK);
    CHECK_EQ(book("f", NULL, 0, 1, &out), ST_OK);
    CHECK(booking_id_of(&out) > ids[2]);
    st_buf_free(&out);
    close_all(true);
}

RUN_TESTS("seats")
