/* SPDX-License-Identifier: MIT */
/*
 * Bookings: all-or-nothing holds on explicit or best-available seats in one or several
 * sections, confirm and cancel, hold expiry on a min-heap driven by one uv timer, and who may
 * see or change a booking (the record is in record.c, seat choice in pick.c). Every change to a
 * booking stages, in the same batch, the seat-map chunks it touched and its entry in the index of
 * active holds (persist.c).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- the expiry heap ---- */

void st__hold_push(st_seats_t *s, int64_t at, uint64_t id)
{
    st_vec_reserve(&s->heap, s->heap.n + 1);
    size_t i = s->heap.n++;
    while (i && s->heap.v[(i - 1) / 2].at > at) {
        s->heap.v[i] = s->heap.v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap.v[i] = (st_hold_t){at, id};
}

static st_hold_t st__hold_pop(st_seats_t *s)
{
    st_hold_t top = s->heap.v[0], last = s->heap.v[--s->heap.n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= s->heap.n) break;
        if (c + 1 < s->heap.n && s->heap.v[c + 1].at < s->heap.v[c].at) c++;
        if (s->heap.v[c].at >= last.at) break;
        s->heap.v[i] = s->heap.v[c];
        i = c;
    }
    if (s->heap.n) s->heap.v[i] = last;
    return top;
}

/* Due holds expire in slices of bounded work, oldest first: one slice per loop turn while any
 * are due, and a slice only once the previous one is durable, so 100k holds running out
 * together neither stall the loop nor pile up changes waiting for a commit (subscribers would
 * be closed as slow consumers). Each slice is published as its batch becomes durable. A
 * booking read in between expires itself if due (st__booking_finish): no answer shows a hold past
 * its time. */
#define ST__EXPIRE_SLICE     128
#define ST__EXPIRE_BUDGET_NS (500u * 1000)

