/* SPDX-License-Identifier: MIT */
/*
 * An event's bookings (SPEC v4 §4.2): GET /v1/events/{id}/bookings, newest first, by status and
 * owner, paged. Every write of a booking record (st__save) also writes its entry in the event's
 * index, in the same batch:
 *
 *   'K' event 0 u64 id (big-endian) -> u8 status
 *
 * so a page is a descending range over one event's entries: ids are snowflakes, newest is
 * highest. A data dir from before the index ('V' "evbook" absent) gets it once, at start-up on a
 * writable store (its leader in a group); until then a listing walks every booking record (the
 * slow path, exact all the same).
 *
 * Loop thread only.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define ST_KS_EVBOOK  'K'
#define ST__HIST_PAGE 256  /* ids collected per store range */
#define ST__BUDGET    2048 /* entries one request looks at: a page within about a millisecond */

static const uint8_t st__hist_marker[] = {ST_KS_SEATS_V, 'e', 'v', 'b', 'o', 'o', 'k'};

/* 'K' event 0, then the id when id != 0. */
static size_t st__ikey(uint8_t *k, const char *ev, size_t el, uint64_t id)
{
    k[0] = ST_KS_EVBOOK;
    memcpy(k + 1, ev, el);
    k[1 + el] = 0;
    if (!id) return 2 + el;
    st_be64_put(k + 2 + el, id);
    return 10 + el;
}

int st__history_put(st_seats_t *s, const st_booking_t *b, uint64_t *wait)
{
    uint8_t k[ST_NAME_MAX + 16], v = (uint8_t)b->status;
    return st_store_put(s->store, k, st__ikey(k, b->event_id, b->event_len, b->id), &v, 1, wait);
}

/* ---- the index of a data dir from before it ---- */

typedef struct {
    st_seats_t *s;
    uint64_t wait;
    size_t n;
    int rc;
} st_mig_t;

static int st__mig_one(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_mig_t *m = arg;
    st_booking_t b;
    (void)key, (void)klen;
    if (st__booking_decode(val, vlen, &b) != ST_OK) return 0; /* not a record it can read */
    free(b.seats);
    /* staged writes are the batch's: the scan's own pointers stay valid (store.h) */
    m->rc = st__history_put(m->s, &b, &m->wait);
    m->n++;
    return m->rc ? 1 : 0;
}

int st__history_migrate(st_seats_t *s)
{
    uint64_t w = 0;
    const void *v;
    size_t vl;
    if (st_store_get(s->store, st__hist_marker, sizeof st__hist_marker, &v, &vl, &w) == ST_OK)
        return ST_OK;
    if (st_store_writable(s->store) != ST_OK) return ST_OK; /* its leader does it */
    st_mig_t m = {.s = s};
    uint8_t ks = ST_KS_BOOKING;
    int rc = st_store_scan(s->store, &ks, 1, st__mig_one, &m, &m.wait);
    if (rc == 1) rc = m.rc;
    uint8_t one = 1;
    if (rc == ST_OK)
        rc = st_store_put(s->store, st__hist_marker, sizeof st__hist_marker, &one, 1, &m.wait);
    if (rc == ST_OK && m.n) st_info("seats: indexed %zu booking(s) by event (once)", m.n);
    return rc;
}

/* ---- the listing ---- */

int st_seats_status(const char *name, size_t len)
{
    static const char *const names[] = {"reserved", "sold", "cancelled", "expired"};
    for (int i = 0; i < 4; i++)
        if (strlen(names[i]) == len && memcmp(names[i], name, len) == 0) return i + 1;
    return 0;
}

typedef struct {
    uint64_t ids[ST__HIST_PAGE];
    size_t n;
    int status; /* 0: any */
    const char *ev;
    size_t el;
    bool slow; /* walking 'B' records, not the index */
    st_seats_t *s;
    size_t visited, budget; /* entries looked at (matching or not), and how many may be */
    uint64_t last_seen;     /* the oldest entry looked at */
} st_page_t;

static int st__from_index(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_page_t *p = arg;
    if (klen < 8 || vlen != 1) return 0;
    p->last_seen = st_be64_get((const uint8_t *)key + klen - 8);
    if (!p->status || ((const uint8_t *)val)[0] == p->status) p->ids[p->n++] = p->last_seen;
    p->visited++;
    return p->n == ST__HIST_PAGE || p->visited >= p->budget ? 1 : 0;
}

static int st__from_records(void *arg, const void *key, size_t klen, const void *val, size_t vlen)
{
    st_page_t *p = arg;
    st_booking_t b;
    if (klen != 9) return 0;
    p->last_seen = st_be64_get((const uint8_t *)key + 1);
    if (st__booking_decode(val, vlen, &b) == ST_OK) {
        free(b.seats);
        if (b.event_len == p->el && memcmp(b.event_id, p->ev, p->el) == 0 &&
            (!p->status || b.status == p->status))
            p->ids[p->n++] = p->last_seen;
    }
    p->visited++;
    return p->n == ST__HIST_PAGE || p->visited >= p->budget ? 1 : 0;
}

