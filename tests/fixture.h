/* SPDX-License-Identifier: MIT */
/*
 * Test fixture: a private libuv loop and a temp directory for a store, torn down with the checks
 * every loop test ends with (the loop closes cleanly, the metrics registry is released).
 * Include after test.h.
 */
#ifndef STRATA_TEST_FIXTURE_H
#define STRATA_TEST_FIXTURE_H

#include "strata/cold.h"
#include "strata/metrics.h"
#include "strata/store.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct {
    uv_loop_t loop;
    char dir[64];
} fx_t;

static inline void fx_begin(fx_t *f)
{
    uv_loop_init(&f->loop);
    strcpy(f->dir, "/tmp/strata-test-XXXXXX");
    if (!mkdtemp(f->dir)) abort();
}

static inline st_store_t *fx_store(fx_t *f, uint64_t map_size, uint64_t wal_size)
{
    st_store_t *s;
    st_store_opts_t o = {.dir = f->dir, .map_size = map_size, .wal_size = wal_size};
    if (st_store_open(&s, &f->loop, &o) != ST_OK) abort();
    return s;
}

/* A local object store in the fixture's directory, under cold/ (owned: st_objstore_close). */
static inline st_objstore_t *fx_objstore(fx_t *f)
{
    char url[96];
    snprintf(url, sizeof url, "file://%s/cold", f->dir);
    st_objstore_opts_t oo = {.url = url};
    st_objstore_t *obj = NULL;
    if (st_objstore_open(&obj, &oo) != ST_OK) abort();
    return obj;
}

/* Runs the loop until everything staged is durable and applied. */
static inline void fx_settle(fx_t *f, st_store_t *s)
{
    for (int i = 0; i < 100000 && !st_store_idle(s); i++)
        uv_run(&f->loop, UV_RUN_ONCE);
}

static inline void fx_close_store(fx_t *f, st_store_t *s)
{
    fx_settle(f, s);
    st_store_close(s);
    uv_run(&f->loop, UV_RUN_DEFAULT);
}

static inline void fx_end(fx_t *f)
{
    CHECK_EQ(uv_loop_close(&f->loop), 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    if (system(cmd) != 0) abort();
    st_metrics_shutdown();
}

/* A file:// object store in a fresh directory made from the template dir (rewritten in place). */
static inline st_objstore_t *tmp_store(char *dir)
{
    CHECK(mkdtemp(dir));
    char url[64];
    snprintf(url, sizeof url, "file://%s", dir);
    st_objstore_opts_t oo = {.url = url};
    st_objstore_t *obj = NULL;
    CHECK_EQ(st_objstore_open(&obj, &oo), ST_OK);
    return obj;
}

/* Closes a tmp_store and removes its directory. */
static inline void tmp_store_close(st_objstore_t *obj, const char *dir)
{
    st_objstore_close(obj);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_EQ(system(cmd), 0);
}

#endif
