/* SPDX-License-Identifier: MIT */
/*
 * Which seats a booking takes: explicit "row-col" seats, best available (side by side in one
 * row nearest the front, leaving no orphan seat when it can; else the fewest blocks, again
 * without an orphan when as many blocks can do it), and the first free places of a general
 * admission section. Nothing here changes state.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *st__whyf(const char *fmt, ...)
{
    static _Thread_local char buf[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return buf;
}

int st__parse_seat(const st_section_t *sec, const char *p, size_t n, uint32_t *idx)
{
    const char *dash = memchr(p, '-', n);
    int64_t r, c;
    if (!dash || st_parse_i64(p, (size_t)(dash - p), &r) ||
        st_parse_i64(dash + 1, n - (size_t)(dash - p) - 1, &c) || p[0] == '+' || p[0] == '-' ||
        dash[1] == '+' || dash[1] == '-')
        return ST_EINVAL;
    if (r < 1 || r > sec->rows || c < 1 || c > sec->cols) return ST_EINVAL;
    *idx = (uint32_t)((r - 1) * sec->cols + (c - 1));
    return ST_OK;
}

/* An orphan is a single free seat left between taken seats or a taken seat and a row's end.
 * q seats taken from the start of a run of len leave len - q free after them: an orphan
 * exactly when that is 1, and any other place in the run leaves one too or is further back. */
static bool st__run_fits(int64_t len, int64_t q, bool orphans)
{
    return len >= q && (orphans || len == q || len >= q + 2);
}

/* Whether row r has a run that fits, in O(1) from the row index: with the longest run q + 1,
 * only a run of exactly q fits, and that would be the longest shorter one. */
static bool st__row_fits(st_section_t *sec, int64_t r, int64_t q, bool orphans)
{
    if (sec->row_avail[r] < q) return false;
    int64_t l1 = st__row_run(sec, r);
    if (l1 < q) return false;
    if (orphans || l1 != q + 1) return true;
    return st__row_run2(sec, r) == q;
}

/* Best available: q side by side in one row, nearest the front; failing that, the fewest
 * blocks: runs taken longest first, the front one among runs of equal length, the last run
 * only in part (unless that strands one seat and as many blocks would not: st__unorphan). The
 * kept row_avail and row_run let both steps skip the rows that cannot matter, so a search costs
 * the rows of the section plus a few row scans, however fragmented it is (not a scan of every
 * seat, nor of every run per seat taken; st__unorphan's rare search aside). */
static bool st__best_row(st_section_t *sec, int64_t q, bool orphans, uint32_t *out)
{
    for (int64_t r = 0; r < sec->rows; r++) {
        if (!st__row_fits(sec, r, q, orphans)) continue;
        int64_t c = 0, len;
        while (c < sec->cols) {
            int64_t start = st__row_next_run(sec, r, &c, &len);
            if (st__run_fits(len, q, orphans)) {
                for (int64_t k = 0; k < q; k++)
                    out[k] = (uint32_t)(r * sec->cols + start + k);
                return true;
            }
        }
        ST_ASSERT(!"row index promised a run that fits");
    }
    return false;
}

/* The fewest blocks, when no row holds q (so every run is shorter than q). Runs are kept in one
 * bucket per length, in seat order, at most ceil(q/len) of each (more are never taken). Once the
 * runs of length >= t add up to q, nothing shorter than t, nor of length t further back, can be
 * taken: rows whose longest run is <= t are skipped unread. */
typedef struct {
    int64_t q, t;    /* t: runs of length <= t are no longer needed (0: all are) */
    uint32_t *start; /* seat of each kept run, bucket by bucket */
    uint32_t off[ST_SEATS_MAX_PER_BOOKING], n[ST_SEATS_MAX_PER_BOOKING];
} st_buckets_t;

static void st__bucket_threshold(st_buckets_t *b)
{
    int64_t sum = 0;
    for (int64_t l = b->q - 1; l > b->t; l--) {
        sum += (int64_t)b->n[l] * l;
        if (sum >= b->q) {
            b->t = l;
            return;
        }
    }
}

typedef struct {
    uint32_t start, len;
} st_run_t;

/* The front run of exactly len free seats that is none of runs[0..n) (false: there is none). */
static bool st__run_of(st_section_t *sec, int64_t len, const st_run_t *runs, size_t n,
                       st_run_t *out)
{
    for (int64_t r = 0; r < sec->rows; r++) {
        if (sec->row_avail[r] < len || st__row_run(sec, r) < len) continue;
        int64_t c = 0, l;
        while (c < sec->cols) {
            uint32_t seat = (uint32_t)(r * sec->cols + st__row_next_run(sec, r, &c, &l));
            bool used = l != len;
            for (size_t i = 0; i < n && !used; i++)
                used = runs[i].start == seat;
            if (!used) {
                *out = (st_run_t){seat, (uint32_t)len};
                return true;
            }
        }
    }
    return false;
}

/* The runs chosen leave one free seat at the end of the last (taken in part) exactly when they
 * hold q + 1 seats. As many blocks without an orphan hold q: the last run swapped for a run one
 * shorter, or else a run one longer than the last swapped for another of the last's length (the
 * last then taken whole). Both are rare, so the section is scanned for that run. */