/* The next ids of the event below `below` (0: from the newest), newest first, into p. */
static int st__hist_page(st_seats_t *s, st_page_t *p, uint64_t below, uint64_t *wait)
{
    uint8_t pre[ST_NAME_MAX + 16], hi[ST_NAME_MAX + 16];
    p->n = 0;
    if (p->slow) {
        uint8_t ks = ST_KS_BOOKING, bk[9];
        size_t hl = below ? st__bkey(bk, below, ST_KS_BOOKING) : 0;
        int rc = st_store_range(s->store, &ks, 1, NULL, 0, below ? bk : NULL, hl, true,
                                st__from_records, p, wait);
        return rc == 1 ? ST_OK : rc;
    }
    size_t pl = st__ikey(pre, p->ev, p->el, 0);
    size_t hl = below ? st__ikey(hi, p->ev, p->el, below) : 0;
    int rc = st_store_range(s->store, pre, pl, NULL, 0, below ? hi : NULL, hl, true, st__from_index,
                            p, wait);
    return rc == 1 ? ST_OK : rc;
}

static int st__cand_desc(const void *a, const void *b)
{
    uint64_t x = ((const st_cand_t *)a)->id, y = ((const st_cand_t *)b)->id;
    return x > y ? -1 : x < y;
}

/* The hot side of a page: up to need matching bookings below q->cursor, newest first, into out;
 * *frontier: every hot id >= it was looked at (0: all of them). */
static int st__hot_page(st_seats_t *s, const st_bookings_query_t *q, size_t need, st_cands_t *out,
                        uint64_t *frontier, uint64_t *wait)
{
    const void *v;
    size_t vl;
    uint64_t w = 0;
    st_page_t p = {.status = q->status,
                   .ev = q->event_id,
                   .el = q->event_len,
                   .s = s,
                   .slow = st_store_get(s->store, st__hist_marker, sizeof st__hist_marker, &v, &vl,
                                        &w) != ST_OK};
    uint64_t below = q->cursor;
    bool stop = false;
    size_t loaded = 0;
    st_buf_t keep = {0};
    int rc = ST_OK;
    *frontier = 0;
    /* A page looks at ST__BUDGET entries at most, so a filter that matches few of many bookings
     * never holds the loop: then it holds fewer than limit, and next goes on from the oldest
     * entry it looked at (SPEC §7). An owner's match costs a record read, counted the same. */
    p.budget = ST__BUDGET;
    while (rc == ST_OK && !stop) {
        rc = st__hist_page(s, &p, below, wait);
        bool spent = p.visited >= p.budget;
        for (size_t i = 0; rc == ST_OK && i < p.n; i++) {
            st_booking_t b;
            /* out of budget: ids[i] not looked at (one record at least, so paging moves on) */
            if (q->owner && loaded++ && ++p.visited > p.budget) {
                stop = true;
                *frontier = p.ids[i] + 1;
                break;
            }
            if (st__load(s, p.ids[i], &b, &keep, wait) != ST_OK) continue;
            bool match = !q->owner || (b.owner_len == q->owner_len &&
                                       memcmp(b.owner, q->owner, q->owner_len) == 0);
            if (match) {
                st_cand_t cd = {b.id, out->json.len, 0};
                st__booking_json(&out->json, s, &b);
                cd.len = out->json.len - cd.off;
                st_vec_push(&out->v, cd);
            }
            free(b.seats);
            if (match && out->v.n == need) { /* every id down to this one was looked at */
                stop = true;
                *frontier = b.id;
                break;
            }
        }
        if (!stop && spent && p.last_seen) { /* the range stopped on the budget, not its end */
            stop = true;
            *frontier = p.last_seen;
        }
        if (stop || p.n < ST__HIST_PAGE) break; /* the range is done */
        below = p.ids[p.n - 1];
    }
    st_buf_free(&keep);
    return rc;
}

/* A page merges the hot bookings and the cold ones (tier.c): a booking is in one or the other,
 * moved by one batch, and both sides are read in one turn of the loop, so the page is exact. Each
 * side says down to which id it looked (its frontier); the page holds what lies above both. */
int st_seats_bookings_json(st_seats_t *s, const st_bookings_query_t *q, st_buf_t *out,
                           uint64_t *wait)
{
    if (!st__event_find(s, q->event_id, q->event_len, wait)) return ST_ENOTFOUND;
    st_cands_t c = {0};
    uint64_t fh = 0, fc = 0;
    int rc = st__hot_page(s, q, q->limit + 1, &c, &fh, wait);
    if (rc == ST_OK) rc = st__cold_page(s, q, q->limit + 1, ST__BUDGET, &c, &fc, wait);
    if (rc != ST_OK) {
        st_vec_free(&c.v);
        st_buf_free(&c.json);
        return rc;
    }
    uint64_t f = fh > fc ? fh : fc;
    if (c.v.n > 1) qsort(c.v.v, c.v.n, sizeof *c.v.v, st__cand_desc);
    size_t n = 0;
    while (n < c.v.n && c.v.v[n].id >= f)
        n++;
    st_buf_puts(out, "{\"bookings\":[");
    size_t given = n > q->limit ? q->limit : n;
    for (size_t i = 0; i < given; i++) {
        if (i) st_buf_appendc(out, ',');
        st_buf_append(out, c.json.data + c.v.v[i].off, c.v.v[i].len);
    }
    st_buf_puts(out, "],\"next\":");
    if (n > q->limit)
        st_buf_printf(out, "\"%llu\"}", (unsigned long long)c.v.v[given - 1].id);
    else if (f > 0)
        st_buf_printf(out, "\"%llu\"}", (unsigned long long)f);
    else
        st_buf_puts(out, "null}");
    st_vec_free(&c.v);
    st_buf_free(&c.json);
    return ST_OK;
}
