/* SPDX-License-Identifier: MIT */
/*
 * Holds that behave like a shopping cart (SPEC §4.1): a reserved booking is extended (up to
 * max_hold_seconds since it was created) or its seats are changed, all or nothing. Each change
 * rewrites the booking record, stages the seat-map chunks it touched and, for an extension, the
 * hold index entry with the new time in the same batch (persist.c), so a restart, a replica or
 * a restored backup expires the hold at its new time; the expiry heap gets a new entry and
 * skips the old one when it comes up (the booking is not yet due then).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static int64_t st__max_hold_us(const st_seats_t *s)
{
    return (s->opts.max_hold_seconds > 0 ? s->opts.max_hold_seconds : 7200) * 1000000;
}

/* The booking, which must still be reserved to be extended or changed: ST_ECONFLICT (with the
 * booking as it is in out) otherwise. keep holds what b points into (the caller frees it). */
static int st__load_reserved(st_seats_t *s, uint64_t id, const st_booking_ref_t *ref,
                             st_booking_t *b, st_buf_t *keep, st_buf_t *out, uint64_t *wait)
{
    int rc = st__load_live(s, id, ref, b, keep, wait);
    if (rc == ST_ENOTFOUND) { /* a cold booking is finished: 409 with it as it is */
        rc = st__cold_booking(s, id, ref, out, wait);
        return rc == ST_OK ? ST_ECONFLICT : rc;
    }
    if (rc == ST_OK && b->status != ST_BK_RESERVED) {
        st__booking_json(out, s, b);
        rc = ST_ECONFLICT;
    }
    return rc;
}

int st_seats_extend(st_seats_t *s, uint64_t id, const st_booking_ref_t *ref, int64_t seconds,
                    st_buf_t *out, const char **why, uint64_t *wait)
{
    st_buf_t keep = {0};
    st_booking_t b;
    int rc = st__load_reserved(s, id, ref, &b, &keep, out, wait);
    if (rc) goto done;
    int64_t at = b.expires_at + seconds * 1000000;
    if (seconds < 1 || at - b.created_at > st__max_hold_us(s)) {
        *why = "a hold lasts at most --max-hold-seconds since the booking was created";
        rc = ST_EINVAL;
        goto done;
    }
    b.expires_at = at;
    b.updated_at = st_now_us();
    uint64_t w = 0;
    rc = st__save(s, &b, &w);
    if (!rc) rc = st__hold_index(s, b.id, b.expires_at, true, &w);
    if (rc) goto done;
    st_event_t *e = st__event_find(s, b.event_id, b.event_len, NULL);
    if (e && e->last_batch < w) e->last_batch = w;
    if (*wait < w) *wait = w;
    st__hold_push(s, b.expires_at, b.id);
    st__booking_json(out, s, &b);
done:
    free(b.seats);
    st_buf_free(&keep);
    return rc;
}

/* The seats of item k that stay (not in rm[0..nrm)), the item's others dropped. */
static size_t st__cart_keep(const st_booking_t *b, size_t k, const uint32_t *rm, size_t nrm,
                            uint32_t *out)
{
    size_t n = 0;
    for (uint32_t i = 0; i < b->items[k].n; i++) {
        uint32_t seat = b->seats[b->items[k].off + i];
        bool gone = false;
        for (size_t j = 0; j < nrm && !gone; j++)
            gone = rm[j] == seat;
        if (!gone) out[n++] = seat;
    }
    return n;
}

