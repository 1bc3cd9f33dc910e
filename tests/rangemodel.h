/* SPDX-License-Identifier: MIT */
/*
 * A model of store ranges for tests: 84 keys of 1–3 bytes over 0x01, 'a', 'b', 0xff (so prefix
 * ends and 0xff successors are exercised), a value per key (0: absent), and a checker that runs
 * random ranges (prefix, optional bounds, both ways) against a store and the model.
 */
#ifndef STRATA_TESTS_RANGEMODEL_H
#define STRATA_TESTS_RANGEMODEL_H

#include "test.h"
#include "strata/store.h"

#include <stdlib.h>
#include <string.h>

#define RM_N 84

/* Key i into k (3 bytes); its length. */
static inline size_t rm_key(int i, char *k)
{
    static const char al[] = {0x01, 'a', 'b', (char)0xff};
    size_t n = i < 4 ? 1 : i < 20 ? 2 : 3;
    int j = i < 4 ? i : i < 20 ? i - 4 : i - 20;
    for (size_t p = 0; p < n; p++, j /= 4)
        k[n - 1 - p] = al[j % 4];
    return n;
}

static inline int rm_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : (an > bn) - (an < bn);
}

static inline int rm_order_cmp(const void *x, const void *y)
{
    char a[3], b[3];
    size_t an = rm_key(*(const int *)x, a), bn = rm_key(*(const int *)y, b);
    return rm_cmp(a, an, b, bn);
}

/* order: the key indexes in key order. */
static inline void rm_order(int order[RM_N])
{
    for (int i = 0; i < RM_N; i++)
        order[i] = i;
    qsort(order, RM_N, sizeof *order, rm_order_cmp);
}

/* "key=value;" per row. */
static inline int rm_collect(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
    st_buf_t *b = arg;
    st_buf_append(b, k, kl);
    st_buf_appendc(b, '=');
    st_buf_append(b, v, vl);
    st_buf_appendc(b, ';');
    return 0;
}

/* Runs `queries` random ranges on s and checks each against model (a value per key, 0: absent);
 * returns how many matched. */
static inline int rm_check(st_store_t *s, const char model[RM_N], const int order[RM_N],
                           int queries)
{
    st_buf_t got = {0}, want = {0};
    int ok = 0;
    for (int q = 0; q < queries; q++) {
        char pre[3], lo[3], hi[3];
        size_t pn = rm_key(rand() % 20, pre), lon = 0, hin = 0;
        if (rand() % 2) lon = rm_key(rand() % RM_N, lo);
        if (rand() % 2) hin = rm_key(rand() % RM_N, hi);
        bool rev = rand() % 2;
        st_buf_reset(&got);
        st_buf_reset(&want);
        uint64_t sw = 0;
        CHECK_EQ(st_store_range(s, pre, pn, lon ? lo : NULL, lon, hin ? hi : NULL, hin, rev,
                                rm_collect, &got, &sw),
                 0);
        for (int o = 0; o < RM_N; o++) {
            int i = order[rev ? RM_N - 1 - o : o];
            char k[3];
            size_t kn = rm_key(i, k);
            if (!model[i] || kn < pn || memcmp(k, pre, pn) != 0) continue;
            if (lon && rm_cmp(k, kn, lo, lon) < 0) continue;
            if (hin && rm_cmp(k, kn, hi, hin) >= 0) continue;
            rm_collect(&want, k, kn, &model[i], 1);
        }
        CHECK_EQ(got.len, want.len);
        bool same = got.len == want.len && (!got.len || memcmp(got.data, want.data, got.len) == 0);
        CHECK(same);
        ok += same;
    }
    st_buf_free(&got);
    st_buf_free(&want);
    return ok;
}

#endif
