/* SPDX-License-Identifier: MIT */
/*
 * Bookings: all-or-nothing holds on explicit or best-available seats, confirm and cancel, and
 * hold expiry on a min-heap driven by one uv timer, and who may see or change a booking. Record:
 * u8 version (2) | u8 status | u16 event_len | u16 section_len | u16 owner_len | u32 nseats |
 * i64 price | i64 created | i64 expires | i64 updated | u64 id | event | section |
 * u32 seat[nseats] | owner. Version 1 had no owner (owner_len was padding, always 0).
 * Every change to a booking stages, in the same batch, the seat-map chunks it touched and its
 * entry in the index of active holds (persist.c).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define ST__BK_HDR 52 /* fixed part, through the id */

void st__booking_encode(st_buf_t *out, const st_booking_t *b)
{
    uint8_t v = 2, st = (uint8_t)b->status;
    uint16_t el = (uint16_t)b->event_len, sl = (uint16_t)b->section_len;
    uint16_t ol = (uint16_t)b->owner_len;
    st_buf_reset(out);
    st_buf_append(out, &v, 1);
    st_buf_append(out, &st, 1);
    st_buf_append(out, &el, 2);
    st_buf_append(out, &sl, 2);
    st_buf_append(out, &ol, 2);
    st_buf_append(out, &b->nseats, 4);
    st_buf_append(out, &b->total_price, 8);
    st_buf_append(out, &b->created_at, 8);
    st_buf_append(out, &b->expires_at, 8);
    st_buf_append(out, &b->updated_at, 8);
    st_buf_append(out, &b->id, 8);
    st_buf_append(out, b->event_id, b->event_len);
    st_buf_append(out, b->section, b->section_len);
    st_buf_append(out, b->seats, (size_t)b->nseats * 4);
    st_buf_append(out, b->owner, b->owner_len);
}

int st__booking_decode(const void *v, size_t n, st_booking_t *b)
{
    const uint8_t *p = v;
    if (n < ST__BK_HDR || (p[0] != 1 && p[0] != 2)) return ST_EINTERNAL;
    uint16_t el, sl, ol;
    b->status = p[1];
    memcpy(&el, p + 2, 2);
    memcpy(&sl, p + 4, 2);
    memcpy(&ol, p + 6, 2);
    memcpy(&b->nseats, p + 8, 4);
    memcpy(&b->total_price, p + 12, 8);
    memcpy(&b->created_at, p + 20, 8);
    memcpy(&b->expires_at, p + 28, 8);
    memcpy(&b->updated_at, p + 36, 8);
    memcpy(&b->id, p + 44, 8);
    size_t off = ST__BK_HDR;
    if (n != off + el + sl + (size_t)b->nseats * 4 + ol) return ST_EINTERNAL;
    b->event_id = (const char *)p + off;
    b->event_len = el;
    b->section = (const char *)p + off + el;
    b->section_len = sl;
    b->owner = (const char *)p + off + el + sl + (size_t)b->nseats * 4;
    b->owner_len = ol;
    b->seats = st_malloc((size_t)b->nseats * 4 + 1);
    memcpy(b->seats, p + off + el + sl, (size_t)b->nseats * 4);
    return ST_OK;
}

size_t st__bkey(uint8_t key[9], uint64_t id, char ks)
{
    key[0] = (uint8_t)ks;
    for (int i = 0; i < 8; i++) /* big-endian: keys sort by id, i.e. by time */
        key[1 + i] = (uint8_t)(id >> (56 - 8 * i));
    return 9;
}

/* Loads a booking; event/section point into a copy owned by *keep (free both after use). */
static int st__load(st_seats_t *s, uint64_t id, st_booking_t *b, st_buf_t *keep, uint64_t *wait)
{
    uint8_t key[9];
    const void *v;
    size_t n;
    int rc = st_store_get(s->store, key, st__bkey(key, id, ST_KS_BOOKING), &v, &n, wait);
    if (rc) return rc;
    st_buf_reset(keep);
    st_buf_append(keep, v, n);
    return st__booking_decode(keep->data, n, b);
}

