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

/* The no-orphan rule (SPEC §4.1) against brute force: on random rows, every placement of q
 * side by side is tried; one "leaves an orphan" when a free seat that had a free neighbour has
 * none after it. If any placement leaves none, the chosen one must be the first of those (front
 * row, then leftmost: the existing preference); otherwise the first placement of all, as with
 * "allow_orphans". */
static bool creates_orphan(const int *st, int cols, int start, int q)
{
    int after[16];
    memcpy(after, st, sizeof after);
    for (int k = 0; k < q; k++)
        after[start + k] = 1;
    for (int c = 0; c < cols; c++) {
        if (after[c]) continue;
        bool l0 = c > 0 && !st[c - 1], r0 = c + 1 < cols && !st[c + 1];
        bool l1 = c > 0 && !after[c - 1], r1 = c + 1 < cols && !after[c + 1];
        if ((l0 || r0) && !l1 && !r1) return true;
    }
    return false;
}

static void expected_seats(int st[3][16], int rows, int cols, int q, bool orphans, st_buf_t *want)
{
    int pass_from = orphans ? 1 : 0;
    for (int pass = pass_from; pass < 2; pass++)
        for (int r = 0; r < rows; r++)
            for (int c = 0; c + q <= cols; c++) {
                bool fits = true;
                for (int k = 0; k < q && fits; k++)
                    fits = !st[r][c + k];
                if (!fits || (pass == 0 && creates_orphan(st[r], cols, c, q))) continue;
                st_buf_puts(want, "\"seats\":[");
                for (int k = 0; k < q; k++)
                    st_buf_printf(want, "%s\"%d-%d\"", k ? "," : "", r + 1, c + k + 1);
                st_buf_puts(want, "]");
                return;
            }
}

TEST(best_available_leaves_no_orphan_when_it_can_model)
{
    open_all(true);
    srand(26);
    st_buf_t out = {0}, taken = {0}, want = {0};
    int checked = 0;
    for (int trial = 0; trial < 600; trial++) {
        int rows = 1 + rand() % 3, cols = 2 + rand() % 13, st[3][16] = {{0}};
        int pct = 15 + rand() % 50;
        char id[16];
        snprintf(id, sizeof id, "o%d", trial);
        create(id, rows, cols, 900);
        char names[48][24]; /* "row-col": room for any two ints */
        const char *ptr[48];
        size_t lens[48], n = 0;
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < cols; c++)
                if (rand() % 100 < pct) {
                    st[r][c] = 1;
                    snprintf(names[n], sizeof names[n], "%d-%d", r + 1, c + 1);
                    ptr[n] = names[n];
                    lens[n] = strlen(names[n]);
                    n++;
                }
        const char *why;
        uint64_t w = 0;
        if (n) {
            st_seats_item_t it = {"S", 1, ptr, lens, n, 0};
            st_buf_reset(&out);
            CHECK_EQ(st_seats_book_items(seats, id, strlen(id), &it, 1, false, "", 0, &out, &taken,
                                         &why, &w),
                     ST_OK);
        }
        int q = 1 + rand() % cols;
        bool orphans = rand() % 4 == 0;
        st_buf_reset(&want);
        expected_seats(st, rows, cols, q, orphans, &want);
        if (!want.len) continue; /* no row holds q: the fewest blocks (not side by side) */
        st_seats_item_t it = {"S", 1, NULL, NULL, 0, q};
        st_buf_reset(&out);
        CHECK_EQ(st_seats_book_items(seats, id, strlen(id), &it, 1, orphans, "", 0, &out, &taken,
                                     &why, &w),
                 ST_OK);
        if (!strstr(out.data, want.data))
            fprintf(stderr, "trial %d q %d orphans %d: want %s got %s\n", trial, q, orphans,
                    want.data, out.data);
        CHECK(strstr(out.data, want.data) != NULL);
        checked++;
    }
    CHECK(checked > 300);
    CHECK(st_seats_check(seats));
    st_buf_free(&out);
    st_buf_free(&taken);
    st_buf_free(&want);
    close_all(true);
}

/* A data dir written before items (booking record version 2: one section) still loads: the
 * booking reads with one item, can be confirmed (rewritten as version 3) and its seats sold. */
TEST(a_version_2_booking_record_still_loads_with_one_item)
{
    open_all(true);
    create("v", 1, 4, 900);
    st_buf_t out = {0};
    const char *s1[] = {"1-2", "1-3"};
    CHECK_EQ(book("v", s1, 2, 0, &out), ST_OK);
    uint64_t id = booking_id_of(&out), w = 0;
    /* the same booking as version 2 wrote it */
    st_buf_t rec = {0};
    uint8_t v = 2, st = 1;
    uint16_t el = 1, sl = 1, ol = 0;
    uint32_t n = 2, seats2[2] = {1, 2};
    int64_t price = 20, t = st_now_us(), exp = t + 900000000LL;
    st_buf_append(&rec, &v, 1);
    st_buf_append(&rec, &st, 1);
    st_buf_append(&rec, &el, 2);
    st_buf_append(&rec, &sl, 2);
    st_buf_append(&rec, &ol, 2);
    st_buf_append(&rec, &n, 4);
    st_buf_append(&rec, &price, 8);
    st_buf_append(&rec, &t, 8);
    st_buf_append(&rec, &exp, 8);
    st_buf_append(&rec, &t, 8);
    st_buf_append(&rec, &id, 8);
    st_buf_append(&rec, "v", 1);
    st_buf_append(&rec, "S", 1);
    st_buf_append(&rec, seats2, 8);
    uint8_t key[9] = {'B'};
    for (int k = 0; k < 8; k++)
        key[1 + k] = (uint8_t)(id >> (56 - 8 * k));
    CHECK_EQ(st_store_put(store, key, sizeof key, rec.data, rec.len, &w), ST_OK);
    st_buf_free(&rec);
    close_all(false);
    open_all(false);
    st_buf_reset(&out);
    CHECK_EQ(st_seats_booking_json(seats, id, &any, &out, &w), ST_OK);
    CHECK(strstr(out.data,
                 "\"items\":[{\"section\":\"S\",\"seats\":[\"1-2\",\"1-3\"],\"quantity\":2}]"));
    st_buf_reset(&out);
    CHECK_EQ(st_seats_confirm(seats, id, &any, &out, &w), ST_OK);
    st_buf_reset(&out);
    CHECK_EQ(st_seats_map_json(seats, "v", 1, "S", 1, true, &out, &w), ST_OK);
    CHECK(strstr(out.data, "[[0,2,2,0]]"));
    CHECK(st_seats_check(seats));
    st_buf_free(&out);
    close_all(true);
}

RUN_TESTS("seats")
