/* SPDX-License-Identifier: MIT */
/*
 * Range reads while the apply thread is behind (issue 13, "every range read walks the whole
 * staged overlay"): stages STAGED writes under one prefix (never applied: the loop does not run
 * meanwhile, as when LMDB lags), then times READS range reads of a 10-key prefix, both ways.
 * The cost should not depend on STAGED.
 *
 * usage: strata-rangebench DIR [STAGED] [READS]     (DIR: an empty scratch directory)
 */
#include "strata/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int st__count(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
    (void)k, (void)kl, (void)v, (void)vl;
    ++*(long *)arg;
    return 0;
}

static double st__now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [STAGED] [READS]\n", argv[0]);
        return 2;
    }
    long staged = argc > 2 ? atol(argv[2]) : 100000, reads = argc > 3 ? atol(argv[3]) : 1000;
    uv_loop_t loop;
    uv_loop_init(&loop);
    st_store_t *s;
    st_store_opts_t o = {.dir = argv[1], .map_size = 4ULL << 30};
    if (st_store_open(&s, &loop, &o) != ST_OK) return 1;
    uint64_t w = 0;
    char k[32];
    double ts = st__now();
    for (long i = 0; i < staged; i++) {
        int n = snprintf(k, sizeof k, "x%09ld", i);
        if (st_store_put(s, k, (size_t)n, "v", 1, &w) != ST_OK) return 1;
    }
    for (int i = 0; i < 10; i++) {
        int n = snprintf(k, sizeof k, "y%02d", i);
        st_store_put(s, k, (size_t)n, "v", 1, &w);
    }
    double stage_us = (st__now() - ts) * 1e6 / (double)staged;
    long seen = 0;
    double t0 = st__now();
    for (long r = 0; r < reads; r++) {
        uint64_t sw = 0;
        st_store_range(s, "y", 1, NULL, 0, NULL, 0, r & 1, st__count, &seen, &sw);
    }
    double us = (st__now() - t0) * 1e6 / (double)reads;
    printf(
        "%ld writes staged at %.2f us each; %ld range reads of 10 keys: %.2f us each (%ld rows)\n",
        staged, stage_us, reads, us, seen);
    while (!st_store_idle(s))
        uv_run(&loop, UV_RUN_ONCE);
    st_store_close(s);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return seen == 10 * reads ? 0 : 1;
}