static int st__save(st_seats_t *s, const st_booking_t *b, uint64_t *wait)
{
    uint8_t key[9];
    st_buf_t rec = {0};
    st__booking_encode(&rec, b);
    int rc =
        st_store_put(s->store, key, st__bkey(key, b->id, ST_KS_BOOKING), rec.data, rec.len, wait);
    st_buf_free(&rec);
    return rc;
}

static void st__booking_json(st_buf_t *out, const st_booking_t *b, const st_section_t *sec)
{
    static const char *names[] = {"", "reserved", "sold", "cancelled", "expired"};
    st_buf_puts(out, "{\"booking_id\":\"");
    st_buf_append_u64(out, b->id);
    st_buf_puts(out, "\",\"event_id\":");
    st_buf_append_json_str(out, b->event_id, b->event_len);
    st_buf_puts(out, ",\"section\":");
    st_buf_append_json_str(out, b->section, b->section_len);
    st_buf_puts(out, ",\"seats\":[");
    for (uint32_t i = 0; i < b->nseats; i++) {
        if (i) st_buf_appendc(out, ',');
        if (sec)
            st__seat_name(out, sec, b->seats[i]);
        else
            st_buf_puts(out, "null");
    }
    st_buf_printf(out,
                  "],\"status\":\"%s\",\"total_price\":%lld,\"created_at\":%lld,"
                  "\"expires_at\":%lld}",
                  b->status >= 1 && b->status <= 4 ? names[b->status] : "unknown",
                  (long long)b->total_price, (long long)b->created_at, (long long)b->expires_at);
}

/* ---- the expiry heap ---- */

void st__hold_push(st_seats_t *s, int64_t at, uint64_t id)
{
    if (s->nheap == s->heapcap) {
        s->heapcap = s->heapcap ? s->heapcap * 2 : 64;
        s->heap = st_realloc(s->heap, s->heapcap * sizeof *s->heap);
    }
    size_t i = s->nheap++;
    while (i && s->heap[(i - 1) / 2].at > at) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = (st_hold_t){at, id};
}

static st_hold_t st__hold_pop(st_seats_t *s)
{
    st_hold_t top = s->heap[0], last = s->heap[--s->nheap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= s->nheap) break;
        if (c + 1 < s->nheap && s->heap[c + 1].at < s->heap[c].at) c++;
        if (s->heap[c].at >= last.at) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (s->nheap) s->heap[i] = last;
    return top;
}

static void st__expire_due(st_seats_t *s);

static void st__on_idle(uv_idle_t *h)
{
    st__expire_due(h->data);
}

/* The timer waits for the next expiry; once holds are due, the idle handle runs a slice per
 * loop turn (a timer re-armed at 0 would run again in the same turn with this libuv). */
void st__arm_timer(st_seats_t *s)
{
    if (s->expire_parked) return; /* resumed by st__on_durable */
    if (!s->nheap) {
        uv_timer_stop(&s->timer);
        uv_idle_stop(&s->idle);
        return;
    }
    int64_t delay_ms = (s->heap[0].at - st_now_us() + 999) / 1000;
    if (delay_ms <= 0) {
        uv_timer_stop(&s->timer);
        uv_idle_start(&s->idle, st__on_idle);
        return;
    }
    uv_idle_stop(&s->idle);
    uv_timer_start(&s->timer, st__on_timer, (uint64_t)delay_ms, 0);
}

/* Ends a reserved booking (cancel or expiry): its seats go back to available. */
void st_seats_observe(st_seats_t *s, st_seats_observer_fn fn, void *arg)
{
    st_observers_add(&s->observers, (st_observer_any_fn)fn, arg);
}

void st_seats_unobserve(st_seats_t *s, const void *arg)
{
    st_observers_remove(&s->observers, arg);
}

static void st__counts(st_buf_t *b, const st_counts_t *c, int64_t total)
{
    st_buf_printf(b, "{\"available\":%lld,\"reserved\":%lld,\"sold\":%lld,\"total\":%lld}",
                  (long long)c->available, (long long)c->reserved, (long long)c->sold,
                  (long long)total);
}

