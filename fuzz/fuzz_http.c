/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer driver for the whole HTTP request path: bytes -> parser (limits, pipelining) ->
 * router -> handlers -> JSON bodies -> store staging, with group commits in between. Anything a
 * client can send must end in a response or a clean connection error, never a crash.
 */
#include "../src/http/internal.h"
#include "strata/seats.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uv_loop_t loop;
static st_store_t *store;
static st_config_t cfg;
static st_app_t app;
static st_arena_t arena;

static int on_request(void *arg, const st_http_request_t *req)
{
    (void)arg;
    st_buf_t out = {0};
    uint64_t wait;
    int status, route;
    st_arena_reset(&arena);
    st_http_dispatch(&app, req, &arena, &out, &wait, &status, &route);
    if (status < 100 || status > 599 || out.len == 0) abort();
    st_buf_free(&out);
    return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    st_log_set_level(ST_LOG_ERROR);
    st_config_defaults(&cfg);
    cfg.max_body = 64 * 1024;
    cfg.max_header = 8 * 1024;
    static char dir[] = "/tmp/strata-fuzz-XXXXXX";
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
    static const st_http_parser_cb_t cb = {on_request, NULL};
    st_http_parser_t *p = st_http_parser_new(&cb, NULL, cfg.max_header, cfg.max_body);
    /* Feed in two pieces to exercise resumption at an arbitrary split. */
    size_t cut = size ? data[0] % (size + 1) : 0, used;
    if (st_http_parser_feed(p, (const char *)data, cut, &used) == ST_OK)
        st_http_parser_feed(p, (const char *)data + cut, size - cut, &used);
    st_http_parser_free(p);
    for (int i = 0; i < 4 && !st_store_idle(store); i++)
        uv_run(&loop, UV_RUN_ONCE);
    return 0;
}