/* Which seats of item k (-1: none) go back: named ones, or the last `quantity` places. */
static int st__removals(const st_section_t *sec, const st_booking_t *b, int k,
                        const st_seats_change_t *ch, uint32_t *rm, size_t *nrm, const char **why)
{
    const st_bitem_t *it = k >= 0 ? &b->items[k] : NULL;
    size_t want = ch->nremove + (size_t)ch->remove_quantity;
    *nrm = 0;
    if (!want) return ST_OK;
    if (!it || want > it->n) {
        *why = st__whyf("seats to remove must be seats of this booking (it holds %u in section "
                        "\"%.*s%s\", %zu asked)",
                        it ? it->n : 0u, ST__WV(sec->name, sec->name_len), want);
        return ST_EINVAL;
    }
    if (ch->remove_quantity) {
        if (ch->nremove || !sec->ga) {
            *why = st__whyf("remove_quantity gives back places of a general admission section "
                            "(section \"%.*s%s\" is %s)",
                            ST__WV(sec->name, sec->name_len),
                            sec->ga ? "general admission: give remove_quantity alone" : "seated");
            return ST_EINVAL;
        }
        for (size_t i = 0; i < want; i++)
            rm[(*nrm)++] = b->seats[it->off + it->n - 1 - i];
        return ST_OK;
    }
    for (size_t i = 0; i < ch->nremove; i++) {
        uint32_t seat;
        bool held = false;
        if (sec->ga || st__parse_seat(sec, ch->remove[i], ch->remove_lens[i], &seat)) {
            *why = st__whyf("seat \"%.*s%s\" to remove is not a \"row-col\" seat of section "
                            "\"%.*s%s\"",
                            ST__WV(ch->remove[i], ch->remove_lens[i]),
                            ST__WV(sec->name, sec->name_len));
            return ST_EINVAL;
        }
        for (uint32_t j = 0; j < it->n && !held; j++)
            held = b->seats[it->off + j] == seat;
        for (size_t j = 0; j < *nrm && held; j++)
            held = rm[j] != seat;
        if (!held) {
            *why = st__whyf("seat \"%.*s%s\" to remove is not held by this booking (or is listed "
                            "twice)",
                            ST__WV(ch->remove[i], ch->remove_lens[i]));
            return ST_EINVAL;
        }
        rm[(*nrm)++] = seat;
    }
    return ST_OK;
}

/* The booking with item k's seats changed (k == nitems: a new item for sec), into nb whose
 * seats array is `seats`. Items left empty are dropped. */
static void st__rebuild_items(const st_booking_t *b, size_t k, st_section_t *sec,
                              const uint32_t *rm, size_t nrm, const uint32_t *add, size_t nadd,
                              st_booking_t *nb, uint32_t *seats, st_event_t *e)
{
    *nb = *b;
    nb->seats = seats;
    nb->nitems = 0;
    nb->total_price = 0;
    uint32_t total = 0;
    for (size_t i = 0; i <= b->nitems; i++) {
        if (i == b->nitems && k != b->nitems) break;
        uint32_t n = 0;
        if (i < b->nitems)
            n = i == k ? (uint32_t)st__cart_keep(b, i, rm, nrm, seats + total)
                       : (memcpy(seats + total, b->seats + b->items[i].off, b->items[i].n * 4u),
                          b->items[i].n);
        if (i == k) {
            memcpy(seats + total + n, add, nadd * 4);
            n += (uint32_t)nadd;
        }
        if (!n) continue;
        const char *name = i < b->nitems ? b->items[i].section : sec->name;
        size_t len = i < b->nitems ? b->items[i].section_len : sec->name_len;
        st_section_t *is = st__section_find(e, name, len);
        nb->items[nb->nitems++] = (st_bitem_t){name, len, total, n};
        nb->total_price += is ? is->price * (int64_t)n : 0;
        total += n;
    }
    nb->nseats = total;
}

/* Checks and picks a change (nothing changes yet): rm/add and the item index k. */
static int st__cart_plan(st_seats_t *s, st_event_t *e, const st_booking_t *b,
                         const st_seats_change_t *ch, st_section_t **psec, size_t *pk, uint32_t *rm,
                         size_t *nrm, uint32_t *add, size_t *nadd, st_buf_t *taken_json,
                         const char **why)
{
    const char *name = ch->section ? ch->section : b->items[0].section;
    size_t len = ch->section ? ch->section_len : b->items[0].section_len;
    st_section_t *sec = st__section_find(e, name, len);
    if (!sec) {
        *why = st__whyf("section \"%.*s%s\" not found in event \"%.*s%s\"", ST__WV(name, len),
                        ST__WV(e->id, e->id_len));
        return ST_ENOTFOUND;
    }
    int k = st__item_of(b, name, len);
    int rc = st__removals(sec, b, k, ch, rm, nrm, why);
    if (rc) return rc;
    size_t want = ch->nadd + (size_t)ch->add_quantity;
    if (b->nseats - *nrm + want > ST_SEATS_MAX_PER_BOOKING) {
        *why = st__whyf("a booking holds at most 100 seats (it would hold %zu)",
                        b->nseats - *nrm + want);
        return ST_EINVAL;
    }
    *nadd = 0;
    if (want) {
        st_seats_item_t it = {name,         len,      ch->nadd ? ch->add : NULL,
                              ch->add_lens, ch->nadd, ch->add_quantity};
        st_buf_t one = {0};
        size_t nt = 0;
        rc = st__pick(sec, &it, ch->allow_orphans, add, nadd, &one, &nt, why);
        /* named seats are all parsed, taken or not: one of them also removed is a bad request,
         * not a taken seat (it is taken, by this booking) */
        size_t named = rc == ST_ESEATS ? ch->nadd : rc == ST_OK ? *nadd : 0;
        for (size_t i = 0; i < named; i++)
            for (size_t j = 0; j < *nrm; j++)
                if (rm[j] == add[i]) {
                    *why = i < ch->nadd ? st__whyf("seat \"%.*s%s\" is both added and removed",
                                                   ST__WV(ch->add[i], ch->add_lens[i]))
                                        : "a seat is both added and removed";
                    rc = ST_EINVAL;
                }
        if (rc == ST_ESEATS) {
            st_buf_puts(taken_json, "\"seats\":[");
            st_buf_append(taken_json, one.data, one.len);
            st_buf_puts(taken_json, "],\"items\":[{\"section\":");
            st_buf_append_json_str(taken_json, sec->name, sec->name_len);
            st_buf_puts(taken_json, ",\"seats\":[");
            st_buf_append(taken_json, one.data, one.len);
            st_buf_puts(taken_json, "]}]");
            st_metric_add(s->m_conflicts, 1);
        }
        st_buf_free(&one);
        if (rc) return rc;
    }
    *psec = sec;
    *pk = k >= 0 ? (size_t)k : b->nitems;
    return ST_OK;
}