/* Seats of one section moved to `state` in batch w: tell the observer (live streams). */
static void st__notify(st_seats_t *s, const st_event_t *e, const st_section_t *sec,
                       const uint32_t *seats, size_t n, int state, uint64_t w)
{
    static const char *names[] = {"available", "reserved", "sold"};
    if (!s->observers.n) return;
    st_buf_t b = {0};
    st_buf_puts(&b, "\"event_id\":");
    st_buf_append_json_str(&b, e->id, e->id_len);
    st_buf_puts(&b, ",\"section\":");
    st_buf_append_json_str(&b, sec->name, sec->name_len);
    st_buf_puts(&b, ",\"changes\":[");
    for (size_t i = 0; i < n; i++) {
        st_buf_puts(&b, i ? ",{\"seat\":" : "{\"seat\":");
        st__seat_name(&b, sec, seats[i]);
        st_buf_printf(&b, ",\"state\":\"%s\"}", names[state]);
    }
    st_buf_puts(&b, "],\"stats\":");
    st__counts(&b, &sec->c, sec->rows * sec->cols);
    st_buf_puts(&b, ",\"event_stats\":");
    st__counts(&b, &e->c, e->total);
    st_buf_appendc(&b, '}');
    for (size_t i = 0; i < s->observers.n; i++)
        ((st_seats_observer_fn)s->observers.fn[i])(s->observers.arg[i], e->id, e->id_len, b.data,
                                                   b.len, w);
    st_buf_free(&b);
}

static int st__release(st_seats_t *s, st_booking_t *b, int status, uint64_t *wait)
{
    st_event_t *e = st__event_find(s, b->event_id, b->event_len, NULL);
    st_section_t *sec = e ? st__section_find(e, b->section, b->section_len) : NULL;
    int64_t now = st_now_us();
    b->status = status;
    b->updated_at = now;
    uint64_t w = 0;
    int rc = st__save(s, b, &w);
    if (!rc) rc = st__hold_index(s, b->id, 0, false, &w);
    if (rc) return rc;
    if (sec) {
        for (uint32_t i = 0; i < b->nseats; i++)
            st__seat_set(e, sec, b->seats[i], ST_SEAT_AVAILABLE);
        e->updated_at = now;
        st__chunks_save(s, e, sec, b->seats, b->nseats, &w);
        if (e->last_batch < w) e->last_batch = w;
        st__notify(s, e, sec, b->seats, b->nseats, ST_SEAT_AVAILABLE, w);
    }
    if (*wait < w) *wait = w;
    return ST_OK;
}

/* Due holds expire in slices of bounded work, oldest first: one slice per loop turn while any
 * are due, and a slice only once the previous one is durable, so 100k holds running out
 * together neither stall the loop nor pile up changes waiting for a commit (subscribers would
 * be closed as slow consumers). Each slice is published as its batch becomes durable. A
 * booking read in between expires itself if due (st__finish): no answer shows a hold past its
 * time. */
#define ST__EXPIRE_SLICE     128
#define ST__EXPIRE_BUDGET_NS (500u * 1000)

void st__on_timer(uv_timer_t *t)
{
    st__expire_due(t->data);
}

static void st__expire_due(st_seats_t *s)
{
    int64_t now = st_now_us();
    uint64_t t0 = st_mono_ns();
    st_buf_t keep = {0};
    for (int n = 0; s->nheap && s->heap[0].at <= now && n < ST__EXPIRE_SLICE; n++) {
        if ((n & 15) == 15 && st_mono_ns() - t0 > ST__EXPIRE_BUDGET_NS) break;
        st_hold_t h = st__hold_pop(s);
        st_booking_t b;
        uint64_t w = 0;
        if (st__load(s, h.id, &b, &keep, &w) != ST_OK) continue;
        if (b.status == ST_BK_RESERVED && b.expires_at <= now &&
            st__release(s, &b, ST_BK_EXPIRED, &w) == ST_OK) {
            st_metric_add(s->m_expired, 1);
            if (s->expire_batch < w) s->expire_batch = w;
        }
        free(b.seats);
    }
    st_buf_free(&keep);
    if (s->nheap && s->heap[0].at <= now && s->expire_batch > st_store_durable_id(s->store)) {
        uv_idle_stop(&s->idle);
        s->expire_parked = true;
        return;
    }
    st__arm_timer(s);
}

