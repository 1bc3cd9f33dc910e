/* SPDX-License-Identifier: MIT */
/* Shared set-up for the fuzz drivers: a real store and seats module in a temp dir, one loop. */
#ifndef STRATA_FUZZ_HARNESS_H
#define STRATA_FUZZ_HARNESS_H

#include "../src/http/internal.h"
#include "strata/chat.h"
#include "strata/seats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uv_loop_t fz_loop;
static st_config_t fz_cfg;
static st_app_t fz_app;
static st_arena_t fz_arena;

static void fz_init(void)
{
    st_log_set_level(ST_LOG_ERROR);
    st_config_defaults(&fz_cfg);
    fz_cfg.max_body = 64 * 1024;
    fz_cfg.max_header = 8 * 1024;
    static char dir[] = "/tmp/strata-fuzz-XXXXXX";
    if (!mkdtemp(dir)) abort();
    uv_loop_init(&fz_loop);
    st_store_opts_t o = {.dir = dir, .map_size = 256 << 20};
    if (st_store_open(&fz_app.store, &fz_loop, &o) != ST_OK) abort();
    fz_app.cfg = &fz_cfg;
    st_seats_opts_t so = {.max_seats = fz_cfg.max_seats,
                          .max_total_seats = fz_cfg.max_total_seats,
                          .max_hold_seconds = fz_cfg.max_hold_seconds};
    if (st_seats_open(&fz_app.seats, &fz_loop, fz_app.store, &so) != ST_OK) abort();
}

/* Runs one request through dispatch; returns its status. */
static int fz_dispatch(const st_http_request_t *req)
{
    st_buf_t out = {0};
    uint64_t wait;
    int status, route;
    st_arena_reset(&fz_arena);
    st_http_dispatch(&fz_app, req, &fz_arena, &out, &wait, &status, &route);
    if (out.len == 0) abort();
    st_buf_free(&out);
    return status;
}

/* Lets staged writes commit between inputs. */
static void fz_settle(void)
{
    for (int i = 0; i < 4 && !st_store_idle(fz_app.store); i++)
        uv_run(&fz_loop, UV_RUN_ONCE);
}

#endif
