/* SPDX-License-Identifier: MIT */
/*
 * A booking-shaped Parquet schema (SPEC §4.2's columns: items as a LIST of structs with seats a
 * LIST of strings) and a seeded row generator, shared by the cold unit test, the pqgen tool the
 * e2e test runs, and the Parquet fuzz target. Test-only: the booking kind itself lives elsewhere.
 */
#ifndef STRATA_TESTS_PQ_BOOKING_H
#define STRATA_TESTS_PQ_BOOKING_H

#include "strata/core.h"
#include "strata/parquet.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *section;
    const char **seats;
    size_t nseats;
    int64_t quantity;
} bk_item_t;

typedef struct {
    int64_t booking_id;
    const char *event_id, *owner, *status; /* owner NULL: null */
    bk_item_t *items;
    size_t nitems;
    bool items_null;
    int64_t total_price, created_at, expires_at, finished_at;
    bool expires_null;
} bk_row_t;

static const st_pq_field_t bk_seat = {
    "element", ST_PQ_BYTE_ARRAY, ST_PQ_REQUIRED, ST_PQ_STRING, 0, NULL, 0, 9};
static const st_pq_field_t bk_item_fields[] = {
    {"section", ST_PQ_BYTE_ARRAY, ST_PQ_REQUIRED, ST_PQ_STRING, ST_PQ_DICT, NULL, 0, 7},
    {"seats", ST_PQ_GROUP, ST_PQ_REQUIRED, ST_PQ_LIST, 0, &bk_seat, 1, 8},
    {"quantity", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_NONE, ST_PQ_STATS, NULL, 0, 10},
};
static const st_pq_field_t bk_item = {
    "element", ST_PQ_GROUP, ST_PQ_REQUIRED, ST_PQ_NONE, 0, bk_item_fields, 3, 6};
static const st_pq_field_t bk_fields[] = {
    {"booking_id", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_NONE, ST_PQ_STATS, NULL, 0, 1},
    {"event_id", ST_PQ_BYTE_ARRAY, ST_PQ_REQUIRED, ST_PQ_STRING, ST_PQ_STATS | ST_PQ_DICT, NULL, 0,
     2},
    {"owner", ST_PQ_BYTE_ARRAY, ST_PQ_OPTIONAL, ST_PQ_STRING, ST_PQ_STATS | ST_PQ_DICT, NULL, 0, 3},
    {"status", ST_PQ_BYTE_ARRAY, ST_PQ_REQUIRED, ST_PQ_STRING, ST_PQ_DICT, NULL, 0, 4},
    {"items", ST_PQ_GROUP, ST_PQ_OPTIONAL, ST_PQ_LIST, 0, &bk_item, 1, 5},
    {"total_price", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_NONE, ST_PQ_STATS, NULL, 0, 11},
    {"created_at", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_TIMESTAMP_US, ST_PQ_STATS, NULL, 0, 12},
    {"expires_at", ST_PQ_INT64, ST_PQ_OPTIONAL, ST_PQ_TIMESTAMP_US, ST_PQ_STATS, NULL, 0, 13},
    {"finished_at", ST_PQ_INT64, ST_PQ_REQUIRED, ST_PQ_TIMESTAMP_US, ST_PQ_STATS, NULL, 0, 14},
};
/* Sorted by booking_id, a row group per event. Leaves: booking_id 0, event_id 1, owner 2,
 * status 3, items.section 4, items.seats 5, items.quantity 6, total_price 7, … */
static const st_pq_schema_t bk_schema = {bk_fields, 9, 0, 1};
enum { BK_LEAF_SEATS = 5, BK_LEAVES = 11 };