static void st__expire_due(st_seats_t *s)
{
    int64_t now = st_now_us();
    uint64_t t0 = st_mono_ns();
    st_buf_t keep = {0};
    for (int n = 0; s->heap.n && s->heap.v[0].at <= now && n < ST__EXPIRE_SLICE; n++) {
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
    if (s->heap.n && s->heap.v[0].at <= now && s->expire_batch > st_store_durable_id(s->store)) {
        uv_idle_stop(&s->idle);
        s->expire_parked = true;
        return;
    }
    st__arm_timer(s);
}

static void st__booking_on_idle(uv_idle_t *h)
{
    st__expire_due(h->data);
}

/* The timer waits for the next expiry; once holds are due, the idle handle runs a slice per
 * loop turn (a timer re-armed at 0 would run again in the same turn with this libuv). */
void st__arm_timer(st_seats_t *s)
{
    if (s->expire_parked) return; /* resumed by st__booking_on_durable */
    if (!s->heap.n) {
        uv_timer_stop(&s->timer);
        uv_idle_stop(&s->idle);
        return;
    }
    int64_t delay_ms = (s->heap.v[0].at - st_now_us() + 999) / 1000;
    if (delay_ms <= 0) {
        uv_timer_stop(&s->timer);
        uv_idle_start(&s->idle, st__booking_on_idle);
        return;
    }
    uv_idle_stop(&s->idle);
    uv_timer_start(&s->timer, st__on_timer, (uint64_t)delay_ms, 0);
}

/* ---- observers: the live streams of seat changes ---- */

void st_seats_observe(st_seats_t *s, st_seats_observer_fn fn, st_seats_wants_fn wants, void *arg)
{
    st_observers_add_wants(&s->observers, (st_observer_any_fn)fn, (st_observer_any_fn)wants, arg);
}

/* Does any observer want a change of e? (One call per observer: for the streams, a subscriber
 * lookup.) */
static bool st__wanted(const st_seats_t *s, const st_event_t *e)
{
    for (size_t i = 0; i < s->observers.n; i++) {
        st_seats_wants_fn wants = (st_seats_wants_fn)s->observers.wants[i];
        if (!wants || wants(s->observers.arg[i], e->id, e->id_len)) return true;
    }
    return false;
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

void st__notify(st_seats_t *s, const st_event_t *e, const st_section_t *sec,
                const st_seatmove_t *mv, size_t nmv, uint64_t w)
{
    static const char *names[] = {"available", "reserved", "sold"};
    size_t n = 0;
    for (size_t m = 0; m < nmv; m++)
        n += mv[m].n;
    if (!n || !st__wanted(s, e)) return; /* nobody follows the event: no message to build */
    st_buf_t b = {0};
    st_buf_puts(&b, "\"event_id\":");
    st_buf_append_json_str(&b, e->id, e->id_len);
    st_buf_puts(&b, ",\"section\":");
    st_buf_append_json_str(&b, sec->name, sec->name_len);
    st_buf_puts(&b, ",\"changes\":[");
    bool first = true;
    for (size_t m = 0; m < nmv; m++) {
        if (!mv[m].n) continue;
        if (sec->ga) { /* places have no names: how many moved */
            st_buf_printf(&b, "%s{\"quantity\":%zu,\"state\":\"%s\"}", first ? "" : ",", mv[m].n,
                          names[mv[m].state]);
            first = false;
            continue;
        }
        for (size_t i = 0; i < mv[m].n; i++, first = false) {
            st_buf_puts(&b, first ? "{\"seat\":" : ",{\"seat\":");
            st__seat_name(&b, sec, mv[m].seats[i]);
            st_buf_printf(&b, ",\"state\":\"%s\"}", names[mv[m].state]);
        }
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

void st__move(st_seats_t *s, st_event_t *e, st_section_t *sec, const uint32_t *seats, size_t n,
              int state, int64_t now, uint64_t *w)
{
    for (size_t i = 0; i < n; i++)
        st__seat_set(e, sec, seats[i], state);
    e->updated_at = now;
    st__chunks_save(s, e, sec, seats, n, w);
    if (e->last_batch < *w) e->last_batch = *w;
}

void st__sellout_mark(st_seats_t *s, st_event_t *e, int64_t now, uint64_t *w)
{
    if (!e->first_reserved_at || (!e->fully_reserved_at && e->c.available == 0)) {
        if (!e->first_reserved_at)
            e->first_reserved_at = now; /* first write wins: set once, persisted */
        if (!e->fully_reserved_at && e->c.available == 0) e->fully_reserved_at = now;
        st__event_persist(s, e, w);
    }
}

/* Every item of b moves to state (its seats were reserved). */
void st__apply_all(st_seats_t *s, st_booking_t *b, int state, int64_t now, uint64_t *w)
{
    st_event_t *e = st__event_find(s, b->event_id, b->event_len, NULL);
    st_section_t *secs[ST_SEATS_MAX_PER_BOOKING];
    for (size_t i = 0; e && i < b->nitems; i++) {
        st_bitem_t *it = &b->items[i];
        secs[i] = st__section_find(e, it->section, it->section_len);
        if (secs[i]) st__move(s, e, secs[i], b->seats + it->off, it->n, state, now, w);
    }
    /* one message per section, each with the stats after the whole booking moved */
    for (size_t i = 0; e && i < b->nitems; i++) {
        st_seatmove_t mv = {b->seats + b->items[i].off, b->items[i].n, state};
        if (secs[i]) st__notify(s, e, secs[i], &mv, 1, *w);
    }
}

int st__release(st_seats_t *s, st_booking_t *b, int status, uint64_t *wait)
{
    int64_t now = st_now_us();
    b->status = status;
    b->updated_at = now;
    uint64_t w = 0;
    int rc = st__save(s, b, &w);
    if (!rc) rc = st__hold_index(s, b->id, 0, false, &w);
    if (rc) return rc;
    st__apply_all(s, b, ST_SEAT_AVAILABLE, now, &w);
    if (*wait < w) *wait = w;
    return ST_OK;
}

void st__on_timer(uv_timer_t *t)
{
    st__expire_due(t->data);
}

static void st__booking_on_durable(st_store_listener_t *l, uint64_t id)
{
    st_seats_t *s = (st_seats_t *)((char *)l - offsetof(st_seats_t, listener));
    if (!s->expire_parked || id < s->expire_batch) return;
    s->expire_parked = false;
    st__arm_timer(s);
}

/* ---- booking ---- */

/* The taken seats of a failed booking, as the rest of an error object. */
static void st__taken_json(st_buf_t *taken_json, const st_buf_t *names, const st_buf_t *items)
{
    st_buf_puts(taken_json, "\"seats\":[");
    st_buf_append(taken_json, names->data, names->len);
    st_buf_puts(taken_json, "],\"items\":[");
    st_buf_append(taken_json, items->data, items->len);
    st_buf_appendc(taken_json, ']');
}

/* Picks every item's seats into b (nothing changes yet); all must be free. */
static int st__pick_all(st_seats_t *s, st_event_t *e, const st_seats_item_t *items, size_t nitems,
                        bool allow_orphans, st_booking_t *b, st_buf_t *taken_json, const char **why)
{
    st_buf_t names = {0}, per = {0}, one = {0};
    size_t ntaken = 0, total = 0;
    int rc = ST_OK;
    for (size_t i = 0; i < nitems && rc != ST_EINVAL && rc != ST_ENOTFOUND; i++) {
        const st_seats_item_t *it = &items[i];
        st_section_t *sec = st__section_find(e, it->section, it->section_len);
        size_t want = it->seats ? it->nseats : (size_t)it->quantity, n = 0, nt = 0;
        if (!sec) {
            *why = st__whyf("section \"%.*s%s\" not found in event \"%.*s%s\"",
                            ST__WV(it->section, it->section_len), ST__WV(e->id, e->id_len));
            rc = ST_ENOTFOUND;
        } else if (st__item_of(b, it->section, it->section_len) >= 0) {
            *why = st__whyf("section \"%.*s%s\" is listed twice",
                            ST__WV(it->section, it->section_len));
            rc = ST_EINVAL;
        } else if (want < 1 || total + want > ST_SEATS_MAX_PER_BOOKING) {
            *why = st__whyf("a booking holds 1..100 seats (section \"%.*s%s\" asks for %zu, %zu "
                            "before it)",
                            ST__WV(it->section, it->section_len), want, total);
            rc = ST_EINVAL;
        } else {
            st_buf_reset(&one);
            int r = st__pick(sec, it, allow_orphans, b->seats + total, &n, &one, &nt, why);
            if (r == ST_ESEATS) {
                if (nt && ntaken) st_buf_appendc(&names, ',');
                st_buf_append(&names, one.data, one.len);
                ntaken += nt;
                st_buf_puts(&per, per.len ? ",{\"section\":" : "{\"section\":");
                st_buf_append_json_str(&per, sec->name, sec->name_len);
                st_buf_puts(&per, ",\"seats\":[");
                st_buf_append(&per, one.data, one.len);
                st_buf_puts(&per, "]}");
                rc = ST_ESEATS;
            } else if (r) {
                rc = r;
            } else {
                b->items[b->nitems++] =
                    (st_bitem_t){sec->name, sec->name_len, (uint32_t)total, (uint32_t)n};
                b->total_price += sec->price * (int64_t)n;
                total += n;
            }
        }
    }
    b->nseats = (uint32_t)total;
    if (rc == ST_ESEATS) {
        st__taken_json(taken_json, &names, &per);
        st_metric_add(s->m_conflicts, 1);
    }
    st_buf_free(&names);
    st_buf_free(&per);
    st_buf_free(&one);
    return rc;
}

int st_seats_book_items(st_seats_t *s, const char *id, size_t len, const st_seats_item_t *items,
                        size_t nitems, bool allow_orphans, const char *owner, size_t owner_len,
                        st_buf_t *out, st_buf_t *taken_json, const char **why, uint64_t *wait)
{
    /* an answer about seats (409 seats_unavailable included) reflects the latest staged state */
    st_event_t *e = st__event_find(s, id, len, wait);
    if (!e) {
        *why = st__whyf("event \"%.*s%s\" not found", ST__WV(id, len));
        return ST_ENOTFOUND;
    }
    if (nitems < 1 || nitems > ST_SEATS_MAX_PER_BOOKING) {
        *why = st__whyf("a booking holds 1..100 items (got %zu)", nitems);
        return ST_EINVAL;
    }
    size_t want = 0;
    for (size_t i = 0; i < nitems; i++)
        want += items[i].seats ? items[i].nseats : (size_t)items[i].quantity;
    if (want > ST_SEATS_MAX_PER_BOOKING) {
        *why = st__whyf("a booking holds 1..100 seats (got %zu)", want);
        return ST_EINVAL;
    }
    uint32_t idx[ST_SEATS_MAX_PER_BOOKING];
    int64_t now = st_now_us();
    st_booking_t b = {.id = 0,
                      .status = ST_BK_RESERVED,
                      .created_at = now,
                      .expires_at = now + e->hold_seconds * 1000000,
                      .updated_at = now,
                      .event_id = e->id,
                      .event_len = e->id_len,
                      .seats = idx,
                      .owner = owner,
                      .owner_len = owner_len};
    int rc = st__pick_all(s, e, items, nitems, allow_orphans, &b, taken_json, why);
    if (rc) return rc;
    b.id = st_snowflake_next(&s->ids);
    uint64_t w = 0;
    rc = st__save(s, &b, &w);
    if (!rc) rc = st__hold_index(s, b.id, b.expires_at, true, &w);
    if (rc) return rc;
    st__apply_all(s, &b, ST_SEAT_RESERVED, now, &w);
    st__sellout_mark(s, e, now, &w);
    if (*wait < w) *wait = w;
    st__hold_push(s, b.expires_at, b.id);
    if (s->heap.v[0].id == b.id) st__arm_timer(s);
    st_metric_add(s->m_booked, 1);
    st__booking_json(out, s, &b);
    return ST_OK;
}

int st_seats_book(st_seats_t *s, const char *id, size_t len, const char *section, size_t slen,
                  const char *const *seats, const size_t *seat_lens, size_t nseats,
                  int64_t quantity, const char *owner, size_t owner_len, st_buf_t *out,
                  st_buf_t *taken_json, const char **why, uint64_t *wait)
{
    st_seats_item_t it = {section, slen, seats, seat_lens, nseats, quantity};
    return st_seats_book_items(s, id, len, &it, 1, false, owner, owner_len, out, taken_json, why,
                               wait);
}

/* The answer (404/403) reports the booking, so it carries the wait st__load raised. */
int st__check_ref(const st_booking_t *b, const st_booking_ref_t *ref)
{
    if (ref->event_id &&
        (ref->event_len != b->event_len || memcmp(ref->event_id, b->event_id, b->event_len) != 0))
        return ST_ENOTFOUND;
    if (!ref->admin &&
        (ref->subject_len != b->owner_len || memcmp(ref->subject, b->owner, b->owner_len) != 0))
        return ST_EFORBIDDEN;
    return ST_OK;
}

int st__load_live(st_seats_t *s, uint64_t id, const st_booking_ref_t *ref, st_booking_t *b,
                  st_buf_t *keep, uint64_t *wait)
{
    b->seats = NULL;
    int rc = st__load(s, id, b, keep, wait);
    if (!rc) rc = st__check_ref(b, ref);
    if (rc) return rc;
    /* A hold past its time is expired even if the timer has not fired yet. */
    if (b->status == ST_BK_RESERVED && b->expires_at <= st_now_us()) {
        st__release(s, b, ST_BK_EXPIRED, wait);
        st_metric_add(s->m_expired, 1);
    }
    return ST_OK;
}

static int st__booking_finish(st_seats_t *s, uint64_t id, const st_booking_ref_t *ref, int to,
                              st_buf_t *out, uint64_t *wait)
{
    st_buf_t keep = {0};
    st_booking_t b;
    int rc = st__load_live(s, id, ref, &b, &keep, wait);
    if (rc) {
        free(b.seats);
        st_buf_free(&keep);
        if (rc != ST_ENOTFOUND) return rc;
        /* not hot: a finished booking that went cold, final (409 for a change) */
        rc = st__cold_booking(s, id, ref, out, wait);
        return rc == ST_OK && to ? ST_ECONFLICT : rc;
    }
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
        if (!rc) st__apply_all(s, &b, ST_SEAT_SOLD, now, &w);
        if (*wait < w) *wait = w;
        st_metric_add(s->m_confirmed, 1);
    }
    if (rc == ST_OK || rc == ST_ECONFLICT)
        st__booking_json(out, s, &b); /* with a 409 the caller shows the current state */
    free(b.seats);
    st_buf_free(&keep);
    return rc;
}

int st_seats_booking_json(st_seats_t *s, uint64_t id, const st_booking_ref_t *ref, st_buf_t *out,
                          uint64_t *wait)
{
    return st__booking_finish(s, id, ref, 0, out, wait);
}

int st_seats_confirm(st_seats_t *s, uint64_t id, const st_booking_ref_t *ref, st_buf_t *out,
                     uint64_t *wait)
{
    return st__booking_finish(s, id, ref, ST_BK_SOLD, out, wait);
}

int st_seats_cancel(st_seats_t *s, uint64_t id, const st_booking_ref_t *ref, st_buf_t *out,
                    uint64_t *wait)
{
    return st__booking_finish(s, id, ref, ST_BK_CANCELLED, out, wait);
}

/* ---- lifecycle ---- */

/* A failed commit rolled back staged bookings: rebuild the in-memory view from the store. */
static void st__booking_on_failed(st_store_listener_t *l, uint64_t first, int err)
{
    st_seats_t *s = (st_seats_t *)((char *)l - offsetof(st_seats_t, listener));
    (void)first;
    (void)err;
    st__free_events(s);
    s->heap.n = 0;
    s->expire_parked = false;
    st__rebuild(s);
}

int st_seats_open(st_seats_t **out, uv_loop_t *loop, st_store_t *store, const st_seats_opts_t *o)
{
    /* internal.h's layout and history.c's event index */
    static const st_claim_t keys[] = {ST_CLAIM("E"), ST_CLAIM("B"), ST_CLAIM("H"),
                                      ST_CLAIM("S"), ST_CLAIM("V"), ST_CLAIM("K")};
    int rc = st_store_claims(store, "seats", keys, sizeof keys / sizeof *keys);
    if (rc != ST_OK) return rc;
    st_seats_t *s = st_calloc(1, sizeof *s);
    s->loop = loop;
    s->store = store;
    s->opts = *o;
    st_map_init(&s->events);
    st_vec_reserve(&s->sorted, 16);
    st_vec_reserve(&s->heap, 64);
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
    rc = st__rebuild(s);
    if (rc) {
        st_seats_close(s);
        return rc;
    }
    if (s->sorted.n)
        st_info(
            "seats: rebuilt %zu event(s) (seats budget used: %llu), %zu pending hold(s) in %.1f ms",
            s->sorted.n, (unsigned long long)s->total_seats, s->heap.n,
            (double)(st_mono_ns() - t0) / 1e6);
    s->listener.on_failed = st__booking_on_failed;
    s->listener.on_durable = st__booking_on_durable;
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
    st_vec_free(&s->sorted);
    st_vec_free(&s->heap);
    uv_timer_stop(&s->timer);
    uv_idle_stop(&s->idle);
    uv_close((uv_handle_t *)&s->timer, st__on_handle_closed);
    uv_close((uv_handle_t *)&s->idle, st__on_handle_closed);
}