static void st__on_durable(st_store_listener_t *l, uint64_t id)
{
    st_seats_t *s = (st_seats_t *)((char *)l - offsetof(st_seats_t, listener));
    if (!s->expire_parked || id < s->expire_batch) return;
    s->expire_parked = false;
    st__arm_timer(s);
}

/* ---- booking ---- */

static int st__parse_seat(const st_section_t *sec, const char *p, size_t n, uint32_t *idx)
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

/* Best available: q side by side in one row, nearest the front; failing that, the fewest
 * blocks: runs taken longest first, the front one among runs of equal length, the last run
 * only in part. The kept row_avail and row_run let both steps skip the rows that cannot
 * matter, so a search costs the rows of the section plus a few row scans, however fragmented
 * it is (not a scan of every seat, nor of every run per seat taken). */
static bool st__best_row(st_section_t *sec, int64_t q, uint32_t *out)
{
    for (int64_t r = 0; r < sec->rows; r++) {
        if (sec->row_avail[r] < q || st__row_run(sec, r) < q) continue;
        int64_t c = 0, len;
        for (;;) {
            int64_t start = st__row_next_run(sec, r, &c, &len);
            if (len >= q) {
                for (int64_t k = 0; k < q; k++)
                    out[k] = (uint32_t)(r * sec->cols + start + k);
                return true;
            }
        }
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

static void st__best_blocks(st_section_t *sec, int64_t q, uint32_t *out)
{
    st_buckets_t b = {.q = q, .t = 0};
    uint32_t total = 0;
    for (int64_t l = 1; l < q; l++) {
        b.off[l] = total;
        total += (uint32_t)((q + l - 1) / l);
    }
    b.start = st_malloc(total * sizeof *b.start);
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
    int64_t got = 0;
    for (int64_t l = q - 1; l > 0 && got < q; l--)
        for (uint32_t i = 0; i < b.n[l] && got < q; i++)
            for (int64_t k = 0; k < l && got < q; k++)
                out[got++] = b.start[b.off[l] + i] + (uint32_t)k;
    free(b.start);
}

static bool st__best(st_section_t *sec, int64_t q, uint32_t *out)
{
    if (sec->c.available < q) return false;
    if (!st__best_row(sec, q, out)) st__best_blocks(sec, q, out);
    return true;
}

int st_seats_book(st_seats_t *s, const char *id, size_t len, const char *section, size_t slen,
                  const char *const *seats, const size_t *seat_lens, size_t nseats,
                  int64_t quantity, const char *owner, size_t owner_len, st_buf_t *out,
                  st_buf_t *taken_json, const char **why, uint64_t *wait)
{
    /* an answer about seats (409 seats_unavailable included) reflects the latest staged state */
    st_event_t *e = st__event_find(s, id, len, wait);
    if (!e) {
        *why = "event not found";
        return ST_ENOTFOUND;
    }
    st_section_t *sec = st__section_find(e, section, slen);
    if (!sec) {
        *why = "section not found";
        return ST_ENOTFOUND;
    }
    uint32_t idx[ST_SEATS_MAX_PER_BOOKING];
    size_t n = seats ? nseats : (size_t)quantity;
    if (seats) {
        for (size_t i = 0; i < nseats; i++) {
            if (st__parse_seat(sec, seats[i], seat_lens[i], &idx[i]) != ST_OK) {
                *why = "seats must be \"row-col\" within the section, 1-based";
                return ST_EINVAL;
            }
            for (size_t k = 0; k < i; k++)
                if (idx[k] == idx[i]) {
                    *why = "a seat is listed twice";
                    return ST_EINVAL;
                }
        }
        bool any = false;
        st_buf_puts(taken_json, "[");
        for (size_t i = 0; i < nseats; i++)
            if (st__seat_get(sec, idx[i]) != ST_SEAT_AVAILABLE) {
                if (any) st_buf_appendc(taken_json, ',');
                st__seat_name(taken_json, sec, idx[i]);
                any = true;
            }
        st_buf_puts(taken_json, "]");
        if (any) {
            st_metric_add(s->m_conflicts, 1);
            return ST_ESEATS;
        }
    } else if (!st__best(sec, quantity, idx)) {
        st_buf_puts(taken_json, "[]");
        st_metric_add(s->m_conflicts, 1);
        return ST_ESEATS;
    }
    int64_t now = st_now_us();
    st_booking_t b = {.id = st_snowflake_next(&s->ids),
                      .status = ST_BK_RESERVED,
                      .total_price = sec->price * (int64_t)n,
                      .created_at = now,
                      .expires_at = now + e->hold_seconds * 1000000,
                      .updated_at = now,
                      .event_id = e->id,
                      .event_len = e->id_len,
                      .section = sec->name,
                      .section_len = sec->name_len,
                      .seats = idx,
                      .nseats = (uint32_t)n,
                      .owner = owner,
                      .owner_len = owner_len};
    uint64_t w = 0;
    int rc = st__save(s, &b, &w);
    if (!rc) rc = st__hold_index(s, b.id, b.expires_at, true, &w);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++)
        st__seat_set(e, sec, idx[i], ST_SEAT_RESERVED);
    e->updated_at = now;
    st__chunks_save(s, e, sec, idx, n, &w);
    if (e->last_batch < w) e->last_batch = w;
    if (!e->first_reserved_at || (!e->fully_reserved_at && e->c.available == 0)) {
        if (!e->first_reserved_at)
            e->first_reserved_at = now; /* first write wins: set once, persisted */
        if (!e->fully_reserved_at && e->c.available == 0) e->fully_reserved_at = now;
        st__event_persist(s, e, &w);
    }
    if (*wait < w) *wait = w;
    st__notify(s, e, sec, idx, n, ST_SEAT_RESERVED, w);
    st__hold_push(s, b.expires_at, b.id);
    if (s->heap[0].id == b.id) st__arm_timer(s);
    st_metric_add(s->m_booked, 1);
    st__booking_json(out, &b, sec);
    return ST_OK;
}

/* The booking's event and owner against who asks; the answer (404/403) reports the booking,
 * so it carries the wait st__load raised. */
static int st__check_ref(const st_booking_t *b, const st_booking_ref_t *ref)
{
    if (ref->event_id &&
        (ref->event_len != b->event_len || memcmp(ref->event_id, b->event_id, b->event_len) != 0))
        return ST_ENOTFOUND;
    if (!ref->admin &&
        (ref->subject_len != b->owner_len || memcmp(ref->subject, b->owner, b->owner_len) != 0))
        return ST_EFORBIDDEN;
    return ST_OK;
}

static int st__finish(st_seats_t *s, uint64_t id, const st_booking_ref_t *ref, int to,
                      st_buf_t *out, uint64_t *wait)
{
    st_buf_t keep = {0};
    st_booking_t b;
    int rc = st__load(s, id, &b, &keep, wait);
    if (rc) {
        st_buf_free(&keep);
        return rc;
    }
    if ((rc = st__check_ref(&b, ref)) != ST_OK) {
        free(b.seats);
        st_buf_free(&keep);
        return rc;
    }
    /* A hold past its time is expired even if the timer has not fired yet. */
    if (b.status == ST_BK_RESERVED && b.expires_at <= st_now_us()) {
        st__release(s, &b, ST_BK_EXPIRED, wait);
        st_metric_add(s->m_expired, 1);
    }
    st_event_t *e = st__event_find(s, b.event_id, b.event_len, NULL);
    st_section_t *sec = e ? st__section_find(e, b.section, b.section_len) : NULL;
    if (to == 0) {
        /* read only */
    } else if (b.status != ST_BK_RESERVED) {
        rc = ST_ECONFLICT;
    } else if (to == ST_BK_CANCELLED) {
        rc = st__release(s, &b, ST_BK_CANCELLED, wait);
        st_metric_add(s->m_cancelled, 1);
    } else {
        int64_t now = st_now_us();
        b.status = ST_BK_SOLD;
        b.updated_at = now;
        uint64_t w = 0;
        rc = st__save(s, &b, &w);
        if (!rc) rc = st__hold_index(s, b.id, 0, false, &w);
        if (!rc && sec) {
            for (uint32_t i = 0; i < b.nseats; i++)
                st__seat_set(e, sec, b.seats[i], ST_SEAT_SOLD);
            e->updated_at = now;
            st__chunks_save(s, e, sec, b.seats, b.nseats, &w);
            if (e->last_batch < w) e->last_batch = w;
            st__notify(s, e, sec, b.seats, b.nseats, ST_SEAT_SOLD, w);
        }
        if (*wait < w) *wait = w;
        st_metric_add(s->m_confirmed, 1);
    }
    if (rc == ST_OK)
        st__booking_json(out, &b, sec);
    else if (rc == ST_ECONFLICT)
        st__booking_json(out, &b, sec); /* the caller shows the current state with the 409 */
    free(b.seats);
    st_buf_free(&keep);
    return rc;
}

int st_seats_booking_json(st_seats_t *s, uint64_t id, const st_booking_ref_t *ref, st_buf_t *out,
                          uint64_t *wait)
{
    return st__finish(s, id, ref, 0, out, wait);
}

int st_seats_confirm(st_seats_t *s, uint64_t id, const st_booking_ref_t *ref, st_buf_t *out,
                     uint64_t *wait)
{
    return st__finish(s, id, ref, ST_BK_SOLD, out, wait);
}

int st_seats_cancel(st_seats_t *s, uint64_t id, const st_booking_ref_t *ref, st_buf_t *out,
                    uint64_t *wait)
{
    return st__finish(s, id, ref, ST_BK_CANCELLED, out, wait);
}

/* ---- lifecycle ---- */

/* A failed commit rolled back staged bookings: rebuild the in-memory view from the store. */
static void st__on_failed(st_store_listener_t *l, uint64_t first, int err)
{
    st_seats_t *s = (st_seats_t *)((char *)l - offsetof(st_seats_t, listener));
    (void)first;
    (void)err;
    st__free_events(s);
    s->nheap = 0;
    s->expire_parked = false;
    st__rebuild(s);
}

int st_seats_open(st_seats_t **out, uv_loop_t *loop, st_store_t *store, const st_seats_opts_t *o)
{
    st_seats_t *s = st_calloc(1, sizeof *s);
    s->loop = loop;
    s->store = store;
    s->opts = *o;
    st_map_init(&s->events);
    st_snowflake_init(&s->ids, o->node_id);
    uv_timer_init(loop, &s->timer);
    uv_idle_init(loop, &s->idle);
    s->timer.data = s->idle.data = s;
    s->open_handles = 2;
    s->m_booked =
        st_metrics_counter("strata_bookings_total", "Bookings by outcome", "result=\"reserved\"");
    s->m_conflicts = st_metrics_counter("strata_bookings_total", "Bookings by outcome",
                                        "result=\"seats_unavailable\"");
    s->m_confirmed =
        st_metrics_counter("strata_bookings_total", "Bookings by outcome", "result=\"sold\"");
    s->m_cancelled =
        st_metrics_counter("strata_bookings_total", "Bookings by outcome", "result=\"cancelled\"");
    s->m_expired =
        st_metrics_counter("strata_bookings_total", "Bookings by outcome", "result=\"expired\"");
    uint64_t t0 = st_mono_ns();
    int rc = st__rebuild(s);
    if (rc) {
        st_seats_close(s);
        return rc;
    }
    if (s->nevents)
        st_info(
            "seats: rebuilt %zu event(s) (seats budget used: %llu), %zu pending hold(s) in %.1f ms",
            s->nevents, (unsigned long long)s->total_seats, s->nheap,
            (double)(st_mono_ns() - t0) / 1e6);
    s->listener.on_failed = st__on_failed;
    s->listener.on_durable = st__on_durable;
    st_store_listen(store, &s->listener);
    *out = s;
    return ST_OK;
}

static void st__on_handle_closed(uv_handle_t *h)
{
    st_seats_t *s = h->data;
    if (--s->open_handles == 0) free(s);
}

void st_seats_close(st_seats_t *s)
{
    st_store_unlisten(s->store, &s->listener); /* batches settling during teardown */
    st__free_events(s);
    st_map_free(&s->events);
    free(s->sorted);
    free(s->heap);
    uv_timer_stop(&s->timer);
    uv_idle_stop(&s->idle);
    uv_close((uv_handle_t *)&s->timer, st__on_handle_closed);
    uv_close((uv_handle_t *)&s->idle, st__on_handle_closed);
}
