/* SPDX-License-Identifier: MIT */
/*
 * The booking record and its JSON. Record version 3:
 * u8 version | u8 status | u16 event_len | u16 nitems | u16 owner_len | u32 nseats |
 * i64 price | i64 created | i64 expires | i64 updated | u64 id | event | owner |
 * per item: u16 section_len | u32 n | section | u32 seat[n].
 * Versions 1 and 2 (still read; a booking is rewritten as version 3 when it changes) held one
 * section: the same header with section_len where nitems is, then event | section |
 * u32 seat[nseats] | owner (version 1 had no owner: owner_len was padding, always 0).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define ST__BK_HDR 52 /* fixed part, through the id */

void st__booking_encode(st_buf_t *out, const st_booking_t *b)
{
    uint8_t v = 3, st = (uint8_t)b->status;
    uint16_t el = (uint16_t)b->event_len, ni = (uint16_t)b->nitems;
    uint16_t ol = (uint16_t)b->owner_len;
    st_buf_reset(out);
    st_buf_append(out, &v, 1);
    st_buf_append(out, &st, 1);
    st_buf_append(out, &el, 2);
    st_buf_append(out, &ni, 2);
    st_buf_append(out, &ol, 2);
    st_buf_append(out, &b->nseats, 4);
    st_buf_append(out, &b->total_price, 8);
    st_buf_append(out, &b->created_at, 8);
    st_buf_append(out, &b->expires_at, 8);
    st_buf_append(out, &b->updated_at, 8);
    st_buf_append(out, &b->id, 8);
    st_buf_append(out, b->event_id, b->event_len);
    st_buf_append(out, b->owner, b->owner_len);
    for (size_t i = 0; i < b->nitems; i++) {
        const st_bitem_t *it = &b->items[i];
        uint16_t sl = (uint16_t)it->section_len;
        st_buf_append(out, &sl, 2);
        st_buf_append(out, &it->n, 4);
        st_buf_append(out, it->section, it->section_len);
        st_buf_append(out, b->seats + it->off, (size_t)it->n * 4);
    }
}

static int st__decode_items(const uint8_t *p, size_t n, size_t off, uint16_t ni, st_booking_t *b)
{
    if (ni < 1 || ni > ST_SEATS_MAX_PER_BOOKING) return ST_EINTERNAL;
    b->seats = st_malloc((size_t)b->nseats * 4 + 1);
    uint32_t got = 0;
    for (uint16_t i = 0; i < ni; i++) {
        uint16_t sl;
        uint32_t k;
        if (n - off < 6) goto bad;
        memcpy(&sl, p + off, 2);
        memcpy(&k, p + off + 2, 4);
        off += 6;
        if (k > b->nseats - got || n - off < sl + (size_t)k * 4) goto bad;
        b->items[i] = (st_bitem_t){(const char *)p + off, sl, got, k};
        memcpy(b->seats + got, p + off + sl, (size_t)k * 4);
        off += sl + (size_t)k * 4;
        got += k;
    }
    b->nitems = ni;
    if (off == n && got == b->nseats) return ST_OK;
bad:
    free(b->seats);
    b->seats = NULL;
    return ST_EINTERNAL;
}

int st__booking_decode(const void *v, size_t n, st_booking_t *b)
{
    const uint8_t *p = v;
    if (n < ST__BK_HDR || p[0] < 1 || p[0] > 3) return ST_EINTERNAL;
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
    if (b->nseats > ST_SEATS_MAX_PER_BOOKING * 100u) return ST_EINTERNAL;
    if (p[0] == 3) {
        if (n < off + el + ol) return ST_EINTERNAL;
        b->event_id = (const char *)p + off;
        b->event_len = el;
        b->owner = (const char *)p + off + el;
        b->owner_len = ol;
        return st__decode_items(p, n, off + el + ol, sl, b);
    }
    if (n != off + el + sl + (size_t)b->nseats * 4 + ol) return ST_EINTERNAL;
    b->event_id = (const char *)p + off;
    b->event_len = el;
    b->items[0] = (st_bitem_t){(const char *)p + off + el, sl, 0, b->nseats};
    b->nitems = 1;
    b->owner = (const char *)p + off + el + sl + (size_t)b->nseats * 4;
    b->owner_len = ol;
    b->seats = st_malloc((size_t)b->nseats * 4 + 1);
    memcpy(b->seats, p + off + el + sl, (size_t)b->nseats * 4);
    return ST_OK;
}