static void st__unorphan(st_section_t *sec, int64_t q, st_run_t *runs, size_t *n)
{
    int64_t sum = 0;
    for (size_t i = 0; i < *n; i++)
        sum += runs[i].len;
    if (sum != q + 1) return;
    st_run_t *last = &runs[*n - 1], alt;
    if (st__run_of(sec, last->len - 1, runs, *n, &alt)) {
        *last = alt;
        return;
    }
    for (size_t j = *n - 1; j-- > 0;)
        if (runs[j].len == last->len + 1) {
            if (!st__run_of(sec, last->len, runs, *n, &alt)) return;
            memmove(&runs[j], &runs[j + 1], (*n - j - 1) * sizeof *runs);
            runs[*n - 1] = alt;
            return;
        }
}

static void st__best_blocks(st_section_t *sec, int64_t q, bool orphans, uint32_t *out)
{
    st_buckets_t b = {.q = q, .t = 0};
    uint32_t total = 0;
    for (int64_t l = 1; l < q; l++) {
        b.off[l] = total;
        total += (uint32_t)((q + l - 1) / l);
    }
    b.start = st_malloc(total * sizeof *b.start + 1);
    for (int64_t r = 0; r < sec->rows; r++) {
        if (sec->row_avail[r] <= b.t || st__row_run(sec, r) <= b.t) continue;
        int64_t c = 0, len;
        while (c < sec->cols) {
            int64_t st = st__row_next_run(sec, r, &c, &len);
            ST_ASSERT(len < q);
            if (len <= b.t || b.n[len] == (uint32_t)((q + len - 1) / len)) continue;
            b.start[b.off[len] + b.n[len]++] = (uint32_t)(r * sec->cols + st);
        }
        st__bucket_threshold(&b);
    }
    st_run_t runs[ST_SEATS_MAX_PER_BOOKING];
    size_t nr = 0;
    int64_t got = 0;
    for (int64_t l = q - 1; l > 0 && got < q; l--)
        for (uint32_t i = 0; i < b.n[l] && got < q; i++, got += l)
            runs[nr++] = (st_run_t){b.start[b.off[l] + i], (uint32_t)l};
    free(b.start);
    if (!orphans) st__unorphan(sec, q, runs, &nr);
    got = 0;
    for (size_t i = 0; i < nr; i++)
        for (uint32_t k = 0; k < runs[i].len && got < q; k++)
            out[got++] = runs[i].start + k;
}

/* General admission: the first q free places (from the hint: none is free below it). */
static void st__ga_first(st_section_t *sec, int64_t q, uint32_t *out)
{
    uint32_t i = sec->ga_hint, n = (uint32_t)sec->cols;
    int64_t got = 0;
    while (got < q && i < n) {
        uint8_t byte = sec->bits[i >> 2];
        if ((i & 3) == 0 && i + 4 <= n && ((byte | byte >> 1) & 0x55) == 0x55) {
            i += 4; /* four taken places */
            continue;
        }
        if (st__seat_get(sec, i) == ST_SEAT_AVAILABLE) {
            if (!got) sec->ga_hint = i;
            out[got++] = i;
        }
        i++;
    }
    ST_ASSERT(got == q);
}

/* Together comes first (SPEC v4 §4.1): one row without an orphan, else one row leaving one,
 * and only then a split over runs (which again avoids an orphan when as many blocks can). */
bool st__best(st_section_t *sec, int64_t q, bool allow_orphans, uint32_t *out)
{
    if (sec->c.available < q) return false;
    if (sec->ga)
        st__ga_first(sec, q, out);
    else if (!(!allow_orphans && st__best_row(sec, q, false, out)) &&
             !st__best_row(sec, q, true, out))
        st__best_blocks(sec, q, allow_orphans, out);
    return true;
}

int st__pick(st_section_t *sec, const st_seats_item_t *it, bool allow_orphans, uint32_t *out,
             size_t *n, st_buf_t *taken, size_t *ntaken, const char **why)
{
    if (!it->seats) {
        *n = (size_t)it->quantity;
        return st__best(sec, it->quantity, allow_orphans, out) ? ST_OK : ST_ESEATS;
    }
    if (sec->ga) {
        *why = st__whyf("section \"%.*s%s\" is general admission: book it by quantity",
                        ST__WV(sec->name, sec->name_len));
        return ST_EINVAL;
    }
    for (size_t i = 0; i < it->nseats; i++) {
        if (st__parse_seat(sec, it->seats[i], it->seat_lens[i], &out[i]) != ST_OK) {
            *why =
                st__whyf("seat \"%.*s%s\" is not a seat of section \"%.*s%s\": seats are "
                         "\"row-col\", 1-based, rows 1..%lld and cols 1..%lld",
                         ST__WV(it->seats[i], it->seat_lens[i]), ST__WV(sec->name, sec->name_len),
                         (long long)sec->rows, (long long)sec->cols);
            return ST_EINVAL;
        }
        for (size_t k = 0; k < i; k++)
            if (out[k] == out[i]) {
                *why = st__whyf("seat \"%.*s%s\" is listed twice",
                                ST__WV(it->seats[i], it->seat_lens[i]));
                return ST_EINVAL;
            }
    }
    size_t before = *ntaken;
    for (size_t i = 0; i < it->nseats; i++)
        if (st__seat_get(sec, out[i]) != ST_SEAT_AVAILABLE) {
            if ((*ntaken)++) st_buf_appendc(taken, ',');
            st__seat_name(taken, sec, out[i]);
        }
    *n = it->nseats;
    return *ntaken > before ? ST_ESEATS : ST_OK;
}
