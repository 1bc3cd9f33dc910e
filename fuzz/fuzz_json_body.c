/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer driver for JSON request bodies: the input is the body of every POST route in turn
 * (with and without an Idempotency-Key), straight into dispatch, skipping HTTP framing so the
 * fuzzer spends its time in cJSON and the field validation.
 */
#include "../src/http/internal.h"
#include "strata/seats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uv_loop_t loop;
static st_store_t *store;
static st_config_t cfg;
static st_app_t app;
static st_arena_t arena;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    st_log_set_level(ST_LOG_ERROR);
    st_config_defaults(&cfg);
    static char dir[] = "/tmp/strata-fuzzj-XXXXXX";
    if (!mkdtemp(dir)) abort();
    uv_loop_init(&loop);
    st_store_opts_t o = {dir, 256 << 20, 0};
    if (st_store_open(&store, &loop, &o) != ST_OK) abort();
    app.cfg = &cfg;
    app.store = store;
    st_seats_opts_t so = {cfg.max_seats, 0};
    if (st_seats_open(&app.seats, &loop, store, &so) != ST_OK) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *paths[] = {"/v1/counters/f/incr", "/v1/counters/fd/distinct",
                                  "/v1/sequences/fs/next", "/v1/events", "/v1/events/fz/bookings"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        st_http_request_t r = {.method = ST_HTTP_POST,
                               .method_name = "POST",
                               .path = paths[i],
                               .path_len = strlen(paths[i]),
                               .query = "",
                               .body = (const char *)data,
                               .body_len = size,
                               .idem_key = (size & 1) ? "fuzz-key" : NULL,
                               .idem_len = (size & 1) ? 8 : 0,
                               .keep_alive = true};
        st_buf_t out = {0};
        uint64_t wait;
        int status, route;
        st_arena_reset(&arena);
        st_http_dispatch(&app, &r, &arena, &out, &wait, &status, &route);
        /* every answer must be one a client can act on; 5xx would be a server fault */
        if (status != 200 && status != 201 && status != 400 && status != 404 && status != 409) {
            fprintf(stderr, "unexpected %d for %s: %.*s\n", status, paths[i], (int)out.len,
                    out.data);
            abort();
        }
        st_buf_free(&out);
    }
    for (int i = 0; i < 4 && !st_store_idle(store); i++)
        uv_run(&loop, UV_RUN_ONCE);
    return 0;
}
