/* SPDX-License-Identifier: MIT */
/*
 * Start-up benchmark data (bench/startup.sh drives it): writes, straight into a data dir through
 * the store API, one event of 1000 x 1000 seats and `finished` finished bookings (half sold,
 * a quarter cancelled, a quarter expired) plus `active` reserved ones holding for a day, one seat
 * each. Records use the booking format both before and after the seat-map chunks (version 1, no
 * owner) and no seat-map chunks: the layout of a data dir written before them, which any strata
 * since can open (the newer one converts it once on its first start).
 *
 * usage: strata-seatgen DATA_DIR FINISHED ACTIVE [HOLD_SECONDS]
 * (HOLD_SECONDS: the active holds all run out that many seconds from now; default a day —
 * bench/loopstall.sh uses it for 100k holds expiring at once)
 */
#include "strata/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COLS 1000
#define ROWS 1000

static void settle(uv_loop_t *loop, st_store_t *s)
{
    while (!st_store_idle(s))
        uv_run(loop, UV_RUN_ONCE);
}

static int64_t active_hold_us = 86400000000LL;

static void put_booking(st_store_t *s, uint64_t id, int status, uint32_t seat, int64_t now)
{
    uint8_t rec[52 + 7 + 1 + 4] = {1, (uint8_t)status, 7, 0, 1, 0, 0, 0, 1, 0, 0, 0};
    int64_t price = 10, created = now - 3600000000LL,
            expires = status == 1 ? now + active_hold_us : created + 900000000LL;
    memcpy(rec + 12, &price, 8);
    memcpy(rec + 20, &created, 8);
    memcpy(rec + 28, &expires, 8);
    memcpy(rec + 36, &created, 8);
    memcpy(rec + 44, &id, 8);
    memcpy(rec + 52, "startup", 7);
    rec[59] = 'A';
    memcpy(rec + 60, &seat, 4);
    uint8_t key[9] = {'B'};
    for (int i = 0; i < 8; i++)
        key[1 + i] = (uint8_t)(id >> (56 - 8 * i));
    uint64_t w = 0;
    if (st_store_put(s, key, sizeof key, rec, sizeof rec, &w) != ST_OK) abort();
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: strata-seatgen DATA_DIR FINISHED ACTIVE [HOLD_SECONDS]\n");
        return 2;
    }
    if (argc == 5) active_hold_us = atol(argv[4]) * 1000000LL;
    long finished = atol(argv[2]), active = atol(argv[3]);
    if (finished / 2 + active > (long)ROWS * COLS) {
        fprintf(stderr, "strata-seatgen: more sold and active bookings than seats\n");
        return 2;
    }
    uv_loop_t loop;
    uv_loop_init(&loop);
    st_store_t *s;
    st_store_opts_t o = {.dir = argv[1], .map_size = 4ULL << 30};
    if (st_store_open(&s, &loop, &o) != ST_OK) return 1;
    int64_t now = st_now_us();
    char ev[256];
    int n = snprintf(ev, sizeof ev,
                     "{\"name\":\"\",\"has_name\":false,\"hold_seconds\":900,\"created_at\":%lld,"
                     "\"first_ticket_reserved_at\":%lld,\"fully_reserved_at\":0,\"sections\":"
                     "[{\"name\":\"A\",\"rows\":%d,\"cols\":%d,\"price\":10}]}",
                     (long long)now - 7200000000LL, (long long)now - 3600000000LL, ROWS, COLS);
    uint64_t w = 0;
    if (st_store_put(s, "Estartup", 8, ev, (size_t)n, &w) != ST_OK) return 1;
    uint64_t id = (uint64_t)(now / 1000 - 1288834974657LL) << 22; /* snowflake-shaped */
    uint32_t sold_seat = 0;
    for (long i = 0; i < finished + active; i++) {
        int status;
        uint32_t seat;
        if (i >= finished) {
            status = 1; /* reserved */
            seat = (uint32_t)(finished / 2 + (i - finished));
        } else if (i % 4 < 2) {
            status = 2; /* sold */
            seat = sold_seat++;
        } else {
            status = i % 4 == 2 ? 3 : 4; /* cancelled, expired: their seats are free again */
            seat = (uint32_t)(i % (ROWS * COLS));
        }
        put_booking(s, id + (uint64_t)i, status, seat, now);
        if (i % 20000 == 19999) settle(&loop, s);
    }
    settle(&loop, s);
    st_store_close(s);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    printf("wrote 1 event, %ld finished and %ld active bookings into %s\n", finished, active,
           argv[1]);
    return 0;
}