size_t st__bkey(uint8_t key[9], uint64_t id, char ks)
{
    key[0] = (uint8_t)ks;
    st_be64_put(key + 1, id); /* keys sort by id, i.e. by time */
    return 9;
}

int st__load(st_seats_t *s, uint64_t id, st_booking_t *b, st_buf_t *keep, uint64_t *wait)
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

int st__save(st_seats_t *s, const st_booking_t *b, uint64_t *wait)
{
    uint8_t key[9];
    st_buf_t rec = {0};
    st__booking_encode(&rec, b);
    int rc =
        st_store_put(s->store, key, st__bkey(key, b->id, ST_KS_BOOKING), rec.data, rec.len, wait);
    st_buf_free(&rec);
    if (rc == ST_OK) rc = st__history_put(s, b, wait); /* the event's index, same batch */
    return rc;
}

int st__item_of(const st_booking_t *b, const char *section, size_t len)
{
    for (size_t i = 0; i < b->nitems; i++)
        if (b->items[i].section_len == len && memcmp(b->items[i].section, section, len) == 0)
            return (int)i;
    return -1;
}

/* The seat names of one item ([] in a general admission section). */
static void st__item_seats(st_buf_t *out, const st_booking_t *b, const st_bitem_t *it,
                           const st_section_t *sec)
{
    st_buf_appendc(out, '[');
    for (uint32_t i = 0; sec && !sec->ga && i < it->n; i++) {
        if (i) st_buf_appendc(out, ',');
        st__seat_name(out, sec, b->seats[it->off + i]);
    }
    st_buf_appendc(out, ']');
}

void st__booking_json(st_buf_t *out, st_seats_t *s, const st_booking_t *b)
{
    static const char *names[] = {"", "reserved", "sold", "cancelled", "expired"};
    st_event_t *e = st__event_find(s, b->event_id, b->event_len, NULL);
    st_buf_puts(out, "{\"booking_id\":\"");
    st_buf_append_u64(out, b->id);
    st_buf_puts(out, "\",\"event_id\":");
    st_buf_append_json_str(out, b->event_id, b->event_len);
    const st_bitem_t *first = &b->items[0];
    const st_section_t *fsec = e ? st__section_find(e, first->section, first->section_len) : NULL;
    st_buf_puts(out, ",\"section\":");
    st_buf_append_json_str(out, first->section, first->section_len);
    st_buf_puts(out, ",\"seats\":");
    st__item_seats(out, b, first, fsec);
    st_buf_puts(out, ",\"items\":[");
    for (size_t i = 0; i < b->nitems; i++) {
        const st_bitem_t *it = &b->items[i];
        const st_section_t *sec = e ? st__section_find(e, it->section, it->section_len) : NULL;
        st_buf_puts(out, i ? ",{\"section\":" : "{\"section\":");
        st_buf_append_json_str(out, it->section, it->section_len);
        st_buf_puts(out, ",\"seats\":");
        st__item_seats(out, b, it, sec);
        st_buf_printf(out, ",\"quantity\":%u}", it->n);
    }
    st_buf_printf(out,
                  "],\"status\":\"%s\",\"total_price\":%lld,\"created_at\":%lld,"
                  "\"expires_at\":%lld",
                  b->status >= 1 && b->status <= 4 ? names[b->status] : "unknown",
                  (long long)b->total_price, (long long)b->created_at, (long long)b->expires_at);
    /* owner and finished_at as the cold tier stores them (tier.c): the subject that booked it
     * ("" when auth was off), and the record's updated_at once it is sold, cancelled or expired
     * (a finished booking never changes again); null while reserved. */
    st_buf_puts(out, ",\"owner\":");
    st_buf_append_json_str(out, b->owner ? b->owner : "", b->owner ? b->owner_len : 0);
    if (b->status == ST_BK_RESERVED)
        st_buf_puts(out, ",\"finished_at\":null}");
    else
        st_buf_printf(out, ",\"finished_at\":%lld}", (long long)b->updated_at);
}