/* Stages the changed booking and moves the seats; giving back every seat cancels it. */
static int st__cart_commit(st_seats_t *s, st_event_t *e, st_booking_t *b, st_section_t *sec,
                           size_t k, const uint32_t *rm, size_t nrm, const uint32_t *add,
                           size_t nadd, uint64_t *wait)
{
    uint32_t seats[ST_SEATS_MAX_PER_BOOKING];
    st_booking_t nb;
    if (b->nseats == nrm && !nadd) {
        st_metric_add(s->m_cancelled, 1);
        return st__release(s, b, ST_BK_CANCELLED, wait); /* keeps the seats it held */
    }
    st__rebuild_items(b, k, sec, rm, nrm, add, nadd, &nb, seats, e);
    int64_t now = st_now_us();
    nb.updated_at = now;
    uint64_t w = 0;
    int rc = st__save(s, &nb, &w);
    if (rc) return rc;
    st__move(s, e, sec, rm, nrm, ST_SEAT_AVAILABLE, now, &w);
    st__move(s, e, sec, add, nadd, ST_SEAT_RESERVED, now, &w);
    if (nadd) st__sellout_mark(s, e, now, &w);
    if (e->last_batch < w) e->last_batch = w;
    /* one message: a subscriber never sees the seats given back without those taken */
    st_seatmove_t mv[2] = {{rm, nrm, ST_SEAT_AVAILABLE}, {add, nadd, ST_SEAT_RESERVED}};
    st__notify(s, e, sec, mv, 2, w);
    if (*wait < w) *wait = w;
    /* the caller renders b: it takes the new shape (its seats array is the caller's) */
    memcpy(b->seats, seats, nb.nseats * 4u);
    nb.seats = b->seats;
    *b = nb;
    return ST_OK;
}

int st_seats_change(st_seats_t *s, uint64_t id, const st_booking_ref_t *ref,
                    const st_seats_change_t *ch, st_buf_t *out, st_buf_t *taken_json,
                    const char **why, uint64_t *wait)
{
    st_buf_t keep = {0};
    st_booking_t b;
    int rc = st__load_reserved(s, id, ref, &b, &keep, out, wait);
    if (rc) goto done;
    st_event_t *e = st__event_find(s, b.event_id, b.event_len, wait);
    if (!e) {
        rc = ST_ENOTFOUND;
        goto done;
    }
    uint32_t rm[ST_SEATS_MAX_PER_BOOKING], add[ST_SEATS_MAX_PER_BOOKING];
    size_t nrm = 0, nadd = 0, k = 0;
    st_section_t *sec = NULL;
    rc = st__cart_plan(s, e, &b, ch, &sec, &k, rm, &nrm, add, &nadd, taken_json, why);
    if (rc) goto done;
    /* b.seats has room for the new shape: decode allocated nseats, so grow it first */
    b.seats = st_realloc(b.seats, ST_SEATS_MAX_PER_BOOKING * sizeof *b.seats);
    rc = st__cart_commit(s, e, &b, sec, k, rm, nrm, add, nadd, wait);
    if (!rc) st__booking_json(out, s, &b);
done:
    free(b.seats);
    st_buf_free(&keep);
    return rc;
}