static inline uint32_t bk_rand(uint32_t *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

/* n rows from seed: events change at rows 10 and 70% of n; every 7th row has null items, the
 * next an empty list; owners and expiries are sometimes null; seats 0..4 per item (0: general
 * admission, quantity only). Strings live in arena. */
static inline bk_row_t *bk_generate(uint32_t seed, size_t n, st_arena_t *a)
{
    static const char *status[] = {"sold", "cancelled", "expired"};
    bk_row_t *rows = st_arena_alloc(a, (n ? n : 1) * sizeof *rows);
    char tmp[64];
    for (size_t i = 0; i < n; i++) {
        bk_row_t *r = &rows[i];
        memset(r, 0, sizeof *r);
        r->booking_id = 1000000 + (int64_t)i * 3;
        r->event_id = i < 10 ? "ev-alpha" : i < n * 7 / 10 ? "ev-beta" : "ev-gamma";
        snprintf(tmp, sizeof tmp, "user-%u", bk_rand(&seed) % 40);
        r->owner = i % 5 == 2 ? NULL : st_arena_strndup(a, tmp, strlen(tmp));
        r->status = status[bk_rand(&seed) % 3];
        r->items_null = i % 7 == 0;
        r->nitems = r->items_null || i % 7 == 1 ? 0 : 1 + bk_rand(&seed) % 3;
        r->items = st_arena_alloc(a, (r->nitems ? r->nitems : 1) * sizeof *r->items);
        for (size_t k = 0; k < r->nitems; k++) {
            bk_item_t *it = &r->items[k];
            snprintf(tmp, sizeof tmp, "S%u", bk_rand(&seed) % 5);
            it->section = st_arena_strndup(a, tmp, strlen(tmp));
            it->nseats = bk_rand(&seed) % 5;
            it->seats = st_arena_alloc(a, (it->nseats ? it->nseats : 1) * sizeof *it->seats);
            for (size_t s = 0; s < it->nseats; s++) {
                snprintf(tmp, sizeof tmp, "%c%u-ünï-%u", 'A' + bk_rand(&seed) % 26,
                         bk_rand(&seed) % 30, (unsigned)s);
                it->seats[s] = st_arena_strndup(a, tmp, strlen(tmp));
            }
            it->quantity = it->nseats ? (int64_t)it->nseats : 1 + bk_rand(&seed) % 10;
            r->total_price += it->quantity * 2500;
        }
        r->created_at = 1767225600000000 + (int64_t)i * 1000003;
        r->expires_null = i % 4 == 3;
        r->expires_at = r->expires_null ? 0 : r->created_at + 900000000;
        r->finished_at = r->created_at + 60000000 + bk_rand(&seed) % 1000;
    }
    return rows;
}

/* The writer's row callback: arg is the bk_row_t array. */
static inline void bk_put(void *arg, size_t i, st_pq_rec_t *rec)
{
    const bk_row_t *r = (const bk_row_t *)arg + i;
    st_pq_put_i64(rec, r->booking_id);
    st_pq_put_str(rec, r->event_id, strlen(r->event_id));
    if (r->owner)
        st_pq_put_str(rec, r->owner, strlen(r->owner));
    else
        st_pq_put_null(rec);
    st_pq_put_str(rec, r->status, strlen(r->status));
    if (r->items_null) {
        st_pq_put_null(rec);
    } else {
        st_pq_put_list(rec, r->nitems);
        for (size_t k = 0; k < r->nitems; k++) {
            const bk_item_t *it = &r->items[k];
            st_pq_put_struct(rec);
            st_pq_put_str(rec, it->section, strlen(it->section));
            st_pq_put_list(rec, it->nseats);
            for (size_t s = 0; s < it->nseats; s++)
                st_pq_put_str(rec, it->seats[s], strlen(it->seats[s]));
            st_pq_put_i64(rec, it->quantity);
        }
    }
    st_pq_put_i64(rec, r->total_price);
    st_pq_put_i64(rec, r->created_at);
    if (r->expires_null)
        st_pq_put_null(rec);
    else
        st_pq_put_i64(rec, r->expires_at);
    st_pq_put_i64(rec, r->finished_at);
}

static inline const char *bk_str(st_pq_cur_t *c, st_arena_t *a, bool *null)
{
    const char *p;
    size_t n;
    bool ok = st_pq_get_str(c, &p, &n);
    if (null) *null = !ok;
    return ok ? st_arena_strndup(a, p, n) : NULL;
}

/* Reads the cursor's current row into r (strings copied into a). */
static inline void bk_get(st_pq_cur_t *c, bk_row_t *r, st_arena_t *a)
{
    memset(r, 0, sizeof *r);
    st_pq_get_i64(c, &r->booking_id);
    r->event_id = bk_str(c, a, NULL);
    r->owner = bk_str(c, a, NULL);
    r->status = bk_str(c, a, NULL);
    r->items_null = !st_pq_get_list(c, &r->nitems);
    r->items = st_arena_alloc(a, (r->nitems ? r->nitems : 1) * sizeof *r->items);
    for (size_t k = 0; k < r->nitems; k++) {
        bk_item_t *it = &r->items[k];
        memset(it, 0, sizeof *it);
        if (!st_pq_get_struct(c)) continue;
        it->section = bk_str(c, a, NULL);
        st_pq_get_list(c, &it->nseats);
        it->seats = st_arena_alloc(a, (it->nseats ? it->nseats : 1) * sizeof *it->seats);
        for (size_t s = 0; s < it->nseats; s++)
            it->seats[s] = bk_str(c, a, NULL);
        st_pq_get_i64(c, &it->quantity);
    }
    st_pq_get_i64(c, &r->total_price);
    st_pq_get_i64(c, &r->created_at);
    r->expires_null = !st_pq_get_i64(c, &r->expires_at);
    st_pq_get_i64(c, &r->finished_at);
}

static inline bool bk_same_str(const char *a, const char *b)
{
    return a && b ? strcmp(a, b) == 0 : a == b;
}

static inline bool bk_equal(const bk_row_t *x, const bk_row_t *y)
{
    if (x->booking_id != y->booking_id || !bk_same_str(x->event_id, y->event_id) ||
        !bk_same_str(x->owner, y->owner) || !bk_same_str(x->status, y->status) ||
        x->items_null != y->items_null || x->nitems != y->nitems ||
        x->total_price != y->total_price || x->created_at != y->created_at ||
        x->expires_null != y->expires_null || x->expires_at != y->expires_at ||
        x->finished_at != y->finished_at)
        return false;
    for (size_t k = 0; k < x->nitems; k++) {
        const bk_item_t *a = &x->items[k], *b = &y->items[k];
        if (!bk_same_str(a->section, b->section) || a->nseats != b->nseats ||
            a->quantity != b->quantity)
            return false;
        for (size_t s = 0; s < a->nseats; s++)
            if (!bk_same_str(a->seats[s], b->seats[s])) return false;
    }
    return true;
}

/* One row as a JSON object (times as µs numbers; the e2e test compares every reader to it). */
static inline void bk_json(st_buf_t *b, const bk_row_t *r)
{
    st_buf_printf(b, "{\"booking_id\":%lld,\"event_id\":", (long long)r->booking_id);
    st_buf_append_json_str(b, r->event_id, strlen(r->event_id));
    st_buf_puts(b, ",\"owner\":");
    if (r->owner)
        st_buf_append_json_str(b, r->owner, strlen(r->owner));
    else
        st_buf_puts(b, "null");
    st_buf_puts(b, ",\"status\":");
    st_buf_append_json_str(b, r->status, strlen(r->status));
    st_buf_puts(b, ",\"items\":");
    if (r->items_null) st_buf_puts(b, "null");
    for (size_t k = 0; !r->items_null && k <= r->nitems; k++) {
        if (k == r->nitems) {
            st_buf_puts(b, k ? "]" : "[]");
            break;
        }
        const bk_item_t *it = &r->items[k];
        st_buf_puts(b, k ? ",{\"section\":" : "[{\"section\":");
        st_buf_append_json_str(b, it->section, strlen(it->section));
        st_buf_puts(b, ",\"seats\":[");
        for (size_t s = 0; s < it->nseats; s++) {
            if (s) st_buf_appendc(b, ',');
            st_buf_append_json_str(b, it->seats[s], strlen(it->seats[s]));
        }
        st_buf_printf(b, "],\"quantity\":%lld}", (long long)it->quantity);
    }
    st_buf_printf(b, ",\"total_price\":%lld,\"created_at\":%lld,\"expires_at\":",
                  (long long)r->total_price, (long long)r->created_at);
    if (r->expires_null)
        st_buf_puts(b, "null");
    else
        st_buf_printf(b, "%lld", (long long)r->expires_at);
    st_buf_printf(b, ",\"finished_at\":%lld}", (long long)r->finished_at);
}

#endif
